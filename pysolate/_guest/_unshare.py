"""A forked ``namespaces`` Guest makes its own namespaces, inside the fork server's sandbox.

The ``namespaces`` fork server runs inside the bubblewrap sandbox a spawned Guest gets
(only ``/usr``, the interpreter, the child's sources, a read-only root, no network, no
capabilities). That sandbox's namespaces are shared by the server and everything it forks,
so each forked child, before it reads anything from the Host, calls ``enter``:

1. ``unshare`` a fresh **user, mount, pid, net, ipc, uts and cgroup** namespace at once,
   mapping only its own uid (``nobody`` inside bubblewrap, and again ``nobody`` here: a
   root Host lends no uid 0) with ``setgroups`` denied. This process, the *reaper*, stays
   outside the new pid namespace, holds nothing but a pipe, and ends exactly as the Guest
   ended (its raw wait status; a signal re-raised, so ``SIGXCPU`` — the CPU limit — and
   crashes reach the Host as from any forked child). It is what the Host waits on and kills.
2. ``fork`` the *init*: pid 1 of the new pid namespace. It dies with the reaper
   (``PR_SET_PDEATHSIG``, checked against a pidfd of the reaper, so a reaper already gone
   is noticed), covers ``/proc`` (the server's pid namespace: its siblings) with an empty
   read-only tmpfs, mounts the Guest's own size-bounded ``/tmp`` over the server's and
   forks the Guest. It hands the Host, on the request's status socket, pidfds of the
   reaper, of itself (the Host's wait ends only once it is gone, and with it the whole
   pid namespace) and of the Guest (whose Host pid goes into its cgroup before ``init``),
   drops its capabilities, keeps no other fd, and tells the reaper the Guest's status.
   When it dies the kernel kills everything in the pid namespace.
3. The Guest is pid 2, not 1: pid 1 of a namespace ignores every signal it has no handler
   for, so as pid 1 the CPU limit's ``SIGXCPU`` would be ignored (the hard limit's
   ``SIGKILL`` would end it as a crash instead). It becomes its own session, moves into
   its ``/tmp``, drops every capability its user namespace gave it, and is then a Guest
   child like any other (``_child.serve``: ``init``, the same ``_confine`` spec, ``ready``).

So two forked Guests share no pid, net, ipc, uts, mount or user namespace, no ``/tmp``,
and none with the server (``tests/pysolate/test_fork_namespaces.py`` compares the
``/proc/<pid>/ns/*`` inodes from the Host). Standard library only, like ``_child``.
"""

from __future__ import annotations

import array
import contextlib
import os
import select
import signal
import socket
from typing import NoReturn

from . import _privileges

_CLONE_NEWNS, _CLONE_NEWCGROUP, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_NAMESPACES = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS | _CLONE_NEWCGROUP
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_PR_SET_PDEATHSIG, _SIGKILL = 1, 9
_EXIT_FAILED = 70

MECHANISMS = ["own-namespaces", "userns-nobody", "private-proc", "bounded-scratch"]
"""What ``enter`` reports (``_isolation.FORKED_NAMESPACES`` requires all of it)."""


def enter(status: int, scratch_bytes: int) -> list[str]:
    """In a just-forked child (fds 0-3 its own, ``status`` the request's status socket):
    fresh namespaces, an init, the Guest. Returns the mechanisms in the Guest; the reaper
    and the init never return (see module docstring)."""
    libc = _privileges._libc()
    uid, gid = os.getuid(), os.getgid()
    _privileges._check(libc.unshare(_NAMESPACES), "unshare(user, mount, pid, net, ipc, uts, cgroup)")
    _privileges._write("/proc/self/setgroups", "deny")
    _privileges._write("/proc/self/uid_map", f"{_privileges.NOBODY} {uid} 1")
    _privileges._write("/proc/self/gid_map", f"{_privileges.NOBODY} {gid} 1")
    reaper = os.pidfd_open(os.getpid())
    told_r, told_w = os.pipe()  # the init tells the reaper the Guest's raw wait status
    if os.fork() != 0:
        os.close(told_w)
        _reap(told_r)
    os.close(told_r)
    if libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0) != 0 or _exited(reaper):
        os._exit(_EXIT_FAILED)  # (a reaper gone before PDEATHSIG was set: nobody would end us)
    hidden = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _privileges._check(libc.mount(b"tmpfs", b"/proc", b"tmpfs", hidden, b"size=4k,mode=0555"), "hide /proc")
    nobody = _privileges.NOBODY
    options = f"size={scratch_bytes},mode=0700,uid={nobody},gid={nobody}".encode()
    _privileges._check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options), "mount /tmp")
    os.chdir("/tmp")
    guest = os.fork()
    if guest != 0:
        _init(libc, status, reaper, guest, told_w)
    for fd in (status, reaper, told_w):
        os.close(fd)
    os.setsid()
    _privileges._empty_bounding_set(libc)
    _privileges._clear_capabilities(libc)  # the new user namespace gave us all of them
    return list(MECHANISMS)


def _exited(pidfd: int) -> bool:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _init(libc: object, status: int, reaper: int, guest: int, told: int) -> NoReturn:
    """Pid 1 of the Guest's pid namespace: hand the Host the reaper's and the Guest's
    pidfds, keep nothing else, tell the reaper how the Guest ended."""
    try:
        _privileges._clear_capabilities(libc)  # type: ignore[arg-type]
        low = 0  # the Guest's stdio, broker socket and prepared Landlock rules are the Guest's alone
        for fd in sorted((status, reaper, told)):
            if low < fd:  # (``closerange(n, n)`` would close every fd from n up)
                os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, os.sysconf("SC_OPEN_MAX"))
        own, theirs = os.pidfd_open(os.getpid()), os.pidfd_open(guest)
        answer = socket.socket(fileno=status)
        with contextlib.suppress(OSError):  # the Host gave up on this start: still reported below
            answer.sendmsg([f"pid {guest}".encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [reaper, own, theirs]))])
        answer.close()
        for fd in (reaper, own, theirs):
            os.close(fd)
        _, wait_status = os.waitpid(guest, 0)
        os.write(told, str(wait_status).encode())
    finally:
        os._exit(0)


def _reap(told: int) -> NoReturn:
    """Outside the Guest's pid namespace: end as the Guest ended (its raw wait status, a
    signal re-raised), or as the init did if it died first."""
    try:
        os.closerange(0, told)  # the Guest's stdio, broker and status sockets, the own pidfd
        os.closerange(told + 1, os.sysconf("SC_OPEN_MAX"))
        report = b""
        while chunk := os.read(told, 64):
            report += chunk
        _, wait_status = os.wait()
        if report:
            wait_status = int(report)
        if os.WIFSIGNALED(wait_status):
            sig = os.WTERMSIG(wait_status)
            with contextlib.suppress(OSError, ValueError):  # SIGKILL's disposition cannot change
                signal.signal(sig, signal.SIG_DFL)  # Python ignores SIGXFSZ and SIGPIPE
            os.kill(os.getpid(), sig)
            os._exit(128 + sig)  # a signal whose default is to ignore it (none kills a Guest)
        os._exit(os.waitstatus_to_exitcode(wait_status))
    finally:
        os._exit(_EXIT_FAILED)
