"""Call keys: the exact identity a claim is checked against.

A Guest call claims an early result only when its key equals the early work's key
(DESIGN.md, contract 3). The key must therefore distinguish everything a tool could tell
apart: ``1``, ``1.0`` and ``True`` compare equal in Python but are different arguments, as
are ``(1, 2)`` and ``[1, 2]``, and ``0.0`` and ``-0.0``. The tagged plain form
(``_plain.dumps``) has exactly that resolution.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from ._plain import dumps


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

    def __init__(self, capability: str, method: str, version: str, arguments: str, view: str) -> None:
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
    getattr(CallKey, name).__set__ for name in ("capability", "method", "version", "arguments", "view")
)
"""The slots' own setters (member descriptors), which a frozen class's ``__setattr__`` does not guard."""


def canonical(value: object) -> str:
    """Type-tagged canonical text of a plain value; raises ``NotPlain`` for anything else."""
    return dumps(value)


def canonical_arguments(arguments: Mapping[str, object]) -> str:
    """Canonical text of arguments bound to parameter names (keyword order does not matter)."""
    return dumps({name: arguments[name] for name in sorted(arguments)})
