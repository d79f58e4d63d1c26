"""SGD with weight decay, a preconditioner and injected noise (paper 000 App. B).

The step ``w <- w - lr Lam (g_B(w) + chi w) + sqrt(2 lr T) Lam^{1/2} xi`` of
:class:`weightdyn.sgd.Update`'s variant fields, run by
:func:`weightdyn.single_layer.simulate.sgd_variant_kernel`.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import solve_discrete_lyapunov

from weightdyn.blas import fill_upper
from weightdyn.counter_rng import normals, replica_keys, uniforms
from weightdyn.sgd import Schedule, Update, update_matrices
from weightdyn.single_layer.simulate import (
    batch_indices_from_uniforms,
    noise_keys,
    run_sgd,
    sgd_kernel,
    sgd_reference_chain,
    sgd_variant_kernel,
)

_SPD = np.array([[1.0, 0.3, 0.0, 0.1], [0.3, 0.8, 0.1, 0.0], [0.0, 0.1, 0.5, 0.0],
                 [0.1, 0.0, 0.0, 0.7]])  # fmt: skip
_NONSYM = np.array([[1.0, 0.4, 0.0, 0.0], [-0.2, 0.8, 0.3, 0.0], [0.1, 0.0, 0.6, 0.2],
                    [0.0, -0.1, 0.0, 0.9]])  # fmt: skip
#: name -> (weight_decay, preconditioner, temperature)
VARIANTS = {
    "decay": (0.3, None, 0.0),
    "spd": (0.0, _SPD, 0.0),
    "nonsymmetric": (0.2, _NONSYM, 0.0),
    "noise": (0.1, _SPD, 0.05),
    "noise_identity": (0.0, None, 0.05),
}


def _problem(seed: int, N: int, P: int, sigma: float = 0.5, scale: float | None = None):
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(N) if scale is None else scale
    X = scale * rng.standard_normal((P, N))
    y = X @ rng.standard_normal(N) + sigma * rng.standard_normal(P)
    return X, y, np.linalg.lstsq(X, y, rcond=None)[0]


def _matrices(update: Update, N: int) -> tuple[np.ndarray, np.ndarray]:
    drift, noise = update_matrices(update, N)
    none = np.empty((0, 0))
    return (none if drift is None else drift), (none if noise is None else noise)


def _variant(X, y, W, update, perm, keys, step0, n, thin, rec, sums, w_ref):
    """sgd_variant_kernel with the checked matrices of ``update``."""
    drift, noise = _matrices(update, X.shape[1])
    return sgd_variant_kernel(
        X, y, W, update.lr, update.batch_size, update.sampling == "with", perm, keys, step0, n,
        thin, w_ref, *sums, rec, 1e12, float(update.weight_decay), drift, noise,
    )  # fmt: skip


@pytest.mark.parametrize("sampling", ["with", "without"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_kernel_matches_reference_chain(name: str, sampling: str) -> None:
    R, N, P, S, n, thin, step0 = 3, 4, 12, 5, 120, 3, 1000
    chi, lam, T = VARIANTS[name]
    update = Update(0.3, S, sampling, weight_decay=chi, preconditioner=lam, temperature=T)
    X, y, w_star = _problem(1, N, P)
    rng = np.random.default_rng(2)
    keys = replica_keys(rng, R)
    W0 = rng.standard_normal((R, N))
    perm0 = np.stack([rng.permutation(P) for _ in range(R)]).astype(np.int64)
    idx, perm_after = batch_indices_from_uniforms(uniforms(keys, step0, n, S), P, sampling, perm0)
    xi = normals(noise_keys(keys), step0, n, N)  # xi_i of step t: normal t N + i
    W, perm = W0.copy(), perm0.copy()
    rec, sums = np.empty((n // thin, R, N)), (np.zeros((R, N)), np.zeros((R, N, N)))
    assert not _variant(X, y, W, update, perm, keys, step0, n, thin, rec, sums, w_star).any()
    F = update_matrices(update, N)[1]
    for r in range(R):
        kw = {"weight_decay": chi, "preconditioner": lam, "noise_factor": F}
        ref = sgd_reference_chain(X, y, W0[r], 0.3, idx[:, r], normals=None if F is None
                                  else xi[:, r], **kw)  # fmt: skip
        np.testing.assert_allclose(W[r], ref, rtol=0, atol=1e-12)
        mid = sgd_reference_chain(X, y, W0[r], 0.3, idx[: 2 * thin, r], normals=None if F is None
                                  else xi[: 2 * thin, r], **kw)  # fmt: skip
        np.testing.assert_allclose(rec[1, r], mid, rtol=0, atol=1e-12)
        d = rec[:, r] - w_star
        np.testing.assert_allclose(sums[0][r], d.sum(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fill_upper(sums[1][r]), d.T @ d, rtol=1e-12, atol=1e-12)
    if sampling == "without":
        np.testing.assert_array_equal(perm, perm_after)


def _run(update: Update, chunk_steps: int, seed: int = 11):
    X, y, w_star = _problem(7, 4, 12)
    schedule = Schedule(100, 2 * 320, thin=2, n_blocks=2, chunk_steps=chunk_steps)
    rng = np.random.default_rng(seed)
    return run_sgd(X, y, w_star, np.zeros((3, 4)), update, schedule, rng)


def _arrays(res) -> list[np.ndarray]:
    return [res.sum_dw, res.sum_dwdw, res.n_records, res.final_W]


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_plain_update_runs_the_plain_kernel_bit_for_bit(sampling: str) -> None:
    """Default variant fields: run_sgd is the plain sgd_kernel on the run's streams."""
    burnin, sample, R, N = 100, 640, 3, 4
    explicit = Update(0.2, 4, sampling, weight_decay=0.0, preconditioner=None, temperature=0.0)
    res = _run(explicit, 64, seed=13)
    X, y, w_star = _problem(7, 4, 12)
    keys = replica_keys(np.random.default_rng(13), R)
    W, perm = np.zeros((R, N)), np.tile(np.arange(12, dtype=np.int64), (R, 1))
    no_sums = (np.empty((0, N)), np.empty((0, N, N)))
    sgd_kernel(X, y, W, 0.2, 4, sampling == "with", perm, keys, 0, burnin + sample, 1000,
               w_star, *no_sums, np.empty((0, R, N)), 1e12)  # fmt: skip
    np.testing.assert_array_equal(res.final_W, W)
    for a, b in zip(
        _arrays(res), _arrays(_run(Update(0.2, 4, sampling), 64, seed=13)), strict=True
    ):
        np.testing.assert_array_equal(a, b)


