"""The node agent: one long-lived Ray actor per Guest node that starts ordinary Guests there.

Ray creates actors through its central control store (slow, and rate-limited at scale), so
there is no actor per Guest: each node runs one ``GuestNode`` agent and a Guest start is one
method call on it. The agent runs the unchanged local ``start_subprocess_guest`` — the same
isolation, limits and frame validation as a Guest on the Host's own machine — and relays the
Guest's calls to its Host over a TCP link it dials back (``_link``). It holds no Host secret:
what it learns of a run is the capability names, the limits, the sealed source and the
values the Host chooses to send back.

Every way a Guest ends (its run returns, the Host closes it, the run is cancelled, the link
breaks) kills and reaps its process; ``stats()`` lets tests check that nothing is left. If
the agent itself dies (Ray kills it, its node is drained), a reaper process it started learns
of it from the pipe that breaks and kills the agent's Guests: a Guest is its own session, so
nothing else would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from occurrences.plain import NotPlain, from_tagged, to_tagged

from .._guest import SubprocessGuest, start_subprocess_guest
from .._guest._frames import ProtocolViolation
from .._guest._reaper import drain as drain_guest_cleanups
from .._guest_api import CallHandler, GuestLimits, GuestOutcome, ToolFailure
from ._link import Link, LinkClosed, outcome_message, parse_json

AGENT_RESOURCE = "pysolate_guest"
"""The custom Ray resource that marks a node as a Guest node (``ray start --resources``)."""


@dataclass(slots=True, eq=False)
class _Live:
    """A Guest this agent started and has not closed yet."""

    guest: SubprocessGuest
    link: Link
    scope: anyio.CancelScope | None = None  # the running ``run``, cancelled by ``close``
    pid: int = 0
    ran: anyio.Event = field(default_factory=anyio.Event)  # ``run`` has left its Guest alone
    closing: bool = False  # one ``close`` does the work; others wait for ``closed``
    closed: anyio.Event = field(default_factory=anyio.Event)


@dataclass(slots=True)
class _Counts:
    started: int = 0
    failed_starts: int = 0
    runs: int = 0
    closed: int = 0
    pids: list[int] = field(default_factory=list)


_REAPER = """
import os, signal, sys
live = set()
for line in sys.stdin:
    pid = int(line[1:])
    (live.add if line[0] == '+' else live.discard)(pid)
for pid in live:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
"""
"""The reaper: reads ``+pid``/``-pid`` lines; when its stdin closes (the agent exited, however
it exited), it kills the process group of every Guest still listed."""


class _Reaper:
    """The agent's end of the reaper's pipe."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER],
            stdin=subprocess.PIPE,
            start_new_session=True,
            text=True,
        )

    def tell(self, sign: str, pid: int) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(f"{sign}{pid}\n")
        self._process.stdin.flush()

    def stop(self) -> None:
        """Close the pipe (the reaper kills what is still listed, then exits) and reap it."""
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=5)


