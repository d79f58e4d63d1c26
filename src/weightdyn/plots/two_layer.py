"""Paper 000 Sec. III: Figs. 6a-c, 7a-b, the drift along the manifold of minima, relaxation.

Every function takes a merged two-layer sweep (cells along ``cell``, one coordinate per axis; a
bare cell file works too) and returns a Figure. ``fig6a``, ``fig6bc``, ``fig_drift`` and
``fig_relaxation`` draw one cell (per-cell views). ``fig7a`` and ``fig7b`` draw one row per group
of cells that differ only in ``dynamics`` (:func:`weightdyn.two_layer.merged.dynamics_groups`):
the SGD cell (circles, theory lines at its local point) and, when the sweep holds its SGF twin,
the nonlinear stochastic gradient flow (Eqs. 51-52) as the paper's dash-dotted line. ``fig6bc``
is Fig. 6b for a small-initialisation cell (``init_scale = 1e-4``) and Fig. 6c for a Glorot cell
(``init_scale = 1``). Protocol (a) (the paper's: theory at the gradient-flow end point ``W^0``)
is drawn in blue, protocol (b) (theory at the local point where the chains sit, their covariance
projected on the range of the drift) in red. Simulated symbols are labelled SGD or SGF after the
cell's ``dynamics``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.colors import TwoSlopeNorm
from matplotlib.ticker import MaxNLocator, NullFormatter

from weightdyn import io
from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import errorbar, state_bars
from weightdyn.two_layer.merged import dynamics_groups, is_diverged, one_cell, value

__all__ = ["fig6a", "fig6bc", "fig7a", "fig7b", "fig_drift", "fig_relaxation"]

SIM = {"ms": 3.0, "capsize": 1.5, "lw": 0, "elinewidth": 0.8}
COLOR_A = "C0"
COLOR_B = "C3"
COLOR_SGF = "C2"
NORM_LABEL = r"$(\lambda\sigma_y^2/2S)$"
EIG1 = r"eigenvalue of $\mathrm{cov}(\mathrm{vec}\,\delta W_1)$"
EIG2 = r"eigenvalue of $\mathrm{cov}(\mathrm{vec}\,\delta W_2)$"
EIG1_NORM = EIG1 + "\n/ " + NORM_LABEL  # two lines: longer than a panel is high
EIG2_NORM = EIG2 + "\n/ " + NORM_LABEL
BELOW = {"frameon": False, "fontsize": 6.5, "loc": "upper center"}


def _dyn(c: xr.Dataset) -> str:
    return str(value(c, "dynamics")).upper()


def _title(c: xr.Dataset, extra: str = "") -> str:
    v = {k: value(c, k) for k in ("N_i", "N_h", "N_o", "P", "sigma_y2", "lr", "batch_size")}
    init = "Gaussian" if value(c, "init") == "gaussian" else "zero-balanced"
    parts = [
        f"$N_i={v['N_i']}$, $N_h={v['N_h']}$, $N_o={v['N_o']}$, $P={v['P']}$",
        rf"$\sigma_y^2={float(v['sigma_y2']):g}$, $\lambda={float(v['lr']):g}$, "
        rf"$S={v['batch_size']}$",
        f"{init} init, variance ${float(value(c, 'init_scale')):g}\\times$ Glorot",
    ]
    return ", ".join(parts) + (f"\n{extra}" if extra else "")


def _n_z1(c: xr.Dataset) -> int:
    return int(value(c, "N_o")) * int(value(c, "N_i"))


def _replicas(c: xr.Dataset) -> int:
    return int(c.sizes["replica"])


def _errorbar(ax, x, y, e, color, label, marker="o", mfc=None):
    ok = np.isfinite(y) & (y > 0)
    errorbar(
        ax, x[ok], y[ok], yerr=np.where(np.isfinite(e), e, 0.0)[ok], fmt=marker, color=color,
        mfc=mfc if mfc is not None else color, label=label, **SIM,
    )  # fmt: skip


def _integer_x(*axes) -> None:
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _line(ax, x, y, style, color, label, lw=1.2):
    """A theory line, drawn over the markers (it would hide behind them where they agree).

    Rank-deficient spectra are stored as exact zeros, which a log axis leaves out; the small
    eigenvalues of the local spectra (down to 1e-18 of the largest, matched by the simulation)
    are drawn, only values below 1e-24 of the largest are taken for round-off."""
    ok = np.isfinite(y) & (y > 0)
    if ok.any():
        ok &= y > 1e-24 * np.max(y[ok])
    ax.plot(x[ok], y[ok], style, color=color, lw=lw, label=label, zorder=2.5)


def _sgf_line(ax, x, y, e, label):
    """The nonlinear SGF (paper's dash-dotted line) with a +-1 s.e. band."""
    ok = np.isfinite(y) & (y > 0)
    ax.plot(x[ok], y[ok], "-.", color=COLOR_SGF, lw=1.4, label=label)
    err = np.where(np.isfinite(e), e, 0.0)[ok]
    ax.fill_between(x[ok], np.clip(y[ok] - err, y[ok] * 0.05, None), y[ok] + err,
                    color=COLOR_SGF, alpha=0.18, lw=0)  # fmt: skip


def _diverged(c: xr.Dataset) -> plt.Figure | None:
    """A placeholder figure for a cell whose chains diverged (None if they did not)."""
    if not is_diverged(c):
        return None
    fig, ax = plt.subplots(figsize=(4.8, 2.4), layout="constrained")
    ax.text(0.5, 0.5, f"{_dyn(c)} diverged: no stationary state at this learning rate",
            ha="center", va="center", transform=ax.transAxes, fontsize=8)  # fmt: skip
    ax.set_axis_off()
    fig.suptitle(_title(c), fontsize=7)
    return fig


# ------------------------------------------------------------------------------- Fig. 6a


@styled
def fig6a(ds: xr.Dataset) -> plt.Figure:
    """Fig. 6a: the covariance M of Z = [vec z1; vec z2] in the SVD basis (Sec. III.2.3).

    Left: Eq. 66 at W^0; right: the simulated covariance (replica 0, about its time average)
    in the SVD basis of its local point. Both in units of lambda sigma_y^2 / (2S); lines
    separate the z1 (N_o N_i) and z2 (N_o N_h) blocks.
    """
    c = one_cell(ds)
    if (fig := _diverged(c)) is not None:
        return fig
    norm = float(c["M_isotropic"])
    n_z1 = _n_z1(c)
    mats = [c["M_z_eq66"].values / norm, c["M_z_sgd"].values / norm]
    vmax = max(float(np.nanmax(np.abs(m))) for m in mats)
    cnorm = TwoSlopeNorm(vcenter=0.0, vmin=-vmax, vmax=vmax)
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.7), layout="constrained")
    titles = [
        r"Eq. 66 at $W^0$ (paper)",
        f"{_dyn(c)} about its time average (one replica, no\nerror estimate; SVD basis of "
        "its local point)",
    ]
    for ax, m, title in zip(axes, mats, titles, strict=True):
        im = ax.imshow(m, cmap="RdBu_r", norm=cnorm, interpolation="nearest")
        ax.axhline(n_z1 - 0.5, color="k", lw=0.6)
        ax.axvline(n_z1 - 0.5, color="k", lw=0.6)
        n = m.shape[0]
        ticks = [n_z1 / 2 - 0.5, n_z1 + (n - n_z1) / 2 - 0.5]
        ax.set_xticks(ticks, [r"$z_1$", r"$z_2$"])
        ax.set_yticks(ticks, [r"$z_1$", r"$z_2$"])
        ax.set_title(title, fontsize=8)
        ax.set_xlabel(r"component $j$ of $Z = [\mathrm{vec}\,z_1;\,\mathrm{vec}\,z_2]$")
        ax.set_ylabel(r"component $i$ of $Z$")
    fig.colorbar(im, ax=axes, shrink=0.85, label=r"$M_{ij}\,/\,$" + NORM_LABEL)
    fig.suptitle(_title(c), fontsize=8)
    return fig


