"""Paper 000 Eqs. 21-24: the multiplicative SGD noise without label noise as a geometric Brownian
motion; the figure takes a merged sweep of :func:`weightdyn.single_layer.multiplicative.gbm_dataset`
cells (or one cell)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import xarray as xr

from weightdyn import experiments, io
from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import errorbar, state_bars
from weightdyn.plots.relaxation import cell_title, cell_value

__all__ = ["fig_gbm"]

_NEED = (
    "mean_wbar",
    "mean_wbar_se",
    "var_wbar",
    "var_wbar_se",
    "mean_gbm",
    "var_gbm",
    "mean_discrete",
    "var_discrete",
)
#: TeX symbol of each axis the figure labels (an axis without one, sampling, is not labelled)
_SYMBOLS = {"P": "P", "lr": r"\lambda", "batch_size": "S", "wbar0": r"\bar w(0)",
            "data_seed": r"\mathrm{seed}"}  # fmt: skip


def _axes() -> list[tuple[str, str]]:
    """(axis, TeX symbol) of the ``gbm`` experiment's declared axes that have a symbol."""
    names = [p.name for p in experiments.get("gbm").axes]
    return [(a, _SYMBOLS[a]) for a in names if a in _SYMBOLS]


def _varying(cells: list[xr.Dataset]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The axes whose values differ between the cells (curve labels) and those shared (title)."""
    axes = _axes()
    values = {key: {str(cell_value(c, key)) for c in cells} for key, _ in axes}
    varying = [(k, s) for k, s in axes if len(values[k]) > 1 or k in ("lr", "batch_size")]
    shared = [(k, s) for k, s in axes if (k, s) not in varying and k not in ("data_seed",)]
    return varying, shared


def _styles() -> list[plt.Line2D]:
    """Legend handles of the line styles (the theories; the colour is the cell's)."""
    return [
        plt.Line2D([], [], color="0.3", lw=1.1, label=r"GBM, Eq. 24 (sample $\langle x^4\rangle$)"),
        plt.Line2D(
            [],
            [],
            color="0.3",
            ls=":",
            lw=1.1,
            label=r"GBM, $\langle x^4\rangle = 3$" r"$\langle x^2\rangle^2$",
        ),
        plt.Line2D([], [], color="k", ls="--", lw=0.8, label="exact SGD recursion"),
    ]


def _replicas(cells: list[xr.Dataset], ds: xr.Dataset) -> str:
    """``over <R> SGD runs`` from the cells' (or the sweep's) replica count, else ``""``."""
    r = cell_value(cells[0], "replicas") or ds.attrs.get("setting_replicas")
    return f" over {r} SGD runs" if r is not None else ""


@styled
def fig_gbm(ds: xr.Dataset) -> plt.Figure:
    """Mean and variance of wbar = w - u vs SDE time t: SGD ensemble, GBM (Eq. 24), exact SGD.

    One colour per cell; each cell has dim ``t`` (SDE time ``lr * step``) and the variables
    ``mean_wbar``, ``mean_wbar_se``, ``var_wbar``, ``var_wbar_se`` (SGD ensemble, drawn with
    +-2 s.e. bars), ``mean_gbm``, ``var_gbm`` (GBM with the sample's moments, solid),
    ``mean_discrete``, ``var_discrete`` (exact recursion, dashed), optionally
    ``var_gbm_gaussian`` (paper's ``<x^4> = 3<x^2>^2``, dotted). Curves are labelled by lr, S
    and the axes that differ between cells; the shared ones go into the title. Left panel: mean
    (linear); right panel: variance (log).
    """
    cells = io.cell_datasets(ds)
    for cell in cells:
        missing = [n for n in _NEED if n not in cell.variables]
        if missing:
            raise ValueError(f"fig_gbm: dataset lacks the variables {missing}; expected {_NEED}")
    varying, shared = _varying(cells)
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3.3), layout="constrained")
    for k, cell in enumerate(cells):
        color = f"C{k}"
        t = cell["t"].values
        label = "SGD, " + cell_title(cell, varying)
        positive = t > 0  # the variance is 0 at t = 0 and is drawn on a log axis
        for ax, key, keep in ((left, "mean", slice(None)), (right, "var", positive)):
            errorbar(
                ax,
                t[keep],
                cell[f"{key}_wbar"].values[keep],
                yerr=2 * cell[f"{key}_wbar_se"].values[keep],
                fmt="o",
                ms=3.0,
                mfc="none",
                elinewidth=0.8,
                capsize=1.5,
                color=color,
                label=label if ax is left else None,
                zorder=3,
            )
            ax.plot(t[keep], cell[f"{key}_gbm"].values[keep], "-", color=color, lw=1.1)
            ax.plot(t[keep], cell[f"{key}_discrete"].values[keep], "--", color="k", lw=0.8)
        if "var_gbm_gaussian" in cell:
            right.plot(t[positive], cell["var_gbm_gaussian"].values[positive], ":", color=color)
    left.set_ylabel(r"$\langle\bar w(t)\rangle$")
    right.set_ylabel(r"$\mathrm{Var}\,\bar w(t)$")
    right.set_yscale("log")
    for ax in (left, right):
        ax.set_xlabel(r"SDE time $t = \lambda\tau$")
    handles, labels = left.get_legend_handles_labels()
    handles = [h[0] if isinstance(h, tuple) else h for h in handles]
    fig.legend(handles + _styles(), [*labels, *(h.get_label() for h in _styles())],
               frameon=False, loc="outside lower center", ncols=3, fontsize=7.5)  # fmt: skip
    title = cell_title(cells[0], shared)
    head = (
        r"$N = 1$, $\sigma_\epsilon = 0$, samples $x_\mu \sim \mathcal{N}(0, 1)$"
        + (f", {title}" if title else "")
        + "\n{bars}"
    )
    what = r"$\pm$2 s.e." + _replicas(cells, ds)
    state_bars(fig, fig.suptitle("", fontsize=9), what, head)
    return fig
