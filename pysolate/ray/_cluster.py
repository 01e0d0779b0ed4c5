"""Connecting to Ray, or starting a local cluster, so that the cluster outlives the caller's thread.

``ray.init`` without a running cluster starts one (GCS, raylet, workers), and Ray ties each
of those processes to the thread that started them (``PR_SET_PDEATHSIG``). The factories
call Ray from ``anyio.to_thread`` workers, which exit with their event loop: a cluster
started there died with the first event loop that used it. So ``ray.init`` runs on the
process's lasting thread (``pysolate._guest._lasting_thread``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import ray

from .._guest._lasting_thread import on_lasting_thread


def ensure_connected(address: str | None, init: Mapping[str, Any]) -> None:
    """``ray.init(address, **init)`` unless this process is connected already."""
    on_lasting_thread(functools.partial(_connect, address, dict(init)))


def _connect(address: str | None, init: dict[str, Any]) -> None:
    if not ray.is_initialized():  # checked on the lasting thread: two callers never both init
        ray.init(address=address, include_dashboard=False, log_to_driver=False, **init)
