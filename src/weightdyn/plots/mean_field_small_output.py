"""Figures of experiment E3, the small-output-weight regime (paper 002, Eqs. 19-26).

Every figure takes the summary dataset of :func:`weightdyn.mean_field.small_output.summarize`.
Theory (the small-w0 prediction, Eq. 24 with its floor) is drawn as lines, gradient descent as
markers with +-1 standard error over seeds.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import errorbar, state_bars

DISPLACEMENT = (
    r"GD: $\mathrm{sup}_t\,\mathrm{rms}_k|\tilde{\mathbf{w}}_k(t)-\tilde{\mathbf{w}}_k(0)|$"
)
LOSS_ERROR = r"$\mathrm{sup}_t|L_{\rm GD}-L_{\rm pred}|\,/\,L_{\rm GD}(0)$"
SHIFT_ERROR = r"GD: $\mathrm{max}_k|s_{\rm GD}-s_{\rm pred}|\,/\,\mathrm{max}_k|s_{\rm pred}|$"
SCATTER_SEEDS = 25
SIM = {"ms": 4.0, "capsize": 2.0, "lw": 0, "elinewidth": 0.8}


def _title(summary: xr.Dataset) -> str:
    a = summary.attrs
    unit = r"$c\,\tanh(ax+h)$" if a["unit"] == "tanh" else r"$w_0\tanh(\beta(x-h))$"
    target = r"$\varepsilon\sin\pi x$" if a["target"] == "sin" else r"$\varepsilon\,$tanh bumps"
    return (
        f"$\\phi=${unit}, $N={a['particles']}$ particles ($q=1/N$), {a['seeds']} seeds, "
        f"$\\mu$ = {a['measure']}, $f=${target}"
    )


def _fit_line(summary: xr.Dataset, key: str, x: np.ndarray) -> np.ndarray:
    return np.exp(float(summary[f"intercept_{key}"])) * x ** float(summary[f"slope_{key}"])


def _slope_label(summary: xr.Dataset, key: str, what: str = "fit") -> str:
    slope, se = float(summary[f"slope_{key}"]), float(summary[f"slope_{key}_se"])
    return f"{what}, slope ${slope:.3f}\\pm{se:.1g}$"


def _bars(summary: xr.Dataset) -> str:
    """What the bars are: the standard error of the mean over the seeds."""
    return rf"$\pm$1 s.e. over {summary.sizes['seed']} seeds"


def _mean_se(gd: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """Mean over ``seed`` and its standard error."""
    return gd.mean("seed"), gd.std("seed", ddof=1) / np.sqrt(gd.sizes["seed"])


def _fit_axis(summary: xr.Dataset) -> np.ndarray:
    eps = summary["eps"].values
    return np.geomspace(eps.min(), float(summary.attrs["eps_fit_max"]), 50)


@styled
def loss_error(summary: xr.Dataset) -> plt.Figure:
    """(a) sup_t |L_gd - L_pred| / L_gd(0) vs eps with the eps^2 fit; (b) vs w0(0) at fixed f."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.4, 3.3), layout="constrained")
    eps = summary["eps"].values
    errorbar(left, eps, summary["eps_loss_error"].values, summary["eps_loss_error_se"].values,
             fmt="o", color="C0", label="Eq. 24 with floor vs GD", **SIM)  # fmt: skip
    errorbar(left, eps, summary["eps_loss_error_eq26"].values,
             summary["eps_loss_error_eq26_se"].values, fmt="s", mfc="none", color="C3",
             label="Eq. 26 (no floor) vs GD", **SIM)  # fmt: skip
    x = _fit_axis(summary)
    left.plot(x, _fit_line(summary, "loss_error", x), "-", color="C0", lw=1.0,
              label=_slope_label(summary, "loss_error"))  # fmt: skip
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel(r"target amplitude $\varepsilon$  ($w_0(0)\sim\varepsilon$)")
    left.set_ylabel(LOSS_ERROR)
    ratio = summary.attrs["w0_ratio"]
    scale = r"\varepsilon" if ratio == 1 else rf"({ratio:g}\varepsilon)"
    left.set_title(rf"(a) $w_0(0)\sim\mathcal{{N}}(0,{scale}^2)$", fontsize=9)
    left.legend(frameon=False, loc="lower right")
    w0 = summary["w0_scale"].values
    errorbar(right, w0, summary["w0_loss_error"].values, summary["w0_loss_error_se"].values,
             fmt="o", color="C0", label=LOSS_ERROR, **SIM)  # fmt: skip
    errorbar(right, w0, summary["w0_growth"].values, summary["w0_growth_se"].values, fmt="^",
             color="C2", mfc="none", label=r"rms $w_0(t_{\rm end})\,/\,\varepsilon$",
             **SIM)  # fmt: skip
    right.plot(w0, w0 / summary.attrs["amplitude"], ":", color="0.5", lw=1.0,
               label=r"rms $w_0(0)\,/\,\varepsilon$")  # fmt: skip
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel(r"initial output-weight scale $w_0(0)$")
    right.set_ylabel(r"relative loss error; rms $w_0\,/\,\varepsilon$")
    right.set_title(rf"(b) fixed target, $\varepsilon={summary.attrs['amplitude']:g}$", fontsize=9)
    right.legend(frameon=False, loc="lower right")
    state_bars(fig, fig.suptitle("", fontsize=8), _bars(summary), _title(summary) + "\n{bars}")
    return fig


