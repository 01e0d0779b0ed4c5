"""The broker's framing: one length-prefixed JSON object per frame, on a dedicated socket.

Both ends import this module, so it is stdlib-only and cheap to import: the Guest child
loads it before anything else. A frame is a 4-byte big-endian unsigned length followed by
that many bytes of JSON in UTF-8 (lone surrogates passed through; an object with a ``"t"`` field naming the message). Plain
values inside messages travel in the tagged form of ``occurrences.plain``. Never pickle:
decoding a frame must not be able to run code.

Messages (H = Host, G = Guest child)::

    H→G  init    {"t": "init", "capabilities": {name: [method, ...]}, "limits": {...},
                  "seccomp": path-or-null, "scratch_only_writes": bool}
    G→H  ready   {"t": "ready", "mechanisms": [str, ...]}
    H→G  run     {"t": "run", "source": str}
    G→H  call    {"t": "call", "capability": str, "method": str, "args": tagged, "kwargs": tagged}
    H→G  result  {"t": "result", "id": int, "value": tagged}
    H→G  failure {"t": "failure", "id": int, "type": str, "message": str, "args": tagged}
    G→H  done    {"t": "done", "status": "ok"|"error"|"limit", "value": tagged|null,
                  "error": {"type": str, "message": str, "line": int|null}|null}

A session's child gets turns instead of one run, each answered by ``turn_done`` (then it
waits for the next ``turn``, in the same globals)::

    H→G  turn      {"t": "turn", "source": str, "output_bytes": int}
    G→H  turn_done {"t": "turn_done", ...done's fields..., "stdout": str,
                    "known": {name: tagged}, "opaque": [name, ...]}

Call ids are chosen by the Host alone (its count of calls so far); the Guest never sends one.
"""

from __future__ import annotations

import json
import json.encoder
import struct
from collections.abc import Callable, Mapping, Sequence

_MAKE: Callable[..., Callable[[object, int], Sequence[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)

HEADER = struct.Struct(">I")
"""Frame header: the payload length in bytes."""

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""Built once: ``json.dumps`` with options builds a new encoder per call (per frame)."""

_C_ENCODE = (
    None
    if _MAKE is None
    else _MAKE(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
)
"""``_ENCODER``'s own C encoder, made once rather than per frame by ``encode`` (see
``pysolate._tools._compact``, the Host's twin, which this child-readable module cannot import):
without the circular-reference check, as every message is built fresh of tagged values."""


def encode_frame(message: Mapping[str, object]) -> bytes:
    """Header plus compact JSON payload of ``message``.

    ``surrogatepass``: a lone surrogate is a valid ``str`` (``os.fsdecode`` makes them), so
    it must cross; ``json.loads`` of bytes decodes with the same handler.
    """
    text = _ENCODER.encode(message) if _C_ENCODE is None else "".join(_C_ENCODE(message, 0))
    payload = text.encode("utf-8", "surrogatepass")
    return HEADER.pack(len(payload)) + payload
