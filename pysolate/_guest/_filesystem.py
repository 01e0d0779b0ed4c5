"""What a Guest child may read of the Host's file system, and how bubblewrap shows it to it.

Exactly the interpreter, its standard library (never ``site-packages``), the shared
libraries extension modules link to, the child's own sources (``CHILD_SOURCES``) and a few
public data files: as Landlock rules (``landlock_reads``, ``landlock_lists``), as
bubblewrap's binds (``bwrap_argv``), and as the paths a root Host's Guest must be able to
walk to (``reveals``). ``_isolation`` plans a level from these; ``_machine`` probes with them.
"""

from __future__ import annotations

import functools
import glob
import os
import sys
import sysconfig
from pathlib import Path

from .child import _view

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The directory holding the ``pysolate`` and ``occurrences`` packages."""

SANDBOX_ROOT = "/pysolate"
"""Where the package sources appear inside the namespace sandbox."""


_CHILD_SOURCES = ("occurrences", "pysolate/_guest/child", "pysolate/_guest_errors.py")
"""The only Host paths the child reads (relative to ``PACKAGE_ROOT``)."""

INTERPRETER_FLAGS = ("-I", "-S", "-B", "-X", "utf8")

_NOBODY = "65534"


_PUBLIC_DATA = ("/usr/share/zoneinfo",)
"""Read-only data the stdlib looks for (``zoneinfo``), visible at every level."""


def interpreter() -> str:
    """The Host's own interpreter binary (resolved, so no venv ``site-packages`` applies)."""
    return os.path.realpath(sys.executable)


def _base_paths() -> dict[str, str]:
    """The base installation's scheme paths (never a venv's: that lives in the work tree)."""
    base = {
        "base": sys.base_prefix,
        "platbase": sys.base_exec_prefix,
        "installed_base": sys.base_prefix,
        "installed_platbase": sys.base_exec_prefix,
    }
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
        reads.update(
            os.path.join(stdlib, entry)
            for entry in os.listdir(stdlib)
            if os.path.join(stdlib, entry) not in site
        )
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

    needed = {
        *_interpreter_paths(python),
        sys.base_prefix,
        sys.base_exec_prefix,
        tempfile.gettempdir(),  # (one bind for an installation)
        *(str(PACKAGE_ROOT / relative) for relative in _CHILD_SOURCES),
    }
    return sorted(
        path for path in needed if not any(path.startswith(other + "/") for other in needed)
    )


@functools.cache
def reveals(python: str) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...]]:
    """A root Host's Guest is the kernel's ``nobody``: the directories it may not walk
    into on the way to what it must read (``/root`` for a pyenv), each with the paths
    beneath it to bind back (``_view.reveal``); and what ``nobody`` could still not read
    once there (then root Hosts refuse the levels outside bubblewrap: ``Machine``)."""
    return _view.covers(_guest_reads(python))


def bwrap_argv(bwrap: str, python: str, scratch_bytes: int) -> list[str]:
    """The bubblewrap command that starts a child of ``python`` in fresh namespaces, seeing
    only ``/usr``, the interpreter, its sources and a private ``/tmp`` of ``scratch_bytes``."""
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--uid",
        _NOBODY,
        "--gid",
        _NOBODY,
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
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
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(scratch_bytes),
        "--tmpfs",
        "/tmp",
        "--remount-ro",
        "/",  # bwrap's root is a writable tmpfs; only /tmp stays writable
        "--remount-ro",
        "/dev",  # its /dev (and /dev/shm in it) is an unbounded tmpfs otherwise
        "--chdir",
        "/tmp",
        python,
        *INTERPRETER_FLAGS,
        f"{SANDBOX_ROOT}/pysolate/_guest/child/_child.py",
    ]
    return argv
