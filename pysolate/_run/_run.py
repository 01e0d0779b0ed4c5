"""One run, built complete: program → event graph → speculative lane; seal; Guest; result.

Every run is this one path with different inputs: ``run_stream`` reads a stream,
``run_source`` gives the source whole (sealed before anything starts); ``speculate=False``
gives the scope the ``SEQUENTIAL`` claim table and discovers nothing; a session's turn
gives the session's Guest, its objects (the session's workspace layers), the globals the
earlier turns left and their carried early results. The order of events is the
correctness contract made operational (docs/contract.md):

1. While the program is read (``_stream_run``), accepted statements grow the event graph
   and the lane starts the ready, eligible occurrences (``_early.EarlyCalls``). The Guest
   starts meanwhile (``_guest_start``), so its start-up hides behind the stream; it is
   given nothing.
2. Once the source is sealed the Guest runs it. Each call goes through the run scope's
   handler, which claims an exact-key early result or runs the call then (``RunScope``).
   Without a sealed source the Guest never receives one: no write, live read or unknown
   call happens.
3. Leaving the lane cancels unclaimed early work and fixes every early observation's
   disposition; the result carries the receipts, the report and the run's timeline.

The run owns one event stream (``pysolate.tracing.events``): its timeline and observation
records are listeners of it (``_run_record``), beside the listeners of the trace the Host's
instrument started; its call sites report to ``stream.for_calls``.

The parts are made in dependency order, each given what it uses when it is made: the
run's objects, its early calls, the graph and lane over them, the followers of its writes
and its branch speculation, and last the scope, given the lane as its claim table. None of
them holds the scope, so a finished run is freed by reference counting alone (at 500
concurrent runs a cycle through the run was the largest part of the Host's CPU).

Cancellation by the caller propagates: the lane's and the Guest's tasks are cancelled, the
Guest process is killed (``aclose`` is shielded), nothing is left behind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio

from occurrences import PriorGlobals, Snapshot
from scheduler import BranchSpeculation, EventGraph, LanePolicy, Respeculation, SpeculativeLane

from .._calls._broker import RunScope
from .._calls._registry import Registry
from .._calls._run_objects import SEQUENTIAL, RunObjects
from .._calls._sharing import HostSharing, RunSharing
from .._guest_api import GuestLimits, GuestOutcome
from .._report._result import RunReport, RunResult, RunStatus
from .._workspace._workspace import run_workspaces
from ..passes import BatchFusion, PassConfig, PassOutcome
from ..streams import CodeReader
from ..tracing import RunTrace
from ..tracing.events import GuestEnded, GuestStarted, stream_of
from ._early import Carried, EarlyCalls
from ._guest_start import RunGuest
from ._layers import RunLayers
from ._run_record import (
    RecordsListener,
    TimelineListener,
    account_interrupted,
    record,
    settle_traces,
)
from ._stream_run import Discovery, Unsealed, apply_passes, lens_of, read_stream, seal_whole

_STATUS = {"ok": RunStatus.OK, "error": RunStatus.ERROR}
"""Guest statuses that are outcomes of the program; every other one aborts the run."""


@dataclass(frozen=True, slots=True, eq=False)
class HostRuns:
    """What every run of one Host is given: its registry and the Host's run-wide settings."""

    registry: Registry
    trace_run: Callable[[str | None], RunTrace]
    sharing: HostSharing | None
    passes: PassConfig | None
    limits: GuestLimits
    setup_warnings: Callable[[], tuple[str, ...]]


