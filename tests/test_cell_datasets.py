"""The merge gives its cells back: weightdyn.io.stack_cells records what it pads and
weightdyn.io.cell_datasets undoes it, exactly, through netCDF with the CF encoding of the
results (io.write_atomic, io.load) and in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from weightdyn import io

LR = (0.05, 0.1, 0.2)


def _cell(k: int, modes: int, records: int, extra: bool) -> xr.Dataset:
    """A cell with ``modes`` modes and ``records`` records of t = lr * step (its own times):
    float, int, int8, string and scalar variables, a non-index coordinate (``step``), a last
    mode that is NaN in every float variable (the cell's own NaN, no padding) and, if
    ``extra``, a variable that another cell lacks."""
    a = lambda name: {"long_name": name, "units": "1"}  # noqa: E731
    step = np.arange(records, dtype=np.int64) * (k + 1)
    eig = np.linspace(1.0, 2.0, modes) + k
    eig[-1] = np.nan
    ds = xr.Dataset(
        {
            "eig": (("mode",), eig, a("eigenvalue")),
            "loss": (("t",), np.exp(-0.1 * step) / 3, a("loss")),
            "count": (("mode",), np.arange(modes, dtype=np.int64) * 7 + k, a("count")),
            "flag": (("t",), (step % 2).astype(np.int8), a("flag")),
            "label": (("mode",), np.array([f"m{k}{j}" for j in range(modes)]), a("label")),
            "status": ((), np.int64(k), a("status")),
            "z": (("mode", "t"), np.outer(eig, step), a("product")),
        },
        coords={
            "mode": ("mode", np.arange(modes), a("mode")),
            "t": ("t", LR[k] * step, a("time")),
            "step": ("t", step, a("step")),
        },
    )
    if extra:
        ds["extra"] = (("mode",), eig * 2, a("only some cells"))
    return ds


def _cells(tmp_path: Path | None) -> list[xr.Dataset]:
    """Three cells of different mode and record counts, each written and read back if
    ``tmp_path`` is given (as the merge rule reads them)."""
    cells = [_cell(0, 3, 5, True), _cell(1, 2, 7, True), _cell(2, 3, 4, False)]
    if tmp_path is None:
        return cells
    for k, ds in enumerate(cells):
        io.write_atomic(ds, tmp_path / f"cell{k}.nc")
    return io.load_all(tmp_path / f"cell{k}.nc" for k in range(len(cells)))


def _merged(cells: list[xr.Dataset], tmp_path: Path | None) -> xr.Dataset:
    coords = {
        "lr": (list(LR), {"long_name": "learning rate", "units": "1"}),
        "cell_id": (["a", "b", "c"], {"long_name": "cell identifier", "units": "1"}),
    }
    merged = io.stack_cells(cells, coords, {"sweep_axes": "lr"})
    if tmp_path is None:
        return merged
    io.write_atomic(merged, tmp_path / "merged.nc")
    return io.load(tmp_path / "merged.nc")


@pytest.mark.parametrize("on_disk", [True, False], ids=["netcdf", "memory"])
def test_cells_come_back_exactly(tmp_path: Path, on_disk: bool) -> None:
    """Every variable and coordinate of every cell, values, dims, dtypes and attributes, with
    the sweep axis and cell_id as scalar coordinates; only the global attributes are the
    merged file's."""
    cells = _cells(tmp_path if on_disk else None)
    merged = _merged(cells, tmp_path if on_disk else None)
    back = io.cell_datasets(merged)
    assert len(back) == len(cells)
    for k, (cell, got) in enumerate(zip(cells, back, strict=True)):
        assert got["lr"].ndim == 0 and float(got["lr"]) == LR[k]
        assert str(got["cell_id"].values) == "abc"[k]
        assert got.attrs == merged.attrs
        got = got.drop_vars(["lr", "cell_id"])
        got.attrs = cell.attrs
        xr.testing.assert_identical(got, cell)
        for name, var in cell.variables.items():
            assert got[name].dtype == var.dtype or var.dtype.kind in "OUS", name
        assert np.isnan(got["eig"].values[-1])  # the cell's own NaN is no padding


def test_merge_records_its_padding(tmp_path: Path) -> None:
    """The merged file: lengths of the ragged dimensions, the absent variables, the dtype the
    padding changed, the differing times as ``t_values``; the rest as before."""
    merged = _merged(_cells(tmp_path), tmp_path)
    assert merged["mode_length"].values.tolist() == [3, 2, 3]
    assert merged["t_length"].values.tolist() == [5, 7, 4]
    assert merged["t_length"].dtype == np.int64
    assert merged["t_length"].attrs["units"] == "1"
    assert merged[io.ABSENT].values.tolist() == ["", "", "extra"]
    assert merged["count"].dtype == np.float64 and merged["count"].attrs["cell_dtype"] == "int64"
    assert merged["flag"].attrs["cell_dtype"] == "int8"
    assert "cell_dtype" not in merged["eig"].attrs
    assert merged["status"].dtype == np.int64  # never padded: kept
    assert "t" not in merged.variables and merged["t_values"].dims == ("cell", "t")
    assert merged["mode"].values.tolist() == [0, 1, 2]
    assert "step" in merged.data_vars and merged["step"].attrs["cell_coordinate"] == "yes"
    assert "mode_length" in merged.coords and io.is_record(merged["mode_length"])
    assert np.isnan(merged["count"].values[1, 2]) and merged["label"].values[1, 2] == ""


def test_equal_cells_add_no_record() -> None:
    """Cells of one shape and one set of variables: the merge adds no length or absence."""
    cells = [_cell(0, 3, 5, True), _cell(1, 3, 5, True)]
    merged = io.stack_cells(cells, {})
    assert not [n for n in merged.variables if n.endswith("_length") or n == io.ABSENT]
    assert "cell_dtype" not in merged["count"].attrs and merged["count"].dtype == np.int64
    xr.testing.assert_identical(io.cell_dataset(merged, 1), cells[1])


def test_bare_cell_is_one_cell() -> None:
    cell = _cell(0, 3, 5, True)
    assert io.cell_datasets(cell) == [cell]
    with pytest.raises(IndexError):
        io.cell_dataset(cell, 1)


def test_clash_with_the_record_is_refused() -> None:
    """A cell variable named like the merge's record would be read as padding: refused."""
    cells = [_cell(0, 3, 5, True), _cell(1, 2, 5, True)]
    cells[0]["mode_length"] = ((), 3)
    with pytest.raises(ValueError, match="mode_length"):
        io.stack_cells(cells, {})


def test_views_join_merged_sweeps_cell_by_cell(tmp_path: Path) -> None:
    """Two merged sweeps (one of equal cells, so without a record; one ragged) joined as a view
    joins them: every cell comes back, with its sweep's per-cell coordinates."""
    cells = _cells(tmp_path)
    first = io.stack_cells(cells[:1], {"lr": ([LR[0]], {"units": "1"})}, {"sweep": "a"})
    coords = {"lr": (list(LR[1:]), {"units": "1"}), "cell_id": (["b", "c"], {})}
    second = io.stack_cells(cells[1:], coords, {"sweep": "b"})
    joined = io.concat_cells([first, second])
    assert joined.attrs == {"sweep": "a"}
    assert joined["lr"].values.tolist() == list(LR)
    assert joined["cell_id"].values.tolist() == ["", "b", "c"]
    assert joined["mode_length"].values.tolist() == [3, 2, 3]
    for cell, got in zip(cells, io.cell_datasets(joined), strict=True):
        got = got.drop_vars(["lr", "cell_id"])
        got.attrs = cell.attrs
        xr.testing.assert_identical(got, cell)
