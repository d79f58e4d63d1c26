"""The toy experiment (tests/toy_experiment.py) with figures that declare what they draw:
``by_lr`` draws lr only (other axes: one panel per value), ``summary`` draws the summary and
holds seed fixed (it cannot be split into panels), and the generic ``scalar``."""

from __future__ import annotations

import xarray as xr
from toy_experiment import EXPERIMENTS as TOY
from toy_experiment import _plot

from weightdyn.experiments import SCALAR, Experiment, Figure

_toy = TOY["toy"]


def _summary(datasets: list[xr.Dataset], params: list, settings: dict) -> xr.Dataset:
    """The mean simulated variance over the cells."""
    return xr.Dataset({"var_sim": ((), float(sum(d["var_sim"] for d in datasets)) / len(datasets))})


EXPERIMENTS = {
    "toy_views": Experiment(
        name="toy_views",
        family="single_layer",
        title="Toy with declared figures",
        source=_toy.source,
        params=_toy.params,
        run_cell=_toy.run_cell,
        derive=_toy.derive,
        summarize=_summary,
        figures={
            "by_lr": Figure(_plot, "**Toy.** Variance against lr.", axes=("lr",)),
            "summary": Figure(_plot, "**Toy.** The summary.", source="summary", fixed=("seed",)),
            "scalar": SCALAR,
        },
    )
}
