"""The subprocess Guest runs a sealed program with capability proxies, exactly like CPython.

Every test here goes through a real child interpreter (strongest isolation available).
"""

from __future__ import annotations

import math
import os
import select
from collections.abc import Awaitable, Callable

import anyio
import pytest

from pysolate._guest import (
    GuestStartError,
    SubprocessGuest,
    _forked,
    _reaper,
    start_subprocess_guest,
)
from pysolate._guest_api import GuestLimits, GuestOutcome, ToolFailure

pytestmark = pytest.mark.anyio

Behaviour = Callable[..., Awaitable[object]]


class Tools:
    """A handler that records every call and answers from ``behaviours`` (echo otherwise)."""

    def __init__(self, **behaviours: Behaviour) -> None:
        self.behaviours = behaviours
        self.calls: list[tuple[str, str, tuple[object, ...], dict[str, object]]] = []

    async def __call__(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        self.calls.append((capability, method, args, kwargs))
        behaviour = self.behaviours.get(method)
        if behaviour is None:
            return [capability, method, list(args), kwargs]
        return await behaviour(*args, **kwargs)


CAPS = {"workspace": ["read_text", "write_text", "fail", "slow", "odd"], "docs": ["search"]}


async def run(
    source: str, tools: Tools | None = None, limits: GuestLimits | None = None
) -> GuestOutcome:
    guest = await start_subprocess_guest(CAPS, limits or GuestLimits())
    try:
        return await guest.run(source, tools or Tools())
    finally:
        await guest.aclose()


async def test_final_expression_is_the_value() -> None:
    out = await run("x = 20\nx + 22")
    assert (out.status, out.value, out.error) == ("ok", 42, None)


async def test_plain_values_survive_exactly() -> None:
    out = await run("(1, 1.0, True, -0.0, b'\\x00', None, [1, (2,)], {'k': {3: 'v'}})")
    assert out.value == (1, 1.0, True, -0.0, b"\x00", None, [1, (2,)], {"k": {3: "v"}})
    assert type(out.value) is tuple and math.copysign(1, out.value[3]) == -1


async def test_lone_surrogates_stay_in_the_program() -> None:
    """A str with a lone surrogate is not valid text and cannot cross (issue 13): a call
    with one fails in the program before anything is sent, the final value that holds one
    is its repr; printing one is only output and keeps it."""
    tools = Tools()
    source = (
        "import sys\nsys.stdout.write('\\udc80')\n"
        "try:\n    docs.search('a\\udcffb')\nexcept ValueError as e:\n    m = str(e)\n"
        "(m, '\\ud800')"
    )
    out = await run(source, tools)
    assert (out.status, out.stdout) == ("ok", "\udc80")
    assert (
        out.value
        == "('docs.search: arguments must be plain data (str with a lone surrogate at index 1)', '\\ud800')"
    )
    assert tools.calls == []


async def test_non_plain_value_is_its_repr() -> None:
    out = await run("class P:\n    def __repr__(self):\n        return 'P!'\nP()")
    assert (out.status, out.value) == ("ok", "P!")


async def test_no_final_expression_means_no_value() -> None:
    out = await run("x = 1\nif x:\n    y = 2\n")
    assert (out.status, out.value) == ("ok", None)


async def test_stdout_is_captured_in_order() -> None:
    out = await run("print('a')\nprint('é', 2, sep='-')\nimport sys\nsys.stdout.write('z')\n7")
    assert (out.stdout, out.value) == ("a\né-2\nz", 7)


async def test_calls_reach_the_handler_in_order_with_exact_arguments() -> None:
    tools = Tools()
    out = await run(
        "a = workspace.read_text('a.txt')\nb = docs.search(('q', 1), limit=3, raw=b'x')\n[a, b]",
        tools,
    )
    assert tools.calls == [
        ("workspace", "read_text", ("a.txt",), {}),
        ("docs", "search", (("q", 1),), {"limit": 3, "raw": b"x"}),
    ]
    assert out.value == [
        ["workspace", "read_text", ["a.txt"], {}],
        ["docs", "search", [("q", 1)], {"limit": 3, "raw": b"x"}],
    ]


async def test_each_result_is_a_fresh_value() -> None:
    async def read_text(path: str) -> object:
        return {"path": path, "lines": [1, 2]}

    out = await run(
        "r = workspace.read_text('p')\nr['lines'].append(3)\nworkspace.read_text('p')",
        Tools(read_text=read_text),
    )
    assert out.value == {"path": "p", "lines": [1, 2]}


async def test_tool_failure_is_the_builtin_exception_at_the_call() -> None:
    async def fail() -> object:
        raise ToolFailure("FileNotFoundError", "No such file", (2, "No such file", "a.txt"))

    out = await run(
        "try:\n    workspace.fail()\nexcept FileNotFoundError as e:\n    caught = (e.errno, e.filename)\ncaught",
        Tools(fail=fail),
    )
    assert (out.status, out.value) == ("ok", (2, "a.txt"))


async def test_uncaught_tool_failure_reports_the_call_line() -> None:
    async def fail() -> object:
        raise ToolFailure("KeyError", "'k'", ("k",))

    out = await run("x = 1\n\nworkspace.fail()\n", Tools(fail=fail))
    assert out.status == "error" and out.error is not None
    assert (out.error.type, out.error.line) == ("KeyError", 3)


async def test_unknown_tool_error_type_becomes_tool_error() -> None:
    async def fail() -> object:
        raise ToolFailure("QuotaExceeded", "too many")

    out = await run("workspace.fail()", Tools(fail=fail))
    assert out.error is not None
    assert (out.error.type, out.error.message) == ("ToolError", "QuotaExceeded: too many")


async def test_non_plain_arguments_raise_type_error_before_any_call() -> None:
    tools = Tools()
    out = await run(
        "try:\n    workspace.read_text(object())\nexcept TypeError:\n    ok = True\nok", tools
    )
    assert (out.status, out.value, tools.calls) == ("ok", True, [])


async def test_non_plain_result_is_a_tool_error_in_the_program() -> None:
    """A result that cannot cross fails the call (issue 13: a ``ToolError`` named
    ``InvalidResult``), even when a handler lets one through."""

    async def odd() -> object:
        return {1, 2}

    out = await run("workspace.odd()", Tools(odd=odd))
    assert out.error is not None and out.error.type == "ToolError"
    assert out.error.message.startswith(
        "InvalidResult: workspace.odd returned a value that cannot cross"
    )


async def test_calls_from_program_threads_are_served_one_at_a_time() -> None:
    tools = Tools()
    source = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(8) as pool:\n"
        "    results = list(pool.map(docs.search, range(40)))\n"
        "[r[2][0] for r in results]"
    )
    out = await run(source, tools)
    assert (out.status, out.value) == ("ok", list(range(40)))
    assert sorted(c[2][0] for c in tools.calls) == list(range(40))  # type: ignore[type-var]


