"""Single-precision SGD (paper 000 Eqs. 10-11) and SGF (Eq. 13) of the single-layer net:
``precision="float32"`` of run_sgd / run_sgf against the float64 kernels on the same streams,
its stationary covariance, its independence of chunking and threads, and its argument checks."""

from __future__ import annotations

import numpy as np
import pytest

from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer.sgf import NOISE_MODES, run_sgf
from weightdyn.single_layer.simulate import run_sgd
from weightdyn.stats import group_covariances, jackknife_of_mean

EPS32 = float(np.finfo(np.float32).eps)
DYNAMICS = ("sgd", *NOISE_MODES)


def _problem(N: int, P: int, teacher_scale: float = 1.0, seed: int = 1, noise: float = 0.5):
    """Inputs, labels and w* (teacher weights of size ``teacher_scale``, label noise ``noise``)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, N)) / np.sqrt(N)
    y = X @ (teacher_scale * rng.standard_normal(N)) + noise * rng.standard_normal(P)
    return X, y, np.linalg.lstsq(X, y, rcond=None)[0]


def _run(dynamics, X, y, w_ref, W0, update, schedule, seed, precision):
    """run_sgd (``dynamics = "sgd"``) or run_sgf with that noise, at ``precision``."""
    rng = np.random.default_rng(seed)
    if dynamics == "sgd":
        return run_sgd(X, y, w_ref, W0, update, schedule, rng, precision=precision)
    return run_sgf(X, y, w_ref, W0, update, schedule, rng, noise=dynamics, precision=precision)


@pytest.mark.parametrize("teacher_scale", [1.0, 1e3])
@pytest.mark.parametrize("dynamics", DYNAMICS)
def test_float32_trajectory_stays_within_ulps_times_steps_of_float64(dynamics, teacher_scale):
    """Same streams, n steps: the float32 weights stay within n float32 ulps of the scale of
    the deviations and residuals at w* (|dw|, |r*|), whatever |w*| is (1 or 1e3: the deviation
    form cancels nothing); so do the float64 moment sums of its records."""
    N, P, n = 8, 24, 256
    X, y, w_star = _problem(N, P, teacher_scale)
    W0 = w_star + 0.3 * np.random.default_rng(2).standard_normal((3, N))
    update, schedule = Update(0.3, 4, "with"), Schedule(0, n, 1, 1)
    r64, r32 = (_run(dynamics, X, y, w_star, W0, update, schedule, 5, p)
                for p in ("float64", "float32"))  # fmt: skip
    assert not (r64.diverged or r32.diverged)
    assert r32.final_W.dtype == np.float64
    scale = max(np.abs(W0 - w_star).max(), np.abs(X @ w_star - y).max())
    tol = n * EPS32 * scale
    assert np.abs(r32.final_W - r64.final_W).max() <= tol
    assert np.abs(r32.sum_dw - r64.sum_dw).max() <= n * tol
    assert np.abs(r32.sum_dwdw - r64.sum_dwdw).max() <= n * 3 * scale * tol
    assert not np.array_equal(r32.final_W, r64.final_W)  # it did run in single precision


def _covariance(dynamics, seed, precision, sample_blocks=8):
    """Jackknife estimate and standard error of the stationary covariance about w* (N = 4)."""
    N, P, S, lr, R = 4, 16, 4, 0.1, 16
    X, y, w_star = _problem(N, P, seed=2024)
    tau = 1.0 / (lr * np.linalg.eigvalsh(X.T @ X / P)[0])
    block = int(np.ceil(20 * tau / (5 * 32))) * 5 * 32
    schedule = Schedule(int(10 * tau), sample_blocks * block, 5, sample_blocks)
    W0 = np.tile(w_star, (R, 1))
    res = _run(dynamics, X, y, w_star, W0, Update(lr, S, "with"), schedule, seed, precision)
    assert not res.diverged
    covs = group_covariances(res.sum_dw, res.sum_dwdw, res.n_records, about="reference")
    return jackknife_of_mean(lambda m: m, covs)


@pytest.mark.parametrize("dynamics", DYNAMICS)
def test_float32_stationary_covariance_agrees_with_float64(dynamics):
    """Independent streams: the float32 and float64 covariances about w* agree within 4
    combined standard errors; the same streams: they differ by far less than one."""
    est64, se64 = _covariance(dynamics, 31, "float64")
    est32, se32 = _covariance(dynamics, 32, "float32")
    z = (est32 - est64) / np.hypot(se32, se64)
    assert np.max(np.abs(z)) < 4.0, z
    assert np.all(se64[np.diag_indices(4)] < 0.1 * np.diag(est64))  # not trivially loose
    paired, _ = _covariance(dynamics, 31, "float32")
    assert np.max(np.abs(paired - est64) / se64) < 1e-3


@pytest.mark.parametrize("sampling", ["with", "without"])
@pytest.mark.parametrize("dynamics", DYNAMICS)
def test_float32_bit_identical_for_any_thread_count_and_chunking(dynamics, sampling):
    """1 vs 2 numba threads, chunks of one record group (32 thin = 96 steps; burn-in 100 not a
    multiple of it) vs one chunk: the same bits, here where the deviations (~1e-7) are far below
    |w*| ~ 1e3, so that a float32 deviation stored as w = w* + dw in float64 between calls
    would lose its last bits (the state persists as float32 deviations instead)."""
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two numba threads")
    X, y, w_star = _problem(5, 9, teacher_scale=1e3, seed=16, noise=1e-6)
    W0 = w_star + 1e-6 * np.random.default_rng(17).standard_normal((5, 5))
    update = Update(0.1, 3, sampling)

    def run(threads: int, chunk: int):
        previous = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            schedule = Schedule(100, 2 * 384, 3, 2, chunk_steps=chunk)
            return _run(dynamics, X, y, w_star, W0, update, schedule, 18, "float32")
        finally:
            numba.set_num_threads(previous)

    ref = run(1, 4096)
    assert not ref.diverged and np.all(ref.n_records == 128)
    for other in (run(2, 4096), run(1, 1), run(2, 1)):
        for name in ("sum_dw", "sum_dwdw", "n_records", "final_W"):
            np.testing.assert_array_equal(getattr(ref, name), getattr(other, name), name)


@pytest.mark.parametrize("dynamics", DYNAMICS)
def test_float32_divergence_is_flagged(dynamics):
    """An unstable step diverges in float32 too: flagged, NaN moments, no exception."""
    X, y, w_star = _problem(3, 8, seed=15)
    lr = 50.0 / float(np.linalg.eigvalsh(X.T @ X / 8)[-1])
    res = _run(dynamics, X, y, w_star, np.tile(w_star, (2, 1)) + 0.1, Update(lr, 2, "with"),
               Schedule(200, 3200, 1, 1), 0, "float32")  # fmt: skip
    assert res.diverged
    assert np.isnan(res.sum_dw).all() and np.isnan(res.sum_dwdw).all()


def test_bad_precision_names_the_key_and_the_allowed_values():
    X, y, w_star = _problem(3, 6)
    W, steps = np.tile(w_star, (2, 1)), Schedule(0, 100, 1, 1)
    rng = np.random.default_rng(0)
    allowed = r"precision must be one of \('float64', 'float32'\), got precision='float16'"
    with pytest.raises(ValueError, match=allowed):
        run_sgd(X, y, w_star, W, Update(0.1, 2), steps, rng, precision="float16")
    with pytest.raises(ValueError, match=allowed):
        run_sgf(X, y, w_star, W, Update(0.1, 2), steps, rng, precision="float16")
    variant = Update(0.1, 2, weight_decay=0.1)
    with pytest.raises(ValueError, match=r"precision='float32' runs plain SGD.*'float64'"):
        run_sgd(X, y, w_star, W, variant, steps, rng, precision="float32")
