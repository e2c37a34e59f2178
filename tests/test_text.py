"""The text channel (vecgraph.text): TextIndex (tantivy + BM25), the terms it indexes,
identifier queries, replacement and removal, filters inside the search, the exclude callback,
LSN persistence, concurrent searches during writes, rebuild vs incremental build, BM25 scores
against a reference formula, bad input."""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import threading

import numpy as np
import pytest
from vecgraph.errors import (
    CorruptionError,
    DuplicateKeyError,
    Error,
    InvalidArgumentError,
    ReadOnlyError,
    StorageError,
)
from vecgraph.text import TextIndex, tokenize

FILLER_WORDS = ("garden river window copper basket lantern meadow harbor pencil violin orbit canyon "
                "marble thunder saddle velvet anchor blossom cobalt ember falcon glacier hammock "
                "juniper kettle lagoon mosaic nectar oyster pepper quartz ribbon").split()


def filler(count: int, seed: int = 0, start: int = 0) -> tuple[list, list]:
    """``count`` documents of six random filler words (keys ``f<i>``), so that BM25's idf
    is positive for the rarer terms of a test."""
    rng = random.Random(seed)
    keys = [f"f{start + i}" for i in range(count)]
    texts = [" ".join(rng.choice(FILLER_WORDS) for _ in range(6)) for _ in range(count)]
    return keys, texts


@pytest.fixture(params=["memory", "file"])
def index(request, tmp_path):
    ix = TextIndex(None if request.param == "memory" else str(tmp_path / "idx" / "text"))
    yield ix
    ix.close()


def keys_of(results):
    return [key for key, _ in results]


# ------------------------------------------------------------------------------------- terms


def test_the_index_does_not_split_the_tokens_again(tmp_path):
    """The index's term dictionary is exactly the set of terms tokenize() gives."""
    text = ("A7-Pro ERR_0x9941 v2.0 foo.bar_baz user@example.com std::vector __init__ हिन्दी "
            "多少钱 カタカナ 한국어 ＦＵＬＬ café a--b x.y:z/w")
    ix = TextIndex(str(tmp_path / "t"))
    ix.upsert(["doc"], [text], lsn=1)
    ix.flush()
    vocabulary = {term for term, _ in ix._searcher.terms_with_prefix("node", "")}
    ix.close()
    assert vocabulary == set(tokenize(text))


# ------------------------------------------------------------------------------------- search


PRODUCTS = {
    "a7": "The A7-Pro phone costs 499 dollars; the A7-Pro has a 6.1 inch screen.",
    "c9": "The C9-Max phone costs 899 dollars; the C9-Max has a 6.7 inch screen.",
    "a7-case": "A protective case for the A7 phone, pro grade leather, 29 dollars.",
    "max-pro": "Max Pro tips: how to get the most from your phone screen and battery.",
    "c9-review": "Review: the C9 phone is fast; the Max edition costs more dollars.",
}


def build_products(ix):
    keys, texts = filler(200)
    ix.upsert(keys, texts, lsn=1)
    ix.upsert(list(PRODUCTS), list(PRODUCTS.values()), lsn=2)


def test_a7_pro_query_ranks_its_document_first(index):
    build_products(index)
    for query in ("A7-Pro 多少钱？", "How much is the A7-Pro?", "a7-pro price"):
        assert keys_of(index.search(query, 3))[0] == "a7", query
    assert keys_of(index.search("C9-Max price", 3))[0] == "c9"
    # the parts still match on their own
    assert "a7-case" in keys_of(index.search("A7 case"))
    results = index.search("A7-Pro", 10)
    assert keys_of(results)[0] == "a7"
    assert all(score > 0 for _, score in results)
    assert [s for _, s in results] == sorted((s for _, s in results), reverse=True)


def test_error_code_found_whole(index):
    keys, texts = filler(100)
    index.upsert(keys, texts, lsn=1)
    index.upsert(["e1", "e2", "e3"], [
        "Battery low: the charger reports ERR_0x9941 after boot.",
        "Fan failure: ERR_0x9942 on the main board, err light blinking, err again.",
        "Unrelated error 0x9941 in another module.",
    ], lsn=2)
    results = keys_of(index.search("ERR_0x9941", 3))
    assert results[0] == "e1"                  # the whole code: one document, the highest idf
    assert sorted(results[1:]) == ["e2", "e3"]  # its parts: err (e2), 0x9941 (e3)
    assert keys_of(index.search("what does ERR_0x9942 mean", 1)) == ["e2"]


def test_empty_or_stopword_query_returns_nothing(index):
    build_products(index)
    assert index.search("") == []
    assert index.search("the of and what is") == []
    assert index.search("?!") == []
    assert index.search("zzzunknownzzz") == []


def test_ties_break_by_key(index):
    keys, texts = filler(50)
    index.upsert(keys, texts, lsn=1)
    same = "identical text about zebra"
    index.upsert([10, 2, "b", "a", -5], [same] * 5, lsn=2)
    results = index.search("zebra", 10)
    assert keys_of(results) == [-5, 2, 10, "a", "b"]  # ints first, by value; then str
    assert len({score for _, score in results}) == 1
    assert keys_of(index.search("zebra", 3)) == [-5, 2, 10]


