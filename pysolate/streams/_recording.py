"""Recorded streams: the JSONL format, recording while passing through, and replay.

A recording is the trust boundary between a model's stream and every later run of it
(tests, demos, benchmarks), so every line is validated with pydantic and a bad file fails
as a whole, before any chunk is yielded, with a ``RecordingError`` naming file and line.

Format (docs/recording.md, "The format")::

    {"format": "pysolate-stream", "version": 1, ...free metadata...}
    {"t": 0.41, "text": "x = docs"}
    {"t": 0.43, "text": ".search("}

``t`` is seconds since the stream started (so the first chunk's ``t`` is the time to first
token) and never decreases. The header's optional ``"code"`` is the code format the stream
is in (``"raw"``, ``"markdown"``, or an object such as ``{"format": "tool_call", "tool":
"run_code", "argument": "code"}``, whose chunks are then the tool call's JSON argument
text); a replay runs in that format. A reply the SDK reported incomplete ends with one
``{"t": 2.5, "cut": "OpenAI finish_reason='length'"}`` line, so its replay is cut the same
way. Prior art: asciinema's asciicast v2 (a JSON header line, then
``[time, type, data]`` events), which showed that line-delimited events make a recording
that survives a crash mid-stream.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._backend import loop_checkpoint, loop_clock, loop_sleep
from .._exceptions import PysolateError
from ._adapters import cut_reason, event_text
from ._errors import StreamCut
from ._formats import Code, Format, ToolCallCode, code_format, format_from_json, format_to_json
from ._reader import CodedStream, events_of
from ._tool_calls import ToolCallSelector

FORMAT: Final = "pysolate-stream"
VERSION: Final = 1

MEASURED_DIGITS: Final = 6
"""Decimal places ``record`` keeps of a measured time: microseconds are far below any
stream's jitter, and shorter lines keep recordings readable. Times given to
``write_recording`` are written exactly."""


class RecordingError(PysolateError, ValueError):
    """A recording file is not a valid pysolate stream.

    ``path`` and ``line`` (1-based; None when the file as a whole is wrong, e.g. empty) say
    where; the pydantic ``ValidationError`` or ``OSError`` behind it is the ``__cause__``.
    """

    def __init__(self, path: str | os.PathLike[str], line: int | None, problem: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class RecordingHeader(BaseModel):
    """Line 1. Unknown keys are kept: they are the recorder's free metadata."""

    model_config = ConfigDict(extra="allow", frozen=True)

    format: Literal["pysolate-stream"]
    version: Literal[1]


class _ChunkLine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    t: float = Field(ge=0, allow_inf_nan=False)
    text: str


class _CutLine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    t: float = Field(ge=0, allow_inf_nan=False)
    cut: str


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a stream and when it arrived, in seconds since the stream started."""

    t: float
    text: str


@dataclass(frozen=True, slots=True)
class Recording:
    """A whole recording: its header metadata, its chunks in order, and, for a reply the
    SDK reported incomplete, why (``cut``)."""

    chunks: tuple[Chunk, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    cut: str | None = None

    @property
    def code(self) -> Format:
        """The code format the header names (``"raw"`` when it names none)."""
        return format_from_json(self.metadata.get("code", "raw"))

    @property
    def text(self) -> str:
        """The streamed text, all chunks joined."""
        return "".join(c.text for c in self.chunks)

    @property
    def duration(self) -> float:
        """Seconds from the stream's start to its last chunk."""
        return self.chunks[-1].t if self.chunks else 0.0


def _header_line(metadata: Mapping[str, Any] | None) -> str:
    header = dict(metadata or {})
    header.pop("format", None)
    header.pop("version", None)
    return json.dumps({"format": FORMAT, "version": VERSION, **header}, ensure_ascii=False)


def _chunk_line(t: float, text: str) -> str:
    return json.dumps({"t": t, "text": text}, ensure_ascii=False)


def _cut_line(t: float, reason: str) -> str:
    return json.dumps({"t": t, "cut": reason}, ensure_ascii=False)


