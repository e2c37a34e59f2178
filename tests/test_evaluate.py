"""vecgraph.evaluate: the metrics on hand-computed examples and against ir-measures (trec_eval),
evaluate() on a small real graph and on a fake one that records its calls, the report, and
load_queries' errors."""

from __future__ import annotations

import json
import math
import random
import types

import ir_measures
import numpy as np
import pytest
import vecgraph as vg
from vecgraph import evaluate as ev
from vecgraph.evaluate import evaluate, load_queries, mrr_at_k, ndcg_at_k, recall_at_k


def unit(*values):
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def log2(x):
    return math.log2(x)


# ====================================================================== metrics


def test_binary_relevance_by_hand():
    ranked, relevant = ["a", "b", "c", "d"], ["b", "d", "x"]
    ideal = 1 + 1 / log2(3) + 1 / log2(4)  # three relevant keys, k = 3
    assert recall_at_k(ranked, relevant, k=3) == pytest.approx(1 / 3)
    assert mrr_at_k(ranked, relevant, k=3) == 0.5
    assert ndcg_at_k(ranked, relevant, k=3) == pytest.approx((1 / log2(3)) / ideal)  # 0.29608
    assert ndcg_at_k(ranked, relevant, k=3) == pytest.approx(0.296082, abs=1e-6)
    assert recall_at_k(ranked, relevant, k=4) == pytest.approx(2 / 3)
    assert ndcg_at_k(ranked, relevant, k=4) == pytest.approx((1 / log2(3) + 1 / log2(5)) / ideal)
    assert mrr_at_k(ranked, {"b", "d"}, k=1) == 0.0  # "a" first: nothing within k = 1
    assert ndcg_at_k(["b", "d"], ["b", "d"]) == 1.0


def test_graded_relevance_by_hand():
    ranked, relevant = ["c", "a", "b"], {"a": 2, "b": 1, "c": 0}  # c judged, not relevant
    dcg = 0 + 2 / log2(3) + 1 / log2(4)
    idcg = 2 + 1 / log2(3)
    assert ndcg_at_k(ranked, relevant) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(ranked, relevant) == pytest.approx(0.669672, abs=1e-6)
    assert recall_at_k(ranked, relevant) == 1.0  # grade 0 does not count as relevant
    assert mrr_at_k(ranked, relevant) == 0.5
    # Ideal DCG from the judgments, at most k of them: k = 1 takes the best grade only.
    assert ndcg_at_k(["b"], relevant, k=1) == pytest.approx(1 / 2)
    # Real-valued grades, and [key, grade] pairs (how JSON grades int keys).
    assert ndcg_at_k(["a", "b"], {"a": 0.5, "b": 1.5}) == pytest.approx(
        (0.5 + 1.5 / log2(3)) / (1.5 + 0.5 / log2(3)))
    assert ndcg_at_k([7, "b"], [[7, 1], ["b", 3]]) == pytest.approx((1 + 3 / log2(3)) / (3 + 1 / log2(3)))


def test_a_key_listed_twice_counts_once_at_its_first_position():
    relevant = {"a": 3, "b": 1}
    idcg = 3 + 1 / log2(3)
    # The repeat holds position 2 and gains nothing; b at position 3.
    assert ndcg_at_k(["a", "a", "b"], relevant, k=3) == pytest.approx((3 + 1 / log2(4)) / idcg)  # 0.96394
    assert recall_at_k(["a", "a"], ["a", "b"]) == 0.5
    assert mrr_at_k(["x", "x", "a", "a"], relevant) == pytest.approx(1 / 3)
    assert ndcg_at_k(["x", "x", "x", "a"], relevant, k=3) == 0.0
    assert ndcg_at_k(["x", "x", "x", "a"], relevant, k=4) == pytest.approx((3 / log2(5)) / idcg)  # 0.35584
    assert mrr_at_k(["x", "x", "x", "a"], relevant, k=4) == 0.25


def test_fewer_results_than_k_and_no_relevant_result():
    assert recall_at_k(["b"], ["a", "b"], k=10) == 0.5
    assert mrr_at_k(["b"], ["a", "b"], k=10) == 1.0
    assert ndcg_at_k(["b"], ["a", "b"], k=10) == pytest.approx(1 / (1 + 1 / log2(3)))  # 0.61315
    for ranked in (["p", "q"], [], iter(["p"])):
        assert (recall_at_k(ranked, ["z"]), mrr_at_k(ranked, ["z"]), ndcg_at_k(ranked, ["z"])) == (0, 0, 0)


