"""Setups that run correctly and gain nothing: said once, and recorded on every run.

A Host whose tools are all left at ``Effect.UNKNOWN``, an agent integration whose tools
``effects=`` does not name, a framework that hands over whole programs: each runs every
program exactly as it should, and never starts a call early. Nothing fails, so nothing
would say so but the counts of a report. Here the Host (or the integration) says it once,
as a ``PysolateWarning`` whose message names the fix, per Host or per framework setup —
not per run, so a loop of runs is not a wall of warnings — and every run it applies to
carries the same text in ``RunReport.setup_warnings``.

"Once" is kept per owner (a Host, an executor, a code tool) by the kind of warning, in a
weak table, so owners need no field for it and a dropped owner takes its record along.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from occurrences import Effect, tool_name

from .._exceptions import PysolateWarning, UnqualifiedToolsWarning

if TYPE_CHECKING:
    from .._calls._broker import Registration
    from .._report._result import RunResult

NAMES_SHOWN = 6
"""Tools named in a message before the rest are counted ("and 3 more")."""

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
"""Frames from files under this directory are the package's own, never the warning's place."""

_SAID: weakref.WeakKeyDictionary[object, set[str]] = weakref.WeakKeyDictionary()
"""Per owner, the kinds of warning already issued."""


def warn_once(owner: object, kind: str, category: type[PysolateWarning], message: str) -> bool:
    """Issue ``message`` as ``category`` unless ``owner`` already issued a ``kind`` warning;
    True when it was issued now. The warning names the first frame outside this package
    (the caller's ``await host.run_stream(...)``, or the framework's call), as
    ``warnings.warn(skip_file_prefixes=...)`` would on Python 3.12."""
    said = _SAID.setdefault(owner, set())
    if kind in said:
        return False
    said.add(kind)
    warnings.warn(message, category, stacklevel=_outside_package())
    return True


def _outside_package() -> int:
    """The ``stacklevel`` of the first frame (counted from ``warn_once``'s caller's
    ``warnings.warn``) whose code is not in this package."""
    frame = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def unqualified_host_tools(registrations: Iterable[Registration]) -> str | None:
    """The message for a Host none of whose methods may start early because the unknown
    ones were never qualified; None when one may, or when every method was qualified as
    something that never starts early (``write``, ``live_read``: a deliberate choice)."""
    unknown: list[str] = []
    for registration in registrations:
        for method_name, method in registration.methods.items():
            effect = method.spec.effect
            if effect.speculable:
                return None
            if effect is Effect.UNKNOWN:
                unknown.append(tool_name(registration.name, method_name))
    if not unknown:
        return None
    return (
        f"no tool on this Host may start early: {named(sorted(unknown))} "
        f"{'is' if len(unknown) == 1 else 'are'} left at Effect.UNKNOWN (the default), so every call "
        "waits until the program reaches it. Declare the reads that may start early: "
        "@capability(effect=Effect.PURE) for a result that depends only on its arguments, "
        "Effect.IMMUTABLE_READ for a read of a frozen root (docs/tools.md); for an agent's "
        "tools, name them in the integration's effects= (effects={'search': Effect.PURE})."
    )


def unqualified_agent_tools(
    setup: str, tools: Sequence[str], effects: Mapping[str, object]
) -> str | None:
    """The message for an integration given agent tools of which ``effects`` names none;
    None when it names one (whatever effect: naming a tool is a decision)."""
    if not tools or any(name in effects for name in tools):
        return None
    example = tools[0]
    return (
        f"{setup}: none of the agent's tools ({named(list(tools))}) may start early: an agent tool is "
        "Effect.UNKNOWN unless effects= names it, so every call waits until the program reaches it. "
        f"Qualify the reads: {setup}(effects={{{example!r}: Effect.PURE}}) for a result that depends "
        "only on its arguments (Effect.IMMUTABLE_READ for a read of a frozen root; Effect.WRITE "
        "says a tool never may)."
    )


def named(names: Sequence[str]) -> str:
    """``a, b, c`` — at most ``NAMES_SHOWN`` of them, then how many more."""
    shown = ", ".join(names[:NAMES_SHOWN])
    rest = len(names) - NAMES_SHOWN
    return f"{shown} and {rest} more" if rest > 0 else shown


def noted(result: RunResult, notes: Iterable[str], *, replacing: Iterable[str] = ()) -> RunResult:
    """``result`` with ``notes`` added to its report's ``setup_warnings`` (each once), and
    the notes in ``replacing`` (what the Host said of the same cause) taken out."""
    have = result.report.setup_warnings
    dropped = set(replacing)
    kept = tuple(n for n in have if n not in dropped)
    new = tuple(n for n in dict.fromkeys(notes) if n not in kept)
    if not new and kept == have:
        return result
    report = dataclasses.replace(result.report, setup_warnings=kept + new)
    return dataclasses.replace(result, report=report)


def host_notes(owner: object, registrations: Iterable[Registration]) -> tuple[str, ...]:
    """What a speculating run on a Host with ``registrations`` must note; warned once per
    ``owner`` (the Host)."""
    message = unqualified_host_tools(registrations)
    if message is None:
        return ()
    warn_once(owner, "unqualified", UnqualifiedToolsWarning, message)
    return (message,)
