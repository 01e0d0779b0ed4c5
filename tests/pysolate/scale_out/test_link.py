"""The Host side of Ray Guests, over the real link and real node-side Guests, with the node
agent driven in-process (no Ray runtime): outcomes equal local ones, and the link is guarded."""

from __future__ import annotations

import json
import struct

import anyio
import pytest

from pysolate._guest import GuestStartError, start_subprocess_guest
from pysolate._guest_api import GuestLimits, GuestOutcome, ToolFailure
from pysolate.ray import GuestNode, RayGuestFactory

from .agents import LocalHandle

pytestmark = pytest.mark.anyio

CAPS = {"docs": ["search", "boom"]}
LIMITS = GuestLimits(wall_time=10, output_bytes=2000, max_calls=5)


class Tools:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    async def __call__(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        self.calls.append((method, args))
        if method == "boom":
            raise ToolFailure("KeyError", "no such doc", ("nope",))
        return {"q": args, "n": 1.5, "b": b"\x00", "t": (1, None)}


async def _local(source: str) -> GuestOutcome:
    guest = await start_subprocess_guest(CAPS, LIMITS)
    try:
        return await guest.run(source, Tools())
    finally:
        await guest.aclose()


async def _remote(
    factory: RayGuestFactory, source: str, tools: Tools | None = None
) -> GuestOutcome:
    guest = await factory(CAPS, LIMITS)
    try:
        return await guest.run(source, tools or Tools())
    finally:
        await guest.aclose()


PROGRAMS = [
    "print('hi')\ndocs.search('a\\ud800', k=[1, {'x': 2}])",
    "try:\n    docs.boom()\nexcept KeyError as e:\n    print('caught', e.args)\n1",
    "docs.boom()",
    "1/0",
    "docs.secret()",
    "print('x' * 5000)",
    "[docs.search(i) for i in range(9)]",
    "import os\nos._exit(3)",
    "import os, sys\nos.write(int(sys.argv[-1]), b'\\x00\\x00\\x00\\x02{}')\ndocs.search(1)",
]


def _factory(*handles: object) -> RayGuestFactory:
    factory = RayGuestFactory()
    factory._agents = list(handles)  # stand-ins instead of Ray actors
    return factory


@pytest.mark.parametrize("source", PROGRAMS)
async def test_a_remote_guest_gives_the_local_outcome(source: str) -> None:
    handle = LocalHandle()
    async with _factory(handle) as factory:
        remote = await _remote(factory, source)
    local = await _local(source)
    assert (remote.status, remote.value, remote.stdout, remote.error) == (
        local.status,
        local.value,
        local.stdout,
        local.error,
    )
    assert remote.isolation == local.isolation
    stats = await handle.node.stats()
    assert stats["live"] == 0 and stats["alive_pids"] == [], "nothing left running on the node"


async def test_calls_reach_the_hosts_handler_in_order() -> None:
    tools = Tools()
    async with _factory(LocalHandle()) as factory:
        outcome = await _remote(factory, "docs.search(1)\ndocs.search('two', x=3)\n", tools)
    assert outcome.status == "ok"
    assert tools.calls == [("search", (1,)), ("search", ("two",))]


class _Hanging:
    """A tool that never answers (until cancelled), counting the cancellations."""

    def __init__(self) -> None:
        self.cancelled = 0

    async def __call__(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        return None


async def test_a_guest_that_dies_mid_call_is_a_crash_and_its_call_is_cancelled() -> None:
    """The Host keeps reading the link while a call runs: the crash arrives at once and the
    unanswered call is cancelled, as with a local Guest (test_guest_limits)."""
    tools = _Hanging()
    source = "import os, threading\nthreading.Timer(0.2, os._exit, (1,)).start()\ndocs.search(1)"
    async with _factory(LocalHandle()) as factory:
        with anyio.fail_after(10):
            outcome = await _remote(factory, source, tools)  # type: ignore[arg-type]
    assert outcome.status == "crashed"
    assert tools.cancelled == 1


class _Intruder(GuestNode):
    """An agent that dials back with someone else's Guest id, or the right id and a wrong
    token, before the real hello: neither may reach a Guest."""

    async def start(self, gid, capabilities, limits, host, port, token, link_bytes, isolation=None):  # type: ignore[no-untyped-def]
        for hello in (
            {"t": "hello", "gid": "0" * 16, "token": token},
            {"t": "hello", "gid": gid, "token": "f" * 64},
            {"junk": 1},
        ):
            async with await anyio.connect_tcp(host, port) as stream:
                body = json.dumps(hello).encode()
                await stream.send(struct.pack(">I", len(body)) + body)
                with pytest.raises(
                    (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError)
                ):
                    with anyio.fail_after(5):
                        await stream.receive()  # the Host closes it without a word
        return await super().start(
            gid, capabilities, limits, host, port, token, link_bytes, isolation
        )


async def test_a_hello_with_a_wrong_token_or_unknown_guest_is_dropped() -> None:
    tools = Tools()
    async with _factory(LocalHandle(_Intruder())) as factory:
        outcome = await _remote(factory, "docs.search(1)", tools)
        assert factory.rejected_hellos == 3
    assert outcome.status == "ok" and tools.calls == [("search", (1,))]


class _Oversized(GuestNode):
    """A broken agent: its first frame after the hello claims more bytes than the link allows."""

    async def run(self, gid: str, source: str) -> None:
        live = self._live[gid]
        raw = live.link._stream
        await raw.send(struct.pack(">I", 2**31))
        await anyio.sleep(5)


async def test_an_oversized_frame_on_the_link_is_a_protocol_error() -> None:
    tools = Tools()
    node = _Oversized()
    async with _factory(LocalHandle(node)) as factory:
        with anyio.fail_after(5):
            outcome = await _remote(factory, "docs.search(1)", tools)
    assert outcome.status == "protocol_error" and "exceeds" in outcome.error.message
    assert tools.calls == []
    assert (await node.stats())["live"] == 0


class _Lost(GuestNode):
    """The agent dies while its Guest waits for a call's reply (what Ray reports as an actor error)."""

    async def run(self, gid: str, source: str) -> None:
        await anyio.sleep(0.2)
        raise RuntimeError("the node went away")


async def test_a_lost_node_is_a_crash_and_nothing_more_runs() -> None:
    tools = Tools()
    async with _factory(LocalHandle(_Lost())) as factory:
        with anyio.fail_after(5):
            outcome = await _remote(factory, "docs.search(1)", tools)
    assert outcome.status == "crashed" and "lost" in outcome.error.message
    assert tools.calls == []


async def test_cancelling_a_run_kills_the_remote_guest() -> None:
    handle = LocalHandle()
    started = anyio.Event()

    async def slow(
        capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        started.set()
        await anyio.sleep(30)
        return None

    async with _factory(handle) as factory:
        guest = await factory(CAPS, LIMITS)
        async with anyio.create_task_group() as tg:
            tg.start_soon(guest.run, "docs.search(1)", slow)
            await started.wait()
            tg.cancel_scope.cancel()
    with anyio.fail_after(
        10
    ):  # the kill is asked for before the cancellation propagates; reaping may lag under load
        while (stats := await handle.node.stats())["alive_pids"] or stats["live"]:
            await anyio.sleep(0.05)
    assert stats["closed"] == 1


class _NoStart(GuestNode):
    async def start(self, *args: object, **kwargs: object) -> dict[str, object]:
        raise OSError("no bwrap on this node")


async def test_a_failed_start_is_a_guest_start_error() -> None:
    async with _factory(LocalHandle(_NoStart())) as factory:
        with pytest.raises(GuestStartError, match="no bwrap on this node"):
            await factory(CAPS, LIMITS)


async def test_the_factory_must_be_entered() -> None:
    with pytest.raises(RuntimeError, match="async with"):
        await RayGuestFactory()(CAPS, LIMITS)


async def test_guests_go_round_robin_over_agents() -> None:
    first, second = LocalHandle(), LocalHandle()
    async with _factory(first, second) as factory:
        for _ in range(4):
            assert (await _remote(factory, "1")).status == "ok"
    assert [(await h.node.stats())["runs"] for h in (first, second)] == [2, 2]


async def test_a_large_outcome_is_decoded_in_steps_and_equals_the_local_one() -> None:
    """An outcome frame past ``INLINE_FRAME_BYTES`` (a 40,000-item value, a long stdout)
    takes the stepped decoder (``_stepped.envelope_steps``): the same outcome as locally."""
    source = "print('y' * 1500)\n[[i, str(i), i / 3] for i in range(14000)]"
    async with _factory(LocalHandle()) as factory:
        remote = await _remote(factory, source)
    local = await _local(source)
    assert remote.status == local.status == "ok"
    assert (remote.value, remote.stdout) == (local.value, local.stdout)
