"""Mini-batch SGD for the single-layer linear network (paper 000, Section II).

The update implemented here is Eqs. 10-11 of paper 000: with the mini-batch loss
``L_B(w) = (1/S) sum_{mu in B} (1/2) (w.x_mu - y_mu)^2`` (Eq. 10) and learning rate
``lr`` (lambda in the paper), one SGD step is (Eq. 11)::

    w <- w - lr * (1/S) * sum_{mu in B} (w.x_mu - y_mu) x_mu .

Mini-batches ``B`` of size ``S`` are drawn either *with* replacement (S i.i.d. uniform
indices; the case for which paper 000 App. C / Eq. 14 gives the noise covariance) or
*without* replacement (a uniformly random S-subset, independently at every step; App. C
notes the prefactor ``(P - S) / (S (P - 1))`` instead of ``1/S`` for this case).

Conventions: ``X`` has shape ``(P, N)`` (one row per sample ``x_mu``), ``y`` shape ``(P,)``,
both float64. ``R`` independent replicas are advanced together; their weights are the rows
of ``W`` with shape ``(R, N)``.

Randomness and reproducibility
------------------------------
The kernel draws its own random numbers from a counter-based stream
(:mod:`weightdyn.counter_rng`): step ``t`` of replica ``r`` uses draws ``t S .. t S + S - 1``
of the replica's stream, whose key comes from one draw of the caller's
:class:`numpy.random.Generator`. The uniforms ``u`` become batch indices by

* with replacement: ``idx = min(floor(u * P), P - 1)``;
* without replacement: partial Fisher-Yates shuffle of a per-replica permutation array
  ``perm`` (R, P) that persists across steps and calls:
  ``for j < S: k = j + floor(u_j * (P - j)); swap(perm[j], perm[k])``; the batch is
  ``perm[:S]``. Whatever the current state of ``perm``, ``perm[:S]`` after the swaps is a
  uniformly random ordered S-subset, so consecutive batches are independent.

Weight decay, a preconditioner and injected noise (paper 000 App. B)
-------------------------------------------------------------------
With :class:`weightdyn.sgd.Update`'s ``weight_decay`` (chi), ``preconditioner`` (Lam) or
``temperature`` (T) set, :func:`sgd_variant_kernel` runs the step (App. B; the injected noise
is SGLD's, Welling & Teh, ICML 2011)::

    w <- w - lr Lam (g_B(w) + chi w) + F xi,   F = sqrt(2 lr T) Lam^{1/2},  xi ~ N(0, I_N),

``g_B(w) = (1/S) sum_{mu in B} (w.x_mu - y_mu) x_mu`` the mini-batch gradient of Eq. 11 and
``drift = lr Lam``, ``F`` from :func:`weightdyn.sgd.update_matrices`. The batch uniforms are
those above; the normals come from a second counter-based stream of the replica: normal
``t N + i`` (:func:`weightdyn.counter_rng.normal`) of the key ``splitmix64(key ^
NOISE_SALT)`` (:func:`noise_keys`, ``NOISE_SALT = 0xD1B54A32D192ED03``, an odd 64-bit
constant) is ``xi_i`` of global step ``t``. Without a variant :func:`run_sgd` calls
:func:`sgd_kernel`, whose results are unchanged.

Single precision (``precision="float32"`` of :func:`run_sgd`)
-------------------------------------------------------------
:func:`sgd_kernel_f32` integrates the deviation ``dw = w - w_ref`` from the reference (w*, the
minimum-norm solution, in the stationary runs) in float32. With the residuals at the reference
``r*_mu = x_mu.w_ref - y_mu`` formed in float64 and stored in float32, Eq. 11 for ``dw`` reads::

    dw <- dw - (lr/S) sum_{mu in B} (x_mu.dw + r*_mu) x_mu ,

the same step on the labels ``y - X w_ref``: the batch residual adds two terms of the size of
the fluctuations and of the residuals, nothing cancels, and a float32 rounding error is
relative to ``|dw|``, not to ``|w|``. ``X`` is stored in float32, the moments stay float64
(each record ``dw`` is converted when it enters its record group), and the batches are those
of the float64 kernel (same streams), so the two trajectories can be compared step by step.
The engine holds the float32 deviations themselves between calls (:class:`Deviations`).

The moments of :func:`run_sgd` are summed inside the kernel per replica and time block, the
second moments by one matrix product per group of 32 records aligned to the block's start;
the replicas are split over numba's threads. Nothing depends on ``chunk_steps`` or on the
thread count: results are bit-identical for any of them, in either precision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from weightdyn.blas import add_gram_lower
from weightdyn.counter_rng import normal, splitmix64
from weightdyn.minibatch import draw_step_batch
from weightdyn.observables import Observables
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
    update_matrices,
)

__all__ = [
    "NOISE_SALT",
    "PRECISIONS",
    "RECORD_GROUP",
    "SAMPLING_MODES",
    "Deviations",
    "SGDKernel",
    "SGDKernelF32",
    "SGDResult",
    "SGDVariantKernel",
    "batch_indices_from_uniforms",
    "noise_keys",
    "run_sgd",
    "sgd_kernel",
    "sgd_kernel_f32",
    "sgd_reference_chain",
    "sgd_variant_kernel",
]

SAMPLING_MODES = ("with", "without")
#: the kernels' floating-point precisions (``precision`` of :func:`run_sgd`)
PRECISIONS = ("float64", "float32")
#: salt of the injected-noise stream: its key is ``splitmix64(replica key ^ NOISE_SALT)``
NOISE_SALT = np.uint64(0xD1B54A32D192ED03)


def _check_sampling(sampling: str) -> bool:
    """Return True for sampling with replacement; raise ValueError for unknown modes."""
    if sampling not in SAMPLING_MODES:
        raise ValueError(f"sampling must be one of {SAMPLING_MODES}, got sampling={sampling!r}")
    return sampling == "with"


# --------------------------------------------------------------------------------------
# numba kernel
# --------------------------------------------------------------------------------------


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _sgd_step(X, y, w, c, idx, res, zero):
    """``w <- w - c sum_s (w.x_s - y_s) x_s`` over the batch ``idx`` (Eq. 11 with c = lr/S).

    All residuals use the old ``w`` (one mini-batch gradient). Samples go four at a time: four
    dot products share each load of ``w``, and the update adds four rows per load and store of
    ``w`` (the loads and stores, not the multiply-adds, bound this loop). ``zero``: 0 in the
    precision of the dot products (0.0, or ``np.float32(0)`` for :func:`sgd_kernel_f32`, whose
    ``w`` is the deviation ``dw`` and ``y`` the labels seen from the reference).
    """
    S = idx.shape[0]
    N = w.shape[0]
    S4 = S - S % 4
    for s in range(0, S4, 4):
        x0, x1, x2, x3 = X[idx[s]], X[idx[s + 1]], X[idx[s + 2]], X[idx[s + 3]]
        a0 = a1 = a2 = a3 = zero
        for i in range(N):
            wi = w[i]
            a0 += x0[i] * wi
            a1 += x1[i] * wi
            a2 += x2[i] * wi
            a3 += x3[i] * wi
        res[s] = c * (a0 - y[idx[s]])
        res[s + 1] = c * (a1 - y[idx[s + 1]])
        res[s + 2] = c * (a2 - y[idx[s + 2]])
        res[s + 3] = c * (a3 - y[idx[s + 3]])
    for s in range(S4, S):
        xs = X[idx[s]]
        a = zero
        for i in range(N):
            a += xs[i] * w[i]
        res[s] = c * (a - y[idx[s]])
    for s in range(0, S4, 4):
        x0, x1, x2, x3 = X[idx[s]], X[idx[s + 1]], X[idx[s + 2]], X[idx[s + 3]]
        r0, r1, r2, r3 = res[s], res[s + 1], res[s + 2], res[s + 3]
        for i in range(N):
            w[i] -= (r0 * x0[i] + r1 * x1[i]) + (r2 * x2[i] + r3 * x3[i])
    for s in range(S4, S):
        xs = X[idx[s]]
        rs = res[s]
        for i in range(N):
            w[i] -= rs * xs[i]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _within(w, bound):
    """Every component of ``w`` in ``[-bound, bound]`` (False for NaN)."""
    ok = True
    for i in range(w.shape[0]):
        if not (abs(w[i]) <= bound):
            ok = False
    return ok


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _record(w, w_ref, group, k, sum_dw):
    """``dw = w - w_ref`` into row ``k`` of the record group and added to ``sum_dw``."""
    for i in range(w.shape[0]):
        d = w[i] - w_ref[i]
        group[k, i] = d
        sum_dw[i] += d


@njit(cache=True, boundscheck=False, inline="always")
def _add_group(sum_dwdw, group, k):
    """``sum_dwdw += G^T G`` over the first ``k`` records ``G`` of a group, lower triangle only
    (one DSYRK, :func:`weightdyn.blas.add_gram_lower`)."""
    add_gram_lower(sum_dwdw, group, k)


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _add_record(w, w_ref, r, group, k_group, sum_dw, sum_dwdw):
    """``dw = w - w_ref`` (float64) of replica ``r`` into its moments when ``sum_dw`` has rows
    (one DSYRK per full group); returns ``k_group`` after the record."""
    if sum_dw.shape[0] > 0:
        _record(w, w_ref, group, k_group, sum_dw[r])
        k_group += 1
        if k_group == RECORD_GROUP:
            _add_group(sum_dwdw[r], group, k_group)
            k_group = 0
    return k_group


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _record_state(w, w_ref, bound, r, group, k_group, sum_dw, sum_dwdw, rec, k_rec):
    """A record of replica ``r`` after a thinned step: its moments (when ``sum_dw`` has rows;
    one DSYRK per full group) and row ``k_rec`` of ``rec``. Returns ``(within bound,
    k_group, k_rec)`` after the record; nothing is recorded for a diverged state."""
    if not _within(w, bound):
        return False, k_group, k_rec
    k_group = _add_record(w, w_ref, r, group, k_group, sum_dw, sum_dwdw)
    if k_rec < rec.shape[0]:
        rec[k_rec, r, :] = w
    return True, k_group, k_rec + 1


@njit(cache=True, boundscheck=False, inline="always")
def _close_replica(w, bound, r, group, k_group, sum_dw, sum_dwdw):
    """End of a call for a replica that has not diverged: its last partial record group into
    the moments; returns whether the final state diverged."""
    if sum_dw.shape[0] > 0 and k_group > 0:
        _add_group(sum_dwdw[r], group, k_group)
    return not _within(w, bound)


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, parallel=True)
def sgd_kernel(
    X, y, W, lr, S, with_replacement, perm, keys, step0, n, thin, w_ref, sum_dw, sum_dwdw, rec,
    bound,
):  # fmt: skip
    """Advance ``R`` SGD replicas by ``n`` steps in place (paper 000, Eqs. 10-11).

    Parameters
    ----------
    X, y : (P, N), (P,) float64 training data.
    W : (R, N) float64, C-contiguous; updated in place.
    lr, S : learning rate lambda and batch size.
    with_replacement : bool; index rule see module docstring.
    perm : (R, P) int64 per-replica permutation (used and updated only without
        replacement; must hold a permutation of ``0..P-1`` per row).
    keys : (R,) uint64 replica keys (:func:`weightdyn.counter_rng.replica_keys`); step ``t``
        of replica ``r`` uses draws ``t S .. t S + S - 1`` of its stream.
    step0 : the global index of this call's first step (the chain has done ``step0`` steps).
    thin : a record after every ``thin``-th step of this call (steps ``thin-1, 2 thin-1, ...``).
    w_ref : (N,) reference for the moments.
    sum_dw, sum_dwdw : (R, N), (R, N, N) or zero-size: at every record ``dw = w - w_ref`` is
        added to ``sum_dw[r]``, and ``dw dw^T`` to the lower triangle of ``sum_dwdw[r]`` (a
        C-contiguous matrix) by one DSYRK per group of ``RECORD_GROUP`` records, counted from
        the call's first record (the last group of a call may be partial); the caller completes
        the upper triangle (:func:`weightdyn.blas.fill_upper`) once the sums are final.
        Zero-size arrays (R = 0): no moments.
    rec : (n_rec, R, N) float64: record ``k < n_rec`` of this call is stored in ``rec[k]``
        (e.g. for an observable hook; ``n_rec = 0`` stores none).
    bound : a replica whose weight component leaves ``[-bound, bound]`` (or becomes
        non-finite) is flagged as diverged and not advanced further in this call.

    Returns
    -------
    diverged : (R,) bool.

    The replicas are split over numba's threads (``prange``). A replica's steps, random
    numbers and moment sums depend only on its key and the global step index, never on the
    thread count or on how the steps are split into calls, so results are bit-identical for
    any of them. Only the ``reassoc`` and ``contract`` fast-math flags are set: they let LLVM
    vectorise the dot products while NaN/Inf semantics, which the divergence check relies on,
    are kept.
    """
    R, N = W.shape
    P = X.shape[0]
    diverged = np.zeros(R, np.bool_)
    c = lr / S
    for r in prange(R):
        idx = np.empty(S, np.int64)
        u = np.empty(S, np.float64)
        res = np.empty(S, np.float64)
        group = np.empty((RECORD_GROUP, N), np.float64)
        k_group = 0
        w = W[r]
        key = keys[r]
        k_rec = 0
        for t in range(n):
            draw_step_batch(key, step0 + t, u, P, with_replacement, perm[r], idx)
            _sgd_step(X, y, w, c, idx, res, 0.0)
            if (t + 1) % thin == 0:
                ok, k_group, k_rec = _record_state(
                    w, w_ref, bound, r, group, k_group, sum_dw, sum_dwdw, rec, k_rec
                )
                if not ok:
                    diverged[r] = True
                    break
        if not diverged[r]:
            diverged[r] = _close_replica(w, bound, r, group, k_group, sum_dw, sum_dwdw)
    return diverged


# --------------------------------------------------------------------------------------
# single-precision kernel: the deviation from the reference in float32
# --------------------------------------------------------------------------------------


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _within_from(d, origin, bound):
    """Every component of the state ``origin + d`` (float64) in ``[-bound, bound]`` (False for
    NaN): :func:`_within` of the state a single-precision deviation ``d`` stands for."""
    ok = True
    for i in range(d.shape[0]):
        if not (abs(origin[i] + d[i]) <= bound):
            ok = False
    return ok


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _record_deviation(d, origin, shift, bound, r, group, k_group, sum_dw, sum_dwdw, rec, k_rec):
    """:func:`_record_state` of a single-precision deviation ``d`` (float32) of the state
    ``origin + d``: the record ``dw = d - shift`` (float64, ``shift = ref - origin``) enters the
    float64 moments, and ``rec`` gets the state ``origin + d`` in float64."""
    if not _within_from(d, origin, bound):
        return False, k_group, k_rec
    k_group = _add_record(d, shift, r, group, k_group, sum_dw, sum_dwdw)
    if k_rec < rec.shape[0]:
        for i in range(d.shape[0]):
            rec[k_rec, r, i] = origin[i] + d[i]
    return True, k_group, k_rec + 1


@njit(cache=True, boundscheck=False, inline="always")
def _close_deviation(d, origin, bound, r, group, k_group, sum_dw, sum_dwdw):
    """:func:`_close_replica` of a single-precision deviation ``d`` of the state ``origin + d``."""
    if sum_dw.shape[0] > 0 and k_group > 0:
        _add_group(sum_dwdw[r], group, k_group)
    return not _within_from(d, origin, bound)


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, parallel=True)
def sgd_kernel_f32(
    X, y_dev, D, lr, S, with_replacement, perm, keys, step0, n, thin, w_ref, sum_dw, sum_dwdw,
    rec, bound,
):  # fmt: skip
    """:func:`sgd_kernel` in single precision: SGD (paper 000, Eqs. 10-11) on the deviations
    ``dw = w - w_ref`` (float32) from the reference ``w_ref`` (float64, usually w*).

    The deviation obeys Eq. 11 itself, on the labels seen from the reference::

        dw <- dw - (lr/S) sum_s (x_s.dw + r*_s) x_s,   r*_s = x_s.w_ref - y_s,

    so with ``y_dev = -r* = y - X w_ref`` (formed in float64 from the float64 data, stored as
    float32) :func:`_sgd_step` runs unchanged in float32: the batch residual
    ``x_s.dw - y_dev_s`` is a sum of O(|dw|) and O(|r*|) terms, nothing large cancels, so the
    float32 rounding is relative to the fluctuations, not to ``|w|``.

    Parameters
    ----------
    X : (P, N) float32 training inputs; ``y_dev`` (P,) float32 as above.
    D : (R, N) float32 deviations ``dw``, C-contiguous; updated in place.
    w_ref : (N,) float64. The state ``w = w_ref + dw`` (float64) is checked against ``bound``
        and stored in ``rec``; the records ``dw`` enter the float64 moments exactly.
    The other arguments and the returned diverged flags (R,) are :func:`sgd_kernel`'s (same
    batches from the same streams, records, moment sums, divergence and threading), so the
    results are bit-identical for any thread count and any split of the steps into calls.
    """
    R, N = D.shape
    P = X.shape[0]
    diverged = np.zeros(R, np.bool_)
    c = np.float32(lr / S)
    zero = np.float32(0.0)
    shift = np.zeros(N)  # the records are dw itself
    for r in prange(R):
        idx = np.empty(S, np.int64)
        u = np.empty(S, np.float64)
        res = np.empty(S, np.float32)
        group = np.empty((RECORD_GROUP, N), np.float64)
        k_group = k_rec = 0
        d = D[r]
        for t in range(n):
            draw_step_batch(keys[r], step0 + t, u, P, with_replacement, perm[r], idx)
            _sgd_step(X, y_dev, d, c, idx, res, zero)
            if (t + 1) % thin == 0:
                ok, k_group, k_rec = _record_deviation(
                    d, w_ref, shift, bound, r, group, k_group, sum_dw, sum_dwdw, rec, k_rec
                )
                if not ok:
                    diverged[r] = True
                    break
        if not diverged[r]:
            diverged[r] = _close_deviation(d, w_ref, bound, r, group, k_group, sum_dw, sum_dwdw)
    return diverged


# --------------------------------------------------------------------------------------
# numba kernel of the App. B variant (weight decay, preconditioner, injected noise)
# --------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _noise_key(key):
    """The injected-noise stream's key of a replica: ``splitmix64(key ^ NOISE_SALT)``."""
    return splitmix64(key ^ NOISE_SALT)


