"""The source side of Pysolate: pure Python, no I/O, no event loop.

Three parts, each a sub-package, importing only downwards:

- ``parser``: fence extraction and streaming prefix parsing (text in, statements out);
- ``discovery``: which capability calls the accepted statements make (occurrences);
- ``evaluator``: the exact, bounded value of a call's arguments, computed in the Host.

``discovery`` uses ``evaluator``; ``parser`` and ``evaluator`` use neither. What all three
share sits here: the exceptions (``_exceptions``), the plain-data codec (``_plain``, also
the only module the Guest imports) and call identity (``_callkey``).
"""

from ._callkey import CallKey as CallKey
from ._callkey import canonical as canonical
from ._callkey import canonical_arguments as canonical_arguments
from ._exceptions import NotKnown as NotKnown
from ._exceptions import OccurrencesError as OccurrencesError
from ._exceptions import SealError as SealError
from ._exceptions import StreamError as StreamError
from ._plain import MAX_INT_DIGITS as MAX_INT_DIGITS
from ._plain import NotPlain as NotPlain
from ._plain import Uncrossable as Uncrossable
from ._plain import check_plain as check_plain
from ._plain import fresh_copy as fresh_copy
from .discovery import FUNCTIONS as FUNCTIONS
from .discovery import ControlFrame as ControlFrame
from .discovery import ControlKind as ControlKind
from .discovery import Discovery as Discovery
from .discovery import DiscoverySink as DiscoverySink
from .discovery import Effect as Effect
from .discovery import MethodSpec as MethodSpec
from .discovery import Occurrence as Occurrence
from .discovery import OccurrenceId as OccurrenceId
from .discovery import PriorGlobals as PriorGlobals
from .discovery import Site as Site
from .discovery import tool_name as tool_name
from .evaluator import UNKNOWN as UNKNOWN
from .evaluator import Limits as Limits
from .evaluator import evaluate as evaluate
from .evaluator import evaluate_call_arguments as evaluate_call_arguments
from .evaluator import free_names as free_names
from .parser import FenceExtractor as FenceExtractor
from .parser import ParserStatistics as ParserStatistics
from .parser import PrefixParser as PrefixParser
from .parser import Snapshot as Snapshot

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
