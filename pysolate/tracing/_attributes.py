"""Span names and attribute keys, as plain string constants.

The OpenTelemetry GenAI semantic conventions are still in Development status and the
``opentelemetry.semconv._incubating`` module that spells them is explicitly unstable, so
the keys Pysolate emits are pinned here instead of imported. Project-specific attributes
live in the ``pysolate.*`` namespace.
"""

from __future__ import annotations

from typing import Final

# Span names. GenAI conventions: "{gen_ai.operation.name} {target}".
RUN: Final = "pysolate.run"
"""The run span. Not a GenAI operation: running a code action is neither an agent invocation
(no model is called) nor one more ``execute_tool`` (the framework that received the model's
``run_code`` call already has that span, and tool counts must not double)."""
EXECUTE_TOOL: Final = "execute_tool"
SHARED: Final = "shared"
"""Name prefix of a call served by another run's physical call (the Host's observation
table): not an ``execute_tool``, which that run's span already is."""
CLAIM: Final = "claim"
"""Name prefix of a logical Guest call served by early work (not an ``execute_tool``: the
physical execution already has that span, and tool-call counts must not double)."""

# GenAI attributes.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
ERROR_TYPE: Final = "error.type"
ERROR_TYPE_OTHER: Final = "_OTHER"
"""``error.type`` fallback when the failure has no class name."""

# Pysolate attributes.
RUN_ID: Final = "pysolate.run_id"
SESSION_ID: Final = "pysolate.session_id"
"""On the run span of a session's turn: the session's id (``Session.id``)."""
TURN: Final = "pysolate.turn"
"""On the run span of a session's turn: its number in the session, from 1."""
SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.38.0"
"""The semantic-conventions version the GenAI attributes follow (latest experimental)."""
SOURCE_HASH: Final = "pysolate.source_hash"
STATUS: Final = "pysolate.status"
ISOLATION: Final = "pysolate.isolation"
"""On the run span: the isolation level its Guest runs at (docs/isolation.md)."""
COUNT_PREFIX: Final = "pysolate.count."
"""Run counts become ``pysolate.count.<name>`` (logical, physical, claimed, ...)."""
LANE: Final = "pysolate.lane"
EFFECT: Final = "pysolate.effect"
DISPOSITION: Final = "pysolate.disposition"
CALL_KEY: Final = "pysolate.call_key"
CAPABILITY: Final = "pysolate.capability"
METHOD: Final = "pysolate.method"
CLAIMED_OBSERVATION: Final = "pysolate.claimed_observation"
SHARED_FROM: Final = "pysolate.shared_from"
"""On a ``shared`` span: the id of the run whose physical call served it."""
SERVED_BY: Final = "pysolate.served_by"
"""On a ``shared`` span: the ``gen_ai.tool.call.id`` of that physical call."""
"""On a claim span: the ``gen_ai.tool.call.id`` of the physical observation it claimed."""

# Events on the run span.
SNAPSHOT_EVENT: Final = "pysolate.snapshot"
SEAL_EVENT: Final = "pysolate.seal"
SNAPSHOT_STATEMENTS: Final = "pysolate.snapshot.statements"
SNAPSHOT_NEW_STATEMENTS: Final = "pysolate.snapshot.new_statements"
SNAPSHOT_CHARS: Final = "pysolate.snapshot.chars"

# Link attributes.
LINK_RELATION: Final = "pysolate.link"
LINK_CLAIMS: Final = "claims"
LINK_SHARED_FROM: Final = "shared_from"
