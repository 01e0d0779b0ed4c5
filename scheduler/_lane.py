"""The speculative lane: runs ready, eligible occurrences early and keeps the claim table.

Prior art: LLMCompiler's ready queue over a task DAG (hidden submit, blocking materialize),
and Pydantic AI code mode's speculation (launch early, claim FIFO by call key, evict at the
end). Differences that matter for the correctness contract:

- Eligibility is re-checked here, not trusted from the graph: only ``pure`` and
  ``immutable_read`` effects, only pre-write occurrences with a known key, discardable ones
  only when the policy allows, within the run's budget (contract 2).
- The claim table is keyed by the exact ``CallKey`` (contract 3). A claim returns the
  observation itself; the broker hands out a fresh copy of its value or re-raises its error
  where the Guest made the call (contracts 4 and 5).
- Early work on a speculative branch layer (``scheduler._branches``) is started, claimed
  and discarded by its ``BranchSpeculation``; the lane only runs it, under the same budget,
  and drops it from the claim table when the layer is discarded.
- Everything runs in one anyio task group owned by the lane, so closing the lane (or
  cancelling the run) leaves no task behind. Threads cannot be interrupted; those are
  accounted ``late`` rather than pretended cancelled.
- Early work never holds the program back (contract 7). Its slots are its own
  (``_slots.Slots``, certain occurrences before provisional ones); a Guest call whose early
  twin has not invoked its tool yet *withdraws* it and runs at once; and only a settled
  outcome of the tool itself is ever claimed: early work the lane's own limits ended
  (``LaneStopped``: its timeout, which waits it shared with other work may have eaten) is
  never handed to the program, whose own call runs instead.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Self

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from occurrences import CallKey, OccurrenceId

from ._observation import Disposition, LaneStopped, Observation, ObservationState
from ._slots import Slots
from ._state import State

if TYPE_CHECKING:
    from ._graph import EventGraph, Node

_SETTLEABLE = frozenset({State.DISPATCHED, State.FOLLOWING, State.COMPLETED, State.FAILED})
"""Node states that still await a disposition."""

Execute = Callable[["Node", Observation], Awaitable[object]]
"""Runs one early call against the frozen root. It calls ``observation.probe.invoke()``
right before the tool runs and runs nothing when that says the call was withdrawn (raising
``LaneStopped``); it sets ``probe.in_thread`` when it hands the call to a thread (and
``thread_done`` when that returns), raises ``LaneStopped`` when the lane's own limits end
the call, and may use the observation's id and key to label its trace."""


@dataclass(frozen=True, slots=True)
class LanePolicy:
    """How much early work one run may do."""

    concurrency: int = 8
    """Early calls executing at once; further dispatched calls queue in source order."""
    budget: int = 64
    """Early physical calls per run; past it, ready occurrences are left to the Guest."""
    allow_discardable: bool = False
    """Whether occurrences under an unresolved branch may run early (wasted if not taken)."""
    provisional: bool = True
    """Whether calls found in a statement that is still streaming may run early (inside an
    unfinished block, or complete elements of an unfinished expression; every iteration of
    a loop over known items whose body is still streaming). Their own text is final, but
    the rest of the statement may still make them conditional, rebind what they read or
    ``break`` the loop: then the early call is wasted, accounted ``orphaned`` or
    ``cancelled`` (at most ``budget`` of them). Branch writes found there follow it too
    (``scheduler._branches``: withdrawn, ``discarded``, when the statement says otherwise)."""
    share_formal: bool = True
    """Whether an equal-key Guest call may reuse a completed formal observation
    (``effectful_cse`` on a frozen root; pure and immutable_read only)."""
    branch_writes: bool = True
    """Whether writes to a run-private branch (a ``Workspace``) may run early on a
    speculative layer of it, claimed in program order (``scheduler._branches``)."""


@dataclass(frozen=True, slots=True)
class LaneStatistics:
    """An immutable snapshot of the lane's accounting."""

    dispatched: int
    physical: int
    claimed: int
    shared: int
    cancelled: int
    late: int
    orphaned: int
    discarded: int
    time_saved: float


