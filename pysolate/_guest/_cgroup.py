"""One cgroup v2 per Guest, where the Host may create one: the whole tree ends with the run.

Killing the child's process group misses a grandchild that called ``setsid()``. A cgroup
does not: every process the child creates stays in it, and ``cgroup.kill`` (Linux 5.14)
SIGKILLs them all at once. Where the Host's cgroup delegates the ``memory`` and ``pids``
controllers, ``memory.max`` also counts what ``RLIMIT_AS`` cannot (tmpfs and memfd pages,
pipe and socket buffers: the kernel memory a Guest pins), with no swap to spill into
(``memory.swap.max`` 0) and an OOM kill that takes the whole tree (``memory.oom.group``),
and ``pids.max`` bounds the tree.

The Host creates the cgroup beside itself (under its own cgroup v2 path) and moves the
child in *before* sending ``init`` — the child runs no program code before it gets
``init``, so nothing it creates can start outside. (Under bubblewrap the pid namespace
already ends the tree and bwrap forks before the Host could move it, so that level does
not use one.)

On a hybrid hierarchy (cgroup v2 without the ``pids`` or ``memory`` controller, and the v1
hierarchy mounted, as in many containers) the Guest also joins a v1 ``memory`` cgroup for
its ``memory.limit_in_bytes`` (v1 charges tmpfs, memfd and pipe pages and other kernel
memory to it, but socket buffers only for TCP) and a v1 ``pids`` cgroup for its
``pids.max``: a root Host's Guest runs as the Host's kernel uid inside its user namespace,
which ``RLIMIT_NPROC`` exempts, so a cgroup is the only bound on its threads there.

Where the Host may not create cgroups (not root, no delegation) or the kernel has no
cgroup v2, ``create`` returns None and the Guest has what its level gives: seccomp forbids
new processes from the ``seccomp`` level up, and ``RLIMIT_NPROC`` bounds threads and
processes of an unprivileged Host's Guest (docs/isolation.md).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys

import anyio


@functools.cache
def _base(controller: str = "") -> str | None:
    """The Host's own cgroup directory: v2 (``controller=""``) or a v1 controller's."""
    mount = None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                separator = fields.index("-")
                kind, options = fields[separator + 1], fields[separator + 3].split(",")
                if (kind == "cgroup2" and not controller) or (
                    kind == "cgroup" and controller in options
                ):
                    mount = fields[4]
                    break
        with open("/proc/self/cgroup") as f:
            prefix = f":{controller}:" if controller else "0::"
            own = next(
                (
                    line.strip().split(":", 2)[2]
                    for line in f
                    if (prefix in line if controller else line.startswith(prefix))
                ),
                None,
            )
    except (OSError, ValueError, IndexError):
        return None
    if mount is None or own is None:
        return None
    base = os.path.join(mount, own.lstrip("/"))
    return base if os.path.isdir(base) else None


def _make(base: str | None) -> str | None:
    if base is None:
        return None
    path = os.path.join(base, f"pysolate-guest-{os.urandom(6).hex()}")
    try:
        os.mkdir(path)
    except OSError:
        return None
    return path


_ABSENT: set[tuple[str, str]] = set()
"""(base, file) pairs found missing once: a controller the base does not delegate (stable
while the Host runs), so later Guests do not try it again."""


def _set(path: str, name: str, value: int) -> bool:
    """Write ``value`` to the cgroup file ``name`` (raw ``os`` calls: it runs once per
    Guest start, and a text file object costs more than the write)."""
    key = (os.path.dirname(path), name)
    if key in _ABSENT:
        return False
    try:
        _write(os.path.join(path, name), str(value).encode())
    except FileNotFoundError:
        _ABSENT.add(key)
        return False
    except OSError:
        return False
    return True


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class GuestCgroup:
    """The cgroups holding one Guest's process tree (see module docstring)."""

    def __init__(
        self,
        path: str,
        pids_v1: str | None,
        mechanisms: tuple[str, ...],
        memory_v1: str | None = None,
    ) -> None:
        self.path = path  # the v2 cgroup: kill, and memory/pids where delegated
        self._pids_v1 = pids_v1  # a v1 pids cgroup where v2 has no pids controller
        self._memory_v1 = memory_v1  # a v1 memory cgroup where v2 has no memory controller
        self.mechanisms = mechanisms  # what they enforce: cgroup-kill, cgroup-memory, cgroup-pids

    @classmethod
    def create(cls, *, memory_bytes: int, max_processes: int) -> GuestCgroup | None:
        """New cgroups bounded where the controllers allow, or None where none may be made."""
        path = _make(_base())
        if path is None:
            return None
        if not _killable(path):
            os.rmdir(path)
            return None  # before Linux 5.14: no atomic kill of the tree
        mechanisms = ["cgroup-kill"]
        memory_v1 = None
        if _set(path, "memory.max", memory_bytes):
            _set(path, "memory.swap.max", 0)  # else pages past memory.max go to swap, unbounded
            _set(path, "memory.oom.group", 1)  # an OOM kill ends the whole tree, never a part of it
            mechanisms.append("cgroup-memory")
        else:
            memory_v1 = _make(_base("memory"))
            if memory_v1 is not None and _set(memory_v1, "memory.limit_in_bytes", memory_bytes):
                _set(
                    memory_v1, "memory.memsw.limit_in_bytes", memory_bytes
                )  # (with swap accounting: no swap either)
                mechanisms.append("cgroup-memory")
        pids_v1 = None
        if _set(path, "pids.max", max_processes):
            mechanisms.append("cgroup-pids")
        else:
            pids_v1 = _make(_base("pids"))
            if pids_v1 is not None and _set(pids_v1, "pids.max", max_processes):
                mechanisms.append("cgroup-pids")
        return cls(path, pids_v1, tuple(mechanisms), memory_v1)

    def _paths(self) -> tuple[str, ...]:
        return tuple(
            path for path in (self.path, self._pids_v1, self._memory_v1) if path is not None
        )

    def add(self, pid: int) -> None:
        """Move ``pid`` in (raises ``OSError``; the caller then kills the child)."""
        for path in self._paths():
            _write(os.path.join(path, "cgroup.procs"), str(pid).encode())

    def kill(self) -> None:
        """SIGKILL every process in the cgroup (idempotent, never raises)."""
        with contextlib.suppress(OSError):
            _write(os.path.join(self.path, "cgroup.kill"), b"1")

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the Guest for passing its memory bound
        (v2 ``memory.events``, v1 ``memory.oom_control``: an ``oom_kill`` count above 0)."""
        for path, name in ((self.path, "memory.events"), (self._memory_v1, "memory.oom_control")):
            if path is None or "cgroup-memory" not in self.mechanisms:
                continue
            try:
                with open(os.path.join(path, name)) as f:
                    counts = dict(line.split() for line in f if line.count(" ") == 1)
            except OSError:
                continue
            if int(counts.get("oom_kill", "0")) > 0:
                return True
        return False

    def populated(self) -> bool:
        """Whether any process is still in the cgroup (a killed one takes a moment to go)."""
        try:
            fd = os.open(os.path.join(self.path, "cgroup.events"), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            return b"populated 1\n" in os.read(fd, 4096)
        except OSError:
            return False
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Remove the (empty) cgroups; an error is left for the next boot, never raised."""
        for path in self._paths():
            with contextlib.suppress(OSError):
                os.rmdir(path)


