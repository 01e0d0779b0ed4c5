"""The Host trusts no frame: malformed, oversized, forged or out-of-order ones end the run.

The end-to-end tests are programs that find the channel fd (it is in ``sys.argv``) and
write to it directly, which any program can do; the Host must stay in control.
"""

from __future__ import annotations

import json

import anyio
import pytest
from guest_levels import guest_factory, params, with_ray

from occurrences.plain import to_tagged
from pysolate._guest._frames import Call, Done, ProtocolViolation, ReadyFrame, parse_guest_frame
from pysolate._guest_api import ErrorInfo, GuestLimits, GuestOutcome

CAPS = {"workspace": ["read_text", "slow"]}


class _Level:
    value = "strongest"
    monkeypatch: pytest.MonkeyPatch | None = None


LEVEL = _Level()
"""The isolation level of the current test (every test runs at every level offered here)."""


@pytest.fixture(autouse=True, params=with_ray(params(hidden_bwrap=False)))
def _at_every_level(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LEVEL, "value", request.param)
    monkeypatch.setattr(LEVEL, "monkeypatch", monkeypatch)


RAW = """\
import os, sys, json, struct, time
fd = int(sys.argv[-1])
def send(obj):
    body = json.dumps(obj).encode()
    os.write(fd, struct.pack('>I', len(body)) + body)
def recv():
    (n,) = struct.unpack('>I', os.read(fd, 4))
    return json.loads(os.read(fd, n))
"""
"""Prelude giving a program raw access to the broker channel."""


def call_frame(capability: str, method: str, *args: object) -> dict[str, object]:
    return {
        "t": "call",
        "capability": capability,
        "method": method,
        "args": to_tagged(args),
        "kwargs": ["d", []],
    }


class Tools:
    def __init__(self, slow_seconds: float = 0.0) -> None:
        self.calls: list[tuple[str, str]] = []
        self.slow_seconds = slow_seconds

    async def __call__(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        self.calls.append((capability, method))
        if method == "slow":
            await anyio.sleep(self.slow_seconds)
        return "content"


async def run(source: str, tools: Tools | None = None) -> GuestOutcome:
    assert LEVEL.monkeypatch is not None
    async with guest_factory(LEVEL.value, LEVEL.monkeypatch) as start:
        guest = await start(CAPS, GuestLimits(wall_time=10))
        try:
            with anyio.fail_after(
                8
            ):  # every case here must end on its own, long before the wall time
                return await guest.run(source, tools or Tools())
        finally:
            await guest.aclose()


# -- validation of single frames ---------------------------------------------------------


def payload(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_valid_call_decodes_exact_plain_arguments() -> None:
    frame = {
        "t": "call",
        "capability": "w",
        "method": "m",
        "args": to_tagged((1, b"x")),
        "kwargs": to_tagged({"k": (2.5,)}),
    }
    assert parse_guest_frame(payload(frame)) == Call("w", "m", (1, b"x"), {"k": (2.5,)})


def test_valid_done_and_ready() -> None:
    done = {
        "t": "done",
        "status": "error",
        "value": None,
        "error": {"type": "KeyError", "message": "'k'", "line": 3},
    }
    assert parse_guest_frame(payload(done)) == Done("error", None, ErrorInfo("KeyError", "'k'", 3))
    assert isinstance(
        parse_guest_frame(payload({"t": "ready", "mechanisms": ["rlimits"]})), ReadyFrame
    )


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"\xff\xfe",
        payload([1, 2]),
        payload({"t": "reply", "id": 1}),
        payload({**call_frame("w", "m"), "id": 7}),  # ids are the Host's to choose
        payload({**call_frame("w", "m"), "args": ["x", 1]}),  # unknown tag
        payload({**call_frame("w", "m"), "args": ["l", []]}),  # positional args must be a tuple
        payload({**call_frame("w", "m"), "kwargs": to_tagged({1: 2})}),  # keyword names are str
        payload({**call_frame("w", "m"), "capability": 5}),  # strict: no coercion
        payload({**call_frame("w", "m"), "method": "m" * 1000}),
        payload(
            {
                "t": "done",
                "status": "ok",
                "value": None,
                "error": {"type": "E", "message": "", "line": 1},
            }
        ),
        payload({"t": "done", "status": "error", "value": None, "error": None}),
        payload({"t": "done", "status": "finished", "value": None, "error": None}),
        b'{"t": "call", "capability": "w", "method": "m", "args": '
        + b"[" * 5000
        + b"]" * 5000
        + b', "kwargs": ["d", []]}',
    ],
)
def test_malformed_frames_are_violations(raw: bytes) -> None:
    with pytest.raises(ProtocolViolation):
        parse_guest_frame(raw)


