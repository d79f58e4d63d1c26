"""Experiment E3: the small-output-weight regime of linear-output models (paper 002, Eqs. 19-26).

For ``phi(w, x) = w0 phi~(w~, x)`` and small ``w0`` the transport equation (8) keeps ``w~`` fixed
and shifts the density along ``w0`` (Eq. 20): a particle moves as ``w0(t) = w0(0) - s(w~, t)``
with ``ds/dt = u~`` (Eq. 21) and ``u~ = u~_0 - Phi~* Phi~ p^ s`` (Eqs. 22-23). For a particle set
with features ``Phi_mk = phi~(w~_k, x_m)`` and weights ``q_k`` the prediction is solved exactly in
residual space: ``r(t) = z - Phi~ p^ s(t)`` obeys ``dr/dt = -B r`` with
``B = Phi diag(q) Phi^T diag(mu)``, so ``r(t) = exp(-tB) z``, ``L(t) = 1/2 sum_m mu_m r_m^2`` (the
formula after Eq. 24, INCLUDING its constant term, the part of ``z`` outside the range of
``Phi~ p^`` that Eq. 26 drops) and ``s(t) = Phi^T diag(mu) int_0^t r`` (Eq. 24).

The experiment (registry entry ``mf_small_output``) compares this prediction with particle
gradient descent (Eq. 3, alpha = N, RK4) of the SAME particles (q = 1/N, a batch of seeds), in two
parts: (``part: eps``) over the target amplitude ``eps`` with ``w0(0) ~ N(0, (w0_ratio eps)^2)``
-- the relative loss error ``sup_t |L_gd - L_pred| / L_gd(0)`` scales as ``eps^2`` (the w~ motion
is O(eps^2) and changes the O(eps) residual by O(eps^3)); (``part: w0``) at the fixed O(1) target
``target.amplitude`` with ``w0(0) = w0_scale -> 0`` -- the error does not vanish, because the
output weights grow to O(target) during training. Every cell carries both axes: ``eps`` is its
target amplitude and ``w0_scale`` its initial output-weight scale (derived in the other part).

Random streams are seeded (``weightdyn.seeds``) from the values that define the initial particle
shape (unit, width, seeds, w~ law) and not from ``eps`` or ``w0(0)``: every cell scales the same
standard-normal draws (common random numbers), so the per-seed error-vs-eps curves are smooth and
the fitted slope is a per-seed slope averaged over seeds with its standard error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from weightdyn.agreement import Agreement
from weightdyn.experiments import REQUIRED, ConfigError, Figure, LazyPlots, Param
from weightdyn.io import attrs, format_number
from weightdyn.mean_field import params as mfp
from weightdyn.mean_field.model import Measure, Unit, make_target
from weightdyn.mean_field.particles import State, integrate, prediction, uniform_weights
from weightdyn.seeds import generator

plots = LazyPlots("weightdyn.plots.mean_field_small_output")

Params = Mapping[str, Any]

# ------------------------------------------------------------------------------------- theory


def feature_matrix(unit: Unit, W: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``Phi_mk = phi~(w~_k, x_m)``, shape ``(..., M, N)`` (the operator Phi~ on particles)."""
    return np.swapaxes(unit.tilde(W, x), -1, -2)


@dataclass(frozen=True)
class ResidualSpectrum:
    """Eigen-decomposition of ``mu^1/2 B mu^-1/2 = mu^1/2 Phi diag(q) Phi^T mu^1/2`` (PSD).

    ``rates`` (..., M) are the eigenvalues ``zeta_k`` of ``K~ = Phi~* Phi~ p^`` restricted to its
    range (Eq. 26), ``coef`` (..., M) the components of ``mu^1/2 z`` on the eigenvectors ``vecs``
    (..., M, M), ``null`` (..., M) marks the zero eigenvalues.
    """

    rates: np.ndarray
    vecs: np.ndarray
    coef: np.ndarray
    null: np.ndarray
    features: np.ndarray
    sqrt_mu: np.ndarray


