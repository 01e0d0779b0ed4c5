"""CPU of a process tree to the microsecond, pid namespaces included: a cgroup v2 of its own.

``RUSAGE_CHILDREN`` counts only reaped children, and bubblewrap's init reaps the sandboxed
ones inside another pid namespace, so their CPU never reaches the benchmark; a fork server's
``/proc/<pid>/stat`` has 10 ms clock ticks. A cgroup's ``cpu.stat`` ``usage_usec`` counts
every process in it and in every descendant cgroup (a removed one's usage is flushed into
its parent), in µs. ``CgroupMeter.enter`` creates a child of the benchmark's own cgroup v2
and moves the benchmark into it before any Guest starts; Pysolate creates each Guest's
cgroup beside the Host (``pysolate/_guest/_cgroup.py``), i.e. beneath the meter's.
"""

from __future__ import annotations

import atexit
import contextlib
import os


def usage_usec(text: str) -> int:
    """``usage_usec`` of a ``cpu.stat`` file's text (present with or without the cpu controller)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value)
    raise ValueError("cpu.stat has no usage_usec")


def own_cgroup(mountinfo: str, proc_cgroup: str) -> str | None:
    """This process's cgroup v2 directory from ``/proc/self/mountinfo`` and ``/proc/self/cgroup``."""
    mount = next(
        (
            fields[4]
            for fields in map(str.split, mountinfo.splitlines())
            if "-" in fields and fields[fields.index("-") + 1] == "cgroup2"
        ),
        None,
    )
    own = next(
        (line.split(":", 2)[2] for line in proc_cgroup.splitlines() if line.startswith("0::")), None
    )
    return None if mount is None or own is None else os.path.join(mount, own.lstrip("/"))


class CgroupMeter:
    """A cgroup v2 the benchmark runs in; ``seconds`` is its ``usage_usec`` so far."""

    FALLBACK = "no cgroup v2 delegation here: RUSAGE_CHILDREN + fork servers' /proc stat (10 ms ticks; misses what bubblewrap's init reaps)"

    def __init__(self, path: str, origin: str) -> None:
        self.path = path
        self.origin = origin
        self.how = f"cgroup v2 cpu.stat usage_usec delta of {path} (the benchmark, fork servers, every Guest cgroup beneath it; µs)"

    @classmethod
    def enter(cls) -> CgroupMeter | None:
        """Move this process into a new child of its cgroup v2; None where that is not allowed."""
        try:
            with open("/proc/self/mountinfo") as m, open("/proc/self/cgroup") as c:
                origin = own_cgroup(m.read(), c.read())
            if origin is None:
                return None
            for stale in os.listdir(origin):  # a past run's, left while its fork servers lived
                if stale.startswith("pysolate-bench-"):
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(origin, stale))
            path = os.path.join(origin, f"pysolate-bench-{os.getpid()}")
            os.mkdir(path)
        except OSError:
            return None
        try:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            meter = cls(path, origin)
            meter.seconds()
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                os.rmdir(path)
            return None
        atexit.register(meter.leave)
        return meter

    def seconds(self) -> float:
        with open(os.path.join(self.path, "cpu.stat")) as f:
            return usage_usec(f.read()) / 1e6

    def leave(self) -> None:
        """Move back to the original cgroup and remove the meter's (best effort)."""
        with contextlib.suppress(OSError):
            with open(os.path.join(self.origin, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            os.rmdir(self.path)
