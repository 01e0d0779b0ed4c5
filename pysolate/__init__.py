"""Pysolate: run LLM-written Python code actions while they stream, provably no differently.

See DESIGN.md for the correctness contract: a run is observationally equal to running the
sealed source sequentially.
"""

from occurrences import Effect as Effect

from ._guest_api import ErrorInfo as ErrorInfo
from ._guest_api import GuestLimits as GuestLimits
from ._guest_api import Isolation as Isolation
from ._guest_api import ToolFailure as ToolFailure

__all__ = [
    "Effect",
    "ErrorInfo",
    "GuestLimits",
    "Isolation",
    "ToolFailure",
]
