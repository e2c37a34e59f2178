"""The tokenizer of the text channel: the terms of English, CJK and identifier-heavy text.

:func:`tokenize` turns text into the terms both documents and queries are indexed by (in the
BM25 index, :class:`vecgraph.text.TextIndex`, and in the entity channel's names alike); the
terms in :data:`STOPWORDS` are dropped; :data:`TOKENIZER_VERSION` changes whenever
:func:`tokenize` gives different terms for some text.

>>> tokenize("Widget A7-Pro costs $99 (see ERR_0x9941)")
['widget', 'a7-pro', 'a7', 'pro', 'costs', '99', 'see', 'err_0x9941', 'err', '0x9941']
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from typing import Any, Optional

__all__ = ["tokenize", "STOPWORDS", "TOKENIZER_VERSION"]

TOKENIZER_VERSION = 2
"""Changes whenever :func:`tokenize` gives different terms for some text; an index written
with another version is emptied on open (see :attr:`vecgraph.text.TextIndex.reset_on_open`)."""

STOPWORDS = frozenset(
    # English: NLTK's English stopword list (function words, pronouns, auxiliaries, the pieces
    # of contractions such as "don't" -> "don", "t") plus a few modal verbs. They are dropped
    # from documents and queries alike: they carry almost no BM25 weight, and each would make
    # a query visit a large part of the index.
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she "
    "her hers herself it its itself they them their theirs themselves what which who whom this that "
    "these those am is are was were be been being have has had having do does did doing a an the and "
    "but if or because as until while of at by for with about against between into through during "
    "before after above below to from up down in out on off over under again further then once here "
    "there when where why how all any both each few more most other some such no nor not only own "
    "same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn "
    "doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn "
    "also could would may might must shall "
    # Chinese function words that jieba returns as words of their own.
    "的 了 是 在 和 与 及 或 吗 呢 吧 啊 也 都 就 着 过 而 之".split()
)
"""Terms :func:`tokenize` drops (English function words, a few Chinese particles)."""

# Characters that join alphanumeric runs into one identifier-like token.
_JOINERS = "-_.@:/"
# Invisible format characters (Unicode category Cf) of the Basic Multilingual Plane: dropped.
_FORMAT_CHARS = dict.fromkeys(c for c in range(0x10000) if unicodedata.category(chr(c)) == "Cf")
# Hyphen look-alikes that NFKC leaves alone but that mean "-" inside a model number.
_HYPHENS = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2212": "-"})
# Han ideographs (CJK unified, extensions, compatibility; 々 and 〇) go to jieba.
_HAN = "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
# Kana and Hangul: no segmenter here; character bigrams.
_KANA_HANGUL = "\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff\ua960-\ua97f\uac00-\ud7ff"
_MAX_COMPOUND_CHARS = 64

_token_re: Optional[re.Pattern] = None
_split_re = re.compile(f"[{re.escape(_JOINERS)}]+")
_ASCII_RUN = re.compile(f"_*[A-Za-z0-9]+(?:[{re.escape(_JOINERS)}]+[A-Za-z0-9]+)*_*")  # the word rule on ASCII
_jieba: Any = None
_lazy_lock = threading.Lock()


def _marks_class() -> str:
    """Regex class body of every combining mark (Unicode categories Mn, Mc, Me) below U+30000."""
    out, start = [], None
    for cp in range(0x30001):
        is_mark = cp < 0x30000 and unicodedata.category(chr(cp))[0] == "M"
        if is_mark and start is None:
            start = cp
        elif not is_mark and start is not None:
            out.append(f"\\U{start:08x}-\\U{cp - 1:08x}")
            start = None
    return "".join(out) + "\\U000e0100-\\U000e01ef"


def _pattern() -> re.Pattern:
    global _token_re
    if _token_re is None:
        with _lazy_lock:
            if _token_re is None:
                marks = _marks_class()
                # a letter or digit that is neither '_' nor CJK, then letters, digits and marks
                letter = f"[^\\W_{_HAN}{_KANA_HANGUL}]"
                word = f"{letter}(?:{letter}|[{marks}])*"
                joiners = re.escape(_JOINERS)
                _token_re = re.compile(
                    f"(?P<han>[{_HAN}]+)|(?P<kana>[{_KANA_HANGUL}]+)"
                    f"|(?P<word>_*{word}(?:[{joiners}]+{word})*_*)"
                )
    return _token_re


def _segmenter() -> Any:
    global _jieba
    if _jieba is None:
        with _lazy_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)  # it logs its dictionary loading otherwise
                jieba.initialize()
                _jieba = jieba
    return _jieba


def normalize(text: str) -> str:
    """NFKC-normalised, casefolded ``text`` (then NFKC again, as casefolding can denormalise),
    without invisible format characters (soft hyphen, zero-width space and joiners, BOM), which
    would otherwise split ``A7\u00adPro`` in two."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return folded.translate(_HYPHENS).translate(_FORMAT_CHARS)


