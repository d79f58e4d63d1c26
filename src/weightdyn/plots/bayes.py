"""SGD as a Bayesian sampler (paper 000, App. B): SGD vs the exact discrete and the
continuous-time (Eq. 29) stationary law of its variants, against the target law.

Every figure takes a merged sweep of the ``bayes_sampler`` experiment
(:mod:`weightdyn.single_layer.bayes_experiment`): cells along ``cell`` with one coordinate per
axis. A *variant* is the triple (preconditioner ``Lambda``, weight decay ``chi``, temperature
``T``), a *rule* the pair (preconditioner, ``lr_rule``). Data seeds are averaged; the figures
compute nothing beyond averaging and selecting. SGD values (``*_sgd``, ``*_sgd_se``) are
optional: a theory-only sweep (``dynamics: none``) draws the theory alone.

Conventions: theory of the exact discrete recursion solid, continuous time (Eq. 29) dashed,
SGD open markers with error bars, the target black; cells beyond the variant's stability limit
(``unstable == 1``, no stationary law) are crosses at the top of a panel.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from weightdyn.plots.common import (
    plain_log_ticks,
    require_one_value,
    require_variables,
    styled,
)
from weightdyn.plots.errorbars import ErrorBars, se_text
from weightdyn.plots.scalar import value_text

__all__ = ["injected_noise", "kl_vs_batch", "kl_vs_lr", "protocol", "spectra"]

#: the sweep axes of bayes_sampler (p_over_n is derived from N and P)
AXES = (
    "N", "P", "sigma_eps2", "lr", "batch_size", "sampling", "data_seed", "noise_model",
    "weight_decay", "preconditioner", "temperature", "target", "lr_rule", "dynamics",
)  # fmt: skip
VARIANT = ("preconditioner", "weight_decay", "temperature")
RULE = ("preconditioner", "lr_rule")
SEEDS = ("data_seed",)
SIM = {"ms": 4.0, "capsize": 2, "lw": 0, "elinewidth": 1, "mfc": "white", "mew": 1.0}
#: marker of a cell whose lr comes from a tuning rule rather than the lr axis
RULE_MARKERS = {"mandt": "D", "exact": "*", "wang": "P"}
MARKERS = ("o", "s", "^", "v", "D", "<", ">")
LINESTYLES = ("-", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 1)))

PRECONDITIONER_TEXT = {
    "none": r"$\Lambda = 1$",
    "hessian_inverse": r"$\Lambda = K^{-1}$",
    "diagonal": r"$\Lambda = \mathrm{diag}(K)^{-1}$",
    "mandt": r"$\Lambda = C^{-1}$",
    "mandt_diagonal": r"$\Lambda = \mathrm{diag}(C)^{-1}$",
    "wang": r"$\Lambda$ of Wang et al.",
    "exact_diagonal": r"exact-optimal diagonal $\lambda\Lambda$",
    "file": r"$\Lambda$ from file",
    "function": r"$\Lambda$ from function",
}
RULE_TEXT = {
    "fixed": r"fixed $\lambda$",
    "fraction": r"$\lambda$ = fraction of limit",
    "mandt": r"$\lambda$: continuous-time optimum",
    "exact": r"$\lambda$: exact-KL optimum",
    "wang": r"$\lambda = 1$",
}
#: the rules of the Wang et al. protocol figure, in drawing order
PROTOCOL_RULES = {
    ("hessian_inverse", "mandt"): r"continuous-time: $\lambda = 2B/n$, $\Lambda = J^{-1}$",
    ("wang", "wang"): r"Wang et al. (discrete): $\lambda = 1$, $\Lambda_{\mathrm{W}}$",
    ("hessian_inverse", "exact"): r"exact: $\lambda^*$, $\Lambda = J^{-1}$",
    ("exact_diagonal", "exact"): r"exact: diagonal $(\lambda\Lambda)^*$",
}
UNSTABLE = "beyond the stability limit (any data set)"
KL_LABEL = r"KL$(\mathcal{N}(0, M)\,\|\,\mathcal{N}(0, \Sigma))$"
FROB_LABEL = r"$\|M - \Sigma\|_F\,/\,\|\Sigma\|_F$"
THEORY_STYLES = [
    Line2D([], [], color="0.3", ls="-", lw=1.2, label="exact discrete theory"),
    Line2D([], [], color="0.3", ls="--", lw=1.2, label="continuous time (Eq. 29)"),
]


# --------------------------------------------------------------------------------- helpers


def _axis_text(axis: str, value: object) -> str:
    """``axis = value`` with the paper's symbols."""
    v = value_text(value)
    texts = {
        "N": f"$N = {v}$",
        "P": f"$P = {v}$",
        "sigma_eps2": f"$\\sigma_\\epsilon^2 = {v}$",
        "lr": f"$\\lambda = {v}$",
        "batch_size": f"$S = {v}$",
        "sampling": f"sampling {v} replacement",
        "noise_model": f"{v} noise",
        "weight_decay": f"$\\chi = {v}$",
        "temperature": f"$T = {v}\\,\\sigma^2/P$" if value else "$T = 0$",
        "target": f"target: {v}",
        "lr_rule": RULE_TEXT.get(str(value), f"lr rule {v}"),
        "preconditioner": PRECONDITIONER_TEXT.get(str(value), f"preconditioner {v}"),
        "dynamics": "theory only" if v == "none" else f"dynamics {v}",
    }
    return texts.get(axis, f"{axis} = {v}")


