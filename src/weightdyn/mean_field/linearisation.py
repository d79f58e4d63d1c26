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

Cells (one job each):

- ``decay_N<N>``: N particles (q = 1/N) trained by RK4 from ``init`` to the zero-loss state of the
  target ``f = int p_star phi dw``; the late rate ``-d log L/dt`` against ``2 theta_min`` of the
  final state (and against ``2 kappa_min`` of the feature Gram matrix, the paper's "eigenvalues of
  K" after Eq. 18);
- ``delta_<delta>``: the converged state moved by ``delta`` times random directions, the particle
  loss against Eq. (18);
- ``grid_n<n>``: ``R`` discretised by finite volumes on an n x n grid for the smooth stationary
  density ``p_star``; its non-zero spectrum against weighted quadrature nodes of ``p_star``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import erf
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import seeds, stats
from weightdyn.io import attrs
from weightdyn.mean_field import particles
from weightdyn.mean_field.model import Measure, ShiftedTanhUnit, make_measure, make_unit
from weightdyn.plots.mean_field_linearisation import FIGURES, plot

__all__ = [
    "FIGURES",
    "cells",
    "eq18_loss",
    "feature_gram",
    "fitted_rate",
    "grid_operators",
    "grid_tangent_kernel",
    "linear_residual",
    "plot",
    "run_cell",
    "summarize",
    "tangent_kernel",
]

Block = Mapping[str, Any]
Log = Callable[[str], None]

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


@dataclass(frozen=True)
class Settings:
    """The validated settings of a linearisation block."""

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
    deltas: tuple[float, ...]
    directions: int
    perturb_decades: float
    grid_sizes: tuple[int, ...]
    grid_width: float
    reference_points: int
    dense_max: int

    def f_values(self) -> np.ndarray:
        """The target ``f(x_m) = int p_star phi(w, x_m) dw`` (reference quadrature nodes)."""
        nodes, q = particles.gaussian_grid_nodes(
            self.p_mean, self.p_std, self.reference_points, self.grid_width
        )
        return particles.prediction(self.unit, nodes, q, self.measure.x)


def _number(block: Block, key: str, kind: type = float, low: float = 0.0) -> Any:
    value = block.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= low:
        raise ValueError(f"linearisation.{key}: {value!r} must be a number > {low}")
    if kind is int and int(value) != value:
        raise ValueError(f"linearisation.{key}: {value!r} must be an integer > {low}")
    return kind(value)


def _gaussian(block: Block, key: str) -> tuple[np.ndarray, np.ndarray]:
    spec = block.get(key, {})
    mean = np.asarray(spec.get("mean", ()), dtype=float)
    std = np.asarray(spec.get("std", ()), dtype=float)
    if mean.shape != (2,) or std.shape != (2,) or np.any(std <= 0):
        raise ValueError(f"linearisation.{key}: expected mean [w0, h] and std [>0, >0], got {spec}")
    return mean, std


def _positive_list(block: Block, key: str, kind: type) -> tuple:
    values = block.get(key, ())
    if not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(f"linearisation.{key}: {values!r} must be a non-empty list")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0 or kind(v) != v:
            raise ValueError(f"linearisation.{key}: {v!r} must be a positive {kind.__name__}")
    if len(set(values)) != len(values):
        raise ValueError(f"linearisation.{key}: {values!r} has duplicates")
    return tuple(kind(v) for v in values)


def settings(block: Block) -> Settings:
    """Validate ``block`` (raises ValueError naming the key and the allowed values).

    Keys: ``unit`` (shifted_tanh spec), ``measure`` (training set), ``p_star`` and ``init``
    (``{mean: [w0, h], std: [w0, h]}``: the smooth zero-loss density defining the target, and the
    initial density of the N = ``particles`` trained particles), ``dt``, ``output_dt``, ``t_end``
    (RK4 training), ``fit_loss`` ([upper, lower] loss window of the late-rate fit), ``deltas``,
    ``directions`` (random directions per delta), ``perturb_decades`` (perturbation runs last
    ``decades * ln 10 / (2 theta_min)``), ``grid_sizes``, ``grid_width`` (box half-width in
    standard deviations, shared by the reference nodes), ``reference_points`` (per axis) and
    ``dense_max`` (largest n whose dense R_h is diagonalised to check the identity).
    """
    unit = make_unit(block.get("unit", {}))
    if not isinstance(unit, ShiftedTanhUnit):
        raise ValueError("linearisation.unit.unit: only 'shifted_tanh' (w = (w0, h)) is supported")
    measure = make_measure(block.get("measure", {}))
    p_mean, p_std = _gaussian(block, "p_star")
    init_mean, init_std = _gaussian(block, "init")
    dt = _number(block, "dt")
    output_dt = _number(block, "output_dt")
    t_end = _number(block, "t_end")
    for key, value in (("output_dt", output_dt), ("t_end", t_end)):
        if abs(round(value / dt) * dt - value) > 1e-9 * max(1.0, value):
            raise ValueError(f"linearisation.{key}: {value!r} must be a multiple of dt = {dt}")
    if abs(round(t_end / output_dt) * output_dt - t_end) > 1e-9 * t_end:
        raise ValueError(f"linearisation.t_end: {t_end!r} must be a multiple of output_dt")
    fit = block.get("fit_loss", ())
    if len(fit) != 2 or not 0 < float(fit[1]) < float(fit[0]):
        raise ValueError(f"linearisation.fit_loss: {fit!r} must be [upper, lower] with 0 < lower")
    deltas = _positive_list(block, "deltas", float)
    if max(deltas) >= 1:
        raise ValueError(f"linearisation.deltas: {deltas!r} must lie in (0, 1)")
    grid_sizes = _positive_list(block, "grid_sizes", int)
    if min(grid_sizes) < 4 or len(grid_sizes) < 2:
        raise ValueError(f"linearisation.grid_sizes: {grid_sizes!r} needs >= 2 sizes, each >= 4")
    return Settings(
        unit=unit,
        measure=measure,
        p_mean=p_mean,
        p_std=p_std,
        init_mean=init_mean,
        init_std=init_std,
        particles=_number(block, "particles", int),
        dt=dt,
        t_end=t_end,
        output_dt=output_dt,
        fit_loss=(float(fit[0]), float(fit[1])),
        deltas=deltas,
        directions=_number(block, "directions", int, low=1),
        perturb_decades=_number(block, "perturb_decades"),
        grid_sizes=grid_sizes,
        grid_width=_number(block, "grid_width"),
        reference_points=_number(block, "reference_points", int, low=2),
        dense_max=_number(block, "dense_max", int),
    )


def cells(block: Block) -> list[dict[str, Any]]:
    """One decay cell, one cell per perturbation size delta, one cell per grid size n."""
    s = settings(block)
    out: list[dict[str, Any]] = [{"name": f"decay_N{s.particles}", "kind": "decay"}]
    out += [{"name": f"delta_{d:g}", "kind": "perturb", "delta": d} for d in s.deltas]
    out += [{"name": f"grid_n{n}", "kind": "grid", "n": n} for n in s.grid_sizes]
    return out


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
    mode = {"mode": np.arange(s.measure.size)}
    return xr.Dataset(
        {
            "loss": ("t", traj.loss, attrs("particle loss L(t)", "1", "Eq. 2, simulation")),
            "local_rate": (
                "t",
                traj.dissipation / traj.loss,
                attrs("-d log L/dt = D/L", "1/time", "Eq. 12, simulation"),
            ),
            "theta": ("mode", spec["theta"], attrs("eigenvalues of Theta", "1/time", "Eq. 16")),
            "kappa": (
                "mode",
                spec["kappa"],
                attrs("eigenvalues of the feature Gram matrix (K on p)", "1/time", "Eq. 14"),
            ),
            "rate": ((), rate, attrs("fitted late rate -d log L/dt", "1/time", "simulation")),
            "rate_se": ((), rate_se, attrs("standard error of rate", "1/time", "simulation")),
        },
        coords={"t": traj.t, **mode},
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
        coords={"t": steps, "direction": np.arange(s.directions)},
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
            "theta_grid": ("mode", theta_h, attrs("eigenvalues of Theta_h", "1/time", "Eq. 16")),
            "theta_ref": (
                "mode",
                theta_ref,
                attrs("eigenvalues of Theta, quadrature nodes", "1/time", "Eq. 16"),
            ),
            "identity_error": (
                (),
                identity,
                attrs("max |eig(-R_h) / eig(Theta_h) - 1| (non-zero part)", "1", "Eqs. 15-16"),
            ),
        },
        coords={"mode": np.arange(s.measure.size)},
    )