def test_keys_keep_their_type():
    assert ndcg_at_k([1, "2"], ["1", 2]) == 0.0  # 1 is not "1"
    assert ndcg_at_k([np.int64(5)], [5]) == 1.0 and ndcg_at_k([5], [np.int64(5)]) == 1.0


@pytest.mark.parametrize("relevant, error, match", [
    ([], vg.InvalidArgumentError, "relevant is empty"),
    ({}, vg.InvalidArgumentError, "relevant is empty"),
    ({"a": 0}, vg.InvalidArgumentError, "no key of grade > 0"),
    ({"a": -1}, vg.InvalidArgumentError, r"relevant\['a'\] must be finite and >= 0, got -1"),
    ({"a": float("nan")}, vg.InvalidArgumentError, "must be finite"),
    ({"a": True}, TypeError, "must be a real number"),
    ({"a": "2"}, TypeError, "must be a real number"),
    ([True], TypeError, r"relevant\[0\] must be a str or int node key, got bool"),
    (["a", 1.5], TypeError, r"relevant\[1\] must be a str or int node key, got float"),
    ("abc", TypeError, "must be a list of keys"),
    (None, TypeError, "must be a list of keys"),
    ([["a", 1], ["a", 2]], vg.InvalidArgumentError, "grades key 'a' twice: 1 and 2"),
    ([["a"]], vg.InvalidArgumentError, r"relevant\[0\] must be a key or a \[key, grade\] pair"),
])
def test_bad_judgments(relevant, error, match):
    with pytest.raises(error, match=match):
        ndcg_at_k(["a"], relevant)


def test_bad_k():
    with pytest.raises(vg.InvalidArgumentError, match="k must be >= 1, got 0"):
        recall_at_k(["a"], ["a"], k=0)
    for k in (True, 2.0, "3"):
        with pytest.raises(TypeError, match="k must be an int"):
            mrr_at_k(["a"], ["a"], k=k)


def test_metrics_agree_with_ir_measures_on_random_runs():
    """trec_eval (through ir-measures) as the reference: graded and binary judgments, str and
    int keys, runs shorter and longer than k, repeated keys. trec_eval takes a run as {doc:
    score} with str doc ids: keys become "<type>:<key>", scores fall with the position, and a
    repeated key becomes a filler doc nobody judged (a position that gains nothing)."""
    rng = random.Random(7)
    pool = [f"d{i}" for i in range(25)] + list(range(25))  # "d3" and 3 are different keys
    qrels, runs, judged, ranked_lists = {}, {}, {}, {}
    for q in range(400):
        qid = f"q{q}"
        keys = rng.sample(pool, rng.randint(1, 6))
        if q % 2:  # binary: a list of keys
            relevant: object = keys
            grades = {f"{type(key).__name__}:{key}": 1 for key in keys}
        else:  # graded, with judged non-relevant keys (grade 0)
            relevant = {key: rng.randint(0, 3) for key in keys}
            relevant[keys[0]] = rng.randint(1, 3)
            grades = {f"{type(key).__name__}:{key}": grade for key, grade in relevant.items()}
        ranked = [rng.choice(pool) for _ in range(rng.randint(0, 16))]
        run, seen = {}, set()
        for i, key in enumerate(ranked):
            doc = f"{type(key).__name__}:{key}" if key not in seen else f"filler-{i}"
            seen.add(key)
            run[doc] = float(100 - i)
        qrels[qid], runs[qid], judged[qid], ranked_lists[qid] = grades, run, relevant, ranked
    for k in (1, 3, 10):
        measures = {"recall": ir_measures.R @ k, "mrr": ir_measures.RR @ k, "ndcg": ir_measures.nDCG @ k}
        expected = {(m.query_id, str(m.measure)): m.value
                    for m in ir_measures.iter_calc(measures.values(), qrels, runs)}
        aggregate = ir_measures.calc_aggregate(measures.values(), qrels, runs)
        ours = {name: [] for name in measures}
        for qid in qrels:
            for name, fn in (("recall", recall_at_k), ("mrr", mrr_at_k), ("ndcg", ndcg_at_k)):
                value = fn(ranked_lists[qid], judged[qid], k=k)
                assert value == pytest.approx(expected[(qid, str(measures[name]))], abs=1e-12), (qid, name, k)
                ours[name].append(value)
        for name, measure in measures.items():
            assert np.mean(ours[name]) == pytest.approx(aggregate[measure], abs=1e-12)


