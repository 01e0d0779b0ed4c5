"""What the in-process test Guest lets a program import and read of the environment.

The subprocess Guest runs ``python -I -S`` with an empty environment and no
``site-packages``: a program there can import the standard library and nothing else, and
``os.environ`` is empty. A test double that allowed ``import pydantic`` or showed the Host's
``os.environ`` would let a test pass where production fails, so the in-process Guest gives
the program the same two rules:

- ``import`` of anything outside ``sys.stdlib_module_names`` raises the
  ``ModuleNotFoundError`` the real Guest raises (``No module named 'pydantic'``);
- ``os`` and ``posix`` come as views whose ``environ``/``environb``/``getenv`` see an empty
  environment of the program's own (writes to it stay there and never reach the Host's).

This is parity for honest test programs, not a boundary: ``sys.modules['os'].environ``,
``importlib``, files and sockets still reach the Host (``pysolate.testing`` says so).
"""

from __future__ import annotations

import builtins
import os
import posix
import sys
import types
from collections.abc import Callable, Mapping, Sequence

ImportFunction = Callable[..., types.ModuleType]


class _EnvironmentView(types.ModuleType):
    """A module that answers like ``base`` except for the environment."""

    def __init__(self, base: types.ModuleType) -> None:
        super().__init__(base.__name__, base.__doc__)
        self.__dict__["_base"] = base
        self.__dict__["environ"] = {}
        if base is os:
            self.__dict__["environb"] = {}
            self.__dict__["getenv"] = self._getenv
            self.__dict__["getenvb"] = self._getenvb
            self.__dict__["putenv"] = self._putenv
            self.__dict__["unsetenv"] = self._unsetenv

    def __getattr__(self, name: str) -> object:
        return getattr(self.__dict__["_base"], name)

    def _getenv(self, key: str, default: str | None = None) -> str | None:
        return self.__dict__["environ"].get(key, default)

    def _getenvb(self, key: bytes, default: bytes | None = None) -> bytes | None:
        return self.__dict__["environb"].get(key, default)

    def _putenv(self, key: str, value: str) -> None:
        self.__dict__["environ"][key] = value

    def _unsetenv(self, key: str) -> None:
        self.__dict__["environ"].pop(key, None)


def guest_import() -> ImportFunction:
    """An ``__import__`` for one program: the standard library only, ``os``/``posix`` as
    environment views (one pair per program, so programs never share an environment)."""
    views = {"os": _EnvironmentView(os), "posix": _EnvironmentView(posix)}

    def import_(
        name: str,
        globals: Mapping[str, object] | None = None,
        locals: Mapping[str, object] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        if level != 0:  # relative: fails in ``__main__`` exactly as in the real Guest
            return builtins.__import__(name, globals, locals, fromlist, level)
        top = name.partition(".")[0]
        if top not in sys.stdlib_module_names:
            raise ModuleNotFoundError(f"No module named {top!r}", name=top)
        module = builtins.__import__(name, globals, locals, fromlist, level)
        # ``import a.b`` hands back ``a``; ``from a.b import c`` hands back ``a.b``.
        return views.get(name if fromlist else top, module)

    return import_
