"""Damaged and foreign cell files are found, named and rebuilt (issue 12, item 1).

On a finished run of the toy experiment (tests/toy_experiment.py): one cell file truncated to
0 bytes, one to half its size, one replaced by a valid netCDF of another cell. The merge refuses
them, naming all three and the command that rebuilds them, and keeps the previous merged file;
`python3 run.py check` finds the same three; after it, a rerun recomputes exactly those cells and
the merges and figures above them, and the merged datasets equal the originals.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr
import yaml
from workflow_helpers import copy_workflow, job_counts, snakemake

TESTS = str(Path(__file__).resolve().parent)
ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}
CONFIG = {
    "experiment_modules": ["toy_experiment"],
    "sweeps": {
        "toy_lr": {"experiment": "toy", "lr": [0.5, 1.0], "seed": [0, 1], "steps": 2000},
        "toy_other": {"experiment": "toy", "lr": [1.5], "seed": [0], "steps": 2000},
    },
    "figures": {"formats": ["png"], "dpi": 40},
}
MERGED = ("results/toy_lr.nc", "results/toy_other.nc")


def _cell(wf: Path, lr: str, seed: int) -> Path:
    (path,) = (wf / "results/cells/toy").glob(f"lr={lr}_seed={seed}__*.nc")
    return path


def _check(wf: Path, *args: str) -> subprocess.CompletedProcess:
    """`python3 run.py check` (the module it runs) in the workflow copy."""
    env = dict(os.environ, **ENV)
    cmd = [sys.executable, "-m", "weightdyn.integrity", "--configfile", "config/toy.yaml", *args]
    return subprocess.run(cmd, cwd=wf, env=env, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """A finished toy run with three bad cell files; the originals saved beside it."""
    wf = copy_workflow(tmp_path_factory.mktemp("damaged") / "wf")
    (wf / "config/toy.yaml").write_text(yaml.safe_dump(CONFIG))
    snakemake(wf, "--configfile", "config/toy.yaml", "--cores", "2", env=ENV)
    saved = wf.parent / "originals"
    saved.mkdir()
    for path in MERGED:
        shutil.copy(wf / path, saved / Path(path).name)
    bad = {"empty": _cell(wf, "0.5", 0), "half": _cell(wf, "1", 1), "foreign": _cell(wf, "1", 0)}
    bad["empty"].write_bytes(b"")
    size = bad["half"].stat().st_size
    with open(bad["half"], "r+b") as f:
        f.truncate(size // 2)
    shutil.copy(_cell(wf, "1.5", 0), bad["foreign"])  # a valid file, of another cell
    return wf, bad


def test_the_merge_names_every_bad_file_and_keeps_the_previous_result(damaged) -> None:
    wf, bad = damaged
    before = (wf / MERGED[0]).read_bytes()
    proc = snakemake(wf, "--configfile", "config/toy.yaml", "--cores", "1", check=False, env=ENV)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "3 of 4 input files cannot be used" in out
    for kind, path in bad.items():
        rel = path.relative_to(wf).as_posix()
        assert rel in out, kind
    assert "empty (0 bytes)" in out and "truncated" in out and "foreign: cell_lr is '1.5'" in out
    assert "--forcerun" in out
    assert "Restored previous version of results/toy_lr.nc" in out
    assert (wf / MERGED[0]).read_bytes() == before  # the previous merge is left in place
    log = (wf / "logs/merge/toy_lr.log").read_text()
    assert "job failed: weightdyn.integrity.DamagedFiles" in log


def test_check_finds_them_and_a_rerun_rebuilds_exactly_those(damaged) -> None:
    wf, bad = damaged
    proc = _check(wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    named = {line.split(":")[0].strip() for line in proc.stdout.splitlines() if ".nc:" in line}
    assert named == {p.relative_to(wf).as_posix() for p in bad.values()}
    assert "checked 5 result files of 5 expected" in proc.stdout
    forcerun = next(line for line in proc.stdout.splitlines() if "--forcerun" in line)
    # the printed command, as a dry run: exactly the three cells and what reads them
    dry = snakemake(wf, *shlex.split(forcerun)[1:], "-n", env=ENV)
    plan = {"cell": 3, "merge": 1, "figure": 1, "agreement_table": 1, "all": 1, "total": 7}
    assert job_counts(dry.stdout) == plan
    removed = _check(wf, "--remove")
    assert removed.returncode == 0 and "removed 3 files and the 1 merged results" in removed.stdout
    run = snakemake(wf, "--configfile", "config/toy.yaml", "--cores", "2", env=ENV)
    assert job_counts(run.stdout + run.stderr) == plan
    assert _check(wf).returncode == 0
    for path in MERGED:
        with (
            xr.open_dataset(wf / path) as new,
            xr.open_dataset(wf.parent / "originals" / Path(path).name) as old,
        ):
            assert set(new.data_vars) == set(old.data_vars)
            for name in old.data_vars:
                xr.testing.assert_identical(new[name], old[name])
