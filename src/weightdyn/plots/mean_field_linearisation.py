"""Figures of experiment E5 (paper 002, Eqs. 14-18): linearisation at a zero-loss state.

Every function takes the summary dataset of :func:`weightdyn.mean_field.linearisation.summarize`.
Theory is drawn as lines, simulation (particles) as markers (with standard-error bars where the
number is an average over random directions).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import errorbar, state_bars

__all__ = ["decay", "grid_spectrum", "perturbation"]

SIM = {"ms": 3.5, "capsize": 1.5, "lw": 0, "elinewidth": 0.8}


def _sci(value: float, digits: int = 1) -> str:
    """Mathtext ``a \\times 10^{b}`` for ``value``."""
    if value == 0 or not np.isfinite(value):
        return f"{value:g}"
    exponent = int(np.floor(np.log10(abs(value))))
    return rf"{value / 10**exponent:.{digits}f}\times 10^{{{exponent}}}"


@styled
def decay(summary: xr.Dataset) -> plt.Figure:
    """log L(t) along the convergence with the -2 theta_min asymptote, and the local rate D/L.

    The asymptotes are anchored at the last output time; the dashed line uses the smallest
    eigenvalue of the feature Gram matrix (the paper's "eigenvalues of K" after Eq. 18).
    """
    t = summary["t_decay"].values
    loss = summary["loss_decay"].values
    theta_min = float(summary["theta"][0])
    kappa_min = float(summary["kappa"][0])
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3.0), layout="constrained")
    every = max(1, t.size // 40)
    left.semilogy(t[::every], loss[::every], "o", ms=3, color="C0", label="particles")
    for value, style, color, label in (
        (theta_min, "-", "k", r"$\propto e^{-2\theta_{\min} t}$ (tangent kernel, $-R$)"),
        (kappa_min, "--", "C3", r"$\propto e^{-2\kappa_{\min} t}$ (Gram matrix of $K$)"),
    ):
        left.semilogy(
            t, loss[-1] * np.exp(-2 * value * (t - t[-1])), style, color=color, lw=1.0, label=label
        )
    left.set_ylim(loss.min() / 3, loss.max() * 3)
    left.set_xlabel("$t$")
    left.set_ylabel(r"$L(t)$")
    left.legend(loc="upper right")
    local = summary["local_rate"].values
    right.semilogy(
        t[::every], local[::every], "o", ms=3, color="C0", label=r"particles: $-d\log L/dt = D/L$"
    )
    right.axhline(2 * theta_min, color="k", lw=1.0, label=r"$2\theta_{\min}$ ($\Theta$, i.e. $-R$)")
    right.axhline(2 * kappa_min, color="C3", ls="--", lw=1.0, label=r"$2\kappa_{\min}$ ($K$)")
    right.set_ylim(top=30 * local.max())
    right.set_xlabel("$t$")
    right.set_ylabel(r"$-d\log L/dt$")
    rate = float(summary["rate"])
    err, err_se = rate / (2 * theta_min) - 1, float(summary["rate_se"]) / (2 * theta_min)
    right.set_title(
        rf"late fit: rate$/2\theta_{{\min}} - 1 = {_sci(err)} \pm {_sci(err_se)}$", fontsize=8
    )
    right.legend(loc="upper right")
    fig.suptitle(
        r"no error bars: one deterministic particle run; the $\pm$ of the late fit is its "
        "least-squares s.e.",
        fontsize=8,
    )
    return fig


@styled
def perturbation(summary: xr.Dataset) -> plt.Figure:
    """Eq. 18 vs particles after perturbations of size delta: L/delta^2, error/delta, sup error."""
    fig, axes = plt.subplots(1, 3, figsize=(7.4, 2.7), layout="constrained")
    t = summary["t_perturb"].values
    deltas = summary["delta"].values
    every = max(1, t.size // 15)
    for i, delta in enumerate(deltas):
        sim = summary["loss_perturbed"].isel(delta=i, direction=0).values
        eq = summary["loss_eq18"].isel(delta=i, direction=0).values
        label = rf"$\delta = 10^{{{np.log10(delta):.0f}}}$"
        axes[0].semilogy(
            t[::every], sim[::every] / delta**2, "o", ms=3, mfc="none", color=f"C{i}", label=label
        )
        axes[0].semilogy(t, eq / delta**2, "-", color=f"C{i}", lw=0.9)
        axes[1].plot(t, (eq / sim - 1) / delta, "-", color=f"C{i}", lw=1.0, label=label)
    axes[0].plot([], [], "k-", lw=0.9, label="Eq. 18")
    axes[0].plot([], [], "ko", ms=3, mfc="none", label="particles")
    axes[0].set_xlabel("$t$")
    axes[0].set_ylabel(r"$L(t)\,/\,\delta^2$")
    axes[0].legend(fontsize=6.5)
    axes[1].axhline(0, color="0.6", lw=0.6)
    axes[1].set_xlabel("$t$")
    axes[1].set_ylabel(r"$(L_{\mathrm{Eq.18}}/L - 1)\,/\,\delta$")
    axes[1].legend(fontsize=6.5)
    mean = summary["eq18_error_mean"].values
    se = summary["eq18_error_se"].values
    errorbar(
        axes[2],
        deltas,
        mean,
        yerr=se,
        fmt="o",
        color="C0",
        label=f"particles ({summary.sizes['direction']} directions)",
        **SIM,
    )
    axes[2].plot(deltas, mean[0] * deltas / deltas[0], "k-", lw=0.9, label=r"$\propto\delta$")
    axes[2].set_xscale("log")
    axes[2].set_yscale("log")
    axes[2].set_xlabel(r"$\delta$")
    axes[2].set_ylabel(r"$\sup_t\,|L_{\mathrm{Eq.18}}/L - 1|$" + "\n(mean over directions)")
    slope, slope_se = float(summary["eq18_slope"]), float(summary["eq18_slope_se"])
    axes[2].set_title(f"slope ${slope:.3f} \\pm {slope_se:.3f}$", fontsize=8)
    axes[2].legend(fontsize=6.5, loc="upper left")
    n = summary.sizes["direction"]
    head = f"(a, b): one perturbation direction of {n}, no error bars; (c) {{bars}}"
    state_bars(fig, fig.suptitle("", fontsize=8), rf"$\pm$1 s.e. over the {n} directions", head,
               axes=[axes[2]])  # fmt: skip
    return fig


@styled
def grid_spectrum(summary: xr.Dataset) -> plt.Figure:
    """Spectrum of Theta (quadrature nodes) vs the finite-volume R_h on n x n grids; error vs n."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3.0), layout="constrained")
    k = summary["mode"].values + 1
    ns = summary["n"].values
    left.semilogy(
        k, summary["theta_ref"].values, "k_", ms=14, mew=1.2, label="quadrature nodes (reference)"
    )
    markers = "os^dv<>"
    for i, n in enumerate(ns):
        left.semilogy(
            k + 0.08 * (i - len(ns) / 2),
            summary["theta_grid"].isel(n=i).values,
            markers[i % 7],
            ms=3.5,
            mfc="none",
            color=f"C{i}",
            label=rf"$R_h$, $n={n}$",
        )
    left.set_xlabel("eigenvalue index $k$ (grids offset sideways)")
    left.set_ylabel(r"$\theta_k$ (non-zero spectrum of $-R$)")
    left.legend(loc="lower right")
    rel = summary["theta_grid_rel_error"].values
    for j in range(k.size):
        order = float(summary["grid_order"][j])
        right.loglog(
            ns,
            rel[:, j],
            "o",
            ms=3.5,
            color=f"C{j}",
            label=rf"$k={k[j]}$: fitted order {order:.2f}",
        )
    right.loglog(ns, rel[0].max() * (ns / ns[0]) ** -2.0, "k-", lw=0.9, label=r"$\propto n^{-2}$")
    right.set_xticks(ns, [str(n) for n in ns])
    right.minorticks_off()
    right.set_xlabel("grid size $n$ ($n\\times n$ nodes)")
    right.set_ylabel(r"$|\theta_{k,h}/\theta_k - 1|$")
    right.legend(ncol=2, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                 frameon=False)  # fmt: skip
    fig.suptitle("no error bars: deterministic eigenvalues", fontsize=8)
    return fig
