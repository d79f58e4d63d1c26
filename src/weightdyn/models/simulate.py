"""Mini-batch SGD for ``R`` replicas of any :class:`~weightdyn.models.base.Model`.

One step of replica ``r`` is paper 000 Eqs. 10-11 with the network in place of ``w^T x``::

    theta <- theta - lr (1/S) sum_{mu in B} g^mu(theta),   g^mu = J_mu^T (f(x^mu) - y^mu),

on a mini-batch ``B`` of ``S`` indices drawn with or without replacement (App. C). Two engines
give the same trajectory from the same random draws:

* ``"numpy"``: any model, all replicas in one array operation per step through
  :meth:`Model.replica_gradients` (a loop over replicas for a model that does not override it);
* ``"kernel"``: a numba kernel for :class:`~weightdyn.models.DeepLinear` (any depth) and
  :class:`~weightdyn.models.OneHidden` (tanh, softplus), replicas split over numba's threads
  (``prange``), the moments accumulated inside it;
* ``"jax"``: :class:`~weightdyn.models.jax_engine.JaxKernel`, one compiled ``lax.scan`` per call
  over a ``vmap`` of replicas, for a model written in JAX and for the hand-written models
  through their autodiff twins (:func:`jax_twin`, same ``theta`` layout).

``"auto"`` takes JAX for a JAX model; for a hand-written model the numba kernel, or JAX where
the run is at least :data:`JAX_MIN_REPLICA_STEPS` replica-steps (JAX runs about twice as many
replica-steps per second, but pays its import and compilation once per cell); numpy otherwise.

Randomness: step ``t`` of replica ``r`` chooses its batch by the uniforms ``t S .. t S + S - 1``
of the replica's counter-based stream (:mod:`weightdyn.counter_rng`, key from one draw of the
caller's generator) through :func:`weightdyn.minibatch.draw_step_batch`. A replica's trajectory
depends only on its key and the global step index, never on the thread count or the chunking,
so kernel results are bit-identical for any of them.

Moments: after every ``thin``-th step, ``d = theta - theta_ref`` enters the per-(replica, time
block) sums ``sum_d`` and ``sum_dd`` (``d d^T`` flattened, C order). A replica whose parameters
leave ``[-bound, bound]`` (``bound = 1e6 (max|theta_ref| + 1)``) or turn non-finite at a record
is flagged ``diverged``, stops, and its sums are NaN.

Both are kernels of the SGD engine (:mod:`weightdyn.sgd`: :class:`ModelKernel`,
:class:`NumpyKernel`), which owns the plan, the streams, the sums and the divergence policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numba import njit, prange
from numpy.typing import ArrayLike

from weightdyn.counter_rng import uniforms
from weightdyn.minibatch import draw_step_batch
from weightdyn.models.base import FloatArray, Model
from weightdyn.models.networks import DeepLinear, OneHidden
from weightdyn.sgd.engine import (
    Record,
    Schedule,
    Settings,
    State,
    Update,
    VectorKernel,
    divergence_bound,
)
from weightdyn.sgd.engine import run as engine_run
from weightdyn.single_layer.simulate import _within, batch_indices_from_uniforms

__all__ = [
    "CHUNK_STEPS",
    "KERNEL_ACTIVATIONS",
    "ModelKernel",
    "NumpyKernel",
    "SGDRun",
    "kernel_spec",
    "reference_chain",
    "run_sgd",
    "sgd_kernel",
]

Engine = Literal["auto", "jax", "kernel", "numpy"]
ENGINES = ("auto", "jax", "kernel", "numpy")
#: bytes of the records one JAX kernel call returns; its calls are shortened to stay below
JAX_RECORD_BYTES = 64 << 20
#: from this many replica-steps on, ``auto`` runs a hand-written model by JAX (its twin): one
#: thread, R = 16, JAX 1.27e6 / 7.9e5 and numba 5.9e5 / 5.0e5 replica-steps/s on the tanh
#: n = 61 / deep linear L = 3 cells (benchmarks/jax_engine_throughput.py), against about 2 s of
#: JAX import and compilation per cell: JAX saves 2 s from about 2.5e6 / 3e6 replica-steps
JAX_MIN_REPLICA_STEPS = 3_000_000
SAMPLING_MODES = ("with", "without")
#: activation codes of the compiled one-hidden-layer gradient
KERNEL_ACTIVATIONS = {"tanh": 0, "softplus": 1}
_DEEP, _ONE_HIDDEN = 0, 1
#: the kernel-call length of this package's runs (:class:`weightdyn.sgd.Schedule`'s
#: ``chunk_steps``; changes no result bit)
CHUNK_STEPS = 1 << 14


# ------------------------------------------------------------------------- model specs


def kernel_spec(model: Model) -> tuple[np.ndarray, int] | None:
    """``(spec, work_size)`` describing ``model`` to :func:`sgd_kernel`, or None if no kernel.

    Deep linear: ``[0, L, N_0 .. N_L, offset_0 .. offset_L]``; one hidden layer:
    ``[1, N_i, N_h, N_o, bias, activation code]``. ``work_size`` is the scratch per replica.
    The kernel's gradient is the papers' squared error without weight decay: a model with
    another objective (:attr:`Model.paper_objective` false) has no kernel.
    """
    if not model.paper_objective:
        return None
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
        draw_step_batch(key, step0 + t, u, P, with_replacement, perm, idx)  # App. C sampling
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


# ------------------------------------------------------------------- kernel adapters


@dataclass(frozen=True)
class ModelKernel(VectorKernel):
    """:func:`sgd_kernel` behind the engine's kernel interface (:mod:`weightdyn.sgd`): Eqs.
    10-11 for the network ``spec`` (:func:`kernel_spec`); records ``d = theta - ref`` (a
    diverged replica stops alone)."""

    X: np.ndarray
    Y: np.ndarray
    spec: tuple[np.ndarray, int]
    ref: np.ndarray
    lr: float
    S: int
    with_replacement: bool
    lower_triangle: bool = False

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """``n_steps`` steps of every live replica from global step ``step0``, recording (burn-in
        calls record nothing, as their ``thin`` exceeds ``n_steps``)."""
        R, B, n = record.sum_dw.shape
        sgd_kernel(
            self.X, self.Y, state.W, *self.spec, self.lr, self.S, self.with_replacement,
            state.perm, state.keys, step0, n_steps, record.thin, self.ref, record.block or 0,
            record.sum_dw, record.sum_dwdw.reshape(R, B, n * n), record.n_records, record.bound,
            state.diverged,
        )  # fmt: skip


@dataclass(frozen=True)
class NumpyKernel(VectorKernel):
    """Any model's steps by :meth:`Model.replica_gradients`, with the draws and records of
    :class:`ModelKernel` (same trajectory); ``basis`` (n, k): second moments of
    ``basis^T dw`` (:class:`~weightdyn.sgd.VectorKernel`)."""

    model: Model
    X: np.ndarray
    Y: np.ndarray
    ref: np.ndarray
    lr: float
    S: int
    sampling: str
    lower_triangle: bool = False
    basis: np.ndarray | None = None

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """``n_steps`` steps of every live replica from global step ``step0``, recording."""
        u = uniforms(state.keys, step0, n_steps, self.S)
        idx, perm = batch_indices_from_uniforms(u, self.X.shape[0], self.sampling, state.perm)
        if perm is not None:
            state.perm[:] = perm
        for t in range(n_steps):
            live = ~state.diverged
            with np.errstate(all="ignore"):
                G = self.model.replica_gradients(self.X[idx[t]], self.Y[idx[t]], state.W)
            state.W[live] -= self.lr * G[live]
            if (t + 1) % record.thin == 0:
                self._record(state, record)

    def _record(self, state: State, record: Record) -> None:
        """Flag the replicas beyond the bound; a record of the others into the block's sums."""
        with np.errstate(invalid="ignore"):
            state.diverged |= ~state.diverged & ~np.all(np.abs(state.W) <= record.bound, axis=1)
        live, b = ~state.diverged, record.block
        d = state.W[live] - self.ref
        record.sum_dw[live, b] += d
        y = d if self.basis is None else d @ self.basis
        record.sum_dwdw[live, b] += np.einsum("ri,rj->rij", y, y)
        record.n_records[live, b] += 1


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
    ``sum_dd`` (R, B, n^2, ``d d^T`` C order; (R, B, k^2) of ``y = basis^T d`` with a
    ``basis`` (n, k)), ``n_records`` (R, B); the final parameters (R, n), per-replica
    divergence flags (NaN sums where set), the engine used and the speed in replica-steps per
    second."""

    sum_d: FloatArray
    sum_dd: FloatArray
    n_records: np.ndarray
    final: FloatArray
    diverged: np.ndarray
    engine: str
    steps_per_second: float
    basis: FloatArray | None = None


def _engine(model: Model, engine: Engine, reduced: bool = False, replica_steps: int = 0) -> str:
    """The engine a run uses: ``engine`` if the model has it, else ValueError; ``auto``: the
    numba kernel (a hand-written model under the papers' objective) for runs below
    :data:`JAX_MIN_REPLICA_STEPS` replica-steps, else JAX (a JAX model, or a hand-written one's
    twin, any objective), else numpy (the measured order, README). ``reduced``: moments in a
    basis, which the numba kernel does not record."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    kernel = kernel_spec(model) is not None
    has = {"kernel": kernel and not reduced, "jax": _is_jax(model) or _has_twin(model),
           "numpy": True}  # fmt: skip
    if engine != "auto":
        if not has[engine]:
            name = type(model).__name__
            what = "moments in a basis" if reduced and kernel else "form"
            raise ValueError(f"engine {engine!r} has no {what} of {name} (objective "
                             f"{model.loss_function.name}, weight decay {model.weight_decay:g}); "
                             f"use one of {[e for e, ok in has.items() if ok]}")  # fmt: skip
        return engine
    if has["kernel"] and replica_steps < JAX_MIN_REPLICA_STEPS:
        return "kernel"
    return "jax" if has["jax"] else "numpy"


def _is_jax(model: Model) -> bool:
    return callable(getattr(model, "minibatch_gradient_fn", None))


def _has_twin(model: Model) -> bool:
    """Whether :func:`jax_twin` has a form of ``model`` (any loss and decay)."""
    if isinstance(model, OneHidden):
        return model.activation in KERNEL_ACTIVATIONS
    return isinstance(model, DeepLinear)


def _jax_kernel(model: Model, X, Y, theta_ref, update: Update, basis) -> VectorKernel:
    from weightdyn.models.jax_engine import JaxKernel  # JAX only where a run uses it

    S = int(update.batch_size)
    grad = (model if _is_jax(model) else jax_twin(model)).minibatch_gradient_fn()
    return JaxKernel(grad, X, Y, theta_ref, float(update.lr), S, update.sampling,
                     lower_triangle=True, basis=basis)  # fmt: skip


def jax_twin(model: Model) -> Model:
    """The autodiff twin of a hand-written :class:`DeepLinear` or :class:`OneHidden` (same
    ``theta`` layout, loss and decay; :mod:`weightdyn.models.jax_model`)."""
    from weightdyn.models import jax_model

    objective = {"loss": model.loss_function, "weight_decay": model.weight_decay}
    if isinstance(model, DeepLinear):
        return jax_model.jax_deep_linear(model.widths, **objective)
    if _has_twin(model):
        return jax_model.jax_one_hidden(model.n_in, model.n_hidden, model.n_out,
                                        model.activation, model.bias, **objective)  # fmt: skip
    raise ValueError(f"{type(model).__name__} has no JAX twin")


def _jax_schedule(schedule: Schedule, R: int, n: int) -> Schedule:
    """``schedule`` with kernel calls short enough that a call's records (``n_steps / thin``
    of (R, n) float64) stay below :data:`JAX_RECORD_BYTES` (no result depends on it)."""
    per_record = 8 * R * n
    steps = max(1, JAX_RECORD_BYTES // per_record) * schedule.thin
    return replace(schedule, chunk_steps=min(schedule.chunk_steps, steps))


def _check_run(model, X, Y, theta0, theta_ref, S, sampling):
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
    return np.ascontiguousarray(X), np.ascontiguousarray(Y), Theta, theta_ref


def run_sgd(
    model: Model,
    X: ArrayLike,
    Y: ArrayLike,
    theta0: ArrayLike,
    *,
    theta_ref: ArrayLike,
    update: Update,
    schedule: Schedule,
    rng: np.random.Generator,
    progress: Callable[[str], None] | None = None,
    engine: Engine = "auto",
    basis: ArrayLike | None = None,
) -> SGDRun:
    """SGD (Eqs. 10-11) of the replicas ``theta0`` (R, n) with the step ``update``
    (:class:`weightdyn.sgd.Update`: ``lr``, ``batch_size``, ``sampling``) through the plan
    ``schedule`` (:class:`weightdyn.sgd.Schedule`): ``burnin_steps`` unrecorded steps (the
    model drivers use 0 and a separate run), then ``sample_steps`` steps in ``n_blocks`` equal
    time blocks, recording every ``thin`` steps (module docstring), by the engine
    (:func:`weightdyn.sgd.run`) with :class:`ModelKernel` or :class:`NumpyKernel`.
    ``schedule.chunk_steps`` only sets how often ``progress`` hears (rounded to whole record
    groups); no result depends on it. :mod:`weightdyn.models.cell` passes :data:`CHUNK_STEPS`
    (``1 << 14``, the former default of this function). ``basis`` (n, k, orthonormal
    columns): the second moments of ``basis^T d`` only (k^2 floats per group instead of n^2;
    the JAX and numpy engines).
    """
    update.require_plain("models.simulate.run_sgd")
    S, sampling = int(update.batch_size), update.sampling
    X, Y, Theta, theta_ref = _check_run(model, X, Y, theta0, theta_ref, S, sampling)
    basis = _check_basis(basis, model.n_params)
    plan = schedule.plan()
    used = _engine(model, engine, basis is not None, Theta.shape[0] * plan.total_steps)
    lr = float(update.lr)
    if used == "kernel":
        kernel = ModelKernel(X, Y, kernel_spec(model), theta_ref, lr, S, sampling == "with")
    elif used == "jax":
        kernel = _jax_kernel(model, X, Y, theta_ref, update, basis)
        plan = _jax_schedule(schedule, *Theta.shape).plan()
    else:
        kernel = NumpyKernel(model, X, Y, theta_ref, lr, S, sampling, basis=basis)
    bound = divergence_bound(theta_ref)
    settings = Settings(plan, bound, f"SGD ({used})", progress, per_replica=True)
    state = State.start(Theta, rng, X.shape[0])
    m = engine_run(kernel, state, settings)
    R, B, k = m.sum_dwdw.shape[:3]
    speed = R * m.steps_done / max(m.elapsed_s, 1e-12)
    return SGDRun(m.sum_dw, m.sum_dwdw.reshape(R, B, k * k), m.n_records, state.W, state.diverged,
                  used, speed, basis)  # fmt: skip


def _check_basis(basis: ArrayLike | None, n: int) -> FloatArray | None:
    """``basis`` as a C-contiguous (n, k) float array with orthonormal columns, or None."""
    if basis is None:
        return None
    U = np.ascontiguousarray(basis, dtype=float)
    if U.ndim != 2 or U.shape[0] != n or not 1 <= U.shape[1] <= n:
        raise ValueError(f"basis must be (n_params = {n}, k) with 1 <= k <= n, got {U.shape}")
    if not np.allclose(U.T @ U, np.eye(U.shape[1]), atol=1e-10):
        raise ValueError("basis must have orthonormal columns (basis^T basis = 1)")
    return U
