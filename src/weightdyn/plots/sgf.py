"""SGD vs stochastic gradient flow (paper 000 Eq. 13) and the GBM of Eq. 24: figures.

* :func:`dynamics_spectra` and :func:`dynamics_vs_lr` take a merged sweep of the ``single_layer``
  experiment (cells along ``cell``, coordinates ``dynamics``, ``lr``, ...);
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.ticker import NullLocator

from weightdyn.plots.common import (
    declared_axes,
    require_one_value,
    require_variables,
    styled,
)
from weightdyn.plots.errorbars import ErrorBars, se_text
from weightdyn.single_layer.params import DERIVED

__all__ = ["dynamics_spectra", "dynamics_vs_lr"]

#: legend name, colour and marker of each simulated dynamics of the single-layer experiment
DYNAMICS = {
    "sgd": ("SGD", "C0", "o"),
    "sgf_additive": ("SGF additive", "C1", "s"),
    "sgf_multiplicative": ("SGF multiplicative", "C2", "^"),
}
NEEDED = ("eig_M_sgd", "eig_M_sgd_se", "var_w_sgd_wstar", "var_w_sgd_wstar_se")


def _require(ds: xr.Dataset, names: Sequence[str], figure: str) -> None:
    missing = [n for n in names if n not in ds.variables]
    if missing:
        raise ValueError(f"{figure}: dataset lacks the variables {missing}; expected {names}")


def _simulated(ds: xr.Dataset, free: Sequence[str], figure: str) -> list[tuple[str, xr.Dataset]]:
    """(dynamics, its cells) for every simulated dynamics of a merged sweep, in DYNAMICS order."""
    require_one_value(ds, free, figure, declared_axes("single_layer", DERIVED))
    require_variables(ds, NEEDED, figure, " (a sweep with dynamics: none is theory only)")
    dynamics = ds["dynamics"].values
    return [
        (name, ds.isel(cell=np.flatnonzero(dynamics == name)))
        for name in DYNAMICS
        if np.any(dynamics == name)
    ]


def _cell_title(ds: xr.Dataset, keys: Sequence[str]) -> str:
    symbols = {
        "N": "N",
        "P": "P",
        "lr": r"\lambda",
        "batch_size": "S",
        "sigma_eps2": r"\sigma_\epsilon^2",
    }
    return ", ".join(f"${symbols[k]} = {ds[k].values[0]:g}$" for k in keys if k in ds.coords)


@styled
def dynamics_spectra(ds: xr.Dataset) -> plt.Figure:
    """Sorted eigenvalues of the stationary covariance / (lr sigma_eps^2 / 2S): SGD, SGF, Eq. 30.

    One cell per dynamics (every other axis, data_seed included, takes one value): each
    simulation as symbols with +-2 s.e. bars (every mode, small horizontal offsets), its relative
    Frobenius distance from Eq. 30 (``frobenius_error_eq30``) in the legend; Eq. 30 dashed and
    Eq. 34 dash-dotted, from the cells' common theory.
    """
    runs = _simulated(ds, ("dynamics",), "dynamics_spectra")
    theory = ds.isel(cell=0)
    norm = float(theory["M_isotropic"])
    valid = np.isfinite(theory["eig_M_lyapunov"].values)
    idx = theory["mode"].values[valid]
    fig, ax = plt.subplots(figsize=(4.8, 4.0), layout="constrained")
    bars = ErrorBars(se_text(ds, 2))
    for k, (name, cell) in enumerate(runs):
        cell = cell.isel(cell=0)
        label, color, marker = DYNAMICS[name]
        error = float(cell["frobenius_error_eq30"]) if "frobenius_error_eq30" in cell else np.nan
        if np.isfinite(error):
            label += f" ($\\epsilon_F$ = {100 * error:.1f}%)"
        shift = (k - (len(runs) - 1) / 2) * 0.18
        bars.errorbar(
            ax,
            idx + shift,
            cell["eig_M_sgd"].values[valid] / norm,
            2 * cell["eig_M_sgd_se"].values[valid] / norm,
            fmt=marker,
            ms=3.0,
            mfc="none",
            mew=0.8,
            elinewidth=0.7,
            capsize=0,
            color=color,
            label=label,
        )
    ax.plot(
        idx, theory["eig_M_lyapunov"].values[valid] / norm, "--", color="k", lw=1.0, label="Eq. 30"
    )
    ax.axhline(1.0, color="0.4", ls="-.", lw=0.9, label="Eq. 34")
    ax.set_yscale("log")
    ax.set_xlabel("mode index $i$ (sorted)")
    ax.set_ylabel(r"eigenvalue of $M$ / $(\lambda\sigma_\epsilon^2/2S)$")
    title = "$\\epsilon_F = \\|M - M_{30}\\|_F / \\|M_{30}\\|_F$"
    ax.legend(frameon=False, loc="lower left", title=title, title_fontsize=7.5)
    fixed = _cell_title(ds, ("N", "P", "lr", "batch_size", "sigma_eps2"))
    bars.annotate(fig, lambda note: ax.set_title(f"{fixed}\n{note}", fontsize=8), sep="\n")
    return fig


def _stationary(cells: xr.Dataset, dynamics: str) -> xr.DataArray:
    """Cells with a sampled stationary state: not diverged, below the second-moment limit (SGD,
    multiplicative SGF) or with a finite Euler fixed point (additive SGF)."""
    ok = cells["diverged"] == 0
    if dynamics == "sgf_additive":
        return ok & cells["eig_M_euler"].notnull().any("mode")
    return ok & (cells["second_moment_radius"] < 1)


def _seed_mean(values: np.ndarray, ses: np.ndarray) -> tuple[float, float]:
    """Mean over data seeds and its error: the estimators' s.e. and the seed-to-seed spread."""
    ok = np.isfinite(values)
    n = int(ok.sum())
    if n == 0:
        return np.nan, np.nan
    stat = np.sqrt(np.sum(ses[ok] ** 2)) / n
    spread = np.std(values[ok], ddof=1) / np.sqrt(n) if n > 1 else 0.0
    return float(np.mean(values[ok])), float(np.hypot(stat, spread))


