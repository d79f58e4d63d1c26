"""Experiment E1 of paper 002: finite-width particle networks against the infinite-width limit.

A width-N network (Eq. 1) trained by gradient descent with ``alpha = N`` (Eq. 3) is a set of N
particles moving with ``dw/dt = -grad u(w, t)`` (Eqs. 9-10). With i.i.d. initial weights from
``p0`` its loss ``L_N(t)`` (Eq. 2) fluctuates about the mean-field loss ``L_inf(t)`` (Eq. 11 along
the solution of Eq. 8), here computed by the same dynamics on weighted quadrature nodes of ``p0``.

Registry entry ``mf_width``; the axis is the width ``N``, the ``part`` axis names the cells:

- ``width`` (main part): ``L_N(t)`` for S independent networks of width N (seeds batched, chunked;
  S = ``particles_per_cell / N`` clipped to [seeds_min, seeds_max]);
- ``reference``, ``check`` (added by :func:`extra_cells`): ``L_inf(t)`` on ``points^3`` grids of
  ``p0`` with ``reference_points`` and ``check_points``;
- ``energy`` (added): Eq. (12) in continuous time (RK4, Simpson) and per explicit Euler step.

``summarize`` measures ``|L_N - L_inf|`` (RMS over seeds; sup over t, sup over t >= t_late, fixed
times) and its log-log slope in N, the bias ``E L_N - L_inf`` against the exact t = 0 value
``(1/2N) int Var_p0[phi(w, x)] dmu(x)``, the Eq. (12) relative error and the Euler band, and the
monotonicity of Eq. (13) along every trajectory.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import seeds, stats
from weightdyn.agreement import Agreement
from weightdyn.experiments import REQUIRED, ConfigError, Figure, LazyPlots, Param
from weightdyn.io import attrs
from weightdyn.mean_field import params as mfp
from weightdyn.mean_field import particles
from weightdyn.mean_field.model import Measure, TanhUnit

plots = LazyPlots("weightdyn.plots.mean_field_width")

Params = Mapping[str, Any]
Log = Callable[[str], None]

UNIT = TanhUnit()
PARTS = ("width", "reference", "check", "energy")
ENERGY_KEYS = ("N", "seeds", "t_max", "interval_steps", "points")


def _positive(name: str, long_name: str, kind: type = float, minimum: float = 0.0) -> Param:
    return Param(name, kind, REQUIRED, long_name, minimum=minimum, exclusive_minimum=True)


PARAMS: tuple[Param, ...] = (
    Param("N", int, REQUIRED, "network width N", axis=True, minimum=1),
    mfp.part(PARTS, "width-N networks; reference and check grids of p0 (L_inf); Eq. 12 check"),
    mfp.dict_param("measure", "input measure mu {kind: gauss_legendre | grid, size: M}"),
    mfp.dict_param("target", "target f {kind: sin | tanh_bumps, amplitude: A[, bumps]}"),
    mfp.dict_param("init", "initial density p0 = N(mean, diag(std^2)) of w = (c, a, h)"),
    _positive("dt", "RK4 time step"),
    _positive("output_dt", "output interval (a multiple of dt)"),
    _positive("t_max", "final time (a multiple of output_dt)"),
    Param("t_fixed", list, REQUIRED, "fixed times of the gap and bias (output times)"),
    Param("t_late", float, REQUIRED, "start of the late-time sup (0 <= t_late < t_max)", minimum=0),
    _positive("grid_width", "half-width of the quadrature grids of p0 in standard deviations"),
    Param("reference_points", int, REQUIRED, "reference grid of p0: points per axis", minimum=3),
    Param("check_points", int, REQUIRED, "check grid of p0: points per axis", minimum=3),
    _positive(
        "particles_per_cell", "particles per width cell (seeds = particles_per_cell / N)", int
    ),
    _positive("seeds_min", "fewest independent networks per width", int),
    _positive("seeds_max", "most independent networks per width", int),
    _positive("chunk_particles", "particles integrated at once", int),
    mfp.dict_param("energy", "Eq. 12 check {N, seeds, t_max, interval_steps, points}"),
)


@dataclass(frozen=True)
class Settings:
    """The validated shared settings of a width sweep."""

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


def _fixed_times(value: Any, t_out: np.ndarray) -> np.ndarray:
    """The output times nearest to the ``t_fixed`` list (ConfigError unless they are outputs)."""
    try:
        t_fixed = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        t_fixed = np.full((1, 1), np.nan)
    if (
        t_fixed.ndim != 1
        or t_fixed.size == 0
        or not np.all(np.min(np.abs(t_fixed[:, None] - t_out[None, :]), axis=1) < 1e-9)
    ):
        raise ConfigError(
            f"t_fixed: {value!r} is not allowed; allowed: output times (multiples of output_dt "
            f"up to t_max = {t_out[-1]:g})"
        )
    return t_out[np.argmin(np.abs(t_fixed[:, None] - t_out[None, :]), axis=1)]


def _energy(params: Params, dt: float) -> tuple[float, int, int]:
    """``energy.t_max`` (a multiple of dt), ``energy.interval_steps`` and ``energy.points``."""
    energy = mfp.keys(params["energy"], "energy", ENERGY_KEYS)
    for key in ("N", "seeds", "points"):
        mfp.number(energy[key], f"energy.{key}", integer=True)
    t_max = mfp.multiple(mfp.number(energy["t_max"], "energy.t_max"), dt, "energy.t_max", "dt")
    steps = mfp.number(energy["interval_steps"], "energy.interval_steps", integer=True)
    if steps % 2 or round(t_max / dt) % steps:
        raise ConfigError(
            f"energy.interval_steps: {steps!r} is not allowed; allowed: an even number dividing "
            f"energy.t_max / dt = {round(t_max / dt)}"
        )
    return t_max, steps, int(energy["points"])


def settings(params: Params) -> Settings:
    """Validate the shared settings of a width sweep (ConfigError naming the key)."""
    measure = mfp.measure(params["measure"])
    f_values = mfp.target(params["target"])(measure.x)
    mean, std = mfp.gaussian(params["init"], "init", UNIT.names)
    dt = float(params["dt"])
    out_dt = mfp.multiple(float(params["output_dt"]), dt, "output_dt", "dt")
    t_max = mfp.multiple(float(params["t_max"]), out_dt, "t_max", "output_dt")
    t_out = out_dt * np.arange(round(t_max / out_dt) + 1)
    t_late = float(params["t_late"])
    if not 0.0 <= t_late < t_max:
        raise ConfigError(
            f"t_late: {t_late!r} is not allowed; allowed: 0 <= t_late < t_max = {t_max}"
        )
    e_t_max, e_steps, e_points = _energy(params, dt)
    return Settings(
        measure=measure,
        f_values=f_values,
        init_mean=mean,
        init_std=std,
        dt=dt,
        t_out=t_out,
        t_fixed=_fixed_times(params["t_fixed"], t_out),
        t_late=t_late,
        grid_width=float(params["grid_width"]),
        chunk_particles=int(params["chunk_particles"]),
        energy_t_max=e_t_max,
        energy_interval_steps=e_steps,
        energy_points=e_points,
    )


def seeds_for_width(params: Params, n: int) -> int:
    """Seeds of the width-n cell: ``particles_per_cell / n`` clipped to [seeds_min, seeds_max]."""
    total = int(params["particles_per_cell"])
    lo, hi = int(params["seeds_min"]), int(params["seeds_max"])
    if lo > hi:
        raise ConfigError(f"seeds_min: {lo} is not allowed; allowed: <= seeds_max = {hi}")
    return int(min(hi, max(lo, -(-total // n))))


def derive(params: dict[str, Any]) -> dict[str, Any]:
    """Check the settings; give a width cell its ``seeds``, a grid cell its ``points``.

    Only ``width`` cells carry N (the other parts drop it, so a product over N and ``part``
    collapses to one cell per grid and one Eq. 12 cell).
    """
    settings(params)
    ref, check = int(params["reference_points"]), int(params["check_points"])
    if check >= ref:
        raise ConfigError(
            f"check_points: {check} is not allowed; allowed: below reference_points = {ref}"
        )
    part = params["part"]
    if part == "width":
        mfp.require(params, ("N",), part)
        params["seeds"] = seeds_for_width(params, int(params["N"]))
    else:
        params["N"] = None
    if part in ("reference", "check"):
        params["points"] = ref if part == "reference" else check
    return params


def extra_cells(settings_: Params) -> list[dict[str, Any]]:
    """The companion cells of the summary: the two grids of p0 and the Eq. 12 check."""
    return [{"part": part, "N": None} for part in PARTS[1:]]


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
            "loss_inf": (
                "t",
                traj.loss,
                attrs("mean-field loss L_inf", "1", "Eq. 11 (grid nodes)"),
            ),
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


def width_dataset(s: Settings, n: int, total: int, log: Log) -> xr.Dataset:
    """``L_N(t)`` per seed for ``total`` networks of width ``n`` (RK4, Eq. 3)."""
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
                np.ascontiguousarray(np.concatenate(losses)),
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


def _rk4_energy(s: Settings, systems, t: np.ndarray) -> tuple[list, float, float]:
    """Per system: Eq. 12 relative errors (RK4), min dissipation, max relative loss rise."""
    rel, dmin, rise = [], np.inf, -np.inf
    for state in systems:
        traj = particles.integrate(UNIT, state, s.measure, s.f_values, t, s.dt)
        rel.append(np.atleast_2d(eq12_relative_errors(traj, s.dt, s.energy_interval_steps).T))
        dmin = min(dmin, float(traj.dissipation.min()))
        rise = max(rise, float(np.max(np.diff(traj.loss, axis=0) / traj.loss[:-1])))
    return rel, dmin, rise


def _euler_excess(s: Settings, W: np.ndarray, t: np.ndarray):
    """Explicit Euler: ``e_k = L_{k+1} - L_k + dt D_k``, ``(dt^2/2) v.Hess L.v`` and ``dt D_k``."""
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
    return excess, taylor, s.dt * euler.dissipation[:-1]


def energy_dataset(s: Settings, n: int, total: int, log: Log) -> xr.Dataset:
    """Eq. (12): RK4 loss changes vs Simpson-integrated dissipation; the explicit Euler excess.

    Systems: ``seeds`` networks of width N (q = 1/N) and an ``energy.points^3`` grid of ``p0``
    (the mean-field loss of Eq. 11, last system).
    Euler: ``e_k = L_{k+1} - L_k + dt D_k`` against its Taylor term ``(dt^2/2) v.Hess L.v``.
    """
    rng = seeds.generator("mean_field/width/energy", {"N": n, "seeds": total})
    W = particles.sample_gaussian(rng, (total, n), s.init_mean, s.init_std)
    t = s.dt * np.arange(round(s.energy_t_max / s.dt) + 1)
    nodes, weights = particles.gaussian_grid_nodes(
        s.init_mean, s.init_std, s.energy_points, s.grid_width
    )
    systems = (particles.State(W, particles.uniform_weights(W)), particles.State(nodes, weights))
    rel, dmin, rise = _rk4_energy(s, systems, t)
    log(f"energy: RK4 Eq. 12 max relative error {np.max(np.concatenate(rel)):.2e}")
    excess, taylor, decrease = _euler_excess(s, W, t)
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
                decrease,
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


def run_cell(params: Params, progress: Log) -> xr.Dataset:
    """One cell of ``params["part"]``: a grid of p0, width-N networks or the Eq. 12 check."""
    s = settings(params)
    start = time.process_time()
    part = params["part"]
    if part in ("reference", "check"):
        ds = reference_dataset(s, int(params["points"]), progress)
    elif part == "width":
        ds = width_dataset(s, int(params["N"]), int(params["seeds"]), progress)
    else:
        energy = params["energy"]
        ds = energy_dataset(s, int(energy["N"]), int(energy["seeds"]), progress)
    ds.attrs = {"cpu_seconds": time.process_time() - start}
    return ds


def rms_with_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RMS over axis 0 and its standard error (delta method on the mean of x^2)."""
    sq = x * x
    rms = np.sqrt(sq.mean(0))
    return rms, sq.std(0, ddof=1) / np.sqrt(x.shape[0]) / (2 * rms)


