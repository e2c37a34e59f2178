"""vecgraph.rerankers: the reranker protocol's checks, rerank() against a brute-force reference,
TermOverlapReranker's BM25 on hand-computed examples, and CrossEncoderReranker over fake models
(sentence-transformers is an optional dependency; its import is faked or blocked here)."""

from __future__ import annotations

import math
import random
import sys
import types
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from vecgraph.errors import InvalidArgumentError
from vecgraph.rerankers import (
    CrossEncoderReranker,
    Reranker,
    TermOverlapReranker,
    check_reranker,
    check_scores,
    rerank,
    reranker_name,
    terms,
)


class Fixed:
    """A reranker returning what it was told to, recording its calls."""

    name = "fixed"

    def __init__(self, out):
        self.out = out
        self.calls = []

    def __call__(self, query, texts):
        self.calls.append((query, list(texts)))
        return self.out(query, texts) if callable(self.out) else self.out


# ------------------------------------------------------------------ check_scores / check_reranker

def test_check_scores_converts_lists_tuples_and_int_arrays_to_float64():
    for out in ([1, 2.5, -3], (1, 2.5, -3), np.array([1.0, 2.5, -3.0], np.float32)):
        got = check_scores(Fixed(None), ["a", "b", "c"], out)
        assert got.dtype == np.float64 and got.tolist() == [1.0, 2.5, -3.0]
    assert check_scores(Fixed(None), ["a"], np.array([7], np.int64)).tolist() == [7.0]
    assert check_scores(Fixed(None), [], []).shape == (0,)


@pytest.mark.parametrize("out", [
    np.array([1.0, 2.5, -3], dtype=object),  # numbers held as Python objects
    np.array([Fraction(1, 1), np.float32(2.5), np.int64(-3)], dtype=object),
    [1, Fraction(5, 2), np.float16(-3.0)],
    pd.Series([1.0, 2.5, -3.0], index=[10, 11, 12]),  # read by position, whatever the index
    pd.Series([1, 2.5, -3], index=["x", "y", "z"], dtype=object),
    range(1, 4),
])
def test_check_scores_converts_numbers_in_object_arrays_and_series(out):
    got = check_scores(Fixed(None), ["a", "b", "c"], out)
    assert got.dtype == np.float64
    assert got.tolist() == ([1.0, 2.0, 3.0] if isinstance(out, range) else [1.0, 2.5, -3.0])


@pytest.mark.parametrize("out,words", [
    (pd.Series(["x", "y", "z"], index=[10, 11, 12]), "a non-numeric score at position 0 (str 'x')"),
    (pd.Series([True, False, True], index=[10, 11, 12]), "a non-numeric score at position 0 (bool "),
    (pd.Series([0.5, "y", 1.0], index=[7, 8, 9]), "a non-numeric score at position 1 (str 'y')"),
    (np.array([1.0, "x", 2.0], dtype=object), "a non-numeric score at position 1 (str 'x')"),
    (np.array([1.0, 2.0, np.True_], dtype=object), "a non-numeric score at position 2 (bool "),
    (np.array([1.0, 2.0, Decimal("1.5")], dtype=object), "a non-numeric score at position 2 (Decimal"),
    ([1.0, 10**400, 2.0], "a score out of float64's range (not finite as a float) at position 1 (int 1000"),
    (np.array([10**400, 1.0, 2.0], dtype=object), "out of float64's range (not finite as a float) at position 0"),
    ([-(10**309), 1, 2], "out of float64's range (not finite as a float) at position 0 (int -1000"),
    (np.array([1.0, np.nan, 2.0], dtype=object), "returned nan at position 1 (text 'b')"),
    (np.array([1 + 0j, 2, 3]), "a non-numeric score at position 0 (complex128 "),
])
def test_check_scores_reports_the_first_bad_item_of_series_and_object_arrays(out, words):
    with pytest.raises(InvalidArgumentError) as e:
        check_scores(Fixed(None), ["a", "b", "c"], out)
    assert words in str(e.value) and "reranker 'fixed'" in str(e.value) and "expected 3 real scores" in str(e.value)