# ----------------------------------------------------------------------------- Fig. 6b,c


def _fig6_dw1(ax, c: xr.Dataset, max_mode1: int, norm: float) -> None:
    d = c.isel(mode1=slice(0, max_mode1))
    i1, n_z1, dyn = d["mode1"].values, _n_z1(c), _dyn(c)
    _errorbar(ax, i1, d["eig_cov1_sgd_a"].values / norm, d["eig_cov1_sgd_a_se"].values / norm,
              COLOR_A, f"{dyn} (a): about time average")  # fmt: skip
    _line(ax, i1, d["eig_cov1_eq66"].values / norm, "-", COLOR_A, r"Eq. 66 at $W^0$")
    _line(ax, i1, d["eig_cov1_exact_w0"].values / norm, "--", "k", r"exact lin. at $W^0$", 1.0)
    _errorbar(ax, i1, d["eig_cov1_sgd_b"].values / norm, d["eig_cov1_sgd_b_se"].values / norm,
              COLOR_B, f"{dyn} (b): local, projected", marker="s", mfc="none")  # fmt: skip
    _line(ax, i1, d["eig_cov1_exact_local"].values / norm, "-", COLOR_B,
          "exact lin. at local point")  # fmt: skip
    ax.axvline(n_z1 + 0.5, color="0.6", lw=0.8, zorder=0)
    ax.text(n_z1 + 1, 0.98, r"$i = N_oN_i$", transform=ax.get_xaxis_transform(),
            fontsize=7, va="top", color="0.4")  # fmt: skip
    ax.set_xlabel("mode index $i$")
    ax.set_ylabel(EIG1_NORM)


