"""The routing table of a sharded graph: which shard owns a node, stored beside the shard folders.

``<prefix>/routing.json`` holds the format, the shard count, the shard folders, the routing mode
and, for the modes that place domains (``"label"`` and a domain function), every domain placed so
far with its shard. It is written before the first node of a new domain (a temporary file,
fsynced, renamed over the old one, the folder fsynced), so a crash never leaves nodes on a shard
the table does not name. Hashes are BLAKE2b of a type-tagged key (``i:`` for an int key, ``s:``
for a str) modulo the shard count; the table records a digest of the shard of a fixed list of
probe values, so a hash that ever changed would be refused when the graph is opened rather than
send nodes to other shards in silence.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from typing import Any, Callable, Optional, Union

from ..errors import CorruptionError, InvalidArgumentError

FORMAT = 1
FILE = "routing.json"
MODES = ("tenant", "key", "label", "domain")
_PROBES = [0, 1, 42, -7, 2**40, "", "a", "user-42", "tenant", "ключ", "鍵"]


def stable_hash(value: Union[str, int]) -> int:
    """A 64-bit hash of a str or int that every process and Python version computes alike
    (Python's own ``hash`` of a str changes with each process)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"a routing value must be a str or an int, got {type(value).__name__}")
    tagged = (
        (b"i:" + str(value).encode())
        if isinstance(value, int)
        else (b"s:" + value.encode("utf-8", "surrogatepass"))
    )
    return int.from_bytes(hashlib.blake2b(tagged, digest_size=8).digest(), "little")


def _probe_digest(shards: int) -> str:
    return hashlib.sha256(json.dumps([stable_hash(v) % shards for v in _PROBES]).encode()).hexdigest()[:16]


def function_name(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def _check_function(fn: Callable) -> Callable:
    """A domain function that :meth:`Routing.open` can recognise by name: a module-level function
    (a lambda or a nested function has a name that any other one can share)."""
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(qualname, str) or "<lambda>" in qualname or "<locals>" in qualname:
        raise InvalidArgumentError(
            f"shard_by must be a module-level function (def domain(key, label, tenant) -> str), got {fn!r}: the "
            "routing table records its name, and a lambda's or a nested function's name does not tell it from others"
        )
    return fn


class Routing:
    """Which shard owns a node (see the module docstring); thread-safe."""

    def __init__(self, prefix: str, table: dict, domain_function: Optional[Callable] = None) -> None:
        self.prefix = prefix
        self.table = table
        self.shards: int = table["shards"]
        self.mode: str = table["mode"]
        self.domains: dict = dict(table.get("domains", {}))
        self.domain_function = domain_function
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ create / open

    @classmethod
    def create(cls, prefix: str, shards: int, shard_by: Any, placement: Optional[dict]) -> "Routing":
        """A new table (checked, not yet written)."""
        if isinstance(shards, bool) or not isinstance(shards, int):
            raise TypeError(f"shards must be an int, got {type(shards).__name__}")
        if not 1 <= shards <= 4096:
            raise InvalidArgumentError(f"shards must be in [1, 4096], got {shards}")
        function = None
        if callable(shard_by):
            mode, function = "domain", _check_function(shard_by)
        elif shard_by in MODES[:3]:
            mode = shard_by
        else:
            raise InvalidArgumentError(
                f'shard_by must be "tenant", "key", "label" or a function (key, label, tenant) -> domain, got {shard_by!r}'
            )
        domains: dict = {}
        if placement is not None:
            if mode not in ("label", "domain"):
                raise InvalidArgumentError(
                    f'placement names the shard of a domain: it needs shard_by="label" or a '
                    f'domain function, not shard_by="{mode}"'
                )
            if not isinstance(placement, dict):
                raise TypeError(f"placement must be a dict {{domain: shard}}, got {type(placement).__name__}")
            for domain, shard in placement.items():
                if not isinstance(domain, str):
                    raise TypeError(f"placement's domains must be str, got {type(domain).__name__}")
                if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < shards:
                    raise InvalidArgumentError(
                        f"placement[{domain!r}] must be a shard in [0, {shards}), got {shard!r}"
                    )
                domains[domain] = shard
        table = {
            "format": FORMAT,
            "shards": shards,
            "mode": mode,
            "folders": [f"shard-{i:04d}" for i in range(shards)],
            "hash": "blake2b-64",
            "probe_digest": _probe_digest(shards),
            "domains": domains,
            "domain_function": function_name(function) if function is not None else None,
        }
        return cls(prefix, table, function)  # written by :meth:`_write` once every shard has opened

    @classmethod
    def open(cls, prefix: str, domain_function: Optional[Callable] = None) -> "Routing":
        path = os.path.join(prefix, FILE)
        try:
            with open(path, encoding="utf-8") as f:
                table = json.load(f)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{prefix} holds no sharded graph: {FILE} is missing (create one with ShardedGraph.create)"
            ) from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptionError(f"{path} is not a routing table: {exc}") from exc
        if not isinstance(table, dict) or table.get("format") != FORMAT:
            raise CorruptionError(
                f"{path}: unknown routing table format {table.get('format') if isinstance(table, dict) else table!r}"
            )
        shards = table.get("shards")
        if not isinstance(shards, int) or shards < 1 or table.get("mode") not in MODES:
            raise CorruptionError(f"{path}: bad shard count or mode ({shards!r}, {table.get('mode')!r})")
        if table.get("probe_digest") != _probe_digest(shards):
            raise CorruptionError(
                f"{path}: the key hash of this vecgraph places keys on other shards than the one "
                "that wrote the table; opening would route nodes to the wrong shards"
            )
        expected = [f"shard-{i:04d}" for i in range(shards)]
        domains = table.get("domains")
        if (
            table.get("folders") != expected
            or not isinstance(domains, dict)
            or any(
                isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < shards for v in domains.values()
            )
        ):
            raise CorruptionError(
                f"{path}: the shard folders or the domains' shards do not match {shards} shards"
            )
        if table["mode"] != "domain" and table.get("domain_function") is not None:
            raise CorruptionError(f"{path}: mode {table['mode']!r} with a domain function")
        if table["mode"] == "domain":
            if domain_function is None:
                raise InvalidArgumentError(
                    f"{prefix} routes by the domain function {table['domain_function']}: pass it as shard_by= to open"
                )
            _check_function(domain_function)
            if function_name(domain_function) != table["domain_function"]:
                raise InvalidArgumentError(
                    f"{prefix} routes by the domain function {table['domain_function']}, got "
                    f"{function_name(domain_function)}: a different function would place nodes differently"
                )
        elif domain_function is not None:
            raise InvalidArgumentError(f'{prefix} routes by "{table["mode"]}", not by a domain function')
        for folder in table["folders"]:
            if not os.path.isdir(os.path.join(prefix, folder)):
                raise CorruptionError(f"{prefix}: the shard folder {folder} named by {FILE} is missing")
        return cls(prefix, table, domain_function)

    def _write(self, domains: Optional[dict] = None) -> None:
        """Write the table with ``domains`` (default: the current ones) atomically."""
        os.makedirs(self.prefix, exist_ok=True)
        path = os.path.join(self.prefix, FILE)
        temporary = path + ".tmp"
        table = dict(self.table, domains=dict(self.domains if domains is None else domains))
        try:
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump(table, f, indent=1, sort_keys=True, ensure_ascii=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            raise
        self.table = table
        directory = os.open(self.prefix, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    # ------------------------------------------------------------------ routing

    def folders(self) -> list:
        return [os.path.join(self.prefix, folder) for folder in self.table["folders"]]

    def shard_of_value(self, value: Union[str, int]) -> int:
        return stable_hash(value) % self.shards

    def domain_of(self, key: Any, label: str, tenant: str) -> str:
        if self.mode == "label":
            return label
        domain = self.domain_function(key, label, tenant)  # type: ignore[misc]
        if not isinstance(domain, str):
            raise TypeError(
                f"the domain function {self.table['domain_function']} returned "
                f"{type(domain).__name__} for key {key!r}, expected a str"
            )
        return domain

    def assign(self, keys: list, labels: list, tenants: list) -> tuple[list, dict]:
        """``(the shard of each new node, {new domain: shard})``; the new domains are not recorded
        until :meth:`record` (after the batch was checked)."""
        if self.mode == "key":
            return [stable_hash(key) % self.shards for key in keys], {}
        if self.mode == "tenant":
            cache: dict = {}
            for tenant in tenants:
                if tenant not in cache:
                    cache[tenant] = stable_hash(tenant) % self.shards
            return [cache[t] for t in tenants], {}
        domains = [self.domain_of(key, label, tenant) for key, label, tenant in zip(keys, labels, tenants)]
        with self._lock:
            known = dict(self.domains)
        new: dict = {}
        for domain in domains:
            if domain not in known and domain not in new:
                try:
                    domain.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidArgumentError(
                        f"domain {domain!r} is not valid Unicode text (a lone surrogate)"
                    ) from None
                new[domain] = stable_hash(domain) % self.shards
        return [known[d] if d in known else new[d] for d in domains], new

    def record(self, new: dict) -> None:
        """Add ``new`` {domain: shard} to the table, durably (the table on disk first)."""
        if not new:
            return
        with self._lock:
            added = {d: s for d, s in new.items() if d not in self.domains}
            if added:
                self._write({**self.domains, **added})
                self.domains.update(added)

    def shards_for(self, tenants: Any = None, labels: Any = None, domains: Any = None) -> Optional[list]:
        """The shards a query with these filters can find nodes in (sorted), or None: all."""
        if domains is not None:
            if self.mode not in ("label", "domain"):
                raise InvalidArgumentError(
                    f'domains= routes a query by domain: this graph routes by "{self.mode}"'
                )
            names = [domains] if isinstance(domains, str) else list(domains)
            return sorted({self.domains[d] for d in names if d in self.domains})
        if self.mode == "tenant" and tenants is not None:
            names = [tenants] if isinstance(tenants, str) else list(tenants)
            return sorted({stable_hash(t) % self.shards for t in names if isinstance(t, str)})
        if self.mode == "label" and labels is not None:
            names = [labels] if isinstance(labels, str) else list(labels)
            return sorted({self.domains[d] for d in names if isinstance(d, str) and d in self.domains})
        return None