@pytest.mark.parametrize("out,words", [
    ([1.0, 2.0], ["'fixed'", "returned 2 scores for 3 texts", "expected 3 real scores"]),
    ([1.0, 2.0, 3.0, 4.0], ["returned 4 scores for 3 texts"]),
    (None, ["returned NoneType", "expected 3"]),
    ("abc", ["returned str"]),
    ({"a": 1}, ["returned dict"]),
    (3.0, ["returned float"]),
    (["x", 1.0, 2.0], ["non-numeric score at position 0", "str 'x'"]),
    ([1.0, None, 2.0], ["non-numeric score at position 1", "NoneType None"]),
    ([1.0, 2.0, True], ["non-numeric score at position 2", "bool True"]),
    ([1.0, 1j, 2.0], ["non-numeric score at position 1"]),
    ([1.0, 2.0, float("nan")], ["returned nan at position 2", "text 'c'", "finite"]),
    (np.array([np.inf, 0.0, 1.0]), ["returned inf at position 0", "text 'a'"]),
    (np.zeros((3, 1)), ["shape (3, 1)", "shape (3,)"]),
    ([[1.0], [2.0, 3.0], [4.0]], ["not an array of numbers"]),
])
def test_check_scores_refuses_what_is_not_one_finite_number_per_text(out, words):
    with pytest.raises(InvalidArgumentError) as e:
        check_scores(Fixed(None), ["a", "b", "c"], out)
    for word in words:
        assert word in str(e.value)


def test_reranker_names_and_check_reranker():
    def my_scorer(query, texts):
        return [0.0] * len(texts)

    class Unnamed:
        def __call__(self, query, texts):
            return []

    assert reranker_name(Fixed(None)) == "fixed"
    assert reranker_name(my_scorer) == "my_scorer"
    assert reranker_name(Unnamed()) == "Unnamed"
    assert check_reranker(my_scorer) is my_scorer
    assert isinstance(my_scorer, Reranker) and not isinstance(5, Reranker)
    with pytest.raises(TypeError, match=r"reranker must be callable .* got int"):
        check_reranker(5)
    with pytest.raises(InvalidArgumentError, match="reranker 'my_scorer' returned 2 scores for 1 texts"):
        check_scores(my_scorer, ["a"], [1.0, 2.0])


# ------------------------------------------------------------------ rerank

def _reference(keys, texts, score_of, depth):
    """Brute force: score the head, sort by (-score, original position), append the tail."""
    head = min(depth, len(keys))
    scored = [(-score_of[texts[i]], i) for i in range(head)]
    order = [i for _, i in sorted(scored)]
    return [keys[i] for i in order] + keys[head:], [score_of[texts[i]] for i in order]


def test_rerank_matches_a_stable_sort_by_score_on_random_lists():
    rng = random.Random(7)
    for trial in range(300):
        n = rng.randint(1, 30)
        keys = [f"k{i}" for i in range(n)] if trial % 2 else list(range(100, 100 + n))
        texts = [f"text {i}" for i in range(n)]
        score_of = {t: float(rng.randint(-2, 2)) for t in texts}  # few values: many ties
        depth = rng.randint(1, n + 5)
        reranker = Fixed(lambda q, ts, score_of=score_of: [score_of[t] for t in ts])
        new_keys, scores = rerank("q", keys, texts, reranker, depth)
        want_keys, want_scores = _reference(keys, texts, score_of, depth)
        assert new_keys == want_keys
        assert scores.dtype == np.float64 and scores.tolist() == want_scores
        assert reranker.calls == [("q", texts[:depth])]  # once, on the head only


def test_rerank_keeps_the_tail_after_the_head_and_its_inputs_unchanged():
    keys, texts = ["a", "b", "c", "d", "e"], ["t0", "t1", "t2", "t3", "t4"]
    new_keys, scores = rerank("q", keys, texts, Fixed([0.1, 0.9, 0.5]), depth=3)
    assert new_keys == ["b", "c", "a", "d", "e"] and scores.tolist() == [0.9, 0.5, 0.1]
    assert keys == ["a", "b", "c", "d", "e"] and texts == ["t0", "t1", "t2", "t3", "t4"]
    # equal scores keep the original order
    assert rerank("q", keys, texts, Fixed([1.0] * 5), depth=5)[0] == keys
    assert rerank("q", keys, texts, Fixed([-0.0, 0.0, -0.0, 0.0, 0.0]), depth=5)[0] == keys


def test_rerank_of_nothing_calls_no_reranker():
    reranker = Fixed(lambda q, ts: 1 / 0)
    new_keys, scores = rerank("q", [], [], reranker, depth=10)
    assert new_keys == [] and scores.shape == (0,) and reranker.calls == []


