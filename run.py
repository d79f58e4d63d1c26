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
import shutil
import signal
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("WEIGHTDYN_VENV", ROOT / ".venv"))
PY = VENV / "bin" / "python"


def editable_source(venv: Path) -> Path | None:
    """The source folder that the editable install of weightdyn in ``venv`` imports (the path
    in its ``__editable__.weightdyn-*.pth``), or None if there is none."""
    for pth in sorted(venv.glob("lib/python*/site-packages/__editable__.weightdyn-*.pth")):
        for line in pth.read_text().splitlines():
            if line.strip() and not line.startswith(("import ", "#")):
                return Path(line.strip())
    return None


def script_venv(venv: Path) -> Path | None:
    """The virtual environment whose Python ``venv``'s snakemake script starts (its ``#!`` line
    names an absolute path, which a copied or moved venv keeps), or None if it has none."""
    script = venv / "bin" / "snakemake"
    if not script.is_file():
        return None
    first = script.read_bytes().split(b"\n", 1)[0].decode(errors="replace")
    return Path(first[2:].strip()).parent.parent if first.startswith("#!/") else None


def foreign_install(venv: Path, root: Path) -> tuple[str, bool] | None:
    """Why ``venv`` would run another checkout's code instead of ``root``'s, and whether it was
    copied from another checkout (its scripts start the other venv's Python), or None.

    A checkout copied with its ``.venv`` keeps both absolute paths of the original: the editable
    install's source folder and the scripts' interpreter, so that edits in the copy are ignored.
    """
    origin = script_venv(venv)
    if origin is not None and origin.resolve() != venv.resolve():
        return f"was copied from {origin} (its scripts run that one's Python)", True
    source = editable_source(venv)
    if source is not None and source.resolve() != (root / "src").resolve():
        return f"imports weightdyn from {source}, another checkout", False
    return None


def ensure_environment() -> None:
    """Create the venv and (re)install the package when pyproject.toml changed, or when the venv
    runs another checkout's code: this checkout's own ``.venv`` is recreated (copied) or the
    package reinstalled from here; a venv given by WEIGHTDYN_VENV is left alone (nothing is
    installed into it) and this checkout's ``src`` goes first on PYTHONPATH. Either way one line
    says so."""
    stamp = VENV / ".weightdyn-installed"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    foreign = foreign_install(VENV, ROOT) if PY.exists() else None
    if foreign and VENV.resolve() != (ROOT / ".venv").resolve():
        print(f"{VENV} {foreign[0]}: running {ROOT / 'src'} instead (PYTHONPATH)", flush=True)
        path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), path]))
        return  # another checkout's venv: installing into it would change what that one runs
    if foreign:
        action = "recreating it" if foreign[1] else "reinstalling weightdyn from this checkout"
        print(f"{VENV} {foreign[0]}: {action}", flush=True)
        if foreign[1]:
            shutil.rmtree(VENV)
    if PY.exists() and not foreign and stamp.exists() and stamp.read_text() == digest:
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


def run_child(cmd: list, env: dict[str, str]) -> int:
    """Run ``cmd`` and return its exit status. A Ctrl-C (SIGINT) or SIGTERM that reaches this
    process is passed on to the child, which then stops on its own terms (Snakemake stops its
    jobs and says how to resume); this one waits for it and exits as interrupted (130, or 143
    for SIGTERM), without a traceback. A terminal's Ctrl-C reaches both: the child takes the
    second signal as the first."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 + received[0] if received else code


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
    return run_child(cmd, env)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:  # while setting up the environment: no child to pass it on to
        print("interrupted", file=sys.stderr)
        sys.exit(130)