def _values(ds: xr.Dataset, axis: str) -> np.ndarray:
    return np.unique(ds[axis].values) if axis in ds.coords else np.array([])


def _fixed_text(ds: xr.Dataset, drawn: Sequence[str], width: int = 95) -> str:
    """The settings the cells share (axes outside ``drawn`` with one value), wrapped."""
    skip = {*drawn, *SEEDS, "dynamics"}
    if not set(_values(ds, "lr_rule")) & {"fixed", "fraction"}:
        skip.add("lr")  # every cell's lr comes from its rule: the lr axis is unused
    parts = [
        _axis_text(a, _values(ds, a)[0]) for a in AXES if a not in skip and _values(ds, a).size == 1
    ]
    rule, lr = _values(ds, "lr_rule"), _values(ds, "lr")
    if not {"lr", "lr_rule"} & skip and rule.size == lr.size == 1 and rule[0] == "fraction":
        # lr is a fraction of the stability limit: one entry, not two
        parts.remove(_axis_text("lr_rule", "fraction"))
        at = parts.index(_axis_text("lr", lr[0]))
        parts[at] = f"$\\lambda = {value_text(lr[0])}\\,\\lambda_{{\\max}}$"
    seeds = _values(ds, "data_seed").size
    if seeds:
        parts.append(f"{seeds} data set{'s' if seeds > 1 else ''}")
    lines, line = [], ""
    for part in parts:
        if line and len(line) + len(part) + 2 > width:
            lines.append(line + ",")
            line = part
        else:
            line = f"{line}, {part}" if line else part
    return "\n".join([*lines, line])


def _label(key: Sequence[object], names: Sequence[str], varying: Sequence[str]) -> str:
    """Legend label of a family: its values of the axes that vary among the families (all of
    them if none varies)."""
    shown = [n for n in names if n in varying] or list(names)
    if "lr_rule" in shown and "preconditioner" in names:
        if key[names.index("preconditioner")] == "exact_diagonal":  # it names its lr too
            shown.remove("lr_rule")
    text = {n: _axis_text(n, key[names.index(n)]) for n in shown}
    if "lr" in text and "lr_rule" in names and key[names.index("lr_rule")] == "fraction":
        text["lr"] = f"$\\lambda = {value_text(key[names.index('lr')])}\\,\\lambda_{{\\max}}$"
    return ", ".join(text.values())


def _frame(ds: xr.Dataset) -> pd.DataFrame:
    """Every one-dimensional (per-cell) variable and coordinate of the cells as columns."""
    cols = {k: ds[k].values for k in ds.variables if ds[k].dims == ("cell",)}
    return pd.DataFrame(cols)


def _has_sgd(ds: xr.Dataset, name: str) -> bool:
    return f"{name}_sgd" in ds and bool(np.isfinite(ds[f"{name}_sgd"].values).any())


def _families(df: pd.DataFrame, keys: Sequence[str]) -> list[tuple[tuple, pd.DataFrame]]:
    keys = [k for k in keys if k in df]
    if not keys:
        return [((), df)]
    out = []
    for key, sub in df.groupby(keys, sort=True):
        out.append((key if isinstance(key, tuple) else (key,), sub))
    return out


