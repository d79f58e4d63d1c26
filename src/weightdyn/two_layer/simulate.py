"""Gradient flow, SGD and stochastic gradient flow of the two-layer linear network.

Paper 000, Section III. Network ``f(x) = W2 W1 x`` with ``W1`` (N_h, N_i), ``W2`` (N_o, N_h) and
product ``w = W2 W1`` (N_o, N_i); data ``X`` (P, N_i), ``Y`` (P, N_o), one row per sample. Loss
(Eq. 36) ``L = (1/2P) sum_mu |y_mu - w x_mu|^2``, minimised by ``w* = Sigma_yx Sigma_xx^{-1}``
(Eq. 39), i.e. ``w*^T = lstsq(X, Y)``.

All three dynamics share the "gradient matrix" ``G = Sigma^yx - w Sigma^xx`` (N_o, N_i) of a
(mini-)batch, in terms of which (Eqs. 41, 53)::

    -dL/dW1 = W2^T G,    -dL/dW2 = G W1^T .

* **Gradient flow** (Eq. 53), ``G`` of the full batch, integrated by fixed-step RK4 or by an
  adaptive Runge-Kutta method (``scipy.integrate.solve_ivp``, DOP853):
  :func:`gradient_flow`. ``W2^T W2 - W1 W1^T`` is conserved (Eq. 42).
* **SGD** (Eqs. 40-41), ``G`` of a mini-batch of size ``S``, one step
  ``W1 += lr W2^T G, W2 += lr G W1^T`` (both from the old weights): :func:`sgd_kernel` (numba,
  ``R`` replicas), :func:`run_sgd_two_layer` (burn-in, time blocks, moments, traces) and the
  plain one-chain loop :func:`sgd_reference_chain`. Because ``G = (1/S) E^T X_B`` with residuals
  ``E = Y_B - X_B w^T``, one step costs ``O(S N_o N_i + N_o N_h N_i)`` instead of the
  ``O(S N_h N_i)`` of a forward/backward pass through the hidden layer; the kernel keeps ``w``
  as state and recomputes it from ``W2 W1`` after every step (no drift of the product).
* **Stochastic gradient flow** (Eqs. 51-52), Euler-Maruyama in SDE time ``t = lr * tau`` (one SGD
  step advances ``t`` by ``lr``; the paper's ``t = tau / lambda`` is the typo listed in
  ``docs/errata.md``) with the exact mini-batch noise at the current weights:
  :func:`sgf_kernel` (numba, the SGD kernel's update with ``K_t`` below), :func:`run_sgf_two_layer`,
  :func:`sgf_noise`.

Mini-batch noise
----------------
With the per-sample negative gradients ``g_mu = (W2^T e_mu x_mu^T, e_mu (W1 x_mu)^T)``,
``e_mu = y_mu - w x_mu``, and their mean ``G_full`` (the full-batch negative gradient), the
mini-batch gradient has covariance ``c [(1/P) sum_mu g_mu g_mu^T - G_full G_full^T]`` with the
App. C prefactor ``c = 1/S`` (with replacement) or ``(P - S)/(S (P - 1))`` (without); this is
``lambda^-1`` times the covariance of ``(R_1, R_2)`` of Eq. 52 (Eqs. 45-47 before the
large-``P`` Wick approximation of Eq. 48). It is drawn without forming the covariance::

    xi = sqrt(c / P) sum_mu (z_mu - mean z) g_mu = (W2^T K, K W1^T),
    K = sqrt(c / P) E^T diag(z - mean z) X,       z ~ N(0, 1_P),

because ``Cov(z - mean z) = 1 - 1 1^T / P``. One Euler step of size ``dt`` is then
``W1 += W2^T K_t, W2 += K_t W1^T`` with ``K_t = E^T diag(dt/P + sqrt(lr dt c / P) (z - mean z)) X``.

Initialisations
---------------
:func:`gaussian_init`: i.i.d. Gaussian with the Glorot variances of Eq. 71 times ``init_scale``,
``var W1 = init_scale / N_i``, ``var W2 = init_scale / N_h`` (the paper uses 1e-4 and 1).
:func:`zero_balanced_init`: ``W2^T W2 = W1 W1^T`` (Eq. 42 with vanishing r.h.s.), built from a
Gaussian ``W2`` of the same variance and its SVD ``W2 = U s V^T`` as ``W1 = V s O^T`` with a
Haar-random ``O`` (N_i, k) with orthonormal columns, ``k = min(N_o, N_h) <= N_i``.

Randomness and reproducibility
------------------------------
The kernels draw their own random numbers from counter-based streams
(:mod:`weightdyn.counter_rng`), one per replica, keyed by one draw of the caller's
:class:`numpy.random.Generator`: SGD step ``t`` uses the uniforms ``t S .. t S + S - 1`` of its
replica's stream, SGF step ``t`` the normals ``t P' .. t P' + P - 1`` (``P'`` = P rounded up
to even). The replicas are split over numba's threads (``prange``), and the moment sums are
accumulated over fixed groups of records aligned to each time block with chunk boundaries on
group boundaries, so results are bit-identical for any ``chunk_steps`` and any thread count
(tested). Only the ``reassoc`` and ``contract`` fast-math flags are set (NaN/Inf semantics
kept), so reruns are bit-identical on the same build.

Precision
---------
``precision="float32"`` (:data:`PRECISIONS`) integrates the deviations ``W1 - W1_ref``,
``W2 - W2_ref`` from the run's reference point in single precision, with the product
``W2 W1`` expanded exactly about it and the residuals at the reference computed once in
float64 (:mod:`weightdyn.two_layer.deviation`); batches, normals, records, traces and moment
sums are those of the float64 kernels, and so are the reproducibility guarantees above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from numba import njit, prange
from scipy.integrate import solve_ivp

from weightdyn.counter_rng import normal
from weightdyn.linear_theory import noise_prefactor
from weightdyn.minibatch import draw_step_batch
from weightdyn.observables import Observables, series_fields
from weightdyn.sgd.engine import (
    RECORD_GROUP,
    Moments,
    Plan,
    Record,
    Schedule,
    Settings,
    State,
    Update,
)
from weightdyn.sgd.engine import run as engine_run
from weightdyn.two_layer.deviation import Deviations, sgd_deviation_kernel, sgf_deviation_kernel
from weightdyn.two_layer.residuals import add_samples

__all__ = [
    "INTEGRATORS",
    "PRECISIONS",
    "SAMPLING_MODES",
    "SECOND_MOMENTS",
    "GradientFlowResult",
    "TwoLayerKernel",
    "TwoLayerSGDResult",
    "balance",
    "batch_indices_from_uniforms",
    "gaussian_init",
    "gradient_flow",
    "least_squares_solution",
    "loss",
    "minibatch_noise_covariance",
    "neg_gradients",
    "per_sample_gradients",
    "product_kernel",
    "run_sgd_two_layer",
    "run_sgf_two_layer",
    "sgd_kernel",
    "sgd_reference_chain",
    "sgf_kernel",
    "sgf_noise",
    "zero_balanced_init",
]

SAMPLING_MODES = ("with", "without")
INTEGRATORS = ("rk4", "adaptive")
#: which second moments :func:`run_sgd_two_layer` accumulates
SECOND_MOMENTS = ("all", "W2", "none")
#: the kernels' arithmetic: float64, or float32 in deviation form (:mod:`.deviation`)
PRECISIONS = ("float64", "float32")

#: divergence threshold on |W1|_F, |W2|_F in units of (reference scale + 1)
_DIVERGENCE_FACTOR = 1e6
#: upper bound on the weight records held for one chunk (bytes)
_CHUNK_RECORD_BYTES = 32 << 20
#: refuse to allocate second-moment sums larger than this (bytes)
_MAX_MOMENT_BYTES = 4 << 30


def _check_sampling(sampling: str) -> bool:
    """Return True for sampling with replacement; raise ValueError for unknown modes."""
    if sampling not in SAMPLING_MODES:
        raise ValueError(f"sampling must be one of {SAMPLING_MODES}, got sampling={sampling!r}")
    return sampling == "with"


def _as_data(X, Y) -> tuple[np.ndarray, np.ndarray]:
    X = np.ascontiguousarray(X, dtype=np.float64)
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"X must have shape (P, N_i) and Y (P, N_o), got {X.shape}, {Y.shape}")
    return X, Y


# --------------------------------------------------------------------------------------
# basic quantities
# --------------------------------------------------------------------------------------


def least_squares_solution(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``w* = Sigma_yx Sigma_xx^+`` (Eq. 39), shape (N_o, N_i): the minimum-norm solution."""
    X, Y = _as_data(X, Y)
    return np.linalg.lstsq(X, Y, rcond=None)[0].T


