"""How many examples a generated suite runs: fewer by default, all of them under ``full``.

The default run (the README's test command, CI) gives each generated differential suite a
share of its cases; ``PYSOLATE_HYPOTHESIS_PROFILE=full`` runs every suite at its full count
(the counts the suites had before the default run was trimmed, issue 39). The suites are
derandomized, so a default run checks the same programs every time, and the ``soak``
marker still runs the 10,000-program versions. The profiles are registered in ``conftest.py``.
"""

from __future__ import annotations

from hypothesis import settings

DIFFERENTIAL = settings.get_profile("differential")
"""The shared settings of the differential suites (registered in ``conftest.py``)."""


def examples(default: int, *, full: int) -> int:
    """``default`` examples in a default run, ``full`` under the ``full`` profile."""
    if default > full:
        raise ValueError(f"a default count ({default}) above the full count ({full})")
    return full if settings.get_current_profile_name() == "full" else default
