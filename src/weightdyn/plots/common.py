"""Shared plotting helpers: house style, saving, seed means, checks on merged sweeps and the
statement of what error bars are (ErrorBars)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence

import matplotlib as mpl
import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

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


#: how the s.e. of a stationary SGD estimate is computed (weightdyn.stats.jackknife_of_mean)
JACKKNIFE = "jackknife over replica time blocks"


def se_text(cells: xr.Dataset, k: int = 1, how: str = JACKKNIFE) -> str:
    """What bars of +-k s.e. are: ``how`` for one data set; with cells of several data seeds,
    of the mean over them (their spread added)."""
    seeds = int(np.unique(cells["data_seed"].values).size) if "data_seed" in cells.coords else 1
    spread = f" and spread over {seeds} data sets" if seeds > 1 else ""
    return f"$\\pm${k} s.e. ({how}{spread})"


class ErrorBars:
    """What a figure's error bars (or bands) are, and how they compare with its markers.

    Draw every simulated point through :meth:`errorbar` (markers with bars) or :meth:`band`
    (markers in a shaded band); :meth:`note` then states what the bars are, their largest size
    relative to the value and, measured on the laid-out figure, where they are smaller than the
    markers (and so hidden by them). ``what`` names the interval, e.g. ``"$\\pm$1 s.e.
    (jackknife over replica time blocks)"``; ``kind`` is ``"bars"`` or ``"band"``.
    """

    def __init__(self, what: str, kind: str = "bars") -> None:
        self.what = what
        self.kind = kind
        self._drawn: list[tuple[plt.Axes, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]]
        self._drawn = []

    def add(
        self, ax: plt.Axes, x: ArrayLike, y: ArrayLike, yerr: ArrayLike, markersize: float
    ) -> None:
        """Record an interval ``y - yerr[0]`` to ``y + yerr[-1]`` drawn around markers of
        ``markersize`` points at ``(x, y)`` (``yerr`` of shape (n,) or (2, n))."""
        x, y = (np.asarray(v, dtype=float).ravel() for v in (x, y))
        err = np.broadcast_to(np.abs(np.asarray(yerr, dtype=float)), (2, y.size))
        self._drawn.append((ax, x, y, y - err[0], y + err[-1], float(markersize)))

    def errorbar(self, ax: plt.Axes, x: ArrayLike, y: ArrayLike, yerr: ArrayLike, **kwargs):
        """``ax.errorbar`` (markers with bars), recorded."""
        drawn = ax.errorbar(x, y, yerr=yerr, **kwargs)
        self.add(ax, x, y, yerr, drawn.lines[0].get_markersize())
        return drawn

    def band(
        self,
        ax: plt.Axes,
        x: ArrayLike,
        y: ArrayLike,
        yerr: ArrayLike,
        *,
        color: object,
        marker: str = "o",
        ms: float = 2.5,
        alpha: float = 0.3,
        line: float = 0.0,
        **kwargs,
    ) -> plt.Line2D:
        """Markers at ``(x, y)`` (joined by a line of width ``line`` if nonzero) in a band
        ``y -+ yerr``, recorded; ``kwargs`` go to the markers' ``plot`` (e.g. label, mfc)."""
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        err = np.broadcast_to(np.abs(np.asarray(yerr, dtype=float)), (2, y.size))
        ax.fill_between(x, y - err[0], y + err[-1], color=color, alpha=alpha, lw=0)
        (markers,) = ax.plot(
            x, y, marker=marker, ms=ms, ls="-" if line else "none", lw=line, color=color, **kwargs
        )
        self.add(ax, x, y, err, ms)
        return markers

    def hidden(self) -> tuple[int, int]:
        """(hidden, drawn): of the finite intervals drawn, how many lie within their marker, in
        the figure's current layout (draw it first)."""
        hidden = total = 0
        for ax, x, y, lo, hi, ms in self._drawn:
            ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(lo) & np.isfinite(hi)
            if ax.get_yscale() == "log":
                ok &= y > 0
                lo = np.where(lo > 0, lo, np.nan)  # a bar below zero: infinitely long here
            if not ok.any():
                continue
            to_px = ax.transData.transform
            centre, low, high = (to_px(np.column_stack([x[ok], v[ok]]))[:, 1] for v in (y, lo, hi))
            reach = np.fmax(np.abs(centre - low), np.abs(high - centre))
            reach = np.where(np.isfinite(low), reach, np.inf)
            radius = 0.5 * ms * ax.figure.dpi / 72.0
            hidden += int(np.sum(reach <= radius))
            total += int(ok.sum())
        return hidden, total

    def largest_relative(self) -> float:
        """Largest half-width of an interval relative to its (positive) value; NaN if none."""
        out = []
        for _, _, y, lo, hi, _ in self._drawn:
            ok = (y > 0) & np.isfinite(lo) & np.isfinite(hi)
            out.append(np.fmax(y - lo, hi - y)[ok] / y[ok])
        out = np.concatenate(out) if out else np.array([])
        return float(np.max(out)) if out.size else np.nan

    def note(self, fig: plt.Figure, relative: bool = True, sep: str = ", ") -> str:
        """``"bars: <what>, at most 1.4 % of the value: smaller than the markers"``: the largest
        interval relative to its value (positive values, if ``relative``) and the share hidden
        by the markers, measured on ``fig`` laid out; ``sep`` joins what the bars are to the
        rest (e.g. a line break)."""
        fig.draw_without_rendering()
        largest = self.largest_relative() if relative else np.nan
        size = f"at most {_percent(largest)} of the value" if np.isfinite(largest) else ""
        hidden, total = self.hidden()
        smaller = "narrower than" if self.kind == "band" else "smaller than"
        where = f"{smaller} the markers" if total and hidden == total else ""
        if 0 < hidden < total:
            where = f"{smaller} the markers at {hidden} of {total} points"
        tail = ": ".join(part for part in (size, where) if part)
        head = f"{self.kind}: {self.what}"
        return head + sep + tail if tail else head

    def annotate(self, fig: plt.Figure, put: Callable[[str], object], **kwargs) -> None:
        """Write :meth:`note` with ``put`` (e.g. ``ax.set_title``), measured again with the note
        in place (the note's own lines change the layout)."""
        for _ in range(2):
            put(self.note(fig, **kwargs))


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.2g} %"