def _varying(df: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    return [k for k in keys if k in df and df[k].nunique() > 1]


def _seed_mean(
    sub: pd.DataFrame, by: Sequence[str], x: str, names: Sequence[str], spread: str = "se"
) -> pd.DataFrame:
    """Per value of ``by``: the mean over data seeds of ``x`` and of every ``names`` column
    (NaN-skipping), and per SGD column ``<n>_sgd`` its error ``<n>_err``: ``spread="se"`` the
    s.e. of the mean (cell s.e. and seed-to-seed spread combined), ``"sd"`` the s.d. over seeds
    (the cell's jackknife s.e. where there is one seed). Sorted by ``x``; ``unstable`` is the
    fraction of seeds beyond the stability limit."""
    cols = [c for c in (x, "unstable", *names) if c in sub and c not in by]
    grouped = sub.groupby(list(by), sort=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = grouped[cols].mean()
        for name in names:
            if not name.endswith("_sgd") or f"{name}_se" not in sub:
                continue
            g = grouped[name]
            n = g.count()
            sd = g.std(ddof=1)
            cell_se = sub[f"{name}_se"].pow(2).groupby([sub[b] for b in by]).sum(min_count=1)
            stat = np.sqrt(cell_se) / n.replace(0, np.nan)
            if spread == "sd":
                err = sd.where(n > 1, stat)
            else:
                err = np.hypot(stat, (sd / np.sqrt(n)).where(n > 1, 0.0))
            out[f"{name}_err"] = err
            out[f"{name}_n"] = n
    return out.reset_index().sort_values(x, ignore_index=True)


def _mark_unstable(ax: plt.Axes, x: np.ndarray, color: object) -> None:
    """Crosses at the top of ``ax`` where cells (of any data seed) have no stationary law;
    each family that has some a row a little lower than the last, so that families beyond
    the limit at the same x stay apart."""
    if x.size:
        row = getattr(ax, "_unstable_rows", 0)
        ax._unstable_rows = row + 1
        y = np.full(x.size, 0.97 - 0.04 * (row % 5))
        ax.plot(x, y, "x", color=color, ms=5, mew=1.3, clip_on=False,
                transform=ax.get_xaxis_transform())  # fmt: skip


def _log_if_wide(ax: plt.Axes, values: np.ndarray, axis: str = "x", ratio: float = 15) -> None:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if v.size and v.max() / v.min() > ratio:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")


def _positive(values: object) -> np.ndarray:
    """``values`` with non-positive entries masked (NaN), for log axes."""
    v = np.asarray(values, dtype=float)
    return np.where(v > 0, v, np.nan)


def _bars_text(ds: xr.Dataset, spread: str, k: int = 1) -> str:
    seeds = _values(ds, "data_seed").size
    if spread == "sd" and seeds > 1:
        return f"$\\pm${k} s.d. over {seeds} data sets (repetitions)"
    return se_text(ds, k)


def _style_legend(fig: plt.Figure, families: list, extra: Sequence[Line2D]) -> None:
    """One legend below the panels: the families' colours, then the line and marker styles."""
    handles = [*families, *extra]
    ncols = 2 if max((len(h.get_label()) for h in handles), default=0) > 38 else 3
    fig.legend(handles=handles, loc="outside lower center", ncols=ncols, frameon=False)


def _family_handle(color: object, label: str, marker: str = "o") -> Line2D:
    return Line2D([], [], color=color, marker=marker, ms=4, mfc="white", ls="-", lw=1.2,
                  label=label)  # fmt: skip


def _theory(ax, x, mean, name, color, marker=None, lw=1.2):
    """Exact (solid) and continuous-time (dashed) theory of ``name`` against ``x``."""
    for kind, ls in (("exact", "-"), ("continuous", "--")):
        col = f"{name}_{kind}"
        if col in mean:
            ax.plot(x, _positive(mean[col]), ls=ls, color=color, lw=lw, marker=marker)


def _floor_ylim(ax: plt.Axes, dynamic_range: float = 1e-9) -> None:
    """Lower log-y limit from the drawn values above ``dynamic_range`` times the largest: a
    round-off zero (the continuous-time law of a rule that is exact in continuous time, KL
    1e-15) would otherwise stretch the axis over fifteen decades; such a curve lies below."""
    values = np.concatenate([np.asarray(line.get_ydata(), float).ravel() for line in ax.lines])
    values = values[np.isfinite(values) & (values > 0)]
    if values.size:
        keep = values[values >= dynamic_range * values.max()]
        ax.set_ylim(bottom=0.5 * keep.min())


# ----------------------------------------------------------------------------- figures


@styled
def kl_vs_lr(ds: xr.Dataset) -> plt.Figure:
    """KL to the target (left, log) and relative Frobenius error (right) against
    lambda / stability limit, one colour per variant (Lambda, chi, T).

    SGD open circles (+-1 s.e., jackknife; over several data sets the s.e. of their mean),
    exact discrete theory solid, continuous time (Eq. 29) dashed. Cells whose lr comes from a
    tuning rule (``lr_rule`` mandt, exact, wang) are single filled markers on their variant's
    curve; cells beyond the stability limit are crosses at the top.
    """
    free = (*VARIANT, "lr", "lr_rule", *SEEDS, "dynamics")
    require_one_value(ds, free, "kl_vs_lr", AXES)
    require_variables(ds, ("kl_exact", "lr_fraction", "unstable"), "kl_vs_lr")
    df = _frame(ds)
    names = [f"{q}_{k}" for q in ("kl", "frobenius") for k in ("exact", "continuous", "sgd")]
    fams = _families(df, VARIANT)
    varying = _varying(df, VARIANT)
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.4), layout="constrained")
    bars = ErrorBars(_bars_text(ds, "se"))
    handles, rules_seen, any_unstable = [], set(), False
    for i, (key, sub) in enumerate(fams):
        color = f"C{i % 10}"
        on_axis = sub[sub["lr_rule"].isin(["fixed", "fraction"])]
        ruled = sub[~sub["lr_rule"].isin(["fixed", "fraction"])]
        for ax, q in zip(axes, ("kl", "frobenius"), strict=True):
            if len(on_axis):
                m = _seed_mean(on_axis, ("lr_rule", "lr"), "lr_fraction", names)
                x = m["lr_fraction"].to_numpy()
                _theory(ax, x, m, q, color)
                if f"{q}_sgd_err" in m:
                    bars.errorbar(ax, x, _positive(m[f"{q}_sgd"]), m[f"{q}_sgd_err"],
                                  color=color, marker="o", **SIM)  # fmt: skip
                unstable = x[m["unstable"].to_numpy() > 0]
                any_unstable |= unstable.size > 0
                _mark_unstable(ax, unstable, color)
            if len(ruled):
                m = _seed_mean(ruled, ("lr_rule", "lr"), "lr_fraction", names)
                for _, row in m.iterrows():
                    rule = str(row["lr_rule"])
                    rules_seen.add(rule)
                    mk = RULE_MARKERS.get(rule, "X")
                    ax.plot(row["lr_fraction"], _positive(row[f"{q}_exact"]), mk, color=color,
                            ms=8 if mk == "*" else 6, mec="k", mew=0.6, zorder=4)  # fmt: skip
                    if f"{q}_sgd_err" in m:
                        bars.errorbar(ax, [row["lr_fraction"]], _positive(row[f"{q}_sgd"]),
                                      [row[f"{q}_sgd_err"]], color=color, marker="o",
                                      **SIM)  # fmt: skip
        handles.append(_family_handle(color, _label(key, VARIANT, varying)))
    for ax, ylabel in zip(axes, (KL_LABEL, FROB_LABEL), strict=True):
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        _floor_ylim(ax)
        _log_if_wide(ax, df["lr_fraction"].to_numpy())
        ax.axvline(1.0, color="0.6", ls=":", lw=0.9, zorder=0)
        ax.set_xlabel(r"$\lambda\,/\,\lambda_{\max}$ (stability limit)")
        ax.set_ylabel(ylabel)
    extra = [*THEORY_STYLES]
    if _has_sgd(ds, "kl"):
        extra.insert(0, Line2D([], [], color="0.3", marker="o", mfc="white", lw=0, label="SGD"))
    for rule in sorted(rules_seen):
        mk = RULE_MARKERS.get(rule, "X")
        extra.append(Line2D([], [], color="0.5", marker=mk, mec="k", mew=0.6, lw=0,
                            ms=8 if mk == "*" else 6, label=RULE_TEXT.get(rule, rule)))  # fmt: skip
    if any_unstable:
        extra.append(Line2D([], [], color="0.3", marker="x", mew=1.3, lw=0,
                            label=UNSTABLE))  # fmt: skip
    _style_legend(fig, handles, extra)
    head = _fixed_text(ds, (*VARIANT, "lr", "lr_rule"))
    _annotate(fig, bars, head, _has_sgd(ds, "kl"))
    return fig


