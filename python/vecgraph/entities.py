"""Entity names: which nodes a query text names, and how much each name says.

A node's names are its str key and its aliases (:meth:`vecgraph.Graph.add_aliases`). The
:class:`EntityIndex` finds them in a text (longest match, token-aligned, after
:func:`normalize_name`); :func:`name_specificity` weighs each name by its idf in the graph's
texts, and :func:`firing_names` keeps a name that is a common word of the corpus from firing.
:func:`entity_scores` gives the entity channel of :meth:`vecgraph.Graph.hybrid_search` its
scores.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Sequence

from .arguments import Key
from .errors import InvalidArgumentError, _got

if TYPE_CHECKING:  # the class these functions are methods of (graph.py imports this module)
    from .graph import Graph
from .text_checks import _decode_key, _encode_key

__all__ = ["ALIAS_SEPARATOR", "EntityIndex", "Mention", "normalize_name", "name_terms", "name_specificity",
           "firing_names", "entity_scores"]

ALIAS_SEPARATOR = "\x1f"
# Name matching: a CJK character is a token of its own (no spaces between words); otherwise a
# run of letters and digits, joined by - _ . ' inside (so "A7-Pro" and "v2.0" stay whole) and
# ending in any + or # ("C++", "C#" are not "C").
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+(?:[-_.'][^\W_{_CJK}]+)*[+#]*")
MAX_NAME_TOKENS = 32
_JOINERS = re.compile(r"[-_]")


def _stopwords() -> frozenset:
    from .tokenizer import STOPWORDS

    return STOPWORDS


def normalize_name(name: str) -> str:
    """How names are compared: Unicode NFC, casefolded, ``-`` and ``_`` read as spaces, and
    whitespace collapsed to one space (so "A7-Pro", "a7 pro" and "A7_PRO" are one name)."""
    return " ".join(_JOINERS.sub(" ", unicodedata.normalize("NFC", name).casefold()).split())


def _plain_key(key: Any) -> Any:
    """A key as the graph stores and returns it: a str, or a plain int for any integer type
    (np.int64, IntEnum, ...), so that the same node's key is one dict key here however the
    caller spelled it (the text index's key rule)."""
    return _decode_key(*_encode_key(key, "key"))


class Mention(NamedTuple):
    """A name of the entity index found in a text: the normalised name, where it starts in
    the normalised text, and the nodes holding it as ``(key, via_alias)`` pairs (``via_alias``:
    the name is one of the node's aliases, not only its key)."""

    name: str
    start: int
    holders: tuple


class EntityIndex:
    """Names (the str keys of nodes and their aliases, normalised by :func:`normalize_name`)
    mapped to node keys, and the lookup of the names a text mentions.

    A name matches where it starts and ends at token boundaries of the text (a CJK character
    is a token by itself, so a Chinese name matches inside a sentence without spaces). A name
    is kept from its first token to its last, so what comes before or after them does not
    have to be in the text ("U.S.A." matches "made in the U.S.A", "Yahoo!" matches "Yahoo
    mail"). Names that are stopwords of :mod:`vecgraph.tokenizer` ("in", "a", "the", ...), that hold
    no token (only symbols or emoji) or more than :data:`MAX_NAME_TOKENS` tokens are not
    matched. Each holder of a name records whether the name is one of its aliases or only its
    key (so that keys can be left out of matching, see :meth:`mentions`). Keys of deleted
    nodes may linger here; callers check results against the graph.
    """

    def __init__(self) -> None:
        # name -> {tenant: {(type, key): [key, via_alias]}}: a lookup restricted to some tenants
        # reads only their holders (a name that 1,000 tenants' nodes hold costs one of them).
        self._names: dict[str, dict] = {}
        self._by_key: dict = {}  # (type, key) -> [tenant, its names], to forget them when the node goes
        self._by_tenant: dict = {}  # tenant -> {(type, key)}, to forget a tenant
        self._max_tokens = 1
        self._lock = threading.Lock()

    def add(self, key: Any, names: Sequence[str], *, alias: bool = True, tenant: str = "") -> None:
        """Makes each of ``names`` a name of node ``key`` (``alias=False``: the key itself),
        a node of ``tenant``. A key known under another tenant moves to this one, names and all."""
        key = _plain_key(key)
        marker = (type(key), key)
        with self._lock:
            known = self._by_key.get(marker)
            if known is not None and known[0] != tenant:
                self._move(marker, known, tenant)
            for name in names:
                normal = normalize_name(name)
                tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(normal)]
                if not tokens or len(tokens) > MAX_NAME_TOKENS:
                    continue
                normal = normal[tokens[0][0] : tokens[-1][1]]  # as mentions() cuts candidates from a text
                if normal in _stopwords():
                    continue  # a name that is a stopword ("in", "a") would match nearly every text
                holders = self._names.setdefault(normal, {}).setdefault(tenant, {})
                entry = holders.get(marker)
                if entry is None:
                    holders[marker] = [key, alias]
                else:
                    entry[1] = entry[1] or alias
                self._by_key.setdefault(marker, [tenant, set()])[1].add(normal)
                self._by_tenant.setdefault(tenant, set()).add(marker)
                self._max_tokens = max(self._max_tokens, len(tokens))

    def _move(self, marker: tuple, known: list, tenant: str) -> None:
        old = known[0]
        for normal in known[1]:
            by_tenant = self._names[normal]
            entry = by_tenant[old].pop(marker)
            if not by_tenant[old]:
                del by_tenant[old]
            by_tenant.setdefault(tenant, {})[marker] = entry
        self._by_tenant[old].discard(marker)
        if not self._by_tenant[old]:
            del self._by_tenant[old]
        self._by_tenant.setdefault(tenant, set()).add(marker)
        known[0] = tenant

    def add_keys(self, keys: Sequence[Any], tenants: Optional[Sequence[str]] = None) -> None:
        """Each str key is a name of its own node, of ``tenants[i]`` (None: tenant ""); a key
        already known under another tenant (an int key with aliases too) moves to it."""
        for i, key in enumerate(keys):
            tenant = "" if tenants is None else tenants[i]
            if isinstance(key, str):
                self.add(key, [key], alias=False, tenant=tenant)
            else:
                marker = (type(key), key)
                with self._lock:
                    known = self._by_key.get(marker)
                    if known is not None and known[0] != tenant:
                        self._move(marker, known, tenant)

    def forget(self, keys: Sequence[Any]) -> None:
        """Drop every name of these keys (their nodes were deleted)."""
        with self._lock:
            for key in map(_plain_key, keys):
                self._forget((type(key), key))

    def forget_tenant(self, tenant: str) -> None:
        """Drop every name of the nodes of ``tenant`` (its nodes were deleted)."""
        with self._lock:
            for marker in list(self._by_tenant.get(tenant, ())):
                self._forget(marker)

    def _forget(self, marker: tuple) -> None:
        known = self._by_key.pop(marker, None)
        if known is None:
            return
        tenant, names = known
        for normal in names:
            by_tenant = self._names.get(normal)
            if by_tenant is None:
                continue
            holders = by_tenant.get(tenant)
            if holders is not None:
                holders.pop(marker, None)
                if not holders:
                    del by_tenant[tenant]
            if not by_tenant:
                del self._names[normal]
        members = self._by_tenant.get(tenant)
        if members is not None:
            members.discard(marker)
            if not members:
                del self._by_tenant[tenant]

    def __len__(self) -> int:
        return len(self._names)

    def mentions(self, text: str, tenants: Optional[Sequence[str]] = None) -> list:
        """Every name found in ``text``, as :class:`Mention`, longest name first, then the
        earliest, then by name (overlapping names are all reported). With ``tenants``, only
        the holders of those tenants count (a name no node of theirs holds is not found)."""
        normal = normalize_name(text)
        spans = [(m.start(), m.end()) for m in _TOKEN.finditer(normal)]
        found: list = []
        with self._lock:
            names, width = self._names, self._max_tokens
            for i in range(len(spans)):
                for j in range(i, min(i + width, len(spans))):
                    candidate = normal[spans[i][0] : spans[j][1]]
                    by_tenant = names.get(candidate)
                    if not by_tenant:
                        continue
                    if tenants is None:
                        entries = [entry for holders in by_tenant.values() for entry in holders.values()]
                    else:
                        entries = [entry for t in tenants for entry in by_tenant.get(t, {}).values()]
                    if entries:
                        ordered = sorted(entries, key=lambda h: (type(h[0]).__name__, repr(h[0])))
                        found.append(Mention(candidate, spans[i][0], tuple((h[0], h[1]) for h in ordered)))
        found.sort(key=lambda m: (-len(m.name), m.start, m.name))
        return found


