"""Turn a source text into a stream that looks like a model producing it.

For demos and benchmarks the interesting property of an LLM stream is *where* chunk
boundaries fall, because that decides when a statement becomes complete. Code tokenizers
(BPE) cut code into pieces of about 1 to 6 characters: a word with its leading space
(``" docs"``), sub-words of long identifiers (``"read"``, ``"_text"``), single or fused
operators (``"=="``, ``"("``, ``"):"``), short digit groups, and a newline fused with the
next line's indentation (``"\\n    "``). This module reproduces those shapes with a
regular expression and a seeded RNG for the sub-word cuts, without shipping a tokenizer.
"""

from __future__ import annotations

import math
import random
import re
from typing import Final

from ._recording import Chunk

MAX_WORD_PIECE: Final = 6
"""Longest piece of a word or number; longer words are cut at random into 2..6 chars."""

MIN_WORD_PIECE: Final = 2
"""Shortest piece a long word is cut into (except a final remainder)."""

MAX_SPACE_PIECE: Final = 16
"""Longest whitespace token (a newline plus deep indentation is one token up to this)."""

MAX_DIGITS: Final = 3
"""Numbers stream in groups of at most this many digits, as BPE vocabularies store them."""

_PIECE = re.compile(
    r"""
      \n[ \t]*                              # a newline with the next line's indentation
    | [ \t]*[^\W\d]\w*                      # a word with its leading spaces
    | [ \t]*\d+                             # a number's digits
    | [ \t]*(?:\*\*=|//=|>>=|<<=|\.\.\.     # fused operators and brackets
        |->|:=|==|!=|<=|>=|\*\*|//|<<|>>|[-+*/%&|^@]=
        |\(\)|\):|\("|"\)|\('|'\)|\[\]|\),|\],|\{\}|""\"|''')
    | [ \t]*[^\w\s]                         # one punctuation character
    | [ \t]+                                # spaces at the end of a line
    | .                                     # anything else (a lone \r, a control character)
    """,
    re.VERBOSE | re.DOTALL,
)


def _cut(piece: str, rng: random.Random, out: list[str]) -> None:
    """Append ``piece`` to ``out`` as one token, or as several when it is too long."""
    stripped = piece.lstrip(" \t")
    if not stripped or stripped[0] == "\n" or piece.isspace():
        for i in range(0, len(piece), MAX_SPACE_PIECE):
            out.append(piece[i : i + MAX_SPACE_PIECE])
        return
    limit = MAX_DIGITS if stripped[0].isdigit() else MAX_WORD_PIECE
    if len(stripped) <= limit:
        out.append(piece)
        return
    lead = piece[: len(piece) - len(stripped)]
    position = 0
    first = True
    while position < len(stripped):
        size = limit if limit == MAX_DIGITS else rng.randint(MIN_WORD_PIECE, limit)
        out.append((lead if first else "") + stripped[position : position + size])
        position += size
        first = False


def tokenize_like_a_model(source: str, *, seed: int = 0) -> list[str]:
    """Cut ``source`` into token-sized pieces; ``"".join(result) == source`` always.

    Deterministic for a given ``seed``; the seed only moves the cuts inside long words.
    """
    rng = random.Random(seed)
    pieces: list[str] = []
    for match in _PIECE.finditer(source):
        _cut(match.group(), rng, pieces)
    return pieces


def source_to_stream(source: str, *, tokens_per_second: float = 50, seed: int = 0) -> list[Chunk]:
    """The chunks a model streaming ``source`` at ``tokens_per_second`` would produce.

    Token *i* (from 0) arrives at ``(i + 1) / tokens_per_second`` seconds: each token
    takes one token-time to generate. Write it with ``write_recording`` or play it with
    ``play``. Raises ``ValueError`` for a rate that is not a positive finite number.
    """
    if not (math.isfinite(tokens_per_second) and tokens_per_second > 0):
        raise ValueError(f"tokens_per_second must be positive and finite: {tokens_per_second!r}")
    return [
        Chunk((i + 1) / tokens_per_second, text)
        for i, text in enumerate(tokenize_like_a_model(source, seed=seed))
    ]
