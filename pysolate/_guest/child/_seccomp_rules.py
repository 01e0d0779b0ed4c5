"""The rules of the Guest child's seccomp filter: which syscalls, with which arguments.

Data and one function that states them (``allow_list``); ``_seccomp`` compiles them with
``libseccomp`` and installs the result. Stdlib-only: the child imports it. The filter
**denies by default**: a syscall not listed in
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

``ioctl`` and ``prctl`` are allowed only for the few requests CPython makes.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

ALLOW = 0x7FFF0000
"""libseccomp's ``SCMP_ACT_ALLOW``."""
_NE, _EQ, _MASKED_EQ = 1, 4, 7

_CLONE_THREAD = 0x00010000
_CLONE_NAMESPACES = (
    0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET."""

_LOW_32 = 0xFFFFFFFF
"""The kernel reads ``int`` arguments (commands, options) from the low half of a register."""


ALLOWED = (
    # file descriptors and reading
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "lseek",
    "close",
    "close_range",
    "dup",
    "dup2",
    "dup3",
    "flock",
    "fsync",
    "fdatasync",
    "ftruncate",
    "fallocate",
    "fadvise64",
    "sendfile",
    "copy_file_range",
    "stat",
    "fstat",
    "lstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
    "getdents",
    "getdents64",
    "getcwd",
    "chdir",
    "fchdir",
    "statfs",
    "fstatfs",
    "umask",
    # memory
    "mmap",
    "munmap",
    "mprotect",
    "mremap",
    "brk",
    "madvise",
    "msync",
    "mincore",
    "membarrier",
    # threads, scheduling, exit
    "futex_waitv",
    "set_robust_list",
    "rseq",
    "set_tid_address",
    "gettid",
    "sched_yield",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "getcpu",
    "exit",
    "exit_group",
    "restart_syscall",
    "arch_prctl",
    "wait4",
    "waitid",
    # signals to ourselves, timers, clocks
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "rt_sigpending",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "pause",
    "alarm",
    "setitimer",
    "getitimer",
    "clock_gettime",
    "clock_getres",
    "clock_nanosleep",
    "nanosleep",
    "gettimeofday",
    "time",
    "times",
    # identity and limits (read only)
    "getpid",
    "getppid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getgroups",
    "getresuid",
    "getresgid",
    "getpgrp",
    "getrlimit",
    "getrusage",
    "sysinfo",
    "uname",
    "getrandom",
    # polling, pipes and the inherited broker socket
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "eventfd",
    "eventfd2",
    "pipe",
    "pipe2",
    "sendto",
    "recvfrom",
    "shutdown",
    "getsockname",
    "getpeername",
)
"""Allowed unconditionally (fd-based or harmless)."""

FILE_CHANGES = (
    "creat",
    "mkdir",
    "mkdirat",
    "rmdir",
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "truncate",
)
"""Allowed when Landlock or a read-only mount namespace decides which paths they reach;
EPERM under ``restrict_files``."""

DENIED = (
    "execve",
    "execveat",
    "fork",
    "vfork",
    "setsid",
    "setpgid",
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "kcmp",
    "tkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "open_tree",
    "move_mount",
    "mount_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "reboot",
    "sethostname",
    "setdomainname",
    "unshare",
    "setns",
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "iopl",
    "ioperm",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "personality",
    "vhangup",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "memfd_create",
    "memfd_secret",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "setfsuid",
    "setfsgid",
    "capset",
    "capget",
    "setrlimit",
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "mknod",
    "mknodat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
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

_OWN_PID_CALLS = (
    ("sched_getaffinity", 0),
    ("sched_getparam", 0),
    ("sched_getscheduler", 0),
    ("get_robust_list", 0),
    ("getpgid", 0),
    ("getsid", 0),
    ("getpriority", 1),
)
"""Calls that name a process (by the argument given): allowed for 0 (ourselves) or our pid."""

_FUTEX_CMD = 0x7F
_FUTEXES = (0, 1, 3, 4, 5, 9, 10)
"""``futex`` operations allowed (any flags): WAIT, WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP,
WAIT_BITSET, WAKE_BITSET. The priority-inheritance ones look up the tid in the futex word."""

_PRCTLS = (3, 15, 16, 39, 0x53564D41)
"""PR_GET_DUMPABLE, PR_SET_NAME, PR_GET_NAME (thread names), PR_GET_NO_NEW_PRIVS,
PR_SET_VMA (glibc names its mappings)."""


def errno_action(code: int) -> int:
    """libseccomp's ``SCMP_ACT_ERRNO(code)``: the call fails with ``code``."""
    return 0x00050000 | (code & 0xFFFF)


Condition = tuple[int, int, int, int]
"""An argument comparison: (argument index, operator, datum, second datum)."""

Rule = Callable[..., None]
"""Adds one rule: ``rule(action, syscall_name, *conditions)``."""


def allow_list(rule: Rule, *, restrict_files: bool, pid: int) -> None:
    """State the whole filter through ``rule``: ``pid`` is the Guest's own (or a placeholder)."""
    eperm, enosys = errno_action(errno.EPERM), errno_action(errno.ENOSYS)
    for name in ALLOWED:
        rule(ALLOW, name)
    for name in DENIED:
        rule(eperm, name)
    for name in FILE_CHANGES:
        rule(eperm if restrict_files else ALLOW, name)
    if restrict_files:
        for name, flags_arg in (("open", 1), ("openat", 2)):
            rule(ALLOW, name, (flags_arg, _MASKED_EQ, _WRITE_FLAGS, 0))
            for bit in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND):
                rule(eperm, name, (flags_arg, _MASKED_EQ, bit, bit))
    else:
        rule(ALLOW, "open")
        rule(ALLOW, "openat")
    rule(
        enosys, "openat2"
    )  # its flags live in a struct the filter cannot read; glibc falls back to openat
    rule(ALLOW, "clone", (0, _MASKED_EQ, _CLONE_THREAD | _CLONE_NAMESPACES, _CLONE_THREAD))
    rule(eperm, "clone", (0, _MASKED_EQ, _CLONE_THREAD, 0))
    rule(enosys, "clone3")  # flags in a struct too; glibc falls back to clone only on ENOSYS
    for name in ("kill", "tgkill"):  # only to ourselves (``pid``: a placeholder, see ``compiled``)
        rule(ALLOW, name, (0, _EQ, pid, 0))
        rule(eperm, name, (0, _NE, pid, 0))
    rule(ALLOW, "prlimit64", (0, _EQ, 0, 0), (2, _EQ, 0, 0))
    rule(eperm, "prlimit64", (2, _NE, 0, 0))
    for (
        name,
        pid_arg,
    ) in _OWN_PID_CALLS:  # any other pid: ENOSYS, the same answer whether it exists or not
        rule(ALLOW, name, (pid_arg, _EQ, 0, 0))
        rule(ALLOW, name, (pid_arg, _EQ, pid, 0))
    for command in _FCNTLS:
        rule(ALLOW, "fcntl", (1, _MASKED_EQ, _LOW_32, command))
    for command in _FCNTLS_DENIED:
        rule(eperm, "fcntl", (1, _MASKED_EQ, _LOW_32, command))
    rule(ALLOW, "fcntl", (1, _MASKED_EQ, _LOW_32, _F_SETFL), (2, _MASKED_EQ, _O_ASYNC, 0))
    rule(eperm, "fcntl", (1, _MASKED_EQ, _LOW_32, _F_SETFL), (2, _MASKED_EQ, _O_ASYNC, _O_ASYNC))
    for option in _SOCKOPTS:
        rule(
            ALLOW,
            "getsockopt",
            (1, _MASKED_EQ, _LOW_32, _SOL_SOCKET),
            (2, _MASKED_EQ, _LOW_32, option),
        )
    for option in _SOCKOPTS_DENIED:
        rule(
            eperm,
            "getsockopt",
            (1, _MASKED_EQ, _LOW_32, _SOL_SOCKET),
            (2, _MASKED_EQ, _LOW_32, option),
        )
    for operation in _FUTEXES:
        rule(ALLOW, "futex", (1, _MASKED_EQ, _FUTEX_CMD, operation))
    for request in _IOCTLS:
        rule(ALLOW, "ioctl", (1, _MASKED_EQ, _LOW_32, request))
    for option in _PRCTLS:
        rule(ALLOW, "prctl", (0, _EQ, option, 0))