def _fig6_dw2(ax, c: xr.Dataset, norm: float) -> None:
    i2, dyn = c["mode2"].values, _dyn(c)
    _errorbar(ax, i2, c["eig_cov2_sgd_a"].values / norm, c["eig_cov2_sgd_a_se"].values / norm,
              COLOR_A, f"{dyn} (a)")  # fmt: skip
    _line(ax, i2, c["eig_cov2_eq66"].values / norm, "-", COLOR_A, r"Eq. 66 at $W^0$")
    _line(ax, i2, c["eig_cov2_eq70"].values / norm, ":", "C2", r"Eq. 70 at $W^0$", 1.6)
    _line(ax, i2, c["eig_cov2_exact_w0"].values / norm, "--", "k", r"exact lin. at $W^0$", 1.0)
    _errorbar(ax, i2, c["eig_cov2_sgd_b"].values / norm, c["eig_cov2_sgd_b_se"].values / norm,
              COLOR_B, f"{dyn} (b)", marker="s", mfc="none")  # fmt: skip
    _line(ax, i2, c["eig_cov2_exact_local"].values / norm, "-", COLOR_B, "exact lin., local")
    ax.set_xlabel("mode index $i$")
    ax.set_ylabel(EIG2_NORM)


@styled
def fig6bc(ds: xr.Dataset, max_mode1: int | None = None) -> plt.Figure:
    """Figs. 6b,c: eigenvalues of cov(vec dW1) and cov(vec dW2), simulation vs theory.

    Normalised by lambda sigma_y^2 / (2S). Protocol (a): the chains about their time average
    (filled) vs Eq. 66 at W^0 (solid), Eq. 70 (dW2, dots) and the exact linearisation at W^0
    (dashed). Protocol (b): the chains about the local point projected on range(Gamma) (open)
    vs the exact linearisation there (solid red). ``max_mode1`` limits the dW1 modes shown
    (default 2.5 N_o N_i).
    """
    c = one_cell(ds)
    if (fig := _diverged(c)) is not None:
        return fig
    norm = float(c["M_isotropic"])
    if max_mode1 is None:
        max_mode1 = min(c.sizes["mode1"], int(2.5 * _n_z1(c)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.6, 3.9), layout="constrained")
    _fig6_dw1(left, c, max_mode1, norm)
    _fig6_dw2(right, c, norm)
    _integer_x(left, right)
    for ax in (left, right):
        ax.set_yscale("log")
        ax.legend(ncols=2, bbox_to_anchor=(0.5, -0.16), **BELOW)
    stats = (
        rf"median rel. error (a) vs Eq. 66: $\delta W_1$ {float(c['err_cov1_a_eq66']):.2f}, "
        rf"$\delta W_2$ {float(c['err_cov2_a_eq66']):.2f};  (b): $\delta W_1$ "
        rf"{float(c['err_cov1_b']):.2f}, $\delta W_2$ {float(c['err_cov2_b']):.2f}"
    )
    what = (
        rf"$\pm$1 s.e., over {_replicas(c)} replicas for (a) $\delta W_1$, jackknife over "
        "(replica, time block) for the others"
    )
    state_bars(fig, fig.suptitle("", fontsize=8), what, _title(c, stats + "\n{bars}"),
               newline=True)  # fmt: skip
    return fig


