"""What the Host holds for a run, and the byte budget that bounds it.

A run's receipts (``CallRecord``) keep every argument and result the program's calls saw,
for as long as the run's result lives, and its workspace branch keeps what the program
wrote. Before this bound, re-sending one 7 MiB string to ``workspace.write_text`` 250 times
grew a Host by 3.7 GB: every argument was held twice (the branch and the receipt), and
nothing but ``max_calls * max_frame_bytes`` (80 GiB) bounded a run.

- A receipt holds an argument or result past ``RECEIPT_INLINE_BYTES`` as its
  ``ValueDigest`` (the digest call keys use), not as a second copy of the value.
- What a run holds — its receipts (as held) and their keys, and its workspace branches'
  content (``Workspace.held_bytes``) — is counted against ``GuestLimits.max_host_bytes``;
  past it the call fails with ``LimitExceeded("HostBytesLimit")``: the Guest stops the
  program, the run ends ``aborted`` and no branch can be committed. A session's turn counts
  the branch its earlier turns left, so the budget is the session's too.

Sizes are ``weight``: what the values take in this process, about (``sys.getsizeof``'s
order for each object), from their content only, so both Guests and both lanes count alike.
"""

from __future__ import annotations

from collections.abc import Mapping

from occurrences import argument_text
from occurrences.plain import to_tagged

from .._report._result import ValueDigest
from .._tools._compact import compact

RECEIPT_INLINE_BYTES = 64 * 1024
"""Largest argument or result (by ``weight``) a receipt holds as it is; a larger one is held
as its ``ValueDigest``."""

SMALL_KEY_CHARS = 16 * 1024
"""A call whose key text is at most this long and holds no digest has arguments none of which
can reach ``RECEIPT_INLINE_BYTES`` (a value weighs at most about three times its tagged
text): its receipt keeps them as they are, weighed as three times that text."""

RECEIPT_BYTES = 512
"""What a receipt holds besides its values (its fields, the objects around them)."""

HOST_BYTES_LIMIT = "HostBytesLimit"
"""``ErrorInfo.type`` of a run that passed ``GuestLimits.max_host_bytes``."""


def weight(value: object) -> int:
    """About the bytes ``value`` (plain data) takes: 1 per character or byte plus each
    object's header, 8 per reference in a container (another 24 per dict entry)."""
    t = type(value)
    if t is str:
        return 49 + len(value)  # type: ignore[arg-type]
    if t is bytes:
        return 33 + len(value)  # type: ignore[arg-type]
    if t is int:
        return 28 + value.bit_length() // 8  # type: ignore[attr-defined]
    if t is tuple or t is list:
        total = 56 + 8 * len(value)  # type: ignore[arg-type]
        for item in value:  # type: ignore[attr-defined]
            total += weight(item)
        return total
    if t is dict:
        total = 64 + 32 * len(value)  # type: ignore[arg-type]
        for key, item in value.items():  # type: ignore[attr-defined]
            total += weight(key) + weight(item)
        return total
    return 24  # None, a bool, a float (or a repr'd value's str, counted above)


def held(value: object) -> tuple[object, int]:
    """``(what a receipt keeps of value, its weight)``: the value, or past
    ``RECEIPT_INLINE_BYTES`` its ``ValueDigest``."""
    if value is None:
        return None, 24
    size = weight(value)
    if size <= RECEIPT_INLINE_BYTES:
        return value, size
    return digest(value), 128


def held_arguments(
    args: object, kwargs: Mapping[str, object]
) -> tuple[object, dict[str, object], int]:
    """``held`` of each argument: ``(args, kwargs, weight)`` as a receipt keeps them."""
    total = 0
    out_args: object = args
    if type(args) is tuple:
        for value in args:
            t = type(value)  # ``weight``'s scalar cases, inline: most calls have only these
            if t is int:
                total += 28 + value.bit_length() // 8
            elif t is str:
                total += 49 + len(value)
            else:
                total += weight(value)
        if total > RECEIPT_INLINE_BYTES:  # some argument may be past it: each one's own
            kept = [held(value) for value in args]
            out_args, total = tuple(item for item, _ in kept), sum(size for _, size in kept)
    else:  # a refused call's repr'd arguments
        out_args, total = held(args)
    if not kwargs:
        return out_args, {}, total
    out_kwargs = dict(kwargs)
    for name, value in kwargs.items():
        item, size = held(value)
        if item is not value:
            out_kwargs[name] = item
        total += size + weight(name)
    return out_args, out_kwargs, total


def digest(value: object) -> ValueDigest:
    """The ``ValueDigest`` of a plain value too large for a receipt (``argument_text``'s)."""
    text = argument_text(to_tagged(value), compact)
    assert text.startswith('["#"'), "only values past KEY_INLINE_CHARS are digested"
    kind, size, sha = text[6 : text.index('"', 6)], *text[text.index('"', 6) + 2 : -2].split(',"')
    return ValueDigest(kind, int(size), sha)
