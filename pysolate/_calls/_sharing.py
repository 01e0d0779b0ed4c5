"""Work shared across runs on one Host: which calls may share, and how a run uses the table.

Contract rule 8 (docs/contract.md): sharing is the effect's consequence. A ``pure`` result (same version,
same arguments) may serve any run, an ``immutable_read`` result only runs whose view names
the same frozen root; nothing else is ever shared. So a call enters the Host's observation
table (``scheduler._shared``) only when

- its effect is ``pure`` or ``immutable_read`` (``live_read``, ``write``, ``unknown``: never);
- its key's view is the *root's* view: the registered object's own ``view_of`` for that call
  (a ``Workspace`` root's id names its frozen contents; a git root's, its commit), or, for a
  capability without views, ``epoch:0`` while the run calls the registered object itself.
  A branch's view (``<root>+w<seq>``) is never shared: two runs' branches both reach ``+w1``
  with different contents. Different roots have different ids, so they never share;
- for ``immutable_read``: no run has called a method that may write on the capability's
  registered object (``HostSharing.taint``). An object every run writes is no frozen root:
  from the first such call its reads are no longer shared on this Host (``pure`` ones still are).

How a run uses the table (``RunSharing``): an early call finds a settled success (a fresh
copy, at once), an open entry of another run's (it waits on it, as on its own early twin:
its lane sees a queued call until that call's tool runs, contract 7), or nothing (it opens an
entry whose call runs in a task of its own, outside the run, and waits on it like any other
run). A program's own call finds a success (a copy), an entry whose tool runs (it waits),
an entry still queued (it takes the call over: ``SharedProbe.adopt``, the queued work never
runs and every waiter gets this call's outcome), or nothing (its call is an entry others may
wait on). A failed or stopped call of another run's is never anyone else's outcome: a
waiter, early or the program's, makes its own call at once (outside the table), as its
sequential run would; an early waiter keeps its lane's slot while it waits, for that call. Every run gets fresh copies and its own receipts;
a receipt says whose call served it (``CallRecord.shared_from``, that run's id).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import fields

import anyio
import anyio.lowlevel

from occurrences import CallKey, Effect, fresh_copy
from scheduler import (
    EntryState,
    LaneStopped,
    Observation,
    ObservationTable,
    Probe,
    SharedCall,
    TableStatistics,
)

from .._guest_api import ToolFailure
from ..tracing import ObservationTrace, RunTrace
from ._execute import BoundCall, Registration
from ._share_config import ShareConfig, ShareStatistics, estimated_chars


class HostSharing:
    """The observation tables of one Host (one per event loop) and what it admits."""

    def __init__(self, config: ShareConfig, registrations: Mapping[str, Registration]) -> None:
        self.config = config
        self._registrations = registrations  # the Host's own (it grows as the Host registers)
        self._tables: dict[anyio.lowlevel.EventLoopToken, ObservationTable] = {}
        self._retired: list[TableStatistics] = []  # the counts of tables ``aclose`` forgot
        self._tainted: set[str] = set()
        self._lock = threading.Lock()  # runs on several loops (threads) taint and make tables

    def table(self) -> ObservationTable:
        """The running event loop's table."""
        token = anyio.lowlevel.current_token()
        table = self._tables.get(token)
        if table is None:
            with self._lock:
                table = self._tables.setdefault(
                    token,
                    ObservationTable(
                        ttl=self.config.ttl,
                        max_entries=self.config.max_entries,
                        max_chars=self.config.max_chars,
                    ),
                )
        return table

    def taint(self, capability: str) -> None:
        """A call that may write reached ``capability``'s registered object: its
        ``immutable_read`` calls are never shared again on this Host (entries open now keep
        the waiters they have)."""
        if capability not in self._tainted:
            with self._lock:
                self._tainted.add(capability)

    def tainting(
        self, registrations: Mapping[str, Registration], targets: Mapping[str, object]
    ) -> frozenset[str]:
        """The capabilities of a run whose writes reach the registered object itself (no
        views, not run-scoped): such a root is not frozen, so its first write ``taint``s it."""
        return frozenset(
            n for n, r in registrations.items() if not r.viewed and targets[n] is r.obj
        )

    def shares(self, call: BoundCall) -> bool:
        """Whether ``call``'s effect lets it share (the view is the caller's to check)."""
        effect = call.spec.effect
        return effect is Effect.PURE or (
            effect is Effect.IMMUTABLE_READ and call.capability not in self._tainted
        )

    def for_run(
        self, run_id: str, trace: RunTrace, targets: Mapping[str, object], *, formal: bool
    ) -> RunSharing:
        """One run's use of the table; ``formal``: its program's own calls use it too."""
        return RunSharing(self, run_id, trace, targets, formal=formal)

    async def aclose(self) -> None:
        """Cancel the shared calls still running on this event loop and wait for them; forget
        every table (runs after this start afresh). Other loops' calls end with their loops."""
        try:
            token: anyio.lowlevel.EventLoopToken | None = anyio.lowlevel.current_token()
        except RuntimeError:
            token = None
        table = self._tables.get(token) if token is not None else None
        if table is not None:
            await table.aclose()
        with self._lock:
            self._retired += [t.statistics() for t in self._tables.values()]
            self._tables.clear()

    def statistics(self) -> ShareStatistics:
        with self._lock:
            every = [*self._retired, *(table.statistics() for table in self._tables.values())]
        totals = dict.fromkeys((f.name for f in fields(TableStatistics)), 0)
        for stats in every:
            for name in totals:
                totals[name] += getattr(stats, name)
        return ShareStatistics(tainted=tuple(sorted(self._tainted)), **totals)

    def spawn(
        self,
        table: ObservationTable,
        entry: SharedCall,
        run: Callable[[Probe], Awaitable[object]],
        span: ObservationTrace,
    ) -> None:
        """Run ``entry``'s early call in a task of its own, outside every run (it serves
        whichever runs wait on it; ``ObservationTable.leave`` cancels it when none does)."""
        entry.scope = anyio.CancelScope()
        table.started_task(entry)
        physical = functools.partial(_physical, table, entry, run, span, self.config.max_chars)
        context = contextvars.copy_context()  # what the starting run's own call would have seen
        loop = anyio.lowlevel.current_token().native_token
        if isinstance(loop, asyncio.AbstractEventLoop):
            entry.task = loop.create_task(physical(), context=context)
        else:
            import trio  # the only other backend anyio has

            trio.lowlevel.spawn_system_task(physical, context=context)