# ----------------------------------------------------------------------------- Fig. 7


def _rows(ds: xr.Dataset) -> list[tuple[xr.Dataset, xr.Dataset | None, xr.Dataset | None]]:
    """(reference cell, SGD cell, SGF cell) per group of cells differing only in dynamics;
    the reference (theory lines, title) is the SGD cell if there is one. Diverged cells are
    left out."""
    ok = [c for c in io.cell_datasets(ds) if not is_diverged(c)]
    rows = []
    for group in dynamics_groups(ok):
        sgd, sgf = group.get("sgd"), group.get("sgf")
        rows.append((sgd if sgd is not None else sgf, sgd, sgf))
    return rows


def _no_rows() -> plt.Figure:
    fig, ax = plt.subplots(figsize=(4.8, 2.4), layout="constrained")
    ax.text(0.5, 0.5, "every cell of this view diverged", ha="center", va="center",
            transform=ax.transAxes, fontsize=8)  # fmt: skip
    ax.set_axis_off()
    return fig


def _grid(rows: list, height: float, **kw) -> tuple[plt.Figure, list, list]:
    """One sub-figure (two panels and its own title, see :func:`_state_rows`) per row."""
    fig = plt.figure(figsize=(7.6, height * len(rows)), layout="constrained")
    subfigs = list(fig.subfigures(len(rows), 1, squeeze=False)[:, 0])
    panels = [sf.subplots(1, 2, **kw) for sf in subfigs]
    return fig, subfigs, panels


def _state_rows(fig: plt.Figure, subfigs: list, panels: list, rows: list) -> None:
    """Each row's title: its cell, what the bars and bands are and how many bars the markers
    hide (measured on the laid-out figure)."""
    for sf, axes, (ref, sgd, sgf) in zip(subfigs, panels, rows, strict=True):
        lines = ["local point (protocol b); {bars}"]
        if sgf is not None:
            lines.append(
                rf"dash-dotted: nonlinear SGF, mean over {_replicas(sgf)} replicas "
                r"(band $\pm$1 s.e.)"
            )
        title = sf.suptitle("", fontsize=8)
        template = _title(ref, "\n".join(lines))
        if sgd is None:
            title.set_text(template.replace("{bars}", "no SGD cell"))
            continue
        what = rf"SGD mean over {_replicas(sgd)} replicas $\pm$1 s.e."
        state_bars(fig, title, what, template, axes=list(axes))


