"""Noticing that a forked Guest died, without a task (asyncio).

A run cancels its exit watcher when it ends, and a cancelled task leaves a reference cycle
(the caught ``CancelledError``'s traceback holds the task's frame, and with it the Guest's
channel and process) that only a full collection frees: at 500 concurrent runs the full
collections were the Host's largest cost (docs/benchmarks.md). A reader on the child's
pidfd costs no task and leaves nothing behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .._backend import asyncio_loop
from . import _forked


def watch_exit(process: object, on_exit: Callable[[], None]) -> Callable[[], None] | None:
    """Call ``on_exit`` once the forked child ``process`` exits; returns the function that
    stops watching (idempotent). None where this takes a task: not asyncio, or not forked.

    The reader is on a duplicate of the pidfd: ``anyio.wait_readable`` on the pidfd itself
    (the process's ``wait``) would replace a reader on the same fd number.
    """
    loop = asyncio_loop()
    if loop is None or not isinstance(process, _forked.ForkedProcess):
        return None
    fd = process.duplicate_pidfd()
    if fd is None:
        return None
    watched = [fd]

    def stop() -> None:
        if watched:
            own = watched.pop()
            loop.remove_reader(own)
            os.close(own)

    def died() -> None:
        stop()
        on_exit()

    loop.add_reader(fd, died)
    return stop
