"""The side-by-side Guest benchmark's parser (benchmarks/guest_side_by_side.py), on fixed text."""

from __future__ import annotations

from types import ModuleType

from benchmark_module import load_benchmark


def load() -> ModuleType:
    return load_benchmark("guest_side_by_side")


OUTPUT = """[landlock] mechanisms: a, b
  landlock fork     start-up (to ready)     median    6.79 ms

side by side (medians of 20 interleaved starts per mode; targets: start <= 3 ms)
  mode               start ms  x bare  CPU ms Guest ms  Host ms  PSS MiB  run ms  call µs  Host µs
  namespaces fork       19.57    2.05   14.90    11.79     3.11     4.18    3.35    103.9     77.4
  landlock fork          6.79    0.71   10.71     7.72     2.99     2.52    2.35    126.7     84.4
"""


def test_rows_reads_every_mode_of_the_side_by_side_table_and_nothing_above_it() -> None:
    found = load().rows(OUTPUT)
    assert found == {
        "namespaces fork": [19.57, 2.05, 14.90, 11.79, 3.11, 4.18, 3.35],
        "landlock fork": [6.79, 0.71, 10.71, 7.72, 2.99, 2.52, 2.35],
    }


def test_rows_of_an_output_without_the_table_is_empty() -> None:
    assert load().rows("[landlock] mechanisms: a\n") == {}
