"""Experiment E1 of paper 002: width sweep against the infinite-width limit (Eqs. 1-3, 11-13)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from weightdyn import seeds, sweep
from weightdyn.experiments import ConfigError
from weightdyn.mean_field import particles, width
from weightdyn.mean_field.model import TanhUnit, gauss_legendre

UNIT = TanhUnit()
MEASURE = gauss_legendre(16)
F = np.sin(np.pi * MEASURE.x)
MEAN, STD = [0.0, 0.0, 0.0], [1.0, 2.0, 1.0]

BLOCK = {
    "experiment": "mf_width",
    "measure": {"kind": "gauss_legendre", "size": 16},
    "target": {"kind": "sin", "amplitude": 1.0},
    "init": {"mean": MEAN, "std": STD},
    "dt": 0.05,
    "output_dt": 0.1,
    "t_max": 2.0,
    "t_fixed": [0.0, 2.0],
    "t_late": 1.0,
    "grid_width": 6.0,
    "reference_points": 25,
    "check_points": 21,
    "N": [10, 32, 100, 316, 1000, 3162, 10000],
    "particles_per_cell": 10000,
    "seeds_min": 8,
    "seeds_max": 1000,
    "chunk_particles": 20000,
    "energy": {"N": 50, "seeds": 3, "t_max": 1.0, "interval_steps": 10, "points": 7},
}


def _networks(n: int, count: int, stream: str) -> particles.State:
    rng = seeds.generator(stream, {"N": n, "seeds": count})
    W = particles.sample_gaussian(rng, (count, n), MEAN, STD)
    return particles.State(W, particles.uniform_weights(W))


@pytest.mark.parametrize(
    ("key", "value", "where"),
    [("dt", -0.1, "dt"), ("N", [10, 0], "N"), ("init", {"mean": MEAN, "std": [1.0, 0.0, 1.0]},
     "init.std"), ("t_fixed", [0.05], "t_fixed"), ("check_points", 30, "check_points"),
     ("t_late", 5.0, "t_late"), ("energy", {"N": 50}, "energy")],
)  # fmt: skip
def test_sweep_rejects_bad_values_naming_the_key(key, value, where):
    with pytest.raises(ConfigError, match=rf"sweeps\.w\.{where}"):
        sweep.expand_sweep("w", {**BLOCK, key: value})


def test_cells_are_unique_and_seeds_follow_the_rule():
    cells = sweep.expand_sweep("w", BLOCK).cells
    assert len({c.id for c in cells}) == len(cells) == 7 + 3
    widths = {c.params["N"]: c.params["seeds"] for c in cells if c.params["part"] == "width"}
    assert widths == {10: 1000, 32: 313, 100: 100, 316: 32, 1000: 10, 3162: 8, 10000: 8}
    points = {c.params["part"]: c.params.get("points") for c in cells}
    assert points == {"width": None, "reference": 25, "check": 21, "energy": None}


def test_euler_step_is_gradient_descent_with_learning_rate_N_dt():
    """One Euler step of dw/dt = -grad u equals W - (N dt) grad_W L of Eq. 2 (alpha = N)."""
    state = _networks(7, 1, "test/euler")
    W, q, dt, n = state.W[0], state.q[0], 0.05, 7
    eps = 1e-6
    grad = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        up, down = W.copy(), W.copy()
        up[idx] += eps
        down[idx] -= eps
        grad[idx] = (particles.loss(UNIT, up, q, MEASURE, F)
                     - particles.loss(UNIT, down, q, MEASURE, F)) / (2 * eps)  # fmt: skip
    stepped = particles.euler_step(UNIT, particles.State(W, q), MEASURE, F, dt).W
    np.testing.assert_allclose(stepped, W - n * dt * grad, rtol=0, atol=1e-9)


@pytest.mark.parametrize("lead", [(), (1,), (5,), (2, 3)])
def test_compiled_tanh_rates_equal_the_numpy_route(lead):
    """The compiled residual and velocity of the tanh unit (one tanh table per evaluation)
    equal the numpy route (Eq. 2 residual, Eq. 9 velocity) for any batch of states, with
    unequal particle weights."""
    rng = np.random.default_rng(3)
    W = rng.normal(size=(*lead, 9, 3)) * 2.0
    q = rng.random((*lead, 9))
    q /= q.sum(-1, keepdims=True)
    r_fast, v_fast = particles.residual_and_velocity(UNIT, W, q, MEASURE, F)
    r = particles.residual(UNIT, W, q, MEASURE, F)
    v, _ = particles.velocity(UNIT, W, MEASURE.weights * r, MEASURE.x)
    assert r_fast.shape == r.shape and v_fast.shape == W.shape
    np.testing.assert_allclose(r_fast, r, rtol=0, atol=1e-14 * np.abs(r).max())
    np.testing.assert_allclose(v_fast, v, rtol=0, atol=1e-14 * np.abs(v).max())


def test_second_variation_matches_finite_differences():
    """v.Hess_W L.v (Gauss-Newton + residual curvature) against d^2/ds^2 L(W + s v)."""
    state = _networks(9, 2, "test/hessian")
    rho = MEASURE.weights * particles.residual(UNIT, state.W, state.q, MEASURE, F)
    v, _ = particles.velocity(UNIT, state.W, rho, MEASURE.x)
    h = 1e-4
    L = [particles.loss(UNIT, state.W + s * v, state.q, MEASURE, F) for s in (-h, 0.0, h)]
    fd = (L[0] - 2 * L[1] + L[2]) / h**2
    np.testing.assert_allclose(width.loss_second_variation(state, MEASURE, F), fd, rtol=1e-5)


def test_simpson_increments_integrate_a_cubic_exactly():
    t = np.linspace(0.0, 2.0, 21)
    out = width.simpson_increments(t**3, 0.1, 10)
    np.testing.assert_allclose(out, [1.0**4 / 4, (2.0**4 - 1.0) / 4], rtol=1e-13)


def test_initial_bias_matches_exact_variance_formula():
    """E L_N(0) - L_inf(0) = (1/2N) int Var_p0[phi] dmu at N = 10 with 4000 seeds (Eqs. 2, 6)."""
    n, count = 10, 4000
    state = _networks(n, count, "test/bias0")
    nodes, weights = particles.gaussian_grid_nodes(MEAN, STD, 25)
    l_inf = particles.loss(UNIT, nodes, weights, MEASURE, F)
    gap = particles.loss(UNIT, state.W, state.q, MEASURE, F) - l_inf
    bias, se = width.mean_with_se(gap)
    exact = width.phi_variance_integral(nodes, weights, MEASURE) / (2 * n)
    assert abs(bias - exact) < 4 * se
    assert bias > 3 * se  # the bias is resolved, not just consistent with zero


def test_energy_cell_eq12_euler_band_and_monotonicity():
    """Eq. 12 to 1e-6 (RK4, dt = 0.05); Euler excess = (dt^2/2) v.Hess L.v (1 + O(dt)); Eq. 13."""
    cell = next(c for c in sweep.expand_sweep("w", BLOCK).cells if c.params["part"] == "energy")
    ds = width.run_cell(cell.params, lambda _: None)
    assert float(ds["eq12_rel_error"].max()) < 1e-6
    ratio = ds["euler_excess"] / ds["euler_taylor"]
    assert float(abs(ratio - 1).max()) < BLOCK["dt"]  # the O(dt^3) remainder relative to dt^2
    assert float(ds["euler_excess"].min()) > 0  # Euler lags behind the flow: a finite-dt excess
    assert float(ds["energy_dissipation_min"]) > 0
    assert float(ds["energy_loss_rise_max"]) < 0


@pytest.fixture(scope="module")
def summary():
    s = sweep.expand_sweep("w", BLOCK)
    results = [width.run_cell(c.params, lambda _: None) for c in s.cells]
    return width.summarize(results, [c.params for c in s.cells], s.settings)


@pytest.mark.slow
def test_width_sweep_gap_scales_as_inverse_sqrt_N(summary):
    """RMS sup_{t>=1} |L_N - L_inf| ~ N^-1/2; quadrature error of L_inf far below the gaps.

    Reduced block (M = 16, t <= 2, N <= 1e4): measured slope -0.505 +- 0.018.
    """
    s, se = float(summary["slope_late"]), float(summary["slope_late_se"])
    assert abs(s + 0.5) < 3 * se
    assert -0.6 < s < -0.4
    assert float(summary["grid_difference"]) < 0.1 * float(summary["rms_late"][-1])
    assert abs(float(summary["bias0_z"])) < 4
    assert float(summary["dissipation_min"]) > 0
    assert float(summary["loss_rise_max"]) < 0
    for name in summary.data_vars:
        assert {"long_name", "units", "source"} <= set(summary[name].attrs), name


@pytest.mark.slow
def test_figures_draw_and_agreement_rows_carry_the_label(summary):
    for figure in width.FIGURES.values():
        fig = figure.plot(summary)
        assert fig.axes
        plt.close(fig)
    rows = width.agreement(summary, "Fig. E1")
    assert len(rows) == 4
    assert {r.figure for r in rows} == {"Fig. E1"} and {r.paper for r in rows} == {"002"}
