"""The running event loop's clock and checkpoint without anyio's per-call backend lookup.

``anyio.current_time()`` and ``anyio.lowlevel.checkpoint()`` look the backend up through
sniffio at every call (about 0.45 µs of a 0.53 µs ``current_time`` on asyncio). The paths
that run per chunk of a stream or per broker call look it up once instead: at 500
concurrent streamed runs those lookups were about 6% of the Host's CPU
(docs/benchmarks.md, "Overhead and scale").
"""

from __future__ import annotations

import asyncio
import functools
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
    return time.monotonic if getattr(clock, "__func__", None) is asyncio.BaseEventLoop.time else clock


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

