"""Offline extractive summaries (no language model) for RAPTOR nodes and community reports.

* :func:`split_sentences` cuts text into sentences (English and Chinese sentence ends).
* :func:`centroid_summary` picks the sentences closest to the centroid of their vectors
  (centroid-based summarisation: Radev, Jing, Styś and Tam, "Centroid-based summarization of
  multiple documents", Information Processing & Management 40(6), 2004), skipping near
  duplicates of sentences already picked (in the spirit of maximal marginal relevance,
  Carbonell and Goldstein, SIGIR 1998), within a token budget.
* :func:`community_summary` writes a community report in the shape of Microsoft GraphRAG's
  (Edge et al., "From Local to Global: A Graph RAG Approach to Query-Focused
  Summarization", 2024): a title, the most central entities, then the sentences that cover
  them, chosen by a greedy weighted set cover.

Token budgets are counted by the caller's ``count_tokens`` on each piece (title, entity line,
sentence) and summed; with an additive counter (whitespace words, say) the whole summary
counts at most ``max_tokens``.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import _finite_reals
from ..errors import InvalidArgumentError, _got

__all__ = ["centroid_summary", "community_summary", "split_sentences"]

# A sentence end: ASCII . ! ? (a run of them) before whitespace or the end, Chinese / full
# width 。！？ (no space needed), or ASCII ! ? right before a CJK character; each with the
# closing quotes or brackets that follow it.
_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CLOSERS = "\"'”’」』）)\\]"
_END = re.compile(
    f"[.!?]+[{_CLOSERS}]*(?=\\s|$)|[。！？][。！？!?]*[{_CLOSERS}]*|[!?]+[{_CLOSERS}]*(?=[{_CJK_CLASS}])"
)
# Words whose period does not end a sentence ("Dr. Smith", "e.g. this").
_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "e.g",
        "i.e",
        "cf",
        "fig",
        "figs",
        "eq",
        "vol",
        "pp",
        "al",
        "inc",
        "ltd",
        "corp",
        "dept",
        "univ",
        "approx",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    ]
)
_PARAGRAPH = re.compile(r"\n\s*\n")
_SPACE = re.compile(r"\s+")


def _cjk(char: str) -> bool:
    """True for a CJK ideograph, kana or hangul (scripts written without spaces)."""
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xAC00 <= code <= 0xD7AF
        or 0xF900 <= code <= 0xFAFF
        or 0x20000 <= code <= 0x2FA1F
    )


def split_sentences(text: str) -> list[str]:
    """Splits text into sentences.

    A sentence ends at ``.``, ``!`` or ``?`` (or a run of them, and any closing quotes or
    brackets right after) followed by whitespace or the end of the text, at Chinese /
    full-width ``。``, ``！``, ``？`` (no space needed), or at ``!`` / ``?`` right before a
    CJK character; a blank line ends one too (a single line break does not: text wrapped
    inside a paragraph stays one sentence). A period after a common abbreviation (``Dr.``,
    ``e.g.``, ``Fig.``, ...), a single letter (an initial, ``J. Smith``) or dotted letters
    (``U.S.``) does not end a sentence; nor does a period inside a number or a URL (no space
    follows it). Whitespace runs inside a sentence become one space; empty sentences are
    dropped.

    Args:
        text: the text (str).

    Returns:
        The sentences in order, stripped.

    Raises:
        TypeError: ``text`` not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {_got(text)}")
    sentences = []
    for paragraph in _PARAGRAPH.split(text):
        start = 0
        for match in _END.finditer(paragraph):
            if match.group().rstrip(_CLOSERS) == ".":
                words = paragraph[start : match.start()].split()
                last = words[-1].lower().lstrip("\"'“‘([") if words else ""
                letters = last.replace(".", "")
                # "Dr." "e.g." "U.S." "J." (not "it.", "3.")
                if last in _ABBREVIATIONS or (
                    letters.isalpha() and (len(letters) == 1 or ("." in last and len(letters) <= 3))
                ):
                    continue
            sentences.append(paragraph[start : match.end()])
            start = match.end()
        sentences.append(paragraph[start:])
    return [s for s in (_SPACE.sub(" ", s).strip() for s in sentences) if s]


