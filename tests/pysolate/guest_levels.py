"""The isolation levels the Guest suites run at, as pytest parameters.

Every level this machine offers is a parameter; a level it lacks is skipped with the
reason the probe gives (what is missing and how to get it). ``hidden-bwrap`` is the
default Host with bubblewrap hidden (``PYSOLATE_HIDE_BWRAP=1``, the documented probe
knob), so the Landlock level the default falls back to is exercised where bubblewrap
exists (CI installs it).
"""

from __future__ import annotations

import pytest

from pysolate._guest import _isolation

LEVELS = ("namespaces", "landlock", "seccomp", "rlimits")
HIDDEN_BWRAP = "hidden-bwrap"
"""The mode: ``isolation="strongest"`` with bubblewrap hidden from the probe."""


def _skip(level: str) -> pytest.MarkDecorator:
    missing = _isolation.machine().missing(level)  # type: ignore[arg-type]
    return pytest.mark.skipif(bool(missing), reason=f"isolation={level!r} unavailable here: " + "; ".join(missing))


def _at_least(level: str, minimum: str) -> bool:
    return LEVELS[::-1].index(level) >= LEVELS[::-1].index(minimum)


def params(minimum: str = "rlimits", *, hidden_bwrap: bool = True) -> list[object]:
    """One parameter per level at least ``minimum``, plus the hidden-bwrap mode."""
    found = [pytest.param(level, marks=_skip(level), id=level) for level in LEVELS if _at_least(level, minimum)]
    if hidden_bwrap and _at_least("landlock", minimum):
        found.append(pytest.param(HIDDEN_BWRAP, marks=_skip("landlock"), id=HIDDEN_BWRAP))
    return found


def choice(mode: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The ``isolation=`` value for ``mode`` (hiding bubblewrap for the hidden-bwrap mode)."""
    if mode == HIDDEN_BWRAP:
        monkeypatch.setenv(_isolation.HIDE_BWRAP_ENV, "1")
        return "strongest"
    monkeypatch.delenv(_isolation.HIDE_BWRAP_ENV, raising=False)
    return mode


def expected_level(mode: str) -> str:
    return "landlock" if mode == HIDDEN_BWRAP else mode
