"""``capability_batch_fusion``: ready early calls of one method share one physical batch call.

A lane pass: it changes how early physical work is done, never the program. The Host
declares the law (``BatchLaw``) on a pure or immutable-read method ``m``:
``m(x_i, **rest)`` ≡ ``batch([x_1, ..., x_n], **rest)[i]``, where element ``i`` is the
value, or the exception the single call would raise (an exception per element).

The speculative lane dispatches each ready occurrence as its own observation, as always,
so claims, receipts, keys and dispositions stay per logical occurrence. Each observation's
executor hands its call to ``BatchFusion.submit``: the first call of a group (same
capability, method, and all arguments but the batched one) opens a batch and waits at most
``BatchPolicy.max_wait`` for more; a batch closes early at ``max_size``. One physical call
then serves every member. When it cannot serve them exactly (it raised, timed out, or
returned something that is not one element per member), every member falls back to its own
single call: slower, never different. A batch of one is just the single call.

Bound: the lane's ``LanePolicy.concurrency`` slots are held by members while they wait, so a
batch never has more than ``concurrency`` members; that is the lane's bound on early work,
and this pass does not widen it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from occurrences import NotPlain, canonical_arguments, fresh_copy
from occurrences.plain import dumps
from scheduler import Probe

from .._calls._broker import BoundCall, bind
from .._calls._crossing import MAX_RESULT_CHARS, failure_from, in_thread, is_tool_exception
from .._guest_api import ToolFailure
from ..tracing import source_hash
from ._framework import Applied, NotApplicable, PassOutcome

if TYPE_CHECKING:
    from .._calls._broker import Registration
    from .._calls._threads import WorkerThreads


class BatchHost(Protocol):
    """What batch fusion needs of the Host (``pysolate.Host`` implements it): the
    capabilities' batch laws, the root to run on, the call timeout and worker threads."""

    call_timeout: float
    threads: WorkerThreads

    def registration(self, name: str) -> Registration: ...

    async def call_root(
        self, capability: str, method: str, call: BoundCall, *, probe: Probe | None = None
    ) -> object: ...


NAME = "capability_batch_fusion"


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    """Bounds of one batch."""

    max_size: int = 16
    """Members of one batch call; a full batch is sent at once."""
    max_wait: float = 0.002
    """Seconds the first member of a batch waits for others before the batch is sent."""


@dataclass(frozen=True, slots=True)
class BatchStatistics:
    """An immutable snapshot of one run's batching."""

    batch_calls: int  # physical batch calls started (served, failed or cancelled)
    members: int  # early occurrences whose batch call started (each counts as one observation)
    served: int  # of those, answered by an element of their batch call
    fallbacks: int  # single calls members made after their started batch could not serve them

    @property
    def physical_saved(self) -> int:
        """Physical calls avoided, against one call per early observation (negative when
        failed batches cost extra calls)."""
        return self.members - self.batch_calls - self.fallbacks


_FALLBACK = object()  # a member's outcome when the batch could not serve it

_NO_QUEUE = Probe()
"""A sync batch call takes a free early thread or none (then its members fall back to
single calls): a claim of a member waits for the batch, so the batch never queues."""
_NO_QUEUE.urged = True


@dataclass(slots=True, eq=False)
class _Batch:
    group: tuple[object, ...]
    calls: list[BoundCall] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    outcomes: list[object] | None = None  # value, ToolFailure, or _FALLBACK per member; set once
    sent: bool = False  # the physical batch call started
    full: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)


