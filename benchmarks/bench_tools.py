"""The benchmark's tools: what each one returns, its effect and its latency.

One definition serves three consumers, so they cannot drift apart:

- ``make_host`` registers them on a fresh Pysolate ``Host`` as scripted tools
  (``pysolate.testing.scripted_tool``: async methods that sleep their latency);
- ``latency.oracle`` runs the program against the plain behaviours to learn which call
  sites execute, in which statement, in which order (no latency, no Host);
- ``peer.py`` registers the same behaviours, with the same latencies, as Pydantic AI tools.

Every tool is deterministic, and the stateful ones (``store``) get fresh state per run, so
a speculative run and its sequential twin must agree on every value, log entry and final
state. Latencies are those of remote services (0.1-2 s), scaled by ``latency_scale``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pysolate import Effect, Host
from pysolate._guest_api import GuestFactory, SessionGuestFactory
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
        return functools.partial(start_subprocess_guest, isolation=level, fork_server=kind != "landlock-spawn")
    return None


def session_factory(kind: GuestKind) -> SessionGuestFactory | None:
    """The session Guest of the same kind (``guest_factory``'s, kept across turns)."""
    if kind == "in-process":
        return in_process_session
    if kind in ("seccomp", "landlock", "landlock-spawn"):
        from pysolate._guest import start_subprocess_session

        level = "seccomp" if kind == "seccomp" else "landlock"
        return functools.partial(start_subprocess_session, isolation=level, fork_server=kind != "landlock-spawn")
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
    }


def final_state(specs: dict[str, dict[str, ToolSpec]]) -> object:
    """The Host state a run left behind (the store's contents)."""
    return specs["store"]["_state"].behaviour()


def public_methods(specs: dict[str, dict[str, ToolSpec]]) -> dict[str, dict[str, ToolSpec]]:
    return {cap: {m: t for m, t in methods.items() if not m.startswith("_")} for cap, methods in specs.items()}


def make_host(latency_scale: float = 1.0, *, guest: GuestKind = "isolated") -> tuple[Host, dict[str, dict[str, ToolSpec]]]:
    """A Host with every benchmark tool registered, and the specs behind it (fresh state)."""
    specs = tool_specs(latency_scale)
    host = Host(guest_factory=guest_factory(guest), session_factory=session_factory(guest))
    for cap, methods in public_methods(specs).items():
        scripts = {
            m: Script(t.behaviour, effect=t.effect, version="1", latency=t.latency) for m, t in methods.items()
        }
        host.register(cap, scripted_tool(**scripts))
    return host, specs
