"""The shipped pytest plugin, in a child pytest: found through its entry point, or named."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from pysolate.streams import source_to_stream, write_recording

REPO = Path(__file__).resolve().parents[2]

AGENT_TEST = """
import pytest

from pysolate import Effect, Host
from pysolate.testing import Script, in_process_guest, scripted_tool


@pytest.mark.anyio
async def test_agent_offline(pysolate_replay, pysolate_recording):
    docs = scripted_tool(search=Script(lambda query: [query.upper()], effect=Effect.PURE))
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    chunks = [c async for c in pysolate_replay("recordings/agent.jsonl")]
    assert len(chunks) > 5  # token-sized chunks, boundaries kept
    assert "".join(chunks) == pysolate_recording("recordings/agent.jsonl").text
    result = await host.run_source("".join(chunks))
    assert result.status == "ok", result.error
    assert result.value == ["NOTES"]
    assert [c.args for c in docs.calls] == [("notes",)]


def test_bad_recording_fails_at_the_call(pysolate_replay):
    from pysolate.streams import RecordingError

    with pytest.raises(RecordingError, match="bad.jsonl:1: bad header"):
        pysolate_replay("recordings/bad.jsonl")
"""


def _child_pytest(tmp_path: Path, *plugin_args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            *plugin_args,
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )


def test_the_installed_plugin_loads_itself_without_p(tmp_path: Path):
    """The entry point alone provides the fixtures; ``-p no:`` really disables it."""
    (tmp_path / "test_fixture.py").write_text(
        "def test_uses(pysolate_replay, pysolate_recording):\n    assert callable(pysolate_replay)\n",
        encoding="utf-8",
    )
    found = _child_pytest(tmp_path)
    assert found.returncode == 0, found.stdout + found.stderr
    assert "1 passed" in found.stdout
    disabled = _child_pytest(tmp_path, "-p", "no:pysolate.streams.pytest_plugin")
    assert disabled.returncode != 0 and "fixture 'pysolate_replay' not found" in disabled.stdout


def test_plugin_replays_recordings_next_to_the_test(tmp_path: Path):
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    source = 'hits = docs.search("notes")\nhits\n'
    write_recording(recordings / "agent.jsonl", source_to_stream(source, tokens_per_second=1000))
    (recordings / "bad.jsonl").write_text('{"format": "x"}\n', encoding="utf-8")
    (tmp_path / "test_agent.py").write_text(textwrap.dedent(AGENT_TEST), encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "pysolate.streams.pytest_plugin",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},  # as the CI's fresh install would see it
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout and "skipped" not in done.stdout
