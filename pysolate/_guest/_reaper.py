"""The clean-up of killed Guests that no result waits for, on one thread of the Host process.

Once a forked Guest has sent ``done`` and closed its output, its run's outcome is known;
what is left is bookkeeping: the exit status travels through the fork server (under
``namespaces`` from the Guest's init, once its pid namespace is gone: process wake-ups,
about 1-2 ms on an idle machine and several times that on a loaded one), then its cgroup is
removed, its fds closed and its scratch directory deleted. ``SubprocessGuest`` kills the
Guest first (``SIGKILL`` through its pidfd and ``cgroup.kill``: it runs no instruction of
its own after that) and hands the rest here instead of making the run's result wait.

Jobs run one at a time, in order, on a daemon thread; each is blocking and bounded by its
own grace periods. ``drain`` waits until every job handed in so far is done (tests, and at
interpreter exit, so no empty cgroup directory is left behind).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._scratch import remove_scratch

if TYPE_CHECKING:
    from ._cgroup import GuestCgroup
    from ._forked import ForkedProcess

REAP_DELAY = 0.005
"""Seconds a forked child that sent ``done`` sleeps before the reaper ends it: its exit
(two copy-on-write address spaces, its namespaces), woken at once, took the Host's CPU for
0.7-1.5 ms of the run's end (measured), as it did before ``done`` exiting right after it."""

DRAIN_AT_EXIT = 5.0
"""Seconds the interpreter's exit waits for outstanding clean-ups."""


class _Reaper:
    def __init__(self) -> None:
        self._forget()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        """A forked child has no such thread, and none of its parent's jobs."""
        self._jobs: queue.Queue[Callable[[], None]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def later(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the reaper thread (an exception it raises is dropped)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="pysolate-guest-reaper", daemon=True
                )
                self._thread.start()
        self._jobs.put(job)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every job handed in so far is done; False if ``timeout`` passed first."""
        done = threading.Event()
        with self._lock:
            if self._thread is None:
                return True
        self._jobs.put(done.set)
        return done.wait(timeout)

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            with contextlib.suppress(
                Exception
            ):  # a failed clean-up leaves what it could not remove
                job()


_reaper = _Reaper()
reap_later = _reaper.later
"""``reap_later(job)``: finish a killed Guest's clean-up on the reaper thread."""
drain = _reaper.drain
"""``drain(timeout)``: wait for every clean-up handed in so far (True when all are done)."""
atexit.register(drain, DRAIN_AT_EXIT)


def hang_up_and_reap(
    due: float,
    channel: socket.socket,
    process: ForkedProcess,
    cgroup: GuestCgroup | None,
    scratch: str | None,
    grace: float,
) -> None:
    """A job for ``reap_later``: at ``due`` (``time.monotonic``), close the Host's end of a
    child's ``channel`` (it exits by itself then) and kill it and its cgroup, then
    ``finish_reap``. Waiting for ``due`` holds up the jobs behind it at most that long."""
    time.sleep(max(due - time.monotonic(), 0.0))
    channel.close()
    process.kill()
    if cgroup is not None:
        cgroup.kill()
    finish_reap(process, cgroup, scratch, grace)


def finish_reap(
    process: ForkedProcess, cgroup: GuestCgroup | None, scratch: str | None, grace: float
) -> None:
    """A job for ``reap_later``: wait (at most ``grace`` seconds) for the killed child and
    its cgroup to be gone, then remove the cgroup, close its fds and delete its scratch."""
    deadline = time.monotonic() + grace
    if cgroup is not None:
        while cgroup.populated() and time.monotonic() < deadline:
            cgroup.kill()
            time.sleep(0.005)
    process.exited(max(deadline - time.monotonic(), 0.0))
    if cgroup is not None:
        cgroup.remove()
    process.release()
    if scratch is not None:
        remove_scratch(scratch)
