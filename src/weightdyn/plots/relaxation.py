"""Paper 000 Fig. 3: relaxation of the Hessian modes z_k(t) and of the loss under SGD (Eq. 27).

Figure functions take a merged sweep (cells along ``cell``, one coordinate per axis) or one cell's
dataset; :func:`weightdyn.io.cell_datasets` gives the cells one by one as they were written.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn import io
from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import ErrorBars

__all__ = ["cell_title", "cell_value", "fig3"]


def cell_value(ds: xr.Dataset, key: str) -> object | None:
    """An axis value of one cell: its scalar coordinate, else the dataset attribute (None if
    absent)."""
    if key in ds.coords and ds[key].ndim == 0:
        value = ds[key].values.item()
        return None if value is None or (isinstance(value, float) and np.isnan(value)) else value
    return ds.attrs.get(key)


def cell_title(ds: xr.Dataset, keys: Sequence[tuple[str, str]]) -> str:
    """``$N = 50$, $P = 52$, ...`` for the (key, TeX symbol) pairs the cell has."""
    parts = []
    for key, sym in keys:
        value = cell_value(ds, key)
        if value is not None:
            text = f"{value:g}" if isinstance(value, int | float | np.number) else str(value)
            parts.append(f"${sym} = {text}$")
    return ", ".join(parts)


#: single SGD runs drawn per mode (the first replicas)
RUNS = 3
#: about this many replica-mean markers per panel (the band is drawn at every record)
MARKERS = 30
MEAN = {"marker": "o", "ms": 3.0, "mfc": "white", "mew": 0.8, "color": "0.2", "ls": "none"}


def _stride(records: int) -> int:
    """Records between two replica-mean markers (about MARKERS of them)."""
    return max(1, records // MARKERS)


def _mean_markers(
    ax: plt.Axes, t: np.ndarray, mean: np.ndarray, se: np.ndarray, band: ErrorBars
) -> None:
    """Replica mean as markers at about MARKERS records in its band +-2 s.e. (every record)."""
    ax.fill_between(t, mean - 2 * se, mean + 2 * se, color="0.5", alpha=0.35, lw=0)
    shown = np.arange(0, t.size, _stride(t.size))
    ax.plot(t[shown], mean[shown], **MEAN)
    band.add(ax, t[shown], mean[shown], 2 * se[shown], MEAN["ms"])


def _mode_panel(ax: plt.Axes, ds: xr.Dataset, k: int, color: str, band: ErrorBars) -> None:
    """z_k(t) of a few single runs (solid), the replica mean (markers, band +- 2 s.e.), Eq. 27
    (dashed), z*_k (dotted) and zero (grey); the title counts the sign changes of the runs."""
    t = ds["t"].values
    runs = min(RUNS, ds.sizes["replica"])
    for r in range(runs):
        z = ds["z_sgd"].isel(replica=r).sel(mode=k).values
        ax.plot(t, z, "-", color=color, lw=0.8, alpha=1.0 - 0.25 * r)
    mean, se = (ds[v].sel(mode=k).values for v in ("z_sgd_mean", "z_sgd_se"))
    pos = t > 0  # log time axis
    _mean_markers(ax, t[pos], mean[pos], se[pos], band)
    ax.plot(t, ds["z_theory_exp"].sel(mode=k), "--", color="k", lw=1.0)
    ax.axhline(float(ds["z_star"].sel(mode=k)), color=color, ls=":", lw=0.9)
    ax.axhline(0.0, color="0.75", lw=0.6, zorder=0)
    ax.set_xscale("log")
    ax.set_xlim(t[t > 0][0], t[-1])
    ax.set_xlabel(r"SDE time $t = \lambda\tau$")
    ax.set_ylabel(rf"mode $z_{{{k}}}(t)$")
    ax.set_title(_sign_change_text(ds, k, runs), fontsize=7.5)


def _sign_change_text(ds: xr.Dataset, k: int, runs: int) -> str:
    """Title of a mode panel: the rate, the sign changes of the runs shown (and their median
    over all runs) against Eq. 27's, and the median largest deviation from Eq. 27."""
    text = rf"$k = {k}$, $\omega_{{{k}}} = {float(ds['omega'].sel(mode=k)):.3g}$"
    if "sign_changes_sgd" not in ds:
        return text
    counts = ds["sign_changes_sgd"].sel(mode=k).values
    shown = ",".join(str(int(c)) for c in counts[:runs])
    deviation = np.nanmedian(ds["run_deviation"].sel(mode=k).values)
    return (
        text + f"\nsign changes: runs {shown} (median {np.median(counts):g}), "
        f"Eq. 27: {int(ds['sign_changes_theory'].sel(mode=k))}"
        + "\nlargest |run $-$ Eq. 27|: "
        + rf"{deviation:.2g} $\times$ |$z_k(0)-z_k^*$| (median)"
    )


