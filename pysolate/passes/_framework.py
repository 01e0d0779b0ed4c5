"""The pass framework: outcomes, text edits, and the re-derivation every rewrite goes through.

A *source pass* looks at the sealed source and returns either a ``Rewrite`` (text edits
plus the law it used and the capability versions it relied on) or ``NotApplicable`` with a
reason. ``apply_source_passes`` turns each rewrite into derived source text, then re-parses
and re-compiles it and checks its identity against the original before anyone runs it:

- every top-level statement keeps its line span, so any error the derived program raises
  is reported on the line the original would have raised it on;
- the derived source introduces no name and no attribute the pass did not declare
  (``Rewrite.introduces``, which only a Host-declared law can fill), so analysis never
  grants authority;
- it compiles under the Guest's filename.

A rewrite failing any check is dropped (``NotApplicable`` with the reason) and the source
stays as it was: the unchanged program is always the fallback. Lane passes (batch fusion)
change physical calls only and report through the same ``Applied`` record.

The outcomes themselves (``Applied``, ``NotApplicable``) are part of the run's report
(``pysolate._report._result``), which lists them.

Prior art: stratum's exact logical rewrites (constant folding, CSE, projection pushdown,
vectorization), admitted here only under the rules of ``seeds/001``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from .._guest_errors import AGENT_FILENAME
from .._report._result import Applied, NotApplicable, PassOutcome
from .._tools._capability import CapabilityMethod
from ..tracing import source_hash


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``source[start:end]`` (character offsets) with ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class Rewrite:
    """What a source pass proposes: edits, the law used, what it relies on and introduces."""

    edits: tuple[Edit, ...]
    law: str
    versions: tuple[str, ...] = ()
    introduces: frozenset[str] = frozenset()  # names/attributes the derived source may add
    detail: str = ""


Capabilities = Mapping[str, Mapping[str, CapabilityMethod]]
"""Capability name → method name → its declaration (laws included)."""


class SourcePass(Protocol):
    """A pass over the sealed source; pure and synchronous, never runs anything."""

    @property
    def name(self) -> str: ...

    def rewrite(
        self, source: str, tree: ast.Module, capabilities: Capabilities
    ) -> Rewrite | NotApplicable: ...


class Offsets:
    """(line, column) in ``ast`` terms → character offset in the source."""

    def __init__(self, source: str) -> None:
        self._starts = [0]
        for line in source.splitlines(keepends=True):
            self._starts.append(self._starts[-1] + len(line))
        self._lines = source.splitlines(keepends=True)

    def at(self, lineno: int, col: int) -> int:
        """``col`` is a UTF-8 byte offset (as ``ast`` reports it)."""
        line = self._lines[lineno - 1] if lineno - 1 < len(self._lines) else ""
        chars = len(line.encode("utf-8", "surrogatepass")[:col].decode("utf-8", "surrogatepass"))
        return self._starts[lineno - 1] + chars

    def span(self, node: ast.expr | ast.stmt) -> tuple[int, int]:
        assert node.end_lineno is not None and node.end_col_offset is not None
        return self.at(node.lineno, node.col_offset), self.at(node.end_lineno, node.end_col_offset)


def same_lines(text: str, replaced: str) -> str:
    """``text`` spread over as many lines as ``replaced`` (parenthesised when it must be),
    so every later line keeps its number."""
    extra = replaced.count("\n") - text.count("\n")
    if extra <= 0:
        return text
    return "(" + text + "\n" * extra + ")"


def apply_edits(source: str, edits: Sequence[Edit]) -> str:
    """``source`` with non-overlapping ``edits`` applied. Raises ``ValueError`` on overlap."""
    out, at = [], 0
    for edit in sorted(edits, key=lambda e: e.start):
        if edit.start < at:
            raise ValueError("overlapping edits")
        out.append(source[at : edit.start])
        out.append(edit.text)
        at = edit.end
    out.append(source[at:])
    return "".join(out)


def _identifiers(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg is not None:
            found.add(node.arg)
    return found


def derive(
    name: str, source: str, tree: ast.Module, rewrite: Rewrite
) -> tuple[str, ast.Module] | NotApplicable:
    """The derived source and its tree, or why the rewrite is refused (see module docstring)."""
    try:
        derived = apply_edits(source, rewrite.edits)
        new_tree = ast.parse(derived, AGENT_FILENAME, "exec")
        compile(new_tree, AGENT_FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return NotApplicable(name, f"derived source does not compile: {exc}")
    spans = [(s.lineno, s.end_lineno) for s in tree.body]
    if spans != [(s.lineno, s.end_lineno) for s in new_tree.body]:
        return NotApplicable(name, "derived source moves statements to other lines")
    added = _identifiers(new_tree) - _identifiers(tree) - rewrite.introduces
    if added:
        return NotApplicable(name, f"derived source introduces {sorted(added)}")
    return derived, new_tree


@dataclass(frozen=True, slots=True)
class SourcePassRun:
    """The program to run and what each pass did (in order)."""

    source: str
    outcomes: tuple[PassOutcome, ...]


def apply_source_passes(
    source: str, tree: ast.Module, passes: Sequence[SourcePass], capabilities: Capabilities
) -> SourcePassRun:
    """Run ``passes`` in order, each on the previous one's derived source.

    ``tree`` is the sealed tree of ``source``. A pass that raises is a bug, reported as
    ``NotApplicable`` (the unchanged source runs) rather than failing the run.
    """
    outcomes: list[PassOutcome] = []
    for p in passes:
        try:
            proposal = p.rewrite(source, tree, capabilities)
        except Exception as exc:  # a pass bug must never change or stop the run
            proposal = NotApplicable(p.name, f"pass failed: {type(exc).__name__}: {exc}")
        if isinstance(proposal, NotApplicable):
            outcomes.append(proposal)
            continue
        result = derive(p.name, source, tree, proposal)
        if isinstance(result, NotApplicable):
            outcomes.append(result)
            continue
        derived, new_tree = result
        outcomes.append(
            Applied(
                p.name,
                source_hash(source),
                source_hash(derived),
                proposal.law,
                proposal.versions,
                proposal.detail,
            )
        )
        source, tree = derived, new_tree
    return SourcePassRun(source, tuple(outcomes))
