"""The evaluator: the exact value of an expression, computed in the Host, or ``NotKnown``.

Discovery asks it for a call's arguments before the Guest runs. It applies CPython's own
operators, builtins and methods to plain values only, after bounds are checked, so a value
it returns is the one the Guest will compute. It knows nothing of capabilities or
occurrences: names come in as an environment, ``UNKNOWN`` where the value is not known.
"""

from ._evaluator import UNKNOWN as UNKNOWN
from ._evaluator import Limits as Limits
from ._evaluator import evaluate as evaluate
from ._evaluator import evaluate_call_arguments as evaluate_call_arguments
from ._evaluator import free_names as free_names

__all__ = ["UNKNOWN", "Limits", "evaluate", "evaluate_call_arguments", "free_names"]
