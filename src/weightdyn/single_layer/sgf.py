"""Stochastic gradient flow (SGF): Euler-Maruyama integration of the SGD Langevin equation.

Paper 000, Section II.2, Eq. 13 (Ito)::

    dw = -grad L(w) dt + sqrt(lr) xi dt,   grad L(w) = H (w - w*),
    <xi(t) xi(t')^T> = C(w) delta(t - t'),

with SDE time ``t = lr * tau`` (``tau`` the SGD step counter; the paper's ``t = tau/lambda`` is a
typo, see ``docs/errata.md``). One Euler-Maruyama step of size ``dt`` is::

    w <- w - dt grad L(w) + sqrt(lr dt) xi,   xi ~ N(0, C(w)),

so ``dt = lr`` reproduces the first two moments of one SGD step (Eq. 11: ``w <- w - lr grad L -
lr xi_B`` with ``Cov(xi_B) = C``). Two noise models, chosen per call with ``noise=``:

* ``"additive"``: ``C = C(w*)`` of Eq. 17 (:func:`theory.noise_covariance` with ``w=None``), whose
  square root is computed once. Integrated in the eigenbasis of ``H`` (``z = V^T (w - w*)``): the
  drift is diagonal there and only the noise needs a matrix product per step.
* ``"multiplicative"``: ``C(w)`` of Eq. 14 (Eq. 15 with its last term corrected to
  ``-grad L grad L^T``, see ``docs/errata.md``) evaluated at each replica's current weights::

      C(w) = c(P, S) [ (1/P) sum_mu r_mu^2 x_mu x_mu^T - g g^T ],  r = X w - y,  g = X^T r / P,

  with ``c(P, S)`` the App. C prefactor (:func:`theory.noise_prefactor`). The noise is drawn
  without forming ``C(w)`` (see :func:`multiplicative_noise`).

Conventions: ``X`` (P, N) one row per sample, ``y`` (P,), replicas are the rows of ``W`` (R, N).

Single precision (``precision="float32"`` of :func:`run_sgf`): :func:`sgf_kernel_f32` runs the
same Euler steps on float32 deviations, as
:func:`~weightdyn.single_layer.simulate.sgd_kernel_f32` does for SGD: multiplicative noise on
``dw = w - w_ref`` with the residuals at ``w_ref`` formed in float64 (``x_mu.w - y_mu =
x_mu.dw + r*_mu``, nothing cancels), additive noise on the eigenbasis deviation ``z`` from w*;
the moments stay float64.

Randomness and reproducibility: the kernel (:func:`sgf_kernel`) draws its own standard normals
from the counter-based stream of :mod:`weightdyn.counter_rng` (ziggurat normals), one stream per
replica keyed by one draw of the caller's :class:`numpy.random.Generator`
(:func:`~weightdyn.counter_rng.replica_keys`): step ``t`` of replica ``r`` uses the normals
``t k .. t k + k - 1`` of its stream, with ``k`` the number of noise components (the rank of
``C(w*)`` for additive noise, ``P`` for multiplicative; :func:`~weightdyn.counter_rng.normals`
gives them). The moments are summed inside the kernel
as in :func:`~weightdyn.single_layer.simulate.sgd_kernel` and the replicas are split over numba's
threads, so results are bit-identical for any ``chunk_steps`` and any thread count. The
accumulated moments have the layout of :class:`weightdyn.single_layer.simulate.SGDResult`, so
:func:`weightdyn.stats.group_covariances` and :func:`weightdyn.stats.eigenvalues_with_se` (and
``datasets.sgd_dataset``) apply unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit, prange
from numpy.typing import ArrayLike, NDArray

from weightdyn.counter_rng import normal
from weightdyn.observables import Observables, in_basis
from weightdyn.sgd import engine
from weightdyn.sgd.engine import (
    RECORD_GROUP,
    Record,
    Schedule,
    Settings,
    SGDResult,
    State,
    Update,
    VectorKernel,
    divergence_bound,
)
from weightdyn.single_layer import theory
from weightdyn.single_layer.simulate import (
    SAMPLING_MODES,
    Deviations,
    _check_precision,
    _close_deviation,
    _close_replica,
    _record_deviation,
    _record_state,
)

__all__ = [
    "NOISE_MODES",
    "SGFKernel",
    "SGFKernelF32",
    "SGFResult",
    "covariance_sqrt",
    "euler_stationary_covariance",
    "expected_frobenius_error",
    "multiplicative_noise",
    "run_sgf",
    "sgf_kernel",
    "sgf_kernel_f32",
    "sgf_reference_chain",
]

NOISE_MODES = ("additive", "multiplicative")

FloatArray = NDArray[np.float64]


def _check_choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {name}={value!r}")
    return str(value)


# --------------------------------------------------------------------------- noise draws


def covariance_sqrt(C: ArrayLike, rtol: float | None = None) -> FloatArray:
    """Square root ``B`` (N, k) with ``B B^T = C`` of a symmetric PSD matrix, from ``eigh``.

    Only the ``k`` eigenvalues above ``rtol * max|c|`` (default ``N * machine eps``) are kept, so
    rank-deficient ``C`` (Eq. 16: ``N >= P``, or the range of ``H`` only) is fine where a Cholesky
    factorisation would fail. ``xi = B zeta`` with ``zeta ~ N(0, 1_k)`` has covariance ``C``.
    """
    C = np.asarray(C, dtype=float)
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError(f"C must be a square matrix, got shape {C.shape}")
    c, V = np.linalg.eigh(0.5 * (C + C.T))
    if rtol is None:
        rtol = max(C.shape[0], 1) * float(np.finfo(float).eps)
    keep = c > rtol * (np.max(np.abs(c)) if c.size else 0.0)
    return V[:, keep] * np.sqrt(c[keep])


def multiplicative_noise(
    X: ArrayLike,
    y: ArrayLike,
    W: ArrayLike,
    batch_size: int,
    sampling: str,
    rng: np.random.Generator,
) -> FloatArray:
    """One draw ``xi_r ~ N(0, C(w_r))`` per replica (rows of ``W``, shape (R, N)), Eq. 14.

    Construction from ``P`` standard normals ``z`` per replica, without forming ``C(w)``::

        xi = sqrt(c / P) X^T [ r * (z - mean(z)) ],   r = X w - y .

    Its covariance is ``(c/P) X^T D Pi D X`` with ``D = diag(r)`` and the centring projector
    ``Pi = 1 - 1 1^T / P`` (``Cov(z - mean z) = Pi``), i.e.
    ``c [(1/P) X^T diag(r^2) X - (1/P^2) X^T r r^T X] = c [(1/P) sum r_mu^2 x_mu x_mu^T - g g^T]``
    with ``g = grad L = X^T r / P``: exactly ``C(w)`` of Eq. 14 (= corrected Eq. 15), for the
    App. C prefactor ``c = c(P, S)`` of :func:`theory.noise_prefactor`. (Centring the weights
    makes the extra ``(P+1)``-th normal of a ``- g z0`` construction unnecessary.)
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    W = np.atleast_2d(np.asarray(W, dtype=float))
    _check_choice("sampling", sampling, SAMPLING_MODES)
    P, N = X.shape
    if W.shape[1] != N:
        raise ValueError(f"W must have shape (R, {N}), got {W.shape}")
    pref = theory.noise_prefactor(P, batch_size, sampling)
    z = rng.standard_normal((W.shape[0], P))
    z -= z.mean(axis=1, keepdims=True)
    r = W @ X.T - y
    return np.sqrt(pref / P) * ((r * z) @ X)


