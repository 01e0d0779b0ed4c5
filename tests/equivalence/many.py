"""Many runs on one Host at once (issue 40): shared physical calls, each run its own.

``many_runs`` streams K generated programs concurrently on one Host that shares work (the
Host's observation table), each started under one of two frozen roots (``ROOT``: ``docs.fetch``
reads the root its run was started under, and its view names that root), some of them
cancelled mid-stream, and compares each finished run with its own sequential run on a
fresh Host. The programs are ``programs``' (overlapping calls, failing ones, writes of the
run's own workspace branch). What would differ between one shared Host and fresh ones by
nature, and not by a bug, is made per run: ``clock``'s ticks and ``shell``'s log are kept in
``RUN``, started where the run's own fresh Host would start them, so the comparison is exact
— and a live read shared across runs (a bug) shows as another run's tick.
"""

from __future__ import annotations

import contextvars
import itertools
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import trio
from trio.testing import MockClock

from occurrences import Effect
from pysolate import Host, RunResult, capability
from pysolate._guest_api import GuestFactory
from pysolate._report._equivalence import observable, same
from pysolate.testing import check_invariants, in_process_guest, memory_workspace

from .harness import FILES, GENERATED_LIMITS, TimedChunks, stream_of
from .oddities import AsyncOdd, Odd
from .programs import Conditions
from .slow_workspace import SlowWorkspace
from .twin import twin_guest

ROOT: contextvars.ContextVar[str] = contextvars.ContextVar("root", default="r1")
"""The frozen root ``docs.fetch`` reads in this run (the runs' tasks each set their own)."""

ROOTS = ("r1", "r2")


@dataclass(slots=True)
class RunLocal:
    """One run's own tool state: what its fresh Host would show it."""

    ticks: itertools.count[int]
    log: list[str] = field(default_factory=list)
    unsafe: list[float] = field(default_factory=list)  # when each clock/shell call started


RUN: contextvars.ContextVar[RunLocal] = contextvars.ContextVar("run")


def run_local(index: int) -> RunLocal:
    """Run ``index``'s tools: its ticks start at a value of its own, so a tick shared with
    another run is never the one its sequential run sees."""
    return RunLocal(itertools.count(1000 * index + 1))


class Docs:
    """``search`` (pure) and ``fetch`` (an immutable read of the run's root, sync in a worker
    thread); the root is its view, so runs on different roots never share a fetch."""

    def __init__(self, failing: frozenset[str], latencies: Mapping[str, float]) -> None:
        self.failing = failing
        self.latencies = latencies
        self.physical: list[tuple[str, str, str]] = []  # (method, argument, root) per execution

    def view_of(self, method: str, arguments: Mapping[str, object]) -> str:
        return f"root-{ROOT.get()}" if method == "fetch" else "static"

    @capability(effect=Effect.PURE, version="1")
    async def search(self, query: str) -> list[str]:
        self.physical.append(("search", query, ""))
        await anyio.sleep(self.latencies.get("docs.search", 0.0))
        if query in self.failing:
            raise LookupError(f"no results for {query!r}")
        return [query + str(i) for i in range(1, 2 + len(query) % 3)]

    def _fetched(self, doc: str) -> str:
        root = ROOT.get()
        self.physical.append(("fetch", doc, root))
        if doc in self.failing:
            raise KeyError(doc)
        return f"<{root}:{doc}>"

    @capability(effect=Effect.IMMUTABLE_READ)
    def fetch(self, doc: str) -> str:
        time.sleep(self.latencies.get("docs.fetch", 0.0))
        return self._fetched(doc)


class AsyncDocs(Docs):
    """``Docs`` without a thread: for the async twin on trio's mock clock."""

    @capability(effect=Effect.IMMUTABLE_READ)
    async def fetch(self, doc: str) -> str:  # type: ignore[override]
        await anyio.sleep(self.latencies.get("docs.fetch", 0.0))
        return self._fetched(doc)


class Clock:
    @capability(effect=Effect.LIVE_READ)
    async def now(self) -> int:
        run = RUN.get()
        run.unsafe.append(anyio.current_time())
        return next(run.ticks)


class Shell:
    @capability()
    async def run(self, cmd: str) -> str:
        run = RUN.get()
        run.unsafe.append(anyio.current_time())
        run.log.append(cmd)
        return f"{len(run.log)}:{cmd[:8]}"


def many_host(
    case: Conditions,
    factory: GuestFactory = in_process_guest,
    *,
    twin: bool = False,
    **host_kwargs: Any,
) -> tuple[Host, Docs]:
    """A Host with the tools above, a memory workspace (one frozen root, a branch per run)
    and ``odd``, under ``case``'s latencies, failures, threads and timeout."""
    docs = (AsyncDocs if twin else Docs)(case.failing, case.latencies)
    host_kwargs.setdefault("limits", GENERATED_LIMITS)
    host = Host(
        guest_factory=factory, threads=case.threads, call_timeout=case.call_timeout, **host_kwargs
    )
    host.register("docs", docs)
    host.register("clock", Clock())
    host.register("shell", Shell())
    latency = case.latencies.get("workspace", 0.0)
    host.register(
        "workspace", SlowWorkspace.of(FILES, latency) if latency else memory_workspace(FILES)
    )
    host.register("odd", AsyncOdd() if twin else Odd())
    return host, docs


