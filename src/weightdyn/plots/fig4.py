"""Paper 000 Fig. 4: stationary weight fluctuations of the single-layer network, SGD vs theory.

Every figure takes a merged sweep of the ``single_layer`` experiment: cells along ``cell`` with
one coordinate per axis (``N``, ``P``, ``lr``, ..., ``dynamics``). One axis varies per figure
(N in panel a, P in panels b and c), data seeds are averaged; any other varying axis is refused.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.ticker import NullFormatter

from weightdyn.plots.common import (
    declared_axes,
    mean_over_seeds,
    require_one_value,
    require_variables,
    styled,
)
from weightdyn.plots.errorbars import ErrorBars, se_text
from weightdyn.single_layer.params import DERIVED

#: losses below this are round-off zeros (interpolation) and are left out of log axes
ROUNDOFF_LOSS = 1e-12
SIM = {"marker": "o", "ms": 3.5, "capsize": 2, "lw": 0, "elinewidth": 1}
#: axes the figures average over (data sets)
AVERAGED = ("data_seed",)
SIMULATED = ("var_w_sgd", "eig_M_sgd")
NO_SIM = " (a sweep with dynamics: none is theory only)"


METHODS = {"sgd": "SGD", "sgf_additive": "SGF add.", "sgf_multiplicative": "SGF mult."}


def _axes() -> tuple[str, ...]:
    """The sweep axes of the ``single_layer`` experiment a figure holds fixed unless it draws
    them: all it declares but the derived (p_over_n) and averaged (data_seed) ones."""
    return declared_axes("single_layer", (*DERIVED, *AVERAGED))


def _checked(ds: xr.Dataset, free: Sequence[str], figure: str, simulated: bool) -> xr.Dataset:
    """The cells, refused if an axis outside ``free`` varies or if simulated values are needed
    and the cells have none."""
    require_one_value(ds, free, figure, _axes())
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


def _simulated_and_theory(ds: xr.Dataset) -> tuple[xr.Dataset, xr.Dataset]:
    """(simulated cells, all cells) of a Fig. 4a view: the SGD cells and the theory-only cells
    (``dynamics: none``, e.g. more data sets) that only add to the data-set average of Eq. 30."""
    require_one_value(ds, ("N", "dynamics"), "variance_vs_size", _axes())
    require_variables(ds, SIMULATED, "variance_vs_size", NO_SIM)
    dynamics = ds["dynamics"].values if "dynamics" in ds.coords else np.full(ds.sizes["cell"], "")
    if np.unique(dynamics[dynamics != "none"]).size > 1:
        raise ValueError("variance_vs_size: the simulated cells vary in 'dynamics'; select one")
    cells = ds.assign_coords(n_over_p=("cell", (ds["N"] / ds["P"]).values))
    return cells.isel(cell=np.flatnonzero(dynamics != "none")), cells


def _theory_band(
    ax: plt.Axes, cells: xr.Dataset, key: str, style: str, color: str, label: str
) -> xr.DataArray:
    """Mean of ``key`` over the data sets at each N/P (line), band +-1 s.d. over them; returns
    the number of data sets at each N/P."""
    grouped = cells[key].groupby("n_over_p")
    with warnings.catch_warnings():  # one data set: no spread, NaN filled with 0
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, sd = grouped.mean("cell"), grouped.std("cell", ddof=1).fillna(0.0)
    x = mean["n_over_p"].values
    ax.plot(x, mean, style, color=color, lw=1.1, label=label)
    ax.fill_between(x, mean - sd, mean + sd, color=color, alpha=0.18, lw=0)
    return grouped.count("cell")


def _band_text(counts: xr.DataArray) -> str:
    """``bands: +-1 s.d. over n data sets``, naming the N/P with fewer (e.g. none at N = P)."""
    n = int(counts.max())
    text = f"bands: $\\pm$1 s.d. over {n} data sets"
    pairs = zip(counts["n_over_p"].values, counts.values, strict=True)
    fewer = [(float(x), int(c)) for x, c in pairs if c < n]
    if fewer:
        where = ", ".join(f"{c} at $N/P = {x:g}$" for x, c in fewer)
        text += f" ({where})"
    return text


@styled
def variance_vs_size(ds: xr.Dataset) -> plt.Figure:
    """Fig. 4a: temporal and spatial weight variance vs N/P (SGD, Eqs. 30, 34), train and test
    loss.

    ``ds``: cells of the ``single_layer`` experiment at one P (and lr, S, ...), N varying; SGD
    cells (one data set each, drawn as measured) and optionally theory-only cells
    (``dynamics: none``) of further data sets. Top: the temporal variance
    ``<<dw_i(t)^2>_t>_i`` of SGD (+-1 s.e.) against tr M / N of Eq. 30 for the simulated data
    set and averaged over all data sets (band: +-1 s.d. over data sets), and Eq. 34. Middle: the
    spatial variance ``<dw_i(t)^2>_i`` (filled circles) against (1/N)[w*^T Pi w* + tr(Pi M)].
    Bottom: losses against Eqs. 9, 30.
    """
    sim, cells = _simulated_and_theory(ds)
    mean, spread = mean_over_seeds(sim, "n_over_p")
    x = mean["n_over_p"].values
    fig, (top, mid, bottom) = plt.subplots(
        3, 1, figsize=(4.4, 7.2), sharex=True, layout="constrained"
    )
    method = _method(sim)
    bars = ErrorBars(se_text(sim, 1))
    err = np.hypot(mean["var_w_sgd_se"], spread["var_w_sgd"])
    bars.errorbar(
        top, x, mean["var_w_sgd"], err, color="C0", mfc="white", label=f"{method}, temporal", **SIM
    )
    top.plot(x, mean["var_w_theory"], "-.", color="C3", lw=1, label="Eq. 30, this data set")
    counts = _theory_band(top, cells, "var_w_theory", "-", "C3", "Eq. 30, data-set mean")
    top.plot(x, mean["M_isotropic"], ":", color="k", label=r"Eq. 34: $\lambda\sigma_\epsilon^2/2S$")
    top.set_ylabel(r"temporal $\langle\langle\delta w_i(t)^2\rangle_t\rangle_i$")
    err = np.hypot(mean["var_w_spatial_sgd_se"], spread["var_w_spatial_sgd"])
    bars.errorbar(
        mid, x, mean["var_w_spatial_sgd"], err, color="C2", label=f"{method}, spatial", **SIM
    )
    mid.plot(
        x, mean["var_w_spatial_theory"], "-.", color="C2", lw=1, label="Eqs. 7, 30, this data set"
    )
    _theory_band(mid, cells, "var_w_spatial_theory", "--", "C2", "Eqs. 7, 30, data-set mean")
    mid.set_yscale("log")
    mid.set_ylabel(r"spatial $\langle\delta w_i(t\to\infty)^2\rangle_i$")
    _loss_panel(bottom, mean, spread, method, bars)
    for ax in (top, mid, bottom):
        ax.axvline(1.0, color="0.6", lw=0.8, zorder=0)
    top.legend(frameon=False, loc="center right", fontsize=6.5)
    mid.legend(frameon=False, loc="upper left", fontsize=6.5)  # the peak at N = P is narrow
    # lower right: beyond N = P only the test loss (near 1) is drawn
    bottom.legend(frameon=False, loc="lower right", fontsize=6.5)
    fixed = _title(sim, ("P", "lr", "batch_size", "sigma_eps2"))
    band = _band_text(counts)
    put = lambda note: top.set_title(f"{fixed}\n{note}\n{band}", fontsize=7.5)  # noqa: E731
    bars.annotate(fig, put, sep="\n")
    return fig


def _loss_panel(
    ax: plt.Axes, mean: xr.Dataset, spread: xr.Dataset, method: str, bars: ErrorBars
) -> None:
    """Train and test loss of the simulation (+-1 s.e.) against Eqs. 9, 30 (log y)."""
    x = mean["n_over_p"].values
    for key, color, name in (("train_loss", "C0", "train"), ("test_loss", "C1", "test")):
        # a loss at round-off level (train loss of an interpolating net, N >= P) is not drawn
        sim = mean[key].where(mean[key] > ROUNDOFF_LOSS)
        theo = mean[f"{key}_theory"].where(mean[f"{key}_theory"] > ROUNDOFF_LOSS)
        err = np.hypot(mean[f"{key}_se"], spread[key])
        bars.errorbar(ax, x, sim, err, color=color, label=f"{name} ({method})", **SIM)
        ax.plot(x, theo, "--", color=color, lw=1, label=f"{name} (Eqs. 9, 30)")
    ax.set_yscale("log")
    ax.set_ylabel("loss $L$ (train: 0 for $N \\geq P$)")
    ax.set_xlabel("$N/P$")


@styled
def spectra(ds: xr.Dataset) -> plt.Figure:
    """Fig. 4b: sorted eigenvalues of M / (lr sigma_eps^2 / 2S): SGD vs Eqs. 30, 33, 34."""
    sel = _checked(ds, ("P",), "spectra", simulated=True)
    sel = sel.assign_coords(p_over_n=("cell", (sel["P"] / sel["N"]).values))
    mean, spread = mean_over_seeds(sel, "p_over_n")
    fig, ax = plt.subplots(figsize=(4.6, 4.5), layout="constrained")
    ratios = mean["p_over_n"].values
    colors = plt.cm.viridis(np.linspace(0.0, 0.9, ratios.size))
    band = ErrorBars(se_text(sel, 2), kind="band")
    for ratio, color in zip(ratios, colors, strict=True):
        m = mean.sel(p_over_n=ratio)
        s = spread.sel(p_over_n=ratio)
        norm = float(m["M_isotropic"])
        valid = np.isfinite(m["eig_M_lyapunov"].values)
        idx = m["mode"].values[valid]
        sgd = m["eig_M_sgd"].values[valid] / norm
        err = np.hypot(m["eig_M_sgd_se"].values, s["eig_M_sgd"].values)[valid] / norm
        band.band(ax, idx, sgd, 2 * err, color=color, ms=2.8, mfc="none", mew=0.7,
                  label=f"$P/N = {ratio:.3g}$")  # fmt: skip
        ax.plot(idx, m["eig_M_lyapunov"].values[valid] / norm, "--", color="k", lw=0.8)
        ax.plot(idx, m["eig_M_detailed_balance"].values[valid] / norm, ":", color=color, lw=1.2)
    ax.axhline(1.0, color="k", ls="-.", lw=1.0)
    ax.set_yscale("log")
    ax.set_xlabel("mode index $i$ (sorted)")
    ax.set_ylabel(r"eigenvalue of $M$ / $(\lambda\sigma_\epsilon^2/2S)$")
    handles, labels = ax.get_legend_handles_labels()
    styles = [
        plt.Line2D([], [], color="0.3", marker="o", ms=2.8, mfc="none", lw=0, label=_method(sel)),
        plt.Line2D([], [], color="k", ls="--", lw=0.8, label="Eq. 30 (Lyapunov)"),
        plt.Line2D([], [], color="0.3", ls=":", lw=1.2, label="Eq. 33 (detailed balance)"),
        plt.Line2D([], [], color="k", ls="-.", lw=1.0, label="Eq. 34 (isotropic)"),
    ]
    fig.legend(handles=styles, loc="outside lower center", ncols=2, frameon=False)
    ax.legend(handles, labels, loc="lower left", frameon=False, ncols=2, markerscale=2)
    fixed = _title(sel, ("N", "lr", "batch_size", "sigma_eps2"))
    band.annotate(fig, lambda note: ax.set_title(f"{fixed}\n{note}", fontsize=8), sep="\n")
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
