"""The subprocess Guest's turn protocol: one child, many turns, every end mapped to one status.

These talk to ``SubprocessTurns`` directly (no Host), so each test names exactly what the
child does: keeps globals, reports them, captures each turn's stdout, and is stopped by
any end but ``ok``/``error`` (then ``alive`` is False and the process is gone).
"""

from __future__ import annotations

import json

import anyio
import pytest
from waiting import wait_until

from pysolate._guest import SubprocessTurns, start_subprocess_guest, start_subprocess_session
from pysolate._guest._frames import ProtocolViolation, TurnDone, parse_guest_frame
from pysolate._guest.child._turn_report import MAX_REPORTED_NAMES, reported_globals
from pysolate._guest_api import GuestLimits

pytestmark = pytest.mark.anyio

CAPS = {"fs": ["read"]}


class Tools:
    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    async def __call__(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        self.calls.append(args)
        return f"<{args[0]}>"


async def session(**limits: float) -> SubprocessTurns:
    return await start_subprocess_session(CAPS, GuestLimits(**limits))  # type: ignore[arg-type]


async def test_globals_stdout_and_calls_across_turns() -> None:
    guest = await session()
    tools = Tools()
    try:
        with anyio.fail_after(20):
            one = await guest.turn(
                "xs = ['a', 'b']\nimport json\nprint('one')\nlen(xs)", tools, wall_time=10
            )
            two = await guest.turn(
                "ys = [fs.read(x) for x in xs]\nprint('two')\nys", tools, wall_time=10
            )
            three = await guest.turn("del ys\nzs = 1 / 0", tools, wall_time=10)
            four = await guest.turn(
                "print(sorted(k for k in globals() if not k.startswith('_')))", tools, wall_time=10
            )
    finally:
        await guest.aclose()
    assert (one.outcome.status, one.outcome.value, one.outcome.stdout) == ("ok", 2, "one\n")
    assert dict(one.known) == {"xs": ["a", "b"]} and one.opaque == ("json",)
    assert (two.outcome.value, two.outcome.stdout) == (["<a>", "<b>"], "two\n")
    assert tools.calls == [("a",), ("b",)]
    assert three.outcome.status == "error" and three.outcome.error is not None
    assert three.outcome.error.type == "ZeroDivisionError" and three.alive
    assert "ys" not in three.known  # what ran before the exception (the del) is kept
    assert four.outcome.stdout == "['fs', 'json', 'xs']\n"


@pytest.mark.parametrize(
    ("program", "limit", "error"),
    [
        ("while True:\n    pass", {"wall_time": 0.5}, "WallTimeLimit"),
        ("print('x' * 5000)", {"output_bytes": 1000}, "OutputLimit"),
        ("import os\nos._exit(3)", {}, "GuestCrashed"),
        ("xs = bytearray(1 << 34)", {}, "MemoryLimit"),
    ],
)
async def test_any_other_end_stops_the_child(
    program: str, limit: dict[str, float], error: str
) -> None:
    guest = await session(**{k: v for k, v in limit.items() if k != "wall_time"})
    try:
        with anyio.fail_after(20):
            await guest.turn("x = 1", Tools(), wall_time=10)
            end = await guest.turn(program, Tools(), wall_time=limit.get("wall_time", 10))
        assert not end.alive and end.outcome.error is not None and end.outcome.error.type == error
        assert guest._guest._process.returncode is not None
        with pytest.raises(RuntimeError, match="stopped"):
            await guest.turn("x", Tools(), wall_time=10)
    finally:
        await guest.aclose()


async def test_a_frame_between_turns_is_a_protocol_error() -> None:
    """A program thread that outlives its turn and calls a tool while the Host waits for the
    next turn breaks the protocol: the next turn ends ``protocol_error`` and the child stops."""
    guest = await session()
    tools = Tools()
    try:
        with anyio.fail_after(20):
            await guest.turn(
                "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.2), fs.read('late'))).start()",
                tools,
                wall_time=10,
            )
            channel = guest._guest._channel
            await wait_until(
                channel.spoke_out_of_turn, what="the thread's frame arrived between the turns"
            )
            end = await guest.turn("1", tools, wall_time=10)
    finally:
        await guest.aclose()
    assert end.outcome.status == "protocol_error" and not end.alive
    assert tools.calls == []


async def test_a_session_child_never_takes_a_single_run() -> None:
    guest = await session()
    try:
        with pytest.raises(RuntimeError):
            await guest._guest.run("1", Tools())
    finally:
        await guest.aclose()


async def test_a_turn_done_frame_in_a_single_run_is_a_protocol_error() -> None:
    """The Host accepts ``turn_done`` only in a session (a hostile program can forge one)."""
    fd_finder = "import os, sys\nfd = int(sys.argv[1])\n"
    frame = {
        "t": "turn_done",
        "status": "ok",
        "value": ["n"],
        "error": None,
        "stdout": "",
        "known": {},
        "opaque": [],
    }
    payload = json.dumps(frame).encode()
    forge = (
        fd_finder
        + f"data = {payload!r}\nos.write(fd, len(data).to_bytes(4, 'big') + data)\nimport time\ntime.sleep(5)"
    )
    guest = await start_subprocess_guest(CAPS, GuestLimits())
    try:
        with anyio.fail_after(20):
            outcome = await guest.run(forge, Tools())
    finally:
        await guest.aclose()
    assert outcome.status == "protocol_error"


def test_turn_done_frames_are_validated() -> None:
    good = {
        "t": "turn_done",
        "status": "ok",
        "value": ["i", "1"],
        "error": None,
        "stdout": "",
        "known": {"x": ["l", []]},
        "opaque": ["f"],
    }
    frame = parse_guest_frame(json.dumps(good).encode())
    assert isinstance(frame, TurnDone) and frame.known == {"x": []} and frame.opaque == ("f",)
    for bad in (
        {**good, "known": {"x": ["zz", 1]}},
        {**good, "known": {"x" * 201: ["n"]}},
        {**good, "opaque": [f"n{i}" for i in range(MAX_REPORTED_NAMES + 1)]},
        {**good, "stdout": 3},
        {**good, "extra": 1},
    ):
        with pytest.raises(ProtocolViolation):
            parse_guest_frame(json.dumps(bad).encode())


def test_the_report_names_plain_values_and_only_the_names_of_others() -> None:
    proxy = object()
    shared = [1, 2]
    namespace: dict[str, object] = {
        "__name__": "__main__",
        "fs": proxy,  # still the capability: not reported
        "a": shared,
        "b": shared,
        "t": (1, "x", b"y", None, 1.5, {"k": [True]}),
        "f": len,
        "big": list(range(2_000_000)),
        "deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
        "huge": 1 << 10_000,
        "sub": type("L", (list,), {})(),
        "x" * 201: 1,
    }
    known, opaque = reported_globals(namespace, {"fs": proxy})
    assert [name for name, _ in known] == ["a", "b", "t"]
    assert opaque == ["f", "big", "deep", "huge", "sub"]


def test_the_report_is_bounded_in_names() -> None:
    namespace = {f"v{i}": i for i in range(MAX_REPORTED_NAMES + 10)}
    known, opaque = reported_globals(namespace, {})
    assert len(known) + len(opaque) == MAX_REPORTED_NAMES
