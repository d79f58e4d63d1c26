"""End-to-end: config/test.yaml through snakemake, sparse merged datasets, reruns, increments."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from workflow_helpers import copy_workflow, job_counts, snakemake

import weightdyn

SL_AXES = ("N", "P", "sigma_eps2", "lr", "batch_size", "sampling", "data_seed", "dynamics", "init")
REQUIRED = ("eig_M_sgd", "eig_M_sgd_se", "eig_M_lyapunov", "eig_M_discrete", "var_w_sgd",
            "var_w_theory", "train_loss", "diverged", "fluctuations_vanish")  # fmt: skip


@pytest.fixture(scope="module")
def test_run(test_sweep: Path) -> Path:
    """The test sweep, run once per session with 2 cores (conftest.py)."""
    return test_sweep


def _open(run: Path, name: str) -> xr.Dataset:
    with xr.open_dataset(run / "results" / f"{name}.nc") as ds:
        return ds.load()


def _where(ds: xr.Dataset, **values) -> xr.Dataset:
    mask = np.ones(ds.sizes["cell"], bool)
    for key, value in values.items():
        mask &= ds[key].values == value
    return ds.isel(cell=np.flatnonzero(mask))


def test_merged_sweeps_are_sparse_and_follow_the_contract(test_run: Path) -> None:
    for path in sorted((test_run / "results").glob("*.nc")):
        with xr.open_dataset(path) as ds:
            assert ds.attrs["weightdyn_version"], path
            if path.name.endswith(".summary.nc"):
                continue
            assert "cell" in ds.dims and ds.attrs["Conventions"] == "CF-1.11", path
            for axis in ds.attrs["sweep_axes"].split():
                assert ds[axis].dims == ("cell",) and ds[axis].attrs["long_name"], (path, axis)
            for name, var in ds.data_vars.items():
                for key in ("long_name", "units"):
                    assert var.attrs.get(key) is not None, f"{path.name}: {name} lacks {key}"
    fig4a = _open(test_run, "fig4a")
    assert fig4a.sizes["cell"] == 3 and all(name in fig4a for name in REQUIRED)
    assert all(axis in fig4a.coords for axis in SL_AXES)
    eig = fig4a["eig_M_lyapunov"].values
    diffs = np.diff(eig, axis=-1)
    assert np.all(diffs[np.isfinite(diffs)] <= 1e-15)  # spectra sorted descending


def test_open_sweep_gives_the_gridded_view(test_run: Path) -> None:
    grid = weightdyn.open_sweep(test_run / "results" / "question_a.nc", grid=True)
    assert grid["var_w_sgd"].dims == ("lr", "dynamics")
    assert grid.sizes == {"lr": 4, "dynamics": 3, "mode": 10}


def test_edge_cells_are_flagged_not_crashed(test_run: Path) -> None:
    over = _where(_open(test_run, "fig4a"), N=50).squeeze("cell")
    assert over["fluctuations_vanish"] == 1 and over["diverged"] == 0
    scale = float(over["M_isotropic"])
    assert float(over["var_w_theory"]) < 1e-20 * scale
    assert abs(float(over["var_w_sgd"])) < 1e-20 * scale
    edge = _open(test_run, "edge")
    assert list(edge["sampling"].values) == ["with", "without"]
    assert np.all(edge["diverged"].values == 1) and np.all(edge["linearly_unstable"].values == 1)
    assert np.all(np.isnan(edge["eig_M_sgd"].values))


def test_question_a_compares_every_dynamics_with_both_theories(test_run: Path) -> None:
    ds = _open(test_run, "question_a")
    assert sorted(set(ds["dynamics"].values)) == ["sgd", "sgf_additive", "sgf_multiplicative"]
    assert sorted(set(ds["lr"].values)) == [0.05, 0.1, 0.2, 0.5]
    for name in ("var_w_sgd", "var_w_sgd_se", "var_w_theory", "eig_M_discrete"):
        assert np.all(np.isfinite(ds[name].values[..., 0] if ds[name].ndim > 1 else ds[name]))
    sgd = _where(ds, dynamics="sgd", lr=0.1).squeeze("cell")
    z = (sgd["var_w_sgd_wstar"] - sgd["var_w_theory"]) / sgd["var_w_sgd_wstar_se"]
    # 5 SE: the continuum theory has an O(lr omega) bias on top of the statistical error
    assert abs(float(z)) < 5


def test_figures_drawn(test_run: Path) -> None:
    figures = sorted((test_run / "results" / "figures").rglob("*.png"))
    names = {p.relative_to(test_run / "results" / "figures").as_posix() for p in figures}
    print(len(figures), "figures")
    for name in ("fig4a/variance_vs_size.png", "question_a/dynamics_vs_lr.png",
                 "question_b/fig3.png", "question_c/fig5a.png", "two_layer_tiny/fig7a.png",
                 "fig2a_with.png", "noise_sgd/fig2a.png", "e1_width/gap_vs_N.png",
                 "table1/table.png"):  # fmt: skip
        assert name in names, name
    assert all(p.stat().st_size > 5_000 for p in figures)


def test_table1_rows_agree_with_the_paper(test_run: Path) -> None:
    ds = _open(test_run, "table1")
    assert ds.sizes["cell"] == 6
    for flag in ("agrees_student", "agrees_loss", "agrees_fluctuations"):
        assert np.all(ds[flag].values == 1), flag


def test_noop_rerun_runs_nothing(test_run: Path) -> None:
    start = time.monotonic()
    proc = snakemake(test_run, "--configfile", "config/test.yaml", "--cores", "2")
    print(f"no-op rerun of the completed test sweep: {time.monotonic() - start:.1f} s")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def _extended(run: Path, edit, name: str) -> dict[str, int]:
    cfg = yaml.safe_load((run / "config" / "test.yaml").read_text())
    edit(cfg["sweeps"])
    path = run / "config" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))  # also reorders keys: must not matter
    proc = snakemake(run, "-n", "--configfile", str(path))
    counts = job_counts(proc.stdout)
    print(name, counts)
    return counts


def test_a_new_single_layer_value_reruns_only_its_cell(test_run: Path) -> None:
    counts = _extended(test_run, lambda s: s["fig4b"]["p_over_n"].append(3.0), "sl")
    assert counts == {"data": 1, "cell": 1, "merge": 1, "figure": 1, "agreement_table": 1,
                      "all": 1, "total": 6}  # fmt: skip


def test_a_new_two_layer_value_reruns_only_its_cells(test_run: Path) -> None:
    counts = _extended(test_run, lambda s: s["two_layer_tiny"].update(lr=[0.1, 0.05]), "tl")
    assert counts["cell"] == 2  # the new lr, for sgd and sgf
    assert set(counts) == {"cell", "merge", "figure", "agreement_table", "all", "total"}


def test_a_new_mean_field_value_reruns_only_its_cell(test_run: Path) -> None:
    def edit(sweeps):
        sweeps["e1_width"]["N"] = [*sweeps["e1_width"]["N"], 30]

    counts = _extended(test_run, edit, "mf")
    assert counts["cell"] == 1 and counts["summary"] == 1 and counts["merge"] == 1
    assert set(counts) == {"cell", "merge", "summary", "figure", "agreement_table", "all", "total"}


def test_bit_identical_rerun_with_one_core(test_run: Path, tmp_path: Path) -> None:
    wf = copy_workflow(tmp_path / "wf1")
    snakemake(wf, "--configfile", "config/test.yaml", "--cores", "1", "results/fig4a.nc")
    merged = _open(test_run, "fig4a")
    again = _open(wf, "fig4a")
    for name in merged.data_vars:
        np.testing.assert_array_equal(again[name].values, merged[name].values, err_msg=name)
    shutil.rmtree(wf)


def test_a_plotting_option_reruns_only_figures(test_run: Path) -> None:
    cfg = yaml.safe_load((test_run / "config" / "test.yaml").read_text())
    cfg["figures"]["dpi"] += 10
    cfg["name"] = "test"  # the same config (its agreement table), edited in another file
    changed = test_run / "config" / "plotting.yaml"
    changed.write_text(yaml.safe_dump(cfg))
    proc = snakemake(test_run, "-n", "--configfile", str(changed))
    counts = job_counts(proc.stdout)
    # plotting never triggers a simulation, a merge, a summary or the agreement table
    assert set(counts) == {"figure", "all", "total"}, proc.stdout[-3000:]


def test_a_package_edit_reruns_only_the_cells_it_can_change(test_run: Path, tmp_path: Path):
    """Edit a two-layer module in a copy of the package put first on PYTHONPATH."""
    src = Path(weightdyn.__file__).parent
    copy = tmp_path / "src" / "weightdyn"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
    theory = copy / "two_layer" / "theory.py"
    theory.write_text(theory.read_text() + "\n# edited\n")
    proc = snakemake(
        test_run, "-n", "--configfile", "config/test.yaml", env={"PYTHONPATH": str(copy.parent)}
    )
    counts = job_counts(proc.stdout)
    print(counts)
    # the two-layer sgd and sgf cells only: no single-layer, mean-field or models cell (the
    # models theory shares weightdyn.linear_theory, not two_layer.theory; docs/design.md)
    cells = set(re.findall(r"results/cells/(\w+)/\S+\.nc", proc.stdout))
    assert counts["cell"] == 2 and cells == {"two_layer"}, cells
