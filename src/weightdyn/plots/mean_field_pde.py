"""Figures of experiment E2 (paper 002, Eqs. 9-12): the transport equation on a grid.

Every function takes the summary dataset of :func:`weightdyn.mean_field.pde_comparison.summarize`.
Theory / reference curves are lines, simulations markers (error bars +-1 s.e. over seeds).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import errorbar, state_bars

SCHEME_STYLE = {
    "upwind": {"color": "C0", "marker": "s", "label": "first-order upwind"},
    "muscl": {"color": "C3", "marker": "o", "label": "MUSCL"},
}
SIM = {"ms": 4.0, "capsize": 2.0, "lw": 0, "elinewidth": 0.9}


def _refused_note(ax: plt.Axes, summary: xr.Dataset) -> None:
    if int(summary["comparison_refused"]):
        ax.text(
            0.5,
            0.5,
            f"comparison refused: density growth "
            f"{float(summary['density_growth']):.3g} > "
            f"{float(summary['max_density_growth']):.3g}",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="C3",
        )


def _reference_slope(ax: plt.Axes, x: np.ndarray, anchor: float, power: int, style: str) -> None:
    ax.plot(
        x,
        anchor * (x / x[-1]) ** (-power),
        style,
        color="0.45",
        lw=0.9,
        label=f"$\\propto n^{{-{power}}}$",
    )


@styled
def loss_error_vs_n(summary: xr.Dataset) -> plt.Figure:
    """sup_t |L_pde(t) - L_inf(t)| vs grid size n for both schemes, with n^-1 and n^-2."""
    fig, ax = plt.subplots(figsize=(4.0, 3.2), layout="constrained")
    n = summary["n"].values.astype(float)
    for scheme in summary["scheme"].values:
        e = summary["loss_error"].sel(scheme=scheme).values
        st = SCHEME_STYLE[str(scheme)]
        order = float(summary["loss_order"].sel(scheme=scheme))
        ax.plot(
            n,
            e,
            st["marker"],
            color=st["color"],
            ms=5,
            label=f"{st['label']} (fitted order {order:.2f})",
        )
        if np.isfinite(e[-1]):
            _reference_slope(
                ax, n, e[-1], 1 if scheme == "upwind" else 2, "--" if scheme == "upwind" else ":"
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(n, [f"{int(v)}" for v in n])
    ax.set_xlabel("grid size $n$ (cells per axis)")
    ax.set_ylabel(r"$\sup_t\,|L_{\mathrm{pde}}(t)-L_\infty(t)|$")
    ax.set_title(
        f"limiter {summary.attrs['limiter']}, $T={summary.attrs['T']:g}$, "
        f"$\\beta={summary.attrs['beta']:g}$\nno error bars: deterministic grid and "
        "characteristics",
        fontsize=8,
    )
    ax.legend(frameon=False)
    _refused_note(ax, summary)
    return fig


@styled
def density_snapshots(summary: xr.Dataset) -> plt.Figure:
    """The finest MUSCL density at the snapshot times, its contours and those of the exact density.

    The exact density is carried by probes along characteristics (after Eq. 10); the probes start
    on a square grid, so their positions form a curvilinear grid to contour on.
    """
    snaps = summary["snapshot"].values
    fig, axes = plt.subplots(
        1, snaps.size, figsize=(2.5 * snaps.size + 0.6, 2.9), layout="constrained", sharey=True
    )
    w0, h = summary["w0"].values, summary["h"].values
    k = round(np.sqrt(summary.sizes["probe"]))
    pw = summary["probe_w"].values
    box = [pw[..., 0].min(), pw[..., 0].max(), pw[..., 1].min(), pw[..., 1].max()]
    pad = 0.1 * max(box[1] - box[0], box[3] - box[2])
    vmax = float(summary["density"].max())
    for i, ax in enumerate(np.atleast_1d(axes)):
        p = summary["density"].values[i]
        im = ax.imshow(
            p.T,
            origin="lower",
            extent=[w0[0], w0[-1], h[0], h[-1]],
            cmap="viridis",
            vmin=0,
            vmax=vmax,
            aspect="auto",
            interpolation="nearest",
        )
        levels = vmax * np.array([0.05, 0.2, 0.5])
        ax.contour(w0, h, p.T, levels=levels, colors="w", linewidths=0.9)
        zw = pw[i].reshape(k, k, 2)
        zp = summary["probe_density"].values[i].reshape(k, k)
        ax.contour(
            zw[..., 0], zw[..., 1], zp, levels=levels, colors="C1", linewidths=1.0, linestyles="--"
        )
        ax.set_xlim(box[0] - pad, box[1] + pad)
        ax.set_ylim(box[2] - pad, box[3] + pad)
        ax.set_title(f"$t = {snaps[i]:g}$", fontsize=9)
        ax.set_xlabel("$w_0$")
    np.atleast_1d(axes)[0].set_ylabel("$h$")
    fig.colorbar(im, ax=axes, label=r"$p(\mathbf{w},t)$", shrink=0.9)
    handles = [
        plt.Line2D([], [], color="w", lw=0.9, label="grid (MUSCL, finest)"),
        plt.Line2D(
            [], [], color="C1", lw=1.0, ls="--", label=f"characteristics ({k}$\\times${k} probes)"
        ),
    ]
    handles[0].set_color("0.35")  # white on the page: the grey of the legend stands for it
    handles[0].set_label("grid (MUSCL, finest; white in the panels)")
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=7, frameon=False)
    fig.suptitle(f"contours at 5%, 20%, 50% of max $p$; $n={summary.sizes['w0']}$", fontsize=8)
    return fig


@styled
def hist_distance_vs_N(summary: xr.Dataset) -> plt.Figure:
    """L2 distance of particle and grid bin masses at t = T vs N, with the fitted power law."""
    fig, ax = plt.subplots(figsize=(4.0, 3.2), layout="constrained")
    big_n = summary["N"].values.astype(float)
    mean, se = summary["hist_distance_rms"].values, summary["hist_distance_se"].values
    errorbar(
        ax,
        big_n,
        mean,
        yerr=se,
        fmt="o",
        color="k",
        label=f"particles (r.m.s. over {summary.sizes['seed']} seeds)",
        **SIM,
    )
    slope, slope_se = float(summary["hist_slope"]), float(summary["hist_slope_se"])
    if np.isfinite(slope):
        x = np.geomspace(big_n[0], big_n[-1], 50)
        ax.plot(
            x,
            np.exp(float(summary["hist_intercept"])) * x**slope,
            "-",
            color="C3",
            label=f"fit $\\propto N^{{{slope:.3f}\\pm{slope_se:.3f}}}$",
        )
    ax.plot(
        big_n,
        summary["hist_sampling"].values,
        "--",
        color="0.45",
        lw=0.9,
        label=r"$\sqrt{\sum_b m_b(1-m_b)/N}$ (i.i.d.)",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of particles $N$")
    ax.set_ylabel(r"$\|\hat m_N - m_{\mathrm{pde}}\|_2$ at $t=T$")
    head = (
        f"{summary.attrs['bins']}$\\times${summary.attrs['bins']} bins, $T={summary.attrs['T']:g}$"
        "\n{bars}"
    )
    what = f"$\\pm$1 s.e. of the r.m.s. over {summary.sizes['seed']} seeds (delta method)"
    ax.legend(frameon=False)
    _refused_note(ax, summary)
    state_bars(fig, ax.set_title("", fontsize=8), what, head, newline=True)
    return fig


@styled
def loss_curves(summary: xr.Dataset) -> plt.Figure:
    """L(t) of the grids vs L_inf(t); the loss error and the mass drift vs t per grid size."""
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.0), layout="constrained")
    t = summary["t"].values
    ns = summary["n"].values
    shades = np.linspace(0.35, 1.0, ns.size)
    axes[0].plot(
        t, summary["loss_inf"].values, "-", color="k", lw=1.2, label=r"$L_\infty$ (characteristics)"
    )
    for scheme in summary["scheme"].values:
        st = SCHEME_STYLE[str(scheme)]
        base = np.array(plt.matplotlib.colors.to_rgb(st["color"]))
        for n, shade in zip(ns, shades, strict=True):
            color = 1 - shade * (1 - base)
            sel = summary.sel(scheme=scheme, n=n)
            lab = f"{st['label']}, $n={n}$"
            if n == ns[0]:
                axes[0].plot(
                    t,
                    sel["loss_pde"].values,
                    st["marker"],
                    color=st["color"],
                    ms=3.5,
                    mfc="none",
                    label=lab,
                )
            err = np.abs(sel["loss_pde"].values - summary["loss_inf"].values)
            axes[1].plot(t[1:], err[1:], st["marker"], color=color, ms=3, label=lab)
            drift = np.abs(sel["mass_drift"].values)
            axes[2].plot(t[drift > 0], drift[drift > 0], st["marker"], color=color, ms=3)
    axes[0].set_ylabel(r"$L_{\mathrm{mf}}(t)$")
    axes[1].set_ylabel(r"$|L_{\mathrm{pde}}(t)-L_\infty(t)|$")
    axes[1].set_yscale("log")
    axes[2].set_ylabel(r"$|\int p\,d\mathbf{w}-1|$")
    axes[2].set_yscale("log")
    axes[2].set_ylim(1e-17, 1e-11)
    axes[2].set_title("symbols as in the middle panel's legend; exact zeros not shown", fontsize=7)
    axes[2].axhline(1e-12, color="0.45", ls="--", lw=0.9)
    axes[2].text(t[-1], 1.3e-12, "$10^{-12}$", ha="right", va="bottom", fontsize=7, color="0.4")
    for ax in axes:
        ax.set_xlabel("$t$")
    axes[0].legend(frameon=False, fontsize=7)
    fig.suptitle("no error bars: deterministic grid and characteristics", fontsize=8)
    axes[1].legend(
        frameon=False, fontsize=5.5, ncols=2, loc="upper center", bbox_to_anchor=(0.5, -0.2)
    )
    return fig
