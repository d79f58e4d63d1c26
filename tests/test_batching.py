"""Many small jobs stay practical: batching inside cells keeps the paper DAG small, and cheap
rules can be grouped into fewer cluster submissions (docs/internals.md, "Many small jobs")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from workflow_helpers import copy_workflow, job_counts, snakemake


@pytest.fixture(scope="module")
def workflow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("batching") / "wf")


def test_paper_dag_stays_under_ten_thousand_jobs(workflow: Path) -> None:
    proc = snakemake(workflow, "-n", "--forceall", "--configfile", "config/paper.yaml")
    counts = job_counts(proc.stdout)
    print(f"config/paper.yaml: {counts['total']} jobs")
    assert counts["total"] < 10_000


def test_grouping_packs_cheap_cells_into_fewer_submissions(workflow: Path) -> None:
    """Cells (rule cell; data sets and light cells run in the Snakemake process) go ten to a
    group submission."""
    proc = snakemake(
        workflow,
        "-n",
        "--forceall",
        "--configfile",
        "config/test.yaml",
        "--groups",
        "cell=cells",
        "--group-components",
        "cells=10",
    )
    counts = job_counts(proc.stdout)
    groups = re.findall(r"Group job cells \(jobs in lexicogr\. order\):", proc.stdout)
    print(f"{counts['cell']} cell jobs in {len(groups)} submissions")
    assert 0 < len(groups) < counts["cell"]
