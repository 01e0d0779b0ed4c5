"""The runtime side of Pysolate: the incremental event graph, the ready frontier, the
speculative lane and the claim table, and the observation table runs on one Host share
(anyio + networkx)."""

from ._branches import BranchSpeculation as BranchSpeculation
from ._branches import BranchStatistics as BranchStatistics
from ._branches import Layers as Layers
from ._graph import EventGraph as EventGraph
from ._graph import GraphStatistics as GraphStatistics
from ._graph import KeyFn as KeyFn
from ._graph import Node as Node
from ._lane import LanePolicy as LanePolicy
from ._lane import LaneStatistics as LaneStatistics
from ._lane import SpeculativeLane as SpeculativeLane
from ._observation import Disposition as Disposition
from ._observation import LaneStopped as LaneStopped
from ._observation import Observation as Observation
from ._observation import ObservationState as ObservationState
from ._observation import Probe as Probe
from ._shared import EntryState as EntryState
from ._shared import ObservationTable as ObservationTable
from ._shared import SharedCall as SharedCall
from ._shared import SharedProbe as SharedProbe
from ._shared import TableStatistics as TableStatistics
from ._slots import Slots as Slots
from ._state import IllegalTransition as IllegalTransition
from ._state import State as State
from ._state import transition as transition
from ._views import Respeculation as Respeculation

__all__: list[str] = [
    "BranchSpeculation",
    "BranchStatistics",
    "Disposition",
    "EntryState",
    "EventGraph",
    "GraphStatistics",
    "IllegalTransition",
    "KeyFn",
    "LanePolicy",
    "LaneStatistics",
    "LaneStopped",
    "Layers",
    "Node",
    "Observation",
    "ObservationState",
    "ObservationTable",
    "Probe",
    "Respeculation",
    "SharedCall",
    "SharedProbe",
    "Slots",
    "SpeculativeLane",
    "State",
    "TableStatistics",
    "transition",
]
