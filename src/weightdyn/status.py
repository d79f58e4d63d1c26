"""Progress of a sweep read from the files it leaves: expected outputs, job logs, Snakemake markers.

``python3 run.py status [--configfile C] [--directory D] [--watch SECONDS]`` prints, per
experiment, how many cells are done, running, queued, failed and left, and an ETA; then the latest
progress line of each running job. Nothing here talks to Snakemake or the scheduler: it reads the
working directory only, so it works offline, beside a local run, and beside a SLURM run (the jobs
write their logs on the shared filesystem, the main Snakemake process its markers and log).

A job (one output set of the config: a cell, a data set, a merge, a figure) is

- **running** when Snakemake marked its outputs incomplete (``.snakemake/incomplete``, written
  when the job starts or is submitted, removed when it ends) while a Snakemake process holds the
  directory's lock, and its log was (re)written after the mark; **queued** when marked but its
  log is older (a SLURM job waiting for a node, or a local job starting);
- **done** when its outputs exist, are non-empty, are not marked, are newer than its inputs and
  no input job is running or queued (Snakemake's own rerun rule for times; a changed parameter
  or code hash is not seen here);
- **failed** when the newest Snakemake log reports an error in it, or it is still marked while
  no Snakemake process runs (interrupted); **left** otherwise.

Times come from the job logs (``weightdyn.joblog``: one timestamped line per message) and
Snakemake's records (``.snakemake/metadata``). A done job took its record's start to end (with its
start-up), at most :data:`STARTUP_MAX` longer than its log's first to last line (the rest is
queueing). A running job's remaining time is its latest progress line's ETA
(``weightdyn.streams.progress_line``) less the time since that line, else its expected time less
its elapsed time. Expected times scale with the job's requested run time (the experiment's
``resources``, proportional to the cell's work), calibrated per experiment on its done jobs (else
on its running jobs' projected totals, else the median done job). The ETA is the remaining job
time divided by the jobs Snakemake has in flight (running + queued).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weightdyn import configfile, experiments, sweep
from weightdyn.streams import PROGRESS_PATTERN, clock

STATES = ("done", "running", "queued", "failed", "left")
#: seconds of a job's start-up (interpreter, imports, Snakemake's script preamble) counted at most
STARTUP_MAX = 60.0
_REPLICA_RATE = re.compile(r", \S+ replica-steps/s")  # left out of the running jobs' lines
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) \w+ (.*)$")


@dataclass(frozen=True)
class Job:
    """One job the config asks for: its group (experiment name for cells; ``data``, ``merge``,
    ``figure``, ``table`` otherwise), its outputs, log and inputs (relative to the working
    directory) and its expected cost relative to the other jobs of its group."""

    group: str
    name: str
    outputs: tuple[str, ...]
    log: str
    weight: float = 1.0
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class LogInfo:
    """A job log: times (seconds since the epoch) of its first and last timestamped lines, its
    last message and its latest progress line (time, message, ETA in seconds or None)."""

    start: float
    end: float
    last: str
    progress: tuple[float, str, float | None] | None


@dataclass(frozen=True)
class JobStatus:
    """A job's state and times in seconds: ``duration`` (done), ``elapsed`` and ``remaining``
    (running; remaining None when unknown), ``projected`` (running: elapsed + remaining from its
    own ETA line, else None) and its log's latest progress message."""

    job: Job
    state: str
    duration: float | None = None
    elapsed: float | None = None
    remaining: float | None = None
    projected: float | None = None
    message: str = ""


# ------------------------------------------------------------------------- the config's jobs


def _cell_weight(exp: experiments.Experiment, params: Mapping[str, Any]) -> float:
    if exp.resources is None:
        return 1.0
    return float(exp.resources(params, 1)["runtime"])


