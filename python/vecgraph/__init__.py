"""vecgraph: an embedded graph-vector engine for retrieval in agent loops.

One import, one call: find seed nodes by vector similarity (HNSW), walk their typed
neighbourhood, rescore everything reached with int8 SIMD kernels, and return the best nodes
with the paths that reached them.

>>> import numpy as np, vecgraph as vg
>>> g = vg.Graph(dim=4)
>>> g.add_nodes(["a", "b"], np.eye(4, dtype=np.float32)[:2])
>>> g.add_edges(["a"], ["b"], rels=["knows"])
>>> g.search(np.array([1, 0, 0, 0], np.float32), k=2).keys
['a', 'b']
"""

from __future__ import annotations

from . import _core
from .errors import (
    CorruptionError,
    DimensionMismatchError,
    DuplicateKeyError,
    EmbedderUnavailableError,
    Error,
    InvalidArgumentError,
    NotFoundError,
    ReadOnlyError,
    ShardUnavailableError,
    StorageError,
)
from .graph import FILTER_SCAN_MAX_NODES, FULL_SCAN_MAX_NODES, Graph, Hit, SearchResult, quantize
from . import embedders, hybrid, ingest, snapshot, text
from .fusion import rrf, rrf_with_ranks
from . import memory
from .memory import Memory
from . import kb
from .kb import KnowledgeBase

__version__ = "0.1.0"


def _check_forced_isa() -> None:
    import os
    import warnings

    forced = os.environ.get("VECGRAPH_FORCE_ISA")
    if forced and forced != _core.active_isa():
        warnings.warn(
            f"VECGRAPH_FORCE_ISA={forced!r} is not available here (available: "
            f"{', '.join(_core.available_isas())}); using {_core.active_isa()!r}",
            RuntimeWarning,
            stacklevel=3,
        )


_check_forced_isa()

__all__ = [
    "Graph",
    "Memory",
    "KnowledgeBase",
    "kb",
    "memory",
    "Hit",
    "SearchResult",
    "quantize",
    "FILTER_SCAN_MAX_NODES",
    "FULL_SCAN_MAX_NODES",
    "ingest",
    "embedders",
    "snapshot",
    "hybrid",
    "text",
    "rrf",
    "rrf_with_ranks",
    "active_isa",
    "available_isas",
    "Error",
    "InvalidArgumentError",
    "DimensionMismatchError",
    "DuplicateKeyError",
    "EmbedderUnavailableError",
    "NotFoundError",
    "CorruptionError",
    "StorageError",
    "ReadOnlyError",
    "ShardUnavailableError",
]


def active_isa() -> str:
    """Name of the int8 kernel set in use: ``"avx512_vnni"``, ``"avx512"``, ``"avx2"``, ``"neon"`` or ``"serial"``.

    Chosen once at import from what the CPU supports; the environment variable
    ``VECGRAPH_FORCE_ISA`` (set before import) overrides it.
    """
    return _core.active_isa()


def available_isas() -> list[str]:
    """Kernel sets this build has and this CPU can run, ``"serial"`` first."""
    return list(_core.available_isas())
