"""E2: the finite-volume solver of Eq. (10) vs characteristics and particles (paper 002)."""

from __future__ import annotations

import numpy as np
import pytest

from weightdyn import sweep
from weightdyn.experiments import ConfigError
from weightdyn.mean_field import pde_comparison as pc
from weightdyn.mean_field import transport
from weightdyn.mean_field.model import ShiftedTanhUnit, gauss_legendre, make_target
from weightdyn.plots.common import save

BLOCK = {
    "experiment": "mf_pde",
    "part": ["grid", "particles"],
    "scheme": ["upwind", "muscl"],
    "grid": [16, 32],
    "reference_points": 31,
    "outputs": 5,
    "snapshots": 3,
    "T": 1.0,
    "reference_dt": 0.05,
    "particles_dt": 0.1,
    "N": [50, 200],
    "particles_seeds": 3,
    "bins": 8,
    "probes": 7,
}


def _run(block: dict) -> tuple[sweep.Sweep, list]:
    """The sweep of ``block`` and its cell datasets."""
    s = sweep.expand_sweep("pde", block)
    return s, [pc.run_cell(c.params, lambda _: None) for c in s.cells]


def _problem(n: int, beta: float = 2.0) -> tuple[transport.TransportProblem, np.ndarray]:
    unit, measure = ShiftedTanhUnit(beta), gauss_legendre(16)
    f = make_target({"kind": "tanh_bumps"})(measure.x)
    grid = transport.Grid((-3.5, -3.5), (3.5, 3.5), n)
    p0 = transport.gaussian_cell_averages(grid, [0.0, 0.0], [0.5, 0.5])
    return transport.TransportProblem(unit, grid, measure, f), p0


def test_face_velocities_equal_u_derivatives() -> None:
    problem, p0 = _problem(12)
    rng = np.random.default_rng(1)
    p = p0 * (1 + rng.random(p0.shape))  # any density: a non-zero residual
    rho = problem.measure.weights * problem.residual(p)
    g = problem.grid
    for axis, faces in enumerate(
        [g.points(g.edges(0)[1:-1], g.centers(1)), g.points(g.centers(0), g.edges(1)[1:-1])]
    ):
        grad, _ = problem.unit.u_derivatives(faces, problem.measure.x, rho)
        np.testing.assert_allclose(
            problem.face_velocities(p)[axis], -grad[..., axis], rtol=1e-13, atol=1e-15
        )


def test_cell_averages_and_bins_keep_unit_mass() -> None:
    problem, p0 = _problem(32)
    assert transport.cell_masses(problem.grid, p0).sum() == pytest.approx(1.0, abs=1e-14)
    assert transport.binned_masses(problem.grid, p0, 8).sum() == pytest.approx(1.0, abs=1e-14)
    with pytest.raises(ValueError, match="bins"):
        transport.binned_masses(problem.grid, p0, 5)


def test_muscl_reconstruction_is_exact_for_linear_data_and_bounded() -> None:
    p = np.add.outer(np.arange(6.0), np.zeros(4)) + 1.0
    left, right = transport.face_states(p, 0, "mc")
    np.testing.assert_allclose(left[1:-1], p[1:-2] + 0.5)  # interior: linear data reproduced
    np.testing.assert_allclose(right[1:-1], p[2:-1] - 0.5)
    rng = np.random.default_rng(2)
    q = rng.random((20, 20))
    for limiter in transport.LIMITERS:
        for axis in (0, 1):
            for face in transport.face_states(q, axis, limiter):
                assert face.min() >= 0.0  # bounded by neighbours (TVD limiters)


@pytest.mark.parametrize("scheme", transport.SCHEMES)
def test_mass_conserved_and_density_nonnegative_at_every_output(scheme: str) -> None:
    problem, p0 = _problem(48, beta=4.0)
    sol = transport.solve(problem, p0, np.linspace(0.0, 1.0, 11), scheme)
    assert np.abs(sol.mass - 1.0).max() <= 1e-12
    assert sol.min_density.min() >= 0.0
    assert all(p.min() >= 0.0 for p in sol.densities)
    assert np.all(np.diff(sol.loss) <= 1e-12)  # Eq. (13): the loss does not increase