def _sweep_jobs(s: sweep.Sweep) -> list[Job]:
    """The data sets and cells of one sweep, its merge and summary (workflow/rules/sweep.smk),
    each after the jobs it reads."""
    exp = experiments.get(s.experiment)
    jobs = []
    for c in s.cells:
        inputs: tuple[str, ...] = ()
        if exp.data is not None:
            stem = f"{exp.data.name}/{sweep.data_id(exp, c.params)}"
            inputs = (f"results/data/{stem}.nc",)
            jobs.append(Job("data", stem, inputs, f"logs/data/{stem}.log"))
        log = f"logs/cells/{c.experiment}/{c.id}.log"
        jobs.append(Job(s.experiment, c.id, (c.path,), log, _cell_weight(exp, c.params), inputs))
    cells = tuple(c.path for c in s.cells)
    jobs.append(
        Job("merge", s.name, (f"results/{s.name}.nc",), f"logs/merge/{s.name}.log", 1, cells)
    )
    if exp.summarize is not None:
        stem = f"{s.name}.summary"
        jobs.append(Job("merge", stem, (f"results/{stem}.nc",), f"logs/merge/{stem}.log", 1, cells))
    return jobs


def _merged(name: str, summary: bool) -> str:
    return f"results/{name}.summary.nc" if summary else f"results/{name}.nc"


def expected_jobs(config: Mapping[str, Any], name: str = "config") -> list[Job]:
    """Every job of ``config`` (the rules' outputs, logs and inputs, workflow/rules/*.smk), each
    once and after the jobs it reads; raises ConfigError as the workflow does. ``name`` is the
    config's name (:func:`weightdyn.sweep.config_name`), which names its agreement table."""
    style = sweep.check_config(config)
    sweeps = sweep.expand_sweeps(config)
    views = sweep.expand_views(config, sweeps)
    jobs: dict[tuple[str, ...], Job] = {}
    for s in sweeps.values():
        for job in _sweep_jobs(s):
            jobs.setdefault(job.outputs, job)
    for key, view in views.items():
        summary = experiments.get(view.experiment).figures[view.figure].source == "summary"
        inputs = tuple(_merged(v, summary) for v in view.sweeps)  # common.smk: view_inputs
        outputs = tuple(f"results/figures/{key}.{ext}" for ext in style["formats"])
        jobs[outputs] = Job("figure", key, outputs, f"logs/figures/{key}.log", 1, inputs)
    if sweeps:
        outputs = (f"results/agreement/{name}.html", f"results/agreement/{name}.csv")
        inputs = tuple(  # common.smk: sweep_source
            _merged(n, experiments.get(s.experiment).summarize is not None)
            for n, s in sweeps.items()
        )
        log = f"logs/agreement/{name}.log"
        jobs[outputs] = Job("table", "agreement", outputs, log, 1, inputs)
    return list(jobs.values())


# ------------------------------------------------------------------------ reading the files


