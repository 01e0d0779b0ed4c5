"""A Guest that runs any program as a coroutine in the event loop: its async twin.

Why: the in-process Guest runs the program in a worker thread, which neither trio's
``MockClock`` nor its seeded scheduler controls, so its interleavings cannot be replayed.
``twin_guest`` rewrites the program once (AST) so that every capability call becomes
``await __call__('cap', 'method', ...)``, every function the program defines becomes
``async def`` and every call of one is awaited, then compiles it with top-level ``await``
allowed and awaits it. The calls go through the same ``CallHandler`` as a real Guest's, so
the real prefix parser, graph, lane, broker and claims run; failures are rebuilt and lines
reported by the shared ``_guest_errors`` rules, under the agent's own line numbers.

It supports the programs ``programs.py`` writes (capabilities are only called, never passed
around); it is a test double, not a Guest.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import io
from collections.abc import Mapping, Sequence
from types import CodeType

from occurrences import NotPlain, check_plain, fresh_copy
from pysolate._calls._crossing import check_arguments
from pysolate._guest_api import (
    CallHandler,
    ErrorInfo,
    Guest,
    GuestFactory,
    GuestLimits,
    GuestOutcome,
    Isolation,
    ToolFailure,
)
from pysolate._guest_errors import (
    AGENT_FILENAME,
    error_line,
    rebuild_exception,
)

CALL = "__pysolate_call__"
"""The name the rewritten program calls capabilities through."""


class _Awaitify(ast.NodeTransformer):
    def __init__(self, capabilities: set[str], functions: set[str]) -> None:
        self.capabilities, self.functions = capabilities, functions

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        fields = {name: getattr(node, name) for name in node._fields}
        return ast.copy_location(ast.AsyncFunctionDef(**fields), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.capabilities
        ):
            call = ast.Call(
                func=ast.Name(CALL, ast.Load()),
                args=[ast.Constant(func.value.id), ast.Constant(func.attr), *node.args],
                keywords=node.keywords,
            )
            return ast.copy_location(ast.Await(ast.copy_location(call, node)), node)
        if isinstance(func, ast.Name) and func.id in self.functions:
            return ast.copy_location(ast.Await(node), node)
        return node


def compile_twin(source: str, capabilities: set[str]) -> tuple[CodeType, CodeType | None]:
    """(body, final expression or None) of the async twin, with the agent's line numbers."""
    tree = ast.parse(source, AGENT_FILENAME, "exec")
    functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    tree = ast.fix_missing_locations(_Awaitify(capabilities, functions).visit(tree))
    last: ast.expr | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop().value
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    body = compile(tree, AGENT_FILENAME, "exec", flags=flags, dont_inherit=True)
    if last is None:
        return body, None
    return body, compile(
        ast.Expression(last), AGENT_FILENAME, "eval", flags=flags, dont_inherit=True
    )


class TwinGuest:
    """Runs the async twin of the sealed source in the event loop (no thread)."""

    def __init__(self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits) -> None:
        self._capabilities = set(capabilities)
        self._limits = limits

    async def run(self, source: str, handler: CallHandler) -> GuestOutcome:
        output: list[str] = []
        calls = 0

        async def call(capability: str, method: str, *args: object, **kwargs: object) -> object:
            nonlocal calls
            check_arguments(capability, method, args, kwargs)
            calls += 1
            if calls > self._limits.max_calls:
                raise _CallLimit(f"the program made more than {self._limits.max_calls} calls")
            try:
                return await handler(capability, method, args, kwargs)
            except ToolFailure as failure:
                raise rebuild_exception(
                    failure.type_name, failure.message, failure.exc_args
                ) from None

        def print_(*values: object, sep: str | None = " ", end: str | None = "\n") -> None:
            buffer = io.StringIO()
            builtins.print(*values, sep=sep, end=end, file=buffer)
            output.append(buffer.getvalue())

        namespace: dict[str, object] = {
            "__name__": "__main__",
            "__builtins__": {**vars(builtins), "print": print_},
            CALL: call,
        }
        value: object = None
        try:
            body, final = compile_twin(source, self._capabilities)
            await _run(body, namespace)
            if final is not None:
                value = await _run(final, namespace)
        except _CallLimit as limit:
            return GuestOutcome(
                "limit",
                None,
                "".join(output),
                ErrorInfo("CallLimit", str(limit), None),
                Isolation("in_process"),
            )
        except Exception as exc:
            error = ErrorInfo(type(exc).__name__, str(exc), error_line(exc))
            return GuestOutcome("error", None, "".join(output), error, Isolation("in_process"))
        return GuestOutcome(
            "ok", _plain_or_repr(value), "".join(output), None, Isolation("in_process")
        )

    async def aclose(self) -> None:
        pass


class _CallLimit(BaseException):
    """Ends the program at its call limit (not catchable by ``except Exception``); the
    twin has no wall time, its clock being virtual, so this bounds an endless loop."""


async def _run(code: CodeType, namespace: dict[str, object]) -> object:
    result = eval(code, namespace)
    if inspect.iscoroutine(result):
        result = await result
    return result


def _plain_or_repr(value: object) -> object:
    try:
        check_plain(value)
    except NotPlain:
        return repr(value)
    return fresh_copy(value)


async def _start(capabilities: Mapping[str, Sequence[str]], limits: GuestLimits) -> Guest:
    return TwinGuest(capabilities, limits)


twin_guest: GuestFactory = _start
"""``Host(guest_factory=twin_guest)``: run programs as coroutines (schedule-controlled tests)."""
