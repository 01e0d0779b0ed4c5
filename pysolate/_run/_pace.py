"""The Host's own work on the event loop, in bounded steps (issue 36, item 5).

A streamed run reads the model's stream, parses what arrived and discovers its calls on
the one event loop every run on the Host shares. Discovery is done one statement at a time
(each bounded: ``occurrences.discovery._bindings.EVALUATION_LIMITS``), and ``Pacer`` lets
the loop run between statements once a slice of work is spent: other runs' chunks, their
early calls' results, the stream's own watchdog and the Guest's broker get their turn
within a few milliseconds instead of waiting for a whole chunk's statements.

Yielding only when a slice is spent keeps the common case free: a chunk whose statements
take less than ``SLICE`` goes round the loop no more often than before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from .._backend import loop_checkpoint, loop_clock

SLICE: Final = 0.002
"""Seconds of Host work after which a streamed run lets the event loop run (at the next
statement boundary)."""


class Pacer:
    """Counts the Host's work since the loop last ran; ``pace`` yields once it is a slice.

    Make it inside the running loop (it looks the loop's clock up once). Cancellation at
    ``pace`` propagates (it is a checkpoint only when it yields).
    """

    __slots__ = ("_checkpoint", "_clock", "_since", "yields")

    def __init__(self) -> None:
        self._clock: Callable[[], float] = loop_clock()
        self._checkpoint: Callable[[], Awaitable[None]] = loop_checkpoint()
        self._since = self._clock()
        self.yields = 0  # times the loop was let run (for tests and benchmarks)

    def resumed(self) -> None:
        """The loop ran (the caller awaited something): the slice starts again."""
        self._since = self._clock()

    async def pace(self) -> None:
        """Let the loop run if this slice of work is spent."""
        if self._clock() - self._since >= SLICE:
            self.yields += 1
            await self._checkpoint()
            self._since = self._clock()