# ------------------------------------------------------------------------------ kernel


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _additive_step(z, decay, noise_T, zeta):
    """``z <- decay * z + zeta @ noise_T``: one Euler step of Eq. 13 with ``C(w*)`` (Eq. 17) in
    the eigenbasis of H (``noise_T = sqrt(lr dt) B^T``, ``B B^T = V^T C V``). Four noise rows
    per load and store of ``z``."""
    k, N = noise_T.shape
    k4 = k - k % 4
    for i in range(N):
        z[i] *= decay[i]
    for j in range(0, k4, 4):
        b0, b1, b2, b3 = noise_T[j], noise_T[j + 1], noise_T[j + 2], noise_T[j + 3]
        a0, a1, a2, a3 = zeta[j], zeta[j + 1], zeta[j + 2], zeta[j + 3]
        for i in range(N):
            z[i] += (a0 * b0[i] + a1 * b1[i]) + (a2 * b2[i] + a3 * b3[i])
    for j in range(k4, k):
        b, a = noise_T[j], zeta[j]
        for i in range(N):
            z[i] += a * b[i]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _multiplicative_step(X, y, w, drift, amp, zeta, coef, zero):
    """``w <- w - X^T [r * (drift - amp (zeta - mean zeta))]``, ``r = X w - y``: one Euler step
    of Eq. 13 with ``C(w)`` (Eq. 14/15) drawn as in :func:`multiplicative_noise`
    (``drift = dt / P``, ``amp = sqrt(lr dt c / P)``). Four samples per load of ``w``.
    ``zero``: 0 in the precision of the dot products (0.0, or ``np.float32(0)`` for
    :func:`sgf_kernel_f32`, whose ``w`` is the deviation from the reference)."""
    P, N = X.shape
    P4 = P - P % 4
    z_mean = zero
    for mu in range(P):
        z_mean += zeta[mu]
    z_mean /= P
    for mu in range(0, P4, 4):
        x0, x1, x2, x3 = X[mu], X[mu + 1], X[mu + 2], X[mu + 3]
        a0 = a1 = a2 = a3 = zero
        for i in range(N):
            wi = w[i]
            a0 += x0[i] * wi
            a1 += x1[i] * wi
            a2 += x2[i] * wi
            a3 += x3[i] * wi
        coef[mu] = (a0 - y[mu]) * (drift - amp * (zeta[mu] - z_mean))
        coef[mu + 1] = (a1 - y[mu + 1]) * (drift - amp * (zeta[mu + 1] - z_mean))
        coef[mu + 2] = (a2 - y[mu + 2]) * (drift - amp * (zeta[mu + 2] - z_mean))
        coef[mu + 3] = (a3 - y[mu + 3]) * (drift - amp * (zeta[mu + 3] - z_mean))
    for mu in range(P4, P):
        xs = X[mu]
        a = zero
        for i in range(N):
            a += xs[i] * w[i]
        coef[mu] = (a - y[mu]) * (drift - amp * (zeta[mu] - z_mean))
    for mu in range(0, P4, 4):
        x0, x1, x2, x3 = X[mu], X[mu + 1], X[mu + 2], X[mu + 3]
        c0, c1, c2, c3 = coef[mu], coef[mu + 1], coef[mu + 2], coef[mu + 3]
        for i in range(N):
            w[i] -= (c0 * x0[i] + c1 * x1[i]) + (c2 * x2[i] + c3 * x3[i])
    for mu in range(P4, P):
        xs, cs = X[mu], coef[mu]
        for i in range(N):
            w[i] -= cs * xs[i]


