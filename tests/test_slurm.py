"""SLURM submission through profiles/slurm against a real single-node cluster on this machine.

Needs root and Debian's slurmctld/slurmd/slurm-client/munge (``.ci/run`` installs them); marked
``cluster``. Outside CI a machine without them skips; in CI (``CI`` set) a missing cluster fails.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from slurm_cluster import LocalSlurm, missing_requirements
from workflow_helpers import ROOT, copy_workflow, job_counts, snakemake

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: .*?/rule_(\w+)/")
SLURM = ("--profile", "profiles/slurm", "--slurm-status-command", "squeue")
ARRAY = ("--profile", "profiles/slurm-array", "--slurm-status-command", "squeue")
TESTS = str(Path(__file__).resolve().parent)
TIMING = {"elapsed_s", "cpu_seconds"}  # what a job cost, not what it computed


def local_rules() -> set[str]:
    """Rules the workflow runs on the submitting machine (its ``localrules`` directives)."""
    names: set[str] = set()
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for block in re.findall(r"^localrules:\n((?:    \w+,?\n)+)", smk.read_text(), re.M):
            names.update(re.findall(r"\w+", block))
    return names | {"all"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    reason = missing_requirements()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the SLURM test: {reason}")
        pytest.skip(reason)
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    slurm.start()
    yield slurm
    slurm.stop()


def test_test_sweep_on_slurm_matches_the_local_run(
    cluster: LocalSlurm, test_sweep: Path, tmp_path: Path
) -> None:
    wf = copy_workflow(tmp_path / "wf")
    start = time.monotonic()
    proc = snakemake(wf, *SLURM, "--configfile", "config/test.yaml", timeout=1800)
    wall = time.monotonic() - start
    out = proc.stdout + proc.stderr
    counts = job_counts(out)
    local = local_rules()
    submitted = SUBMITTED.findall(out)
    expected = sum(n for rule, n in counts.items() if rule not in local and rule != "total")
    jobs = {job["id"]: job for job in cluster.jobs()}
    print(f"SLURM run: {wall:.0f} s wall, {len(submitted)} SLURM jobs, {counts['total']} in all")
    assert len(submitted) == expected > 0
    assert not {rule for _, rule in submitted} & local
    assert all(jobs[jid]["state"] == "COMPLETED" for jid, _ in submitted)
    assert_merged_equal(wf, test_sweep)


def assert_merged_equal(run: Path, reference: Path) -> None:
    """The same merged files, with the same data variables and values (timings aside)."""
    merged = sorted(p.name for p in (reference / "results").glob("*.nc"))
    assert merged == sorted(p.name for p in (run / "results").glob("*.nc"))
    for name in merged:
        with (
            xr.open_dataset(run / "results" / name) as a,
            xr.open_dataset(reference / "results" / name) as b,
        ):
            assert set(a.data_vars) == set(b.data_vars), name
            for var in a.data_vars:
                if var not in TIMING:
                    np.testing.assert_array_equal(
                        a[var].values, b[var].values, err_msg=f"{name}:{var}"
                    )


def array_tasks(cluster: LocalSlurm) -> list[dict[str, str]]:
    """The finished tasks of SLURM job arrays (ids ``<array job>_<task>``)."""
    return [job for job in cluster.jobs() if re.fullmatch(r"\d+_\d+", job["id"])]


def test_test_sweep_as_job_arrays_matches_the_local_run(
    cluster: LocalSlurm, test_sweep: Path, tmp_path: Path
) -> None:
    wf = copy_workflow(tmp_path / "wf")
    start = time.monotonic()
    proc = snakemake(wf, *ARRAY, "--configfile", "config/test.yaml", timeout=1800)
    out = proc.stdout + proc.stderr
    tasks = array_tasks(cluster)
    print(f"array run: {time.monotonic() - start:.0f} s wall, {len(tasks)} array tasks")
    assert len(tasks) >= 2
    assert all(job["state"] == "COMPLETED" for job in tasks), tasks
    assert job_counts(out)["cell"] > 0
    assert_merged_equal(wf, test_sweep)


WIDE = {
    "experiment_modules": ["toy_experiment"],
    "sweeps": {"toy_wide": {"experiment": "toy", "lr": 0.5, "seed": list(range(200))}},
    "figures": {"formats": ["png"], "dpi": 60},
}


def test_a_wide_sweep_as_job_arrays_runs_to_completion(cluster: LocalSlurm, tmp_path: Path) -> None:
    """200 cells of one DAG level: the width that plugin issue #473 reports hanging on."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}
    runs = {}
    for name, args in (("local", ("--cores", "2")), ("array", ARRAY)):
        wf = copy_workflow(tmp_path / name)
        (wf / "config" / "wide.yaml").write_text(yaml.safe_dump(WIDE))
        start = time.monotonic()
        snakemake(wf, *args, "--configfile", "config/wide.yaml", env=env, timeout=1800)
        print(f"wide sweep, {name}: {time.monotonic() - start:.0f} s wall")
        runs[name] = wf
    # finished tasks leave squeue after MinJobAge (600 s), so only the recent ones are listed
    assert any(job["state"] == "COMPLETED" for job in array_tasks(cluster))
    assert_merged_equal(runs["array"], runs["local"])


def test_a_failing_cell_is_reported_failed_in_bounded_time(
    cluster: LocalSlurm, tmp_path: Path
) -> None:
    wf = copy_workflow(tmp_path / "wf")
    (wf / "scripts" / "data.py").write_text('raise RuntimeError("injected failure")\n')
    cfg = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    tiny = {"sweeps": {"fig4a": {**cfg["sweeps"]["fig4a"], "N": [10]}}, "figures": cfg["figures"]}
    (wf / "config" / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    start = time.monotonic()
    proc = snakemake(wf, *SLURM, "--configfile", "config/tiny.yaml", check=False, timeout=600)
    wall = time.monotonic() - start
    out = proc.stdout + proc.stderr
    print(f"failing cell reported after {wall:.0f} s (retries included)")
    assert proc.returncode != 0
    assert "Error in rule data" in out
    failed = [job for job in cluster.jobs() if job["state"] == "FAILED"]
    assert len(failed) >= 1
