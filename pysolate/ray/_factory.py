"""``RayGuestFactory``: a ``GuestFactory`` whose Guests run on Ray worker nodes.

The Host stays where it is (next to the model stream and the tools); only Guests move. A
factory owns a TCP listener on ``advertise`` and one ``GuestNode`` agent per Guest node.
Starting a Guest is one Ray call: the agent starts an ordinary isolated Guest on its node and
dials back with a hello naming the Guest and its token; from then on the Guest's calls travel
as broker frames on that connection and the Host serves them with its own handler, so
speculation, claims, receipts and traces are the same as for a local Guest.

Ends, each reported as the ``GuestOutcome`` a local Guest would give or as ``crashed``::

    outcome frame                      → the node-side Guest's own outcome (limits included)
    agent or node died (Ray error)     → crashed  GuestCrashed "the Guest node was lost: ..."
    link closed before the outcome     → crashed  GuestCrashed "the link ... closed"
    malformed or oversized frame       → protocol_error
    no outcome within the wall time    → limit    WallTimeLimit (a margin past the node's own)

Cancelling ``run`` closes the link and asks the agent to kill the Guest (shielded, bounded),
then re-raises. Ray is needed on asyncio (``await ObjectRef``): run the Host on asyncio.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import itertools
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import anyio.streams.stapled
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .._guest import GuestStartError
from .._guest._frames import INLINE_FRAME_BYTES, Call, ProtocolViolation, RefusedCall
from .._guest._replies import answer
from .._guest._stepped import envelope_steps, guest_frame, stepped
from .._guest_api import CallHandler, ErrorInfo, GuestLimits, GuestOutcome, Isolation, LimitExceeded
from ._agent import AGENT_RESOURCE, GuestNode
from ._cluster import ensure_connected
from ._link import (
    HELLO_BYTES,
    Link,
    LinkClosed,
    outcome_bound,
    parse_hello,
    parse_json,
    parse_outcome,
)
from ._listen import HelloListener, ListenerStatistics

START_TIMEOUT = 30.0
"""Seconds from asking an agent for a Guest to its hello on the link."""

WALL_MARGIN = 5.0
"""Seconds past the run's wall time the Host waits for the node's own limit to report."""

NAMESPACE = "pysolate"
"""The Ray namespace of the node agents."""

OUTCOME_PREFIX = b'{"t":"outcome"'
"""How every outcome frame starts (``_wire`` encodes compactly, keys in insertion order)."""

CLOSE_TIMEOUT = 5.0
"""Seconds the Host waits for an agent to confirm it killed a Guest."""


@dataclass(slots=True, eq=False)
class _Pending:
    """A Guest asked for and not yet dialled back."""

    token: str
    link_bytes: int
    arrived: anyio.Event = field(default_factory=anyio.Event)
    link: Link | None = None


class RayGuestFactory:
    """Start Guests on Ray nodes. Enter it (``async with``) before the Host uses it.

    ``address``: the Ray cluster (``None``: the one this process is connected to, or a new
    local one). ``agents``: how many node agents; ``None`` starts one on each node that has
    the ``pysolate_guest`` resource, or one anywhere if no node has it. ``advertise``: the
    address agents dial back (the Host's routable IP in a cluster); the listener binds only
    to it. ``isolation``: passed to the node-side ``start_subprocess_guest`` (default: its
    own default, the strongest). ``init``: extra ``ray.init`` options for a local cluster.
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        agents: int | None = None,
        advertise: str = "127.0.0.1",
        port: int = 0,
        isolation: str | None = None,
        init: Mapping[str, Any] | None = None,
    ) -> None:
        self._address = address
        self._agent_count = agents
        self._advertise = advertise
        self._port = port
        self._isolation = isolation
        self._init = dict(init or {})
        self._agents: list[Any] = []
        self._next_agent: itertools.cycle[Any] | None = None
        self._listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None
        self._hellos: HelloListener | None = None  # accepts and bounds connections (``_listen``)
        self._task_group: anyio.abc.TaskGroup | None = None
        self._pending: dict[str, _Pending] = {}
        self.rejected_hellos = 0
        """Connections dropped because their hello named no waiting Guest or the wrong token."""

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> RayGuestFactory:
        if not self._agents:  # (tests may hand in stand-in agents that are not Ray actors)
            await anyio.to_thread.run_sync(self._connect)
        self._next_agent = itertools.cycle(self._agents)
        self._listener = await anyio.create_tcp_listener(
            local_host=self._advertise, local_port=self._port
        )
        self._port = self._listener.extra(anyio.abc.SocketAttribute.local_port)
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        assert isinstance(self._listener, anyio.streams.stapled.MultiListener)
        self._hellos = HelloListener(self._listener.listeners, self._greet)
        self._task_group.start_soon(self._hellos.serve)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._task_group is not None and self._listener is not None
        self._task_group.cancel_scope.cancel()
        try:
            return await self._task_group.__aexit__(exc_type, exc, tb)
        finally:
            await self._listener.aclose()
            self._task_group = None

    def listener_statistics(self) -> ListenerStatistics | None:
        """What the listener has accepted and dropped (``_listen``); None outside ``async with``."""
        return None if self._hellos is None else self._hellos.statistics()

    @property
    def agents(self) -> list[Any]:
        """The node agents' actor handles (``await agent.stats.remote()``)."""
        return list(self._agents)

    def _connect(self) -> None:
        ensure_connected(self._address, self._init)
        remote = ray.remote(GuestNode)
        nodes = [
            n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get(AGENT_RESOURCE)
        ]
        # Named and detached, so every factory of the cluster reuses the same agents (creating
        # an actor is a call to Ray's central store; starting a Guest must not be), and an
        # agent outlives the handles of the factory that created it.
        common = {
            "num_cpus": 0,
            "max_concurrency": 10_000,
            "max_restarts": 0,
            "namespace": NAMESPACE,
            "get_if_exists": True,
            "lifetime": "detached",
        }
        if self._agent_count is None and nodes:
            self._agents = [
                remote.options(
                    **common,
                    name=f"pysolate-guest-node:{node}",
                    resources={AGENT_RESOURCE: 0.001},
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
                ).remote()
                for node in nodes
            ]
        else:
            placement = {"resources": {AGENT_RESOURCE: 0.001}} if nodes else {}
            self._agents = [
                remote.options(
                    **common,
                    **placement,
                    name=f"pysolate-guest-agent:{i}",
                    scheduling_strategy="SPREAD",
                ).remote()
                for i in range(self._agent_count or 1)
            ]
        ray.get([agent.stats.remote() for agent in self._agents])  # placed and alive

    async def _greet(self, stream: anyio.abc.SocketStream) -> None:
        """A new connection: hand it to the Guest its hello names, or drop it. (The listener
        bounds how long, and how many, connections wait here: ``_listen``.)"""
        link = Link(stream, HELLO_BYTES)
        pending = await self._claimed_by(link)
        if pending is None:
            self.rejected_hellos += 1
            await link.aclose()
            return
        link.max_bytes = pending.link_bytes
        pending.link = link
        pending.arrived.set()

    async def _claimed_by(self, link: Link) -> _Pending | None:
        """The waiting Guest whose id and token the link's hello names (once), else None."""
        try:
            hello = parse_hello(await link.receive())
        except (ProtocolViolation, LinkClosed):
            return None
        pending = self._pending.get(hello.gid)
        if (
            pending is None
            or pending.link is not None
            or not hmac.compare_digest(pending.token, hello.token)
        ):
            return None
        return pending

    # -- the GuestFactory ------------------------------------------------------------------

    async def __call__(
        self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits
    ) -> RayGuest:
        """Start a Guest on the next agent; returns once it has dialled back.

        Raises ``RuntimeError`` outside ``async with``, ``GuestStartError`` when the agent
        fails, dies or does not dial back within ``START_TIMEOUT``. Cancellation asks the
        agent to kill the half-started Guest, then re-raises.
        """
        if self._task_group is None or self._next_agent is None:
            raise RuntimeError(
                "enter the factory first: `async with RayGuestFactory(...) as factory`"
            )
        agent = next(self._next_agent)
        gid = secrets.token_hex(8)
        pending = self._pending[gid] = _Pending(
            secrets.token_hex(32), outcome_bound(limits.max_frame_bytes, limits.output_bytes)
        )
        caps = {name: list(methods) for name, methods in capabilities.items()}
        try:
            with anyio.fail_after(START_TIMEOUT):
                placement = await agent.start.remote(
                    gid,
                    caps,
                    dataclasses.asdict(limits),
                    self._advertise,
                    self._port,
                    pending.token,
                    pending.link_bytes,
                    self._isolation,
                )
                await pending.arrived.wait()
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                if pending.link is not None:
                    await pending.link.aclose()
                await _close_remote(agent, gid)
            if isinstance(exc, Exception):
                raise GuestStartError(
                    f"the Guest did not start on its Ray node: {type(exc).__name__}: {exc}"
                ) from None
            raise
        finally:
            self._pending.pop(gid, None)
        assert pending.link is not None
        return RayGuest(agent, gid, pending.link, capabilities, limits, placement)


