"""Experiment E1 of paper 002: finite-width particle networks against the infinite-width limit.

A width-N network (Eq. 1) trained by gradient descent with ``alpha = N`` (Eq. 3) is a set of N
particles moving with ``dw/dt = -grad u(w, t)`` (Eqs. 9-10). With i.i.d. initial weights from
``p0`` its loss ``L_N(t)`` (Eq. 2) fluctuates about the mean-field loss ``L_inf(t)`` (Eq. 11 along
the solution of Eq. 8), here computed by the same dynamics on weighted quadrature nodes of ``p0``.

Cells (one job each):

- ``reference_P<points>``: ``L_inf(t)`` on a ``points^3`` grid (two grids: reference and check);
- ``N<N>_seeds<S>``: ``L_N(t)`` for S independent networks of width N (seeds batched, chunked);
- ``energy_N<N>_seeds<S>``: Eq. (12) in continuous time (RK4, Simpson) and per explicit Euler step.

``summarize`` measures ``|L_N - L_inf|`` (RMS over seeds; sup over t, sup over t >= t_late, fixed
times) and its log-log slope in N, the bias ``E L_N - L_inf`` against the exact t = 0 value
``(1/2N) int Var_p0[phi(w, x)] dmu(x)``, the Eq. (12) relative error and the Euler band, and the
monotonicity of Eq. (13) along every trajectory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn import seeds, stats
from weightdyn.io import attrs, provenance
from weightdyn.mean_field import particles
from weightdyn.mean_field.model import Measure, TanhUnit, make_measure, make_target
from weightdyn.plots import mean_field_width

Block = Mapping[str, Any]
Log = Callable[[str], None]

FIGURES: tuple[str, ...] = mean_field_width.FIGURES
UNIT = TanhUnit()


@dataclass(frozen=True)
class Settings:
    """The validated shared settings of a width-sweep block."""

    measure: Measure
    f_values: np.ndarray
    init_mean: np.ndarray
    init_std: np.ndarray
    dt: float
    t_out: np.ndarray
    t_fixed: np.ndarray
    t_late: float
    grid_width: float
    chunk_particles: int
    energy_t_max: float
    energy_interval_steps: int
    energy_points: int


def _positive(block: Block, key: str, kind: type = float) -> Any:
    value = block.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"width.{key}: {value!r} must be a positive number")
    if kind is int and int(value) != value:
        raise ValueError(f"width.{key}: {value!r} must be a positive integer")
    return kind(value)


def _multiple(value: float, dt: float, key: str) -> float:
    steps = round(value / dt)
    if abs(steps * dt - value) > 1e-9 * max(1.0, value):
        raise ValueError(f"width.{key}: {value!r} must be a multiple of dt = {dt}")
    return steps * dt


def settings(block: Block) -> Settings:
    """Validate the shared settings of ``block`` (raises ValueError naming the key)."""
    measure = make_measure(block.get("measure", {}))
    f_values = make_target(block.get("target", {}))(measure.x)
    mean = np.asarray(block.get("init_mean", ()), dtype=float)
    std = np.asarray(block.get("init_std", ()), dtype=float)
    if mean.shape != (UNIT.dim,):
        raise ValueError(f"width.init_mean: expected {UNIT.dim} numbers for (c, a, h), got {mean}")
    if std.shape != (UNIT.dim,) or np.any(std <= 0):
        raise ValueError(f"width.init_std: expected {UNIT.dim} positive numbers, got {std}")
    dt = _positive(block, "dt")
    out_dt = _multiple(_positive(block, "output_dt"), dt, "output_dt")
    t_max = _multiple(_positive(block, "t_max"), out_dt, "t_max")
    t_out = out_dt * np.arange(round(t_max / out_dt) + 1)
    t_fixed = np.asarray(block.get("t_fixed", ()), dtype=float)
    if (
        t_fixed.ndim != 1
        or t_fixed.size == 0
        or not np.all(np.min(np.abs(t_fixed[:, None] - t_out[None, :]), axis=1) < 1e-9)
    ):
        raise ValueError(f"width.t_fixed: {t_fixed} must be output times (multiples of output_dt)")
    t_late = float(block.get("t_late", -1.0))
    if not 0.0 <= t_late < t_max:
        raise ValueError(f"width.t_late: {t_late!r} must lie in [0, t_max = {t_max})")
    energy = block.get("energy", {})
    e_t_max = _multiple(_positive(energy, "t_max"), dt, "energy.t_max")
    e_steps = _positive(energy, "interval_steps", int)
    if e_steps % 2 or round(e_t_max / dt) % e_steps:
        raise ValueError(
            f"width.energy.interval_steps: {e_steps!r} must be even and divide "
            f"energy.t_max / dt = {round(e_t_max / dt)}"
        )
    return Settings(
        measure=measure,
        f_values=f_values,
        init_mean=mean,
        init_std=std,
        dt=dt,
        t_out=t_out,
        t_fixed=t_out[np.argmin(np.abs(t_fixed[:, None] - t_out[None, :]), axis=1)],
        t_late=t_late,
        grid_width=_positive(block, "grid_width"),
        chunk_particles=_positive(block, "chunk_particles", int),
        energy_t_max=e_t_max,
        energy_interval_steps=e_steps,
        energy_points=_positive(energy, "points", int),
    )


def seeds_for_width(block: Block, n: int) -> int:
    """Seeds of the width-n cell: ``particles_per_cell / n`` clipped to [seeds_min, seeds_max]."""
    total = _positive(block, "particles_per_cell", int)
    lo, hi = _positive(block, "seeds_min", int), _positive(block, "seeds_max", int)
    if lo > hi:
        raise ValueError(f"width.seeds_min: {lo} must not exceed seeds_max = {hi}")
    return int(min(hi, max(lo, -(-total // n))))


def cells(block: Block) -> list[dict[str, Any]]:
    """Two reference grids, one cell per width N, and the Eq. (12) cell."""
    settings(block)
    widths = block.get("N")
    if (
        not isinstance(widths, Sequence)
        or not widths
        or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in widths)
    ):
        raise ValueError(f"width.N: {widths!r} must be a list of positive integers")
    if len(set(widths)) != len(widths):
        raise ValueError(f"width.N: {widths!r} has repeated values")
    points = [_positive(block, key, int) for key in ("reference_points", "check_points")]
    if points[0] <= points[1] or points[1] < 3:
        raise ValueError(
            f"width.check_points: {points[1]} must be >= 3 and below reference_points = {points[0]}"
        )
    energy = block.get("energy", {})
    e_n, e_seeds = _positive(energy, "N", int), _positive(energy, "seeds", int)
    out: list[dict[str, Any]] = [
        {"name": f"reference_P{p}", "kind": "reference", "points": p} for p in points
    ]
    for n in sorted(widths):
        s = seeds_for_width(block, n)
        out.append({"name": f"N{n}_seeds{s}", "kind": "width", "N": n, "seeds": s})
    out.append(
        {"name": f"energy_N{e_n}_seeds{e_seeds}", "kind": "energy", "N": e_n, "seeds": e_seeds}
    )
    return out


def phi_variance_integral(nodes: np.ndarray, weights: np.ndarray, measure: Measure) -> float:
    """``int Var_p0[phi(w, x)] dmu(x)`` with ``p0`` given by weighted quadrature nodes."""
    phi = UNIT.values(nodes, measure.x)
    mean = weights @ phi
    var = weights @ (phi * phi) - mean * mean
    return float(measure.weights @ var)


def reference_dataset(s: Settings, points: int, log: Log) -> xr.Dataset:
    """``L_inf(t)`` and the dissipation of Eq. (12) on ``points^3`` weighted nodes of ``p0``."""
    nodes, weights = particles.gaussian_grid_nodes(s.init_mean, s.init_std, points, s.grid_width)
    log(f"reference: {weights.size} nodes, {s.t_out.size} output times")
    traj = particles.integrate(
        UNIT, particles.State(nodes, weights), s.measure, s.f_values, s.t_out, s.dt
    )
    return xr.Dataset(
        {
            "loss": ("t", traj.loss, attrs("mean-field loss L_inf", "1", "Eq. 11 (grid nodes)")),
            "dissipation": (
                "t",
                traj.dissipation,
                attrs("int p |grad u|^2 dw", "1", "Eq. 12 (grid nodes)"),
            ),
            "var_phi": (
                (),
                phi_variance_integral(nodes, weights, s.measure),
                attrs("int Var_p0[phi(w, x)] dmu(x)", "1", "Eq. 6 (grid nodes)"),
            ),
        },
        coords={"t": ("t", s.t_out, attrs("time", "1", "Eq. 3 with alpha = N"))},
    )


def _chunks(seeds_total: int, n: int, chunk_particles: int) -> list[int]:
    per = max(1, chunk_particles // n)
    return [min(per, seeds_total - k) for k in range(0, seeds_total, per)]


def width_dataset(s: Settings, cell: Mapping[str, Any], log: Log) -> xr.Dataset:
    """``L_N(t)`` per seed for ``cell["seeds"]`` networks of width ``cell["N"]`` (RK4, Eq. 3)."""
    n, total = int(cell["N"]), int(cell["seeds"])
    rng = seeds.generator("mean_field/width/init", {"N": n, "seeds": total})
    losses, dmin, rise = [], np.inf, -np.inf
    for k, size in enumerate(_chunks(total, n, s.chunk_particles)):
        W = particles.sample_gaussian(rng, (size, n), s.init_mean, s.init_std)
        state = particles.State(W, particles.uniform_weights(W))
        traj = particles.integrate(UNIT, state, s.measure, s.f_values, s.t_out, s.dt)
        losses.append(traj.loss.T)
        dmin = min(dmin, float(traj.dissipation.min()))
        rise = max(rise, float(np.max(np.diff(traj.loss, axis=0) / traj.loss[:-1])))
        log(f"N={n}: chunk {k + 1} ({size} seeds) done")
    return xr.Dataset(
        {
            "loss": (
                ("seed", "t"),
                np.concatenate(losses),
                attrs("loss L_N of a width-N network", "1", "simulation (Eq. 2)"),
            ),
            "dissipation_min": (
                (),
                dmin,
                attrs("min over seeds, t of the dissipation", "1", "simulation (Eq. 12)"),
            ),
            "loss_rise_max": (
                (),
                rise,
                attrs(
                    "max over seeds, t of (L(t+dt_out) - L(t)) / L(t)", "1", "simulation (Eq. 13)"
                ),
            ),
        },
        coords={"t": ("t", s.t_out, attrs("time", "1", "Eq. 3 with alpha = N"))},
    )


def simpson_increments(values: np.ndarray, h: float, steps: int) -> np.ndarray:
    """Simpson integrals of ``values`` (axis 0, spacing h) over consecutive blocks of ``steps``."""
    blocks = (values.shape[0] - 1) // steps
    out = []
    for j in range(blocks):
        v = values[j * steps : (j + 1) * steps + 1]
        out.append(h / 3 * (v[0] + v[-1] + 4 * v[1:-1:2].sum(0) + 2 * v[2:-1:2].sum(0)))
    return np.array(out)


def eq12_relative_errors(traj: particles.Trajectory, h: float, steps: int) -> np.ndarray:
    """``|L(t_{j+1}) - L(t_j) + int D dt| / int D dt`` over blocks of ``steps`` outputs (Eq. 12)."""
    integral = simpson_increments(traj.dissipation, h, steps)
    change = traj.loss[steps::steps] - traj.loss[:-steps:steps]
    return np.abs(change + integral) / integral


def loss_second_variation(state: particles.State, measure: Measure, f_values: np.ndarray):
    """``v . Hess_W L . v`` along the particle velocity ``v = -grad u`` (per state in the batch).

    Eq. (2) with weights q: ``v.Hess.v = int (sum_n q_n v_n.grad phi_n)^2 dmu
    + sum_n q_n int r v_n.D phi_n.v_n dmu`` (the Gauss-Newton part is ``||d f/dt||_mu^2``).
    """
    W, q = state.W, state.q
    r = particles.residual(UNIT, W, q, measure, f_values)
    v, _ = particles.velocity(UNIT, W, measure.weights * r, measure.x)
    dfdt = np.einsum("...n,...nmd,...nd->...m", q, UNIT.gradient(W, measure.x), v)
    curv = np.einsum("...nd,...nmde,...ne->...nm", v, UNIT.hessian(W, measure.x), v)
    second = np.einsum("...n,...nm,...m->...", q, curv, measure.weights * r)
    return (measure.weights * dfdt * dfdt).sum(-1) + second


def energy_dataset(s: Settings, cell: Mapping[str, Any], log: Log) -> xr.Dataset:
    """Eq. (12): RK4 loss changes vs Simpson-integrated dissipation; the explicit Euler excess.

    Systems: ``seeds`` networks of width N (q = 1/N) and an ``energy.points^3`` grid of ``p0``
    (the mean-field loss of Eq. 11, last system).
    Euler: ``e_k = L_{k+1} - L_k + dt D_k`` against its Taylor term ``(dt^2/2) v.Hess L.v``.
    """
    n, total = int(cell["N"]), int(cell["seeds"])
    rng = seeds.generator("mean_field/width/energy", {"N": n, "seeds": total})
    W = particles.sample_gaussian(rng, (total, n), s.init_mean, s.init_std)
    t = s.dt * np.arange(round(s.energy_t_max / s.dt) + 1)
    nodes, weights = particles.gaussian_grid_nodes(
        s.init_mean, s.init_std, s.energy_points, s.grid_width
    )
    rel, dmin, rise = [], np.inf, -np.inf
    for state in (
        particles.State(W, particles.uniform_weights(W)),
        particles.State(nodes, weights),
    ):
        traj = particles.integrate(UNIT, state, s.measure, s.f_values, t, s.dt)
        rel.append(np.atleast_2d(eq12_relative_errors(traj, s.dt, s.energy_interval_steps).T))
        dmin = min(dmin, float(traj.dissipation.min()))
        rise = max(rise, float(np.max(np.diff(traj.loss, axis=0) / traj.loss[:-1])))
    log(f"energy: RK4 Eq. 12 max relative error {np.max(np.concatenate(rel)):.2e}")
    euler = particles.integrate(
        UNIT,
        particles.State(W, particles.uniform_weights(W)),
        s.measure,
        s.f_values,
        t,
        s.dt,
        method="euler",
        keep_states=True,
    )
    excess = euler.loss[1:] - euler.loss[:-1] + s.dt * euler.dissipation[:-1]
    taylor = np.array(
        [0.5 * s.dt**2 * loss_second_variation(st, s.measure, s.f_values) for st in euler.states]
    )[:-1]
    interval = t[s.energy_interval_steps :: s.energy_interval_steps]
    return xr.Dataset(
        {
            "eq12_rel_error": (
                ("system", "interval_end"),
                np.concatenate(rel),
                attrs("|dL + int D dt| / int D dt per interval (RK4)", "1", "Eq. 12"),
            ),
            "euler_excess": (
                ("step", "seed"),
                excess,
                attrs(
                    "e_k = L_{k+1} - L_k + dt D_k (explicit Euler)",
                    "1",
                    "simulation (Eq. 12 per step)",
                ),
            ),
            "euler_taylor": (
                ("step", "seed"),
                taylor,
                attrs("(dt^2/2) v.Hess_W L.v at step k", "1", "second-order Taylor term of Eq. 2"),
            ),
            "euler_decrease": (
                ("step", "seed"),
                s.dt * euler.dissipation[:-1],
                attrs("dt D_k", "1", "Eq. 12 (first order)"),
            ),
            "energy_dissipation_min": (
                (),
                dmin,
                attrs("min dissipation (RK4 runs)", "1", "Eq. 12"),
            ),
            "energy_loss_rise_max": (
                (),
                rise,
                attrs("max (L(t+dt) - L(t)) / L(t), RK4 runs", "1", "Eq. 13"),
            ),
        },
        coords={
            "interval_end": ("interval_end", interval, attrs("end of interval", "1", "Eq. 3")),
            "step": ("step", t[:-1], attrs("time t_k of Euler step k", "1", "Eq. 3")),
        },
    )


def run_cell(block: Block, cell: Mapping[str, Any], log: Log) -> xr.Dataset:
    """Compute one cell (reference grid, width-N networks or the Eq. 12 check)."""
    s = settings(block)
    start = time.process_time()
    if cell["kind"] == "reference":
        ds = reference_dataset(s, int(cell["points"]), log)
    elif cell["kind"] == "width":
        ds = width_dataset(s, cell, log)
    elif cell["kind"] == "energy":
        ds = energy_dataset(s, cell, log)
    else:
        raise ValueError(f"cell kind: {cell['kind']!r} is not one of reference, width, energy")
    ds.attrs = {**provenance(cell), "cpu_seconds": time.process_time() - start}
    return ds


def rms_with_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RMS over axis 0 and its standard error (delta method on the mean of x^2)."""
    sq = x * x
    rms = np.sqrt(sq.mean(0))
    return rms, sq.std(0, ddof=1) / np.sqrt(x.shape[0]) / (2 * rms)


