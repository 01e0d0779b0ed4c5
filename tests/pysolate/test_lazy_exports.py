"""``import pysolate`` is light; every public name still resolves (``pysolate._lazy``)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

HEAVY = ("networkx", "opentelemetry", "pydantic", "anyio", "scheduler", "pysolate._run._host")


def _loaded_after(statement: str) -> set[str]:
    probe = f"import sys\n{statement}\nprint(' '.join(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return set(done.stdout.split())


@pytest.mark.parametrize("statement", ["import pysolate", "import pysolate.streams.pytest_plugin"])
def test_importing_the_package_or_its_pytest_plugin_loads_nothing_heavy(statement: str) -> None:
    loaded = _loaded_after(statement)
    assert not {m for m in loaded for heavy in HEAVY if m == heavy or m.startswith(heavy + ".")}


def test_a_name_is_imported_at_its_first_use() -> None:
    loaded = _loaded_after("import pysolate\npysolate.Host")
    assert "pysolate._run._host" in loaded and "networkx" in loaded


@pytest.mark.parametrize("package", ["pysolate", "pysolate.streams"])
def test_every_public_name_resolves_and_dir_lists_it(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        module.nope  # noqa: B018
