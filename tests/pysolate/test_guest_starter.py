"""The run's Guest starter (``_guest_start.GuestStarter``) hands over a started Guest
without a trip round the event loop: at the seal, each trip is latency before ``run``."""

from __future__ import annotations

import anyio
import pytest

from pysolate._guest_api import GuestLimits
from pysolate._run._guest_start import GuestStarter

pytestmark = pytest.mark.anyio


class FakeGuest:
    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_started_guest_is_taken_and_closed_in_the_callers_own_step() -> None:
    guest = FakeGuest()

    async def factory(capabilities: object, limits: object) -> FakeGuest:
        return guest

    starter = GuestStarter(factory, {}, GuestLimits())  # type: ignore[arg-type]
    await starter.start()
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        assert await starter.take() is guest
        assert ran == []
        await starter.aclose()
        assert (ran, guest.closed) == ([], 1)
    assert ran == ["other"]


async def test_taking_waits_for_a_start_under_way() -> None:
    started = anyio.Event()
    guest = FakeGuest()

    async def factory(capabilities: object, limits: object) -> FakeGuest:
        await started.wait()
        return guest

    starter = GuestStarter(factory, {}, GuestLimits())  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        tg.start_soon(starter.start)
        tg.start_soon(lambda: _set_later(started))
        assert await starter.take() is guest


async def _set_later(event: anyio.Event) -> None:
    await anyio.sleep(0.001)
    event.set()