@njit(cache=True, inline="always")
def _step_normals(key, step, zeta):
    """The normals ``step k .. step k + k - 1`` of the stream ``key`` into ``zeta`` (k,)."""
    k = zeta.shape[0]
    base = np.uint64(step) * np.uint64(k)
    for j in range(k):
        zeta[j] = normal(key, base + np.uint64(j))


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, parallel=True)
def sgf_kernel(
    X, y, W, multiplicative, decay, noise_T, drift, amp, keys, step0, n, thin, ref, sum_dw,
    sum_dwdw, rec, bound,
):  # fmt: skip
    """Advance ``R`` SGF replicas by ``n`` Euler-Maruyama steps of Eq. 13 in place.

    Parameters
    ----------
    X, y : (P, N), (P,) float64 training data (used by the multiplicative model only).
    W : (R, N) float64, C-contiguous, the state, updated in place: the weights ``w`` for
        ``multiplicative``, the eigenbasis coordinates ``z = V^T (w - w*)`` otherwise.
    multiplicative : bool. True: noise ``C(w)`` (Eq. 14/15), ``k = P`` normals per step and
        :func:`_multiplicative_step` with ``drift``, ``amp``. False: noise ``C(w*)`` (Eq. 17),
        ``k = noise_T.shape[0]`` normals per step and :func:`_additive_step` with ``decay``
        (N,) and ``noise_T`` (k, N).
    keys : (R,) uint64 replica keys (:func:`weightdyn.counter_rng.replica_keys`); step ``t``
        of replica ``r`` uses the normals ``t k .. t k + k - 1`` of its stream
        (:func:`weightdyn.counter_rng.normals`).
    step0 : the global index of this call's first step.
    thin : a record after every ``thin``-th step of this call.
    ref : (N,) the state's reference: a record is ``dw = W[r] - ref`` (``w_ref``, or
        ``-V^T (w* - w_ref)`` for the eigenbasis).
    sum_dw, sum_dwdw, rec, bound : as in :func:`weightdyn.single_layer.simulate.sgd_kernel`
        (moments of ``dw`` per replica, by one matrix product per ``RECORD_GROUP`` records;
        ``rec[k]`` holds the state at record ``k``; divergence of the state).

    Returns
    -------
    diverged : (R,) bool.

    As for ``sgd_kernel``, results depend only on the keys and the global step index, so they
    are bit-identical for any thread count and any split of the steps into calls of whole
    record groups.
    """
    R, N = W.shape
    k = X.shape[0] if multiplicative else noise_T.shape[0]
    diverged = np.zeros(R, np.bool_)
    for r in prange(R):
        zeta = np.empty(k, np.float64)
        coef = np.empty(X.shape[0], np.float64)
        group = np.empty((RECORD_GROUP, N), np.float64)
        w, key = W[r], keys[r]
        k_group = k_rec = 0
        for t in range(n):
            _step_normals(key, step0 + t, zeta)
            if multiplicative:
                _multiplicative_step(X, y, w, drift, amp, zeta, coef, 0.0)
            else:
                _additive_step(w, decay, noise_T, zeta)
            if (t + 1) % thin == 0:
                ok, k_group, k_rec = _record_state(
                    w, ref, bound, r, group, k_group, sum_dw, sum_dwdw, rec, k_rec
                )
                if not ok:
                    diverged[r] = True
                    break
        if not diverged[r]:
            diverged[r] = _close_replica(w, bound, r, group, k_group, sum_dw, sum_dwdw)
    return diverged


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, parallel=True)
def sgf_kernel_f32(
    X, y_dev, D, multiplicative, decay, noise_T, drift, amp, keys, step0, n, thin, origin, ref,
    sum_dw, sum_dwdw, rec, bound,
):  # fmt: skip
    """:func:`sgf_kernel` in single precision: Euler-Maruyama steps of Eq. 13 on float32
    deviations ``d`` of the state ``origin + d`` (float64).

    Multiplicative noise: ``origin = w_ref`` and ``d = w - w_ref``; the residual
    ``x_mu.w - y_mu = x_mu.d - y_dev_mu`` with ``y_dev = y - X w_ref`` formed in float64 and
    stored in float32 (as in :func:`~weightdyn.single_layer.simulate.sgd_kernel_f32`), so
    :func:`_multiplicative_step` runs unchanged on ``d``. Additive noise: the eigenbasis
    coordinates ``z = V^T (w - w*)`` are a deviation from w* already (``origin = 0``) and
    :func:`_additive_step` runs on them. The normals are the float64 kernel's, rounded to float32.

    Parameters
    ----------
    X, y_dev : (P, N), (P,) float32. D : (R, N) float32 deviations, C-contiguous, in place.
    decay, noise_T, drift, amp : float32 (:func:`sgf_kernel`'s).
    origin, ref : (N,) float64: the state ``origin + d`` is checked against ``bound`` and
        stored in ``rec``; the record ``dw = (origin + d) - ref``, formed as
        ``d - (ref - origin)`` in float64, enters the float64 moments.
    The other arguments and the returned diverged flags (R,) are :func:`sgf_kernel`'s; results
    are bit-identical for any thread count and any split of the steps into calls.
    """
    R, N = D.shape
    k = X.shape[0] if multiplicative else noise_T.shape[0]
    diverged = np.zeros(R, np.bool_)
    shift = ref - origin
    zero = np.float32(0.0)
    for r in prange(R):
        zeta = np.empty(k, np.float32)
        coef = np.empty(X.shape[0], np.float32)
        group = np.empty((RECORD_GROUP, N), np.float64)
        d = D[r]
        k_group = k_rec = 0
        for t in range(n):
            _step_normals(keys[r], step0 + t, zeta)
            if multiplicative:
                _multiplicative_step(X, y_dev, d, drift, amp, zeta, coef, zero)
            else:
                _additive_step(d, decay, noise_T, zeta)
            if (t + 1) % thin == 0:
                ok, k_group, k_rec = _record_deviation(
                    d, origin, shift, bound, r, group, k_group, sum_dw, sum_dwdw, rec, k_rec
                )
                if not ok:
                    diverged[r] = True
                    break
        if not diverged[r]:
            diverged[r] = _close_deviation(d, origin, bound, r, group, k_group, sum_dw, sum_dwdw)
    return diverged


