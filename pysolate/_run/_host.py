"""The Host: the capability registry and its settings; runs and sessions start here.

Every run is one ``_run.Run`` built from what the Host hands it (``HostRuns``: the
``Registry`` of its capabilities and its run-wide settings, never the Host itself) and the
run's own inputs: a stream or a whole source, speculating or not (``run_source(src,
speculate=False)`` is the reference every speculative run must equal, docs/contract.md).

The Host holds configuration only (registrations, limits, the Guest factory, a thread
limiter per event loop); everything about one run lives in its ``Run``, so any number of
runs may share a Host concurrently.
"""

from __future__ import annotations

import builtins
import functools
import keyword
import weakref
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, cast

import anyio
import anyio.lowlevel

from occurrences import FUNCTIONS, CallKey, MethodSpec
from scheduler import LanePolicy, Probe

from .._calls._broker import CALL_TIMEOUT, BoundCall, Registration, RunScope
from .._calls._registry import Registry, new_run_id
from .._calls._run_objects import RunObjects
from .._calls._share_config import ShareConfig, ShareStatistics, share_config
from .._calls._sharing import HostSharing
from .._calls._threads import ThreadStatistics, WorkerThreads
from .._exceptions import IsolationUnavailable, RegistrationError
from .._guest_api import GuestFactory, GuestLimits, Isolation, SessionGuestFactory
from .._report._result import RunResult
from .._tools._capability import (
    FunctionTools,
    capability_function,
    capability_methods,
    is_function_tool,
)
from .._tools._conversion import Encoder
from ..passes import PassConfig
from ..streams import DEFAULT_DEADLINE, DEFAULT_IDLE_TIMEOUT, Code, CodeReader
from ..tracing import GLOBAL_INSTRUMENT, NULL_INSTRUMENT, Instrument, RunTrace
from ._guest_start import GuestStarter
from ._run import HostRuns, Run
from ._session import Session, SessionLimits, default_session_factory
from ._setup_warnings import host_notes, noted

if TYPE_CHECKING:
    from .._guest._isolation import IsolationChoice, Level
    from .._guest._pool import GuestPool

DEFAULT_THREADS = 16
"""Worker threads the Host's sync capability methods may occupy at once (per event loop)."""


