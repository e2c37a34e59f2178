"""Awaitable searches and writes for asyncio agents (bound as ``Graph.asearch``,
``Graph.ahybrid_search``, ``Graph.aadd_nodes``, ...).

Each coroutine runs the synchronous method of the same name (without the ``a``) on a thread
pool shared by every graph of the process, so the event loop keeps serving other tasks while
it runs; the core releases the GIL while it searches and writes, so searches of several tasks
run side by side on the cores.

>>> import asyncio, numpy as np, vecgraph as vg
>>> g = vg.Graph(2)
>>> async def main():
...     await g.aadd_nodes(["a", "b"], np.eye(2))
...     return (await g.asearch(np.array([1.0, 0.0]), k=1)).keys
>>> asyncio.run(main())
['a']

**Cancellation.** A call whose task is cancelled before its job starts never runs; one that
has started runs to its end on its thread (a thread cannot be interrupted), and the
``CancelledError`` reaches the awaiting task at once. Every write is all or nothing, so a
cancelled write is either applied whole or not at all, and the graph stays consistent: check
with ``key in g`` when it matters which.

The pool has ``max(2, os.cpu_count())`` threads (:func:`set_max_workers` changes it).
"""

from __future__ import annotations

import asyncio
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Optional

from .errors import InvalidArgumentError
from .pools import LazyPool

if TYPE_CHECKING:  # the class these functions are methods of (graph.py imports this module)
    from .graph import Graph
    from .results import HybridResult, SearchResult

__all__ = ["set_max_workers"]

_MAX_WORKERS: Optional[int] = None
_POOL = LazyPool(lambda: _MAX_WORKERS or max(2, os.cpu_count() or 1), "vecgraph-aio")


def _forget_pool_after_fork() -> None:
    """In a forked child the pool's threads stayed in the parent: make a new pool on next use.
    (Called by the fork handler of vecgraph.folder.)"""
    _POOL.forget(after_fork=True)


def _pool() -> ThreadPoolExecutor:
    return _POOL.get()


def set_max_workers(n: int) -> None:
    """Run the awaitable calls on ``n`` threads (>= 1) from now on; calls already running
    finish on the old pool.

    Raises:
        InvalidArgumentError: n is not an int >= 1.
    """
    global _MAX_WORKERS
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidArgumentError(f"max workers must be an int >= 1, got {n!r}")
    _MAX_WORKERS = n
    old = _POOL.forget()
    if old is not None:
        old.shutdown(wait=False)


async def _run(method: Callable, *args: Any, **kwargs: Any) -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(), functools.partial(method, *args, **kwargs))


async def asearch(self: Graph, query: Any, k: int = 10, **options: Any) -> SearchResult:
    """Awaitable :meth:`search` (same arguments, result and errors)."""
    return await _run(self.search, query, k, **options)


async def asearch_batch(self: Graph, queries: Any, k: int = 10, **options: Any) -> list:
    """Awaitable :meth:`search_batch` (same arguments, result and errors)."""
    return await _run(self.search_batch, queries, k, **options)


async def ahybrid_search(self: Graph, text: Optional[str] = None, vector: Any = None, k: int = 10,
                         **options: Any) -> HybridResult:
    """Awaitable :meth:`hybrid_search` (same arguments, result and errors)."""
    return await _run(self.hybrid_search, text, vector, k, **options)


async def aadd_nodes(self: Graph, keys: Any, vectors: Any, **options: Any) -> None:
    """Awaitable :meth:`add_nodes` (all or nothing; see the module's note on cancellation)."""
    return await _run(self.add_nodes, keys, vectors, **options)


async def aadd_edges(self: Graph, src: Any, dst: Any, **options: Any) -> None:
    """Awaitable :meth:`add_edges` (all or nothing; see the module's note on cancellation)."""
    return await _run(self.add_edges, src, dst, **options)


async def aupsert_nodes(self: Graph, keys: Any, vectors: Any, **options: Any) -> Any:
    """Awaitable :meth:`upsert_nodes` (all or nothing; see the module's note on cancellation)."""
    return await _run(self.upsert_nodes, keys, vectors, **options)


async def aupdate_nodes(self: Graph, keys: Any, **options: Any) -> Any:
    """Awaitable :meth:`update_nodes` (all or nothing; see the module's note on cancellation)."""
    return await _run(self.update_nodes, keys, **options)


async def adelete_nodes(self: Graph, keys: Any, **options: Any) -> int:
    """Awaitable :meth:`delete_nodes` (all or nothing; see the module's note on cancellation)."""
    return await _run(self.delete_nodes, keys, **options)


async def adelete_edges(self: Graph, src: Any, dst: Any, **options: Any) -> int:
    """Awaitable :meth:`delete_edges` (all or nothing; see the module's note on cancellation)."""
    return await _run(self.delete_edges, src, dst, **options)
