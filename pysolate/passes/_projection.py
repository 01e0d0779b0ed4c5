"""``capability_projection_pushdown``: serve ``cap.m(args).splitlines()[:n]`` by a cheaper call.

The Host declares the law on the method (``ProjectionLaw``): ``cap.m(*a, **k).splitlines()[:n]``
≡ ``cap.<method>(*a, **k, <limit>=n)`` for a non-negative int literal ``n``, the same value
and the same exception. The pass rewrites only call sites of exactly that shape, so the
call's result is used through the projection and nothing else; any other use, any other
slice, a starred argument, or a capability name the program may rebind leaves that site
alone, and with no site left the pass is ``not_applicable``.

How a pushed-down call appears in the call log (a decision, see docs/passes.md): the
receipt is the call the Guest really made, ``cap.<method>(..., limit=n)`` with its
(smaller) result. The log of a run with this pass therefore differs from the unrewritten
sequential log exactly at the pushed-down sites, and there by the declared law: same
capability, same arguments plus ``limit=n``, and result ``= law(result of the original)``
(or the same error). A receipt cannot keep the original method *and* an identical result
without reading the whole value, which is the cost the pass exists to avoid; so the pass is
off by default, and the run report lists every site it rewrote.

Every edit is local (the method name, one inserted keyword, the removed projection), so no
argument moves to another line and every error keeps its line.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence
from dataclasses import dataclass

from occurrences import bound_names

from .._tools._capability import ProjectionLaw
from ._framework import Capabilities, Edit, NotApplicable, Offsets, Rewrite

_REBINDERS = frozenset(
    {
        "globals", "locals", "vars", "exec", "eval", "compile", "__import__", "__builtins__",
        "setattr", "getattr", "delattr", "breakpoint",
    }
)  # fmt: skip
"""Names through which a program could rebind a global behind the AST's back (so could an
import, e.g. ``inspect``, or an underscore attribute such as ``__dict__``: both refused too)."""


def _reaches_globals(tree: ast.Module) -> str | None:
    """Why the program might rebind a capability name without an assignment, or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            return f"line {node.lineno}: the program imports"
        if isinstance(node, ast.Name) and node.id in _REBINDERS:
            return f"line {node.lineno}: the program uses {node.id}"
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return f"line {node.lineno}: the program reads attribute {node.attr}"
    return None


@dataclass(frozen=True, slots=True)
class _Site:
    subscript: ast.Subscript
    call: ast.Call
    capability: str
    method: str
    limit: int


