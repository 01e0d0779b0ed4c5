"""Which isolation a Guest child gets: the levels, what this machine offers, the plan.

Levels, weakest to strongest (each includes everything of the one before it)::

    rlimits     CPU, memory, file size, no core dumps; an empty environment and
                ``python -I -S -B``; no privileges (below)
    seccomp     + the allow-list filter of ``_seccomp`` (no exec, fork, sockets, io_uring,
                memfd, signals to others...); with no file-system isolation it also
                forbids every file write
    landlock    + Landlock (``_landlock``): read only the interpreter and the child's
                sources, write only a private size-bounded scratch dir, no exec, no TCP,
                scoped signals and abstract sockets
    namespaces  bubblewrap: fresh user, pid, net, ipc, uts, cgroup and mount namespaces
                (the child sees only ``/usr``, the interpreter, its sources and a private
                ``/tmp``), plus Landlock inside when the kernel has it, plus seccomp

"No privileges" holds at every level: outside bubblewrap the child enters its own user +
mount namespace as ``nobody`` (``_privileges``; a root Host's child is the kernel's
``nobody`` too, never uid 0), so a root Host never lends its uid's privileges, every mount
is read-only, ``/proc`` and ``/dev/shm`` are hidden and the scratch dir is a bounded tmpfs.
What the child applied is checked by the Host from outside (``_verify``).

A Host asks for a level by name (``Host(isolation=...)``) and gets exactly that level or
``IsolationUnavailable`` — never a weaker one. ``"strongest"`` (the default) is the
strongest level this machine offers, and it must be at least ``landlock``: a default Host
never runs a program without file-system isolation.

The probe (``machine()``) runs once per process and really starts the tools (bubblewrap
may be installed but refused, e.g. in a container). One documented knob: the environment
variable ``PYSOLATE_HIDE_BWRAP=1`` makes the probe act as if bubblewrap were not installed
(the test suite uses it to run the Landlock level where bubblewrap exists). It can only
lower the strongest level to ``landlock``, never below what was asked for.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from .._exceptions import IsolationUnavailable
from .._guest_api import GuestLimits
from . import _landlock, _view

Level = Literal["rlimits", "seccomp", "landlock", "namespaces"]
LEVELS: tuple[Level, ...] = ("rlimits", "seccomp", "landlock", "namespaces")
"""Weakest first."""

IsolationChoice = Literal["strongest", "rlimits", "seccomp", "landlock", "namespaces"]
"""What a Host asks for: the strongest available (at least ``DEFAULT_MINIMUM``), or a level."""

DEFAULT_MINIMUM: Level = "landlock"
"""What ``"strongest"`` must reach: file-system isolation (landlock or namespaces)."""

HIDE_BWRAP_ENV = "PYSOLATE_HIDE_BWRAP"
"""Set to ``1`` to make the probe ignore bubblewrap (see module docstring)."""

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The directory holding the ``pysolate`` and ``occurrences`` packages."""

SANDBOX_ROOT = "/pysolate"
"""Where the package sources appear inside the namespace sandbox."""

_CHILD_SOURCES = ("occurrences", "pysolate/_guest", "pysolate/_guest_errors.py")
"""The only Host paths the child reads (relative to ``PACKAGE_ROOT``)."""

INTERPRETER_FLAGS = ("-I", "-S", "-B", "-X", "utf8")

_NOBODY = "65534"

FORKED_NAMESPACES = ("own-namespaces", "userns-nobody", "private-proc", "bounded-scratch")
"""What a forked ``namespaces`` child reports having made itself (``_unshare.enter``)."""

_PUBLIC_DATA = ("/usr/share/zoneinfo",)
"""Read-only data the stdlib looks for (``zoneinfo``), visible at every level."""


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


