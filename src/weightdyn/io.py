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


#: suffix of the per-cell length of a dimension whose length differs between cells (the merge)
LENGTH = "_length"
#: suffix of the per-cell values of a dimension coordinate that differs between cells (the merge)
VALUES = "_values"
#: per-cell names of the variables a cell lacks (the merge; only where the cells' sets differ)
ABSENT = "absent_variables"
#: attribute of a merged variable that is a (non-index) coordinate of the cells
CELL_COORDINATE = "cell_coordinate"
#: ``source`` of the padding record's variables
RECORD = "the merge of the sweep's cells (weightdyn.io.stack_cells)"
#: attribute of a merged variable whose padding changed the cells' common dtype (int8 -> float64)
CELL_DTYPE = "cell_dtype"


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
    becomes the variable ``<dim>_values`` with dims ``(cell, <dim>)``. A cell's other
    coordinates become variables with the attribute ``cell_coordinate``. ``coords`` gives the
    per-cell coordinates (one value per dataset, with their attributes), e.g. one per sweep
    axis.

    The padding is recorded (:func:`padding_record`) so that :func:`cell_dataset` gives each
    cell back as it was: ``<dim>_length`` per ragged dimension and ``absent_variables``
    (coordinates along ``cell``), and the ``cell_dtype`` attribute of a variable the padding
    turned from int (or bool) to float.
    """
    n = len(datasets)
    if n == 0:
        raise ValueError("stack_cells: no cells to stack")
    sizes: dict[str, int] = {}
    for ds in datasets:
        for dim, size in ds.sizes.items():
            sizes[dim] = max(sizes.get(dim, 0), size)
    index_names = {name for ds in datasets for name in ds.indexes}
    variables: dict[str, xr.Variable] = {}
    for ds in datasets:
        for name, var in ds.variables.items():
            if name not in variables and name not in index_names:
                variables[name] = var
    out_vars: dict[str, xr.Variable] = {}
    out_coords: dict[str, xr.Variable] = {}
    for name, first in variables.items():
        cells = [_same_dims(ds, name, first.dims) for ds in datasets]
        out_vars[name] = _stacked(cells, tuple(sizes[d] for d in first.dims), first)
        if any(name in ds.coords for ds in datasets):
            out_vars[name].attrs[CELL_COORDINATE] = "yes"
    for dim in sorted(index_names):
        values = [ds.variables[dim] if dim in ds.indexes else None for ds in datasets]
        first = next(v for v in values if v is not None)
        longest = max((v.values for v in values if v is not None), key=len)
        if all(v is not None and np.array_equal(v.values, longest[: v.size]) for v in values):
            out_coords[dim] = xr.Variable((dim,), longest, first.attrs)  # mode = 0 .. N-1
        else:
            out_vars[f"{dim}{VALUES}"] = _stacked(values, (sizes[dim],), first)
    record = padding_record(datasets, [*variables, *index_names], sizes)
    clash = sorted((set(record) | set(out_vars) - set(variables)) & set(variables))
    if clash:
        raise ValueError(f"stack_cells: the cells' variables {clash} clash with the merge's")
    out_coords.update(record)
    for name, (values, attrs_) in coords.items():
        if len(values) != n:
            raise ValueError(f"stack_cells: coordinate {name!r} has {len(values)} values for {n}")
        out_coords[name] = xr.Variable(("cell",), np.asarray(list(values)), dict(attrs_))
    return xr.Dataset(out_vars, coords=out_coords, attrs=dict(attrs_out or {}))


def _same_dims(ds: xr.Dataset, name: str, dims: tuple[str, ...]) -> xr.Variable | None:
    """The variable ``name`` of one cell (None if it lacks it); ValueError if its dimensions
    differ from ``dims`` (another cell's)."""
    var = ds.variables.get(name)
    if var is not None and var.dims != dims:
        raise ValueError(f"stack_cells: {name!r} has dimensions {var.dims} and {dims} in two cells")
    return var


def _stacked(
    cells: Sequence[xr.Variable | None], shape: tuple[int, ...], first: xr.Variable
) -> xr.Variable:
    """One variable of every cell (None: the cell lacks it, NaN) padded to ``shape`` and stacked
    along ``cell``, with ``first``'s dimensions and attributes and, where the padding changed
    the cells' common dtype, the ``cell_dtype`` attribute."""
    arrays = [_padded(v.values, shape) if v is not None else np.full(shape, np.nan) for v in cells]
    values = _common_stack(arrays)
    attrs_ = dict(first.attrs)
    dtypes = {v.dtype for v in cells if v is not None}
    (dtype,) = dtypes if len(dtypes) == 1 else (values.dtype,)
    if dtype != values.dtype and dtype.kind not in "OUS":
        attrs_[CELL_DTYPE] = str(dtype)
    return xr.Variable(("cell", *first.dims), values, attrs_)


def padding_record(
    datasets: Sequence[xr.Dataset], names: Iterable[str], sizes: Mapping[str, int]
) -> dict[str, xr.Variable]:
    """What :func:`stack_cells` pads, per cell (coordinates along ``cell``): ``<dim>_length``
    (int) for each dimension of ``sizes`` whose length differs between the cells (0 where a
    cell lacks it), and ``absent_variables`` (the space-separated ``names`` a cell lacks; ""
    for none) if some cell lacks one."""
    out = {}
    for dim in sizes:
        lengths = np.array([ds.sizes.get(dim, 0) for ds in datasets], dtype=np.int64)
        if np.unique(lengths).size > 1:
            long_name = f"length of dimension {dim} in each cell (the rest is padding)"
            out[f"{dim}{LENGTH}"] = xr.Variable(("cell",), lengths, attrs(long_name, "1", RECORD))
    absent = [" ".join(sorted(str(n) for n in names if n not in ds.variables)) for ds in datasets]
    if any(absent):
        long_name = "variables the cell does not have (NaN in the merge)"
        out[ABSENT] = xr.Variable(
            ("cell",), np.array(absent, dtype=str), attrs(long_name, "1", RECORD)
        )
    return out


def cell_dataset(ds: xr.Dataset, i: int) -> xr.Dataset:
    """Cell ``i`` of a merged dataset (:func:`stack_cells`) exactly as the cell wrote it: its
    variables with their dimensions, lengths, values and dtypes, its coordinates, and the
    per-cell coordinates of the merge (the sweep axes, ``cell_id``) as scalar coordinates; the
    padding record (:func:`padding_record`) is dropped. A dataset without a ``cell`` dimension
    is one cell (``i`` = 0) and comes back as it is."""
    if "cell" not in ds.dims:
        if i != 0:
            raise IndexError(f"cell_dataset: a dataset of one cell has no cell {i}")
        return ds
    cell = ds.isel(cell=i)
    lengths = {
        str(name).removesuffix(LENGTH): int(var.values)
        for name, var in cell.coords.items()
        if is_record(var) and name != ABSENT
    }
    for name in [str(n) for n in cell.data_vars if str(n).endswith(VALUES)]:
        dim = name.removesuffix(VALUES)
        if dim in ds.dims and dim not in ds.variables and cell[name].dims == (dim,):
            cell = cell.drop_vars(name).assign_coords({dim: cell[name].variable})
    absent = str(cell[ABSENT].values).split() if ABSENT in cell.coords else []
    record = [f"{dim}{LENGTH}" for dim in lengths] + ([ABSENT] if ABSENT in cell else [])
    cell = cell.drop_vars([*record, *(n for n in absent if n in cell.variables)])
    cell = cell.isel({dim: slice(0, n) for dim, n in lengths.items() if dim in cell.dims})
    return _typed(cell)


def _typed(cell: xr.Dataset) -> xr.Dataset:
    """One cell of a merge with the dtypes (``cell_dtype``) and coordinates
    (``cell_coordinate``) of the cell's variables restored and those attributes dropped."""
    marked = [n for n, v in cell.variables.items() if {CELL_DTYPE, CELL_COORDINATE} & set(v.attrs)]
    for name in marked:
        var = cell.variables[name]
        attrs_ = {k: v for k, v in var.attrs.items() if k not in (CELL_DTYPE, CELL_COORDINATE)}
        values = var.values.astype(var.attrs.get(CELL_DTYPE, var.dtype))
        restored = xr.Variable(var.dims, values, attrs_)
        if name in cell.coords or CELL_COORDINATE in var.attrs:
            cell = cell.drop_vars(name).assign_coords({name: restored})
        else:
            cell[name] = restored
    return cell


def is_record(var: xr.Variable | xr.DataArray) -> bool:
    """Whether ``var`` is part of a merge's padding record (:func:`padding_record`): a
    coordinate along ``cell`` that is no sweep axis."""
    return var.attrs.get("source") == RECORD


def cell_datasets(ds: xr.Dataset) -> list[xr.Dataset]:
    """Every cell of a merged dataset (:func:`cell_dataset`), in order; a dataset without a
    ``cell`` dimension is one cell."""
    return [cell_dataset(ds, i) for i in range(ds.sizes.get("cell", 1))]


def concat_cells(parts: Sequence[xr.Dataset]) -> xr.Dataset:
    """Merged datasets (:func:`stack_cells`) as one, their cells one after the other: every
    cell given back (:func:`cell_datasets`) and stacked again, so that the padding record
    holds for the whole; the per-cell coordinates (sweep axes, ``cell_id``) kept (a part
    without one: NaN, "" for strings), the attributes of the first part."""
    if len(parts) == 1:
        return parts[0]
    per_cell = (
        str(n)
        for p in parts
        for n, c in p.coords.items()
        if c.dims == ("cell",) and not is_record(c)
    )
    names = list(dict.fromkeys(per_cell))
    cells: list[xr.Dataset] = []
    values: dict[str, list[object]] = {n: [] for n in names}
    for part in parts:
        for cell in cell_datasets(part):
            cells.append(cell.drop_vars([n for n in names if n in cell.coords]))
            for n in names:
                values[n].append(cell[n].values.item() if n in cell.coords else None)
    coords = {}
    for n in names:
        given = np.asarray([v for v in values[n] if v is not None])
        fill = _fill_value(given.dtype)
        attrs_ = next(p[n].attrs for p in parts if n in p.coords)
        coords[n] = ([fill if v is None else v for v in values[n]], attrs_)
    return stack_cells(cells, coords, parts[0].attrs)


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