def mean_with_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over axis 0 and its standard error."""
    return x.mean(0), x.std(0, ddof=1) / np.sqrt(x.shape[0])


def _gaps(s: Settings, l_inf: np.ndarray, cells: Sequence[xr.Dataset]) -> dict[str, list]:
    """Per width: RMS gaps (sup, late sup, fixed times), biases and mean losses with SEs."""
    late = s.t_out >= s.t_late - 1e-12
    fixed = [int(np.argmin(np.abs(s.t_out - tf))) for tf in s.t_fixed]
    rows: dict[str, list] = {k: [] for k in ("sup", "late", "fixed", "bias", "mean")}
    for ds in cells:
        gap = ds["loss"].values - l_inf
        rows["sup"].append(rms_with_se(np.abs(gap).max(1)))
        rows["late"].append(rms_with_se(np.abs(gap[:, late]).max(1)))
        rows["fixed"].append(rms_with_se(gap[:, fixed]))
        rows["bias"].append(mean_with_se(gap[:, fixed]))
        rows["mean"].append(mean_with_se(ds["loss"].values))
    return {k: [np.array(x) for x in zip(*v, strict=True)] for k, v in rows.items()}


def _width_vars(
    s: Settings, ref: xr.Dataset, check: xr.Dataset, widths: np.ndarray, seeds_: np.ndarray,
    cells: Sequence[xr.Dataset],
) -> dict[str, tuple]:  # fmt: skip
    """L_inf, the RMS gaps and biases per N, their log-log slopes, the t = 0 bias test."""
    l_inf = ref["loss_inf"].values
    stack = _gaps(s, l_inf, cells)
    slope = stats.power_law_fit(widths, *stack["late"])
    slope_sup = stats.power_law_fit(widths, *stack["sup"])
    var_phi = float(ref["var_phi"])
    bias0, bias0_se = stack["bias"][0][0, 0], stack["bias"][1][0, 0]
    exact0 = var_phi / (2 * widths[0])
    sim, rmse, dims_f = "simulation", "RMS over seeds of |L_N - L_inf|", ("N", "t_fixed")
    grid_difference = float(np.max(np.abs(check["loss_inf"].values - l_inf)))
    return {
        "loss_inf": ("t", l_inf, attrs("mean-field loss L_inf", "1", "Eq. 11 (grid nodes)")),
        "loss_inf_check": ("t", check["loss_inf"].values,
                           attrs("L_inf on the coarser check grid", "1", "Eq. 11")),
        "grid_difference": ((), grid_difference,
                            attrs("max_t |L_inf(check grid) - L_inf(reference grid)|", "1",
                                  "Eq. 11 (quadrature error)")),
        "loss_mean": (("N", "t"), stack["mean"][0], attrs("E L_N (mean over seeds)", "1", sim)),
        "loss_mean_se": (("N", "t"), stack["mean"][1], attrs("SE of E L_N", "1", sim)),
        "seeds": ("N", seeds_, attrs("independent networks per width", "1", sim)),
        "rms_sup": ("N", stack["sup"][0], attrs(f"{rmse}, sup over t", "1", sim)),
        "rms_sup_se": ("N", stack["sup"][1], attrs("SE of rms_sup", "1", sim)),
        "rms_late": ("N", stack["late"][0], attrs(f"{rmse}, sup over t >= t_late", "1", sim)),
        "rms_late_se": ("N", stack["late"][1], attrs("SE of rms_late", "1", sim)),
        "rms_fixed": (dims_f, stack["fixed"][0], attrs(f"{rmse} at fixed t", "1", sim)),
        "rms_fixed_se": (dims_f, stack["fixed"][1], attrs("SE of rms_fixed", "1", sim)),
        "bias": (dims_f, stack["bias"][0], attrs("E L_N - L_inf at fixed t", "1", sim)),
        "bias_se": (dims_f, stack["bias"][1], attrs("SE of bias", "1", sim)),
        "bias_exact_t0": ("N", var_phi / (2 * widths),
                          attrs("(1/2N) int Var_p0[phi] dmu", "1", "Eqs. 2, 6 at t = 0")),
        "var_phi": ((), var_phi, attrs("int Var_p0[phi(w, x)] dmu(x)", "1", "Eq. 6")),
        "slope_late": ((), slope[0], attrs("log-log slope of rms_late vs N", "1", "fit")),
        "slope_late_se": ((), slope[1], attrs("SE of slope_late", "1", "fit")),
        "intercept_late": ((), slope[2], attrs("log-log intercept of rms_late", "1", "fit")),
        "chi2_late": ((), slope[3], attrs("chi^2 per dof of the slope_late fit", "1", "fit")),
        "slope_sup": ((), slope_sup[0], attrs("log-log slope of rms_sup vs N", "1", "fit")),
        "slope_sup_se": ((), slope_sup[1], attrs("SE of slope_sup", "1", "fit")),
        "bias0_smallest_N": ((), bias0, attrs("t = 0 bias at the smallest N", "1", sim)),
        "bias0_smallest_N_se": ((), bias0_se, attrs("SE of bias0_smallest_N", "1", sim)),
        "bias0_z": ((), (bias0 - exact0) / bias0_se,
                    attrs("(bias0 - exact) / SE at the smallest N", "1", "Eqs. 2, 6")),
    }  # fmt: skip


def _energy_vars(energy: xr.Dataset, cells: Sequence[xr.Dataset]) -> dict[str, Any]:
    """Eq. 12 (RK4 relative error, Euler excess band) and Eq. 13 over every trajectory."""
    dmin = min(
        float(energy["energy_dissipation_min"]), *(float(d["dissipation_min"]) for d in cells)
    )
    rise = max(float(energy["energy_loss_rise_max"]), *(float(d["loss_rise_max"]) for d in cells))
    data: dict[str, Any] = {
        "eq12_rel_error": energy["eq12_rel_error"],
        "eq12_rel_error_max": ((), float(energy["eq12_rel_error"].max()),
                               attrs("max relative error of Eq. 12 (RK4, Simpson)", "1", "Eq. 12")),
        "euler_excess": energy["euler_excess"],
        "euler_taylor": energy["euler_taylor"],
        "euler_decrease": energy["euler_decrease"],
        "dissipation_min": ((), dmin,
                            attrs("min dissipation over all trajectories", "1", "Eq. 12")),
        "loss_rise_max": ((), rise, attrs("max relative loss increase between outputs (all RK4 "
                                          "runs)", "1", "Eq. 13")),
    }  # fmt: skip
    bands = {
        "euler_excess_rel": (energy["euler_excess"] / energy["euler_decrease"], "e_k / (dt D_k)"),
        "euler_excess_taylor": (
            energy["euler_excess"] / energy["euler_taylor"],
            "e_k / ((dt^2/2) v.Hess L.v)",
        ),
    }
    for name, (ratio, text) in bands.items():
        for end, value in (("min", float(ratio.min())), ("max", float(ratio.max()))):
            data[f"{name}_{end}"] = (
                (),
                value,
                attrs(f"{end} over steps of {text}", "1", "Eq. 12 (explicit Euler)"),
            )
    return data


def summarize(
    datasets: Sequence[xr.Dataset], params: Sequence[Params], settings_: Params
) -> xr.Dataset:
    """Combine the cells into the E1 summary: curves, RMS gaps, biases, slopes, Eq. 12 checks."""
    s = settings(settings_)
    groups = mfp.by_part(datasets, params, key="N")
    mfp.need_cells(groups, "width", 2, "a fit in N")
    for part in PARTS[1:]:
        mfp.need_cells(groups, part, 1, "added by the experiment")
    cells = [ds for _, ds in groups["width"]]
    widths = np.array([p["N"] for p, _ in groups["width"]])
    seeds_ = np.array([p["seeds"] for p, _ in groups["width"]])
    ref, check, energy = (groups[part][0][1] for part in PARTS[1:])
    data = {
        **_width_vars(s, ref, check, widths, seeds_, cells),
        **_energy_vars(energy, cells),
    }
    coords = {
        "N": ("N", widths, attrs("network width", "1", "Eq. 1")),
        "t": ("t", s.t_out, attrs("time", "1", "Eq. 3 with alpha = N")),
        "t_fixed": ("t_fixed", s.t_fixed, attrs("fixed time", "1", "Eq. 3")),
        "t_late": ((), s.t_late, attrs("start of the late-time sup", "1", "Eq. 3")),
        "dt": ((), s.dt, attrs("time step", "1", "RK4 / Euler")),
    }
    cpu = sum(float(ds.attrs.get("cpu_seconds", 0.0)) for ds in datasets)
    return xr.Dataset(
        data, coords=coords, attrs={"experiment": "mean_field/width", "cpu_seconds_total": cpu}
    )


def agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """The E1 rows: N-exponent of the gap, E L_N vs L_inf, Eq. 12, the exact t = 0 bias."""
    largest = ds["N"].max()
    late = f"sup_{{t>={float(ds['t_late']):g}}}"
    return [
        mfp.exponent(label, f"exponent of RMS {late} |L_N - L_inf| in N vs -1/2", "Eq. 6", ds,
                     "slope_late", -0.5),
        mfp.row(label, "mean loss E L_N(t) at the largest N vs L_inf(t)", "Eqs. 2, 6, 11",
                ds["loss_mean"].sel(N=largest), ds["loss_inf"], ds["loss_mean_se"].sel(N=largest)),
        mfp.row(label, "Delta L / (-int D dt) vs 1 over RK4 intervals", "Eq. 12",
                1 + ds["eq12_rel_error"], 1.0),
        mfp.row(label, "mean t = 0 bias E L_N - L_inf vs (1/2N) int Var_p0[phi] dmu", "Eqs. 2, 6",
                ds["bias"].isel(t_fixed=0), ds["bias_exact_t0"], ds["bias_se"].isel(t_fixed=0)),
    ]  # fmt: skip


FIGURES = {
    "gap_vs_N": Figure(
        plots.gap_vs_N,
        "E1 (paper 002, Eqs. 1-3, 6, 11): RMS over seeds of :math:`|L_N(t)-L_\\infty(t)|` "
        "(sup over t, sup over :math:`t\\geq t_{late}`, fixed times) against the width N, with "
        "the fitted power law and :math:`N^{-1/2}`; error bars +-1 s.e.",
        source="summary",
    ),
    "bias_vs_N": Figure(
        plots.bias_vs_N,
        "E1 (paper 002, Eqs. 2, 6): the bias :math:`|E L_N(t)-L_\\infty(t)|` at fixed times "
        "against N, with the exact t = 0 value :math:`(1/2N)\\int Var_{p_0}[\\phi]\\,d\\mu`.",
        source="summary",
    ),
    "loss_curves": Figure(
        plots.loss_curves,
        "E1 (paper 002, Eqs. 2, 11): mean loss :math:`E L_N(t)` of width-N networks (markers, "
        "+-1 s.e.) against the mean-field loss :math:`L_\\infty(t)` (line).",
        source="summary",
    ),
    "eq12_check": Figure(
        plots.eq12_check,
        "E1 (paper 002, Eq. 12): the energy identity with RK4 and Simpson per interval, the "
        "explicit Euler excess against its Taylor term, and the relative Euler excess per step.",
        source="summary",
    ),
}

EXPERIMENT = mfp.experiment(
    "mf_width",
    "E1: finite-width networks against the infinite-width limit",
    "paper 002 Eqs. 1-3, 6, 11-13",
    sys.modules[__name__],
)
