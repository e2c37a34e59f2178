"""Chunks of a :class:`vecgraph.kb.documents.Document`: the pieces of text the knowledge base
embeds and links to their section.

:class:`Chunker` follows the document's structure: a chunk never crosses a section, and within
a section semantic-text-splitter's ``TextSplitter`` fills each chunk with the largest units that
fit the token budget: paragraphs first, then sentences (Unicode sentence boundaries, UAX #29,
so ``。！？`` end sentences too), then words, then graphemes. :class:`FixedChunker` is the
baseline it is measured against: fixed windows of tokens over the whole text, blind to
headings and sentences. Both count tokens with the same tokenizer: by default the Llama 2
tokenizer the ``wordllama`` package ships (:func:`vecgraph.memory.card.default_token_counter`).
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError, _got
from .documents import Document

__all__ = ["Chunk", "Chunker", "FixedChunker"]


@dataclass(frozen=True)
class Chunk:
    """A piece of a document's text.

    Attributes:
        index: its position among the document's chunks, from 0.
        section: the index in ``document.sections`` of its section (:class:`FixedChunker`:
            of the section where it starts).
        text: the text, without leading or trailing whitespace; never empty.
        heading_path: that section's ``heading_path``.
        tokens: its length in tokens of the chunker's tokenizer (no special tokens).
    """

    index: int
    section: int
    text: str
    heading_path: tuple[str, ...]
    tokens: int


@functools.lru_cache(maxsize=1)
def _default_tokenizer() -> Any:
    from ..memory.card import _llama2_tokenizer

    return _llama2_tokenizer()


def _check(max_tokens: Any, overlap_tokens: Any, tokenizer: Any, who: str) -> Any:
    """Checks the arguments of a chunker; returns the tokenizer to use."""
    for name, value in (("max_tokens", max_tokens), ("overlap_tokens", overlap_tokens)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{who}: {name} must be an int, got {_got(value)}")
    if max_tokens < 1:
        raise InvalidArgumentError(f"{who}: max_tokens must be at least 1, got {max_tokens}")
    if not 0 <= overlap_tokens < max_tokens:
        raise InvalidArgumentError(
            f"{who}: overlap_tokens must be at least 0 and less than max_tokens ({max_tokens}), "
            f"got {overlap_tokens}"
        )
    if tokenizer is None:
        return _default_tokenizer()
    from tokenizers import Tokenizer

    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"{who}: tokenizer must be a tokenizers.Tokenizer or None, got {_got(tokenizer)}")
    if tokenizer.truncation is not None or tokenizer.padding is not None:
        tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy that counts whole texts
        tokenizer.no_truncation()
        tokenizer.no_padding()
    return tokenizer


def _check_document(document: Any, who: str) -> None:
    if not isinstance(document, Document):
        raise TypeError(f"{who}: expected a vecgraph.kb.documents.Document, got {_got(document)}")


class _Base:
    """What both chunkers share: the budget, the tokenizer and the token count."""

    _kind = ""

    def __init__(self, max_tokens: int, overlap_tokens: int, tokenizer: Any) -> None:
        self._tokenizer = _check(max_tokens, overlap_tokens, tokenizer, type(self).__name__)
        self._max_tokens = max_tokens
        self._overlap_tokens = overlap_tokens

    @property
    def max_tokens(self) -> int:
        """The most tokens in a chunk."""
        return self._max_tokens

    @property
    def overlap_tokens(self) -> int:
        """The most tokens a chunk repeats from the end of the one before it."""
        return self._overlap_tokens

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers.Tokenizer`` that counts tokens."""
        return self._tokenizer

    @property
    def name(self) -> str:
        """The chunker and its budget, for reports: ``"structure-512/64"``, ``"fixed-256/32"``."""
        return f"{self._kind}-{self._max_tokens}/{self._overlap_tokens}"

    def count_tokens(self, text: str) -> int:
        """The number of tokens of ``text`` (no special tokens such as ``<s>``).

        Raises:
            TypeError: ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(f"count_tokens: text must be a str, got {_got(text)}")
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_tokens={self._max_tokens}, overlap_tokens={self._overlap_tokens})"


class Chunker(_Base):
    """Splits each section of a document into chunks of at most ``max_tokens`` tokens.

    A chunk never crosses a section; sections without a body give no chunk. Within a section,
    semantic-text-splitter (``TextSplitter.from_huggingface_tokenizer``) puts as many whole
    paragraphs in a chunk as fit, else whole sentences (Unicode UAX #29 sentence boundaries,
    which end sentences at ``。！？`` as well as ``.!?``), else words, else graphemes. Consecutive
    chunks cut within a paragraph share at most ``overlap_tokens`` tokens of whole sentences or
    words at the seam; a chunk that ends at a paragraph break shares nothing with the next.
    A chunk is longer than ``max_tokens`` only when a single grapheme alone is.

    Args:
        max_tokens: the most tokens in a chunk (int >= 1).
        overlap_tokens: the most tokens a chunk repeats from the one before (int,
            0 <= overlap_tokens < max_tokens).
        tokenizer: a ``tokenizers.Tokenizer``; None: the Llama 2 tokenizer of ``wordllama``.
            One with truncation or padding on is copied with them off.

    Raises:
        TypeError: ``max_tokens`` or ``overlap_tokens`` is not an int, or ``tokenizer`` is
            neither None nor a ``tokenizers.Tokenizer``.
        InvalidArgumentError: ``max_tokens < 1``, or ``overlap_tokens`` is negative or not less
            than ``max_tokens``.
        ImportError: ``tokenizer`` is None and ``wordllama`` is not installed.

    Example::

        chunks = Chunker(256, 32)(read_document("guide.md"))
    """

    _kind = "structure"

    # The default budget, chosen on the dev half of bench/eval_kb.py (66 Debian FAQ questions over
    # the FAQ and the Debian Reference, hybrid search): recall@10 / nDCG@10 0.758 / 0.597 at
    # 512/64, 0.658 / 0.540 at 256/32, 0.480 / 0.437 at 128/16 (answers run 23-500 words).
    def __init__(self, max_tokens: int = 512, overlap_tokens: int = 64, *, tokenizer: Any = None) -> None:
        super().__init__(max_tokens, overlap_tokens, tokenizer)
        from semantic_text_splitter import TextSplitter

        self._splitter = TextSplitter.from_huggingface_tokenizer(
            self._tokenizer, max_tokens, overlap=overlap_tokens
        )

    def __call__(self, document: Document) -> list[Chunk]:
        """The chunks of ``document``, in document order.

        Args:
            document: a :class:`vecgraph.kb.documents.Document`.

        Returns:
            list of :class:`Chunk`; ``tokens`` counted by :meth:`count_tokens`.

        Raises:
            TypeError: ``document`` is not a Document.
        """
        _check_document(document, "Chunker")
        bodies = [(number, section) for number, section in enumerate(document.sections) if section.text]
        pieces = (
            self._splitter.chunk_all([_break_runs(section.text) for _, section in bodies]) if bodies else []
        )
        placed = [
            (number, section.heading_path, text)
            for (number, section), texts in zip(bodies, pieces)
            for text in texts
            if text.strip()
        ]
        counts = self._tokenizer.encode_batch([text for _, _, text in placed], add_special_tokens=False)
        return [
            Chunk(index, number, text, path, len(encoding.ids))
            for index, ((number, path, text), encoding) in enumerate(zip(placed, counts))
        ]


class FixedChunker(_Base):
    """The baseline chunker: fixed windows of tokens over the whole document.

    The document's :attr:`~vecgraph.kb.documents.Document.text` (headings and bodies) is
    tokenized once; window ``i`` holds tokens ``[i * step, i * step + max_tokens)`` with
    ``step = max_tokens - overlap_tokens``, up to the first window that reaches the last token.
    A chunk's text is the slice of the document's text its tokens cover (from the first
    character of its first token to the last of its last token, so a character split over
    several byte tokens is kept whole, never decoded as U+FFFD), stripped of whitespace; a
    window of whitespace only gives no chunk. ``section`` and ``heading_path`` are those of the
    section where the stripped text starts; ``tokens`` is the window's length (re-encoding its
    text alone may count a token more or less at the edges, where a word was cut).

    Args:
        max_tokens: tokens per window (int >= 1).
        overlap_tokens: tokens shared by consecutive windows (int, 0 <= overlap_tokens < max_tokens).
        tokenizer: a ``tokenizers.Tokenizer``; None: the Llama 2 tokenizer of ``wordllama``.

    Raises:
        TypeError, InvalidArgumentError, ImportError: as :class:`Chunker`.
    """

    _kind = "fixed"

    def __init__(self, max_tokens: int = 256, overlap_tokens: int = 32, *, tokenizer: Any = None) -> None:
        super().__init__(max_tokens, overlap_tokens, tokenizer)

    def __call__(self, document: Document) -> list[Chunk]:
        """The windows of ``document``, in order.

        Args:
            document: a :class:`vecgraph.kb.documents.Document`.

        Returns:
            list of :class:`Chunk`.

        Raises:
            TypeError: ``document`` is not a Document.
        """
        _check_document(document, "FixedChunker")
        text, starts = document.text, document.section_starts
        offsets = self._tokenizer.encode(text, add_special_tokens=False).offsets
        n, step = len(offsets), self._max_tokens - self._overlap_tokens
        chunks: list[Chunk] = []
        for first in range(0, n, step):
            last = min(first + self._max_tokens, n)
            begin, end = offsets[first][0], offsets[last - 1][1]
            piece = text[begin:end]
            stripped = piece.strip()
            if stripped:
                at = begin + len(piece) - len(piece.lstrip())
                section = max(0, bisect.bisect_right(starts, at) - 1)
                heading_path = document.sections[section].heading_path
                chunks.append(Chunk(len(chunks), section, stripped, heading_path, last - first))
            if last == n:
                break
        return chunks


_LONG_RUN = re.compile(r"\S{1000,}")


def _break_runs(text: str) -> str:
    """``text`` with every run of 1,000 or more characters without whitespace broken by a
    newline every 500 characters: the splitter's time grows with the square of such a run's
    length (100,000 characters: 1 s; 3 MB: many minutes), and no tokenizer reads one as a word."""
    if len(text) < 1000 or not _LONG_RUN.search(text):
        return text
    return _LONG_RUN.sub(
        lambda m: "\n".join(m.group()[i : i + 500] for i in range(0, len(m.group()), 500)), text
    )
