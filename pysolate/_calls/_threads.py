"""Worker threads for sync capability methods: early work never takes the program's threads.

A sync method runs in a worker thread, and a thread cannot be interrupted: a call that is
cancelled or times out is *abandoned* and its thread runs on. Three rules keep that, and
early work generally, from changing what the program sees (contract 7):

- **Two pools.** Early (speculative) sync calls take a slot of their own pool of
  ``early_threads``; the program's own (formal) calls one of ``threads``. However many early
  calls block, the program's own sync call gets a thread at once (it waits only for other
  formal calls, of concurrent runs).
- **The timeout is the tool's own.** A call's ``timeout`` starts when it has its thread:
  the wait for a slot is never counted against it (issue 36: a held timeout that the
  sequential run never sees). A call abandoned before its thread started never runs.
- **Abandoned threads stay in their own pool.** An abandoned *early* thread keeps its
  early slot until it returns: stuck early work shrinks early capacity only (reported as
  ``early_stuck``), never the program's. An abandoned *formal* thread gives its slot back
  but is counted (``stuck``) until it returns; once ``max_stuck`` are, a new formal sync
  call fails at once with a ``RuntimeError`` saying so, instead of piling up one more
  thread; it starts again when a stuck thread returns.

The pools belong to one Host, one per event loop (slots are loop-confined; an abandoned
early thread hands its release to its loop); the stuck count spans loops, since threads do.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from scheduler import LaneStopped, Probe, Slots

from .._guest_api import ToolFailure

EARLY_SHARE = 2
"""Default early budget: ``threads // EARLY_SHARE`` (at least one)."""


@dataclass(frozen=True, slots=True)
class ThreadStatistics:
    """A snapshot of one Host's worker threads (on the calling event loop, for the pools)."""

    threads: int
    """Formal (program) sync calls that may run at once."""
    early_threads: int
    """Early (speculative) sync calls that may run at once, stuck ones included."""
    stuck: int
    """Threads of abandoned formal calls (cancelled or timed out) that have not returned."""
    max_stuck: int
    """Past this many stuck formal threads, new formal sync calls fail instead of starting."""
    refused: int
    """Formal sync calls refused so far because ``max_stuck`` threads were stuck."""
    early_stuck: int = 0
    """Threads of abandoned early calls that have not returned; each holds an early slot."""
    busy: int = 0
    """Formal slots taken now."""
    early_busy: int = 0
    """Early slots taken now (``early_stuck`` of them by abandoned threads)."""


class _Call:
    """One sync call's thread lifecycle; guarded by ``WorkerThreads._lock``.

    Invariant: the call counts as stuck exactly while ``abandoned and started and not
    finished``; an abandoned call whose thread had not started never runs its work.
    """

    __slots__ = ("abandoned", "finished", "started")

    def __init__(self) -> None:
        self.started = False
        self.finished = False
        self.abandoned = False


@dataclass(slots=True)
class _Pools:
    """One event loop's slots: formal, early, and the unbounded limiter handed to anyio
    (the slots do the bounding; anyio's default limiter would add a bound of its own)."""

    token: anyio.lowlevel.EventLoopToken
    formal: Slots
    early: Slots
    unbounded: anyio.CapacityLimiter