def test_large_tie_groups_across_pages(index):
    # 300 identical documents: every page boundary falls inside the tie group
    index.upsert(*filler(100), lsn=1)
    keys = list(range(300))
    random.Random(3).shuffle(keys)
    index.upsert(keys, ["same words about walrus"] * 300, lsn=2)
    assert keys_of(index.search("walrus", 5)) == [0, 1, 2, 3, 4]
    assert keys_of(index.search("walrus", 300)) == list(range(300))
    assert keys_of(index.search("walrus", 7, exclude=lambda key: key % 3 != 0)) == [0, 3, 6, 9, 12, 15, 18]


# ------------------------------------------------------------------------------------- writes


def test_upsert_replaces(index):
    keys, texts = filler(50)
    index.upsert(keys, texts, lsn=1)
    assert index.upsert(["k"], ["first version mentions aardvark"], tenants="t1", labels="old", ts=5, lsn=2) == 1
    assert keys_of(index.search("aardvark")) == ["k"]
    assert index.upsert(["k"], ["second version mentions buffalo"], tenants="t2", labels="new", ts=9, lsn=3) == 1
    assert index.search("aardvark") == []
    assert keys_of(index.search("buffalo")) == ["k"]
    assert keys_of(index.search("buffalo", tenants="t2", labels="new", ts_min=9, ts_max=9)) == ["k"]
    assert index.search("buffalo", tenants="t1") == []
    assert index.count() == 51
    assert index.lsn == 3


@pytest.mark.parametrize("empty", ["", None, "the of and", "..."])
def test_empty_text_removes_the_document(index, empty):
    index.upsert(*filler(20), lsn=1)
    index.upsert(["k"], ["mentions aardvark"], lsn=2)
    assert index.count() == 21
    assert index.upsert(["k"], [empty], lsn=3) == 0
    assert index.count() == 20
    assert index.search("aardvark") == []
    assert index.upsert(["new"], [empty], lsn=4) == 0  # never stored
    assert index.count() == 20
    assert index.lsn == 4


def test_delete_and_delete_tenant(index):
    index.upsert(*filler(30), lsn=1)
    index.upsert(["a", "b", "c", 7], ["okapi one", "okapi two", "okapi three", "okapi four"],
                 tenants=["t1", "t1", "t2", "t1"], lsn=2)
    index.upsert(["a"], ["okapi edge"], tenants="t1", kind="edge", lsn=2)
    assert index.delete(["b", "missing", "b"], lsn=3) == 1
    assert sorted(map(str, keys_of(index.search("okapi")))) == ["7", "a", "c"]
    assert index.delete_tenant("t1", lsn=4) == 3  # nodes a, 7 and the edge a
    assert keys_of(index.search("okapi")) == ["c"]
    assert index.search("okapi", kind="edge") == []
    assert index.count() == 31
    assert index.delete_tenant("nobody", lsn=5) == 0
    assert index.lsn == 5


def test_nodes_and_edges_are_separate(index):
    index.upsert(*filler(30), lsn=1)
    index.upsert(["x"], ["node text about lemur"], lsn=2)
    index.upsert(["x"], ["edge text about lemur"], kind="edge", lsn=3)
    assert keys_of(index.search("lemur")) == ["x"]
    assert keys_of(index.search("edge lemur", kind="edge")) == ["x"]
    assert index.search("garden", kind="edge") == []
    assert index.count("node") == 31 and index.count("edge") == 1 and index.count() == 32
    index.delete(["x"], kind="edge", lsn=4)
    assert index.search("lemur", kind="edge") == []
    assert keys_of(index.search("lemur")) == ["x"]


def test_int_and_str_keys_are_different(index):
    index.upsert(*filler(30), lsn=1)
    index.upsert([1, "1"], ["int key walrus", "str key walrus walrus"], lsn=2)
    assert keys_of(index.search("walrus")) == ["1", 1]
    index.delete([1], lsn=3)
    assert keys_of(index.search("walrus")) == ["1"]


def test_clear(index):
    index.upsert(*filler(30), lsn=7)
    index.clear()
    assert index.count() == 0 and index.lsn == 0
    assert index.search("garden") == []
    index.upsert(["a"], ["garden"], lsn=1)
    assert keys_of(index.search("garden")) == ["a"]


# ------------------------------------------------------------------------------------- filters


@pytest.fixture
def big(index):
    """2,000 documents that all mention 'widget'; 3 have tenant 'rare', 3 label 'special',
    3 a ts in [5000, 5002]; the rest tenant 'common' (or 'other'), label 'plain', ts 0."""
    rng = random.Random(7)
    keys = [f"d{i}" for i in range(2000)]
    texts = [f"widget {rng.choice(FILLER_WORDS)} {rng.choice(FILLER_WORDS)}" + " widget" * rng.randrange(3)
             for _ in keys]
    tenants = ["common" if i % 2 else "other" for i in range(2000)]
    labels = ["plain"] * 2000
    ts = [0] * 2000
    for i in (17, 900, 1999):
        tenants[i] = "rare"
    for i in (5, 6, 1500):
        labels[i] = "special"
    for i, t in zip((100, 200, 300), (5000, 5001, 5002)):
        ts[i] = t
    index.rebuild(zip(keys, texts, tenants, labels, ts), lsn=1)
    return index


