"""Discovery: which capability calls the accepted statements will make, and with what.

A small abstract interpreter of the program's top-level code that never runs anything: it
binds names to what the evaluator can compute, reports each ``Occurrence`` (one arrival
at a call site) with its dependencies and effect to a ``DiscoverySink``, and reports the
arguments once the results they read arrive. The values it produces (``Occurrence``,
``Site``, ``Effect``, ...) are what the scheduler builds its graph from.

``Discovery`` is one class built in layers, each a module with one job, each layer using
only the ones below it (a hook a higher layer provides is declared where it is called):
``_effects`` (state, results, and how knowledge is lost) ← ``_occurrences`` (a capability
call becomes an occurrence) ← ``_expressions`` (the walk over an expression) ←
``_functions`` and ``_comprehensions`` (what expressions expand) ← ``_flow`` (compound
statements) ← ``_discovery`` (simple statements, dispatch, the rules as a whole).
Beside it: ``_bindings`` and ``_scopes`` (what a name holds, what a write touches),
``_control`` (contexts, branches and bounds), ``_model``, ``_effect`` and ``_prior`` (the
values it exchanges), ``_provisional`` (unfinished statements, on a timeline of their own).
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
from ._provisional import ProvisionalDiscovery as ProvisionalDiscovery
from ._provisional import provisional_generation as provisional_generation

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
    "ProvisionalDiscovery",
    "Site",
    "provisional_generation",
    "tool_name",
]