# ------------------------------------------------------------------------- noise models


@dataclass(frozen=True)
class _Additive:
    """Additive noise (Eq. 17) in the eigenbasis of H: ``z = V^T (w - w*)``, ``k`` the rank of
    ``C(w*)``, ``B`` (N, k) with ``B B^T = V^T C V``."""

    omega: FloatArray
    V: FloatArray
    B: FloatArray
    w_star: FloatArray

    @classmethod
    def build(cls, X: FloatArray, y: FloatArray, S: int, sampling: str) -> _Additive:
        H = theory.hessian(X)
        omega, V = np.linalg.eigh(0.5 * (H + H.T))
        C = theory.noise_covariance(X, y, S, sampling)
        return cls(omega, V, covariance_sqrt(V.T @ C @ V), theory.min_norm_solution(X, y))


@dataclass(frozen=True)
class SGFKernel(VectorKernel):
    """:func:`sgf_kernel` behind the engine's kernel interface (:mod:`weightdyn.sgd`): Euler
    steps of Eq. 13 with the arguments of :func:`sgf_kernel`; records ``dw = state - ref``."""

    X: np.ndarray
    y: np.ndarray
    multiplicative: bool
    decay: np.ndarray
    noise_T: np.ndarray
    drift: float
    amp: float
    ref: np.ndarray
    lower_triangle: bool = True

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """``n_steps`` Euler steps of every replica from global step ``step0``, recording."""
        sums = record.block_sums()
        state.diverged |= sgf_kernel(
            self.X, self.y, state.W, self.multiplicative, self.decay, self.noise_T, self.drift,
            self.amp, state.keys, step0, n_steps, record.thin, self.ref, *sums, record.rec,
            record.bound,
        )  # fmt: skip
        record.count_every_replica(n_steps)


