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
All randomness comes from a caller-supplied :class:`numpy.random.Generator`; standard normals are
drawn in fixed blocks of steps, so the trajectories do not depend on ``chunk_steps`` (the
accumulated sums agree to rounding). The accumulated
moments have the layout of :class:`weightdyn.single_layer.simulate.SGDResult`, so
:func:`weightdyn.stats.group_covariances` and :func:`weightdyn.stats.eigenvalues_with_se` (and
``datasets.sgd_dataset``) apply unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from weightdyn.observables import Observables, SeriesRecorder, in_basis, series_fields
from weightdyn.single_layer import theory
from weightdyn.single_layer.simulate import SAMPLING_MODES, SGDResult
from weightdyn.streams import ProgressReporter

__all__ = [
    "NOISE_MODES",
    "SGFResult",
    "covariance_sqrt",
    "euler_stationary_covariance",
    "expected_frobenius_error",
    "multiplicative_noise",
    "run_sgf",
]

NOISE_MODES = ("additive", "multiplicative")

FloatArray = NDArray[np.float64]

#: upper bound on the number of normals drawn per RNG block
_RNG_BLOCK_MAX_NORMALS = 1 << 20
#: upper bound on the number of steps per RNG block
_RNG_BLOCK_MAX_STEPS = 256
#: divergence threshold, as in simulate.py
_DIVERGENCE_FACTOR = 1e6


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


