"""Old acceptance numbers of issues 2-7 beside the values re-measured by a finished workflow run.

    python tools/acceptance_table.py RUN_DIR            # issue | quantity | config | old | new
    python tools/acceptance_table.py RUN_DIR --old      # the old values with their sources

RUN_DIR is a workflow run (``snakemake --configfile config/<name>.yaml`` in a checkout): the
tool reads only ``RUN_DIR/results`` (``agreement/<config>.csv``, the merged ``<sweep>.nc`` and
``<sweep>.summary.nc``) and, to name the run's config, its newest Snakemake log (or
``--config``). Every old number is one :class:`Old` row: where it was reported (the closing notes
of issues 2-7, stops 8 and 9 of ``issues stops``), the config it was measured at, and either a
function that re-derives it from the merged outputs or the reason it cannot be (a unit test, a
benchmark, a timed or interrupted run). A sweep the run has not written yet, or a cell it does not
have, gives "not in merged outputs: ..." instead of a number. Nothing is written.
"""

from __future__ import annotations

import argparse
import csv
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import xarray as xr

from weightdyn.io import load
from weightdyn.single_layer.noise import power_law_fit

N8 = "stop 8 note (issues 2-4)"
N9 = "stop 9 note (issues 5-7)"
UNIT = "not in merged outputs: a unit-test identity on a tiny problem"
BENCH = "not in merged outputs: a benchmark (benchmarks/), not a sweep result"
PROC = "not in merged outputs: a property of a test run of the workflow (tests/), not a result"


class Missing(Exception):
    """The merged outputs do not hold what a row needs."""


@dataclass(frozen=True)
class Run:
    """The results of one workflow run and the name of its config (paper, default, test)."""

    results: Path
    config: str

    def ds(self, name: str) -> xr.Dataset:
        return _load(self.results / f"{name}.nc")

    def agreement(self) -> list[dict[str, str]]:
        """The rows of this config's table, results/agreement/<config name>.csv (the default
        config's name is ``config``, the stem of its file)."""
        name = {"default": "config"}.get(self.config, self.config)
        path = self.results / "agreement" / f"{name}.csv"
        if not path.exists():
            raise Missing(f"results/agreement/{name}.csv not written yet")
        with path.open(newline="") as f:
            return list(csv.DictReader(f))


@cache
def _load(path: Path) -> xr.Dataset:
    if not path.exists():
        raise Missing(f"results/{path.name} not in this run")
    return load(path)


@dataclass(frozen=True)
class Old:
    """One old acceptance number: issue, quantity, config measured at, old value, source, and
    how to re-derive it (a function of the run) or why it cannot be (a string)."""

    issue: int
    quantity: str
    config: str
    old: str
    source: str
    new: Callable[[Run], str] | str


# ------------------------------------------------------------------------------ helpers


def pct(x: float) -> str:
    return f"{100 * x:.3g} %"


def rel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(np.asarray(a, float) / np.asarray(b, float) - 1.0)


def cells(ds: xr.Dataset, **sel: object) -> xr.Dataset:
    """The cells of ``ds`` whose coordinates equal ``sel`` (floats by np.isclose)."""
    mask = np.ones(ds.sizes["cell"], bool)
    for key, value in sel.items():
        values = ds[key].values
        mask &= np.isclose(values, value) if isinstance(value, float) else values == value
    if not mask.any():
        raise Missing(f"no cell with {', '.join(f'{k} = {v}' for k, v in sel.items())}")
    return ds.isel(cell=np.flatnonzero(mask))


def sgd(ds: xr.Dataset) -> xr.Dataset:
    return cells(ds, dynamics="sgd") if "dynamics" in ds.coords else ds


def flags(ds: xr.Dataset) -> str:
    """' [k of n cells undersampled]' where the run flagged any of these cells."""
    if "undersampled" not in ds or not int(ds["undersampled"].sum()):
        return ""
    return f" [{int(ds['undersampled'].sum())} of {ds.sizes['cell']} cells undersampled]"