@dataclass(frozen=True, slots=True)
class Plan:
    """How to start one child at one level."""

    level: Level
    argv: tuple[str, ...]
    """The command before the channel fd."""
    namespaces: bool
    """bubblewrap makes the file system (if so the scratch dir is its private ``/tmp``)."""
    landlock_abi: int
    """The Landlock ABI to apply (0: none)."""
    mechanisms: tuple[str, ...]
    """What the Host sets up; the child reports the rest."""
    _read: tuple[str, ...]
    _seccomp_library: str | None
    _root: bool
    _reveal: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """A root Host's ``_view.reveal`` covers: (directory nobody may not walk, paths beneath it to bind back)."""

    def confinement(self, scratch: str | None, limits: GuestLimits, scratch_bytes: int, *, prepared: str | None = None) -> dict[str, Any]:
        """The spec the child hands to ``_confine.confine`` (plain JSON); ``scratch`` is
        the private directory made for it (None under bubblewrap: its ``/tmp``).
        ``prepared``: the digest of the Landlock rules the fork server that forked the
        child prepared (``prepared_landlock``); where it is this plan's, the spec names it
        instead of listing every path (the child fails closed on any other)."""
        own_user_namespace = not self.namespaces
        write = ["/tmp" if self.namespaces else cast(str, scratch), "/dev/null"]
        landlock: dict[str, Any] | None = None
        if self.landlock_abi:
            if prepared is not None and prepared == _landlock_digest(self):
                landlock = {"abi": self.landlock_abi, "digest": prepared, "write": write}
            else:
                landlock = {**_landlock_rules(self), "write": write}
        return {
            "cpu_time": limits.cpu_time,
            "memory_bytes": limits.memory_bytes,
            "scratch_bytes": scratch_bytes,
            "max_processes": self.max_processes(limits),
            "max_open_files": limits.max_open_files,
            "user_namespace": {"scratch": scratch, "reveal": self._reveal} if own_user_namespace else None,
            "landlock": landlock,
            "seccomp": (
                {"library": self._seccomp_library, "restrict_files": self.level == "seccomp"}
                if self.level != "rlimits" else None
            ),
        }

    def max_processes(self, limits: GuestLimits) -> int | None:
        """The Guest's ``RLIMIT_NPROC``, or None where it would not apply: it counts per user
        namespace and uid, so it is this Guest's alone, but it exempts the kernel's root uid,
        which a root Host's Guest still is under bubblewrap (``_cgroup`` bounds it there)."""
        return None if self._root and self.namespaces else limits.max_processes

    @property
    def forkable(self) -> bool:
        """Whether a fork-server child keeps this level whole (``_forkserver``).

        Where the child applies *all* of its confinement to itself after the fork and can
        create no process: ``seccomp`` and ``landlock``, and ``namespaces``, whose server
        runs inside the same bubblewrap sandbox and whose every child enters fresh
        namespaces of its own (``_unshare``). At ``rlimits`` a Guest's descendants are only
        ended through its process group, which a recycled pid could alias; it spawns.
        """
        return forkable(self.level)

    def check_applied(self, mechanisms: Sequence[str], *, forked: bool = False) -> None:
        """Raise ``IsolationUnavailable`` unless the child reported every required mechanism."""
        made_outside = ("not-traced", *(("own-namespaces", "userns-nobody") if self.namespaces and not forked else ()))  # (bubblewrap's)
        missing = [m for m in self.requires(forked=forked) if m not in mechanisms and m not in made_outside]
        if missing:
            raise IsolationUnavailable(f"the Guest child did not apply {', '.join(missing)} (isolation={self.level!r})")

    def requires(self, *, forked: bool = False) -> tuple[str, ...]:
        """Mechanisms a Guest must have, or the Host refuses to run it: the child reports them
        (but ``not-traced``, and what bubblewrap makes for a spawned ``namespaces`` child;
        a ``forked`` one made its namespaces, /proc cover and /tmp itself) and the Host
        checks in ``/proc`` each one it can see (``_verify``)."""
        needed = ["rlimits", "open-file-bound", "no-capabilities", "no-new-privs", "not-dumpable", "not-traced", "userns-nobody"]
        if not (self._root and self.namespaces):
            needed.append("process-count-bound")
        if self.namespaces:
            needed += FORKED_NAMESPACES if forked else ["own-namespaces"]
        else:
            needed += ["not-root", "readonly-fs", "private-proc", "bounded-scratch"]
        if self.landlock_abi:
            needed.append("landlock-fs")
        if self.level != "rlimits":
            needed.append("seccomp-allowlist")
        return tuple(needed)


def forkable(level: Level) -> bool:
    """Whether Guests of ``level`` are forked from the fork server (``Plan.forkable``)."""
    return level in ("seccomp", "landlock", "namespaces")


def _landlock_rules(plan: Plan) -> dict[str, Any]:
    """The read and list rules of ``plan`` (what a fork server prepares)."""
    return {"abi": plan.landlock_abi, "read": list(plan._read), "list": list(landlock_lists())}


