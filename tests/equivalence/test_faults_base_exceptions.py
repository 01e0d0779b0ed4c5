"""Fault catalogue, BaseException from tools (issue 13, item 2).

A tool raising ``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``, its own
``CancelledError`` or any other ``BaseException`` fails *the call*: the program sees a
``ToolError`` naming it, in both lanes and both Guests, and early work that raises one and
is never claimed is discarded like any other. Only the caller's own cancellation
propagates, after the lane is stopped and the Guest killed; the run's trace then accounts
for every call that started.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import anyio
import pytest

from pysolate import LanePolicy
from pysolate._guest_api import GuestFactory

from .faulty import both_ways, guests, odd_host
from .harness import TimedChunks, children
from .oddities import KINDS

pytestmark = pytest.mark.anyio

NAMES = {
    "exit": ("SystemExit", "3"),
    "interrupt": ("KeyboardInterrupt", ""),
    "generator": ("GeneratorExit", "closed"),
    "cancel": ("CancelledError", "mine"),
    "base": ("Crash", "deep"),
}

EAGER = LanePolicy(allow_discardable=True)
"""Start early even what an unresolved branch guards (so unreached work runs early)."""


@pytest.mark.parametrize("factory", guests())
@pytest.mark.parametrize("method", ["crash", "crash_sync"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_base_exception_is_a_tool_error_at_the_call(
    factory: GuestFactory, method: str, kind: str
) -> None:
    source = (
        f"try:\n    odd.{method}({kind!r})\nexcept Exception as e:\n"
        "    out = (type(e).__name__, e.type_name, str(e))\nprint('still running')\nout\n"
    )
    both = await both_ways(source, factory)
    name, message = NAMES[kind]
    for result in (both.reference, both.streamed):
        assert (result.status, result.stdout) == ("ok", "still running\n")
        assert result.value == ("ToolError", name, f"{name}: {message}")
        assert [(c.outcome, c.error.type if c.error else None) for c in result.calls] == [
            ("error", name)
        ]
    assert both.streamed.calls[0].lane == "claimed"  # the early lane held it as a failure


@pytest.mark.parametrize("factory", guests())
async def test_an_uncaught_base_exception_from_a_tool_ends_the_program_not_the_host(
    factory: GuestFactory,
) -> None:
    both = await both_ways("x = 1\nodd.crash('exit')\n", factory)
    assert both.streamed.status == "error"
    assert both.streamed.error is not None
    assert (both.streamed.error.type, both.streamed.error.message, both.streamed.error.line) == (
        "ToolError",
        "SystemExit: 3",
        2,
    )


@pytest.mark.parametrize("factory", guests())
@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "try:\n    q = [odd.echo(1), 1 / 0, odd.crash('{kind}')]\nexcept ZeroDivisionError:\n    q = 'caught'\nq\n",
            id="after_a_caught_error",
        ),
        # The condition stays unknown while the slow read runs, so the guarded call starts.
        pytest.param(
            "if odd.slow(0.3) < 0:\n    odd.crash('{kind}')\n'fine'\n", id="untaken_branch"
        ),
        pytest.param(
            "odd.crash_sync('{kind}') if odd.slow(0.3) < 0 else 'fine'\n", id="untaken_sync"
        ),
    ],
)
@pytest.mark.parametrize("kind", KINDS)
async def test_unreached_early_work_that_raises_is_discarded(
    factory: GuestFactory, source: str, kind: str
) -> None:
    both = await both_ways(source.format(kind=kind), factory, policy=EAGER)
    assert both.streamed.status == "ok"
    assert any(call[0].startswith("crash") for call in both.streamed_odd.calls)  # it did run early
    crashed = [o for o in both.streamed.observations if o.method.startswith("crash")]
    assert [o.disposition for o in crashed] == ["orphaned"]
    assert all(not c.method.startswith("crash") for c in both.streamed.calls)


# -- the caller's cancellation ------------------------------------------------------------------


@dataclass(slots=True)
class _Span:
    """An ``ObservationTrace`` (and ``ClaimTrace``) that keeps what it is told."""

    name: str
    lane: str
    outcome: str | None = None  # "ok", an error type, or "interrupted" (a BaseException)
    disposition: str | None = None

    def activated(self) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()

    def completed(self, *, error: object = None, result: object = None) -> None:
        if error is None:
            self.outcome = "ok"
        elif isinstance(error, Exception):
            self.outcome = type(error).__name__
        else:
            self.outcome = "interrupted"

    def settled(self, disposition: object) -> None:
        self.disposition = str(disposition)

    def ended(self, **kwargs: object) -> None:
        pass


@dataclass(slots=True)
class _Run:
    """A ``RunTrace`` that keeps what it is told (the interface in ``pysolate.tracing``)."""

    spans: list[_Span] = field(default_factory=list)
    end: tuple[str, Mapping[str, int] | None, str | None] | None = None

    def snapshot_accepted(self, **kwargs: object) -> None:
        pass

    def sealed(self, *args: object, **kwargs: object) -> None:
        pass

    def observation_started(
        self, capability: str, method: str, *, lane: str, **kwargs: object
    ) -> _Span:
        span = _Span(f"{capability}.{method}", lane)
        self.spans.append(span)
        return span

    def claimed(self, *args: object, **kwargs: object) -> _Span:
        return _Span("claim", "claim")

    def ended(
        self, status: str, *, counts: Mapping[str, int] | None = None, error_type: str | None = None
    ) -> None:
        self.end = (status, counts, error_type)


@dataclass(slots=True)
class _Recorder:
    runs: list[_Run] = field(default_factory=list)

    def run_started(self, **kwargs: object) -> _Run:
        self.runs.append(_Run())
        return self.runs[-1]


@contextlib.contextmanager
def _no_new_children() -> Iterator[None]:
    before = set(children())
    yield
    assert set(children()) <= before, "a Guest process outlived the cancelled run"


@pytest.mark.parametrize("factory", guests())
async def test_the_callers_cancellation_propagates_and_the_trace_accounts_for_every_call(
    factory: GuestFactory,
) -> None:
    """Cancelled while the program waits on a slow early read, with more early work done:
    ``CancelledError`` is not wrapped, the Guest is gone, and the run's trace ended
    ``aborted`` with a span per started call, each settled, and counts that say so (the
    waiting call has an ``unknown`` receipt: it counts as logical)."""
    recorder = _Recorder()
    host, odd = odd_host(factory, instrument=recorder)
    source = "a = odd.echo('x')\nb = odd.stall('s')\nodd.slow(30.0)\n"
    with _no_new_children():
        with anyio.move_on_after(1.5) as scope:
            await host.run_stream(TimedChunks(source, (5,), (0.0,)), policy=EAGER)
        odd.release.set()
    assert scope.cancelled_caught  # it propagated out of run_stream as cancellation
    (run,) = recorder.runs
    assert run.end is not None
    status, counts, error_type = run.end
    assert (status, error_type) == ("aborted", "CancelledError")
    assert counts is not None
    assert (counts["logical"], counts["physical"], counts["cancelled"]) == (3, 3, 1)
    assert sorted((s.name, s.disposition) for s in run.spans) == [
        ("odd.echo", "claimed"),
        ("odd.slow", "cancelled"),
        ("odd.stall", "claimed"),
    ]


@pytest.mark.parametrize("factory", guests())
async def test_a_cancelled_sequential_run_accounts_for_its_interrupted_call(
    factory: GuestFactory,
) -> None:
    recorder = _Recorder()
    host, _ = odd_host(factory, instrument=recorder)
    with _no_new_children():
        with anyio.move_on_after(1.0) as scope:
            await host.run_source("odd.echo(1)\nodd.slow(30.0)\n", speculate=False)
    assert scope.cancelled_caught
    (run,) = recorder.runs
    assert run.end is not None and run.end[0] == "aborted"
    assert run.end[1] == {"logical": 2, "physical": 2}
    assert [(s.name, s.lane, s.outcome) for s in run.spans] == [
        ("odd.echo", "formal", "ok"),
        ("odd.slow", "formal", "interrupted"),
    ]
