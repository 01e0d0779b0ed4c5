"""The source side of Pysolate: pure Python, no I/O, no event loop.

Streaming prefix parsing, fence extraction, occurrence discovery and the exact argument
evaluator, and the values they produce.
"""

from ._callkey import CallKey as CallKey
from ._callkey import canonical as canonical
from ._callkey import canonical_arguments as canonical_arguments
from ._discovery import Discovery as Discovery
from ._discovery import DiscoverySink as DiscoverySink
from ._effect import Effect as Effect
from ._evaluator import UNKNOWN as UNKNOWN
from ._evaluator import Limits as Limits
from ._evaluator import evaluate as evaluate
from ._evaluator import evaluate_call_arguments as evaluate_call_arguments
from ._evaluator import free_names as free_names
from ._exceptions import NotKnown as NotKnown
from ._exceptions import OccurrencesError as OccurrencesError
from ._exceptions import SealError as SealError
from ._exceptions import StreamError as StreamError
from ._fences import FenceExtractor as FenceExtractor
from ._model import FUNCTIONS as FUNCTIONS
from ._model import ControlFrame as ControlFrame
from ._model import ControlKind as ControlKind
from ._model import MethodSpec as MethodSpec
from ._model import Occurrence as Occurrence
from ._model import OccurrenceId as OccurrenceId
from ._model import Site as Site
from ._model import tool_name as tool_name
from ._parser import ParserStatistics as ParserStatistics
from ._parser import PrefixParser as PrefixParser
from ._plain import MAX_INT_DIGITS as MAX_INT_DIGITS
from ._plain import NotPlain as NotPlain
from ._plain import Uncrossable as Uncrossable
from ._plain import check_plain as check_plain
from ._plain import fresh_copy as fresh_copy
from ._prior import PriorGlobals as PriorGlobals
from ._snapshot import Snapshot as Snapshot

__all__ = [
    "FUNCTIONS",
    "MAX_INT_DIGITS",
    "UNKNOWN",
    "CallKey",
    "ControlFrame",
    "ControlKind",
    "Discovery",
    "DiscoverySink",
    "Effect",
    "FenceExtractor",
    "Limits",
    "MethodSpec",
    "NotKnown",
    "NotPlain",
    "Occurrence",
    "OccurrenceId",
    "OccurrencesError",
    "ParserStatistics",
    "PrefixParser",
    "PriorGlobals",
    "SealError",
    "Site",
    "Snapshot",
    "StreamError",
    "Uncrossable",
    "canonical",
    "canonical_arguments",
    "check_plain",
    "evaluate",
    "evaluate_call_arguments",
    "free_names",
    "fresh_copy",
    "tool_name",
]
