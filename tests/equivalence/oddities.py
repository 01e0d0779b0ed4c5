"""Values and tools that cannot cross, and tools that raise BaseException or block (issue 13).

``Odd`` is a capability whose methods echo what they are given, return what cannot cross
(an int over the digit limit, a str with a lone surrogate), return NaN, raise any
``BaseException`` and block. ``harness.build_host`` registers a fresh one as ``odd`` (an
``AsyncOdd`` for the async twin on the mock clock, where a thread would let the clock jump)
so the generator (``programs.py``) draws these cases; the fault tests use it through
``faulty.both_ways``.
"""

from __future__ import annotations

import asyncio
import threading

import anyio

from occurrences import Effect
from pysolate import capability

STALL_SECONDS = 0.5
"""How long ``Odd.stall`` blocks: far longer than any generated run waits for a call it
never reaches, short enough that abandoned threads do not pile up across a soak."""


class Crash(BaseException):
    """A ``BaseException`` that is none of Python's own."""


def crash(kind: str) -> BaseException:
    """The exception ``Odd.crash(kind)`` raises."""
    return {
        "exit": SystemExit(3),
        "interrupt": KeyboardInterrupt(),
        "generator": GeneratorExit("closed"),
        "cancel": asyncio.CancelledError("mine"),
        "base": Crash("deep"),
    }[kind]


KINDS = ("exit", "interrupt", "generator", "cancel", "base")
"""Every kind ``crash`` knows."""


class Odd:
    """Pure methods with odd values; ``stall`` blocks its thread; ``tick`` (a live read)
    records how many stalls had returned when the program's own sync call ran."""

    def __init__(self, *, stall_seconds: float = STALL_SECONDS) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        self._lock = threading.Lock()
        self.release = threading.Event()  # set to end every stall at once
        self.stall_seconds = stall_seconds
        self.stalls_returned = 0
        self.ticks: list[int] = []  # stalls_returned at each tick

    def _log(self, method: str, *args: object) -> None:
        with self._lock:
            self.calls.append((method, args))

    @capability(effect=Effect.PURE, version="1")
    async def echo(self, value: object) -> object:
        self._log("echo", value)
        return value

    @capability(effect=Effect.PURE, version="1")
    async def big(self) -> int:
        self._log("big")
        return 10**5000

    @capability(effect=Effect.PURE, version="1")
    async def bad_text(self) -> str:
        self._log("bad_text")
        return "a\udc80b"

    @capability(effect=Effect.PURE, version="1")
    async def fail_text(self) -> None:
        self._log("fail_text")
        raise ValueError("bad \udc80 name")

    @capability(effect=Effect.PURE, version="1")
    async def nan(self, negative: bool = False) -> float:
        self._log("nan", negative)
        return -float("nan") if negative else float("nan")

    @capability(effect=Effect.PURE, version="1")
    async def crash(self, kind: str) -> None:
        self._log("crash", kind)
        await anyio.sleep(0)
        raise crash(kind)

    @capability(effect=Effect.PURE, version="1")
    def crash_sync(self, kind: str) -> None:
        self._log("crash_sync", kind)
        raise crash(kind)

    @capability(effect=Effect.PURE, version="1")
    async def slow(self, seconds: float) -> float:
        self._log("slow", seconds)
        await anyio.sleep(seconds)
        return seconds

    @capability(effect=Effect.PURE, version="1")
    def stall(self, key: str) -> str:
        self._log("stall", key)
        self.release.wait(self.stall_seconds)
        with self._lock:
            self.stalls_returned += 1
        return key

    @capability(effect=Effect.LIVE_READ, version="1")
    def tick(self) -> int:
        """A sync call that never runs early: the program's own."""
        with self._lock:
            self.ticks.append(self.stalls_returned)
            return len(self.ticks)


class AsyncOdd(Odd):
    """``Odd`` with no sync method: for the async twin on trio's mock clock."""

    @capability(effect=Effect.PURE, version="1")
    async def crash_sync(self, kind: str) -> None:
        self._log("crash_sync", kind)
        raise crash(kind)

    @capability(effect=Effect.PURE, version="1")
    async def stall(self, key: str) -> str:
        self._log("stall", key)
        await anyio.sleep(self.stall_seconds)
        return key
