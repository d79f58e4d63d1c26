"""The two-layer experiment of paper 000 Sec. III (Figs. 6-7, drift, relaxation; Eqs. 36-78).

One cell is one data set (N_i, N_o, P, sigma_y2, data_seed; Sec. III.1), one initialisation
(``init``, ``init_scale``; Eq. 71 or Eq. 42), one learning rate, batch size and sampling mode and
one ``dynamics``: ``sgd`` (mini-batch SGD, Eqs. 40-41) or ``sgf`` (Euler-Maruyama of the
stochastic gradient flow, Eqs. 51-52, with the exact mini-batch noise at the current weights,
Euler step ``dt = lr``). Both run the same protocol (:mod:`weightdyn.two_layer.protocol`:
gradient flow to ``W^0``, theory at ``W^0``, pre-run, local point, sampling, loss perturbations,
relaxation) from the same ``W^0``; the dataset (:mod:`weightdyn.two_layer.cell_dataset`) holds the
theory of protocols (a) and (b) beside the simulated spectra. An SGF cell beside its SGD twin
gives Fig. 7 the paper's nonlinear-SGF curve (dash-dotted).

Seeds: streams ``two_layer/data/inputs``, ``two_layer/data/noise`` and ``two_layer/init`` of
the data's parameters without the label variance (:data:`weightdyn.two_layer.protocol.DATA_KEYS`;
SGD and SGF cells share data and ``W^0``, and cells differing only in sigma_y2 share the inputs,
the teacher, the standard noise draws and the start), and ``two_layer/<dynamics>`` seeded by the
old block keys (:data:`weightdyn.two_layer.protocol.SEED_KEYS`).

The setting ``precision`` (``float64``, the default, or ``float32``) chooses the kernels'
arithmetic (:mod:`weightdyn.two_layer.deviation`); the seeds and the cell ids of float64 cells
do not depend on it.
"""

from __future__ import annotations

import math
import time
from typing import Any

import xarray as xr

