"""One speculating run: stream → prefix parser → event graph → speculative lane; seal; Guest.

The order of events is the correctness contract made operational (docs/contract.md):

1. While chunks arrive, accepted statements grow the event graph and the lane starts the
   ready, eligible occurrences against the frozen roots (``Host.call_root``). The Guest
   process starts meanwhile, so its start-up hides behind the stream; it is given nothing.
2. When the program is complete (``pysolate.streams.CodeReader``: the end of a raw
   stream, the closing fence of the markdown block, the end of the code tool's call) the
   source is sealed (``PrefixParser.close``). A syntax error, no code block or bad tool
   arguments make the run ``rejected``; a stream that raises, is cut (the SDK says the reply
   is incomplete) or stalls (``idle_timeout``, ``deadline``) makes it ``aborted``. Either way
   the Guest never receives a source, so no write, live read or unknown call happens. The
   rest of the stream is drained while the program runs and closed when the run ends.
3. The Guest runs the sealed source. Each call goes through the run scope's handler, which
   claims an exact-key early result or runs the call then (``RunScope.handler``).
4. Leaving the lane cancels unclaimed early work and fixes every early observation's
   disposition; the result carries the receipts, the report and the run's timeline.

Cancellation by the caller propagates: the lane's and the Guest starter's tasks are
cancelled, the Guest process is killed (``aclose`` is shielded), nothing is left behind.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import anyio.abc

from occurrences import (
    CallKey,
    Pending,
    PrefixParser,
    PriorGlobals,
    SealError,
    Snapshot,
    fresh_copy,
)
from scheduler import (
    BranchSpeculation,
    EventGraph,
    LanePolicy,
    Node,
    Observation,
    Probe,
    Respeculation,
    SpeculativeLane,
)

from ._broker import BoundCall, RunScope
from ._guest_api import CallHandler, ErrorInfo, Guest, GuestFactory, GuestLimits, GuestOutcome
from ._layers import RunLayers, call_on_layer
from ._pace import Pacer
from ._result import RunReport, RunResult, RunStatus
from ._run_host import RunHost, new_run_id
from ._run_record import account_interrupted, draw, observations, settle_traces
from ._seal import rejection, seal
from ._sharing import RunSharing
from ._timeline import TimelineRecorder
from .passes import (
    BatchFusion,
    PassConfig,
    PassOutcome,
    apply_source_passes,
    speculative_statements,
)
from .streams import CodeReader, StreamError
from .tracing import RunTrace, source_hash


@dataclass(slots=True)
class _GuestStarter:
    """Starts the Guest in the background; the run takes it once the source is sealed.

    ``aclose`` may come at any point (a rejected stream, the caller cancelling): a start
    still under way is cancelled (the factory kills what it began), a started Guest closed.
    """

    factory: GuestFactory
    capabilities: dict[str, list[str]]
    limits: GuestLimits
    guest: Guest | None = None
    error: BaseException | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    async def start(self) -> None:
        try:
            with self.scope:
                self.guest = await self.factory(self.capabilities, self.limits)
        except Exception as exc:  # reported when the Guest is needed, not before
            self.error = exc
        finally:
            self.ready.set()

    async def take(self) -> Guest:
        if not self.ready.is_set():  # a set event's wait is still a trip round the loop
            await self.ready.wait()
        if self.error is not None:
            raise self.error
        if self.guest is None:
            raise RuntimeError("the Guest start was cancelled")
        return self.guest

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            self.scope.cancel()
            if not self.ready.is_set():
                await self.ready.wait()
            if self.guest is not None:
                await self.guest.aclose()


class TurnHooks(Protocol):
    """What differs when the run is one turn of a session (``pysolate._session``).

    ``prior``: the globals earlier turns left, for discovery. ``new_scope``: the turn's
    scope (its objects: the session's workspace layers). ``execute``: run the sealed program
    in the session's Guest. ``carried``: a settled early observation of an earlier rejected
    turn with this exact key, reused instead of a new physical call (nothing ran in the
    Guest since it was made). ``keep``: the turn ends before its Guest got a program; the
    shared calls its early work waits on (``RunSharing.hold``) are the session's to keep for
    the next turn. ``ended``: the lane and result when the turn ends (not called when the
    caller cancels).
    """

    prior: PriorGlobals | None

    def new_scope(self, trace: RunTrace) -> RunScope: ...
    async def execute(self, program: str, handler: CallHandler) -> GuestOutcome: ...
    def carried(self, key: CallKey) -> Observation | None: ...
    def keep(self, sharing: RunSharing) -> None: ...
    def ended(self, lane: SpeculativeLane, result: RunResult) -> None: ...


class _Aborted(Exception):
    """The stream ended without a sealed source (cut, failed, no code block)."""

    def __init__(self, status: RunStatus, error: ErrorInfo) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error


async def run_stream(
    host: RunHost,
    reader: CodeReader,
    *,
    speculate: bool = True,
    policy: LanePolicy | None = None,
    limits: GuestLimits | None = None,
    turn: TurnHooks | None = None,
) -> RunResult:
    """See ``Host.run_stream``; ``turn``: the run is a turn of a session."""
    run_id = new_run_id()
    trace = host.trace_run(run_id)
    scope = host.new_scope(trace, limits=limits) if turn is None else turn.new_scope(trace)
    scope.start()
    sharing = None
    if speculate and host.sharing is not None:
        sharing = host.sharing.for_run(run_id, trace, scope.targets(), formal=(policy or LanePolicy()).share_formal)
        scope.sharing = sharing
    t0 = scope.started_at
    timeline = TimelineRecorder()
    starter = None if turn is not None else _GuestStarter(host.guest_factory(), host.capabilities(), limits or host.limits)
    graph = EventGraph(host.method_specs(), host.root_key_for, turn.prior if turn is not None else None)
    reused: set[int] = set()  # early observations served by a carried one (nothing physical)
    config = host.passes
    batcher = BatchFusion(host, config.batch_fusion) if config is not None and config.batch_fusion else None
    pass_outcomes: tuple[PassOutcome, ...] = ()

    async def early(node: Node, obs: Observation, on_view: bool = False, layer: object = None) -> object:
        """One early call: against the root, or (``on_view``, a read after a write the Guest
        made) against the run's own object, on the view that write left, or on ``layer``,
        a speculative layer of the run's branch (``scheduler._branches``)."""
        call = host.bind(node.site.capability, node.site.method, node.args or (), node.kwargs or {})
        # A layer's view ids are of this run's lineage only: never served from another turn.
        held = turn.carried(obs.key) if turn is not None and layer is None else None
        if (
            held is None and sharing is not None and layer is None and not on_view
            and (batcher is None or not batcher.fusable(call)) and sharing.admits_early(call)
        ):  # against the root: through the Host's table, which other runs share (contract 8)
            return await sharing.early(obs, call, functools.partial(_on_root, host, call), scope.early_traces)
        span = trace.observation_started(
            call.capability,
            call.method,
            call_id=f"early-{obs.id}",
            lane="speculative" if layer is None else "branch",
            effect=call.spec.effect.value,
            call_key=obs.key.digest(),
            arguments=call.arguments,
        )
        scope.early_traces[obs.id] = span
        if held is not None and obs.probe.invoke():  # (counted as the record of its serving)
            reused.add(obs.id)
            if held.error is not None:
                span.completed(error=held.error)
                raise held.error
            span.completed(result=held.value)
            return fresh_copy(held.value)
        try:
            with span.activated():
                if layer is not None:
                    value = await call_on_layer(host, layer, call, obs.probe)
                elif on_view:
                    value = await scope.call_on_view(call, probe=obs.probe)
                elif batcher is not None and batcher.fusable(call):
                    value = await batcher.submit(call, obs.probe)
                else:
                    value = await host.call_root(call.capability, call.method, call, probe=obs.probe)
        except BaseException as exc:
            span.completed(error=exc)
            raise
        span.completed(result=value)
        return value

    def may_dispatch(node: Node) -> bool:
        if node.provisional and batcher is not None:
            return False  # a loop's reads wait for the loop, to be fused into one batch
        return speculate and scope.may_speculate(node.site.capability)

    outcome: GuestOutcome | None = None
    failure: _Aborted | None = None
    guest_started: float | None = None
    guest_ended: float | None = None
    entered: SpeculativeLane | None = None
    async with anyio.create_task_group() as tg:
        if starter is not None:
            tg.start_soon(starter.start)
        try:
            async with SpeculativeLane(graph, early, policy, may_dispatch=may_dispatch) as lane:
                entered = lane
                scope.claims = lane if speculate else None
                if speculate:
                    follow = Respeculation(
                        graph,
                        lane,
                        scope.key_for,
                        functools.partial(early, on_view=True),
                        allow_discardable=(policy or LanePolicy()).allow_discardable,
                    )
                    scope.on_written = follow.written
                    if (policy or LanePolicy()).branch_writes:
                        scope.branches = _branch_writes(host, scope, graph, lane, policy, may_dispatch, early)
                try:
                    final = await _seal(reader, graph, lane, trace, timeline, t0, tg, _lens(host))
                except _Aborted as exc:
                    failure = exc
                    if turn is not None and sharing is not None:
                        turn.keep(sharing)  # before the lane closes: its shared calls run on for the retry
                else:
                    tg.start_soon(reader.drain)
                    program = final.source
                    if config is not None:
                        program, pass_outcomes = _apply_passes(host, config, final)
                    if starter is not None:
                        guest = await starter.take()
                        guest_started = anyio.current_time() - t0
                        outcome = await guest.run(program, scope.handler)
                    else:
                        assert turn is not None
                        guest_started = anyio.current_time() - t0
                        outcome = await turn.execute(program, scope.handler)
                    guest_ended = anyio.current_time() - t0
        except BaseException as exc:  # the caller's cancellation, or a Host bug: account, re-raise
            account_interrupted(trace, scope, entered, exc)
            raise
        finally:
            await reader.aclose()
            if starter is not None:
                await starter.aclose()
    wall = anyio.current_time() - t0
    draw(timeline, lane, scope, guest_started, guest_ended)
    stats = lane.statistics()
    calls = scope.calls
    early_physical = sum(1 for o in lane.observations() if o.lane == "speculative" and o.physical and o.id not in reused)
    if batcher is not None:
        early_physical -= batcher.statistics().physical_saved
        if outcome is not None:
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
        early_writes=scope.branches.statistics().writes if scope.branches is not None else 0,
        reruns=scope.reruns,
        host_shared=sum(1 for c in calls if c.shared_from is not None),
        wall_seconds=wall,
        guest_seconds=(guest_ended - guest_started) if guest_ended is not None and guest_started is not None else 0.0,
        tool_seconds=sum(c.duration for c in calls),
        time_saved=stats.time_saved,
        passes=pass_outcomes,
    )
    settle_traces(scope, lane)
    if failure is not None:
        # No Guest ran: there is no branch to return (as ``run_source`` of a rejected source).
        result = RunResult(status=failure.status, error=failure.error, calls=calls, report=report, run_id=run_id)
    else:
        assert outcome is not None
        result = dataclasses.replace(host.result_from(outcome, scope, report), source=final.source, run_id=run_id)
    result = result.with_speculation(timeline.freeze(wall), observations(lane, scope.started_at))
    if turn is not None:
        turn.ended(lane, result)
    trace.ended(result.status.value, counts=report.counts(), error_type=result.error.type if result.error else None)
    _release(scope)
    return result


