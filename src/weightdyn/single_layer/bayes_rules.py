"""Tuning rules for SGD as a sampler (paper 000, App. B): learning rates and preconditioners.

* :func:`continuous_optimal_lr`: the learning rate that minimises the continuous-time KL to
  a target for a fixed preconditioner. For the posterior and ``Lam = 1`` it is Mandt, Hoffman
  & Blei (2017), Thm. 1, ``eps* = 2 (S / n) D / tr(B B^T)``, written in this project's
  convention (``2 N T_post / tr(C)`` with ``C`` the exact App. C noise covariance: ``V / S``
  with replacement, as Mandt et al. assume; ``(P - S) / (S (P - 1)) V`` without). For the
  sandwich target and ``Lam = J^-1`` it is the continuous-time rule ``lr = 2 B / n``.
* :func:`mandt_preconditioner` (Mandt et al., Thm. 2: ``Lam ~ C^-1``), its diagonal
  :func:`mandt_diagonal_preconditioner`, the Hessian's :func:`hessian_inverse_preconditioner`
  and :func:`jacobi_preconditioner` (``diag(K)^-1``).
* :func:`wang_preconditioner`: the discrete-time quadratic rule reported by Wang, Ding &
  Huggins (ICML 2026), ``Lam = (1/n)(V J^-1 + J^-1 V)(C + V/n)^-1`` with ``lr = 1``.
* :func:`exact_optimal_lr` and :func:`exact_optimal_diagonal`: the learning rate (and diagonal
  step matrix) that minimise the *exact* discrete KL (:func:`~weightdyn.single_layer.bayes.
  stationary_covariance`) to the target.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
from numpy.typing import ArrayLike

from weightdyn.single_layer.bayes import (
    FloatArray,
    Problem,
    Variant,
    _from_symmetric,
    _on_symmetric,
    _sym_index,
    continuous_covariance,
    gaussian_kl,
    max_stable_lr,
    stationary_covariance,
)

__all__ = [
    "continuous_optimal_lr",
    "exact_kl",
    "exact_optimal_diagonal",
    "exact_optimal_lr",
    "hessian_inverse_preconditioner",
    "jacobi_preconditioner",
    "mandt_diagonal_preconditioner",
    "mandt_preconditioner",
    "wang_preconditioner",
]


def hessian_inverse_preconditioner(problem: Problem) -> FloatArray:
    """``K^-1``: the inverse Hessian of the regularised loss (Li et al. 2015)."""
    return np.linalg.inv(problem.K)


def jacobi_preconditioner(problem: Problem) -> FloatArray:
    """``diag(K)^-1``: the inverse of the Hessian's diagonal (the ``diagonal`` value)."""
    return np.diag(1.0 / np.diag(problem.K))


def mandt_preconditioner(problem: Problem) -> FloatArray:
    """``C^-1`` (Mandt et al. 2017, Thm. 2): with :func:`continuous_optimal_lr` for the
    posterior, ``lr Lam = 2 T_post C^-1`` and the continuous-time law is the posterior."""
    return np.linalg.inv(problem.C)


def mandt_diagonal_preconditioner(problem: Problem) -> FloatArray:
    """``diag(C)^-1``: the diagonal version of Mandt et al.'s Thm. 2."""
    return np.diag(1.0 / np.diag(problem.C))


def wang_preconditioner(problem: Problem) -> FloatArray:
    """``(1/n)(V J^-1 + J^-1 V)(C + V/n)^-1`` with ``J = K``, ``n = P`` and ``C`` the
    mini-batch noise (``V / B`` with replacement), used with ``lr = 1``. In general not
    symmetric. It makes the discrete recursion without the ``H_B`` fluctuation term hit the
    sandwich target; for ``V = s^2 J`` it is ``2B / (n + B) J^-1`` (docs/bayes_sampler.md)."""
    Jinv = np.linalg.inv(problem.K)
    left = (problem.V @ Jinv + Jinv @ problem.V) / problem.P
    return left @ np.linalg.inv(problem.C + problem.V / problem.P)


