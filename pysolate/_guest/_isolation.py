"""Which isolation a Guest child gets, and the command line that sets it up.

Strongest available, decided once per Host process:

- ``namespaces``: bubblewrap (``bwrap``) is installed *and* works here (user namespaces
  may be disabled in containers, so it is probed by really starting the interpreter in
  it). The child gets fresh user, pid, net, ipc, uts and cgroup namespaces (no network,
  not even loopback), runs as ``nobody`` with no capabilities, sees a read-only ``/usr``,
  the base interpreter's binary and library dirs (``site-packages`` hidden; never a venv),
  the three source paths of ``pysolate`` it imports, its own ``/proc`` and a minimal
  ``/dev``, and a size-bounded private tmpfs at ``/tmp`` as its cwd, the only writable
  place (the sandbox root is remounted read-only). Nothing else of the Host: no ``/etc``,
  ``/root``, home, venv or work tree.
- ``seccomp``: the system ``libseccomp`` exists; the child installs the filter of
  ``_seccomp.py`` itself (after start-up, before the program). Without namespaces it also
  forbids every file write, since no read-only mounts protect the file system.
- ``rlimits``: always (CPU, address space, file size, no core dumps), set by the child.

Always: ``-I -S -B`` (no user site, no ``site-packages``, no ``PYTHON*`` variables, no
bytecode writes) and an empty environment, so no Host secret reaches the child.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

IsolationChoice = Literal["strongest", "seccomp", "rlimits"]
"""What a caller asks for: the strongest available, or a deliberately weaker level."""

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The directory holding the ``pysolate`` and ``occurrences`` packages."""

SANDBOX_ROOT = "/pysolate"
"""Where the package sources appear inside the namespace sandbox."""

_CHILD_SOURCES = ("occurrences", "pysolate/_guest", "pysolate/_guest_errors.py")
"""The only Host paths the child reads (relative to ``PACKAGE_ROOT``)."""

INTERPRETER_FLAGS = ("-I", "-S", "-B", "-X", "utf8")

_NOBODY = "65534"


@dataclass(frozen=True, slots=True)
class Plan:
    """How to start one child: argv before the channel fd, and what it will be protected by."""

    argv: tuple[str, ...]
    namespaces: bool
    seccomp_library: str | None
    mechanisms: tuple[str, ...]


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
        "--chdir", "/tmp",
        python, *INTERPRETER_FLAGS, f"{SANDBOX_ROOT}/pysolate/_guest/_child.py",
    ]
    return argv


@functools.cache
def _probe_bwrap(bwrap: str, python: str) -> bool:
    argv = _bwrap_argv(bwrap, python, 1 << 20)
    argv[-1:] = ["-c", "pass"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env={}, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.cache
def plan(choice: IsolationChoice, scratch_bytes: int) -> Plan:
    """The strongest plan ``choice`` allows on this machine (blocks once, probing bwrap)."""
    python = interpreter()
    mechanisms = ["clearenv", "isolated-interpreter"]  # the child adds what it applied
    library = seccomp_library() if choice in ("strongest", "seccomp") else None
    bwrap = shutil.which("bwrap") if choice == "strongest" else None
    if bwrap and _probe_bwrap(bwrap, python):
        mechanisms += ["bwrap", "no-network", "readonly-system", "private-tmp"]
        return Plan(tuple(_bwrap_argv(bwrap, python, scratch_bytes)), True, library, tuple(mechanisms))
    child = str(PACKAGE_ROOT / "pysolate" / "_guest" / "_child.py")
    return Plan((python, *INTERPRETER_FLAGS, child), False, library, tuple(mechanisms))
