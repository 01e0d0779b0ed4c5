"""The Guest child's seccomp filter: an allow-list, installed through ``libseccomp`` by ctypes.

Stdlib-only (the child imports it; the few calls we need are five C functions of the
system's ``libseccomp.so.2``). The filter **denies by default**: a syscall not listed in
``ALLOWED`` fails with ENOSYS (what an old kernel answers, so glibc and CPython take their
fallbacks for calls newer than the list — ``clone3``, ``openat2``, ``faccessat2`` — instead
of failing). ``DENIED`` names the calls a program reaching for an escape would try; they
fail with EPERM so the program sees a plain ``PermissionError``:

- new programs or processes: ``execve``, ``fork``, ``clone`` without ``CLONE_THREAD`` or
  with a namespace flag (threads stay allowed), ``setsid``;
- the network and kernel socket buffers: ``socket``, ``socketpair``, ``connect``, ``bind``
  … (the Guest's only socket is the broker's, inherited; asyncio's self-pipe is a pipe in
  the Guest, ``_self_pipe``), and ``getsockopt`` beyond what ``socket.socket(fileno=)``
  asks (never ``SO_PEERCRED``, ``SO_PEERPIDFD``: the Host's pid and a handle on it);
- other processes: ``ptrace``, ``process_vm_*``, every signal not sent to ourselves
  (``kill``/``tgkill`` with another pid, ``tkill``, the ``rt_*sigqueueinfo`` and ``pidfd``
  families), ``kcmp``; ``fcntl`` only with the commands in ``_FCNTLS``, so never
  ``F_SETOWN``/``F_SETOWN_EX``/``F_SETSIG``/``F_SETFL`` with ``O_ASYNC`` (a ``SIGIO`` of
  the program's choice delivered to any pid), ``F_SETLEASE``, ``F_NOTIFY`` or
  ``F_SETPIPE_SZ`` (pipe buffers stay at their default size);
- naming other processes at all: every allowed call that takes a pid (``sched_get*``,
  ``getpgid``, ``getsid``, ``getpriority``, ``get_robust_list``) only for 0 or our own pid
  (ENOSYS else), ``capget`` (its pid is in a struct the filter cannot read) and the
  priority-inheritance ``futex`` operations (their owner is any tid): each answered
  ``ESRCH`` for a pid that does not exist, so with ``F_SETOWN`` they listed every process
  of the machine although ``/proc`` is hidden;
- the kernel's shared state: io_uring (it performs file and network I/O that no other
  rule sees), mount and the new mount API, ``open_by_handle_at``, ``bpf``,
  ``perf_event_open``, ``userfaultfd``, keyrings, ``reboot``, ``sethostname``,
  ``unshare``/``setns``, SysV IPC and POSIX message queues, modules, clocks, swap;
- unaccounted memory: ``memfd_create`` (its pages escape ``RLIMIT_AS``);
- identity and limits: ``set*uid``/``set*gid``/``capset``, ``setrlimit``/``prlimit64``
  with a new value;
- metadata that Landlock does not cover: ``chmod`` (incl. ``fchmodat2``), ``chown``,
  ``utime`` and extended attributes.

With ``restrict_files`` (no Landlock, no mount namespace protects the file system) no file
may be opened for writing, created, renamed, linked or removed at all.

It is one filter, the same for every Guest but for its own pid in the ``kill``/``tgkill``
rules (signals to any other pid fail with EPERM) and the other calls that name a process: compiled to BPF once per process with a
placeholder pid (the fork server compiles it before it forks), each Guest only patches its
pid in and loads it.

``ioctl`` and ``prctl`` are allowed only for the few requests CPython makes. ``libseccomp``
also kills a process that switches syscall ABI (i386/x32), so the list cannot be
sidestepped that way. ``install(..., strict=True)`` kills the process on any syscall the
lists do not name: the compatibility tests use it on every supported interpreter so that a
new Python needing a new syscall fails loudly in a test instead of quietly at a user's.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys
from collections.abc import Callable

_ALLOW = 0x7FFF0000
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_KILL_PROCESS = 0x80000000
_NE, _EQ, _MASKED_EQ = 1, 4, 7

_CLONE_THREAD = 0x00010000
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET."""

_LOW_32 = 0xFFFFFFFF
"""The kernel reads ``int`` arguments (commands, options) from the low half of a register."""
_ATTR_OPTIMIZE, _OPTIMIZE_BINARY_TREE = 8, 2  # SCMP_FLTATR_CTL_OPTIMIZE