@njit(cache=True)
def noise_keys(keys: np.ndarray) -> np.ndarray:
    """The keys (R,) uint64 of the injected-noise streams of the replicas ``keys`` (R,):
    ``splitmix64(key ^ NOISE_SALT)``; ``xi_i`` of step ``t`` is their normal ``t N + i``
    (module docstring; :func:`weightdyn.counter_rng.normals` with ``k = N``)."""
    out = np.empty(keys.shape[0], np.uint64)
    for r in range(keys.shape[0]):
        out[r] = _noise_key(keys[r])
    return out


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _batch_gradient(X, y, w, chi, idx, res, g):
    """``g = (1/S) sum_s (w.x_s - y_s) x_s + chi w`` over the batch ``idx`` (Eq. 11's
    mini-batch gradient plus the App. B weight decay); ``res`` holds the residuals / S."""
    S = idx.shape[0]
    N = w.shape[0]
    for s in range(S):
        xs = X[idx[s]]
        a = 0.0
        for i in range(N):
            a += xs[i] * w[i]
        res[s] = (a - y[idx[s]]) / S
    for i in range(N):
        g[i] = chi * w[i]
    for s in range(S):
        xs = X[idx[s]]
        rs = res[s]
        for i in range(N):
            g[i] += rs * xs[i]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def _apply_step(w, g, lr, drift, noise, nkey, t, xi):
    """``w <- w - drift g + F xi`` (``lr g`` when ``drift`` has no rows; no noise when
    ``noise`` has none), ``xi_i`` normal ``t N + i`` of the stream ``nkey``."""
    N = w.shape[0]
    if drift.shape[0] > 0:
        for i in range(N):
            a = 0.0
            for j in range(N):
                a += drift[i, j] * g[j]
            w[i] -= a
    else:
        for i in range(N):
            w[i] -= lr * g[i]
    if noise.shape[0] > 0:
        base = np.uint64(t) * np.uint64(N)
        for j in range(N):
            xi[j] = normal(nkey, base + np.uint64(j))
        for i in range(N):
            a = 0.0
            for j in range(N):
                a += noise[i, j] * xi[j]
            w[i] += a


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, parallel=True)
def sgd_variant_kernel(
    X, y, W, lr, S, with_replacement, perm, keys, step0, n, thin, w_ref, sum_dw, sum_dwdw, rec,
    bound, chi, drift, noise,
):  # fmt: skip
    """Advance ``R`` replicas by ``n`` steps of the App. B variant of SGD in place::

        w <- w - drift (g_B(w) + chi w) + noise xi

    (module docstring; ``drift = lr Lam``, ``noise = sqrt(2 lr T) Lam^{1/2}``,
    :func:`weightdyn.sgd.update_matrices`). The arguments up to ``bound`` and the returned
    diverged flags (R,) are :func:`sgd_kernel`'s (same batches, records, moment sums,
    divergence check and threading); ``chi`` is the weight decay, ``drift`` (N, N) or (0, 0)
    (then ``lr`` times the identity), ``noise`` (N, N) or (0, 0) (no injected noise). ``xi_i``
    of global step ``t`` is normal ``t N + i`` of the replica's noise stream
    (:func:`noise_keys`), so nothing depends on the thread count or the call split.
    """
    R, N = W.shape
    P = X.shape[0]
    diverged = np.zeros(R, np.bool_)
    for r in prange(R):
        idx = np.empty(S, np.int64)
        u = np.empty(S, np.float64)
        res = np.empty(S, np.float64)
        g = np.empty(N, np.float64)
        xi = np.empty(N, np.float64)
        group = np.empty((RECORD_GROUP, N), np.float64)
        k_group = 0
        w = W[r]
        key = keys[r]
        nkey = _noise_key(key)
        k_rec = 0
        for t in range(n):
            draw_step_batch(key, step0 + t, u, P, with_replacement, perm[r], idx)
            _batch_gradient(X, y, w, chi, idx, res, g)
            _apply_step(w, g, lr, drift, noise, nkey, step0 + t, xi)
            if (t + 1) % thin == 0:
                ok, k_group, k_rec = _record_state(
                    w, w_ref, bound, r, group, k_group, sum_dw, sum_dwdw, rec, k_rec
                )
                if not ok:
                    diverged[r] = True
                    break
        if not diverged[r]:
            diverged[r] = _close_replica(w, bound, r, group, k_group, sum_dw, sum_dwdw)
    return diverged


