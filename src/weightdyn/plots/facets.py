"""A figure split into panels, one per value of the axes it does not draw.

A view's cells may vary an axis its figure neither draws nor averages over (the figure's
declaration, :meth:`weightdyn.experiments.Figure.extra_axes`; the config check allows it for a
figure of the cells). :func:`draw` then calls the figure function once per value (combination)
of those axes, on the cells that have it, renders each figure to an image at the figure's dpi
and tiles the images, each titled ``<axis> = <value>``, into one figure. The figure functions
stay unchanged (each builds its own figure, so matplotlib's subfigures cannot hold them); a PDF
or SVG output holds the panels as images.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import xarray as xr

from weightdyn import experiments
from weightdyn.plots.common import STYLE
from weightdyn.plots.scalar import value_text

__all__ = ["draw", "tiled"]

#: panel title size (points) and the space above each panel it takes (in title heights)
TITLE_SIZE = 10
TITLE_SPACE = 2.0


def draw(
    experiment: str,
    figure: str,
    ds: xr.Dataset | list[xr.Dataset],
    options: Mapping[str, Any],
    dpi: int,
) -> plt.Figure:
    """Figure ``figure`` of ``experiment`` on the view's data ``ds`` with ``options``: drawn
    once, or once per value of each axis the cells vary that it does not draw, tiled."""
    exp = experiments.get(experiment)
    spec = exp.figures[figure]
    if not spec.facets or not isinstance(ds, xr.Dataset):
        return spec.plot(ds, **options)
    axes = [p.name for p in exp.axes if p.name in ds.coords and ds[p.name].dims == ("cell",)]
    extra = spec.extra_axes({a: ds[a].values for a in axes}, options)
    if not extra:
        return spec.plot(ds, **options)
    panels = [
        (title, _rendered(spec.plot(ds.isel(cell=cells), **options), dpi))
        for title, cells in subsets(ds, extra)
    ]
    return tiled(panels, dpi)


def subsets(ds: xr.Dataset, axes: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """(title ``a = 1, b = x``, cell numbers) per combination of the values of ``axes`` that the
    cells of ``ds`` take, in ascending order of the values."""
    codes, levels = [], []
    for axis in axes:
        code, uniques = pd.factorize(ds[axis].values, sort=True, use_na_sentinel=False)
        codes.append(code)
        levels.append(uniques)
    keys = np.stack(codes, axis=1)
    out = []
    for key in np.unique(keys, axis=0):
        cells = np.flatnonzero((keys == key).all(axis=1))
        title = ", ".join(
            f"{a} = {value_text(levels[k][c])}"
            for k, (a, c) in enumerate(zip(axes, key, strict=True))
        )
        out.append((title, cells))
    return out


def _rendered(fig: plt.Figure, dpi: int) -> np.ndarray:
    """``fig`` as an RGBA image at ``dpi`` (saved as the figure job saves it), closed."""
    buffer = io.BytesIO()
    with mpl.rc_context(STYLE):
        fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    buffer.seek(0)
    return plt.imread(buffer, format="png")


def tiled(panels: Sequence[tuple[str, np.ndarray]], dpi: int) -> plt.Figure:
    """One figure holding the images of ``panels`` at their pixel size (``dpi``), on a grid
    about as wide as high, each under its title."""
    height = max(image.shape[0] for _, image in panels)
    width = max(image.shape[1] for _, image in panels)
    title = TITLE_SPACE * TITLE_SIZE / 72 * dpi  # pixels
    n = len(panels)
    cols = min(n, max(1, math.ceil(math.sqrt(n * height / width))))
    rows = math.ceil(n / cols)
    cell_w, cell_h = width, height + title
    total_w, total_h = cols * cell_w, rows * cell_h
    fig = plt.figure(figsize=(total_w / dpi, total_h / dpi), dpi=dpi)
    for k, (text, image) in enumerate(panels):
        row, col = divmod(k, cols)
        h, w = image.shape[:2]
        left = (col * cell_w + (cell_w - w) / 2) / total_w
        top = 1 - (row * cell_h + title) / total_h
        ax = fig.add_axes((left, top - h / total_h, w / total_w, h / total_h))
        ax.imshow(image, interpolation="none")
        ax.set_axis_off()
        fig.text((col + 0.5) / cols, 1 - (row * cell_h + 0.25 * title) / total_h, text,
                 ha="center", va="top", fontsize=TITLE_SIZE, fontweight="bold")  # fmt: skip
    return fig
