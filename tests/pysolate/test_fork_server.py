"""The fork server (``_guest._forkserver``): forked Guests keep their level whole, cannot
reach the server or each other, and a dead or stuck server never makes a run wait.

The Guest suites (hostile, limits, protocol, isolation) run through the fork server at the
levels it serves, since it is the default; these tests pin what is specific to it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import anyio
import pytest
from guest_levels import params

from pysolate import Effect, Host, IsolationUnavailable, capability
from pysolate._guest import _forked, _isolation, start_subprocess_guest
from pysolate._guest_api import GuestLimits, GuestOutcome

pytestmark = pytest.mark.anyio

FORKED = ("namespaces", "landlock", "seccomp")
CAPS = {"tools": ["echo", "wait"]}


def forked_levels() -> list[object]:
    """The levels the fork server serves, each skipped where this machine lacks it."""
    return [p for p in params("seccomp", hidden_bwrap=False) if p.values[0] in FORKED]  # type: ignore[attr-defined]


async def echo(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    return args[0] if args else None


async def run(
    source: str, level: str, *, fork_server: bool = True, handler: object = echo
) -> tuple[GuestOutcome, tuple[str, ...]]:
    guest = await start_subprocess_guest(
        CAPS, GuestLimits(wall_time=20), isolation=level, fork_server=fork_server
    )  # type: ignore[arg-type]
    try:
        return await guest.run(source, handler), guest.isolation.mechanisms  # type: ignore[arg-type]
    finally:
        await guest.aclose()


@pytest.mark.parametrize("level", params(hidden_bwrap=False))
async def test_only_the_levels_a_fork_keeps_whole_are_forked(level: str) -> None:
    out, mechanisms = await run("1", level)
    assert out.status == "ok"
    assert ("fork-server" in mechanisms) == (level in FORKED)
    plan = _isolation.plan(level, 1 << 20)  # type: ignore[arg-type]
    assert set(plan.requires()) <= set(mechanisms)  # every mechanism of the level, forked or not


@pytest.mark.parametrize("level", params("seccomp", hidden_bwrap=False))
async def test_turned_off_every_guest_is_spawned(level: str) -> None:
    out, mechanisms = await run("1", level, fork_server=False)
    assert out.status == "ok" and "fork-server" not in mechanisms


@pytest.mark.parametrize("level", forked_levels())
async def test_a_forked_guest_is_its_own_session_with_only_its_own_fds(level: str) -> None:
    source = (
        "import os\nfds = []\nfor fd in range(4096):\n    try:\n        os.fstat(fd)\n        fds.append(fd)\n"
        "    except OSError:\n        pass\n(fds, os.getsid(0) == os.getpid(), os.getcwd())"
    )
    out, _ = await run(source, level)
    assert out.status == "ok", out.error
    assert isinstance(out.value, tuple) and out.value[:2] == ([0, 1, 2, 3], True)
    assert (
        out.value[2] == "/tmp"
        if level == "namespaces"
        else out.value[2].startswith("/tmp/pysolate-guest-")
    )


@pytest.mark.parametrize("level", [p for p in forked_levels() if p.values[0] != "seccomp"])  # type: ignore[attr-defined]
async def test_a_forked_guest_told_other_prepared_rules_fails_closed(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server prepares its Landlock rules once; a child whose ``init`` names any other
    digest than the server's never runs the program (IsolationUnavailable), it does not
    fall back to something weaker."""
    await run("1", level)  # the server is up, with its prepared rules
    server = _forked.server_for(level)
    assert server.prepared is not None
    monkeypatch.setattr(server, "prepared", "0" * 64)
    monkeypatch.setattr(_isolation, "_landlock_digest", lambda plan: "0" * 64)
    with (
        anyio.fail_after(20),
        pytest.raises(
            IsolationUnavailable, match="prepared rules are not the ones the Host planned"
        ),
    ):
        await run("1", level)


