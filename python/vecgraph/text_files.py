"""The files of a :class:`vecgraph.text.TextIndex` folder: its header (``vecgraph-text.json``,
see the layout in :mod:`vecgraph.text`), the sizes and CRC-32s of the closed index's files and
their check on open, the copy a read-only graph searches, and the clearing of an index of
an earlier layout, and how tantivy's failures become vecgraph errors. TextIndex binds the
functions of ``self`` as its private methods."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import zlib
from typing import Any, Callable, Optional

from .errors import CorruptionError, StorageError
from .tokenizer import TOKENIZER_VERSION

SCHEMA_VERSION = 3  # the layout of the folder (fields and header file): see vecgraph.text
_META_FILE = "vecgraph-text.json"
_PROGRESS_MIN_ITEMS = 10_000   # a rebuild of this many documents shows a bar on a terminal
_FORMAT = "vecgraph-text"
_UNCHECKED_FILES = frozenset({_META_FILE, _META_FILE + ".tmp", ".tantivy-writer.lock", ".tantivy-meta.lock"})


def copy_files(self: Any, source: str) -> None:
    """Copies the index files of ``source`` (not tantivy's lock files) into the scratch folder."""
    try:
        names = sorted(os.listdir(source))
    except OSError as exc:
        self._discard_scratch()
        raise StorageError(f"cannot list text index folder {source}: {exc}") from exc
    try:
        for name in names:
            if name in (".tantivy-writer.lock", ".tantivy-meta.lock"):
                continue
            if not os.path.isfile(os.path.join(source, name)):
                raise CorruptionError(f"text index {source} holds {name!r}, which is not a file")
            shutil.copyfile(os.path.join(source, name), os.path.join(self._folder, name))
    except OSError as exc:
        self._discard_scratch()
        raise StorageError(f"cannot copy text index {source}: {exc}") from exc
    except BaseException:
        self._discard_scratch()
        raise

def clear_folder(self: Any, entries: set) -> None:
    try:
        for name in entries:
            if name != _META_FILE:
                path = os.path.join(self._folder, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
    except OSError as exc:
        raise StorageError(f"cannot clear text index {self._folder} of an earlier layout: {exc}") from exc

def read_meta(self: Any) -> dict:
    path = os.path.join(self._folder, _META_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise CorruptionError(f"{self._folder} is not empty but holds no {_META_FILE}: not a vecgraph "
                              "text index (or a damaged one); delete the folder and rebuild") from None
    except (OSError, ValueError) as exc:
        raise CorruptionError(f"text index {self._folder}: {_META_FILE} cannot be read ({exc})") from exc
    fields_ok = isinstance(meta, dict) and meta.get("format") == _FORMAT and all(
        type(meta.get(name)) is int and meta[name] >= 0 for name in ("schema_version", "tokenizer", "lsn"))
    if not fields_ok:
        raise CorruptionError(f"text index {self._folder}: {_META_FILE} is not a vecgraph text index "
                              f"header (got {meta!r})")
    return meta

def file_sums(self: Any) -> dict:
    """{name: [bytes, crc32]} of the index's files (all but the header and lock files)."""
    return {name: list(_size_and_crc(os.path.join(self._folder, name)))
            for name in sorted(os.listdir(self._folder)) if name not in _UNCHECKED_FILES}

def check_files(self: Any, sums: Any, entries: set) -> None:
    """Raises CorruptionError unless the folder holds exactly the files of ``sums`` (written
    by close()) with the same sizes and CRC-32s."""
    where = f"text index {self._folder}"
    if not isinstance(sums, dict):
        raise CorruptionError(f"{where}: {_META_FILE} has a malformed file list")
    present = {name for name in entries if name not in _UNCHECKED_FILES}
    if present != set(sums):
        missing, extra = sorted(set(sums) - present), sorted(present - set(sums))
        raise CorruptionError(f"{where} changed since it was closed (missing {missing}, unexpected {extra})")
    for name, (size, crc) in sums.items():
        try:
            actual_size, actual_crc = _size_and_crc(os.path.join(self._folder, name))
        except OSError as exc:
            raise CorruptionError(f"{where}: cannot read {name} ({exc})") from exc
        if (actual_size, actual_crc) != (size, crc):
            raise CorruptionError(f"{where}: {name} is damaged ({actual_size} bytes, CRC-32 "
                                  f"{actual_crc:08x}; {size} bytes, {crc:08x} when closed)")

def write_meta(self: Any, lsn: int, files: Optional[dict] = None) -> None:
    path = os.path.join(self._folder, _META_FILE)
    header: dict = {"format": _FORMAT, "schema_version": SCHEMA_VERSION, "tokenizer": TOKENIZER_VERSION,
                    "lsn": lsn}
    if files is not None:
        header["files"] = files
    body = json.dumps(header)
    try:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(body)
        os.replace(path + ".tmp", path)
    except OSError as exc:
        try:
            os.unlink(path + ".tmp")  # a full disk leaves no empty temporary behind
        except OSError:
            pass
        raise StorageError(f"cannot write {path}: {exc}") from exc


def _size_and_crc(path: str) -> tuple[int, int]:
    """(bytes, CRC-32) of a file, read in 1 MiB blocks."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            crc = zlib.crc32(block, crc)
            size += len(block)
    return size, crc


# How tantivy's errors name a failed system call (its io::Error text).
_IO_ERROR = re.compile(r"os error \d+|No space left on device|Permission denied|Read-only file system")


def _write(fn: Callable[[], Any], where: str) -> Any:
    """``fn()``, a call on the index writer. Its ValueError means the writer's worker threads
    stopped (a failed write to disk: no space, an I/O error); that becomes StorageError."""
    try:
        return fn()
    except ValueError as exc:
        raise StorageError(f"text index {where}: a write failed ({exc}); the disk may be full") from exc


def _is_panic(exc: BaseException) -> bool:
    """pyo3's PanicException (a BaseException): tantivy met data it cannot read."""
    return type(exc).__name__ == "PanicException"


def _call(fn: Callable[[], Any], where: str, doing: str) -> Any:
    """``fn()``, with a panic inside tantivy (pyo3's PanicException, a BaseException: tantivy
    met data it cannot read) turned into CorruptionError."""
    try:
        return fn()
    except BaseException as exc:
        if _is_panic(exc):
            raise CorruptionError(f"text index {where}: {doing} failed inside tantivy ({exc}); the index "
                                  "is damaged, rebuild it") from exc
        raise


def _progress_bar(progress: Optional[bool], total: Optional[int]) -> Any:
    """The tqdm bar of a rebuild on stderr (None: no bar); ``progress`` None shows one on a
    terminal for ``total`` >= _PROGRESS_MIN_ITEMS documents (or an unknown total)."""
    if progress is None:
        try:
            terminal = sys.stderr is not None and sys.stderr.isatty()
        except (AttributeError, ValueError):
            terminal = False
        progress = terminal and (total is None or total >= _PROGRESS_MIN_ITEMS)
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="text index", unit=" docs", unit_scale=True, file=sys.stderr,
                dynamic_ncols=True, leave=False)