# -- abuse from a running program ---------------------------------------------------------


@pytest.mark.anyio
async def test_garbage_on_the_channel_is_a_protocol_error() -> None:
    out = await run(RAW + "os.write(fd, b'\\x00\\x00\\x00\\x05hello')\ntime.sleep(30)")
    assert out.status == "protocol_error"
    assert out.error is not None and out.error.type == "ProtocolError"


@pytest.mark.anyio
async def test_oversized_frame_header_is_a_protocol_error() -> None:
    out = await run(RAW + "os.write(fd, struct.pack('>I', 2**31))\ntime.sleep(30)")
    assert out.status == "protocol_error"


@pytest.mark.anyio
async def test_ready_after_run_is_a_protocol_error() -> None:
    out = await run(RAW + "send({'t': 'ready', 'mechanisms': []})\ntime.sleep(30)")
    assert out.status == "protocol_error"


@pytest.mark.anyio
async def test_forged_call_to_an_ungranted_method_is_refused_in_the_program() -> None:
    tools = Tools()
    source = (
        RAW
        + f"""
send({call_frame("secrets", "steal")!r})
a = recv()
send({call_frame("workspace", "__class__")!r})
b = recv()
(a['t'], a['type'], b['t'], b['type'])
"""
    )
    out = await run(source, tools)
    assert (out.status, out.value) == (
        "ok",
        ("failure", "AttributeError", "failure", "AttributeError"),
    )
    assert tools.calls == []


@pytest.mark.anyio
async def test_forged_call_to_a_granted_method_is_just_a_call() -> None:
    """Raw access to the channel grants nothing the proxies did not already grant."""
    tools = Tools()
    out = await run(
        RAW + f"send({call_frame('workspace', 'read_text', 'a')!r})\nr = recv()\n(r['t'], r['id'])",
        tools,
    )
    assert (out.status, out.value, tools.calls) == (
        "ok",
        ("result", 1),
        [("workspace", "read_text")],
    )


@pytest.mark.anyio
async def test_two_calls_at_once_is_a_protocol_error() -> None:
    tools = Tools()
    frame = call_frame("workspace", "read_text", "a")
    source = (
        RAW
        + f"""
body = json.dumps({frame!r}).encode()
one = struct.pack('>I', len(body)) + body
os.write(fd, one + one)
time.sleep(30)
"""
    )
    out = await run(source, tools)
    assert out.status == "protocol_error"
    assert len(tools.calls) <= 1


@pytest.mark.anyio
async def test_a_frame_while_a_call_is_served_is_a_protocol_error() -> None:
    """Found when the call returns; the reply is never sent."""
    tools = Tools(slow_seconds=0.5)
    source = (
        RAW
        + "import threading\nthreading.Timer(0.1, send, ({'t': 'ready', 'mechanisms': []},)).start()\nworkspace.slow()"
    )
    out = await run(source, tools)
    assert out.status == "protocol_error"
    assert tools.calls == [("workspace", "slow")]


@pytest.mark.anyio
async def test_forged_done_ends_the_run_with_the_programs_own_claim() -> None:
    """The value is the program's to choose anyway; the Host stops it and reaps it."""
    source = (
        RAW
        + "send({'t': 'done', 'status': 'ok', 'value': ['s', 'forged'], 'error': None})\ntime.sleep(30)"
    )
    out = await run(source)
    assert (out.status, out.value) == ("ok", "forged")


@pytest.mark.anyio
async def test_half_a_frame_then_exit_is_a_crash() -> None:
    out = await run(RAW + "os.write(fd, b'\\x00\\x00')\nos._exit(0)")
    assert out.status == "crashed"


@pytest.mark.anyio
async def test_printing_frames_is_just_output() -> None:
    tools = Tools()
    source = (
        RAW
        + f"""
body = json.dumps({call_frame("workspace", "read_text", "x")!r}).encode()
sys.stdout.buffer.write(struct.pack('>I', len(body)) + body)
print('{{"t": "done", "status": "ok", "value": ["s", "fake"], "error": null}}')
'real'
"""
    )
    out = await run(source, tools)
    assert (out.status, out.value, tools.calls) == ("ok", "real", [])
    assert '"fake"' in out.stdout and "read_text" in out.stdout