def loss(X: np.ndarray, Y: np.ndarray, W1: np.ndarray, W2: np.ndarray) -> float:
    """Full-batch loss Eq. 36, ``(1/2P) sum_mu |y_mu - W2 W1 x_mu|^2``."""
    X, Y = _as_data(X, Y)
    E = Y - X @ (W2 @ W1).T
    return float(0.5 * np.sum(E * E) / X.shape[0])


def neg_gradients(
    X: np.ndarray, Y: np.ndarray, W1: np.ndarray, W2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Full-batch ``(-dL/dW1, -dL/dW2) = (W2^T G, G W1^T)``, ``G = Sigma_yx - W2 W1 Sigma_xx``
    (right-hand side of Eq. 53)."""
    X, Y = _as_data(X, Y)
    G = (Y - X @ (W2 @ W1).T).T @ X / X.shape[0]
    return W2.T @ G, G @ W1.T


def balance(W1: np.ndarray, W2: np.ndarray) -> np.ndarray:
    """``W2^T W2 - W1 W1^T`` (N_h, N_h), conserved by gradient flow (Eq. 42)."""
    return W2.T @ W2 - W1 @ W1.T


def per_sample_gradients(
    X: np.ndarray, Y: np.ndarray, W1: np.ndarray, W2: np.ndarray
) -> np.ndarray:
    """Negative per-sample gradients ``g_mu`` (P, N_h N_i + N_o N_h) of ``(1/2)|y_mu - w x_mu|^2``.

    Row ``mu`` is ``[vec(W2^T e_mu x_mu^T), vec(e_mu (W1 x_mu)^T)]`` flattened row-major
    (C order), ``e_mu = y_mu - W2 W1 x_mu``; their mean is :func:`neg_gradients`.
    """
    X, Y = _as_data(X, Y)
    E = Y - X @ (W2 @ W1).T  # (P, N_o)
    g1 = np.einsum("ph,pi->phi", E @ W2, X)  # W2^T e_mu x_mu^T
    g2 = np.einsum("po,ph->poh", E, X @ W1.T)  # e_mu h_mu^T
    P = X.shape[0]
    return np.concatenate([g1.reshape(P, -1), g2.reshape(P, -1)], axis=1)


def minibatch_noise_covariance(
    X: np.ndarray,
    Y: np.ndarray,
    W1: np.ndarray,
    W2: np.ndarray,
    batch_size: int,
    sampling: str = "with",
) -> np.ndarray:
    """Covariance of the mini-batch gradient about the full gradient at (W1, W2).

    ``c [(1/P) sum_mu g_mu g_mu^T - G G^T]`` (Eqs. 45-47 mapped through Eq. 52, divided by
    ``lambda``) over the flattened ``[vec W1, vec W2]`` (row-major), from
    :func:`per_sample_gradients`; ``c`` is the App. C prefactor. Exact for one SGD step.
    """
    g = per_sample_gradients(X, Y, W1, W2)
    P = g.shape[0]
    c = noise_prefactor(P, batch_size, sampling)
    G = g.mean(axis=0)
    return c * (g.T @ g / P - np.outer(G, G))


# --------------------------------------------------------------------------------------
# initialisations
# --------------------------------------------------------------------------------------


def _shape_R(replicas: int | None) -> tuple[int, ...]:
    if replicas is None:
        return ()
    if int(replicas) < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    return (int(replicas),)


def gaussian_init(
    N_i: int,
    N_h: int,
    N_o: int,
    rng: np.random.Generator,
    init_scale: float = 1.0,
    replicas: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """I.i.d. Gaussian weights with variances ``init_scale/N_i`` (W1) and ``init_scale/N_h`` (W2).

    Eq. 71 (Glorot) for ``init_scale = 1``; Fig. 6b uses ``1e-4``. Returns ``W1`` (N_h, N_i),
    ``W2`` (N_o, N_h), with a leading replica axis if ``replicas`` is given. Draw order W1, W2.
    """
    if init_scale < 0:
        raise ValueError(f"init_scale must be >= 0, got {init_scale}")
    lead = _shape_R(replicas)
    W1 = rng.normal(0.0, np.sqrt(init_scale / N_i), size=(*lead, N_h, N_i))
    W2 = rng.normal(0.0, np.sqrt(init_scale / N_h), size=(*lead, N_o, N_h))
    return W1, W2


def zero_balanced_init(
    N_i: int,
    N_h: int,
    N_o: int,
    rng: np.random.Generator,
    init_scale: float = 1.0,
    replicas: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Zero-balanced weights, ``W2^T W2 = W1 W1^T`` (Eq. 42 with vanishing r.h.s.).

    ``W2`` is Gaussian with variance ``init_scale/N_h`` (Eq. 71); with its thin SVD
    ``W2 = U s V^T`` (k = min(N_o, N_h) singular values), ``W1 = V s O^T`` with ``O`` (N_i, k)
    Haar-random orthonormal columns, so ``W1 W1^T = V s^2 V^T = W2^T W2`` (to rounding).
    Needs ``min(N_o, N_h) <= N_i``. Returns ``W1`` (N_h, N_i), ``W2`` (N_o, N_h), with a leading
    replica axis if ``replicas`` is given.
    """
    k = min(N_o, N_h)
    if k > N_i:
        raise ValueError(f"zero-balanced init needs min(N_o, N_h) <= N_i, got {k} > {N_i}")
    if init_scale < 0:
        raise ValueError(f"init_scale must be >= 0, got {init_scale}")
    R = 1 if replicas is None else _shape_R(replicas)[0]
    W1 = np.empty((R, N_h, N_i))
    W2 = np.empty((R, N_o, N_h))
    for r in range(R):
        A = rng.normal(0.0, np.sqrt(init_scale / N_h), size=(N_o, N_h))
        U, s, Vt = np.linalg.svd(A, full_matrices=False)  # U (N_o,k), s (k,), Vt (k,N_h)
        Q, Rq = np.linalg.qr(rng.standard_normal((N_i, k)))
        O = Q * np.sign(np.diag(Rq))  # noqa: E741  (Haar, Mezzadri's sign fix)
        W2[r] = (U * s) @ Vt
        W1[r] = (Vt.T * s) @ O.T
    if replicas is None:
        return W1[0], W2[0]
    return W1, W2


# --------------------------------------------------------------------------------------
# gradient flow (Eq. 53)
# --------------------------------------------------------------------------------------


@dataclass
class GradientFlowResult:
    """Trajectory summary of :func:`gradient_flow` at times ``t`` and the end point.

    ``loss`` (Eq. 36), ``D1 = |W1|_F^2``, ``D2 = |W2|_F^2``, ``rel_dist = |W2 W1 - w*|_F/|w*|_F``,
    ``balance_err = |Q(t) - Q(0)|_F`` with ``Q = W2^T W2 - W1 W1^T`` (Eq. 42), ``grad_norm`` the
    Frobenius norm of the full gradient. ``W1, W2`` are the end point (at ``t[-1]``, which is
    earlier than ``t_max`` if the run stopped at ``gtol``); ``n_steps`` counts RK4 steps or
    accepted adaptive steps, ``n_fev`` right-hand-side evaluations.
    """

    t: np.ndarray
    loss: np.ndarray
    D1: np.ndarray
    D2: np.ndarray
    rel_dist: np.ndarray
    balance_err: np.ndarray
    grad_norm: np.ndarray
    W1: np.ndarray
    W2: np.ndarray
    w_star: np.ndarray
    method: str
    n_steps: int
    n_fev: int
    converged: bool


def gradient_flow(
    X: np.ndarray,
    Y: np.ndarray,
    W1: np.ndarray,
    W2: np.ndarray,
    t_max: float,
    *,
    method: str = "adaptive",
    dt: float = 0.05,
    rtol: float = 1e-11,
    atol: float = 1e-14,
    t_eval: np.ndarray | None = None,
    n_out: int = 101,
    gtol: float | None = None,
) -> GradientFlowResult:
    """Integrate the gradient flow Eq. 53 from ``(W1, W2)`` up to ``t_max`` (or to ``gtol``).

    ``method="rk4"``: classical RK4; between consecutive output times the interval is split
    into ``ceil(interval/dt)`` equal steps (so a uniform ``t_eval`` with spacing a multiple of
    ``dt`` gives exactly step ``dt``; error O(dt^4)). ``method="adaptive"``: DOP853 of
    ``scipy.integrate.solve_ivp`` with ``rtol``/``atol``, restarted at every output time.

    Output times: ``t_eval`` (increasing, starting at 0) or ``n_out`` points, 0 and a geometric
    grid from ``min(1, t_max/100)`` to ``t_max`` (plateaus of small initialisations are
    logarithmic in time). If ``gtol`` is given, the run stops at the first output time with
    gradient norm ``<= gtol`` (``converged`` reports whether that happened; without ``gtol``
    ``converged`` is ``grad_norm[-1] <= 1e-10 (|w*| + 1)``).

    Time is the gradient-flow time of Eq. 53: ``lr`` per step of full-batch GD.
    """
    if method not in INTEGRATORS:
        raise ValueError(f"method must be one of {INTEGRATORS}, got method={method!r}")
    X, Y = _as_data(X, Y)
    W1 = np.array(W1, dtype=float)
    W2 = np.array(W2, dtype=float)
    t_eval = _flow_times(X, Y, W1, W2, t_max, t_eval, n_out)
    flow = _Flow.build(X, Y, W1, W2)
    opts = _FlowOptions(method, dt, rtol, atol, gtol)
    rows, W1, W2, n_steps, stopped = flow.integrate(W1, W2, t_eval, opts)
    arr = np.array(rows, dtype=float)
    if gtol is not None:
        converged = stopped or bool(arr[-1, 5] <= gtol)
    else:
        converged = bool(arr[-1, 5] <= 1e-10 * (flow.w_norm + 1.0))
    return GradientFlowResult(
        t=t_eval[: len(rows)].copy(),
        loss=arr[:, 0],
        D1=arr[:, 1],
        D2=arr[:, 2],
        rel_dist=arr[:, 3],
        balance_err=arr[:, 4],
        grad_norm=arr[:, 5],
        W1=W1,
        W2=W2,
        w_star=flow.w_star,
        method=method,
        n_steps=n_steps,
        n_fev=flow.n_fev,
        converged=converged,
    )


def _flow_times(X, Y, W1, W2, t_max, t_eval, n_out) -> np.ndarray:
    """Checked shapes and ``t_max``; the output times (``t_eval``, or 0 and a geometric grid of
    ``n_out - 1`` points from ``min(1, t_max/100)`` to ``t_max``)."""
    N_i, N_o, N_h = X.shape[1], Y.shape[1], W1.shape[0]
    if W1.shape != (N_h, N_i) or W2.shape != (N_o, N_h):
        raise ValueError(f"need W1 (N_h, {N_i}) and W2 ({N_o}, N_h), got {W1.shape}, {W2.shape}")
    if not t_max > 0:
        raise ValueError(f"t_max must be > 0, got {t_max}")
    if t_eval is None:
        t_lo = min(1.0, t_max / 100.0)
        t_eval = np.concatenate([[0.0], np.geomspace(t_lo, t_max, max(int(n_out) - 1, 1))])
    t_eval = np.asarray(t_eval, dtype=float)
    if t_eval[0] != 0.0 or np.any(np.diff(t_eval) <= 0):
        raise ValueError("t_eval must start at 0 and increase strictly")
    return t_eval


#: ``(W1, W2, steps taken)`` after an integration interval
_Stepped = tuple[np.ndarray, np.ndarray, int]


@dataclass(frozen=True)
class _FlowOptions:
    """The integrator of :func:`gradient_flow`: ``method``, RK4 step ``dt``, DOP853 ``rtol`` and
    ``atol``, and the gradient-norm stop ``gtol`` (None: none)."""

    method: str
    dt: float
    rtol: float
    atol: float
    gtol: float | None


@dataclass
class _Flow:
    """The full-batch gradient flow of Eq. 53 on one data set: its right-hand side (evaluations
    counted in ``n_fev``), one output row per state, and the integration between output times."""

    X: np.ndarray
    Y: np.ndarray
    Sxx: np.ndarray
    Syx: np.ndarray
    w_star: np.ndarray
    w_norm: float
    Q0: np.ndarray
    n_fev: int = 0

    @classmethod
    def build(cls, X: np.ndarray, Y: np.ndarray, W1: np.ndarray, W2: np.ndarray) -> _Flow:
        """The flow of data ``X``, ``Y`` from ``(W1, W2)`` (whose balance Eq. 42 conserves)."""
        P = X.shape[0]
        w_star = least_squares_solution(X, Y)
        w_norm = float(np.linalg.norm(w_star))
        return cls(X, Y, X.T @ X / P, Y.T @ X / P, w_star, w_norm, balance(W1, W2))

    def rhs(self, W1: np.ndarray, W2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(-dL/dW1, -dL/dW2) = (W2^T G, G W1^T)``, ``G = Sigma^yx - W2 W1 Sigma^xx``."""
        self.n_fev += 1
        G = self.Syx - (W2 @ W1) @ self.Sxx
        return W2.T @ G, G @ W1.T

    def summary(self, W1: np.ndarray, W2: np.ndarray) -> tuple[float, ...]:
        """Loss, ``|W1|^2``, ``|W2|^2``, relative distance to ``w*``, balance drift, |gradient|."""
        w = W2 @ W1
        G = self.Syx - w @ self.Sxx
        E = self.Y - self.X @ w.T
        g = np.sqrt(np.sum((W2.T @ G) ** 2) + np.sum((G @ W1.T) ** 2))
        return (
            0.5 * np.sum(E * E) / self.X.shape[0],
            np.sum(W1**2),
            np.sum(W2**2),
            np.linalg.norm(w - self.w_star) / (self.w_norm if self.w_norm > 0 else 1.0),
            np.linalg.norm(balance(W1, W2) - self.Q0),
            g,
        )

    def rk4(self, W1: np.ndarray, W2: np.ndarray, span: float, dt: float) -> _Stepped:
        """Classical RK4 over ``span`` in ``ceil(span/dt)`` equal steps; ``(W1, W2, steps)``."""
        m = max(1, int(np.ceil(span / dt - 1e-9)))
        h = span / m
        for _ in range(m):
            a1, b1 = self.rhs(W1, W2)
            a2, b2 = self.rhs(W1 + 0.5 * h * a1, W2 + 0.5 * h * b1)
            a3, b3 = self.rhs(W1 + 0.5 * h * a2, W2 + 0.5 * h * b2)
            a4, b4 = self.rhs(W1 + h * a3, W2 + h * b3)
            W1 = W1 + h / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
            W2 = W2 + h / 6.0 * (b1 + 2.0 * b2 + 2.0 * b3 + b4)
        return W1, W2, m

    def dop853(
        self, W1: np.ndarray, W2: np.ndarray, t0: float, t1: float, opts: _FlowOptions
    ) -> _Stepped:
        """DOP853 (``solve_ivp``) from ``t0`` to ``t1``; ``(W1, W2, steps)``."""
        n1, shape1, shape2 = W1.size, W1.shape, W2.shape

        def fun(_t, v):
            d1, d2 = self.rhs(v[:n1].reshape(shape1), v[n1:].reshape(shape2))
            return np.concatenate([d1.ravel(), d2.ravel()])

        v0 = np.concatenate([W1.ravel(), W2.ravel()])
        sol = solve_ivp(fun, (t0, t1), v0, method="DOP853", rtol=opts.rtol, atol=opts.atol)
        if not sol.success:
            raise RuntimeError(f"solve_ivp failed: {sol.message}")
        v = sol.y[:, -1]
        return v[:n1].reshape(shape1).copy(), v[n1:].reshape(shape2).copy(), sol.t.size - 1

    def integrate(
        self, W1: np.ndarray, W2: np.ndarray, t_eval: np.ndarray, opts: _FlowOptions
    ) -> tuple[list[tuple[float, ...]], np.ndarray, np.ndarray, int, bool]:
        """Integrate through the output times ``t_eval`` (stopping at ``opts.gtol`` or at a
        non-finite row); ``(rows, W1, W2, steps, stopped at gtol)``."""
        rows = [self.summary(W1, W2)]
        n_steps = 0
        with np.errstate(all="ignore"):
            for k in range(1, t_eval.size):
                if opts.gtol is not None and rows[-1][5] <= opts.gtol:
                    return rows, W1, W2, n_steps, True
                if opts.method == "rk4":
                    W1, W2, m = self.rk4(W1, W2, t_eval[k] - t_eval[k - 1], opts.dt)
                else:
                    W1, W2, m = self.dop853(W1, W2, t_eval[k - 1], t_eval[k], opts)
                n_steps += m
                rows.append(self.summary(W1, W2))
                if not np.all(np.isfinite(rows[-1])):
                    break
        return rows, W1, W2, n_steps, False


# --------------------------------------------------------------------------------------
# SGD: numba kernel (Eqs. 40-41)
# --------------------------------------------------------------------------------------


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"})
def product_kernel(W1, W2, Wp):
    """``Wp[r] = W2[r] @ W1[r]`` for all replicas, in the kernel's summation order."""
    R, N_h, N_i = W1.shape
    N_o = W2.shape[1]
    for r in range(R):
        w = Wp[r]
        for o in range(N_o):
            for i in range(N_i):
                w[o, i] = 0.0
        for j in range(N_h):
            row = W1[r, j]
            for o in range(N_o):
                b = W2[r, o, j]
                for i in range(N_i):
                    w[o, i] += b * row[i]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _layer_step(w1, w2, w, K, d2):
    """One replica's update ``W2 += K W1^T, W1 += W2^T K`` (both from the old weights), in place.

    Row by row of W1: ``dW2[:, j] = K W1[j]^T`` (old W1), ``W1[j] += W2[:, j]^T K`` (old W2),
    then ``W2[:, j] += dW2[:, j]`` and ``w += W2[:, j] W1[j]`` (new weights), so that the
    product ``w = W2 W1`` is recomputed, not drifted. ``d2`` (N_o,) is scratch.
    """
    N_o, N_i = K.shape
    for o in range(N_o):
        for i in range(N_i):
            w[o, i] = 0.0
    for j in range(w1.shape[0]):
        row = w1[j]
        for o in range(N_o):
            Ko = K[o]
            a = 0.0
            for i in range(N_i):
                a += Ko[i] * row[i]
            d2[o] = a
        for o in range(N_o):
            b = w2[o, j]
            Ko = K[o]
            for i in range(N_i):
                row[i] += b * Ko[i]
        for o in range(N_o):
            b = w2[o, j] + d2[o]
            w2[o, j] = b
            wo = w[o]
            for i in range(N_i):
                wo[i] += b * row[i]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _within_bound(w1, w2, bound2):
    """``(|W1|_F^2 <= bound2 and |W2|_F^2 <= bound2, |W1|_F^2, |W2|_F^2)`` (False if NaN)."""
    s1 = 0.0
    for j in range(w1.shape[0]):
        for i in range(w1.shape[1]):
            s1 += w1[j, i] * w1[j, i]
    s2 = 0.0
    for o in range(w2.shape[0]):
        for j in range(w2.shape[1]):
            s2 += w2[o, j] * w2[o, j]
    return s1 <= bound2 and s2 <= bound2, s1, s2


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _record(r, k_rec, w1, w2, w, w_star, bound2, rec1, rec2, diag):
    """Record replica ``r`` as record ``k_rec`` (kernel docstrings); False if it diverged."""
    ok, s1, s2 = _within_bound(w1, w2, bound2)
    if not ok:
        return False
    if k_rec < diag.shape[0]:
        s3 = 0.0
        for o in range(w.shape[0]):
            for i in range(w.shape[1]):
                dd = w[o, i] - w_star[o, i]
                s3 += dd * dd
        diag[k_rec, r, 0] = s1
        diag[k_rec, r, 1] = s2
        diag[k_rec, r, 2] = s3
    if k_rec < rec1.shape[0]:
        rec1[k_rec, r] = w1
        rec2[k_rec, r] = w2
    return True


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, parallel=True)
def sgd_kernel(
    X, Y, W1, W2, Wp, lr, S, with_replacement, perm, keys, step0, n, thin, rec1, rec2, diag,
    w_star, bound,
):  # fmt: skip
    """Advance ``R`` SGD replicas of the two-layer network by ``n`` steps in place (Eq. 41).

    Parameters
    ----------
    X, Y : (P, N_i), (P, N_o) float64 training data.
    W1, W2 : (R, N_h, N_i), (R, N_o, N_h) float64, C-contiguous; updated in place.
    Wp : (R, N_o, N_i) the products ``W2 W1`` (state; initialise with :func:`product_kernel`).
    lr, S : learning rate lambda and batch size.
    with_replacement : bool.
    perm : (R, P) int64 per-replica permutation state (used only without replacement).
    keys : (R,) uint64 replica keys (:func:`weightdyn.counter_rng.replica_keys`); step ``t``
        of replica ``r`` chooses its batch (rule: :func:`batch_indices_from_uniforms`) by the
        uniforms ``t S .. t S + S - 1`` of its stream.
    step0, n : the global index of this call's first step, and the number of steps.
    thin : record after every ``thin``-th step of this call (record ``k`` after step
        ``(k + 1) thin``): weights into ``rec1[k], rec2[k]`` while ``k < rec1.shape[0]``,
        diagnostics ``(|W1|_F^2, |W2|_F^2, |W2 W1 - w*|_F^2)`` into ``diag[k]`` while
        ``k < diag.shape[0]``.
    rec1, rec2 : (n_rec, R, N_h, N_i), (n_rec, R, N_o, N_h) record buffers (n_rec may be 0).
    diag : (n_diag, R, 3) diagnostics buffer.
    w_star : (N_o, N_i) reference product for the distance diagnostic.
    bound : a replica with ``|W1|_F`` or ``|W2|_F`` above ``bound`` or non-finite (checked at
        every record and at the end) is flagged and not advanced further in this call.

    Returns
    -------
    diverged : (R,) bool.

    One step, with ``c = lr / S`` and the batch ``B``::

        K = c sum_{s in B} (y_s - w x_s) x_s^T           (= lr G, G = Sigma^yx - w Sigma^xx)
        W2_new = W2 + K W1^T,  W1_new = W1 + W2^T K,  w = W2_new W1_new .
    """
    R = W1.shape[0]
    P = X.shape[0]
    diverged = np.zeros(R, np.bool_)
    c = lr / S
    bound2 = bound * bound
    for r in prange(R):
        idx = np.empty(S, np.int64)
        u = np.empty(S, np.float64)
        a = np.full(S, c)
        K = np.empty(Wp.shape[1:], np.float64)
        d2 = np.empty(Wp.shape[1], np.float64)
        w1, w2, w = W1[r], W2[r], Wp[r]
        key = keys[r]
        k_rec = 0
        for t in range(n):
            draw_step_batch(key, step0 + t, u, P, with_replacement, perm[r], idx)
            K[:] = 0.0
            add_samples(K, w, X, Y, idx, a)
            _layer_step(w1, w2, w, K, d2)
            if (t + 1) % thin == 0:
                if not _record(r, k_rec, w1, w2, w, w_star, bound2, rec1, rec2, diag):
                    diverged[r] = True
                    break
                k_rec += 1
        if not diverged[r]:
            diverged[r] = not _within_bound(w1, w2, bound2)[0]
    return diverged


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, parallel=True)
def sgf_kernel(
    X, Y, W1, W2, Wp, drift, amp, keys, step0, n, thin, rec1, rec2, diag, w_star, bound
):  # fmt: skip
    """Advance ``R`` replicas by ``n`` Euler-Maruyama steps of the SGF (Eqs. 51-52) in place.

    Step ``t`` of replica ``r`` uses ``P`` standard normals ``z``, the normals
    ``t P .. t P + P - 1`` of the replica's stream (:func:`weightdyn.counter_rng.normal`, key
    ``keys[r]``); one step is::

        a_mu = drift + amp (z_mu - mean z),   K_t = sum_mu a_mu (y_mu - w x_mu) x_mu^T,
        W2_new = W2 + K_t W1^T,  W1_new = W1 + W2^T K_t,  w = W2_new W1_new

    with ``drift = dt / P`` and ``amp = sqrt(lr dt c / P)`` (module docstring). ``step0`` is
    the global index of the call's first step; the other arguments, the records and the
    divergence flags are those of :func:`sgd_kernel`.
    """
    R = W1.shape[0]
    P = X.shape[0]
    diverged = np.zeros(R, np.bool_)
    bound2 = bound * bound
    for r in prange(R):
        z = np.empty(P, np.float64)
        a = np.empty(P, np.float64)
        rows = np.arange(P)
        K = np.empty(Wp.shape[1:], np.float64)
        d2 = np.empty(Wp.shape[1], np.float64)
        w1, w2, w = W1[r], W2[r], Wp[r]
        key = keys[r]
        k_rec = 0
        for t in range(n):
            base = np.uint64(step0 + t) * np.uint64(P)
            for j in range(P):
                z[j] = normal(key, base + np.uint64(j))
            z_mean = 0.0
            for mu in range(P):
                z_mean += z[mu]
            z_mean /= P
            for mu in range(P):
                a[mu] = drift + amp * (z[mu] - z_mean)
            K[:] = 0.0
            add_samples(K, w, X, Y, rows, a)
            _layer_step(w1, w2, w, K, d2)
            if (t + 1) % thin == 0:
                if not _record(r, k_rec, w1, w2, w, w_star, bound2, rec1, rec2, diag):
                    diverged[r] = True
                    break
                k_rec += 1
        if not diverged[r]:
            diverged[r] = not _within_bound(w1, w2, bound2)[0]
    return diverged