class SpeculativeLane:
    """Dispatches the graph's ready frontier and serves claims.

    Use as ``async with SpeculativeLane(...) as lane:``; leaving the block cancels all
    unfinished early work, waits for it to stop, and fixes every early observation's
    disposition (``dispositions()``). Cancelling the enclosing scope does the same.
    """

    def __init__(
        self,
        graph: EventGraph,
        execute: Execute,
        policy: LanePolicy | None = None,
        *,
        may_dispatch: Callable[[Node], bool] | None = None,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        self._graph = graph
        self._execute = execute
        self._policy = policy or LanePolicy()
        self._may_dispatch = may_dispatch
        self._clock = clock
        self._slots = Slots(self._policy.concurrency)
        self._tg: TaskGroup | None = None
        self._closed = False
        # key -> the observation serving it; one per key (later equal keys attach to it).
        self._table: dict[CallKey, Observation] = {}
        self._early: list[Observation] = []
        self._formal: list[Observation] = []
        self._time_saved = 0.0
        # Called when the lane closes, before dispositions are fixed (branch layers).
        self._closers: list[Callable[[], None]] = []
        self._pumps: list[Callable[[], None]] = []  # also run by every ``pump``
        self._withdrawn: set[OccurrenceId] = set()  # occurrences the graph withdrew (``withdraw``)

    @property
    def policy(self) -> LanePolicy:
        """The policy this lane dispatches under (``BranchSpeculation`` follows it too)."""
        return self._policy

    def on_pump(self, pump: Callable[[], None]) -> None:
        """Run ``pump`` after each ``pump`` of the frontier (``BranchSpeculation.pump``):
        when statements are accepted and whenever early work ends."""
        self._pumps.append(pump)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Call ``closer`` when the lane closes, after its work stopped and before the
        dispositions are fixed (``BranchSpeculation`` marks its dropped layers there)."""
        self._closers.append(closer)

    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        self._closed = True
        for obs in self._early:
            if not obs.done.is_set():
                obs.cancel_requested = True
        self._tg.cancel_scope.cancel()
        try:
            return await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            for closer in self._closers:
                closer()
            self._settle()
            # A closed lane pumps and closes nothing again: dropping the hooks breaks the
            # reference cycles through them (a branch speculation holds the lane), so the
            # run's structures go when the run does instead of waiting for a full GC.
            self._closers.clear()
            self._pumps.clear()

    def _settle(self) -> None:
        """Record each early observation's disposition on every node it served.

        Followers first: settling a leader ``cancelled`` would otherwise promote a follower.
        """
        for obs in self._early:
            disposition = obs.disposition()
            for node_id in obs.node_ids:
                node = self._graph.node(node_id)
                for follower_id in node.followers:
                    if self._graph.node(follower_id).state in _SETTLEABLE:
                        self._graph.settle(follower_id, disposition)
                if node.state in _SETTLEABLE:
                    self._graph.settle(node_id, disposition)

    # -- dispatch ---------------------------------------------------------------------

    def pump(self) -> None:
        """Dispatch every newly ready occurrence the policy admits (source order)."""
        if self._closed or self._tg is None:
            return
        self.withdraw(self._graph.take_withdrawn())
        for node in self._graph.take_ready():
            self._consider(node)
        for pump in self._pumps:
            pump()

    def _eligible(self, node: Node) -> bool:
        if node.key is None or not node.effect.speculable or not node.pre_write:
            return False
        if node.discardable and not self._policy.allow_discardable:
            return False
        if node.provisional and not self._policy.provisional:
            return False
        return self._may_dispatch is None or self._may_dispatch(node)

    def _consider(self, node: Node) -> None:
        if node.state is not State.READY:
            return  # changed since it was handed out in this batch (branch died, now follows)
        if not self._eligible(node):
            return
        assert node.key is not None
        existing = self._table.get(node.key)
        if existing is not None and existing.lane == "speculative":
            # Equal keys share one physical observation; the graph normally dedups already.
            existing.node_ids.append(node.id)
            self._graph.mark_dispatched(node.id)
            if existing.settled:
                self._deliver(existing, node.id)
            return
        if len(self._early) >= self._policy.budget:
            return
        obs = Observation(id=self._next_id(), key=node.key, lane="speculative", node_ids=[node.id])
        self._table[node.key] = obs
        self._early.append(obs)
        self._graph.mark_dispatched(node.id)
        self._start(obs, functools.partial(self._execute, node, obs))

    def withdraw(self, node_ids: Iterable[OccurrenceId]) -> None:
        """The graph found these dispatched occurrences unreachable (``take_withdrawn``:
        a ``break``, a branch not taken, a superseded parse nothing newer wants). An early
        observation all of whose occurrences are withdrawn is stopped now (``_stop``: out
        of the claim table, so a Guest call with its key runs itself; its task cancelled,
        so its concurrency slot is free in the same step), accounted ``cancelled``
        (``late`` for a thread that cannot be interrupted). One that ended is left as it is."""
        for node_id in node_ids:
            self._withdrawn.add(node_id)
            key = self._graph.node(node_id).key
            obs = self._table.get(key) if key is not None else None
            if (
                obs is None
                or obs.lane != "speculative"
                or node_id not in obs.node_ids
                or obs.done.is_set()
            ):
                continue
            if all(n in self._withdrawn for n in obs.node_ids):
                self._stop(obs)

    def start_on_view(
        self, key: CallKey, run: Callable[[Observation], Awaitable[object]]
    ) -> Observation | None:
        """Start early work the graph does not offer: a read after a write, on the view the
        Guest's write left (``scheduler.Respeculation``). ``key`` is the key the Guest's call
        will have on that view, so the claim stays exact; ``run`` executes it there.

        Returns None, starting nothing, when the lane is closed, the budget is spent, or
        ``key`` already has an observation. Counted, cancelled and settled like all early work.
        """
        if (
            self._closed
            or self._tg is None
            or key in self._table
            or len(self._early) >= self._policy.budget
        ):
            return None
        obs = Observation(id=self._next_id(), key=key, lane="speculative")
        self._table[key] = obs
        self._early.append(obs)
        self._start(obs, functools.partial(run, obs))
        return obs

    def start_on_layer(
        self, key: CallKey, layer: int, run: Callable[[Observation], Awaitable[object]]
    ) -> Observation | None:
        """Start early work on version ``layer`` of a speculative branch layer
        (``scheduler._branches``): a write there, or a read of what it shows. As
        ``start_on_view`` (same refusals); the work can later be ``discard``ed."""
        if (
            self._closed
            or self._tg is None
            or key in self._table
            or len(self._early) >= self._policy.budget
        ):
            return None
        obs = Observation(id=self._next_id(), key=key, lane="speculative", layer=layer)
        self._table[key] = obs
        self._early.append(obs)
        self._start(obs, functools.partial(run, obs))
        return obs

    def discard(self, obs: Observation) -> None:
        """The branch layer ``obs`` ran on was dropped: no Guest call may claim it from now
        on, and work still running on it is cancelled (accounted ``discarded``)."""
        obs.discarded = True
        self._stop(obs)

    def _stop(self, obs: Observation) -> None:
        """No Guest call may claim ``obs`` from now on; work still running is cancelled."""
        if self._table.get(obs.key) is obs:
            del self._table[obs.key]
        if obs.scope is not None and not obs.done.is_set():
            obs.cancel_requested = True
            obs.scope.cancel()

    def _start(self, obs: Observation, run: Callable[[], Awaitable[object]]) -> None:
        assert self._tg is not None
        obs.scope = anyio.CancelScope()
        self._tg.start_soon(self._observe, obs, run)

    def _next_id(self) -> int:
        return len(self._early) + len(self._formal) + 1

    async def _observe(self, obs: Observation, run: Callable[[], Awaitable[object]]) -> None:
        assert obs.scope is not None
        with obs.scope:
            try:
                held = [await self._acquire(obs)]
                obs.probe.yield_slot = functools.partial(self._yield_slot, held)
                try:
                    obs.move(ObservationState.RUNNING)
                    obs.started = self._clock()
                    obs.value = await run()
                finally:
                    self._yield_slot(held)
                    obs.probe.yield_slot = None  # (it holds the lane: no cycle outlives the call)
            except anyio.get_cancelled_exc_class():
                self._stopped(obs)
                raise
            except LaneStopped:
                self._stopped(obs)
            except Exception as exc:  # the tool's failure is a settled outcome, held for claims
                obs.error = exc
                obs.move(ObservationState.FAILED)
            else:
                obs.move(ObservationState.SUCCEEDED)
            finally:
                obs.finished = self._clock()
                obs.done.set()
        if obs.settled:
            for node_id in obs.node_ids:
                self._deliver(obs, node_id)
        self.pump()

    def _yield_slot(self, held: list[bool]) -> None:
        """Give back the slot one early call holds (once: ``held[0]`` says it still does)."""
        if held[0]:
            held[0] = False
            self._slots.release()

    @staticmethod
    def _stopped(obs: Observation) -> None:
        """``obs`` ended without an outcome of its tool: cancelled, or, when its tool runs
        on in a thread nobody can interrupt, abandoned (accounted ``late``)."""
        obs.cancel_requested = True
        if obs.state is ObservationState.QUEUED:
            obs.move(ObservationState.CANCELLED)
        elif obs.probe.invoked and obs.probe.in_thread and not obs.probe.thread_done:
            obs.move(ObservationState.ABANDONED)
        else:
            obs.move(ObservationState.CANCELLED)

    async def _acquire(self, obs: Observation) -> bool:
        """A slot of the lane's concurrency, taken at once when one is free (no trip round
        the loop: every early call, and each read re-speculated after a write, would start
        one trip late), else in turn, occurrences the program will certainly reach before
        provisional ones. A lane cancelled before the call starts still starts nothing.

        Returns whether a slot was taken: a call the Guest already waits for (``urged``, see
        ``claim``) runs at once without one, because it is the program's own call now."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self._slots.try_take():
            return True
        if obs.probe.urged:
            return False
        obs.probe.queued = True
        try:
            await self._slots.take(functools.partial(self._provisional, obs))
        finally:
            obs.probe.queued = False
        return True

    def _provisional(self, obs: Observation) -> bool:
        """Whether every occurrence ``obs`` serves is still provisional (none is certain)."""
        if not obs.node_ids:
            return False  # work the graph does not offer (a read on a view, a layer): certain
        return all(self._graph.node(node_id).provisional for node_id in obs.node_ids)

    def _deliver(self, obs: Observation, node_id: OccurrenceId) -> None:
        if obs.state is ObservationState.SUCCEEDED:
            self._graph.complete(node_id, obs.value)
        else:
            self._graph.fail(node_id)

    # -- claims -----------------------------------------------------------------------

    async def claim(self, key: CallKey) -> Observation | None:
        """The settled observation for ``key``, waiting while its tool runs; ``None`` if
        there is none: the caller then runs the call itself.

        ``None`` also when the observation ended without an outcome of its tool (cancelled,
        or ``LaneStopped``), and when it waits behind other early work (for a slot of the
        lane, or a thread): then it is withdrawn (cancelled, out of the table), so the
        Guest's call never waits behind a slot, a thread or a queue of early work. Early
        work that has not begun but waits for nothing (its task not stepped yet, a batch
        still taking members) is *urged* instead: it runs at once, outside the lane's bound,
        takes only a free thread (else it stops, ``LaneStopped``, and the caller runs the
        call), and is waited for. Cancellation while waiting propagates; the observation is
        untouched.
        """
        obs = self._table.get(key)
        if obs is None:
            return None
        start = self._clock()
        if not obs.done.is_set():  # a set event's wait is still a trip round the loop
            probe = obs.probe
            if obs.lane == "speculative" and not probe.invoked:
                if not probe.queued:
                    # On its way to the tool (its task not stepped yet, its thread about to
                    # start), or held back on purpose (a batch still taking members): it
                    # starts now and waits for nothing.
                    probe.urged = True
                    if probe.urge is not None:
                        probe.urge()
                elif probe.withdraw():
                    self._stop(obs)  # it waits behind early work: the Guest's call runs now instead
                    return None
            await obs.done.wait()
        if not obs.settled:
            return None
        waited = self._clock() - start
        obs.claims += 1
        assert obs.started is not None and obs.finished is not None
        self._time_saved += (obs.finished - obs.started) - waited
        return obs

    def begin_formal(self, key: CallKey) -> Observation:
        """Register a Guest call that runs now; equal keys later may claim it (if sharing)."""
        obs = Observation(id=self._next_id(), key=key, lane="formal", claims=1)
        obs.probe.invoked = True  # the Guest's own call: it runs now, never withdrawn
        obs.move(ObservationState.RUNNING)
        obs.started = self._clock()
        self._formal.append(obs)
        if self._policy.share_formal:
            self._table[key] = obs
        return obs

    def end_formal(
        self, obs: Observation, value: object = None, error: BaseException | None = None
    ) -> None:
        """Settle a formal observation. A failed one is not shared: the next equal call runs
        again, exactly as it would in a sequential run."""
        obs.value, obs.error = value, error
        if error is not None:
            obs.move(ObservationState.FAILED)
            if self._table.get(obs.key) is obs:
                del self._table[obs.key]
        else:
            obs.move(ObservationState.SUCCEEDED)
        obs.finished = self._clock()
        obs.done.set()

    # -- accounting -------------------------------------------------------------------

    def observations(self) -> list[Observation]:
        """Early then formal observations, each in creation order."""
        return [*self._early, *self._formal]

    def dispositions(self) -> dict[int, Disposition]:
        """Disposition of every early observation, by observation id (after close)."""
        return {obs.id: obs.disposition() for obs in self._early}

    def statistics(self) -> LaneStatistics:
        counts = dict.fromkeys(Disposition, 0)
        for obs in self._early:
            counts[obs.disposition()] += 1
        every = self.observations()
        return LaneStatistics(
            dispatched=len(self._early),
            physical=sum(obs.physical for obs in every),
            claimed=counts[Disposition.CLAIMED],
            shared=sum(max(0, obs.claims - 1) for obs in every),
            cancelled=counts[Disposition.CANCELLED],
            late=counts[Disposition.LATE],
            orphaned=counts[Disposition.ORPHANED],
            discarded=counts[Disposition.DISCARDED],
            time_saved=self._time_saved,
        )
