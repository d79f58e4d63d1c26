"""Paper 000 Figs. 1-2: projector statistics, the matrix K and the mini-batch noise spectrum.

Every function takes an xarray Dataset built by merging (``weightdyn.io.merge_cells``) the
per-cell builders of
:mod:`weightdyn.single_layer.noise` and returns a matplotlib Figure. Length-1 dimensions
(e.g. a single ``N``) are squeezed; any other dimension than the ones a function documents
must be selected beforehand (a ``ValueError`` names it).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.colors import LogNorm
from matplotlib.ticker import NullFormatter

from weightdyn.plots.common import styled
from weightdyn.single_layer.noise import power_law_fit

#: exponents of the paper's claim var(X^+X) ~ P^-1.8 N^-1 (text after Eq. 18)
PAPER_EXPONENTS = (-1.8, -1.0)
SIM = {"marker": "o", "ms": 3.5, "capsize": 2, "lw": 0, "elinewidth": 1}


def _only(ds: xr.Dataset, dims: Sequence[str], figure: str) -> xr.Dataset:
    """Squeeze length-1 dims; refuse other dims than ``dims`` (and ``realisation``)."""
    extra = [d for d in ds.dims if d not in dims and d != "realisation" and ds.sizes[d] > 1]
    if extra:
        raise ValueError(
            f"{figure} expects dims {list(dims)}; select a single value of {extra} first"
        )
    squeeze = [d for d in ds.dims if d not in dims and d != "realisation"]
    return ds.squeeze(squeeze, drop=False) if squeeze else ds


def _colors(n: int) -> np.ndarray:
    return plt.cm.viridis(np.linspace(0.0, 0.85, max(n, 1)))


def _log_axes(ax: plt.Axes, x: bool = True, y: bool = True) -> None:
    if x:
        ax.set_xscale("log")
    if y:
        ax.set_yscale("log")


@styled
def fig1a(ds: xr.Dataset) -> plt.Figure:
    """Fig. 1a: off-diagonal variance of the projector ``X^+X`` vs ``P`` for several ``N``.

    Expects dims ``(N, P)`` (merged :func:`~weightdyn.single_layer.noise.projector_dataset`
    cells; NaN where a cell is missing) with variables ``var_offdiag_mean``,
    ``var_offdiag_se`` and ``var_offdiag_haar``. Left: measured means (+-1 s.e.) and the exact
    Haar value (lines) on log axes, with the paper's claim ``~ P^-1.8 N^-1`` as dotted guides
    (anchored to the middle ``N`` at its largest ``P``) and the fitted ``c P^a N^b`` in the
    title. Right: scaled coordinates ``var P^2 / N`` vs ``P / N``, where the Haar value
    collapses onto ``(1 - N/P) P^2 / ((P - 1)(P + 2)) ~ 1 - N/P``.
    """
    ds = _only(ds, ("N", "P"), "fig1a")
    mean = ds["var_offdiag_mean"]
    Ns, Ps = ds["N"].values, ds["P"].values
    NN, PP = np.meshgrid(Ns, Ps, indexing="ij")
    m = mean.transpose("N", "P").values
    fit = power_law_fit(PP, NN, m)
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.4, 3.4), layout="constrained")
    colors = _colors(Ns.size)
    mid = Ns[Ns.size // 2]
    row = mean.sel(N=mid)
    p_anchor = float(row["P"].where(np.isfinite(row), drop=True).max())
    anchor = float(row.sel(P=p_anchor)) / (
        p_anchor ** PAPER_EXPONENTS[0] * mid ** PAPER_EXPONENTS[1]
    )
    for N, color in zip(Ns, colors, strict=True):
        cell = ds.sel(N=N)
        ok = np.isfinite(cell["var_offdiag_mean"].values)
        P = cell["P"].values[ok]
        y, e, h = (
            cell[k].values[ok] for k in ("var_offdiag_mean", "var_offdiag_se", "var_offdiag_haar")
        )
        left.errorbar(P, y, yerr=e, color=color, label=f"$N = {N:g}$", **SIM)
        left.plot(P, h, "-", color=color, lw=1)
        guide = anchor * P ** PAPER_EXPONENTS[0] * float(N) ** PAPER_EXPONENTS[1]
        left.plot(P, guide, ":", color=color, lw=1.2)
        scale = P**2 / N
        right.errorbar(P / N, y * scale, yerr=e * scale, color=color, label=f"$N = {N:g}$", **SIM)
        right.plot(P / N, h * scale, "-", color=color, lw=1)
    _log_axes(left)
    left.set_xlabel("$P$")
    left.set_ylabel(r"$\mathrm{var}(\mathcal{P}_{\mu\nu}),\ \mu \neq \nu$")
    left.set_title(
        f"fit $c\\,P^{{a}}N^{{b}}$: $a = {fit.a:.2f} \\pm {fit.a_se:.2f}$, "
        f"$b = {fit.b:.2f} \\pm {fit.b_se:.2f}$",
        fontsize=8.5,
    )
    styles = [
        plt.Line2D([], [], color="0.3", marker="o", ms=3.5, lw=0, label="measured ($\\pm$1 s.e.)"),
        plt.Line2D([], [], color="0.3", lw=1, label="exact (Haar): $N(P-N)/(P(P-1)(P+2))$"),
        plt.Line2D([], [], color="0.3", ls=":", lw=1.2, label="paper: $\\propto P^{-1.8}N^{-1}$"),
    ]
    handles, labels = left.get_legend_handles_labels()
    left.legend(
        handles + styles,
        labels + [s.get_label() for s in styles],
        frameon=False,
        loc="lower left",
        fontsize=7,
    )
    right.set_xscale("log")
    right.xaxis.set_minor_formatter(NullFormatter())
    right.axhline(1.0, color="k", lw=0.6, ls="--", zorder=0)
    right.set_xlabel("$P/N$")
    right.set_ylabel(r"$\mathrm{var}(\mathcal{P}_{\mu\nu})\,P^2/N$")
    right.set_title("scaled: exact $\\to 1 - N/P$", fontsize=8.5)
    right.legend(frameon=False, loc="lower right")
    return fig


@styled
def fig1b(ds: xr.Dataset) -> plt.Figure:
    """Fig. 1b: diagonal of ``K`` (Eq. 18), sorted, for several ``P`` at fixed ``N``.

    Expects dims ``(P, rank)`` (merged :func:`~weightdyn.single_layer.noise.k_diagonal_dataset`
    cells at one ``N``; NaN beyond each ``P``) with variables ``PK_sorted`` (``P K^mu_mu``) and
    ``eps2_sorted`` (sorted ``eps^2``, drawn in black). Log-log against rank ``mu`` (1-based).
    """
    ds = _only(ds, ("P", "rank"), "fig1b")
    Ps = ds["P"].values
    fig, ax = plt.subplots(figsize=(4.4, 3.6), layout="constrained")
    for i, (P, color) in enumerate(zip(Ps, _colors(Ps.size), strict=True)):
        cell = ds.sel(P=P)
        ok = np.isfinite(cell["PK_sorted"].values)
        rank = cell["rank"].values[ok] + 1
        ax.plot(
            rank,
            cell["eps2_sorted"].values[ok],
            "-",
            color="k",
            lw=0.7,
            label=r"$(\epsilon^\mu)^2$, $\epsilon \sim \mathcal{N}(0, \sigma_\epsilon^2)$"
            if i == 0
            else None,
        )
        ax.plot(
            rank,
            cell["PK_sorted"].values[ok],
            "-",
            color=color,
            lw=1.6,
            alpha=0.85,
            label=f"$P = {P:g}$",
        )
    _log_axes(ax)
    ax.set_xlabel(r"rank $\mu$ (sorted by magnitude)")
    ax.set_ylabel(r"$P\,K^{\mu\mu}$")
    title = "Eq. 18"
    if "N" in ds.coords and ds["N"].size == 1:
        title += f", $N = {float(ds['N']):g}$"
    if "sigma_eps2" in ds:
        s2 = np.unique(ds["sigma_eps2"].values[np.isfinite(ds["sigma_eps2"].values)])
        if s2.size == 1:
            title += f", $\\sigma_\\epsilon^2 = {s2[0]:g}$"
    ax.set_title(title, fontsize=9)
    ax.legend(frameon=False, loc="lower left")
    return fig


def _spectrum_cells(ds: xr.Dataset, figure: str) -> xr.Dataset:
    ds = _only(ds, ("P", "mode"), figure)
    if "P" not in ds.dims:
        ds = ds.expand_dims("P")
    return ds


def _valid(values: np.ndarray) -> np.ndarray:
    return np.isfinite(values) & (values > 0)


def _title(ds: xr.Dataset) -> str:
    parts = []
    for key, sym in (("N", "N"), ("batch_size", "S"), ("sampling", "")):
        if key in ds.coords and ds[key].size == 1:
            value = ds[key].values.item()
            parts.append(f"{value} replacement" if key == "sampling" else f"${sym} = {value:g}$")
    return ", ".join(parts)


@styled
def fig2a(ds: xr.Dataset) -> plt.Figure:
    """Fig. 2a: sorted eigenvalues of the mini-batch noise covariance, empirical vs Eq. 17.

    Expects dims ``(P, mode)`` (merged
    :func:`~weightdyn.single_layer.noise.noise_spectrum_dataset` cells at one ``N``, one
    ``sampling``) with ``eig_C_empirical``, ``eig_C_empirical_se``, ``eig_C_theory`` and
    ``C_norm`` (on ``P``). Eigenvalues are divided by ``C_norm = sigma_x^2 sigma_eps^2 / S``;
    the band is +-2 s.e.; log y axis.
    """
    ds = _spectrum_cells(ds, "fig2a")
    Ps = ds["P"].values
    fig, ax = plt.subplots(figsize=(4.4, 3.8), layout="constrained")
    for P, color in zip(Ps, _colors(Ps.size), strict=True):
        cell = ds.sel(P=P)
        norm = float(cell["C_norm"])
        emp, se, th = (
            cell[k].values / norm for k in ("eig_C_empirical", "eig_C_empirical_se", "eig_C_theory")
        )
        ok = _valid(th) & np.isfinite(emp)
        mode = cell["mode"].values[ok]
        ratio = P / float(cell["N"]) if "N" in cell.coords else np.nan
        ax.fill_between(
            mode, emp[ok] - 2 * se[ok], emp[ok] + 2 * se[ok], color=color, alpha=0.3, lw=0
        )
        ax.plot(mode, emp[ok], "-", color=color, lw=1.5, label=f"$P/N = {ratio:.3g}$")
        ax.plot(mode, th[ok], "--", color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("mode index $i$ (sorted)")
    ax.set_ylabel(r"eigenvalue of $C$ / $(\sigma_x^2\sigma_\epsilon^2/S)$")
    handles, labels = ax.get_legend_handles_labels()
    styles = [
        plt.Line2D([], [], color="0.3", lw=1.5, label="mini-batches at $w^*$ (band: $\\pm$2 s.e.)"),
        plt.Line2D([], [], color="k", ls="--", lw=0.8, label="Eq. 17"),
    ]
    ax.legend(
        handles + styles, labels + [s.get_label() for s in styles], frameon=False, loc="lower left"
    )
    ax.set_title(_title(ds), fontsize=9)
    return fig


@styled
def fig2b(ds: xr.Dataset, main_P: Sequence[int] | None = None) -> plt.Figure:
    """Fig. 2b: eigenvalues of Eq. 17 (solid) vs Eq. 20 (dashed); inset: extremes vs ``P/N``.

    Expects dims ``(P, mode)`` (merged
    :func:`~weightdyn.single_layer.noise.noise_spectrum_dataset` cells at one ``N``, possibly
    theory-only with ``n_batches = 0``) with ``eig_C_theory``, ``eig_C_hessian`` and
    ``C_norm``. The main panel shows the cells ``main_P`` (default: every ``P`` if there are
    at most four, else the smallest, the largest and the one nearest their geometric mean);
    the inset shows the largest and smallest eigenvalue of both for every ``P`` in ``ds``.
    Eigenvalues divided by ``C_norm``; log axes.
    """
    ds = _spectrum_cells(ds, "fig2b")
    Ps = np.sort(ds["P"].values)
    if main_P is None:
        if Ps.size <= 4:
            main_P = list(Ps)
        else:
            geo = np.sqrt(Ps[0] * Ps[-1])
            main_P = sorted({Ps[0], Ps[np.argmin(np.abs(np.log(Ps / geo)))], Ps[-1]})
    N = float(ds["N"]) if "N" in ds.coords and ds["N"].size == 1 else np.nan
    fig, ax = plt.subplots(figsize=(4.6, 4.4), layout="constrained")
    main_P = sorted(main_P)
    for P, color in zip(main_P, _colors(len(main_P)), strict=True):
        cell = ds.sel(P=P)
        norm = float(cell["C_norm"])
        th, hs = cell["eig_C_theory"].values / norm, cell["eig_C_hessian"].values / norm
        ok = _valid(th) & _valid(hs)
        mode = cell["mode"].values[ok]
        ax.plot(mode, th[ok], "-", color=color, lw=1.5, label=f"$P/N = {P / N:.3g}$")
        ax.plot(mode, hs[ok], "--", color=color, lw=1.2)
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    ax.set_ylim(low * 1e-3, high)  # room for the inset below the spectra
    ax.set_xlabel("mode index $i$ (sorted)")
    ax.set_ylabel(r"eigenvalue of $C$ / $(\sigma_x^2\sigma_\epsilon^2/S)$")
    handles, labels = ax.get_legend_handles_labels()
    styles = [
        plt.Line2D([], [], color="0.3", lw=1.5, label="Eq. 17"),
        plt.Line2D([], [], color="0.3", ls="--", lw=1.2, label=r"Eq. 20: $\sigma_\epsilon^2 H/S$"),
    ]
    fig.legend(
        handles + styles,
        labels + [s.get_label() for s in styles],
        frameon=False,
        loc="outside lower center",
        ncols=3,
    )
    ax.set_title(_title(ds), fontsize=9)

    inset = ax.inset_axes([0.17, 0.14, 0.4, 0.3])
    norm = ds["C_norm"].values
    order = np.argsort(ds["P"].values)
    x = ds["P"].values[order] / N
    for key, ls in (("eig_C_theory", "-"), ("eig_C_hessian", "--")):
        eig = ds[key].transpose("P", "mode").values / norm[:, None]
        eig = np.where(_valid(eig), eig, np.nan)
        inset.plot(x, np.nanmax(eig, axis=1)[order], ls, color="C3", lw=1)
        inset.plot(x, np.nanmin(eig, axis=1)[order], ls, color="C0", lw=1)
    _log_axes(inset)
    inset.set_xlabel("$P/N$", fontsize=7, labelpad=1)
    inset.tick_params(labelsize=6)
    inset.text(
        0.97,
        0.30,
        "max",
        color="C3",
        fontsize=7,
        ha="right",
        va="bottom",
        transform=inset.transAxes,
    )
    inset.text(
        0.97,
        0.08,
        "min",
        color="C0",
        fontsize=7,
        ha="right",
        va="bottom",
        transform=inset.transAxes,
    )
    return fig


@styled
def fig2c(ds: xr.Dataset) -> plt.Figure:
    """Fig. 2c: ``<|V^T C V|>`` in the Hessian eigenbasis, log colour scale normalised to max.

    Expects dims ``(mode_i, mode_j)``, optionally with a ``P`` dim (one panel per ``P``)
    (merged :func:`~weightdyn.single_layer.noise.hessian_basis_dataset` cells at one ``N``)
    and the variable ``C_tilde``. Modes are sorted by ascending Hessian eigenvalue. Each panel
    is divided by its own maximum; colours span ``[1e-4, 1]`` (shared colour bar).
    """
    ds = _only(ds, ("P", "mode_i", "mode_j"), "fig2c")
    if "P" not in ds.dims:
        ds = ds.expand_dims("P")
    Ps = ds["P"].values
    N = float(ds["N"]) if "N" in ds.coords and ds["N"].size == 1 else np.nan
    fig, axes = plt.subplots(
        1, Ps.size, figsize=(2.9 * Ps.size + 0.8, 3.1), layout="constrained", squeeze=False
    )
    norm = LogNorm(vmin=1e-4, vmax=1.0)
    for ax, P in zip(axes[0], Ps, strict=True):
        C = ds["C_tilde"].sel(P=P).transpose("mode_i", "mode_j").values
        img = ax.imshow(
            np.clip(C / np.nanmax(C), 1e-12, None),
            norm=norm,
            cmap="magma",
            origin="upper",
            interpolation="nearest",
        )
        ax.set_xlabel("Hessian mode $j$")
        ax.set_title(f"$N/P = {N / P:.2g}$ ($P = {P:g}$)", fontsize=9)
    axes[0, 0].set_ylabel("Hessian mode $i$")
    cbar = fig.colorbar(img, ax=axes[0].tolist(), shrink=0.9)
    cbar.set_label(r"$\langle|V^T C V|\rangle_{x,\epsilon}$ / max")
    return fig


FIGURES = {"fig1a": fig1a, "fig1b": fig1b, "fig2a": fig2a, "fig2b": fig2b, "fig2c": fig2c}
