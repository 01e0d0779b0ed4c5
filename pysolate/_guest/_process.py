"""The Host side of the isolated subprocess Guest: run one program, reap it.

``start_subprocess_guest`` (``_start``) starts the child and returns a ``SubprocessGuest``
once the child waits for its source. ``SubprocessGuest.run`` then sends the sealed source
and serves the program's calls, one at a time, until ``done``.

The Host trusts nothing the child sends (``_frames``). Every end of a run maps to exactly
one status::

    done frame                         → ok / error / limit (MemoryLimit, FrameLimit)
    malformed, oversized, out-of-order → protocol_error  (a frame while a call is served,
      frame, or ready after run           a second ready, bad JSON, bad tags...)
    wall time                          → limit WallTimeLimit (tool time included)
    more stdout than allowed           → limit OutputLimit
    more calls than allowed            → limit CallLimit
    a reply larger than allowed        → limit FrameLimit
    killed by SIGXCPU                  → limit CPUTimeLimit
    any other death before done        → crashed

Every way out of ``run`` (including cancellation and Host bugs in the handler) kills the
child's process group and reaps it; no task or loop reader outlives ``run``. One exception, for speed: a
forked child that sent ``done`` and closed its output waits, asleep, for the Host to hang
up (``_child.finish``): the reaper thread (``_reaper``) hangs up and kills it
``REAP_DELAY`` later, then removes its cgroup, fds and scratch in the background.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import anyio
import anyio.abc

from .._guest_api import (
    CallHandler,
    ErrorInfo,
    GuestLimits,
    GuestOutcome,
    GuestStatus,
    Isolation,
    LimitExceeded,
)
from . import _forked, _frames
from ._cgroup import GuestCgroup
from ._channel import Channel as _Channel
from ._channel import ChannelClosed as _ChannelClosed
from ._exit_watch import watch_exit
from ._frames import Call, Done, ProtocolViolation, ReadyFrame, TurnDone, parse_guest_frame
from ._output import GuestOutput
from ._reaper import REAP_DELAY, hang_up_and_reap, reap_later
from ._replies import answer, granted
from ._scratch import remove_scratch
from ._stepped import guest_frame
from .child._wire import HEADER, encode_frame

EXIT_GRACE = 0.5
"""Seconds a child may take to exit after ``done`` before it is killed (output is kept)."""

SCRATCH_BYTES = 64 * 1024 * 1024
"""Size of the child's private tmpfs (and its RLIMIT_FSIZE)."""

CGROUP_GRACE = 2.0
"""Seconds the killed processes of a Guest's cgroup may take to be gone before it is removed."""


_Ending = TypeVar("_Ending")
"""What a conversation ends with: ``done`` (a run), ``turn_done`` or ``done`` (a turn)."""


class _State(enum.Enum):
    READY = "ready"  # started, waiting for its source
    RUNNING = "running"
    FINISHED = "finished"  # ran its one program
    CLOSED = "closed"


_LimitHit = LimitExceeded  # a limit the runner finds (calls, frames), or the handler's (bytes)


@dataclass(frozen=True, slots=True)
class GuestStatistics:
    """What one Guest has done so far (a snapshot)."""

    startup_seconds: float
    """From spawning the child to its ``ready`` frame."""
    calls: int
    """Capability calls served."""
    stdout_bytes: int


