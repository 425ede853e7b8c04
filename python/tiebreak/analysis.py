# SPDX-License-Identifier: Apache-2.0
"""The analysis library (analysis/, docs/analysis.md) on numpy arrays: bias tests, low-rank
alignment, spectral norms. Results are the dicts the library's JSON writers produce (non-finite
numbers as the strings "inf", "-inf", "nan": docs/json.md), with vectors added as numpy arrays."""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np

from . import _core


def _f64(x: Any, ndim: int) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != ndim:
        raise ValueError(f"expected a {ndim}-dimensional array, got shape {a.shape}")
    return a if ndim == 2 else np.ascontiguousarray(a)


def bias_summary(errors: Any) -> dict[str, Any]:
    """Moments, one-sample t test of mean 0 and exact two-sided sign test of signed errors
    (``analysis::summarize``). NaN and infinities are counted in ``moments.nonfinite`` and skipped."""
    return json.loads(_core.bias_summary(_f64(np.ravel(errors), 1)))


def block_bootstrap(errors: Any, *, block_length: int = 0, resamples: int = 2000, confidence: float = 0.95,
                    seed: int = 20251001) -> dict[str, Any]:
    """Circular moving-block bootstrap of the mean of a serially dependent series
    (``analysis::block_bootstrap_mean``; block_length 0: round(1.5 n^(1/3))). Fixed seed: repeatable."""
    return json.loads(_core.block_bootstrap(_f64(np.ravel(errors), 1), block_length, resamples, confidence, seed))


def spectral_norm(m: Any, *, method: str = "lanczos", rel_tol: float = 1e-6, max_iterations: int = 500,
                  seed: int = 0x7469656272656B, threads: int = 1) -> dict[str, Any]:
    """Largest singular value of a float32 or float64 matrix (any strides, read in place), by Lanczos
    or power iteration on the Gram operator (``analysis::spectral_norm``; arithmetic in double).
    Returns spectral_norm, error_estimate, residual, iterations, converged and ``left``/``right``
    singular vectors as arrays."""
    a = np.asarray(m)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    if a.ndim != 2:
        raise ValueError(f"spectral_norm: expected a matrix, got shape {a.shape}")
    text, (left, right) = _core.spectral_norm(a, method, rel_tol, max_iterations, seed, threads)
    out = json.loads(text)
    out["left"], out["right"] = left, right
    return out


def exact_spectrum(m: Any) -> dict[str, Any]:
    """All singular values (BDCSVD, checked) with the spectral and Frobenius norms, stable and
    effective rank (``analysis::exact_spectrum``)."""
    text, sv = _core.exact_spectrum(_f64(m, 2))
    out = json.loads(text)
    out["singular_values"] = sv
    return out


def frobenius_cosine(a: Any, b: Any) -> float:
    """<A, B>_F / (|A|_F |B|_F) in [-1, 1]; 0 when either is zero. Raises ValueError on unequal shapes."""
    return _core.frobenius_cosine(_f64(a, 2), _f64(b, 2))


def principal_angles(a: Any, b: Any) -> dict[str, Any]:
    """Principal angles between the column spaces of a and b (``angles`` in radians, ascending;
    ``overlap`` = mean cos^2). Small angles are accurate to ~1e-16 (Knyazev & Argentati)."""
    text, angles = _core.principal_angles(_f64(a, 2), _f64(b, 2))
    out = json.loads(text)
    out["angles"] = angles
    return out


def subspace_overlap(a: Any, b: Any, k: int) -> dict[str, Any]:
    """Principal angles between the top-k left and right singular subspaces of two matrices."""
    return json.loads(_core.subspace_overlap(_f64(a, 2), _f64(b, 2), k))


def gradient_alignment(g: Any, w: Any, k: int) -> dict[str, Any]:
    """How much of an error gradient G lies along the top-k singular directions of W
    (``analysis::gradient_alignment``); ``per_direction`` as an array."""
    text, per = _core.gradient_alignment(_f64(g, 2), _f64(w, 2), k)
    out = json.loads(text)
    out["per_direction"] = per
    return out


def rank1_coherence(e: Any, u: Any, v: Any) -> dict[str, Any]:
    """Coherence of S = sum_T e_T u_T v_T^T (rows of u and v): 1 when every term points the same way."""
    return json.loads(_core.rank1_coherence(_f64(e, 1), _f64(u, 2), _f64(v, 2)))


class SpectralTracker:
    """Spectral norms of a fixed list of matrices (per-head blocks of W_Q, W_K, ...), one step at a
    time, each warm-started from its own previous vector: usually one pass per matrix per step."""

    def __init__(self, *, method: str = "power", rel_tol: float = 1e-6, max_iterations: int = 500,
                 threads: int = 1) -> None:
        self._t = _core.SpectralTracker(method, rel_tol, max_iterations, threads)

    def push(self, matrices: Sequence[Any]) -> dict[str, Any]:
        """One step: ``spectral_norms``, ``error_estimates``, ``iterations`` per matrix, ``converged``. The count
        and shapes must stay those of the first step. float32 and float64 (not mixed) are read in place."""
        arrs = [np.asarray(m) for m in matrices]
        if arrs and all(a.dtype == np.float32 for a in arrs):
            return json.loads(self._t.push(arrs))
        return json.loads(self._t.push_f64([np.asarray(a, dtype=np.float64) for a in arrs]))

    @property
    def steps(self) -> int:
        return self._t.steps


class UpdateAlignmentTracker:
    """Per-step norms, ranks, cosine with the previous matrix and top-k subspace overlap of a
    sequence of matrices of one shape (weight updates, gradient-error matrices)."""

    def __init__(self, k: int) -> None:
        self._t = _core.UpdateAlignmentTracker(k)

    def push(self, m: Any) -> dict[str, Any]:
        return json.loads(self._t.push(_f64(m, 2)))

    @property
    def steps(self) -> int:
        return self._t.steps
