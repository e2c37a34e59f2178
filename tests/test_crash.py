"""Crash recovery: a writer process with sync="always" is SIGKILLed at random moments, over and
over on the same folder; after each kill the reopened graph holds every acknowledged write and
is exactly the state after a prefix of the issued writes (the workload and the plain-Python
model are in crash_workload.py)."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest

import vecgraph as vg
from conftest import FULL
from crash_workload import DIM, METRIC, Model, canonical, observe, run_cycle, vector

# A process killed mid-write leaves a torn WAL tail; Graph.open cuts it with a warning.
pytestmark = pytest.mark.filterwarnings("ignore:cut .* bytes at the end of the WAL:RuntimeWarning")

CYCLES = 60 if FULL else 24  # all 60 with VECGRAPH_TESTS_FULL=1 (.ci/run)
# Cycles killed only after a long run of acknowledged writes (10, 31 and 50 of 60), whatever
# the machine's speed: those runs alone make the 10 acknowledged writes a cycle asserted below.
LATE_KILLS = (CYCLES // 6, CYCLES // 2 + 1, 5 * CYCLES // 6)
LATE_ACKS = 50 if FULL else 90
SEED = 20240611


def test_sigkill_loop_recovers_an_acknowledged_prefix(tmp_path):
    folder = str(tmp_path / "db")
    rng = random.Random(SEED)
    model = Model()
    results = []
    for cycle in range(CYCLES):
        # odd cycles with 4 KiB WAL segments: kills also strike while a segment is created; three
        # cycles are killed only after a long run of acknowledged writes, however slow the machine
        result, model = run_cycle(folder, model, SEED, cycle, rng, sync="always", max_delay=0.3,
                                  work_dir=str(tmp_path), segment_bytes=4096 if cycle % 2 else None,
                                  kill_after_acks=LATE_ACKS + cycle if cycle in LATE_KILLS else None)
        assert result.ok, f"cycle {cycle}: {result.message}"
        assert result.exited is None, f"cycle {cycle}: the writer exited on its own ({result.exited})"
        assert result.prefix in (result.acks, result.acks + 1)
        results.append(result)
    # The loop did real work: writes were acknowledged and recovered, kills struck both before the
    # writer was ready (during import or recovery) and in the middle of writing, and the folder
    # went through checkpoints (a snapshot plus a WAL tail to replay).
    assert sum(r.acks for r in results) >= 10 * CYCLES
    assert any(r.killed_before_ready for r in results)
    assert sum(1 for r in results if r.acks >= 50) >= 3
    with open(os.path.join(folder, "MANIFEST")) as f:
        manifest = json.load(f)
    assert manifest["generation"] >= 3 and manifest["snapshot_lsn"] > 0

    # A final clean open: the state is still the last recovered one, and it survives a
    # checkpoint and another reopen.
    universe = set(model.nodes) | set(model.deleted)
    with vg.Graph.open(folder, dim=DIM, metric=METRIC) as g:
        assert observe(g, universe) == canonical(model)
        g.checkpoint()
    with vg.Graph.open(folder) as g:
        assert observe(g, universe) == canonical(model)
        assert len(g) == len(model.nodes) > 0
        for key in list(model.nodes)[:20]:
            assert g.search(vector(model.nodes[key][0]), k=1, exact=True).keys == [key]
        for key in list(model.deleted)[:20]:
            assert key not in g


def test_model_check_rejects_a_wrong_state(tmp_path):
    """The state comparison the loop relies on is not vacuous: one missing node, one extra edge or
    one changed vector makes it fail."""
    folder = str(tmp_path / "db")
    with vg.Graph.open(folder, dim=DIM, metric=METRIC) as g:
        g.add_nodes(["a", "b"], np.stack([vector((1, 0, 0, 0)), vector((1, 0, 1, 0))]), tenants=["t0", "t1"])
        g.add_edges(["a"], ["b"], rels=["r0"], weights=np.array([0.5], np.float32))
    right = Model({"a": ((1, 0, 0, 0), "t0"), "b": ((1, 0, 1, 0), "t1")}, [("a", "r0", "b", 0.5)], {})
    with vg.Graph.open(folder) as g:
        seen = observe(g, {"a", "b", "c"})
    assert seen == canonical(right)
    missing = right.copy()
    missing.apply(("add", ["c"], [(1, 0, 2, 0)], ["t0"]))
    extra_edge = right.copy()
    extra_edge.apply(("edges", ["b"], ["a"], ["r0"], [0.5]))
    other_vector = right.copy()
    other_vector.apply(("upsert", ["b"], [(1, 0, 3, 0)], ["t1"]))
    other_tenant = right.copy()
    other_tenant.apply(("upsert", ["b"], [(1, 0, 1, 0)], ["t2"]))
    for wrong in (missing, extra_edge, other_vector, other_tenant):
        assert canonical(wrong) != seen
