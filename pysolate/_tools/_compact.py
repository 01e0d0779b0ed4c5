"""Compact JSON text of tagged values and broker messages, from one encoder built once.

``json.JSONEncoder.encode`` builds a new C encoder object on every call (``iterencode``
with ``_one_shot``); on the broker path, which encodes a call key, a result size and a
reply frame per call, that construction is most of what encoding a small value costs.
``compact`` calls one C encoder made once with the same options, so its text is exactly
``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode``'s
(``tests/pysolate/test_compact.py`` checks this on generated values).

The one option it cannot share across calls is the circular-reference check (its table of
containers being encoded is per call, and is left dirty by an exception), so the shared
encoder has none. Every value given to ``compact`` is a tagged form (``occurrences.plain``)
or a message built of them and of the Host's own constants: freshly built trees, which
cannot contain a cycle. (``_guest._wire`` makes the same encoder for frames: the Guest child
reads only its own sources, so it cannot import this module.)
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable, Sequence

_MAKE: Callable[..., Callable[[object, int], Sequence[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)
"""The C encoder's constructor (None where the interpreter has no C accelerator)."""

_REFERENCE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

_C_ENCODER = (
    None
    if _MAKE is None
    else _MAKE(
        None,  # no circular check: the inputs are acyclic (see above)
        _REFERENCE.default,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # indent
        _REFERENCE.key_separator,
        _REFERENCE.item_separator,
        False,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )
)


def compact(value: object) -> str:
    """The compact JSON text of the acyclic ``value`` (the reference encoder's, exactly).

    Raises what the reference raises: ``TypeError`` for a value JSON cannot hold,
    ``ValueError`` for a non-finite float.
    """
    if _C_ENCODER is None or type(value) is str:
        return _REFERENCE.encode(value)
    return "".join(_C_ENCODER(value, 0))
