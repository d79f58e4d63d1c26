"""The float32 option of the two-layer SGD and SGF kernels (paper 000 Eqs. 41, 51-52): the
deviation form (:mod:`weightdyn.two_layer.deviation`) against the float64 kernels."""

from __future__ import annotations

import warnings

import numba
import numpy as np
import pytest

from weightdyn.counter_rng import replica_keys
from weightdyn.sgd import Schedule, Update
from weightdyn.two_layer import deviation as dv
from weightdyn.two_layer import simulate as sim
from weightdyn.two_layer.data import two_layer_data

RUNS = {"sgd": sim.run_sgd_two_layer, "sgf": sim.run_sgf_two_layer}
MOMENTS = ("sum_dW1", "sum_dW2", "sum_dW1dW1", "sum_dW2dW2", "sum_dW1dW2")


def _minimum(N_i=5, N_h=4, N_o=2, P=40, seed=1):
    """Teacher data and the gradient-flow end point W^0 (Eq. 53) from a Glorot start."""
    rng = np.random.default_rng(seed)
    data = two_layer_data(N_i, P, rng, N_o=N_o, targets="teacher", sigma_y2=0.5)
    W1, W2 = sim.gaussian_init(N_i, N_h, N_o, rng)
    gf = sim.gradient_flow(data.X, data.Y, W1, W2, 300.0)
    return data, gf


def _run(kind, precision, chunk_steps=4096, lr=0.2, sample_steps=640, seed=5, **kw):
    data, gf = _minimum()
    schedule = Schedule(60, sample_steps, 5, 2, chunk_steps)
    return RUNS[kind](
        data.X, data.Y, (gf.W1, gf.W2), (gf.W1, gf.W2), Update(lr, 4, "with"), schedule,
        np.random.default_rng(seed), replicas=3, trace_every=20, precision=precision, **kw,
    )  # fmt: skip


