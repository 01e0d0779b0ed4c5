"""How a Guest waits, ends and is scheduled: it compiles once before its program comes, its
output is complete when ``done`` arrives, it exits once the Host has ``done``, and it runs
as batch work that never preempts the Host's event loop."""

from __future__ import annotations

import gc
import importlib.util
import os
import select
import socket
import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from guest_levels import guest_factory, params

from pysolate import _guest_errors
from pysolate._guest import _forked, _output, _process, _reaper
from pysolate._guest._channel import Channel
from pysolate._guest.child._wire import HEADER
from pysolate._guest_api import Guest, GuestLimits, GuestOutcome

ROOT = Path(__file__).resolve().parents[2]

FINISH = """\
import importlib.util, os, sys, time
root, fd = sys.argv[1], int(sys.argv[2])
spec = importlib.util.spec_from_file_location("_child", os.path.join(root, "pysolate", "_guest", "child", "_child.py"))
child = importlib.util.module_from_spec(spec)
spec.loader.exec_module(child)
child._register_packages(root)
from pysolate._guest.child import _wire
guest = child._Guest(child._Channel(fd, _wire.HEADER, _wire.encode_frame), {"limits": {"max_frame_bytes": 1 << 20}, "capabilities": {}})
print("printed before the end")
os._exit = lambda code: time.sleep(60)  # stay alive after done: EOF must not come from the exit
guest.finish("ok", None, None)
"""


def test_output_is_complete_when_done_arrives() -> None:
    """``finish`` closes stdout and stderr before it sends ``done``, so the Host never waits
    for the exit (which closes them only after unmapping the address space)."""
    host_end, child_end = socket.socketpair()
    child = subprocess.Popen(
        [sys.executable, "-I", "-S", "-B", "-c", FINISH, str(ROOT), str(child_end.fileno())],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(child_end.fileno(),),
    )
    child_end.close()
    try:
        host_end.settimeout(30)
        header = host_end.recv(HEADER.size, socket.MSG_WAITALL)
        (length,) = HEADER.unpack(header)
        assert b'"t":"done"' in host_end.recv(length, socket.MSG_WAITALL)
        assert child.poll() is None  # still alive: only the close can have ended the pipes
        for pipe, expected in ((child.stdout, b"printed before the end\n"), (child.stderr, b"")):
            assert pipe is not None
            data = b""
            while True:
                readable, _, _ = select.select([pipe], [], [], 10)
                assert readable, "the pipe is still open after done"
                chunk = os.read(pipe.fileno(), 65536)
                if not chunk:
                    break
                data += chunk
            assert data == expected
    finally:
        child.kill()
        child.wait()
        host_end.close()
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()


def test_the_warm_up_compiles_a_program_with_a_final_expression() -> None:
    """``warm`` compiles both parts ``split_program`` makes (a failure would be silent)."""
    spec = importlib.util.spec_from_file_location(
        "_warm_child", ROOT / "pysolate" / "_guest" / "child" / "_child.py"
    )
    assert spec is not None and spec.loader is not None
    child = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(child)
    body, final = _guest_errors.split_program(child._WARM_UP)
    assert body.co_filename == _guest_errors.AGENT_FILENAME and final is not None
    guest = child._Guest(None, {"limits": {}, "capabilities": {}})
    guest._errors = _Counting()
    guest.warm()
    assert guest._errors.compiled == [child._WARM_UP]


class _Counting:
    def __init__(self) -> None:
        self.compiled: list[str] = []

    def split_program(self, source: str) -> object:
        self.compiled.append(source)
        return _guest_errors.split_program(source)


LINGER = FINISH.replace(
    "os._exit = lambda code: time.sleep(60)  # stay alive after done: EOF must not come from the exit\n",
    "",
)


def test_the_child_exits_only_once_the_host_hung_up_after_done() -> None:
    """Exiting (unmapping the address space) in the time slice the Host was woken in by
    ``done`` delayed the Host's read of it: the child waits, asleep, until the Host closes
    its end, and then exits by itself."""
    assert LINGER != FINISH
    host_end, child_end = socket.socketpair()
    child = subprocess.Popen(
        [sys.executable, "-I", "-S", "-B", "-c", LINGER, str(ROOT), str(child_end.fileno())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(child_end.fileno(),),
    )
    child_end.close()
    try:
        host_end.settimeout(30)
        (length,) = HEADER.unpack(host_end.recv(HEADER.size, socket.MSG_WAITALL))
        assert b'"t":"done"' in host_end.recv(length, socket.MSG_WAITALL)
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=1)  # still there: it exits only once we hang up
        host_end.close()
        assert child.wait(timeout=30) == 0
    finally:
        child.kill()
        child.wait()
        host_end.close()


