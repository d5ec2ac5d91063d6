"""JSON encoding as kombu's serializer does it, without per-call set-up."""

from __future__ import annotations

import json.encoder
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

from kombu.utils.json import JSONEncoder

#: A value whose encoding exercises what an encoder may do differently
#: (non-ASCII text, escapes, floats, big integers, nesting, key order).
PROBE: Any = (
    (1, 'h\u00e9 \u2603 "q" \\ \n', 1.5, -0.0, 10**20, [None, True, False]),
    {"z": {"b": [], "a": {}}, "\u00e9": "x"},
    {"callbacks": None, "errbacks": None},
)


def one_shot_encoder(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode`` without its per-call set-up.

    ``JSONEncoder.encode`` builds a new C encoder for every call, which is
    half of the cost of encoding a small value; this builds it once. It
    does not look for circular references (no JSON-decoded value has one;
    a circular value ends in ``RecursionError``). Falls back to
    ``encoder.encode`` when the C encoder is missing or encodes the probe
    differently."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None or encoder.indent is not None or encoder.ensure_ascii is not True:
        return encoder.encode
    try:
        encode = make(
            None,
            encoder.default,
            encode_basestring_ascii,
            None,
            encoder.key_separator,
            encoder.item_separator,
            encoder.sort_keys,
            encoder.skipkeys,
            encoder.allow_nan,
        )
    except TypeError:  # another signature: not this interpreter's encoder
        return encoder.encode

    def encode_value(value: Any) -> str:
        return "".join(encode(value, 0))

    same = encode_value(PROBE) == encoder.encode(PROBE)
    return encode_value if same else encoder.encode


#: ``kombu.utils.json.dumps`` (the ``json`` serializer's encoder), faster.
encode_json = one_shot_encoder(JSONEncoder())
