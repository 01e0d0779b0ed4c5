"""Rich tool results become plain data by documented rules, the same in both lanes
(``pysolate._tools._conversion``; docs/tools.md, "Values")."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import pathlib
import uuid
from collections.abc import AsyncIterator
from typing import NamedTuple

import anyio
import pydantic
import pytest

from occurrences import check_plain
from pysolate import Effect, Host, capability
from pysolate._guest import start_subprocess_guest
from pysolate._tools._conversion import ConversionError, to_plain
from pysolate.testing import differences, in_process_guest

UTC = datetime.UTC


class Color(enum.Enum):
    RED = "red"
    BLUE = (1, 2)


class Level(enum.IntEnum):
    HIGH = 3


class Point(NamedTuple):
    x: int
    y: int


@dataclasses.dataclass
class Hit:
    title: str
    score: decimal.Decimal
    tags: set[str]
    seen: datetime.datetime | None = None


class User(pydantic.BaseModel):
    name: str
    id: uuid.UUID
    born: datetime.date
    color: Color
    hits: list[Hit] = []


class Loud(str):
    def __str__(self) -> str:
        raise AssertionError("an override must never be called")


ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        (datetime.datetime(2024, 5, 1, 12, 30, tzinfo=UTC), "2024-05-01T12:30:00+00:00"),
        (datetime.date(2024, 5, 1), "2024-05-01"),
        (datetime.time(7, 5, 3), "07:05:03"),
        (datetime.timedelta(minutes=1, microseconds=500), 60.0005),
        (decimal.Decimal("0.10"), "0.10"),
        (ID, "12345678-1234-5678-1234-567812345678"),
        (pathlib.PurePosixPath("a/b.txt"), "a/b.txt"),
        (Color.RED, "red"),
        (Color.BLUE, (1, 2)),
        (Level.HIGH, 3),
        ({"b", "a", "c"}, ["a", "b", "c"]),
        (frozenset({3, 1, 2.5}), [1, 2.5, 3]),
        (bytearray(b"xy"), b"xy"),
        (memoryview(b"z"), b"z"),
        (Point(1, 2), (1, 2)),
        (collections.OrderedDict(b=1, a=2), {"b": 1, "a": 2}),
        (collections.defaultdict(list, {1: [datetime.date(2024, 1, 2)]}), {1: ["2024-01-02"]}),
        (Loud("quiet"), "quiet"),
        ([1, (2.0, None), {b"k": True}], [1, (2.0, None), {b"k": True}]),
    ],
)
def test_the_documented_rules(value: object, plain: object) -> None:
    out = to_plain(value)
    assert out == plain and type(out) is type(plain)
    check_plain(out)


def test_models_and_dataclasses_become_dicts_of_their_fields_recursively() -> None:
    hit = Hit("t", decimal.Decimal("1.5"), {"y", "x"}, datetime.datetime(2024, 1, 1, tzinfo=UTC))
    user = User(name="ada", id=ID, born=datetime.date(1815, 12, 10), color=Color.RED, hits=[hit])
    assert to_plain(user) == {
        "name": "ada",
        "id": "12345678-1234-5678-1234-567812345678",
        "born": "1815-12-10",
        "color": "red",
        "hits": [
            {"title": "t", "score": "1.5", "tags": ["x", "y"], "seen": "2024-01-01T00:00:00+00:00"}
        ],
    }
    assert list(to_plain(hit)) == ["title", "score", "tags", "seen"]  # type: ignore[call-overload]


def test_equal_sets_always_give_the_same_list() -> None:
    """Hash order differs between equal sets; the list must not."""
    words = [f"w{i}" for i in range(50)]
    grown = set(words)
    shrunk = set(words + [f"x{i}" for i in range(500)])
    for i in range(500):
        shrunk.discard(f"x{i}")
    assert grown == shrunk
    assert to_plain(grown) == to_plain(shrunk) == sorted(words)
    mixed = to_plain({1, "a", (2, "b"), None})
    assert mixed == to_plain({None, (2, "b"), "a", 1})
    assert sorted(map(repr, mixed)) == sorted(map(repr, [1, "a", (2, "b"), None]))  # type: ignore[arg-type]


def test_unknown_values_are_left_for_the_crossing_check() -> None:
    thing = object()
    assert to_plain([1, thing])[1] is thing  # type: ignore[index]


def test_a_cycle_is_left_unconverted_past_the_depth_bound_not_recursed_forever() -> None:
    @dataclasses.dataclass
    class Node:
        next: object = None

    node = Node()
    node.next = node
    with pytest.raises(TypeError):
        check_plain(to_plain(node))


def test_the_hosts_encoder_comes_first_and_may_decline() -> None:
    class Money:
        def __init__(self, cents: int) -> None:
            self.cents = cents

    def encode(value: object) -> object:
        if isinstance(value, Money):
            return {"cents": value.cents, "at": datetime.date(2024, 1, 1)}  # converted again
        if isinstance(value, datetime.datetime):
            return value.timestamp()  # overrides the built-in rule
        return NotImplemented

    stamp = datetime.datetime(2024, 1, 1, tzinfo=UTC)
    assert to_plain([Money(5), stamp, decimal.Decimal("2")], encode) == [
        {"cents": 5, "at": "2024-01-01"},
        stamp.timestamp(),
        "2",
    ]


def test_a_rule_that_raises_is_a_conversion_error() -> None:
    def encode(value: object) -> object:
        raise RuntimeError("no")

    with pytest.raises(ConversionError, match="encoder raised RuntimeError: no"):
        to_plain({"a": {1}}, encode)

    class Bad(pydantic.BaseModel):
        x: int

        @pydantic.field_serializer("x")
        def boom(self, x: int) -> int:
            raise ValueError("cannot")

    with pytest.raises(ConversionError):
        to_plain(Bad(x=1))


# -- end to end: both lanes, both Guests --------------------------------------------------------


class Directory:
    """A tool that returns rich values, as tools of other frameworks do."""

    def __init__(self) -> None:
        self.calls = 0

    @capability(effect=Effect.PURE, version="1")
    async def user(self, name: str) -> User:
        self.calls += 1
        await anyio.sleep(0.02)
        hit = Hit(name, decimal.Decimal("0.5"), {"b", "a"})
        return User(name=name, id=ID, born=datetime.date(2000, 1, 2), color=Color.BLUE, hits=[hit])

    @capability(effect=Effect.IMMUTABLE_READ, version="1")
    def tags(self, name: str) -> frozenset[str]:
        return frozenset({name, "z", "a"})

    @capability(effect=Effect.PURE, version="1")
    def opaque(self) -> object:
        return object()


async def _chunks(source: str) -> AsyncIterator[str]:
    for i in range(0, len(source), 5):
        yield source[i : i + 5]
        await anyio.sleep(0.005)


SOURCE = 'u = directory.user("ada")\nt = directory.tags("m")\nprint(u["hits"][0]["tags"], type(u["id"]).__name__)\n[u, t]\n'


@pytest.mark.anyio
@pytest.mark.parametrize("factory", [in_process_guest, start_subprocess_guest])
async def test_rich_results_reach_the_program_as_plain_data_in_both_lanes(factory: object) -> None:
    host = Host(guest_factory=factory)  # type: ignore[arg-type]
    host.register("directory", Directory())
    streamed = await host.run_stream(_chunks(SOURCE))
    reference = await host.run_source(SOURCE, speculate=False)
    assert differences(streamed, reference) == []
    assert [c.lane for c in streamed.calls] == ["claimed", "claimed"]
    assert [c.lane for c in reference.calls] == ["direct", "direct"]
    assert streamed.stdout == "['a', 'b'] str\n"
    assert streamed.value == [to_plain(await Directory().user("ada")), ["a", "m", "z"]]


@pytest.mark.anyio
async def test_a_value_no_rule_knows_still_fails_at_its_call_in_both_lanes() -> None:
    host = Host(guest_factory=in_process_guest)
    host.register("directory", Directory())
    source = "try:\n    directory.opaque()\nexcept Exception as e:\n    print(type(e).__name__)\n"
    streamed = await host.run_stream(_chunks(source))
    reference = await host.run_source(source, speculate=False)
    assert differences(streamed, reference) == []
    assert streamed.calls[0].outcome == "error" and streamed.calls[0].lane == "claimed"


@pytest.mark.anyio
async def test_the_hosts_encoder_applies_to_early_and_formal_calls_alike() -> None:
    class Money:
        cents = 7

    class Bank:
        @capability(effect=Effect.PURE, version="1")
        async def balance(self) -> Money:
            await anyio.sleep(0.02)
            return Money()

    def encode(value: object) -> object:
        return {"cents": value.cents} if isinstance(value, Money) else NotImplemented

    host = Host(guest_factory=in_process_guest, encode=encode)
    host.register("bank", Bank())
    streamed = await host.run_stream(_chunks("bank.balance()\n"))
    reference = await host.run_source("bank.balance()\n", speculate=False)
    assert differences(streamed, reference) == []
    assert streamed.value == {"cents": 7} and streamed.calls[0].lane == "claimed"
