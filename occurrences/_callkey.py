"""Call keys: the exact identity a claim is checked against.

A Guest call claims an early result only when its key equals the early work's key
(docs/contract.md, rule 3). The key must therefore distinguish everything a tool could tell
apart: ``1``, ``1.0`` and ``True`` compare equal in Python but are different arguments, as
are ``(1, 2)`` and ``[1, 2]``, and ``0.0`` and ``-0.0``. The tagged plain form
(``plain.dumps``) has exactly that resolution.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .plain import ENCODER, dumps, to_tagged

KEY_INLINE_CHARS = 4096
"""Longest tagged text of one argument a call key holds as it is. A longer one is held as
its digest, ``["#", kind, length, sha256]`` (``argument_text``; an int is always held as
it is): exact in practice (equal
digests, equal arguments) and small, so a key, and every receipt and claim table that holds
one, costs the same for a 7 MiB argument as for a short one, and keying a long str needs
no escaped copy of it."""


@dataclass(frozen=True, slots=True, init=False)
class CallKey:
    """(capability, method, capability version, canonical arguments, root/view id).

    The broker makes one per Guest call, so ``__init__`` is written out: it sets each slot
    through its descriptor, where the frozen dataclass's generated one calls
    ``object.__setattr__`` per field (twice the cost). Everything else (equality, hash,
    repr, ordering refused, frozen, ``dataclasses.fields``/``replace``) is the dataclass's.
    """

    capability: str
    method: str
    version: str
    arguments: str  # canonical_arguments(bound arguments)
    view: str

    def __init__(
        self, capability: str, method: str, version: str, arguments: str, view: str
    ) -> None:
        _set_capability(self, capability)
        _set_method(self, method)
        _set_version(self, version)
        _set_arguments(self, arguments)
        _set_view(self, view)

    def digest(self) -> str:
        """A short stable hash, for traces and logs."""
        raw = "\x1f".join((self.capability, self.method, self.version, self.arguments, self.view))
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


_set_capability, _set_method, _set_version, _set_arguments, _set_view = (
    getattr(CallKey, name).__set__
    for name in ("capability", "method", "version", "arguments", "view")
)
"""The slots' own setters (member descriptors), which a frozen class's ``__setattr__`` does not guard."""


def canonical(value: object) -> str:
    """Type-tagged canonical text of a plain value; raises ``NotPlain`` for anything else."""
    return dumps(value)


def canonical_arguments(arguments: Mapping[str, object]) -> str:
    """Canonical text of arguments bound to parameter names (keyword order does not matter):
    the tagged text of the dict of them in name order, each argument as ``argument_text``
    writes it. Raises ``NotPlain`` for a value that is not plain data."""
    pieces = [
        f"[{ENCODER.encode(['s', name])},{argument_text(to_tagged(arguments[name]), ENCODER.encode)}]"
        for name in sorted(arguments)
    ]
    return f'["d",[{",".join(pieces)}]]'


class KeyPiece:
    """An argument's call-key text, already made (``argument_text`` returns it as it is):
    what the frame decoder writes while it decodes a large frame (``pysolate._guest._reader``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def argument_text(tag: object, encode: Callable[[object], str]) -> str:
    """The text of one argument's tagged form ``tag`` in a call key: its compact JSON
    (``encode``), or past ``KEY_INLINE_CHARS`` its digest (see there). A ``str`` or
    ``bytes`` is digested from its content without being escaped first; anything else from
    its tagged text."""
    if type(tag) is KeyPiece:
        return tag.text
    assert isinstance(tag, list)
    kind = tag[0]
    if kind == "i":
        return encode(tag)  # at most MAX_INT_DIGITS: held as it is, whatever its length
    if kind == "s" or kind == "y":
        body = tag[1]
        assert isinstance(body, str)
        if len(body) <= KEY_INLINE_CHARS // 6:  # shorter than any escaping can make too long
            return encode(tag)
        if len(body) > KEY_INLINE_CHARS:
            return _digest(kind, len(body), body.encode("utf-8"))
    text = encode(tag)
    return text if len(text) <= KEY_INLINE_CHARS else _digest("", len(text), text.encode("utf-8"))


def _digest(kind: str, length: int, content: bytes) -> str:
    return f'["#","{kind}",{length},"{hashlib.sha256(content).hexdigest()}"]'
