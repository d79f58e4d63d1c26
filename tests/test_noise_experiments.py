"""The noise experiments of the registry (paper 000 Figs. 1a, 1b, 2a-c): declarations, config
errors, tiny cells through the sweep dialect, seeds, summary, agreement rows and figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from weightdyn import experiments, io, seeds, sweep
from weightdyn.experiments import ConfigError
from weightdyn.plots import noise as plots
from weightdyn.single_layer import noise
from weightdyn.single_layer.noise_experiments import EXPERIMENTS

NAMES = ("noise_spectrum", "projector", "k_diagonal", "hessian_basis", "sgd_noise")
SPECTRUM = {"experiment": "noise_spectrum", "N": 4, "p_over_n": [2.0, 3.0], "batch_size": 2,
            "sampling": ["with", "without"], "sigma_eps2": 0.25, "n_batches": 200,
            "n_test": 5}  # fmt: skip


def run(block: Mapping[str, Any], name: str = "s") -> tuple[sweep.Sweep, list[xr.Dataset]]:
    """Every cell of a sweep block, run as the workflow does (data set made and loaded)."""
    sw = sweep.expand_sweep(name, block)
    exp = experiments.get(sw.experiment)
    cells = []
    for cell in sw.cells:
        params = dict(cell.params)
        if exp.data is not None:
            params["data"] = exp.data.load(exp.data.make(params))
        cells.append(exp.run_cell(params, lambda _: None))
    return sw, cells


def merge(sw: sweep.Sweep, cells: list[xr.Dataset]) -> xr.Dataset:
    exp = experiments.get(sw.experiment)
    coords = {p.name: ([c.params[p.name] for c in sw.cells], p.attrs()) for p in exp.axes}
    return io.stack_cells(cells, coords)


def test_registry_entries_and_declarations() -> None:
    assert set(EXPERIMENTS) == set(NAMES)
    for name in NAMES:
        exp = experiments.get(name)
        assert exp is EXPERIMENTS[name] and exp.family == "single_layer"
        assert exp.figures and set(exp.default_figures) <= set(exp.figures)
        for param in exp.params:
            assert param.long_name and param.units == "1", param.name
        assert exp.resources({}, 2)["mem_mb"] == 4000
    assert {p.name for p in experiments.get("noise_spectrum").axes} == {
        "N", "P", "p_over_n", "sigma_eps2", "data_seed", "batch_size", "sampling", "n_batches"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"p_over_n": None},
            r"sweeps\.s\.P: None with p_over_n None \(neither given\); allowed: exactly one of",
        ),
        ({"P": 8}, r"sweeps\.s\.P: 8 with p_over_n .*\(both given\); allowed: exactly one"),
        ({"batch_size": 9}, r"sweeps\.s\.batch_size: 9 exceeds P = 8; allowed: 1 <= batch_size"),
        (
            {"n_batches": 5},
            r"sweeps\.s\.n_batches: 5 .*allowed: 0 \(theory only\) or >= 2 n_blocks",
        ),
        ({"sampling": "replace"}, r"sweeps\.s\.sampling: 'replace' .*allowed: 'with', 'without'"),
        ({"sigma_eps2": 0.0}, r"sweeps\.s\.sigma_eps2: 0\.0 is out of range; allowed: 0 < number"),
        ({"n_blocks": [2, 3]}, r"sweeps\.s\.n_blocks: .*a setting takes one value"),
        ({"N": None}, r"sweeps\.s\.N: "),
    ],
)
def test_spectrum_config_errors_name_the_key(change: dict, message: str) -> None:
    block = {**SPECTRUM, **change}
    block = {k: v for k, v in block.items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        sweep.expand_sweep("s", block)


def test_other_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"sweeps\.p\.realisations: missing"):
        sweep.expand_sweep("p", {"experiment": "projector", "N": 3, "P": 6})
    with pytest.raises(ConfigError, match=r"sweeps\.p\.realisations: 1 is out of range"):
        sweep.expand_sweep("p", {"experiment": "projector", "N": 3, "P": 6, "realisations": 1})
    hb = {"experiment": "hessian_basis", "N": 4, "P": 6, "batch_size": 7, "sigma_eps2": 0.25}
    with pytest.raises(ConfigError, match=r"sweeps\.h\.batch_size: 7 exceeds P = 6"):
        sweep.expand_sweep("h", hb)


def test_p_over_n_and_p_name_the_same_cell() -> None:
    by_ratio = sweep.expand_sweep("a", {**SPECTRUM, "p_over_n": 2.0, "sampling": "with"})
    by_size = sweep.expand_sweep(
        "b", {**{k: v for k, v in SPECTRUM.items() if k != "p_over_n"}, "P": 8, "sampling": "with"}
    )
    (a,), (b,) = by_ratio.cells, by_size.cells
    assert a.id == b.id and a.params["P"] == 8 and b.params["p_over_n"] == 2.0


def test_spectrum_cells_use_the_old_seed_stream() -> None:
    """A cell equals the builder seeded from the old key subset (n_blocks, n_test not in it)."""
    sw, cells = run({**SPECTRUM, "p_over_n": 2.0, "sampling": "without"})
    params = sw.cells[0].params
    exp = experiments.get("noise_spectrum")
    data = exp.data.load(exp.data.make(params))
    keys = ("N", "P", "sigma_eps2", "data_seed", "batch_size", "sampling", "n_batches")
    rng = seeds.generator("noise/spectrum", {k: params[k] for k in keys})
    direct = noise.noise_spectrum_dataset(data.X, data.y, 2, "without", 200, rng, 0.25)
    xr.testing.assert_identical(cells[0], direct)


def test_spectrum_sweep_rows_and_figures() -> None:
    sw, cells = run(SPECTRUM)
    theory_sw, theory_cells = run({**SPECTRUM, "p_over_n": [1.5, 6.0], "n_batches": 0}, "t")
    ds = merge(sw, cells)
    assert ds.sizes["cell"] == 4 and ds["eig_C_empirical"].notnull().all()
    assert merge(theory_sw, theory_cells)["eig_C_empirical"].isnull().all()
    rows = experiments.get("noise_spectrum").agreement(ds, "fig2a-b")
    assert [r.equations for r in rows] == ["Eqs. 17-18, App. C", "Eq. 20", "Eqs. 17-18, App. C"]
    assert all(r.figure == "fig2a-b" and r.points == 8 for r in rows)
    assert experiments.get("noise_spectrum").agreement(merge(theory_sw, theory_cells), "t") == []
    both = xr.concat([ds, merge(theory_sw, theory_cells)], dim="cell")
    fig = plots.fig2a(ds)  # both sampling modes: one panel each
    assert len(fig.axes) == 2
    plt.close(fig)
    fig = plots.fig2a(ds.isel(cell=np.flatnonzero(ds["sampling"].values == "with")))
    assert len(fig.axes) == 1
    plt.close(fig)
    fig = plots.fig2b(both)
    main, extremes = fig.axes
    assert len(main.get_lines()) == 4 and len(extremes.get_lines()) == 4
    assert extremes.get_ylabel() and extremes.get_xlabel()
    plt.close(fig)


def test_projector_and_k_diagonal_cells() -> None:
    sw, cells = run({"experiment": "projector", "N": [3, 6], "P": [5, 12], "realisations": 3})
    ds = merge(sw, cells)
    assert ds["interpolating"].values.tolist() == [0, 0, 1, 0]  # N = 6, P = 5: flagged
    (row,) = experiments.get("projector").agreement(ds, "fig1a")
    assert row.points == 3 and row.figure == "fig1a"
    fig = plots.fig1a(ds)
    assert len(fig.axes) == 2
    plt.close(fig)
    block = {"experiment": "k_diagonal", "N": 4, "P": [8, 16], "sigma_eps2": 0.25, "n_test": 5}
    sw, cells = run(block)
    ds = merge(sw, cells)
    assert ds.sizes["rank"] == 16 and np.isnan(ds["PK_sorted"].isel(cell=0, rank=10))
    (row,) = experiments.get("k_diagonal").agreement(ds, "fig1b")
    assert row.points == 2
    fig = plots.fig1b(ds)
    assert len(fig.axes[0].get_lines()) == 4
    plt.close(fig)
    with pytest.raises(ValueError, match=r"select a single value of \['N'\]"):
        plots.fig1b(merge(*run({**block, "N": [4, 5]})))


def test_hessian_basis_summary_averages_over_data_seeds_in_order() -> None:
    block = {"experiment": "hessian_basis", "N": 4, "P": [6, 10], "batch_size": 2,
             "sigma_eps2": 0.25, "data_seed": [1, 0], "n_test": 5}  # fmt: skip
    sw, cells = run(block)
    exp = experiments.get("hessian_basis")
    summary = exp.summarize(cells, [c.params for c in sw.cells], sw.settings)
    assert summary.sizes["group"] == 2 and summary["P"].values.tolist() == [6, 10]
    seed_order = [c.params["data_seed"] for c in sw.cells]
    first = [cells[i] for i in np.argsort(seed_order[:2])]  # P = 6, data seeds 0 then 1
    xr.testing.assert_equal(
        summary.isel(group=0).reset_coords(drop=True)["C_tilde"],
        noise.hessian_basis_mean(first)["C_tilde"],
    )
    (row,) = exp.agreement(summary, "fig2c")
    assert row.points == 8
    fig = plots.fig2c(summary)
    assert len(fig.axes) == 3  # two panels and the colour bar
    plt.close(fig)