# --------------------------------------------------------------------------------------
# plain-python reference and index helper
# --------------------------------------------------------------------------------------


def sgd_reference_chain(
    X: np.ndarray,
    y: np.ndarray,
    w0: np.ndarray,
    lr: float,
    batch_indices: np.ndarray,
    *,
    weight_decay: float = 0.0,
    preconditioner: np.ndarray | None = None,
    noise_factor: np.ndarray | None = None,
    normals: np.ndarray | None = None,
) -> np.ndarray:
    """Readable one-chain SGD (paper 000, Eqs. 10-11) on given mini-batch indices, or its App. B
    variant ``w <- w - lr Lam (g_B(w) + chi w) + F xi`` with ``weight_decay`` (chi),
    ``preconditioner`` (Lam, default identity) and ``noise_factor`` (F) times the given
    ``normals`` (n_steps, N) (both or neither).

    ``batch_indices`` has shape ``(n_steps, S)``; returns the final weights (N,).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.array(w0, dtype=np.float64, copy=True)
    batch_indices = np.asarray(batch_indices)
    S = batch_indices.shape[1]
    lam = np.eye(len(w)) if preconditioner is None else np.asarray(preconditioner)
    if (noise_factor is None) != (normals is None):
        raise ValueError("noise_factor and normals go together")
    for t, batch in enumerate(batch_indices):
        xb = X[batch]  # (S, N)
        residual = xb @ w - y[batch]  # w.x_mu - y_mu
        if weight_decay == 0 and preconditioner is None and noise_factor is None:
            w = w - lr / S * (residual @ xb)  # Eq. 11
            continue
        grad = residual @ xb / S + weight_decay * w
        w = w - lr * (lam @ grad)
        if noise_factor is not None:
            w = w + noise_factor @ normals[t]
    return w


def batch_indices_from_uniforms(
    u: np.ndarray, P: int, sampling: str, perm: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Reproduce the kernel's mini-batch indices from uniforms ``u`` (n, R, S).

    Returns ``(indices, perm)`` with ``indices`` of shape (n, R, S) int64. Without
    replacement, ``perm`` (R, P) is the permutation state before the first step (default:
    identity per replica); a copy advanced by all steps is returned. With replacement the
    returned perm is ``None``.
    """
    u = np.asarray(u, dtype=np.float64)
    n, R, S = u.shape
    if _check_sampling(sampling):
        return np.minimum(np.floor(u * P).astype(np.int64), P - 1), None
    if S > P:
        raise ValueError(f"batch_size={S} exceeds P={P} for sampling without replacement")
    perm = np.tile(np.arange(P, dtype=np.int64), (R, 1)) if perm is None else perm.copy()
    out = np.empty((n, R, S), dtype=np.int64)
    for t in range(n):
        for r in range(R):
            for j in range(S):
                k = min(j + int(np.floor(u[t, r, j] * (P - j))), P - 1)
                perm[r, j], perm[r, k] = perm[r, k], perm[r, j]
            out[t, r] = perm[r, :S]
    return out, perm


