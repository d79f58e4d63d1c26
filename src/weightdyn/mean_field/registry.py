"""The five mean-field experiments of paper 002 (E1-E5) as registry entries (see
:mod:`weightdyn.experiments`): each module declares its own ``EXPERIMENT``."""

from __future__ import annotations

from weightdyn.experiments import Experiment
from weightdyn.mean_field import gaussian, linearisation, pde_comparison, small_output, width

EXPERIMENTS: dict[str, Experiment] = {
    module.EXPERIMENT.name: module.EXPERIMENT
    for module in (width, pde_comparison, small_output, gaussian, linearisation)
}
