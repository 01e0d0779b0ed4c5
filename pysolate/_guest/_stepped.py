"""Large frames from the Guest, decoded in bounded steps: the event loop runs between them.

``json.loads`` is one C call that holds the interpreter for as long as it takes (0.6 s for
8 MiB of ``[]``; a worker thread would not help, the GIL stays with it), and ``from_tagged``
then walks the result in one go. A frame of at most ``INLINE_FRAME_BYTES`` costs little
either way (``_frames.parse_guest_frame``). A larger one is decoded here, as a generator
that stops every ``STEP_UNITS`` units of work (``_reader``) so the caller can let the loop
run (``guest_frame``): every other run keeps its pace, and a Host busy with one frame never
misses another run's wall time.

This module reads the frame's envelope (plain JSON, bounded by ``ENVELOPE_VALUES``); its
tagged fields are read by ``_reader.Reader``, which builds each value once, enforces the
bounds of plain data as it reads, and, for a call, writes each argument's call-key text as
it goes, so the broker does not walk the arguments again (``Call.tagged``,
``_crossing.owned_arguments``).

Verdicts are those of the inline path for every frame an honest Guest sends (the child
encodes compactly, the envelope's fields in its own order); on a hostile frame the two may
differ in which error they name, never in what is accepted. A value past a bound in a call
frame is a ``RefusedCall`` (the program sees ``arguments must be plain data (...)`` at the
call, as an honest child would have raised before sending); anything malformed is a
``ProtocolViolation``.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

import anyio.lowlevel

from occurrences.plain import MAX_ITEMS, MAX_VALUE_ITEMS, NotPlain, Uncrossable

from .._guest_api import ErrorInfo
from ._frames import (
    _GUEST_FRAME,
    INLINE_FRAME_BYTES,
    NAME_CHARS,
    Call,
    Done,
    ProtocolViolation,
    ReadyFrame,
    RefusedCall,
    TurnDone,
    TurnDoneFrame,
    parse_guest_frame,
)
from ._reader import STRING_CHUNK, Reader, Steps, malformed

ENVELOPE_VALUES = 4096
"""Most JSON values a frame may hold outside its tagged fields (names, an error, stdout)."""

ENVELOPE_DEPTH = 8
"""Deepest nesting of JSON outside the tagged fields (an error object is one level)."""

_TAGGED_FIELDS = frozenset({"args", "kwargs", "value"})
"""Envelope fields whose value is a tagged plain value (``known`` holds one per name)."""

_END = re.compile(r"[ \t\n\r]*+\Z")
_EMPTY = re.compile(r"[ \t\n\r]*+\]")
"""An empty argument list's ``]``, after the whitespace JSON allows before it."""
_LITERALS: dict[str, object] = {
    "true": True,
    "false": False,
    "null": None,
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}


class _Tagged:
    """A decoded tagged value in the envelope; ``pieces``: a call's arguments' key texts."""

    __slots__ = ("pieces", "value")

    def __init__(self, value: object, pieces: list[object] | None = None) -> None:
        self.value = value
        self.pieces = pieces