ALLOWED = (
    # file descriptors and reading
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "lseek", "close", "close_range", "dup", "dup2", "dup3", "flock", "fsync", "fdatasync",
    "ftruncate", "fallocate", "fadvise64", "sendfile", "copy_file_range",
    "stat", "fstat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "statfs", "fstatfs", "umask",
    # memory
    "mmap", "munmap", "mprotect", "mremap", "brk", "madvise", "msync", "mincore", "membarrier",
    # threads, scheduling, exit
    "futex_waitv", "set_robust_list", "rseq", "set_tid_address", "gettid",
    "sched_yield", "sched_get_priority_max", "sched_get_priority_min", "getcpu", "exit", "exit_group", "restart_syscall", "arch_prctl",
    "wait4", "waitid",
    # signals to ourselves, timers, clocks
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "rt_sigpending", "rt_sigsuspend",
    "rt_sigtimedwait", "pause", "alarm", "setitimer", "getitimer",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "times",
    # identity and limits (read only)
    "getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid", "getresgid",
    "getpgrp", "getrlimit", "getrusage", "sysinfo", "uname", "getrandom",
    # polling, pipes and the inherited broker socket
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2",
    "sendto", "recvfrom", "shutdown", "getsockname", "getpeername",
)
"""Allowed unconditionally (fd-based or harmless)."""

FILE_CHANGES = (
    "creat", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat", "truncate",
)
"""Allowed when Landlock or a read-only mount namespace decides which paths they reach;
EPERM under ``restrict_files``."""

DENIED = (
    "execve", "execveat", "fork", "vfork", "setsid", "setpgid",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
    "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
    "move_mount", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "reboot", "sethostname", "setdomainname", "unshare", "setns",
    "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
    "semtimedop", "semctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "iopl", "ioperm",
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "personality", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "memfd_create", "memfd_secret",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid",
    "setfsgid", "capset", "capget", "setrlimit",
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
    "utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
)
"""EPERM. (Any call not allowed is refused anyway; these get the clearer error.)"""

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
"""An ``open``/``openat`` with any of these bits is refused under ``restrict_files``."""

_IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
"""TCGETS (``isatty``), TIOCGWINSZ, FIONREAD, FIONBIO (``setblocking``), FIONCLEX, FIOCLEX."""

_F_SETFL, _O_ASYNC = 4, 0o20000

_FCNTLS = (0, 1, 2, 3, 5, 6, 7, 9, 11, 36, 37, 38, 1025, 1030, 1032, 1034)
"""``fcntl`` commands allowed (and ``F_SETFL`` without ``O_ASYNC``): F_DUPFD, F_GETFD,
F_SETFD, F_GETFL, the record locks (F_GETLK, F_SETLK, F_SETLKW and the ``F_OFD_*`` three),
F_GETOWN, F_GETSIG, F_GETLEASE, F_DUPFD_CLOEXEC, F_GETPIPE_SZ, F_GET_SEALS. Any other is
ENOSYS; ``_FCNTLS_DENIED`` are EPERM."""

_FCNTLS_DENIED = (8, 10, 15, 1024, 1026, 1031)
"""F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE, F_NOTIFY, F_SETPIPE_SZ."""

_SOL_SOCKET = 1
_SOCKOPTS = (3, 4, 7, 8, 30, 38, 39)
"""``getsockopt(SOL_SOCKET, ...)`` allowed: SO_TYPE, SO_ERROR, SO_SNDBUF, SO_RCVBUF,
SO_ACCEPTCONN, SO_PROTOCOL, SO_DOMAIN (``socket.socket(fileno=)`` asks three of them)."""

_SOCKOPTS_DENIED = (17, 31, 59, 77)
"""SO_PEERCRED, SO_PEERSEC, SO_PEERGROUPS, SO_PEERPIDFD: EPERM."""

_OWN_PID_CALLS = (("sched_getaffinity", 0), ("sched_getparam", 0), ("sched_getscheduler", 0), ("get_robust_list", 0),
                  ("getpgid", 0), ("getsid", 0), ("getpriority", 1))
"""Calls that name a process (by the argument given): allowed for 0 (ourselves) or our pid."""

_FUTEX_CMD = 0x7F
_FUTEXES = (0, 1, 3, 4, 5, 9, 10)
"""``futex`` operations allowed (any flags): WAIT, WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP,
WAIT_BITSET, WAKE_BITSET. The priority-inheritance ones look up the tid in the futex word."""

_PRCTLS = (3, 15, 16, 39, 0x53564D41)
"""PR_GET_DUMPABLE, PR_SET_NAME, PR_GET_NAME (thread names), PR_GET_NO_NEW_PRIVS,
PR_SET_VMA (glibc names its mappings)."""


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


Condition = tuple[int, int, int, int]


_LOADED: dict[str, tuple[ctypes.CDLL, dict[str, int]]] = {}
"""libseccomp and its syscall numbers by library path, once per process (``warm``)."""


