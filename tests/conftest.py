"""Shared test configuration.

Tests of an integration import its SDK (openai, anthropic, Pydantic AI, smolagents, MCP, the
OpenAI Agents SDK, Ray, pygit2), all in the ``test`` extra that ``.ci/run`` installs. Where
one is missing, its test modules are skipped with a reason naming it, instead of the whole
run stopping at collection: the rest of the suite still runs in a smaller environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

OPTIONAL_PACKAGES = {
    "agents": "openai-agents",
    "anthropic": "anthropic",
    "mcp": "mcp",
    "openai": "openai",
    "pydantic_ai": "pydantic-ai-slim",
    "pygit2": "pygit2",
    "ray": "ray",
    "smolagents": "smolagents",
}
"""Top-level import name -> the distribution an optional integration's tests need."""


def missing_optional(exc: BaseException | None) -> str | None:
    """The distribution whose absence ``exc`` (a collection error's cause) shows, if any."""
    while exc is not None:
        if isinstance(exc, ModuleNotFoundError) and exc.name is not None:
            return OPTIONAL_PACKAGES.get(exc.name.partition(".")[0])
        exc = exc.__cause__ or exc.__context__
    return None


class _OptionalModule(pytest.Module):
    def _getobj(self):  # type: ignore[no-untyped-def]
        try:
            return super()._getobj()
        except self.CollectError as error:
            needed = missing_optional(error.__cause__)
            if needed is None:
                raise
            pytest.skip(f"needs {needed} (pip install -e '.[test]')", allow_module_level=True)


def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    if module_path.name == "conftest.py":
        return None
    return _OptionalModule.from_parent(parent, path=module_path)


PROFILE_VARIABLE = "PYSOLATE_HYPOTHESIS_PROFILE"
"""Names the hypothesis profile of a run: ``default`` (the README's test command, CI) or
``full`` (every generated suite at its full example count: ``example_counts.examples``)."""

settings.register_profile("default")
settings.register_profile("full")
settings.register_profile(
    "differential",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""The settings of the generated differential suites (``tests/equivalence``): the same
programs every run, so a red CI run reproduces anywhere; no deadline, as a program streams
for a while on purpose; the failing case printed as a blob to replay. Used as the parent of
each test's own ``settings`` (``example_counts.DIFFERENTIAL``), never loaded as a whole."""

settings.load_profile(os.environ.get(PROFILE_VARIABLE, "default"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
