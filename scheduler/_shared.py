"""The observation table of one Host: physical calls that its runs share by exact key.

A run's own lane shares an exact-key physical observation among the run's occurrences
(``SpeculativeLane``). Many runs on one Host overlap too (best-of-N sampling, parallel
rollouts, a retried turn), and contract rule 8 (docs/contract.md) lets a ``pure`` result serve any run
and an ``immutable_read`` result any run whose view names the same frozen root. Which keys
those are is the Host's business (``pysolate._calls._sharing`` admits them); this module is how one
physical call serves every run that asks for its key, while each run waits on its own terms.

Prior art: request coalescing ("singleflight" in Go's ``x/sync``, a CDN collapsing equal
cache misses into one origin fetch); here the key is the exact call key, failures are never
handed on, and a waiter can always leave without harming the others.

Invariants:

- One entry per key is *open* (its call queued or running) at a time, at most one settled
  success per key is kept; an entry that fails or stops leaves the table (a failure is not
  reused: another run's call runs again, as its sequential run would), a success leaves it
  when it ages past ``ttl`` or the size bounds evict it.
- A waiter's ``Probe`` is invoked exactly when the entry's call is (``SharedProbe``): a run's
  lane can tell a follower that waits behind queued work (withdraw it, contract 7) from one
  whose tool runs (wait for it).
- An entry started for early work runs in a task of its own, outside every run (the Host
  starts it), so it outlives the run that started it while another run still waits on it;
  it is cancelled when its last waiter leaves, or when the table closes. An entry of a
  program's own call (``formal``) runs in that call's task and ends with it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import anyio

from occurrences import CallKey

from ._observation import _INVOKING, Probe

_QUEUED = Probe.__dict__["queued"]
"""``Probe.queued``'s slot, which ``SharedProbe.queued`` mirrors to its waiters."""


class SharedProbe(Probe):
    """The probe of a shared physical call: starting it starts every waiter's probe.

    The call is *started* when its task invokes the tool (``invoke``, from the loop or a
    worker thread) or when a program's own call takes it over first (``adopt``); from then
    on each waiter's probe is invoked, so a claim waits for it. Before that each waiter's
    probe says ``queued``, so a claim withdraws it instead of waiting behind the queue.
    All under the probes' one lock: a waiter is withdrawn or invoked, never both.
    """

    __slots__ = ("_followers", "started")

    def __init__(self) -> None:
        super().__init__()
        self._followers: list[Probe] = []
        self.started = False

    def invoke(self) -> bool:
        with _INVOKING:
            if self.withdrawn:
                return False
            self.invoked = True
            self._start()
            return True

    def adopt(self) -> bool:
        """A program's own call takes the entry over before its task invoked the tool: the
        task never will. False when the tool was already invoked (then wait for it)."""
        with _INVOKING:
            if self.started:
                return False
            self.withdrawn = True
            self._start()
            return True

    @property
    def queued(self) -> bool:
        return _QUEUED.__get__(self, SharedProbe)

    @queued.setter
    def queued(self, value: bool) -> None:
        """The call waits for a thread or slot (or stopped waiting): so does every waiter not
        yet invoked, so that a claim of a waiter withdraws it rather than wait behind a queue."""
        with _INVOKING:
            _QUEUED.__set__(self, value)
            for probe in getattr(self, "_followers", ()):
                if not probe.withdrawn and not probe.invoked:
                    probe.queued = value

    def urge_all(self) -> None:
        """A waiter's program waits for it (its claim found it on its way, not queued): the
        call must not queue for a thread or slot either (``Probe.urge``; contract 7)."""
        self.urged = True
        if self.urge is not None:
            self.urge()

    def _start(self) -> None:  # (the lock is held)
        self.started = True
        for probe in self._followers:
            if not probe.withdrawn:
                probe.invoked = True
                probe.queued = False

    def follow(self, probe: Probe) -> None:
        """``probe`` (a waiter's) is invoked when this call starts, queued while it is."""
        with _INVOKING:
            self._followers.append(probe)
            if self.started:
                probe.invoked = True
            else:
                probe.queued = _QUEUED.__get__(self, SharedProbe)
                probe.urge = self.urge_all

    def unfollow(self, probe: Probe) -> None:
        with _INVOKING:
            if probe in self._followers:
                self._followers.remove(probe)
            probe.queued = False
            probe.urge = None


