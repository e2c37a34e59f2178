"""Chat-model implementations of the knowledge base's hooks (see :mod:`vecgraph.kb.hooks`).

Each takes a chat model: a :class:`vecgraph.llm.OpenAIChat`, or any callable
``(messages, *, json_schema=None, max_tokens=None) -> str`` (:class:`vecgraph.llm.Chat`). None
of them is used unless a user passes one to the knowledge base; every hook has an offline default.

- :class:`LLMContextualizer`: a short context situating a chunk within its document, prepended
  to the chunk before it is embedded and indexed (Anthropic, "Introducing Contextual Retrieval",
  2024).
- :class:`LLMExtractor`: entities and relations of a text, as a JSON object (after the entity and
  relationship extraction prompt of Microsoft GraphRAG: Edge et al., "From Local to Global: A
  Graph RAG Approach to Query-Focused Summarization", 2024).
- :class:`LLMSummarizer`: a summary of a community's or a RAPTOR cluster's texts (GraphRAG's
  community reports; Sarthi et al., "RAPTOR: Recursive Abstractive Processing for
  Tree-Organized Retrieval", ICLR 2024).
- :class:`LLMMap`: GraphRAG global search's map step, a partial answer to a question from one
  community summary with a helpfulness score 0..100.

Replies that must be JSON are asked for with a JSON Schema (structured output) and checked all
the same; a reply that cannot be used is asked for again once, saying what was wrong, and a
second bad reply is recorded in the hook's ``failures`` instead of raising. Errors of the
endpoint itself (:class:`vecgraph.remote.RemoteError`, raised once its retries are spent)
propagate.

Token counts here are estimated as ``len(text) // 4`` characters per token (about right for
English with the tokenizers of current chat models), which is all a budget needs.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..arguments import _count_at_least
from ..errors import InvalidArgumentError, _got, _short
from .hooks import Extraction, check_extraction, check_text

__all__ = ["LLMContextualizer", "LLMExtractor", "LLMMap", "LLMSummarizer"]

#: Characters per token of the budgets' estimate.
CHARS_PER_TOKEN = 4

#: The default entity types of :class:`LLMExtractor`.
ENTITY_TYPES = ("person", "organization", "software", "concept", "place", "event")

CONTEXT_INSTRUCTION = (
    "Please give a short succinct context to situate this chunk within the overall document for the "
    "purposes of improving search retrieval of the chunk. Answer only with the succinct context and "
    "nothing else."
)

EXTRACTION_SYSTEM = (
    "You extract a knowledge graph from text: the entities it names and the relations "
    "it states among them. You answer with JSON only."
)

EXTRACTION_PROMPT = """-Goal-
Given a text and a list of entity types, identify all entities of those types in the text and all \
relationships among the identified entities.

-Steps-
1. Identify all entities. For each identified entity, give:
- name: the name of the entity, as the text writes it, capitalized
- type: one of the following types: [{types}]
- description: a comprehensive description of the entity's attributes and activities, from the text alone
2. From the entities identified in step 1, identify all pairs (source, target) of entities that are \
*clearly related* to each other. For each pair, give:
- source: the name of the source entity, as identified in step 1
- target: the name of the target entity, as identified in step 1
- type: a short snake_case label of the relationship, e.g. works_for, part_of, created_by
- description: an explanation of why the source entity and the target entity are related
- strength: an integer from 1 to 10 for how strong the relationship between them is
3. Answer with one JSON object {{"entities": [...], "relations": [...]}} and nothing else; a list is \
empty when there is nothing to list.

-Text-
{text}"""

SUMMARY_SYSTEM = "You write faithful, dense summaries of texts, using only what the texts say."

SUMMARY_PROMPT = """Write a summary of the following texts that covers the main entities, facts and \
themes, in at most {words} words. Answer only with the summary.

Title: {title}

{texts}"""

MAP_SYSTEM = (
    "You answer a question about a collection of documents from one summary of a part of it, and "
    "rate how helpful that summary is. You answer with JSON only."
)

MAP_PROMPT = """-Question-
{question}

-Summary-
{summary}

