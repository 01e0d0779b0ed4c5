"""Smoke test of benchmarks/passes.py: each scenario runs once, pass on and off agree.

Timings are not asserted; physical call counts are (they are what the pass promises).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.anyio

BENCHMARK = Path(__file__).resolve().parents[3] / "benchmarks" / "passes.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_passes", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_every_scenario_runs_and_the_pass_keeps_the_outcome() -> None:
    bench = load()
    measured = {s.name: await bench.measure(s, 1, "in-process") for s in bench.SCENARIOS}
    assert all(m.equal for m in measured.values())
    assert (
        measured["batch_fusion/loop"].physical_off,
        measured["batch_fusion/loop"].physical_on,
    ) == (16, 1)  # one batch: its members yield their lane slots to the sender
    assert measured["batch_fusion/loop-c16"].physical_on == 1
    assert measured["batch_fusion/serial"].physical_on == 1
    assert "n/a" in measured["batch_fusion/lone"].passes
    assert "applied" in measured["projection_pushdown"].passes
    assert "pure_scalar_fold:applied" in measured["pure_scalar_fold"].passes
    assert "pure_scalar_cse:applied" in measured["pure_scalar_cse"].passes
