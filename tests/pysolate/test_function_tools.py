"""Function tools: ``host.register("search", fn)`` exposes a ``@capability`` function as the
program's global ``search``; everything that works for methods works for it (early calls,
claims, receipts, traces, scopes, both Guests), and every run equals its sequential
reference."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from occurrences import FUNCTIONS
from pysolate import Effect, Host, RegistrationError, RunResult, capability
from pysolate._guest import start_subprocess_guest
from pysolate.passes import BatchLaw
from pysolate.testing import differences, in_process_guest
from pysolate.tracing import OTelInstrument

pytestmark = pytest.mark.anyio

GUESTS = [
    pytest.param(in_process_guest, id="in_process"),
    pytest.param(start_subprocess_guest, id="subprocess"),
]


class Backend:
    """One store behind several function tools (like the tools of one MCP server)."""

    def __init__(self) -> None:
        self.notes = {"k": "old", "a.txt": "A", "b.txt": "B"}
        self.log: list[tuple[str, float]] = []  # (what ran, anyio time it started)

    def tools(self) -> dict[str, object]:
        @capability(effect=Effect.PURE, version="1")
        async def search(query: str, limit: int = 2) -> list[str]:
            self.log.append((f"search {query}", anyio.current_time()))
            await anyio.sleep(0.05)
            return [f"{query}{i}" for i in range(1, limit + 1)]

        @capability(effect=Effect.IMMUTABLE_READ, version="1")
        def lookup(key: str) -> str:
            self.log.append((f"lookup {key}", anyio.from_thread.run_sync(anyio.current_time)))
            if key not in self.notes:
                raise KeyError(key)
            return self.notes[key]

        @capability(effect=Effect.WRITE, version="1")
        async def save(key: str, value: str) -> None:
            self.log.append((f"save {key}", anyio.current_time()))
            self.notes[key] = value

        @capability(effect=Effect.WRITE, version="1", scope="path")
        async def write_note(path: str, text: str) -> None:
            self.log.append((f"write_note {path}", anyio.current_time()))
            self.notes[path] = text

        @capability(effect=Effect.IMMUTABLE_READ, version="1", scope="path")
        async def read_note(path: str) -> str:
            self.log.append((f"read_note {path}", anyio.current_time()))
            return self.notes[path]

        return {
            "search": search,
            "lookup": lookup,
            "save": save,
            "write_note": write_note,
            "read_note": read_note,
        }


def make_host(factory: object = in_process_guest, **kwargs: object) -> tuple[Host, Backend]:
    backend = Backend()
    host = Host(guest_factory=factory, **kwargs)  # type: ignore[arg-type]
    for name, fn in backend.tools().items():
        host.register(name, fn)
    return host, backend


class Slow:
    """The source in small chunks with pauses; remembers when the stream ended."""

    def __init__(self, source: str, size: int = 6, pause: float = 0.01) -> None:
        self.source, self.size, self.pause = source, size, pause
        self.ended: float | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        for i in range(0, len(self.source), self.size):
            yield self.source[i : i + self.size]
            await anyio.sleep(self.pause)
        self.ended = anyio.current_time()


async def both(
    source: str, factory: object = in_process_guest
) -> tuple[RunResult, RunResult, Backend, Slow]:
    """The streamed run and the sequential reference, each against a fresh Host."""
    host, backend = make_host(factory)
    stream = Slow(source)
    result = await host.run_stream(stream)
    ref_host, _ = make_host(factory)
    reference = await ref_host.run_source(source, speculate=False)
    assert differences(result, reference) == []
    return result, reference, backend, stream


# -- early calls and claims ------------------------------------------------------------------


@pytest.mark.parametrize("factory", GUESTS)
async def test_function_tools_run_early_are_claimed_and_equal_the_reference(
    factory: object,
) -> None:
    source = (
        'r = search("q")\nnotes = [lookup(k) for k in ["k", "a.txt"]]\nprint(r, notes)\nr + notes\n'
    )
    result, _, backend, stream = await both(source, factory)
    assert result.status == "ok" and result.value == ["q1", "q2", "old", "A"]
    assert [c.lane for c in result.calls] == ["claimed"] * 3
    assert stream.ended is not None
    assert all(started < stream.ended for _, started in backend.log), backend.log
    first = result.calls[0]
    assert (first.capability, first.method, first.tool) == (FUNCTIONS, "search", "search")


async def test_aliases_and_rebinding_follow_discovery_and_stay_exact() -> None:
    source = 's = search\na = s("x")\nsearch = len\nb = search("xyz")\n[a, b]\n'
    result, _, backend, _ = await both(source)
    assert result.value == [["x1", "x2"], 3]
    assert [c.lane for c in result.calls] == ["claimed"]
    assert [what for what, _ in backend.log] == ["search x"]


async def test_a_write_by_one_function_tool_moves_every_function_tool_to_a_new_view() -> None:
    """The tools share one store: a read after a write never claims the pre-write read
    (it claims one started on the new view once the write returned)."""
    source = 'a = lookup("k")\nsave("k", "new")\nb = lookup("k")\n[a, b]\n'
    result, _, backend, stream = await both(source)
    assert result.value == ["old", "new"]
    assert [c.lane for c in result.calls] == ["claimed", "direct", "claimed"]
    first, second = (
        next(o for o in result.observations if o.id == c.observation_id) for c in result.calls[::2]
    )
    assert first.key.view != second.key.view
    assert second.started is not None and second.started >= result.calls[1].ended
    assert stream.ended is not None
    save_started = [t for what, t in backend.log if what.startswith("save")]
    assert save_started and save_started[0] >= stream.ended  # a write never runs early


async def test_declared_scopes_of_function_tools_work_as_for_methods() -> None:
    """The same program through function tools and through an object's methods: the same
    values, the same lanes, the same early work (scopes are carried to discovery)."""
    body = 'write_note("a.txt", "x")\nb = read_note("b.txt")\na = read_note("a.txt")\n[a, b]\n'
    result, _, backend, stream = await both(body)
    assert result.value == ["x", "B"]

    class Notes:
        def __init__(self) -> None:
            self.backend = Backend()
            self.tools = self.backend.tools()

        @capability(effect=Effect.WRITE, version="1", scope="path")
        async def write_note(self, path: str, text: str) -> None:
            await self.tools["write_note"](path, text)  # type: ignore[operator]

        @capability(effect=Effect.IMMUTABLE_READ, version="1", scope="path")
        async def read_note(self, path: str) -> str:
            return await self.tools["read_note"](path)  # type: ignore[operator,no-any-return]

    notes = Notes()
    host = Host(guest_factory=in_process_guest)
    host.register("notes", notes)
    as_methods = await host.run_stream(
        Slow(
            body.replace("write_note(", "notes.write_note(").replace(
                "read_note(", "notes.read_note("
            )
        )
    )
    assert as_methods.value == result.value
    assert [c.lane for c in as_methods.calls] == [c.lane for c in result.calls]
    assert stream.ended is not None
    early = sorted(what for what, t in backend.log if t < stream.ended)
    assert early == ["read_note b.txt"]  # the read the write cannot reach was started early
    assert sorted(what for what, _ in notes.backend.log) == sorted(what for what, _ in backend.log)


async def test_a_failing_function_tool_raises_at_its_call_in_the_program() -> None:
    source = 'try:\n    lookup("nope")\nexcept KeyError as e:\n    print("missing", e)\nsearch("z", limit=1)\n'
    result, _, _, _ = await both(source)
    assert result.status == "ok" and result.stdout == "missing 'nope'\n" and result.value == ["z1"]
    assert [c.outcome for c in result.calls] == ["error", "ok"]


@pytest.mark.parametrize("factory", GUESTS)
async def test_the_program_sees_a_plain_function(factory: object) -> None:
    source = "[search.__name__, callable(search), 'search' in globals()]\n"
    result, _, _, _ = await both(source, factory)
    assert result.value == ["search", True, True]


@pytest.mark.parametrize("factory", GUESTS)
async def test_arguments_are_bound_exactly_and_must_be_plain(factory: object) -> None:
    source = 'search(query="a")\nsearch("a", 2)\ntry:\n    search(object())\nexcept TypeError as e:\n    print(e)\nsearch("a", nope=1)\n'
    result, _, _, _ = await both(source, factory)
    assert (
        result.status == "error" and result.error is not None and result.error.type == "TypeError"
    )
    assert "search: arguments must be plain data" in result.stdout
    # Keyword or positional: one call key, so the second is the same early result.
    assert result.calls[0].key == result.calls[1].key


async def test_a_bound_method_is_a_function_tool_too() -> None:
    class Docs:
        @capability(effect=Effect.PURE, version="1")
        def get(self, name: str) -> str:
            return name.upper()

    host = Host(guest_factory=in_process_guest)
    host.register("get", Docs().get)
    host.register(
        "get_partial",
        capability(effect=Effect.PURE)(functools.partial(lambda prefix, x: prefix + x, "p:")),
    )
    result = await host.run_stream(Slow('get("a") + get_partial("b")\n'))
    assert result.value == "Ap:b"
    assert [c.lane for c in result.calls] == ["claimed", "claimed"]


async def test_traces_name_a_function_tool_by_its_name() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host, _ = make_host(instrument=OTelInstrument(provider))
    await host.run_stream(Slow('search("a")\nsave("k", "v")\n'))
    names = {span.name for span in exporter.get_finished_spans()}
    assert {"execute_tool search", "execute_tool save"} <= names
    assert not any(
        "." in name.removeprefix("execute_tool ")
        for name in names
        if name.startswith("execute_tool")
    )


# -- registration --------------------------------------------------------------------------


def _pure() -> object:
    @capability(effect=Effect.PURE, version="1")
    def f(x: str) -> str:
        return x

    return f


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (5, "must be a str"),
        (None, "must be a str"),
        ("len", "shadow the builtin"),
        ("print", "shadow the builtin"),
        ("_private", "not a public identifier"),
        ("class", "not a public identifier"),
        ("a-b", "not a public identifier"),
    ],
)
def test_names_that_cannot_be_globals_are_refused(name: object, message: str) -> None:
    for obj in (_pure(), Backend()):
        with pytest.raises(RegistrationError, match=message):
            Host().register(name, obj)  # type: ignore[arg-type]


def test_an_object_capability_may_not_shadow_a_builtin_either() -> None:
    class Tool:
        @capability
        def go(self) -> None: ...

    with pytest.raises(RegistrationError, match="shadow the builtin"):
        Host().register("open", Tool())


def test_function_and_object_names_share_one_namespace() -> None:
    class Tool:
        @capability
        def go(self) -> None: ...

    host = Host()
    host.register("search", _pure())
    with pytest.raises(RegistrationError, match="already registered"):
        host.register("search", Tool())
    with pytest.raises(RegistrationError, match="already registered"):
        host.register("search", _pure())
    host.register("tool", Tool())
    with pytest.raises(RegistrationError, match="already registered"):
        host.register("tool", _pure())
    assert host.capabilities() == {FUNCTIONS: ["search"], "tool": ["go"]}


def test_an_undeclared_function_is_refused_with_a_hint() -> None:
    def search(q: str) -> str:
        return q

    with pytest.raises(RegistrationError, match="no @capability declaration"):
        Host().register("search", search)


def test_a_function_tool_keeps_the_method_checks_and_refuses_laws() -> None:
    @capability(effect=Effect.PURE)
    def bad_default(x: object = object()) -> None: ...

    @capability(effect=Effect.WRITE, scope="nope")
    def bad_scope(path: str) -> None: ...

    @capability(effect=Effect.PURE, batch=BatchLaw("many", "x", "1"))
    def with_law(x: str) -> None: ...

    for name, fn, message in (
        ("a", bad_default, "not plain data"),
        ("b", bad_scope, "no parameter 'nope'"),
        ("c", with_law, "laws are for capability objects"),
    ):
        with pytest.raises(RegistrationError, match=message):
            Host().register(name, fn)


async def test_registering_never_changes_what_an_earlier_scope_calls() -> None:
    host = Host()
    host.register("a", _pure())
    scope = host.new_scope()
    host.register("b", _pure())
    assert scope.bind(FUNCTIONS, "a", ("x",), {}).arguments == {"x": "x"}
    with pytest.raises(AttributeError):
        scope.bind(FUNCTIONS, "b", ("x",), {})
