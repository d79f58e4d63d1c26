"""Experiment E2: the transport equation (10) solved on a grid vs characteristics and particles.

For the ``ShiftedTanhUnit`` (``w = (w0, h)``) the density ``p(w, t)`` of Eqs. (9)-(10) is solved
by :mod:`weightdyn.mean_field.transport` (first-order upwind and MUSCL finite volumes) and compared
with

- the infinite-width limit by characteristics: weighted quadrature nodes of ``p0`` moved by the
  particle flow give ``L_inf(t)`` (Eqs. 6, 11); probes carry ``log p`` along characteristics
  (``d log p/dt = Laplacian u``, after Eq. 10) and give the exact density at their positions;
- N i.i.d. particles (q = 1/N, Eq. 3 with alpha = N): the distance between their histogram and the
  grid density on coarse bins falls as ``N^-1/2``.

Cells: ``reference`` (characteristics), one per (scheme, n) and one per particle number N. When the
exact density grows by more than ``max_density_growth`` along a characteristic the grid cannot
resolve it; the comparison numbers are then NaN and ``comparison_refused`` is 1.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import seeds, stats
from weightdyn.io import attrs
from weightdyn.mean_field import model, transport
from weightdyn.mean_field import particles as pt
from weightdyn.plots.mean_field_pde import FIGURES, plot

__all__ = ["FIGURES", "cells", "plot", "run_cell", "summarize"]

DEFAULTS: dict[str, Any] = {
    "beta": 2.0,
    "measure": {"kind": "gauss_legendre", "size": 16},
    "target": {"kind": "tanh_bumps", "amplitude": 1.0},
    "init_mean": [0.0, 0.0],
    "init_std": [0.5, 0.5],
    "box": 3.5,
    "T": 2.0,
    "outputs": 21,
    "snapshots": 3,
    "schemes": ["upwind", "muscl"],
    "limiter": "mc",
    "grids": [32, 64, 128, 256],
    "cfl": None,
    "reference_points": 61,
    "reference_dt": 0.01,
    "probes": 21,
    "max_density_growth": 10.0,
    "particles_N": [100, 1000, 10000, 100000],
    "particles_seeds": 8,
    "particles_dt": 0.04,
    "bins": 32,
}
KEYS = frozenset(DEFAULTS)
PROBE_WIDTH = 3.0  # probes start on a square grid over mean +- 3 std
REFERENCE_WIDTH = 7.0  # quadrature nodes of p0 over mean +- 7 std


def settings(block: Mapping[str, Any]) -> dict[str, Any]:
    """The block with defaults filled in, validated (errors name the key and allowed values)."""
    unknown = set(block) - KEYS
    if unknown:
        raise ValueError(f"mean_field.pde: unknown keys {sorted(unknown)}; allowed {sorted(KEYS)}")
    s = {**DEFAULTS, **block}

    def need(ok: bool, key: str, allowed: str) -> None:
        if not ok:
            raise ValueError(f"mean_field.pde.{key}: {s[key]!r} is invalid; expected {allowed}")

    positive = ("beta", "box", "T", "reference_dt", "particles_dt", "max_density_growth")
    for key in positive:
        need(isinstance(s[key], int | float) and s[key] > 0, key, "a positive number")
    need(len(s["init_mean"]) == 2, "init_mean", "two numbers (w0, h)")
    need(len(s["init_std"]) == 2 and min(s["init_std"]) > 0, "init_std", "two positive numbers")
    need(
        all(
            abs(m) + REFERENCE_WIDTH * d <= s["box"] + 1e-12
            for m, d in zip(s["init_mean"], s["init_std"], strict=True)
        ),
        "box",
        f"a half-width covering init_mean +- {REFERENCE_WIDTH} init_std",
    )
    need(isinstance(s["outputs"], int) and s["outputs"] >= 3, "outputs", "an integer >= 3")
    need(
        isinstance(s["snapshots"], int)
        and s["snapshots"] >= 2
        and (s["outputs"] - 1) % (s["snapshots"] - 1) == 0,
        "snapshots",
        "an integer >= 2 with (outputs - 1) divisible by (snapshots - 1)",
    )
    need(
        len(s["schemes"]) > 0 and set(s["schemes"]) <= set(transport.SCHEMES),
        "schemes",
        f"a non-empty subset of {list(transport.SCHEMES)}",
    )
    need(s["limiter"] in transport.LIMITERS, "limiter", f"one of {list(transport.LIMITERS)}")
    need(
        len(s["grids"]) >= 2
        and all(isinstance(n, int) and n >= 8 for n in s["grids"])
        and len(set(s["grids"])) == len(s["grids"]),
        "grids",
        "at least two distinct integers >= 8",
    )
    need(s["cfl"] is None or 0 < s["cfl"] <= 0.25, "cfl", "null or a number in (0, 0.25]")
    need(
        isinstance(s["reference_points"], int) and s["reference_points"] >= 11,
        "reference_points",
        "an integer >= 11",
    )
    need(isinstance(s["probes"], int) and s["probes"] >= 3, "probes", "an integer >= 3")
    need(
        len(s["particles_N"]) >= 2
        and all(isinstance(n, int) and n >= 1 for n in s["particles_N"])
        and len(set(s["particles_N"])) == len(s["particles_N"]),
        "particles_N",
        "at least two distinct positive integers",
    )
    need(
        isinstance(s["particles_seeds"], int) and s["particles_seeds"] >= 2,
        "particles_seeds",
        "an integer >= 2",
    )
    need(
        isinstance(s["bins"], int) and max(s["grids"]) % s["bins"] == 0,
        "bins",
        "an integer dividing max(grids)",
    )
    need("muscl" in s["schemes"], "schemes", "a list containing 'muscl' (the histogram reference)")
    for key, times in (("reference_dt", output_times(s)), ("particles_dt", [s["T"]])):
        k = np.rint(np.asarray(times) / s[key])
        need(
            np.allclose(k * s[key], times, rtol=1e-9, atol=1e-12),
            key,
            "a step dividing every output time (reference) or T (particles)",
        )
    model.make_measure(s["measure"])
    model.make_target(s["target"])
    return s


def output_times(s: Mapping[str, Any]) -> np.ndarray:
    """The output times ``linspace(0, T, outputs)``."""
    return np.linspace(0.0, float(s["T"]), int(s["outputs"]))


def snapshot_indices(s: Mapping[str, Any]) -> np.ndarray:
    """Indices into the output times of the ``snapshots`` equally spaced density snapshots."""
    return np.linspace(0, s["outputs"] - 1, s["snapshots"]).round().astype(int)


def cells(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reference cell, one grid cell per (scheme, n) and one particle cell per N."""
    s = settings(block)
    out: list[dict[str, Any]] = [{"name": "reference", "kind": "reference"}]
    for scheme in s["schemes"]:
        for n in s["grids"]:
            out.append({"name": f"{scheme}_n{n}", "kind": "grid", "scheme": scheme, "n": n})
    seeds_ = s["particles_seeds"]
    for n in s["particles_N"]:
        out.append(
            {"name": f"particles_N{n}_seeds{seeds_}", "kind": "particles", "N": n, "seeds": seeds_}
        )
    return out


