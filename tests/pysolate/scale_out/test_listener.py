"""The factory's listener survives what anyone who can reach its port can do (issue 35, item 6).

Before: a connection that sent no hello was held 5 s with no cap, and ``EMFILE`` from
``accept`` left ``listener.serve`` and cancelled every run inside ``async with
RayGuestFactory(...)``. Now at most ``MAX_WAITING`` connections wait (the oldest is evicted),
each for ``HELLO_TIMEOUT`` at most, and a short descriptor table only makes the loop back off.
No Ray runtime: the agents are the in-process stand-ins of ``agents.py``.
"""

from __future__ import annotations

import errno
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import anyio.abc
import pytest

from pysolate._guest_api import GuestLimits
from pysolate.ray import RayGuestFactory
from pysolate.ray._listen import MAX_WAITING, HelloListener

from .agents import LocalHandle

pytestmark = pytest.mark.anyio

CAPS = {"docs": ["search"]}
LIMITS = GuestLimits(wall_time=10)


async def _echo(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    return args


def _factory(*handles: object) -> RayGuestFactory:
    factory = RayGuestFactory()
    factory._agents = list(handles)  # stand-ins instead of Ray actors
    return factory


async def test_a_flood_of_silent_connections_leaves_room_for_a_guest() -> None:
    """300 connections that never say hello, open all along: the listener holds at most
    ``MAX_WAITING`` of them, and a Guest started in the middle of the flood runs."""
    async with _factory(LocalHandle()) as factory:
        port = factory._port
        silent: list[anyio.abc.SocketStream] = []
        try:
            for _ in range(300):
                silent.append(await anyio.connect_tcp("127.0.0.1", port))
            with anyio.fail_after(20):
                guest = await factory(CAPS, LIMITS)
                try:
                    outcome = await guest.run("docs.search(1)", _echo)
                finally:
                    await guest.aclose()
            stats = factory.listener_statistics()
            assert stats is not None
            assert stats.waiting <= MAX_WAITING
            assert stats.evicted >= 300 - MAX_WAITING
        finally:
            for stream in silent:
                await stream.aclose()
    assert outcome.status == "ok" and outcome.value == (1,)


async def test_a_connection_that_stays_silent_is_dropped_at_its_deadline() -> None:
    greeted: list[bytes] = []

    async def greet(stream: anyio.abc.SocketStream) -> None:
        greeted.append(await stream.receive())
        await stream.aclose()

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        hellos = HelloListener(listener.listeners, greet, hello_timeout=0.2)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(hellos.serve)
            quiet = await anyio.connect_tcp("127.0.0.1", port)
            talker = await anyio.connect_tcp("127.0.0.1", port)
            await talker.send(b"hello")
            with anyio.fail_after(5):
                with pytest.raises(
                    (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError)
                ):
                    await quiet.receive()  # closed by the listener, without a word
            stats = hellos.statistics()
            tasks.cancel_scope.cancel()
        await quiet.aclose()
        await talker.aclose()
    assert greeted == [b"hello"]
    assert (stats.accepted, stats.timed_out, stats.evicted, stats.waiting) == (2, 1, 0, 0)


class _Short(anyio.abc.SocketListener):
    """A listener whose ``accept`` fails like a full descriptor table ``failures`` times, then
    accepts from the real one."""

    def __init__(self, real: anyio.abc.SocketListener, failures: int) -> None:
        self._real = real
        self.failures = failures

    async def accept(self) -> anyio.abc.SocketStream:
        if self.failures:
            self.failures -= 1
            await anyio.sleep(0)
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return await self._real.accept()

    async def aclose(self) -> None:
        await self._real.aclose()

    @property
    def _raw_socket(self):  # type: ignore[no-untyped-def]
        return self._real._raw_socket  # type: ignore[attr-defined]


async def test_emfile_backs_off_and_serving_goes_on() -> None:
    greeted: list[bytes] = []

    async def greet(stream: anyio.abc.SocketStream) -> None:
        greeted.append(await stream.receive())
        await stream.aclose()

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        real = listener.listeners[0]
        assert isinstance(real, anyio.abc.SocketListener)
        port = real.extra(anyio.abc.SocketAttribute.local_port)
        short = _Short(real, failures=6)
        hellos = HelloListener([short], greet)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(hellos.serve)
            client = await anyio.connect_tcp("127.0.0.1", port)
            await client.send(b"hi")
            with anyio.fail_after(10):
                while not greeted:
                    await anyio.sleep(0.01)
            tasks.cancel_scope.cancel()
        await client.aclose()
    assert greeted == [b"hi"] and hellos.statistics().accept_failures == 6


_EMFILE_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, socket, struct, anyio
    from pysolate.ray import RayGuestFactory

    async def main():
        factory = RayGuestFactory()
        factory._agents = [object()]  # no agent is asked for anything here
        async with factory:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
            spare = []
            while True:  # fill the descriptor table
                try:
                    spare.append(os.open("/dev/null", os.O_RDONLY))
                except OSError:
                    break
            for _ in range(8):  # each frees one descriptor: the client's; accept finds none
                os.close(spare.pop())
            clients = []
            for _ in range(8):  # one descriptor each (no resolver, no thread)
                client = socket.socket()
                client.connect(("127.0.0.1", factory._port))  # queued by the kernel
                clients.append(client)
            with anyio.fail_after(10):  # accept fails (EMFILE) and backs off meanwhile
                while not factory.listener_statistics().accept_failures:
                    await anyio.sleep(0.005)
            failures = factory.listener_statistics().accept_failures
            for fd in spare:
                os.close(fd)
            body = json.dumps({"junk": 1}).encode()
            for client in clients:
                client.sendall(struct.pack(">I", len(body)) + body)
            with anyio.fail_after(10):
                while factory.rejected_hellos < 8:
                    await anyio.sleep(0.01)
            print(json.dumps({"failures": failures, "rejected": factory.rejected_hellos}))

    anyio.run(main)
    """
)


def test_a_full_descriptor_table_does_not_end_the_factory(tmp_path: Path) -> None:
    """For real, in a process of its own with a small ``RLIMIT_NOFILE``: connections arrive
    while no descriptor is left, ``accept`` fails with ``EMFILE``, and once descriptors are
    free again the same factory answers every one of them (junk hellos, counted)."""
    script = tmp_path / "emfile.py"
    script.write_text(_EMFILE_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failures"] >= 1 and report["rejected"] == 8


async def test_a_wrong_hello_amid_the_flood_is_still_refused() -> None:
    """The bounds drop connections; they never let one through: a hello with a wrong token
    sent while the listener is evicting is refused like any other."""
    async with _factory(LocalHandle()) as factory:
        port = factory._port
        streams = [await anyio.connect_tcp("127.0.0.1", port) for _ in range(MAX_WAITING + 10)]
        body = json.dumps({"t": "hello", "gid": "0" * 16, "token": "f" * 64}).encode()
        await streams[-1].send(struct.pack(">I", len(body)) + body)
        with anyio.fail_after(10):
            while factory.rejected_hellos < 1:
                await anyio.sleep(0.01)
        for stream in streams:
            await stream.aclose()
