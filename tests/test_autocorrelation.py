"""Integrated autocorrelation times and effective sample sizes of the SGD/SGF cells (issue 12.5).

The estimator (:func:`weightdyn.stats.integrated_time`) against emcee's
``autocorr.integrated_time`` and against AR(1) series of known tau; the observable hook
(:mod:`weightdyn.observables`) against the exact identities it must satisfy and the exact
autocorrelation of the slowest SGD mode; the ``undersampled`` flag in the cell dataset, its log and
the agreement table; bit-identity of every existing result with and without the hook.
"""

from __future__ import annotations

import dataclasses

import emcee
import numpy as np
import pytest
import scipy.signal
import xarray as xr
from test_single_layer_experiment import EXP, TINY, cell_data, run_sweep

from weightdyn import agreement, observables, stats, sweep
from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer import theory
from weightdyn.single_layer.protocol import SGDProtocol, run_stationary_sgd, slowest_mode_and_loss
from weightdyn.single_layer.sgf import run_sgf
from weightdyn.single_layer.simulate import run_sgd
from weightdyn.two_layer import simulate as tl_sim
from weightdyn.two_layer.data import two_layer_data
from weightdyn.two_layer.protocol import SlowestModeAndLoss

#: the same algorithm (FFT autocorrelation of the mean-subtracted series of each replica, each
#: normalised to rho(0) = 1, averaged; tau(M) = 2 cumsum(rho) - 1 at the first M >= 5 tau(M)):
#: the results differ by the rounding of a complex vs a real FFT only (1e-15 relative). The
#: window is the same unless tau(M) falls within rounding of M / 5, which these series avoid.
EMCEE_RTOL = 1e-10