Using only the summary, answer the question as far as the summary allows, and rate how helpful the \
summary is for answering it with a score from 0 (nothing relevant) to 100 (answers it fully). When \
the summary holds nothing relevant, the answer is "" and the score 0. Answer with one JSON object \
{{"answer": "...", "score": ...}} and nothing else."""

RETRY_PROMPT = (
    "That reply cannot be used: {reason}. Answer again, with only the JSON object that the "
    "instructions ask for."
)


class _BadReply(ValueError):
    """A reply that cannot be used; the message says why."""


def _check_chat(chat: Any) -> Callable[..., str]:
    if not callable(chat):
        raise TypeError(
            f"chat must be an OpenAIChat or a callable (messages, *, json_schema=None, "
            f"max_tokens=None) -> str, got {type(chat).__name__}"
        )
    return chat


def _positive(value: Any, label: str, optional: bool = False) -> int | None:
    return None if value is None and optional else _count_at_least(value, label, 1)


def _ask(chat: Callable[..., str], messages: list[dict], **options: Any) -> str:
    reply = chat(messages, **options)
    return check_text(reply, "chat", "a str (the model's reply)")


def _json_object(reply: str) -> dict:
    """The JSON object of ``reply`` (a Markdown code fence around it is taken off)."""
    text = reply.strip()
    fenced = re.fullmatch(r"```[A-Za-z]*\s*(.*?)\s*```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    if not text:
        raise _BadReply("the reply is empty")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise _BadReply(f"the reply is not JSON ({e.msg} at character {e.pos}): {_short(text, 80)}") from None
    if not isinstance(value, dict):
        raise _BadReply(f"the reply is a JSON {type(value).__name__}, expected an object")
    return value


def _ask_json(
    chat: Callable[..., str], messages: list[dict], schema: dict, max_tokens: int, parse: Callable[[str], Any]
) -> tuple[Any, str, bool]:
    """``(parse(reply), "", retried)``, asking once more when the first reply is bad;
    ``(None, reason, True)`` when the second is bad too."""
    reply = _ask(chat, messages, json_schema=schema, max_tokens=max_tokens)
    try:
        return parse(reply), "", False
    except _BadReply as e:
        reason = str(e)
    again = messages + [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": RETRY_PROMPT.format(reason=reason)},
    ]
    reply = _ask(chat, again, json_schema=schema, max_tokens=max_tokens)
    try:
        return parse(reply), "", True
    except _BadReply as e:
        return None, str(e), True


def _number(value: Any, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if low <= value <= high else None


class LLMContextualizer:
    """The contextualizer hook by a chat model: a short context situating a chunk within its
    whole document, to prepend to the chunk before it is embedded and indexed (Anthropic,
    "Introducing Contextual Retrieval", 2024; the prompt is theirs, with the document's title
    and the chunk's headings added).

    The user message starts with the whole document, ``<document>...</document>``, the same
    leading text for every chunk of one document, so that providers' prompt caching (a prefix
    cache) serves the document once; then ``<chunk>...</chunk>``, the chunk's headings, and the
    instruction. Replies are cached in an LRU keyed by the document's sha256 (title and text as
    sent), the chunk's text and headings: a chunk seen before (a re-run) sends nothing.

    Args:
        chat: an :class:`vecgraph.llm.OpenAIChat` or a callable of its signature.
        max_tokens: the cap on a reply's tokens (>= 1).
        max_document_tokens: when set (>= 1), a document longer than this many tokens (estimated
            as ``len(text) // 4``) is cut to its first ``4 * max_document_tokens`` characters, with
            ``[...]`` after them; the chunk is sent whole.
        cache_size: the replies the LRU keeps (>= 1).

    Raises:
        TypeError, InvalidArgumentError: a chat that is not callable; a bad number.
    """

    def __init__(
        self,
        chat: Callable[..., str],
        *,
        max_tokens: int = 100,
        max_document_tokens: int | None = None,
        cache_size: int = 10_000,
    ) -> None:
        self.chat = _check_chat(chat)
        self.max_tokens = _positive(max_tokens, "max_tokens")
        self.max_document_tokens = _positive(max_document_tokens, "max_document_tokens", optional=True)
        self.cache_size = _positive(cache_size, "cache_size")
        self.cache_hits = 0
        self._cache: OrderedDict[tuple, str] = OrderedDict()
        self._lock = threading.Lock()

    def document_part(self, document: Any) -> str:
        """The leading text of the user message for every chunk of ``document`` (a str)."""
        text = getattr(document, "text", None)
        title = getattr(document, "title", "") or ""
        if not isinstance(text, str) or not isinstance(title, str):
            raise TypeError(
                f"document must have a str .text and .title, got text {_got(text)}, title {_got(title)}"
            )
        if self.max_document_tokens is not None and len(text) // CHARS_PER_TOKEN > self.max_document_tokens:
            text = text[: CHARS_PER_TOKEN * self.max_document_tokens] + " [...]"
        heading = f"Title: {title}\n\n" if title.strip() else ""
        return f"<document>\n{heading}{text}\n</document>\n"

    def messages(self, document: Any, chunk: Any) -> list[dict]:
        """The messages sent for ``chunk`` of ``document``: one user message."""
        return [{"role": "user", "content": self._prompt(self.document_part(document), chunk)}]

    @staticmethod
    def _chunk_fields(chunk: Any) -> tuple[str, tuple[str, ...]]:
        text = getattr(chunk, "text", None)
        headings = tuple(getattr(chunk, "heading_path", ()) or ())
        if not isinstance(text, str) or not all(isinstance(h, str) for h in headings):
            raise TypeError(
                f"chunk must have a str .text and a tuple of str .heading_path, got text "
                f"{_got(text)}, heading_path {_got(headings)}"
            )
        return text, headings

    def _prompt(self, document_part: str, chunk: Any) -> str:
        text, headings = self._chunk_fields(chunk)
        under = f"It comes under the headings: {' > '.join(headings)}\n" if headings else ""
        return (
            f"{document_part}Here is the chunk we want to situate within the whole document\n"
            f"<chunk>\n{text}\n</chunk>\n{under}{CONTEXT_INSTRUCTION}"
        )

    def __call__(self, document: Any, chunk: Any) -> str:
        """The context of ``chunk`` within ``document``, stripped (a str; from the cache when
        this chunk of this document was asked before).

        Args:
            document: has ``.title`` (str) and ``.text`` (str, the whole document's text).
            chunk: has ``.text`` (str) and ``.heading_path`` (tuple of str).

        Raises:
            TypeError: a document or chunk without those attributes.
            InvalidArgumentError: the chat returned something other than a str.
            RemoteError: the endpoint failed (after its retries).
        """
        part = self.document_part(document)
        text, headings = self._chunk_fields(chunk)
        key = (hashlib.sha256(part.encode("utf-8")).hexdigest(), text, headings)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.cache_hits += 1
                return self._cache[key]
        messages = [{"role": "user", "content": self._prompt(part, chunk)}]
        context = _ask(self.chat, messages, max_tokens=self.max_tokens).strip()
        with self._lock:
            self._cache[key] = context
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return context


class LLMExtractor:
    """The extractor hook by a chat model: the entities of a text and the relations among them,
    asked for as one JSON object (a JSON Schema sent as structured output), in the manner of
    Microsoft GraphRAG's entity and relationship extraction (Edge et al., 2024): entities with
    a name, a type among ``entity_types`` and a description; relations with a source, a target,
    a type, a description and a strength 1..10, which becomes the :class:`Relation`'s weight.

    A reply is checked: JSON, the schema's shape (``entities`` and ``relations`` lists of
    objects, names and texts as str, strengths numbers in 1..10), then
    :func:`~vecgraph.kb.hooks.check_extraction` (names' whitespace collapsed, entities of one
    name merged, a relation end that is not among the entities added as an entity). Entity
    types are lower-cased; a type outside ``entity_types`` is kept. A relation from an entity to
    itself is dropped. A bad reply is asked for again once, the model told what was wrong; when
    the second is bad too, ``(text[:80], reason)`` is appended to :attr:`failures` and the call
    returns None (the caller skips the text and reports it).

    Args:
        chat: an :class:`vecgraph.llm.OpenAIChat` or a callable of its signature.
        entity_types: the entity types asked for (non-empty str, at least one).
        max_tokens: the cap on a reply's tokens (>= 1).

    Attributes:
        failures: ``[(text[:80], reason), ...]`` of the texts given up on.
        retries: the number of replies asked for again.

    Raises:
        TypeError, InvalidArgumentError: a chat that is not callable; no or bad entity types; a
            bad number.
    """

    def __init__(
        self, chat: Callable[..., str], *, entity_types: Sequence[str] = ENTITY_TYPES, max_tokens: int = 800
    ) -> None:
        self.chat = _check_chat(chat)
        if isinstance(entity_types, str) or not all(isinstance(t, str) and t.strip() for t in entity_types):
            raise TypeError(f"entity_types must be a sequence of non-empty str, got {_got(entity_types)}")
        self.entity_types = tuple(dict.fromkeys(t.strip().lower() for t in entity_types))
        if not self.entity_types:
            raise InvalidArgumentError("entity_types must name at least one type, got none")
        self.max_tokens = _positive(max_tokens, "max_tokens")
        self.failures: list[tuple[str, str]] = []
        self.retries = 0

    @property
    def schema(self) -> dict:
        """The JSON Schema of the reply (strict: every property required, no others)."""
        text = {"type": "string"}
        entity = {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "type", "description"],
            "properties": {
                "name": text,
                "type": {"type": "string", "enum": list(self.entity_types)},
                "description": text,
            },
        }
        relation = {
            "type": "object",
            "additionalProperties": False,
            "required": ["source", "target", "type", "description", "strength"],
            "properties": {
                "source": text,
                "target": text,
                "type": text,
                "description": text,
                "strength": {"type": "integer"},
            },
        }
        return {
            "title": "extraction",
            "type": "object",
            "additionalProperties": False,
            "required": ["entities", "relations"],
            "properties": {
                "entities": {"type": "array", "items": entity},
                "relations": {"type": "array", "items": relation},
            },
        }

    def messages(self, text: str) -> list[dict]:
        """The messages sent for ``text``: a system message and the extraction prompt."""
        prompt = EXTRACTION_PROMPT.format(types=", ".join(self.entity_types), text=text)
        return [{"role": "system", "content": EXTRACTION_SYSTEM}, {"role": "user", "content": prompt}]

    def __call__(self, text: str) -> Extraction | None:
        """The entities and relations of ``text``; an empty :class:`Extraction` for a blank
        text (no request); None when two replies could not be used (see :attr:`failures`).

        Raises:
            TypeError: ``text`` is not a str.
            InvalidArgumentError: the chat returned something other than a str.
            RemoteError: the endpoint failed (after its retries).
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text.strip():
            return Extraction()
        value, reason, retried = _ask_json(
            self.chat, self.messages(text), self.schema, self.max_tokens, self.parse
        )
        self.retries += int(retried)
        if value is None:
            self.failures.append((text[:80], reason))
        return value

    def parse(self, reply: str) -> Extraction:
        """The :class:`Extraction` of a reply; raises ``ValueError`` saying why it cannot be used."""
        found = _json_object(reply)
        for key in ("entities", "relations"):
            if not isinstance(found.get(key), list):
                raise _BadReply(f"'{key}' is {_got(found.get(key))}, expected a list")
        entities = []
        for index, item in enumerate(found["entities"]):
            if not isinstance(item, dict):
                raise _BadReply(f"entities[{index}] is {_got(item)}, expected an object")
            kind = item.get("type", "")
            entities.append(
                {
                    "name": item.get("name"),
                    "type": kind.strip().lower() if isinstance(kind, str) else kind,
                    "description": item.get("description", ""),
                }
            )
        relations = []
        for index, item in enumerate(found["relations"]):
            if not isinstance(item, dict):
                raise _BadReply(f"relations[{index}] is {_got(item)}, expected an object")
            strength = _number(item.get("strength"), 1, 10)
            if strength is None:
                raise _BadReply(
                    f"relations[{index}].strength is {_got(item.get('strength'))}, expected a number "
                    "from 1 to 10"
                )
            source, target = item.get("source"), item.get("target")
            if isinstance(source, str) and isinstance(target, str) and source.split() == target.split():
                continue  # an entity related to itself says nothing
            relations.append(
                {
                    "source": source,
                    "target": target,
                    "type": item.get("type", ""),
                    "description": item.get("description", ""),
                    "weight": strength,
                }
            )
        try:
            return check_extraction({"entities": entities, "relations": relations}, "extractor")
        except InvalidArgumentError as e:
            raise _BadReply(str(e).replace("the extractor hook returned ", "", 1)) from None


class LLMSummarizer:
    """The summarizer hook by a chat model: a summary of the texts of a community (GraphRAG's
    community reports, Edge et al., 2024) or of a RAPTOR cluster (Sarthi et al., 2024) that
    covers their main entities, facts and themes, in at most ``max_tokens * 3 // 4`` words (about
    ``max_tokens`` tokens).

    The texts are sent in order, each in ``<text>...</text>``, until ``max_input_tokens`` (as
    ``len // 4``) is reached: a first text longer than that is cut, later texts that do not fit
    are left out and the prompt says how many (GraphRAG caps a community report's context at
    8,000 tokens by default too).

    Args:
        chat: an :class:`vecgraph.llm.OpenAIChat` or a callable of its signature.
        max_tokens: the cap on a reply's tokens (>= 1).
        max_input_tokens: the budget of the texts sent (>= 1).

    Raises:
        TypeError, InvalidArgumentError: a chat that is not callable; a bad number.
    """

    def __init__(
        self, chat: Callable[..., str], *, max_tokens: int = 300, max_input_tokens: int = 8000
    ) -> None:
        self.chat = _check_chat(chat)
        self.max_tokens = _positive(max_tokens, "max_tokens")
        self.max_input_tokens = _positive(max_input_tokens, "max_input_tokens")

    def messages(self, title: str, texts: list[str]) -> list[dict]:
        """The messages sent: a system message and the summary prompt."""
        if not isinstance(title, str):
            raise TypeError(f"title must be a str, got {type(title).__name__}")
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError(f"texts must be a list of str, got {_got(texts)}")
        if not texts:
            raise InvalidArgumentError(
                f"texts must hold at least one text to summarise (title {title!r}), got none"
            )
        budget = CHARS_PER_TOKEN * self.max_input_tokens
        parts: list[str] = []
        for text in texts:
            if parts and len(text) > budget:
                break
            text = text[:budget]
            budget -= len(text)
            parts.append(f"<text>\n{text}\n</text>")
        if len(parts) < len(texts):
            parts.append(f"({len(texts) - len(parts)} more texts left out for length)")
        prompt = SUMMARY_PROMPT.format(
            words=max(1, self.max_tokens * 3 // 4), title=title, texts="\n".join(parts)
        )
        return [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": prompt}]

    def __call__(self, title: str, texts: list[str]) -> str:
        """The summary of ``texts`` (a str, stripped).

        Args:
            title: what the texts are, e.g. a community's name or its main entities.
            texts: the texts, at least one.

        Raises:
            TypeError: a title or text that is not a str.
            InvalidArgumentError: no texts; the chat returned something other than a str.
            RemoteError: the endpoint failed (after its retries).
        """
        return _ask(self.chat, self.messages(title, texts), max_tokens=self.max_tokens).strip()


class LLMMap:
    """The map hook of a global search by a chat model (Microsoft GraphRAG's global search, Edge
    et al., 2024): from one community summary, a partial answer to a question and a score 0..100
    of how helpful the summary is; the reduce step keeps the best-scored answers.

    The reply is one JSON object ``{"answer": str, "score": number 0..100}`` (a JSON Schema sent
    as structured output), checked; a bad reply is asked for again once, and when the second is
    bad too ``(summary[:80], reason)`` is appended to :attr:`failures` and the call returns
    ``("", 0.0)``.

    Args:
        chat: an :class:`vecgraph.llm.OpenAIChat` or a callable of its signature.
        max_tokens: the cap on a reply's tokens (>= 1).

    Attributes:
        failures: ``[(summary[:80], reason), ...]`` of the summaries given up on.
        retries: the number of replies asked for again.

    Raises:
        TypeError, InvalidArgumentError: a chat that is not callable; a bad number.
    """

    def __init__(self, chat: Callable[..., str], *, max_tokens: int = 300) -> None:
        self.chat = _check_chat(chat)
        self.max_tokens = _positive(max_tokens, "max_tokens")
        self.failures: list[tuple[str, str]] = []
        self.retries = 0

    @property
    def schema(self) -> dict:
        """The JSON Schema of the reply (strict: every property required, no others)."""
        return {
            "title": "map_answer",
            "type": "object",
            "additionalProperties": False,
            "required": ["answer", "score"],
            "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
        }

    def messages(self, question: str, summary: str) -> list[dict]:
        """The messages sent: a system message and the map prompt."""
        return [
            {"role": "system", "content": MAP_SYSTEM},
            {"role": "user", "content": MAP_PROMPT.format(question=question, summary=summary)},
        ]

    def __call__(self, question: str, summary: str) -> tuple[str, float]:
        """``(answer, score)``: the summary's answer to ``question`` (stripped; ``""`` when it
        holds nothing relevant) and its helpfulness in 0..100; ``("", 0.0)`` for a blank summary
        (no request) or two replies that could not be used.

        Raises:
            TypeError: a question or summary that is not a str.
            InvalidArgumentError: the chat returned something other than a str.
            RemoteError: the endpoint failed (after its retries).
        """
        for label, value in (("question", question), ("summary", summary)):
            if not isinstance(value, str):
                raise TypeError(f"{label} must be a str, got {type(value).__name__}")
        if not summary.strip():
            return "", 0.0
        value, reason, retried = _ask_json(
            self.chat, self.messages(question, summary), self.schema, self.max_tokens, self.parse
        )
        self.retries += int(retried)
        if value is None:
            self.failures.append((summary[:80], reason))
            return "", 0.0
        return value

    @staticmethod
    def parse(reply: str) -> tuple[str, float]:
        """``(answer, score)`` of a reply; raises ``ValueError`` saying why it cannot be used."""
        found = _json_object(reply)
        answer = found.get("answer")
        if not isinstance(answer, str):
            raise _BadReply(f"'answer' is {_got(answer)}, expected a str")
        score = _number(found.get("score"), 0, 100)
        if score is None:
            raise _BadReply(f"'score' is {_got(found.get('score'))}, expected a number from 0 to 100")
        return answer.strip(), score
