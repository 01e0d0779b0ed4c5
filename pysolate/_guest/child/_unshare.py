"""A forked ``namespaces`` Guest gets namespaces of its own, inside the fork server's sandbox.

The ``namespaces`` fork server runs inside the bubblewrap sandbox a spawned Guest gets
(only ``/usr``, the interpreter, the child's sources, a read-only root, no network, no
capabilities). That sandbox's namespaces are shared by the server and everything it
forks, so the server starts each Guest's first process with ``clone`` (``clone``, below)
instead of ``fork``: in a fresh **user, mount, pid, net, ipc, uts and cgroup** namespace
at once, all owned by the new user namespace. Two processes per Guest, no more:

1. The *init*, pid 1 of the new pid namespace and the server's own child (so the server
   reaps it, and the Host kills it through the pidfd the server holds: killing a pid
   namespace's init ends everything in it). Before it reads anything from the Host
   (``enter``) it maps only its own uid (``nobody`` inside bubblewrap, and again
   ``nobody`` here: a root Host lends no uid 0) with ``setgroups`` denied, covers
   ``/proc`` (the server's pid namespace: its siblings) with an empty read-only tmpfs,
   mounts the Guest's own size-bounded ``/tmp`` over the server's and forks the Guest. It
   hands the Host, on the request's status socket, pidfds of itself (what the Host waits
   on and kills) and of the Guest (whose Host pid goes into its cgroup before ``init``),
   drops its capabilities, keeps no fd but the status socket, and once the Guest has
   ended sends ``exit S`` there with the Guest's *raw* wait status, before it exits. On
   x86_64 that waiting is done by a 305-byte static program (``_init_elf``) the init
   execs once the Host holds the pidfds, so no Python address space stays behind per
   Guest (1.3-1.4 MiB of PSS each); elsewhere, or if the exec fails, by Python. The
   server's own ``exit`` (the init's status) comes after it, so the Host's first message
   is the Guest's: ``SIGXCPU`` (the CPU limit) and crashes reach it exactly as from any
   forked child. Only if the init was killed first (the Host's kill, the server's death:
   ``PR_SET_PDEATHSIG``) is the first message the server's ``SIGKILL``.
2. The Guest is pid 2, not 1: pid 1 of a namespace ignores every signal it has no handler
   for, so as pid 1 the CPU limit's ``SIGXCPU`` would be ignored (the hard limit's
   ``SIGKILL`` would end it as a crash instead). It becomes its own session, moves into
   its ``/tmp``, drops every capability its user namespace gave it, and is then a Guest
   child like any other (``_child.serve``: ``init``, the same ``_confine`` spec, ``ready``).

Until 2026-12 a third process sat above the init: the server's forked child called
``unshare`` (which cannot move the caller itself into a new pid namespace) and stayed
outside as a *reaper* that re-raised the Guest's status. ``clone`` makes the init the
server's child directly: one fork, one exit and one copy-on-write address space fewer.

So two forked Guests share no pid, net, ipc, uts, mount or user namespace, no ``/tmp``,
and none with the server (``tests/pysolate/test_fork_namespaces.py`` compares the
``/proc/<pid>/ns/*`` inodes from the Host). Standard library only, like ``_child``.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import os
import signal
import socket
from typing import NoReturn

from . import _init_elf, _privileges

_CLONE_NEWNS, _CLONE_NEWCGROUP, _CLONE_NEWUTS, _CLONE_NEWIPC = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
)
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_NAMESPACES = (
    _CLONE_NEWUSER
    | _CLONE_NEWNS
    | _CLONE_NEWPID
    | _CLONE_NEWNET
    | _CLONE_NEWIPC
    | _CLONE_NEWUTS
    | _CLONE_NEWCGROUP
)
_SYS_CLONE3 = 435  # the same number on every architecture (the unified syscall table)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8

MECHANISMS = ["own-namespaces", "userns-nobody", "private-proc", "bounded-scratch"]
"""What ``enter`` reports (``_isolation.FORKED_NAMESPACES`` requires all of it)."""


class _CloneArgs(ctypes.Structure):
    """``struct clone_args`` (``clone3``), version 0 plus ``set_tid`` and ``cgroup``."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "flags",
            "pidfd",
            "child_tid",
            "parent_tid",
            "exit_signal",
            "stack",
            "stack_size",
            "tls",
            "set_tid",
            "set_tid_size",
            "cgroup",
        )
    ]


_HELD = ctypes.PyDLL(None, use_errno=True)
"""libc called *with* the GIL held (as ``os.fork`` calls ``fork``): no other thread can run
between ``PyOS_BeforeFork`` and the clone."""
_SYSCALL = _HELD.syscall
_SYSCALL.restype = ctypes.c_long
_BEFORE_FORK, _AFTER_FORK_CHILD, _AFTER_FORK_PARENT = (
    getattr(ctypes.pythonapi, name)
    for name in ("PyOS_BeforeFork", "PyOS_AfterFork_Child", "PyOS_AfterFork_Parent")
)
for _hook in (_BEFORE_FORK, _AFTER_FORK_CHILD, _AFTER_FORK_PARENT):
    _hook.restype = None
