"""End-to-end: config/test.yaml through snakemake, the merged dataset, reruns and increments."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from workflow_helpers import copy_workflow, job_counts, snakemake

import weightdyn

REQUIRED = (
    "eig_M_sgd",
    "eig_M_sgd_se",
    "eig_M_lyapunov",
    "eig_M_detailed_balance",
    "M_isotropic",
    "eig_C_theory",
    "eig_C_hessian",
    "eig_H",
    "q_over_c",
    "var_w_sgd",
    "var_w_theory",
    "train_loss",
    "test_loss",
    "optimal_loss",
    "diverged",
    "fluctuations_vanish",
)
TINY = "Ni6_Nh4_No1_P60_s1_gaussian1_lr0.1_S5_with_d0"  # the two-layer cell of test.yaml
AXES = ("N", "P", "sigma_eps2", "lr", "batch_size", "sampling", "data_seed")


@pytest.fixture(scope="module")
def test_run(test_sweep: Path) -> Path:
    """The test sweep, run once per session with 2 cores (conftest.py)."""
    return test_sweep


@pytest.fixture(scope="module")
def merged(test_run: Path) -> xr.Dataset:
    with xr.open_dataset(test_run / "results" / "single_layer.nc") as ds:
        return ds.load()


def test_dataset_contract(merged: xr.Dataset) -> None:
    assert set(merged.dims) == {*AXES, "mode"}
    for name in REQUIRED:
        assert name in merged, name
    for name, var in merged.data_vars.items():
        for key in ("long_name", "units", "source"):
            assert var.attrs.get(key), f"{name} lacks {key}"
        assert "paper" in var.attrs["source"], name
    assert merged.attrs["weightdyn_version"]
    # spectra sorted descending along mode wherever defined
    eig = merged["eig_M_lyapunov"].values
    diffs = np.diff(eig, axis=-1)
    assert np.all(diffs[np.isfinite(diffs)] <= 1e-15)


def test_cell_files_name_their_data(test_run: Path) -> None:
    for path in (test_run / "results" / "single_layer" / "sgd").glob("*.nc"):
        with xr.open_dataset(path) as ds:
            data_file = test_run / ds.attrs["data_file"]
            assert data_file.exists()
            assert ds.attrs["cell_N"] and ds.attrs["weightdyn_version"]
        with xr.open_dataset(data_file) as data:
            assert {"X", "y", "u", "eps"} <= set(data.data_vars)


def test_edge_cells(merged: xr.Dataset) -> None:
    common = {"sigma_eps2": 0.25, "batch_size": 5, "data_seed": 0}
    over = merged.sel(N=50, P=40, lr=0.1, sampling="with", **common)
    assert over["fluctuations_vanish"] == 1
    assert over["diverged"] == 0
    # C(w*) = 0 (Eq. 16) up to round-off, relative to the isotropic scale of Eq. 34
    scale = float(over["M_isotropic"])
    assert float(over["var_w_theory"]) < 1e-20 * scale
    assert abs(float(over["var_w_sgd"])) < 1e-20 * scale
    assert float(over["train_loss"]) < 1e-20
    for sampling in ("with", "without"):
        unstable = merged.sel(N=10, P=20, lr=50.0, sampling=sampling, **common)
        assert unstable["diverged"] == 1
        assert unstable["linearly_unstable"] == 1
        assert np.all(np.isnan(unstable["eig_M_sgd"].sel(mode=slice(0, 9))))


def test_sgd_agrees_with_eq30_in_z_score(merged: xr.Dataset) -> None:
    """A loose, SE-based agreement check on the tiny cells (the strict one is in test_agreement)."""
    cell = merged.sel(
        N=10, P=40, lr=0.1, sampling="with", sigma_eps2=0.25, batch_size=5, data_seed=0
    )
    z = (cell["var_w_sgd_wstar"] - cell["var_w_theory"]) / cell["var_w_sgd_wstar_se"]
    # 5 SE: the continuum theory has an O(lr omega) bias on top of the statistical error
    assert abs(float(z)) < 5


FIGURES = (
    "fig1a",
    "fig1b",
    "fig2a_with",
    "fig2a_without",
    "fig2b",
    "fig2c",
    "fig3",
    "fig4a",
    "fig4b",
    "fig4c",
    "fig5a",
    "fig5b",
    "fig_sgd_sgf",
    "fig_gbm",
)


def test_figures_drawn(test_run: Path) -> None:
    for fig in FIGURES:
        assert (test_run / "results" / "figures" / f"{fig}.png").stat().st_size > 10_000, fig
    for fig in ("fig6a", "fig6bc", "fig7a", "fig7b", "fig_drift", "fig_relaxation"):
        path = test_run / "results" / "figures" / "two_layer" / f"{TINY}_{fig}.png"
        assert path.stat().st_size > 10_000, fig


@pytest.mark.parametrize(
    "path",
    [
        "noise_projector.nc",
        "noise_k_diagonal.nc",
        "noise_spectrum.nc",
        "noise/hessian_basis.nc",
        "experiments/relaxation.nc",
        "experiments/perturbation_iid.nc",
        "experiments/perturbation_correlated.nc",
        "experiments/sgf.nc",
        "experiments/gbm.nc",
        f"two_layer/{TINY}.nc",
        "two_layer.nc",
    ],
)
def test_experiment_datasets_follow_the_contract(test_run: Path, path: str) -> None:
    with xr.open_dataset(test_run / "results" / path) as ds:
        assert ds.data_vars
        for name, var in ds.data_vars.items():
            for key in ("long_name", "units", "source"):
                assert key in var.attrs, f"{path}: {name} lacks {key}"


def test_spectrum_cells_keep_both_sampling_modes(test_run: Path) -> None:
    with xr.open_dataset(test_run / "results" / "noise_spectrum.nc") as ds:
        assert list(ds["sampling"].values) == ["with", "without"]
        simulated = ds["eig_C_empirical"].sel(P=20, sampling="without").squeeze()
        theory = ds["eig_C_theory"].sel(P=20, sampling="without").squeeze()
        # 2000 mini-batches: a loose 25% bound on the leading eigenvalue (SE ~ 3%)
        assert abs(float(simulated[0] / theory[0]) - 1) < 0.25


def test_two_layer_merge_has_one_dim_per_sweep_axis(test_run: Path) -> None:
    with xr.open_dataset(test_run / "results" / "two_layer.nc") as ds:
        for axis in (
            "N_i",
            "N_h",
            "N_o",
            "P",
            "sigma_y2",
            "init",
            "init_scale",
            "lr",
            "batch_size",
            "sampling",
            "data_seed",
        ):
            assert ds.sizes[axis] == 1, axis
        assert "trace_D2" in ds and "eig_cov2_sgd_b" in ds


def test_table1_rows_agree_with_the_paper(test_run: Path) -> None:
    table = (test_run / "results" / "experiments" / "table1.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "regime" not in line]
    assert len(rows) == 6
    assert all(row.rstrip(" |").endswith("yes") for row in rows)


def test_noop_rerun_runs_nothing(test_run: Path) -> None:
    start = time.monotonic()
    proc = snakemake(test_run, "--configfile", "config/test.yaml", "--cores", "2")
    print(f"no-op rerun of the completed test sweep: {time.monotonic() - start:.1f} s")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_adding_a_value_reruns_only_new_cells(test_run: Path) -> None:
    cfg = yaml.safe_load((test_run / "config" / "test.yaml").read_text())
    cfg["single_layer"]["sweeps"]["fig4b"]["p_over_n"].append(3.0)
    extended = test_run / "config" / "extended.yaml"
    extended.write_text(yaml.safe_dump(cfg))  # also reorders keys: must not matter
    proc = snakemake(test_run, "-n", "--configfile", str(extended))
    print(proc.stdout[proc.stdout.index("Job stats:") :][:600])
    assert job_counts(proc.stdout) == {
        "single_layer_data": 1,
        "single_layer_sgd": 1,
        "single_layer_theory": 1,
        "single_layer_merge": 1,
        "figure_fig4": 3,
        "agreement_table": 1,
        "all": 1,
        "total": 9,
    }
    assert "N10_P30_s0.25_d0_lr0.1_S5_with" in proc.stdout


def test_bit_identical_rerun_with_one_core(test_run: Path, merged: xr.Dataset, tmp_path: Path):
    wf = copy_workflow(tmp_path / "wf1")
    snakemake(wf, "--configfile", "config/test.yaml", "--cores", "1", "results/single_layer.nc")
    with xr.open_dataset(wf / "results" / "single_layer.nc") as again:
        again = again.load()
    for name in merged.data_vars:
        np.testing.assert_array_equal(again[name].values, merged[name].values, err_msg=name)
    shutil.rmtree(wf)


def test_a_plotting_option_reruns_only_figures(test_run: Path) -> None:
    cfg = yaml.safe_load((test_run / "config" / "test.yaml").read_text())
    cfg["figures"]["dpi"] += 10
    changed = test_run / "config" / "plotting.yaml"
    changed.write_text(yaml.safe_dump(cfg))
    counts = job_counts(snakemake(test_run, "-n", "--configfile", str(changed)).stdout)
    print(counts)
    assert counts["total"] > 1
    assert all(rule.startswith("figure_") for rule in counts if rule not in {"all", "total"})


def test_a_package_edit_reruns_only_the_rules_it_can_change(test_run: Path, tmp_path: Path):
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
    assert counts["two_layer_cell"] == 1
    assert set(counts) <= {
        "two_layer_cell",
        "two_layer_merge",
        "figure_two_layer",
        "agreement_table",
        "all",
        "total",
    }
