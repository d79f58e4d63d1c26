"""Wall time of the default sweep (config/config.yaml) on this machine, against its serial cost.

Usage: python benchmarks/default_sweep.py [--cores 2] [--configfile config/config.yaml] [--keep DIR]

Copies the workflow into a temporary folder, runs snakemake from scratch and prints the wall time,
the number of jobs, and (as the baseline measured in the same run) the summed run time of the cell
jobs as their logs show it, i.e. what a one-core serial run of the simulations would cost.
Target (issue 2): the default sweep finishes within 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _log_seconds(log: Path) -> float:
    """Seconds between the first and the last timestamped line of a cell's log."""
    stamps = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})", log.read_text(), re.M)
    if len(stamps) < 2:
        return 0.0
    first, last = (
        datetime.strptime(t, "%Y-%m-%d %H:%M:%S").timestamp() + int(ms) / 1e3
        for t, ms in (stamps[0], stamps[-1])
    )
    return last - first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--configfile", default="config/config.yaml")
    parser.add_argument("--keep", help="run in this (new) folder and keep the results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wf = Path(args.keep) if args.keep else Path(tmp)
        wf.mkdir(parents=True, exist_ok=bool(not args.keep))
        for part in ("Snakefile", "workflow", "scripts", "config", "profiles"):
            src = ROOT / part
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, wf / part)
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["snakemake", "--cores", str(args.cores), "--configfile", args.configfile],
            cwd=wf,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        total = re.search(r"^total\s+(\d+)", proc.stderr + proc.stdout, flags=re.M)
        jobs = int(total.group(1)) if total else -1
        sgd = [_log_seconds(log) for log in (wf / "logs" / "cells").rglob("*.log")]
    print(f"config {args.configfile}, --cores {args.cores}: {jobs} jobs")
    print(f"wall time: {wall:.1f} s ({wall / 60:.2f} min; target <= 10 min)")
    print(
        f"baseline, summed cell job time (serial, one core): {sum(sgd):.1f} s over {len(sgd)} jobs"
    )
    print(f"speed-up from parallel jobs: {sum(sgd) / wall:.2f}x")


if __name__ == "__main__":
    main()
