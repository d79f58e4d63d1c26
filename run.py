#!/usr/bin/env python3
"""Set up and run weightdyn with nothing but Python >= 3.11 on the machine.

    python3 run.py sweep [snakemake args...]   default sweep end to end (creates .venv if needed)
    python3 run.py test  [pytest args...]      the test suite
    python3 run.py check [--configfile C] [--remove]   find (and delete) damaged result files

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


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"sweep", "test", "check"}:
        print(__doc__, file=sys.stderr)
        return 2
    ensure_environment()
    env = dict(os.environ, PATH=f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    if argv[0] == "sweep":
        cmd = [VENV / "bin" / "snakemake", "--cores", "all", *argv[1:]]
    elif argv[0] == "check":
        cmd = [PY, "-m", "weightdyn.integrity", *argv[1:]]
    else:
        cmd = [PY, "-m", "pytest", *argv[1:]]
    return subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
