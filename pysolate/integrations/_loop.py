"""An event loop for synchronous frameworks, and a Host session held open in it.

smolagents calls its executor synchronously, possibly from a thread that already runs an
event loop (a notebook, an async web handler), where ``anyio.run`` fails. ``LoopThread``
runs one anyio loop in a daemon thread and is reached through a blocking portal; not
``anyio.from_thread.start_blocking_portal``, whose worker thread is joined at interpreter
exit, so a framework object never cleaned up would hang the process.

``HeldSession`` keeps ``host.session()`` open across calls: a session owns a task group,
which must be entered and left in one task, so one long-lived task in the loop holds it
while each turn runs in a task of its own.
"""

from __future__ import annotations

import threading

import anyio
import anyio.from_thread
from anyio.abc import TaskGroup

from .._run._host import Host
from .._run._session import Session, SessionLimits, SessionState


class LoopThread:
    """An anyio event loop in a daemon thread: ``portal`` reaches it from other threads,
    ``group`` (used only from inside the loop) holds its long-lived tasks. ``stop()``
    cancels them and ends the thread."""

    def __init__(self) -> None:
        ready = threading.Event()
        box: list[tuple[anyio.from_thread.BlockingPortal, TaskGroup]] = []

        async def main() -> None:
            async with anyio.create_task_group() as group:
                async with anyio.from_thread.BlockingPortal() as portal:
                    box.append((portal, group))
                    ready.set()
                    await portal.sleep_until_stopped()
                group.cancel_scope.cancel()

        self._thread = threading.Thread(
            target=anyio.run, args=(main,), name="pysolate-loop", daemon=True
        )
        self._thread.start()
        ready.wait()
        self.portal, self.group = box[0]

    def stop(self) -> None:
        self.portal.call(self.portal.stop)
        self._thread.join()


class HeldSession:
    """A ``host.session()`` held open by one task of a ``LoopThread`` until ``close()``.

        Create and use it from inside the loop (``await HeldSession.open(...)``). Leaving the
        session stops its Guest; a session that broke (a turn stopped its Guest, an idle limit
        passed) is ``usable`` no longer, and one whose Host has gained capabilities since it opened
    is out of date: its owner replaces either.
    """

    def __init__(self, host: Host, limits: SessionLimits | None) -> None:
        self._host = host
        self._limits = limits
        self._ready = anyio.Event()
        self._closing = anyio.Event()
        self._closed = anyio.Event()
        self.session: Session | None = None
        self.error: BaseException | None = None
        self.capabilities = host.capabilities()
        """What the session's Guest exposes (it knows the functions it was opened with)."""

    @classmethod
    async def open(cls, host: Host, limits: SessionLimits | None, group: TaskGroup) -> HeldSession:
        """Open a session in a task of ``group``; raise what opening it raised."""
        held = cls(host, limits)
        group.start_soon(held._hold)
        await held._ready.wait()
        if held.error is not None:
            raise held.error
        return held

    @property
    def usable(self) -> bool:
        return self.session is not None and self.session.state in (
            SessionState.IDLE,
            SessionState.RUNNING,
        )

    async def close(self) -> None:
        self._closing.set()
        await self._closed.wait()

    async def _hold(self) -> None:
        try:
            async with self._host.session(self._limits) as session:
                self.session = session
                self._ready.set()
                await self._closing.wait()
        except Exception as exc:  # reported to open()
            self.error = exc
        finally:
            self._ready.set()
            self._closed.set()
