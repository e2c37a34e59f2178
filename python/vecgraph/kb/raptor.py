"""RAPTOR clustering: groups of similar chunk vectors, each small enough to summarise at once.

Sarthi et al., "RAPTOR: Recursive Abstractive Processing for Tree-Organized Retrieval" (ICLR
2024) builds a tree over a document's chunks: the chunks are clustered, each cluster is
summarised, the summaries are embedded and clustered again, up to a root. :func:`cluster` is
one level of that: the paper's two-stage clustering with Gaussian mixture models.

1. The vectors (rows scaled to unit length, so that distances follow cosine similarity, as
   the paper's cosine UMAP does) are reduced to ``reduce_dim`` dimensions. The paper uses UMAP;
   here the default is PCA (scikit-learn), which is deterministic and a fraction of a second
   on 10,000 rows; ``reducer="umap"`` uses umap-learn when it is installed (global stage:
   ``sqrt(n - 1)`` neighbours, local stage: 10, as the paper's code).
2. Global clustering: a Gaussian mixture (scikit-learn ``GaussianMixture``, diagonal
   covariances) whose number of components minimises the Bayesian information criterion over
   ``1 .. min(max_components, rows / dimensions)``, searched on a geometric grid refined
   around its best point, on at most :data:`BIC_SAMPLE_ROWS` sampled rows; the chosen mixture
   is then fitted on all rows, starting from the sample's fit.
3. Local clustering: step 1 and 2 again on the rows of each global cluster larger than
   ``max_cluster_size`` (reduced anew, so the dimensions describe the differences inside it).
4. Any cluster still larger than ``max_cluster_size`` is clustered again the same way (the
   paper's recursion on clusters over the summariser's context length). A cluster that the
   mixtures do not split is divided by a mixture of ``ceil(size / max_cluster_size)``
   components instead; only rows the mixture cannot tell apart (identical vectors) can leave
   a cluster above ``max_cluster_size``.

The work is thousands of small matrix products, where BLAS threads only add overhead (and
much more when other processes share the cores), so BLAS runs on one thread during a call, as
scikit-learn's k-means does.

Departures from the paper, for speed: PCA instead of UMAP by default; diagonal covariances
instead of full ones (on the data of ``bench/bench_kb_clustering.py``, 10,000 x 256, the same
purity, 0.9997 against 0.9998, in 2.3 times less time); the BIC computed on a sample; and
each component needs ``reduce_dim`` rows on average (fewer fit near-zero variances whose
likelihood grows without bound, so the BIC would favour them).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # imported on first use: ``import vecgraph`` works without scikit-learn
    from sklearn.mixture import GaussianMixture

from ..arguments import _count_at_least, _finite_reals
from ..errors import InvalidArgumentError, _got

__all__ = ["BIC_SAMPLE_ROWS", "cluster"]

BIC_SAMPLE_ROWS = 2000
"""The number of components is chosen on at most this many rows (a seeded sample)."""

_COVARIANCE = "diag"
_GRID_POINTS = 7  # BIC evaluations of the first geometric grid
_MAX_ITER = 100
_TOL = 1e-3
_REG_COVAR = 1e-6  # scikit-learn's default


# ------------------------------------------------------------------------------- arguments


def _vectors(values: Any) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 2:
        raise InvalidArgumentError(f"vectors must be a 2-D array (n, d), got shape {array.shape}")
    if array.shape[0] and array.shape[1] == 0:
        raise InvalidArgumentError(f"vectors must have at least one column, got shape {array.shape}")
    return _finite_reals(array, "vectors")


# ------------------------------------------------------------------------------- stages


def _bic_one(z: np.ndarray) -> float:
    """BIC of one diagonal Gaussian fitted to the rows of ``z`` (closed form; what
    ``GaussianMixture(1, covariance_type="diag").fit(z).bic(z)`` computes)."""
    m, d = z.shape
    var = z.var(axis=0) + _REG_COVAR
    log_likelihood = -0.5 * (
        m * (d * math.log(2 * math.pi) + float(np.log(var).sum()))
        + float((m * (var - _REG_COVAR) / var).sum())
    )
    return -2.0 * log_likelihood + 2 * d * math.log(m)


class _Clusterer:
    def __init__(
        self,
        max_cluster_size: int,
        reduce_dim: int,
        threshold: float | None,
        seed: int,
        max_components: int,
        reducer: str,
    ) -> None:
        self.max_cluster_size = max_cluster_size
        self.reduce_dim = reduce_dim
        self.threshold = threshold
        self.seed = seed
        self.max_components = max_components
        self.reducer = reducer

    def reduce(self, x: np.ndarray, local: bool) -> np.ndarray:
        """Rows of ``x`` in at most ``reduce_dim`` dimensions (``m - 2`` at most, as RAPTOR)."""
        m, d = x.shape
        dims = max(1, min(self.reduce_dim, m - 2, d))
        if self.reducer == "umap":
            import umap  # checked importable in cluster()

            neighbours = 10 if local else int(math.sqrt(m - 1))
            neighbours = max(2, min(neighbours, m - 1))
            return np.asarray(
                umap.UMAP(
                    n_neighbors=neighbours, n_components=dims, metric="cosine", random_state=self.seed
                ).fit_transform(x),
                dtype=np.float64,
            )
        if dims >= d:
            return x - x.mean(axis=0)
        solver = "covariance_eigh" if m >= 4 * d else "full"
        from sklearn.decomposition import PCA

        return PCA(n_components=dims, svd_solver=solver, random_state=self.seed).fit_transform(x)

    def mixture(self, k: int, z: np.ndarray, init: GaussianMixture | None = None) -> GaussianMixture:
        kwargs: dict = {}
        if init is not None:
            kwargs = {
                "weights_init": init.weights_,
                "means_init": init.means_,
                "precisions_init": init.precisions_,
            }
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.mixture import GaussianMixture

        gmm = GaussianMixture(
            n_components=k,
            covariance_type=_COVARIANCE,
            max_iter=_MAX_ITER,
            tol=_TOL,
            reg_covar=_REG_COVAR,
            init_params="k-means++",
            random_state=self.seed,
            **kwargs,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return gmm.fit(z)

    def best_mixture(self, z: np.ndarray, least: int = 1) -> GaussianMixture | None:
        """The mixture of ``least..kmax`` components with the lowest BIC on a sample of ``z``,
        refitted on all of ``z``; None when ``kmax`` is 1 (one group)."""
        m = z.shape[0]
        sample = z
        if m > BIC_SAMPLE_ROWS:
            rng = np.random.default_rng(self.seed)
            sample = z[np.sort(rng.choice(m, BIC_SAMPLE_ROWS, replace=False))]
        s = sample.shape[0]
        # At least as many rows a component as it has dimensions, on average: smaller
        # components fit near-zero variances whose likelihood grows without bound.
        kmax = max(least, min(self.max_components, s // max(2, z.shape[1])))
        if kmax <= 1:
            return None
        fits: dict[int, tuple[float, GaussianMixture]] = {}

        def evaluate(k: int) -> None:
            if k not in fits:
                if k == 1:
                    fits[k] = (_bic_one(sample), None)
                else:
                    gmm = self.mixture(k, sample)
                    fits[k] = (float(gmm.bic(sample)), gmm)

        grid = sorted(
            {round(float(k)) for k in np.geomspace(least, kmax, min(_GRID_POINTS, kmax - least + 1))}
        )
        while True:
            for k in grid:
                evaluate(k)
            best = min(fits, key=lambda k: (fits[k][0], k))
            done = sorted(fits)
            at = done.index(best)
            left = done[at - 1] if at > 0 else best
            right = done[at + 1] if at + 1 < len(done) else best
            open_ks = [k for k in range(left + 1, right) if k not in fits]
            if not open_ks:
                break
            if len(open_ks) <= 4:
                grid = open_ks
            else:
                grid = sorted({open_ks[len(open_ks) * i // 4] for i in (1, 2, 3)})
        best = min(fits, key=lambda k: (fits[k][0], k))
        gmm = fits[best][1]
        if gmm is not None and s < m:
            gmm = self.mixture(best, z, init=gmm)
        return gmm

    def assign(self, gmm: GaussianMixture | None, z: np.ndarray, hard: bool = False) -> list[np.ndarray]:
        """Row groups (local indices, sorted) of a fitted mixture: argmax, or every component of
        probability >= threshold (argmax for a row with none); one group without a mixture."""
        if gmm is None:
            return [np.arange(z.shape[0])]
        probs = gmm.predict_proba(z)
        top = probs.argmax(axis=1)
        if self.threshold is None or hard:
            member = np.zeros(probs.shape, dtype=bool)
            member[np.arange(z.shape[0]), top] = True
        else:
            member = probs >= self.threshold
            member[np.arange(z.shape[0]), top] = True
        return [np.flatnonzero(member[:, j]) for j in range(member.shape[1]) if member[:, j].any()]

    def two_stage(self, x: np.ndarray) -> list[np.ndarray]:
        """RAPTOR's global clustering of the rows of ``x``, then local clustering inside each
        global cluster larger than ``max_cluster_size``: groups of local row indices."""
        m = x.shape[0]
        z = self.reduce(x, local=False)
        groups = []
        for g in self.assign(self.best_mixture(z), z):
            if g.size <= self.max_cluster_size or g.size <= 2 or (g.size == m and self.reducer == "pca"):
                # (the local PCA of all rows is the global one again)
                groups.append(g)
                continue
            zl = self.reduce(x[g], local=True)
            groups.extend(g[part] for part in self.assign(self.best_mixture(zl), zl))
        if any(g.size == m for g in groups):
            # No split of the whole: divide it by a mixture of a forced number of components.
            k = max(2, min(m, math.ceil(m / self.max_cluster_size)))
            forced = self.assign(self.mixture(k, z), z, hard=True)
            groups = [g for g in groups if g.size < m] + (forced if len(forced) > 1 else [np.arange(m)])
        return groups

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        stack = [np.arange(x.shape[0], dtype=np.int64)]
        while stack:
            rows = stack.pop()
            if rows.size <= self.max_cluster_size:
                out.append(rows)
                continue
            for group in self.two_stage(x[rows]):
                if group.size == rows.size:
                    out.append(rows)  # the rows cannot be told apart
                else:
                    stack.append(rows[group])
        unique = {c.tobytes(): c for c in (np.sort(c).astype(np.int64) for c in out)}
        return sorted(unique.values(), key=lambda c: (int(c[0]), c.size, c.tobytes()))


def cluster(
    vectors: np.ndarray,
    *,
    max_cluster_size: int = 10,
    reduce_dim: int = 10,
    threshold: float | None = None,
    seed: int = 0,
    max_components: int = 50,
    reducer: str = "pca",
) -> list[np.ndarray]:
    """Clusters vectors as one level of a RAPTOR tree (Sarthi et al., ICLR 2024).

    Two-stage Gaussian-mixture clustering (global, then local inside each global cluster) of
    the reduced, unit-length rows, with the number of components chosen by BIC, recursing into
    any cluster larger than ``max_cluster_size``; see the module docstring for the steps and
    the departures from the paper (PCA by default instead of UMAP, diagonal covariances, BIC
    on a sample of at most :data:`BIC_SAMPLE_ROWS` rows).

    Args:
        vectors: ``(n, d)`` array of real numbers (float32 as a rule), finite. Rows are scaled
            to unit length first (a zero row stays zero).
        max_cluster_size: clusters larger than this (int >= 1) are clustered again. With
            ``n <= max_cluster_size`` the result is one cluster of all rows.
        reduce_dim: dimensions after reduction (int >= 1; fewer for a cluster of fewer than
            ``reduce_dim + 2`` rows).
        threshold: None for hard assignment (each row in the cluster of its most probable
            component: the result is a partition), or a probability in ``(0, 1]``: a row joins
            every cluster whose component has probability >= threshold for it (the paper uses
            0.1), and its most probable one in any case.
        seed: seed of the sampling, the reduction and the mixtures (int in ``[0, 2**32)``); the
            same inputs and seed give the same clusters.
        max_components: the most components a mixture may have (int >= 1).
        reducer: ``"pca"`` (default, scikit-learn) or ``"umap"`` (needs umap-learn).

    Returns:
        A list of int64 arrays of row indices, each sorted and non-empty, ordered by first
        row (then size); every row is in at least one, and with ``threshold=None`` in exactly
        one. Identical clusters are listed once. ``n == 0`` gives ``[]``.

    Raises:
        TypeError: ``vectors`` not real numbers; an int argument not an int; ``threshold`` not
            a number.
        InvalidArgumentError: ``vectors`` not 2-D, without columns or not finite; an int
            argument below its least value or ``seed >= 2**32``; ``threshold`` outside
            ``(0, 1]``; an unknown ``reducer``.
        ImportError: ``reducer="umap"`` and umap-learn is not installed.
    """
    x = _vectors(vectors)
    max_cluster_size = _count_at_least(max_cluster_size, "max_cluster_size", 1)
    reduce_dim = _count_at_least(reduce_dim, "reduce_dim", 1)
    seed = _count_at_least(seed, "seed", 0)
    if seed >= 2**32:
        raise InvalidArgumentError(f"seed must be < 2**32, got {seed}")
    max_components = _count_at_least(max_components, "max_components", 1)
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise TypeError(f"threshold must be None or a float, got {_got(threshold)}")
        threshold = float(threshold)
        if not 0.0 < threshold <= 1.0:
            raise InvalidArgumentError(f"threshold must be in (0, 1], got {threshold}")
    if reducer not in ("pca", "umap"):
        raise InvalidArgumentError(f"reducer must be 'pca' or 'umap', got {_got(reducer)}")
    if reducer == "umap":
        try:
            import umap  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "reducer='umap' needs the umap-learn package; install it or use reducer='pca'"
            ) from exc
    n = x.shape[0]
    if n == 0:
        return []
    if n <= max_cluster_size:
        return [np.arange(n, dtype=np.int64)]
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norms > 0, norms, 1.0)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError as exc:
        raise ImportError('RAPTOR trees need scikit-learn: pip install "vecgraph[kb]"') from exc
    with threadpool_limits(limits=1, user_api="blas"):
        return _Clusterer(max_cluster_size, reduce_dim, threshold, seed, max_components, reducer).run(x)
