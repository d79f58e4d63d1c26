"""Deep linear and one-hidden-layer networks: SGD against the local theory (paper 000 App. A).

Every function takes a merged ``deep_linear`` or ``one_hidden`` sweep (cells along ``cell``, one
coordinate per axis; a bare cell file works too) and returns a Figure. Symbols are the SGD
estimates with +-1 jackknife s.e. over (replica, time block) groups; lines are theories at the
cell's local point: the exact linearisation (Eq. 29 with the full Hessian and the exact
mini-batch noise, Eq. 14 with App. C), App. A's ``X -> J`` form (Gauss-Newton drift, Eqs.
79-81), detailed balance (Eq. 33) and the discrete-time recursion of the local quadratic model;
and the exact linearisation and the recursion at the SGD mean.
Cells flagged by their checks are listed, not drawn.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.ticker import (
    FormatStrFormatter,
    LogFormatterSciNotation,
    LogLocator,
    MaxNLocator,
    NullFormatter,
)

from weightdyn.models.experiment import cell_text, cells_of, flagged_cells, sweep_axes
from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import errorbar, state_bars

__all__ = ["feng_tu", "ivfr", "spectra", "trace_vs_lr"]

SIM = {"ms": 3.0, "capsize": 1.5, "lw": 0, "elinewidth": 0.8}
THEORY_LINES = {
    "exact": ("-", "k", "exact linearisation at the minimum (Eq. 29)"),
    "jacobian": ("--", "C1", r"App. A: $X \to J$ (Gauss-Newton)"),
    "detailed": (":", "C2", "detailed balance (Eq. 33)"),
    "discrete": ("-.", "C3", "discrete-time recursion"),
    "minibatch": ((0, (1, 1)), "C4", "discrete, mini-batch Hessian noise"),
    "exact_mean": ("-", "C9", r"exact linearisation at the SGD mean $\bar\theta$"),
    "discrete_mean": ((0, (5, 1, 1, 1)), "C6", r"discrete-time recursion at $\bar\theta$"),
}
BARS = r"$\pm$1 s.e. (jackknife over (replica, time block) groups)"
#: the axes of a cell in the papers' symbols (cell_text's ``axis=value`` labels otherwise)
SYMBOLS = {
    "depth": "L",
    "width": r"\mathrm{width}",
    "P": "P",
    "noise": r"\sigma_\epsilon^2",
    "lr": r"\lambda",
    "batch_size": "S",
    "init_scale": r"\mathrm{init\ scale}",
    "N_i": "N_i",
    "N_o": "N_o",
}


def _coord(c: xr.Dataset, name: str) -> object:
    if name in c.coords:
        return c[name].values.item()
    return c.attrs.get(name, "?")


def _title(c: xr.Dataset) -> str:
    """The cell's architecture and SGD parameters in the paper's symbols."""
    if "dataset" in c.coords or "dataset" in c.attrs:
        return _data_title(c)
    arch = (
        f"depth $L={_coord(c, 'depth')}$" if "depth" in c.coords or "depth" in c.attrs
        else f"{_coord(c, 'activation')}, teacher {_coord(c, 'teacher')}"
    )  # fmt: skip
    return (
        f"{arch}, $N_i={_coord(c, 'N_i')}$, width {_coord(c, 'width')}, "
        f"$N_o={_coord(c, 'N_o')}$, $n={int(c['n_params'])}$, $P={_coord(c, 'P')}$, "
        rf"$\sigma_\epsilon^2={float(_coord(c, 'noise')):g}$, "
        rf"$\lambda={float(_coord(c, 'lr')):g}$, $S={_coord(c, 'batch_size')}$"
    )


def _data_title(c: xr.Dataset) -> str:
    """A cell of a network on a data set (:mod:`weightdyn.models.network_experiment`): the data
    set, the architecture, the loss and weight decay, and the SGD parameters."""
    arch = [
        f"hidden {_coord(c, name)}" if name == "hidden" else f"{name} {_coord(c, name)}"
        for name in ("hidden", "width", "activation")
        if name in c.coords or name in c.attrs
    ]
    chi = float(_coord(c, "weight_decay")) if "weight_decay" in c.coords else None
    loss = str(_coord(c, "loss")).replace("_", "-")
    return (
        f"{_coord(c, 'dataset')}, {', '.join(arch)}, $n={int(c['n_params'])}$, "
        f"$P={_coord(c, 'P')}$, {loss}"
        + (rf", $\chi={chi:g}$" if chi is not None else "")
        + rf", $\lambda={float(_coord(c, 'lr')):g}$, $S={_coord(c, 'batch_size')}$"
    )


def _message(text: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5.0, 2.2), layout="constrained")
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=8,
            wrap=True)  # fmt: skip
    ax.set_axis_off()
    return fig


def _no_cells(ds: xr.Dataset) -> plt.Figure | None:
    """A figure naming the flagged cells if no cell of ``ds`` passed its checks."""
    if cells_of(ds):
        return None
    if "cell" not in ds.dims or ds.sizes["cell"] == 1:  # name the one cell by its coordinates
        c = ds.isel(cell=0) if "cell" in ds.dims else ds
        where = ", ".join(f"{a}={c[a].values.item()}" for a in sweep_axes(ds) if a in c.coords)
        return _message(f"cell {where}\nflagged: {flagged_cells(ds)[0].split(': ')[-1]}")
    return _message("no cell passed its checks:\n" + "\n".join(flagged_cells(ds)))


def _flag_note(ds: xr.Dataset) -> str:
    """``"; not drawn (flagged): ..."`` naming the cells that failed a check, or ``""``."""
    flagged = flagged_cells(ds)
    return "; not drawn (flagged): " + ", ".join(flagged) if flagged else ""


def _label(c: xr.Dataset, cells: list[xr.Dataset]) -> str:
    """The axes in which ``c`` differs from the other ``cells``, in symbols where there are."""
    parts = []
    for part in cell_text(c, cells).split(", "):
        name, _, val = part.partition("=")
        parts.append(f"${SYMBOLS[name]}={val}$" if name in SYMBOLS else part)
    return ", ".join(p for p in parts if p)


def _log_labels(axis) -> None:
    """Label a log axis at 2 and 5 times each power of ten too if it spans two decades or less
    (an axis spanning about one decade otherwise shows a single number; a wider one has
    enough powers of ten, and the extra labels would collide)."""
    lo, hi = sorted(axis.get_view_interval())
    if lo <= 0 or hi / lo > 100.0:
        return
    if hi / lo < 4.0:  # less than a decade: a few plain numbers (2 and 5 would be all or none)
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 3.0, 5.0, 7.0)))
        axis.set_major_formatter(FormatStrFormatter("%.2g"))
        axis.set_minor_formatter(NullFormatter())
        return
    axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    axis.set_minor_formatter(
        LogFormatterSciNotation(labelOnlyBase=False, minor_thresholds=(np.inf, np.inf))
    )


def _median_error(c: xr.Dataset, theory: str) -> float:
    return float(np.median(np.abs(c[f"eig_{theory}"].values / c["eig_sgd"].values - 1)))


# -------------------------------------------------------------------------------- spectra


@styled
def spectra(ds: xr.Dataset) -> plt.Figure:
    """Sorted eigenvalues of the SGD covariance on range(H) against the four theories (left,
    log scale) and each theory's relative deviation from SGD with the SGD s.e. band (right,
    clipped to +-1). One cell (a per-cell figure). Eq. 33's covariance is not symmetric: the
    eigenvalues of its symmetric part are drawn (negative ones leave the log axis)."""
    if (fig := _no_cells(ds)) is not None:
        return fig
    c = cells_of(ds)[0]
    i = c["mode"].values + 1
    sgd, se = c["eig_sgd"].values, c["eig_sgd_se"].values
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.6, 3.6), layout="constrained")
    errorbar(left, i, sgd, yerr=se, fmt="o", color="C0", mfc="none", label="SGD", zorder=3,
             **SIM)  # fmt: skip
    right.fill_between(i, -se / sgd, se / sgd, color="C0", alpha=0.2, lw=0,
                       label=r"SGD $\pm$1 s.e.")  # fmt: skip
    for name, (style, color, label) in THEORY_LINES.items():
        eig = c[f"eig_{name}"].values
        med = _median_error(c, name)
        left.plot(i, eig, linestyle=style, color=color, lw=1.1, label=f"{label}: median {med:.1%}")
        right.plot(i, eig / sgd - 1, linestyle=style, color=color, lw=1.1)
    left.set_yscale("log")
    left.set_xlabel("mode index $i$ (descending)")
    left.set_ylabel(r"eigenvalue $\mu_i$ of $M$ on range$(H)$")
    fig.legend(*left.get_legend_handles_labels(), frameon=False, fontsize=6.5, ncols=3,
               loc="outside lower center", title="lines: theory at the local minimum or at the "
               r"SGD mean, with the median $|\mu_i^{\rm th}/\mu_i^{\rm SGD} - 1|$",
               title_fontsize=6.5)  # fmt: skip
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.axhline(0.0, color="0.6", lw=0.6)
    devs = [np.abs(c[f"eig_{t}"].values / sgd - 1) for t in THEORY_LINES] + [se / sgd]
    right.set_ylim(-(lim := min(1.0, 1.1 * float(np.nanmax(np.concatenate(devs))))), lim)
    right.set_xlabel("mode index $i$ (descending)")
    right.set_ylabel(r"$\mu_i^{\rm theory} / \mu_i^{\rm SGD} - 1$")
    right.set_title(r"band: SGD $\pm$1 s.e.; axis clipped at $\pm 1$", fontsize=7)
    extra = (
        f"$\\mathrm{{tr}}\\,M$: SGD {float(c['trace_sgd']):.4g} $\\pm$ "
        f"{float(c['trace_sgd_se']):.2g}, exact {float(c['trace_exact']):.4g}, discrete "
        f"{float(c['trace_discrete']):.4g}\nresidual curvature "
        f"$\\|H - J^TJ/P\\| / \\|H\\|$ = {float(c['residual_curvature']):.2g}; "
        f"$\\dim\\,\\mathrm{{null}}(H)$ = {int(c['null_dim'])}; slowest relaxation "
        f"{float(c['tau_slow']):.3g} steps\nSGD mean off the local minimum on range$(H)$: "
        rf"$|\bar\theta - \theta_{{\rm loc}}| / |\theta_{{\rm loc}}|$ = "
        f"{float(c['shift_mean']):.2g} (first order "
        rf"$-H^+\nabla\mathrm{{tr}}(HM)/2$: {float(c['shift_predicted']):.2g}, cosine "
        f"{float(c['shift_cosine']):.2f})"
    )
    title = fig.suptitle("", fontsize=7.5)
    state_bars(fig, title, "SGD " + BARS, f"{_title(c)}\n{extra}\n{{bars}}")
    return fig


# ----------------------------------------------------------------------------------- IVFR


@styled
def ivfr(ds: xr.Dataset) -> plt.Figure:
    """IVFR (Fig. 7a): curvature ``v_i^T H v_i`` along the eigenvectors ``v_i`` of the SGD
    covariance against their variance ``mu_i``, log-log, one colour per cell; lines: the same
    from the exact linearisation's covariance. Left: all of range(H); right (models with
    layers): the output layer's block, the paper's projected ``cov(vec dW2)`` (Eq. 73:
    ``kappa_i`` proportional to ``mu_i`` at depth 2). Legends: Spearman rho and log-log slope,
    +-1 s.e."""
    if (fig := _no_cells(ds)) is not None:
        return fig
    cells = cells_of(ds)
    panels = [("", r"on range$(H)$: $\mu_i$ of $M$")]
    if all("layer_eig_sgd" in c for c in cells):
        panels.append(("layer_", r"output layer $W_L$ (Fig. 7a's cov(vec $\delta W_2$))"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.0 * len(panels) + 1.0, 4.4),
                             layout="constrained", squeeze=False)  # fmt: skip
    for ax, (prefix, what) in zip(axes[0], panels, strict=True):
        _ivfr_panel(ax, cells, prefix)
        ax.set_title(what, fontsize=7.5)
    title = fig.suptitle("", fontsize=7.5)
    bars = "SGD " + BARS + r" in $\mu_i$ and $v_i^THv_i$"
    state_bars(fig, title, bars, f"IVFR (paper 000 Fig. 7a)\n{{bars}}{_flag_note(ds)}")
    return fig


def _ivfr_panel(ax, cells: list[xr.Dataset], prefix: str) -> None:
    """One IVFR panel from the ``{prefix}eig_*`` / ``{prefix}curv_*`` variables."""
    for k, c in enumerate(cells):
        color = f"C{k % 10}"
        text = _label(c, cells) or "SGD"
        se = float(c[f"{prefix}ivfr_spearman_sgd_se"])
        rho_se = f"$\\pm$ {se:.2g}" if se > 1e-9 else "(same ranks in every jackknife sample)"
        label = (
            f"{text}: $\\rho$ = {float(c[f'{prefix}ivfr_spearman_sgd']):.2f} {rho_se}, slope "
            f"{float(c[f'{prefix}ivfr_slope_sgd']):.2f} $\\pm$ "
            f"{float(c[f'{prefix}ivfr_slope_sgd_se']):.2g}"
        )
        errorbar(ax, c[f"{prefix}eig_sgd"].values, c[f"{prefix}curv_sgd"].values,
                 xerr=c[f"{prefix}eig_sgd_se"].values, yerr=c[f"{prefix}curv_sgd_se"].values,
                 fmt="o", color=color, mfc="none", label=label, **SIM)  # fmt: skip
        ax.plot(c[f"{prefix}eig_exact"].values, c[f"{prefix}curv_exact"].values, "x-",
                color=color, lw=0.5, ms=3)  # fmt: skip
    ax.plot([], [], "x-", color="0.3", lw=0.5, ms=3,
            label="exact linearisation (Eq. 29), same cell, modes joined in order")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.autoscale_view()
    for axis in (ax.xaxis, ax.yaxis):
        _log_labels(axis)
    ax.set_xlabel(r"variance $\mu_i$ (eigenvalue of the SGD covariance)")
    ax.set_ylabel(r"curvature $v_i^T H v_i$")
    ax.legend(frameon=False, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14))


# ------------------------------------------------------------------------- Feng & Tu


@styled
def feng_tu(ds: xr.Dataset) -> plt.Figure:
    """The IVFR as Feng & Tu measured it (left: variance ``sigma_i^2`` along the principal
    directions against the full width ``F_i`` of the loss profile at ``e L_0``, log-log, with
    the fitted ``sigma^2 ~ F^-psi``) beside paper 000's form (right: curvature ``kappa_i``
    against ``sigma_i^2``, Eq. 73, Fig. 7a); circles SGD (+-1 s.e. in sigma^2), crosses the
    exact linearisation at the SGD mean with the true profiles, one colour per cell; the
    legends below the panels give each cell's psi and slope."""
    if (fig := _no_cells(ds)) is not None:
        return fig
    cells = [c for c in cells_of(ds) if "ft_psi_sgd" in c]
    if not cells:
        return _message("no cell measured Feng & Tu's IVFR:\nset flatness_block (all, output "
                        "or hidden) in the sweep")  # fmt: skip
    rows = len(cells) + 1
    fig, axes = plt.subplots(2, 2, figsize=(11.0, 4.2 + 0.17 * rows), layout="constrained",
                             height_ratios=(4.0, 0.17 * rows + 0.2))  # fmt: skip
    (left, right), (leg_left, leg_right) = axes
    for k, c in enumerate(cells):
        _feng_tu_cell(left, right, c, f"C{k % 10}", _label(c, cells))
    for ax, leg in ((left, leg_left), (right, leg_right)):
        ax.plot([], [], "x", color="0.3", ms=3.5, label=r"exact linearisation at $\bar\theta$ "
                "(Eq. 29), true profiles")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.autoscale_view()
        for axis in (ax.xaxis, ax.yaxis):
            _log_labels(axis)
        leg.set_axis_off()
        leg.legend(*ax.get_legend_handles_labels(), frameon=False, fontsize=6.5,
                   loc="upper center")  # fmt: skip
    left.set_xlabel(r"flatness $F_i$ (full width of $L(\bar\theta + s\,p_i)$ at $e L_0$)")
    left.set_ylabel(r"variance $\sigma_i^2$ along $p_i$")
    right.set_xlabel(r"variance $\sigma_i^2$")
    right.set_ylabel(r"curvature $\kappa_i = p_i^T H p_i$")
    block = cells[0]["ft_psi_sgd"].attrs.get("block", "?")
    left.set_title(rf"Feng & Tu: $\sigma_i^2 \propto F_i^{{-\psi}}$ (block: {block})",
                   fontsize=7.5)  # fmt: skip
    right.set_title(r"paper 000 Eq. 73, Fig. 7a: $\kappa_i$ against $\sigma_i^2$", fontsize=7.5)
    title = fig.suptitle("", fontsize=7.5)
    bars = r"SGD $\pm$1 s.e. of $\sigma_i^2$ (jackknife over (replica, time block) groups)"
    head = _title(cells[0]) if len(cells) == 1 else "IVFR as Feng & Tu measured it, per cell"
    state_bars(fig, title, bars, f"{head}\n{{bars}}{_flag_note(ds)}")
    return fig


