"""Work shared across runs on one Host (issue 40): ``Host(share=...)``, receipts that name the
run whose call served them, per-run and per-Host counts, a rejected turn's reads kept for its
retry, later turns served while the root is unchanged, traces linked to the serving call."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pysolate import Effect, Host, RunResult, ShareConfig, capability
from pysolate.testing import (
    Script,
    check_invariants,
    differences,
    in_process_guest,
    in_process_session,
    memory_workspace,
    scripted_tool,
)
from pysolate.tracing import OTelInstrument
from pysolate.tracing import attributes as A

pytestmark = pytest.mark.anyio

FILES = {"a.txt": "alpha", "b.txt": "beta"}


async def chunks(text: str, size: int = 6, delay: float = 0.005) -> AsyncIterator[str]:
    for i in range(0, len(text), size):
        await anyio.sleep(delay)
        yield text[i : i + size]


def make_host(
    *, share: bool | ShareConfig = True, latency: float = 0.05, **host_args: object
) -> tuple[Host, object]:
    docs = scripted_tool(
        search=Script(lambda q: [q, q.upper()], effect=Effect.PURE, version="1", latency=latency),
        clock=Script(lambda: 7, effect=Effect.LIVE_READ),
    )
    host = Host(
        guest_factory=in_process_guest, session_factory=in_process_session, share=share, **host_args
    )  # type: ignore[arg-type]
    host.register("docs", docs)
    host.register("workspace", memory_workspace(FILES))
    return host, docs


PROGRAM = (
    "a = docs.search('x')\nt = workspace.read_text('a.txt')\nn = docs.clock()\n"
    + "# thinking\n" * 4
    + "[a, t, n]\n"
)


async def run_many(host: Host, source: str, k: int) -> list[RunResult]:
    results: list[RunResult] = []

    async def one() -> None:
        results.append(await host.run_stream(chunks(source)))

    async with anyio.create_task_group() as tg:
        for _ in range(k):
            tg.start_soon(one)
    return results


async def test_runs_at_once_share_pure_and_root_reads_but_never_a_live_read() -> None:
    host, docs = make_host()
    results = await run_many(host, PROGRAM, 4)
    reference = await make_host(share=False)[0].run_source(PROGRAM, speculate=False)
    for result in results:
        assert differences(result, reference) == []
        check_invariants(result, host.method_specs())
    assert len(docs.calls_to("search")) == 1  # type: ignore[attr-defined]
    assert len(docs.calls_to("clock")) == 4  # type: ignore[attr-defined]  # a live read: every run's own
    ids = {r.run_id for r in results}
    servers = [c.shared_from for r in results for c in r.calls if c.shared_from is not None]
    assert (
        len(servers) == 2 * 3 and set(servers) <= ids
    )  # search and read_text: one run called, three were served
    assert sum(r.report.host_shared for r in results) == 6
    assert sum(r.report.physical for r in results) == 2 + 4  # one search, one read, four clocks
    stats = host.share_statistics()
    assert (stats.physical, stats.open) == (2, 0)
    assert stats.logical >= 8  # every search and read asked the table (early and formal)


async def test_share_false_is_every_run_for_itself() -> None:
    host, docs = make_host(share=False)
    results = await run_many(host, PROGRAM, 3)
    assert len(docs.calls_to("search")) == 3  # type: ignore[attr-defined]
    assert all(c.shared_from is None for r in results for c in r.calls)
    assert all(r.report.host_shared == 0 for r in results)
    assert host.share_statistics().logical == 0


async def test_a_settled_result_serves_a_later_run_within_the_ttl_only() -> None:
    host, docs = make_host(share=ShareConfig(ttl=0.2), latency=0.0)
    first = await host.run_source("docs.search('x')")
    second = await host.run_source("docs.search('x')")
    assert second.calls[0].shared_from == first.run_id and second.report.physical == 0
    await anyio.sleep(0.3)  # on purpose: past the ttl
    third = await host.run_source("docs.search('x')")
    assert third.calls[0].shared_from is None and third.report.physical == 1
    assert len(docs.calls_to("search")) == 2  # type: ignore[attr-defined]
    assert second.value == first.value and second.value is not first.value  # a fresh copy


async def test_a_failure_is_never_handed_to_another_run() -> None:
    fails = Script(
        lambda q: (_ for _ in ()).throw(LookupError(q)),
        effect=Effect.PURE,
        version="1",
        latency=0.05,
    )
    host = Host(guest_factory=in_process_guest)
    docs = scripted_tool(search=fails)
    host.register("docs", docs)
    results = await run_many(
        host, "try:\n    docs.search('bad')\nexcept LookupError as e:\n    r = str(e)\nr\n", 3
    )
    assert all(r.value == "bad" for r in results)
    assert all(c.shared_from is None for r in results for c in r.calls)
    assert len(docs.calls_to("search")) == 3  # type: ignore[attr-defined]  # each run's own, as run alone
    assert host.share_statistics().failed >= 1


def test_share_takes_a_bool_or_a_config() -> None:
    with pytest.raises(TypeError, match="ShareConfig"):
        Host(share="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="negative"):
        ShareConfig(ttl=-1)


class Counter:
    """A capability without views whose writes change what its read returns: no frozen root."""

    def __init__(self) -> None:
        self.n = 0
        self.reads = 0

    @capability(effect=Effect.IMMUTABLE_READ)
    async def get(self) -> int:
        self.reads += 1
        return self.n

    @capability(effect=Effect.WRITE)
    async def bump(self) -> None:
        self.n += 1


async def test_a_registered_object_a_run_writes_is_no_frozen_root() -> None:
    """Once a call that may write reaches the registered object, its reads are never served
    from the table again (the next run's sequential run would see the write)."""
    host = Host(guest_factory=in_process_guest)
    counter = Counter()
    host.register("counter", counter)
    first = await host.run_source("counter.get()")
    await host.run_source("counter.bump()")
    after = await host.run_source("counter.get()")
    assert (first.value, after.value) == (0, 1)
    assert after.calls[0].shared_from is None and counter.reads == 2
    assert host.share_statistics().tainted == ("counter",)


# -- sessions and retries ------------------------------------------------------------------------


async def test_reads_running_when_a_turn_is_rejected_serve_its_retry() -> None:
    """The rejected turn's read is still running when its stream ends: on a sharing Host it
    runs on for the retry, whose read waits on it (one physical read); without sharing it
    is cancelled with the turn and the retry reads again."""
    body = "a = docs.search('slow')\n" + "# thinking\n" * 3
    turns = [body + "c = (\n", body + "a\n"]
    physical = {}
    for share in (True, False):
        host, docs = make_host(share=share, latency=0.4)
        async with host.session() as session:
            got = [await session.run_stream(chunks(t, delay=0.002)) for t in turns]
        assert [r.status.value for r in got] == ["rejected", "ok"] and got[1].value == [
            "slow",
            "SLOW",
        ]
        physical[share] = len(docs.calls_to("search"))  # type: ignore[attr-defined]
        if share:
            assert got[1].calls[0].shared_from == got[0].run_id
    assert physical == {True: 1, False: 2}


async def test_later_turns_reuse_root_reads_until_the_session_writes_that_path() -> None:
    host, _ = make_host()
    turns = [
        "workspace.read_text('a.txt')",
        "x = workspace.read_text('a.txt')\nx",
        "workspace.write_text('a.txt', 'changed')",
        "workspace.read_text('a.txt')",
    ]
    async with host.session() as session:
        got = [await session.run_stream(chunks(t)) for t in turns]
    assert [r.value for r in got] == ["alpha", "alpha", None, "changed"]
    assert got[1].calls[0].shared_from == got[0].run_id
    assert got[3].calls[0].shared_from is None  # the session's branch: a view of its own


# -- traces and the timeline ----------------------------------------------------------------------


async def test_a_served_call_has_a_shared_span_linked_to_the_serving_call() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host, _ = make_host(instrument=OTelInstrument(provider))
    results = await run_many(host, "a = docs.search('x')\n" + "# thinking\n" * 4 + "a\n", 2)
    provider.shutdown()
    spans = exporter.get_finished_spans()
    (tool,) = [
        s for s in spans if s.name == "execute_tool docs.search"
    ]  # one physical call for both runs
    shared = [s for s in spans if s.name == "shared docs.search"]
    assert shared, "the run that waited has a span of its own"
    (owner,) = [r.run_id for r in results if r.report.physical == 1]
    for span in shared:
        (link,) = span.links
        assert link.context.span_id == tool.context.span_id
        assert link.attributes[A.LINK_RELATION] == A.LINK_SHARED_FROM
        assert span.attributes[A.SHARED_FROM] == owner
        assert A.GEN_AI_OPERATION_NAME not in span.attributes  # not a second execution


async def test_the_timeline_draws_work_another_run_served() -> None:
    host, _ = make_host()
    results = await run_many(host, "a = docs.search('x')\n" + "# thinking\n" * 4 + "a\n", 2)
    waited = [r for r in results if any(c.shared_from for c in r.calls)]
    assert waited
    for result in waited:
        assert result.timeline is not None
        bars = [b for b in result.timeline.bars if b.kind == "shared"]
        assert bars and all(result.calls[0].shared_from[:8] in b.label for b in bars)  # type: ignore[index]
