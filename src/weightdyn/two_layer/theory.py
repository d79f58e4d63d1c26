"""Linearised SGD theory of a two-layer linear network ``y = W2 W1 x``.

Implements Section III and Appendix E of paper 000 ("Weight fluctuations in (deep)
linear neural networks and a derivation of the inverse-variance flatness relation"):
the drift ``Gamma`` and diffusion ``Delta`` of Eq. 63, their eigenvalues (Eq. 64), the
stationary covariance ``M = lambda Gamma^+ Delta / 2`` (Eq. 66), the closed form of
``M22`` (Eq. 70), the covariances in weight space (Eq. 67a/b) and the curvature along the
principal directions of ``cov(dW2)`` (Eq. 73). Beside the paper's formulas, which assume
whitened inputs at a minimum, the *exact linearisation* is available for any data and any
``(W1, W2)``: the Jacobian of the gradient (:func:`exact_drift`) and the exact mini-batch
gradient covariance (:func:`exact_noise_covariance`). Pure numpy/scipy, no file I/O.

Conventions
-----------
* ``X`` has shape ``(P, N_i)`` and ``Y`` shape ``(P, N_o)``: one **row** per sample
  (the paper's design matrices are the transposes). ``W1`` has shape ``(N_h, N_i)``,
  ``W2`` shape ``(N_o, N_h)``, the product ``w = W2 W1`` shape ``(N_o, N_i)``.
  ``Sigma0_xx = X.T @ X / P`` and ``Sigma0_yx = Y.T @ X / P`` (Eq. 38).
* **vec ordering.** ``vec(A)`` stacks the *columns* of ``A`` (column-major,
  ``A.ravel(order="F")``), exactly as the paper (text after Eq. 47), so that the
  Kronecker identities ``vec(ABC) = (C^T kron A) vec(B)`` used in Eqs. 63 and 67 hold as
  printed. The parameter vector is ``theta = [vec(W1); vec(W2)]`` of length
  ``N_h N_i + N_o N_h``: ``W1[h, i] -> theta[h + N_h i]`` and
  ``W2[k, h] -> theta[N_h N_i + k + N_o h]`` (:func:`pack`, :func:`unpack`). Every
  matrix in "weight space" (Hessian, drift, noise covariance, weight covariance) uses
  this ordering. The reduced variables of Sec. III.2.3 are ``Z = [vec(z1); vec(z2)]``
  with ``z1 = V^T dW1`` of shape ``(N_o, N_i)`` and ``z2 = dW2 A`` of shape
  ``(N_o, N_h)``, same vec; :func:`z_embedding` maps ``Z`` to ``theta``.
* ``lr`` is the learning rate ``lambda``, ``batch_size`` the mini-batch size ``S``,
  ``sigma_x2`` the input variance (``Sigma0_xx = sigma_x2 * 1`` for whitened inputs,
  Eq. 49) and ``sigma_y2`` the label mean square ``<y^2>`` per output component.
* **Diffusion without the learning rate.** The paper's ``Delta`` contains ``lambda``
  through ``sigma_R^2 = lambda sigma_x^2 <y^2> / S`` (Eq. 57c). Here ``Delta`` (from
  :func:`drift_diffusion`) and the exact noise covariance are covariances of the
  mini-batch *gradient*, i.e. the paper's ``Delta / lambda``; the learning rate enters
  only in :func:`stationary_covariance` and :func:`lyapunov_covariance`, whose results
  equal the paper's ``M``.

The model-independent algebra (rank cuts, :func:`zero_mode_spread`, ``RESIDUAL_CUT_FACTOR``,
:func:`lyapunov_covariance`, the App. C prefactor) lives in :mod:`weightdyn.linear_theory`;
``zero_mode_spread``, ``RESIDUAL_CUT_FACTOR`` and ``lyapunov_covariance`` stay importable here.

Paper typos found while implementing (checked in ``tests/test_two_layer_theory.py``):

* Eq. 56: ``x^mu . x^mu = N_i sigma_x^2`` (not ``sigma_x^2``), so
  ``Sigma0_yx Sigma0_yx^T ~ (N_i / P) sigma_x^2 <y^2> 1`` and the factor ``(1 - 1/P)``
  in Eqs. 57 and 92-94 is ``(1 - N_i/P)``.
* Eq. 50: both terms of ``cov(dSigma_xx)`` carry ``sigma_x^4``; in ``cov(dSigma_yx)``
  the last factor is ``Sigma0_yx[k, j]`` (as in Eq. 48b), not ``Sigma0_yx[j, k]``.
* Reduced loss after Eq. 58 (and its z-form in Sec. III.3.3): the cross term carries a
  factor 2, ``L~ = (sigma_x^2/2) ||W2 dW1 + dW2 W1||_F^2``; the ``dW_2^{0,T}`` there is
  ``dW_2^T``.
* Eq. 75: the drift is ``-sigma_x^2 omega_k chi_k`` (minus sign; the solution written
  after it also misses ``sigma_x^2`` in the exponent).
"""

from __future__ import annotations

from numbers import Integral
from typing import Literal, NamedTuple

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray

from weightdyn.linear_theory import (
    RESIDUAL_CUT_FACTOR,
    check_positive,
    check_square,
    lyapunov_covariance,
    lyapunov_on_range,
    noise_prefactor,
    rank_cut,
    residual_atol,
    svd_rtol,
    zero_mode_spread,
)

__all__ = [
    "RESIDUAL_CUT_FACTOR",
    "SVDFactors",
    "commutation_matrix",
    "curvature_along",
    "drift_diffusion",
    "drift_eigenvalues",
    "exact_drift",
    "exact_noise_covariance",
    "exact_stationary_covariance",
    "gradients",
    "hessian_full",
    "ivfr_curvature",
    "loss",
    "loss_perturbation",
    "lyapunov_covariance",
    "m22_closed_form",
    "minibatch_moment_covariances",
    "minimum_from_w2",
    "pack",
    "per_sample_gradients",
    "reduced_loss",
    "regression_solution",
    "residual_norm",
    "stationary_covariance",
    "svd_factors",
    "unpack",
    "vec",
    "weight_space_covariances",
    "whiten",
    "wick_moment_covariances",
    "z_embedding",
    "zero_balanced_minimum",
    "zero_mode_spread",
]