@styled
def loss_curves(summary: xr.Dataset) -> plt.Figure:
    """L(t) / eps^2: gradient descent (markers) vs Eq. 24 with floor (lines), Eq. 26 (dotted)."""
    fig, ax = plt.subplots(figsize=(5.6, 4.6), layout="constrained")
    t = summary["t"].values
    every = max(1, t.size // 20)
    eps_all = summary["eps"].values
    picks = sorted({0, eps_all.size // 2, eps_all.size - 1})
    markers = (("C0", "o", 7.0), ("C1", "s", 4.5), ("C3", "^", 4.5))
    for (color, marker, size), i in zip(markers, picks, strict=False):
        style = {**SIM, "ms": size}
        e = float(eps_all[i])
        mean, se = _mean_se(summary["eps_loss_gd"].isel(eps=i) / e**2)
        errorbar(ax, t[::every], mean.values[::every], se.values[::every], fmt=marker,
                 color=color, mfc="none", label=rf"GD, $\varepsilon={e:g}$", **style)  # fmt: skip
        pred = (summary["eps_loss_pred"].isel(eps=i) / e**2).mean("seed")
        ax.plot(
            t, pred, "-", color=color, lw=1.2, label=rf"Eq. 24 (with floor), $\varepsilon={e:g}$"
        )
    e = float(eps_all[0])
    eq26 = (summary["eps_loss_eq26"].isel(eps=0) / e**2).mean("seed")
    ax.plot(t, eq26, ":", color="k", lw=1.4, label=rf"Eq. 26 (no floor), $\varepsilon={e:g}$")
    floor = float((summary["eps_loss_floor"].isel(eps=0) / e**2).mean("seed"))
    ax.axhline(floor, color="0.5", ls="--", lw=0.9, label="floor (constant term after Eq. 24)")
    amp = float(summary.attrs["amplitude"])
    j = int(np.argmin(summary["w0_scale"].values))
    w0_min = float(summary["w0_scale"][j])
    mean, se = _mean_se(summary["w0_loss_gd"].isel(w0_scale=j) / amp**2)
    errorbar(ax, t[::every], mean.values[::every], se.values[::every], fmt="D", color="C4",
             mfc="none", label=rf"GD, $\varepsilon={amp:g}$, $w_0(0)={w0_min:g}$ (line: Eq. 24)",
             **{**SIM, "ms": 3.5})  # fmt: skip
    pred = (summary["w0_loss_pred"].isel(w0_scale=j) / amp**2).mean("seed")
    ax.plot(t, pred, "-", color="C4", lw=1.0)
    ax.set_yscale("log")
    ax.set_xlabel("$t$")
    ax.set_ylabel(r"$L(t)\,/\,\varepsilon^2$ (mean over seeds)")
    ax.legend(frameon=False, fontsize=6.5, loc="upper center", ncols=2, bbox_to_anchor=(0.5, -0.16))
    state_bars(fig, fig.suptitle("", fontsize=7.5), _bars(summary), _title(summary) + "\n{bars}")
    return fig


@styled
def shifts(summary: xr.Dataset) -> plt.Figure:
    """(a) measured vs predicted shifts s(w~_k, t_end) / eps; (b) the w~ displacement vs eps."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.4, 3.4), layout="constrained")
    eps_all = summary["eps"].values
    t_end = float(summary["t"][-1])
    lim = 0.0
    seeds = slice(0, SCATTER_SEEDS)
    for color, marker, i in (("C3", "s", eps_all.size - 1), ("C0", "o", 0)):
        e = float(eps_all[i])
        pred = summary["eps_shift_pred"].isel(eps=i, seed=seeds).values.ravel() / e
        gd = summary["eps_shift_gd"].isel(eps=i, seed=seeds).values.ravel() / e
        left.plot(pred, gd, marker, color=color, ms=3.0, mfc="none", alpha=0.8,
                  label=rf"$\varepsilon={e:g}$")  # fmt: skip
        lim = max(lim, np.abs(pred).max(), np.abs(gd).max())
    left.plot([-lim, lim], [-lim, lim], "-", color="k", lw=0.8, label="equality", zorder=0)
    left.set_xlabel(
        rf"predicted $s(\tilde{{\mathbf{{w}}}}_k,t)/\varepsilon$ (Eq. 24), $t={t_end:g}$"
    )
    left.set_ylabel(r"GD $(w_{0,k}(0)-w_{0,k}(t))/\varepsilon$")
    shown = min(SCATTER_SEEDS, summary.sizes["seed"])
    left.set_title(f"(a) shifts along $w_0$ (every particle of {shown} seeds)", fontsize=9)
    left.legend(frameon=False, loc="upper left")
    errorbar(right, eps_all, summary["eps_wtilde_displacement"].values,
             summary["eps_wtilde_displacement_se"].values, fmt="o", color="C0",
             label=DISPLACEMENT, **SIM)  # fmt: skip
    errorbar(right, eps_all, summary["eps_shift_error"].values,
             summary["eps_shift_error_se"].values, fmt="s", color="C1", mfc="none",
             label=SHIFT_ERROR, **{**SIM, "ms": 6.0})  # fmt: skip
    x = _fit_axis(summary)
    for key, color, what in (("wtilde_displacement", "C0", "fit to the displacement"),
                             ("shift_error", "C1", "fit to the shift error")):  # fmt: skip
        right.plot(x, _fit_line(summary, key, x), "-", color=color, lw=1.0,
                   label=_slope_label(summary, key, what))  # fmt: skip
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel(r"target amplitude $\varepsilon$")
    right.set_ylabel(r"$\tilde{\mathbf{w}}$ displacement, shift error")
    right.set_title(r"(b) $\tilde{\mathbf{w}}$ frozen to $O(\varepsilon^2)$", fontsize=9)
    right.legend(frameon=False, loc="lower right", fontsize=6.5)  # the points rise to the right
    head = _title(summary) + "\n(a) no bars: one point per particle and seed; (b) {bars}"
    state_bars(fig, fig.suptitle("", fontsize=8), _bars(summary), head)
    return fig