@dataclass(frozen=True)
class SGFKernelF32(Deviations, VectorKernel):
    """:func:`sgf_kernel_f32` behind the engine's kernel interface: the Euler steps of
    :class:`SGFKernel` on float32 deviations from ``origin`` (:class:`Deviations`; built by
    :meth:`of`); records ``dw = origin + d - ref``, moments in float64."""

    X: np.ndarray
    y_dev: np.ndarray
    multiplicative: bool
    decay: np.ndarray
    noise_T: np.ndarray
    drift: np.float32
    amp: np.float32
    ref: np.ndarray
    origin: np.ndarray
    lower_triangle: bool = True

    @classmethod
    def of(cls, k: SGFKernel) -> SGFKernelF32:
        """The single-precision kernel of ``k``: deviations from ``origin = k.ref`` (the
        weights' reference) for multiplicative noise, with ``y - X ref`` formed in float64;
        from ``origin = 0`` for additive noise, whose eigenbasis state is a deviation from w*
        already. Arrays and step constants are stored in float32."""
        f32 = np.float32
        origin = k.ref if k.multiplicative else np.zeros_like(k.ref)
        y_dev = (k.y - k.X @ origin).astype(f32)
        noise_T = np.ascontiguousarray(k.noise_T, dtype=f32)
        return cls(k.X.astype(f32), y_dev, k.multiplicative, k.decay.astype(f32), noise_T,
                   f32(k.drift), f32(k.amp), k.ref, origin)  # fmt: skip

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """``n_steps`` Euler steps of every replica's deviation from global step ``step0``."""
        sums = record.block_sums()
        state.diverged |= sgf_kernel_f32(
            self.X, self.y_dev, state.W, self.multiplicative, self.decay, self.noise_T,
            self.drift, self.amp, state.keys, step0, n_steps, record.thin, self.origin, self.ref,
            *sums, record.rec, record.bound,
        )  # fmt: skip
        record.count_every_replica(n_steps)


