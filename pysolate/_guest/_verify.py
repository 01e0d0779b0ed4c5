"""The Host checks a Guest child's confinement from outside, in ``/proc``, before ``init`` ends.

A child reports in ``ready`` the mechanisms it applied, but a report is only what the
child's code says: an ``rlimits`` run once appended a no-op ``install()`` to the library's
own ``_seccomp.py`` and every later Guest of a new Host ran unfiltered while reporting the
full level. The sources are read-only to every Guest now (``_view``), and the Host no
longer takes the report's word for what the kernel shows anyone: it reads the child's
``/proc/<pid>`` once ``ready`` arrived (the child runs nothing of the program before it)
and fails closed, ``IsolationMismatch``, on any difference. What it reads, for the
mechanisms they prove:

=====================  ===========================================================
``status``             ``Seccomp: 2`` with a filter (``seccomp-allowlist``),
                       ``NoNewPrivs: 1``, all five capability sets empty
                       (``no-capabilities``), not traced (``TracerPid: 0``), the
                       kernel's uids and gids: never root outside bubblewrap, no
                       supplementary group for a root Host (``not-root``)
``status``'s owner     root for a non-dumpable process whose uid is not
                       (``not-dumpable``; where the Guest is the kernel's root,
                       under a root Host's bubblewrap, it cannot be told apart)
``uid_map``/``gid_map``  exactly ``nobody`` mapped, to the expected kernel id, and
                       ``setgroups`` denied outside bubblewrap (``userns-nobody``)
``limits``             every rlimit the spec set (``rlimits``, ``open-file-bound``,
                       ``process-count-bound``)
``mountinfo``          outside bubblewrap: every mount a path reaches read-only but the scratch
                       (``readonly-fs``, so ``no-dev-shm`` too), a tmpfs over ``/proc``
                       (``private-proc``), the scratch a tmpfs of the planned size
                       (``bounded-scratch``)
``ns/*``               under bubblewrap: pid, net and user namespaces not the Host's;
                       a forked Guest's seven namespaces not its fork server's
                       (``own-namespaces``; an unprivileged Host may not read these
                       links of a non-dumpable process, and then skips them)
=====================  ===========================================================

Not observable from outside: Landlock (the kernel shows no other process's domain) and
what the loaded filter allows (``/proc`` shows that one is loaded, not which). Those
names (``UNOBSERVED``) are the child's report, kept only where what can be seen of
them holds (a Landlock child that reported seccomp has a filter loaded); they come from
code the Guest cannot have changed. Reading these files costs the Host about 0.4 ms of CPU
per Guest start, on the event loop (a fresh pid's ``/proc`` files are made on first
read; 160-180 µs read again, 260-280 µs under bubblewrap: fourteen namespace links more;
docs/benchmarks.md, "Checking a Guest from outside").
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio.abc

from .._exceptions import IsolationMismatch
from .._guest_api import GuestLimits
from . import _forked, _isolation
from ._cgroup import sandboxed_interpreter

LANDLOCK = ("landlock-fs", "landlock-no-tcp", "landlock-scoped", "no-exec")
"""What a Landlock child reports (and ``landlock-abi<N>``): the kernel shows no other
process's Landlock domain, so these are the child's word."""

FILTER_CONTENTS = ("no-fork", "no-sockets", "no-io-uring", "no-memfd", "no-sigio", "no-file-writes")
"""What the child's filter refuses: ``/proc`` shows that a filter is loaded, not which, so
these are the child's word where the Host sees a filter (``seccomp-allowlist``)."""

OBSERVED = (
    "rlimits",
    "open-file-bound",
    "process-count-bound",
    "userns-nobody",
    "not-root",
    "readonly-fs",
    "private-proc",
    "no-dev-shm",
    "bounded-scratch",
    "own-namespaces",
    "no-capabilities",
    "no-new-privs",
    "not-dumpable",
    "not-traced",
    "seccomp-allowlist",
)
"""What the Host reads in ``/proc`` (see module docstring), in the order it reports them."""

PROC = "/proc"
"""Where the Guest's ``/proc/<pid>`` is read (tests point it at a copy)."""

_NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")
_CAPABILITY_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
_STATUS_FIELDS = re.compile(
    r"^(Uid|Gid|Groups|NoNewPrivs|Seccomp|Seccomp_filters|TracerPid|Cap[A-Z][a-z]+):[ \t]*(.*?)[ \t]*$",
    re.M,
)
_LIMIT_LINES = re.compile(
    r"^(Max (?:cpu time|address space|file size|core file size|open files|processes)) +(\S+) +(\S+)",
    re.M,
)
_LIMITS = {
    "Max cpu time": "cpu",
    "Max address space": "as",
    "Max file size": "fsize",
    "Max core file size": "core",
    "Max open files": "nofile",
    "Max processes": "nproc",
}


@dataclass(frozen=True, slots=True)
class Expected:
    """What one Guest's ``/proc`` must show (from its plan, limits and scratch)."""

    plan: _isolation.Plan
    limits: GuestLimits
    scratch: str
    """Its scratch mount point as it sees it (under bubblewrap: ``/tmp``)."""
    scratch_bytes: int
    forked: bool
    outside_pid: int | None = None
    """Under bubblewrap, the process whose namespaces the Guest must not share: a forked
    Guest's fork server, a spawned one's Host."""


class _Findings:
    """What ``/proc`` showed: the mechanisms that hold, why each other does not, and the
    ones this Guest's ``/proc`` cannot show (then the child's report stands)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.why: dict[str, Callable[[], str]] = {}
        self.hidden: set[str] = set()

    def check(self, name: str, holds: bool, why: Callable[[], str]) -> None:
        """Record ``name`` as seen, or ``why`` not (formatted only if it is reported)."""
        if holds:
            self.seen.add(name)
        else:
            self.why[name] = why


async def guest_pid(process: anyio.abc.Process, plan: _isolation.Plan) -> int:
    """The pid (the Host's) of the process that runs the program: a forked child's Guest
    (under ``namespaces``, pid 2 below its init), bubblewrap's sandboxed interpreter, or
    the spawned child itself."""
    if isinstance(process, _forked.ForkedProcess):
        return process.guest_pid
    if plan.namespaces:
        return await sandboxed_interpreter(process.pid)
    return process.pid


def verify_started(
    process: anyio.abc.Process,
    pid: int,
    plan: _isolation.Plan,
    limits: GuestLimits,
    scratch: str | None,
    scratch_bytes: int,
    reported: Sequence[str],
) -> tuple[str, ...]:
    """``verify`` a child that just sent ``ready`` (``pid``: ``guest_pid``'s); ``scratch``:
    its scratch mount point on the Host (None under bubblewrap: its ``/tmp``)."""
    forked = isinstance(process, _forked.ForkedProcess)
    outside = None  # whose namespaces a namespaces Guest must not share: its fork server's (its init's parent), or the Host's
    if plan.namespaces:
        outside = _parent(process.pid) if forked else os.getpid()
    return verify(
        Expected(plan, limits, scratch or "/tmp", scratch_bytes, forked, outside), pid, reported
    )


def _parent(pid: int) -> int:
    return int(_read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[1])


def verify(expected: Expected, pid: int, reported: Sequence[str]) -> tuple[str, ...]:
    """The mechanisms ``pid`` is seen to have, then those it reported that no one can see.

    Raises ``IsolationMismatch`` when a mechanism its level requires, or one it reported,
    is not what ``/proc/<pid>`` shows, or the child is gone.
    """
    try:
        found = _observe(expected, pid)
    except (OSError, ValueError, IndexError, KeyError) as exc:
        raise IsolationMismatch(
            f"the Host could not read the Guest child's /proc/{pid}: {exc!r}"
        ) from None
    claimed = {*expected.plan.requires(forked=expected.forked), *reported}
    if claimed & set(FILTER_CONTENTS):
        claimed.add("seccomp-allowlist")  # a filter's contents without a filter are a lie too
    missing = sorted(
        m for m in claimed if m in OBSERVED and m not in found.hidden and m not in found.seen
    )
    if missing:
        lied = sorted(set(missing) & set(reported))
        raise IsolationMismatch(
            f"the Guest child at level {expected.plan.level!r} lacks {', '.join(missing)}"
            + (f" (it reported {', '.join(lied)})" if lied else " (its level requires them)")
            + ": "
            + "; ".join(found.why[m]() for m in missing)
        )
    unseen = [
        m
        for m in reported
        if m in LANDLOCK
        or m.startswith("landlock-abi")
        or m in FILTER_CONTENTS
        or m in found.hidden
    ]
    return (*[m for m in OBSERVED if m in claimed and m in found.seen], *unseen)


def _observe(expected: Expected, pid: int) -> _Findings:
    plan, found = expected.plan, _Findings()
    base = f"{PROC}/{pid}"
    status = dict(_STATUS_FIELDS.findall(_read(f"{base}/status")))
    uid, gid = _kernel_ids(plan)
    ids = (status["Uid"].split(), status["Gid"].split())
    found.check(
        "not-root",
        ids == ([str(uid)] * 4, [str(gid)] * 4)
        and uid != 0
        and (not plan._root or not status.get("Groups")),
        lambda: (
            f"Uid {status['Uid']!r}, Gid {status['Gid']!r}, Groups {status.get('Groups', '')!r}"
        ),
    )
    found.check(
        "no-capabilities",
        all(int(status[name], 16) == 0 for name in _CAPABILITY_SETS),
        lambda: ", ".join(f"{name} {status[name]}" for name in _CAPABILITY_SETS),
    )
    found.check(
        "no-new-privs",
        status.get("NoNewPrivs") == "1",
        lambda: f"NoNewPrivs {status.get('NoNewPrivs')!r}",
    )
    found.check(
        "not-traced",
        status.get("TracerPid") == "0",
        lambda: f"TracerPid {status.get('TracerPid')!r}",
    )
    found.check(
        "seccomp-allowlist",
        status.get("Seccomp") == "2" and int(status.get("Seccomp_filters", "0")) >= 1,
        lambda: (
            f"Seccomp {status.get('Seccomp')!r} with {status.get('Seccomp_filters', '0')} filters"
        ),
    )
    if uid == 0:  # a non-dumpable process's files are root's; a kernel root Guest's are anyway
        found.hidden.add("not-dumpable")
    else:
        owner = os.stat(f"{base}/status").st_uid
        found.check(
            "not-dumpable",
            owner == 0,
            lambda: f"/proc/{pid}/status is owned by uid {owner}, so it is dumpable",
        )
    maps = (_read(f"{base}/uid_map").split(), _read(f"{base}/gid_map").split())
    denied = plan.namespaces or _read(f"{base}/setgroups").strip() == "deny"
    found.check(
        "userns-nobody",
        maps == (["65534", str(uid), "1"], ["65534", str(gid), "1"]) and denied,
        lambda: (
            f"uid_map {' '.join(maps[0])!r}, gid_map {' '.join(maps[1])!r}, setgroups {'deny' if denied else 'allow'}"
        ),
    )
    _check_limits(expected, _read(f"{base}/limits"), found)
    if not plan.namespaces or expected.forked:
        _check_mounts(expected, _read(f"{base}/mountinfo"), found)
    if expected.outside_pid is not None:
        _check_namespaces(pid, expected.outside_pid, found)
    return found


def _kernel_ids(plan: _isolation.Plan) -> tuple[int, int]:
    """The uid and gid the kernel must see the Guest as: ``nobody`` for a root Host's Guest
    outside bubblewrap, else the Host's own (bubblewrap, or an unprivileged Host, maps it)."""
    if plan._root and not plan.namespaces:
        return 65534, 65534
    return os.getuid(), os.getgid()


def _check_limits(expected: Expected, text: str, found: _Findings) -> None:
    got = {_LIMITS[label]: (soft, hard) for label, soft, hard in _LIMIT_LINES.findall(text)}
    limits = expected.limits
    cpu = max(1, math.ceil(limits.cpu_time))
    wanted = {
        "cpu": (cpu, cpu + 1),
        "as": (limits.memory_bytes,) * 2,
        "fsize": (expected.scratch_bytes,) * 2,
        "core": (0, 0),
    }
    found.check(
        "rlimits",
        all(got.get(key) == tuple(map(str, value)) for key, value in wanted.items()),
        lambda: f"limits {got}",
    )
    found.check(
        "open-file-bound",
        got.get("nofile") == (str(limits.max_open_files),) * 2,
        lambda: f"Max open files {got.get('nofile')}",
    )
    processes = expected.plan.max_processes(limits)
    found.check(
        "process-count-bound",
        processes is not None and got.get("nproc") == (str(processes),) * 2,
        lambda: f"Max processes {got.get('nproc')}",
    )


def _check_mounts(expected: Expected, text: str, found: _Findings) -> None:
    """Every mount read-only but the scratch's top one; a tmpfs on top of ``/proc``."""
    mounts = []  # (id, parent id, mount point, per-mount options, type, super options)
    for line in text.splitlines():
        fields = line.split()
        at = fields.index("-")
        mounts.append(
            (
                fields[0],
                fields[1],
                _unescape(fields[4]),
                fields[5].split(","),
                fields[at + 1],
                fields[at + 3].split(","),
            )
        )
    below = {
        (parent, point) for _, parent, point, *_ in mounts
    }  # a mount with one on top of it, at the same point
    top = {mount[2]: mount for mount in mounts if (mount[0], mount[2]) not in below}
    by_id = {mount[0]: mount for mount in mounts}
    scratch = top.get(expected.scratch)
    writable = [
        mount[2]
        for mount in mounts
        if "ro" not in mount[3] and mount is not scratch and _reachable(mount, top, by_id)
    ]
    found.check("readonly-fs", not writable, lambda: f"writable mounts: {', '.join(writable)}")
    found.check("no-dev-shm", not writable, lambda: f"writable mounts: {', '.join(writable)}")
    proc = top.get("/proc")
    found.check(
        "private-proc",
        proc is not None and proc[4] == "tmpfs",
        lambda: f"the top mount on /proc is {proc[4] if proc else None}",
    )
    size = f"size={expected.scratch_bytes // 1024}k"
    found.check(
        "bounded-scratch",
        scratch is not None and scratch[4] == "tmpfs" and size in scratch[5],
        lambda: f"the scratch mount is {scratch[4:] if scratch else None}",
    )


def _reachable(mount: tuple, top: dict[str, tuple], by_id: dict[str, tuple]) -> bool:
    """Whether a path reaches ``mount``: it is the top one at its mount point, and so is
    each mount it hangs from (a root Host's child writes its maps through a ``/proc`` that
    it then covers: that one, and what is mounted in it, no path reaches)."""
    if top.get(mount[2]) is not mount:
        return False
    while (parent := by_id.get(mount[1])) is not None and parent is not mount:
        if parent[2] != mount[2] and top.get(parent[2]) is not parent:
            return False  # (the same point: stacked, the one below holds it up)
        mount = parent
    return True


def _check_namespaces(pid: int, outside_pid: int, found: _Findings) -> None:
    try:
        own = [os.stat(f"{PROC}/{pid}/ns/{name}").st_ino for name in _NAMESPACES]
        outside = [os.stat(f"/proc/{outside_pid}/ns/{name}").st_ino for name in _NAMESPACES]
    except PermissionError:
        if os.geteuid() == 0:
            raise
        found.hidden.add(
            "own-namespaces"
        )  # an unprivileged Host may not read a non-dumpable process's links
        return
    shared = [name for name, a, b in zip(_NAMESPACES, own, outside, strict=True) if a == b]
    found.check(
        "own-namespaces",
        not shared,
        lambda: f"it shares its {', '.join(shared)} namespaces with process {outside_pid}",
    )


def _unescape(path: str) -> str:
    """A mount point as ``mountinfo`` writes it (space, tab, newline, backslash octal-escaped)."""
    if "\\" not in path:
        return path
    return re.sub(r"\\([0-7]{3})", lambda escape: chr(int(escape.group(1), 8)), path)


def _read(path: str) -> str:
    """A whole ``/proc`` file; one ``read`` where it fits (these are far below 64 KiB)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, _CHUNK)]
        while len(chunks[-1]) == _CHUNK:
            chunks.append(os.read(fd, _CHUNK))
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


_CHUNK = 65536
