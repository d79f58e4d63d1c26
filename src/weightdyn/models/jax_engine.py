"""A JAX kernel of the SGD engine: any jax-traceable mini-batch gradient, Eqs. 10-11 per step.

One SGD step of replica ``r`` is paper 000 Eqs. 10-11 with a network ``f`` in place of ``w^T x``::

    theta <- theta - lr grad_fn(theta, X[B], Y[B]),   grad_fn = grad of (1/S) sum_{mu in B} L_mu,

``B`` the ``S`` indices of the step drawn with or without replacement (App. C). The batches are
those of :class:`~weightdyn.models.simulate.ModelKernel` and
:class:`~weightdyn.models.simulate.NumpyKernel`: step ``t`` of replica ``r`` uses the uniforms
``t S .. t S + S - 1`` of its counter-based stream (:func:`weightdyn.counter_rng.uniforms`) and
the rule of :func:`weightdyn.minibatch.draw_batch` (the same as
:func:`weightdyn.single_layer.simulate.batch_indices_from_uniforms`), so a JAX run follows the
same trajectory as the numba kernel up to floating-point rounding.

:class:`JaxKernel` draws the indices of a call on the host, then runs one jit-compiled
``lax.scan`` over the call's steps with the step ``vmap``-ped over the replicas (on whatever
device JAX uses: CPU, or a GPU where one is found; nothing here is device specific). The scan
returns the states after every ``thin``-th step; the float64 moment sums of the records
``dw = theta - ref`` are added on the host in groups of :data:`~weightdyn.sgd.RECORD_GROUP`
records (one matrix product per group and replica), aligned to the block start like the
engine's chunks, so no result bit depends on the chunking. Divergence is that of
:class:`ModelKernel`: a replica beyond ``record.bound`` (or non-finite) at a record or at the end
of a call is flagged in ``state.diverged`` and frozen; its later records are not summed.

``jax_enable_x64`` is switched on at import: the trajectories are float64 like the numba ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numba import njit

from weightdyn.blas import add_gram_lower
from weightdyn.counter_rng import uniforms
from weightdyn.minibatch import draw_batch
from weightdyn.sgd.engine import RECORD_GROUP, Record, State, VectorKernel

jax.config.update("jax_enable_x64", True)

__all__ = ["GradFn", "JaxKernel", "batch_indices", "jax_gradient_from_apply"]

#: ``grad_fn(theta (n,), Xb (S, N_i), Yb (S, N_o)) -> (n,)``: the mean mini-batch gradient
GradFn = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]
SAMPLING_MODES = ("with", "without")


def jax_gradient_from_apply(
    apply: Callable[[jax.Array, jax.Array], jax.Array],
    loss: str = "squared",
    weight_decay: float = 0.0,
) -> GradFn:
    """The mean mini-batch gradient of Eqs. 10-11 for the network ``apply(theta, X) -> (P, N_o)``.

    ``loss="squared"``: ``L_B(theta) = (1/S) sum_{mu in B} |f(x^mu) - y^mu|^2 / 2 +
    weight_decay |theta|^2 / 2`` (paper 000 App. B's ``chi``); returns ``jax.grad`` of it in
    ``theta``, a pure function ``grad_fn(theta, Xb, Yb) -> (n,)``.
    """
    if loss != "squared":
        raise ValueError(f"loss must be 'squared', got {loss!r}")
    chi = float(weight_decay)

    def batch_loss(theta: jax.Array, Xb: jax.Array, Yb: jax.Array) -> jax.Array:
        residual = apply(theta, Xb) - Yb
        data = 0.5 * jnp.sum(residual * residual) / Xb.shape[0]
        return data + 0.5 * chi * jnp.sum(theta * theta) if chi else data

    return jax.grad(batch_loss)


@njit(cache=True)
def _draw_all(u: np.ndarray, P: int, with_replacement: bool, perm: np.ndarray) -> np.ndarray:
    """Indices (n, R, S) from uniforms ``u`` (n, R, S) by :func:`draw_batch`; ``perm`` (R, P)
    advanced in place."""
    n, R, S = u.shape
    out = np.empty((n, R, S), np.int64)
    for r in range(R):
        for t in range(n):
            draw_batch(u[t, r], P, with_replacement, perm[r], out[t, r])
    return out


def batch_indices(
    keys: np.ndarray, perm: np.ndarray, step0: int, n_steps: int, S: int, sampling: str
) -> np.ndarray:
    """The mini-batch indices (n_steps, R, S) of steps ``step0 ..`` of the replicas ``keys``
    (those of :class:`~weightdyn.models.simulate.NumpyKernel`, App. C); without replacement the
    permutations ``perm`` (R, P) are advanced in place."""
    if sampling not in SAMPLING_MODES:
        raise ValueError(f"sampling must be one of {SAMPLING_MODES}, got {sampling!r}")
    u = uniforms(keys, step0, n_steps, S)
    return _draw_all(u, perm.shape[1], sampling == "with", perm)


@functools.lru_cache(maxsize=64)
def _scan_chunk(grad_fn: GradFn) -> Callable[..., Any]:
    """The jitted call body ``(theta, alive, X, Y, idx_rec, idx_tail, lr, bound) -> (theta,
    alive, states, live)`` of Eqs. 10-11: ``idx_rec`` (K, thin, R, S) the steps of ``K``
    records (each closing with a record: the states (R, n) and who is live), ``idx_tail``
    (m, R, S) further steps. One per ``grad_fn``; XLA compiles it once per shape."""
    Arr = jax.Array

    def steps(X: Arr, Y: Arr, theta: Arr, alive: Arr, idx: Arr, lr: Arr) -> Arr:
        def body(th: Arr, i: Arr) -> tuple[Arr, None]:
            g = jax.vmap(lambda t, j: grad_fn(t, X[j], Y[j]))(th, i)  # Eqs. 10-11
            return jnp.where(alive[:, None], th - lr * g, th), None

        return jax.lax.scan(body, theta, idx)[0]

    def chunk(theta: Arr, alive: Arr, X: Arr, Y: Arr, idx_rec: Arr, idx_tail: Arr, lr: Arr,
              bound: Arr) -> tuple[Arr, Arr, Arr | None, Arr | None]:  # fmt: skip
        def record(carry: tuple[Arr, Arr], idx: Arr) -> tuple[tuple[Arr, Arr], tuple[Arr, Arr]]:
            th, al = carry
            th = steps(X, Y, th, al, idx, lr)
            al = al & jnp.all(jnp.abs(th) <= bound, axis=1)  # False for NaN
            return (th, al), (th, al)

        states = live = None
        if idx_rec.shape[0]:
            (theta, alive), (states, live) = jax.lax.scan(record, (theta, alive), idx_rec)
        if idx_tail.shape[0]:
            theta = steps(X, Y, theta, alive, idx_tail, lr)
        return theta, alive, states, live

    return jax.jit(chunk)


@dataclass(frozen=True, eq=False)
class JaxKernel(VectorKernel):
    """Eqs. 10-11 with a JAX mini-batch gradient behind the engine's kernel interface
    (:mod:`weightdyn.sgd`): ``grad_fn(theta (n,), Xb (S, N_i), Yb (S, N_o)) -> (n,)`` (pure,
    traceable, e.g. :func:`jax_gradient_from_apply`), data ``X`` (P, N_i), ``Y`` (P, N_o),
    records ``dw = theta - ref``, learning rate ``lr``, batch size ``S``, ``sampling`` "with"
    or "without" replacement (App. C); a diverged replica stops alone. ``lower_triangle``: add
    only the lower triangle of ``dw dw^T`` (one DSYRK per record group and replica; the engine
    completes the sums), else the full product. ``basis`` (n, k): second moments of
    ``basis^T dw`` (:class:`~weightdyn.sgd.VectorKernel`)."""

    grad_fn: GradFn
    X: np.ndarray
    Y: np.ndarray
    ref: np.ndarray
    lr: float
    S: int
    sampling: str
    lower_triangle: bool = False
    basis: np.ndarray | None = None
    _chunk: Callable[..., Any] = field(init=False, repr=False)
    _data: tuple[jax.Array, jax.Array] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.sampling not in SAMPLING_MODES:
            raise ValueError(f"sampling must be one of {SAMPLING_MODES}, got {self.sampling!r}")
        if not 1 <= self.S <= self.X.shape[0]:
            raise ValueError(f"need 1 <= S <= P = {self.X.shape[0]}, got S = {self.S}")
        object.__setattr__(self, "_chunk", _scan_chunk(self.grad_fn))
        data = (jnp.asarray(self.X, jnp.float64), jnp.asarray(self.Y, jnp.float64))
        object.__setattr__(self, "_data", data)

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """``n_steps`` steps (Eqs. 10-11) of every live replica from global step ``step0`` by
        one jitted scan, recording after every ``record.thin``-th step (burn-in calls, whose
        ``thin`` exceeds ``n_steps``, record nothing)."""
        R, S = state.W.shape[0], self.S
        idx = batch_indices(state.keys, state.perm, step0, n_steps, S, self.sampling)
        K = n_steps // record.thin if record.block is not None else 0
        thin = record.thin if K else 1
        idx_rec = idx[: K * thin].reshape(K, thin, R, S)
        theta, alive, states, live = self._chunk(
            jnp.asarray(state.W), jnp.asarray(~state.diverged), *self._data,
            jnp.asarray(idx_rec), jnp.asarray(idx[K * thin :]), float(self.lr), record.bound,
        )  # fmt: skip
        state.W[:] = np.asarray(theta)
        with np.errstate(invalid="ignore"):  # the end-of-call check of ModelKernel
            alive = np.asarray(alive) & np.all(np.abs(state.W) <= record.bound, axis=1)
        state.diverged |= ~alive
        if K:
            self._add_records(np.asarray(states), np.asarray(live), record)

    def _add_records(self, states: np.ndarray, live: np.ndarray, record: Record) -> None:
        """The records ``states`` (K, R, n) of the replicas ``live`` (K, R) into the block's
        float64 sums, in groups of ``RECORD_GROUP`` records (one Gram product per group and
        replica); the first ``len(record.rec)`` states into ``record.rec``."""
        b = record.block
        record.rec[:] = states[: len(record.rec)]
        d = states - self.ref
        d[~live] = 0.0
        d = np.ascontiguousarray(d.transpose(1, 0, 2))  # (R, K, n): each group C-contiguous
        y = d if self.basis is None else np.ascontiguousarray(d @ self.basis)
        for k0 in range(0, d.shape[1], RECORD_GROUP):
            record.sum_dw[:, b] += d[:, k0 : k0 + RECORD_GROUP].sum(axis=1)
            group = y[:, k0 : k0 + RECORD_GROUP]
            for r in np.flatnonzero(live[k0 : k0 + RECORD_GROUP].any(axis=0)):
                _add_gram(record.sum_dwdw[r, b], group[r], self.lower_triangle)
        record.n_records[:, b] += live.sum(axis=0)


def _add_gram(C: np.ndarray, G: np.ndarray, lower: bool) -> None:
    """``C += G^T G`` for the records ``G`` (k, n): the lower triangle by one DSYRK
    (:func:`weightdyn.blas.add_gram_lower`, no temporary) if ``lower``, else the full product."""
    if lower:
        add_gram_lower(C, G, G.shape[0])
    else:
        C += G.T @ G
