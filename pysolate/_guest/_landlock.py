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

_O_PATH = 0o10000000


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed))
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is missing or disabled."""
    libc = _libc()
    version = libc.syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
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


def restrict(read: Sequence[str], write: Sequence[str], *, version: int, list_only: Sequence[str] = ()) -> list[str]:
    """Restrict this process to ``read`` / ``write`` (see module docstring); irrevocable.

    ``list_only`` directories may be listed (with everything beneath them) but no file
    beneath them read, unless a ``read`` rule allows it.

    ``version`` is the ABI the Host probed; the child re-checks it so a kernel that lies
    about it fails here, not later. Needs ``no_new_privs`` (set by ``_privileges``).
    Returns the mechanisms applied. Raises ``OSError`` if any step fails: the caller must
    then not run the program (a half-applied ruleset is never trusted).
    """
    found = abi()
    if found < max(1, version):
        raise OSError(f"Landlock ABI {found} is below the {version} the Host planned for")
    handled = _handled_fs(version)
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
    libc = _libc()
    ruleset = int(libc.syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)))
    if ruleset < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"landlock_create_ruleset: {os.strerror(code)}")
    try:
        file_rights = _READ_FILE | _WRITE_FILE | _TRUNCATE | _IOCTL_DEV  # the subset a file rule may hold
        for paths, allowed in ((list_only, _READ_DIR), (read, READ), (write, handled & ~_EXECUTE)):
            for path in paths:
                _add_rule(libc, ruleset, path, allowed & handled, file_rights & handled)
        if libc.syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"landlock_restrict_self: {os.strerror(code)}")
    finally:
        os.close(ruleset)
    return mechanisms


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, allowed: int, file_rights: int) -> None:
    """Allow ``allowed`` beneath ``path`` (a missing path is skipped: nothing to reach)."""
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if os.fstat(fd).st_mode & 0o170000 != 0o040000:
            allowed &= file_rights  # directory rights on a file are EINVAL
        beneath = _PathBeneathAttr(allowed, fd)
        rc = libc.syscall(ctypes.c_long(_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(beneath), ctypes.c_uint32(0))
        if rc != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"landlock_add_rule({path}): {os.strerror(code)}")
    finally:
        os.close(fd)
