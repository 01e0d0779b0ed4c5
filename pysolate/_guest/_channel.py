"""The Host's end of the broker socket: length-prefixed frames, non-blocking, size-bounded.

A call is one frame each way, so what a frame costs the Host is most of what a call costs
it. Waiting for a frame with ``anyio.wait_readable`` registers the socket with the event
loop and removes it again every time (two ``epoll_ctl`` calls and a future per frame,
about a fifth of the Host's CPU per call). On asyncio the channel therefore keeps one
reader registered for its whole life: the loop calls ``_on_readable`` whenever bytes
arrive, they go to the buffer, and a waiting ``receive`` is woken (``_Waiter``: at once,
in the same loop iteration). Other backends (trio) keep the portable ``wait_readable`` path. Both read only what the protocol allows to pile
up: the persistent reader pauses once the buffer holds more than one largest frame, so a
Guest that floods its end costs the Host at most that much memory.
"""

from __future__ import annotations

import asyncio
import contextvars
import fcntl
import select
import socket
import termios
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import anyio

from .._backend import asyncio_loop
from ._frames import ProtocolViolation
from .child._wire import HEADER

_READ_CHUNK = 64 * 1024
"""Bytes one read asks for, unless the frame being read needs more (``_wanted``).

Below glibc's mmap threshold (128 KiB) on purpose: ``recv(n)`` allocates ``n`` bytes and
shrinks them to what arrived, and an allocation past the threshold is mapped and unmapped
every time, which cost 8 µs per read at 256 KiB (a tenth of a call's Host CPU)."""

_COUNT = bytes(4)
"""The argument buffer of ``FIONREAD`` (a C int), and what it holds for no bytes waiting."""


class ChannelClosed(Exception):
    """The child's end of the channel is gone (it exited or was killed)."""


_PENDING, _WOKEN, _CANCELLED = 0, 1, 2


class _Waiter:
    """What a ``receive`` waits on for more bytes, yielded to the task as ``await`` yields a
    future: an asyncio future to the task (the duck-typed protocol ``asyncio.Task`` accepts: ``_asyncio_future_blocking``,
    ``get_loop``, ``add_done_callback``, ``result``, ``cancel``), except that ``wake`` runs
    the task's wake-up at once instead of through ``loop.call_soon``.

    A real future would take a second loop iteration per frame (the reader callback sets
    it, the task resumes in the next iteration: one more ``epoll_wait``, a handle and the
    loop's own bookkeeping), a few µs of Host CPU per call. ``wake`` is only called from the
    reader callback, where no task runs, so the task's step can run there. Cancellation
    (``Task.cancel``, which anyio's cancel scopes use) is a future's: the wake-up is
    scheduled with ``call_soon`` and ``result`` raises ``CancelledError`` with the message.
    """

    __slots__ = (
        "_asyncio_future_blocking",
        "_cancel_message",
        "_context",
        "_loop",
        "_state",
        "_wakeup",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._asyncio_future_blocking = False
        self._loop = loop
        self._state = _PENDING
        self._wakeup: Callable[[_Waiter], object] | None = None
        self._context: contextvars.Context | None = None
        self._cancel_message: object = None

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def add_done_callback(
        self, fn: Callable[[_Waiter], object], *, context: contextvars.Context | None = None
    ) -> None:
        """Only the awaiting task registers, once (``asyncio.Task.__step``)."""
        self._wakeup = fn
        self._context = context if context is not None else contextvars.copy_context()

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self) -> None:
        if self._state == _CANCELLED:
            message = self._cancel_message
            raise asyncio.CancelledError() if message is None else asyncio.CancelledError(message)

    def cancel(self, msg: object = None) -> bool:
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        self._cancel_message = msg
        if self._wakeup is not None:
            self._loop.call_soon(self._wakeup, self, context=self._context)
        return True

    def wake(self) -> None:
        """Resume the awaiting task now (from the reader callback only)."""
        if self._state != _PENDING:
            return
        self._state = _WOKEN
        wakeup, context = self._wakeup, self._context
        if wakeup is not None and context is not None:
            context.run(wakeup, self)