def ar1(phi: float, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Stationary AR(1) series x_t = phi x_{t-1} + e_t along axis 0; tau = (1 + phi)/(1 - phi)."""
    e = np.random.default_rng(seed).standard_normal(shape)
    e[0] /= np.sqrt(1.0 - phi**2)  # start in the stationary distribution
    return scipy.signal.lfilter([1.0], [1.0, -phi], e, axis=0)


def _sgd_cell(sample_steps: int, lr: float = 0.1, P: int = 40, replicas: int = 8):
    """One stationary SGD cell (N = 10, S = 5) with the observable hook, started at w*."""
    data = cell_data({"N": 10, "P": P, "sigma_eps2": 0.25, "data_seed": 0, "n_test": 50})
    proto = SGDProtocol(replicas=replicas, burnin_tau=5.0, sample_steps=sample_steps, thin=10,
                        n_blocks=2)  # fmt: skip
    _, res = run_stationary_sgd(data, lr, 5, "with", proto, np.random.default_rng(3),
                                observables=slowest_mode_and_loss(data))  # fmt: skip
    return data, res


# --------------------------------------------------------------------- (1) the estimator vs emcee


@pytest.mark.parametrize("phi", [0.5, 0.9, 0.99])
def test_estimator_is_emcees_on_ar1_series(phi: float) -> None:
    x = ar1(phi, (5000, 6), seed=1)
    ours = stats.integrated_time(x, ensemble_axis=1)
    theirs = emcee.autocorr.integrated_time(x, quiet=True)  # (T, walkers)
    np.testing.assert_allclose(ours.tau, theirs[0], rtol=EMCEE_RTOL)
    per_series = emcee.autocorr.integrated_time(x, quiet=True, has_walkers=False)
    np.testing.assert_allclose(stats.integrated_autocorrelation_time(x), per_series,
                               rtol=EMCEE_RTOL)  # fmt: skip
    # emcee's tol = 50 check is our flag: it raises exactly when T < 50 tau
    short = x[:300]
    tau = float(stats.integrated_time(short, ensemble_axis=1).tau)
    if 300 < observables.MIN_TAU * tau:
        with pytest.raises(emcee.autocorr.AutocorrError):
            emcee.autocorr.integrated_time(short)
    else:
        emcee.autocorr.integrated_time(short)


def test_estimator_is_emcees_on_an_sgd_cells_slowest_mode() -> None:
    _, res = _sgd_cell(40_000)
    series = res.obs_series  # (T, R, 2): slowest mode, loss
    ours = stats.integrated_time(series, ensemble_axis=1).tau
    theirs = emcee.autocorr.integrated_time(series, quiet=True)
    np.testing.assert_allclose(ours, theirs, rtol=EMCEE_RTOL)
    ess = observables.effective_sample_size(series, res.obs_spacing, res.sample_steps,
                                            res.obs_names)  # fmt: skip
    np.testing.assert_allclose(ess.tau_steps, theirs * res.obs_spacing, rtol=EMCEE_RTOL)
    np.testing.assert_allclose(ess.ess, res.replicas * res.sample_steps / ess.tau_steps)


# ------------------------------------------------------------ (2) AR(1) tau within Sokal's error


def test_ar1_tau_within_sokals_standard_error() -> None:
    """tau of one long AR(1) series within 3 Sokal SE, sqrt(2(2M+1)/n) tau, of (1+phi)/(1-phi);
    and that SE describes the spread of 200 shorter series (it is an asymptotic formula that
    runs ~15 % high here; 200 series fix the spread to ~5 %, so [0.6, 1.2] can fail both ways)."""
    phi = 0.9
    exact = (1 + phi) / (1 - phi)
    one = stats.integrated_time(ar1(phi, (200_000,), seed=2))
    assert abs(float(one.tau) - exact) < 3 * float(one.se), (float(one.tau), float(one.se))
    many = stats.integrated_time(ar1(phi, (20_000, 200), seed=3))
    assert 0.6 < many.tau.std() / many.se.mean() < 1.2
    assert abs(many.tau.mean() - exact) < 3 * many.se.mean() / np.sqrt(200)


def test_slowest_sgd_mode_relaxes_as_the_exact_ar1() -> None:
    """The slowest Hessian mode z of SGD obeys z_{t+1} = (1 - lr omega_min) z_t + (martingale
    noise) (Eq. 11; E[grad L_B | w] = H dw), so its autocorrelation is exactly phi^t: recorded
    every thin steps, tau_int = thin (1 + phi^thin)/(1 - phi^thin) steps. Tolerance: 3 Sokal SE
    plus the O((2M+1) tau / T) bias of subtracting each replica's mean."""
    data, res = _sgd_cell(400_000)
    lr = 0.1
    q = (1.0 - 1.0 / theory.slowest_relaxation_steps(theory.hessian(data.X), 1.0) * lr) ** 10
    exact = 10 * (1 + q) / (1 - q)
    ess = observables.effective_sample_size(res.obs_series, res.obs_spacing, res.sample_steps,
                                            res.obs_names)  # fmt: skip
    tau, se = ess.value("slowest", "tau_steps"), ess.value("slowest", "tau_se_steps")
    window = 5 * tau / res.obs_spacing
    bias = (2 * window + 1) * tau / res.obs_series.shape[0]
    assert abs(tau - exact) < 3 * se + bias, (tau, exact, se, bias)
    assert not ess.undersampled and ess.sampled_tau > 100


# ----------------------------------------------------- (3) a short cell is flagged, a long one not


def _cell(sample_steps: int) -> tuple[xr.Dataset, list[str]]:
    (cell,) = sweep.expand_sweep("s", {"experiment": "single_layer", "N": 10, "P": 20,
                                       "batch_size": 5, **TINY,
                                       "sample_steps": sample_steps}).cells  # fmt: skip
    params = cell.params
    log: list[str] = []
    ds = EXP.run_cell({**params, "data": cell_data(params)}, log.append)
    return ds, log


def test_short_cell_is_flagged_in_dataset_and_log_long_one_is_not() -> None:
    short, short_log = _cell(1_000)
    long, long_log = _cell(100_000)
    assert int(short["undersampled"]) == 1 and int(long["undersampled"]) == 0
    for ds in (short, long):
        sampled = int(ds["sample_steps"]) / max(float(ds["tau_int_slowest"]),
                                                float(ds["tau_int_loss"]))  # fmt: skip
        assert float(ds["sampled_tau_int"]) == pytest.approx(sampled)
        assert bool(ds["undersampled"]) == (sampled < 50)
        R = int(ds["replicas"])
        assert float(ds["ess_slowest"]) == pytest.approx(
            R * int(ds["sample_steps"]) / float(ds["tau_int_slowest"])
        )
        for name in ("tau_int_slowest", "ess_loss", "undersampled"):
            assert ds[name].attrs["units"] == "1" and ds[name].attrs["long_name"]
    assert any(line.startswith("WARNING: undersampled") for line in short_log)
    assert not any("WARNING" in line for line in long_log)
    assert any(line.startswith("tau_int slowest") for line in long_log)


def test_agreement_table_names_the_undersampled_cells() -> None:
    """The slowest mode of P/N = 8 relaxes ~8x faster than that of P/N = 1.5 (tau_steps 194 vs
    1636 steps, tau_int ~ 2 tau_steps): 40000 steps are ~100 tau_int of the one, ~12 of the
    other, so only the latter is flagged."""
    ds = run_sweep("s", {"N": 10, "p_over_n": [1.5, 8.0], "batch_size": 5,
                         **TINY, "sample_steps": 40_000})  # fmt: skip
    assert ds["undersampled"].values.tolist() == [1, 0], ds["sampled_tau_int"].values
    rows = EXP.agreement(agreement.with_flags(ds), "s")
    assert rows and all(r.undersampled_cells == "1 of 2: P=15, p_over_n=1.5" for r in rows)
    assert all("undersampled" not in r.worst_point for r in rows)
    assert EXP.agreement(ds, "s")[0].undersampled_cells == "n/a"  # without with_flags
    assert "undersampled_cells" in agreement.table_csv(rows).splitlines()[0]
    # cells are counted once whatever the operands carry (here a scalar `mode` coordinate)
    flagged = agreement.with_flags(ds)
    sim = flagged["var_w_sgd"].where(flagged["eig_M_sgd"].isel(mode=0).notnull())
    row = agreement.agreement("f", "c", "e", sim, flagged["var_w_theory"], flagged["var_w_sgd_se"])
    assert row.undersampled_cells == "1 of 2: P=15, p_over_n=1.5"
    # and two single cells (per-cell rows of the two-layer experiment) by their cell_id
    one, two = (flagged.isel(cell=k) for k in (0, 1))
    row = agreement.agreement("f", "c", "e", one["var_w_sgd"], two["var_w_sgd"])
    assert row.undersampled_cells == "1 of 2"


# ------------------------------------------------------------------ (4) the hook changes nothing


def _fields(result) -> dict:
    skip = {"elapsed_s", "obs_series", "obs_names", "obs_spacing", "obs_elapsed_s"}
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
            if f.name not in skip}  # fmt: skip


