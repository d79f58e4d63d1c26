"""Experiment E3: the small-output-weight regime of linear-output models (paper 002, Eqs. 19-26).

For ``phi(w, x) = w0 phi~(w~, x)`` and small ``w0`` the transport equation (8) keeps ``w~`` fixed
and shifts the density along ``w0`` (Eq. 20): a particle moves as ``w0(t) = w0(0) - s(w~, t)``
with ``ds/dt = u~`` (Eq. 21) and ``u~ = u~_0 - Phi~* Phi~ p^ s`` (Eqs. 22-23). For a particle set
with features ``Phi_mk = phi~(w~_k, x_m)`` and weights ``q_k`` the prediction is solved exactly in
residual space: ``r(t) = z - Phi~ p^ s(t)`` obeys ``dr/dt = -B r`` with
``B = Phi diag(q) Phi^T diag(mu)``, so ``r(t) = exp(-tB) z``, ``L(t) = 1/2 sum_m mu_m r_m^2`` (the
formula after Eq. 24, INCLUDING its constant term, the part of ``z`` outside the range of
``Phi~ p^`` that Eq. 26 drops) and ``s(t) = Phi^T diag(mu) int_0^t r`` (Eq. 24).

The experiment compares this prediction with particle gradient descent (Eq. 3, alpha = N, RK4) of
the SAME particles (q = 1/N, a batch of seeds): (1) over the target amplitude ``eps`` with
``w0(0) ~ N(0, (c eps)^2)`` -- the relative loss error ``sup_t |L_gd - L_pred| / L_gd(0)`` scales as
``eps^2`` (the w~ motion is O(eps^2) and changes the O(eps) residual by O(eps^3)); (2) at a fixed
O(1) target with ``w0(0) -> 0`` -- the error does not vanish, because the output weights grow to
O(target) during training.

Random streams are seeded (``weightdyn.seeds``) from the values that define the initial particle
shape (unit, width, seeds, w~ law) and not from ``eps`` or ``w0(0)``: every cell scales the same
standard-normal draws (common random numbers), so the per-seed error-vs-eps curves are smooth and
the fitted slope is a per-seed slope averaged over seeds with its standard error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from weightdyn.io import attrs, format_number
from weightdyn.mean_field.model import Measure, Unit, make_measure, make_target, make_unit
from weightdyn.mean_field.particles import State, integrate, prediction, uniform_weights
from weightdyn.plots.mean_field_small_output import FIGURES, plot
from weightdyn.seeds import generator

__all__ = [
    "FIGURES",
    "ResidualSpectrum",
    "cells",
    "feature_matrix",
    "fitted_slope",
    "initial_particles",
    "loss_floor",
    "plot",
    "predicted_loss",
    "predicted_loss_eq26",
    "predicted_residual",
    "predicted_shift",
    "residual_spectrum",
    "run_cell",
    "summarize",
    "validate",
]

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

SWEEPS = ("eps", "w0")
UNITS = ("tanh", "shifted_tanh")
TARGETS = ("sin", "tanh_bumps")
MEASURES = ("gauss_legendre", "grid")


def _positive_list(block: Mapping[str, Any], key: str) -> list[float]:
    values = block.get(key)
    if (
        not isinstance(values, Sequence)
        or isinstance(values, str)
        or not values
        or not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in values)
    ):
        raise ValueError(f"small_output.{key}: {values!r} must be a non-empty list of numbers > 0")
    if len(set(values)) != len(values):
        raise ValueError(f"small_output.{key}: {values!r} has duplicate values")
    return [float(v) for v in values]


def _choice(block: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = block.get(key)
    if value not in allowed:
        raise ValueError(f"small_output.{key}: {value!r} is not one of {list(allowed)}")
    return value


def _number(block: Mapping[str, Any], key: str, low: float, integer: bool = False) -> float:
    value = block.get(key)
    kinds = int if integer else int | float
    if not isinstance(value, kinds) or isinstance(value, bool) or not value >= low:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"small_output.{key}: {value!r} must be {kind} >= {low}")
    return value


def _wtilde_law(block: Mapping[str, Any], unit: Unit) -> tuple[np.ndarray, np.ndarray]:
    law = []
    for key, low in (("wtilde_mean", -np.inf), ("wtilde_std", 0.0)):
        values = block.get(key)
        if (
            not isinstance(values, Sequence)
            or len(values) != unit.dim - 1
            or not all(isinstance(v, int | float) and v > low for v in values)
        ):
            raise ValueError(
                f"small_output.{key}: {values!r} must list {unit.dim - 1} numbers "
                f"(one per w~ = {unit.names[1:]}){' > 0' if low == 0 else ''}"
            )
        law.append(np.asarray(values, dtype=float))
    return law[0], law[1]


def validate(block: Mapping[str, Any]) -> None:
    """Raise ValueError naming the offending key of the experiment's config block."""
    allowed = {
        "unit", "beta", "target", "measure", "measure_size", "particles", "seeds",
        "wtilde_mean", "wtilde_std", "w0_ratio", "eps", "eps_fit_max", "amplitude",
        "w0_scales", "t_end", "dt", "n_times",
    }  # fmt: skip
    unknown = sorted(set(block) - allowed)
    if unknown:
        raise ValueError(f"small_output: unknown keys {unknown}; allowed {sorted(allowed)}")
    unit = make_unit({"unit": _choice(block, "unit", UNITS), "beta": block.get("beta", 4.0)})
    if block["unit"] == "shifted_tanh":
        _number(block, "beta", 1e-12)
    _choice(block, "target", TARGETS)
    _choice(block, "measure", MEASURES)
    _number(block, "measure_size", 2, integer=True)
    _number(block, "particles", 1, integer=True)
    _number(block, "seeds", 2, integer=True)
    _wtilde_law(block, unit)
    _number(block, "w0_ratio", 1e-12)
    eps = _positive_list(block, "eps")
    fit_max = _number(block, "eps_fit_max", 1e-12)
    if sum(e <= fit_max for e in eps) < 2:
        raise ValueError(f"small_output.eps_fit_max: {fit_max!r} leaves < 2 eps values to fit")
    _number(block, "amplitude", 1e-12)
    _positive_list(block, "w0_scales")
    dt = _number(block, "dt", 1e-12)
    t_end = _number(block, "t_end", dt)
    n_times = _number(block, "n_times", 2, integer=True)
    steps = t_end / dt / (n_times - 1)
    if abs(steps - round(steps)) > 1e-9 * steps:
        raise ValueError(
            f"small_output.t_end: {t_end!r} must be a multiple of dt * (n_times - 1) = "
            f"{dt * (n_times - 1)!r} (output times on the step grid)"
        )


