"""Streams: SDK adapters, recording and replay, synthetic streams from source files."""

from ._adapters import StreamShapeError as StreamShapeError
from ._adapters import event_text as event_text
from ._adapters import text_chunks as text_chunks
from ._recording import Chunk as Chunk
from ._recording import Recording as Recording
from ._recording import RecordingError as RecordingError
from ._recording import RecordingHeader as RecordingHeader
from ._recording import play as play
from ._recording import read_recording as read_recording
from ._recording import record as record
from ._recording import replay as replay
from ._recording import write_recording as write_recording
from ._synthetic import source_to_stream as source_to_stream
from ._synthetic import tokenize_like_a_model as tokenize_like_a_model

__all__ = [
    "Chunk",
    "Recording",
    "RecordingError",
    "RecordingHeader",
    "StreamShapeError",
    "event_text",
    "play",
    "read_recording",
    "record",
    "replay",
    "source_to_stream",
    "text_chunks",
    "tokenize_like_a_model",
    "write_recording",
]
