"""Mini-batch SGD for ``R`` replicas of any :class:`~weightdyn.models.base.Model`.

One step of replica ``r`` is paper 000 Eqs. 10-11 with the network in place of ``w^T x``::

    theta <- theta - lr (1/S) sum_{mu in B} g^mu(theta),   g^mu = J_mu^T (f(x^mu) - y^mu),

on a mini-batch ``B`` of ``S`` indices drawn with or without replacement (App. C). Two engines
give the same trajectory from the same random draws:

* ``"numpy"``: any model, all replicas in one array operation per step through
  :meth:`Model.replica_gradients` (a loop over replicas for a model that does not override it);
* ``"kernel"``: a numba kernel for :class:`~weightdyn.models.DeepLinear` (any depth) and
  :class:`~weightdyn.models.OneHidden` (tanh, softplus), replicas split over numba's threads
  (``prange``), the moments accumulated inside it. ``"auto"`` takes the kernel when there is one.

Randomness: step ``t`` of replica ``r`` chooses its batch by the uniforms ``t S .. t S + S - 1``
of the replica's counter-based stream (:mod:`weightdyn.counter_rng`, key from one draw of the
caller's generator) through :func:`weightdyn.minibatch.draw_batch`. A replica's trajectory
depends only on its key and the global step index, never on the thread count or the chunking,
so kernel results are bit-identical for any of them.

Moments: after every ``thin``-th step, ``d = theta - theta_ref`` enters the per-(replica, time
block) sums ``sum_d`` and ``sum_dd`` (``d d^T`` flattened, C order). A replica whose parameters
leave ``[-bound, bound]`` (``bound = 1e6 (max|theta_ref| + 1)``) or turn non-finite at a record
is flagged ``diverged``, stops, and its sums are NaN.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numba import njit, prange
from numpy.typing import ArrayLike

from weightdyn.blas import one_blas_thread
from weightdyn.counter_rng import replica_keys, uniform, uniforms
from weightdyn.minibatch import draw_batch
from weightdyn.models.base import FloatArray, Model
from weightdyn.models.networks import DeepLinear, OneHidden
from weightdyn.single_layer.simulate import _within, batch_indices_from_uniforms
from weightdyn.streams import ProgressReporter

__all__ = [
    "KERNEL_ACTIVATIONS",
    "SGDRun",
    "kernel_spec",
    "reference_chain",
    "run_sgd",
    "sgd_kernel",
]

Engine = Literal["auto", "kernel", "numpy"]
SAMPLING_MODES = ("with", "without")
#: activation codes of the compiled one-hidden-layer gradient
KERNEL_ACTIVATIONS = {"tanh": 0, "softplus": 1}
_DEEP, _ONE_HIDDEN = 0, 1
_DIVERGENCE_FACTOR = 1e6


# ------------------------------------------------------------------------- model specs


def kernel_spec(model: Model) -> tuple[np.ndarray, int] | None:
    """``(spec, work_size)`` describing ``model`` to :func:`sgd_kernel`, or None if no kernel.

    Deep linear: ``[0, L, N_0 .. N_L, offset_0 .. offset_L]``; one hidden layer:
    ``[1, N_i, N_h, N_o, bias, activation code]``. ``work_size`` is the scratch per replica.
    """
    if isinstance(model, DeepLinear):
        spec = [_DEEP, model.depth, *model.widths, *model.offsets]
        return np.array(spec, np.int64), (model.depth + 3) * max(model.widths)
    if isinstance(model, OneHidden) and model.activation in KERNEL_ACTIVATIONS:
        act = KERNEL_ACTIVATIONS[model.activation]
        spec = [_ONE_HIDDEN, model.n_in, model.n_hidden, model.n_out, int(model.bias), act]
        return np.array(spec, np.int64), 4 * model.n_hidden + model.n_out
    return None


# ------------------------------------------------------------------------------ kernel


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _deep_linear_gradient(X, Y, theta, idx, spec, work, g):
    """``g = sum_{s} g^{idx_s}`` for ``f = W_L ... W_1 x``: forward pass into ``h`` (rows
    ``h_0 .. h_L``), backward ``delta_{l-1} = W_l^T delta_l``, ``dW_l += delta_l h_{l-1}^T``.
    ``W_l[a, b] = theta[off_l + a + N_l b]`` (column-major vec)."""
    L = spec[1]
    widths = spec[2 : 3 + L]
    offs = spec[3 + L : 4 + 2 * L]
    m = 0
    for w in widths:
        m = max(m, w)
    h = work[: (L + 1) * m].reshape((L + 1, m))
    delta = work[(L + 1) * m : (L + 2) * m]
    tmp = work[(L + 2) * m : (L + 3) * m]
    g[:] = 0.0
    for s in range(idx.shape[0]):
        mu = idx[s]
        for b in range(widths[0]):
            h[0, b] = X[mu, b]
        for l in range(L):  # noqa: E741
            rows, off = widths[l + 1], offs[l]
            for a in range(rows):
                h[l + 1, a] = 0.0
            for b in range(widths[l]):
                hb = h[l, b]
                for a in range(rows):
                    h[l + 1, a] += theta[off + a + rows * b] * hb
        for k in range(widths[L]):
            delta[k] = h[L, k] - Y[mu, k]
        for l in range(L - 1, -1, -1):  # noqa: E741
            rows, off = widths[l + 1], offs[l]
            for b in range(widths[l]):
                acc = 0.0
                hb = h[l, b]
                for a in range(rows):
                    acc += theta[off + a + rows * b] * delta[a]
                    g[off + a + rows * b] += delta[a] * hb
                tmp[b] = acc
            for b in range(widths[l]):
                delta[b] = tmp[b]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _activation(z, code):
    """``(phi(z), phi'(z))``: tanh (code 0) or softplus (code 1), overflow-safe."""
    if code == 0:
        t = np.tanh(z)
        return t, 1.0 - t * t
    e = np.exp(-abs(z))
    sig = 1.0 / (1.0 + e) if z >= 0.0 else e / (1.0 + e)
    return max(z, 0.0) + np.log1p(e), sig


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _one_hidden_gradient(X, Y, theta, idx, spec, work, g):
    """``g = sum_{s} g^{idx_s}`` for ``f = W2 phi(W1 x + b1) + b2`` (layout of
    :class:`~weightdyn.models.OneHidden`: ``W1[h, i] = theta[h + N_h i]``, ``b1`` after it,
    ``W2[k, h] = theta[n1 + k + N_o h]``, ``b2`` after it)."""
    Ni, Nh, No, bias, code = spec[1], spec[2], spec[3], spec[4], spec[5]
    n1 = Nh * (Ni + bias)
    z, a, d1 = work[:Nh], work[Nh : 2 * Nh], work[2 * Nh : 3 * Nh]
    delta, r = work[3 * Nh : 4 * Nh], work[4 * Nh : 4 * Nh + No]
    g[:] = 0.0
    for s in range(idx.shape[0]):
        mu = idx[s]
        for h in range(Nh):
            z[h] = theta[h + Nh * Ni] if bias else 0.0
        for i in range(Ni):
            xi = X[mu, i]
            for h in range(Nh):
                z[h] += theta[h + Nh * i] * xi
        for h in range(Nh):
            a[h], d1[h] = _activation(z[h], code)
        for k in range(No):
            f = theta[n1 + k + No * Nh] if bias else 0.0
            for h in range(Nh):
                f += theta[n1 + k + No * h] * a[h]
            r[k] = f - Y[mu, k]
        for h in range(Nh):
            acc = 0.0
            for k in range(No):
                acc += theta[n1 + k + No * h] * r[k]
                g[n1 + k + No * h] += r[k] * a[h]
            delta[h] = acc * d1[h]
        for i in range(Ni):
            xi = X[mu, i]
            for h in range(Nh):
                g[h + Nh * i] += delta[h] * xi
        if bias:
            for k in range(No):
                g[n1 + k + No * Nh] += r[k]
            for h in range(Nh):
                g[h + Nh * Ni] += delta[h]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _record(theta, theta_ref, d, sum_d, sum_dd):
    """``d = theta - theta_ref`` into ``sum_d`` and ``d d^T`` (flattened) into ``sum_dd``."""
    n = theta.shape[0]
    for i in range(n):
        d[i] = theta[i] - theta_ref[i]
        sum_d[i] += d[i]
    for i in range(n):
        di = d[i]
        for j in range(n):
            sum_dd[i * n + j] += di * d[j]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _advance(X, Y, theta, spec, work_size, c, S, with_replacement, perm, key, step0, n, thin,
             theta_ref, sum_d, sum_dd, n_records, bound):  # fmt: skip
    """``n`` steps of one replica (see :func:`sgd_kernel`); returns whether it diverged."""
    P, n_par = X.shape[0], theta.shape[0]
    idx = np.empty(S, np.int64)
    u = np.empty(S, np.float64)
    g = np.empty(n_par, np.float64)
    d = np.empty(n_par, np.float64)
    work = np.empty(work_size, np.float64)
    for t in range(n):
        base = np.uint64(step0 + t) * np.uint64(S)
        for s in range(S):
            u[s] = uniform(key, base + np.uint64(s))
        draw_batch(u, P, with_replacement, perm, idx)  # App. C sampling
        if spec[0] == _DEEP:
            _deep_linear_gradient(X, Y, theta, idx, spec, work, g)
        else:
            _one_hidden_gradient(X, Y, theta, idx, spec, work, g)
        for i in range(n_par):
            theta[i] -= c * g[i]
        if (t + 1) % thin == 0:
            if not _within(theta, bound):
                return True
            _record(theta, theta_ref, d, sum_d, sum_dd)
            n_records[0] += 1
    return not _within(theta, bound)


@njit(cache=True, boundscheck=False, parallel=True)
def sgd_kernel(
    X, Y, Theta, spec, work_size, lr, S, with_replacement, perm, keys, step0, n, thin,
    theta_ref, block, sum_d, sum_dd, n_records, bound, diverged,
):  # fmt: skip
    """Advance ``R`` replicas ``Theta`` (R, n_params) by ``n`` SGD steps in place (Eqs. 10-11).

    ``spec``/``work_size`` from :func:`kernel_spec`; ``perm`` (R, P) the per-replica
    permutations (sampling without replacement); ``keys`` (R,) the replica keys, step ``t`` of
    this call using draws ``(step0 + t) S ..`` of its stream. After every ``thin``-th step a
    record enters ``sum_d[r, block]`` (R, B, n) and ``sum_dd[r, block]`` (R, B, n^2) and
    increments ``n_records[r, block]``. ``diverged`` (R,)
    bool: replicas already flagged are skipped; a replica whose parameters leave
    ``[-bound, bound]`` at a record is flagged there and stops.
    """
    for r in prange(Theta.shape[0]):
        if not diverged[r]:
            diverged[r] = _advance(
                X, Y, Theta[r], spec, work_size, lr / S, S, with_replacement, perm[r],
                keys[r], step0, n, thin, theta_ref, sum_d[r, block], sum_dd[r, block],
                n_records[r, block : block + 1], bound,
            )  # fmt: skip


# ------------------------------------------------------------------- numpy engine


@dataclass
class _State:
    """What a run carries between calls: parameters, permutations, keys, flags."""

    Theta: FloatArray
    perm: np.ndarray
    keys: np.ndarray
    diverged: np.ndarray


def _numpy_steps(model: Model, X, Y, st: _State, lr, S, sampling, step0, n, thin, theta_ref,
                 block, sums, bound) -> None:  # fmt: skip
    """The kernel's ``n`` steps with :meth:`Model.replica_gradients` (same draws, same records)."""
    u = uniforms(st.keys, step0, n, S)
    idx, perm = batch_indices_from_uniforms(u, X.shape[0], sampling, st.perm)
    if perm is not None:
        st.perm[:] = perm
    sum_d, sum_dd, n_records = sums
    for t in range(n):
        live = ~st.diverged
        with np.errstate(all="ignore"):
            G = model.replica_gradients(X[idx[t]], Y[idx[t]], st.Theta)
        st.Theta[live] -= lr * G[live]
        if (t + 1) % thin == 0:
            with np.errstate(invalid="ignore"):
                st.diverged |= live & ~np.all(np.abs(st.Theta) <= bound, axis=1)
            live = ~st.diverged
            d = st.Theta[live] - theta_ref
            sum_d[live, block] += d
            sum_dd[live, block] += np.einsum("ri,rj->rij", d, d).reshape(len(d), d.shape[1] ** 2)
            n_records[live, block] += 1


def reference_chain(
    model: Model, X: ArrayLike, Y: ArrayLike, theta0: ArrayLike, lr: float,
    batch_indices: ArrayLike,
) -> FloatArray:  # fmt: skip
    """Readable one-chain SGD (Eqs. 10-11) on given batch indices ``(n_steps, S)``: the mean of
    :meth:`Model.per_sample_gradients` over each batch. Returns the final ``theta``."""
    X, theta, Y = model.check_inputs(X, theta0, Y)
    theta = theta.copy()
    for batch in np.asarray(batch_indices):
        theta = theta - lr * model.per_sample_gradients(X[batch], Y[batch], theta).mean(axis=0)
    return theta


# ----------------------------------------------------------------------------- driver


@dataclass(frozen=True)
class SGDRun:
    """Moments of ``d = theta - theta_ref`` per (replica, time block): ``sum_d`` (R, B, n),
    ``sum_dd`` (R, B, n^2, ``d d^T`` C order), ``n_records`` (R, B); the final parameters
    (R, n), per-replica divergence flags (NaN sums where set), the engine used and the speed
    in replica-steps per second."""

    sum_d: FloatArray
    sum_dd: FloatArray
    n_records: np.ndarray
    final: FloatArray
    diverged: np.ndarray
    engine: str
    steps_per_second: float


def _engine(model: Model, engine: Engine) -> str:
    if engine not in ("auto", "kernel", "numpy"):
        raise ValueError(f"engine must be 'auto', 'kernel' or 'numpy', got {engine!r}")
    has_kernel = kernel_spec(model) is not None
    if engine == "kernel" and not has_kernel:
        raise ValueError(f"no compiled kernel for {type(model).__name__}; use engine='numpy'")
    return "kernel" if engine == "kernel" or (engine == "auto" and has_kernel) else "numpy"


def _check_run(model, X, Y, theta0, theta_ref, n_steps, thin, n_blocks, S, sampling):
    X, _, Y = model.check_inputs(X, np.zeros(model.n_params), Y)
    Theta = np.array(theta0, dtype=float, order="C", ndmin=2)
    theta_ref = np.ascontiguousarray(theta_ref, dtype=float)
    if Theta.shape[1:] != (model.n_params,) or theta_ref.shape != (model.n_params,):
        raise ValueError(
            f"theta0 must be (R, {model.n_params}) and theta_ref ({model.n_params},), got "
            f"{Theta.shape} and {theta_ref.shape}"
        )
    if sampling not in SAMPLING_MODES:
        raise ValueError(f"sampling must be one of {SAMPLING_MODES}, got {sampling!r}")
    if not 1 <= S <= X.shape[0]:
        raise ValueError(f"batch_size must satisfy 1 <= S <= P = {X.shape[0]}, got {S}")
    if thin < 1 or n_blocks < 1 or n_steps % (thin * n_blocks):
        raise ValueError(f"n_steps = {n_steps} must be a multiple of thin * n_blocks = "
                         f"{thin} * {n_blocks} (both >= 1)")  # fmt: skip
    return np.ascontiguousarray(X), np.ascontiguousarray(Y), Theta, theta_ref


def run_sgd(
    model: Model,
    X: ArrayLike,
    Y: ArrayLike,
    theta0: ArrayLike,
    *,
    n_steps: int,
    thin: int,
    n_blocks: int,
    theta_ref: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: str = "with",
    rng: np.random.Generator,
    progress: Callable[[str], None] | None = None,
    engine: Engine = "auto",
    chunk_steps: int = 1 << 14,
) -> SGDRun:
    """``n_steps`` SGD steps (Eqs. 10-11) of the replicas ``theta0`` (R, n) in ``n_blocks``
    equal time blocks, recording every ``thin`` steps (module docstring). ``chunk_steps``
    only sets how often ``progress`` hears (rounded to whole records); no result depends on it.
    """
    S, thin, n_blocks, n_steps = int(batch_size), int(thin), int(n_blocks), int(n_steps)
    X, Y, Theta, theta_ref = _check_run(model, X, Y, theta0, theta_ref, n_steps, thin,
                                        n_blocks, S, sampling)  # fmt: skip
    R, n, P = Theta.shape[0], model.n_params, X.shape[0]
    st = _State(Theta, np.tile(np.arange(P, dtype=np.int64), (R, 1)), replica_keys(rng, R),
                np.zeros(R, bool))  # fmt: skip
    sums = (np.zeros((R, n_blocks, n)), np.zeros((R, n_blocks, n * n)),
            np.zeros((R, n_blocks), np.int64))  # fmt: skip
    bound = float(_DIVERGENCE_FACTOR * (np.max(np.abs(theta_ref), initial=0.0) + 1.0))
    used = _engine(model, engine)
    spec = kernel_spec(model)
    block_steps, chunk = n_steps // n_blocks, max(1, int(chunk_steps) // thin) * thin
    prog = ProgressReporter(progress, n_steps, R, f"SGD ({used})")
    start, done = time.perf_counter(), 0
    with one_blas_thread():
        for b in range(n_blocks):
            for pos in range(0, block_steps, chunk):
                m = min(chunk, block_steps - pos)
                if used == "kernel":
                    sgd_kernel(
                        X, Y, st.Theta, spec[0], spec[1], float(lr), S, sampling == "with",
                        st.perm, st.keys, done, m, thin, theta_ref, b, *sums, bound,
                        st.diverged,
                    )  # fmt: skip
                else:
                    _numpy_steps(model, X, Y, st, float(lr), S, sampling, done, m, thin,
                                 theta_ref, b, sums, bound)  # fmt: skip
                done += m
                prog.update(done)
                if st.diverged.all():
                    break
    elapsed = time.perf_counter() - start
    prog.update(done, force=True)
    sums[0][st.diverged], sums[1][st.diverged] = np.nan, np.nan
    return SGDRun(sums[0], sums[1], sums[2], st.Theta, st.diverged, used,
                  R * done / max(elapsed, 1e-12))  # fmt: skip
