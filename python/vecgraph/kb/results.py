"""What the knowledge base's searches return: :class:`KBResult` and its hits."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

__all__ = ["ChunkHit", "CommunityHit", "EntityHit", "KBResult", "RelationHit", "SummaryHit", "metadata_line"]


@dataclass(frozen=True)
class ChunkHit:
    """A chunk: ``key``, ``score`` (higher is better; the mode's own scale), ``text`` (the chunk
    without its contextual prefix), ``prefix``, and its document's ``source``, ``version``,
    ``date`` (ISO or ""), ``status``, ``title`` and the chunk's ``heading_path``."""

    key: str
    score: float
    text: str
    prefix: str
    source: str
    version: str
    date: str
    status: str
    title: str
    heading_path: tuple


@dataclass(frozen=True)
class EntityHit:
    """An entity: ``key``, ``name``, ``type``, ``description``, ``score``."""

    key: str
    name: str
    type: str
    description: str
    score: float


@dataclass(frozen=True)
class RelationHit:
    """A relation between two entities of the result: ``source`` and ``target`` (names),
    ``type`` (the edge's rel), ``description``, ``weight``."""

    source: str
    target: str
    type: str
    description: str
    weight: float


@dataclass(frozen=True)
class CommunityHit:
    """A community: ``key``, ``level``, ``title``, ``summary``, ``score``, ``size`` (entities)
    and, when a ``map`` hook ran, its ``answer``."""

    key: str
    level: int
    title: str
    summary: str
    score: float
    size: int
    answer: str | None = None


@dataclass(frozen=True)
class SummaryHit:
    """A RAPTOR summary node: ``key``, ``level`` (1 = summaries of chunks), ``text``, ``score``."""

    key: str
    level: int
    text: str
    score: float


def metadata_line(hit: ChunkHit) -> str:
    """``[source v3.0 | 2024-01-01 | current]``: the chunk's document as a model reads it."""
    version = hit.version if not hit.version or hit.version[:1] in "vV" else f"v{hit.version}"
    head = hit.source + (f" {version}" if version else "")
    parts = [head] + ([hit.date] if hit.date else []) + [hit.status]
    return "[" + " | ".join(parts) + "]"


@dataclass
class KBResult:
    """The result of a knowledge-base search (``mode``: "dense", "bm25", "hybrid", "local",
    "global" or "tree"). Each list is best first.

    :meth:`to_context` renders it for a model under a token budget; :meth:`to_dict` gives
    plain data (``--json`` of ``vecgraph kb ask``).
    """

    question: str
    mode: str
    chunks: list = field(default_factory=list)
    entities: list = field(default_factory=list)
    relations: list = field(default_factory=list)
    communities: list = field(default_factory=list)
    summaries: list = field(default_factory=list)

    def keys(self) -> list:
        """The chunk keys, best first."""
        return [hit.key for hit in self.chunks]

    def __len__(self) -> int:
        return len(self.chunks) + len(self.entities) + len(self.communities) + len(self.summaries)

    def to_dict(self) -> dict:
        """Plain data: ``{"question", "mode", "chunks": [...], "entities": [...], ...}``."""
        return {
            "question": self.question,
            "mode": self.mode,
            "chunks": [dict(asdict(h), heading_path=list(h.heading_path)) for h in self.chunks],
            "entities": [asdict(h) for h in self.entities],
            "relations": [asdict(h) for h in self.relations],
            "communities": [asdict(h) for h in self.communities],
            "summaries": [asdict(h) for h in self.summaries],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def to_context(
        self, max_tokens: int = 2000, *, count_tokens: Callable[[str], int] | None = None
    ) -> str:
        """The result as one text for a model's prompt, within ``max_tokens``.

        Order: the chunks as cited sources (``[n] [source v3.0 | 2024-01-01 | current] Title >
        Heading`` then the text; the metadata line lets the model apply "the newest current
        document wins"), RAPTOR summaries, entities, relations, then community summaries; a
        global search's community summaries come first. Items are added whole, in that order
        and best first, while they fit (an item that does not fit is left out and the next
        tried); a first item larger than the budget is cut to it.

        Args:
            max_tokens: the budget (int >= 1).
            count_tokens: ``(str) -> int`` (default: the Llama 2 tokenizer wordllama ships).

        Raises:
            InvalidArgumentError: ``max_tokens`` < 1.
        """
        from ..errors import InvalidArgumentError, _got

        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise TypeError(f"max_tokens must be an int, got {_got(max_tokens)}")
        if max_tokens < 1:
            raise InvalidArgumentError(f"max_tokens must be >= 1, got {max_tokens}")
        if count_tokens is None:
            from ..memory.card import default_token_counter

            count_tokens = default_token_counter
        communities, summaries, chunks, entities, relations = [], [], [], [], []
        for hit in self.communities:
            body = hit.summary if hit.summary.startswith(hit.title) else f"{hit.title}\n{hit.summary}"
            body += f"\nAnswer: {hit.answer}" if hit.answer else ""
            communities.append(("Community summaries", f"[community {hit.key}]\n{body}"))
        for hit in self.summaries:
            summaries.append(("Summaries", f"[summary {hit.key}, level {hit.level}]\n{hit.text}"))
        for n, hit in enumerate(self.chunks, 1):
            where = " > ".join([hit.title, *[h for h in hit.heading_path if h != hit.title]]).strip(" >")
            chunks.append(("Sources", f"[{n}] {metadata_line(hit)} {where}\n{hit.text}"))
        for hit in self.entities:
            entities.append(
                (
                    "Entities",
                    f"- {hit.name}"
                    + (f" ({hit.type})" if hit.type else "")
                    + (f": {hit.description}" if hit.description else ""),
                )
            )
        for hit in self.relations:
            relations.append(
                (
                    "Relations",
                    f"- {hit.source} --{hit.type}--> {hit.target}"
                    + (f": {hit.description}" if hit.description else ""),
                )
            )
        if self.mode == "global":
            blocks = communities + summaries + chunks + entities + relations
        else:
            blocks = chunks + summaries + entities + relations + communities
        out: list = []
        used = 0
        heading = None
        for title, block in blocks:
            text = (f"## {title}\n" if title != heading else "") + block + "\n"
            cost = count_tokens(text)
            if used + cost > max_tokens:
                if out:
                    continue
                text = _cut(text, max_tokens, count_tokens)  # the best item alone is over the budget
                if not text:
                    continue
                cost = count_tokens(text)
            out.append(text)
            used += cost
            heading = title
        while len(out) > 1 and count_tokens("".join(out).rstrip("\n")) > max_tokens:
            out.pop()  # a tokenizer may count a join one token more than its parts
        return "".join(out).rstrip("\n")


def _cut(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` ending at a space (or a character) within ``max_tokens``,
    found by bisection."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    space = text.rfind(" ", 0, low)
    end = space if space > low // 2 else low
    return text[:end].rstrip()
