"""Paper 002, experiment E1: finite-width networks against the infinite-width limit.

Every function takes a sweep's summary (``results/<sweep>.summary.nc``, made by
:func:`weightdyn.mean_field.width.summarize`). Theory (the mean-field loss of Eq. 11, the exact
t = 0 bias, the fitted power law) is drawn as lines, simulation as markers with +-1 standard-error
bars.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import errorbar, state_bars

SIM = {"ms": 3.5, "capsize": 2.0, "lw": 0, "elinewidth": 0.9}
RIGHT = {"frameon": False, "fontsize": 7, "loc": "outside right center"}


def _errorbar(ax, x, y, e, color, label, marker="o", mfc=None):
    errorbar(ax, x, y, yerr=e, fmt=marker, color=color, label=label,
             mfc=color if mfc is None else mfc, **SIM)  # fmt: skip


def _seeds(ds: xr.Dataset) -> str:
    return f"{ds.sizes['seed']} seeds" if "seed" in ds.dims else "seeds"


@styled
def gap_vs_N(ds: xr.Dataset) -> plt.Figure:
    """RMS over seeds of |L_N - L_inf|: sup over t, sup over t >= t_late, fixed times; N^s fit."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    n = ds["N"].values
    t_late = float(ds["t_late"])
    _errorbar(ax, n, ds["rms_sup"].values, ds["rms_sup_se"].values, "k",
              r"$\sup_t\,|L_N-L_\infty|$", marker="s", mfc="none")  # fmt: skip
    _errorbar(ax, n, ds["rms_late"].values, ds["rms_late_se"].values, "C3",
              rf"$\sup_{{t\geq {t_late:g}}}\,|L_N-L_\infty|$")  # fmt: skip
    markers = ["v", "^", "D", "<", ">"]
    for i, tf in enumerate(ds["t_fixed"].values):
        _errorbar(ax, n * 1.06 ** (i + 1), ds["rms_fixed"].values[:, i],
                  ds["rms_fixed_se"].values[:, i], f"C{i}", rf"$|L_N-L_\infty|$ at $t={tf:g}$",
                  marker=markers[i % len(markers)], mfc="none")  # fmt: skip
    grid = np.geomspace(n.min() / 1.5, n.max() * 1.5, 50)
    s, se = float(ds["slope_late"]), float(ds["slope_late_se"])
    ax.plot(grid, np.exp(float(ds["intercept_late"])) * grid**s, "-", color="C3", lw=1.0,
            label=rf"fit $\propto N^{{{s:.3f}\pm{se:.3f}}}$")  # fmt: skip
    ax.plot(grid, float(ds["rms_late"][0]) * np.sqrt(n[0] / grid), ":", color="0.4", lw=1.0,
            label=r"$\propto N^{-1/2}$")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("width $N$")
    ax.set_ylabel(r"RMS over seeds of $|L_N(t)-L_\infty(t)|$")
    fig.legend(**RIGHT)
    what = f"$\\pm$1 s.e. of the RMS over {_seeds(ds)} (delta method)"
    head = (
        rf"grid error of $L_\infty$: {float(ds['grid_difference']):.1e}; fixed-time markers "
        r"shifted right by factors $1.06^k$ for legibility" + "\n{bars}"
    )
    state_bars(fig, ax.set_title("", fontsize=8), what, head)
    return fig


