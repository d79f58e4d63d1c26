"""Single-precision two-layer SGD and SGF kernels in deviation form (paper 000 Sec. III).

The float32 option (``precision="float32"``) of :func:`weightdyn.two_layer.simulate.
run_sgd_two_layer` and :func:`~weightdyn.two_layer.simulate.run_sgf_two_layer`. The kernels
do not integrate the weights ``W1`` (N_h, N_i), ``W2`` (N_o, N_h) but their deviations from the
run's reference point ``(W1r, W2r)`` (the point the moments are taken about, e.g. the
gradient-flow end point ``W^0`` or a local point)::

    dW1 = W1 - W1r,    dW2 = W2 - W2r,    dw = W2 W1 - W2r W1r .

The product expands exactly (Eq. 58 keeps its first two terms, which give the drift ``Gamma``
of Eq. 63; the bilinear third term is kept here, so the dynamics is the full Eq. 41)::

    dw = W2r dW1 + dW2 W1r + dW2 dW1 = (W2r + dW2) dW1 + dW2 W1r ,

and the residual of sample ``mu`` is ``e_mu = y_mu - w x_mu = e0_mu - dw x_mu`` with the
residual at the reference ``e0_mu = y_mu - W2r W1r x_mu``, computed once in float64 and stored
in float32. One step (Eq. 41 for SGD, the Euler-Maruyama step of Eqs. 51-52 for SGF, the
coefficients ``a_mu`` of the float64 kernels, the same batches and normals) is then::

    K = sum_mu a_mu (e0_mu - dw x_mu) x_mu^T,
    dW2 += K (W1r + dW1)^T,   dW1 += (W2r + dW2)^T K      (both from the old deviations),

and ``dw`` is recomputed from the new deviations (not drifted). Every float32 quantity is then
a deviation or a residual, rounded relative to its own size: the residuals at the reference do
not cancel against ``y`` in single precision, and a step's increment ``O(lr)`` is added to a
deviation ``O(sqrt(lr))`` rather than to a weight ``O(1)``, so the slow drift along the manifold
of minima (a small fraction of a step's increment) is not lost to the rounding of ``W``. The
data ``X`` is float32; the records (the deviations themselves), the diagnostics
(``|W1|^2, |W2|^2, |W2 W1 - w*|^2`` from the float64 reference plus the deviation) and the
divergence bound are float64, and so are the moment sums of the caller.

The kernels are generic in the state's dtype: a float64 :class:`Deviations` runs the same
deviation form in double precision (a check of its algebra against the float64 kernels).
Randomness as in :mod:`weightdyn.two_layer.simulate` (counter-based streams; results
bit-identical for any chunking and thread count). Accuracy and throughput against float64 and
against plain float32 weights: docs/internals.md, "Two-layer kernels in float32".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from weightdyn.counter_rng import normal
from weightdyn.minibatch import draw_step_batch
from weightdyn.two_layer.residuals import add_samples

__all__ = ["Deviations", "sgd_deviation_kernel", "sgf_deviation_kernel"]

_FLAGS = {"reassoc", "contract"}


@dataclass(frozen=True)
class Deviations:
    """The state and constants of a run in deviation form (module docstring).

    ``X`` (P, N_i) and ``E0`` (Q, P, N_o), the residuals ``y - W2r W1r x`` at the reference,
    in the state's dtype; ``R1`` (Q, N_h, N_i), ``R2`` (Q, N_o, N_h) the reference in the
    state's dtype and ``ref1``, ``ref2`` in float64; ``dist0`` (Q, N_o, N_i) float64
    ``W2r W1r - w*``. ``Q`` is 1 (one reference) or R (one per replica). The state ``D1``
    (R, N_h, N_i), ``D2`` (R, N_o, N_h), ``Dw`` (R, N_o, N_i) is advanced in place."""

    X: np.ndarray
    E0: np.ndarray
    R1: np.ndarray
    R2: np.ndarray
    ref1: np.ndarray
    ref2: np.ndarray
    dist0: np.ndarray
    D1: np.ndarray
    D2: np.ndarray
    Dw: np.ndarray

    @classmethod
    def build(
        cls,
        data: tuple[np.ndarray, np.ndarray],
        refs: tuple[np.ndarray, np.ndarray],
        weights: tuple[np.ndarray, np.ndarray],
        w_star: np.ndarray,
        dtype: type = np.float32,
    ) -> Deviations:
        """From float64 ``data = (X, Y)``, ``refs = (W1r, W2r)`` ((N_h, N_i), (N_o, N_h) or
        per replica with a leading R), ``weights = (W1, W2)`` (R, ...) and ``w*``: every
        quantity at the reference in float64, then rounded to ``dtype`` once."""
        (X, Y), (W1, W2) = data, weights
        ref1, ref2 = (np.ascontiguousarray(a.reshape(-1, *a.shape[-2:])) for a in refs)
        w0 = np.matmul(ref2, ref1)  # (Q, N_o, N_i)
        E0 = Y[None] - np.matmul(X[None], w0.transpose(0, 2, 1))
        Dw = np.matmul(W2, W1) - w0

        def cast(a: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(a, dtype=dtype)

        return cls(cast(X), cast(E0), cast(ref1), cast(ref2), ref1, ref2, w0 - w_star,
                   cast(W1 - ref1), cast(W2 - ref2), cast(Dw))  # fmt: skip

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """The float64 weights ``(W1r + dW1, W2r + dW2)`` (R, ...)."""
        return self.ref1 + self.D1, self.ref2 + self.D2

    @property
    def refs(self) -> tuple[np.ndarray, ...]:
        """The kernels' ``refs`` tuple ``(R1, R2, ref1, ref2, dist0)``."""
        return self.R1, self.R2, self.ref1, self.ref2, self.dist0

    @property
    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The kernels' ``state`` tuple ``(D1, D2, Dw)``."""
        return self.D1, self.D2, self.Dw


