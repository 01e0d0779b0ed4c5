"""Test doubles shipped with Pysolate: scripted tools, an in-memory workspace, an
in-process Guest.

- ``scripted_tool(name=Script(...), ...)`` builds a capability object whose methods have a
  set latency, effect and version, compute their result (or raise) with a plain Python
  function whose signature they take, and record every call: arguments, start and end on
  anyio's clock (so a mock clock makes them exact), outcome.
- ``memory_workspace({"a.txt": "..."})`` is a frozen ``Workspace`` built from a dict.
- ``InProcessGuest`` implements the Guest seam (``_guest_api``) inside the Host process:
  the program runs in a worker thread, in a fresh namespace whose globals are capability
  proxies; ``print`` writes to the run's captured stdout. It shows the program exactly
  what the subprocess Guest shows (``_guest_errors``), so Host tests run fast against it.

``InProcessGuest`` is NOT a security boundary: the program shares the Host's interpreter.
It applies the real Guest's rules an honest program meets (``_guest_view``): only the
standard library imports, and ``os.environ`` is empty; but ``sys.modules``, files and
sockets still reach the Host. Its limits are cooperative: the wall
time ends the run but a thread stuck in pure computation keeps running until it next
prints or calls a tool; there is no CPU or memory limit. Output written to ``sys.stdout``
directly (not through ``print``) is not captured. Use it only for trusted test programs.
"""

from __future__ import annotations

import builtins
import inspect
import io
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.from_thread

from occurrences import FUNCTIONS, Effect, NotPlain, check_plain, fresh_copy

from ._capability import capability
from ._crossing import check_arguments
from ._equivalence import differences, observable
from ._guest._turn_report import reported_globals
from ._guest_api import (
    CallHandler,
    ErrorInfo,
    GuestLimits,
    GuestOutcome,
    Isolation,
    ToolFailure,
    TurnOutcome,
)
from ._guest_errors import (
    error_line,
    rebuild_exception,
    safe_repr,
    safe_str,
    split_program,
)
from ._guest_view import guest_import
from ._invariants import check_invariants
from ._workspace import Workspace

__all__ = [
    "InProcessGuest",
    "InProcessSession",
    "Script",
    "ScriptedCall",
    "ScriptedTool",
    "check_invariants",
    "differences",
    "in_process_guest",
    "in_process_session",
    "memory_workspace",
    "observable",
    "scripted_tool",
]


# -- scripted tools ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Script:
    """How one scripted method behaves.

    ``behaviour`` gives the method its signature and computes its result from the
    arguments; raising from it makes the call fail. ``latency`` seconds pass before it is
    called (``anyio.sleep`` for async methods, so a mock clock skips them; ``time.sleep``
    for sync ones, which run in a worker thread).
    """

    behaviour: Callable[..., object]
    effect: Effect = Effect.UNKNOWN
    version: str = "0"
    latency: float = 0.0
    sync: bool = False


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

    def _begin(self, method: str, args: tuple[object, ...], kwargs: dict[str, object], now: float) -> ScriptedCall:
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

    def finish(call: ScriptedCall, outcome: Literal["ok", "error", "cancelled"], now: float) -> None:
        call.ended, call.outcome = now, outcome

    method: Callable[..., Any]
    if script.sync:

        def method(self: ScriptedTool, *args: object, **kwargs: object) -> object:
            call = self._begin(name, args, kwargs, _thread_time())
            try:
                if latency:
                    time.sleep(latency)
                result = behaviour(*args, **kwargs)
            except BaseException:
                finish(call, "error", _thread_time())
                raise
            finish(call, "ok", _thread_time())
            return result

    else:

        async def method(self: ScriptedTool, *args: object, **kwargs: object) -> object:
            call = self._begin(name, args, kwargs, anyio.current_time())
            try:
                if latency:
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


# -- the in-process Guest ----------------------------------------------------------------------


