"""Recorded streams: format, record/replay round trip, replay timing, synthetic streams."""

from __future__ import annotations

import json
import statistics
import sysconfig
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pysolate.streams import (
    Chunk,
    RecordingError,
    StreamShapeError,
    play,
    read_recording,
    record,
    replay,
    source_to_stream,
    tokenize_like_a_model,
    write_recording,
)
from pysolate.streams._synthetic import MAX_SPACE_PIECE

anyio_mark = pytest.mark.anyio


class FakeTime:
    """A controlled clock; ``sleep`` records the requested delay and advances the clock."""

    def __init__(self) -> None:
        self.now = 100.0
        self.delays: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        self.now += delay


async def timed_stream(time: FakeTime, items: Iterable[tuple[float, str]]) -> AsyncIterator[str]:
    """Chunks that arrive at the given offsets on the fake clock."""
    start = time.now
    for t, text in items:
        time.now = start + t
        yield text


CHUNKS = [(0.25, "x = docs"), (0.5, '.search("a")\n'), (0.5, ""), (1.75, "print(x)\n")]


@anyio_mark
async def test_record_passes_through_and_round_trips(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    time = FakeTime()
    passed = [
        c
        async for c in record(
            timed_stream(time, CHUNKS), path, metadata={"model": "m"}, clock=time.clock
        )
    ]
    assert passed == [text for _, text in CHUNKS]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"format": "pysolate-stream", "version": 1, "model": "m"}
    assert json.loads(lines[2]) == {"t": 0.5, "text": '.search("a")\n'}
    recording = read_recording(path)
    assert recording.chunks == tuple(Chunk(t, text) for t, text in CHUNKS)
    assert recording.metadata == {"model": "m"}
    assert recording.text == "".join(text for _, text in CHUNKS)
    assert recording.duration == 1.75

    replay_time = FakeTime()
    start = replay_time.now
    arrivals = []
    async for text in replay(path, sleep=replay_time.sleep, clock=replay_time.clock):
        arrivals.append((replay_time.now - start, text))
    assert arrivals == CHUNKS  # same chunks at the same relative times