def residual_spectrum(
    features: np.ndarray, q: np.ndarray, measure: Measure, z: np.ndarray
) -> ResidualSpectrum:
    """The spectral data of ``dr/dt = -B r``, ``B = Phi diag(q) Phi^T diag(mu)`` (Eqs. 23-24).

    Computed from the SVD of ``G = mu^1/2 Phi q^1/2`` (``B`` is similar to ``G G^T``), so that small
    rates keep full relative accuracy; ``null`` marks singular values at round-off level
    (``<= M eps_machine max sigma``): the exact null space, whose component of z is the floor.
    """
    sqrt_mu = np.sqrt(measure.weights)
    G = sqrt_mu[:, None] * features * np.sqrt(q)[..., None, :]
    vecs, sigma, _ = np.linalg.svd(G)
    m = G.shape[-2]
    sigma = np.concatenate([sigma, np.zeros((*sigma.shape[:-1], m - sigma.shape[-1]))], axis=-1)
    null = sigma <= m * np.finfo(float).eps * sigma.max(-1, keepdims=True)
    coef = np.einsum("...mk,...m->...k", vecs, sqrt_mu * z)
    return ResidualSpectrum(np.where(null, 0.0, sigma**2), vecs, coef, null, features, sqrt_mu)


def predicted_residual(spec: ResidualSpectrum, t: np.ndarray) -> np.ndarray:
    """``r(t) = exp(-tB) z``: the residual ``f^ - f`` of the small-w0 dynamics, ``(T, ..., M)``."""
    decay = np.exp(-np.multiply.outer(t, spec.rates)) * spec.coef
    return np.einsum("...mk,t...k->t...m", spec.vecs, decay) / spec.sqrt_mu


def predicted_loss(spec: ResidualSpectrum, t: np.ndarray) -> np.ndarray:
    """``L(t) = 1/2 ||z - Phi~ p^ s(t)||_mu^2`` (after Eq. 24, floor included), ``(T, ...)``."""
    return 0.5 * (np.exp(-2.0 * np.multiply.outer(t, spec.rates)) * spec.coef**2).sum(-1)


def loss_floor(spec: ResidualSpectrum) -> np.ndarray:
    """The constant term after Eq. 24: ``1/2 ||(1 - Pi) z||_mu^2``, z outside range(Phi~ p^)."""
    return 0.5 * np.where(spec.null, spec.coef**2, 0.0).sum(-1)


def predicted_loss_eq26(spec: ResidualSpectrum, t: np.ndarray) -> np.ndarray:
    """Eq. 26 as printed (``zeta_k > 0`` only): the predicted loss minus its constant floor."""
    return predicted_loss(spec, t) - loss_floor(spec)


def predicted_shift(spec: ResidualSpectrum, t: np.ndarray) -> np.ndarray:
    """``s(w~_k, t) = Phi^T diag(mu) int_0^t r`` (Eq. 24 / 25), shape ``(T, ..., N)``.

    The null-space term ``t P_0 u~_0`` of Eq. 24 vanishes: ``Phi~^T mu`` annihilates the part of
    ``z`` outside the range, so those components contribute nothing.
    """
    rates = spec.rates
    safe = np.where(spec.null, 1.0, rates)
    grown = np.where(spec.null, 0.0, -np.expm1(-np.multiply.outer(t, rates)) / safe) * spec.coef
    integral = np.einsum("...mk,t...k->t...m", spec.vecs, grown) * spec.sqrt_mu
    return np.einsum("...mk,t...m->t...k", spec.features, integral)


# --------------------------------------------------------------------------------- experiment

PARTS = ("eps", "w0")


def _positive(name: str, long_name: str, kind: type = float, minimum: float = 0.0) -> Param:
    return Param(name, kind, REQUIRED, long_name, minimum=minimum, exclusive_minimum=True)


