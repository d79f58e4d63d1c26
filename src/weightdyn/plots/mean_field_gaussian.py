"""Figures of experiment E4, the Gaussian ansatz of paper 002 (Eqs. 27-30).

Every function takes the summary dataset of :func:`weightdyn.mean_field.gaussian.summarize`.
Theory (Eqs. 28-29) is drawn as lines, the particle cloud (Gauss-Hermite nodes, no sampling
noise) as markers.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.colors import LogNorm

from weightdyn.plots.common import styled

SYMBOLS = {"c": "c", "a": "a", "h": "h"}
MARK = {"ms": 3.5, "lw": 0, "mfc": "none", "mew": 0.9}
FLOOR = 1e-17


def _fit_label(ds: xr.Dataset, short: str) -> str:
    slope, se = float(ds[f"slope_{short}"]), float(ds[f"slope_{short}_se"])
    return rf"fit $\propto s^{{{slope:.3f} \pm {se:.3f}}}$"


def _fit_curve(ds: xr.Dataset, short: str, s: np.ndarray) -> np.ndarray:
    return np.exp(float(ds[f"intercept_{short}"])) * s ** float(ds[f"slope_{short}"])


@styled
def error_vs_s(ds: xr.Dataset) -> plt.Figure:
    """Max-over-time errors of the centre and covariance vs s with the fitted power laws."""
    s = ds["s"].values
    fine = np.geomspace(s.min() / 1.5, s.max() * 1.5, 50)
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.0), layout="constrained")
    series = [
        (axes[0], "err_b", "b", "o", "C0", r"$\max_t|\bar{\mathbf{w}}(t)-\mathbf{b}(t)|$"),
        (axes[0], "err_A_rel", "A_rel", "s", "C3",
         r"$\max_t\|\Sigma(t)-A(t)\|_F/\|A(t)\|_F$"),
        (axes[1], "err_A_abs", "A_abs", "D", "C2", r"$\max_t\|\Sigma(t)-A(t)\|_F$"),
    ]  # fmt: skip
    for ax, var, short, marker, color, label in series:
        ax.plot(s, ds[f"max_{var}"], marker, color=color, label=label, **MARK)
        ax.plot(fine, _fit_curve(ds, short, fine), "-", color=color, lw=1.0,
                label=_fit_label(ds, short))  # fmt: skip
    for ax, title in zip(
        axes, ["(a) centre and relative covariance", "(b) absolute covariance"], strict=True
    ):
        ax.set(xscale="log", yscale="log", xlabel=r"initial cloud width $s$  ($A(0)=s^2C$)")
        ax.set_title(title, fontsize=9)
        ax.legend(loc="upper left", frameon=False)
    axes[0].set_ylabel("error of the particle cloud\nagainst Eqs. 28-29")
    axes[1].set_ylabel(r"$\max_t\|\Sigma(t)-A(t)\|_F$")
    fig.suptitle(
        r"Gaussian ansatz: errors $O(s^2)$ in $\mathbf{b}$ and relative $A$, $O(s^4)$ in absolute"
        r" $A$ (deterministic quadrature, no sampling error)",
        fontsize=8.5,
    )
    return fig


@styled
def trajectories(ds: xr.Dataset) -> plt.Figure:
    """Centre and covariance of the widest cloud vs Eqs. 28-29; the centre error / s^2."""
    s_show = float(ds["s"].max())
    one = ds.sel(s=s_show)
    t = one["t"].values
    fig, axes = plt.subplots(1, 3, figsize=(10.0, 3.6), layout="constrained")
    for i, k in enumerate(ds["k"].values):
        color = f"C{i}"
        axes[0].plot(t, one["b_ode"].sel(k=k), "-", color=color, lw=1.2,
                     label=rf"$b_{{{SYMBOLS[k]}}}$ Eq. 28")  # fmt: skip
        axes[0].plot(t, one["b_particles"].sel(k=k), "o", color=color,
                     label=rf"$\bar w_{{{SYMBOLS[k]}}}$ particles", **MARK)  # fmt: skip
    axes[0].set(xlabel="$t$", ylabel=r"centre: $b_k(t)$, $\bar w_k(t)$")
    ks = ds["k"].values
    pairs = [(i, j) for i in range(len(ks)) for j in range(i, len(ks))]
    for n, (i, j) in enumerate(pairs):
        color = f"C{n}"
        name = f"{SYMBOLS[ks[i]]}{SYMBOLS[ks[j]]}"
        axes[1].plot(t, one["A_ode"].isel(k=i, l=j) / s_show**2, "-", color=color, lw=1.2,
                     label=rf"$A_{{{name}}}$")  # fmt: skip
        axes[1].plot(t, one["A_particles"].isel(k=i, l=j) / s_show**2, "o", color=color, **MARK)
    axes[1].set(xlabel="$t$", ylabel=r"covariance: $A_{kl}(t)/s^2$, $\Sigma_{kl}(t)/s^2$")
    axes[1].plot([], [], "k-", lw=1.2, label="Eq. 29")
    axes[1].plot([], [], "ko", label="particles", **MARK)
    for n, s in enumerate(ds["s"].values):
        err = ds["err_b"].sel(s=s).values / s**2
        axes[2].plot(t[1:], err[1:], "-o", color=plt.cm.viridis(n / max(1, ds.sizes["s"] - 1)),
                     lw=0.8, ms=2.5, label=f"$s={s:g}$")  # fmt: skip
    axes[2].set(xlabel="$t$", ylabel=r"$|\bar{\mathbf{w}}(t)-\mathbf{b}(t)|\,/\,s^2$")
    axes[2].set_ylim(bottom=0)
    titles = [
        f"(a) centre, $s={s_show:g}$",
        f"(b) covariance, $s={s_show:g}$",
        r"(c) centre error collapses as $s^2$",
    ]
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title, fontsize=9)
    below = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2), "frameon": False}
    axes[0].legend(ncol=3, fontsize=6.5, **below)
    axes[1].legend(ncol=4, fontsize=6.5, **below)
    axes[2].legend(ncol=2, fontsize=6.5, **below)
    fig.suptitle(
        "no error bars: the particle cloud is a deterministic Gauss-Hermite quadrature "
        "(no sampling error)",
        fontsize=8.5,
    )
    return fig


def _heatmap(ax, H: np.ndarray, labels: list[str], title: str, norm) -> plt.cm.ScalarMappable:
    shown = np.maximum(np.abs(H), FLOOR)
    image = ax.imshow(shown, norm=norm, cmap="magma_r")
    for i in range(H.shape[0]):
        for j in range(H.shape[1]):
            dark = np.log10(shown[i, j]) > np.log10(norm.vmin) + 0.6 * np.log10(
                norm.vmax / norm.vmin
            )
            text = "0" if H[i, j] == 0 else f"{H[i, j]:.1e}"
            ax.text(j, i, text, ha="center", va="center", fontsize=6.5,
                    color="white" if dark else "black")  # fmt: skip
    ticks = [f"${x}$" for x in labels]
    ax.set(xticks=range(len(labels)), yticks=range(len(labels)), xticklabels=ticks,
           yticklabels=ticks, title=title, xlabel="column $j$", ylabel="row $i$")  # fmt: skip
    ax.title.set_fontsize(8.5)
    ax.spines[:].set_visible(True)
    return image


def _growth(ax, ds: xr.Dataset, point: str, title: str) -> None:
    one = ds.sel(point=point)
    t = one["t_growth"].values
    fine = np.linspace(0, t.max(), 200)
    handles, labels = [], []
    for i, k in enumerate(ds["k"].values):
        lam = round(float(one["lambda_H"].sel(k=k)), 6) + 0.0  # no "-0.0000" labels
        rate, se = float(one["rate_fit"].sel(k=k)), float(one["rate_fit_se"].sel(k=k))
        color = f"C{i}"
        (line,) = ax.plot(fine, np.exp(2 * lam * fine), "-", color=color, lw=1.1)
        (marks,) = ax.plot(t, one["var_growth"].sel(k=k), "o", color=color, **MARK)
        handles.append((line, marks))
        labels.append(rf"$k={i + 1}$: $2\lambda_k={2 * lam:.6f}$, fit ${rate:.6f}\pm{se:.1e}$")
    ax.plot([], [], "k-", lw=1.1, label=r"Eq. 29: $e^{2\lambda_k t}$")
    ax.plot([], [], "ko", label="particles", **MARK)
    first = ax.legend(frameon=False, fontsize=6.5, loc="upper left")
    ax.add_artist(first)
    ax.legend(handles, labels, frameon=False, fontsize=6.5, loc="upper center",
              bbox_to_anchor=(0.5, -0.2))  # fmt: skip
    ax.set(
        yscale="log", xlabel="$t$", ylabel=r"$\mathbf{e}_k^{\top}\Sigma(t)\,\mathbf{e}_k\,/\,s^2$"
    )
    ax.set_title(title, fontsize=8.5)


@styled
def stationary(ds: xr.Dataset) -> plt.Figure:
    """|H| at the two stationary states (Eq. 30) and the cloud variance growth."""
    fig, axes = plt.subplots(2, 2, figsize=(7.6, 7.6), layout="constrained")
    labels = ["c", "a", "h"]
    norm = LogNorm(vmin=FLOOR, vmax=max(1.0, float(np.abs(ds["H"]).max())))
    for ax, point, name in zip(axes[0], ds["point"].values, ["b_0\\neq0", "b_0=0"], strict=True):
        b = ds["b_star"].sel(point=point).values
        image = _heatmap(
            ax, ds["H"].sel(point=point).values, labels,
            rf"(a) $|H|$ at ${name}$: $\mathbf{{b}}^*=({b[0]:.3f},{b[1]:.3f},{b[2]:.3f})$"
            if point == "b0_nonzero"
            else rf"(b) $|H|$ at ${name}$: $\mathbf{{b}}^*=(0,{b[1]:.3f},{b[2] + 0.0:.3f})$",
            norm,
        )  # fmt: skip
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.85, label=r"$|H_{ij}|$ (floor $10^{-17}$)")
    _growth(axes[1, 0], ds, "b0_nonzero", r"(c) cloud at $\mathbf{b}^*$, $b_0\neq0$")
    _growth(axes[1, 1], ds, "b0_zero", r"(d) cloud at $\mathbf{b}^*$, $b_0=0$")
    s = float(ds["s_stationary"])
    fig.suptitle(
        rf"Point-like stationary states: Eq. 30 block form holds for $b_0\neq0$, fails for $b_0=0$"
        "\n"
        rf"(c, d) variance along $H$'s eigenvectors, $A(0)=s^2I$, $s={s:g}$; no error bars: "
        "deterministic quadrature",
        fontsize=8.5,
    )
    return fig