@pytest.mark.parametrize("level", forked_levels())
async def test_a_forked_guest_cannot_signal_the_server_or_a_sibling(level: str) -> None:
    entered, release = anyio.Event(), anyio.Event()

    async def hold(
        capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        entered.set()
        await release.wait()
        return None

    sibling = await start_subprocess_guest(CAPS, GuestLimits(wall_time=20), isolation=level)  # type: ignore[arg-type]
    assert "fork-server" in sibling.isolation.mechanisms
    probe = (
        "import os, signal\nseen = []\n"
        f"for pid in (os.getppid(), {sibling.pid}):\n"
        "    for sig in (0, signal.SIGKILL):\n"
        "        try:\n            os.kill(pid, sig)\n            seen.append('ESCAPED')\n"
        "        except OSError as exc:\n            seen.append(type(exc).__name__)\n"
        "seen"
    )
    async with anyio.create_task_group() as tasks:
        results: list[GuestOutcome] = []

        async def sibling_run() -> None:
            results.append(await sibling.run("tools.wait()\n'alive'", hold))

        tasks.start_soon(sibling_run)
        await entered.wait()
        out, _ = await run(probe, level)
        release.set()
    await sibling.aclose()
    assert out.status == "ok", out.error
    assert isinstance(out.value, list) and "ESCAPED" not in out.value
    assert results[0].status == "ok" and results[0].value == "alive"
    assert _forked.server_for(level).live_control() is not None  # the server survived the attempts


@pytest.mark.parametrize("level", forked_levels())
async def test_a_killed_server_is_restarted_for_the_next_guest(level: str) -> None:
    await run("1", level)
    dead = _forked.server_for(level).pid()
    assert dead is not None
    os.kill(dead, signal.SIGKILL)
    out, mechanisms = await run("2", level)
    assert (out.status, out.value) == ("ok", 2) and "fork-server" in mechanisms
    assert _forked.server_for(level).pid() not in (None, dead)


@pytest.mark.parametrize("level", forked_levels())
async def test_a_server_dying_mid_run_ends_the_run_as_a_crash(level: str) -> None:
    entered = anyio.Event()

    async def hold(
        capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        entered.set()
        await anyio.sleep(30)
        return None

    guest = await start_subprocess_guest(CAPS, GuestLimits(wall_time=60), isolation=level)  # type: ignore[arg-type]
    assert "fork-server" in guest.isolation.mechanisms
    server = _forked.server_for(level).pid()
    assert server is not None
    async with anyio.create_task_group() as tasks:
        results: list[GuestOutcome] = []

        async def go() -> None:
            results.append(await guest.run("tools.wait()\n'never'", hold))

        tasks.start_soon(go)
        await entered.wait()
        os.kill(server, signal.SIGKILL)
        with anyio.fail_after(15):  # far below the run's own 60 s wall time: it must not wait on it
            while not results:
                await anyio.sleep(0.01)
    await guest.aclose()
    assert results[0].status == "crashed"
    assert results[0].error is not None and "status -9" in results[0].error.message


@pytest.mark.parametrize("level", forked_levels())
async def test_a_stuck_server_is_replaced(level: str, monkeypatch: pytest.MonkeyPatch) -> None:
    await run("1", level)
    stuck = _forked.server_for(level).pid()
    assert stuck is not None
    monkeypatch.setattr(_forked, "FORK_TIMEOUT", 0.5)
    os.kill(stuck, signal.SIGSTOP)
    try:
        out, mechanisms = await run("3", level)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the replacement killed it already
            os.kill(stuck, signal.SIGCONT)
    assert (out.status, out.value) == ("ok", 3) and "fork-server" in mechanisms
    assert _forked.server_for(level).pid() != stuck


@pytest.mark.parametrize("gone_before_its_first_message", [False, True])
@pytest.mark.parametrize("level", forked_levels())
async def test_a_server_that_cannot_start_falls_back_to_a_spawn(
    level: str, gone_before_its_first_message: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = _forked.server_for(level)
    server.replace(server.live_control() or server.control(_isolation.plan(level, 1 << 20)))  # type: ignore[arg-type]
    monkeypatch.setattr(_forked, "SERVER", "/nonexistent/_forkserver.py")
    monkeypatch.setattr(_forked, "SANDBOXED_SERVER", "/nonexistent/_forkserver.py")
    if gone_before_its_first_message:  # the Host's first message then meets a broken pipe
        prepared = _isolation.prepared_landlock

        def late(*, sandboxed: bool) -> object:
            while server._process is not None and server._process.poll() is None:
                time.sleep(0.01)
            return prepared(sandboxed=sandboxed)

        monkeypatch.setattr(_isolation, "prepared_landlock", late)
    out, mechanisms = await run("4", level)
    assert (out.status, out.value) == ("ok", 4)
    assert "fork-server" not in mechanisms
    assert set(_isolation.plan(level, 1 << 20).requires()) <= set(mechanisms)  # type: ignore[arg-type]


@pytest.mark.parametrize("level", forked_levels())
async def test_the_cpu_limit_of_a_forked_guest_is_reported(level: str) -> None:
    guest = await start_subprocess_guest(
        CAPS, GuestLimits(cpu_time=1, wall_time=20), isolation=level
    )  # type: ignore[arg-type]
    try:
        out = await guest.run("while True:\n    pass", echo)
    finally:
        await guest.aclose()
    assert "fork-server" in guest.isolation.mechanisms
    assert out.status == "limit" and out.error is not None and out.error.type == "CPUTimeLimit"


class Tools:
    @capability(effect=Effect.PURE)
    def echo(self, x: int) -> int:
        return x


@pytest.mark.parametrize("fork_server", [True, False])
async def test_the_host_option_decides(fork_server: bool) -> None:
    host = Host(isolation="landlock", fork_server=fork_server)
    host.register("tools", Tools())
    result = await host.run_source("tools.echo(5)")
    assert result.value == 5
    assert result.isolation is not None
    assert ("fork-server" in result.isolation.mechanisms) == fork_server


@pytest.mark.parametrize("level", params("seccomp", hidden_bwrap=False))
@pytest.mark.parametrize("fork_server", [True, False])
async def test_a_guest_still_signals_itself_and_only_itself(level: str, fork_server: bool) -> None:
    """The pid rule is its own filter, compiled once with a placeholder pid and patched per
    Guest: the Guest's own pid must pass (``kill`` and ``tgkill``), the server's must not."""
    source = (
        "import os, signal, threading\ngot = []\n"
        "signal.signal(signal.SIGUSR1, lambda *a: got.append('kill'))\n"
        "signal.signal(signal.SIGUSR2, lambda *a: got.append('tgkill'))\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\nsignal.pthread_kill(threading.get_ident(), signal.SIGUSR2)\n"
        "try:\n    os.kill(os.getppid(), 0)\n    got.append('ESCAPED')\nexcept PermissionError:\n    got.append('refused')\n"
        "got"
    )
    out, _ = await run(source, level, fork_server=fork_server)
    assert out.status == "ok", out.error
    assert out.value == ["kill", "tgkill", "refused"]


@pytest.mark.parametrize("level", forked_levels())
async def test_a_stopped_server_never_makes_a_run_wait(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exit is seen through the pidfd; a server that does not report it in time costs
    ``STATUS_GRACE``, not the run."""
    monkeypatch.setattr(_forked, "STATUS_GRACE", 0.3)
    guest = await start_subprocess_guest(CAPS, GuestLimits(wall_time=60), isolation=level)  # type: ignore[arg-type]
    stopped = _forked.server_for(level).pid()
    assert stopped is not None and "fork-server" in guest.isolation.mechanisms
    os.kill(stopped, signal.SIGSTOP)
    try:
        with anyio.fail_after(15):  # far below the run's 60 s wall time
            out = await guest.run("6 * 7", echo)
            await guest.aclose()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stopped, signal.SIGCONT)
    assert (out.status, out.value) == ("ok", 42)  # its done frame came before the silence
