"""Shared data sets are shared between checkouts through Snakemake's output cache."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from workflow_helpers import ROOT, copy_workflow, job_counts, snakemake

pytestmark = pytest.mark.slow


def test_second_checkout_takes_the_data_sets_from_the_cache(tmp_path: Path) -> None:
    cfg = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    tiny = {
        "sweeps": {"fig4c": {**cfg["sweeps"]["fig4c"], "n_test": 20}},
        "figures": cfg["figures"],
    }
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    (tmp_path / "cache").mkdir()
    os.environ["SNAKEMAKE_OUTPUT_CACHE"] = str(tmp_path / "cache")
    try:
        runs = []
        for name in ("first", "second"):
            wf = copy_workflow(tmp_path / name)
            proc = snakemake(wf, "--cache", "--configfile", "../tiny.yaml", "--cores", "2")
            runs.append((wf, proc.stdout + proc.stderr))
    finally:
        del os.environ["SNAKEMAKE_OUTPUT_CACHE"]
    (first, first_log), (second, second_log) = runs
    counts = job_counts(second_log)
    shared = counts["data"]
    stored = [line for line in first_log.splitlines() if line.endswith("to cache.")]
    cached = [line for line in second_log.splitlines() if line.endswith("from cache.")]
    print("\n".join(cached))
    assert len(stored) == shared > 0  # the first checkout computes and stores them
    assert len(cached) == shared  # the second one links them from the cache, computing none
    assert not [line for line in second_log.splitlines() if line.endswith("to cache.")]
    assert all("/data/" in line for line in cached)
    with (
        xr.open_dataset(first / "results" / "fig4c.nc") as a,
        xr.open_dataset(second / "results" / "fig4c.nc") as b,
    ):
        for var in a.data_vars:
            np.testing.assert_array_equal(a[var].values, b[var].values, err_msg=var)