class RayGuest:
    """One Guest on a Ray node, seen from the Host: ``run`` once, then ``aclose``."""

    def __init__(
        self,
        agent: Any,
        gid: str,
        link: Link,
        capabilities: Mapping[str, Sequence[str]],
        limits: GuestLimits,
        placement: Mapping[str, object],
    ) -> None:
        self._agent = agent
        self._gid = gid
        self._link = link
        self._granted = {name: frozenset(methods) for name, methods in capabilities.items()}
        self._limits = limits
        self.placement = dict(placement)
        """Where it runs: ``node_id``, ``agent_pid``, ``guest_pid``, ``isolation``."""
        reported: Any = placement.get("isolation") or {}
        self.isolation = Isolation(
            reported.get("level", "process"), tuple(reported.get("mechanisms", ()))
        )
        """The isolation the node-side Guest reported at start."""
        self._ran = False
        self._closed = False
        self._call: anyio.CancelScope | None = None  # the call being answered
        self._agent_ran = False  # the agent's run returned: the outcome is on the link

    async def run(self, source: str, handler: CallHandler) -> GuestOutcome:
        """Execute ``source`` once on the node, serving its calls here (module docstring).

        Raises ``RuntimeError`` on a second run; cancellation kills the remote Guest and
        re-raises; an exception from ``handler`` other than ``ToolFailure`` propagates
        after the remote Guest is killed.
        """
        if self._ran or self._closed:
            raise RuntimeError("a Guest runs exactly one program")
        self._ran = True
        lost: list[BaseException] = []
        outcome: GuestOutcome | None = None
        try:
            async with anyio.create_task_group() as tg:
                with anyio.CancelScope() as conversation:
                    tg.start_soon(
                        self._watch, self._agent.run.remote(self._gid, source), lost, conversation
                    )
                    with anyio.move_on_after(self._limits.wall_time + WALL_MARGIN) as wall:
                        try:
                            outcome = await self._converse(handler)
                        except ProtocolViolation as exc:
                            outcome = self._ended("protocol_error", "ProtocolError", str(exc))
                        except LimitExceeded as exc:  # the handler's (the Host's byte budget)
                            outcome = self._ended("limit", exc.info.type, exc.info.message)
                        except LinkClosed:
                            outcome = None
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self.aclose()
        if outcome is not None:
            return outcome
        if wall.cancelled_caught:
            return self._ended(
                "limit", "WallTimeLimit", f"the run took longer than {self._limits.wall_time}s"
            )
        if lost:
            return self._ended(
                "crashed",
                "GuestCrashed",
                f"the Guest node was lost: {type(lost[0]).__name__}: {lost[0]}",
            )
        return self._ended(
            "crashed",
            "GuestCrashed",
            "the link to the Guest node closed before the program finished",
        )

    def _ended(self, status: Any, type_name: str, message: str) -> GuestOutcome:
        return GuestOutcome(status, None, "", ErrorInfo(type_name, message, None), self.isolation)

    async def _watch(
        self, run: Any, lost: list[BaseException], conversation: anyio.CancelScope
    ) -> None:
        """The agent's ``run`` call. It returns once the Guest's outcome is on the link, so a
        call still unanswered then was cut off by the Guest's end (it died mid-call): cancel
        it, as the local broker does. If Ray reports the agent or its node gone, nothing more
        will come over the link."""
        try:
            await run
        except Exception as exc:
            lost.append(exc)
            conversation.cancel()
            return
        self._agent_ran = True
        if self._call is not None:
            self._call.cancel()

    async def _converse(self, handler: CallHandler) -> GuestOutcome:
        calls = 0
        while True:
            payload = await self._link.receive()
            # The agent encodes with the broker's encoder, "t" first: one look at the prefix
            # spares every call a second JSON parse (an outcome spelled otherwise fails closed).
            if payload.startswith(OUTCOME_PREFIX):
                if len(payload) <= INLINE_FRAME_BYTES:
                    return parse_outcome(parse_json(payload))
                raw, value = await stepped(
                    envelope_steps(payload)
                )  # a large outcome, decoded in steps
                return parse_outcome(raw, value)
            frame = await guest_frame(payload)
            if not isinstance(frame, Call | RefusedCall):
                raise ProtocolViolation(f"unexpected {type(frame).__name__} on the link")
            calls += 1
            if calls > self._limits.max_calls:  # the node enforces it too; never trust one side
                raise ProtocolViolation("more calls than the run allows")
            with anyio.CancelScope() as self._call:
                if self._agent_ran:
                    self._call.cancel()
                reply = await answer(calls, frame, self._granted, handler)
            self._call = None
            if self._agent_ran:
                continue  # the Guest ended mid-call: its outcome is next on the link
            await self._link.send(reply)

    async def aclose(self) -> None:
        """Drop the link and have the agent kill the Guest (bounded); idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._link.aclose()
            await _close_remote(self._agent, self._gid)


async def _close_remote(agent: Any, gid: str) -> None:
    with (
        anyio.move_on_after(CLOSE_TIMEOUT),
        contextlib.suppress(Exception),
    ):  # a lost agent took its Guests along
        await agent.close.remote(gid)