# --------------------------------------------------------------------------------------
# kernel adapter and driver
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SGDKernel(VectorKernel):
    """:func:`sgd_kernel` behind the engine's kernel interface (:mod:`weightdyn.sgd`): Eqs.
    10-11 on ``X`` (P, N), ``y`` (P,) with learning rate ``lr``, batch size ``S`` and the App. C
    sampling; records are ``dw = w - ref`` (the run stops at the first divergence)."""

    X: np.ndarray
    y: np.ndarray
    ref: np.ndarray
    lr: float
    S: int
    with_replacement: bool
    lower_triangle: bool = True

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """``n_steps`` steps of every replica from global step ``step0``, recording."""
        sums = record.block_sums()
        state.diverged |= sgd_kernel(
            self.X, self.y, state.W, self.lr, self.S, self.with_replacement, state.perm,
            state.keys, step0, n_steps, record.thin, self.ref, *sums, record.rec, record.bound,
        )  # fmt: skip
        record.count_every_replica(n_steps)


@dataclass(frozen=True)
class SGDVariantKernel(SGDKernel):
    """:func:`sgd_variant_kernel` behind the engine's kernel interface: the App. B step with
    weight decay ``chi``, drift matrix ``drift`` (lr Lam; None: lr times the identity) and noise
    factor ``noise`` (None: no injected noise), from :func:`weightdyn.sgd.update_matrices`."""

    chi: float = 0.0
    drift: np.ndarray | None = None
    noise: np.ndarray | None = None

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """``n_steps`` variant steps of every replica from global step ``step0``, recording."""
        sums = record.block_sums()
        none = np.empty((0, 0))
        drift = none if self.drift is None else np.ascontiguousarray(self.drift)
        noise = none if self.noise is None else np.ascontiguousarray(self.noise)
        state.diverged |= sgd_variant_kernel(
            self.X, self.y, state.W, self.lr, self.S, self.with_replacement, state.perm,
            state.keys, step0, n_steps, record.thin, self.ref, *sums, record.rec, record.bound,
            float(self.chi), drift, noise,
        )  # fmt: skip
        record.count_every_replica(n_steps)


