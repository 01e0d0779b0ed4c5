"""A registration knows once whether its object is ``RunScoped`` / ``Viewed``; every run and
every early call reuse that answer, and it is exactly the runtime Protocol check's."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pysolate import Effect, Host, capability
from pysolate._calls._broker import RunScoped, Viewed
from pysolate.testing import memory_workspace


class Plain:
    @capability(effect=Effect.PURE)
    async def get(self, key: str) -> str:
        return key


class Dynamic(Plain):
    """Answers every attribute: a runtime Protocol check calls it both kinds."""

    def __getattr__(self, name: str) -> object:
        return lambda *args, **kwargs: name


class OnlyViews(Plain):
    def view_of(self, method: str, arguments: Mapping[str, object]) -> str:
        return "v1"


@pytest.mark.parametrize(
    "obj", [Plain(), Dynamic(), OnlyViews(), memory_workspace({"a.txt": "x"})], ids=type
)
def test_the_flags_are_the_protocol_checks(obj: object) -> None:
    host = Host()
    host.register("tool", obj)
    registration = host.registration("tool")
    assert registration.run_scoped is isinstance(obj, RunScoped)
    assert registration.viewed is isinstance(obj, Viewed)


def test_function_tools_flags_are_the_protocol_checks() -> None:
    host = Host()

    @capability(effect=Effect.PURE)
    def double(x: int) -> int:
        return 2 * x

    host.register("double", double)
    (name,) = host.capabilities()
    registration = host.registration(name)
    assert (registration.run_scoped, registration.viewed) == (
        isinstance(registration.obj, RunScoped),
        isinstance(registration.obj, Viewed),
    )
