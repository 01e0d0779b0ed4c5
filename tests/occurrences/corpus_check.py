"""Stream the running interpreter's standard library through PrefixParser and compare.

Standard library only (plus ``occurrences``), so any installed CPython can run it with
``PYTHONPATH=<repo root>``: the cross-version test spawns python3.12 / python3.13 on it,
and ``benchmarks/parser.py`` reuses its corpus loader.

    python tests/occurrences/corpus_check.py [--sample N] [--seed S]

prints one JSON object: counts and the first mismatches (an empty list means exact).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import random
import re
import sys
import sysconfig
import tokenize
import warnings
from collections.abc import Iterator

from occurrences import PrefixParser, SealError

KNOWN_REJECTED = frozenset({"badsyntax_3131.py", "py2_test_grammar.py", "crlf.py", "bom.py"})
"""Stdlib files that ``ast.parse`` rejects on 3.11-3.13 (the sample includes two of them)."""


def stdlib_files() -> list[str]:
    """Every ``.py`` file under the running interpreter's stdlib, sorted."""
    root = sysconfig.get_paths()["stdlib"]
    found: list[str] = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d != "site-packages")
        found.extend(os.path.join(directory, n) for n in names if n.endswith(".py"))
    return sorted(found)


def read_source(path: str) -> str | None:
    """The file's text as the interpreter would decode it (None if it cannot be decoded)."""
    try:
        with open(path, "rb") as fh:
            encoding, _ = tokenize.detect_encoding(fh.readline)
        with open(path, encoding=encoding, newline="") as fh:
            return fh.read()
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def sample(files: list[str], count: int, seed: int, largest: int = 5) -> list[str]:
    """``count`` files: the ``largest`` biggest (the worst cases), two files CPython rejects
    (so must close()), and a seeded random rest."""
    if count >= len(files):
        return files
    by_size = sorted(files, key=os.path.getsize, reverse=True)
    chosen = by_size[: min(largest, count)]
    broken = [f for f in files if os.path.basename(f) in KNOWN_REJECTED]
    chosen += random.Random(seed).sample(broken, min(2, len(broken), count - len(chosen)))
    rest = [f for f in files if f not in chosen]
    return chosen + random.Random(seed).sample(rest, count - len(chosen))


def chunks(source: str, rng: random.Random, low: int = 1, high: int = 16) -> Iterator[str]:
    i = 0
    while i < len(source):
        n = rng.randint(low, high)
        yield source[i : i + n]
        i += n


_LINE_END = re.compile(r"\r\n|\r|\n")
_COMPOUND = tuple(
    getattr(ast, name)
    for name in (
        "If",
        "For",
        "AsyncFor",
        "While",
        "With",
        "AsyncWith",
        "Try",
        "TryStar",
        "FunctionDef",
        "AsyncFunctionDef",
        "ClassDef",
        "Match",
    )
    if hasattr(ast, name)
)


def physical_lines(source: str) -> list[str]:
    """Lines as the tokenizer ends them (only ``\r\n``, ``\r``, ``\n``), with terminators."""
    out, pos = [], 0
    for m in _LINE_END.finditer(source):
        out.append(source[pos : m.end()])
        pos = m.end()
    if pos < len(source):
        out.append(source[pos:])
    return out


def due_offsets(source: str, body: list[ast.stmt]) -> dict[int, int]:
    """Statement index -> offset just after the ``\n`` that ends its logical line, for
    every simple statement whose logical line starts at column 0 on a line of its own (not
    after a backslash line): the chunk that reaches that offset must accept it."""
    lines = physical_lines(source)
    starts = list(itertools.accumulate((len(line) for line in lines), initial=0))
    # Statements on one logical line (``a; b``, or ``a; \`` continued) end together.
    ends = [s.end_lineno or s.lineno for s in body]
    for i in range(len(body) - 2, -1, -1):
        if body[i + 1].lineno <= ends[i]:
            ends[i] = max(ends[i], ends[i + 1])
    due: dict[int, int] = {}
    first = 0
    for index, stmt in enumerate(body):
        if index and stmt.lineno > ends[index - 1]:
            first = index  # the first statement of its logical line
        if isinstance(stmt, _COMPOUND):
            continue
        start = body[first].lineno
        line = lines[start - 1]
        if body[first].col_offset != 0 or line[:1] in ("", " ", "\t", "\x0c", "\\", "#"):
            continue
        if start > 1 and lines[start - 2].rstrip("\r\n").endswith("\\"):
            continue
        last = lines[ends[index] - 1]
        if last.endswith("\n") and not last.rstrip("\r\n").endswith("\\"):
            due[index] = starts[ends[index]]
    return due


def _error_fields(exc: SyntaxError) -> list[object]:
    return [exc.msg, exc.lineno, exc.offset, exc.end_lineno, exc.end_offset]


