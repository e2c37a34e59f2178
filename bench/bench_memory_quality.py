"""Memory quality: does :class:`vecgraph.Memory` recall what users told it, in other words?

Data: ``bench/data/memory_dialogues.json``, written by hand (see its ``description``): ten
users (six in English, four in Chinese), three to four sessions each, 205 statements with a
kind, a session and the date they were said; 194 questions worded differently from the
statements they target. Users alternate between a ``dev`` and a ``test`` split: defaults are
chosen on dev, figures are reported on test.

Probes (every recall at the data's fixed ``now`` unless said otherwise):

1. **recall** (level 1): one statement asked in other words; hit = it is in the top 5.
   Target >= 95%.
2. **association** (level 2): a question whose answer needs two statements of different
   sessions; hit = both are in the top 10. Target >= 80%.
   Probes 1 and 2 run three times: the default channels (dense + bm25 + graph), BM25 only
   (``channels=("bm25",)``) and dense only (``channels=("dense",)``).
3. **update**: a statement remembered with ``supersedes=<the old one>``; hit = the current
   version is in the top 10 (so first of the two) and the old one is not; also checked: with
   ``include_superseded=True`` the old one is back in the top 10.
4. **expiry**: kinds with a TTL (``ttl_days`` in the data, passed to ``Memory.open``) and
   statements old enough to have expired at ``now``; hit = absent from the top 10 at ``now``
   and present in the top 10 with ``now`` one day before it expired. Afterwards
   ``mem.expire(now)`` must delete exactly the statements the data's dates say are expired.
5. **inference**: statements stored with ``mem.infer``; hit = absent from the top 10 by
   default, present with ``include_inferred=True``, and present by default after
   ``mem.confirm(id)``.
6. **erasure**: a second store in a temporary folder; ``mem.forget`` of the data's
   ``erase_users``; the receipt (``verified``: the folder's bytes were scanned for the user
   and their texts), recall for them returns nothing, the other users' level-1 results are the
   same before and after (and after closing and reopening the folder).

Every figure is printed as count and share, per probe, per language of the question (en / zh)
and per split, with recall's p50 latency, as markdown tables.

    python bench/bench_memory_quality.py                      # both splits
    python bench/bench_memory_quality.py --split dev --json out.json --show-failures
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before NumPy loads: one-thread latency, as the other benches

import argparse
import json
import platform
import re
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import vecgraph as vg
from vecgraph.tokenizer import tokenize

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "memory_dialogues.json")
PROBES = ("recall", "association", "update", "expiry", "inference")
CONFIGS = {"default": None, "bm25": ("bm25",), "dense": ("dense",)}  # None: recall's default channels
CONFIG_LABEL = {"default": "default (dense+bm25+graph)", "bm25": "bm25 only", "dense": "dense only"}
K_RECALL, K_WIDE, K_DIAG = 5, 10, 30
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_STATEMENT_ID = re.compile(r"(u\d+)-(s\d+)-\d{2}\Z")


# ------------------------------------------------------------------------------ data

def _time(value: str) -> datetime:
    t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t


def lang_of(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"


class DataError(ValueError):
    pass


def load(path: str) -> dict:
    """The data set, checked: every rule the probes rely on (see validate)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["now_dt"] = _time(data["now"])
    data["ttl"] = {kind: timedelta(days=days) for kind, days in data["ttl_days"].items()}
    statements: dict = {}
    questions: list = []
    for user in data["users"]:
        user["tenant"] = f"{user['id']}-{user['name']}"  # no tenant id is a prefix of another
        for s in user["statements"]:
            if s["id"] in statements:
                raise DataError(f"statement id {s['id']} twice")
            s["user"] = user["id"]
            s["at_dt"] = _time(s["at"])
            s.setdefault("source", "user")
            statements[s["id"]] = s
        for q in user["questions"]:
            q["user"] = user["id"]
            q["split"] = user["split"]
            q["lang"] = lang_of(q["text"])
            questions.append(q)
    data["statements"] = statements
    data["questions"] = questions
    superseded_by = {}
    for s in statements.values():
        if s.get("supersedes"):
            superseded_by[s["supersedes"]] = s["id"]
    data["superseded_by"] = superseded_by
    validate(data)
    return data


