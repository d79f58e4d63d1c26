"""Dataset conventions: canonical number format, variable attributes, atomic writes, merging.

See docs/design.md: one job writes one netCDF file, written under a temporary name in the same
folder and renamed, so that an interrupted job never leaves a file a rerun would trust. Sweep
coordinates come from parameter values; a merged dataset indexes its cells along one ``cell``
dimension with one coordinate per sweep axis (:func:`stack_cells`), and :func:`open_sweep` gives
its gridded view.

Every file follows the CF conventions 1.11 (``compliance-checker --test cf:1.11``, the judge of
tests/test_cf_compliance.py): :func:`write_atomic` stores string-valued dimension coordinates as
label variables and keeps ``_FillValue`` off coordinate variables (:func:`to_cf`), and sets the
global ``Conventions``, ``title`` and ``history`` where the caller gave none; :func:`load`
(and :func:`load_all`, :func:`open_sweep`) restores the labels (:func:`from_cf`).
"""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
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


CONVENTIONS = "CF-1.11"
#: suffix of the label variable a string-valued dimension coordinate is stored as (CF 1.11 Sec. 6.1)
LABEL = "_label"
#: environment variable holding the command of the run (set by the Snakefile) for ``history``
COMMAND_ENV = "WEIGHTDYN_COMMAND"


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


