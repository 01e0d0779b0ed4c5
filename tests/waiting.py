"""Waiting, in a test, for something to have happened: by its observable condition, not a nap.

A test that sleeps "long enough" for a task to start, a result to arrive or a watchdog to
fire is a race: needlessly slow on an idle machine, flaky on a loaded one. ``wait_until``
polls the condition itself and fails the test, with the condition named, at a deadline far
above any healthy wait, so it never hangs the suite either. Where the point is that something
does *not* happen (the second call does not start while the first holds the only slot),
``wait_until_quiet`` waits until every other task waits for something: whatever was going
to happen by itself has. Where the point is a task reaching a line, let it set an event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import anyio.lowlevel

POLL_INTERVAL = 0.005
"""Seconds between two looks at the condition: short beside what the tests wait for."""


async def wait_until(
    condition: Callable[[], object], *, timeout: float = 10.0, what: str = ""
) -> None:
    """Return as soon as ``condition()`` is true; ``AssertionError`` if it is still false after
    ``timeout`` seconds (``what`` says what was awaited). Cancellation stops the wait."""
    with anyio.move_on_after(timeout):
        while not condition():
            await anyio.sleep(POLL_INTERVAL)
        return
    raise AssertionError(f"not reached within {timeout} s: {what or condition}")


async def wait_until_quiet(*, timeout: float = 10.0) -> None:
    """Return once every other task of the loop waits for something (an event, a lock, a
    sleep, a thread's result), so no task does anything more until time passes or the test
    acts (a worker thread may: wait for its own sign first); ``AssertionError`` if the loop
    is still busy after ``timeout`` seconds.

    ``anyio.wait_all_tasks_blocked`` under trio (exact). Under asyncio anyio's version of it
    looks again only every 0.1 s once a task is still runnable, slower than the sleeps it
    replaces; this one looks at every turn of the loop, by the same test (the task waits on
    a future that is not done yet).
    """
    try:
        this = asyncio.current_task()
    except RuntimeError:  # not asyncio: trio has the exact check
        this = None
    with anyio.move_on_after(timeout):
        if this is None:
            await anyio.wait_all_tasks_blocked()
            return
        while True:
            await anyio.lowlevel.checkpoint()
            if all(task is this or _waiting(task) for task in asyncio.all_tasks()):
                return
    raise AssertionError(f"the loop's tasks still run after {timeout} s")


def _waiting(task: asyncio.Task[object]) -> bool:
    waiter = getattr(task, "_fut_waiter", None)  # what asyncio's own Task waits on, if anything
    return waiter is not None and not waiter.done()
