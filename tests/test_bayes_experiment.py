"""The bayes_sampler experiment (paper 000 App. B): configuration errors name their keys, cells
carry theory and SGD, a cell beyond its variant's limit is flagged and the sweep goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weightdyn import experiments, sweep
from weightdyn.experiments import ConfigError
from weightdyn.single_layer import bayes
from weightdyn.single_layer.bayes_data import REGRESSION

EXP = experiments.get("bayes_sampler")
TINY = {"N": 4, "P": 40, "n_test": 10, "replicas": 4, "n_blocks": 2, "sample_tau": 200,
        "sample_steps": 2000, "sample_max_steps": 20000}  # fmt: skip


def _cells(**axes: Any) -> list[dict[str, Any]]:
    block = {"experiment": "bayes_sampler", **TINY, **axes}
    return [c.params for c in sweep.expand_sweep("s", block).cells]


def _run(**axes: Any):
    (params,) = _cells(**axes)
    return EXP.run_cell({**params, "data": REGRESSION.load(REGRESSION.make(params))}, print)


ERRORS = {
    "negative temperature": ({"temperature": -0.5}, ["temperature", "-0.5"]),
    "unknown preconditioner": ({"preconditioner": "adam"}, ["preconditioner", "'adam'",
                                                            "'hessian_inverse'"]),
    "mandt with noise": ({"lr_rule": "mandt", "temperature": 1.0}, ["lr_rule", "temperature"]),
    "wang rule alone": ({"lr_rule": "wang"}, ["lr_rule", "preconditioner wang"]),
    "exact diagonal without its rule": ({"preconditioner": "exact_diagonal"},
                                        ["preconditioner", "lr_rule exact"]),
    "wang with noise": ({"preconditioner": "wang", "temperature": 1.0},
                        ["preconditioner", "temperature 0"]),
    "file without its path": ({"preconditioner": "file"}, ["preconditioner_file"]),
    "N too large": ({"N": 65, "P": 200}, ["N", "N <= 64"]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ERRORS))
def test_configuration_errors_name_the_key(case: str) -> None:
    axes, words = ERRORS[case]
    with pytest.raises(ConfigError) as err:
        _cells(**axes)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_a_cell_holds_theory_and_sgd_that_agree() -> None:
    ds = _run(weight_decay=0.1, lr_rule="fraction", lr=0.3, batch_size=4, sample_tau=20000,
              sample_max_steps=200000)  # fmt: skip
    assert int(ds["unstable"]) == 0 and int(ds["diverged"]) == 0
    assert float(ds["lr_used"]) == pytest.approx(0.3 * float(ds["lr_max"]))
    for name, var in ds.variables.items():
        assert {"long_name", "units", "source"} <= set(var.attrs), name
    z = (ds["trace_M_sgd"] - ds["trace_M_exact"]) / ds["trace_M_sgd_se"]
    assert abs(float(z)) < 4
    assert float(ds["kl_exact"]) > 0 and float(ds["kl_continuous"]) > 0


def test_beyond_the_limit_the_cell_is_flagged_and_not_simulated() -> None:
    ds = _run(lr_rule="fraction", lr=1.2, batch_size=4)
    assert int(ds["unstable"]) == 1 and float(ds["stability_radius"]) > 1
    assert np.isnan(float(ds["kl_exact"])) and "eig_M_sgd" not in ds
    assert np.isfinite(float(ds["kl_continuous"]))


def test_rules_set_the_learning_rate() -> None:
    (params,) = _cells(lr_rule="mandt", dynamics="none")
    data = REGRESSION.load(REGRESSION.make(params))
    ds = EXP.run_cell({**params, "data": data}, print)
    problem = bayes.Problem(data.X, data.y, params["batch_size"])
    # Mandt et al. Thm 1 with the known noise variance sigma_eps2 = 0.25
    lr = 2 * 4 * (0.25 / 40) / np.trace(problem.C)
    assert float(ds["lr_used"]) == pytest.approx(lr, rel=1e-10)
    exact = _run(lr_rule="exact", dynamics="none")
    assert float(exact["kl_exact"]) <= float(ds["kl_exact"])


def test_a_preconditioner_from_a_file_or_a_function(tmp_path: Path) -> None:
    good, bad = tmp_path / "lam.npy", tmp_path / "bad.npy"
    np.save(good, np.diag([1.0, 2.0, 0.5, 1.5]))
    np.save(bad, np.eye(3))
    ds = _run(preconditioner="file", preconditioner_file=str(good), lr_rule="fraction",
              lr=0.5, dynamics="none")  # fmt: skip
    assert int(ds["unstable"]) == 0
    with pytest.raises(ValueError, match=r"preconditioner_file: Lambda must have shape \(4, 4\)"):
        _run(preconditioner="file", preconditioner_file=str(bad), dynamics="none")
    np.save(bad, np.diag([1.0, -1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="preconditioner_file: preconditioner must be symmetric"):
        _run(preconditioner="file", preconditioner_file=str(bad), dynamics="none")
    spec = "weightdyn.single_layer.bayes_rules:hessian_inverse_preconditioner"
    ds = _run(preconditioner="function", preconditioner_function=spec, lr_rule="fraction",
              lr=0.5, dynamics="none")  # fmt: skip
    ref = _run(preconditioner="hessian_inverse", lr_rule="fraction", lr=0.5, dynamics="none")
    assert float(ds["kl_exact"]) == pytest.approx(float(ref["kl_exact"]), rel=1e-12)


def test_the_heteroskedastic_data_set_has_the_reported_noise() -> None:
    (params,) = _cells(N=3, P=20000, noise_model="heteroskedastic", sigma_eps2=1.0)
    data = REGRESSION.load(REGRESSION.make(params))
    var = 1.0 + np.sum(data.X**2, axis=1)
    ratio = data.eps**2 / var  # chi^2_1 draws
    assert np.mean(ratio) == pytest.approx(1.0, abs=4 * np.sqrt(2 / 20000))
