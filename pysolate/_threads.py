"""Worker threads for sync capability methods: early work never starves the program's calls.

A sync method runs in a worker thread, and a thread cannot be interrupted: a call that is
cancelled or times out is *abandoned* and its thread runs on. Two rules keep that from
hurting the program:

- **Separate budgets.** Early (speculative) sync calls take a token from their own
  limiter of ``early_threads``; the program's own (formal) calls from another of
  ``threads``. So however many early calls block, the program's own sync call still gets
  a thread at once (it waits only for other formal calls, of concurrent runs).
- **A bound on abandoned threads.** Every abandoned call whose thread still runs is
  counted (``statistics().stuck``) until its thread returns. Once ``max_stuck`` threads
  of a Host are stuck, a new sync call fails at once with a ``RuntimeError`` saying so,
  instead of piling up one more thread; it starts again when a stuck thread returns.

The budgets and the count belong to one Host (limiters per event loop: an anyio limiter
binds to the first loop that uses it; the stuck count spans loops, since threads do).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import anyio.to_thread

from ._guest_api import ToolFailure

EARLY_SHARE = 2
"""Default early budget: ``threads // EARLY_SHARE`` (at least one)."""


@dataclass(frozen=True, slots=True)
class ThreadStatistics:
    """A snapshot of one Host's worker threads."""

    threads: int
    """Formal (program) sync calls that may run at once."""
    early_threads: int
    """Early (speculative) sync calls that may run at once."""
    stuck: int
    """Threads of abandoned calls (cancelled or timed out) that have not returned yet."""
    max_stuck: int
    """Past this many stuck threads, new sync calls fail instead of starting."""
    refused: int
    """Sync calls refused so far because ``max_stuck`` threads were stuck."""


class _Call:
    """One sync call's thread lifecycle; guarded by ``WorkerThreads._lock``.

    Invariant: the call counts as stuck exactly while ``abandoned and started and not
    finished``.
    """

    __slots__ = ("abandoned", "finished", "started")

    def __init__(self) -> None:
        self.started = False
        self.finished = False
        self.abandoned = False


class WorkerThreads:
    """The worker-thread budgets and the stuck-thread count of one Host."""

    def __init__(self, threads: int, early_threads: int | None = None, max_stuck: int | None = None) -> None:
        """``early_threads`` defaults to ``threads // EARLY_SHARE`` (at least 1),
        ``max_stuck`` to ``threads``. Raises ``ValueError`` for a budget below 1."""
        early = max(1, threads // EARLY_SHARE) if early_threads is None else early_threads
        bound = threads if max_stuck is None else max_stuck
        if min(threads, early, bound) < 1:
            raise ValueError(f"thread budgets must be at least 1 (threads={threads}, early={early}, max_stuck={bound})")
        self._threads = threads
        self._early_threads = early
        self._max_stuck = bound
        self._lock = threading.Lock()  # the worker threads update the count
        self._stuck = 0
        self._refused = 0
        self._limiters: dict[tuple[anyio.lowlevel.EventLoopToken, bool], anyio.CapacityLimiter] = {}

    def limiter(self, *, early: bool) -> anyio.CapacityLimiter:
        """The current event loop's limiter of early or formal calls."""
        key = (anyio.lowlevel.current_token(), early)
        limiter = self._limiters.get(key)
        if limiter is None:
            limiter = self._limiters[key] = anyio.CapacityLimiter(self._early_threads if early else self._threads)
        return limiter

    async def run(self, work: Callable[[], object], *, early: bool, what: str) -> object:
        """``work()`` in a worker thread under the early or formal budget.

        Raises ``ToolFailure("RuntimeError")`` without starting it when ``max_stuck``
        threads are stuck (``what`` names the call in the message); otherwise what ``work``
        raises. Cancellation abandons the thread (it is counted stuck until it returns).
        """
        with self._lock:
            if self._stuck >= self._max_stuck:
                self._refused += 1
                raise ToolFailure(
                    "RuntimeError",
                    f"{what} was not started: {self._stuck} worker threads of earlier calls that were "
                    f"abandoned have not returned (this Host allows {self._max_stuck})",
                )
        state = _Call()

        def tracked() -> object:
            with self._lock:
                state.started = True
                if state.abandoned:
                    self._stuck += 1
            try:
                return work()
            finally:
                with self._lock:
                    state.finished = True
                    if state.abandoned:
                        self._stuck -= 1

        try:
            return await anyio.to_thread.run_sync(tracked, abandon_on_cancel=True, limiter=self.limiter(early=early))
        except BaseException:
            with self._lock:
                if not state.finished and not state.abandoned:
                    state.abandoned = True
                    if state.started:
                        self._stuck += 1
            raise

    def statistics(self) -> ThreadStatistics:
        with self._lock:
            return ThreadStatistics(self._threads, self._early_threads, self._stuck, self._max_stuck, self._refused)
