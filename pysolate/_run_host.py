"""What a run needs of its Host: the one seam that keeps the import graph one-way.

The Host (``_host``) knows the streamed run (``_stream_run``) and sessions (``_session``);
they know only this protocol, never the ``Host`` class, so each can be read (and type
checked) without the rest, and nothing imports back into ``_host``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from occurrences import CallKey, MethodSpec
    from scheduler import Probe

    from ._broker import BoundCall, Registration, RunScope
    from ._conversion import Encoder
    from ._guest_api import GuestFactory, GuestLimits, GuestOutcome
    from ._result import RunReport, RunResult
    from ._sharing import HostSharing
    from ._threads import WorkerThreads
    from .passes import PassConfig
    from .tracing import RunTrace


class RunHost(Protocol):
    """The Host as a run sees it (``pysolate.Host`` implements it)."""

    limits: GuestLimits
    passes: PassConfig | None
    call_timeout: float
    threads: WorkerThreads
    encode: Encoder | None
    sharing: HostSharing | None

    def trace_run(self, run_id: str | None = None) -> RunTrace: ...

    def capabilities(self) -> dict[str, list[str]]: ...

    def registration(self, name: str) -> Registration: ...

    def method_specs(self) -> dict[str, dict[str, MethodSpec]]: ...

    def bind(self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]) -> BoundCall: ...

    def root_key_for(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> CallKey | None: ...

    async def call_root(self, capability: str, method: str, call: BoundCall, *, probe: Probe | None = None) -> object: ...

    def new_scope(
        self, trace: RunTrace | None = None, targets: Mapping[str, object] | None = None, limits: GuestLimits | None = None
    ) -> RunScope: ...

    def guest_factory(self) -> GuestFactory: ...

    def setup_warnings(self) -> tuple[str, ...]: ...

    def result_from(self, outcome: GuestOutcome, scope: RunScope, report: RunReport) -> RunResult: ...


def new_run_id() -> str:
    """A run's id: 16 hex digits, unique across runs (traces, ``CallRecord.shared_from``)."""
    return uuid.uuid4().hex[:16]