class _Abort(BaseException):
    """Unwinds the program when a limit ends it or the run is abandoned (not catchable by
    ``except Exception``)."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name
        self.message = message


class _Proxy:
    """A capability as the program sees it: one attribute per method."""

    def __init__(self, name: str, methods: Mapping[str, Callable[..., object]]) -> None:
        self.__dict__.update(methods)
        self._name = name

    def __repr__(self) -> str:
        return f"<capability {self._name}>"


@dataclass(slots=True, eq=False)
class _Program:
    """One execution of a program in a worker thread, and what it has produced so far."""

    capabilities: Mapping[str, Sequence[str]]
    limits: GuestLimits
    handler: CallHandler
    output: list[str] = field(default_factory=list)
    output_bytes: int = 0
    call_count: int = 0
    abandoned: bool = False  # set by the Host side when it stops waiting for the thread
    # The call being served (its task runs outside the run's cancel scope, from the
    # program thread): ``stop`` cancels it and waits, so its receipt exists when ``run`` ends.
    in_call: anyio.CancelScope | None = None
    call_done: anyio.Event | None = None

    async def stop(self) -> None:
        """Abandon the program and interrupt the call it is waiting on, if any."""
        self.abandoned = True
        scope, done = self.in_call, self.call_done
        if scope is not None and done is not None:
            scope.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(5.0):
                await done.wait()

    def namespace(self) -> dict[str, object]:
        """Fresh globals: builtins (with this program's ``print``) and capability proxies."""
        namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": self._builtins()}
        for name, methods in self.capabilities.items():
            if name == FUNCTIONS:
                namespace.update({m: self._proxy_method(name, m) for m in methods})
            else:
                namespace[name] = _Proxy(name, {m: self._proxy_method(name, m) for m in methods})
        return namespace

    def execute(self, source: str, namespace: dict[str, object] | None = None) -> GuestOutcome:
        if namespace is None:
            namespace = self.namespace()
        try:
            body, final = split_program(source)
            exec(body, namespace)
            value = eval(final, namespace) if final is not None else None
        except _Abort as abort:
            return self.outcome("limit", error=ErrorInfo(abort.type_name, abort.message, None))
        except BaseException as exc:
            return self.outcome("error", error=ErrorInfo(type(exc).__name__, safe_str(exc), error_line(exc)))
        return self.outcome("ok", value=_final_value(value))

    def outcome(self, status: Literal["ok", "error", "limit"], value: object = None, error: ErrorInfo | None = None) -> GuestOutcome:
        return GuestOutcome(status, value, "".join(self.output), error, Isolation("in_process"))

    def _builtins(self) -> dict[str, object]:
        names = dict(vars(builtins))

        def print_(*values: object, sep: str | None = " ", end: str | None = "\n", file: Any = None, flush: bool = False) -> None:
            if file is not None:
                builtins.print(*values, sep=sep, end=end, file=file, flush=flush)
                return
            buffer = io.StringIO()
            builtins.print(*values, sep=sep, end=end, file=buffer)
            self._write(buffer.getvalue())

        names["print"] = print_
        names["__import__"] = guest_import()
        return names

    def _write(self, text: str) -> None:
        self._check_abandoned()
        self.output_bytes += len(text.encode("utf-8", "surrogatepass"))
        if self.output_bytes > self.limits.output_bytes:
            raise _Abort("OutputLimit", f"the program printed more than {self.limits.output_bytes} bytes")
        self.output.append(text)

    def _proxy_method(self, capability_name: str, method: str) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            self._check_abandoned()
            check_arguments(capability_name, method, args, kwargs)
            self.call_count += 1
            if self.call_count > self.limits.max_calls:
                raise _Abort("CallLimit", f"the program made more than {self.limits.max_calls} calls")
            try:
                return anyio.from_thread.run(self._call_handler, capability_name, method, args, kwargs)
            except ToolFailure as failure:
                raise rebuild_exception(failure.type_name, failure.message, failure.exc_args) from None

        call.__name__ = call.__qualname__ = method
        return call

    async def _call_handler(self, capability_name: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        if self.abandoned:
            raise _Abort("Abandoned", "the Host stopped this run")
        self.call_done = anyio.Event()
        try:
            with anyio.CancelScope() as self.in_call:
                return await self.handler(capability_name, method, args, kwargs)
            raise _Abort("Abandoned", "the Host stopped this run")  # cancelled by ``stop``
        finally:
            self.in_call = None
            self.call_done.set()

    def _check_abandoned(self) -> None:
        if self.abandoned:
            raise _Abort("Abandoned", "the Host stopped this run")


def _final_value(value: object) -> object:
    """The run's value: a copy of plain data, else its repr (like the subprocess Guest)."""
    try:
        check_plain(value)
    except NotPlain:
        return safe_repr(value)
    return fresh_copy(value)


class InProcessGuest:
    """A Guest that runs the program in a thread of the Host process (NOT a boundary)."""

    def __init__(self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits) -> None:
        self._capabilities = {name: tuple(methods) for name, methods in capabilities.items()}
        self._limits = limits
        self._program: _Program | None = None  # set by the one ``run``

    @classmethod
    async def start(cls, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits) -> InProcessGuest:
        """The ``GuestFactory``: nothing to start ahead of the source."""
        return cls(capabilities, limits)

    async def run(self, source: str, handler: CallHandler) -> GuestOutcome:
        """Execute ``source`` once.

        The wall-time limit ends the run with status ``limit``. Cancellation abandons the
        program thread (it stops at its next tool call or print) and re-raises.
        """
        if self._program is not None:
            raise RuntimeError("a Guest runs exactly one program")
        program = self._program = _Program(self._capabilities, self._limits, handler)
        try:
            with anyio.move_on_after(self._limits.wall_time) as deadline:
                outcome = await anyio.to_thread.run_sync(program.execute, source, abandon_on_cancel=True)
        except BaseException:
            await program.stop()
            raise
        if deadline.cancelled_caught:
            await program.stop()
            message = f"the run took longer than {self._limits.wall_time}s"
            return program.outcome("limit", error=ErrorInfo("WallTimeLimit", message, None))
        return outcome

    async def aclose(self) -> None:
        """Abandon the program thread if it still runs; idempotent."""
        if self._program is not None:
            self._program.abandoned = True


in_process_guest = InProcessGuest.start
"""``Host(guest_factory=in_process_guest)``: run programs in-process (tests only)."""


class InProcessSession:
    """A session's Guest in a thread of the Host process (NOT a boundary; tests only).

    One program object serves every turn (its ``print`` and proxies are what functions
    defined in earlier turns captured); each turn gets its own handler, output and call
    count. A wall-time limit or cancellation abandons the thread and stops the session's
    Guest, as the subprocess Guest is killed.
    """

    def __init__(self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits) -> None:
        self._program = _Program({n: tuple(m) for n, m in capabilities.items()}, limits, _no_handler)
        self._namespace = self._program.namespace()
        self._proxies = dict(self._namespace)  # the capability (and function tool) globals
        self._alive = True

    @classmethod
    async def start(cls, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits) -> InProcessSession:
        """The session Guest factory: nothing to start ahead of the first turn."""
        return cls(capabilities, limits)

    async def turn(self, source: str, handler: CallHandler, *, wall_time: float) -> TurnOutcome:
        """Run one turn in the session's globals (see ``SessionGuest.turn``)."""
        if not self._alive:
            raise RuntimeError("this session's Guest was stopped")
        program = self._program
        program.handler, program.output, program.output_bytes, program.call_count = handler, [], 0, 0
        try:
            with anyio.move_on_after(wall_time) as deadline:
                outcome = await anyio.to_thread.run_sync(program.execute, source, self._namespace, abandon_on_cancel=True)
        except BaseException:
            await self.aclose()
            raise
        if deadline.cancelled_caught:
            await self.aclose()
            error = ErrorInfo("WallTimeLimit", f"the turn took longer than {wall_time}s", None)
            return TurnOutcome(program.outcome("limit", error=error), {}, (), alive=False)
        if outcome.status not in ("ok", "error"):
            await self.aclose()
            return TurnOutcome(outcome, {}, (), alive=False)
        known, opaque = reported_globals(self._namespace, self._proxies)
        return TurnOutcome(outcome, {name: fresh_copy(v) for name, v in known}, tuple(opaque), alive=True)

    async def aclose(self) -> None:
        """Abandon the program thread if it still runs; idempotent."""
        self._alive = False
        self._program.abandoned = True


async def _no_handler(capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    raise RuntimeError("no turn is running")


in_process_session = InProcessSession.start
"""``Host(session_factory=in_process_session)``: sessions in-process (tests only)."""