def test_filters_admitting_3_of_2000_return_those_3(big):
    assert sorted(keys_of(big.search("widget", 10, tenants="rare"))) == ["d17", "d1999", "d900"]
    assert sorted(keys_of(big.search("widget", 10, labels=["special"]))) == ["d1500", "d5", "d6"]
    assert sorted(keys_of(big.search("widget", 10, ts_min=5000))) == ["d100", "d200", "d300"]
    assert sorted(keys_of(big.search("widget", 10, ts_min=5000, ts_max=5001))) == ["d100", "d200"]
    assert keys_of(big.search("widget", 10, tenants="rare", labels="special")) == []
    assert big.search("widget", 10, tenants=[]) == []
    assert big.search("widget", 10, ts_min=10, ts_max=1) == []
    both = big.search("widget", 10, tenants=["rare", "nobody"], labels=["plain", "special"])
    assert sorted(keys_of(both)) == ["d17", "d1999", "d900"]


def bm25_reference(docs: dict, query: str, k1: float = 1.2, b: float = 0.75) -> dict:
    """Okapi BM25 of every document matching ``query``, computed from the token lists alone:
    idf = ln(1 + (N - n + 0.5) / (n + 0.5)), tf saturation with length normalisation."""
    tokens = {key: tokenize(text) for key, text in docs.items()}
    tokens = {key: t for key, t in tokens.items() if t}
    count = len(tokens)
    average = sum(len(t) for t in tokens.values()) / count
    out: dict = {}
    for term in dict.fromkeys(tokenize(query)):
        holding = [key for key, t in tokens.items() if term in t]
        idf = math.log(1 + (count - len(holding) + 0.5) / (len(holding) + 0.5))
        for key in holding:
            tf = tokens[key].count(term)
            norm = k1 * (1 - b + b * len(tokens[key]) / average)
            out[key] = out.get(key, 0.0) + idf * tf * (k1 + 1) / (tf + norm)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_equal_the_bm25_formula(index, seed):
    """Random documents (1-12 words, repeats; at most 36 terms, below the length where tantivy
    stores document lengths approximately) and queries: every score the index returns is the
    reference BM25 score, and the ranking is the reference ranking (ties by key)."""
    rng = random.Random(seed)
    words = FILLER_WORDS[:12] + ["A7-Pro", "ERR_0x9941", "多少钱"]
    docs = {(f"k{i}" if i % 3 else i): " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
            for i in range(300)}
    index.upsert(list(docs), list(docs.values()), lsn=1)
    for _ in range(20):
        query = " ".join(rng.sample(words, rng.randint(1, 4)))
        expected = bm25_reference(docs, query)
        found = index.search(query, len(docs))
        assert len(found) == len(expected)
        for key, score in found:
            assert score == pytest.approx(expected[key], rel=1e-4)
        scores = [score for _, score in found]
        assert scores == sorted(scores, reverse=True)


def test_filtered_ranking_is_the_unfiltered_ranking_restricted(big):
    everything = big.search("widget pepper", 2000)
    admitted = [(key, score) for key, score in everything if int(key[1:]) % 2 == 1 and key not in ("d17", "d1999")]
    assert big.search("widget pepper", 50, tenants="common") == admitted[:50]


def test_exclude_many_drops_what_exclude_drops_in_blocks(big):
    """exclude_many gives the same results as exclude, over blocks of growing size, also
    together with exclude; a wrong number of flags is an error."""
    ranking = big.search("widget garden basket", 2000)
    dropped = {key for key, _ in ranking[:300]}
    blocks = []

    def many(keys):
        blocks.append(len(keys))
        return [key in dropped for key in keys]

    assert big.search("widget garden basket", 10, exclude_many=many) == ranking[300:310]
    assert blocks == [64, 256]  # 320 candidates hold the 10 past the 300 dropped
    odd = big.search("widget garden basket", 20, exclude_many=many,
                     exclude=lambda key: int(key[1:]) % 2 == 0)
    assert odd == [(key, s) for key, s in ranking[300:] if int(key[1:]) % 2 == 1][:20]
    assert big.search("widget", 5, exclude_many=lambda keys: [True] * len(keys)) == []
    with pytest.raises(ValueError, match="returned 0 flags for"):
        big.search("widget", 5, exclude_many=lambda keys: [])
    with pytest.raises(TypeError, match="exclude_many must be callable"):
        big.search("widget", 5, exclude_many=3)
    for exclude in (None, lambda key: False):  # alone, and beside exclude
        with pytest.raises(TypeError, match="exclude_many must return a sequence of bools, one per key; "
                                            "it returned NoneType for 64 keys"):
            big.search("widget", 5, exclude_many=lambda keys: None, exclude=exclude)
        with pytest.raises(ValueError, match="returned 63 flags for 64 keys"):
            big.search("widget", 5, exclude_many=lambda keys: [False] * (len(keys) - 1), exclude=exclude)
        # Truthy values that are not bools would be read as flags: refused, naming what came.
        for returned, what in ((lambda keys: "x" * len(keys), "it returned str for 64 keys"),
                               (lambda keys: {key: False for key in keys}, "it returned dict for 64 keys"),
                               (lambda keys: ["False"] * len(keys), "item 0 is str 'False'"),
                               (lambda keys: [None] * len(keys), "item 0 is NoneType None"),
                               (lambda keys: np.zeros((len(keys), 2), dtype=bool), "item 0 is ndarray")):
            with pytest.raises(TypeError, match=re.escape(what)):
                big.search("widget", 5, exclude_many=returned, exclude=exclude)
        emptied = []

        def clears(keys):  # empties the list it is given: the count is the one it was given
            emptied.append(len(keys))
            keys.clear()
            return []

        with pytest.raises(ValueError, match="returned 0 flags for 64 keys"):
            big.search("widget", 5, exclude_many=clears, exclude=exclude)
    # numpy bools and generators of bools are flags.
    assert big.search("widget", 5, exclude_many=lambda keys: np.zeros(len(keys), dtype=bool)) == big.search("widget", 5)
    assert big.search("widget", 5, exclude_many=lambda keys: (False for _ in keys)) == big.search("widget", 5)
    with pytest.raises(TypeError, match="exclude must return a bool; it returned str 'yes' for key"):
        big.search("widget", 5, exclude=lambda key: "yes")
    assert big.search("widget", 5, exclude=lambda key: np.bool_(False)) == big.search("widget", 5)


