"""The accepted complete-prefix snapshot.

A stream of N top-level statements produces up to N snapshots; copying every earlier
statement and all the accepted text into each one would make a stream quadratic. So the
prefix parser builds snapshots as *views*: each holds the parser's append-only statement
list with a count, and a way to read the text, and materializes ``statements`` and
``source`` only when asked. ``new_statements`` costs only the statements it returns.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence


class Snapshot:
    """The longest run of top-level statements that no later text can change.

    Snapshots of one stream only grow: each one's ``statements`` starts with all of the
    previous one's. ``statements[first_new:]`` are the statements this snapshot added.
    Every statement equals, node for node and position for position, the matching statement
    of ``ast.parse(final_source)``. Immutable once built.
    """

    __slots__ = ("_count", "_end", "_items", "_source", "_text", "first_new")

    def __init__(self, statements: Sequence[ast.stmt], source: str, first_new: int = 0) -> None:
        self._items: Sequence[ast.stmt] = tuple(statements)
        self._count = len(self._items)  # the view is _items[:_count]; _items only grows
        self._source: str | None = source
        self._text: Callable[[], str] | None = None
        self._end = len(source)
        self.first_new = first_new

    @classmethod
    def view(
        cls, items: list[ast.stmt], first_new: int, end: int, text: Callable[[], str]
    ) -> Snapshot:
        """A snapshot of ``items[:len(items)]`` covering ``text()[:end]``, built in O(1).

        ``items`` must only ever be appended to, and ``text()`` must return a string that
        starts with the covered text, for the snapshot to stay immutable.
        """
        snap = cls.__new__(cls)
        snap._items = items
        snap._count = len(items)
        snap._source = None
        snap._text = text
        snap._end = end
        snap.first_new = first_new
        return snap

    @property
    def statements(self) -> tuple[ast.stmt, ...]:
        """All accepted statements, in source order."""
        items = self._items
        if type(items) is not tuple or len(items) != self._count:
            items = self._items = tuple(items[: self._count])
        return items

    @property
    def new_statements(self) -> tuple[ast.stmt, ...]:
        """The statements this snapshot added to the previous one."""
        return tuple(self._items[self.first_new : self._count])

    @property
    def source(self) -> str:
        """The text the statements cover, from the start of the stream."""
        if self._source is None:
            assert self._text is not None
            self._source = self._text()[: self._end]
        return self._source

    @property
    def end(self) -> int:
        """Length in characters of ``source``."""
        return self._end

    def __repr__(self) -> str:
        return f"Snapshot(statements={self._count}, end={self._end}, first_new={self.first_new})"
