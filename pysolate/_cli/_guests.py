"""Where the CLI's Guests run: on this machine, or on a Ray cluster (``--guests ray``).

Kept in its own module so that Ray is imported only when asked for (``--guests ray``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

from .._guest_api import GuestFactory

GuestsChoice = Literal["local", "ray"]


class GuestsUnavailable(Exception):
    """The Guests asked for cannot be had here (the message says how to get them)."""


@asynccontextmanager
async def guests(choice: GuestsChoice) -> AsyncIterator[GuestFactory | None]:
    """``None`` (the Host's own local Guests) or an entered ``RayGuestFactory``.

    For ``ray`` a cluster this process is already connected to is used; otherwise the
    ``RAY_ADDRESS`` environment variable names one, or a local Ray starts in-process with
    one node agent per core. Raises ``GuestsUnavailable`` when Ray is not installed.
    """
    if choice == "local":
        yield None
        return
    try:
        from ..ray import RayGuestFactory
    except ImportError as exc:
        raise GuestsUnavailable(f"{exc} (needed for --guests ray)") from None
    address = os.environ.get("RAY_ADDRESS")
    init = {} if address else {"num_cpus": os.cpu_count() or 1}
    agents = None if address else os.cpu_count() or 1
    async with RayGuestFactory(address=address, agents=agents, init=init) as factory:
        yield factory