class Run:
    """One run's parts (see the module docstring); ``execute`` runs it once."""

    def __init__(
        self,
        host: HostRuns,
        guest: RunGuest,
        *,
        run_id: str,
        trace: RunTrace,
        speculate: bool = True,
        policy: LanePolicy | None = None,
        limits: GuestLimits | None = None,
        targets: Mapping[str, object] | None = None,
        prior: PriorGlobals | None = None,
        carried: Carried | None = None,
        hold: Callable[[RunSharing], None] | None = None,
    ) -> None:
        """``targets``, ``prior``, ``carried``: a session turn's objects, the globals earlier
        turns left and their carried early results (``_session``); ``hold``: told, when the
        program never sealed, of the shared calls its early work waits on (before the lane
        closes, so a session keeps them running for the retry)."""
        registry, policy = host.registry, policy or LanePolicy()
        self.run_id, self.guest, self._hold = run_id, guest, hold
        self.timeline, self.records = TimelineListener(), RecordsListener()
        self.stream = stream = stream_of(trace, (self.timeline, self.records), run_id)
        trace = stream.for_calls  # (the null hooks when no listener follows calls)
        self.speculate = speculate
        self.passes = (
            host.passes if speculate else None
        )  # (the sequential reference runs the sealed source)
        self.objects = objects = RunObjects(registry, targets)
        self.sharing = sharing = (
            host.sharing.for_run(run_id, trace, objects.targets(), formal=policy.share_formal)
            if speculate and host.sharing is not None
            else None
        )
        config = self.passes
        self.batcher = batcher = (
            BatchFusion(registry, config.batch_fusion)
            if config is not None and config.batch_fusion
            else None
        )
        self.early = early = EarlyCalls(
            registry,
            objects,
            trace,
            speculate=speculate,
            sharing=sharing,
            batcher=batcher,
            carried=carried,
        )
        # A run that does not speculate discovers nothing: its graph stays empty (no specs to build).
        self.graph = graph = EventGraph(
            registry.method_specs() if speculate else {}, registry.root_key_for, prior
        )
        self.lane = lane = SpeculativeLane(
            graph, early.run, policy, may_dispatch=early.may_dispatch
        )
        follow = (
            Respeculation(
                graph,
                lane,
                objects.key_for,
                early.on_view,
                allow_discardable=policy.allow_discardable,
            )
            if speculate
            else None
        )
        self.branches = (
            _branch_writes(registry, objects, graph, lane, policy, early)
            if speculate and policy.branch_writes
            else None
        )
        self.scope = RunScope(
            objects,
            trace=trace,
            sharing=host.sharing,
            max_bytes=(limits or host.limits).max_host_bytes,
            claims=lane if speculate else SEQUENTIAL,
            branches=self.branches,
            on_written=None if follow is None else follow.written,
            run_sharing=sharing,
            early_traces=early.traces,
        )
        self.discovery = Discovery(
            graph, lane, stream, 0.0, lens_of(registry, config), grow=speculate
        )

    async def execute(self, program: CodeReader | str) -> RunResult:
        """Run ``program`` (a stream, or a complete source) once; see ``Host.run_stream``."""
        scope, lane, guest, stream = self.scope, self.lane, self.guest, self.stream
        scope.start()
        t0 = self.discovery.t0 = scope.started_at
        final: Snapshot | None = None
        failure: Unsealed | None = None
        if isinstance(program, str):
            try:
                final = seal_whole(program)  # before the Guest starts: nothing of it runs
            except Unsealed as exc:
                failure = exc
        outcome: GuestOutcome | None = None
        guest_started = guest_ended = None
        entered = False
        pass_outcomes: tuple[PassOutcome, ...] = ()
        started = failure is None  # a source that does not compile starts no Guest
        async with anyio.create_task_group() as tg:
            if started:
                tg.start_soon(guest.start)
            try:
                async with lane:
                    entered = True
                    try:
                        if failure is not None:
                            raise failure
                        if final is not None:
                            await self.discovery.whole(final)
                        else:
                            assert isinstance(program, CodeReader)
                            final = await read_stream(program, self.discovery, tg)
                            tg.start_soon(program.drain)
                    except Unsealed as exc:
                        failure, final = exc, None
                        if self._hold is not None and self.sharing is not None:
                            self._hold(
                                self.sharing
                            )  # before the lane closes: its shared calls run on for the retry
                    else:
                        source = final.source
                        if self.passes is not None:
                            source, pass_outcomes = apply_passes(
                                self.objects.registry, self.passes, final
                            )
                        await guest.ready()
                        guest_started = anyio.current_time() - t0
                        stream.report(GuestStarted(guest_started))
                        outcome = await guest.run(source, scope.handler)
                        guest_ended = anyio.current_time() - t0
                        stream.report(GuestEnded(guest_ended))
            except (
                BaseException
            ) as exc:  # the caller's cancellation, or a Host bug: account, re-raise
                account_interrupted(
                    stream, scope, lane if entered and self.speculate else None, exc
                )
                raise
            finally:
                if isinstance(program, CodeReader):
                    await program.aclose()
                if started:
                    await guest.aclose()
        return self._result(final, failure, outcome, guest_started, guest_ended, pass_outcomes)

    def _result(
        self,
        final: Snapshot | None,
        failure: Unsealed | None,
        outcome: GuestOutcome | None,
        guest_started: float | None,
        guest_ended: float | None,
        pass_outcomes: tuple[PassOutcome, ...],
    ) -> RunResult:
        scope, lane, batcher = self.scope, self.lane, self.batcher
        wall = anyio.current_time() - scope.started_at
        stats = lane.statistics()
        calls = scope.calls
        reused = self.early.reused
        early_physical = sum(
            1
            for o in lane.observations()
            if o.lane == "speculative" and o.physical and o.id not in reused
        )
        if batcher is not None:
            early_physical -= batcher.statistics().physical_saved
            if outcome is not None and final is not None:
                pass_outcomes = (*pass_outcomes, batcher.outcome(final.source))
        report = RunReport(
            logical=len(calls),
            physical=scope.physical + early_physical,
            claimed=sum(1 for c in calls if c.lane == "claimed"),
            direct=sum(1 for c in calls if c.lane == "direct"),
            shared=stats.shared,
            cancelled=stats.cancelled,
            late=stats.late,
            orphaned=stats.orphaned,
            discarded=stats.discarded,
            early_writes=self.branches.statistics().writes if self.branches is not None else 0,
            reruns=scope.reruns,
            host_shared=sum(1 for c in calls if c.shared_from is not None),
            wall_seconds=wall,
            guest_seconds=(guest_ended - guest_started)
            if guest_ended is not None and guest_started is not None
            else 0.0,
            tool_seconds=sum(c.duration for c in calls),
            time_saved=stats.time_saved,
            passes=pass_outcomes,
        )
        settle_traces(scope, lane)
        record(
            self.stream, lane, scope.started_at, calls
        )  # after every call's events, before the end
        if failure is not None:
            # No Guest ran: there is no branch to return (as ``run_source`` of a rejected source).
            result = RunResult(
                status=failure.status,
                error=failure.error,
                calls=calls,
                report=report,
                run_id=self.run_id,
            )
        else:
            assert outcome is not None and final is not None
            result = dataclasses.replace(
                result_from(outcome, scope, report), source=final.source, run_id=self.run_id
            )
        error_type = result.error.type if result.error else None
        self.stream.ended(
            result.status.value, counts=report.counts(), error_type=error_type, at=wall
        )
        return result.with_speculation(self.timeline.timeline(), self.records.observations())


