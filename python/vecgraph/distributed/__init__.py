"""Past one machine: a graph split over shards, each a Ray actor that owns one graph folder.

>>> import ray, vecgraph as vg                                              # doctest: +SKIP
>>> from vecgraph.distributed import ShardedGraph                            # doctest: +SKIP
>>> sg = ShardedGraph.create("graphs/users", shards=4, dim=384, shard_by="tenant")  # doctest: +SKIP

:class:`ShardedGraph` routes writes by the routing table (:mod:`.routing`), sends a query to the
shards its filters name or to all of them, and merges the shards' answers
(:meth:`ShardedGraph.search`, and :mod:`.hybrid` for :meth:`ShardedGraph.hybrid_search`). Ray
(``pip install "vecgraph[ray]"``) runs the shards and restarts one that dies; vecgraph adds the
routing, the fan-out and the merge.
"""

from ..errors import ShardUnavailableError
from .hybrid import ShardedHybridResult
from .routing import Routing, stable_hash
from .sharded import ShardedGraph, ShardedSearchResult

__all__ = [
    "ShardedGraph",
    "ShardedSearchResult",
    "ShardedHybridResult",
    "ShardUnavailableError",
    "Routing",
    "stable_hash",
]
