"""Scripted tools and an in-memory workspace: capabilities whose latency, effect, version and
result a test sets, and which record every call on anyio's clock (exact under a mock clock)."""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.from_thread

from occurrences import Effect

from .._tools._capability import capability
from .._workspace._workspace import Workspace


@dataclass(frozen=True, slots=True)
class Script:
    """How one scripted method behaves.

    ``behaviour`` gives the method its signature and computes its result from the
    arguments; raising from it makes the call fail. ``latency`` seconds pass before it is
    called (``anyio.sleep`` for async methods, so a mock clock skips them; ``time.sleep``
    for sync ones, which run in a worker thread). ``serialised``: calls of the method wait
    for one another (one connection, a rate limit), each taking its ``latency`` in turn, so
    concurrent calls queue inside the tool.
    """

    behaviour: Callable[..., object]
    effect: Effect = Effect.UNKNOWN
    version: str = "0"
    latency: float = 0.0
    sync: bool = False
    serialised: bool = False


@dataclass(slots=True, eq=False)
class ScriptedCall:
    """One call of a scripted method; ``ended``/``outcome`` are set when it ends."""

    method: str
    args: tuple[object, ...]
    kwargs: dict[str, object]
    started: float
    ended: float | None = None
    outcome: Literal["running", "ok", "error", "cancelled"] = "running"


class ScriptedTool:
    """Base of the classes ``scripted_tool`` builds; holds the call record."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # sync methods record from worker threads
        self._calls: list[ScriptedCall] = []

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call so far, in the order they started."""
        with self._lock:
            return list(self._calls)

    def calls_to(self, method: str) -> list[ScriptedCall]:
        return [c for c in self.calls if c.method == method]

    def _begin(
        self, method: str, args: tuple[object, ...], kwargs: dict[str, object], now: float
    ) -> ScriptedCall:
        call = ScriptedCall(method, args, kwargs, now)
        with self._lock:
            self._calls.append(call)
        return call


def _thread_time() -> float:
    """anyio's clock from a worker thread anyio started; the monotonic clock otherwise.

    A thread the Host abandoned (its call was cancelled or timed out) reads the monotonic
    clock: asking the event loop could wait forever once that loop has stopped, and the
    thread would then hold up the interpreter's exit.
    """
    try:
        anyio.from_thread.check_cancelled()
    except BaseException:  # not a worker thread of anyio (RuntimeError), or an abandoned call
        return time.monotonic()
    try:
        return anyio.from_thread.run_sync(anyio.current_time)
    except RuntimeError:
        return time.monotonic()


def _scripted_method(name: str, script: Script) -> Callable[..., Any]:
    params = list(inspect.signature(script.behaviour).parameters.values())
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    signature = inspect.Signature([self_param, *params])
    behaviour, latency = script.behaviour, script.latency

    def finish(
        call: ScriptedCall, outcome: Literal["ok", "error", "cancelled"], now: float
    ) -> None:
        call.ended, call.outcome = now, outcome

    method: Callable[..., Any]
    if script.sync:
        connection = threading.Lock() if script.serialised else contextlib.nullcontext()

        def method(self: ScriptedTool, *args: object, **kwargs: object) -> object:
            call = self._begin(name, args, kwargs, _thread_time())
            try:
                with connection:
                    if latency:
                        time.sleep(latency)
                result = behaviour(*args, **kwargs)
            except BaseException:
                finish(call, "error", _thread_time())
                raise
            finish(call, "ok", _thread_time())
            return result

    else:
        locks: list[anyio.Lock] = []  # made in the event loop that first calls it

        async def method(self: ScriptedTool, *args: object, **kwargs: object) -> object:
            call = self._begin(name, args, kwargs, anyio.current_time())
            try:
                if script.serialised:
                    if not locks:
                        locks.append(anyio.Lock())
                    async with locks[0]:
                        await anyio.sleep(latency)
                elif latency:
                    await anyio.sleep(latency)
                result = behaviour(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
            except anyio.get_cancelled_exc_class():
                finish(call, "cancelled", anyio.current_time())
                raise
            except BaseException:
                finish(call, "error", anyio.current_time())
                raise
            finish(call, "ok", anyio.current_time())
            return result

    method.__name__ = method.__qualname__ = name
    method.__signature__ = signature  # type: ignore[attr-defined]
    return capability(effect=script.effect, version=script.version)(method)


def scripted_tool(**scripts: Script) -> ScriptedTool:
    """A capability object with one scripted method per keyword (name → ``Script``)."""
    namespace = {name: _scripted_method(name, script) for name, script in scripts.items()}
    cls = type("ScriptedTool", (ScriptedTool,), namespace)
    return cls()


def memory_workspace(files: Mapping[str, str | bytes], dirs: Sequence[str] = ()) -> Workspace:
    """A frozen in-memory workspace holding ``files`` (str content is UTF-8) and ``dirs``."""
    return Workspace.from_files(files, dirs)