from weightdyn import io
from weightdyn import resources as requests
from weightdyn.agreement import Agreement, agreement
from weightdyn.experiments import (
    REQUIRED,
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
from weightdyn.two_layer import protocol
from weightdyn.two_layer.cell_dataset import cell_dataset, diverged_dataset
from weightdyn.two_layer.data import TARGET_KINDS
from weightdyn.two_layer.merged import cell_label, dynamics_groups, is_diverged, value
from weightdyn.two_layer.simulate import PRECISIONS, SAMPLING_MODES

plots = LazyPlots("weightdyn.plots.two_layer")

DYNAMICS = ("sgd", "sgf")
INITS = ("gaussian", "zero_balanced")
POSITIVE = {"minimum": 0, "exclusive_minimum": True}
# fmt: off
PARAMS = (
    Param("N_i", int, REQUIRED, "input dimension N_i", axis=True, minimum=1),
    Param("N_h", int, REQUIRED, "hidden width N_h", axis=True, minimum=1),
    Param("N_o", int, 1, "output dimension N_o (Eqs. 70, 73 and the IVFR need 1)", axis=True,
          minimum=1),
    Param("P", int, REQUIRED, "number of training samples P", axis=True, minimum=2),
    Param("sigma_y2", float, REQUIRED, "label variance sigma_y^2 (random targets or teacher "
          "label noise)", axis=True, **POSITIVE),
    Param("init", str, "gaussian", "initial weights: Gaussian (Eq. 71 x init_scale) or "
          "zero-balanced (Eq. 42)", axis=True, allowed=INITS),
    Param("init_scale", float, 1.0, "initial weight variance in units of Glorot's 1/N_i, 1/N_h",
          axis=True, **POSITIVE),
    Param("lr", float, REQUIRED, "learning rate lambda", axis=True, **POSITIVE),
    Param("batch_size", int, REQUIRED, "mini-batch size S", axis=True, minimum=1),
    Param("sampling", str, "with", "mini-batch sampling with or without replacement (App. C)",
          axis=True, allowed=SAMPLING_MODES),
    Param("data_seed", int, 0, "data realisation index", axis=True, minimum=0),
    Param("dynamics", str, "sgd", "simulated dynamics: SGD (Eqs. 40-41) or SGF (Eqs. 51-52, "
          "exact mini-batch noise)", axis=True, allowed=DYNAMICS),
    Param("targets", str, "random", "targets: random (independent of the inputs, the paper's "
          "case) or a linear teacher plus label noise", allowed=TARGET_KINDS),
    Param("replicas", int, 8, "independent chains started at W^0", minimum=2),
    Param("prerun_tau", float, 2000.0, "pre-run length in relaxation times tau0 at W^0",
          **POSITIVE),
    Param("average_tau", float, 100.0, "window at the end of the pre-run defining the local "
          "point, in tau0", **POSITIVE),
    Param("sample_tau", float, 800.0, "sampling length per replica in local relaxation times",
          **POSITIVE),
    Param("records_per_tau", float, 2.0, "snapshots per local relaxation time (sets the "
          "thinning)", minimum=1),
    Param("n_blocks", int, 8, "time blocks per replica for jackknife errors", minimum=2),
    Param("trace_points", int, 10, "trace points per decade of pre-run time and over the "
          "sampling window", minimum=1),
    Param("relax_tau", float, 40.0, "length of the relaxation series in local relaxation "
          "times (0: none)", minimum=0),
    Param("relax_modes", int, 4, "drift eigenmodes chi_k in the relaxation figure", minimum=1),
    Param("local_point", str, "window", "local point: time average of the sampling window or "
          "of the last average_tau of the pre-run", allowed=("window", "prerun")),
    Param("precision", str, "float64", "arithmetic of the SGD/SGF kernels: float64, or float32 "
          "(the deviations from the run's reference point in single precision, Eq. 41 exactly); "
          "float64 is stored as absent, so that float64 cells keep their ids", allowed=PRECISIONS),
)

# fmt: on


def derive(params: dict[str, Any]) -> dict[str, Any]:
    """Checks between parameters: N_o <= N_h (thin SVD, Sec. III.2.3), P > N_i (a unique w*,
    Eq. 39), batch_size <= P, average_tau <= prerun_tau, zero-balanced needs N_o <= N_i.
    ``precision = float64``, the default, is stored as absent (None): the cell ids (a hash of
    the settings that are not None) stay those from before the setting existed."""
    p = params
    if p.get("precision") == "float64":
        p["precision"] = None
    if p["N_o"] > p["N_h"]:
        raise ConfigError(f"N_o: {p['N_o']} exceeds N_h = {p['N_h']}; allowed: N_o <= N_h")
    if p["P"] <= p["N_i"]:
        raise ConfigError(f"P: {p['P']} must exceed N_i = {p['N_i']}; allowed: P > N_i")
    if p["batch_size"] > p["P"]:
        raise ConfigError(
            f"batch_size: {p['batch_size']} exceeds P = {p['P']}; allowed: 1 <= batch_size <= P"
        )
    if p["average_tau"] > p["prerun_tau"]:
        raise ConfigError(
            f"average_tau: {p['average_tau']} exceeds prerun_tau = {p['prerun_tau']}; "
            "allowed: average_tau <= prerun_tau"
        )
    if p["init"] == "zero_balanced" and p["N_o"] > p["N_i"]:
        raise ConfigError(
            f"init: 'zero_balanced' needs N_o <= N_i, got N_o = {p['N_o']}, N_i = {p['N_i']}; "
            "allowed: 'gaussian' or N_o <= N_i"
        )
    return params


def run_cell(params: Params, progress: Progress) -> xr.Dataset:
    """One two-layer cell (:mod:`weightdyn.two_layer.protocol`, steps 1-6) as one dataset; a
    cell whose chains diverge gives the theory at W^0, ``diverged = 1`` and NaN elsewhere."""
    t_start = time.perf_counter()
    s = protocol.setup(params, progress)
    a = protocol.theory_at_w0(s, params, progress)
    rng = protocol.dynamics_rng(params)
    try:
        pre = protocol.prerun(s, a, params, rng, progress)
        plan = protocol.local_plan(s, pre, params, progress)
        smp = protocol.sample(s, pre, plan, params, rng, progress)
        rel = protocol.relaxation(s, smp, plan, params, rng, progress)
    except protocol.Diverged as err:
        progress(str(err))
        ds = diverged_dataset(s, a, params, err.stage)
    else:
        ds = cell_dataset(s, a, pre, plan, smp, rel, params)
    elapsed = time.perf_counter() - t_start
    ds["elapsed_s"] = ((), elapsed, attrs("wall time of the cell", "s", "protocol"))
    progress(f"two-layer cell done in {elapsed:.1f} s")
    return ds


def resources(params: Params, attempt: int) -> dict[str, int]:
    """:func:`weightdyn.resources.two_layer_cell`; an SGF cell is costed as an SGD cell whose
    batch holds the work of one Euler step of :func:`~weightdyn.two_layer.simulate.sgf_kernel`:
    the full-batch residuals (``~2 P N_o N_i + 2 N_h N_i N_o`` multiply-adds) and P Box-Muller
    normals (costed as 10 multiply-adds each)."""
    if params["dynamics"] == "sgd":
        return requests.two_layer_cell(params, attempt)
    N_i, N_h, N_o, P = (int(params[k]) for k in ("N_i", "N_h", "N_o", "P"))
    per_step = 2 * P * N_o * N_i + 2 * N_h * N_i * N_o + 10 * P
    S_eff = max(int(params["batch_size"]), math.ceil(per_step / (N_h * (N_i + N_o))))
    return requests.two_layer_cell({**params, "batch_size": S_eff}, attempt)


# ---------------------------------------------------------------------------- agreement


def _cell_rows(c: xr.Dataset, name: str) -> list[Agreement]:
    """The comparisons of one cell's figures (Figs. 6a-c, 7a-b, drift, Eq. 76)."""
    dyn = str(value(c, "dynamics")).upper()
    eye = c["z_row"] == c["z_col"]
    rows = [
        agreement(f"{name}fig6a", f"diagonal of cov(Z), {dyn} replica 0 vs Eq. 66 at W^0 "
                  "(no SE: one replica)", "Eq. 66",
                  c["M_z_sgd"].where(eye).sum("z_col", min_count=1),
                  c["M_z_eq66"].where(eye).sum("z_col", min_count=1)),
        agreement(f"{name}fig6bc", f"eig cov(vec dW2), {dyn} about its time average vs Eq. 66 "
                  "at W^0 (protocol a)", "Eq. 66", c["eig_cov2_sgd_a"], c["eig_cov2_eq66"],
                  c["eig_cov2_sgd_a_se"]),
        agreement(f"{name}fig6bc", f"eig cov(vec dW1), {dyn} about the local point vs exact "
                  "linearisation (protocol b)", "Eqs. 62-66", c["eig_cov1_sgd_b"],
                  c["eig_cov1_exact_local"], c["eig_cov1_sgd_b_se"]),
        agreement(f"{name}fig7a", f"delta L / theta^2 along eigenvectors of {dyn} cov(dW2) vs "
                  "sigma_x^2 D1_ii / 2", "Eq. 73", c["delta_L2_sgd"], c["delta_L2_eq73_exact"],
                  c["delta_L2_sgd_se"]),
        agreement(f"{name}fig7b", f"delta L / theta^2 along {dyn} vs linear-theory eigenvectors "
                  "of cov(vec dW1)", "Eqs. 62-66", c["delta_L1_sgd"], c["delta_L1_linear"],
                  c["delta_L1_sgd_se"]),
        agreement(f"{name}fig_drift", "D2 at the local points vs D2 at W^0 (no drift; no SE)",
                  "Eq. 59", c["D2_local"], c["D2_w0"]),
    ]  # fmt: skip
    if "relax_acf" in c:
        rows.append(agreement(
            f"{name}fig_relaxation", f"{dyn} autocorrelation of drift modes vs "
            "exp(-sigma_x^2 omega_k t), where > 0.1", "Eqs. 74-76", c["relax_acf"],
            c["relax_theory"], c["relax_acf_se"], floor=0.1,
        ))  # fmt: skip
    return rows


def _sgf_rows(sgd: xr.Dataset, sgf: xr.Dataset, name: str) -> list[Agreement]:
    """SGD against the nonlinear SGF (the paper's dash-dotted curves of Fig. 7)."""
    return [
        agreement(f"{name}fig7a", "delta L / theta^2 along eig. of cov(dW2): SGD vs nonlinear "
                  "SGF", "Eqs. 51-52, 73", sgd["delta_L2_sgd"], sgf["delta_L2_sgd"],
                  sgd["delta_L2_sgd_se"], sgf["delta_L2_sgd_se"]),
        agreement(f"{name}fig7b", "delta L / theta^2 along eig. of cov(vec dW1): SGD vs "
                  "nonlinear SGF", "Eqs. 51-52", sgd["delta_L1_sgd"], sgf["delta_L1_sgd"],
                  sgd["delta_L1_sgd_se"], sgf["delta_L1_sgd_se"]),
    ]  # fmt: skip


def agreement_rows(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Rows of every cell of a merged two-layer sweep, named ``<label> [<cell>] <figure>``
    (``<cell>``: the axes in which the cell differs from the sweep's other cells), plus SGD vs
    SGF where a cell has its SGF twin. Diverged cells have no rows."""
    cells = [c for c in io.cell_datasets(ds) if not is_diverged(c)]
    rows = []
    for c in cells:
        text = cell_label(c, cells)
        rows += _cell_rows(c, f"{label} [{text}] " if text else f"{label} ")
    for group in dynamics_groups(cells):
        if "sgd" in group and "sgf" in group:
            text = cell_label(group["sgd"], cells, skip=("dynamics",))
            rows += _sgf_rows(group["sgd"], group["sgf"],
                              f"{label} [{text}] " if text else f"{label} ")  # fmt: skip
    return rows


# ------------------------------------------------------------------------------ registry

_CELL = "one figure per cell"
FIGURES = {
    "scalar": SCALAR,
    "fig6a": Figure(plots.fig6a, per_cell=True, caption=(
        "Paper 000 Fig. 6a: the covariance :math:`M` of :math:`Z = [\\mathrm{vec}\\,z_1; "
        "\\mathrm{vec}\\,z_2]` in the SVD basis (Sec. III.2.3), Eq. 66 at the gradient-flow end "
        f"point :math:`W^0` beside the simulated chains (replica 0); {_CELL}.")),
    "fig6bc": Figure(plots.fig6bc, per_cell=True, caption=(
        "Paper 000 Figs. 6b,c: eigenvalues of cov(vec dW1) and cov(vec dW2) of the simulated "
        "chains vs Eq. 66 and Eq. 70 at :math:`W^0` (protocol a) and the exact linearisation "
        "(Eqs. 62-66) at the local point (protocol b); error bars: :math:`\\pm` 1 s.e. over "
        "replicas for (a) :math:`\\delta W_1`, jackknife over (replica, time block) otherwise; "
        f"{_CELL}.")),
    "fig7a": Figure(plots.fig7a, caption=(
        "Paper 000 Fig. 7a: loss perturbation along the eigenvectors of cov(dW2) vs Eq. 73 "
        "(exact and approximate) and the IVFR (curvature vs variance); SGD circles, the "
        "nonlinear stochastic gradient flow (Eqs. 51-52) dash-dotted where the sweep holds "
        "the SGF cell; one row per group of cells differing only in dynamics.")),
    "fig7b": Figure(plots.fig7b, caption=(
        "Paper 000 Fig. 7b: loss perturbation along the eigenvectors of cov(vec dW1): SGD, the "
        "nonlinear SGF (Eqs. 51-52, dash-dotted) and the linear theory (Eq. 66, flat, zero "
        "beyond :math:`N_oN_i`); right: the eigenvalues (the paper's inset); one row per "
        "group of cells differing only in dynamics.")),
    "fig_drift": Figure(plots.fig_drift, per_cell=True, caption=(
        "Drift along the manifold of minima: :math:`D_2`, :math:`\\mathrm{tr}\\,D_1`, "
        ":math:`\\mathrm{tr}\\,\\Gamma` (Eq. 63) and :math:`\\|W_2W_1 - w^*\\|` (Eq. 39) "
        f"against time in units of :math:`\\tau_0`; {_CELL}.")),
    "fig_relaxation": Figure(plots.fig_relaxation, per_cell=True, caption=(
        "Paper 000 Eqs. 74-78: autocorrelation of drift eigenmodes :math:`\\chi_k` of the "
        "local linearisation vs :math:`e^{-\\sigma_x^2\\omega_k t}` (Eq. 76 with the "
        f"corrected sign of Eq. 75); {_CELL}.")),
}  # fmt: skip

EXPERIMENTS = {
    "two_layer": Experiment(
        name="two_layer",
        family="two_layer",
        title="two-layer linear network: weight fluctuations, IVFR, drift, relaxation",
        source="paper 000 Sec. III, Eqs. 36-78, Figs. 6-7",
        params=PARAMS,
        run_cell=run_cell,
        derive=derive,
        agreement=agreement_rows,
        figures=FIGURES,
        default_figures=tuple(f for f in FIGURES if f != "scalar"),  # scalar needs options
        resources=resources,
    )
}
