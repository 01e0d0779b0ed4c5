"""What a capability method may do, as the Host declares it."""

from __future__ import annotations

import enum


class Effect(enum.StrEnum):
    """The effect class of a capability method (docs/contract.md, rule 2).

    Only the Host qualifies a method; nothing in the Guest's source or in AST analysis
    grants an effect. The default is ``UNKNOWN``.
    """

    PURE = "pure"
    """Result depends only on the arguments; no side effect."""
    IMMUTABLE_READ = "immutable_read"
    """Reads state that cannot change during the run (a frozen root)."""
    LIVE_READ = "live_read"
    """Reads state that may change (a clock, a live service): never early."""
    WRITE = "write"
    """Changes state: never early, never replayed."""
    UNKNOWN = "unknown"
    """Not qualified: treated as a write."""

    @property
    def speculable(self) -> bool:
        """True only for the effects the speculative lane may ever run early."""
        return self in (Effect.PURE, Effect.IMMUTABLE_READ)

    @property
    def may_write(self) -> bool:
        """True when a call may change what later reads of its capability see."""
        return self in (Effect.WRITE, Effect.UNKNOWN)
