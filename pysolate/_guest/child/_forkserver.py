"""The fork server: a pre-imported interpreter that forks Guest children on the Host's request.

Run as ``python -I -S -B -X utf8 .../pysolate/_guest/child/_forkserver.py FD MODE [LIBSECCOMP]`` (empty environment,
cwd ``/``, stdio on ``/dev/null``) with the server end of a ``SOCK_SEQPACKET`` socketpair at
``FD``: the Host's *control* socket. Standard library only, like ``_child``. A Guest child
started from a fresh interpreter spends ~25 ms of CPU importing and compiling; here that is
paid once, and each Guest is one ``fork`` (~2 ms).

Why it widens nothing (docs/isolation.md, "Fork server"):

- ``MODE`` ``plain`` (``landlock``, ``seccomp``): the server is *not* confined. ``namespaces``:
  it runs inside the bubblewrap sandbox a spawned Guest gets (so it sees only what a
  Guest sees) and starts every child with ``clone`` in namespaces of its own (``_unshare``).
  Either way it holds nothing a Guest may have: no environment, no files, no Host state
  — only the control socket (an unnamed socketpair, unreachable by name or path) and,
  for a moment, the fds of the request it is serving.
- Each forked child, before it reads anything from the Host, becomes its own session,
  asks to be killed when the server dies, keeps only fds 0-3 (``/dev/null``, its stdout and
  stderr pipes, its broker socket: the control socket and every sibling's fds are closed),
  and moves to its scratch dir. Then it runs ``_child.serve`` exactly as a spawned child
  runs it: it reads ``init`` from the Host and confines *itself* with the same
  ``_confine.confine`` spec — its own user and mount namespace, its own Landlock domain,
  seccomp filter, rlimits, private scratch tmpfs, no privileges — before ``ready``.
- The server is not dumpable (no process of its uid may ptrace it or read its ``/proc``).
  A confined Guest cannot reach it anyway: seccomp forbids ``ptrace``, ``kill`` of another
  pid and the ``pidfd_*`` calls, Landlock scopes signals to the Guest's own domain, and
  ``/proc`` is hidden.
- Only levels whose confinement the child applies entirely to itself after the fork use
  it (``_isolation.Plan.forkable``); ``rlimits`` spawns.

Protocol: each request is one message, ``{"cwd": path}`` (``namespaces``: also
``"scratch_bytes"``) with four fds by ``SCM_RIGHTS`` (broker socket, stdout and stderr
write ends, a *status* socket). On the status socket the server answers ``pid N`` with a
pidfd of the child (so the Host signals exactly that process, never a recycled pid; under
``namespaces`` the child, the Guest's init, answers itself, adding the pidfd of the Guest
below it, and before it exits sends ``exit S`` with the Guest's raw wait status), and
later ``exit S`` with the child's raw wait status once it has reaped it; then it closes
it (the Host reads the first ``exit``). A server that dies closes every status socket, so no
Host waits on it forever. It exits when the Host closes the control socket.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import gc
import json
import os
import select
import socket
import sys

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4
_SIGKILL = 9
_REQUEST_BYTES = 64 * 1024
_FDS = 4  # broker, stdout, stderr, status
_CHILD_FDS = 5  # a child's own: stdin, stdout, stderr, broker and (``namespaces``) status


def _load_child(root: str, seccomp_library: str | None) -> object:
    """Import ``_child`` (and, through it, everything a Guest imports before it confines)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_pysolate_child", os.path.join(root, "pysolate", "_guest", "child", "_child.py")
    )
    assert spec is not None and spec.loader is not None
    child = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(child)
    child.preload(root, seccomp_library)
    return child


def _receive(control: socket.socket) -> tuple[dict[str, object], list[int]] | None:
    """One request, or None when the Host hung up."""
    fds = array.array("i")
    data, ancillary, _flags, _addr = control.recvmsg(
        _REQUEST_BYTES, socket.CMSG_SPACE(_FDS * fds.itemsize)
    )
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(data), list(fds)