def _stamp(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()


def _seconds(text: str) -> float | None:
    if text == "?":
        return None
    h, m, s = (int(x) for x in text.split(":"))
    return 3600.0 * h + 60.0 * m + s


def read_log(path: str | os.PathLike) -> LogInfo | None:
    """The times and latest progress line of a job log (None if missing or without a stamp)."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return None
    stamped = [(m, _stamp(m[1]) + int(m[2]) / 1000.0) for m in map(_STAMP.match, lines) if m]
    if not stamped:
        return None
    progress = None
    for m, t in stamped:
        p = PROGRESS_PATTERN.search(m[3])
        if p:
            progress = (t, m[3], _seconds(p["eta"]))
    return LogInfo(stamped[0][1], stamped[-1][1], stamped[-1][0][3], progress)


def record_path(workdir: str | os.PathLike, kind: str, key: str) -> Path:
    """Where Snakemake keeps its ``kind`` record (``metadata``, ``incomplete``) of output ``key``:
    the urlsafe base64 of the path, split into ``@``-prefixed directories when longer than a
    file name (snakemake.persistence.file)."""
    root = Path(workdir, ".snakemake", kind)
    try:
        n = max(int(os.pathconf(root if root.exists() else workdir, "PC_NAME_MAX")), 2) - 1
    except (OSError, ValueError):
        n = 254
    code = base64.urlsafe_b64encode(key.encode()).decode()
    parts = [code[i : i + n] for i in range(0, len(code), n)]
    return root.joinpath(*(f"@{p}" for p in parts[:-1]), parts[-1])


def incomplete_markers(workdir: str | os.PathLike) -> dict[str, float]:
    """Outputs Snakemake marked incomplete (:func:`record_path`) -> time of the mark."""
    root = Path(workdir) / ".snakemake" / "incomplete"
    markers = {}
    for dirpath, _, files in os.walk(root):
        parts = Path(dirpath).relative_to(root).parts
        for name in files:
            if name == "migration_underway":
                continue
            code = "".join(p.removeprefix("@") for p in (*parts, name))
            try:
                key = base64.urlsafe_b64decode(code).decode()
            except (ValueError, UnicodeDecodeError):
                continue
            marked = _mtime(Path(dirpath) / name)
            if marked is not None:  # else Snakemake removed the mark as we read: the job ended
                markers[key] = marked
    return markers


def recorded_seconds(workdir: str | os.PathLike, output: str) -> float | None:
    """Start to end of the job that wrote ``output``, by Snakemake's metadata record (under
    SLURM the start is the submission); None without a record."""
    try:
        record = json.loads(record_path(workdir, "metadata", output).read_text())
        return float(record["endtime"]) - float(record["starttime"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def snakemake_active(workdir: str | os.PathLike) -> bool:
    """Whether a Snakemake process holds the directory (its lock files in .snakemake/locks)."""
    try:
        return any((Path(workdir) / ".snakemake" / "locks").iterdir())
    except OSError:  # no lock directory, or Snakemake removed it as we read
        return False


def failed_outputs(workdir: str | os.PathLike) -> set[str]:
    """Outputs of the jobs the newest Snakemake log reports failed (its ``Error in rule`` blocks,
    ``    output: a, b`` lines); a dry run writes no log."""
    logs = sorted((Path(workdir) / ".snakemake" / "log").glob("*.snakemake.log"))
    if not logs:
        return set()
    try:
        lines = logs[-1].read_text(errors="replace").splitlines()
    except OSError:  # removed between the listing and the read (a user clearing .snakemake/log)
        return set()
    failed, in_error = set(), False
    for line in lines:
        if line.startswith("Error in rule "):
            in_error = True
        elif in_error and line.startswith("    output: "):
            failed.update(o.strip() for o in line.removeprefix("    output: ").split(","))
        elif not line.startswith("    "):
            in_error = False
    return failed


@dataclass(frozen=True)
class Plan:
    """Outputs Snakemake would (re)build (``pending``), as planned at time ``at``."""

    pending: frozenset[str]
    at: float


def snakemake_plan(
    configfile: str | os.PathLike,
    workdir: str | os.PathLike,
    snakefile: str | os.PathLike = "Snakefile",
) -> Plan:
    """Snakemake's own plan, ``snakemake --summary`` (no lock taken, nothing run): the outputs
    whose plan is "update pending", e.g. cells whose parameters or code hash changed."""
    exe = Path(sys.executable).with_name("snakemake")
    cmd = [str(exe) if exe.exists() else "snakemake", "--summary", "-s", str(snakefile)]
    cmd += ["--configfile", str(configfile), "-d", str(workdir)]
    at = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rows = (line.split("\t") for line in proc.stdout.splitlines())
    return Plan(frozenset(r[0] for r in rows if len(r) >= 6 and r[5] == "update pending"), at)


@dataclass(frozen=True)
class SnakemakeState:
    """What Snakemake left in the working directory: marked outputs (-> time of the mark),
    whether a Snakemake process holds the lock, the failed outputs of its newest log, and its
    plan if one was asked for."""

    markers: dict[str, float]
    active: bool
    failed: set[str]
    plan: Plan | None = None


def snakemake_state(workdir: str | os.PathLike, plan: Plan | None = None) -> SnakemakeState:
    """:class:`SnakemakeState` of ``workdir`` (:func:`incomplete_markers`, :func:`snakemake_active`,
    :func:`failed_outputs`)."""
    return SnakemakeState(
        incomplete_markers(workdir), snakemake_active(workdir), failed_outputs(workdir), plan
    )


# ------------------------------------------------------------------------------- job states


def _up_to_date(
    workdir: Path, job: Job, upstream: Mapping[str, JobStatus], plan: Plan | None
) -> bool:
    """Outputs present and non-empty, newer than every present input, no input job in flight,
    and not pending in Snakemake's plan unless rebuilt since."""
    if any(upstream[i].state in ("running", "queued") for i in job.inputs if i in upstream):
        return False
    try:
        stats = [(workdir / o).stat() for o in job.outputs]
    except OSError:
        return False
    inputs = [t for t in (_mtime(workdir / i) for i in job.inputs) if t is not None]
    newest = max(inputs, default=float("-inf"))
    if plan is not None and plan.pending.intersection(job.outputs):
        newest = max(newest, plan.at)
    return all(st.st_size > 0 and st.st_mtime >= newest for st in stats)


