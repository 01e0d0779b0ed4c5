"""Values cross exactly (issue 36, point 5): a float's sign, its NaN payload and ``-0.0``
reach a tool and a call key bit for bit, in both Guests and both lanes.

Before the fix the tagged form spelled every NaN ``"nan"``: the key of ``bits(-nan)``
equalled that of ``bits(nan)``, so an early result computed from ``-nan`` was claimed by a
call the subprocess Guest made with ``+nan`` — and the subprocess and in-process Guests
disagreed with each other.
"""

from __future__ import annotations

import math
import struct

import anyio
import pytest
from waiting import wait_until

from occurrences import canonical
from occurrences.plain import from_tagged, nan_text, to_tagged
from pysolate import Effect, Host, capability
from pysolate.testing import differences, in_process_guest

pytestmark = pytest.mark.anyio


def from_bits(hex_bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(hex_bits))[0]
    return value


def bits(value: float) -> str:
    return struct.pack(">d", value).hex()


NANS = [
    "7ff8000000000000",
    "fff8000000000000",
    "7ff0000000000001",
    "fff4000000000abc",
    "7fffffffffffffff",
]


@pytest.mark.parametrize(
    "hex_bits", [*NANS, "8000000000000000", "0000000000000000", "7ff0000000000000"]
)
def test_the_tagged_form_keeps_every_bit(hex_bits: str) -> None:
    value = from_bits(hex_bits)
    assert bits(from_tagged(to_tagged(value))) == hex_bits  # type: ignore[arg-type]
    assert bits(from_tagged(to_tagged([value]))[0]) == hex_bits  # type: ignore[index]


def test_keys_tell_nans_and_zeros_apart() -> None:
    keys = {canonical(from_bits(b)) for b in NANS} | {canonical(0.0), canonical(-0.0)}
    assert len(keys) == len(NANS) + 2


@pytest.mark.parametrize(
    "body",
    ["nan", "nan:7ff8", "nan:3ff0000000000000", "nan:7FF8000000000000", "nan:7ff8 0000000000 "],
)
def test_a_nan_has_one_spelling(body: str) -> None:
    """Only ``nan_text``'s own spelling decodes to a NaN (the Host re-tags what it decodes,
    but a second spelling would be a second key for a frame to play with)."""
    with pytest.raises(ValueError, match="malformed plain value"):
        from_tagged(["f", body])
    assert nan_text(math.nan) == "nan:7ff8000000000000"


class Floats:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @capability(effect=Effect.PURE, version="1")
    async def bits(self, x: float) -> str:
        """What the tool saw, bit for bit (a slow pure read: it starts early)."""
        self.seen.append(bits(x))
        await anyio.sleep(0.05)
        return bits(x)

    @capability(effect=Effect.PURE, version="1")
    async def payload(self) -> float:
        return from_bits("7ff0000000000001")


SOURCE = """\
a = floats.bits(-float('nan'))
b = floats.bits(float('nan'))
c = floats.bits(-0.0)
d = floats.bits(0.0)
n = floats.payload()
e = floats.bits(n)
(a, b, c, d, e)
"""


async def _lines(source: str, tool: Floats):  # type: ignore[no-untyped-def]
    """``source`` a line a chunk; before it ends, the five early ``bits`` calls have begun."""
    seen = len(tool.seen)
    for line in source.splitlines(keepends=True):
        yield line
    await wait_until(
        lambda: len(tool.seen) == seen + 5, what="every early call began while the program streams"
    )


@pytest.mark.parametrize("guest", ["subprocess", "in-process"])
async def test_early_claims_are_computed_from_the_formal_arguments(guest: str) -> None:
    """Every call is claimed early, and each claim equals the sequential run's call: the
    tool saw the program's own NaN (sign and payload) and zero, in either Guest."""
    host = Host(guest_factory=in_process_guest) if guest == "in-process" else Host()
    tool = Floats()
    host.register("floats", tool)
    reference = await host.run_source(SOURCE, speculate=False)
    streamed = await host.run_stream(_lines(SOURCE, tool))
    expected = (
        "fff8000000000000",
        "7ff8000000000000",
        "8000000000000000",
        "0000000000000000",
        "7ff0000000000001",
    )
    assert reference.status == "ok" and reference.value == expected
    assert differences(reference, streamed) == []
    assert streamed.report.claimed == 6, streamed.report
    assert tool.seen == [*expected, *expected]  # the sequential run's five, then the early lane's


async def test_both_guests_agree() -> None:
    """The subprocess and in-process Guests pass a tool the same bits."""
    results = []
    for factory in (None, in_process_guest):
        host = Host(guest_factory=factory) if factory is not None else Host()
        host.register("floats", Floats())
        results.append(await host.run_source(SOURCE, speculate=False))
    assert differences(results[0], results[1]) == []
