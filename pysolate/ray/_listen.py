"""The factory's listener: accept connections, give each a short while to say hello, survive floods.

Anyone who can reach the advertised port can connect, token or not, so the listener must
outlast what a connection flood does to a server (issue 35, item 6):

- **A connection that says nothing** costs a file descriptor and a task until it is
  dropped. At most ``MAX_WAITING`` connections wait for their hello at once; one more
  evicts the one that has waited longest (a real agent sends its hello as soon as it has
  connected, so it is never the oldest for long), and none waits longer than
  ``HELLO_TIMEOUT``.
- **Running out of descriptors** (``EMFILE``, ``ENFILE``; or kernel memory: ``ENOBUFS``,
  ``ENOMEM``) makes ``accept`` fail while the connection stays queued. The loop backs off
  (``BACKOFF_MIN`` doubling to ``BACKOFF_MAX``) and tries again; it never ends, so runs
  inside ``async with RayGuestFactory(...)`` are never cancelled by it. A connection that
  failed on its own way in (``ECONNABORTED``) is skipped at once.

Prior art: Tornado's and Twisted's accept loops, which treat these errors as transient
(Twisted's ``tcp.Port.doRead``), and nginx's ``accept_mutex_delay`` back-off on ``EMFILE``.
"""

from __future__ import annotations

import collections
import errno
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc

MAX_WAITING = 64
"""Connections that may wait for their hello at once; one more evicts the longest-waiting."""

HELLO_TIMEOUT = 2.0
"""Seconds a new connection has to send its hello (an agent sends it right after connecting)."""

BACKOFF_MIN = 0.01
"""Seconds the accept loop first waits after ``accept`` failed for want of resources."""

BACKOFF_MAX = 1.0
"""Longest wait between ``accept`` attempts while resources stay short."""

_SHORT = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
"""``accept`` errors that mean "no resources now": back off, the connection stays queued."""


@dataclass(frozen=True, slots=True)
class ListenerStatistics:
    """What a ``HelloListener`` has done so far (a snapshot)."""

    accepted: int
    """Connections accepted."""
    waiting: int
    """Connections waiting for their hello now."""
    timed_out: int
    """Dropped after ``hello_timeout`` without a hello."""
    evicted: int
    """Dropped to make room for a newer one (``max_waiting`` were waiting)."""
    accept_failures: int
    """``accept`` calls that failed (descriptors or memory short, or the peer gone)."""


Greet = Callable[[anyio.abc.SocketStream], Awaitable[None]]
"""Reads a connection's hello and takes the connection, or closes it; returns either way."""


class HelloListener:
    """Accepts connections on ``listeners`` and hands each to ``greet`` under the bounds above.

    ``serve`` runs until cancelled (or every listener is closed); it never raises for what a
    connection or the machine's descriptor table does. ``greet`` that is cut short (the
    deadline, an eviction) is cancelled and its connection closed here.
    """

    def __init__(
        self,
        listeners: Sequence[anyio.abc.Listener[anyio.abc.SocketStream]],
        greet: Greet,
        *,
        max_waiting: int = MAX_WAITING,
        hello_timeout: float = HELLO_TIMEOUT,
    ) -> None:
        self._listeners = list(listeners)
        self._greet = greet
        self._max_waiting = max_waiting
        self._hello_timeout = hello_timeout
        # Connections waiting for their hello, oldest first: each one's cancel scope.
        self._waiting: collections.OrderedDict[anyio.CancelScope, None] = collections.OrderedDict()
        self._accepted = self._timed_out = self._evicted = self._accept_failures = 0

    def statistics(self) -> ListenerStatistics:
        return ListenerStatistics(
            self._accepted,
            len(self._waiting),
            self._timed_out,
            self._evicted,
            self._accept_failures,
        )

    async def serve(self) -> None:
        """Accept until cancelled. Cancellation drops every waiting connection."""
        async with anyio.create_task_group() as tasks:
            for listener in self._listeners:
                tasks.start_soon(self._accept_loop, listener, tasks)

    async def _accept_loop(
        self, listener: anyio.abc.Listener[anyio.abc.SocketStream], tasks: anyio.abc.TaskGroup
    ) -> None:
        assert isinstance(listener, anyio.abc.SocketListener)
        backoff = BACKOFF_MIN
        while True:
            try:
                stream = await listener.accept()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            except OSError as exc:
                self._accept_failures += 1
                if exc.errno in _SHORT:
                    await anyio.sleep(backoff)  # the queued connection waits for a descriptor
                    backoff = min(backoff * 2, BACKOFF_MAX)
                else:
                    await anyio.sleep(0)  # the peer gave up on its way in: skip it
                continue
            backoff = BACKOFF_MIN
            self._accepted += 1
            tasks.start_soon(self._admit, stream)

    async def _admit(self, stream: anyio.abc.SocketStream) -> None:
        # ``greet`` that returns has taken the stream or closed it; one cut short by anything
        # (the deadline, an eviction, the factory closing, an error) leaves it to us.
        greeted = False
        try:
            with anyio.CancelScope() as scope:
                scope.deadline = anyio.current_time() + self._hello_timeout
                self._waiting[scope] = None
                if len(self._waiting) > self._max_waiting:
                    oldest = next(iter(self._waiting))
                    self._waiting.pop(oldest)
                    self._evicted += 1
                    oldest.cancel()
                try:
                    await self._greet(stream)
                    greeted = True
                finally:
                    self._waiting.pop(scope, None)
            if scope.cancelled_caught and scope.deadline <= anyio.current_time():
                self._timed_out += 1
        finally:
            if not greeted:
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
