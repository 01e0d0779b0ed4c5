"""The Guest's cgroup is made and entered off the event loop (``_cgroup.enter_cgroup``).

Writing ``cgroup.procs`` waits for an RCU grace period; on the loop that would stall every
other run of the Host at each Guest start. The stand-in ``add`` below can only finish if a
task on the loop runs while it waits, so it fails (times out) if the move ever runs on the
loop again.
"""

from __future__ import annotations

import threading

import anyio
import pytest
from waiting import wait_until

from pysolate._guest import _cgroup

pytestmark = pytest.mark.anyio


class _FakeCgroup:
    mechanisms = ("cgroup-kill",)

    def __init__(self) -> None:
        self.loop_ran = threading.Event()
        self.added: list[int] = []
        self.removed = False
        self.threads: list[int] = []

    def add(self, pid: int) -> None:
        self.threads.append(threading.get_ident())
        if not self.loop_ran.wait(timeout=5):
            raise OSError("the event loop was blocked while the Guest entered its cgroup")
        self.added.append(pid)

    def remove(self) -> None:
        self.removed = True


async def test_enter_cgroup_leaves_the_loop_free(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeCgroup()
    created_on: list[int] = []

    def create(*, memory_bytes: int, max_processes: int) -> _FakeCgroup:
        created_on.append(threading.get_ident())
        return fake

    monkeypatch.setattr(_cgroup.GuestCgroup, "create", staticmethod(create))
    loop_thread = threading.get_ident()
    got: list[object] = []

    async def enter() -> None:
        got.append(await _cgroup.enter_cgroup(4242, memory_bytes=1 << 20, max_processes=8))

    async with anyio.create_task_group() as tg:
        tg.start_soon(enter)
        await wait_until(lambda: fake.threads, what="the move began, on some thread")
        fake.loop_ran.set()  # only reachable while ``add`` waits if ``add`` is off the loop
    assert got == [fake] and fake.added == [4242] and not fake.removed
    assert created_on and created_on[0] != loop_thread and fake.threads[0] != loop_thread


async def test_a_failed_move_removes_the_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeCgroup()

    def failing_add(pid: int) -> None:
        raise OSError("no such process")

    fake.add = failing_add  # type: ignore[method-assign]
    monkeypatch.setattr(_cgroup.GuestCgroup, "create", staticmethod(lambda **_: fake))
    with pytest.raises(OSError, match="no such process"):
        await _cgroup.enter_cgroup(4242, memory_bytes=1 << 20, max_processes=8)
    assert fake.removed