@styled
def bias_vs_N(ds: xr.Dataset) -> plt.Figure:
    """|E L_N - L_inf| at the fixed times vs N (open: negative mean), exact t = 0 bias line."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    n = ds["N"].values
    grid = np.geomspace(n.min() / 1.5, n.max() * 1.5, 50)
    ax.plot(
        grid,
        float(ds["var_phi"]) / (2 * grid),
        "-",
        color="k",
        lw=1.1,
        label=r"exact $t=0$: $\frac{1}{2N}\int\mathrm{Var}_{p_0}[\phi(\mathbf{w},x)]\,d\mu$",
    )
    markers = ["o", "s", "D", "^", "v"]
    for i, tf in enumerate(ds["t_fixed"].values):
        y, e = ds["bias"].values[:, i], ds["bias_se"].values[:, i]
        x, c, m = n * 1.08**i, f"C{i}", markers[i % len(markers)]
        a = np.abs(y)
        lower = np.minimum(e, 0.9 * a)  # a log axis cannot show the part of the bar below 0
        errorbar(ax, x, a, yerr=[lower, e], fmt="none", ecolor=c, elinewidth=0.9, capsize=2.0,
                 marker_size=3.8)  # fmt: skip
        ax.plot(x[y > 0], a[y > 0], m, color=c, ms=3.8, label=rf"$t={tf:g}$")
        ax.plot(x[y <= 0], a[y <= 0], m, color=c, ms=3.8, mfc="none")
    ax.plot([], [], "o", color="0.4", mfc="none", ms=3.8, label="open: negative mean")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("width $N$")
    ax.set_ylabel(r"$|\mathbb{E}\,L_N(t)-L_\infty(t)|$")
    fig.legend(**RIGHT)
    what = rf"$\pm$1 s.e. over {_seeds(ds)}"
    head = (
        "{bars}\n" + r"lower bars reaching 0 are cut at $0.1\,|$mean$|$; markers of $t > 0$ "
        r"shifted right by factors $1.08^k$"
    )
    state_bars(fig, ax.set_title("", fontsize=8), what, head, relative=False)
    return fig


@styled
def loss_curves(ds: xr.Dataset) -> plt.Figure:
    """E L_N(t) for a few widths (markers, +-1 s.e.) against L_inf(t) (line), log y."""
    fig, ax = plt.subplots(figsize=(4.6, 3.4), layout="constrained")
    t = ds["t"].values
    every = max(1, t.size // 12)
    picks = np.unique(np.linspace(0, ds.sizes["N"] - 1, 4).round().astype(int))
    for j, k in enumerate(picks):
        sl = slice(j % every, None, every)
        _errorbar(ax, t[sl], ds["loss_mean"].values[k, sl], ds["loss_mean_se"].values[k, sl],
                  f"C{j}", rf"$\mathbb{{E}}\,L_N$, $N={int(ds['N'][k])}$",
                  marker="osD^"[j % 4], mfc="none")  # fmt: skip
    ax.plot(t, ds["loss_inf"].values, "-", color="k", lw=1.2, label=r"$L_\infty$ (Eq. 11)")
    ax.set_yscale("log")
    ax.set_xlabel("$t$")
    ax.set_ylabel(r"$\mathbb{E}\,L_N(t)$, $L_\infty(t)$")
    ax.legend(frameon=False, fontsize=7)
    what = rf"$\pm$1 s.e. over {_seeds(ds)}"
    head = f"markers at one output time in {every}, staggered between widths\n{{bars}}"
    state_bars(fig, ax.set_title("", fontsize=8), what, head)
    return fig


@styled
def eq12_check(ds: xr.Dataset) -> plt.Figure:
    """Eq. 12: RK4 relative error per interval; Euler excess per step vs its Taylor term."""
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.1), layout="constrained")
    rel, te = ds["eq12_rel_error"].values, ds["interval_end"].values
    left, mid, right = axes
    for i, row in enumerate(rel[:-1]):
        left.plot(te, row, ".", color="C0", ms=3, label="width-$N$ networks" if i == 0 else None)
    left.plot(te, rel[-1], "o", color="k", mfc="none", ms=4, label="grid of $p_0$ ($L_{mf}$)")
    left.axhline(1e-6, color="C3", lw=1.0, ls="--", label="$10^{-6}$")
    left.set_yscale("log")
    left.set_xlabel("end of interval $t_{j+1}$")
    left.set_ylabel(r"$|\Delta L+\int D\,dt\,|\,/\int D\,dt$")
    left.set_title(rf"(a) RK4, $dt={float(ds['dt']):g}$, Simpson on $D$", fontsize=8)
    left.set_ylim(top=1e-3)  # room for the legend above the 1e-6 line
    left.legend(frameon=False, fontsize=7, loc="upper right")
    steps = ds["step"].values
    dt2 = float(ds["dt"]) ** 2
    excess, taylor = ds["euler_excess"].values / dt2, ds["euler_taylor"].values / dt2
    every = max(1, steps.size // 25)
    for k in range(excess.shape[1]):
        mid.plot(
            steps,
            taylor[:, k],
            "-",
            color="C1",
            lw=0.8,
            label=r"$\frac{1}{2}\,v\cdot\nabla^2_{W}L\,v$ (Taylor)" if k == 0 else None,
        )
        mid.plot(
            steps[::every],
            excess[::every, k],
            "o",
            color="C0",
            ms=2.5,
            mfc="none",
            label="$e_k/dt^2$ (Euler)" if k == 0 else None,
        )
    mid.set_yscale("log")
    mid.set_xlabel("$t_k$")
    mid.set_ylabel(r"$e_k/dt^2$,  $e_k=L_{k+1}-L_k+dt\,D_k$")
    mid.set_title("(b) explicit Euler, learning rate $N\\,dt$ on $L$", fontsize=8)
    mid.legend(frameon=False, fontsize=7)
    ratio = ds["euler_excess"].values / ds["euler_decrease"].values
    right.fill_between(
        steps, ratio.min(1), ratio.max(1), color="C2", alpha=0.3, lw=0, label="band over seeds"
    )
    right.plot(steps, np.median(ratio, 1), "-", color="C2", lw=1.0, label="median")
    right.set_xlabel("$t_k$")
    right.set_ylabel(r"$e_k\,/\,(dt\,D_k)$")
    right.set_title("(c) relative Euler excess per step", fontsize=8)
    right.legend(frameon=False, fontsize=7, ncols=2, loc="upper center",
                 bbox_to_anchor=(0.5, -0.2))  # fmt: skip
    fig.suptitle(
        f"no error bars: (a) one dot per network ({rel.shape[0] - 1} seeds), (b) one curve per "
        f"seed ({excess.shape[1]}), (c) band: range over the seeds",
        fontsize=8,
    )
    return fig