def _digest(spec: dict[str, Any]) -> str:
    """A name for a prepared rule set's spec (``abi``, ``read``, ``list``): the Host
    hands it to the fork server with the spec, and a forked child applies the server's
    prepared rules only when its ``init`` names the same one (``_confine``). Computed
    here only, so neither the server nor a child imports ``hashlib`` (OpenSSL: 0.6 MiB
    more of the server's memory copied at every fork)."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@functools.cache
def _landlock_digest(plan: Plan) -> str:
    return _digest(_landlock_rules(plan))


def prepared_landlock(*, sandboxed: bool) -> dict[str, Any] | None:
    """The Landlock rules a fork server prepares for its children (``_confine.prepare``):
    those of the ``landlock`` level (``sandboxed``: of ``namespaces``), or None without Landlock."""
    found = machine()
    if not found.landlock_abi:
        return None
    return {"abi": found.landlock_abi, "read": list(landlock_reads(sandboxed=sandboxed)), "list": list(landlock_lists())}


def prepared_digest(spec: dict[str, Any] | None) -> str | None:
    """The digest a fork server computes for ``spec`` (``prepared_landlock``), or None."""
    return _digest(spec) if spec else None


def interpreter() -> str:
    """The Host's own interpreter binary (resolved, so no venv ``site-packages`` applies)."""
    return os.path.realpath(sys.executable)


def seccomp_library() -> str | None:
    """Absolute path of the system ``libseccomp.so.2``, or None."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for directory in (f"/usr/lib/{multiarch}", f"/lib/{multiarch}", "/usr/lib64", "/usr/lib", "/lib64", "/lib"):
        found = sorted(glob.glob(os.path.join(directory, "libseccomp.so.2*")))
        if found:
            return os.path.realpath(found[0])
    return None


def _base_paths() -> dict[str, str]:
    """The base installation's scheme paths (never a venv's: that lives in the work tree)."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
            "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix}
    return sysconfig.get_paths(vars=base)


def _interpreter_paths(python: str) -> set[str]:
    """What the bare interpreter reads: its binary, the stdlib, ``lib-dynload``, libpython."""
    paths = _base_paths()
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    candidates = {python, paths["stdlib"], paths["platstdlib"]}
    if libdir.startswith((sys.base_prefix, sys.base_exec_prefix)):
        candidates.add(libdir)
    return {path for path in candidates if path and os.path.exists(path)}


def _site_packages() -> set[str]:
    paths = _base_paths()
    return {path for path in (paths["purelib"], paths["platlib"]) if os.path.isdir(path)}