def _fig7a_loss(ax, ref, sgd, sgf) -> None:
    i2 = ref["mode2"].values
    if sgd is not None:
        _errorbar(ax, i2, sgd["delta_L2_sgd"].values, sgd["delta_L2_sgd_se"].values, "k",
                  "SGD eigenvectors")  # fmt: skip
    if sgf is not None:
        _sgf_line(ax, sgf["mode2"].values, sgf["delta_L2_sgd"].values,
                  sgf["delta_L2_sgd_se"].values, "SGF (nonlinear, Eqs. 51-52)")  # fmt: skip
    _line(ax, i2, ref["delta_L2_eq73_exact"].values, "-", "C0",
          r"Eq. 73: $\sigma_x^2 D_{1,ii}/2$")  # fmt: skip
    _line(ax, i2, ref["delta_L2_eq73_approx"].values, "--", "C1",
          r"Eq. 73: $S D_2\sigma_x^2 M_{22,ii}/(\lambda\sigma_y^2)$")  # fmt: skip
    ax.set_yscale("log")
    _integer_x(ax)
    ax.set_xlabel(r"mode index $i$ of $\mathrm{cov}(\mathrm{vec}\,\delta W_2)$")
    ax.set_ylabel(r"$\delta L(\theta\mathbf{a}_i)/\theta^2$ (even part)")
    ax.legend(ncols=2, bbox_to_anchor=(0.5, -0.17), **BELOW)


def _ivfr_points(ax, c, color, marker, norm) -> tuple[np.ndarray, str]:
    """Curvature vs variance of every mode and replica of cell ``c``, with its log-log fit."""
    var = c["ivfr_variance"].values.ravel()
    kap = c["ivfr_curvature"].values.ravel()
    ok = np.isfinite(var) & np.isfinite(kap) & (var > 0) & (kap > 0)
    n_rep = int(np.isfinite(c["ivfr_spearman"].values).sum())
    ax.plot(var[ok] / norm, kap[ok], marker, ms=2.2, color=color, alpha=0.5,
            label=f"{_dyn(c)} ({n_rep} replicas)")  # fmt: skip
    b, a = np.polyfit(np.log(var[ok]), np.log(kap[ok]), 1)
    x = np.geomspace(var[ok].min(), var[ok].max(), 50)
    fit = ("-", "C3") if marker == "o" else ("-.", COLOR_SGF)
    ax.plot(x / norm, np.exp(a) * x**b, fit[0], color=fit[1], lw=1.1,
            label=f"{_dyn(c)} fit: slope {b:.2f}")  # fmt: skip
    return var[ok], f"{_dyn(c)} $\\rho = {float(c['ivfr_spearman_mean']):.3f}$"


