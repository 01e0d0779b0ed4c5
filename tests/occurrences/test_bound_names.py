"""``bound_names``: the one answer to "which names may this code bind" (issue 39, item 5),
shared by discovery (what it forgets) and the projection pass (what it refuses)."""

from __future__ import annotations

import ast

from occurrences import bound_names

SOURCE = """
a = 1
b, *c = x
d += 1
e: int = 2
(f := 3)
del g
for h in y: pass
with open(p) as i: pass
def j(k, *l, m=1, **n): o = 1
class P: q = 1
lambda r: r
import s.t
import u as v
from w import z as zz
try: pass
except E as ex: pass
match x:
    case [cap, *rest]: pass
    case {"k": 1, **more}: pass
    case Point(x=px) | Point(y=px): pass
def outer():
    global gl
    nonlocal_free = 1
    def inner():
        nonlocal nonlocal_free
"""

WITHOUT_PARAMETERS = {
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "i",
    "j",
    "o",
    "P",
    "q",
    "s",
    "v",
    "zz",
    "ex",
    "cap",
    "rest",
    "more",
    "px",
    "outer",
    "gl",
    "nonlocal_free",
    "inner",
}


def test_every_binding_form_is_found() -> None:
    assert bound_names([ast.parse(SOURCE)]) == WITHOUT_PARAMETERS


def test_parameters_are_added_on_request() -> None:
    assert bound_names([ast.parse(SOURCE)], parameters=True) == WITHOUT_PARAMETERS | {
        "k",
        "l",
        "m",
        "n",
        "r",
    }


def test_reads_are_not_bindings() -> None:
    assert bound_names([ast.parse("print(a.b, c[d], e)\nf.g = 1\nh[i] = 2")]) == set()