@pytest.mark.anyio
@pytest.mark.parametrize("level", params())
async def test_the_host_hangs_up_at_done_so_the_child_exits_by_itself(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spawned child is awaited, not killed, after ``done``: without the Host's hang-up it
    would wait for it until killed (``-SIGKILL``)."""
    monkeypatch.setattr(_forked, "fork_child_or_none", _spawn_instead)
    guest, outcome = await _ran(level, monkeypatch, "print('hi')\n6 * 7\n")
    assert (outcome.status, outcome.value, outcome.stdout) == ("ok", 42, "hi\n")
    assert guest.statistics().calls == 0
    assert guest._process.returncode == 0  # type: ignore[attr-defined]


async def _spawn_instead(*args: object) -> None:
    return None


@pytest.mark.anyio
@pytest.mark.parametrize("level", params("seccomp", hidden_bwrap=False))
async def test_a_forked_child_is_left_asleep_to_the_reaper_after_done(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its exit would compete with the Host's end of the run: the run returns with the
    child alive, waiting for its hang-up, which the reaper's job brings (``REAP_DELAY``)."""
    jobs: list[Callable[[], None]] = []
    monkeypatch.setattr(_process, "reap_later", jobs.append)
    guest, outcome = await _ran(level, monkeypatch, "print('hi')\n6 * 7\n")
    assert (outcome.status, outcome.value, outcome.stdout) == ("ok", 42, "hi\n")
    process = guest._process  # type: ignore[attr-defined]
    assert len(jobs) == 1 and isinstance(process, _forked.ForkedProcess)
    assert not process.exited(1.0)  # asleep until the job hangs up
    jobs[0]()
    assert process.exited(0)


@pytest.mark.anyio
@pytest.mark.parametrize("level", params("seccomp", hidden_bwrap=False))
async def test_the_source_is_sent_before_the_run_sets_up_its_watchers(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child wakes and compiles while the Host starts its pumps and exit watcher."""
    order: list[str] = []
    send, watch = Channel.send, _process.watch_exit

    def sending(channel: Channel, frame: bytes) -> object:
        order.append("run" if b'"t":"run"' in frame else "other")
        return send(channel, frame)

    def watching(*args: Any) -> object:
        order.append("watch")
        return watch(*args)

    monkeypatch.setattr(Channel, "send", sending)
    monkeypatch.setattr(_process, "watch_exit", watching)
    _, outcome = await _ran(level, monkeypatch, "6 * 7\n")
    assert (outcome.status, outcome.value) == ("ok", 42)
    assert order[-2:] == ["run", "watch"]


@pytest.mark.anyio
@pytest.mark.parametrize("level", params())
async def test_guest_runs_as_batch_work(level: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, outcome = await _ran(level, monkeypatch, "import os\nos.sched_getscheduler(0)\n")
    assert (outcome.status, outcome.value) == ("ok", os.SCHED_BATCH)


async def _ran(
    level: str, monkeypatch: pytest.MonkeyPatch, source: str
) -> tuple[Guest, GuestOutcome]:
    """A Guest at ``level`` that ran ``source`` (no tools) and was closed, and its outcome."""
    async with guest_factory(level, monkeypatch) as start:
        guest = await start({}, GuestLimits(wall_time=10))
        try:
            with anyio.fail_after(20):
                outcome = await guest.run(source, _no_tools)
        finally:
            await guest.aclose()
    return guest, outcome


async def _no_tools(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    raise AssertionError("no tool is granted")


@pytest.mark.anyio
@pytest.mark.parametrize("level", params("seccomp", hidden_bwrap=False))
async def test_a_finished_guest_leaves_no_reference_cycle(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the collector off, a forked Guest that ran and closed is freed by reference
    counting (its exit watcher was a cancelled task, whose traceback kept the Guest's
    channel and process for a full collection)."""
    gc.collect()
    gc.disable()
    try:
        guest, outcome = await _ran(level, monkeypatch, "print('hi')\n6 * 7\n")
        assert (outcome.status, outcome.value) == ("ok", 42)
        assert _reaper.drain(10)
        watched = weakref.ref(guest)
        del guest
        assert watched() is None
    finally:
        gc.enable()


@pytest.mark.anyio
@pytest.mark.parametrize("level", params("seccomp", hidden_bwrap=False))
async def test_a_forked_guests_output_is_read_without_a_task(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On asyncio loop readers read a forked Guest's pipes (``_output``): more than a pipe
    holds comes through while the program runs, and what is left is taken at ``done``,
    all of it, with no pump task."""

    def no_task(*args: object) -> None:
        raise AssertionError("a pump task for a forked Guest on asyncio")

    monkeypatch.setattr(_output.GuestOutput, "pump", no_task)
    source = "import sys\nfor i in range(3000):\n    print(f'{i:07d}' * 10)\nsys.stderr.write('to stderr')\nprint('last')\n6 * 7\n"
    _, outcome = await _ran(level, monkeypatch, source)
    assert (outcome.status, outcome.value) == ("ok", 42)
    assert outcome.stdout == "".join(f"{i:07d}" * 10 + "\n" for i in range(3000)) + "last\n"
