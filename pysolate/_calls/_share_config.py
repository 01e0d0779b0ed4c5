"""How much shared work a Host keeps, and what it reports of it (``Host(share=...)``).

The bounds of the Host's observation table (``_sharing``: which calls share, and how a run
uses the table), the config that sets them, the statistics snapshot, and the size estimate
that ``max_chars`` is counted in.
"""

from __future__ import annotations

from dataclasses import dataclass

SHARE_TTL = 600.0
"""Seconds a settled success serves later runs of the Host (a retried turn, the next rollout)."""

SHARE_ENTRIES = 4096
"""Settled successes a Host keeps per event loop (the oldest go first)."""

SHARE_CHARS = 64 * 1024 * 1024
"""Estimated characters of settled results a Host keeps per event loop (``estimated_chars``)."""


@dataclass(frozen=True, slots=True)
class ShareConfig:
    """How long and how much of the shared work a Host keeps (``Host(share=...)``)."""

    ttl: float = SHARE_TTL
    """Seconds a settled success serves later calls (0: only calls that wait on it meanwhile)."""
    max_entries: int = SHARE_ENTRIES
    max_chars: int = SHARE_CHARS

    def __post_init__(self) -> None:
        if not self.ttl >= 0 or self.max_entries < 0 or self.max_chars < 0:
            raise ValueError(f"share bounds must not be negative: {self}")


def share_config(share: bool | ShareConfig) -> ShareConfig | None:
    """``Host(share=...)``'s value as a config (None: off). Raises ``TypeError`` otherwise."""
    if share is True:
        return ShareConfig()
    if share is False:
        return None
    if isinstance(share, ShareConfig):
        return share
    raise TypeError(f"share must be a bool or a ShareConfig, not {type(share).__qualname__}")


@dataclass(frozen=True, slots=True)
class ShareStatistics:
    """A snapshot of a Host's shared work, over its event loops (``Host.share_statistics``).

    ``logical``: calls that asked the table (early and the programs' own); ``physical``: the
    tool invocations made for them, each once however many runs it served. The rest as
    ``scheduler._shared.TableStatistics``; ``tainted``: capabilities whose reads are no
    longer shared because a call that may write reached their registered object.
    """

    logical: int = 0
    physical: int = 0
    waited: int = 0
    reused: int = 0
    failed: int = 0
    stopped: int = 0
    cancelled: int = 0
    evicted: int = 0
    open: int = 0
    settled: int = 0
    chars: int = 0
    tainted: tuple[str, ...] = ()


_CHAR_COST = 8
"""Estimated characters of a scalar other than a str or bytes, or of a container's frame."""


def estimated_chars(value: object, limit: int) -> int:
    """An estimate of ``value``'s size, in characters (stops counting past ``limit``)."""
    size = 0
    stack = [value]
    while stack and size <= limit:
        item = stack.pop()
        t = type(item)
        if t is str or t is bytes:
            size += len(item)  # type: ignore[arg-type]
        elif t is list or t is tuple:
            size += _CHAR_COST
            stack.extend(item)  # type: ignore[arg-type]
        elif t is dict:
            size += _CHAR_COST
            stack.extend(item.keys())  # type: ignore[attr-defined]
            stack.extend(item.values())  # type: ignore[attr-defined]
        else:
            size += _CHAR_COST
    return size
