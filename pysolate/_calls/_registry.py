"""What a run needs of the registered capabilities: the ``Registry`` value a Host hands it.

A run binds calls, keys early work against the shared roots and executes it there, and
builds its own scope over the registered objects. It needs nothing else of the Host, so
it is given this value, never the Host: the run's modules know the registry, the Host
knows them, and nothing imports back into ``_host``.

The registry holds the Host's registrations (the one dict ``Host.register`` adds to) and
the call settings every execution uses; it holds nothing of any run.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from occurrences import CallKey, MethodSpec
from scheduler import Probe

from .._tools._conversion import Encoder
from ._execute import BoundCall, Registration, bind, call_key, execute
from ._threads import WorkerThreads


def new_run_id() -> str:
    """A run's id: 16 hex digits, unique across runs (traces, ``CallRecord.shared_from``)."""
    return uuid.uuid4().hex[:16]


@dataclass(slots=True, eq=False)
class Registry:
    """The registered capabilities and how their calls execute (threads, timeout, encoder)."""

    registrations: Mapping[str, Registration]
    threads: WorkerThreads
    call_timeout: float
    encode: Encoder | None = None

    def registration(self, name: str) -> Registration:
        """The registration of capability ``name`` (``KeyError`` if there is none)."""
        return self.registrations[name]

    def capabilities(self) -> dict[str, list[str]]:
        """Capability name → its method names (what a Guest exposes)."""
        return {name: sorted(reg.methods) for name, reg in self.registrations.items()}

    def method_specs(self) -> dict[str, dict[str, MethodSpec]]:
        """Capability name → method name → (effect, version)."""
        return {
            name: {m: cap.spec for m, cap in reg.methods.items()}
            for name, reg in self.registrations.items()
        }

    def bind(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> BoundCall:
        """Bind a call to its method's signature (``_broker.bind``'s errors; ``KeyError``
        for an unknown capability)."""
        return bind(self.registrations[capability], method, args, kwargs)

    def root_view(self, capability: str, method: str, call: BoundCall) -> str:
        """The view id of ``call`` against the shared root object (the speculative lane's)."""
        registration = self.registrations[capability]
        if registration.viewed:
            return registration.obj.view_of(method, call.arguments)  # type: ignore[attr-defined]
        return "epoch:0"

    def root_key(self, call: BoundCall) -> CallKey:
        """The call key of an early execution of ``call`` against the root."""
        return call_key(call, self.root_view(call.capability, call.method, call))

    def root_key_for(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> CallKey | None:
        """The key an early execution of this call would have, or None if it cannot be bound
        or its arguments cannot cross (the event graph's ``KeyFn``): such a call never runs
        early, the program's own call then fails as ``bind`` says."""
        try:
            return self.root_key(self.bind(capability, method, args, kwargs))
        except (AttributeError, KeyError, TypeError, ValueError):
            return None

    async def call_root(
        self, capability: str, method: str, call: BoundCall, *, probe: Probe | None = None
    ) -> object:
        """Execute a pure or immutable-read ``call`` against the shared root object.

        Raises ``PermissionError`` for any other effect (only those may run early),
        otherwise ``_broker.execute``'s errors and cancellation behaviour.
        """
        reg = self.registrations[capability]
        cap = reg.methods[method]
        if not cap.effect.speculable:
            raise PermissionError(f"{capability}.{method} is {cap.effect.value}: never run early")
        return await execute(
            reg.obj,
            cap,
            call,
            threads=self.threads,
            early=True,
            timeout=self.call_timeout,
            probe=probe,
            encode=self.encode,
        )
