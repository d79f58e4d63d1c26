"""Shared fixtures: a throw-away copy of the workflow to run snakemake in."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest
from workflow_helpers import copy_workflow, snakemake


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    return copy_workflow(tmp_path / "wf")


def _finished_test_sweep(root: Path) -> Path:
    """config/test.yaml run with 2 cores in ``root/wf``, once for all processes sharing ``root``.

    The first process to take the lock runs it; the others wait and find it done (a run that
    failed leaves no ``done`` marker, so the next process resumes it and reports its error).
    """
    wf = root / "wf"
    with open(root / "test_sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "done").exists():
            if not wf.exists():
                copy_workflow(wf)
            snakemake(wf, "--configfile", "config/test.yaml", "--cores", "2")
            (root / "done").touch()
    return wf


@pytest.fixture(scope="session")
def test_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The finished test sweep, shared by the workflow tests: run once per session.

    Under pytest-xdist every worker gets its own copy (modification times kept, so that
    snakemake sees it up to date) of one run made by whichever worker asked first; the tests
    may then run snakemake in it without taking each other's directory lock.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return _finished_test_sweep(tmp_path_factory.mktemp("e2e"))
    shared = tmp_path_factory.getbasetemp().parent / "shared_test_sweep"
    shared.mkdir(exist_ok=True)
    own = tmp_path_factory.mktemp("e2e") / "wf"
    shutil.copytree(_finished_test_sweep(shared), own, symlinks=True)
    return own