def expires_at(data: dict, s: dict) -> Optional[datetime]:
    ttl = data["ttl"].get(s["kind"])
    return None if ttl is None else s["at_dt"] + ttl


def expired(data: dict, s: dict, now: datetime) -> bool:
    end = expires_at(data, s)
    return end is not None and end <= now


def validate(data: dict) -> None:
    st, now = data["statements"], data["now_dt"]
    ids = set()
    if len(data["users"]) < 8:
        raise DataError("fewer than 8 users")
    for user in data["users"]:
        if user["split"] not in ("dev", "test"):
            raise DataError(f"user {user['id']}: split must be dev or test")
        sessions = {s["session"] for s in user["statements"]}
        if not 2 <= len(sessions) <= 4:
            raise DataError(f"user {user['id']}: {len(sessions)} sessions")
    for s in st.values():
        m = _STATEMENT_ID.match(s["id"])
        if not m or m.group(1) != s["user"] or s["session"] != f"{m.group(1)}-{m.group(2)}":
            raise DataError(f"statement id {s['id']} does not name its user and session")
        if s["source"] not in ("user", "model"):
            raise DataError(f"{s['id']}: source must be user or model")
        old_id = s.get("supersedes")
        if old_id:
            old = st.get(old_id)
            if old is None or old["user"] != s["user"] or old["at_dt"] > s["at_dt"]:
                raise DataError(f"{s['id']} supersedes {old_id}: not an earlier statement of the same user")
    superseded = data["superseded_by"]
    if len(superseded) != sum(1 for s in st.values() if s.get("supersedes")):
        raise DataError("a statement is superseded twice")

    def current_fact(sid: str, q: dict) -> dict:
        s = st.get(sid)
        if s is None or s["user"] != q["user"]:
            raise DataError(f"{q['id']}: {sid} is not a statement of {q['user']}")
        return s

    for q in data["questions"]:
        if q["id"] in ids:
            raise DataError(f"question id {q['id']} twice")
        ids.add(q["id"])
        probe = q["probe"]
        if probe not in PROBES:
            raise DataError(f"{q['id']}: unknown probe {probe}")
        if probe == "update":
            cur, old = current_fact(q["current"], q), current_fact(q["old"], q)
            if cur.get("supersedes") != old["id"] or cur["id"] in superseded:
                raise DataError(f"{q['id']}: {cur['id']} must be the current version superseding {old['id']}")
            if expired(data, cur, now) or expired(data, old, now):
                raise DataError(f"{q['id']}: an update pair must not be expired at now")
            continue
        targets = [current_fact(sid, q) for sid in q["expect"]]
        for s in targets:
            if probe in ("recall", "association"):
                if s["id"] in superseded or s["source"] != "user" or expired(data, s, now):
                    raise DataError(f"{q['id']}: {s['id']} is not a current, stated, unexpired memory")
            elif probe == "expiry":
                if not expired(data, s, now) or s["id"] in superseded or s["source"] != "user":
                    raise DataError(f"{q['id']}: {s['id']} is not an expired (current, stated) memory")
            elif probe == "inference":
                if s["source"] != "model" or expired(data, s, now) or s["id"] in superseded:
                    raise DataError(f"{q['id']}: {s['id']} is not an unexpired inference")
        if probe == "recall" and len(targets) != 1:
            raise DataError(f"{q['id']}: a level-1 question expects one statement")
        if probe == "association" and (len(targets) < 2 or len({s["session"] for s in targets}) < 2):
            raise DataError(f"{q['id']}: a level-2 question expects statements of two or more sessions")