def name_terms(name: str) -> list:
    """The BM25 index terms of an entity name (:func:`vecgraph.tokenizer.tokenize`), each word once:
    the parts that the tokenizer adds after an identifier ("a7-pro" -> "a7", "pro") are left
    out, as the identifier itself is the word the name holds."""
    from .tokenizer import tokenize

    terms: list = []
    whole = ""
    for term in tokenize(name):
        if whole and term != whole and term in whole:
            continue  # a part of the identifier before it
        whole = term if any(c in term for c in "-_.'") else ""
        if term not in terms:
            terms.append(term)
    return terms


#: A name whose estimated share of documents holding it is above this does not fire alone: it
#: is a common word of the corpus ("copy", "get", "time"), not a specific mention.
ENTITY_MAX_DF_SHARE = 0.01


def name_specificity(names: Sequence[str], document_frequencies: Callable) -> dict:
    """The specificity of each entity name: the inverse document frequency of the name in the
    graph's texts, estimated as the sum of its words' BM25 idf (their independence assumed:
    Robertson & Zaragoza 2009, idf = ln(1 + (N - n + 0.5) / (n + 0.5))), and the estimated
    share of the N documents that hold every word of it (the product of the words' shares).

    Args:
        names: normalised names. document_frequencies: ``terms -> (N, [n per term])``, as
            :meth:`vecgraph.text.TextIndex.document_frequencies`.

    Returns:
        {name: (idf, share)}; with no document in the index every name has idf 1 and share 0
        (nothing is known to be common).
    """
    terms_of = {name: name_terms(name) for name in names}
    every = sorted({t for terms in terms_of.values() for t in terms})
    count, frequencies = document_frequencies(every) if every else (0, [])
    df = dict(zip(every, frequencies))
    out = {}
    for name, terms in terms_of.items():
        if count <= 0 or not terms:
            out[name] = (1.0, 0.0)
            continue
        idf = 0.0
        share = 1.0
        for term in terms:
            n = min(df[term], count)
            idf += math.log(1.0 + (count - n + 0.5) / (n + 0.5))
            share *= n / count
        out[name] = (idf, share)
    return out