def _annotate(fig: plt.Figure, bars: ErrorBars, head: str, simulated: bool) -> None:
    """The shared settings and (with SGD) the error-bar statement as the suptitle."""
    if simulated:
        bars.annotate(fig, lambda note: fig.suptitle(f"{head}\n{note}", fontsize=8), sep="\n")
    else:
        fig.suptitle(f"{head}\ntheory only (no SGD cells)", fontsize=8)


@styled
def kl_vs_batch(ds: xr.Dataset) -> plt.Figure:
    """KL to the target (left) and relative Frobenius error (right) against the batch size S,
    one colour per rule (Lambda, lr_rule; and chi, T where they vary).

    SGD: mean over data seeds, bars +-1 s.d. over them (the jackknife s.e. where there is one);
    exact discrete theory solid, continuous time (Eq. 29) dashed, both averaged over seeds.
    """
    family = (*RULE, "weight_decay", "temperature")
    require_one_value(ds, (*family, "batch_size", *SEEDS, "dynamics"), "kl_vs_batch", AXES)
    require_variables(ds, ("kl_exact", "unstable"), "kl_vs_batch")
    df = _frame(ds)
    names = [f"{q}_{k}" for q in ("kl", "frobenius") for k in ("exact", "continuous", "sgd")]
    varying = _varying(df, family)
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.4), layout="constrained")
    bars = ErrorBars(_bars_text(ds, "sd"))
    handles, any_unstable = [], False
    for i, (key, sub) in enumerate(_families(df, family)):
        color, marker = f"C{i % 10}", MARKERS[i % len(MARKERS)]
        m = _seed_mean(sub, ("batch_size",), "batch_size", names, spread="sd")
        x = m["batch_size"].to_numpy(dtype=float)
        for ax, q in zip(axes, ("kl", "frobenius"), strict=True):
            _theory(ax, x, m, q, color)
            if f"{q}_sgd_err" in m:
                bars.errorbar(ax, x, _positive(m[f"{q}_sgd"]), m[f"{q}_sgd_err"], color=color,
                              marker=marker, **SIM)  # fmt: skip
            unstable = x[m["unstable"].to_numpy() > 0]
            any_unstable |= unstable.size > 0
            _mark_unstable(ax, unstable, color)
        handles.append(_family_handle(color, _label(key, family, varying), marker))
    for ax, ylabel in zip(axes, (KL_LABEL, FROB_LABEL), strict=True):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        _floor_ylim(ax)
        ax.set_xlabel("batch size $S$")
        ax.set_ylabel(ylabel)
    extra = [*THEORY_STYLES]
    if _has_sgd(ds, "kl"):
        extra.insert(0, Line2D([], [], color="0.3", marker="o", mfc="white", lw=0,
                               label="SGD (mean over data sets)"))  # fmt: skip
    if any_unstable:
        extra.append(Line2D([], [], color="0.3", marker="x", mew=1.3, lw=0,
                            label=UNSTABLE))  # fmt: skip
    _style_legend(fig, handles, extra)
    _annotate(fig, bars, _fixed_text(ds, (*family, "batch_size")), _has_sgd(ds, "kl"))
    return fig