def check_source(
    source: str, rng: random.Random, low: int = 1, high: int = 16
) -> tuple[bool, str | None]:
    """Whether CPython accepts ``source``, and None if streaming it is exact (else the
    first difference)."""
    body: list[ast.stmt] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            body = ast.parse(source).body
            expected: list[str] | list[object] = [
                ast.dump(s, include_attributes=True) for s in body
            ]
            valid = True
        except SyntaxError as exc:
            expected, valid = _error_fields(exc), False
        except ValueError as exc:
            expected, valid = [str(exc)], False
    due = sorted((offset, index) for index, offset in due_offsets(source, body).items())
    parser = PrefixParser()
    count = fed = 0
    for piece in chunks(source, rng, low, high):
        snap = parser.feed(piece)
        fed += len(piece)
        if not valid:
            continue
        if snap is not None:
            new = [ast.dump(s, include_attributes=True) for s in snap.new_statements]
            if snap.first_new != count or not new:
                return valid, f"snapshot did not grow from {count}"
            if new != expected[count : count + len(new)]:
                return valid, f"snapshot statements {count}..{count + len(new)} differ"
            count += len(new)
        while due and due[0][0] <= fed:
            _, index = due.pop(0)
            if count <= index:
                return valid, f"statement {index} was not accepted in the chunk ending its line"
    try:
        final = parser.close()
    except SealError as exc:
        if valid:
            return valid, f"SealError on a valid file: {exc!r}"
        got = _error_fields(exc) if len(expected) > 1 else [exc.msg]
        return valid, None if got == expected else f"error {got} != CPython's {expected}"
    if not valid:
        return valid, f"accepted a file CPython rejects with {expected}"
    if parser.statistics().whole_parses:
        return valid, "valid file needed the whole-source fallback"
    if count >= len(expected) and expected and isinstance(body[-1], _COMPOUND):
        return valid, "the last (compound) statement was accepted before close()"
    if [ast.dump(s, include_attributes=True) for s in final.statements] != expected:
        return valid, "final statements differ"
    return valid, None


SNIPPETS: tuple[str, ...] = (
    "x = 1\ntype Alias[T: int] = list[T]\ndef f[T](a: T) -> T:\n    return a\ny = 2\n",
    "x = 1\nclass C[*Ts, **P]:\n    pass\ny = 2\n",
    'x = 1\ns = f"{d["k"]:{w}} {x # c\n}"\ny = 2\n',
    "x = 1\ns = f'{x:\n}' f'{1 +\n 2}' f'{f'{y!r:>{w}}'}'\ny = 2\n",
    "x = 1\ns = f'{x:>{w}\n}'\ny = 2\n",
    "x = 1\ns = f'\\N{BULLET} {{}} \\{x}' rf'\\N{x}'\ny = 2\n",
    "x = 1\ns = f'''{\nx\n:\n}'''\ny = 2\n",
    "x = 1\ns = f'{x:{{}}}' + f'{x!r}' + f'{a:=3}'\ny = 2\n",
)
"""Sources whose meaning differs across 3.11-3.13 (PEP 695 generics, PEP 701 f-strings):
each interpreter must agree with its own ``ast.parse``, accepting or rejecting."""


def run(files: list[str], seed: int) -> dict[str, object]:
    valid = rejected = unreadable = 0
    mismatches: list[str] = []
    for index, snippet in enumerate(SNIPPETS):
        for size in (1, 2, 3, 5, 8, 13):
            _, problem = check_source(snippet, random.Random(seed), low=size, high=size)
            if problem:
                mismatches.append(f"snippet {index} in chunks of {size}: {problem}")
    for path in files:
        source = read_source(path)
        if source is None:
            unreadable += 1
            continue
        accepted, problem = check_source(source, random.Random(f"{seed}:{path}"))
        if problem:
            mismatches.append(f"{path}: {problem}")
        if accepted:
            valid += 1
        else:
            rejected += 1
    return {
        "python": sys.version.split()[0],
        "files": len(files),
        "valid": valid,
        "rejected": rejected,
        "unreadable": unreadable,
        "mismatches": mismatches[:20],
        "mismatch_count": len(mismatches),
    }


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--sample", type=int, default=0, help="files to check (0: all)")
    cli.add_argument("--seed", type=int, default=0)
    cli.add_argument("--largest", type=int, default=5, help="of which the biggest files")
    args = cli.parse_args(argv)
    files = stdlib_files()
    if args.sample:
        files = sample(files, args.sample, args.seed, args.largest)
    report = run(files, args.seed)
    print(json.dumps(report))
    return 1 if report["mismatch_count"] else 0


if __name__ == "__main__":
    sys.exit(main())
