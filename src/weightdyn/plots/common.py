"""Shared plotting helpers: house style, saving, seed means and checks on merged sweeps (the
error-bar statements are in :mod:`weightdyn.plots.errorbars`)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence

import matplotlib as mpl
import numpy as np
import xarray as xr
from matplotlib.axis import Axis
from matplotlib.ticker import FuncFormatter

from weightdyn import experiments

mpl.use("Agg")

import matplotlib.pyplot as plt

STYLE = {
    "font.size": 9,
    "axes.labelsize": 10,
    "legend.fontsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.05,
}


def mean_over_seeds(sel: xr.Dataset, by: str) -> tuple[xr.Dataset, xr.Dataset]:
    """Mean and standard error over data seeds of every variable, grouped by the axis ``by``.

    With a single seed the standard error of an SGD estimate is its own ``*_se`` variable; the
    seed-to-seed spread adds the data-realisation uncertainty when several seeds are present.
    """
    grouped = sel.groupby(by)
    mean = grouped.mean("cell")
    count = grouped.count("cell")
    with warnings.catch_warnings():  # a group of one seed has no spread: NaN, filled with 0
        warnings.simplefilter("ignore", RuntimeWarning)
        spread = grouped.std("cell", ddof=1) / np.sqrt(count)
    return mean, spread.fillna(0.0)


def styled(func: Callable[..., plt.Figure]) -> Callable[..., plt.Figure]:
    """Draw a figure function's whole body in the house style."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs) -> plt.Figure:
        with mpl.rc_context(STYLE):
            return func(*args, **kwargs)

    return wrapper


def save(fig: plt.Figure, paths: Sequence[str], dpi: int = 200) -> None:
    """Save ``fig`` to every path (format from the suffix) and close it."""
    with mpl.rc_context(STYLE):
        for path in paths:
            fig.savefig(path, dpi=dpi)
    plt.close(fig)


def declared_axes(experiment: str, without: Sequence[str] = ()) -> tuple[str, ...]:
    """The sweep axes ``experiment`` declares (``Param(axis=True)``), in order, but ``without``."""
    return tuple(p.name for p in experiments.get(experiment).axes if p.name not in without)


def require_one_value(
    ds: xr.Dataset, free: Sequence[str], figure: str, axes: Sequence[str]
) -> None:
    """Refuse a merged sweep (cells along ``cell``) in which an axis of ``axes`` outside ``free``
    takes several values: the figure draws one curve family, the error names the axis."""
    varying = [
        k for k in axes if k not in free and k in ds.coords and np.unique(ds[k].values).size > 1
    ]
    if varying:
        values = {k: sorted(np.unique(ds[k].values).tolist()) for k in varying}
        raise ValueError(
            f"{figure}: the cells vary {values}; this figure draws one curve family, so only "
            f"{list(free)} may take several values (select one value of each with a view's "
            "'select', or put the other values in another sweep)"
        )


def require_variables(ds: xr.Dataset, names: Sequence[str], figure: str, hint: str = "") -> None:
    """Refuse a dataset that lacks one of the variables ``names`` (``hint`` says why)."""
    missing = [n for n in names if n not in ds.variables]
    if missing:
        raise ValueError(f"{figure}: the cells have no values of {missing}{hint}")


def _minor_labeller(axis: Axis) -> FuncFormatter:
    """Minor log ticks labelled by the view's span: every one within a decade, 2, 3 and 5
    within two, 2 and 5 beyond (plain numbers)."""

    def label(value: float, _: int) -> str:
        lo, hi = sorted(axis.get_view_interval())
        decades = np.log10(hi / lo) if lo > 0 else np.inf
        shown = range(1, 10) if decades < 1 else (2, 3, 5) if decades < 2 else (2, 5)
        mantissa = round(value / 10 ** np.floor(np.log10(value)))
        return f"{value:g}" if mantissa in shown else ""

    return FuncFormatter(label)


def plain_log_ticks(*axes: Axis) -> None:
    """Log-axis ticks as plain numbers: decades, and minor ticks as :func:`_minor_labeller`
    says (so an axis spanning less than a decade still reads)."""
    for axis in axes:
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(_minor_labeller(axis))
