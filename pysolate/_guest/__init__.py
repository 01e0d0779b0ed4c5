"""The isolated subprocess Guest: a child interpreter, the framed broker protocol, limits.

``start_subprocess_guest`` is the Host's default ``GuestFactory`` (see ``_start``), and
``start_subprocess_session`` its default for sessions (see ``_turns``).
"""

from .._exceptions import GuestStartError as GuestStartError
from ._process import GuestStatistics as GuestStatistics
from ._process import SubprocessGuest as SubprocessGuest
from ._start import start_subprocess_guest as start_subprocess_guest
from ._turns import SubprocessTurns as SubprocessTurns
from ._turns import start_subprocess_session as start_subprocess_session

__all__ = [
    "GuestStartError",
    "GuestStatistics",
    "SubprocessGuest",
    "SubprocessTurns",
    "start_subprocess_guest",
    "start_subprocess_session",
]