def test_many_filter_values(big):
    tenants = [f"t{i}" for i in range(300)] + ["rare"]
    assert sorted(keys_of(big.search("widget", 10, tenants=tenants))) == ["d17", "d1999", "d900"]


def test_exclude_pages_until_k_admitted(big):
    ranking = big.search("widget garden basket", 2000)
    assert len(ranking) == 2000

    dropped = {key for key, _ in ranking[:300]}
    assert big.search("widget garden basket", 10, exclude=dropped.__contains__) == ranking[300:310]
    odd = big.search("widget garden basket", 20, exclude=lambda key: int(key[1:]) % 2 == 0)
    assert odd == [(key, s) for key, s in ranking if int(key[1:]) % 2 == 1][:20]
    assert big.search("widget", 5, exclude=lambda key: True) == []
    calls = []
    big.search("widget", 3, exclude=lambda key: calls.append(key) or False)
    assert len(calls) == 3  # stops as soon as k are admitted


# ------------------------------------------------------------------------------------- lsn, files


def test_lsn_persists_across_reopen(tmp_path):
    path = str(tmp_path / "sub" / "dir" / "text")
    ix = TextIndex(path)
    assert ix.lsn == 0 and not ix.reset_on_open
    ix.upsert(*filler(40), lsn=41)
    ix.delete(["f0"], lsn=42)
    expected = ix.search("garden copper", 5)
    ix.close()
    ix = TextIndex(path)
    assert ix.lsn == 42
    assert ix.count() == 39
    assert ix.search("garden copper", 5) == expected
    ix.close()


def test_lsn_must_not_go_back(index):
    index.upsert(["a"], ["garden"], lsn=5)
    index.upsert(["b"], ["garden"], lsn=5)  # the same lsn again is fine
    with pytest.raises(InvalidArgumentError, match="lsn 4 is older than the index's lsn 5"):
        index.upsert(["c"], ["garden"], lsn=4)
    with pytest.raises(InvalidArgumentError, match="lsn must be >= 0"):
        index.delete(["a"], lsn=-1)
    with pytest.raises(TypeError, match="lsn must be an int"):
        index.delete(["a"], lsn=5.0)
    with pytest.raises(TypeError, match="lsn must be an int"):
        index.delete(["a"], lsn=True)
    assert index.count() == 2 and index.lsn == 5
    index.rebuild([("a", "garden", None, None, None)], lsn=1)  # rebuild may go back
    assert index.lsn == 1 and index.count() == 1


def test_other_tokenizer_version_is_reset_on_open(tmp_path):
    path = str(tmp_path / "text")
    ix = TextIndex(path)
    ix.upsert(*filler(10), lsn=3)
    ix.close()
    header = tmp_path / "text" / "vecgraph-text.json"
    meta = json.loads(header.read_text())
    header.write_text(json.dumps({**meta, "tokenizer": 0}))
    ix = TextIndex(path)
    assert ix.reset_on_open and ix.lsn == 0 and ix.count() == 0
    ix.rebuild(zip(*filler(10), [None] * 10, [None] * 10, [0] * 10), lsn=3)
    assert not ix.reset_on_open and ix.count() == 10
    ix.close()
    ix = TextIndex(path)
    assert not ix.reset_on_open and ix.lsn == 3
    ix.close()


def test_foreign_or_damaged_folders(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("hello")
    with pytest.raises(CorruptionError, match="not a vecgraph text index"):
        TextIndex(str(other))
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]  # left as it was
    plain = tmp_path / "plain-file"
    plain.write_bytes(b"x" * 100)
    with pytest.raises(CorruptionError, match="is a file"):
        TextIndex(str(plain))
    good = tmp_path / "good"
    TextIndex(str(good)).close()
    (good / "vecgraph-text.json").write_text("{not json")
    with pytest.raises(CorruptionError, match="cannot be read"):
        TextIndex(str(good))
    damaged = tmp_path / "damaged"
    ix = TextIndex(str(damaged))
    ix.upsert(["a"], ["garden"], lsn=1)
    ix.close()
    (damaged / "meta.json").write_text("{")
    with pytest.raises(CorruptionError, match="damaged"):
        TextIndex(str(damaged))


