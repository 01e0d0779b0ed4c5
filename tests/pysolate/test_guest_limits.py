"""Every Guest limit ends the run with status ``limit`` and names itself; deaths are ``crashed``.

Limits are set small so each test stays well under a second or two of wall time.
"""

from __future__ import annotations

import anyio
import pytest
from guest_levels import guest_factory, params, with_ray

from pysolate._guest_api import GuestLimits, GuestOutcome

pytestmark = pytest.mark.anyio

CAPS = {"tools": ["echo", "slow", "big"]}


class _Level:
    value = "strongest"
    monkeypatch: pytest.MonkeyPatch | None = None


LEVEL = _Level()
"""The isolation level of the current test (every test runs at every level offered here)."""


@pytest.fixture(autouse=True, params=with_ray(params(hidden_bwrap=False)))
def _at_every_level(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LEVEL, "value", request.param)
    monkeypatch.setattr(LEVEL, "monkeypatch", monkeypatch)


class Tools:
    def __init__(self, slow_seconds: float = 0.0, big_bytes: int = 0) -> None:
        self.calls = 0
        self.cancelled = 0
        self.slow_seconds = slow_seconds
        self.big_bytes = big_bytes

    async def __call__(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        self.calls += 1
        if method == "slow":
            try:
                await anyio.sleep(self.slow_seconds)
            except anyio.get_cancelled_exc_class():
                self.cancelled += 1
                raise
        if method == "big":
            return "x" * self.big_bytes
        return args[0] if args else None


async def run(source: str, tools: Tools | None = None, **limits: float) -> GuestOutcome:
    assert LEVEL.monkeypatch is not None
    async with guest_factory(LEVEL.value, LEVEL.monkeypatch) as start:
        guest = await start(CAPS, GuestLimits(**limits))
        try:
            return await guest.run(source, tools or Tools())
        finally:
            await guest.aclose()


def limit_name(out: GuestOutcome) -> str:
    assert out.status == "limit", out
    assert out.error is not None
    return out.error.type


async def test_wall_time_ends_an_endless_loop() -> None:
    out = await run("while True:\n    pass", wall_time=0.3)
    assert limit_name(out) == "WallTimeLimit"


async def test_wall_time_includes_tool_time() -> None:
    out = await run("tools.slow()\n'never'", Tools(slow_seconds=30), wall_time=0.3)
    assert limit_name(out) == "WallTimeLimit"


async def test_output_before_the_wall_time_is_kept() -> None:
    out = await run("print('before', flush=True)\nwhile True:\n    pass", wall_time=0.5)
    assert (limit_name(out), out.stdout) == ("WallTimeLimit", "before\n")


async def test_wall_time_ends_a_flood_of_stderr() -> None:
    """stderr has no limit of its own (the Host keeps its start): a child writing it as fast
    as it can still ends at its wall time, not its CPU time: reading it never holds the
    Host's loop past the wall time's timer."""
    out = await run(
        "import os\nb = b'x' * 65536\nwhile True:\n    os.write(2, b)", wall_time=0.5, cpu_time=20
    )
    assert limit_name(out) == "WallTimeLimit"


async def test_cpu_time_ends_a_busy_loop() -> None:
    out = await run("while True:\n    pass", cpu_time=1, wall_time=20)
    assert limit_name(out) == "CPUTimeLimit"


async def test_memory_limit_ends_an_allocation_bomb() -> None:
    out = await run("x = bytearray(600 * 1024 * 1024)\nlen(x)", memory_bytes=256 * 1024 * 1024)
    assert limit_name(out) == "MemoryLimit"
    assert out.error is not None and out.error.line == 1


async def test_output_limit_ends_a_flood_and_keeps_at_most_the_limit() -> None:
    out = await run("while True:\n    print('x' * 1000)", output_bytes=10_000)
    assert limit_name(out) == "OutputLimit"
    assert 0 < len(out.stdout) <= 10_000


async def test_output_limit_counts_the_final_flush() -> None:
    """A program that ends right after printing too much still hits the limit."""
    out = await run("print('x' * 5000)\n1", output_bytes=1000)
    assert limit_name(out) == "OutputLimit"


async def test_output_at_the_limit_is_fine() -> None:
    out = await run("print('x' * 999)\n1", output_bytes=1000)
    assert (out.status, len(out.stdout)) == ("ok", 1000)


async def test_call_limit_stops_before_the_extra_call() -> None:
    tools = Tools()
    out = await run("for i in range(10):\n    tools.echo(i)", tools, max_calls=3)
    assert limit_name(out) == "CallLimit"
    assert tools.calls == 3


async def test_frame_limit_on_a_large_argument() -> None:
    tools = Tools()
    out = await run("tools.echo('x' * 5000)", tools, max_frame_bytes=4096)
    assert limit_name(out) == "FrameLimit"
    assert tools.calls == 0


async def test_frame_limit_on_a_large_reply() -> None:
    out = await run("tools.big()", Tools(big_bytes=5000), max_frame_bytes=4096)
    assert limit_name(out) == "FrameLimit"


async def test_frame_limit_on_a_large_value() -> None:
    out = await run("'x' * 5000", max_frame_bytes=4096)
    assert limit_name(out) == "FrameLimit"


async def test_frame_limit_cannot_be_caught_by_the_program() -> None:
    out = await run(
        "try:\n    tools.echo('x' * 5000)\nexcept BaseException:\n    pass\n'escaped'",
        max_frame_bytes=4096,
    )
    assert limit_name(out) == "FrameLimit"


async def test_exit_without_finishing_is_a_crash() -> None:
    out = await run("import os\nos._exit(3)")
    assert out.status == "crashed"
    assert out.error is not None and "status 3" in out.error.message


async def test_killed_by_a_signal_is_a_crash() -> None:
    out = await run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert out.status == "crashed"


async def test_death_in_the_middle_of_a_call_is_a_crash_and_cancels_the_call() -> None:
    tools = Tools(slow_seconds=30)
    source = "import os, threading\nthreading.Timer(0.2, os._exit, (1,)).start()\ntools.slow()"
    with anyio.fail_after(10):
        out = await run(source, tools)
    assert out.status == "crashed"
    assert tools.cancelled == 1