def result_from(outcome: GuestOutcome, scope: RunScope, report: RunReport) -> RunResult:
    """The result of a run whose Guest produced ``outcome``.

    Its workspace branches are open when the run ended ``ok``; otherwise the writes are
    partial and each branch is ``UNCOMMITTABLE`` (``commit`` raises ``CommitError``
    saying how the run ended; inspecting and discarding still work).
    """
    status = _STATUS.get(outcome.status, RunStatus.ABORTED)
    return RunResult(
        status=status,
        value=outcome.value,
        stdout=outcome.stdout,
        error=outcome.error,
        calls=scope.calls,
        report=report,
        isolation=outcome.isolation,
        guest_status=outcome.status,
        # A session turn's layers are the session's to keep or drop (``Session``).
        workspaces=run_workspaces(
            scope.targets(), "ok" if scope.session_turn else status.value, outcome.error
        ),
    )


def _branch_writes(
    registry: Registry,
    objects: RunObjects,
    graph: EventGraph,
    lane: SpeculativeLane,
    policy: LanePolicy,
    early: EarlyCalls,
) -> BranchSpeculation | None:
    """Speculation of the run's branch writes (None when no capability has a branch)."""
    roots = {name: reg.obj for name, reg in registry.registrations.items()}
    layers = RunLayers(objects, roots, early.on_layer)
    if not layers.capabilities():
        return None
    branches = BranchSpeculation(
        graph,
        lane,
        layers,
        layers.capabilities(),
        allow_discardable=policy.allow_discardable,
        may_dispatch=early.may_dispatch,
    )
    lane.on_pump(branches.pump)
    return branches