def _assert_identical(a, b) -> None:
    for name, value in _fields(a).items():
        other = getattr(b, name)
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype and np.array_equal(value, other, equal_nan=True), name
        else:
            assert value == other, name


@pytest.mark.parametrize("dynamics", ["sgd", "sgf_additive", "sgf_multiplicative"])
def test_hook_leaves_every_result_bit_identical(dynamics: str) -> None:
    """Same stream, with and without the hook (and with a series block-averaged 4 records at a
    time): every other field identical; the hook's series are exact functions of the same
    records, so their means equal the moments' projections and the loss of Eq. 9 to rounding."""
    data = cell_data({"N": 8, "P": 24, "sigma_eps2": 0.25, "data_seed": 0, "n_test": 50})
    hook = slowest_mode_and_loss(data, dtype="float64")
    w_star = theory.min_norm_solution(data.X, data.y)
    W0 = np.tile(w_star, (3, 1))

    def run(obs):
        update, rng = Update(0.1, 4, "with"), np.random.default_rng(7)
        if dynamics == "sgd":
            schedule = Schedule(200, 2560, 5, 2, chunk_steps=640)
            return run_sgd(data.X, data.y, w_star, W0, update, schedule, rng, observables=obs)
        args = (data.X, data.y, w_star, W0, update, Schedule(200, 2560, 5, 2), rng)
        return run_sgf(*args, noise=dynamics.removeprefix("sgf_"), observables=obs)

    plain, hooked = run(None), run(hook)
    _assert_identical(plain, hooked)
    assert plain.obs_series is None and hooked.obs_series.shape == (512, 3, 2)
    n = hooked.n_records.reshape(3, 2).sum(axis=1)
    s1 = hooked.sum_dw.reshape(3, 2, -1).sum(axis=1)
    s2 = hooked.sum_dwdw.reshape(3, 2, 8, 8).sum(axis=1)
    mean = hooked.obs_series.mean(axis=0)  # (R, 2)
    np.testing.assert_allclose(mean[:, 0], s1 @ hook.V[:, 0] / n, rtol=1e-9, atol=1e-15)
    loss = hook.offset + 0.5 * np.einsum("ij,rji->r", hook.H, s2) / n
    np.testing.assert_allclose(mean[:, 1], loss, rtol=1e-12)
    # the cells' single-precision hook: the same series to float32 rounding of the fluctuation
    single = run(slowest_mode_and_loss(data))
    _assert_identical(plain, single)
    scale = np.abs(hooked.obs_series - [0.0, hook.offset]).max(axis=(0, 1))
    assert np.all(np.abs(single.obs_series - hooked.obs_series).max(axis=(0, 1)) < 1e-5 * scale)