# ------------------------------------------------------------------------------ the store

class Store:
    """A Memory holding the whole data set, with statement id <-> memory id maps."""

    def __init__(self, data: dict, path: Optional[str], embedder: Any) -> None:
        self.data = data
        self.embedder = embedder
        self.path = path
        started = time.perf_counter()
        self.mem = vg.Memory.open(path, embedder=embedder, ttl=data["ttl"])
        self.ids: dict = {}
        for s in sorted(data["statements"].values(), key=lambda s: (s["at_dt"], s["id"])):
            tenant = self.tenant(s["user"])
            kwargs = dict(kind=s["kind"], session=s["session"], at=s["at_dt"])
            if s.get("supersedes"):
                kwargs["supersedes"] = self.ids[s["supersedes"]]
            if s["source"] == "model":
                self.ids[s["id"]] = self.mem.infer(tenant, s["text"], **kwargs)
            else:
                self.ids[s["id"]] = self.mem.remember(tenant, s["text"], **kwargs)
        self.statement_of = {mid: sid for sid, mid in self.ids.items()}
        self.build_seconds = time.perf_counter() - started

    def tenant(self, user_id: str) -> str:
        return next(u["tenant"] for u in self.data["users"] if u["id"] == user_id)

    def reopen(self) -> None:
        self.mem.close()
        self.mem = vg.Memory.open(self.path, embedder=self.embedder)

    def ask(self, q: dict, k: int, *, config: str = "default", now: Any = None, times: Optional[list] = None,
            **options: Any) -> tuple:
        """(statement ids best first, hits) of one recall; its wall time appended to ``times``."""
        if CONFIGS[config] is not None:
            options["channels"] = CONFIGS[config]
        started = time.perf_counter_ns()
        hits = self.mem.recall(self.tenant(q["user"]), q["text"], k=k,
                               now=self.data["now_dt"] if now is None else now, **options)
        if times is not None:
            times.append((time.perf_counter_ns() - started) / 1e6)
        return [self.statement_of.get(h.id, h.id) for h in hits], hits


def _rank(ranked: list, sid: str) -> Optional[int]:
    return ranked.index(sid) + 1 if sid in ranked else None


# ------------------------------------------------------------------------------ probes

def diagnose(store: Store, q: dict, targets: list) -> dict:
    """Where each target ranks within the top 30 of each configuration, and its rank in each
    channel of the default fusion (for the failure analysis; not timed, not scored)."""
    out: dict = {}
    for config in CONFIGS:
        ranked, hits = store.ask(q, K_DIAG, config=config)
        out[config] = {sid: _rank(ranked, sid) for sid in targets}
        if config == "default":
            out["channel_ranks"] = {sid: (hits[ranked.index(sid)].ranks if sid in ranked else None)
                                    for sid in targets}
    return out


def probe_recall_association(store: Store, questions: list, times: dict) -> list:
    rows = []
    for q in questions:
        k = K_RECALL if q["probe"] == "recall" else K_WIDE
        row = {"id": q["id"], "user": q["user"], "split": q["split"], "lang": q["lang"], "probe": q["probe"],
               "text": q["text"], "expect": q["expect"], "k": k, "configs": {}}
        for config in CONFIGS:
            ranked, _ = store.ask(q, k, config=config, times=times.setdefault((q["probe"], config), []))
            found = [sid in ranked for sid in q["expect"]]
            row["configs"][config] = {"top": ranked, "hit": all(found), "any": any(found),
                                      "first": bool(ranked) and ranked[0] in q["expect"],
                                      "ranks": {sid: _rank(ranked, sid) for sid in q["expect"]}}
        row["diagnosis"] = diagnose(store, q, q["expect"])
        rows.append(row)
    return rows