async def test_proxies_expose_only_granted_methods() -> None:
    tools = Tools()
    out = await run(
        "hasattr(workspace, 'delete'), hasattr(workspace, 'read_text'), repr(docs)", tools
    )
    assert out.value == (False, True, "<capability docs>")
    assert tools.calls == []


async def test_program_error_reports_type_message_and_deepest_agent_line() -> None:
    out = await run("def f(d):\n    return d['missing']\n\nf({})\n")
    assert out.status == "error" and out.error is not None
    assert (out.error.type, out.error.message, out.error.line) == ("KeyError", "'missing'", 2)


async def test_compile_time_syntax_error_is_an_error_with_its_line() -> None:
    out = await run("x = 1\nreturn x\n")
    assert out.status == "error" and out.error is not None
    assert (out.error.type, out.error.line) == ("SyntaxError", 2)


async def test_system_exit_is_an_error_not_a_crash() -> None:
    out = await run("import sys\nsys.exit(3)")
    assert out.status == "error" and out.error is not None and out.error.type == "SystemExit"


async def test_handler_bug_propagates_and_the_child_is_reaped() -> None:
    async def read_text(path: str) -> object:
        raise LookupError("host bug")

    guest = await start_subprocess_guest(CAPS, GuestLimits())
    with pytest.raises(LookupError, match="host bug"):
        await guest.run("workspace.read_text('a')", Tools(read_text=read_text))
    assert guest._process.returncode is not None
    await guest.aclose()


