"""Closed-form theory of SGD weight fluctuations in a single-layer linear network.

Implements Section II and Appendix C of paper 000 ("Weight fluctuations in (deep)
linear neural networks and a derivation of the inverse-variance flatness relation").
Pure numpy/scipy, no file I/O.

Conventions
-----------
* ``X`` has shape ``(P, N)``: one **row** per sample ``x^mu``. The paper's design matrix
  is the transpose (``X_paper in R^{N x P}``, columns are samples). Hence every paper
  expression ``X_paper A X_paper^T`` reads ``X.T @ A @ X`` here, e.g. ``H = X.T @ X / P``
  (Eq. 4) and ``C = X.T @ diag(K) @ X / S`` (Eq. 17).
* ``y`` has shape ``(P,)`` (the paper's row vector ``Y``); the weights ``w`` have shape
  ``(N,)``.
* ``lr`` is the SGD learning rate ``lambda``; ``batch_size`` is the mini-batch size ``S``.
* Continuous time of the SDE (Eq. 13) is ``t = lr * tau`` with ``tau`` the SGD step
  counter. (The paper writes ``t = tau / lambda``, which is inconsistent with the
  Euler-Maruyama step ``w(tau + 1) = w(tau) - lambda grad L`` of Eq. 11.)

Rank-deficient Hessians (``N > P``) are handled by restricting all inverses to the
range of ``H``: eigenvalues below ``rtol * max(omega)`` are treated as zero.

Paper typos found while implementing (see ``tests/test_single_layer_theory.py``):

* Eq. 15: the subtracted term must be ``(H wbar - J)(H wbar - J)^T`` (it is
  ``grad L grad L^T``, Eq. 14), not ``H wbar wbar^T H``; the two agree only when
  ``J = 0`` (``P -> infinity``). Eq. 17 is correct (it follows from Eq. 14 at ``w*``).
* Text after Eq. 27: the Marchenko-Pastur lower edge is
  ``sigma_x^2 (1 - sqrt(N/P))^2``, not ``sigma_x^2 (sqrt(P/N) - 1)^2``.
* Text after Eq. 35: the common eigenvalue of Eq. 34 is ``lambda sigma^2 / (2 S)``.
"""

from __future__ import annotations

from numbers import Integral
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "circulation",
    "detailed_balance_covariance",
    "detailed_balance_eigenvalues",
    "hessian",
    "hessian_noise_covariance",
    "isotropic_covariance",
    "loss",
    "marchenko_pastur_edges",
    "min_norm_solution",
    "noise_covariance",
    "noise_prefactor",
    "optimal_loss",
    "relaxation_rates",
    "sample_weights_K",
    "slowest_relaxation_steps",
    "sorted_eigenvalues",
    "stationary_covariance",
]

Sampling = Literal["with", "without"]
_SAMPLING_VALUES = ("with", "without")

FloatArray = NDArray[np.float64]


# --------------------------------------------------------------------------- helpers


