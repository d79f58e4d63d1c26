"""The config is validated before any job runs, and errors name the key and what is allowed.

Every case is checked in-process against the validation the Snakefile runs
(``workflow/rules/common.smk``: ``sweep.check_config``, ``expand_sweeps``, ``expand_views``);
two of them also through snakemake itself, which must stop before any job.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from workflow_helpers import ROOT, snakemake

from weightdyn import configfile, sweep
from weightdyn.experiments import ConfigError


def _write_config(workdir: Path, edit) -> Path:
    cfg = yaml.safe_load((workdir / "config" / "test.yaml").read_text())
    edit(cfg)
    path = workdir / "config" / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _fig4b(cfg):
    return cfg["sweeps"]["fig4b"]


def _nested(sweep: str, key: str, **extra):
    """Edit adding ``extra`` to the nested block ``key`` of ``sweep`` (its default if unset)."""

    def edit(cfg):
        from weightdyn import experiments

        block = cfg["sweeps"][sweep]
        default = experiments.get(block["experiment"]).param(key).default
        block[key] = {**(block.get(key) or default), **extra}

    return edit


CASES = {
    "unknown key": (lambda c: _fig4b(c).update(learning_rate=0.1), ["learning_rate", "allowed"]),
    "unknown top-level key": (lambda c: c.update(single_layer={}), ["single_layer", "allowed"]),
    "negative lr": (lambda c: _fig4b(c).update(lr=[-0.1]), ["sweeps.fig4b.lr", "-0.1"]),
    "p_over_n <= 0": (lambda c: _fig4b(c).update(p_over_n=[0.0]), ["p_over_n", "0.0"]),
    "batch_size > P": (
        lambda c: _fig4b(c).update(batch_size=500),
        ["sweeps.fig4b.batch_size", "500"],
    ),
    "wrong type": (lambda c: _fig4b(c).update(N=["ten"]), ["ten", "integer"]),
    "bad sampling": (lambda c: _fig4b(c).update(sampling=["sometimes"]), ["sometimes", "'with'"]),
    "bad dynamics": (
        lambda c: _fig4b(c).update(dynamics="langevin"),
        ["sweeps.fig4b.dynamics", "'langevin'", "'sgf_additive'"],
    ),
    "unknown experiment": (
        lambda c: c["sweeps"]["e1_width"].update(experiment="mf_widths"),
        ["sweeps.e1_width.experiment", "mf_widths", "allowed"],
    ),
    "bad mean-field nested value": (
        lambda c: c["sweeps"]["e1_width"].update(measure={"kind": "foo", "size": 16}),
        ["invalid config", "sweeps.e1_width.measure.kind", "'foo'", "'gauss_legendre'"],
    ),
    "bad width axis": (
        lambda c: c["sweeps"]["e1_width"].update(N=[10, -5]),
        ["invalid config", "sweeps.e1_width.N", "-5"],
    ),
    # an unknown key in a nested block of each mean-field experiment
    "unknown key in mf_width.energy": (
        _nested("e1_width", "energy", bogus=3),
        ["sweeps.e1_width.energy", "['bogus']", "allowed", "interval_steps"],
    ),
    "unknown key in mf_pde.unit": (
        _nested("e2_pde", "unit", bogus=3),
        ["sweeps.e2_pde.unit", "['bogus']", "allowed"],
    ),
    "unknown key in mf_small_output.wtilde": (
        _nested("e3_small_output", "wtilde", bogus=3),
        ["sweeps.e3_small_output.wtilde", "['bogus']", "allowed"],
    ),
    "unknown key in mf_gaussian.target": (
        _nested("e4_gaussian", "target", bogus=3),
        ["sweeps.e4_gaussian.target", "['bogus']", "allowed"],
    ),
    "unknown key in mf_linearisation.p_star": (
        _nested("e5_linearisation", "p_star", bogus=3),
        ["sweeps.e5_linearisation.p_star", "['bogus']", "allowed"],
    ),
    # and in four other kinds of block
    "unknown key in a two-layer sweep": (
        lambda c: c["sweeps"]["two_layer_tiny"].update(bogus=3),
        ["sweeps.two_layer_tiny", "['bogus']", "allowed"],
    ),
    "unknown key in a noise sweep": (
        lambda c: c["sweeps"]["noise_spectrum"].update(bogus=3),
        ["sweeps.noise_spectrum", "['bogus']", "allowed"],
    ),
    "unknown key in a view": (
        lambda c: c["views"]["fig2a_with"].update(bogus=3),
        ["views.fig2a_with", "['bogus']", "allowed"],
    ),
    "unknown figure option of a view": (
        lambda c: c["views"]["fig2a_with"].update(options={"bogus": 3}),
        ["views.fig2a_with.options.bogus", "unknown option", "allowed"],
    ),
    "unknown axis in an explicit cell": (
        lambda c: c["sweeps"]["relaxation"].update(cells=[{"lr": 0.1, "bogus": 3}]),
        ["sweeps.relaxation.cells[0]", "['bogus']", "not axes"],
    ),
    "wrong type in a nested block": (
        _nested("e1_width", "energy", N=1.5),
        ["sweeps.e1_width.energy.N", "1.5", "integer"],
    ),
    "both P and p_over_n": (
        lambda c: _fig4b(c).update(P=20),
        ["sweeps.fig4b", "p_over_n"],
    ),
}


def _config_error(edit) -> str:
    """The message the Snakefile stops with for the test config edited by ``edit``."""
    cfg = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    edit(cfg)
    cfg = yaml.safe_load(yaml.safe_dump(cfg))  # as snakemake reads it back from a file
    with pytest.raises(ConfigError) as err:
        sweep.check_config(cfg)
        sweep.expand_views(cfg, sweep.expand_sweeps(cfg))
    return f"invalid config: {err.value}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_invalid_config_names_the_key_and_what_is_allowed(case: str) -> None:
    edit, expected = CASES[case]
    message = _config_error(edit)
    for text in expected:
        assert text in message, f"{case}: {text!r} missing from\n{message}"


@pytest.mark.parametrize("case", ["bad dynamics", "unknown figure option of a view"])
def test_invalid_config_stops_snakemake_before_any_job(workflow_copy: Path, case: str) -> None:
    edit, expected = CASES[case]
    bad = _write_config(workflow_copy, edit)
    proc = snakemake(workflow_copy, "-n", "--configfile", str(bad), check=False)
    assert proc.returncode != 0
    message = proc.stdout + proc.stderr
    for text in ["invalid config", *expected]:
        assert text in message, f"{case}: {text!r} missing from\n{message[-3000:]}"
    assert not (workflow_copy / "results").exists()


def test_valid_test_config_dry_runs(workflow_copy: Path) -> None:
    proc = snakemake(workflow_copy, "-n", "--configfile", "config/test.yaml")
    assert "rule merge:" in proc.stdout


def test_configfile_replaces_the_default_config(workflow_copy: Path) -> None:
    """--configfile must not merge with config/config.yaml (its `appc` sweep would leak in)."""
    proc = snakemake(workflow_copy, "-n", "--configfile", "config/test.yaml")
    assert "results/appc.nc" not in proc.stdout
    default = snakemake(workflow_copy, "-n")
    assert "results/appc.nc" in default.stdout


DUPLICATE = """\
base: &base
  N: 20
  lr: 0.1
