"""The single-layer stationary-covariance experiment (paper 000 Sec. II, Fig. 4, App. C; beyond it).

One cell is one teacher-student data set (N, P, sigma_eps2, data_seed; Eq. 1), one learning rate,
batch size and sampling mode, one ``dynamics`` and one start (``init``). It holds, in ONE
dataset, the theory (Eqs. 4-34: noise covariance C of Eq. 17, the Lyapunov covariance of
Eq. 30, detailed balance Eq. 33, isotropic Eq. 34, and the exact discrete-time second moment of
SGD, beyond Eq. 30) beside the simulated stationary covariance of the chosen dynamics:

- ``sgd``: mini-batch SGD (Eqs. 10-11), stream ``single_layer/sgd`` seeded by the seven
  old cell keys (sigma_eps2 among them; the data set's own streams do not depend on it, see
  :mod:`weightdyn.single_layer.teacher_student`); an ``init: random`` start gets the longer
  burn-in its distance needs;
- ``sgf_additive`` / ``sgf_multiplicative``: Euler-Maruyama of the SDE of Eq. 13 with C(w*)
  (Eq. 17) or C(w) (Eqs. 14-15) at step ``dt = dt_over_lr * lr``, covering the SDE time of the
  SGD protocol; streams ``single_layer/<dynamics>``. These cells also hold ``eig_M_euler``, the
  exact fixed point of the additive-noise Euler chain (Eq. 30 as dt -> 0). At ``dt = lr`` the
  multiplicative chain has the second-moment recursion of SGD itself, so ``eig_M_discrete``
  predicts it exactly as it predicts SGD;
- ``none``: theory only.

The setting ``precision: float32`` runs the SGD and SGF kernels on the deviation from w* in
single precision (the same streams, the moments in double; ``precision`` of
:func:`~weightdyn.single_layer.simulate.run_sgd`); absent, or ``float64``, the cells are those
of before (same ids, same bits).

Simulated cells fill the variables of the old SGD files (``eig_M_sgd``, ``var_w_sgd``, ...)
whatever the dynamics, so one name holds one estimator and a merged sweep compares dynamics by its
``dynamics`` coordinate; their long names say "SGD or SGF". ``frobenius_error_eq30`` is the
relative distance of the simulated covariance from Eq. 30 (the old SGD-vs-SGF figure's epsilon_F).
Simulated cells also hold the integrated autocorrelation times of the slowest Hessian mode and of
the training loss (``tau_int_slowest``, ``tau_int_loss``, in steps), the effective sample sizes
(``ess_*``) and ``undersampled`` (fewer than 50 tau_int sampled; :mod:`weightdyn.observables`),
and ``not_stationary`` with ``stationarity_t_*`` (the late half of the sampling window against its
early half; :mod:`weightdyn.stationarity`). ``trace_M_sgd`` (+- ``trace_M_sgd_se``) is tr M of the
simulation about w*, ``trace_M_eq30``, ``_eq33``, ``_eq34``, ``_discrete`` (and ``_euler``) those
of the theories. A random start gets the burn-in its distance from w* needs
(:func:`~weightdyn.single_layer.protocol.start_extra_tau`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import observables, resources, seeds, stationarity, stats
from weightdyn.agreement import Agreement, agreement
from weightdyn.data import TeacherStudentData
from weightdyn.experiments import (
    SCALAR,
    ConfigError,
    Experiment,
    Figure,
    LazyPlots,
    Param,
    Params,
    Progress,
)
from weightdyn.io import attrs
from weightdyn.single_layer import params as sp
from weightdyn.single_layer import theory
from weightdyn.single_layer.datasets import (
    DISCRETE,
    P000,
    euler_dataset,
    sgd_dataset,
    theory_dataset,
)
from weightdyn.single_layer.protocol import (
    length_dataset,
    run_stationary_sgd,
    run_stationary_sgf,
    slowest_mode_and_loss,
    stationarity_dataset,
)
from weightdyn.single_layer.simulate import SGDResult
from weightdyn.single_layer.teacher_student import N_TEST, TEACHER_STUDENT

discrete = LazyPlots("weightdyn.plots.discrete")
fig4 = LazyPlots("weightdyn.plots.fig4")
sgf = LazyPlots("weightdyn.plots.sgf")

DYNAMICS = ("sgd", "sgf_additive", "sgf_multiplicative", "none")
SIMULATED = DYNAMICS[:3]
#: the old cell dict: the seed keys of every stream and the axes of the old sweeps
CELL_KEYS = ("N", "P", "sigma_eps2", "lr", "batch_size", "sampling", "data_seed")
PROTOCOL_KEYS = tuple(p.name for p in sp.PROTOCOL)
STREAMS = {d: f"single_layer/{d}" for d in SIMULATED}
METHODS = {
    "sgd": ("SGD", "paper 000 Eqs. 10-11 (SGD)"),
    "sgf_additive": ("SGF (additive)", "paper 000 Eq. 13 with C(w*) of Eq. 17 (SGF)"),
    "sgf_multiplicative": ("SGF (multiplicative)", "paper 000 Eq. 13 with C(w) of Eq. 15 (SGF)"),
}
#: long names and sources of the simulated variables in a cell of any dynamics
SIM_METHOD = ("SGD or SGF", "paper 000 Eqs. 10-11 (SGD) or Eq. 13 (SGF), see dynamics")


PARAMS = (
    *sp.DATA_AND_SGD,
    Param(
        "dynamics",
        str,
        "sgd",
        "simulated dynamics (none: theory only)",
        axis=True,
        allowed=DYNAMICS,
    ),
    sp.as_axis(sp.INIT),
    sp.as_axis(sp.INIT_SCALE),
    N_TEST,
    *sp.PROTOCOL,
    Param(
        "dt_over_lr",
        float,
        1.0,
        "SGF Euler-Maruyama step dt / lr (SDE time t = lr tau)",
        **sp.POSITIVE,
    ),
    sp.PRECISION,
)


# ---------------------------------------------------------------------------------- derive


def _derive(params: dict[str, Any]) -> dict[str, Any]:
    """P from p_over_n (P = round(p_over_n N)) or p_over_n = P/N; 1 <= batch_size <= P;
    ``precision`` only if ``float32`` in a simulated cell: absent or ``float64`` (or a
    theory-only cell), the cell's parameters (its id, its rule's params, its files'
    provenance) are those it had before the setting existed."""
    if params.get("precision") in (None, "float64") or params.get("dynamics") == "none":
        params.pop("precision", None)
    N, P, ratio = params["N"], params.get("P"), params.get("p_over_n")
    if (P is None) == (ratio is None):
        got = "both" if P is not None else "neither"
        raise ConfigError(f"P: give exactly one of 'P' or 'p_over_n' (got {got})")
    if P is None:
        P = round(ratio * N)
        if P < 1:
            raise ConfigError(
                f"p_over_n: {ratio} with N={N} gives P={P}; allowed: p_over_n >= 1/(2N)"
            )
    params["P"], params["p_over_n"] = int(P), P / N
    if params["batch_size"] > P:
        raise ConfigError(
            f"batch_size: {params['batch_size']} exceeds the sample number P={P} (N={N}); "
            "allowed: 1 <= batch_size <= P"
        )
    return params


# ---------------------------------------------------------------------------------- one cell


def _simulate(
    data: TeacherStudentData, params: Params, progress: Progress
) -> tuple[np.ndarray, SGDResult]:
    """(w*, moments) of the cell's dynamics, seeded by the old seven cell keys, with the series
    of the slowest Hessian mode and the training loss (:func:`slowest_mode_and_loss`), in the
    kernels' ``precision`` (absent: float64; float32: the deviation from w* in single
    precision, the same streams)."""
    dynamics = params["dynamics"]
    rng = seeds.generator(STREAMS[dynamics], {key: params[key] for key in CELL_KEYS})
    args = (data, params["lr"], params["batch_size"], params["sampling"], sp.protocol(params), rng)
    hook = {
        "progress": progress,
        "observables": slowest_mode_and_loss(data),
        "precision": params.get("precision") or "float64",
    }
    if dynamics == "sgd":
        return run_stationary_sgd(*args, **hook)
    noise = dynamics.removeprefix("sgf_")
    return run_stationary_sgf(*args, noise, params["dt_over_lr"], **hook)


def _ess_dataset(data: TeacherStudentData, result: SGDResult, progress: Progress) -> xr.Dataset:
    """tau_int and ESS of the slowest mode and the loss; the flag ``undersampled`` (fewer than
    50 tau_int sampled). NaN and not flagged where nothing fluctuates (diverged, or N >= P:
    Eq. 16). Logged through ``progress``, with a WARNING line when flagged."""
    names = result.obs_names
    if result.diverged or data.N >= data.P or result.obs_series is None:
        ess = observables.not_sampled(names, result.sample_steps, result.replicas)
    else:
        ess = observables.effective_sample_size(
            result.obs_series, result.obs_spacing, result.sample_steps, names
        )
        for line in observables.ess_log_lines(ess):
            progress(line)
    variables = observables.ess_variables(ess, SIM_METHOD[0], SIM_METHOD[1])
    return xr.Dataset({name: value for name, value in variables.items()})


def _trace_dataset(ds: xr.Dataset, dynamics: str) -> xr.Dataset:
    """tr M of the simulation about w* (``N var_w_sgd_wstar``, its jackknife error) and of the
    theories the cell evaluates (:func:`weightdyn.stationarity.trace_variables`)."""
    N = ds.sizes["mode"]
    theories = {
        "eq30": (N * float(ds["var_w_theory"]), "tr M, Eq. 30 (Lyapunov)",
                 f"{P000} Eqs. 30-31"),
        "eq33": (float(ds["eig_M_detailed_balance"].sum(skipna=False)),
                 "tr M, Eq. 33 (detailed balance)", f"{P000} Eq. 33"),
        "eq34": (N * float(ds["M_isotropic"]), "tr M, Eq. 34 (isotropic)",
                 f"{P000} Eq. 34"),
        "discrete": (float(ds["eig_M_discrete"].sum(skipna=False)),
                     "tr M, exact discrete-time SGD", DISCRETE),
    }  # fmt: skip
    if "eig_M_euler" in ds:
        theories["euler"] = (float(ds["eig_M_euler"].sum(skipna=False)),
                             "tr M, Euler-Maruyama chain (step dt)",
                             f"{P000} Eq. 13, Euler-Maruyama step dt (beyond Eq. 30)")  # fmt: skip
    sim = None
    if dynamics != "none":
        sim = (N * float(ds["var_w_sgd_wstar"]), N * float(ds["var_w_sgd_wstar_se"]))
    source = f"{METHODS[dynamics][1]}, about w*" if sim is not None else ""
    return xr.Dataset(stationarity.trace_variables(sim, theories, source))


def _frobenius_error(data: TeacherStudentData, params: Params, result: SGDResult) -> xr.Dataset:
    """||M_sim - M_30||_F / ||M_30||_F of the covariance about w* (NaN if diverged or M_30 = 0)."""
    H = theory.hessian(data.X)
    C = theory.noise_covariance(data.X, data.y, params["batch_size"], params["sampling"])
    M30 = theory.stationary_covariance(H, C, params["lr"])
    norm = np.linalg.norm(M30)
    error = np.nan
    if not result.diverged and norm > 0:
        covs = stats.group_covariances(result.sum_dw, result.sum_dwdw, result.n_records)
        error = float(np.linalg.norm(covs.mean(axis=0) - M30) / norm)
    long_name = f"relative Frobenius distance ||M_sim - M_30||_F / ||M_30||_F ({SIM_METHOD[0]})"
    src = f"{SIM_METHOD[1]}; paper 000 Eq. 30"
    return xr.Dataset({"frobenius_error_eq30": ((), error, attrs(long_name, "1", src))})


def slowest_tau_int(theory: xr.Dataset, dynamics: str, dt_over_lr: float) -> float:
    """Integrated autocorrelation time of the squared slowest mode in the chain's own steps,
    known before the run: ``tau / 2`` (``tau = 1/(lr omega_min)``, Eq. 27; the square decays
    twice as fast), for SGD at least ``1 / (1 - rho)`` with ``rho`` the spectral radius of the
    exact second-moment recursion (longer near the stability limit); in Euler steps
    ``dt = dt_over_lr * lr`` for SGF (Eq. 13). It decides the jackknife groups
    (:func:`~weightdyn.single_layer.datasets.error_groups`)."""
    tau = 0.5 * float(theory["tau_steps"])
    if dynamics == "sgd" and float(theory["second_moment_radius"]) < 1.0:
        tau = max(tau, 1.0 / (1.0 - float(theory["second_moment_radius"])))
    return tau if dynamics == "sgd" else tau / dt_over_lr


def run_cell(params: Params, progress: Progress) -> xr.Dataset:
    """Theory of the cell, plus the stationary moments of its dynamics unless it is ``none``."""
    data: TeacherStudentData = params["data"]
    if (data.N, data.P) != (params["N"], params["P"]):
        cell = (params["N"], params["P"])
        raise ValueError(f"data set has (N, P) = {(data.N, data.P)}, the cell {cell}")
    lr, S, sampling, dynamics = (params[k] for k in ("lr", "batch_size", "sampling", "dynamics"))
    progress(f"theory: N={data.N}, P={data.P}, lr={lr:g}, S={S}, sampling {sampling}")
    parts = [theory_dataset(data, lr, S, sampling)]
    if dynamics != "none":
        w_star, result = _simulate(data, params, progress)
        progress(f"{dynamics}: diverged={result.diverged}, {result.elapsed_s:.1f} s (of it "
                 f"{result.obs_elapsed_s:.2f} s in the observable hook)")  # fmt: skip
        tau_int = slowest_tau_int(parts[0], dynamics, params["dt_over_lr"])
        parts += [sgd_dataset(data, w_star, result, *SIM_METHOD, tau_int=tau_int)]
        parts += [_frobenius_error(data, params, result)]
        parts += [_ess_dataset(data, result, progress)]
        parts += [stationarity_dataset(data, result, progress, SIM_METHOD[1])]
        parts += [length_dataset(data, lr, S, sampling, sp.protocol(params), progress)]
    if dynamics.startswith("sgf_"):
        parts.append(euler_dataset(data, lr, S, sampling, params["dt_over_lr"] * lr))
    ds = xr.merge(parts)
    return ds.merge(_trace_dataset(ds, dynamics))


def _resources(params: Params, attempt: int) -> dict[str, int]:
    """Theory (O(N^3 + P N^2)) plus the simulation: SGD costs S N multiply-adds per
    replica-step, additive SGF about N^2, multiplicative SGF about 2 P N (its P normals)."""
    request = resources.single_layer_theory(params, attempt)
    dynamics = params["dynamics"]
    if dynamics == "none":
        return request
    N, P, S = params["N"], params["P"], params["batch_size"]
    width = {"sgd": S, "sgf_additive": N, "sgf_multiplicative": 2 * P}[dynamics]
    scale = 1.0 if dynamics == "sgd" else 1.0 / params["dt_over_lr"]
    steps = {k: math.ceil(scale * params[k]) for k in ("burnin_max_steps", "sample_max_steps")}
    proto = {key: params[key] for key in PROTOCOL_KEYS} | steps
    sim = resources.single_layer_sgd({**params, "batch_size": width}, proto, attempt)
    return {
        "mem_mb": max(request["mem_mb"], sim["mem_mb"]),
        "runtime": request["runtime"] + sim["runtime"],
        "threads": sim["threads"],  # the SGD and SGF kernels split their replicas
    }


def _light(params: Params) -> bool:
    """A theory-only cell (Eqs. 17, 30, the exact discrete fixed point; O(N^3 + P N^2), the
    factor of resources.single_layer_theory), except at N = P, where the exact discrete fixed
    point converges slowly (minutes)."""
    N, P = params["N"], params["P"]
    return params["dynamics"] == "none" and N != P and resources.is_light(50 * (N**3 + P * N**2))


# ------------------------------------------------------------------------------ agreement

BEYOND = "beyond Eq. 30 (docs/discrete_covariance.md)"


def _cells(ds: xr.Dataset, mask: np.ndarray) -> xr.Dataset:
    return ds.isel(cell=np.flatnonzero(mask))


def stationary(ds: xr.Dataset, dynamics: str) -> xr.DataArray:
    """Cells whose chain has a stationary state that the run sampled: not diverged, and below the
    second-moment stability limit (SGD, and multiplicative SGF whose recursion is SGD's) or with
    a finite Euler fixed point (additive SGF)."""
    ok = ds["diverged"] == 0
    if dynamics == "sgf_additive":
        return ok & ds["eig_M_euler"].notnull().any("mode")
    return ok & (ds["second_moment_radius"] < 1)


def _exact(ds: xr.Dataset, dynamics: str) -> tuple[str, str, xr.DataArray, xr.DataArray]:
    """(name, equations, eigenvalues, where valid) of the exact fixed point of a cell's chain:
    the discrete SGD recursion for SGD and for multiplicative SGF at dt = lr (the same
    second-moment recursion), the additive-noise Euler chain for additive SGF."""
    valid = stationary(ds, dynamics)
    if dynamics == "sgd":
        return "the exact discrete-time fixed point", BEYOND, ds["eig_M_discrete"], valid
    if dynamics == "sgf_additive":
        name = "the exact fixed point of its Euler chain (step dt)"
        return name, "Eq. 13 discretised (beyond Eq. 30)", ds["eig_M_euler"], valid
    valid = valid & np.isclose(ds["dt"], ds["lr"])
    return "the exact discrete-time fixed point (dt = lr)", BEYOND, ds["eig_M_discrete"], valid


def _fig4_rows(ds: xr.Dataset, dynamics: str, label: str) -> list[Agreement]:
    """Fig. 4b (spectrum vs Eq. 30, also of SGF: Eqs. 13, 30) and, for SGD, Fig. 4a."""
    name = METHODS[dynamics][0]
    eqs = "Eqs. 30-31" if dynamics == "sgd" else "Eqs. 13, 30"
    rows = [
        agreement(label, f"eigenvalues of the {name} covariance about w* vs M (Lyapunov)", eqs,
                  ds["eig_M_sgd"], ds["eig_M_lyapunov"], ds["eig_M_sgd_se"]),
    ]  # fmt: skip
    if dynamics == "sgd":
        rows += [
            agreement(label, "SGD temporal weight variance vs tr M / N", "Eqs. 30-31",
                      ds["var_w_sgd"], ds["var_w_theory"], ds["var_w_sgd_se"]),
            agreement(label, "SGD training loss vs L* + tr(HM)/2", "Eqs. 9, 26, 30",
                      ds["train_loss"], ds["train_loss_theory"], ds["train_loss_se"]),
        ]  # fmt: skip
        if "var_w_spatial_sgd" in ds:
            fluctuating = ds["N"] < ds["P"]
            rows.append(agreement(
                label, "SGD spatial weight variance vs (1/N)[w*^T Pi w* + tr(Pi M)] (N < P)",
                "Eqs. 7, 30", ds["var_w_spatial_sgd"].where(fluctuating),
                ds["var_w_spatial_theory"], ds["var_w_spatial_sgd_se"].where(fluctuating),
            ))  # fmt: skip
    return rows


def _spectrum_row(ds: xr.Dataset, dynamics: str, label: str) -> Agreement:
    """Eigenvalues about w* against the exact fixed point of the chain, pooled over the cells."""
    exact, eqs, eig, valid = _exact(ds, dynamics)
    return agreement(
        label, f"eigenvalues of the {METHODS[dynamics][0]} covariance vs {exact}", eqs,
        ds["eig_M_sgd"].where(valid), eig, ds["eig_M_sgd_se"].where(valid), paper="000+",
    )  # fmt: skip


def _trace_rows(ds: xr.Dataset, dynamics: str, label: str, at: str) -> list[Agreement]:
    """tr M about w* (as tr M / N) against Eq. 30 and against the exact fixed point of the chain."""
    name = METHODS[dynamics][0]
    sim, se = ds["var_w_sgd_wstar"], ds["var_w_sgd_wstar_se"]
    exact, eqs, eig, valid = _exact(ds, dynamics)
    eq30 = "Eqs. 30-31" if dynamics == "sgd" else "Eqs. 13, 30"
    ok = stationary(ds, dynamics)
    return [
        agreement(label, f"tr M of {name} (about w*) vs tr M of Eq. 30{at}", eq30,
                  sim.where(ok), ds["var_w_theory"], se.where(ok)),
        agreement(label, f"tr M of {name} (about w*) vs {exact}{at}", eqs, sim.where(valid),
                  eig.sum("mode", min_count=1) / ds["N"], se.where(valid), paper="000+"),
    ]  # fmt: skip


def _divergence_row(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Observed SGD divergence vs the second-moment stability limit, if the sweep reaches it."""
    predicted = ds["second_moment_radius"] >= 1
    if not (bool(predicted.any()) or bool((ds["diverged"] == 1).any())):
        return []
    bounded = ds["eig_M_sgd"].isel(mode=0).notnull() | (ds["diverged"] == 1)
    return [
        agreement(label, "1 + SGD diverged (0/1) vs 1 + predicted radius >= 1 (deviation 0 "
                  "where they agree)", "spectral radius of M -> E_B[(I - lr H_B) M (I - lr "
                  "H_B)^T]", (1 + ds["diverged"]).where(bounded), 1 + predicted, paper="000+"),
    ]  # fmt: skip


def _theory_row(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Fig. 4c: theory only, ||M_30|| (broken detailed balance) against the isotropic ||M_34||."""
    return [
        agreement(label, "theory only: ||M_30|| (broken detailed balance) vs ||M_34|| "
                  "(isotropic)", "Eqs. 30, 34", ds["m_lyapunov_over_isotropic"], 1.0),
    ]  # fmt: skip


def _agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Rows of one sweep, only for what it holds. Theory-only (``none``) cells: the Fig. 4c row.
    Per simulated dynamics: the spectrum against the exact fixed point of its chain (pooled);
    in a sweep at one learning rate the Fig. 4a/4b rows against Eq. 30 (pooled); per learning
    rate tr M against Eq. 30 and against the exact fixed point; for SGD the divergence row if
    the sweep reaches the stability limit. Rows without comparable points are left out."""
    dynamics = ds["dynamics"].values
    rows = _theory_row(_cells(ds, dynamics == "none"), label) if "none" in dynamics else []
    lrs = np.unique(ds["lr"].values)
    for name in SIMULATED:
        cells = _cells(ds, dynamics == name)
        if cells.sizes["cell"] == 0:
            continue
        if lrs.size == 1:
            rows += _fig4_rows(cells, name, label)
        rows.append(_spectrum_row(cells, name, label))
        for lr in lrs:
            at_lr = _cells(cells, cells["lr"].values == lr)
            if at_lr.sizes["cell"]:
                rows += _trace_rows(at_lr, name, label, f" (lr = {lr:g})" if lrs.size > 1 else "")
        if name == "sgd":
            rows += _divergence_row(cells, label)
    return [row for row in rows if row.points > 0]


# -------------------------------------------------------------------------------- figures

#: axes averaged over by the figures that average data sets
SEEDS = ("data_seed",)


def _all_but(axes: tuple[str, ...], *drawn: str) -> tuple[str, ...]:
    """The axes of ``axes`` a figure holds fixed: all but those it draws."""
    return tuple(a for a in axes if a not in drawn)


#: the sweep axes, as PARAMS declares them
AXIS_NAMES = tuple(p.name for p in PARAMS if p.axis)
#: the axes the Fig. 4 figures (weightdyn.plots.fig4) hold fixed unless they draw them
FIG4_AXES = _all_but(AXIS_NAMES, *sp.DERIVED, *SEEDS)
#: the axes the SGF figures (weightdyn.plots.sgf) hold fixed unless they draw them
SGF_AXES = _all_but(AXIS_NAMES, *sp.DERIVED, "dynamics")
#: the axes the exact discrete-time figures (weightdyn.plots.discrete) hold fixed
DISCRETE_FIXED = ("N", "sigma_eps2", "sampling", "dynamics", "init", "init_scale")


FIGURES = {
    "scalar": SCALAR,
    "variance_vs_size": Figure(
        fig4.variance_vs_size,
        "**Paper 000 Fig. 4a.** Top: mean temporal weight variance of SGD (open circles) against "
        "N/P at fixed P, tr M/N of the Lyapunov solution (Eq. 30) for the simulated data set "
        "(dash-dotted) and averaged over data sets (solid, band ±1 s.d. over them; theory-only "
        "cells of further data seeds), and the isotropic λσ²/2S (Eq. 34). Middle: the spatial "
        "variance across the weights at a fixed time (filled circles) against "
        "(1/N)[w*ᵀΠw* + tr(ΠM)] (dashed, band over data sets), peaking at N = P. Bottom: train "
        "and test loss against Eqs. 9 and 30. Error bars ±1 s.e. (jackknife over replica time "
        "blocks); the title gives the largest, mostly hidden by the markers.",
        fixed=_all_but(FIG4_AXES, "N", "dynamics"),
        averaged=SEEDS,
    ),
    "spectra": Figure(
        fig4.spectra,
        "**Paper 000 Fig. 4b.** Sorted eigenvalues of the SGD weight covariance about w* "
        "(band ±2 s.e.) over λσ²/2S against Eq. 30 (Lyapunov), Eq. 33 (detailed balance) and "
        "Eq. 34 (isotropic), one colour per P/N.",
        fixed=_all_but(FIG4_AXES, "P"),
        averaged=SEEDS,
    ),
    "theory_extremes": Figure(
        fig4.theory_extremes,
        "**Paper 000 Fig. 4c.** Largest and smallest eigenvalue of M (Eqs. 30, 33) over "
        "λσ²/2S against P/N − 1 and the norm ratios ||Q||/||C|| (Eq. 31) and ||M₃₀||/||M₃₄||; "
        "theory only, band ±1 s.e. over data sets.",
        fixed=_all_but(FIG4_AXES, "P"),
        averaged=SEEDS,
    ),
    "discrete_trace": Figure(
        discrete.fig_trace_vs_lr,
        "**Beyond paper 000: exact discrete-time SGD.** tr M of SGD about w* over tr M of Eq. 30 "
        "against λ (±1 s.e.) with the exact discrete-time fixed point (lines) and its divergence "
        "(dotted), per batch size S and P/N.",
        fixed=DISCRETE_FIXED,
        averaged=SEEDS,
    ),
    "discrete_spectra": Figure(
        discrete.fig_spectra_at_max_stable_lr,
        "**Beyond paper 000: exact discrete-time SGD.** Sorted eigenvalues of M at the largest "
        "stable λ of the sweep: SGD (±1 s.e.), the exact discrete-time theory and Eq. 30, "
        "over λσ²/2S.",
        fixed=DISCRETE_FIXED,
        averaged=SEEDS,
    ),
    "discrete_divergence": Figure(
        discrete.fig_divergence_lr,
        "**Beyond paper 000: exact discrete-time SGD.** Observed divergence bracket of SGD "
        "(Eqs. 10-11) against the "
        "learning rate at which the exact second-moment map loses stability; crosses: the "
        "full-batch bound 2/ω_max.",
        fixed=DISCRETE_FIXED,
        averaged=SEEDS,
    ),
    "dynamics_spectra": Figure(
        sgf.dynamics_spectra,
        "**Paper 000 Eq. 13.** Sorted eigenvalues of the stationary covariance about w* of "
        "SGD and of the stochastic gradient flow with additive (C(w*), Eq. 17) and "
        "multiplicative (C(w), Eq. 15) noise (±2 s.e.) over λσ²/2S, against Eq. 30 and "
        "Eq. 34; ε_F is the relative Frobenius distance from Eq. 30.",
        fixed=_all_but(SGF_AXES, "dynamics"),
    ),
    "dynamics_vs_lr": Figure(
        sgf.dynamics_vs_lr,
        "**Paper 000 Eqs. 11, 13, 30.** tr M about w* over tr M of Eq. 30 against λ for SGD, "
        "SGF with additive and with multiplicative noise (±1 s.e.), with the exact "
        "discrete-time fixed point of SGD (solid; also that of multiplicative SGF at dt = λ), "
        "the fixed point of the additive Euler chain (dashed) and Eq. 30 (dotted, 1).",
        fixed=_all_but(SGF_AXES, "lr", "dynamics", "data_seed"),
        averaged=SEEDS,
    ),
}

EXPERIMENTS = {
    "single_layer": Experiment(
        name="single_layer",
        family="single_layer",
        title="single-layer stationary weight covariance: SGD or SGF vs theory",
        source="paper 000 Eqs. 10-17, 27, 30-34, App. C; exact discrete-time recursion",
        params=PARAMS,
        run_cell=run_cell,
        derive=_derive,
        identity=(*CELL_KEYS, "dynamics", "init", "init_scale"),
        agreement=_agreement,
        figures=FIGURES,
        default_figures=("variance_vs_size", "spectra"),
        resources=_resources,
        light=_light,
        data=TEACHER_STUDENT,
    )
}