# ------------------------------------------------------------------------------- arguments


def _budget(max_tokens: Any, count_tokens: Any) -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, numbers.Integral):
        raise TypeError(f"max_tokens must be an int, got {_got(max_tokens)}")
    if max_tokens < 0:
        raise InvalidArgumentError(f"max_tokens must be >= 0, got {max_tokens}")
    if not callable(count_tokens):
        raise TypeError(f"count_tokens must be a callable str -> int, got {_got(count_tokens)}")
    return int(max_tokens)


def _count(count_tokens: Callable[[str], int], text: str) -> int:
    value = count_tokens(text)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InvalidArgumentError(
            f"count_tokens must return an int >= 0, got {_got(value)} for {text[:40]!r}"
        )
    return int(value)


def _sentences(values: Any, name: str = "sentences") -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list of str, got {_got(values)}")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"{name}[{i}] must be a str, got {_got(value)}")
    return list(values)


# ------------------------------------------------------------------------------- centroid


def centroid_summary(
    sentences: list[str],
    sentence_vectors: np.ndarray,
    *,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    max_sentences_similarity: float = 0.95,
) -> str:
    """Extractive summary: the sentences closest to the centroid of all, within a token budget.

    Every sentence vector is scaled to unit length and the centroid is their mean (Radev et
    al., 2004). Sentences are taken by cosine similarity to the centroid, highest first (ties:
    earlier sentence first); a sentence is skipped when its cosine similarity to one already
    taken is ``>= max_sentences_similarity`` (a near duplicate), or when its tokens do not fit
    in what is left of ``max_tokens`` (a shorter one further down may still fit), or when it
    is blank. The taken sentences are returned in their original order, joined by spaces.

    Args:
        sentences: ``m`` sentences (str).
        sentence_vectors: ``(m, d)`` array of real numbers, finite: one vector per sentence
            (a zero vector has cosine 0 to everything).
        max_tokens: the budget (int >= 0): the sum of ``count_tokens`` over the taken
            sentences stays within it, and so does the count of the joined summary (the
            last taken are dropped until it does).
        count_tokens: ``str -> int >= 0``, the caller's token counter.
        max_sentences_similarity: the cosine similarity (float in ``(0, 1]``) from which a
            sentence counts as a near duplicate of one already taken; 1.0 skips only vectors
            of the same direction.

    Returns:
        The summary (str; ``""`` when nothing fits or there are no sentences).

    Raises:
        TypeError: ``sentences`` not a list of str; ``max_tokens`` not an int;
            ``count_tokens`` not callable; ``sentence_vectors`` not real numbers.
        InvalidArgumentError: ``sentence_vectors`` not 2-D with one row per sentence, or not
            finite; ``max_tokens < 0``; ``max_sentences_similarity`` outside ``(0, 1]``;
            ``count_tokens`` returning something else than an int >= 0.
    """
    sentences = _sentences(sentences)
    max_tokens = _budget(max_tokens, count_tokens)
    vectors = np.asarray(sentence_vectors)
    if vectors.ndim != 2 or vectors.shape[0] != len(sentences):
        raise InvalidArgumentError(
            f"sentence_vectors must be a 2-D array with one row per sentence "
            f"({len(sentences)}), got shape {vectors.shape}"
        )
    vectors = _finite_reals(vectors, "sentence_vectors")
    if isinstance(max_sentences_similarity, bool) or not isinstance(max_sentences_similarity, numbers.Real):
        raise TypeError(f"max_sentences_similarity must be a float, got {_got(max_sentences_similarity)}")
    if not 0.0 < float(max_sentences_similarity) <= 1.0:
        raise InvalidArgumentError(
            f"max_sentences_similarity must be in (0, 1], got {max_sentences_similarity}"
        )
    if not sentences:
        return ""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms > 0, norms, 1.0)
    centroid = unit.mean(axis=0)
    length = float(np.linalg.norm(centroid))
    score = unit @ centroid / length if length > 0 else np.zeros(len(sentences))
    taken: list[int] = []
    left = max_tokens
    for i in np.argsort(-score, kind="stable"):
        if left <= 0:
            break
        if not sentences[i].strip():
            continue
        if taken and float((unit[taken] @ unit[i]).max()) >= max_sentences_similarity:
            continue
        tokens = _count(count_tokens, sentences[i])
        if tokens <= left:
            taken.append(int(i))
            left -= tokens
    while True:  # joined, the sentences can count a few tokens more than apart: drop the last taken
        summary = " ".join(sentences[i].strip() for i in sorted(taken))
        if not taken or _count(count_tokens, summary) <= max_tokens:
            return summary
        taken.pop()