def probe_update(store: Store, questions: list, times: dict) -> list:
    rows = []
    for q in questions:
        cur, old = q["current"], q["old"]
        ranked, _ = store.ask(q, K_WIDE, times=times.setdefault(("update", "default"), []))
        both, _ = store.ask(q, K_WIDE, include_superseded=True)
        rc, ro = _rank(both, cur), _rank(both, old)
        row = {"id": q["id"], "user": q["user"], "split": q["split"], "lang": q["lang"], "probe": "update",
               "text": q["text"], "current": cur, "old": old, "top": ranked, "top_with_superseded": both,
               "current_rank": _rank(ranked, cur), "old_hidden": old not in ranked,
               "old_back": old in both, "current_above_old": rc is not None and (ro is None or rc < ro)}
        row["hit"] = row["current_rank"] is not None and row["old_hidden"]
        if not row["hit"]:
            row["diagnosis"] = diagnose(store, q, [cur])
        rows.append(row)
    return rows


def probe_expiry(store: Store, questions: list, times: dict) -> list:
    rows = []
    for q in questions:
        sid = q["expect"][0]
        end = expires_at(store.data, store.data["statements"][sid])
        before = end - timedelta(days=1)
        at_now, _ = store.ask(q, K_WIDE, times=times.setdefault(("expiry", "default"), []))
        at_before, _ = store.ask(q, K_WIDE, now=before)
        row = {"id": q["id"], "user": q["user"], "split": q["split"], "lang": q["lang"], "probe": "expiry",
               "text": q["text"], "expect": q["expect"], "expired_at": end.isoformat(),
               "asked_before_at": before.isoformat(), "top": at_now, "top_before": at_before,
               "absent_now": sid not in at_now, "present_before": sid in at_before,
               "rank_before": _rank(at_before, sid)}
        row["hit"] = row["absent_now"] and row["present_before"]
        rows.append(row)
    return rows


def probe_inference(store: Store, questions: list, times: dict) -> list:
    """Hidden by default and shown with include_inferred, for every question first; then each
    target is confirmed and asked again (confirming changes what the others see, so it is last)."""
    rows = []
    for q in questions:
        sid = q["expect"][0]
        hidden, _ = store.ask(q, K_WIDE, times=times.setdefault(("inference", "default"), []))
        shown, _ = store.ask(q, K_WIDE, include_inferred=True)
        rows.append({"id": q["id"], "user": q["user"], "split": q["split"], "lang": q["lang"],
                     "probe": "inference", "text": q["text"], "expect": q["expect"], "top": hidden,
                     "top_inferred": shown, "hidden_by_default": sid not in hidden,
                     "shown_with_inferred": sid in shown, "rank_with_inferred": _rank(shown, sid)})
    for q, row in zip(questions, rows):
        store.mem.confirm(store.ids[q["expect"][0]])
    for q, row in zip(questions, rows):
        sid = q["expect"][0]
        confirmed, _ = store.ask(q, K_WIDE)
        row["top_confirmed"] = confirmed
        row["shown_after_confirm"] = sid in confirmed
        row["rank_after_confirm"] = _rank(confirmed, sid)
        row["hit"] = row["hidden_by_default"] and row["shown_with_inferred"] and row["shown_after_confirm"]
    return rows


def check_expire(store: Store) -> dict:
    """mem.expire(now) deletes exactly the statements whose kind's TTL ran out by now."""
    data = store.data
    expected = sorted(sid for sid, s in data["statements"].items() if expired(data, s, data["now_dt"]))
    gone = store.mem.expire(data["now_dt"])
    deleted = sorted(store.statement_of.get(m.id, m.id) for m in gone)
    return {"expected": len(expected), "deleted": len(deleted),
            "missing": sorted(set(expected) - set(deleted)),
            "unexpected": sorted(set(deleted) - set(expected)), "ok": expected == deleted}


