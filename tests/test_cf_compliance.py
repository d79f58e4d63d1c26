"""CF 1.11 conventions of every netCDF file the workflow writes (issue 12, item 3).

The judge is the IOOS compliance checker (``compliance-checker --test cf:1.11``, run through
tools/cf_check.py): its errors (priority "high", and exceptions a check raises) must be none, on
every per-cell, shared-data, merged and summary file of the test sweep. Without the checker the
tests skip, except in CI (``CI`` set), where a missing checker fails.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr
from workflow_helpers import ROOT

from weightdyn import io


def _cf_check():
    """tools/cf_check.py as a module (tools/ is not a package)."""
    try:
        import compliance_checker  # noqa: F401
    except ImportError as err:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the CF checker (pip install compliance-checker): {err}")
        pytest.skip(f"compliance-checker not installed: {err}")
    if "cf_check" not in sys.modules:
        spec = importlib.util.spec_from_file_location("cf_check", ROOT / "tools" / "cf_check.py")
        sys.modules["cf_check"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["cf_check"])
    return sys.modules["cf_check"]


def _errors(found: dict) -> list[str]:
    return [f"{f.path}: {f.section}: {f.message}" for fs in found.values() for f in fs
            if f.level == "error"]  # fmt: skip


def _labelled() -> xr.Dataset:
    """A small dataset with what CF is strict about: a string dimension coordinate (k), a float
    dimension coordinate (t), an auxiliary coordinate with a missing value (p)."""
    return xr.Dataset(
        {"b": (("t", "k"), np.arange(6.0).reshape(3, 2), io.attrs("b", "1", "test"))},
        coords={
            "t": ("t", [0.0, 0.5, 1.0], io.attrs("time t", "1", "test")),
            "k": ("k", ["c", "a"], io.attrs("component", "1", "test")),
            "p": ("t", [1.0, np.nan, 2.0], io.attrs("p", "1", "test")),
        },
    )


def test_write_atomic_stores_cf_and_load_restores_the_dataset(tmp_path: Path) -> None:
    ds = _labelled()
    io.write_atomic(ds, tmp_path / "x.nc")
    with netCDF4.Dataset(tmp_path / "x.nc") as raw:
        assert "k" not in raw.variables and raw["k_label"].dimensions == ("k",)
        assert "_FillValue" not in raw["t"].ncattrs()  # a coordinate variable (CF 2.5.1)
        assert np.isnan(raw["p"].getncattr("_FillValue"))  # an auxiliary one with a gap keeps it
        assert raw.getncattr("Conventions") == "CF-1.11"
        assert raw.getncattr("title") == "weightdyn x" and "weightdyn" in raw.getncattr("history")
    back = io.load(tmp_path / "x.nc")
    xr.testing.assert_identical(back.drop_attrs(deep=False), ds)
    assert list(back.indexes) == ["t", "k"]
    assert ds.attrs == {} and "k" in ds.coords  # the caller's dataset is unchanged


def test_a_tree_of_groups_has_no_fill_value_on_coordinates(tmp_path: Path) -> None:
    one = _labelled().drop_vars(["k", "p"])
    io.write_atomic(xr.DataTree.from_dict({"/": one, "/g": one.rename(t="s")}),
                    tmp_path / "tree.nc")  # fmt: skip
    with netCDF4.Dataset(tmp_path / "tree.nc") as raw:
        assert "_FillValue" not in raw["t"].ncattrs()
        assert "_FillValue" not in raw.groups["g"]["s"].ncattrs()


def test_given_global_attributes_win(tmp_path: Path) -> None:
    ds = _labelled().assign_attrs(
        io.provenance(
            {"N": 3}, title="mine", source="paper 000 Eq. 1", history=io.history_line("r")
        )
    )
    io.write_atomic(ds, tmp_path / "x.nc")
    attrs = io.load(tmp_path / "x.nc").attrs
    assert attrs["title"] == "mine" and attrs["cell_N"] == "3" and attrs["source"]
    assert " rule r: " in attrs["history"] and attrs["git_revision"]


def test_a_written_dataset_passes_the_checker(tmp_path: Path) -> None:
    cf_check = _cf_check()
    io.write_atomic(_labelled(), tmp_path / "x.nc")
    assert _errors({tmp_path: cf_check.check_file(tmp_path / "x.nc")}) == []


def test_the_checker_sees_what_it_must(tmp_path: Path) -> None:
    """The check is not vacuous: the faults issue 12 found are errors."""
    cf_check = _cf_check()
    bad = _labelled().drop_vars("k").rename({"t": "time"})
    bad["time"].attrs["units"] = "steps"
    bad.to_netcdf(tmp_path / "bad.nc")  # xarray's defaults: _FillValue on time, no Conventions
    found = cf_check.check_file(tmp_path / "bad.nc")
    text = "\n".join(f"{f.level}: {f.message}" for f in found)
    for expected in ("error: The coordinate variable 'time' must not have the _FillValue",
                     "error: Coordinate variable 'time' should have standard_name='time'",
                     'error: units for time, "steps" are not recognized by UDUNITS',
                     "Conventions field is not present"):  # fmt: skip
        assert expected in text, text


def test_every_file_of_the_test_sweep_passes_cf_1_11(test_sweep: Path) -> None:
    cf_check = _cf_check()
    root = test_sweep / "results"
    found = cf_check.check_tree(root)
    kinds = {cf_check.kind(p, root) for p in found}
    assert kinds == {"cells", "data", "merged", "summary"}, kinds
    errors = _errors(found)
    assert errors == [], f"{len(errors)} CF errors:\n" + "\n".join(errors[:40])
    rule = {"cells": ("cell", "light_cell"), "data": ("data",), "merged": ("merge",)}
    rule["summary"] = ("summary",)
    for path in found:
        with netCDF4.Dataset(path) as raw:
            history = raw.getncattr("history")
            assert raw.getncattr("Conventions") == "CF-1.11" and raw.getncattr("title"), path
            expected = [f" rule {name}: snakemake " for name in rule[cf_check.kind(path, root)]]
            assert any(text in history for text in expected), (path, history)
            assert raw.getncattr("weightdyn_version") and raw.getncattr("git_revision"), path
