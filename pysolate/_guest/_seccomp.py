"""The Guest child's seccomp filter, installed through the system's ``libseccomp`` by ctypes.

Stdlib-only (the child imports it; no ``pyseccomp`` dependency: the few calls we need are
five C functions). The filter is a deny-list on top of the default-allow CPython needs:

- no new programs or processes: ``execve``/``execveat``, ``fork``/``vfork`` and ``clone``
  without ``CLONE_THREAD`` fail with EPERM; ``clone3`` fails with ENOSYS (its flags live
  in a struct the filter cannot read, and glibc falls back to ``clone`` only on ENOSYS, so
  threads still work);
- no sockets: ``socket``, ``socketpair``, ``connect``, ``bind``, ``listen``, ``accept``;
  the broker socket was inherited already open and stays usable;
- no reaching other processes or loosening the limits: ``ptrace``, ``process_vm_*``,
  ``kill``/``tgkill`` of any pid but our own, ``setrlimit``/``prlimit64`` with a new value,
  namespace and mount calls, ``bpf``, ``perf_event_open``, ``userfaultfd``, keyrings;
- with ``restrict_files`` (used when no mount namespace makes the file system read-only):
  no opening for write, creating, renaming, deleting, linking or chmod-ing files at all.

``libseccomp`` sets ``no_new_privs`` and kills on a foreign syscall ABI (i386/x32), so the
deny-list cannot be sidestepped by switching ABI. Prior art: Flatpak's and Docker's default
profiles (deny-lists over default-allow), and the research notes on ``clone3``.
"""

from __future__ import annotations

import ctypes
import errno
import os

_ALLOW = 0x7FFF0000
_NE, _EQ, _MASKED_EQ = 1, 4, 7
_CLONE_THREAD = 0x00010000


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


_DENIED = (
    "execve", "execveat", "fork", "vfork",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "ptrace", "process_vm_readv", "process_vm_writev", "tkill", "setrlimit",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
)
"""Calls that always fail with EPERM."""

_FILE_WRITES = (
    "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
    "rmdir", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat",
    "chown", "fchown", "lchown", "fchownat", "truncate", "mknod", "mknodat", "utime",
    "utimes", "utimensat", "futimesat",
)
"""File-changing calls denied under ``restrict_files``."""

_WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)
"""An ``open``/``openat`` with any of these bits is refused under ``restrict_files``."""


def install(library_path: str, *, restrict_files: bool) -> None:
    """Load the filter into this process (irrevocably). Raises ``OSError`` if it cannot."""
    lib = ctypes.CDLL(library_path, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)
    ]
    lib.seccomp_load.restype = ctypes.c_int
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]

    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        def rule(action: int, name: str, *conditions: tuple[int, int, int, int]) -> None:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                return  # not a syscall on this architecture (e.g. ``fork`` on arm64)
            array = (_ArgCmp * max(1, len(conditions)))(*[_ArgCmp(*c) for c in conditions])
            rc = lib.seccomp_rule_add_array(ctx, action, number, len(conditions), array)
            if rc < 0:
                raise OSError(-rc, f"seccomp rule for {name}: {os.strerror(-rc)}")

        eperm = _errno_action(errno.EPERM)
        for name in _DENIED:
            rule(eperm, name)
        rule(eperm, "clone", (0, _MASKED_EQ, _CLONE_THREAD, 0))
        rule(_errno_action(errno.ENOSYS), "clone3")
        pid = os.getpid()
        rule(eperm, "kill", (0, _NE, pid, 0))
        rule(eperm, "tgkill", (0, _NE, pid, 0))
        rule(eperm, "prlimit64", (2, _NE, 0, 0))
        if restrict_files:
            rule(_errno_action(errno.ENOSYS), "openat2")  # flags in a struct: make glibc use openat
            for name, flags_arg in (("open", 1), ("openat", 2)):
                for bit in _WRITE_FLAGS:
                    rule(eperm, name, (flags_arg, _MASKED_EQ, bit, bit))
            for name in _FILE_WRITES:
                rule(eperm, name)
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise OSError(-rc, f"seccomp_load: {os.strerror(-rc)}")
    finally:
        lib.seccomp_release(ctx)