def test_recorder_block_averages_beyond_its_memory_bound() -> None:
    """Beyond max_bytes the recorder averages ``stride`` consecutive records per point (in time
    order across chunks of any size) and drops the incomplete tail."""

    @dataclasses.dataclass(frozen=True)
    class Identity:
        names: tuple[str, ...] = ("a", "b")

        def __call__(self, x: np.ndarray) -> np.ndarray:
            return x

    x = np.random.default_rng(0).standard_normal((1003, 3, 2))
    rec = observables.SeriesRecorder(Identity(), 1003, 3, max_bytes=8 * 3 * 2 * 250)
    assert rec.stride == 5 and rec.series.shape == (200, 3, 2)
    for lo, hi in ((0, 7), (7, 8), (8, 500), (500, 1003)):
        rec.add(x[lo:hi])
    np.testing.assert_allclose(rec.complete, x[:1000].reshape(200, 5, 3, 2).mean(axis=1))
    full = observables.SeriesRecorder(Identity(), 1003, 3)
    full.add(x)
    assert full.stride == 1 and np.array_equal(full.complete, x)


def test_two_layer_hook_is_exact_and_changes_nothing() -> None:
    rng = np.random.default_rng(1)
    d = two_layer_data(5, 40, rng, N_o=2, sigma_y2=0.5)
    W1, W2 = tl_sim.gaussian_init(5, 4, 2, rng)
    gf = tl_sim.gradient_flow(d.X, d.Y, W1, W2, 300.0)
    w_star = tl_sim.least_squares_solution(d.X, d.Y)
    q = rng.standard_normal(5 * 4 + 2 * 4)
    theta_ref = np.concatenate([gf.W1.ravel(), gf.W2.ravel()])
    L_star = tl_sim.loss(d.X, d.Y, np.eye(5), w_star)
    hook = SlowestModeAndLoss(q, theta_ref, w_star, d.X.T @ d.X / 40, L_star)
    rec1 = gf.W1 + 0.1 * rng.standard_normal((6, 3, 4, 5))
    rec2 = gf.W2 + 0.1 * rng.standard_normal((6, 3, 2, 4))
    values = hook(rec1, rec2)
    direct = [[tl_sim.loss(d.X, d.Y, rec1[n, r], rec2[n, r]) for r in range(3)] for n in range(6)]
    np.testing.assert_allclose(values[..., 1], direct, rtol=1e-12)  # Eq. 36 is quadratic in W2 W1
    theta = np.concatenate([rec1.reshape(6, 3, -1), rec2.reshape(6, 3, -1)], axis=2)
    np.testing.assert_allclose(values[..., 0], (theta - theta_ref) @ q, rtol=1e-12)
    for kind in ("sgd", "sgf"):
        run = tl_sim.run_sgd_two_layer if kind == "sgd" else tl_sim.run_sgf_two_layer
        args = (d.X, d.Y, (gf.W1, gf.W2), (gf.W1, gf.W2), Update(0.2, 4), Schedule(100, 640, 5, 2))
        plain = run(*args, np.random.default_rng(5), replicas=2)
        hooked = run(*args, np.random.default_rng(5), replicas=2, observables=hook)
        _assert_identical(plain, hooked)
        assert hooked.obs_series.shape == (128, 2, 2) and hooked.obs_spacing == 5
