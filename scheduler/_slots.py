"""Slots: a bounded number of calls running at once, handed out certain-first.

The lane's concurrency and the Host's early worker threads are both counted here. A
``CapacityLimiter`` would do the counting, but it serves strictly first come, first
served, and early work has two kinds of waiter: occurrences the program will certainly
reach, and provisional ones (found in a statement still streaming) that may turn out dead.
A provisional call queued first must not hold a certain one back (issue 36: dead work
kept every slot and the program's next call waited for nothing), so a released slot goes
to the first waiter that is certain *at that moment* (a provisional occurrence may have
been confirmed while it waited), else to the first waiter.

Confined to one event loop, like the limiters it replaces: ``release`` is called from the
loop (a worker thread hands its release to the loop).

Invariant: ``_free > 0`` only while nobody waits; a released slot is handed straight to a
waiter (``granted``), never put back while one waits, so a newcomer cannot overtake it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio


def _certain() -> bool:
    return False


@dataclass(slots=True, eq=False)
class _Waiter:
    provisional: Callable[[], bool]
    event: anyio.Event = field(default_factory=anyio.Event)
    granted: bool = False


class Slots:
    """``capacity`` slots; ``take`` waits for one, ``release`` gives it back."""

    def __init__(self, capacity: float) -> None:
        if capacity < 1:
            raise ValueError(f"slots need a capacity of at least 1, not {capacity}")
        self._capacity = capacity
        self._free = capacity
        self._waiting: list[
            _Waiter
        ] = []  # arrival order; at most a run's budget or a Host's callers

    @property
    def capacity(self) -> float:
        return self._capacity

    @property
    def busy(self) -> float:
        """Slots taken now (those of abandoned threads included, until they return)."""
        return self._capacity - self._free

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def try_take(self) -> bool:
        """Take a free slot without waiting: True if there was one."""
        if self._free > 0:
            self._free -= 1
            return True
        return False

    async def take(self, provisional: Callable[[], bool] = _certain) -> None:
        """A slot: at once when one is free (no trip round the loop), else when released to
        this caller. ``provisional`` says, when a slot is handed out, whether this caller's
        work is still provisional (certain callers go first). Cancellation while waiting
        takes nothing (a slot granted meanwhile is passed on)."""
        if self._free > 0:
            self._free -= 1
            return
        waiter = _Waiter(provisional)
        self._waiting.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                self.release()
            else:
                self._waiting.remove(waiter)
            raise

    def release(self) -> None:
        """Give a slot back: to the first certain waiter, else the first waiter, else free."""
        waiting = self._waiting
        if not waiting:
            self._free += 1
            return
        chosen = 0
        for i, waiter in enumerate(waiting):
            if not waiter.provisional():
                chosen = i
                break
        waiter = waiting.pop(chosen)
        waiter.granted = True
        waiter.event.set()
