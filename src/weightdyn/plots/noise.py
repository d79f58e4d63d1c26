"""Paper 000 Figs. 1-2: projector statistics, the matrix K and the mini-batch noise spectrum.

Every function takes the merged dataset of a sweep (or view) of one experiment of
:mod:`weightdyn.single_layer.noise_experiments`: cells along ``cell`` with one coordinate per
axis (``N``, ``P``, ``sampling``, ...), per-cell dimensions (``realisation``, ``rank``, ``mode``)
NaN-padded. :func:`fig2c` takes the summary of a ``hessian_basis`` sweep (groups of data
realisations along ``group``). Cells flagged ``interpolating`` (P <= N, all NaN) are skipped.
An axis a figure needs at one value but that varies raises a ``ValueError`` naming it.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import JACKKNIFE, ErrorBars
from weightdyn.single_layer.noise import power_law_fit

#: exponents of the paper's claim var(X^+X) ~ P^-1.8 N^-1 (text after Eq. 18)
PAPER_EXPONENTS = (-1.8, -1.0)
SIM = {"marker": "o", "ms": 3.5, "capsize": 2, "lw": 0, "elinewidth": 1}


def _cells(ds: xr.Dataset, mask: np.ndarray, dim: str = "cell") -> xr.Dataset:
    """The cells of ``ds`` where the boolean ``mask`` (one entry per cell) holds."""
    return ds.isel({dim: np.flatnonzero(np.asarray(mask))})


def _sorted_by(ds: xr.Dataset, key: str, dim: str = "cell") -> xr.Dataset:
    return ds.isel({dim: np.argsort(ds[key].values, kind="stable")})


def _single(ds: xr.Dataset, keys: Sequence[str], figure: str) -> None:
    """Refuse ``ds`` if a coordinate in ``keys`` takes several values."""
    varying = [k for k in keys if k in ds.coords and np.unique(ds[k].values).size > 1]
    if varying:
        raise ValueError(
            f"{figure} draws one curve family; select a single value of {varying} first "
            "(e.g. a view's select)"
        )


def _value(ds: xr.Dataset, key: str) -> object:
    """The one value of coordinate ``key`` (None if absent or not unique)."""
    if key not in ds.coords:
        return None
    values = np.unique(ds[key].values)
    return values[0].item() if values.size == 1 else None


def _colors(n: int, start: float = 0.0) -> np.ndarray:
    """``n`` viridis colours from ``start`` (0.25 keeps black dashed theory visible on them)."""
    return plt.cm.viridis(np.linspace(start, 0.85, max(n, 1)))


def _log_axes(ax: plt.Axes, x: bool = True, y: bool = True) -> None:
    if x:
        ax.set_xscale("log")
    if y:
        ax.set_yscale("log")


def _style_legend(ax: plt.Axes, styles: list[plt.Line2D], **kwargs: object) -> None:
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles + styles, labels + [s.get_label() for s in styles], frameon=False, **kwargs)


@styled
def fig1a(ds: xr.Dataset) -> plt.Figure:
    """Fig. 1a: off-diagonal variance of the projector ``X^+X`` vs ``P`` for several ``N``.

    Cells of a ``projector`` sweep (``var_offdiag_mean``, ``var_offdiag_se``,
    ``var_offdiag_haar``). Left: measured means (+-1 s.e.) and the exact Haar value (lines) on
    log axes, with the paper's claim ``~ P^-1.8 N^-1`` as dotted guides (anchored to the middle
    ``N`` at its largest ``P``) and the fitted ``c P^a N^b`` in the title. Right: scaled
    coordinates ``var P^2 / N`` vs ``P / N``, where the Haar value collapses onto
    ``(1 - N/P) P^2 / ((P - 1)(P + 2)) ~ 1 - N/P``.
    """
    ds = _sorted_by(_cells(ds, np.isfinite(ds["var_offdiag_mean"].values)), "P")
    Ns = np.unique(ds["N"].values)
    fit = power_law_fit(ds["P"].values, ds["N"].values, ds["var_offdiag_mean"].values)
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.4, 3.9), layout="constrained")
    mid = _cells(ds, ds["N"].values == Ns[Ns.size // 2]).isel(cell=-1)
    anchor = float(mid["var_offdiag_mean"]) / (
        float(mid["P"]) ** PAPER_EXPONENTS[0] * float(mid["N"]) ** PAPER_EXPONENTS[1]
    )
    sets = int(np.isfinite(ds["var_offdiag"].values).sum(axis=-1).max())
    bars = ErrorBars(f"$\\pm$1 s.e. over {sets} Gaussian input sets")
    for N, color in zip(Ns, _colors(Ns.size), strict=True):
        cell = _cells(ds, ds["N"].values == N)
        P = cell["P"].values.astype(float)
        y, e, h = (
            cell[k].values for k in ("var_offdiag_mean", "var_offdiag_se", "var_offdiag_haar")
        )
        bars.errorbar(left, P, y, e, color=color, label=f"$N = {N:g}$", **SIM)
        left.plot(P, h, "-", color=color, lw=1)
        guide = anchor * P ** PAPER_EXPONENTS[0] * float(N) ** PAPER_EXPONENTS[1]
        left.plot(P, guide, ":", color=color, lw=1.2)
        scale = P**2 / N
        bars.errorbar(right, P / N, y * scale, e * scale, color=color, **SIM)
        right.plot(P / N, h * scale, "-", color=color, lw=1)
    _log_axes(left)
    left.xaxis.set_minor_formatter(NullFormatter())
    left.set_xlabel("$P$")
    left.set_ylabel(r"$\mathrm{var}(\mathcal{P}_{\mu\nu}),\ \mu \neq \nu$")
    left.set_title(
        f"fit $c\\,P^{{a}}N^{{b}}$: $a = {fit.a:.2f} \\pm {fit.a_se:.2f}$, "
        f"$b = {fit.b:.2f} \\pm {fit.b_se:.2f}$",
        fontsize=8.5,
    )
    styles = [
        plt.Line2D([], [], color="0.3", marker="o", ms=3.5, lw=0, label="measured"),
        plt.Line2D([], [], color="0.3", lw=1, label="exact (Haar): $N(P-N)/(P(P-1)(P+2))$"),
        plt.Line2D([], [], color="0.3", ls=":", lw=1.2, label="paper: $\\propto P^{-1.8}N^{-1}$"),
    ]
    handles, labels = left.get_legend_handles_labels()
    fig.legend(
        handles + styles,
        labels + [h.get_label() for h in styles],
        loc="outside lower center",
        ncols=3,
        frameon=False,
        fontsize=7.5,
    )
    right.set_xscale("log")
    right.xaxis.set_minor_formatter(NullFormatter())
    right.axhline(1.0, color="k", lw=0.6, ls="--", zorder=0)
    right.set_xlabel("$P/N$")
    right.set_ylabel(r"$\mathrm{var}(\mathcal{P}_{\mu\nu})\,P^2/N$")
    right.set_title("scaled: exact $\\to 1 - N/P$ (dashed: 1)", fontsize=8.5)
    bars.annotate(fig, lambda note: fig.suptitle(note, fontsize=8.5))
    return fig


@styled
def fig1b(ds: xr.Dataset) -> plt.Figure:
    """Fig. 1b: diagonal of ``K`` (Eq. 18), sorted, for several ``P`` at fixed ``N``.

    Cells of a ``k_diagonal`` sweep at one ``N``, ``sigma_eps2`` and ``data_seed``
    (``PK_sorted`` = ``P K^mu_mu``, ``eps2_sorted`` = sorted ``eps^2``, drawn in black; NaN
    beyond each cell's ``P``). Log-log against rank ``mu`` (1-based).
    """
    _single(ds, ("N", "sigma_eps2", "data_seed"), "fig1b")
    ds = _sorted_by(_cells(ds, np.isfinite(ds["PK_sorted"].values).any(axis=1)), "P")
    fig, ax = plt.subplots(figsize=(5.6, 3.6), layout="constrained")
    noise_label = r"$(\epsilon^\mu)^2$, $\epsilon \sim \mathcal{N}(0, \sigma_\epsilon^2)$"
    for i, color in enumerate(_colors(ds.sizes["cell"])):
        cell = ds.isel(cell=i)
        ok = np.isfinite(cell["PK_sorted"].values)
        rank = cell["rank"].values[ok] + 1
        eps2, pk = cell["eps2_sorted"].values[ok], cell["PK_sorted"].values[ok]
        ax.plot(rank, eps2, "-", color="k", lw=0.7, label=noise_label if i == 0 else None)
        ax.plot(rank, pk, "-", color=color, lw=1.6, alpha=0.85, label=f"$P = {cell['P']:g}$")
    _log_axes(ax)
    ax.set_xlabel(r"rank $\mu$ (sorted by magnitude)")
    ax.set_ylabel(r"$P\,K^{\mu\mu}$")
    title = "Eq. 18"
    if _value(ds, "N") is not None:
        title += f", $N = {_value(ds, 'N'):g}$"
    if _value(ds, "sigma_eps2") is not None:
        title += f", $\\sigma_\\epsilon^2 = {_value(ds, 'sigma_eps2'):g}$"
    if _value(ds, "data_seed") is not None:
        title += f"\none data set (seed {_value(ds, 'data_seed')}): no error bars"
    ax.set_title(title, fontsize=9)
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


def _valid(values: np.ndarray) -> np.ndarray:
    return np.isfinite(values) & (values > 0)


def _title(ds: xr.Dataset) -> str:
    parts = []
    for key, sym in (("N", "N"), ("batch_size", "S"), ("sampling", "")):
        value = _value(ds, key)
        if value is not None:
            parts.append(f"{value} replacement" if key == "sampling" else f"${sym} = {value:g}$")
    return ", ".join(parts)


def _spectrum_cells(ds: xr.Dataset, figure: str) -> xr.Dataset:
    """Regular (non-interpolating) cells of one N, S and data set, sorted by P."""
    _single(ds, ("N", "batch_size", "sigma_eps2", "data_seed"), figure)
    return _sorted_by(_cells(ds, ds["interpolating"].values == 0), "P")


def _fig2a_panel(ax: plt.Axes, ds: xr.Dataset, band: ErrorBars) -> None:
    """Empirical spectra (markers, band +-2 s.e.) and Eq. 17 of one sampling mode, one colour
    per P."""
    for i, color in enumerate(_colors(ds.sizes["cell"], start=0.25)):
        cell = ds.isel(cell=i)
        norm = float(cell["C_norm"])
        emp, se, th = (
            cell[k].values / norm for k in ("eig_C_empirical", "eig_C_empirical_se", "eig_C_theory")
        )
        ok = _valid(th) & np.isfinite(emp)
        mode = cell["mode"].values[ok]
        ratio = float(cell["P"]) / float(cell["N"])
        band.band(ax, mode, emp[ok], 2 * se[ok], color=color, ms=2.2, mfc="none", mew=0.6,
                  label=f"$P/N = {ratio:.3g}$")  # fmt: skip
        ax.plot(mode, th[ok], "--", color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("mode index $i$ (sorted)")
    styles = [
        plt.Line2D([], [], color="0.3", marker="o", ms=2.2, mfc="none", lw=0,
                   label="mini-batches at $w^*$"),
        plt.Line2D([], [], color="k", ls="--", lw=0.8, label="Eq. 17"),
    ]  # fmt: skip
    _style_legend(ax, styles, loc="lower left", markerscale=2)
    ax.set_title(_title(ds), fontsize=9)


@styled
def fig2a(ds: xr.Dataset) -> plt.Figure:
    """Fig. 2a: sorted eigenvalues of the mini-batch noise covariance, empirical vs Eq. 17.

    Simulated cells (``n_batches > 0``) of a ``noise_spectrum`` sweep at one ``N``, ``S``,
    ``sigma_eps2`` and data set; one panel per ``sampling`` present (a view selects one, as in
    the paper). Eigenvalues are divided by ``C_norm = sigma_x^2 sigma_eps^2 / S``; the band is
    +-2 s.e.; log y axis.
    """
    ds = _spectrum_cells(ds, "fig2a")
    ds = _cells(ds, ds["n_batches"].values > 0)
    if ds.sizes["cell"] == 0:
        raise ValueError("fig2a needs simulated cells (n_batches > 0)")
    samplings = sorted(np.unique(ds["sampling"].values))
    fig, axes = plt.subplots(
        1, len(samplings), figsize=(4.4 * len(samplings), 3.8), layout="constrained",
        squeeze=False, sharey=True,
    )  # fmt: skip
    band = ErrorBars("$\\pm$2 s.e. (jackknife over blocks of mini-batches)", kind="band")
    for ax, sampling in zip(axes[0], samplings, strict=True):
        _fig2a_panel(ax, _cells(ds, ds["sampling"].values == sampling), band)
    axes[0, 0].set_ylabel(r"eigenvalue of $C$ / $(\sigma_x^2\sigma_\epsilon^2/S)$")
    band.annotate(fig, lambda note: fig.suptitle(note, fontsize=8.5))
    return fig


def _one_per_P(ds: xr.Dataset) -> xr.Dataset:
    """One cell per ``P`` (the one with most mini-batches: simulated cells win), sorted by P."""
    order = np.lexsort((-ds["n_batches"].values, ds["P"].values))
    ds = ds.isel(cell=order)
    _, first = np.unique(ds["P"].values, return_index=True)
    return ds.isel(cell=first)


def _main_P(ds: xr.Dataset, main_P: Sequence[int] | None) -> list[int]:
    """The P of the main panel: ``main_P``, else the simulated cells', else at most three."""
    if main_P is not None:
        return sorted(int(p) for p in main_P)
    simulated = ds["P"].values[ds["n_batches"].values > 0]
    if simulated.size:
        return sorted(int(p) for p in simulated)
    Ps = ds["P"].values
    if Ps.size <= 4:
        return sorted(int(p) for p in Ps)
    geo = np.sqrt(Ps[0] * Ps[-1])
    return sorted({int(Ps[0]), int(Ps[np.argmin(np.abs(np.log(Ps / geo)))]), int(Ps[-1])})


def _fig2b_extremes(inset: plt.Axes, ds: xr.Dataset) -> None:
    """Largest and smallest eigenvalue of Eq. 17 (solid) and Eq. 20 (dashed) vs P/N (the
    paper's inset, drawn beside the spectra so that neither hides the other)."""
    norm = ds["C_norm"].values[:, None]
    x = ds["P"].values / ds["N"].values
    for key, ls in (("eig_C_theory", "-"), ("eig_C_hessian", "--")):
        eig = ds[key].transpose("cell", "mode").values / norm
        eig = np.where(_valid(eig), eig, np.nan)
        inset.plot(x, np.nanmax(eig, axis=1), ls, color="C3", lw=1)
        inset.plot(x, np.nanmin(eig, axis=1), ls, color="C0", lw=1)
    _log_axes(inset)
    inset.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    inset.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    inset.xaxis.set_minor_formatter(NullFormatter())
    inset.set_xlabel("$P/N$")
    inset.set_ylabel(r"extreme eigenvalue / $(\sigma_x^2\sigma_\epsilon^2/S)$")
    inset.set_title("inset of the paper: max (red), min (blue)", fontsize=8)


@styled
def fig2b(
    ds: xr.Dataset, sampling: str = "with", main_P: Sequence[int] | None = None
) -> plt.Figure:
    """Fig. 2b: eigenvalues of Eq. 17 (solid) vs Eq. 20 (dashed); right: extremes vs ``P/N``.

    Cells (simulated or theory-only, ``n_batches = 0``) of ``noise_spectrum`` sweeps at one
    ``N``, ``S``, ``sigma_eps2`` and data set, of one ``sampling`` (default ``with``; the only
    one present otherwise). The main panel shows the cells ``main_P`` (default: the simulated
    cells', else every ``P`` if there are at most four, else the smallest, the largest and the
    one nearest their geometric mean); the inset shows the largest and smallest eigenvalue of
    both for every ``P``. Eigenvalues divided by ``C_norm``; log axes.
    """
    present = sorted(np.unique(ds["sampling"].values))
    ds = _cells(ds, ds["sampling"].values == (sampling if sampling in present else present[0]))
    ds = _one_per_P(_spectrum_cells(ds, "fig2b"))
    fig, (ax, side) = plt.subplots(
        1, 2, figsize=(7.6, 4.0), layout="constrained", gridspec_kw={"width_ratios": [1.4, 1]}
    )
    main = _main_P(ds, main_P)
    for P, color in zip(main, _colors(len(main)), strict=True):
        cell = _cells(ds, ds["P"].values == P).isel(cell=0)
        norm = float(cell["C_norm"])
        th, hs = cell["eig_C_theory"].values / norm, cell["eig_C_hessian"].values / norm
        ok = _valid(th) & _valid(hs)
        mode = cell["mode"].values[ok]
        ratio = P / float(cell["N"])
        ax.plot(mode, th[ok], "-", color=color, lw=1.5, label=f"$P/N = {ratio:.3g}$")
        ax.plot(mode, hs[ok], "--", color=color, lw=1.2)
    ax.set_yscale("log")
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
    ax.set_title(_title(ds) + "; theory only: no error bars", fontsize=9)
    _fig2b_extremes(side, ds)
    return fig


@styled
def fig2c(summary: xr.Dataset | Sequence[xr.Dataset]) -> plt.Figure:
    """Fig. 2c: ``<|V^T C V|>`` in the Hessian eigenbasis, log colour scale normalised to max.

    The summary of a ``hessian_basis`` sweep (``C_tilde`` on ``(group, mode_i, mode_j)``, one
    group per (N, P, S, sampling, sigma_eps2), averaged over data seeds), or a list of such
    summaries: one panel per group, sorted by ``N/P``. Modes are sorted by ascending Hessian
    eigenvalue. Each panel is divided by its own maximum; colours span ``[1e-4, 1]`` (shared
    colour bar).
    """
    ds = summary if isinstance(summary, xr.Dataset) else xr.concat(summary, dim="group")
    finite = np.isfinite(ds["C_tilde"].values).any(axis=(1, 2))
    ds = _cells(ds, finite, "group")
    ds = ds.isel(group=np.argsort(-ds["P"].values / ds["N"].values, kind="stable"))
    n = ds.sizes["group"]
    fig, axes = plt.subplots(
        1, n, figsize=(2.9 * n + 0.8, 3.1), layout="constrained", squeeze=False
    )
    norm = LogNorm(vmin=1e-4, vmax=1.0)
    for k, ax in enumerate(axes[0]):
        group = ds.isel(group=k)
        N = int(group["N"])
        C = group["C_tilde"].values[:N, :N]
        img = ax.imshow(
            np.clip(C / np.nanmax(C), 1e-12, None),
            norm=norm,
            cmap="magma",
            origin="upper",
            interpolation="nearest",
        )
        ax.set_xlabel("Hessian mode $j$")
        ax.set_title(
            f"$N/P = {N / float(group['P']):.2g}$ ($P = {float(group['P']):g}$)", fontsize=9
        )
    axes[0, 0].set_ylabel("Hessian mode $i$")
    fig.suptitle(_fig2c_note(ds), fontsize=8)
    cbar = fig.colorbar(img, ax=axes[0].tolist(), shrink=0.9)
    cbar.set_label(r"$\langle|V^T C V|\rangle_{x,\epsilon}$ / max")
    return fig


def _fig2c_note(ds: xr.Dataset) -> str:
    """What the colours of Fig. 2c average over, and how large their s.e. (not drawn) is."""
    n = np.unique(ds["n_realisations"].values) if "n_realisations" in ds else np.array([])
    over = f"{int(n[0])} data sets" if n.size == 1 else "data sets"
    text = f"mean of $|V^T C V|$ over {over} (modes by ascending Hessian eigenvalue)"
    if "C_tilde_se" not in ds:
        return text
    rel = (ds["C_tilde_se"] / ds["C_tilde"]).values
    diag = np.diagonal(rel, axis1=-2, axis2=-1)
    off = rel[..., ~np.eye(rel.shape[-1], dtype=bool)]
    if not (np.isfinite(diag).any() and np.isfinite(off).any()):
        return text
    return (
        text + f"\ns.e. (not drawn): at most {100 * np.nanmax(diag):.2g} % of the value on the "
        f"diagonal, median {100 * np.nanmedian(off):.2g} % off it"
    )


def _sgd_noise_cells(ds: xr.Dataset) -> xr.Dataset:
    """Measured, non-interpolating cells of an ``sgd_noise`` sweep at one N, S, lr, data set."""
    _single(ds, ("N", "batch_size", "sigma_eps2", "data_seed", "lr"), "fig2a")
    ok = (ds["interpolating"].values == 0) & np.isfinite(ds["eig_C_sgd"].values).any(axis=1)
    if not ok.any():
        raise ValueError("fig2a needs measured cells (P > N, not diverged)")
    return _sorted_by(_cells(ds, ok), "P")


#: measured eigenvalues of Fig. 2a from SGD: open markers on a thin solid line, in their band
MEASURED = {"ms": 2.2, "mfc": "none", "mew": 0.6, "line": 0.5}


def _spectrum_panel(ax: plt.Axes, ds: xr.Dataset, colors: dict, band: ErrorBars) -> None:
    """Eigenvalues at SGD states (markers, band +-2 s.e.), Eq. 17 (dashed) and Eq. 15 averaged
    (dotted)."""
    for cell in (ds.isel(cell=i) for i in range(ds.sizes["cell"])):
        color = colors[int(cell["P"])]
        norm = float(cell["C_norm"])
        emp, se, c17, c15 = (
            cell[k].values / norm
            for k in ("eig_C_sgd", "eig_C_sgd_se", "eig_C_theory", "eig_C_averaged")
        )
        ok = _valid(c17) & np.isfinite(emp)
        mode = cell["mode"].values[ok]
        ratio = float(cell["P"]) / float(cell["N"])
        band.band(ax, mode, emp[ok], 2 * se[ok], color=color, label=f"$P/N = {ratio:.3g}$",
                  **MEASURED)  # fmt: skip
        ax.plot(mode, c17[ok], "--", color="k", lw=0.9)
        ax.plot(mode, c15[ok], ":", color="C3", lw=1.1)
    ax.set_yscale("log")
    ax.set_xlabel("mode index $i$ (sorted)")
    ax.set_title(f"{_value(ds, 'sampling')} replacement", fontsize=9)


def _deviation_panel(ax: plt.Axes, ds: xr.Dataset, colors: dict, band: ErrorBars) -> None:
    """Measured / Eq. 17 - 1 per mode (markers, band +-2 s.e.) and Eq. 15 averaged / Eq. 17 - 1
    (dotted), over the Lyapunov M and over the exact SGD M (dash-dotted)."""
    for cell in (ds.isel(cell=i) for i in range(ds.sizes["cell"])):
        color = colors[int(cell["P"])]
        c17 = cell["eig_C_theory"].values
        ok = _valid(c17) & np.isfinite(cell["eig_C_sgd"].values)
        mode = cell["mode"].values[ok]
        dev = (cell["eig_C_sgd"].values / c17 - 1.0)[ok]
        err = 2 * (cell["eig_C_sgd_se"].values / c17)[ok]
        band.band(ax, mode, dev, err, color=color, **MEASURED)
        ax.plot(mode, (cell["eig_C_averaged"].values / c17 - 1.0)[ok], ":", color="C3", lw=1.1)
        exact = cell["eig_C_averaged_exact"].values / c17 - 1.0
        ax.plot(mode, exact[ok], "-.", color="C1", lw=1.0)
    ax.axhline(0.0, color="k", ls="--", lw=0.9)
    ax.set_xlabel("mode index $i$ (sorted)")
    ax.set_ylabel(r"eig$_i(C)$ / eig$_i(C_{\mathrm{Eq.\,17}})$ $-$ 1")
    ax.set_title(f"{_value(ds, 'sampling')} replacement: deviation from Eq. 17", fontsize=9)


def _prefactor_panel(
    ax: plt.Axes, with_: xr.Dataset, without: xr.Dataset, colors: dict, band: ErrorBars
) -> None:
    """Eigenvalues without / with replacement per mode (markers, band +-2 s.e., independent
    runs) against the App. C factor (P - S)/(P - 1) (dashed)."""
    for P in with_["P"].values:
        color = colors[int(P)]
        a = _cells(with_, with_["P"].values == P).isel(cell=0)
        b = _cells(without, without["P"].values == P)
        if b.sizes["cell"] == 0:
            continue
        b = b.isel(cell=0)
        ratio = b["eig_C_sgd"].values / a["eig_C_sgd"].values
        se = ratio * np.hypot(
            b["eig_C_sgd_se"].values / b["eig_C_sgd"].values,
            a["eig_C_sgd_se"].values / a["eig_C_sgd"].values,
        )
        ok = np.isfinite(ratio) & _valid(a["eig_C_theory"].values)
        mode = a["mode"].values[ok]
        band.band(ax, mode, ratio[ok], 2 * se[ok], color=color, **MEASURED)
        S = float(a["noise_prefactor"]) ** -1
        ax.axhline((P - S) / (P - 1), color=color, ls="--", lw=1.1)
    ax.set_xlabel("mode index $i$ (sorted)")
    ax.set_ylabel(r"eig$_i(C)$ without / with replacement")
    ax.set_title("App. C: ratio vs $(P-S)/(P-1)$ (dashed)", fontsize=9)


@styled
def fig2a_sgd(ds: xr.Dataset) -> plt.Figure:
    """Fig. 2a from SGD: the noise covariance at the states stationary SGD visits vs theory.

    Cells of an ``sgd_noise`` sweep at one ``N``, ``S``, ``lr``, ``sigma_eps2`` and data set,
    P/N varying, ``sampling`` with and/or without. Top: sorted eigenvalues at SGD states over
    ``C_norm = sigma_x^2 sigma_eps^2 / S`` (band +-2 s.e., jackknife over replica time blocks),
    Eq. 17 at w* (dashed black) and Eq. 15 averaged over the Lyapunov M (dotted red), one panel
    per sampling. Bottom left: measured / Eq. 17 - 1 (the multiplicative correction, Eq. 15
    averaged, dotted); bottom right (both samplings present): the ratio without / with
    replacement per mode against (P - S)/(P - 1) (dashed).
    """
    ds = _sgd_noise_cells(ds)
    samplings = sorted(np.unique(ds["sampling"].values))
    parts = {s: _cells(ds, ds["sampling"].values == s) for s in samplings}
    Ps = np.unique(ds["P"].values)
    colors = dict(zip(Ps.tolist(), plt.cm.viridis(np.linspace(0.25, 0.85, Ps.size)), strict=True))
    fig, axes = plt.subplots(
        2, len(samplings), figsize=(4.3 * len(samplings), 7.2), layout="constrained", squeeze=False
    )
    spectra = ErrorBars(f"$\\pm$2 s.e. ({JACKKNIFE})", kind="band")
    below = ErrorBars(f"$\\pm$2 s.e. ({JACKKNIFE})", kind="band")
    for ax, s in zip(axes[0], samplings, strict=True):
        _spectrum_panel(ax, parts[s], colors, spectra)
    axes[0, 0].set_ylabel(r"eigenvalue of $C$ / $(\sigma_x^2\sigma_\epsilon^2/S)$")
    _deviation_panel(axes[1, 0], parts[samplings[0]], colors, below)
    if len(samplings) == 2:
        _prefactor_panel(axes[1, 1], parts["with"], parts["without"], colors, below)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    styles = [
        plt.Line2D([], [], color="0.3", marker="o", ms=2.2, mfc="none", lw=0.5, label="SGD states"),
        plt.Line2D([], [], color="k", ls="--", lw=0.9, label="Eq. 17 at $w^*$"),
        plt.Line2D([], [], color="C3", ls=":", lw=1.1, label="Eq. 15 averaged over $M$ (Eq. 30)"),
        plt.Line2D([], [], color="C1", ls="-.", lw=1.0, label="Eq. 15 over exact SGD $M$ (below)"),
    ]
    fig.legend(
        handles + styles,
        labels + [s.get_label() for s in styles],
        loc="outside lower center",
        ncols=len(samplings) + 1,
        frameon=False,
        markerscale=2,
    )
    fixed = ", ".join(
        f"${sym} = {_value(ds, key):g}$"
        for key, sym in (("N", "N"), ("batch_size", "S"), ("lr", "\\lambda"))
        if _value(ds, key) is not None
    )
    sep = ", " if len(samplings) == 2 else "\n"  # one column: a narrow figure
    for _ in range(2):  # measured again with the notes in place (ErrorBars.annotate)
        top, bottom = spectra.note(fig, sep=sep), below.note(fig, relative=False, sep=sep)
        fig.suptitle(f"{fixed}\ntop: {top}\nbottom: {bottom}", fontsize=8.5)
    return fig
