"""Paper 000 Fig. 4: stationary weight fluctuations of the single-layer network, SGD vs theory.

Every figure takes a merged sweep of the ``single_layer`` experiment: cells along ``cell`` with
one coordinate per axis (``N``, ``P``, ``lr``, ..., ``dynamics``). One axis varies per figure
(N in panel a, P in panels b and c), data seeds are averaged; any other varying axis is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.ticker import NullFormatter

from weightdyn.plots.common import (
    mean_over_seeds,
    require_one_value,
    require_variables,
    styled,
)

#: losses below this are round-off zeros (interpolation) and are left out of log axes
ROUNDOFF_LOSS = 1e-12
SIM = {"marker": "o", "ms": 3.5, "capsize": 2, "lw": 0, "elinewidth": 1}
#: axes of the single-layer experiment that a figure may hold fixed (data_seed is averaged)
AXES = ("N", "P", "sigma_eps2", "lr", "batch_size", "sampling", "dynamics", "init", "init_scale")
SIMULATED = ("var_w_sgd", "eig_M_sgd")
NO_SIM = " (a sweep with dynamics: none is theory only)"


METHODS = {"sgd": "SGD", "sgf_additive": "SGF add.", "sgf_multiplicative": "SGF mult."}


def _checked(ds: xr.Dataset, free: Sequence[str], figure: str, simulated: bool) -> xr.Dataset:
    """The cells, refused if an axis outside ``free`` varies or if simulated values are needed
    and the cells have none."""
    require_one_value(ds, free, figure, AXES)
    if simulated:
        require_variables(ds, SIMULATED, figure, NO_SIM)
    return ds


def _method(sel: xr.Dataset) -> str:
    """Legend name of the cells' simulated dynamics (SGD unless the dynamics axis says SGF)."""
    if "dynamics" not in sel.coords:
        return "SGD"
    return METHODS.get(str(np.unique(sel["dynamics"].values)[0]), "SGD")


def _title(sel: xr.Dataset, fixed: Sequence[str]) -> str:
    sym = {
        "N": "N",
        "P": "P",
        "lr": r"\lambda",
        "batch_size": "S",
        "sigma_eps2": r"\sigma_\epsilon^2",
    }
    parts = []
    for key in fixed:
        values = np.unique(sel[key].values)
        if values.size == 1:
            parts.append(f"${sym[key]} = {values[0]:g}$")
    return ", ".join(parts)


@styled
def variance_vs_size(ds: xr.Dataset) -> plt.Figure:
    """Fig. 4a: mean temporal weight variance vs N/P (SGD, Eq. 30, Eq. 34), train and test loss."""
    sel = _checked(ds, ("N",), "variance_vs_size", simulated=True)
    sel = sel.assign_coords(n_over_p=("cell", (sel["N"] / sel["P"]).values))
    mean, spread = mean_over_seeds(sel, "n_over_p")
    x = mean["n_over_p"].values
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(4.2, 5.0), sharex=True, layout="constrained")
    sim_err = np.hypot(mean["var_w_sgd_se"], spread["var_w_sgd"])
    method = _method(sel)
    top.errorbar(
        x, mean["var_w_sgd"], yerr=sim_err, color="C0", label=f"{method} ($\\pm$1 s.e.)", **SIM
    )
    top.plot(x, mean["var_w_theory"], "-.", color="C3", label="Eq. 30: tr$M$/$N$")
    top.plot(x, mean["M_isotropic"], ":", color="k", label=r"Eq. 34: $\lambda\sigma_\epsilon^2/2S$")
    top.set_ylabel(r"$\langle\langle\delta w_i(t)^2\rangle_t\rangle_i$")
    for key, color, name in (("train_loss", "C0", "train"), ("test_loss", "C1", "test")):
        # a loss at round-off level (train loss of an interpolating net, N >= P) is not drawn
        sim = mean[key].where(mean[key] > ROUNDOFF_LOSS)
        theo = mean[f"{key}_theory"].where(mean[f"{key}_theory"] > ROUNDOFF_LOSS)
        err = np.hypot(mean[f"{key}_se"], spread[key])
        bottom.errorbar(x, sim, yerr=err, color=color, label=f"{name} ({method})", **SIM)
        bottom.plot(x, theo, "--", color=color, lw=1, label=f"{name} (Eqs. 9, 30)")
    bottom.set_yscale("log")
    bottom.set_ylabel("loss (train loss = 0 for $N \\geq P$)")
    bottom.set_xlabel("$N/P$")
    for ax in (top, bottom):
        ax.axvline(1.0, color="0.6", lw=0.8, zorder=0)
        ax.legend(frameon=False)
    top.set_title(_title(sel, ("P", "lr", "batch_size", "sigma_eps2")), fontsize=9)
    return fig


