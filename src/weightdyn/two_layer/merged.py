"""Cells of a merged two-layer sweep: one trimmed dataset per cell, grouped by ``dynamics``.

A merged sweep (:func:`weightdyn.io.stack_cells`) holds its cells along ``cell`` with one
coordinate per axis; dimensions shared by cells of different sizes (``mode1``, ``mode2``,
``replica``, ``z_row``, ``trace_time``, ``lag``, ...) are padded with NaN, and coordinates whose
values differ between cells (``trace_time``, ``lag``) become ``<dim>_values`` variables.
:func:`cell_list` undoes both for each cell, so that figures and agreement rows see one cell as
:func:`weightdyn.two_layer.experiment.run_cell` wrote it, with its axis values as scalar
coordinates. :func:`dynamics_groups` pairs the cells that differ only in ``dynamics`` (the SGD
cell and its SGF twin: same data, same ``W^0``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = [
    "AXES", "cell_label", "cell_list", "dynamics_groups", "is_diverged", "one_cell", "value",
]  # fmt: skip

AXES = (
    "N_i", "N_h", "N_o", "P", "sigma_y2", "init", "init_scale", "lr", "batch_size", "sampling",
    "data_seed", "dynamics",
)  # fmt: skip
_DEFAULTS = {"dynamics": "sgd"}


def value(c: xr.Dataset, name: str) -> object:
    """Axis value of one cell: its scalar coordinate, else its attribute (a bare cell file)."""
    if name in c.coords:
        v = c.coords[name].values
        return v.item() if v.ndim == 0 else v.ravel()[0].item()
    return c.attrs.get(name, _DEFAULTS.get(name))


def is_diverged(c: xr.Dataset) -> bool:
    """Whether the chains of cell ``c`` diverged (its simulated variables are NaN)."""
    return "diverged" in c and int(np.nan_to_num(c["diverged"].values, nan=0)) == 1


def _count(mask: np.ndarray) -> int:
    """Length of the leading run of True (the unpadded part of a dimension)."""
    return int(np.argmin(mask)) if not mask.all() else mask.size


def _trimmed(c: xr.Dataset) -> xr.Dataset:
    """One cell without the NaN padding of a merge."""
    for dim in ("trace_time", "lag"):
        if f"{dim}_values" in c:
            var = c[f"{dim}_values"]
            c = c.drop_vars(var.name).assign_coords({dim: (dim, var.values, var.attrs)})
    N_i, N_h, N_o = (int(value(c, k)) for k in ("N_i", "N_h", "N_o"))
    sizes = {"mode1": N_h * N_i, "mode2": N_o * N_h, "z_row": N_o * (N_i + N_h),
             "z_col": N_o * (N_i + N_h)}  # fmt: skip
    if "trace_D2" in c and c.sizes.get("trace_time", 0):
        sizes["replica"] = _count(np.isfinite(c["trace_D2"].values).any(axis=1))
        sizes["trace_time"] = _count(np.isfinite(c["trace_D2"].values).any(axis=0))
    if "relax_rate" in c:
        sizes["relax_mode"] = _count(np.isfinite(c["relax_rate"].values))
        sizes["lag"] = _count(np.isfinite(c["relax_acf"].values).any(axis=0))
        if sizes["relax_mode"] == 0:
            c = c.drop_vars([v for v in c.data_vars if v.startswith("relax_")])
    c = c.isel({d: slice(0, n) for d, n in sizes.items() if d in c.dims})
    for dim in ("trace_time", "lag"):
        if dim in c.coords and c[dim].dtype.kind == "f" and np.isfinite(c[dim]).all():
            c = c.assign_coords({dim: c[dim].astype(np.int64)})
    return c


def cell_list(ds: xr.Dataset) -> list[xr.Dataset]:
    """Every cell of a merged dataset (or the one cell of a bare cell file), trimmed."""
    if "cell" not in ds.dims:
        return [_trimmed(ds)]
    return [_trimmed(ds.isel(cell=k)) for k in range(ds.sizes["cell"])]


def one_cell(ds: xr.Dataset) -> xr.Dataset:
    """The single cell of a per-cell view (ValueError naming the count otherwise)."""
    cells = cell_list(ds)
    if len(cells) != 1:
        raise ValueError(f"a per-cell two-layer figure needs one cell, got {len(cells)}")
    return cells[0]


def dynamics_groups(cells: list[xr.Dataset]) -> list[dict[str, xr.Dataset]]:
    """Cells grouped by every axis but ``dynamics``, in order of first appearance:
    ``[{"sgd": cell, "sgf": cell}, ...]`` (a group may lack either)."""
    groups: dict[tuple, dict[str, xr.Dataset]] = {}
    for c in cells:
        key = tuple(value(c, a) for a in AXES if a != "dynamics")
        groups.setdefault(key, {})[str(value(c, "dynamics"))] = c
    return list(groups.values())


def cell_label(c: xr.Dataset, cells: list[xr.Dataset], skip: tuple[str, ...] = ()) -> str:
    """``axis=value, ...`` for the axes in which ``c`` differs from the other ``cells``."""
    varying = [a for a in AXES if a not in skip and len({str(value(x, a)) for x in cells}) > 1]
    return ", ".join(f"{a}={value(c, a)}" for a in varying)