def problem_parts(s: Mapping[str, Any]) -> tuple[model.ShiftedTanhUnit, model.Measure, np.ndarray]:
    """The unit, the input measure mu and the target values f(x_m)."""
    measure = model.make_measure(s["measure"])
    return (
        model.ShiftedTanhUnit(float(s["beta"])),
        measure,
        model.make_target(s["target"])(measure.x),
    )


def grid_of(s: Mapping[str, Any], n: int) -> transport.Grid:
    """The n x n grid over the box ``[-box, box]^2`` of the (w0, h) plane."""
    b = float(s["box"])
    return transport.Grid((-b, -b), (b, b), int(n))


def probe_start(s: Mapping[str, Any]) -> np.ndarray:
    """Probe start positions: a ``probes x probes`` grid over init_mean +- 3 init_std, (K, 2)."""
    g = np.linspace(-PROBE_WIDTH, PROBE_WIDTH, s["probes"])
    m, d = np.asarray(s["init_mean"], float), np.asarray(s["init_std"], float)
    grid = np.meshgrid(m[0] + d[0] * g, m[1] + d[1] * g, indexing="ij")
    return np.stack(grid, axis=-1).reshape(-1, 2)


def reference_cell(s: Mapping[str, Any], log: Callable[[str], None]) -> xr.Dataset:
    """L_inf(t) from weighted quadrature nodes of p0 and the probe densities (characteristics)."""
    unit, measure, f = problem_parts(s)
    mean, std = s["init_mean"], s["init_std"]
    W, q = pt.gaussian_grid_nodes(mean, std, s["reference_points"], REFERENCE_WIDTH)
    Z = probe_start(s)
    logp0 = pt.gaussian_log_density(Z, np.asarray(mean, float), np.asarray(std, float))
    t = output_times(s)
    traj = pt.integrate(
        unit,
        pt.State(W, q, Z, logp0),
        measure,
        f,
        t,
        s["reference_dt"],
        keep_states=True,
        progress=lambda tt: log(f"reference: t = {tt:.3g}"),
    )
    Zt = np.stack([st.Z for st in traj.states])
    logp = np.stack([st.logp for st in traj.states])
    growth = float(np.exp((logp - logp0).max()))
    b = float(s["box"])
    outside = np.stack([(np.abs(st.W) > b).any(-1) for st in traj.states])
    escaped = float((outside * q).sum(-1).max())
    log(f"reference: max density growth {growth:.3g}, mass outside the box {escaped:.2g}")
    return xr.Dataset(
        {
            "loss_inf": ("t", traj.loss, attrs("infinite-width loss L_inf", "1", "Eq. 11")),
            "dissipation_inf": (
                "t",
                traj.dissipation,
                attrs("int p |grad u|^2 dw", "1", "Eq. 12"),
            ),
            "probe_w": (
                ("t", "probe", "dim"),
                Zt,
                attrs("probe position on its characteristic", "1", "after Eq. 10"),
            ),
            "probe_logp": (
                ("t", "probe"),
                logp,
                attrs("log density along the characteristic", "1", "after Eq. 10"),
            ),
            "density_growth": (
                (),
                growth,
                attrs("max over probes and t of p(w(t),t)/p(w(0),0)", "1", "after Eq. 10"),
            ),
            "escaped_mass": (
                (),
                escaped,
                attrs("largest reference mass outside the box", "1", "simulation"),
            ),
        },
        coords={"t": t, "dim": ["w0", "h"]},
    )


