"""Tracing: one small instrument interface, OpenTelemetry its implementation.

The Host calls the hooks of an ``Instrument`` (see ``_interface.py`` for the sequence);
``NULL_INSTRUMENT`` records nothing, ``OTelInstrument`` records GenAI-convention spans;
``GLOBAL_INSTRUMENT`` (a default ``Host()``'s) records them through the global provider.
``code_action(tool_call_id=..., conversation_id=...)`` tells runs what encloses them;
a session's turns carry ``current_session_turn()`` (its id and the turn's number).
"""

from . import _attributes as attributes
from ._context import CodeAction as CodeAction
from ._context import SessionTurn as SessionTurn
from ._context import code_action as code_action
from ._context import current_code_action as current_code_action
from ._context import current_session_turn as current_session_turn
from ._context import session_turn as session_turn
from ._interface import NO_RESULT as NO_RESULT
from ._interface import NULL_INSTRUMENT as NULL_INSTRUMENT
from ._interface import NULL_RUN as NULL_RUN
from ._interface import ClaimTrace as ClaimTrace
from ._interface import Disposition as Disposition
from ._interface import Instrument as Instrument
from ._interface import Lane as Lane
from ._interface import NullInstrument as NullInstrument
from ._interface import ObservationTrace as ObservationTrace
from ._interface import RunTrace as RunTrace
from ._interface import source_hash as source_hash
from ._otel import GLOBAL_INSTRUMENT as GLOBAL_INSTRUMENT
from ._otel import MAX_PAYLOAD_CHARS as MAX_PAYLOAD_CHARS
from ._otel import OTelInstrument as OTelInstrument
from ._otel import error_type as error_type

__all__ = [
    "GLOBAL_INSTRUMENT",
    "MAX_PAYLOAD_CHARS",
    "NO_RESULT",
    "NULL_INSTRUMENT",
    "NULL_RUN",
    "ClaimTrace",
    "CodeAction",
    "Disposition",
    "Instrument",
    "Lane",
    "NullInstrument",
    "OTelInstrument",
    "ObservationTrace",
    "RunTrace",
    "SessionTurn",
    "attributes",
    "code_action",
    "current_code_action",
    "current_session_turn",
    "error_type",
    "session_turn",
    "source_hash",
]