def continuous_optimal_lr(
    problem: Problem, target: ArrayLike, Lam: ArrayLike | None = None
) -> float:
    """The ``lr`` minimising the continuous-time KL to ``target`` for the preconditioner ``Lam``
    (no injected noise): ``M = lr M_1`` (:func:`~weightdyn.single_layer.bayes.
    continuous_covariance` at ``lr = 1``), so ``KL = (lr tr(Sigma^-1 M_1) - N log lr) / 2 +
    const`` is least at ``lr = N / tr(Sigma^-1 M_1)``. Mandt et al.'s Thm. 1 for the posterior
    (module docstring)."""
    M1 = continuous_covariance(problem, Variant(1.0, Lam))
    return float(problem.N / np.trace(np.linalg.solve(np.asarray(target, float), M1)))


def exact_kl(problem: Problem, variant: Variant, target: ArrayLike) -> float:
    """KL of the exact discrete stationary law to ``target`` (inf beyond the stability limit)."""
    try:
        M = stationary_covariance(problem, variant)
    except ValueError:
        return float("inf")
    return gaussian_kl(M, target)


def exact_optimal_lr(
    problem: Problem, target: ArrayLike, Lam: ArrayLike | None = None, T: float = 0.0
) -> float:
    """The ``lr`` minimising the exact discrete KL to ``target`` (bounded Brent search on
    ``log(lr / lr_max)`` in ``[log 1e-4, log(1 - 1e-6)]``, ``lr_max`` = :func:`~weightdyn.
    single_layer.bayes.max_stable_lr`)."""
    lr_max = max_stable_lr(problem, Lam)
    res = scipy.optimize.minimize_scalar(
        lambda x: exact_kl(problem, Variant(lr_max * np.exp(x), Lam, T), target),
        bounds=(np.log(1e-4), np.log1p(-1e-6)),
        method="bounded",
        options={"xatol": 1e-7},
    )
    return float(lr_max * np.exp(res.x))


def diagonal_kl_and_gradient(
    problem: Problem, g: FloatArray, target: FloatArray, T: float
) -> tuple[float, FloatArray]:
    """Exact KL and its gradient in the diagonal step matrix ``G = diag(g)`` (adjoint method,
    docs/bayes_sampler.md Sec. 5); ``(inf, 0)`` beyond the stability limit."""
    N = problem.N
    G = np.diag(g)
    try:
        M = stationary_covariance(problem, Variant(1.0, G, T))
        Minv = np.linalg.inv(M)
        kl = gaussian_kl(M, target)
    except (ValueError, np.linalg.LinAlgError):
        return float("inf"), np.zeros(N)
    if not np.isfinite(kl):
        return float("inf"), np.zeros(N)
    a, b, w = _sym_index(N)
    dK = (0.5 * (np.linalg.inv(target) - Minv)).ravel()
    A = _on_symmetric(problem.second_moment_map(G))
    W = _from_symmetric(np.linalg.solve((np.eye(a.size) - A).T, (dK[a] + dK[b]) * w), N)
    EKMK = (problem.batch_kron @ M.ravel()).reshape(N, N)
    Phi = problem.K @ M - EKMK * g[None, :]
    grad = 2.0 * np.sum(W * (problem.C * g[None, :] - Phi), axis=1) + 2.0 * T * np.diag(W)
    return kl, grad


def exact_optimal_diagonal(problem: Problem, target: ArrayLike, T: float = 0.0) -> FloatArray:
    """The diagonal step matrix ``G = lr Lam`` minimising the exact discrete KL to ``target``
    (L-BFGS-B on ``log g`` with the adjoint gradient of :func:`diagonal_kl_and_gradient`),
    started from the exact optimal ``lr`` of the Jacobi preconditioner. Returns ``diag(G)``."""
    target = np.asarray(target, dtype=float)
    Lam0 = jacobi_preconditioner(problem)
    g0 = exact_optimal_lr(problem, target, Lam0, T) * np.diag(Lam0)

    def fun(x: FloatArray) -> tuple[float, FloatArray]:
        kl, grad = diagonal_kl_and_gradient(problem, np.exp(x), target, T)
        if not np.isfinite(kl):
            return 1e30, np.ones_like(x)
        return kl, grad * np.exp(x)

    res = scipy.optimize.minimize(fun, np.log(g0), jac=True, method="L-BFGS-B")
    return np.exp(res.x)