class BatchFusion:
    """The batching executor of one run (one per ``run_stream``)."""

    def __init__(self, host: BatchHost, policy: BatchPolicy | None = None) -> None:
        self._host = host
        self._policy = policy or BatchPolicy()
        self._open: dict[tuple[object, ...], _Batch] = {}  # group -> batch still taking members
        self._batch_calls = 0
        self._members = 0
        self._served = 0
        self._fallbacks = 0
        self._versions: set[str] = set()

    def fusable(self, call: BoundCall) -> bool:
        """Whether ``call``'s method declares a batch law (checked at registration)."""
        return self._host.registration(call.capability).methods[call.method].batch is not None

    async def submit(self, call: BoundCall, probe: Probe) -> object:
        """The result of ``call`` (a pure or immutable-read call against the root).

        Raises ``ToolFailure`` as the single call would. Cancellation propagates; a batch
        whose sender is cancelled lets its other members fall back to single calls.
        """
        law = self._host.registration(call.capability).methods[call.method].batch
        assert law is not None
        rest = {k: v for k, v in call.arguments.items() if k != law.param}
        group = (call.capability, call.method, canonical_arguments(rest))
        batch = self._open.get(group)
        if batch is None:
            batch = self._open[group] = _Batch(group)
            index = self._join(batch, call, probe)
            try:
                with anyio.move_on_after(self._policy.max_wait):
                    await batch.full.wait()
                self._close(batch)
                await self._send(batch)
            finally:
                self._close(batch)  # also when cancelled while waiting: nobody may join it now
                if batch.outcomes is None:
                    batch.outcomes = [_FALLBACK] * len(batch.calls)
                batch.done.set()
        else:
            index = self._join(batch, call, probe)
            await batch.done.wait()
        assert batch.outcomes is not None
        outcome = batch.outcomes[index]
        if outcome is _FALLBACK:
            if batch.sent:
                self._fallbacks += 1
            probe.urge = None  # a single call from here on: a claim withdraws it or waits for it
            return await self._host.call_root(call.capability, call.method, call, probe=probe)
        if isinstance(outcome, ToolFailure):
            raise ToolFailure(outcome.type_name, outcome.message, outcome.exc_args)
        return fresh_copy(outcome)

    def _join(self, batch: _Batch, call: BoundCall, probe: Probe) -> int:
        """Add a member. Only the first (the sender) keeps its slot of the lane: the batch is
        one physical call. A Guest call that claims a member sends the batch at once."""
        if batch.calls and probe.yield_slot is not None:
            probe.yield_slot()
        probe.urge = batch.full.set
        batch.calls.append(call)
        batch.probes.append(probe)
        if len(batch.calls) >= self._policy.max_size:
            batch.full.set()
            self._close(batch)
        return len(batch.calls) - 1

    def _close(self, batch: _Batch) -> None:
        """Take no more members into ``batch``."""
        if self._open.get(batch.group) is batch:
            del self._open[batch.group]

    async def _send(self, batch: _Batch) -> None:
        if len(batch.calls) == 1:
            batch.outcomes = [_FALLBACK]  # a batch of one is the single call itself
            return
        first = batch.calls[0]
        reg = self._host.registration(first.capability)
        single = reg.methods[first.method]
        law = single.batch
        assert law is not None
        target = reg.methods[law.method]
        rest = {k: v for k, v in first.arguments.items() if k != law.param}
        values = [c.arguments[law.param] for c in batch.calls]
        try:
            call = bind(reg, law.method, (values,), rest)
        except (AttributeError, TypeError, ValueError):
            batch.outcomes = [_FALLBACK] * len(batch.calls)
            return
        batch.sent = True
        self._batch_calls += 1
        self._members += len(batch.calls)
        self._versions.update(
            {
                f"{first.capability}.{first.method}@{single.version}",
                f"{first.capability}.{law.method}@{target.version}",
                f"{first.capability}.{first.method}.batch@{law.version}",
            }
        )
        fn: Any = getattr(reg.obj, law.method)
        raw: object = None
        failed = True
        timeout, threads = self._host.call_timeout, self._host.threads
        try:
            if target.is_async:
                _invoke(batch.probes)
                threads.early_began(first.capability)
                try:
                    with anyio.move_on_after(timeout):
                        raw = await fn(*call.args, **call.kwargs)
                        failed = False
                finally:
                    threads.early_ended(first.capability)
            else:
                for probe in batch.probes:
                    probe.in_thread = True
                counted = threads.counting(
                    first.capability, functools.partial(fn, *call.args, **call.kwargs)
                )
                work = functools.partial(_probed, batch.probes, in_thread(counted))
                finished, raw = await threads.run(
                    work,
                    early=True,
                    what=f"{first.capability}.{law.method}",
                    timeout=timeout,
                    probe=_NO_QUEUE,
                )
                failed = not finished
        except BaseException as exc:  # the batch as a whole failed: each member runs its own call
            if not is_tool_exception(exc):
                raise
        outcomes = None if failed else _elements(raw, len(batch.calls))
        if outcomes is None:
            batch.outcomes = [_FALLBACK] * len(batch.calls)
            return
        self._served += len(batch.calls)
        batch.outcomes = outcomes

    def statistics(self) -> BatchStatistics:
        return BatchStatistics(self._batch_calls, self._members, self._served, self._fallbacks)

    def outcome(self, source: str) -> PassOutcome:
        """The pass's record for the run report."""
        stats = self.statistics()
        if not stats.served:
            return NotApplicable(
                NAME, "no two ready occurrences of a method with a batch law were fused"
            )
        digest = source_hash(source)
        return Applied(
            NAME,
            digest,
            digest,
            "m(x_i, **rest) == batch([x_1..x_n], **rest)[i]",
            tuple(sorted(self._versions)),
            f"{stats.served} occurrences in {stats.batch_calls} batch calls; {stats.fallbacks} fell back",
        )


def _invoke(probes: list[Probe]) -> None:
    """The batch call is about to run for its members (a member withdrawn meanwhile was
    cancelled: its share of the batch is simply not used)."""
    for probe in probes:
        probe.invoke()


def _probed(probes: list[Probe], work: Callable[[], object]) -> object:
    _invoke(probes)
    try:
        return work()
    finally:
        for probe in probes:
            probe.thread_done = True


def _elements(raw: object, n: int) -> list[object] | None:
    """One checked, copied outcome per member; None when ``raw`` cannot serve them exactly."""
    if not isinstance(raw, list | tuple) or len(raw) != n:
        return None
    out: list[object] = []
    for element in raw:
        if isinstance(element, Exception):
            out.append(failure_from(element))
            continue
        try:
            size = len(dumps(element))
        except NotPlain:
            return None
        if size > MAX_RESULT_CHARS:
            return None
        out.append(fresh_copy(element))
    return out
