"""Slots: bounded, handed over certain-first, never lost to a waiter that was cancelled."""

from __future__ import annotations

import anyio
import pytest
from waiting import wait_until_quiet

from scheduler import Slots

pytestmark = pytest.mark.anyio


async def test_a_free_slot_is_taken_without_waiting_and_the_bound_holds() -> None:
    slots = Slots(2)
    assert slots.try_take() and slots.try_take()
    assert not slots.try_take()
    assert (slots.busy, slots.waiting) == (2, 0)
    slots.release()
    assert slots.busy == 1


async def test_a_released_slot_goes_to_the_first_certain_waiter_then_in_arrival_order() -> None:
    slots = Slots(1)
    assert slots.try_take()
    order: list[str] = []

    async def waiter(name: str, provisional: bool) -> None:
        await slots.take(lambda: provisional)
        order.append(name)

    async with anyio.create_task_group() as tg:
        for name, provisional in (("p1", True), ("c1", False), ("p2", True), ("c2", False)):
            tg.start_soon(waiter, name, provisional)
            await wait_until_quiet()
        for _ in range(4):
            slots.release()
            await wait_until_quiet()
    assert order == ["c1", "c2", "p1", "p2"]


async def test_a_waiter_cancelled_after_its_slot_was_granted_passes_it_on() -> None:
    slots = Slots(1)
    assert slots.try_take()
    got: list[str] = []

    async def waiter(name: str, scope: anyio.CancelScope) -> None:
        with scope:
            await slots.take()
            got.append(name)

    first, second = anyio.CancelScope(), anyio.CancelScope()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter, "first", first)
            await wait_until_quiet()
            tg.start_soon(waiter, "second", second)
            await wait_until_quiet()
            slots.release()  # granted to "first" ...
            first.cancel()  # ... cancelled before it runs: it keeps it, or passes it on
            await wait_until_quiet()
            assert len(got) == 1, "exactly one waiter holds the one slot"
            second.cancel()  # (still waiting if "first" kept it)
    assert (slots.busy, slots.waiting) == (1, 0), "the slot was neither lost nor doubled"


async def test_a_waiter_cancelled_before_a_grant_leaves_the_queue() -> None:
    slots = Slots(1)
    assert slots.try_take()
    async with anyio.create_task_group() as tg:
        tg.start_soon(slots.take)
        await wait_until_quiet()
        assert slots.waiting == 1
        tg.cancel_scope.cancel()
    assert (slots.busy, slots.waiting) == (1, 0)
    slots.release()
    assert slots.busy == 0


async def test_the_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Slots(0)
