"""The names a memory mentions: the offline default of :class:`vecgraph.Memory`'s
``extract_entities`` hook.

A memory store links each memory to the entities it mentions (``mentions`` edges to one entity
node per user and name), so that a question naming one of them reaches what was said about it in
other sessions. An extractor is any callable ``(text) -> list[str]``; an LLM-based one (as in
mem0 or graphiti) plugs in the same way. The default needs no model:

- English and other space-separated text: identifiers (``order-service``, ``k8s``, ``v2.1``,
  ``snake_case``), capitalised words and runs of them that do not start a sentence or are not
  common words (``Rust``, ``Project Atlas``), and quoted phrases;
- Chinese: the proper nouns jieba's part-of-speech tagger finds (person ``nr``, place ``ns``,
  organisation ``nt``, other proper noun ``nz``) and Latin-script words inside the text.

Names are returned as written (first occurrence), without duplicates (compared case-folded).
"""

from __future__ import annotations

import re
from functools import lru_cache

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_IDENTIFIER = re.compile(r"(?<![\w.-])([A-Za-z][\w]*(?:[-_./][\w]+)+|[A-Za-z]+\d[\w]*|\d+[A-Za-z][\w]*)(?![\w-])")
_CAPITALISED_RUN = re.compile(r"\b([A-Z][\w]*(?:[ ][A-Z][\w]*)*)")
_QUOTED = re.compile(r"[\"“«]([^\"”»]{2,60})[\"”»]")
_SENTENCE_START = re.compile(r"(^|[.!?:;]\s+|\n)$")
_PROPER_TAGS = ("nr", "ns", "nt", "nz", "eng")


@lru_cache(maxsize=1)
def _common_words() -> frozenset:
    from ..entities import _stopwords

    extra = {"i", "i'm", "i've", "my", "we", "our", "you", "your", "he", "she", "they", "it", "the", "a", "an",
             "this", "that", "these", "those", "yes", "no", "ok", "please", "thanks", "today", "yesterday",
             "tomorrow", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
             "what", "which", "who", "when", "where", "why", "how", "is", "are", "was", "does", "do", "did",
             "can", "could", "should", "would", "will", "also", "now", "then", "but", "and", "or", "if"}
    return frozenset(_stopwords()) | frozenset(extra)


def _latin_names(text: str) -> list:
    common = _common_words()
    found = [m.group(1) for m in _QUOTED.finditer(text)]
    found += [m.group(1).rstrip(".") for m in _IDENTIFIER.finditer(text)]
    for m in _CAPITALISED_RUN.finditer(text):
        words = m.group(1).split(" ")
        # A capitalised word that starts a sentence is a name only if it is not a common word.
        if _SENTENCE_START.search(text[: m.start()]) and words[0].lower() in common:
            words = words[1:]
        words = [w for w in words if w.lower() not in common or len(words) > 1]
        if words and not (len(words) == 1 and len(words[0]) < 2):
            found.append(" ".join(words))
    return found


def _chinese_names(text: str) -> list:
    import logging

    import jieba
    import jieba.posseg as posseg

    jieba.setLogLevel(logging.WARNING)
    return [pair.word for pair in posseg.cut(text) if pair.flag in _PROPER_TAGS and len(pair.word.strip()) >= 2]


def default_extractor(text: str) -> list:
    """The entity names ``text`` mentions (see the module docstring).

    >>> default_extractor("order-service is now being rewritten in Rust by Project Atlas")
    ['order-service', 'Rust', 'Project Atlas']

    Args:
        text: a memory's text (str).

    Returns:
        list of str, in order of first occurrence, case-folded duplicates removed.
    """
    names = _latin_names(text)
    if _CJK.search(text):
        names += _chinese_names(text)
    seen: set = set()
    out = []
    for name in names:
        name = name.strip()
        folded = name.casefold()
        if name and folded not in seen:
            seen.add(folded)
            out.append(name)
    return out
