"""Landlock for the Guest child: read only what the interpreter needs, write only scratch.

Landlock (Linux >= 5.13) lets an unprivileged process restrict itself, irrevocably, for
itself and every thread and process it later creates. The child calls ``restrict`` after
its own start-up and before the program runs, through the raw syscalls (ctypes, no
dependency; the numbers are the same on every architecture, from the unified table).

What a ruleset handles is denied unless a rule allows it, so the child handles every
file-system right its kernel knows (``ABI`` decides which) and allows:

- read (files and directory listings) beneath each ``read`` path — the interpreter's
  standard library entries, the shared-library directories, the child's own sources,
  ``/dev/null`` and ``/dev/urandom``;
- every file right beneath each ``write`` path — the Guest's private scratch directory;
- nothing else: no ``execve`` anywhere (``EXECUTE`` is handled and never granted), no
  ``/proc``, ``/etc``, home, ``/dev/shm`` or work tree;
- from ABI 4 no TCP bind or connect (network rights handled, no port allowed);
- from ABI 6 no abstract unix socket and no signal outside the Guest's own domain
  (``scoped``), which also stops ``rt_sigqueueinfo`` and ``pidfd_send_signal``.

Landlock does not cover metadata (``stat``, ``chmod``, ``chown``, ``utime``, xattrs),
socket creation, pathname unix sockets or ``fork``: the seccomp filter does (``_seccomp``).
Prior art: the kernel's ``samples/landlock/sandboxer.c`` and the Landlock user docs.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2  # ABI 6

READ = _READ_FILE | _READ_DIR
"""What a ``read`` path allows."""

_FILE_RIGHTS = _READ_FILE | _WRITE_FILE | _TRUNCATE | _IOCTL_DEV
"""The subset of rights a rule on a file (not a directory) may hold."""

_O_PATH = 0o10000000


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed))
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_LIBC = ctypes.CDLL(None, use_errno=True)
"""This module's own handle (loaded at import, so a forked child does not load it again)."""
_LIBC.syscall.restype = ctypes.c_long
_CREATE_RULESET_NR, _ADD_RULE_NR, _RESTRICT_SELF_NR = (
    ctypes.c_long(_CREATE_RULESET),
    ctypes.c_long(_ADD_RULE),
    ctypes.c_long(_RESTRICT_SELF),
)


def abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is missing or disabled."""
    version = _LIBC.syscall(
        _CREATE_RULESET_NR, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    return max(0, int(version))


def _handled_fs(version: int) -> int:
    rights = _FS_ABI1
    if version >= 2:
        rights |= _REFER
    if version >= 3:
        rights |= _TRUNCATE
    if version >= 5:
        rights |= _IOCTL_DEV
    return rights


class Prepared:
    """The read and list rules, opened once: an ``O_PATH`` fd and its rights per path.

    A fork server prepares them once, so each forked child only adds them to a ruleset of
    its own (no path walk, no ``open``, no ``fstat`` per rule): the same rules a child that
    opened the paths itself would add, on the inodes the paths named when the server
    started. The child closes them (``close``) before the program runs.
    """

    def __init__(
        self,
        read: Sequence[str],
        *,
        version: int,
        list_only: Sequence[str] = (),
        lowest_fd: int = 0,
    ) -> None:
        found = abi()
        if found < max(1, version):
            raise OSError(f"Landlock ABI {found} is below the {version} the Host planned for")
        self.version = version
        self.handled = _handled_fs(version)
        self._lowest_fd = lowest_fd  # a forked child's own fds (stdio, broker...) sit below it
        self.fds: list[int] = []
        self._rules: list[_PathBeneathAttr] = []
        try:
            for paths, allowed in ((list_only, _READ_DIR), (read, READ)):
                for path in paths:
                    self._open(path, allowed)
        except BaseException:
            self.close()
            raise

    def _open(self, path: str, allowed: int) -> None:
        """Hold ``path`` (a missing path is skipped: nothing to reach)."""
        try:
            fd = os.open(path, _O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        if fd < self._lowest_fd:
            import fcntl

            try:
                moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, self._lowest_fd)
            finally:
                os.close(fd)
            fd = moved
        self.fds.append(fd)
        allowed &= self.handled
        if os.fstat(fd).st_mode & 0o170000 != 0o040000:
            allowed &= _FILE_RIGHTS  # directory rights on a file are EINVAL
        self._rules.append(_PathBeneathAttr(allowed, fd))

    def restrict(self, write: Sequence[str]) -> list[str]:
        """Restrict this process to the prepared rules plus every file right but
        ``EXECUTE`` beneath each ``write`` path (opened now: a scratch tmpfs is mounted
        after the server prepared its rules, and Landlock sees only the mount on top);
        irrevocable. Returns the mechanisms applied; raises ``OSError`` if any step fails
        (the caller must then not run the program: a half-applied ruleset is never trusted).
        """
        if abi() < max(1, self.version):  # a kernel that lies about it fails here, not later
            raise OSError(f"Landlock ABI {abi()} is below the {self.version} the Host planned for")
        version, handled = self.version, self.handled
        attr = _RulesetAttr(handled, 0, 0)
        size = ctypes.sizeof(ctypes.c_uint64)  # ABI 1-3 kernels only know the first field
        mechanisms = [f"landlock-abi{version}", "landlock-fs", "no-exec"]
        if version >= 4:
            attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
            size = 2 * ctypes.sizeof(ctypes.c_uint64)
            mechanisms.append("landlock-no-tcp")
        if version >= 6:
            attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
            size = ctypes.sizeof(_RulesetAttr)
            mechanisms.append("landlock-scoped")
        syscall = _LIBC.syscall
        ruleset = int(
            syscall(
                _CREATE_RULESET_NR, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
            )
        )
        if ruleset < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"landlock_create_ruleset: {os.strerror(code)}")
        try:
            number, fd_arg, beneath, zero = (
                _ADD_RULE_NR,
                ctypes.c_int(ruleset),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.c_uint32(0),
            )
            for rule in self._rules:
                if syscall(number, fd_arg, beneath, ctypes.byref(rule), zero) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, f"landlock_add_rule: {os.strerror(code)}")
            for path in write:
                _add_rule(ruleset, path, handled & ~_EXECUTE, handled)
            if syscall(_RESTRICT_SELF_NR, fd_arg, zero) != 0:
                code = ctypes.get_errno()
                raise OSError(code, f"landlock_restrict_self: {os.strerror(code)}")
        finally:
            os.close(ruleset)
        return mechanisms

    def close(self) -> None:
        """Close every held fd (idempotent)."""
        fds, self.fds = sorted(self.fds), []
        while (
            fds
        ):  # one ``close_range`` per run of consecutive fds (the server opened them in a row)
            low = high = fds.pop(0)
            while fds and fds[0] == high + 1:
                high = fds.pop(0)
            os.closerange(low, high + 1)


def restrict(
    read: Sequence[str], write: Sequence[str], *, version: int, list_only: Sequence[str] = ()
) -> list[str]:
    """Restrict this process to ``read`` / ``write`` (see module docstring); irrevocable.

    ``list_only`` directories may be listed (with everything beneath them) but no file
    beneath them read, unless a ``read`` rule allows it.

    ``version`` is the ABI the Host probed; the child re-checks it so a kernel that lies
    about it fails here, not later. Needs ``no_new_privs`` (set by ``_privileges``).
    Returns the mechanisms applied. Raises ``OSError`` if any step fails: the caller must
    then not run the program (a half-applied ruleset is never trusted).
    """
    prepared = Prepared(read, version=version, list_only=list_only)
    try:
        return prepared.restrict(write)
    finally:
        prepared.close()


def _add_rule(ruleset: int, path: str, allowed: int, handled: int) -> None:
    """Allow ``allowed`` beneath ``path`` (a missing path is skipped: nothing to reach)."""
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if os.fstat(fd).st_mode & 0o170000 != 0o040000:
            allowed &= _FILE_RIGHTS & handled  # directory rights on a file are EINVAL
        beneath = _PathBeneathAttr(allowed, fd)
        rc = _LIBC.syscall(
            _ADD_RULE_NR,
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(beneath),
            ctypes.c_uint32(0),
        )
        if rc != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"landlock_add_rule({path}): {os.strerror(code)}")
    finally:
        os.close(fd)
