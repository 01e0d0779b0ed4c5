"""The branch protocol, and one run's speculative layers of its branches.

A capability whose writes go to a *run-private branch* may have them performed early on
a speculative layer of that branch (``scheduler._branches`` has the rules: program order,
in-order exact claims, discard on the first mismatch). The built-in ``Workspace`` is such a
capability; any other is, when the object a run's formal calls go to (its ``for_run()``)
implements ``Branch``:

- ``view_of(method, arguments)``: the id of what the call would see now, changing with
  every write that affects it (as for any ``Viewed`` capability; contract 3);
- ``layer()``: an independent copy of this open branch, of the same class, whose view ids
  continue this branch's; writes to the copy are invisible to the original and vice versa;
- ``adopt(layer)``: take a layer's state (made by ``layer()`` of this branch or of one of
  its layers) as this branch's own, view ids included;
- ``admits_early(method, arguments)``: whether this write may run early on a layer of this
  branch (its limits); a write refused here runs when the program makes it.

And it promises: its methods of effect ``write`` change nothing but the branch they are
called on (no file, network or other capability is touched before a commit the Host makes
after the run), and they are deterministic: the same call on equal states gives the same
result (or error) and the same state. Only then is an early write discardable work.

Prior art: overlayfs' upper layers and git's branches, used as a speculative store
buffer: speculative writes are buffered in copies and retire (``adopt``) in order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from occurrences import CallKey, Effect
from scheduler import Node, Observation, Probe

from .._calls._broker import BoundCall, OutcomeUnknown, call_key, execute

if TYPE_CHECKING:
    from .._calls._registry import Registry
    from .._calls._run_objects import RunObjects

Execute = Callable[[Node, Observation, object], Awaitable[object]]
"""Runs one early call on the given layer object (``_early.EarlyCalls``: binding and tracing)."""


@runtime_checkable
class Branch(Protocol):
    """A run-private branch whose writes may run early on a layer (the module docstring)."""

    def view_of(self, method: str, arguments: Mapping[str, object]) -> str: ...
    def layer(self) -> Any: ...
    def adopt(self, layer: Any) -> None: ...
    def admits_early(self, method: str, arguments: Mapping[str, object]) -> bool: ...


class RunLayers:
    """The speculative layers of one run's branches (``scheduler.Layers``).

    Version 0 of each branch is a ``layer()`` of it taken when the run starts; each early
    write forks the version before it. Versions are kept until the run ends.
    """

    def __init__(self, scope: RunObjects, roots: Mapping[str, object], run: Execute) -> None:
        """``roots``: each capability's registered (shared) object; a capability is branched
        when its run object is a ``Branch`` other than that root."""
        self._scope = scope
        self._run = run
        self._branches: dict[str, Branch] = {}
        self._versions: dict[str, list[Branch]] = {}
        for name, target in scope.targets().items():
            # Identity first: a root is never branched, and the runtime Protocol check costs
            # 7-9 µs a capability (per run, for every capability).
            if target is not roots.get(name) and isinstance(target, Branch):
                try:
                    base = target.layer()
                except Exception:  # it refuses (not open): its writes just wait for the program
                    continue
                self._branches[name] = target
                self._versions[name] = [base]

    def capabilities(self) -> list[str]:
        """The branched capabilities of this run."""
        return list(self._branches)

    def _bound(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> BoundCall | None:
        try:
            return self._scope.bind(capability, method, args, kwargs)
        except (AttributeError, NameError, TypeError, ValueError):
            return None

    def key(
        self,
        capability: str,
        version: int,
        method: str,
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
    ) -> CallKey | None:
        call = self._bound(capability, method, args, kwargs)
        if call is None:
            return None
        return call_key(call, self._versions[capability][version].view_of(method, call.arguments))

    def admits(
        self,
        capability: str,
        version: int,
        method: str,
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
    ) -> bool:
        call = self._bound(capability, method, args, kwargs)
        return call is not None and self._versions[capability][version].admits_early(
            method, call.arguments
        )

    def fork(self, capability: str, version: int) -> int:
        versions = self._versions[capability]
        versions.append(versions[version].layer())
        return len(versions) - 1

    def run(self, capability: str, version: int, node: Node, obs: Observation) -> Awaitable[object]:
        return self._run(node, obs, self._versions[capability][version])

    def adopt(self, capability: str, version: int) -> None:
        self._branches[capability].adopt(self._versions[capability][version])

    def claimable(self, obs: Observation) -> bool:
        return not isinstance(obs.error, OutcomeUnknown)

    def independent(self, capability: str, write: Node, read: Node) -> bool:
        w = self._bound(capability, write.site.method, write.args or (), write.kwargs or {})
        r = self._bound(capability, read.site.method, read.args or (), read.kwargs or {})
        if w is None or r is None or w.spec.scope is None or r.spec.scope is None:
            return False
        a, b = _scope(w.arguments.get(w.spec.scope)), _scope(r.arguments.get(r.spec.scope))
        return (
            a is not None
            and b is not None
            and a != b
            and not a.startswith(b + "/")
            and not b.startswith(a + "/")
        )


def _scope(value: object) -> str | None:
    """A declared scope's value as a normalized relative path; None when odd (it may then
    overlap anything): the rule of discovery's scopes (``occurrences.discovery._scopes``)."""
    if (
        type(value) is not str
        or value.startswith("/")
        or value.endswith("/")
        or "\\" in value
        or "\0" in value
    ):
        return None
    parts = [part for part in value.split("/") if part not in ("", ".")]
    return None if not parts or ".." in parts else "/".join(parts)


async def call_on_layer(registry: Registry, layer: object, call: BoundCall, probe: Probe) -> object:
    """Execute ``call`` early on ``layer``, a speculative copy of the run's branch: a read,
    or a write (nothing else). ``_broker.execute``'s errors and cancellation behaviour."""
    cap = registry.registration(call.capability).methods[call.method]
    if not (cap.effect.speculable or cap.effect is Effect.WRITE):
        raise PermissionError(
            f"{call.capability}.{call.method} is {cap.effect.value}: never run early"
        )
    return await execute(
        layer,
        cap,
        call,
        threads=registry.threads,
        early=True,
        timeout=registry.call_timeout,
        probe=probe,
        encode=registry.encode,
    )
