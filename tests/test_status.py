"""`run.py status` (weightdyn.status): job states and ETA from a results/logs tree, the progress
lines of the SGD/SGF loops (weightdyn.streams), and a real toy workflow run watched live."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from workflow_helpers import copy_workflow, job_counts, snakemake

from weightdyn import status, streams

TESTS = str(Path(__file__).resolve().parent)
ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}
NOW = 1_800_000_000.0  # a fixed "now" for the fake trees
TOY = {
    "experiment_modules": ["toy_experiment"],
    "sweeps": {"toy_lr": {"experiment": "toy", "lr": [0.5, 1.0], "seed": [0, 1]}},
    "figures": {"formats": ["png"], "dpi": 60},
}


# ---------------------------------------------------------------------------- progress lines


def test_progress_line_states_rate_and_eta_and_parses_back() -> None:
    line = streams.progress_line("SGD", 250, 1000, 8, elapsed=50.0)
    # 5 steps/s, 40 replica-steps/s, 750 steps left at 5 steps/s = 150 s
    assert line == (
        "SGD steps 250/1000 (25%), 5 steps/s, 40 replica-steps/s, elapsed 0:00:50, ETA 0:02:30"
    )
    m = streams.PROGRESS_PATTERN.search(line)
    assert (m["done"], m["total"], m["eta"]) == ("250", "1000", "0:02:30")
    assert streams.progress_line("x", 0, 10, 1, 1.0).endswith("ETA ?")
    final = streams.progress_line("SGD", 100, 4100, 1, 1.0, final=True)  # e.g. diverged
    assert final.endswith("ETA 0:00:00 (stopped)")
    assert streams.PROGRESS_PATTERN.search(final)["eta"] == "0:00:00"
    assert streams.clock(3 * 3600 + 4 * 60 + 5.4) == "3:04:05"


def test_reporter_reports_every_tenth_and_after_the_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter(range(0, 10_000, 10))  # every perf_counter call advances 10 s
    monkeypatch.setattr(streams.time, "perf_counter", lambda: float(next(clock)))
    lines: list[str] = []
    rep = streams.ProgressReporter(lines.append, total=1000, replicas=4, label="SGD", interval=25)
    rep.update(50)  # 5 %, 10 s after start: neither due
    rep.update(60)  # 6 %, 20 s after the last report (the start): not yet
    rep.update(70)  # 30 s: interval passed
    rep.update(100)  # 10 %
    rep.update(1000, force=True)
    assert len(lines) == 3, lines
    # at 70 steps after 30 s: 2.33 steps/s, 930 steps left -> 398.6 s
    assert "steps 70/1000 (7%), 2.33 steps/s, 9.33 replica-steps/s" in lines[0]
    assert lines[0].endswith("elapsed 0:00:30, ETA 0:06:39")
    assert lines[-1].endswith("ETA 0:00:00") and "1000/1000 (100%)" in lines[-1]


# ---------------------------------------------------------------------------- a fake tree


def _stamp(t: float) -> str:
    return datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S,000")


def _log(wf: Path, rel: str, lines: list[tuple[float, str]]) -> None:
    path = wf / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{_stamp(t)} INFO {msg}\n" for t, msg in lines))
    os.utime(path, (lines[-1][0], lines[-1][0]))


def _output(wf: Path, rel: str, seconds: float | None = None) -> None:
    (wf / rel).parent.mkdir(parents=True, exist_ok=True)
    (wf / rel).write_bytes(b"CDF\x01 not empty")
    if seconds is not None:  # Snakemake's metadata record of the job that wrote it
        record = status.record_path(wf, "metadata", rel)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"starttime": NOW - 1000, "endtime": NOW - 1000 + seconds}))


def _mark(wf: Path, rel: str, at: float) -> None:
    marker = status.record_path(wf, "incomplete", rel)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text('{"external_jobid": null}')
    os.utime(marker, (at, at))


@pytest.fixture
def fake_tree(tmp_path: Path) -> tuple[Path, list[status.Job]]:
    """Two toy cells done (103 s by record, 50 s by log), one running with an ETA line, one left;
    the merge left, the figure queued, the agreement table failed in Snakemake's newest log;
    Snakemake holds the lock."""
    wf = tmp_path
    jobs = status.expected_jobs(TOY)
    cells = [j for j in jobs if j.group == "toy"]
    by_group = {j.group: j for j in jobs}
    a, b, c, _ = cells
    _output(wf, a.outputs[0], seconds=103.0)  # record 103 s < log span 100 s + 60 s start-up
    _log(wf, a.log, [(NOW - 1000, "start"), (NOW - 900, "wrote")])
    _output(wf, b.outputs[0])  # no record: the log span
    _log(wf, b.log, [(NOW - 800, "start"), (NOW - 750, "wrote")])
    _mark(wf, c.outputs[0], NOW - 32)
    line = streams.progress_line("SGD", 200, 1000, 8, elapsed=10.0)  # ETA 40 s, 10 s ago
    _log(wf, c.log, [(NOW - 30, "start"), (NOW - 10, line)])
    _mark(wf, by_group["figure"].outputs[0], NOW - 5)  # marked, no log yet: queued
    _log(wf, by_group["table"].log, [(NOW - 600, "start")])  # reported failed by Snakemake:
    (wf / ".snakemake" / "log").mkdir(parents=True)
    (wf / ".snakemake" / "log" / "2027-01-15T080000.000000.snakemake.log").write_text(
        "Error in rule agreement_table:\n    message: None\n    jobid: 1\n"
        "    output: results/agreement/config.html, results/agreement/config.csv\n"
        "    log: logs/agreement/config.log (check log file(s) for error details)\n"
        "Exiting because a job execution failed. Look above for error messages\n"
    )
    (wf / ".snakemake" / "locks").mkdir(parents=True)
    (wf / ".snakemake" / "locks" / "0.input.lock").touch()
    return wf, jobs


def test_expected_jobs_are_the_workflows_jobs(workflow_copy: Path) -> None:
    jobs = status.expected_jobs(TOY, "toy")
    (workflow_copy / "config" / "toy.yaml").write_text(yaml.safe_dump(TOY))
    proc = snakemake(workflow_copy, "-n", "--configfile", "config/toy.yaml", env=ENV)
    counts = job_counts(proc.stdout)
    assert len(jobs) == counts["total"] - counts["all"] == 7
    assert ("results/agreement/toy.html", "results/agreement/toy.csv") in {j.outputs for j in jobs}
    assert sum(j.group == "toy" for j in jobs) == counts["cell"]


def test_states_counts_and_eta_arithmetic(fake_tree: tuple[Path, list[status.Job]]) -> None:
    wf, _ = fake_tree
    statuses, active = status.collect(TOY, wf, NOW)
    rows = {r.group: r for r in status.summarize(statuses)}
    assert active
    assert rows["toy"].counts == {"done": 2, "running": 1, "queued": 0, "failed": 0, "left": 1}
    assert rows["figure"].counts["queued"] == 1 and rows["table"].counts["failed"] == 1
    assert rows["merge"].counts["left"] == 1
    # toy: 2 done jobs took 103 s and 50 s -> 76.5 s per job; the running one has 40 - 10 = 30 s
    # left; the left one 76.5 s. Groups with no timing expect the median done job, 76.5 s.
    assert rows["toy"].work == pytest.approx(30 + 76.5)
    for group in ("merge", "figure", "table"):
        assert rows[group].work == pytest.approx(76.5)
    # 336 s of job time at 2 jobs in flight (1 running + 1 queued)
    wall, unknown = status.eta(list(rows.values()), 2)
    assert wall == pytest.approx(168.0) and unknown == []
    text = status.format_status(statuses, active, NOW)
    assert "ETA 0:02:48 at 2 job(s) at a time" in text
    assert "2 done, 1 running, 1 queued, 1 failed, 2 left" in text
    assert "SGD steps 200/1000 (20%)" in text


def test_without_snakemake_marked_jobs_are_interrupted(
    fake_tree: tuple[Path, list[status.Job]],
) -> None:
    wf, _ = fake_tree
    (wf / ".snakemake" / "locks" / "0.input.lock").unlink()
    statuses, active = status.collect(TOY, wf, NOW)
    rows = {r.group: r for r in status.summarize(statuses)}
    assert not active
    assert rows["toy"].counts["running"] == 0 and rows["toy"].counts["failed"] == 1
    assert rows["figure"].counts["failed"] == 1
    assert any(s.message.startswith("interrupted: SGD steps 200/1000") for s in statuses)
    assert "no Snakemake process holds this directory" in status.format_status(statuses, False, NOW)


def test_a_merge_is_done_only_when_newer_than_its_cells_and_none_in_flight(
    fake_tree: tuple[Path, list[status.Job]],
) -> None:
    wf, jobs = fake_tree
    merge = next(j for j in jobs if j.group == "merge")
    cells = [j for j in jobs if j.group == "toy"]
    for cell in cells:
        _output(wf, cell.outputs[0])
        os.utime(wf / cell.outputs[0], (NOW - 100, NOW - 100))
    (wf / status.record_path(wf, "incomplete", cells[2].outputs[0])).unlink()

    def merge_state() -> str:
        return next(s.state for s in status.collect(TOY, wf, NOW)[0] if s.job == merge)

    _output(wf, merge.outputs[0])
    os.utime(wf / merge.outputs[0], (NOW - 50, NOW - 50))
    assert merge_state() == "done"
    os.utime(wf / cells[0].outputs[0], (NOW - 10, NOW - 10))  # a cell rebuilt after the merge
    assert merge_state() == "left"
    os.utime(wf / cells[0].outputs[0], (NOW - 100, NOW - 100))
    _mark(wf, cells[1].outputs[0], NOW - 5)  # a cell being rebuilt (marked, log older: queued)
    assert merge_state() == "left"


def test_a_running_job_without_eta_expects_its_groups_time(
    fake_tree: tuple[Path, list[status.Job]],
) -> None:
    wf, jobs = fake_tree
    running = [j for j in jobs if j.group == "toy"][2]
    _log(wf, running.log, [(NOW - 30, "start"), (NOW - 10, "theory done")])
    statuses, _ = status.collect(TOY, wf, NOW)
    rows = {r.group: r for r in status.summarize(statuses)}
    assert rows["toy"].work == pytest.approx((76.5 - 30) + 76.5)


def test_markers_decode_long_paths(tmp_path: Path) -> None:
    key = "results/cells/single_layer/" + "N=100_" * 60 + ".nc"  # base64 longer than a name
    _mark(tmp_path, key, NOW)
    path = status.record_path(tmp_path, "incomplete", key)
    assert path.parent.name.startswith("@")
    assert status.incomplete_markers(tmp_path) == {key: NOW}


def test_records_removed_while_read_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snakemake removes a job's incomplete mark as the job ends; a mark listed by the walk but
    gone before its stat is a job that ended, not an error (seen in CI). Without a lock
    directory no Snakemake is active."""
    _mark(tmp_path, "results/a.nc", NOW)
    gone = status.record_path(tmp_path, "incomplete", "results/b.nc")
    walk = os.walk

    def walk_then_remove(root):  # listed by the walk, removed before it is read
        for dirpath, dirs, files in walk(root):
            yield dirpath, dirs, [*files, gone.name]

    monkeypatch.setattr(status.os, "walk", walk_then_remove)
    assert status.incomplete_markers(tmp_path) == {"results/a.nc": NOW}
    assert not status.snakemake_active(tmp_path)  # no lock directory at all


