"""Fault catalogue, Guest side: hostile or broken programs, through a speculating run.

The Guest layer has its own hostile, limit and protocol tests (``tests/pysolate``). Here
the same abuse arrives as a token stream with early reads in flight, and each test checks
what only the whole run can show: the run ends with the right status and error, the early
reads are accounted (``check_invariants`` inside ``streamed``), no write, live read or
unknown call ran before the stream ended, none that ran was replayed, and the root
workspace is untouched. Programs whose failure is deterministic also equal the sequential
reference, through both Guests.
"""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from pysolate import GuestLimits, RunResult
from pysolate._guest import start_subprocess_guest
from pysolate._guest_api import GuestFactory
from pysolate.testing import check_invariants, in_process_guest

from .harness import (
    QUIET,
    TimedChunks,
    Tools,
    assert_no_early_effects,
    assert_same,
    build_host,
    children,
    reference,
    streamed,
    with_latency,
)

pytestmark = pytest.mark.anyio

READS = "r = docs.search('alpha')\nf = docs.fetch('beta')\n"
AFTER = "workspace.write_text('a.txt', 'changed')\nn = clock.now()\nshell.run('after')\n"
"""Effects placed after the hostile part: a run that ends there never reaches them."""

RAW = """\
import os, sys, json, struct, time
fd = int(sys.argv[-1])
def send(obj):
    body = json.dumps(obj).encode()
    os.write(fd, struct.pack('>I', len(body)) + body)
"""
"""Prelude giving a program raw access to the broker channel (as any program can get)."""

SMALL = GuestLimits(
    wall_time=1.5, cpu_time=10.0, memory_bytes=256 * 1024 * 1024, output_bytes=100_000
)


@pytest.mark.parametrize(
    ("hostile", "status", "error_type"),
    [
        pytest.param("while True:\n    pass\n", "aborted", "WallTimeLimit", id="infinite_loop"),
        pytest.param("x = [0] * 10**10\n", "aborted", "MemoryLimit", id="memory_bomb"),
        pytest.param(
            "while True:\n    print('x' * 1000)\n", "aborted", "OutputLimit", id="output_flood"
        ),
        pytest.param("import os\nos._exit(3)\n", "aborted", "GuestCrashed", id="guest_exits"),
        pytest.param(
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "aborted",
            "GuestCrashed",
            id="guest_killed",
        ),
        pytest.param(
            RAW + "os.write(fd, b'\\x00\\x00\\x00\\x05hello')\ntime.sleep(30)\n",
            "aborted",
            "ProtocolError",
            id="malformed_frame",
        ),
        pytest.param(
            RAW + "os.write(fd, struct.pack('>I', 2**31))\ntime.sleep(30)\n",
            "aborted",
            "ProtocolError",
            id="oversized_frame",
        ),
        pytest.param(
            RAW + "send({'t': 'ready', 'mechanisms': []})\ntime.sleep(30)\n",
            "aborted",
            "ProtocolError",
            id="out_of_turn_frame",
        ),
    ],
)
async def test_hostile_program_ends_the_run_and_runs_no_effect(
    hostile: str, status: str, error_type: str
) -> None:
    source = READS + hostile + AFTER
    with anyio.fail_after(30):
        result, tools, chunks = await streamed(source, factory=start_subprocess_guest, limits=SMALL)
    assert result.status == status, result.error
    assert result.error is not None and result.error.type == error_type, result.error
    assert_no_early_effects(tools, result, chunks.ended)
    assert tools.clock.calls == [] and tools.shell.calls == []
    assert "a.txt" not in result.workspaces["workspace"].changes()
    assert children() == []


async def _die_mid_call() -> tuple[RunResult, Tools, TimedChunks]:
    conditions = with_latency(QUIET, shell_run=10.0)
    source = (
        READS
        + "import os, threading\nthreading.Timer(0.3, os._exit, (1,)).start()\nshell.run('deploy')\n"
        + AFTER
    )
    host, tools = build_host(conditions, start_subprocess_guest, limits=SMALL)
    chunks = TimedChunks(source, conditions.chunk_sizes, conditions.pauses)
    with anyio.fail_after(30):
        result = await host.run_stream(chunks, policy=conditions.policy)
    return result, tools, chunks


async def test_guest_dying_mid_call_cancels_the_call_and_never_replays_it() -> None:
    result, tools, chunks = await _die_mid_call()
    assert result.status == "aborted"
    assert result.error is not None and result.error.type == "GuestCrashed"
    made = tools.shell.calls
    assert len(made) == 1 and made[0].outcome == "cancelled"
    assert chunks.ended is not None and made[0].started >= chunks.ended
    assert children() == []


async def test_call_interrupted_by_a_dying_guest_is_reported_as_unknown() -> None:
    result, _, _ = await _die_mid_call()
    assert [(c.capability, c.method, c.outcome) for c in result.calls][-1] == (
        "shell",
        "run",
        "unknown",
    )
    check_invariants(result)


