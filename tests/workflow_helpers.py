"""Helpers to run the workflow in a throw-away copy of the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_PARTS = ("Snakefile", "workflow", "scripts", "config", "profiles")


def copy_workflow(dest: Path) -> Path:
    """Copy the workflow (not results) into ``dest`` and return it."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in WORKFLOW_PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part)
        else:
            shutil.copy2(src, dest / part)
    return dest


def snakemake(
    workdir: Path,
    *args: str,
    check: bool = True,
    timeout: float = 900,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run snakemake in ``workdir``; warnings from job scripts become errors."""
    env = dict(os.environ, PYTHONWARNINGS="error::RuntimeWarning", **(env or {}))
    exe = Path(sys.executable).with_name("snakemake")
    proc = subprocess.run(
        [str(exe) if exe.exists() else "snakemake", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {args} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def job_counts(snakemake_output: str) -> dict[str, int]:
    """The 'Job stats' table printed by snakemake (dry run or run) as {rule: count}."""
    lines = snakemake_output.split("Job stats:", 1)[1].splitlines()[3:]
    counts = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts
