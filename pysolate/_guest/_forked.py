"""The Host's side of the fork server (``_forkserver``): start it, ask it for a Guest child.

``fork_child(cwd, broker)`` returns a ``ForkedProcess``: a Guest child forked by the server,
with the same stdio pipes, exit status and kill semantics ``SubprocessGuest`` relies on for
a spawned child (``anyio.abc.Process``). Its exit status comes from the server, which is its
parent and reaps it; it is killed through a pidfd, so a signal can never reach a recycled
pid.

One server per Host process and kind (``landlock``/``seccomp``; ``namespaces``, inside
bubblewrap), started on first use by one long-lived thread and shared by every event loop
and thread (requests are single ``SOCK_SEQPACKET`` messages, so concurrent senders need no
lock). A server found dead, or one that drops a request, is replaced and the request sent
once more; a second failure is ``ForkServerFailed`` (the caller spawns instead). A server
that dies later ends its children (``PR_SET_PDEATHSIG``) and closes their status sockets,
so a run sees its Guest exit (``-SIGKILL``: crashed) instead of waiting.
"""

from __future__ import annotations

import array
import contextlib
import functools
import json
import os
import select
import signal
import socket
import subprocess
import threading

import anyio
import anyio.abc

from . import _isolation
from ._lasting_thread import on_lasting_thread

SERVER = str(_isolation.PACKAGE_ROOT / "pysolate" / "_guest" / "child" / "_forkserver.py")
"""The server a ``landlock`` or ``seccomp`` Host starts (as the Host's own child)."""

SANDBOXED_SERVER = f"{_isolation.SANDBOX_ROOT}/pysolate/_guest/child/_forkserver.py"
"""The server a ``namespaces`` Host starts inside the Guest's bubblewrap sandbox (its path there)."""

FORK_TIMEOUT = 5.0
"""Seconds the server may take to fork a child before it counts as stuck (and is replaced)."""


STATUS_GRACE = 2.0
"""Seconds the server may take to report a child's exit status once the child has exited."""


class ForkServerFailed(RuntimeError):
    """The fork server could not start a Guest child (twice)."""


class _PipeReader(anyio.abc.ByteReceiveStream):
    """The read end of a child's stdout or stderr pipe."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd: int | None = fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._fd is None:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    def fileno(self) -> int | None:
        """The pipe's fd while it is open (``_output`` reads it with a loop reader)."""
        return self._fd

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


class ForkedProcess(anyio.abc.Process):
    """A Guest child the fork server forked (see module docstring)."""

    def __init__(
        self,
        pid: int,
        pidfd: int,
        status: socket.socket,
        stdout: int,
        stderr: int,
        guest_pid: int | None = None,
    ) -> None:
        self._pid = pid  # under ``namespaces``: the init of the Guest's pid namespace, gone only once all in it is
        self.guest_pid = guest_pid or pid
        """The process that runs the program (under ``namespaces``: the init's child, pid 2
        of its own pid namespace); the Host moves it into the Guest's cgroup."""
        self._pidfd: int | None = pidfd
        self._status = status
        self._returncode: int | None = None
        self._stdout = _PipeReader(stdout)
        self._stderr = _PipeReader(stderr)
        self._reading = False
        self._read_done = anyio.Event()
        self.prepared: str | None = None
        """The digest of the Landlock rules its server prepared (the Host names it in ``init``)."""

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def stdin(self) -> None:
        return None

    def pipe_fds(self) -> tuple[int | None, int | None]:
        """The read ends of the child's stdout and stderr pipes (None: closed)."""
        return self._stdout.fileno(), self._stderr.fileno()

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream:
        return self._stderr

    async def wait(self) -> int:
        """The exit code (``-signal`` for a signal), once the server reaped the child."""
        while self._returncode is None:
            if self._reading:  # another task reads the status; wait for its answer
                await self._read_done.wait()
                continue
            self._reading = True
            try:
                message = await self._exit_message()
                if message.startswith(b"exit "):
                    self._returncode = os.waitstatus_to_exitcode(int(message[5:]))
                else:  # the server died or is stuck: the child is gone or dies with it; make sure
                    self.kill()
                    self._returncode = -signal.SIGKILL
            finally:
                self._reading = False
                done, self._read_done = self._read_done, anyio.Event()
                done.set()
        return self._returncode

    async def _exit_message(self) -> bytes:
        """``exit S`` from the server (under ``namespaces`` first from the Guest's init, with
        the Guest's status), or ``b""`` if it died or did not answer in time.

        The pidfd turns readable when the child exits (before anyone reaps it; an init
        only once everything in its pid namespace is gone), so a stuck server delays the
        answer by at most ``STATUS_GRACE``, never forever.
        """
        assert self._pidfd is not None
        await anyio.wait_readable(self._pidfd)
        with anyio.move_on_after(STATUS_GRACE):
            await anyio.wait_readable(self._status)
            return self._status.recv(64)
        return b""

    def duplicate_pidfd(self) -> int | None:
        """A new fd of the child's pidfd (the caller closes it), None once released."""
        return None if self._pidfd is None else os.dup(self._pidfd)

    def send_signal(self, sig: int) -> None:
        if self._pidfd is not None and self._returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def aclose(self) -> None:
        """Release the pipes, the status socket and the pidfd (after ``wait``)."""
        self.release()

    def exited(self, timeout: float) -> bool:
        """Block (a thread, never the event loop) until the child has exited, at most
        ``timeout`` seconds; whether it has."""
        if self._pidfd is None:
            return True
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))

    def release(self) -> None:
        """``aclose`` without the event loop: for a killed child whose exit status no one
        reads (``_reaper``; the server still reaps it, and its answer finds the socket shut)."""
        self._stdout.close()
        self._stderr.close()
        self._status.close()
        if self._pidfd is not None:
            fd, self._pidfd = self._pidfd, None
            os.close(fd)


class _Server:
    """One fork server process and its control socket (one of each kind per Host process)."""

    def __init__(self, namespaces: bool) -> None:
        # started inside bubblewrap; its children make their own namespaces
        self.namespaces = namespaces
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self.prepared: str | None = None
        """The digest of the Landlock rules the server prepared for its children (``_confine.prepare``)."""
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        """A forked Host process must not share its parent's server."""
        self._process, self._control = None, None
        self._lock = threading.Lock()

    def control(self, plan: _isolation.Plan) -> socket.socket:
        """The live server's control socket, starting (or restarting) the server (blocks)."""
        with self._lock:
            if self._process is None or self._process.poll() is not None or self._control is None:
                self._start(plan)
            assert self._control is not None
            return self._control

    def live_control(self) -> socket.socket | None:
        """The control socket of a server that is still running, or None (does not block)."""
        with self._lock:
            if self._process is None or self._control is None or self._process.poll() is not None:
                return None
            return self._control

    def replace(self, dead: socket.socket) -> None:
        """Kill the server behind ``dead`` (if it is still the current one)."""
        with self._lock:
            if self._control is dead:
                self._stop()

    def _start(self, plan: _isolation.Plan) -> None:
        self._stop()
        host_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        script = SANDBOXED_SERVER if self.namespaces else SERVER
        try:  # the child's own command (bubblewrap's sandbox included) with the server's script
            self._process = subprocess.Popen(
                [
                    *plan.argv[:-1],
                    script,
                    str(server_end.fileno()),
                    "namespaces" if self.namespaces else "plain",
                    *filter(None, [_isolation.machine().seccomp_library]),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={},
                cwd="/",
                start_new_session=True,
                pass_fds=(server_end.fileno(),),
            )
        except BaseException:
            host_end.close()
            raise
        finally:
            server_end.close()
        spec = _isolation.prepared_landlock(sandboxed=self.namespaces)
        self.prepared = _isolation.prepared_digest(spec)
        try:  # its first message: the rules it prepares (a server already dead breaks the pipe)
            host_end.send(json.dumps({"landlock": spec, "digest": self.prepared}).encode())
        except BaseException:
            host_end.close()
            raise
        host_end.setblocking(False)
        self._control = host_end

    def _stop(self) -> None:
        if self._control is not None:
            self._control.close()  # the server exits on EOF; its children die with it
            self._control = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()  # under bubblewrap: its pid namespace goes with it
                self._process.wait()
            self._process = None

    def pids(self) -> list[int]:
        """The server's processes, outermost first: the one the Host started and, under
        bubblewrap, bubblewrap's init and the interpreter (tests and benchmarks)."""
        if self._process is None:
            return []
        chain = [self._process.pid]
        python = os.stat(_isolation.interpreter())
        while True:
            try:
                exe = os.stat(f"/proc/{chain[-1]}/exe")
                if (exe.st_dev, exe.st_ino) == (python.st_dev, python.st_ino):
                    return chain
                with open(f"/proc/{chain[-1]}/task/{chain[-1]}/children") as f:
                    below = f.read().split()
                if not below:
                    return chain
                chain.append(
                    min(map(int, below), key=_started)
                )  # the oldest: orphans reaped here come later
            except OSError:
                return chain

    def pid(self) -> int | None:
        """The server interpreter's pid (tests kill it), or None before it started."""
        chain = self.pids()
        return chain[-1] if chain else None


servers = {False: _Server(namespaces=False), True: _Server(namespaces=True)}
"""The fork servers, by whether they serve the ``namespaces`` level."""

server = servers[False]
"""The ``landlock`` and ``seccomp`` levels' server."""


def server_for(level: str) -> _Server:
    """The server that forks Guests at ``level``."""
    return servers[level == "namespaces"]


def _started(pid: int) -> int:
    """When ``pid`` started (clock ticks since boot)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def _pid_of(pidfd: int) -> int:
    """The Host's pid for the process behind ``pidfd`` (-1 once it has exited); the server
    may live in a pid namespace of its own, where the numbers differ."""
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        for line in f:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise OSError(f"no pid in the fdinfo of pidfd {pidfd}")


async def fork_child(
    plan: _isolation.Plan, cwd: str, broker: socket.socket, scratch_bytes: int
) -> ForkedProcess:
    """Ask the fork server of ``plan``'s level for a Guest child on ``broker`` (the child's
    end), in ``cwd`` (under ``namespaces``: its own ``/tmp`` of ``scratch_bytes``).

    Raises ``ForkServerFailed`` when a restarted server failed too.
    """
    chosen = servers[plan.namespaces]
    request: dict[str, object] = {"cwd": cwd}
    if plan.namespaces:
        request["scratch_bytes"] = scratch_bytes
    failure: BaseException | None = None
    for _attempt in range(2):
        control = chosen.live_control()
        try:  # (a server that dies as it starts fails here, like one that dies on the request)
            if control is None:
                control = await anyio.to_thread.run_sync(
                    on_lasting_thread, functools.partial(chosen.control, plan)
                )
            with anyio.fail_after(FORK_TIMEOUT):
                process = await _fork_once(control, request, broker, 2 if plan.namespaces else 1)
            process.prepared = chosen.prepared
            return process
        except (OSError, _Dropped, TimeoutError) as exc:
            if control is not None:
                chosen.replace(control)
            failure = exc
    raise ForkServerFailed(f"the fork server did not start a Guest child: {failure!r}")


async def fork_child_or_none(
    plan: _isolation.Plan, cwd: str, broker: socket.socket, scratch_bytes: int
) -> ForkedProcess | None:
    """``fork_child``, or None where the level must spawn or the server failed twice (the
    caller then spawns the child: the same level, only slower)."""
    if not plan.forkable:
        return None
    try:
        return await fork_child(plan, cwd, broker, scratch_bytes)
    except ForkServerFailed:
        return None


class _Dropped(Exception):
    """The server closed the request's status socket without forking (it died)."""