def test_rerank_refuses_bad_arguments():
    ok = Fixed([1.0, 2.0])
    with pytest.raises(InvalidArgumentError, match="2 keys and 1 texts"):
        rerank("q", ["a", "b"], ["t"], ok, 2)
    with pytest.raises(InvalidArgumentError, match="depth must be >= 1, got 0"):
        rerank("q", ["a", "b"], ["t", "u"], ok, 0)
    with pytest.raises(TypeError, match="depth must be an int, got bool"):
        rerank("q", ["a", "b"], ["t", "u"], ok, True)
    with pytest.raises(TypeError, match=r"text 1 \(key 'b'\) must be a str"):
        rerank("q", ["a", "b"], ["t", None], ok, 2)
    with pytest.raises(TypeError, match="query must be a str, got bytes"):
        rerank(b"q", ["a", "b"], ["t", "u"], ok, 2)
    with pytest.raises(TypeError, match="reranker must be callable"):
        rerank("q", ["a", "b"], ["t", "u"], "not a function", 2)
    with pytest.raises(InvalidArgumentError, match="reranker 'fixed' returned 2 scores for 1 texts"):
        rerank("q", ["a", "b"], ["t", "u"], ok, 1)
    assert ok.calls == [("q", ["t"])]


# ------------------------------------------------------------------ TermOverlapReranker

def test_term_overlap_bm25_on_a_hand_computed_example():
    # N = 3 texts of 2, 3 and 1 terms: avgdl = 2; k1 = 1.2, b = 0.75.
    # "red": df 1, idf ln(1 + 2.5/1.5);  "apple": df 2, idf ln(1 + 1.5/2.5).
    # "red apple pie": |d| 3, each tf 1 -> 2.2 / (1 + 1.2 (0.25 + 0.75 * 3/2)) = 2.2 / 2.65
    # "apple": |d| 1 -> 2.2 / (1 + 1.2 (0.25 + 0.75 * 1/2)) = 2.2 / 1.75
    idf_red, idf_apple = math.log(1 + 2.5 / 1.5), math.log(1 + 1.5 / 2.5)
    got = TermOverlapReranker()("red apple", ["green pear", "red apple pie", "apple"])
    want = [0.0, (idf_red + idf_apple) * 2.2 / 2.65, idf_apple * 2.2 / 1.75]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(want, [0.0, 1.204465, 0.590862], atol=1e-6)  # the same, as numbers


def test_term_overlap_term_frequency_and_parameters():
    # b = 0: no length normalisation; "cat cat": tf 2 -> ln(2) * 2 * 2.2 / (2 + 1.2)
    got = TermOverlapReranker(b=0.0)("cat", ["cat cat", "dog"])
    np.testing.assert_allclose(got, [math.log(2) * 4.4 / 3.2, 0.0], rtol=1e-12)
    # k1 = 0: tf saturates at once, a match scores its idf
    got = TermOverlapReranker(k1=0.0)("cat", ["cat cat cat", "cat", "dog"])
    np.testing.assert_allclose(got, [math.log(1 + 1.5 / 2.5)] * 2 + [0.0], rtol=1e-12)
    # query terms count once; no query term, no text: zeros
    r = TermOverlapReranker()
    np.testing.assert_array_equal(r("apple apple", ["apple", "pear"]), r("apple", ["apple", "pear"]))
    np.testing.assert_array_equal(r("?!", ["apple", ""]), [0.0, 0.0])
    np.testing.assert_array_equal(r("apple", ["", ""]), [0.0, 0.0])
    assert r("apple", []).shape == (0,)


def test_term_overlap_terms_are_normalised_casefolded_and_han_characters():
    assert terms("The A7-Pro's 价格") == ["the", "a7", "pro", "s", "价", "格"]
    assert terms("ＡＰＰＬＥ Straße") == ["apple", "strasse"]  # NFKC, then casefold
    got = TermOverlapReranker()("价格多少", ["这个价格", "名字", "ＡＰＰＬＥ"])
    assert got[0] > 0 and got[1] == 0.0 and got[2] == 0.0
    assert TermOverlapReranker()("apple", ["ＡＰＰＬＥ", "pear"])[0] > 0


def test_term_overlap_refuses_bad_parameters_and_inputs():
    with pytest.raises(InvalidArgumentError, match="k1 must be finite and >= 0, got -1"):
        TermOverlapReranker(k1=-1)
    with pytest.raises(InvalidArgumentError, match=r"b must be in \[0, 1\], got 1.5"):
        TermOverlapReranker(b=1.5)
    with pytest.raises(TypeError, match="k1 must be a real number, got str"):
        TermOverlapReranker(k1="1.2")
    with pytest.raises(TypeError, match="text 1 must be a str, got int"):
        TermOverlapReranker()("q", ["a", 3])


