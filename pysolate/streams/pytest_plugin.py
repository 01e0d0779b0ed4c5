"""A pytest plugin for testing agents offline against recorded model streams.

Installing Pysolate enables it (a ``pytest11`` entry point); ``-p
no:pysolate.streams.pytest_plugin`` turns it off, and an explicit ``-p`` or
``pytest_plugins`` entry for it is harmless. Then, with tools from ``pysolate.testing`` standing in for the real ones::

    @pytest.mark.anyio
    async def test_agent(pysolate_replay):
        host = Host(guest_factory=in_process_guest)
        host.register("docs", scripted_tool(search=Script(lambda q: [q], effect=Effect.PURE)))
        result = await host.run_stream(pysolate_replay("recordings/search.jsonl"))
        assert result.status == "ok"

Relative paths resolve against the directory of the requesting test file, so recordings
live next to the tests that use them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ._reader import CodedStream
    from ._recording import Recording

# Loaded by every pytest run in an environment that has Pysolate installed: it imports
# nothing of Pysolate until a fixture is used (``pysolate._lazy``).
ReplayFactory = Callable[..., "CodedStream"]
RecordingFactory = Callable[[str | os.PathLike[str]], "Recording"]


def _resolver(request: pytest.FixtureRequest) -> Callable[[str | os.PathLike[str]], Path]:
    base = Path(request.path).parent

    def resolve(path: str | os.PathLike[str]) -> Path:
        return base / path  # an absolute ``path`` replaces ``base``

    return resolve


@pytest.fixture
def pysolate_recording(request: pytest.FixtureRequest) -> RecordingFactory:
    """``pysolate_recording(path) -> Recording``: a validated recording, for assertions.

    Raises ``RecordingError`` (file and line) for a missing or malformed file.
    """
    from ._recording import read_recording

    resolve = _resolver(request)
    return lambda path: read_recording(resolve(path))


@pytest.fixture
def pysolate_replay(request: pytest.FixtureRequest) -> ReplayFactory:
    """``pysolate_replay(path, *, speed=None) -> CodedStream``: replay a recording.

    ``speed=None`` (the default here) replays instantly, chunk boundaries intact, so tests
    do not wait; pass ``speed=1.0`` for recorded timing. The file is read and validated at
    the call, so a bad recording fails the test there with a ``RecordingError``. The
    stream carries the recording's code format (``host.run_stream(pysolate_replay(p))``
    runs a markdown or tool-call recording as such) and its cut, as ``replay`` does.
    """
    from ._recording import read_recording, replay_recording

    resolve = _resolver(request)

    def replay(path: str | os.PathLike[str], *, speed: float | None = None) -> CodedStream:
        return replay_recording(read_recording(resolve(path)), speed=speed)

    return replay
