"""Shared fixtures: a throw-away copy of the workflow to run snakemake in."""

from __future__ import annotations

from pathlib import Path

import pytest
from workflow_helpers import copy_workflow, snakemake


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    return copy_workflow(tmp_path / "wf")


@pytest.fixture(scope="session")
def test_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """config/test.yaml run once per session with 2 cores (shared by the workflow tests)."""
    wf = copy_workflow(tmp_path_factory.mktemp("e2e") / "wf")
    snakemake(wf, "--configfile", "config/test.yaml", "--cores", "2")
    return wf
