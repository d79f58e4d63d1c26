"""The generic figure ``scalar``: one per-cell scalar variable against one axis, with theory.

Any merged sweep whose cells store scalar variables can draw one of them (``y``) against an axis
(``x``), one line per value of a second axis (``hue``). The simulated values carry error bars
from the variable that y's CF attribute ``ancillary_variables`` names (else ``<y>_se``); every
variable named in y's attribute ``weightdyn_theories`` (space-separated) is drawn as a line.
Cells of several data sets (``data_seed``) at one point are averaged: the bar is the standard
error of their mean, the larger of the seed-to-seed spread over sqrt(n) and the cells' own
standard errors combined (sqrt(sum se^2) / n). Labels come from the variables' and coordinates'
``long_name`` and ``units``.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from weightdyn import io
from weightdyn.io import format_number
from weightdyn.plots.common import styled
from weightdyn.plots.errorbars import ErrorBars

__all__ = ["scalar"]

#: the paper's symbols for the plain-text symbols that end the axes' long names
TEX = {"lambda": r"\lambda", "sigma_eps^2": r"\sigma_\epsilon^2", "sigma_y^2": r"\sigma_y^2"}
THEORY_STYLES = ("-", "--", "-.", ":")
SIM = {"fmt": "o", "ms": 4, "mfc": "none", "capsize": 2, "elinewidth": 1, "lw": 0}
AVERAGED = "data_seed"


def _symbol(var: xr.DataArray, name: str) -> tuple[str, str]:
    """(the long_name before its trailing plain symbol, the symbol typeset) of a coordinate or
    variable, e.g. ("learning rate", "$\\lambda$"); ("long name", "") without a symbol."""
    text = str(var.attrs.get("long_name", name))
    head, _, last = text.rpartition(" ")
    if last in TEX:
        return head, f"${TEX[last]}$"
    if head and re.fullmatch(r"[A-Za-z](_[a-z])?(/[A-Za-z])?", last):
        return head, f"${last}$"
    return text, ""


def label(var: xr.DataArray, name: str) -> str:
    """Axis label of a variable or coordinate: its long_name (a trailing plain symbol such as
    ``lambda`` or ``S`` typeset, ``$\\lambda$``) and its units unless dimensionless."""
    text = " ".join(filter(None, _symbol(var, name)))
    units = str(var.attrs.get("units", "1"))
    return text if units in ("1", "") else f"{text} [{units}]"


def value_text(value: object) -> str:
    """A coordinate value as a title shows it (numbers in canonical form, 0.1 not 0.10000001)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value):
        return format_number(value)
    return str(value)


def _companions(ds: xr.Dataset, y: str) -> tuple[str | None, list[str]]:
    """(the s.e. variable of ``y`` or None, its theory variables), from y's attributes."""
    attrs = ds[y].attrs
    named = str(attrs.get("ancillary_variables", "")).split()
    se = next((n for n in named if n in ds), f"{y}_se" if f"{y}_se" in ds else None)
    theories = str(attrs.get("weightdyn_theories", "")).split()
    missing = [t for t in theories if t not in ds]
    if missing:
        raise ValueError(f"scalar: {y}'s weightdyn_theories names {missing}, not in the cells")
    return se, theories


def _checked(ds: xr.Dataset, y: str, x: str, hue: str | None) -> None:
    """Refuse a y that is no per-cell scalar, or an x or hue that is no axis of the cells."""
    scalars = sorted(str(n) for n, v in ds.data_vars.items() if v.dims == ("cell",))
    if y not in ds.data_vars or ds[y].dims != ("cell",):
        raise ValueError(f"scalar: y = {y!r} is not a per-cell scalar variable; allowed: {scalars}")
    axes = [
        str(n)
        for n, c in ds.coords.items()
        if c.dims == ("cell",) and n != "cell_id" and not io.is_record(c)
    ]
    if hue == x:
        raise ValueError(f"scalar: hue = {hue!r} is x; allowed: another axis of {axes}")
    for key, axis in (("x", x), ("hue", hue)):
        if axis is not None and axis not in axes:
            raise ValueError(
                f"scalar: {key} = {axis!r} is not an axis of the cells; allowed: {axes}"
            )


def _points(
    ds: xr.Dataset, y: str, se: str | None, theories: Sequence[str], x: str
) -> dict[str, np.ndarray]:
    """Per distinct x (sorted; numbers, or positions in ``_categories`` for text): the mean of y
    and of the theories over the cells there (data sets), and the standard error of y's mean
    (NaN without an s.e. variable and one cell)."""
    xs = np.unique(ds[x].values)
    out: dict[str, list] = {"x": [], "y": [], "se": [], **{t: [] for t in theories}}
    for value in xs:
        at = ds.isel(cell=np.flatnonzero(ds[x].values == value))
        ys = at[y].values.astype(float)
        n = ys.size
        own = np.sqrt(np.nansum(at[se].values.astype(float) ** 2)) / n if se else np.nan
        spread = np.nanstd(ys, ddof=1) / np.sqrt(n) if n > 1 else np.nan
        out["x"].append(value)
        out["y"].append(float(np.nanmean(ys)))
        out["se"].append(float(np.fmax(own, spread)))
        for t in theories:
            out[t].append(float(np.nanmean(at[t].values.astype(float))))
    out["x"] = [_categories(ds, x).index(v) if _categorical(ds, x) else v for v in out["x"]]
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def _categorical(ds: xr.Dataset, x: str) -> bool:
    """Whether the axis ``x`` takes text values (drawn at positions 0, 1, ...)."""
    return ds[x].dtype.kind in "OUSb"


