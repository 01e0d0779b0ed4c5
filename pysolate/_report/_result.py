"""What a run returns: its outcome, the receipts of its calls, and its report.

Results are built once per run, as frozen dataclasses; ``to_json()`` gives the JSON form
the CLI prints (plain values made JSON-safe: tuples as lists, bytes as ``{"$bytes": hex}``,
non-finite floats and non-str dict keys as their repr). A run's workspace branches travel
with the result (so the caller can commit or discard them) but not in its JSON.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from occurrences import CallKey, Effect, tool_name

from .._guest_api import ErrorInfo, Isolation
from ._timeline import Timeline

if TYPE_CHECKING:
    from .._workspace._workspace import Workspace


class RunStatus(enum.StrEnum):
    """How a run ended (compares equal to its string value)."""

    OK = "ok"
    """The program finished."""
    ERROR = "error"
    """The program raised; ``error`` says what and where."""
    REJECTED = "rejected"
    """The source does not compile; nothing ran."""
    ABORTED = "aborted"
    """The run was stopped: a limit, a crashed Guest, a protocol error, a cut stream."""


@dataclass(frozen=True, slots=True)
class Applied:
    """A pass changed the program (source passes) or its physical calls (lane passes)."""

    name: str
    original_hash: str
    derived_hash: str  # equal to ``original_hash`` for lane passes
    law: str
    versions: tuple[str, ...] = ()  # "capability.method@version" (and laws) relied on
    detail: str = ""

    applied: bool = field(default=True, init=False)


@dataclass(frozen=True, slots=True)
class NotApplicable:
    """A pass left the program alone, and why."""

    name: str
    reason: str

    applied: bool = field(default=False, init=False)


PassOutcome = Applied | NotApplicable
"""What one pass did to one run: ``Applied`` or ``NotApplicable`` (``RunReport.passes``)."""


@dataclass(frozen=True, slots=True)
class ValueDigest:
    """What a receipt holds in place of an argument or result past ``RECEIPT_INLINE_BYTES``.

    ``kind``: ``"s"`` (a str: ``sha256`` of its UTF-8, ``size`` its characters), ``"y"``
    (bytes: of its hex, ``size`` hex digits) or ``""`` (anything else: of its tagged text,
    ``size`` its characters) — the digest call keys use (``occurrences._callkey``). Equal
    values give equal digests, so receipts still compare exactly; the value itself is
    where the run put it (the tool got it, the program holds it, a workspace write is in
    the branch ``RunResult.workspaces`` returns).
    """

    kind: str
    size: int
    sha256: str


Served = Literal["direct", "claimed"]
"""How the program's call got its outcome (``CallRecord.lane``): its own physical call, or
an early observation it claimed. (The lane that *ran* an observation is ``tracing.Lane``.)"""

CallOutcome = Literal["ok", "error", "unknown"]


@dataclass(frozen=True, slots=True, init=False)
class CallRecord:
    """The receipt of one logical call the program made, in program order.

    ``outcome`` is ``unknown`` when a call that may write did not finish in time: it may or
    may not have taken effect, and it is never retried. An argument or a result past
    ``RECEIPT_INLINE_BYTES`` is held as its ``ValueDigest`` (``pysolate._calls._holding``). Times are seconds since the run
    started. ``occurrence_id``, ``lane``, ``observation_id`` and ``budget_charged`` are the
    speculation lane's; a call run by the broker itself is ``direct``. ``shared_from`` is the
    id of another run (``RunResult.run_id``) whose physical call served this one through the
    Host's observation table (``Host(share=...)``), None when the call was this run's own.

    A run makes one per call, so ``__init__`` is written out: it sets each slot through its
    descriptor (about half the frozen dataclass's generated ``__init__``, which calls
    ``object.__setattr__`` per field); its parameters are the fields, in order, with their
    defaults (``tests/pysolate/test_result_records.py`` holds the two together). The rest
    (equality, hash, repr, frozen, ``dataclasses.fields``/``replace``) is the dataclass's.
    """

    index: int
    capability: str
    method: str
    args: tuple[object, ...]
    kwargs: dict[str, object]
    effect: Effect | None  # None when the method does not exist
    version: str | None
    outcome: CallOutcome
    result: object = None
    error: ErrorInfo | None = None
    started: float = 0.0
    ended: float = 0.0
    key: CallKey | None = None  # None when the call could not be bound
    occurrence_id: str | None = None
    lane: Served = "direct"
    observation_id: int | None = None
    budget_charged: float = 0.0
    shared_from: str | None = None  # the run whose physical call served it (None: this run's own)

    def __init__(
        self,
        index: int,
        capability: str,
        method: str,
        args: tuple[object, ...],
        kwargs: dict[str, object],
        effect: Effect | None,
        version: str | None,
        outcome: CallOutcome,
        result: object = None,
        error: ErrorInfo | None = None,
        started: float = 0.0,
        ended: float = 0.0,
        key: CallKey | None = None,
        occurrence_id: str | None = None,
        lane: Served = "direct",
        observation_id: int | None = None,
        budget_charged: float = 0.0,
        shared_from: str | None = None,
    ) -> None:
        _set_index(self, index)
        _set_capability(self, capability)
        _set_method(self, method)
        _set_args(self, args)
        _set_kwargs(self, kwargs)
        _set_effect(self, effect)
        _set_version(self, version)
        _set_outcome(self, outcome)
        _set_result(self, result)
        _set_error(self, error)
        _set_started(self, started)
        _set_ended(self, ended)
        _set_key(self, key)
        _set_occurrence_id(self, occurrence_id)
        _set_lane(self, lane)
        _set_observation_id(self, observation_id)
        _set_budget_charged(self, budget_charged)
        _set_shared_from(self, shared_from)

    @property
    def duration(self) -> float:
        return self.ended - self.started

    @property
    def tool(self) -> str:
        """``docs.search``, or ``search`` for a function tool (capability ``FUNCTIONS``)."""
        return tool_name(self.capability, self.method)


(
    _set_index,
    _set_capability,
    _set_method,
    _set_args,
    _set_kwargs,
    _set_effect,
    _set_version,
    _set_outcome,
    _set_result,
    _set_error,
    _set_started,
    _set_ended,
    _set_key,
    _set_occurrence_id,
    _set_lane,
    _set_observation_id,
    _set_budget_charged,
    _set_shared_from,
) = (getattr(CallRecord, f.name).__set__ for f in dataclasses.fields(CallRecord))
"""Each slot's own setter (its member descriptor), which a frozen class's ``__setattr__`` does not guard."""


@dataclass(frozen=True, slots=True)
class ObservationRecord:
    """One physical execution of a tool in a run (early or formal) and how it ended.

    ``disposition`` is set for early (``speculative``) work only: ``claimed``,
    ``cancelled``, ``late``, ``orphaned`` or ``discarded``. ``physical`` is False for early
    work cancelled before it started (it never reached the tool). ``layer``: for early work
    on a speculative layer of the run's branch, the layer's version (a write: the version
    it made), else None. ``shared_from``: the run whose physical call served this one (then
    ``physical`` is False), None for this run's own. Times are seconds since the run started.
    """

    id: int
    capability: str
    method: str
    lane: Literal["speculative", "formal"]
    key: CallKey
    physical: bool
    claims: int
    disposition: str | None
    started: float | None
    ended: float | None
    layer: int | None = None
    shared_from: str | None = None


@dataclass(frozen=True, slots=True)
class RunReport:
    """Counts and timings of one run (speculation counts stay zero without speculation).

    ``logical``: calls the program made; ``physical``: real executions of capability
    methods; ``claimed``/``direct``: logical calls served by early work / run on demand;
    ``shared``: logical calls that shared a physical observation with another;
    ``cancelled``/``late``/``orphaned``: dispositions of early work nobody claimed;
    ``discarded``: early work on a speculative layer of the run's branch that was dropped
    (``scheduler._branches``); ``early_writes``: branch writes performed on such layers;
    ``reruns``: the program's reads that timed out while early calls of the same tool ran
    (they may have waited inside it behind them) and so ran again (each one more physical);
    ``host_shared``: logical calls served by a physical call another run made (receipts with
    ``shared_from``; the Host's observation table), which ``physical`` does not count.
    """

    logical: int = 0
    physical: int = 0
    claimed: int = 0
    direct: int = 0
    shared: int = 0
    cancelled: int = 0
    late: int = 0
    orphaned: int = 0
    discarded: int = 0
    early_writes: int = 0
    reruns: int = 0
    host_shared: int = 0
    wall_seconds: float = 0.0
    """From the start of the run to its result."""
    guest_seconds: float = 0.0
    """From handing the sealed source to the Guest to its outcome."""
    tool_seconds: float = 0.0
    """Sum of the logical calls' durations, as the program waited for them."""
    time_saved: float = 0.0
    """Tool latency the program did not wait for: over claims, the early call's duration
    minus the time the claim waited."""
    passes: tuple[PassOutcome, ...] = ()
    """What each enabled pass did (``pysolate.passes``): applied, or not and why."""
    setup_warnings: tuple[str, ...] = ()
    """Why this run's setup could not start anything early, with the fix: the text of each
    ``PysolateWarning`` that applies (issued once per Host or framework setup; recorded on
    every run it applies to). Empty when nothing stands in the way."""

    def counts(self) -> dict[str, int]:
        """The count fields by name (for traces and tables)."""
        return {name: getattr(self, name) for name in _COUNTS}


_COUNTS = (
    "logical",
    "physical",
    "claimed",
    "direct",
    "shared",
    "cancelled",
    "late",
    "orphaned",
    "discarded",
    "early_writes",
    "host_shared",
)


def sequential_report(
    calls: Sequence[CallRecord], physical: int, *, wall: float, guest: float, reruns: int = 0
) -> RunReport:
    """The report of a run without speculation (``run_source``, a session's sequential turn):
    every count comes from the program's own calls."""
    direct = claimed = 0
    durations: list[float] = []
    for c in calls:  # one pass (three generators cost a third of a µs per call)
        if c.lane == "direct":
            direct += 1
        elif c.lane == "claimed":
            claimed += 1
        durations.append(c.ended - c.started)  # ``duration``, without the property
    return RunReport(
        logical=len(calls),
        physical=physical,
        direct=direct,
        claimed=claimed,
        reruns=reruns,
        wall_seconds=wall,
        guest_seconds=guest,
        tool_seconds=sum(durations),  # the same sum, in the same order, as of the durations
    )


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of one run; see docs/quickstart.md."""

    status: RunStatus
    value: object = None
    stdout: str = ""
    error: ErrorInfo | None = None
    calls: tuple[CallRecord, ...] = ()
    report: RunReport = field(default_factory=RunReport)
    isolation: Isolation | None = None  # None when no Guest ran (rejected)
    guest_status: str | None = None  # the Guest's own status, finer than ``status``
    workspaces: dict[str, Workspace] = field(default_factory=dict, compare=False)
    """This run's open workspace branches by capability name: commit or discard them."""
    timeline: Timeline | None = field(default=None, compare=False)
    """When the stream, early work, the Guest and claims happened (``run_stream`` only)."""
    observations: tuple[ObservationRecord, ...] = field(default=(), compare=False)
    """Physical executions the claim table saw (``run_stream`` only; sequential runs keep
    one per receipt implicitly)."""
    source: str | None = None
    """The sealed source the run executed, exactly as the model wrote it (a source pass may
    have handed the Guest a derived form of it); None when nothing was sealed."""
    run_id: str | None = field(default=None, compare=False)
    """The run's id (its trace's ``pysolate.run_id``; other runs' receipts name it in
    ``shared_from``)."""

    def with_speculation(
        self, timeline: Timeline, observations: tuple[ObservationRecord, ...]
    ) -> RunResult:
        return dataclasses.replace(self, timeline=timeline, observations=observations)

    def to_json(self) -> dict[str, object]:
        """A JSON-safe dict of everything but ``workspaces``."""
        out = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("workspaces", "timeline")
        }
        return _jsonable(out)  # type: ignore[return-value]


def _jsonable(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        assert isinstance(value, float)
        return value if math.isfinite(value) else repr(value)
    if type(value) is bytes:
        assert isinstance(value, bytes)
        return {"$bytes": value.hex()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k if type(k) is str else repr(k): _jsonable(v) for k, v in value.items()}
    return repr(value)
