"""Entities of a knowledge base: the offline extractor and entity resolution.

- :class:`RuleExtractor` is the default ``extractor`` hook of
  :class:`vecgraph.kb.KnowledgeBase`: it needs no model. It proposes the names a chunk
  spells like names: identifiers (``apt-get``, ``sources.list``, ``/etc/fstab``, ``libc6``),
  acronyms (``FSF``, ``DFSG``), CamelCase words and runs of capitalised words that do not
  merely start a sentence ("Debian Free Software Guidelines"). The knowledge base keeps a
  proposed name only when at least ``min_mentions`` chunks name it (a name seen once is
  mostly noise), and it links every chunk to every known entity whose name or alias the chunk
  contains (the engine's entity matcher, :class:`vecgraph.entities.EntityIndex`), so a name
  extracted from one document links the chunks of every other that mention it, however they
  spell its case.
- :class:`EntityResolver` decides which entity a name is: the same normalised name
  (:func:`vecgraph.entities.normalize_name`: case, ``-``/``_`` and spacing), one of an
  entity's aliases, or a fuzzy match (``rapidfuzz``'s ``fuzz.ratio`` at or above
  ``fuzzy_threshold``, between names of at least ``fuzzy_min_chars`` characters written as
  words of letters only, with the same first character: "Kubernets cluster" is "Kubernetes
  cluster", while "/etc/gshadow" and "/etc/shadow", "apt-cacher" and "apt-cache", or "Debian
  11" and "Debian 12" stay apart); never across tenants. Every merge is logged (:class:`Merge`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..entities import normalize_name
from ..errors import InvalidArgumentError, _got
from .hooks import Entity, Extraction

__all__ = ["EntityResolver", "Merge", "RuleExtractor", "entity_key"]

_IDENTIFIER = re.compile(
    r"(?<![\w/.-])(?:/[\w.+-]+){2,}/?|(?<![\w-])[A-Za-z][\w+]*(?:[-_.:][\w+]+)+(?![\w-])"
)
_ACRONYM = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,9}s?(?![\w-])")
_CAMEL = re.compile(r"(?<![\w-])[A-Z]?[a-z]+[A-Z][A-Za-z0-9]*(?![\w-])")
_CAPITALISED = re.compile(
    r"(?<![\w-])[A-Z][a-z0-9]+(?:[ \t]+(?:of|for|and|the|de|on)?[ \t]*[A-Z][a-z0-9]+)*(?![\w-])"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*[-*•]?\s*|[(\[\"'“‘]\s*)$")
_DIGITS = re.compile(r"\d+")
_COMMON = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "may", "more", "most", "no", "not", "of", "on", "one", "or", "our", "she", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "use", "used", "using", "was", "we", "were", "what", "when", "where", "which", "while", "who", "why", "will", "with", "would", "you", "your", "also", "all", "any", "each", "every", "other", "many", "much", "only", "see", "note", "however", "example", "examples", "section", "chapter", "page", "figure", "table", "first", "second", "new", "see", "also", "yes", "e.g", "i.e", "etc", "vs", "please", "tip", "warning", "caution", "important"]
)
_PLAIN = re.compile(
    r"[^\W\d_]+(?: [^\W\d_]+)*\Z"
)  # words of letters: paths, versions, files never fuzzy-merge
_WORD = re.compile(r"[^\W\d_]+")


def _entity_like(name: str) -> bool:
    norm = normalize_name(name)
    if len(norm) < 2 or norm in _COMMON or norm.isdigit():
        return False
    return sum(ch.isalpha() for ch in norm) >= 2


class RuleExtractor:
    """The offline ``extractor`` hook: names spelled like names, no model (see the module).

    Args:
        min_mentions: how many chunks must propose a name before the knowledge base makes it
            an entity (int >= 1; default 2).
        max_per_chunk: at most this many names per chunk, the most frequent in it first
            (int >= 1; default 24).
        capitalised: propose runs of capitalised words (default True).

    ``__call__(text: str) -> Extraction`` (entities only; ``type`` is "identifier",
    "acronym", "camelcase" or "phrase"; no relations: chunks that mention two entities link
    them through the graph, which is what the communities and the walks read).
    """

    name = "rules"

    def __init__(self, *, min_mentions: int = 2, max_per_chunk: int = 24, capitalised: bool = True) -> None:
        for label, value in (("min_mentions", min_mentions), ("max_per_chunk", max_per_chunk)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{label} must be an int, got {_got(value)}")
            if value < 1:
                raise InvalidArgumentError(f"{label} must be >= 1, got {value}")
        self.min_mentions = min_mentions
        self.max_per_chunk = max_per_chunk
        self.capitalised = bool(capitalised)

    def __repr__(self) -> str:
        return f"RuleExtractor(min_mentions={self.min_mentions}, max_per_chunk={self.max_per_chunk})"

    def __call__(self, text: str) -> Extraction:
        counts: dict = {}
        order: list = []

        def propose(name: str, kind: str) -> None:
            name = name.strip(" .:")
            if not _entity_like(name):
                return
            norm = normalize_name(name)
            if norm not in counts:
                counts[norm] = [0, name, kind]
                order.append(norm)
            counts[norm][0] += 1

        for m in _IDENTIFIER.finditer(text):
            propose(m.group(), "identifier")
        for m in _ACRONYM.finditer(text):
            propose(m.group(), "acronym")
        for m in _CAMEL.finditer(text):
            propose(m.group(), "camelcase")
        if self.capitalised:
            for m in _CAPITALISED.finditer(text):
                phrase = m.group()
                words = phrase.split()
                if len(words) == 1 and _SENTENCE_START.search(text, max(0, m.start() - 12), m.start()):
                    continue  # one capitalised word that starts a sentence or an item: an ordinary word
                if len(words) > 1 and (words[0].casefold() in _COMMON or words[0].islower()):
                    while words and (words[0].casefold() in _COMMON or words[0].islower()):
                        words = words[1:]  # "See the Debian Wiki" -> "Debian Wiki"
                    if not words:
                        continue
                    phrase = " ".join(words)
                propose(phrase, "phrase")
        ranked = sorted(order, key=lambda n: (-counts[n][0], order.index(n)))[: self.max_per_chunk]
        keep = set(ranked)
        return Extraction(entities=tuple(Entity(counts[n][1], counts[n][2]) for n in order if n in keep))

    def select(self, proposed: dict, texts: list) -> set:
        """The proposed names kept as entities, judged over a whole batch: ``proposed`` maps a
        normalised name to ``(chunks proposing it, name as written, type)``, ``texts`` are the
        batch's chunk texts. A name is kept when ``min_mentions`` chunks propose it; a single
        capitalised word (or an all-capitals word of 5 letters or more) only when it is written
        so at least as often as in lower case in the batch, so that "Options" or "NAME" (mostly
        "options", "name") do not become entities while "Linux" does (the usual proper-noun test
        of keyphrase extraction, e.g. YAKE's casing feature: Campos et al., Information
        Sciences 2020)."""
        keep = {norm for norm, (count, _, _) in proposed.items() if count >= self.min_mentions}
        words = {
            norm
            for norm in keep
            if proposed[norm][2] in ("phrase", "acronym")
            and " " not in norm
            and (proposed[norm][2] == "phrase" or len(norm) >= 5)
        }
        if not words:
            return keep
        written: dict = {norm: [0, 0] for norm in words}  # [as proposed, lower case]
        for text in texts:
            for m in _WORD.finditer(text):
                token = m.group()
                slot = written.get(token.casefold())
                if slot is not None:
                    slot[0 if token != token.casefold() else 1] += 1
        return {norm for norm in keep if norm not in written or written[norm][0] >= written[norm][1]}


def entity_key(tenant: str, name: str) -> str:
    """The key of the entity node whose canonical name is ``name`` (normalised) in ``tenant``:
    ``entity:<len(tenant)>:<tenant>:<normalised name>`` (keys of two tenants never meet)."""
    return f"entity:{len(tenant)}:{tenant}:{normalize_name(name)}"


@dataclass(frozen=True)
class Merge:
    """One name resolved into an existing entity: ``name`` (as written), ``into`` (the entity's
    key), ``reason`` ("alias": one of its names after normalisation; "fuzzy": rapidfuzz ratio
    ``score`` in 0-100), and the ``tenant``."""

    name: str
    into: str
    reason: str
    score: float
    tenant: str

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "into": self.into,
            "reason": self.reason,
            "score": self.score,
            "tenant": self.tenant,
        }


def _plain(name: str) -> bool:
    """Whether ``name`` is words of letters only (no path, file, version or joined identifier)."""
    return bool(_PLAIN.match(" ".join(name.split())))


def _digits(norm: str) -> tuple:
    return tuple(_DIGITS.findall(norm))


class EntityResolver:
    """Which entity a name is, per tenant (see the module).

    Args:
        fuzzy_threshold: rapidfuzz ``fuzz.ratio`` (0-100) at or above which two names are one
            entity (default 94; None turns fuzzy matching off).
        fuzzy_min_chars: names shorter than this (normalised) merge only by normalisation and
            aliases (default 8).

    Raises:
        ImportError: rapidfuzz is not installed (``pip install "vecgraph[kb]"``) and
            ``fuzzy_threshold`` is set.
    """

    def __init__(self, *, fuzzy_threshold: float | None = 94.0, fuzzy_min_chars: int = 8) -> None:
        if fuzzy_threshold is not None:
            if isinstance(fuzzy_threshold, bool) or not isinstance(fuzzy_threshold, (int, float)):
                raise TypeError(f"fuzzy_threshold must be a number or None, got {_got(fuzzy_threshold)}")
            if not 0 < fuzzy_threshold <= 100:
                raise InvalidArgumentError(f"fuzzy_threshold must be in (0, 100], got {fuzzy_threshold}")
            import rapidfuzz  # noqa: F401  (fail at construction, not in the middle of an ingest)
        self.fuzzy_threshold = fuzzy_threshold
        self.fuzzy_min_chars = fuzzy_min_chars
        self._names: dict = {}  # tenant -> {normalised name: key}
        self._buckets: dict = {}  # tenant -> {(first char, digits): [normalised names]}

    def add(self, tenant: str, key: str, names: Iterable[str]) -> None:
        """Records ``names`` (canonical name and aliases) as names of entity ``key``."""
        table = self._names.setdefault(tenant, {})
        buckets = self._buckets.setdefault(tenant, {})
        for name in names:
            norm = normalize_name(name)
            if norm and norm not in table:
                table[norm] = key
                if _plain(name):
                    buckets.setdefault((norm[0], _digits(norm)), []).append(norm)

    def resolve(self, tenant: str, name: str) -> tuple[str | None, Merge | None]:
        """``(key, merge)``: the entity ``name`` is in ``tenant`` (None: a new one) and, when it
        is a known entity under another spelling, the :class:`Merge` to log."""
        norm = normalize_name(name)
        table = self._names.get(tenant, {})
        key = table.get(norm)
        if key is not None:
            canonical = key.split(":", 3)[3] if key.startswith("entity:") else None
            merge = None if canonical == norm else Merge(name, key, "alias", 100.0, tenant)
            return key, merge
        if self.fuzzy_threshold is None or len(norm) < self.fuzzy_min_chars or not _plain(name):
            return None, None
        from rapidfuzz import fuzz, process

        bucket = self._buckets.get(tenant, {}).get((norm[0], _digits(norm)), [])
        if not bucket:
            return None, None
        found = process.extractOne(norm, bucket, scorer=fuzz.ratio, score_cutoff=self.fuzzy_threshold)
        if found is None:
            return None, None
        match, score = found[0], float(found[1])
        if len(match) < self.fuzzy_min_chars:
            return None, None
        return table[match], Merge(name, table[match], "fuzzy", round(score, 2), tenant)

    def forget(self, keys: Iterable[str]) -> None:
        """Drops every name of the entities ``keys`` (deleted), in every tenant."""
        gone = set(keys)
        for tenant, table in self._names.items():
            dropped = {norm for norm, key in table.items() if key in gone}
            for norm in dropped:
                del table[norm]
            for bucket in self._buckets.get(tenant, {}).values():
                bucket[:] = [norm for norm in bucket if norm not in dropped]

    def known(self, tenant: str) -> dict:
        """``{normalised name: key}`` of ``tenant``."""
        return dict(self._names.get(tenant, {}))


def stable_hash(text: str, digest_size: int = 8) -> str:
    """BLAKE2b hex digest of ``text`` (UTF-8)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=digest_size).hexdigest()


def merged_props(props: dict | None, merges: list) -> dict:
    """``props`` with ``merges`` (dicts) appended to its ``merged`` list."""
    out: dict[str, Any] = dict(props or {})
    out["merged"] = list(out.get("merged", [])) + merges
    return out
