"""Two-layer linear network (paper 000 Sec. III): gradient flow, SGD kernel, SGF noise."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from weightdyn.counter_rng import normals, replica_keys, uniforms
from weightdyn.sgd import Schedule, Update
from weightdyn.two_layer import simulate as sim
from weightdyn.two_layer.data import two_layer_data


def _problem(N_i=5, N_h=4, N_o=2, P=40, seed=1, targets="teacher"):
    rng = np.random.default_rng(seed)
    data = two_layer_data(N_i, P, rng, N_o=N_o, targets=targets, sigma_y2=0.5)
    W1, W2 = sim.gaussian_init(N_i, N_h, N_o, rng)
    return data, W1, W2


# ------------------------------------------------------------------------------ data, init


def test_data_shapes_and_variances():
    rng = np.random.default_rng(0)
    d = two_layer_data(20, 4000, rng, N_o=3, sigma_y2=2.0)
    assert d.X.shape == (4000, 20) and d.Y.shape == (4000, 3) and d.U is None
    assert d.sigma_x2 == pytest.approx(1 / 20)
    assert np.var(d.X) == pytest.approx(1 / 20, rel=0.03)
    assert np.var(d.Y) == pytest.approx(2.0, rel=0.05)
    cov = np.diag(np.linspace(0.5, 1.5, 20)) / 20
    d2 = two_layer_data(20, 4000, rng, targets="teacher", input_cov=cov)
    assert d2.Y.shape == (4000, 1) and d2.U.shape == (1, 20)
    assert np.cov(d2.X.T) == pytest.approx(cov, abs=0.006)
    with pytest.raises(ValueError, match="targets"):
        two_layer_data(3, 10, rng, targets="bogus")


def test_initialisations():
    rng = np.random.default_rng(2)
    W1, W2 = sim.gaussian_init(400, 300, 20, rng, init_scale=1e-4)
    assert np.var(W1) == pytest.approx(1e-4 / 400, rel=0.02)
    assert np.var(W2) == pytest.approx(1e-4 / 300, rel=0.06)  # 6000 entries, SE 1.8 %
    for N_o in (1, 3):
        W1, W2 = sim.zero_balanced_init(6, 4, N_o, rng, replicas=3)
        assert W1.shape == (3, 4, 6) and W2.shape == (3, N_o, 4)
        for r in range(3):
            Q = sim.balance(W1[r], W2[r])
            assert np.abs(Q).max() < 1e-14 * max(1.0, np.abs(W2[r]).max() ** 2)
            assert np.abs(W2[r]).max() > 0


# --------------------------------------------------------------------------- gradient flow


@pytest.mark.parametrize("method", ["adaptive", "rk4"])
def test_gradient_flow_reaches_least_squares(method):
    data, W1, W2 = _problem()
    res = sim.gradient_flow(data.X, data.Y, W1, W2, 300.0, method=method, dt=0.05)
    w_star = np.linalg.solve(data.X.T @ data.X, data.X.T @ data.Y).T  # Y^T X (X^T X)^-1
    rel = np.linalg.norm(res.W2 @ res.W1 - w_star) / np.linalg.norm(w_star)
    assert rel <= 1e-8, rel
    assert res.rel_dist[-1] == pytest.approx(rel, rel=1e-6, abs=1e-15)
    assert res.converged
    assert np.all(np.diff(res.loss) <= 1e-14)  # gradient flow decreases the loss
    assert res.loss[-1] == pytest.approx(sim.loss(data.X, data.Y, res.W1, res.W2))


def test_gradient_flow_gtol_stops_early():
    data, W1, W2 = _problem()
    res = sim.gradient_flow(data.X, data.Y, W1, W2, 1e4, gtol=1e-6)
    assert res.converged and res.grad_norm[-1] <= 1e-6 and res.t[-1] < 1e4
    assert res.grad_norm[-2] > 1e-6


def test_balance_conserved_rk4_order4():
    """|Q(T) - Q(0)| of RK4 falls as dt^4 (Eq. 42 holds exactly for the flow)."""
    data, W1, W2 = _problem()
    t_eval = np.linspace(0.0, 20.0, 5)
    errs = []
    for dt in (0.4, 0.2, 0.1, 0.05):
        res = sim.gradient_flow(data.X, data.Y, W1, W2, 20.0, method="rk4", dt=dt, t_eval=t_eval)
        errs.append(res.balance_err[-1])
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 12) & (ratios < 20)), ratios  # 2^4 = 16
    assert errs[-1] < 1e-8


def test_balance_conserved_adaptive_tolerance():
    data, W1, W2 = _problem()
    t_eval = np.linspace(0.0, 20.0, 5)
    errs = []
    for rtol in (1e-6, 1e-8, 1e-10):
        res = sim.gradient_flow(
            data.X, data.Y, W1, W2, 20.0, rtol=rtol, atol=1e-3 * rtol, t_eval=t_eval
        )
        errs.append(res.balance_err.max())
        assert errs[-1] < 100 * rtol
    assert errs[0] > 10 * errs[1] > 100 * errs[2]


# -------------------------------------------------------------------------------- SGD kernel


def _kernel_run(data, W1, W2, lr, keys, S, n, sampling, thin=7, n_rec=0):
    R = W1.shape[0]
    N_h, N_i = W1.shape[1:]
    N_o = W2.shape[1]
    A1, A2 = W1.copy(), W2.copy()
    Wp = np.empty((R, N_o, N_i))
    sim.product_kernel(A1, A2, Wp)
    perm = np.tile(np.arange(data.P, dtype=np.int64), (R, 1))
    rec1 = np.empty((n_rec, R, N_h, N_i))
    rec2 = np.empty((n_rec, R, N_o, N_h))
    diag = np.empty((n_rec, R, 3))
    w_star = sim.least_squares_solution(data.X, data.Y)
    flags = sim.sgd_kernel(
        data.X, data.Y, A1, A2, Wp, lr, S, sampling == "with", perm, keys, 0, n, thin, rec1, rec2,
        diag, w_star, 1e10,
    )  # fmt: skip
    return A1, A2, Wp, flags, rec1, rec2, diag


@pytest.mark.parametrize("sampling", ["with", "without"])
@pytest.mark.parametrize("N_o", [1, 3])
def test_kernel_matches_reference_loop(sampling, N_o):
    data, _, _ = _problem(N_i=7, N_h=5, N_o=N_o, P=30)
    rng = np.random.default_rng(3)
    R, S, n = 3, 4, 300
    W1, W2 = sim.gaussian_init(7, 5, N_o, rng, replicas=R)
    keys = replica_keys(rng, R)
    u = uniforms(keys, 0, n, S)  # the kernel's draws
    A1, A2, Wp, flags, rec1, rec2, diag = _kernel_run(
        data, W1, W2, 0.3, keys, S, n, sampling, 7, 40
    )
    assert not flags.any()
    idx, _ = sim.batch_indices_from_uniforms(u, data.P, sampling)
    for r in range(R):
        B1, B2 = sim.sgd_reference_chain(data.X, data.Y, W1[r], W2[r], 0.3, idx[:, r])
        assert np.abs(A1[r] - B1).max() <= 1e-12 * max(1.0, np.abs(B1).max())
        assert np.abs(A2[r] - B2).max() <= 1e-12 * max(1.0, np.abs(B2).max())
        assert np.abs(Wp[r] - B2 @ B1).max() <= 1e-12
        # record k holds the weights after step 7 (k + 1)
        C1, C2 = sim.sgd_reference_chain(data.X, data.Y, W1[r], W2[r], 0.3, idx[:35, r])
        assert np.abs(rec1[4, r] - C1).max() <= 1e-12 and np.abs(rec2[4, r] - C2).max() <= 1e-12
        assert diag[4, r, 0] == pytest.approx(np.sum(C1**2), rel=1e-12)
        assert diag[4, r, 1] == pytest.approx(np.sum(C2**2), rel=1e-12)


def _euler_maruyama_reference(X, Y, W1, W2, drift, amp, zeta):
    """Plain numpy Euler-Maruyama of Eqs. 51-52, one replica (module docstring of simulate)."""
    for z in zeta:
        a = drift + amp * (z - z.mean())
        K = ((Y - X @ (W2 @ W1).T) * a[:, None]).T @ X
        W1, W2 = W1 + W2.T @ K, W2 + K @ W1.T
    return W1, W2


@pytest.mark.parametrize("N_o", [1, 3])
def test_sgf_kernel_matches_a_plain_euler_maruyama_loop(N_o):
    data, _, _ = _problem(N_i=7, N_h=5, N_o=N_o, P=30)
    rng = np.random.default_rng(4)
    R, n, thin = 3, 200, 8
    W1, W2 = sim.gaussian_init(7, 5, N_o, rng, replicas=R)
    keys = replica_keys(rng, R)
    zeta = normals(keys, 0, n, data.P)  # the kernel's draws
    A1, A2 = W1.copy(), W2.copy()
    Wp = np.empty((R, N_o, 7))
    sim.product_kernel(A1, A2, Wp)
    rec1, rec2 = np.empty((10, R, 5, 7)), np.empty((10, R, N_o, 5))
    diag = np.empty((10, R, 3))
    w_star = sim.least_squares_solution(data.X, data.Y)
    drift, amp = 0.2 / data.P, 0.05
    flags = sim.sgf_kernel(
        data.X, data.Y, A1, A2, Wp, drift, amp, keys, 0, n, thin, rec1, rec2, diag, w_star, 1e10
    )
    assert not flags.any()
    for r in range(R):
        B1, B2 = _euler_maruyama_reference(data.X, data.Y, W1[r], W2[r], drift, amp, zeta[:, r])
        assert np.abs(A1[r] - B1).max() <= 1e-12 * max(1.0, np.abs(B1).max())
        assert np.abs(A2[r] - B2).max() <= 1e-12 * max(1.0, np.abs(B2).max())
        assert np.abs(Wp[r] - B2 @ B1).max() <= 1e-12
        C1, C2 = _euler_maruyama_reference(
            data.X, data.Y, W1[r], W2[r], drift, amp, zeta[: 3 * thin, r]
        )  # record 2 holds the weights after step 3 thin
        assert np.abs(rec1[2, r] - C1).max() <= 1e-12 and np.abs(rec2[2, r] - C2).max() <= 1e-12
        assert diag[2, r, 2] == pytest.approx(np.sum((C2 @ C1 - w_star) ** 2), rel=1e-10)


def _run(data, sampling="with", chunk_steps=4096, seed=5, lr=0.2, kind="sgd", burnin_steps=60,
         sample_steps=640, n_blocks=2, **kw):  # fmt: skip
    N_i = data.N_i
    rng0 = np.random.default_rng(11)
    W1, W2 = sim.gaussian_init(N_i, 4, data.N_o, rng0)
    gf = sim.gradient_flow(data.X, data.Y, W1, W2, 300.0)
    run = sim.run_sgd_two_layer if kind == "sgd" else sim.run_sgf_two_layer
    schedule = Schedule(burnin_steps, sample_steps, 5, n_blocks, chunk_steps)
    args = {"replicas": 3, **kw}
    return run(
        data.X, data.Y, (gf.W1, gf.W2), (gf.W1, gf.W2), Update(lr, 4, sampling), schedule,
        np.random.default_rng(seed), trace_every=20, **args,
    )  # fmt: skip


_MOMENTS = ("sum_dW1", "sum_dW2", "sum_dW1dW1", "sum_dW2dW2", "sum_dW1dW2")


@pytest.mark.parametrize("kind", ["sgd", "sgf"])
@pytest.mark.parametrize("sampling", ["with", "without"])
def test_bit_reproducible_and_chunk_invariant(kind, sampling):
    data, _, _ = _problem(N_i=5, N_o=2, P=40)
    a = _run(data, sampling, chunk_steps=4096, kind=kind)
    b = _run(data, sampling, chunk_steps=4096, kind=kind)
    c = _run(data, sampling, chunk_steps=1, kind=kind)  # one record group (160 steps) per chunk
    assert not a.diverged
    for other in (b, c):
        for name in (*_MOMENTS, "final_W1", "final_W2", "trace_D2", "trace_dist_avg"):
            assert np.array_equal(getattr(a, name), getattr(other, name)), name
    assert a.n_records.tolist() == [64] * 6
    # the traces: 700 steps / 20 = 35 points; last snapshot = final weights
    assert a.trace_D2.shape == (35, 3) and a.trace_step[-1] == 700
    assert np.allclose(a.trace_D2[-1], np.sum(a.final_W2**2, axis=(1, 2)), rtol=1e-13)
    assert np.allclose(a.trace_D1[-1], np.sum(a.final_W1**2, axis=(1, 2)), rtol=1e-13)
    dist = np.linalg.norm(np.matmul(a.final_W2, a.final_W1) - a.w_star, axis=(1, 2))
    assert np.allclose(a.trace_dist[-1], dist, rtol=1e-12)
    g = a.sum_dW2dW2[0]
    assert np.allclose(g, g.T) and np.all(np.linalg.eigvalsh(g) > -1e-12)


@pytest.mark.parametrize("kind", ["sgd", "sgf"])
def test_independent_of_the_thread_count(kind):
    """The replicas split over numba's threads: the same bits with one thread or all."""
    import numba

    data, _, _ = _problem(N_i=5, N_o=2, P=40)
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = _run(data, "with", kind=kind)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = _run(data, "with", kind=kind)
    finally:
        numba.set_num_threads(previous)
    for name in (*_MOMENTS, "final_W1", "final_W2", "trace_D2"):
        assert np.array_equal(getattr(one, name), getattr(many, name)), name


