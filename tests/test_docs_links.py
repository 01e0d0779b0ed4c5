"""The documentation links only inside the repository, and every link it makes resolves.

A reader of a clone (or of the repository's web view) has the repository and nothing else:
a link to a sibling checkout (``../shared/...``), a machine path or a web page is one the
documents cannot keep (issue 39). Relative links are checked against the files, and a
``#fragment`` against the headings of the Markdown file it names, slugged as GitHub does.
The module docstrings cite ``docs/`` too, never the design notes outside the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted(
    [ROOT / "README.md", ROOT / "examples" / "README.md", *(ROOT / "docs").rglob("*.md")]
)

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _prose(text: str) -> str:
    """The text with fenced code blocks and code spans blanked: links inside them are code."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    """Every link target of a Markdown text: inline links, images and reference definitions."""
    prose = _prose(text)
    return [*_INLINE.findall(prose), *_REFERENCE.findall(prose)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes for a Markdown file's headings (repeats get ``-1``, ``-2`` ...)."""
    seen: dict[str, int] = {}
    out = set()
    for _, heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def problem(document: Path, target: str) -> str | None:
    """Why ``target``, linked from ``document``, is not a link inside the repository, or None."""
    if _SCHEME.match(target) or target.startswith("//"):
        return "leaves the repository (a URL)"
    if target.startswith("/"):
        return "is an absolute path"
    path_part, _, fragment = target.partition("#")
    resolved = (document.parent / path_part).resolve() if path_part else document
    if not resolved.is_relative_to(ROOT):
        return "leaves the repository"
    if not resolved.exists():
        return "names no file"
    if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
        return f"names no heading of {resolved.relative_to(ROOT)}"
    return None


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """Each kind of bad link is found, and a good one passes (the checker itself can fail)."""
    text = (
        "See [a](docs/x.md#two-words), [b](../shared/DESIGN.md), [c](https://example.org),\n"
        "[d](/etc/passwd), [e](docs/x.md#nowhere), [f](missing.md) and ![g](docs/x.md).\n"
        "`[not a link](../outside.md)`\n\n```\n[nor this](../outside.md)\n```\n[h]: ../../far.md\n"
    )
    assert links(text) == [
        "docs/x.md#two-words", "../shared/DESIGN.md", "https://example.org", "/etc/passwd",
        "docs/x.md#nowhere", "missing.md", "docs/x.md", "../../far.md",
    ]  # fmt: skip
    document = ROOT / "README.md"
    assert problem(document, "docs/glossary.md") is None
    assert problem(document, "docs/contract.md#time") is None
    assert problem(document, "docs/contract.md#nowhere") == "names no heading of docs/contract.md"
    assert problem(document, "../shared/DESIGN.md") == "leaves the repository"
    assert problem(document, "https://example.org") == "leaves the repository (a URL)"
    assert problem(document, "/etc/passwd") == "is an absolute path"
    assert problem(document, "docs/missing.md") == "names no file"
    assert slug("Bounds: what one value and one run may cost the Host") == (
        "bounds-what-one-value-and-one-run-may-cost-the-host"
    )
    assert slug("`namespaces`: the init, no reaper") == "namespaces-the-init-no-reaper"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_stays_in_the_repository_and_resolves(document: Path) -> None:
    bad = {
        target: why
        for target in links(document.read_text(encoding="utf-8"))
        if (why := problem(document, target)) is not None
    }
    assert not bad, f"{document.relative_to(ROOT)}: {bad}"


def test_modules_cite_the_repository_docs_not_the_design_notes() -> None:
    citing = {
        str(path.relative_to(ROOT))
        for package in ("occurrences", "scheduler", "pysolate")
        for path in (ROOT / package).rglob("*.py")
        if re.search(r"\b(DESIGN|STYLE)\.md\b", path.read_text(encoding="utf-8"))
    }
    assert citing == set()  # the design notes live outside the repository: cite docs/