def _running(job: Job, log: LogInfo | None, now: float) -> JobStatus:
    if log is None:  # started, nothing written yet
        return JobStatus(job, "running", elapsed=0.0)
    elapsed = max(now - log.start, 0.0)
    if log.progress is None or log.progress[2] is None:
        return JobStatus(job, "running", elapsed=elapsed, message=log.last)
    t, message, eta = log.progress
    remaining = max(eta - (now - t), 0.0)
    return JobStatus(
        job,
        "running",
        elapsed=elapsed,
        remaining=remaining,
        projected=elapsed + remaining,
        message=message,
    )


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def done_seconds(log: LogInfo | None, recorded: float | None) -> float | None:
    """A done job's time: Snakemake's record (start-up included), but at most
    :data:`STARTUP_MAX` seconds longer than its log's span (the rest is queueing); either alone
    when the other is missing."""
    if log is None:
        return recorded
    span = log.end - log.start
    return span if recorded is None else min(recorded, span + STARTUP_MAX)


def job_status(
    workdir: str | os.PathLike,
    job: Job,
    sm: SnakemakeState,
    now: float,
    upstream: Mapping[str, JobStatus] | None = None,
) -> JobStatus:
    """The state of one job from its outputs, its log, Snakemake's state and the states of the
    jobs it reads (``upstream``: output -> status; module doc)."""
    workdir = Path(workdir)
    log_time = _mtime(workdir / job.log)
    marks = [sm.markers[o] for o in job.outputs if o in sm.markers]
    if marks and sm.active:
        if log_time is None or log_time < max(marks) - 1.0:
            return JobStatus(job, "queued")  # the log is missing or from an earlier run
        return _running(job, read_log(workdir / job.log), now)
    if not marks and _up_to_date(workdir, job, upstream or {}, sm.plan):
        log = read_log(workdir / job.log)
        duration = done_seconds(log, recorded_seconds(workdir, job.outputs[0]))
        return JobStatus(job, "done", duration=duration)
    if marks or sm.failed.intersection(job.outputs):
        log = read_log(workdir / job.log)
        why = "interrupted" if marks else "failed"
        return JobStatus(job, "failed", message=why if log is None else f"{why}: {log.last}")
    return JobStatus(job, "left")


# ---------------------------------------------------------------------------------- the ETA


def seconds_per_weight(statuses: Sequence[JobStatus]) -> float | None:
    """Calibration of one group: seconds per unit of requested run time, from its done jobs'
    durations, else from its running jobs' projected totals; None if neither exists."""
    done = [(s.duration, s.job.weight) for s in statuses if s.duration is not None]
    if not done:
        done = [(s.projected, s.job.weight) for s in statuses if s.projected is not None]
    total = sum(w for _, w in done)
    return sum(d for d, _ in done) / total if done and total > 0 else None


