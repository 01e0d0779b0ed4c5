"""The link between a Host and a remote Guest: the broker's frames over one TCP connection.

A node agent starts an ordinary isolated Guest on its node and dials the Host back; from then
on the link carries exactly the broker protocol the local channel carries (``_guest._wire``:
length-prefixed JSON, tagged plain values, never pickle), plus two messages of its own::

    agent→Host  hello    {"t": "hello", "gid": str, "token": str}        first frame, once
    agent→Host  call     as the Guest child sends it (validated by ``_guest._frames``)
    Host→agent  result / failure                                          as to the child
    agent→Host  outcome  {"t": "outcome", "status": ..., "value": tagged|null, "stdout": str,
                          "error": {...}|null, "isolation": {"level": str, "mechanisms": [...]}}

Ray carries only the control calls (start, run, close): an actor call costs milliseconds,
a frame on this link about a hundred microseconds (``docs/scale-out.md``).

The Host trusts nothing on the link: the hello must name a Guest it is waiting for with that
Guest's token (compared in constant time), every frame is bounded before it is read, and
every frame is validated as strictly as the child's.
"""

from __future__ import annotations

import json
import socket
from typing import Annotated, Any, Literal, cast

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from occurrences.plain import from_tagged

from .._guest._frames import NAME_CHARS, ProtocolViolation
from .._guest.child._wire import HEADER, encode_frame
from .._guest_api import ErrorInfo, GuestOutcome, Isolation

HELLO_BYTES = 512
"""Largest hello frame the Host reads from a connection it does not know yet."""

TOKEN_BYTES = 32
"""Random bytes of a Guest's token (sent as hex)."""


_TAGGED = object()
"""``parse_outcome``'s default: the value is still tagged in ``raw``."""


class LinkClosed(Exception):
    """The other end of the link went away."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Hello(_Message):
    t: Literal["hello"]
    gid: Annotated[str, Field(max_length=64)]
    token: Annotated[str, Field(max_length=2 * TOKEN_BYTES)]


class _Isolation(_Message):
    level: Literal["process", "rlimits", "seccomp", "landlock", "namespaces"]
    mechanisms: list[Annotated[str, Field(max_length=NAME_CHARS)]] = Field(max_length=64)


class Link:
    """One framed TCP connection; ``receive`` never reads more than ``max_bytes`` per frame."""

    def __init__(self, stream: anyio.abc.SocketStream, max_bytes: int) -> None:
        self._stream = stream
        self._reader = BufferedByteReceiveStream(stream)
        self.max_bytes = max_bytes
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one small frame per call

    async def send(self, message: dict[str, object]) -> None:
        try:
            await self._stream.send(encode_frame(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise LinkClosed(str(exc)) from None

    async def receive(self) -> bytes:
        """The next frame's payload. Raises ``ProtocolViolation`` for an oversized one and
        ``LinkClosed`` when the connection ends."""
        try:
            (length,) = HEADER.unpack(await self._reader.receive_exactly(HEADER.size))
            if length > self.max_bytes:
                raise ProtocolViolation(f"frame of {length} bytes exceeds {self.max_bytes}")
            return await self._reader.receive_exactly(length)
        except (
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        ) as exc:
            raise LinkClosed(type(exc).__name__) from None

    async def aclose(self) -> None:
        await self._stream.aclose()


def parse_json(payload: bytes) -> object:
    try:
        return json.loads(payload)
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"frame is not JSON: {type(exc).__name__}") from None


def parse_hello(payload: bytes) -> Hello:
    try:
        return Hello.model_validate(parse_json(payload), strict=True)
    except ValidationError:
        raise ProtocolViolation("the first frame was not a valid hello") from None


def parse_outcome(raw: object, value: object = _TAGGED) -> GuestOutcome:
    """A validated outcome frame (``ProtocolViolation`` otherwise).

    Checked by hand rather than by a pydantic model: stdout and error messages may hold
    lone surrogates (a valid ``str`` the program printed or raised), which pydantic's
    strings refuse.
    """
    if not isinstance(raw, dict) or set(raw) != _OUTCOME_FIELDS or raw["t"] != "outcome":
        raise ProtocolViolation("malformed outcome: not an outcome frame")
    status, stdout, error, isolation = raw["status"], raw["stdout"], raw["error"], raw["isolation"]
    if status not in _STATUSES or type(stdout) is not str:
        raise ProtocolViolation("malformed outcome: status or stdout")
    if value is _TAGGED:  # else decoded already (a large frame: ``_stepped.envelope_steps``)
        try:
            value = None if raw["value"] is None or status != "ok" else from_tagged(raw["value"])
        except (ValueError, RecursionError, TypeError) as exc:
            raise ProtocolViolation(f"malformed outcome value: {type(exc).__name__}") from None
    elif status != "ok":
        value = None
    info = None
    if error is not None:
        if not (
            isinstance(error, dict)
            and set(error) == {"type", "message", "line"}
            and type(error["type"]) is str
            and len(error["type"]) <= NAME_CHARS
            and type(error["message"]) is str
            and (error["line"] is None or type(error["line"]) is int)
        ):
            raise ProtocolViolation("malformed outcome: error")
        info = ErrorInfo(error["type"], error["message"], error["line"])
    try:
        level = _Isolation.model_validate(isolation, strict=True)
    except ValidationError:
        raise ProtocolViolation("malformed outcome: isolation") from None
    return GuestOutcome(
        status, value, stdout, info, Isolation(cast(Any, level.level), tuple(level.mechanisms))
    )


_OUTCOME_FIELDS = frozenset({"t", "status", "value", "stdout", "error", "isolation"})
_STATUSES = frozenset({"ok", "error", "limit", "crashed", "protocol_error"})


def outcome_message(outcome: GuestOutcome, tagged_value: object) -> dict[str, object]:
    """The outcome frame the agent sends for ``outcome`` (value already tagged)."""
    error = outcome.error
    return {
        "t": "outcome",
        "status": outcome.status,
        "value": tagged_value,
        "stdout": outcome.stdout,
        "error": None
        if error is None
        else {"type": error.type, "message": error.message, "line": error.line},
        "isolation": {
            "level": outcome.isolation.level,
            "mechanisms": list(outcome.isolation.mechanisms),
        },
    }


def outcome_bound(max_frame_bytes: int, output_bytes: int) -> int:
    """Largest frame the Host accepts on a link: a call, or an outcome carrying the full
    stdout allowance (JSON may spell a character in up to 12 bytes: a ``\\uXXXX`` pair)."""
    return max_frame_bytes + 12 * output_bytes + 64 * 1024