def _loss_panel(ax: plt.Axes, ds: xr.Dataset, band: ErrorBars) -> None:
    """Loss of the single runs and the replica mean +- 2 s.e. against Eqs. 26-27, 30 (log-log),
    L* (grey), the time t_s at which the mean settles and 1/omega_0 (vertical lines), and the
    numbers behind the claim that L settles before the slow mode (title)."""
    t = ds["t"].values
    pos = t > 0
    for r in range(min(RUNS, ds.sizes["replica"])):
        ax.plot(t[pos], ds["loss_sgd"].isel(replica=r).values[pos], "-", color="C7", lw=0.7)
    mean, se = ds["loss_sgd_mean"].values[pos], ds["loss_sgd_se"].values[pos]
    _mean_markers(ax, t[pos], mean, se, band)
    ax.plot(t[pos], ds["loss_theory"].values[pos], "--", color="k", lw=1.0)
    ax.axhline(float(ds["optimal_loss"]), color="0.6", lw=2.0, alpha=0.7, zorder=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    marks = [(1.0 / float(ds["omega"].isel(mode=0)), r"$1/\omega_0$", "0.2", 0.97)]
    if "loss_settle_time" in ds and np.isfinite(float(ds["loss_settle_time"])):
        marks.append((float(ds["loss_settle_time"]), r"$t_s$", "C3", 0.82))
    for x, label, color, y in marks:
        ax.axvline(x, color=color, lw=0.8, ls=(0, (2, 2)))
        ax.text(x, y, f"{label} ", color=color, fontsize=7.5, va="top", ha="right",
                transform=ax.get_xaxis_transform())  # fmt: skip
    ax.set_xlim(t[pos][0], t[-1])
    ax.set_xlabel(r"SDE time $t = \lambda\tau$")
    ax.set_ylabel(r"training loss $L$")
    ax.set_title(_loss_text(ds), fontsize=7.5)


def _loss_text(ds: xr.Dataset) -> str:
    """The numbers behind the claim that L settles at L* before the slow mode relaxes."""
    L_star = float(ds["optimal_loss"])
    omega0 = float(ds["omega"].isel(mode=0))
    lines = [rf"loss: $L^* = {L_star:.3g}$, $1/\omega_0 = {1.0 / omega0:.3g}$"]
    if "loss_settle_time" in ds:
        names = ("slow_mode_initial_loss", "slow_mode_solution_loss", "slow_modes_initial_loss")
        start, solution, block = (float(ds[v]) / L_star for v in names)
        lines[0] += rf", $t_s = {float(ds['loss_settle_time']):.3g}$"
        lines += [
            rf"$\omega_0(z_0(0)-z_0^*)^2/2L^* = {start:.2g}$, "
            rf"$\omega_0 z_0^{{*2}}/2L^* = {solution:.2g}$",
            r"modes $\omega_k < 10\,\omega_0$: "
            rf"$\Sigma_k\,\omega_k(z_k(0)-z_k^*)^2/2L^* = {block:.2g}$",
            r"($t_s$: mean $L$ stays within 10 % of $L^* + \mathrm{tr}(HM)/2$)",
        ]
    return "\n".join(lines)


def _row_title(ds: xr.Dataset) -> str:
    title = cell_title(ds, (("N", "N"), ("P", "P"), ("lr", r"\lambda"), ("batch_size", "S")))
    if "omega_min_over_mp_edge" in ds:
        title += rf", $\omega_0$ / MP edge $= {float(ds['omega_min_over_mp_edge']):.3g}$"
    if "omega_fit" in ds and np.isfinite(float(ds["omega_fit"].isel(mode=0))):
        fit, se = (float(ds[v].isel(mode=0)) for v in ("omega_fit", "omega_fit_se"))
        omega = float(ds["omega"].isel(mode=0))
        title += rf"; fit $\omega_0 = {fit:.4g} \pm {se:.2g}$ (Eq. 27: ${omega:.4g}$)"
    if int(ds.get("diverged", 0)):
        title += " (diverged)"
    return title


def _legend(fig: plt.Figure, replicas: int, stride: int) -> None:
    handles = [
        plt.Line2D([], [], color="C0", lw=0.8),
        plt.Line2D([], [], **MEAN),
        plt.Rectangle((0, 0), 1, 1, color="0.5", alpha=0.35, lw=0),
        plt.Line2D([], [], color="k", ls="--", lw=1.0),
        plt.Line2D([], [], color="0.5", ls=":", lw=0.9),
        plt.Line2D([], [], color="0.6", lw=2.0, alpha=0.7),
    ]
    labels = [
        f"single SGD runs (first {RUNS})",
        f"mean of {replicas} runs" + (f" (markers: one record in {stride})" if stride > 1 else ""),
        r"band: mean $\pm$2 s.e. over the runs",
        r"$\langle z_k(t)\rangle$ (Eq. 27); loss: Eqs. 26-27, 30",
        r"$z_k^*$",
        r"$L^*$ (Eq. 26)",
    ]
    fig.legend(handles, labels, loc="outside lower center", ncols=3, frameon=False)


@styled
def fig3(ds: xr.Dataset, modes: Sequence[int] = (0, 10, 20)) -> plt.Figure:
    """Fig. 3, one row per cell (e.g. one per learning rate): the modes z_k(t) of single SGD runs
    (solid) and their replica mean (band +- 2 s.e.) against the noise-averaged Eq. 27 (dashed),
    with the sign changes of the single runs counted; last panel: the loss in log-log axes
    against Eqs. 26-27, 30 and L*, with the time t_s at which the replica mean settles (within
    10 % of L* + tr(HM)/2) and 1/omega_0 marked, and the slow mode's share of the loss.

    ``ds`` holds :func:`weightdyn.single_layer.relaxation.relaxation_dataset` cells (merged along
    ``cell`` or one cell). Modes beyond a cell's N are skipped.
    """
    cells = io.cell_datasets(ds)
    shown = [int(k) for k in modes if int(k) < min(c.sizes["mode"] for c in cells)]
    fig = plt.figure(figsize=(3.0 * (len(shown) + 1), 3.3 * len(cells) + 0.6), layout="constrained")
    rows = fig.subfigures(len(cells), 1, squeeze=False)[:, 0]
    band = ErrorBars(r"$\pm$2 s.e. of the mean over the runs", kind="band")
    for row, cell in zip(rows, cells, strict=True):
        axes = row.subplots(1, len(shown) + 1)
        for j, k in enumerate(shown):
            _mode_panel(axes[j], cell, k, f"C{j}", band)
        _loss_panel(axes[-1], cell, band)
        row.suptitle(_row_title(cell), fontsize=9)
    stride = _stride(int((cells[0]["t"].values > 0).sum()))
    _legend(fig, cells[0].sizes["replica"], stride)
    band.annotate(fig, lambda note: fig.suptitle(note, fontsize=8.5), relative=False)
    return fig