def remaining_work(statuses: Sequence[JobStatus], fallback: float | None = None) -> float | None:
    """Seconds of job time one group still needs; a group without timing of its own expects
    ``fallback`` seconds for a job of its mean weight (None: unknown)."""
    rate = seconds_per_weight(statuses)
    if rate is None and fallback is not None:
        mean_weight = sum(s.job.weight for s in statuses) / len(statuses)
        rate = fallback / mean_weight if mean_weight > 0 else None
    work = 0.0
    for s in statuses:
        if s.state == "done":
            continue
        expected = None if rate is None else rate * s.job.weight
        if s.state == "running" and s.remaining is not None:
            work += s.remaining
        elif expected is None:
            return None
        elif s.state == "running":
            work += max(expected - (s.elapsed or 0.0), 0.0)
        else:
            work += expected
    return work


@dataclass(frozen=True)
class Row:
    """One line of the table: a group's counts per state and its remaining job time."""

    group: str
    counts: dict[str, int]
    work: float | None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def summarize(statuses: Sequence[JobStatus]) -> list[Row]:
    """One :class:`Row` per group, cell experiments first (in config order), then the rest; a
    group with no timing of its own expects the median time of all done jobs."""
    groups: dict[str, list[JobStatus]] = {}
    for s in statuses:
        groups.setdefault(s.job.group, []).append(s)
    tail = ("data", "merge", "figure", "table")
    order = [g for g in groups if g not in tail] + [g for g in tail if g in groups]
    durations = [s.duration for s in statuses if s.duration is not None]
    fallback = statistics.median(durations) if durations else None
    return [
        Row(
            g,
            {k: sum(s.state == k for s in groups[g]) for k in STATES},
            remaining_work(groups[g], fallback),
        )
        for g in order
    ]


def eta(rows: Sequence[Row], parallel: int) -> tuple[float, list[str]]:
    """Wall time until every job is done at ``parallel`` jobs at a time, counting the groups
    whose remaining work is known, and the groups left out (no timing yet)."""
    known = [r.work for r in rows if r.work is not None]
    unknown = [r.group for r in rows if r.work is None]
    return sum(known) / max(parallel, 1), unknown


# ------------------------------------------------------------------------------- the report


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = round(width * done / total) if total else width
    return "#" * filled + "." * (width - filled)


def _work_text(work: float | None) -> str:
    return "?" if work is None else "-" if work == 0 else clock(work)


def _summary_line(rows: Sequence[Row], parallel: int, active: bool) -> str:
    total = {k: sum(r.counts[k] for r in rows) for k in STATES}
    counts = ", ".join(f"{total[k]} {k}" for k in STATES if total[k])
    if not active:
        return f"{counts}; no Snakemake process holds this directory"
    wall, unknown = eta(rows, parallel)
    if unknown and wall == 0:
        return f"{counts}; ETA ? (no job has finished yet)"
    text = f"{counts}; ETA {clock(wall)} at {max(parallel, 1)} job(s) at a time"
    return text + (f" (not counted, no timing yet: {', '.join(unknown)})" if unknown else "")


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."


def _table(rows: Sequence[Row]) -> list[str]:
    name_width = max([len("experiment"), *(len(r.group) for r in rows)])
    head = f"{'experiment':<{name_width}}  {'':20}  " + "  ".join(f"{k:>7}" for k in STATES)
    lines = [head + f"  {'work':>8}"]
    for r in rows:
        counts = "  ".join(f"{r.counts[k]:>7}" for k in STATES)
        bar = _bar(r.counts["done"], r.total)
        lines.append(f"{r.group:<{name_width}}  {bar}  {counts}  {_work_text(r.work):>8}")
    return lines