# ====================================================================== evaluate on a real graph


# A small shop: two price pages, a FAQ, and two hiking pages (also tests/test_cli_eval.py's graph).
SHOP_KEYS = ["a7-price", "c9-price", "faq", "blog", "trail"]
SHOP_VECTORS = [unit(1, 0.45, 0, 0), unit(1, 0.1, 0, 0), unit(1, 0.2, 0, 0), unit(0, 0, 1, 0), unit(0, 0.3, 1, 0.1)]
SHOP_TEXTS = ["The A7-Pro costs 299 dollars.", "The C9-Max costs 499 dollars.", "Prices of every model are listed here.",
              "Our team went hiking.", "Trail maps for hiking in the Alps."]


def shop() -> vg.Graph:
    g = vg.Graph(dim=4)
    g.add_nodes(SHOP_KEYS, SHOP_VECTORS, texts=SHOP_TEXTS)
    return g


# dense (k = 3):  a7: c9-price, faq, a7-price   hike: blog, trail, a7-price   price: c9-price, faq, a7-price
# bm25:           a7: a7-price                   hike: trail, blog              price: faq
QUERIES = [
    {"qid": "a7", "text": "A7-Pro price?", "vector": unit(1, 0.05, 0, 0).tolist(), "relevant": ["a7-price"]},
    {"qid": "hike", "text": "hiking trail maps", "vector": unit(0, 0.1, 1, 0).tolist(),
     "relevant": {"trail": 2, "blog": 1}},
    {"qid": "price", "text": "model prices", "vector": unit(1, 0.1, 0, 0), "relevant": ["c9-price"]},
]
HIKE_DENSE = (1 + 2 / log2(3)) / (2 + 1 / log2(3))  # blog (1) first, trail (2) second: 0.85972
CHANNEL_RUNS = {"dense": {"channels": ["dense"]}, "bm25": {"channels": ["bm25"]}}


def test_evaluate_a_real_graph_by_hand():
    report = evaluate(shop(), QUERIES, k=3, runs=CHANNEL_RUNS, progress=False)
    assert report.qids == ["a7", "hike", "price"] and report.k == 3
    dense, bm25 = report.per_query["dense"], report.per_query["bm25"]
    assert dense["ndcg"] == pytest.approx([1 / log2(4), HIKE_DENSE, 1.0])  # a7-price third, for a7
    assert dense["mrr"] == pytest.approx([1 / 3, 1.0, 1.0])
    assert dense["recall"] == [1.0, 1.0, 1.0]
    assert bm25["ndcg"] == pytest.approx([1.0, 1.0, 0.0])  # "model prices" finds the faq only
    assert bm25["recall"] == [1.0, 1.0, 0.0]
    r = report.runs["dense"]
    assert (r.queries, r.recall, r.mrr) == (3, 1.0, pytest.approx(7 / 9))
    assert r.ndcg == pytest.approx((0.5 + HIKE_DENSE + 1) / 3)
    assert report.runs["bm25"].ndcg == pytest.approx(2 / 3)
    assert all(0 < x < 1e6 for x in dense["latency_us"]) and 0 < r.p50_us <= r.p99_us
    # Baseline: the best single channel, dense; bm25 is better on a7 and hike, worse on price.
    assert report.best_channel == "dense" and report.baseline == "dense"
    assert (report.runs["bm25"].better, report.runs["bm25"].worse) == (2, 1)
    assert (r.better, r.worse) == (None, None)
    assert report.unknown_relevant == 0 and report.embedded == 0
    other = evaluate(shop(), QUERIES, k=3, runs=CHANNEL_RUNS, baseline="bm25", progress=False)
    assert other.baseline == "bm25" and (other.runs["dense"].better, other.runs["dense"].worse) == (1, 2)


