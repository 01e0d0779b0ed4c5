"""Correctness-gated passes (issue 9): exact rewrites, each admitted only under a law.

Source passes rewrite the sealed source before the Guest runs it; the lane pass changes
only how early physical calls are made. Every pass either applies (``Applied``: hashes,
law, versions relied on) or leaves the program alone (``NotApplicable`` with a reason);
the run report lists them (``RunReport.passes``). See docs/passes.md.
"""

from .._tools._capability import BatchLaw as BatchLaw
from .._tools._capability import ProjectionLaw as ProjectionLaw
from ._batch import BatchFusion as BatchFusion
from ._batch import BatchPolicy as BatchPolicy
from ._batch import BatchStatistics as BatchStatistics
from ._config import PassConfig as PassConfig
from ._framework import Applied as Applied
from ._framework import NotApplicable as NotApplicable
from ._framework import PassOutcome as PassOutcome
from ._framework import Rewrite as Rewrite
from ._framework import SourcePass as SourcePass
from ._framework import apply_source_passes as apply_source_passes
from ._projection import ProjectionPushdown as ProjectionPushdown
from ._projection import speculative_statements as speculative_statements
from ._scalar import PureScalarCSE as PureScalarCSE
from ._scalar import PureScalarFold as PureScalarFold

__all__ = [
    "Applied",
    "BatchFusion",
    "BatchLaw",
    "BatchPolicy",
    "BatchStatistics",
    "NotApplicable",
    "PassConfig",
    "PassOutcome",
    "ProjectionLaw",
    "ProjectionPushdown",
    "PureScalarCSE",
    "PureScalarFold",
    "Rewrite",
    "SourcePass",
    "apply_source_passes",
    "speculative_statements",
]