def grid_cell(s: Mapping[str, Any], scheme: str, n: int, log: Callable[[str], None]) -> xr.Dataset:
    """The finite-volume solution of Eq. (10) on the n x n grid with ``scheme``."""
    unit, measure, f = problem_parts(s)
    grid = grid_of(s, n)
    start = time.process_time()
    problem = transport.TransportProblem(unit, grid, measure, f)
    p0 = transport.gaussian_cell_averages(grid, s["init_mean"], s["init_std"])
    sol = transport.solve(
        problem,
        p0,
        output_times(s),
        scheme,
        s["limiter"],
        s["cfl"],
        progress=lambda t, k: log(f"{scheme} n={n}: t = {t:.3g}, {k} steps"),
    )
    cpu = time.process_time() - start
    snaps = np.stack([sol.densities[i] for i in snapshot_indices(s)])
    return xr.Dataset(
        {
            "loss": ("t", sol.loss, attrs("grid loss L_mf", "1", "Eqs. 10-11")),
            "mass": ("t", sol.mass, attrs("total probability int p dw", "1", "Eq. 10")),
            "min_density": ("t", sol.min_density, attrs("min over cells of p", "1", "Eq. 10")),
            "density": (
                ("snapshot", "w0", "h"),
                snaps,
                attrs("grid density p (cell averages)", "1", "Eq. 10"),
            ),
            "steps": ((), sol.steps, attrs("SSP-RK3 steps", "1", "simulation")),
            "cpu_seconds": ((), cpu, attrs("CPU time of the solve", "s", "simulation")),
        },
        coords={
            "t": output_times(s),
            "snapshot": output_times(s)[snapshot_indices(s)],
            "w0": grid.centers(0),
            "h": grid.centers(1),
        },
    )


def particles_cell(s: Mapping[str, Any], n: int, n_seeds: int, log: Callable) -> xr.Dataset:
    """Histograms (bin masses on the ``bins x bins`` grid) of N particles at t = T, per seed."""
    unit, measure, f = problem_parts(s)
    edges = grid_of(s, s["bins"])
    hist, loss = [], []
    for seed in range(n_seeds):
        rng = seeds.generator("pde_particles", {"N": n, "seed": seed})
        W = pt.sample_gaussian(rng, (n,), s["init_mean"], s["init_std"])
        traj = pt.integrate(
            unit,
            pt.State(W, pt.uniform_weights(W)),
            measure,
            f,
            [0.0, s["T"]],
            s["particles_dt"],
            keep_states=True,
        )
        Wt = traj.states[-1].W
        counts, _, _ = np.histogram2d(Wt[:, 0], Wt[:, 1], bins=[edges.edges(0), edges.edges(1)])
        hist.append(counts / n)
        loss.append(traj.loss[-1])
        log(f"particles N={n}: seed {seed + 1}/{n_seeds} done")
    return xr.Dataset(
        {
            "hist": (
                ("seed", "bin_w0", "bin_h"),
                np.stack(hist),
                attrs("fraction of particles per bin at t = T", "1", "simulation"),
            ),
            "loss_particles": ("seed", np.array(loss), attrs("loss at t = T", "1", "Eq. 2")),
        },
        coords={"seed": np.arange(n_seeds), "bin_w0": edges.centers(0), "bin_h": edges.centers(1)},
    )