class Deviations:
    """The state of a single-precision kernel (:class:`SGDKernelF32`,
    :class:`~weightdyn.single_layer.sgf.SGFKernelF32`): ``state.W`` holds float32 deviations
    ``d`` of the float64 kernel's state ``origin + d`` (float64).

    The engine keeps ``state.W`` as it is between calls, so the float32 deviations persist
    exactly whatever the chunking. (Holding float64 states and converting them each call would
    round: ``origin + d`` drops the bits of ``d`` below the ulp of ``origin`` wherever ``|d|`` is
    far below ``|origin|``, and the result would depend on ``chunk_steps``.)"""

    origin: np.ndarray

    def start(self, S0: np.ndarray, rng: np.random.Generator, n_samples: int,
              bound: float) -> State:  # fmt: skip
        """The engine's state of the float64 states ``S0`` (R, N): deviations
        ``S0 - origin`` in float32, keys and permutations as :meth:`State.start`, and a replica
        whose ``S0`` is beyond ``bound`` (or not finite) flagged, as the engine flags a float64
        state (it checks the deviations themselves too)."""
        with np.errstate(all="ignore"):  # a start beyond float32 becomes inf: flagged
            D = np.ascontiguousarray(S0 - self.origin, dtype=np.float32)
            state = State.start(D, rng, n_samples)
            state.diverged |= ~np.all(np.abs(S0) <= bound, axis=1)
        return state

    def values(self, D: np.ndarray) -> np.ndarray:
        """The float64 states ``origin + D`` of the deviations ``D`` (R, N)."""
        return self.origin + D.astype(np.float64)


