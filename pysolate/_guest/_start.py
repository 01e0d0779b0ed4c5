"""Start an isolated subprocess Guest: plan its level, spawn or fork the child, ``init``, ``ready``.

``start_subprocess_guest`` is the default ``GuestFactory``. It spawns the child
(``_child.py``, isolated as ``_isolation.plan`` decides), sends it ``init`` and returns once
the child reports ``ready`` — so the Host can start it while the model still streams and
hide its start-up. The Host checks from outside what the child reports it applied
(``_verify``) before it returns; the running Guest is ``_process.SubprocessGuest``.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Mapping, Sequence

import anyio

from .._exceptions import GuestStartError, IsolationUnavailable
from .._guest_api import GuestLimits, Isolation
from . import _forked, _isolation, _verify
from ._cgroup import enter_cgroup
from ._channel import Channel as _Channel
from ._channel import ChannelClosed as _ChannelClosed
from ._frames import ProtocolViolation, ReadyFrame, parse_guest_frame
from ._process import SCRATCH_BYTES, SubprocessGuest
from ._scratch import new_scratch, remove_scratch
from .child import _confine
from .child._wire import encode_frame

START_TIMEOUT = 20.0
"""Seconds a child may take to report ``ready`` before start-up counts as failed."""


async def start_subprocess_guest(
    capabilities: Mapping[str, Sequence[str]],
    limits: GuestLimits,
    *,
    isolation: _isolation.IsolationChoice = "strongest",
    fork_server: bool = True,
) -> SubprocessGuest:
    """Start an isolated Guest child and return once it waits for its source.

    ``capabilities`` maps global names to granted methods; ``isolation`` names the level
    (``_isolation``). ``fork_server``: fork the child from the pre-imported fork server
    (``_forkserver``) where that keeps the level whole (``Plan.forkable``); elsewhere, or if
    the server fails twice, the child is spawned, at the same level. Raises ``IsolationUnavailable`` before any child starts, or when the
    child could not apply its level; ``GuestStartError`` if it dies or is not ready within
    ``START_TIMEOUT``. Cancellation kills and reaps the child, then re-raises.
    """
    plan = _isolation.planned(isolation, SCRATCH_BYTES)  # no thread hop once the machine is probed
    if plan is None:
        plan = await anyio.to_thread.run_sync(_isolation.plan, isolation, SCRATCH_BYTES)
    scratch = None if plan.namespaces else new_scratch()
    host_end, child_end = socket.socketpair()
    t0 = time.perf_counter()
    forked = False
    try:
        # Shielded: a cancellation landing after the fork but before we hold the process
        # would leave a live child nobody kills; once we hold it, cleanup below kills it.
        with anyio.CancelScope(shield=True):
            child = (
                await _forked.fork_child_or_none(plan, scratch or "/tmp", child_end, SCRATCH_BYTES)
                if fork_server
                else None
            )
            forked = child is not None
            process = child or await anyio.open_process(
                [*plan.argv, str(child_end.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={},
                cwd=scratch,
                start_new_session=True,
                pass_fds=(child_end.fileno(),),
            )
    except BaseException:
        host_end.close()
        if scratch is not None:
            remove_scratch(scratch)
        raise
    finally:
        child_end.close()
    channel = _Channel(host_end, limits.max_frame_bytes)
    guest = SubprocessGuest(
        process, channel, capabilities, limits, Isolation("process"), scratch, 0.0
    )
    try:
        with anyio.fail_after(START_TIMEOUT):  # before init: the child runs nothing before it
            pid = await _verify.guest_pid(process, plan)
            guest._cgroup = await enter_cgroup(
                pid,
                memory_bytes=limits.memory_bytes + SCRATCH_BYTES,
                max_processes=limits.max_processes,
            )
        host_mechanisms = guest._cgroup.mechanisms if guest._cgroup is not None else ()
        init = {
            "t": "init",
            "capabilities": {name: list(methods) for name, methods in capabilities.items()},
            "limits": {"max_frame_bytes": limits.max_frame_bytes},
            "confinement": plan.confinement(
                scratch,
                limits,
                SCRATCH_BYTES,
                prepared=process.prepared if isinstance(process, _forked.ForkedProcess) else None,
            ),
        }
        with anyio.fail_after(START_TIMEOUT):
            await channel.send(encode_frame(init))
            ready = parse_guest_frame(await channel.receive())
        if not isinstance(ready, ReadyFrame):
            raise ProtocolViolation("the child's first frame was not ready")
        plan.check_applied(ready.mechanisms, forked=forked)
        applied = _verify.verify_started(
            process, pid, plan, limits, scratch, SCRATCH_BYTES, ready.mechanisms
        )
    except (_ChannelClosed, ProtocolViolation, TimeoutError, OSError) as exc:
        detail = await guest._stderr_after_death(isinstance(exc, _ChannelClosed))
        await guest.aclose()
        if guest._process.returncode == _confine.EXIT_CODE and detail.startswith(
            _confine.STDERR_PREFIX
        ):
            raise IsolationUnavailable(
                f"the Guest could not be isolated at level {plan.level!r}: {detail[len(_confine.STDERR_PREFIX) :]}"
            ) from None
        raise GuestStartError(f"the Guest child did not start ({exc!r}): {detail}") from None
    except BaseException:
        await guest.aclose()
        raise
    forked_mechanism = ("fork-server",) if forked else ()
    guest.isolation = Isolation(
        plan.level, (*plan.mechanisms, *forked_mechanism, *host_mechanisms, *applied)
    )
    guest._startup_seconds = time.perf_counter() - t0
    return guest
