"""Paper 000 Sec. III: Figs. 6a-c, 7a-b, the drift along the manifold of minima, relaxation.

Every function takes one cell dataset of :func:`weightdyn.two_layer.experiments.two_layer_cell`
and returns a Figure. ``fig6bc`` draws Fig. 6b for a small-initialisation cell
(``init_scale = 1e-4``) and Fig. 6c for a Glorot cell (``init_scale = 1``). Protocol (a) (the
paper's: theory at the gradient-flow end point
``W^0``) is drawn in blue, protocol (b) (theory at the local point where SGD sits, SGD
covariance projected on the range of the drift) in red.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.colors import TwoSlopeNorm

from weightdyn.plots.common import styled

__all__ = [
    "FIGURES",
    "fig6a",
    "fig6bc",
    "fig7a",
    "fig7b",
    "fig_drift",
    "fig_relaxation",
]

SIM = {"ms": 3.0, "capsize": 1.5, "lw": 0, "elinewidth": 0.8}
COLOR_A = "C0"
COLOR_B = "C3"


def _title(ds: xr.Dataset, extra: str = "") -> str:
    a = ds.attrs
    init = "Gaussian" if a.get("init") == "gaussian" else "zero-balanced"
    parts = [
        f"$N_i={a['N_i']}$, $N_h={a['N_h']}$, $N_o={a['N_o']}$, $P={a['P']}$",
        rf"$\sigma_y^2={float(a['sigma_y2']):g}$, $\lambda={float(a['lr']):g}$, "
        rf"$S={a['batch_size']}$",
        f"{init} init, variance ${float(a['init_scale']):g}\\times$ Glorot",
    ]
    return ", ".join(parts) + (f"\n{extra}" if extra else "")


def _errorbar(ax, x, y, e, color, label, marker="o", mfc=None):
    ok = np.isfinite(y) & (y > 0)
    ax.errorbar(
        x[ok], y[ok], yerr=np.where(np.isfinite(e), e, 0.0)[ok], fmt=marker, color=color,
        mfc=mfc if mfc is not None else color, label=label, **SIM,
    )  # fmt: skip


def _line(ax, x, y, style, color, label, lw=1.2):
    ok = np.isfinite(y) & (y > 0)
    if ok.any():
        ok &= y > 1e-12 * np.max(y[ok])  # round-off zeros (rank-deficient spectra)
    ax.plot(x[ok], y[ok], style, color=color, lw=lw, label=label)


# ------------------------------------------------------------------------------- Fig. 6a


@styled
def fig6a(ds: xr.Dataset) -> plt.Figure:
    """Fig. 6a: the covariance M of Z = [vec z1; vec z2] in the SVD basis (Sec. III.2.3).

    Left: Eq. 66 at W^0; right: the SGD covariance (replica 0, about its time average) in the
    SVD basis of its local point. Both in units of lambda sigma_y^2 / (2S); lines separate the
    z1 (N_o N_i) and z2 (N_o N_h) blocks.
    """
    norm = float(ds["M_isotropic"])
    n_z1 = int(ds.attrs["N_z1"])
    mats = [ds["M_z_eq66"].values / norm, ds["M_z_sgd"].values / norm]
    vmax = max(float(np.nanmax(np.abs(m))) for m in mats)
    cnorm = TwoSlopeNorm(vcenter=0.0, vmin=-vmax, vmax=vmax)
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.7), layout="constrained")
    titles = [
        r"Eq. 66 at $W^0$ (paper)",
        "SGD about its time average\n(replica 0, SVD basis of its local point)",
    ]
    for ax, m, title in zip(axes, mats, titles, strict=True):
        im = ax.imshow(m, cmap="RdBu_r", norm=cnorm, interpolation="nearest")
        for pos in (n_z1 - 0.5,):
            ax.axhline(pos, color="k", lw=0.6)
            ax.axvline(pos, color="k", lw=0.6)
        n = m.shape[0]
        ticks = [n_z1 / 2 - 0.5, n_z1 + (n - n_z1) / 2 - 0.5]
        ax.set_xticks(ticks, [r"$z_1$", r"$z_2$"])
        ax.set_yticks(ticks, [r"$z_1$", r"$z_2$"])
        ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.85, label=r"$M\,/\,(\lambda\sigma_y^2/2S)$")
    fig.suptitle(_title(ds), fontsize=8)
    return fig


# ----------------------------------------------------------------------------- Fig. 6b,c


@styled
def fig6bc(ds: xr.Dataset, max_mode1: int | None = None) -> plt.Figure:
    """Figs. 6b,c: eigenvalues of cov(vec dW1) and cov(vec dW2), SGD vs theory.

    Normalised by lambda sigma_y^2 / (2S). Protocol (a): SGD about its time average (filled)
    vs Eq. 66 at W^0 (solid), Eq. 70 (dW2, dots) and the exact linearisation at W^0 (dashed).
    Protocol (b): SGD about the local point projected on range(Gamma) (open) vs the exact
    linearisation there (solid red). ``max_mode1`` limits the dW1 modes shown (default
    2.5 N_o N_i).
    """
    norm = float(ds["M_isotropic"])
    n_z1 = int(ds.attrs["N_z1"])
    if max_mode1 is None:
        max_mode1 = min(ds.sizes["mode1"], int(2.5 * n_z1))
    d1 = ds.isel(mode1=slice(0, max_mode1))
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.6, 3.9), layout="constrained")
    i1 = d1["mode1"].values
    _errorbar(left, i1, d1["eig_cov1_sgd_a"].values / norm, d1["eig_cov1_sgd_a_se"].values / norm,
              COLOR_A, "SGD (a): about time average")  # fmt: skip
    _line(left, i1, d1["eig_cov1_eq66"].values / norm, "-", COLOR_A, r"Eq. 66 at $W^0$")
    _line(left, i1, d1["eig_cov1_exact_w0"].values / norm, "--", "k", r"exact lin. at $W^0$", 1.0)
    _errorbar(left, i1, d1["eig_cov1_sgd_b"].values / norm, d1["eig_cov1_sgd_b_se"].values / norm,
              COLOR_B, "SGD (b): local, projected", marker="s", mfc="none")  # fmt: skip
    _line(
        left,
        i1,
        d1["eig_cov1_exact_local"].values / norm,
        "-",
        COLOR_B,
        "exact lin. at local point",
    )
    left.axvline(n_z1 + 0.5, color="0.6", lw=0.8, zorder=0)
    left.text(n_z1 + 1, 0.98, r"$i = N_oN_i$", transform=left.get_xaxis_transform(),
              fontsize=7, va="top", color="0.4")  # fmt: skip
    left.set_xlabel("mode index $i$")
    left.set_ylabel(r"eig cov(vec $\delta W_1$) / $(\lambda\sigma_y^2/2S)$")
    i2 = ds["mode2"].values
    _errorbar(right, i2, ds["eig_cov2_sgd_a"].values / norm, ds["eig_cov2_sgd_a_se"].values / norm,
              COLOR_A, "SGD (a)")  # fmt: skip
    _line(right, i2, ds["eig_cov2_eq66"].values / norm, "-", COLOR_A, r"Eq. 66 at $W^0$")
    _line(right, i2, ds["eig_cov2_eq70"].values / norm, ":", "C2", r"Eq. 70 at $W^0$", 1.6)
    _line(right, i2, ds["eig_cov2_exact_w0"].values / norm, "--", "k", r"exact lin. at $W^0$", 1.0)
    _errorbar(right, i2, ds["eig_cov2_sgd_b"].values / norm, ds["eig_cov2_sgd_b_se"].values / norm,
              COLOR_B, "SGD (b)", marker="s", mfc="none")  # fmt: skip
    _line(right, i2, ds["eig_cov2_exact_local"].values / norm, "-", COLOR_B, "exact lin., local")
    right.set_xlabel("mode index $i$")
    right.set_ylabel(r"eig cov(vec $\delta W_2$) / $(\lambda\sigma_y^2/2S)$")
    for ax in (left, right):
        ax.set_yscale("log")
    for ax in (left, right):
        ax.legend(frameon=False, fontsize=6.5, ncols=2, loc="upper center",
                  bbox_to_anchor=(0.5, -0.16))  # fmt: skip
    stats = (
        f"median rel. error (a) vs Eq. 66: dW1 {float(ds['err_cov1_a_eq66']):.2f}, "
        f"dW2 {float(ds['err_cov2_a_eq66']):.2f};  (b): dW1 {float(ds['err_cov1_b']):.2f}, "
        f"dW2 {float(ds['err_cov2_b']):.2f};  error bars $\\pm$1 s.e."
    )
    fig.suptitle(_title(ds, stats), fontsize=8)
    return fig


# -------------------------------------------------------------------------------- Fig. 7a


@styled
def fig7a(ds: xr.Dataset) -> plt.Figure:
    """Fig. 7a: loss perturbation along the eigenvectors of cov(dW2) (Eq. 73) and the IVFR.

    Left: delta L(theta a_i) / theta^2 (even part in theta, the same for every theta) at the
    local point along the eigenvectors a_i of the projected SGD cov(vec dW2) (mean over
    replicas, +-1 s.e.) vs the exact sigma_x^2 D1_ii / 2 and the Eq. 73 approximation
    S D2 sigma_x^2 M22_ii / (lambda sigma_y^2) with the SGD variances. Right: curvature vs
    variance per mode and replica on log-log axes, with the fitted slope and Eq. 73 (slope 1).
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.6, 3.6), layout="constrained")
    i2 = ds["mode2"].values
    _errorbar(left, i2, ds["delta_L2_sgd"].values, ds["delta_L2_sgd_se"].values, "k",
              "SGD eigenvectors")  # fmt: skip
    _line(left, i2, ds["delta_L2_eq73_exact"].values, "-", "C0",
          r"Eq. 73: $\sigma_x^2 D_{1,ii}/2$")  # fmt: skip
    _line(left, i2, ds["delta_L2_eq73_approx"].values, "--", "C1",
          r"Eq. 73: $S D_2\sigma_x^2 M_{22,ii}/(\lambda\sigma_y^2)$")  # fmt: skip
    left.set_yscale("log")
    left.set_xlabel(r"mode index $i$ of cov(vec $\delta W_2$)")
    left.set_ylabel(r"$\delta L(\theta\mathbf{a}_i)/\theta^2$ (even part)")
    left.legend(frameon=False, fontsize=6.5, loc="lower left")
    var = ds["ivfr_variance"].values.ravel()
    kap = ds["ivfr_curvature"].values.ravel()
    ok = np.isfinite(var) & np.isfinite(kap) & (var > 0) & (kap > 0)
    norm = float(ds["M_isotropic"])
    if not np.isfinite(float(ds["ivfr_slope_mean"])):
        right.text(0.5, 0.5, "IVFR undefined: the projected cov(vec $\\delta W_2$)\n"
                   "has fewer than 3 modes (zero-balanced:\na single $W_2$ mode, Sec. III.2.4)",
                   ha="center", va="center", transform=right.transAxes, fontsize=8)  # fmt: skip
        right.set_axis_off()
        fig.suptitle(_title(ds, "local point (protocol b)"), fontsize=8)
        return fig
    right.plot(var[ok] / norm, kap[ok], "o", ms=2.2, color="k", alpha=0.5,
               label=f"SGD ({ds.sizes['replica']} replicas)")  # fmt: skip
    x = np.geomspace(var[ok].min(), var[ok].max(), 50)
    b, a = np.polyfit(np.log(var[ok]), np.log(kap[ok]), 1)
    right.plot(x / norm, np.exp(a) * x**b, "-", color="C3", lw=1.2, label=f"fit: slope {b:.2f}")
    eq73 = ds["ivfr_curvature_eq73"].values.ravel()
    ok73 = ok & np.isfinite(eq73)
    if ok73.any():
        coef = np.median(eq73[ok73] / var[ok73])
        right.plot(x / norm, coef * x, "--", color="C1", lw=1.0, label="Eq. 73 (slope 1)")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel(r"variance (eig cov(vec $\delta W_2$)) / $(\lambda\sigma_y^2/2S)$")
    right.set_ylabel(r"curvature $\kappa_i$")
    rho = float(ds["ivfr_spearman_mean"])
    slope = float(ds["ivfr_slope_mean"])
    right.set_title(f"IVFR: Spearman $\\rho = {rho:.3f}$, mean slope {slope:.2f}", fontsize=8)
    right.legend(frameon=False, fontsize=6.5, loc="upper left")
    fig.suptitle(_title(ds, "local point (protocol b); error bars $\\pm$1 s.e. over replicas"),
                 fontsize=8)  # fmt: skip
    return fig


