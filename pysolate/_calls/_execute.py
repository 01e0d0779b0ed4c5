"""One physical execution path for a capability call, and the call as the broker binds it.

Every real execution of a capability method, early (``Registry.call_root``) or formal
(``RunScope.call``), goes through ``execute``, so both lanes check plain data, copy values
and translate failures identically (see ``_broker`` for the rules). Split from ``_broker``
so the run's bookkeeping (``RunScope``) and the execution of one call stay small modules.
"""

from __future__ import annotations

import dis
import functools
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

import anyio

from occurrences import CallKey, MethodSpec, fresh_copy, tool_name
from scheduler import LaneStopped, Probe

from .._backend import loop_clock
from .._guest_api import ToolFailure
from .._tools._capability import CapabilityMethod
from .._tools._conversion import ConversionError, Encoder, to_plain
from ._crossing import (
    checked_result,
    failure_from,
    in_thread,
    invalid_result,
    is_tool_exception,
    owned_arguments,
)
from ._threads import WorkerThreads

CALL_TIMEOUT = 30.0
"""Seconds one physical call may take before it fails (reads) or is declared unknown."""

_IMMUTABLE = frozenset({type(None), bool, int, float, str, bytes})
"""The exact plain scalar types: immutable, so a copy of one is the value itself."""


def _immutable(values: Iterable[object]) -> bool:
    """Whether every one of ``values`` is of an exact plain scalar type."""
    for v in values:  # noqa: SIM110 (a loop: ``all()`` over a generator costs more, per call)
        if type(v) not in _IMMUTABLE:
            return False
    return True


_COROUTINE = types.CoroutineType

_SUSPENDING = frozenset(
    {"YIELD_VALUE", "SEND", "GET_AWAITABLE", "BEFORE_ASYNC_WITH", "GET_AITER", "GET_ANEXT"}
)
"""The instructions of every way a coroutine can suspend (``await``, ``async with``,
``async for``); a coroutine whose code has none of them runs to its end in one step."""

_MAY_SUSPEND: dict[types.CodeType, bool] = {}
"""``_may_suspend`` of each coroutine code seen (one entry per tool coroutine function)."""


def _may_suspend(code: types.CodeType) -> bool:
    """Whether a coroutine running ``code`` can suspend: its code has an await point."""
    known = _MAY_SUSPEND.get(code)
    if known is None:
        known = _MAY_SUSPEND[code] = any(
            i.opname in _SUSPENDING for i in dis.get_instructions(code)
        )
    return known


class OutcomeUnknown(ToolFailure):
    """A call that may write did not finish in time: it may or may not have taken effect."""


@runtime_checkable
class RunScoped(Protocol):
    """A capability with per-run state: each run calls a fresh ``for_run()`` object."""

    def for_run(self) -> object: ...


@runtime_checkable
class Viewed(Protocol):
    """A capability that knows which version of its state a call would see."""

    def view_of(self, method: str, arguments: Mapping[str, object]) -> str: ...


@dataclass(frozen=True, slots=True)
class Registration:
    """A registered capability: its name, the shared (root) object, its methods, and
    whether the object is ``RunScoped`` and ``Viewed``.

    The two flags are runtime Protocol checks made once, at registration: each costs
    microseconds, and every run (``RunScope``) and every early call (``may_speculate``)
    asked them again.
    """

    name: str
    obj: object
    methods: Mapping[str, CapabilityMethod]
    run_scoped: bool = field(init=False)
    viewed: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_scoped", isinstance(self.obj, RunScoped))
        object.__setattr__(self, "viewed", isinstance(self.obj, Viewed))


class BoundCall(NamedTuple):
    """A call bound to its method's signature, defaults applied.

    ``arguments`` (parameter name → value) is what the call key is made of, so ``f("a")``
    and ``f(path="a")`` are one call; ``canonical`` is their canonical text (the key's
    ``arguments``); ``args``/``kwargs`` are how the method is invoked. All values are the
    broker's own plain copies, shared by nobody else (defaults included).

    Immutable as a tuple: one is made per Guest call, and a frozen dataclass of seven
    fields costs twice as much to build.
    """

    capability: str
    method: str
    spec: MethodSpec
    arguments: dict[str, object]
    args: tuple[object, ...]
    kwargs: dict[str, object]
    canonical: str


