"""Recordings carry the code format and the cut: a replay runs the way the live stream did.

Properties: ``record(events, path, code=...)`` writes what that format reads (text deltas,
or a tool call's JSON argument deltas) and names the format in the header; ``replay``, the
pytest plugin's ``pysolate_replay`` and the CLI run it in that format without being told;
a reply the SDK cut is recorded with its cut line and replays as ``aborted`` (never run); a
header naming no known format is a ``RecordingError`` on line 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sdk_shapes import SHAPES, chat_chunk

from occurrences import Effect
from pysolate import Host
from pysolate.streams import (
    MarkdownCode,
    RecordingError,
    StreamCut,
    ToolCallCode,
    read_recording,
    record,
    replay,
)
from pysolate.testing import Script, in_process_guest, observable, scripted_tool

pytestmark = pytest.mark.anyio

PROGRAM = 'a = docs.search("x")\nb = docs.search("y \\u00e9")\n[a, b]\n'
ARGUMENTS = json.dumps({"note": "two reads", "code": PROGRAM})


def make_host() -> Host:
    host = Host(guest_factory=in_process_guest)
    host.register(
        "docs",
        scripted_tool(search=Script(lambda q: [q], effect=Effect.PURE, version="1", latency=0.01)),
    )
    return host


async def reference(source: str) -> dict[str, object]:
    return observable(await make_host().run_source(source, speculate=False))


async def drain(stream: object) -> list[str]:
    return [chunk async for chunk in stream]  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_a_recorded_tool_call_replays_as_a_tool_call(tmp_path: Path, shape: str) -> None:
    path = tmp_path / "call.jsonl"
    code = ToolCallCode("run_code")
    live = await make_host().run_stream(
        record(SHAPES[shape]("run_code", ARGUMENTS), path, code=code)
    )
    recording = read_recording(path)
    assert recording.metadata["code"] == {
        "format": "tool_call",
        "tool": "run_code",
        "argument": "code",
    }
    assert recording.code == code and recording.cut is None
    assert recording.text == ARGUMENTS  # only the chosen call's argument deltas
    replayed = await make_host().run_stream(replay(path, speed=None))  # no code=: the header's
    assert live.status == replayed.status == "ok"
    assert (
        observable(live) == observable(replayed) == await reference(json.loads(ARGUMENTS)["code"])
    )


async def test_a_cut_reply_is_recorded_with_its_cut_and_replays_aborted(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    events = [chat_chunk({"content": "x = docs.search('a')\n"}), chat_chunk({}, finish="length")]
    live = await make_host().run_stream(record(events, path))
    assert live.status == "aborted" and live.error is not None and live.error.type == "StreamCut"
    recording = read_recording(path)
    assert (
        recording.text == "x = docs.search('a')\n"
        and recording.cut == "OpenAI finish_reason='length'"
    )
    replayed = await make_host().run_stream(replay(path, speed=None))
    assert replayed.status == "aborted" and replayed.error is not None
    assert (replayed.error.type, replayed.error.message) == (live.error.type, live.error.message)
    with pytest.raises(StreamCut):
        await drain(replay(path, speed=None))


async def test_markdown_format_round_trips_and_is_used(tmp_path: Path) -> None:
    path = tmp_path / "md.jsonl"
    reply = [
        "Try:\n```python\n",
        "a = docs.search('q')\na\n",
        "```\n",
        "```python\nb = 2\nb\n```\n",
    ]
    await drain(record(reply, path, code=MarkdownCode(block=1)))
    assert read_recording(path).metadata["code"] == {
        "format": "markdown",
        "block": 1,
        "bare": False,
    }
    result = await make_host().run_stream(replay(path, speed=None))
    assert result.status == "ok" and result.value == 2
    await drain(record(reply, path, code="markdown"))
    assert read_recording(path).metadata["code"] == "markdown"
    result = await make_host().run_stream(replay(path, speed=None))
    assert result.status == "ok" and result.value == ["q"]


async def test_an_explicit_code_overrides_the_recording(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    await drain(record(["```python\nx = 5\nx\n```\n"], path))
    assert "code" not in read_recording(path).metadata
    assert (await make_host().run_stream(replay(path, speed=None))).status == "rejected"  # raw
    result = await make_host().run_stream(replay(path, speed=None), code="markdown")
    assert result.status == "ok" and result.value == 5


@pytest.mark.parametrize(
    "bad",
    ['"md"', '{"format": "tool_call"}', '{"format": "xml"}', '{"format": "markdown", "block": -1}'],
)
def test_a_header_with_an_unknown_code_format_is_refused_on_line_1(
    tmp_path: Path, bad: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"format": "pysolate-stream", "version": 1, "code": ' + bad + '}\n{"t": 0, "text": "x"}\n'
    )
    with pytest.raises(RecordingError, match=r"bad\.jsonl:1: bad header"):
        read_recording(path)
    with pytest.raises(RecordingError):
        replay(path)


def test_a_line_after_the_cut_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"format": "pysolate-stream", "version": 1}\n{"t": 0, "cut": "x"}\n{"t": 1, "text": "y"}\n'
    )
    with pytest.raises(RecordingError, match=r"bad\.jsonl:3: a line after the cut"):
        read_recording(path)


async def test_the_pytest_plugin_replays_in_the_recordings_format(
    tmp_path: Path, pysolate_replay: object
) -> None:
    path = tmp_path / "call.jsonl"
    await drain(record([ARGUMENTS[:9], ARGUMENTS[9:]], path, code=ToolCallCode("run_code")))
    result = await make_host().run_stream(pysolate_replay(path))  # type: ignore[operator]
    assert result.status == "ok"
    assert observable(result) == await reference(json.loads(ARGUMENTS)["code"])


def test_the_cli_records_and_replays_a_tool_call(tmp_path: Path) -> None:
    out = tmp_path / "call.jsonl"
    arguments = json.dumps({"code": 'b = people.lookup_owner("cache")\nb\n'})

    def pysolate(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pysolate", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = pysolate("record", str(out), "--tool", "run_code", "--json", stdin=arguments)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["value"] == "bob"
    assert read_recording(out).code == ToolCallCode("run_code")
    done = pysolate("replay", str(out), "--instant", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["value"] == "bob"