def _by_lr(cells: xr.Dataset, values: xr.DataArray, ses: xr.DataArray | None = None) -> np.ndarray:
    """Rows lr, mean, error over the cells' learning rates (means over data seeds)."""
    lr = cells["lr"].values
    out = []
    for x in np.unique(lr):
        at = lr == x
        se = np.zeros(at.sum()) if ses is None else ses.values[at]
        out.append((x, *_seed_mean(values.values[at], se)))
    return np.array(out).T


@styled
def dynamics_vs_lr(ds: xr.Dataset) -> plt.Figure:
    """tr M / tr M_Eq30 vs lr for SGD and SGF (additive, multiplicative) with the theories.

    Symbols (+-1 s.e., means over data seeds): the simulated covariance about w* of each
    dynamics. Lines: the exact discrete-time fixed point of SGD (solid; at dt = lr also that of
    the multiplicative SGF, whose second-moment recursion is SGD's), the exact fixed point of the
    additive-noise Euler chain (dashed, ``eig_M_euler``), and Eq. 30 (dotted at 1). Cells without
    a stationary state (diverged, or beyond the second-moment stability limit, whose position the
    dotted verticals mark) are not drawn.
    """
    runs = _simulated(ds, ("lr", "dynamics", "data_seed"), "dynamics_vs_lr")
    fig, ax = plt.subplots(figsize=(4.8, 4.2), layout="constrained")
    bars = ErrorBars(se_text(ds, 1))
    ax.axhline(1.0, color="k", lw=0.8, ls=":", label="Eq. 30")
    tr30 = ds["var_w_theory"]
    lr, exact, _ = _by_lr(ds, ds["eig_M_discrete"].sum("mode", min_count=1) / ds["N"] / tr30)
    ax.plot(
        lr,
        exact,
        "-",
        color="k",
        lw=1.0,
        label=r"exact discrete (SGD; SGF mult. at $dt = \lambda$)",
    )
    for name, cells in runs:
        label, color, marker = DYNAMICS[name]
        ratio = (cells["var_w_sgd_wstar"] / cells["var_w_theory"]).where(_stationary(cells, name))
        x, y, err = _by_lr(cells, ratio, cells["var_w_sgd_wstar_se"] / cells["var_w_theory"])
        shift = {"sgd": 0.97, "sgf_additive": 1.0, "sgf_multiplicative": 1.03}[name]
        bars.errorbar(
            ax,
            x * shift,
            y,
            err,
            fmt=marker,
            color=color,
            ms=4,
            capsize=2,
            elinewidth=1,
            mfc="none" if name != "sgd" else color,
            label=label,
        )
        if name == "sgf_additive":
            euler = (
                cells["eig_M_euler"].sum("mode", min_count=1) / cells["N"] / cells["var_w_theory"]
            )
            x, y, _ = _by_lr(cells, euler)
            ax.plot(x, y, "--", color=color, lw=1.0, label="exact Euler chain (SGF add.)")
    for limit in np.unique(ds["lr_max_second_moment"].values):
        if limit <= 2 * lr.max():  # a limit far beyond the sweep would only stretch the axis
            ax.axvline(limit, color="0.5", ls=":", lw=0.7)
    ax.set_xscale("log")
    ax.set_xticks(lr, [f"{x:g}" for x in lr])  # the sweep's learning rates
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(r"learning rate $\lambda$")
    ax.set_ylabel(r"tr$M$ / tr$M_{\mathrm{Eq.\,30}}$ (about $w^*$)")
    fig.legend(frameon=False, fontsize=7, loc="outside lower center", ncols=2)
    fixed = _cell_title(ds, ("N", "P", "batch_size", "sigma_eps2"))
    shifted = "SGD and SGF mult. drawn 3 % left and right of their $\\lambda$"
    put = lambda note: ax.set_title(f"{fixed}\n{note}\n{shifted}", fontsize=8)  # noqa: E731
    bars.annotate(fig, put, relative=False)
    return fig
