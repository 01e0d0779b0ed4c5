"""The evaluator: the exact value of an expression, computed in the Host, or ``NotKnown``.

Discovery asks it for a call's arguments before the Guest runs. It applies CPython's own
operators, builtins and methods to plain values only, after bounds are checked, so a value
it returns is the one the Guest will compute. It knows nothing of capabilities or
occurrences: names come in as an environment, ``UNKNOWN`` where the value is not known.

Modules, each one job: ``_evaluator`` (the entry points and their contract), ``_walker``
(one handler per AST node type), ``_budget`` (values, limits and the meter), ``_sizes``
(result sizes estimated before amplifying work), ``_builtins``, ``_methods`` and
``_operators`` (the whitelisted operations), ``_free_names`` (the names an expression
reads) and ``_unknown`` (the ``UNKNOWN`` sentinel).
"""

from ._budget import Limits as Limits
from ._budget import truth as truth
from ._builtins import BUILTINS as BUILTINS
from ._builtins import TYPE_NAMES as TYPE_NAMES
from ._evaluator import evaluate as evaluate
from ._evaluator import evaluate_call_arguments as evaluate_call_arguments
from ._free_names import bound_names as bound_names
from ._free_names import child_nodes as child_nodes
from ._free_names import free_names as free_names
from ._free_names import walk as walk
from ._unknown import UNKNOWN as UNKNOWN

__all__ = [
    "BUILTINS",
    "TYPE_NAMES",
    "UNKNOWN",
    "Limits",
    "bound_names",
    "child_nodes",
    "evaluate",
    "evaluate_call_arguments",
    "free_names",
    "truth",
    "walk",
]
