"""The Guest child gives up every privilege before the program runs.

Called by the child (``_confine``) after its rlimits and before Landlock and seccomp:

``enter_user_namespace``
    Outside bubblewrap, the child moves into a new user namespace and mount namespace of its
    own, where it is ``nobody`` (65534), and holds no capability over anything outside it.
    Who it is *to the kernel* (outside its namespace) depends on the Host:

    - a **root** Host's child becomes the kernel's ``nobody`` before it makes its user
      namespace, and maps only ``nobody`` to ``nobody``: uid 0 is never mapped, so it owns
      none of root's files (cgroupfs included), and no signal (``kill``, ``SIGIO``)
      reaches a process of root's. While still root it makes every mount below in a mount
      namespace of its own, which its user namespace (made after it) does not own and so
      cannot change at all: the paths it must read but ``nobody`` may not reach revealed
      (``_view.reveal``: a pyenv under ``/root``), every mount read-only
      (``_view.read_only``) and the covers below. It writes its maps through ``/proc/self``
      opened before ``/proc`` was covered (``nobody`` again may not: a uid change makes a
      process not dumpable, and its ``/proc`` root's, until it says otherwise for the
      moment of the writes).
    - an **unprivileged** Host's child can only map the Host's own uid (to ``nobody``),
      which it then is to the kernel; it makes the mounts in its new mount namespace, every
      one read-only the same way.

    The covers:

    - ``/proc`` with an empty read-only tmpfs (no other process's ``environ``, ``mem`` or
      ``cwd``; not even its own — nothing the program needs lives there),
    - ``/dev/shm`` with an empty read-only tmpfs (POSIX shared memory is unbounded memory),
    - its scratch directory with a size-bounded tmpfs (the scratch bound, as under
      bubblewrap): the one place it may write,

    and those mounts vanish with it. Without user namespaces (``sysctl
    user.max_user_namespaces=0``) this step is impossible and the Host refuses levels that
    need it when it runs as root (``_isolation``).
``drop``
    Always: the capability bounding set emptied, ``PR_SET_NO_NEW_PRIVS`` (no setuid binary
    or file capability can give anything back, and Landlock requires it) and
    ``PR_SET_DUMPABLE=0`` (no process of the same uid may ptrace it or read its ``/proc``);
    then it checks that no capability is left in any set.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

NOBODY = 65534

_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 1, 2, 4, 8, 0x4000, 1 << 18
_PR_SET_PDEATHSIG, _PR_GET_PDEATHSIG = 1, 2
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 4, 24, 38, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


_LIBC = ctypes.CDLL(None, use_errno=True)
"""This module's own handle, made at import (a fork server's children inherit it ready)."""
_LIBC.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_LIBC.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]


def _libc() -> ctypes.CDLL:
    return _LIBC


def _check(rc: int, what: str) -> None:
    if rc != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _write(path: str, text: str, directory: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY, dir_fd=directory)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_user_namespace(
    scratch: str, scratch_bytes: int, reveal: Sequence[tuple[str, Sequence[str]]] = ()
) -> list[str]:
    """Become ``nobody`` in a private user + mount namespace (see module docstring);
    ``reveal``: a root Host's ``_view.reveal`` covers.

    Raises ``OSError`` if any step fails; the program must then not run.
    """
    from . import _view

    libc = _libc()
    root = os.geteuid() == 0
    uid, gid = os.getuid(), os.getgid()
    if root:  # all mounts as root, in a mount namespace no user namespace of the Guest owns
        os.setgroups([])  # none of root's supplementary groups (an unprivileged Host cannot)
        _check(libc.unshare(_CLONE_NEWNS), "unshare(mount)")
        _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
        _view.reveal(reveal)
        _view.read_only()
        _view.writable("/proc")  # the maps are written through it below, once it is covered
        proc = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        _mount_private_view(libc, scratch, scratch_bytes)
        _become_nobody(libc)
        uid = gid = NOBODY
        _check(libc.unshare(_CLONE_NEWUSER), "unshare(user)")
        _check(
            libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "PR_SET_DUMPABLE"
        )  # (the uid change cleared it: /proc/self was root's)
    else:
        _check(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare(user, mount)")
        proc = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _write("setgroups", "deny", proc)  # no setgroups() can ever re-add a group
        _write("uid_map", f"{NOBODY} {uid} 1", proc)
        _write("gid_map", f"{NOBODY} {gid} 1", proc)
    finally:
        os.close(proc)
    _check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "PR_SET_DUMPABLE")  # (again by ``drop``)
    if not root:
        _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
        _view.read_only()
        _mount_private_view(libc, scratch, scratch_bytes)
    _empty_bounding_set(libc)  # while we still hold CAP_SETPCAP (in the new namespace)
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    _clear_capabilities(libc)  # the namespace's creator holds all of them (already as 65534)
    return [
        "userns-nobody",
        "not-root",
        "readonly-fs",
        "private-proc",
        "no-dev-shm",
        "bounded-scratch",
    ]


def _mount_private_view(libc: ctypes.CDLL, scratch: str, scratch_bytes: int) -> None:
    """Cover ``/proc`` and ``/dev/shm`` with empty read-only tmpfs, mount the scratch tmpfs
    (the one writable place) and move into it."""
    hidden = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    for path in ("/proc", "/dev/shm"):
        if os.path.isdir(path):
            _check(
                libc.mount(b"tmpfs", path.encode(), b"tmpfs", hidden, b"size=4k,mode=0555"),
                f"hide {path}",
            )
    options = f"size={scratch_bytes},mode=0700,uid={NOBODY},gid={NOBODY}".encode()
    _check(
        libc.mount(
            b"tmpfs", scratch.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options
        ),
        "mount scratch",
    )
    os.chdir(scratch)  # the cwd was the directory under the new mount


def _become_nobody(libc: ctypes.CDLL) -> None:
    """Be the kernel's ``nobody`` (no capability left). The kernel clears the parent-death
    signal on a uid change: a forked Guest's (it dies with its fork server) is set again,
    and if the parent died meanwhile the Guest fails instead of outliving it."""
    parent = os.getppid()
    _check(
        libc.prctl(_PR_GET_PDEATHSIG, ctypes.addressof(_DEATH_SIGNAL), 0, 0, 0), "PR_GET_PDEATHSIG"
    )
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    if _DEATH_SIGNAL.value:
        _check(libc.prctl(_PR_SET_PDEATHSIG, _DEATH_SIGNAL.value, 0, 0, 0), "PR_SET_PDEATHSIG")
        if os.getppid() != parent:
            raise OSError("the Guest's parent ended while it changed its uid")


_DEATH_SIGNAL = ctypes.c_int(0)
"""``PR_GET_PDEATHSIG``'s answer (made at import: a fork server's children inherit it)."""


def drop() -> list[str]:
    """No capabilities, ``no_new_privs``, not dumpable; verified. Raises ``OSError``."""
    libc = _libc()
    _empty_bounding_set(libc)
    libc.prctl(
        _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0
    )  # EINVAL on kernels without ambient caps
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    _check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "PR_SET_DUMPABLE")
    held = _capabilities()
    if any(held.values()):
        raise OSError(f"capabilities left after dropping them: {held}")
    if os.getuid() == 0 or os.geteuid() == 0:
        raise OSError("the Guest would still run as root")
    return ["no-capabilities", "no-new-privs", "not-dumpable"]


def _empty_bounding_set(libc: ctypes.CDLL) -> None:
    """Drop every capability from the bounding set, where we may (EPERM without
    ``CAP_SETPCAP``: then ``no_new_privs`` is what keeps an exec from regaining one).

    Once every drop succeeded the set stays empty (nothing can add to it, and a fork
    inherits it), so this process does not try again."""
    global _bounding_set_empty
    if _bounding_set_empty == os.getpid():
        return
    emptied = True
    for cap in range(_LAST_CAPABILITY + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            if code not in (1, 22):
                _check(-1, f"drop capability {cap} from the bounding set")
            emptied = emptied and code == 22  # EINVAL: no such capability here
    if emptied:
        _bounding_set_empty = os.getpid()


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except OSError:
        return 63  # /proc hidden: try every bit a 64-bit set can hold


_LAST_CAPABILITY = _last_capability()
"""Read at import (a child imports this before it hides ``/proc``; a fork server's
children inherit it), so no child tries all 64 bits."""

_bounding_set_empty = 0
"""The pid of the process that emptied its bounding set (0: none yet)."""


_CAP_VERSION_3 = 0x20080522
"""``_LINUX_CAPABILITY_VERSION_3``: each set is two 32-bit words."""


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_NONE = (_CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)())
"""``capset``'s arguments for no capability at all, made once (the kernel only reads them)."""
_LIBC.capset.restype = _LIBC.capget.restype = _LIBC.unshare.restype = (
    ctypes.c_int
)  # (looked up here, once, not in each forked child)


def _clear_capabilities(libc: ctypes.CDLL) -> None:
    """Clear every set. What it uses is made at import: in a fork server's child each
    object created or looked up for the first time is a copy-on-write fault (≈ 110 of them
    measured for a first ``capset`` lookup and its structures)."""
    header, data = _NONE
    _check(libc.capset(ctypes.byref(header), data), "capset (clear every set)")


def _capabilities() -> dict[str, int]:
    """The effective, permitted and inheritable sets, through ``capget`` (no ``/proc``)."""
    libc = _libc()
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.capget(ctypes.byref(header), data), "capget")
    return {
        name: getattr(data[0], name) | getattr(data[1], name) << 32
        for name in ("effective", "permitted", "inheritable")
    }
