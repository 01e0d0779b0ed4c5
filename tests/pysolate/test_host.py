"""Host.run_source end to end: outcomes, each capability kind, receipts, views, failures.

Parametrized over both Guests: the in-process one (fast, for tests) and the isolated
subprocess one (the default); they must show the program exactly the same thing.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from occurrences import Effect, canonical_arguments
from pysolate import Host, RunStatus, ToolError, Workspace, capability
from pysolate._guest import start_subprocess_guest
from pysolate._guest_api import Guest, GuestFactory, GuestLimits
from pysolate.testing import Script, in_process_guest, memory_workspace, scripted_tool
from pysolate.tracing import OTelInstrument

pytestmark = pytest.mark.anyio


def _guest_factories() -> list[object]:
    return [
        pytest.param(in_process_guest, id="in_process"),
        pytest.param(start_subprocess_guest, id="subprocess"),
    ]


@pytest.fixture(params=_guest_factories())
def factory(request: pytest.FixtureRequest) -> GuestFactory:
    return request.param  # type: ignore[no-any-return,unused-ignore]


class Store:
    """Sync and async methods of every effect, over a little mutable state."""

    def __init__(self) -> None:
        self.items: dict[str, list[int]] = {"a": [1, 2]}

    @capability(effect=Effect.PURE, version="1")
    def double(self, x: int) -> int:
        return 2 * x

    @capability(effect=Effect.IMMUTABLE_READ)
    async def get(self, name: str) -> list[int]:
        return self.items[name]  # the broker must copy: the program may mutate it

    @capability(effect=Effect.LIVE_READ)
    def size(self) -> int:
        return len(self.items)

    @capability(effect=Effect.WRITE)
    async def put(self, name: str, values: list[int]) -> None:
        self.items[name] = values

    @capability
    def odd(self, value: object = None) -> object:
        if value == "raise":
            raise LookupError("deliberate")
        if value == "custom":
            raise _Custom("my failure")
        if value == "object":
            return object()
        return value


class _Custom(Exception):
    pass


def _host(factory: GuestFactory, **kwargs: object) -> tuple[Host, Store]:
    host = Host(guest_factory=factory, **kwargs)  # type: ignore[arg-type]
    store = Store()
    host.register("store", store)
    host.register("workspace", memory_workspace({"a.txt": "alpha", "d/b.txt": "beta"}))
    return host, store


async def test_value_and_stdout(factory: GuestFactory) -> None:
    host, _ = _host(factory)
    result = await host.run_source(
        "print('hi', 1, sep='-')\nx = store.double(21)\n{'x': x, 't': (1, b'b')}"
    )
    assert result.status == RunStatus.OK == "ok"
    assert result.value == {"x": 42, "t": (1, b"b")}
    assert result.stdout == "hi-1\n"
    assert result.error is None
    assert result.isolation is not None


async def test_no_final_expression_means_no_value_and_non_plain_values_are_repr(
    factory: GuestFactory,
) -> None:
    host, _ = _host(factory)
    assert (await host.run_source("x = 1")).value is None
    assert (
        await host.run_source("class A:\n    def __repr__(self):\n        return 'A!'\nA()")
    ).value == "A!"


async def test_an_exception_reports_type_message_and_agent_line(factory: GuestFactory) -> None:
    host, _ = _host(factory)
    src = "x = 1\n\ndef f(d):\n    return d['missing']\n\nf({})\n"
    result = await host.run_source(src)
    assert result.status == "error"
    assert result.error is not None
    assert (result.error.type, result.error.message, result.error.line) == (
        "KeyError",
        "'missing'",
        4,
    )


@pytest.mark.parametrize(
    "src", ["x = (\n", "def f(:\n  pass", "return 1", "await store.size()", "if x:\npass"]
)
async def test_a_source_that_does_not_compile_is_rejected_and_nothing_runs(src: str) -> None:
    started: list[object] = []

    async def counting(capabilities: Mapping[str, Sequence[str]], limits: GuestLimits) -> Guest:
        started.append(capabilities)
        return await in_process_guest(capabilities, limits)

    tool = scripted_tool(write=Script(lambda: None, effect=Effect.WRITE))
    host = Host(guest_factory=counting)
    host.register("tool", tool)
    result = await host.run_source("tool.write()\n" + src)
    assert result.status == "rejected"
    assert result.error is not None and result.error.type in ("SyntaxError", "IndentationError")
    assert result.calls == () and result.isolation is None
    assert started == [] and tool.calls == []


async def test_every_effect_sync_and_async_is_called_and_receipted(factory: GuestFactory) -> None:
    host, store = _host(factory)
    src = "a = store.double(2)\nb = store.get('a')\nc = store.size()\nstore.put('b', [3])\nd = store.odd()\n[a, b, c, d]"
    result = await host.run_source(src, speculate=False)
    assert result.status == "ok", result.error
    assert result.value == [4, [1, 2], 1, None]
    assert store.items["b"] == [3]
    summary = [(c.method, c.effect, c.args, c.outcome, c.result, c.lane) for c in result.calls]
    assert summary == [
        ("double", Effect.PURE, (2,), "ok", 4, "direct"),
        ("get", Effect.IMMUTABLE_READ, ("a",), "ok", [1, 2], "direct"),
        ("size", Effect.LIVE_READ, (), "ok", 1, "direct"),
        ("put", Effect.WRITE, ("b", [3]), "ok", None, "direct"),
        ("odd", Effect.UNKNOWN, (None,), "ok", None, "direct"),
    ]
    assert [c.index for c in result.calls] == list(range(5))
    assert all(0 <= c.started <= c.ended for c in result.calls)
    report = result.report
    assert (report.logical, report.physical, report.direct, report.claimed) == (5, 5, 5, 0)
    assert (report.shared, report.cancelled, report.late, report.orphaned) == (0, 0, 0, 0)


async def test_results_are_fresh_copies(factory: GuestFactory) -> None:
    host, store = _host(factory)
    result = await host.run_source("v = store.get('a')\nv.append(99)\nw = store.get('a')\n[v, w]")
    assert result.value == [[1, 2, 99], [1, 2]]
    assert store.items["a"] == [1, 2]
    assert result.calls[0].result == [1, 2]


async def test_keys_bind_arguments_and_views_follow_writes(factory: GuestFactory) -> None:
    host, _ = _host(factory)
    src = (
        "store.double(1)\nstore.double(x=1)\nstore.put('z', [])\nstore.double(1)\n"
        "workspace.read_text('a.txt')\nworkspace.write_text('d/c.txt', 'c')\n"
        "workspace.read_text('a.txt')\nworkspace.read_text(path='d/c.txt')\n"
    )
    result = await host.run_source(src)
    assert result.status == "ok", result.error
    keys = [c.key for c in result.calls]
    assert all(k is not None for k in keys)
    d1, d1_kw, _, d1_after, a_before, _, a_after, c_after = keys
    assert d1 == d1_kw
    assert d1 is not None and d1.arguments == canonical_arguments({"x": 1}) and d1.view == "epoch:0"
    assert d1_after is not None and d1_after.view == "epoch:1"
    ws = result.workspaces["workspace"]
    assert a_before == a_after and a_before is not None and a_before.view == ws.root_id
    assert c_after is not None and c_after.view != ws.root_id
    assert host.root_key(host.bind("store", "double", (1,), {})) == d1  # early results claimable


async def test_tool_failures_raise_builtins_or_tool_error_in_the_program(
    factory: GuestFactory,
) -> None:
    host, _ = _host(factory)
    src = (
        "out = []\n"
        "try:\n    workspace.read_text('nope')\nexcept FileNotFoundError as e:\n    out.append((e.errno, e.filename))\n"
        "try:\n    store.odd('raise')\nexcept LookupError as e:\n    out.append(str(e))\n"
        "try:\n    store.odd('custom')\nexcept Exception as e:\n"
        "    out.append((type(e).__name__, str(e)))\n"
        "out\n"
    )
    result = await host.run_source(src)
    assert result.status == "ok", result.error
    assert result.value == [(2, "nope"), "deliberate", ("ToolError", "_Custom: my failure")]
    assert [c.outcome for c in result.calls] == ["error"] * 3
    errors = [c.error for c in result.calls]
    assert [e.type for e in errors if e] == ["FileNotFoundError", "LookupError", "_Custom"]


async def test_an_uncaught_tool_error_ends_the_run_at_its_line(factory: GuestFactory) -> None:
    host, _ = _host(factory)
    result = await host.run_source("x = 1\nstore.odd('custom')\n")
    assert result.status == "error"
    assert result.error is not None
    assert (result.error.type, result.error.message, result.error.line) == (
        "ToolError",
        "_Custom: my failure",
        2,
    )
    assert ToolError("_Custom", "my failure").type_name == "_Custom"


async def test_bad_calls_raise_type_error_in_the_program(factory: GuestFactory) -> None:
    """Bad bindings and non-plain arguments are ``TypeError``s; a non-plain result is a
    ``ToolError`` (``InvalidResult``): the tool ran, its value cannot cross."""
    host, _ = _host(factory)
    src = (
        "out = []\n"
        "for args in [(), (1, 2)]:\n"
        "    try:\n        store.double(*args)\n    except TypeError:\n        out.append('bind')\n"
        "try:\n    store.odd({1, 2})\nexcept TypeError:\n    out.append('plain argument')\n"
        "try:\n    store.odd('object')\nexcept Exception as e:\n    out.append((type(e).__name__, e.type_name))\n"
        "out\n"
    )
    result = await host.run_source(src)
    assert result.value == ["bind", "bind", "plain argument", ("ToolError", "InvalidResult")]
    # A non-plain argument fails in the Guest: that call never reaches the Host.
    assert [(c.method, c.outcome) for c in result.calls] == [
        ("double", "error"),
        ("double", "error"),
        ("odd", "error"),
    ]
    assert result.calls[0].key is None  # unbound calls have no key
    assert [c.error.type for c in result.calls if c.error] == [
        "TypeError",
        "TypeError",
        "InvalidResult",
    ]


async def test_oversized_results_are_an_error_in_the_program(
    factory: GuestFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pysolate._calls._crossing.MAX_RESULT_CHARS", 100)
    host, _ = _host(factory)
    result = await host.run_source("store.odd('x' * 200)")
    assert result.status == "error"
    assert result.error is not None and result.error.type == "ValueError"


async def test_writes_land_in_the_run_branch_only(factory: GuestFactory) -> None:
    host, _ = _host(factory)
    src = "workspace.write_text('a.txt', 'new')\nworkspace.delete('d/b.txt')\n(workspace.read_text('a.txt'), workspace.list_dir('d'))"
    result = await host.run_source(src)
    assert result.value == ("new", [])
    assert result.workspaces["workspace"].changes() == {"a.txt": b"new", "d/b.txt": None}
    again = await host.run_source("workspace.read_text('a.txt')")
    assert again.value == "alpha"


async def test_concurrent_runs_share_a_host_without_sharing_state(factory: GuestFactory) -> None:
    host, _ = _host(factory)
    results: dict[int, object] = {}

    async def one(i: int) -> None:
        src = f"workspace.write_text('mine.txt', '{i}')\nstore.double({i})\n(workspace.read_text('mine.txt'), workspace.list_dir())"
        results[i] = await host.run_source(src)

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    for i, result in results.items():
        assert result.value == (str(i), ["a.txt", "d", "mine.txt"])  # type: ignore[attr-defined]
        assert [c.args for c in result.calls][:2] == [("mine.txt", str(i), "utf-8"), (i,)]  # type: ignore[attr-defined]
        assert result.workspaces["workspace"].changes() == {"mine.txt": str(i).encode()}  # type: ignore[attr-defined]


async def test_the_result_dumps_to_json(factory: GuestFactory) -> None:
    host, _ = _host(factory)
    result = await host.run_source(
        "workspace.write_bytes('x', b'\\x00')\nstore.odd((1, float('inf')))"
    )
    dumped = json.loads(json.dumps(result.to_json()))
    assert dumped["status"] == "ok"
    assert dumped["value"] == [1, "inf"]
    assert dumped["calls"][0]["args"] == ["x", {"$bytes": "00"}]
    assert dumped["calls"][0]["effect"] == "write"
    assert "workspaces" not in dumped


async def test_call_root_runs_only_early_eligible_methods(factory: GuestFactory) -> None:
    host, store = _host(factory)
    assert await host.call_root("store", "get", host.bind("store", "get", ("a",), {})) == [1, 2]
    assert (
        await host.call_root(
            "workspace", "read_text", host.bind("workspace", "read_text", ("a.txt",), {})
        )
        == "alpha"
    )
    for method, args in [("size", ()), ("put", ("q", [1])), ("odd", ())]:
        with pytest.raises(PermissionError, match="never run early"):
            await host.call_root("store", method, host.bind("store", method, args, {}))
    assert "q" not in store.items


async def test_early_sync_methods_share_the_early_thread_budget() -> None:
    """``threads=4`` gives early calls 2 threads (``_threads``): two overlap, a third never."""
    lock = threading.Lock()
    pair = threading.Barrier(2, timeout=5)  # two calls must overlap; a third never may
    running, peak = 0, 0

    def slow(i: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        pair.wait()
        with lock:
            running -= 1
        return i

    host = Host(threads=4)
    host.register("t", scripted_tool(slow=Script(slow, effect=Effect.PURE, sync=True)))
    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(host.call_root, "t", "slow", host.bind("t", "slow", (i,), {}))
    assert peak == 2


async def test_runs_are_traced_through_the_host_instrument() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host = Host(guest_factory=in_process_guest, instrument=OTelInstrument(provider))
    store = Store()
    host.register("store", store)
    result = await host.run_source("store.double(2)\nstore.odd('raise')\n", speculate=False)
    assert result.status == "error"
    await host.run_source("x = (")
    provider.shutdown()
    spans = sorted((s.name, s.status.status_code.name) for s in exporter.get_finished_spans())
    assert spans == [
        ("execute_tool store.double", "UNSET"),
        ("execute_tool store.odd", "ERROR"),
        ("pysolate.run", "ERROR"),  # the program raised
        ("pysolate.run", "ERROR"),  # rejected
    ]


async def test_the_default_guest_is_the_isolated_subprocess() -> None:
    host = Host()
    host.register("store", Store())
    result = await host.run_source("store.double(4)")
    assert result.value == 8
    assert result.isolation is not None and result.isolation.level != "in_process"


async def test_workspace_semantics_inside_the_program(
    factory: GuestFactory, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.txt").write_text("alpha")
    (source / "old.txt").write_text("old")
    (tmp_path / "secret.txt").write_text("hunter2")
    os.symlink(tmp_path / "secret.txt", source / "leak")
    host = Host(guest_factory=factory)
    host.register("workspace", Workspace.frozen(source))
    program = (
        "refused = []\n"
        "for path in ['../secret.txt', str(PATH) + '/secret.txt', 'leak']:\n"
        "    try:\n        workspace.read_text(path)\n    except PermissionError as e:\n        refused.append(path)\n"
        "workspace.write_text('a.txt', workspace.read_text('a.txt') + '!')\n"
        "workspace.delete('old.txt')\n"
        "workspace.write_text('new/n.txt', 'n')\n"
        "(refused, workspace.read_text('a.txt'), workspace.exists('old.txt'), workspace.list_dir())\n"
    ).replace("PATH", repr(str(tmp_path)))
    before = {p.name: p.read_bytes() for p in source.iterdir() if not p.is_symlink()}
    kept, dropped = await host.run_source(program), await host.run_source(program)
    for result in (kept, dropped):
        assert result.status == "ok", result.error
        assert result.value == (
            ["../secret.txt", f"{tmp_path}/secret.txt", "leak"],
            "alpha!",
            False,
            ["a.txt", "leak", "new"],
        )
    out = kept.workspaces["workspace"].commit(tmp_path / "out")
    dropped.workspaces["workspace"].discard()
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["a.txt", "new", "new/n.txt"]
    assert (out / "a.txt").read_text() == "alpha!"
    assert {p.name: p.read_bytes() for p in source.iterdir() if not p.is_symlink()} == before
    assert "hunter2" not in json.dumps(kept.to_json())


async def test_cancelling_a_run_cancels_its_call_in_flight_and_propagates(
    factory: GuestFactory,
) -> None:
    started = anyio.Event()

    async def block() -> None:
        started.set()
        await anyio.sleep_forever()

    tool = scripted_tool(block=Script(block, effect=Effect.WRITE))
    host = Host(guest_factory=factory)
    host.register("t", tool)
    finished: list[object] = []

    async def run() -> None:
        finished.append(await host.run_source("t.block()"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        tg.cancel_scope.cancel()
    assert finished == []
    assert [c.outcome for c in tool.calls] == ["cancelled"]