def bind(
    registration: Registration, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
) -> BoundCall:
    """Bind a call exactly as calling the method would.

    One walk over the arguments checks that they can cross, takes the broker's copy and
    tags them for the key (``_crossing.owned_arguments``); the method's ``Binder`` binds
    the copy. Raises ``AttributeError`` for a method that is not a capability method,
    ``TypeError`` when the arguments do not fit the signature, and ``check_arguments``'
    error when they cannot cross (``TypeError`` or ``ValueError``).
    """
    cap = registration.methods.get(method)
    if cap is None:
        raise AttributeError(f"capability {registration.name!r} has no method {method!r}")
    if not kwargs and type(args) is tuple:  # the common call: ints and strs, positionally
        scalars = cap.binder.bind_scalars(args)
        if scalars is not None:  # immutable items in an immutable tuple: shared, nothing can change
            # ``BoundCall(...)``'s own ``tuple.__new__``, without its Python ``__new__``.
            return tuple.__new__(
                BoundCall, (registration.name, method, cap.spec, scalars[0], args, {}, scalars[1])
            )
    own_args, tagged_args, own_kwargs, tagged_kwargs = owned_arguments(
        registration.name, method, args, kwargs
    )
    binder = cap.binder
    arguments, bound_args, bound_kwargs = binder.bind(own_args, own_kwargs)
    return BoundCall(
        registration.name,
        method,
        cap.spec,
        arguments,
        bound_args,
        bound_kwargs,
        binder.key_text(arguments, tagged_args, tagged_kwargs),
    )


def call_key(call: BoundCall, view: str) -> CallKey:
    """The exact identity of ``call`` seen at ``view``: what a claim is checked against."""
    return CallKey(call.capability, call.method, call.spec.version, call.canonical, view)


async def execute(
    target: object,
    method: CapabilityMethod,
    call: BoundCall,
    *,
    threads: WorkerThreads,
    early: bool,
    timeout: float,
    probe: Probe | None = None,
    encode: Encoder | None = None,
    new_scope: Callable[[], anyio.CancelScope] = anyio.CancelScope,
    clock: Callable[[], float] | None = None,
    retried: Callable[[], None] | None = None,
) -> object:
    """Run ``call`` once on ``target``; the result is converted (``_conversion.to_plain``
    with the Host's ``encode``), checked, bounded and a fresh copy.

    ``new_scope`` makes the cancel scope an async call runs in: ``anyio.CancelScope``, or
    the running backend's own class (``scope_class``), which skips anyio's backend lookup;
    ``clock`` is ``anyio.current_time`` or the running loop's own (``_clock.loop_clock``), looked
    up once per run by the caller rather than once per call.

    A sync method runs in a worker thread of ``threads``, under its ``early`` or formal
    budget (``_threads``: early work never takes the program's threads); ``timeout``
    counts from the moment it has a thread. ``probe`` (early work) is told when the tool
    is invoked, and a call withdrawn before that never invokes it. A formal ``pure`` or
    ``immutable_read`` call that timed out while early calls of the same capability ran
    (it may have queued behind them inside the tool) runs again, ``retried`` told each time.

    Raises ``ToolFailure`` for every failure of the tool, ``BaseException`` included
    (``_crossing.failure_from``; ``OutcomeUnknown`` when a call that may write timed out),
    and for a result that cannot cross (``_crossing.checked_result``). Early work that
    timed out or was withdrawn raises ``scheduler.LaneStopped`` instead: never an outcome
    a Guest call may claim (contract 7). The caller's
    cancellation propagates unchanged: an async method is cancelled, a sync one is
    abandoned in its thread (it may still finish later; ``probe`` tells the speculative
    lane so, which accounts it ``late``). A tool raising a cancellation exception of its
    own is a tool failure like any other.
    """
    fn: Any = getattr(target, call.method)
    # The tool gets its own copies: ``fn(*args, **kwargs)`` makes the tuple and dict it
    # sees, so only a mutable value inside them needs copying.
    args = call.args if _immutable(call.args) else fresh_copy(call.args)
    kwargs = (
        call.kwargs
        if not call.kwargs or _immutable(call.kwargs.values())
        else fresh_copy(call.kwargs)
    )
    assert isinstance(args, tuple) and isinstance(kwargs, dict)
    finished = False
    if method.is_async and probe is not None and not probe.invoke():
        raise LaneStopped(f"{call.capability}.{call.method} was withdrawn before it started")
    capability = call.capability
    # A read of the program's may have waited inside the tool behind early calls of it (one
    # connection, a lock): a timeout then is not the tool's own (contract 7; see below).
    rerun = not early and method.effect.speculable
    mark = threads.early_mark(capability) if rerun else 0
    while True:
        try:
            if method.is_async:
                if early:
                    threads.early_began(capability)
                try:
                    awaitable = fn(*args, **kwargs) if kwargs else fn(*args)
                    if (
                        type(awaitable) is _COROUTINE
                        and _MAY_SUSPEND.get(awaitable.cr_code) is False
                    ):
                        raw = (
                            await awaitable
                        )  # runs to its end here, in one step: no scope (see ``_awaited``)
                        finished = True
                    else:
                        finished, raw = await _awaited(awaitable, timeout, new_scope, clock)
                finally:
                    if early:
                        threads.early_ended(capability)
            else:
                work = in_thread(functools.partial(fn, *args, **kwargs))
                if early:
                    work = threads.counting(capability, work)
                if probe is not None:
                    work = functools.partial(_probed, probe, work)
                    probe.in_thread = True
                finished, raw = await threads.run(
                    work,
                    early=early,
                    what=f"{capability}.{call.method}",
                    timeout=timeout,
                    probe=probe,
                )
        except BaseException as exc:
            if not is_tool_exception(exc):
                raise
            raise failure_from(exc) from None
        if finished or not rerun or not threads.early_overlapped(capability, mark):
            break
        # Early calls of this capability ran while this read did: it may have queued behind
        # them inside the tool, which the sequential run never does. A read may run again,
        # unobserved but for time and the physical count; once no early call overlaps it,
        # its timeout is its own. (Early work is bounded by the runs' budgets and each call
        # by its own timeout, so this ends.)
        mark = threads.early_mark(capability)
        if retried is not None:
            retried()
    if not finished:
        where = tool_name(capability, call.method)
        if early:
            # Whether the time went to the tool or to waits that early work shares (a lock
            # inside the tool, a connection, the machine) cannot be told apart: never a
            # settled outcome (contract 7); the program's own call runs and times out, or
            # not, on its own.
            raise LaneStopped(f"{where} did not finish within {timeout}s early")
        if method.effect.may_write:
            raise OutcomeUnknown(
                "OutcomeUnknown",
                f"{where} did not finish within {timeout}s; it may or may not have taken effect",
            )
        raise ToolFailure("TimeoutError", f"{where} did not finish within {timeout}s")
    try:
        if type(raw) not in _IMMUTABLE:  # an exact scalar is kept as it is by every rule
            raw = to_plain(raw, encode)
    except ConversionError as exc:
        raise invalid_result(call.capability, call.method, exc) from None
    return checked_result(call.capability, call.method, raw)