async def test_guest_runs_once_and_closes_idempotently() -> None:
    guest = await start_subprocess_guest(CAPS, GuestLimits())
    process = guest._process
    # A forked child that ended with ``done`` is reaped by the reaper thread: watch it
    # through a pidfd of our own (the Guest's is closed once its clean-up is done).
    watch = os.dup(process._pidfd) if isinstance(process, _forked.ForkedProcess) else None  # type: ignore[arg-type]
    try:
        assert (await guest.run("1", Tools())).value == 1
        with pytest.raises(RuntimeError):
            await guest.run("2", Tools())
        await guest.aclose()
        await guest.aclose()
        if watch is None:
            assert process.returncode is not None
        else:
            assert _reaper.drain(10)
            poller = select.poll()
            poller.register(watch, select.POLLIN)
            assert poller.poll(0), "the child outlived its clean-up"
    finally:
        if watch is not None:
            os.close(watch)


async def test_started_guest_waits_for_its_source() -> None:
    """Start-up happens before the source exists; an unused Guest is just closed."""
    guest = await start_subprocess_guest(CAPS, GuestLimits())
    await anyio.sleep(0.05)  # on purpose: a while without a source, which must not end it
    assert guest._process.returncode is None
    assert guest.statistics().startup_seconds > 0
    await guest.aclose()
    assert guest._process.returncode is not None


async def test_statistics_count_calls_and_output() -> None:
    guest = await start_subprocess_guest(CAPS, GuestLimits())
    try:
        await guest.run("print('abc')\nworkspace.read_text('a')\ndocs.search('q')", Tools())
    finally:
        await guest.aclose()
    stats = guest.statistics()
    assert (stats.calls, stats.stdout_bytes) == (2, 4)


async def test_cancelling_run_kills_the_child_and_reraises() -> None:
    started = anyio.Event()

    async def slow() -> object:
        started.set()
        await anyio.sleep(30)
        return None

    guest = await start_subprocess_guest(CAPS, GuestLimits())
    with anyio.move_on_after(10) as outer:
        async with anyio.create_task_group() as tg:
            tg.start_soon(guest.run, "workspace.slow()", Tools(slow=slow))
            await started.wait()
            tg.cancel_scope.cancel()
    assert not outer.cancelled_caught
    assert guest._process.returncode is not None
    await guest.aclose()


async def test_cancelling_a_busy_program_kills_it() -> None:
    guest = await start_subprocess_guest(CAPS, GuestLimits())
    with anyio.move_on_after(0.3):
        await guest.run("while True:\n    pass", Tools())
    assert guest._process.returncode is not None
    await guest.aclose()


async def test_isolation_is_reported() -> None:
    out = await run("1")
    assert out.isolation.level in ("namespaces", "landlock")  # the default: file-system isolation
    assert "clearenv" in out.isolation.mechanisms and "rlimits" in out.isolation.mechanisms


async def test_start_failure_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from pysolate._guest import _start

    monkeypatch.setattr(
        _start, "START_TIMEOUT", 0
    )  # past the deadline at the first wait for the child
    with pytest.raises(GuestStartError):
        await start_subprocess_guest(CAPS, GuestLimits())


def test_guest_satisfies_the_factory_protocol() -> None:
    from pysolate._guest_api import Guest, GuestFactory

    guest: type[Guest] = SubprocessGuest
    factory: GuestFactory = start_subprocess_guest
    assert guest and factory
