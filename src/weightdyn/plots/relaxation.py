"""Paper 000 Fig. 3: relaxation of the Hessian modes z_k(t) and of the loss under SGD (Eq. 27)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn.plots.common import styled

__all__ = ["fig3"]


@styled
def fig3(ds: xr.Dataset, modes: Sequence[int] = (0, 10, 20), replica: int = 0) -> plt.Figure:
    """Fig. 3: modes z_k(t) of one SGD run (solid) vs the noise-averaged Eq. 27 (dashed).

    ``ds`` is a :func:`weightdyn.single_layer.relaxation.relaxation_dataset`; used are the
    coordinates ``time`` (SDE time t = lr n, first entry may be 0), ``mode``, ``replica``, the
    variables ``z_sgd`` (replica, time, mode), ``z_sgd_mean`` and ``z_sgd_std`` (time, mode),
    ``z_theory_exp`` (time, mode), ``z_star`` and ``omega`` (mode), ``loss_sgd`` (replica,
    time), ``loss_theory`` (time) and the scalar ``optimal_loss``; optional scalars
    ``omega_min_over_mp_edge`` and the attrs ``N``, ``P``, ``lr``, ``batch_size`` go into the
    title. The band is the replica mean +- 1 standard deviation (the SGD noise spread). The loss
    (dash-dotted, right axis) relaxes to L* (grey line, Eq. 26); the right panel (the paper's
    inset) shows the loss and |z_0| in double-logarithmic axes, SGD solid and theory dashed.
    """
    modes = [int(k) for k in modes if int(k) < ds.sizes["mode"]]
    t = ds["time"].values
    fig, (ax, inset) = plt.subplots(
        1, 2, figsize=(9.0, 4.6), layout="constrained", gridspec_kw={"width_ratios": [2.2, 1]}
    )
    colors = [f"C{i}" for i in range(len(modes))]
    for k, color in zip(modes, colors, strict=True):
        z = ds["z_sgd"].isel(replica=replica).sel(mode=k).values
        mean = ds["z_sgd_mean"].sel(mode=k).values
        std = ds["z_sgd_std"].sel(mode=k).values
        ax.fill_between(t, mean - std, mean + std, color=color, alpha=0.15, lw=0)
        ax.plot(t, z, "-", color=color, lw=1.2, label=f"$z_{{{k}}}(t)$ SGD")
        ax.plot(t, ds["z_theory_exp"].sel(mode=k), "--", color="k", lw=0.9)
        ax.axhline(float(ds["z_star"].sel(mode=k)), color=color, ls=":", lw=0.7)
    ax.set_xscale("log")
    ax.set_xlabel(r"SDE time $t = \lambda\tau$ ($\tau$: SGD step)")
    ax.set_ylabel(r"weight mode $z_k(t) = (V^T\mathbf{w})_k$")
    ax.set_xlim(t[t > 0][0], t[-1])

    right = ax.twinx()
    right.spines["right"].set_visible(True)
    loss = ds["loss_sgd"].isel(replica=replica).values
    L_star = float(ds["optimal_loss"])
    right.plot(t, loss, "-.", color="C7", lw=1.2)
    right.axhline(L_star, color="0.6", lw=2.0, alpha=0.7, zorder=0)
    right.set_yscale("log")
    right.set_ylabel(r"loss $L(\mathbf{z})$ (dash-dotted), $L^*$ (grey)")

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
        f"SGD mean $\\pm$1 s.d. ({ds.sizes['replica']} runs)",
        "loss, SGD (right axis)",
        r"$L^*$, Eq. 26",
    ]
    fig.legend(handles, labels, loc="outside lower center", ncols=4, frameon=False)

    pos = t > 0
    z0 = ds["z_sgd"].isel(replica=replica).sel(mode=modes[0]).values
    zs0 = float(ds["z_star"].sel(mode=modes[0]))
    inset.loglog(t[pos], loss[pos], "-", color="C7", lw=1.0, label=r"$L$")
    inset.loglog(t[pos], ds["loss_theory"].values[pos], "--", color="k", lw=0.8)
    inset.loglog(t[pos], np.abs(z0[pos]), "-", color=colors[0], lw=1.0, label=rf"$|z_{modes[0]}|$")
    inset.loglog(
        t[pos], np.abs(ds["z_theory_exp"].sel(mode=modes[0]).values[pos]), "--", color="k", lw=0.8
    )
    inset.axhline(L_star, color="0.6", lw=1.5, alpha=0.7, zorder=0)
    inset.axhline(abs(zs0), color=colors[0], ls=":", lw=0.7)
    omega0 = float(ds["omega"].sel(mode=modes[0]))
    inset.axvline(1.0 / omega0, color="0.3", lw=0.6, ls=(0, (1, 2)))
    inset.text(
        1.0 / omega0,
        0.62,
        r"$1/\omega_0$ ",
        transform=inset.get_xaxis_transform(),
        fontsize=7,
        va="center",
        ha="right",
    )
    inset.set_xlabel(r"$t$")
    inset.set_title("log-log view (inset of the paper)", fontsize=9)
    inset.plot([], [], "--", color="k", lw=0.8, label="theory")
    inset.legend(frameon=False, loc="center left")

    parts = []
    for key, sym in (("N", "N"), ("P", "P"), ("lr", r"\lambda"), ("batch_size", "S")):
        if key in ds.attrs:
            parts.append(f"${sym} = {ds.attrs[key]:g}$")
    if "omega_min_over_mp_edge" in ds:
        parts.append(rf"$\omega_0$ / MP edge $= {float(ds['omega_min_over_mp_edge']):.3g}$")
    ax.set_title(", ".join(parts), fontsize=9)
    return fig