@njit(cache=True, boundscheck=False, fastmath=_FLAGS, inline="always")
def _layer_step(d1, d2, dw, r1, r2, K, g2):
    """One replica's Eq. 41 update of the deviations, in place (module docstring).

    Row by row of ``dW1``: ``g2 = K (W1r + dW1)[j]^T`` (old), ``dW1[j] += (W2r + dW2)[:, j]^T K``
    (old), then ``dW2[:, j] += g2`` and ``dw += (W2r + dW2)[:, j] dW1[j] + dW2[:, j] W1r[j]``
    (new). ``g2`` (N_o,) is scratch.
    """
    N_o, N_i = K.shape
    zero = K.dtype.type(0)
    for o in range(N_o):
        for i in range(N_i):
            dw[o, i] = zero
    for j in range(d1.shape[0]):
        d, v = d1[j], r1[j]
        for o in range(N_o):
            Ko = K[o]
            s = zero
            for i in range(N_i):
                s += Ko[i] * (v[i] + d[i])
            g2[o] = s
        for o in range(N_o):
            b = r2[o, j] + d2[o, j]
            Ko = K[o]
            for i in range(N_i):
                d[i] += b * Ko[i]
        for o in range(N_o):
            c = d2[o, j] + g2[o]
            d2[o, j] = c
            b = r2[o, j] + c
            dwo = dw[o]
            for i in range(N_i):
                dwo[i] += b * d[i] + c * v[i]


@njit(cache=True, boundscheck=False, fastmath=_FLAGS, inline="always")
def _squared_norms(d1, d2, ref1, ref2):
    """``(|W1r + dW1|_F^2, |W2r + dW2|_F^2)`` in float64."""
    s1 = 0.0
    for j in range(d1.shape[0]):
        for i in range(d1.shape[1]):
            x = ref1[j, i] + np.float64(d1[j, i])
            s1 += x * x
    s2 = 0.0
    for o in range(d2.shape[0]):
        for j in range(d2.shape[1]):
            x = ref2[o, j] + np.float64(d2[o, j])
            s2 += x * x
    return s1, s2


@njit(cache=True, boundscheck=False, fastmath=_FLAGS, inline="always")
def _within_bound(d1, d2, ref1, ref2, bound2):
    """Both squared norms (:func:`_squared_norms`) ``<= bound2`` (False if NaN)."""
    s1, s2 = _squared_norms(d1, d2, ref1, ref2)
    return s1 <= bound2 and s2 <= bound2


@njit(cache=True, boundscheck=False, fastmath=_FLAGS, inline="always")
def _record(r, q, k_rec, state, refs, bound2, rec1, rec2, diag):
    """Record replica ``r`` (reference ``q``) as record ``k_rec``: its float64 deviations into
    ``rec1``, ``rec2`` and ``(|W1|^2, |W2|^2, |W2 W1 - w*|^2)`` into ``diag`` (while there is
    room); False if it diverged."""
    d1, d2, dw = state[0][r], state[1][r], state[2][r]
    ref1, ref2, dist0 = refs[2][q], refs[3][q], refs[4][q]
    s1, s2 = _squared_norms(d1, d2, ref1, ref2)
    if not (s1 <= bound2 and s2 <= bound2):
        return False
    if k_rec < diag.shape[0]:
        s3 = 0.0
        for o in range(dw.shape[0]):
            for i in range(dw.shape[1]):
                x = dist0[o, i] + np.float64(dw[o, i])
                s3 += x * x
        diag[k_rec, r, 0] = s1
        diag[k_rec, r, 1] = s2
        diag[k_rec, r, 2] = s3
    if k_rec < rec1.shape[0]:
        rec1[k_rec, r] = d1
        rec2[k_rec, r] = d2
    return True


