"""The indexes a :class:`~vecgraph.Graph` keeps beside its engine: BM25 over node texts
(:class:`vecgraph.text.TextIndex`) and entity names (:class:`vecgraph.entities.EntityIndex`).

Each is made on first use and kept in step with the graph's writes under the graph's text lock
(``_text_lock``), in LSN order. The graph is the source of truth: an index whose write fails, or
that is found damaged, behind the last write that changed texts, or ahead of the graph, is
dropped with a warning and rebuilt from the graph's state. A folder graph keeps its BM25 index in
``<folder>/text``; a read-only graph searches a private copy of it, an in-memory graph (or one
after close) an index in memory. The facade binds these functions as its private methods.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from typing import Any

from . import storage
from .entities import ALIAS_SEPARATOR, EntityIndex
from .errors import CorruptionError, Error

TEXT_INDEX_DIR = "text"
LEGACY_TEXT_INDEX_FILES = ("text.sqlite", "text.sqlite-wal", "text.sqlite-shm")  # layout 1, replaced


def text_index(graph: Any) -> Any:
    """The BM25 index of node texts, created (and filled from the graph) on first use.
    Searches do not wait for writes here (writers hold the text lock through their fsync)."""
    index = graph._text
    if index is not None and not index.closed:
        return index
    with graph._text_lock:
        if graph._text is None or graph._text.closed:
            if graph._read_only and not graph._closed:  # after close: in memory, the folder left alone
                graph._text = text_index_copy(graph)
            elif graph._path is not None and not graph._closed and not graph._forked:
                open_text_index(graph)  # after a failed write: reopened, caught up
            else:
                from .text import TextIndex

                index = TextIndex(None)
                refill_text(graph, index)
                graph._text = index
        return graph._text


def write_text(graph: Any, write: Any) -> None:
    """Applies ``write(index)`` to the BM25 index after the graph's own write succeeded. If
    the index fails (a full disk, a damaged file, no memory left), the graph's write stands:
    the index is dropped with a warning and the next BM25 search rebuilds it from the graph."""
    try:
        write(graph._text)
    except (Error, MemoryError) as failure:
        drop_text_index(graph, f"a write to the BM25 index failed ({str(failure) or type(failure).__name__})")


def write_entities(graph: Any, write: Any) -> None:
    """Applies ``write(index)`` to the entity index (text lock held) after the graph's own
    write succeeded. If it runs out of memory, the graph's write stands: the index, which may
    be half changed, is dropped with a warning and the next entity lookup rebuilds it from
    the graph."""
    try:
        write(graph._entities)
    except MemoryError:
        graph._entities = None
        warnings.warn("the entity index ran out of memory during a write; it is rebuilt from the graph on the "
                      "next entity lookup", RuntimeWarning, stacklevel=4)


def drop_text_index(graph: Any, why: str) -> None:
    """Closes and forgets the BM25 index (removing its folder, so that it is rebuilt)."""
    warnings.warn(f"{why}; it is rebuilt from the graph on the next text search", RuntimeWarning,
                  stacklevel=4)
    with graph._text_lock:
        index, graph._text = graph._text, None
        if index is not None:
            with contextlib.suppress(Exception):
                index.close()
        if graph._path is not None and not graph._forked:  # a forked child's index is its own, in memory
            with contextlib.suppress(OSError):
                shutil.rmtree(os.path.join(graph._path, TEXT_INDEX_DIR))


def bm25(graph: Any, text: str, depth: int, **filters: Any) -> list:
    """TextIndex.search on the current index; a damaged index is rebuilt once, then searched."""
    index = text_index(graph)
    try:
        return index.search(text, depth, **filters)
    except CorruptionError as damage:
        drop_text_index(graph, f"the BM25 index is damaged ({damage})")
    except Error:
        if not index.closed:
            raise  # closed by Graph.close() while searching: search the one that follows
    return text_index(graph).search(text, depth, **filters)


def refill_text(graph: Any, index: Any, state: Any = None) -> None:
    """Fill ``index`` with the texts of every live node (as of the graph's last write; or of
    ``state``, an export_state the caller already made at the last write)."""
    import pyarrow as pa

    if state is None:
        state = graph._engine.export_state(roll_wal=False)
    texts = storage.strings_array(state["texts"], pa.large_string()).to_pylist()
    if not any(texts):
        index.rebuild([], lsn=int(state["lsn"]))
        return
    keys = [storage.decode_key(k) for k in storage.strings_array(state["keys"], pa.large_binary()).to_pylist()]
    tenants = storage.dictionary_array(state["tenants"]).cast(pa.string()).to_pylist()
    labels = storage.dictionary_array(state["labels"]).cast(pa.string()).to_pylist()
    index._refill_nodes(keys, texts, tenants, labels, state["ts"].tolist(), int(state["lsn"]))


def open_text_index(graph: Any) -> None:
    """Open the folder's BM25 index and bring it in step with the graph: it is rebuilt from
    the graph's texts when it is new, damaged, behind the last write that changed texts
    (a crash before its buffered writes were published), or ahead of the graph (writes the
    WAL lost)."""
    from .text import TextIndex

    for name in LEGACY_TEXT_INDEX_FILES:  # an index of an earlier layout: rebuilt below
        legacy = os.path.join(graph._path, name)
        if os.path.isdir(legacy) and not os.path.islink(legacy):
            shutil.rmtree(legacy)
        elif os.path.lexists(legacy):
            os.unlink(legacy)
    path = os.path.join(graph._path, TEXT_INDEX_DIR)
    existed = os.path.isdir(path) and bool(os.listdir(path))
    try:
        index = TextIndex(path)
    except CorruptionError as damage:
        warnings.warn(f"the BM25 index {path} is damaged ({damage}); it is rebuilt from the graph",
                      RuntimeWarning, stacklevel=3)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        index, existed = TextIndex(path), False
    if not existed or not (graph._engine.last_text_lsn() <= index.lsn <= graph._engine.last_lsn()):
        refill_text(graph, index)
    graph._text = index


def text_index_copy(graph: Any) -> Any:
    """For a read-only graph: a private copy of the folder's BM25 index (in a temporary
    folder, deleted on close), when the index is there, sound and in step with the graph;
    else an index built in memory from the graph's texts."""
    from .text import TextIndex

    path = os.path.join(graph._path, TEXT_INDEX_DIR)
    if os.path.isdir(path) and os.listdir(path):
        try:
            index = TextIndex.copy_of(path)
        except Error as failure:
            warnings.warn(f"the BM25 index {path} cannot be read ({failure}); a read-only graph builds one "
                          "in memory", RuntimeWarning, stacklevel=4)
        else:
            if graph._engine.last_text_lsn() <= index.lsn <= graph._engine.last_lsn():
                return index
            index.close()
    index = TextIndex(None)
    refill_text(graph, index)
    return index


def entity_index(graph: Any) -> Any:
    """Names → keys for the entity channel, built on first use and kept up to date."""
    entities = graph._entities
    if entities is not None:
        return entities
    with graph._text_lock:
        if graph._entities is None:
            import pyarrow as pa

            index = EntityIndex()
            state = graph._engine.export_state(roll_wal=False)
            keys = [storage.decode_key(k) for k in storage.strings_array(state["keys"], pa.large_binary()).to_pylist()]
            aliases = storage.strings_array(state["aliases"], pa.large_string()).to_pylist()
            tenants = storage.dictionary_array(state["tenants"]).cast(pa.string()).to_pylist()
            for key, joined, tenant in zip(keys, aliases, tenants):
                if joined:
                    index.add(key, joined.split(ALIAS_SEPARATOR), tenant=tenant)
                if isinstance(key, str):
                    index.add(key, [key], alias=False, tenant=tenant)
            graph._entities = index
        return graph._entities