def _fig7a_ivfr(ax, ref, sgd, sgf) -> None:
    if not np.isfinite(float(ref["ivfr_slope_mean"])):
        ax.text(0.5, 0.5, "IVFR undefined: the projected cov(vec $\\delta W_2$)\n"
                "has fewer than 3 modes (zero-balanced:\na single $W_2$ mode, Sec. III.2.4)",
                ha="center", va="center", transform=ax.transAxes, fontsize=8)  # fmt: skip
        ax.set_axis_off()
        return
    norm = float(ref["M_isotropic"])
    var, title = _ivfr_points(ax, ref, "k" if ref is sgd else COLOR_SGF, "o", norm)
    titles = [title]
    if sgd is not None and sgf is not None and np.isfinite(float(sgf["ivfr_slope_mean"])):
        titles.append(_ivfr_points(ax, sgf, COLOR_SGF, "^", norm)[1])
    eq73 = ref["ivfr_curvature_eq73"].values.ravel()
    var_all = ref["ivfr_variance"].values.ravel()
    ok73 = np.isfinite(eq73) & np.isfinite(var_all) & (var_all > 0)
    if ok73.any():
        x = np.geomspace(var.min(), var.max(), 50)
        coef = np.median(eq73[ok73] / var_all[ok73])
        ax.plot(x / norm, coef * x, "--", color="C1", lw=1.0, label="Eq. 73 (slope 1)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # crowded labels within one decade
    ax.set_xlabel(r"variance: " + EIG2 + " / " + NORM_LABEL)
    ax.set_ylabel(r"curvature $\kappa_i$")
    ax.set_title("IVFR: Spearman " + ", ".join(titles), fontsize=8)
    ax.legend(frameon=False, fontsize=6.5, loc="upper left")


@styled
def fig7a(ds: xr.Dataset) -> plt.Figure:
    """Fig. 7a: loss perturbation along the eigenvectors of cov(dW2) (Eq. 73) and the IVFR.

    One row per group of cells differing only in dynamics. Left: delta L(theta a_i) / theta^2
    (even part in theta, the same for every theta) at the local point along the eigenvectors
    a_i of the projected SGD cov(vec dW2) (mean over replicas, +-1 s.e.), the same for the
    nonlinear SGF (dash-dotted, when the sweep holds the SGF cell), vs the exact
    sigma_x^2 D1_ii / 2 and the Eq. 73 approximation S D2 sigma_x^2 M22_ii / (lambda sigma_y^2)
    with the simulated variances. Right: curvature vs variance per mode and replica on log-log
    axes, with the fitted slopes and Eq. 73 (slope 1).
    """
    rows = _rows(ds)
    if not rows:
        return _no_rows()
    fig, subfigs, panels = _grid(rows, 3.9)
    for (left, right), (ref, sgd, sgf) in zip(panels, rows, strict=True):
        _fig7a_loss(left, ref, sgd, sgf)
        _fig7a_ivfr(right, ref, sgd, sgf)
    _state_rows(fig, subfigs, panels, rows)
    return fig


def _fig7b_loss(ax, ref, sgd, sgf, max_mode1: int) -> None:
    n_z1 = _n_z1(ref)
    d = ref.isel(mode1=slice(0, max_mode1))
    i = d["mode1"].values
    if sgd is not None:
        s = sgd.isel(mode1=slice(0, max_mode1))
        _errorbar(ax, i, s["delta_L1_sgd"].values, s["delta_L1_sgd_se"].values, "k",
                  "SGD eigenvectors")  # fmt: skip
    if sgf is not None:
        f = sgf.isel(mode1=slice(0, max_mode1))
        _sgf_line(ax, i, f["delta_L1_sgd"].values, f["delta_L1_sgd_se"].values,
                  "SGF (nonlinear, Eqs. 51-52)")  # fmt: skip
    _line(ax, i, d["delta_L1_linear"].values, "-", "C0", "linear theory (Eq. 66), $i \\leq N_oN_i$")
    ax.axvline(n_z1 + 0.5, color="0.6", lw=0.8, zorder=0)
    ratios = [f"{_dyn(c)}: mean ratio {float(c['delta_L1_drop_ratio']):.2g}"
              for c in (sgd, sgf) if c is not None]  # fmt: skip
    ax.text(0.98, 0.97, f"linear theory: $\\delta L = 0$\nfor $i > N_oN_i = {n_z1}$\n"
            + "\n".join(ratios), transform=ax.transAxes, ha="right", va="top", fontsize=7,
            color="C0")  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel(r"mode index $i$ of $\mathrm{cov}(\mathrm{vec}\,\delta W_1)$")
    ax.set_ylabel(r"$\delta L(\theta\mathbf{v}_i)/\theta^2$ (even part)")
    ax.legend(ncols=2, bbox_to_anchor=(0.5, -0.17), **BELOW)


def _fig7b_spectrum(ax, ref, sgd, sgf, max_mode1: int) -> None:
    norm = float(ref["M_isotropic"])
    d = ref.isel(mode1=slice(0, max_mode1))
    i = d["mode1"].values
    if sgd is not None:
        s = sgd.isel(mode1=slice(0, max_mode1))
        _errorbar(ax, i, s["eig_cov1_sgd_a"].values / norm, s["eig_cov1_sgd_a_se"].values / norm,
                  "k", "SGD, about time average")  # fmt: skip
    if sgf is not None:
        f = sgf.isel(mode1=slice(0, max_mode1))
        _sgf_line(ax, i, f["eig_cov1_sgd_a"].values / norm,
                  f["eig_cov1_sgd_a_se"].values / norm, "SGF, about time average")  # fmt: skip
    _line(ax, i, d["eig_cov1_exact_local"].values / norm, "-", "C0", "exact lin., local")
    ax.axvline(_n_z1(ref) + 0.5, color="0.6", lw=0.8, zorder=0)
    ax.set_yscale("log")
    ax.set_xlabel("mode index $i$")
    ax.set_ylabel(EIG1_NORM)
    ax.set_title(r"inset of the paper's Fig. 7b: $\mathrm{cov}(\mathrm{vec}\,\delta W_1)$",
                 fontsize=7.5)  # fmt: skip
    ax.legend(bbox_to_anchor=(0.5, -0.17), **BELOW)


@styled
def fig7b(ds: xr.Dataset, max_mode1: int | None = None) -> plt.Figure:
    """Fig. 7b: loss perturbation along the eigenvectors of cov(vec dW1), mode index on x.

    One row per group of cells differing only in dynamics. Left: delta L(theta v_i) / theta^2
    (even part in theta) at the local point for the SGD eigenvectors (mean over replicas,
    +-1 s.e.), for those of the nonlinear SGF (dash-dotted, the paper's curve that captures the
    drop at i = N_o N_i) and for the eigenvectors of the linear theory, which is exactly 0 for
    i > N_o N_i (the paper calls it flat). Right: the eigenvalues of cov(vec dW1) (the paper's
    inset) with their drop beyond i = N_o N_i. ``max_mode1`` defaults to 3 N_o N_i.
    """
    rows = _rows(ds)
    if not rows:
        return _no_rows()
    fig, subfigs, panels = _grid(rows, 3.8, width_ratios=[1.5, 1])
    for (left, right), (ref, sgd, sgf) in zip(panels, rows, strict=True):
        m = max_mode1 if max_mode1 is not None else min(ref.sizes["mode1"], 3 * _n_z1(ref))
        _fig7b_loss(left, ref, sgd, sgf, m)
        _fig7b_spectrum(right, ref, sgd, sgf, m)
    _state_rows(fig, subfigs, panels, rows)
    return fig


# ----------------------------------------------------------------------------------- drift


_DRIFT_LABELS = {
    "trace_D2": r"$D_2 = \|W_2\|_F^2$",
    "trace_D1": r"$\mathrm{tr}\,D_1 = \|W_1\|_F^2$",
    "trace_tr_gamma": r"$\mathrm{tr}\,\Gamma = \sigma_x^2(N_iD_2 + N_o\mathrm{tr}D_1)$",
    "trace_dist": r"$\|W_2W_1 - w^*\|_F$",
}


@styled
def fig_drift(ds: xr.Dataset) -> plt.Figure:
    """Drift along the manifold of minima: D2, D1, tr Gamma and |W2 W1 - w*| vs time.

    Window means of each replica (thin lines) and their mean (thick), time in units of the
    relaxation time tau0 at W^0; dashed: the gradient-flow end point W^0; grey line: start of
    the sampling window.
    """
    c = one_cell(ds)
    if (fig := _diverged(c)) is not None:
        return fig
    t = c["trace_tau"].values
    start = float(c["prerun_steps"]) / float(c["tau0_steps"])
    fig, axes = plt.subplots(2, 2, figsize=(7.2, 5.0), layout="constrained", sharex=True)
    sx2, N_i, N_o = float(c["sigma_x2"]), int(value(c, "N_i")), int(value(c, "N_o"))
    w0 = {
        "trace_D2": float(c["D2_w0"]),
        "trace_D1": float(c["D1_w0"]),
        "trace_tr_gamma": sx2 * (N_i * float(c["D2_w0"]) + N_o * float(c["D1_w0"])),
        "trace_dist": None,
    }
    for ax, key in zip(axes.ravel(), _DRIFT_LABELS, strict=True):
        y = c[key].values
        for r in range(y.shape[0]):
            ax.plot(t, y[r], "-", color="C0", lw=0.5, alpha=0.4)
        ax.plot(t, np.nanmean(y, axis=0), "-", color="C0", lw=1.6, label=f"{_dyn(c)} (mean)")
        if w0[key] is not None:
            ax.axhline(w0[key], color="k", ls="--", lw=0.9, label=r"gradient flow $W^0$")
        ax.axvline(start, color="0.6", lw=0.8, zorder=0)
        ax.set_ylabel(_DRIFT_LABELS[key])
        ax.set_xscale("log")
        if key != "trace_dist":
            ax.set_yscale("log")
    for ax in axes[1]:
        ax.set_xlabel(rf"{_dyn(c)} steps since $W^0$ / $\tau_0$")
    axes[0, 0].legend(frameon=False, fontsize=7)
    axes[1, 1].text(start, 0.92, " sampling", transform=axes[1, 1].get_xaxis_transform(),
                    fontsize=7, color="0.4")  # fmt: skip
    extra = (
        f"$\\tau_0 = {float(c['tau0_steps']):.0f}$ steps; $D_2$(local)/$D_2(W^0)$ = "
        f"{float(c['d2_drift_factor']):.2f}\nthin lines: window means of each of "
        f"{c.sizes['replica']} replicas, thick: their mean (no error bars: the replicas are drawn)"
    )
    fig.suptitle(_title(c, extra), fontsize=8)
    return fig


# ------------------------------------------------------------------------------ relaxation


@styled
def fig_relaxation(ds: xr.Dataset) -> plt.Figure:
    """Eqs. 74-78: autocorrelation of drift eigenmodes chi_k vs exp(-sigma_x^2 omega_k t).

    Modes of the exact drift at each replica's local point, from the slowest on; symbols: the
    simulated chains (mean over replicas, +-1 s.e.), lines: Eq. 76 with the corrected sign of
    Eq. 75, t = lambda * steps.
    """
    c = one_cell(ds)
    if (fig := _diverged(c)) is not None:
        return fig
    fig, ax = plt.subplots(figsize=(4.8, 3.6), layout="constrained")
    if "relax_acf" not in c:
        ax.text(0.5, 0.5, "no relaxation series (relax_tau = 0)", ha="center",
                transform=ax.transAxes)  # fmt: skip
        return fig
    t = float(value(c, "lr")) * c["lag"].values
    ax.plot([], [], "o", color="0.3", mfc="none", ms=SIM["ms"],
            label=f"{_dyn(c)}: mean over replicas")  # fmt: skip
    ax.plot([], [], "-", color="0.3", lw=1.1, label=r"Eq. 76: $e^{-\sigma_x^2\omega_k t}$")
    for k in c["relax_mode"].values:
        color = plt.cm.viridis(k / max(c.sizes["relax_mode"] - 1, 1) * 0.9)
        rate = float(c["relax_rate"].sel(relax_mode=k))
        errorbar(
            ax, t, c["relax_acf"].sel(relax_mode=k).values,
            yerr=c["relax_acf_se"].sel(relax_mode=k).values, fmt="o", color=color, mfc="none",
            **SIM,
        )  # fmt: skip
        ax.plot(t, c["relax_theory"].sel(relax_mode=k), "-", color=color, lw=1.1,
                label=rf"mode $k={k + 1}$: $\sigma_x^2\omega_k = {rate:.3g}$")  # fmt: skip
    ax.axhline(0.0, color="0.6", lw=0.6)
    ax.set_xlabel(r"$t = \lambda \times$ lag (steps)")
    ax.set_ylabel(r"$\langle\chi_k(t)\chi_k(0)\rangle / \langle\chi_k^2\rangle$")
    fig.legend(frameon=False, fontsize=6.5, ncols=2, loc="outside lower center")
    what = rf"$\pm$1 s.e. over {_replicas(c)} replicas"
    state_bars(fig, ax.set_title("", fontsize=7), what, _title(c, "{bars}"), relative=False)
    return fig