# ------------------------------------------------------------------------------- community


def _mention_pattern(name: str) -> re.Pattern:
    """Case-insensitive pattern of ``name`` as a whole word: not inside a longer word on a side
    whose end character is a letter or digit of a spaced script (CJK names match anywhere)."""
    left = "" if _cjk(name[0]) or not (name[0].isalnum() or name[0] == "_") else r"(?<!\w)"
    right = "" if _cjk(name[-1]) or not (name[-1].isalnum() or name[-1] == "_") else r"(?!\w)"
    return re.compile(left + re.escape(name) + right, re.IGNORECASE)


def community_summary(
    title: str,
    entities: list[tuple[str, float]],
    sentences: list[str],
    *,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    max_listed: int = 10,
) -> str:
    """A community report, offline: title, most central entities, then covering sentences.

    The shape of Microsoft GraphRAG's community reports (Edge et al., 2024) without a model:

    1. ``title`` on its own line (left out when blank);
    2. ``"Entities: a, b, c"``: the first ``max_listed`` entities (the caller lists them most
       central first), as many as fit;
    3. the sentences, in the order they are chosen, joined by spaces: first a greedy set cover
       weighted by centrality (each step takes the sentence whose mentioned entities not yet
       covered have the highest total centrality, ties to the earlier sentence, and marks
       them covered; it stops when no sentence mentions an entity not yet covered), then
       the remaining sentences by centrality-weighted mention count (the sum over entities
       of centrality times the number of mentions; ties to the earlier sentence; sentences
       mentioning no entity are left out).

    A sentence mentions an entity when the name occurs in it case-insensitively as a whole
    word (for a name starting or ending with a CJK character, anywhere on that side). Every
    piece is added only when its tokens fit in what is left of ``max_tokens`` (a sentence
    that does not fit is passed over; the entity line drops names until it fits). The joined
    report is counted once more, and the last pieces are dropped while it is over (a token
    counter may count joined pieces higher than apart). A sentence that occurs more than once
    (overlapping chunks) is a candidate once.

    Args:
        title: the report's title (str).
        entities: ``(name, centrality)`` pairs, most central first: name a non-blank str,
            centrality a finite float >= 0 (see :func:`vecgraph.kb.communities.centrality`).
        sentences: candidate sentences (str), in document order.
        max_tokens: the budget (int >= 0) for the whole report.
        count_tokens: ``str -> int >= 0``, the caller's token counter.
        max_listed: the most entity names on the entity line (int >= 0).

    Returns:
        The report: its lines joined by ``"\\n"`` (``""`` when nothing fits).

    Raises:
        TypeError: ``title`` not a str; ``entities`` not a list of (str, number) pairs;
            ``sentences`` not a list of str; ``max_tokens`` / ``max_listed`` not an int;
            ``count_tokens`` not callable.
        InvalidArgumentError: a blank entity name; a centrality that is negative, NaN or
            infinite; ``max_tokens`` or ``max_listed`` < 0; ``count_tokens`` returning
            something else than an int >= 0.
    """
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {_got(title)}")
    if isinstance(entities, str) or not isinstance(entities, Sequence):
        raise TypeError(f"entities must be a list of (name, centrality) pairs, got {_got(entities)}")
    names: list[str] = []
    weights: list[float] = []
    for i, pair in enumerate(entities):
        if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
            raise TypeError(f"entities[{i}] must be a (name, centrality) pair, got {_got(pair)}")
        name, weight = pair
        if not isinstance(name, str):
            raise TypeError(f"entities[{i}] name must be a str, got {_got(name)}")
        if not name.strip():
            raise InvalidArgumentError(f"entities[{i}] name must not be blank, got {name!r}")
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise TypeError(f"entities[{i}] centrality must be a float, got {_got(weight)}")
        if not np.isfinite(float(weight)) or float(weight) < 0:
            raise InvalidArgumentError(f"entities[{i}] centrality must be finite and >= 0, got {weight}")
        names.append(name.strip())
        weights.append(float(weight))
    sentences = _sentences(sentences)
    max_tokens = _budget(max_tokens, count_tokens)
    if isinstance(max_listed, bool) or not isinstance(max_listed, numbers.Integral):
        raise TypeError(f"max_listed must be an int, got {_got(max_listed)}")
    if max_listed < 0:
        raise InvalidArgumentError(f"max_listed must be >= 0, got {max_listed}")

    lines: list[str] = []
    left = max_tokens
    if title.strip():
        tokens = _count(count_tokens, title.strip())
        if tokens <= left:
            lines.append(title.strip())
            left -= tokens
    listed = names[:max_listed]
    while listed:
        line = "Entities: " + ", ".join(listed)
        tokens = _count(count_tokens, line)
        if tokens <= left:
            lines.append(line)
            left -= tokens
            break
        listed.pop()

    # mentions[s] = {entity index: number of mentions}
    patterns = [_mention_pattern(name) for name in names]
    mentions = []
    for sentence in sentences:
        found = {}
        for e, pattern in enumerate(patterns):
            hits = len(pattern.findall(sentence))
            if hits:
                found[e] = hits
        mentions.append(found)
    tokens_of: dict[int, int] = {}

    def fits(s: int) -> bool:
        if s not in tokens_of:
            tokens_of[s] = _count(count_tokens, sentences[s].strip())
        return tokens_of[s] <= left

    chosen: list[int] = []
    covered: set[int] = set()
    first_of: dict[str, int] = {}  # a sentence repeated (overlapping chunks) is a candidate once
    for s in range(len(sentences)):
        if sentences[s].strip():
            first_of.setdefault(sentences[s].strip(), s)
    open_sentences = sorted(first_of.values())
    while True:
        best, best_gain = -1, -1.0
        for s in open_sentences:
            new = [e for e in mentions[s] if e not in covered]
            if not new:
                continue
            gain = sum(weights[e] for e in new)
            if gain > best_gain and fits(s):
                best, best_gain = s, gain
        if best < 0:
            break
        chosen.append(best)
        covered.update(mentions[best])
        left -= tokens_of[best]
        open_sentences.remove(best)
    rest = [(sum(weights[e] * c for e, c in mentions[s].items()), s) for s in open_sentences if mentions[s]]
    for _, s in sorted(rest, key=lambda item: (-item[0], item[1])):
        if fits(s):
            chosen.append(s)
            left -= tokens_of[s]
    while True:  # joined, the pieces can count a few tokens more than apart: drop the last ones
        report = "\n".join(lines + ([" ".join(sentences[s].strip() for s in chosen)] if chosen else []))
        if not report or _count(count_tokens, report) <= max_tokens:
            return report
        if chosen:
            chosen.pop()
        else:
            lines.pop()
