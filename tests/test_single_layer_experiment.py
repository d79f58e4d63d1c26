"""The ``single_layer`` registry entry: params, derive, run_cell per dynamics and init, figures.

``run_sweep`` (also used by test_single_layer_discrete.py) expands a sweep block, runs its cells
on their teacher-student data sets and stacks them as the workflow's merge rule does.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from weightdyn import configfile, experiments, io, seeds, sweep
from weightdyn.experiments import ConfigError
from weightdyn.plots.common import save
from weightdyn.single_layer.datasets import sgd_dataset, theory_dataset
from weightdyn.single_layer.protocol import SGDProtocol, run_stationary_sgd
from weightdyn.single_layer.stationary_experiment import CELL_KEYS, slowest_tau_int
from weightdyn.single_layer.teacher_student import TEACHER_STUDENT

EXP = experiments.get("single_layer")
#: a protocol short enough for unit tests (seconds for every dynamics)
TINY = {"replicas": 4, "burnin_min_steps": 50, "burnin_max_steps": 200, "sample_steps": 400,
        "thin": 5, "n_blocks": 2, "n_test": 50}  # fmt: skip


def cell_data(params: dict[str, Any]) -> Any:
    return TEACHER_STUDENT.load(TEACHER_STUDENT.make(params))


def run_sweep(name: str, block: dict[str, Any]) -> xr.Dataset:
    """The merged dataset of one sweep (cells along ``cell``, one coordinate per given axis)."""
    sw = sweep.expand_sweep(name, {"experiment": "single_layer", **block})
    cells = [EXP.run_cell({**c.params, "data": cell_data(c.params)}, lambda _: None)
             for c in sw.cells]  # fmt: skip
    coords = {p.name: ([c.params[p.name] for c in sw.cells], p.attrs()) for p in EXP.axes}
    coords["cell_id"] = ([c.id for c in sw.cells], {"long_name": "cell identifier", "units": "1"})
    return io.stack_cells(cells, coords, io.sweep_attrs(EXP, name, sw.settings, EXP.axes))


# --------------------------------------------------------------------------- params, derive

ERRORS = {
    "batch_size > P": ({"N": 10, "P": 8, "batch_size": 9}, ["sweeps.s.batch_size", "9", "P=8",
                                                            "1 <= batch_size <= P"]),
    "both P and p_over_n": ({"N": 10, "P": 20, "p_over_n": 2.0}, ["sweeps.s.P", "got both"]),
    "neither P nor p_over_n": ({"N": 10}, ["sweeps.s.P", "got neither"]),
    "P rounds to 0": ({"N": 2, "p_over_n": 0.1}, ["sweeps.s.p_over_n", "P=0"]),
    "bad dynamics": ({"N": 10, "P": 20, "dynamics": ["sgd", "langevin"]},
                     ["sweeps.s.dynamics", "'langevin'", "'sgf_additive'", "'none'"]),
    "bad init": ({"N": 10, "P": 20, "init": "zeros"}, ["sweeps.s.init", "'wstar'", "'random'"]),
    "setting as a list": ({"N": 10, "P": 20, "replicas": [2, 4]}, ["sweeps.s.replicas", "axes"]),
    "missing N": ({"P": 20}, ["sweeps.s.N", "missing"]),
    "bad precision": ({"N": 10, "P": 20, "precision": "float16"},
                      ["sweeps.s.precision", "'float16'", "'float64'", "'float32'"]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ERRORS))
def test_config_errors_name_the_key_and_what_is_allowed(case: str) -> None:
    block, needles = ERRORS[case]
    with pytest.raises(ConfigError) as err:
        sweep.expand_sweep("s", {"experiment": "single_layer", **block})
    for needle in needles:
        assert needle in str(err.value), (needle, str(err.value))


def test_p_over_n_gives_p_and_identity_uses_n_and_p() -> None:
    by_ratio = sweep.expand_sweep("s", {"experiment": "single_layer", "N": 10, "p_over_n": 2.04})
    by_p = sweep.expand_sweep("s", {"experiment": "single_layer", "N": 10, "P": 20})
    (a,), (b,) = by_ratio.cells, by_p.cells
    assert a.params["P"] == 20 and a.params["p_over_n"] == 2.0
    assert a.id == b.id and "p_over_n" not in a.id
    cells = sweep.expand_sweep(
        "s",
        {
            "experiment": "single_layer",
            "N": 10,
            "P": 20,
            "dynamics": list(EXP.param("dynamics").allowed),
        },
    ).cells
    assert len({c.id for c in cells}) == 4


def test_precision_absent_or_float64_keeps_the_cell_ids() -> None:
    """The cells of config/test.yaml (no ``precision``) have the ids and parameters they had
    before the setting existed, and ``precision: float64`` spelled out is the same cell;
    ``float32`` is a cell of its own with the same data set, except a theory-only cell (no
    kernel runs in it)."""
    before = dataclasses.replace(EXP, params=tuple(p for p in EXP.params if p.name != "precision"))
    config = configfile.load(Path(__file__).resolve().parents[1] / "config" / "test.yaml")
    blocks = {k: b for k, b in config["sweeps"].items() if b["experiment"] == "single_layer"}
    assert blocks
    for name, block in blocks.items():
        cells = sweep.expand_sweep(name, block).cells
        assert [c.id for c in cells] == [sweep.cell_id(before, c.params) for c in cells]
        assert not any("precision" in c.params for c in cells)
        for precision in ("float64", "float32"):
            other = sweep.expand_sweep(name, {**block, "precision": precision}).cells
            for a, b in zip(other, cells, strict=True):
                same = precision == "float64" or b.params["dynamics"] == "none"
                assert (a.id == b.id) == same and (a.params == b.params) == same
            assert [sweep.data_path(EXP, c.params) for c in other] == [
                sweep.data_path(EXP, c.params) for c in cells
            ]


def test_resources_scale_with_the_dynamics() -> None:
    (cell,) = sweep.expand_sweep("s", {"experiment": "single_layer", "N": 100, "P": 200}).cells
    requests = {d: EXP.resources({**cell.params, "dynamics": d}, 1) for d in
                ("none", "sgd", "sgf_multiplicative")}  # fmt: skip
    assert all(r["mem_mb"] > 0 and r["runtime"] > 0 for r in requests.values())
    assert requests["none"]["runtime"] < requests["sgd"]["runtime"]
    assert requests["sgd"]["runtime"] < requests["sgf_multiplicative"]["runtime"]
    assert EXP.resources(cell.params, 2)["runtime"] == 2 * requests["sgd"]["runtime"]


def test_long_kernel_cells_take_two_threads() -> None:
    """The SGD and SGF kernels split replicas over threads; short cells stay on one."""

    def threads(**axes: Any) -> int:
        (cell,) = sweep.expand_sweep("s", {"experiment": "single_layer", **axes}).cells
        return EXP.resources(cell.params, 1)["threads"]

    assert threads(N=190, P=200) == 2
    assert threads(N=190, P=200, dynamics="sgf_additive") == 2
    assert threads(N=10, P=20, sample_max_steps=10_000, burnin_max_steps=10_000) == 1


# ------------------------------------------------------------------------------ run_cell


def _cell(**axes: Any) -> dict[str, Any]:
    (cell,) = sweep.expand_sweep("s", {"experiment": "single_layer", "N": 6, "P": 12,
                                       "batch_size": 3, **TINY, **axes}).cells  # fmt: skip
    return cell.params


@pytest.mark.parametrize("dynamics", ["sgd", "sgf_additive", "sgf_multiplicative", "none"])
@pytest.mark.parametrize("init", ["wstar", "random"])
def test_run_cell_every_dynamics_and_init(dynamics: str, init: str) -> None:
    params = _cell(dynamics=dynamics, init=init, init_scale=0.5)
    ds = EXP.run_cell({**params, "data": cell_data(params)}, lambda _: None)
    assert ds.sizes["mode"] == 6
    assert np.all(np.diff(ds["eig_M_lyapunov"].values) <= 0)
    for name, var in ds.variables.items():
        assert {"long_name", "units"} <= set(var.attrs), name
    if dynamics == "none":
        assert "eig_M_sgd" not in ds and "eig_M_euler" not in ds
        return
    assert int(ds["diverged"]) == 0
    assert np.all(np.isfinite(ds["eig_M_sgd"].values))
    assert float(ds["var_w_sgd_wstar"]) > 0 and np.isfinite(float(ds["frobenius_error_eq30"]))
    assert ("eig_M_euler" in ds) == dynamics.startswith("sgf_")
    if dynamics.startswith("sgf_"):
        assert float(ds["dt"]) == params["lr"]


@pytest.mark.parametrize("dynamics", ["sgd", "sgf_additive", "sgf_multiplicative"])
def test_float32_cell_runs_the_same_streams_in_single_precision(dynamics: str) -> None:
    """``precision: float32`` reaches the kernels: the cell's covariance differs from the
    float64 cell's in its last bits only (the same streams)."""
    params64 = _cell(dynamics=dynamics)
    params32 = _cell(dynamics=dynamics, precision="float32")
    data = cell_data(params64)
    ds64, ds32 = (EXP.run_cell({**p, "data": data}, lambda _: None) for p in (params64, params32))
    eig64, eig32 = ds64["eig_M_sgd"].values, ds32["eig_M_sgd"].values
    assert not np.array_equal(eig32, eig64)
    np.testing.assert_allclose(eig32, eig64, rtol=1e-4)


