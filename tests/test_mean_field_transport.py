"""E2: the finite-volume solver of Eq. (10) vs characteristics and particles (paper 002)."""

from __future__ import annotations

import numpy as np
import pytest

from weightdyn.mean_field import pde_comparison as pc
from weightdyn.mean_field import transport
from weightdyn.mean_field.model import ShiftedTanhUnit, gauss_legendre, make_target
from weightdyn.plots.common import save

BLOCK = {
    "grids": [16, 32],
    "reference_points": 31,
    "outputs": 5,
    "snapshots": 3,
    "T": 1.0,
    "reference_dt": 0.05,
    "particles_dt": 0.1,
    "particles_N": [50, 200],
    "particles_seeds": 3,
    "bins": 8,
    "probes": 7,
}


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
        ("grids", [16]),
        ("schemes", ["weno"]),
        ("bins", 5),
        ("particles_dt", 0.3),
        ("box", 1.0),
        ("snapshots", 4),
        ("limiter", "superbee"),
        ("colour", 1),
    ],
)
def test_cells_validate_and_name_the_key(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=key):
        pc.cells({**BLOCK, key: value})


def test_cells_are_unique_and_flat() -> None:
    cells = pc.cells(BLOCK)
    names = [c["name"] for c in cells]
    assert len(set(names)) == len(names) == 1 + 2 * 2 + 2
    assert all(isinstance(v, str | int | float) for c in cells for v in c.values())


def test_small_experiment_end_to_end(tmp_path) -> None:
    results = [pc.run_cell(BLOCK, c, lambda _: None) for c in pc.cells(BLOCK)]
    summary = pc.summarize(BLOCK, results)
    for name, var in summary.data_vars.items():
        assert {"long_name", "units", "source"} <= set(var.attrs), name
    assert int(summary["comparison_refused"]) == 0
    assert float(summary["max_mass_drift"]) <= 1e-12
    assert float(summary["min_density_overall"]) >= 0.0
    assert np.all(summary["loss_error"].values[:, -1] < summary["loss_error"].values[:, 0])
    for name in pc.FIGURES:
        save(pc.plot(summary, name), [str(tmp_path / f"{name}.png")])
    refused = pc.summarize({**BLOCK, "max_density_growth": 1.01}, results)
    assert int(refused["comparison_refused"]) == 1
    assert np.all(np.isnan(refused["loss_error"])) and np.isnan(float(refused["hist_slope"]))


@pytest.mark.slow
def test_observed_orders_of_the_loss_error() -> None:
    """Acceptance: order >= 1.8 (MUSCL) and >= 0.9 (upwind) between n = 128 and 256."""
    block = {"grids": [128, 256], "reference_points": 61}
    ref = pc.run_cell(block, {"kind": "reference"}, lambda _: None)
    assert float(ref["density_growth"]) <= pc.DEFAULTS["max_density_growth"]
    orders = {}
    for scheme in transport.SCHEMES:
        errors = [
            np.abs(
                pc.run_cell(block, {"kind": "grid", "scheme": scheme, "n": n}, lambda _: None)[
                    "loss"
                ].values
                - ref["loss_inf"].values
            ).max()
            for n in (128, 256)
        ]
        orders[scheme] = pc.observed_order(np.array(errors), np.array([128, 256]))
    assert orders["muscl"] >= 1.8, orders
    assert orders["upwind"] >= 0.9, orders


@pytest.mark.slow
def test_histogram_distance_falls_as_inverse_sqrt_n() -> None:
    """Acceptance: slope of the r.m.s. histogram distance vs N in [-0.6, -0.4] (+-2 SE inside)."""
    block = {
        "grids": [32, 64],
        "reference_points": 41,
        "particles_N": [100, 1000, 10000],
        "particles_seeds": 6,
        "bins": 16,
    }
    results = [pc.run_cell(block, c, lambda _: None) for c in pc.cells(block)]
    summary = pc.summarize(block, results)
    slope, se = float(summary["hist_slope"]), float(summary["hist_slope_se"])
    assert se < 0.05
    assert -0.6 <= slope <= -0.4, (slope, se)
    assert abs(slope + 0.5) <= 3 * se + 0.02, (slope, se)