def test_solver_rejects_bad_options() -> None:
    problem, p0 = _problem(8)
    with pytest.raises(ValueError, match="scheme"):
        transport.solve(problem, p0, [0.1], "lax")
    with pytest.raises(ValueError, match="cfl"):
        transport.solve(problem, p0, [0.1], "muscl", cfl=0.4)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("scheme", ["weno"]),
        ("bins", 5),
        ("particles_dt", 0.3),
        ("box", 1.0),
        ("snapshots", 4),
        ("limiter", "superbee"),
        ("colour", 1),
        ("unit", {"kind": "tanh"}),
    ],
)
def test_cells_validate_and_name_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"^sweeps\.pde[.:].*{key}"):
        sweep.expand_sweep("pde", {**BLOCK, key: value})


def test_cells_keep_only_the_axes_of_their_part() -> None:
    cells = sweep.expand_sweep("pde", BLOCK).cells
    assert len({c.id for c in cells}) == len(cells) == 2 * 2 + 2 + 1
    axes = {(c.params["part"], c.params["scheme"], c.params["grid"], c.params["N"]) for c in cells}
    assert axes == {("grid", sc, n, None) for sc in ("upwind", "muscl") for n in (16, 32)} | {
        ("particles", None, None, 50),
        ("particles", None, None, 200),
        ("reference", None, None, None),
    }


def test_summary_needs_two_grid_sizes() -> None:
    s, results = _run({**BLOCK, "grid": [16], "N": [50, 200], "particles_seeds": 2})
    with pytest.raises(ConfigError, match="grid"):
        pc.summarize(results, [c.params for c in s.cells], s.settings)


def test_small_experiment_end_to_end(tmp_path) -> None:
    s, results = _run(BLOCK)
    params = [c.params for c in s.cells]
    summary = pc.summarize(results, params, s.settings)
    for name, var in summary.data_vars.items():
        assert {"long_name", "units", "source"} <= set(var.attrs), name
    assert int(summary["comparison_refused"]) == 0
    assert float(summary["max_mass_drift"]) <= 1e-12
    assert float(summary["min_density_overall"]) >= 0.0
    assert np.all(summary["loss_error"].values[:, -1] < summary["loss_error"].values[:, 0])
    for name, figure in pc.FIGURES.items():
        save(figure.plot(summary), [str(tmp_path / f"{name}.png")])
    assert [r.figure for r in pc.agreement(summary, "E2")] == ["E2"] * 5
    refused = pc.summarize(results, params, {**s.settings, "max_density_growth": 1.01})
    assert int(refused["comparison_refused"]) == 1
    assert np.all(np.isnan(refused["loss_error"])) and np.isnan(float(refused["hist_slope"]))


@pytest.mark.slow
def test_observed_orders_of_the_loss_error() -> None:
    """Acceptance: order >= 1.8 (MUSCL) and >= 0.9 (upwind) between n = 128 and 256."""
    block = {"experiment": "mf_pde", "scheme": list(transport.SCHEMES), "grid": [128, 256]}
    s, results = _run(block)
    ref = results[-1]
    assert float(ref["density_growth"]) <= pc.EXPERIMENT.param("max_density_growth").default
    errors = {
        (c.params["scheme"], c.params["grid"]): np.abs(
            ds["loss"].values - ref["loss_inf"].values
        ).max()
        for c, ds in zip(s.cells[:-1], results, strict=False)
    }
    orders = {
        scheme: pc.observed_order(
            np.array([errors[scheme, 128], errors[scheme, 256]]), np.array([128, 256])
        )
        for scheme in transport.SCHEMES
    }
    assert orders["muscl"] >= 1.8, orders
    assert orders["upwind"] >= 0.9, orders


@pytest.mark.slow
def test_histogram_distance_falls_as_inverse_sqrt_n() -> None:
    """Acceptance: slope of the r.m.s. histogram distance vs N in [-0.6, -0.4] (+-2 SE inside)."""
    block = {
        "experiment": "mf_pde",
        "part": ["grid", "particles"],
        "scheme": ["muscl"],
        "grid": [32, 64],
        "reference_points": 41,
        "N": [100, 1000, 10000],
        "particles_seeds": 6,
        "bins": 16,
    }
    s, results = _run(block)
    summary = pc.summarize(results, [c.params for c in s.cells], s.settings)
    slope, se = float(summary["hist_slope"]), float(summary["hist_slope_se"])
    assert se < 0.05
    assert -0.6 <= slope <= -0.4, (slope, se)
    assert abs(slope + 0.5) <= 3 * se + 0.02, (slope, se)
