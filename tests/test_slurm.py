"""SLURM submission through profiles/slurm against a real single-node cluster on this machine.

Needs root and Debian's slurmctld/slurmd/slurm-client/munge (``.ci/run`` installs them); marked
``cluster``. Outside CI a machine without them skips; in CI (``CI`` set) a missing cluster fails.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections import Counter
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
    # one cluster per machine: xdist workers that both reach this module take turns
    with open(tmp_path_factory.getbasetemp().parent / "slurm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        slurm = LocalSlurm(tmp_path_factory.mktemp("slurm"))
        slurm.start()
        yield slurm
        slurm.stop()


# One sweep of each kind of pipeline (single-layer cells with data and theory, the noise
# experiments, two-layer SGD and SGF, paper 002), each with a figure: every rule kind reaches the
# cluster, in a few dozen jobs rather than the 120 of config/test.yaml (8 s of start-up each here).
CLUSTER_SWEEPS = {"fig4a": {"N": [10, 20]}, "noise_projector": {}, "two_layer_tiny": {}}
CLUSTER_SWEEPS |= {"e3_small_output": {"eps": [0.01, 0.1], "w0_scale": [0.1, 0.01]}}


def cluster_config() -> dict:
    """The CLUSTER_SWEEPS of config/test.yaml, with their overrides."""
    cfg = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    sweeps = {name: {**cfg["sweeps"][name], **over} for name, over in CLUSTER_SWEEPS.items()}
    return {"sweeps": sweeps, "figures": cfg["figures"]}


def run_both(tmp_path: Path, config: dict, profile: tuple[str, ...], env=None) -> tuple[Path, str]:
    """Run ``config`` locally and through ``profile``; return the cluster copy and its log."""
    runs, out = {}, ""
    for name, args in (("local", ("--cores", "2")), ("cluster", profile)):
        wf = copy_workflow(tmp_path / name)
        (wf / "config" / "run.yaml").write_text(yaml.safe_dump(config))
        start = time.monotonic()
        proc = snakemake(wf, *args, "--configfile", "config/run.yaml", env=env, timeout=1800)
        print(f"{name}: {time.monotonic() - start:.0f} s wall")
        runs[name], out = wf, proc.stdout + proc.stderr
    assert_merged_equal(runs["cluster"], runs["local"])
    return runs["cluster"], out


def test_a_sweep_on_slurm_matches_the_local_run(cluster: LocalSlurm, tmp_path: Path) -> None:
    _, out = run_both(tmp_path, cluster_config(), SLURM)
    counts = job_counts(out)
    local = local_rules()
    submitted = SUBMITTED.findall(out)
    expected = sum(n for rule, n in counts.items() if rule not in local and rule != "total")
    jobs = {job["id"]: job for job in cluster.jobs()}
    print(f"{len(submitted)} SLURM jobs, {counts['total']} in all")
    assert len(submitted) == expected > 0
    assert "cell" in {rule for _, rule in submitted}
    assert {"data", "light_cell", "merge", "figure"} <= local  # run by the submitting process
    assert not {rule for _, rule in submitted} & local
    assert all(jobs[jid]["state"] == "COMPLETED" for jid, _ in submitted)


def assert_merged_equal(run: Path, reference: Path) -> None:
    """The same merged files, with the same data variables and values (timings aside)."""
    merged = sorted(p.name for p in (reference / "results").glob("*.nc"))
    assert merged
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
    """The tasks of SLURM job arrays (ids ``<array job>_<task>``)."""
    return [job for job in cluster.jobs() if re.fullmatch(r"\d+_\d+", job["id"])]


def test_a_sweep_as_job_arrays_matches_the_local_run(cluster: LocalSlurm, tmp_path: Path) -> None:
    before = {job["id"] for job in array_tasks(cluster)}
    _, out = run_both(tmp_path, cluster_config(), ARRAY)
    tasks = [job for job in array_tasks(cluster) if job["id"] not in before]
    # a cell that is the only one of its rule ready at a time goes out as a plain job
    single = [jid for jid, rule in SUBMITTED.findall(out) if rule == "cell"]
    arrays = Counter(job["id"].split("_")[0] for job in tasks)
    print(f"{len(tasks)} array tasks in arrays of {sorted(arrays.values())}, {len(single)} single")
    assert len(tasks) + len(single) == job_counts(out)["cell"]
    assert max(arrays.values()) > 1
    assert all(job["state"] == "COMPLETED" for job in tasks), tasks


WIDE_CELLS, ARRAY_LIMIT = 200, 64
WIDE = {
    "experiment_modules": ["toy_experiment"],
    "sweeps": {"toy_wide": {"experiment": "toy", "lr": 0.5, "seed": list(range(WIDE_CELLS))}},
    "figures": {"formats": ["png"], "dpi": 60},
}


def test_a_wide_sweep_goes_out_as_several_arrays(cluster: LocalSlurm, tmp_path: Path) -> None:
    """One DAG level of 200 cells, wider than --slurm-array-limit: no array above the limit."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}
    before = {job["id"] for job in array_tasks(cluster)}
    profile = (*ARRAY, "--slurm-array-limit", str(ARRAY_LIMIT))
    run_both(tmp_path, WIDE, profile, env=env)
    tasks = [job for job in array_tasks(cluster) if job["id"] not in before]
    arrays = Counter(job["id"].split("_")[0] for job in tasks)
    print(f"{len(tasks)} array tasks in {len(arrays)} arrays of {sorted(arrays.values())} tasks")
    assert len(tasks) == WIDE_CELLS
    assert max(arrays.values()) <= ARRAY_LIMIT < WIDE_CELLS
    assert all(job["state"] == "COMPLETED" for job in tasks), tasks


# the toy experiment (tests/toy_experiment.py) with a cell that raises
FAILING_EXPERIMENT = """
import dataclasses

from toy_experiment import EXPERIMENTS as TOY


def _fail(params, progress):
    raise RuntimeError("injected failure")


EXPERIMENTS = {"boom": dataclasses.replace(TOY["toy"], name="boom", run_cell=_fail)}
"""


def test_a_failing_cell_is_reported_failed_in_bounded_time(
    cluster: LocalSlurm, tmp_path: Path
) -> None:
    wf = copy_workflow(tmp_path / "wf")
    (wf / "boom_experiment.py").write_text(FAILING_EXPERIMENT)
    tiny = {
        "experiment_modules": ["boom_experiment"],
        "sweeps": {"boom": {"experiment": "boom", "lr": 0.5}},
    }
    (wf / "config" / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(wf), TESTS, os.environ.get("PYTHONPATH")]))
    }
    start = time.monotonic()
    proc = snakemake(
        wf, *SLURM, "--configfile", "config/tiny.yaml", check=False, timeout=600, env=env
    )
    wall = time.monotonic() - start
    out = proc.stdout + proc.stderr
    print(f"failing cell reported after {wall:.0f} s (retries included)")
    assert proc.returncode != 0
    assert "Error in rule cell" in out
    failed = [job for job in cluster.jobs() if job["state"] == "FAILED"]
    assert len(failed) >= 1
    logs = list((wf / "logs" / "cells" / "boom").glob("*.log"))
    assert logs and "injected failure" in logs[0].read_text()  # the cell's log says why
