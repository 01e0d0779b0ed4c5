"""A small pool of ready Guests per Host, so that a run's Guest is ready at once.

A pooled Guest is started by ``start_subprocess_guest`` exactly as a run's own would be,
``init`` included: it is fully confined (namespaces or Landlock, seccomp, rlimits, scratch,
uid) and waits, blocked in a read of its ``run`` frame, using no CPU (so its CPU-time
limit, which counts from its start as any Guest's does, is not eaten while it waits). What
its ``init`` carried is its *key*: the capability names and methods and the whole
``GuestLimits`` (the rlimits, the cgroup's bounds, the frame bound; the Landlock spec and
the rest of the confinement follow from the pool's level). A run is only ever given a
Guest of exactly its key, one Guest per run, never one that ran.

``take`` (the Host's ``GuestFactory``) hands out a pooled Guest of the run's key that is
still idle (``idle``: alive and silent); a dead one (its fork server died,
say) is discarded. Without one it waits for the Guest the pool is starting for that key,
if one is under way and unclaimed (never slower than starting another), or else starts
the run's Guest itself, exactly as without a pool: its errors are the unpooled path's,
and the pool never raises one of its own. After a take the pool refills in the background,
one start at a time, up to ``size`` Guests in all, for the key of the latest run (older
keys' Guests are closed when room is needed). A refill that fails stops refilling until a
run's own start of that key succeeds.

Only Guests forked from the fork server wait in a pool: one is closed without an event
loop (``abandon``: killed through its pidfd and cgroup, its clean-up left to the reaper
thread), so a pool never leaves a process, a transport or a cgroup behind when its loop
ends without ``aclose``. A spawned Guest (the fork server failed twice) is handed to a run
waiting for it, never pooled, and stops this loop's refills: they would spawn again.

A Guest's channel belongs to the event loop that made it, so the pool keeps its Guests per
loop, each loop's in one *keeper* task that does the refills. asyncio only: elsewhere
(trio) ``take`` starts every Guest fresh. No pooled Guest outlives its Host: ``aclose``
(``Host.aclose``) closes them, so does the Host's finalizer, the keeper when its loop
shuts down (``asyncio.run`` cancels it; the keeper awaits nothing then), and an ``atexit``
hook kills what is left; they also die with their fork server.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._guest_api import GuestLimits
from . import _forked
from ._channel import ChannelClosed
from ._isolation import IsolationChoice
from ._process import SubprocessGuest, _State
from ._start import start_subprocess_guest

Key = tuple[tuple[tuple[str, tuple[str, ...]], ...], GuestLimits]
"""What a pooled Guest's ``init`` carried: capability names and methods, in order, and its limits."""

DEFAULT_SIZE = 1
"""Ready Guests a Host keeps by default (``Host(guest_pool=...)``) where Guests are forked: one
hides the start of a run whose stream is too short to hide it (docs/benchmarks.md)."""

_KEEPERS: set[asyncio.Task[None]] = set()
"""The live keeper tasks (asyncio keeps only weak references to tasks)."""

_POOLS: weakref.WeakSet[GuestPool] = weakref.WeakSet()
"""Every pool not yet collected, for the ``atexit`` hook."""


@dataclass(slots=True)
class PoolStatistics:
    """How a pool's Guests went (counts since the Host was made)."""

    taken: int = 0
    """Runs given a ready pooled Guest."""
    awaited: int = 0
    """Runs given the Guest the pool was starting for their key."""
    fresh: int = 0
    """Runs that started their own Guest (no usable pooled one)."""
    started: int = 0
    """Guests the pool started (refills)."""
    discarded: int = 0
    """Pooled Guests found dead (or not silent) when a run wanted one."""
    unused: int = 0
    """Pooled Guests closed without a run (room for another key, or the pool closed)."""


def key_of(capabilities: Mapping[str, Sequence[str]], limits: GuestLimits) -> Key:
    """The key of a Guest started for ``capabilities`` and ``limits``."""
    return tuple((name, tuple(methods)) for name, methods in capabilities.items()), limits


def idle(guest: SubprocessGuest) -> bool:
    """Whether ``guest`` is still a ready Guest nobody ran: alive and silent since ``ready``
    (checked before a pooled one is handed to a run; a dead one is discarded)."""
    process = guest._process
    if guest._state.value != "ready" or process.returncode is not None:
        return False
    if isinstance(process, _forked.ForkedProcess) and process.exited(0):
        return False
    try:
        return not guest._channel.spoke_out_of_turn()
    except ChannelClosed:
        return False