def warm(library_path: str) -> None:
    """Load libseccomp, resolve every syscall name and compile the allow-lists now, so
    ``install`` only sets its pid and loads (the fork server does this once for all its
    children)."""
    for restrict_files in (False, True):
        compiled(library_path, restrict_files=restrict_files, strict=False)


def _library(library_path: str) -> tuple[ctypes.CDLL, dict[str, int]]:
    loaded = _LOADED.get(library_path)
    if loaded is not None:
        return loaded
    lib = ctypes.CDLL(library_path, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)
    ]
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_attr_set.restype = ctypes.c_int
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    names = {*ALLOWED, *DENIED, *FILE_CHANGES, "open", "openat", "openat2", "clone", "clone3", "kill", "tgkill",
             "prlimit64", "ioctl", "prctl", "fcntl", "getsockopt", "futex", *(name for name, _ in _OWN_PID_CALLS)}
    numbers = {name: lib.seccomp_syscall_resolve_name(name.encode()) for name in names}
    _LOADED[library_path] = lib, numbers
    return lib, numbers


def install(library_path: str, *, restrict_files: bool, strict: bool = False) -> list[str]:
    """Load the filter into this process (irrevocably); returns the mechanisms applied.

    One filter: the allow-list, compiled once per process (``compiled``; the fork server
    compiles it before it forks) with a placeholder where ``kill``/``tgkill`` compare their
    pid, then that placeholder set to ours. ``strict`` makes every unlisted syscall kill
    the process (tests only, see module docstring). Raises ``OSError`` if the filter cannot
    be built or loaded: the caller must then not run the program.
    """
    template, offsets = compiled(library_path, restrict_files=restrict_files, strict=strict)
    program = bytearray(template)
    own = os.getpid().to_bytes(4, sys.byteorder)
    for at in offsets:
        program[at : at + 4] = own
    _load(bytes(program))
    return ["seccomp-allowlist", "no-fork", "no-sockets", "no-io-uring", "no-memfd", "no-sigio"] + (["no-file-writes"] if restrict_files else [])


_COMPILED: dict[tuple[str, bool, bool], tuple[bytes, tuple[int, ...]]] = {}

_PID_PLACEHOLDERS = (0x7FFFFFFE, 0x7FFFFFFD)
"""Stand for the Guest's pid in the compiled allow-list (above any real pid); it is
compiled with each, and the operands that differ are exactly the pid comparisons."""


def compiled(library_path: str, *, restrict_files: bool, strict: bool) -> tuple[bytes, tuple[int, ...]]:
    """The allow-list as a BPF program with the first placeholder for our pid, and the
    byte offsets of every operand holding it; built by libseccomp once per process.

    Raises ``OSError`` unless the two compilations differ in pid operands alone."""
    key = (library_path, restrict_files, strict)
    if key not in _COMPILED:
        lib, numbers = _library(library_path)
        default = _KILL_PROCESS if strict else _errno_action(errno.ENOSYS)
        first, second = (
            _build(lib, default, functools.partial(_allow_list, restrict_files=restrict_files, pid=pid), numbers) for pid in _PID_PLACEHOLDERS
        )
        if len(first) != len(second):
            raise OSError("the allow-list compiles to different programs for different pids")
        offsets = tuple(at for at in range(0, len(first), 4) if first[at : at + 4] != second[at : at + 4])
        expected = [placeholder.to_bytes(4, sys.byteorder) for placeholder in _PID_PLACEHOLDERS]
        if not offsets or any(at % 8 != 4 or [first[at : at + 4], second[at : at + 4]] != expected for at in offsets):
            raise OSError("the compiled allow-list does not compare the pid where expected")  # only a ``k`` operand may differ
        _COMPILED[key] = first, offsets
    return _COMPILED[key]


Rule = Callable[..., None]


