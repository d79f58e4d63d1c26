"""Each config has its own agreement table, and a report shows only up-to-date results.

Two toy configs (tests/toy_experiment.py) run in turn in one folder: each keeps its table
(results/agreement/<config name>.*), the report of each embeds its own table and not the other's,
and a report asked for while a job it would show is out of date is refused, naming the outputs
and the command that brings them up to date.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import yaml
from test_workflow_generic import CONFIG, ENV
from workflow_helpers import copy_workflow, snakemake

RESULTS_JSON = re.compile(r'<script id="results">\s*var results = (\{.*?\});\s*</script>', re.S)


def _config(sweep: str, label: str, **top: str) -> dict:
    """The toy config with one of its sweeps (short cells), labelled ``label``, no views."""
    block = CONFIG["sweeps"][sweep] | {"steps": 400, "label": label}
    return {
        **top,
        **{k: CONFIG[k] for k in ("experiment_modules", "figures")},
        "sweeps": {sweep: block},
    }


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """config/alpha.yaml (no name: its file's stem) then config/b.yaml (``name: beta``)."""
    wf = copy_workflow(tmp_path_factory.mktemp("two") / "wf")
    (wf / "config" / "alpha.yaml").write_text(yaml.safe_dump(_config("toy_lr", "alpha rows")))
    beta = _config("toy_sparse", "beta rows", name="beta")
    (wf / "config" / "b.yaml").write_text(yaml.safe_dump(beta))
    for path in ("config/alpha.yaml", "config/b.yaml"):
        snakemake(wf, "--configfile", path, "--cores", "2", env=ENV)
    return wf


def _report_table(wf: Path, configfile: str, report: str) -> tuple[set[str], str]:
    """The result paths of the report made with ``configfile`` and its agreement table's HTML."""
    snakemake(wf, "--configfile", configfile, "--report", report, env=ENV)
    results = json.loads(RESULTS_JSON.search((wf / report).read_text()).group(1))
    (table,) = [p for p in results if p.startswith("results/agreement/")]
    return set(results), base64.b64decode(results[table]["data_uri"].split(",", 1)[1]).decode()


def test_two_configs_in_one_folder_keep_both_tables(two_runs: Path) -> None:
    tables = two_runs / "results" / "agreement"
    assert sorted(p.name for p in tables.iterdir()) == [
        "alpha.csv",
        "alpha.html",
        "beta.csv",
        "beta.html",
    ]
    alpha, beta = (tables / "alpha.csv").read_text(), (tables / "beta.csv").read_text()
    assert "alpha rows" in alpha and "beta rows" not in alpha
    assert "beta rows" in beta and "alpha rows" not in beta


def test_each_report_embeds_its_own_table(two_runs: Path) -> None:
    paths, table = _report_table(two_runs, "config/alpha.yaml", "alpha.html")
    assert "results/agreement/alpha.html" in paths and "results/agreement/beta.html" not in paths
    assert "alpha rows" in table and "beta rows" not in table
    paths, table = _report_table(two_runs, "config/b.yaml", "beta.html")
    assert "results/agreement/beta.html" in paths and "results/agreement/alpha.html" not in paths
    assert "beta rows" in table and "alpha rows" not in table


def test_a_report_with_an_outdated_job_is_refused(two_runs: Path) -> None:
    """A relabelled sweep: its table is out of date (params changed), so is the report."""
    edited = _config("toy_lr", "alpha relabelled", name="alpha")
    (two_runs / "config" / "alpha2.yaml").write_text(yaml.safe_dump(edited))
    proc = snakemake(
        two_runs,
        "--configfile",
        "config/alpha2.yaml",
        "--report",
        "stale.html",
        check=False,
        env=ENV,
    )
    message = proc.stdout + proc.stderr
    assert proc.returncode != 0 and not (two_runs / "stale.html").exists()
    assert "no report written: 1 job(s) of config 'alpha' are out of date" in message
    assert (
        "results/agreement/alpha.html, results/agreement/alpha.csv: Params have changed" in message
    )
    assert "bring them up to date first: python3 run.py sweep --configfile config/alpha2.yaml" in (
        message
    )
    assert "Traceback" not in message
