"""The one module that asks which event loop runs: the backend's fast paths and its quirks.

Pysolate runs on any anyio backend; a few hot or subtle paths differ on asyncio, and they
are all here, so the rest of the code asks these functions instead of importing asyncio:

- ``anyio.current_time()`` and ``anyio.lowlevel.checkpoint()`` look the backend up through
  sniffio at every call (about 0.45 µs of a 0.53 µs ``current_time`` on asyncio). The paths
  that run per chunk of a stream or per broker call look it up once instead
  (``loop_clock``, ``loop_checkpoint``, ``loop_sleep``): at 500 concurrent streamed runs
  those lookups were about 6% of the Host's CPU (docs/benchmarks.md, "Overhead and scale").
- ``asyncio_loop``: the running asyncio loop, for the Guest channel's persistent reader and
  the forked child's loop readers (one ``add_reader`` instead of a task per read), or None.
- ``caller_cancelled``: whether a caught cancellation is the caller's, which each backend
  says its own way (asyncio's ``Task.cancelling``; trio's own Ctrl-C delivery).
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel


def loop_clock() -> Callable[[], float]:
    """``anyio.current_time`` without its per-call backend lookup (on asyncio it is the
    running loop's ``time``; elsewhere anyio's own function). The stock loops' ``time`` is
    ``time.monotonic()`` in a Python method: that function itself, without the method's
    frame, reads the same clock."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return anyio.current_time
    clock = loop.time
    return (
        time.monotonic if getattr(clock, "__func__", None) is asyncio.BaseEventLoop.time else clock
    )


def loop_checkpoint() -> Callable[[], Awaitable[None]]:
    """``anyio.lowlevel.checkpoint`` without its per-call backend lookup: on asyncio it is
    ``asyncio.sleep(0)`` (what anyio's asyncio backend awaits); elsewhere anyio's own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.lowlevel.checkpoint
    return functools.partial(asyncio.sleep, 0)


def loop_sleep() -> Callable[[float], Awaitable[None]]:
    """``anyio.sleep`` without its per-call backend lookup: ``asyncio.sleep`` on asyncio
    (what anyio's asyncio backend awaits); elsewhere anyio's own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.sleep
    return asyncio.sleep


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None under another backend (no asyncio loop runs)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def caller_cancelled() -> bool:
    """Whether the running task is being cancelled by its caller (an enclosing cancel
    scope, or asyncio's ``Task.cancel``), as opposed to a tool raising a cancellation
    exception of its own. Call it where a cancellation exception was caught."""
    if anyio.current_effective_deadline() == -math.inf:
        return True
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio (trio): its Cancelled has no public constructor
        return False
    return task is not None and task.cancelling() > 0


def raised_by_trio(exc: BaseException) -> bool:
    """Whether trio's own code raised ``exc``: how trio delivers a real Ctrl-C (from its
    signal handler, or at a checkpoint of the main task). asyncio turns Ctrl-C into
    cancellation instead, and a worker thread never receives it."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "")
    return isinstance(module, str) and (module == "trio" or module.startswith("trio."))
