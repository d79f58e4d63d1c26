"""SGD of any model (paper 000 Eqs. 10-11, App. C sampling): compiled kernel, numpy engine and a
plain one-chain loop on the same random draws."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from weightdyn.counter_rng import replica_keys, uniforms
from weightdyn.models import DeepLinear, Linear, Model, OneHidden
from weightdyn.models.simulate import CHUNK_STEPS, kernel_spec, reference_chain, run_sgd
from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer.simulate import batch_indices_from_uniforms

KERNEL_MODELS = {
    "deep2": DeepLinear([3, 4, 2]),
    "deep4": DeepLinear([3, 4, 2, 3, 2]),
    "tanh": OneHidden(3, 4, 2, "tanh"),
    "softplus_nobias": OneHidden(3, 5, 1, "softplus", bias=False),
}


def problem(model: Model, P: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(P, model.n_in))
    Y = rng.normal(size=(P, model.n_out))
    return X, Y, model.random_theta(rng)


def run(model, X, Y, theta, engine, sampling="with", R=3, n_steps=48, thin=4, n_blocks=2,
        lr=0.05, seed=7, chunk_steps=CHUNK_STEPS, **kw):  # fmt: skip
    return run_sgd(
        model, X, Y, np.tile(theta, (R, 1)), theta_ref=theta, update=Update(lr, 4, sampling),
        schedule=Schedule(0, n_steps, thin, n_blocks, chunk_steps),
        rng=np.random.default_rng(seed), engine=engine, **kw,
    )  # fmt: skip


def rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("name", [*KERNEL_MODELS, "linear"])
def test_replica_gradients_are_batch_means_of_per_sample_gradients(name: str) -> None:
    model = KERNEL_MODELS.get(name, Linear(3, 2))
    X, Y, _ = problem(model)
    rng = np.random.default_rng(1)
    Theta = np.stack([model.random_theta(rng) for _ in range(3)])
    idx = rng.integers(0, X.shape[0], size=(3, 5))
    expected = [
        model.per_sample_gradients(X[i], Y[i], t).mean(axis=0)
        for i, t in zip(idx, Theta, strict=True)
    ]
    np.testing.assert_allclose(model.replica_gradients(X[idx], Y[idx], Theta), expected,
                               rtol=0, atol=1e-14)  # fmt: skip


@pytest.mark.parametrize("sampling", ["with", "without"])
@pytest.mark.parametrize("name", list(KERNEL_MODELS))
def test_kernel_equals_numpy_engine_and_plain_loop(name: str, sampling: str) -> None:
    model = KERNEL_MODELS[name]
    X, Y, theta = problem(model)
    kern = run(model, X, Y, theta, "kernel", sampling)
    nump = run(model, X, Y, theta, "numpy", sampling)
    assert (kern.engine, nump.engine) == ("kernel", "numpy")
    assert not kern.diverged.any() and not nump.diverged.any()
    for a, b in ((kern.final, nump.final), (kern.sum_d, nump.sum_d), (kern.sum_dd, nump.sum_dd)):
        assert rel(a, b) < 1e-12
    np.testing.assert_array_equal(kern.n_records, nump.n_records)
    np.testing.assert_array_equal(kern.n_records, 48 // 4 // 2)
    # the plain loop on the batches the counter stream chose
    u = uniforms(replica_keys(np.random.default_rng(7), 3), 0, 48, 4)
    idx, _ = batch_indices_from_uniforms(u, X.shape[0], sampling)
    for r in range(3):
        assert rel(kern.final[r], reference_chain(model, X, Y, theta, 0.05, idx[:, r])) < 1e-12


def test_moments_are_sums_over_the_records() -> None:
    model = KERNEL_MODELS["tanh"]
    X, Y, theta = problem(model)
    out = run(model, X, Y, theta, "kernel", R=2, n_steps=24, thin=3, n_blocks=2)
    u = uniforms(replica_keys(np.random.default_rng(7), 2), 0, 24, 4)
    idx, _ = batch_indices_from_uniforms(u, X.shape[0], "with")
    for r in range(2):
        path, t = [], theta
        for step in range(24):
            t = reference_chain(model, X, Y, t, 0.05, idx[step : step + 1, r])
            if (step + 1) % 3 == 0:
                path.append(t - theta)
        d = np.array(path).reshape(2, 4, -1)  # (block, record, n)
        assert rel(out.sum_d[r], d.sum(axis=1)) < 1e-12
        dd = np.einsum("bki,bkj->bij", d, d).reshape(2, -1)
        assert rel(out.sum_dd[r], dd) < 1e-12


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_kernel_is_bit_identical_for_any_thread_count_and_chunking(sampling: str) -> None:
    model = KERNEL_MODELS["deep4"]
    X, Y, theta = problem(model)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = run(model, X, Y, theta, "kernel", sampling, R=5, n_steps=96, chunk_steps=8)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = run(model, X, Y, theta, "kernel", sampling, R=5, n_steps=96)
    finally:
        numba.set_num_threads(before)
    for name in ("final", "sum_d", "sum_dd", "n_records"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name))


def test_schedule_burn_in_is_the_first_steps_of_one_unrecorded_run() -> None:
    """Schedule(burn-in 24, 48 sampling steps): both engines end where a 72-step run ends, with
    only the sampling steps' records (the models' cells pass burn-in 0 and run twice)."""
    model = KERNEL_MODELS["tanh"]
    X, Y, theta = problem(model)
    whole = run(model, X, Y, theta, "kernel", n_steps=72, thin=4, n_blocks=1)
    for engine in ("kernel", "numpy"):
        out = run_sgd(
            model, X, Y, np.tile(theta, (3, 1)), theta_ref=theta, update=Update(0.05, 4),
            schedule=Schedule(24, 48, 4, 2), rng=np.random.default_rng(7), engine=engine,
        )  # fmt: skip
        assert rel(out.final, whole.final) < 1e-12
        np.testing.assert_array_equal(out.n_records, np.full((3, 2), 6))


@pytest.mark.parametrize("engine", ["kernel", "numpy"])
def test_divergence_is_flagged_per_replica_with_nan_moments(engine: str) -> None:
    model = KERNEL_MODELS["tanh"]
    X, Y, theta = problem(model)
    out = run(model, X, Y, theta, engine, lr=1e3, n_steps=400)
    assert out.diverged.all()
    assert np.isnan(out.sum_d).all() and np.isnan(out.sum_dd).all()


def test_engine_choice_and_bad_arguments() -> None:
    linear = Linear(3)
    X, Y, theta = problem(linear)
    assert kernel_spec(linear) is None
    assert run(linear, X, Y, theta, "auto").engine == "numpy"
    with pytest.raises(ValueError, match=r"engine 'kernel' has no form of Linear"):
        run(linear, X, Y, theta, "kernel")
    with pytest.raises(ValueError, match="multiple of thin"):
        run(linear, X, Y, theta, "numpy", n_steps=10)
    with pytest.raises(ValueError, match="sampling"):
        run(linear, X, Y, theta, "numpy", sampling="sometimes")
    with pytest.raises(ValueError, match="engine"):
        run(linear, X, Y, theta, "fast")


@pytest.mark.parametrize("engine", ["numpy", "jax"])
def test_moments_in_a_basis_are_the_projected_full_moments(engine: str) -> None:
    """With a ``basis`` U the engines sum ``(U^T d)(U^T d)^T``, which is ``U^T (sum d d^T) U``
    of the same run recorded in full (same draws), and the first moments stay full."""
    from weightdyn.models.jax_model import jax_one_hidden

    model = jax_one_hidden(3, 4, 2, "tanh") if engine == "jax" else KERNEL_MODELS["tanh"]
    X, Y, theta = problem(model)
    n = model.n_params
    U = np.linalg.qr(np.random.default_rng(3).normal(size=(n, 5)))[0]
    full = run(model, X, Y, theta, engine)
    red = run(model, X, Y, theta, engine, basis=U)
    assert red.engine == engine and red.sum_dd.shape == (3, 2, 25)
    np.testing.assert_array_equal(red.sum_d, full.sum_d)
    np.testing.assert_array_equal(red.final, full.final)
    projected = np.einsum("ia,rbij,jc->rbac", U, full.sum_dd.reshape(3, 2, n, n), U)
    assert rel(red.sum_dd.reshape(3, 2, 5, 5), projected) < 1e-13


def test_a_basis_is_checked_and_moves_auto_off_the_numba_kernel() -> None:
    model = KERNEL_MODELS["tanh"]
    X, Y, theta = problem(model)
    U = np.eye(model.n_params)[:, :4]
    assert run(model, X, Y, theta, "auto", basis=U).engine == "jax"  # its autodiff twin
    with pytest.raises(ValueError, match="engine 'kernel' has no moments in a basis"):
        run(model, X, Y, theta, "kernel", basis=U)
    with pytest.raises(ValueError, match="orthonormal"):
        run(model, X, Y, theta, "numpy", basis=2 * U)
    with pytest.raises(ValueError, match=r"basis must be \(n_params"):
        run(model, X, Y, theta, "numpy", basis=U[:-1])


@pytest.mark.parametrize("name", ["deep2", "deep4", "tanh", "softplus_nobias"])
def test_a_hand_written_model_runs_on_the_jax_engine_through_its_twin(name: str) -> None:
    """``engine="jax"`` on a hand-written model uses its autodiff twin: the same batches and the
    same trajectory as the numba kernel, to rounding (the kernels differ in summation order)."""
    model = KERNEL_MODELS[name]
    X, Y, theta = problem(model)
    ker = run(model, X, Y, theta, "kernel")
    jx = run(model, X, Y, theta, "jax")
    assert jx.engine == "jax"
    np.testing.assert_array_equal(jx.n_records, ker.n_records)
    for a, b in ((jx.final, ker.final), (jx.sum_d, ker.sum_d), (jx.sum_dd, ker.sum_dd)):
        assert rel(a, b) < 1e-12
