"""The config is validated before any job runs, and errors name the key and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from workflow_helpers import snakemake


def _write_config(workdir: Path, edit) -> Path:
    cfg = yaml.safe_load((workdir / "config" / "test.yaml").read_text())
    edit(cfg)
    path = workdir / "config" / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _fig4b(cfg):
    return cfg["single_layer"]["sweeps"]["fig4b"]


CASES = {
    "unknown key": (lambda c: c["single_layer"].update(learning_rate=0.1), ["learning_rate"]),
    "negative lr": (lambda c: _fig4b(c).update(lr=[-0.1]), ["-0.1", "lr"]),
    "p_over_n <= 0": (lambda c: _fig4b(c).update(p_over_n=[0.0]), ["p_over_n", "0.0"]),
    "batch_size > P": (
        lambda c: _fig4b(c).update(batch_size=[500]),
        ["single_layer.sweeps.fig4b.batch_size", "500", "1 <= batch_size <= P"],
    ),
    "wrong type": (lambda c: _fig4b(c).update(N=["ten"]), ["ten", "integer"]),
    "bad sampling": (lambda c: _fig4b(c).update(sampling=["sometimes"]), ["sometimes", "with"]),
    "unknown mean-field experiment": (
        lambda c: c["mean_field"].update(widths={}),
        ["widths"],
    ),
    "bad mean-field value": (
        lambda c: c["mean_field"]["pde"].update(schemes=["weno"]),
        ["invalid config", "mean_field.pde.schemes", "weno", "'upwind', 'muscl'"],
    ),
    "bad width axis": (
        lambda c: c["mean_field"]["width"].update(N=[10, -5]),
        ["invalid config", "width.N", "positive integers"],
    ),
    "both P and p_over_n": (
        lambda c: _fig4b(c).update(P=[20]),
        ["single_layer.sweeps.fig4b", "exactly one of 'P' or 'p_over_n'"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_invalid_config_stops_before_any_job(workflow_copy: Path, case: str) -> None:
    edit, expected = CASES[case]
    bad = _write_config(workflow_copy, edit)
    proc = snakemake(workflow_copy, "-n", "--configfile", str(bad), check=False)
    assert proc.returncode != 0
    message = proc.stdout + proc.stderr
    for text in expected:
        assert text in message, f"{case}: {text!r} missing from\n{message[-3000:]}"
    assert not (workflow_copy / "results").exists()


def test_valid_test_config_dry_runs(workflow_copy: Path) -> None:
    proc = snakemake(workflow_copy, "-n", "--configfile", "config/test.yaml")
    assert "single_layer_merge" in proc.stdout


def test_configfile_replaces_the_default_config(workflow_copy: Path) -> None:
    """--configfile must not merge with config/config.yaml (its `appc` sweep would leak in)."""
    proc = snakemake(workflow_copy, "-n", "--configfile", "config/test.yaml")
    assert "N50_P200_s0.25_d0_lr0.1_S10_without" not in proc.stdout
    default = snakemake(workflow_copy, "-n")
    assert "N50_P200_s0.25_d0_lr0.1_S10_without" in default.stdout
