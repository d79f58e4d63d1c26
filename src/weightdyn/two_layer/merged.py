"""Cells of a merged two-layer sweep, grouped by ``dynamics``.

A merged sweep (:func:`weightdyn.io.stack_cells`) holds its cells along ``cell`` with one
coordinate per axis; :func:`weightdyn.io.cell_datasets` gives each cell back as
:func:`weightdyn.two_layer.experiment.run_cell` wrote it, with its axis values as scalar
coordinates. :func:`dynamics_groups` pairs the cells that differ only in ``dynamics`` (the SGD
cell and its SGF twin: same data, same ``W^0``); the axes are the experiment's declared ones.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from weightdyn import experiments, io

__all__ = ["axes", "cell_label", "dynamics_groups", "is_diverged", "one_cell", "value"]

_DEFAULTS = {"dynamics": "sgd"}


def axes() -> tuple[str, ...]:
    """The sweep axes of the ``two_layer`` experiment, in the order it declares them."""
    return tuple(p.name for p in experiments.get("two_layer").axes)


def value(c: xr.Dataset, name: str) -> object:
    """Axis value of one cell: its scalar coordinate, else its attribute (a bare cell file)."""
    if name in c.coords:
        v = c.coords[name].values
        return v.item() if v.ndim == 0 else v.ravel()[0].item()
    return c.attrs.get(name, _DEFAULTS.get(name))


def is_diverged(c: xr.Dataset) -> bool:
    """Whether the chains of cell ``c`` diverged (its simulated variables are NaN)."""
    return "diverged" in c and int(np.nan_to_num(c["diverged"].values, nan=0)) == 1


def one_cell(ds: xr.Dataset) -> xr.Dataset:
    """The single cell of a per-cell view (ValueError naming the count otherwise)."""
    cells = io.cell_datasets(ds)
    if len(cells) != 1:
        raise ValueError(f"a per-cell two-layer figure needs one cell, got {len(cells)}")
    return cells[0]


def dynamics_groups(cells: list[xr.Dataset]) -> list[dict[str, xr.Dataset]]:
    """Cells grouped by every axis but ``dynamics``, in order of first appearance:
    ``[{"sgd": cell, "sgf": cell}, ...]`` (a group may lack either)."""
    groups: dict[tuple, dict[str, xr.Dataset]] = {}
    for c in cells:
        key = tuple(value(c, a) for a in axes() if a != "dynamics")
        groups.setdefault(key, {})[str(value(c, "dynamics"))] = c
    return list(groups.values())


def cell_label(c: xr.Dataset, cells: list[xr.Dataset], skip: tuple[str, ...] = ()) -> str:
    """``axis=value, ...`` for the axes in which ``c`` differs from the other ``cells``."""
    varying = [a for a in axes() if a not in skip and len({str(value(x, a)) for x in cells}) > 1]
    return ", ".join(f"{a}={value(c, a)}" for a in varying)
