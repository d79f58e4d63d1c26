"""What a sweep costs on this machine: wall time, CPU time per rule and the critical path.

Usage:
    python benchmarks/sweep_cost.py [--cores 2] [--configfile config/paper.yaml]
                                    [--keep DIR] [--log SNAKEMAKE_LOG] [targets ...]

Copies the workflow into a new folder (a temporary one unless ``--keep``), runs snakemake from
scratch with the given config and targets (default: every job of the config; a target such as
``results/fig4a.nc`` runs a named part) and prints, from the run's own logs:

- wall time, job count, and the summed CPU time of the jobs with the bound it implies
  (CPU / cores: no schedule on ``--cores`` cores finishes sooner), and the wall time over that
  bound (how well the schedule packs the cores; it varies less from run to run than the CPU
  time of this shared machine);
- per rule: jobs, summed job wall and CPU time, the longest job;
- the critical path: the chain of dependent jobs with the largest summed wall time (the other
  bound: no number of cores finishes sooner), job by job;
- the longest jobs, with the cores they were given.

Job start and end come from Snakemake's log (1 s resolution); CPU time and peak memory from the
``cost:`` line every job writes to its log at exit (weightdyn.joblog.cost_line). ``--log`` reads
a finished (or interrupted) run instead of running one: its Snakemake log (``sweep_cost.log`` of a
``--keep`` folder, or one under ``.snakemake/log``); the job logs are read from the nearest parent
folder holding ``logs/``.

Targets: config/paper.yaml within 30 minutes on 2 cores, config/config.yaml within 5.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
COST = re.compile(r"cost: wall ([\d.]+) s, cpu ([\d.]+) s .*max rss (\d+) MB")


@dataclass
class Job:
    """One job of a run, as Snakemake's log and the job's own log describe it."""

    jobid: int
    rule: str
    start: float
    end: float = float("nan")
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    log: str = ""
    threads: int = 1
    cpu: float = float("nan")
    rss_mb: float = float("nan")

    @property
    def wall(self) -> float:
        return self.end - self.start

    @property
    def name(self) -> str:
        return f"{self.rule} {self.outputs[0].removeprefix('results/') if self.outputs else ''}"


def _files(line: str) -> list[str]:
    """The paths of an ``input:``/``output:``/``log:`` line, without annotations like (update)."""
    parts = line.split(":", 1)[1].split(",")
    return [re.sub(r" \(.*\)$", "", part.strip()) for part in parts if part.strip()]


def parse_jobs(log_text: str) -> dict[int, Job]:
    """The jobs of a Snakemake log: rule, start and finish time, files, threads."""
    jobs: dict[int, Job] = {}
    now, pending = 0.0, None
    for line in log_text.splitlines():
        if m := STAMP.match(line):
            now = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
        elif m := re.match(r"^(?:local)?rule (\w+):$", line):
            pending = Job(jobid=-1, rule=m.group(1), start=now)
        elif pending is not None and (m := re.match(r"^    (\w+): (.*)$", line)):
            key, value = m.groups()
            if key == "jobid":
                pending.jobid = int(value)
                jobs[pending.jobid] = pending
            elif key in ("input", "output"):
                getattr(pending, f"{key}s").extend(_files(line.strip()))
            elif key == "log":
                pending.log = _files(line.strip())[0]
            elif key == "threads":
                pending.threads = int(value)
        elif m := re.match(r"^Finished jobid: (\d+)", line):
            jobs[int(m.group(1))].end = now
        elif not line.startswith(" "):
            pending = None
    return jobs


def read_costs(jobs: dict[int, Job], folder: Path) -> None:
    """Fill CPU time and peak memory from each job's log (its last ``cost:`` line)."""
    for job in jobs.values():
        path = folder / job.log
        if job.log and path.exists():
            found = COST.findall(path.read_text())
            if found:
                job.cpu, job.rss_mb = float(found[-1][1]), float(found[-1][2])


