"""A user-defined experiment in one module (config: ``experiment_modules: [toy_experiment]``).

SGD on the one-dimensional quadratic loss w^2/2 with additive unit gradient noise,
``w' = (1 - lr) w + lr xi``: its stationary variance is ``lr / (2 - lr)`` exactly (the
discrete-time analogue of paper 000 Eq. 30 for N = 1), and it diverges for lr >= 2. The workflow
tests use it to exercise the generic rules without the cost of a real experiment. The environment
variable TOY_PAUSE makes cells of given learning rates wait first (``"0.1=600"``: ten minutes):
long cells whose identity (file name, parameters) does not depend on how long they take.
"""

from __future__ import annotations

import os
import time

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from weightdyn import seeds
from weightdyn.agreement import agreement
from weightdyn.experiments import REQUIRED, ConfigError, Experiment, Figure, Param
from weightdyn.io import attrs

SOURCE = "toy: discrete-time analogue of paper 000 Eq. 30 for N = 1"


def _derive(params: dict) -> dict:
    if params["lr"] >= 2:
        raise ConfigError(f"lr: {params['lr']} diverges; allowed: 0 < lr < 2")
    return params


def _pause(lr: float) -> float:
    """Seconds a cell of learning rate ``lr`` waits first: TOY_PAUSE="0.1=600 0.2=600"."""
    pauses = dict(item.split("=", 1) for item in os.environ.get("TOY_PAUSE", "").split())
    return float(pauses.get(format(lr, "g"), 0))


def _run_cell(params: dict, progress) -> xr.Dataset:
    time.sleep(_pause(params["lr"]))  # a long cell (test_interruption.py)
    rng = seeds.generator("toy", {k: params[k] for k in ("lr", "seed")})
    lr, chains, steps = params["lr"], params["chains"], params["steps"]
    w = np.zeros(chains)
    samples = np.empty((steps, chains))
    for t in range(steps):
        w = (1 - lr) * w + lr * rng.standard_normal(chains)
        samples[t] = w
    progress(f"toy: lr={lr}, {steps} steps x {chains} chains")
    var = samples[steps // 5 :].var(axis=0)
    return xr.Dataset(
        {
            "var_sim": ((), var.mean(), attrs("stationary variance, simulated", "1", SOURCE)),
            "var_sim_se": (
                (),
                var.std(ddof=1) / np.sqrt(chains),
                attrs("standard error of var_sim", "1", SOURCE),
            ),
            "var_theory": ((), lr / (2 - lr), attrs("stationary variance lr/(2-lr)", "1", SOURCE)),
            "trace": (("step",), samples[:50, 0], attrs("first 50 steps of chain 0", "1", SOURCE)),
        },
        coords={"step": ("step", np.arange(50), {"long_name": "step", "units": "1"})},
    )


def _plot(ds: xr.Dataset, fail: bool = False) -> plt.Figure:
    """The toy's figure; ``fail`` (a view option) makes it raise, to test a failing figure job."""
    if fail:
        raise ValueError("the toy figure was asked to fail")
    fig, ax = plt.subplots(figsize=(3.4, 2.6))
    order = np.argsort(ds["lr"].values)
    lr = ds["lr"].values[order]
    ax.errorbar(
        lr, ds["var_sim"].values[order], ds["var_sim_se"].values[order], fmt="o", label="simulation"
    )
    ax.plot(lr, ds["var_theory"].values[order], "k--", label=r"$\lambda/(2-\lambda)$")
    ax.set_xlabel(r"learning rate $\lambda$")
    ax.set_ylabel(r"$\langle w^2 \rangle$")
    ax.legend()
    return fig


def _agreement(ds: xr.Dataset, label: str) -> list:
    return [
        agreement(
            label,
            "toy variance vs lr/(2-lr)",
            "toy",
            ds["var_sim"],
            ds["var_theory"],
            ds["var_sim_se"],
            paper="toy",
        )
    ]


EXPERIMENTS = {
    "toy": Experiment(
        name="toy",
        family="single_layer",
        title="Toy: SGD on a quadratic in one dimension",
        source=SOURCE,
        params=(
            Param(
                "lr", float, REQUIRED, "learning rate", axis=True, minimum=0, exclusive_minimum=True
            ),
            Param("seed", int, 0, "random seed index", axis=True, minimum=0),
            Param("chains", int, 16, "number of chains", minimum=2),
            Param("steps", int, 500, "number of steps", minimum=10),
        ),
        run_cell=_run_cell,
        derive=_derive,
        agreement=_agreement,
        figures={"variance": Figure(_plot, "**Toy.** Stationary variance against λ/(2−λ).")},
        default_figures=("variance",),
    )
}