@dataclass(frozen=True)
class SGDKernelF32(Deviations, VectorKernel):
    """:func:`sgd_kernel_f32` behind the engine's kernel interface: Eqs. 10-11 on the float32
    deviations ``d = w - ref`` (:class:`Deviations`, ``origin = ref``) with ``X`` (P, N) and
    ``y_dev = y - X ref`` (P,) in float32 (:meth:`build`); records ``dw = d``, moments in
    float64."""

    X: np.ndarray
    y_dev: np.ndarray
    ref: np.ndarray
    lr: float
    S: int
    with_replacement: bool
    lower_triangle: bool = True

    @classmethod
    def build(cls, X, y, ref, lr: float, S: int, with_replacement: bool) -> SGDKernelF32:
        """The kernel of the float64 data ``X``, ``y`` about ``ref``: ``y - X ref`` is formed in
        float64 (nothing of ``X ref`` is lost to the float32 ``X``), then both are stored in
        float32."""
        y_dev = (y - X @ ref).astype(np.float32)
        return cls(X.astype(np.float32), y_dev, ref, lr, S, with_replacement)

    @property
    def origin(self) -> np.ndarray:
        """The state ``w = ref + d``."""
        return self.ref

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """``n_steps`` steps of every replica's deviation from global step ``step0``."""
        sums = record.block_sums()
        state.diverged |= sgd_kernel_f32(
            self.X, self.y_dev, state.W, self.lr, self.S, self.with_replacement, state.perm,
            state.keys, step0, n_steps, record.thin, self.ref, *sums, record.rec, record.bound,
        )  # fmt: skip
        record.count_every_replica(n_steps)


