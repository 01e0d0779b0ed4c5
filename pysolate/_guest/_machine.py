"""What this machine offers a Guest: the isolation levels it can start, probed once.

The probe (``machine()``) runs once per process and really starts the tools (bubblewrap
may be installed but refused, e.g. in a container). One documented knob: the environment
variable ``PYSOLATE_HIDE_BWRAP=1`` makes the probe act as if bubblewrap were not installed
(the test suite uses it to run the Landlock level where bubblewrap exists). It can only
lower the strongest level to ``landlock``, never below what was asked for.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from typing import Literal

from ._filesystem import bwrap_argv, interpreter, reveals
from .child import _landlock

Level = Literal["rlimits", "seccomp", "landlock", "namespaces"]
LEVELS: tuple[Level, ...] = ("rlimits", "seccomp", "landlock", "namespaces")
"""Weakest first."""

HIDE_BWRAP_ENV = "PYSOLATE_HIDE_BWRAP"
"""Set to ``1`` to make the probe ignore bubblewrap (see module docstring)."""


@dataclass(frozen=True, slots=True)
class Machine:
    """What this machine offers a Guest (probed once; see ``machine()``)."""

    bwrap: str | None
    """A bubblewrap binary that really starts a sandbox here, or None."""
    landlock_abi: int
    """The kernel's Landlock ABI version (0: none)."""
    seccomp_library: str | None
    """The system ``libseccomp.so.2``, or None."""
    user_namespaces: bool
    """Whether the child can enter a user + mount namespace of its own."""
    root: bool
    """Whether the Host runs as root (then a Guest must not keep its uid)."""
    unreadable: tuple[str, ...] = ()
    """Paths a root Host's Guest must read that the kernel's ``nobody``, which it is
    outside bubblewrap, may not (``reveals``: walking to them is fixed, reading is not)."""

    def missing(self, level: Level) -> list[str]:
        """What this machine lacks for ``level``: one "what, and how to get it" each."""
        needs: list[str] = []
        if self.root and not self.user_namespaces and level != "namespaces":
            needs.append(
                "user namespaces (the Host runs as root and a Guest must not keep its uid): "
                "enable them (sysctl user.max_user_namespaces=15000) or run the Host as an unprivileged user"
            )
        if self.root and self.unreadable and level != "namespaces":
            needs.append(
                "an interpreter and package sources the 'nobody' user may read (a root Host's Guest runs as "
                f"nobody; not readable: {', '.join(self.unreadable)}); make them world-readable"
            )
        if level != "rlimits" and self.seccomp_library is None:
            needs.append("libseccomp (install the libseccomp2 package)")
        if level == "landlock" and self.landlock_abi < 1:
            needs.append(
                "Landlock (Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK=y and 'landlock' in the lsm= boot "
                "parameter; check /sys/kernel/security/lsm)"
            )
        if level == "namespaces" and self.bwrap is None:
            needs.append(
                "a working bubblewrap (install the bubblewrap package; it needs unprivileged user "
                "namespaces, which some containers disable)"
            )
        return needs

    def levels(self) -> tuple[Level, ...]:
        """The levels this machine offers, weakest first."""
        return tuple(level for level in LEVELS if not self.missing(level))


def seccomp_library() -> str | None:
    """Absolute path of the system ``libseccomp.so.2``, or None."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for directory in (
        f"/usr/lib/{multiarch}",
        f"/lib/{multiarch}",
        "/usr/lib64",
        "/usr/lib",
        "/lib64",
        "/lib",
    ):
        found = sorted(glob.glob(os.path.join(directory, "libseccomp.so.2*")))
        if found:
            return os.path.realpath(found[0])
    return None


def _works(argv: list[str]) -> bool:
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, env={}, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


_USERNS_PROBE = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "uid, gid = os.getuid(), os.getgid()\n"
    "assert libc.unshare(0x10000000 | 0x00020000) == 0\n"
    "open('/proc/self/setgroups', 'w').write('deny')\n"
    "open('/proc/self/uid_map', 'w').write(f'65534 {uid} 1')\n"
    "open('/proc/self/gid_map', 'w').write(f'65534 {gid} 1')\n"
)


@functools.cache
def _machine(hide_bwrap: bool) -> Machine:
    python = interpreter()
    bwrap = None if hide_bwrap else shutil.which("bwrap")
    if bwrap is not None:
        argv = bwrap_argv(bwrap, python, 1 << 20)
        argv[-1:] = ["-c", "pass"]
        bwrap = bwrap if _works(argv) else None
    root = os.geteuid() == 0
    return Machine(
        bwrap=bwrap,
        landlock_abi=_landlock.abi(),
        seccomp_library=seccomp_library(),
        user_namespaces=_works([python, "-I", "-S", "-c", _USERNS_PROBE]),
        root=root,
        unreadable=reveals(python)[1] if root else (),
    )


_PROBED: set[bool] = set()
"""The knob settings (``HIDE_BWRAP_ENV`` set or not) ``machine`` has probed."""


def machine() -> Machine:
    """What this machine offers (blocks once per process and knob setting: it starts
    bubblewrap and a user namespace to be sure they work)."""
    hide = os.environ.get(HIDE_BWRAP_ENV) == "1"
    found = _machine(hide)
    _PROBED.add(hide)
    return found


def probed() -> bool:
    """Whether ``machine`` has probed for the current knob setting (then it does not block)."""
    return (os.environ.get(HIDE_BWRAP_ENV) == "1") in _PROBED
