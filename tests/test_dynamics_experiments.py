"""Registry entries of the single-layer dynamics experiments: relaxation (Fig. 3), perturbation
(Fig. 5), Table 1 and the GBM of Eqs. 21-24 (weightdyn.single_layer.dynamics_experiments)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from weightdyn import experiments, io, sweep
from weightdyn.experiments import ConfigError
from weightdyn.single_layer import dynamics_experiments as dyn

SMALL_SGD = {"replicas": 2, "sample_steps": 400, "burnin_min_steps": 50, "burnin_max_steps": 2000,
             "thin": 5, "n_blocks": 2}  # fmt: skip

BLOCKS = {
    "relaxation": {"experiment": "relaxation", "N": 6, "p_over_n": 2.0, "batch_size": 4,
                   "lr": [0.1, 0.3], "replicas": 3, "tau_multiple": 1, "records": 20},
    "perturbation": {"experiment": "perturbation", "N": 5, "p_over_n": [2, 8], "batch_size": 4,
                     "thetas": [0.1, 1.0], **SMALL_SGD},
    "correlated": {"experiment": "perturbation", "inputs": "correlated", "N": 5,
                   "P": [20, 40], "batch_size": 4, "input_covariance": "exponential",
                   "correlation": 0.5, "realisations": 2, **SMALL_SGD},
    "table1": {"experiment": "table1", "N": [3, 12], "P": 8, "sigma_eps2": 0.01,
               "batch_size": 4, **SMALL_SGD},
    "gbm": {"experiment": "gbm", "P": 6, "lr": [0.01, 0.1], "times": [0.1, 0.2], "replicas": 50},
}  # fmt: skip


def run_sweep(name: str, block: dict) -> tuple[sweep.Sweep, xr.Dataset]:
    """Expand a sweep, run its cells and merge them as the workflow's merge rule does."""
    expanded = sweep.expand_sweep(name, block)
    exp = experiments.get(expanded.experiment)
    datasets = []
    for cell in expanded.cells:
        params = dict(cell.params)
        if exp.data is not None:
            params["data"] = exp.data.load(exp.data.make(params))
        datasets.append(exp.run_cell(params, lambda _: None))
    axes = [p for p in exp.axes if any(c.params.get(p.name) is not None for c in expanded.cells)]
    coords = {p.name: ([c.params[p.name] for c in expanded.cells], p.attrs()) for p in axes}
    return expanded, io.stack_cells(datasets, coords)


@pytest.fixture(scope="module", params=sorted(BLOCKS))
def merged(request) -> tuple[str, sweep.Sweep, xr.Dataset]:
    expanded, ds = run_sweep(request.param, BLOCKS[request.param])
    return request.param, expanded, ds


# --------------------------------------------------------------------------- declarations


def test_registered_with_declared_parameters() -> None:
    for name in ("relaxation", "perturbation", "table1", "gbm"):
        exp = experiments.get(name)
        assert exp is dyn.EXPERIMENTS[name] and exp.default_figures
        for p in exp.params:
            assert p.long_name and p.units, (name, p.name)
        assert set(exp.default_figures) <= set(exp.figures)
    axes = {name: [p.name for p in experiments.get(name).axes] for name in dyn.EXPERIMENTS}
    for name in ("relaxation", "perturbation"):
        assert {"N", "P", "p_over_n", "sigma_eps2", "lr", "batch_size"} <= set(axes[name])
    assert {"N", "P", "sigma_eps2"} <= set(axes["table1"])
    assert {"P", "lr", "batch_size", "wbar0"} <= set(axes["gbm"])


