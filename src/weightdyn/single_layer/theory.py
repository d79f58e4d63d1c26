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

The model-independent algebra lives in :mod:`weightdyn.linear_theory` and is re-exported
here under its old names: :func:`noise_prefactor` (App. C), :func:`stationary_covariance`,
:func:`circulation` and :func:`detailed_balance_covariance` (Eqs. 29-33), and ``Sampling``.

Paper typos found while implementing (see ``tests/test_single_layer_theory.py``):

* Eq. 15: the subtracted term must be ``(H wbar - J)(H wbar - J)^T`` (it is
  ``grad L grad L^T``, Eq. 14), not ``H wbar wbar^T H``; the two agree only when
  ``J = 0`` (``P -> infinity``). Eq. 17 is correct (it follows from Eq. 14 at ``w*``).
* Text after Eq. 27: the Marchenko-Pastur lower edge is
  ``sigma_x^2 (1 - sqrt(N/P))^2``, not ``sigma_x^2 (sqrt(P/N) - 1)^2``.
* Text after Eq. 35: the common eigenvalue of Eq. 34 is ``lambda sigma^2 / (2 S)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from weightdyn.linear_theory import (
    Sampling,
    check_square,
    circulation,
    detailed_balance_covariance,
    eigh_sym,
    extreme_eigenvalue,
    noise_prefactor,
    pcg,
    pinv_power,
    range_threshold,
    stationary_covariance,
)

__all__ = [
    "DiscreteCovariance",
    "averaged_noise_covariance",
    "circulation",
    "detailed_balance_covariance",
    "detailed_balance_eigenvalues",
    "discrete_stationary_covariance",
    "hessian",
    "hessian_noise_covariance",
    "isotropic_covariance",
    "loss",
    "marchenko_pastur_edges",
    "max_stable_lr_second_moment",
    "min_norm_solution",
    "minibatch_hessian_moment",
    "noise_covariance",
    "noise_prefactor",
    "optimal_loss",
    "relaxation_rates",
    "sample_weights_K",
    "second_moment_stability",
    "second_moment_step",
    "slowest_relaxation_steps",
    "sorted_eigenvalues",
    "spatial_weight_variance",
    "stationary_covariance",
]

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


def averaged_noise_covariance(
    X: ArrayLike, y: ArrayLike, batch_size: int, sampling: Sampling, M: ArrayLike
) -> FloatArray:
    """Noise covariance of Eq. 14 (Eq. 15 corrected, docs/errata.md) averaged over the weights
    ``w = w* + dw`` with ``<dw> = 0`` and ``<dw dw^T> = M`` (e.g. the Lyapunov M of Eq. 30)::

        <C(w)> = C(w*) + c(P, S) [ (1/P) sum_mu (x^mu . M x^mu) x^mu x^mu^T - H M H ],

    since ``<r_mu^2> = r*_mu^2 + x^mu . M x^mu`` and ``<G G^T> = H M H``. The bracket is the
    multiplicative correction to Eq. 17: the noise SGD feels in its stationary state.
    """
    X, y = _check_xy(X, y)
    P, N = X.shape
    M = check_square(M, "M")
    if M.shape != (N, N):
        raise ValueError(f"M must have shape ({N}, {N}), got {M.shape}")
    H = hessian(X)
    q = np.einsum("mi,ij,mj->m", X, M, X)
    extra = X.T @ (q[:, None] * X) / P - H @ M @ H
    pref = noise_prefactor(P, batch_size, sampling)
    C = noise_covariance(X, y, batch_size, sampling) + pref * extra
    return 0.5 * (C + C.T)


def spatial_weight_variance(w: ArrayLike, M: ArrayLike | None = None) -> float:
    """Variance across the weights ``(1/N) sum_i (w_i - mean_j w_j)^2`` (Fig. 4a,
    ``<delta w_i(t)^2>_i``); with ``M`` its expectation for weights of mean ``w`` and covariance
    ``M``: ``(1/N) [w^T Pi w + tr(Pi M)]``, ``Pi = 1 - 1 1^T / N`` (for ``w = w*``, ``M`` of
    Eq. 30: the stationary spatial variance, which peaks at ``P = N`` with ``|w*|``)."""
    w = np.asarray(w, dtype=float)
    N = w.size
    centred = w - w.mean()
    value = centred @ centred
    if M is not None:
        M = check_square(M, "M")
        value += np.trace(M) - M.sum() / N
    return float(value / N)


