"""Tests for the SGD simulator of the single-layer linear net (paper 000, Eqs. 10-11)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from weightdyn.blas import fill_upper
from weightdyn.counter_rng import replica_keys, uniforms
from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer.simulate import (
    SGDResult,
    batch_indices_from_uniforms,
    run_sgd,
    sgd_kernel,
    sgd_reference_chain,
)
from weightdyn.stats import group_covariances, jackknife_of_mean

_NO_SUMS = (np.empty((0, 1)), np.empty((0, 1, 1)))


def _kernel(X, y, W, lr, S, sampling, perm, keys, step0, n, thin, rec, sums=None, w_ref=None):
    """sgd_kernel with keyword-free plumbing: no moments unless ``sums`` are given."""
    w_ref = np.zeros(X.shape[1]) if w_ref is None else w_ref
    sums = _NO_SUMS if sums is None else sums
    return sgd_kernel(
        X, y, W, lr, S, sampling == "with", perm, keys, step0, n, thin, w_ref, *sums, rec, 1e12
    )


def _problem(seed, N, P, sigma=0.5, scale=None):
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(N) if scale is None else scale
    X = scale * rng.standard_normal((P, N))
    u = rng.standard_normal(N)
    y = X @ u + sigma * rng.standard_normal(P)
    w_star = np.linalg.lstsq(X, y, rcond=None)[0]
    return X, y, w_star


@pytest.mark.parametrize("S", [1, 4, 7])  # the kernel takes samples four at a time
@pytest.mark.parametrize("sampling", ["with", "without"])
def test_kernel_matches_reference_chain(sampling, S):
    R, N, P, n, lr, step0 = 3, 5, 12, 120, 0.3, 1000
    X, y, w_star = _problem(1, N, P)
    rng = np.random.default_rng(2)
    keys = replica_keys(rng, R)
    u = uniforms(keys, step0, n, S)  # the draws of steps step0 .. step0 + n - 1
    W0 = rng.standard_normal((R, N))
    perm0 = np.stack([rng.permutation(P) for _ in range(R)]).astype(np.int64)

    idx, perm_after = batch_indices_from_uniforms(u, P, sampling, perm0)
    W = W0.copy()
    perm = perm0.copy()
    thin = 3
    rec = np.empty((n // thin, R, N))
    sums = np.zeros((R, N)), np.zeros((R, N, N))
    flags = _kernel(X, y, W, lr, S, sampling, perm, keys, step0, n, thin, rec, sums, w_star)
    assert not flags.any()
    for r in range(R):
        w_ref = sgd_reference_chain(X, y, W0[r], lr, idx[:, r])
        np.testing.assert_allclose(W[r], w_ref, rtol=0, atol=1e-12)
        # an intermediate record: state after 2*thin steps
        w_mid = sgd_reference_chain(X, y, W0[r], lr, idx[: 2 * thin, r])
        np.testing.assert_allclose(rec[1, r], w_mid, rtol=0, atol=1e-12)
        # the fused moments: sums over the records (here 40: a full record group of 32 and a
        # partial one), the second moment on its lower triangle only
        d = rec[:, r] - w_star
        np.testing.assert_allclose(sums[0][r], d.sum(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(sums[1][r], np.tril(d.T @ d), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fill_upper(sums[1][r]), d.T @ d, rtol=1e-12, atol=1e-12)
    if sampling == "without":
        np.testing.assert_array_equal(perm, perm_after)


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_kernel_independent_of_thread_count_and_call_split(sampling):
    """Replicas over numba threads and steps over calls of whole record groups (32 records,
    as run_sgd makes them): the same bits either way."""
    numba = pytest.importorskip("numba")
    R, N, P, S, n = 7, 6, 20, 4, 384
    X, y, w_star = _problem(3, N, P)
    keys = replica_keys(np.random.default_rng(5), R)
    out = []
    runs = [(1, [n]), (numba.config.NUMBA_NUM_THREADS, [n]), (1, [96, 96, 192])]  # 32-record groups
    for threads, splits in runs:
        W, perm = np.zeros((R, N)), np.tile(np.arange(P, dtype=np.int64), (R, 1))
        sums = np.zeros((R, N)), np.zeros((R, N, N))
        done = 0
        previous = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            for m in splits:
                _kernel(X, y, W, 0.2, S, sampling, perm, keys, done, m, 3, np.empty((0, R, N)),
                        sums, w_star)  # fmt: skip
                done += m
        finally:
            numba.set_num_threads(previous)
        out.append((W, perm, *sums))
    for other in out[1:]:
        for a, b in zip(out[0], other, strict=True):
            np.testing.assert_array_equal(a, b)


def test_index_statistics_with_replacement():
    P, R, S, n = 13, 4, 5, 5000
    u = np.random.default_rng(3).random((n, R, S))
    idx, _ = batch_indices_from_uniforms(u, P, "with")
    counts = np.bincount(idx.ravel(), minlength=P)
    n_tot, p = idx.size, 1.0 / P
    se = np.sqrt(n_tot * p * (1 - p))
    assert counts.shape == (P,)
    assert np.all(np.abs(counts - n_tot * p) < 5 * se)
    # edge case: u extremely close to 1 is clipped to P - 1
    edge, _ = batch_indices_from_uniforms(np.full((1, 1, 1), np.nextafter(1.0, 0.0)), P, "with")
    assert edge.item() == P - 1


def test_index_statistics_without_replacement():
    P, R, S, n = 12, 3, 4, 1500
    u = np.random.default_rng(4).random((n, R, S))
    idx, _ = batch_indices_from_uniforms(u, P, "without")
    sorted_idx = np.sort(idx, axis=-1)
    assert np.all(np.diff(sorted_idx, axis=-1) > 0), "duplicate index within a batch"
    counts = np.bincount(idx.ravel(), minlength=P)
    n_batches, p = n * R, S / P
    se = np.sqrt(n_batches * p * (1 - p))
    assert np.all(np.abs(counts - n_batches * p) < 5 * se)


def test_without_replacement_subsets_uniform():
    """All C(P, S) subsets are equally likely (chi-square-like count check)."""
    P, S, n = 5, 2, 20000
    u = np.random.default_rng(5).random((n, 1, S))
    idx, _ = batch_indices_from_uniforms(u, P, "without")
    subsets = list(itertools.combinations(range(P), S))
    code = {s: k for k, s in enumerate(subsets)}
    keys = np.array([code[tuple(sorted(b))] for b in idx[:, 0]])
    counts = np.bincount(keys, minlength=len(subsets))
    p = 1.0 / len(subsets)
    se = np.sqrt(n * p * (1 - p))
    assert np.all(np.abs(counts - n * p) < 5 * se)


def _small_run(seed, chunk_steps, sampling="with", sample_steps=2 * 320, **kw):
    X, y, w_star = _problem(7, 5, 12)
    R = 3
    update = Update(lr=0.2, batch_size=4, sampling=sampling)
    schedule = Schedule(100, sample_steps, thin=2, n_blocks=2, chunk_steps=chunk_steps)
    rng = np.random.default_rng(seed)
    return X, y, w_star, run_sgd(X, y, w_star, np.zeros((R, 5)), update, schedule, rng, **kw)


def _result_arrays(res: SGDResult):
    return [res.sum_dw, res.sum_dwdw, res.n_records, res.final_W]


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_run_sgd_bit_reproducible_and_chunk_invariant(sampling):
    *_, r1 = _small_run(11, 64, sampling)
    *_, r2 = _small_run(11, 64, sampling)
    *_, r3 = _small_run(11, 4096, sampling)
    *_, r4 = _small_run(11, 1, sampling)
    *_, r5 = _small_run(12, 64, sampling)
    for a, b, c, d in zip(
        _result_arrays(r1), _result_arrays(r2), _result_arrays(r3), _result_arrays(r4), strict=True
    ):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(a, d)
    assert not np.array_equal(r1.final_W, r5.final_W)
    assert not r1.diverged
    np.testing.assert_array_equal(r1.n_records, np.full(6, 160))
    np.testing.assert_array_equal(r1.group_replica, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(r1.group_block, [0, 1, 0, 1, 0, 1])


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_group_covariances_match_stored_snapshots(sampling):
    """Reproduce the whole trajectory with the bare kernel and compare with np.cov."""
    burnin, sample, thin, n_blocks, R, S = 100, 640, 2, 2, 3, 4
    X, y, w_star, res = _small_run(13, 128, sampling)
    P, N = X.shape
    # the kernel's streams are keyed by one draw of the run's generator
    keys = replica_keys(np.random.default_rng(13), R)
    W = np.zeros((R, N))
    perm = np.tile(np.arange(P, dtype=np.int64), (R, 1))
    rec = np.empty((burnin + sample, R, N))
    _kernel(X, y, W, 0.2, S, sampling, perm, keys, 0, burnin + sample, 1, rec)
    np.testing.assert_array_equal(W, res.final_W)
    snaps = rec[burnin:][thin - 1 :: thin]  # (n_rec_total, R, N)
    per_block = sample // thin // n_blocks
    cov_mean = group_covariances(res.sum_dw, res.sum_dwdw, res.n_records, about="mean")
    cov_ref = group_covariances(res.sum_dw, res.sum_dwdw, res.n_records, about="reference")
    for g in range(R * n_blocks):
        r, b = res.group_replica[g], res.group_block[g]
        s = snaps[b * per_block : (b + 1) * per_block, r]
        np.testing.assert_allclose(cov_mean[g], np.cov(s.T, bias=True), rtol=1e-9, atol=1e-14)
        d = s - w_star
        np.testing.assert_allclose(cov_ref[g], d.T @ d / len(d), rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("burnin", [0, 50])
def test_divergence_flagged_without_warnings(burnin):
    X, y, w_star = _problem(8, 5, 12)
    omega_max = np.linalg.eigvalsh(X.T @ X / len(X))[-1]
    msgs = []
    res = run_sgd(
        X,
        y,
        w_star,
        np.ones((2, 5)),
        Update(50.0 / omega_max, 4, "with"),
        Schedule(burnin, 20000, 1, 2, chunk_steps=256),
        np.random.default_rng(0),
        progress=msgs.append,
    )
    assert res.diverged
    assert np.all(np.isnan(res.sum_dw))
    assert np.all(np.isnan(res.sum_dwdw))
    assert msgs  # final progress line is always emitted when a callback is given


def test_progress_reports():
    msgs = []
    _small_run(1, 64, progress=msgs.append, sample_steps=2 * 3200)
    assert 5 <= len(msgs) <= 12
    assert "replica-steps/s" in msgs[-1]
    assert "6500/6500" in msgs[-1]


def test_argument_validation():
    X, y, w_star = _problem(9, 3, 6)
    W, rng = np.zeros((2, 3)), np.random.default_rng(0)
    steps = Schedule(burnin_steps=0, sample_steps=100, thin=1, n_blocks=1)
    with pytest.raises(ValueError, match=r"sampling.*with.*without"):
        run_sgd(X, y, w_star, W, Update(0.1, 2, "poisson"), steps, rng)
    with pytest.raises(ValueError, match="batch_size"):
        run_sgd(X, y, w_star, W, Update(0.1, 7, "without"), steps, rng)
    with pytest.raises(ValueError, match="sample_steps"):
        run_sgd(X, y, w_star, W, Update(0.1, 2, "with"), Schedule(0, 100, 1, 3), rng)
    with pytest.raises(ValueError, match="sampling"):
        batch_indices_from_uniforms(np.zeros((1, 1, 1)), 3, "bogus")
    # S > P is fine with replacement
    res = run_sgd(X, y, w_star, W, Update(0.1, 7, "with"), steps, rng)
    assert not res.diverged


def _stationary_covariance(X, y, w_star, lr, S, sampling):
    """Exact fixed point of the discrete SGD second moment about w* (linear regression).

    M = E_B[(1 - lr H_B) M (1 - lr H_B)] + lr^2 E_B[g_B g_B^T], g_B the mini-batch gradient
    at w* (mean zero, so cross terms vanish in the stationary state where E[dw] = 0).
    """
    P, N = X.shape
    A = X[:, :, None] * X[:, None, :]  # (P, N, N): x x^T
    H = A.mean(axis=0)
    r = X @ w_star - y
    if sampling == "with":
        a, b = 1.0 / (S * P), 1.0 - 1.0 / S
        c = 1.0 / S
    else:
        a = (1.0 - (S - 1) / (P - 1)) / (S * P)
        b = (S - 1) * P / (S * (P - 1))
        c = (P - S) / (S * (P - 1))
    C = c * np.einsum("p,pij->ij", r**2, A) / P

    def step(M):  # E_B[(1 - lr H_B) M (1 - lr H_B)]
        EHMH = a * np.einsum("pij,jk,pkl->il", A, M, A) + b * H @ M @ H
        return M - lr * (H @ M + M @ H) + lr**2 * EHMH

    L = np.empty((N * N, N * N))
    for k in range(N * N):
        E = np.zeros(N * N)
        E[k] = 1.0
        E = E.reshape(N, N)
        L[:, k] = (E - step(E)).ravel()
    return np.linalg.solve(L, (lr**2 * C).ravel()).reshape(N, N)


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_stationary_covariance_matches_exact_fixed_point(sampling):
    N, P, S, lr, sigma, R = 4, 16, 4, 0.1, 0.5, 32
    X, y, w_star = _problem(2024, N, P, sigma=sigma)
    omega_min = np.linalg.eigvalsh(X.T @ X / P)[0]
    tau = 1.0 / (lr * omega_min)  # slowest relaxation time in steps
    n_blocks = 8
    thin = 5
    block = int(np.ceil(30 * tau / (thin * 32))) * thin * 32
    res = run_sgd(
        X,
        y,
        w_star,
        np.tile(w_star, (R, 1)),
        Update(lr, S, sampling),
        Schedule(int(10 * tau), n_blocks * block, thin, n_blocks),
        np.random.default_rng(99),
    )
    assert not res.diverged
    covs = group_covariances(res.sum_dw, res.sum_dwdw, res.n_records, about="reference")
    est, se = jackknife_of_mean(lambda m: m, covs)
    M = _stationary_covariance(X, y, w_star, lr, S, sampling)
    z = (est - M) / se
    assert np.max(np.abs(z)) < 4.0, z
    # and the estimate is not trivially loose
    assert np.all(se[np.diag_indices(N)] < 0.1 * np.diag(M))