def test_exclude_keys_are_never_returned():
    queries = [dict(QUERIES[0], exclude=["c9-price"])]  # a7-price moves up to rank 2
    report = evaluate(shop(), queries, k=3, runs={"dense": {"channels": ["dense"]}}, progress=False)
    assert report.per_query["dense"]["ndcg"] == [pytest.approx(1 / log2(3))]
    assert report.per_query["dense"]["mrr"] == [0.5]


def test_default_runs_follow_the_input():
    g = shop()
    report = evaluate(g, QUERIES, k=3, progress=False)
    assert list(report.runs) == ["dense", "bm25", "entity", "graph", "hybrid", "hybrid (rrf)"]
    assert report.runs["hybrid (rrf)"].params == {"fusion": "rrf"}
    assert report.runs["entity"].params == {"channels": ["entity"]}
    assert report.per_query["dense"]["ndcg"] == pytest.approx([0.5, HIKE_DENSE, 1.0])
    assert report.best_channel == "dense"  # entity finds "trail" (named in the text) only; graph: no edges
    assert report.per_query["entity"]["ndcg"] == pytest.approx([0, 2 / (2 + 1 / log2(3)), 0])
    for name in report.runs:
        assert 0 <= report.runs[name].ndcg <= 1
    # Without vectors: no dense, no graph. Without texts: no bm25, no entity.
    texts_only = [{k: v for k, v in q.items() if k != "vector"} for q in QUERIES]
    assert list(evaluate(g, texts_only, k=3, progress=False).runs) == ["bm25", "entity", "hybrid",
                                                                       "hybrid (rrf)"]
    vectors_only = [{k: v for k, v in q.items() if k != "text"} for q in QUERIES]
    assert list(evaluate(g, vectors_only, k=3, progress=False).runs) == ["dense", "graph", "hybrid",
                                                                         "hybrid (rrf)"]
    assert ev.default_runs(vectors=False, texts=False) == {"hybrid": {}, "hybrid (rrf)": {"fusion": "rrf"}}


class ToyEmbedder:
    """4-d vectors from keywords; records the batches it is called with."""

    name, dim = "toy", 4

    def __init__(self):
        self.calls = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        table = {"hik": (0, 0.1, 1, 0), "A7": (1, 0.05, 0, 0), "price": (1, 0.1, 0, 0)}
        return np.stack([unit(*next((v for w, v in table.items() if w in t), (1, 1, 1, 1))) for t in texts])


class OtherEmbedder(ToyEmbedder):
    name = "other"


def test_texts_without_a_vector_are_embedded_up_front_in_one_batch():
    g = shop()
    g.use_embedder(ToyEmbedder())
    toy = ToyEmbedder()
    texts_only = [{k: v for k, v in q.items() if k != "vector"} for q in QUERIES]
    queries = texts_only[:2] + QUERIES[2:]  # the last one has its vector
    report = evaluate(g, queries, k=3, runs=CHANNEL_RUNS, embedder=toy, progress=False)
    assert toy.calls == [["A7-Pro price?", "hiking trail maps"]]
    assert report.embedded == 2 and report.embed_seconds > 0
    assert report.per_query["dense"]["ndcg"] == pytest.approx([0.5, HIKE_DENSE, 1.0])  # the same vectors
    # The graph refuses another embedder than the one it records, before any search.
    with pytest.raises(vg.InvalidArgumentError,
                       match="embedding the texts of queries 'a7' to 'hike': .*refusing"):
        evaluate(g, queries, runs=CHANNEL_RUNS, embedder=OtherEmbedder(), progress=False)


def test_relevant_keys_missing_from_the_graph_are_counted():
    queries = [dict(QUERIES[0], relevant={"a7-price": 1, "A7": 2, "nope": 0})]  # grade 0: not counted
    report = evaluate(shop(), queries, k=3, runs=CHANNEL_RUNS, progress=False)
    assert report.unknown_relevant == 1


# ====================================================================== evaluate on a fake graph


class FakeGraph:
    """Records every hybrid_search call; answers from ``answers[text]`` (reversed for the
    bm25 channel), so that the metrics are known."""

    dim = 2

    def __init__(self, answers, fail_on=None):
        self.answers, self.fail_on, self.calls = answers, fail_on, []

    def hybrid_search(self, text=None, vector=None, k=10, **kwargs):
        self.calls.append(dict(kwargs, text=text, vector=vector, k=k))
        if text == self.fail_on:
            raise vg.InvalidArgumentError("unknown fusion 'nope'")
        keys = list(self.answers[text])
        if kwargs.get("channels") == ["bm25"]:
            keys.reverse()
        return [types.SimpleNamespace(key=key) for key in keys[:k]]


