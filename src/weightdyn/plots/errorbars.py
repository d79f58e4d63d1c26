"""Error-bar statements measured on the drawn figure : what the bars are, how large
they are relative to the value and how many hide behind their markers.

Two ways to draw and state them, on one measurement (:func:`measure`):

* figure-wide: draw with :func:`errorbar` (``ax.errorbar`` that remembers the bars and the
  marker size on the figure), then :func:`state_bars` writes the statement into a title;
* per group of points: an :class:`ErrorBars` collects what it draws (bars, or markers in a
  shaded band) and states only those (:meth:`ErrorBars.note`, :meth:`ErrorBars.annotate`),
  e.g. one statement per panel.

The statement reads ``bars: +-1 s.e. over 8 replicas, at most 3.1 % of the value; all smaller
than the markers``. A bar counts as hidden when it reaches no farther from the centre of its
marker than the marker's radius, in both directions (and along x, for bars in x), on the
laid-out figure; points outside the axes' limits are not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text
from numpy.typing import ArrayLike

__all__ = [
    "JACKKNIFE",
    "ErrorBars",
    "bar_note",
    "errorbar",
    "jackknife_text",
    "measure",
    "se_text",
    "state_bars",
]

_RECORDS = "_weightdyn_errorbars"


@dataclass(frozen=True)
class _Bars:
    ax: plt.Axes
    x: np.ndarray
    y: np.ndarray
    yerr: tuple[np.ndarray, np.ndarray] | None  # (down, up)
    xerr: tuple[np.ndarray, np.ndarray] | None  # (left, right)
    marker_size: float  # points (diameter)


def _pair(err, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    if err is None:
        return None
    e = np.asarray(err, dtype=float)
    if e.ndim == 2:
        return np.broadcast_to(e[0], (n,)), np.broadcast_to(e[1], (n,))
    e = np.broadcast_to(e, (n,))
    return e, e


def errorbar(ax: plt.Axes, x, y, yerr=None, xerr=None, marker_size: float | None = None,
             **kwargs) -> ErrorbarContainer:  # fmt: skip
    """``ax.errorbar(x, y, yerr=yerr, xerr=xerr, **kwargs)``, remembered for :func:`measure`.

    ``marker_size`` (points) is the size of the markers the bars belong to when they are drawn
    apart (``fmt="none"``); otherwise ``ms``/``markersize`` or the rc default."""
    container = ax.errorbar(x, y, yerr=yerr, xerr=xerr, **kwargs)
    xa = np.asarray(x, dtype=float).ravel()
    ya = np.broadcast_to(np.asarray(y, dtype=float).ravel(), xa.shape)
    if marker_size is None:
        marker_size = kwargs.get("ms", kwargs.get("markersize", mpl.rcParams["lines.markersize"]))
    bars = _Bars(ax, xa, np.asarray(ya), _pair(yerr, xa.size), _pair(xerr, xa.size),
                 float(marker_size))  # fmt: skip
    fig = ax.figure.figure  # the root figure (that of a sub-figure too)
    if not hasattr(fig, _RECORDS):
        setattr(fig, _RECORDS, [])
    getattr(fig, _RECORDS).append(bars)
    return container


def _reach(ax: plt.Axes, x, y, lo, hi, along: int) -> np.ndarray:
    """How far (display pixels) the bar of each point reaches from its centre, along axis
    ``along`` (0: x, 1: y); infinite where an end leaves a log axis."""
    centre = np.column_stack([x, y])
    at = ax.transData.transform(centre)[:, along]
    ends = []
    for sign, e in ((-1, lo), (1, hi)):
        end = centre.copy()
        end[:, along] = centre[:, along] + sign * e
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.abs(ax.transData.transform(end)[:, along] - at)
        scale = ax.get_xscale() if along == 0 else ax.get_yscale()
        if scale == "log":
            d = np.where(end[:, along] > 0, d, np.inf)
        ends.append(np.where(np.isfinite(d), d, np.inf))
    return np.maximum(*ends)


def measure(
    fig: plt.Figure, axes: Sequence[plt.Axes] | None = None, layout: bool = True
) -> tuple[int, int, float]:
    """(bars hidden by their markers, bars drawn, largest bar relative to its value) over every
    bar drawn with :func:`errorbar` on ``fig`` (on ``axes`` only, if given), on the laid-out
    figure (``layout``: lay it out first). Points outside the axes' limits or with no finite bar
    are not counted."""
    records: list[_Bars] = getattr(fig.figure, _RECORDS, [])
    if axes is not None:
        records = [b for b in records if any(b.ax is a for a in axes)]
    return _measure(fig, records, layout)


def _measure(fig: plt.Figure, records: Sequence[_Bars], layout: bool) -> tuple[int, int, float]:
    """:func:`measure` over ``records``."""
    if layout and records:
        fig.figure.draw_without_rendering()
    hidden = drawn = 0
    largest = 0.0
    px_per_pt = fig.dpi / 72.0
    for b in records:
        x0, x1 = sorted(b.ax.get_xlim())
        y0, y1 = sorted(b.ax.get_ylim())
        shown = np.isfinite(b.x) & np.isfinite(b.y) & (b.x >= x0) & (b.x <= x1)
        shown &= (b.y >= y0) & (b.y <= y1)
        reach = np.zeros(b.x.size)
        has_bar = np.zeros(b.x.size, dtype=bool)
        for along, err in ((1, b.yerr), (0, b.xerr)):
            if err is None:
                continue
            lo, hi = (np.where(np.isfinite(e), e, np.nan) for e in err)
            ok = np.isfinite(lo) & np.isfinite(hi)
            has_bar |= ok
            r = _reach(b.ax, b.x, b.y, np.nan_to_num(lo), np.nan_to_num(hi), along)
            reach = np.maximum(reach, np.where(ok, r, 0.0))
            value = np.abs(b.x if along == 0 else b.y)
            with np.errstate(invalid="ignore", divide="ignore"):
                rel = np.where(ok & shown & (value > 0), np.maximum(lo, hi) / value, 0.0)
            largest = max(largest, float(np.nanmax(rel, initial=0.0)))
        counted = shown & has_bar
        drawn += int(counted.sum())
        hidden += int((counted & (reach <= 0.5 * b.marker_size * px_per_pt)).sum())
    return hidden, drawn, largest


def _percent(rel: float) -> str:
    if rel < 0.1:
        return f"{100 * rel:.2g} %"
    return f"{100 * rel:.0f} %" if rel < 10 else f"{rel:.2g} times"


def bar_note(
    what: str,
    hidden: int,
    drawn: int,
    largest: float | None,
    newline: bool = False,
    kind: str = "bars",
) -> str:
    """``bars: <what>, at most <largest> of the value; all / k of n smaller than the
    markers`` (the measured part on a line of its own with ``newline``); ``largest`` None
    leaves the relative size out. ``kind="band"``: a shaded band, "narrower than" the markers."""
    smaller = "narrower" if kind == "band" else "smaller"
    measured = []
    if largest is not None and drawn:
        measured.append(f"at most {_percent(largest)} of the value")
    if drawn and hidden == drawn:
        measured.append(f"all {smaller} than the markers")
    elif hidden:
        measured.append(f"{hidden} of {drawn} {smaller} than the markers")
    if not measured:
        return f"{kind}: {what}"
    return f"{kind}: {what}" + (",\n" if newline else ", ") + "; ".join(measured)


def state_bars(
    fig: plt.Figure,
    target: Text,
    what: str,
    template: str = "{bars}",
    relative: bool = True,
    extra: Sequence[str] = (),
    axes: Sequence[plt.Axes] | None = None,
    newline: bool = False,
) -> str:
    """Write ``template`` with ``{bars}`` = :func:`bar_note` into the text artist ``target``
    (a title or suptitle), measured on ``fig`` (the bars on ``axes`` only, if given) laid out
    with a placeholder of the same length; ``extra`` notes are appended after ``; ``.
    ``relative``: state the largest relative bar (leave it out for quantities that cross zero);
    ``newline``: the measured part on a line of its own. Returns the text."""
    _, drawn, _ = measure(fig, axes, layout=False)

    def compose(hidden: int, largest: float) -> str:
        note = bar_note(what, hidden, drawn, largest if relative else None, newline)
        return template.replace("{bars}", "; ".join([note, *extra]))

    target.set_text(compose(max(drawn - 1, 0), 0.099))  # placeholder: the longest wording
    hidden, drawn, largest = measure(fig, axes)
    text = compose(hidden, largest)
    target.set_text(text)
    return text


#: how the s.e. of a stationary SGD estimate is computed (weightdyn.stats.jackknife_of_mean)
JACKKNIFE = "jackknife over replica time blocks"


def jackknife_text(cells: xr.Dataset) -> str:
    """How the cells' errors were grouped: :data:`JACKKNIFE`, or over replicas where their
    ``errors_by_replica`` flag says the time blocks were too short to be groups
    (:func:`weightdyn.single_layer.datasets.error_groups`)."""
    if "errors_by_replica" not in cells:
        return JACKKNIFE
    flags = np.asarray(cells["errors_by_replica"].values, dtype=float).ravel()
    flags = flags[np.isfinite(flags)]
    if flags.size and (flags == 1).all():
        return "jackknife over replicas"
    if (flags == 1).any():
        return "jackknife over replicas or replica time blocks"
    return JACKKNIFE


def se_text(cells: xr.Dataset, k: int = 1, how: str | None = None) -> str:
    """What bars of +-k s.e. are: ``how`` (default :func:`jackknife_text` of the cells) for
    one data set; with cells of several data seeds, of the mean over them (their spread
    added)."""
    how = jackknife_text(cells) if how is None else how
    seeds = int(np.unique(cells["data_seed"].values).size) if "data_seed" in cells.coords else 1
    spread = f" and spread over {seeds} data sets" if seeds > 1 else ""
    return f"$\\pm${k} s.e. ({how}{spread})"


class ErrorBars:
    """A group of simulated points with their error bars (or band), stated on their own.

    Draw the group's points through :meth:`errorbar` (markers with bars) or :meth:`band`
    (markers in a shaded band); :meth:`note` then states what the intervals are, their largest
    size relative to the value and where they are smaller than the markers (:func:`measure`,
    over this group only). ``what`` names the interval, e.g. ``"$\\pm$1 s.e. (jackknife over
    replica time blocks)"``; ``kind`` is ``"bars"`` or ``"band"``.
    """

    def __init__(self, what: str, kind: str = "bars") -> None:
        self.what = what
        self.kind = kind
        self._drawn: list[_Bars] = []

    def add(
        self, ax: plt.Axes, x: ArrayLike, y: ArrayLike, yerr: ArrayLike, markersize: float
    ) -> None:
        """Record an interval ``y - yerr[0]`` to ``y + yerr[-1]`` drawn around markers of
        ``markersize`` points at ``(x, y)`` (``yerr`` of shape (n,) or (2, n))."""
        x, y = (np.asarray(v, dtype=float).ravel() for v in (x, y))
        err = _pair(np.abs(np.asarray(yerr, dtype=float)), y.size)
        self._drawn.append(_Bars(ax, x, y, err, None, float(markersize)))

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
        down, up = _pair(np.abs(np.asarray(yerr, dtype=float)), y.size)
        ax.fill_between(x, y - down, y + up, color=color, alpha=alpha, lw=0)
        (markers,) = ax.plot(
            x, y, marker=marker, ms=ms, ls="-" if line else "none", lw=line, color=color, **kwargs
        )
        self.add(ax, x, y, np.stack([down, up]), ms)
        return markers

    def note(self, fig: plt.Figure, relative: bool = True, sep: str = ", ") -> str:
        """:func:`bar_note` of this group, measured on ``fig`` laid out; ``relative``: state
        the largest interval relative to its value; ``sep="\\n"`` puts the measured part on a
        line of its own."""
        hidden, drawn, largest = _measure(fig, self._drawn, layout=True)
        largest = largest if relative else None
        return bar_note(self.what, hidden, drawn, largest, newline="\n" in sep, kind=self.kind)

    def annotate(self, fig: plt.Figure, put: Callable[[str], object], **kwargs) -> None:
        """Write :meth:`note` with ``put`` (e.g. ``ax.set_title``), measured again with the note
        in place (the note's own lines change the layout)."""
        for _ in range(2):
            put(self.note(fig, **kwargs))