@pytest.mark.parametrize("kind", ["sgd", "sgf"])
def test_replicas_together_match_replicas_alone(kind):
    """Per-replica references and the caller's keys: replica r of one run is bit for bit the
    one-replica run with its reference and key (the two-layer sampling window runs so)."""
    data, _, _ = _problem(N_i=5, N_o=2, P=40)
    rng = np.random.default_rng(3)
    R, shape1, shape2 = 3, (4, 5), (2, 4)
    refs = (rng.normal(size=(R, *shape1)), rng.normal(size=(R, *shape2)))
    inits = (refs[0] + 0.01 * rng.normal(size=(R, *shape1)), refs[1] + 0.0)
    keys = np.concatenate([replica_keys(np.random.default_rng(r), 1) for r in range(R)])
    run = sim.run_sgd_two_layer if kind == "sgd" else sim.run_sgf_two_layer
    opts = {"w_star": np.zeros((2, 5)), "trace_every": 20}
    schedule, update = Schedule(0, 640, 5, 2), Update(0.05, 4, "with")
    both = run(data.X, data.Y, refs, inits, update, schedule, None, keys=keys, **opts)
    for r in range(R):
        alone = run(data.X, data.Y, (refs[0][r], refs[1][r]), (inits[0][r], inits[1][r]),
                    update, schedule, np.random.default_rng(r), **opts)  # fmt: skip
        for name in (*_MOMENTS, "n_records"):
            assert np.array_equal(getattr(both, name)[2 * r : 2 * r + 2], getattr(alone, name))
        for name in ("final_W1", "final_W2"):
            assert np.array_equal(getattr(both, name)[r], getattr(alone, name)[0]), name
        for name in ("trace_D2", "trace_dist_avg"):
            assert np.array_equal(getattr(both, name)[:, r], getattr(alone, name)[:, 0]), name
    with pytest.raises(ValueError, match="keys"):
        run(data.X, data.Y, refs, inits, update, schedule, None, keys=keys[:2], **opts)


