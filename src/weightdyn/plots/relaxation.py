"""Paper 000 Fig. 3: relaxation of the Hessian modes z_k(t) and of the loss under SGD (Eq. 27).

Figure functions take a merged sweep (cells along ``cell``, one coordinate per axis) or one cell's
dataset; :func:`split_cells` gives the cells one by one with their padding removed.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn.plots.common import styled

__all__ = ["cell_title", "cell_value", "fig3", "split_cells"]


def split_cells(ds: xr.Dataset) -> list[xr.Dataset]:
    """The cells of a merged dataset, each as its own dataset (a dataset without a ``cell``
    dimension is one cell).

    A per-cell dimension coordinate that :func:`weightdyn.io.stack_cells` stored as
    ``<dim>_values`` (e.g. ``t`` = lr * step) becomes the cell's coordinate again, and the
    NaN padding of every dimension is dropped; the axis values stay as scalar coordinates.
    """
    if "cell" not in ds.dims:
        return [ds]
    out = []
    for k in range(ds.sizes["cell"]):
        cell = ds.isel(cell=k)
        for name in [v for v in cell.data_vars if v.endswith("_values")]:
            dim = name.removesuffix("_values")
            if cell[name].dims == (dim,):
                values = cell[name]
                cell = cell.drop_vars(name).assign_coords({dim: (dim, values.values, values.attrs)})
        for dim in list(cell.dims):
            cell = cell.dropna(dim, how="all")
        out.append(cell)
    return out


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


def _modes_panel(ax: plt.Axes, ds: xr.Dataset, modes: Sequence[int], replica: int) -> None:
    """z_k(t) of one run (solid), mean +- 1 s.d. (band), Eq. 27 (dashed), z*_k (dotted), and the
    loss on a right axis (dash-dotted) relaxing to L* (grey)."""
    t = ds["t"].values
    for j, k in enumerate(modes):
        color = f"C{j}"
        mean = ds["z_sgd_mean"].sel(mode=k).values
        std = ds["z_sgd_std"].sel(mode=k).values
        ax.fill_between(t, mean - std, mean + std, color=color, alpha=0.15, lw=0)
        z = ds["z_sgd"].isel(replica=replica).sel(mode=k).values
        ax.plot(t, z, "-", color=color, lw=1.2, label=f"$z_{{{k}}}(t)$ SGD")
        ax.plot(t, ds["z_theory_exp"].sel(mode=k), "--", color="k", lw=0.9)
        ax.axhline(float(ds["z_star"].sel(mode=k)), color=color, ls=":", lw=0.7)
    ax.set_xscale("log")
    ax.set_xlabel(r"SDE time $t = \lambda\tau$ ($\tau$: SGD step)")
    ax.set_ylabel(r"weight mode $z_k(t) = (V^T\mathbf{w})_k$")
    ax.set_xlim(t[t > 0][0], t[-1])
    right = ax.twinx()
    right.spines["right"].set_visible(True)
    right.plot(t, ds["loss_sgd"].isel(replica=replica).values, "-.", color="C7", lw=1.2)
    right.axhline(float(ds["optimal_loss"]), color="0.6", lw=2.0, alpha=0.7, zorder=0)
    right.set_yscale("log")
    right.set_ylabel(r"loss $L(\mathbf{z})$ (dash-dotted), $L^*$ (grey)")


def _loglog_panel(ax: plt.Axes, ds: xr.Dataset, mode: int, replica: int) -> None:
    """The paper's inset: loss and |z_mode| in log-log axes, SGD solid, theory dashed."""
    t = ds["t"].values
    pos = t > 0
    loss = ds["loss_sgd"].isel(replica=replica).values
    z = ds["z_sgd"].isel(replica=replica).sel(mode=mode).values
    ax.loglog(t[pos], loss[pos], "-", color="C7", lw=1.0, label=r"$L$")
    ax.loglog(t[pos], ds["loss_theory"].values[pos], "--", color="k", lw=0.8)
    ax.loglog(t[pos], np.abs(z[pos]), "-", color="C0", lw=1.0, label=rf"$|z_{mode}|$")
    theory = np.abs(ds["z_theory_exp"].sel(mode=mode).values[pos])
    ax.loglog(t[pos], theory, "--", color="k", lw=0.8)
    ax.axhline(float(ds["optimal_loss"]), color="0.6", lw=1.5, alpha=0.7, zorder=0)
    ax.axhline(abs(float(ds["z_star"].sel(mode=mode))), color="C0", ls=":", lw=0.7)
    omega = float(ds["omega"].sel(mode=mode))
    ax.axvline(1.0 / omega, color="0.3", lw=0.6, ls=(0, (1, 2)))
    ax.text(
        1.0 / omega,
        0.62,
        rf"$1/\omega_{mode}$ ",
        transform=ax.get_xaxis_transform(),
        fontsize=7,
        va="center",
        ha="right",
    )
    ax.set_xlabel(r"$t$")
    ax.set_title("log-log view (inset of the paper)", fontsize=9)
    ax.plot([], [], "--", color="k", lw=0.8, label="theory")
    ax.legend(frameon=False, loc="center left")


