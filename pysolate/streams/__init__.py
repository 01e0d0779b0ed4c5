"""Streams: code formats, SDK adapters, recording and replay, synthetic streams."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._adapters import StreamShapeError as StreamShapeError
    from ._adapters import cut_reason as cut_reason
    from ._adapters import event_text as event_text
    from ._adapters import text_chunks as text_chunks
    from ._errors import NoCodeBlock as NoCodeBlock
    from ._errors import StreamCut as StreamCut
    from ._errors import StreamError as StreamError
    from ._errors import StreamTimeout as StreamTimeout
    from ._errors import ToolArgumentsError as ToolArgumentsError
    from ._events import blocking_events as blocking_events
    from ._formats import Code as Code
    from ._formats import MarkdownCode as MarkdownCode
    from ._formats import ToolCallCode as ToolCallCode
    from ._formats import code_format as code_format
    from ._formats import format_from_json as format_from_json
    from ._formats import format_to_json as format_to_json
    from ._json_argument import ArgumentDecoder as ArgumentDecoder
    from ._reader import DEFAULT_DEADLINE as DEFAULT_DEADLINE
    from ._reader import DEFAULT_IDLE_TIMEOUT as DEFAULT_IDLE_TIMEOUT
    from ._reader import CodedStream as CodedStream
    from ._reader import CodeReader as CodeReader
    from ._reader import decode_program as decode_program
    from ._recording import Chunk as Chunk
    from ._recording import Recording as Recording
    from ._recording import RecordingError as RecordingError
    from ._recording import RecordingHeader as RecordingHeader
    from ._recording import play as play
    from ._recording import read_recording as read_recording
    from ._recording import record as record
    from ._recording import replay as replay
    from ._recording import replay_recording as replay_recording
    from ._recording import write_recording as write_recording
    from ._synthetic import source_to_stream as source_to_stream
    from ._synthetic import tokenize_like_a_model as tokenize_like_a_model
    from ._tool_calls import ToolCallSelector as ToolCallSelector
    from ._tool_calls import tool_arguments as tool_arguments

__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_IDLE_TIMEOUT",
    "ArgumentDecoder",
    "Chunk",
    "Code",
    "CodeReader",
    "CodedStream",
    "MarkdownCode",
    "NoCodeBlock",
    "Recording",
    "RecordingError",
    "RecordingHeader",
    "StreamCut",
    "StreamError",
    "StreamShapeError",
    "StreamTimeout",
    "ToolArgumentsError",
    "ToolCallCode",
    "ToolCallSelector",
    "blocking_events",
    "code_format",
    "cut_reason",
    "decode_program",
    "event_text",
    "format_from_json",
    "format_to_json",
    "play",
    "read_recording",
    "record",
    "replay",
    "replay_recording",
    "source_to_stream",
    "text_chunks",
    "tokenize_like_a_model",
    "tool_arguments",
    "write_recording",
]

if not TYPE_CHECKING:  # each name is imported at its first use (``pysolate._lazy``)
    from .._lazy import attach

    __getattr__, __dir__ = attach(__name__, __all__)
