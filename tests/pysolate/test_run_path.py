"""Every run takes one path (``pysolate._run._run.Run``) with different inputs: a stream or a
whole source, speculating or not. A whole source is sealed once, before anything starts;
a run that does not speculate runs the sealed source as written, however it arrives."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio
import pytest

from pysolate import Effect, Host, RunStatus
from pysolate._run import _stream_run
from pysolate.passes import BatchPolicy, PassConfig
from pysolate.passes.testing import LawfulFiles
from pysolate.testing import Script, in_process_guest, scripted_tool

pytestmark = pytest.mark.anyio

SOURCE = 'a = docs.search("alpha")\nb = docs.search(a[0])\nprint(a, b)\n'


async def _chunks(source: str, size: int = 7) -> AsyncIterator[str]:
    for i in range(0, len(source), size):
        yield source[i : i + size]
        await anyio.sleep(0.001)


def _host(**options: object) -> Host:
    host = Host(guest_factory=in_process_guest, **options)  # type: ignore[arg-type]
    host.register(
        "docs",
        scripted_tool(search=Script(lambda q: [f"hit:{q}"], effect=Effect.PURE, version="1")),
    )
    return host


@pytest.fixture
def seals(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources compiled as seals (``_stream_run.seal``'s compile step), in order."""
    compiled: list[str] = []
    compile_tree: Callable[..., object] = _stream_run.compile_tree

    def counted(source: str, *args: object) -> object:
        compiled.append(source)
        return compile_tree(source, *args)

    monkeypatch.setattr(_stream_run, "compile_tree", counted)
    return compiled


@pytest.mark.parametrize("speculate", [True, False])
async def test_run_source_seals_its_source_once(seals: list[str], speculate: bool) -> None:
    result = await _host().run_source(SOURCE, speculate=speculate)
    assert result.status == RunStatus.OK, result.error
    assert seals == [SOURCE]


async def test_run_stream_seals_its_source_once(seals: list[str]) -> None:
    result = await _host().run_stream(_chunks(SOURCE))
    assert result.status == RunStatus.OK, result.error
    assert seals == [SOURCE]


async def test_a_whole_source_that_does_not_compile_starts_no_guest() -> None:
    started: list[object] = []

    async def factory(capabilities: object, limits: object) -> object:
        started.append(capabilities)
        return await in_process_guest(capabilities, limits)  # type: ignore[arg-type]

    host = Host(guest_factory=factory)  # type: ignore[arg-type]
    for speculate in (True, False):
        result = await host.run_source("return 1\n", speculate=speculate)
        assert result.status == RunStatus.REJECTED and result.error is not None
    assert started == []


@pytest.mark.parametrize("whole", [True, False])
async def test_a_run_that_does_not_speculate_runs_no_pass_and_starts_nothing_early(
    whole: bool,
) -> None:
    fs = LawfulFiles({"f1": "one\ntwo\n", "f2": "three\n"}, 0.01)
    host = Host(guest_factory=in_process_guest, passes=PassConfig(True, True, True, BatchPolicy()))
    host.register("fs", fs)
    source = 'first = fs.read_text("f1").splitlines()[:1]\nsecond = fs.read_text("f2")\n[first, second]\n'
    if whole:
        result = await host.run_source(source, speculate=False)
    else:
        result = await host.run_stream(_chunks(source), speculate=False)
    assert result.status == RunStatus.OK, result.error
    assert result.value == [["one"], "three\n"]
    assert result.report.passes == () and result.report.claimed == 0
    assert [c.lane for c in result.calls] == ["direct", "direct"]
    assert [m for m, _ in fs.physical] == ["read_text", "read_text"]
