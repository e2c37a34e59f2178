"""Data and checks shared by the ingestion tests (test_ingest.py, test_ingest_readers.py):
random nodes as columns and as a pyarrow table, the same nodes added with add_nodes, and
node-by-node equality."""

from __future__ import annotations

import json
from typing import Optional

import numpy as np
import pyarrow as pa

import vecgraph as vg

DIM = 8


def _data(n: int = 40, dim: int = DIM, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "key": [f"n{i}" for i in range(n)],
        "vectors": rng.standard_normal((n, dim)).astype(np.float32),
        "label": [["person", "org", "doc"][i % 3] for i in range(n)],
        "tenant": [f"t{i % 2}" for i in range(n)],
        "ts": (np.arange(n, dtype=np.int64) * 1_000_000),
        "text": [f"text of node {i} ✓" for i in range(n)],
        "props": [{"i": i, "tags": ["a", "b"][: i % 3]} if i % 4 else None for i in range(n)],
    }


def _fsl(vectors: np.ndarray) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1])


def _table(d: dict, vector_type: str = "fixed") -> pa.Table:
    vectors = _fsl(d["vectors"]) if vector_type == "fixed" else pa.array(d["vectors"].tolist(), pa.list_(pa.float32()))
    return pa.table({
        "key": d["key"], "vector": vectors, "label": d["label"], "tenant": d["tenant"], "ts": d["ts"],
        "text": d["text"], "props": [None if p is None else json.dumps(p) for p in d["props"]],
    })


def _direct(d: dict, e: Optional[dict] = None, dim: int = DIM, threads: Optional[int] = None) -> vg.Graph:
    g = vg.Graph(dim, threads=threads)
    g.add_nodes(d["key"], d["vectors"], labels=d["label"], tenants=d["tenant"], ts=d["ts"], texts=d["text"],
                props=d["props"])
    if e is not None:
        g.add_edges(e["src"], e["dst"], rels=e["rel"], weights=e["weight"])
    return g


def _assert_same_nodes(g: vg.Graph, h: vg.Graph, keys: list) -> None:
    assert len(g) == len(h) == len(keys)
    for key in keys:
        a, b = g.get_node(key), h.get_node(key)
        assert np.array_equal(a.pop("vector"), b.pop("vector")), key
        assert a == b, key
