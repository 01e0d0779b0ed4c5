"""The Host's view of frames from the Guest: every one is untrusted and validated here.

A Guest child runs model-written code that can write anything to its end of the channel,
so nothing it sends is believed until it has passed a pydantic model (strict, no extra
fields, bounded strings) *and* the plain-data decoder. Anything that does not pass is a
``ProtocolViolation``, which ends the run with status ``protocol_error``. Validation gives
the Guest no new authority either way: a well-formed ``call`` still only reaches the
methods the Host granted (checked by the runner, not here).

Frames *to* the Guest are built by the Host from its own values (``_wire.encode_frame``)
and need no model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from occurrences._plain import from_tagged

from .._guest_api import ErrorInfo
from ._turn_report import MAX_REPORTED_NAMES

NAME_CHARS = 200
"""Longest capability, method, exception-type or mechanism name a Guest may send."""

Name = Annotated[str, Field(max_length=NAME_CHARS)]


class ProtocolViolation(Exception):
    """The Guest sent something the broker protocol does not allow at that point."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ReadyFrame(_Message):
    """The child has applied its limits and waits for the source."""

    t: Literal["ready"]
    mechanisms: list[Name] = Field(max_length=16)


class CallFrame(_Message):
    """One capability call; ``args``/``kwargs`` are tagged plain values (decoded later)."""

    t: Literal["call"]
    capability: Name
    method: Name
    args: list[Any]
    kwargs: list[Any]


class _ErrorPayload(_Message):
    type: Name
    message: str
    line: int | None


class DoneFrame(_Message):
    """The program ended; ``value`` is tagged plain data when ``status`` is ``ok``."""

    t: Literal["done"]
    status: Literal["ok", "error", "limit"]
    value: list[Any] | None
    error: _ErrorPayload | None


class TurnDoneFrame(_Message):
    """A session's turn ended: ``done``'s fields, the turn's stdout and the globals it left
    (``known``: name → tagged value; ``opaque``: names of non-plain values)."""

    t: Literal["turn_done"]
    status: Literal["ok", "error", "limit"]
    value: list[Any] | None
    error: _ErrorPayload | None
    stdout: str
    known: dict[Name, list[Any]] = Field(max_length=MAX_REPORTED_NAMES)
    opaque: list[Name] = Field(max_length=MAX_REPORTED_NAMES)


_GUEST_FRAME: TypeAdapter[ReadyFrame | CallFrame | DoneFrame | TurnDoneFrame] = TypeAdapter(
    Annotated[ReadyFrame | CallFrame | DoneFrame | TurnDoneFrame, Field(discriminator="t")]
)


@dataclass(frozen=True, slots=True)
class Call:
    """A validated call: decoded plain arguments."""

    capability: str
    method: str
    args: tuple[object, ...]
    kwargs: dict[str, object]


@dataclass(frozen=True, slots=True)
class Done:
    """A validated end of program."""

    status: Literal["ok", "error", "limit"]
    value: object
    error: ErrorInfo | None


@dataclass(frozen=True, slots=True)
class TurnDone:
    """A validated end of a session's turn."""

    status: Literal["ok", "error", "limit"]
    value: object
    error: ErrorInfo | None
    stdout: str
    known: dict[str, object]
    opaque: tuple[str, ...]


def parse_guest_frame(payload: bytes) -> ReadyFrame | Call | Done | TurnDone:
    """Validate one frame payload from the Guest.

    Raises ``ProtocolViolation`` for anything malformed: not JSON, an unknown message,
    extra or missing fields, a badly tagged value, positional args that are not a tuple,
    keyword names that are not strings, an ``ok`` with an error or an error without one.
    """
    try:
        # The stdlib parser, not pydantic's: it accepts lone surrogates, which are valid str.
        raw = json.loads(payload)
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"frame is not JSON: {type(exc).__name__}") from None
    try:
        frame = _GUEST_FRAME.validate_python(raw, strict=True)
    except ValidationError as exc:
        raise ProtocolViolation(f"malformed frame: {exc.error_count()} validation error(s)") from None
    if isinstance(frame, ReadyFrame):
        return frame
    try:
        if isinstance(frame, CallFrame):
            args = from_tagged(frame.args)
            kwargs = from_tagged(frame.kwargs)
            if type(args) is not tuple or type(kwargs) is not dict or any(type(k) is not str for k in kwargs):
                raise ProtocolViolation("call arguments must be a tuple and a dict with str keys")
            return Call(frame.capability, frame.method, args, kwargs)
        value = None if frame.value is None else from_tagged(frame.value)
        known = {name: from_tagged(tagged) for name, tagged in frame.known.items()} if isinstance(frame, TurnDoneFrame) else {}
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"malformed plain value: {exc}") from None
    error = None if frame.error is None else ErrorInfo(frame.error.type, frame.error.message, frame.error.line)
    if (frame.status == "ok") != (error is None):
        raise ProtocolViolation(f"status {frame.status!r} with error={error is not None}")
    if isinstance(frame, TurnDoneFrame):
        return TurnDone(frame.status, value, error, frame.stdout, known, tuple(frame.opaque))
    return Done(frame.status, value, error)
