"""Model-independent linear SGD theory: the algebra every model's theory module shares.

Paper 000: near a minimum the SGD dynamics (Eq. 11) is the Ornstein-Uhlenbeck process of
Eq. 13 with a drift (the Hessian ``H``, or ``Gamma`` of Eq. 63) and the mini-batch noise
covariance ``C`` (Eq. 14) with the App. C prefactor (Eq. 83). Whatever the model, its
stationary covariance solves the Lyapunov equation ``H M + M H = lr C`` (Eq. 29, Eq. 65 for a
non-symmetric drift), ``M = (lr/2) H^-1 (C + Q)`` (Eqs. 30-31) or ``(lr/2) H^+ C`` under
detailed balance (Eq. 33), on the range of the drift. This module holds that algebra, the
rank cuts it needs (round-off floors and the residual-scaled cut of non-isolated minima), the
discrete-time second-moment recursion and its fixed point, and the App. C prefactor.

Layering: :mod:`weightdyn.single_layer.theory`, :mod:`weightdyn.two_layer.theory` and
:mod:`weightdyn.models.theory` import from here and never from each other
(``tests/test_theory_layering.py``); the old names stay importable from their old modules.
Shapes: ``H``, ``C``, ``M`` are ``n x n``; in the eigenframe of ``H`` a matrix ``A`` reads
``At = V^T A V``. Pure numpy/scipy, no file I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral
from typing import Literal

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray
from scipy.sparse.linalg import LinearOperator, eigsh

__all__ = [
    "RESIDUAL_CUT_FACTOR",
    "RangeCovariances",
    "RangeInfo",
    "Sampling",
    "check_learning_rate",
    "check_lr_below",
    "check_positive",
    "check_square",
    "circulation",
    "detailed_balance_covariance",
    "eigh_sym",
    "embed",
    "extreme_eigenvalue",
    "hessian_range",
    "lyapunov_covariance",
    "lyapunov_on_range",
    "minibatch_fixed_point",
    "noise_prefactor",
    "pcg",
    "pinv_power",
    "range_circulation",
    "range_covariances",
    "range_detailed_balance_covariance",
    "range_discrete_covariance",
    "range_stationary_covariance",
    "range_threshold",
    "rank_cut",
    "reduce_to_range",
    "residual_atol",
    "stationary_covariance",
    "svd_rtol",
    "zero_mode_spread",
]

Sampling = Literal["with", "without"]
_SAMPLING_VALUES = ("with", "without")

FloatArray = NDArray[np.float64]


# ------------------------------------------------------------------- input checks


def check_square(A: ArrayLike, name: str) -> FloatArray:
    """``A`` as a float array; ``ValueError`` unless it is a square matrix."""
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {A.shape}")
    return A


def check_positive(value: float, name: str) -> float:
    """``value`` as a float; ``ValueError`` unless it is finite and positive."""
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return value


# ------------------------------------------------------- App. C noise prefactor


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


# ---------------------------------------------------------------------- rank cuts


def range_threshold(omega: FloatArray, rtol: float | None) -> float:
    """Eigenvalue cut ``rtol * max|omega|`` of a symmetric drift, ``rtol`` defaulting to
    ``n eps`` (``n = omega.size``, at least 1): the range of ``H`` in Eqs. 30-33."""
    if rtol is None:
        rtol = max(omega.size, 1) * float(np.finfo(float).eps)
    scale = float(np.max(np.abs(omega))) if omega.size else 0.0
    return rtol * scale


def svd_rtol(shape: tuple[int, ...]) -> float:
    """Round-off floor of a rank cut: ``10 max(shape) eps`` (relative to the largest value)."""
    return max(shape) * float(np.finfo(float).eps) * 10


def rank_cut(s: FloatArray, shape: tuple[int, ...], rtol: float | None, atol: float) -> float:
    """Rank cut ``max(rtol * s_max, atol)`` for the singular values ``s`` (descending);
    ``rtol`` defaults to :func:`svd_rtol`."""
    if rtol is None:
        rtol = svd_rtol(shape)
    return max(rtol * (float(s[0]) if s.size else 0.0), float(atol))


#: Safety factor of the residual-scaled rank cuts: the cut is this factor times the spread of
#: the zero modes (the Weyl bound ``||E||_2`` of
#: :func:`weightdyn.two_layer.theory.residual_norm` in
#: :func:`weightdyn.two_layer.theory.exact_stationary_covariance`, the most negative eigenvalue
#: of a symmetric drift in :func:`residual_atol`). Zero modes lie in ``[-||E||, ||E||]``, so a
#: cut at twice the bound removes them all and keeps every mode whose Gauss-Newton curvature
#: exceeds three times the bound.
RESIDUAL_CUT_FACTOR = 2.0


def zero_mode_spread(Gamma: ArrayLike) -> float:
    """Spread of the zero modes of a drift evaluated near (not at) a minimum: ``-lambda_min``.

    A symmetric drift (a Hessian) is positive semi-definite at a minimum; near one its zero
    modes move off zero by up to ``||E||_2`` (the residual curvature,
    :func:`weightdyn.two_layer.theory.residual_norm`) on both sides, so the most negative
    eigenvalue measures the spread (at gradient-flow minima the largest positive spurious
    eigenvalue is within a few per cent of it). Returns 0 for a positive semi-definite
    ``Gamma`` and for one that is not symmetric to round-off (a non-normal stable drift can
    have an indefinite symmetric part, which says nothing).
    """
    Gamma = check_square(Gamma, "Gamma")
    scale = float(np.max(np.abs(Gamma))) if Gamma.size else 0.0
    if scale == 0.0 or np.max(np.abs(Gamma - Gamma.T)) > svd_rtol(Gamma.shape) * scale:
        return 0.0
    return max(0.0, -float(np.linalg.eigvalsh(0.5 * (Gamma + Gamma.T))[0]))


def residual_atol(Gamma: FloatArray, atol: float | None) -> float:
    """``atol``, or by default ``RESIDUAL_CUT_FACTOR`` times :func:`zero_mode_spread`."""
    return RESIDUAL_CUT_FACTOR * zero_mode_spread(Gamma) if atol is None else float(atol)


@dataclass(frozen=True)
class RangeInfo:
    """Numerical range of a symmetric ``H``: orthonormal eigenvectors ``Q`` (``n x rank``) with
    eigenvalues ``omega`` above ``cut``; ``null_dim = n - rank`` (Hessian zero modes)."""

    Q: FloatArray
    omega: FloatArray
    cut: float
    rank: int
    null_dim: int


def hessian_range(H: ArrayLike, rtol: float | None = None, atol: float | None = None) -> RangeInfo:
    """Range of ``H`` and null-space dimension (rank cut ``max(rtol max|omega|, atol)``).

    Defaults: ``rtol = 10 n eps``; ``atol = RESIDUAL_CUT_FACTOR * zero_mode_spread(H)`` (the
    most negative eigenvalue marks how far the zero modes moved off 0 near a minimum).
    """
    H = np.asarray(H, dtype=float)
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"H must be a square matrix, got shape {H.shape}")
    n = H.shape[0]
    omega, V = np.linalg.eigh(0.5 * (H + H.T))
    rtol = 10 * n * float(np.finfo(float).eps) if rtol is None else float(rtol)
    atol = RESIDUAL_CUT_FACTOR * zero_mode_spread(H) if atol is None else float(atol)
    cut = max(rtol * float(np.max(np.abs(omega), initial=0.0)), atol)
    keep = omega > cut
    return RangeInfo(V[:, keep], omega[keep], cut, int(keep.sum()), n - int(keep.sum()))


# ------------------------------------- symmetric drift in its eigenframe (Eqs. 29-33)


def eigh_sym(H: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Eigen-decomposition of the symmetrised matrix, eigenvalues ascending."""
    omega, V = np.linalg.eigh(0.5 * (H + H.T))
    return omega, V


