"""The README's sharded-graph example runs as written (a fresh folder, a local Ray of 2 CPUs)
and prints what it says it prints."""

from __future__ import annotations

import contextlib
import io
import os

import ray

from test_readme_examples import readme_block


def test_the_sharded_example_runs(tmp_path):
    code = readme_block("## Past one machine: shards as Ray actors")
    if ray.is_initialized():
        ray.shutdown()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            namespace: dict = {"__name__": "readme"}
            exec(compile(code, "README.md", "exec"), namespace)
        sg = namespace["sg"]
        assert len(sg) == 1000 and sg.shards == 4 and sg.shard_by == "tenant"
        assert [tuple(e) for e in sg.neighbors("m0")] == [("m0", "follows", "m50", 1.0)]
        sg.close()
    finally:
        os.chdir(cwd)
        ray.shutdown()
    printed = out.getvalue().splitlines()[-1]
    assert printed.startswith("['m0', ") and printed.endswith(" 1000")
    hits_shards = printed[printed.index("] [") + 3 : printed.index("]", printed.index("] [") + 3)]
    assert len(set(hits_shards.split(", "))) == 1  # routed: one shard
    assert printed.endswith(
        " m0 m3 1000"
    )  # the fan-out's best: the query's node; the fused: topic 3's and vectors[3]'s
    assert (tmp_path / "users.vgs" / "routing.json").exists() and (
        tmp_path / "users.vgs" / "shard-0003"
    ).is_dir()