def probe_erasure(data: dict, embedder: Any, questions: list) -> dict:
    """A folder store: forget the erase_users, check the receipt, their recall, the others' level 1."""
    erase = list(data["erase_users"])
    others = [q for q in questions if q["probe"] == "recall" and q["user"] not in erase]
    theirs = [q for q in questions if q["user"] in erase]
    folder = tempfile.mkdtemp(prefix="vecgraph-memory-bench-")
    out: dict = {"users": erase, "folder_store": True}
    try:
        store = Store(data, os.path.join(folder, "memory.vg"), embedder)
        out["build_seconds"] = round(store.build_seconds, 2)

        def level1() -> dict:
            return {q["id"]: store.ask(q, K_RECALL)[0] for q in others}

        def summary(after: dict) -> dict:
            hit = {q["id"]: (q["expect"][0] in before[q["id"]], q["expect"][0] in after[q["id"]])
                   for q in others}
            return {"hits": sum(now for _, now in hit.values()), "n": len(others),
                    "same_hits": sum(then == now for then, now in hit.values()),
                    "same_rankings": sum(after[q["id"]] == before[q["id"]] for q in others)}

        def leftovers() -> int:  # memories recall returns for the forgotten users, everything admitted
            return sum(len(store.ask(q, K_WIDE, include_inferred=True, include_superseded=True)[0])
                       for q in theirs)

        before = level1()
        out["before"] = {"hits": sum(q["expect"][0] in before[q["id"]] for q in others), "n": len(others)}
        out["their_hits_before"] = leftovers()
        receipts = []
        for user in erase:
            r = store.mem.forget(store.tenant(user))
            receipts.append({"user": user, "verified": r.verified, "found": [list(f) for f in r.found],
                             "memories": r.memories, "entities": r.entities, "cards": r.cards,
                             "nodes": r.nodes, "files_removed": len(r.files_removed),
                             "files_written": len(r.files_written), "seconds": round(r.seconds, 3)})
        out["receipts"] = receipts
        out["their_questions"] = len(theirs)
        out["their_hits_after"] = leftovers()
        out["after"] = summary(level1())
        store.reopen()
        out["their_hits_after_reopen"] = leftovers()
        out["after_reopen"] = summary(level1())
        out["users_listed_after_reopen"] = [u for u in erase if store.tenant(u) in store.mem.users()]
        needles = []
        for user in erase:
            needles.append(store.tenant(user))
            needles += [s["text"] for s in data["statements"].values() if s["user"] == user]
        out["rescan_after_reopen"] = [list(f) for f in vg.memory.scan_folder(store.path, needles)]
        store.mem.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------ figures

def cell(rows: list, test) -> tuple:
    n = len(rows)
    hits = sum(1 for r in rows if test(r))
    return hits, n


def fmt(hits: int, n: int) -> str:
    return "–" if n == 0 else f"{hits}/{n} ({100.0 * hits / n:.1f}%)"


def groups(splits: list) -> list:
    out = []
    for split in splits:
        out += [(f"{split} en", split, "en"), (f"{split} zh", split, "zh"), (split, split, None)]
    if len(splits) > 1:
        out.append(("all", None, None))
    return out


def select(rows: list, split: Optional[str], lang: Optional[str]) -> list:
    return [r for r in rows if (split is None or r["split"] == split) and (lang is None or r["lang"] == lang)]


