"""The benchmark's tools: what each one returns, its effect and its latency.

One definition serves three consumers, so they cannot drift apart:

- ``make_host`` registers them on a fresh Pysolate ``Host`` as scripted tools
  (``pysolate.testing.scripted_tool``: async methods that sleep their latency);
- ``latency.oracle`` runs the program against the plain behaviours to learn which call
  sites execute, in which statement, in which order (no latency, no Host);
- ``peer.py`` registers the same behaviours, with the same latencies, as Pydantic AI tools.

``ws`` is the built-in ``Workspace`` (``BenchWorkspace``, with latencies): its writes go to a
run-private branch, so Pysolate may run them early on a layer (issue 17).

Every tool is deterministic, and the stateful ones (``store``) get fresh state per run, so
a speculative run and its sequential twin must agree on every value, log entry and final
state. Latencies are those of remote services (0.1-2 s), scaled by ``latency_scale``.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import anyio
import anyio.lowlevel

from pysolate import Effect, Host, Workspace, capability
from pysolate._guest_api import GuestFactory, SessionGuestFactory

try:
    from pysolate._workspace._workspace import VERSION
except ImportError:  # a baseline tree from before the rooms (broker_cpu.py --baseline)
    from pysolate._workspace import VERSION  # type: ignore[attr-defined,no-redef]
from pysolate.streams import Chunk, play
from pysolate.testing import Script, in_process_guest, in_process_session, scripted_tool

GuestKind = Literal["isolated", "seccomp", "landlock", "landlock-spawn", "in-process"]
"""Which Guest runs the program: the default (strongest isolation available), the
subprocess with seccomp + rlimits only, the Landlock level forked from the fork server (its
default there) or spawned (``fork_server=False``), or the in-process test Guest (no
boundary)."""


def guest_factory(kind: GuestKind) -> GuestFactory | None:
    if kind == "in-process":
        return in_process_guest
    if kind in ("seccomp", "landlock", "landlock-spawn"):
        from pysolate._guest import start_subprocess_guest

        level = "seccomp" if kind == "seccomp" else "landlock"
        return functools.partial(
            start_subprocess_guest, isolation=level, fork_server=kind != "landlock-spawn"
        )
    return None


def session_factory(kind: GuestKind) -> SessionGuestFactory | None:
    """The session Guest of the same kind (``guest_factory``'s, kept across turns)."""
    if kind == "in-process":
        return in_process_session
    if kind in ("seccomp", "landlock", "landlock-spawn"):
        from pysolate._guest import start_subprocess_session

        level = "seccomp" if kind == "seccomp" else "landlock"
        return functools.partial(
            start_subprocess_session, isolation=level, fork_server=kind != "landlock-spawn"
        )
    return None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One method: its behaviour (signature included), effect and latency in seconds."""

    behaviour: Callable[..., object]
    effect: Effect
    latency: float


_KB = {
    "start": "alpha",
    "alpha": "beta",
    "beta": "gamma",
    "gamma": "delta",
    "mode": "fast",
    "region": "eu-west",
    "owner:retry": "alice",
    "owner:cache": "bob",
    "owner:rate": "carol",
}
_FILES = {
    "notes/mon.md": "Monday: shipped the retry fix\nmore",
    "notes/tue.md": "Tuesday: cache invalidation bug\nmore",
    "notes/wed.md": "Wednesday: rate limits per tenant\nmore",
    "notes/thu.md": "Thursday: logging cleanup\nmore",
    "notes/fri.md": "Friday: release 2.4\nmore",
    "notes/sat.md": "Saturday: on call, quiet\nmore",
}


def _search(query: str) -> list[str]:
    digest = hashlib.sha256(query.encode()).hexdigest()
    slug = "-".join(query.lower().split())[:24]
    return [f"docs/{slug}/{digest[:6]}.md", f"docs/{slug}/{digest[6:12]}.md"]


def _get(key: str) -> str:
    if key not in _KB:
        raise KeyError(key)
    return _KB[key]


def _fetch(url: str) -> str:
    return f"<html><title>{url}</title>{len(url) * 37 % 1000} words</html>"


def _list_dir(path: str) -> list[str]:
    prefix = path.rstrip("/") + "/"
    return sorted(p[len(prefix) :] for p in _FILES if p.startswith(prefix))


def _read(path: str) -> str:
    if path not in _FILES:
        raise FileNotFoundError(path)
    return _FILES[path]


def _now() -> str:
    return "2026-12-02T12:00:00Z"


def _run(cmd: str) -> str:
    return f"ran: {cmd}"


WS_LATENCY = {"read_text": 0.4, "exists": 0.2, "list_dir": 0.2, "write_text": 0.3}
"""The ``ws`` workspace's latencies (seconds, before ``latency_scale``): a remote file
service (issue 17's read-after-write and write-heavy scenarios)."""


class BenchWorkspace(Workspace):
    """The built-in ``Workspace`` over ``_WS_FILES``, each method first waiting its
    ``WS_LATENCY`` (scaled): a run-private branch whose writes may run early on a layer."""

    scale: float = 1.0

    async def _wait(self, method: str) -> None:
        await sleep(WS_LATENCY[method] * self.scale)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        await self._wait("read_text")
        return await super().read_text(path, encoding)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def exists(self, path: str) -> bool:
        await self._wait("exists")
        return await super().exists(path)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def list_dir(self, path: str = ".") -> list[str]:
        await self._wait("list_dir")
        return await super().list_dir(path)

    @capability(effect=Effect.WRITE, version=VERSION, scope="path")
    async def write_text(self, path: str, text: str, encoding: str = "utf-8") -> None:
        await self._wait("write_text")
        await super().write_text(path, text, encoding)


_WS_FILES = {**_FILES, "config.md": "v1", "counter.md": "0"}
"""What the ``ws`` workspace's root holds."""


def bench_workspace(latency_scale: float = 1.0) -> BenchWorkspace:
    root = BenchWorkspace.from_files(_WS_FILES)
    root.scale = latency_scale
    return root


def _ws_specs(s: float) -> dict[str, ToolSpec]:
    """The ``ws`` methods as plain behaviours over a dict (for the oracle's trace and the
    peer); a Pysolate Host registers ``BenchWorkspace`` instead."""
    files = dict(_WS_FILES)

    def read_text(path: str, encoding: str = "utf-8") -> str:
        if path not in files:
            raise FileNotFoundError(path)
        return files[path]

    def exists(path: str) -> bool:
        return path in files or any(p.startswith(path.rstrip("/") + "/") for p in files)

    def list_dir(path: str = ".") -> list[str]:
        prefix = "" if path in (".", "") else path.rstrip("/") + "/"
        return sorted({p[len(prefix) :].split("/")[0] for p in files if p.startswith(prefix)})

    def write_text(path: str, text: str, encoding: str = "utf-8") -> None:
        files[path] = text

    effects = {
        "read_text": Effect.IMMUTABLE_READ,
        "exists": Effect.IMMUTABLE_READ,
        "list_dir": Effect.IMMUTABLE_READ,
    }
    behaviours = {
        "read_text": read_text,
        "exists": exists,
        "list_dir": list_dir,
        "write_text": write_text,
    }
    return {
        m: ToolSpec(b, effects.get(m, Effect.WRITE), WS_LATENCY[m] * s)
        for m, b in behaviours.items()
    }


def tool_specs(latency_scale: float = 1.0) -> dict[str, dict[str, ToolSpec]]:
    """Capability → method → spec, with fresh state for the stateful ones."""
    store: dict[str, object] = {"config": "v1", "counter": 0}

    def get(key: str) -> object:
        if key not in store:
            raise KeyError(key)
        return store[key]

    def put(key: str, value: object) -> None:
        store[key] = value

    def state() -> dict[str, object]:
        return dict(store)

    s = latency_scale
    return {
        "docs": {"search": ToolSpec(_search, Effect.PURE, 0.5 * s)},
        "kb": {"get": ToolSpec(_get, Effect.IMMUTABLE_READ, 0.3 * s)},
        "web": {"fetch": ToolSpec(_fetch, Effect.PURE, 1.5 * s)},
        "fs": {
            "list_dir": ToolSpec(_list_dir, Effect.IMMUTABLE_READ, 0.2 * s),
            "read": ToolSpec(_read, Effect.IMMUTABLE_READ, 0.4 * s),
        },
        "clock": {"now": ToolSpec(_now, Effect.LIVE_READ, 0.1 * s)},
        "store": {
            "get": ToolSpec(get, Effect.IMMUTABLE_READ, 0.3 * s),
            "put": ToolSpec(put, Effect.WRITE, 0.2 * s),
            # Not a tool: read by ``final_state`` (the "workspace" the runs must agree on).
            "_state": ToolSpec(state, Effect.PURE, 0.0),
        },
        "shell": {"run": ToolSpec(_run, Effect.UNKNOWN, 0.5 * s)},
        "ws": _ws_specs(s),
    }


def final_state(specs: dict[str, dict[str, ToolSpec]]) -> object:
    """The Host state a run left behind (the store's contents)."""
    return specs["store"]["_state"].behaviour()


def public_methods(specs: dict[str, dict[str, ToolSpec]]) -> dict[str, dict[str, ToolSpec]]:
    return {
        cap: {m: t for m, t in methods.items() if not m.startswith("_")}
        for cap, methods in specs.items()
    }


def make_host(
    latency_scale: float = 1.0, *, guest: GuestKind = "isolated", share: bool = True
) -> tuple[Host, dict[str, dict[str, ToolSpec]]]:
    """A Host with every benchmark tool registered, and the specs behind it (fresh state);
    ``share``: ``Host(share=...)``, its runs share physical calls (issue 40)."""
    specs = tool_specs(latency_scale)
    host = Host(
        guest_factory=guest_factory(guest), session_factory=session_factory(guest), share=share
    )
    for cap, methods in public_methods(specs).items():
        if cap == "ws":
            host.register(cap, bench_workspace(latency_scale))
            continue
        if EXACT_TIMERS:
            scripts = {
                m: Script(_after_latency(t), effect=t.effect, version="1")
                for m, t in methods.items()
            }
        else:
            scripts = {
                m: Script(t.behaviour, effect=t.effect, version="1", latency=t.latency)
                for m, t in methods.items()
            }
        host.register(cap, scripted_tool(**scripts))
    return host, specs


def _after_latency(spec: ToolSpec) -> Callable[..., object]:
    """``spec``'s behaviour after ``sleep(spec.latency)`` (its signature kept: the scripted
    tool takes the method's parameters from it)."""

    @functools.wraps(spec.behaviour)
    async def behave(*args: object, **kwargs: object) -> object:
        await sleep(spec.latency)
        return spec.behaviour(*args, **kwargs)

    return behave


EXACT_TIMERS = False
"""Whether the benchmark's waits (the tools' latencies, the replayed chunks' times) end at
their deadline (``exact_sleep``) instead of ``anyio.sleep``'s. Set with ``exact_timers``;
it applies to every measured system alike (baseline, Pysolate, the peer)."""


def exact_timers(on: bool) -> None:
    global EXACT_TIMERS
    EXACT_TIMERS = on


async def sleep(delay: float) -> None:
    """The benchmark's wait: ``exact_sleep`` with ``EXACT_TIMERS``, else ``anyio.sleep``."""
    if EXACT_TIMERS:
        await exact_sleep(delay)
    else:
        await anyio.sleep(delay)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


_LIBC = ctypes.CDLL(None, use_errno=True)
_CLOCK_MONOTONIC, _TFD_NONBLOCK, _TFD_CLOEXEC, _TFD_TIMER_ABSTIME = 1, 0o4000, 0o2000000, 1


async def exact_sleep(delay: float) -> None:
    """Wait until ``delay`` seconds from now have passed, on a ``timerfd`` (Linux).

    ``anyio.sleep`` on asyncio ends 0.5-2 ms late: the selector rounds ``epoll_wait``'s
    timeout up to the next millisecond, and ``select.epoll.poll`` rounds the float it gets
    up once more. A timer's fd wakes ``epoll_wait`` when the timer expires (nanosecond
    resolution), so a tool takes its latency and a chunk comes at its time, as the
    oracle counts them, within the loop's own wake-up.
    """
    deadline = time.monotonic() + max(delay, 0.0)  # anyio's clock on asyncio (loop.time())
    fd = _LIBC.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "timerfd_create")
    try:
        seconds = int(deadline)
        when = _Itimerspec(_Timespec(0, 0), _Timespec(seconds, int((deadline - seconds) * 1e9)))
        if _LIBC.timerfd_settime(fd, _TFD_TIMER_ABSTIME, ctypes.byref(when), None) < 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime")
        while time.monotonic() < deadline:
            await anyio.wait_readable(fd)
    finally:
        os.close(fd)


async def anchored(chunks: Sequence[Chunk], t0: float | None) -> AsyncIterator[str]:
    """Each chunk's text at ``t0 + chunk.t`` (anyio's clock), or, with ``t0`` None, at
    ``chunk.t`` after the first pull (``pysolate.streams.play``'s schedule).

    A provider's stream flows whether or not its reader is ready, so every measured system
    (baseline, Pysolate, the peer: ``peer.py`` does the same) gets its chunks on a schedule
    anchored at the moment its clock starts, which the oracle's times are relative to.
    Anchored at the first pull instead, a system's set-up before its first read would
    shift its whole stream later, uncounted.
    """
    if t0 is None:
        async for text in play(chunks, sleep=sleep):
            yield text
        return
    for chunk in chunks:
        delay = t0 + chunk.t - anyio.current_time()
        if delay > 0:
            await sleep(delay)
        else:
            await anyio.lowlevel.checkpoint()
        yield chunk.text