def _allow_list(rule: Rule, *, restrict_files: bool, pid: int) -> None:
    eperm, enosys = _errno_action(errno.EPERM), _errno_action(errno.ENOSYS)
    for name in ALLOWED:
        rule(_ALLOW, name)
    for name in DENIED:
        rule(eperm, name)
    for name in FILE_CHANGES:
        rule(eperm if restrict_files else _ALLOW, name)
    if restrict_files:
        for name, flags_arg in (("open", 1), ("openat", 2)):
            rule(_ALLOW, name, (flags_arg, _MASKED_EQ, _WRITE_FLAGS, 0))
            for bit in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND):
                rule(eperm, name, (flags_arg, _MASKED_EQ, bit, bit))
    else:
        rule(_ALLOW, "open")
        rule(_ALLOW, "openat")
    rule(enosys, "openat2")  # its flags live in a struct the filter cannot read; glibc falls back to openat
    rule(_ALLOW, "clone", (0, _MASKED_EQ, _CLONE_THREAD | _CLONE_NAMESPACES, _CLONE_THREAD))
    rule(eperm, "clone", (0, _MASKED_EQ, _CLONE_THREAD, 0))
    rule(enosys, "clone3")  # flags in a struct too; glibc falls back to clone only on ENOSYS
    for name in ("kill", "tgkill"):  # only to ourselves (``pid``: a placeholder, see ``compiled``)
        rule(_ALLOW, name, (0, _EQ, pid, 0))
        rule(eperm, name, (0, _NE, pid, 0))
    rule(_ALLOW, "prlimit64", (0, _EQ, 0, 0), (2, _EQ, 0, 0))
    rule(eperm, "prlimit64", (2, _NE, 0, 0))
    for name, pid_arg in _OWN_PID_CALLS:  # any other pid: ENOSYS, the same answer whether it exists or not
        rule(_ALLOW, name, (pid_arg, _EQ, 0, 0))
        rule(_ALLOW, name, (pid_arg, _EQ, pid, 0))
    for command in _FCNTLS:
        rule(_ALLOW, "fcntl", (1, _MASKED_EQ, _LOW_32, command))
    for command in _FCNTLS_DENIED:
        rule(eperm, "fcntl", (1, _MASKED_EQ, _LOW_32, command))
    rule(_ALLOW, "fcntl", (1, _MASKED_EQ, _LOW_32, _F_SETFL), (2, _MASKED_EQ, _O_ASYNC, 0))
    rule(eperm, "fcntl", (1, _MASKED_EQ, _LOW_32, _F_SETFL), (2, _MASKED_EQ, _O_ASYNC, _O_ASYNC))
    for option in _SOCKOPTS:
        rule(_ALLOW, "getsockopt", (1, _MASKED_EQ, _LOW_32, _SOL_SOCKET), (2, _MASKED_EQ, _LOW_32, option))
    for option in _SOCKOPTS_DENIED:
        rule(eperm, "getsockopt", (1, _MASKED_EQ, _LOW_32, _SOL_SOCKET), (2, _MASKED_EQ, _LOW_32, option))
    for operation in _FUTEXES:
        rule(_ALLOW, "futex", (1, _MASKED_EQ, _FUTEX_CMD, operation))
    for request in _IOCTLS:
        rule(_ALLOW, "ioctl", (1, _MASKED_EQ, _LOW_32, request))
    for option in _PRCTLS:
        rule(_ALLOW, "prctl", (0, _EQ, option, 0))


def _build(lib: ctypes.CDLL, default: int, rules: Callable[[Rule], object], numbers: dict[str, int]) -> bytes:
    """A filter with ``default`` and the ``rules`` it adds, exported as BPF by libseccomp."""
    ctx = lib.seccomp_init(default)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        # A binary tree of syscall numbers (libseccomp >= 2.5; older ones keep the list):
        # the same filter, but the kernel's per-syscall action cache, built at every load,
        # walks O(log n) instructions per syscall instead of O(n) (load 0.40 -> 0.23 ms).
        lib.seccomp_attr_set(ctx, _ATTR_OPTIMIZE, _OPTIMIZE_BINARY_TREE)
        def rule(action: int, name: str, *conditions: Condition) -> None:
            if action == default:
                return  # libseccomp refuses a rule that repeats the default
            number = numbers.get(name, -1)
            if number < 0:
                return  # not a syscall here (``fork`` on arm64) or newer than libseccomp: denied by default
            array = (_ArgCmp * max(1, len(conditions)))(*[_ArgCmp(*c) for c in conditions])
            rc = lib.seccomp_rule_add_array(ctx, action, number, len(conditions), array)
            if rc < 0:
                raise OSError(-rc, f"seccomp rule for {name}: {os.strerror(-rc)}")

        rules(rule)
        read_end, write_end = os.pipe()
        try:
            rc = lib.seccomp_export_bpf(ctx, write_end)
            os.close(write_end)
            write_end = -1
            if rc < 0:
                raise OSError(-rc, f"seccomp_export_bpf: {os.strerror(-rc)}")
            chunks = []
            while chunk := os.read(read_end, 65536):
                chunks.append(chunk)
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
    finally:
        lib.seccomp_release(ctx)
    program = b"".join(chunks)
    if not program or len(program) % 8:
        raise OSError("seccomp_export_bpf returned no program")
    return program


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_LIBC = ctypes.CDLL(None, use_errno=True)
"""This module's own handle, made at import (a fork server's children inherit it ready)."""
_LIBC.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]


def _load(program: bytes) -> None:
    """Install one BPF filter (``no_new_privs`` is already set: ``_privileges.drop``)."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    if _LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_SECCOMP): {os.strerror(code)}")