def measures(results: dict) -> list:
    """(probe, measure, channels, rows, test, target) of every figure."""
    ra, up, ex, inf = results["recall"], results["update"], results["expiry"], results["inference"]
    l1 = [r for r in ra if r["probe"] == "recall"]
    l2 = [r for r in ra if r["probe"] == "association"]
    out = []
    for config in CONFIGS:
        out.append(("1 recall", "expected in top 5", CONFIG_LABEL[config], l1,
                    lambda r, c=config: r["configs"][c]["hit"], ">= 95%" if config == "default" else ""))
    out.append(("1 recall", "expected ranked first", CONFIG_LABEL["default"], l1,
                lambda r: r["configs"]["default"]["first"], ""))
    for config in CONFIGS:
        out.append(("2 association", "both in top 10", CONFIG_LABEL[config], l2,
                    lambda r, c=config: r["configs"][c]["hit"], ">= 80%" if config == "default" else ""))
    out.append(("2 association", "at least one in top 10", CONFIG_LABEL["default"], l2,
                lambda r: r["configs"]["default"]["any"], ""))
    out += [
        ("3 update", "current in top 10, old not", "default", up, lambda r: r["hit"], ""),
        ("3 update", "old back with include_superseded (top 10)", "default", up, lambda r: r["old_back"], ""),
        ("3 update", "current above old with include_superseded", "default", up,
         lambda r: r["current_above_old"], ""),
        ("4 expiry", "absent at now and present before expiry", "default", ex, lambda r: r["hit"], ""),
        ("4 expiry", "absent from top 10 at now", "default", ex, lambda r: r["absent_now"], ""),
        ("4 expiry", "in top 10 one day before it expired", "default", ex,
         lambda r: r["present_before"], ""),
        ("5 inference", "all three below", "default", inf, lambda r: r["hit"], ""),
        ("5 inference", "hidden by default (top 10)", "default", inf, lambda r: r["hidden_by_default"], ""),
        ("5 inference", "in top 10 with include_inferred", "default", inf,
         lambda r: r["shown_with_inferred"], ""),
        ("5 inference", "in top 10 by default after confirm", "default", inf,
         lambda r: r["shown_after_confirm"], ""),
    ]
    return out


def quality_table(results: dict, splits: list) -> tuple:
    cols = groups(splits)
    lines = ["| probe | measure | channels | " + " | ".join(c[0] for c in cols) + " | target |",
             "|---|---|---|" + "---:|" * len(cols) + "---|"]
    figures = []
    for probe, measure, channels, rows, test, target in measures(results):
        cells = []
        entry = {"probe": probe, "measure": measure, "channels": channels, "target": target}
        for label, split, lang in cols:
            hits, n = cell(select(rows, split, lang), test)
            cells.append(fmt(hits, n))
            entry[label] = {"hits": hits, "n": n, "share": hits / n if n else None}
        figures.append(entry)
        lines.append(f"| {probe} | {measure} | {channels} | " + " | ".join(cells) + f" | {target} |")
    return "\n".join(lines), figures


