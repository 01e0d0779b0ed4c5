"""The file system a Guest sees outside bubblewrap: read-only, but for its own scratch.

Called by ``_privileges.enter_user_namespace`` in the child's private mount namespace,
before the program exists:

``read_only``
    Every mount of the child's copy of the mount table becomes read-only at once
    (``mount_setattr`` with ``AT_RECURSIVE``, Linux 5.12), before the child mounts its
    scratch tmpfs (the only writable place it then has; devices such as ``/dev/null``
    stay writable, a read-only mount does not cover device I/O). So no Guest, at any
    level, can write the library's own sources, the Host's virtualenv or interpreter, a
    cgroup file or anything else of the Host's — not even at ``rlimits``, which has no
    Landlock and no filter (an ``rlimits`` run once appended a no-op ``install()`` to this
    package's ``_seccomp.py``, and every later Guest of a new Host ran unfiltered). A
    program that makes a user and mount namespace of its own (``rlimits`` allows it) gets
    a copy in which the kernel locks these flags (``MNT_LOCK_READONLY``): it cannot make
    them writable again, nor unmount the covers below to see what they hide.
``reveal``
    A root Host's Guest is the kernel's ``nobody``, not root (``_privileges``), and
    ``nobody`` may not walk into a directory such as ``/root`` (mode 0700) where the
    interpreter may live (a pyenv). For each such directory the Host names
    (``_filesystem.reveals``) the child covers it with an empty tmpfs and binds back, at
    their own paths, only the paths beneath it a Guest must read (the interpreter, its
    standard library, the package sources): the rest of it is gone from the Guest's view.
    Done while the child is still root, in a mount namespace its user namespace cannot
    change.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
from collections.abc import Sequence

_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC = 2, 4, 4096, 0x4000
_SYS_MOUNT_SETATTR = 442  # the same number on every architecture (the unified syscall table)
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_MOUNT_ATTR_RDONLY = 1
_O_PATH = 0o10000000

_LIBC = ctypes.CDLL(None, use_errno=True)
"""This module's own handle, made at import (a fork server's children inherit it ready)."""
_LIBC.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_LIBC.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


_READ_ONLY, _WRITABLE = (
    _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0),
    _MountAttr(0, _MOUNT_ATTR_RDONLY, 0, 0),
)
"""``mount_setattr``'s two arguments, made once (the kernel only reads them)."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _setattr(path: bytes, flags: int, attr: _MountAttr, what: str) -> None:
    rc = _LIBC.syscall(
        ctypes.c_long(_SYS_MOUNT_SETATTR),
        ctypes.c_int(_AT_FDCWD),
        path,
        ctypes.c_uint(flags),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(int(rc), what)


def read_only(path: str = "/") -> None:
    """Make every mount at and beneath ``path`` read-only (see module docstring). Raises
    ``OSError`` (ENOSYS before Linux 5.12): the Guest must then not run."""
    _setattr(
        path.encode(),
        _AT_RECURSIVE,
        _READ_ONLY,
        f"make every mount beneath {path} read-only (mount_setattr)",
    )


def writable(path: str) -> None:
    """Make the one mount at ``path`` writable again: ``/proc``, while a root Host's child
    writes its user namespace's maps (then ``read_only("/proc")`` again, and covered)."""
    _setattr(path.encode(), 0, _WRITABLE, f"make {path} writable")


def reveal(covers: Sequence[tuple[str, Sequence[str]]]) -> None:
    """For each (directory, paths beneath it): cover the directory with an empty tmpfs
    anyone may walk, then bind each path back at its own place (see module docstring).
    Raises ``OSError``."""
    for directory, paths in covers:
        held = [
            (path, os.open(path, _O_PATH | os.O_CLOEXEC)) for path in paths
        ]  # before the cover hides them
        try:
            _check(
                _LIBC.mount(
                    b"tmpfs",
                    directory.encode(),
                    b"tmpfs",
                    _MS_NOSUID | _MS_NODEV,
                    b"size=64k,mode=0755",
                ),
                f"cover {directory}",
            )
            for path, fd in held:
                _skeleton(directory, path, is_directory=stat.S_ISDIR(os.fstat(fd).st_mode))
                _check(
                    _LIBC.mount(
                        f"/proc/self/fd/{fd}".encode(),
                        path.encode(),
                        None,
                        _MS_BIND | _MS_REC,
                        None,
                    ),
                    f"bind {path}",
                )
        finally:
            for _, fd in held:
                os.close(fd)


def covers(paths: Sequence[str]) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...]]:
    """What ``reveal`` needs for ``nobody`` to reach ``paths``: each top directory on the way
    that others may not walk into, with the paths beneath it; and the paths ``nobody``
    could still not read (their own mode: a bind does not change it). Runs in the Host."""
    found: dict[str, list[str]] = {}
    for path in paths:
        parts = path.rstrip("/").split("/")
        ancestors = ["/".join(parts[: i + 1]) for i in range(1, len(parts) - 1)]
        top = next(
            (directory for directory in ancestors if not _others_may(directory, 0o001)), None
        )
        if top is not None:
            found.setdefault(top, []).append(path)
    unreadable = tuple(
        path for path in paths if not _others_may(path, 0o005 if os.path.isdir(path) else 0o004)
    )
    return tuple((top, tuple(beneath)) for top, beneath in sorted(found.items())), unreadable


def _others_may(path: str, bits: int) -> bool:
    try:
        return os.stat(path).st_mode & bits == bits
    except OSError:
        return False


def _skeleton(top: str, path: str, *, is_directory: bool) -> None:
    """Make ``path`` and the directories between it and ``top`` in the (fresh, empty) cover,
    mode 0755 (files 0644) whatever the umask."""
    parts = path[len(top) :].strip("/").split("/")
    mask = os.umask(0)
    try:
        for depth in range(1, len(parts) + (1 if is_directory else 0)):
            with contextlib.suppress(FileExistsError):  # (shared by another path of the cover)
                os.mkdir(os.path.join(top, *parts[:depth]), 0o755)
        if not is_directory:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    finally:
        os.umask(mask)
