"""Paper 000 Fig. 5 (loss perturbation along the SGD covariance eigenvectors, Eq. 35) and Table 1.

Every function takes a merged sweep (cells along ``cell``) or one cell's dataset.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn import io
from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import JACKKNIFE, ErrorBars
from weightdyn.plots.relaxation import cell_title, cell_value
from weightdyn.single_layer.perturbation import TABLE1_PAPER

__all__ = ["fig5", "fig5a", "fig5b", "table1"]

_TITLE_KEYS = (("N", "N"), ("P", "P"), ("sigma_eps2", r"\sigma_\epsilon^2"))


def _correlated(cell: xr.Dataset) -> bool:
    """Does the cell average over correlated-input data sets (Fig. 5b)?"""
    return "delta_L_over_theta2_mean" in cell and "realisation" in cell.dims


def _panels(n_cells: int, extra: bool) -> tuple[plt.Figure, list[tuple[plt.Axes, plt.Axes]], list]:
    """One subfigure per cell (main panel and a side panel for the covariance spectrum), two
    per row, and with ``extra`` one more subfigure with a single axes (returned last, else
    None); unused subfigures of the last row stay empty."""
    n = n_cells + extra
    ncols = min(n, 2)
    nrows = math.ceil(n / ncols)
    fig = plt.figure(figsize=(7.4 * ncols, 4.1 * nrows + 0.4), layout="constrained")
    subs = list(fig.subfigures(nrows, ncols, squeeze=False).ravel())
    cells = []
    for sub in subs[:n_cells]:
        main, side = sub.subplots(1, 2, width_ratios=[1.0, 0.42])
        cells.append((main, side))
    last = subs[n_cells].subplots() if extra else None
    return fig, cells, [last]


def _spectrum_side(ax: plt.Axes, ds: xr.Dataset, mean: str, se: str, bars: ErrorBars) -> None:
    """Side panel: covariance eigenvalues (+-1 s.e.) vs mode index, normalised by Eq. 34 if
    available, against Eq. 30 (line)."""
    norm = float(ds["M_isotropic"]) if "M_isotropic" in ds else 1.0
    i = ds["mode"].values
    bars.errorbar(ax, i, ds[mean] / norm, ds[se] / norm, fmt="o", ms=2.2, color="C0",
                  mfc="none", mew=0.6, elinewidth=0.6, label="SGD")  # fmt: skip
    theory = mean.replace("eig_M_sgd", "eig_M_theory")  # eig_M_theory or eig_M_theory_mean
    if theory in ds and np.isfinite(ds[theory]).all():
        ax.plot(i, ds[theory] / norm, "-", color="k", lw=0.9, label="Eq. 30")
    if "M_isotropic" in ds:
        ax.axhline(1.0, color="k", ls="-.", lw=0.7, label="Eq. 34")
        ax.set_ylabel(r"eig$_i(M)\,/\,(\lambda\sigma_\epsilon^2/2S)$")
    else:
        ax.set_ylabel(r"eig$_i(M)$")
    ax.set_xlabel("mode index $i$")
    ax.set_title("covariance spectrum", fontsize=8)
    ax.legend(frameon=False, fontsize=7, loc="upper right", markerscale=1.6)


def _fig5a_panel(
    ax: plt.Axes, ds: xr.Dataset, modes: Sequence[int] | None, ylim_rel: float | None
) -> None:
    """One cell of Fig. 5a: delta L / theta^2 vs theta for several modes (see :func:`fig5a`)."""
    n = ds.sizes["mode"]
    if modes is None:
        modes = sorted({0, n // 4, n // 2, (3 * n) // 4, n - 1})
    modes = [int(i) for i in modes if int(i) < n]
    theta = ds["theta"].values
    iid = float(ds["delta_L_over_theta2_iid"])
    markers = "osD^vP*X"
    for j, i in enumerate(modes):
        color = plt.cm.viridis(j / max(len(modes) - 1, 1) * 0.9)
        ax.plot(
            theta,
            ds["delta_L_over_theta2"].sel(mode=i),
            markers[j % len(markers)],
            ms=4.5,
            mfc="none",
            color=color,
            label=f"$i = {i}$",
        )
        ax.plot(theta, ds["delta_L_over_theta2_exact"].sel(mode=i), ":", color=color, lw=1.0)
    ax.axhline(iid, color="k", lw=1.2, label=r"$\sigma_x^2/2$ (Eq. 35, $H = \sigma_x^2 1$)")
    ax.plot([], [], ":", color="0.4", label=r"$\mathbf{v}_i^T H \mathbf{v}_i/2$ (Eq. 35)")
    ax.set_xscale("log")
    if ylim_rel is None:
        drawn = ds["delta_L_over_theta2"].sel(mode=modes).values / iid - 1.0
        ylim_rel = max(0.25, 1.15 * float(np.nanmax(np.abs(drawn), initial=0.0)))
    ax.set_ylim(iid * (1 - ylim_rel), iid * (1 + ylim_rel))
    ax.set_xlabel(r"perturbation amplitude $\theta$")
    ax.set_ylabel(r"$\delta L(\theta\mathbf{v}_i)\,/\,\theta^2$")
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=4, fontsize=7)
    vals = ds["delta_L_over_theta2"].isel(theta=-1)
    spread = float(vals.std() / vals.mean())
    title = cell_title(ds, _TITLE_KEYS) + rf"; spread over all {n} modes: {100 * spread:.1f}%"
    ax.set_title(title, fontsize=9)


def _fig5a_comparison(ax: plt.Axes, cells: Sequence[xr.Dataset]) -> None:
    """delta L / theta^2 at the largest theta over sigma_x^2 / 2 vs i / N, one colour per cell."""
    for j, cell in enumerate(cells):
        vals = cell["delta_L_over_theta2"].isel(theta=-1) / cell["delta_L_over_theta2_iid"]
        n = cell.sizes["mode"]
        P, N = cell_value(cell, "P"), cell_value(cell, "N")
        label = f"$P/N = {P / N:g}$" if P is not None and N is not None else f"cell {j}"
        ax.plot(cell["mode"].values / n, vals, "o", ms=3, mfc="none", color=f"C{j}", label=label)
    ax.axhline(1.0, color="k", lw=1.2, label=r"$\sigma_x^2/2$ (Eq. 35, $H = \sigma_x^2 1$)")
    theta = float(cells[0]["theta"].values[-1])
    ax.set_xlabel(r"mode index $i / N$ (covariance eigenvalue descending)")
    ax.set_ylabel(
        rf"$\delta L(\theta\mathbf{{v}}_i)\,/\,(\theta^2\sigma_x^2/2)$, $\theta = {theta:g}$"
    )
    ax.set_title("all cells: flatness of the loss perturbation", fontsize=9)
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=3, fontsize=7)


@styled
def fig5a(
    ds: xr.Dataset, modes: Sequence[int] | None = None, ylim_rel: float | None = None
) -> plt.Figure:
    """Fig. 5a: delta L(theta v_i) / theta^2 vs theta for several modes i, i.i.d. inputs.

    One panel per cell of :func:`weightdyn.single_layer.perturbation.perturbation_dataset`
    (coordinates ``mode``, ``theta``; variables ``delta_L_over_theta2`` and
    ``delta_L_over_theta2_exact`` (mode, theta), ``eig_M_sgd``, ``eig_M_sgd_se``, optional
    ``eig_M_theory`` (mode), the scalars ``delta_L_over_theta2_iid`` and ``M_isotropic``),
    with the covariance spectrum beside it (+-1 s.e.). Symbols: SGD eigenvectors through Eq. 3;
    dotted: exact v^T H v / 2 (Eq. 35); black line: sigma_x^2 / 2. Default ``modes``: five
    spread over the spectrum. The y range is sigma_x^2/2 (1 +- ``ylim_rel``), by default wide
    enough for the drawn points (at least 25%). With several cells a last panel compares them
    at the largest theta, one colour per P/N.
    """
    cells = io.cell_datasets(ds)
    if any(_correlated(c) for c in cells):
        raise ValueError("fig5a draws i.i.d.-input cells; these are correlated-input cells (fig5b)")
    fig, panels, (last,) = _panels(len(cells), extra=len(cells) > 1)
    bars = ErrorBars(f"$\\pm$1 s.e. ({JACKKNIFE})")
    for (main, side), cell in zip(panels, cells, strict=True):
        _fig5a_panel(main, cell, modes, ylim_rel)
        _spectrum_side(side, cell, "eig_M_sgd", "eig_M_sgd_se", bars)
    if last is not None:
        _fig5a_comparison(last, cells)
    head = (
        r"symbols: $\delta L$ along the eigenvectors $\mathbf{v}_i$ of the SGD covariance, "
        r"exact for each $\mathbf{v}_i$ (no error bars)"
    )
    bars.annotate(fig, lambda note: fig.suptitle(f"{head}\nspectra: {note}", fontsize=8.5))
    return fig


def _fig5b_panel(
    ax: plt.Axes,
    ds: xr.Dataset,
    theta: float | None,
    realisation: int | None,
    bars: ErrorBars,
) -> None:
    """One cell of Fig. 5b (see :func:`fig5b`)."""
    th = float(ds["theta"].values[-1]) if theta is None else float(theta)
    sel = ds.sel(theta=th)
    i = ds["mode"].values
    n = ds.sizes["realisation"]
    if realisation is not None:
        ax.plot(
            i,
            sel["delta_L_over_theta2"].isel(realisation=realisation),
            "-",
            color="0.65",
            lw=0.8,
            label="one data set",
        )
    bars.errorbar(
        ax,
        i,
        sel["delta_L_over_theta2_mean"],
        sel["delta_L_over_theta2_mean_se"],
        fmt="o",
        ms=3,
        color="C3",
        capsize=1.5,
        elinewidth=0.8,
        label=f"SGD, mean over {n} data sets",
    )
    lyap = "delta_L_over_theta2_lyapunov_mean"
    if lyap in ds and np.isfinite(ds[lyap]).all():
        band = (ds[lyap] - ds[f"{lyap}_se"], ds[lyap] + ds[f"{lyap}_se"])
        ax.fill_between(i, *band, color="C0", alpha=0.25, lw=0)
        ax.plot(
            i,
            ds[lyap],
            "-",
            color="C0",
            lw=1.2,
            label=r"Eq. 35 along eigenvectors of $M$ (Eq. 30), band $\pm$1 s.e.",
        )
    ax.axhline(
        float(ds["delta_L_over_theta2_iid"]),
        color="k",
        ls="--",
        lw=1.0,
        label=r"i.i.d. theory $\sigma_x^2/2$",
    )
    ax.set_xlabel("mode index $i$ (covariance eigenvalue descending)")
    ax.set_ylabel(rf"$\delta L(\theta\mathbf{{v}}_i)\,/\,\theta^2$ at $\theta = {th:g}$")
    drawn = [sel["delta_L_over_theta2_mean"] + sel["delta_L_over_theta2_mean_se"]]
    if realisation is not None:
        drawn.append(sel["delta_L_over_theta2"].isel(realisation=realisation))
    if lyap in ds and np.isfinite(ds[lyap]).all():
        drawn.append(ds[lyap] + ds[f"{lyap}_se"])
    ax.set_ylim(0.0, 1.1 * max(float(np.nanmax(d)) for d in drawn))
    title = cell_title(ds, _TITLE_KEYS)
    kind, corr = cell_value(ds, "input_covariance"), cell_value(ds, "correlation")
    inputs = ds.attrs.get("input_cov") or (kind if corr is None else f"{kind} ({corr:g})")
    ax.set_title(f"{title}, inputs: {inputs}" if inputs else title, fontsize=9)


@styled
def fig5b(ds: xr.Dataset, theta: float | None = None, realisation: int | None = 0) -> plt.Figure:
    """Fig. 5b: delta L / theta^2 at fixed theta vs mode index i, correlated inputs.

    One panel per cell of :func:`weightdyn.single_layer.perturbation.average_over_realisations`
    (coordinates ``mode``, ``theta``, ``realisation``; variables ``delta_L_over_theta2_mean``
    and ``_mean_se`` (mode, theta), ``delta_L_over_theta2`` (realisation, mode, theta),
    ``eig_M_sgd_mean`` and ``_mean_se`` (mode), the scalar ``delta_L_over_theta2_iid``;
    optional ``M_isotropic``, ``eig_M_theory_mean`` and ``delta_L_over_theta2_lyapunov_mean``
    (+ ``_mean_se``: solid line with band)), with the covariance spectrum beside it.
    ``theta`` defaults to the largest value (delta L / theta^2 does not depend on it, Eq. 35).
    Symbols with error bars: mean +- 1 s.e. over data sets; thin line: the single data set
    ``realisation`` (None: not drawn); dashed: the i.i.d. prediction sigma_x^2 / 2.
    """
    cells = io.cell_datasets(ds)
    if not all(_correlated(c) for c in cells):
        raise ValueError("fig5b draws correlated-input cells; these are i.i.d.-input cells (fig5a)")
    fig, panels, _ = _panels(len(cells), extra=False)
    n = sorted({c.sizes["realisation"] for c in cells})
    bars = ErrorBars(f"$\\pm$1 s.e. over {', '.join(map(str, n))} data sets")
    for (main, side), cell in zip(panels, cells, strict=True):
        _fig5b_panel(main, cell, theta, realisation, bars)
        _spectrum_side(side, cell, "eig_M_sgd_mean", "eig_M_sgd_mean_se", bars)
    handles, labels = panels[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, frameon=False, loc="outside lower center", ncols=2)
    bars.annotate(fig, lambda note: fig.suptitle(note, fontsize=8.5))
    return fig


def fig5(ds: xr.Dataset, **options) -> plt.Figure:
    """Fig. 5a for i.i.d.-input cells, Fig. 5b for correlated-input cells."""
    correlated = [_correlated(c) for c in io.cell_datasets(ds)]
    if any(correlated) and not all(correlated):
        raise ValueError("fig5: the cells mix i.i.d. and correlated inputs; draw them apart")
    return (fig5b if all(correlated) else fig5a)(ds, **options)


# ------------------------------------------------------------------------------ Table 1

_TABLE1_HEADER = (
    "regime",
    "N",
    "P",
    r"$\sigma_\epsilon^2$",
    "student: measured\n" r"$|\langle w\rangle - u|/|u|$",
    "paper",
    "final train loss\n(theory, Eqs. 26, 30)",
    "paper",
    r"$\mathrm{tr}(M)/N$" "\n(Eq. 30)",
    "paper",
    "agrees",
)
_TABLE1_WIDTHS = (0.09, 0.035, 0.035, 0.045, 0.095, 0.14, 0.1, 0.14, 0.1, 0.15, 0.045)


def _fmt(value: float) -> str:
    if not np.isfinite(value):
        return "n/a"
    return "0" if value == 0 else f"{value:.3g}"


def _table1_row(cell: xr.Dataset) -> list[str]:
    """The printed row of one Table 1 cell."""
    regime = "over" if int(cell["overparameterised"]) else "under"
    paper = TABLE1_PAPER[regime]
    ok = all(int(cell[f"agrees_{k}"]) for k in ("student", "loss", "fluctuations"))
    number = {
        k: float(cell[k])
        for k in (
            "student_teacher_dist",
            "train_loss",
            "train_loss_theory",
            "var_w",
            "var_w_theory",
        )
    }

    def wrap(text: str) -> str:  # the paper's statements, wrapped, with its symbols
        text = textwrap.fill(text, 24)
        return text.replace("sigma_eps^2", r"$\sigma_\epsilon^2$").replace(
            "eps -> 0", r"$\epsilon{\to}0$"
        )

    return [
        f"{regime}-\nparameterised",
        f"{cell_value(cell, 'N')}",
        f"{cell_value(cell, 'P')}",
        _fmt(float(cell_value(cell, "sigma_eps2"))),
        _fmt(number["student_teacher_dist"]),
        wrap(paper["student"]),
        f"{_fmt(number['train_loss'])}\n({_fmt(number['train_loss_theory'])})",
        wrap(paper["loss"]),
        f"{_fmt(number['var_w'])}\n({_fmt(number['var_w_theory'])})",
        wrap(paper["fluctuations"]),
        "yes" if ok else "NO",
    ]


@styled
def table1(ds: xr.Dataset) -> plt.Figure:
    """Table 1 of paper 000 as a printable table: one row per cell, each measurement beside the
    paper's statement for the cell's regime (under-parameterised N < P or over-parameterised).

    ``ds`` holds :func:`weightdyn.single_layer.perturbation.table1_dataset` cells (scalars
    ``student_teacher_dist``, ``train_loss``, ``train_loss_theory``, ``var_w``,
    ``var_w_theory``, flags ``overparameterised`` and ``agrees_*``) with the axis values N, P,
    sigma_eps2. Theory values in parentheses; "agrees": all three statements hold.
    """
    rows = [_table1_row(cell) for cell in io.cell_datasets(ds)]
    lines = [max(text.count("\n") + 1 for text in row) for row in rows]
    header_lines = 3
    unit = 0.16  # inches per text line
    height = unit * (header_lines + sum(lines)) + 0.3 * (len(rows) + 1) + 0.4
    fig, ax = plt.subplots(figsize=(14.0, height), layout="constrained")
    ax.axis("off")
    table = ax.table(
        cellText=rows,
        colLabels=_TABLE1_HEADER,
        colWidths=_TABLE1_WIDTHS,
        loc="upper center",
        cellLoc="left",
    )
    table.auto_set_font_size(False)
    table.set_fontsize(7.5)
    total = header_lines + sum(lines) + 0.6 * (len(rows) + 1)
    for (r, c), cell in table.get_celld().items():
        n_lines = header_lines if r == 0 else lines[r - 1]
        cell.set_height((n_lines + 0.6) / total)
        if r == 0:
            cell.set_text_props(weight="bold")
        elif c == len(_TABLE1_HEADER) - 1:
            cell.set_text_props(color="C2" if rows[r - 1][c] == "yes" else "C3", weight="bold")
    ax.set_title(
        "Table 1 of paper 000: steady state of SGD across the interpolation threshold "
        "(measured, theory in parentheses, beside the paper's statements)\n"
        "measured values are one SGD run each, without error bars: the table checks signs "
        "and scalings (the agreement rows of Fig. 4 carry the errors)",
        fontsize=9,
    )
    return fig
