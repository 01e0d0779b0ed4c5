"""Nothing a Guest program (or its source) does reaches the Host process (issue 35, the Host half).

Each attack runs against a real ``Host``; the Host must answer it with a result — a
``rejected`` source, a typed exception at the call, an ``aborted`` run — never with an
exception out of its API, a stalled event loop, unbounded memory, or an effect on another
run. Stalls are measured with a heartbeat task (``heartbeat.py``) as a ratio to the same
Host's stall during an innocent run of the same shape, never as wall-clock bounds.

Sections: the parser (sources nested past CPython's limits).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from occurrences import PrefixParser, SealError
from pysolate import Effect, Host, RunResult, capability
from pysolate._seal import seal
from pysolate.testing import in_process_guest, in_process_session

pytestmark = pytest.mark.anyio


class Echo:
    @capability(effect=Effect.PURE, version="1")
    async def f(self, x: object) -> object:
        return x


def _host(guest: str) -> Host:
    host = Host(guest_factory=in_process_guest, session_factory=in_process_session) if guest == "in-process" else Host()
    host.register("t", Echo())
    return host


async def _chunks(source: str, size: int = 4096) -> AsyncIterator[str]:
    for i in range(0, len(source), size):
        yield source[i : i + size]


async def every_path(host: Host, source: str) -> list[RunResult]:
    """``source`` through ``run_source``, ``run_stream``, and a session's two."""
    results = [await host.run_source(source, speculate=False), await host.run_stream(_chunks(source))]
    async with host.session() as session:
        results.append(await session.run_source(source, speculate=False))
    async with host.session() as session:
        results.append(await session.run_stream(_chunks(source)))
    return results


# -- the parser ----------------------------------------------------------------------------------

RECURSION = "maximum recursion depth exceeded during ast construction"
BOMBS = {
    "a 3,000-term sum": ("x = " + "+".join(["1"] * 3000) + "\nx", "RecursionError", RECURSION),
    "a 100,000-term sum": ("x = " + "+".join(["1"] * 100_000) + "\nx", "RecursionError", RECURSION),
    "100,000 unary minuses": ("x = " + "-" * 100_000 + "1\nx", "MemoryError", "the source is nested too deeply for CPython's parser"),
    "50,000 calls of calls": ("x = f" + "()" * 50_000, "RecursionError", RECURSION),
    "100,000 subscripts": ("x = a" + "[0]" * 100_000, "RecursionError", RECURSION),
    "nested tuples": ("x = " + "1,(" * 500 + "1" + ")" * 500, "MemoryError", "the source is nested too deeply for CPython's parser"),
    "1,000 lambdas": ("x = " + "lambda: " * 1000 + "1", "RecursionError", "maximum recursion depth exceeded while traversing 'expr' node"),
    "1,000 parentheses": ("x = " + "(" * 1000 + "1" + ")" * 1000, "SyntaxError", "too many nested parentheses"),
    "21 nested loops": (
        "".join(" " * i + f"for i{i} in range(1):\n" for i in range(21)) + " " * 21 + "pass\n",
        "SyntaxError",
        "too many statically nested blocks",
    ),
    "100 indented blocks": ("".join(" " * i + "if 1:\n" for i in range(100)) + " " * 100 + "pass\n", "IndentationError", "too many levels of indentation"),
}


@pytest.mark.parametrize("name", BOMBS)
async def test_a_source_past_cpythons_limits_is_rejected_with_its_message(name: str) -> None:
    """Before: ``run_source`` raised ``RecursionError``/``MemoryError`` and ``run_stream`` an
    ``ExceptionGroup``; now every path returns ``rejected`` with CPython's class and message."""
    source, type_name, message = BOMBS[name]
    for result in await every_path(_host("in-process"), source):
        assert result.status == "rejected", result
        assert result.error is not None and (result.error.type, result.error.message) == (type_name, message)
        assert result.calls == ()


@pytest.mark.parametrize("name", BOMBS)
def test_the_prefix_parser_only_raises_the_seal(name: str) -> None:
    """Fed in small chunks (provisional parses included), the parser accepts what it can and
    raises nothing but a ``SealError`` at ``close``: its own work never hits a recursion
    limit. (What only the compiler refuses, the seal refuses after it.)"""
    source = BOMBS[name][0]
    parser = PrefixParser()
    for i in range(0, len(source), 997):
        parser.feed(source[i : i + 997])
        parser.pending()
    with pytest.raises(SealError):
        final = parser.close()
        seal(final.source)


def _sum(terms: int) -> str:
    return "y = t.f(1)\nx = " + "+".join(["1"] * terms) + "\nx"


def _deepest_sealed() -> int:
    """The longest sum ``seal`` accepts (bisected): where CPython's guard draws the line."""
    low, high = 10, 3000
    while low < high:
        middle = (low + high + 1) // 2
        try:
            seal(_sum(middle))
        except SealError:
            high = middle - 1
        else:
            low = middle
    return low


@pytest.mark.parametrize("guest", ["in-process", "subprocess"])
async def test_every_path_draws_the_line_at_the_same_depth(guest: str) -> None:
    """CPython's guards count from the caller's stack depth; the Host parses a source that
    could be that deep at a fixed depth, so the deepest sum that seals runs ``ok`` on every
    path (the Guest compiles it too) and one term more is ``rejected`` on every path."""
    deepest = _deepest_sealed()
    assert 900 < deepest < 1000  # ``compile``'s guard: about 990 levels from a fresh stack
    host = _host(guest)
    for result in await every_path(host, _sum(deepest)):
        assert (result.status, result.value) == ("ok", deepest)
    for result in await every_path(host, _sum(deepest + 1)):
        assert result.status == "rejected" and result.error is not None and result.error.type == "RecursionError"


async def test_the_line_does_not_move_with_the_callers_stack() -> None:
    """The same verdicts from a caller 200 frames deeper."""
    deepest = _deepest_sealed()

    def deeper(frames: int, source: str) -> bool:
        if frames:
            return deeper(frames - 1, source)
        try:
            seal(source)
        except SealError:
            return False
        return True

    assert deeper(200, _sum(deepest)) and not deeper(200, _sum(deepest + 1))
    with anyio.fail_after(30):
        assert (await _host("in-process").run_source(_sum(deepest), speculate=False)).status == "ok"