async def _physical(
    table: ObservationTable,
    entry: SharedCall,
    run: Callable[[Probe], Awaitable[object]],
    span: ObservationTrace,
    max_chars: int,
) -> None:
    """The task of one shared early call: run it, settle the entry, never raise (a trio
    system task must not). A call a program's own call adopted settles nothing: its result
    is meaningless (a withdrawn thread's is None) and the adopter settles the entry."""
    probe = entry.probe
    try:
        assert entry.scope is not None
        with entry.scope:
            try:
                with span.activated():
                    value = await run(probe)
            except LaneStopped as exc:
                if not probe.withdrawn:
                    span.completed(error=exc)
                    table.settle(entry, stopped=True)
            except (
                Exception
            ) as exc:  # the tool's failure (``ToolFailure``): its owner's outcome only
                if not probe.withdrawn:
                    span.completed(error=exc)
                    table.settle(entry, error=exc)
            else:
                if not probe.withdrawn:
                    span.completed(result=value)
                    table.settle(entry, value=value, chars=estimated_chars(value, max_chars))
    except BaseException:
        pass
    finally:
        if entry.state is EntryState.OPEN and not probe.withdrawn:
            table.settle(entry, stopped=True)
        table.finished_task(entry)


class _NotServed(Exception):
    """The call an early waiter waited on, another run's, failed or stopped."""


