"""Code formats: where in a model's stream the program is.

``run_stream(events, code=...)`` takes one of:

- ``"raw"``: the streamed text is the program;
- ``"markdown"`` or ``MarkdownCode(block=..., bare=...)``: one ```python block of a markdown
  reply (the first by default);
- ``ToolCallCode(tool, argument="code")``: the string argument of the first call of tool
  ``tool`` (the JSON arguments are decoded while they stream).

``code_format`` turns what a caller passed into one of these, raising ``ValueError`` for
anything else, at the call. ``format_to_json``/``format_from_json`` are the form recordings
keep in their header (``"code"``), so a replay runs the way the live stream did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

Raw: TypeAlias = Literal["raw"]


@dataclass(frozen=True, slots=True)
class MarkdownCode:
    """The program is a Python fenced block of a markdown reply.

    ``block``: which Python block, counting from 0 (the default, the first), or ``"last"``.
    With an index the run seals at that block's closing fence, so prose after it does not
    delay the result. ``"last"`` can only be known at the end of the stream: the block is
    buffered, nothing is speculated while the stream arrives, and the run seals when the
    stream ends. ``bare=True`` also takes fences without an info string as Python.
    """

    block: int | Literal["last"] = 0
    bare: bool = False

    def __post_init__(self) -> None:
        if self.block != "last" and not (
            isinstance(self.block, int) and not isinstance(self.block, bool) and self.block >= 0
        ):
            raise ValueError(
                f"MarkdownCode(block=...) is an index from 0 or 'last', not {self.block!r}"
            )


@dataclass(frozen=True, slots=True)
class ToolCallCode:
    """The program is the string argument ``argument`` of the first call of tool ``tool``.

    The argument is decoded from the tool call's JSON argument deltas as they stream
    (OpenAI chat ``tool_calls``, OpenAI Responses ``function_call_arguments``, Anthropic
    ``input_json_delta``; ``str`` chunks are taken as the JSON text itself, as a recording
    holds it). The run seals when that call's arguments end.
    """

    tool: str
    argument: str = "code"

    def __post_init__(self) -> None:
        for name in ("tool", "argument"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"ToolCallCode({name}=...) must be a non-empty str, not {value!r}")


Format: TypeAlias = Raw | MarkdownCode | ToolCallCode
"""A normalized code format."""

Code: TypeAlias = Literal["raw", "markdown"] | MarkdownCode | ToolCallCode
"""What ``run_stream(code=...)`` accepts."""


def code_format(code: object) -> Format:
    """Normalize ``code``; ``ValueError`` for anything that is not a code format."""
    if code == "raw" and isinstance(code, str):
        return "raw"
    if code == "markdown" and isinstance(code, str):
        return MarkdownCode()
    if isinstance(code, MarkdownCode | ToolCallCode):
        return code
    raise ValueError(
        f"unknown code format {code!r}: expected 'raw', 'markdown', MarkdownCode(...) or "
        "ToolCallCode(tool)"
    )


def format_to_json(code: Format) -> str | dict[str, Any]:
    """The recording-header form: ``"raw"``, ``"markdown"`` or an object with ``format``."""
    if isinstance(code, ToolCallCode):
        return {"format": "tool_call", "tool": code.tool, "argument": code.argument}
    if isinstance(code, MarkdownCode):
        if code == MarkdownCode():
            return "markdown"
        return {"format": "markdown", "block": code.block, "bare": code.bare}
    return "raw"


def format_from_json(value: object) -> Format:
    """Read the header form back; ``ValueError`` (naming the value) if it is not one."""
    if isinstance(value, dict):
        kind = value.get("format")
        rest = {k: v for k, v in value.items() if k != "format"}
        try:
            if kind == "tool_call":
                return ToolCallCode(**rest)
            if kind == "markdown":
                return MarkdownCode(**rest)
        except TypeError as exc:
            raise ValueError(f"bad code format {value!r}: {exc}") from exc
        raise ValueError(f"unknown code format {value!r}")
    return code_format(value)
