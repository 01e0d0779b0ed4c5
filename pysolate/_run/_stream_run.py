"""The program of one run: read from the stream as it grows, or given whole; sealed once.

While chunks arrive (``pysolate.streams.CodeReader``) the prefix parser accepts complete
statements, and each one grows the run's event graph (``Discovery``), so the lane can start
ready, eligible calls while the model still streams. When the program is complete (the end
of a raw stream, the closing fence of the markdown block, the end of the code tool's call)
the source is sealed (``PrefixParser.close`` and ``seal``, which checks it as the Guest's compiler would). A syntax error, no code
block or bad tool arguments make the run ``rejected``; a stream that raises, is cut or
stalls makes it ``aborted`` (``Unsealed``): either way the Guest never receives a source.

A source given whole (``run_source``) is sealed before anything starts (``seal_whole``:
parsed and compiled once, and nothing of a source that does not compile ever runs), then
discovered in one step. A run that does not speculate discovers nothing.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc

from occurrences import Pending, PrefixParser, SealError, Snapshot
from occurrences.depth import LIMIT_ERRORS, compile_tree, parse
from scheduler import EventGraph, SpeculativeLane

from .._calls._registry import Registry
from .._guest_api import ErrorInfo
from .._guest_errors import AGENT_FILENAME
from .._report._result import RunStatus
from ..passes import PassConfig, PassOutcome, apply_source_passes, speculative_statements
from ..streams import CodeReader, StreamError
from ..tracing import source_hash
from ..tracing.events import EventStream, TokensArrived
from ._pace import Pacer

Lens = Callable[[Sequence[ast.stmt]], Sequence[ast.stmt]]
"""How discovery reads accepted statements (as the pushdown pass will derive them)."""


class Unsealed(Exception):
    """The program has no sealed source (cut, failed, no code block, does not compile)."""

    def __init__(self, status: RunStatus, error: ErrorInfo) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error


def seal(source: str, tree: ast.Module | None = None) -> ast.Module:
    """Check that ``source`` compiles as a whole and return its tree; raise ``SealError``
    when it does not.

    ``compile``, not only ``ast.parse``: some errors (``return`` outside a function, a
    top-level ``await``, ``too many statically nested blocks``) are only found by the
    compiler, and the Guest must never start on a source it would reject. ``tree``, when
    given, is ``source`` already parsed (the prefix parser's statements equal
    ``ast.parse``'s), so it is not parsed again.

    A source nested past CPython's limits (``RecursionError``, the parser's
    ``MemoryError``) is rejected with CPython's class and message, at the same depth for
    every caller (``occurrences.depth``): ``run_source``, ``run_stream`` and a
    session draw the line in the same place.
    """
    try:
        if tree is None:
            tree = parse(source, AGENT_FILENAME)
        compile_tree(source, tree, AGENT_FILENAME, "exec")
        return tree
    except SyntaxError as exc:
        raise SealError.from_syntax_error(exc)  # noqa: B904 (it sets __cause__ itself)
    except LIMIT_ERRORS as exc:
        raise SealError.from_limit(exc) from exc
    except ValueError as exc:  # NUL bytes, lone surrogates: reported as the prefix parser does
        raise SealError(str(exc)) from exc


def rejection(exc: SealError) -> ErrorInfo:
    """The error a rejected run reports: the compiler's own class name, message and line."""
    return ErrorInfo(type(exc.__cause__ or exc).__name__, exc.msg, exc.lineno)


def seal_whole(source: str) -> Snapshot:
    """The sealed snapshot of a complete ``source``; ``Unsealed`` (rejected) if it does not
    compile."""
    try:
        tree = seal(source)
    except SealError as exc:
        raise Unsealed(RunStatus.REJECTED, rejection(exc)) from exc
    return Snapshot(tree.body, source)