class _NormalStream:
    """Standard normals (n, R, k) served from ``rng`` in fixed blocks of steps.

    Drawn in single precision (``standard_normal(dtype=float32)``) and returned as float64.

    The sequence of draws depends only on (R, k), never on how the consumer slices it.
    """

    def __init__(self, rng: np.random.Generator, R: int, k: int):
        self.rng = rng
        self.shape = (R, k)
        self.block_steps = int(
            max(1, min(_RNG_BLOCK_MAX_STEPS, _RNG_BLOCK_MAX_NORMALS // max(1, R * k)))
        )
        self.buf = np.empty((0, R, k))
        self.pos = 0

    def take(self, n: int) -> FloatArray:
        parts = []
        while n > 0:
            if self.pos == self.buf.shape[0]:
                # float32 ziggurat draws are about 2x faster than float64 ones (the RNG dominates
                # the cost of a step); the noise is then used in float64 arithmetic
                draw = self.rng.standard_normal((self.block_steps, *self.shape), dtype=np.float32)
                self.buf = draw.astype(np.float64)
                self.pos = 0
            m = min(n, self.buf.shape[0] - self.pos)
            parts.append(self.buf[self.pos : self.pos + m])
            self.pos += m
            n -= m
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


# ------------------------------------------------------------------------------ driver


@dataclass
class SGFResult(SGDResult):
    """:class:`SGDResult` of an SGF run; step counts are Euler steps of size ``dt``.

    ``dt`` is the Euler-Maruyama step in SDE time (``t = lr * tau``); ``noise`` the noise model.
    Moments are of ``dw = w - w_ref`` per (replica, time block) group, as for SGD.
    """

    noise: str = "additive"
    dt: float = 0.0


class _Additive:
    """Additive noise (Eq. 17), integrated in the eigenbasis of H: z = V^T (w - w*)."""

    def __init__(self, X, y, lr, S, sampling, dt, W, w_ref):
        H = theory.hessian(X)
        w_star = theory.min_norm_solution(X, y)
        omega, self.V = np.linalg.eigh(0.5 * (H + H.T))
        C = theory.noise_covariance(X, y, S, sampling)
        B = covariance_sqrt(self.V.T @ C @ self.V)  # (N, k) in the eigenbasis
        self.k = B.shape[1]
        self.noise_T = np.sqrt(lr * dt) * B.T  # (k, N): zeta @ noise_T
        self.decay = 1.0 - dt * omega  # (N,)
        self.z = (W - w_star) @ self.V
        self.shift = (w_star - w_ref) @ self.V  # dw in the eigenbasis = z + shift

    def advance(self, zeta: FloatArray) -> None:
        z = self.z
        for t in range(zeta.shape[0]):
            z *= self.decay
            z += zeta[t] @ self.noise_T

    def dw(self) -> FloatArray:
        return self.z + self.shift  # eigenbasis coordinates; rotated back at the end

    def weights(self, w_ref: FloatArray) -> FloatArray:
        return (self.z + self.shift) @ self.V.T + w_ref


class _Multiplicative:
    """Multiplicative noise C(w) (Eq. 14), drawn as in :func:`multiplicative_noise`."""

    def __init__(self, X, y, lr, S, sampling, dt, W, w_ref):
        self.X, self.y = X, y
        P = X.shape[0]
        self.k = P
        pref = theory.noise_prefactor(P, S, sampling)
        self.drift = dt / P
        self.amp = np.sqrt(lr * dt * pref / P)
        self.W = W.copy()
        self.w_ref = w_ref

    def advance(self, zeta: FloatArray) -> None:
        W, X, y = self.W, self.X, self.y
        for t in range(zeta.shape[0]):
            z = zeta[t]
            z = z - z.mean(axis=1, keepdims=True)
            r = W @ X.T - y  # (R, P)
            # w <- w - dt X^T r / P + sqrt(lr dt c / P) X^T (r * z_centred)
            W -= (r * (self.drift - self.amp * z)) @ X

    def dw(self) -> FloatArray:
        return self.W - self.w_ref

    def weights(self, w_ref: FloatArray) -> FloatArray:
        return self.W.copy()


def run_sgf(
    X: ArrayLike,
    y: ArrayLike,
    w_ref: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: str,
    w_init: ArrayLike,
    burnin_steps: int,
    sample_steps: int,
    thin: int,
    n_blocks: int,
    rng: np.random.Generator,
    *,
    noise: str = "additive",
    dt: float | None = None,
    chunk_steps: int = 4096,
    progress: Callable[[str], None] | None = None,
    observables: Observables | None = None,
) -> SGFResult:
    """Integrate Eq. 13 for R replicas (rows of ``w_init``) and accumulate weight moments.

    Same protocol and outputs as :func:`weightdyn.single_layer.simulate.run_sgd`, with steps
    being Euler-Maruyama steps of size ``dt`` in SDE time (default ``dt = lr``: one SGD step per
    Euler step; SDE time ``t = lr * tau``). ``burnin_steps`` steps run first; then
    ``sample_steps`` steps (a multiple of ``n_blocks * thin``) are split into ``n_blocks`` time
    blocks, and every ``thin``-th step ``dw = w - w_ref`` enters ``sum_dw`` and ``sum_dwdw`` of
    its (replica, block) group.

    ``noise="additive"`` uses ``C(w*)`` (Eq. 17), ``noise="multiplicative"`` uses ``C(w)``
    (Eq. 14) at each replica's current weights; see the module docstring. ``sampling`` selects
    the App. C prefactor of ``C``. A replica leaving ``1e6 (max|w_ref| + 1)`` or turning
    non-finite stops the run with ``diverged=True`` and NaN moments.

    ``observables``: an optional hook on ``dw = w - w_ref`` (weight-space coordinates), called on
    each sampling chunk's records as in :func:`~weightdyn.single_layer.simulate.run_sgd` (additive
    noise records eigenbasis coordinates; the hook is rotated to them,
    :func:`weightdyn.observables.in_basis`); it changes no other result bit.

    Raises
    ------
    ValueError
        naming the argument and the allowed values (``noise``, ``sampling``, ``dt``, ``lr``,
        shapes, step counts).
    """
    noise = _check_choice("noise", noise, NOISE_MODES)
    sampling = _check_choice("sampling", sampling, SAMPLING_MODES)
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
    thin, n_blocks = int(thin), int(n_blocks)
    burnin_steps, sample_steps = int(burnin_steps), int(sample_steps)
    if thin < 1 or n_blocks < 1 or burnin_steps < 0 or sample_steps < 1:
        raise ValueError("need thin >= 1, n_blocks >= 1, burnin_steps >= 0, sample_steps >= 1")
    if sample_steps % (n_blocks * thin) != 0:
        raise ValueError(
            f"sample_steps={sample_steps} must be a multiple of n_blocks*thin={n_blocks * thin}"
        )
    R = W0.shape[0]
    block_steps = sample_steps // n_blocks
    chunk = max(1, int(chunk_steps) // thin) * thin

    state_cls = _Additive if noise == "additive" else _Multiplicative
    state = state_cls(X, y, lr, S, sampling, dt, W0, w_ref)
    stream = _NormalStream(rng, R, state.k)

    G = R * n_blocks
    sum_dw = np.zeros((G, N))
    sum_dwdw = np.zeros((G, N, N))
    n_records = np.zeros(G, dtype=np.int64)
    group_replica = np.repeat(np.arange(R), n_blocks)
    group_block = np.tile(np.arange(n_blocks), R)
    with np.errstate(all="ignore"):
        bound = float(_DIVERGENCE_FACTOR * (np.max(np.abs(w_ref), initial=0.0) + 1.0))

    recorder = None
    if observables is not None:
        hook = in_basis(observables, state.V) if noise == "additive" else observables
        recorder = SeriesRecorder(hook, sample_steps // thin, R)

    def ok(dw: FloatArray) -> bool:
        with np.errstate(all="ignore"):
            return bool(np.all(np.abs(dw) <= bound))

    prog = ProgressReporter(progress, burnin_steps + sample_steps, R, f"SGF ({noise})")
    t_start = time.perf_counter()
    done = 0
    diverged = not ok(W0)

    with np.errstate(over="ignore", invalid="ignore"):
        pos = 0
        while not diverged and pos < burnin_steps:
            n = min(chunk, burnin_steps - pos)
            state.advance(stream.take(n))
            diverged = not ok(state.dw())
            pos += n
            done += n
            prog.update(done)
        # (R, n_blocks, ...) views of the group sums: group g = replica * n_blocks + block
        s1 = sum_dw.reshape(R, n_blocks, N)
        s2 = sum_dwdw.reshape(R, n_blocks, N, N)
        for b in range(n_blocks):
            pos = 0
            while not diverged and pos < block_steps:
                n_rec = min(chunk, block_steps - pos) // thin
                rec = np.empty((R, n_rec, N))
                for j in range(n_rec):
                    state.advance(stream.take(thin))
                    rec[:, j] = state.dw()
                pos += n_rec * thin
                done += n_rec * thin
                if not ok(rec):
                    diverged = True
                    break
                if recorder is not None:
                    recorder.add(rec.transpose(1, 0, 2))
                s1[:, b] += rec.sum(axis=1)
                s2[:, b] += np.matmul(rec.transpose(0, 2, 1), rec)
                n_records.reshape(R, n_blocks)[:, b] += n_rec
                prog.update(done)

    prog.update(done, force=True)
    if noise == "additive" and not diverged:
        V = state.V  # rotate the eigenbasis moments back to weight space
        sum_dw = sum_dw @ V.T
        sum_dwdw = np.matmul(np.matmul(V, sum_dwdw), V.T)
    if diverged:
        sum_dw[:] = np.nan
        sum_dwdw[:] = np.nan
    return SGFResult(
        sum_dw=sum_dw,
        sum_dwdw=sum_dwdw,
        n_records=n_records,
        group_replica=group_replica,
        group_block=group_block,
        diverged=diverged,
        burnin_steps=burnin_steps,
        sample_steps=sample_steps,
        thin=thin,
        replicas=R,
        final_W=state.weights(w_ref),
        elapsed_s=time.perf_counter() - t_start,
        noise=noise,
        dt=dt,
        **series_fields(recorder, thin),
    )


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