@njit(cache=True, boundscheck=False, fastmath=_FLAGS, inline="always")
def _step(r, q, X, E0, state, refs, K, g2, rows, a):
    """One step of replica ``r`` (reference ``q``) with the sample coefficients ``a`` on
    ``rows``: ``K`` of the residuals ``e0 - dw x`` (:func:`~weightdyn.two_layer.residuals.
    add_samples`), then :func:`_layer_step`."""
    dw = state[2][r]
    K[:] = 0
    add_samples(K, dw, X, E0[q], rows, a)
    _layer_step(state[0][r], state[1][r], dw, refs[0][q], refs[1][q], K, g2)


@njit(cache=True, boundscheck=False, fastmath=_FLAGS, parallel=True)
def sgd_deviation_kernel(
    X, E0, refs, state, lr, S, with_replacement, perm, keys, step0, n, thin, rec1, rec2, diag,
    bound,
):  # fmt: skip
    """Advance ``R`` SGD replicas (Eq. 41) by ``n`` steps in deviation form, in place.

    ``X``, ``E0``, ``refs`` and ``state`` as :attr:`Deviations.refs`, :attr:`Deviations.state`;
    the batches (the same as :func:`weightdyn.two_layer.simulate.sgd_kernel`'s), the records
    (here the deviations, float64), the diagnostics and the divergence flags (returned, (R,)
    bool) as in that kernel. One step: ``a_k = lr / S`` on the batch (module docstring).
    """
    R, P = state[0].shape[0], X.shape[0]
    diverged = np.zeros(R, np.bool_)
    bound2 = bound * bound
    for r in prange(R):
        q = np.int64(r) if E0.shape[0] > 1 else np.int64(0)
        idx = np.empty(S, np.int64)
        u = np.empty(S, np.float64)
        a = np.full(S, lr / S, X.dtype)
        K = np.empty(state[2].shape[1:], X.dtype)
        g2 = np.empty(K.shape[0], X.dtype)
        key, k_rec = keys[r], 0
        for t in range(n):
            draw_step_batch(key, step0 + t, u, P, with_replacement, perm[r], idx)
            _step(r, q, X, E0, state, refs, K, g2, idx, a)
            if (t + 1) % thin == 0:
                if not _record(r, q, k_rec, state, refs, bound2, rec1, rec2, diag):
                    diverged[r] = True
                    break
                k_rec += 1
        if not diverged[r]:
            diverged[r] = not _within_bound(state[0][r], state[1][r], refs[2][q], refs[3][q],
                                            bound2)  # fmt: skip
    return diverged


@njit(cache=True, boundscheck=False, fastmath=_FLAGS, parallel=True)
def sgf_deviation_kernel(
    X, E0, refs, state, drift, amp, keys, step0, n, thin, rec1, rec2, diag, bound
):  # fmt: skip
    """Advance ``R`` replicas by ``n`` Euler-Maruyama steps of the SGF (Eqs. 51-52) in
    deviation form, in place: the normals and the coefficients
    ``a_mu = drift + amp (z_mu - mean z)`` (computed in float64, then rounded) of
    :func:`weightdyn.two_layer.simulate.sgf_kernel`, the rest as
    :func:`sgd_deviation_kernel`."""
    R, P = state[0].shape[0], X.shape[0]
    diverged = np.zeros(R, np.bool_)
    bound2 = bound * bound
    for r in prange(R):
        q = np.int64(r) if E0.shape[0] > 1 else np.int64(0)
        z = np.empty(P, np.float64)
        a = np.empty(P, X.dtype)
        rows = np.arange(P)
        K = np.empty(state[2].shape[1:], X.dtype)
        g2 = np.empty(K.shape[0], X.dtype)
        key, k_rec = keys[r], 0
        for t in range(n):
            base = np.uint64(step0 + t) * np.uint64(P)
            for mu in range(P):
                z[mu] = normal(key, base + np.uint64(mu))
            z_mean = 0.0
            for mu in range(P):
                z_mean += z[mu]
            z_mean /= P
            for mu in range(P):
                a[mu] = drift + amp * (z[mu] - z_mean)
            _step(r, q, X, E0, state, refs, K, g2, rows, a)
            if (t + 1) % thin == 0:
                if not _record(r, q, k_rec, state, refs, bound2, rec1, rec2, diag):
                    diverged[r] = True
                    break
                k_rec += 1
        if not diverged[r]:
            diverged[r] = not _within_bound(state[0][r], state[1][r], refs[2][q], refs[3][q],
                                            bound2)  # fmt: skip
    return diverged