def p(values: list, q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def latency_table(times: dict) -> tuple:
    lines = ["| recall calls | channels | k | calls | p50 ms | p90 ms | max ms |",
             "|---|---|---:|---:|---:|---:|---:|"]
    out = []
    order = {key: (PROBES.index(key[0]), list(CONFIGS).index(key[1])) for key in times}
    for (probe, config), values in sorted(times.items(), key=lambda kv: order[kv[0]]):
        k = K_RECALL if probe == "recall" else K_WIDE
        entry = {"probe": probe, "channels": config, "k": k, "calls": len(values), "p50_ms": p(values, 0.5),
                 "p90_ms": p(values, 0.9), "max_ms": max(values)}
        out.append(entry)
        lines.append(f"| {probe} | {CONFIG_LABEL[config]} | {k} | {len(values)} | {entry['p50_ms']:.2f} | "
                     f"{entry['p90_ms']:.2f} | {entry['max_ms']:.2f} |")
    every = [v for (probe, config), values in times.items() if config == "default" for v in values]
    lines.append(f"| every scored recall | {CONFIG_LABEL['default']} | 5-10 | {len(every)} | "
                 f"{p(every, 0.5):.2f} | {p(every, 0.9):.2f} | {max(every):.2f} |")
    out.append({"probe": "all", "channels": "default", "calls": len(every), "p50_ms": p(every, 0.5),
                "p90_ms": p(every, 0.9)})
    return "\n".join(lines), out


def data_table(data: dict, questions: list, splits: list) -> str:
    st = data["statements"]
    lines = ["| split | users (en / zh) | statements (en / zh text) | superseded | expired at now | "
             "inferred | recall | association | update | expiry | inference | questions en / zh | "
             "no content word shared |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for split in splits:
        users = [u for u in data["users"] if u["split"] == split]
        ss = [s for s in st.values() if any(s["user"] == u["id"] for u in users)]
        qs = [q for q in questions if q["split"] == split]
        counts = [sum(q["probe"] == probe for q in qs) for probe in PROBES]
        disjoint = 0
        for q in qs:
            targets = [q["current"]] if q["probe"] == "update" else q["expect"]
            words = set().union(*(set(tokenize(st[t]["text"])) for t in targets))
            disjoint += not (set(tokenize(q["text"])) & words)
        user_en = sum(u["lang"] == "en" for u in users)
        text_en = sum(lang_of(s["text"]) == "en" for s in ss)
        question_en = sum(q["lang"] == "en" for q in qs)
        cells = [split, f"{len(users)} ({user_en} / {len(users) - user_en})",
                 f"{len(ss)} ({text_en} / {len(ss) - text_en})",
                 sum(s["id"] in data["superseded_by"] for s in ss),
                 sum(expired(data, s, data["now_dt"]) for s in ss),
                 sum(s["source"] == "model" for s in ss), *counts, f"{question_en} / {len(qs) - question_en}",
                 fmt(disjoint, len(qs))]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def failures(results: dict, data: dict) -> str:
    st = data["statements"]
    out = []
    for r in results["recall"]:
        if r["configs"]["default"]["hit"]:
            continue
        d = r["diagnosis"]
        out.append(f"- {r['id']} ({r['split']}, {r['lang']}, {r['probe']}) {r['text']!r}")
        for sid in r["expect"]:
            out.append(f"    expects {sid}: {st[sid]['text']!r}; top-30 rank default {d['default'][sid]}, "
                       f"bm25 {d['bm25'][sid]}, dense {d['dense'][sid]}; "
                       f"channel ranks {d['channel_ranks'][sid]}")
        top = r["configs"]["default"]["top"]
        out.append("    got: " + "; ".join(f"{sid} {st[sid]['text'][:50]!r}" if sid in st else sid
                                           for sid in top))
    for name in ("update", "expiry", "inference"):
        for r in results[name]:
            if not r["hit"]:
                flags = {k: v for k, v in r.items() if isinstance(v, bool) and k != "hit"}
                out.append(f"- {r['id']} ({r['split']}, {r['lang']}, {name}) {r['text']!r}: {flags}")
                if "diagnosis" in r:
                    out.append(f"    diagnosis: {r['diagnosis']}")
    return "\n".join(out) or "(none)"


def erasure_table(e: dict) -> str:
    lines = ["| check | result |", "|---|---|"]
    for r in e["receipts"]:
        lines.append(f"| forget({r['user']}): receipt.verified | {r['verified']} (found {len(r['found'])}; "
                     f"{r['memories']} memories, {r['entities']} entities, {r['cards']} cards, "
                     f"{r['nodes']} nodes; {r['files_removed']} files removed, {r['files_written']} written; "
                     f"{r['seconds']:.2f} s) |")

    def level1(name: str, label: str) -> str:
        x = e[name]
        return (f"| other users' level 1 {label} | {fmt(x['hits'], x['n'])}; same hit/miss "
                f"{x['same_hits']}/{x['n']}, identical top 5 {x['same_rankings']}/{x['n']} |")

    lines += [
        f"| memories recall returns for the forgotten users' {e['their_questions']} questions (k=10, "
        f"inferred and superseded included): before / after / after reopen | {e['their_hits_before']} / "
        f"{e['their_hits_after']} / {e['their_hits_after_reopen']} |",
        f"| other users' level 1 (top 5) before | {fmt(e['before']['hits'], e['before']['n'])} |",
        level1("after", "after forget"),
        level1("after_reopen", "after close + reopen"),
        f"| forgotten users in mem.users() after reopen | {e['users_listed_after_reopen'] or 'none'} |",
        f"| byte scan of the folder after reopen (tenant ids and texts) | "
        f"{len(e['rescan_after_reopen'])} found |",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ main

def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all",
                        help="which users' questions are scored (the whole data set is always stored)")
    parser.add_argument("--data", default=DATA,
                        help="the dialogues (default: bench/data/memory_dialogues.json)")
    parser.add_argument("--json", help="write every figure and every question's results here")
    parser.add_argument("--show-failures", action="store_true",
                        help="list the questions that missed, with ranks")
    parser.add_argument("--no-erasure", action="store_true", help="skip the folder store and forget()")
    parser.add_argument("--embedder", default="wordllama",
                        help="embedder spec for vecgraph.embedders.load (default wordllama; or module:attribute)")
    args = parser.parse_args(argv)

    data = load(args.data)
    splits = ["dev", "test"] if args.split == "all" else [args.split]
    questions = [q for q in data["questions"] if q["split"] in splits]
    by_probe = {probe: [q for q in questions if q["probe"] == probe] for probe in PROBES}

    embedder = vg.embedders.load(args.embedder)
    store = Store(data, None, embedder)
    warm = [q for q in data["questions"] if q["probe"] == "recall"]
    for q in [next(q for q in warm if q["lang"] == "en"), next(q for q in warm if q["lang"] == "zh")] * 3:
        for config in CONFIGS:
            store.ask(q, K_RECALL, config=config)  # loads jieba, warms the caches; not timed

    times: dict = {}
    results = {"recall": probe_recall_association(store, by_probe["recall"] + by_probe["association"],
                                                  times),
               "update": probe_update(store, by_probe["update"], times),
               "expiry": probe_expiry(store, by_probe["expiry"], times),
               "inference": probe_inference(store, by_probe["inference"], times)}
    expire = check_expire(store)
    store.mem.close()
    erasure = None if args.no_erasure else probe_erasure(data, embedder, questions)

    print(f"# Memory quality ({args.split}; data {os.path.relpath(args.data)}, now {data['now']}, "
          f"TTL days {data['ttl_days']}, embedder {embedder.name})\n")
    print(data_table(data, data["questions"], splits) + "\n")
    table, figures = quality_table(results, splits)
    print(table + "\n")
    verdict = ("exactly those" if expire["ok"] else
               f"MISMATCH: missing {expire['missing']}, unexpected {expire['unexpected']}")
    print(f"mem.expire(now): deleted {expire['deleted']} of the {expire['expected']} statements whose TTL "
          f"ran out by now ({verdict}).\n")
    if erasure is not None:
        scope = "all questions" if args.split == "all" else f"the {args.split} questions"
        print(f"Erasure ({', '.join(erasure['users'])} forgotten, one after the other, in a folder store "
              f"of all users; the other users' level 1 on {scope}):\n")
        print(erasure_table(erasure) + "\n")
    lat, latency = latency_table(times)
    print("Recall latency (in-memory store of all 10 users, one thread, query embedding included):\n")
    print(lat + "\n")
    if args.show_failures:
        print("Misses:\n")
        print(failures(results, data) + "\n")
    print(f"Python {platform.python_version()}, {platform.machine()}, vecgraph {vg.__version__}, "
          f"build of the in-memory store {store.build_seconds:.1f} s")
    if args.json:
        out = {"split": args.split, "now": data["now"], "ttl_days": data["ttl_days"],
               "embedder": embedder.name, "figures": figures, "expire": expire, "erasure": erasure,
               "latency": latency, "questions": results, "python": platform.python_version(),
               "machine": platform.machine(),
               "written": datetime.now(timezone.utc).isoformat()}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
