"""One run's objects and claim table: what its scope and its early work both stand on.

A run's formal calls go to its own objects (a workspace branch, or the shared root of a
stateless capability); the state each call would see is named by a view id: the object's
own (``Viewed``) or the count of calls that may have written it (its epoch). The Guest's
calls (``RunScope``) and the run's early work (the lane's reads on the run's views, its
branch layers) both need those objects, views and epochs. They live here, apart from the
scope, so the run can build its early work first and then a scope that is given the claim
table it serves from: the parts point one way, and nothing forms a cycle through the run.

``Claims`` is that table; ``SEQUENTIAL`` the one a run that does not speculate is given
(nothing to claim: every call runs when the program makes it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from occurrences import CallKey
from scheduler import Observation, Probe

from ._execute import BoundCall, Viewed, bind, call_key, execute

if TYPE_CHECKING:
    from ._registry import Registry


class Claims(Protocol):
    """The claim table of a run (``scheduler.SpeculativeLane``, or ``SEQUENTIAL``)."""

    async def claim(self, key: CallKey) -> Observation | None: ...
    def begin_formal(self, key: CallKey) -> Observation: ...
    def end_formal(
        self, obs: Observation, value: object = None, error: BaseException | None = None
    ) -> None: ...


class SequentialClaims:
    """The claim table of a run without speculation: no early work, no formal records (the
    scope never asks it: ``RunScope`` tests for ``SEQUENTIAL`` once, when it is made)."""

    async def claim(self, key: CallKey) -> Observation | None:
        return None

    def begin_formal(self, key: CallKey) -> Observation:
        raise AssertionError("a sequential run records no formal observations")

    def end_formal(
        self, obs: Observation, value: object = None, error: BaseException | None = None
    ) -> None:
        raise AssertionError("a sequential run records no formal observations")


SEQUENTIAL: Claims = SequentialClaims()


class RunObjects:
    """The objects one run's formal calls go to, their views and their write epochs."""

    def __init__(self, registry: Registry, targets: Mapping[str, object] | None = None) -> None:
        """``targets`` (a session's turn): the objects formal calls run against, by name,
        instead of a fresh ``for_run()`` each."""
        self.registry = registry
        self.registrations = registrations = dict(registry.registrations)
        self.session_turn = targets is not None  # a session owns the targets' lifecycle
        self.target_map: dict[str, object] = {
            name: reg.obj.for_run() if reg.run_scoped else reg.obj  # type: ignore[attr-defined]
            for name, reg in registrations.items()
            if targets is None or name not in targets
        }
        if targets is not None:
            self.target_map.update(targets)
        # The view function of each target that has one, looked up once per run; a root's
        # kind is known from its registration (a runtime Protocol check costs microseconds).
        self._views: dict[str, Callable[[str, Mapping[str, object]], str]] = {
            name: target.view_of  # type: ignore[attr-defined]
            for name, target in self.target_map.items()
            if (
                registrations[name].viewed
                if target is registrations[name].obj
                else isinstance(target, Viewed)
            )
        }
        self.epochs: dict[str, int] = dict.fromkeys(registrations, 0)  # may-write calls started

    def targets(self) -> dict[str, object]:
        """The objects formal calls run against, by capability name."""
        return dict(self.target_map)

    def bind(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> BoundCall:
        """``bind`` against this run's registrations (``NameError`` for an unknown name)."""
        reg = self.registrations.get(capability)
        if reg is None:
            raise NameError(f"name {capability!r} is not defined")
        return bind(reg, method, args, kwargs)

    def view_of(self, capability: str, method: str, call: BoundCall) -> str:
        """The id of the state ``call`` would see now (see the module docstring)."""
        view = self._views.get(capability)
        if view is not None:
            return view(method, call.arguments)
        return f"epoch:{self.epochs[capability]}"

    def key_for(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> CallKey | None:
        """The call key the call would have now, or None when it cannot be bound."""
        try:
            call = self.bind(capability, method, args, kwargs)
        except (AttributeError, NameError, TypeError, ValueError):
            return None
        return call_key(call, self.view_of(capability, method, call))

    def may_speculate(self, capability: str) -> bool:
        """Whether early reads of ``capability`` still see what this run's reads would.

        A capability with views (a workspace) pins its root, so early reads stay exact
        whatever the run wrote; any other capability only while formal calls go to that
        same root object, and until the run's first call that may write it (after that,
        ``epoch`` keys would not match anyway).
        """
        registration = self.registrations[capability]
        if registration.viewed:
            return True
        # A run-scoped object other than the root may answer differently from it.
        return self.target_map[capability] is registration.obj and self.epochs[capability] == 0

    async def call_on_view(self, call: BoundCall, *, probe: Probe | None = None) -> object:
        """Execute a pure or immutable-read ``call`` early against this run's own object (the
        state its formal calls see now, after the run's writes); ``execute``'s errors and
        cancellation behaviour. Raises ``PermissionError`` for any other effect."""
        cap = self.registrations[call.capability].methods[call.method]
        if not cap.effect.speculable:
            raise PermissionError(
                f"{call.capability}.{call.method} is {cap.effect.value}: never run early"
            )
        registry = self.registry
        return await execute(
            self.target_map[call.capability],
            cap,
            call,
            threads=registry.threads,
            early=True,
            timeout=registry.call_timeout,
            probe=probe,
            encode=registry.encode,
        )
