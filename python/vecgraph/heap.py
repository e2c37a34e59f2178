"""Returning the C heap's free pages to the operating system after large batches."""

from __future__ import annotations

from . import _core

# A write batch of at least this many rows returns the C heap's free pages to the operating
# system when it is done: the batch's temporaries (keys, converted columns, WAL payload, HNSW
# insert buffers) are freed by then, but glibc keeps most of them in the process. Measured on a
# 300,000-node, 1.5M-edge build: 27 MB after add_nodes and 25 MB after add_edges. A smaller batch
# frees too little for the trim's cost (it walks the heap's free blocks).
_RELEASE_MEMORY_MIN_ROWS = 65_536


def _release_after_batch(count_rows: int) -> None:
    if count_rows >= _RELEASE_MEMORY_MIN_ROWS:
        _core.release_free_memory()
