"""The Host's channel end: frames in order, a receive resumed in the loop iteration that read
its bytes (asyncio), and cancellation that behaves as it does on a future (the channel stays
usable, the message reaches the task, the peer's hang-up is ``ChannelClosed``)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import anyio
import pytest
from waiting import wait_until_quiet

from pysolate._guest._channel import Channel, ChannelClosed
from pysolate._guest.child._wire import HEADER

pytestmark = pytest.mark.anyio


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    host, peer = socket.socketpair()
    yield host, peer
    host.close()
    peer.close()


def echo(peer: socket.socket, rounds: int) -> None:
    """The peer: answer each frame with the same frame, ``rounds`` times."""
    for _ in range(rounds):
        (length,) = HEADER.unpack(peer.recv(HEADER.size, socket.MSG_WAITALL))
        peer.sendall(frame(peer.recv(length, socket.MSG_WAITALL)))


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_frames_arrive_whole_and_in_order(
    anyio_backend: str, pair: tuple[socket.socket, socket.socket]
) -> None:
    host, peer = pair
    channel = Channel(host, max_frame_bytes=1 << 20)
    big = b"x" * (200 * 1024)  # more than one read
    peer.sendall(frame(b"one") + frame(big)[:10])
    assert await channel.receive() == b"one"
    threading.Timer(0.01, lambda: peer.sendall(frame(big)[10:] + frame(b"three"))).start()
    assert await channel.receive() == big
    assert await channel.receive() == b"three"
    assert not channel.spoke_out_of_turn()
    channel.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_waiting_receive_resumes_in_the_iteration_that_read_its_frame(
    anyio_backend: str, pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One loop iteration per round trip: the reader callback resumes the receive at once
    (a future would resume it one iteration later: two per round trip)."""
    host, peer = pair
    rounds = 200
    channel = Channel(host, max_frame_bytes=1 << 20)
    loop = asyncio.get_running_loop()
    iterations = 0
    run_once = loop._run_once  # type: ignore[attr-defined]

    def counted() -> None:
        nonlocal iterations
        iterations += 1
        run_once()

    peer_thread = threading.Thread(target=echo, args=(peer, rounds))
    peer_thread.start()
    monkeypatch.setattr(loop, "_run_once", counted)
    for i in range(rounds):
        await channel.send(frame(b"%d" % i))
        assert await channel.receive() == b"%d" % i
    monkeypatch.undo()
    peer_thread.join()
    channel.close()
    assert iterations < 1.5 * rounds


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_cancelled_receive_leaves_the_channel_usable(
    anyio_backend: str, pair: tuple[socket.socket, socket.socket]
) -> None:
    host, peer = pair
    channel = Channel(host, max_frame_bytes=1 << 20)
    with anyio.move_on_after(0.02) as scope:
        await channel.receive()
    assert scope.cancelled_caught
    peer.sendall(frame(b"after"))
    with anyio.fail_after(5):
        assert await channel.receive() == b"after"
    channel.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_task_cancel_reaches_a_waiting_receive_with_its_message(
    anyio_backend: str, pair: tuple[socket.socket, socket.socket]
) -> None:
    host, peer = pair
    channel = Channel(host, max_frame_bytes=1 << 20)
    task = asyncio.get_running_loop().create_task(channel.receive())
    await wait_until_quiet()  # the task waits in ``receive``, for bytes
    task.cancel("the caller gave up")
    peer.sendall(frame(b"late"))  # bytes arriving after the cancel do not resume it
    with pytest.raises(asyncio.CancelledError) as cancelled:
        await task
    assert cancelled.value.args == ("the caller gave up",)
    with anyio.fail_after(5):
        assert await channel.receive() == b"late"
    channel.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_the_peer_hanging_up_mid_wait_is_channel_closed(
    anyio_backend: str, pair: tuple[socket.socket, socket.socket]
) -> None:
    host, peer = pair
    channel = Channel(host, max_frame_bytes=1 << 20)
    peer.sendall(frame(b"whole")[:3])
    threading.Timer(0.01, peer.close).start()
    with anyio.fail_after(5), pytest.raises(ChannelClosed):
        await channel.receive()
    channel.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_bytes_sent_out_of_turn_are_seen_unread_or_buffered(
    anyio_backend: str, pair: tuple[socket.socket, socket.socket]
) -> None:
    """Waiting in the socket (asked with ``FIONREAD``: one byte is enough) or already read."""
    host, peer = pair
    channel = Channel(host, max_frame_bytes=1 << 20)
    assert not channel.spoke_out_of_turn()
    peer.sendall(frame(b"rest")[:1])
    assert channel.spoke_out_of_turn()  # still in the socket: no loop iteration read it yet
    peer.sendall(frame(b"rest")[1:])
    assert await channel.receive() == b"rest"
    assert not channel.spoke_out_of_turn()
    peer.sendall(frame(b"more") * 2)
    assert await channel.receive() == b"more"
    assert channel.spoke_out_of_turn()  # read with the first, waiting in the buffer
    channel.close()