def critical_path(jobs: dict[int, Job]) -> list[Job]:
    """The chain of jobs, each needing an output of the one before, with the largest wall sum."""
    producer = {out: job.jobid for job in jobs.values() for out in job.outputs}
    best: dict[int, tuple[float, int | None]] = {}

    def finish(jid: int) -> float:
        if jid not in best:
            parents = {producer[f] for f in jobs[jid].inputs if f in producer} - {jid}
            before = max(((finish(p), p) for p in parents), default=(0.0, None))
            best[jid] = (before[0] + max(jobs[jid].wall, 0.0), before[1])
        return best[jid][0]

    last = max(jobs, key=finish)
    path = []
    while last is not None:
        path.append(jobs[last])
        last = best[last][1]
    return path[::-1]


def report(jobs: dict[int, Job], wall: float, cores: int, config: str) -> None:
    """Print the totals, the per-rule table, the critical path and the longest jobs."""
    done = [job for job in jobs.values() if job.end == job.end and job.rule != "all"]
    cpu = sum(job.cpu for job in done if job.cpu == job.cpu)
    print(f"config {config}, --cores {cores}: {len(done)} jobs,", end=" ")
    print(f"wall {wall:.0f} s ({wall / 60:.1f} min)")
    print(f"CPU time of the jobs: {cpu:.0f} s; bound CPU / cores = {cpu / cores:.0f} s", end="; ")
    print(f"wall / bound = {wall / (cpu / cores):.2f} (cores left idle, and Snakemake's own time)")
    print(f"\n{'rule':<16}{'jobs':>6}{'job wall s':>12}{'CPU s':>10}{'longest s':>11}")
    by_rule: dict[str, list[Job]] = defaultdict(list)
    for job in done:
        by_rule[job.rule].append(job)
    for rule, group in sorted(by_rule.items(), key=lambda kv: -sum(j.wall for j in kv[1])):
        rule_cpu = sum(j.cpu for j in group if j.cpu == j.cpu)
        longest = max(j.wall for j in group)
        total = sum(j.wall for j in group)
        print(f"{rule:<16}{len(group):>6}{total:>12.0f}{rule_cpu:>10.0f}{longest:>11.0f}")
    path = critical_path({job.jobid: job for job in done})
    length = sum(job.wall for job in path)
    share = length / wall
    print(f"\ncritical path: {len(path)} jobs, {length:.0f} s ({share:.0%} of the wall time)")
    for job in path:
        print(f"  {job.wall:>7.0f} s  {job.name}")
    print("\nlongest jobs:")
    for job in sorted(done, key=lambda j: -j.wall)[:8]:
        print(f"  {job.wall:>7.0f} s  cpu {job.cpu:>7.0f} s  threads {job.threads}  {job.name}")


def run(args: argparse.Namespace, folder: Path) -> tuple[str, float]:
    """Run snakemake from scratch in ``folder``; return its log text and wall time."""
    for part in ("Snakefile", "workflow", "scripts", "config", "profiles"):
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, folder / part)
    snakemake = Path(sys.executable).with_name("snakemake")
    cmd = [snakemake, "--cores", str(args.cores), "--configfile", args.configfile, *args.targets]
    out = folder / "sweep_cost.log"  # Snakemake's output, to watch while it runs
    t0 = time.perf_counter()
    with out.open("w") as f:
        proc = subprocess.run(cmd, cwd=folder, stdout=f, stderr=subprocess.STDOUT, check=False)
    wall = time.perf_counter() - t0
    text = out.read_text()
    if proc.returncode != 0:
        raise SystemExit(text[-3000:])
    return text, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--configfile", default="config/config.yaml")
    parser.add_argument("--keep", help="run in this (new) folder and keep the results")
    parser.add_argument("--log", help="report on this finished run's snakemake log instead")
    parser.add_argument("targets", nargs="*")
    args = parser.parse_args()
    if args.log:
        log = Path(args.log)
        text = log.read_text()
        jobs = parse_jobs(text)
        folder = next(p for p in log.resolve().parents if (p / "logs").is_dir())
        read_costs(jobs, folder)
        finished = [j for j in jobs.values() if j.end == j.end]
        wall = max(j.end for j in finished) - min(j.start for j in jobs.values())
        report(jobs, wall, args.cores, f"of {log}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=not args.keep)
        text, wall = run(args, folder)
        jobs = parse_jobs(text)
        read_costs(jobs, folder)
        report(jobs, wall, args.cores, args.configfile)


if __name__ == "__main__":
    main()
