"""Per-sample losses ``l(f, y)`` of a network output ``f in R^{N_o}``: value, residual, curvature.

Paper 000 uses the squared error ``l = |f - y|^2 / 2`` (Eqs. 3, 10, 36, 81). Its local theory
(Eqs. 13-14, 29-33; App. A, Eqs. 79-81) only needs the per-sample gradient and Hessian, which
for ``f = f(x, theta)`` follow from the chain rule::

    grad_theta l = J^T r,              r = dl/df               (the *residual*)
    hess_theta l = J^T Lambda J + sum_k r_k d^2 f_k / d theta^2,  Lambda = d^2 l / df^2

(``J = df/dtheta``, shape ``(N_o, n)``). A :class:`Loss` supplies ``l``, ``r`` and ``Lambda``
for a batch, in numpy; :class:`~weightdyn.models.base.Model` does the rest. Two losses:

* :data:`SQUARED`: ``l = |f - y|^2 / 2``, ``r = f - y``, ``Lambda = 1`` (the papers').
* :data:`CROSS_ENTROPY`: softmax cross-entropy on the logits ``f``, ``l = -sum_k y_k log p_k``
  with ``p = softmax(f)``; labels ``y`` are probabilities (one-hot or soft, rows summing to
  1), so ``r = p - y`` and ``Lambda = diag(p) - p p^T`` (positive semi-definite, with the null
  vector ``(1, ..., 1)``: adding a constant to every logit changes nothing). Evaluated through
  the log-sum-exp with the maximum logit subtracted, so it is finite for any finite logits.

Shapes: ``F`` and ``Y`` are ``(P, N_o)``, one row per sample (``weightdyn.models.base``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["CROSS_ENTROPY", "LOSSES", "SQUARED", "Loss", "log_softmax"]

FloatArray = NDArray[np.float64]

#: tolerance on the row sums of cross-entropy labels (probabilities)
LABEL_ATOL = 1e-9


def _pair(F: ArrayLike, Y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    F, Y = np.asarray(F, dtype=float), np.asarray(Y, dtype=float)
    if F.ndim != 2 or F.shape != Y.shape:
        raise ValueError(f"F and Y must both have shape (P, N_o), got {F.shape} and {Y.shape}")
    return F, Y


def _squared_value(F: FloatArray, Y: FloatArray) -> FloatArray:
    return 0.5 * np.sum((F - Y) ** 2, axis=1)


def _squared_residual(F: FloatArray, Y: FloatArray) -> FloatArray:
    return F - Y


def _squared_curvature(F: FloatArray) -> FloatArray:
    return np.broadcast_to(np.eye(F.shape[1]), (F.shape[0], F.shape[1], F.shape[1])).copy()


def log_softmax(F: FloatArray) -> FloatArray:
    """``log softmax(F)`` along the last axis, ``F - logsumexp(F)`` with the maximum
    subtracted first (no overflow for any finite logits)."""
    shifted = F - np.max(F, axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def _ce_value(F: FloatArray, Y: FloatArray) -> FloatArray:
    logp = log_softmax(F)
    # 0 * log p = 0 where a label is exactly 0 (avoids 0 * -inf if a logit is -inf)
    return -np.sum(np.where(Y != 0.0, Y * logp, 0.0), axis=1)


def _ce_residual(F: FloatArray, Y: FloatArray) -> FloatArray:
    return np.exp(log_softmax(F)) - Y


def _ce_curvature(F: FloatArray) -> FloatArray:
    p = np.exp(log_softmax(F))
    return np.einsum("pk,kl->pkl", p, np.eye(F.shape[1])) - p[:, :, None] * p[:, None, :]


def _no_check(Y: FloatArray) -> FloatArray:
    return Y


def _check_probabilities(Y: FloatArray) -> FloatArray:
    """Cross-entropy labels: non-negative rows summing to 1 (then ``r = p - y`` is ``dl/df``)."""
    sums = Y.sum(axis=1)
    if Y.size and (np.min(Y) < 0 or np.max(np.abs(sums - 1.0)) > LABEL_ATOL):
        raise ValueError(
            "cross-entropy labels must be probabilities (rows of Y non-negative and summing to "
            f"1: one-hot or soft labels), got min(Y) = {np.min(Y):.3g} and row sums in "
            f"[{sums.min():.6g}, {sums.max():.6g}]"
        )
    return Y


@dataclass(frozen=True)
class Loss:
    """A per-sample loss ``l(f, y)`` with its residual ``dl/df`` and curvature ``d^2l/df^2``.

    ``identity_curvature``: ``Lambda = 1`` for every sample, so the Gauss-Newton matrix is
    ``J^T J / P`` (paper 000 Eqs. 80-81's drift). ``shift_invariant``: ``l(f + c 1, y) =
    l(f, y)`` for every constant ``c`` (the loss sees ``N_o - 1`` combinations of the outputs).
    ``min_outputs``: the smallest ``N_o`` the loss makes sense for.
    """

    name: str
    formula: str
    identity_curvature: bool
    shift_invariant: bool
    min_outputs: int
    _value: Callable[[FloatArray, FloatArray], FloatArray]
    _residual: Callable[[FloatArray, FloatArray], FloatArray]
    _curvature: Callable[[FloatArray], FloatArray]
    _check: Callable[[FloatArray], FloatArray]

    def value(self, F: ArrayLike, Y: ArrayLike) -> FloatArray:
        """Per-sample losses ``l(f^mu, y^mu)``, shape ``(P,)``."""
        return self._value(*_pair(F, Y))

    def residual(self, F: ArrayLike, Y: ArrayLike) -> FloatArray:
        """``r^mu = dl/df`` at ``f^mu``, shape ``(P, N_o)``: ``grad_theta l^mu = J_mu^T r^mu``."""
        return self._residual(*_pair(F, Y))

    def curvature(self, F: ArrayLike) -> FloatArray:
        """``Lambda^mu = d^2 l / df^2`` at ``f^mu``, shape ``(P, N_o, N_o)`` (symmetric, PSD)."""
        F = np.asarray(F, dtype=float)
        if F.ndim != 2:
            raise ValueError(f"F must have shape (P, N_o), got {F.shape}")
        return self._curvature(F)

    def check_labels(self, Y: ArrayLike) -> FloatArray:
        """``Y`` as a float array; ``ValueError`` if the loss cannot take these labels
        (cross-entropy: rows must be probabilities)."""
        return self._check(np.asarray(Y, dtype=float))

    def __repr__(self) -> str:
        return f"Loss({self.name!r}: {self.formula})"


#: ``l = |f - y|^2 / 2`` (paper 000 Eqs. 3, 10, 36, 81)
SQUARED = Loss(
    "squared", "l = |f - y|^2 / 2", True, False, 1,
    _squared_value, _squared_residual, _squared_curvature, _no_check,
)  # fmt: skip

#: softmax cross-entropy ``l = -sum_k y_k log softmax(f)_k`` (``y`` probabilities, ``N_o >= 2``)
CROSS_ENTROPY = Loss(
    "cross_entropy", "l = -sum_k y_k log softmax(f)_k", False, True, 2,
    _ce_value, _ce_residual, _ce_curvature, _check_probabilities,
)  # fmt: skip

#: the losses by name
LOSSES: dict[str, Loss] = {loss.name: loss for loss in (SQUARED, CROSS_ENTROPY)}
