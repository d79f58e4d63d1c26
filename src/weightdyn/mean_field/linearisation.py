"""Experiment E5 of paper 002: linearisation of the transport equation at a zero-loss state.

Near a zero-loss stationary density ``p_inf`` the transport equation (8) linearises to
``d dp/dt = R dp`` with ``R = div(p_inf grad) K`` (Eqs. 15-17). ``R`` maps the density space into
``span{g_m = div(p_inf grad phi(., x_m))}``, on which it acts by the M x M matrix ``-mu G`` with the
Gram matrix of the feature gradients ``G_mm' = int p_inf grad phi(w, x_m) . grad phi(w, x_m') dw``.
Its non-zero spectrum is therefore ``-theta_k``, the eigenvalues of the symmetric tangent kernel
``Theta = mu^1/2 G mu^1/2``, with eigenvectors ``p_k = sum_m (mu^1/2 v_k)_m g_m``. In the same basis
``<K dp0, p_k> = -theta_k v_k . s0`` and ``<K p_k, p_k> = theta_k^2`` with the scaled residual
``s0 = mu^1/2 (int dp0 phi(., x_m) dw)``, so Eq. (18) reads ``L(t) = 1/2 sum_k (v_k . s0)^2
exp(-2 theta_k t)``, i.e. ``s(t) = exp(-t Theta) s0`` in residual space.

Registry entry ``mf_linearisation``; its ``part`` axis names the cells (one job each):

- ``perturb`` (axis ``delta``): the converged state moved by ``delta`` times random directions,
  the particle loss against Eq. (18);
- ``grid`` (axis ``grid_size``): ``R`` discretised by finite volumes on an n x n grid for the
  smooth stationary density ``p_star``; its non-zero spectrum against weighted quadrature nodes
  of ``p_star``;
- ``decay`` (added by :func:`extra_cells`): N particles (q = 1/N) trained by RK4 from ``init`` to
  the zero-loss state of the target ``f = int p_star phi dw``; the late rate ``-d log L/dt``
  against ``2 theta_min`` of the final state (and against ``2 kappa_min`` of the feature Gram
  matrix, the paper's "eigenvalues of K" after Eq. 18).

A cell keeps only the axis of its part, so ``part: [perturb, grid]`` with lists of deltas and grid
sizes gives one cell per delta and one per grid size.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import erf
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import seeds, stats
from weightdyn.agreement import Agreement
from weightdyn.experiments import REQUIRED, ConfigError, Figure, LazyPlots, Param
from weightdyn.io import attrs
from weightdyn.mean_field import params as mfp
from weightdyn.mean_field import particles
from weightdyn.mean_field.model import Measure, ShiftedTanhUnit

plots = LazyPlots("weightdyn.plots.mean_field_linearisation")

Params = Mapping[str, Any]
Log = Callable[[str], None]

TIME = attrs("time", "1", "Eq. 3 with alpha = N")
MODE = attrs("eigenvalue index (ascending)", "1", "Eq. 16")
DIRECTION = attrs("random perturbation direction", "1", "simulation")
WEIGHTS = ("w0", "h")

# --------------------------------------------------------------------------------------- theory


def tangent_kernel(unit: ShiftedTanhUnit, W: np.ndarray, q: np.ndarray, measure: Measure):
    """``Theta = mu^1/2 G mu^1/2``, ``G_mm' = sum_n q_n grad phi(w_n, x_m) . grad phi(w_n, x_m')``.

    Its eigenvalues are the non-zero spectrum of ``-R`` (Eqs. 15-16); shape ``(..., M, M)``.
    """
    g = unit.gradient(W, measure.x)
    s = np.sqrt(measure.weights)
    return np.einsum("...n,...nmi,...nki->...mk", q, g, g) * s[:, None] * s


def feature_gram(unit: ShiftedTanhUnit, W: np.ndarray, q: np.ndarray, measure: Measure):
    """``mu^1/2 (sum_n q_n phi(w_n, x_m) phi(w_n, x_m')) mu^1/2``: K (Eq. 14) restricted to p."""
    v = unit.values(W, measure.x)
    s = np.sqrt(measure.weights)
    return np.einsum("...n,...nm,...nk->...mk", q, v, v) * s[:, None] * s


def linear_residual(unit: ShiftedTanhUnit, W: np.ndarray, q: np.ndarray, V: np.ndarray, x):
    """``int dp0 phi(., x_m) dw`` for ``dp0 = -div(p V)`` (particles moved by ``V``): (..., M)."""
    return np.einsum("...n,...nmi,...ni->...m", q, unit.gradient(W, x), V)


def eq18_loss(theta: np.ndarray, vectors: np.ndarray, s0: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Eq. (18): ``1/2 sum_k (v_k . s0)^2 exp(-2 theta_k t)``, shape ``(T, ...)``, s0 (..., M)."""
    coeff = np.einsum("mk,...m->...k", vectors, s0) ** 2
    decay = np.exp(-2.0 * np.multiply.outer(t, theta))
    return 0.5 * np.einsum("...k,tk->t...", coeff, decay)


def _grid_axes(mean, std, n: int, width: float) -> list[np.ndarray]:
    return [m + s * np.linspace(-width, width, n) for m, s in zip(mean, std, strict=True)]


def _trapezoid(n: int) -> np.ndarray:
    w = np.ones(n)
    w[[0, -1]] = 0.5
    return w


def grid_tangent_kernel(
    unit: ShiftedTanhUnit, mean, std, n: int, width: float, measure: Measure
) -> np.ndarray:
    """``Theta_h = mu^1/2 G_h mu^1/2`` of the finite-volume discretisation of R (Eq. 16).

    ``R_h = -V^-1 D^T P D K_h`` (see :func:`grid_operators`) has the non-zero spectrum of
    ``-mu G_h`` with ``G_h = (D Phi^T)^T P (D Phi^T)``: the Dirichlet form ``int p grad phi_m .
    grad phi_m'`` with edge differences and ``p`` at edge midpoints (second order in h).
    """
    axes = _grid_axes(mean, std, n, width)
    h = [a[1] - a[0] for a in axes]
    gram = np.zeros((measure.size, measure.size))
    for axis in range(2):
        nodes = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
        phi = unit.values(nodes, measure.x)  # (n, n, M)
        lo = [slice(None)] * 2
        hi = [slice(None)] * 2
        lo[axis], hi[axis] = slice(0, -1), slice(1, None)
        diff = (phi[tuple(hi)] - phi[tuple(lo)]) / h[axis]
        mid = 0.5 * (nodes[tuple(hi)] + nodes[tuple(lo)])
        other = _trapezoid(n)[None, :] if axis == 0 else _trapezoid(n)[:, None]
        vol = h[0] * h[1] * other
        p = np.exp(particles.gaussian_log_density(mid, np.asarray(mean), np.asarray(std)))
        gram += np.einsum("ij,ijm,ijk->mk", vol * p, diff, diff)
    s = np.sqrt(measure.weights)
    return gram * s[:, None] * s


@dataclass(frozen=True)
class GridOperators:
    """Dense finite-volume operators on n^2 nodes: ``R_h`` (Eq. 16), ``K_h`` (Eq. 14), volumes."""

    R: np.ndarray
    K: np.ndarray
    volume: np.ndarray
    phi: np.ndarray


def grid_operators(
    unit: ShiftedTanhUnit, mean, std, n: int, width: float, measure: Measure
) -> GridOperators:
    """Dense ``R_h = -V^-1 D^T P D K_h`` and ``K_h = Phi^T mu Phi V`` (for small n only).

    ``V`` are the trapezoid node volumes (``<a, b> = sum_i V_i a_i b_i``), ``D`` edge differences
    divided by h, ``P`` the edge volumes times ``p_star`` at edge midpoints (no-flux boundary).
    """
    axes = _grid_axes(mean, std, n, width)
    h = [a[1] - a[0] for a in axes]
    nodes = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    volume = (h[0] * h[1] * np.outer(_trapezoid(n), _trapezoid(n))).ravel()
    index = np.arange(n * n).reshape(n, n)
    rows, cols, diag = [], [], []
    for axis in range(2):
        lo = [slice(None)] * 2
        hi = [slice(None)] * 2
        lo[axis], hi[axis] = slice(0, -1), slice(1, None)
        mid = 0.5 * (nodes[tuple(hi)] + nodes[tuple(lo)])
        other = _trapezoid(n)[None, :] if axis == 0 else _trapezoid(n)[:, None]
        p = np.exp(particles.gaussian_log_density(mid, np.asarray(mean), np.asarray(std)))
        rows.append(index[tuple(lo)].ravel())
        cols.append(index[tuple(hi)].ravel())
        diag.append((h[0] * h[1] * other * p).ravel() / h[axis] ** 2)
    lo_i, hi_i, weight = (np.concatenate(a) for a in (rows, cols, diag))
    laplace = np.zeros((n * n, n * n))  # D^T P D
    np.add.at(laplace, (lo_i, lo_i), weight)
    np.add.at(laplace, (hi_i, hi_i), weight)
    np.add.at(laplace, (lo_i, hi_i), -weight)
    np.add.at(laplace, (hi_i, lo_i), -weight)
    phi = unit.values(nodes.reshape(-1, 2), measure.x).T  # (M, n^2)
    K = phi.T @ (measure.weights[:, None] * phi) * volume
    R = -(laplace / volume[:, None]) @ K
    return GridOperators(R=R, K=K, volume=volume, phi=phi)


def fitted_rate(t: np.ndarray, loss: np.ndarray, window: Sequence[float]) -> tuple[float, float]:
    """``-d log L/dt`` by least squares over the times with ``window[1] <= L <= window[0]``.

    Returns the rate and its standard error (OLS).
    """
    ok = (loss <= window[0]) & (loss >= window[1])
    if ok.sum() < 3:
        raise ValueError(f"fit window {window} holds fewer than 3 output times")
    slope, se, *_ = stats.line_fit(t[ok], np.log(loss[ok]))
    return -slope, se


# ----------------------------------------------------------------------------------- settings

PARTS = ("perturb", "grid", "decay")


def _positive(name: str, long_name: str, kind: type = float, minimum: float = 0.0) -> Param:
    return Param(name, kind, REQUIRED, long_name, minimum=minimum, exclusive_minimum=True)


PARAMS: tuple[Param, ...] = (
    mfp.part(PARTS, "perturbations of size delta, finite-volume R on grids, the decay to p_inf"),
    Param(
        "delta",
        float,
        None,
        "perturbation size delta (0 < delta < 1)",
        axis=True,
        minimum=0.0,
        exclusive_minimum=True,
    ),
    Param("grid_size", int, None, "grid size n (n x n nodes)", axis=True, minimum=4),
    mfp.dict_param("unit", "unit {kind: shifted_tanh, beta}"),
    mfp.dict_param("measure", "input measure mu {kind: gauss_legendre | grid, size: M}"),
    mfp.dict_param("p_star", "smooth zero-loss density N(mean, diag(std^2)) of (w0, h)"),
    mfp.dict_param("init", "initial density N(mean, diag(std^2)) of the trained particles"),
    _positive("particles", "trained particles N", int),
    _positive("dt", "RK4 time step"),
    _positive("output_dt", "output interval of the training (a multiple of dt)"),
    _positive("t_end", "training time (a multiple of output_dt)"),
    Param("fit_loss", list, REQUIRED, "loss window [upper, lower] of the late-rate fit"),
    _positive("directions", "random directions per delta", int, minimum=1),
    _positive("perturb_decades", "decades of loss decay the perturbation runs last"),
    _positive("grid_width", "box half-width in standard deviations of p_star"),
    _positive("reference_points", "reference quadrature nodes of p_star per axis", int, 2),
    _positive("dense_max", "largest n whose dense R_h is diagonalised", int),
)


@dataclass(frozen=True)
class Settings:
    """The validated settings of a linearisation sweep."""

    unit: ShiftedTanhUnit
    measure: Measure
    p_mean: np.ndarray
    p_std: np.ndarray
    init_mean: np.ndarray
    init_std: np.ndarray
    particles: int
    dt: float
    t_end: float
    output_dt: float
    fit_loss: tuple[float, float]
    directions: int
    perturb_decades: float
    grid_width: float
    reference_points: int
    dense_max: int

    def f_values(self) -> np.ndarray:
        """The target ``f(x_m) = int p_star phi(w, x_m) dw`` (reference quadrature nodes)."""
        nodes, q = particles.gaussian_grid_nodes(
            self.p_mean, self.p_std, self.reference_points, self.grid_width
        )
        return particles.prediction(self.unit, nodes, q, self.measure.x)


def _fit_window(value: Any) -> tuple[float, float]:
    ok = isinstance(value, list | tuple) and len(value) == 2
    ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    if not ok or not 0 < float(value[1]) < float(value[0]):
        raise ConfigError(
            f"fit_loss: {value!r} is not allowed; allowed: [upper, lower] with 0 < lower < upper"
        )
    return float(value[0]), float(value[1])


def settings(params: Params) -> Settings:
    """Validate the settings (ConfigError naming the key and what is allowed).

    ``p_star`` and ``init`` are ``{mean: [w0, h], std: [w0, h]}``: the smooth zero-loss density
    defining the target, and the initial density of the N = ``particles`` trained particles; the
    perturbation runs last ``perturb_decades * ln 10 / (2 theta_min)``; ``grid_width`` is the box
    half-width in standard deviations, shared by the reference nodes.
    """
    unit = mfp.unit(params["unit"], allowed=("shifted_tanh",))
    dt, output_dt, t_end = (float(params[k]) for k in ("dt", "output_dt", "t_end"))
    mfp.multiple(output_dt, dt, "output_dt", "dt")
    mfp.multiple(t_end, dt, "t_end", "dt")
    mfp.multiple(t_end, output_dt, "t_end", "output_dt")
    p_mean, p_std = mfp.gaussian(params["p_star"], "p_star", WEIGHTS)
    init_mean, init_std = mfp.gaussian(params["init"], "init", WEIGHTS)
    return Settings(
        unit=unit,
        measure=mfp.measure(params["measure"]),
        p_mean=p_mean,
        p_std=p_std,
        init_mean=init_mean,
        init_std=init_std,
        particles=int(params["particles"]),
        dt=dt,
        t_end=t_end,
        output_dt=output_dt,
        fit_loss=_fit_window(params["fit_loss"]),
        directions=int(params["directions"]),
        perturb_decades=float(params["perturb_decades"]),
        grid_width=float(params["grid_width"]),
        reference_points=int(params["reference_points"]),
        dense_max=int(params["dense_max"]),
    )


def derive(params: dict[str, Any]) -> dict[str, Any]:
    """Check the settings; keep only the axis of the cell's part (``delta`` or ``grid_size``)."""
    settings(params)
    part = params["part"]
    if part == "perturb":
        mfp.require(params, ("delta",), part)
        if params["delta"] >= 1:
            raise ConfigError(f"delta: {params['delta']!r} is not allowed; allowed: 0 < delta < 1")
    if part == "grid":
        mfp.require(params, ("grid_size",), part)
    keep = {"perturb": "delta", "grid": "grid_size", "decay": None}[part]
    for axis in ("delta", "grid_size"):
        if axis != keep:
            params[axis] = None
    return params


def extra_cells(settings_: Params) -> list[dict[str, Any]]:
    """The decay of the trained particles to the zero-loss state (late rate vs 2 theta_min)."""
    return [{"part": "decay", "delta": None, "grid_size": None}]


# ------------------------------------------------------------------------------------- cells


def _converged(s: Settings, log: Log) -> particles.Trajectory:
    """RK4 particle training from ``init`` to the zero-loss state (Eq. 3 with alpha = N)."""
    stream = {
        "particles": s.particles,
        "init_w0": s.init_mean[0],
        "init_h": s.init_mean[1],
        "init_std_w0": s.init_std[0],
        "init_std_h": s.init_std[1],
    }
    W = particles.sample_gaussian(
        seeds.generator("init", stream), (s.particles,), s.init_mean, s.init_std
    )
    state = particles.State(W, particles.uniform_weights(W))
    t_out = s.output_dt * np.arange(round(s.t_end / s.output_dt) + 1)
    report = max(1, t_out.size // 5)

    def progress(t: float) -> None:
        if round(t / s.output_dt) % report == 0:
            log(f"training t = {t:.6g} / {s.t_end:g}")

    return particles.integrate(
        s.unit, state, s.measure, s.f_values(), t_out, s.dt, "rk4", True, progress
    )


def _spectra(s: Settings, state: particles.State) -> dict[str, Any]:
    theta, vectors = np.linalg.eigh(tangent_kernel(s.unit, state.W, state.q, s.measure))
    kappa = np.linalg.eigvalsh(feature_gram(s.unit, state.W, state.q, s.measure))
    return {"theta": theta, "vectors": vectors, "kappa": kappa}


def _decay_cell(s: Settings, log: Log) -> xr.Dataset:
    traj = _converged(s, log)
    spec = _spectra(s, traj.states[-1])
    rate, rate_se = fitted_rate(traj.t, traj.loss, s.fit_loss)
    log(f"late rate {rate:.10g} +- {rate_se:.2g}; 2 theta_min = {2 * spec['theta'][0]:.10g}")
    mode = {"mode": ("mode", np.arange(s.measure.size), MODE)}
    return xr.Dataset(
        {
            "loss_decay": ("t", traj.loss, attrs("particle loss L(t)", "1", "Eq. 2, simulation")),
            "local_rate": (
                "t",
                traj.dissipation / traj.loss,
                attrs("-d log L/dt = D/L", "1", "Eq. 12, simulation"),
            ),
            "theta": ("mode", spec["theta"], attrs("eigenvalues of Theta", "1", "Eq. 16")),
            "kappa": (
                "mode",
                spec["kappa"],
                attrs("eigenvalues of the feature Gram matrix (K on p)", "1", "Eq. 14"),
            ),
            "rate": ((), rate, attrs("fitted late rate -d log L/dt", "1", "simulation")),
            "rate_se": ((), rate_se, attrs("standard error of rate", "1", "simulation")),
        },
        coords={"t": ("t", traj.t, TIME), **mode},
    )


def _perturb_cell(s: Settings, delta: float, log: Log) -> xr.Dataset:
    base = _converged(s, log).states[-1]
    spec = _spectra(s, base)
    stream = {"particles": s.particles, "directions": s.directions}
    V = seeds.generator("direction", stream).standard_normal((s.directions, *base.W.shape))
    V /= np.sqrt(np.einsum("n,snd->s", base.q, V * V))[:, None, None]  # unit RMS displacement
    state = particles.State(base.W + delta * V, np.broadcast_to(base.q, V.shape[:-1]))
    t_stop = s.perturb_decades * np.log(10.0) / (2.0 * spec["theta"][0])
    steps = s.dt * np.rint(np.linspace(0.0, np.ceil(t_stop / s.dt), 101))
    log(f"delta = {delta:g}: {s.directions} directions to t = {steps[-1]:.6g}")
    traj = particles.integrate(s.unit, state, s.measure, s.f_values(), steps, s.dt, "rk4")
    r0 = particles.residual(s.unit, base.W, base.q, s.measure, s.f_values())
    r0 = r0 + delta * linear_residual(s.unit, base.W, base.q, V, s.measure.x)
    s0 = np.sqrt(s.measure.weights) * r0
    predicted = eq18_loss(spec["theta"], spec["vectors"], s0, steps)
    error = np.max(np.abs(predicted / traj.loss - 1.0), axis=0)
    log(f"delta = {delta:g}: max relative error of Eq. 18 {error.mean():.3g}")
    return xr.Dataset(
        {
            "loss": (("t", "direction"), traj.loss, attrs("particle loss", "1", "simulation")),
            "loss_eq18": (("t", "direction"), predicted, attrs("predicted loss", "1", "Eq. 18")),
            "error": (
                "direction",
                error,
                attrs("sup_t |L_eq18 / L - 1|", "1", "Eq. 18 vs simulation"),
            ),
        },
        coords={
            "t": ("t", steps, TIME),
            "direction": ("direction", np.arange(s.directions), DIRECTION),
        },
    )


def _grid_cell(s: Settings, n: int, log: Log) -> xr.Dataset:
    args = (s.unit, s.p_mean, s.p_std)
    theta_h = np.linalg.eigvalsh(grid_tangent_kernel(*args, n, s.grid_width, s.measure))
    nodes, q = particles.gaussian_grid_nodes(s.p_mean, s.p_std, s.reference_points, s.grid_width)
    box_mass = erf(s.grid_width / np.sqrt(2.0)) ** 2  # R_h integrates p_star over the same box
    theta_ref = np.linalg.eigvalsh(tangent_kernel(s.unit, nodes, box_mass * q, s.measure))
    identity = np.nan
    if n <= s.dense_max:
        ops = grid_operators(*args, n, s.grid_width, s.measure)
        lam = np.linalg.eigvals(ops.R)
        nonzero = np.sort(-lam[np.argsort(np.abs(lam))[-s.measure.size :]].real)
        identity = float(np.max(np.abs(nonzero / theta_h - 1.0)))
    log(f"n = {n}: theta_h = {theta_h}, dense identity error {identity:.2g}")
    return xr.Dataset(
        {
            "theta_grid": ("mode", theta_h, attrs("eigenvalues of Theta_h", "1", "Eq. 16")),
            "theta_ref": (
                "mode",
                theta_ref,
                attrs("eigenvalues of Theta, quadrature nodes", "1", "Eq. 16"),
            ),
            "identity_error": (
                (),
                identity,
                attrs("max |eig(-R_h) / eig(Theta_h) - 1| (non-zero part)", "1", "Eqs. 15-16"),
            ),
        },
        coords={"mode": ("mode", np.arange(s.measure.size), MODE)},
    )


def run_cell(params: Params, progress: Log) -> xr.Dataset:
    """One cell: the decay, one perturbation size or one grid size (see the module docstring)."""
    s = settings(params)
    if params["part"] == "decay":
        return _decay_cell(s, progress)
    if params["part"] == "perturb":
        return _perturb_cell(s, float(params["delta"]), progress)
    return _grid_cell(s, int(params["grid_size"]), progress)


# --------------------------------------------------------------------------------- summary


def _max_finite(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else np.nan


def _decay_vars(decay: xr.Dataset) -> dict[str, Any]:
    """The late decay rate against 2 theta_min (Theta) and 2 kappa_min (the paper's K)."""
    theta_min, kappa_min = float(decay["theta"][0]), float(decay["kappa"][0])
    rate, rate_se = float(decay["rate"]), float(decay["rate_se"])
    text = "Eq. 18 text"
    nearest = float(np.min(np.abs(rate / (2 * decay["kappa"].values) - 1)))
    return {
        **{name: decay[name] for name in ("loss_decay", "local_rate", "theta", "kappa", "rate",
                                          "rate_se")},
        "rate_rel_error": ((), abs(rate / (2 * theta_min) - 1),
                           attrs("|rate / (2 theta_min) - 1|", "1", "Eq. 18 vs simulation")),
        "rate_rel_error_se": ((), rate_se / (2 * theta_min),
                              attrs("standard error of rate_rel_error", "1", "simulation")),
        "rate_over_2kappa_min": ((), rate / (2 * kappa_min),
                                 attrs("rate / (2 kappa_min): the paper's 'eigenvalues of K'", "1",
                                       text)),
        "rate_nearest_kappa_rel": ((), nearest, attrs("min_k |rate / (2 kappa_k) - 1|", "1", text)),
    }  # fmt: skip


def _perturb_vars(cells: Sequence[xr.Dataset], deltas: np.ndarray, directions: int) -> dict:
    """Eq. 18 against the perturbed particles and the delta-exponent of its error."""
    perturb = xr.concat(cells, dim=xr.DataArray(list(deltas), dims="delta"))
    perturb = perturb.rename({"t": "t_perturb"})
    err = perturb["error"]
    err_mean = err.mean("direction")
    err_se = err.std("direction", ddof=1) / np.sqrt(directions)
    slope, slope_se, *_ = stats.power_law_fit(deltas, err_mean.values)
    return {
        "loss_perturbed": perturb["loss"],
        "loss_eq18": perturb["loss_eq18"],
        "eq18_error": err,
        "eq18_error_mean": ("delta", err_mean.values,
                            attrs("mean over directions of sup_t |L_eq18/L - 1|", "1", "Eq. 18")),
        "eq18_error_se": ("delta", err_se.values, attrs("standard error", "1", "simulation")),
        "eq18_slope": ((), slope, attrs("d log error / d log delta", "1", "Eq. 18")),
        "eq18_slope_se": ((), slope_se, attrs("standard error of slope", "1", "simulation")),
    }  # fmt: skip


def _grid_vars(cells: Sequence[xr.Dataset], sizes: np.ndarray, modes: int) -> dict[str, Any]:
    """The spectrum of the finite-volume R_h against the quadrature nodes; observed orders."""
    grid = xr.concat(
        [r.drop_vars("theta_ref") for r in cells], dim=xr.DataArray(list(sizes), dims="n")
    )
    theta_ref = cells[0]["theta_ref"]
    rel = np.abs(grid["theta_grid"] / theta_ref - 1.0)
    fits = [stats.power_law_fit(sizes, rel.values[:, k])[:2] for k in range(modes)]
    orders = np.array([(-slope, se) for slope, se in fits])
    extreme = np.r_[orders[:2, 0], orders[-2:, 0]]
    return {
        "theta_grid": grid["theta_grid"],
        "theta_ref": theta_ref,
        "theta_grid_rel_error": (("n", "mode"), rel.values,
                                 attrs("|theta_h / theta_ref - 1|", "1", "Eq. 16, finite volumes")),
        "grid_order": ("mode", orders[:, 0],
                       attrs("observed order -d log error / d log n", "1", "Eq. 16")),
        "grid_order_se": ("mode", orders[:, 1], attrs("standard error", "1", "fit")),
        "grid_order_min": ((), float(extreme.min()),
                           attrs("min order over the 2 smallest and 2 largest eigenvalues", "1",
                                 "Eq. 16")),
        "identity_error": ((), _max_finite(grid["identity_error"].values),
                           attrs("max |eig(-R_h)/eig(Theta_h) - 1| over dense grids", "1",
                                 "Eqs. 15-16")),
    }  # fmt: skip


def summarize(
    datasets: Sequence[xr.Dataset], params: Sequence[Params], settings_: Params
) -> xr.Dataset:
    """The figure data and the acceptance numbers (rate match, Eq. 18 slope, grid orders)."""
    s = settings(settings_)
    groups = mfp.by_part(datasets, params)
    mfp.need_cells(groups, "decay", 1, "added by the experiment")
    mfp.need_cells(groups, "perturb", 2, "a fit in delta")
    mfp.need_cells(groups, "grid", 2, "a fit in n")
    perturb = sorted(groups["perturb"], key=lambda pair: pair[0]["delta"])
    grid = sorted(groups["grid"], key=lambda pair: pair[0]["grid_size"])
    deltas = np.array([p["delta"] for p, _ in perturb])
    sizes = np.array([p["grid_size"] for p, _ in grid])
    decay = groups["decay"][0][1].rename({"t": "t_decay"})
    data = {
        **_decay_vars(decay),
        **_perturb_vars([ds for _, ds in perturb], deltas, s.directions),
        **_grid_vars([ds for _, ds in grid], sizes, s.measure.size),
    }
    coords = {
        "delta": ("delta", deltas, attrs("perturbation size delta", "1", "Eq. 18")),
        "n": ("n", sizes, attrs("grid size n (n x n nodes)", "1", "Eq. 16")),
    }
    return xr.Dataset(data, coords=coords)


def agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """The E5 rows: Eq. 18 error exponent in delta, late rate vs 2 theta_min, grid order."""
    orders = ds.assign(grid_order_min_se=ds["grid_order_se"].max())
    return [
        mfp.exponent(label, "exponent of the Eq. 18 error in the perturbation size vs 1", "Eq. 18",
                     ds, "eq18_slope", 1.0),
        mfp.row(label, "late loss decay rate vs 2 theta_min (tangent kernel)", "Eqs. 16-18",
                ds["rate"], 2 * ds["theta"].min(), ds["rate_se"]),
        mfp.exponent(label, "grid order of the spectrum of R vs 2", "Eq. 16", orders,
                     "grid_order_min", 2.0),
    ]  # fmt: skip


FIGURES = {
    "decay": Figure(
        plots.decay,
        "E5 (paper 002, Eqs. 12, 16-18): loss of the trained particles on the way to the "
        "zero-loss state with the asymptotes :math:`e^{-2\\theta_{min}t}` (tangent kernel, the "
        "spectrum of -R) and :math:`e^{-2\\kappa_{min}t}` (Gram matrix of K), and the local rate "
        ":math:`-d\\log L/dt`.",
        source="summary",
    ),
    "perturbation": Figure(
        plots.perturbation,
        "E5 (paper 002, Eq. 18): loss after perturbations of size delta (markers) against the "
        "linearised prediction of Eq. 18 (lines), its relative error, and the error against delta "
        "(+-1 s.e. over directions).",
        source="summary",
    ),
    "grid_spectrum": Figure(
        plots.grid_spectrum,
        "E5 (paper 002, Eqs. 15-16): non-zero spectrum of the finite-volume R on n x n grids "
        "against the tangent kernel on quadrature nodes, and its relative error against n with "
        ":math:`n^{-2}`.",
        source="summary",
    ),
}

EXPERIMENT = mfp.experiment(
    "mf_linearisation",
    "E5: linearisation of the transport equation at a zero-loss state",
    "paper 002 Eqs. 14-18",
    sys.modules[__name__],
)
