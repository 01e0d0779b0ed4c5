"""The in-process Guest and session: the Guest seam inside the Host process, for fast Host tests.

NOT a security boundary (see ``pysolate.testing``): it applies the rules an honest program
meets, not the subprocess Guest's confinement."""

from __future__ import annotations

import builtins
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Literal

import anyio
import anyio.from_thread

from occurrences import FUNCTIONS, NotPlain, check_plain, fresh_copy

from .._calls._crossing import check_arguments
from .._guest.child._turn_report import reported_globals
from .._guest_api import (
    CallHandler,
    ErrorInfo,
    GuestLimits,
    GuestOutcome,
    Isolation,
    LimitExceeded,
    ToolFailure,
    TurnOutcome,
)
from .._guest_errors import (
    error_line,
    rebuild_exception,
    safe_repr,
    safe_str,
    split_program,
)
from ._guest_view import guest_import


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
    # A limit the handler raised (the Host's byte budget): the run ends with it, whatever
    # the program caught; later calls raise it again.
    limit: LimitExceeded | None = None

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

    def compiled(self, source: str) -> tuple[CodeType, CodeType | None] | GuestOutcome:
        """``source``'s two parts (``split_program``), or the outcome of its failure to compile.

        Called in the event loop's thread, never the program's: CPython 3.11's AST
        constructor keeps its recursion depth per interpreter, so a parse in a worker thread
        racing the Host's own parsing of other runs' streams can fail with a spurious
        ``SystemError`` (python/cpython#106905)."""
        try:
            return split_program(source)
        except BaseException as exc:
            return self.outcome(
                "error", error=ErrorInfo(type(exc).__name__, safe_str(exc), error_line(exc))
            )

    def execute(
        self, parts: tuple[CodeType, CodeType | None], namespace: dict[str, object] | None = None
    ) -> GuestOutcome:
        if namespace is None:
            namespace = self.namespace()
        body, final = parts
        try:
            exec(body, namespace)
            value = eval(final, namespace) if final is not None else None
        except _Abort as abort:
            return self.outcome("limit", error=ErrorInfo(abort.type_name, abort.message, None))
        except BaseException as exc:
            if self.limit is not None:
                return self.outcome("limit", error=self.limit.info)
            return self.outcome(
                "error", error=ErrorInfo(type(exc).__name__, safe_str(exc), error_line(exc))
            )
        if self.limit is not None:
            return self.outcome("limit", error=self.limit.info)
        return self.outcome("ok", value=_final_value(value))

    def outcome(
        self,
        status: Literal["ok", "error", "limit"],
        value: object = None,
        error: ErrorInfo | None = None,
    ) -> GuestOutcome:
        return GuestOutcome(status, value, "".join(self.output), error, Isolation("in_process"))

    def _builtins(self) -> dict[str, object]:
        names = dict(vars(builtins))

        def print_(
            *values: object,
            sep: str | None = " ",
            end: str | None = "\n",
            file: Any = None,
            flush: bool = False,
        ) -> None:
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
            raise _Abort(
                "OutputLimit", f"the program printed more than {self.limits.output_bytes} bytes"
            )
        self.output.append(text)

    def _proxy_method(self, capability_name: str, method: str) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            self._check_abandoned()
            check_arguments(capability_name, method, args, kwargs)
            self.call_count += 1
            if self.call_count > self.limits.max_calls:
                raise _Abort(
                    "CallLimit", f"the program made more than {self.limits.max_calls} calls"
                )
            if self.limit is not None:
                raise _Abort(self.limit.info.type, self.limit.info.message)
            try:
                return anyio.from_thread.run(
                    self._call_handler, capability_name, method, args, kwargs
                )
            except ToolFailure as failure:
                raise rebuild_exception(
                    failure.type_name, failure.message, failure.exc_args
                ) from None
            except LimitExceeded as exc:
                self.limit = exc
                raise _Abort(exc.info.type, exc.info.message) from None

        call.__name__ = call.__qualname__ = method
        return call

    async def _call_handler(
        self, capability_name: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
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
    async def start(
        cls, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits
    ) -> InProcessGuest:
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
        parts = program.compiled(source)
        if isinstance(parts, GuestOutcome):
            return parts
        try:
            with anyio.move_on_after(self._limits.wall_time) as deadline:
                outcome = await anyio.to_thread.run_sync(
                    program.execute, parts, abandon_on_cancel=True
                )
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
        self._program = _Program(
            {n: tuple(m) for n, m in capabilities.items()}, limits, _no_handler
        )
        self._namespace = self._program.namespace()
        self._proxies = dict(self._namespace)  # the capability (and function tool) globals
        self._alive = True

    @classmethod
    async def start(
        cls, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits
    ) -> InProcessSession:
        """The session Guest factory: nothing to start ahead of the first turn."""
        return cls(capabilities, limits)

    async def turn(self, source: str, handler: CallHandler, *, wall_time: float) -> TurnOutcome:
        """Run one turn in the session's globals (see ``SessionGuest.turn``)."""
        if not self._alive:
            raise RuntimeError("this session's Guest was stopped")
        program = self._program
        program.handler, program.output, program.output_bytes, program.call_count = (
            handler,
            [],
            0,
            0,
        )
        program.limit = None
        parts = program.compiled(source)
        if isinstance(parts, GuestOutcome):
            known, opaque = reported_globals(self._namespace, self._proxies)
            return TurnOutcome(
                parts, {name: fresh_copy(v) for name, v in known}, tuple(opaque), alive=True
            )
        try:
            with anyio.move_on_after(wall_time) as deadline:
                outcome = await anyio.to_thread.run_sync(
                    program.execute, parts, self._namespace, abandon_on_cancel=True
                )
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
        return TurnOutcome(
            outcome, {name: fresh_copy(v) for name, v in known}, tuple(opaque), alive=True
        )

    async def aclose(self) -> None:
        """Abandon the program thread if it still runs; idempotent."""
        self._alive = False
        self._program.abandoned = True


async def _no_handler(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    raise RuntimeError("no turn is running")


in_process_session = InProcessSession.start
"""``Host(session_factory=in_process_session)``: sessions in-process (tests only)."""
