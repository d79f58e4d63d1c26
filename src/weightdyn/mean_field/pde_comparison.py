"""Experiment E2: the transport equation (10) solved on a grid vs characteristics and particles.

For the ``ShiftedTanhUnit`` (``w = (w0, h)``) the density ``p(w, t)`` of Eqs. (9)-(10) is solved
by :mod:`weightdyn.mean_field.transport` (first-order upwind and MUSCL finite volumes) and compared
with

- the infinite-width limit by characteristics: weighted quadrature nodes of ``p0`` moved by the
  particle flow give ``L_inf(t)`` (Eqs. 6, 11); probes carry ``log p`` along characteristics
  (``d log p/dt = Laplacian u``, after Eq. 10) and give the exact density at their positions;
- N i.i.d. particles (q = 1/N, Eq. 3 with alpha = N): the distance between their histogram and the
  grid density on coarse bins falls as ``N^-1/2``.

Registry entry ``mf_pde``. Axes: ``part`` (``grid``: one solve per ``scheme`` and grid size
``grid``; ``particles``: one particle number ``N``; ``reference``: the characteristics, added by
:func:`extra_cells`), ``scheme``, ``grid``, ``N``; a cell keeps only the axes of its part, so the
product ``part: [grid, particles]`` x schemes x grids x N collapses to the grid solves and the
particle runs. When the exact density grows by more than ``max_density_growth`` along a
characteristic the grid cannot resolve it; the comparison numbers are then NaN and
``comparison_refused`` is 1.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import seeds, stats
from weightdyn.agreement import Agreement
from weightdyn.experiments import ConfigError, Figure, LazyPlots, Param
from weightdyn.io import attrs
from weightdyn.mean_field import model, transport
from weightdyn.mean_field import params as mfp
from weightdyn.mean_field import particles as pt

plots = LazyPlots("weightdyn.plots.mean_field_pde")

PARTS = ("grid", "particles", "reference")
PROBE_WIDTH = 3.0  # probes start on a square grid over mean +- 3 std
REFERENCE_WIDTH = 7.0  # quadrature nodes of p0 over mean +- 7 std
TIME = attrs("time", "1", "Eq. 3 with alpha = N")
DIM = attrs("weight component", "1", "w = (w0, h)")
SNAPSHOT = attrs("time of the density snapshot", "1", "Eq. 10")
SEED = attrs("seed index", "1", "simulation")


def _positive(name: str, default: float, long_name: str) -> Param:
    return Param(name, float, default, long_name, minimum=0.0, exclusive_minimum=True)


PARAMS: tuple[Param, ...] = (
    mfp.part(PARTS, "grid solves (scheme, grid), particle runs (N), characteristics reference"),
    Param("scheme", str, None, "finite-volume scheme", axis=True, allowed=transport.SCHEMES),
    Param(
        "grid", int, None, "grid size n (cells per axis of the (w0, h) box)", axis=True, minimum=8
    ),
    Param("N", int, None, "number of particles N", axis=True, minimum=1),
    mfp.dict_param(
        "unit", "unit {kind: shifted_tanh, beta}", {"kind": "shifted_tanh", "beta": 2.0}
    ),
    mfp.dict_param(
        "measure", "input measure mu {kind, size}", {"kind": "gauss_legendre", "size": 16}
    ),
    mfp.dict_param(
        "target", "target f {kind, amplitude[, bumps]}", {"kind": "tanh_bumps", "amplitude": 1.0}
    ),
    mfp.dict_param(
        "init",
        "initial density p0 = N(mean, diag(std^2)) of (w0, h)",
        {"mean": [0.0, 0.0], "std": [0.5, 0.5]},
    ),
    _positive("box", 3.5, "half-width of the square (w0, h) box"),
    _positive("T", 2.0, "final time"),
    Param("outputs", int, 21, "output times linspace(0, T, outputs)", minimum=3),
    Param("snapshots", int, 3, "density snapshots (equally spaced output times)", minimum=2),
    Param("limiter", str, "mc", "MUSCL slope limiter", allowed=transport.LIMITERS),
    Param(
        "cfl",
        float,
        None,
        "CFL number (null: the solver's default)",
        minimum=0.0,
        exclusive_minimum=True,
        maximum=0.25,
    ),
    Param("reference_points", int, 61, "reference quadrature nodes of p0 per axis", minimum=11),
    _positive("reference_dt", 0.01, "RK4 step of the characteristics"),
    Param("probes", int, 21, "probes per axis along characteristics", minimum=3),
    _positive("max_density_growth", 10.0, "largest density growth the grid comparison accepts"),
    Param("particles_seeds", int, 8, "independent particle sets per N", minimum=2),
    _positive("particles_dt", 0.04, "RK4 step of the particles (divides T)"),
    Param("bins", int, 32, "histogram bins per axis (divide every grid size)", minimum=1),
)


def check(s: Mapping[str, Any]) -> None:
    """Checks between the settings (ConfigError naming the key and what is allowed)."""
    mfp.unit(s["unit"], allowed=("shifted_tanh",))
    mfp.measure(s["measure"])
    mfp.target(s["target"])
    mean, std = mfp.gaussian(s["init"], "init", ("w0", "h"))
    if np.any(np.abs(mean) + REFERENCE_WIDTH * std > s["box"] + 1e-12):
        raise ConfigError(
            f"box: {s['box']!r} is not allowed; allowed: a half-width covering init.mean +- "
            f"{REFERENCE_WIDTH:g} init.std"
        )
    if (s["outputs"] - 1) % (s["snapshots"] - 1):
        raise ConfigError(
            f"snapshots: {s['snapshots']!r} is not allowed; allowed: (outputs - 1) divisible by "
            "(snapshots - 1)"
        )
    for key, times in (("reference_dt", output_times(s)), ("particles_dt", [s["T"]])):
        k = np.rint(np.asarray(times) / s[key])
        if not np.allclose(k * s[key], times, rtol=1e-9, atol=1e-12):
            what = "every output time" if key == "reference_dt" else "T"
            raise ConfigError(f"{key}: {s[key]!r} is not allowed; allowed: a step dividing {what}")


def derive(params: dict[str, Any]) -> dict[str, Any]:
    """Check the settings; keep only the axes of the cell's part (the others become None)."""
    check(params)
    part = params["part"]
    if part == "grid":
        mfp.require(params, ("scheme", "grid"), part)
        if params["grid"] % params["bins"]:
            raise ConfigError(
                f"grid: {params['grid']!r} is not allowed; allowed: a multiple of bins = "
                f"{params['bins']}"
            )
    if part == "particles":
        mfp.require(params, ("N",), part)
    keep = {"grid": ("scheme", "grid"), "particles": ("N",), "reference": ()}[part]
    for axis in ("scheme", "grid", "N"):
        if axis not in keep:
            params[axis] = None
    return params


