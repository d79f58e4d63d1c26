"""Exact discrete-time SGD covariance vs SGD and paper 000 Eq. 30 (docs/discrete_covariance.md).

Every figure takes a merged sweep of the ``single_layer`` experiment (cells along ``cell``, one
coordinate per axis) with SGD cells, and draws it on the grid of the old lr sweeps (dims ``N``,
``P``, ``sigma_eps2``, ``lr``, ``batch_size``, ``sampling``, ``data_seed``, ``mode``; NaN where
the sweep has no cell). ``N``, ``sigma_eps2`` and ``sampling`` must take one value each, as must
``dynamics`` (``sgd``), ``init`` and ``init_scale``; curve families are drawn per mini-batch size
``S`` (colour) and ``P/N`` (marker and line style).
The SGD covariance compared is the second moment about ``w*`` (``eig_M_sgd``, ``var_w_sgd_wstar``),
which is what the exact recursion predicts.
"""

from __future__ import annotations

from collections.abc import Iterator

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn.plots.common import (
    declared_axes,
    plain_log_ticks,
    require_one_value,
    require_variables,
    styled,
)
from weightdyn.plots.errorbars import ErrorBars, se_text
from weightdyn.single_layer.params import DERIVED

__all__ = ["fig_divergence_lr", "fig_spectra_at_max_stable_lr", "fig_trace_vs_lr"]

FIXED = ("N", "sigma_eps2", "sampling")
#: the axes the figures draw along (the cells unstacked onto them); every other sweep axis but
#: the derived ones (p_over_n = P/N) takes one value
GRID = ("N", "P", "sigma_eps2", "lr", "batch_size", "sampling", "data_seed")
MARKERS = ("o", "s", "^", "D", "v")
LINESTYLES = ("-", "--", "-.", ":")
SIM = {"ms": 3.5, "capsize": 2, "lw": 0, "elinewidth": 1}


def _grid(ds: xr.Dataset, figure: str) -> xr.Dataset:
    """The SGD cells of a merged sweep unstacked onto the GRID axes (NaN where no cell is)."""
    require_one_value(ds, GRID, figure, declared_axes("single_layer", DERIVED))
    require_variables(ds, ("eig_M_sgd", "diverged"), figure, " (these figures need SGD cells)")
    if "dynamics" in ds.coords and str(ds["dynamics"].values[0]) != "sgd":
        raise ValueError(f"{figure}: dynamics is {ds['dynamics'].values[0]!r}; allowed: 'sgd'")
    extra = [k for k, c in ds.coords.items() if c.dims == ("cell",) and k not in GRID]
    return ds.drop_vars(extra).set_index(cell=list(GRID)).unstack("cell")


def _one_setting(ds: xr.Dataset) -> xr.Dataset:
    """Drop the length-1 axes of FIXED, refusing a dataset in which one of them varies."""
    varying = [k for k in FIXED if k in ds.dims and ds.sizes[k] > 1]
    if varying:
        raise ValueError(
            f"the dataset varies {varying}; select one value of each of {list(FIXED)} first"
        )
    return ds.squeeze([k for k in FIXED if k in ds.dims], drop=False)


def _families(ds: xr.Dataset) -> Iterator[tuple[int, int, str, str, str, xr.Dataset]]:
    """(S, P, colour, marker, line style, cell subset) for every (batch size, P) pair."""
    for i, S in enumerate(ds["batch_size"].values):
        for j, P in enumerate(ds["P"].values):
            sub = ds.sel(batch_size=S, P=P)
            yield (
                int(S),
                int(P),
                f"C{i}",
                MARKERS[j % len(MARKERS)],
                LINESTYLES[j % len(LINESTYLES)],
                sub,
            )