def test_unpublished_writes_are_lost_by_a_crash_and_the_lsn_says_so(tmp_path):
    """A process that dies holding buffered writes leaves the last published state and its
    lsn: the owner can tell exactly what to bring forward."""
    path = str(tmp_path / "text")
    script = (
        "import os, sys\n"
        "from vecgraph.text import TextIndex\n"
        "ix = TextIndex(sys.argv[1])\n"
        "ix.upsert(['a', 'b'], ['garden river', 'garden copper'], lsn=5)\n"
        "ix.flush()\n"
        "ix.upsert(['c'], ['garden violin'], lsn=6)\n"
        "assert ix.delete(['a', 'c', 'zz'], lsn=7) == 2\n"  # counted without publishing
        "os._exit(0)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", script, path], check=True, env=env, timeout=120)
    ix = TextIndex(path)
    assert ix.lsn == 5
    assert sorted(keys_of(ix.search("garden", 10))) == ["a", "b"]
    ix.close()


def test_closed_index(tmp_path):
    ix = TextIndex(str(tmp_path / "t"))
    ix.upsert(["a"], ["garden"], lsn=1)
    ix.close()
    ix.close()
    assert ix.closed
    with pytest.raises(ReadOnlyError, match="closed"):
        ix.upsert(["b"], ["garden"], lsn=2)
    with pytest.raises(ReadOnlyError):
        ix.rebuild([], lsn=2)
    with pytest.raises(Error, match="closed"):
        ix.search("garden")
    with TextIndex() as mem:
        mem.upsert(["a"], ["garden"], lsn=1)
    assert mem.closed


# ------------------------------------------------------------------------------------- rebuild


def test_rebuild_equals_incremental_build(tmp_path):
    rng = random.Random(11)
    words = FILLER_WORDS + ["A7-Pro", "ERR_0x9941", "v2.0", "多少钱", "价格", "カタカナ"]
    final: dict = {}
    incremental = TextIndex(str(tmp_path / "inc"))
    lsn = 0
    for batch in range(12):
        keys = rng.sample(range(400), 60)
        texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 9))) for _ in keys]
        tenants = [rng.choice(["t1", "t2", "t3"]) for _ in keys]
        ts = [rng.randrange(100) for _ in keys]
        lsn += 1
        incremental.upsert(keys, texts, tenants=tenants, labels="doc", ts=ts, lsn=lsn)
        for key, text, tenant, t in zip(keys, texts, tenants, ts):
            if tokenize(text):
                final[key] = (text, tenant, t)
            else:
                final.pop(key, None)
        if batch % 4 == 3:
            gone = rng.sample(range(400), 30)
            lsn += 1
            incremental.delete(gone, lsn=lsn)
            for key in gone:
                final.pop(key, None)
    rebuilt = TextIndex(str(tmp_path / "rebuilt"))
    items = [(key, text, tenant, "doc", t) for key, (text, tenant, t) in sorted(final.items(), reverse=True)]
    assert rebuilt.rebuild(items, lsn=lsn) == len(final)
    assert incremental.count() == rebuilt.count() == len(final)
    assert incremental.lsn == rebuilt.lsn == lsn
    for query in ["garden", "A7-Pro 多少钱", "err_0x9941 copper", "v2.0 lantern meadow", "カタカナ orbit",
                  "pepper quartz ribbon kettle"]:
        for filters in ({}, {"tenants": "t2"}, {"ts_min": 20, "ts_max": 70}):
            a = dict(incremental.search(query, 1000, **filters))
            b = dict(rebuilt.search(query, 1000, **filters))
            assert sorted(a, key=str) == sorted(b, key=str), (query, filters)
            # Deleted and replaced documents stay in the incremental index's statistics
            # (document frequencies, average length) until their segments merge, as in
            # Lucene, so scores agree closely but not exactly.
            assert [a[key] for key in b] == pytest.approx(list(b.values()), rel=0.3)
    # The erasure checkpoint's refill from the graph's own columns (no per-item checks) gives
    # exactly rebuild()'s index: the same documents, the same scores.
    refilled = TextIndex(str(tmp_path / "refilled"))
    mixed = [(key if key % 2 else f"s{key}", text, tenant, "doc", t) for key, text, tenant, _, t in items]
    mixed.append(("no-text", None, "t1", None, 5))
    rebuilt.rebuild(mixed, lsn=lsn + 1)
    columns = [list(column) for column in zip(*mixed)]
    assert refilled._refill_nodes(*columns, lsn=lsn + 1) == len(final)
    assert refilled.count() == len(final) and refilled.lsn == lsn + 1
    for query in ["garden", "A7-Pro 多少钱", "v2.0 lantern meadow", "カタカナ orbit"]:
        for filters in ({}, {"tenants": "t2"}, {"labels": "doc", "ts_min": 20, "ts_max": 70}):
            expected = rebuilt.search(query, 1000, **filters)
            assert expected and refilled.search(query, 1000, **filters) == expected, (query, filters)
    for index in (incremental, rebuilt, refilled):
        index.close()


