"""A run's clock and receipts, and the bytes they hold (the base of ``RunScope``).

Every Guest call leaves one receipt (``CallRecord``), timed on the run's clock (looked up
once, at ``start``: the loop's own, ``_clock``). Receipts are recorded as their fields and
built when read (``calls``), all at once: a frozen dataclass of 17 fields costs a few µs to
build between two Guest round trips (cold caches), a fraction of that in a batch; the
values are the same objects either way, and nothing else holds them.

What the run holds (``_holding``) is weighed as it is recorded: its receipts as kept, and
each workspace branch's content as of the last call that may have written it; past the
run's ``max_bytes`` the call raises ``LimitExceeded`` (``GuestLimits.max_host_bytes``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import anyio

from occurrences import CallKey, Effect, MethodSpec, tool_name

from .._backend import loop_clock
from .._guest_api import ErrorInfo, LimitExceeded, ToolFailure
from .._report._result import CallOutcome, CallRecord, Served
from ._crossing import plain_or_repr
from ._execute import BoundCall, Registration, scope_class, spec_or_none
from ._holding import HOST_BYTES_LIMIT, RECEIPT_BYTES, SMALL_KEY_CHARS, held, held_arguments, weight

SCALARS = frozenset({type(None), bool, int, float, str})
"""Exact immutable result types: ``fresh_copy`` returns them as they are (without its call)."""

WRITES = frozenset(effect for effect in Effect if effect.may_write)
"""The effects whose calls count in their capability's epoch (``Effect.may_write``, as a
set: the property costs ten times the lookup, on every call)."""


class Receipts:
    """One run's clock and receipts (see the module docstring)."""

    def __init__(
        self,
        registrations: Mapping[str, Registration],
        targets: Mapping[str, object],
        max_bytes: int | None,
    ) -> None:
        self._registrations = registrations
        self._targets = targets
        self._calls: list[CallRecord] = []  # receipts built so far (``calls``)
        self._recorded: list[tuple[object, ...]] = []  # recorded, not built yet: fields in order
        self.max_bytes = max_bytes
        self._held = 0
        self._branch_bytes: dict[str, int] = {
            name: target.held_bytes()
            for name, target in targets.items()
            if hasattr(target, "held_bytes")
        }
        self._branch_total = sum(self._branch_bytes.values())
        self._t0: float | None = None  # anyio.current_time() at the first call or start()
        # the same clock, looked up at start()
        self._clock: Callable[[], float] = anyio.current_time
        # the backend's own class, after start()
        self._new_scope: Callable[[], anyio.CancelScope] = anyio.CancelScope

    def start(self) -> None:
        """Start the run's clock (receipt times are relative to it)."""
        self._clock = loop_clock()
        self._new_scope = scope_class()
        self._t0 = self._clock()

    @property
    def started_at(self) -> float:
        """``anyio.current_time()`` when the run's clock started."""
        if self._t0 is None:
            self.start()
        assert self._t0 is not None
        return self._t0

    @property
    def calls(self) -> tuple[CallRecord, ...]:
        """The receipts of the run's calls so far, in program order."""
        recorded = self._recorded
        if recorded:
            self._calls.extend([CallRecord(*fields) for fields in recorded])  # type: ignore[arg-type]
            recorded.clear()
        return tuple(self._calls)

    def _now(self) -> float:
        if self._t0 is None:
            self.start()
        assert self._t0 is not None
        return self._clock() - self._t0

    def _record(
        self,
        capability: str,
        method: str,
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
        call: BoundCall | None,
        key: CallKey | None,
        outcome: CallOutcome,
        result: object,
        failure: ToolFailure | None,
        started: float,
        *,
        lane: Served = "direct",
        observation_id: int | None = None,
        shared_from: str | None = None,
    ) -> None:
        if call is not None:
            # A bound call's values are the broker's own copies, made for this receipt.
            spec: MethodSpec | None = call.spec
            plain_args: object = args
            plain_kwargs: object = dict(kwargs)
        else:
            spec = spec_or_none(self._registrations.get(capability), method)
            plain_args, plain_kwargs = plain_or_repr(args), plain_or_repr(dict(kwargs))
        text = None if key is None else key.arguments
        if text is not None and len(text) <= SMALL_KEY_CHARS and '["#"' not in text:
            size = 3 * len(
                text
            )  # small arguments (no digest in the key): no copy to spare, weighed by their text
        else:
            plain_args, plain_kwargs, size = held_arguments(plain_args, plain_kwargs)  # type: ignore[arg-type]
            size += 0 if text is None else len(text)
        if result is None or (type(result) in SCALARS and type(result) is not str):
            size += 24
        else:
            result, result_size = held(result)
            size += result_size
        if failure is not None:
            size += weight(failure.message)
        self._held += size + RECEIPT_BYTES
        t0 = self._t0
        assert t0 is not None  # every receipt follows its call's ``_now()``, which set it
        recorded = self._recorded
        recorded.append(
            (  # CallRecord's fields, in order (built by ``calls``)
                len(self._calls) + len(recorded),
                capability,
                method,
                plain_args,
                plain_kwargs,
                spec.effect if spec else None,
                spec.version if spec else None,
                outcome,
                result,
                None if failure is None else ErrorInfo(failure.type_name, failure.message, None),
                started,
                self._clock() - t0,
                key,
                None,  # occurrence_id
                lane,
                observation_id,
                0.0,  # budget_charged
                shared_from,
            )
        )
        branches = self._branch_bytes
        if branches and capability in branches and spec is not None and spec.effect in WRITES:
            branches[capability] = self._targets[capability].held_bytes()  # type: ignore[attr-defined]
            self._branch_total = sum(branches.values())
        if self.max_bytes is not None and self._held + self._branch_total > self.max_bytes:
            raise LimitExceeded(
                HOST_BYTES_LIMIT,
                f"the run holds more than {self.max_bytes} bytes in the Host (receipts and workspace branches),"
                f" at {tool_name(capability, method)}",
            )

    @property
    def held_bytes(self) -> int:
        """Bytes the run holds in the Host (``_holding``): receipts as kept, branches."""
        return self._held + self._branch_total
