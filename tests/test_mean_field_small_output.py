"""Experiment E3: the small-output-weight regime (paper 002, Eqs. 19-26)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from scipy.linalg import expm

from weightdyn import sweep
from weightdyn.experiments import ConfigError
from weightdyn.mean_field import small_output as so
from weightdyn.mean_field.model import gauss_legendre, make_unit

LAPTOP = {
    "experiment": "mf_small_output",
    "part": ["eps", "w0"],
    "unit": {"kind": "tanh"},
    "target": {"kind": "sin", "amplitude": 1.0},
    "measure": {"kind": "grid", "size": 16},
    "particles": 4,
    "seeds": 20,
    "wtilde": {"mean": [0.0, 0.0], "std": [2.0, 1.0]},
    "w0_ratio": 1.0,
    "eps": [0.003, 0.01, 0.03, 0.1, 0.3],
    "eps_fit_max": 0.1,
    "w0_scale": [0.3, 0.1, 0.03, 0.01, 0.001],
    "t_end": 40.0,
    "dt": 0.05,
    "n_times": 101,
}


def _problem(particles: int, m: int = 12):
    """Random features of ``particles`` tanh units on ``m`` Gauss-Legendre nodes, a residual z."""
    rng = np.random.default_rng(7)
    unit = make_unit({"kind": "tanh"})
    measure = gauss_legendre(m)
    W = rng.normal(size=(particles, 3)) * [0.1, 2.0, 1.0]
    q = rng.dirichlet(np.ones(particles))
    z = rng.normal(size=m)
    return so.feature_matrix(unit, W, measure.x), q, measure, z


@pytest.mark.parametrize("particles", [5, 30])
def test_shift_matches_weight_space_solution_of_eq23(particles):
    """Residual-space s(t) equals the N x N linear ODE ds/dt = u~_0 - Phi~* Phi~ p^ s (Eq. 23)."""
    phi, q, measure, z = _problem(particles)
    spec = so.residual_spectrum(phi, q, measure, z)
    t = np.array([0.0, 0.7, 5.0, 40.0])
    got = so.predicted_shift(spec, t)
    K = phi.T @ (measure.weights[:, None] * phi) * q  # Phi~* Phi~ p^
    u0 = phi.T @ (measure.weights * z)  # u~_0 = Phi~* z
    n = particles
    aug = np.zeros((n + 1, n + 1))
    aug[:n, :n], aug[:n, n] = -K, u0  # d/dt (s, 1) = aug (s, 1)
    want = np.array([expm(tau * aug)[:n, n] for tau in t])
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10 * np.abs(want).max())


@pytest.mark.parametrize("particles", [5, 30])
def test_loss_is_half_residual_norm_and_floor_is_out_of_range_part(particles):
    """L = 1/2 ||z - Phi~ p^ s||_mu^2 (after Eq. 24); its floor is z outside range(Phi~ p^)."""
    phi, q, measure, z = _problem(particles)
    spec = so.residual_spectrum(phi, q, measure, z)
    t = np.array([0.0, 1.0, 10.0, 1e4])
    r = so.predicted_residual(spec, t)
    np.testing.assert_allclose(r, z - so.predicted_shift(spec, t) * q @ phi.T, atol=1e-10)
    loss = so.predicted_loss(spec, t)
    np.testing.assert_allclose(loss, 0.5 * (measure.weights * r * r).sum(-1), rtol=1e-12)
    sw = np.sqrt(measure.weights)
    coef, *_ = np.linalg.lstsq(sw[:, None] * phi, sw * z, rcond=None)
    outside = sw * (z - phi @ coef)
    floor = so.loss_floor(spec)
    np.testing.assert_allclose(floor, 0.5 * outside @ outside, rtol=1e-8, atol=1e-14)
    np.testing.assert_allclose(so.predicted_loss_eq26(spec, t) + floor, loss, rtol=1e-12)
    assert (floor > 0.05 * loss[0]) == (particles < measure.size)


@pytest.mark.parametrize("particles", [5, 30])
def test_loss_matches_the_operator_formula_after_eq24(particles):
    """Both terms of the loss formula after Eq. 24, with K~ = Phi~* Phi~ p^ and p^ = diag(q)."""
    phi, q, measure, z = _problem(particles)
    spec = so.residual_spectrum(phi, q, measure, z)
    sq = np.sqrt(q)
    S = sq[:, None] * (phi.T @ (measure.weights[:, None] * phi)) * sq  # p^1/2 Phi~* Phi~ p^1/2
    lam, V = np.linalg.eigh(S)
    pos = lam > 1e-13 * lam.max()
    v = V.T @ (sq * (phi.T @ (measure.weights * z)))  # p^1/2 u~_0 with u~_0 = Phi~* z
    projector = phi @ (sq[:, None] * np.linalg.pinv(S, rcond=1e-13, hermitian=True)
                       * sq) @ phi.T * measure.weights  # fmt: skip
    outside = z - projector @ z
    first = 0.5 * (measure.weights * outside**2).sum()
    t = np.array([0.0, 2.0, 30.0])
    second = 0.5 * (np.exp(-2 * np.outer(t, lam[pos])) * v[pos] ** 2 / lam[pos]).sum(-1)
    np.testing.assert_allclose(so.loss_floor(spec), first, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(so.predicted_loss_eq26(spec, t), second, rtol=1e-6)


def test_cells_and_validation():
    cells = sweep.expand_sweep("so", LAPTOP).cells
    assert len({c.id for c in cells}) == len(cells) == 10
    eps = [(c.params["eps"], c.params["w0_scale"]) for c in cells if c.params["part"] == "eps"]
    assert eps == [(e, e) for e in LAPTOP["eps"]]  # w0(0) scale = w0_ratio eps
    w0 = [(c.params["eps"], c.params["w0_scale"]) for c in cells if c.params["part"] == "w0"]
    assert w0 == [(1.0, s) for s in LAPTOP["w0_scale"]]  # the fixed target amplitude
    for key, bad, where in [
        ("eps", [0.1, -0.1], "eps"),
        ("unit", {"kind": "relu"}, "unit.kind"),
        ("unit", {"kind": "shifted_tanh"}, "unit"),
        ("wtilde", {"mean": [0.0, 0.0], "std": [1.0]}, "wtilde.std"),
        ("t_end", 41.0, "t_end"),
        ("seeds", 1, "seeds"),
        ("typo", 1, "unknown keys"),
    ]:
        with pytest.raises(ConfigError, match=where):
            sweep.expand_sweep("so", {**LAPTOP, key: bad})
    settings = sweep.expand_sweep("so", {**LAPTOP, "eps_fit_max": 0.001}).settings
    with pytest.raises(ConfigError, match="eps_fit_max"):
        so.summarize([], [], settings)  # fewer than 2 eps values to fit


def test_initial_particles_share_draws_across_cells():
    """Common random numbers: w0(0) scales with the cell's w0 scale, w~(0) does not change."""
    a, b = so.initial_particles(LAPTOP, 0.01), so.initial_particles(LAPTOP, 0.03)
    np.testing.assert_allclose(b[..., 0], 3.0 * a[..., 0], rtol=1e-14)
    np.testing.assert_array_equal(a[..., 1:], b[..., 1:])
    other = so.initial_particles({**LAPTOP, "particles": 5}, 0.01)
    assert not np.allclose(other[:, :4, 1:], a[..., 1:])


