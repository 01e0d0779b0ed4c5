"""One thread that lives as long as the process, for starting processes that must outlive event loops.

``PR_SET_PDEATHSIG`` (bubblewrap's ``--die-with-parent``, Ray's fate sharing) fires when the
*thread* that forked a process exits, not the process. Blocking starts are made from
``anyio.to_thread`` workers, and those exit when idle or when their event loop closes: a
fork server or a local Ray cluster started from one would be killed, with everything it
started, when that loop's threads wind down. So such starts run here instead, one at a time.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _LastingThread:
    def __init__(self) -> None:
        self._forget()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        """A forked child has no such thread (threads do not survive ``fork``)."""
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, job: Callable[[], T]) -> T:
        """Run ``job`` on the lasting thread and return its result or raise its error (blocks)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="pysolate-lasting-thread", daemon=True
                )
                self._thread.start()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((job, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            job, done = self._jobs.get()
            try:
                done.set_result(job())
            except BaseException as exc:
                done.set_exception(exc)


on_lasting_thread = _LastingThread().call
"""``on_lasting_thread(job)``: run ``job`` on the process's one lasting thread (blocks)."""
