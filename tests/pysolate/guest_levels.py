"""The isolation levels the Guest suites run at, as pytest parameters.

Every level this machine offers is a parameter; a level it lacks is skipped with the
reason the probe gives (what is missing and how to get it). ``hidden-bwrap`` is the
default Host with bubblewrap hidden (``PYSOLATE_HIDE_BWRAP=1``, the documented probe
knob), so the Landlock level the default falls back to is exercised where bubblewrap
exists (CI installs it).

``ray`` (marked ``ray``: only with ``pytest -m ray``) runs the same suites against
``RayGuestFactory`` on a local Ray cluster, the Guest at the node's strongest level: the
suites then check a remote Guest exactly as a local one (issue 19).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import pytest

from pysolate._guest import _isolation, start_subprocess_guest
from pysolate._guest_api import GuestLimits

LEVELS = ("namespaces", "landlock", "seccomp", "rlimits")
HIDDEN_BWRAP = "hidden-bwrap"
"""The mode: ``isolation="strongest"`` with bubblewrap hidden from the probe."""
RAY = "ray"
"""The mode: Guests started on a local Ray cluster by ``RayGuestFactory``, strongest level."""


def _skip(level: str) -> pytest.MarkDecorator:
    missing = _isolation.machine().missing(level)  # type: ignore[arg-type]
    return pytest.mark.skipif(
        bool(missing), reason=f"isolation={level!r} unavailable here: " + "; ".join(missing)
    )


def _at_least(level: str, minimum: str) -> bool:
    return LEVELS[::-1].index(level) >= LEVELS[::-1].index(minimum)


def params(minimum: str = "rlimits", *, hidden_bwrap: bool = True) -> list[object]:
    """One parameter per level at least ``minimum``, plus the hidden-bwrap mode."""
    found = [
        pytest.param(level, marks=_skip(level), id=level)
        for level in LEVELS
        if _at_least(level, minimum)
    ]
    if hidden_bwrap and _at_least("landlock", minimum):
        found.append(pytest.param(HIDDEN_BWRAP, marks=_skip("landlock"), id=HIDDEN_BWRAP))
    return found


def with_ray(found: list[object]) -> list[object]:
    """``found`` and the Ray mode (run only with ``-m ray``)."""
    return [*found, pytest.param(RAY, marks=pytest.mark.ray, id=RAY)]


def choice(mode: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The ``isolation=`` value for ``mode`` (hiding bubblewrap for the hidden-bwrap mode)."""
    if mode == RAY:
        monkeypatch.delenv(_isolation.HIDE_BWRAP_ENV, raising=False)
        return "strongest"
    if mode == HIDDEN_BWRAP:
        monkeypatch.setenv(_isolation.HIDE_BWRAP_ENV, "1")
        return "strongest"
    monkeypatch.delenv(_isolation.HIDE_BWRAP_ENV, raising=False)
    return mode


def expected_level(mode: str) -> str:
    if mode == RAY:
        return _isolation.machine().levels()[-1]
    return "landlock" if mode == HIDDEN_BWRAP else mode


GuestStarter = Callable[[Mapping[str, Sequence[str]], GuestLimits], Awaitable[Any]]


@contextlib.asynccontextmanager
async def guest_factory(mode: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[GuestStarter]:
    """The factory the suites start Guests with in ``mode``: the local subprocess Guest at
    its level, or (``ray``) a ``RayGuestFactory`` whose agents run on a local Ray cluster."""
    isolation = choice(mode, monkeypatch)
    if mode != RAY:
        yield functools.partial(start_subprocess_guest, isolation=isolation)  # type: ignore[arg-type]
        return
    from pysolate.ray import AGENT_RESOURCE, RayGuestFactory

    async with RayGuestFactory(init={"resources": {AGENT_RESOURCE: 1}, "num_cpus": 2}) as factory:
        yield factory