def run_cell(block: Block, cell: Mapping[str, Any], log: Log) -> xr.Dataset:
    """Compute one cell (see the module docstring)."""
    s = settings(block)
    if cell["kind"] == "decay":
        return _decay_cell(s, log)
    if cell["kind"] == "perturb":
        return _perturb_cell(s, float(cell["delta"]), log)
    if cell["kind"] == "grid":
        return _grid_cell(s, int(cell["n"]), log)
    raise ValueError(f"linearisation cell kind: {cell['kind']!r} is not decay, perturb, grid")


# --------------------------------------------------------------------------------- summary


def _max_finite(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else np.nan


def summarize(block: Block, results: Sequence[xr.Dataset]) -> xr.Dataset:
    """The figure data and the acceptance numbers (rate match, Eq. 18 slope, grid orders)."""
    s = settings(block)
    table = cells(block)
    if len(results) != len(table):
        raise ValueError(f"linearisation: {len(results)} results for {len(table)} cells")
    by_kind = {
        kind: [r for c, r in zip(table, results, strict=True) if c["kind"] == kind]
        for kind in ("decay", "perturb", "grid")
    }
    decay = by_kind["decay"][0].rename({"t": "t_decay"})
    theta_min = float(decay["theta"][0])
    kappa_min = float(decay["kappa"][0])
    rate, rate_se = float(decay["rate"]), float(decay["rate_se"])
    perturb = xr.concat(by_kind["perturb"], dim=xr.DataArray(list(s.deltas), dims="delta"))
    perturb = perturb.rename({"t": "t_perturb"})
    err = perturb["error"]
    err_mean = err.mean("direction")
    err_se = err.std("direction", ddof=1) / np.sqrt(s.directions)
    slope, slope_se, *_ = stats.power_law_fit(s.deltas, err_mean.values)
    grid = xr.concat(
        [r.drop_vars("theta_ref") for r in by_kind["grid"]],
        dim=xr.DataArray(list(s.grid_sizes), dims="n"),
    )
    theta_ref = by_kind["grid"][0]["theta_ref"]
    rel = np.abs(grid["theta_grid"] / theta_ref - 1.0)
    fits = [stats.power_law_fit(s.grid_sizes, rel.values[:, k])[:2] for k in range(s.measure.size)]
    orders = np.array([(-slope, se) for slope, se in fits])
    extreme = np.r_[orders[:2, 0], orders[-2:, 0]]
    out = xr.Dataset(
        {
            "loss_decay": decay["loss"],
            "local_rate": decay["local_rate"],
            "theta": decay["theta"],
            "kappa": decay["kappa"],
            "rate": decay["rate"],
            "rate_se": decay["rate_se"],
            "rate_rel_error": (
                (),
                abs(rate / (2 * theta_min) - 1),
                attrs("|rate / (2 theta_min) - 1|", "1", "Eq. 18 vs simulation"),
            ),
            "rate_rel_error_se": (
                (),
                rate_se / (2 * theta_min),
                attrs("standard error of rate_rel_error", "1", "simulation"),
            ),
            "rate_over_2kappa_min": (
                (),
                rate / (2 * kappa_min),
                attrs("rate / (2 kappa_min): the paper's 'eigenvalues of K'", "1", "Eq. 18 text"),
            ),
            "rate_nearest_kappa_rel": (
                (),
                float(np.min(np.abs(rate / (2 * decay["kappa"].values) - 1))),
                attrs("min_k |rate / (2 kappa_k) - 1|", "1", "Eq. 18 text"),
            ),
            "loss_perturbed": perturb["loss"],
            "loss_eq18": perturb["loss_eq18"],
            "eq18_error": err,
            "eq18_error_mean": (
                "delta",
                err_mean.values,
                attrs("mean over directions of sup_t |L_eq18/L - 1|", "1", "Eq. 18"),
            ),
            "eq18_error_se": ("delta", err_se.values, attrs("standard error", "1", "simulation")),
            "eq18_slope": ((), slope, attrs("d log error / d log delta", "1", "Eq. 18")),
            "eq18_slope_se": ((), slope_se, attrs("standard error of slope", "1", "simulation")),
            "theta_grid": grid["theta_grid"],
            "theta_ref": theta_ref,
            "theta_grid_rel_error": (
                ("n", "mode"),
                rel.values,
                attrs("|theta_h / theta_ref - 1|", "1", "Eq. 16, finite volumes"),
            ),
            "grid_order": (
                "mode",
                orders[:, 0],
                attrs("observed order -d log error / d log n", "1", "Eq. 16"),
            ),
            "grid_order_se": ("mode", orders[:, 1], attrs("standard error", "1", "fit")),
            "grid_order_min": (
                (),
                float(extreme.min()),
                attrs("min order over the 2 smallest and 2 largest eigenvalues", "1", "Eq. 16"),
            ),
            "identity_error": (
                (),
                _max_finite(grid["identity_error"].values),
                attrs("max |eig(-R_h)/eig(Theta_h) - 1| over dense grids", "1", "Eqs. 15-16"),
            ),
        },
        coords={"delta": list(s.deltas), "n": list(s.grid_sizes)},
    )
    return out
