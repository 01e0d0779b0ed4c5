"""pysolate.testing: scripted tools on a mock clock, the in-process Guest's limits, and the
broker's timeouts (virtual time, so nothing waits)."""

from __future__ import annotations

import anyio
import pytest
from trio.testing import MockClock

from occurrences import Effect
from pysolate import GuestLimits, Host, RunStatus
from pysolate._calls._broker import OutcomeUnknown, execute
from pysolate._guest_api import ToolFailure
from pysolate.testing import (
    InProcessGuest,
    Script,
    in_process_guest,
    memory_workspace,
    scripted_tool,
)
from scheduler import LaneStopped


def _run_virtual(fn: object) -> None:
    anyio.run(fn, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)})  # type: ignore[arg-type]


def _fail(query: str) -> str:
    raise LookupError(query)


def test_scripted_calls_record_arguments_and_virtual_times() -> None:
    tool = scripted_tool(
        search=Script(lambda query, limit=2: [query] * limit, effect=Effect.PURE, latency=1.5),
        fail=Script(_fail, latency=0.5),
    )

    async def main() -> None:
        assert await tool.search("q") == ["q", "q"]  # type: ignore[attr-defined]
        with pytest.raises(LookupError):
            await tool.fail("x")  # type: ignore[attr-defined]
        with anyio.move_on_after(0.25):
            await tool.search("cut", limit=1)  # type: ignore[attr-defined]

    _run_virtual(main)
    first, failed, cut = tool.calls
    assert (first.method, first.args, first.kwargs, first.outcome) == ("search", ("q",), {}, "ok")
    assert (first.started, first.ended) == (0.0, 1.5)
    assert (failed.outcome, failed.started, failed.ended) == ("error", 1.5, 2.0)
    assert (cut.outcome, cut.kwargs, cut.ended) == ("cancelled", {"limit": 1}, 2.25)
    assert tool.calls_to("fail") == [failed]


def test_scripted_methods_declare_effect_version_and_signature() -> None:
    host = Host()
    host.register(
        "t",
        scripted_tool(
            get=Script(lambda path: path, effect=Effect.IMMUTABLE_READ, version="7", sync=True)
        ),
    )
    spec = host.method_specs()["t"]["get"]
    assert (spec.effect, spec.version) == (Effect.IMMUTABLE_READ, "7")
    assert host.bind("t", "get", (), {"path": "a"}).arguments == {"path": "a"}
    with pytest.raises(TypeError):
        host.bind("t", "get", (), {})


@pytest.mark.anyio
async def test_sync_scripted_methods_run_in_threads_and_record() -> None:
    tool = scripted_tool(
        get=Script(lambda path: path.upper(), effect=Effect.IMMUTABLE_READ, sync=True)
    )
    host = Host(guest_factory=in_process_guest)
    host.register("t", tool)
    result = await host.run_source("t.get('a') + t.get(path='b')", speculate=False)
    assert result.value == "AB"
    assert [(c.args, c.kwargs, c.outcome) for c in tool.calls] == [
        (("a",), {}, "ok"),
        (("b",), {}, "ok"),
    ]


def test_a_hanging_read_times_out_as_timeout_error() -> None:
    tool = scripted_tool(get=Script(lambda: 1, effect=Effect.PURE, latency=100.0))
    host = Host(call_timeout=30.0)
    host.register("t", tool)

    async def main() -> None:
        scope = host.new_scope()
        with pytest.raises(ToolFailure) as info:
            await scope.handler("t", "get", (), {})
        assert info.value.type_name == "TimeoutError"
        assert anyio.current_time() == 30.0
        # Early, the same timeout is the lane's: never an outcome a Guest call claims.
        with pytest.raises(LaneStopped, match=r"did not finish within 30\.0s early"):
            await host.call_root("t", "get", host.bind("t", "get", (), {}))
        assert anyio.current_time() == 60.0

    _run_virtual(main)
    assert [c.outcome for c in tool.calls] == ["cancelled", "cancelled"]


def test_a_hanging_write_has_an_unknown_outcome_and_is_not_retried() -> None:
    tool = scripted_tool(put=Script(lambda: None, effect=Effect.WRITE, latency=100.0))
    host = Host(call_timeout=5.0)
    host.register("t", tool)

    async def main() -> None:
        scope = host.new_scope()
        with pytest.raises(OutcomeUnknown, match="may or may not"):
            await scope.handler("t", "put", (), {})
        (record,) = scope.calls
        assert (record.outcome, record.error and record.error.type) == ("unknown", "OutcomeUnknown")
        assert (record.started, record.ended) == (0.0, 5.0)

    _run_virtual(main)
    assert len(tool.calls) == 1


def test_execute_is_the_one_physical_path_for_both_lanes() -> None:
    tool = scripted_tool(get=Script(lambda: [1], effect=Effect.PURE))
    host = Host()
    host.register("t", tool)

    async def main() -> None:
        call = host.bind("t", "get", (), {})
        method = host._registrations["t"].methods["get"]
        first = await execute(tool, method, call, threads=host.threads, early=False, timeout=1.0)
        second = await host.new_scope().call("t", "get", call)
        assert first == second == [1] and first is not second

    _run_virtual(main)
    assert len(tool.calls) == 2


def _limited(**limits: object) -> Host:
    host = Host(guest_factory=in_process_guest, limits=GuestLimits(**limits))  # type: ignore[arg-type]
    host.register("t", scripted_tool(ping=Script(lambda: "pong", effect=Effect.PURE)))
    return host


@pytest.mark.anyio
async def test_in_process_call_limit_aborts_the_run() -> None:
    result = await _limited(max_calls=3).run_source("for _ in range(10):\n    t.ping()\n")
    assert result.status == RunStatus.ABORTED
    assert result.error is not None and result.error.type == "CallLimit"
    assert result.guest_status == "limit"
    assert result.report.logical == 3


@pytest.mark.anyio
async def test_in_process_output_limit_aborts_the_run_and_keeps_what_fit() -> None:
    result = await _limited(output_bytes=10).run_source(
        "try:\n    for _ in range(5):\n        print('abcd')\nexcept Exception:\n    pass\n"
    )
    assert result.status == "aborted"
    assert result.error is not None and result.error.type == "OutputLimit"
    assert result.stdout == "abcd\nabcd\n"


@pytest.mark.anyio
async def test_in_process_wall_time_aborts_a_slow_run() -> None:
    host = Host(guest_factory=in_process_guest, limits=GuestLimits(wall_time=0.05))
    host.register("t", scripted_tool(wait=Script(lambda: None, effect=Effect.PURE, latency=10.0)))
    result = await host.run_source("t.wait()")
    assert result.status == "aborted"
    assert result.error is not None and result.error.type == "WallTimeLimit"


@pytest.mark.anyio
async def test_an_in_process_guest_runs_one_program() -> None:
    guest = await InProcessGuest.start({}, GuestLimits())

    async def handler(*_: object) -> object:
        raise AssertionError("no calls")

    outcome = await guest.run("print('x', end='')\n7", handler)
    assert (outcome.status, outcome.value, outcome.stdout, outcome.isolation.level) == (
        "ok",
        7,
        "x",
        "in_process",
    )
    with pytest.raises(RuntimeError):
        await guest.run("1", handler)
    await guest.aclose()
    await guest.aclose()


def test_memory_workspace_is_a_frozen_workspace() -> None:
    ws = memory_workspace({"a": "x"})

    async def main() -> None:
        assert await ws.read_text("a") == "x"
        with pytest.raises(PermissionError):
            await ws.write_text("a", "y")

    _run_virtual(main)
