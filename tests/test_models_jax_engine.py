"""The JAX kernel (weightdyn.models.jax_engine) against the numba kernel of weightdyn.models.

The hand-written networks of :mod:`weightdyn.models.networks` are rewritten as JAX ``apply``
functions with the same flat ``theta`` (column-major vec blocks); the same cell run through the
SGD engine (paper 000 Eqs. 10-11 per step) by :class:`ModelKernel` and by :class:`JaxKernel`
from the same seed follows the same trajectory (same batches, sums to rounding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from weightdyn.counter_rng import uniforms
from weightdyn.models import DeepLinear, Model, OneHidden
from weightdyn.models.jax_engine import JaxKernel, batch_indices, jax_gradient_from_apply
from weightdyn.models.simulate import ModelKernel, kernel_spec
from weightdyn.sgd import Moments, Plan, Settings, State, VectorKernel, divergence_bound, run
from weightdyn.single_layer.simulate import batch_indices_from_uniforms

Apply = Callable[[jax.Array, jax.Array], jax.Array]


def deep_linear_apply(model: DeepLinear) -> Apply:
    """``f = W_L ... W_1 x``; ``W_l[a, b] = theta[off_l + a + N_l b]``, so the block reshaped
    C-order to ``(N_{l-1}, N_l)`` is ``W_l^T``."""
    blocks = [(model.offsets[i], model.offsets[i + 1], s) for i, s in enumerate(model.shapes)]

    def apply(theta: jax.Array, X: jax.Array) -> jax.Array:
        h = X
        for lo, hi, (rows, cols) in blocks:
            h = h @ theta[lo:hi].reshape(cols, rows)
        return h

    return apply


def one_hidden_apply(model: OneHidden) -> Apply:
    """``f = W2 tanh(W1 x + b1) + b2`` with ``theta = [vec(W1~); vec(W2~)]`` (biases last
    column): the blocks reshaped C-order are ``W1~^T`` (N_i + 1, N_h), ``W2~^T`` (N_h + 1, N_o)."""
    Ni, Nh, No, n1 = model.n_in, model.n_hidden, model.n_out, model.n1

    def apply(theta: jax.Array, X: jax.Array) -> jax.Array:
        A = theta[:n1].reshape(Ni + 1, Nh)
        a = jnp.tanh(X @ A[:Ni] + A[Ni])
        B = theta[n1:].reshape(Nh + 1, No)
        return a @ B[:Nh] + B[Nh]

    return apply


def _cell(model: Model, P: int = 300, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, model.n_in))
    Y = rng.standard_normal((P, model.n_out))
    return X, Y, model.random_theta(rng)


CASES = {
    "one_hidden-with": (OneHidden(10, 5, 1, "tanh"), one_hidden_apply, "with", 0.05),
    "deep_linear-without": (DeepLinear([6, 5, 4, 3]), deep_linear_apply, "without", 0.05),
}


def _kernels(name: str, lr: float | None = None) -> tuple[ModelKernel, JaxKernel, np.ndarray]:
    model, make_apply, sampling, lr0 = CASES[name]
    X, Y, theta = _cell(model)
    lr = lr0 if lr is None else lr
    numba_kernel = ModelKernel(X, Y, kernel_spec(model), theta, lr, 10, sampling == "with")
    grad_fn = jax_gradient_from_apply(make_apply(model))
    return numba_kernel, JaxKernel(grad_fn, X, Y, theta, lr, 10, sampling), theta


def _run(kernel: VectorKernel, W0: np.ndarray, plan: Plan) -> tuple[Moments, State]:
    state = State.start(W0.copy(), np.random.default_rng(7), kernel.X.shape[0])
    settings = Settings(plan, divergence_bound(kernel.ref), "TEST", per_replica=True)
    return run(kernel, state, settings), state


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """``max|a - b| / max|b|`` over the finite entries of ``b``."""
    ok = np.isfinite(b)
    return float(np.max(np.abs(a[ok] - b[ok])) / np.max(np.abs(b[ok])))


PLAN = Plan.build(1000, 9000, 3, 3, chunk_steps=2000)  # 10^4 steps, 3 blocks, thin 3


@pytest.mark.parametrize("name", list(CASES))
def test_apply_reproduces_the_hand_written_model(name: str) -> None:
    model, make_apply, _, _ = CASES[name]
    X, Y, theta = _cell(model, P=20)
    out = np.asarray(make_apply(model)(jnp.asarray(theta), jnp.asarray(X)))
    np.testing.assert_allclose(out, model.output(X, theta), rtol=1e-13, atol=1e-13)
    grad = jax_gradient_from_apply(make_apply(model))(theta, X, Y)
    expected = model.replica_gradients(X[None], Y[None], theta[None])[0]
    np.testing.assert_allclose(np.asarray(grad), expected, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", list(CASES))
def test_jax_kernel_follows_the_numba_kernel(name: str) -> None:
    numba_kernel, jax_kernel, theta = _kernels(name)
    W0 = np.tile(theta, (4, 1)) + 0.1 * np.random.default_rng(3).standard_normal((4, theta.size))
    ref_moments, ref_state = _run(numba_kernel, W0, PLAN)
    moments, state = _run(jax_kernel, W0, PLAN)
    assert not state.diverged.any() and not ref_state.diverged.any()
    np.testing.assert_array_equal(moments.n_records, ref_moments.n_records)
    assert (moments.n_records == PLAN.sample_steps // PLAN.n_blocks // PLAN.thin).all()
    np.testing.assert_array_equal(state.perm, ref_state.perm)  # same batches drawn
    assert _rel(state.W, ref_state.W) < 1e-9
    assert _rel(moments.sum_dw, ref_moments.sum_dw) < 1e-9
    assert _rel(moments.sum_dwdw, ref_moments.sum_dwdw) < 1e-9


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_batch_indices_are_the_numpy_kernels(sampling: str) -> None:
    P, S, R = 40, 7, 3
    state = State.start(np.zeros((R, 1)), np.random.default_rng(2), P)
    u = uniforms(state.keys, 0, 120, S)
    expected, perm = batch_indices_from_uniforms(u, P, sampling, state.perm)
    first = batch_indices(state.keys, state.perm, 0, 50, S, sampling)
    second = batch_indices(state.keys, state.perm, 50, 70, S, sampling)
    np.testing.assert_array_equal(np.concatenate([first, second]), expected)
    if perm is not None:
        np.testing.assert_array_equal(state.perm, perm)


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_jax_kernel_steps_on_exactly_those_batches(sampling: str) -> None:
    """With ``X = 1_P`` and ``grad_fn = -sum_b Xb``, ``lr = 1``, the state counts how often each
    sample was drawn; it equals the counts of the NumpyKernel rule's indices."""
    P, S, R, steps = 30, 4, 3, 640
    X = np.eye(P)

    def grad_fn(theta: jax.Array, Xb: jax.Array, Yb: jax.Array) -> jax.Array:
        return -jnp.sum(Xb, axis=0)

    kernel = JaxKernel(grad_fn, X, np.zeros((P, 1)), np.zeros(P), 1.0, S, sampling)
    moments, state = _run(kernel, np.zeros((R, P)), Plan.build(64, steps - 64, 2, 2, 128))
    keys = State.start(np.zeros((R, P)), np.random.default_rng(7), P).keys
    idx, _ = batch_indices_from_uniforms(uniforms(keys, 0, steps, S), P, sampling)
    counts = np.stack([np.bincount(idx[:, r].ravel(), minlength=P) for r in range(R)])
    np.testing.assert_array_equal(state.W, counts)
    assert (moments.n_records == (steps - 64) // 2 // 2).all()


@pytest.mark.parametrize("burnin", [0, 200])
def test_divergence_flags_the_replica_like_the_numba_kernel(burnin: int) -> None:
    """Replicas started far out diverge (in burn-in, at the first record, or after a few
    records): the same replicas are flagged at the same record, the others run on alone."""
    numba_kernel, jax_kernel, theta = _kernels("deep_linear-without", lr=0.1)
    W0 = np.tile(theta, (6, 1)) * np.array([0.5, 1.0, 1.2, 1.4, 1.7, 2.0])[:, None]
    plan = Plan.build(burnin, 1800, 3, 3, chunk_steps=500)
    ref_moments, ref_state = _run(numba_kernel, W0, plan)
    moments, state = _run(jax_kernel, W0, plan)
    np.testing.assert_array_equal(state.diverged, ref_state.diverged)
    assert state.diverged.any() and not state.diverged.all()
    np.testing.assert_array_equal(moments.n_records, ref_moments.n_records)
    if burnin == 0:  # a replica recorded before it diverged
        assert (moments.n_records[state.diverged].sum(axis=1) > 0).any()
    live = ~state.diverged
    assert np.isnan(moments.sum_dw[~live]).all() and np.isfinite(moments.sum_dw[live]).all()
    assert _rel(state.W[live], ref_state.W[live]) < 1e-9
    assert _rel(moments.sum_dwdw[live], ref_moments.sum_dwdw[live]) < 1e-9
    with np.errstate(invalid="ignore"):
        inside = np.all(np.abs(state.W) <= divergence_bound(theta), axis=1)
    np.testing.assert_array_equal(inside, live)


def test_chunk_size_changes_no_result() -> None:
    _, jax_kernel, theta = _kernels("one_hidden-with")
    W0 = np.tile(theta, (3, 1))
    base, base_state = _run(jax_kernel, W0, Plan.build(300, 2880, 3, 2, chunk_steps=96))
    other, other_state = _run(jax_kernel, W0, Plan.build(300, 2880, 3, 2, chunk_steps=10**4))
    assert _rel(other_state.W, base_state.W) <= 1e-12
    for name in base.sums:
        assert _rel(other.sums[name], base.sums[name]) <= 1e-12
    np.testing.assert_array_equal(other.n_records, base.n_records)


def test_lower_triangle_sums_are_the_full_ones() -> None:
    _, jax_kernel, theta = _kernels("deep_linear-without")
    W0, plan = np.tile(theta, (3, 1)), Plan.build(100, 1920, 2, 2, chunk_steps=640)
    full, _ = _run(jax_kernel, W0, plan)
    lower, _ = _run(replace(jax_kernel, lower_triangle=True), W0, plan)
    assert _rel(lower.sum_dwdw, full.sum_dwdw) <= 1e-12
    np.testing.assert_array_equal(lower.sum_dw, full.sum_dw)


def test_a_run_compiles_once_per_call_shape() -> None:
    """Burn-in and sampling chunks, each with a shorter final chunk: at most four shapes; a
    second run (another lr too) and a second kernel on the same gradient compile nothing."""
    model, make_apply, _, _ = CASES["one_hidden-with"]
    X, Y, theta = _cell(model)
    grad_fn = jax_gradient_from_apply(make_apply(model))
    kernel = JaxKernel(grad_fn, X, Y, theta, 0.05, 10, "with")
    plan = Plan.build(500, 2700, 3, 3, chunk_steps=384)
    _run(kernel, np.tile(theta, (2, 1)), plan)
    compiled = kernel._chunk._cache_size()
    assert compiled <= 4
    _run(JaxKernel(grad_fn, X, Y, theta, 0.02, 10, "with"), np.tile(theta, (2, 1)), plan)
    assert kernel._chunk._cache_size() == compiled
