"""The source side of Pysolate: pure Python, no I/O, no event loop.

Three parts, each a sub-package, importing only downwards:

- ``parser``: fence extraction and streaming prefix parsing (text in, statements out);
- ``discovery``: which capability calls the accepted statements make (occurrences);
- ``evaluator``: the exact, bounded value of a call's arguments, computed in the Host.

``discovery`` uses ``evaluator``; ``parser`` and ``evaluator`` use neither. What all three
share sits here: the exceptions (``_exceptions``), the plain-data codec (``plain``, also
the only module the Guest imports) and call identity (``_callkey``).
"""

from . import depth as depth
from . import plain as plain
from ._callkey import KEY_INLINE_CHARS as KEY_INLINE_CHARS
from ._callkey import CallKey as CallKey
from ._callkey import KeyPiece as KeyPiece
from ._callkey import argument_text as argument_text
from ._callkey import canonical as canonical
from ._callkey import canonical_arguments as canonical_arguments
from ._exceptions import NotKnown as NotKnown
from ._exceptions import OccurrencesError as OccurrencesError
from ._exceptions import SealError as SealError
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
from .discovery import ProvisionalDiscovery as ProvisionalDiscovery
from .discovery import Site as Site
from .discovery import provisional_generation as provisional_generation
from .discovery import tool_name as tool_name
from .evaluator import UNKNOWN as UNKNOWN
from .evaluator import Limits as Limits
from .evaluator import bound_names as bound_names
from .evaluator import evaluate as evaluate
from .evaluator import evaluate_call_arguments as evaluate_call_arguments
from .evaluator import free_names as free_names
from .parser import FenceExtractor as FenceExtractor
from .parser import ParserStatistics as ParserStatistics
from .parser import Pending as Pending
from .parser import PrefixParser as PrefixParser
from .parser import Snapshot as Snapshot
from .plain import MAX_INT_DIGITS as MAX_INT_DIGITS
from .plain import NotPlain as NotPlain
from .plain import Uncrossable as Uncrossable
from .plain import check_plain as check_plain
from .plain import fresh_copy as fresh_copy

__all__ = [
    "FUNCTIONS",
    "KEY_INLINE_CHARS",
    "MAX_INT_DIGITS",
    "UNKNOWN",
    "CallKey",
    "ControlFrame",
    "ControlKind",
    "Discovery",
    "DiscoverySink",
    "Effect",
    "FenceExtractor",
    "KeyPiece",
    "Limits",
    "MethodSpec",
    "NotKnown",
    "NotPlain",
    "Occurrence",
    "OccurrenceId",
    "OccurrencesError",
    "ParserStatistics",
    "Pending",
    "PrefixParser",
    "PriorGlobals",
    "ProvisionalDiscovery",
    "SealError",
    "Site",
    "Snapshot",
    "Uncrossable",
    "argument_text",
    "bound_names",
    "canonical",
    "canonical_arguments",
    "check_plain",
    "depth",
    "evaluate",
    "evaluate_call_arguments",
    "free_names",
    "fresh_copy",
    "plain",
    "provisional_generation",
    "tool_name",
]