class Host:
    """Owns the capabilities a Guest may call, and runs sealed sources against them."""

    def __init__(
        self,
        *,
        guest_factory: GuestFactory | None = None,
        limits: GuestLimits | None = None,
        threads: int = DEFAULT_THREADS,
        early_threads: int | None = None,
        max_stuck_threads: int | None = None,
        call_timeout: float = CALL_TIMEOUT,
        instrument: Instrument | None = GLOBAL_INSTRUMENT,
        passes: PassConfig | None = None,
        session_factory: SessionGuestFactory | None = None,
        isolation: IsolationChoice = "strongest",
        encode: Encoder | None = None,
        fork_server: bool = True,
        guest_pool: int | None = None,
        share: bool | ShareConfig = True,
    ) -> None:
        """``guest_factory`` defaults to the isolated subprocess Guest; ``instrument``
        traces runs: by default OpenTelemetry spans through the global tracer provider
        (nothing is recorded until the application configures an SDK), ``None`` for no
        tracing at all, or e.g. ``OTelInstrument(provider, record_payloads=True)``;
        ``passes`` (default: none) the correctness-gated passes speculating runs apply;
        ``session_factory`` (default: the isolated subprocess Guest) starts sessions' Guests.

        ``isolation`` is the level every Guest of this Host runs at, and so the minimum
        (docs/isolation.md): ``"strongest"`` (the default) is the strongest this machine
        offers and must include file-system isolation (``"namespaces"`` or
        ``"landlock"``); naming a level (``"namespaces"``, ``"landlock"``, ``"seccomp"``,
        ``"rlimits"``) asks for exactly it — the last two are an explicit opt-in to running
        without file-system isolation. Raises ``IsolationUnavailable`` here, before any
        source can reach a Guest, when the machine cannot give it (the message says what
        is missing and how to get it), and ``ValueError`` for an unknown level. The probe
        blocks once per process (it starts bubblewrap to see that it works). With a
        custom ``guest_factory`` the factory decides and ``isolation`` is not consulted.

        ``fork_server`` (default on): the default factories fork Guests from a pre-imported
        fork server where that keeps the level whole (``namespaces``, ``landlock``, ``seccomp``; docs/isolation.md
        "Fork server"), and spawn them elsewhere; off, every Guest is spawned.

        ``guest_pool`` (default ``_guest._pool.DEFAULT_SIZE``, one; 0: none): with the default
        factory at a level whose Guests are forked (``fork_server`` on, not ``rlimits``),
        how many ready Guests this Host keeps (per event loop, asyncio only), each
        started for the capabilities and limits of the latest run and given only to a run
        with exactly those (``pysolate._guest._pool``), so that run's Guest is ready at
        once. ``aclose`` (or ``async with Host(...)``) closes them; so do dropping the Host,
        the end of its event loop and interpreter exit.

        ``threads`` bounds the program's own sync calls running at once, ``early_threads``
        (default ``threads // 2``) early ones, separately; ``max_stuck_threads`` (default
        ``threads``) the threads of abandoned sync calls still running, past which new
        sync calls fail (``pysolate._calls._threads``; ``thread_statistics()`` reports them).

        ``encode`` (default: none) the Host's own conversion of tool results to plain data,
        asked before the built-in rules (``pysolate._tools._conversion``, docs/tools.md "Values").

        ``share`` (default on): speculating runs on this Host share physical calls by exact
        key (contract 8: ``pure`` ones, and ``immutable_read`` ones on the root's view; the
        Host's observation table, ``pysolate._calls._sharing``), a settled success serving later
        runs for ``ShareConfig.ttl`` seconds; ``False``: every run calls for itself."""
        self.passes = passes
        self.encode = encode
        self._registrations: dict[str, Registration] = {}
        config = share_config(share)
        self.sharing = None if config is None else HostSharing(config, self._registrations)
        self._guest_factory = guest_factory
        self._session_factory = session_factory  # None: the subprocess Guest, kept across turns
        self.limits = limits or GuestLimits()
        self.threads = WorkerThreads(threads, early_threads, max_stuck_threads)
        self.call_timeout = call_timeout
        self.instrument = NULL_INSTRUMENT if instrument is None else instrument
        # One limiter per event loop: an anyio limiter binds to the first loop using it.
        self._limiters: dict[anyio.lowlevel.EventLoopToken, anyio.CapacityLimiter] = {}
        self._level: Level | None = None  # the resolved level of the default factory
        self._fork_server = fork_server
        self._pool: GuestPool | None = None
        if guest_factory is None:
            from .._guest import _isolation, _pool

            self._level = _isolation.resolve(isolation)
            size = _pool.DEFAULT_SIZE if guest_pool is None else guest_pool
            if (
                size and fork_server and _isolation.forkable(self._level)
            ):  # (only forked Guests are pooled)
                self._pool = _pool.GuestPool(size, isolation=self._level, fork_server=fork_server)
                weakref.finalize(
                    self, self._pool.close_soon
                )  # (the pool holds no reference to the Host)

    async def aclose(self) -> None:
        """Close the Host's pool of ready Guests (none outlives it) and its shared work (calls
        still running for nobody but the table are cancelled and awaited, settled results
        forgotten); runs after this start their Guests and calls fresh. Idempotent; runs
        under way keep the calls they wait on, unless those run on this loop for no one else."""
        if self.sharing is not None:
            await self.sharing.aclose()
        if self._pool is not None:
            await self._pool.aclose()

    async def __aenter__(self) -> Host:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def guest_pool(self) -> GuestPool | None:
        """The pool of ready Guests (its ``stats``: how runs got their Guests), or None."""
        return self._pool

    def isolation(self) -> Isolation | None:
        """The isolation this Host's Guests run at, known before any run: the level and
        the mechanisms it consists of on this machine, each of which the Host checks in
        every Guest's ``/proc`` where the kernel shows it (a Guest without one is refused,
        ``IsolationMismatch``; ``RunResult.isolation`` lists what was seen of the run's
        Guest, docs/isolation.md). None with a custom ``guest_factory``."""
        if self._level is None:
            return None
        from .._guest import _isolation
        from .._guest._process import SCRATCH_BYTES

        plan = _isolation.plan(self._level, SCRATCH_BYTES)
        return Isolation(plan.level, (*plan.mechanisms, *plan.requires()))

    def trace_run(self, run_id: str | None = None) -> RunTrace:
        """Start the trace of run ``run_id`` (default: a new id; its span carries the
        isolation level)."""
        return self.instrument.run_started(
            run_id=run_id or new_run_id(), isolation=self._level or "custom"
        )

    # -- registry -------------------------------------------------------------------------

    def register(self, name: str, obj: object) -> None:
        """Expose ``obj`` to the Guest as the global ``name``.

        ``obj`` is an object whose ``@capability`` methods the program calls as
        ``name.method(...)``, or a function (sync or async, or a bound method) declared
        with ``@capability`` that the program calls as ``name(...)`` (a *function tool*).
        All function tools are methods of one capability, ``occurrences.FUNCTIONS``, so
        they are one unit of state: a call of one that may write puts all of them on a
        new view (docs/tools.md, "Function tools").

        Raises ``RegistrationError`` for a name that is not a str or not a public
        identifier, shadows a builtin or is taken, or an object the broker cannot call
        exactly (see ``capability_methods``, ``capability_function``).
        """
        self.check_name(name)
        functions = self._registrations.get(FUNCTIONS)
        if not is_function_tool(obj):
            self._registrations[name] = Registration(name, obj, capability_methods(obj))
            return
        fn = cast("Callable[..., object]", obj)
        method = capability_function(name, fn)
        if functions is None:
            self._registrations[FUNCTIONS] = Registration(
                FUNCTIONS, FunctionTools({name: fn}), {name: method}
            )
            return
        assert isinstance(functions.obj, FunctionTools)
        self._registrations[FUNCTIONS] = Registration(
            FUNCTIONS, functions.obj.with_function(name, fn), {**functions.methods, name: method}
        )

    def check_name(self, name: str) -> None:
        """Raise ``RegistrationError`` unless ``register(name, ...)`` may use ``name``: a
        ``str`` that is a public identifier, no keyword, no builtin's name (the program
        would lose the builtin), and not registered yet (as an object or a function)."""
        if type(name) is not str:
            raise RegistrationError(f"capability name must be a str, not {type(name).__qualname__}")
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise RegistrationError(f"capability name {name!r} is not a public identifier")
        if hasattr(builtins, name):
            raise RegistrationError(
                f"capability name {name!r} would shadow the builtin of that name"
            )
        functions = self._registrations.get(FUNCTIONS)
        if name in self._registrations or (functions is not None and name in functions.methods):
            raise RegistrationError(f"capability {name!r} is already registered")

    def registration(self, name: str) -> Registration:
        """The registration of capability ``name`` (``KeyError`` if there is none)."""
        return self._registrations[name]

    def capabilities(self) -> dict[str, list[str]]:
        """Capability name → its method names (what a Guest exposes); the function tools
        are the methods of ``occurrences.FUNCTIONS``."""
        return {name: sorted(reg.methods) for name, reg in self._registrations.items()}

    def method_specs(self) -> dict[str, dict[str, MethodSpec]]:
        """Capability name → method name → (effect, version)."""
        return {
            name: {m: cap.spec for m, cap in reg.methods.items()}
            for name, reg in self._registrations.items()
        }

    def registry(self) -> Registry:
        """What a run needs of the registered capabilities (``_registry``): the
        registrations as they are now, and the Host's call settings."""
        return Registry(self._registrations, self.threads, self.call_timeout, self.encode)

    def bind(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> BoundCall:
        """Bind a call to its method's signature (``_broker.bind``'s errors; ``KeyError``
        for an unknown capability)."""
        return self.registry().bind(capability, method, args, kwargs)

    def root_view(self, capability: str, method: str, call: BoundCall) -> str:
        """The view id of ``call`` against the shared root object (the speculative lane's)."""
        return self.registry().root_view(capability, method, call)

    def root_key(self, call: BoundCall) -> CallKey:
        """The call key of an early execution of ``call`` against the root."""
        return self.registry().root_key(call)

    def root_key_for(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> CallKey | None:
        """``Registry.root_key_for``: the key an early execution of this call would have."""
        return self.registry().root_key_for(capability, method, args, kwargs)

    async def call_root(
        self, capability: str, method: str, call: BoundCall, *, probe: Probe | None = None
    ) -> object:
        """Execute a pure or immutable-read ``call`` against the shared root object
        (``Registry.call_root``: ``PermissionError`` for any other effect)."""
        return await self.registry().call_root(capability, method, call, probe=probe)

    def share_statistics(self) -> ShareStatistics:
        """Logical and physical calls of the Host's shared work, over its event loops (all
        zero with ``share=False``)."""
        return ShareStatistics() if self.sharing is None else self.sharing.statistics()

    def thread_statistics(self) -> ThreadStatistics:
        """Worker-thread budgets, which pool holds what (early and formal slots taken,
        threads of abandoned calls still running in each), refusals."""
        return self.threads.statistics()

    def new_scope(
        self,
        trace: RunTrace | None = None,
        targets: Mapping[str, object] | None = None,
        limits: GuestLimits | None = None,
    ) -> RunScope:
        """A fresh scope of a run without speculation (run-scoped objects, epochs, call
        log, its trace); ``targets``: a session turn's objects (see ``RunObjects``);
        ``limits``: the run's (default: the Host's), whose ``max_host_bytes`` bounds what
        the scope holds."""
        return RunScope(
            RunObjects(self.registry(), targets),
            trace=trace or self.trace_run(),
            sharing=self.sharing,
            max_bytes=(limits or self.limits).max_host_bytes,
        )

    def runs(self) -> HostRuns:
        """What every run of this Host is given (``_run.HostRuns``), as the Host is now."""
        return HostRuns(
            self.registry(),
            self.trace_run,
            self.sharing,
            self.passes,
            self.limits,
            self.setup_warnings,
        )

    # -- runs -----------------------------------------------------------------------------

    async def run_stream(
        self,
        chunks: AsyncIterable[object] | Iterable[object],
        *,
        code: Code | None = None,
        speculate: bool = True,
        policy: LanePolicy | None = None,
        limits: GuestLimits | None = None,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        deadline: float | None = DEFAULT_DEADLINE,
    ) -> RunResult:
        """Run the program a model is streaming, starting safe calls while it streams.

        ``chunks``: an async iterable (or a sync one, read in the event loop) of ``str``,
        or of OpenAI / Anthropic stream events, raw or from the SDKs' helper streams.
        ``code`` says where the program is (``pysolate.streams``): ``"raw"`` (the text),
        ``"markdown"`` / ``MarkdownCode(block=...)`` (a ```python block; the run seals at its
        closing fence), ``ToolCallCode(tool)`` (a tool call's string argument, decoded as it
        streams); None (the default) takes the format a ``CodedStream`` (a replay) carries,
        else ``"raw"``. The result equals ``run_source(sealed, speculate=False)`` (docs/contract.md,
        the correctness contract).

        Without a program to run the result says why, and no write, live read or unknown
        call ran: ``rejected`` for a syntax error, ``NoCodeBlock`` or ``ToolArgumentsError``;
        ``aborted`` for a stream that raises, is cut (``StreamCut``: the SDK says the reply
        is incomplete, or the fence never closed) or stalls (``StreamTimeout``: no event for
        ``idle_timeout`` seconds, default 120, or the program not complete ``deadline``
        seconds after the stream started, default 1800; None disables either).

        Raises ``TypeError`` for a ``chunks`` that is not a stream (a ``str``, an
        un-awaited coroutine, an un-entered stream manager) and ``ValueError`` for an
        unknown ``code`` or a bad timeout, before anything starts; ``IsolationUnavailable``
        (as ``run_source`` does) when the Guest could not be isolated at the Host's level,
        with nothing of the program run. Cancellation propagates after stopping early work
        and killing the Guest.
        """
        reader = CodeReader(chunks, code, idle_timeout=idle_timeout, deadline=deadline)
        return await self._run(reader, speculate, policy, limits)

    async def run_source(
        self,
        source: str,
        *,
        speculate: bool = True,
        policy: LanePolicy | None = None,
        limits: GuestLimits | None = None,
    ) -> RunResult:
        """Run the complete ``source`` once in a fresh Guest.

        ``speculate=False`` is the sequential reference: every call runs when the program
        makes it. With speculation (the default) every eligible call whose arguments are
        known at seal is submitted at once, so independent reads overlap while the program
        still sees ordinary calls (hidden submit, blocking materialize).

        A source that does not compile is ``rejected`` and nothing runs (no Guest is
        started, no tool is called). The run's workspace branches are returned open in
        ``result.workspaces``. Cancellation stops the Guest and propagates; writes already
        made stay in the (dropped) branch and are never replayed.
        """
        return await self._run(source, speculate, policy, limits)

    async def _run(
        self,
        program: CodeReader | str,
        speculate: bool,
        policy: LanePolicy | None,
        limits: GuestLimits | None,
    ) -> RunResult:
        """One run of ``program`` (a stream, or a whole source) in a fresh Guest."""
        notes = self.setup_warnings() if speculate else ()
        run_id = new_run_id()
        guest = GuestStarter(self.guest_factory(), self.capabilities(), limits or self.limits)
        run = Run(
            self.runs(),
            guest,
            run_id=run_id,
            trace=self.trace_run(run_id),
            speculate=speculate,
            policy=policy,
            limits=limits,
        )
        try:
            result = await run.execute(program)
        except BaseExceptionGroup as group:
            # The Guest refused to run below its level: raised as itself, not in a group.
            refused, rest = group.split(IsolationUnavailable)
            if refused is None or rest is not None:
                raise
            first: BaseException = refused
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise first from None
        return noted(result, notes) if notes else result

    def session(
        self, limits: SessionLimits | None = None, *, guest_limits: GuestLimits | None = None
    ) -> Session:
        """A session: turns against one Guest that keeps its globals (``pysolate._run._session``).

        Use as ``async with host.session() as session:``; ``limits`` bound the session as a
        whole, ``guest_limits`` (default: the Host's) each turn.
        """
        factory = self._session_factory or default_session_factory(
            self._level or "strongest", self._fork_server
        )  # the Host's level
        return Session(self.runs(), factory, limits or SessionLimits(), guest_limits or self.limits)

    def setup_warnings(self) -> tuple[str, ...]:
        """Why no speculating run on this Host can start a call early, with the fix (empty
        when one can): every method left at ``Effect.UNKNOWN``. The first time, it is also
        warned as an ``UnqualifiedToolsWarning`` (``pysolate._run._setup_warnings``)."""
        return host_notes(self, self._registrations.values())

    def guest_factory(self) -> GuestFactory:
        """The factory this Host starts Guests with (default: the isolated subprocess, at
        this Host's isolation level)."""
        if self._guest_factory is not None:
            return self._guest_factory
        assert self._level is not None
        if self._pool is not None:
            return self._pool.take
        return _default_guest_factory(self._level, self._fork_server)


def _default_guest_factory(level: Level, fork_server: bool) -> GuestFactory:
    from .._guest import start_subprocess_guest  # type: ignore[import-not-found,attr-defined,unused-ignore]

    return cast(
        GuestFactory,
        functools.partial(start_subprocess_guest, isolation=level, fork_server=fork_server),
    )