@anyio_mark
async def test_record_keeps_microseconds_of_measured_times(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    time = FakeTime()
    async for _ in record(timed_stream(time, [(0.123456789, "a")]), path, clock=time.clock):
        pass
    assert read_recording(path).chunks == (Chunk(0.123457, "a"),)


@anyio_mark
async def test_record_keeps_what_arrived_when_the_stream_fails(tmp_path: Path):
    async def failing() -> AsyncIterator[str]:
        yield "a = 1\n"
        raise ConnectionError("cut")

    path = tmp_path / "s.jsonl"
    with pytest.raises(ConnectionError):
        async for _ in record(failing(), path):
            pass
    assert read_recording(path).text == "a = 1\n"


@anyio_mark
async def test_record_rejects_chunks_of_no_known_shape(tmp_path: Path):
    async def bad() -> AsyncIterator[object]:
        yield b"bytes"

    with pytest.raises(StreamShapeError, match=r"no known shape.*bytes"):
        async for _ in record(bad(), tmp_path / "s.jsonl"):
            pass


@anyio_mark
async def test_replay_scaled_requests_scaled_delays(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    write_recording(path, [Chunk(t, text) for t, text in CHUNKS])
    time = FakeTime()
    out = [c async for c in replay(path, speed=2.0, sleep=time.sleep, clock=time.clock)]
    assert out == [text for _, text in CHUNKS]
    assert time.delays == [0.125, 0.125, 0.625]  # the equal-time chunk needs no sleep


@anyio_mark
async def test_replay_instantly_never_sleeps(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    write_recording(path, [Chunk(t, text) for t, text in CHUNKS])
    time = FakeTime()
    out = [c async for c in replay(path, speed=None, sleep=time.sleep, clock=time.clock)]
    assert out == [text for _, text in CHUNKS]
    assert time.delays == []


@anyio_mark
async def test_replay_schedule_is_absolute_so_a_slow_consumer_does_not_drift():
    time = FakeTime()
    chunks = [Chunk(1.0, "a"), Chunk(2.0, "b"), Chunk(3.0, "c"), Chunk(3.5, "d")]
    async for _ in play(chunks, sleep=time.sleep, clock=time.clock):
        time.now += 0.75  # the consumer takes 0.75 s per chunk
    assert time.delays == [1.0, 0.25, 0.25]  # "d" is already overdue


@pytest.mark.parametrize("speed", [0, -1.0, float("inf"), float("nan")])
def test_replay_rejects_bad_speeds(speed: float):
    async def main() -> None:
        async for _ in play([Chunk(0, "a")], speed=speed):
            pass

    with pytest.raises(ValueError, match="speed"):
        anyio.run(main)


def test_replay_at_recorded_speed_in_virtual_time(tmp_path: Path):
    """With trio's MockClock, real anyio.sleep delivers every chunk exactly on time."""
    from trio.testing import MockClock

    path = tmp_path / "s.jsonl"
    write_recording(path, [Chunk(t, text) for t, text in CHUNKS])

    async def main() -> list[tuple[float, str]]:
        start = anyio.current_time()
        return [(anyio.current_time() - start, text) async for text in replay(path)]

    arrivals = anyio.run(
        main, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)}
    )
    assert [text for _, text in arrivals] == [text for _, text in CHUNKS]
    assert [round(t, 9) for t, _ in arrivals] == [t for t, _ in CHUNKS]


# Bad recordings ------------------------------------------------------------------------

HEADER = '{"format": "pysolate-stream", "version": 1}'


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        ("", None, "empty file"),
        ("\n \n", None, "empty file"),
        ("\n" + HEADER + "\n", 1, "bad header: line: Invalid JSON"),
        ('{"format": "other", "version": 1}\n', 1, "bad header: format"),
        ('{"format": "pysolate-stream", "version": 2}\n', 1, "bad header: version"),
        ("not json\n", 1, "bad header: line: Invalid JSON"),
        (HEADER + '\n{"t": 0.1, "text": "a"}\n{"t": 0.2, "text": 3}\n', 3, "bad chunk: text"),
        (HEADER + '\n{"t": -1, "text": "a"}\n', 2, "bad chunk: t"),
        (HEADER + '\n{"text": "a"}\n', 2, "bad chunk: t: Field required"),
        (HEADER + '\n{"t": 0, "text": "a", "extra": 1}\n', 2, "bad chunk: extra"),
        (HEADER + '\n{"t": 0, "text": "a"\n', 2, "bad chunk: line: Invalid JSON"),
        (HEADER + '\n{"t": 2, "text": "a"}\n{"t": 1, "text": "b"}\n', 3, "time goes backwards"),
    ],
)
def test_bad_recordings_name_file_and_line(tmp_path: Path, content: str, line, problem: str):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RecordingError) as info:
        read_recording(path)
    err = info.value
    assert err.path == str(path) and err.line == line
    where = f"{path}:{line}" if line else str(path)
    assert str(err).startswith(f"{where}: {problem}"), str(err)
    if line:
        assert isinstance(err.__cause__, ValidationError) or "backwards" in problem


def test_unreadable_recording(tmp_path: Path):
    with pytest.raises(RecordingError, match="cannot read recording") as info:
        read_recording(tmp_path / "missing.jsonl")
    assert isinstance(info.value.__cause__, FileNotFoundError)
    (tmp_path / "latin1.jsonl").write_bytes(b"\xff\xfe")
    with pytest.raises(RecordingError, match="cannot read recording"):
        read_recording(tmp_path / "latin1.jsonl")


@anyio_mark
async def test_bad_recording_fails_before_any_chunk_is_replayed(tmp_path: Path):
    path = tmp_path / "bad.jsonl"
    path.write_text(HEADER + '\n{"t": 0, "text": "a"}\n{"t": 0}\n', encoding="utf-8")
    seen: list[str] = []
    with pytest.raises(RecordingError, match=":3: bad chunk"):
        async for text in replay(path, speed=None):
            seen.append(text)
    assert seen == []


