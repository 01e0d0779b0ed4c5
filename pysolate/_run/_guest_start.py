"""Where a run's sealed program runs: a fresh Guest started meanwhile, or a session's.

A run starts its Guest side when it starts (``start``, in the run's task group, so a fresh
Guest's start-up hides behind the stream), waits for it once the source is sealed
(``ready``), hands it the program (``run``) and closes it when the run ends (``aclose``,
whatever happened). A session turn implements the same with the session's Guest
(``pysolate._run._session``), whose start and close are the session's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import anyio

from .._guest_api import CallHandler, Guest, GuestFactory, GuestLimits, GuestOutcome


class RunGuest(Protocol):
    """The Guest side of one run (see the module docstring)."""

    async def start(self) -> None: ...
    async def ready(self) -> None: ...
    async def run(self, program: str, handler: CallHandler) -> GuestOutcome: ...
    async def aclose(self) -> None: ...


@dataclass(slots=True)
class GuestStarter:
    """Starts a fresh Guest in the background; the run takes it once the source is sealed.

    ``aclose`` may come at any point (a rejected stream, the caller cancelling): a start
    still under way is cancelled (the factory kills what it began), a started Guest closed.
    """

    factory: GuestFactory
    capabilities: dict[str, list[str]]
    limits: GuestLimits
    guest: Guest | None = None
    error: BaseException | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    async def start(self) -> None:
        try:
            with self.scope:
                self.guest = await self.factory(self.capabilities, self.limits)
        except Exception as exc:  # reported when the Guest is needed, not before
            self.error = exc
        finally:
            self.done.set()

    async def take(self) -> Guest:
        if not self.done.is_set():  # a set event's wait is still a trip round the loop
            await self.done.wait()
        if self.error is not None:
            raise self.error
        if self.guest is None:
            raise RuntimeError("the Guest start was cancelled")
        return self.guest

    async def ready(self) -> None:
        await self.take()

    async def run(self, program: str, handler: CallHandler) -> GuestOutcome:
        return await (await self.take()).run(program, handler)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            self.scope.cancel()
            if not self.done.is_set():
                await self.done.wait()
            if self.guest is not None:
                await self.guest.aclose()