def write_recording(
    path: str | os.PathLike[str],
    chunks: Iterable[Chunk],
    *,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Write ``chunks`` (e.g. from ``source_to_stream``) as a recording file.

    Raises ``ValueError`` when times decrease or are negative or the metadata's ``code``
    names no code format (``read_recording`` would refuse the file), ``TypeError`` for a
    non-str text, ``OSError`` when the file cannot be written. Nothing is written on error.
    """
    if metadata is not None and "code" in metadata:
        format_from_json(metadata["code"])
    lines = [_header_line(metadata)]
    last = 0.0
    for chunk in chunks:
        if not isinstance(chunk.text, str):
            raise TypeError(f"chunk text must be str, not {type(chunk.text).__name__}")
        if not (chunk.t >= last and math.isfinite(chunk.t)):
            raise ValueError(f"chunk times must be finite and non-decreasing from 0: {chunk.t}")
        last = chunk.t
        lines.append(_chunk_line(chunk.t, chunk.text))
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8", newline="\n")


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """Read and validate a whole recording.

    Raises ``RecordingError`` (file and line in the message) for an unreadable file, a
    missing or wrong header, a malformed chunk line, or times that go backwards.
    """
    try:
        # Split on "\n" only: JSON text may hold U+2028 and other characters that
        # str.splitlines() would treat as line ends.
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(path, None, f"cannot read recording: {exc}") from exc
    if not any(line.strip() for line in lines):
        raise RecordingError(path, None, "empty file, expected a pysolate-stream header")
    try:
        header = RecordingHeader.model_validate_json(lines[0])
    except ValidationError as exc:
        raise RecordingError(path, 1, f"bad header: {_explain(exc)}") from exc
    metadata = {k: v for k, v in header.model_dump().items() if k not in ("format", "version")}
    try:
        format_from_json(metadata.get("code", "raw"))
    except ValueError as exc:
        raise RecordingError(path, 1, f"bad header: {exc}") from exc
    chunks: list[Chunk] = []
    cut: str | None = None
    last = 0.0
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if cut is not None:
            raise RecordingError(
                path, number, "a line after the cut (the cut line ends a recording)"
            )
        parsed: _ChunkLine | _CutLine
        try:
            parsed = _ChunkLine.model_validate_json(line)
        except ValidationError as exc:
            try:
                parsed = _CutLine.model_validate_json(line)
            except ValidationError:
                raise RecordingError(path, number, f"bad chunk: {_explain(exc)}") from exc
        if parsed.t < last:
            raise RecordingError(path, number, f"time goes backwards: {parsed.t} < {last}")
        last = parsed.t
        if isinstance(parsed, _CutLine):
            cut = parsed.cut
        else:
            chunks.append(Chunk(parsed.t, parsed.text))
    return Recording(tuple(chunks), metadata, cut)


def _explain(exc: ValidationError) -> str:
    """One line per pydantic error: ``location: message``."""
    parts = []
    for error in exc.errors():
        location = ".".join(str(p) for p in error["loc"]) or "line"
        parts.append(f"{location}: {error['msg']}")
    return "; ".join(parts)


def record(
    chunks: object,
    path: str | os.PathLike[str],
    *,
    code: Code | None = None,
    metadata: Mapping[str, Any] | None = None,
    clock: Callable[[], float] = anyio.current_time,
) -> CodedStream:
    """Pass a stream's code text through while writing it to a recording at ``path``.

    ``chunks`` is any stream ``run_stream`` takes (``str`` chunks or SDK events). What is
    recorded, and passed on as ``str``, is what the code format ``code`` reads: the text
    deltas for ``"raw"``/markdown (the default ``None`` is ``"raw"`` without naming it in
    the header), the call's JSON argument deltas for ``ToolCallCode``. The header names
    ``code`` when given, so a replay runs the same way; the returned stream carries it
    too, so ``run_stream(record(...))`` needs no ``code=``. A reply the SDK reports
    incomplete is recorded with a final cut line, then ``StreamCut`` is raised.

    Times are measured with ``clock`` from the moment iteration starts. Each line is
    flushed as it is written, so a stream that fails, is cancelled or is abandoned midway
    leaves a valid recording of what arrived; the exception (or cancellation) then
    propagates unchanged. Close it (``aclose``) when leaving the loop early, or the file
    stays open until the generator is collected. Raises ``TypeError`` for a ``chunks``
    that is not a stream (at the call), ``ValueError`` for an unknown ``code``,
    ``StreamShapeError`` for an event of no known shape, ``OSError`` when the file cannot
    be written.
    """
    fmt = code_format("raw" if code is None else code)
    header = dict(metadata or {})
    if code is not None:
        header["code"] = format_to_json(fmt)
    return CodedStream(_record(events_of(chunks), path, fmt, header, clock), fmt)


async def _record(
    events: AsyncIterator[object],
    path: str | os.PathLike[str],
    fmt: Format,
    header: Mapping[str, Any],
    clock: Callable[[], float],
) -> AsyncIterator[str]:
    selector = ToolCallSelector(fmt.tool) if isinstance(fmt, ToolCallCode) else None
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        start = clock()
        out.write(_header_line(header) + "\n")
        out.flush()
        index = 0
        async for event in events:
            elapsed = round(max(0.0, clock() - start), MEASURED_DIGITS)
            reason = cut_reason(event)
            if reason is not None:
                out.write(_cut_line(elapsed, reason) + "\n")
                out.flush()
                raise StreamCut(reason)
            text = (
                selector.feed(event, index) if selector is not None else event_text(event, index)
            ) or ""
            index += 1
            if text or isinstance(event, str):  # str chunks are kept as they came, '' too
                out.write(_chunk_line(elapsed, text) + "\n")
                out.flush()
                yield text


async def play(
    chunks: Iterable[Chunk],
    *,
    speed: float | None = 1.0,
    sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
    clock: Callable[[], float] = anyio.current_time,
) -> AsyncIterator[str]:
    """Yield each chunk's text at its time divided by ``speed`` (``None``: at once).

    The schedule is absolute (chunk *i* is due ``t_i / speed`` after the first step), so a
    slow consumer does not accumulate drift; a chunk already overdue is yielded after a
    checkpoint. ``sleep`` and ``clock`` are injectable for tests (defaults: anyio's). With
    ``speed=None`` it never sleeps but still checkpoints per chunk, so other tasks (the
    speculative lane) run between chunks. Cancellation propagates out of the pending sleep.
    Raises ``ValueError`` for a speed that is not a positive finite number.
    """
    if speed is not None and not (math.isfinite(speed) and speed > 0):
        raise ValueError(f"speed must be a positive finite number or None, not {speed!r}")
    # anyio's defaults, looked up once: per chunk they were most of this loop's own CPU.
    if clock is anyio.current_time:
        clock = loop_clock()
    if sleep is anyio.sleep:
        sleep = loop_sleep()
    checkpoint = loop_checkpoint()
    start = clock()
    for chunk in chunks:
        if speed is not None:
            delay = start + chunk.t / speed - clock()
            if delay > 0:
                await sleep(delay)
            else:
                await checkpoint()
        else:
            await checkpoint()
        yield chunk.text


def replay(
    path: str | os.PathLike[str],
    *,
    speed: float | None = 1.0,
    sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
    clock: Callable[[], float] = anyio.current_time,
) -> CodedStream:
    """Replay a recording file at recorded speed, scaled by ``speed``, or instantly (None).

    The whole file is read and validated at the call, so a bad recording raises
    ``RecordingError`` before any chunk reaches the consumer. The stream carries the
    header's code format (``run_stream(replay(path))`` runs it the way it was recorded),
    and a recording of a cut reply raises ``StreamCut`` after its last chunk. See ``play``
    for timing, ``sleep``/``clock`` and cancellation.
    """
    return replay_recording(read_recording(path), speed=speed, sleep=sleep, clock=clock)


def replay_recording(
    recording: Recording,
    *,
    speed: float | None = 1.0,
    sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
    clock: Callable[[], float] = anyio.current_time,
) -> CodedStream:
    """``replay`` of a ``Recording`` already read (its code format, its cut)."""
    if speed is not None and not (math.isfinite(speed) and speed > 0):
        raise ValueError(f"speed must be a positive finite number or None, not {speed!r}")

    async def chunks() -> AsyncIterator[str]:
        async for text in play(recording.chunks, speed=speed, sleep=sleep, clock=clock):
            yield text
        if recording.cut is not None:
            raise StreamCut(recording.cut)

    return CodedStream(chunks(), recording.code)