def test_identity_preconditioner_is_plain_sgd_up_to_rounding() -> None:
    plain = _run(Update(0.2, 4), 64)
    variant = _run(Update(0.2, 4, preconditioner=np.eye(4)), 64)
    np.testing.assert_allclose(variant.final_W, plain.final_W, rtol=0, atol=1e-12)
    np.testing.assert_allclose(variant.sum_dwdw, plain.sum_dwdw, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_variant_independent_of_chunking(sampling: str) -> None:
    update = Update(0.2, 4, sampling, weight_decay=0.1, preconditioner=_SPD, temperature=0.05)
    runs = [_run(update, c) for c in (64, 4096, 1)]
    for other in runs[1:]:
        for a, b in zip(_arrays(runs[0]), _arrays(other), strict=True):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(runs[0].final_W, _run(update, 64, seed=12).final_W)


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_variant_kernel_independent_of_thread_count_and_call_split(sampling: str) -> None:
    numba = pytest.importorskip("numba")
    R, N, P, S, n = 7, 4, 20, 4, 384
    X, y, w_star = _problem(3, N, P)
    keys = replica_keys(np.random.default_rng(5), R)
    update = Update(0.2, S, sampling, weight_decay=0.1, preconditioner=_NONSYM)
    noisy = Update(0.2, S, sampling, weight_decay=0.1, preconditioner=_SPD, temperature=0.1)
    for upd in (update, noisy):
        out = []
        for threads, splits in [(1, [n]), (numba.config.NUMBA_NUM_THREADS, [n]), (1, [96, 288])]:
            W, perm = np.zeros((R, N)), np.tile(np.arange(P, dtype=np.int64), (R, 1))
            sums, done = (np.zeros((R, N)), np.zeros((R, N, N))), 0
            previous = numba.get_num_threads()
            numba.set_num_threads(threads)
            try:
                for m in splits:
                    _variant(X, y, W, upd, perm, keys, done, m, 3, np.empty((0, R, N)), sums,
                             w_star)  # fmt: skip
                    done += m
            finally:
                numba.set_num_threads(previous)
            out.append((W, perm, *sums))
        for other in out[1:]:
            for a, b in zip(out[0], other, strict=True):
                np.testing.assert_array_equal(a, b)


def test_stationary_covariance_of_injected_noise_is_the_discrete_lyapunov_solution() -> None:
    """Full batches (S = P without replacement): only the injected noise is left, and the
    stationary covariance about ``w_inf = K^{-1} X^T y / P`` solves
    ``M = (I - G K) M (I - G K)^T + 2 lr T Lam`` with ``K = H + chi I``, ``G = lr Lam``."""
    N, P, lr, chi, T, R = 4, 12, 0.1, 0.2, 0.5, 32
    X, y, _ = _problem(2024, N, P, scale=1.0)
    H = X.T @ X / P
    K = H + chi * np.eye(N)
    w_inf = np.linalg.solve(K, X.T @ y / P)
    A = np.eye(N) - lr * _SPD @ K
    M = solve_discrete_lyapunov(A, 2.0 * lr * T * _SPD)
    tau = 1.0 / np.min(1.0 - np.abs(np.linalg.eigvals(A)))  # slowest relaxation (steps)
    thin, n_blocks = 2, 8
    block = int(np.ceil(30 * tau / (thin * 32))) * thin * 32
    update = Update(lr, P, "without", weight_decay=chi, preconditioner=_SPD, temperature=T)
    res = run_sgd(X, y, w_inf, np.tile(w_inf, (R, 1)), update,
                  Schedule(int(10 * tau), n_blocks * block, thin, n_blocks),
                  np.random.default_rng(99))  # fmt: skip
    assert not res.diverged
    block_means = res.sum_dwdw / res.n_records[:, None, None]  # (R B, N, N), about w_inf
    est = block_means.mean(axis=0)
    se = block_means.std(axis=0, ddof=1) / np.sqrt(len(block_means))
    z = (est - M) / se
    assert np.max(np.abs(z)) < 4.5, z
    assert np.all(se[np.diag_indices(N)] < 0.05 * np.diag(M))


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"weight_decay": np.nan}, "weight_decay"),
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": np.inf}, "temperature"),
        ({"preconditioner": np.eye(3)}, r"preconditioner.*\(4, 4\)"),
        ({"preconditioner": np.full((4, 4), np.nan)}, "preconditioner.*finite"),
        ({"preconditioner": _NONSYM, "temperature": 0.1}, "preconditioner.*symmetric"),
        ({"preconditioner": -np.eye(4), "temperature": 0.1}, "preconditioner.*positive definite"),
        ({"preconditioner": -_NONSYM}, "preconditioner.*positive real parts"),
        ({"preconditioner": np.diag([1.0, 1.0, 1.0, 0.0])}, "preconditioner.*positive real"),
    ],
)
def test_bad_variant_fields_are_refused_naming_the_key(fields: dict, match: str) -> None:
    update = Update(0.1, 4, **fields)
    with pytest.raises(ValueError, match=match):
        update_matrices(update, 4)
    with pytest.raises(ValueError, match=match):
        _run(update, 64)


