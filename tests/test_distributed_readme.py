"""The README's sharded-graph example runs as written (a fresh folder, a local Ray of 2 CPUs)
and prints what it says it prints."""

from __future__ import annotations

import ray

from test_readme_examples import run_readme_block


def test_the_sharded_example_runs(tmp_path):
    if ray.is_initialized():
        ray.shutdown()
    try:
        namespace, out = run_readme_block("## Past one machine: shards as Ray actors", tmp_path)
        sg = namespace["sg"]
        assert len(sg) == 1000 and sg.shards == 4 and sg.shard_by == "tenant"
        assert [tuple(e) for e in sg.neighbors("m0")] == [("m0", "follows", "m50", 1.0)]
        sg.close()
    finally:
        ray.shutdown()
    printed = out.getvalue().splitlines()[-1]
    assert printed.startswith("['m0', ") and printed.endswith(" 1000")
    hits_shards = printed[printed.index("] [") + 3 : printed.index("]", printed.index("] [") + 3)]
    assert len(set(hits_shards.split(", "))) == 1  # routed: one shard
    # the fan-out's best: the query's node; the fused: topic 3's and vectors[3]'s
    assert printed.endswith(" m0 m3 1000")
    assert (tmp_path / "users.vgs" / "routing.json").exists() and (tmp_path / "users.vgs" / "shard-0003").is_dir()