def test_moments_match_explicit_records():
    """The group sums equal sums over the kernel's records (same batches via the same rng)."""
    data, _, _ = _problem(N_i=5, N_o=2, P=40)
    res = _run(data, "with", burnin_steps=0, sample_steps=320, n_blocks=1, replicas=2)
    # replay with the bare kernel and the same keys (one draw of the run's generator)
    rng0 = np.random.default_rng(11)
    W1, W2 = sim.gaussian_init(5, 4, 2, rng0)
    gf = sim.gradient_flow(data.X, data.Y, W1, W2, 300.0)
    keys = replica_keys(np.random.default_rng(5), 2)
    A1 = np.ascontiguousarray(np.tile(gf.W1, (2, 1, 1)))
    A2 = np.ascontiguousarray(np.tile(gf.W2, (2, 1, 1)))
    *_, rec1, rec2, _ = _kernel_run(data, A1, A2, 0.2, keys, 4, 320, "with", thin=5, n_rec=64)
    d1 = rec1.reshape(64, 2, -1) - gf.W1.ravel()
    d2 = rec2.reshape(64, 2, -1) - gf.W2.ravel()
    for r in range(2):
        assert np.allclose(res.sum_dW1[r], d1[:, r].sum(0), rtol=1e-12, atol=1e-15)
        assert np.allclose(res.sum_dW2dW2[r], d2[:, r].T @ d2[:, r], rtol=1e-12, atol=1e-15)
        assert np.allclose(res.sum_dW1dW2[r], d1[:, r].T @ d2[:, r], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kind", ["sgd", "sgf"])
def test_divergence_flagged_without_warnings(kind):
    data, _, _ = _problem(N_i=5, N_o=2, P=40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = _run(data, "with", lr=50.0, kind=kind)
    assert res.diverged and res.diverged_replicas.any()
    for name in _MOMENTS:
        assert np.all(np.isnan(getattr(res, name)))
    assert np.isnan(res.trace_D2[-1]).all()


def test_second_moment_selection_and_validation():
    data, _, _ = _problem(N_i=5, N_o=2, P=40)
    lines = []
    r = _run(data, second_moments="W2", progress=lines.append)
    assert lines and "700/700 (100%)" in lines[-1]
    assert r.sum_dW1dW1 is None and r.sum_dW1dW2 is None and r.sum_dW2dW2.shape == (6, 8, 8)
    with pytest.raises(ValueError, match="multiple of n_blocks"):
        _run(data, sample_steps=641)
    with pytest.raises(ValueError, match="sampling"):
        _run(data, sampling="maybe")
    with pytest.raises(ValueError, match="burnin_steps"):
        _run(data, burnin_steps=7)


# --------------------------------------------------------------------------- noise covariance


def _check_cov_mc(samples, C, z_max):
    """Entry-wise z-scores of the sample covariance of zero-mean ``samples`` against ``C``."""
    n = samples.shape[0]
    prod = samples[:, :, None] * samples[:, None, :]
    est = prod.mean(0)
    se = prod.std(0, ddof=1) / np.sqrt(n)
    iu = np.triu_indices(C.shape[0])
    z = (est - C)[iu] / np.maximum(se[iu], 1e-300)
    assert np.abs(z).max() < z_max, np.abs(z).max()
    return z


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_sgf_noise_covariance_monte_carlo(sampling):
    data, W1, W2 = _problem(N_i=3, N_h=2, N_o=2, P=12)
    C = sim.minibatch_noise_covariance(data.X, data.Y, W1, W2, 3, sampling)
    # against the explicit per-sample-gradient formula
    g = sim.per_sample_gradients(data.X, data.Y, W1, W2)
    G = np.concatenate([a.ravel() for a in sim.neg_gradients(data.X, data.Y, W1, W2)])
    assert np.allclose(g.mean(0), G, atol=1e-15)
    n = 100_000
    xi1, xi2 = sim.sgf_noise(data.X, data.Y, W1, W2, 3, sampling, np.random.default_rng(7), n)
    xi = np.concatenate([xi1.reshape(n, -1), xi2.reshape(n, -1)], axis=1)  # 10 components
    z = _check_cov_mc(xi, C, 4.5)  # 55 entries
    assert np.mean(z**2) < 2.0


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_sgd_one_step_covariance_matches_formula(sampling):
    """One SGD step from fixed weights: increment covariance = lr^2 x the same formula."""
    data, W1, W2 = _problem(N_i=3, N_h=2, N_o=2, P=12)
    R, S, lr = 40_000, 3, 0.1
    keys = replica_keys(np.random.default_rng(8), R)
    A1 = np.ascontiguousarray(np.broadcast_to(W1, (R, *W1.shape)))
    A2 = np.ascontiguousarray(np.broadcast_to(W2, (R, *W2.shape)))
    B1, B2, *_ = _kernel_run(data, A1, A2, lr, keys, S, 1, sampling, thin=2)
    inc = np.concatenate([(B1 - W1).reshape(R, -1), (B2 - W2).reshape(R, -1)], axis=1) / lr
    G = np.concatenate([a.ravel() for a in sim.neg_gradients(data.X, data.Y, W1, W2)])
    C = sim.minibatch_noise_covariance(data.X, data.Y, W1, W2, S, sampling)
    mean_se = inc.std(0) / np.sqrt(R)
    assert np.all(np.abs(inc.mean(0) - G) < 4.5 * mean_se)
    _check_cov_mc(inc - G, C, 4.5)


def test_sgf_small_dt_zero_noise_is_gradient_flow():
    """S = P without replacement: no noise, Euler with small dt follows the gradient flow."""
    data, W1, W2 = _problem(N_i=5, N_o=2, P=40)
    res = sim.run_sgf_two_layer(
        data.X, data.Y, (W1, W2), (W1, W2), Update(0.5, 40, "without"), Schedule(0, 2000, 1, 1),
        np.random.default_rng(0), dt=1e-3, second_moments="none",
    )  # fmt: skip
    gf = sim.gradient_flow(data.X, data.Y, W1, W2, 2.0, t_eval=np.array([0.0, 2.0]))
    assert np.abs(res.final_W1[0] - gf.W1).max() < 5e-3 * np.abs(gf.W1).max()
    assert np.abs(res.final_W2[0] - gf.W2).max() < 5e-3 * np.abs(gf.W2).max()
