"""The runtime side of Pysolate: the incremental event graph, the ready frontier, the
speculative lane and the claim table (anyio + networkx)."""

from ._graph import EventGraph as EventGraph
from ._graph import GraphStatistics as GraphStatistics
from ._graph import KeyFn as KeyFn
from ._graph import Node as Node
from ._state import IllegalTransition as IllegalTransition
from ._state import State as State
from ._state import transition as transition

__all__: list[str] = [
    "EventGraph",
    "GraphStatistics",
    "IllegalTransition",
    "KeyFn",
    "Node",
    "State",
    "transition",
]
