"""Guests on a Ray cluster (optional extra: ``pip install 'pysolate[ray]'``).

- ``RayGuestFactory``: a ``GuestFactory`` whose Guests run on Ray worker nodes, started by one
  ``GuestNode`` agent per node and connected back to the Host's broker over TCP.
- ``HostPool``: whole runs on several Host processes (Ray actors), each key pinned to one.

``import pysolate`` never imports this package; importing it without Ray installed raises an
``ImportError`` that names the extra. See ``docs/scale-out.md``.
"""

try:
    import ray as _ray  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a fresh venv without the extra
    raise ImportError("pysolate.ray needs Ray: pip install 'pysolate[ray]'") from exc

from ._agent import AGENT_RESOURCE as AGENT_RESOURCE
from ._agent import GuestNode as GuestNode
from ._factory import RayGuest as RayGuest
from ._factory import RayGuestFactory as RayGuestFactory
from ._pool import HostPool as HostPool
from ._pool import HostWorker as HostWorker

__all__ = ["AGENT_RESOURCE", "GuestNode", "HostPool", "HostWorker", "RayGuest", "RayGuestFactory"]