FAKE_QUERIES = [
    {"qid": "1", "text": "one", "vector": [1, 0], "relevant": ["a"], "exclude": ["z", 9]},
    {"qid": "2", "text": "two", "vector": [0, 1], "relevant": {"b": 1}},
    {"qid": "3", "text": "three", "vector": [1, 1], "relevant": ["c"], "exclude": []},
]
FAKE_ANSWERS = {"one": ["a", "x"], "two": ["x", "b"], "three": ["c", "x", "y"]}


def test_every_call_gets_the_run_arguments_k_and_the_exclusions():
    g = FakeGraph(FAKE_ANSWERS)
    runs = {"rrf": {"fusion": "rrf", "ef": 64}, "bm25": {"channels": ["bm25"]}}
    report = evaluate(g, FAKE_QUERIES, k=2, runs=runs, warmup=1, progress=False)
    assert len(g.calls) == 2 * (1 + 3)  # per run: one untimed warm-up search, then every query
    rrf_calls = [c for c in g.calls if c.get("fusion") == "rrf"]
    assert [c["text"] for c in rrf_calls] == ["one", "one", "two", "three"]
    assert all(c["ef"] == 64 and c["k"] == 2 for c in rrf_calls)
    assert [c["exclude_keys"] for c in rrf_calls] == [["z", 9], ["z", 9], None, None]
    vector = rrf_calls[1]["vector"]
    assert vector.dtype == np.float32 and vector.shape == (2,) and vector.tolist() == [1, 0]
    # rrf: a first, b second, c first; bm25 reversed: x a / b x / y x (c cut by k = 2).
    assert report.per_query["rrf"]["mrr"] == [1.0, 0.5, 1.0]
    assert report.per_query["bm25"]["mrr"] == [0.5, 1.0, 0.0]
    assert report.per_query["bm25"]["ndcg"] == pytest.approx([1 / log2(3), 1.0, 0.0])
    assert report.best_channel == "bm25" and report.baseline == "bm25"  # the only single channel
    assert (report.runs["rrf"].better, report.runs["rrf"].worse) == (2, 1)
    assert report.unknown_relevant is None  # the fake cannot tell which keys it holds


def test_default_runs_call_each_channel_and_both_fusions():
    g = FakeGraph(FAKE_ANSWERS)
    evaluate(g, FAKE_QUERIES, warmup=0, progress=False)
    seen = []
    for call in g.calls:
        run = {k: v for k, v in call.items() if k not in ("text", "vector", "k", "exclude_keys")}
        if run not in seen:
            seen.append(run)
    assert seen == [{"channels": ["dense"]}, {"channels": ["bm25"]}, {"channels": ["entity"]},
                    {"channels": ["graph"]}, {}, {"fusion": "rrf"}]


def test_search_errors_name_the_run_and_the_query():
    g = FakeGraph(FAKE_ANSWERS, fail_on="two")
    with pytest.raises(vg.InvalidArgumentError,
                       match=r"run 'x', queries\[1\] \(qid '2'\): unknown fusion 'nope'"):
        evaluate(g, FAKE_QUERIES, runs={"x": {"fusion": "nope"}}, warmup=0, progress=False)


def test_no_single_channel_run_means_no_baseline():
    report = evaluate(FakeGraph(FAKE_ANSWERS), FAKE_QUERIES, runs={"a": {}, "b": {"fusion": "rrf"}},
                      progress=False)
    assert report.best_channel is None and report.baseline is None
    assert report.runs["a"].better is None
    assert "better / worse (no baseline)" in report.table()
    assert report.table().splitlines()[2].endswith("| - |")
    # A tie on nDCG: the first single-channel run is the best one.
    tie = evaluate(FakeGraph(FAKE_ANSWERS), FAKE_QUERIES, runs={"g": {"channels": ["graph"]},
                                                                "d": {"channels": ["dense"]}}, progress=False)
    assert tie.best_channel == "g" and (tie.runs["d"].better, tie.runs["d"].worse) == (0, 0)