def mean_with_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over axis 0 and its standard error."""
    return x.mean(0), x.std(0, ddof=1) / np.sqrt(x.shape[0])


def summarize(block: Block, results: Sequence[xr.Dataset]) -> xr.Dataset:
    """Combine the cells into the E1 dataset: curves, RMS gaps, biases, slopes, Eq. 12 checks."""
    s = settings(block)
    by_kind: dict[str, list[tuple[dict, xr.Dataset]]] = {"reference": [], "width": [], "energy": []}
    for cell, ds in zip(cells(block), results, strict=True):
        by_kind[cell["kind"]].append((cell, ds))
    (_, ref), (_, check) = by_kind["reference"]
    l_inf = ref["loss"].values
    widths = np.array([c["N"] for c, _ in by_kind["width"]])
    late = s.t_out >= s.t_late - 1e-12
    fixed = [int(np.argmin(np.abs(s.t_out - tf))) for tf in s.t_fixed]
    rows: dict[str, list] = {k: [] for k in ("sup", "late", "fixed", "bias", "mean")}
    for _, ds in by_kind["width"]:
        gap = ds["loss"].values - l_inf
        rows["sup"].append(rms_with_se(np.abs(gap).max(1)))
        rows["late"].append(rms_with_se(np.abs(gap[:, late]).max(1)))
        rows["fixed"].append(rms_with_se(gap[:, fixed]))
        rows["bias"].append(mean_with_se(gap[:, fixed]))
        rows["mean"].append(mean_with_se(ds["loss"].values))
    stack = {k: [np.array(x) for x in zip(*v, strict=True)] for k, v in rows.items()}
    slope = stats.power_law_fit(widths, *stack["late"])
    slope_sup = stats.power_law_fit(widths, *stack["sup"])
    var_phi = float(ref["var_phi"])
    bias0, bias0_se = stack["bias"][0][0, 0], stack["bias"][1][0, 0]
    exact0 = var_phi / (2 * widths[0])
    energy = by_kind["energy"][0][1]
    sim, rmse = "simulation", "RMS over seeds of |L_N - L_inf|"
    dims_f = ("N", "t_fixed")
    data = {
        "loss_inf": ("t", l_inf, attrs("mean-field loss L_inf", "1", "Eq. 11 (grid nodes)")),
        "loss_inf_check": (
            "t",
            check["loss"].values,
            attrs("L_inf on the coarser check grid", "1", "Eq. 11"),
        ),
        "grid_difference": (
            (),
            float(np.max(np.abs(check["loss"].values - l_inf))),
            attrs(
                "max_t |L_inf(check grid) - L_inf(reference grid)|",
                "1",
                "Eq. 11 (quadrature error)",
            ),
        ),
        "loss_mean": (("N", "t"), stack["mean"][0], attrs("E L_N (mean over seeds)", "1", sim)),
        "loss_mean_se": (("N", "t"), stack["mean"][1], attrs("SE of E L_N", "1", sim)),
        "seeds": (
            "N",
            np.array([c["seeds"] for c, _ in by_kind["width"]]),
            attrs("independent networks per width", "1", sim),
        ),
        "rms_sup": ("N", stack["sup"][0], attrs(f"{rmse}, sup over t", "1", sim)),
        "rms_sup_se": ("N", stack["sup"][1], attrs("SE of rms_sup", "1", sim)),
        "rms_late": ("N", stack["late"][0], attrs(f"{rmse}, sup over t >= t_late", "1", sim)),
        "rms_late_se": ("N", stack["late"][1], attrs("SE of rms_late", "1", sim)),
        "rms_fixed": (dims_f, stack["fixed"][0], attrs(f"{rmse} at fixed t", "1", sim)),
        "rms_fixed_se": (dims_f, stack["fixed"][1], attrs("SE of rms_fixed", "1", sim)),
        "bias": (dims_f, stack["bias"][0], attrs("E L_N - L_inf at fixed t", "1", sim)),
        "bias_se": (dims_f, stack["bias"][1], attrs("SE of bias", "1", sim)),
        "bias_exact_t0": (
            "N",
            var_phi / (2 * widths),
            attrs("(1/2N) int Var_p0[phi] dmu", "1", "Eqs. 2, 6 at t = 0"),
        ),
        "var_phi": ((), var_phi, attrs("int Var_p0[phi(w, x)] dmu(x)", "1", "Eq. 6")),
        "slope_late": ((), slope[0], attrs("log-log slope of rms_late vs N", "1", "fit")),
        "slope_late_se": ((), slope[1], attrs("SE of slope_late", "1", "fit")),
        "intercept_late": ((), slope[2], attrs("log-log intercept of rms_late", "1", "fit")),
        "chi2_late": ((), slope[3], attrs("chi^2 per dof of the slope_late fit", "1", "fit")),
        "slope_sup": ((), slope_sup[0], attrs("log-log slope of rms_sup vs N", "1", "fit")),
        "slope_sup_se": ((), slope_sup[1], attrs("SE of slope_sup", "1", "fit")),
        "bias0_smallest_N": ((), bias0, attrs("t = 0 bias at the smallest N", "1", sim)),
        "bias0_smallest_N_se": ((), bias0_se, attrs("SE of bias0_smallest_N", "1", sim)),
        "bias0_z": (
            (),
            (bias0 - exact0) / bias0_se,
            attrs("(bias0 - exact) / SE at the smallest N", "1", "Eqs. 2, 6"),
        ),
        "eq12_rel_error": energy["eq12_rel_error"],
        "eq12_rel_error_max": (
            (),
            float(energy["eq12_rel_error"].max()),
            attrs("max relative error of Eq. 12 (RK4, Simpson)", "1", "Eq. 12"),
        ),
        "euler_excess": energy["euler_excess"],
        "euler_taylor": energy["euler_taylor"],
        "euler_decrease": energy["euler_decrease"],
        "dissipation_min": (
            (),
            min(
                float(energy["energy_dissipation_min"]),
                *(float(d["dissipation_min"]) for _, d in by_kind["width"]),
            ),
            attrs("min dissipation over all trajectories", "1", "Eq. 12"),
        ),
        "loss_rise_max": (
            (),
            max(
                float(energy["energy_loss_rise_max"]),
                *(float(d["loss_rise_max"]) for _, d in by_kind["width"]),
            ),
            attrs("max relative loss increase between outputs (all RK4 runs)", "1", "Eq. 13"),
        ),
    }
    bands = {
        "euler_excess_rel": (energy["euler_excess"] / energy["euler_decrease"], "e_k / (dt D_k)"),
        "euler_excess_taylor": (
            energy["euler_excess"] / energy["euler_taylor"],
            "e_k / ((dt^2/2) v.Hess L.v)",
        ),
    }
    for name, (ratio, text) in bands.items():
        data[f"{name}_min"] = (
            (),
            float(ratio.min()),
            attrs(f"min over steps of {text}", "1", "Eq. 12 (explicit Euler)"),
        )
        data[f"{name}_max"] = (
            (),
            float(ratio.max()),
            attrs(f"max over steps of {text}", "1", "Eq. 12 (explicit Euler)"),
        )
    coords = {
        "N": ("N", widths, attrs("network width", "1", "Eq. 1")),
        "t": ("t", s.t_out, attrs("time", "1", "Eq. 3 with alpha = N")),
        "t_fixed": ("t_fixed", s.t_fixed, attrs("fixed time", "1", "Eq. 3")),
        "t_late": ((), s.t_late, attrs("start of the late-time sup", "1", "Eq. 3")),
        "dt": ((), s.dt, attrs("time step", "1", "RK4 / Euler")),
    }
    cpu = sum(float(ds.attrs.get("cpu_seconds", 0.0)) for ds in results)
    return xr.Dataset(
        data, coords=coords, attrs={"experiment": "mean_field/width", "cpu_seconds_total": cpu}
    )


def plot(summary: xr.Dataset, name: str) -> plt.Figure:
    """Figure ``name`` (one of FIGURES) of the summary dataset."""
    return mean_field_width.plot(summary, name)