def _kernel_model(X, y, lr, S, sampling, dt, noise, W0, w_ref):
    """The kernel (:class:`SGFKernel`), its initial state (the weights, or their eigenbasis
    deviation ``z = V^T (W0 - w*)`` for additive noise) and the eigenbasis ``V`` (None for
    multiplicative noise)."""
    N = X.shape[1]
    if noise == "multiplicative":
        P = X.shape[0]
        amp = float(np.sqrt(lr * dt * theory.noise_prefactor(P, S, sampling) / P))
        return SGFKernel(X, y, True, np.empty(0), np.empty((0, N)), dt / P, amp, w_ref), W0, None
    m = _Additive.build(X, y, S, sampling)
    state = np.ascontiguousarray((W0 - m.w_star) @ m.V)
    noise_T = np.ascontiguousarray(np.sqrt(lr * dt) * m.B.T)
    ref = -((m.w_star - w_ref) @ m.V)  # dw in the eigenbasis = z - ref
    return SGFKernel(X, y, False, 1.0 - dt * m.omega, noise_T, 0.0, 0.0, ref), state, m.V


def sgf_reference_chain(
    X: ArrayLike,
    y: ArrayLike,
    w0: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: str,
    dt: float,
    zeta: ArrayLike,
    noise: str = "additive",
) -> FloatArray:
    """Readable one-chain Euler-Maruyama of Eq. 13 in weight space on given normals.

    ``zeta`` (n_steps, k): the standard normals of each step (k = rank of ``C(w*)``,
    ``_Additive.build(...).B.shape[1]``, for additive noise; ``k = P`` for multiplicative).
    Additive (Eq. 17): ``w <- w - dt H (w - w*) + sqrt(lr dt) V B zeta_t``. Multiplicative
    (Eq. 14/15): ``w <- w - dt g + sqrt(lr dt c / P) X^T [r * (zeta_t - mean zeta_t)]`` with
    ``r = X w - y``, ``g = X^T r / P``. Returns the weights (n_steps + 1, N), ``w0`` first.
    """
    noise = _check_choice("noise", noise, NOISE_MODES)
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    w = np.array(w0, dtype=float)
    zeta = np.asarray(zeta, dtype=float)
    P = X.shape[0]
    out = [w.copy()]
    if noise == "additive":
        m = _Additive.build(X, y, batch_size, sampling)
        H = theory.hessian(X)
        for z in zeta:
            w = w - dt * H @ (w - m.w_star) + np.sqrt(lr * dt) * (m.V @ (m.B @ z))
            out.append(w)
    else:
        c = theory.noise_prefactor(P, batch_size, sampling)
        for z in zeta:
            r = X @ w - y
            xi = np.sqrt(c / P) * X.T @ (r * (z - z.mean()))
            w = w - dt * X.T @ r / P + np.sqrt(lr * dt) * xi
            out.append(w)
    return np.array(out)


# ------------------------------------------------------------------------------ driver


@dataclass
class SGFResult(SGDResult):
    """:class:`SGDResult` of an SGF run; step counts are Euler steps of size ``dt``.

    ``dt`` is the Euler-Maruyama step in SDE time (``t = lr * tau``); ``noise`` the noise model.
    Moments are of ``dw = w - w_ref`` per (replica, time block) group, as for SGD.
    """

    noise: str = "additive"
    dt: float = 0.0