class WorkerThreads:
    """The worker-thread pools and the stuck-thread counts of one Host."""

    def __init__(
        self, threads: int, early_threads: int | None = None, max_stuck: int | None = None
    ) -> None:
        """``early_threads`` defaults to ``threads // EARLY_SHARE`` (at least 1),
        ``max_stuck`` to ``threads``. Raises ``ValueError`` for a budget below 1."""
        early = max(1, threads // EARLY_SHARE) if early_threads is None else early_threads
        bound = threads if max_stuck is None else max_stuck
        if min(threads, early, bound) < 1:
            raise ValueError(
                f"thread budgets must be at least 1 (threads={threads}, early={early}, max_stuck={bound})"
            )
        self._threads = threads
        self._early_threads = early
        self._max_stuck = bound
        self._lock = threading.Lock()  # the worker threads update the counts
        self._stuck = 0
        self._early_stuck = 0
        self._refused = 0
        self._pools: dict[anyio.lowlevel.EventLoopToken, _Pools] = {}
        # Early calls of each capability running now (async ones, and threads until they
        # return), and how many ever began: whether one overlapped a read of the program's.
        self._early_running: dict[str, int] = {}
        self._early_begun: dict[str, int] = {}

    def _loop_pools(self) -> _Pools:
        token = anyio.lowlevel.current_token()
        pools = self._pools.get(token)
        if pools is None:
            pools = self._pools[token] = _Pools(
                token,
                Slots(self._threads),
                Slots(self._early_threads),
                anyio.CapacityLimiter(math.inf),
            )
        return pools

    async def run(
        self,
        work: Callable[[], object],
        *,
        early: bool,
        what: str,
        timeout: float,
        probe: Probe | None = None,
    ) -> tuple[bool, object]:
        """``(True, work())`` from a worker thread of the early or formal pool, or ``(False,
        None)`` when it ran ``timeout`` seconds without returning (then it is abandoned).
        ``timeout`` counts from the moment the call has its slot: waiting for one is free.
        ``probe`` (early work) says while the call is queued for a slot, and once a Guest
        call waits for it (``urged``) it takes a free slot or none: ``scheduler.LaneStopped``
        rather than queue.

        Raises ``ToolFailure("RuntimeError")`` without starting a formal call when
        ``max_stuck`` formal threads are stuck (``what`` names the call in the message);
        otherwise what ``work`` raises. Cancellation abandons the thread (a thread that had
        not started never runs ``work``).
        """
        if not early:
            with self._lock:
                if self._stuck >= self._max_stuck:
                    self._refused += 1
                    raise ToolFailure(
                        "RuntimeError",
                        f"{what} was not started: {self._stuck} worker threads of earlier calls that were "
                        f"abandoned have not returned (this Host allows {self._max_stuck})",
                    )
        pools = self._loop_pools()
        slots = pools.early if early else pools.formal
        if not slots.try_take():
            if probe is not None and probe.urged:
                raise LaneStopped(f"{what} found no free early thread")
            await _queued(slots, probe)
        state = _Call()

        def tracked() -> object:
            with self._lock:
                if state.abandoned:
                    state.finished = True
                    return None  # abandoned before it started: nobody waits for it
                state.started = True
            try:
                return work()
            finally:
                with self._lock:
                    state.finished = True
                    stuck = state.abandoned
                    if stuck:
                        if early:
                            self._early_stuck -= 1
                        else:
                            self._stuck -= 1
                if stuck and early:
                    _release_from_thread(pools)

        finished = False
        keep_slot = False
        try:
            with anyio.move_on_after(timeout):
                value = await anyio.to_thread.run_sync(
                    tracked, abandon_on_cancel=True, limiter=pools.unbounded
                )
                finished = True
        finally:
            if not finished:
                keep_slot = self._abandon(state, early)
            if not keep_slot:
                slots.release()
        return (True, value) if finished else (False, None)

    def _abandon(self, state: _Call, early: bool) -> bool:
        """The caller stopped waiting for ``state``'s thread; whether its (early) slot stays
        taken until the thread returns."""
        with self._lock:
            if state.finished:
                return False  # it returned (or raised) after all
            state.abandoned = True
            if not state.started:
                return False  # it will not run
            if early:
                self._early_stuck += 1
                return True
            self._stuck += 1
            return False

    # -- early calls running, per capability (contract 7: a read that waited behind them) --

    def early_began(self, capability: str) -> None:
        """An early call of ``capability`` invoked its tool (from the loop or its thread)."""
        with self._lock:
            self._early_running[capability] = self._early_running.get(capability, 0) + 1
            self._early_begun[capability] = self._early_begun.get(capability, 0) + 1

    def early_ended(self, capability: str) -> None:
        with self._lock:
            self._early_running[capability] -= 1

    def counting(self, capability: str, work: Callable[[], object]) -> Callable[[], object]:
        """``work``, counted as an early call of ``capability`` while it runs in its thread
        (an abandoned one included: it may hold what the program's reads then wait for)."""
        return functools.partial(self._counted, capability, work)

    def _counted(self, capability: str, work: Callable[[], object]) -> object:
        self.early_began(capability)
        try:
            return work()
        finally:
            self.early_ended(capability)

    def early_mark(self, capability: str) -> int:
        """Taken when a read of the program's starts: -1 if early calls of ``capability``
        run now, else how many ever began (for ``early_overlapped``)."""
        with self._lock:
            if self._early_running.get(capability, 0):
                return -1
            return self._early_begun.get(capability, 0)

    def early_overlapped(self, capability: str, mark: int) -> bool:
        """Whether an early call of ``capability`` ran at some point since ``mark``."""
        with self._lock:
            return (
                mark < 0
                or self._early_running.get(capability, 0) > 0
                or self._early_begun.get(capability, 0) != mark
            )

    def statistics(self) -> ThreadStatistics:
        token = _current_token()
        pools = self._pools.get(token) if token is not None else None
        with self._lock:
            return ThreadStatistics(
                self._threads,
                self._early_threads,
                self._stuck,
                self._max_stuck,
                self._refused,
                early_stuck=self._early_stuck,
                busy=int(pools.formal.busy) if pools is not None else 0,
                early_busy=int(pools.early.busy) if pools is not None else 0,
            )


async def _queued(slots: Slots, probe: Probe | None) -> None:
    """Wait for a slot; ``probe`` (if any) says meanwhile that the call is queued."""
    if probe is None:
        await slots.take()
        return
    probe.queued = True
    try:
        await slots.take()
    finally:
        probe.queued = False


def _release_from_thread(pools: _Pools) -> None:
    """An abandoned early thread returned: its slot goes back, on the slots' own loop.

    Scheduled, never waited for: a loop that has stopped running without being closed (a
    test runner's between tests, any loop at interpreter exit) would never answer, and a
    thread blocked on it keeps the process from exiting. A closed loop has no slots to give
    back (``RuntimeError``: asyncio's closed loop, trio's finished run)."""
    native: Any = pools.token.native_token  # an asyncio loop or a trio token
    schedule = (
        native.call_soon_threadsafe
        if hasattr(native, "call_soon_threadsafe")
        else native.run_sync_soon
    )
    with contextlib.suppress(RuntimeError):
        schedule(pools.early.release)


def _current_token() -> anyio.lowlevel.EventLoopToken | None:
    try:
        return anyio.lowlevel.current_token()
    except RuntimeError:  # not in an event loop (statistics from plain code)
        return None
