"""The blocking API: ``SyncHost`` and ``SyncSession``, the sync twins of ``Host`` and ``Session``.

Most code that calls the OpenAI or Anthropic SDKs uses their sync clients. ``SyncHost``
gives it the same runs with the same semantics, as httpx's ``Client`` gives
``AsyncClient``'s: every method of ``Host`` that is a coroutine is here a plain call
that blocks until it is done, takes the same arguments and returns (or raises) the same
thing; ``host.session()`` is ``with``-able and its turns block.

How. The Host's event loop runs in a thread of its own, reached through anyio's blocking
portal (``anyio.from_thread.start_blocking_portal``), started at the first call and kept
until ``close()`` (or the end of ``with``), so a session, the Guest pool and the Host's
per-loop limits live as long as the ``SyncHost``. The thread is a daemon (anyio ≥ 4.8),
and a ``SyncHost`` nobody closed stops its loop when it is collected or at interpreter
exit. A sync stream (``openai.Stream``, the sync ``MessageStream``, a generator) is read
in worker threads (``streams._events.blocking_events``), never in the loop: its blocking
reads cannot stall early work, and ``idle_timeout`` interrupts them.

Ctrl-C. SIGINT raises ``KeyboardInterrupt`` in the main thread, which is waiting for the
portal: the run's task is then cancelled exactly as the async API cancels it (early work
stopped, the Guest killed, a session whose Guest had the program broken), the call waits
for that clean-up and re-raises ``KeyboardInterrupt``. A second Ctrl-C stops the waiting.
The waiting thread wakes every ``INTERRUPT_POLL`` seconds, since the kernel may hand SIGINT
to another thread, and Python runs its handler only in the main thread's interpreter loop.

Prior art: httpx's ``Client``/``AsyncClient`` (one API, two calling conventions); the
``Sync``/``Async`` prefixes of the OpenAI and Anthropic SDKs' own twins (``SyncPage``,
``AsyncPage``). The async class keeps the plain name here because it came first and
the documentation names it.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self, TypeVar

import anyio.from_thread

from .._guest_api import GuestLimits, Isolation
from .._report._result import RunResult
from ..streams import blocking_events
from ._host import Host
from ._session import Session, SessionLimits, SessionState, SessionStatistics

if TYPE_CHECKING:
    from occurrences import MethodSpec

    from .._calls._broker import Registration
    from .._calls._threads import ThreadStatistics
    from .._workspace._workspace import Workspace

P = ParamSpec("P")
T = TypeVar("T")

INTERRUPT_POLL = 0.05
"""Seconds a waiting thread sleeps at most before it looks for a pending Ctrl-C. The kernel
may deliver SIGINT to any thread (the loop's, a worker); Python then runs the handler only
when the main thread next returns to the interpreter, which a wait without a timeout never
does until the run ends. The wait itself still ends the moment the result is there."""


def _blocking(
    twin: Callable[Concatenate[Any, P], Awaitable[T]],
) -> Callable[[Callable[..., T]], Callable[Concatenate[Any, P], T]]:
    """Give the decorated blocking method the parameters of its async ``twin``: its
    signature for type checkers and ``inspect.signature``/``help()``, so a run's parameters
    are declared once, on ``Host`` or ``Session``, and the blocking one passes them on."""

    def decorate(method: Callable[..., T]) -> Callable[Concatenate[Any, P], T]:
        method.__signature__ = inspect.signature(twin)  # type: ignore[attr-defined]
        return method

    return decorate


class _Loop:
    """The event loop thread of one ``SyncHost``: started on first use, stopped once.

    Holds no reference to its ``SyncHost`` (the finalizer that stops it must not keep the
    ``SyncHost`` alive). Thread-safe: any thread may call through it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._manager: (
            contextlib.AbstractContextManager[anyio.from_thread.BlockingPortal] | None
        ) = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._closed = False

    def portal(self) -> anyio.from_thread.BlockingPortal:
        with self._lock:
            if self._closed:
                raise RuntimeError("this SyncHost is closed")
            if self._portal is None:
                self._manager = anyio.from_thread.start_blocking_portal()
                self._portal = self._manager.__enter__()
            return self._portal

    def call(self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args, **kwargs)`` in the loop and wait for it; on ``KeyboardInterrupt``
        (or any exception raised into the waiting thread) cancel it, wait for its clean-up,
        and re-raise. A second interrupt while waiting propagates at once."""
        finished = threading.Event()

        async def task() -> T:
            try:
                return await fn(*args, **kwargs)
            finally:
                finished.set()

        future = self.portal().start_task_soon(task)
        try:
            while True:
                try:
                    return future.result(timeout=INTERRUPT_POLL)
                except TimeoutError:
                    if future.done():
                        raise  # the task's own TimeoutError
        except BaseException:
            if not future.done():  # interrupted while the task runs: end it as the async API would
                future.cancel()
                while not finished.wait(INTERRUPT_POLL):
                    pass
            raise

    def close(self, before: Callable[[], Awaitable[object]] | None = None) -> None:
        """Run ``before`` in the loop (if it was started), then stop it, cancelling what
        still runs there (an open session's holder), and join its thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            portal, manager = self._portal, self._manager
        if portal is None or manager is None:
            return
        try:
            if before is not None:
                portal.call(before)
        finally:
            with contextlib.suppress(RuntimeError):  # already stopped
                portal.call(portal.stop, True)
            manager.__exit__(None, None, None)


class SyncHost:
    """``Host`` for sync code: the same runs, blocking (see the module docstring).

    ``SyncHost(isolation="namespaces", ...)`` makes its own ``Host`` with those keyword
    arguments (``Host``'s); ``SyncHost(host)`` wraps an existing one, sharing its
    registrations (the async API may keep using it). Registering is the ``Host``'s
    (``register``, ``capabilities``, ...); runs block. Use as ``with SyncHost() as
    host:``, or call ``close()``: it stops the event loop thread and, for a Host it made
    itself, closes the Host (its pool of ready Guests).
    """

    def __init__(self, host: Host | None = None, /, **options: Any) -> None:
        if host is not None and options:
            raise TypeError("SyncHost(host) wraps a Host as it is: pass the options to Host(...)")
        self.host = host if host is not None else Host(**options)
        """The async ``Host`` behind this one."""
        self._owns_host = host is None
        self._loop = _Loop()
        self._finalizer = weakref.finalize(
            self, self._loop.close, self.host.aclose if self._owns_host else None
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the Host it made (not one it was given), stop the event loop thread. Runs
        after this raise ``RuntimeError``. Idempotent."""
        self._finalizer.detach()
        self._loop.close(self.host.aclose if self._owns_host else None)

    # -- registry (the Host's own, nothing blocks) ----------------------------------------

    def register(self, name: str, obj: object) -> None:
        """``Host.register``: expose ``obj`` to the Guest as ``name`` (same errors)."""
        self.host.register(name, obj)

    def capabilities(self) -> dict[str, list[str]]:
        return self.host.capabilities()

    def registration(self, name: str) -> Registration:
        return self.host.registration(name)

    def method_specs(self) -> dict[str, dict[str, MethodSpec]]:
        return self.host.method_specs()

    def isolation(self) -> Isolation | None:
        return self.host.isolation()

    def thread_statistics(self) -> ThreadStatistics:
        return self.host.thread_statistics()

    # -- runs -----------------------------------------------------------------------------

    @_blocking(Host.run_stream)
    def run_stream(self, chunks: object, **options: Any) -> RunResult:
        """``Host.run_stream``, blocking, with its parameters: the same streams (a sync SDK
        stream or iterator is read in worker threads), code formats, results and errors.
        Ctrl-C cancels the run as the async API does, then raises ``KeyboardInterrupt``."""
        return self._loop.call(self.host.run_stream, blocking_events(chunks), **options)  # type: ignore[arg-type]

    @_blocking(Host.run_source)
    def run_source(self, source: str, **options: Any) -> RunResult:
        """``Host.run_source``, blocking, with its parameters (``speculate=False``: the
        sequential reference)."""
        return self._loop.call(self.host.run_source, source, **options)

    def session(
        self, limits: SessionLimits | None = None, *, guest_limits: GuestLimits | None = None
    ) -> SyncSession:
        """``Host.session``: use as ``with host.session() as session:``; turns block."""
        return SyncSession(self._loop, self.host.session(limits, guest_limits=guest_limits))


class SyncSession:
    """``Session`` for sync code: ``with host.session() as session:``, then blocking turns
    (``run_stream``, ``run_source``) with the same semantics, states and errors
    (``SessionBroken``, ``SessionBusy``, ``SessionClosed``). The async session is entered
    and left by one task of the event loop thread; each turn runs in a task of its own."""

    def __init__(self, loop: _Loop, session: Session) -> None:
        self._loop = loop
        self.session = session
        """The async ``Session`` behind this one."""
        self._entered: contextlib.AbstractContextManager[Session] | None = None

    def __enter__(self) -> Self:
        entered = self._loop.portal().wrap_async_context_manager(self.session)
        entered.__enter__()
        self._entered = entered
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Stop the Guest and end the session; the workspace branches stay open."""
        entered, self._entered = self._entered, None
        if entered is None:
            return None
        return entered.__exit__(exc_type, exc, tb)

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def state(self) -> SessionState:
        return self.session.state

    @property
    def workspaces(self) -> dict[str, Workspace]:
        return self.session.workspaces

    def statistics(self) -> SessionStatistics:
        return self.session.statistics()

    @_blocking(Session.run_stream)
    def run_stream(self, chunks: object, **options: Any) -> RunResult:
        """``Session.run_stream``, blocking, with its parameters: the next turn from a
        model's stream."""
        return self._loop.call(self.session.run_stream, blocking_events(chunks), **options)  # type: ignore[arg-type]

    @_blocking(Session.run_source)
    def run_source(self, source: str, **options: Any) -> RunResult:
        """``Session.run_source``, blocking, with its parameters."""
        return self._loop.call(self.session.run_source, source, **options)
