"""weightdyn.open_sweep on every sweep of the shipped configs: one varying axis, none, several,
and axes fixed by others (P = p_over_n N). The sweeps cannot run here, so each cell is a tiny
fake dataset, merged by the merge rule's own code (weightdyn.io.merge_sweep)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import yaml

from weightdyn import experiments, io, open_sweep, sweep
from weightdyn.sweep import sorted_params

CONFIGS = Path(__file__).resolve().parents[1] / "config"


def _fake_cell(k: int) -> xr.Dataset:
    """A one-cell dataset: a scalar and a short spectrum, both marked with the cell's number."""
    return xr.Dataset(
        {
            "y": ((), float(k), {"long_name": "cell number", "units": "1"}),
            "spectrum": (("mode",), np.arange(3.0) + k, {"long_name": "spectrum", "units": "1"}),
        },
        coords={"mode": ("mode", np.arange(3), {"long_name": "mode index", "units": "1"})},
    )


def _merged(s: sweep.Sweep, path: Path) -> Path:
    exp = experiments.get(s.experiment)
    cells = [sorted_params(c.params) for c in s.cells]
    datasets = [_fake_cell(k) for k in range(len(cells))]
    ids = [c.id for c in s.cells]
    merged = io.merge_sweep(exp, s.name, datasets, cells, ids, s.settings, history="test")
    io.write_atomic(merged, path)
    return path


def _shipped_sweeps() -> list[tuple[str, sweep.Sweep]]:
    out = []
    for name in ("config.yaml", "paper.yaml", "test.yaml"):
        config = yaml.safe_load((CONFIGS / name).read_text())
        sweep.check_config(config)
        out += [(f"{name}:{s}", v) for s, v in sweep.expand_sweeps(config).items()]
    return out


SWEEPS = _shipped_sweeps()


def _same(a: object, b: object) -> bool:
    """Whether the stored axis value ``a`` is the cell's value ``b`` (None: NaN or "")."""
    if b is None:
        return a == "" or bool(np.isnan(a))
    if isinstance(b, int | float) and not isinstance(b, bool):
        return bool(np.isclose(float(a), b))
    return str(a) == str(b)


@pytest.mark.parametrize(("name", "s"), SWEEPS, ids=[n for n, _ in SWEEPS])
def test_every_shipped_sweep_opens_with_every_axis_and_a_dense_grid(
    name: str, s: sweep.Sweep, tmp_path: Path
) -> None:
    path = _merged(s, tmp_path / "sweep.nc")
    ds = open_sweep(path)
    n = len(s.cells)
    assert ds.sizes["cell"] == n
    axes = ds.attrs["sweep_axes"].split()
    for axis in axes:
        assert ds[axis].dims == ("cell",), axis
        cell_values = [s.cells[int(k)].params.get(axis) for k in ds["y"].values]
        assert all(_same(v, c) for v, c in zip(ds[axis].values, cell_values, strict=True)), axis
    varying = [a for a in axes if len({str(v) for v in ds[a].values}) > 1]
    grid = open_sweep(path, grid=True)
    dims = [d for d in grid["y"].dims]
    assert set(dims) <= set(varying)
    assert int(grid["y"].notnull().sum()) == n  # every cell once, none lost
    for dim in dims:
        other = [d for d in dims if d != dim]
        assert bool(grid["y"].notnull().any(other).all()), f"an all-NaN slice along {dim}"
        assert not _fixed_by(ds, dim, other), f"{dim} is fixed by {other}: a derived axis"
    if int(np.prod([grid.sizes[d] for d in dims])) == n:
        assert not grid["y"].isnull().any()  # a product sweep fills its grid
    for axis in set(varying) - set(dims):
        assert set(grid[axis].dims) <= set(dims), axis  # a derived axis: on the grid, no dim
    assert np.array_equal(grid["spectrum"].isel(mode=0).values, grid["y"].values, equal_nan=True)


def _fixed_by(ds: xr.Dataset, axis: str, others: list[str]) -> bool:
    """Whether the cells' values of ``others`` fix their value of ``axis``."""
    table = pd.DataFrame({a: [str(v) for v in ds[a].values] for a in [axis, *others]})
    if not others:
        return table[axis].nunique() <= 1
    return bool(table.groupby(others)[axis].nunique().max() <= 1)


def _by_name(name: str) -> sweep.Sweep:
    return dict(SWEEPS)[name]


def test_one_varying_axis_reads_and_grids(tmp_path: Path) -> None:
    s = _by_name("config.yaml:one_hidden")
    path = _merged(s, tmp_path / "one_hidden.nc")
    ds = open_sweep(path)
    lrs = sorted({c.params["lr"] for c in s.cells})
    assert sorted(ds["lr"].values.tolist()) == lrs
    grid = open_sweep(path, grid=True)
    assert grid["y"].dims == ("lr",) and grid["lr"].values.tolist() == lrs


def test_p_over_n_with_p_is_one_grid_dimension(tmp_path: Path) -> None:
    s = _by_name("test.yaml:fig4b")  # N = 10, p_over_n = 2, 4: P = 20, 40 varies with it
    grid = open_sweep(_merged(s, tmp_path / "fig4b.nc"), grid=True)
    assert len(grid["y"].dims) == 1 and not grid["y"].isnull().any()
    assert grid["P"].values.tolist() == [20, 40]
    assert grid["p_over_n"].values.tolist() == [2.0, 4.0]


def test_a_product_of_n_and_p_over_n_grids_on_the_swept_axes(tmp_path: Path) -> None:
    block = {"experiment": "single_layer", "N": [10, 20], "p_over_n": [2.0, 4.0]}
    s = sweep.expand_sweep("np", {**block, "batch_size": 5})
    grid = open_sweep(_merged(s, tmp_path / "np.nc"), grid=True)
    assert set(grid["y"].dims) == {"N", "p_over_n"} and not grid["y"].isnull().any()
    assert grid["P"].transpose("N", "p_over_n").values.tolist() == [[20, 40], [40, 80]]


def test_cells_no_axis_tells_apart_are_refused() -> None:
    with pytest.raises(ValueError, match="not told apart"):
        io.grid_axes({"lr": np.array([0.1, 0.1]), "seed": np.array([0, 0])})