async def _fork_once(
    control: socket.socket, request: dict[str, object], broker: socket.socket, pidfds: int
) -> ForkedProcess:
    """One request; ``pidfds``: how many the answer carries (the child's, and under
    ``namespaces`` the Guest's below it, the child being the Guest's init)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    host_status, server_status = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    handed = False
    try:
        message = [json.dumps(request).encode()]
        fds = [
            (
                socket.SOL_SOCKET,
                socket.SCM_RIGHTS,
                array.array("i", [broker.fileno(), out_w, err_w, server_status.fileno()]),
            )
        ]
        while True:
            try:
                control.sendmsg(message, fds)
                break
            except BlockingIOError:  # the server is behind: a full queue is rare, poll it
                await anyio.sleep(0.001)
        server_status.close()
        os.close(out_w)
        os.close(err_w)
        out_w = err_w = -1
        await anyio.wait_readable(host_status)
        data, ancillary, _flags, _addr = host_status.recvmsg(
            64, socket.CMSG_SPACE(2 * array.array("i").itemsize)
        )
        received = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                received.frombytes(payload[: len(payload) - (len(payload) % received.itemsize)])
        if not data.startswith(b"pid ") or len(received) != pidfds:
            for fd in received:
                os.close(fd)
            raise _Dropped
        try:
            pids = [_pid_of(fd) for fd in received]
        except BaseException:
            for fd in received:
                os.close(fd)
            raise
        if pidfds == 2:
            os.close(received[1])  # the Guest's: only its pid was needed
        if pids[0] <= 0:
            os.close(received[0])
            raise _Dropped  # it died already: nothing to hand over
        process = ForkedProcess(
            pids[0],
            received[0],
            host_status,
            out_r,
            err_r,
            pids[1] if pidfds == 2 and pids[1] > 0 else None,
        )
        handed = True
        return process
    finally:
        if not handed:
            for fd in (out_r, err_r, out_w, err_w):
                if fd >= 0:
                    os.close(fd)
            host_status.close()
            if server_status.fileno() >= 0:
                server_status.close()
