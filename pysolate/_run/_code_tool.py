"""``CodeTool``: the code tool a raw SDK offers its model, and the replies that answer it.

With OpenAI or Anthropic used directly, the caller owns the conversation: it must offer the
model a tool whose argument is the program (its description saying what the program may
call), and answer each call with what the run gave. Both are generated here from the Host's
registrations, so they never drift from what the Guest exposes:

- the definition, in each SDK's request shape: ``openai_chat()`` (a
  ``ChatCompletionFunctionToolParam``), ``openai_responses()`` (a ``FunctionToolParam``),
  ``anthropic()`` (a ``ToolParam``): the tool's name, a description listing every callable
  with its signature, effect and docstring, and the JSON schema of the ``code`` argument;
- the reply (``pysolate._run._code_replies``): from the SDK's whole reply and the ``RunResult``,
  the messages that continue the conversation, in the SDK's param shapes, carrying
  ``result_text(result)`` (``pysolate._report._result_text``), the text the framework
  integrations tell their models too.

The agent loop is then the SDK's own (docs/integrations.md; ``examples/*_agent_loop.py``).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Final, Protocol

from occurrences import Effect, tool_name

from .._report._result import RunResult
from .._report._result_text import check_result
from ..streams import ToolCallCode
from ._code_replies import anthropic_reply, openai_chat_reply, openai_responses_reply

if TYPE_CHECKING:
    from .._calls._broker import Registration

INTRO: Final = (
    "Run a Python program in an isolated interpreter (standard library only; no files, "
    "network or subprocesses). The value of the last expression is returned together with "
    "everything the program printed."
)
"""How the tool's description starts; what the program can call follows it."""

FRESH: Final = "Each call runs in a fresh interpreter: nothing persists between calls."
PERSISTENT: Final = "Variables, functions and imports persist from one call to the next."

CODE_DESCRIPTION: Final = "The complete Python program to run."
"""The description of the ``code`` argument in its JSON schema."""

NOT_RUN: Final = (
    "Not run: only the first {tool} call of a reply runs. Send this program again in a "
    "call of its own if it is still needed."
)
"""The answer to every further call of the code tool in one reply."""

EFFECTS: Final = {
    Effect.PURE: "pure: same arguments, same result, no side effects",
    Effect.IMMUTABLE_READ: "reads data that does not change during the run",
    Effect.LIVE_READ: "reads live data",
    Effect.WRITE: "changes something",
    Effect.UNKNOWN: "may change something",
}
"""How each effect is told to the model next to a callable's signature."""


class Registry(Protocol):
    """What a ``CodeTool`` reads of a Host (``Host`` and ``SyncHost`` both are one)."""

    def capabilities(self) -> dict[str, list[str]]: ...

    def registration(self, name: str) -> Registration: ...


