"""The multi-threaded crash soak (tests/soak_workload.py, bench/crash_soak.py): a short run
recovers every acknowledged write, and its check is not vacuous."""

from __future__ import annotations

import os
import random
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import soak_workload as sw  # noqa: E402
import vecgraph as vg  # noqa: E402
from crash_workload import Model  # noqa: E402


def test_a_short_soak_loses_no_acknowledged_write(tmp_path):
    folder = str(tmp_path / "db")
    models = [Model() for _ in range(3)]
    rng = random.Random(3)
    struck, acks = Counter(), 0
    for cycle in range(8):
        result, models = sw.run_cycle(folder, models, 7, cycle, rng, work_dir=str(tmp_path))
        assert result.ok, result.message
        struck[result.struck] += 1
        acks += result.acks
    assert acks > 100  # the kills struck running writers, not idle ones
    assert sum(len(m.nodes) for m in models) > 0
    with vg.Graph.open(folder) as g:
        assert len(g) == sum(len(m.nodes) for m in models)
        assert g.count_edges == sum(len(m.edges) for m in models)


def test_the_soak_check_rejects_a_lost_write(tmp_path):
    """A node the models say was written but the folder lacks, or one nobody wrote, fails the check."""
    folder = str(tmp_path / "db")
    models = [Model() for _ in range(2)]
    rng = random.Random(4)
    result = None
    for cycle in range(6):
        result, models = sw.run_cycle(folder, models, 9, cycle, rng, work_dir=str(tmp_path))
        assert result.ok, result.message
        if models[0].nodes:
            break
    universe = {k for m in models for k in (*m.nodes, *m.deleted)}
    with vg.Graph.open(folder) as g:
        assert sw.observe_threads(g, universe, 2) == [sw.canonical(m) for m in models]
    victim = next(iter(models[0].nodes))
    with vg.Graph.open(folder) as g:
        g.delete_nodes([victim])  # behind the models' back: as if the write were lost
        seen = sw.observe_threads(g, universe, 2)
    assert seen[0] != sw.canonical(models[0]) and seen[1] == sw.canonical(models[1])
    with vg.Graph.open(folder) as g:
        g.add_nodes(["w1.phantom"], sw.vector((0, 0, 0, 0, 0))[None, :], tenants="w1a")  # a write nobody made
    result, after = sw.run_cycle(folder, models, 9, 99, rng, work_dir=str(tmp_path), early_kill=0.0)
    # The lost node is found even though the phantom keeps len(g) as the models expect (or, if
    # the cycle's own writes deleted the victim, the phantom is).
    assert not result.ok and (victim in result.message or "known keys are present" in result.message)
    assert after is models