def hessian_noise_covariance(H: ArrayLike, sigma_eps2: float, batch_size: int) -> FloatArray:
    """Large-sample (``P -> infinity``) noise covariance ``C = sigma_eps^2 / S * H`` (Eq. 20)."""
    H = check_square(H, "H")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    return sigma_eps2 / batch_size * H


# ------------------------------------------------------------------- stationary state


def detailed_balance_eigenvalues(
    H: ArrayLike, C: ArrayLike, lr: float, *, rtol: float | None = None
) -> FloatArray:
    """Eigenvalues of the detailed-balance covariance of Eq. 33, sorted descending.

    ``(lr/2) H^+ C`` is similar (same characteristic polynomial, ``AB`` vs ``BA``) to the
    symmetric matrix ``(lr/2) H^{+1/2} C H^{+1/2}``, whose eigenvalues are real and are
    computed with ``eigvalsh``.
    """
    H = check_square(H, "H")
    C = check_square(C, "C")
    Hm = pinv_power(H, 0.5, rtol)
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
    A = check_square(A, "A")
    return np.linalg.eigvalsh(0.5 * (A + A.T))[::-1].copy()


def relaxation_rates(H: ArrayLike) -> FloatArray:
    """Relaxation rates ``omega_k`` = eigenvalues of ``H``, ascending (Eqs. 25-27).

    Mode ``z_k = V^T w`` relaxes as ``exp(-omega_k t)`` in SDE time ``t = lr * tau``.
    """
    H = check_square(H, "H")
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
    thr = range_threshold(omega, rtol)
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


# ------------------------------------------------ exact discrete-time second moment


@dataclass(frozen=True)
class DiscreteCovariance:
    """Solution of the exact discrete-time stationarity condition (beyond Eq. 30).

    ``M`` is the ``(N, N)`` stationary second moment of ``w - w*``; ``iterations`` the number
    of preconditioned conjugate-gradient steps; ``residual`` the relative residual
    ``||M - E_B[(1 - lr H_B) M (1 - lr H_B)] - lr^2 C||_F / ||lr^2 C||_F`` of the recursion,
    evaluated afresh from ``M`` (0 if ``C = 0``).
    """

    M: FloatArray
    iterations: int
    residual: float


class _RangeFrame:
    """Eigenframe of ``H`` restricted to its range, with the mini-batch statistics of ``H_B``.

    Matrices in this frame are ``Mt = V_r^T M V_r`` (``r x r``). The operators are

    * ``lyap(Mt) = H M + M H`` (the Lyapunov operator of Eq. 29), diagonal in this frame;
    * ``batch(Mt) = E_B[H_B M H_B] = c D(M) + (1 - c) H M H`` with
      ``D(M) = (1/P) sum_mu x_mu (x_mu^T M x_mu) x_mu^T`` and ``c`` the App. C prefactor
      (Eq. 83), exact for both sampling modes, costing ``O(P r^2)``.

    Both are self-adjoint for the Frobenius inner product; ``lyap`` is positive definite.
    """

    def __init__(
        self, X: FloatArray, batch_size: int, sampling: Sampling, rtol: float | None
    ) -> None:
        P = X.shape[0]
        self.c = noise_prefactor(P, batch_size, sampling)
        omega, V = eigh_sym(hessian(X))
        keep = omega > range_threshold(omega, rtol)
        self.omega = omega[keep]
        self.V = V[:, keep]
        self.Xt = X @ self.V
        self.P = P
        self.pair_sum = self.omega[:, None] + self.omega[None, :]

    def to_frame(self, M: FloatArray) -> FloatArray:
        return self.V.T @ M @ self.V

    def from_frame(self, Mt: FloatArray) -> FloatArray:
        M = self.V @ Mt @ self.V.T
        return 0.5 * (M + M.T)

    def lyap(self, Mt: FloatArray) -> FloatArray:
        return self.pair_sum * Mt

    def batch(self, Mt: FloatArray) -> FloatArray:
        q = np.einsum("pi,pi->p", self.Xt @ Mt, self.Xt)
        D = self.Xt.T @ (q[:, None] * self.Xt) / self.P
        HMH = self.omega[:, None] * Mt * self.omega[None, :]
        return self.c * D + (1.0 - self.c) * HMH

    def stability_operator(self, Mt: FloatArray, lr: float) -> FloatArray:
        """``(M - E_B[(1 - lr H_B) M (1 - lr H_B)]) / lr = H M + M H - lr E_B[H_B M H_B]``."""
        return self.lyap(Mt) - lr * self.batch(Mt)


