"""Values and tools that cannot cross, and a runner that compares both ways (issue 13).

``Odd`` is a capability whose methods echo what they are given, return what cannot cross
(an int over the digit limit, a str with a lone surrogate), return NaN, raise any
``BaseException`` and block. ``harness.build_host`` registers a fresh one as ``odd`` so the
generator (``programs.py``) can draw these cases; the fault tests use it through
``both_ways``, which runs a program sequentially and streamed through one Guest and
asserts the results equal type-exactly.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import anyio

from occurrences import Effect
from pysolate import Host, RunResult, capability
from pysolate._guest_api import GuestFactory
from pysolate.testing import check_invariants, memory_workspace

from .harness import FILES, TimedChunks, assert_same

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
    """Pure methods with odd values; ``stall`` blocks (sync in a thread, or async)."""

    def __init__(self, *, sync_stall: bool = True) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        self._lock = threading.Lock()
        self.release = threading.Event()  # set to end every stall at once
        self._sync_stall = sync_stall

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
    def stall(self, key: str) -> str:
        self._log("stall", key)
        self.release.wait(STALL_SECONDS)
        return key


def odd_host(factory: GuestFactory, odd: Odd | None = None, **host_kwargs: Any) -> tuple[Host, Odd]:
    """A Host with ``odd`` and a memory ``workspace`` (``harness.FILES``)."""
    odd = odd or Odd()
    host = Host(guest_factory=factory, **host_kwargs)
    host.register("odd", odd)
    host.register("workspace", memory_workspace(FILES))
    return host, odd


@dataclass(slots=True)
class Both:
    """The sequential reference and the streamed run of one program."""

    reference: RunResult
    streamed: RunResult
    reference_odd: Odd
    streamed_odd: Odd


async def both_ways(source: str, factory: GuestFactory, chunk: int = 7, **host_kwargs: Any) -> Both:
    """Run ``source`` with ``run_source(speculate=False)`` and ``run_stream`` (``chunk``
    characters a chunk) against fresh Hosts; assert they are equal, type-exactly, and that
    the streamed run's accounting holds."""
    ref_host, ref_odd = odd_host(factory, **host_kwargs)
    reference = await ref_host.run_source(source, speculate=False)
    host, odd = odd_host(factory, **host_kwargs)
    streamed = await host.run_stream(TimedChunks(source, (chunk,), (0.0,)))
    ref_odd.release.set()
    odd.release.set()
    assert_same(streamed, reference)
    check_invariants(streamed, host.method_specs())
    check_invariants(reference)
    return Both(reference, streamed, ref_odd, odd)


def guests() -> list[Any]:
    """Both Guests, as pytest params (``factory``)."""
    import pytest

    from pysolate._guest import start_subprocess_guest
    from pysolate.testing import in_process_guest

    return [pytest.param(in_process_guest, id="in_process"), pytest.param(start_subprocess_guest, id="subprocess")]
