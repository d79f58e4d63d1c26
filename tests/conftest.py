"""Shared fixtures: a throw-away copy of the workflow to run snakemake in."""

from __future__ import annotations

from pathlib import Path

import pytest
from workflow_helpers import copy_workflow


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    return copy_workflow(tmp_path / "wf")