PARAMS: tuple[Param, ...] = (
    mfp.part(PARTS, "sweep of the target amplitude eps, or of w0(0) at a fixed target"),
    Param(
        "eps", float, None, "target amplitude eps", axis=True, minimum=0.0, exclusive_minimum=True
    ),
    Param(
        "w0_scale",
        float,
        None,
        "initial output-weight scale w0(0)",
        axis=True,
        minimum=0.0,
        exclusive_minimum=True,
    ),
    mfp.dict_param("unit", "unit {kind: tanh | shifted_tanh[, beta]}"),
    mfp.dict_param("target", "target f {kind: sin | tanh_bumps, amplitude} (w0 part)"),
    mfp.dict_param("measure", "input measure mu {kind: gauss_legendre | grid, size: M}"),
    Param("particles", int, REQUIRED, "particles per network N", minimum=1),
    Param("seeds", int, REQUIRED, "independent networks", minimum=2),
    mfp.dict_param("wtilde", "law N(mean, diag(std^2)) of the inner weights w~"),
    _positive("w0_ratio", "w0(0) scale / eps in the eps part"),
    _positive("eps_fit_max", "largest eps of the slope fits"),
    _positive("t_end", "final time"),
    _positive("dt", "RK4 time step"),
    Param("n_times", int, REQUIRED, "output times linspace(0, t_end, n_times)", minimum=2),
)


@dataclass(frozen=True)
class Problem:
    """The validated unit, input measure and inner-weight law of a small-output sweep."""

    unit: Unit
    measure: Measure
    wtilde_mean: np.ndarray
    wtilde_std: np.ndarray


def problem(params: Params) -> Problem:
    """Validate the nested settings (ConfigError naming the key and what is allowed)."""
    unit = mfp.unit(params["unit"])
    measure = mfp.measure(params["measure"])
    mfp.target(params["target"])
    mfp.number(params["target"]["amplitude"], "target.amplitude")
    mean, std = mfp.gaussian(params["wtilde"], "wtilde", unit.names[1:])
    return Problem(unit, measure, mean, std)


def derive(params: dict[str, Any]) -> dict[str, Any]:
    """Check the settings; an ``eps`` cell gets ``w0_scale = w0_ratio eps``, a ``w0`` cell
    ``eps = target.amplitude``; ``amplitude`` is the cell's target amplitude."""
    problem(params)
    t_end, dt, n_times = params["t_end"], params["dt"], params["n_times"]
    steps = t_end / dt / (n_times - 1)
    if steps < 1 or abs(steps - round(steps)) > 1e-9 * steps:
        raise ConfigError(
            f"t_end: {t_end!r} is not allowed; allowed: a multiple of dt * (n_times - 1) = "
            f"{dt * (n_times - 1)!r} (output times on the step grid)"
        )
    if params["part"] == "eps":
        mfp.require(params, ("eps",), "eps")
        params["w0_scale"] = float(params["w0_ratio"]) * float(params["eps"])
    else:
        mfp.require(params, ("w0_scale",), "w0")
        params["eps"] = float(params["target"]["amplitude"])
    params["amplitude"] = float(params["eps"])
    return params


def _stream_params(params: Params) -> dict[str, object]:
    """The values that define the initial particle shape (not eps, not w0(0)): the seed source."""
    unit = params["unit"]
    return {
        "unit": unit["kind"],
        "beta": float(unit["beta"]) if unit["kind"] == "shifted_tanh" else 0.0,
        "particles": int(params["particles"]),
        "seeds": int(params["seeds"]),
        "wtilde_mean": ",".join(format_number(v) for v in params["wtilde"]["mean"]),
        "wtilde_std": ",".join(format_number(v) for v in params["wtilde"]["std"]),
    }


def initial_particles(params: Params, w0_scale: float) -> np.ndarray:
    """``W(0)`` ``(seeds, N, d)``: ``w~ ~ N(mean, diag(std^2))``, ``w0 ~ N(0, w0_scale^2)``."""
    p = problem(params)
    rng = generator("small_output_init", _stream_params(params))
    draws = rng.standard_normal((int(params["seeds"]), int(params["particles"]), p.unit.dim))
    return np.concatenate(
        [w0_scale * draws[..., :1], p.wtilde_mean + p.wtilde_std * draws[..., 1:]], axis=-1
    )