class _Envelope(Reader):
    """A frame's envelope: plain JSON around tagged fields."""

    __slots__ = ("values",)

    def __init__(self, text: str, controls: bool) -> None:
        super().__init__(text, controls)
        self.values = 0  # JSON values outside tagged fields

    def json(self, depth: int, kind: str, token: str | None) -> Steps:
        self.values += 1
        if self.values > ENVELOPE_VALUES or depth > ENVELOPE_DEPTH:
            raise ProtocolViolation("frame holds too much besides its values")
        if kind == "s":
            return (yield from self.string())
        if kind == "n":
            assert token is not None
            try:
                return float(token) if any(c in token for c in ".eE") else int(token)
            except ValueError:
                raise ProtocolViolation("frame is not JSON: a number") from None
        if kind == "l":
            assert token is not None
            return _LITERALS[token]
        if kind == "[":
            items: list[object] = []
            kind, token = self.tok()
            if kind == "]":
                return items
            while True:
                items.append((yield from self.json(depth + 1, kind, token)))
                kind, _ = self.tok()
                if kind == "]":
                    return items
                if kind != ",":
                    raise ProtocolViolation("frame is not JSON")
                kind, token = self.tok()
        if kind == "{":
            return (yield from self.members(depth))
        raise ProtocolViolation("frame is not JSON")

    def members(self, depth: int, frame: bool = False, known: bool = False) -> Steps:
        """An object whose ``{`` was just read: the ``frame`` itself (its tagged fields read
        as values), ``known`` (every value tagged), or any other."""
        out: dict[str, object] = {}
        kind, _ = self.tok()
        if kind == "}":
            return out
        while True:
            if kind != "s":
                raise ProtocolViolation("frame is not JSON")
            key = yield from self.string()
            if self.tok()[0] != ":":
                raise ProtocolViolation("frame is not JSON")
            kind, token = self.tok()
            if kind == "l" and token == "null" and (known or (frame and key in _TAGGED_FIELDS)):
                out[key] = None
            elif known or (frame and key == "value"):
                out[key] = _Tagged((yield from self.tagged(0, [MAX_VALUE_ITEMS], kind)))
            elif frame and key in ("args", "kwargs"):
                out[key] = yield from self.arguments(out, key, kind)
            elif frame and key == "known" and kind == "{":
                out[key] = yield from self.members(depth + 1, known=True)
            else:
                out[key] = yield from self.json(depth + 1, kind, token)
            kind, _ = self.tok()
            if kind == "}":
                return out
            if kind != ",":
                raise ProtocolViolation("frame is not JSON")
            kind, _ = self.tok()

    def arguments(self, envelope: dict[str, object], key: str, kind: str) -> Steps:
        """A call's ``args`` (a tagged tuple) or ``kwargs`` (a tagged dict of str keys): its
        value, and each argument's call-key text. A value past a bound in a call that has
        named itself is that call's refusal, anywhere else a violation."""
        try:
            return (yield from self._arguments(key == "kwargs", kind))
        except NotPlain as exc:
            capability, method = envelope.get("capability"), envelope.get("method")
            if envelope.get("t") == "call" and type(capability) is str and type(method) is str:
                raise _Refusal(RefusedCall(capability, method, exc)) from None
            raise malformed(str(exc)) from None

    def _arguments(self, keywords: bool, kind: str) -> Steps:
        if kind != "[" or self.tok()[0] != "s":
            raise malformed()
        tag = yield from self.string()
        if tag != ("d" if keywords else "t") or self.tok()[0] != "," or self.tok()[0] != "[":
            raise ProtocolViolation("call arguments must be a tuple and a dict with str keys")
        left = [MAX_VALUE_ITEMS]
        values: list[object] = []
        pieces: list[object] = []
        if _EMPTY.match(self.text, self.pos) is None:
            while True:
                if len(values) == MAX_ITEMS:
                    raise Uncrossable(
                        f"{'dict' if keywords else 'tuple'} of more than {MAX_ITEMS} items"
                    )
                left[0] -= 1
                if left[0] < 0:
                    raise Uncrossable(f"value of more than {MAX_VALUE_ITEMS} items")
                if keywords:
                    if self.tok()[0] != "[":
                        raise malformed()
                    entry = yield from self.item(1, left)
                    name, sep = entry[0], entry[1]
                    if type(name) is not str:
                        raise ProtocolViolation(
                            "call arguments must be a tuple and a dict with str keys"
                        )
                    if sep != ",":
                        raise malformed()
                self.render, self.out = True, []
                value, sep = yield from self.item(1, left)
                self.render = False
                piece = yield from self.key_piece(value, self.out)
                if keywords:
                    if sep != "]":
                        raise malformed()
                    sep = self.sep()
                    values.append((name, value))
                    pieces.append([["s", name], piece])
                else:
                    values.append(value)
                    pieces.append(piece)
                if sep == "]":
                    break
                if sep != ",":
                    raise malformed()
        else:
            self.sep()
        if self.tok()[0] != "]":
            raise malformed()
        if not keywords:
            return _Tagged(tuple(values), pieces)
        return _Tagged(dict(values), pieces)  # type: ignore[arg-type]  # (name, value) pairs; a repeated name: the last, as json's


class _Refusal(Exception):
    """Carries a ``RefusedCall`` out of the decoder."""

    def __init__(self, refused: RefusedCall) -> None:
        super().__init__(refused)
        self.refused = refused


def frame_steps(payload: bytes) -> Steps:
    """Decode one frame ``payload`` (any size) in steps; the generator's value is what
    ``parse_guest_frame`` returns (or a ``RefusedCall``). Raises ``ProtocolViolation``."""
    text = yield from _text(payload)
    decoder = _Envelope(text, (yield from _has_controls(payload)))
    if decoder.tok()[0] != "{":
        raise ProtocolViolation("frame is not a JSON object")
    try:
        raw = yield from decoder.members(0, frame=True)
    except _Refusal as refusal:
        return refusal.refused
    if _END.match(text, decoder.pos) is None:
        raise ProtocolViolation("frame is not JSON: text after the object")
    return _validated(raw)


_CONTROLS = bytes(range(32))


def _has_controls(payload: bytes) -> Steps:
    """Whether ``payload`` holds a byte below 0x20 (whitespace, or a control character a JSON
    string may not hold raw): never in a compact frame, so its strings need no check for one.
    (C passes of a megabyte each; UTF-8 encodes no other character with such a byte.)"""
    for start in range(0, len(payload), 1 << 20):
        piece = payload[start : start + (1 << 20)]
        if len(piece.translate(None, _CONTROLS)) != len(piece):
            return True
        yield
    return False