class SubprocessGuest:
    """One isolated Guest child, started ahead of its source (see module docstring)."""

    def __init__(
        self,
        process: anyio.abc.Process,
        channel: _Channel,
        capabilities: Mapping[str, Sequence[str]],
        limits: GuestLimits,
        isolation: Isolation,
        scratch: str | None,
        startup_seconds: float,
    ) -> None:
        self._process = process
        self._channel = channel
        self._granted = {name: frozenset(methods) for name, methods in capabilities.items()}
        self._limits = limits
        self.isolation = isolation
        self._scratch = scratch  # temp dir we created (no-namespace plans only); removed on close
        # holds the whole process tree, where one could be made
        self._cgroup: GuestCgroup | None = None
        self._startup_seconds = startup_seconds
        self._state = _State.READY
        self._calls = 0
        self._output = GuestOutput(limits.output_bytes)
        self._ending: tuple[GuestStatus, ErrorInfo | None] | None = None  # first end wins
        self._conversation: anyio.CancelScope | None = None
        self._serving = False  # a handler is running (a call is in flight)
        self._died_in_call = False  # the child exited while a call was in flight
        self._exited = False  # the child process has exited (seen by ``_watch_exit``)
        self._detached = False  # done and all its output in: the reaper may finish the clean-up
        self._stop_watching: Callable[[], None] | None = None  # ends ``watch_exit``'s reader
        self._handed_off = False  # it does: nothing here touches the process any more

    def statistics(self) -> GuestStatistics:
        return GuestStatistics(self._startup_seconds, self._calls, self._output.stdout_total)

    @property
    def pid(self) -> int:
        """The child's process id (also its process group's: ``aclose`` kills the group)."""
        return self._process.pid

    # -- running ---------------------------------------------------------------------------

    async def run(self, source: str, handler: CallHandler) -> GuestOutcome:
        """Execute the sealed ``source`` once, serving its calls through ``handler``.

        Returns the outcome for every end the program can cause (see module docstring).
        Raises ``RuntimeError`` if this Guest already ran or was closed. An exception other
        than ``ToolFailure`` from ``handler`` propagates after the child is killed.
        Cancellation kills and reaps the child, then re-raises.
        """
        if self._state is not _State.READY:
            raise RuntimeError(
                f"a Guest runs exactly one program (this one is {self._state.value})"
            )
        self._state = _State.RUNNING
        try:
            return await self._run(source, handler)
        finally:
            self._state = _State.FINISHED
            with anyio.CancelScope(shield=True):
                await self._kill_and_reap()

    async def _run(self, source: str, handler: CallHandler) -> GuestOutcome:
        # The source goes first: the child wakes and compiles it while the output's readers
        # and the exit watcher are set up (output waits in the pipes; an exit, in the pidfd).
        try:
            sent: Awaitable[None] | None = self._channel.send(
                encode_frame({"t": "run", "source": source})
            )
        except _ChannelClosed:
            sent = None  # the child is gone: ``_converse`` says so where it is handled
        self._stop_watching = watch_exit(self._process, self._on_exit)
        by_loop = self._output.read_by_loop(self._process, self._overflowed)
        if by_loop and self._stop_watching is not None:
            return await self._served(sent, handler)  # no task: no task group to join
        async with anyio.create_task_group() as tasks:
            if not by_loop:
                self._output.pump(self._process, tasks, self._overflowed)
            if self._stop_watching is None:
                tasks.start_soon(self._watch_exit)
            outcome = await self._served(sent, handler)
            tasks.cancel_scope.cancel()
        return outcome

    async def _served(self, sent: Awaitable[None] | None, handler: CallHandler) -> GuestOutcome:
        """Serve the run until ``done`` or its end, then wait for its output (and, unless
        the reaper may finish it, its exit)."""
        output = self._output
        try:
            done, closed, host_bug = await self._conversed(
                functools.partial(self._converse, sent, handler), self._limits.wall_time, "run"
            )
            if done is None and not closed:
                self._kill()
            if done is not None and isinstance(self._process, _forked.ForkedProcess):
                # The outcome needs no exit status once done and the whole output are in
                # (the output ends when the child exits): the reaper finishes the rest.
                if not output.drain():  # closed before done: usually in already
                    with anyio.move_on_after(EXIT_GRACE):
                        await output.wait_ended()
                self._detached = output.ended
            if not self._detached:
                self._channel.close()  # a child that sent done waits for this to exit
                with anyio.move_on_after(EXIT_GRACE):
                    await self._process.wait()
                self._kill()
                await self._process.wait()
                with anyio.move_on_after(EXIT_GRACE):  # a descendant may still hold the pipes
                    await output.wait_ended()
        finally:
            output.stop()
        if host_bug is not None:
            raise host_bug
        return self._outcome(done)

    async def _conversed(
        self, converse: Callable[[], Awaitable[_Ending]], wall_time: float, what: str
    ) -> tuple[_Ending | None, bool, Exception | None]:
        """``converse`` (a run's or a turn's, ``what``) within ``wall_time``: (its end or
        None, whether the channel closed, a Host bug to re-raise); every other end is
        recorded (``_end``)."""
        done: _Ending | None = None
        host_bug: Exception | None = None
        closed = False
        with anyio.CancelScope() as self._conversation:
            with anyio.move_on_after(wall_time) as wall:
                try:
                    done = await converse()
                except ProtocolViolation as exc:
                    self._end("protocol_error", ErrorInfo("ProtocolError", str(exc), None))
                except _LimitHit as exc:
                    self._end("limit", exc.info)
                except _ChannelClosed:
                    closed = True  # the child is exiting; its status says why, below
                except Exception as exc:  # a Host bug (the handler's): re-raised unwrapped below
                    host_bug = exc
            closed = closed or self._died_in_call
            if wall.cancelled_caught:
                self._end(
                    "limit",
                    ErrorInfo("WallTimeLimit", f"the {what} took longer than {wall_time}s", None),
                )
        return done, closed, host_bug

    def _outcome(self, done: Done | None) -> GuestOutcome:
        stdout = self._output.stdout.decode(
            "utf-8", "surrogateescape"
        )  # as the child's stdout encoded it
        if done is not None:
            self._end(done.status, done.error)
        if self._output.stdout_total > self._limits.output_bytes and (
            self._ending is None or self._ending[0] in ("ok", "error")
        ):
            self._ending = None
            self._end(
                "limit",
                ErrorInfo(
                    "OutputLimit",
                    f"the program printed more than {self._limits.output_bytes} bytes",
                    None,
                ),
            )
        if self._ending is None:
            self._end(*self._death())
        assert self._ending is not None
        status, error = self._ending
        value = done.value if done is not None and status == "ok" else None
        return GuestOutcome(status, value, stdout, error, self.isolation)

    def _death(self) -> tuple[GuestStatus, ErrorInfo]:
        code = self._process.returncode
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return "limit", ErrorInfo(
                "CPUTimeLimit", f"the program used more than {self._limits.cpu_time}s of CPU", None
            )
        if (
            code == -signal.SIGKILL and self._cgroup is not None and self._cgroup.oom_killed()
        ):  # its cgroup's memory bound
            bound = self._limits.memory_bytes + SCRATCH_BYTES
            return "limit", ErrorInfo(
                "MemoryLimit",
                f"the Guest's memory, files in memory and kernel buffers passed {bound} bytes",
                None,
            )
        detail = self._output.stderr.decode("utf-8", "replace").strip()
        message = f"the Guest exited with status {code} before the program finished"
        return "crashed", ErrorInfo(
            "GuestCrashed", f"{message}: {detail}" if detail else message, None
        )

    def _end(self, status: GuestStatus, error: ErrorInfo | None) -> None:
        """Record why the run ends (the first reason wins) and stop the conversation."""
        if self._ending is None:
            self._ending = (status, error)
        if self._conversation is not None:
            self._conversation.cancel()

    async def _converse(self, sent: Awaitable[None] | None, handler: CallHandler) -> Done:
        """Serve the program's calls until ``done``; ``sent``: the ``run`` frame's send
        (None: the child was gone before it)."""
        if sent is None:
            raise _ChannelClosed
        await sent
        while True:
            payload = (
                await self._channel.receive()
            )  # a large frame: decoded in steps (``_stepped``)
            frame = (
                parse_guest_frame(payload)
                if len(payload) <= _frames.INLINE_FRAME_BYTES
                else await guest_frame(payload)
            )
            if isinstance(frame, Done):
                if not isinstance(self._process, _forked.ForkedProcess):
                    self._channel.close()  # the child waits for this to exit (``_child.finish``)
                return frame
            if isinstance(frame, ReadyFrame | TurnDone):
                raise ProtocolViolation(f"{type(frame).__name__} in a run")
            self._calls += 1
            if self._calls > self._limits.max_calls:
                raise _LimitHit(
                    "CallLimit", f"the program made more than {self._limits.max_calls} calls"
                )
            reply = await self._serve(frame, handler)
            if len(reply) - HEADER.size > self._limits.max_frame_bytes:
                raise _LimitHit(
                    "FrameLimit",
                    f"the reply to {frame.capability}.{frame.method} exceeds {self._limits.max_frame_bytes} bytes",
                )
            await self._channel.send(reply)

    async def _serve(self, call: Call | _frames.RefusedCall, handler: CallHandler) -> bytes:
        """Run one call; the child must stay silent until it gets its reply.

        A frame sent meanwhile is found when the handler returns (checking costs one
        ``recv``, watching would cost a task per call); the child dying meanwhile cancels
        the handler at once (``_watch_exit``), and a call from a child already dead is
        not run at all.
        """
        if self._exited and granted(call, self._granted):
            raise _ChannelClosed  # nothing runs for a child that can no longer see the result
        self._serving = True
        try:
            reply = encode_frame(await answer(self._calls, call, self._granted, handler))
        finally:
            self._serving = False
        if self._channel.spoke_out_of_turn():
            raise ProtocolViolation("a frame arrived while a call was being served")
        return reply

    async def _watch_exit(self) -> None:
        """Cancel the call being served when the child dies: nobody can take its reply.

        (Outside a call, the channel's EOF ends the conversation after any ``done``.)
        """
        await self._process.wait()
        self._on_exit()

    def _on_exit(self) -> None:
        self._exited = True
        if self._serving and self._conversation is not None:
            self._died_in_call = True
            self._conversation.cancel()

    def _overflowed(self) -> None:
        self._kill()
        self._end(
            "limit",
            ErrorInfo(
                "OutputLimit",
                f"the program printed more than {self._limits.output_bytes} bytes",
                None,
            ),
        )

    # -- stopping --------------------------------------------------------------------------

    def _kill(self) -> None:
        """SIGKILL the child's process group, bwrap's namespace and the Guest's cgroup."""
        if self._handed_off:
            return  # killed before the hand-off; its fds may be closed by now
        if isinstance(self._process, _forked.ForkedProcess):
            self._process.kill()  # through its pidfd; a namespaces Guest dies with its init (pid 1)
        elif self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
        if self._cgroup is not None:
            self._cgroup.kill()

    async def _stderr_after_death(self, exiting: bool) -> str:
        """Kill the child and return the start of what it wrote to stderr (for start errors).

        ``exiting``: it hung up, so it is on its way out; its own exit status (a confinement
        failure's, ``_confine.EXIT_CODE``) is awaited for ``EXIT_GRACE`` before the kill, which
        would otherwise race it (under ``namespaces`` it passes through the Guest's init)."""
        if exiting:
            with anyio.move_on_after(EXIT_GRACE):
                await self._process.wait()
        self._kill()
        await self._process.wait()
        with anyio.move_on_after(EXIT_GRACE):
            await self._output.pump_stderr(self._process)
        return self._output.stderr.decode("utf-8", "replace").strip()

    async def _kill_and_reap(self) -> None:
        if self._stop_watching is not None:
            self._stop_watching()
        if self._detached and not self._handed_off:
            self._hand_to_reaper()
        self._kill()
        if self._handed_off:
            return
        await self._process.wait()
        if self._cgroup is not None:
            with anyio.move_on_after(CGROUP_GRACE):
                while self._cgroup.populated():
                    self._cgroup.kill()
                    await anyio.sleep(0.005)
            self._cgroup.remove()
            self._cgroup = None
        self._channel.close()
        await self._process.aclose()
        if self._scratch is not None:
            remove_scratch(self._scratch)
            self._scratch = None

    def _hand_to_reaper(self) -> None:
        """Leave the child that sent ``done`` to ``_reaper`` (once): it hangs up and kills
        it ``REAP_DELAY`` from now, then cleans up. From here on nothing on the event loop
        touches its process, channel, cgroup or scratch."""
        process, cgroup, scratch = self._process, self._cgroup, self._scratch
        self._cgroup = self._scratch = None
        self._handed_off = True
        assert isinstance(process, _forked.ForkedProcess)
        due, channel = time.monotonic() + REAP_DELAY, self._channel.hand_off()
        reap_later(
            functools.partial(
                hang_up_and_reap, due, channel, process, cgroup, scratch, CGROUP_GRACE
            )
        )

    async def aclose(self) -> None:
        """Kill and reap the child (its cgroup too), release channel and scratch; idempotent.

        Shielded from cancellation: it only kills and waits for an already dead process.
        """
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        with anyio.CancelScope(shield=True):
            await self._kill_and_reap()
