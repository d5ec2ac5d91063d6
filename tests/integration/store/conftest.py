"""The store's own tests build their tasks as the store contract does
(``make_task`` in ``contract/test_store_contract.py``)."""

import sys
from pathlib import Path

CONTRACT = Path(__file__).resolve().parents[1] / "contract"
if str(CONTRACT) not in sys.path:
    sys.path.insert(0, str(CONTRACT))
