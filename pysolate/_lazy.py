"""Lazy package exports: a name is imported when it is first used, not with the package.

``import pysolate`` used to import the whole Host (networkx, OpenTelemetry, pydantic): 0.65 s,
paid by every pytest start in an environment that has Pysolate installed (its ``pytest11``
plugin is a module of the package, so importing it imports the package first), and by a
program that only wants ``pysolate.streams``. PEP 562's module ``__getattr__`` defers each
public name to its first use.

One list says what a package exports: its ``if TYPE_CHECKING:`` block of
``from .x import Name as Name`` lines, which type checkers and readers see as ordinary
imports. ``attach`` reads that block from the package's own source (once, at import) and
serves each name from the module it names; the package's ``__all__`` must list exactly
those names, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path


def _exports(package: str) -> dict[str, tuple[str, str]]:
    """Public name -> (module, attribute), from ``package``'s ``if TYPE_CHECKING:`` block."""
    path = getattr(sys.modules.get(package), "__file__", None)
    try:
        source = Path(path).read_text(encoding="utf-8") if path else None
    except OSError:
        source = None
    if source is None:
        raise ImportError(
            f"{package}: its exports are read from its source, which is not available", name=package
        )
    where: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    module = "." * stmt.level + (stmt.module or "")
                    for alias in stmt.names:
                        where[alias.asname or alias.name] = (module, alias.name)
    return where


def attach(
    package: str, public: list[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose ``__all__`` is ``public``.

    Raises ``ImportError`` when ``public`` and the ``TYPE_CHECKING`` block disagree.
    """
    where = _exports(package)
    if set(where) != set(public):
        raise ImportError(
            f"{package}: __all__ and its TYPE_CHECKING exports differ: {sorted(set(where) ^ set(public))}"
        )

    def __getattr__(name: str) -> object:
        try:
            module, attribute = where[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module, package), attribute)
        setattr(sys.modules[package], name, value)  # served directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted({*where, *vars(sys.modules[package])})

    return __getattr__, __dir__
