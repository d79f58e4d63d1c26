"""Dataset conventions: canonical number format, variable attributes, atomic writes, merging.

See DESIGN.md: one job writes one netCDF file, written under a temporary name in the same folder and
renamed, so that an interrupted job never leaves a file a rerun would trust. Sweep coordinates come
from parameter values; the merged dataset has one dimension per sweep axis (plus ``mode``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import xarray as xr

import weightdyn


def format_number(value: object) -> str:
    """Canonical text of a number for paths and seeds: 0.1, 0.10 and 1e-1 all give ``0.1``.

    Integral values print without a decimal point (``2.0`` -> ``2``), others in positional notation
    with the shortest round-trip digits.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise TypeError(f"format_number expects a number, got {value!r}")
    number = float(value)
    if not np.isfinite(number):
        raise ValueError(f"format_number expects a finite number, got {value!r}")
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return np.format_float_positional(number, trim="-", unique=True)


def attrs(long_name: str, units: str, source: str) -> dict[str, str]:
    """The attribute set every data variable carries (long_name, units, paper equation)."""
    return {"long_name": long_name, "units": units, "source": source}


def git_revision(path: str | os.PathLike | None = None) -> str:
    """The git revision of the working tree at ``path`` (``unknown`` outside a repository)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=path,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def provenance(cell: Mapping[str, object]) -> dict[str, str]:
    """Dataset attributes recording the cell parameters, package version and git revision."""
    out = {f"cell_{key}": str(value) for key, value in cell.items()}
    out["weightdyn_version"] = weightdyn.__version__
    out["git_revision"] = git_revision(Path(__file__).resolve().parent)
    return out


def write_atomic(ds: xr.Dataset | xr.DataTree, path: str | os.PathLike) -> None:
    """Write ``ds`` (a dataset or a tree of groups) to netCDF at ``path`` via a temporary file in
    the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        ds.to_netcdf(tmp, engine="netcdf4")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(text: str, path: str | os.PathLike) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def expand_cell(ds: xr.Dataset, cell: Mapping[str, object], dims: Iterable[str]) -> xr.Dataset:
    """Give a one-cell dataset a length-1 dimension for each sweep axis in ``dims``."""
    return ds.expand_dims({dim: [cell[dim]] for dim in dims})


def merge_cells(
    cells: Iterable[xr.Dataset], attrs_out: Mapping[str, str] | None = None
) -> xr.Dataset:
    """Outer-merge one-cell datasets into one dataset; missing cells and modes are NaN.

    Dataset attributes become ``attrs_out`` if given, else those the cells agree on.
    """
    merged = xr.merge(
        list(cells), join="outer", compat="no_conflicts", combine_attrs="drop_conflicts"
    )
    if attrs_out is not None:
        merged.attrs = dict(attrs_out)
    return merged