def _row_title(ds: xr.Dataset, mode: int) -> str:
    title = cell_title(ds, (("N", "N"), ("P", "P"), ("lr", r"\lambda"), ("batch_size", "S")))
    if "omega_min_over_mp_edge" in ds:
        title += rf", $\omega_0$ / MP edge $= {float(ds['omega_min_over_mp_edge']):.3g}$"
    if "omega_fit" in ds and np.isfinite(float(ds["omega_fit"].sel(mode=mode))):
        fit, se = (float(ds[v].sel(mode=mode)) for v in ("omega_fit", "omega_fit_se"))
        omega = float(ds["omega"].sel(mode=mode))
        title += rf"; fit $\omega_{mode} = {fit:.4g} \pm {se:.2g}$ (Eq. 27: ${omega:.4g}$)"
    if int(ds.get("diverged", 0)):
        title += " (diverged)"
    return title


def _legend(fig: plt.Figure, ax: plt.Axes, replicas: int) -> None:
    handles, labels = ax.get_legend_handles_labels()
    handles += [
        plt.Line2D([], [], color="k", ls="--", lw=0.9),
        plt.Line2D([], [], color="0.5", ls=":", lw=0.7),
        plt.Rectangle((0, 0), 1, 1, color="0.5", alpha=0.15, lw=0),
        plt.Line2D([], [], color="C7", ls="-.", lw=1.2),
        plt.Line2D([], [], color="0.6", lw=2.0, alpha=0.7),
    ]
    labels += [
        r"$\langle z_k(t)\rangle$, Eq. 27",
        r"$z_k^*$",
        f"SGD mean $\\pm$1 s.d. ({replicas} runs)",
        "loss, SGD (right axis)",
        r"$L^*$, Eq. 26",
    ]
    fig.legend(handles, labels, loc="outside lower center", ncols=4, frameon=False)


@styled
def fig3(ds: xr.Dataset, modes: Sequence[int] = (0, 10, 20), replica: int = 0) -> plt.Figure:
    """Fig. 3, one row per cell (e.g. one per learning rate): the modes z_k(t) of one SGD run
    (solid) vs the noise-averaged Eq. 27 (dashed), and the paper's log-log inset.

    ``ds`` holds :func:`weightdyn.single_layer.relaxation.relaxation_dataset` cells (merged along
    ``cell`` or one cell). Used: ``t`` (SDE time t = lr n), ``mode``, ``replica``; ``z_sgd``,
    ``z_sgd_mean``, ``z_sgd_std``, ``z_theory_exp``, ``z_star``, ``omega``, ``loss_sgd``,
    ``loss_theory``, ``optimal_loss``; optional ``omega_min_over_mp_edge`` and ``omega_fit``
    (``_se``) go into the row titles with the axis values N, P, lr, S. The band is the replica
    mean +- 1 s.d. (the SGD noise spread). Modes beyond a cell's N are skipped.
    """
    cells = split_cells(ds)
    height = 4.6 if len(cells) == 1 else 3.4 * len(cells) + 0.9
    fig, axes = plt.subplots(
        len(cells),
        2,
        figsize=(9.0, height),
        layout="constrained",
        gridspec_kw={"width_ratios": [2.2, 1]},
        squeeze=False,
    )
    for (ax, inset), cell in zip(axes, cells, strict=True):
        shown = [int(k) for k in modes if int(k) < cell.sizes["mode"]]
        _modes_panel(ax, cell, shown, replica)
        _loglog_panel(inset, cell, shown[0], replica)
        ax.set_title(_row_title(cell, shown[0]), fontsize=9)
    _legend(fig, axes[0, 0], cells[0].sizes["replica"])
    return fig
