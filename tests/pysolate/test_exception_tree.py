"""Every exception class Pysolate exports for the Host descends from ``PysolateError``
(``pysolate._exceptions``), so ``except PysolateError`` catches whatever the package raises
to the code that embeds it. ``ToolError`` and ``ToolFailure`` are what a failed tool call
raises inside the program, never in the Host."""

from __future__ import annotations

import importlib

from pysolate import GuestStartError, PysolateError, ToolError, ToolFailure

IN_THE_PROGRAM = (ToolError, ToolFailure)

PUBLIC = ("pysolate", "pysolate.streams", "pysolate.testing", "pysolate.tracing", "pysolate.passes")
"""The public namespaces importable without an optional extra."""


def _exported_exceptions() -> dict[str, type[BaseException]]:
    found = {}
    for name in PUBLIC:
        module = importlib.import_module(name)
        for export in module.__all__:
            value = getattr(module, export)
            if (
                isinstance(value, type)
                and issubclass(value, Exception)
                and not issubclass(value, Warning)
            ):
                found[f"{name}.{export}"] = value
    return found


def test_every_exported_exception_is_a_pysolate_error() -> None:
    exported = _exported_exceptions()
    assert "pysolate.GuestStartError" in exported and "pysolate.streams.StreamCut" in exported
    outside = {
        name
        for name, cls in exported.items()
        if not issubclass(cls, PysolateError) and cls not in IN_THE_PROGRAM
    }
    assert outside == set()


def test_guest_start_error_is_in_the_tree_and_still_a_runtime_error() -> None:
    assert issubclass(GuestStartError, PysolateError)
    assert issubclass(GuestStartError, RuntimeError)