def _library_dirs() -> list[str]:
    """Where the dynamic loader finds the shared libraries extension modules link to."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = [f"/usr/lib/{multiarch}", f"/lib/{multiarch}"] if multiarch else ["/usr/lib", "/lib"]
    return [d for d in (*dirs, "/usr/lib64", "/lib64") if os.path.isdir(d)]


@functools.cache
def landlock_lists() -> tuple[str, ...]:
    """Directories the child may list but not read beneath: the stdlib's (imports list
    it; its entries are granted one by one by ``landlock_reads``)."""
    paths = _base_paths()
    return tuple(sorted({paths["stdlib"], paths["platstdlib"]}))


@functools.cache
def landlock_reads(*, sandboxed: bool) -> tuple[str, ...]:
    """Exactly what the child may read under Landlock: the stdlib's entries but
    ``site-packages``, ``libpython``, the shared-library dirs, its own sources, zoneinfo
    and the random devices. ``sandboxed``: the paths as bubblewrap shows them."""
    paths = _base_paths()
    site = _site_packages()
    reads: set[str] = set()
    for stdlib in {paths["stdlib"], paths["platstdlib"]}:
        reads.update(os.path.join(stdlib, entry) for entry in os.listdir(stdlib) if os.path.join(stdlib, entry) not in site)
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if libdir.startswith((sys.base_prefix, sys.base_exec_prefix)):
        reads.update(glob.glob(os.path.join(libdir, "libpython*")))
    reads.update(_library_dirs())
    reads.update(p for p in _PUBLIC_DATA if os.path.isdir(p))
    root = SANDBOX_ROOT if sandboxed else str(PACKAGE_ROOT)
    reads.update(f"{root}/{relative}" for relative in _CHILD_SOURCES)
    reads.update(("/dev/urandom", "/dev/random", "/dev/zero"))
    return tuple(sorted(reads))


def _guest_reads(python: str) -> list[str]:
    """What a Guest outside bubblewrap must be able to read and walk to, at any level: the
    interpreter, its standard library, the package sources, and where scratch dirs are made."""
    import tempfile

    needed = {*_interpreter_paths(python), sys.base_prefix, sys.base_exec_prefix, tempfile.gettempdir(),  # (one bind for an installation)
              *(str(PACKAGE_ROOT / relative) for relative in _CHILD_SOURCES)}
    return sorted(path for path in needed if not any(path.startswith(other + "/") for other in needed))


@functools.cache
def reveals(python: str) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...]]:
    """A root Host's Guest is the kernel's ``nobody``: the directories it may not walk
    into on the way to what it must read (``/root`` for a pyenv), each with the paths
    beneath it to bind back (``_view.reveal``); and what ``nobody`` could still not read
    once there (then root Hosts refuse the levels outside bubblewrap: ``Machine``)."""
    return _view.covers(_guest_reads(python))


def _bwrap_argv(bwrap: str, python: str, scratch_bytes: int) -> list[str]:
    argv = [
        bwrap, "--unshare-all", "--unshare-user", "--uid", _NOBODY, "--gid", _NOBODY,
        "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL",
        "--ro-bind", "/usr", "/usr",
    ]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for path in sorted(_interpreter_paths(python)):
        if not path.startswith("/usr/"):
            argv += ["--ro-bind", path, path]
    for path in sorted(_site_packages()):
        argv += ["--tmpfs", path]  # bound with the stdlib; hide it
    for relative in _CHILD_SOURCES:
        argv += ["--ro-bind", str(PACKAGE_ROOT / relative), f"{SANDBOX_ROOT}/{relative}"]
    argv += [
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(scratch_bytes), "--tmpfs", "/tmp",
        "--remount-ro", "/",  # bwrap's root is a writable tmpfs; only /tmp stays writable
        "--remount-ro", "/dev",  # its /dev (and /dev/shm in it) is an unbounded tmpfs otherwise
        "--chdir", "/tmp",
        python, *INTERPRETER_FLAGS, f"{SANDBOX_ROOT}/pysolate/_guest/_child.py",
    ]
    return argv


def _works(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env={}, timeout=10)
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
        argv = _bwrap_argv(bwrap, python, 1 << 20)
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


def resolve(choice: IsolationChoice) -> Level:
    """The level ``choice`` means on this machine.

    Raises ``IsolationUnavailable`` when the machine lacks it (the message says what is
    missing and how to get it), and ``ValueError`` for an unknown choice.
    """
    if choice != "strongest" and choice not in LEVELS:
        raise ValueError(f"isolation must be 'strongest' or one of {', '.join(LEVELS)}; got {choice!r}")
    found = machine()
    if choice != "strongest":
        missing = found.missing(choice)
        if missing:
            raise IsolationUnavailable(f"isolation={choice!r} is not available here; missing: " + "; ".join(missing))
        return choice
    offered = found.levels()
    strongest = offered[-1] if offered else None
    if strongest is None or LEVELS.index(strongest) < LEVELS.index(DEFAULT_MINIMUM):
        missing = [*found.missing("landlock"), *found.missing("namespaces")]
        raise IsolationUnavailable(
            "no file-system isolation for the Guest on this machine (it needs bubblewrap or Landlock); missing: "
            + "; ".join(dict.fromkeys(missing))
            + ". To run without it anyway, ask for it explicitly: Host(isolation='seccomp') or 'rlimits'"
            + (f" (this machine offers {', '.join(offered)})" if offered else "")
        )
    return strongest


@functools.cache
def _plan(level: Level, scratch_bytes: int, found: Machine) -> Plan:
    python = interpreter()
    mechanisms = ["clearenv", "isolated-interpreter"]  # the child adds what it applied
    library = found.seccomp_library if level != "rlimits" else None
    abi = found.landlock_abi if level in ("landlock", "namespaces") else 0
    if level == "namespaces":
        assert found.bwrap is not None
        mechanisms += ["bwrap", "no-network", "readonly-system", "private-tmp", "pid-namespace"]
        argv = tuple(_bwrap_argv(found.bwrap, python, scratch_bytes))
        setpriv = shutil.which("setpriv") if found.root else None
        if setpriv:  # bwrap keeps a root caller's supplementary groups; the Host's fork+setgroups would be slow
            argv = (setpriv, "--clear-groups", "--", *argv)
            mechanisms.append("no-supplementary-groups")
        return Plan(level, argv, True, abi, tuple(mechanisms), landlock_reads(sandboxed=True), library, found.root)
    child = str(PACKAGE_ROOT / "pysolate" / "_guest" / "_child.py")
    reads = landlock_reads(sandboxed=False) if abi else ()
    reveal = reveals(python)[0] if found.root else ()
    return Plan(level, (python, *INTERPRETER_FLAGS, child), False, abi, tuple(mechanisms), reads, library, found.root, reveal)


def planned(choice: IsolationChoice, scratch_bytes: int) -> Plan | None:
    """``plan`` without blocking: the plan once the probe has run for the current knob
    setting (and ``choice`` resolves), else None (then call ``plan`` off the event loop)."""
    if (os.environ.get(HIDE_BWRAP_ENV) == "1") not in _PROBED:
        return None
    return plan(choice, scratch_bytes)


def plan(choice: IsolationChoice, scratch_bytes: int) -> Plan:
    """The plan for ``choice`` on this machine (blocks once, probing). Raises
    ``IsolationUnavailable`` and ``ValueError`` as ``resolve`` does."""
    level = resolve(choice)
    return _plan(level, scratch_bytes, machine())
