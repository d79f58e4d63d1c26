"""Figures of the ``bayes_sampler`` experiment (weightdyn.plots.bayes): each draws from a small
merged sweep of theory-only cells (``dynamics: none``) with fake SGD variables (the exact
theory with 3 % scatter and s.e.), has labelled axes and a legend, and its declaration in
``bayes_figures.FIGURES`` fits the sweep's axes (no extra panels)."""

from __future__ import annotations

import re
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from weightdyn import experiments, io, sweep
from weightdyn.single_layer.bayes_data import REGRESSION
from weightdyn.single_layer.bayes_figures import FIGURES

EXP = experiments.get("bayes_sampler")
SGD_NAMES = ("trace_M", "kl", "frobenius")


def fake_sgd(cell: xr.Dataset, rng: np.random.Generator, rel: float = 0.03) -> xr.Dataset:
    """SGD variables made from the exact theory: ``exact (1 + rel normal)``, s.e.
    ``rel exact`` (NaN beyond the stability limit), for drawing until the kernel lands."""
    out = cell.copy()
    eig = cell["eig_M_exact"]
    out["eig_M_sgd"] = eig * (1 + rel * rng.normal(size=eig.shape))
    out["eig_M_sgd_se"] = rel * eig
    for name in SGD_NAMES:
        exact = float(cell[f"{name}_exact"])
        out[f"{name}_sgd"] = exact * (1 + rel * rng.normal())
        out[f"{name}_sgd_se"] = rel * exact
    out["diverged"] = 0.0
    out["sample_steps"] = 20_000.0
    return out


def bayes_sweep(blocks: list[dict[str, Any]], fake: bool = True, seed: int = 0) -> xr.Dataset:
    """The merged dataset of the cells of ``blocks`` (each a sweep block of bayes_sampler,
    run theory-only; with ``fake`` SGD variables added), stacked as the merge rule does."""
    rng = np.random.default_rng(seed)
    cells, params, ids = [], [], []
    for k, block in enumerate(blocks):
        sw = sweep.expand_sweep(f"s{k}", {"experiment": "bayes_sampler", "dynamics": "none",
                                          **block})  # fmt: skip
        for c in sw.cells:
            data = REGRESSION.load(REGRESSION.make(c.params))
            ds = EXP.run_cell({**c.params, "data": data}, lambda _: None)
            cells.append(fake_sgd(ds, rng) if fake else ds)
            params.append(c.params)
            ids.append(c.id)
    coords = {p.name: ([c[p.name] for c in params], p.attrs()) for p in EXP.axes}
    coords["cell_id"] = (ids, {"long_name": "cell identifier", "units": "1"})
    return io.stack_cells(cells, coords, io.sweep_attrs(EXP, "bayes", {}, EXP.axes))


