"""Discovery: which capability calls the accepted statements will make, and with what.

A small abstract interpreter of the program's top-level code that never runs anything: it
binds names to what the evaluator can compute, reports each ``Occurrence`` (one arrival
at a call site) with its dependencies and effect to a ``DiscoverySink``, and reports the
arguments once the results they read arrive. The values it produces (``Occurrence``,
``Site``, ``Effect``, ...) are what the scheduler builds its graph from.
"""

from ._control import DiscoverySink as DiscoverySink
from ._discovery import Discovery as Discovery
from ._effect import Effect as Effect
from ._model import FUNCTIONS as FUNCTIONS
from ._model import ControlFrame as ControlFrame
from ._model import ControlKind as ControlKind
from ._model import MethodSpec as MethodSpec
from ._model import Occurrence as Occurrence
from ._model import OccurrenceId as OccurrenceId
from ._model import Site as Site
from ._model import tool_name as tool_name
from ._prior import PriorGlobals as PriorGlobals

__all__ = [
    "FUNCTIONS",
    "ControlFrame",
    "ControlKind",
    "Discovery",
    "DiscoverySink",
    "Effect",
    "MethodSpec",
    "Occurrence",
    "OccurrenceId",
    "PriorGlobals",
    "Site",
    "tool_name",
]