def _feng_tu_cell(left, right, c: xr.Dataset, color: str, text: str) -> None:
    """One cell's SGD and theory points, its fit and one legend entry per panel."""
    var, se = c["ft_var_sgd"].values, c["ft_var_sgd_se"].values
    width, curv = c["ft_width_sgd"].values, c["ft_curv_sgd"].values
    psi, psi_se = float(c["ft_psi_sgd"]), float(c["ft_psi_sgd_se"])
    lead = f"{text}: " if text else ""
    errorbar(left, width, var, yerr=se, fmt="o", color=color, mfc="none", **SIM,
             label=rf"{lead}$\psi$ SGD {psi:.2f} $\pm$ {psi_se:.2g} "
             f"({int(c['ft_modes_used'])} of {int(c['ft_modes_total'])} modes), theory "
             f"{float(c['ft_psi_theory']):.2f} (quadratic profiles "
             f"{float(c['ft_psi_quadratic']):.2f})")  # fmt: skip
    left.plot(c["ft_width_theory"].values, c["ft_var_theory"].values, "x", color=color, ms=3.5)
    ok = np.isfinite(width) & (var > 0)
    if ok.sum() >= 2:
        F = np.geomspace(width[ok].min(), width[ok].max(), 20)
        a = np.mean(np.log(var[ok]) + psi * np.log(width[ok]))
        left.plot(F, np.exp(a - psi * np.log(F)), "-", color=color, lw=0.7)
    slope, slope_se = float(c["ft_slope_sgd"]), float(c["ft_slope_sgd_se"])
    errorbar(right, var, curv, xerr=se, fmt="o", color=color, mfc="none", **SIM,
             label=rf"{lead}slope SGD {slope:.2f} $\pm$ {slope_se:.2g}, theory "
             f"{float(c['ft_slope_theory']):.2f}")  # fmt: skip
    right.plot(c["ft_var_theory"].values, c["ft_curv_theory"].values, "x", color=color, ms=3.5)