def _seed_mean(value: xr.DataArray, se: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """Mean over data seeds and its error: the SGD s.e. combined with the seed-to-seed spread."""
    n = value.count("data_seed")
    mean = value.mean("data_seed")
    stat = np.sqrt((se**2).sum("data_seed")) / n
    spread = (value.std("data_seed", ddof=1) / np.sqrt(n)).fillna(0.0) if n.max() > 1 else 0.0
    return mean, np.hypot(stat, spread)


def _label(S: int, P: int, N: int) -> str:
    return f"$S = {S}$, $P/N = {P / N:g}$"


def _title(ds: xr.Dataset) -> str:
    sampling = str(ds["sampling"].values)
    return (
        f"$N = {int(ds['N'])}$, $\\sigma_\\epsilon^2 = {float(ds['sigma_eps2']):g}$, "
        f"sampling {sampling} replacement"
    )


@styled
def fig_trace_vs_lr(ds: xr.Dataset) -> plt.Figure:
    """tr M / tr M_Eq30 vs lr: SGD (+-1 s.e.) and the exact discrete recursion (lines).

    Eq. 30 of paper 000 is the horizontal line at 1; the exact theory departs from it linearly
    in lr and diverges at ``lr_max_second_moment`` (dotted verticals). SGD cells beyond that
    limit are not drawn: their second moment grows without bound, so a finite run's average is
    no stationary estimate (the divergence figure shows them).
    """
    ds = _one_setting(_grid(ds, "discrete_trace"))
    N = int(ds["N"])
    fig, ax = plt.subplots(figsize=(4.8, 3.9), layout="constrained")
    bars = ErrorBars(se_text(ds, 1))
    ax.axhline(1.0, color="k", lw=0.8, ls=":", label="Eq. 30")
    for S, P, color, marker, ls, sub in _families(ds):
        tr30 = sub["eig_M_lyapunov"].sum("mode")
        tr_disc = sub["eig_M_discrete"].sum("mode", min_count=1)
        ok = (sub["diverged"] == 0) & (sub["second_moment_radius"] < 1)
        tr_sgd = (N * sub["var_w_sgd_wstar"]).where(ok)
        se = N * sub["var_w_sgd_wstar_se"].where(ok)
        ratio, err = _seed_mean(tr_sgd / tr30, se / tr30)
        theory = (tr_disc / tr30).mean("data_seed")
        lr = sub["lr"].values
        drawn = np.isfinite(theory.values)  # lr values of other sweeps are NaN in the merged grid
        ax.plot(lr[drawn], theory.values[drawn], ls=ls, color=color, lw=1.0)
        bars.errorbar(ax, lr, ratio, err, marker=marker, color=color, mfc="white", mew=1.0,
                      label=_label(S, P, N), **SIM)  # fmt: skip
        limit = float(sub["lr_max_second_moment"].mean())
        ax.axvline(limit, color=color, ls=":", lw=0.7)
        # the family's marker on top of its limit tells the dotted verticals apart
        ax.plot(limit, 1.0, marker, color=color, ms=3.5, mfc="white", clip_on=False,
                transform=ax.get_xaxis_transform())  # fmt: skip
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    ax.set_xlabel(r"learning rate $\lambda$")
    ax.set_ylabel(r"tr$M$ / tr$M_{\mathrm{Eq.\,30}}$")
    ax.legend(frameon=False)
    head = _title(ds) + "\nlines: exact recursion; dotted verticals (marker on top): its divergence"
    bars.annotate(fig, lambda note: ax.set_title(f"{head}\n{note}", fontsize=8), sep="\n")
    return fig


def _largest_stable_lr(sub: xr.Dataset) -> float | None:
    """Largest lr of the sweep at which theory is stable and no SGD run of any seed diverged."""
    stable = (sub["second_moment_radius"] < 1).all("data_seed") & (sub["diverged"] == 0).all(
        "data_seed"
    )
    lrs = sub["lr"].values[stable.values]
    return float(lrs.max()) if lrs.size else None


@styled
def fig_spectra_at_max_stable_lr(ds: xr.Dataset) -> plt.Figure:
    """Sorted eigenvalues of M at the largest stable lr of the sweep, one panel per (S, P/N).

    SGD (markers, +-1 s.e., first data seed), exact discrete theory (solid), Eq. 30 (dashed),
    all divided by the isotropic value lr sigma_eps^2 / (2S) of Eq. 34.
    """
    ds = _one_setting(_grid(ds, "discrete_spectra"))
    N = int(ds["N"])
    n_s, n_p = ds.sizes["batch_size"], ds.sizes["P"]
    fig, axes = plt.subplots(
        n_s,
        n_p,
        figsize=(2.9 * n_p, 2.4 * n_s),
        layout="constrained",
        squeeze=False,
        sharex=True,
    )
    bars = ErrorBars(se_text(ds.isel(data_seed=[0]), 1))
    for (S, P, color, marker, _, sub), ax in zip(_families(ds), axes.ravel(), strict=True):
        ax.set_title(_label(S, P, N), fontsize=8)
        lr = _largest_stable_lr(sub)
        if lr is None:
            ax.text(0.5, 0.5, "no stable lr", transform=ax.transAxes, ha="center")
            continue
        cell = sub.sel(lr=lr).isel(data_seed=0)
        norm = float(cell["M_isotropic"])
        k = cell["mode"].values + 1
        bars.errorbar(
            ax,
            k,
            cell["eig_M_sgd"] / norm,
            cell["eig_M_sgd_se"] / norm,
            marker=marker,
            color=color,
            label="SGD",
            **SIM,
        )
        ax.plot(k, cell["eig_M_discrete"] / norm, "-", color="k", lw=1.0, label="exact")
        ax.plot(k, cell["eig_M_lyapunov"] / norm, "--", color="C3", lw=1.0, label="Eq. 30")
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        ax.text(0.97, 0.92, f"$\\lambda = {lr:g}$", transform=ax.transAxes, ha="right")
    for ax in axes[-1]:
        ax.set_xlabel("mode $k$ (sorted)")
    for ax in axes[:, 0]:
        ax.set_ylabel(r"eig$_k(M)\,/\,(\lambda\sigma_\epsilon^2/2S)$")
    axes[0, 0].legend(frameon=False)
    seed = int(ds["data_seed"].values[0])
    head = f"{_title(ds)}; SGD of data seed {seed} at the largest stable $\\lambda$ of the sweep"
    bars.annotate(fig, lambda note: fig.suptitle(f"{head}\n{note}", fontsize=9))
    return fig


@styled
def fig_divergence_lr(ds: xr.Dataset) -> plt.Figure:
    """Observed vs predicted divergence learning rate, one point per (S, P/N, data seed).

    Observed: the bracket between the largest lr of the sweep whose SGD run stayed bounded and
    the smallest lr whose run diverged (vertical bar; an upward triangle when no run of the
    sweep diverged). Predicted: ``lr_max_second_moment`` (x axis). The full-batch bound
    ``2 / omega_max`` (grey crosses at the observed bracket) shows how much stricter the
    second-moment limit is.
    """
    ds = _one_setting(_grid(ds, "discrete_divergence"))
    N = int(ds["N"])
    fig, ax = plt.subplots(figsize=(4.2, 4.0), layout="constrained")
    lo_all, hi_all = [], []
    for S, P, color, marker, _, sub in _families(ds):
        for seed in sub["data_seed"].values:
            cell = sub.sel(data_seed=seed)
            diverged = cell["diverged"].values
            lr = cell["lr"].values
            done = np.isfinite(diverged)
            bounded = lr[done & (diverged == 0)]
            blown = lr[done & (diverged == 1)]
            if bounded.size == 0 and blown.size == 0:
                continue
            pred = float(cell["lr_max_second_moment"].max())
            gd = 2.0 / float(cell["omega_max"].max())
            lo = float(bounded.max()) if bounded.size else np.nan
            hi = float(blown[blown > lo].min()) if np.any(blown > lo) else np.nan
            first = seed == sub["data_seed"].values[0]
            label = _label(S, P, N) if first else None
            if np.isfinite(hi):
                y0 = lo if np.isfinite(lo) else hi
                ax.plot([pred, pred], [y0, hi], "-", color=color, lw=2.0)
                ax.plot(pred, np.sqrt(y0 * hi), marker, color=color, ms=5, mfc="white",
                        mew=1.1, label=label)  # fmt: skip
            else:
                ax.plot(pred, lo, "^", color=color, ms=5, label=label)
            ax.plot(pred, gd, "x", color="0.5", ms=4)
            lo_all.append(pred)
            hi_all.append(max(gd, pred))
    if lo_all:
        span = [0.7 * min(lo_all), 1.3 * max(hi_all)]
        ax.plot(span, span, ":", color="k", lw=0.8, label="observed = predicted")
    ax.plot([], [], "x", color="0.5", label=r"$2/\omega_{\max}$ (full batch)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_ticks(ax.xaxis, ax.yaxis)
    ax.set_xlabel(r"predicted $\lambda_{\max}$ (second moment)")
    ax.set_ylabel(r"observed divergence $\lambda$ (bracket of the sweep)")
    what = (
        "bars: observed bracket, from the largest $\\lambda$ of the sweep at which SGD stayed "
        "bounded\nto the smallest at which it diverged (marker at its geometric centre; "
        "a filled\nupward triangle alone: no run of the sweep diverged, a lower bound)"
    )
    ax.set_title(f"{_title(ds)}\n{what}", fontsize=7.5)
    ax.legend(frameon=False, fontsize=7)
    return fig