def test_rebuild_items_and_errors(index):
    index.upsert(*filler(10), lsn=1)
    stored = index.rebuild([("a", "garden words", "t", "l", 5), (2, "edge words", None, None, None, "edge"),
                            ("empty", "", None, None, None)], lsn=9)
    assert stored == 2 and index.count() == 2 and index.lsn == 9
    assert keys_of(index.search("words", kind="edge")) == [2]
    bad_items = [
        ([("a", "x", None, None, None), ("a", "y", None, None, None)], DuplicateKeyError, r"items\[1\].*twice"),
        ([("a", "x", None, None)], TypeError, r"items\[0\] must be"),
        ([("a", "x", None, None, None), (1.5, "x", None, None, None)], TypeError, r"items\[1\] key is a float"),
        ([("a", "x", None, None, None, "vertex")], InvalidArgumentError, "kind must be"),
        ([("a", "x", 3, None, None)], TypeError, r"items\[0\] tenant is a int"),
        ([("a", "x", None, None, "soon")], TypeError, r"items\[0\] ts must be an int"),
    ]
    for items, error, message in bad_items:
        with pytest.raises(error, match=message):
            index.rebuild(items, lsn=20)
        assert index.count() == 2 and index.lsn == 9
        assert keys_of(index.search("garden")) == ["a"]


def test_rebuild_progress_bar(index, capsys):
    index.rebuild(((f"k{i}", "garden text", None, None, None) for i in range(50)), lsn=1, progress=True)
    assert "text index" in capsys.readouterr().err
    index.rebuild([("a", "garden", None, None, None)], lsn=1)
    assert capsys.readouterr().err == ""  # not a terminal, few items: no bar


# ------------------------------------------------------------------------------------- bad input


