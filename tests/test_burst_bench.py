"""benchmarks/burst.py's timeline: the samples binned into cores busy, loop wait and stamps."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark


def sample(
    t: float, busy: int, idle: int, system: int, loop: float, waited_ns: int, cgroup: float
) -> dict[str, object]:
    # /proc/stat's first line: user nice system idle iowait irq softirq steal (ticks)
    return {
        "t": t,
        "machine": [busy - system, 0, system, idle, 0, 0, 0, 0],
        "loop": loop,
        "sched": [0, waited_ns],
        "cgroup": [cgroup, 0.0, 0.0],
    }


def test_samples_are_binned_into_cores_and_stamps_counted_per_bin() -> None:
    burst = load_benchmark("burst")
    samples = [
        sample(10.0, 0, 0, 0, 0.0, 0, 0.0),
        sample(10.1, 10, 10, 5, 0.05, 0, 0.1),
        sample(10.2, 30, 10, 10, 0.10, 50_000_000, 0.3),  # closes the first bin (0.2 s)
        sample(10.3, 50, 10, 10, 0.20, 50_000_000, 0.35),  # the last, shorter bin
    ]
    recording = burst.Recording(
        10.0,
        samples,
        [(10.05, "fork asked"), (10.15, "fork asked"), (10.25, "ready")],
        [(10.01, 0.002), (10.21, 0.004)],
    )
    first, last = burst.rows(recording, 0.2, 2)
    assert first.start == pytest.approx(0.0) and last.start == pytest.approx(0.2)
    assert first.machine == pytest.approx(30 / 40 * 2)  # 30 busy of 40 ticks, 2 cores
    assert first.machine_system == pytest.approx(10 / 40 * 2)
    assert first.runs_cgroup == pytest.approx(0.3 / 0.2)
    assert first.loop == pytest.approx(0.5)
    assert first.loop_waiting == pytest.approx(0.25)
    assert first.lag_median_ms == pytest.approx(2.0)
    assert first.stamps["fork asked"] == 2 and first.stamps["ready"] == 0
    assert last.stamps["ready"] == 1 and last.stamps["fork asked"] == 0
    assert last.machine == pytest.approx(20 / 20 * 2) and last.loop_waiting == pytest.approx(0.0)
