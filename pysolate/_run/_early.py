"""One run's early calls: how the lane's dispatched work reaches a tool, traced.

An early call runs against the shared root (``Registry.call_root``), through the Host's
table of shared work when it admits the call (contract 8, ``_sharing``), in a fused batch
(``pysolate.passes.BatchFusion``), on the run's own object after a write the Guest made
(``RunObjects.call_on_view``), on a speculative layer of the run's branch
(``_layers.call_on_layer``), or not at all: a session turn may be served the settled result
of an earlier rejected turn with the same exact key (``carried``).

``EarlyCalls`` holds what those need (the registry, the run's objects, its trace and
sharing) but never the run's scope: the scope is built after it, given the lane that
holds it, so the run's parts form no cycle.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from occurrences import CallKey, fresh_copy
from scheduler import Node, Observation, Probe

from .._calls._broker import BoundCall
from .._calls._registry import Registry
from .._calls._run_objects import RunObjects
from .._calls._sharing import RunSharing
from ..passes import BatchFusion
from ..tracing import ObservationTrace, RunTrace
from ._layers import call_on_layer

Carried = Callable[[CallKey], Observation | None]
"""A session's settled early result of an earlier rejected turn by exact key, or None."""


class EarlyCalls:
    """The lane's ``Execute`` and ``may_dispatch`` for one run (see the module docstring)."""

    def __init__(
        self,
        registry: Registry,
        objects: RunObjects,
        trace: RunTrace,
        *,
        speculate: bool,
        sharing: RunSharing | None = None,
        batcher: BatchFusion | None = None,
        carried: Carried | None = None,
    ) -> None:
        self._registry = registry
        self._objects = objects
        self._trace = trace
        self._speculate = speculate
        self._sharing = sharing
        self._batcher = batcher
        self._carried = carried
        self.traces: dict[
            int, ObservationTrace
        ] = {}  # each early observation's, by id (claims link to it)
        self.reused: set[int] = (
            set()
        )  # early observations served by a carried one (nothing physical)

    def may_dispatch(self, node: Node) -> bool:
        if node.provisional and self._batcher is not None:
            return False  # a loop's reads wait for the loop, to be fused into one batch
        return self._speculate and self._objects.may_speculate(node.site.capability)

    def on_view(self, node: Node, obs: Observation) -> Awaitable[object]:
        """A read after a write the Guest made, on the view that write left."""
        return self.run(node, obs, on_view=True)

    def on_layer(self, node: Node, obs: Observation, layer: object) -> Awaitable[object]:
        """A call on ``layer``, a speculative layer of the run's branch (``scheduler._branches``)."""
        return self.run(node, obs, layer=layer)

    async def run(
        self, node: Node, obs: Observation, on_view: bool = False, layer: object = None
    ) -> object:
        """One early call: against the root, or (``on_view``) against the run's own object,
        on the view a write left, or on ``layer``."""
        registry, sharing, batcher = self._registry, self._sharing, self._batcher
        call = registry.bind(
            node.site.capability, node.site.method, node.args or (), node.kwargs or {}
        )
        # A layer's view ids are of this run's lineage only: never served from another turn.
        held = self._carried(obs.key) if self._carried is not None and layer is None else None
        if (
            held is None
            and sharing is not None
            and layer is None
            and not on_view
            and (batcher is None or not batcher.fusable(call))
            and sharing.admits_early(call)
        ):  # against the root: through the Host's table, which other runs share (contract 8)
            return await sharing.early(
                obs, call, functools.partial(_on_root, registry, call), self.traces
            )
        span = self._trace.observation_started(
            call.capability,
            call.method,
            call_id=f"early-{obs.id}",
            lane="speculative" if layer is None else "branch",
            effect=call.spec.effect.value,
            call_key=obs.key.digest(),
            arguments=call.arguments,
        )
        self.traces[obs.id] = span
        if held is not None and obs.probe.invoke():  # (counted as the record of its serving)
            self.reused.add(obs.id)
            if held.error is not None:
                span.completed(error=held.error)
                raise held.error
            span.completed(result=held.value)
            return fresh_copy(held.value)
        try:
            with span.activated():
                if layer is not None:
                    value = await call_on_layer(registry, layer, call, obs.probe)
                elif on_view:
                    value = await self._objects.call_on_view(call, probe=obs.probe)
                elif batcher is not None and batcher.fusable(call):
                    value = await batcher.submit(call, obs.probe)
                else:
                    value = await registry.call_root(
                        call.capability, call.method, call, probe=obs.probe
                    )
        except BaseException as exc:
            span.completed(error=exc)
            raise
        span.completed(result=value)
        return value


def _on_root(registry: Registry, call: BoundCall, probe: Probe) -> Awaitable[object]:
    """``call`` executed early against the root (a shared call's physical execution)."""
    return registry.call_root(call.capability, call.method, call, probe=probe)
