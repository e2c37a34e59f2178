"""The shared types and checks of the knowledge base's hooks.

Every step of :mod:`vecgraph.kb` that a language model can do (situating a chunk in its document,
extracting entities and relations, summarising a community or a RAPTOR cluster, the map step of a
global search) is a hook: a plain callable with an offline default, replaceable by the chat-model
versions of :mod:`vecgraph.kb.llm_hooks` or by the user's own. What a hook returns is checked
here before the knowledge base uses it, and what a hook raises is wrapped into a
:class:`HookError` that names the hook.

- :class:`Entity`, :class:`Relation`, :class:`Extraction`: what an extractor hook returns.
- :func:`check_extraction`: an extractor hook's return value, checked and normalised.
- :func:`check_text`: the return value of a hook that must return a str.
- :func:`call_hook`: a hook called, its exceptions wrapped into :class:`HookError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError, _got

__all__ = ["Entity", "Extraction", "HookError", "Relation", "call_hook", "check_extraction", "check_text"]

#: The relation type given to a relation whose type is empty.
DEFAULT_RELATION_TYPE = "related_to"

_EXPECTED = "expected an Extraction or {'entities': [...], 'relations': [...]} (or a list of entity names)"


class HookError(InvalidArgumentError):
    """A hook that raised (:func:`call_hook`: the message names the hook and its exception, which
    is the ``__cause__``), or returned a value of the wrong shape (:func:`check_extraction`,
    :func:`check_text`: the message names the hook, what was expected and what came)."""


@dataclass(frozen=True)
class Entity:
    """An entity an extractor found.

    Attributes:
        name: its name, the entity's identity within the knowledge base (whitespace collapsed,
            not empty).
        type: its kind, e.g. ``"person"`` (``""``: unknown).
        description: what the text says about it (``""``: nothing).
    """

    name: str
    type: str = ""
    description: str = ""


@dataclass(frozen=True)
class Relation:
    """A relation between two entities, by their names.

    Attributes:
        source, target: the entities' names.
        type: the relation's kind, e.g. ``"works_for"`` (:data:`DEFAULT_RELATION_TYPE` when empty).
        description: why the two are related, in the text's words.
        weight: how strong the relation is (finite, > 0; extractors that grade strength 1..10
            give the grade).
    """

    source: str
    target: str
    type: str = DEFAULT_RELATION_TYPE
    description: str = ""
    weight: float = 1.0


@dataclass(frozen=True)
class Extraction:
    """What an extractor hook returns for one text: entities, and relations among them."""

    entities: tuple[Entity, ...] = ()
    relations: tuple[Relation, ...] = ()


def _name(value: Any, hook: str, where: str) -> str:
    if not isinstance(value, str):
        raise HookError(f"the {hook} hook returned {where} = {_got(value)}, expected a str")
    name = " ".join(value.split())
    if not name:
        raise HookError(f"the {hook} hook returned {where} = {value!r}, expected a non-empty name")
    return name


def _field_text(value: Any, hook: str, where: str) -> str:
    if not isinstance(value, str):
        raise HookError(f"the {hook} hook returned {where} = {_got(value)}, expected a str")
    return value.strip()


def _fields(item: dict, allowed: tuple[str, ...], hook: str, where: str) -> None:
    extra = sorted(str(key) for key in item if key not in allowed)
    if extra:
        raise HookError(f"the {hook} hook returned {where} with keys {extra}, expected only {list(allowed)}")


def _entity(item: Any, hook: str, where: str) -> Entity:
    if isinstance(item, str):
        return Entity(_name(item, hook, where))
    if isinstance(item, Entity):
        fields = {"name": item.name, "type": item.type, "description": item.description}
    elif isinstance(item, dict):
        _fields(item, ("name", "type", "description"), hook, where)
        if "name" not in item:
            raise HookError(f"the {hook} hook returned {where} without a 'name': {_got(item)}")
        fields = {"type": "", "description": "", **item}
    else:
        raise HookError(
            f"the {hook} hook returned {where} = {_got(item)}, expected an Entity, "
            "a dict {'name': ..., 'type': ..., 'description': ...} or a name"
        )
    return Entity(
        _name(fields["name"], hook, f"{where}.name"),
        _field_text(fields["type"], hook, f"{where}.type"),
        _field_text(fields["description"], hook, f"{where}.description"),
    )


def _relation(item: Any, hook: str, where: str) -> Relation:
    if isinstance(item, Relation):
        fields = {
            "source": item.source,
            "target": item.target,
            "type": item.type,
            "description": item.description,
            "weight": item.weight,
        }
    elif isinstance(item, dict):
        _fields(item, ("source", "target", "type", "description", "weight"), hook, where)
        missing = [key for key in ("source", "target") if key not in item]
        if missing:
            raise HookError(f"the {hook} hook returned {where} without {missing}: {_got(item)}")
        fields = {"type": DEFAULT_RELATION_TYPE, "description": "", "weight": 1.0, **item}
    else:
        raise HookError(
            f"the {hook} hook returned {where} = {_got(item)}, expected a Relation or "
            "a dict {'source': ..., 'target': ..., 'type': ..., 'description': ..., "
            "'weight': ...}"
        )
    source = _name(fields["source"], hook, f"{where}.source")
    target = _name(fields["target"], hook, f"{where}.target")
    if source == target:
        raise HookError(
            f"the {hook} hook returned {where} from {source!r} to itself, expected a "
            "relation between two entities"
        )
    weight = fields["weight"]
    if (
        isinstance(weight, bool)
        or not isinstance(weight, (int, float))
        or not math.isfinite(weight)
        or weight <= 0
    ):
        raise HookError(
            f"the {hook} hook returned {where}.weight = {_got(weight)}, expected a finite number > 0"
        )
    return Relation(
        source,
        target,
        _field_text(fields["type"], hook, f"{where}.type") or DEFAULT_RELATION_TYPE,
        _field_text(fields["description"], hook, f"{where}.description"),
        float(weight),
    )


def _items(value: Any, hook: str, key: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise HookError(f"the {hook} hook returned {key!r} = {_got(value)}, expected a list")
    return list(value)


def check_extraction(value: Any, hook: str) -> Extraction:
    """An extractor hook's return value, checked and normalised into an :class:`Extraction`.

    Args:
        value: an :class:`Extraction`; a dict ``{"entities": [...], "relations": [...]}`` (either
            key may be left out; no other key) whose entities are :class:`Entity` objects, dicts
            ``{"name", "type"?, "description"?}`` or names, and whose relations are
            :class:`Relation` objects or dicts ``{"source", "target", "type"?, "description"?,
            "weight"?}``; or a list (or tuple) of entities alone, e.g. names.
        hook: the hook's name for messages, e.g. ``"extractor"``.

    Returns:
        The extraction, with every name's whitespace collapsed (``" Ada  Lovelace "`` is
        ``"Ada Lovelace"``), types and descriptions stripped, an empty relation type made
        :data:`DEFAULT_RELATION_TYPE`, weights as float. Entities of the same name are one entity
        (the first non-empty type, the distinct descriptions joined by a space), in order of first
        appearance. A relation end that is not among the entities is added as an entity of its
        own (type and description empty) after them, so every relation joins two listed entities.
        Relations are kept as listed (repeats too: merging across texts is the caller's).

    Raises:
        HookError: (an :class:`~vecgraph.errors.InvalidArgumentError`) anything else (``None``
            too: a caller treating None as "skip this text" checks for it first); the message
            names the hook, what was expected and what came, and where (``entities[2].name``): a
            name that is not a str or is blank, a type or description that is not a str, a dict
            with other keys, a relation from an entity to itself, a weight that is not a finite
            number > 0.
    """
    if isinstance(value, Extraction):
        raw_entities, raw_relations = list(value.entities), list(value.relations)
    elif isinstance(value, dict):
        extra = sorted(str(key) for key in value if key not in ("entities", "relations"))
        if extra:
            raise HookError(f"the {hook} hook returned a dict with keys {extra}, {_EXPECTED}")
        raw_entities = _items(value.get("entities", []), hook, "entities")
        raw_relations = _items(value.get("relations", []), hook, "relations")
    elif isinstance(value, (list, tuple)):
        raw_entities, raw_relations = list(value), []
    else:
        raise HookError(f"the {hook} hook returned {_got(value)}, {_EXPECTED}")
    merged: dict[str, list] = {}  # name -> [type, [descriptions]]
    for index, item in enumerate(raw_entities):
        entity = _entity(item, hook, f"entities[{index}]")
        slot = merged.setdefault(entity.name, [entity.type, []])
        slot[0] = slot[0] or entity.type
        if entity.description and entity.description not in slot[1]:
            slot[1].append(entity.description)
    relations = tuple(
        _relation(item, hook, f"relations[{index}]") for index, item in enumerate(raw_relations)
    )
    for relation in relations:
        for end in (relation.source, relation.target):
            merged.setdefault(end, ["", []])
    entities = tuple(
        Entity(name, kind, " ".join(descriptions)) for name, (kind, descriptions) in merged.items()
    )
    return Extraction(entities, relations)


def check_text(value: Any, hook: str, what: str) -> str:
    """``value`` when it is a str, the return value of a hook that must return one.

    Args:
        value: what the hook returned.
        hook: the hook's name for messages, e.g. ``"contextualizer"``.
        what: what the hook should have returned, for messages, e.g. ``"a str (the chunk's context)"``.

    Raises:
        HookError: (an :class:`~vecgraph.errors.InvalidArgumentError`) ``value`` is not a str;
            the message names the hook, ``what`` and what came.
    """
    if not isinstance(value, str):
        raise HookError(f"the {hook} hook returned {_got(value)}, expected {what}")
    return value


def _describe(hook: Any) -> str:
    name = getattr(hook, "__qualname__", None) or type(hook).__qualname__
    return str(name)


def call_hook(hook: Callable[..., Any], name: str, *args: Any) -> Any:
    """``hook(*args)``, with any exception it raises wrapped into a :class:`HookError`.

    Args:
        hook: the hook, any callable.
        name: the hook's role for messages, e.g. ``"extractor"``.
        args: passed to the hook as they are.

    Returns:
        What the hook returned, unchecked (see :func:`check_extraction`, :func:`check_text`).

    Raises:
        HookError: the hook raised an :class:`Exception` (a :class:`HookError` passes as it is);
            the message is ``"the <name> hook (<its qualified name>) raised <Class>: <message>"``
            and the original exception is the ``__cause__``. ``KeyboardInterrupt`` and other
            non-``Exception`` exceptions pass unwrapped.
    """
    try:
        return hook(*args)
    except HookError:
        raise
    except Exception as exc:
        raise HookError(f"the {name} hook ({_describe(hook)}) raised {type(exc).__name__}: {exc}") from exc