def tokenize(text: str) -> list[str]:
    """The terms of ``text``, in order, as documents and queries are both indexed.

    Rules, applied in order:

    1. **Normalisation**: NFKC (full-width ``Ａ７`` -> ``a7``, ligature ``ﬁ`` -> ``fi``,
       half-width katakana -> full-width, ``①`` -> ``1``), then casefolding (``Straße`` ->
       ``strasse``); the hyphen look-alikes U+2010, U+2011 and U+2212 become ``-``.
    2. **Identifiers** are kept whole and also split: a run of letters and digits joined by
       ``- _ . @ : /`` (leading or trailing ``_`` allowed) gives the whole run, then each
       alphanumeric part, so both the exact identifier (a rare term, high idf) and its pieces
       match: ``A7-Pro`` -> ``a7-pro a7 pro``; ``ERR_0x9941`` -> ``err_0x9941 err 0x9941``;
       ``v2.0`` -> ``v2.0 v2 0``; ``foo.bar_baz`` -> ``foo.bar_baz foo bar baz``;
       ``ann@example.com`` -> ``ann@example.com ann example com``; ``std::vector`` ->
       ``std::vector std vector``; ``__init__`` -> ``__init__ init``. A joiner at the end of
       a run is punctuation (``v2.0.`` -> ``v2.0 v2 0``). Whole runs longer than 64
       characters are not kept (their parts are).
    3. **Words**: any other character (spaces, punctuation, symbols) separates words:
       ``don't stop!`` -> ``stop`` (``don`` and ``t`` are stopwords). Combining marks stay
       inside words (Devanagari, Thai, decomposed accents), diacritics are kept
       (``café`` != ``cafe``). There is no stemming (``prices`` != ``price``) and no
       camelCase or letter/digit splitting (``A7`` stays ``a7``).
    4. **Chinese**: runs of Han characters are segmented by jieba in search mode, which also
       returns the shorter words inside long ones: ``A7-Pro 多少钱？`` -> ``a7-pro a7 pro
       多少 钱``; ``中华人民共和国`` -> ``中华 华人 人民 共和 共和国 中华人民共和国``. jieba
       is loaded on the first text with Han characters (about half a second).
    5. **Japanese kana and Korean Hangul** have no segmenter here: their runs become
       overlapping character bigrams (``カタカナ`` -> ``カタ タカ カナ``; a one-character
       run stays itself). Kanji inside Japanese text are Han runs, segmented by jieba.
    6. **Stopwords**: terms in :data:`STOPWORDS` (English function words, a few Chinese
       particles) are dropped, except whole identifiers. Scripts without spaces other than
       the above (Thai, Lao, Khmer, ...) give one term per run.

    Args:
        text: any str (an empty one gives ``[]``).

    Returns:
        list of str terms, in text order, repeated as often as they occur (BM25 counts them).

    Raises:
        TypeError: ``text`` is not a str.

    >>> tokenize("ＦＵＬＬ-width ﬁne Straße")
    ['full-width', 'full', 'width', 'fine', 'strasse']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text:
        return []
    return _tokenize_ascii(text) if text.isascii() else _tokenize_general(text)


def _tokenize_ascii(text: str) -> list[str]:
    """:func:`tokenize` of an ASCII ``text``, by the same rules at a third of the cost: NFKC
    leaves ASCII alone, casefolding is ``lower()``, a letter is ``[A-Za-z0-9]``, and there are
    no marks, Han, kana or format characters (tests check it against :func:`_tokenize_general`)."""
    out: list[str] = []
    append = out.append
    stop = STOPWORDS
    for tok in _ASCII_RUN.findall(text.lower()):
        if tok.isalnum():
            if tok not in stop:
                append(tok)
        else:
            _identifier_terms(tok, append)
    return out


def _identifier_terms(tok: str, append: Any) -> None:
    """Rule 2 of :func:`tokenize`: a run with joiners gives itself (when short enough) and its
    alphanumeric parts that are not stopwords."""
    parts = [p for p in _split_re.split(tok) if p]
    if (len(parts) > 1 or parts[0] != tok) and len(tok) <= _MAX_COMPOUND_CHARS:
        append(tok)
    for part in parts:
        if part not in STOPWORDS:
            append(part)


def _tokenize_general(text: str) -> list[str]:
    """:func:`tokenize` of any ``text`` (the reference for :func:`_tokenize_ascii`)."""
    out: list[str] = []
    append = out.append
    stop = STOPWORDS
    text = normalize(text)
    for m in _pattern().finditer(text):
        group = m.lastgroup
        tok = m.group()
        if group == "word":
            if tok.isalnum():
                if tok not in stop:
                    append(tok)
            else:
                _identifier_terms(tok, append)
        elif group == "han":
            for word in _segmenter().lcut_for_search(tok):
                if word not in stop:
                    append(word)
        else:  # kana / hangul
            if len(tok) == 1:
                append(tok)
            else:
                out.extend(tok[i:i + 2] for i in range(len(tok) - 1))
    return out
