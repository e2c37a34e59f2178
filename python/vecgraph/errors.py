"""Exceptions raised by vecgraph.

Every exception derives from :class:`vecgraph.Error`; the ones that correspond to a builtin
also derive from it (``DimensionMismatchError`` is a ``ValueError``, ``NotFoundError`` a
``KeyError``), so ``except ValueError`` keeps working in code that does not know vecgraph.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "InvalidArgumentError",
    "DimensionMismatchError",
    "DuplicateKeyError",
    "NotFoundError",
    "EmbedderUnavailableError",
    "CorruptionError",
    "StorageError",
    "ReadOnlyError",
]


class Error(Exception):
    """Base class of every vecgraph error."""


class InvalidArgumentError(Error, ValueError):
    """A value outside its domain: ``k <= 0``, NaN in a vector, an unknown direction, ..."""


class DimensionMismatchError(Error, ValueError):
    """A vector whose length is not the graph's ``dim``."""


class DuplicateKeyError(Error, ValueError):
    """A key that is already in the graph, or appears twice in one batch."""


class NotFoundError(Error, KeyError):
    """A key that is not in the graph."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class EmbedderUnavailableError(Error, ImportError):
    """An embedder known by name whose package (or offline weights) is not installed here; the
    message names the embedder and how to install it."""


class CorruptionError(Error):
    """Damaged data on disk (checksum mismatch, truncated file, wrong format)."""


class StorageError(Error, OSError):
    """The operating system refused a file operation."""


class ReadOnlyError(Error):
    """A write to a graph that cannot take writes."""


class ShardUnavailableError(Error):
    """A shard of a :class:`vecgraph.distributed.ShardedGraph` did not answer: its process died
    and was not back within the timeout, or it failed for good. ``shard`` is its index."""

    def __init__(self, message: str, shard: int = -1) -> None:
        super().__init__(message)
        self.shard = shard

    def __reduce__(self) -> tuple:
        return (ShardUnavailableError, (str(self), self.shard))


def _short(value: object, width: int = 40) -> str:
    """repr(value), cut to ``width`` characters: how error messages quote what came."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _got(value: object) -> str:
    """What came, for a message: ``None``, or its type and :func:`_short` repr (``int 7``)."""
    return "None" if value is None else f"{type(value).__name__} {_short(value)}"