# ---------------------------------------------------------------------------- a real run


@pytest.mark.slow
def test_status_of_a_real_toy_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two toy cells of 2 x 10^5 steps, one at a time: status sees a cell running while
    Snakemake works, then everything done with Snakemake's own records; after an edit of the
    experiment's code, --plan (snakemake --summary) turns the cells and merges back to left."""
    wf = copy_workflow(tmp_path / "wf")
    (wf / "mods").mkdir()
    shutil.copy(Path(TESTS) / "toy_experiment.py", wf / "mods")
    config = {
        "experiment_modules": ["toy_experiment"],
        "sweeps": {
            "toy": {"experiment": "toy", "lr": 0.5, "seed": [0, 1], "steps": 200_000, "figures": []}
        },
    }
    (wf / "config" / "toy.yaml").write_text(yaml.safe_dump(config))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(wf / "mods"), ENV["PYTHONPATH"]]))
    exe = Path(sys.executable).with_name("snakemake")
    cmd = [str(exe), "--configfile", "config/toy.yaml", "--cores", "1"]
    seen = set()
    with open(tmp_path / "snakemake.out", "w+b") as out:
        proc = subprocess.Popen(cmd, cwd=wf, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:  # a failed poll must not leave Snakemake running into the next test
            deadline = time.time() + 300
            while proc.poll() is None and time.time() < deadline:
                statuses, active = status.collect(config, wf, time.time(), name="toy")
                seen |= {(s.job.group, s.state) for s in statuses if active}
                time.sleep(0.2)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        assert proc.returncode == 0, out.read().decode(errors="replace")[-3000:]
    assert ("toy", "running") in seen, seen
    statuses, active = status.collect(config, wf, time.time(), name="toy")
    assert not active and [s.state for s in statuses] == ["done"] * 4  # 2 cells, merge, table
    for s in statuses[:2]:  # Snakemake's metadata record is found (the same path encoding)
        assert status.recorded_seconds(wf, s.job.outputs[0]) is not None
        assert s.duration is not None and s.duration > 0
    assert "4 done; no Snakemake process" in status.status(config, wf, name="toy")

    with open(wf / "mods" / "toy_experiment.py", "a") as f:
        f.write("\n# an edit changes the code hash: Snakemake reruns the toy cells\n")
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    plan = status.snakemake_plan(wf / "config" / "toy.yaml", wf, wf / "Snakefile")
    assert len(plan.pending) == 5, plan  # 2 cells, merge, agreement.html and .csv
    states = [s.state for s in status.collect(config, wf, time.time(), plan, name="toy")[0]]
    assert states == ["left"] * 4


def test_no_eta_before_any_timing(tmp_path: Path) -> None:
    cell = next(j for j in status.expected_jobs(TOY) if j.group == "toy")
    _mark(tmp_path, cell.outputs[0], NOW - 3)
    _log(tmp_path, cell.log, [(NOW - 2, "start")])
    (tmp_path / ".snakemake" / "locks").mkdir(parents=True)
    (tmp_path / ".snakemake" / "locks" / "0.output.lock").touch()
    text = status.status(TOY, tmp_path, NOW)
    assert "1 running, 6 left; ETA ? (no job has finished yet)" in text