def test_term_overlap_with_rerank():
    texts = ["green pear", "red apple pie", "apple", "red"]
    keys, scores = rerank("red apple", ["k1", "k2", "k3", "k4"], texts, TermOverlapReranker(), depth=3)
    assert keys == ["k2", "k3", "k1", "k4"] and scores[2] == 0.0


# ------------------------------------------------------------------ CrossEncoderReranker

class FakeCrossEncoder:
    """What CrossEncoderReranker uses of sentence_transformers.CrossEncoder."""

    def __init__(self, scores=None, shape=None):
        self.scores = scores
        self.shape = shape
        self.calls = []

    def predict(self, pairs, batch_size=32):
        self.calls.append((pairs, batch_size))
        out = np.asarray(self.scores(pairs) if callable(self.scores) else self.scores, dtype=np.float32)
        return out.reshape(self.shape) if self.shape else out


def test_cross_encoder_passes_pairs_and_batch_size_and_returns_float64():
    model = FakeCrossEncoder(lambda pairs: [len(d) / 10 for _, d in pairs])
    r = CrossEncoderReranker(model, batch_size=7)
    got = r("q?", ["ab", "abcd", ""])
    assert model.calls == [([("q?", "ab"), ("q?", "abcd"), ("q?", "")], 7)]
    assert got.dtype == np.float64 and got.tolist() == pytest.approx([0.2, 0.4, 0.0])
    assert r.name == "FakeCrossEncoder" and CrossEncoderReranker(model, name="ms-marco").name == "ms-marco"
    # with rerank: the longest text first
    assert rerank("q?", ["a", "b", "c"], ["ab", "abcd", ""], r, depth=3)[0] == ["b", "a", "c"]


def test_cross_encoder_flattens_one_column_and_refuses_several():
    one_column = CrossEncoderReranker(FakeCrossEncoder([0.5, 0.25], shape=(2, 1)))
    assert one_column("q", ["a", "b"]).tolist() == [0.5, 0.25]
    with pytest.raises(InvalidArgumentError, match=r"'FakeCrossEncoder' returned an array of shape \(2, 3\)"):
        CrossEncoderReranker(FakeCrossEncoder(np.zeros(6), shape=(2, 3)))("q", ["a", "b"])
    with pytest.raises(InvalidArgumentError, match="returned 1 scores for 2 texts"):
        CrossEncoderReranker(FakeCrossEncoder([0.5]))("q", ["a", "b"])
    with pytest.raises(InvalidArgumentError, match="returned nan at position 1"):
        CrossEncoderReranker(FakeCrossEncoder([0.5, np.nan]))("q", ["a", "b"])


def test_cross_encoder_makes_no_call_for_no_texts_and_checks_arguments():
    model = FakeCrossEncoder([])
    assert CrossEncoderReranker(model)("q", []).shape == (0,) and model.calls == []
    with pytest.raises(TypeError, match="has no predict|has none"):
        CrossEncoderReranker(object())
    with pytest.raises(InvalidArgumentError, match="batch_size must be >= 1, got 0"):
        CrossEncoderReranker(model, batch_size=0)
    with pytest.raises(InvalidArgumentError, match="max_length applies when loading a model by name"):
        CrossEncoderReranker(model, max_length=128)
    with pytest.raises(TypeError, match="text 0 must be a str, got NoneType"):
        CrossEncoderReranker(model)("q", [None])


def test_cross_encoder_loads_a_model_by_name_through_sentence_transformers(monkeypatch):
    made = []

    class CrossEncoder(FakeCrossEncoder):
        def __init__(self, name, **kwargs):
            super().__init__(lambda pairs: [1.0] * len(pairs))
            made.append((name, kwargs))

    fake = types.SimpleNamespace(CrossEncoder=CrossEncoder)
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    r = CrossEncoderReranker("cross-encoder/ms-marco-MiniLM-L-6-v2", batch_size=4, max_length=256)
    assert made == [("cross-encoder/ms-marco-MiniLM-L-6-v2", {"max_length": 256})]
    assert r.name == "cross-encoder/ms-marco-MiniLM-L-6-v2" and r("q", ["a"]).tolist() == [1.0]
    assert r.model.calls == [([("q", "a")], 4)]
    CrossEncoderReranker("other")
    assert made[-1] == ("other", {})  # no max_length: the model's own


def test_cross_encoder_without_sentence_transformers_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails as if not installed
    with pytest.raises(ImportError) as e:
        CrossEncoderReranker("cross-encoder/ms-marco-MiniLM-L-6-v2")
    assert str(e.value).count('pip install "vecgraph[rerank]"') == 1 and str(e.value).count("pip") == 1
