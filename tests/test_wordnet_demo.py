"""The WordNet main job (``vecgraph wordnet``): the retrieval metrics against hand-computed
values, the answers of relation questions on a hand-made graph, and the whole job end to end on
the first 3,000 synsets of WordNet (with a small deterministic embedder, and once with
wordllama): tables, figures, quality bars, examples, reuse of the built folder, and the command
in a subprocess."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

import vecgraph as vg
from vecgraph import cli
from vecgraph import wordnet_demo as wd
from vecgraph.datasets import wordnet

SYNSETS = 3000
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(vg.__file__)))
ROWS = {"sense": ["dense", "bm25", "entity", "graph", "hybrid"],
        "relation": ["dense", "bm25", "entity", "graph", "graph (all rels)", "hybrid"]}


class HashingEmbedder:
    """Feature hashing of lowercased words into 64 dimensions (crc32: the same in every process),
    L2-normalised. Its name is its spec, so ``embedders.load(name)`` gets it back."""

    name = "test_wordnet_demo:HashingEmbedder"
    dim = 64

    def __call__(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        out[:, 0] = 1e-3  # never all zero
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.strip(".,;:!?'\"()").encode()) % self.dim] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


# ---------------------------------------------------------------- metrics


def test_metrics_one_relevant_item():
    ranked = ["a", "b", "c", "d"]
    assert wd.recall_at_k(ranked, ["b"]) == 1.0
    assert wd.mrr_at_k(ranked, ["b"]) == 0.5
    assert wd.ndcg_at_k(ranked, ["b"]) == pytest.approx(1 / math.log2(3))  # 0.6309
    assert wd.ndcg_at_k(ranked, ["a"]) == 1.0


def test_metrics_several_relevant_items():
    ranked = ["a", "b", "c"]
    relevant = {"a", "c", "x"}
    assert wd.recall_at_k(ranked, relevant) == pytest.approx(2 / 3)
    assert wd.mrr_at_k(ranked, relevant) == 1.0
    dcg = 1 + 1 / math.log2(4)                     # a at rank 1, c at rank 3
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)  # three relevant items first
    assert wd.ndcg_at_k(ranked, relevant) == pytest.approx(dcg / ideal)  # 0.7039
    assert wd.ndcg_at_k(ranked, relevant) == pytest.approx(0.703918, abs=1e-6)
    assert wd.mrr_at_k(["z", "y", "c"], relevant) == pytest.approx(1 / 3)


def test_metrics_none_found_and_cutoff():
    assert wd.recall_at_k(["p", "q"], ["z"]) == 0.0
    assert wd.mrr_at_k(["p", "q"], ["z"]) == 0.0
    assert wd.ndcg_at_k(["p", "q"], ["z"]) == 0.0
    assert wd.ndcg_at_k([], ["z"]) == 0.0
    ranked = [f"n{i}" for i in range(20)]
    assert wd.recall_at_k(ranked, ["n10"]) == 0.0 and wd.mrr_at_k(ranked, ["n10"]) == 0.0  # rank 11
    assert wd.ndcg_at_k(ranked, ["n10"], k=11) == pytest.approx(1 / math.log2(12))
    # More relevant items than k: the ideal DCG counts k of them, so a full top 10 scores 1.
    relevant = ranked[:12]
    assert wd.ndcg_at_k(ranked, relevant) == pytest.approx(1.0)
    assert wd.recall_at_k(ranked, relevant) == pytest.approx(10 / 12)
    with pytest.raises(ValueError, match="relevant is empty"):
        wd.ndcg_at_k(ranked, [])


# ---------------------------------------------------------------- relation answers


def test_relation_answers_keep_what_the_typed_walk_reached():
    g = vg.Graph(dim=4)
    keys = ["third gear", "gear", "mechanism", "second gear", "unrelated"]
    g.add_nodes(keys, np.eye(4, dtype=np.float32)[[0, 0, 1, 0, 3]] + 0.1,
                texts=["third gear", "gear", "mechanism", "second gear", "other"])
    g.add_edges(["third gear", "second gear", "gear"], ["gear", "gear", "mechanism"], rels="hypernym")
    # The question names "third gear" and "gear": both are seeds; "gear" is the answer anyway.
    res = g.hybrid_search("what more general kind of thing is third gear", vector=[1, 0, 0, 0], k=10,
                          channels=("graph",), seeds=1, hops=1, rels=["hypernym"], direction="out",
                          graph_seeds=True, graph_scoring="similarity")  # as wd.RELATION_SETTINGS
    seeds = [h.key for h in res.hits if not h.path]
    assert {"third gear", "gear"} <= set(seeds)
    answers = [h.key for h in wd.relation_answers(g, res.hits, "hypernym")]
    assert "gear" in answers and "mechanism" in answers          # a seed pointed to by a seed; a path
    assert "third gear" not in answers and "unrelated" not in answers
    reached = [h for h in wd.relation_answers(g, res.hits, "hypernym") if h.path]
    assert all(e.rel == "hypernym" for h in reached for e in h.path)


# ---------------------------------------------------------------- the job on a subset


@pytest.fixture(scope="module")
def tables():
    return wd.subset(wordnet.load("heldout"), SYNSETS)


def test_subset_holds_its_queries(tables):
    keys = set(tables["nodes"].column("key").to_pylist())
    assert tables["nodes"].num_rows == SYNSETS
    assert set(tables["edges"].column("src").to_pylist()) <= keys
    assert set(tables["edges"].column("dst").to_pylist()) <= keys
    kinds = tables["queries"].column("kind").to_pylist()
    assert kinds.count("sense") >= 20 and kinds.count("relation") >= 20
    for q in tables["queries"].to_pylist():
        assert q["synset"] in keys and set(q["relevant"]) <= keys and q["split"] == "heldout"


def _check_figures(figures: dict, tables: dict, limit=None) -> None:
    kinds = tables["queries"].column("kind").to_pylist()
    for kind, rows in ROWS.items():
        part = figures[kind]
        assert part["queries"] == min(kinds.count(kind), limit or 10**9)
        assert list(part["channels"]) == rows
        for name, row in part["channels"].items():
            for metric in ("recall@10", "mrr@10", "ndcg@10"):
                assert 0.0 <= row[metric] <= 1.0, (kind, name, metric, row[metric])
            assert 0 < row["p50_us"] <= row["p99_us"] < 5e6, (kind, name, row)
        assert part["embedding"]["seconds"] > 0 and part["embedding"]["p50_us"] > 0
    assert [b["name"].split(":")[0] for b in figures["bars"]] == ["relation", "sense"]
    assert all(isinstance(b["met"], bool) for b in figures["bars"])
    # A sense question, a hypernym question, and a question about another relation when one of
    # those has a relevant synset in the hybrid top 5.
    examples = figures["examples"]
    assert [(e["kind"], e["relation"] == "hypernym") for e in examples[:2]] == [("sense", False), ("relation", True)]
    assert len(examples) in (2, 3)
    if len(examples) == 3:
        assert examples[2]["kind"] == "relation" and examples[2]["relation"] != "hypernym"
        assert any(hit["relevant"] for hit in examples[2]["hits"])
    for ex in figures["examples"]:
        assert ex["text"] and ex["relevant"] and 1 <= len(ex["hits"]) <= 5
        for hit in ex["hits"]:
            assert set(hit["ranks"]) == {"dense", "bm25", "graph", "entity"}
            if hit["path"]:
                assert hit["walk"].count("-") >= 2 * len(hit["path"])


@pytest.fixture(scope="module")
def built(tables, tmp_path_factory):
    """The job run once on the subset with the hashing embedder: (folder, figures, printed lines)."""
    folder = str(tmp_path_factory.mktemp("wn") / "wordnet.vg")
    lines: list = []
    figures = wd.run(folder, synsets=SYNSETS, embedder=HashingEmbedder(), out=lines.append, progress=False)
    return folder, figures, lines


def test_job_builds_and_reports_every_channel(built, tables):
    folder, figures, lines = built
    assert figures["build"]["reused"] is False
    assert figures["build"]["nodes"] == SYNSETS
    assert figures["build"]["edges"] == tables["edges"].num_rows
    assert figures["build"]["aliases"] >= SYNSETS
    assert set(figures["build"]["seconds"]) >= {"embed", "nodes", "edges", "aliases", "checkpoint", "total"}
    _check_figures(figures, tables)
    text = "\n".join(lines)
    for needle in ("sense queries:", "relation queries:", "recall@10", "MRR@10", "nDCG@10", "p50", "p99",
                   "graph (all rels)", "quality bars", "query embedding", "rels=[relation]", "examples"):
        assert needle in text, needle
    assert text.count("[met]") + text.count("[MISSED]") == 2
    with vg.Graph.open(folder) as g:  # a real graph: aliases, typed edges, the embedder recorded
        first = tables["nodes"].column("key")[0].as_py()
        assert g.get_node(first)["aliases"] == json.loads(tables["nodes"].column("props")[0].as_py())["lemmas"]
        assert g.embedder["name"] == HashingEmbedder.name
        assert g.verify() == []


def test_rerun_reuses_the_folder(built, tables):
    folder, first, _ = built
    lines: list = []
    again = wd.run(folder, limit=5, out=lines.append, progress=False)  # the folder's subset and embedder
    assert again["build"]["reused"] is True
    assert again["build"]["seconds"]["open"] < first["build"]["seconds"]["total"]
    assert any(line.startswith("reusing ") for line in lines)
    _check_figures(again, tables, limit=5)
    # Other data in the same folder is built again; a folder of another graph is refused.
    other = wd.run(folder + "-small", synsets=500, embedder=HashingEmbedder(), limit=3, out=lambda _: None,
                   progress=False)
    assert other["build"]["reused"] is False and other["build"]["nodes"] == 500
    lines.clear()
    rebuilt = wd.run(folder + "-small", synsets=400, limit=3, out=lines.append, progress=False)
    assert rebuilt["build"]["reused"] is False and rebuilt["build"]["nodes"] == 400
    assert "again (it was built from other data" in lines[0]


def test_folder_of_another_graph_is_refused(tmp_path, tables):
    with vg.Graph.open(tmp_path / "mine.vg", dim=4) as g:
        g.add_nodes(["a"], [[1, 0, 0, 0]])
    with pytest.raises(ValueError, match="not built by `vecgraph wordnet`"):
        wd.run(str(tmp_path / "mine.vg"), tables=tables, embedder=HashingEmbedder(), out=lambda _: None)
    with vg.Graph.open(tmp_path / "mine.vg") as g:
        assert len(g) == 1


def _env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")  # one BLAS thread: 2 shared cores
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, TESTS_DIR, env.get("PYTHONPATH", "")) if p)
    return env


def test_command_reuses_the_folder_and_prints_json(built):
    """`vecgraph wordnet --limit 20 FOLDER` in a subprocess: it reopens the subset graph with the
    embedder the folder records (its name is its spec), and exits 0."""
    folder, _, _ = built
    proc = subprocess.run([sys.executable, "-m", "vecgraph", "wordnet", "--limit", "20", folder],
                          capture_output=True, text=True, env=_env(), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "reusing" in proc.stdout and "nDCG@10" in proc.stdout and "quality bars" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "vecgraph", "wordnet", "--limit", "7", "--json", folder],
                          capture_output=True, text=True, env=_env(), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    assert figures["build"]["reused"] is True
    assert figures["sense"]["queries"] == 7 and list(figures["relation"]["channels"]) == ROWS["relation"]
    assert "reusing" in proc.stderr


def test_command_help_and_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["wordnet", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: vecgraph wordnet") and "vecgraph wordnet" in out.split("examples:")[1]
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("x")
    assert cli.main(["wordnet", str(tmp_path / "junk"), "--limit", "1"]) == 1
    assert "not built by `vecgraph wordnet`" in capsys.readouterr().err


def test_job_with_wordllama(tables, tmp_path):
    pytest.importorskip("wordllama")
    figures = wd.run(str(tmp_path / "wordnet.vg"), tables=tables, embedder="wordllama", limit=30,
                     out=lambda _: None, progress=False)
    assert figures["build"]["embedder"] == "wordllama/l2_supercat_256"
    _check_figures(figures, tables, limit=30)
    relation = figures["relation"]["channels"]
    # The walk that follows the relation asked finds what dense similarity alone does not.
    assert relation["graph"]["ndcg@10"] > relation["dense"]["ndcg@10"]
    assert relation["graph"]["ndcg@10"] > relation["graph (all rels)"]["ndcg@10"]