def history_line(rule: str | None = None, command: str | None = None) -> str:
    """One entry of the CF ``history`` attribute: UTC time, package version and git revision, the
    rule that wrote the file and the command of the run (default: the environment variable
    ``WEIGHTDYN_COMMAND``, which the Snakefile sets to its own command line, else this
    process's command line)."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = command or os.environ.get(COMMAND_ENV) or shlex.join(sys.argv)
    revision = git_revision(Path(__file__).resolve().parent)
    rule_text = f" rule {rule}" if rule else ""
    return f"{stamp} weightdyn {weightdyn.__version__} ({revision}){rule_text}: {command}"


def provenance(
    cell: Mapping[str, object],
    *,
    title: str | None = None,
    source: str | None = None,
    history: str | None = None,
) -> dict[str, str]:
    """Dataset attributes recording the cell parameters, package version and git revision, and
    the CF global attributes (``Conventions``; ``title``, ``source``, ``history`` if given)."""
    out = {f"cell_{key}": str(value) for key, value in cell.items()}
    out["Conventions"] = CONVENTIONS
    given = {"title": title, "source": source, "history": history}
    out.update({key: value for key, value in given.items() if value})
    out["weightdyn_version"] = weightdyn.__version__
    out["git_revision"] = git_revision(Path(__file__).resolve().parent)
    return out


def to_cf(ds: xr.Dataset, title: str = "weightdyn dataset") -> xr.Dataset:
    """``ds`` as CF 1.11 wants it on disk (values unchanged).

    A string-valued dimension coordinate ``d`` becomes the auxiliary (label) coordinate
    ``d_label`` along ``d``: CF coordinate variables are numeric and monotonic (CF 1.11 Sec. 5,
    6.1). ``Conventions``, ``title`` and ``history`` are set where ``ds`` has none.
    """
    labels = [n for n, v in ds.coords.items() if n in ds.dims and v.dtype.kind in "OUS"]
    clash = [f"{n}{LABEL}" for n in labels if f"{n}{LABEL}" in ds.variables]
    if clash:
        raise ValueError(f"to_cf: {clash} would shadow the label of a string coordinate")
    out = ds.copy(deep=False)
    for name in labels:
        var = out[name].variable
        out = out.drop_vars(name).assign_coords({f"{name}{LABEL}": var})
    out.attrs = {"Conventions": None, "title": None, "history": None, **ds.attrs}
    for key, default in (("Conventions", CONVENTIONS), ("title", title), ("history", None)):
        value = out.attrs[key]
        if value is None or (isinstance(value, str) and not value.strip()):
            out.attrs[key] = default if key != "history" else history_line()
    return out


def from_cf(ds: xr.Dataset) -> xr.Dataset:
    """The inverse of :func:`to_cf`: each label ``d_label`` along ``d`` is the index ``d`` again."""
    for name in [str(n) for n in ds.variables if str(n).endswith(LABEL)]:
        dim, var = name.removesuffix(LABEL), ds.variables[name]
        if var.dims == (dim,) and dim not in ds.variables and var.dtype.kind in "OUS":
            ds = ds.drop_vars(name).assign_coords({dim: var})
    return ds


def cf_encoding(ds: xr.Dataset) -> dict[str, dict[str, object]]:
    """netCDF encoding without ``_FillValue`` on coordinates (CF 1.11 Sec. 2.5.1 forbids it on
    coordinate variables; an auxiliary coordinate keeps it only if it has missing values)."""
    out: dict[str, dict[str, object]] = {}
    for name, var in ds.coords.items():
        missing = var.dtype.kind in "fc" and np.isnan(var.values).any()
        if missing and name not in ds.dims:
            continue
        out[str(name)] = {"_FillValue": None}
    return out


def write_atomic(ds: xr.Dataset | xr.DataTree, path: str | os.PathLike) -> None:
    """Write ``ds`` (a dataset or a tree of groups) to netCDF at ``path`` via a temporary file in
    the same folder and a rename; a dataset in CF form (:func:`to_cf`, :func:`cf_encoding`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    if isinstance(ds, xr.Dataset):
        ds = to_cf(ds, title=f"weightdyn {path.stem}")
        encoding = cf_encoding(ds)
    else:
        encoding = {n.path: cf_encoding(n.to_dataset(inherit=False)) for n in ds.subtree}
    try:
        ds.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
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
    """Give a one-cell dataset a length-1 dimension for each sweep axis in ``dims``.

    The outer-product layout this builds is what :func:`stack_cells` replaces; it stays for
    ``benchmarks/merge_scaling.py``, which measures the two side by side.
    """
    return ds.expand_dims({dim: [cell[dim]] for dim in dims})


def merge_cells(
    cells: Iterable[xr.Dataset], attrs_out: Mapping[str, str] | None = None
) -> xr.Dataset:
    """Outer-merge one-cell datasets (see :func:`expand_cell`) into one gridded dataset."""
    merged = xr.merge(
        list(cells), join="outer", compat="no_conflicts", combine_attrs="drop_conflicts"
    )
    if attrs_out is not None:
        merged.attrs = dict(attrs_out)
    return merged


def _fill_value(dtype: np.dtype) -> object:
    if dtype.kind in "US":
        return ""
    if dtype.kind == "O":
        return ""
    return np.nan


def _padded(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` padded at the end of every axis to ``shape`` (NaN, or "" for strings)."""
    if values.shape == shape:
        return values
    fill = _fill_value(values.dtype)
    dtype = values.dtype if values.dtype.kind in "fcOUS" else np.float64
    out = np.full(shape, fill, dtype=dtype)
    out[tuple(slice(0, n) for n in values.shape)] = values
    return out


def stack_cells(
    datasets: Sequence[xr.Dataset],
    coords: Mapping[str, tuple[Sequence[object], Mapping[str, str]]],
    attrs_out: Mapping[str, str] | None = None,
) -> xr.Dataset:
    """One-cell datasets stacked along a ``cell`` dimension (docs/design.md: sparse merges).

    Every variable gains a leading ``cell`` dimension; other dimensions are padded at the end to
    their largest length over the cells (NaN, "" for strings), so memory grows with the number of
    cells times the largest cell, never with the product of the axes' values. A variable a cell
    lacks is NaN there. A dimension coordinate (``mode``, ``t``) stays a coordinate if every
    cell's values are the start of the longest cell's (``mode`` = 0 .. N-1); otherwise it
    becomes the variable ``<dim>_values`` with dims
    ``(cell, <dim>)``. ``coords`` gives the per-cell coordinates (one value per dataset, with
    their attributes), e.g. one per sweep axis.
    """
    n = len(datasets)
    if n == 0:
        raise ValueError("stack_cells: no cells to stack")
    sizes: dict[str, int] = {}
    for ds in datasets:
        for dim, size in ds.sizes.items():
            sizes[dim] = max(sizes.get(dim, 0), size)
    index_names = {name for ds in datasets for name in ds.indexes}
    variables: dict[str, tuple[tuple[str, ...], dict]] = {}
    for ds in datasets:
        for name, var in ds.variables.items():
            if name not in variables and name not in index_names:
                variables[name] = (var.dims, dict(var.attrs))
    out_vars: dict[str, tuple] = {}
    for name, (dims, attrs_) in variables.items():
        shape = tuple(sizes[d] for d in dims)
        stacked = [
            _padded(ds.variables[name].values, shape)
            if name in ds.variables and ds.variables[name].dims == dims
            else np.full(shape, np.nan)
            for ds in datasets
        ]
        out_vars[name] = (("cell", *dims), _common_stack(stacked), attrs_)
    out_coords: dict[str, tuple] = {}
    for dim in sorted(index_names):
        first = next(ds for ds in datasets if dim in ds.indexes)
        values = [ds[dim].values if dim in ds.indexes else None for ds in datasets]
        attrs_ = dict(first[dim].attrs)
        longest = max((v for v in values if v is not None), key=len)
        if all(v is not None and np.array_equal(v, longest[: len(v)]) for v in values):
            out_coords[dim] = ((dim,), longest, attrs_)  # e.g. mode = 0 .. N-1 of each cell
        else:
            shape = (sizes[dim],)
            filled = [
                _padded(v, shape) if v is not None else np.full(shape, np.nan) for v in values
            ]
            out_vars[f"{dim}_values"] = (("cell", dim), _common_stack(filled), attrs_)
    for name, (values, attrs_) in coords.items():
        if len(values) != n:
            raise ValueError(f"stack_cells: coordinate {name!r} has {len(values)} values for {n}")
        out_coords[name] = (("cell",), np.asarray(list(values)), dict(attrs_))
    merged = xr.Dataset(
        {k: xr.Variable(*v) for k, v in out_vars.items()},
        coords={k: xr.Variable(*v) for k, v in out_coords.items()},
    )
    merged.attrs = dict(attrs_out or {})
    return merged


def _common_stack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Stack arrays that may differ in dtype (an int variable NaN-padded in one cell is float)."""
    kinds = {a.dtype.kind for a in arrays}
    if kinds & set("OUS"):
        return np.stack([a.astype(object) if a.dtype.kind != "O" else a for a in arrays]).astype(
            str
        )
    return np.stack(arrays)


def _codes(values: np.ndarray) -> np.ndarray:
    """Integer codes of the distinct values of one per-cell coordinate (NaN and "" are values)."""
    return pd.factorize(pd.Index(values, tupleize_cols=False), use_na_sentinel=False)[0]


def _key(by: Sequence[np.ndarray], n: int) -> np.ndarray:
    """One integer per cell for the per-cell codes ``by`` jointly (equal iff all are equal)."""
    if not by:
        return np.zeros(n, dtype=np.int64)
    return np.ravel_multi_index(list(by), [int(c.max()) + 1 for c in by])


def _determines(by: Sequence[np.ndarray], target: np.ndarray) -> bool:
    """Whether the per-cell codes ``by`` (jointly) fix the per-cell codes ``target``."""
    key = _key(by, target.size)
    pairs = key * (int(target.max()) + 1) + target
    return np.unique(pairs).size == np.unique(key).size


def grid_axes(values: Mapping[str, np.ndarray]) -> tuple[list[str], dict[str, list[str]]]:
    """The independent axes of a set of cells and what fixes each derived one.

    ``values`` maps each axis to its per-cell values (same order). Among the axes that take
    several values, the independent ones are the set with the fewest grid points (product of
    their numbers of values) that fixes every other varying axis among the cells and tells the
    cells apart (first in ``values`` order on a tie); the cells P = p_over_n N of a sweep of N and
    p_over_n give the grid (N, p_over_n), P being derived. Each derived axis maps to the fewest
    independent axes that fix it. ValueError if no set tells the cells apart.
    """
    codes = {a: _codes(np.asarray(v)) for a, v in values.items()}
    varying = [a for a, c in codes.items() if np.unique(c).size > 1]
    n = len(next(iter(codes.values()), []))
    best: tuple[int, list[str]] | None = None
    for size in range(len(varying) + 1):
        for subset in itertools.combinations(varying, size):
            by = [codes[a] for a in subset]
            if np.unique(_key(by, n)).size < n:  # the cells are not told apart
                continue
            if all(_determines(by, codes[a]) for a in varying if a not in subset):
                points = int(np.prod([np.unique(codes[a]).size for a in subset]))
                if best is None or points < best[0]:
                    best = (points, list(subset))
    if best is None:
        raise ValueError(f"the cells are not told apart by their axes {list(values)}")
    independent = best[1]
    derived = {}
    for axis in (a for a in varying if a not in independent):
        for size in range(1, len(independent) + 1):
            fits = [
                list(s)
                for s in itertools.combinations(independent, size)
                if _determines([codes[a] for a in s], codes[axis])
            ]
            if fits:
                derived[axis] = fits[0]
                break
    return independent, derived


def open_sweep(path: str | os.PathLike, grid: bool = False) -> xr.Dataset:
    """A merged sweep (``results/<sweep>.nc``) with its ``cell`` dimension indexed by a pandas
    MultiIndex over its independent axes (:func:`grid_axes`); ``grid=True`` unstacks it into one
    dimension per independent axis (the outer-product view: NaN where the sweep has no cell).

    Every axis of the sweep stays readable as ``ds[axis]``: an axis with one value is a
    coordinate along ``cell``; an axis fixed by others among the cells (P when N and p_over_n
    vary) is a non-index coordinate, on the grid along the axes that fix it. A sweep of one cell
    has no grid dimension.
    """
    ds = load(path)
    axes = [a for a in ds.attrs.get("sweep_axes", "").split() if a in ds.coords]
    independent, derived = grid_axes({a: ds[a].values for a in axes})
    if not independent:
        return ds.isel(cell=0) if grid else ds  # one cell: a grid of no dimension
    if grid:
        constant = {a: [] for a in axes if a not in independent and a not in derived}
        return _grid(ds, independent, {**derived, **constant})
    index = pd.MultiIndex.from_arrays([ds[a].values for a in independent], names=independent)
    return ds.drop_vars(independent).assign_coords(
        xr.Coordinates.from_pandas_multiindex(index, "cell")
    )


def _grid(
    ds: xr.Dataset, independent: Sequence[str], derived: Mapping[str, list[str]]
) -> xr.Dataset:
    """``ds`` (cells along ``cell``) on the grid of the ``independent`` axes: one dimension per
    axis, its values sorted (a missing value, NaN or "", is a value of its own, last), NaN (or
    "") where no cell is; each ``derived`` axis along the axes that fix it (none: a scalar)."""
    levels, codes = {}, []
    for axis in independent:
        code, levels[axis] = pd.factorize(ds[axis].values, sort=True, use_na_sentinel=False)
        codes.append(code)
    shape = tuple(len(levels[a]) for a in independent)
    where = np.full(int(np.prod(shape)), -1)
    where[np.ravel_multi_index(codes, shape)] = np.arange(ds.sizes["cell"])
    variables = {}
    for name, var in ds.drop_vars(independent).variables.items():
        if "cell" not in var.dims:
            variables[name] = var
            continue
        dims = list(derived.get(name, independent))
        take = _points(where, shape, independent, dims)
        values = _on_points(var.transpose("cell", ...).values, take)
        variables[name] = xr.Variable((*dims, *(d for d in var.dims if d != "cell")), values,
                                      var.attrs)  # fmt: skip
    out = xr.Dataset(
        {n: v for n, v in variables.items() if n in ds.data_vars},
        coords={n: v for n, v in variables.items() if n in ds.coords},
        attrs=ds.attrs,
    )
    return out.assign_coords({a: (a, np.asarray(levels[a]), ds[a].attrs) for a in independent})


def _points(
    where: np.ndarray, shape: tuple[int, ...], independent: Sequence[str], dims: Sequence[str]
) -> np.ndarray:
    """The cell at each point of the grid over ``dims`` (a subset of ``independent``; -1 where
    none): ``where`` holds it for the full grid, and a subset takes any cell along the rest."""
    full = where.reshape(shape)
    rest = tuple(k for k, a in enumerate(independent) if a not in dims)
    return full.max(axis=rest) if rest else full


def _on_points(values: np.ndarray, take: np.ndarray) -> np.ndarray:
    """``values`` (cells first) at the grid points ``take`` (cell numbers, -1: NaN or "")."""
    out = values[np.where(take >= 0, take, 0)]
    missing = take < 0
    if not missing.any():
        return out
    dtype = out.dtype if out.dtype.kind in "fcOUS" else np.float64
    out = out.astype(dtype)
    out[missing] = _fill_value(dtype)
    return out


def sweep_attrs(
    experiment: object,
    sweep: str,
    settings: Mapping[str, object],
    axes: Sequence[object],
    history: str | None = None,
) -> dict[str, str]:
    """Global attributes of a merged sweep: CF conventions, title, the experiment and its source,
    history (default :func:`history_line` of rule ``merge``), the axes (names, for
    :func:`open_sweep`), every shared setting, version and git revision."""
    out = {
        "Conventions": CONVENTIONS,
        "title": f"weightdyn sweep {sweep}: {experiment.title}",
        "source": experiment.source,
        "history": history or history_line("merge"),
        "experiment": experiment.name,
        "sweep": sweep,
        "sweep_axes": " ".join(a.name for a in axes),
        "weightdyn_version": weightdyn.__version__,
        "git_revision": git_revision(Path(__file__).resolve().parent),
    }
    out.update({f"setting_{key}": str(value) for key, value in settings.items()})
    return out


def merge_sweep(
    experiment: object,
    sweep: str,
    datasets: Sequence[xr.Dataset],
    cells: Sequence[Mapping[str, object]],
    ids: Sequence[str],
    settings: Mapping[str, object],
    history: str | None = None,
) -> xr.Dataset:
    """The merged dataset of one sweep (rule merge): its cell datasets stacked along ``cell``
    (:func:`stack_cells`) with one coordinate per axis that any cell gives (``cells``: the cells'
    parameter mappings, in the order of ``datasets``), ``cell_id`` (``ids``) and the sweep's
    attributes (:func:`sweep_attrs`)."""
    axes = [p for p in experiment.axes if any(c.get(p.name) is not None for c in cells)]
    coords = {p.name: ([c.get(p.name) for c in cells], p.attrs()) for p in axes}
    coords["cell_id"] = (list(ids), {"long_name": "cell identifier", "units": "1"})
    attrs = sweep_attrs(experiment, sweep, settings, axes, history=history)
    return stack_cells(datasets, coords, attrs)


def load(path: str | os.PathLike) -> xr.Dataset:
    """The netCDF file at ``path``, loaded into memory and closed, labels restored
    (:func:`from_cf`)."""
    with xr.open_dataset(path) as ds:
        return from_cf(ds.load())


def load_all(paths: Iterable[str | os.PathLike]) -> list[xr.Dataset]:
    """The netCDF files at ``paths``, each loaded by :func:`load`."""
    return [load(path) for path in paths]