def _kernels(kind, data, gf, W1, W2, keys, n, dtype):
    """``n`` steps of the float64 kernel (``dtype`` None) or of the deviation form in
    ``dtype``, recording every 5th: the weights, their records and the diagnostics."""
    R, P, lr, S, thin = W1.shape[0], data.P, 0.2, 4, 5
    rec1, rec2 = np.empty((n // thin, *W1.shape)), np.empty((n // thin, *W2.shape))
    diag = np.empty((n // thin, R, 3))
    perm = np.tile(np.arange(P, dtype=np.int64), (R, 1))
    coeffs = (lr, S, True, perm) if kind == "sgd" else (lr / P, np.sqrt(lr * lr / (S * P)))
    tail = (keys, 0, n, thin, rec1, rec2, diag)
    if dtype is None:
        A1, A2 = W1.copy(), W2.copy()
        Wp = np.empty((R, data.N_o, data.N_i))
        sim.product_kernel(A1, A2, Wp)
        kernel = sim.sgd_kernel if kind == "sgd" else sim.sgf_kernel
        kernel(data.X, data.Y, A1, A2, Wp, *coeffs, *tail, gf.w_star, 1e10)
        return (A1, A2), (rec1 - gf.W1, rec2 - gf.W2), diag
    dev = dv.Deviations.build((data.X, data.Y), (gf.W1, gf.W2), (W1, W2), gf.w_star, dtype)
    kernel = dv.sgd_deviation_kernel if kind == "sgd" else dv.sgf_deviation_kernel
    kernel(dev.X, dev.E0, dev.refs, dev.state, *coeffs, *tail, 1e10)
    return dev.weights(), (rec1, rec2), diag


@pytest.mark.parametrize("kind", ["sgd", "sgf"])
def test_deviation_form_is_the_float64_step_and_float32_stays_close(kind):
    """Eq. 41 (or Eqs. 51-52) with the product expanded about W^0: in float64 the same
    trajectory as the float64 kernel to rounding; in float32 its deviations to ~1e-6."""
    data, gf = _minimum()
    R = 3
    rng = np.random.default_rng(2)
    W1 = gf.W1 + 0.05 * rng.normal(size=(R, *gf.W1.shape))
    W2 = gf.W2 + 0.05 * rng.normal(size=(R, *gf.W2.shape))
    keys = replica_keys(rng, R)
    ref = _kernels(kind, data, gf, W1, W2, keys, 400, None)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-5)):
        got = _kernels(kind, data, gf, W1, W2, keys, 400, dtype)
        for a, b, W_ref in zip(got[0], ref[0], (gf.W1, gf.W2), strict=True):
            assert np.abs(a - b).max() <= tol * np.abs(b - W_ref).max()
        for a, b in zip(got[1], ref[1], strict=True):  # the records: deviations from W^0
            assert np.abs(a - b).max() <= tol * np.abs(b).max()
        np.testing.assert_allclose(got[2], ref[2], rtol=tol)


@pytest.mark.parametrize("kind", ["sgd", "sgf"])
def test_float32_run_is_close_to_float64(kind):
    """Same keys, same batches: a short float32 run's moments and traces stay within 1e-5 of
    the float64 run's (relative to their scale); the result says which it was."""
    a, b = _run(kind, "float64"), _run(kind, "float32")
    assert (a.precision, b.precision) == ("float64", "float32") and not b.diverged
    for name in (*MOMENTS, "trace_D1", "trace_D2", "trace_dist_avg"):
        x, y = getattr(a, name), getattr(b, name)
        assert y.dtype == np.float64 and np.abs(x - y).max() <= 1e-5 * np.abs(x).max(), name
    for name in ("final_W1", "final_W2"):
        assert np.abs(getattr(a, name) - getattr(b, name)).max() <= 1e-6, name


@pytest.mark.parametrize("kind", ["sgd", "sgf"])
def test_float32_independent_of_chunks_and_threads(kind):
    """The float32 state is carried between kernel calls: the same bits for any chunk_steps
    and any number of numba threads."""
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = _run(kind, "float32", chunk_steps=1)  # one record group (160 steps) per chunk
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = _run(kind, "float32")
    finally:
        numba.set_num_threads(previous)
    for name in (*MOMENTS, "final_W1", "final_W2", "trace_D2", "trace_dist_avg"):
        assert np.array_equal(getattr(one, name), getattr(many, name)), name


@pytest.mark.parametrize("kind", ["sgd", "sgf"])
def test_float32_replicas_together_match_replicas_alone(kind):
    """Per-replica references and the caller's keys (the sampling window's runs): replica r of
    one float32 run is bit for bit the one-replica run with its reference and key."""
    data, _ = _minimum()
    rng = np.random.default_rng(3)
    R, shape1, shape2 = 3, (4, 5), (2, 4)
    refs = (rng.normal(size=(R, *shape1)), rng.normal(size=(R, *shape2)))
    inits = (refs[0] + 0.01 * rng.normal(size=(R, *shape1)), refs[1] + 0.0)
    keys = np.concatenate([replica_keys(np.random.default_rng(r), 1) for r in range(R)])
    opts = {"w_star": np.zeros((2, 5)), "trace_every": 20, "precision": "float32"}
    schedule, update = Schedule(0, 640, 5, 2), Update(0.05, 4, "with")
    both = RUNS[kind](data.X, data.Y, refs, inits, update, schedule, None, keys=keys, **opts)
    for r in range(R):
        alone = RUNS[kind](data.X, data.Y, (refs[0][r], refs[1][r]), (inits[0][r], inits[1][r]),
                           update, schedule, np.random.default_rng(r), **opts)  # fmt: skip
        for name in (*MOMENTS, "n_records"):
            assert np.array_equal(getattr(both, name)[2 * r : 2 * r + 2], getattr(alone, name))
        for name in ("final_W1", "final_W2"):
            assert np.array_equal(getattr(both, name)[r], getattr(alone, name)[0]), name


@pytest.mark.parametrize("kind", ["sgd", "sgf"])
def test_float32_divergence_flagged_without_warnings(kind):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = _run(kind, "float32", lr=50.0)
    assert res.diverged and res.diverged_replicas.any()
    for name in MOMENTS:
        assert np.all(np.isnan(getattr(res, name)))
    assert np.isnan(res.trace_D2[-1]).all()


def test_bad_precision_names_the_argument_and_the_allowed_values():
    for kind in RUNS:
        with pytest.raises(ValueError, match=r"precision must be one of \('float64', 'float32'\)"):
            _run(kind, "float16")


def _stationary_traces(precision, seed):
    """Per replica: tr cov(vec dW1) and tr cov(vec dW2) about its own mean, SGD at W^0."""
    data, gf = _minimum(N_i=5, N_h=4, N_o=1, P=40, seed=4)
    R = 24
    res = sim.run_sgd_two_layer(
        data.X, data.Y, (gf.W1, gf.W2), (gf.W1, gf.W2), Update(0.1, 4, "with"),
        Schedule(2000, 20000, 5, 1), np.random.default_rng(seed), replicas=R,
        second_moments="all", precision=precision,
    )  # fmt: skip
    n = res.n_records[:, None]
    out = []
    for s, ss in (("sum_dW1", "sum_dW1dW1"), ("sum_dW2", "sum_dW2dW2")):
        m = getattr(res, s) / n
        out.append(np.einsum("gii->g", getattr(res, ss)) / n[:, 0] - np.sum(m * m, axis=1))
    return np.stack(out, axis=1)  # (R, 2)


def test_float32_stationary_second_moments_agree_with_float64():
    """Independent streams: the mean over 24 replicas of the stationary fluctuations (traces of
    the covariances of dW1 and dW2, Eq. 66) agree within 4 standard errors; with the same
    streams they agree to 1e-4, far inside the statistical error."""
    a, b = _stationary_traces("float64", 1), _stationary_traces("float32", 2)
    se = np.sqrt(a.var(axis=0, ddof=1) / len(a) + b.var(axis=0, ddof=1) / len(b))
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) < 4 * se)
    assert np.all(se < 0.02 * a.mean(axis=0))  # it resolves a difference of a few per cent
    same = _stationary_traces("float32", 1)
    np.testing.assert_allclose(same, a, rtol=1e-4)