def _match(node: ast.AST) -> _Site | None:
    """``NAME.m(...).splitlines()[:n]`` with a non-negative int literal ``n``, else None."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Slice):
        return None
    sl = node.slice
    if sl.lower is not None or sl.step is not None or not isinstance(sl.upper, ast.Constant):
        return None
    n = sl.upper.value
    if type(n) is not int or n < 0:
        return None
    split = node.value
    if not (
        isinstance(split, ast.Call)
        and not split.args
        and not split.keywords
        and isinstance(split.func, ast.Attribute)
        and split.func.attr == "splitlines"
    ):
        return None
    call = split.func.value
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
    ):
        return None
    return _Site(node, call, call.func.value.id, call.func.attr, n)


@dataclass(frozen=True, slots=True)
class ProjectionPushdown:
    """Rewrite call sites used only through a declared projection to the cheaper method."""

    name: str = "capability_projection_pushdown"

    def rewrite(
        self, source: str, tree: ast.Module, capabilities: Capabilities
    ) -> Rewrite | NotApplicable:
        sites = [
            s for s in map(_match, ast.walk(tree)) if s is not None and s.capability in capabilities
        ]
        if not sites:
            return NotApplicable(
                self.name, "no capability call used only through .splitlines()[:n]"
            )
        bound = bound_names([tree], parameters=True)
        why = _reaches_globals(tree)
        if why is not None:
            return NotApplicable(self.name, why)
        offsets = Offsets(source)
        edits: list[Edit] = []
        versions: set[str] = set()
        introduces: set[str] = set()
        refused: list[str] = []
        pushed: list[int] = []  # line of each rewritten site
        for site in sites:
            method = capabilities[site.capability].get(site.method)
            law = method.projection if method is not None else None
            where = f"line {site.call.lineno}: {site.capability}.{site.method}"
            if method is None or law is None:
                refused.append(f"{where} declares no projection law")
                continue
            target = capabilities[site.capability][law.method]
            reason = self._refusal(site, law, bound, source, offsets)
            if reason is not None:
                refused.append(f"{where}: {reason}")
                continue
            edits.extend(self._edits(site, law, source, offsets))
            pushed.append(site.call.lineno)
            versions.update(
                {
                    f"{site.capability}.{site.method}@{method.version}",
                    f"{site.capability}.{law.method}@{target.version}",
                    f"{site.capability}.{site.method}.projection@{law.version}",
                }
            )
            introduces.update({law.method, law.limit})
        if not edits:
            return NotApplicable(self.name, "; ".join(refused))
        detail = (
            f"{len(pushed)} site(s) pushed down, at line(s) {', '.join(map(str, sorted(pushed)))}"
        )
        if refused:
            detail += f"; left alone: {'; '.join(refused)}"
        return Rewrite(
            tuple(edits),
            law="m(*a, **k).splitlines()[:n] == method(*a, **k, limit=n)",
            versions=tuple(sorted(versions)),
            introduces=frozenset(introduces),
            detail=detail,
        )

    @staticmethod
    def _refusal(
        site: _Site, law: ProjectionLaw, bound: set[str], source: str, offsets: Offsets
    ) -> str | None:
        if site.capability in bound:
            return f"the program may rebind {site.capability!r}"
        call = site.call
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            return "starred arguments"
        if any(k.arg == law.limit for k in call.keywords):
            return f"already passes {law.limit!r}"
        call_end = offsets.span(call)[1]
        if "\n" in source[call_end : offsets.span(site.subscript)[1]]:
            return "the projection spans lines"
        return None

    @staticmethod
    def _edits(site: _Site, law: ProjectionLaw, source: str, offsets: Offsets) -> list[Edit]:
        call, func = site.call, site.call.func
        assert isinstance(func, ast.Attribute)
        name_end = offsets.span(func)[1]
        call_end = offsets.span(call)[1]
        paren = call_end - 1  # the call's closing parenthesis
        arguments = [*call.args, *call.keywords]
        if not arguments:
            keyword = f"{law.limit}={site.limit}"
        else:
            last_end = max(offsets.span(a)[1] for a in arguments)  # type: ignore[arg-type]
            comma = "," in source[last_end:paren]
            keyword = f" {law.limit}={site.limit}" if comma else f", {law.limit}={site.limit}"
        return [
            Edit(name_end - len(site.method), name_end, law.method),
            Edit(paren, paren, keyword),
            Edit(call_end, offsets.span(site.subscript)[1], ""),
        ]


def speculative_statements(
    statements: Sequence[ast.stmt], capabilities: Capabilities
) -> list[ast.stmt]:
    """Accepted statements as the speculative lane should read them with the pass on: sites
    of declared projections call the cheaper method, so early work matches the calls the
    derived program will make.

    Only a guess for speculation (the seal-time ``ProjectionPushdown`` decides what the
    Guest runs, and claims are by exact key): a wrong guess costs an unclaimed early read,
    never a different result. Statements without a site are returned as they are.
    """
    out: list[ast.stmt] = []
    for stmt in statements:
        sites = [
            s
            for s in map(_match, ast.walk(stmt))
            if s is not None and _law(s, capabilities) is not None
        ]
        if not sites:
            out.append(stmt)
            continue
        out.append(_Substitute(capabilities).visit(copy.deepcopy(stmt)))
    return out


def _law(site: _Site, capabilities: Capabilities) -> ProjectionLaw | None:
    method = capabilities.get(site.capability, {}).get(site.method)
    return method.projection if method is not None else None


class _Substitute(ast.NodeTransformer):
    def __init__(self, capabilities: Capabilities) -> None:
        self._capabilities = capabilities

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        site = _match(node)
        law = _law(site, self._capabilities) if site is not None else None
        if site is None or law is None:
            return node
        call, func = site.call, site.call.func
        assert isinstance(func, ast.Attribute)
        keyword = ast.keyword(law.limit, ast.copy_location(ast.Constant(site.limit), node))
        new_func = ast.copy_location(ast.Attribute(func.value, law.method, ast.Load()), func)
        new_call = ast.Call(new_func, call.args, [*call.keywords, ast.copy_location(keyword, node)])
        return ast.copy_location(new_call, node)
