"""The durable graph against a plain model (hypothesis state machine).

Random sequences of add / upsert / delete nodes / add / delete edges / delete_tenant /
compact / checkpoint / close-and-reopen run against a graph folder and against a dict-of-lists
model; after every step, exact search equals the NumPy reference (tests/reference.py) computed
on the model, and the counts and key sets agree. This covers the delta graph (edges not yet
compacted), tombstones, compaction, WAL replay and snapshot loading with one oracle.
"""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import vecgraph as vg
from conftest import examples, assert_same
from reference import build_model, reference_search

DIM = 4
KEYS = [f"k{i}" for i in range(12)] + [7, -1, "café", "cafe\u0301"]
TENANTS = ["", "t1", "t2"]
RELS = ["r", "s"]
WEIGHTS = [0.5, 1.0, 2.0]

vector_strategy = st.lists(st.integers(min_value=-4, max_value=4), min_size=DIM, max_size=DIM).filter(any)


class DurableGraphMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="vg-oracle-")
        self.graph = vg.Graph.open(self.folder, dim=DIM, metric="ip", sync="off", auto_compact_edges=4)
        self.nodes: dict = {}  # key -> tenant, in node creation order (re-added keys go last)
        self.edges: list = []  # (src, dst, rel, weight), in edge creation order

    def teardown(self) -> None:
        self.graph.close()
        shutil.rmtree(self.folder)

    # ------------------------------------------------------------- writes

    @rule(key=st.sampled_from(KEYS), vector=vector_strategy, tenant=st.sampled_from(TENANTS))
    def add_node(self, key, vector, tenant):
        if key in self.nodes:
            with pytest.raises(vg.errors.DuplicateKeyError):
                self.graph.add_nodes([key], np.array([vector], np.float32), tenants=[tenant])
            return
        self.graph.add_nodes([key], np.array([vector], np.float32), tenants=[tenant])
        self.nodes[key] = tenant

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True), data=st.data())
    def upsert_nodes(self, keys, data):
        vectors = np.array([data.draw(vector_strategy) for _ in keys], np.float32)
        tenants = [data.draw(st.sampled_from(TENANTS)) for _ in keys]
        self.graph.upsert_nodes(keys, vectors, tenants=tenants)
        for key, tenant in zip(keys, tenants):
            self.nodes[key] = tenant  # an existing key keeps its place; a new one goes last

    @precondition(lambda self: self.nodes)
    @rule(data=st.data())
    def delete_node(self, data):
        key = data.draw(st.sampled_from(list(self.nodes)))
        assert self.graph.delete_nodes([key]) == 1
        del self.nodes[key]
        self.edges = [e for e in self.edges if key not in (e[0], e[1]) or not _same(key, e)]

    @precondition(lambda self: self.nodes)
    @rule(data=st.data(), rel=st.sampled_from(RELS), weight=st.sampled_from(WEIGHTS))
    def add_edge(self, data, rel, weight):
        keys = list(self.nodes)
        src = data.draw(st.sampled_from(keys))
        dst = data.draw(st.sampled_from(keys))
        self.graph.add_edges([src], [dst], rels=[rel], weights=[weight])
        self.edges.append((src, dst, rel, weight))

    @precondition(lambda self: self.edges)
    @rule(data=st.data(), by_rel=st.booleans())
    def delete_edge(self, data, by_rel):
        src, dst, rel, _ = data.draw(st.sampled_from(self.edges))
        before = len(self.edges)
        self.edges = [e for e in self.edges
                      if not (_is(e[0], src) and _is(e[1], dst) and (not by_rel or e[2] == rel))]
        deleted = self.graph.delete_edges([src], [dst], rels=[rel] if by_rel else None)
        assert deleted == before - len(self.edges)

    @rule(tenant=st.sampled_from(TENANTS))
    def delete_tenant(self, tenant):
        gone = [k for k, t in self.nodes.items() if t == tenant]
        assert self.graph.delete_tenant(tenant, allow_default_tenant=True) == len(gone)
        for key in gone:
            del self.nodes[key]
        self.edges = [e for e in self.edges if not any(_is(e[0], k) or _is(e[1], k) for k in gone)]

    @rule()
    def compact(self):
        self.graph.compact()

    @rule()
    def checkpoint(self):
        info = self.graph.checkpoint()
        assert info["nodes"] == len(self.nodes) and info["edges"] == len(self.edges)

    @rule()
    def reopen(self):
        self.graph.close()
        self.graph = vg.Graph.open(self.folder, sync="off", auto_compact_edges=4)

    # ------------------------------------------------------------- checks

    @invariant()
    def same_contents(self):
        assert len(self.graph) == len(self.nodes)
        assert self.graph.count_edges == len(self.edges)
        for key in KEYS:
            assert (key in self.graph) == any(_is(key, k) for k in self.nodes), key

    @invariant()
    def exact_search_equals_reference(self):
        keys = list(self.nodes)
        model = build_model(self.graph, keys, [""] * len(keys), [self.nodes[k] for k in keys], [0] * len(keys),
                            self.edges)
        rng = np.random.default_rng(len(keys) * 31 + len(self.edges))
        query = rng.integers(-4, 5, size=DIM).astype(np.float32)
        if not query.any():
            query[0] = 1.0
        for params in ({"k": 5, "seeds": 2, "hops": 2, "max_fanout": 2, "direction": "both"},
                       {"k": 8, "seeds": 1, "hops": 3, "direction": "out", "rels": ["r"]},
                       {"k": 4, "seeds": 3, "hops": 1, "direction": "in", "tenants": ["t1", ""]}):
            res = self.graph.search(query, exact=True, **params)
            assert_same(res, reference_search(model, query, **params))


def _is(a, b) -> bool:
    return type(a) is type(b) and a == b


def _same(key, edge) -> bool:
    return _is(edge[0], key) or _is(edge[1], key)


DurableGraphMachine.TestCase.settings = settings(
    max_examples=examples(50), stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_durable_graph_matches_model = DurableGraphMachine.TestCase