def _se(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return values.std(axis=axis, ddof=1) / np.sqrt(values.shape[axis])


def _compare(p: Problem, W0: np.ndarray, f_values: np.ndarray, t: np.ndarray, dt: float):
    """Gradient descent of ``W0`` (RK4) and the small-w0 prediction for the same particles."""
    q = uniform_weights(W0)
    traj = integrate(p.unit, State(W0, q), p.measure, f_values, t, dt, "rk4", keep_states=True)
    W = np.stack([s.W for s in traj.states])  # (T, seeds, N, d)
    z = prediction(p.unit, W0, q, p.measure.x) - f_values
    spec = residual_spectrum(feature_matrix(p.unit, W0, p.measure.x), q, p.measure, z)
    return traj, W, q, spec


def run_cell(params: Params, progress: Callable[[str], None]) -> xr.Dataset:
    """Gradient descent of one particle batch vs the small-w0 prediction for the same particles."""
    p = problem(params)
    target = {**params["target"], "amplitude": params["amplitude"]}
    f_values = make_target(target)(p.measure.x)
    W0 = initial_particles(params, float(params["w0_scale"]))
    t = np.linspace(0.0, float(params["t_end"]), int(params["n_times"]))
    name = f"{params['part']} eps={params['eps']:g} w0={params['w0_scale']:g}"
    progress(f"{name}: {W0.shape[0]} seeds x {W0.shape[1]} particles, RK4 to t = {t[-1]:g}")
    traj, W, q, spec = _compare(p, W0, f_values, t, float(params["dt"]))
    loss_pred = predicted_loss(spec, t)
    loss_eq26 = predicted_loss_eq26(spec, t)
    error = np.abs(traj.loss - loss_pred).max(0) / traj.loss[0]
    error_eq26 = np.abs(traj.loss - loss_eq26).max(0) / traj.loss[0]
    shift_gd = W0[..., 0] - W[-1, ..., 0]
    shift_pred = predicted_shift(spec, t[-1:])[0]
    shift_error = np.abs(shift_gd - shift_pred).max(-1) / np.abs(shift_pred).max(-1)
    disp = np.sqrt((q * ((W[..., 1:] - W0[..., 1:]) ** 2).sum(-1)).sum(-1)).max(0)
    w0_final = np.sqrt((q * W[-1, ..., 0] ** 2).sum(-1))
    progress(
        f"{name}: loss error {error.mean():.3e} +- {_se(error):.1e}, "
        f"w~ displacement {disp.mean():.3e}, final rms w0 {w0_final.mean():.3g}"
    )
    sim, eq = "simulation", "Eqs. 23-24 (residual space), formula after Eq. 24"
    seed_t, seed_n = ("t", "seed"), ("seed", "particle")
    data = {
        "loss_gd": (seed_t, traj.loss, attrs("loss L (gradient descent)", "1", sim)),
        "loss_pred": (seed_t, loss_pred, attrs("loss L, small-w0 prediction", "1", eq)),
        "loss_eq26": (seed_t, loss_eq26, attrs("loss L, Eq. 26 (no floor)", "1", "Eq. 26")),
        "loss_floor": ("seed", loss_floor(spec), attrs("constant loss floor", "1", "after Eq. 24")),
        "loss_error": ("seed", error, attrs("sup_t |L_gd - L_pred| / L_gd(0)", "1",
                                            "simulation vs Eq. 24")),
        "loss_error_eq26": ("seed", error_eq26, attrs("sup_t |L_gd - L_eq26| / L_gd(0)", "1",
                                                      "simulation vs Eq. 26")),
        "shift_gd": (seed_n, shift_gd, attrs("shift w0(0) - w0(t_end)", "1", sim)),
        "shift_pred": (seed_n, shift_pred, attrs("predicted shift s(w~, t_end)", "1", "Eq. 24")),
        "shift_error": ("seed", shift_error, attrs("max_k |s_gd - s_pred| / max_k |s_pred| at "
                                                   "t_end", "1", "simulation vs Eq. 24")),
        "wtilde_displacement": ("seed", disp, attrs("sup_t rms_q |w~(t) - w~(0)|", "1",
                                                    "simulation (Eq. 20: w~ fixed)")),
        "w0_rms_final": ("seed", w0_final, attrs("rms_q w0(t_end)", "1", sim)),
    }  # fmt: skip
    ds = xr.Dataset(
        {k: xr.DataArray(v, dims=d, attrs=a) for k, (d, v, a) in data.items()},
        coords={"t": ("t", t, attrs("time", "1", "Eq. 3"))},
    )
    ds.attrs.update(
        {"amplitude": float(params["amplitude"]), "w0_scale": float(params["w0_scale"])}
    )
    return ds


def fitted_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Mean over seeds of the least-squares slope of ``log y`` vs ``log x`` and its standard error.

    ``y`` has shape ``(len(x), seeds)``; the seeds share their random draws across ``x`` (common
    random numbers), so the per-seed slopes are independent estimates of one exponent.
    """
    lx, ly = np.log(x), np.log(y)
    dx = lx - lx.mean()
    slopes = (dx[:, None] * (ly - ly.mean(0))).sum(0) / (dx * dx).sum()
    return float(slopes.mean()), float(_se(slopes))


def _stack(cells: Sequence[tuple[Params, xr.Dataset]], dim: str, key: str) -> xr.Dataset:
    """The cells of one part concatenated along its axis (``eps`` or ``w0_scale``), sorted."""
    out = xr.concat([ds for _, ds in cells], dim=dim, combine_attrs="override")
    label = "target amplitude eps" if dim == "eps" else "initial output-weight scale w0(0)"
    coord = xr.DataArray([p[key] for p, _ in cells], dims=dim, attrs=attrs(label, "1", "config"))
    return out.assign_coords({dim: coord}).sortby(dim)


def _seed_mean(da: xr.DataArray, label: str) -> tuple[xr.DataArray, xr.DataArray]:
    mean = da.mean("seed").assign_attrs(attrs(f"{label}, mean over seeds", "1", da.attrs["source"]))
    se = (da.std("seed", ddof=1) / np.sqrt(da.sizes["seed"])).assign_attrs(
        attrs(f"{label}, standard error over seeds", "1", da.attrs["source"])
    )
    return mean, se


def _slopes(eps_ds: xr.Dataset, eps_fit_max: float) -> dict[str, tuple]:
    """Per-seed log-log slopes in eps (eps <= eps_fit_max) of the errors and the w~ motion."""
    out = {}
    fit = eps_ds["eps"].values <= eps_fit_max
    source = "per-seed log-log fit over eps <= eps_fit_max"
    for name in ("loss_error", "shift_error", "wtilde_displacement"):
        label = eps_ds[name].attrs["long_name"]
        x, y = eps_ds["eps"].values[fit], eps_ds[name].values[fit]
        slope, se = fitted_slope(x, y)
        intercept = np.log(y.mean(-1)).mean() - slope * np.log(x).mean()
        out[f"slope_{name}"] = ((), slope, attrs(f"slope d log({label}) / d log eps", "1", source))
        out[f"slope_{name}_se"] = ((), se, attrs(f"standard error of slope_{name}", "1", source))
        out[f"intercept_{name}"] = ((), float(intercept), attrs(
            f"log-intercept of the seed-mean {label} at slope_{name}", "1", source))  # fmt: skip
    return out


PER_SEED = {
    "eps": ("loss_error", "loss_error_eq26", "shift_error", "wtilde_displacement", "w0_rms_final"),
    "w0": ("loss_error", "wtilde_displacement", "w0_rms_final"),
}


def summarize(
    datasets: Sequence[xr.Dataset], params: Sequence[Params], settings: Params
) -> xr.Dataset:
    """Both parts on the ``eps`` and ``w0_scale`` axes, the fitted slopes and their s.e."""
    groups = mfp.by_part(datasets, params)
    fit_max = float(settings["eps_fit_max"])
    fitted = [p for p, _ in groups.get("eps", []) if p["eps"] <= fit_max]
    if len(fitted) < 2:
        raise ConfigError(
            f"eps_fit_max: {fit_max!r} leaves {len(fitted)} < 2 eps values (part 'eps') to fit"
        )
    mfp.need_cells(groups, "w0", 1, "the fixed-target sweep")
    eps_ds = _stack(groups["eps"], "eps", "eps")
    w0_ds = _stack(groups["w0"], "w0_scale", "w0_scale")
    out = xr.Dataset()
    for name in ("loss_gd", "loss_pred", "loss_eq26", "loss_floor", "shift_gd", "shift_pred"):
        out[f"eps_{name}"] = eps_ds[name]
    for name in ("loss_gd", "loss_pred"):
        out[f"w0_{name}"] = w0_ds[name]
    for prefix, ds in (("eps", eps_ds), ("w0", w0_ds)):
        for name in PER_SEED[prefix]:
            label = ds[name].attrs["long_name"]
            out[f"{prefix}_{name}"], out[f"{prefix}_{name}_se"] = _seed_mean(ds[name], label)
    floor = eps_ds["loss_floor"] / eps_ds["loss_gd"].isel(t=0, drop=True)
    floor.attrs = attrs("loss floor / L(0)", "1", "constant term after Eq. 24")
    out["eps_floor_fraction"], out["eps_floor_fraction_se"] = _seed_mean(floor, "floor / L(0)")
    amplitude = float(settings["target"]["amplitude"])
    growth = w0_ds["w0_rms_final"] / amplitude
    growth.attrs = attrs("rms w0(t_end) / target amplitude", "1", "simulation")
    out["w0_growth"], out["w0_growth_se"] = _seed_mean(growth, "rms w0(t_end) / amplitude")
    out = out.assign(_slopes(eps_ds, fit_max))
    measure = settings["measure"]
    out.attrs.update({
        "unit": settings["unit"]["kind"], "target": settings["target"]["kind"],
        "particles": int(settings["particles"]), "seeds": int(settings["seeds"]),
        "measure": f"{measure['kind']}({measure['size']})", "amplitude": amplitude,
        "w0_ratio": float(settings["w0_ratio"]), "eps_fit_max": fit_max,
        "t_end": float(settings["t_end"]),
    })  # fmt: skip
    return out


def agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """The E3 rows: the loss against Eq. 24, the eps-exponents of the loss and shift errors."""
    rows = [
        mfp.row(label, "gradient-descent loss vs Eq. 24 with its floor (mean over seeds, all eps)",
                "Eqs. 19-26", ds["eps_loss_gd"].mean("seed"), ds["eps_loss_pred"].mean("seed")),
    ]  # fmt: skip
    for name, what in (
        ("slope_loss_error", "Eq. 24 loss error"),
        ("slope_shift_error", "shift error of s(w~, t)"),
    ):
        rows.append(
            mfp.exponent(label, f"exponent of the {what} in eps vs 2", "Eqs. 20-24", ds, name, 2.0)
        )
    return rows


FIGURES = {
    "loss_error": Figure(
        plots.loss_error,
        "E3 (paper 002, Eqs. 19-26): (a) relative loss error of the small-w0 prediction (Eq. 24 "
        "with its floor, Eq. 26 without) against the target amplitude eps, with the fitted "
        ":math:`\\varepsilon^2` law; (b) at a fixed target against :math:`w_0(0)`.",
        source="summary",
    ),
    "loss_curves": Figure(
        plots.loss_curves,
        "E3 (paper 002, Eqs. 24, 26): :math:`L(t)/\\varepsilon^2` of gradient descent (markers, "
        "+-1 s.e.) against Eq. 24 with its floor (lines) and Eq. 26 (dotted).",
        source="summary",
    ),
    "shifts": Figure(
        plots.shifts,
        "E3 (paper 002, Eqs. 20-25): (a) measured against predicted shifts "
        ":math:`s(\\tilde w_k, t)` along :math:`w_0`; (b) the displacement of :math:`\\tilde w` "
        "and the shift error against eps.",
        source="summary",
    ),
}

EXPERIMENT = mfp.experiment(
    "mf_small_output",
    "E3: the small-output-weight regime of linear-output models",
    "paper 002 Eqs. 19-26",
    sys.modules[__name__],
)
