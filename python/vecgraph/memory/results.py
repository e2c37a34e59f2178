"""What :meth:`vecgraph.Memory.recall`, ``history`` and ``expire`` return: :class:`MemoryHit`
(one memory) and :class:`Recall` (a list of them, best first, with ``to_context``)."""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Iterable, Optional

from ..errors import InvalidArgumentError, _got
from .values import _props, _when, from_us


class MemoryHit:
    """One memory as recall, history and expire return it.

    Attributes:
        id: the memory's id (str). text: what was remembered. kind: its kind (the node's label).
        source: "user", "tool", "document" or "model". session: the session it came from (or None).
        at: when it was said or happened (timezone-aware UTC datetime).
        recorded_at: when it was stored (UTC datetime).
        valid_to: when a newer version replaced it (UTC datetime), or None while current.
        expires_at: when its kind's TTL ends it (UTC datetime), or None (never).
        supersedes / superseded_by: ids of the previous / next version, or None.
        origin: "model" for a confirmed inference (else None). confirmed_at: when (or None).
        mentions: entity names it mentions (list of str). score: the fused recall score
            (float; 0.0 outside recall). ranks: its rank in each recall channel (or None).
    """

    __slots__ = ("id", "text", "kind", "source", "session", "at", "recorded_at", "valid_to", "expires_at",
                 "supersedes", "superseded_by", "origin", "confirmed_at", "mentions", "score", "ranks")

    def __init__(self, node: dict, score: float = 0.0, ranks: Optional[dict] = None) -> None:
        props = _props(node) if isinstance(node["props"], str) and node["props"] else (node["props"] or {})
        self.id = node["key"]
        self.text = node["text"]
        self.kind = node["label"]
        self.source = props.get("source")
        self.session = props.get("session")
        self.at = from_us(node["ts"])
        self.recorded_at = from_us(props.get("recorded_at", node["ts"]))
        self.valid_to = _when(props.get("valid_to"))
        self.expires_at = _when(props.get("expires_at"))
        self.supersedes = props.get("supersedes")
        self.superseded_by = props.get("superseded_by")
        self.origin = props.get("origin")
        self.confirmed_at = from_us(props["confirmed_at"]) if props.get("confirmed_at") is not None else None
        self.mentions = list(props.get("mentions", []))
        self.score = float(score)
        self.ranks = dict(ranks or {})

    def to_dict(self) -> dict:
        """JSON-ready: times as ISO 8601 strings."""
        out = {}
        for name in self.__slots__:
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        return out

    def __repr__(self) -> str:
        return (f"MemoryHit(id={self.id!r}, kind={self.kind!r}, source={self.source!r}, at={self.at.isoformat()!r}, "
                f"score={self.score:.4f}, text={self.text[:60]!r})")


class Recall(list):
    """The memories :meth:`Memory.recall` returns, best first (a list of :class:`MemoryHit`)."""

    def __init__(self, hits: Iterable[MemoryHit], count_tokens: Callable[[str], int]) -> None:
        super().__init__(hits)
        self._count_tokens = count_tokens

    def to_context(self, max_tokens: int = 800, *, count_tokens: Optional[Callable[[str], int]] = None) -> str:
        """The memories as cited lines for a prompt, best first, within ``max_tokens``:
        ``[m-…] (kind, source, YYYY-MM-DD) text``; a line that does not fit is left out, never cut.

        Args:
            max_tokens: the budget (int >= 1), counted by ``count_tokens`` (default: the store's).

        Returns:
            The lines joined by newlines ("" when nothing fits).

        Raises:
            TypeError / InvalidArgumentError: max_tokens not an int >= 1.
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise TypeError(f"max_tokens must be an int >= 1, got {_got(max_tokens)}")
        if max_tokens < 1:
            raise InvalidArgumentError(f"max_tokens must be an int >= 1, got {max_tokens}")
        count = count_tokens or self._count_tokens
        lines: list = []
        used = 0
        for hit in self:
            line = f"[{hit.id}] ({hit.kind}, {hit.source}, {hit.at.date().isoformat()}) {hit.text}"
            cost = count(line + "\n")
            if used + cost <= max_tokens:
                lines.append(line)
                used += cost
        return "\n".join(lines)


# ------------------------------------------------------------------------------ the store