def _relay(link: Link) -> CallHandler:
    """A handler that asks the Host for each call's result over the link."""

    async def handler(
        capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        await link.send(
            {
                "t": "call",
                "capability": capability,
                "method": method,
                "args": to_tagged(args),
                "kwargs": to_tagged(kwargs),
            }
        )
        reply = parse_json(await link.receive())
        if not isinstance(reply, dict):
            raise ProtocolViolation("the Host's reply is not an object")
        if reply.get("t") == "result":
            return from_tagged(reply["value"])
        if reply.get("t") == "failure":
            exc_args = from_tagged(reply["args"])
            raise ToolFailure(
                str(reply["type"]),
                str(reply["message"]),
                exc_args if isinstance(exc_args, tuple) else (),
            )
        raise ProtocolViolation(f"unexpected reply {reply.get('t')!r}")

    return handler


class GuestNode:
    """The agent's behaviour; ``pysolate.ray`` wraps it with ``ray.remote`` (so this module
    imports without Ray, for tests that drive it directly)."""

    def __init__(self) -> None:
        self._live: dict[str, _Live] = {}
        self._counts = _Counts()
        self._reaper: _Reaper | None = None  # started with the first Guest

    async def start(
        self,
        gid: str,
        capabilities: Mapping[str, Sequence[str]],
        limits: Mapping[str, Any],
        host: str,
        port: int,
        token: str,
        link_bytes: int,
        isolation: str | None = None,
    ) -> dict[str, object]:
        """Start a Guest and dial the Host back; returns where it runs.

        Raises what ``start_subprocess_guest`` raises (the Host reports it as a failed
        start), or ``OSError`` when the Host cannot be reached (the Guest is killed).
        """
        options: dict[str, Any] = {} if isolation is None else {"isolation": isolation}
        try:
            guest = await start_subprocess_guest(capabilities, GuestLimits(**limits), **options)
        except BaseException:
            self._counts.failed_starts += 1
            raise
        try:
            stream = await anyio.connect_tcp(host, port)
            link = Link(stream, link_bytes)
            await link.send({"t": "hello", "gid": gid, "token": token})
        except BaseException:
            await guest.aclose()
            self._counts.failed_starts += 1
            raise
        pid = guest.pid
        if self._reaper is None:
            self._reaper = _Reaper()
        self._reaper.tell("+", pid)
        self._live[gid] = _Live(guest, link, pid=pid)
        self._counts.started += 1
        self._counts.pids.append(pid)
        level = {"level": guest.isolation.level, "mechanisms": list(guest.isolation.mechanisms)}
        return {
            "node_id": _node_id(),
            "agent_pid": os.getpid(),
            "guest_pid": pid,
            "isolation": level,
        }

    async def run(self, gid: str, source: str) -> None:
        """Run the Guest's program, relaying its calls; the outcome goes over the link.

        Unknown ``gid`` (closed meanwhile): nothing runs. Whatever happens, the Guest is
        closed at the end.
        """
        live = self._live.get(gid)
        if live is None:
            return
        self._counts.runs += 1
        try:
            with anyio.CancelScope() as live.scope:
                outcome = await live.guest.run(source, _relay(live.link))
                await live.link.send(outcome_message(outcome, _tagged_value(outcome)))
        except (LinkClosed, ProtocolViolation, ToolFailure):
            pass  # the Host is gone or broke the protocol: nobody to report to
        finally:
            live.ran.set()
            await self.close(gid)

    async def close(self, gid: str) -> None:
        """Kill and reap the Guest and drop its link; idempotent, and returns only once
        the Guest is gone. A running ``run`` is cancelled and finishes its own cleanup
        first: two tasks must never reap one process at once."""
        live = self._live.get(gid)
        if live is None:
            return
        with anyio.CancelScope(shield=True):
            if live.closing:
                await live.closed.wait()
                return
            live.closing = True
            if live.scope is not None and not live.ran.is_set():
                live.scope.cancel()
                await live.ran.wait()
            self._live.pop(gid, None)
            await live.guest.aclose()
            await live.link.aclose()
            if self._reaper is not None:
                self._reaper.tell("-", live.pid)
            self._counts.closed += 1
            live.closed.set()

    async def shutdown(self) -> None:
        """Close every Guest and stop the reaper (an agent that is going away on purpose)."""
        for gid in list(self._live):
            await self.close(gid)
        if self._reaper is not None:
            self._reaper.stop()
            self._reaper = None

    async def stats(self) -> dict[str, object]:
        """Live Guests and counts; ``alive`` lists Guest processes that still exist once the
        clean-ups already handed to the reaper thread are done (a closed Guest is killed at
        once, but may take a moment to be gone)."""
        await anyio.to_thread.run_sync(drain_guest_cleanups, 10.0)
        alive = [pid for pid in self._counts.pids if _exists(pid)]
        return {
            "live": len(self._live),
            "started": self._counts.started,
            "failed_starts": self._counts.failed_starts,
            "runs": self._counts.runs,
            "closed": self._counts.closed,
            "alive_pids": alive,
            "node_id": _node_id(),
            "agent_pid": os.getpid(),
        }


def _tagged_value(outcome: GuestOutcome) -> object:
    if outcome.status != "ok":
        return None
    try:
        return to_tagged(outcome.value)
    except NotPlain:  # the child sends plain data only; be strict anyway
        return to_tagged(repr(outcome.value))


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _node_id() -> str:
    import ray

    if not ray.is_initialized():  # driven directly, outside a Ray worker (asking would start Ray)
        return "local"
    return str(ray.get_runtime_context().get_node_id())