class RunSharing:
    """One run's use of its Host's table (see the module docstring)."""

    def __init__(
        self,
        host: HostSharing,
        run_id: str,
        trace: RunTrace,
        targets: Mapping[str, object],
        *,
        formal: bool,
    ) -> None:
        self._host = host
        self.run_id = run_id
        self._trace = trace
        self._targets = targets
        self._formal = formal
        self._following: dict[SharedCall, None] = {}  # open entries its early calls wait on
        self._served_count = 0  # its program's calls another run's call served (their trace ids)

    # -- admission ----------------------------------------------------------------------

    def admits_early(self, call: BoundCall) -> bool:
        """An early call against the root (its key's view is the root's by construction)."""
        return self._host.shares(call)

    def admits_formal(self, call: BoundCall, key: CallKey) -> bool:
        """A program's own call whose key names the root's view (see the module docstring)."""
        if not self._formal or not self._host.shares(call):
            return False
        registration = self._host._registrations[call.capability]
        if registration.viewed:
            return key.view == registration.obj.view_of(call.method, call.arguments)  # type: ignore[attr-defined]
        return self._targets[call.capability] is registration.obj and key.view == "epoch:0"

    # -- early calls ----------------------------------------------------------------------

    async def early(
        self,
        obs: Observation,
        call: BoundCall,
        run: Callable[[Probe], Awaitable[object]],
        traces: dict[int, ObservationTrace],
    ) -> object:
        """Serve early ``obs`` through the table; ``run(probe)`` makes the physical call
        against the root. When another run's call it waited on failed or stopped (never this
        run's outcome), it makes its own call at once. Raises what ``run`` raises for the
        run's own call, ``LaneStopped`` when its program already waits for it and the shared
        call is queued. Cancellation leaves
        the entry (its call goes on for other waiters, or is cancelled with the last)."""
        table = self._host.table()
        table.asked()
        entry = table.find(obs.key)
        if entry is not None and entry.owner == self.run_id:
            return await run(obs.probe)  # its own call (a key it withdrew): the lane's business
        if entry is not None and entry.state is EntryState.SUCCEEDED:
            if not obs.probe.invoke():
                raise LaneStopped("withdrawn before it was served")
            table.served()
            obs.shared_from = entry.owner
            span = traces[obs.id] = self._span(call, obs, entry)
            span.completed(result=entry.value)
            return fresh_copy(entry.value)
        if entry is not None:
            if obs.probe.urged and not entry.probe.started:
                raise LaneStopped("its program waits for it, and the shared call is still queued")
            span = traces[obs.id] = self._span(call, obs, entry)
            try:
                return await self._follow(table, entry, obs, span, own=False)
            except _NotServed:
                obs.shared_from = None  # its own call, from here on
            # Another run's call failed or stopped: never this run's outcome, so it makes its
            # own call now, as its sequential run would (in the slot it held while waiting).
            span = traces[obs.id] = self._span(call, obs, None)
            try:
                with span.activated():
                    value = await run(obs.probe)
            except BaseException as exc:
                span.completed(error=exc)
                raise
            span.completed(result=value)
            return value
        entry = table.open(obs.key, self.run_id, "speculative")
        entry.probe.urged = obs.probe.urged
        span = traces[obs.id] = self._span(call, obs, None)
        entry.trace = span
        self._host.spawn(table, entry, run, span)
        return await self._follow(table, entry, obs, span, own=True)

    def _span(
        self, call: BoundCall, obs: Observation, served: SharedCall | None
    ) -> ObservationTrace:
        """The trace of an early call: its physical call's (``served`` None) or, waiting on
        another run's, linked to that call's span."""
        return self._trace.observation_started(
            call.capability,
            call.method,
            call_id=f"early-{obs.id}",
            lane="speculative",
            effect=call.spec.effect.value,
            call_key=obs.key.digest(),
            arguments=call.arguments,
            shared_from=None if served is None else served.owner,
            served_by=None if served is None else served.trace,  # type: ignore[arg-type]
        )

    async def _follow(
        self,
        table: ObservationTable,
        entry: SharedCall,
        obs: Observation,
        span: ObservationTrace,
        *,
        own: bool,
    ) -> object:
        # A waiter keeps its lane's slot, as its own call would: if the call it waits on fails,
        # it makes its own in that slot (``early``), within its run's concurrency.
        # Another run's call is no physical work of this one's, whatever its end (``shared_from``).
        table.join(entry, obs.probe, counted=not own)
        if not own:
            obs.shared_from = entry.owner
        self._following[entry] = None
        try:
            await entry.wait()
        except BaseException as exc:
            thread_runs_on = table.leave(entry, obs.probe) and entry.waiters == 0
            if own and thread_runs_on:
                # nobody waits, but its thread cannot be stopped: ``late``
                obs.probe.in_thread = True
            # (a call that runs on for other runs' waiters is theirs now: this run stopped
            # waiting for it in time, its early work ends ``cancelled``)
            if not own:
                span.completed(error=exc)
            raise
        finally:
            self._following.pop(entry, None)
        table.leave(entry, obs.probe)
        other = entry.owner != self.run_id
        if entry.state is EntryState.SUCCEEDED:
            obs.shared_from = entry.owner if other else None
            if other:  # (its own call's span, if it started the entry, was never run: a program's call took it over)
                span.completed(result=entry.value)
            return fresh_copy(entry.value)
        if not other:  # the outcome of this run's own call (its task traced it)
            if entry.error is not None:
                raise entry.error
            raise LaneStopped(f"{obs.key.capability}.{obs.key.method} stopped early")
        if not own:
            span.completed(error=entry.error or "the shared call stopped")
            raise _NotServed  # (``early`` makes its own call)
        # This run's own call, taken over by another run's program and ended without an
        # outcome for this run: nothing is claimed and its program makes its own call.
        raise LaneStopped(
            f"the shared call of run {entry.owner} ended without an outcome for this run"
        )

    def hold(self) -> list[tuple[ObservationTable, SharedCall]]:
        """Keep the open entries this run's early calls wait on running after the run ends
        (a session's rejected turn, for its retry): each held as one more waiter until
        ``release``d."""
        held = []
        for entry in self._following:
            if entry.state is EntryState.OPEN:
                table = self._host.table()
                table.join(entry, counted=False)
                held.append((table, entry))
        return held

    # -- the program's own calls ----------------------------------------------------------

    async def formal(
        self, call: BoundCall, key: CallKey, own: Callable[[], Awaitable[object]]
    ) -> tuple[object, str | None]:
        """The program's call of ``key``, through the table: ``(value, the id of the run whose
        physical call served it, or None for its own)``. ``own()`` makes the call; it is
        made (and its errors raised) unless another run's call serves it. Cancellation
        while waiting on another run's call leaves that call to its other waiters."""
        table = self._host.table()
        table.asked()
        entry = table.find(key)
        if entry is None:
            entry = table.open(key, self.run_id, "formal")
            entry.probe.adopt()  # started: others wait on it
            return await self._settle(table, entry, own), None
        if entry.state is EntryState.SUCCEEDED:
            table.served()
            return self._served(call, key, entry)
        if entry.probe.adopt():  # queued early work: this call is its physical call now
            entry.owner, entry.lane = self.run_id, "formal"
            if entry.scope is not None:
                entry.scope.cancel()
            return await self._settle(table, entry, own), None
        table.join(entry)
        try:
            await entry.wait()
        finally:
            table.leave(entry)
        if entry.state is EntryState.SUCCEEDED:
            return self._served(call, key, entry)
        return await own(), None  # its failure or stop is not this call's outcome: call again

    def _served(
        self, call: BoundCall, key: CallKey, entry: SharedCall
    ) -> tuple[object, str | None]:
        other = entry.owner if entry.owner != self.run_id else None
        if other is not None:
            self._served_count += 1
            span = self._trace.observation_started(
                call.capability,
                call.method,
                call_id=f"shared-{self._served_count}",
                lane="formal",
                effect=call.spec.effect.value,
                call_key=key.digest(),
                arguments=call.arguments,
                shared_from=other,
                served_by=entry.trace,  # type: ignore[arg-type]
            )
            span.completed(result=entry.value)
        return fresh_copy(entry.value), other

    async def _settle(
        self, table: ObservationTable, entry: SharedCall, own: Callable[[], Awaitable[object]]
    ) -> object:
        try:
            value = await own()
        except ToolFailure as failure:
            table.settle(entry, error=failure)
            raise
        except BaseException:
            table.settle(entry, stopped=True)
            raise
        # The receipt and the program get ``value``: the table keeps a copy of its own.
        table.settle(
            entry,
            value=fresh_copy(value),
            chars=estimated_chars(value, self._host.config.max_chars),
        )
        return value


def release(held: list[tuple[ObservationTable, SharedCall]]) -> None:
    """Let go of entries ``RunSharing.hold`` kept (each cancelled if nobody else waits)."""
    for table, entry in held:
        table.leave(entry)
    held.clear()
