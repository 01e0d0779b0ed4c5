"""In-process node agents start a reaper child each; stop them after every test, so no test
leaves a child process behind for the next to trip over."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from .agents import CREATED


@pytest.fixture(autouse=True)
def _shut_down_agents() -> Iterator[None]:
    yield
    while CREATED:
        anyio.run(CREATED.pop().shutdown)