def run_cell(
    block: Mapping[str, Any], cell: Mapping[str, Any], log: Callable[[str], None]
) -> xr.Dataset:
    """Compute one cell: the characteristics reference, one grid solve, or one particle number."""
    s = settings(block)
    if cell["kind"] == "reference":
        return reference_cell(s, log)
    if cell["kind"] == "grid":
        return grid_cell(s, str(cell["scheme"]), int(cell["n"]), log)
    if cell["kind"] == "particles":
        return particles_cell(s, int(cell["N"]), int(cell["seeds"]), log)
    raise ValueError(f"cell kind: {cell['kind']!r} is not one of 'reference', 'grid', 'particles'")


def observed_order(errors: np.ndarray, n: np.ndarray) -> float:
    """``log(e_coarse / e_fine) / log(n_fine / n_coarse)`` between the two finest grids."""
    i = np.argsort(n)[-2:]
    return float(np.log(errors[i[0]] / errors[i[1]]) / np.log(n[i[1]] / n[i[0]]))


def density_errors(
    grids: Sequence[xr.Dataset], s: Mapping[str, Any], probe_w: np.ndarray, probe_p: np.ndarray
) -> np.ndarray:
    """max over snapshots and probes of |p_grid(z) - p(z)| / max p(z), per grid cell."""
    out = []
    for ds in grids:
        grid = grid_of(s, ds.sizes["w0"])
        diff = [
            np.abs(transport.point_density(grid, ds["density"].values[k], probe_w[k]) - probe_p[k])
            for k in range(probe_w.shape[0])
        ]
        out.append(float(np.max(diff) / probe_p.max()))
    return np.array(out)


