"""Layer 1: the overview card of one user, small enough to be in every prompt.

A card is a JSON-ready dict built by a *summarizer* from the user's current, confirmed memories
(never an inference, a superseded version or an expired memory). :func:`default_summarizer` is
the offline default: it groups memories by kind into sections and keeps, within a token budget,
the most-mentioned and newest ones. An LLM-written card plugs in as any callable with the same
signature.

Token counts use a real tokenizer: :func:`default_token_counter` is the Llama 2 tokenizer
(SentencePiece BPE, 32,000 tokens) that the ``wordllama`` package ships, read with the
``tokenizers`` library; pass ``count_tokens=`` to :meth:`vecgraph.Memory.open` for another
(e.g. ``lambda s: len(tiktoken.get_encoding("o200k_base").encode(s))`` where its file is cached).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Callable

# The card's sections: the kinds that fill each one. A kind not listed goes to "other".
SECTIONS = {
    "profile": ("profile", "identity", "person"),
    "preferences": ("preference", "preferences", "like", "dislike"),
    "projects": ("project", "projects", "task", "goal"),
    "facts": ("fact", "facts", "event"),
}


@lru_cache(maxsize=1)
def _llama2_tokenizer() -> Any:
    try:
        import wordllama
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ImportError("the default token counter reads the tokenizer the wordllama package ships: "
                          'pip install "vecgraph[embed]", or pass count_tokens= to Memory.open') from exc
    path = os.path.join(os.path.dirname(wordllama.__file__), "tokenizers", "l2_supercat_tokenizer_config.json")
    return Tokenizer.from_file(path)


def default_token_counter(text: str) -> int:
    """The number of Llama 2 tokens of ``text`` (no special tokens).

    >>> default_token_counter("order-service is written in Go 1.22")
    12

    Raises:
        ImportError: ``wordllama`` (or ``tokenizers``) is not installed.
    """
    return len(_llama2_tokenizer().encode(text, add_special_tokens=False).ids)


def section_of(kind: str) -> str:
    """The card section that memories of ``kind`` go to."""
    for section, kinds in SECTIONS.items():
        if kind in kinds:
            return section
    return "other"


def default_summarizer(user: str, memories: list, *, max_tokens: int, count_tokens: Callable[[str], int],
                       now: datetime) -> dict:
    """The offline card: sections by kind, filled within ``max_tokens``.

    Memories are taken in priority order: most-mentioned first (how often the user's other
    memories mention its entities), then newest (``at``); each is added
    to its section (see :data:`SECTIONS`) while the JSON of the whole card stays within
    ``max_tokens`` tokens. A memory that does not fit is left out, never cut.

    Args:
        user: the user id.
        memories: the user's current, confirmed memories, as :class:`vecgraph.memory.MemoryHit`
            whose ``score`` is how often the user's other memories mention its entity names.
        max_tokens: the card's budget (tokens of its JSON text).
        count_tokens: ``(str) -> int``.
        now: the card's ``last_updated`` (timezone-aware).

    Returns:
        {"user", "profile", "preferences", "projects", "facts", "other", "last_updated",
        "memories" (how many were considered), "tokens"}; each section is a list of
        {"id", "text", "at"} (ISO 8601), "other" also gives each one's "kind".
    """
    card: dict = {"user": user, "profile": [], "preferences": [], "projects": [], "facts": [], "other": [],
                  "last_updated": now.isoformat(), "memories": len(memories), "tokens": 0}
    ordered = sorted(memories, key=lambda m: (-m.score, -m.at.timestamp(), m.id))
    used = count_tokens(json.dumps(card, ensure_ascii=False))
    for m in ordered:
        entry = {"id": m.id, "text": m.text, "at": m.at.isoformat()}
        section = section_of(m.kind)
        if section == "other":
            entry["kind"] = m.kind
        # The JSON of an entry plus its separator: what adding it costs (exact up to the
        # tokenizer merging across the separator, checked once at the end).
        cost = count_tokens(json.dumps(entry, ensure_ascii=False) + ", ")
        if used + cost > max_tokens:
            continue
        card[section].append(entry)
        used += cost
    _count_card(card, count_tokens)
    while card["tokens"] > max_tokens:  # the estimate was short: drop the lowest-priority entry
        for m in reversed(ordered):
            section = section_of(m.kind)
            kept = [e for e in card[section] if e["id"] != m.id]
            if len(kept) != len(card[section]):
                card[section] = kept
                break
        else:
            break
        _count_card(card, count_tokens)
    return card


def _count_card(card: dict, count_tokens: Callable[[str], int]) -> None:
    """Set ``card["tokens"]`` to the token count of the card's JSON, that field included: its
    digits are tokens too (one per digit for Llama 2), so the count is repeated until it is
    the count of the JSON that holds it (a few rounds at most: it changes only with the
    number of digits)."""
    for _ in range(10):
        tokens = count_tokens(json.dumps(card, ensure_ascii=False))
        if tokens == card["tokens"]:
            return
        card["tokens"] = tokens


def utc_now() -> datetime:
    return datetime.now(timezone.utc)