# -------------------------------------------------------------------------------- Fig. 7b


@styled
def fig7b(ds: xr.Dataset, max_mode1: int | None = None) -> plt.Figure:
    """Fig. 7b: loss perturbation along the eigenvectors of cov(vec dW1), mode index on x.

    Left: delta L(theta v_i) / theta^2 (even part in theta) at the local point for the SGD
    eigenvectors (mean over replicas, +-1 s.e.) and for the eigenvectors of the linear theory,
    which is exactly 0 for i > N_o N_i (the paper calls it flat). Right: the eigenvalues of
    cov(vec dW1) (the paper's inset) with their drop beyond i = N_o N_i. ``max_mode1``
    defaults to 3 N_o N_i.
    """
    n_z1 = int(ds.attrs["N_z1"])
    if max_mode1 is None:
        max_mode1 = min(ds.sizes["mode1"], 3 * n_z1)
    d = ds.isel(mode1=slice(0, max_mode1))
    i = d["mode1"].values
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(7.6, 3.5), layout="constrained", width_ratios=[1.5, 1]
    )
    _errorbar(left, i, d["delta_L1_sgd"].values, d["delta_L1_sgd_se"].values, "k",
              "SGD eigenvectors")  # fmt: skip
    lin = d["delta_L1_linear"].values
    _line(left, i, lin, "-", "C0", "linear theory (Eq. 66), $i \\leq N_oN_i$")
    left.axvline(n_z1 + 0.5, color="0.6", lw=0.8, zorder=0)
    ratio = float(ds["delta_L1_drop_ratio"])
    left.text(
        0.98, 0.97,
        f"linear theory: $\\delta L = 0$\nfor $i > N_oN_i = {n_z1}$\n"
        f"SGD: mean ratio {ratio:.2g}",
        transform=left.transAxes, ha="right", va="top", fontsize=7, color="C0",
    )  # fmt: skip
    left.set_yscale("log")
    left.set_xlabel(r"mode index $i$ of cov(vec $\delta W_1$)")
    left.set_ylabel(r"$\delta L(\theta\mathbf{v}_i)/\theta^2$ (even part)")
    left.legend(frameon=False, fontsize=6.5, loc="lower center")
    norm = float(ds["M_isotropic"])
    _errorbar(right, i, d["eig_cov1_sgd_a"].values / norm, d["eig_cov1_sgd_a_se"].values / norm,
              "k", "SGD, about time average")  # fmt: skip
    _line(right, i, d["eig_cov1_exact_local"].values / norm, "-", "C0", "exact lin., local")
    right.axvline(n_z1 + 0.5, color="0.6", lw=0.8, zorder=0)
    right.set_yscale("log")
    right.set_xlabel("mode index $i$")
    right.set_ylabel(r"eig cov(vec $\delta W_1$) / $(\lambda\sigma_y^2/2S)$")
    right.legend(frameon=False, fontsize=6.5, loc="lower left")
    fig.suptitle(_title(ds, r"local point (protocol b); error bars $\pm$1 s.e. over replicas"),
                 fontsize=8)  # fmt: skip
    return fig


