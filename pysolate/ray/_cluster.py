"""Connecting to Ray, or starting a local cluster, so that the cluster outlives the caller's thread.

``ray.init`` without a running cluster starts one: GCS, raylet and workers, each asking the
kernel to kill it when its parent *thread* exits (``PR_SET_PDEATHSIG``, Ray's fate sharing).
Ray is blocking, so the factories call it from ``anyio.to_thread``, and anyio's worker
threads exit when idle or when their event loop closes: the local cluster would die with
the first event loop that used it (a second ``anyio.run`` found GCS gone). So a local
cluster is started from a thread of its own that never exits (a daemon: it ends with the
process, as Ray's own ``atexit`` shutdown does).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

import ray

_STARTING = threading.Lock()


def ensure_connected(address: str | None, init: Mapping[str, Any]) -> None:
    """``ray.init(address, **init)`` unless this process is connected already."""
    with _STARTING:
        if ray.is_initialized():
            return
        started: Future[None] = Future()

        def keeper() -> None:
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False, **init)
            except BaseException as exc:
                started.set_exception(exc)
                return
            started.set_result(None)
            threading.Event().wait()  # the cluster's processes die with this thread: never end it

        threading.Thread(target=keeper, name="pysolate-ray-cluster", daemon=True).start()
        started.result()