def forked(guest: SubprocessGuest) -> bool:
    """Whether ``guest`` came from the fork server (only such a Guest is pooled)."""
    return isinstance(guest._process, _forked.ForkedProcess)


def abandon(guest: SubprocessGuest) -> None:
    """Close a pooled (forked, never run) Guest with no event loop turn: kill it through its
    pidfd and cgroup and leave its reaping, cgroup, fds and scratch to the reaper thread.
    Nothing of it needs keeping (it ran nothing), so nothing here awaits: a loop that is
    shutting down cannot cut the close short."""
    if guest._state is _State.CLOSED:
        return
    guest._state = _State.CLOSED
    guest._kill()
    guest._hand_to_reaper()


class GuestPool:
    """One Host's ready Guests (see module docstring)."""

    def __init__(self, size: int, *, isolation: IsolationChoice, fork_server: bool) -> None:
        if size < 1:
            raise ValueError(f"a Guest pool holds at least one Guest; got {size}")
        self.size = size
        self.isolation: IsolationChoice = isolation
        self.fork_server = fork_server
        self.stats = PoolStatistics()
        self._loops: dict[asyncio.AbstractEventLoop, _LoopPool] = {}
        self._closed = False
        _POOLS.add(self)

    async def start(
        self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits
    ) -> SubprocessGuest:
        """Start a Guest as a run without a pool would."""
        return await start_subprocess_guest(
            capabilities, limits, isolation=self.isolation, fork_server=self.fork_server
        )

    async def take(
        self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits
    ) -> SubprocessGuest:
        """A ready Guest for one run: a pooled one of exactly this key, else a fresh one."""
        pool = self._here()
        if pool is None:
            self.stats.fresh += 1
            return await self.start(capabilities, limits)
        return await pool.take(capabilities, limits)

    def _here(self) -> _LoopPool | None:
        """This event loop's pool (made on first use), or None off asyncio or once closed."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        if self._closed:
            return None
        pool = self._loops.get(loop)
        if pool is None or pool.closed:
            pool = self._loops[loop] = _LoopPool(self, loop)
        return pool

    def guests(self) -> list[SubprocessGuest]:
        """The pooled Guests waiting now, every loop's (tests and benchmarks)."""
        return [guest for pool in self._loops.values() for _key, guest in pool.ready]

    async def aclose(self) -> None:
        """Close every pooled Guest: this loop's awaited, other loops' asked to (or killed
        where their loop is gone); later takes start fresh Guests. Idempotent."""
        self._closed = True
        here: _LoopPool | None = None
        with contextlib.suppress(RuntimeError):
            here = self._loops.get(asyncio.get_running_loop())
        for pool in list(self._loops.values()):
            if pool is not here:
                pool.close_soon()
        self._loops.clear()
        if here is not None:
            await here.aclose()

    def close_soon(self) -> None:
        """``aclose`` without awaiting, from anywhere (the Host's finalizer)."""
        self._closed = True
        for pool in list(self._loops.values()):
            pool.close_soon()
        self._loops.clear()

    def kill(self) -> None:
        """Kill every pooled Guest now, without an event loop (at interpreter exit)."""
        self._closed = True
        for pool in self._loops.values():
            pool.kill()


