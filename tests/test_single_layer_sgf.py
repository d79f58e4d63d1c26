"""Stochastic gradient flow (paper 000 Eq. 13): noise draws, additive-noise stationary state."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from weightdyn import stats
from weightdyn.counter_rng import normals, replica_keys
from weightdyn.data import teacher_student
from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer import multiplicative, sgf, theory


def _problem(N: int, P: int, sigma_eps2: float, seed: int):
    data = teacher_student(N, P, sigma_eps2, np.random.default_rng(seed))
    return data, theory.hessian(data.X), theory.min_norm_solution(data.X, data.y)


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_multiplicative_noise_map_has_covariance_C_of_w_exactly(sampling) -> None:
    """xi = sqrt(c/P) X^T diag(r) (z - mean z) is linear in z: A A^T must equal Eq. 14."""
    data, _, w_star = _problem(4, 9, 0.25, 1)
    w = w_star + np.random.default_rng(2).normal(0.0, 0.5, 4)
    P = data.P
    c = theory.noise_prefactor(P, 3, sampling)
    r = data.X @ w - data.y
    centre = np.eye(P) - np.ones((P, P)) / P
    A = np.sqrt(c / P) * data.X.T @ np.diag(r) @ centre
    C = theory.noise_covariance(data.X, data.y, 3, sampling, w=w)
    np.testing.assert_allclose(A @ A.T, C, rtol=0, atol=1e-14 * np.abs(C).max())


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_multiplicative_noise_draw_matches_noise_covariance(sampling) -> None:
    """Monte Carlo: Cov(xi) = theory.noise_covariance(X, y, S, sampling, w=w), within 4.5 s.e."""
    data, _, w_star = _problem(3, 7, 0.25, 3)
    w = w_star + np.array([0.4, -0.3, 0.2])
    R = 200_000
    xi = sgf.multiplicative_noise(
        data.X, data.y, np.tile(w, (R, 1)), 2, sampling, np.random.default_rng(4)
    )
    C = theory.noise_covariance(data.X, data.y, 2, sampling, w=w)
    prod = xi[:, :, None] * xi[:, None, :]
    est = prod.mean(axis=0)
    se = prod.std(axis=0, ddof=1) / np.sqrt(R)
    z = (est - C) / se
    zmean = xi.mean(axis=0) / (xi.std(axis=0, ddof=1) / np.sqrt(R))
    print(f"max |z| covariance {np.abs(z).max():.2f}, mean {np.abs(zmean).max():.2f}")
    assert np.abs(z).max() < 4.5
    assert np.abs(zmean).max() < 4.5
    # at w* the multiplicative covariance is the additive one (Eq. 17)
    C0 = theory.noise_covariance(data.X, data.y, 2, sampling)
    np.testing.assert_allclose(
        theory.noise_covariance(data.X, data.y, 2, sampling, w=w_star), C0, atol=1e-13
    )


def test_covariance_sqrt_handles_rank_deficiency() -> None:
    data, _, _ = _problem(6, 4, 0.25, 5)  # N > P: C has rank <= P - 1
    C = theory.noise_covariance(data.X, data.y, 2, w=np.ones(6))
    B = sgf.covariance_sqrt(C)
    assert B.shape[1] <= 3
    np.testing.assert_allclose(B @ B.T, C, atol=1e-13)


def test_additive_sgf_matches_eq30_small_problem() -> None:
    """N = 4, P = 10, dt = lr: SGF covariance vs Eq. 30 within its statistical error."""
    data, H, w_star = _problem(4, 10, 0.25, 6)
    lr, S, R = 0.1, 2, 32
    C = theory.noise_covariance(data.X, data.y, S)
    M30 = theory.stationary_covariance(H, C, lr)
    tau = theory.slowest_relaxation_steps(H, lr)
    sample = 40_000
    res = sgf.run_sgf(
        data.X,
        data.y,
        w_star,
        np.tile(w_star, (R, 1)),
        Update(lr, S, "with"),
        Schedule(int(3 * tau), sample, 10, 4),
        np.random.default_rng(7),
    )
    covs = stats.group_covariances(res.sum_dw, res.sum_dwdw, res.n_records)
    eig, se = stats.eigenvalues_with_se(covs)
    z = (eig - theory.sorted_eigenvalues(M30)) / se
    frob = np.linalg.norm(covs.mean(0) - M30) / np.linalg.norm(M30)
    expected = sgf.expected_frobenius_error(H, C, lr, sample * lr, R)
    print(f"eigenvalue z-scores {np.round(z, 2)}; Frobenius {frob:.4f} (expected {expected:.4f})")
    assert np.abs(z).max() < 4.0
    assert frob < 3.0 * expected


def test_large_dt_follows_the_discrete_lyapunov_equation() -> None:
    """At dt omega_max = 1 the Euler chain follows euler_stationary_covariance, not Eq. 30."""
    data, H, w_star = _problem(3, 12, 0.25, 8)
    lr, S, R = 0.1, 2, 32
    dt = 1.0 / float(np.linalg.eigvalsh(H)[-1])
    C = theory.noise_covariance(data.X, data.y, S)
    M30 = theory.stationary_covariance(H, C, lr)
    Me = sgf.euler_stationary_covariance(H, C, lr, dt)
    np.testing.assert_allclose(sgf.euler_stationary_covariance(H, C, lr, 1e-9), M30, rtol=1e-7)
    res = sgf.run_sgf(
        data.X,
        data.y,
        w_star,
        np.tile(w_star, (R, 1)),
        Update(lr, S, "with"),
        Schedule(200, 8000, 2, 4),
        np.random.default_rng(9),
        dt=dt,
    )
    covs = stats.group_covariances(res.sum_dw, res.sum_dwdw, res.n_records)
    eig, se = stats.eigenvalues_with_se(covs)
    z_euler = (eig - theory.sorted_eigenvalues(Me)) / se
    z_30 = (eig - theory.sorted_eigenvalues(M30)) / se
    print(f"z vs Euler {np.round(z_euler, 2)}, z vs Eq. 30 {np.round(z_30, 2)}")
    assert np.abs(z_euler).max() < 4.0
    assert np.abs(z_30).max() > 4.0


def test_chunking_does_not_change_results() -> None:
    data, _, w_star = _problem(3, 8, 0.25, 10)
    for noise in sgf.NOISE_MODES:
        out = [
            sgf.run_sgf(
                data.X,
                data.y,
                w_star,
                np.tile(w_star, (3, 1)),
                Update(0.1, 2, "with"),
                Schedule(30, 200, 5, 2, chunk_steps=chunk),
                np.random.default_rng(11),
                noise=noise,
            )
            for chunk in (5, 4096)
        ]
        np.testing.assert_allclose(out[0].sum_dwdw, out[1].sum_dwdw, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(out[0].final_W, out[1].final_W, rtol=1e-12)


def _bits(res: sgf.SGFResult) -> list[np.ndarray]:
    return [res.sum_dw, res.sum_dwdw, res.n_records, res.final_W]


@pytest.mark.parametrize("sampling", ["with", "without"])
@pytest.mark.parametrize("noise", sgf.NOISE_MODES)
def test_bit_identical_for_any_thread_count_and_chunking(noise, sampling) -> None:
    """1 vs 2 numba threads, and chunks of one record group (32 thin = 96 steps, burn-in 100 not
    a multiple of it) vs the whole run in one chunk: the same bits."""
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two numba threads")
    data, _, w_star = _problem(5, 9, 0.25, 16)
    W0 = w_star + 0.1 * np.random.default_rng(17).standard_normal((5, 5))

    def run(threads: int, chunk: int) -> sgf.SGFResult:
        previous = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            return sgf.run_sgf(
                data.X, data.y, w_star, W0, Update(0.1, 3, sampling),
                Schedule(100, 2 * 384, 3, 2, chunk_steps=chunk), np.random.default_rng(18),
                noise=noise,
            )  # fmt: skip
        finally:
            numba.set_num_threads(previous)

    ref = run(1, 4096)
    assert not ref.diverged and np.all(ref.n_records == 128)
    for other in (run(2, 4096), run(1, 1), run(2, 1)):
        for a, b in zip(_bits(ref), _bits(other), strict=True):
            np.testing.assert_array_equal(a, b)
    other_seed = sgf.run_sgf(
        data.X, data.y, w_star, W0, Update(0.1, 3, sampling), Schedule(100, 2 * 384, 3, 2),
        np.random.default_rng(19), noise=noise,
    )  # fmt: skip
    assert not np.array_equal(ref.final_W, other_seed.final_W)


@pytest.mark.parametrize("sampling", ["with", "without"])
@pytest.mark.parametrize("noise", sgf.NOISE_MODES)
def test_kernel_matches_reference_chain_on_the_same_normals(noise, sampling) -> None:
    """run_sgf (the kernel, eigenbasis for additive noise) against sgf_reference_chain (weight
    space, plain numpy) on the normals of counter_rng.normals: odd k (N = 5 components for
    additive, P = 9 for multiplicative), w_ref != w*, weights, and the fused moments."""
    data, _, w_star = _problem(5, 9, 0.25, 20)
    R, lr, S, dt, burn, sample, thin = 3, 0.1, 3, 0.25, 5, 8, 2
    rng = np.random.default_rng(21)
    W0 = w_star + 0.3 * rng.standard_normal((R, 5))
    w_ref = w_star + 0.2 * rng.standard_normal(5)
    res = sgf.run_sgf(
        data.X, data.y, w_ref, W0, Update(lr, S, sampling), Schedule(burn, sample, thin, 2),
        np.random.default_rng(22), noise=noise, dt=dt,
    )  # fmt: skip
    k = (
        data.P
        if noise == "multiplicative"
        else sgf._Additive.build(data.X, data.y, S, sampling).B.shape[1]
    )
    assert k % 2 == 1
    zeta = normals(replica_keys(np.random.default_rng(22), R), 0, burn + sample, k)
    for r in range(R):
        traj = sgf.sgf_reference_chain(
            data.X, data.y, W0[r], lr, S, sampling, dt, zeta[:, r], noise=noise
        )
        np.testing.assert_allclose(res.final_W[r], traj[-1], rtol=0, atol=1e-12)
        for b in range(2):  # records at steps burn + thin (j + 1) of each block
            steps = burn + b * sample // 2 + thin * np.arange(1, sample // 2 // thin + 1)
            d = traj[steps] - w_ref
            g = 2 * r + b
            np.testing.assert_allclose(res.sum_dw[g], d.sum(axis=0), rtol=0, atol=1e-12)
            np.testing.assert_allclose(res.sum_dwdw[g], d.T @ d, rtol=0, atol=1e-12)


def test_multiplicative_sgf_reproduces_exact_sgd_moments_in_one_dimension() -> None:
    """N = 1, sigma_eps = 0, dt = lr: Euler SGF with C(w) has SGD's exact moment recursion.

    C(w) = c v wbar^2 (Eq. 21), so wbar_{n+1} = (1 - lr a + lr sqrt(c v) zeta) wbar_n has
    E[factor] = 1 - lr a and E[factor^2] = (1 - lr a)^2 + lr^2 c v, as for SGD.
    """
    x = np.random.default_rng(12).standard_normal(15)
    u, wbar0, lr, S, R, n = 0.7, 1.0, 0.2, 1, 20_000, 8
    res = sgf.run_sgf(
        x[:, None],
        u * x,
        np.array([u]),
        np.full((R, 1), u + wbar0),
        Update(lr, S, "with"),
        Schedule(n - 1, 1, 1, 1),
        np.random.default_rng(13),
        noise="multiplicative",
    )
    wbar = res.sum_dw[:, 0]
    params = multiplicative.gbm_parameters(x, lr, S)
    mean, var = multiplicative.discrete_moments(n, wbar0, params)
    mean_c, var_c = multiplicative.gbm_moments(n * lr, wbar0, params)
    se_m = wbar.std(ddof=1) / np.sqrt(R)
    dev = wbar - wbar.mean()
    se_v = np.sqrt(((dev**4).mean() - dev.var() ** 2) / R)
    z = ((wbar.mean() - mean) / se_m, (wbar.var(ddof=1) - var) / se_v)
    zc = ((wbar.mean() - mean_c) / se_m, (wbar.var(ddof=1) - var_c) / se_v)
    print(f"z vs exact recursion {np.round(z, 2)}, vs continuum GBM {np.round(zc, 2)}")
    assert max(abs(v) for v in z) < 4.0
    assert abs(zc[0]) > 4.0  # the continuum mean misses the O(lr a^2) term at lr = 0.2


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_multiplicative_sgf_at_dt_lr_has_the_exact_sgd_second_moment(sampling) -> None:
    """dt = lr: E C(w* + d) = C + c (D(M) - H M H) makes the second-moment recursion of the
    multiplicative Euler chain that of SGD, so its fixed point is discrete_stationary_covariance
    (beyond Eq. 30), not Eq. 30 and not the additive Euler chain."""
    data, H, w_star = _problem(4, 12, 0.25, 21)
    lr, S, R = 1.5, 2, 32
    C = theory.noise_covariance(data.X, data.y, S, sampling)
    M = theory.discrete_stationary_covariance(data.X, data.y, lr, S, sampling).M
    tau = 1.0 / (lr * float(np.linalg.eigvalsh(H)[0]))
    res = sgf.run_sgf(
        data.X, data.y, w_star, np.tile(w_star, (R, 1)), Update(lr, S, sampling),
        Schedule(int(10 * tau), int(400 * tau) // 8 * 8, 2, 4), np.random.default_rng(22),
        noise="multiplicative",
    )  # fmt: skip
    covs = stats.group_covariances(res.sum_dw, res.sum_dwdw, res.n_records)
    est, se = stats.jackknife_of_mean(lambda c: np.trace(c, axis1=-2, axis2=-1), covs)
    z_exact = (est - np.trace(M)) / se
    z_additive = (est - np.trace(sgf.euler_stationary_covariance(H, C, lr, lr))) / se
    print(f"tr M: z vs exact SGD recursion {z_exact:.2f}, vs additive Euler chain {z_additive:.2f}")
    assert abs(z_exact) < 4.0
    assert abs(z_additive) > 4.0


def test_validation_errors_name_argument_and_values() -> None:
    data, _, w_star = _problem(3, 8, 0.25, 14)
    args = (data.X, data.y, w_star)
    W = np.tile(w_star, (2, 1))
    rng = np.random.default_rng(0)
    update, steps = Update(0.1, 2, "with"), Schedule(0, 10, 1, 1)
    with pytest.raises(ValueError, match=r"noise must be one of \('additive', 'multiplicative'\)"):
        sgf.run_sgf(*args, W, update, steps, rng, noise="gaussian")
    with pytest.raises(ValueError, match=r"sampling must be one of \('with', 'without'\)"):
        sgf.run_sgf(*args, W, Update(0.1, 2, "replace"), steps, rng)
    with pytest.raises(ValueError, match="dt must be a finite number > 0"):
        sgf.run_sgf(*args, W, update, steps, rng, dt=0.0)
    with pytest.raises(ValueError, match=r"w_init must have shape \(R, N\)"):
        sgf.run_sgf(*args, W[:, :2], update, steps, rng)
    with pytest.raises(ValueError, match="multiple of n_blocks"):
        sgf.run_sgf(*args, W, update, Schedule(0, 10, 3, 1), rng)


def test_divergence_is_flagged() -> None:
    data, H, w_star = _problem(3, 8, 0.25, 15)
    dt = 3.0 / float(np.linalg.eigvalsh(H)[-1])  # Euler unstable: |1 - dt omega_max| > 1
    res = sgf.run_sgf(
        data.X,
        data.y,
        w_star,
        np.tile(w_star, (2, 1)),
        Update(0.1, 2, "with"),
        Schedule(2000, 100, 1, 1),
        np.random.default_rng(0),
        dt=dt,
    )
    assert res.diverged
    assert np.isnan(res.sum_dwdw).all()


@pytest.mark.parametrize(
    ("dt", "sample"),
    [
        pytest.param(1.0, 48_000, id="dt=1"),
        pytest.param(0.1, 480_000, id="dt=lr", marks=pytest.mark.slow),
    ],
)
def test_acceptance_additive_sgf_matches_eq30_at_paper_point(dt, sample) -> None:
    """Issue acceptance: N = 100, P/N = 2, lr = 0.1, S = 10, sigma_eps^2 = 0.25; ||.||_F <= 10%.

    R = 64 replicas from w*, burn-in 2 tau (tau = 1 / omega_min in SDE time), 48 000 units of SDE
    time of sampling per replica. With dt = lr (one SGD step per Euler step; slow, ~1-2 min) and
    with dt = 1 (10x fewer steps; the discretisation bias of the Euler chain,
    euler_stationary_covariance vs Eq. 30, is 0.6 % in Frobenius norm).
    """
    data = teacher_student(100, 200, 0.25, np.random.default_rng(2024))
    H = theory.hessian(data.X)
    w_star = theory.min_norm_solution(data.X, data.y)
    lr, S, R = 0.1, 10, 64
    C = theory.noise_covariance(data.X, data.y, S)
    M30 = theory.stationary_covariance(H, C, lr)
    burn = int(2.0 / float(np.linalg.eigvalsh(H)[0]) / dt)
    with threadpool_limits(1):  # small matrices: one BLAS thread is fastest (and fair)
        res = sgf.run_sgf(
            data.X,
            data.y,
            w_star,
            np.tile(w_star, (R, 1)),
            Update(lr, S, "with"),
            Schedule(burn, sample, 10, 4),
            np.random.default_rng(2025),
            dt=dt,
        )
    covs = stats.group_covariances(res.sum_dw, res.sum_dwdw, res.n_records)
    frob = np.linalg.norm(covs.mean(0) - M30) / np.linalg.norm(M30)
    expected = sgf.expected_frobenius_error(H, C, lr, sample * dt, R)
    bias = np.linalg.norm(sgf.euler_stationary_covariance(H, C, lr, dt) - M30)
    print(
        f"dt={dt}: Frobenius error vs Eq. 30 {frob:.4f} (statistical expectation "
        f"{expected:.4f}, Euler bias {bias / np.linalg.norm(M30):.4f}), {res.elapsed_s:.1f} s"
    )
    assert frob <= 0.10
