"""``UNKNOWN``: the value of a name bound to something the Host cannot know.

Discovery binds names to it (a call's result not yet in, a value mutated by code it does
not follow); the evaluator refuses to read it. A name bound to ``UNKNOWN`` still shadows a
builtin of the same name, which is why it is a value in ``env`` and not an absent key.
"""

from __future__ import annotations

from typing import Final


class _Unknown:
    """Type of ``UNKNOWN``: a binding whose value the Host cannot know."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> str:
        return "UNKNOWN"  # copies and pickles stay the one sentinel, so `is UNKNOWN` holds


UNKNOWN: Final = _Unknown()
"""Bind a name to this in ``env`` when it is bound to a value the Host does not know.

The name still shadows any builtin of the same name; reading it gives ``NotKnown``.
"""