@dataclass(frozen=True, slots=True)
class Plan:
    """One of the concurrent runs: its program, root, stream and lane (``stream``'s chunking,
    pauses, markdown and policy; the tools are the Host's), and where it is cancelled."""

    source: str
    root: str
    stream: Conditions
    cancel_after: int | None = None
    """Cancel the run when its stream has sent this many chunks (None: it runs to the end)."""


@dataclass(slots=True)
class Ran:
    index: int
    plan: Plan
    result: RunResult | None  # None: cancelled
    local: RunLocal
    ended: float | None  # when its program was complete in the stream (None: never)
    reference: RunResult | None = None


class _Cancelling:
    """``chunks``, cancelling ``scope`` once ``after`` chunks went out."""

    def __init__(self, chunks: TimedChunks, after: int, scope: anyio.CancelScope) -> None:
        self.chunks, self.after, self.scope = chunks, after, scope

    async def __aiter__(self) -> AsyncIterator[str]:
        sent = 0
        async for chunk in self.chunks:
            if sent == self.after:
                self.scope.cancel()
            yield chunk
            sent += 1


async def run_many(
    plans: list[Plan],
    case: Conditions,
    factory: GuestFactory = in_process_guest,
    *,
    twin: bool = False,
) -> tuple[list[Ran], Host]:
    """Every plan streamed at once on one sharing Host, then each finished one's sequential
    reference on a fresh Host (same root, same run-local tools)."""
    host, _docs = many_host(case, factory, twin=twin)
    runs: list[Ran | None] = [None] * len(plans)

    async def one(index: int, plan: Plan) -> None:
        ROOT.set(plan.root)
        local = run_local(index)
        RUN.set(local)
        chunks = stream_of(plan.source, plan.stream)
        result = None
        with anyio.CancelScope() as scope:
            stream: TimedChunks | _Cancelling = (
                chunks
                if plan.cancel_after is None
                else _Cancelling(chunks, plan.cancel_after, scope)
            )
            result = await host.run_stream(
                stream,
                code="markdown" if plan.stream.markdown else "raw",
                policy=plan.stream.policy,
            )
        runs[index] = Ran(index, plan, result, local, chunks.ended)

    async with anyio.create_task_group() as tg:
        for index, plan in enumerate(plans):
            tg.start_soon(one, index, plan)
    await host.aclose()
    done = [ran for ran in runs if ran is not None]
    for ran in done:
        if ran.result is None:
            continue
        ref_host, _ = many_host(case, factory, twin=twin, share=False)
        root, run = ROOT.set(ran.plan.root), RUN.set(run_local(ran.index))
        try:
            ran.reference = await ref_host.run_source(ran.plan.source, speculate=False)
        finally:
            ROOT.reset(root)
            RUN.reset(run)
    return done, host


def check_many(runs: list[Ran], specs: Mapping[str, Mapping[str, Any]]) -> None:
    """Every finished run equals its own sequential run and keeps the accounting
    invariants; no run (finished or cancelled) called a live read or an unknown tool
    before its program was complete."""
    for ran in runs:
        unsafe_early = [t for t in ran.local.unsafe if ran.ended is None or t < ran.ended]
        assert not unsafe_early, (
            f"a live read or unknown call started before the stream ended:\n{ran.plan.source}"
        )
        if ran.result is None:
            continue
        assert ran.reference is not None
        for result in (ran.result, ran.reference):
            assert result.guest_status != "limit", (
                f"generated program hit a Guest limit:\n{ran.plan.source}\n{result.error}"
            )
        got, want = observable(ran.result), observable(ran.reference)
        for name in want:
            assert same(got[name], want[name]), (
                f"{name} differs (root {ran.plan.root})\nprogram:\n{ran.plan.source}\n"
                f"reference: {want[name]!r}\nshared: {got[name]!r}"
            )
        check_invariants(ran.result, specs)


def many_differential(
    plans: list[Plan], case: Conditions, factory: GuestFactory = in_process_guest
) -> tuple[list[Ran], Host]:
    """``run_many`` in a fresh event loop (asyncio, real time), checked."""
    runs, host = anyio.run(run_many, plans, case, factory)
    check_many(runs, host.method_specs())
    return runs, host


def scheduled_many(plans: list[Plan], case: Conditions, seed: int) -> tuple[list[Ran], Host]:
    """``run_many`` through the async twin on trio's mock clock, the scheduler seeded: the
    whole set of runs replays exactly from its arguments."""
    trio._core._run._r.seed(seed)

    async def main() -> tuple[list[Ran], Host]:
        return await run_many(plans, case, twin_guest, twin=True)

    return anyio.run(
        main, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)}
    )


def run_many_generated(limit: int) -> tuple[int, BaseException | None]:
    """The many-runs property over up to ``limit`` derandomized sets on seeded schedules
    (``scheduled_many``), stopping at the first failing set: how many ran, and the failure."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from .programs import conditions
    from .test_many_runs import plans

    seen = 0

    @settings(
        derandomize=True,
        database=None,
        deadline=None,
        max_examples=limit,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(plans(), conditions(), st.integers(0, 2**32 - 1))
    def prop(sets: list[Plan], case: Conditions, seed: int) -> None:
        nonlocal seen
        seen += 1
        runs, host = scheduled_many(sets, case, seed)
        check_many(runs, host.method_specs())

    try:
        prop()
    except Exception as exc:
        return seen, exc
    return seen, None
