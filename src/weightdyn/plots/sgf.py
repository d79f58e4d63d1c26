"""SGD vs stochastic gradient flow (paper 000 Eq. 13) and the GBM of Eq. 24: figures.

Both functions take xarray Datasets built by the physics modules and return Figures:

* :func:`fig_sgd_sgf` takes :func:`weightdyn.single_layer.sgf.spectrum_dataset`;
* :func:`fig_gbm` takes one or several :func:`weightdyn.single_layer.multiplicative.gbm_dataset`.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn.plots.common import styled

__all__ = ["fig_gbm", "fig_sgd_sgf"]

_MARKERS = ("o", "s", "^", "D", "v")


def _require(ds: xr.Dataset, names: Sequence[str], figure: str) -> None:
    missing = [n for n in names if n not in ds.variables]
    if missing:
        raise ValueError(f"{figure}: dataset lacks the variables {missing}; expected {names}")


@styled
def fig_sgd_sgf(ds: xr.Dataset) -> plt.Figure:
    """Sorted eigenvalues of the stationary covariance / (lr sigma_eps^2 / 2S): SGD, SGF, Eq. 30.

    Expects (as built by ``sgf.spectrum_dataset``) dims ``simulation`` (labels such as ``"SGD"``,
    ``"SGF additive"``, ``"SGF multiplicative"``) and ``mode`` (sorted descending), variables
    ``eig_M`` (simulation, mode), ``eig_M_se`` (simulation, mode), ``eig_M_lyapunov`` (mode),
    ``M_isotropic`` () and optionally ``frobenius_error`` (simulation); attributes ``N``, ``P``,
    ``lr``, ``batch_size``, ``sigma_eps2`` label the title. Simulations are drawn as symbols
    with +-2 s.e. bars (every mode), Eq. 30 as a dashed line, Eq. 34 as a dash-dotted line.
    """
    _require(ds, ("eig_M", "eig_M_se", "eig_M_lyapunov", "M_isotropic"), "fig_sgd_sgf")
    norm = float(ds["M_isotropic"])
    fig, ax = plt.subplots(figsize=(4.8, 3.8), layout="constrained")
    methods = list(ds["simulation"].values)
    n_methods = len(methods)
    idx = ds["mode"].values
    for k, name in enumerate(methods):
        m = ds.sel(simulation=name)
        # small horizontal offsets keep the methods' symbols apart
        shift = (k - (n_methods - 1) / 2) * 0.18
        label = str(name)
        if "frobenius_error" in ds and np.isfinite(float(m["frobenius_error"])):
            label += f" ($\\epsilon_F$ = {100 * float(m['frobenius_error']):.1f}%)"
        ax.errorbar(
            idx + shift,
            m["eig_M"].values / norm,
            yerr=2 * m["eig_M_se"].values / norm,
            fmt=_MARKERS[k % len(_MARKERS)],
            ms=3.0,
            mfc="none",
            mew=0.8,
            elinewidth=0.7,
            capsize=0,
            color=f"C{k}",
            label=label,
        )
    ax.plot(idx, ds["eig_M_lyapunov"].values / norm, "--", color="k", lw=1.0, label="Eq. 30")
    ax.axhline(1.0, color="0.4", ls="-.", lw=0.9, label="Eq. 34")
    ax.set_yscale("log")
    ax.set_xlabel("mode index $i$ (sorted)")
    ax.set_ylabel(r"eigenvalue of $M$ / $(\lambda\sigma_\epsilon^2/2S)$")
    title = "bars: $\\pm 2$ s.e."
    if "frobenius_error" in ds:
        title += r"; $\epsilon_F = \|M - M_{30}\|_F / \|M_{30}\|_F$"
    ax.legend(frameon=False, loc="lower left", title=title, title_fontsize=7.5)
    a = ds.attrs
    if {"N", "P", "lr", "batch_size", "sigma_eps2"} <= set(a):
        ax.set_title(
            f"$N = {a['N']}$, $P = {a['P']}$, $\\lambda = {a['lr']:g}$, $S = {a['batch_size']}$, "
            f"$\\sigma_\\epsilon^2 = {a['sigma_eps2']:g}$",
            fontsize=9,
        )
    return fig


@styled
def fig_gbm(datasets: xr.Dataset | Sequence[xr.Dataset]) -> plt.Figure:
    """Mean and variance of wbar = w - u vs SDE time t: SGD ensemble, GBM (Eq. 24), exact SGD.

    Expects one Dataset or a sequence (one colour each), each as built by
    ``multiplicative.gbm_dataset``: dim ``t`` (SDE time ``lr * step``), variables ``mean_wbar``,
    ``mean_wbar_se``, ``var_wbar``, ``var_wbar_se`` (SGD ensemble, drawn with +-2 s.e. bars),
    ``mean_gbm``, ``var_gbm`` (GBM with the sample's moments, solid), ``mean_discrete``,
    ``var_discrete`` (exact recursion, dashed), optionally ``var_gbm_gaussian`` (paper's
    ``<x^4> = 3<x^2>^2``, dotted); attributes ``lr`` and ``batch_size`` label the curves.
    Left panel: mean (linear); right panel: variance (log).
    """
    if isinstance(datasets, xr.Dataset):
        datasets = [datasets]
    need = ("mean_wbar", "mean_wbar_se", "var_wbar", "var_wbar_se", "mean_gbm", "var_gbm")
    need += ("mean_discrete", "var_discrete")
    for ds in datasets:
        _require(ds, need, "fig_gbm")
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3.3), layout="constrained")
    for k, ds in enumerate(datasets):
        color = f"C{k}"
        t = ds["t"].values
        a = ds.attrs
        label = f"$\\lambda = {a.get('lr', np.nan):g}$, $S = {a.get('batch_size', '?')}$"
        # the variance is 0 at t = 0 and is drawn on a log axis: keep t > 0 there
        positive = t > 0
        for ax, key, keep in ((left, "mean", slice(None)), (right, "var", positive)):
            ax.errorbar(
                t[keep],
                ds[f"{key}_wbar"].values[keep],
                yerr=2 * ds[f"{key}_wbar_se"].values[keep],
                fmt="o",
                ms=3.0,
                mfc="none",
                elinewidth=0.8,
                capsize=1.5,
                color=color,
                label=f"SGD, {label}",
            )
            ax.plot(t[keep], ds[f"{key}_gbm"].values[keep], "-", color=color, lw=1.1)
            ax.plot(t[keep], ds[f"{key}_discrete"].values[keep], "--", color="k", lw=0.8)
        if "var_gbm_gaussian" in ds:
            right.plot(t[positive], ds["var_gbm_gaussian"].values[positive], ":", color=color)
    left.set_ylabel(r"$\langle\bar w(t)\rangle$")
    right.set_ylabel(r"$\mathrm{Var}\,\bar w(t)$")
    right.set_yscale("log")
    for ax in (left, right):
        ax.set_xlabel(r"SDE time $t = \lambda\tau$")
    styles = [
        plt.Line2D([], [], color="0.3", lw=1.1, label=r"GBM, Eq. 24 (sample $\langle x^4\rangle$)"),
        plt.Line2D(
            [],
            [],
            color="0.3",
            ls=":",
            lw=1.1,
            label=r"GBM, $\langle x^4\rangle = 3$"
            r"$\langle x^2\rangle^2$",
        ),
        plt.Line2D([], [], color="k", ls="--", lw=0.8, label="exact SGD recursion"),
    ]
    left.legend(frameon=False, loc="upper right", title="bars: $\\pm 2$ s.e.", title_fontsize=7.5)
    right.legend(handles=styles, frameon=False, loc="best")
    P = {ds.attrs.get("P") for ds in datasets}
    w0 = {ds.attrs.get("wbar0") for ds in datasets}
    if len(P) == 1 and len(w0) == 1:
        fig.suptitle(
            f"$N = 1$, $\\sigma_\\epsilon = 0$, $P = {P.pop()}$ samples "
            f"$x_\\mu \\sim \\mathcal{{N}}(0, 1)$, $\\bar w(0) = {w0.pop():g}$",
            fontsize=9,
        )
    return fig