BASE = {"N": 4, "P": 16, "batch_size": 4, "n_test": 20}
SWEEPS = {
    "kl_vs_lr": [
        {**BASE, "lr_rule": "fraction", "lr": [0.1, 0.4, 0.8, 1.2],
         "preconditioner": ["none", "hessian_inverse"], "data_seed": [0, 1]},
        {**BASE, "lr_rule": ["mandt", "exact"], "preconditioner": ["none", "hessian_inverse"],
         "data_seed": [0, 1]},
    ],
    "kl_vs_batch": [
        {**BASE, "batch_size": [1, 4, 16], "preconditioner": ["none", "hessian_inverse"],
         "lr_rule": ["mandt", "exact"], "data_seed": [0, 1]},
    ],
    "spectra": [
        {**BASE, "lr_rule": "fraction", "lr": 0.5, "preconditioner": ["none", "hessian_inverse"],
         "weight_decay": [0.0, 0.1]},
    ],
    "protocol": [
        {**BASE, "noise_model": "heteroskedastic", "sigma_eps2": 1.0, "target": "sandwich",
         "batch_size": [1, 4, 16], "preconditioner": "hessian_inverse",
         "lr_rule": ["mandt", "exact"], "data_seed": [0, 1]},
        {**BASE, "noise_model": "heteroskedastic", "sigma_eps2": 1.0, "target": "sandwich",
         "batch_size": [1, 4, 16], "preconditioner": "wang", "lr_rule": "wang",
         "data_seed": [0, 1]},
    ],
    "injected_noise": [
        {**BASE, "lr": [0.003, 0.03, 0.3, 1.0], "temperature": [0.5, 2.0]},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def sweeps() -> dict[str, xr.Dataset]:
    return {name: bayes_sweep(blocks) for name, blocks in SWEEPS.items()}


def _varying_axes(ds: xr.Dataset) -> dict[str, np.ndarray]:
    return {p.name: ds[p.name].values for p in EXP.axes if p.name in ds.coords}


@pytest.mark.parametrize("name", list(SWEEPS))
def test_figure_draws_with_labelled_axes_and_a_legend(name, sweeps) -> None:
    ds = sweeps[name]
    spec = FIGURES[name]
    assert spec.extra_axes(_varying_axes(ds), {}) == [], "declaration does not fit the sweep"
    fig = spec.plot(ds)
    try:
        drawn = [ax for ax in fig.axes if ax.axison]
        assert drawn
        assert all(ax.lines for ax in drawn), name
        # every column of panels has an x label, every row a y label (grids label the edges)
        spec_of = {ax: ax.get_subplotspec() for ax in drawn}
        cols = {sp.colspan.start for sp in spec_of.values()}
        rows = {sp.rowspan.start for sp in spec_of.values()}
        assert cols == {sp.colspan.start for ax, sp in spec_of.items() if ax.get_xlabel()}, name
        assert rows == {sp.rowspan.start for ax, sp in spec_of.items() if ax.get_ylabel()}, name
        legends = [*fig.legends, *(ax.get_legend() for ax in drawn if ax.get_legend())]
        assert legends and all(len(leg.get_texts()) >= 2 for leg in legends)
        assert fig._suptitle is not None and re.search(r"s\.[ed]\.", fig._suptitle.get_text())
        fig.canvas.draw()
    finally:
        plt.close(fig)


def test_theory_only_sweep_draws_without_sgd() -> None:
    ds = bayes_sweep(SWEEPS["kl_vs_batch"][:1], fake=False)
    fig = FIGURES["kl_vs_batch"].plot(ds)
    assert "theory only" in fig._suptitle.get_text()
    plt.close(fig)


def test_protocol_refuses_the_posterior_target(sweeps) -> None:
    ds = sweeps["kl_vs_batch"]
    with pytest.raises(ValueError, match="sandwich"):
        FIGURES["protocol"].plot(ds)


def test_a_second_value_of_a_fixed_axis_is_refused(sweeps) -> None:
    ds = sweeps["injected_noise"]
    two = xr.concat([ds, ds.assign_coords(N=("cell", ds["N"].values + 1))], "cell")
    with pytest.raises(ValueError, match="'N'"):
        FIGURES["injected_noise"].plot(two)


def test_an_axis_the_figure_does_not_draw_is_split_into_panels(monkeypatch) -> None:
    """With FIGURES wired into the experiment, a second sampling mode gives two panels."""
    import dataclasses

    from weightdyn.plots import facets
    from weightdyn.single_layer import bayes_experiment

    wired = dataclasses.replace(EXP, figures=FIGURES)
    monkeypatch.setitem(bayes_experiment.EXPERIMENTS, "bayes_sampler", wired)
    block = {**SWEEPS["injected_noise"][0], "sampling": ["with", "without"], "lr": [0.01, 0.3]}
    ds = bayes_sweep([block])
    assert FIGURES["injected_noise"].extra_axes(_varying_axes(ds), {}) == ["sampling"]
    fig = facets.draw("bayes_sampler", "injected_noise", ds, {}, dpi=60)
    assert len(fig.axes) == 2
    plt.close(fig)