def test_table_and_to_dict():
    report = evaluate(FakeGraph(FAKE_ANSWERS), FAKE_QUERIES, k=2, progress=True,
                      runs={"rrf | 2": {"fusion": "rrf"}, "bm25": {"channels": ["bm25"]}})
    lines = report.table().splitlines()
    assert lines[0] == "| run | recall@2 | MRR@2 | nDCG@2 | p50 | p99 | vs bm25: better / worse (of 3) |"
    assert lines[1] == "|---|---:|---:|---:|---:|---:|---:|"
    assert lines[2].startswith("| rrf \\| 2 | 1.000 | 0.833 | 0.877 | ") and lines[2].endswith(" | 2 / 1 |")
    assert lines[3].startswith("| bm25 | 0.667 | 0.500 | 0.544 | ") and lines[3].endswith(" | baseline |")
    assert " µs | " in lines[2] or " ms | " in lines[2]
    d = json.loads(json.dumps(report.to_dict()))
    assert d["k"] == 2 and d["queries"] == 3 and d["qids"] == ["1", "2", "3"]
    assert d["baseline"] == "bm25" and d["best_channel"] == "bm25"
    run = d["runs"]["rrf | 2"]
    assert run["params"] == {"fusion": "rrf"} and run["queries"] == 3
    assert (run["better"], run["worse"]) == (2, 1)
    assert run["ndcg"] == pytest.approx((1 + 1 / log2(3) + 1) / 3)
    assert set(run) == {"params", "queries", "recall", "mrr", "ndcg", "p50_us", "p99_us", "better", "worse"}
    assert d["per_query"]["bm25"]["mrr"] == [0.5, 1.0, 0.0] and len(d["per_query"]["bm25"]["latency_us"]) == 3


# ====================================================================== malformed input


def _q(**fields):
    return dict({"qid": "q", "text": "one", "relevant": ["a"]}, **fields)


@pytest.mark.parametrize("queries, error, match", [
    ([], vg.InvalidArgumentError, "queries is empty"),
    ("one", TypeError, "queries must be an iterable of query dicts"),
    ({"qid": "q"}, TypeError, "queries must be an iterable"),
    ([["q"]], TypeError, r"queries\[0\] must be a dict"),
    ([{"text": "one", "relevant": ["a"]}], vg.InvalidArgumentError, r"queries\[0\]: 'qid' is missing"),
    ([_q(qid=5)], TypeError, r"queries\[0\]: 'qid' must be a str, got int"),
    ([_q(text=None)], vg.InvalidArgumentError, r"queries\[0\] \(qid 'q'\): needs 'text' or 'vector'"),
    ([_q(text=5)], TypeError, "'text' must be a str, got int"),
    ([_q(text="  ")], vg.InvalidArgumentError, "'text' is empty"),
    ([_q(vector=[1, 2, 3])], vg.DimensionMismatchError, "'vector' has dim 3, the graph has dim 2"),
    ([_q(vector=[[1, 2]])], vg.InvalidArgumentError,
     r"'vector' must have shape \(dim,\), got shape \(1, 2\)"),
    ([_q(vector=["a", "b"])], TypeError, "'vector' must be a list of numbers"),
    ([_q(vector=[1, [2]])], vg.InvalidArgumentError, "'vector' must be a list of numbers"),
    ([_q(vector=[float("nan"), 1])], vg.InvalidArgumentError, "'vector' has NaN or inf"),
    ([{"qid": "q", "text": "one"}], vg.InvalidArgumentError, r"\(qid 'q'\): 'relevant' is missing"),
    ([_q(), _q(qid="r", relevant=[])], vg.InvalidArgumentError,
     r"queries\[1\] \(qid 'r'\): 'relevant' is empty"),
    ([_q(relevant={"a": 0})], vg.InvalidArgumentError, "'relevant' has no key of grade > 0"),
    ([_q(exclude="a")], TypeError, "'exclude' must be a list of keys, got str"),
    ([_q(exclude=[1.5])], TypeError, r"'exclude'\[0\] must be a str or int node key"),
    ([_q(), _q()], vg.InvalidArgumentError, r"queries\[1\]: qid 'q' is also the qid of queries\[0\]"),
])
def test_malformed_queries(queries, error, match):
    g = FakeGraph({"one": ["a"]})
    with pytest.raises(error, match=match):
        evaluate(g, queries, progress=False)
    assert g.calls == []  # checked before any search