@pytest.mark.parametrize(
    ("hostile", "expected"),
    [
        pytest.param("import os\nx = os.fork()\n", "PermissionError", id="fork"),
        pytest.param(
            "import os\nx = os.execv('/bin/sh', ['sh', '-c', 'echo pwned'])\n",
            "PermissionError",
            id="exec",
        ),
        pytest.param(
            "import socket\nx = socket.create_connection(('127.0.0.1', 9), timeout=1)\n",
            "PermissionError",
            id="socket",
        ),
    ],
)
async def test_escape_attempts_fail_inside_the_program(hostile: str, expected: str) -> None:
    source = READS + hostile + AFTER
    with anyio.fail_after(30):
        result, tools, chunks = await streamed(source, factory=start_subprocess_guest, limits=SMALL)
    assert result.status == "error"
    assert result.error is not None and result.error.type == expected
    assert_no_early_effects(tools, result, chunks.ended)
    assert tools.shell.calls == []


async def test_host_files_and_environment_are_not_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSOLATE_FAKE_SECRET", "hunter2")
    source = (
        READS
        + "import os\nenv = dict(os.environ)\nseen = os.path.exists('/etc/shadow')\n"
        + AFTER
        + "[env, seen]\n"
    )
    with anyio.fail_after(30):
        result, tools, chunks = await streamed(source, factory=start_subprocess_guest, limits=SMALL)
    assert result.status == "ok", result.error
    assert "hunter2" not in repr(result.value)
    assert_no_early_effects(tools, result, chunks.ended)


async def test_printing_broker_frames_is_just_output() -> None:
    fake = '{"t": "call", "capability": "shell", "method": "run", "args": ["t", [["s", "x"]]], "kwargs": ["d", []]}'
    source = READS + f"print({fake!r})\nprint('\\x00\\x00\\x00\\x10' + {fake!r})\n'real'\n"
    with anyio.fail_after(30):
        result, tools, _ = await streamed(source, factory=start_subprocess_guest, limits=SMALL)
    assert (result.status, result.value) == ("ok", "real")
    assert tools.shell.calls == [] and fake in result.stdout


async def test_forged_call_frame_gains_nothing() -> None:
    """A call frame for an ungranted capability is refused; no tool runs for it."""
    forged = {
        "t": "call",
        "capability": "secrets",
        "method": "steal",
        "args": ["t", []],
        "kwargs": ["d", []],
    }
    source = READS + RAW + f"send({forged!r})\ntime.sleep(0.2)\n" + AFTER
    with anyio.fail_after(30):
        result, tools, chunks = await streamed(source, factory=start_subprocess_guest, limits=SMALL)
    assert_no_early_effects(tools, result, chunks.ended)
    assert all(c.capability != "secrets" or c.outcome == "error" for c in result.calls)


def _factories() -> list[object]:
    return [
        pytest.param(in_process_guest, id="in_process"),
        pytest.param(start_subprocess_guest, id="subprocess"),
    ]


@pytest.mark.parametrize("factory", _factories())
@pytest.mark.parametrize(
    ("program", "error_type", "line"),
    [
        pytest.param(
            "def f(n):\n    return f(n + 1)\nf(0)\n", "RecursionError", 4, id="deep_recursion"
        ),
        pytest.param("docs.search(object())\n", "TypeError", 3, id="non_plain_argument"),
        pytest.param("docs.search()\n", "TypeError", 3, id="missing_argument"),
        pytest.param("docs.search('a', limit=3)\n", "TypeError", 3, id="unexpected_keyword"),
        pytest.param("workspace.read_text(42)\n", "TypeError", 3, id="wrong_type_for_tool"),
        pytest.param("secrets.get('key')\n", "NameError", 3, id="capability_not_granted"),
        pytest.param("docs.delete_everything()\n", "AttributeError", 3, id="method_not_granted"),
    ],
)
async def test_program_errors_equal_the_sequential_run(
    factory: GuestFactory, program: str, error_type: str, line: int
) -> None:
    source = READS + program + AFTER
    with anyio.fail_after(30):
        result, tools, chunks = await streamed(source, factory=factory)
        ref = await reference(source, factory=factory)
    assert result.status == "error"
    assert result.error is not None and (result.error.type, result.error.line) == (
        error_type,
        line,
    ), result.error
    assert_same(result, ref)
    assert_no_early_effects(tools, result, chunks.ended)
    assert tools.clock.calls == [] and tools.shell.calls == []


@pytest.mark.parametrize("factory", _factories())
async def test_a_slow_guest_start_does_not_start_effects_early(factory: GuestFactory) -> None:
    """Slow chunks: the Guest is started during the stream, yet it is given nothing before
    the seal, so effects wait for the end of the stream."""
    slow = dataclasses.replace(QUIET, pauses=(0.01,))
    source = READS + AFTER + "r\n"
    result, tools, chunks = await streamed(source, slow, factory)
    assert result.status == "ok"
    assert_no_early_effects(tools, result, chunks.ended)
    assert_same(result, await reference(source, slow, factory))
