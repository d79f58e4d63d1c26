"""SGD as a Bayesian sampler (paper 000, App. B): exact theory of its variants and targets.

The update (one step of the engine's :class:`weightdyn.sgd.Update` with its App. B fields)::

    w' = w - lr Lam (g_B(w) + chi w) + sqrt(2 lr T) Lam^{1/2} xi,     xi ~ N(0, 1_N),

with ``g_B`` the mini-batch gradient of Eq. 10, ``chi >= 0`` the weight decay (objective
``L_reg = L + chi |w|^2 / 2``: the project's convention, App. B writes ``chi |w|^2``),
``Lam`` a preconditioner (Li et al. 2015; Mandt, Hoffman & Blei 2017) and ``T >= 0`` the
temperature of injected Gaussian noise (Welling & Teh 2011, SGLD). Only the step matrix
``G = lr Lam`` enters the dynamics: the injected covariance is ``2 lr T Lam = 2 T G``.

Everything here is exact for the quadratic loss (docs/bayes_sampler.md):

* :func:`stationary_covariance` solves the exact discrete-time condition (the recursion (R)
  of docs/discrete_covariance.md extended to ``G``, ``chi`` and ``T``)::

      M = E_B[(1 - G K_B) M (1 - G K_B)^T] + G C G^T + 2 T G_s,

  ``K_B = H_B + chi 1``, ``C`` the App. C noise covariance at the regularised minimum
  (:func:`noise_covariance`), ``G_s`` the symmetric part of ``G``. It is a dense solve on
  ``vec(M)`` (``N^2`` unknowns; ``N <= MAX_N``).
* :func:`continuous_covariance`: the Lyapunov equation, Eq. 29 with ``Lam K``, ``Lam C Lam``
  and ``2 T Lam``: ``Lam K M + M K Lam = lr Lam C Lam + 2 T Lam``.
* :func:`max_stable_lr`: the second-moment stability limit of each variant.
* Targets: :func:`posterior_covariance` (App. B: Gaussian likelihood, prior from ``chi``) and
  :func:`sandwich_covariance` (``J^-1 V J^-1 / n``); distances :func:`gaussian_kl` and
  :func:`frobenius_error`.
* Tuning rules in :mod:`weightdyn.single_layer.bayes_rules`.

Conventions as in :mod:`weightdyn.single_layer.theory`: ``X`` has shape ``(P, N)`` (one row
per sample), ``H = X^T X / P`` (Eq. 4), ``L = |X w - y|^2 / (2P)`` (Eq. 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray
from scipy.sparse.linalg import eigs

from weightdyn.linear_theory import Sampling, noise_prefactor
from weightdyn.single_layer.theory import _check_xy, hessian

__all__ = [
    "MAX_N",
    "Problem",
    "Variant",
    "check_preconditioner",
    "continuous_covariance",
    "frobenius_error",
    "gaussian_kl",
    "max_stable_lr",
    "posterior_covariance",
    "sandwich_covariance",
    "stability_radius",
    "stationary_covariance",
]

FloatArray = NDArray[np.float64]

#: Largest input dimension of the dense ``N^2 x N^2`` solve (64: 4096 unknowns, 134 MB).
MAX_N = 64


def check_preconditioner(Lam: ArrayLike, N: int, *, symmetric: bool = True) -> FloatArray:
    """``Lam`` as a checked ``(N, N)`` float array; ValueError naming ``preconditioner``.

    ``symmetric``: it must be symmetric positive definite (needed for ``Lam^{1/2}`` of the
    injected noise and for the posterior to be reachable). Otherwise only a stable drift is
    asked for: every eigenvalue with a positive real part."""
    Lam = np.asarray(Lam, dtype=float)
    if Lam.shape != (N, N) or not np.all(np.isfinite(Lam)):
        raise ValueError(
            f"preconditioner must be a finite ({N}, {N}) matrix, got shape {Lam.shape}"
        )
    scale = float(np.abs(Lam).max()) or 1.0
    if symmetric:
        asym = float(np.abs(Lam - Lam.T).max()) / scale
        if asym > 1e-10:
            raise ValueError(
                f"preconditioner must be symmetric positive definite; it is not symmetric "
                f"(max |Lam - Lam^T| / max |Lam| = {asym:.2e})"
            )
        low = float(np.linalg.eigvalsh(0.5 * (Lam + Lam.T))[0])
        if low <= 0:
            raise ValueError(
                "preconditioner must be symmetric positive definite; its smallest eigenvalue "
                f"is {low:.3e}"
            )
        return 0.5 * (Lam + Lam.T)
    low = float(np.linalg.eigvals(Lam).real.min())
    if low <= 0:
        raise ValueError(
            "preconditioner must have eigenvalues with positive real parts (a stable drift); "
            f"the smallest real part is {low:.3e}"
        )
    return Lam


@dataclass(frozen=True)
class Variant:
    """One SGD variant of App. B: learning rate ``lr``, preconditioner ``Lam`` (None: the
    identity) and injected-noise temperature ``T``. ``G = lr Lam`` is its step matrix."""

    lr: float
    Lam: FloatArray | None = None
    T: float = 0.0

    def step_matrix(self, N: int) -> FloatArray:
        """``G = lr Lam`` (``lr 1`` without a preconditioner)."""
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got lr={self.lr!r}")
        if not (np.isfinite(self.T) and self.T >= 0):
            raise ValueError(f"temperature must be finite and >= 0, got {self.T!r}")
        if self.Lam is None:
            return self.lr * np.eye(N)
        return self.lr * check_preconditioner(self.Lam, N, symmetric=self.T > 0)


class Problem:
    """A regression data set with its batch statistics: the fixed part of every variant.

    ``K = H + chi 1`` is the Hessian of ``L_reg``, ``w_min`` its minimiser, ``grads`` the
    per-sample gradients ``g_mu = (x_mu . w_min - y_mu) x_mu + chi w_min`` at it (their mean
    is zero), ``V = (1/P) sum_mu g_mu g_mu^T`` their covariance and ``C = c V`` the mini-batch
    noise covariance (``c`` of App. C, Eq. 83; for ``chi = 0`` this is Eq. 17)."""

    def __init__(
        self,
        X: ArrayLike,
        y: ArrayLike,
        batch_size: int,
        sampling: Sampling = "with",
        chi: float = 0.0,
    ) -> None:
        self.X, self.y = _check_xy(X, y)
        self.P, self.N = self.X.shape
        if self.N > MAX_N:
            raise ValueError(f"the exact sampler theory is dense: N = {self.N} > MAX_N = {MAX_N}")
        if not (np.isfinite(chi) and chi >= 0):
            raise ValueError(f"weight_decay (chi) must be finite and >= 0, got {chi!r}")
        self.chi = float(chi)
        self.c = noise_prefactor(self.P, batch_size, sampling)
        self.H = hessian(self.X)
        self.K = self.H + self.chi * np.eye(self.N)
        self.w_min = np.linalg.lstsq(self.K, self.X.T @ self.y / self.P, rcond=None)[0]
        r = self.X @ self.w_min - self.y
        self.grads = r[:, None] * self.X + self.chi * self.w_min
        self.V = self.grads.T @ self.grads / self.P
        self.C = self.c * self.V

    @cached_property
    def batch_kron(self) -> FloatArray:
        """``E_B[K_B (x) K_B]`` (``N^2 x N^2``): ``c E_mu[k_mu (x) k_mu] + (1 - c) K (x) K``
        with the per-sample Hessians ``k_mu = x_mu x_mu^T + chi 1`` (exact for both sampling
        modes, docs/discrete_covariance.md Sec. 2)."""
        N, chi = self.N, self.chi
        Z = np.einsum("pi,pj->pij", self.X, self.X).reshape(self.P, N * N)
        eye = np.eye(N)
        per_sample = Z.T @ Z / self.P
        if chi:
            per_sample += chi * (np.kron(self.H, eye) + np.kron(eye, self.H))
            per_sample += chi**2 * np.eye(N * N)
        return self.c * per_sample + (1.0 - self.c) * np.kron(self.K, self.K)

    def second_moment_map(self, G: FloatArray) -> FloatArray:
        """The matrix of ``M -> E_B[(1 - G K_B) M (1 - G K_B)^T]`` on row-major ``vec(M)``."""
        N = self.N
        GK = G @ self.K
        eye = np.eye(N)
        GG_E = _congruence(G, self.batch_kron.reshape(N, N, N * N))
        return np.eye(N * N) - np.kron(GK, eye) - np.kron(eye, GK) + GG_E.reshape(N * N, -1)

    def injected(self, G: FloatArray, T: float) -> FloatArray:
        """Per-step covariance added to ``M``: ``G C G^T + 2 T G_s``."""
        return G @ self.C @ G.T + T * (G + G.T)


def _congruence(G: FloatArray, E: FloatArray) -> FloatArray:
    """``sum_ab G_ia G_jb E[a, b, k]`` for ``E`` of shape ``(N, N, m)`` (two BLAS products)."""
    T1 = np.tensordot(G, E, axes=(1, 0))  # (i, b, k)
    return np.tensordot(G, T1, axes=(1, 1)).transpose(1, 0, 2)  # (i, j, k)


def stationary_covariance(problem: Problem, variant: Variant) -> FloatArray:
    """Exact stationary covariance of ``w - w_min`` under the App. B update (module docstring).

    With ``d = w - w_min`` the step is exactly ``d' = (1 - G K_B) d - G g_B + noise`` with
    ``g_B`` the batch mean of the per-sample gradients at ``w_min`` (mean zero); the batch is
    independent of ``d`` and ``E d -> 0``, so the cross term vanishes at stationarity (as in
    docs/discrete_covariance.md, Sec. 1). Solved on the symmetric matrices (``N (N + 1) / 2``
    unknowns). ValueError beyond the stability limit (spectral radius of the second-moment map
    >= 1), where no stationary state exists."""
    G = variant.step_matrix(problem.N)
    A = _on_symmetric(problem.second_moment_map(G))
    a, b, w = _sym_index(problem.N)
    rhs = problem.injected(G, variant.T)
    x = np.linalg.solve(np.eye(a.size) - A, (rhs.ravel()[a] + rhs.ravel()[b]) * w)
    M = _from_symmetric(x, problem.N)
    if not _stationary(M, rhs, A):
        raise ValueError(
            f"lr = {variant.lr:.6g} is beyond the variant's second-moment stability limit "
            "(max_stable_lr): no stationary state"
        )
    return M


def _stationary(M: FloatArray, rhs: FloatArray, A: FloatArray) -> bool:
    """Whether ``M`` is the stationary state: for a positive map ``T`` and a positive definite
    ``rhs``, ``M - T(M) = rhs`` has a positive definite solution iff the spectral radius of
    ``T`` is below 1, so a PD ``M`` suffices; for a singular ``rhs`` the radius is computed."""
    e = np.linalg.eigvalsh(rhs)
    if not np.all(np.isfinite(M)):
        return False
    if e[0] > 1e-12 * e[-1]:
        return bool(np.linalg.eigvalsh(M)[0] > 0)
    return _spectral_radius(A) < 1.0


def _sym_index(N: int) -> tuple[NDArray[np.int64], NDArray[np.int64], FloatArray]:
    """The orthonormal basis of symmetric ``N x N`` matrices: element ``(i <= j)`` is
    ``w (E_ij + E_ji)`` with ``w = 1/sqrt(2)`` (``1/2`` on the diagonal); ``a``, ``b`` the
    row-major positions of ``(i, j)`` and ``(j, i)``."""
    i, j = np.triu_indices(N)
    w = np.where(i == j, 0.5, np.sqrt(0.5))
    return i * N + j, j * N + i, w


def _on_symmetric(A: FloatArray) -> FloatArray:
    """``U^T A U`` for a map ``A`` of row-major ``vec(M)`` that preserves symmetry."""
    a, b, w = _sym_index(round(np.sqrt(A.shape[0])))
    AU = (A[:, a] + A[:, b]) * w
    return (AU[a] + AU[b]) * w[:, None]


def _from_symmetric(x: FloatArray, N: int) -> FloatArray:
    a, b, w = _sym_index(N)
    M = np.zeros(N * N)
    np.add.at(M, a, w * x)
    np.add.at(M, b, w * x)
    return M.reshape(N, N)


def _spectral_radius(A: FloatArray) -> float:
    if A.shape[0] <= 600:
        return float(np.abs(np.linalg.eigvals(A)).max())
    return float(np.abs(eigs(A, k=1, which="LM", return_eigenvectors=False)).max())


def stability_radius(problem: Problem, variant: Variant) -> float:
    """Spectral radius of the second-moment map of the variant on symmetric matrices (``< 1``:
    stable)."""
    return _spectral_radius(
        _on_symmetric(problem.second_moment_map(variant.step_matrix(problem.N)))
    )


def max_stable_lr(problem: Problem, Lam: ArrayLike | None = None) -> float:
    """Largest ``lr`` with a bounded second moment for the preconditioner ``Lam``.

    Symmetric positive definite ``Lam`` (or None): in the frame ``u = Lam^{-1/2} d`` the map is
    self-adjoint and positive, and (as for plain SGD, :func:`~weightdyn.single_layer.theory.
    max_stable_lr_second_moment`) the limit is ``1 / mu_max`` with ``mu_max`` the largest
    eigenvalue of ``L^{-1/2} F L^{-1/2}`` on symmetric matrices, ``L = Kt (x) 1 + 1 (x) Kt``,
    ``F = E[Kt_B (x) Kt_B]``, ``Kt = Lam^{1/2} K Lam^{1/2}``. Otherwise see
    :func:`_nonsymmetric_limit`. The injected noise does not change the limit (it is additive)."""
    N = problem.N
    if Lam is not None:
        Lam = np.asarray(Lam, dtype=float)
        if not np.allclose(Lam, Lam.T, rtol=0, atol=1e-12 * np.abs(Lam).max()):
            return _nonsymmetric_limit(problem, check_preconditioner(Lam, N, symmetric=False))
    root = np.eye(N) if Lam is None else _sqrtm_spd(check_preconditioner(Lam, N))
    omega, Q = np.linalg.eigh(root @ problem.K @ root)
    B = root @ Q  # d = B u in the eigenframe of Kt
    F = _congruence(B.T, problem.batch_kron.reshape(N, N, N * N)).reshape(N * N, N * N)
    F = _congruence(B.T, F.T.reshape(N, N, N * N)).reshape(N * N, N * N).T
    scale = 1.0 / np.sqrt((omega[:, None] + omega[None, :]).ravel())
    S = _on_symmetric(scale[:, None] * F * scale[None, :])
    return float(1.0 / np.linalg.eigvalsh(0.5 * (S + S.T))[-1])


def _nonsymmetric_limit(problem: Problem, Lam: FloatArray) -> float:
    """Limit for a non-symmetric ``Lam``. The map ``T = 1 - lr L + lr^2 F`` (``L`` the drift
    part, ``F = (Lam (x) Lam) E[K_B (x) K_B]``) is positive (it maps PSD to PSD matrices), so
    its spectral radius is an eigenvalue with a PSD eigenvector (Krein-Rutman) and stability is
    lost where 1 enters the spectrum: ``L v = lr F v``. The limit is the smallest positive real
    generalised eigenvalue of ``(L, F)`` on symmetric matrices."""
    N = problem.N
    GK = Lam @ problem.K
    eye = np.eye(N)
    drift = _on_symmetric(np.kron(GK, eye) + np.kron(eye, GK))
    F = _on_symmetric(_congruence(Lam, problem.batch_kron.reshape(N, N, N * N)).reshape(N * N, -1))
    ev = scipy.linalg.eigvals(drift, F)
    real = ev[np.isfinite(ev) & (np.abs(ev.imag) <= 1e-9 * np.abs(ev)) & (ev.real > 0)].real
    return float(real.min())


def _sqrtm_spd(A: FloatArray) -> FloatArray:
    e, Q = np.linalg.eigh(A)
    return (Q * np.sqrt(e)) @ Q.T


def continuous_covariance(problem: Problem, variant: Variant) -> FloatArray:
    """Continuous-time (Lyapunov) covariance: Eq. 29 with the drift ``Lam K``, the noise
    ``Lam C Lam^T`` and the injected ``2 T Lam``::

        Lam K M + M K Lam^T = lr Lam C Lam^T + 2 T Lam_s,

    the ``lr -> 0`` limit of :func:`stationary_covariance` at fixed ``T``."""
    G = variant.step_matrix(problem.N)
    Lam = G / variant.lr
    rhs = variant.lr * Lam @ problem.C @ Lam.T + variant.T * (Lam + Lam.T)
    M = scipy.linalg.solve_continuous_lyapunov(Lam @ problem.K, rhs)
    return 0.5 * (M + M.T)


# ------------------------------------------------------------------------------ targets


def residual_variance(X: ArrayLike, y: ArrayLike, chi: float = 0.0) -> float:
    """Estimated label-noise variance ``|y - X w_min|^2 / (P - dof)``, ``dof = tr(H K^-1)``
    (the effective number of fitted parameters; ``N`` for ``chi = 0``)."""
    X, y = _check_xy(X, y)
    P, N = X.shape
    K = hessian(X) + chi * np.eye(N)
    w = np.linalg.lstsq(K, X.T @ y / P, rcond=None)[0]
    dof = float(np.trace(np.linalg.lstsq(K, hessian(X), rcond=None)[0]))
    if P - dof <= 0:
        raise ValueError(f"the noise variance cannot be estimated: P = {P} <= dof = {dof:.2f}")
    r = y - X @ w
    return float(r @ r / (P - dof))


def posterior_covariance(problem: Problem, noise_variance: float | None = None) -> FloatArray:
    """Posterior covariance of the linear model (App. B), ``(sigma^2 / P) K^-1``.

    Likelihood ``N(y_mu | w . x_mu, sigma^2)`` and the Gaussian prior of precision
    ``P chi / sigma^2`` give ``-log p(w | D) = (P / sigma^2) L_reg(w) + const``: the
    posterior is ``N(w_min, (sigma^2 / P) K^-1)``, with ``w_min`` SGD's own minimiser.
    ``noise_variance`` ``sigma^2``: the known label-noise variance, or None to estimate it
    (:func:`residual_variance`)."""
    s2 = (
        residual_variance(problem.X, problem.y, problem.chi)
        if noise_variance is None
        else float(noise_variance)
    )
    if not s2 > 0:
        raise ValueError(f"noise_variance must be positive, got {noise_variance!r}")
    return s2 / problem.P * np.linalg.inv(problem.K)


def sandwich_covariance(problem: Problem) -> FloatArray:
    """Sandwich covariance ``J^-1 V J^-1 / n`` (``J = K`` the Hessian of the average loss,
    ``V`` the covariance of the per-sample gradients at the minimiser, ``n = P``): the
    large-sample covariance of the M-estimator, robust to heteroskedastic noise."""
    Kinv = np.linalg.inv(problem.K)
    S = Kinv @ problem.V @ Kinv / problem.P
    return 0.5 * (S + S.T)


def gaussian_kl(M: ArrayLike, target: ArrayLike) -> float:
    """``KL(N(m, M) || N(m, Sigma))`` between Gaussians of the same mean (both laws centre on
    ``w_min``): ``(tr(Sigma^-1 M) - N + log det Sigma - log det M) / 2``; inf if ``M`` is not
    positive definite."""
    M = np.asarray(M, dtype=float)
    S = np.asarray(target, dtype=float)
    try:
        cm = np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        return float("inf")
    cs = np.linalg.cholesky(S)
    A = scipy.linalg.solve_triangular(cs, cm, lower=True)
    logdet = 2.0 * (np.log(np.diag(cs)).sum() - np.log(np.diag(cm)).sum())
    return float(0.5 * (np.sum(A * A) - M.shape[0] + logdet))


def frobenius_error(M: ArrayLike, target: ArrayLike) -> float:
    """Relative Frobenius error ``|M - Sigma|_F / |Sigma|_F``."""
    M = np.asarray(M, dtype=float)
    S = np.asarray(target, dtype=float)
    return float(np.linalg.norm(M - S) / np.linalg.norm(S))
