"""Paper 000 Fig. 5: loss perturbation along eigenvectors of the SGD weight covariance (Eq. 35)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn.plots.common import styled

__all__ = ["fig5a", "fig5b"]


def _title(ds: xr.Dataset) -> str:
    parts = []
    for key, sym in (("N", "N"), ("P", "P"), ("sigma_eps2", r"\sigma_\epsilon^2")):
        if key in ds.attrs:
            parts.append(f"${sym} = {ds.attrs[key]:g}$")
    return ", ".join(parts)


def _eigen_inset(ax: plt.Axes, ds: xr.Dataset, mean: str, se: str, bounds) -> plt.Axes:
    """Inset: covariance eigenvalues vs mode index, normalised by Eq. 34 if available."""
    inset = ax.inset_axes(bounds)
    norm = float(ds["M_isotropic"]) if "M_isotropic" in ds else 1.0
    i = ds["mode"].values
    inset.errorbar(
        i, ds[mean] / norm, yerr=ds[se] / norm, fmt="o", ms=1.5, color="C0", elinewidth=0.6, lw=0
    )
    theory = mean.replace("eig_M_sgd", "eig_M_theory")  # eig_M_theory or eig_M_theory_mean
    if theory in ds and np.isfinite(ds[theory]).all():
        inset.plot(i, ds[theory] / norm, "-", color="k", lw=0.8)
    if "M_isotropic" in ds:
        inset.axhline(1.0, color="k", ls="-.", lw=0.6)
        inset.set_ylabel(r"eig$(M)\,/\,(\lambda\sigma_\epsilon^2/2S)$", fontsize=6.5)
    else:
        inset.set_ylabel(r"eig$(M)$", fontsize=7)
    inset.set_xlabel("$i$", fontsize=7, labelpad=1)
    inset.tick_params(labelsize=6.5)
    return inset


@styled
def fig5a(ds: xr.Dataset, modes: Sequence[int] | None = None, ylim_rel: float = 0.25) -> plt.Figure:
    """Fig. 5a: delta L(theta v_i) / theta^2 vs theta for several modes i, i.i.d. data.

    ``ds`` is a :func:`weightdyn.single_layer.perturbation.perturbation_dataset` with coordinates
    ``mode`` and ``theta`` and variables ``delta_L_over_theta2`` and
    ``delta_L_over_theta2_exact`` (mode, theta), ``eig_M_sgd``, ``eig_M_sgd_se`` (mode), the
    scalar ``delta_L_over_theta2_iid``; optional ``eig_M_theory`` (mode) and ``M_isotropic``
    (inset normalisation, Eq. 34). Symbols: SGD eigenvectors through Eq. 3; short dashes:
    exact v^T H v / 2 (Eq. 35); black line: sigma_x^2 / 2. Default ``modes``: five spread over
    the spectrum. The y range is sigma_x^2/2 (1 +- ``ylim_rel``).
    """
    n = ds.sizes["mode"]
    if modes is None:
        modes = sorted({0, n // 4, n // 2, (3 * n) // 4, n - 1})
    theta = ds["theta"].values
    iid = float(ds["delta_L_over_theta2_iid"])
    fig, ax = plt.subplots(figsize=(5.2, 3.8), layout="constrained")
    markers = "osD^vP*X"
    for j, i in enumerate(modes):
        color = plt.cm.viridis(j / max(len(modes) - 1, 1) * 0.9)
        ax.plot(
            theta,
            ds["delta_L_over_theta2"].sel(mode=i),
            markers[j % len(markers)],
            ms=4,
            mfc="none",
            color=color,
            ls="-",
            lw=0.6,
            label=f"$i = {i}$",
        )
        ax.plot(theta, ds["delta_L_over_theta2_exact"].sel(mode=i), ":", color=color, lw=1.0)
    ax.axhline(iid, color="k", lw=1.2, label=r"$\sigma_x^2/2$ (Eq. 35, $H = \sigma_x^2 1$)")
    ax.plot([], [], ":", color="0.4", label=r"$\mathbf{v}_i^T H \mathbf{v}_i/2$ (Eq. 35)")
    ax.set_xscale("log")
    ax.set_ylim(iid * (1 - ylim_rel), iid * (1 + ylim_rel))
    ax.set_xlabel(r"perturbation amplitude $\theta$")
    ax.set_ylabel(r"$\delta L(\theta\mathbf{v}_i)\,/\,\theta^2$")
    ax.legend(frameon=False, loc="lower left", ncols=2)
    vals = ds["delta_L_over_theta2"].isel(theta=-1)
    spread = float(vals.std() / vals.mean())
    ax.set_title(_title(ds) + rf"; spread over all {n} modes: {100 * spread:.1f}%", fontsize=9)
    _eigen_inset(ax, ds, "eig_M_sgd", "eig_M_sgd_se", (0.62, 0.66, 0.35, 0.3))
    return fig


@styled
def fig5b(ds: xr.Dataset, theta: float | None = None, realisation: int | None = 0) -> plt.Figure:
    """Fig. 5b: delta L / theta^2 at fixed theta vs mode index i, correlated data.

    ``ds`` is an :func:`weightdyn.single_layer.perturbation.average_over_realisations` result:
    coordinates ``mode``, ``theta``, ``realisation``; variables ``delta_L_over_theta2_mean``
    and ``delta_L_over_theta2_mean_se`` (mode, theta), ``delta_L_over_theta2`` (realisation,
    mode, theta), ``eig_M_sgd_mean``, ``eig_M_sgd_mean_se`` (mode), the scalar
    ``delta_L_over_theta2_iid``; optional ``M_isotropic``, ``eig_M_theory_mean`` and
    ``delta_L_over_theta2_lyapunov_mean`` (+ ``_mean_se``; solid line with band). ``theta``
    defaults to the largest value (delta L / theta^2 does not depend on it, Eq. 35). Symbols
    with error bars: mean +- 1 s.e. over data sets; thin line: the single data set
    ``realisation`` (None: not drawn); dashed: the i.i.d. prediction sigma_x^2 / 2.
    """
    th = float(ds["theta"].values[-1]) if theta is None else float(theta)
    sel = ds.sel(theta=th)
    i = ds["mode"].values
    n_real = ds.sizes.get("realisation", 1)
    fig, ax = plt.subplots(figsize=(5.2, 3.8), layout="constrained")
    if realisation is not None and "realisation" in ds.dims:
        ax.plot(
            i,
            sel["delta_L_over_theta2"].isel(realisation=realisation),
            "-",
            color="0.65",
            lw=0.8,
            label="one data set",
        )
    ax.errorbar(
        i,
        sel["delta_L_over_theta2_mean"],
        yerr=sel["delta_L_over_theta2_mean_se"],
        fmt="o",
        ms=3,
        color="C3",
        capsize=1.5,
        elinewidth=0.8,
        label=f"SGD, mean $\\pm$1 s.e. over {n_real} data sets",
    )
    lyap = "delta_L_over_theta2_lyapunov_mean"
    if lyap in ds and np.isfinite(ds[lyap]).all():
        ax.fill_between(
            i,
            ds[lyap] - ds[f"{lyap}_se"],
            ds[lyap] + ds[f"{lyap}_se"],
            color="C0",
            alpha=0.25,
            lw=0,
        )
        ax.plot(
            i,
            ds[lyap],
            "-",
            color="C0",
            lw=1.2,
            label=r"Eq. 35 along eigenvectors of $M$ (Eq. 30), $\pm$1 s.e.",
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
    ymax = float(np.nanmax(sel["delta_L_over_theta2"])) if "realisation" in ds.dims else None
    if ymax is not None:
        ax.set_ylim(0.0, 1.45 * ymax)
    fig.legend(frameon=False, loc="outside lower center", ncols=2)
    title = _title(ds)
    if "input_cov" in ds.attrs:
        title += f", inputs: {ds.attrs['input_cov']}"
    ax.set_title(title, fontsize=9)
    _eigen_inset(ax, ds, "eig_M_sgd_mean", "eig_M_sgd_mean_se", (0.66, 0.68, 0.32, 0.28))
    return fig
