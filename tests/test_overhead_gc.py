"""benchmarks/overhead.py's GC meter: it counts collections and restores the thresholds."""

from __future__ import annotations

import gc

from benchmark_module import load_benchmark


def test_the_tuned_setting_holds_only_inside_and_collections_are_counted() -> None:
    overhead = load_benchmark("overhead")
    before = gc.get_threshold()
    with overhead.collector("tuned") as seen:
        assert gc.get_threshold() == overhead.TUNED_GC
        gc.collect()
    assert gc.get_threshold() == before
    assert seen.count >= 1 and seen.full >= 1
    assert 0 <= seen.longest <= seen.seconds
    with overhead.collector("default") as plain:
        assert gc.get_threshold() == before
        gc.collect()
    counted = plain.count
    assert counted >= 1
    gc.collect()
    assert plain.count == counted  # no callback left behind
