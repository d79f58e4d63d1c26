"""Killing a run loses no finished cell, and the README's recovery command reruns only the rest.

For SIGTERM, SIGINT and SIGKILL sent to the whole snakemake process tree mid-sweep: every netCDF
file left behind opens (outputs are written to a temporary name and renamed), and the recovery run
(``snakemake --unlock`` then ``snakemake --rerun-incomplete``) runs exactly the cells that had not
finished, leaving the finished ones untouched.

Cells that would run for ten minutes, under ``python3 run.py sweep``: a Ctrl-C to the process
group (as a terminal sends it) or a SIGTERM to run.py alone stops them within seconds, prints one
line without a traceback, and the commands as the README gives them (``python3 run.py sweep
--unlock``, then the ``--rerun-incomplete`` command that line prints) rerun exactly those cells.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr
import yaml
from workflow_helpers import ROOT, copy_workflow, snakemake

pytestmark = pytest.mark.slow
THEORY = Path("results/cells/single_layer")


def _config() -> dict:
    """Eight short SGD cells: job processes (rule cell) that take a second or two each; theory-
    only cells are light (rule light_cell) and would all be done before the signal."""
    cfg = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    sweep = cfg["sweeps"]["fig4c"] | {"data_seed": [0, 1], "n_test": 20, "dynamics": "sgd"}
    return {"sweeps": {"fig4c": sweep | {"figures": []}}, "figures": cfg["figures"]}


def _snakemake_exe() -> str:
    exe = Path(sys.executable).with_name("snakemake")
    return str(exe) if exe.exists() else "snakemake"


def _outputs(snakemake_output: str, folder: Path = THEORY) -> set[str]:
    """Cell files (in ``folder``) named on the ``output:`` lines of the jobs snakemake planned
    or ran."""
    return {
        Path(path).name
        for line in snakemake_output.splitlines()
        if line.strip().startswith("output:")
        for path in line.split(":", 1)[1].replace(",", " ").split()
        if path.startswith(str(folder))
    }


JOB = re.compile(r"^(?:local)?rule \w+:\n((?:    .*\n)+)", re.M)


def _started_unfinished(wf: Path) -> set[str]:
    """Cells of jobs the interrupted run's log shows started and not finished (in flight)."""
    (log,) = (wf / ".snakemake" / "log").glob("*.snakemake.log")
    text = log.read_text()
    finished = set(re.findall(r"^Finished jobid: (\d+)", text, re.M))
    cells: set[str] = set()
    for block in JOB.findall(text):
        jobid = re.search(r"^    jobid: (\d+)", block, re.M)
        if jobid and jobid.group(1) not in finished:
            cells |= _outputs(block)
    return cells


def _cells(wf: Path) -> set[str]:
    return {p.name for p in (wf / THEORY).glob("*.nc")}


def _in_flight(wf: Path) -> bool:
    """A cell job has started (its log exists) and not written its file."""
    logs = {p.stem for p in (wf / "logs" / "cells" / "single_layer").glob("*.log")}
    return bool(logs - {Path(name).stem for name in _cells(wf)})


def _default_sigint() -> None:
    """SIGINT as in a terminal. An ignored SIGINT survives exec: in three full-suite runs
    Snakemake and its jobs ran on to the end, their log without a word of the signal, most
    likely ignoring it as the xdist worker did (alone, the test passed every time)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(wf: Path, sig: signal.Signals, after: int) -> set[str]:
    """Run the sweep on one core; send ``sig`` to its process group once ``after`` cells exist
    and the next one is computing, so that a job is in flight."""
    proc = subprocess.Popen(
        [_snakemake_exe(), "--configfile", "config/interrupt.yaml", "--cores", "1"],
        cwd=wf,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )
    try:
        end = time.monotonic() + 300
        while not (len(_cells(wf)) >= after and _in_flight(wf)) and time.monotonic() < end:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(0.3)  # past the job's start-up in Snakemake
        assert proc.poll() is None, "the sweep finished before it could be interrupted"
        os.killpg(proc.pid, sig)
        proc.wait(timeout=120)
    finally:  # nothing of the sweep runs on into the next test
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if sig == signal.SIGKILL:
        time.sleep(0.5)  # let the killed job processes vanish
    return _cells(wf)


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name
)
def test_recovery_reruns_exactly_the_unfinished_cells(sig: signal.Signals, tmp_path: Path) -> None:
    wf = copy_workflow(tmp_path / "wf")
    (wf / "config" / "interrupt.yaml").write_text(yaml.safe_dump(_config()))
    planned = snakemake(wf, "-n", "--configfile", "config/interrupt.yaml").stdout
    all_cells = _outputs(planned)
    present = _interrupt(wf, sig, after=3)
    # a job killed after writing its file but before snakemake registered it is in flight:
    # SIGTERM/SIGINT make snakemake delete its output, SIGKILL leaves it for --rerun-incomplete
    interrupted = all_cells - present | _started_unfinished(wf)
    finished = all_cells - interrupted
    stamps = {name: (wf / THEORY / name).stat().st_mtime_ns for name in finished}
    for path in (wf / "results").rglob("*.nc"):
        xr.open_dataset(path).close()  # no half-written netCDF under an output name
    snakemake(wf, "--unlock", "--configfile", "config/interrupt.yaml")
    recovery = snakemake(
        wf, "--rerun-incomplete", "--configfile", "config/interrupt.yaml", "--cores", "2"
    )
    rerun = _outputs(recovery.stdout + recovery.stderr)
    print(
        f"{sig.name}: {len(finished)} of {len(all_cells)} cells finished before the kill; "
        f"interrupted {sorted(interrupted)}; recovery ran {sorted(rerun)}"
    )
    assert finished and interrupted
    assert rerun == interrupted
    assert {name: (wf / THEORY / name).stat().st_mtime_ns for name in finished} == stamps
    again = snakemake(wf, "-n", "--configfile", "config/interrupt.yaml")
    assert "Nothing to be done" in again.stdout + again.stderr


# ---- interrupting long cells: stopped within seconds, one line, and the printed resume command

LONG = Path("results/cells/toy")
INTERRUPTED = re.compile(
    r"^interrupted: (\d+) running jobs stopped, finished results kept; resume with: (.+)$", re.M
)


def _long_config() -> dict:
    """Two toy cells that wait ten minutes (TOY_PAUSE: long) and one short, a sweep each."""
    toy = {"experiment": "toy", "steps": 50, "figures": []}
    return {
        "experiment_modules": ["toy_experiment"],
        "sweeps": {"long": toy | {"lr": [0.1, 0.2]}, "short": toy | {"lr": 0.5}},
    }


def _run_py(wf: Path, tmp_path: Path) -> dict[str, str]:
    """run.py and pyproject.toml in the copy ``wf``, and the environment that runs it there on
    this interpreter without installing anything: WEIGHTDYN_VENV a venv of links to it, stamped
    as installed for this pyproject.toml (run.py leaves a venv of another checkout alone)."""
    for name in ("run.py", "pyproject.toml"):
        shutil.copy2(ROOT / name, wf / name)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "bin" / "snakemake").symlink_to(_snakemake_exe())
    digest = hashlib.sha256((wf / "pyproject.toml").read_bytes()).hexdigest()
    (venv / ".weightdyn-installed").write_text(digest)
    tests = str(ROOT / "tests")
    path = os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))
    return dict(os.environ, WEIGHTDYN_VENV=str(venv), PYTHONPATH=path)


def _long_cells_in_flight(wf: Path) -> bool:
    """Both long cells started (their logs), the short one written."""
    logs = list((wf / "logs" / "cells" / "toy").glob("lr=0.[12]_*.log"))
    return len(logs) == 2 and len(list((wf / LONG).glob("lr=0.5_*.nc"))) == 1


def _job_processes(wf: Path) -> list[str]:
    """Processes still running in ``wf`` (their working directory), as command lines."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(proc / "cwd")) == wf:
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:  # ended, or not ours to read
            continue
    return found