@dataclass(slots=True, eq=False)
class Discovery:
    """Grows one run's graph from the statements the program is read as (``grow`` off: the
    run does not speculate, and the statements are only counted); tells the run's ``stream``
    what was accepted and when (seconds since ``t0``)."""

    graph: EventGraph
    lane: SpeculativeLane
    stream: EventStream
    t0: float
    lens: Lens | None
    grow: bool

    async def discover(self, statements: Sequence[ast.stmt], pacer: Pacer | None = None) -> None:
        """One statement at a time, the loop let run between them once a slice is spent."""
        if not self.grow:
            return
        lens, graph, lane = self.lens, self.graph, self.lane
        pacer = pacer or Pacer()
        for statement in lens(statements) if lens is not None else statements:
            graph.add_statements([statement])
            lane.pump()
            await pacer.pace()

    def sealed(self, final: Snapshot, end: float) -> None:
        self.stream.sealed(
            source_hash(final.source), statements=len(final.statements), chars=final.end, at=end
        )

    async def whole(self, final: Snapshot) -> None:
        """Discover a source given whole (already sealed, ``seal_whole``)."""
        now, count = anyio.current_time() - self.t0, len(final.statements)
        self.stream.snapshot_accepted(
            statements=count, new_statements=count, chars=final.end, at=now
        )
        self.stream.report(TokensArrived(now, now))
        await self.discover(final.statements)
        self.sealed(final, now)


async def read_stream(
    reader: CodeReader, discovery: Discovery, task_group: anyio.abc.TaskGroup
) -> Snapshot:
    """Read the program, growing the graph as statements are accepted; return the seal.
    The stream's watchdog runs in ``task_group`` (the run's), so the seal need not wait
    for it to return."""
    parser = PrefixParser()
    first: float | None = None
    pacer = Pacer()
    stream, t0, lens = discovery.stream, discovery.t0, discovery.lens

    async def accept(snapshot: Snapshot | None) -> None:
        if snapshot is not None:
            new = snapshot.new_statements
            await discovery.discover(new, pacer)
            total = snapshot.first_new + len(new)  # len(statements) would materialize them all
            at = anyio.current_time() - t0
            stream.snapshot_accepted(
                statements=total, new_statements=len(new), chars=snapshot.end, at=at
            )
        if not discovery.grow:
            return
        # The statement still streaming: its complete parts, for discovery only (under the
        # pushdown lens a call is final only with the projection after its ")").
        found = parser.pending(at_paren=lens is None)
        if found is not None:
            if lens is not None:
                found = Pending(list(lens(found.statements)), found.limit)
            discovery.graph.add_provisional(found)
            discovery.lane.pump()

    try:
        async with reader.watched(task_group):
            while (text := await reader.read()) is not None:
                pacer.resumed()
                if first is None and text:
                    first = anyio.current_time() - t0
                await accept(parser.feed(text))
    except StreamError as exc:
        raise Unsealed(
            RunStatus(exc.status), ErrorInfo(type(exc).__name__, str(exc), None)
        ) from exc
    except Exception as exc:
        raise Unsealed(
            RunStatus.ABORTED, ErrorInfo(type(exc).__name__, f"the stream failed: {exc}", None)
        ) from exc
    end = anyio.current_time() - t0
    stream.report(TokensArrived(first if first is not None else end, end))
    try:
        final = parser.close()
        # Some errors only the compiler finds (``return`` outside a function); the Guest
        # must never receive a source it would reject.
        seal(final.source, tree_of(final))
    except SealError as exc:
        raise Unsealed(RunStatus.REJECTED, rejection(exc)) from exc
    await discovery.discover(final.new_statements, pacer)
    discovery.sealed(final, end)
    return final


def lens_of(registry: Registry, passes: PassConfig | None) -> Lens | None:
    """How discovery reads accepted statements: as the pushdown pass will derive them, or
    (None) as they are."""
    if passes is None or not passes.projection_pushdown:
        return None
    declarations = {name: reg.methods for name, reg in registry.registrations.items()}
    return functools.partial(speculative_statements, capabilities=declarations)


def tree_of(final: Snapshot) -> ast.Module:
    """The sealed source's module, from the statements the prefix parser already built."""
    return ast.Module(body=list(final.statements), type_ignores=[])


def apply_passes(
    registry: Registry, config: PassConfig, final: Snapshot
) -> tuple[str, tuple[PassOutcome, ...]]:
    """The program the Guest runs: the sealed source or its derived form (``pysolate.passes``)."""
    passes = config.source_passes()
    if not passes:
        return final.source, ()
    declarations = {name: reg.methods for name, reg in registry.registrations.items()}
    derived = apply_source_passes(final.source, tree_of(final), passes, declarations)
    return derived.source, derived.outcomes