@pytest.fixture(scope="module")
def summary():
    s = sweep.expand_sweep("so", LAPTOP)
    results = [so.run_cell(c.params, lambda _: None) for c in s.cells]
    return so.summarize(results, [c.params for c in s.cells], s.settings)


def test_loss_error_scales_as_eps_squared(summary):
    """Acceptance: for eps <= 0.1 the loss error of Eq. 24 scales as eps^2 (slope in [1.8, 2.2])."""
    slope, se = float(summary["slope_loss_error"]), float(summary["slope_loss_error_se"])
    assert 1.8 <= slope <= 2.2
    assert abs(slope - 2.0) < 0.05 and se < 0.02
    for key in ("slope_wtilde_displacement", "slope_shift_error"):
        assert abs(float(summary[key]) - 2.0) < 0.05
    assert float(summary["eps_loss_error"][0]) < 1e-4


def test_floor_matters_when_z_leaves_the_range(summary):
    """With N = 4 < M = 16 Eq. 26 (no floor) misses the loss by the floor at every eps."""
    floor = summary["eps_floor_fraction"].values
    eq26 = summary["eps_loss_error_eq26"].values
    assert np.all(floor > 0.05)
    np.testing.assert_allclose(eq26[0], floor[0], rtol=1e-3)
    assert np.all(eq26 > 10 * summary["eps_loss_error"].values[:-1].max())


def test_error_does_not_vanish_as_w0_goes_to_zero(summary):
    """At a fixed O(1) target the error stays O(0.1) as w0(0) -> 0: the output weights grow."""
    err, se = summary["w0_loss_error"].values, summary["w0_loss_error_se"].values
    smallest = int(np.argmin(summary["w0_scale"].values))
    assert err[smallest] > 5 * se[smallest]
    assert err[smallest] > 0.5 * err.max()
    assert np.all(summary["w0_growth"].values > 0.5)


def test_every_variable_has_attrs(summary):
    for name, var in summary.data_vars.items():
        assert {"long_name", "units", "source"} <= set(var.attrs), name


@pytest.mark.parametrize("name", sorted(so.FIGURES))
def test_figures_draw(summary, name):
    fig = so.FIGURES[name].plot(summary)
    assert len(fig.axes) >= 1
    plt.close(fig)


def test_agreement_rows_are_labelled_by_the_sweep(summary):
    rows = so.agreement(summary, "E3 label")
    assert [r.figure for r in rows] == ["E3 label"] * 3
    assert abs(rows[1].max_abs_z) < 5  # the eps^2 exponent of the loss error
