"""Thread pools made on first use and forgotten in a forked child (whose copy of a pool has no
threads: a job submitted to it would never run)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

__all__ = ["LazyPool"]


class LazyPool:
    """A ``ThreadPoolExecutor`` of ``workers()`` threads named ``name``, made by the first
    :meth:`get`; :meth:`forget` drops it (after a fork, or to resize it), and the next
    :meth:`get` makes a new one."""

    def __init__(self, workers: Callable[[], int], name: str) -> None:
        self._workers = workers
        self._name = name
        self._pool: Optional[ThreadPoolExecutor] = None
        self._lock = threading.Lock()

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._workers(), thread_name_prefix=self._name)
            return self._pool

    def forget(self, *, after_fork: bool = False) -> Optional[ThreadPoolExecutor]:
        """Drop the pool (returned, to be shut down by the caller, unless after a fork: then its
        lock may be held by a thread that is not in this process, and is made anew)."""
        if after_fork:
            self._lock = threading.Lock()
            self._pool = None
            return None
        with self._lock:
            pool, self._pool = self._pool, None
        return pool
