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
import json.scanner
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from occurrences.plain import NotPlain, from_tagged

from .._guest_api import ErrorInfo
from .child._turn_report import MAX_REPORTED_NAMES

NAME_CHARS = 200
"""Longest capability, method, exception-type or mechanism name a Guest may send."""

INLINE_FRAME_BYTES = 32 * 1024
"""Largest frame decoded in one go (``parse_guest_frame``: about 3 ms at worst, 8 MiB of
``[]`` scaled down); a larger one is decoded in steps (``_stepped.guest_frame``)."""

Name = Annotated[str, Field(max_length=NAME_CHARS)]


class ProtocolViolation(Exception):
    """The Guest sent something the broker protocol does not allow at that point."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ReadyFrame(_Message):
    """The child has applied its limits and waits for the source."""

    t: Literal["ready"]
    mechanisms: list[Name] = Field(max_length=48)


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


class Call(NamedTuple):
    """A validated call: decoded plain arguments (a tuple: one per Guest call, built at
    half a frozen dataclass's cost). ``tagged``: the canonical tagged forms of ``args``
    and ``kwargs`` (bodies, as ``_crossing.owned_arguments`` returns them) when the
    decoder made them (a large frame, ``_stepped``), else None."""

    capability: str
    method: str
    args: tuple[object, ...]
    kwargs: dict[str, object]
    tagged: tuple[list[object], list[object]] | None = None


class RefusedCall(NamedTuple):
    """A well-formed call whose arguments are past a bound of plain data (``error``: the
    ``NotPlain`` that says which): the program gets the error an honest Guest raises
    before sending such a call (``arguments must be plain data (...)``), no tool runs."""

    capability: str
    method: str
    error: Exception


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


def _text(payload: bytes) -> str | bytes:
    """The text ``json.loads(payload)`` would decode, without its encoding detection when
    the payload starts like an object in UTF-8 (``{`` then a non-NUL byte: what
    ``json.detect_encoding`` calls ``utf-8``); anything else is left to ``json.loads``."""
    if payload[:1] == b"{" and payload[1:2] != b"\x00" and len(payload) >= 4:
        return payload.decode("utf-8", "surrogatepass")
    return payload


_SCAN = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed: a TODO
"""The C scanner ``json.loads`` runs (a decoder with its defaults, as ``json.loads``'s own)."""


def _loads(text: str | bytes) -> object:
    """``json.loads(text)``, without its wrapper's passes (type and BOM checks, two
    whitespace matches) for a ``str`` that starts with ``{``: the scanner from index 0, whose
    value is the whole text's when it ends at the end. Anything else, an error included,
    is ``json.loads``'s own doing."""
    if type(text) is str and text[:1] == "{":
        try:
            value, end = _SCAN(text, 0)
        except (StopIteration, ValueError, RecursionError):
            end = -1
        if end == len(text):
            return value
    return json.loads(text)


def _flat(tagged: object, tag: str) -> list[object] | None:
    """The body of a tagged ``tuple`` (``tag`` ``"t"``) or ``dict`` (``"d"``), or None when
    ``tagged`` is not one (left to ``from_tagged``, which says why)."""
    if type(tagged) is list and len(tagged) == 2 and tagged[0] == tag:
        body = tagged[1]
        if type(body) is list:
            return body
    return None


def _arguments(tagged_args: object, tagged_kwargs: object) -> tuple[object, object]:
    """``(from_tagged(tagged_args), from_tagged(tagged_kwargs))``: what a call's arguments
    decode to, and its errors.

    A call's arguments are most often a flat tuple of ints and strs and no keywords; those
    are decoded here as ``from_tagged`` decodes them (``int(body)``, the str itself, ``{}``).
    Anything else, or anything that fails, goes to ``from_tagged`` whole, so its values and
    its errors (messages included) are exactly the reference's
    (``tests/pysolate/test_broker_fast_path.py`` checks this on generated frames).
    """
    items, pairs = _flat(tagged_args, "t"), _flat(tagged_kwargs, "d")
    if items is not None and pairs is not None and not pairs:
        values: list[object] = []
        for item in items:
            if type(item) is not list or len(item) != 2:
                break
            tag, body = item
            if type(body) is not str:
                break
            if tag == "i":
                try:
                    values.append(int(body))
                except ValueError:
                    break
            elif tag == "s":
                values.append(body)
            else:
                break
        else:
            return tuple(values), {}
    return from_tagged(tagged_args), from_tagged(tagged_kwargs)


_CALL_FIELDS = frozenset(CallFrame.model_fields)


def _call_fields(raw: object) -> tuple[str, str, list[Any], list[Any]] | None:
    """The fields of a well-formed ``call`` frame, checked as ``CallFrame`` checks them.

    The one frame a run sends per call skips building a pydantic model: exactly the five
    fields, ``t`` the str ``"call"``, two str names of at most ``NAME_CHARS``, two lists
    (strict: no subclass, no coercion). Anything else (None here) goes to the model,
    whose verdict and errors stand; ``test_frames_fast_path`` checks the two agree.
    """
    if type(raw) is not dict or raw.keys() != _CALL_FIELDS:
        return None
    t, capability, method = raw["t"], raw["capability"], raw["method"]
    args, kwargs = raw["args"], raw["kwargs"]
    if (
        type(t) is str
        and t == "call"
        and type(capability) is str
        and type(method) is str
        and len(capability) <= NAME_CHARS
        and len(method) <= NAME_CHARS
        and type(args) is list
        and type(kwargs) is list
    ):
        return capability, method, args, kwargs
    return None


_ITEM = rb'\["i","(-?[0-9]+)"\]|\["s","([^"\\\x00-\x1f]*)"\]'
"""One tagged argument of the common call: an int's digits, or a str's JSON body without
an escape (no quote, backslash or control character: the JSON text is the text itself)."""

_ITEMS = re.compile(_ITEM)

_COMMON_CALL = re.compile(
    rb'\{"t":"call","capability":"(\w{0,%d})","method":"(\w{0,%d})","args":\["t",\[((?:%s)(?:,(?:%s))*)?\]\],"kwargs":\["d",\[\]\]\}'
    % (NAME_CHARS, NAME_CHARS, _ITEM.replace(b"(", b"(?:"), _ITEM.replace(b"(", b"(?:"))
)
"""The call frame the Guest child writes for the common call (``_child``'s own field order,
compact separators): ASCII word names within ``NAME_CHARS``, positional ints and strs
without escapes, no keywords. (A bytes pattern: its word class is ASCII only.)"""


def _common_call(payload: bytes) -> Call | None:
    """The ``Call`` that ``parse_guest_frame``'s general path makes of ``payload`` when it is
    a common call frame (``_COMMON_CALL``), without decoding JSON; None for any other
    payload, and for one whose values the general path must judge (an int past the
    interpreter's digit limit, a str that is not UTF-8): it gives its verdict itself.

    Exact because a matching payload is that JSON with nothing left to interpret: each
    name and str body is its own text (UTF-8 with lone surrogates passed, as the whole
    payload is decoded; the fixed parts are ASCII), each int body is ``int``'s input
    as ``from_tagged`` gives it (``tests/pysolate/test_broker_fast_path.py`` compares the
    two on generated frames).
    """
    match = _COMMON_CALL.fullmatch(payload)
    if match is None:
        return None
    capability, method, body = match.groups()
    values: list[object] = []
    if body is not None:
        try:
            for digits, text in _ITEMS.findall(body):
                values.append(int(digits) if digits else text.decode("utf-8", "surrogatepass"))
        except ValueError:
            return None
    # ``Call(...)``'s own ``tuple.__new__``, without its Python ``__new__``.
    return tuple.__new__(
        Call, (capability.decode("ascii"), method.decode("ascii"), tuple(values), {}, None)
    )


def parse_guest_frame(payload: bytes) -> ReadyFrame | Call | RefusedCall | Done | TurnDone:
    """Validate one frame payload from the Guest, of at most ``INLINE_FRAME_BYTES``.

    Raises ``ProtocolViolation`` for anything malformed: not JSON, an unknown message,
    extra or missing fields, a badly tagged value, positional args that are not a tuple,
    keyword names that are not strings, an ``ok`` with an error or an error without one;
    and for a larger frame (decoding it at once would hold the loop: ``_stepped``). A call
    whose arguments are past a bound of plain data is a ``RefusedCall``.
    """
    if len(payload) > INLINE_FRAME_BYTES:
        raise ProtocolViolation(
            f"a frame of {len(payload)} bytes where at most {INLINE_FRAME_BYTES} are decoded at once"
        )
    common = _common_call(payload)
    if common is not None:
        return common
    try:
        # The stdlib parser, not pydantic's: it accepts lone surrogates, which are valid str.
        raw = _loads(_text(payload))
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"frame is not JSON: {type(exc).__name__}") from None
    call = _call_fields(raw)
    if call is None:
        try:
            frame = _GUEST_FRAME.validate_python(raw, strict=True)
        except ValidationError as exc:
            raise ProtocolViolation(
                f"malformed frame: {exc.error_count()} validation error(s)"
            ) from None
        if isinstance(frame, ReadyFrame):
            return frame
        if isinstance(frame, CallFrame):
            call = (frame.capability, frame.method, frame.args, frame.kwargs)
    try:
        if call is not None:
            capability, method, tagged_args, tagged_kwargs = call
            try:
                args, kwargs = _arguments(tagged_args, tagged_kwargs)
            except NotPlain as exc:  # before ValueError: an ``Uncrossable`` is one
                return RefusedCall(capability, method, exc)
            if (
                type(args) is not tuple
                or type(kwargs) is not dict
                or (kwargs and any(type(k) is not str for k in kwargs))
            ):
                raise ProtocolViolation("call arguments must be a tuple and a dict with str keys")
            return Call(capability, method, args, kwargs)
        assert isinstance(frame, DoneFrame | TurnDoneFrame)
        value = None if frame.value is None else from_tagged(frame.value)
        known = (
            {name: from_tagged(tagged) for name, tagged in frame.known.items()}
            if isinstance(frame, TurnDoneFrame)
            else {}
        )
    except (ValueError, RecursionError, NotPlain) as exc:
        raise ProtocolViolation(f"malformed plain value: {exc}") from None
    error = (
        None
        if frame.error is None
        else ErrorInfo(frame.error.type, frame.error.message, frame.error.line)
    )
    if (frame.status == "ok") != (error is None):
        raise ProtocolViolation(f"status {frame.status!r} with error={error is not None}")
    if isinstance(frame, TurnDoneFrame):
        return TurnDone(frame.status, value, error, frame.stdout, known, tuple(frame.opaque))
    return Done(frame.status, value, error)
