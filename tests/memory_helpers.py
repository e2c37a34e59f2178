"""Shared by the memory-store tests (test_memory.py, test_memory_erasure.py): a tiny deterministic
embedder (so that no test loads a model), fixed times, and the slow, obviously correct checks the
tests compare the store with (a byte search of every file of a folder, the WAL folder's size)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

# The fake embedder's source: executed here, and written as it is into the scripts of the crash
# tests (a child process must embed exactly as the parent does: same name, dim and vectors).
EMBEDDER_SOURCE = '''
import hashlib as _hashlib
import re as _re

import numpy as _np


class FakeEmbedder:
    """A hashed bag of words: each lower-cased word adds 1 to one of dim - 1 dimensions (blake2b
    of the word), plus a constant bias in dimension 0 so that no row is all zeros; L2-normalised."""

    name = "test-hashed-bow-64"
    dim = 64

    def __call__(self, texts):
        out = _np.zeros((len(texts), self.dim), _np.float32)
        for i, text in enumerate(texts):
            out[i, 0] = 0.5
            for word in _re.findall(r"\\w+", text.lower()):
                digest = _hashlib.blake2b(word.encode("utf-8"), digest_size=4).digest()
                out[i, 1 + int.from_bytes(digest, "little") % (self.dim - 1)] += 1.0
            out[i] /= _np.linalg.norm(out[i])
        return out
'''

_namespace: dict = {}
exec(compile(EMBEDDER_SOURCE, "<memory_helpers.EMBEDDER_SOURCE>", "exec"), _namespace)
FakeEmbedder = _namespace["FakeEmbedder"]

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


def files_containing(folder: str, needles: list) -> list:
    """(relative path, needle) for every file under ``folder`` whose bytes contain the UTF-8 of a
    needle: a plain read and ``in`` per file and needle (the reference for erasure checks). A file
    that vanishes between the listing and the read (a temporary file of an open store's BM25
    index) is skipped."""
    found = []
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue  # a temporary file of the open BM25 index, removed since the listing
            for needle in needles:
                if needle.encode("utf-8") in data:
                    found.append((os.path.relpath(path, folder), needle))
    return sorted(found)


def folder_size(folder: str) -> int:
    """Total bytes of the files under ``folder``."""
    return sum(os.path.getsize(os.path.join(root, name)) for root, _dirs, files in os.walk(folder) for name in files)


def state(mem) -> tuple:
    """What a failed call must leave unchanged: node and edge counts, the keys in order, and for
    a folder store the WAL folder's size in bytes."""
    wal = folder_size(os.path.join(mem.graph.path, "wal")) if mem.graph.path is not None else None
    return len(mem.graph), mem.graph.count_edges, mem.graph.keys(), wal