class _Written:
    """An annotation kept as the text it was written as (``from __future__ import
    annotations``): shown as that text, not as a quoted string."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _shown(signature: inspect.Signature) -> str:
    """``signature`` as the program would call it, string annotations unquoted."""

    def plain(annotation: object) -> object:
        return _Written(annotation) if isinstance(annotation, str) else annotation

    parameters = [p.replace(annotation=plain(p.annotation)) for p in signature.parameters.values()]
    return str(
        signature.replace(
            parameters=parameters, return_annotation=plain(signature.return_annotation)
        )
    )


def describe_callables(host: Registry) -> str:
    """Every callable a program on ``host`` has, one entry each: ``- docs.search(query:
    str) -> list[str]  [pure: ...]`` and its docstring, indented; sorted by name."""
    entries = []
    for capability_name in sorted(host.capabilities()):
        registration = host.registration(capability_name)
        for method_name, method in sorted(registration.methods.items()):
            name = tool_name(capability_name, method_name)
            entry = f"- {name}{_shown(method.signature)}  [{EFFECTS[method.effect]}]"
            doc = inspect.getdoc(getattr(registration.obj, method_name, None))
            if doc:
                entry += "\n" + "\n".join(
                    f"    {line}" if line else "" for line in doc.splitlines()
                )
            entries.append(entry)
    return "\n".join(entries)


class CodeTool:
    """The code tool of ``host`` for a raw SDK: its definition and the replies to its calls.

    ``name`` is the tool's name (``run_code``), ``argument`` the name of its one parameter
    (``code``); ``persistent=True`` says in the description that variables persist between
    calls (for turns of a session). ``intro`` replaces the description's first paragraph.
    Definitions are built when asked, so they list what is registered then.
    """

    def __init__(
        self,
        host: Registry,
        *,
        name: str = "run_code",
        argument: str = "code",
        persistent: bool = False,
        intro: str = INTRO,
    ) -> None:
        self.code = ToolCallCode(name, argument)
        """What to pass as ``run_stream(..., code=...)``: this tool's argument is the program."""
        self.host = host
        self.persistent = persistent
        self.intro = intro

    @property
    def name(self) -> str:
        return self.code.tool

    @property
    def argument(self) -> str:
        return self.code.argument

    # -- definitions ------------------------------------------------------------------------

    def description(self) -> str:
        """What the model reads about the tool: ``intro``, whether state persists, and
        every callable (``describe_callables``)."""
        text = f"{self.intro} {PERSISTENT if self.persistent else FRESH}"
        listing = describe_callables(self.host)
        if listing:
            text += f"\n\nThe program can call these (no import needed):\n{listing}"
        return text

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments: one required string, the program."""
        return {
            "type": "object",
            "properties": {self.argument: {"type": "string", "description": CODE_DESCRIPTION}},
            "required": [self.argument],
            "additionalProperties": False,
        }

    def openai_chat(self) -> dict[str, Any]:
        """The tool for OpenAI Chat Completions (``tools=[tool.openai_chat()]``), shaped as
        ``openai.types.chat.ChatCompletionFunctionToolParam``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description(),
                "parameters": self.parameters(),
            },
        }

    def openai_responses(self) -> dict[str, Any]:
        """The tool for the OpenAI Responses API, shaped as
        ``openai.types.responses.FunctionToolParam`` (``strict`` off: the schema is already
        closed, and strict mode is the caller's choice)."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description(),
            "parameters": self.parameters(),
            "strict": False,
        }

    def anthropic(self) -> dict[str, Any]:
        """The tool for Anthropic Messages, shaped as ``anthropic.types.ToolParam``."""
        return {
            "name": self.name,
            "description": self.description(),
            "input_schema": self.parameters(),
        }

    # -- replies (pysolate._run._code_replies) ---------------------------------------------------

    def openai_chat_reply(self, completion: object, result: RunResult) -> list[dict[str, Any]]:
        """The messages that continue a Chat Completions conversation after ``completion``
        (the whole reply: ``stream.get_final_completion()``): the assistant's message,
        then a ``tool`` message for each call of this tool (the first carries
        ``result_text(result)``, any further one says it was not run). ``[]`` when the
        reply calls no code tool: the model is done. Calls of other tools are the caller's
        to answer (append their ``tool`` messages after these).

        Raises ``TypeError`` for a forgotten ``await`` (a coroutine as ``result``) and
        ``ValueError`` when ``result`` ran other code than the reply's first call.
        """
        return openai_chat_reply(self.code, self.not_run_text(), completion, check_result(result))

    def openai_responses_reply(self, response: object, result: RunResult) -> list[dict[str, Any]]:
        """The input items that continue a Responses conversation after ``response`` (the
        whole reply: ``stream.get_final_response()``): a ``function_call_output`` for each
        call of this tool, to send with ``previous_response_id=response.id``. ``[]`` when
        the reply calls no code tool. Errors as ``openai_chat_reply``.
        """
        return openai_responses_reply(
            self.code, self.not_run_text(), response, check_result(result)
        )

    def anthropic_reply(self, message: object, result: RunResult) -> list[dict[str, Any]]:
        """The messages that continue a Messages conversation after ``message`` (the whole
        reply: ``stream.get_final_message()``): the assistant's turn as it was, then a user
        turn with a ``tool_result`` for each ``tool_use`` of this tool (``is_error`` unless
        the run was ``ok``). ``[]`` when the reply uses no code tool. Results for other
        tools go into the same user turn (its ``content``). Errors as ``openai_chat_reply``.
        """
        return anthropic_reply(self.code, self.not_run_text(), message, check_result(result))

    def not_run_text(self) -> str:
        """The answer to a further call of this tool in one reply (only the first runs)."""
        return NOT_RUN.format(tool=self.name)
