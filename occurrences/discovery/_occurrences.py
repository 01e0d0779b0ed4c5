"""One arrival at a capability call site becomes an ``Occurrence``, reported to the sink.

``_occurrence`` names the site and path, collects the data dependencies (earlier
occurrences whose results its arguments read) and control dependencies (those deciding an
enclosing branch), decides whether it is *pre-write* (no possibly-overlapping write of its
capability precedes it, ``_scopes``), and reports its arguments once the results they read
are in, evaluated exactly (``evaluator``). Only a pre-write, speculable call's result can
stand in the program's bindings (``Result``); any other reads as ``UNKNOWN``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .._exceptions import NotKnown
from ..evaluator import UNKNOWN, evaluate_call_arguments, free_names
from ._bindings import (
    EVALUATION_LIMITS,
    Binding,
    CapabilityRef,
    FunctionRef,
    MethodRef,
    Mutated,
    Result,
    evaluator_env,
    producers_of,
    resolve,
)
from ._control import (
    _Context,
    _substitute,
)
from ._effect import Effect
from ._effects import _Effects
from ._model import MethodSpec, Occurrence, OccurrenceId, Site
from ._scopes import Everything, Prior, may_see, scope_path


class _Occurrences(_Effects):
    """Capability calls as occurrences; ``_Expressions`` finds them in expressions."""

    def _occurrence(
        self,
        call: ast.Call,
        capability: str,
        method: str,
        ctx: _Context,
        subst: dict[int, tuple[str, Binding]],
    ) -> Binding:
        spec = self._capabilities.get(capability, {}).get(method)
        effect = spec.effect if spec is not None else Effect.UNKNOWN
        prior = ctx.written.prior(capability)
        scope: Binding = UNKNOWN  # the value of the declared scope argument, where it matters
        if (
            ctx.emit  # a body followed once for its effects may run with other values
            and spec is not None
            and spec.scope is not None
            and effect is not Effect.UNKNOWN
            and (effect.may_write or (prior and not isinstance(prior, Everything)))
        ):
            scope = self._scope_argument(call, spec, ctx, subst)
        if effect.may_write:
            # Only a scope known now narrows a write: waiting would make what follows
            # depend on when results arrive.
            ctx.written.add_scoped(
                capability,
                None if producers_of(scope) else scope_path(resolve(scope, self._results)),
            )
        if not ctx.emit:
            # Unknown, but plain data of its own: the Guest gets every result fresh.
            return Mutated(frozenset({self._origin(call)}))
        if ctx.path and not self._may_expand(1):
            return UNKNOWN
        site = Site(
            capability,
            method,
            call.lineno,
            call.col_offset,
            call.end_lineno if call.end_lineno is not None else call.lineno,
            call.end_col_offset if call.end_col_offset is not None else call.col_offset,
            ctx.control,
        )
        oid = OccurrenceId(site, ctx.path)
        args_call: ast.AST = call
        synthetic: dict[str, Binding] = {}
        if subst:
            args_call = _substitute(call, {k: name for k, (name, _) in subst.items()})
            synthetic = dict(subst.values())
        assert isinstance(args_call, ast.Call)
        captured: dict[str, Binding] = {}
        data: frozenset[OccurrenceId] = frozenset()
        for name in free_names(args_call):
            b = synthetic.get(name) if name in synthetic else ctx.scope.lookup(name)
            if b is None or isinstance(b, CapabilityRef | MethodRef | FunctionRef):
                continue
            captured[name] = b
            p = producers_of(b)
            if p:
                data = data | p
        control: frozenset[OccurrenceId] = frozenset()
        for branch in ctx.branches:
            if branch.producers:  # decided or not: the graph's shape must not depend on timing
                control = control | branch.producers
        pre_write, overlapping = self._pre_write(prior, scope, effect)
        discardable, dead = self._control_of(ctx.branches)
        occurrence = Occurrence(
            oid, effect, pre_write, data, control, discardable, dead, self._order
        )
        self._order += 1
        if ctx.branches:
            self._branches_of[oid] = ctx.branches
            for branch in ctx.branches:
                branch.members.append(oid)
        self._sink.discovered(occurrence)
        final_call = args_call
        self._when_known(data, lambda: self._arguments(oid, final_call, captured, overlapping))
        return Result(oid) if effect.speculable and pre_write else UNKNOWN

    def _scope_argument(
        self, call: ast.Call, spec: MethodSpec, ctx: _Context, subst: dict[int, tuple[str, Binding]]
    ) -> Binding:
        """The binding of the argument ``call`` passes for ``spec.scope``; ``UNKNOWN`` when
        it cannot be told from the source (``*args``/``**kwargs``, omitted for its default,
        passed twice)."""
        found: ast.expr | None = None
        for keyword in call.keywords:
            if keyword.arg is None:
                return UNKNOWN
            if keyword.arg == spec.scope:
                found = keyword.value
        position = spec.scope_position
        if position is not None:
            if any(isinstance(a, ast.Starred) for a in call.args):
                return UNKNOWN
            if position < len(call.args):
                if found is not None:
                    return UNKNOWN
                found = call.args[position]
        return UNKNOWN if found is None else self._value(found, ctx, subst)

    def _pre_write(
        self, prior: Prior, scope: Binding, effect: Effect
    ) -> tuple[bool, Callable[[], bool] | None]:
        """Whether a call of ``scope`` after the writes ``prior`` is pre-write, and, when that
        waits on results its scope reads, the test to apply once they are in (the call is
        then provisionally pre-write)."""
        if not prior:
            return True, None
        if isinstance(prior, Everything) or scope is UNKNOWN:
            return False, None
        if not producers_of(scope):
            return not may_see(prior, scope_path(resolve(scope, self._results))), None
        if not effect.speculable:
            return False, None  # never early anyway: nothing to wait for
        return True, lambda: may_see(prior, scope_path(resolve(scope, self._results)))

    def _arguments(
        self,
        oid: OccurrenceId,
        call: ast.Call,
        captured: dict[str, Binding],
        overlapping: Callable[[], bool] | None = None,
    ) -> None:
        """Report the call's arguments, or that they are unknown - also when ``overlapping``
        finds that a write before it may have changed what it reads (it is not pre-write:
        it must never run early, and what reads its result is unknown)."""
        try:
            args, kwargs = evaluate_call_arguments(
                call, evaluator_env(captured, self._results), limits=EVALUATION_LIMITS
            )
        except (NotKnown, RecursionError):
            self._sink.arguments_unknown(oid)
            return
        if overlapping is not None and overlapping():
            self._sink.arguments_unknown(oid)
            return
        self._sink.arguments_known(oid, args, kwargs)