async def _awaited(
    awaitable: Awaitable[object],
    timeout: float,
    new_scope: Callable[[], anyio.CancelScope] = anyio.CancelScope,
    clock: Callable[[], float] | None = None,
) -> tuple[bool, object]:
    """``(True, result)`` of an async tool call, or ``(False, None)`` after ``timeout``.

    A call that finishes without suspending (a cache hit, a 0-latency tool) cannot be
    interrupted by a timeout anyway, so it costs no timer: its cancel scope is entered
    undated (a scope must be entered before the tool enters its own, or their nesting
    breaks), the coroutine's first step runs in it, and only a call that suspended gets
    the deadline, counted from before that first step, as ``move_on_after`` would have.

    A coroutine whose code cannot suspend at all (no await point: ``_may_suspend``) gets
    no scope either: its one step can neither enter a scope that outlives it nor be
    interrupted, so a scope around it would change nothing but the cost (about a sixth
    of a call's Host CPU). It is awaited as it is (``await`` runs it to its end in this
    task, without the ``StopIteration`` that stepping it by hand raises); once its code
    is known, ``execute`` does so itself, without this coroutine.
    """
    if type(awaitable) is _COROUTINE and not _may_suspend(awaitable.cr_code):
        return (
            True,
            await awaitable,
        )  # one step to its end (an ``await`` of it raises no StopIteration)
    with new_scope() as scope:
        started = (clock or loop_clock())()
        if type(awaitable) is not _COROUTINE:
            scope.deadline = started + timeout
            return True, await awaitable
        coro: Coroutine[object, object, object] = awaitable
        try:
            first = coro.send(None)
        except StopIteration as stop:
            return True, stop.value
        scope.deadline = started + timeout
        return True, await _Resumed(coro, first)
    return False, None


class _Resumed:
    """Awaiting a coroutine that already ran its first step (which yielded ``first``).

    Forwards what the event loop sends or throws, as ``await coro`` would have (PEP 380).
    """

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[object, object, object], first: object) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[object, object, object]:
        coro, pending = self._coro, self._first
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


def scope_class() -> Callable[[], anyio.CancelScope]:
    """The running backend's cancel scope class: what ``anyio.CancelScope()`` makes, made
    without looking the backend up again (that lookup is a third of a scope's cost)."""
    return type(anyio.CancelScope())


def _probed(probe: Probe, work: Callable[[], object]) -> object:
    """``work()`` in its thread, unless the call was withdrawn before the thread started."""
    if not probe.invoke():
        return None  # withdrawn: nobody waits for this thread (its caller was cancelled)
    try:
        return work()
    finally:
        probe.thread_done = True


def spec_or_none(reg: Registration | None, method: str) -> MethodSpec | None:
    """The spec of ``reg``'s ``method``, None when either is unknown (a refused call's receipt)."""
    cap = reg.methods.get(method) if reg is not None else None
    return cap.spec if cap is not None else None
