"""The Host's reply to one Guest call: what every Guest transport sends back.

The local channel and the Ray link carry the same broker protocol, so they answer a call the
same way — the grant check, the handler, the plain-data result or the failure the program
will raise — from this one place, and a program sees the same error whichever Guest ran it.
"""

from __future__ import annotations

from collections.abc import Mapping

from occurrences.plain import INT_BOUND, NotPlain, to_tagged

from .._calls._crossing import DECODED, invalid_result
from .._guest_api import CallHandler, ToolFailure
from .._guest_errors import arguments_not_plain
from ._frames import Call, RefusedCall


def granted(call: Call | RefusedCall, grants: Mapping[str, frozenset[str]]) -> bool:
    """Whether the program was given ``call``'s method."""
    return call.method in grants.get(call.capability, ())


async def answer(
    call_id: int,
    call: Call | RefusedCall,
    grants: Mapping[str, frozenset[str]],
    handler: CallHandler,
) -> dict[str, object]:
    """The ``result`` or ``failure`` message for ``call`` (the handler runs only for a
    granted method whose arguments were not refused). Exceptions other than
    ``ToolFailure`` propagate (Host bugs).

    A call whose decoder made its arguments' tagged forms (``Call.tagged``) hands them to
    the broker with the arguments (``_crossing.DECODED``), which then does not walk the
    arguments again to key them.
    """
    if call.method not in grants.get(call.capability, ()):  # granted(), without its call
        message = f"{call.capability!r} has no method {call.method!r} granted to this program"
        return failure_message(call_id, ToolFailure("AttributeError", message))
    if type(call) is RefusedCall:
        refused = arguments_not_plain(call.capability, call.method, call.error)
        return failure_message(call_id, ToolFailure(type(refused).__name__, str(refused)))
    if call.tagged is not None:  # type: ignore[union-attr]
        return await _decoded(call_id, call, handler)  # type: ignore[arg-type]
    try:
        value = await handler(call.capability, call.method, call.args, call.kwargs)  # type: ignore[union-attr]
        if (
            type(value) is int and -INT_BOUND < value < INT_BOUND
        ):  # to_tagged's own int case, without its call
            return {"t": "result", "id": call_id, "value": ["i", str(value)]}
        return {"t": "result", "id": call_id, "value": to_tagged(value)}
    except ToolFailure as failure:
        return failure_message(call_id, failure)
    except NotPlain as exc:
        return failure_message(call_id, invalid_result(call.capability, call.method, exc))


async def _decoded(call_id: int, call: Call, handler: CallHandler) -> dict[str, object]:
    """``answer`` of a call whose tagged forms the decoder made, handed to the broker."""
    assert call.tagged is not None
    token = DECODED.set((call.args, call.kwargs, *call.tagged))
    try:
        value = await handler(call.capability, call.method, call.args, call.kwargs)
        return {"t": "result", "id": call_id, "value": to_tagged(value)}
    except ToolFailure as failure:
        return failure_message(call_id, failure)
    except NotPlain as exc:
        return failure_message(call_id, invalid_result(call.capability, call.method, exc))
    finally:
        DECODED.reset(token)


def failure_message(call_id: int, failure: ToolFailure) -> dict[str, object]:
    """The ``failure`` message; arguments that are not plain data become the message alone."""
    try:
        args = to_tagged(tuple(failure.exc_args))
    except NotPlain:
        args = to_tagged((failure.message,))
    return {
        "t": "failure",
        "id": call_id,
        "type": failure.type_name,
        "message": failure.message,
        "args": args,
    }
