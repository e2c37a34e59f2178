"""Verified erasure: the receipt :meth:`vecgraph.Memory.forget` returns, and the byte scan
that checks a folder holds nothing of a user (``vecgraph verify FOLDER --absent-tenant USER``).

What the scan can and cannot see. It reads every file under the folder as raw bytes and looks
for the UTF-8 bytes of each needle (the user id and the keys of the user's nodes; ``vecgraph
verify --text`` adds texts).
The graph's own files hold keys, tenant names and texts uncompressed (WAL records, Arrow
snapshots), so a leftover there is found. tantivy's files hold terms (lower-cased tokens, in
compressed term dictionaries) and compressed stored keys, so a scan cannot prove a BM25 index
clean: erasure rebuilds that index from the live texts instead and removes every older segment
file. Like SQLite's ``secure_delete`` (which overwrites deleted content in the database file
but not in the rollback journal copies the OS or a backup took), erasure reaches the files of
the folder only: not a backup or copy made earlier, not the blocks a filesystem or an SSD keeps
after a file is deleted or rewritten (journaling, copy-on-write, wear levelling), not swap, and
not the memory of a process that still has the graph open.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from typing import Iterable, Optional

# Files the scan skips: the LOCK (a pid) names no user.
_SKIP = ("LOCK",)


@dataclass
class ErasureReceipt:
    """What :meth:`vecgraph.Memory.forget` removed and rewrote.

    Attributes:
        user: the user id.
        memories, entities, cards: nodes deleted, by kind (a forgotten user's edges go with them).
        nodes: every node deleted (memories + entities + cards).
        files_removed: files deleted from the folder (relative paths): older snapshot
            generations, WAL segments, BM25 segment files.
        files_written: files of the new snapshot generation (relative paths).
        verified: the folder was scanned afterwards for the bytes of every deleted key and of
            the key forms only the user's nodes have, and none was found (False in an
            in-memory store, or when the scan found one: see ``found``).
        found: (relative path, needle, byte offset) of whatever that scan found.
        id_found: where the bytes of the user id itself occur afterwards: none for a
            distinctive id; a short or common id also occurs in other data.
        seconds: how long the erasure took.
    """

    user: str
    memories: int = 0
    entities: int = 0
    cards: int = 0
    nodes: int = 0
    files_removed: list = field(default_factory=list)
    files_written: list = field(default_factory=list)
    verified: bool = False
    found: list = field(default_factory=list)
    id_found: list = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        """The receipt as a JSON-ready dict."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _needles(values: Iterable[str]) -> list:
    seen: set = set()
    out = []
    for value in values:
        if isinstance(value, str) and value:
            encoded = value.encode("utf-8")
            if encoded not in seen:
                seen.add(encoded)
                out.append(encoded)
    return out


def scan_folder(folder: str, needles: Iterable[str], *, limit: int = 100) -> list:
    """Where the UTF-8 bytes of any of ``needles`` occur in the files under ``folder``.

    Uses one Aho-Corasick pass per file (``ahocorasick-rs``) when installed, else one
    ``bytes.find`` pass per needle. Files are memory-mapped, not read into memory.

    Args:
        folder: a graph folder (str or path).
        needles: non-empty str (others are ignored).
        limit: stop after this many findings (>= 1).

    Returns:
        list of (path relative to ``folder``, needle, byte offset), at most ``limit``.

    Raises:
        FileNotFoundError: ``folder`` does not exist.
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"no folder {folder!r}")
    patterns = _needles(needles)
    if not patterns:
        return []
    try:
        import ahocorasick_rs

        automaton: Optional[object] = ahocorasick_rs.BytesAhoCorasick(patterns)
    except ImportError:
        automaton = None
    found: list = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, folder)
            if relative in _SKIP or os.path.islink(path):
                continue
            try:
                size = os.path.getsize(path)
                if size == 0:
                    continue
                with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    if automaton is not None:
                        for index, start, _end in automaton.find_matches_as_indexes(data):  # type: ignore[attr-defined]
                            found.append((relative, patterns[index].decode("utf-8"), start))
                            if len(found) >= limit:
                                return found
                    else:
                        for pattern in patterns:
                            at = data.find(pattern)
                            if at >= 0:
                                found.append((relative, pattern.decode("utf-8"), at))
                                if len(found) >= limit:
                                    return found
            except FileNotFoundError:
                continue  # removed while scanning (an open graph's temporary file)
    return found
