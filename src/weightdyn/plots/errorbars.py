"""Error-bar statements measured on the drawn figure (issue 15): what the bars are, how large
they are relative to the value and how many hide behind their markers.

Draw the bars with :func:`errorbar` (``ax.errorbar`` that remembers the bars and the marker
size), then let :func:`state_bars` write the statement into a title: it lays the figure out,
measures every bar against the radius of its marker in points and sets the text, e.g.
``bars: +-1 s.e. over 8 replicas, at most 3.1 % of the value; all smaller than the markers``.
A bar counts as hidden when it reaches no farther from the centre of its marker than the
marker's radius, in both directions (and along x, for bars in x).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text

__all__ = ["bar_note", "errorbar", "measure", "state_bars"]

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
    what: str, hidden: int, drawn: int, largest: float | None, newline: bool = False
) -> str:
    """``bars: <what>, at most <largest> of the value; all / k of n smaller than the
    markers`` (the measured part on a line of its own with ``newline``); ``largest`` None
    leaves the relative size out."""
    measured = []
    if largest is not None and drawn:
        measured.append(f"at most {_percent(largest)} of the value")
    if drawn and hidden == drawn:
        measured.append("all smaller than the markers")
    elif hidden:
        measured.append(f"{hidden} of {drawn} smaller than the markers")
    if not measured:
        return f"bars: {what}"
    return f"bars: {what}" + (",\n" if newline else ", ") + "; ".join(measured)


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
