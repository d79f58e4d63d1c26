"""The five mean-field experiments of paper 002 as registry entries: one config dialect, the
``part`` axis and its companion cells, cell ids that survive added axis values, stacked sweeps."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import xarray as xr

from weightdyn import experiments, io, sweep
from weightdyn.experiments import ConfigError

MEASURE = {"kind": "gauss_legendre", "size": 16}
BLOCKS = {
    "mf_width": {
        "N": [10, 100],
        "measure": MEASURE,
        "target": {"kind": "sin", "amplitude": 1.0},
        "init": {"mean": [0.0, 0.0, 0.0], "std": [1.0, 2.0, 1.0]},
        "dt": 0.05,
        "output_dt": 0.1,
        "t_max": 1.0,
        "t_fixed": [0.0, 1.0],
        "t_late": 0.5,
        "grid_width": 6.0,
        "reference_points": 9,
        "check_points": 7,
        "particles_per_cell": 100,
        "seeds_min": 3,
        "seeds_max": 10,
        "chunk_particles": 1000,
        "energy": {"N": 10, "seeds": 2, "t_max": 0.5, "interval_steps": 10, "points": 5},
    },
    "mf_pde": {
        "part": ["grid", "particles"],
        "scheme": ["upwind", "muscl"],
        "grid": [16, 32],
        "N": [50, 200],
        "measure": MEASURE,
        "bins": 8,
    },
    "mf_small_output": {
        "part": ["eps", "w0"],
        "eps": [0.01, 0.1],
        "w0_scale": [0.1, 0.01],
        "unit": {"kind": "tanh"},
        "target": {"kind": "sin", "amplitude": 1.0},
        "measure": MEASURE,
        "particles": 4,
        "seeds": 3,
        "wtilde": {"mean": [0.0, 0.0], "std": [2.0, 1.0]},
        "w0_ratio": 1.0,
        "eps_fit_max": 0.1,
        "t_end": 4.0,
        "dt": 0.05,
        "n_times": 11,
    },
    "mf_gaussian": {
        "s": [0.01, 0.03, 0.1],
        "target": {"kind": "tanh_bumps", "amplitude": 3.0},
        "measure": MEASURE,
        "init": {"mean": [0.5, 1.0, 0.3], "std": [1.0, 1.0, 1.0]},
        "t_end": 4.0,
        "dt": 0.02,
        "outputs": 20,
        "hermite_points": 5,
        "stationary_s": 1e-6,
        "stationary_growth": 1e4,
        "relax_t": 1000.0,
        "counter_a": 2.0,
    },
    "mf_linearisation": {
        "part": ["perturb", "grid"],
        "delta": [1e-4, 1e-3],
        "grid_size": [16, 32],
        "unit": {"kind": "shifted_tanh", "beta": 4.0},
        "measure": {"kind": "grid", "size": 6},
        "p_star": {"mean": [1.0, 0.3], "std": [0.5, 0.6]},
        "init": {"mean": [0.0, -0.2], "std": [0.5, 0.7]},
        "particles": 50,
        "dt": 0.1,
        "output_dt": 1.0,
        "t_end": 100.0,
        "fit_loss": [1e-6, 1e-9],
        "directions": 2,
        "perturb_decades": 2,
        "grid_width": 5.0,
        "reference_points": 41,
        "dense_max": 16,
    },
}
MAIN_AXES = {  # experiment -> (axis, a value to add)
    "mf_width": [("N", 1000)],
    "mf_pde": [("grid", 64), ("N", 1000)],
    "mf_small_output": [("eps", 0.03), ("w0_scale", 0.001)],
    "mf_gaussian": [("s", 0.003)],
    "mf_linearisation": [("delta", 1e-5), ("grid_size", 64)],
}


def _block(name: str, **changes: object) -> dict:
    return {"experiment": name, **copy.deepcopy(BLOCKS[name]), **changes}


def _ids(name: str, **changes: object) -> list[str]:
    return [c.id for c in sweep.expand_sweep("s", _block(name, **changes)).cells]


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_registry_entry_declares_its_parameters_and_summary_figures(name: str) -> None:
    exp = experiments.get(name)
    assert exp.name == name and exp.family == "mean_field"
    assert exp.summarize is not None and exp.agreement is not None
    assert exp.default_figures == tuple(exp.figures)
    assert all(f.source == "summary" and f.caption for f in exp.figures.values())
    part = exp.param("part")
    assert part.axis and part.default == part.allowed[0]
    for param in exp.params:
        assert param.long_name and param.units == "1", param.name
    assert exp.resources({}, 2) == {"mem_mb": 8000, "runtime": 120}


def test_the_five_experiments_draw_the_seventeen_figures() -> None:
    assert sum(len(experiments.get(name).figures) for name in BLOCKS) == 17


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_one_nested_dialect_with_messages_naming_the_key(name: str) -> None:
    """``measure: {kind, size}`` everywhere; a bad nested value names ``<key>.<subkey>``."""
    with pytest.raises(ConfigError) as err:
        sweep.expand_sweep("s", _block(name, measure={"kind": "foo", "size": 16}))
    assert str(err.value) == (
        "sweeps.s.measure.kind: 'foo' is not allowed; allowed: 'gauss_legendre', 'grid'"
    )
    with pytest.raises(ConfigError, match=r"sweeps\.s\.measure: unknown keys \['points'\]"):
        sweep.expand_sweep("s", _block(name, measure={**MEASURE, "points": 3}))
    with pytest.raises(ConfigError, match=r"sweeps\.s\.measure\.size: 1 is not allowed"):
        sweep.expand_sweep("s", _block(name, measure={"kind": "grid", "size": 1}))


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_unknown_key_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=rf"sweeps\.s: unknown keys \['colour'\] .*{name}"):
        sweep.expand_sweep("s", _block(name, colour="red"))


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_companion_cells_are_added_once(name: str) -> None:
    """The summary's reference cells come with every sweep, once, whatever the parts listed."""
    exp = experiments.get(name)
    cells = sweep.expand_sweep("s", _block(name)).cells
    extra = exp.extra_cells({}) if exp.extra_cells else []
    parts = [c.params["part"] for c in cells]
    for companion in extra:
        assert parts.count(companion["part"]) == 1
    listed = sweep.expand_sweep("s", _block(name, part=list(exp.param("part").allowed))).cells
    assert sorted(c.id for c in listed) == sorted(c.id for c in cells)


