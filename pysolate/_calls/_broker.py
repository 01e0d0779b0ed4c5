"""The Host side of Guest calls: binding, views, one physical-execution path, receipts.

Every real execution of a capability method (``_execute.execute``), early (``Registry.call_root``) or formal
(``RunScope.call``), goes through ``execute``, so both lanes check plain data, copy values
and translate failures identically:

- arguments are plain data that can cross and are copied before the tool sees them,
  results are checked, bounded and copied before anyone else does (``_crossing``;
  contract 4: no aliasing between the program, the receipts and Host state);
- sync methods run in a worker thread (``_threads``: early and formal calls have separate
  budgets, abandoned threads are counted and bounded), async ones are awaited; cancellation is never wrapped (a sync call is abandoned, not interrupted);
- a tool exception, ``BaseException`` included, becomes ``ToolFailure(type name, str,
  plain args)``, which the Guest re-raises as the matching builtin or a ``ToolError``
  (``_guest_errors.rebuild_exception``); only the caller's cancellation propagates;
- a call slower than ``call_timeout`` raises ``TimeoutError`` in the program when it only
  reads; when it may write, its outcome is unknown (``OutcomeUnknown``) and it is never
  retried (contract 6).

A ``RunScope`` is the Guest's side of one run: its handler claims or runs each call and
records it (``_receipts``), against the run's objects and write epochs (``_run_objects``),
given the run's claim table when it is made (``_run.Run``). Nothing about a run lives on
the Host, so runs share a Host freely.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from occurrences import CallKey, fresh_copy, tool_name
from scheduler import BranchSpeculation, Observation

from .._guest_api import ToolFailure
from .._report._result import CallOutcome
from .._tools._capability import CapabilityMethod
from ..tracing import NULL_RUN, ObservationTrace, RunTrace
from ._crossing import failure_from
from ._execute import (
    CALL_TIMEOUT,
    BoundCall,
    OutcomeUnknown,
    Registration,
    RunScoped,
    Viewed,
    bind,
    call_key,
    execute,
)
from ._receipts import SCALARS, WRITES, Receipts
from ._run_objects import SEQUENTIAL, Claims, RunObjects

if TYPE_CHECKING:
    from ._sharing import HostSharing, RunSharing

__all__ = [
    "CALL_TIMEOUT",
    "BoundCall",
    "Claims",
    "OutcomeUnknown",
    "Registration",
    "RunScope",
    "RunScoped",
    "Viewed",
    "bind",
    "call_key",
    "execute",
    "failure_from",
]


class RunScope(Receipts):
    """The Guest's side of one run; its ``handler`` is what the Guest calls.

    The Guest makes one call at a time (``_guest_api``), so a scope needs no lock.
    """

    def __init__(
        self,
        objects: RunObjects,
        *,
        trace: RunTrace = NULL_RUN,
        sharing: HostSharing | None = None,
        max_bytes: int | None = None,
        claims: Claims = SEQUENTIAL,
        branches: BranchSpeculation | None = None,
        on_written: Callable[[str, CallKey], object] | None = None,
        run_sharing: RunSharing | None = None,
        early_traces: dict[int, ObservationTrace] | None = None,
    ) -> None:
        """``objects``: the run's objects, views and epochs (``_run_objects``), which its
        early work shares. ``sharing``: the Host's observation table, told when a call that
        may write reaches a registered object (``HostSharing.taint``). ``max_bytes``: the
        run's byte budget (``GuestLimits.max_host_bytes``; None: unbounded).

        A speculating run's parts (built before its scope, so none of them holds it):
        ``claims``, its lane (default ``SEQUENTIAL``: every call runs when the program makes
        it); ``branches``, its branch-write speculation; ``on_written``, told when a Guest
        call that may write returned or failed, so reads that follow it can start on the new
        view (``scheduler.Respeculation``); ``run_sharing``, its use of the Host's table;
        ``early_traces``, the trace of each early observation by id, so claims link to it."""
        registry = objects.registry
        super().__init__(objects.registrations, objects.target_map, max_bytes)
        self._objects = objects
        self._encode = registry.encode
        self.trace = trace
        self.session_turn = objects.session_turn
        # the objects' own: a formal write counts in the epoch early work sees
        self._epochs = objects.epochs
        # told of writes that reach a registered object (``HostSharing.tainting``)
        self._host_sharing = sharing
        self._tainting = (
            frozenset() if sharing is None else sharing.tainting(self._registrations, self._targets)
        )
        self.sharing = run_sharing
        self._physical = 0
        self._reruns = 0
        self._threads = registry.threads
        self._timeout = registry.call_timeout
        self.claims = claims
        self._speculating = claims is not SEQUENTIAL
        self.branches = branches
        self.on_written = on_written
        self.early_traces: dict[int, ObservationTrace] = (
            {} if early_traces is None else early_traces
        )

    @property
    def physical(self) -> int:
        """Physical executions this scope made."""
        return self._physical

    def targets(self) -> dict[str, object]:
        """The objects formal calls run against, by capability name."""
        return dict(self._targets)

    def bind(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> BoundCall:
        """``bind`` against this run's registrations (same errors)."""
        return self._objects.bind(capability, method, args, kwargs)

    async def call(
        self, capability: str, method: str, call: BoundCall, key: CallKey | None = None
    ) -> object:
        """Execute ``call`` formally, against this run's objects, traced as ``formal``.

        ``execute``'s errors and cancellation behaviour; a call that may write counts
        in its capability's epoch from the moment it starts, whatever its outcome.
        ``key`` (optional) labels the trace.
        """
        return await self._formal(self._registrations[capability].methods[method], call, key)

    def _formal(
        self, cap: CapabilityMethod, call: BoundCall, key: CallKey | None
    ) -> Awaitable[object]:
        """Count the call (epoch, physical) now and return what executes it: ``execute``'s
        own coroutine when there is no trace (no span, no key digest to label it with;
        one coroutine fewer per call), else ``_traced``."""
        capability = call.capability
        if cap.effect in WRITES:
            self._epochs[capability] += 1
            if capability in self._tainting:
                self._host_sharing.taint(capability)  # type: ignore[union-attr]
        self._physical += 1
        if self.trace is NULL_RUN:
            return self._execute(cap, call)
        return self._traced(cap, call, key)

    def _execute(self, cap: CapabilityMethod, call: BoundCall) -> Awaitable[object]:
        """The program's own execution of ``call`` (traced or not)."""
        return execute(
            self._targets[call.capability],
            cap,
            call,
            threads=self._threads,
            early=False,
            timeout=self._timeout,
            encode=self._encode,
            new_scope=self._new_scope,
            clock=self._clock,
            retried=self._rerun,
        )

    def _rerun(self) -> None:
        """A read ran again (``execute``: its timeout may have been early work's): one more
        physical execution."""
        self._physical += 1
        self._reruns += 1

    @property
    def reruns(self) -> int:
        """The program's reads this scope ran again (``RunReport.reruns``)."""
        return self._reruns

    async def _traced(self, cap: CapabilityMethod, call: BoundCall, key: CallKey | None) -> object:
        capability, method = call.capability, call.method
        observation = self.trace.observation_started(
            capability,
            method,
            call_id=f"formal-{self._physical}",
            lane="formal",
            effect=cap.effect.value,
            call_key=key.digest() if key is not None else None,
            arguments=call.arguments,
        )
        try:
            with observation.activated():
                result = await self._execute(cap, call)
        except BaseException as exc:
            observation.completed(error=exc)
            raise
        observation.completed(result=result)
        return result

    async def handler(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        """The ``CallHandler`` given to the Guest: bind, claim or run, record, hand back a copy.

        With a claim table attached (``claims``), a pure or immutable-read call whose exact
        key has early work takes that result (waiting while it runs), or its held failure;
        so does a write of a branch whose early writes it claims in order (``branches``);
        otherwise it runs now. Raises ``ToolFailure`` for whatever the program must see
        raised at the call. Cancellation (the Guest died, the caller gave up) propagates;
        a call it interrupts after the tool was invoked keeps a receipt with outcome
        ``unknown``, because it may have taken effect (contract 6: an ambiguous end is
        reported as such).
        """
        t0 = self._t0
        now = self._now() if t0 is None else self._clock() - t0  # _now(), without its call
        reg = self._registrations.get(capability)
        try:
            if reg is None:
                raise NameError(f"name {capability!r} is not defined")
            call = bind(reg, method, args, kwargs)
        except (AttributeError, NameError, TypeError, ValueError) as exc:
            refused = failure_from(exc)
            self._record(capability, method, args, kwargs, None, None, "error", None, refused, now)
            raise refused from None
        key = CallKey(
            capability,
            method,
            call.spec.version,
            call.canonical,
            self._objects.view_of(capability, method, call),
        )  # call_key
        if (
            self.branches is not None
            and call.spec.effect.may_write
            and self.branches.branched(capability)
        ):
            early = await self.branches.claim_write(capability, key)  # the branch adopted its layer
            if early is not None:
                self._epochs[capability] += 1
                try:
                    return self._claimed(call, key, early, now)
                finally:
                    self._written(call, key)
        claims = self.claims
        shareable = self._speculating and call.spec.effect.speculable
        if shareable:
            try:
                obs = await claims.claim(key)
            except BaseException:  # cancelled while waiting for early work: still a receipt
                stopped = OutcomeUnknown(
                    "OutcomeUnknown",
                    f"{capability}.{method} was interrupted waiting for its early result",
                )
                self._record(
                    capability,
                    method,
                    call.args,
                    call.kwargs,
                    call,
                    key,
                    "unknown",
                    None,
                    stopped,
                    now,
                )
                raise
            if obs is not None:
                return self._claimed(call, key, obs, now)
            formal = claims.begin_formal(key)
        shared_from = None
        try:
            # its admission is the one gate of the Host's table: contract 8
            sharing = self.sharing
            if sharing is not None and sharing.admits_formal(call, key):
                result, shared_from = await sharing.formal(
                    call, key, lambda: self._formal(reg.methods[method], call, key)
                )
                if shareable:
                    formal.shared_from = shared_from
            else:
                result = await self._formal(reg.methods[method], call, key)
        except ToolFailure as failure:
            if shareable:
                claims.end_formal(formal, error=failure)
            outcome: CallOutcome = "unknown" if isinstance(failure, OutcomeUnknown) else "error"
            self._record(
                capability, method, call.args, call.kwargs, call, key, outcome, None, failure, now
            )
            if outcome == "error":  # it ended; an unknown outcome may still be writing
                self._written(call, key)
            raise
        except BaseException:
            interrupted = OutcomeUnknown(
                "OutcomeUnknown",
                f"{tool_name(capability, method)} was interrupted; it may or may not have taken effect",
            )
            if shareable:
                claims.end_formal(formal, error=interrupted)
            self._record(
                capability,
                method,
                call.args,
                call.kwargs,
                call,
                key,
                "unknown",
                None,
                interrupted,
                now,
            )
            raise
        if shareable:
            claims.end_formal(formal, value=result)
        self._record(
            capability,
            method,
            call.args,
            call.kwargs,
            call,
            key,
            "ok",
            result,
            None,
            now,
            shared_from=shared_from,
        )
        if self.on_written is not None:  # _written's own first test, without its call
            self._written(call, key)
        return result if type(result) in SCALARS else fresh_copy(result)  # a scalar is its own copy

    def _written(self, call: BoundCall, key: CallKey) -> None:
        """A call that may write has ended (returned or raised): no write is in flight on its
        capability until the Guest's next call, so reads on its view may start now."""
        if self.on_written is not None and call.spec.effect.may_write:
            self.on_written(call.capability, key)

    def _claimed(self, call: BoundCall, key: CallKey, obs: Observation, now: float) -> object:
        """Serve a Guest call from early (or shared) work: a fresh copy, or the held failure."""
        trace = self.early_traces.get(obs.id)
        claim = (
            self.trace.claimed(
                call.capability,
                call.method,
                call_id=f"claim-{len(self._calls) + len(self._recorded)}",
                observation=trace,
                call_key=key.digest(),
                arguments=call.arguments,
            )
            if trace is not None
            else None
        )
        if obs.error is not None:
            held = obs.error
            failure = held if isinstance(held, ToolFailure) else failure_from(held)
            again = ToolFailure(failure.type_name, failure.message, failure.exc_args)
            if claim is not None:
                claim.ended(error=again)
            self._record(
                call.capability,
                call.method,
                call.args,
                call.kwargs,
                call,
                key,
                "error",
                None,
                again,
                now,
                lane="claimed",
                observation_id=obs.id,
                shared_from=obs.shared_from,
            )
            raise again
        value = fresh_copy(obs.value)
        if claim is not None:
            claim.ended(result=value)
        self._record(
            call.capability,
            call.method,
            call.args,
            call.kwargs,
            call,
            key,
            "ok",
            fresh_copy(value),
            None,
            now,
            lane="claimed",
            observation_id=obs.id,
            shared_from=obs.shared_from,
        )
        return value
