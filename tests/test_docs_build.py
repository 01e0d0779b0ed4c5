"""The documentation site builds with warnings as errors, and its API reference shows every
public name with a docstring (issue 39).

``mkdocs build --strict`` (``mkdocs.yml``, the ``docs`` extra) renders ``docs/`` and, through
mkdocstrings, the docstrings of the ``::: module`` pages under ``docs/api/``. A public name is
one a public module exports: ``__all__`` (for the lazy packages, the same list as their
``TYPE_CHECKING`` block, which ``pysolate._lazy`` checks), else its top-level functions and
classes not named with an underscore; a public module is one no part of whose dotted path
starts with an underscore. So a new public module or name fails here until the reference
shows it. What the user sees is checked: the anchors of the built pages, and the docstrings
as griffe reads them, which is what the pages render (a constant's docstring is the string
after it, which only the source has).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
griffe = pytest.importorskip("griffe", reason="the docs extra: pip install -e '.[docs]'")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("occurrences", "scheduler", "pysolate")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def public_modules() -> dict[str, Path]:
    """Dotted name -> source file of every public module and package of the three packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if not any(part.startswith("_") for part in parts):
                found[".".join(parts)] = path
    return found


def exported(path: Path) -> list[str]:
    """A module's public names: its ``__all__``, else its own public functions and classes."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert node.value is not None
            return list(ast.literal_eval(node.value))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not node.name.startswith("_")
    ]


def public_names() -> dict[str, list[str]]:
    """Module -> the names it exports that no enclosing public package exports too (those
    appear under the package: ``occurrences.PrefixParser``, not ``occurrences.parser.PrefixParser``)."""
    modules = public_modules()
    names = {module: exported(path) for module, path in modules.items()}
    own = {}
    for module, exports in names.items():
        parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
        shared = {name for parent in parents if parent in names for name in names[parent]}
        own[module] = [name for name in exports if name not in shared]
    return own


def anchors(site: Path) -> set[str]:
    return {
        anchor
        for page in (site / "api").rglob("*.html")
        for anchor in re.findall(r'id="([^"]+)"', page.read_text(encoding="utf-8"))
    }


def test_the_public_surface_is_what_the_checks_expect() -> None:
    """The walk finds the namespaces users import (so the tests below check something)."""
    names = public_names()
    for module in ("pysolate", "pysolate.streams", "pysolate.tracing", "pysolate.testing", "pysolate.passes",
                   "pysolate.ray", "pysolate.mcp", "pysolate.integrations.pydantic_ai", "occurrences", "scheduler"):  # fmt: skip
        assert names[module], module
    assert "Host" in names["pysolate"] and "PrefixParser" in names["occurrences"]
    assert "pysolate_replay" in names["pysolate.streams.pytest_plugin"]  # a module without __all__
    assert not names["occurrences.parser"]  # all of it is exported by occurrences itself
    assert sum(map(len, names.values())) > 150


def test_the_site_builds_with_warnings_as_errors(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "api" / "pysolate" / "index.html").is_file()


def test_every_public_name_appears_in_the_api_reference(site: Path) -> None:
    """Each public module with names of its own, and each of those names, has an anchor."""
    expected = set()
    for module, names in public_names().items():
        if names:
            expected |= {module, *(f"{module}.{name}" for name in names)}
    missing = sorted(expected - anchors(site))
    assert not missing, f"not in the API reference (add a ::: line under docs/api/): {missing}"


def test_every_public_name_has_a_docstring() -> None:
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)])
    packages = {package: loader.load(package) for package in PACKAGES}
    loader.resolve_aliases(external=False)
    undocumented = []
    for module, names in public_names().items():
        top, _, rest = module.partition(".")
        namespace = packages[top]
        for part in rest.split(".") if rest else []:
            namespace = namespace[part]
        for name in [None, *names] if names else []:
            found = namespace if name is None else namespace[name]
            target = found.final_target if found.is_alias else found
            if not (target.docstring and target.docstring.value.strip()):
                undocumented.append(module if name is None else f"{module}.{name}")
    assert not undocumented, f"public names without a docstring: {undocumented}"