def test_sgd_cell_is_the_old_theory_and_sgd_files_bit_for_bit() -> None:
    """Stream single_layer/sgd seeded by the old seven cell keys, the old protocol, old datasets."""
    params = _cell(init="random", init_scale=0.3)
    data = cell_data(params)
    ds = EXP.run_cell({**params, "data": data}, lambda _: None)
    rng = seeds.generator("single_layer/sgd", {k: params[k] for k in CELL_KEYS})
    proto = SGDProtocol(init="random", init_scale=0.3,
                        **{k: v for k, v in TINY.items() if k != "n_test"})  # fmt: skip
    w_star, result = run_stationary_sgd(data, params["lr"], 3, "with", proto, rng)
    theory = theory_dataset(data, params["lr"], 3, "with")
    tau_int = slowest_tau_int(theory, "sgd", 1.0)  # the tiny cell's blocks are short: pooled
    assert int(ds["errors_by_replica"]) == 1
    old = xr.merge([theory, sgd_dataset(data, w_star, result, tau_int=tau_int)])
    for name in old.data_vars:
        assert np.array_equal(ds[name].values, old[name].values, equal_nan=True), name


def test_diverging_cell_is_flagged_not_raised() -> None:
    params = _cell(lr=50.0, dynamics="sgf_multiplicative")
    ds = EXP.run_cell({**params, "data": cell_data(params)}, lambda _: None)
    assert int(ds["diverged"]) == 1 and np.isnan(ds["eig_M_sgd"].values).all()
    assert np.isnan(ds["eig_M_discrete"].values).all() and float(ds["second_moment_radius"]) > 1