class EntryState(enum.StrEnum):
    """Where a shared call is in its life: open until it settles, then one of the three ends."""

    OPEN = "open"
    """Its call is queued or running."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    """Ended without an outcome of the tool (cancelled, or ``LaneStopped``)."""


@dataclass(slots=True, eq=False)
class SharedCall:
    """One physical call in the table, and who waits on it."""

    key: CallKey
    owner: (
        str  # the id of the run whose call this is (a program's call that adopts it takes it over)
    )
    lane: Literal["speculative", "formal"]
    probe: SharedProbe = field(default_factory=SharedProbe)
    state: EntryState = EntryState.OPEN
    value: object = None
    error: BaseException | None = None
    waiters: int = 0  # runs' calls waiting on it (an early call's starter included)
    trace: object = None  # the owner's trace of the physical call (``ObservationTrace``), for links
    settled_at: float = 0.0
    chars: int = 0  # the settled value's estimated size, for the table's bound
    scope: anyio.CancelScope | None = None  # the task of early work runs in it
    task: object = None  # that task (asyncio keeps only weak references to its tasks)
    _done: anyio.Event | None = None  # made by the first waiter (most calls have none)
    _ended: anyio.Event | None = None  # the task returned (``ObservationTable.aclose``)

    @property
    def settled(self) -> bool:
        return self.state is EntryState.SUCCEEDED or self.state is EntryState.FAILED

    async def wait(self) -> None:
        """Until the entry is no longer open. Cancellation propagates; the entry is untouched
        (the caller leaves it, ``ObservationTable.leave``)."""
        if self.state is EntryState.OPEN:
            if self._done is None:
                self._done = anyio.Event()
            await self._done.wait()

    def task_ended(self) -> None:
        """Its task returned (called by the task itself, last)."""
        if self._ended is None:
            self._ended = anyio.Event()
        self._ended.set()

    async def wait_task(self) -> None:
        if self._ended is None:
            self._ended = anyio.Event()
        await self._ended.wait()


@dataclass(frozen=True, slots=True)
class TableStatistics:
    """An immutable snapshot of one table's accounting (``ObservationTable.statistics``)."""

    logical: int
    """Calls that asked the table (``asked``)."""
    physical: int
    """Shared calls whose tool was invoked (each once, whoever waited on it)."""
    waited: int
    """Calls that waited on another call's open entry instead of calling."""
    reused: int
    """Calls served by a settled success."""
    failed: int
    stopped: int
    """Entries that ended without an outcome (cancelled, ``LaneStopped``)."""
    cancelled: int
    """Entries cancelled because no waiter was left (among ``stopped``)."""
    evicted: int
    """Settled successes dropped for age or size."""
    open: int
    settled: int
    chars: int