def _nan(f: Callable, a: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return f(a, axis=-1)


# --------------------------------------------------------------- issue 2: Fig. 4 (000)


def fig4a_variance(run: Run) -> str:
    ds = sgd(run.ds("fig4a"))
    ds = ds.isel(cell=np.flatnonzero(ds["N"].values < ds["P"].values))
    r = rel(ds["var_w_sgd"], ds["var_w_theory"])
    i = int(np.nanargmax(r))
    return f"max {pct(r[i])} (at N = {int(ds['N'][i])}, P = {int(ds['P'][i])})" + flags(ds)


def _err30(ds: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    e = rel(ds["eig_M_sgd"], ds["eig_M_lyapunov"])
    return _nan(np.nanmedian, e), _nan(np.nanmax, e)


def fig4b_spectra(run: Run) -> str:
    ds = sgd(run.ds("fig4b"))
    med, mx = _err30(ds)
    pn = ", ".join(f"{p:g}" for p in ds["p_over_n"].values)
    return f"median <= {pct(med.max())}, max <= {pct(mx.max())} (P/N in {pn})" + flags(ds)


def _extreme33(ds: xr.Dataset) -> np.ndarray:
    return _nan(np.nanmax, rel(ds["eig_M_detailed_balance"], ds["eig_M_sgd"]))


def fig4b_eq33(run: Run) -> str:
    ds = sgd(run.ds("fig4b")).sortby("p_over_n")
    e, p = _extreme33(ds), ds["p_over_n"].values
    return f"{pct(e[0])} at P/N = {p[0]:g} -> {pct(e[-1])} at P/N = {p[-1]:g}"


def _point(run: Run) -> xr.Dataset:
    """The Fig. 4b cell at P/N = 2 (paper: N = 100, P = 200)."""
    return cells(sgd(run.ds("fig4b")), p_over_n=2.0).isel(cell=0)


def _at(c: xr.Dataset) -> str:
    return f" (N = {int(c['N'])}, P = {int(c['P'])})"


def point_eq30(run: Run) -> str:
    c = _point(run)
    e = rel(c["eig_M_sgd"], c["eig_M_lyapunov"])
    frob = float(c["frobenius_error_eq30"])
    return f"median {pct(np.nanmedian(e))}, max {pct(np.nanmax(e))}, Frobenius {pct(frob)}" + _at(c)


def point_eq34_eq33(run: Run) -> str:
    c = _point(run)
    e34 = rel(np.full(c.sizes["mode"], float(c["M_isotropic"])), c["eig_M_sgd"])
    e33 = rel(c["eig_M_detailed_balance"], c["eig_M_sgd"])
    return f"Eq. 34 median {pct(np.nanmedian(e34))}; Eq. 33 extreme {pct(np.nanmax(e33))}" + _at(c)


def point_rms(run: Run) -> str:
    c = _point(run)
    e30 = rel(c["eig_M_lyapunov"], c["eig_M_sgd"])
    e33 = rel(c["eig_M_detailed_balance"], c["eig_M_sgd"])
    rms30, rms33 = (np.sqrt(np.nanmean(e**2)) for e in (e30, e33))
    return f"{pct(rms30)} (Eq. 30) vs {pct(rms33)} (Eq. 33)" + _at(c)


def point_variance(run: Run) -> str:
    c = _point(run)
    return f"{100 * float(c['var_w_sgd'] / c['var_w_theory'] - 1):+.2f} %" + _at(c)


def edge_vanish(run: Run) -> str:
    parts = []
    for name in ("fig4a", "edge"):
        try:
            ds = sgd(run.ds(name))
        except Missing:
            continue
        over = ds.isel(cell=np.flatnonzero(ds["N"].values >= ds["P"].values))
        if over.sizes["cell"]:
            k, n = int(over["fluctuations_vanish"].sum()), over.sizes["cell"]
            parts.append(
                f"{name}: {k}/{n} N >= P cells flagged, var <= {np.nanmax(over['var_w_sgd']):.1e}"
            )
    if not parts:
        raise Missing("no N >= P single-layer cell in this run")
    return "; ".join(parts)


def edge_diverged(run: Run) -> str:
    ds = run.ds("edge")
    return ", ".join(
        f"{c['sampling'].item()}: diverged = {int(c['diverged'])} (lr = {float(c['lr']):g}, "
        f"lr omega_max = {float(c['lr'] * c['omega_max']):.1f})"
        for c in (ds.isel(cell=i) for i in range(ds.sizes["cell"]))
    )


# -------------------------------------------------- issue 3: rest of Section II (000)


def noise_spectrum(run: Run) -> str:
    ds = run.ds("noise_spectrum")
    ds = ds.isel(cell=np.flatnonzero(ds["n_batches"].values > 0))
    e = rel(ds["eig_C_empirical"], ds["eig_C_theory"])
    med, mx = _nan(np.nanmedian, e), _nan(np.nanmax, e)
    tr = rel(ds["trace_C_empirical"], ds["trace_C_theory"])
    n = int(ds["n_batches"][0])
    return (
        f"median {pct(med.min())}-{pct(med.max())}, max {pct(mx.min())}-{pct(mx.max())}, "
        f"trace within {pct(np.nanmax(tr))} ({ds.sizes['cell']} cells, {n:.0e} batches)"
    )


def noise_eq20(run: Run) -> str:
    ds = cells(run.ds("noise_spectrum"), sampling="with").sortby("p_over_n")
    r = (ds["trace_C_hessian"] / ds["trace_C_theory"]).values
    return ", ".join(
        f"{x:.3g} at P/N = {p:g}" for x, p in zip(r, ds["p_over_n"].values, strict=True)
    )


def _projector(run: Run) -> xr.Dataset:
    ds = run.ds("noise_projector")
    return ds.isel(cell=np.flatnonzero(np.isfinite(ds["var_offdiag_mean"].values)))


def fig1a_error(run: Run) -> str:
    ds = _projector(run)
    r = rel(ds["var_offdiag_mean"], ds["var_offdiag_haar"])
    return f"max {pct(r.max())} ({ds.sizes['cell']} cells, {ds.sizes['realisation']} realisations)"


def fig1a_chi2(run: Run) -> str:
    ds = _projector(run)
    z = (ds["var_offdiag_mean"] - ds["var_offdiag_haar"]) / ds["var_offdiag_se"]
    return f"{float((z**2).mean()):.2f} ({ds.sizes['cell']} cells)"


def fig1a_fit(run: Run) -> str:
    ds = _projector(run)
    P, N, v = (ds[k].values.astype(float) for k in ("P", "N", "var_offdiag_mean"))
    f = power_law_fit(P, N, v)
    out = f"a = {f.a:.3f} +- {f.a_se:.3f}, b = {f.b:+.3f} +- {f.b_se:.3f}"
    big = P >= 10 * N
    try:
        g = power_law_fit(P[big], N[big], v[big])
    except ValueError:
        return out + " (P >= 10N: too few cells to fit)"
    return out + f" (P >= 10N: {g.a:.3f}, {g.b:+.3f})"


def fig5a(run: Run) -> str:
    c = run.ds("perturbation_iid").isel(cell=0)
    ratio = c["delta_L_over_theta2"]
    spread = float((ratio.std("mode") / ratio.mean("mode")).max())
    mean = float((ratio.mean("mode") / c["delta_L_over_theta2_iid"]).mean())
    return (
        f"spread {pct(spread)}, mean {mean:.3f} sigma_x^2/2 (N = {int(c['N'])}, P = {int(c['P'])})"
    )


def _gbm_z(run: Run, lr: float, kind: str, ref: str = "gbm") -> tuple[np.ndarray, np.ndarray]:
    c = cells(run.ds("gbm"), lr=lr).isel(cell=0)
    z = (c[f"{kind}_wbar"] - c[f"{kind}_{ref}"]) / c[f"{kind}_wbar_se"]
    return np.abs(z.values), c["t_values"].values


def gbm_small_lr(run: Run) -> str:
    (zm, t), (zv, _) = (_gbm_z(run, 5e-4, k) for k in ("mean", "var"))
    at = np.isclose(t[:, None], [0.5, 1.0, 2.0]).any(axis=1)
    times = ", ".join(f"{x:g}" for x in t[at])
    gap = "" if np.isclose(t, 0.5).any() else " (no t = 0.5 in the grid)"
    return (
        f"|z| <= {max(zm[at].max(), zv[at].max()):.2f} at t = {times}{gap}; "
        f"<= {max(zm.max(), zv.max()):.2f} over all {t.size} times"
    )


def gbm_large_lr(run: Run) -> str:
    zv, _ = _gbm_z(run, 0.2, "var")
    ze, _ = _gbm_z(run, 0.2, "var", "discrete")
    return f"variance |z| up to {zv.max():.1f} vs GBM; {ze.max():.2f} vs the exact recursion"


def sgf_additive(run: Run) -> str:
    c = cells(run.ds("sgf"), dynamics="sgf_additive").isel(cell=0)
    return f"{pct(float(c['frobenius_error_eq30']))} (N = {int(c['N'])}, dt = {float(c['dt']):g})"


def sgf_cell(run: Run) -> str:
    ds = run.ds("sgf")
    errors = ds["frobenius_error_eq30"].values
    parts = [f"{d} {pct(e)}" for d, e in zip(ds["dynamics"].values, errors, strict=True)]
    return ", ".join(parts) + f" (N = {int(ds['N'][0])})"


def appc(run: Run) -> str:
    ds = run.ds("appc")
    w, wo = (cells(ds, sampling=s).isel(cell=0) for s in ("with", "without"))
    v1, s1, v2, s2 = (
        float(c[k]) for c in (w, wo) for k in ("var_w_sgd_wstar", "var_w_sgd_wstar_se")
    )
    r = v2 / v1
    theory = float(wo["noise_prefactor"] / w["noise_prefactor"])
    se = r * np.hypot(s1 / v1, s2 / v2)
    return f"{r:.4f} +- {se:.4f} vs {theory:.4f} (N = {int(w['N'])}, P = {int(w['P'])})"


def table1(run: Run) -> str:
    ds = run.ds("table1")
    ok = (ds["agrees_student"] * ds["agrees_loss"] * ds["agrees_fluctuations"]).values
    over = ds.isel(cell=np.flatnonzero(ds["overparameterised"].values == 1))
    return (
        f"{int(ok.sum())}/{ok.size} rows agree; over-parameterised loss <= "
        f"{float(over['train_loss'].max()):.1e}, fluctuations <= {float(over['var_w'].max()):.1e}"
    )


def fig3_edge(run: Run) -> str:
    c = run.ds("relaxation").isel(cell=0)
    return f"{float(c['omega_min_over_mp_edge']):.2f} x (N = {int(c['N'])}, P = {int(c['P'])})"


def fig5b_hump(run: Run) -> str:
    c = run.ds("perturbation_correlated").isel(cell=0)
    r = c["delta_L_over_theta2_mean"].isel(theta=-1) / c["delta_L_over_theta2_iid"]
    n = c.sizes["realisation"]
    return f"max {float(r.max()):.2f} x sigma_x^2/2 ({n} realisations, N = {int(c['N'])})"


# ----------------------------------------------------------- issue 4: two layers (000)


def _ivfr(run: Run) -> xr.Dataset:
    return sgd(run.ds("two_layer_ivfr")).isel(cell=0)


def tl_local(run: Run) -> str:
    c = _ivfr(run)
    v = {k: float(c[k]) for k in ("tr_ratio_cov2_b", "err_cov2_b", "tr_ratio_cov1_b", "err_cov1_b")}
    return (
        f"tr cov(dW2)/theory {v['tr_ratio_cov2_b']:.3f}, median err {pct(v['err_cov2_b'])}; "
        f"tr cov(dW1)/tr M11 {v['tr_ratio_cov1_b']:.3f}, median err {pct(v['err_cov1_b'])}"
    )


def tl_ivfr(run: Run) -> str:
    c = _ivfr(run)
    n = int(np.isfinite(c["ivfr_variance"].isel(replica=0)).sum())
    return (
        f"Spearman {float(c['ivfr_spearman_mean']):.3f}, slope {float(c['ivfr_slope_mean']):.3f} "
        f"({n} modes, mean over replicas)"
    )


def tl_drop(run: Run) -> str:
    c = _ivfr(run)
    lin = c["delta_L1_linear"].values[int(c["N_o"]) * int(c["N_i"]) :]
    drop = float(c["delta_L1_drop_ratio"])
    return f"{drop:.2g}; linear theory there: max |.| = {np.abs(lin).max():g}"


def tl_drift(run: Run) -> str:
    c = _ivfr(run)
    d2 = f"{float(c['D2_w0']):.2f} -> {float(c['D2_local']):.2f}"
    tr_gamma = f"{float(c['trG_w0']):.2f} -> {float(c['trG_local']):.2f}"
    return f"{float(c['d2_drift_factor']):.3f} ({d2}); tr Gamma {tr_gamma}"


def tl_protocol_a(run: Run) -> str:
    c = _ivfr(run)
    return (
        f"cov(dW2) {pct(float(c['err_cov2_a_eq66']))} (trace ratio "
        f"{float(c['tr_ratio_cov2_a']):.2f}); cov(dW1) {pct(float(c['err_cov1_a_eq66']))}"
    )


def tl_default_b(run: Run) -> str:
    ds = sgd(run.ds("two_layer_fig6"))
    e = np.concatenate([ds["err_cov1_b"].values, ds["err_cov2_b"].values])
    return (
        f"{pct(e.min())}-{pct(e.max())} ({ds.sizes['cell']} SGD cells, N_i = {int(ds['N_i'][0])}, "
        f"N_h = {int(ds['N_h'][0])})"
    )


# ------------------------------------------------------------ issue 5: mean field (002)


def _sum(run: Run, name: str) -> xr.Dataset:
    return run.ds(f"{name}.summary")


def _pm(ds: xr.Dataset, key: str, digits: int = 3) -> str:
    return f"{float(ds[key]):.{digits}f} +- {float(ds[key + '_se']):.{digits}f}"


def e1_slope(run: Run) -> str:
    s = _sum(run, "e1_width")
    n = s["N"].values
    return (
        f"{_pm(s, 'slope_late')} (chi2/dof {float(s['chi2_late']):.2f}; sup over all t "
        f"{_pm(s, 'slope_sup')}), N = {n.min():g} ... {n.max():g}"
    )


def e1_bias(run: Run) -> str:
    s = _sum(run, "e1_width")
    return (
        f"{float(s['bias0_smallest_N']):.5f} +- {float(s['bias0_smallest_N_se']):.5f} vs "
        f"{float(s['bias_exact_t0'][0]):.5f}, z = {float(s['bias0_z']):.2f} "
        f"({int(s['seeds'][0])} seeds at N = {int(s['N'][0])})"
    )


def e1_grid(run: Run) -> str:
    return f"{float(_sum(run, 'e1_width')['grid_difference']):.2g}"


def e1_eq12(run: Run) -> str:
    s = _sum(run, "e1_width")
    return (
        f"Eq. 12 {float(s['eq12_rel_error_max']):.2g}; e/(dt D) in "
        f"[{float(s['euler_excess_rel_min']):.4f}, {float(s['euler_excess_rel_max']):.4f}]; "
        f"Taylor ratio in [{float(s['euler_excess_taylor_min']):.4f}, "
        f"{float(s['euler_excess_taylor_max']):.4f}]"
    )


def e2_mass(run: Run) -> str:
    s = _sum(run, "e2_pde")
    return (
        f"mass drift <= {float(s['max_mass_drift']):.2g}, min p = "
        f"{float(s['min_density_overall']):.2g}; density growth {float(s['density_growth']):.2f} "
        f"(bound {float(s['max_density_growth']):g}, refused = {int(s['comparison_refused'])})"
    )


def e2_loss(run: Run) -> str:
    s = _sum(run, "e2_pde")
    out = []
    for scheme in s["scheme"].values:
        errs = " ".join(f"{x:.3g}" for x in s["loss_error"].sel(scheme=scheme).values)
        out.append(f"{scheme} {errs} (order {float(s['loss_order'].sel(scheme=scheme)):.2f})")
    return "; ".join(out) + f" for n = {', '.join(str(n) for n in s['n'].values)}"


def e2_density(run: Run) -> str:
    s = _sum(run, "e2_pde")
    m = s.sel(scheme="muscl")
    n = int(s["n"][-1])
    return f"{float(m['density_error'][-1]):.2g} at n = {n}, order {float(m['density_order']):.2f}"


def e2_hist(run: Run) -> str:
    s = _sum(run, "e2_pde")
    return f"{_pm(s, 'hist_slope')} (N = {s['N'].values.min():g} ... {s['N'].values.max():g})"


def e3_slopes(run: Run) -> str:
    s = _sum(run, "e3_small_output")
    return (
        f"loss {_pm(s, 'slope_loss_error', 4)}, shift {_pm(s, 'slope_shift_error', 4)}, "
        f"w~ {_pm(s, 'slope_wtilde_displacement', 4)}"
    )


def e3_floor(run: Run) -> str:
    s = _sum(run, "e3_small_output")
    f = s["eps_floor_fraction"].values
    span = f"{f.min():.3f}" if np.isclose(f.min(), f.max()) else f"{f.min():.3f}-{f.max():.3f}"
    return f"{span} L(0) (all {f.size} eps)"


def e3_w0(run: Run) -> str:
    s = _sum(run, "e3_small_output").sortby("w0_scale")
    e, se, g, w = (
        s[k].values for k in ("w0_loss_error", "w0_loss_error_se", "w0_growth", "w0_scale")
    )
    return (
        f"{e[0]:.3f} +- {se[0]:.3f} at w0(0) = {w[0]:g}, {e[-1]:.3f} at {w[-1]:g}; "
        f"growth {g.min():.2f}-{g.max():.2f} x target"
    )


def e4_slopes(run: Run) -> str:
    s = _sum(run, "e4_gaussian")
    return (
        f"b {_pm(s, 'slope_b')}, A rel {_pm(s, 'slope_A_rel')} (abs {float(s['slope_A_abs']):.3f})"
    )


def e4_stationary(run: Run) -> str:
    s = _sum(run, "e4_gaussian").sel(point="b0_nonzero")
    b = ", ".join(f"{x:.3f}" for x in s["b_star"].values)
    lam = ", ".join(f"{x + 0.0:.4f}" for x in s["lambda_H"].values)
    dr = np.abs(s["rate_fit"] - s["rate_theory"]).max()
    return (
        f"b* = ({b}), |db/dt| {float(s['stationary_residual']):.2g}, H_w0w0 = "
        f"{float(s['H_w0w0']) + 0.0:.2g}, |H_w0w~| {float(s['H_w0wt_norm']):.2g}, "
        f"lambda = ({lam}), |rate - 2 lambda| <= {float(dr):.1g}"
    )


def e4_zero(run: Run) -> str:
    s = _sum(run, "e4_gaussian").sel(point="b0_zero")
    b = ", ".join(f"{x:g}" for x in s["b_star"].values)
    return (
        f"({b}): residual {float(s['stationary_residual']):.2g}, H_w0h "
        f"{float(s['H_w0wt_norm']):.4f}, growth {float(s['rate_fit'].max()):.7f} "
        f"(2 lambda {float(s['rate_theory'].max()):.7f})"
    )


def e5_rate(run: Run) -> str:
    s = _sum(run, "e5_linearisation")
    return (
        f"{float(s['rate']):.10f} +- {float(s['rate_se']):.1g} vs 2 theta_min "
        f"{2 * float(s['theta'][0]):.10f} ({float(s['rate_rel_error']):.2g} relative); "
        f"K's Gram off by >= {pct(float(s['rate_nearest_kappa_rel']))}"
    )


def e5_eq18(run: Run) -> str:
    s = _sum(run, "e5_linearisation")
    g = s["grid_order"].values
    d = s["delta"].values
    return (
        f"Eq. 18 slope {_pm(s, 'eq18_slope')} (delta {d.min():g} ... {d.max():g}); "
        f"grid order {g.min():.2f}-{g.max():.2f} (n = {', '.join(str(n) for n in s['n'].values)})"
    )


# ------------------------------------------------------------------ issue 6: workflow


def figures(run: Run) -> str:
    n = len(list((run.results / "figures").rglob("*.png")))
    return f"{n} figures (PNG) in results/figures (issue 11 added figures)"


def agreement_rows(run: Run) -> str:
    return f"{len(run.agreement())} rows (issue 11 re-split the rows per sweep and lr)"


# ---------------------------------------------------- issue 7: exact discrete theory


def _lr_cell(run: Run, p_over_n: float, lr: float) -> xr.Dataset:
    return cells(sgd(run.ds("lr_S10")), p_over_n=p_over_n, lr=lr).isel(cell=0)


def discrete_point(p_over_n: float, lr: float) -> Callable[[Run], str]:
    def new(run: Run) -> str:
        c = _lr_cell(run, p_over_n, lr)
        if int(c["diverged"]) or float(c["second_moment_radius"]) >= 1:
            raise Missing(f"the cell P/N = {p_over_n:g}, lr = {lr:g} is beyond the stability limit")
        v, se = float(c["var_w_sgd_wstar"]), float(c["var_w_sgd_wstar_se"])
        exact = float(c["eig_M_discrete"].sum()) / int(c["N"])
        r = v / exact
        e_ex = np.nanmedian(rel(c["eig_M_sgd"], c["eig_M_discrete"]))
        e_30 = np.nanmedian(rel(c["eig_M_sgd"], c["eig_M_lyapunov"]))
        eq30 = v / float(c["var_w_theory"]) - 1
        return (
            f"{100 * (r - 1):+.3f} % ({100 * r * se / v:.2f}); {100 * eq30:+.1f} %; "
            f"{pct(e_ex)} / {pct(e_30)} (N = {int(c['N'])})"
        )

    return new


def discrete_lr_max(run: Run) -> str:
    ds = cells(sgd(run.ds("lr_S10")), p_over_n=2.0)
    c = ds.isel(cell=0)
    lr_max, lin = float(c["lr_max_second_moment"]), 2 / float(c["omega_max"])
    return f"{lr_max:.2f} vs {lin:.1f} ({lin / lr_max:.1f}x; N = {int(c['N'])}, P = {int(c['P'])})"


def discrete_bracket(run: Run) -> str:
    rows = [
        r for r in run.agreement() if r["figure"].startswith("lr_S") and "diverged" in r["compared"]
    ]
    if not rows:
        raise Missing("no divergence row in agreement.csv")
    parts = [
        f"{r['figure']}: mean dev {float(r['mean_rel_dev']):g} over {r['points']} cells"
        for r in rows
    ]
    return (
        "not in merged outputs: the bracket runs (R = 256, 2e4 steps at 0.95-1.05 lr_max) are a "
        "test; the sweep's observed-vs-predicted divergence row (0 = all agree): "
        + "; ".join(parts)
    )


def discrete_workflow(run: Run) -> str:
    if run.config != "test":
        raise Missing(f"measured on config/test.yaml (lr_S5); this run is {run.config}")
    ds = sgd(run.ds("lr_S5"))
    ds = ds.isel(cell=np.flatnonzero((ds["diverged"] == 0) & (ds["second_moment_radius"] < 1)))
    exact = ds["eig_M_discrete"].sum("mode") / ds["N"]
    r = (ds["var_w_sgd_wstar"] / exact - 1).values
    s = (ds["var_w_sgd_wstar_se"] / exact).values
    return (
        f"{pct(r.mean())} +- {pct(np.sqrt((s**2).sum()) / r.size)} over {r.size} stable cells "
        f"(max |z| {np.abs(r / s).max():.1f})"
    )


# ---------------------------------------------------------------------- the old values

P2, PP = "paper", "paper (slow test at the paper's parameters)"
OLD: list[Old] = [
    # issue 2: stop 8 note, "Issue 2 - foundation", Measured
    Old(2, "Identities: Eq. 30 vs scipy Lyapunov; Q antisymmetric; Eq. 17 vs enumeration; "
        "L(w*) = L*; noise at w* for N > P", "unit tests",
        "4.1e-15 / 1.2e-14; 5.3e-16; 1.5e-16-8.7e-16; 1.3e-16; 4.6e-32",
        f"{N8}, Identities", UNIT),
    Old(2, "P/N = 2 point: SGD vs Eq. 30, median / max / Frobenius rel. error", PP,
        "0.75 %, 2.6 %, 3.8 % (N = 100, P = 200)", f"{N8}, Agreement", point_eq30),
    Old(2, "P/N = 2 point: Eq. 34 median error; Eq. 33 extreme-eigenvalue error", PP,
        "191 %; 54.5 %", f"{N8}, Agreement", point_eq34_eq33),
    Old(2, "P/N = 2 point: rms rel. error Eq. 30 vs Eq. 33", PP, "1.0 % vs 20.8 %",
        f"{N8}, Agreement", point_rms),
    Old(2, "P/N = 2 point: mean temporal variance / (tr M/N) - 1", PP, "+0.07 %",
        f"{N8}, Agreement", point_variance),
    Old(2, "Fig. 4a: |var_w_sgd / (tr M/N) - 1|, every N < P (P = 200)", P2,
        "<= 1.07 % (largest at N = 10 and 190)", f"{N8}, Paper config", fig4a_variance),
    Old(2, "Fig. 4b: SGD vs Eq. 30 eigenvalues, per-cell median / max rel. error (N = 100)",
        P2, "median <= 0.90 %, max <= 3.8 %", f"{N8}, Paper config", fig4b_spectra),
    Old(2, "Fig. 4b: Eq. 33 extreme-eigenvalue error vs P/N", P2,
        "98 % at P/N = 1.05 -> 21 % at 4", f"{N8}, Paper config", fig4b_eq33),
    Old(2, "Edge: N > P cells have fluctuations_vanish = 1; their variance", "test (e2e)",
        "flag 1, var ~ 1e-33", f"{N8}, Edge cells", edge_vanish),
    Old(2, "Edge: lr = 50 at N = 10 diverged, both sampling modes", "test (e2e)",
        "diverged = 1 (lr omega_max ~ 15)", f"{N8}, Edge cells", edge_diverged),
    Old(2, "Reproducible / incremental: --cores 1 vs 2; add-one-value dry run", "test (e2e)",
        "bit-identical; data 1, theory 1, sgd 1, merge 1, figures 3",
        f"{N8}, Reproducible/incremental", PROC),
    Old(2, "SGD kernel (N = 100, S = 10, R = 64, one core); x plain loop", "benchmark",
        "2.8-3.5e6 replica-steps/s; 11-13.5x", f"{N8}, Performance", BENCH),
    Old(2, "Default config wall time on 2 cores", "default (benchmark)", "209 s (245 jobs)",
        f"{N8}, Performance", BENCH),
    Old(2, "Suite through the README command (clean clone)", "tests",
        "201 passed, 5 min 22 s", f"{N8}, Tests", PROC),
    # issue 3: stop 8 note, "Issue 3 - rest of Section II", Measured
    Old(3, "Noise at w*: empirical vs Eq. 17 eigenvalues (median, max), trace",
        "paper (slow test: 4e5 batches, N = 100)",
        "median 0.15-0.19 %, max 0.58-1.09 %, trace within 0.09 %", f"{N8}, Noise",
        noise_spectrum),
    Old(3, "Noise at w*: relative Frobenius error vs Eq. 17", "paper (slow test)",
        "0.86-1.70 %", f"{N8}, Noise",
        "not in merged outputs: the noise cells store spectra and traces, not the matrices"),
    Old(3, "tr(Eq. 20) / tr(Eq. 17) vs P/N", "paper (slow test)",
        "20.9 at 1.1, 2.09 at 2, 1.03 at 50", f"{N8}, Noise", noise_eq20),
    Old(3, "Fig. 1a: max rel. error vs the Haar formula", "default (5 realisations)",
        "0.52 %", f"{N8}, Fig. 1a", fig1a_error),
    Old(3, "Fig. 1a: chi2/dof of measured vs Haar", "paper (20 realisations)", "0.96",
        f"{N8}, Fig. 1a", fig1a_chi2),
    Old(3, "Fig. 1a: fitted exponents var ~ P^a N^b", "paper (20 realisations)",
        "a = -1.86 +- 0.02, b = +0.84 +- 0.05 (P >= 10N: -1.973, +0.980)",
        f"{N8}, Fig. 1a", fig1a_fit),
    Old(3, "Fig. 5a: spread of dL/theta^2 across modes; mean / (sigma_x^2/2)",
        "default (N = 100, P = 2000; the note names none, the default run reproduces it)",
        "3.3 %, 0.998", f"{N8}, Fig. 5a", fig5a),
    Old(3, "GBM (P = 20, lr = 5e-4, S = 1): |z| of mean and variance at t = 0.5, 1, 2",
        "paper = default", "<= 2.05", f"{N8}, GBM", gbm_small_lr),
    Old(3, "GBM at lr = 0.2: variance |z| vs GBM (the continuum fails)", "paper = default",
        "up to 19", f"{N8}, GBM", gbm_large_lr),
    Old(3, "SGF additive vs Eq. 30, Frobenius (N = 100, P/N = 2, dt = lr)",
        "paper (slow test)", "5.3 %", f"{N8}, SGF", sgf_additive),
    Old(3, "SGF figure cell vs Eq. 30, Frobenius: SGD, SGF additive, multiplicative",
        "default (N = 50)", "6.4 %, 6.0 %, 6.2 %", f"{N8}, SGF", sgf_cell),
    Old(3, "App. C: tr M about w*, without / with replacement, vs (P-S)/(P-1)",
        "default (N = 50, P = 200)", "0.9546 +- 0.0018 vs 0.9548", f"{N8}, App. C", appc),
    Old(3, "Table 1: rows agreeing with the paper; over-parameterised loss, fluctuations",
        "not stated", "every row; ~1e-30, ~1e-33", f"{N8}, Table 1", table1),
    Old(3, "Fig. 5b (correlated inputs): hump of dL/theta^2 averaged over data sets",
        "not stated", "up to 1.9 x sigma_x^2/2", f"{N8}, Beyond the paper", fig5b_hump),
    Old(3, "Fig. 3: omega_min / Marchenko-Pastur edge", "default (N = 50, P = 52)", "2.8 x",
        f"{N8}, Noticed / left", fig3_edge),
    # issue 4: stop 8 note, "Issue 4 - two-layer network", Measured
    Old(4, "Identities: drift vs Hessian / FD; noise vs enumeration; Eq. 64; Eq. 70; "
        "gradient-flow end; conservation", "unit tests",
        "4e-16 / 3e-11; 2e-16; 1.8e-14; 1.9e-15; 3.4e-14 (adaptive); ~dt^4",
        f"{N8}, Identities",
        UNIT + " (cells store |W2W1 - w*|_F as dist_w0, not relative to |w*|)"),
    Old(4, "Protocol (b), Glorot N_i = 50, N_h = 40, P = 1000: trace ratios, median errors",
        PP, "tr cov(dW2) 1.015, err 3.2 %; tr cov(dW1) 0.994, err 5.5 %",
        f"{N8}, Acceptance", tl_local),
    Old(4, "IVFR along cov(dW2): Spearman rho, log-log slope", PP,
        "0.999, 1.058 (40 modes)", f"{N8}, Acceptance", tl_ivfr),
    Old(4, "dL along cov(vec dW1), i > N_i / i <= N_i; linear theory there", PP,
        "0.0019; exactly 0", f"{N8}, Acceptance", tl_drop),
    Old(4, "Drift: D2 factor (D2 at W^0 -> local); tr Gamma", PP,
        "0.129 (1.97 -> 0.25); 2.78 -> 0.54", f"{N8}, Acceptance", tl_drift),
    Old(4, "Protocol (a): median error cov(dW2) (trace ratio), cov(dW1) vs Eq. 66 at W^0",
        PP, "99.9 % (0.09); 30 %", f"{N8}, Protocol (a) vs (b)", tl_protocol_a),
    Old(4, "Protocol (b), default cells: median errors cov(dW1), cov(dW2)",
        "default (N_i = 20, N_h = 15)", "0.7-2.5 %", f"{N8}, Protocol (a) vs (b)",
        tl_default_b),
    Old(4, "Two-layer SGD kernel (N_i = 50, N_h = 40, R = 64); x plain loop", "benchmark",
        "8.0-8.5e5 replica-steps/s; 10.1-10.8x", f"{N8}, Performance", BENCH),
    # issue 5: stop 9 note, "Issue 5", Measured (the README's mean-field table repeats them)
    Old(5, "E1: slope of RMS sup_{t>=1} |L_N - L_inf| (chi2/dof; sup over all t)", P2,
        "-0.512 +- 0.009 (0.22; -0.527 +- 0.010)", f"{N9}, E1; README", e1_slope),
    Old(5, "E1: t = 0 bias at N = 10 vs (1/2N) int Var_p0[phi] dmu", P2,
        "0.02709 +- 0.00161 vs 0.02605, z = 0.64 (4000 seeds)", f"{N9}, E1; README",
        e1_bias),
    Old(5, "E1: L_inf grid convergence (finest two reference grids)", P2, "5.5e-6",
        f"{N9}, E1", e1_grid),
    Old(5, "E1: Eq. 12 rel. error (RK4); Euler e/(dt D); Taylor ratio", P2,
        "1.1e-7; [0.0067, 0.0106]; [1.0003, 1.015]", f"{N9}, E1; README", e1_eq12),
    Old(5, "E2: mass drift, min p; density growth (bound 10)", P2,
        "<= 7.3e-15, 4.9e-22; 3.74", f"{N9}, E2; README", e2_mass),
    Old(5, "E2: sup_t loss error per grid n (order between the two finest)", P2,
        "upwind 1.10e-4 4.38e-5 2.07e-5 9.81e-6 (1.08); "
        "muscl 1.23e-4 2.36e-5 4.97e-6 9.88e-7 (2.33)", f"{N9}, E2; README", e2_loss),
    Old(5, "E2: MUSCL density vs probes at the finest n; order", P2,
        "2.5e-3 at n = 256; 2.03", f"{N9}, E2", e2_density),
    Old(5, "E2: histogram distance slope in N", P2, "-0.491 +- 0.005",
        f"{N9}, E2; README", e2_hist),
    Old(5, "E3: slopes in eps of the loss, shift and w~ errors", P2,
        "1.992 +- 0.0006, 1.993 +- 0.0004, 1.995 +- 0.0003", f"{N9}, E3; README",
        e3_slopes),
    Old(5, "E3: Eq. 26 without the floor misses by", P2, "0.104 L(0)", f"{N9}, E3",
        e3_floor),
    Old(5, "E3: error at a fixed O(1) target vs w0(0); output-weight growth", P2,
        "0.142 +- 0.005 at 1e-3, 0.146 at 0.3; 1.15 x", f"{N9}, E3; README", e3_w0),
    Old(5, "E4: slopes in s of |b_particles - b_ode| and of A's error", P2,
        "2.004 +- 0.002, 2.014 +- 0.006 (abs 4.014)", f"{N9}, E4; README", e4_slopes),
    Old(5, "E4: stationary state with b0 != 0", P2,
        "b* = (2.582, 2.948, 2.362), |db/dt| 2.4e-16, H_w0w0 = 0, 9e-17, "
        "lambda = (-0.0537, 0, 0.4059), <= 1e-7", f"{N9}, E4; README", e4_stationary),
    Old(5, "E4: b0 = 0 counterexample (0, 2, 0)", P2,
        "residual 3.4e-17, H_w0h 1.6544, growth 3.3088378", f"{N9}, E4", e4_zero),
    Old(5, "E5: late decay rate vs 2 theta_min; K's Gram eigenvalues", P2,
        "0.0765037886 +- 4.8e-9 vs 0.0765037936 (6.5e-8); >= 30.5 % off",
        f"{N9}, E5; README", e5_rate),
    Old(5, "E5: Eq. 18 error slope in delta; grid order of R", P2,
        "1.008 +- 0.039; 2.01-2.03", f"{N9}, E5; README", e5_eq18),
    Old(5, "Particle and 2-D solver cost scaling", "benchmark",
        "2-5 us per particle-step, 12-14x a loop; O(n^3)", f"{N9}, Cost scaling", BENCH),
    # issue 6: stop 9 note, "Issue 6", Measured
    Old(6, "SLURM: test sweep as SLURM jobs; wall time; merged datasets equal to local",
        "test (cluster)", "96 SLURM jobs of 149; 403 s; equal but elapsed_s, cpu_seconds",
        f"{N9}, SLURM", PROC),
    Old(6, "Failing cell on SLURM reported as failed", "test (cluster)",
        "after 222 s (< 600 s timeout)", f"{N9}, Failing cell", PROC),
    Old(6, "Kill/recover (SIGTERM, SIGINT, SIGKILL): rerun set = interrupted set", "test",
        "equal for all 3 signals", f"{N9}, Kill/recover", PROC),
    Old(6, "No-op rerun; add one p_over_n value (job table)", "test", "2.1 s; 9 jobs",
        f"{N9}, No-op rerun", PROC),
    Old(6, "Cache: the second checkout takes data + theory outputs from the cache", "test",
        "16 of 16", f"{N9}, Cache", PROC),
    Old(6, "DAG size of config/paper.yaml", "paper (dry run)", "627 jobs (< 1e4)",
        f"{N9}, DAG size", PROC),
    Old(6, "Figures produced (all in the report)", "test / default",
        "40 (test), 46 (default)", f"{N9}, Report", figures),
    Old(6, "Agreement-table rows", "test", "51", f"{N9}, Final review", agreement_rows),
    # issue 7: stop 9 note, "Issue 7", Measured
    Old(7, "Identity: E_B[H_B M H_B] vs enumeration; recursion residual; dense solve",
        "unit tests", "8e-17-7e-16; <= 4.4e-15; 8e-15 / 3e-14", f"{N9}, Identity", UNIT),
    Old(7, "lr -> 0: |M_discrete - M_Eq30| / |M_Eq30| at lr = 1e-3, 1e-2, 1e-1",
        "unit test", "1.60e-4, 1.60e-3, 1.63e-2 (slope 1.004)", f"{N9}, lr -> 0",
        "not in merged outputs: needs the full matrices; cells store spectra only"),
    *[
        Old(7, f"S = 10, P/N = {p:g}, lr = {lr:g}: tr SGD/exact - 1 (s.e.); "
            "tr SGD/Eq. 30 - 1; median eig. error exact / Eq. 30",
            "paper (helper run: N = 100, R = 64, 4e5 steps)", old,
            f"{N9}, Agreement table", discrete_point(p, lr))
        for p, lr, old in [
            (2, 0.5, "+0.07 % (0.07); +2.9 %; 0.37 % / 3.7 %"),
            (2, 1.0, "+0.03 % (0.05); +5.8 %; 0.24 % / 7.4 %"),
            (2, 2.0, "+0.001 % (0.04); +12.4 %; 0.18 % / 15.6 %"),
            (4, 0.5, "+0.08 % (0.06); +2.9 %; 0.25 % / 3.4 %"),
            (4, 1.0, "+0.002 % (0.04); +5.8 %; 0.21 % / 6.9 %"),
            (4, 2.0, "-0.03 % (0.03); +12.4 %; 0.16 % / 14.6 %"),
        ]
    ],
    Old(7, "Without replacement, P/N = 2, lr = 2: tr SGD/exact - 1", "helper run",
        "-0.06 % +- 0.04 %", f"{N9}, Agreement",
        "not in merged outputs: the lr sweeps of every config sample with replacement only"),
    Old(7, "Second-moment limit lr_max vs 2/omega_max (N = 100, P = 200, S = 10)",
        "helper/test (bracket runs)", "17.0-17.4 vs 69-90 (4-5x stricter)",
        f"{N9}, Stability bracket", discrete_lr_max),
    Old(7, "Bracket: lr/lr_max = 0.95, 0.99 bounded; 1.01, 1.05 diverged",
        "test (R = 256, 2e4 steps)", "separates all four", f"{N9}, Stability bracket",
        discrete_bracket),
    Old(7, "Exact solve vs the SGD run of the same cell (N = 100, P = 200, S = 10, lr = 1)",
        "benchmark", "15 ms vs 83 s (~5,500x)", f"{N9}, Cost", BENCH),
    Old(7, "Through the workflow: tr SGD/exact - 1 over the stable lr_S5 cells", "test",
        "-3.4 % +- 2.3 % over 3 cells (max |z| 1.4)", f"{N9}, Through the workflow",
        discrete_workflow),
]  # fmt: skip


# --------------------------------------------------------------------------- the table


def run_config(run_dir: Path) -> str:
    """paper / default / test, from the newest Snakemake log's --configfile (else 'unknown')."""
    for log in sorted((run_dir / ".snakemake" / "log").glob("*.snakemake.log"), reverse=True):
        match = re.search(r"--configfile\s+\S*?(\w+)\.yaml", log.read_text(errors="replace"))
        if match:
            return {"config": "default"}.get(match.group(1), match.group(1))
    return "unknown"


def new_value(row: Old, run: Run) -> str:
    if isinstance(row.new, str):
        return row.new
    try:
        return row.new(run)
    except (Missing, KeyError, ValueError) as why:
        return f"not in merged outputs: {why}"


def cell(text: object) -> str:
    return str(text).replace("|", "\\|")


def table(run: Run | None) -> list[str]:
    """Markdown rows: with a run, issue | quantity | config | old | new; without, the sources."""
    last = "new" if run else "source"
    lines = [f"| issue | quantity | config | old | {last} |", "|---|---|---|---|---|"]
    for row in OLD:
        config = row.config
        named = set(re.findall(r"\b(paper|default|test)\b", config))
        if run and callable(row.new) and run.config not in named:
            config += f"; this run: {run.config}"
        end = new_value(row, run) if run else row.source
        parts = (row.issue, row.quantity, config, row.old, end)
        lines.append("| " + " | ".join(cell(p) for p in parts) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, nargs="?", help="a workflow run (holds results/)")
    parser.add_argument("--old", action="store_true", help="print the old values and sources only")
    parser.add_argument("--config", help="the run's config name (default: from its Snakemake log)")
    args = parser.parse_args(argv)
    if args.old or args.run_dir is None:
        print("\n".join(table(None)))
        return
    run = Run(args.run_dir / "results", args.config or run_config(args.run_dir))
    print(f"Run {args.run_dir} (config: {run.config})\n")
    print("\n".join(table(run)))


if __name__ == "__main__":
    main()