@pytest.mark.parametrize("kwargs, error, match", [
    ({"runs": {}}, vg.InvalidArgumentError, "runs is empty"),
    ({"runs": [("a", {})]}, TypeError, "runs must be a dict"),
    ({"runs": {"a": ["dense"]}}, TypeError, "run 'a' must be a dict of hybrid_search keyword arguments"),
    ({"runs": {"a": {"k": 5}}}, vg.InvalidArgumentError, "run 'a' sets 'k': evaluate passes"),
    ({"runs": {"a": {"exclude_keys": ["x"]}}}, vg.InvalidArgumentError, "run 'a' sets 'exclude_keys'"),
    ({"runs": {"a": {"embedder": "toy"}}}, vg.InvalidArgumentError, "run 'a' sets 'embedder'"),
    ({"runs": {"": {}}}, TypeError, "run names must be non-empty str"),
    ({"baseline": "nope"}, vg.InvalidArgumentError, "baseline 'nope' is not a run; the runs are 'dense', "),
    ({"k": 0}, vg.InvalidArgumentError, "k must be >= 1"),
    ({"warmup": -1}, vg.InvalidArgumentError, "warmup must be an int >= 0"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        evaluate(FakeGraph(FAKE_ANSWERS), FAKE_QUERIES, progress=False, **kwargs)


# ====================================================================== load_queries


def test_load_queries(tmp_path):
    path = tmp_path / "q.jsonl"
    second = {"qid": "b", "vector": [1, 0], "relevant": [["x", 2], [7, 1]], "exclude": [3], "note": "kept"}
    path.write_text('{"qid": "a", "text": "one", "relevant": ["x", 7]}\n\n   \n' + json.dumps(second) + "\n",
                    encoding="utf-8")
    queries = load_queries(path)
    assert queries == [{"qid": "a", "text": "one", "relevant": ["x", 7]}, second]
    assert load_queries(str(path)) == queries


@pytest.mark.parametrize("text, error, match", [
    ('{"qid": "a", "text": "t", "relevant": ["x"]}\n\n{"qid": "b", "text": \n',
     vg.InvalidArgumentError, r"q.jsonl line 3: expected one JSON object per line, got invalid JSON"),
    ('["a"]\n', vg.InvalidArgumentError, "line 1: expected a JSON object with 'qid', 'relevant'"),
    ('{"qid": "a", "text": "t", "relevant": ["x"]}\n{"qid": "b", "text": "t"}\n',
     vg.InvalidArgumentError, r"line 2 \(qid 'b'\): 'relevant' is missing"),
    ('{"qid": "a", "vector": ["x"], "relevant": ["x"]}\n', TypeError,
     r"line 1 \(qid 'a'\): 'vector' must be a list"),
    ('{"qid": "a", "text": "t", "relevant": {"x": -2}}\n', vg.InvalidArgumentError,
     r"line 1 \(qid 'a'\): 'relevant'"),
    ('{"qid": "a", "text": "t", "relevant": ["x"]}\n{"qid": "a", "text": "u", "relevant": ["y"]}\n',
     vg.InvalidArgumentError, "line 2: qid 'a' is also on line 1"),
    ("\n \n", vg.InvalidArgumentError, "holds no query"),
])
def test_load_queries_errors_name_the_line(tmp_path, text, error, match):
    path = tmp_path / "q.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(error, match=match):
        load_queries(path)


def test_load_queries_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_queries(tmp_path / "none.jsonl")


def test_load_queries_checks_the_dim_when_given(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"qid": "a", "vector": [1, 0], "relevant": ["x"]}\n'
                    '{"qid": "b", "vector": [1], "relevant": ["x"]}\n')
    assert len(load_queries(path)) == 2
    with pytest.raises(vg.DimensionMismatchError,
                       match=r"line 2 \(qid 'b'\): 'vector' has dim 1, the graph has dim 2"):
        load_queries(path, dim=2)


def test_a_relevant_key_that_is_also_excluded_is_refused():
    with pytest.raises(vg.InvalidArgumentError, match="relevant key 'k3' is also in 'exclude'"):
        ev._check_query({"qid": "a", "text": "x", "relevant": ["k3"], "exclude": ["k3"]}, "query 0", None)
