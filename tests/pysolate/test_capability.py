"""The capability decorator, the registry, MCP effect proposals and call binding."""

from __future__ import annotations

import pytest

from occurrences import Effect, canonical_arguments
from pysolate import Host, RegistrationError, capability, propose_effect
from pysolate._tools._capability import capability_methods


class Docs:
    @capability(effect=Effect.PURE, version="2", cost=0.5)
    async def search(self, query: str, limit: int = 3) -> list[str]:
        return [query] * limit

    @capability
    def note(self, text: str) -> int:
        return len(text)

    def helper(self) -> None:
        """Not a capability: never exposed."""


def test_declarations_are_read_with_defaults_and_kind() -> None:
    methods = capability_methods(Docs())
    assert set(methods) == {"search", "note"}
    search, note = methods["search"], methods["note"]
    assert (search.effect, search.version, search.cost, search.is_async) == (
        Effect.PURE,
        "2",
        0.5,
        True,
    )
    assert (note.effect, note.version, note.cost, note.is_async) == (
        Effect.UNKNOWN,
        "0",
        None,
        False,
    )
    assert list(search.signature.parameters) == ["query", "limit"]  # no self


def test_an_object_without_capability_methods_is_refused() -> None:
    with pytest.raises(RegistrationError, match="no @capability"):
        capability_methods(object())


def test_private_capability_names_are_refused() -> None:
    class Bad:
        @capability(effect=Effect.PURE)
        def _secret(self) -> int:
            return 1

    with pytest.raises(RegistrationError, match="private"):
        capability_methods(Bad())


def test_a_non_plain_default_is_refused_at_registration() -> None:
    class Bad:
        @capability(effect=Effect.PURE)
        def get(self, x: object = object()) -> int:
            return 1

    with pytest.raises(RegistrationError, match="not plain"):
        capability_methods(Bad())


@pytest.mark.parametrize("bad", [{"effect": "pure"}, {"version": 1}, {"cost": -1}])
def test_bad_declarations_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(RegistrationError):
        capability(**bad)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("annotations", "proposed"),
    [
        (None, Effect.UNKNOWN),
        ({}, Effect.UNKNOWN),
        ({"readOnlyHint": True, "openWorldHint": False}, Effect.IMMUTABLE_READ),
        ({"readOnlyHint": True}, Effect.LIVE_READ),  # openWorldHint defaults to true
        ({"readOnlyHint": True, "openWorldHint": True}, Effect.LIVE_READ),
        ({"readOnlyHint": False, "idempotentHint": True}, Effect.WRITE),
        ({"destructiveHint": False}, Effect.WRITE),  # readOnlyHint defaults to false
        ({"readOnlyHint": "yes"}, Effect.WRITE),  # only a real true counts
    ],
)
def test_mcp_hints_map_to_a_proposed_effect(
    annotations: dict[str, object] | None, proposed: Effect
) -> None:
    assert propose_effect(annotations).effect is proposed


def test_a_proposal_is_never_an_effect_until_the_host_confirms_it() -> None:
    proposal = propose_effect({"readOnlyHint": True, "openWorldHint": False})
    with pytest.raises(RegistrationError, match="confirm"):
        capability(effect=proposal)  # type: ignore[call-overload]
    assert capability(effect=proposal.confirm()) is not None


@pytest.mark.parametrize("name", ["", "1x", "class", "_hidden", "a-b"])
def test_capability_names_must_be_public_identifiers(name: str) -> None:
    with pytest.raises(RegistrationError):
        Host().register(name, Docs())


def test_a_name_is_registered_once() -> None:
    host = Host()
    host.register("docs", Docs())
    with pytest.raises(RegistrationError, match="already"):
        host.register("docs", Docs())


def test_method_specs_list_effect_and_version() -> None:
    host = Host()
    host.register("docs", Docs())
    specs = host.method_specs()["docs"]
    assert (specs["search"].effect, specs["search"].version) == (Effect.PURE, "2")
    assert specs["note"].effect is Effect.UNKNOWN
    assert host.capabilities() == {"docs": ["note", "search"]}


def test_positional_keyword_and_default_spellings_bind_to_one_key() -> None:
    host = Host()
    host.register("docs", Docs())
    spellings: list[tuple[tuple[object, ...], dict[str, object]]] = [
        (("a",), {}),
        ((), {"query": "a"}),
        (("a", 3), {}),
        (("a",), {"limit": 3}),
    ]
    keys = {host.root_key(host.bind("docs", "search", a, k)) for a, k in spellings}
    assert len(keys) == 1
    (key,) = keys
    assert key.arguments == canonical_arguments({"query": "a", "limit": 3})
    assert (key.capability, key.method, key.version, key.view) == ("docs", "search", "2", "epoch:0")


def test_arguments_that_do_not_fit_raise_type_error_like_a_call() -> None:
    host = Host()
    host.register("docs", Docs())
    with pytest.raises(TypeError):
        host.bind("docs", "search", (), {})
    with pytest.raises(TypeError):
        host.bind("docs", "search", ("a",), {"nope": 1})
    with pytest.raises(TypeError, match="plain"):
        host.bind("docs", "search", (object(),), {})
    with pytest.raises(AttributeError):
        host.bind("docs", "helper", (), {})


def test_keys_tell_apart_values_python_calls_equal() -> None:
    host = Host()
    host.register("docs", Docs())
    keys = {host.root_key(host.bind("docs", "search", ("a", n), {})) for n in (1, 1.0, True)}
    assert len(keys) == 3