def summarize(block: Mapping[str, Any], results: Sequence[xr.Dataset]) -> xr.Dataset:
    """Loss errors and orders per scheme, density errors, histogram distances and their N-slope."""
    s = settings(block)
    kinds = cells(block)
    ref = results[0]
    grids = {
        (c["scheme"], c["n"]): r for c, r in zip(kinds, results, strict=True) if c["kind"] == "grid"
    }
    parts = [r for c, r in zip(kinds, results, strict=True) if c["kind"] == "particles"]
    schemes, ns = list(s["schemes"]), np.array(sorted(s["grids"]))
    t = output_times(s)
    snap = snapshot_indices(s)
    refused = float(ref["density_growth"]) > s["max_density_growth"]
    nan_if_refused = (lambda a: np.full_like(a, np.nan)) if refused else (lambda a: a)

    loss = np.array([[grids[sc, n]["loss"].values for n in ns] for sc in schemes])
    mass = np.array([[grids[sc, n]["mass"].values for n in ns] for sc in schemes])
    mind = np.array([[grids[sc, n]["min_density"].values for n in ns] for sc in schemes])
    cpu = np.array([[float(grids[sc, n]["cpu_seconds"]) for n in ns] for sc in schemes])
    loss_err = nan_if_refused(np.abs(loss - ref["loss_inf"].values).max(-1))
    orders = np.array([observed_order(e, ns) for e in loss_err])
    probe_w = ref["probe_w"].values[snap]
    probe_p = np.exp(ref["probe_logp"].values[snap])
    dens_err = nan_if_refused(
        np.array(
            [density_errors([grids[sc, n] for n in ns], s, probe_w, probe_p) for sc in schemes]
        )
    )
    dens_order = np.array([observed_order(e, ns) for e in dens_err])

    finest = grids["muscl", ns[-1]]
    pde_bins = transport.binned_masses(grid_of(s, ns[-1]), finest["density"].values[-1], s["bins"])
    dist = np.array([np.sqrt(((r["hist"].values - pde_bins) ** 2).sum((-2, -1))) for r in parts])
    dist = nan_if_refused(dist)
    sq_mean, sq_se = stats.mean_with_se((dist**2).T)
    d_rms = np.sqrt(sq_mean)
    d_se = sq_se / (2 * d_rms)
    big_n = np.array(s["particles_N"], dtype=float)
    sampling = np.sqrt((pde_bins * (1 - pde_bins)).sum() / big_n)
    if refused:
        slope = slope_se = intercept = np.nan
    else:
        slope, slope_se, intercept, _ = stats.power_law_fit(big_n, d_rms, d_se)

    def a(name: str, units: str, source: str) -> dict[str, str]:
        return attrs(name, units, source)

    grid_dims = ("scheme", "n")
    return xr.Dataset(
        {
            "loss_inf": (
                "t",
                ref["loss_inf"].values,
                a("infinite-width loss L_inf", "1", "Eq. 11"),
            ),
            "loss_pde": ((*grid_dims, "t"), loss, a("grid loss L_mf", "1", "Eqs. 10-11")),
            "mass_drift": (
                (*grid_dims, "t"),
                mass - 1.0,
                a("total probability minus 1", "1", "Eq. 10"),
            ),
            "min_density": ((*grid_dims, "t"), mind, a("min over cells of p", "1", "Eq. 10")),
            "cpu_seconds": (grid_dims, cpu, a("CPU time of the grid solve", "s", "simulation")),
            "loss_error": (
                grid_dims,
                loss_err,
                a("sup_t |L_pde(t) - L_inf(t)|", "1", "Eqs. 10-11"),
            ),
            "loss_order": (
                "scheme",
                orders,
                a("observed order of the loss error, two finest grids", "1", "Eqs. 10-11"),
            ),
            "density_error": (
                grid_dims,
                dens_err,
                a("max |p_grid - p_char| / max p_char at the probes", "1", "after Eq. 10"),
            ),
            "density_order": (
                "scheme",
                dens_order,
                a("observed order of the density error, two finest grids", "1", "after Eq. 10"),
            ),
            "max_mass_drift": (
                (),
                float(np.abs(mass - 1.0).max()),
                a("max |int p dw - 1| over schemes, grids, t", "1", "Eq. 10"),
            ),
            "min_density_overall": (
                (),
                float(mind.min()),
                a("min of p over schemes, grids, t", "1", "Eq. 10"),
            ),
            "density_growth": ((), float(ref["density_growth"]), ref["density_growth"].attrs),
            "max_density_growth": (
                (),
                float(s["max_density_growth"]),
                a("bound on the density growth for a comparison", "1", "simulation"),
            ),
            "comparison_refused": (
                (),
                np.int8(refused),
                a("1 if density_growth > max_density_growth", "1", "after Eq. 10"),
            ),
            "escaped_mass": ((), float(ref["escaped_mass"]), ref["escaped_mass"].attrs),
            "density": (
                ("snapshot", "w0", "h"),
                finest["density"].values,
                a("finest MUSCL grid density p", "1", "Eq. 10"),
            ),
            "probe_w": (("snapshot", "probe", "dim"), probe_w, ref["probe_w"].attrs),
            "probe_density": (
                ("snapshot", "probe"),
                probe_p,
                a("density along characteristics", "1", "after Eq. 10"),
            ),
            "hist_distance": (
                ("N", "seed"),
                dist,
                a("L2 distance of particle and grid bin masses at t = T", "1", "simulation"),
            ),
            "hist_distance_rms": (
                "N",
                d_rms,
                a("root mean square over seeds of the histogram distance", "1", "simulation"),
            ),
            "hist_distance_se": (
                "N",
                d_se,
                a("SE of hist_distance_rms (delta method)", "1", "simulation"),
            ),
            "hist_sampling": (
                "N",
                sampling,
                a("sqrt(sum_b m_b (1 - m_b) / N): i.i.d. sampling of p(T)", "1", "Eq. 10"),
            ),
            "hist_slope": (
                (),
                slope,
                a("fitted exponent of N in hist_distance_rms", "1", "simulation"),
            ),
            "hist_slope_se": ((), slope_se, a("SE of the fitted exponent", "1", "simulation")),
            "hist_intercept": (
                (),
                intercept,
                a("fitted log prefactor of the distance", "1", "simulation"),
            ),
        },
        coords={
            "scheme": schemes,
            "n": ns,
            "t": t,
            "snapshot": t[snap],
            "w0": finest["w0"].values,
            "h": finest["h"].values,
            "dim": ["w0", "h"],
            "N": np.array(s["particles_N"]),
            "seed": np.arange(s["particles_seeds"]),
        },
        attrs={
            "limiter": s["limiter"],
            "beta": float(s["beta"]),
            "T": float(s["T"]),
            "bins": int(s["bins"]),
            "box": float(s["box"]),
        },
    )