# ----------------------------------------------------------------------- agreement, figures


@pytest.fixture(scope="module")
def question_a() -> xr.Dataset:
    """Question (a) of issue 11 at unit-test size: three dynamics at three learning rates."""
    block = {"N": 6, "p_over_n": 2, "batch_size": 3, "lr": [0.1, 0.3, 0.6],
             "dynamics": ["sgd", "sgf_additive", "sgf_multiplicative"], **TINY}  # fmt: skip
    return run_sweep("question_a", block)


def test_rows_per_lr_and_only_for_what_the_sweep_holds(question_a: xr.Dataset) -> None:
    rows = EXP.agreement(question_a, "(a)")
    assert {r.figure for r in rows} == {"(a)"} and all(r.points > 0 for r in rows)
    compared = [r.compared for r in rows]
    for lr in ("0.1", "0.3", "0.6"):
        assert f"tr M of SGF (additive) (about w*) vs tr M of Eq. 30 (lr = {lr})" in compared
        assert f"tr M of SGD (about w*) vs the exact discrete-time fixed point (lr = {lr})" in (
            compared
        )
    assert not any("theory only" in c or "diverged" in c for c in compared)
    sgd_only = question_a.isel(cell=np.flatnonzero(question_a["dynamics"].values == "sgd"))
    assert not any("SGF" in r.compared for r in EXP.agreement(sgd_only, "sgd"))


def test_dynamics_vs_lr_draws_and_refuses_a_second_curve_family(
    question_a: xr.Dataset, tmp_path: Path
) -> None:
    path = tmp_path / "dynamics_vs_lr.png"
    save(EXP.figures["dynamics_vs_lr"].plot(question_a), [str(path)], dpi=60)
    assert path.stat().st_size > 0
    other = question_a.assign_coords(batch_size=("cell", np.arange(question_a.sizes["cell"])))
    with pytest.raises(ValueError, match="batch_size"):
        EXP.figures["dynamics_vs_lr"].plot(other)
    with pytest.raises(ValueError, match="lr"):
        EXP.figures["dynamics_spectra"].plot(question_a)