@styled
def spectra(ds: xr.Dataset) -> plt.Figure:
    """Fig. 4b: sorted eigenvalues of M / (lr sigma_eps^2 / 2S): SGD vs Eqs. 30, 33, 34."""
    sel = _checked(ds, ("P",), "spectra", simulated=True)
    sel = sel.assign_coords(p_over_n=("cell", (sel["P"] / sel["N"]).values))
    mean, spread = mean_over_seeds(sel, "p_over_n")
    fig, ax = plt.subplots(figsize=(4.6, 4.3), layout="constrained")
    ratios = mean["p_over_n"].values
    colors = plt.cm.viridis(np.linspace(0.0, 0.9, ratios.size))
    for ratio, color in zip(ratios, colors, strict=True):
        m = mean.sel(p_over_n=ratio)
        s = spread.sel(p_over_n=ratio)
        norm = float(m["M_isotropic"])
        valid = np.isfinite(m["eig_M_lyapunov"].values)
        idx = m["mode"].values[valid]
        sgd = m["eig_M_sgd"].values[valid] / norm
        err = np.hypot(m["eig_M_sgd_se"].values, s["eig_M_sgd"].values)[valid] / norm
        ax.fill_between(idx, sgd - 2 * err, sgd + 2 * err, color=color, alpha=0.25, lw=0)
        ax.plot(idx, sgd, "-", color=color, lw=1.4, label=f"$P/N = {ratio:.3g}$")
        ax.plot(idx, m["eig_M_lyapunov"].values[valid] / norm, "--", color="k", lw=0.8)
        ax.plot(idx, m["eig_M_detailed_balance"].values[valid] / norm, ":", color=color, lw=1.2)
    ax.axhline(1.0, color="k", ls="-.", lw=1.0)
    ax.set_yscale("log")
    ax.set_xlabel("mode index $i$ (sorted)")
    ax.set_ylabel(r"eigenvalue of $M$ / $(\lambda\sigma_\epsilon^2/2S)$")
    handles, labels = ax.get_legend_handles_labels()
    styles = [
        plt.Line2D([], [], color="0.3", lw=1.4, label=f"{_method(sel)} (band: $\\pm 2$ s.e.)"),
        plt.Line2D([], [], color="k", ls="--", lw=0.8, label="Eq. 30 (Lyapunov)"),
        plt.Line2D([], [], color="0.3", ls=":", lw=1.2, label="Eq. 33 (detailed balance)"),
        plt.Line2D([], [], color="k", ls="-.", lw=1.0, label="Eq. 34 (isotropic)"),
    ]
    fig.legend(handles=styles, loc="outside lower center", ncols=2, frameon=False)
    ax.legend(handles, labels, loc="lower left", frameon=False, ncols=2)
    ax.set_title(_title(sel, ("N", "lr", "batch_size", "sigma_eps2")), fontsize=9)
    return fig


@styled
def theory_extremes(ds: xr.Dataset) -> plt.Figure:
    """Fig. 4c: extreme eigenvalues of M (Eqs. 30, 33) and norm ratios vs P/N - 1 (theory)."""
    sel = _checked(ds, ("P",), "theory_extremes", simulated=False)
    norm = sel["M_isotropic"]
    n_valid = np.isfinite(sel["eig_M_lyapunov"]).sum("mode")
    for key in ("eig_M_lyapunov", "eig_M_detailed_balance"):
        sel[f"{key}_max"] = sel[key].isel(mode=0) / norm
        sel[f"{key}_min"] = sel[key].isel(mode=n_valid - 1) / norm
    sel = sel.assign_coords(excess=("cell", (sel["P"] / sel["N"] - 1).values))
    mean, spread = mean_over_seeds(sel, "excess")
    x = mean["excess"].values
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.0, 3.0), layout="constrained")
    for key, ls, name in (
        ("eig_M_lyapunov", "-", "Eq. 30"),
        ("eig_M_detailed_balance", "-.", "Eq. 33"),
    ):
        for end, color in (("max", "C3"), ("min", "C0")):
            y, e = mean[f"{key}_{end}"], spread[f"{key}_{end}"]
            left.plot(x, y, ls, color=color, label=f"{end} eigenvalue, {name}")
            left.fill_between(x, y - e, y + e, color=color, alpha=0.2, lw=0)
    left.axhline(1.0, color="k", ls=":", lw=0.8, label="Eq. 34")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
    left.set_xlabel("$P/N - 1$")
    left.set_ylabel(r"eigenvalue of $M$ / $(\lambda\sigma_\epsilon^2/2S)$")
    left.legend(frameon=False)
    for key, color, name in (
        ("q_over_c", "C2", r"$\|Q\|_F / \|C\|_F$ (Eq. 31)"),
        ("m_lyapunov_over_isotropic", "C4", r"$\|M_{30}\|_F / \|M_{34}\|_F$"),
    ):
        y, e = mean[key], spread[key]
        right.plot(x, y, "-", color=color, label=name)
        right.fill_between(x, y - e, y + e, color=color, alpha=0.2, lw=0)
    right.set_xlabel("$P/N - 1$")
    right.set_ylabel("Frobenius-norm ratio")
    right.legend(frameon=False)
    fig.suptitle(
        _title(sel, ("N", "lr", "batch_size", "sigma_eps2"))
        + f"; band: $\\pm$1 s.e. over {int(sel['data_seed'].to_series().nunique())} data sets",
        fontsize=9,
    )
    return fig