def cells(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One cell per target amplitude ``eps`` (sweep 1) and per initial output scale (sweep 2)."""
    validate(block)
    out = [
        {"name": f"eps{format_number(e)}", "sweep": "eps", "amplitude": float(e),
         "w0_scale": float(block["w0_ratio"]) * float(e)}
        for e in block["eps"]
    ]  # fmt: skip
    out += [
        {"name": f"w0{format_number(s)}", "sweep": "w0", "amplitude": float(block["amplitude"]),
         "w0_scale": float(s)}
        for s in block["w0_scales"]
    ]  # fmt: skip
    return out


def _stream_params(block: Mapping[str, Any]) -> dict[str, object]:
    """The values that define the initial particle shape (not eps, not w0(0)): the seed source."""
    return {
        "unit": block["unit"],
        "beta": float(block.get("beta", 0.0)) if block["unit"] == "shifted_tanh" else 0.0,
        "particles": int(block["particles"]),
        "seeds": int(block["seeds"]),
        "wtilde_mean": ",".join(format_number(v) for v in block["wtilde_mean"]),
        "wtilde_std": ",".join(format_number(v) for v in block["wtilde_std"]),
    }


def initial_particles(block: Mapping[str, Any], w0_scale: float) -> np.ndarray:
    """``W(0)`` ``(seeds, N, d)``: ``w~ ~ N(mean, diag(std^2))``, ``w0 ~ N(0, w0_scale^2)``."""
    unit = make_unit(block)
    mean, std = _wtilde_law(block, unit)
    rng = generator("small_output_init", _stream_params(block))
    draws = rng.standard_normal((int(block["seeds"]), int(block["particles"]), unit.dim))
    return np.concatenate([w0_scale * draws[..., :1], mean + std * draws[..., 1:]], axis=-1)


def _se(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return values.std(axis=axis, ddof=1) / np.sqrt(values.shape[axis])


def run_cell(
    block: Mapping[str, Any], cell: Mapping[str, Any], log: Callable[[str], None]
) -> xr.Dataset:
    """Gradient descent of one particle batch vs the small-w0 prediction for the same particles."""
    validate(block)
    unit = make_unit(block)
    measure = make_measure({"kind": block["measure"], "size": block["measure_size"]})
    f_values = make_target({"kind": block["target"], "amplitude": cell["amplitude"]})(measure.x)
    W0 = initial_particles(block, float(cell["w0_scale"]))
    q = uniform_weights(W0)
    t = np.linspace(0.0, float(block["t_end"]), int(block["n_times"]))
    log(f"{cell['name']}: {W0.shape[0]} seeds x {W0.shape[1]} particles, RK4 to t = {t[-1]:g}")
    traj = integrate(
        unit, State(W0, q), measure, f_values, t, float(block["dt"]), "rk4", keep_states=True
    )
    W = np.stack([s.W for s in traj.states])  # (T, seeds, N, d)
    z = prediction(unit, W0, q, measure.x) - f_values
    spec = residual_spectrum(feature_matrix(unit, W0, measure.x), q, measure, z)
    loss_pred = predicted_loss(spec, t)
    loss_eq26 = predicted_loss_eq26(spec, t)
    error = np.abs(traj.loss - loss_pred).max(0) / traj.loss[0]
    error_eq26 = np.abs(traj.loss - loss_eq26).max(0) / traj.loss[0]
    shift_gd = W0[..., 0] - W[-1, ..., 0]
    shift_pred = predicted_shift(spec, t[-1:])[0]
    shift_error = np.abs(shift_gd - shift_pred).max(-1) / np.abs(shift_pred).max(-1)
    disp = np.sqrt((q * ((W[..., 1:] - W0[..., 1:]) ** 2).sum(-1)).sum(-1)).max(0)
    w0_final = np.sqrt((q * W[-1, ..., 0] ** 2).sum(-1))
    log(
        f"{cell['name']}: loss error {error.mean():.3e} +- {_se(error):.1e}, "
        f"w~ displacement {disp.mean():.3e}, final rms w0 {w0_final.mean():.3g}"
    )
    sim, eq = "simulation", "Eqs. 23-24 (residual space), formula after Eq. 24"
    seed_t, seed_n = ("t", "seed"), ("seed", "particle")
    data = {
        "loss_gd": (seed_t, traj.loss, attrs("loss L (gradient descent)", "1", sim)),
        "loss_pred": (seed_t, loss_pred, attrs("loss L, small-w0 prediction", "1", eq)),
        "loss_eq26": (seed_t, loss_eq26, attrs("loss L, Eq. 26 (no floor)", "1", "Eq. 26")),
        "loss_floor": ("seed", loss_floor(spec), attrs("constant loss floor", "1", "after Eq. 24")),
        "loss_error": (
            "seed",
            error,
            attrs("sup_t |L_gd - L_pred| / L_gd(0)", "1", "simulation vs Eq. 24"),
        ),
        "loss_error_eq26": (
            "seed",
            error_eq26,
            attrs("sup_t |L_gd - L_eq26| / L_gd(0)", "1", "simulation vs Eq. 26"),
        ),
        "shift_gd": (seed_n, shift_gd, attrs("shift w0(0) - w0(t_end)", "1", sim)),
        "shift_pred": (seed_n, shift_pred, attrs("predicted shift s(w~, t_end)", "1", "Eq. 24")),
        "shift_error": (
            "seed",
            shift_error,
            attrs("max_k |s_gd - s_pred| / max_k |s_pred| at t_end", "1", "simulation vs Eq. 24"),
        ),
        "wtilde_displacement": (
            "seed",
            disp,
            attrs("sup_t rms_q |w~(t) - w~(0)|", "1", "simulation (Eq. 20: w~ fixed)"),
        ),
        "w0_rms_final": ("seed", w0_final, attrs("rms_q w0(t_end)", "1", sim)),
    }
    ds = xr.Dataset(
        {k: xr.DataArray(v, dims=d, attrs=a) for k, (d, v, a) in data.items()},
        coords={"t": ("t", t, attrs("time", "1", "Eq. 3"))},
    )
    ds.attrs.update({"amplitude": float(cell["amplitude"]), "w0_scale": float(cell["w0_scale"])})
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


def _stack(
    plan: Sequence[Mapping[str, Any]], results: Sequence[xr.Dataset], sweep: str
) -> xr.Dataset:
    """The cells of one sweep concatenated along its axis (``eps`` or ``w0_scale``), sorted."""
    dim, key = {"eps": ("eps", "amplitude"), "w0": ("w0_scale", "w0_scale")}[sweep]
    pairs = [(c[key], r) for c, r in zip(plan, results, strict=True) if c["sweep"] == sweep]
    out = xr.concat([r for _, r in pairs], dim=dim, combine_attrs="override")
    label = "target amplitude eps" if sweep == "eps" else "initial output-weight scale w0(0)"
    coord = xr.DataArray([v for v, _ in pairs], dims=dim, attrs=attrs(label, "1", "config"))
    return out.assign_coords({dim: coord}).sortby(dim)


def _seed_mean(da: xr.DataArray, label: str) -> tuple[xr.DataArray, xr.DataArray]:
    mean = da.mean("seed").assign_attrs(attrs(f"{label}, mean over seeds", "1", da.attrs["source"]))
    se = (da.std("seed", ddof=1) / np.sqrt(da.sizes["seed"])).assign_attrs(
        attrs(f"{label}, standard error over seeds", "1", da.attrs["source"])
    )
    return mean, se


def summarize(block: Mapping[str, Any], results: Sequence[xr.Dataset]) -> xr.Dataset:
    """Both sweeps on the ``eps`` and ``w0_scale`` axes, the fitted slopes and their s.e."""
    plan = cells(block)
    eps_ds, w0_ds = _stack(plan, results, "eps"), _stack(plan, results, "w0")
    out = xr.Dataset()
    for name in ("loss_gd", "loss_pred", "loss_eq26", "loss_floor", "shift_gd", "shift_pred"):
        out[f"eps_{name}"] = eps_ds[name]
    for name in ("loss_gd", "loss_pred"):
        out[f"w0_{name}"] = w0_ds[name]
    per_seed = {
        "eps": (
            "loss_error",
            "loss_error_eq26",
            "shift_error",
            "wtilde_displacement",
            "w0_rms_final",
        ),
        "w0": ("loss_error", "wtilde_displacement", "w0_rms_final"),
    }
    for prefix, ds in (("eps", eps_ds), ("w0", w0_ds)):
        for name in per_seed[prefix]:
            label = ds[name].attrs["long_name"]
            out[f"{prefix}_{name}"], out[f"{prefix}_{name}_se"] = _seed_mean(ds[name], label)
    floor = eps_ds["loss_floor"] / eps_ds["loss_gd"].isel(t=0, drop=True)
    floor.attrs = attrs("loss floor / L(0)", "1", "constant term after Eq. 24")
    out["eps_floor_fraction"], out["eps_floor_fraction_se"] = _seed_mean(floor, "floor / L(0)")
    growth = w0_ds["w0_rms_final"] / float(block["amplitude"])
    growth.attrs = attrs("rms w0(t_end) / target amplitude", "1", "simulation")
    out["w0_growth"], out["w0_growth_se"] = _seed_mean(growth, "rms w0(t_end) / amplitude")
    fit = eps_ds["eps"].values <= float(block["eps_fit_max"])
    for name in ("loss_error", "shift_error", "wtilde_displacement"):
        label = eps_ds[name].attrs["long_name"]
        x, y = eps_ds["eps"].values[fit], eps_ds[name].values[fit]
        slope, se = fitted_slope(x, y)
        intercept = np.log(y.mean(-1)).mean() - slope * np.log(x).mean()
        source = "per-seed log-log fit over eps <= eps_fit_max"
        out[f"slope_{name}"] = ((), slope, attrs(f"slope d log({label}) / d log eps", "1", source))
        out[f"slope_{name}_se"] = ((), se, attrs(f"standard error of slope_{name}", "1", source))
        out[f"intercept_{name}"] = (
            (),
            float(intercept),
            attrs(f"log-intercept of the seed-mean {label} at slope_{name}", "1", source),
        )
    out.attrs.update({
        "unit": block["unit"], "target": block["target"], "particles": int(block["particles"]),
        "seeds": int(block["seeds"]), "measure": f"{block['measure']}({block['measure_size']})",
        "amplitude": float(block["amplitude"]), "w0_ratio": float(block["w0_ratio"]),
        "eps_fit_max": float(block["eps_fit_max"]), "t_end": float(block["t_end"]),
    })  # fmt: skip
    return out