def _check_precision(precision: str) -> bool:
    """True for ``"float32"``; ValueError naming ``precision`` and the allowed values."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got precision={precision!r}")
    return precision == "float32"


def _sgd_kernel(
    X, y, w_ref, update: Update, S: int, with_replacement: bool, single: bool
) -> SGDKernel | SGDKernelF32:
    """:class:`SGDKernel` (:class:`SGDKernelF32` if ``single``) for plain SGD,
    :class:`SGDVariantKernel` for an App. B variant (checked by
    :func:`weightdyn.sgd.update_matrices`, ValueError naming the key; float64 only)."""
    if single and not update.is_plain:
        raise ValueError(
            "precision='float32' runs plain SGD only (Eqs. 10-11); with weight_decay, "
            "preconditioner or temperature set (App. B), precision must be 'float64'"
        )
    drift, noise = update_matrices(update, X.shape[1])
    if single:
        return SGDKernelF32.build(X, y, w_ref, update.lr, S, with_replacement)
    if update.is_plain:
        return SGDKernel(X, y, w_ref, update.lr, S, with_replacement)
    chi = float(update.weight_decay)
    return SGDVariantKernel(X, y, w_ref, update.lr, S, with_replacement, True, chi, drift, noise)


def run_sgd(
    X: np.ndarray,
    y: np.ndarray,
    w_ref: np.ndarray,
    w_init: np.ndarray,
    update: Update,
    schedule: Schedule,
    rng: np.random.Generator,
    *,
    progress: Callable[[str], None] | None = None,
    observables: Observables | None = None,
    precision: str = "float64",
) -> SGDResult:
    """Run R SGD replicas (paper 000, Eqs. 10-11) and accumulate weight moments.

    The replicas start at the rows of ``w_init`` (R, N). ``update``
    (:class:`weightdyn.sgd.Update`) is the step: learning rate ``lr``, batch size
    ``batch_size`` and App. C ``sampling`` ("with" or "without" replacement), and optionally
    the App. B ``weight_decay``, ``preconditioner`` and ``temperature`` (then the kernel is
    :func:`sgd_variant_kernel`, module docstring; ValueError naming a bad key). ``schedule``
    (:class:`weightdyn.sgd.Schedule`) is the plan: ``burnin_steps`` steps are run first
    (nothing recorded). Then ``sample_steps`` steps are split into ``n_blocks`` equal time
    blocks; every ``thin``-th step the weights are recorded and ``dw = w - w_ref`` enters the
    per-(replica, block) sums ``sum_dw`` and ``sum_dwdw`` (inside the kernel,
    :func:`sgd_kernel`). ``sample_steps`` must be a multiple of ``n_blocks * thin``. The plan,
    streams, sums, divergence and hook are the engine's (:func:`weightdyn.sgd.run`); the kernel
    is :class:`SGDKernel`.

    ``schedule.chunk_steps`` sets how often progress is reported (and, with an observable hook,
    the records held at a time); it is rounded to a multiple of ``32 thin`` (whole record groups,
    see :func:`sgd_kernel`) and changes no result bit.

    Divergence: if a weight component becomes non-finite or exceeds
    ``1e6 * (max|w_ref| + 1)`` in magnitude (checked every ``thin`` steps and at chunk
    ends), the run stops and returns ``diverged=True`` with NaN moments.

    ``progress``, if given, is called with a status string about every 10 % of the steps.

    ``observables``, an optional hook (e.g. :class:`weightdyn.observables.LinearQuadratic`), is
    called on the ``dw`` records of every sampling chunk after they exist and before they are
    accumulated; it reads them only, so every other field is bit-identical with and without it.
    Its series are returned in ``obs_series`` (see :class:`SGDResult`).

    ``precision``: ``"float64"`` (default) or ``"float32"``: plain SGD on the deviations
    ``dw = w - w_ref`` in single precision (:func:`sgd_kernel_f32`: ``X`` and the residuals at
    ``w_ref`` in float32, the moments and the records in float64; the same batches); ValueError
    naming ``precision`` for another value or with an App. B variant.
    """
    single = _check_precision(precision)
    with_replacement = _check_sampling(update.sampling)
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    w_ref = np.ascontiguousarray(w_ref, dtype=np.float64)
    W = np.array(w_init, dtype=np.float64, order="C", copy=True)
    P, N = X.shape
    if W.ndim != 2 or W.shape[1] != N:
        raise ValueError(f"w_init must have shape (R, {N}), got {W.shape}")
    if y.shape != (P,) or w_ref.shape != (N,):
        raise ValueError(f"y must have shape ({P},) and w_ref ({N},)")
    S = int(update.batch_size)
    if S < 1 or (not with_replacement and S > P):
        raise ValueError(
            f"batch_size={update.batch_size} must be >= 1 and <= P={P} for sampling without "
            "replacement"
        )
    plan = schedule.plan()
    kernel = _sgd_kernel(X, y, w_ref, update, S, with_replacement, single)
    bound = divergence_bound(w_ref)
    settings = Settings(plan, bound, "SGD (float32)" if single else "SGD", progress, observables)
    state = kernel.start(W, rng, P, bound) if single else State.start(W, rng, P)
    moments = engine.run(kernel, state, settings)
    return SGDResult.grouped(moments, plan, kernel.values(state.W) if single else state.W)