#: How much an ambiguous name's weight falls with the number of nodes holding it:
#: weight = idf / holders ** ENTITY_AMBIGUITY_POWER.
ENTITY_AMBIGUITY_POWER = 1.0


def firing_names(specificity: dict, documents: int, max_df_share: float = ENTITY_MAX_DF_SHARE) -> set:
    """The names that may name a node on their own: those whose estimated share of the
    ``documents`` holding them is at most ``max(max_df_share, 3 / documents)``; a name that is a
    common word of the corpus ("copy", "get", "time") does not fire. With no documents every
    name fires (nothing is known to be common)."""
    limit = max(max_df_share, 3.0 / documents) if documents > 0 else math.inf
    return {name for name, (_, share) in specificity.items() if share <= limit}


def entity_scores(mentions: Sequence[Mention], specificity: dict, fire: set, *,
                  admitted: Optional[set] = None, ambiguity_power: float = ENTITY_AMBIGUITY_POWER) -> dict:
    """Scores of the nodes that the mentions name: the sum, over the distinct firing names that
    name a node, of the name's idf / ``holders ** ambiguity_power`` (``holders``: the nodes
    holding the name that ``admitted`` lets through), so an ambiguous name weighs less than a
    unique one of the same idf.

    Args:
        mentions: :class:`Mention` list. specificity: {name: (idf, share)} from
            :func:`name_specificity`. fire: the names that may fire (:func:`firing_names`).
        admitted: markers ``(type(key), key)`` of the holders that pass the filters (None: all).

    Returns:
        {(type, key): [key, score, first position]} of the nodes named by a firing name.
    """
    out: dict = {}
    counted: set = set()
    for mention in mentions:
        if mention.name not in fire:
            continue
        holders = [(key, (type(key), key)) for key, _ in mention.holders
                   if admitted is None or (type(key), key) in admitted]
        if not holders:
            continue
        weight = specificity[mention.name][0] / len(holders) ** ambiguity_power
        for key, marker in holders:
            if (marker, mention.name) in counted:
                continue
            counted.add((marker, mention.name))
            entry = out.get(marker)
            if entry is None:
                out[marker] = [key, weight, mention.start]
            else:
                entry[1] += weight
                entry[2] = min(entry[2], mention.start)
    return out