# ----------------------------------------------------------------------------------- drift


@styled
def fig_drift(ds: xr.Dataset) -> plt.Figure:
    """Drift along the manifold of minima: D2, D1, tr Gamma and |W2 W1 - w*| vs time.

    Window means of each replica (thin lines) and their mean (thick), time in units of the
    relaxation time tau0 at W^0; dashed: the gradient-flow end point W^0; grey line: start of
    the sampling window.
    """
    t = ds["trace_tau"].values
    start = float(ds.attrs["sampling_start_step"]) / float(ds["tau0_steps"])
    fig, axes = plt.subplots(2, 2, figsize=(7.2, 5.0), layout="constrained", sharex=True)
    sx2 = float(ds["sigma_x2"])
    N_i, N_o = int(ds.attrs["N_i"]), int(ds.attrs["N_o"])
    w0 = {
        "trace_D2": float(ds["D2_w0"]),
        "trace_D1": float(ds["D1_w0"]),
        "trace_tr_gamma": sx2 * (N_i * float(ds["D2_w0"]) + N_o * float(ds["D1_w0"])),
        "trace_dist": None,
    }
    labels = {
        "trace_D2": r"$D_2 = \|W_2\|_F^2$",
        "trace_D1": r"$\mathrm{tr}\,D_1 = \|W_1\|_F^2$",
        "trace_tr_gamma": r"$\mathrm{tr}\,\Gamma = \sigma_x^2(N_iD_2 + N_o\mathrm{tr}D_1)$",
        "trace_dist": r"$\|W_2W_1 - w^*\|_F$",
    }
    for ax, key in zip(axes.ravel(), labels, strict=True):
        y = ds[key].values
        for r in range(y.shape[0]):
            ax.plot(t, y[r], "-", color="C0", lw=0.5, alpha=0.4)
        ax.plot(t, np.nanmean(y, axis=0), "-", color="C0", lw=1.6, label="SGD (mean)")
        if w0[key] is not None:
            ax.axhline(w0[key], color="k", ls="--", lw=0.9, label=r"gradient flow $W^0$")
        ax.axvline(start, color="0.6", lw=0.8, zorder=0)
        ax.set_ylabel(labels[key])
        ax.set_xscale("log")
        if key != "trace_dist":
            ax.set_yscale("log")
    for ax in axes[1]:
        ax.set_xlabel(r"SGD steps since $W^0$ / $\tau_0$")
    axes[0, 0].legend(frameon=False, fontsize=7)
    axes[1, 1].text(start, 0.92, " sampling", transform=axes[1, 1].get_xaxis_transform(),
                    fontsize=7, color="0.4")  # fmt: skip
    extra = (
        f"$\\tau_0 = {float(ds['tau0_steps']):.0f}$ steps; $D_2$(local)/$D_2(W^0)$ = "
        f"{float(ds['d2_drift_factor']):.2f}; thin lines: {ds.sizes['replica']} replicas"
    )
    fig.suptitle(_title(ds, extra), fontsize=8)
    return fig