def _close_all_but(keep: list[int]) -> None:
    """Close every fd not in ``keep`` (sorted)."""
    low = 0
    for fd in keep:
        if low < fd:  # (``closerange(n, n)`` would close every fd from n up)
            os.closerange(low, fd)
        low = max(low, fd + 1)
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _become_guest(
    control: socket.socket,
    fds: list[int],
    message: dict[str, object],
    server: select.poll,
    libc: ctypes.CDLL,
    child: object,
    prepared: list[int],
    program: int | None,
) -> None:
    """In the forked (``namespaces``: cloned) child: leave the server behind, then be a
    Guest child (never returns). ``server``: a poll of a pidfd of the server (made by the
    server: an object the child need not create); ``program``: the init's ``_init_elf``
    memfd (``namespaces``), or None."""
    try:
        control.detach()  # its fd is closed below; the object must never close a reused number
        os.setsid()
        if libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0) != 0 or server.poll(0):
            os._exit(70)  # (a server gone before PDEATHSIG was set: nobody would end us)
        broker, stdout, stderr, status = fds
        null = os.open("/dev/null", os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.dup2(broker, 3)
        own_namespaces = isinstance(message.get("scratch_bytes"), int)
        if own_namespaces:
            os.dup2(status, 4)  # the init answers the Host on it (``_unshare``)
        # the control socket, every sibling's fds; the prepared rules' until it confines itself
        kept = [] if program is None else [program]  # (the init's, until it execs it)
        _close_all_but(
            sorted([*range(_CHILD_FDS if own_namespaces else _CHILD_FDS - 1), *prepared, *kept])
        )
        os.chdir(message["cwd"])  # type: ignore[arg-type]
        mechanisms: list[str] = []
        if own_namespaces:
            from pysolate._guest.child import _unshare

            mechanisms = _unshare.enter(4, message["scratch_bytes"], program)  # type: ignore[arg-type]
        sys.argv = [sys.argv[0], "3"]
        child.serve(3, mechanisms)  # type: ignore[attr-defined]
    except BaseException as exc:  # the Host reports it (GuestStartError) with the child's stderr
        with contextlib.suppress(OSError):
            os.write(2, f"the forked child failed before init: {exc!r}\n".encode())
    finally:
        os._exit(70)


def _prepare(control: socket.socket) -> list[int]:
    """Read the Host's first message, ``{"landlock": spec | null, "digest": its name}``, and
    prepare that spec's Landlock rules for every child (``_confine.prepare``); the fds they
    hold, sorted.
    Where they cannot be prepared, none are: a child told to use them then fails closed."""
    setup = json.loads(control.recv(_REQUEST_BYTES) or b"{}")
    spec = setup.get("landlock") if isinstance(setup, dict) else None
    digest = setup.get("digest") if isinstance(setup, dict) else None
    if not spec or not isinstance(digest, str):
        return []
    from pysolate._guest.child import _confine

    try:
        return sorted(_confine.prepare(spec, digest, lowest_fd=_CHILD_FDS))
    except (OSError, ValueError, KeyError, TypeError):
        return []


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    namespaces = sys.argv[2] == "namespaces"
    child = _load_child(root, sys.argv[3] if len(sys.argv) > 3 else None)
    prepared = _prepare(control)
    # (importable once ``_load_child`` registered the packages)
    from pysolate._guest.child import _init_elf, _unshare

    spawn = _unshare.clone if namespaces else os.fork
    program = _init_elf.load(_CHILD_FDS) if namespaces else None  # the inits' program
    gc.freeze()  # the pre-imported heap stays shared with every child (no refcount-touched pages)
    server = select.poll()  # its children check it once they asked to die with it
    server.register(os.pidfd_open(os.getpid()), select.POLLIN)
    children: dict[int, tuple[int, int]] = {}  # pidfd -> (pid, status socket fd)
    poller = select.poll()
    poller.register(control.fileno(), select.POLLIN)
    while True:
        for fd, _events in poller.poll():
            if fd != control.fileno():
                pid, status = children.pop(fd)
                poller.unregister(fd)
                _, wait_status = os.waitpid(pid, 0)
                os.close(fd)
                with contextlib.suppress(OSError):  # the Host may have given up already
                    os.write(status, f"exit {wait_status}".encode())
                os.close(status)
                continue
            request = _receive(control)
            if request is None:
                return  # the Host is gone; our children die with us (PDEATHSIG)
            message, fds = request
            if (
                len(fds) != _FDS
                or not isinstance(message.get("cwd"), str)
                or namespaces != isinstance(message.get("scratch_bytes"), int)
            ):
                for received in fds:
                    os.close(received)
                continue
            try:
                pid = spawn()
            except (
                OSError
            ):  # (out of processes or namespaces) its Host sees the status socket close
                for received in fds:
                    os.close(received)
                continue
            if pid == 0:
                _become_guest(control, fds, message, server, libc, child, prepared, program)
            for received in fds[:3]:
                os.close(received)
            pidfd = os.pidfd_open(pid)
            if namespaces:  # its init answers, once the Guest exists (``_unshare``)
                children[pidfd] = (pid, fds[3])
            else:
                answer = socket.socket(fileno=fds[3])
                with contextlib.suppress(
                    OSError
                ):  # the Host gave up on this start; still reaped below
                    answer.sendmsg(
                        [f"pid {pid}".encode()],
                        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))],
                    )
                children[pidfd] = (pid, answer.detach())
            poller.register(pidfd, select.POLLIN)


if __name__ == "__main__":
    main()