def _job_lines(statuses: Sequence[JobStatus], state: str, most: int, width: int) -> list[str]:
    """The running jobs (elapsed, latest progress line) or the failed ones (log, last line)."""
    chosen = [s for s in statuses if s.state == state]
    if not chosen:
        return []
    if state == "running":
        lines = ["", "running [elapsed, left], latest progress or log line:"]
        for s in chosen[:most]:
            left = "?" if s.remaining is None else clock(s.remaining)
            name = f"  [{clock(s.elapsed or 0)}, {left}] {s.job.group}/{s.job.name}"
            message = _REPLICA_RATE.sub("", s.message)
            lines += [_cut(name, width)] + ([_cut(f"      {message}", width)] if message else [])
    else:
        lines = ["", f"{state} (its log):"]
        lines += [_cut(f"  {s.job.log}  {s.message}", width) for s in chosen[:most]]
    return lines + ([f"  ... and {len(chosen) - most} more"] if len(chosen) > most else [])


def format_status(
    statuses: Sequence[JobStatus],
    active: bool,
    now: float,
    max_running: int = 12,
    width: int = 100,
) -> str:
    """The table of :func:`summarize`, the ETA, the running jobs' latest progress lines and the
    failed jobs' logs (lines cut to ``width`` characters)."""
    rows = summarize(statuses)
    parallel = sum(r.counts["running"] + r.counts["queued"] for r in rows)
    lines = [*_table(rows), "", _summary_line(rows, parallel, active)]
    lines += _job_lines(statuses, "running", max_running, width)
    lines += _job_lines(statuses, "failed", max_running, width)
    stamp = datetime.datetime.fromtimestamp(now).strftime("%Y-%m-%d %H:%M:%S")
    legend = "work: job time still needed (H:MM:SS), from the job logs"
    return f"weightdyn status at {stamp}\n" + "\n".join([*lines, "", legend])


def collect(
    config: Mapping[str, Any],
    workdir: str | os.PathLike,
    now: float,
    plan: Plan | None = None,
    *,
    name: str = "config",
) -> tuple[list[JobStatus], bool]:
    """Every job's :class:`JobStatus` (``config`` named ``name``, :func:`expected_jobs`) and
    whether a Snakemake process holds ``workdir``."""
    sm = snakemake_state(workdir, plan)
    by_output: dict[str, JobStatus] = {}
    statuses = []
    for job in expected_jobs(config, name):  # each after the jobs it reads
        st = job_status(workdir, job, sm, now, by_output)
        by_output.update(dict.fromkeys(job.outputs, st))
        statuses.append(st)
    return statuses, sm.active


def status(
    config: Mapping[str, Any],
    workdir: str | os.PathLike,
    now: float | None = None,
    plan: Plan | None = None,
    *,
    name: str = "config",
) -> str:
    """The status report of ``config``'s sweep (named ``name``) in ``workdir`` at time ``now``
    (default: now)."""
    now = time.time() if now is None else now
    return format_status(*collect(config, workdir, now, plan, name=name), now)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m weightdyn.status [--configfile C] [--directory D] [--watch SECONDS] [--plan]``;
    with ``--watch`` the report refreshes until every job is done (or Ctrl-C)."""
    parser = argparse.ArgumentParser(prog="run.py status", description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", default="config/config.yaml")
    parser.add_argument("--directory", "-d", default=".", help="Snakemake's working directory")
    parser.add_argument("--watch", type=float, metavar="SECONDS", help="refresh every SECONDS")
    parser.add_argument(
        "--plan",
        action="store_true",
        help="ask Snakemake once (snakemake --summary) which existing outputs it will rebuild "
        "(changed parameters or code); seconds to a minute",
    )
    args = parser.parse_args(argv)
    try:
        config = configfile.load(args.configfile) or {}
        name = sweep.config_name(config, [args.configfile])
        plan = snakemake_plan(args.configfile, args.directory) if args.plan else None
        while True:
            now = time.time()
            statuses, active = collect(config, args.directory, now, plan, name=name)
            if args.watch and sys.stdout.isatty():
                print("\033[H\033[J", end="")
            width = shutil.get_terminal_size((100, 24)).columns
            print(format_status(statuses, active, now, width=width), flush=True)
            if not args.watch or all(s.state == "done" for s in statuses):
                return 0
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return 0
    except experiments.ConfigError as err:
        print(f"invalid config: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        print(f"snakemake --summary failed:\n{err.stderr}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