# --------------------------------------------------------------------------------------
# plain-python reference and index helper
# --------------------------------------------------------------------------------------


def sgd_reference_chain(
    X: np.ndarray,
    Y: np.ndarray,
    W1: np.ndarray,
    W2: np.ndarray,
    lr: float,
    batch_indices: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Readable one-chain SGD (Eqs. 40-41) on given mini-batch indices ``(n_steps, S)``.

    Returns the final ``(W1, W2)``.
    """
    X, Y = _as_data(X, Y)
    W1 = np.array(W1, dtype=float)
    W2 = np.array(W2, dtype=float)
    batch_indices = np.asarray(batch_indices)
    S = batch_indices.shape[1]
    for batch in batch_indices:
        xb, yb = X[batch], Y[batch]
        G = (yb - xb @ (W2 @ W1).T).T @ xb / S  # Sigma^yx - W2 W1 Sigma^xx of the batch
        W1, W2 = W1 + lr * W2.T @ G, W2 + lr * G @ W1.T
    return W1, W2


def batch_indices_from_uniforms(
    u: np.ndarray, P: int, sampling: str, perm: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The kernel's mini-batch indices (n, R, S) from uniforms ``u`` (n, R, S).

    With replacement ``idx = min(floor(u P), P - 1)``. Without replacement a partial
    Fisher-Yates shuffle of a per-replica permutation ``perm`` (R, P) that persists across
    steps (default start: identity): ``for j < S: k = j + floor(u_j (P - j)); swap(perm[j],
    perm[k])``, batch ``perm[:S]``. Returns ``(indices, advanced perm or None)``.
    Identical to :func:`weightdyn.single_layer.simulate.batch_indices_from_uniforms`.
    """
    from weightdyn.single_layer.simulate import batch_indices_from_uniforms as _bi

    return _bi(u, P, sampling, perm)


# --------------------------------------------------------------------------------------
# random streams
# --------------------------------------------------------------------------------------


def sgf_noise(
    X: np.ndarray,
    Y: np.ndarray,
    W1: np.ndarray,
    W2: np.ndarray,
    batch_size: int,
    sampling: str,
    rng: np.random.Generator,
    size: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """``size`` draws of the mini-batch gradient noise ``xi = (xi1, xi2)`` at ``(W1, W2)``.

    ``xi = sqrt(c/P) sum_mu (z_mu - mean z) g_mu`` with ``P`` standard normals ``z`` per draw
    (module docstring); its covariance is :func:`minibatch_noise_covariance`. Returns arrays
    of shape (size, N_h, N_i) and (size, N_o, N_h). The SGF noise of Eq. 52 is ``sqrt(lr) xi``.
    """
    X, Y = _as_data(X, Y)
    P = X.shape[0]
    c = noise_prefactor(P, batch_size, sampling)
    z = rng.standard_normal((size, P))
    z -= z.mean(axis=1, keepdims=True)
    E = Y - X @ (W2 @ W1).T  # (P, N_o)
    K = np.sqrt(c / P) * np.matmul((E[None] * z[:, :, None]).transpose(0, 2, 1), X)
    return np.matmul(W2.T, K), np.matmul(K, W1.T)


# --------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------


@dataclass
class TwoLayerSGDResult:
    """Moments per (replica, time block) group and traces of an SGD or SGF run.

    Group ``g = replica * n_blocks + block``. With ``dW1 = W1 - W1_ref`` flattened row-major to
    ``n1 = N_h N_i`` entries and ``dW2 = W2 - W2_ref`` to ``n2 = N_o N_h``: ``sum_dW1`` (G, n1),
    ``sum_dW2`` (G, n2) and, as selected by ``second_moments``, ``sum_dW1dW1`` (G, n1, n1),
    ``sum_dW2dW2`` (G, n2, n2), ``sum_dW1dW2`` (G, n1, n2) (``None`` when not accumulated), all
    sums over ``n_records[g]`` snapshots; NaN if ``diverged``.

    Traces over the whole run (burn-in included), one point every ``trace_every`` steps at
    ``trace_step`` (steps done): snapshots ``trace_D1 = |W1|_F^2``, ``trace_D2 = |W2|_F^2``,
    ``trace_dist = |W2 W1 - w*|_F`` (R columns) and their time averages over the records
    (every ``thin`` steps) of the preceding window, ``trace_D1_avg``, ``trace_D2_avg``,
    ``trace_dist_avg`` (the latter the window mean of ``|W2 W1 - w*|_F``). Drift of ``D2`` at
    small ``trace_dist`` is motion along the manifold of minima. Points after a divergence are NaN.

    ``kind`` is ``"sgd"`` or ``"sgf"``; for SGF the step counts are Euler steps of size ``dt``
    (SDE time ``t = lr tau``), for SGD ``dt = lr``. ``precision``: the kernels' arithmetic,
    ``"float64"`` or ``"float32"`` (deviation form; every field is float64 either way).

    With an observable hook: ``obs_series`` (T, R, m) of the hook's ``obs_names`` over the
    sampling window, one point every ``obs_spacing`` steps, and ``obs_elapsed_s``
    (:func:`weightdyn.observables.series_fields`).
    """

    kind: str
    sum_dW1: np.ndarray
    sum_dW2: np.ndarray
    sum_dW1dW1: np.ndarray | None
    sum_dW2dW2: np.ndarray | None
    sum_dW1dW2: np.ndarray | None
    n_records: np.ndarray
    group_replica: np.ndarray
    group_block: np.ndarray
    diverged: bool
    diverged_replicas: np.ndarray
    burnin_steps: int
    sample_steps: int
    thin: int
    n_blocks: int
    replicas: int
    lr: float
    dt: float
    batch_size: int
    sampling: str
    W1_ref: np.ndarray
    W2_ref: np.ndarray
    w_star: np.ndarray
    trace_every: int
    trace_step: np.ndarray
    trace_D1: np.ndarray
    trace_D2: np.ndarray
    trace_dist: np.ndarray
    trace_D1_avg: np.ndarray
    trace_D2_avg: np.ndarray
    trace_dist_avg: np.ndarray
    final_W1: np.ndarray
    final_W2: np.ndarray
    elapsed_s: float
    obs_series: np.ndarray | None = None
    obs_names: tuple[str, ...] = ()
    obs_spacing: int = 0
    obs_elapsed_s: float = 0.0
    precision: str = "float64"


class _Trace:
    """Window sums of the per-record diagnostics, added strictly in record order."""

    def __init__(self, R: int, per_window: int, n_windows: int, thin: int):
        self.m = per_window
        self.thin = thin
        self.acc = np.zeros((R, 3))
        self.cnt = 0
        self.k = 0
        self.n_rec = 0
        self.snap = np.full((n_windows, R, 3), np.nan)
        self.avg = np.full((n_windows, R, 3), np.nan)

    def add(self, diag: np.ndarray) -> None:
        for d in diag:
            d = d.copy()
            d[:, 2] = np.sqrt(d[:, 2])  # |w - w*|_F
            self.acc += d
            self.cnt += 1
            self.n_rec += 1
            if self.cnt == self.m:
                if self.k < self.snap.shape[0]:
                    self.snap[self.k] = d
                    self.avg[self.k] = self.acc / self.m
                self.k += 1
                self.acc[:] = 0.0
                self.cnt = 0


def _prepare_init(W_init, shape, name, replicas):
    W = np.asarray(W_init, dtype=np.float64)
    if W.ndim == 2:
        W = np.broadcast_to(W, (1 if replicas is None else int(replicas), *W.shape))
    W = np.array(W, dtype=np.float64, order="C", copy=True)
    if W.ndim != 3 or W.shape[1:] != shape:
        raise ValueError(f"{name} must have shape (R, {shape[0]}, {shape[1]}), got {W.shape}")
    return W


@dataclass(frozen=True)
class _Options:
    """The settings of a two-layer run (:func:`run_sgd_two_layer`, :func:`run_sgf_two_layer`):
    ``kind`` ("sgd" or "sgf"), the step, the plan and the keyword options of the drivers."""

    kind: str
    update: Update
    schedule: Schedule
    dt: float | None = None
    replicas: int | None = None
    w_star: np.ndarray | None = None
    trace_every: int | None = None
    second_moments: str = "all"
    progress: Callable[[str], None] | None = None
    observables: Observables | None = None
    keys: np.ndarray | None = None
    precision: str = "float64"


@dataclass(frozen=True)
class _Problem:
    """Checked data, references, initial weights (R, ...) and ``w*`` of a run."""

    X: np.ndarray
    Y: np.ndarray
    W1_ref: np.ndarray
    W2_ref: np.ndarray
    W1: np.ndarray
    W2: np.ndarray
    w_star: np.ndarray


def _check_problem(X, Y, refs, inits, opts: _Options) -> _Problem:
    """The checked arrays of a run, ``refs = (W1_ref, W2_ref)``, ``inits = (W1_init, W2_init)``
    (ValueError naming the argument otherwise)."""
    (W1_ref, W2_ref), (W1_init, W2_init), update = refs, inits, opts.update
    update.require_plain("the two-layer SGD/SGF driver")
    with_replacement = _check_sampling(update.sampling)
    if opts.precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got precision={opts.precision!r}")
    if opts.second_moments not in SECOND_MOMENTS:
        raise ValueError(
            f"second_moments must be one of {SECOND_MOMENTS}, got {opts.second_moments!r}"
        )
    X, Y = _as_data(X, Y)
    P, N_i = X.shape
    N_o = Y.shape[1]
    W1_ref = np.ascontiguousarray(W1_ref, dtype=np.float64)
    W2_ref = np.ascontiguousarray(W2_ref, dtype=np.float64)
    if W1_ref.ndim not in (2, 3) or W1_ref.shape[-1] != N_i:
        raise ValueError(f"W1_ref must have shape ([R,] N_h, {N_i}), got {W1_ref.shape}")
    N_h = W1_ref.shape[-2]
    if W2_ref.shape[-2:] != (N_o, N_h) or W2_ref.ndim != W1_ref.ndim:
        raise ValueError(f"W2_ref must have shape ([R,] {N_o}, {N_h}), got {W2_ref.shape}")
    W1 = _prepare_init(W1_init, (N_h, N_i), "W1_init", opts.replicas)
    W2 = _prepare_init(W2_init, (N_o, N_h), "W2_init", opts.replicas)
    if W1.shape[0] != W2.shape[0]:
        raise ValueError(f"W1_init and W2_init disagree on R: {W1.shape[0]} vs {W2.shape[0]}")
    if W1_ref.ndim == 3 and (W1_ref.shape[0] != W1.shape[0] or W2_ref.shape[0] != W1.shape[0]):
        raise ValueError(f"per-replica W1_ref, W2_ref must have R = {W1.shape[0]} rows")
    if opts.keys is not None and np.shape(opts.keys) != (W1.shape[0],):
        raise ValueError(f"keys must have shape ({W1.shape[0]},), got {np.shape(opts.keys)}")
    w_star = least_squares_solution(X, Y) if opts.w_star is None else np.asarray(opts.w_star, float)
    w_star = np.ascontiguousarray(w_star, dtype=np.float64)
    if w_star.shape != (N_o, N_i):
        raise ValueError(f"w_star must have shape ({N_o}, {N_i}), got {w_star.shape}")
    if not update.lr > 0:
        raise ValueError(f"lr must be > 0, got lr={update.lr!r}")
    S = int(update.batch_size)
    if S < 1 or (not with_replacement and S > P):
        raise ValueError(
            f"batch_size={update.batch_size} must be >= 1 and <= P={P} for sampling without "
            "replacement"
        )
    return _Problem(X, Y, W1_ref, W2_ref, W1, W2, w_star)


def _plan(opts: _Options, pb: _Problem) -> tuple[Plan, int]:
    """The engine's plan of ``opts.schedule`` (:class:`weightdyn.sgd.Plan`; burn-in a multiple
    of ``thin``, chunks capped so that a chunk's weight records stay below 32 MiB) and
    ``trace_every``."""
    plan = opts.schedule.plan()
    if plan.burnin_steps % plan.thin != 0:
        raise ValueError(f"burnin_steps={plan.burnin_steps} must be a multiple of thin={plan.thin}")
    R, n1, n2 = pb.W1.shape[0], pb.W1[0].size, pb.W2[0].size
    _check_moment_size(R * plan.n_blocks, n1, n2, opts.second_moments)
    max_units = max(1, _CHUNK_RECORD_BYTES // (8 * R * (n1 + n2) * RECORD_GROUP))
    plan = replace(plan, chunk=min(plan.chunk, max_units * plan.thin * RECORD_GROUP))
    thin, total = plan.thin, plan.total_steps
    every = int(opts.trace_every) if opts.trace_every is not None else max(thin, total // 100)
    return plan, max(thin, (every // thin) * thin)


def _check_moment_size(G: int, n1: int, n2: int, second_moments: str) -> None:
    """ValueError if the second moments of ``G`` (replica, block) groups would exceed 4 GiB."""
    want1, want2 = second_moments == "all", second_moments in ("all", "W2")
    nbytes = 8 * G * ((n1 * n1 + n1 * n2) * want1 + n2 * n2 * want2)
    if nbytes > _MAX_MOMENT_BYTES:
        raise ValueError(
            f"second moments would need {nbytes / 2**30:.1f} GiB; use second_moments='W2' or "
            "fewer replicas / blocks"
        )


def _moment_shapes(n1: int, n2: int, second_moments: str) -> dict[str, tuple[int, ...]]:
    """The engine's sums (:mod:`weightdyn.sgd`) of ``dW1``, ``dW2`` and, as ``second_moments``
    selects, ``dW1 dW1^T``, ``dW2 dW2^T``, ``dW1 dW2^T``."""
    shapes = {"dW1": (n1,), "dW2": (n2,)}
    if second_moments == "all":
        shapes |= {"dW1dW1": (n1, n1), "dW1dW2": (n1, n2)}
    if second_moments in ("all", "W2"):
        shapes["dW2dW2"] = (n2, n2)
    return shapes


def _add_records(record: Record, d1: np.ndarray, d2: np.ndarray) -> None:
    """The records ``d1`` (n_rec, R, n1), ``d2`` (n_rec, R, n2) of one call into block
    ``record.block`` of the sums, by groups of ``RECORD_GROUP`` records from the call's start
    (one batched product per group)."""
    sums, b = record.sums, record.block
    for g0 in range(0, d1.shape[0], RECORD_GROUP):
        a1 = d1[g0 : g0 + RECORD_GROUP].transpose(1, 0, 2)  # (R, k, n1)
        a2 = d2[g0 : g0 + RECORD_GROUP].transpose(1, 0, 2)
        sums["dW1"][:, b] += a1.sum(axis=1)
        sums["dW2"][:, b] += a2.sum(axis=1)
        if "dW1dW1" in sums:
            sums["dW1dW1"][:, b] += np.matmul(a1.transpose(0, 2, 1), a1)
            sums["dW1dW2"][:, b] += np.matmul(a1.transpose(0, 2, 1), a2)
        if "dW2dW2" in sums:
            sums["dW2dW2"][:, b] += np.matmul(a2.transpose(0, 2, 1), a2)
        record.n_records[:, b] += a1.shape[1]


def _ref_norm(W_ref: np.ndarray) -> float:
    """``|W_ref|_F``; the largest over the replicas of a per-replica reference (R, ., .)."""
    if W_ref.ndim == 2:
        return np.linalg.norm(W_ref)
    return np.max(np.linalg.norm(W_ref.reshape(W_ref.shape[0], -1), axis=1))


def _bound(pb: _Problem) -> tuple[float, np.ndarray]:
    """The divergence bound on ``|W1|_F``, ``|W2|_F`` (``1e6`` times the scale of the reference,
    ``w*`` and the initial weights, plus one) and the replicas non-finite at the start."""
    R = pb.W1.shape[0]
    with np.errstate(all="ignore"):
        scale = max(
            np.max(np.abs(pb.w_star), initial=0.0),
            _ref_norm(pb.W1_ref),
            _ref_norm(pb.W2_ref),
            np.max(np.linalg.norm(pb.W1.reshape(R, -1), axis=1), initial=0.0),
            np.max(np.linalg.norm(pb.W2.reshape(R, -1), axis=1), initial=0.0),
        )
        bound = float(_DIVERGENCE_FACTOR * (scale + 1.0)) if np.isfinite(scale) else np.inf
        finite = np.isfinite(pb.W1.reshape(R, -1)).all(axis=1)
        return bound, ~(finite & np.isfinite(pb.W2.reshape(R, -1)).all(axis=1))


#: a kernel call's divergence flags (R,), records of ``dW1`` (n_rec, R, n1) and ``dW2``
#: (n_rec, R, n2), and the raw records ``(W1, W2)`` for the observable hook (or None)
_Advanced = tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]


@dataclass(frozen=True)
class TwoLayerKernel:
    """:func:`sgd_kernel` (Eq. 41) or :func:`sgf_kernel` (Eqs. 51-52) behind the engine's kernel
    interface (:mod:`weightdyn.sgd`): the state is ``W = W1`` (R, N_h, N_i) and
    ``extra = (W2,)`` (R, N_o, N_h); a record is ``(dW1, dW2)`` about ``(W1_ref, W2_ref)``,
    flattened, into the sums of :func:`_moment_shapes`; the per-record diagnostics go into
    ``trace`` from the first step on (every ``thin`` steps, burn-in included); the observable
    hook gets the raw ``(W1, W2)`` records. ``coeffs``: ``(lr, S, with_replacement)`` for SGD,
    ``(drift, amp)`` for SGF. The run stops at the first divergence.

    ``Wp``: the float64 kernels' products ``W2 W1`` (R, N_o, N_i); ``dev``: in float32 the
    deviation-form state (:class:`weightdyn.two_layer.deviation.Deviations`, integrated by
    :func:`~weightdyn.two_layer.deviation.sgd_deviation_kernel` or
    :func:`~weightdyn.two_layer.deviation.sgf_deviation_kernel`; ``W1``, ``W2`` of the engine's
    state are then written from it after every call), else None. ``observe``: the run has an
    observable hook (which the float32 records, deviations, are turned into raw weights for)."""

    kind: str
    pb: _Problem
    coeffs: tuple
    Wp: np.ndarray | None
    thin: int
    second_moments: str
    trace: _Trace
    lower_triangle: bool = False
    dev: Deviations | None = None
    observe: bool = False

    @property
    def ref(self) -> np.ndarray:
        """``(W1_ref, W2_ref)`` flattened and concatenated."""
        return np.concatenate([self.pb.W1_ref.reshape(-1), self.pb.W2_ref.reshape(-1)])

    def moment_shapes(self, state: State) -> dict[str, tuple[int, ...]]:
        """``dW1``, ``dW2`` and the selected second moments (:func:`_moment_shapes`)."""
        return _moment_shapes(self.pb.W1[0].size, self.pb.W2[0].size, self.second_moments)

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """``n_steps`` steps of every replica from global step ``step0``, recording."""
        R, thin = state.W.shape[0], self.thin
        n_rec = n_steps // thin if record.block is not None else 0
        diag = np.empty((n_steps // thin, R, 3))
        steps = self._float64 if self.dev is None else self._deviations
        flags, d1, d2, observed = steps(state, (step0, n_steps, n_rec), diag, record.bound)
        state.diverged |= flags
        if flags.any():
            return
        self.trace.add(diag)
        if record.block is not None:
            _add_records(record, d1, d2)
            record.observed = observed

    def _float64(self, state: State, steps: tuple[int, int, int], diag: np.ndarray,
                 bound: float) -> _Advanced:  # fmt: skip
        """The float64 kernel's ``n_steps`` steps from ``step0`` with ``n_rec`` records,
        ``steps = (step0, n_steps, n_rec)``: the divergence flags, the records of ``dW1``,
        ``dW2`` (n_rec, R, n1), (n_rec, R, n2) and the raw records ``(W1, W2)``."""
        (W1, W2), pb, (step0, n_steps, n_rec) = (state.W, *state.extra), self.pb, steps
        rec1, rec2 = np.empty((n_rec, *W1.shape)), np.empty((n_rec, *W2.shape))
        tail = (step0, n_steps, self.thin, rec1, rec2, diag, pb.w_star, bound)
        if self.kind == "sgd":
            lr, S, wr = self.coeffs
            args = (lr, S, wr, state.perm, state.keys, *tail)
            flags = sgd_kernel(pb.X, pb.Y, W1, W2, self.Wp, *args)
        else:
            flags = sgf_kernel(pb.X, pb.Y, W1, W2, self.Wp, *self.coeffs, state.keys, *tail)
        R, n1, n2 = W1.shape[0], W1[0].size, W2[0].size
        ref1 = pb.W1_ref.reshape(-1 if pb.W1_ref.ndim == 2 else (R, -1))
        ref2 = pb.W2_ref.reshape(-1 if pb.W2_ref.ndim == 2 else (R, -1))
        d1, d2 = rec1.reshape(n_rec, R, n1) - ref1, rec2.reshape(n_rec, R, n2) - ref2
        return flags, d1, d2, (rec1, rec2)

    def _deviations(self, state: State, steps: tuple[int, int, int], diag: np.ndarray,
                    bound: float) -> _Advanced:  # fmt: skip
        """As :meth:`_float64` in float32 deviation form; the records are the deviations, and
        ``W1 = W1_ref + dW1``, ``W2 = W2_ref + dW2`` (float64) go into ``state``."""
        dev, (step0, n_steps, n_rec) = self.dev, steps
        R, n1, n2 = dev.D1.shape[0], dev.D1[0].size, dev.D2[0].size
        rec1, rec2 = np.empty((n_rec, *dev.D1.shape)), np.empty((n_rec, *dev.D2.shape))
        head = (dev.X, dev.E0, dev.refs, dev.state)
        tail = (step0, n_steps, self.thin, rec1, rec2, diag, bound)
        if self.kind == "sgd":
            lr, S, wr = self.coeffs
            flags = sgd_deviation_kernel(*head, lr, S, wr, state.perm, state.keys, *tail)
        else:
            flags = sgf_deviation_kernel(*head, *self.coeffs, state.keys, *tail)
        state.W[:], state.extra[0][:] = dev.weights()
        observed = (rec1 + dev.ref1, rec2 + dev.ref2) if self.observe else None
        return flags, rec1.reshape(n_rec, R, n1), rec2.reshape(n_rec, R, n2), observed


def _kernel(
    pb: _Problem, opts: _Options, plan: Plan, trace: _Trace
) -> tuple[TwoLayerKernel, float]:
    """The run's kernel and the Euler step ``dt`` (``lr`` for SGD)."""
    lr, S, sampling = opts.update.lr, int(opts.update.batch_size), opts.update.sampling
    if opts.kind == "sgd":
        coeffs, dt = (float(lr), S, _check_sampling(sampling)), float(lr)
    else:
        dt = float(lr if opts.dt is None else opts.dt)
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be a finite number > 0, got dt={opts.dt!r}")
        P = pb.X.shape[0]
        coeffs = (dt / P, np.sqrt(lr * dt * noise_prefactor(P, S, sampling) / P))
    Wp, dev = None, None
    if opts.precision == "float64":
        Wp = np.empty((pb.W1.shape[0], pb.Y.shape[1], pb.X.shape[1]))
        product_kernel(pb.W1, pb.W2, Wp)
    else:
        with np.errstate(all="ignore"):  # a non-finite start is flagged by the engine
            refs, weights = (pb.W1_ref, pb.W2_ref), (pb.W1, pb.W2)
            dev = Deviations.build((pb.X, pb.Y), refs, weights, pb.w_star)
    observe = opts.observables is not None
    kernel = TwoLayerKernel(
        opts.kind, pb, coeffs, Wp, plan.thin, opts.second_moments, trace, dev=dev, observe=observe
    )
    return kernel, dt


def _grouped_moments(moments: Moments) -> dict[str, np.ndarray | None]:
    """The result's moment fields: (replica, block) flattened to groups; None if not summed."""
    R, B = moments.n_records.shape
    names = {"sum_dW1": "dW1", "sum_dW2": "dW2", "sum_dW1dW1": "dW1dW1",
             "sum_dW2dW2": "dW2dW2", "sum_dW1dW2": "dW1dW2"}  # fmt: skip
    out = {}
    for field, name in names.items():
        arr = moments.sums.get(name)
        out[field] = None if arr is None else arr.reshape(R * B, *arr.shape[2:])
    return {**out, "n_records": moments.n_records.reshape(-1)}


def _trace_fields(trace: _Trace, trace_every: int) -> dict[str, object]:
    """The result's trace fields (:class:`TwoLayerSGDResult`)."""
    n_tr = trace.snap.shape[0]
    names = ("trace_D1", "trace_D2", "trace_dist")
    return {
        "trace_every": trace_every,
        "trace_step": trace_every * np.arange(1, n_tr + 1, dtype=np.int64),
        **{name: trace.snap[:, :, i] for i, name in enumerate(names)},
        **{f"{name}_avg": trace.avg[:, :, i] for i, name in enumerate(names)},
    }


def _run(X, Y, refs, inits, rng: np.random.Generator, opts: _Options) -> TwoLayerSGDResult:
    """The two-layer SGD (``opts.kind == "sgd"``, Eq. 41) or SGF (Eqs. 51-52) run of
    :func:`run_sgd_two_layer` through the engine (:func:`weightdyn.sgd.run`):
    ``refs = (W1_ref, W2_ref)``, ``inits = (W1_init, W2_init)``."""
    pb = _check_problem(X, Y, refs, inits, opts)
    plan, trace_every = _plan(opts, pb)
    R, thin = pb.W1.shape[0], plan.thin
    bound, diverged = _bound(pb)
    trace = _Trace(R, trace_every // thin, plan.total_steps // trace_every, thin)
    kernel, dt_used = _kernel(pb, opts, plan, trace)
    if opts.keys is None:
        state = State.start(pb.W1, rng, pb.X.shape[0], extra=(pb.W2,))
    else:  # the caller's keys: nothing is drawn from rng
        perm = np.tile(np.arange(pb.X.shape[0], dtype=np.int64), (R, 1))
        keys = np.array(opts.keys, dtype=np.uint64)
        state = State(pb.W1, keys, perm, np.zeros(R, dtype=bool), (pb.W2,))
    state.diverged |= diverged
    settings = Settings(plan, bound, opts.kind.upper(), opts.progress, opts.observables)
    moments = engine_run(kernel, state, settings)
    return TwoLayerSGDResult(
        kind=opts.kind, **_grouped_moments(moments),
        group_replica=np.repeat(np.arange(R), plan.n_blocks),
        group_block=np.tile(np.arange(plan.n_blocks), R),
        diverged=bool(state.diverged.any()), diverged_replicas=state.diverged.copy(),
        burnin_steps=plan.burnin_steps, sample_steps=plan.sample_steps, thin=thin,
        n_blocks=plan.n_blocks, replicas=R, lr=float(opts.update.lr), dt=dt_used,
        batch_size=int(opts.update.batch_size), sampling=opts.update.sampling, W1_ref=pb.W1_ref,
        W2_ref=pb.W2_ref, w_star=pb.w_star, **_trace_fields(trace, trace_every),
        final_W1=pb.W1, final_W2=pb.W2, elapsed_s=moments.elapsed_s,
        **series_fields(moments.recorder, thin), precision=opts.precision,
    )  # fmt: skip


def run_sgd_two_layer(
    X: np.ndarray,
    Y: np.ndarray,
    refs: tuple[np.ndarray, np.ndarray],
    inits: tuple[np.ndarray, np.ndarray],
    update: Update,
    schedule: Schedule,
    rng: np.random.Generator,
    *,
    replicas: int | None = None,
    w_star: np.ndarray | None = None,
    trace_every: int | None = None,
    second_moments: str = "all",
    progress: Callable[[str], None] | None = None,
    observables: Observables | None = None,
    keys: np.ndarray | None = None,
    precision: str = "float64",
) -> TwoLayerSGDResult:
    """Run R SGD replicas of the two-layer network (Eq. 41) and accumulate weight moments.

    ``refs = (W1_ref, W2_ref)`` is the reference point of the moments, ``inits = (W1_init,
    W2_init)`` the initial weights, ``W1_init`` (R, N_h, N_i) and ``W2_init`` (R, N_o, N_h) (2-D
    arrays are repeated ``replicas`` times, default once). ``update``
    (:class:`weightdyn.sgd.Update`) is the step: learning rate ``lr``, batch size
    ``batch_size`` and App. C ``sampling``. ``schedule`` (:class:`weightdyn.sgd.Schedule`):
    ``burnin_steps`` (a multiple of ``thin``) steps run first; then ``sample_steps`` (a multiple
    of ``n_blocks * thin``) are split into ``n_blocks`` time blocks, and every ``thin``-th step
    ``dW1 = W1 - W1_ref``, ``dW2 = W2 - W2_ref`` (flattened row-major) enter the sums of their
    (replica, block) group (see :class:`TwoLayerSGDResult`). ``second_moments``: ``"all"``
    (dW1 dW1^T, dW2 dW2^T, dW1 dW2^T; ``O(R n1^2)`` per record, which dominates unless ``thin``
    is large), ``"W2"`` (only dW2 dW2^T) or ``"none"``. The reference point is typically the
    gradient-flow end point (:func:`gradient_flow`), about which Eq. 66 predicts the covariance.

    Traces of ``|W1|^2``, ``|W2|^2`` and ``|W2 W1 - w*|`` (snapshots and window averages) are
    recorded every ``trace_every`` steps (a multiple of ``thin``; default about 1 % of the
    run) from the first step on; ``w*`` defaults to the least-squares solution Eq. 39.

    ``schedule.chunk_steps`` bounds the memory (rounded to a multiple of ``32 thin``, and capped
    so that the weight records of a chunk stay below 32 MiB) and changes no result bit.
    Divergence (``|W1|_F`` or ``|W2|_F`` non-finite or above ``1e6`` times the scale of the
    reference, ``w*`` and the initial weights, checked every ``thin`` steps) stops the run with
    ``diverged=True``, NaN moments and NaN trace points after it; no warning.
    ``progress`` is called with a status line about every 10 % of the steps.

    ``observables``: an optional hook called with the raw records ``(W1, W2)`` (n_rec, R, N_h,
    N_i), (n_rec, R, N_o, N_h) of every sampling chunk after they exist; it only reads them, so
    every other field is bit-identical with and without it (``obs_*`` fields of the result).

    ``refs`` may also be per replica, ``W1_ref`` (R, N_h, N_i) and ``W2_ref`` (R, N_o, N_h):
    replica ``r``'s records are then taken about its own reference, bit for bit as in a run of
    replica ``r`` alone (the divergence bound takes the largest replica's reference). ``keys``
    (R,) uint64: the replicas' counter-based stream keys
    (:func:`weightdyn.counter_rng.replica_keys`), instead of one draw from ``rng``, which is then
    left untouched; replica ``r`` of a run with ``keys`` is bit-identical to a one-replica run
    with ``keys[r : r + 1]`` (the streams depend only on the key and the global step).

    ``precision``: ``"float64"`` (default) or ``"float32"``, which integrates the deviations
    ``dW1``, ``dW2`` from the reference in single precision (Eq. 41 exactly, with the product
    expanded about the reference, :mod:`weightdyn.two_layer.deviation`): the same batches, the
    records and moment sums in float64, and everything above (chunking, threads, per-replica
    references, keys, divergence) holds for its bits too.
    """
    opts = _Options(
        "sgd", update, schedule, replicas=replicas, w_star=w_star, trace_every=trace_every,
        second_moments=second_moments, progress=progress, observables=observables, keys=keys,
        precision=precision,
    )  # fmt: skip
    return _run(X, Y, refs, inits, rng, opts)


def run_sgf_two_layer(
    X: np.ndarray,
    Y: np.ndarray,
    refs: tuple[np.ndarray, np.ndarray],
    inits: tuple[np.ndarray, np.ndarray],
    update: Update,
    schedule: Schedule,
    rng: np.random.Generator,
    *,
    dt: float | None = None,
    replicas: int | None = None,
    w_star: np.ndarray | None = None,
    trace_every: int | None = None,
    second_moments: str = "all",
    progress: Callable[[str], None] | None = None,
    observables: Observables | None = None,
    keys: np.ndarray | None = None,
    precision: str = "float64",
) -> TwoLayerSGDResult:
    """Euler-Maruyama integration of the SGF (Eqs. 51-52) for R replicas, as for SGD.

    Protocol, arguments (``precision`` included) and result as in :func:`run_sgd_two_layer`.

    Steps are Euler steps of size ``dt`` in SDE time ``t = lr tau`` (default ``dt = update.lr``:
    one SGD step per Euler step, matching the first two moments of a step of Eq. 41). The noise
    is the exact mini-batch noise at the current weights (covariance
    :func:`minibatch_noise_covariance` with the App. C prefactor of ``update.sampling``), drawn
    from ``P`` standard normals per replica and step without forming the covariance (module
    docstring), by :func:`sgf_kernel` (numba).
    """
    opts = _Options(
        "sgf", update, schedule, dt=dt, replicas=replicas, w_star=w_star, trace_every=trace_every,
        second_moments=second_moments, progress=progress, observables=observables, keys=keys,
        precision=precision,
    )  # fmt: skip
    return _run(X, Y, refs, inits, rng, opts)