def test_update_checks_and_record_semantics() -> None:
    with pytest.raises(ValueError, match="preconditioner"):
        Update(0.1, 4, preconditioner=[["a", "b"], ["c", "d"]])
    with pytest.raises(ValueError, match="lr"):
        update_matrices(Update(-0.1, 4, temperature=1.0), 2)
    lam = _SPD.copy()
    update = Update(0.1, 4, preconditioner=lam, temperature=0.5)
    lam[0, 0] = 9.0  # the update holds its own read-only copy
    assert update.preconditioner[0, 0] == 1.0 and not update.preconditioner.flags.writeable
    assert update == Update(0.1, 4, preconditioner=_SPD, temperature=0.5)
    assert hash(update) == hash(Update(0.1, 4, preconditioner=_SPD, temperature=0.5))
    assert update != Update(0.1, 4, preconditioner=2 * _SPD, temperature=0.5)
    assert Update(0.1, 4).is_plain and not update.is_plain
    drift, F = update_matrices(update, 4)
    np.testing.assert_allclose(drift, 0.1 * _SPD, rtol=1e-15)
    np.testing.assert_allclose(F @ F.T, 2 * 0.1 * 0.5 * _SPD, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(F, F.T, atol=1e-15)
    assert update_matrices(Update(0.1, 4), 4) == (None, None)
    with pytest.raises(ValueError, match="temperature"):
        Update(0.1, 4, temperature=1.0).require_plain("the two-layer driver")


def test_drivers_without_the_variant_refuse_it() -> None:
    """The other drivers of :class:`Update` run plain SGD (SGF) only and say so."""
    from weightdyn.models.simulate import run_sgd as run_model_sgd
    from weightdyn.single_layer.sgf import run_sgf
    from weightdyn.two_layer.simulate import run_sgd_two_layer, run_sgf_two_layer

    X, y, w_star = _problem(7, 4, 12)
    update, schedule = Update(0.1, 4, weight_decay=0.1), Schedule(0, 64)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="weight_decay"):
        run_sgf(X, y, w_star, np.zeros((2, 4)), update, schedule, rng)
    Y, refs = y[:, None], (np.ones((3, 4)), np.ones((1, 3)))
    for driver in (run_sgd_two_layer, run_sgf_two_layer):
        with pytest.raises(ValueError, match="weight_decay"):
            driver(X, Y, refs, refs, update, schedule, rng)
    with pytest.raises(ValueError, match="temperature"):
        hot = Update(0.1, 4, temperature=0.1)
        run_model_sgd(None, X, Y, np.zeros((2, 4)), theta_ref=w_star, update=hot,
                      schedule=schedule, rng=rng)  # fmt: skip
