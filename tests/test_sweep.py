"""The config dialect (weightdyn.sweep): cells from declared axes, ids, errors naming the key."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from weightdyn import experiments, sweep
from weightdyn.experiments import ConfigError

sys.path.insert(0, str(Path(__file__).parent))
experiments.register_module("toy_experiment")


def _sweep(**block):
    return sweep.expand_sweep("s", {"experiment": "toy", **block})


def test_lists_give_the_product_and_scalars_are_shared() -> None:
    s = _sweep(lr=[0.1, 0.5], seed=[0, 1, 2], steps=100)
    assert len(s.cells) == 6
    assert {c.params["steps"] for c in s.cells} == {100}
    assert s.settings == {"chains": 16, "steps": 100}


def test_adding_a_value_keeps_every_existing_cell() -> None:
    old = {c.id: c.params for c in _sweep(lr=[0.1, 0.5]).cells}
    new = {c.id: c.params for c in _sweep(lr=[0.1, 0.5, 0.7]).cells}
    assert set(old) < set(new) and all(new[k] == v for k, v in old.items())


def test_ids_follow_values_not_spelling_and_settings_enter_the_hash() -> None:
    a = _sweep(lr=0.1).cells[0].id
    assert _sweep(lr=1e-1).cells[0].id == a
    assert a.startswith("lr=0.1_seed=0__")
    assert _sweep(lr=0.1, steps=600).cells[0].id != a


def test_explicit_cells_give_a_sparse_design() -> None:
    s = _sweep(cells=[{"lr": 0.1}, {"lr": 0.5, "seed": 3}], steps=100)
    assert [(c.params["lr"], c.params["seed"]) for c in s.cells] == [(0.1, 0), (0.5, 3)]


def test_two_sweeps_share_a_cell_by_id() -> None:
    a = sweep.expand_sweeps(
        {
            "sweeps": {
                "a": {"experiment": "toy", "lr": [0.1, 0.5]},
                "b": {"experiment": "toy", "lr": 0.5},
            }
        }
    )
    assert a["b"].cells[0].id == a["a"].cells[1].id


ERRORS = {
    "axis out of range": ({"lr": [0.1, -1.0]}, ["sweeps.s.lr", "-1.0", "0 < number"]),
    "derived check": ({"lr": 2.5}, ["sweeps.s.lr", "0 < lr < 2"]),
    "wrong type": ({"lr": 0.1, "seed": "one"}, ["sweeps.s.seed", "integer"]),
    "unknown key": ({"lr": 0.1, "learning_rate": 1}, ["learning_rate", "allowed", "'lr'"]),
    "missing axis": ({}, ["sweeps.s.lr", "missing"]),
    "list for a setting": ({"lr": 0.1, "steps": [1, 2]}, ["sweeps.s.steps", "one value"]),
    "unknown figure": ({"lr": 0.1, "figures": ["nope"]}, ["sweeps.s.figures", "'variance'"]),
    "cells and lists": ({"lr": [0.1, 0.2], "cells": [{"lr": 0.3}]}, ["sweeps.s", "not both"]),
    "unknown axis in cells": ({"cells": [{"lr": 0.1, "N": 3}]}, ["sweeps.s.cells[0]", "'N'"]),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_name_the_key_and_what_is_allowed(case: str) -> None:
    block, expected = ERRORS[case]
    with pytest.raises(ConfigError) as err:
        _sweep(**block)
    for text in expected:
        assert text in str(err.value), (case, str(err.value))


def test_unknown_experiment_lists_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match=r"sweeps\.s\.experiment.*allowed.*toy"):
        sweep.expand_sweep("s", {"experiment": "toys"})


def test_views_select_cells_and_per_sweep_figures_are_views() -> None:
    config = {
        "sweeps": {"a": {"experiment": "toy", "lr": [0.1, 0.5], "seed": [0, 1]}},
        "views": {"v": {"sweeps": "a", "figure": "variance", "select": {"seed": 1}}},
    }
    sweeps = sweep.expand_sweeps(config)
    views = sweep.expand_views(config, sweeps)
    assert set(views) == {"a/variance", "v"}
    assert [c.params["seed"] for c in sweep.view_cells(views["v"], sweeps)] == [1, 1]
    with pytest.raises(ConfigError, match=r"views\.v\.select"):
        bad = {
            **config,
            "views": {"v": {"sweeps": "a", "figure": "variance", "select": {"seed": 7}}},
        }
        sweep.expand_views(bad, sweeps)


def test_top_level_and_figure_style_are_checked() -> None:
    with pytest.raises(ConfigError, match="unknown top-level"):
        sweep.check_config({"sweep": {}})
    with pytest.raises(ConfigError, match=r"figures\.formats.*'png'"):
        sweep.check_config({"figures": {"formats": ["gif"]}})
    assert sweep.check_config({"figures": {"dpi": 80}}) == {"formats": ["png"], "dpi": 80}
