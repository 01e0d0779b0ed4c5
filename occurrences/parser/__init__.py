"""The parser: model text in, accepted top-level statements out, as the tokens arrive.

``FenceExtractor`` finds the Python block in a streamed reply; ``PrefixParser`` accepts
each top-level statement the moment it is certainly complete (``Snapshot``), and reads an
unfinished one provisionally (``_pending``). Pure text work: it knows nothing of
capabilities, discovery or values.
"""

from ._fences import FenceExtractor as FenceExtractor
from ._parser import ParserStatistics as ParserStatistics
from ._parser import PrefixParser as PrefixParser
from ._pending import Pending as Pending
from ._snapshot import Snapshot as Snapshot

__all__ = [
    "FenceExtractor",
    "ParserStatistics",
    "Pending",
    "PrefixParser",
    "Snapshot",
]