def test_write_recording_round_trips_awkward_text(tmp_path: Path):
    # U+2028 and U+0085 are line ends to str.splitlines(), not to JSONL.
    chunks = [
        Chunk(0.0, "é\n"),
        Chunk(0.0, "\t\"'\\"),
        Chunk(0.1, "\u2028\x85\r\n"),
        Chunk(0.2, "\x00?"),
    ]
    path = tmp_path / "s.jsonl"
    write_recording(path, chunks, metadata={"format": "ignored", "note": "n"})
    recording = read_recording(path)
    assert recording.chunks == tuple(chunks)
    assert recording.metadata == {"note": "n"}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1e6, allow_nan=False, allow_infinity=False), st.text()),
        max_size=20,
    ),
    st.dictionaries(
        st.sampled_from(["code", "format"]) | st.text(max_size=5),
        st.integers() | st.text(max_size=5),
        max_size=3,
    ),
)
@example(items=[], metadata={"code": 0})
@example(items=[], metadata={"code": "markdown"})
def test_any_recording_round_trips_exactly(tmp_path_factory, items, metadata):
    """Whatever ``write_recording`` accepts, ``read_recording`` reads back exactly; what it
    would refuse (a ``code`` that names no format) is refused at write time, writing nothing."""
    times = sorted(t for t, _ in items)
    chunks = [Chunk(t, text) for t, (_, text) in zip(times, items, strict=True)]
    path = tmp_path_factory.mktemp("rt") / "s.jsonl"
    if "code" in metadata and metadata["code"] not in ("raw", "markdown"):
        with pytest.raises(ValueError, match="code format"):
            write_recording(path, chunks, metadata=metadata)
        assert not path.exists()
        return
    write_recording(path, chunks, metadata=metadata)
    recording = read_recording(path)
    assert recording.chunks == tuple(chunks)
    assert recording.metadata == {
        k: v for k, v in metadata.items() if k not in ("format", "version")
    }


def test_blank_lines_are_tolerated(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_text(HEADER + '\n\n{"t": 0, "text": "a"}\n\n', encoding="utf-8")
    assert read_recording(path).text == "a"


def test_write_recording_rejects_bad_chunks(tmp_path: Path):
    with pytest.raises(ValueError, match="non-decreasing"):
        write_recording(tmp_path / "s.jsonl", [Chunk(1, "a"), Chunk(0.5, "b")])
    with pytest.raises(ValueError, match="non-decreasing"):
        write_recording(tmp_path / "s.jsonl", [Chunk(-1, "a")])
    with pytest.raises(TypeError, match="must be str"):
        write_recording(tmp_path / "s.jsonl", [Chunk(0, b"a")])  # type: ignore[arg-type]


# Synthetic streams ---------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(0, 2**32))
def test_tokens_join_back_to_the_source(source: str, seed: int):
    tokens = tokenize_like_a_model(source, seed=seed)
    assert "".join(tokens) == source
    assert all(tokens)


def test_tokens_look_like_code_tokens():
    source = 'def f(path):\n    text = workspace.read_text("notes/a.md")\n    return text\n'
    tokens = tokenize_like_a_model(source)
    assert tokens[:4] == ["def", " f", "(path", "):"] or tokens[:3] == ["def", " f", "("]
    assert "\n    " in tokens  # newline fused with the next line's indentation
    assert " =" in tokens and "\n" in tokens
    assert any(t.startswith(" work") for t in tokens)  # a long word is cut into sub-words
    assert all(len(t.strip()) <= 6 for t in tokens)


def test_token_sizes_on_real_code_are_model_like():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    source = "".join(
        (stdlib / name).read_text(encoding="utf-8") for name in ("json/decoder.py", "textwrap.py")
    )
    sizes = [len(t) for t in tokenize_like_a_model(source)]
    assert 2.5 <= statistics.mean(sizes) <= 4.5  # BPE code tokenizers: about 3 to 4 chars
    assert statistics.median(sizes) <= 4
    assert max(sizes) <= MAX_SPACE_PIECE + 6


def test_seed_moves_only_the_cuts_inside_words():
    source = Path(sysconfig.get_paths()["stdlib"], "textwrap.py").read_text(encoding="utf-8")
    assert tokenize_like_a_model(source, seed=1) == tokenize_like_a_model(source, seed=1)
    assert tokenize_like_a_model(source, seed=1) != tokenize_like_a_model(source, seed=2)
    assert tokenize_like_a_model("a = 1\n", seed=1) == tokenize_like_a_model("a = 1\n", seed=2)


def test_source_to_stream_times_follow_the_token_rate(tmp_path: Path):
    source = "x = docs.search('a')\nprint(x)\n"
    chunks = source_to_stream(source, tokens_per_second=20, seed=3)
    assert "".join(c.text for c in chunks) == source
    assert [c.t for c in chunks] == [(i + 1) / 20 for i in range(len(chunks))]
    path = tmp_path / "s.jsonl"
    write_recording(path, chunks, metadata={"tokens_per_second": 20, "seed": 3})
    assert read_recording(path).chunks == tuple(chunks)
    with pytest.raises(ValueError, match="tokens_per_second"):
        source_to_stream(source, tokens_per_second=0)