def _text(payload: bytes) -> Steps:
    """The payload as text, as the inline path decodes it (UTF-8, lone surrogates passed)."""
    if payload.lstrip(b" \t\n\r")[:1] != b"{":
        raise ProtocolViolation("frame is not a JSON object in UTF-8")
    try:
        return payload.decode("utf-8")  # a fast C pass when it is valid UTF-8
    except UnicodeDecodeError:
        pass
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    pieces = []
    try:
        for start in range(0, len(payload), 16 * STRING_CHUNK):
            pieces.append(decoder.decode(payload[start : start + 16 * STRING_CHUNK]))
            yield
        pieces.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError:
        raise ProtocolViolation("frame is not JSON: not UTF-8") from None
    return "".join(pieces)


def _validated(raw: dict[str, object]) -> ReadyFrame | Call | Done | TurnDone:
    """The frame ``raw`` stands for, checked as the inline path checks it (its tagged fields
    as ``_Tagged`` values)."""
    if raw.get("t") == "call":
        capability, method, args, kwargs = (
            raw.get("capability"),
            raw.get("method"),
            raw.get("args"),
            raw.get("kwargs"),
        )
        if (
            raw.keys() != {"t", "capability", "method", "args", "kwargs"}
            or type(capability) is not str
            or type(method) is not str
            or len(capability) > NAME_CHARS
            or len(method) > NAME_CHARS
            or not isinstance(args, _Tagged)
            or not isinstance(kwargs, _Tagged)
        ):
            raise ProtocolViolation("malformed frame: a call")
        assert type(args.value) is tuple and type(kwargs.value) is dict
        assert args.pieces is not None and kwargs.pieces is not None
        return Call(capability, method, args.value, kwargs.value, (args.pieces, kwargs.pieces))
    placeholders = dict(raw)
    for name in _TAGGED_FIELDS & raw.keys():
        if isinstance(raw[name], _Tagged):
            placeholders[name] = ["n"]
    known = raw.get("known")
    if isinstance(known, dict):
        placeholders["known"] = {
            name: ["n"] if isinstance(v, _Tagged) else v for name, v in known.items()
        }
    try:
        frame = _GUEST_FRAME.validate_python(placeholders, strict=True)
    except Exception:
        raise ProtocolViolation("malformed frame") from None
    if isinstance(frame, ReadyFrame):
        return frame
    if isinstance(frame, Call):  # pragma: no cover - calls are handled above
        raise ProtocolViolation("malformed frame")
    tagged_value = raw.get("value")
    value = tagged_value.value if isinstance(tagged_value, _Tagged) else None
    assert not isinstance(frame, Call)
    reported = frame.error  # type: ignore[union-attr]
    error = None if reported is None else ErrorInfo(reported.type, reported.message, reported.line)
    if (frame.status == "ok") != (error is None):  # type: ignore[union-attr]
        raise ProtocolViolation(f"status {frame.status!r} with error={error is not None}")  # type: ignore[union-attr]
    if isinstance(frame, TurnDoneFrame):
        assert isinstance(known, dict)
        values = {name: v.value for name, v in known.items() if isinstance(v, _Tagged)}
        return TurnDone(frame.status, value, error, frame.stdout, values, tuple(frame.opaque))
    return Done(frame.status, value, error)  # type: ignore[union-attr]


def envelope_steps(payload: bytes) -> Steps:
    """``(envelope, value)`` of a large frame that is not a Guest frame (the Ray link's
    outcome): its JSON with the tagged ``value`` field decoded (and ``["n"]`` in its place)."""
    text = yield from _text(payload)
    decoder = _Envelope(text, (yield from _has_controls(payload)))
    if decoder.tok()[0] != "{":
        raise ProtocolViolation("frame is not a JSON object")
    raw = yield from decoder.members(0, frame=True)
    if _END.match(text, decoder.pos) is None:
        raise ProtocolViolation("frame is not JSON: text after the object")
    tagged = raw.get("value")
    if isinstance(tagged, _Tagged):
        raw["value"] = ["n"]
        return raw, tagged.value
    return raw, None


async def stepped(steps: Steps) -> Any:
    """Run ``steps`` to its value, letting the event loop run between them."""
    try:
        while True:
            next(steps)
            await anyio.lowlevel.checkpoint()
    except StopIteration as stop:
        return stop.value


async def guest_frame(payload: bytes) -> ReadyFrame | Call | RefusedCall | Done | TurnDone:
    """The frame ``payload`` stands for: at once when it is small (``parse_guest_frame``),
    in steps when it is large, letting the event loop run between them. Raises
    ``ProtocolViolation``. Cancellation stops the decoding (nothing is kept)."""
    if len(payload) <= INLINE_FRAME_BYTES:
        return parse_guest_frame(payload)
    frame: ReadyFrame | Call | RefusedCall | Done | TurnDone = await stepped(frame_steps(payload))
    return frame