_ARGS = _CloneArgs(flags=_NAMESPACES, exit_signal=signal.SIGCHLD)
_ARGS_REFERENCE, _ARGS_SIZE = ctypes.byref(_ARGS), ctypes.c_size_t(ctypes.sizeof(_ARGS))
"""All of the call made once, in the server: every object the child creates or first looks
up after the clone is a copy-on-write fault in it (≈ 75 of them measured for these)."""


def clone() -> int:
    """In the fork server: ``os.fork`` into fresh namespaces (see module docstring); the
    child's pid, 0 in the child. Raises ``OSError``.

    ``clone3`` with no stack behaves as ``fork`` does (a copy of the caller's stack), and
    CPython's own fork hooks run around it (``PyOS_BeforeFork`` and the after-fork ones:
    the import lock, the GIL's state, ``os.register_at_fork`` callbacks). glibc's own fork
    handling is skipped: the init keeps the server's thread id in its thread descriptor,
    which only glibc's owner-recording mutexes (the dynamic linker's, for ``dlsym``) compare,
    to the same stale value on lock and unlock in a process of one thread; the Guest below
    it comes from a real ``os.fork``, which resets all of it. Needs Linux 5.3, as
    ``pidfd_open`` does."""
    _BEFORE_FORK()
    pid = _SYSCALL(_SYS_CLONE3, _ARGS_REFERENCE, _ARGS_SIZE)
    if pid == 0:
        _AFTER_FORK_CHILD()
        return 0
    code = ctypes.get_errno()
    _AFTER_FORK_PARENT()
    if pid < 0:
        raise OSError(code, f"clone3(user, mount, pid, net, ipc, uts, cgroup): {os.strerror(code)}")
    return int(pid)


_MAPS = (
    ("/proc/self/setgroups", "deny"),
    ("/proc/self/uid_map", f"{_privileges.NOBODY} {os.getuid()} 1"),
    ("/proc/self/gid_map", f"{_privileges.NOBODY} {os.getgid()} 1"),
)
"""Only the server's uid and gid, as ``nobody``: read at import, in the server (a cloned
child, in a user namespace not mapped yet, sees neither)."""


def enter(status: int, scratch_bytes: int, program: int | None) -> list[str]:
    """In the init, just cloned by the server (fds 0-3 the Guest's, ``status`` the request's
    status socket, ``program`` the server's ``_init_elf`` memfd or None): the mounts, then the
    Guest. Returns the mechanisms in the Guest; the init never returns (see module docstring)."""
    libc = _privileges._libc()
    for path, text in _MAPS:
        _privileges._write(path, text)
    hidden = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _privileges._check(
        libc.mount(b"tmpfs", b"/proc", b"tmpfs", hidden, b"size=4k,mode=0555"), "hide /proc"
    )
    nobody = _privileges.NOBODY
    options = f"size={scratch_bytes},mode=0700,uid={nobody},gid={nobody}".encode()
    _privileges._check(
        libc.mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options),
        "mount /tmp",
    )
    os.chdir("/tmp")
    guest = os.fork()
    if guest != 0:
        _init(libc, status, guest, program)
    os.close(status)
    if program is not None:
        os.close(program)
    os.setsid()
    _privileges._empty_bounding_set(libc)
    _privileges._clear_capabilities(libc)  # the new user namespace gave us all of them
    return list(MECHANISMS)


def _init(libc: object, status: int, guest: int, program: int | None) -> NoReturn:
    """Pid 1 of the Guest's pid namespace: hand the Host its own and the Guest's pidfds,
    keep nothing else, become ``program`` (``_init_elf``: the same wait and answer without
    a Python address space), or else tell the Host itself how the Guest ended."""
    try:
        _privileges._clear_capabilities(libc)  # type: ignore[arg-type]
        os.dup2(status, 0)  # the status socket is fd 0 from here on (the program's too)
        # the Guest's stdio, broker socket and prepared Landlock rules are the Guest's alone
        keep = 0 if program is None else program
        os.closerange(1, keep)
        os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
        own, theirs = os.pidfd_open(os.getpid()), os.pidfd_open(guest)
        answer = socket.socket(fileno=0)
        with contextlib.suppress(OSError):  # the Host gave up on this start: it kills us
            answer.sendmsg(
                [f"pid {guest}".encode()],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [own, theirs]))],
            )
        os.close(own)
        os.close(theirs)
        if program is not None:
            _init_elf.execute(program, guest)  # returns only if the exec failed
        _, wait_status = os.waitpid(guest, 0)
        with contextlib.suppress(OSError):  # nobody is listening any more
            answer.send(f"exit {wait_status}".encode())
    finally:
        os._exit(0)
