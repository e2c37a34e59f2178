"""The ``vecgraph`` command, run in a subprocess as users run it (``python -m vecgraph``, and the
installed console script when it belongs to this interpreter): output on small real files,
``--json`` values, exit codes (0 success, 1 failure, 2 usage, 130 interrupted) and error messages."""

from __future__ import annotations

import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import vecgraph as vg
from vecgraph import cli, formatting

DIM = 8
N = 40
KEYS = [f"n{i}" for i in range(N)]
SUBCOMMANDS = ("ingest", "query", "stats", "checkpoint", "compact", "export", "restore", "verify", "repair", "demo",
               "info", "eval")
# The subprocess imports the same vecgraph as this test module.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(vg.__file__)))


def _env(extra_path: str | None = None) -> dict:
    env = dict(os.environ)
    paths = [PACKAGE_ROOT] + ([extra_path] if extra_path else []) + [env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.pop("VECGRAPH_FORCE_ISA", None)
    return env


def run(*args, path: str | None = None, command: list | None = None) -> subprocess.CompletedProcess:
    argv = (command or [sys.executable, "-m", "vecgraph"]) + [str(a) for a in args]
    return subprocess.run(argv, capture_output=True, text=True, env=_env(path), timeout=120, check=False)


def ok(*args, **kw) -> subprocess.CompletedProcess:
    proc = run(*args, **kw)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" or "Traceback" not in proc.stderr
    return proc


def failed(code: int, *args, **kw) -> str:
    """Run a command that must fail with exit code ``code``; return its stderr."""
    proc = run(*args, **kw)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stderr


def _vectors(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(N, DIM)).astype(np.float32)


def _edges() -> list:
    """(src, dst, rel, weight): a ring of "next" edges and "jump" edges five ahead."""
    ring = [(KEYS[i], KEYS[(i + 1) % N], "next", 1.0) for i in range(N)]
    jumps = [(KEYS[i], KEYS[(i + 5) % N], "jump", 0.5) for i in range(N)]
    return ring + jumps


def _build(folder, *, checkpoint: bool = True) -> None:
    with vg.Graph.open(folder, dim=DIM, metric="cos", sync="off") as g:
        g.add_nodes(KEYS, _vectors(), labels=["person" if i % 2 == 0 else "org" for i in range(N)],
                    tenants=["t1" if i < N // 2 else "t2" for i in range(N)], texts=[f"node {i}" for i in range(N)])
        src, dst, rels, weights = zip(*_edges())
        g.add_edges(list(src), list(dst), rels=list(rels), weights=list(weights))
        if checkpoint:
            g.checkpoint()


@pytest.fixture(scope="module")
def graph_folder(tmp_path_factory) -> str:
    """A checkpointed graph: 40 nodes, 80 edges, dim 8. Tests that change it work on a copy."""
    folder = str(tmp_path_factory.mktemp("cli") / "graph.vg")
    _build(folder)
    return folder


@pytest.fixture
def graph_copy(graph_folder, tmp_path) -> str:
    folder = str(tmp_path / "copy.vg")
    shutil.copytree(graph_folder, folder)
    return folder


def _npy(tmp_path, name: str, array) -> str:
    path = str(tmp_path / name)
    np.save(path, np.asarray(array))
    return path


def _table_rows(stdout: str, with_text: bool = False) -> list:
    """Data rows of a results table: [rank, key, score, hops, path] (+ [label, text] with
    ``with_text``); the label and text columns start where their headers do."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "key"])
    label_at, text_at = lines[at].index("label"), lines[at].index("text")
    rows = []
    for line in lines[at + 1:]:
        if not line.strip() or line.startswith("("):
            break
        rank, key, score, hops, path = line[:label_at].split(None, 4)
        row = [int(rank), key, float(score), int(hops), path.rstrip()]
        rows.append(row + [line[label_at:text_at].rstrip(), line[text_at:].rstrip()] if with_text else row)
    return rows


# ---------------------------------------------------------------- help, version, usage


def test_help_of_every_subcommand(capsys):
    for name in SUBCOMMANDS:
        with pytest.raises(SystemExit) as exit_info:
            cli.main([name, "--help"])
        assert exit_info.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: vecgraph {name}"), name
        assert "examples:" in out and f"vecgraph {name}" in out.split("examples:")[1], name
    proc = ok("--help")
    assert all(name in proc.stdout for name in SUBCOMMANDS)
    # The timestamp columns take ISO 8601 text as well as microseconds, and the help says so.
    with pytest.raises(SystemExit):
        cli.main(["ingest", "--help"])
    ingest_help = " ".join(capsys.readouterr().out.split())
    assert "--ts-column NAME node timestamp: int64 microseconds since the epoch, an ISO 8601 date or timestamp" in ingest_help
    assert ok("--version").stdout.strip() == f"vecgraph {vg.__version__}"
    # The child runs without VECGRAPH_FORCE_ISA (see _env): the best ISA this machine has.
    assert "active ISA: " + vg.available_isas()[-1] in ok("info").stdout


def test_usage_errors_exit_2(graph_folder, tmp_path, capsys):
    q = _npy(tmp_path, "q.npy", _vectors()[0])
    assert "invalid choice: 'csv'" in failed(2, "export", graph_folder, tmp_path / "out", "--format", "csv")
    assert not (tmp_path / "out").exists()
    assert "exactly one" in failed(2, "query", graph_folder)
    assert "exactly one; both only with --hybrid" in failed(2, "query", graph_folder, "text", "--vector", q)
    assert "TEXT is empty" in failed(2, "query", graph_folder, " ")
    for args in (["query", str(graph_folder), "text"], ["stats", str(graph_folder)], ["info"]):
        with pytest.raises(SystemExit) as exit_info:  # the subcommand's usage, not the top-level one
            cli.main(args + ["--bogus-option", "7"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"usage: vecgraph {args[0]}"), err
        assert err.rstrip().endswith(f"vecgraph {args[0]}: error: unrecognized arguments: --bogus-option 7"), err
    assert "-k: expected an integer in [1," in failed(2, "query", graph_folder, "--vector", q, "-k", "0")
    assert "--direction: invalid choice" in failed(2, "query", graph_folder, "--vector", q, "--direction", "up")
    assert "nothing to ingest" in failed(2, "ingest", tmp_path / "new.vg", "--dim", "8")
    # Flags of the kind of file not given change nothing: refused before the folder is made.
    edges = tmp_path / "e.csv"
    edges.write_text("src,dst\na,b\n")
    err = failed(2, "ingest", tmp_path / "new.vg", "--dim", "8", "--edges", edges, "--upsert", "--key-column", "id")
    assert "--key-column, --upsert apply to --nodes files; give --nodes FILE or drop them" in err
    err = failed(2, "ingest", tmp_path / "new.vg", "--dim", "8", "--nodes", edges, "--rel-column", "kind")
    assert "--rel-column applies to --edges files; give --edges FILE or drop it" in err
    assert not (tmp_path / "new.vg").exists()
    assert "--rejects needs --on-error skip" in failed(2, "ingest", tmp_path / "new.vg", "--nodes", "x.csv",
                                                       "--rejects", "r.jsonl")
    assert "invalid choice" in failed(2, "frobnicate")
    assert not (tmp_path / "new.vg").exists()


# ---------------------------------------------------------------- query


def test_query_vector_table(graph_folder, tmp_path):
    q = _npy(tmp_path, "q.npy", _vectors()[7])
    proc = ok("query", graph_folder, "--vector", q, "--exact", "-k", "5")
    rows = _table_rows(proc.stdout)
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0][1:] == ["n7", pytest.approx(1.0, abs=0.01), 0, "(seed)"]
    assert "(5 results; 8 seeds, " in proc.stdout
    # One seed and one hop over "next" edges going out: the seed and the node after it.
    proc = ok("query", graph_folder, "--vector", q, "--seeds", "1", "--hops", "1", "--rels", "next",
              "--direction", "out", "--exact")
    rows = _table_rows(proc.stdout)
    assert [(r[1], r[3], r[4]) for r in rows] == [("n7", 0, "(seed)"), ("n8", 1, "'n7' -next-> 'n8'")]
    # Walking in: the node before it, with the arrow as the edge is stored.
    rows = _table_rows(ok("query", graph_folder, "--vector", q, "--seeds", "1", "--hops", "1", "--rels", "next",
                          "--direction", "in", "--exact").stdout)
    assert [(r[1], r[4]) for r in rows] == [("n7", "(seed)"), ("n6", "'n7' <-next- 'n6'")]
    # A filter name the graph never held: the results are empty, and stderr says why.
    proc = ok("query", graph_folder, "--vector", q, "--exact", "--labels", "person,robot", "--rels", "nope")
    assert proc.stderr.splitlines() == [
        "vecgraph query: warning: rel 'nope' is not in the graph; the --rels filter matches nothing through it",
        "vecgraph query: warning: label 'robot' is not in the graph; the --labels filter matches nothing through it"]
    assert ok("query", graph_folder, "--vector", q, "--exact", "--labels", "person").stderr == ""
    # Each hit's label and the start of its text.
    rows = _table_rows(ok("query", graph_folder, "--vector", q, "--exact", "-k", "3").stdout, with_text=True)
    assert rows[0][1] == "n7" and rows[0][5:] == ["org", "node 7"]
    assert all(r[5] == ("person" if int(r[1][1:]) % 2 == 0 else "org") and r[6] == f"node {r[1][1:]}" for r in rows)


def test_query_json_matches_the_api(graph_folder, tmp_path):
    q = _npy(tmp_path, "q.npy", _vectors()[7])
    args = ["--seeds", "2", "--hops", "2", "-k", "15", "--exact", "--tenants", "t1", "--rels", "next,jump"]
    proc = ok("query", graph_folder, "--vector", q, "--json", *args)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    hits = json.loads(lines[0])
    with vg.Graph.open(graph_folder) as g:
        want = g.search(_vectors()[7], k=15, seeds=2, hops=2, exact=True, tenants=["t1"], rels=["next", "jump"])
    assert [h["key"] for h in hits] == want.keys
    assert [h["rank"] for h in hits] == list(range(1, len(want) + 1))
    assert [h["hops"] for h in hits] == want.hops.tolist()
    assert [h["score"] for h in hits] == pytest.approx(want.scores.tolist(), rel=1e-6)
    assert any(h["hops"] == 2 for h in hits)
    for hit, path in zip(hits, want.paths):
        assert hit["path"] == [{"src": e.src, "rel": e.rel, "dst": e.dst, "weight": e.weight} for e in path]
        assert len(hit["path"]) == hit["hops"]
        assert hit["walk"] == "(seed)" if not path else hit["walk"].endswith(repr(hit["key"]))
        assert int(hit["key"][1:]) < N // 2  # tenant t1 only
        assert (hit["label"], hit["text"]) == ("person" if int(hit["key"][1:]) % 2 == 0 else "org", f"node {hit['key'][1:]}")


def test_query_batch_of_vectors(graph_folder, tmp_path):
    rows = [3, 17, 31]
    q = _npy(tmp_path, "q.npy", _vectors()[rows])
    proc = ok("query", graph_folder, "--vector", q, "--json", "-k", "3", "--exact")
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r[0]["key"] for r in results] == [f"n{i}" for i in rows]
    assert all(len(r) == 3 for r in results)
    proc = ok("query", graph_folder, "--vector", q, "-k", "2", "--exact")
    assert "query 1 of 3" in proc.stdout and "query 3 of 3" in proc.stdout


def test_query_labels_filter(graph_folder, tmp_path):
    q = _npy(tmp_path, "q.npy", _vectors()[7])  # n7 is an "org"
    hits = json.loads(ok("query", graph_folder, "--vector", q, "--json", "--labels", "person", "--exact").stdout)
    assert hits and "n7" not in [h["key"] for h in hits]
    assert all(int(h["key"][1:]) % 2 == 0 for h in hits)


def test_query_tenants_empty_string_is_the_default_tenant(tmp_path):
    folder = str(tmp_path / "t.vg")
    with vg.Graph.open(folder, dim=DIM, sync="off") as g:
        g.add_nodes(["shared", "mine"], _vectors()[:2], tenants=["", "u1"])
    q = _npy(tmp_path, "q.npy", _vectors()[1])
    keys = lambda *args: [h["key"] for h in json.loads(ok("query", folder, "--vector", q, "--json", "--exact", *args).stdout)]
    assert keys("--tenants", "") == ["shared"]
    assert keys("--tenants", "u1") == ["mine"]
    assert sorted(keys("--tenants", "", "--tenants", "u1")) == ["mine", "shared"]
    assert "expected comma-separated names" in failed(2, "query", folder, "--vector", q, "--tenants", "u1,")


def test_query_labels_and_rels_empty_string_is_the_default_one(tmp_path):
    folder = str(tmp_path / "d.vg")
    vectors = _vectors()[:4]
    with vg.Graph.open(folder, dim=DIM, sync="off") as g:
        g.add_nodes(["plain", "tagged", "plain2", "other"], vectors, labels=["", "x", "", "y"])
        g.add_edges(["plain", "tagged"], ["tagged", "plain2"], rels=["", "r"])
        by_label = g.search(vectors[0], labels=[""], exact=True).keys
        by_rel = g.search(vectors[0], seeds=1, rels=[""], exact=True).keys
    q = _npy(tmp_path, "q.npy", vectors[0])

    def keys(*args):
        return [h["key"] for h in json.loads(ok("query", folder, "--vector", q, "--json", "--exact", *args).stdout)]

    assert sorted(by_label) == ["plain", "plain2"] and keys("--labels", "") == by_label
    assert sorted(keys("--labels", "x", "--labels", "")) == ["plain", "plain2", "tagged"]
    walk = ("--seeds", "1", "--hops", "2")
    assert by_rel == ["plain", "tagged"]  # "r" from tagged to plain2 is not followed
    assert keys("--rels", "", *walk) == by_rel
    assert sorted(keys("--rels", "", "--rels", "r", *walk)) == ["plain", "plain2", "tagged"]
    err = failed(2, "query", folder, "--vector", q, "--labels", "x,")
    assert "argument --labels: expected comma-separated names, got 'x,'" in err
    assert "the default (empty) label is --labels '' on its own" in err
    assert "the default (empty) relation type is --rels ''" in failed(2, "query", folder, "--vector", q, "--rels", ",r")


def test_query_table_shows_control_characters_as_escapes(tmp_path):
    # Keys, rel names and texts come from users' data: printed raw, an ESC sequence in one
    # could clear the screen or retitle the terminal. The table escapes them; --json keeps them.
    folder = str(tmp_path / "c.vg")
    vectors = _vectors()[:2]
    key, rel, text = "k\x1b]0;pwned\x07", "cites\x1b[2J", "red \x1b[31mtext\u200b"
    with vg.Graph.open(folder, dim=DIM, sync="off") as g:
        g.add_nodes(["plain", key], vectors, texts=["plain", text])
        g.add_edges(["plain"], [key], rels=[rel])
    q = _npy(tmp_path, "q.npy", vectors[0])
    table = ok("query", folder, "--vector", q, "--exact", "--seeds", "1").stdout
    assert "\x1b" not in table and "\x07" not in table
    assert "'k\\x1b]0;pwned\\x07'" in table  # the walk names nodes by repr
    assert "k\\x1b]0;pwned\\x07  " in table  # the key column
    assert "'plain' -cites\\x1b[2J-> 'k\\x1b]0;pwned\\x07'" in table
    hits = json.loads(ok("query", folder, "--vector", q, "--exact", "--seeds", "1", "--json").stdout)
    assert [h["key"] for h in hits] == ["plain", key] and hits[1]["path"][0]["rel"] == rel
    assert hits[1]["walk"] == f"'plain' -{rel}-> {key!r}"
    hybrid = ok("query", folder, "red", "--hybrid", "--vector", q).stdout
    assert "\x1b" not in hybrid and "red \\x1b[31mtext\\u200b" in hybrid
    fused = json.loads(ok("query", folder, "red", "--hybrid", "--vector", q, "--json").stdout)
    assert [h["text"] for h in fused if h["key"] == key] == [text]
    assert formatting._printable("plain text é 東京駅 😀") == "plain text é 東京駅 😀"
    assert formatting._printable("a\tb\nc\x00\u202e") == "a\\tb\\nc\\x00\\u202e"
    # Spaces of every kind and the joiner inside emoji sequences are shown as they are.
    assert formatting._printable("family 👨\u200d👩\u200d👧 東京\u3000駅 nb\xa0sp") == "family 👨\u200d👩\u200d👧 東京\u3000駅 nb\xa0sp"


def test_query_exact_and_hybrid_exclude_each_other(graph_folder, tmp_path):
    q = _npy(tmp_path, "q.npy", _vectors()[0])
    for args in (["node 3", "--hybrid", "--exact"], ["node 3", "--exact", "--hybrid", "--vector", q]):
        err = failed(2, "query", graph_folder, *args)
        assert err.startswith("usage: vecgraph query"), err
        assert "vecgraph query: error: --exact and --hybrid exclude each other" in err
    hits = json.loads(ok("query", graph_folder, "node 3", "--hybrid", "--json").stdout)
    assert hits[0]["key"] == "n3"


def test_query_text_may_follow_options(graph_folder, tmp_path):
    """TEXT after an option (query FOLDER --hybrid TEXT) is read as TEXT, as it is before the
    options, instead of being an unrecognized argument; a second TEXT is still one."""
    q = _npy(tmp_path, "q.npy", _vectors()[0])
    expected = ok("query", graph_folder, "node 3", "--hybrid", "-k", "3", "--json").stdout
    for args in (["--hybrid", "node 3", "-k", "3"], ["-k", "3", "--hybrid", "node 3"],
                 ["--json", "-k", "3", "--hybrid", "node 3"]):
        assert ok("query", graph_folder, *args, "--json").stdout == expected
    assert ok("--debug", "query", graph_folder, "--json", "node 3", "--hybrid", "-k", "3").stdout == expected
    with_vector = ok("query", graph_folder, "node 3", "--hybrid", "--vector", q, "--json").stdout
    assert ok("query", graph_folder, "--vector", q, "node 3", "--hybrid", "--json").stdout == with_vector
    assert "unrecognized arguments: more" in failed(2, "query", graph_folder, "--hybrid", "node 3", "more")
    err = failed(2, "query", graph_folder, "--vector", q, "node 3")  # both without --hybrid
    assert "give either TEXT or --vector FILE.npy" in err


def test_query_embedder_and_vector_exclude_each_other(graph_folder, tmp_path):
    q = _npy(tmp_path, "q.npy", _vectors()[0])
    for args in (["--vector", q], ["node 3", "--hybrid", "--vector", q]):
        err = failed(2, "query", graph_folder, *args, "--embedder", "no_such_module_xyz:E")
        assert err.startswith("usage: vecgraph query"), err
        assert "vecgraph query: error: --embedder and --vector exclude each other" in err


def test_query_errors(graph_folder, tmp_path):
    wrong = _npy(tmp_path, "q5.npy", np.ones(5, np.float32))
    err = failed(1, "query", graph_folder, "--vector", wrong)
    assert err.startswith("vecgraph query: error: ")
    assert "dim 5" in err and "dim 8" in err and "q5.npy" in err
    cube = _npy(tmp_path, "cube.npy", np.ones((2, 2, 8), np.float32))
    assert "(dim,) or (n, dim)" in failed(1, "query", graph_folder, "--vector", cube)
    (tmp_path / "text.npy").write_text("not numpy")
    err = failed(1, "query", graph_folder, "--vector", tmp_path / "text.npy")
    assert "text.npy is not a NumPy .npy file (it does not start with the .npy magic bytes" in err
    assert "pickle" not in err  # what np.load says of any file that is not .npy
    truncated = _npy(tmp_path, "cut.npy", np.ones(DIM, np.float32))
    with open(truncated, "r+b") as f:
        f.truncate(100)
    assert "cut.npy is not a NumPy .npy file of numbers" in failed(1, "query", graph_folder, "--vector", truncated)
    (tmp_path / "empty.npy").write_bytes(b"")
    err = failed(1, "query", graph_folder, "--vector", tmp_path / "empty.npy")
    assert "empty.npy is not a NumPy .npy file" in err and "Traceback" not in err
    huge = _npy(tmp_path, "huge.npy", np.full(DIM, 1e300))  # float64 beyond float32: inf, refused by name
    err = failed(1, "query", graph_folder, "--vector", huge)
    assert "inf" in err and "RuntimeWarning" not in err
    assert "No such file" in failed(1, "query", graph_folder, "--vector", tmp_path / "absent.npy")
    err = failed(1, "query", graph_folder, "who knows n7?")
    assert "records no embedder" in err and "--vector" in err
    assert "cannot load embedder 'no_such_module_xyz:E'" in failed(
        1, "query", graph_folder, "who?", "--embedder", "no_such_module_xyz:E")


# ---------------------------------------------------------------- missing folders, --debug, Ctrl-C


def test_missing_folder_is_an_error_and_is_not_created(tmp_path):
    missing = tmp_path / "absent.vg"
    q = _npy(tmp_path, "q.npy", np.ones(DIM, np.float32))
    for args in (["query", missing, "--vector", q], ["stats", missing], ["checkpoint", missing],
                 ["compact", missing], ["export", missing, tmp_path / "out"], ["verify", missing]):
        err = failed(1, *args)
        assert err == f"vecgraph {args[0]}: error: no vecgraph graph at {missing}\n"
        assert not missing.exists() and not (tmp_path / "out").exists()
    (tmp_path / "empty").mkdir()
    assert "no vecgraph graph at" in failed(1, "stats", tmp_path / "empty")
    assert os.listdir(tmp_path / "empty") == []


def test_debug_shows_the_traceback(tmp_path):
    missing = tmp_path / "absent.vg"
    for args in (["--debug", "stats", missing], ["stats", missing, "--debug"]):
        proc = run(*args)
        assert proc.returncode == 1
        assert "Traceback (most recent call last)" in proc.stderr
        assert "no vecgraph graph at" in proc.stderr


def test_interrupt_exits_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_cmd_stats", interrupted)
    assert cli.main(["stats", "anywhere"]) == 130
    assert capsys.readouterr().err.strip() == "vecgraph stats: interrupted"


# ---------------------------------------------------------------- stats, checkpoint, compact


def test_stats(graph_folder):
    out = ok("stats", graph_folder).stdout
    fields = dict(line.split(None, 1) for line in out.splitlines())
    assert fields["nodes"] == "40" and fields["edges"] == "80" and fields["dim"] == "8"
    assert fields["rels"] == "2" and fields["snapshot"].startswith("snapshots/")
    stats = json.loads(ok("stats", graph_folder, "--json").stdout)
    assert (stats["nodes"], stats["edges"], stats["labels"], stats["tenants"]) == (40, 80, 2, 2)
    assert stats["metric"] == "cos" and stats["path"] == os.path.abspath(graph_folder)
    assert stats["embedder"] is None and stats["disk_bytes"] > 0
    # A writable folder reads as writable, although stats opens it read-only to look.
    assert stats["read_only"] is False and fields["read_only"] == "no"


def test_checkpoint_and_compact(tmp_path):
    folder = str(tmp_path / "g.vg")
    _build(folder, checkpoint=False)
    assert json.loads(ok("stats", folder, "--json").stdout)["snapshot"] is None
    out = ok("checkpoint", folder).stdout
    assert out.startswith("checkpoint: 40 nodes, 80 edges at LSN 2 in ") and folder in out
    assert json.loads(ok("stats", folder, "--json").stdout)["snapshot"] is not None
    with vg.Graph.open(folder, sync="off") as g:
        g.delete_edges(["n0"], ["n1"])
        g.add_edges(["n0"], ["n2"], rels="skip")
    out = ok("compact", folder).stdout
    assert "compacted" in out and "80 edges in the CSR" in out
    assert "checkpoint: 40 nodes, 80 edges at LSN 4 in " in out
    stats = json.loads(ok("stats", folder, "--json").stdout)
    assert (stats["edges"], stats["rels"], stats["snapshot_lsn"]) == (80, 3, 4)


# ---------------------------------------------------------------- console script


def test_installed_console_script(graph_folder):
    # The README installs the package (pip install ".[test]"), which puts the console script
    # beside this interpreter's other scripts.
    script = os.path.join(sysconfig.get_path("scripts"), "vecgraph")
    assert os.path.isfile(script), f"no vecgraph console script in {sysconfig.get_path('scripts')}"
    stats = json.loads(ok("stats", graph_folder, "--json", command=[script]).stdout)
    assert (stats["nodes"], stats["edges"]) == (40, 80)
    err = failed(1, "stats", os.path.join(graph_folder, "nope"), command=[script])
    assert err.startswith("vecgraph stats: error: no vecgraph graph at")


# ---------------------------------------------------------------- ingest

LETTERS = '''
import numpy as np


class Letters:
    """Counts of letters folded into 8 buckets: a tiny deterministic embedder."""

    name = "letters_embedder:Letters"
    dim = 8

    def __call__(self, texts):
        out = np.full((len(texts), 8), 0.01, np.float32)
        for row, text in enumerate(texts):
            for c in text.lower():
                out[row, ord(c) % 8] += 1.0
        return out


class Other(Letters):
    name = "other"


class Wide(Letters):
    name = "wide"
    dim = 16
'''


def _node_table() -> pa.Table:
    vectors = _vectors()
    return pa.table({
        "key": KEYS,
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        "label": ["person" if i % 2 == 0 else "org" for i in range(N)],
        "tenant": ["t1" if i < N // 2 else "t2" for i in range(N)],
        "text": [f"node {i}" for i in range(N)],
    })


def _write_inputs(tmp_path) -> tuple:
    nodes, edges = str(tmp_path / "nodes.parquet"), str(tmp_path / "edges.csv")
    pq.write_table(_node_table(), nodes)
    src, dst, rels, weights = zip(*_edges())
    pacsv.write_csv(pa.table({"src": list(src), "dst": list(dst), "rel": list(rels), "weight": list(weights)}), edges)
    return nodes, edges


def _jsonl(path, rows: list) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    return str(path)


def test_ingest_parquet_and_csv_gives_the_same_graph(graph_folder, tmp_path):
    nodes, edges = _write_inputs(tmp_path)
    folder = tmp_path / "g.vg"
    out = ok("ingest", folder, "--nodes", nodes, "--edges", edges, "--dim", DIM, "--batch-rows", 16).stdout
    assert f"nodes {nodes}: 40 rows read, 40 accepted, 0 rejected" in out
    assert f"edges {edges}: 80 rows read, 80 accepted, 0 rejected" in out
    assert "checkpoint: 40 nodes, 80 edges at LSN " in out
    stats = json.loads(ok("stats", folder, "--json").stdout)
    assert (stats["nodes"], stats["edges"], stats["labels"], stats["tenants"], stats["rels"]) == (40, 80, 2, 2, 2)
    assert stats["snapshot"] is not None
    q = _npy(tmp_path, "q.npy", _vectors()[[11, 29]])
    args = ["--vector", q, "--json", "--exact", "-k", "12", "--seeds", "2", "--hops", "2"]
    assert ok("query", folder, *args).stdout == ok("query", graph_folder, *args).stdout
    # Edges alone into the existing graph: no --dim needed.
    more = _jsonl(tmp_path / "more.jsonl", [{"source": "n0", "target": "n20", "type": "far"}])
    assert f"edges {more}: 1 row read, 1 accepted" in ok("ingest", folder, "--edges", more).stdout
    assert json.loads(ok("stats", folder, "--json").stdout)["edges"] == 81


def test_ingest_column_mapping(tmp_path):
    vectors = _vectors()
    rows = [{"id2": f"k{i}", "emb": vectors[i].tolist(), "kind": "doc" if i % 3 else "note", "body": f"text {i}"}
            for i in range(N)]
    source = _jsonl(tmp_path / "docs.jsonl", rows)
    folder = tmp_path / "g.vg"
    out = ok("ingest", folder, "--nodes", source, "--key-column", "id2", "--vector-column", "emb",
             "--label-column", "kind", "--text-column", "body", "--dim", DIM, "--metric", "ip",
             "--no-checkpoint", "--sync").stdout
    assert "40 accepted" in out and "checkpoint:" not in out
    stats = json.loads(ok("stats", folder, "--json").stdout)
    assert (stats["nodes"], stats["labels"], stats["metric"], stats["snapshot"]) == (40, 2, "ip", None)
    q = _npy(tmp_path, "q.npy", vectors[5])
    hits = json.loads(ok("query", folder, "--vector", q, "--json", "--exact", "--labels", "doc").stdout)
    assert hits[0]["key"] == "k5"


def test_ingest_unknown_column_and_bad_rows(tmp_path):
    nodes, _ = _write_inputs(tmp_path)
    folder = tmp_path / "g.vg"
    err = failed(1, "ingest", folder, "--nodes", nodes, "--dim", DIM, "--key-column", "nosuch")
    assert err.startswith(f"vecgraph ingest: error: {nodes}: --key-column nosuch: ") and "'key'" in err
    assert not folder.exists()  # a graph the command created and that took nothing is removed
    vectors = _vectors()
    rows = [{"key": f"k{i}", "vector": vectors[i].tolist()} for i in range(10)]
    rows[3]["vector"] = rows[3]["vector"][:7]
    rows[6]["key"] = None
    source = _jsonl(tmp_path / "bad.jsonl", rows)
    err = failed(1, "ingest", folder, "--nodes", source, "--dim", DIM)
    assert "row 3, column 'vector'" in err and "pass --on-error skip" in err and not folder.exists()
    rejects = tmp_path / "rejects.jsonl"
    out = ok("ingest", folder, "--nodes", source, "--dim", DIM, "--on-error", "skip", "--rejects", rejects).stdout
    assert "10 rows read, 8 accepted, 2 rejected" in out and f"rejected rows written to {rejects}" in out
    assert rejects.exists()
    assert json.loads(ok("stats", folder, "--json").stdout)["nodes"] == 8
    out = ok("ingest", folder, "--nodes", source, "--upsert", "--on-error", "skip", "--no-checkpoint").stdout
    assert "10 rows read, 8 accepted, 2 rejected" in out and f"written to {source}.rejects.jsonl" in out


def test_ingest_skip_keeps_a_rejects_file_only_for_inputs_with_bad_rows(tmp_path):
    nodes, edges = _write_inputs(tmp_path)
    folder = tmp_path / "g.vg"
    out = ok("ingest", folder, "--nodes", nodes, "--edges", edges, "--dim", DIM, "--on-error", "skip").stdout
    assert "40 rows read, 40 accepted, 0 rejected" in out and "80 rows read, 80 accepted, 0 rejected" in out
    assert "rejected rows written" not in out
    assert sorted(os.listdir(tmp_path)) == ["edges.csv", "g.vg", "nodes.parquet"]
    # Several inputs, numbered rejects files: only the input with a bad row keeps one; the one an
    # earlier run left for the other input is removed.
    vectors = _vectors()
    more = _jsonl(tmp_path / "more.jsonl", [{"key": "m0", "vector": vectors[0].tolist()},
                                            {"key": "m1", "vector": [1.0] * 3}])
    (tmp_path / "bad.1.jsonl").write_text('{"stale": true}\n')
    out = ok("ingest", folder, "--nodes", nodes, "--nodes", more, "--upsert", "--on-error", "skip",
             "--rejects", tmp_path / "bad.jsonl").stdout
    assert f"rejected rows written to {tmp_path / 'bad.2.jsonl'}" in out and "bad.1.jsonl" not in out
    assert not (tmp_path / "bad.1.jsonl").exists() and not (tmp_path / "bad.jsonl").exists()
    records = [json.loads(line) for line in (tmp_path / "bad.2.jsonl").read_text().splitlines()]
    assert [(r["row"], r["key"], r["column"]) for r in records] == [(1, "m1", "vector")]


def test_ingest_and_query_text_with_an_embedder(tmp_path):
    (tmp_path / "letters_embedder.py").write_text(LETTERS)
    texts = ["graph databases", "vector search", "agent memory", "quantized kernels", "zebra crossing"]
    source = _jsonl(tmp_path / "docs.jsonl", [{"key": f"d{i}", "text": t} for i, t in enumerate(texts)])
    folder = tmp_path / "g.vg"
    out = ok("ingest", folder, "--nodes", source, "--embedder", "letters_embedder:Letters", path=str(tmp_path)).stdout
    assert "5 accepted" in out
    stats = json.loads(ok("stats", folder, "--json").stdout)
    assert stats["dim"] == 8 and stats["embedder"] == {"name": "letters_embedder:Letters", "dim": 8}
    # The recorded embedder turns the text into the query; the same text finds its own node.
    rows = _table_rows(ok("query", folder, "agent memory", "--exact", path=str(tmp_path)).stdout)
    assert rows[0][1] == "d2" and rows[0][2] == pytest.approx(1.0, abs=0.01)
    err = failed(2, "query", folder, "agent memory", "--embedder", "letters_embedder:Other", path=str(tmp_path))
    assert "letters_embedder:Letters" in err and "'other'" in err
    assert "cannot be loaded" in failed(1, "query", folder, "agent memory")  # its module is not importable


def test_bad_arguments_exit_2_naming_what_was_expected_and_given(graph_folder, tmp_path):
    q = _npy(tmp_path, "q.npy", _vectors()[0])
    err = failed(2, "query", graph_folder, "node 3", "--hybrid", "-k", "100001")
    assert err.startswith("usage: vecgraph query")
    assert "error: argument -k: with --hybrid, expected an integer in [1, 100,000], got 100,001" in err
    hits = json.loads(ok("query", graph_folder, "node 3", "--hybrid", "-k", "100000", "--json").stdout)
    assert hits[0]["key"] == "n3"
    two = _npy(tmp_path, "two.npy", _vectors()[:2])
    err = failed(2, "query", graph_folder, "node 3", "--hybrid", "--vector", two)
    assert "error: argument --vector: with --hybrid, expected one query vector" in err
    assert "two.npy holding 2 rows" in err
    err = failed(2, "query", graph_folder, "node 3", "--embedder", "nocolon")
    assert "error: argument --embedder: embedder spec must be 'wordllama' or 'module:attribute'" in err
    assert "got 'nocolon'" in err

    (tmp_path / "letters_embedder.py").write_text(LETTERS)
    lib = {"path": str(tmp_path)}
    err = failed(2, "query", graph_folder, "node 3", "--embedder", "letters_embedder:Wide", **lib)
    assert "error: argument --embedder: expected an embedder of the graph's dim 8, got 'wide', which makes 16-d" in err

    source = _jsonl(tmp_path / "docs.jsonl", [{"key": "d0", "text": "graph databases"}])
    before = json.loads(ok("stats", graph_folder, "--json").stdout)
    for args, message in (
            (["--dim", "16"],
             f"argument --dim: expected the dim of the graph at {graph_folder}, 8 (or no --dim), got 16"),
            (["--metric", "l2"], f"argument --metric: expected the metric of the graph at {graph_folder}, cos "
                                 "(or no --metric), got l2"),
            (["--embedder", "letters_embedder:Wide"],
             "argument --embedder: expected an embedder of the graph's dim 8")):
        err = failed(2, "ingest", graph_folder, "--nodes", source, *args, **lib)
        assert err.startswith("usage: vecgraph ingest") and message in err, err
    after = json.loads(ok("stats", graph_folder, "--json").stdout)
    assert (after["nodes"], after["edges"], after["embedder"]) == (before["nodes"], before["edges"], None)

    new = tmp_path / "new.vg"
    err = failed(2, "ingest", new, "--nodes", source, "--embedder", "letters_embedder:Letters", "--dim", "16", **lib)
    assert "argument --dim: expected the dim of --embedder letters_embedder:Letters, 8 (or no --dim), got 16" in err
    assert not new.exists()
    ok("ingest", new, "--nodes", source, "--embedder", "letters_embedder:Letters", **lib)
    err = failed(2, "ingest", new, "--nodes", source, "--upsert", "--embedder", "letters_embedder:Other", **lib)
    assert (f"argument --embedder: expected the embedder the graph at {new} was built with, "
            "'letters_embedder:Letters' (or no --embedder), got 'other'") in err


def test_query_loads_the_recorded_spec_of_an_embedder_named_otherwise(tmp_path):
    """An embedder whose name is not its "module:attribute" spec: the graph records the spec
    it was loaded by, and `vecgraph query TEXT` (plain and --hybrid) loads it again by it."""
    (tmp_path / "letters_embedder.py").write_text(LETTERS)
    texts = ["graph databases", "vector search", "agent memory"]
    source = _jsonl(tmp_path / "docs.jsonl", [{"key": f"d{i}", "text": t} for i, t in enumerate(texts)])
    folder = tmp_path / "g.vg"
    ok("ingest", folder, "--nodes", source, "--embedder", "letters_embedder:Other", path=str(tmp_path))
    stats = json.loads(ok("stats", folder, "--json").stdout)
    assert stats["embedder"] == {"name": "other", "dim": 8, "spec": "letters_embedder:Other"}
    rows = _table_rows(ok("query", folder, "agent memory", "--exact", path=str(tmp_path)).stdout)
    assert rows[0][1] == "d2"
    assert "d2" in ok("query", folder, "agent memory", "--hybrid", path=str(tmp_path)).stdout
    err = failed(1, "query", folder, "agent memory")  # its module is not importable from here
    assert "embedder 'other', which cannot be loaded by 'letters_embedder:Other'" in err


def _contents(*paths) -> dict:
    return {str(p): pathlib.Path(p).read_bytes() for p in paths}


def test_ingest_rejects_may_not_overwrite_an_input(tmp_path):
    nodes, edges = _write_inputs(tmp_path)
    source = _jsonl(tmp_path / "more.jsonl", [{"key": "m0", "vector": [1.0] * DIM}])
    more_edges = _jsonl(tmp_path / "links.2.jsonl", [{"src": "n0", "dst": "m0"}])
    folder = tmp_path / "g.vg"
    before = _contents(nodes, edges, source, more_edges)
    respelled = tmp_path / "x" / ".." / "more.jsonl"
    cases = [
        (["--nodes", nodes, "--rejects", nodes], nodes, nodes),
        (["--nodes", source, "--rejects", respelled], respelled, source),
        # two inputs: the numbered links.1.jsonl, links.2.jsonl; the second is an input
        (["--nodes", source, "--edges", more_edges, "--rejects", tmp_path / "links.jsonl"], more_edges, more_edges),
    ]
    for args, reject, clash in cases:
        err = failed(2, "ingest", folder, *args, "--on-error", "skip", "--dim", DIM)
        assert f"vecgraph ingest: error: --rejects {reject} is the input file {clash}: writing the rejects there " \
               "would destroy it; name another --rejects file" in err
        assert not folder.exists()
    # the default rejects file beside an input may not be another input either
    beside = _jsonl(tmp_path / "more.jsonl.rejects.jsonl", [{"src": "n0", "dst": "m0"}])
    err = failed(2, "ingest", folder, "--nodes", source, "--edges", beside, "--on-error", "skip", "--dim", DIM)
    assert f"the default rejects file {beside} is the input file {beside}" in err
    assert _contents(*before) == before and not folder.exists()
    # numbered rejects files that are not inputs are fine
    out = ok("ingest", folder, "--nodes", nodes, "--edges", edges, "--rejects", edges, "--on-error", "skip",
             "--dim", DIM).stdout
    assert "40 accepted" in out and "80 accepted" in out
    assert _contents(*before) == before


def test_ingest_rejects_may_not_be_inside_the_graph_folder(tmp_path):
    """--rejects naming a file of the graph folder (its MANIFEST) is a usage error that changes
    nothing: opened for writing and removed when no row was rejected, it would lose the graph."""
    nodes, edges = _write_inputs(tmp_path)
    folder = tmp_path / "g.vg"
    ok("ingest", folder, "--nodes", nodes, "--dim", DIM)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "LOCK")
    before = _contents(*files)
    respelled = tmp_path / "x" / ".." / "g.vg" / "r.jsonl"
    for reject in (folder / "MANIFEST", folder / "wal" / "x.jsonl", respelled):
        err = failed(2, "ingest", folder, "--nodes", nodes, "--upsert", "--on-error", "skip",
                     "--rejects", reject)
        assert f"vecgraph ingest: error: --rejects {reject} is inside the graph folder {folder}" in err
    assert _contents(*files) == before
    assert ok("stats", folder).stdout.split()[:2] == ["nodes", "40"]


def test_ingest_csv_keys_are_strings_unless_key_type_int(tmp_path):
    vector = '"' + json.dumps([1.0] * DIM) + '"'
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("id,vector\n" + "".join(f"{k},{vector}\n" for k in ("007", "1e3", "+5", "1", "2")))
    edges = tmp_path / "edges.csv"
    edges.write_text("source,target\n1,2\n007,1e3\n")
    folder = tmp_path / "g.vg"
    ok("ingest", folder, "--nodes", nodes, "--edges", edges, "--dim", DIM)
    q = _npy(tmp_path, "q.npy", np.ones(DIM, np.float32))
    hits = json.loads(ok("query", folder, "--vector", q, "--json", "--exact", "--hops", "0").stdout)
    assert sorted(hit["key"] for hit in hits) == ["+5", "007", "1", "1e3", "2"]
    assert json.loads(ok("stats", folder, "--json").stdout)["edges"] == 2
    # --key-type int: integers; text that is not one is named with the flag
    ints = tmp_path / "ints.vg"
    err = failed(1, "ingest", ints, "--nodes", nodes, "--dim", DIM, "--key-type", "int")
    assert "row 1, column 'id': key '1e3' is not an int64 integer (--key-type int)" in err
    ok("ingest", ints, "--nodes", nodes, "--dim", DIM, "--key-type", "int", "--on-error", "skip",
       "--rejects", tmp_path / "r.jsonl")
    err = failed(1, "ingest", ints, "--edges", edges)
    assert "source '1' is not a node of the graph (dangling edge); the graph has the int key 1: " \
           "read the keys as ints with --key-type int" in err
    edges.write_text("source,target\n1,2\n007,+5\n")
    ok("ingest", ints, "--edges", edges, "--key-type", "int")
    hits = json.loads(ok("query", ints, "--vector", q, "--json", "--exact", "--hops", "0").stdout)
    assert sorted(hit["key"] for hit in hits) == [1, 2, 5, 7]
    assert json.loads(ok("stats", ints, "--json").stdout)["edges"] == 2
    assert "invalid choice: 'float'" in failed(2, "ingest", ints, "--edges", edges, "--key-type", "float")


def test_ingest_csv_line_of_the_wrong_number_of_fields(tmp_path):
    """Nodes and edges from CSV in one command, one edge line of 3 fields of 4: with --on-error
    skip every good edge is written and checkpointed, the line listed with its number; without,
    the command fails naming the line, and no edge of its batch is written."""
    vector = '"' + json.dumps([1.0] * DIM) + '"'
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("key,vector\n" + "".join(f"p{i:03d},{vector}\n" for i in range(10)))
    edges = tmp_path / "edges.csv"
    lines = ["src,dst,rel,weight"] + [f"p{i % 10:03d},p{(i + 1) % 10:03d},knows,1" for i in range(400)]
    edges.write_text("\n".join(lines + ["p005,p006,knows", "p001,p003,likes,0.5"]) + "\n")
    reason = "line 402: expected 4 fields as in the header, got 3: ['p005', 'p006', 'knows']"
    folder = tmp_path / "g.vg"
    out = ok("ingest", folder, "--nodes", nodes, "--edges", edges, "--dim", DIM, "--on-error", "skip").stdout
    assert f"edges {edges}: 402 rows read, 401 accepted, 1 rejected" in out
    assert f"rejected rows written to {edges}.rejects.jsonl" in out
    assert "checkpoint: 10 nodes, 401 edges at LSN " in out
    records = [json.loads(line) for line in open(f"{edges}.rejects.jsonl", encoding="utf-8")]
    assert records == [{"kind": "edge", "row": 400, "column": None, "reason": reason, "src": None, "dst": None}]
    stats = json.loads(ok("stats", folder, "--json").stdout)
    assert (stats["edges"], stats["rels"]) == (401, 2) and stats["snapshot"] is not None
    other = tmp_path / "raise.vg"
    err = failed(1, "ingest", other, "--nodes", nodes, "--edges", edges, "--dim", DIM)
    assert err == (f"vecgraph ingest: error: {edges}: edge row 400, the whole row: {reason}. Nothing of batch 1 "
                   "(rows 0-401) was written. Fix the row, or pass --on-error skip to write the good rows and "
                   "list the bad ones.\n")
    assert json.loads(ok("stats", other, "--json").stdout)["edges"] == 0


BROKEN = LETTERS + """

class Broken(Letters):
    name = "broken"

    def __call__(self, texts):
        return super().__call__(texts).astype(np.float64)
"""


def test_failed_ingest_leaves_the_folder_as_it_was(tmp_path):
    rows = [{"key": f"k{i}", "vector": [1.0] * (DIM if i != 2 else DIM - 1)} for i in range(4)]
    bad = _jsonl(tmp_path / "bad.jsonl", rows)
    empty = tmp_path / "empty.vg"
    empty.mkdir()
    assert "row 2, column 'vector'" in failed(1, "ingest", empty, "--nodes", bad, "--dim", DIM)
    assert empty.is_dir() and os.listdir(empty) == []
    # an embedder that fails: nothing recorded, nothing left; a working one is then accepted
    (tmp_path / "letters_embedder.py").write_text(BROKEN)
    docs = _jsonl(tmp_path / "docs.jsonl", [{"key": "d0", "text": "graph"}])
    err = failed(1, "ingest", empty, "--nodes", docs, "--embedder", "letters_embedder:Broken", path=str(tmp_path))
    assert "returned dtype float64" in err and os.listdir(empty) == []
    out = ok("ingest", empty, "--nodes", docs, "--embedder", "letters_embedder:Letters", path=str(tmp_path)).stdout
    assert "1 accepted" in out
    assert json.loads(ok("stats", empty, "--json").stdout)["embedder"]["name"] == "letters_embedder:Letters"
    # a folder that did not exist is removed, with the parents the command created
    deep = tmp_path / "new" / "deeper" / "g.vg"
    failed(1, "ingest", deep, "--nodes", bad, "--dim", DIM)
    assert not (tmp_path / "new").exists()
    # a folder holding other files: refused, and no LOCK left in it
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    for args in (["--dim", DIM], []):
        err = failed(1, "ingest", other, "--nodes", bad, *args)
        assert err == (f"vecgraph ingest: error: {other} is not empty and has no MANIFEST (notes.txt); "
                       "refusing to create a graph over other files\n")
        assert os.listdir(other) == ["notes.txt"]


# ---------------------------------------------------------------- export, restore, verify


def test_export_restore_verify(graph_copy, tmp_path):
    out = ok("export", graph_copy, tmp_path / "pq").stdout
    assert out.startswith("exported 40 nodes, 80 edges to ") and "(parquet)" in out
    files = sorted(glob.glob(str(tmp_path / "pq" / "**" / "*.parquet"), recursive=True))
    assert sorted(pq.read_table(f).num_rows for f in files) == [40, 80]
    assert "exists; pass --overwrite" in failed(1, "export", graph_copy, tmp_path / "pq")
    err = failed(1, "export", graph_copy, os.path.join(graph_copy, "out"))
    assert err.startswith("vecgraph export: error: the export folder ") and "is inside the graph folder" in err
    assert not os.path.exists(os.path.join(graph_copy, "out"))
    out = ok("export", graph_copy, tmp_path / "ipc", "--format", "arrow").stdout
    assert "(arrow)" in out
    restored = tmp_path / "restored.vg"
    out = ok("restore", tmp_path / "pq", restored).stdout
    assert out.startswith("restored 40 nodes, 80 edges from ")
    q = _npy(tmp_path, "q.npy", _vectors()[[2, 33]])
    args = ["--vector", q, "--json", "--exact", "-k", "12", "--hops", "2"]
    assert ok("query", restored, *args).stdout == ok("query", graph_copy, *args).stdout
    assert failed(1, "restore", tmp_path / "pq", restored) == (
        f"vecgraph restore: error: {restored} exists; pass --overwrite to replace it\n")
    ok("restore", tmp_path / "ipc", restored, "--overwrite")
    assert json.loads(ok("stats", restored, "--json").stdout)["edges"] == 80
    err = failed(1, "restore", tmp_path / "absent", tmp_path / "x.vg")
    assert err == f"vecgraph restore: error: no snapshot at {tmp_path / 'absent'}\n"
    assert not (tmp_path / "x.vg").exists()
    assert "no problems" in ok("verify", graph_copy).stdout
    assert json.loads(ok("verify", restored, "--json").stdout) == {"folder": str(restored), "ok": True, "problems": []}


def test_verify_reports_a_damaged_snapshot(graph_copy):
    [nodes_file] = glob.glob(os.path.join(graph_copy, "snapshots", "*", "nodes.arrow"))
    with open(nodes_file, "r+b") as f:
        f.seek(os.path.getsize(nodes_file) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    proc = run("verify", graph_copy)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "nodes.arrow" in proc.stdout
    assert proc.stderr.startswith(f"vecgraph verify: error: {graph_copy}: ")
    proc = run("verify", graph_copy, "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["ok"] is False
    assert any("nodes.arrow" in problem for problem in report["problems"])