@pytest.mark.parametrize(
    ("name", "axis", "value"), [(n, a, v) for n, pairs in MAIN_AXES.items() for a, v in pairs]
)
def test_adding_an_axis_value_adds_its_cells_and_keeps_the_others(name, axis, value) -> None:
    """Only the cells with the new value are new (one per scheme for a new E2 grid size)."""
    before = set(_ids(name))
    cells = sweep.expand_sweep("s", _block(name, **{axis: [*BLOCKS[name][axis], value]})).cells
    new = [c for c in cells if c.id not in before]
    assert before <= {c.id for c in cells}
    assert new and all(c.params[axis] == value for c in new)
    assert len(new) == (2 if (name, axis) == ("mf_pde", "grid") else 1)


def test_a_part_missing_its_axis_value_is_refused() -> None:
    block = _block("mf_small_output", part="w0")
    del block["w0_scale"]
    with pytest.raises(ConfigError, match=r"sweeps\.s\.w0_scale: missing; cells of part 'w0'"):
        sweep.expand_sweep("s", block)


def test_stacked_sweep_keeps_every_part(tmp_path) -> None:
    """All parts of a sweep stack into one file (results/<sweep>.nc) without a variable clash."""
    s = sweep.expand_sweep("e1", _block("mf_width"))
    exp = experiments.get("mf_width")
    datasets = [exp.run_cell(c.params, lambda _: None) for c in s.cells]
    coords = {p.name: ([c.params.get(p.name) for c in s.cells], p.attrs()) for p in exp.axes}
    io.write_atomic(io.stack_cells(datasets, coords), tmp_path / "e1.nc")
    with xr.open_dataset(tmp_path / "e1.nc") as merged:
        part = merged["part"].values
        assert list(part) == ["width", "width", "reference", "check", "energy"]
        assert np.all(np.isfinite(merged["loss"].values[part == "width"][:, :3]))
        assert np.all(np.isfinite(merged["loss_inf"].values[(part == "reference")]))
        assert np.isfinite(merged["eq12_rel_error"].values[part == "energy"]).all()
    summary = exp.summarize(datasets, [c.params for c in s.cells], s.settings)
    assert summary["N"].values.tolist() == [10, 100]
    assert summary["seeds"].values.tolist() == [10, 3]