def test_bad_keys_and_kinds_change_nothing(index):
    index.upsert(*filler(10), lsn=3)
    before = (index.count(), index.lsn, index.search("garden"))
    cases = [
        (lambda: index.upsert(["ok", 2.5], ["x", "y"], lsn=4), TypeError, r"keys\[1\] is a float \(2.5\)"),
        (lambda: index.upsert([True], ["x"], lsn=4), TypeError, r"keys\[0\] is a bool"),
        (lambda: index.upsert([None], ["x"], lsn=4), TypeError, r"keys\[0\] is a NoneType"),
        (lambda: index.upsert([b"k"], ["x"], lsn=4), TypeError, r"keys\[0\] is a bytes"),
        (lambda: index.upsert([2**64], ["x"], lsn=4), InvalidArgumentError, "outside int64"),
        (lambda: index.upsert("abc", ["x"], lsn=4), TypeError, "not a single str"),
        (lambda: index.upsert(["a", "b", "a"], ["x", "y", "z"], lsn=4), DuplicateKeyError, r"keys\[2\].*keys\[0\]"),
        (lambda: index.upsert(["a"], ["x"], kind="vertex", lsn=4), InvalidArgumentError, "kind must be 'node' or 'edge'"),
        (lambda: index.upsert(["a"], ["x", "y"], lsn=4), ValueError, "texts has 2 items, expected 1"),
        (lambda: index.upsert(["a"], [5], lsn=4), TypeError, r"texts\[0\] is a int"),
        (lambda: index.upsert(["a"], ["x"], tenants=[1], lsn=4), TypeError, r"tenants\[0\]"),
        (lambda: index.upsert(["a"], ["x"], ts=["now"], lsn=4), TypeError, r"ts\[0\] must be an int"),
        (lambda: index.upsert(["a"], ["x"], ts=2**63, lsn=4), InvalidArgumentError, "fit int64"),
        (lambda: index.upsert(["a"], ["x"], lsn=2), InvalidArgumentError, "older"),
        (lambda: index.delete([1.0], lsn=4), TypeError, r"keys\[0\] is a float"),
        (lambda: index.delete(["a"], kind="nodes", lsn=4), InvalidArgumentError, "kind must be"),
        (lambda: index.delete_tenant(None, lsn=4), TypeError, "tenant must be a str"),
        (lambda: index.search("garden", kind="both"), InvalidArgumentError, "kind must be"),
        (lambda: index.search("garden", k=0), InvalidArgumentError, "k must be >= 1"),
        (lambda: index.search("garden", k=True), TypeError, "k must be an int"),
        (lambda: index.search(["garden"]), TypeError, "text must be a str"),
        (lambda: index.search("garden", tenants=[1]), TypeError, "tenants must hold str"),
        (lambda: index.search("garden", ts_min=1.5), TypeError, "ts_min must be an int"),
        (lambda: index.search("garden", exclude=3), TypeError, "exclude must be callable"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()
        assert (index.count(), index.lsn, index.search("garden")) == before


def test_numpy_keys_and_ts():
    np = pytest.importorskip("numpy")
    with TextIndex() as ix:
        ix.upsert(np.array([3, 1, 2]), ["garden a", "garden b", "garden c"], ts=np.array([5, 6, 7]), lsn=1)
        assert sorted(keys_of(ix.search("garden"))) == [1, 2, 3]
        assert all(type(key) is int for key in keys_of(ix.search("garden")))
        assert keys_of(ix.search("garden", ts_min=np.int64(7))) == [2]
        with pytest.raises(TypeError, match="bool"):
            ix.upsert([np.bool_(True)], ["x"], lsn=2)


# ------------------------------------------------------------------------------------- threads


@pytest.mark.parametrize("where", ["memory", "file"])
def test_concurrent_searches_while_one_thread_writes(tmp_path, where):
    ix = TextIndex(None if where == "memory" else str(tmp_path / "t"))
    static_keys = [f"s{i}" for i in range(100)]
    ix.upsert(static_keys, [f"alpha {FILLER_WORDS[i % len(FILLER_WORDS)]}" for i in range(100)], lsn=1)
    ix.upsert(*filler(200), lsn=1)
    errors: list = []
    stop = threading.Event()
    batches = 40

    def write():
        try:
            for b in range(batches):
                keys = [f"w{b}-{i}" for i in range(10)]
                ix.upsert(keys, ["beta " + FILLER_WORDS[i] for i in range(10)], lsn=2 + b)
                if b % 5 == 4:
                    ix.delete([f"w{b - 1}-{i}" for i in range(10)], lsn=2 + b)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            stop.set()

    seen_counts: list = []

    def read():
        try:
            while not stop.is_set():
                alpha = ix.search("alpha", 5)
                assert len(alpha) == 5 and all(key in static_keys for key, _ in alpha)
                assert [s for _, s in alpha] == sorted((s for _, s in alpha), reverse=True)
                beta = ix.search("beta", 1000)
                assert len(beta) % 10 == 0  # a batch is visible whole or not at all
                seen_counts.append(len(beta))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(4)]
    writer = threading.Thread(target=write)
    for t in readers:
        t.start()
    writer.start()
    writer.join(60)
    for t in readers:
        t.join(60)
    assert not errors, errors[0]
    assert ix.lsn == 1 + batches
    assert len(ix.search("beta", 1000)) == (batches - batches // 5) * 10
    assert seen_counts
    ix.close()


def test_optimize_keeps_results(index):
    index.upsert(*filler(100), lsn=1)
    for i in range(20):
        index.upsert([f"x{i}"], [f"walrus {FILLER_WORDS[i]}"], lsn=2 + i)
    before = index.search("walrus garden copper", 15)
    index.optimize()
    assert index.search("walrus garden copper", 15) == before
    assert index.lsn == 21 and index.count() == 120


def test_k_beyond_the_documents_is_fine(index):
    index.upsert(["a", "b"], ["apple pie", "apple"], lsn=1)
    assert keys_of(index.search("apple", 10**9)) == ["b", "a"]
    assert keys_of(index.search("apple", 2**63 - 1)) == ["b", "a"]


def test_keys_tenants_and_labels_longer_than_a_term_work(index):
    key, tenant, label = "k" * 70_000, "T" * 70_000, "L" * 70_000
    index.upsert([key, "short"], ["durian", "durian elder"], tenants=[tenant, "t"], labels=[label, "l"], lsn=1)
    assert keys_of(index.search("durian", 5, tenants=tenant)) == [key]
    assert keys_of(index.search("durian", 5, labels=[label])) == [key]
    index.upsert([key], ["durian again"], lsn=2)  # replaces, no second document
    assert index.count() == 2
    assert index.delete([key], lsn=3) == 1
    assert keys_of(index.search("durian", 5)) == ["short"]
    index.upsert([key], ["durian"], tenants=tenant, lsn=4)
    assert index.delete_tenant(tenant, lsn=5) == 1
    assert keys_of(index.search("durian", 5)) == ["short"]


def test_a_file_damaged_after_a_clean_close_is_found_at_open(tmp_path):
    path = tmp_path / "t"
    ix = TextIndex(str(path))
    ix.upsert(*filler(300), lsn=1)
    ix.close()
    header = json.loads((path / "vecgraph-text.json").read_text())
    assert header["files"] and all(size > 0 for size, _ in header["files"].values())
    store = next(p for p in path.iterdir() if p.suffix == ".store")
    data = bytearray(store.read_bytes())
    data[len(data) // 2] ^= 0x01
    store.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=r"\.store is damaged"):
        TextIndex(str(path))
    data[len(data) // 2] ^= 0x01
    store.write_bytes(bytes(data))
    ix = TextIndex(str(path))  # intact again; the check is dropped once the index is written to
    assert "files" not in json.loads((path / "vecgraph-text.json").read_text())
    assert ix.count() == 300
    ix.close()
    (path / "stray.bin").write_bytes(b"x")
    with pytest.raises(CorruptionError, match="unexpected"):
        TextIndex(str(path))


def test_lone_surrogates_are_clear_errors_that_change_nothing(index):
    index.upsert(["a"], ["apple"], lsn=1)
    for call, where in [
        (lambda: index.upsert(["\ud800"], ["apple"], lsn=2), r"keys\[0\]"),
        (lambda: index.upsert(["b"], ["apple \udc80"], lsn=2), r"texts\[0\]"),
        (lambda: index.upsert(["b"], ["apple"], tenants="\ud800", lsn=2), "tenants"),
        (lambda: index.search("apple \ud800"), "text"),
        (lambda: index.search("apple", tenants=["\ud800"]), "tenants"),
        (lambda: index.rebuild([("b", "x", "\ud800", None, 0)], lsn=2), r"items\[0\] tenant"),
    ]:
        with pytest.raises(ValueError, match=where + ".*not valid Unicode"):
            call()
    assert index.lsn == 1 and keys_of(index.search("apple")) == ["a"]


def test_keys_filter_is_the_ranking_restricted(big):
    everything = big.search("widget pepper", 2000)
    chosen = {f"d{i}" for i in range(0, 2000, 7)} | {"d17", "nobody"}
    admitted = [(key, score) for key, score in everything if key in chosen]
    assert big.search("widget pepper", 40, keys=sorted(chosen)) == admitted[:40]
    assert big.search("widget pepper", 40, keys=iter(sorted(chosen)), tenants="common") == [
        (key, score) for key, score in admitted if int(key[1:]) % 2 == 1 and key != "d17"][:40]
    assert big.search("widget", 10, keys=[]) == []
    assert big.search("widget", 10, keys=["nobody", 17]) == []
    with pytest.raises(TypeError, match="keys must be an iterable of str or int keys, got str"):
        big.search("widget", 10, keys="d17")
    with pytest.raises(TypeError, match=r"keys\[0\] is a float"):
        big.search("widget", 10, keys=[1.5])


def test_keys_filter_refuses_bytes_like_and_names_the_bad_item(big):
    """A bytearray or memoryview is refused like bytes (iterated, it would give ints: the keys
    of its byte values); a bad item is named by its position."""
    for keys in (b"d1", bytearray(b"d1"), memoryview(b"d1")):
        with pytest.raises(TypeError, match=f"an iterable of str or int keys, got {type(keys).__name__}$"):
            big.search("widget", 10, keys=keys)
    with pytest.raises(TypeError, match=r"keys\[2\] is a NoneType"):
        big.search("widget", 10, keys=("d1", 17, None))


def test_a_failed_disk_write_is_a_storage_error_and_changes_nothing(tmp_path, monkeypatch):
    """A writer whose worker threads stopped (tantivy raises ValueError "An index writer was
    killed" after an I/O error, e.g. a full disk) makes rebuild raise StorageError, and the index
    keeps its content; opening an index whose files cannot be read for a disk reason is a
    StorageError, not a CorruptionError that advises deleting it."""
    ix = TextIndex(str(tmp_path / "t"))
    ix.upsert(["a"], ["garden"], lsn=1)

    class KilledWriter:
        def __init__(self, writer):
            self._writer = writer

        def add_document(self, document):
            raise ValueError("An error occurred in a thread: 'An index writer was killed.'")

        def __getattr__(self, name):
            return getattr(self._writer, name)

    ix._writer = KilledWriter(ix._writer)
    with pytest.raises(StorageError, match=r"text index .*: a write failed \(An error occurred in a thread: "
                                           r"'An index writer was killed.'\); the disk may be full"):
        ix.rebuild([("b", "tulip", None, None, None)], lsn=2)
    assert [key for key, _ in ix.search("garden")] == ["a"] and ix.search("tulip") == []
    assert ix.lsn == 1
    ix._writer = ix._writer._writer
    ix.close()

    def no_space(*args, **kwargs):
        raise ValueError("Failed to open file for write: 'No space left on device (os error 28)'")

    import tantivy

    monkeypatch.setattr(tantivy, "Index", no_space)
    with pytest.raises(StorageError, match=r"cannot open text index .*No space left on device \(os error 28\)"):
        TextIndex(str(tmp_path / "t"))


def test_files_of_a_commit_killed_before_it_published_are_removed_on_open(tmp_path):
    """A commit killed after it wrote a segment's deletes file but before meta.json named it
    leaves that file behind; the same deletes replayed after the reopen reach the same opstamp
    and so the same file name, which tantivy refuses to overwrite unless open removed it."""
    folder = tmp_path / "text"
    index = TextIndex(str(folder))
    index.upsert([f"k{i}" for i in range(50)], [f"garden word {i}" for i in range(50)], lsn=1)
    index.flush()
    index.close()
    published = {p.name: p.read_bytes() for p in folder.iterdir()}
    index = TextIndex(str(folder))
    index.delete([f"k{i}" for i in range(10)], lsn=2)
    index.flush()
    index.close()
    orphans = [p.name for p in folder.iterdir() if p.name.endswith(".del") and p.name not in published]
    assert orphans  # the deletes file of the second commit
    managed = (folder / ".managed.json").read_bytes()
    for p in folder.iterdir():  # back to the first commit, with the second's deletes file left over
        if p.name not in published and p.name not in orphans:
            p.unlink()
    for name, data in published.items():
        (folder / name).write_bytes(data)
    (folder / ".managed.json").write_bytes(managed)
    ours = json.loads((folder / "vecgraph-text.json").read_text())
    ours.pop("files", None)  # as a process killed while the index was open leaves it
    (folder / "vecgraph-text.json").write_text(json.dumps(ours))
    index = TextIndex(str(folder))
    assert index.lsn == 1 and index.count() == 50
    index.delete([f"k{i}" for i in range(10)], lsn=2)  # the replay: the same opstamp
    index.flush()
    assert index.count() == 40 and keys_of(index.search("garden", 100)) != []
    index.close()