def _interrupt_long_run(wf: Path, env: dict[str, str], sig: signal.Signals, group: bool):
    """``python3 run.py sweep`` with long cells; ``sig`` to its process group (a terminal's
    Ctrl-C) or to run.py alone once both long cells compute. Returns (exit status, seconds from
    the signal to the exit, output)."""
    cmd = [sys.executable, "run.py", "sweep", "--configfile", "config/long.yaml", "--cores", "3"]
    with open(wf / "run.out", "w+") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=wf,
            env=env | {"TOY_PAUSE": "0.1=600 0.2=600"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_default_sigint,
        )
        try:
            end = time.monotonic() + 120
            while not _long_cells_in_flight(wf) and proc.poll() is None:
                assert time.monotonic() < end, "the long cells did not start"
                time.sleep(0.1)
            time.sleep(3.0)  # the cells compute (after 1 s a loaded CI run counted 1 of 2)
            start = time.monotonic()
            os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
            code = proc.wait(timeout=120)
            seconds = time.monotonic() - start
        finally:  # nothing of the sweep runs on into the next test
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out.seek(0)
        return code, seconds, out.read()


@pytest.mark.parametrize(
    ("sig", "group"),
    [(signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["SIGINT to the process group", "SIGTERM to run.py"],
)
def test_long_cells_stop_within_seconds_and_the_printed_command_resumes(
    sig: signal.Signals, group: bool, tmp_path: Path
) -> None:
    wf = copy_workflow(tmp_path / "wf")
    (wf / "config" / "long.yaml").write_text(yaml.safe_dump(_long_config()))
    env = _run_py(wf, tmp_path)
    code, seconds, output = _interrupt_long_run(wf, env, sig, group)
    print(f"{sig.name}: run.py exited {code} {seconds:.1f} s after the signal; output ends:")
    print("\n".join(output.splitlines()[-4:]))
    assert code == 128 + sig and seconds < 10
    assert "Traceback" not in output and "did not complete successfully" not in output
    (line,) = INTERRUPTED.findall(output)
    assert line == ("2", "python3 run.py sweep --rerun-incomplete --configfile config/long.yaml")
    # the killed jobs are gone within seconds; on a loaded machine (CI with other work) their
    # teardown took longer than the 0.5 s this test once waited, so it polls for up to 5 s
    deadline = time.monotonic() + 5.0
    while _job_processes(wf) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _job_processes(wf) == []
    interrupted = {p.stem + ".nc" for p in (wf / "logs/cells/toy").glob("lr=0.[12]_*.log")}
    for name in interrupted:
        log = (wf / "logs/cells/toy" / name).with_suffix(".log").read_text()
        assert log.endswith(f"stopped: the run was interrupted (signal {int(sig)})\n")
    short = next((wf / LONG).glob("lr=0.5_*.nc"))
    stamp = short.stat().st_mtime_ns

    def run_py(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "run.py", "sweep", *args],
            cwd=wf,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    run_py("--unlock", "--configfile", "config/long.yaml")
    recovery = run_py(*shlex.split(line[1])[3:])
    rerun = _outputs(recovery, LONG)
    print(f"the recovery command ran {sorted(rerun)}")
    assert rerun == interrupted and len(rerun) == 2
    assert short.stat().st_mtime_ns == stamp
