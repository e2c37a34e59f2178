"""The delta of a :class:`vecgraph.text.TextIndex`: the documents written since its last
publish, searched beside the published index without a commit (a commit writes and fsyncs
segment files: 5-10 ms), and scored as tantivy will score them once published.

tantivy's Okapi BM25 (k1 = 1.2, b = 0.75) reads N (every document the index was given,
deleted ones included until their segment merges), the number of documents holding each term
(likewise), and the average field length; :func:`delta_rows` takes the published index's
figures (N and the average from tantivy's own explanation of a score) plus the delta's, and
does tantivy's arithmetic in float32 in its order, so a delta document's score is the one it
gets once published (lengths past 40 terms excepted: tantivy stores those approximately). The
published documents keep the scores of the published state until the next publish.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np

from .text_checks import _decode_doc_key
from .text_files import _call
from .text_pages import _key_order, _many_flags, _one_flag

Key = Union[str, int]

_K1, _B = 1.2, 0.75  # tantivy's BM25 parameters


def delta_rows(index: Any, searcher: Any, added: list, written: dict, terms: list, kind: str, k: int,
                tenants: Optional[list], labels: Optional[list], ts_min: Optional[int], ts_max: Optional[int],
                admitted: Any, exclude: Optional[Callable[[Key], bool]],
                exclude_many: Optional[Callable[[list], Sequence[bool]]], statistics: Optional[tuple] = None) -> list:
    """The best ``k`` (key, score) rows of the delta's documents of ``kind`` that match
    ``terms`` and pass the filters, scored by BM25 as tantivy scores them once published:
    N and the document frequencies of the published index plus the delta's documents, the
    average length likewise (read from tantivy's own explanation of a score)."""
    wanted = set(terms)
    found = []
    for doc in written.values():
        if doc is None or wanted.isdisjoint(doc.terms):
            continue
        if (tenants is not None and doc.tenant not in tenants) or (labels is not None and doc.label not in labels):
            continue
        if (ts_min is not None and doc.ts < ts_min) or (ts_max is not None and doc.ts > ts_max):
            continue
        if admitted is not True and (type(doc.key), doc.key) not in admitted:
            continue
        found.append(doc)
    if not found:
        return []
    documents, average = bm25_stats(index, searcher, kind, terms)
    of_kind = [doc for doc_kind, doc in added if doc_kind == kind]
    new_tokens = sum(doc.length for doc in of_kind)
    total = documents + len(added)
    # tantivy's arithmetic, in float32 and in its order (Bm25Weight): idf = ln(1 + (N - n +
    # 0.5) / (n + 0.5)), weight = idf * (1 + k1), norm = k1 * (1 - b + b * dl / avgdl),
    # score = sum over the query's terms of weight * tf / (tf + norm).
    f32 = np.float32
    if average is None:  # no published document holds a query term: the delta's own average
        average = f32(new_tokens) / f32(max(1, len(of_kind)))
    else:
        average = f32(round(float(average) * documents) + new_tokens) / f32(total)
    weight = {}
    if statistics is not None:  # the corpus figures the caller gives (see idf_boosts)
        total = int(statistics[0])
    for term in terms:
        if statistics is not None:
            df = int(statistics[1].get(term, 0))
        else:
            df = int(searcher.doc_freq(kind, term)) + sum(term in doc.terms for doc in of_kind)
        idf = f32(math.log(float(f32(1.0) + (f32(total - df) + f32(0.5)) / (f32(df) + f32(0.5)))))
        weight[term] = idf * f32(1.0 + _K1)
    rows = []
    for doc in found:
        norm = f32(_K1) * (f32(1.0 - _B) + f32(_B) * f32(doc.length) / average)
        score = f32(0.0)
        for term in terms:
            tf = doc.terms.get(term)
            if tf:
                score = score + weight[term] * (f32(tf) / (f32(tf) + norm))
        rows.append((doc.key, float(score)))
    rows.sort(key=lambda row: (-row[1], _key_order(row[0])))
    if exclude_many is not None:
        flags = _many_flags(exclude_many, [key for key, _ in rows])
        rows = [row for row, drop in zip(rows, flags) if not drop]
    if exclude is not None:
        kept = []
        for row in rows:
            if not _one_flag(exclude, row[0]):
                kept.append(row)
                if len(kept) == k:
                    break
        rows = kept
    return rows[:k]

def idf_boosts(index: Any, searcher: Any, kind: str, terms: list, statistics: Any) -> dict:
    """{term: boost} that turns the published index's idf of each term into the idf of the
    corpus figures ``statistics`` = ``(N, {term: n})``: idf(N, n) / idf(N_index, n_index), with
    idf = ln(1 + (N - n + 0.5) / (n + 0.5)) as tantivy computes it. tantivy multiplies a boosted
    term's score by its boost, so a document scores ``sum idf_corpus * (1 + k1) * tf / (tf +
    norm)``: the BM25 of the whole corpus, with the index's own length normalisation (the
    distributed frequency statistics of Elasticsearch's dfs_query_then_fetch). Terms no
    published document holds take no boost (they score nothing there).

    Raises:
        TypeError / InvalidArgumentError: ``statistics`` not an (int >= 0, {str: int >= 0}) pair.
    """
    from .errors import InvalidArgumentError

    if not (isinstance(statistics, tuple) and len(statistics) == 2 and isinstance(statistics[1], dict)):
        raise TypeError(f"statistics must be a (N, {{term: n}}) tuple, got {type(statistics).__name__}")
    total, frequencies = statistics
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        raise InvalidArgumentError(f"statistics' N must be an int >= 0, got {total!r}")
    for term, n in frequencies.items():
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n:
            raise InvalidArgumentError(f"statistics' n of {term!r} must be an int >= 0, got {n!r}")
    documents, _ = bm25_stats(index, searcher, kind, terms)
    f32 = np.float32

    def idf(count: int, df: int) -> Any:
        df = min(df, count)
        return f32(math.log(float(f32(1.0) + (f32(count - df) + f32(0.5)) / (f32(df) + f32(0.5)))))

    boosts = {}
    for term in terms:
        here = int(searcher.doc_freq(kind, term))
        if here:
            boosts[term] = float(idf(total, int(frequencies.get(term, 0))) / idf(documents, here))
    return boosts


def bm25_stats(index: Any, searcher: Any, kind: str, terms: list) -> tuple:
    """(N, average length of ``kind``'s field) as tantivy's BM25 reads them from the
    published index, or (num_docs, None) when no published document holds a term of
    ``terms``; cached per published state."""
    cached, table = index._stats
    if cached is searcher and kind in table:
        return table[kind]
    Query = index._tantivy.Query
    for term in terms:
        if int(searcher.doc_freq(kind, term)) == 0:
            continue
        query = Query.term_query(index._schema, kind, term, index_option="freq")
        hits = _call(lambda: searcher.search(query, 1, count=False).hits, index._where(), "search")
        if not hits:
            continue
        explained = json.loads(query.explain(searcher, hits[0][1]).to_json())
        values = _explained_values(explained)
        if "N" in values and "avgdl" in values:
            stats = (int(values["N"]), float(values["avgdl"]))
            index._stats = (searcher, {**(table if cached is searcher else {}), kind: stats})
            return stats
    return int(searcher.num_docs), None


class _DeltaDoc(NamedTuple):
    """A document written since the last publish: its key, term counts and filter fields."""

    key: Key
    terms: dict
    length: int
    tenant: str
    label: str
    ts: int


def _marker(kind: str, doc_key: str) -> tuple:
    key = _decode_doc_key(doc_key)
    return (kind, type(key), key)


def _delta_doc(doc_key: str, stream: str, tenant: str, label: str, ts: int) -> _DeltaDoc:
    tokens = stream.split(" ")
    counts: dict = {}
    for token in tokens:
        counts[token] = counts.get(token, 0) + 1
    return _DeltaDoc(_decode_doc_key(doc_key), counts, len(tokens), tenant, label, ts)


def _explained_values(node: Any, out: Optional[dict] = None) -> dict:
    """{"N": .., "avgdl": ..} from a tantivy score explanation (JSON)."""
    out = {} if out is None else out
    if isinstance(node, dict):
        description = str(node.get("description", ""))
        if description.startswith("N,"):
            out["N"] = node.get("value")
        elif description.startswith("avgdl"):
            out["avgdl"] = node.get("value")
        for child in node.get("details", []) or []:
            _explained_values(child, out)
    return out
