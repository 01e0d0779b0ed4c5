"""Runs a program both ways against the ``odd`` tools (issue 13's fault catalogue).

``both_ways`` runs a program sequentially and streamed through one Guest against fresh
Hosts holding an ``oddities.Odd`` and a memory workspace, and asserts the results equal
type-exactly with the accounting invariants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pysolate import Host, LanePolicy, RunResult
from pysolate._guest_api import GuestFactory
from pysolate.testing import check_invariants, memory_workspace

from .harness import FILES, TimedChunks, assert_same
from .oddities import Odd


def odd_host(factory: GuestFactory, odd: Odd | None = None, **host_kwargs: Any) -> tuple[Host, Odd]:
    """A Host with ``odd`` and a memory ``workspace`` (``harness.FILES``)."""
    odd = odd or Odd()
    host = Host(guest_factory=factory, **host_kwargs)
    host.register("odd", odd)
    host.register("workspace", memory_workspace(FILES))
    return host, odd


@dataclass(slots=True)
class Both:
    """The sequential reference and the streamed run of one program."""

    reference: RunResult
    streamed: RunResult
    reference_odd: Odd
    streamed_odd: Odd


async def both_ways(
    source: str,
    factory: GuestFactory,
    chunk: int = 7,
    policy: LanePolicy | None = None,
    **host_kwargs: Any,
) -> Both:
    """Run ``source`` with ``run_source(speculate=False)`` and ``run_stream`` (``chunk``
    characters a chunk) against fresh Hosts; assert they are equal, type-exactly, and that
    the streamed run's accounting holds."""
    ref_host, ref_odd = odd_host(factory, **host_kwargs)
    reference = await ref_host.run_source(source, speculate=False)
    host, odd = odd_host(factory, **host_kwargs)
    streamed = await host.run_stream(TimedChunks(source, (chunk,), (0.0,)), policy=policy)
    ref_odd.release.set()
    odd.release.set()
    assert_same(streamed, reference)
    check_invariants(streamed, host.method_specs())
    check_invariants(reference)
    return Both(reference, streamed, ref_odd, odd)


def guests() -> list[Any]:
    """Both Guests, as pytest params (``factory``)."""
    import pytest

    from pysolate._guest import start_subprocess_guest
    from pysolate.testing import in_process_guest

    return [
        pytest.param(in_process_guest, id="in_process"),
        pytest.param(start_subprocess_guest, id="subprocess"),
    ]
