"""Which isolation a Guest child gets: the levels, the one a Host asks for, the plan.

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

What this machine offers is probed once (``_machine``); what a child may read is
``_filesystem``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from .._exceptions import IsolationUnavailable
from .._guest_api import GuestLimits
from ._filesystem import INTERPRETER_FLAGS as INTERPRETER_FLAGS
from ._filesystem import PACKAGE_ROOT as PACKAGE_ROOT
from ._filesystem import SANDBOX_ROOT as SANDBOX_ROOT
from ._filesystem import bwrap_argv, landlock_lists, landlock_reads
from ._filesystem import interpreter as interpreter
from ._filesystem import reveals as reveals
from ._machine import HIDE_BWRAP_ENV as HIDE_BWRAP_ENV
from ._machine import LEVELS as LEVELS
from ._machine import Level as Level
from ._machine import Machine as Machine
from ._machine import machine as machine
from ._machine import probed
from ._machine import seccomp_library as seccomp_library

IsolationChoice = Literal["strongest", "rlimits", "seccomp", "landlock", "namespaces"]
"""What a Host asks for: the strongest available (at least ``DEFAULT_MINIMUM``), or a level."""

DEFAULT_MINIMUM: Level = "landlock"
"""What ``"strongest"`` must reach: file-system isolation (landlock or namespaces)."""

FORKED_NAMESPACES = ("own-namespaces", "userns-nobody", "private-proc", "bounded-scratch")
"""What a forked ``namespaces`` child reports having made itself (``_unshare.enter``)."""


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

    def confinement(
        self,
        scratch: str | None,
        limits: GuestLimits,
        scratch_bytes: int,
        *,
        prepared: str | None = None,
    ) -> dict[str, Any]:
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
            "user_namespace": {"scratch": scratch, "reveal": self._reveal}
            if own_user_namespace
            else None,
            "landlock": landlock,
            "seccomp": (
                {"library": self._seccomp_library, "restrict_files": self.level == "seccomp"}
                if self.level != "rlimits"
                else None
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
        made_outside = (
            "not-traced",
            *(("own-namespaces", "userns-nobody") if self.namespaces and not forked else ()),
        )  # (bubblewrap's)
        missing = [
            m for m in self.requires(forked=forked) if m not in mechanisms and m not in made_outside
        ]
        if missing:
            raise IsolationUnavailable(
                f"the Guest child did not apply {', '.join(missing)} (isolation={self.level!r})"
            )

    def requires(self, *, forked: bool = False) -> tuple[str, ...]:
        """Mechanisms a Guest must have, or the Host refuses to run it: the child reports them
        (but ``not-traced``, and what bubblewrap makes for a spawned ``namespaces`` child;
        a ``forked`` one made its namespaces, /proc cover and /tmp itself) and the Host
        checks in ``/proc`` each one it can see (``_verify``)."""
        needed = [
            "rlimits",
            "open-file-bound",
            "no-capabilities",
            "no-new-privs",
            "not-dumpable",
            "not-traced",
            "userns-nobody",
        ]
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
    return hashlib.sha256(
        json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


@functools.cache
def _landlock_digest(plan: Plan) -> str:
    return _digest(_landlock_rules(plan))


def prepared_landlock(*, sandboxed: bool) -> dict[str, Any] | None:
    """The Landlock rules a fork server prepares for its children (``_confine.prepare``):
    those of the ``landlock`` level (``sandboxed``: of ``namespaces``), or None without Landlock."""
    found = machine()
    if not found.landlock_abi:
        return None
    return {
        "abi": found.landlock_abi,
        "read": list(landlock_reads(sandboxed=sandboxed)),
        "list": list(landlock_lists()),
    }


def prepared_digest(spec: dict[str, Any] | None) -> str | None:
    """The digest a fork server computes for ``spec`` (``prepared_landlock``), or None."""
    return _digest(spec) if spec else None


def resolve(choice: IsolationChoice) -> Level:
    """The level ``choice`` means on this machine.

    Raises ``IsolationUnavailable`` when the machine lacks it (the message says what is
    missing and how to get it), and ``ValueError`` for an unknown choice.
    """
    if choice != "strongest" and choice not in LEVELS:
        raise ValueError(
            f"isolation must be 'strongest' or one of {', '.join(LEVELS)}; got {choice!r}"
        )
    found = machine()
    if choice != "strongest":
        missing = found.missing(choice)
        if missing:
            raise IsolationUnavailable(
                f"isolation={choice!r} is not available here; missing: " + "; ".join(missing)
            )
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
        argv = tuple(bwrap_argv(found.bwrap, python, scratch_bytes))
        setpriv = shutil.which("setpriv") if found.root else None
        if setpriv:  # bwrap keeps a root caller's supplementary groups; the Host's fork+setgroups would be slow
            argv = (setpriv, "--clear-groups", "--", *argv)
            mechanisms.append("no-supplementary-groups")
        return Plan(
            level,
            argv,
            True,
            abi,
            tuple(mechanisms),
            landlock_reads(sandboxed=True),
            library,
            found.root,
        )
    child = str(PACKAGE_ROOT / "pysolate" / "_guest" / "child" / "_child.py")
    reads = landlock_reads(sandboxed=False) if abi else ()
    reveal = reveals(python)[0] if found.root else ()
    return Plan(
        level,
        (python, *INTERPRETER_FLAGS, child),
        False,
        abi,
        tuple(mechanisms),
        reads,
        library,
        found.root,
        reveal,
    )


def planned(choice: IsolationChoice, scratch_bytes: int) -> Plan | None:
    """``plan`` without blocking: the plan once the probe has run for the current knob
    setting (and ``choice`` resolves), else None (then call ``plan`` off the event loop)."""
    if not probed():
        return None
    return plan(choice, scratch_bytes)


def plan(choice: IsolationChoice, scratch_bytes: int) -> Plan:
    """The plan for ``choice`` on this machine (blocks once, probing). Raises
    ``IsolationUnavailable`` and ``ValueError`` as ``resolve`` does."""
    level = resolve(choice)
    return _plan(level, scratch_bytes, machine())
