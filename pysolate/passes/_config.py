"""Which passes a Host runs: all off by default (see docs/passes.md for the measurements)."""

from __future__ import annotations

from dataclasses import dataclass

from ._batch import BatchPolicy
from ._framework import SourcePass
from ._projection import ProjectionPushdown
from ._scalar import PureScalarCSE, PureScalarFold


@dataclass(frozen=True, slots=True)
class PassConfig:
    """The passes of a speculating run (``Host(passes=...)``); the sequential reference
    ``run_source(speculate=False)`` never runs any.

    Source passes run in the order below, each on the previous one's derived source.
    """

    projection_pushdown: bool = False
    """``capability_projection_pushdown`` (changes receipts at pushed-down sites, by law)."""
    pure_scalar_fold: bool = False
    pure_scalar_cse: bool = False
    batch_fusion: BatchPolicy | None = None
    """``capability_batch_fusion`` with these bounds; None leaves it off."""

    def source_passes(self) -> list[SourcePass]:
        chosen: list[SourcePass] = []
        if self.projection_pushdown:
            chosen.append(ProjectionPushdown())
        if self.pure_scalar_fold:
            chosen.append(PureScalarFold())
        if self.pure_scalar_cse:
            chosen.append(PureScalarCSE())
        return chosen
