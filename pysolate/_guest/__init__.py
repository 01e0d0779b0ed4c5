"""The isolated subprocess Guest: a child interpreter, the framed broker protocol, limits.

``start_subprocess_guest`` is the Host's default ``GuestFactory`` (see ``_process``).
"""

from ._process import GuestStartError as GuestStartError
from ._process import GuestStatistics as GuestStatistics
from ._process import SubprocessGuest as SubprocessGuest
from ._process import start_subprocess_guest as start_subprocess_guest

__all__ = ["GuestStartError", "GuestStatistics", "SubprocessGuest", "start_subprocess_guest"]