def _check_xy(X: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (P, N), got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape (P,) = ({X.shape[0]},), got shape {y.shape}")
    return X, y


def _check_square(A: ArrayLike, name: str) -> FloatArray:
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {A.shape}")
    return A


def _default_rtol(n: int) -> float:
    return max(n, 1) * float(np.finfo(float).eps)


def _eigh_sym(H: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Eigen-decomposition of the symmetrised matrix, eigenvalues ascending."""
    omega, V = np.linalg.eigh(0.5 * (H + H.T))
    return omega, V


def _range_threshold(omega: FloatArray, rtol: float | None) -> float:
    if rtol is None:
        rtol = _default_rtol(omega.size)
    scale = float(np.max(np.abs(omega))) if omega.size else 0.0
    return rtol * scale


def _pair_ratio(
    numer: FloatArray, denom: FloatArray, threshold: float
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """numer / denom where denom > threshold, else 0 (no warnings)."""
    keep = denom > threshold
    out = np.zeros_like(numer)
    np.divide(numer, denom, out=out, where=keep)
    return out, keep


def _pinv_power(H: FloatArray, power: float, rtol: float | None) -> FloatArray:
    """(H^+)^power for symmetric PSD H, restricted to the range of H."""
    omega, V = _eigh_sym(H)
    thr = _range_threshold(omega, rtol)
    keep = omega > thr
    d = np.zeros_like(omega)
    d[keep] = omega[keep] ** (-power)
    return (V * d) @ V.T


# --------------------------------------------------------------------- regression


def hessian(X: ArrayLike) -> FloatArray:
    """Hessian ``H = Sigma^xx`` of the full-batch loss (Eq. 4).

    ``H = X_paper X_paper^T / P = X.T @ X / P`` with ``X`` of shape ``(P, N)``.
    Returns an ``(N, N)`` symmetric positive semi-definite matrix.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (P, N), got shape {X.shape}")
    return X.T @ X / X.shape[0]


def min_norm_solution(X: ArrayLike, y: ArrayLike) -> FloatArray:
    """Minimum-norm least-squares solution ``w* = (Sigma^xx)^+ Sigma^xy`` (Eq. 7).

    Covers both regimes: for ``N < P`` (full column rank) this is the unique minimiser
    ``(X^T X)^-1 X^T y = u + H^-1 J``; for ``N > P`` it is the minimum-norm interpolant
    ``X^T (X X^T)^-1 y`` (our orientation). Computed with ``numpy.linalg.lstsq``.
    """
    X, y = _check_xy(X, y)
    w, *_ = np.linalg.lstsq(X, y, rcond=None)
    return w


def loss(X: ArrayLike, y: ArrayLike, w: ArrayLike) -> FloatArray | float:
    """Full-batch mean-square loss ``L(w) = ||X w - y||^2 / (2P)`` (Eq. 3).

    ``w`` may be a single weight vector of shape ``(N,)`` (returns a float) or a batch
    of weight vectors of shape ``(..., N)`` (returns an array of shape ``(...)``).
    """
    X, y = _check_xy(X, y)
    w = np.asarray(w, dtype=float)
    if w.shape[-1:] != (X.shape[1],):
        raise ValueError(f"w must have shape (..., N) with N = {X.shape[1]}, got {w.shape}")
    resid = w @ X.T - y
    out = 0.5 * np.sum(resid**2, axis=-1) / X.shape[0]
    return float(out) if out.ndim == 0 else out


def optimal_loss(X: ArrayLike, y: ArrayLike) -> float:
    """Loss of the fully trained model ``L* = L(w*)`` (Eq. 26 text, Eq. 9).

    Computed in projector form (Eq. 26, with ``eps -> y``, which is exact because the
    projector annihilates the teacher part ``X u``)::

        L* = (1/2P) y^T (1 - X X^+) y ,

    where ``X X^+`` projects onto the column space of ``X`` (our orientation; the
    paper's ``X^T (X X^T)^-1 X``). Vanishes (to round-off) for ``N >= P`` with full-rank
    data. The projector is built from a rank-revealing SVD.
    """
    X, y = _check_xy(X, y)
    P = X.shape[0]
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    rank = int(np.sum(s > (s[0] * max(X.shape) * np.finfo(float).eps if s.size else 0.0)))
    Ur = U[:, :rank]
    r = y - Ur @ (Ur.T @ y)
    return float(0.5 * (r @ r) / P)


# ------------------------------------------------------------------------- noise


def noise_prefactor(P: int, batch_size: int, sampling: Sampling = "with") -> float:
    """Mini-batch covariance prefactor of Appendix C (Eq. 83).

    Returns ``1/S`` for sampling with replacement and ``(P - S) / (S (P - 1))`` for
    sampling without replacement (``S = batch_size``). For ``S = P`` without
    replacement (including ``P = 1``) the prefactor is 0 (full batch, no noise).

    Raises
    ------
    ValueError
        if ``sampling`` is not ``"with"`` or ``"without"``, if ``batch_size < 1``, if
        ``P < 1``, or if ``sampling == "without"`` and ``batch_size > P``.
    """
    if sampling not in _SAMPLING_VALUES:
        raise ValueError(
            f"sampling must be one of {_SAMPLING_VALUES!r} ('with' or 'without' "
            f"replacement), got {sampling!r}"
        )
    if not isinstance(P, Integral) or P < 1:
        raise ValueError(f"P must be a positive integer, got {P!r}")
    if not isinstance(batch_size, Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    S = int(batch_size)
    P = int(P)
    if sampling == "with":
        return 1.0 / S
    if S > P:
        raise ValueError(
            f"batch_size ({S}) must not exceed P ({P}) for sampling without replacement"
        )
    if S == P:
        return 0.0
    return (P - S) / (S * (P - 1))


def sample_weights_K(X: ArrayLike, y: ArrayLike) -> FloatArray:
    """Diagonal of the sample-space matrix ``K`` of Eq. 18, as a ``(P,)`` vector.

    ``K^{mu mu} = (1/P) [(eps X_p^T H^+ X_p / P - eps)^mu]^2`` (paper orientation). In
    our orientation the bracket is the residual ``r = X w* - y`` at the minimum-norm
    solution (Eq. 7); the paper's form with ``eps`` and our form with ``y`` coincide
    because ``1 - X X^+`` annihilates the teacher part ``X u``. Normalisation: Eq. 17
    reads ``C = (1/S) X_p K X_p^T = (1/S) X.T @ diag(K) @ X``.
    """
    X, y = _check_xy(X, y)
    r = X @ min_norm_solution(X, y) - y
    return r**2 / X.shape[0]


def noise_covariance(
    X: ArrayLike,
    y: ArrayLike,
    batch_size: int,
    sampling: Sampling = "with",
    w: ArrayLike | None = None,
) -> FloatArray:
    """Covariance ``C`` of the mini-batch gradient noise ``xi = grad L_B - grad L``.

    * ``w is None`` (default): additive-noise approximation at ``w = w*`` (Eqs. 17-18),
      ``C = c(P, S) * X.T @ diag(K) @ X`` with ``K`` from :func:`sample_weights_K`.
    * general ``w``: Eq. 14 (with the Appendix C prefactor, Eq. 83)::

          C = c(P, S) [ (1/P) sum_mu g^mu g^mu^T - G G^T ],
          g^mu = (w . x^mu - y^mu) x^mu,   G = grad L(w) = H (w - w*).

      (Eq. 15 is the same expression written with ``wbar = w - u``, but its last term
      should read ``(H wbar - J)(H wbar - J)^T``, not ``H wbar wbar^T H``.)

    ``c(P, S)`` is :func:`noise_prefactor` (``1/S`` with replacement, as in the paper's
    Eqs. 14 and 17; ``(P-S)/(S(P-1))`` without replacement).
    """
    X, y = _check_xy(X, y)
    P, N = X.shape
    pref = noise_prefactor(P, batch_size, sampling)
    if w is None:
        K = sample_weights_K(X, y)
        C = pref * (X.T @ (K[:, None] * X))
    else:
        w = np.asarray(w, dtype=float)
        if w.shape != (N,):
            raise ValueError(f"w must have shape ({N},), got {w.shape}")
        r = X @ w - y
        G = X.T @ r / P
        C = pref * (X.T @ ((r**2)[:, None] * X) / P - np.outer(G, G))
    return 0.5 * (C + C.T)


def hessian_noise_covariance(H: ArrayLike, sigma_eps2: float, batch_size: int) -> FloatArray:
    """Large-sample (``P -> infinity``) noise covariance ``C = sigma_eps^2 / S * H`` (Eq. 20)."""
    H = _check_square(H, "H")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    return sigma_eps2 / batch_size * H


# ------------------------------------------------------------------- stationary state


def stationary_covariance(
    H: ArrayLike, C: ArrayLike, lr: float, *, rtol: float | None = None
) -> FloatArray:
    """Stationary weight covariance ``M = <dw dw^T>`` with broken detailed balance (Eqs. 30-31).

    Evaluated in the eigenbasis ``H = V diag(omega) V^T``::

        Mt_ij = lr * Ct_ij / (omega_i + omega_j),   Ct = V^T C V,   M = V Mt V^T,

    which equals ``(lr/2) H^-1 (C + Q)`` of Eq. 30 and solves the Lyapunov equation
    ``H M + M H = lr C`` (Eq. 29). For singular ``H`` (``N > P``) pairs with
    ``omega_i + omega_j <= rtol * max|omega|`` (default ``rtol = N * machine eps``)
    are set to 0, i.e. ``M`` is restricted to the range of ``H`` (the null-null block
    of Eq. 29 has no stationary solution unless ``C`` vanishes there). No warnings.
    """
    H = _check_square(H, "H")
    C = _check_square(C, "C")
    omega, V = _eigh_sym(H)
    Ct = V.T @ (0.5 * (C + C.T)) @ V
    denom = omega[:, None] + omega[None, :]
    Mt, _ = _pair_ratio(lr * Ct, denom, _range_threshold(omega, rtol))
    M = V @ Mt @ V.T
    return 0.5 * (M + M.T)


def circulation(H: ArrayLike, C: ArrayLike, *, rtol: float | None = None) -> FloatArray:
    """Antisymmetric circulation matrix ``Q`` of Eq. 31 (broken detailed balance).

    ``Q = V Qt V^T`` with ``Qt_ij = (omega_i - omega_j) / (omega_i + omega_j) * Ct_ij``,
    ``Ct = V^T C V``. Pairs with ``omega_i + omega_j`` below ``rtol * max|omega|`` are set
    to 0 (see :func:`stationary_covariance`). ``Q = 0`` iff ``C`` commutes with ``H``.
    """
    H = _check_square(H, "H")
    C = _check_square(C, "C")
    omega, V = _eigh_sym(H)
    Ct = V.T @ (0.5 * (C + C.T)) @ V
    denom = omega[:, None] + omega[None, :]
    numer = (omega[:, None] - omega[None, :]) * Ct
    Qt, _ = _pair_ratio(numer, denom, _range_threshold(omega, rtol))
    return V @ Qt @ V.T  # antisymmetric by construction (not enforced; tested)


def detailed_balance_covariance(
    H: ArrayLike, C: ArrayLike, lr: float, *, rtol: float | None = None
) -> FloatArray:
    """Weight covariance under the detailed-balance assumption ``M = (lr/2) H^+ C`` (Eq. 33).

    Not symmetric in general (only if ``C`` commutes with ``H``); coincides with Eq. 30
    when ``Q = 0``, e.g. for ``C`` proportional to ``H`` (Eq. 20 -> Eq. 34). ``H^+`` is
    the pseudo-inverse restricted to eigenvalues above ``rtol * max|omega|``.
    """
    H = _check_square(H, "H")
    C = _check_square(C, "C")
    return 0.5 * lr * _pinv_power(H, 1.0, rtol) @ C


def detailed_balance_eigenvalues(
    H: ArrayLike, C: ArrayLike, lr: float, *, rtol: float | None = None
) -> FloatArray:
    """Eigenvalues of the detailed-balance covariance of Eq. 33, sorted descending.

    ``(lr/2) H^+ C`` is similar (same characteristic polynomial, ``AB`` vs ``BA``) to the
    symmetric matrix ``(lr/2) H^{+1/2} C H^{+1/2}``, whose eigenvalues are real and are
    computed with ``eigvalsh``.
    """
    H = _check_square(H, "H")
    C = _check_square(C, "C")
    Hm = _pinv_power(H, 0.5, rtol)
    return sorted_eigenvalues(0.5 * lr * Hm @ C @ Hm)


def isotropic_covariance(N: int, lr: float, sigma_eps2: float, batch_size: int) -> FloatArray:
    """Isotropic large-sample weight covariance ``M = lr sigma_eps^2 / (2S) * 1`` (Eq. 34).

    Follows from Eq. 33 (or Eq. 30) with ``C = sigma_eps^2 H / S`` (Eq. 20). Note the
    factor 1/2: the text after Eq. 35 quotes the eigenvalue as ``lambda sigma^2 / S``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    return lr * sigma_eps2 / (2.0 * batch_size) * np.eye(N)


# -------------------------------------------------------------------------- spectra


def sorted_eigenvalues(A: ArrayLike) -> FloatArray:
    """Eigenvalues of a symmetric matrix, sorted descending (``eigvalsh`` of ``(A+A^T)/2``).

    Used for the spectra of ``C`` (Eq. 17), ``M`` (Eq. 30) and ``H`` (Eq. 4).
    """
    A = _check_square(A, "A")
    return np.linalg.eigvalsh(0.5 * (A + A.T))[::-1].copy()


def relaxation_rates(H: ArrayLike) -> FloatArray:
    """Relaxation rates ``omega_k`` = eigenvalues of ``H``, ascending (Eqs. 25-27).

    Mode ``z_k = V^T w`` relaxes as ``exp(-omega_k t)`` in SDE time ``t = lr * tau``.
    """
    H = _check_square(H, "H")
    return np.linalg.eigvalsh(0.5 * (H + H.T))


def slowest_relaxation_steps(H: ArrayLike, lr: float, *, rtol: float | None = None) -> float:
    """Slowest relaxation time in SGD steps, ``1 / (lr * omega_min)`` (Eq. 27).

    ``omega_min`` is the smallest eigenvalue of ``H`` above ``rtol * max|omega|``
    (null-space directions of an overparameterised ``H`` do not relax and are skipped).
    Time conversion: SDE time ``t = lr * tau`` (Eq. 11 as an Euler step of Eq. 13), so
    a relaxation time ``1/omega`` corresponds to ``1/(lr omega)`` steps.

    Raises
    ------
    ValueError
        if ``lr <= 0`` or ``H`` has no positive eigenvalue.
    """
    if lr <= 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    omega = relaxation_rates(H)
    thr = _range_threshold(omega, rtol)
    pos = omega[omega > thr]
    if pos.size == 0:
        raise ValueError("H has no positive eigenvalue; nothing relaxes")
    return float(1.0 / (lr * pos[0]))


def marchenko_pastur_edges(N: int, P: int, sigma_x2: float) -> tuple[float, float]:
    """Edges of the Marchenko-Pastur spectrum of ``H`` for i.i.d. data (text after Eq. 27).

    Returns ``(sigma_x^2 (1 - sqrt(N/P))^2, sigma_x^2 (1 + sqrt(N/P))^2)`` for
    ``P, N -> infinity`` at fixed ``N/P``; for ``N > P`` the lower edge refers to the
    nonzero part of the spectrum. The paper writes the lower edge as
    ``sigma_x^2 (sqrt(P/N) - 1)^2``, which is too large by the factor ``P/N``
    (checked numerically in the tests).
    """
    if N < 1 or P < 1:
        raise ValueError(f"N and P must be >= 1, got N={N!r}, P={P!r}")
    q = np.sqrt(N / P)
    return float(sigma_x2 * (1.0 - q) ** 2), float(sigma_x2 * (1.0 + q) ** 2)
