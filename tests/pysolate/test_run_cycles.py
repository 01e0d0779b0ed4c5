"""A finished run leaves no reference cycle behind: its structures go with it.

At 500 concurrent runs the Host's garbage collector was a quarter of its CPU, and each run's
lane, graph and scope (and through them a few hundred objects) were one cycle that only a
full collection freed. With the collector off, everything a run built must be freed by
reference counting as soon as the caller drops the result.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from pysolate import Effect, Host, LanePolicy, Workspace
from pysolate._calls._broker import RunScope
from pysolate.streams import CodeReader
from pysolate.testing import Script, in_process_guest, memory_workspace, scripted_tool
from scheduler import BranchSpeculation, EventGraph, SpeculativeLane

pytestmark = pytest.mark.anyio

PROGRAM = """\
a = docs.search("alpha")
b = docs.search(a[0])
ws.write_text("out.txt", b[0])
if b:
    c = docs.search("gamma")
print(a, b, ws.read_text("out.txt"))
"""

RUN_TYPES = (EventGraph, SpeculativeLane, RunScope, BranchSpeculation, CodeReader)


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _alive(types: tuple[type, ...], before: frozenset[int] = frozenset()) -> list[object]:
    """The live objects of ``types``, but those in ``before`` (ids: earlier tests may hold some)."""
    return [o for o in gc.get_objects() if isinstance(o, types) and id(o) not in before]


async def _chunks(source: str, size: int = 7) -> AsyncIterator[str]:
    for i in range(0, len(source), size):
        await anyio.sleep(0.001)
        yield source[i : i + size]


def _host() -> Host:
    host = Host(guest_factory=in_process_guest)
    host.register(
        "docs",
        scripted_tool(
            search=Script(lambda q: [f"hit:{q}"], effect=Effect.PURE, version="1", latency=0.01)
        ),
    )
    root: Workspace = memory_workspace({})
    host.register("ws", root)
    return host


async def test_a_finished_speculating_run_is_freed_without_the_collector(
    collector_off: None,
) -> None:
    host = _host()
    before = frozenset(map(id, _alive(RUN_TYPES)))
    result = await host.run_stream(_chunks(PROGRAM), policy=LanePolicy(branch_writes=True))
    assert result.status == "ok", result.error
    assert result.report.claimed >= 2 and result.report.early_writes == 1  # it did speculate
    assert not await _freed(RUN_TYPES, before), "a run's structures are held by a reference cycle"


async def _freed(types: tuple[type, ...], before: frozenset[int]) -> list[object]:
    """What is still alive of ``types`` once the Host's own tasks have wound down: a shared
    call's task (issue 40) runs outside the run and may still be unwinding its cancellation,
    holding the run's scope, when the run returns. With the collector off, a cycle never
    goes, so waiting up to a second cannot hide one."""
    with anyio.move_on_after(1.0):
        while _alive(types, before):
            await anyio.sleep(0.01)
    return _alive(types, before)


async def test_a_watched_reader_is_freed_without_the_collector(collector_off: None) -> None:
    before = frozenset(map(id, _alive((CodeReader,))))
    reader = CodeReader(_chunks("x = 1\ny = 2\n"), idle_timeout=30.0, deadline=60.0)
    async with reader.watched():
        while await reader.read() is not None:
            pass
    await reader.aclose()
    del reader
    assert not _alive((CodeReader,), before), "the watchdog's end left a reference cycle"


class _Anything:
    """Answers every attribute (a proxy): 3.11's runtime Protocol check counts it a ``Branch``."""

    def __init__(self) -> None:
        self.layers = 0

    def __getattr__(self, name: str) -> object:
        def method(*args: object) -> object:
            self.layers += name == "layer"
            return self

        return method


class _Targets:
    def __init__(self, targets: dict[str, object]) -> None:
        self._targets = targets

    def targets(self) -> dict[str, object]:
        return self._targets


def test_branch_classification_of_attribute_proxies_is_unchanged() -> None:
    # ``RunLayers`` tests identity with the root before the Protocol check (the check is
    # the cost); which capabilities are branched must not move: a proxy that is the root
    # is not, a run's own proxy is (as the Protocol check alone says).
    from pysolate._run._layers import Branch, RunLayers

    shared, own = _Anything(), _Anything()
    branched = isinstance(own, Branch)  # True on 3.11 (``hasattr``); 3.12+ look statically
    layers = RunLayers(
        _Targets({"root": shared, "run": own}), {"root": shared, "run": _Anything()}, None
    )  # type: ignore[arg-type]
    assert layers.capabilities() == (["run"] if branched else [])
    assert (shared.layers, own.layers) == (0, int(branched))