def extra_cells(settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The characteristics reference (L_inf and the exact density at the probes)."""
    return [{"part": "reference", "scheme": None, "grid": None, "N": None}]


def output_times(s: Mapping[str, Any]) -> np.ndarray:
    """The output times ``linspace(0, T, outputs)``."""
    return np.linspace(0.0, float(s["T"]), int(s["outputs"]))


def snapshot_indices(s: Mapping[str, Any]) -> np.ndarray:
    """Indices into the output times of the ``snapshots`` equally spaced density snapshots."""
    return np.linspace(0, s["outputs"] - 1, s["snapshots"]).round().astype(int)


def problem_parts(s: Mapping[str, Any]) -> tuple[model.ShiftedTanhUnit, model.Measure, np.ndarray]:
    """The unit, the input measure mu and the target values f(x_m)."""
    measure = model.make_measure(s["measure"])
    return (
        model.ShiftedTanhUnit(float(s["unit"]["beta"])),
        measure,
        model.make_target(s["target"])(measure.x),
    )


def grid_of(s: Mapping[str, Any], n: int) -> transport.Grid:
    """The n x n grid over the box ``[-box, box]^2`` of the (w0, h) plane."""
    b = float(s["box"])
    return transport.Grid((-b, -b), (b, b), int(n))


def probe_start(s: Mapping[str, Any]) -> np.ndarray:
    """Probe start positions: a ``probes x probes`` grid over init.mean +- 3 init.std, (K, 2)."""
    g = np.linspace(-PROBE_WIDTH, PROBE_WIDTH, s["probes"])
    m, d = np.asarray(s["init"]["mean"], float), np.asarray(s["init"]["std"], float)
    grid = np.meshgrid(m[0] + d[0] * g, m[1] + d[1] * g, indexing="ij")
    return np.stack(grid, axis=-1).reshape(-1, 2)


def reference_cell(s: Mapping[str, Any], log: Callable[[str], None]) -> xr.Dataset:
    """L_inf(t) from weighted quadrature nodes of p0 and the probe densities (characteristics)."""
    unit, measure, f = problem_parts(s)
    mean, std = s["init"]["mean"], s["init"]["std"]
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
        coords={"t": ("t", t, TIME), "dim": ("dim", ["w0", "h"], DIM)},
    )


def grid_cell(s: Mapping[str, Any], scheme: str, n: int, log: Callable[[str], None]) -> xr.Dataset:
    """The finite-volume solution of Eq. (10) on the n x n grid with ``scheme``."""
    unit, measure, f = problem_parts(s)
    grid = grid_of(s, n)
    start = time.process_time()
    problem = transport.TransportProblem(unit, grid, measure, f)
    p0 = transport.gaussian_cell_averages(grid, s["init"]["mean"], s["init"]["std"])
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
            "t": ("t", output_times(s), TIME),
            "snapshot": ("snapshot", output_times(s)[snapshot_indices(s)], SNAPSHOT),
            "w0": ("w0", grid.centers(0), attrs("output weight w0 (cell centre)", "1", "Eq. 10")),
            "h": ("h", grid.centers(1), attrs("shift h (cell centre)", "1", "Eq. 10")),
        },
    )


def particles_cell(s: Mapping[str, Any], n: int, n_seeds: int, log: Callable) -> xr.Dataset:
    """Histograms (bin masses on the ``bins x bins`` grid) of N particles at t = T, per seed."""
    unit, measure, f = problem_parts(s)
    edges = grid_of(s, s["bins"])
    hist, loss = [], []
    for seed in range(n_seeds):
        rng = seeds.generator("pde_particles", {"N": n, "seed": seed})
        W = pt.sample_gaussian(rng, (n,), s["init"]["mean"], s["init"]["std"])
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
        coords={
            "seed": ("seed", np.arange(n_seeds), SEED),
            "bin_w0": ("bin_w0", edges.centers(0), attrs("bin centre in w0", "1", "simulation")),
            "bin_h": ("bin_h", edges.centers(1), attrs("bin centre in h", "1", "simulation")),
        },
    )


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


def run_cell(params: Mapping[str, Any], progress: Callable[[str], None]) -> xr.Dataset:
    """One cell: the characteristics reference, one grid solve, or one particle number."""
    part = params["part"]
    if part == "reference":
        return reference_cell(params, progress)
    if part == "grid":
        return grid_cell(params, str(params["scheme"]), int(params["grid"]), progress)
    return particles_cell(params, int(params["N"]), int(params["particles_seeds"]), progress)


def _grid_cells(groups: Mapping[str, list]) -> tuple[dict, list[str], np.ndarray]:
    """The grid solves by (scheme, n), the schemes (solver order) and the sorted grid sizes."""
    grids = {(p["scheme"], p["grid"]): ds for p, ds in groups["grid"]}
    schemes = [sc for sc in transport.SCHEMES if any(k[0] == sc for k in grids)]
    ns = np.array(sorted({n for _, n in grids}))
    missing = [f"{sc} n={n}" for sc in schemes for n in ns if (sc, n) not in grids]
    if missing or "muscl" not in schemes or ns.size < 2:
        raise ConfigError(
            f"grid: the summary needs every scheme on >= 2 common grid sizes, 'muscl' among the "
            f"schemes (the histogram reference); missing {missing}, schemes {schemes}"
        )
    return grids, schemes, ns


def _grid_vars(s, ref, grids, schemes, ns, refused: bool) -> dict[str, tuple]:
    """Loss and density errors of every grid solve and their observed orders (Eqs. 10-11)."""
    table = {
        key: np.array([[grids[sc, n][key].values for n in ns] for sc in schemes])
        for key in ("loss", "mass", "min_density")
    }
    cpu = np.array([[float(grids[sc, n]["cpu_seconds"]) for n in ns] for sc in schemes])
    loss_err = np.abs(table["loss"] - ref["loss_inf"].values).max(-1)
    snap = snapshot_indices(s)
    probe_w = ref["probe_w"].values[snap]
    probe_p = np.exp(ref["probe_logp"].values[snap])
    dens_err = np.array(
        [density_errors([grids[sc, n] for n in ns], s, probe_w, probe_p) for sc in schemes]
    )
    if refused:
        loss_err, dens_err = np.full_like(loss_err, np.nan), np.full_like(dens_err, np.nan)
    mass, mind, g = table["mass"], table["min_density"], ("scheme", "n")
    return {
        "loss_inf": ("t", ref["loss_inf"].values,
                     attrs("infinite-width loss L_inf", "1", "Eq. 11")),
        "loss_pde": ((*g, "t"), table["loss"], attrs("grid loss L_mf", "1", "Eqs. 10-11")),
        "mass_drift": ((*g, "t"), mass - 1.0, attrs("total probability minus 1", "1", "Eq. 10")),
        "min_density": ((*g, "t"), mind, attrs("min over cells of p", "1", "Eq. 10")),
        "cpu_seconds": (g, cpu, attrs("CPU time of the grid solve", "s", "simulation")),
        "loss_error": (g, loss_err, attrs("sup_t |L_pde(t) - L_inf(t)|", "1", "Eqs. 10-11")),
        "loss_order": ("scheme", np.array([observed_order(e, ns) for e in loss_err]),
                       attrs("observed order of the loss error, two finest grids", "1",
                             "Eqs. 10-11")),
        "density_error": (g, dens_err, attrs("max |p_grid - p_char| / max p_char at the probes",
                                             "1", "after Eq. 10")),
        "density_order": ("scheme", np.array([observed_order(e, ns) for e in dens_err]),
                          attrs("observed order of the density error, two finest grids", "1",
                                "after Eq. 10")),
        "max_mass_drift": ((), float(np.abs(mass - 1.0).max()),
                           attrs("max |int p dw - 1| over schemes, grids, t", "1", "Eq. 10")),
        "min_density_overall": ((), float(mind.min()),
                                attrs("min of p over schemes, grids, t", "1", "Eq. 10")),
        "probe_w": (("snapshot", "probe", "dim"), probe_w, ref["probe_w"].attrs),
        "probe_density": (("snapshot", "probe"), probe_p,
                          attrs("density along characteristics", "1", "after Eq. 10")),
    }  # fmt: skip


def _hist_vars(s, finest: xr.Dataset, n_finest: int, parts, big_n, refused: bool) -> dict:
    """Distances of the particle histograms from the finest MUSCL density and their N-slope."""
    pde_bins = transport.binned_masses(
        grid_of(s, n_finest), finest["density"].values[-1], s["bins"]
    )
    dist = np.array([np.sqrt(((r["hist"].values - pde_bins) ** 2).sum((-2, -1))) for r in parts])
    if refused:
        dist = np.full_like(dist, np.nan)
    sq_mean, sq_se = stats.mean_with_se((dist**2).T)
    d_rms = np.sqrt(sq_mean)
    d_se = sq_se / (2 * d_rms)
    sampling = np.sqrt((pde_bins * (1 - pde_bins)).sum() / big_n)
    if refused:
        slope = slope_se = intercept = np.nan
    else:
        slope, slope_se, intercept, _ = stats.power_law_fit(big_n, d_rms, d_se)
    sim = "simulation"
    return {
        "density": (("snapshot", "w0", "h"), finest["density"].values,
                    attrs("finest MUSCL grid density p", "1", "Eq. 10")),
        "hist_distance": (("N", "seed"), dist, attrs("L2 distance of particle and grid bin "
                                                     "masses at t = T", "1", sim)),
        "hist_distance_rms": ("N", d_rms, attrs("root mean square over seeds of the histogram "
                                                "distance", "1", sim)),
        "hist_distance_se": ("N", d_se, attrs("SE of hist_distance_rms (delta method)", "1", sim)),
        "hist_sampling": ("N", sampling, attrs("sqrt(sum_b m_b (1 - m_b) / N): i.i.d. sampling "
                                               "of p(T)", "1", "Eq. 10")),
        "hist_slope": ((), slope, attrs("fitted exponent of N in hist_distance_rms", "1", sim)),
        "hist_slope_se": ((), slope_se, attrs("SE of the fitted exponent", "1", sim)),
        "hist_intercept": ((), intercept, attrs("fitted log prefactor of the distance", "1", sim)),
    }  # fmt: skip


def summarize(
    datasets: Sequence[xr.Dataset], params: Sequence[Mapping[str, Any]], settings: Mapping[str, Any]
) -> xr.Dataset:
    """Loss errors and orders per scheme, density errors, histogram distances and their N-slope."""
    s = settings
    groups = mfp.by_part(datasets, params, key="N")
    mfp.need_cells(groups, "reference", 1, "added by the experiment")
    mfp.need_cells(groups, "grid", 2, "a convergence order")
    mfp.need_cells(groups, "particles", 2, "a fit in N")
    ref = groups["reference"][0][1]
    grids, schemes, ns = _grid_cells(groups)
    big_n = np.array([p["N"] for p, _ in groups["particles"]])
    parts = [ds for _, ds in groups["particles"]]
    refused = float(ref["density_growth"]) > s["max_density_growth"]
    finest = grids["muscl", ns[-1]]
    growth = float(s["max_density_growth"])
    data = {
        **_grid_vars(s, ref, grids, schemes, ns, refused),
        **_hist_vars(s, finest, int(ns[-1]), parts, big_n.astype(float), refused),
        "density_growth": ((), float(ref["density_growth"]), ref["density_growth"].attrs),
        "max_density_growth": ((), growth, attrs("bound on the density growth for a comparison",
                                                 "1", "simulation")),
        "comparison_refused": ((), np.int8(refused),
                               attrs("1 if density_growth > max_density_growth", "1",
                                     "after Eq. 10")),
        "escaped_mass": ((), float(ref["escaped_mass"]), ref["escaped_mass"].attrs),
    }  # fmt: skip
    t = output_times(s)
    coords = {
        "scheme": ("scheme", schemes, attrs("finite-volume scheme", "1", "Eq. 10")),
        "n": ("n", ns, attrs("grid size (cells per axis)", "1", "Eq. 10")),
        "t": ("t", t, TIME),
        "snapshot": ("snapshot", t[snapshot_indices(s)], SNAPSHOT),
        "w0": ("w0", finest["w0"].values, finest["w0"].attrs),
        "h": ("h", finest["h"].values, finest["h"].attrs),
        "dim": ("dim", ["w0", "h"], DIM),
        "N": ("N", big_n, attrs("number of particles", "1", "Eq. 3")),
        "seed": ("seed", np.arange(s["particles_seeds"]), SEED),
    }
    meta = {"limiter": s["limiter"], "beta": float(s["unit"]["beta"]), "T": float(s["T"]),
            "bins": int(s["bins"]), "box": float(s["box"])}  # fmt: skip
    return xr.Dataset(data, coords=coords, attrs=meta)


def agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """The E2 rows: observed orders, the MUSCL density and loss, the histogram exponent."""
    rows = []
    for scheme, order in (("muscl", 2.0), ("upwind", 1.0)):
        if scheme in ds["scheme"].values:
            text = f"observed order of the {scheme} loss error vs {order:g}"
            rows.append(
                mfp.row(label, text, "Eqs. 9-11", ds["loss_order"].sel(scheme=scheme), order)
            )
    muscl = ds.sel(scheme="muscl")
    rows += [
        mfp.row(label, "1 + max relative error of the MUSCL density at the probes vs 1",
                "Eq. 10 (characteristics)", 1 + muscl["density_error"], 1.0),
        mfp.row(label, "L_mf(t) of the finest MUSCL grid vs the characteristics reference",
                "Eqs. 10-11", muscl["loss_pde"].sel(n=muscl["n"].max()), ds["loss_inf"]),
        mfp.exponent(label, "exponent of the particle histogram distance in N vs -1/2",
                     "Eqs. 6, 10", ds, "hist_slope", -0.5),
    ]  # fmt: skip
    return rows


FIGURES = {
    "loss_error_vs_n": Figure(
        plots.loss_error_vs_n,
        "E2 (paper 002, Eqs. 9-11): :math:`\\sup_t|L_{pde}(t)-L_\\infty(t)|` of the upwind and "
        "MUSCL finite-volume solutions of Eq. 10 against the grid size n, with "
        ":math:`n^{-1}` and :math:`n^{-2}`.",
        source="summary",
    ),
    "density_snapshots": Figure(
        plots.density_snapshots,
        "E2 (paper 002, Eq. 10): the finest MUSCL density :math:`p(\\mathbf{w},t)` at the "
        "snapshot times, its contours (white) and those of the exact density carried along "
        "characteristics (dashed).",
        source="summary",
    ),
    "hist_distance_vs_N": Figure(
        plots.hist_distance_vs_N,
        "E2 (paper 002, Eqs. 3, 6, 10): L2 distance of the histogram of N particles from the "
        "grid density at t = T against N (r.m.s. over seeds, +-1 s.e.), fitted power law and the "
        "i.i.d. sampling level.",
        source="summary",
    ),
    "loss_curves": Figure(
        plots.loss_curves,
        "E2 (paper 002, Eqs. 10-12): grid losses against :math:`L_\\infty(t)`, their error and "
        "the drift of the total probability per grid size.",
        source="summary",
    ),
}

EXPERIMENT = mfp.experiment(
    "mf_pde",
    "E2: the transport equation on a grid vs characteristics and particles",
    "paper 002 Eqs. 3, 6, 9-12",
    sys.modules[__name__],
)
