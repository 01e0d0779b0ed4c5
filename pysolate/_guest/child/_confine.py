"""Everything a Guest child does to itself before the program runs, in one ordered call.

``confine(spec)`` is the only entry point; the child (``_child.main``) calls it once after
importing what it needs and before it reports ``ready``, and a forked Guest (a fork server)
must call the same function with the same spec. The order matters:

1. **rlimits** — CPU, address space, file size, no core dumps. Set first, so that
   nothing after them runs unbounded (and, their hard limits lowered, none can be raised).
2. **privileges** — outside bubblewrap, a private user + mount namespace as ``nobody``
   (to the kernel too, for a root Host) with every mount read-only, ``/proc`` and
   ``/dev/shm`` hidden and the scratch dir size-bounded
   (``_privileges.enter_user_namespace``); always: no capabilities, ``no_new_privs``,
   not dumpable (``_privileges.drop``).
3. **Landlock** — read only what the interpreter needs, write only scratch, no exec, no
   TCP, scoped signals and abstract sockets (``_landlock.restrict``). Needs 2.
4. **counts** — open files (``RLIMIT_NOFILE``) and threads and processes
   (``RLIMIT_NPROC``). After 2: ``RLIMIT_NPROC`` counts per user namespace, and a
   namespace made under a lowered limit would impose it on every process of the same
   kernel uid (every Guest of the machine). After 3: a fork server's prepared Landlock
   rules are a few hundred fds, closed only then.
5. **seccomp** — the allow-list (``_seccomp.install``), and asyncio's self-pipe made a
   pipe, since it refuses ``socketpair`` (``_self_pipe``). Last, because it forbids the
   calls 1-4 make.

Fail closed: any step that fails raises ``ConfinementFailed`` and the caller must exit
without running the program; the Host then refuses the level (``IsolationUnavailable``)
instead of running weaker.

The spec is plain JSON built by the Host (``_isolation.Plan.confinement``)::

    {"cpu_time": 10, "memory_bytes": ..., "scratch_bytes": ..., "max_processes": 64 | None,
     "max_open_files": 64,
     "user_namespace": {"scratch": "/tmp/pysolate-guest-x", "reveal": [["/root", [...]]]} | None,
     "landlock": {"abi": 7, "read": [...], "list": [...], "write": [...]}
               | {"abi": 7, "digest": "...", "write": [...]} | None,  (a fork server's prepared rules)
     "seccomp": {"library": "/usr/lib/.../libseccomp.so.2", "restrict_files": false} | None}
"""

from __future__ import annotations

from typing import Any

EXIT_CODE = 78
"""The child's exit status when confinement failed (its stderr says which step)."""

STDERR_PREFIX = "pysolate-confinement-failed: "


class ConfinementFailed(Exception):
    """A confinement step failed; the program must not run."""


def confine(spec: dict[str, Any]) -> list[str]:
    """Apply every step of ``spec`` to this process, in order; returns the mechanisms.

    Raises ``ConfinementFailed`` naming the step that failed.
    """
    mechanisms: list[str] = []
    step = "rlimits"
    try:
        mechanisms += _apply_rlimits(spec)
        step = "user namespace"
        if spec.get("user_namespace"):
            from . import _privileges

            namespace = spec["user_namespace"]
            mechanisms += _privileges.enter_user_namespace(
                namespace["scratch"], spec["scratch_bytes"], namespace.get("reveal", ())
            )
        step = "privileges"
        from . import _privileges

        mechanisms += _privileges.drop()
        if spec.get("landlock"):
            step = "landlock"
            mechanisms += _restrict(spec["landlock"])
        _release_prepared()  # a forked child of a server that prepared rules it does not use
        step = "counts"
        mechanisms += _apply_counts(spec)
        if spec.get("seccomp"):
            step = "seccomp"
            from . import _seccomp, _self_pipe

            filter_spec = spec["seccomp"]
            mechanisms += _seccomp.install(
                filter_spec["library"],
                restrict_files=filter_spec["restrict_files"],
                strict=filter_spec.get("strict", False),
            )
            _self_pipe.install()
    except (OSError, ValueError) as exc:
        raise ConfinementFailed(f"{step}: {exc}") from None
    return mechanisms


_PREPARED: tuple[str, Any] | None = None
"""A fork server's prepared Landlock rules (``prepare``): their digest and the
``_landlock.Prepared`` whose fds each forked child inherits and closes."""


def prepare(spec: dict[str, Any], digest: str, *, lowest_fd: int) -> list[int]:
    """In a fork server: open the read and list rules of ``spec`` (``abi``, ``read``,
    ``list``) once for every child it forks, at ``lowest_fd`` or above, under the Host's
    ``digest`` of that spec; returns the fds a child must keep until it confines itself. Raises ``OSError`` (the server then prepares nothing, and a child
    told to use prepared rules fails closed)."""
    global _PREPARED
    from . import _landlock

    prepared = _landlock.Prepared(
        spec["read"], version=spec["abi"], list_only=spec["list"], lowest_fd=lowest_fd
    )
    _PREPARED = (digest, prepared)
    return list(prepared.fds)


def _restrict(rules: dict[str, Any]) -> list[str]:
    """Landlock: from the fork server's prepared rules when ``rules`` names their digest
    (any other digest, or none prepared, fails closed), else from the paths themselves."""
    from . import _landlock

    if "digest" not in rules:
        return _landlock.restrict(
            rules["read"], rules["write"], version=rules["abi"], list_only=rules["list"]
        )
    if _PREPARED is None or _PREPARED[0] != rules["digest"] or _PREPARED[1].version != rules["abi"]:
        raise OSError("the fork server's prepared rules are not the ones the Host planned")
    return list(_PREPARED[1].restrict(rules["write"]))


def _release_prepared() -> None:
    """Close the prepared rules' fds: the program never holds them."""
    global _PREPARED
    if _PREPARED is not None:
        _PREPARED[1].close()
        _PREPARED = None


def _apply_rlimits(spec: dict[str, Any]) -> list[str]:
    import math
    import resource

    cpu = max(1, math.ceil(spec["cpu_time"]))
    settings = [
        (resource.RLIMIT_CPU, cpu, cpu + 1),  # soft: SIGXCPU (the Host reports CPUTimeLimit)
        (resource.RLIMIT_AS, spec["memory_bytes"], spec["memory_bytes"]),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_FSIZE, spec["scratch_bytes"], spec["scratch_bytes"]),
    ]
    for which, soft, hard in settings:
        resource.setrlimit(which, (soft, hard))
    return ["rlimits"]


def _apply_counts(spec: dict[str, Any]) -> list[str]:
    import resource

    mechanisms = []
    if spec.get("max_open_files"):
        resource.setrlimit(resource.RLIMIT_NOFILE, (spec["max_open_files"], spec["max_open_files"]))
        mechanisms.append("open-file-bound")
    if spec.get("max_processes"):
        resource.setrlimit(resource.RLIMIT_NPROC, (spec["max_processes"], spec["max_processes"]))
        mechanisms.append("process-count-bound")
    return mechanisms
