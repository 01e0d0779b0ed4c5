"""The oracle bound (benchmarks/oracle.py) lets a call start when its text is final.

A call whose own statement cannot repeat, skip or rebind it is final at its closing
parenthesis (top level or in a block); one in a comprehension is not (its names are the
comprehension's only once its ``for`` has streamed), and waits for its statement.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from bench_tools import tool_specs  # noqa: E402
from oracle import compute  # noqa: E402

from pysolate.streams import Chunk  # noqa: E402


def _available(chunks: list[tuple[float, str]]) -> list[float]:
    return [
        c.complete_at for c in compute([Chunk(t, text) for t, text in chunks], tool_specs()).calls
    ]


def test_a_top_level_call_is_available_when_its_paren_streamed() -> None:
    chunks = [(0.0, 'a = kb.get(key="alpha"'), (0.1, ")"), (0.5, "\n"), (0.6, "b = 1\n")]
    assert _available(chunks) == [0.1]


def test_a_call_in_an_if_body_is_available_at_its_paren() -> None:
    chunks = [
        (0.0, "if True:\n"),
        (0.1, '    a = kb.get(key="alpha")'),
        (0.4, "\n"),
        (0.9, "b = 1\n"),
    ]
    assert _available(chunks) == [0.1]


def test_a_comprehension_call_waits_for_its_statement() -> None:
    chunks = [(0.0, "r = [kb.get(key=k)"), (0.2, ' for k in ["alpha"]]'), (0.3, "\n")]
    assert _available(chunks) == [0.3]