def _on_root(host: RunHost, call: BoundCall, probe: Probe) -> Awaitable[object]:
    """``call`` executed early against the root (a shared call's physical execution)."""
    return host.call_root(call.capability, call.method, call, probe=probe)


def _release(scope: RunScope) -> None:
    """Unhook the ended run's lane and followers from its scope. They hold the scope (the
    early closures, ``key_for``, the layers), so the links back make one reference cycle of
    the whole run, which only a full collection frees; at 500 concurrent runs those were the
    largest part of the Host's CPU (docs/benchmarks.md). Nothing calls the handler now."""
    scope.claims = None
    scope.on_written = None
    scope.branches = None
    scope.sharing = None


async def _seal(
    reader: CodeReader,
    graph: EventGraph,
    lane: SpeculativeLane,
    trace: RunTrace,
    timeline: TimelineRecorder,
    t0: float,
    task_group: anyio.abc.TaskGroup,
    lens: Callable[[Sequence[ast.stmt]], Sequence[ast.stmt]] | None = None,
) -> Snapshot:
    """Read the program, growing the graph as statements are accepted; return the seal.
    The stream's watchdog runs in ``task_group`` (the run's), so the seal need not wait
    for it to return."""
    parser = PrefixParser()
    first: float | None = None
    pacer = Pacer()

    async def discover(statements: Sequence[ast.stmt]) -> None:
        """One statement at a time, the loop let run between them once a slice is spent."""
        for statement in statements:
            graph.add_statements([statement])
            lane.pump()
            await pacer.pace()

    async def accept(snapshot: Snapshot | None) -> None:
        if snapshot is not None:
            new = snapshot.new_statements
            await discover(lens(new) if lens is not None else new)
            total = snapshot.first_new + len(new)  # len(statements) would materialize them all
            trace.snapshot_accepted(statements=total, new_statements=len(new), chars=snapshot.end)
            timeline.mark("stream", f"{total} statements", anyio.current_time() - t0, "snapshot")
        # The statement still streaming: its complete parts, for discovery only (under the
        # pushdown lens a call is final only with the projection after its ")").
        found = parser.pending(at_paren=lens is None)
        if found is not None:
            if lens is not None:
                found = Pending(list(lens(found.statements)), found.limit)
            graph.add_provisional(found)
            lane.pump()

    try:
        async with reader.watched(task_group):
            while (text := await reader.read()) is not None:
                pacer.resumed()
                if first is None and text:
                    first = anyio.current_time() - t0
                await accept(parser.feed(text))
    except StreamError as exc:
        raise _Aborted(RunStatus(exc.status), ErrorInfo(type(exc).__name__, str(exc), None)) from exc
    except Exception as exc:
        raise _Aborted(RunStatus.ABORTED, ErrorInfo(type(exc).__name__, f"the stream failed: {exc}", None)) from exc
    end = anyio.current_time() - t0
    timeline.bar("stream", "tokens", first if first is not None else end, end, "stream")
    try:
        final = parser.close()
        # Some errors only the compiler finds (``return`` outside a function); the Guest
        # must never receive a source it would reject.
        seal(final.source, _tree(final))
    except SealError as exc:
        raise _Aborted(RunStatus.REJECTED, rejection(exc)) from exc
    await discover(lens(final.new_statements) if lens is not None else final.new_statements)
    trace.sealed(source_hash(final.source), statements=len(final.statements), chars=final.end)
    timeline.mark("stream", "sealed", end, "seal")
    return final