def _validate(X, y, w_ref, w_init, lr, dt, batch_size, sampling):
    """Checked float64 arrays ``(X, y, w_ref, W0)``, ``dt`` and ``S``."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    w_ref = np.ascontiguousarray(w_ref, dtype=np.float64)
    W0 = np.array(w_init, dtype=np.float64, order="C", copy=True)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (P, N), got {X.shape}")
    P, N = X.shape
    if W0.ndim != 2 or W0.shape[1] != N:
        raise ValueError(f"w_init must have shape (R, N) = (R, {N}), got {W0.shape}")
    if y.shape != (P,) or w_ref.shape != (N,):
        raise ValueError(f"y must have shape ({P},) and w_ref ({N},), got {y.shape}, {w_ref.shape}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got lr={lr!r}")
    dt = float(lr if dt is None else dt)
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a finite number > 0 (SDE time per Euler step), got dt={dt!r}")
    S = int(batch_size)
    if S < 1 or (sampling == "without" and S > P):
        raise ValueError(
            f"batch_size must satisfy 1 <= batch_size (<= P = {P} without replacement), "
            f"got batch_size={batch_size!r}"
        )
    return X, y, w_ref, W0, dt, S


def run_sgf(
    X: ArrayLike,
    y: ArrayLike,
    w_ref: ArrayLike,
    w_init: ArrayLike,
    update: Update,
    schedule: Schedule,
    rng: np.random.Generator,
    *,
    noise: str = "additive",
    dt: float | None = None,
    progress: Callable[[str], None] | None = None,
    observables: Observables | None = None,
    precision: str = "float64",
) -> SGFResult:
    """Integrate Eq. 13 for R replicas (rows of ``w_init``) and accumulate weight moments.

    Same protocol, arguments and outputs as :func:`weightdyn.single_layer.simulate.run_sgd`,
    with steps being Euler-Maruyama steps of size ``dt`` in SDE time (default ``dt = update.lr``:
    one SGD step per Euler step; SDE time ``t = lr * tau``). ``update``
    (:class:`weightdyn.sgd.Update`) gives ``lr``, the ``batch_size`` and the ``sampling`` of the
    noise covariance. ``schedule`` (:class:`weightdyn.sgd.Schedule`): ``burnin_steps`` steps run
    first; then ``sample_steps`` steps (a multiple of ``n_blocks * thin``) are split into
    ``n_blocks`` time blocks, and every ``thin``-th step ``dw = w - w_ref`` enters ``sum_dw`` and
    ``sum_dwdw`` of its (replica, block) group, inside the kernel (:func:`sgf_kernel`); the plan,
    streams, sums, divergence and hook are the engine's (:func:`weightdyn.sgd.run`, kernel
    :class:`SGFKernel`).

    ``noise="additive"`` uses ``C(w*)`` (Eq. 17), ``noise="multiplicative"`` uses ``C(w)``
    (Eq. 14/15) at each replica's current weights; see the module docstring. ``sampling``
    selects the App. C prefactor of ``C``. A replica whose state (weights, or their eigenbasis
    deviation from ``w*`` for additive noise) leaves ``1e6 (max|w_ref| + 1)`` or turns
    non-finite stops the run with ``diverged=True`` and NaN moments.

    ``schedule.chunk_steps`` sets how often progress is reported (and, with an observable hook,
    the records held at a time); it is rounded to a multiple of ``32 thin`` and changes no result
    bit, nor does numba's thread count.

    ``observables``: an optional hook on ``dw = w - w_ref`` (weight-space coordinates), called on
    each sampling chunk's records as in :func:`~weightdyn.single_layer.simulate.run_sgd` (additive
    noise records eigenbasis coordinates; the hook is rotated to them,
    :func:`weightdyn.observables.in_basis`); it changes no other result bit.

    ``precision``: ``"float64"`` (default) or ``"float32"``: the same steps on float32
    deviations (:func:`sgf_kernel_f32`: from ``w_ref`` for multiplicative noise, with the
    residuals at ``w_ref`` formed in float64; the eigenbasis deviation from w* for additive
    noise), moments and records in float64, the same normals rounded to float32.

    Raises
    ------
    ValueError
        naming the argument and the allowed values (``noise``, ``sampling``, ``dt``, ``lr``,
        ``precision``, shapes, step counts).
    """
    single = _check_precision(precision)
    noise = _check_choice("noise", noise, NOISE_MODES)
    sampling = _check_choice("sampling", update.sampling, SAMPLING_MODES)
    update.require_plain("single_layer.sgf.run_sgf")
    lr = update.lr
    X, y, w_ref, W0, dt, S = _validate(X, y, w_ref, w_init, lr, dt, update.batch_size, sampling)
    plan = schedule.plan()
    kernel, state, V = _kernel_model(X, y, lr, S, sampling, dt, noise, W0, w_ref)
    hook = observables
    if hook is not None and V is not None:
        hook = in_basis(hook, V)  # additive noise records eigenbasis coordinates
    bound = divergence_bound(w_ref)
    label = f"SGF ({noise}, float32)" if single else f"SGF ({noise})"
    settings = Settings(plan, bound, label, progress, hook)
    if single:
        kernel = SGFKernelF32.of(kernel)
    run = kernel.start(state, rng, 0, bound) if single else State.start(state, rng)
    moments = engine.run(kernel, run, settings)
    values = kernel.values(run.W) if single else run.W  # weights, or eigenbasis coordinates
    with np.errstate(all="ignore"):  # a diverged state may hold inf (float32 soon overflows)
        final_W = values if V is None else (values - kernel.ref) @ V.T + w_ref
    result = SGFResult.grouped(moments, plan, final_W, noise=noise, dt=dt)
    if V is not None and not result.diverged:  # eigenbasis moments back to weight space
        result.sum_dw = result.sum_dw @ V.T
        result.sum_dwdw = np.matmul(np.matmul(V, result.sum_dwdw), V.T)
    return result


# ------------------------------------------------------------------- discretisation, errors


def euler_stationary_covariance(
    H: ArrayLike, C: ArrayLike, lr: float, dt: float, *, rtol: float | None = None
) -> FloatArray:
    """Exact stationary covariance of the additive-noise Euler-Maruyama chain of step ``dt``.

    The chain ``dw <- (1 - dt H) dw + sqrt(lr dt) xi`` has ``M = A M A^T + lr dt C`` with
    ``A = 1 - dt H`` (discrete Lyapunov equation), i.e. in the eigenbasis of ``H``::

        Mt_ij = lr Ct_ij / (omega_i + omega_j - dt omega_i omega_j),

    which tends to Eq. 30 (``lr Ct_ij / (omega_i + omega_j)``) as ``dt -> 0``; the relative
    difference is about ``dt (omega_i omega_j) / (omega_i + omega_j)``. For ``dt = lr`` this is
    also the exact stationary covariance of SGD with additive noise ``C`` (Eq. 11). Pairs with
    a non-positive denominator (unstable, ``dt omega > 2``) or in the null space of ``H`` give
    NaN and 0 respectively.
    """
    H = np.asarray(H, dtype=float)
    C = np.asarray(C, dtype=float)
    omega, V = np.linalg.eigh(0.5 * (H + H.T))
    Ct = V.T @ (0.5 * (C + C.T)) @ V
    denom = omega[:, None] + omega[None, :] - dt * omega[:, None] * omega[None, :]
    if rtol is None:
        rtol = max(omega.size, 1) * float(np.finfo(float).eps)
    thr = rtol * (np.max(np.abs(omega)) if omega.size else 0.0)
    null = (omega[:, None] + omega[None, :]) <= thr
    Mt = np.full_like(Ct, np.nan)
    ok = (denom > 0) & ~null
    Mt[ok] = lr * Ct[ok] / denom[ok]
    Mt[null] = 0.0
    M = V @ Mt @ V.T
    return 0.5 * (M + M.T)


def expected_frobenius_error(
    H: ArrayLike, C: ArrayLike, lr: float, sample_time: float, replicas: int
) -> float:
    """Expected relative Frobenius error of a time-averaged estimate of Eq. 30's ``M``.

    For the stationary Ornstein-Uhlenbeck process of Eq. 13 with additive noise, the estimate
    ``M_hat = (1/(R T)) sum_r int_0^T dw dw^T dt`` (Gaussian process, long-time limit) has, in
    the eigenbasis of ``H`` with ``K(s) = exp(-Omega s) Mt`` (Isserlis)::

        E ||M_hat - M||_F^2 = (2 / (R T)) sum_ij (Mt_ii Mt_jj + Mt_ij^2) / (omega_i + omega_j).

    Returns ``sqrt(E||M_hat - M||^2) / ||M||_F`` for ``T = sample_time`` (SDE time units) and
    ``R = replicas``. Used to choose run lengths and statistical tolerances; valid when the
    recording interval is short against ``1/omega_max`` and the burn-in long against
    ``1/omega_min``. Null-space pairs (``omega_i + omega_j = 0``) are skipped.
    """
    H = np.asarray(H, dtype=float)
    M = theory.stationary_covariance(H, C, lr)
    omega, V = np.linalg.eigh(0.5 * (H + H.T))
    Mt = V.T @ M @ V
    d = np.diag(Mt)
    denom = omega[:, None] + omega[None, :]
    keep = denom > max(omega.size, 1) * float(np.finfo(float).eps) * np.max(np.abs(omega))
    terms = np.where(keep, (np.outer(d, d) + Mt**2) / np.where(keep, denom, 1.0), 0.0)
    return float(np.sqrt(2.0 * terms.sum() / (replicas * sample_time)) / np.linalg.norm(M))
