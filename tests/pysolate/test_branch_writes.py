"""Speculative branch writes (issue 17): workspace writes run early on a layer of the run's
branch and are claimed strictly in order, by exact key.

Every test streams a program, runs the same sealed source sequentially on an identical
fresh Host, and requires the contract's equality (``differences``: status, value, stdout,
error, call log, final branch state) and the accounting invariants. The claim-rule tests
need the program's calls to differ from what discovery predicted, which an honest program
never makes happen (discovery is exact); they use a *scripted Guest* that makes a given
sequence of calls whatever the source says, both in the streamed run and in its
sequential twin. Timing is checked by order (an early write ended before the stream did),
never by duration.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

import pysolate._workspace._workspace as workspace_module
from pysolate import Effect, Host, LanePolicy, RunResult, ToolFailure, Workspace, capability
from pysolate._guest_api import CallHandler, GuestLimits, GuestOutcome
from pysolate._workspace._workspace import VERSION
from pysolate.testing import (
    Script,
    check_invariants,
    differences,
    in_process_guest,
    in_process_session,
    scripted_tool,
)

pytestmark = pytest.mark.anyio

FILES = {"a.txt": "alpha", "b.txt": "beta", "dir/inner.txt": "inner"}
LATENCY = 0.02


class SlowWorkspace(Workspace):
    """A workspace whose reads and writes take ``LATENCY`` (so early work overlaps)."""

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        await anyio.sleep(LATENCY)
        return await super().read_text(path, encoding)

    @capability(effect=Effect.WRITE, version=VERSION, scope="path")
    async def write_text(self, path: str, text: str, encoding: str = "utf-8") -> None:
        await anyio.sleep(LATENCY)
        await super().write_text(path, text, encoding)


class SignallingWorkspace(SlowWorkspace):
    """Logs each write that has run (on whatever layer or branch) and sets ``wrote``; the
    log and the event are shared by every copy (``for_run``, ``layer``)."""

    wrote: anyio.Event
    log: list[str]

    @classmethod
    def of(cls, files: Mapping[str, str]) -> SignallingWorkspace:
        root = cls.from_files(files)
        root.wrote, root.log = anyio.Event(), []
        return root

    @capability(effect=Effect.WRITE, version=VERSION, scope="path")
    async def write_text(self, path: str, text: str, encoding: str = "utf-8") -> None:
        await super().write_text(path, text, encoding)
        self.log.append(path)
        self.wrote.set()

    async def written(self, count: int) -> None:
        with anyio.fail_after(10):
            while len(self.log) < count:
                await anyio.sleep(0.005)


Call = tuple[str, str, tuple[object, ...]]


@dataclass
class ScriptedGuest:
    """Makes ``calls`` through the handler, whatever the source; the value lists each
    outcome (a result, or the error's type name)."""

    calls: Sequence[Call]

    async def run(self, source: str, handler: CallHandler) -> GuestOutcome:
        out: list[object] = []
        for cap, method, args in self.calls:
            try:
                out.append(await handler(cap, method, args, {}))
            except ToolFailure as failure:
                out.append(failure.type_name)
        return GuestOutcome("ok", value=out)

    async def aclose(self) -> None:
        pass


@dataclass
class Scripted:
    calls: Sequence[Call]

    async def __call__(
        self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits
    ) -> ScriptedGuest:
        return ScriptedGuest(self.calls)


@dataclass
class Stream:
    """The source one line per chunk, ``delay`` apart."""

    source: str
    delay: float = 0.03
    sent: list[float] = field(default_factory=list)

    async def __aiter__(self) -> AsyncIterator[str]:
        for line in self.source.splitlines(keepends=True):
            await anyio.sleep(self.delay)
            self.sent.append(anyio.current_time())
            yield line


def make_host(guest: Scripted | None = None, root: Workspace | None = None) -> Host:
    host = Host(guest_factory=guest or in_process_guest, session_factory=in_process_session)
    host.register("workspace", root if root is not None else SlowWorkspace.from_files(FILES))
    host.register(
        "store",
        scripted_tool(
            put=Script(lambda key, value: None, effect=Effect.WRITE, version="1", latency=LATENCY)
        ),
    )
    return host


async def both(
    source: str, guest: Scripted | None = None, policy: LanePolicy | None = None
) -> RunResult:
    """Stream ``source``; run it sequentially on a twin Host; require equality."""
    host = make_host(guest)
    streamed = await host.run_stream(Stream(source), policy=policy)
    reference = await make_host(guest).run_source(source, speculate=False)
    assert differences(reference, streamed) == []
    check_invariants(streamed, host.method_specs())
    return streamed


def lanes(result: RunResult) -> list[tuple[str, object, str]]:
    """(method, path, how it was served) per call: ``layer`` when claimed from a branch
    layer, ``claimed`` from other early work, ``direct`` when it ran when the program made it."""
    observations = {o.id: o for o in result.observations}
    out = []
    for c in result.calls:
        obs = observations.get(c.observation_id) if c.observation_id is not None else None
        how = "layer" if obs is not None and obs.layer is not None else c.lane
        out.append((c.method, c.args[0] if c.args else None, how))
    return out


def dispositions(result: RunResult, method: str) -> list[str | None]:
    return [
        o.disposition for o in result.observations if o.method == method and o.lane == "speculative"
    ]


W, R = "write_text", "read_text"
PROGRAM = "\n".join(
    [
        "workspace.write_text('a.txt', 'one')",
        "x = workspace.read_text('a.txt')",
        "workspace.write_text('b.txt', 'two')",
        "y = workspace.read_text('b.txt')",
        "workspace.write_text('c.txt', 'three')",
        "[x, y]",
    ]
)
"""What discovery sees in the claim-rule tests (the scripted Guest may do otherwise)."""


def script(*calls: tuple[str, str, str] | tuple[str, str]) -> Scripted:
    return Scripted([("workspace", c[0], tuple(c[1:])) for c in calls])


# -- the in-order claim rule -------------------------------------------------------------------


async def test_an_equal_sequence_claims_every_write_and_every_read_on_its_layer() -> None:
    result = await both(PROGRAM + "\n")
    assert result.value == ["one", "two"]
    assert lanes(result) == [
        (W, "a.txt", "layer"),
        (R, "a.txt", "layer"),
        (W, "b.txt", "layer"),
        (R, "b.txt", "layer"),
        (W, "c.txt", "layer"),
    ]
    assert result.report.early_writes == 3 and result.report.discarded == 0
    assert result.workspaces["workspace"].changes() == {
        "a.txt": b"one",
        "b.txt": b"two",
        "c.txt": b"three",
    }


async def test_a_differing_argument_discards_the_layer_from_that_write_on() -> None:
    guest = script(
        (W, "a.txt", "one"),
        (R, "a.txt"),
        (W, "b.txt", "OTHER"),
        (R, "b.txt"),
        (W, "c.txt", "three"),
    )
    result = await both(PROGRAM + "\n", guest)
    assert result.value == [None, "one", None, "OTHER", None]
    how = lanes(result)
    assert how[:2] == [(W, "a.txt", "layer"), (R, "a.txt", "layer")]
    assert how[2] == (W, "b.txt", "direct") and how[4] == (W, "c.txt", "direct")
    assert how[3][2] != "layer", "the read of the discarded layer is never claimed"
    assert dispositions(result, W)[1:] == ["discarded"] * (len(dispositions(result, W)) - 1)
    assert result.report.discarded >= 2  # the write of b.txt and the read on its layer


async def test_an_extra_write_discards_later_layers_but_keeps_reads_of_earlier_ones() -> None:
    guest = script(
        (W, "a.txt", "one"), (W, "z.txt", "extra"), (R, "a.txt"), (W, "b.txt", "two"), (R, "b.txt")
    )
    result = await both(PROGRAM + "\n", guest)
    assert result.value == [None, None, "one", None, "two"]
    how = lanes(result)
    assert how[0] == (W, "a.txt", "layer") and how[1] == (W, "z.txt", "direct")
    # a.txt was not touched by the extra write: the read on layer 1 shows what the branch does.
    assert how[2] == (R, "a.txt", "layer")
    assert how[3] == (W, "b.txt", "direct") and how[4][2] != "layer"


async def test_a_missing_write_discards_the_writes_after_it() -> None:
    guest = script((W, "a.txt", "one"), (R, "a.txt"), (W, "c.txt", "three"), (R, "b.txt"))
    result = await both(PROGRAM + "\n", guest)
    assert result.value == [None, "one", None, "beta"]
    assert lanes(result)[2] == (W, "c.txt", "direct")
    assert lanes(result)[3][2] != "layer"
    assert "b.txt" not in result.workspaces["workspace"].changes()


async def test_fewer_writes_than_speculated_leave_the_rest_discarded() -> None:
    guest = script((W, "a.txt", "one"), (R, "a.txt"))
    result = await both(PROGRAM + "\n", guest)
    assert result.workspaces["workspace"].changes() == {"a.txt": b"one"}
    assert dispositions(result, W)[0] == "claimed"
    assert set(dispositions(result, W)[1:]) <= {"discarded"}


async def test_a_failing_write_is_claimed_with_its_error_and_the_next_writes_still_claim() -> None:
    source = "\n".join(
        [
            "try:",
            "    workspace.write_text('dir', 'not a file')",  # a directory: IsADirectoryError
            "except IsADirectoryError as e:",
            "    err = type(e).__name__",
            "workspace.write_text('a.txt', 'one')",
            "workspace.read_text('a.txt'), err",
            "",
        ]
    )
    result = await both(source)
    assert result.value == ("one", "IsADirectoryError")
    how = lanes(result)
    assert how[0] == (W, "dir", "layer") and result.calls[0].outcome == "error"
    assert how[1:] == [(W, "a.txt", "layer"), (R, "a.txt", "layer")]


async def test_a_read_between_writes_sees_the_first_and_not_the_second() -> None:
    source = "\n".join(
        [
            "workspace.write_text('a.txt', 'first')",
            "x = workspace.read_text('a.txt')",
            "workspace.write_text('a.txt', 'second')",
            "y = workspace.read_text('./a.txt')",  # an alias of the same path
            "x, y",
            "",
        ]
    )
    result = await both(source)
    assert result.value == ("first", "second")
    assert [how for _, _, how in lanes(result)] == ["layer"] * 4


async def test_a_program_that_raises_after_a_write_keeps_only_what_it_reached() -> None:
    source = "\n".join(
        [
            "workspace.write_text('a.txt', 'one')",
            "workspace.read_text('missing.txt')",
            "workspace.write_text('b.txt', 'two')",
            "",
        ]
    )
    result = await both(source)
    assert (
        result.status == "error"
        and result.error is not None
        and result.error.type == "FileNotFoundError"
    )
    assert result.workspaces["workspace"].changes() == {"a.txt": b"one"}
    assert dispositions(result, W) in (["claimed", "discarded"], ["claimed"])


# -- what may and may not run early ------------------------------------------------------------


async def test_early_writes_run_before_the_stream_ends_and_non_branch_writes_never_do() -> None:
    lines = [
        "workspace.write_text('a.txt', 'one')\n",
        "store.put('k', 'v')\n",
        "workspace.write_text('b.txt', 'two')\n",
    ]
    root = SignallingWorkspace.of(FILES)
    host = make_host(root=root)

    async def chunks() -> AsyncIterator[str]:
        yield lines[0]
        await root.written(1)  # the first write ran while the stream was still open
        yield lines[1]
        yield lines[2]

    result = await host.run_stream(chunks())
    reference = await make_host().run_source("".join(lines), speculate=False)
    assert differences(reference, result) == []
    writes = [o for o in result.observations if o.method == W]
    assert (
        writes
        and writes[0].lane == "speculative"
        and writes[0].layer == 1
        and writes[0].disposition == "claimed"
    )
    assert root.state_files() == {k: v.encode() for k, v in sorted(FILES.items())}, (
        "it ran on a layer, not the root"
    )
    assert not [o for o in result.observations if o.method == "put" and o.lane == "speculative"]
    assert lanes(result)[1] == ("put", "k", "direct")


async def test_the_policy_can_turn_branch_writes_off() -> None:
    result = await both(PROGRAM + "\n", policy=LanePolicy(branch_writes=False))
    assert result.report.early_writes == 0
    assert all(how != "layer" for _, _, how in lanes(result) if _ == W)


async def test_a_write_past_the_branch_limit_is_not_speculated_nor_any_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(workspace_module, "MAX_EARLY_BYTES", 10)
    source = "workspace.write_text('a.txt', 'small')\nworkspace.write_text('b.txt', 'much too large')\nworkspace.write_text('c.txt', 'x')\n"
    result = await both(source)
    assert [how for _, _, how in lanes(result)] == ["layer", "direct", "direct"]
    assert result.report.early_writes == 1


# -- nothing leaks -----------------------------------------------------------------------------


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("ending", ["syntax error", "stream fails"])
async def test_a_stream_that_does_not_seal_after_a_write_leaves_root_and_committed_state_untouched(
    tmp_path: Path, ending: str
) -> None:
    source_dir, committed = tmp_path / "source", tmp_path / "committed"
    source_dir.mkdir()
    (source_dir / "a.txt").write_text("alpha")
    before = snapshot(source_dir)
    root = SignallingWorkspace.frozen(source_dir)
    root.wrote, root.log = anyio.Event(), []
    host = make_host(root=root)
    ok = await host.run_stream(Stream("workspace.write_text('kept.txt', 'ok run')\n"))
    ok.workspaces["workspace"].commit(committed)
    was_committed = snapshot(committed)

    async def chunks() -> AsyncIterator[str]:
        yield "workspace.write_text('a.txt', 'changed')\n"
        yield "workspace.write_text('new.txt', 'new')\n"
        await root.written(3)  # the ok run's write, then both early writes of this one
        if ending == "stream fails":
            raise ConnectionError("the model's stream broke")
        yield "x = (\n"

    result = await host.run_stream(chunks())
    assert result.status == ("rejected" if ending == "syntax error" else "aborted")
    assert result.report.early_writes == 2 and result.report.discarded == 2
    assert result.workspaces == {}
    assert root.state_files() == {"a.txt": b"alpha"} and snapshot(source_dir) == before
    assert snapshot(committed) == was_committed == {"a.txt": b"alpha", "kept.txt": b"ok run"}
    check_invariants(result, host.method_specs())


async def test_a_cancelled_run_after_an_early_write_leaves_the_root_untouched() -> None:
    root = SignallingWorkspace.of(FILES)
    host = make_host(root=root)

    async def chunks() -> AsyncIterator[str]:
        yield "workspace.write_text('a.txt', 'changed')\n"
        await anyio.sleep_forever()
        yield "1\n"

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await host.run_stream(chunks())

        tg.start_soon(run)
        with anyio.fail_after(10):
            await root.wrote.wait()  # the early write ran on a layer
        tg.cancel_scope.cancel()
    assert root.state_files() == {k: v.encode() for k, v in sorted(FILES.items())}


async def test_a_rejected_session_turn_never_lends_its_layer_reads_to_the_next_turn() -> None:
    """Layer view ids are of one run's lineage: turn 2's write of other content gives the
    same view id as turn 1's, so a carried read would be a wrong value."""
    host = make_host()
    async with host.session() as session:
        first = await session.run_stream(
            Stream("workspace.write_text('a.txt', 'x')\nv = workspace.read_text('a.txt')\nv = (\n")
        )
        assert first.status == "rejected"
        second = await session.run_stream(
            Stream("workspace.write_text('a.txt', 'y')\nworkspace.read_text('a.txt')\n")
        )
    assert second.status == "ok" and second.value == "y"


# -- accounting and traces ---------------------------------------------------------------------


async def test_layer_work_is_traced_on_the_branch_lane_with_its_disposition() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from pysolate.tracing import OTelInstrument
    from pysolate.tracing import attributes as A

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guest = script((W, "a.txt", "one"), (R, "a.txt"), (W, "b.txt", "OTHER"))
    host = Host(guest_factory=guest, instrument=OTelInstrument(provider))
    host.register("workspace", SlowWorkspace.from_files(FILES))
    result = await host.run_stream(Stream(PROGRAM + "\n"))
    provider.shutdown()
    branch = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get(A.LANE) == "branch"
    ]
    dispositions = {
        (str(s.attributes[A.GEN_AI_TOOL_NAME]), str(s.attributes.get(A.DISPOSITION)))
        for s in branch
        if s.attributes
    }
    assert ("workspace.write_text", "claimed") in dispositions
    assert ("workspace.write_text", "discarded") in dispositions
    assert (
        result.report.discarded
        == sum(1 for o in result.observations if o.disposition == "discarded")
        >= 1
    )
    assert result.timeline is not None
    kinds = {bar.kind for bar in result.timeline.lane("speculative")}
    assert {"claimed", "discarded"} <= kinds