# -------------------------------------------------------------------------------- trace


def _symbols(key: str) -> str:
    """``axis=value, ...`` (a :func:`_series` key) in the papers' symbols where there are."""
    parts = [p.partition("=") for p in key.split(", ") if p]
    return ", ".join(f"${SYMBOLS[n]}={v}$" if n in SYMBOLS else f"{n}={v}" for n, _, v in parts)


def _series(cells: list[xr.Dataset]) -> dict[str, list[xr.Dataset]]:
    """Cells grouped by every axis but ``lr``, each group sorted by ``lr``."""
    groups: dict[str, list[xr.Dataset]] = {}
    for c in cells:
        key = ", ".join(p for p in cell_text(c, cells).split(", ") if not p.startswith("lr="))
        groups.setdefault(key, []).append(c)
    return {k: sorted(v, key=lambda c: float(_coord(c, "lr"))) for k, v in groups.items()}


@styled
def trace_vs_lr(ds: xr.Dataset) -> plt.Figure:
    """``tr M / lr`` against ``lr``: SGD (+-1 s.e.), the exact linearisation (Eq. 29,
    continuous time: ``tr M`` proportional to ``lr``, a flat line), the discrete-time
    recursion and App. A's form; one colour per group of cells differing only in ``lr``."""
    if (fig := _no_cells(ds)) is not None:
        return fig
    fig, ax = plt.subplots(figsize=(5.6, 4.2), layout="constrained")
    series = _series(cells_of(ds))
    for k, (key, group) in enumerate(series.items()):
        color = f"C{k % 10}"
        lr = np.array([float(_coord(c, "lr")) for c in group])

        def col(name: str, group=group, lr=lr) -> np.ndarray:
            return np.array([float(c[name]) for c in group]) / lr

        errorbar(ax, lr, col("trace_sgd"), yerr=col("trace_sgd_se"), fmt="o",
                 color="k" if len(series) == 1 else color, mfc="none", zorder=3,
                 label=f"SGD {_symbols(key)}".strip(), **SIM)  # fmt: skip
        for name in ("exact", "discrete", "minibatch", "jacobian", "exact_mean"):
            style, theory_color, label = THEORY_LINES[name]  # one group: the theory's colour
            ax.plot(lr, col(f"trace_{name}"), linestyle=style, lw=1.1,
                    color=theory_color if len(series) == 1 else color,
                    label=label if k == 0 else None)  # fmt: skip
    ax.set_xscale("log")
    rates = sorted({float(_coord(c, "lr")) for c in cells_of(ds)})
    ax.set_xticks(rates, [f"{r:g}" for r in rates])  # the simulated learning rates
    ax.minorticks_off()
    ax.set_xlabel(r"learning rate $\lambda$")
    ax.set_ylabel(r"$\mathrm{tr}\,M / \lambda$")
    ax.legend(frameon=False, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              ncols=2)  # fmt: skip
    title = ax.set_title("", fontsize=7.5)
    state_bars(fig, title, "SGD " + BARS, f"trace of the stationary covariance $M$\n{{bars}}"
               f"{_flag_note(ds)}", newline=True)  # fmt: skip
    return fig