def minibatch_hessian_moment(
    X: ArrayLike, M: ArrayLike, batch_size: int, sampling: Sampling = "with"
) -> FloatArray:
    """Exact mini-batch average ``E_B[H_B M H_B]`` with ``H_B = (1/S) sum_{mu in B} x_mu x_mu^T``.

    Both sampling modes of App. C reduce to (``c`` = :func:`noise_prefactor`, Eq. 83)::

        E_B[H_B M H_B] = c D(M) + (1 - c) H M H,
        D(M) = (1/P) sum_mu x_mu (x_mu^T M x_mu) x_mu^T,

    i.e. ``c = 1/S`` with replacement and ``c = (P - S) / (S (P - 1))`` without (the pair
    ``mu != nu`` of a batch without replacement is uniform over ordered distinct pairs). Cost
    ``O(P N^2)``; ``M`` need not be symmetric.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (P, N), got shape {X.shape}")
    M = check_square(M, "M")
    if M.shape[0] != X.shape[1]:
        raise ValueError(f"M must have shape ({X.shape[1]}, {X.shape[1]}), got {M.shape}")
    P = X.shape[0]
    c = noise_prefactor(P, batch_size, sampling)
    H = hessian(X)
    q = np.einsum("pi,pi->p", X @ M, X)
    return c * (X.T @ (q[:, None] * X) / P) + (1.0 - c) * H @ M @ H


def second_moment_step(
    X: ArrayLike, M: ArrayLike, lr: float, batch_size: int, sampling: Sampling = "with"
) -> FloatArray:
    """One step of the exact second-moment map ``M -> E_B[(1 - lr H_B) M (1 - lr H_B)^T]``.

    This is the homogeneous part of the discrete SGD recursion (Eq. 11 with the mini-batch
    Hessian ``H_B`` of Eq. 10); it equals ``M - lr (H M + M H) + lr^2 E_B[H_B M H_B]``
    (:func:`minibatch_hessian_moment`).
    """
    M = check_square(M, "M")
    H = hessian(X)
    return M - lr * (H @ M + M @ H) + lr**2 * minibatch_hessian_moment(X, M, batch_size, sampling)


def discrete_stationary_covariance(
    X: ArrayLike,
    y: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: Sampling = "with",
    *,
    tol: float = 1e-13,
    max_iter: int = 5000,
    rtol: float | None = None,
) -> DiscreteCovariance:
    """Exact stationary second moment ``M = E[(w - w*)(w - w*)^T]`` of discrete-time SGD.

    With ``d = w - w*``, one SGD step (Eqs. 10-11) is exactly
    ``d' = (1 - lr H_B) d - lr g_B`` with ``g_B = grad L_B(w*)`` (``E_B g_B = 0``). The batch
    is independent of ``d``; the mean obeys ``m' = (1 - lr H) m`` and vanishes at
    stationarity, which removes the cross term ``lr^2 E_B[H_B m g_B^T] + h.c.`` (non-zero
    for ``m != 0``). Hence, without an additive-noise approximation::

        M = E_B[(1 - lr H_B) M (1 - lr H_B)] + lr^2 C,   C = Eqs. 17-18 (App. C prefactor),

    equivalently ``H M + M H - lr E_B[H_B M H_B] = lr C``: the Lyapunov equation (Eq. 29)
    plus the discrete-time term ``-lr E_B[H_B M H_B]`` (:func:`minibatch_hessian_moment`).
    Eq. 30 is its ``lr -> 0`` limit.

    The left-hand operator is self-adjoint and, below :func:`max_stable_lr_second_moment`,
    positive definite, so it is solved by conjugate gradients preconditioned with the
    inverse Lyapunov operator (diagonal in the eigenbasis of ``H``), without forming the
    ``N^2 x N^2`` matrix; each step costs ``O(P N^2)``. The condition number is at most
    ``1 / (1 - lr / lr_max)``. ``M`` is restricted to the range of ``H`` (as in
    :func:`stationary_covariance`); ``tol`` bounds the relative residual of the solve.

    Raises
    ------
    ValueError
        if ``lr <= 0``, if the solve does not reach ``tol`` in ``max_iter`` steps, or if the
        fixed point is not positive semi-definite: beyond the second-moment stability limit
        the linear equation may still have a solution, but (``T`` being a positive map, by
        the Krein-Rutman theorem) no PSD one when ``C`` is positive definite on the range.
    """
    X, y = _check_xy(X, y)
    if lr <= 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    frame = _RangeFrame(X, batch_size, sampling, rtol)
    C = noise_covariance(X, y, batch_size, sampling)
    rhs = lr * frame.to_frame(C)
    N = X.shape[1]
    if not np.any(rhs):
        return DiscreteCovariance(M=np.zeros((N, N)), iterations=0, residual=0.0)
    Mt, iterations = pcg(
        lambda A: frame.stability_operator(A, lr),
        lambda A: A / frame.pair_sum,
        rhs,
        tol,
        max_iter,
    )
    M = frame.from_frame(Mt)
    resid = M - second_moment_step(X, M, lr, batch_size, sampling) - lr**2 * C
    residual = float(np.linalg.norm(resid) / np.linalg.norm(lr**2 * C))
    if iterations == max_iter and residual > tol:
        raise ValueError(
            f"conjugate gradients did not converge in {max_iter} steps (relative residual "
            f"{residual:.2e}); is lr = {lr} beyond the second-moment stability limit?"
        )
    eig = np.linalg.eigvalsh(M)
    if eig[0] < -np.sqrt(tol) * eig[-1]:
        raise ValueError(
            f"the fixed point is not positive semi-definite (eigenvalue {eig[0]:.3e}): "
            f"lr = {lr} is beyond the second-moment stability limit "
            "(max_stable_lr_second_moment), where no stationary state exists"
        )
    return DiscreteCovariance(M=M, iterations=iterations, residual=residual)


def second_moment_stability(
    X: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: Sampling = "with",
    *,
    rtol: float | None = None,
) -> float:
    """Spectral radius of the second-moment map ``M -> E_B[(1 - lr H_B) M (1 - lr H_B)^T]``.

    The map (:func:`second_moment_step`) is self-adjoint for the Frobenius inner product and
    positive (it maps PSD to PSD matrices), so its spectral radius is its largest eigenvalue
    ``1 - lr theta_min`` with ``theta_min`` the smallest eigenvalue of
    ``M -> H M + M H - lr E_B[H_B M H_B]``, found by Lanczos iteration in the eigenframe of
    ``H``. Restricted to the range of ``H`` (null directions of an over-parameterised ``H``
    never move and contribute the eigenvalue 1). The SGD second moment about ``w*`` converges
    iff the radius is below 1. Beyond paper 000 (its continuum analogue is Eqs. 21-24).
    """
    X = np.asarray(X, dtype=float)
    frame = _RangeFrame(X, batch_size, sampling, rtol)
    theta = extreme_eigenvalue(lambda A: frame.stability_operator(A, lr), frame.omega.size, "SA")
    return 1.0 - lr * theta


def max_stable_lr_second_moment(
    X: ArrayLike, batch_size: int, sampling: Sampling = "with", *, rtol: float | None = None
) -> float:
    """Largest learning rate with a bounded SGD second moment: ``1 / mu_max``.

    The map ``1 - E_B[(1 - lr H_B) . (1 - lr H_B)] = lr (L - lr F)`` with the Lyapunov
    operator ``L(M) = H M + M H`` (Eq. 29) and ``F(M) = E_B[H_B M H_B]``; both are
    self-adjoint and ``L`` is positive definite, so the radius of
    :func:`second_moment_stability` reaches 1 exactly at ``lr = 1 / mu_max``, ``mu_max`` the
    largest eigenvalue of ``L^{-1/2} F L^{-1/2}`` (Lanczos in the eigenframe of ``H``, no root
    search). Without mini-batch noise (``c = 0``) this is ``2 / omega_max``; with noise it is
    smaller (roughly ``2 S / tr H`` for ``S << P``). The one-dimensional case is the
    condition ``lr (a^2 + c Var x^2) < 2 a`` of docs/errata.md (Eqs. 21-24).
    """
    X = np.asarray(X, dtype=float)
    frame = _RangeFrame(X, batch_size, sampling, rtol)
    scale = 1.0 / np.sqrt(frame.pair_sum)
    mu = extreme_eigenvalue(lambda A: scale * frame.batch(scale * A), frame.omega.size, "LA")
    return 1.0 / mu