def _killable(path: str) -> bool:
    """Whether cgroups here have ``cgroup.kill`` (Linux >= 5.14): asked once per base
    (a cgroup's files are its kernel's, the same for every sibling)."""
    base = os.path.dirname(path)
    if base not in _KILLABLE:
        _KILLABLE[base] = os.path.exists(os.path.join(path, "cgroup.kill"))
    return _KILLABLE[base]


_KILLABLE: dict[str, bool] = {}


async def enter_cgroup(pid: int, *, memory_bytes: int, max_processes: int) -> GuestCgroup | None:
    """Move a just-started child (under bubblewrap, the interpreter: ``sandboxed_interpreter``)
    into a new ``GuestCgroup``; None where none may be made. Raises ``OSError`` if the move fails.

    Both steps run on a worker thread: writing ``cgroup.procs`` waits for an RCU grace
    period (about 5 ms of wall time, 0.14 ms of CPU, measured), which on the event loop
    would stall every other run of the Host for each Guest start. One trip to the thread,
    once the pid is known: each trip costs the Host about 55 µs of CPU (best of 5 x 500,
    idle thread pool).
    """
    return await anyio.to_thread.run_sync(
        functools.partial(_create_holding, pid, memory_bytes, max_processes)
    )


def _create_holding(pid: int, memory_bytes: int, max_processes: int) -> GuestCgroup | None:
    """A new ``GuestCgroup`` with ``pid`` in it (removed again if the move fails)."""
    cgroup = GuestCgroup.create(memory_bytes=memory_bytes, max_processes=max_processes)
    if cgroup is not None:
        try:
            cgroup.add(pid)
        except BaseException:
            cgroup.remove()
            raise
    return cgroup


async def sandboxed_interpreter(bwrap_pid: int) -> int:
    """The pid of the interpreter bubblewrap starts (as the Host sees it), once it runs.

    bubblewrap forks before it could be moved into a cgroup, so the Host moves the
    interpreter itself; it waits for ``init`` before doing anything, so nothing escapes.
    """
    python = os.stat(os.path.realpath(sys.executable))
    while True:
        pending, seen = [bwrap_pid], []
        while pending:
            pid = pending.pop()
            seen.append(pid)
            with (
                contextlib.suppress(OSError, ValueError),
                open(f"/proc/{pid}/task/{pid}/children") as f,
            ):
                pending += [int(child) for child in f.read().split()]
        for pid in seen[1:]:
            with contextlib.suppress(OSError):
                exe = os.stat(f"/proc/{pid}/exe")
                if (exe.st_dev, exe.st_ino) == (python.st_dev, python.st_ino):
                    return pid
        await anyio.sleep(0.001)
