"""The five mean-field experiments of paper 002 as sweep cells (one Snakemake job each).

Each experiment module exposes ``cells(block)``, ``run_cell(block, cell, log)``,
``summarize(block, results)``, ``FIGURES`` and ``plot(summary, name)``. A cell's result may depend
only on the experiment's shared settings (the block without its sweep axes, ``SWEEP_AXES``) and on
the cell's own values, so adding a value to an axis leaves every existing cell's parameters, and
hence its file, untouched.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

MODULES = {
    "width": "weightdyn.mean_field.width",
    "pde": "weightdyn.mean_field.pde_comparison",
    "small_output": "weightdyn.mean_field.small_output",
    "gaussian": "weightdyn.mean_field.gaussian",
    "linearisation": "weightdyn.mean_field.linearisation",
}

SWEEP_AXES: dict[str, tuple[str, ...]] = {
    "width": ("N",),
    "pde": ("grids", "particles_N", "schemes"),
    "small_output": ("eps", "w0_scales"),
    "gaussian": ("s",),
    "linearisation": ("deltas", "grid_sizes"),
}


def module(name: str) -> ModuleType:
    """The module implementing experiment ``name``."""
    if name not in MODULES:
        raise ValueError(f"mean_field: {name!r} is not one of {sorted(MODULES)}")
    return importlib.import_module(MODULES[name])


def experiment_cells(config: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, dict]]:
    """``{experiment: {cell name: cell}}`` for the experiments in the ``mean_field`` block."""
    out: dict[str, dict[str, dict]] = {}
    for name, block in config.items():
        cells = module(name).cells(block)
        names = [cell["name"] for cell in cells]
        if len(set(names)) != len(names):
            raise ValueError(f"mean_field.{name}: duplicate cells {sorted(names)}")
        out[name] = {cell["name"]: dict(cell) for cell in cells}
    return out


def shared_settings(name: str, block: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of experiment ``name`` that every cell uses (the block minus its sweep axes)."""
    return {key: value for key, value in block.items() if key not in SWEEP_AXES[name]}