# ------------------------------------------------------------------------------ relaxation


@styled
def fig_relaxation(ds: xr.Dataset) -> plt.Figure:
    """Eqs. 74-78: autocorrelation of drift eigenmodes chi_k vs exp(-sigma_x^2 omega_k t).

    Modes of the exact drift at each replica's local point, from the slowest on; symbols: SGD
    (mean over replicas, +-1 s.e.), lines: Eq. 76 with the corrected sign of Eq. 75,
    t = lambda * steps.
    """
    fig, ax = plt.subplots(figsize=(4.8, 3.6), layout="constrained")
    if "relax_acf" not in ds:
        ax.text(0.5, 0.5, "no relaxation series (relax_tau = 0)", ha="center",
                transform=ax.transAxes)  # fmt: skip
        return fig
    lr = float(ds.attrs["lr"])
    t = lr * ds["lag"].values
    for k in ds["relax_mode"].values:
        color = plt.cm.viridis(k / max(ds.sizes["relax_mode"] - 1, 1) * 0.9)
        rate = float(ds["relax_rate"].sel(relax_mode=k))
        ax.errorbar(
            t, ds["relax_acf"].sel(relax_mode=k), yerr=ds["relax_acf_se"].sel(relax_mode=k),
            fmt="o", color=color, mfc="none", **SIM,
        )  # fmt: skip
        ax.plot(t, ds["relax_theory"].sel(relax_mode=k), "-", color=color, lw=1.1,
                label=rf"$\sigma_x^2\omega_k = {rate:.3g}$")  # fmt: skip
    ax.axhline(0.0, color="0.6", lw=0.6)
    ax.set_xlabel(r"$t = \lambda \times$ lag (steps)")
    ax.set_ylabel(r"$\langle\chi_k(t)\chi_k(0)\rangle / \langle\chi_k^2\rangle$")
    ax.legend(frameon=False, fontsize=7, title=r"Eq. 76: $e^{-\sigma_x^2\omega_k t}$",
              title_fontsize=7)  # fmt: skip
    ax.set_title(_title(ds), fontsize=7)
    return fig


FIGURES = {
    "fig6a": fig6a,
    "fig6bc": fig6bc,
    "fig7a": fig7a,
    "fig7b": fig7b,
    "fig_drift": fig_drift,
    "fig_relaxation": fig_relaxation,
}