sweeps:
  fig4b:
    <<: *base
    N: 30
    lr: 0.2
    N: 40
"""


def test_a_duplicate_key_names_the_key_its_line_and_file(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATE)
    with pytest.raises(ConfigError) as err:
        configfile.load(path)
    assert str(err.value) == (
        f"{path}, line 9: duplicate key 'N' (first given on line 7); give each key once"
    )


def test_keys_from_a_yaml_merge_may_be_overridden(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text(DUPLICATE.replace("    N: 40\n", ""))
    assert configfile.load(path)["sweeps"]["fig4b"] == {"N": 30, "lr": 0.2}


@pytest.mark.parametrize("path", ["config/*.yaml", "profiles/*/config.yaml"])
def test_shipped_configs_and_profiles_have_no_duplicate_keys(path: str) -> None:
    files = sorted(ROOT.glob(path))
    assert files
    configfile.check_files(files)


def _with_duplicate(text: str, key: str) -> str:
    """``text`` with its first line ``key: ...`` given twice (the copy's value last)."""
    line = next(x for x in text.splitlines() if x.startswith(f"{key}:"))
    return text.replace(line + "\n", f"{line}\n{line}\n", 1)


@pytest.mark.parametrize("which", ["--configfile", "default config", "profile"])
def test_a_duplicate_key_stops_snakemake_before_any_job(workflow_copy: Path, which: str) -> None:
    """In a --configfile, in config/config.yaml (no --configfile) and in the default profile."""
    args = ["--configfile", "config/test.yaml"] if which != "default config" else []
    path = {
        "--configfile": "config/test.yaml",
        "default config": "config/config.yaml",
        "profile": "profiles/slurm/config.yaml",
    }[which]
    text = (workflow_copy / path).read_text()
    key = "sweeps" if path.startswith("config/") else "executor"
    (workflow_copy / path).write_text(_with_duplicate(text, key))
    line = text.splitlines().index(next(x for x in text.splitlines() if x.startswith(f"{key}:")))
    proc = snakemake(workflow_copy, "-n", *args, check=False)
    message = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{path}, line {line + 2}: duplicate key '{key}' (first given on line {line + 1})" in (
        message
    ), message[-3000:]
    assert "rule " not in message and not (workflow_copy / "results").exists()


@pytest.mark.parametrize("name", ["../up", "a b", "", "-x", 3])
def test_an_unsafe_config_name_is_rejected(name: object) -> None:
    cfg = yaml.safe_load((ROOT / "config" / "test.yaml").read_text()) | {"name": name}
    with pytest.raises(ConfigError, match=r"^name: .* is not allowed; allowed: letters"):
        sweep.check_config(cfg)


def test_the_config_name_is_its_name_key_else_its_file_stem() -> None:
    assert sweep.config_name({"name": "mine"}, ["config/paper.yaml"]) == "mine"
    assert sweep.config_name({}, ["/x/config/paper.yaml"]) == "paper"
    assert sweep.config_name({}, ["config/base.yaml", "config/test.yaml"]) == "test"
    assert sweep.config_name({}, []) == "config"
    with pytest.raises(ConfigError, match="give the config a top-level `name:`"):
        sweep.config_name({}, ["config/my paper.yaml"])