def _categories(ds: xr.Dataset, x: str) -> list:
    """The sorted values of a text axis, in the order of their positions."""
    return np.unique(ds[x].values).tolist()


def _groups(ds: xr.Dataset, hue: str | None) -> list[tuple[str | None, xr.Dataset]]:
    """(legend name, cells) per value of ``hue`` (one group of every cell without it)."""
    if hue is None:
        return [(None, ds)]
    symbol = _symbol(ds[hue], hue)[1] or hue
    return [
        (f"{symbol} = {value_text(v)}", ds.isel(cell=np.flatnonzero(ds[hue].values == v)))
        for v in np.unique(ds[hue].values)
    ]


def _fixed_text(ds: xr.Dataset, drawn: Sequence[str]) -> str:
    """The axes with one value among the cells, ``name = value``, wrapped."""
    parts = []
    for name, coord in ds.coords.items():
        if coord.dims != ("cell",) or name in (*drawn, "cell_id"):
            continue
        values = np.unique(coord.values)
        if values.size == 1 and value_text(values[0]) not in ("", "nan"):
            parts.append(f"{_symbol(coord, name)[1] or name} = {value_text(values[0])}")
    lines = [""]
    for part in parts:  # wrapped between entries, never inside one
        if lines[-1] and len(lines[-1]) + len(part) > 80:
            lines.append("")
        lines[-1] += (", " if lines[-1] else "") + part
    return ",\n".join(lines)


@styled
def scalar(
    ds: xr.Dataset,
    *,
    y: str,
    x: str,
    hue: str | None = None,
    logx: bool = False,
    logy: bool = False,
) -> plt.Figure:
    """``y`` (a per-cell scalar variable) against the axis ``x`` for the merged cells ``ds``:
    simulation with +-1 s.e. bars (markers), theories as lines (one style each, the first
    four), one colour per value of the axis ``hue``; log axes on request (a text axis x, e.g.
    dynamics, is drawn at evenly spaced positions). The title lists the axes held fixed and
    states the bars."""
    _checked(ds, y, x, hue)
    se, theories = _companions(ds, y)
    fig, ax = plt.subplots(figsize=(5.2, 3.9), layout="constrained")
    several = _several(ds, AVERAGED)
    bars = ErrorBars("$\\pm$1 s.e." + (" of the mean over data sets" if several else ""))
    groups = _groups(ds, hue)
    for k, (_, cells) in enumerate(groups):
        color = f"C{k % 10}" if hue else "k"
        pts = _points(cells, y, se, theories, x)
        if se is not None or np.isfinite(pts["se"]).any():
            bars.errorbar(ax, pts["x"], pts["y"], np.nan_to_num(pts["se"]), color=color, **SIM)
        else:
            ax.plot(pts["x"], pts["y"], "o", mfc="none", color=color, ms=4)
        for style, t in zip(THEORY_STYLES, theories, strict=False):
            ax.plot(pts["x"], pts[t], style, color=color, lw=1.1)
    _x_ticks(ax, ds, x, logx)
    ax.set_yscale("log" if logy else "linear")
    ax.set_xlabel(label(ds[x], x))
    ax.set_ylabel(textwrap.fill(label(ds[y], y), 40))
    _legend(ax, ds, y, theories, groups if hue else [])
    fixed = _fixed_text(ds, [x, *([hue] if hue else [])])
    bars.annotate(
        fig, lambda note: ax.set_title("\n".join(filter(None, [fixed, note])), fontsize=7.5)
    )
    return fig


def _x_ticks(ax: plt.Axes, ds: xr.Dataset, x: str, logx: bool) -> None:
    """The x scale; ticks at the drawn values of a text axis, or of a log axis with a few."""
    if _categorical(ds, x):
        names = _categories(ds, x)
        ax.set_xticks(range(len(names)), [str(n) for n in names])
        ax.set_xlim(-0.5, len(names) - 0.5)
        return
    ax.set_xscale("log" if logx else "linear")
    xs = np.unique(ds[x].values.astype(float))
    if logx and xs.size <= 8:  # label the drawn values, not crowded powers of ten
        ax.set_xticks(xs, [value_text(v) for v in xs])
        ax.xaxis.set_minor_locator(NullLocator())


def _several(ds: xr.Dataset, axis: str) -> bool:
    return axis in ds.coords and np.unique(ds[axis].values).size > 1


def _legend(
    ax: plt.Axes,
    ds: xr.Dataset,
    y: str,
    theories: Sequence[str],
    groups: Sequence[tuple[str | None, xr.Dataset]],
) -> None:
    """Legend: the simulation marker, one line style per theory (long names), one colour per
    hue value."""
    handles = [Line2D([], [], marker="o", mfc="none", ls="none", color="k",
                      label=str(ds[y].attrs.get("long_name", y)))]  # fmt: skip
    for style, t in zip(THEORY_STYLES, theories, strict=False):
        handles.append(Line2D([], [], ls=style, color="k", label=label(ds[t], t)))
    for k, (name, _) in enumerate(groups):
        handles.append(Line2D([], [], ls="-", lw=4, color=f"C{k % 10}", label=name))
    ax.legend(handles=handles, frameon=False, fontsize=7, loc="best")
