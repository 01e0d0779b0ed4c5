"""A forked Guest that sent ``done`` and closed its output is killed and left to the reaper.

``run`` returns without waiting for the exit status (which travels through the fork server
and, under ``namespaces``, the Guest's init and reaper); ``_reaper`` then removes the
cgroup, closes the fds and deletes the scratch directory. These tests pin both halves: the
result does not wait for the status, and nothing is left once the reaper has drained.
"""

from __future__ import annotations

import os
import select

import anyio
import pytest
from test_fork_server import CAPS, echo, forked_levels

from pysolate._guest import _forked, _reaper, start_subprocess_guest
from pysolate._guest_api import GuestLimits

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("level", forked_levels())
async def test_the_result_does_not_wait_for_the_exit_status(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    guest = await start_subprocess_guest(CAPS, GuestLimits(wall_time=20), isolation=level)  # type: ignore[arg-type]
    assert isinstance(guest._process, _forked.ForkedProcess)

    answered: list[bool] = []

    async def slow(self: _forked.ForkedProcess) -> int:  # a fork server slow to report the exit
        await anyio.sleep(3)
        answered.append(True)
        return -9

    monkeypatch.setattr(_forked.ForkedProcess, "wait", slow)
    out = await guest.run("print('hi')\n6 * 7", echo)
    assert not answered, "the run waited for the exit status"
    await guest.aclose()
    assert (out.status, out.value, out.stdout) == ("ok", 42, "hi\n")
    assert _reaper.drain(10)


@pytest.mark.parametrize("level", forked_levels())
async def test_after_the_reaper_nothing_of_the_guest_is_left(level: str) -> None:
    guest = await start_subprocess_guest(CAPS, GuestLimits(wall_time=20), isolation=level)  # type: ignore[arg-type]
    process = guest._process
    assert isinstance(process, _forked.ForkedProcess)
    cgroup = guest._cgroup.path if guest._cgroup is not None else None
    scratch = guest._scratch
    pidfd = os.dup(process._pidfd)  # type: ignore[arg-type]  # ours, to watch the child after the hand-off
    try:
        out = await guest.run("x = tools.echo(5)\nx + 1", echo)
        await guest.aclose()
        assert (out.status, out.value) == ("ok", 6)
        assert _reaper.drain(10)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        assert poller.poll(0), "the child was still alive after its clean-up"
    finally:
        os.close(pidfd)
    assert cgroup is None or not os.path.exists(cgroup)
    assert scratch is None or not os.path.exists(scratch)
    assert process._pidfd is None and process._stdout._fd is None and process._stderr._fd is None


@pytest.mark.parametrize("level", forked_levels())
async def test_a_failed_program_is_still_reported_from_its_done(level: str) -> None:
    guest = await start_subprocess_guest(CAPS, GuestLimits(wall_time=20), isolation=level)  # type: ignore[arg-type]
    try:
        out = await guest.run(
            "import sys\nprint('to stderr', file=sys.stderr)\nprint('out')\n1 / 0", echo
        )
    finally:
        await guest.aclose()
    assert out.status == "error" and out.error is not None and out.error.type == "ZeroDivisionError"
    assert out.stdout == "out\n"
    assert _reaper.drain(10)
