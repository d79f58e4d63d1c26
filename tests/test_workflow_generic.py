"""The generic rules on a user-defined experiment (tests/toy_experiment.py, one module):
sparse merge, incremental reruns, config errors before any job, reproducibility."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from workflow_helpers import copy_workflow, job_counts, snakemake

import weightdyn
from weightdyn import sweep
from weightdyn.experiments import ConfigError

TESTS = str(Path(__file__).resolve().parent)
ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}
CONFIG = {
    "experiment_modules": ["toy_experiment"],
    "sweeps": {
        "toy_lr": {
            "experiment": "toy",
            "lr": [0.5, 1.0],
            "seed": [0, 1],
            "steps": 2000,
            "label": "toy lr sweep",
        },
        "toy_sparse": {
            "experiment": "toy",
            "cells": [{"lr": 0.5}, {"lr": 1.5, "seed": 4}],
            "steps": 2000,
        },
    },
    "views": {"toy_seed0": {"sweeps": "toy_lr", "figure": "variance", "select": {"seed": 0}}},
    "figures": {"formats": ["png"], "dpi": 60},
}


def _write(wf: Path, config: dict, name: str = "toy.yaml") -> str:
    path = wf / "config" / name
    path.write_text(yaml.safe_dump(config))
    return f"config/{name}"


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wf = copy_workflow(tmp_path_factory.mktemp("toy") / "wf")
    snakemake(wf, "--configfile", _write(wf, CONFIG), "--cores", "2", env=ENV)
    return wf


def test_merged_sweep_is_sparse_with_one_coordinate_per_axis(toy_run: Path) -> None:
    with xr.open_dataset(toy_run / "results" / "toy_sparse.nc") as ds:
        assert dict(ds.sizes) == {"cell": 2, "step": 50}
        assert list(ds["lr"].values) == [0.5, 1.5] and list(ds["seed"].values) == [0, 4]
        assert ds.attrs["Conventions"] == "CF-1.11" and ds.attrs["sweep_axes"] == "lr seed"
        assert ds["lr"].attrs["long_name"] and ds["var_sim"].attrs["units"] == "1"
    grid = weightdyn.open_sweep(toy_run / "results" / "toy_lr.nc", grid=True)
    assert grid["var_sim"].dims == ("lr", "seed")
    z = (grid["var_sim"] - grid["var_theory"]) / grid["var_sim_se"]
    # the finite-run bias of the variance estimator is ~ 2 tau_int / steps ~ 0.3 %, far below SE
    assert float(abs(z).max()) < 4


def test_figures_and_agreement_rows_are_drawn(toy_run: Path) -> None:
    for path in ("toy_lr/variance.png", "toy_sparse/variance.png", "toy_seed0.png"):
        assert (toy_run / "results" / "figures" / path).stat().st_size > 5000, path
    table = (toy_run / "results" / "agreement" / "toy.csv").read_text()
    assert "toy lr sweep" in table and "toy_sparse" in table


def test_a_new_axis_value_reruns_only_its_cells(toy_run: Path) -> None:
    config = yaml.safe_load(yaml.safe_dump(CONFIG))
    config["sweeps"]["toy_lr"]["lr"].append(0.25)
    proc = snakemake(toy_run, "-n", "--configfile", _write(toy_run, config, "more.yaml"), env=ENV)
    counts = job_counts(proc.stdout)
    print(counts)
    assert counts == {
        "agreement_table": 1,
        "all": 1,
        "cell": 2,
        "figure": 2,
        "merge": 1,
        "total": 7,
    }


def test_no_op_rerun_does_nothing(toy_run: Path) -> None:
    proc = snakemake(toy_run, "--configfile", "config/toy.yaml", "--cores", "2", env=ENV)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_a_setting_change_reruns_the_sweeps_cells(toy_run: Path) -> None:
    config = yaml.safe_load(yaml.safe_dump(CONFIG))
    config["sweeps"]["toy_sparse"]["steps"] = 3000
    proc = snakemake(toy_run, "-n", "--configfile", _write(toy_run, config, "steps.yaml"), env=ENV)
    counts = job_counts(proc.stdout)
    assert counts["cell"] == 2 and counts["merge"] == 1


def test_one_core_rerun_is_bit_identical(toy_run: Path, tmp_path: Path) -> None:
    wf = copy_workflow(tmp_path / "wf")
    snakemake(wf, "--configfile", _write(wf, CONFIG), "--cores", "1", env=ENV)
    for name in ("toy_lr.nc", "toy_sparse.nc"):
        with (
            xr.open_dataset(wf / "results" / name) as a,
            xr.open_dataset(toy_run / "results" / name) as b,
        ):
            for var in a.data_vars:
                np.testing.assert_array_equal(a[var].values, b[var].values)


def test_a_failing_figure_fails_alone_with_its_error_in_its_log(toy_run: Path) -> None:
    """A figure draws in a forked process: its exception ends that job only, is written to the
    job's log, and Snakemake's error names the log; the run's other figures are drawn."""
    config = yaml.safe_load(yaml.safe_dump(CONFIG))
    config["views"]["toy_broken"] = {"sweeps": "toy_sparse", "figure": "variance"}
    config["views"]["toy_broken"]["options"] = {"fail": True}
    config["views"]["toy_lr1"] = {"sweeps": "toy_lr", "figure": "variance", "select": {"lr": 1.0}}
    path = _write(toy_run, config, "broken.yaml")
    proc = snakemake(toy_run, "--configfile", path, "--cores", "2", check=False, env=ENV)
    assert proc.returncode != 0
    log = (toy_run / "logs" / "figures" / "toy_broken.log").read_text()
    assert "job failed: ValueError: the toy figure was asked to fail" in log
    assert "Traceback" in log  # the child's own traceback, captured into the log
    assert "logs/figures/toy_broken.log" in proc.stdout + proc.stderr
    assert (toy_run / "results" / "figures" / "toy_lr1.png").stat().st_size > 5000
    assert not (toy_run / "results" / "figures" / "toy_broken.png").exists()


BAD = {
    "axis value": (
        lambda c: c["sweeps"]["toy_lr"].update(lr=[0.5, -1]),
        ["invalid config", "sweeps.toy_lr.lr", "-1", "allowed: 0 < number"],
    ),
    "derived check": (
        lambda c: c["sweeps"]["toy_lr"].update(lr=[3.0]),
        ["sweeps.toy_lr.lr", "allowed: 0 < lr < 2"],
    ),
    "unknown key": (
        lambda c: c["sweeps"]["toy_lr"].update(learning_rate=1),
        ["sweeps.toy_lr", "learning_rate", "allowed"],
    ),
    "unknown experiment": (
        lambda c: c["sweeps"]["toy_lr"].update(experiment="toys"),
        ["sweeps.toy_lr.experiment", "'toys'", "allowed"],
    ),
    "view figure": (
        lambda c: c["views"]["toy_seed0"].update(figure="fig9"),
        ["views.toy_seed0.figure", "'fig9'", "'variance'"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_config_names_the_key_and_what_is_allowed(case: str) -> None:
    """In-process, as the Snakefile validates (test_config_validation runs snakemake itself)."""
    edit, expected = BAD[case]
    config = yaml.safe_load(yaml.safe_dump(CONFIG))
    edit(config)
    with pytest.raises(ConfigError) as err:
        sweep.check_config(config)
        sweep.expand_views(config, sweep.expand_sweeps(config))
    message = f"invalid config: {err.value}"
    for text in expected:
        assert text in message, (case, text, message)
