"""The Guest's output as the Host reads it (``_guest._output``)."""

from __future__ import annotations

import socket

from pysolate._guest._output import READS_PER_TURN, GuestOutput


def test_a_reader_yields_to_the_loop_after_its_reads_per_turn() -> None:
    """More waiting than one turn's reads take is left for the loop's next pass: a child
    writing as fast as the Host reads cannot hold the event loop."""
    ours, theirs = socket.socketpair()
    try:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        ours.setblocking(False)
        output = GuestOutput(output_bytes=1 << 30)
        output._readers[ours.fileno()] = (output._take_stdout, output._stdout_ended)
        sent = 0
        theirs.setblocking(False)
        while sent < (READS_PER_TURN + 4) * 65536:
            sent += theirs.send(b"x" * 65536)
        assert not output.drain()
        assert 0 < output.stdout_total <= READS_PER_TURN * 65536 < sent
        assert output.reading  # still registered: the rest is read on the next turns
        while output.stdout_total < sent:
            output.drain()
        theirs.close()
        assert not output.drain()  # stdout is at its EOF; stderr (not read here) is not
        assert output._stdout_ended.is_set() and not output.reading
        assert output.stdout_total == sent == len(output.stdout)
    finally:
        ours.close()
        theirs.close()
