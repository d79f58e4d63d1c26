#!/usr/bin/env python3
"""Set up and run weightdyn with nothing but Python >= 3.11 on the machine.

    python3 run.py sweep [snakemake args...]   default sweep end to end (creates .venv if needed)
    python3 run.py test  [pytest args...]      the test suite
    python3 run.py check [--configfile C] [--remove]   find (and delete) damaged result files
    python3 run.py lint                        ruff, snakefmt and snakemake --lint (as CI runs them)
    python3 run.py status [--configfile C] [--directory D] [--watch SECONDS]
                                               cells done/running/left per experiment, ETA
    python3 run.py params [EXPERIMENT]         an experiment's parameters and figures (or the list)

The virtual environment lives in .venv (override with WEIGHTDYN_VENV); the package is installed
into it in editable mode with its test extra, once, and again whenever pyproject.toml changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("WEIGHTDYN_VENV", ROOT / ".venv"))
PY = VENV / "bin" / "python"


def ensure_environment() -> None:
    """Create the venv and (re)install the package when pyproject.toml changed."""
    stamp = VENV / ".weightdyn-installed"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if PY.exists() and stamp.exists() and stamp.read_text() == digest:
        return
    if not PY.exists():
        print(f"creating virtual environment {VENV}", flush=True)
        venv.create(VENV, with_pip=True)
    subprocess.run([PY, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([PY, "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]"], check=True)
    stamp.write_text(digest)


#: the lint steps, in order: Python style, Snakemake formatting, Snakemake's own linter
LINT = [
    ["ruff", "check", "."],
    ["ruff", "format", "--check", "."],
    ["snakefmt", "--check", "Snakefile", "workflow/rules"],
    ["snakemake", "--lint"],
]


def lint(env: dict[str, str]) -> int:
    """Run every lint step (all of them, even after a failure); non-zero if any failed."""
    failed = []
    for step in LINT:
        print("$", " ".join(step), flush=True)
        if subprocess.run([VENV / "bin" / step[0], *step[1:]], cwd=ROOT, env=env).returncode:
            failed.append(" ".join(step))
    for step in failed:
        print(f"lint failed: {step}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"sweep", "test", "check", "lint", "status", "params"}:
        print(__doc__, file=sys.stderr)
        return 2
    ensure_environment()
    env = dict(os.environ, PATH=f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    if argv[0] == "lint":
        return lint(env)
    if argv[0] == "sweep":
        cmd = [VENV / "bin" / "snakemake", "--cores", "all", *argv[1:]]
    elif argv[0] == "check":
        cmd = [PY, "-m", "weightdyn.integrity", *argv[1:]]
    elif argv[0] == "status":
        cmd = [PY, "-m", "weightdyn.status", *argv[1:]]
    elif argv[0] == "params":
        cmd = [PY, "-m", "weightdyn.describe", *argv[1:]]
    else:
        # two workers; the session runs its test sweep once and shares it (conftest.test_sweep)
        cmd = [PY, "-m", "pytest", "-n", "2", *argv[1:]]
    return subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
