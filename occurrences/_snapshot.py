"""The accepted complete-prefix snapshot."""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The longest run of top-level statements that no later text can change.

    Snapshots of one stream only grow: each one's ``statements`` starts with all of the
    previous one's. ``statements[first_new:]`` are the statements this snapshot added.
    Every statement equals, node for node and position for position, the matching statement
    of ``ast.parse(final_source)``.
    """

    statements: tuple[ast.stmt, ...]
    source: str  # the text the statements cover, from the start of the stream
    first_new: int = 0

    @property
    def end(self) -> int:
        """Length in characters of ``source``."""
        return len(self.source)

    @property
    def new_statements(self) -> tuple[ast.stmt, ...]:
        return self.statements[self.first_new :]
