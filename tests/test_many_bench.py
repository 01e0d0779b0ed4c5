"""Smoke test of benchmarks/many.py (issue 40), scaled down: its variants are programs of
their own, a best-of-N set runs three ways with equal results and the bound on physical
calls, and the session retry is served by the rejected turn's running reads. Timings are
not asserted."""

from __future__ import annotations

import ast

import pytest
from benchmark_module import load_benchmark

pytestmark = pytest.mark.anyio


def test_every_variant_parses_differs_and_adds_its_own_searches() -> None:
    many = load_benchmark("many")
    for path in sorted(many.SCENARIO_DIR.glob("*.jsonl")):
        text = many.read_recording(path).text
        variants = [many.variant(text, i) for i in range(many.VARIANTS)]
        assert variants[0] == ast.unparse(ast.parse(text))
        assert len(set(variants)) == many.VARIANTS, path.stem
        assert all(f"variant {i} note 0" in v for i, v in enumerate(variants) if i)


async def test_a_scaled_best_of_n_set_shares_and_equals_each_run_alone() -> None:
    many = load_benchmark("many")
    plans = many.best_of_8_plans("issue5_four_reads", speed=20.0, n=3)
    row = await many.measure(
        "issue5_four_reads", many.scenario_host(0.05, "in-process"), plans, repeat=1
    )
    assert row.equal
    assert row.shared_physical <= row.bound < row.unshared_physical == row.logical
    assert "issue5_four_reads" in many.table([row])[-1]


async def test_the_retry_is_served_by_the_rejected_turns_running_reads() -> None:
    many = load_benchmark("many")
    rows, equal = await many.session_retry(
        0.5, "in-process", 8.0, 1
    )  # fetches of 0.75 s, the rest of the stream 0.1 s
    shared, unshared = rows
    assert equal and shared.statuses == ["ok", "rejected", "ok"]
    assert shared.retry_served >= 1 and shared.retry_physical < unshared.retry_physical
    assert shared.session_physical < unshared.session_physical