@pytest.mark.parametrize(
    ("experiment", "block", "expected"),
    [
        ("relaxation", {"N": 10}, ["sweeps.s.P:", "exactly one of 'P' or 'p_over_n'", "neither"]),
        ("relaxation", {"N": 10, "P": 20, "p_over_n": 2.0}, ["sweeps.s.P:", "both"]),
        ("relaxation", {"N": 10, "p_over_n": 0.01}, ["sweeps.s.p_over_n: 0.01", "allowed"]),
        ("relaxation", {"N": 10, "P": 5, "batch_size": 10},
         ["sweeps.s.batch_size: 10", "allowed: 1 <= batch_size <= P"]),
        ("relaxation", {"N": 10, "P": 20, "sampling": "sometimes"},
         ["sweeps.s.sampling", "allowed: 'with', 'without'"]),
        ("relaxation", {"N": 10, "P": 20, "lr": -0.1}, ["sweeps.s.lr: -0.1", "allowed: 0 <"]),
        ("perturbation", {"N": 10, "P": 20, "correlation": 0.5},
         ["sweeps.s.correlation: 0.5", "only used with inputs: correlated"]),
        ("perturbation", {"N": 10, "P": 20, "inputs": "correlated", "realisations": 2},
         ["sweeps.s.input_covariance: missing", "exponential"]),
        ("perturbation", {"N": 10, "P": 20, "inputs": "correlated", "realisations": 2,
                          "input_covariance": "exponential", "correlation": 1.5},
         ["sweeps.s.correlation: 1.5", "allowed: 0 <= rho < 1"]),
        ("perturbation", {"N": 10, "P": 20, "inputs": "correlated",
                          "input_covariance": "powerlaw", "correlation": 1.0},
         ["sweeps.s.realisations: missing"]),
        ("perturbation", {"N": 10, "P": 20, "inputs": "mixed"},
         ["sweeps.s.inputs", "allowed: 'iid', 'correlated'"]),
        ("perturbation", {"N": 10, "P": 20, "thetas": [0.1, -1.0]},
         ["sweeps.s.thetas", "positive perturbation amplitudes"]),
        ("perturbation", {"N": 10, "P": 20, "burnin_min_steps": 10, "burnin_max_steps": 5},
         ["sweeps.s.burnin_min_steps: 10", "allowed: burnin_min_steps <= burnin_max_steps"]),
        ("perturbation", {"N": 10, "P": 20, "init": "zero"}, ["sweeps.s.init", "'wstar'"]),
        ("table1", {"N": [5, 50]}, ["sweeps.s.P: missing"]),
        ("table1", {"N": 5, "P": 8, "lr": [0.1, 0.2]}, ["sweeps.s.lr", "a setting takes one"]),
        ("gbm", {"lr": 0.1}, ["sweeps.s.times: missing"]),
        ("gbm", {"lr": 0.1, "times": []}, ["sweeps.s.times", "non-empty list of positive"]),
        ("gbm", {"lr": 0.1, "times": [1.0], "replicas": 1}, ["sweeps.s.replicas: 1", "2 <="]),
    ],
)  # fmt: skip
def test_config_errors_name_the_key_and_what_is_allowed(experiment, block, expected) -> None:
    with pytest.raises(ConfigError) as err:
        sweep.expand_sweep("s", {"experiment": experiment, **block})
    for text in expected:
        assert text in str(err.value), str(err.value)


def test_p_over_n_derives_P_and_new_defaults_stay_out_of_the_seeds() -> None:
    (cell,) = sweep.expand_sweep("s", {"experiment": "relaxation", "N": 50, "p_over_n": 1.04}).cells
    assert cell.params["P"] == 52
    keys = (*dyn.RELAXATION_SEED, dyn._size_key(cell.params))
    assert dyn._seed(cell.params, keys, (dyn.N_TEST,)) == {k: cell.params[k] for k in keys}
    assert "P" not in keys and "p_over_n" in keys  # the old block's key, as the old seed had it
    changed = {**cell.params, "n_test": 10}
    assert dyn._seed(changed, keys, (dyn.N_TEST,))["n_test"] == 10


# ------------------------------------------------------------------------------ cells


def test_cells_run_and_carry_the_conventions(merged) -> None:
    name, expanded, ds = merged
    assert ds.sizes["cell"] == len(expanded.cells) == 2
    for var in ds.data_vars.values():
        assert {"long_name", "units", "source"} <= set(var.attrs), (name, var.name)
        assert "paper 000" in var.attrs["source"], (name, var.name)
    if "diverged" in ds:
        assert (ds["diverged"] == 0).all()


def test_figures_draw_one_panel_family_per_cell(merged) -> None:
    name, expanded, ds = merged
    exp = experiments.get(expanded.experiment)
    one = ds.isel(cell=[0])
    for figure in exp.default_figures:
        draw = exp.figures[figure].plot
        fig_one, fig_two = draw(one), draw(ds)
        visible = [len([a for a in f.axes if a.get_visible()]) for f in (fig_one, fig_two)]
        if name == "table1":
            table = fig_two.axes[0].tables[0]
            assert max(r for r, _ in table.get_celld()) == 2  # header + one row per cell
        elif name != "gbm":  # gbm: one colour per cell in the same two panels
            assert visible[1] > visible[0], (name, figure, visible)
        plt.close(fig_one)
        plt.close(fig_two)


def test_agreement_rows_per_group(merged) -> None:
    name, expanded, ds = merged
    exp = experiments.get(expanded.experiment)
    rows = exp.agreement(ds, "label")
    expected = {"relaxation": 4, "perturbation": 4, "correlated": 4, "table1": 1, "gbm": 3}
    assert len(rows) == expected[name]
    assert all(row.figure == "label" and row.points > 0 for row in rows), rows


def test_fig5_refuses_mixed_inputs() -> None:
    from weightdyn.plots.perturbation import fig5a, fig5b

    _, iid = run_sweep("iid", {**BLOCKS["perturbation"], "p_over_n": 4})
    with pytest.raises(ValueError, match="fig5b"):
        fig5a(run_sweep("c", {**BLOCKS["correlated"], "P": 20})[1])
    with pytest.raises(ValueError, match="fig5a"):
        fig5b(iid)


def test_relaxation_beyond_stability_is_flagged() -> None:
    block = {**BLOCKS["relaxation"], "lr": 400.0, "tau_multiple": 200, "records": 10}
    _, ds = run_sweep("s", block)
    assert int(ds["diverged"].item()) == 1
    assert np.isnan(ds["omega_fit"]).all()
    fig = experiments.get("relaxation").figures["fig3"].plot(ds)
    assert "diverged" in fig.subfigs[0].get_suptitle()
    plt.close(fig)