class ObservationTable:
    """One event loop's table (its events are the loop's); see the module docstring.

    ``ttl`` seconds a settled success serves later calls, at most ``max_entries`` of them and
    ``max_chars`` estimated characters in all (the oldest go first). Every method but
    ``aclose`` is synchronous and runs on the table's loop.
    """

    def __init__(
        self,
        *,
        ttl: float,
        max_entries: int,
        max_chars: int,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._max_chars = max_chars
        self._clock = clock
        self._open: dict[CallKey, SharedCall] = {}
        self._settled: dict[CallKey, SharedCall] = {}  # in settling order: the oldest first
        self._chars = 0
        self._tasks: set[SharedCall] = set()  # entries whose task has not returned
        self._counts = dict.fromkeys(
            (
                "logical",
                "physical",
                "waited",
                "reused",
                "failed",
                "stopped",
                "cancelled",
                "evicted",
            ),
            0,
        )

    def find(self, key: CallKey) -> SharedCall | None:
        """The open entry of ``key``, else its settled success while fresh, else None."""
        entry = self._open.get(key)
        if entry is not None:
            return entry
        entry = self._settled.get(key)
        if entry is not None and self._clock() - entry.settled_at > self._ttl:
            self._evict(entry)
            return None
        return entry

    def open(self, key: CallKey, owner: str, lane: Literal["speculative", "formal"]) -> SharedCall:
        """A new open entry for ``key`` (none may be open), started by ``owner``."""
        assert key not in self._open, "an entry of this key is open already"
        entry = SharedCall(key, owner, lane)
        self._open[key] = entry
        return entry

    def started_task(self, entry: SharedCall) -> None:
        """``entry``'s call runs in a task of its own: ``aclose`` waits for it."""
        self._tasks.add(entry)

    def finished_task(self, entry: SharedCall) -> None:
        self._tasks.discard(entry)
        entry.task_ended()

    def asked(self) -> None:
        """A call asks the table (whatever it finds)."""
        self._counts["logical"] += 1

    def join(self, entry: SharedCall, probe: Probe | None = None, *, counted: bool = True) -> None:
        """A call waits on ``entry`` (``probe``: its early work's, started with the entry;
        ``counted``: a call of another run's, not the entry's starter or a hold)."""
        entry.waiters += 1
        if probe is not None:
            entry.probe.follow(probe)
        if counted:
            self._counts["waited"] += 1

    def served(self) -> None:
        """A call was served by a settled success (without waiting)."""
        self._counts["reused"] += 1

    def leave(self, entry: SharedCall, probe: Probe | None = None) -> bool:
        """A waiter leaves ``entry`` (it got the outcome, or it was cancelled). When it was
        the last and the entry is open early work, the entry's call is cancelled and the
        entry leaves the table. Returns whether the call goes on after this waiter left."""
        entry.waiters -= 1
        if probe is not None:
            entry.probe.unfollow(probe)
        if entry.state is not EntryState.OPEN:
            return False
        if entry.waiters > 0 or entry.lane == "formal":
            return True
        self._unlink(entry)
        self._counts["cancelled"] += 1
        if entry.scope is not None:
            entry.scope.cancel()
        return entry.probe.in_thread and not entry.probe.thread_done  # a thread runs on

    def settle(
        self,
        entry: SharedCall,
        *,
        value: object = None,
        error: BaseException | None = None,
        stopped: bool = False,
        chars: int = 0,
    ) -> None:
        """The entry's call ended: a success (kept for later calls while ``chars`` fits the
        bounds), a failure or a stop (``stopped``), both out of the table at once."""
        if entry.state is not EntryState.OPEN:
            return
        if entry.probe.started:
            self._counts["physical"] += 1
        self._unlink(entry)
        if stopped:
            entry.state = EntryState.STOPPED
            self._counts["stopped"] += 1
        elif error is not None:
            entry.state, entry.error = EntryState.FAILED, error
            self._counts["failed"] += 1
        else:
            entry.state, entry.value = EntryState.SUCCEEDED, value
            entry.settled_at, entry.chars = self._clock(), chars
            self._keep(entry)
        if entry._done is not None:
            entry._done.set()

    def _keep(self, entry: SharedCall) -> None:
        if entry.chars > self._max_chars or self._max_entries == 0 or self._ttl <= 0:
            return
        old = self._settled.pop(entry.key, None)
        if old is not None:
            self._chars -= old.chars
        self._settled[entry.key] = entry
        self._chars += entry.chars
        while len(self._settled) > self._max_entries or self._chars > self._max_chars:
            self._evict(next(iter(self._settled.values())))

    def _evict(self, entry: SharedCall) -> None:
        if self._settled.get(entry.key) is entry:
            del self._settled[entry.key]
            self._chars -= entry.chars
            self._counts["evicted"] += 1

    def _unlink(self, entry: SharedCall) -> None:
        if self._open.get(entry.key) is entry:
            del self._open[entry.key]

    def entries(self) -> Iterator[SharedCall]:
        """The open entries, then the settled ones."""
        yield from list(self._open.values())
        yield from list(self._settled.values())

    async def aclose(self) -> None:
        """Cancel every open entry's task and wait until each returned; forget the settled
        ones. Shielded: the Host's clean-up finishes even when its caller is cancelled."""
        with anyio.CancelScope(shield=True):
            for entry in list(self._open.values()):
                self._unlink(entry)
                if entry.scope is not None:
                    entry.scope.cancel()
            for entry in list(self._tasks):
                if entry.scope is not None:
                    entry.scope.cancel()
                await entry.wait_task()
        self._settled.clear()
        self._chars = 0

    def statistics(self) -> TableStatistics:
        c = self._counts
        return TableStatistics(
            c["logical"],
            c["physical"],
            c["waited"],
            c["reused"],
            c["failed"],
            c["stopped"],
            c["cancelled"],
            c["evicted"],
            len(self._open),
            len(self._settled),
            self._chars,
        )
