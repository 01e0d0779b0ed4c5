"""A Guest child's stdout and stderr, read while it runs, bounded.

The output must be read as it comes (a full pipe would block the child) and the run is
over only once all of it is in. A forked child closes both pipes before it sends ``done``
(``_child.finish``), so by then its whole output waits in the kernel: ``drain`` takes it in
the same step as ``done``. Pump tasks would first need a trip round the event loop to see
their EOF and another to be joined, 0.2-0.25 ms measured on every run's critical path; and
a task cancelled at the run's end leaves a reference cycle that only a full collection
frees (``_exit_watch``). So on asyncio a forked child's pipes are read by loop readers,
with no task; elsewhere (another backend, a spawned child's pipes) by two tasks (``pump``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import anyio
import anyio.abc

from .._backend import asyncio_loop
from . import _forked

STDERR_KEPT = 8 * 1024
"""Bytes of the child's stderr kept for the ``crashed`` message."""

READS_PER_TURN = 16
"""Reads (of up to 64 KiB) a loop reader makes before it lets the loop run again: a child
that writes as fast as the Host reads must not hold the event loop (other runs, the wall
time's timer) for as long as it keeps writing."""


class GuestOutput:
    """What the child printed: all of stdout up to ``output_bytes``, the first
    ``STDERR_KEPT`` bytes of stderr. While it reads, ``overflowed`` is called once more
    stdout than that arrived (held only until ``stop``: a Guest that owns this output is
    freed by reference counting, with no cycle through it)."""

    def __init__(self, output_bytes: int) -> None:
        self.stdout = bytearray()
        self.stdout_total = 0  # bytes the child wrote to stdout, kept or not
        self.stderr = bytearray()
        self._output_bytes = output_bytes
        self._overflowed: Callable[[], None] | None = None
        self._stdout_ended = anyio.Event()
        self._stderr_ended = anyio.Event()
        self._readers: dict[
            int, tuple[Callable[[bytes], None], anyio.Event]
        ] = {}  # fd → (taker, EOF), while registered

    @property
    def ended(self) -> bool:
        """Both pipes are at EOF: the output is complete."""
        return self._stdout_ended.is_set() and self._stderr_ended.is_set()

    @property
    def reading(self) -> bool:
        """Loop readers read the pipes (``read_by_loop`` took them)."""
        return bool(self._readers)

    def read_by_loop(self, process: anyio.abc.Process, overflowed: Callable[[], None]) -> bool:
        """Read a forked child's pipes with loop readers, on asyncio, until their EOF
        (``stop`` ends them early); False, reading nothing, where that cannot be done:
        then ``pump`` them."""
        loop = asyncio_loop()
        if loop is None or not isinstance(process, _forked.ForkedProcess):
            return False
        self._overflowed = overflowed
        stdout_fd, stderr_fd = process.pipe_fds()
        for fd, take, ended in (
            (stdout_fd, self._take_stdout, self._stdout_ended),
            (stderr_fd, self._take_stderr, self._stderr_ended),
        ):
            if fd is None:
                ended.set()
            else:
                self._readers[fd] = (take, ended)
                loop.add_reader(fd, self._readable, fd)
        return True

    def pump(
        self,
        process: anyio.abc.Process,
        task_group: anyio.abc.TaskGroup,
        overflowed: Callable[[], None],
    ) -> None:
        """Read ``process``'s pipes with two tasks in ``task_group``, until their EOF."""
        self._overflowed = overflowed
        task_group.start_soon(self.pump_stdout, process)
        task_group.start_soon(self.pump_stderr, process)

    def drain(self) -> bool:
        """Take what the pipes hold now (up to ``READS_PER_TURN`` reads each), as the loop
        readers would on the loop's next pass; return ``ended``. (With pump tasks it only
        reports: they take the output.)"""
        for fd in list(self._readers):
            self._readable(fd)
        return self.ended

    async def wait_ended(self) -> None:
        await self._stdout_ended.wait()
        await self._stderr_ended.wait()

    def stop(self) -> None:
        """Stop the loop readers (before the pipes' fds may be closed) and calling
        ``overflowed``; idempotent."""
        self._overflowed = None
        if self._readers:
            loop = asyncio_loop()
            for fd in self._readers:
                if loop is not None:
                    loop.remove_reader(fd)
            self._readers.clear()

    async def pump_stdout(self, process: anyio.abc.Process) -> None:
        await self._pump(process.stdout, self._take_stdout, self._stdout_ended)

    async def pump_stderr(self, process: anyio.abc.Process) -> None:
        await self._pump(process.stderr, self._take_stderr, self._stderr_ended)

    @staticmethod
    async def _pump(
        stream: anyio.abc.ByteReceiveStream | None,
        take: Callable[[bytes], None],
        ended: anyio.Event,
    ) -> None:
        assert stream is not None
        try:
            async for chunk in stream:
                take(chunk)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        ended.set()

    def _readable(self, fd: int) -> None:
        take, ended = self._readers[fd]
        for _ in range(READS_PER_TURN):
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                loop = asyncio_loop()
                if loop is not None:
                    loop.remove_reader(fd)
                del self._readers[fd]
                ended.set()
                return
            take(chunk)

    def _take_stdout(self, chunk: bytes) -> None:
        room = self._output_bytes - len(self.stdout)
        self.stdout += chunk[: max(room, 0)]
        self.stdout_total += len(chunk)
        if self.stdout_total > self._output_bytes and self._overflowed is not None:
            self._overflowed()

    def _take_stderr(self, chunk: bytes) -> None:
        self.stderr += chunk[: max(STDERR_KEPT - len(self.stderr), 0)]
