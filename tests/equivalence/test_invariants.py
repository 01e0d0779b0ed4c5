"""``pysolate.testing.check_invariants`` rejects each broken invariant.

A real speculating run gives a result that passes; each test breaks one invariant of it
(``dataclasses.replace``) and expects the checker to say which.
"""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from pysolate import RunResult
from pysolate.testing import check_invariants

from .harness import QUIET, TimedChunks, build_host

SOURCE = "a = docs.search('alpha')\nb = docs.search('alpha')\nn = clock.now()\nif n > 5:\n    docs.search('gamma')\n[a, b, n]\n"


@pytest.fixture(scope="module")
def run() -> tuple[RunResult, dict[str, dict[str, object]]]:
    async def main() -> tuple[RunResult, dict[str, dict[str, object]]]:
        host, _ = build_host(dataclasses.replace(QUIET, pauses=(0.01,)))
        result = await host.run_stream(TimedChunks(SOURCE, (6,), (0.01,)), policy=QUIET.policy)
        return result, host.method_specs()  # type: ignore[return-value]

    return anyio.run(main)


def test_a_real_run_passes(run: tuple[RunResult, dict[str, dict[str, object]]]) -> None:
    result, specs = run
    check_invariants(result, specs)  # type: ignore[arg-type]
    assert {o.disposition for o in result.observations if o.lane == "speculative"} == {
        "claimed",
        "orphaned",
    }


def _early(result: RunResult, disposition: str) -> int:
    return next(i for i, o in enumerate(result.observations) if o.disposition == disposition)


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        pytest.param(
            lambda r: dataclasses.replace(r, calls=r.calls[::-1]), "program order", id="order"
        ),
        pytest.param(
            lambda r: dataclasses.replace(r, report=dataclasses.replace(r.report, logical=9)),
            "logical",
            id="logical",
        ),
        pytest.param(
            lambda r: dataclasses.replace(r, report=dataclasses.replace(r.report, physical=99)),
            "physical",
            id="physical",
        ),
        pytest.param(
            lambda r: dataclasses.replace(r, report=dataclasses.replace(r.report, orphaned=0)),
            "dispositions",
            id="counts",
        ),
        pytest.param(
            lambda r: dataclasses.replace(
                r,
                observations=tuple(
                    dataclasses.replace(o, disposition=None) if i == _early(r, "orphaned") else o
                    for i, o in enumerate(r.observations)
                ),
            ),
            "early observation",
            id="no_disposition",
        ),
        pytest.param(
            lambda r: dataclasses.replace(
                r,
                observations=tuple(
                    dataclasses.replace(o, claims=0) if i == _early(r, "claimed") else o
                    for i, o in enumerate(r.observations)
                ),
            ),
            "claim count",
            id="claims",
        ),
        pytest.param(
            lambda r: dataclasses.replace(
                r,
                calls=tuple(
                    dataclasses.replace(c, observation_id=999) if c.lane == "claimed" else c
                    for c in r.calls
                ),
            ),
            "unknown observation",
            id="receipt_without_observation",
        ),
    ],
)
def test_each_broken_invariant_is_caught(
    run: tuple[RunResult, dict[str, dict[str, object]]], break_it: object, message: str
) -> None:
    result, specs = run
    with pytest.raises(AssertionError, match=message):
        check_invariants(break_it(result), specs)  # type: ignore[operator,arg-type]


def test_an_early_observation_of_an_unsafe_method_is_caught(
    run: tuple[RunResult, dict[str, dict[str, object]]],
) -> None:
    result, specs = run
    index = _early(result, "orphaned")
    unsafe = dataclasses.replace(result.observations[index], capability="clock", method="now")
    broken = dataclasses.replace(
        result,
        observations=(*result.observations[:index], unsafe, *result.observations[index + 1 :]),
    )
    with pytest.raises(AssertionError, match=r"clock\.now"):
        check_invariants(broken, specs)  # type: ignore[arg-type]