class Channel:
    """Frames over one connected, non-blocking socket. Made in the event loop that uses it."""

    def __init__(self, sock: socket.socket, max_frame_bytes: int) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._max = max_frame_bytes
        self._buffer = bytearray()  # received bytes not yet consumed as frames
        self._owned = True  # the socket is closed by ``close`` (not once handed off)
        # Whether bytes wait in the socket (``spoke_out_of_turn``): a poll set of this socket
        # alone (a list in user space, no descriptor of its own).
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        # The persistent reader (asyncio only; None means the portable path).
        self._loop = asyncio_loop()
        self._reading = False  # the reader is registered with the loop
        self._eof = False  # the peer hung up or the socket failed (seen by the reader), or closed
        self._waiter: _Waiter | None = None  # a receive waiting for bytes
        # What ``send`` returns once the whole frame went out (asyncio): a completed future,
        # so that the common send is awaited without a coroutine of its own.
        self._sent: asyncio.Future[None] | None = None
        if self._loop is not None:
            self._sent = self._loop.create_future()
            self._sent.set_result(None)
            self._resume()

    # -- the persistent reader (asyncio) -----------------------------------------------------

    def _resume(self) -> None:
        if not self._reading and not self._eof and self._loop is not None:
            self._loop.add_reader(self._sock.fileno(), self._on_readable)
            self._reading = True

    def _pause(self) -> None:
        if self._reading and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._reading = False

    def _wanted(self) -> int:
        """How many bytes to read: the rest of the frame being read when that is more than
        ``_READ_CHUNK`` (a big frame in one read, and no further), else ``_READ_CHUNK``."""
        buffer = self._buffer
        if len(buffer) < HEADER.size:
            return _READ_CHUNK
        (length,) = HEADER.unpack_from(buffer)
        missing = HEADER.size + length - len(buffer)
        return missing if _READ_CHUNK < missing <= HEADER.size + self._max else _READ_CHUNK

    def _on_readable(self) -> None:
        try:
            data = self._sock.recv(
                self._wanted() if self._buffer else _READ_CHUNK
            )  # nothing buffered: a chunk
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self._buffer += data
            if len(self._buffer) > HEADER.size + self._max:  # more than any one frame
                self._pause()
        else:
            self._eof = True
            self._pause()
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.wake()  # last: the task may run its whole call here, and wait again

    # -- frames ------------------------------------------------------------------------------

    async def _more(self) -> None:
        """Read more bytes into the buffer on the portable path (no persistent reader: not
        asyncio); ``ChannelClosed`` when none will come."""
        while True:
            try:
                data = self._sock.recv(self._wanted())
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
                continue
            except OSError:
                raise ChannelClosed from None
            if not data:
                raise ChannelClosed
            self._buffer += data
            return

    @types.coroutine
    def receive(self) -> Generator[Any, None, bytes]:
        """The next frame's payload. Raises ``ProtocolViolation`` for an oversized one (as
        soon as its header is in), ``ChannelClosed`` when the peer hung up first.
        Cancellation leaves the channel usable (no byte is consumed before a whole frame
        is in).

        A generator-based coroutine: on asyncio, waiting is one ``yield`` of the ``_Waiter``
        to the task (what ``await future`` does), without an ``__await__`` generator made
        and resumed per frame.
        """
        buffer = self._buffer
        while True:
            if len(buffer) >= HEADER.size:
                (length,) = HEADER.unpack_from(buffer)
                if length > self._max:
                    raise ProtocolViolation(f"frame of {length} bytes exceeds {self._max}")
                end = HEADER.size + length
                if len(buffer) >= end:
                    if end <= _READ_CHUNK:
                        payload = bytes(buffer[HEADER.size : end])
                    else:
                        with memoryview(buffer) as view:  # one copy of a large frame, not two
                            payload = bytes(view[HEADER.size : end])
                    del buffer[:end]
                    return payload
            loop = self._loop
            if loop is None:
                yield from self._more().__await__()
                continue
            if self._eof:
                raise ChannelClosed
            if not self._reading:
                self._resume()
            waiter = self._waiter = _Waiter(loop)
            try:
                waiter._asyncio_future_blocking = True
                yield waiter  # resumed by the reader's ``wake``, or by a cancellation
                if waiter._state == _CANCELLED:  # ``result()``'s test, without its call
                    waiter.result()
            finally:
                if self._waiter is waiter:
                    self._waiter = None

    def spoke_out_of_turn(self) -> bool:
        """Whether the child sent anything since its last frame (without waiting).

        Raises ``ChannelClosed`` if it hung up instead.
        """
        if self._buffer:
            return True
        if self._eof:
            raise ChannelClosed
        # A poll that finds nothing (not readable, no hang-up, no error) means no byte
        # waits: what ``FIONREAD`` would say, in about half its cost (its argument parsing
        # and result buffer), and unlike a ``recv`` that finds nothing, no exception.
        if not self._poll.poll(0):
            return False
        # Readable: bytes wait, or the peer hung up (no bytes: silent so far, the next
        # ``receive`` or ``send`` tells); asking how many (FIONREAD) tells them apart.
        try:
            waiting = fcntl.ioctl(self._sock.fileno(), termios.FIONREAD, _COUNT)
        except OSError:
            raise ChannelClosed from None
        return waiting != _COUNT  # a count of 0 is four zero bytes in any byte order

    def send(self, frame: bytes) -> Awaitable[None]:
        """Send one whole frame; awaited, it returns once all of it is sent. Raises
        ``ChannelClosed`` when the peer is gone.

        On asyncio the first attempt is made here: a frame that went out whole (the common
        case) returns the channel's completed future, which an ``await`` takes at once,
        without a coroutine made and run per frame; the rest of a partial send is awaited
        in ``_send_rest``, as every send is on the portable path.
        """
        sent = self._sent
        if sent is None:
            return self._send_rest(frame)
        try:
            count = self._sock.send(frame)
        except BlockingIOError:
            return self._send_rest(frame)
        except OSError:
            raise ChannelClosed from None
        return sent if count == len(frame) else self._send_rest(memoryview(frame)[count:])

    async def _send_rest(self, view: bytes | memoryview) -> None:
        """Send all of ``view``, waiting for room in the socket as needed."""
        while True:
            try:
                sent = self._sock.send(view)
            except BlockingIOError:
                await anyio.wait_writable(self._sock)
                continue
            except OSError:
                raise ChannelClosed from None
            if sent == len(view):
                return
            view = memoryview(view)[sent:]

    def hand_off(self) -> socket.socket:
        """Stop reading and give the socket away, open (its new owner closes it, from any
        thread); the channel is closed from here on."""
        self._eof = True
        self._pause()
        self._owned = False
        return self._sock

    def close(self) -> None:
        self._eof = True  # ``spoke_out_of_turn`` and ``receive`` after it: ``ChannelClosed``
        self._pause()
        if self._owned:
            self._sock.close()
