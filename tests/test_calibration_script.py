"""benchmarks/calibration.py on synthetic single-layer cells with known z values.

Each cell mimics the layout of a merged single-layer sweep (``eig_M_sgd`` +- ``eig_M_sgd_se``,
``eig_M_discrete``, ``trace_M_sgd`` +- ``trace_M_sgd_se``, ``diverged``,
``second_moment_radius``, the sweep axes as coordinates along ``cell``); the simulated values
are built as ``theory + z * se`` with chosen z, so every statistic the script prints is known.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from weightdyn import io

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "calibration.py"


@pytest.fixture(scope="module")
def calibration():
    spec = importlib.util.spec_from_file_location("calibration", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["calibration"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["calibration"]


N = 4
THEORY = np.array([4.0, 3.0, 2.0, 1.0])
SE = np.array([0.4, 0.2, 0.1, 0.05])
#: z per mode of the two valid cells, and their trace z
Z = {"a": np.array([1.0, -1.0, 2.0, 0.0]), "b": np.array([4.0, 0.0, 0.0, 0.0])}
Z_TRACE = {"a": 0.5, "b": -1.5}


def _cell(name: str, *, N_: int = N, P: int = 8, diverged: int = 0, radius: float = 0.9,
          z: np.ndarray | None = None, z_trace: float = 0.0) -> xr.Dataset:  # fmt: skip
    """One single-layer cell whose simulation lies ``z`` s.e. from the exact theory."""
    z = np.zeros(N) if z is None else z
    trace_se = 0.3
    ds = xr.Dataset(
        {
            "eig_M_sgd": ("mode", THEORY + z * SE),
            "eig_M_sgd_se": ("mode", SE),
            "eig_M_discrete": ("mode", THEORY),
            "trace_M_sgd": ((), THEORY.sum() + z_trace * trace_se),
            "trace_M_sgd_se": ((), trace_se),
            "trace_M_discrete": ((), THEORY.sum()),
            "diverged": ((), np.int8(diverged)),
            "second_moment_radius": ((), radius),
            "undersampled": ((), np.int8(name == "b")),
        },
        coords={"mode": np.arange(N)},
    )
    axes = {"N": N_, "P": P, "lr": 0.1, "dynamics": "sgd", "cell_id": f"{name}__abc"}
    return ds.expand_dims("cell").assign_coords({k: ("cell", [v]) for k, v in axes.items()})


def _sweep(path: Path, shift: float = 0.0) -> Path:
    """A merged sweep of two valid cells and three invalid ones (diverged, radius, N >= P)."""
    cells = [
        _cell("a", z=Z["a"] + shift, z_trace=Z_TRACE["a"]),
        _cell("b", z=Z["b"], z_trace=Z_TRACE["b"]),
        _cell("diverged", diverged=1),
        _cell("unstable", radius=1.2),
        _cell("interpolating", P=N),
    ]
    ds = xr.concat(cells, "cell")
    ds.attrs["experiment"] = "single_layer"
    path.mkdir(parents=True, exist_ok=True)
    ds.to_netcdf(path / "sweep.nc")
    return path


def test_cells_read_and_excluded(calibration, tmp_path):
    cells = calibration.read_run("run", _sweep(tmp_path / "results"))
    reasons = {c.cell.split("__")[0]: c.excluded for c in cells}
    assert reasons == {
        "a": "",
        "b": "",
        "diverged": "diverged",
        "unstable": "second_moment_radius >= 1",
        "interpolating": "N >= P (nothing fluctuates)",
    }
    by_name = {c.cell.split("__")[0]: c for c in cells}
    np.testing.assert_allclose(by_name["a"].z, Z["a"])
    assert by_name["b"].z_trace == pytest.approx(Z_TRACE["b"])
    assert by_name["b"].flagged and not by_name["a"].flagged
    assert {c.group for c in cells} == {("run", "single_layer", "float64", "sgd")}


def test_group_statistics(calibration):
    s = calibration.summarise([Z["a"], Z["b"]])
    z = np.concatenate([Z["a"], Z["b"]])
    assert (s.cells, s.n) == (2, 8)
    assert s.mean == pytest.approx(0.75)
    assert s.sd == pytest.approx(z.std(ddof=1))
    assert s.se_iid == pytest.approx(z.std(ddof=1) / math.sqrt(8))
    # cluster-robust: per-cell residual sums 2 - 3 = -1 and 4 - 3 = 1
    assert s.se_cell == pytest.approx(math.sqrt(2 * 2) / 8)
    assert s.outliers == pytest.approx(1 / 8)
    # one z per cell (the trace): the cluster s.e. is the iid one
    t = calibration.summarise([np.array([0.5]), np.array([-1.5])])
    assert t.se_cell == pytest.approx(t.se_iid)


def test_printed_tables(calibration, tmp_path, capsys):
    assert calibration.main(["--cells", f"run={_sweep(tmp_path / 'results')}"]) == 0
    out = capsys.readouterr().out
    eig, trace = (line for line in out.splitlines() if line.startswith("run | single_layer"))
    assert eig.split()[7:10] == ["2", "8", "0.750"] and eig.endswith("no")
    assert trace.split()[7:10] == ["2", "2", "-0.500"] and trace.endswith("no")
    assert "1 diverged" in out and "1 second_moment_radius >= 1" in out
    assert "1 N >= P (nothing fluctuates)" in out


def test_compare_flags_shifted_cells(calibration, tmp_path):
    a = calibration.read_run("A", _sweep(tmp_path / "A"))
    b = calibration.read_run("B", _sweep(tmp_path / "B", shift=5.0))
    text = calibration.compare_table(a, b, "params")
    rows = {line.split()[-1]: line for line in text.splitlines()[1:-1]}
    assert set(rows) == {"a", "b"}
    assert rows["a"].split()[6] == "!" and "!" not in rows["b"]
    assert rows["a"].split()[2] == "5.000"  # the shift of cell a's mean z
    assert text.splitlines()[-1].startswith("2 matched cells, 1 flagged")
    # the same run against itself: nothing shifts
    same = calibration.compare_table(a, a, "id")
    assert "0 flagged" in same.splitlines()[-1]


def test_per_cell_file_with_attributes(calibration, tmp_path):
    """A per-cell file keeps its parameters as ``cell_<name>`` attributes, not coordinates."""
    ds = _cell("a", z=Z["a"]).isel(cell=0, drop=True)
    ds.attrs.update({"cell_experiment": "single_layer", "cell_N": N, "cell_P": 8,
                     "cell_lr": 0.1, "cell_dynamics": "sgd", "precision": "float32"})  # fmt: skip
    folder = tmp_path / "results" / "cells" / "single_layer"
    folder.mkdir(parents=True)
    io.write_atomic(ds, folder / "a__abc.nc")
    (cell,) = calibration.read_run("run", tmp_path / "results")
    assert (cell.cell, cell.precision, cell.excluded) == ("a__abc", "float32", "")
    np.testing.assert_allclose(cell.z, Z["a"])
