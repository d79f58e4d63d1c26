"""Experiment E5 of paper 002: linearisation at a zero-loss state (Eqs. 14-18)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from weightdyn import sweep
from weightdyn.experiments import ConfigError
from weightdyn.mean_field import linearisation as lin
from weightdyn.mean_field import particles
from weightdyn.mean_field.model import ShiftedTanhUnit, training_set

BLOCK = {
    "experiment": "mf_linearisation",
    "part": ["perturb", "grid"],
    "unit": {"kind": "shifted_tanh", "beta": 4.0},
    "measure": {"kind": "grid", "size": 6},
    "p_star": {"mean": [1.0, 0.3], "std": [0.5, 0.6]},
    "init": {"mean": [0.0, -0.2], "std": [0.5, 0.7]},
    "particles": 200,
    "dt": 0.1,
    "output_dt": 1.0,
    "t_end": 600.0,
    "fit_loss": [1.0e-14, 1.0e-22],
    "delta": [1.0e-5, 1.0e-4, 1.0e-3],
    "directions": 3,
    "perturb_decades": 5,
    "grid_size": [32, 64, 128],
    "grid_width": 5.0,
    "reference_points": 201,
    "dense_max": 32,
}
UNIT = ShiftedTanhUnit(beta=4.0)
MEASURE = training_set(np.linspace(-1.0, 1.0, 5))
MEAN, STD = np.array([1.0, 0.3]), np.array([0.5, 0.6])


def test_residual_moves_with_the_tangent_kernel():
    """d s/dt = -Theta s for s = mu^1/2 r along the particle flow (Eqs. 9-10, 15)."""
    rng = np.random.default_rng(0)
    W = rng.normal(size=(40, 2))
    q = rng.dirichlet(np.ones(40))
    f = rng.normal(size=MEASURE.size)
    r = particles.residual(UNIT, W, q, MEASURE, f)
    v, _ = particles.velocity(UNIT, W, MEASURE.weights * r, MEASURE.x)
    rate = lin.linear_residual(UNIT, W, q, v, MEASURE.x)  # dr/dt
    mu = np.sqrt(MEASURE.weights)
    expected = -lin.tangent_kernel(UNIT, W, q, MEASURE) @ (mu * r)
    np.testing.assert_allclose(mu * rate, expected, rtol=1e-12, atol=1e-14)


def test_nonzero_spectrum_of_R_is_the_tangent_kernel():
    """The finite-volume R_h (Eq. 16) has rank M, non-zero spectrum -eig(Theta_h), and is
    self-adjoint and negative semi-definite in the K scalar product."""
    ops = lin.grid_operators(UNIT, MEAN, STD, 14, 5.0, MEASURE)
    lam = np.linalg.eigvals(ops.R)
    order = np.argsort(np.abs(lam))
    theta_h = np.linalg.eigvalsh(lin.grid_tangent_kernel(UNIT, MEAN, STD, 14, 5.0, MEASURE))
    np.testing.assert_allclose(np.sort(-lam[order[-MEASURE.size :]].real), theta_h, rtol=1e-10)
    assert np.max(np.abs(lam[order[: -MEASURE.size]])) < 1e-12 * theta_h.max()
    form = (ops.volume[:, None] * ops.K).T @ (ops.volume[:, None] * ops.R)  # <K a, R b>
    np.testing.assert_allclose(form, form.T, atol=1e-12 * np.abs(form).max())
    assert np.linalg.eigvalsh(0.5 * (form + form.T)).max() < 1e-12 * np.abs(form).max()


def test_eq18_density_form_equals_residual_form():
    """Eq. 18 with eigenvectors p_k of R_h equals 1/2 |exp(-t Theta_h) s0|^2."""
    ops = lin.grid_operators(UNIT, MEAN, STD, 12, 5.0, MEASURE)
    dp0 = np.random.default_rng(1).normal(size=ops.volume.size)
    lam, vecs = np.linalg.eig(ops.R)
    keep = np.argsort(np.abs(lam))[-MEASURE.size :]
    lam, vecs = lam[keep].real, vecs[:, keep].real

    def inner(a, b):
        return np.sum(ops.volume[:, None] * a * b, axis=0)

    coeff = inner((ops.K @ dp0)[:, None], vecs) ** 2 / inner(ops.K @ vecs, vecs)
    t = np.linspace(0.0, 20.0, 7)
    density_form = 0.5 * np.exp(2.0 * np.outer(t, lam)) @ coeff
    theta, v = np.linalg.eigh(lin.grid_tangent_kernel(UNIT, MEAN, STD, 12, 5.0, MEASURE))
    s0 = np.sqrt(MEASURE.weights) * (ops.phi @ (ops.volume * dp0))
    np.testing.assert_allclose(lin.eq18_loss(theta, v, s0, t), density_form, rtol=1e-9)
    loss0 = 0.5 * inner((ops.K @ dp0)[:, None], dp0[:, None])[0]  # Eq. 14
    np.testing.assert_allclose(density_form[0], loss0, rtol=1e-9)


def test_cells_are_named_and_validated():
    names = [c.id.split("__")[0] for c in sweep.expand_sweep("lin", BLOCK).cells]
    assert names == [
        "part=perturb_delta=0.00001",
        "part=perturb_delta=0.0001",
        "part=perturb_delta=0.001",
        "part=grid_grid_size=32",
        "part=grid_grid_size=64",
        "part=grid_grid_size=128",
        "part=decay",
    ]
    for key, value, where in (
        ("delta", [0.1, 2.0], "delta"),
        ("dt", 0, "dt"),
        ("unit", {"kind": "tanh"}, "unit.kind"),
        ("output_dt", 0.15, "output_dt"),
        ("fit_loss", [1e-22, 1e-14], "fit_loss"),
        ("p_star", {"mean": [1.0, 0.3]}, "p_star"),
    ):
        with pytest.raises(ConfigError, match=where):
            sweep.expand_sweep("lin", {**BLOCK, key: value})
    settings = sweep.expand_sweep("lin", BLOCK).settings
    with pytest.raises(ConfigError, match="part 'decay'"):
        lin.summarize([], [], settings)  # the summary names the part it misses


@pytest.mark.slow
def test_acceptance_numbers_and_figures(tmp_path):
    """Late rate = 2 theta_min (not 2 kappa_min), Eq. 18 error ~ delta, grid order ~ 2."""
    s = sweep.expand_sweep("lin", BLOCK)
    results = [lin.run_cell(c.params, lambda _: None) for c in s.cells]
    summary = lin.summarize(results, [c.params for c in s.cells], s.settings)
    rel, rel_se = float(summary["rate_rel_error"]), float(summary["rate_rel_error_se"])
    assert rel <= 1e-4 and rel_se <= 1e-5
    assert float(summary["rate_nearest_kappa_rel"]) > 0.1  # the paper's K spectrum is wrong
    slope, slope_se = float(summary["eq18_slope"]), float(summary["eq18_slope_se"])
    assert abs(slope - 1.0) <= max(3 * slope_se, 0.05)
    assert float(summary["grid_order_min"]) >= 1.7
    assert float(summary["identity_error"]) < 1e-10
    for var in summary.data_vars.values():
        assert {"long_name", "units", "source"} <= set(var.attrs)
    summary.to_netcdf(tmp_path / "e5.nc")
    for name, figure in lin.FIGURES.items():
        fig = figure.plot(summary)
        fig.savefig(tmp_path / f"{name}.png")
        plt.close(fig)
    assert [r.figure for r in lin.agreement(summary, "E5")] == ["E5"] * 3