async def test_a_write_under_an_undecided_if_waits_and_runs_early_once_it_is_taken() -> None:
    source = "\n".join(
        [
            "if workspace.read_text('b.txt') == 'beta':",  # decided by an early read of the root
            "    workspace.write_text('a.txt', 'taken')",
            "workspace.write_text('c.txt', 'after')",
            "workspace.read_text('a.txt')",
            "",
        ]
    )
    result = await both(source)
    assert result.value == "taken"
    assert [how for _, _, how in lanes(result)] == ["claimed", "layer", "layer", "layer"]


class TouchingWorkspace(SlowWorkspace):
    """A workspace with a method the Host could not qualify (``unknown``)."""

    @capability(effect=Effect.UNKNOWN, version=VERSION)
    async def touch(self, path: str) -> None:
        await self.write_text(path, "touched")


async def test_an_unknown_call_on_the_branch_ends_early_writes_for_the_run() -> None:
    source = "workspace.write_text('a.txt', 'one')\nworkspace.touch('b.txt')\nworkspace.write_text('c.txt', 'two')\n"

    def host() -> Host:
        h = Host(guest_factory=in_process_guest)
        h.register("workspace", TouchingWorkspace.from_files(FILES))
        return h

    streamed = await host().run_stream(Stream(source))
    reference = await host().run_source(source, speculate=False)
    assert differences(reference, streamed) == []
    assert [how for _, _, how in lanes(streamed)] == ["layer", "direct", "direct"]
    assert streamed.workspaces["workspace"].changes() == {
        "a.txt": b"one",
        "b.txt": b"touched",
        "c.txt": b"two",
    }


async def test_a_loop_body_write_runs_before_the_loop_is_accepted_and_a_break_retracts_the_rest() -> (
    None
):
    """Both iterations' writes run on the layer while the body is still streaming (the
    stream waits for them); the ``break`` that follows withdraws the second one, and the
    write after the loop runs on the state the first left."""
    head = ["for p in ['a.txt', 'b.txt']:\n", "    workspace.write_text(p, 'v')\n"]
    tail = ["    if p == 'a.txt':\n", "        break\n", "workspace.write_text('c.txt', 'after')\n"]
    root = SignallingWorkspace.of(FILES)
    host = make_host(root=root)

    async def chunks() -> AsyncIterator[str]:
        for line in head:
            yield line
        await root.written(2)  # both ran before the loop could be accepted
        for line in tail:
            yield line

    result = await host.run_stream(chunks())
    reference = await make_host().run_source("".join(head + tail), speculate=False)
    assert differences(reference, result) == []
    check_invariants(result, host.method_specs())
    assert lanes(result) == [(W, "a.txt", "layer"), (W, "c.txt", "layer")]
    assert dispositions(result, W) == ["claimed", "discarded", "claimed"]
    assert result.workspaces["workspace"].changes() == {"a.txt": b"v", "c.txt": b"after"}
