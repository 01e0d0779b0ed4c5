"""Which part of a capability's state a call touches: declared scopes, and the writes so far.

A Host may declare on a method that it reads or writes only the state named by one of its
arguments (``MethodSpec.scope``, e.g. the workspace's ``path``). Discovery then keeps,
along one timeline, which scopes of each capability may have been written (``Written``):
a later read is pre-write unless a write before it may overlap it. Without a declared
scope, or with a scope whose value is not known exactly, a write touches everything - the
rule before scopes existed.

Scope values are compared as relative POSIX paths: normalized the way the workspace does
(empty and ``.`` components dropped), then two scopes overlap when they are equal or one
is a directory prefix of the other (so a directory scope overlaps every path under it).
Anything odd - not a str, empty, the root, absolute, a ``..`` component, a trailing
slash, a backslash or a NUL - overlaps everything. Erring towards "overlaps" only costs
a read that is not tried early; the claim is the gate (docs/contract.md, rule 3).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_WRITTEN_SCOPES = 64
"""Most distinct scopes kept per capability along one timeline; one more and the
capability counts as written everywhere (keeps each read's overlap check short)."""


def scope_path(value: object) -> str | None:
    """The normalized path ``value`` names as a scope, or None when it is odd (overlaps
    everything)."""
    if type(value) is not str or value.startswith("/") or value.endswith("/"):
        return None
    if "\\" in value or "\0" in value:
        return None
    parts = [part for part in value.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def overlaps(a: str | None, b: str | None) -> bool:
    """Whether state at scope ``a`` may be state at scope ``b`` (both from ``scope_path``)."""
    if a is None or b is None:
        return True
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _above(path: str) -> Iterable[str]:
    """The directories above ``path``, nearest first (``a/b/c``: ``a/b``, ``a``)."""
    end = path.rfind("/")
    while end > 0:
        yield path[:end]
        end = path.rfind("/", 0, end)


class Everything:
    """The marker of a capability that may have been written anywhere."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EVERYTHING"


EVERYTHING = Everything()


@dataclass(frozen=True, slots=True)
class Paths:
    """The scopes written on one capability (false when none), and every directory above
    one of them: a read overlaps them when its scope is one of either, or lies under a
    written one - a lookup per component of its path, whatever the number of writes."""

    written: frozenset[str] = frozenset()
    above: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.written)

    def __len__(self) -> int:
        return len(self.written)

    def plus(self, scope: str) -> Paths:
        return Paths(self.written | {scope}, self.above.union(_above(scope)))

    def may_see(self, scope: str | None) -> bool:
        if not self.written:
            return False
        if scope is None or scope in self.written or scope in self.above:
            return True
        return any(d in self.written for d in _above(scope))


Prior = Paths | Everything
"""The writes that precede a call on its capability, or ``EVERYTHING``. Immutable, so a
call may keep it to decide later."""


def may_see(prior: Prior, scope: str | None) -> bool:
    """Whether a read of ``scope`` (``None``: odd or undeclared) may see one of ``prior``."""
    return True if isinstance(prior, Everything) else prior.may_see(scope)


class Written:
    """Which state of each capability may have been written so far, on one timeline.

    Shared by every context of the timeline (a loop body, a branch, an expanded function
    write into it); ``copy`` starts a timeline of its own (deferred expansions).
    """

    __slots__ = ("_priors",)

    def __init__(self, priors: dict[str, Prior] | None = None) -> None:
        # Invariant: a capability absent from _priors has not been written; a Paths entry
        # holds at most MAX_WRITTEN_SCOPES scopes.
        self._priors: dict[str, Prior] = {} if priors is None else priors

    def prior(self, capability: str) -> Prior:
        """What was written on ``capability`` so far."""
        return self._priors.get(capability, _NONE)

    def add(self, capability: str) -> None:
        """``capability`` may have been written anywhere."""
        self._priors[capability] = EVERYTHING

    def update(self, capabilities: Iterable[str]) -> None:
        for capability in capabilities:
            self.add(capability)

    def add_scoped(self, capability: str, scope: str | None) -> None:
        """``capability`` may have been written at ``scope`` (``None``: anywhere)."""
        prior = self.prior(capability)
        if scope is None:
            self.add(capability)
        elif not isinstance(prior, Everything) and scope not in prior.written:
            grown = prior.plus(scope)
            self._priors[capability] = grown if len(grown) <= MAX_WRITTEN_SCOPES else EVERYTHING

    def copy(self) -> Written:
        return Written(dict(self._priors))


_NONE = Paths()
