"""The dispatch tests drive the runner's test app (``runnertest`` beside the
runner's tests) and, for the reserve, the worker's process helpers."""

import sys
from pathlib import Path

INTEGRATION = Path(__file__).resolve().parents[1]
for helpers in ("runner", "worker"):
    if str(INTEGRATION / helpers) not in sys.path:
        sys.path.insert(0, str(INTEGRATION / helpers))