def _branch_writes(
    host: RunHost,
    scope: RunScope,
    graph: EventGraph,
    lane: SpeculativeLane,
    policy: LanePolicy | None,
    may_dispatch: Callable[[Node], bool],
    early: Callable[..., Awaitable[object]],
) -> BranchSpeculation | None:
    """Speculation of the run's branch writes (None when no capability has a branch)."""
    roots = {name: host.registration(name).obj for name in host.capabilities()}
    layers = RunLayers(scope, roots, lambda node, obs, layer: early(node, obs, layer=layer))
    if not layers.capabilities():
        return None
    branches = BranchSpeculation(
        graph,
        lane,
        layers,
        layers.capabilities(),
        allow_discardable=(policy or LanePolicy()).allow_discardable,
        may_dispatch=may_dispatch,
    )
    lane.on_pump(branches.pump)
    return branches


def _lens(host: RunHost) -> Callable[[Sequence[ast.stmt]], Sequence[ast.stmt]] | None:
    """How discovery reads accepted statements: as the pushdown pass will derive them, or
    (None) as they are."""
    if host.passes is None or not host.passes.projection_pushdown:
        return None
    declarations = {name: host.registration(name).methods for name in host.capabilities()}
    return functools.partial(speculative_statements, capabilities=declarations)


def _tree(final: Snapshot) -> ast.Module:
    """The sealed source's module, from the statements the prefix parser already built."""
    return ast.Module(body=list(final.statements), type_ignores=[])


def _apply_passes(host: RunHost, config: PassConfig, final: Snapshot) -> tuple[str, tuple[PassOutcome, ...]]:
    """The program the Guest runs: the sealed source or its derived form (``pysolate.passes``)."""
    passes = config.source_passes()
    if not passes:
        return final.source, ()
    declarations = {name: host.registration(name).methods for name in host.capabilities()}
    derived = apply_source_passes(final.source, _tree(final), passes, declarations)
    return derived.source, derived.outcomes