def test_figures_refuse_theory_only_sweeps(tmp_path: Path) -> None:
    ds = run_sweep("c", {"N": 6, "p_over_n": [1.5, 2.0, 4.0], "batch_size": 3, "dynamics": "none",
                         "data_seed": [0, 1]})  # fmt: skip
    save(EXP.figures["theory_extremes"].plot(ds), [str(tmp_path / "c.png")], dpi=60)
    assert [r.compared[:11] for r in EXP.agreement(ds, "c")] == ["theory only"]
    with pytest.raises(ValueError, match="theory only"):
        EXP.figures["spectra"].plot(ds)


def test_spectra_and_variance_figures_draw(tmp_path: Path) -> None:
    ds = run_sweep("b", {"N": 6, "p_over_n": [2.0, 4.0], "batch_size": 3, **TINY})
    for name in ("spectra", "dynamics_spectra"):
        if name == "dynamics_spectra":
            ds = ds.isel(cell=[0])
        save(EXP.figures[name].plot(ds), [str(tmp_path / f"{name}.png")], dpi=60)
    ds = run_sweep("a", {"P": 12, "N": [3, 6, 12], "batch_size": 3, **TINY})
    save(EXP.figures["variance_vs_size"].plot(ds), [str(tmp_path / "a.png")], dpi=60)


def test_sgf_step_covers_the_sde_time_of_the_sgd_protocol() -> None:
    """dt = lr / 2: twice the Euler steps of dt = lr, and the Euler fixed point moves to Eq. 30."""
    runs = {}
    for ratio in (1.0, 0.5):
        params = _cell(dynamics="sgf_additive", dt_over_lr=ratio, lr=0.5)
        runs[ratio] = EXP.run_cell({**params, "data": cell_data(params)}, lambda _: None)
    assert int(runs[0.5]["sample_steps"]) == 2 * int(runs[1.0]["sample_steps"])
    assert float(runs[0.5]["dt"]) == 0.25
    eq30, euler = runs[1.0]["eig_M_lyapunov"].values, runs[1.0]["eig_M_euler"].values
    finer = runs[0.5]["eig_M_euler"].values
    assert np.all(np.abs(finer - eq30) < np.abs(euler - eq30))


def test_spatial_variance_of_sgd_against_w_star_and_m(tmp_path: Path) -> None:
    """Fig. 4a: the variance across the weights at fixed time, measured on stationary SGD, is
    (1/N)[w*^T Pi w* + tr(Pi M)] within 4 s.e. plus 10 % of its fluctuation part tr(Pi M)/N
    (Eq. 30 neglects O(lr) terms); the view with theory-only data sets draws the data-set band."""
    protocol = {**TINY, "replicas": 8, "sample_steps": 20000, "burnin_max_steps": 5000}
    sgd = run_sweep("a", {"P": 12, "N": [3, 6], "batch_size": 3, "lr": 0.2, **protocol})
    fluct = sgd["var_w_spatial_theory"] - [
        np.var(theory_w_star(sgd.isel(cell=i))) for i in range(sgd.sizes["cell"])
    ]
    gap = abs(sgd["var_w_spatial_sgd"] - sgd["var_w_spatial_theory"])
    assert np.all(fluct > 0)
    assert np.all(gap <= 4 * sgd["var_w_spatial_sgd_se"] + 0.1 * fluct)
    (row,) = [r for r in EXP.agreement(sgd, "a") if "spatial" in r.compared]
    assert row.points == 2
    more = run_sweep("t", {"P": 12, "N": [3, 6], "batch_size": 3, "lr": 0.2, "dynamics": "none",
                           "data_seed": [1, 2], **protocol})  # fmt: skip
    both = xr.concat([sgd, more], dim="cell", data_vars="all", join="outer")
    fig = EXP.figures["variance_vs_size"].plot(both)
    assert [ax.get_ylabel()[:8] for ax in fig.axes] == ["temporal", "spatial ", "loss $L$"]
    save(fig, [str(tmp_path / "a.png")], dpi=60)


def theory_w_star(cell: xr.Dataset) -> np.ndarray:
    """w* of a stacked cell's data set (Eq. 7)."""
    params = {k: cell[k].item() for k in ("N", "P", "sigma_eps2", "data_seed")}
    data = cell_data({**params, "n_test": TINY["n_test"]})
    return np.linalg.lstsq(data.X, data.y, rcond=None)[0]