def _checked_aliases(aliases: Any) -> list:
    """``aliases`` of :meth:`vecgraph.Graph.add_aliases` checked and normalised: a list of
    non-empty str without U+001F, each NFC-normalised with its whitespace collapsed."""
    if isinstance(aliases, (str, bytes)) or not isinstance(aliases, Iterable):
        raise TypeError(f"aliases must be a list of str, got {type(aliases).__name__}")
    aliases, new = list(aliases), []
    for i, alias in enumerate(aliases):
        if not isinstance(alias, str):
            raise TypeError(f"aliases[{i}] must be a str, got {_got(alias)}")
        if ALIAS_SEPARATOR in alias:
            raise InvalidArgumentError(f"aliases[{i}] must not hold U+001F, got {alias!r}")
        alias = " ".join(unicodedata.normalize("NFC", alias).split())
        if not alias:
            raise InvalidArgumentError(f"aliases[{i}] must be a non-empty name, got {aliases[i]!r}")
        new.append(alias)
    return new


def _merged_aliases(current: list, new: list) -> list:
    """``current`` followed by the names of ``new`` that it lacks (compared by :func:`normalize_name`)."""
    known = {normalize_name(a) for a in current}
    merged = list(current)
    for alias in new:
        if normalize_name(alias) not in known:
            known.add(normalize_name(alias))
            merged.append(alias)
    return merged


# ------------------------------------------------------------------ the Graph methods
# Bound as vecgraph.Graph.add_aliases and vecgraph.Graph.aliases.

def add_aliases(self: Graph, key: Key, aliases: Sequence[str]) -> list[str]:
    """Add other names of a node (abbreviations, translations, former names), kept with
    the node (logged, snapshotted; an upsert keeps them). A query text of
    :meth:`hybrid_search` that mentions a node's key or one of its aliases makes the node
    a graph seed and an ``entity`` result. Names compare after Unicode NFC normalisation
    and casefolding, with whitespace collapsed; an alias equal to one the node has is
    not added twice.

    Args:
        key: the node.
        aliases: list of non-empty str (without the control character U+001F).

    Returns:
        The node's aliases after the change (NFC-normalised, in the order added).

    Raises:
        NotFoundError: key is not in the graph.
        TypeError, InvalidArgumentError: aliases not a list of non-empty str (an item that is
            None or another non-str raises TypeError naming its position).
    """
    self._check_writable()
    new = _checked_aliases(aliases)
    with self._text_lock:
        current = self.aliases(key)
        merged = _merged_aliases(current, new)
        if merged != current:
            self._engine.set_aliases([key], [ALIAS_SEPARATOR.join(merged)])
            if self._entities is not None:
                tenant = self._engine.text_columns([key])[1][0]
                self._write_entities(lambda index: index.add(key, merged, tenant=tenant))
    return merged


def aliases(self: Graph, key: Key) -> list[str]:
    """The aliases of a node (see :meth:`add_aliases`). Raises NotFoundError for an unknown key."""
    joined = self._engine.get_node(key, False)["aliases"]
    return joined.split(ALIAS_SEPARATOR) if joined else []