class _LoopPool:
    """A pool's Guests on one event loop, and the keeper task that starts and closes them."""

    def __init__(self, owner: GuestPool, loop: asyncio.AbstractEventLoop) -> None:
        self.owner = owner
        self.loop = loop
        self.ready: list[tuple[Key, SubprocessGuest]] = []  # oldest first
        self.want: Key | None = None  # the key to refill (the latest run's)
        self.starting: Key | None = None  # the key of the refill under way
        self.claimant: asyncio.Future[SubprocessGuest | None] | None = None  # a run waiting for it
        self.closed = False
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def take(
        self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits
    ) -> SubprocessGuest:
        key = key_of(capabilities, limits)
        stats = self.owner.stats
        guest = self._pop(key)
        if guest is not None:
            stats.taken += 1
            self._refill(key)
            return guest
        if self.starting == key and self.claimant is None:
            guest = await self._claim(key)
            if guest is not None:
                stats.awaited += 1
                self._refill(key)
                return guest
        stats.fresh += 1
        guest = await self.owner.start(capabilities, limits)
        self._refill(key)
        return guest

    def _pop(self, key: Key) -> SubprocessGuest | None:
        """A pooled Guest of ``key`` that is still idle; the dead ones found are discarded."""
        for entry in [entry for entry in self.ready if entry[0] == key]:
            self.ready.remove(entry)
            if idle(entry[1]):
                return entry[1]
            self.owner.stats.discarded += 1
            abandon(entry[1])
        return None

    async def _claim(self, key: Key) -> SubprocessGuest | None:
        """The Guest the keeper is starting for this run's key, or None if that start failed."""
        claim: asyncio.Future[SubprocessGuest | None] = self.loop.create_future()
        self.claimant = claim
        try:
            return await claim
        except BaseException:  # cancelled: a Guest handed over meanwhile goes back to the pool
            if claim.done() and not claim.cancelled() and claim.result() is not None:
                self._put(key, claim.result())  # type: ignore[arg-type]
            raise
        finally:
            if self.claimant is claim:
                self.claimant = None

    def _refill(self, key: Key) -> None:
        """Keep ``key``'s Guests topped up (the latest run's key wins)."""
        if self.closed:
            return
        self.want = key
        if self.task is None:
            self.task = self.loop.create_task(self._keep(), name="pysolate-guest-pool")
            _KEEPERS.add(self.task)
            self.task.add_done_callback(_KEEPERS.discard)
        self.wake.set()

    def _deficit(self) -> Key | None:
        """The key to start a Guest for next, or None when the pool is full."""
        if self.want is None or self.closed:
            return None
        have = sum(1 for key, _guest in self.ready if key == self.want)
        return self.want if have < self.owner.size else None

    def _put(self, key: Key, guest: SubprocessGuest) -> None:
        """Pool a forked ``guest``, closing older keys' Guests to stay within ``size``."""
        if self.closed:
            self.owner.stats.unused += 1
            abandon(guest)
            return
        while len(self.ready) >= self.owner.size:
            self.owner.stats.unused += 1
            abandon(self.ready.pop(0)[1])
        self.ready.append((key, guest))

    async def _keep(self) -> None:
        """The refills, one at a time, until the pool or its loop closes."""
        try:
            while True:
                if self.closed:
                    break
                key = self._deficit()  # (state read and ``wake`` cleared with no await between)
                if key is None:
                    self.wake.clear()
                    await self.wake.wait()
                    continue
                self.starting = key
                guest: SubprocessGuest | None = None
                try:
                    guest = await self.owner.start(dict(key[0]), key[1])
                    self.owner.stats.started += 1
                except (
                    Exception
                ):  # a run's own start reports it; stop refilling this key until one succeeds
                    self.want = None
                finally:
                    self.starting = None
                claimant, self.claimant = self.claimant, None
                if claimant is not None and not claimant.done():
                    claimant.set_result(guest)
                elif guest is not None and forked(guest):
                    self._put(key, guest)
                elif (
                    guest is not None
                ):  # spawned: the fork server is failing; so would the next refill
                    self.owner.stats.unused += 1
                    self.closed = True
                    await guest.aclose()
        finally:
            self.closed = True
            if self.claimant is not None and not self.claimant.done():
                self.claimant.set_result(None)
            self.owner.stats.unused += len(self.ready)
            for _key, guest in self.ready:
                abandon(guest)
            self.ready.clear()

    async def aclose(self) -> None:
        """Close this loop's pool from its own loop: its Guests are dead and reaped on return."""
        self.closed = True
        guests = [guest for _key, guest in self.ready]
        self.owner.stats.unused += len(guests)
        self.ready.clear()
        self.wake.set()
        if self.task is not None:
            await asyncio.shield(self.task)
        for guest in guests:
            await guest.aclose()

    def close_soon(self) -> None:
        """Ask the keeper to close everything (safe from any thread); where the loop is
        gone, kill the Guests instead."""
        if self.task is None:
            self.closed = True
            self.kill()
            return
        try:
            self.loop.call_soon_threadsafe(self._stop)
        except RuntimeError:  # the loop is closed: nobody will run the keeper again
            self.kill()

    def _stop(self) -> None:
        self.closed = True
        self.wake.set()

    def kill(self) -> None:
        """SIGKILL every pooled Guest (no loop needed: their fds go with the process)."""
        for _key, guest in self.ready:
            guest._kill()


@atexit.register
def _kill_all() -> None:
    """At interpreter exit no pooled Guest is left running."""
    for pool in list(_POOLS):
        pool.kill()