Sampling = Literal["with", "without"]
FloatArray = NDArray[np.float64]


# --------------------------------------------------------------------------- helpers


def _as_matrix(A: ArrayLike, name: str) -> FloatArray:
    A = np.asarray(A, dtype=float)
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array, got shape {A.shape}")
    return A


def _check_weights(W1: ArrayLike, W2: ArrayLike) -> tuple[FloatArray, FloatArray]:
    W1 = _as_matrix(W1, "W1")
    W2 = _as_matrix(W2, "W2")
    if W2.shape[1] != W1.shape[0]:
        raise ValueError(
            f"W2 must have shape (N_o, N_h) with N_h = W1.shape[0] = {W1.shape[0]}, "
            f"got W2 of shape {W2.shape}"
        )
    return W1, W2


def _check_data(
    X: ArrayLike, Y: ArrayLike, W1: ArrayLike, W2: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    X = _as_matrix(X, "X")
    Y = np.asarray(Y, dtype=float)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
        raise ValueError(f"Y must have shape (P, N_o) with P = {X.shape[0]}, got {Y.shape}")
    W1, W2 = _check_weights(W1, W2)
    if W1.shape[1] != X.shape[1]:
        raise ValueError(f"W1 must have shape (N_h, N_i) with N_i = {X.shape[1]}, got {W1.shape}")
    if W2.shape[0] != Y.shape[1]:
        raise ValueError(f"W2 must have shape (N_o, N_h) with N_o = {Y.shape[1]}, got {W2.shape}")
    return X, Y, W1, W2


def _check_batch_size(batch_size: int) -> int:
    if not isinstance(batch_size, Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    return int(batch_size)


def _moments(X: FloatArray, Y: FloatArray) -> tuple[FloatArray, FloatArray]:
    P = X.shape[0]
    return X.T @ X / P, Y.T @ X / P


def _range_basis(A: FloatArray, rtol: float | None, atol: float = 0.0) -> FloatArray:
    """Orthonormal basis of the column space of ``A``: singular values above
    ``max(rtol * s_max, atol)`` (:func:`~weightdyn.linear_theory.rank_cut`)."""
    U, s, _ = np.linalg.svd(A)
    return U[:, s > rank_cut(s, A.shape, rtol, atol)]


# ------------------------------------------------------------------- vec convention


def vec(A: ArrayLike) -> FloatArray:
    """Column-stacking ``vec(A)`` (paper, text after Eq. 47): ``A.ravel(order="F")``."""
    return np.asarray(A, dtype=float).ravel(order="F")


def pack(W1: ArrayLike, W2: ArrayLike) -> FloatArray:
    """Parameter vector ``theta = [vec(W1); vec(W2)]`` (column-major vec, W1 first)."""
    W1, W2 = _check_weights(W1, W2)
    return np.concatenate([vec(W1), vec(W2)])


def unpack(theta: ArrayLike, n_in: int, n_hidden: int, n_out: int) -> tuple[FloatArray, FloatArray]:
    """Inverse of :func:`pack`: ``(W1, W2)`` of shapes ``(N_h, N_i)`` and ``(N_o, N_h)``."""
    theta = np.asarray(theta, dtype=float)
    n1 = n_hidden * n_in
    if theta.shape != (n1 + n_out * n_hidden,):
        raise ValueError(
            f"theta must have shape ({n1 + n_out * n_hidden},) for (N_i, N_h, N_o) = "
            f"({n_in}, {n_hidden}, {n_out}), got {theta.shape}"
        )
    W1 = theta[:n1].reshape(n_hidden, n_in, order="F")
    W2 = theta[n1:].reshape(n_out, n_hidden, order="F")
    return W1, W2


def commutation_matrix(m: int, n: int) -> FloatArray:
    """Commutation matrix ``K`` with ``vec(A^T) = K vec(A)`` for ``A`` of shape ``(m, n)``."""
    K = np.zeros((m * n, m * n))
    i, j = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
    # vec(A)[i + m j] = A[i, j] = A^T[j, i] = vec(A^T)[j + n i]
    K[(j + n * i).ravel(), (i + m * j).ravel()] = 1.0
    return K


# ------------------------------------------------------------- loss and gradients


def regression_solution(X: ArrayLike, Y: ArrayLike) -> FloatArray:
    """Product-matrix minimiser ``w* = Sigma0_yx (Sigma0_xx)^+`` (Eq. 39), shape ``(N_o, N_i)``.

    Computed with ``numpy.linalg.lstsq`` (minimum-norm solution if ``N_i > P``).
    """
    X = _as_matrix(X, "X")
    Y = np.asarray(Y, dtype=float)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
        raise ValueError(f"Y must have shape (P, N_o) with P = {X.shape[0]}, got {Y.shape}")
    w, *_ = np.linalg.lstsq(X, Y, rcond=None)
    return w.T


def loss(X: ArrayLike, Y: ArrayLike, W1: ArrayLike, W2: ArrayLike) -> float:
    """Full-batch loss ``L = (1/2P) sum_mu ||y^mu - W2 W1 x^mu||^2`` (Eq. 36)."""
    X, Y, W1, W2 = _check_data(X, Y, W1, W2)
    R = Y - X @ (W2 @ W1).T
    return float(0.5 * np.sum(R**2) / X.shape[0])


def gradients(
    X: ArrayLike, Y: ArrayLike, W1: ArrayLike, W2: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Full-batch gradients ``(dL/dW1, dL/dW2)`` (minus the r.h.s. of Eqs. 41a/b).

    With ``E = Sigma0_yx - W2 W1 Sigma0_xx``: ``dL/dW1 = -W2^T E`` and
    ``dL/dW2 = -E W1^T``.
    """
    X, Y, W1, W2 = _check_data(X, Y, W1, W2)
    Sxx, Syx = _moments(X, Y)
    E = Syx - W2 @ W1 @ Sxx
    return -W2.T @ E, -E @ W1.T


def per_sample_gradients(X: ArrayLike, Y: ArrayLike, W1: ArrayLike, W2: ArrayLike) -> FloatArray:
    """Gradients of the per-sample losses ``l^mu = ||y^mu - W2 W1 x^mu||^2 / 2``.

    Returns shape ``(P, N_h N_i + N_o N_h)``, row ``mu`` being ``[vec(dl/dW1); vec(dl/dW2)]``
    with ``dl/dW1 = -W2^T r x^T`` and ``dl/dW2 = -r (W1 x)^T``, ``r = y - W2 W1 x``.
    """
    X, Y, W1, W2 = _check_data(X, Y, W1, W2)
    P = X.shape[0]
    R = Y - X @ (W2 @ W1).T  # (P, N_o)
    a = R @ W2  # (P, N_h): (W2^T r)^T
    h = X @ W1.T  # (P, N_h): (W1 x)^T
    g1 = -a[:, :, None] * X[:, None, :]  # (P, N_h, N_i)
    g2 = -R[:, :, None] * h[:, None, :]  # (P, N_o, N_h)
    # column-major vec of each per-sample matrix: transpose the matrix axes, then flatten
    return np.concatenate(
        [g1.transpose(0, 2, 1).reshape(P, -1), g2.transpose(0, 2, 1).reshape(P, -1)], axis=1
    )


def hessian_full(X: ArrayLike, Y: ArrayLike, W1: ArrayLike, W2: ArrayLike) -> FloatArray:
    """Full Hessian of ``L`` (Eq. 36) in ``theta = [vec(W1); vec(W2)]`` space.

    Built as Gauss-Newton plus residual term, ``(1/P) sum_mu J_mu^T J_mu`` with the
    per-sample Jacobian ``J_mu = [x^T kron W2, (W1 x)^T kron 1_{N_o}]`` of ``W2 W1 x``,
    plus the second-derivative term ``d^2 L / dW1[h, i] dW2[k, g] = -E[k, i] delta_hg``
    (``E = Sigma0_yx - W2 W1 Sigma0_xx``, which vanishes at a minimum). An independent
    construction of the same matrix as :func:`exact_drift`, used for cross-checks.
    """
    X, Y, W1, W2 = _check_data(X, Y, W1, W2)
    P, n_in = X.shape
    n_out, n_hid = W2.shape
    Sxx, Syx = _moments(X, Y)
    J = np.concatenate(
        [
            np.einsum("pi,kh->pkhi", X, W2).reshape(P, n_out, n_hid * n_in, order="F"),
            np.einsum("pg,kl->pklg", X @ W1.T, np.eye(n_out)).reshape(
                P, n_out, n_out * n_hid, order="F"
            ),
        ],
        axis=2,
    )  # (P, N_o, n): J[mu, k, :] = d (W2 W1 x^mu)_k / d theta
    H = np.einsum("pka,pkb->ab", J, J) / P
    E = Syx - W2 @ W1 @ Sxx
    n1 = n_hid * n_in
    cross = np.einsum("ki,hg->hikg", -E, np.eye(n_hid)).reshape(n1, n_out * n_hid, order="F")
    H[:n1, n1:] += cross
    H[n1:, :n1] += cross.T
    return H


def exact_drift(X: ArrayLike, Y: ArrayLike, W1: ArrayLike, W2: ArrayLike) -> FloatArray:
    """Exact linearised drift: the Jacobian of ``grad L`` at ``(W1, W2)``, for any data.

    The SGF of Eqs. 51a/b linearised about ``(W1, W2)`` reads
    ``d(dtheta)/dt = -G dtheta + noise`` with ``G`` this matrix, which is the Hessian of
    ``L`` everywhere (the drift is a gradient). In Kronecker form (Eqs. 54a/b without
    assuming a minimum or whitened inputs), with ``E = Sigma0_yx - W2 W1 Sigma0_xx``::

        G11 = Sigma0_xx kron W2^T W2
        G12 = Sigma0_xx W1^T kron W2^T - (E^T kron 1_{N_h}) K_(N_o, N_h)
        G22 = W1 Sigma0_xx W1^T kron 1_{N_o},      G21 = G12^T

    (``K`` the :func:`commutation_matrix`). At a minimum ``E = 0``; with whitened inputs
    it then equals ``T Gamma T^T`` with ``Gamma`` of Eq. 63 and ``T`` from
    :func:`z_embedding`.
    """
    X, Y, W1, W2 = _check_data(X, Y, W1, W2)
    n_out, n_hid = W2.shape
    Sxx, Syx = _moments(X, Y)
    E = Syx - W2 @ W1 @ Sxx
    G11, G12, G22 = _gauss_newton_blocks(Sxx, W1, W2)
    G12 = G12 - np.kron(E.T, np.eye(n_hid)) @ commutation_matrix(n_out, n_hid)
    return np.block([[G11, G12], [G12.T, G22]])


def _gauss_newton_blocks(
    Sxx: FloatArray, W1: FloatArray, W2: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Blocks ``G11, G12, G22`` of the Gauss-Newton part of :func:`exact_drift` (``E = 0``)."""
    n_out = W2.shape[0]
    G11 = np.kron(Sxx, W2.T @ W2)
    G12 = np.kron(Sxx @ W1.T, W2.T)
    G22 = np.kron(W1 @ Sxx @ W1.T, np.eye(n_out))
    return G11, G12, G22


def residual_norm(X: ArrayLike, Y: ArrayLike, W1: ArrayLike, W2: ArrayLike) -> float:
    """Spectral norm ``||E||_2`` of the residual ``E = Sigma0_yx - W2 W1 Sigma0_xx`` (Eq. 54).

    :func:`exact_drift` is the positive semi-definite Gauss-Newton matrix
    ``G_GN = (1/P) sum_mu J_mu^T J_mu`` (:func:`hessian_full`), whose null space has the exact
    dimension ``n - N_o rank(Sigma0_xx)`` (Eq. 64) for ``W2`` of full row rank, plus the
    residual term ``[[0, R], [R^T, 0]]`` with ``R = -(E^T kron 1_{N_h}) K``, whose spectral
    norm is exactly ``||E||_2`` (``K`` is orthogonal). By Weyl's inequality every eigenvalue of
    the drift lies within ``||E||_2`` of one of ``G_GN``: away from an exact minimum the zero
    modes spread over ``[-||E||_2, ||E||_2]``. ``E`` is the gradient in product space
    (``dL/dW1 = -W2^T E``, ``dL/dW2 = -E W1^T``), so ``||E||_2 <= |dL/dW1| / s_min(W2)``.
    """
    X, Y, W1, W2 = _check_data(X, Y, W1, W2)
    Sxx, Syx = _moments(X, Y)
    return float(np.linalg.norm(Syx - W2 @ W1 @ Sxx, 2))


def exact_noise_covariance(
    X: ArrayLike,
    Y: ArrayLike,
    W1: ArrayLike,
    W2: ArrayLike,
    batch_size: int,
    sampling: Sampling = "with",
) -> FloatArray:
    """Exact covariance of the mini-batch gradient at ``(W1, W2)`` in ``theta`` space.

    Appendix C (Eq. 83) applied to the per-sample gradients ``g^mu``
    (:func:`per_sample_gradients`)::

        C = c(P, S) [ (1/P) sum_mu g^mu g^mu^T - g g^T ],   g = (1/P) sum_mu g^mu,

    with ``c = 1/S`` (with replacement) or ``(P - S) / (S (P - 1))`` (without). Valid for
    any data and weights; the paper's ``cov(R_1, R_2)`` (Eqs. 57, 92-94) is ``lr * C`` at
    a minimum in the large-P, whitened-input approximation.
    """
    X, Y, W1, W2 = _check_data(X, Y, W1, W2)
    S = _check_batch_size(batch_size)
    if sampling not in ("with", "without"):
        raise ValueError(f"sampling must be 'with' or 'without', got {sampling!r}")
    P = X.shape[0]
    c = noise_prefactor(P, S, sampling)
    G = per_sample_gradients(X, Y, W1, W2)
    g = G.mean(axis=0)
    return c * (G.T @ G / P - np.outer(g, g))


def minibatch_moment_covariances(
    X: ArrayLike, Y: ArrayLike, batch_size: int, sampling: Sampling = "with"
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Exact mini-batch covariances of ``dSigma_xx`` and ``dSigma_yx`` (Eq. 47, App. C).

    Returns the 4-index tensors ``cov(dSigma_xx)[i, j, k, l]``,
    ``cov(dSigma_yx)[i, j, k, l] = <dSigma_yx[i, j] dSigma_yx[k, l]>`` and
    ``cov(dSigma_xx[i, j], dSigma_yx[k, l])``, each ``c(P, S) [(1/P) sum_mu a^mu b^mu - a b]``.
    """
    X = _as_matrix(X, "X")
    Y = np.asarray(Y, dtype=float)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
        raise ValueError(f"Y must have shape (P, N_o) with P = {X.shape[0]}, got {Y.shape}")
    S = _check_batch_size(batch_size)
    P = X.shape[0]
    c = noise_prefactor(P, S, sampling)
    Sxx, Syx = _moments(X, Y)
    xx = np.einsum("pi,pj,pk,pl->ijkl", X, X, X, X) / P - np.einsum("ij,kl->ijkl", Sxx, Sxx)
    yy = np.einsum("pi,pj,pk,pl->ijkl", Y, X, Y, X) / P - np.einsum("ij,kl->ijkl", Syx, Syx)
    xy = np.einsum("pi,pj,pk,pl->ijkl", X, X, Y, X) / P - np.einsum("ij,kl->ijkl", Sxx, Syx)
    return c * xx, c * yy, c * xy


def wick_moment_covariances(
    Sxx: ArrayLike, Syx: ArrayLike, Syy: ArrayLike, batch_size: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Large-P Gaussian (Wick) covariances of ``dSigma_xx``, ``dSigma_yx`` (Eqs. 48a-c).

    ``Syy`` is the output covariance ``<y y^T>``; the paper assumes it diagonal,
    ``<y_i y_k> = <y_i^2> delta_ik``. With ``Sxx = sigma_x^2 1`` these reduce to the
    corrected Eq. 50: ``cov(dSigma_xx) = sigma_x^4 (d_ik d_jl + d_il d_jk) / S`` and
    ``cov(dSigma_yx) = (<y_i^2> sigma_x^2 d_ik d_jl + Sigma_yx[i, l] Sigma_yx[k, j]) / S``.
    """
    Sxx = check_square(Sxx, "Sxx")
    Syx = _as_matrix(Syx, "Syx")
    Syy = check_square(Syy, "Syy")
    S = _check_batch_size(batch_size)
    xx = np.einsum("ik,jl->ijkl", Sxx, Sxx) + np.einsum("il,jk->ijkl", Sxx, Sxx)
    yy = np.einsum("ik,jl->ijkl", Syy, Sxx) + np.einsum("il,kj->ijkl", Syx, Syx)
    xy = np.einsum("ki,jl->ijkl", Syx, Sxx) + np.einsum("il,kj->ijkl", Sxx, Syx)
    return xx / S, yy / S, xy / S


def reduced_loss(
    dW1: ArrayLike, dW2: ArrayLike, W1: ArrayLike, W2: ArrayLike, sigma_x2: float
) -> float:
    """Reduced quadratic loss of the fluctuations (text after Eq. 58, corrected).

    ``L~ = (sigma_x^2 / 2) tr[W2^T W2 dW1 dW1^T + 2 dW2^T W2 dW1 W1^T + dW2^T dW2 W1 W1^T]
    = (sigma_x^2 / 2) ||W2 dW1 + dW2 W1||_F^2``: the second-order change of ``L`` about
    a minimum with whitened inputs, ``theta^T G theta / 2`` (the paper omits the 2).
    """
    W1, W2 = _check_weights(W1, W2)
    dW1 = np.asarray(dW1, dtype=float)
    dW2 = np.asarray(dW2, dtype=float)
    if dW1.shape != W1.shape:
        raise ValueError(f"dW1 must have the shape of W1 {W1.shape}, got {dW1.shape}")
    if dW2.shape != W2.shape:
        raise ValueError(f"dW2 must have the shape of W2 {W2.shape}, got {dW2.shape}")
    sigma_x2 = check_positive(sigma_x2, "sigma_x2")
    return float(0.5 * sigma_x2 * np.sum((W2 @ dW1 + dW2 @ W1) ** 2))


# -------------------------------------------------------------- minima and data


def whiten(X: ArrayLike, sigma_x2: float) -> FloatArray:
    """Transform ``X`` so that ``X.T @ X / P = sigma_x2 * 1`` exactly (Eq. 49).

    ``X -> X (X^T X / (P sigma_x2))^{-1/2}``; needs ``N_i <= P`` and full column rank.
    """
    X = _as_matrix(X, "X")
    sigma_x2 = check_positive(sigma_x2, "sigma_x2")
    P, n_in = X.shape
    if n_in > P:
        raise ValueError(f"X must have N_i <= P to be whitened, got shape {X.shape}")
    omega, V = np.linalg.eigh(X.T @ X / (P * sigma_x2))
    if omega[0] <= omega[-1] * n_in * np.finfo(float).eps:
        raise ValueError("X must have full column rank to be whitened")
    return X @ (V / np.sqrt(omega)) @ V.T


def zero_balanced_minimum(
    w: ArrayLike, n_hidden: int, Q: ArrayLike | None = None
) -> tuple[FloatArray, FloatArray]:
    """Zero-balanced factors with ``W2 W1 = w`` and ``W2^T W2 = W1 W1^T`` (Eqs. 42, 44).

    With the compact SVD ``w = U~ S~ V~^T`` (Eq. 43, rank ``m``):
    ``W2 = U~ S~^{1/2} Q^T`` and ``W1 = Q S~^{1/2} V~^T`` for any ``Q`` of shape
    ``(N_h, m)`` with orthonormal columns (default: the first ``m`` unit vectors). These
    are the late-time gradient-flow weights from a zero-balanced start for whitened
    inputs (Braun et al. 2022), so ``W1^T W1 = V~ S~ V~^T`` and ``W2 W2^T = U~ S~ U~^T``.
    """
    w = _as_matrix(w, "w")
    U, s, Vt = np.linalg.svd(w, full_matrices=False)
    m = int(np.sum(s > s[0] * max(w.shape) * np.finfo(float).eps)) if s.size else 0
    if not isinstance(n_hidden, Integral) or n_hidden < m:
        raise ValueError(f"n_hidden must be an integer >= rank(w) = {m}, got {n_hidden!r}")
    if Q is None:
        Q = np.eye(n_hidden)[:, :m]
    Q = _as_matrix(Q, "Q")
    if Q.shape != (n_hidden, m) or not np.allclose(Q.T @ Q, np.eye(m), atol=1e-12):
        raise ValueError(f"Q must have shape ({n_hidden}, {m}) with orthonormal columns")
    r = np.sqrt(s[:m])
    return (Q * r) @ Vt[:m], (U[:, :m] * r) @ Q.T


def minimum_from_w2(
    w: ArrayLike, W2: ArrayLike, K: ArrayLike | None = None
) -> tuple[FloatArray, FloatArray]:
    """A generic (not balanced) minimum: ``W1 = W2^+ w + (1 - W2^+ W2) K`` for given ``W2``.

    Then ``W2 W1 = w`` whenever ``W2`` has full row rank ``N_o <= N_h``. With random ``W2``
    and ``K`` this mimics the late-time weights from a random start (``D_1`` of full rank,
    Sec. III.2.4). Returns ``(W1, W2)``.
    """
    w = _as_matrix(w, "w")
    W2 = _as_matrix(W2, "W2")
    if W2.shape[0] != w.shape[0]:
        raise ValueError(f"W2 must have N_o = {w.shape[0]} rows, got shape {W2.shape}")
    if np.linalg.matrix_rank(W2) < W2.shape[0]:
        raise ValueError("W2 must have full row rank N_o")
    W2p = np.linalg.pinv(W2)
    W1 = W2p @ w
    if K is not None:
        K = _as_matrix(K, "K")
        if K.shape != W1.shape:
            raise ValueError(f"K must have shape {W1.shape}, got {K.shape}")
        W1 = W1 + (np.eye(W2.shape[1]) - W2p @ W2) @ K
    return W1, W2.copy()


# ------------------------------------------------------------ Eq. 63 (whitened)


class SVDFactors(NamedTuple):
    """SVDs of Sec. III.2.3: ``W1 = A S1 B^T`` (full), ``W2 = U S2 V^T`` (thin).

    ``A (N_h, N_h)``, ``S1 (N_h, N_i)``, ``B (N_i, N_i)``; ``U (N_o, N_o)``,
    ``S2 (N_o, N_o)``, ``V (N_h, N_o)``. ``d1`` (length ``N_h``) and ``d2`` (length
    ``N_o``) are the diagonals of ``D1 = S1 S1^T`` and ``D2 = S2^T S2`` (Eqs. 59a/b),
    descending (``d1`` padded with zeros if ``N_h > N_i``).
    """

    A: FloatArray
    S1: FloatArray
    B: FloatArray
    U: FloatArray
    S2: FloatArray
    V: FloatArray
    d1: FloatArray
    d2: FloatArray


def svd_factors(W1: ArrayLike, W2: ArrayLike) -> SVDFactors:
    """The SVDs of Sec. III.2.3 (Eqs. 59a/b); requires ``N_o <= N_h``."""
    W1, W2 = _check_weights(W1, W2)
    n_hid, n_in = W1.shape
    n_out = W2.shape[0]
    if n_out > n_hid:
        raise ValueError(f"W2 must have N_o <= N_h (thin SVD of Sec. III.2.3), got {W2.shape}")
    A, s1, Bt = np.linalg.svd(W1, full_matrices=True)
    S1 = np.zeros((n_hid, n_in))
    S1[np.arange(s1.size), np.arange(s1.size)] = s1
    U, s2, Vt = np.linalg.svd(W2, full_matrices=False)
    d1 = np.zeros(n_hid)
    d1[: s1.size] = s1**2
    return SVDFactors(A, S1, Bt.T, U, np.diag(s2), Vt.T, d1, s2**2)


def z_embedding(W1: ArrayLike, W2: ArrayLike) -> FloatArray:
    """Matrix ``T`` with ``theta = T Z``: ``dW1 = V z1``, ``dW2 = z2 A^T`` (Sec. III.2.3).

    ``T = blockdiag(1_{N_i} kron V, A kron 1_{N_o})`` of shape
    ``(N_h N_i + N_o N_h, N_o N_i + N_o N_h)`` with orthonormal columns; ``T^T`` maps a
    weight-space vector to ``Z`` (discarding the ``N_i (N_h - N_o)`` directions of ``dW1``
    outside the row space of ``W2``, which have neither drift nor noise at a minimum).
    """
    f = svd_factors(W1, W2)
    n_in = f.B.shape[0]
    n_out = f.U.shape[0]
    T1 = np.kron(np.eye(n_in), f.V)
    T2 = np.kron(f.A, np.eye(n_out))
    return scipy.linalg.block_diag(T1, T2)


def drift_diffusion(
    W1: ArrayLike,
    W2: ArrayLike,
    sigma_x2: float,
    sigma_y2: float,
    batch_size: int,
    *,
    n_samples: int | None = None,
    sampling: Sampling = "with",
) -> tuple[FloatArray, FloatArray]:
    """Drift ``Gamma`` and gradient-noise covariance ``Delta`` of Eq. 63 in ``Z`` space.

    ``Gamma / sigma_x^2 = [[1_{N_i} kron D2, B S1^T kron (U S2)^T],
    [S1 B^T kron U S2, D1 kron 1_{N_o}]] = Delta / (c sigma_x^2 sigma_y^2)`` with
    ``c = 1/S``, i.e. ``Delta = c sigma_y^2 Gamma``. ``Delta`` here is the paper's
    ``Delta / lambda`` (see module conventions); ``sigma_y2`` is ``<y^2>``.

    Valid (as in the paper) for **whitened inputs** ``Sigma0_xx = sigma_x^2 1`` (Eq. 49),
    ``(W1, W2)`` at a **minimum** (``W2 W1 = w*``, so that the residual terms of Eq. 54
    vanish), labels independent of the inputs, and the large-P Wick approximation of
    Eq. 48; any ``N_o <= N_h`` (the paper's Eq. 63 holds for general ``N_o``; Eqs. 69-73
    need ``N_o = 1``). For other data use :func:`exact_drift` and
    :func:`exact_noise_covariance` (the exact linearisation).

    If ``n_samples`` (P) is given, ``Delta`` includes the finite-P factor of the corrected
    Eq. 57, ``(1 - N_i / P)``, and ``c`` is the App. C prefactor for ``sampling``;
    otherwise the paper's ``P -> infinity`` form (factor 1, ``c = 1/S``) is returned.
    """
    W1, W2 = _check_weights(W1, W2)
    sigma_x2 = check_positive(sigma_x2, "sigma_x2")
    sigma_y2 = check_positive(sigma_y2, "sigma_y2")
    S = _check_batch_size(batch_size)
    n_in = W1.shape[1]
    n_out = W2.shape[0]
    if n_samples is None:
        if sampling != "with":
            raise ValueError("sampling='without' needs n_samples (P) for its App. C prefactor")
        c = 1.0 / S
    else:
        if not isinstance(n_samples, Integral) or n_samples < max(n_in, S):
            raise ValueError(
                f"n_samples must be an integer >= max(N_i, batch_size), got {n_samples!r}"
            )
        c = noise_prefactor(int(n_samples), S, sampling) * (1.0 - n_in / n_samples)
    f = svd_factors(W1, W2)
    US2 = f.U @ f.S2
    G11 = np.kron(np.eye(n_in), np.diag(f.d2))
    G12 = np.kron(f.B @ f.S1.T, US2.T)
    G22 = np.kron(np.diag(f.d1), np.eye(n_out))
    Gamma = sigma_x2 * np.block([[G11, G12], [G12.T, G22]])
    return Gamma, c * sigma_y2 * Gamma


def drift_eigenvalues(W1: ArrayLike, W2: ArrayLike, sigma_x2: float = 1.0) -> FloatArray:
    """Eigenvalues of ``Gamma`` (Eq. 64 times ``sigma_x^2``), sorted descending.

    For each output mode ``l`` (``d2_l`` of ``D2``): ``d1_k + d2_l`` and ``0`` for
    ``k = 1..min(N_h, N_i)``, ``d2_l`` with multiplicity ``N_i - min(N_h, N_i)``, and
    ``0`` with multiplicity ``N_h - min(N_h, N_i)``. For ``N_i >= N_h >= N_o`` this is
    Eq. 64: ``N_h N_o`` zeros and ``rank(Gamma) = N_o N_i`` if ``W2`` has rank ``N_o``.
    The eigenvalues of ``Delta`` are these times ``sigma_y^2 / S``.
    """
    sigma_x2 = check_positive(sigma_x2, "sigma_x2")
    f = svd_factors(W1, W2)
    n_hid = f.A.shape[0]
    n_in = f.B.shape[0]
    m = min(n_hid, n_in)
    out = []
    for d2 in f.d2:
        out.append(f.d1[:m] + d2)
        out.append(np.zeros(m))
        out.append(np.full(n_in - m, d2))
        out.append(np.zeros(n_hid - m))
    return np.sort(sigma_x2 * np.concatenate(out))[::-1]


def stationary_covariance(
    Gamma: ArrayLike,
    Delta: ArrayLike,
    lr: float,
    rtol: float | None = None,
    *,
    atol: float | None = None,
) -> FloatArray:
    """Stationary covariance ``M = lr Gamma^+ Delta / 2`` (Eq. 66).

    Solves the Lyapunov equation ``Gamma M + M Gamma^T = lr Delta`` (Eq. 65) when
    ``Gamma`` is symmetric and ``Delta`` commutes with it and lies in its range (detailed
    balance), e.g. ``Delta ∝ Gamma`` as in Eq. 63; then, by Eq. 68, the nonzero
    eigenvalues of ``M`` all equal ``lr sigma_y^2 / (2S)``. Otherwise the result is in
    general not even symmetric; see
    :func:`lyapunov_covariance` for the general solution. The pseudo-inverse drops the
    singular values of ``Gamma`` up to ``max(rtol * s_max, atol)``: ``rtol`` defaults to the
    round-off floor ``10 n eps``, ``atol`` to ``RESIDUAL_CUT_FACTOR`` times
    :func:`zero_mode_spread` (round-off for the ``Gamma`` of Eq. 63 and at exact minima, so
    there the cut is the floor; about ``2 ||E||_2`` for :func:`exact_drift` at an optimiser's
    end point, whose zero modes the floor would invert).
    """
    Gamma = check_square(Gamma, "Gamma")
    Delta = check_square(Delta, "Delta")
    if Delta.shape != Gamma.shape:
        raise ValueError(f"Delta must have the shape of Gamma {Gamma.shape}, got {Delta.shape}")
    lr = check_positive(lr, "lr")
    if rtol is None:
        rtol = svd_rtol(Gamma.shape)
    atol = residual_atol(Gamma, atol)
    if atol > 0:
        s_max = float(np.linalg.norm(Gamma, 2))
        rtol = max(rtol, atol / s_max) if s_max > 0 else rtol
    return 0.5 * lr * np.linalg.pinv(Gamma, rcond=rtol) @ Delta


def _structural_rank(X: FloatArray, W1: FloatArray, W2: FloatArray, rtol: float | None) -> int:
    """Rank of the Gauss-Newton part of the drift (positive semi-definite and residual-free,
    so its zero modes are zero to round-off): ``N_o rank(Sigma0_xx)`` for ``W2`` of full rank."""
    G11, G12, G22 = _gauss_newton_blocks(X.T @ X / X.shape[0], W1, W2)
    gn = np.linalg.eigvalsh(np.block([[G11, G12], [G12.T, G22]]))[::-1]
    return int(np.sum(gn > rank_cut(np.abs(gn), (gn.size,), rtol, 0.0)))


def exact_stationary_covariance(
    X: ArrayLike,
    Y: ArrayLike,
    W1: ArrayLike,
    W2: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: Sampling = "with",
    rtol: float | None = None,
    *,
    atol: float | None = None,
) -> FloatArray:
    """Weight-space covariance from the exact linearisation at ``(W1, W2)``, any data.

    :func:`lyapunov_covariance` of :func:`exact_drift` and
    :func:`exact_noise_covariance`, in ``theta = [vec(W1); vec(W2)]`` space. At a minimum
    with whitened inputs and large P it approaches ``T M T^T`` from Eqs. 63 and 66.

    Rank cut: singular values of the drift up to ``max(rtol * s_max, atol)`` are dropped,
    ``rtol`` by default the round-off floor ``10 n eps`` and ``atol`` by default
    ``RESIDUAL_CUT_FACTOR * ||E||_2`` (:func:`residual_norm`), twice the Weyl bound on the
    zero modes at a point near a minimum such as an optimiser's end point (at an exact minimum
    ``||E||`` is round-off and the cut is the floor). With the default ``atol`` the number of
    kept modes is checked against the rank of the residual-free Gauss-Newton part; a mismatch
    (the point too far from a minimum for its zero modes to be told from the softest
    curvature) raises ``ValueError``.
    """
    X, Y, W1, W2 = _check_data(X, Y, W1, W2)
    G = exact_drift(X, Y, W1, W2)
    C = exact_noise_covariance(X, Y, W1, W2, batch_size, sampling)
    lr = check_positive(lr, "lr")
    U, s, _ = np.linalg.svd(G)
    auto = atol is None
    if auto:
        atol = RESIDUAL_CUT_FACTOR * residual_norm(X, Y, W1, W2)
    cut = rank_cut(s, G.shape, rtol, atol)
    keep = s > cut
    if auto and int(keep.sum()) != (rank := _structural_rank(X, W1, W2, rtol)):
        raise ValueError(
            f"the range of the drift is ambiguous at this point: {int(keep.sum())} singular "
            f"values above the cut {cut:.3e} (= {RESIDUAL_CUT_FACTOR} x the residual "
            f"||E||_2 = {atol / RESIDUAL_CUT_FACTOR:.3e}), but the Gauss-Newton rank is {rank}; "
            "the point is too far from a minimum (converge the optimiser further) or pass atol"
        )
    return lyapunov_on_range(U[:, keep], G, C, lr, cut)


def m22_closed_form(
    W1: ArrayLike, W2: ArrayLike, lr: float, sigma_y2: float, batch_size: int
) -> FloatArray:
    """Diagonal of ``M22 = cov(z2)`` (Eq. 70), length ``N_h``; needs ``N_o = 1``.

    ``M22 = (lr sigma_y^2 / (2S)) diag{D1_ii / (D1_ii + D2)}``. Exact for ``M`` of Eq. 66
    with ``Gamma``, ``Delta`` of Eq. 63 (whitened inputs, at a minimum, ``P -> infinity``);
    with the finite-P factor of the corrected Eq. 57 multiply by ``(1 - N_i / P)``. The
    entries are the eigenvalues of ``cov(vec dW2)`` (Eq. 67b), eigenvectors the columns of
    ``A`` (:func:`svd_factors`), in the same (descending ``d1``) order.
    """
    W1, W2 = _check_weights(W1, W2)
    if W2.shape[0] != 1:
        raise ValueError(f"W2 must have N_o = 1 row for Eq. 70, got shape {W2.shape}")
    lr = check_positive(lr, "lr")
    sigma_y2 = check_positive(sigma_y2, "sigma_y2")
    S = _check_batch_size(batch_size)
    f = svd_factors(W1, W2)
    if f.d2[0] <= 0:
        raise ValueError("W2 must be nonzero")
    return lr * sigma_y2 / (2 * S) * f.d1 / (f.d1 + f.d2[0])


def weight_space_covariances(
    M: ArrayLike, W1: ArrayLike, W2: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Covariances of ``vec(dW1)``, ``vec(dW2)`` and their cross block (Eqs. 67a/b).

    ``cov(vec dW1) = (1_{N_i} kron V) M11 (1_{N_i} kron V^T)``,
    ``cov(vec dW2) = (A kron 1_{N_o}) M22 (A^T kron 1_{N_o})`` and the cross covariance
    ``(1 kron V) M12 (A^T kron 1)``, i.e. the blocks of ``T M T^T`` (:func:`z_embedding`).
    ``M`` is a ``Z``-space covariance (e.g. from :func:`stationary_covariance` of
    :func:`drift_diffusion`), same SVD basis.
    """
    T = z_embedding(W1, W2)
    M = check_square(M, "M")
    if M.shape[0] != T.shape[1]:
        raise ValueError(f"M must have shape ({T.shape[1]}, {T.shape[1]}), got {M.shape}")
    full = T @ M @ T.T
    n1 = np.asarray(W1).size
    return full[:n1, :n1], full[n1:, n1:], full[:n1, n1:]


# ------------------------------------------------------------ loss perturbations


def _direction(direction: ArrayLike, n: int) -> FloatArray:
    v = np.asarray(direction, dtype=float)
    if v.shape != (n,):
        raise ValueError(f"direction must have shape ({n},) (theta space), got {v.shape}")
    norm = float(np.linalg.norm(v))
    if norm == 0:
        raise ValueError("direction must be nonzero")
    return v / norm


def loss_perturbation(
    X: ArrayLike, Y: ArrayLike, W1: ArrayLike, W2: ArrayLike, direction: ArrayLike, theta: float
) -> float:
    """``dL(theta v) = L(theta0 + theta v) - L(theta0)`` along the unit ``v`` (Eq. 73, Fig. 7).

    ``direction`` is a ``theta``-space vector (normalised here), e.g. an eigenvector of
    :func:`weight_space_covariances` embedded with zeros in the other layer.
    """
    X, Y, W1, W2 = _check_data(X, Y, W1, W2)
    n_out, n_hid = W2.shape
    n_in = W1.shape[1]
    t0 = pack(W1, W2)
    v = _direction(direction, t0.size)
    W1p, W2p = unpack(t0 + float(theta) * v, n_in, n_hid, n_out)
    return loss(X, Y, W1p, W2p) - loss(X, Y, W1, W2)


def curvature_along(
    X: ArrayLike, Y: ArrayLike, W1: ArrayLike, W2: ArrayLike, direction: ArrayLike
) -> float:
    """Curvature ``kappa = d^2 L(theta0 + t v) / dt^2`` at ``t = 0`` for unit ``v``.

    ``kappa = v^T G v`` with the exact Hessian ``G`` (:func:`exact_drift`). Along
    ``v = vec(a_i^T)`` in the ``W2`` block (``a_i`` an eigenvector of ``W1 W1^T``),
    ``L`` is exactly quadratic in ``t`` and ``kappa = a_i^T W1 Sigma0_xx W1^T a_i``
    (``= sigma_x^2 D1_ii`` for whitened inputs, Eq. 73).
    """
    G = exact_drift(X, Y, W1, W2)
    v = _direction(direction, G.shape[0])
    return float(v @ G @ v)


def ivfr_curvature(
    m22: ArrayLike,
    d2: float,
    sigma_x2: float,
    sigma_y2: float,
    lr: float,
    batch_size: int,
    approximation: Literal["eq73", "eq70"] = "eq73",
) -> FloatArray:
    """Curvature predicted from the ``W2`` fluctuation variances ``m22`` (Eq. 73, IVFR).

    ``"eq73"``: the paper's ``kappa_i = 2 S sigma_x^2 D2 M22_ii / (lr sigma_y^2)``, which
    uses Eq. 72 (``D1_ii << D2``). ``"eq70"``: Eq. 70 inverted exactly,
    ``D1_ii = D2 M22_ii / (c - M22_ii)`` with ``c = lr sigma_y^2 / (2S)``, so
    ``kappa_i = sigma_x^2 D1_ii``. Both assume ``N_o = 1`` (``d2`` the scalar ``D2``).
    """
    m22 = np.asarray(m22, dtype=float)
    d2 = check_positive(d2, "d2")
    sigma_x2 = check_positive(sigma_x2, "sigma_x2")
    sigma_y2 = check_positive(sigma_y2, "sigma_y2")
    lr = check_positive(lr, "lr")
    S = _check_batch_size(batch_size)
    c = lr * sigma_y2 / (2 * S)
    if approximation == "eq73":
        return sigma_x2 * d2 * m22 / c
    if approximation == "eq70":
        if np.any(m22 >= c):
            raise ValueError(f"m22 must be below lr sigma_y2 / (2S) = {c} to invert Eq. 70")
        return sigma_x2 * d2 * m22 / (c - m22)
    raise ValueError(f"approximation must be 'eq73' or 'eq70', got {approximation!r}")
