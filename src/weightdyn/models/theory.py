"""Linearised SGD theory of any :class:`~weightdyn.models.base.Model` at a minimum.

Paper 000: near a minimum ``theta*`` the SGD dynamics (Eq. 11) becomes the Ornstein-Uhlenbeck
process of Eq. 13 with drift ``H`` (the Hessian) and noise covariance ``C`` (Eq. 14, App. C);
its stationary covariance solves the Lyapunov equation (Eq. 29), ``M = (lr/2) H^-1 (C + Q)``
(Eqs. 30-31), or ``M = (lr/2) H^-1 C`` under detailed balance (Eq. 33). Appendix A
(Eqs. 79-81) maps a nonlinear network onto linear regression in the Jacobian features:
drift ``J^T J / P`` (residual curvature dropped).

Objective: everything here uses the model's own loss and weight decay
(:mod:`weightdyn.models.base`, ``L = mean l^mu + chi |theta|^2 / 2``): ``H`` is the Hessian of
that ``L``, ``C`` the covariance of the per-sample gradients of ``l^mu + chi |theta|^2 / 2``
(the decay is the same in every batch and drops out of ``C``), App. A's drift the Gauss-Newton
matrix ``(1/P) sum_mu J_mu^T Lambda_mu J_mu + chi 1`` (``Lambda = d^2 l / df^2``; ``J^T J / P``
for squared error). For squared error without decay (the papers') every result is computed by
the same expressions as before other objectives existed. The model-independent algebra (Lyapunov
solves on the range of ``H``, rank cuts, the discrete recursion, the App. C prefactor) lives in
:mod:`weightdyn.linear_theory`; ``RangeInfo``, ``hessian_range``, ``check_learning_rate``,
``stationary_covariance``, ``circulation``, ``detailed_balance_covariance`` and
``discrete_stationary_covariance`` are re-exported here from it.

Non-isolated minima (deep linear networks: ``GL(N_l)`` symmetry between layers) have a
Hessian null space. All covariances live on ``range(H)``: eigenvalues up to
``max(rtol * max|omega|, atol)`` count as zero, ``rtol`` defaulting to ``10 n eps`` and ``atol``
to :data:`~weightdyn.linear_theory.RESIDUAL_CUT_FACTOR` times the zero-mode spread
``-min(omega, 0)`` (:func:`~weightdyn.linear_theory.zero_mode_spread`): at an optimiser's end
point the zero modes spread to about the residual size on both sides of 0. Zero outside the
range.

Paper typo (checked in ``tests/test_models.py``): Eq. 81 writes the linearised loss as
``(1/2P) ||w^T J - Y||^2 + const``. With ``J in R^{P x N}`` this is ``||J w - Y||^2``, but the
bias ``b(x)`` of Eq. 79 does not drop out as a constant: the cross term ``2 (J w)^T b``
depends on ``w``. The correct form is ``(1/2P) ||J w - (Y - b)||^2`` (labels ``Y - b``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.optimize
from numpy.typing import ArrayLike

from weightdyn.linear_theory import (
    RangeInfo,
    Sampling,
    check_learning_rate,
    embed,
    hessian_range,
    minibatch_fixed_point,
    noise_prefactor,
    range_covariances,
    reduce_to_range,
)
from weightdyn.linear_theory import range_circulation as circulation
from weightdyn.linear_theory import (
    range_detailed_balance_covariance as detailed_balance_covariance,
)
from weightdyn.linear_theory import range_discrete_covariance as discrete_stationary_covariance
from weightdyn.linear_theory import range_stationary_covariance as stationary_covariance
from weightdyn.models.base import FloatArray, Model
from weightdyn.models.losses import SQUARED

__all__ = [
    "Linearisation",
    "LocalTheory",
    "MinimumResult",
    "RangeInfo",
    "check_learning_rate",
    "check_minimum",
    "check_underparameterised",
    "circulation",
    "detailed_balance_covariance",
    "discrete_stationary_covariance",
    "find_minimum",
    "hessian_range",
    "jacobian_linearisation",
    "local_theory",
    "minibatch_stationary_covariance",
    "newton_minimum",
    "noise_covariance",
    "sample_hessians",
    "smoothing_shift",
    "stationary_covariance",
]


# --------------------------------------------------------------------- checks


def check_minimum(
    model: Model, X: ArrayLike, Y: ArrayLike, theta: ArrayLike, gtol: float = 1e-8
) -> float:
    """Gradient norm ``|grad L(theta)|``; ``ValueError`` if above ``gtol`` (not a minimum)."""
    g = float(np.linalg.norm(model.gradient(X, Y, theta)))
    if not g <= gtol:
        raise ValueError(
            f"theta is not a minimum: |grad L(theta)| = {g:.3e} must be <= gtol = {gtol:.3e} "
            "(run find_minimum first, or raise gtol)"
        )
    return g


def _loss_features(model: Model, X: FloatArray, theta: ArrayLike) -> FloatArray:
    """The Jacobian (Eq. 80); for a shift-invariant loss (cross-entropy) with each sample's
    rows centred over the outputs, as the loss does not see the common logit."""
    J = model.jacobian(X, theta)
    if not model.loss_function.shift_invariant:
        return J
    J3 = J.reshape(X.shape[0], model.n_out, model.n_params)
    return (J3 - J3.mean(axis=1, keepdims=True)).reshape(J.shape)


def check_underparameterised(model: Model, X: ArrayLike, theta: ArrayLike | None = None) -> int:
    """Effective parameter count; ``ValueError`` unless it is below the number of fitted values,
    ``P * N_o`` (``P * (N_o - 1)`` for a shift-invariant loss such as cross-entropy, which
    sees only ``N_o - 1`` combinations of the logits).

    Without ``theta`` the count is ``n_params``; with ``theta`` it is the rank of ``J(theta)``
    (rows centred over the outputs for a shift-invariant loss), the number of independent
    features of Eq. 80 (smaller for redundant parametrisations such as
    :class:`~weightdyn.models.DeepLinear`). If it reaches the number of values the model
    interpolates locally, the residuals and the noise vanish at the minimum (Eq. 16; for
    cross-entropy the minimum runs off to infinity) and there are no stationary fluctuations.
    With weight decay ``chi > 0`` nothing is checked (the count is returned): the minimum then
    does not interpolate (``grad L = 0`` needs ``J^T R / P = -chi theta``) and the noise stays.
    """
    X = np.asarray(X, dtype=float)
    n_values = X.shape[0] * (model.n_out - int(model.loss_function.shift_invariant))
    if theta is None:
        n_eff, what = model.n_params, "n_params"
    else:
        centred = " centred over the outputs" if model.loss_function.shift_invariant else ""
        n_eff = int(np.linalg.matrix_rank(_loss_features(model, X, theta)))
        what = f"rank of J(theta){centred}"
    if n_eff >= n_values and model.weight_decay == 0.0:
        count = "P * (N_o - 1)" if model.loss_function.shift_invariant else "P * N_o"
        raise ValueError(
            f"model is not underparameterised: {what} = {n_eff} must be < {count} = "
            f"{n_values} (X has P = {X.shape[0]} samples); otherwise the fit interpolates and "
            "the stationary fluctuations vanish (Eq. 16)"
        )
    return n_eff


# -------------------------------------------------------------------- minimum


@dataclass(frozen=True)
class MinimumResult:
    """Outcome of :func:`find_minimum`: the point, its ``|grad L|`` and loss, the L-BFGS plus
    trust-region iterations, the accepted Newton steps, wall time, ``grad_norm <= gtol``."""

    theta: FloatArray
    grad_norm: float
    loss: float
    iterations: int
    newton_steps: int
    seconds: float
    converged: bool


def _newton_step(
    model: Model, X: FloatArray, Y: FloatArray, theta: FloatArray, g: FloatArray,
    fixed: RangeInfo | None = None,
) -> FloatArray:  # fmt: skip
    """Saddle-free Newton direction ``-|H|^+ g`` with the analytic Hessian; eigenvalues with
    ``|omega|`` up to ``1e-13 max|omega|`` (flat symmetry directions) are dropped. ``fixed``:
    a decomposition of the Hessian at a nearby point used instead (a chord step, no Hessian)."""
    if fixed is not None:
        return -fixed.Q @ ((fixed.Q.T @ g) / np.abs(fixed.omega))
    omega, V = np.linalg.eigh(model.hessian(X, Y, theta))
    keep = np.abs(omega) > 1e-13 * np.max(np.abs(omega))
    return -V[:, keep] @ ((V[:, keep].T @ g) / np.abs(omega[keep]))


def _newton(
    model: Model, X: FloatArray, Y: FloatArray, theta: FloatArray, gtol: float, max_steps: int,
    fixed: RangeInfo | None = None,
) -> tuple[FloatArray, FloatArray, int]:  # fmt: skip
    """Newton iterations with halving until ``|grad L|`` decreases; stops when it stalls."""
    g = model.gradient(X, Y, theta)
    steps = 0
    for _ in range(max_steps):
        if np.linalg.norm(g) <= 0.1 * gtol:
            break
        d = _newton_step(model, X, Y, theta, g, fixed)
        for t in 0.5 ** np.arange(12):
            g_new = model.gradient(X, Y, theta + t * d)
            if np.linalg.norm(g_new) < np.linalg.norm(g):
                theta, g, steps = theta + t * d, g_new, steps + 1
                break
        else:
            break
    return theta, g, steps


def find_minimum(
    model: Model,
    X: ArrayLike,
    Y: ArrayLike,
    theta0: ArrayLike,
    gtol: float = 1e-10,
    *,
    lbfgs_gtol: float = 1e-7,
    max_iter: int = 20000,
    max_trust: int = 500,
    max_newton: int = 30,
    strict: bool = True,
) -> MinimumResult:
    """Full-batch minimum of ``L`` (Eqs. 3, 36, 81; the model's loss and weight decay) to a
    gradient norm near round-off.

    L-BFGS (scipy, analytic gradient) down to ``max|grad| <= lbfgs_gtol``; if ``|grad L|`` is
    still above ``gtol``, scipy's ``trust-exact`` with the analytic Hessian (robust where the
    Hessian is ill-conditioned or indefinite); finally saddle-free Newton steps on the range
    of the Hessian (flat symmetry directions of non-isolated minima are left alone), each
    accepted only if it lowers ``|grad L|``. Every stage uses the true gradient and Hessian of
    ``L`` (no Gauss-Newton or Levenberg-Marquardt step on residuals), so it holds for any loss
    and decay; cross-entropy on data the model separates has no finite minimum without decay.
    ``strict``: raise ``RuntimeError`` if the final ``|grad L|`` exceeds ``gtol``; otherwise
    return with ``converged=False``.
    """
    start = time.perf_counter()
    X, theta, Y = model.check_inputs(X, theta0, Y)

    def fun(t: FloatArray) -> tuple[float, FloatArray]:
        return model.loss(X, Y, t), model.gradient(X, Y, t)

    opt = scipy.optimize.minimize(
        fun, theta, jac=True, method="L-BFGS-B",
        options={"gtol": lbfgs_gtol, "ftol": 0.0, "maxiter": max_iter, "maxcor": 30},
    )  # fmt: skip
    theta, nit = np.asarray(opt.x, dtype=float), int(opt.nit)
    if np.linalg.norm(model.gradient(X, Y, theta)) > gtol:
        opt = scipy.optimize.minimize(
            fun, theta, jac=True, hess=lambda t: model.hessian(X, Y, t), method="trust-exact",
            options={"gtol": 0.1 * gtol, "maxiter": max_trust},
        )  # fmt: skip
        theta, nit = np.asarray(opt.x, dtype=float), nit + int(opt.nit)
    theta, g, steps = _newton(model, X, Y, theta, gtol, max_newton)
    gn = float(np.linalg.norm(g))
    res = MinimumResult(theta, gn, model.loss(X, Y, theta), nit, steps,
                        time.perf_counter() - start, gn <= gtol)  # fmt: skip
    if strict and not res.converged:
        raise RuntimeError(
            f"find_minimum: |grad L| = {gn:.3e} after {res.iterations} L-BFGS/trust-region "
            f"iterations and {steps} Newton steps is above gtol = {gtol:.3e}"
        )
    return res


def newton_minimum(
    model: Model, X: ArrayLike, Y: ArrayLike, theta0: ArrayLike, gtol: float = 1e-10,
    max_steps: int = 50, *, fixed_hessian: RangeInfo | None = None,
) -> MinimumResult:  # fmt: skip
    """The minimum of the basin ``theta0`` lies in, by saddle-free Newton steps only (each
    accepted if it lowers ``|grad L|``; flat directions left alone): unlike
    :func:`find_minimum` it cannot wander to a distant minimum (a relabelled copy of the same
    network or saturated units), so it gives the point a cloud of SGD replicas sits at.
    ``fixed_hessian``: :func:`hessian_range` of the Hessian at a nearby minimum, used for every
    step (the chord method: linear, not quadratic, convergence, but no Hessian and no
    ``eigh`` per step, which at ``n = 6310`` cost about 75 s each)."""
    start = time.perf_counter()
    X, theta, Y = model.check_inputs(X, theta0, Y)
    theta, g, steps = _newton(model, X, Y, theta, gtol, max_steps, fixed_hessian)
    gn = float(np.linalg.norm(g))
    return MinimumResult(theta, gn, model.loss(X, Y, theta), 0, steps,
                         time.perf_counter() - start, gn <= gtol)  # fmt: skip


# ---------------------------------------------------------------------- noise


def noise_covariance(
    model: Model,
    X: ArrayLike,
    Y: ArrayLike,
    theta: ArrayLike,
    batch_size: int,
    sampling: Sampling = "with",
) -> FloatArray:
    """Exact mini-batch gradient covariance at ``theta`` (Eq. 14, App. C Eq. 83)::

        C = c(P, S) [ (1/P) sum_mu g^mu g^mu^T - G G^T ],   G = grad L = (1/P) sum_mu g^mu,

    ``g^mu`` from :meth:`Model.per_sample_gradients` (the gradients of the model's own
    per-sample loss plus ``chi theta``, which is the same for every sample and cancels), ``c``
    from :func:`weightdyn.linear_theory.noise_prefactor` (``1/S`` with replacement,
    ``(P - S) / (S (P - 1))`` without). Valid at any ``theta``.
    """
    G = model.per_sample_gradients(X, Y, theta)
    c = noise_prefactor(G.shape[0], batch_size, sampling)
    g = G.mean(axis=0)
    C = c * (G.T @ G / G.shape[0] - np.outer(g, g))
    return 0.5 * (C + C.T)


# ----------------------------------------------------------- stationary state


def sample_hessians(model: Model, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
    """Per-sample Hessians ``h^mu`` of ``l^mu + chi |theta|^2 / 2``, shape ``(P, n, n)``:
    ``J_mu^T Lambda_mu J_mu + sum_k r^mu_k d^2 f_k(x^mu) / d theta^2 + chi 1`` (``Lambda = 1``
    for squared error, ``r`` the residuals); their mean is the Hessian."""
    X, theta, Y = model.check_inputs(X, theta, Y)
    P, n = X.shape[0], model.n_params
    J = model.jacobian(X, theta).reshape(P, model.n_out, n)
    F = model.output(X, theta)
    R = model.loss_function.residual(F, Y)
    if model.loss_function.identity_curvature:
        h = np.einsum("pka,pkb->pab", J, J)
    else:
        LJ = np.einsum("pkl,plb->pkb", model.loss_function.curvature(F), J)
        h = np.einsum("pka,pkb->pab", J, LJ)
    for mu in range(P):
        Hr = model.output_hessian_contract(X[mu : mu + 1], theta, R[mu : mu + 1])
        h[mu] += 0.5 * (Hr + Hr.T)
    if model.weight_decay:
        h += model.weight_decay * np.eye(n)
    return h


def minibatch_stationary_covariance(
    model: Model,
    X: ArrayLike,
    Y: ArrayLike,
    theta: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: Sampling = "with",
    *,
    tol: float = 1e-10,
    max_iter: int = 500,
    rtol: float | None = None,
    atol: float | None = None,
) -> FloatArray:
    """Stationary covariance of discrete-time SGD when every per-sample loss is quadratic about
    ``theta`` (``l^mu = l^mu_* + g^mu d + d h^mu d / 2``), with the mini-batch Hessian noise.

    One step is ``d' = (1 - lr H_B) d - lr g_B`` with the batch independent of ``d``, so
    (as :func:`weightdyn.single_layer.theory.discrete_stationary_covariance`)::

        M = (1 - lr H) M (1 - lr H) + lr^2 c [(1/P) sum_mu h^mu M h^mu - H M H] + lr^2 C,

    ``c`` the App. C prefactor, ``C`` the noise of Eq. 14. Exact for linear models with
    squared error (it then is the single-layer formula); for a nonlinear network or a
    non-quadratic loss (cross-entropy) it keeps the curvature fluctuation across samples but
    drops third and higher derivatives of the loss. Solved on ``range(H)``
    by :func:`weightdyn.linear_theory.minibatch_fixed_point` (iterating
    ``M <- L0^-1 (lr C + lr c K(M))``, ``L0(M) = H M + M H - lr H M H``); ``ValueError`` if that
    does not converge to ``tol`` in ``max_iter`` steps (beyond the second-moment stability
    limit).
    """
    X, theta, Y = model.check_inputs(X, theta, Y)
    H = model.hessian(X, Y, theta)
    check_learning_rate(H, lr)
    C = noise_covariance(model, X, Y, theta, batch_size, sampling)
    info, _, Cr = reduce_to_range(H, C, rtol, atol)
    Q = info.Q  # Q^T h_p Q for every sample as two matrix products (an unoptimised three-
    hq = Q.T @ sample_hessians(model, X, Y, theta) @ Q  # operand einsum is a P n^4 loop)
    c = noise_prefactor(X.shape[0], batch_size, sampling)
    return embed(info, minibatch_fixed_point(info.omega, Cr, hq, c, lr, tol, max_iter))


def smoothing_shift(
    model: Model,
    X: ArrayLike,
    Y: ArrayLike,
    theta: ArrayLike,
    M: ArrayLike,
    *,
    step: float = 1e-3,
    rtol: float | None = None,
    atol: float | None = None,
    hessian_info: RangeInfo | None = None,
) -> FloatArray:
    """First-order stationary mean of SGD minus the minimum ``theta``::

        m = -(1/2) H^+ grad tr(H M),

    from ``E[grad L(theta + m + d)] = 0`` (exact for the stationary state of Eq. 11) with
    ``d`` of covariance ``M = O(lr)``: SGD sits where the loss smoothed by its own
    fluctuations, ``L + tr(H M) / 2``, is stationary. ``grad tr(H M) = sum_k mu_k
    d^2/ds^2 grad L(theta + s v_k)`` (``mu_k, v_k`` the eigenpairs of ``M``) by central
    differences of step ``step``; ``H^+`` on :func:`hessian_range`. The shift is large along
    soft modes (``1 / omega``), where this first order is only a guide to its direction.
    ``hessian_info``: :func:`hessian_range` of ``H`` at ``theta`` where already computed (then
    ``rtol`` and ``atol`` are not used)."""
    X, theta, Y = model.check_inputs(X, theta, Y)
    mu, V = np.linalg.eigh(0.5 * (np.asarray(M, dtype=float) + np.asarray(M, dtype=float).T))
    g0 = model.gradient(X, Y, theta)
    grad_trace = np.zeros_like(theta)
    for k in np.flatnonzero(mu > 0):
        d = step * V[:, k]
        plus, minus = model.gradient(X, Y, theta + d), model.gradient(X, Y, theta - d)
        grad_trace += mu[k] * (plus + minus - 2 * g0) / step**2
    info = hessian_info
    if info is None:
        info = hessian_range(model.hessian(X, Y, theta), rtol, atol)
    return -0.5 * info.Q @ ((info.Q.T @ grad_trace) / info.omega)


# ------------------------------------------------- App. A: Jacobian linearisation


@dataclass(frozen=True)
class Linearisation:
    """Linear model of App. A at ``theta*``: ``f(x) ~ b(x) + J_x theta`` (Eqs. 79-80).

    ``J`` is ``(P * N_o, n)`` (sample-major rows), ``bias`` ``b = f(X, theta*) - J theta*``
    (``(P, N_o)``). For squared error ``targets = Y - b``: the labels of the equivalent linear
    regression on the features ``J`` (Eq. 81, corrected; ridge regression with decay). For
    another loss ``targets = Y``: the equivalent model is the generalised linear model
    ``l(b + J theta, y)`` (cross-entropy: multinomial logistic regression with logit offsets
    ``b``). ``drift`` the Gauss-Newton matrix ``(1/P) sum_mu J_mu^T Lambda_mu J_mu + chi 1``
    (``J^T J / P`` for squared error without decay; residual curvature dropped); ``noise`` the
    covariance of Eq. 14 built from ``J`` and the residuals.
    """

    J: FloatArray
    bias: FloatArray
    targets: FloatArray
    drift: FloatArray
    noise: FloatArray


def jacobian_linearisation(
    model: Model,
    X: ArrayLike,
    Y: ArrayLike,
    theta: ArrayLike,
    batch_size: int,
    sampling: Sampling = "with",
) -> Linearisation:
    """App. A prediction: replace the design matrix by the Jacobian (Eqs. 79-81).

    The linearised per-sample gradients are ``g^mu = J_mu^T r^mu + chi theta`` with the
    residuals ``r^mu`` of the linearised outputs ``b^mu + J_mu theta`` (``... - y^mu`` for
    squared error; equal to the network's at ``theta``), so the noise (Eq. 14, App. C) is the
    network's; the drift is the Gauss-Newton matrix (:meth:`Model.gauss_newton`, ``J^T J / P``
    for squared error without decay), which equals the Hessian only where the residual
    curvature vanishes.
    """
    X, theta, Y = model.check_inputs(X, theta, Y)
    P, n = X.shape[0], model.n_params
    J = model.jacobian(X, theta)
    bias = model.output(X, theta) - (J @ theta).reshape(P, model.n_out)
    if not model.paper_objective:
        targets = Y - bias if model.loss_function == SQUARED else Y
        noise = noise_covariance(model, X, Y, theta, batch_size, sampling)
        return Linearisation(J, bias, targets, model.gauss_newton(X, theta), noise)
    R = bias + (J @ theta).reshape(P, model.n_out) - Y
    G = np.einsum("pk,pka->pa", R, J.reshape(P, model.n_out, n))
    c = noise_prefactor(P, batch_size, sampling)
    g = G.mean(axis=0)
    C = c * (G.T @ G / P - np.outer(g, g))
    return Linearisation(J, bias, Y - bias, J.T @ J / P, 0.5 * (C + C.T))


# -------------------------------------------------------------- entry point


@dataclass(frozen=True)
class LocalTheory:
    """Theory at a minimum: drift ``H``, noise ``C`` (Eq. 14), ``M`` (Eq. 30), ``M_detailed``
    (Eq. 33), ``Q`` (Eq. 31), ``M_discrete`` (discrete recursion), the rank and null-space
    dimension of ``H``, the gradient norm at ``theta`` and ``info``, the decomposition of ``H``
    they were computed from (:func:`hessian_range`)."""

    H: FloatArray
    C: FloatArray
    M: FloatArray
    M_detailed: FloatArray
    Q: FloatArray
    M_discrete: FloatArray
    rank: int
    null_dim: int
    grad_norm: float
    info: RangeInfo | None = None


def local_theory(
    model: Model,
    X: ArrayLike,
    Y: ArrayLike,
    theta: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: Sampling = "with",
    *,
    drift: Literal["hessian", "gauss_newton"] = "hessian",
    gtol: float = 1e-8,
    rtol: float | None = None,
    atol: float | None = None,
) -> LocalTheory:
    """Stationary SGD fluctuations about a minimum ``theta`` (Eqs. 14, 29-33).

    ``drift="hessian"`` uses the full Hessian, ``"gauss_newton"`` the App. A prediction
    (:func:`jacobian_linearisation`); both for the model's loss and weight decay. Raises
    ``ValueError`` if ``|grad L(theta)| > gtol`` (:func:`check_minimum`), if ``drift`` is
    unknown or if ``lr * max eig(H) >= 2``.
    """
    if drift not in ("hessian", "gauss_newton"):
        raise ValueError(f"drift must be 'hessian' or 'gauss_newton', got {drift!r}")
    gn = check_minimum(model, X, Y, theta, gtol)
    if drift == "hessian":
        H = model.hessian(X, Y, theta)
        C = noise_covariance(model, X, Y, theta, batch_size, sampling)
    else:
        lin = jacobian_linearisation(model, X, Y, theta, batch_size, sampling)
        H, C = lin.drift, lin.noise
    info = hessian_range(H, rtol, atol)
    cov = range_covariances(info, C, lr)
    return LocalTheory(H, C, cov.M, cov.M_detailed, cov.circulation, cov.M_discrete,
                       info.rank, info.null_dim, gn, info)  # fmt: skip