def _pair_ratio(
    numer: FloatArray, denom: FloatArray, threshold: float
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """numer / denom where denom > threshold, else 0 (no warnings)."""
    keep = denom > threshold
    out = np.zeros_like(numer)
    np.divide(numer, denom, out=out, where=keep)
    return out, keep


def pinv_power(H: FloatArray, power: float, rtol: float | None) -> FloatArray:
    """(H^+)^power for symmetric PSD H, restricted to the range of H (:func:`range_threshold`)."""
    omega, V = eigh_sym(H)
    thr = range_threshold(omega, rtol)
    keep = omega > thr
    d = np.zeros_like(omega)
    d[keep] = omega[keep] ** (-power)
    return (V * d) @ V.T


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
    H = check_square(H, "H")
    C = check_square(C, "C")
    omega, V = eigh_sym(H)
    Ct = V.T @ (0.5 * (C + C.T)) @ V
    denom = omega[:, None] + omega[None, :]
    Mt, _ = _pair_ratio(lr * Ct, denom, range_threshold(omega, rtol))
    M = V @ Mt @ V.T
    return 0.5 * (M + M.T)


def circulation(H: ArrayLike, C: ArrayLike, *, rtol: float | None = None) -> FloatArray:
    """Antisymmetric circulation matrix ``Q`` of Eq. 31 (broken detailed balance).

    ``Q = V Qt V^T`` with ``Qt_ij = (omega_i - omega_j) / (omega_i + omega_j) * Ct_ij``,
    ``Ct = V^T C V``. Pairs with ``omega_i + omega_j`` below ``rtol * max|omega|`` are set
    to 0 (see :func:`stationary_covariance`). ``Q = 0`` iff ``C`` commutes with ``H``.
    """
    H = check_square(H, "H")
    C = check_square(C, "C")
    omega, V = eigh_sym(H)
    Ct = V.T @ (0.5 * (C + C.T)) @ V
    denom = omega[:, None] + omega[None, :]
    numer = (omega[:, None] - omega[None, :]) * Ct
    Qt, _ = _pair_ratio(numer, denom, range_threshold(omega, rtol))
    return V @ Qt @ V.T  # antisymmetric by construction (not enforced; tested)


def detailed_balance_covariance(
    H: ArrayLike, C: ArrayLike, lr: float, *, rtol: float | None = None
) -> FloatArray:
    """Weight covariance under the detailed-balance assumption ``M = (lr/2) H^+ C`` (Eq. 33).

    Not symmetric in general (only if ``C`` commutes with ``H``); coincides with Eq. 30
    when ``Q = 0``, e.g. for ``C`` proportional to ``H`` (Eq. 20 -> Eq. 34). ``H^+`` is
    the pseudo-inverse restricted to eigenvalues above ``rtol * max|omega|``.
    """
    H = check_square(H, "H")
    C = check_square(C, "C")
    return 0.5 * lr * pinv_power(H, 1.0, rtol) @ C


# ---------------------------------- on range(H) with a residual-scaled cut (Eqs. 29-33)


def check_learning_rate(H: ArrayLike, lr: float) -> float:
    """Require ``0 < lr < 2 / max eig(H)``: beyond it the local quadratic model (Eq. 11 with
    ``grad L = H (w - w*)``, Eq. 13) is unstable and no stationary state exists."""
    w_max = float(np.linalg.eigvalsh(0.5 * (np.asarray(H) + np.asarray(H).T))[-1])
    return check_lr_below(w_max, lr)


def check_lr_below(w_max: float, lr: float) -> float:
    """:func:`check_learning_rate` given the largest eigenvalue ``w_max`` of ``H``."""
    lr = float(lr)
    limit = 2.0 / w_max if w_max > 0 else np.inf
    if not np.isfinite(lr) or lr <= 0 or lr >= limit:
        raise ValueError(
            f"lr must satisfy 0 < lr < 2 / max eig(H) = {limit:.6g} (stability of the local "
            f"quadratic model, lr * max eig(H) < 2), got lr = {lr!r}"
        )
    return lr


def reduce_to_range(
    H: ArrayLike, C: ArrayLike, rtol: float | None, atol: float | None
) -> tuple[RangeInfo, FloatArray, FloatArray]:
    """:func:`hessian_range` of ``H`` and the reduced ``(Q^T H Q, Q^T C Q)``."""
    info = hessian_range(H, rtol, atol)
    C = np.asarray(C, dtype=float)
    if C.shape != (info.Q.shape[0],) * 2:
        raise ValueError(f"C must have the shape of H {(info.Q.shape[0],) * 2}, got {C.shape}")
    return info, np.diag(info.omega), info.Q.T @ (0.5 * (C + C.T)) @ info.Q


def embed(info: RangeInfo, Mr: FloatArray) -> FloatArray:
    """``Q M_r Q^T``: a matrix on the range of ``H`` back in the full space (0 on the null)."""
    return info.Q @ Mr @ info.Q.T


def _frame_lyapunov(w: FloatArray, Ct: FloatArray, lr: float) -> FloatArray:
    """Eqs. 29-30 in the eigenframe of ``H = diag(w)``: ``lr Ct_ij / (w_i + w_j)``."""
    M = lr * Ct / (w[:, None] + w[None, :])
    return 0.5 * (M + M.T)


def _frame_circulation(w: FloatArray, Ct: FloatArray) -> FloatArray:
    """Eq. 31 in the eigenframe: ``(w_i - w_j) / (w_i + w_j) Ct_ij`` (antisymmetric)."""
    return (w[:, None] - w[None, :]) * Ct / (w[:, None] + w[None, :])


def _frame_detailed(w: FloatArray, Ct: FloatArray, lr: float) -> FloatArray:
    """Eq. 33 in the eigenframe: ``(lr / 2) diag(1 / w) Ct`` (not symmetric)."""
    return (0.5 * lr / w)[:, None] * Ct


def _frame_discrete(w: FloatArray, Ct: FloatArray, lr: float) -> FloatArray:
    """The discrete recursion's fixed point in the eigenframe:
    ``lr Ct_ij / (w_i + w_j - lr w_i w_j)``."""
    M = lr * Ct / (w[:, None] + w[None, :] - lr * np.outer(w, w))
    return 0.5 * (M + M.T)


def range_stationary_covariance(
    H: ArrayLike, C: ArrayLike, lr: float, rtol: float | None = None, atol: float | None = None
) -> FloatArray:
    """Stationary covariance on ``range(H)`` (Eqs. 29-31), zero on the null space.

    Solves ``H M + M H = lr C`` (Eq. 29) for ``M = Q M_r Q^T``: in the eigenframe of
    :func:`hessian_range` (``Q``, ``omega``) ``M_r,ij = lr Ct_ij / (omega_i + omega_j)`` with
    ``Ct = Q^T C Q`` (as :func:`stationary_covariance`); equals ``(lr/2) H^+ (C + Q_31)``
    (Eq. 30). Requires ``lr * max eig(H) < 2`` (:func:`check_learning_rate`).
    """
    check_learning_rate(H, lr)
    info, _, Cr = reduce_to_range(H, C, rtol, atol)
    return embed(info, _frame_lyapunov(info.omega, Cr, lr))


def range_circulation(
    H: ArrayLike, C: ArrayLike, rtol: float | None = None, atol: float | None = None
) -> FloatArray:
    """Antisymmetric ``Q`` of Eq. 31 on ``range(H)`` (:func:`circulation`); 0 iff detailed
    balance holds."""
    info, _, Cr = reduce_to_range(H, C, rtol, atol)
    return embed(info, _frame_circulation(info.omega, Cr))


def range_detailed_balance_covariance(
    H: ArrayLike, C: ArrayLike, lr: float, rtol: float | None = None, atol: float | None = None
) -> FloatArray:
    """Detailed-balance covariance ``M = (lr/2) H^+ C`` (Eq. 33) restricted to ``range(H)``
    (``C`` projected onto the range first); not symmetric unless ``[H, C] = 0``."""
    check_learning_rate(H, lr)
    info, _, Cr = reduce_to_range(H, C, rtol, atol)
    return embed(info, _frame_detailed(info.omega, Cr, lr))


# ------------------------------------------- discrete-time second-moment recursion


def range_discrete_covariance(
    H: ArrayLike, C: ArrayLike, lr: float, rtol: float | None = None, atol: float | None = None
) -> FloatArray:
    """Stationary covariance of discrete-time SGD on the local quadratic model (beyond paper 000).

    Fixed point of ``M = (1 - lr H) M (1 - lr H) + lr^2 C`` on ``range(H)``: in the
    eigenbasis ``Mt_ij = lr Ct_ij / (omega_i + omega_j - lr omega_i omega_j)``; Eq. 30 is the
    ``lr -> 0`` limit. **Exact only for a quadratic loss with additive noise** (gradient
    ``H (w - w*) + xi``, ``xi`` of covariance ``C`` independent of ``w``): it drops the
    curvature beyond second order and the mini-batch fluctuation of the Hessian
    (:func:`minibatch_fixed_point` keeps the latter; docs/discrete_covariance.md). Requires
    ``lr * max eig(H) < 2``.
    """
    check_learning_rate(H, lr)
    info, _, Cr = reduce_to_range(H, C, rtol, atol)
    return embed(info, _frame_discrete(info.omega, Cr, lr))


@dataclass(frozen=True)
class RangeCovariances:
    """The theories of :func:`range_covariances`, each ``n x n`` and zero off ``range(H)``."""

    M: FloatArray
    M_detailed: FloatArray
    circulation: FloatArray
    M_discrete: FloatArray


def range_covariances(info: RangeInfo, C: ArrayLike, lr: float) -> RangeCovariances:
    """Eqs. 30, 31, 33 and the discrete recursion on ``range(H)`` from one eigendecomposition.

    ``info`` is :func:`hessian_range` of ``H``. The values of
    :func:`range_stationary_covariance`, :func:`range_circulation`,
    :func:`range_detailed_balance_covariance` and :func:`range_discrete_covariance`, which
    each decompose ``H`` again (at ``n = 6310`` one ``eigh`` takes about a minute). Requires
    ``lr * max eig(H) < 2``.
    """
    w = info.omega
    check_lr_below(float(w.max()) if w.size else 0.0, lr)
    C = np.asarray(C, dtype=float)
    if C.shape != (info.Q.shape[0],) * 2:
        raise ValueError(f"C must have the shape of H {(info.Q.shape[0],) * 2}, got {C.shape}")
    Ct = info.Q.T @ (0.5 * (C + C.T)) @ info.Q
    return RangeCovariances(
        embed(info, _frame_lyapunov(w, Ct, lr)),
        embed(info, _frame_detailed(w, Ct, lr)),
        embed(info, _frame_circulation(w, Ct)),
        embed(info, _frame_discrete(w, Ct, lr)),
    )


def minibatch_fixed_point(
    omega: FloatArray, Cr: FloatArray, hq: FloatArray, c: float, lr: float, tol: float,
    max_iter: int,
) -> FloatArray:  # fmt: skip
    """Fixed point of the mini-batch second-moment recursion in the eigenframe of ``H``::

        M = (1 - lr H) M (1 - lr H) + lr^2 c [(1/P) sum_mu h^mu M h^mu - H M H] + lr^2 C,

    ``H = diag(omega)`` on its range, ``hq`` the per-sample Hessians ``(P, r, r)`` in that
    frame, ``c`` the App. C prefactor (Eq. 83, :func:`noise_prefactor`), ``Cr`` the noise of
    Eq. 14 in the frame. Iterates ``M <- L0^-1 (lr C + lr c K(M))`` with
    ``L0(M) = H M + M H - lr H M H`` (diagonal here) from the additive-noise solution
    (:func:`range_discrete_covariance`) until the relative change is at most ``tol``;
    ``ValueError`` after ``max_iter`` steps (beyond the second-moment stability limit).
    """
    w = omega
    pair = w[:, None] + w[None, :] - lr * np.outer(w, w)
    M = lr * Cr / pair
    for _ in range(max_iter):
        K = (hq @ M @ hq).mean(axis=0) - np.outer(w, w) * M
        M_new = lr * (Cr + c * K) / pair
        change = np.linalg.norm(M_new - M) / np.linalg.norm(M_new)
        M = 0.5 * (M_new + M_new.T)
        if change <= tol:
            return M
    raise ValueError(
        f"the mini-batch second-moment recursion did not converge in {max_iter} steps "
        f"(last relative change {change:.2e}): lr = {lr} is near or beyond its stability limit"
    )


def pcg(
    apply: Callable[[FloatArray], FloatArray],
    precond: Callable[[FloatArray], FloatArray],
    b: FloatArray,
    tol: float,
    max_iter: int,
) -> tuple[FloatArray, int]:
    """Preconditioned conjugate gradients for ``apply(x) = b`` (Frobenius inner product): the
    solver of the discrete stationarity condition ``H M + M H - lr E_B[H_B M H_B] = lr C``."""
    x = np.zeros_like(b)
    r = b.copy()
    b_norm = float(np.linalg.norm(b))
    z = precond(r)
    p = z.copy()
    rz = float(np.vdot(r, z))
    for it in range(1, max_iter + 1):
        Ap = apply(p)
        alpha = rz / float(np.vdot(p, Ap))
        x += alpha * p
        r -= alpha * Ap
        if np.linalg.norm(r) <= tol * b_norm:
            return x, it
        z = precond(r)
        rz_new = float(np.vdot(r, z))
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, max_iter


def extreme_eigenvalue(
    apply: Callable[[FloatArray], FloatArray], r: int, which: Literal["LA", "SA"]
) -> float:
    """Extreme eigenvalue of a Frobenius-self-adjoint map of ``r x r`` matrices (Lanczos): the
    stability of the second-moment recursion."""
    if r == 1:
        return float(apply(np.ones((1, 1)))[0, 0])
    op = LinearOperator(
        (r * r, r * r),
        matvec=lambda v: apply(np.reshape(v, (r, r))).ravel(),
        dtype=float,
    )
    v0 = np.eye(r).ravel()
    return float(eigsh(op, k=1, which=which, v0=v0, tol=1e-12, return_eigenvectors=False)[0])


# ------------------------------------------ general drift: Lyapunov on its range (Eq. 65)


def lyapunov_on_range(Q: FloatArray, Gamma: FloatArray, Delta: FloatArray, lr: float,
                      cut: float) -> FloatArray:  # fmt: skip
    """``Q M_r Q^T`` with ``Gamma_r M_r + M_r Gamma_r^T = lr Delta_r`` (``X_r = Q^T X Q``)."""
    Gr = Q.T @ Gamma @ Q
    ev = np.linalg.eigvals(Gr).real
    if np.any(ev <= 0):
        raise ValueError(
            "Gamma must be positive (stable) on its range: the kept block has an eigenvalue "
            f"with real part {ev.min():.3e} (cut {cut:.3e}); near, not at, a minimum raise the "
            "cut with atol (e.g. RESIDUAL_CUT_FACTOR * residual_norm at the point)"
        )
    Dr = Q.T @ Delta @ Q
    Mr = scipy.linalg.solve_continuous_lyapunov(Gr, lr * 0.5 * (Dr + Dr.T))
    return Q @ (0.5 * (Mr + Mr.T)) @ Q.T


def lyapunov_covariance(
    Gamma: ArrayLike,
    Delta: ArrayLike,
    lr: float,
    rtol: float | None = None,
    *,
    atol: float | None = None,
) -> FloatArray:
    """General stationary covariance: ``Gamma M + M Gamma^T = lr Delta`` on range(Gamma).

    With ``Q`` an orthonormal basis of the range of ``Gamma`` (singular values above
    ``max(rtol * s_max, atol)``; defaults: the round-off floor :func:`svd_rtol` and twice
    :func:`zero_mode_spread`), ``M = Q M_r Q^T`` where ``M_r`` solves the Lyapunov equation
    (Eq. 65) with ``Gamma_r = Q^T Gamma Q`` and ``Delta_r = Q^T Delta Q``. Modes in the null
    space of ``Gamma`` have no restoring drift (they keep their initial values, Eq. 78); any
    diffusion along them is discarded. Requires ``Gamma_r`` stable (eigenvalues with positive
    real part), which holds at a minimum and, with the default cut, near one; otherwise
    ``ValueError``. :func:`weightdyn.two_layer.theory.exact_stationary_covariance` cuts at the
    rigorous residual bound instead.
    """
    Gamma = check_square(Gamma, "Gamma")
    Delta = check_square(Delta, "Delta")
    if Delta.shape != Gamma.shape:
        raise ValueError(f"Delta must have the shape of Gamma {Gamma.shape}, got {Delta.shape}")
    lr = check_positive(lr, "lr")
    U, s, _ = np.linalg.svd(Gamma)
    cut = rank_cut(s, Gamma.shape, rtol, residual_atol(Gamma, atol))
    return lyapunov_on_range(U[:, s > cut], Gamma, Delta, lr, cut)
