"""``vecgraph eval``: a small graph folder and a JSONL file of judged queries, run as users run it
(a subprocess, ``python -m vecgraph``) for the table and the --json figures, and in-process for
the errors and their exit codes (1 failure, 2 usage)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import vecgraph as vg
from test_evaluate import SHOP_KEYS, SHOP_TEXTS, SHOP_VECTORS
from vecgraph import cli, embedders

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(vg.__file__)))
DEFAULT_RUNS = ["dense", "bm25", "entity", "graph", "hybrid", "hybrid (rrf)"]

# An embedder in a module of its own, loaded by spec ("toy_embedder:Toy"), so that the graph
# records the spec and `vecgraph eval` loads it again by itself.
TOY_MODULE = '''
import numpy as np

TABLE = {"hik": (0, 0.1, 1, 0), "A7": (1, 0.05, 0, 0), "price": (1, 0.1, 0, 0)}


class Toy:
    name, dim = "toy", 4

    def __call__(self, texts):
        rows = [next((v for w, v in TABLE.items() if w in t), (1, 1, 1, 1)) for t in texts]
        out = np.array(rows, dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class Toy3:
    name, dim = "toy3", 3

    def __call__(self, texts):
        return np.ones((len(texts), 3), np.float32)
'''


def unit(*values):
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def _build(folder, embedder=None) -> None:
    with vg.Graph.open(folder, dim=4, sync="off") as g:
        if embedder is not None:
            g.use_embedder(embedder)
        g.add_nodes(SHOP_KEYS, SHOP_VECTORS, texts=SHOP_TEXTS)
        g.checkpoint()


# dense (k = 3): a7: c9-price, faq, a7-price; hike: blog, trail, a7-price; price: c9-price, faq, a7-price
# bm25:          a7: a7-price;                hike: trail, blog;             price: faq
QUERIES = [
    {"qid": "a7", "text": "A7-Pro price?", "vector": unit(1, 0.05, 0, 0).tolist(), "relevant": ["a7-price"]},
    {"qid": "hike", "text": "hiking trail maps", "relevant": [["trail", 2], ["blog", 1]]},  # embedded
    {"qid": "price", "text": "model prices", "vector": unit(1, 0.1, 0, 0).tolist(), "relevant": ["c9-price"]},
]
HIKE_DENSE = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The folder holding toy_embedder.py, on sys.path."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "toy_embedder.py").write_text(TOY_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(lib))
    return lib


@pytest.fixture
def folder(tmp_path, toy):
    """A graph folder that records the toy embedder (by its spec)."""
    path = tmp_path / "shop.vg"
    _build(str(path), embedders.load("toy_embedder:Toy"))
    return path


@pytest.fixture
def queries(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_text("\n".join(json.dumps(q, ensure_ascii=False) for q in QUERIES) + "\n\n", encoding="utf-8")
    return path


def run(*args, path=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    paths = (PACKAGE_ROOT, str(path or ""), env.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return subprocess.run([sys.executable, "-m", "vecgraph", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def test_eval_json(folder, queries, toy):
    proc = run("eval", folder, queries, "--k", "3", "--json", "--run", 'dense={"channels": ["dense"]}',
               "--run", 'bm25={"channels": ["bm25"]}', path=toy)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    figures = json.loads(proc.stdout)
    assert figures["k"] == 3 and figures["qids"] == ["a7", "hike", "price"]
    assert figures["embedded"] == 1  # "hike" has no vector: the graph's recorded embedder made it
    assert list(figures["runs"]) == ["dense", "bm25"]
    assert figures["per_query"]["dense"]["ndcg"] == pytest.approx([1 / math.log2(4), HIKE_DENSE, 1.0])
    assert figures["per_query"]["bm25"]["ndcg"] == pytest.approx([1.0, 1.0, 0.0])
    dense, bm25 = figures["runs"]["dense"], figures["runs"]["bm25"]
    assert dense["ndcg"] == pytest.approx((0.5 + HIKE_DENSE + 1) / 3) and dense["mrr"] == pytest.approx(7 / 9)
    assert (dense["recall"], bm25["recall"]) == (1.0, pytest.approx(2 / 3))
    assert figures["best_channel"] == "dense" and figures["baseline"] == "dense"
    assert (bm25["better"], bm25["worse"]) == (2, 1) and dense["better"] is None
    assert 0 < dense["p50_us"] <= dense["p99_us"]


def test_eval_table_with_the_default_runs(folder, queries, toy):
    proc = run("eval", folder, queries, "-k", "3", path=toy)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "| run | recall@3 | MRR@3 | nDCG@3 | p50 | p99 | vs dense: better / worse (of 3) |"
    assert [line.split(" | ")[0][2:] for line in lines[2:8]] == DEFAULT_RUNS
    assert lines[2].startswith("| dense | 1.000 | 0.778 | 0.787 | ") and lines[2].endswith(" | baseline |")
    assert lines[3].startswith("| bm25 | 0.667 | 0.667 | 0.667 | ") and lines[3].endswith(" | 2 / 1 |")
    assert lines[8] == ("(3 queries, k=3; 1 query text embedded with toy in "
                        f"{lines[8].split(' in ')[1].split(' s ')[0]} s (not in the latencies); "
                        "baseline dense (the best single channel): queries whose nDCG@3 is better / worse)")


def test_eval_baseline_and_run_in_process(folder, queries, capsys):
    code = cli.main(["eval", str(folder), str(queries), "-k", "3", "--run", 'dense={"channels": ["dense"]}',
                     "--run", 'bm25={"channels": ["bm25"]}', "--baseline", "bm25", "--json"])
    assert code == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["baseline"] == "bm25" and figures["best_channel"] == "dense"
    assert (figures["runs"]["dense"]["better"], figures["runs"]["dense"]["worse"]) == (1, 2)


def test_without_an_embedder_texts_run_through_bm25_and_entity(tmp_path, capsys):
    path = tmp_path / "plain.vg"
    _build(str(path))  # records no embedder
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"qid": "hike", "text": "hiking trail maps", "relevant": ["trail"]}) + "\n")
    assert cli.main(["eval", str(path), str(queries), "--json"]) == 0
    captured = capsys.readouterr()
    assert list(json.loads(captured.out)["runs"]) == ["bm25", "entity", "hybrid", "hybrid (rrf)"]
    assert captured.err == ("vecgraph eval: note: 1 query without a vector, and the graph at "
                            f"{path} records no embedder (nor was --embedder given): they run through bm25 "
                            "and entity only\n")


def test_relevant_keys_not_in_the_graph_are_noted(tmp_path, folder, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps(dict(QUERIES[0], relevant={"a7-price": 1, "42": 1})) + "\n")
    assert cli.main(["eval", str(folder), str(queries), "--run", "h={}"]) == 0
    captured = capsys.readouterr()
    assert "1 relevant key of the judgments is not in the graph" in captured.err
    assert captured.out.startswith("| run | recall@10 |")


def _fails(code, argv, capsys) -> str:
    if code == 2:
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2
    else:
        assert cli.main(argv) == code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    return captured.err


@pytest.mark.parametrize("content, message", [
    ('{"qid": "a", "text": "t", "relevant": ["x"]}\n{"qid": "b", "text": "t", "relevant": [}\n',
     "q.jsonl line 2: expected one JSON object per line, got invalid JSON"),
    ('{"qid": "a", "text": "t"}\n', "q.jsonl line 1 (qid 'a'): 'relevant' is missing"),
    ('{"qid": "a", "vector": [1, 2], "relevant": ["x"]}\n',
     "q.jsonl line 1 (qid 'a'): 'vector' has dim 2, the graph has dim 4"),
    ("", "holds no query"),
])
def test_bad_query_files_exit_1(tmp_path, folder, capsys, content, message):
    path = tmp_path / "q.jsonl"
    path.write_text(content, encoding="utf-8")
    err = _fails(1, ["eval", str(folder), str(path)], capsys)
    assert err.startswith("vecgraph eval: error: ") and message in err and err.count("\n") == 1


def test_errors_and_exit_codes(tmp_path, folder, queries, capsys):
    assert "cannot read" in _fails(1, ["eval", str(folder), str(tmp_path / "none.jsonl")], capsys)
    assert "no vecgraph graph at" in _fails(1, ["eval", str(tmp_path / "none.vg"), str(queries)], capsys)
    assert "run 'a' sets 'k': evaluate passes" in _fails(
        1, ["eval", str(folder), str(queries), "--run", 'a={"k": 3}'], capsys)
    assert "run 'a', queries[0] (qid 'a7'): unknown channel 'nope'" in _fails(
        1, ["eval", str(folder), str(queries), "--run", 'a={"channels": ["nope"]}'], capsys)
    usage = [
        (["--run", "bm25"], "argument --run: expected NAME=JSON"),
        (["--run", "bm25={channels"],
         "argument --run: run 'bm25': expected a JSON object of hybrid_search arguments"),
        (["--run", "bm25=[1]"], "expected a JSON object of hybrid_search arguments after '=', got '[1]'"),
        (["--run", "a={}", "--run", "a={}"], "run 'a' is given twice"),
        (["--baseline", "nope"], "argument --baseline: expected one of the runs ('dense', 'bm25', "),
        (["--run", "a={}", "--baseline", "b"], "expected one of the runs ('a'), got 'b'"),
        (["-k", "0"], "argument -k/--k: expected an integer in [1, 100,000], got 0"),
        (["--embedder", "toy_embedder:Toy3"],
         "argument --embedder: expected an embedder of the graph's dim 4"),
        (["--embedder", "nonsense"], "argument --embedder: embedder spec must be"),
    ]
    for extra, message in usage:
        err = _fails(2, ["eval", str(folder), str(queries), *extra], capsys)
        assert err.startswith("usage: vecgraph eval") and message in err, (extra, err)


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["eval", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: vecgraph eval") and "vecgraph eval docs.vg queries.jsonl" in out.split("examples:")[1]
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "evaluate retrieval on your own judged queries" in capsys.readouterr().out