#: the most panels :func:`spectra` draws
MAX_PANELS = 6


@styled
def spectra(ds: xr.Dataset) -> plt.Figure:
    """Sorted eigenvalues of M against the mode index (log y), as paper 000 Fig. 4b: SGD
    (open circles in a band of +-2 s.e.), the exact discrete theory (solid), continuous time
    (Eq. 29, dashed) and the target (black), one panel per combination of the axes the cells
    vary (data seeds averaged; at most six panels, the first six in order).
    """
    require_variables(ds, ("eig_M_exact", "eig_target"), "spectra")
    df = _frame(ds)
    df["_cell"] = np.arange(len(df))
    panel_axes = [a for a in AXES if a not in (*SEEDS, "dynamics") and a in df]
    varying = _varying(df, panel_axes)
    groups = _families(df, varying)
    shown = groups[:MAX_PANELS]
    n = len(shown)
    cols = 2 if n == 4 else min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.4 * cols + 0.4, 2.3 * rows + 1.0),
                             layout="constrained", squeeze=False)  # fmt: skip
    band = ErrorBars(se_text(ds, 2), kind="band")
    simulated = "eig_M_sgd" in ds and bool(np.isfinite(ds["eig_M_sgd"].values).any())
    for ax, (key, sub) in zip(axes.ravel(), shown, strict=False):
        cells = ds.isel(cell=sub["_cell"].to_numpy())
        k = np.arange(1, cells.sizes["mode"] + 1)
        count = cells.sizes["cell"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = cells.mean("cell")
            spread = cells.std("cell", ddof=1) / np.sqrt(count) if count > 1 else None
        ax.plot(k, _positive(mean["eig_target"]), "-", color="k", lw=2.2, alpha=0.35,
                label=r"target $\Sigma$")  # fmt: skip
        ax.plot(k, _positive(mean["eig_M_exact"]), "-", color="C0", lw=1.2)
        ax.plot(k, _positive(mean["eig_M_continuous"]), "--", color="C1", lw=1.2)
        if simulated:
            se = np.sqrt((cells["eig_M_sgd_se"] ** 2).sum("cell")) / count
            if spread is not None:
                se = np.hypot(se, spread["eig_M_sgd"].fillna(0.0))
            band.band(ax, k, _positive(mean["eig_M_sgd"]), 2 * se.values, color="C3", ms=3.2,
                      mfc="white", mew=0.9)  # fmt: skip
        if float(mean["unstable"]) > 0:
            ax.text(0.5, 0.5, "beyond the stability limit\n(no stationary law)",
                    transform=ax.transAxes, ha="center", va="center", fontsize=7)  # fmt: skip
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        names = [*varying, "lr_rule"] if "lr_rule" not in varying else varying
        full = (*key, sub["lr_rule"].iloc[0]) if "lr_rule" not in varying else key
        title = _label(full, names, varying) if varying else ""
        kl = f"KL: exact {float(mean['kl_exact']):.3g}"
        if simulated and np.isfinite(float(mean["kl_sgd"])):
            kl += f", SGD {float(mean['kl_sgd']):.3g}"
        ax.set_title(f"{title}\n{kl}" if title else kl, fontsize=7)
    for ax in axes.ravel()[n:]:
        ax.set_axis_off()
    for c in range(cols):  # the lowest panel of each column
        axes[(n - 1 - c) // cols, c].set_xlabel("mode $i$ (sorted)")
    for ax in axes[:, 0]:
        ax.set_ylabel("eigenvalue of $M$")
    styles = [
        Line2D([], [], color="k", lw=2.2, alpha=0.35, label=r"target $\Sigma$"),
        Line2D([], [], color="C0", lw=1.2, label="exact discrete theory"),
        Line2D([], [], color="C1", ls="--", lw=1.2, label="continuous time (Eq. 29)"),
    ]
    if simulated:
        styles.insert(0, Line2D([], [], color="C3", marker="o", ms=3.2, mfc="white", lw=0,
                                label="SGD"))  # fmt: skip
    fig.legend(handles=styles, loc="outside lower center", ncols=len(styles), frameon=False)
    head = _fixed_text(ds, varying, width=28 * cols + 10)
    if len(groups) > MAX_PANELS:
        head += f"\nthe first {MAX_PANELS} of {len(groups)} panels"
    _annotate(fig, band, head, simulated)
    return fig


@styled
def protocol(ds: xr.Dataset) -> plt.Figure:
    """The protocol of Wang, Ding & Huggins (2026): relative Frobenius error of the sampled
    covariance against the sandwich target vs batch size (log-log), one colour per rule:
    the continuous-time rule (Lambda = J^-1, lambda = 2B/n), Wang et al.'s discrete rule
    (lambda = 1) and the exact rules (optimal lambda with J^-1, optimal diagonal).

    SGD: mean over data seeds (repetitions), bars +-1 s.d. over them; lines: the exact
    discrete prediction, mean over the data seeds.
    """
    require_one_value(ds, (*RULE, "batch_size", *SEEDS, "dynamics"), "protocol", AXES)
    require_variables(ds, ("frobenius_exact",), "protocol")
    if "target" in ds.coords and str(_values(ds, "target")[0]) != "sandwich":
        raise ValueError(f"protocol: the target is {_values(ds, 'target')[0]!r}; allowed: "
                         "'sandwich' (the Wang et al. protocol)")  # fmt: skip
    df = _frame(ds)
    names = ["frobenius_exact", "frobenius_sgd"]
    fig, ax = plt.subplots(figsize=(5.0, 4.2), layout="constrained")
    bars = ErrorBars(_bars_text(ds, "sd"))
    known = list(PROTOCOL_RULES)
    fams = sorted(_families(df, RULE), key=lambda f: (known.index(f[0]) if f[0] in known
                                                      else len(known), f[0]))  # fmt: skip
    any_unstable = False
    for i, (key, sub) in enumerate(fams):
        color, marker = f"C{i % 10}", MARKERS[i % len(MARKERS)]
        label = PROTOCOL_RULES.get(key) or _label(key, RULE, RULE)
        m = _seed_mean(sub, ("batch_size",), "batch_size", names, spread="sd")
        x = m["batch_size"].to_numpy(dtype=float)
        ax.plot(x, _positive(m["frobenius_exact"]), "-", color=color, lw=1.2)
        if "frobenius_sgd_err" in m:
            bars.errorbar(ax, x, _positive(m["frobenius_sgd"]), m["frobenius_sgd_err"],
                          color=color, marker=marker, **SIM)  # fmt: skip
        unstable = x[m["unstable"].to_numpy() > 0]
        any_unstable |= unstable.size > 0
        _mark_unstable(ax, unstable, color)
        ax.plot([], [], color=color, marker=marker, mfc="white", ms=4, lw=1.2, label=label)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_yscale("log")
    plain_log_ticks(ax.yaxis)
    ax.set_xlabel("batch size $S$ ($B$ of Wang et al.)")
    ax.set_ylabel(FROB_LABEL + r", $\Sigma = J^{-1} V J^{-1}/n$")
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.3", lw=1.2, label="lines: exact discrete prediction"))
    if _has_sgd(ds, "frobenius"):
        handles.append(Line2D([], [], color="0.3", marker="o", mfc="white", lw=0,
                              label="markers: SGD, mean over repetitions"))  # fmt: skip
    if any_unstable:
        handles.append(Line2D([], [], color="0.3", marker="x", mew=1.3, lw=0,
                              label=UNSTABLE))  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncols=1, frameon=False)
    head = _fixed_text(ds, (*RULE, "batch_size", "target"), width=70)
    _annotate(fig, bars, "sandwich target; " + head, _has_sgd(ds, "frobenius"))
    return fig


@styled
def injected_noise(ds: xr.Dataset) -> plt.Figure:
    """App. B: with injected noise at fixed temperature T, tr M / (T tr K^-1) against lambda
    (log), one colour per T (marker and dash per preconditioner where several).

    The injected noise alone gives 1 (horizontal line, the lambda -> 0 law of Eq. 29 with
    the temperature term only); mini-batch noise adds to it above the crossover lambda (dotted
    vertical per T: where both give the same tr(KM)). SGD +-1 s.e., exact discrete theory
    solid, continuous time dashed. Cells at T = 0 (no injected law) are left out.
    """
    family = ("temperature", "preconditioner")
    require_one_value(ds, (*family, "lr", "lr_rule", *SEEDS, "dynamics"), "injected_noise", AXES)
    require_variables(ds, ("trace_M_exact", "trace_injected_limit"), "injected_noise")
    df = _frame(ds)
    hot = df["temperature"] > 0 if "temperature" in df else np.zeros(len(df), bool)
    if not np.any(hot):
        raise ValueError("injected_noise: no cell has temperature > 0 (no injected noise)")
    left_out = int((~hot).sum())
    df = df[hot].copy()
    limit = df["trace_injected_limit"]
    for kind in ("exact", "continuous", "sgd", "sgd_se"):
        if f"trace_M_{kind}" in df:
            df[f"ratio_{kind}"] = df[f"trace_M_{kind}"] / limit
    names = ["ratio_exact", "ratio_continuous", "ratio_sgd", "lr_crossover"]
    temps = sorted(df["temperature"].unique())
    pres = sorted(df["preconditioner"].unique()) if "preconditioner" in df else [None]
    fig, ax = plt.subplots(figsize=(5.2, 4.4), layout="constrained")
    bars = ErrorBars(_bars_text(ds, "se"))
    ax.axhline(1.0, color="k", lw=0.9, ls=":", zorder=0)
    handles, any_unstable = [], False
    for key, sub in _families(df, family):
        T, pre = key[0], key[1] if len(key) > 1 else None
        i, j = temps.index(T), pres.index(pre)
        color, marker = f"C{i % 10}", MARKERS[j % len(MARKERS)]
        m = _seed_mean(sub, ("lr_rule", "lr"), "lr_used", names)
        x = m["lr_used"].to_numpy()
        ls = LINESTYLES[j % len(LINESTYLES)]
        ax.plot(x, _positive(m["ratio_exact"]), ls=ls, color=color, lw=1.2)
        ax.plot(x, _positive(m["ratio_continuous"]), ls="--", color=color, lw=1.0, alpha=0.8)
        if "ratio_sgd_err" in m:
            bars.errorbar(ax, x, _positive(m["ratio_sgd"]), m["ratio_sgd_err"], color=color,
                          marker=marker, **SIM)  # fmt: skip
        unstable = x[m["unstable"].to_numpy() > 0]
        any_unstable |= unstable.size > 0
        _mark_unstable(ax, unstable, color)
        cross = float(np.nanmean(m["lr_crossover"]))
        if np.isfinite(cross):
            ax.axvline(cross, color=color, ls=":", lw=1.0)
            ax.plot(cross, 1.0, marker, color=color, ms=4, mfc="white", clip_on=False,
                    transform=ax.get_xaxis_transform())  # fmt: skip
        parts = [_axis_text("temperature", T)]
        if len(pres) > 1:
            parts.append(_axis_text("preconditioner", pre))
        handles.append(Line2D([], [], color=color, marker=marker, mfc="white", ms=4, ls=ls,
                              lw=1.2, label=", ".join(parts)))  # fmt: skip
    ax.set_xscale("log")
    _log_if_wide(ax, np.concatenate([df[f"ratio_{k}"].to_numpy() for k in ("exact", "continuous")
                                     if f"ratio_{k}" in df]), "y", ratio=8)  # fmt: skip
    ax.set_xlabel(r"learning rate $\lambda$")
    ax.set_ylabel(r"tr$M$ / ($T$ tr$K^{-1}$)")
    extra = [
        Line2D([], [], color="0.3", lw=1.2, label="exact discrete theory"),
        Line2D([], [], color="0.3", ls="--", lw=1.0, label="continuous time (Eq. 29)"),
        Line2D([], [], color="k", ls=":", lw=0.9, label=r"injected noise alone: $T$ tr$K^{-1}$"),
        Line2D([], [], color="0.3", ls=":", lw=1.0, marker="o", ms=4, mfc="white",
               label=r"crossover $\lambda = 2NT/\mathrm{tr}(\Lambda C)$ (marker on top)"),
    ]  # fmt: skip
    if _has_sgd(ds, "trace_M"):
        extra.insert(0, Line2D([], [], color="0.3", marker="o", mfc="white", lw=0, label="SGD"))
    if any_unstable:
        extra.append(Line2D([], [], color="0.3", marker="x", mew=1.3, lw=0,
                            label=UNSTABLE))  # fmt: skip
    fig.legend(handles=[*handles, *extra], loc="outside lower center", ncols=2, frameon=False)
    head = _fixed_text(ds, (*family, "lr", "lr_rule"), width=75)
    if left_out:
        head += f"; {left_out} cells at $T = 0$ left out"
    _annotate(fig, bars, head, _has_sgd(ds, "trace_M"))
    return fig
