"""Figures and views: what a figure declares it draws is checked at config time, extra axes are
split into panels (weightdyn.plots.facets), and the generic scalar figure
(weightdyn.plots.scalar)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr
import yaml
from matplotlib.container import ErrorbarContainer

from weightdyn import experiments, io, sweep
from weightdyn.experiments import ConfigError
from weightdyn.plots.common import save
from weightdyn.plots.facets import draw
from weightdyn.plots.scalar import scalar

experiments.register_module("toy_views")


def _sweeps(**blocks: dict[str, Any]) -> dict[str, sweep.Sweep]:
    return {n: sweep.expand_sweep(n, b) for n, b in blocks.items()}


def _views(config: dict[str, Any]) -> dict[str, sweep.View]:
    blocks = config["sweeps"]
    return sweep.expand_views(config, {n: sweep.expand_sweep(n, b) for n, b in blocks.items()})


TOY = {"experiment": "toy_views", "lr": [0.5, 1.0], "seed": [0, 1], "figures": []}

# ----------------------------------------------------------------------- declarations, checks


def test_every_declared_axis_is_an_axis_of_its_experiment() -> None:
    for name in experiments.names():
        exp = experiments.get(name)
        axes = {p.name for p in exp.axes}
        for figure, spec in exp.figures.items():
            declared = {*(spec.axes or ()), *spec.fixed}
            assert declared <= axes, (name, figure, declared - axes)
            assert not spec.per_cell or spec.axes is None, (name, figure)


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "test.yaml"])
def test_the_shipped_configs_draw_every_figure_as_before(name: str) -> None:
    """Every view of the shipped configs passes the check, none split into panels."""
    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / name).read_text())
    sweep.check_config(config)
    sweeps = sweep.expand_sweeps(config)
    for view in sweep.expand_views(config, sweeps).values():
        exp = experiments.get(view.experiment)
        spec = exp.figures[view.figure]
        cells = sweep.view_cells(view, sweeps)
        values = {p.name: [c.params.get(p.name) for c in cells] for p in exp.axes}
        assert spec.per_cell or not spec.extra_axes(values, view.options), view.name


def test_a_summary_figure_refuses_an_axis_it_holds_fixed_before_any_job() -> None:
    with pytest.raises(ConfigError) as err:
        _views({"sweeps": {"s": {**TOY, "figures": ["summary"]}}})
    text = str(err.value)
    assert "sweeps.s.figures" in text and "'seed': ['0', '1']" in text
    assert "draws every axis but ['seed'], which it holds at one value" in text
    assert "cannot be split" in text
    view = {"sweeps": "s", "figure": "summary", "select": {"seed": 0}}
    assert "v" in _views({"sweeps": {"s": TOY}, "views": {"v": view}})  # one seed: fine
    with pytest.raises(ConfigError, match=r"views\.v\.figure: 'summary'.*'seed'"):
        _views({"sweeps": {"s": TOY}, "views": {"v": {**view, "select": {}}}})


def test_too_many_panels_are_refused() -> None:
    many = {**TOY, "lr": 0.5, "seed": list(range(sweep.MAX_PANELS + 1)), "figures": ["by_lr"]}
    with pytest.raises(ConfigError, match=r"sweeps\.s\.figures.*25 panels.*at most 24"):
        _views({"sweeps": {"s": many}})


def test_an_axis_fixed_by_the_drawn_ones_is_drawn_unless_held_fixed() -> None:
    spectra = experiments.get("single_layer").figures["spectra"]  # draws P (P/N) only
    cells = {"N": [10, 10], "P": [20, 40], "p_over_n": [2.0, 4.0], "data_seed": [0, 1]}
    assert spectra.extra_axes(cells, {}) == []  # P/N follows P; data seeds are averaged
    cells = {"N": [10, 20], "P": [20, 40], "p_over_n": [2.0, 2.0]}
    assert spectra.extra_axes(cells, {}) == ["N"]  # N follows P here, but spectra holds it fixed
    x_n = experiments.SCALAR.extra_axes(cells, {"x": "N"})
    assert x_n == []  # the scalar figure draws P = 2 N along N
    assert experiments.SCALAR.extra_axes({**cells, "lr": [0.1, 0.2]}, {"x": "N"}) == []
    cells = {"N": [10, 10, 20, 20], "lr": [0.1, 0.2, 0.1, 0.2]}
    assert experiments.SCALAR.extra_axes(cells, {"x": "N"}) == ["lr"]
    assert experiments.SCALAR.extra_axes(cells, {"x": "N", "hue": "lr"}) == []


SCALAR_VIEW = {"sweeps": "s", "figure": "scalar", "options": {"y": "var_sim", "x": "lr"}}


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (
            {"y": "var_sim"},
            r"views\.v\.options: 'scalar' needs the options \['y', 'x'\] \(missing \['x'\]\)",
        ),
        ({"y": "var_sim", "x": "nope"}, r"options\.x: 'nope' is not an axis.*\['lr', 'seed'\]"),
        ({"y": "v", "x": "lr", "hue": "steps"}, r"options\.hue: 'steps' is not an axis"),
        ({"y": "v", "x": "lr", "logx": "yes"}, r"options\.logx: 'yes' is not allowed; .* bool"),
        ({"y": "v", "x": "lr", "colour": 1}, r"options\.colour: unknown option; allowed: \["),
    ],
)
def test_scalar_options_are_checked_at_config_time(options: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _views({"sweeps": {"s": TOY}, "views": {"v": {**SCALAR_VIEW, "options": options}}})


def test_scalar_needs_a_view_with_options() -> None:
    with pytest.raises(ConfigError, match=r"sweeps\.s\.figures: 'scalar' needs.*a view gives them"):
        _views({"sweeps": {"s": {**TOY, "figures": ["scalar"]}}})
    views = _views({"sweeps": {"s": TOY}, "views": {"v": SCALAR_VIEW}})
    assert views["v"].options == {"y": "var_sim", "x": "lr"}


# ----------------------------------------------------------------------------------- facets


def _toy_cells(lrs: list[float], seeds: list[int]) -> xr.Dataset:
    """A merged toy sweep of fake cells (variance lr/(2-lr), s.e. 5 %)."""
    s = sweep.expand_sweep("t", {**TOY, "lr": lrs, "seed": seeds})
    exp = experiments.get("toy_views")
    cells = []
    for c in s.cells:
        v = c.params["lr"] / (2 - c.params["lr"]) * (1 + 0.01 * c.params["seed"])
        attrs = {"long_name": "stationary variance, simulated", "units": "1"}
        theory = c.params["lr"] / (2 - c.params["lr"])
        variables = {"var_sim": ((), v, attrs), "var_sim_se": ((), 0.05 * v)}
        cells.append(xr.Dataset({**variables, "var_theory": ((), theory)}))
    params = [c.params for c in s.cells]
    return io.merge_sweep(exp, "t", cells, params, [c.id for c in s.cells], s.settings, "test")


def _titles(fig: plt.Figure) -> list[str]:
    return [t.get_text() for t in fig.texts]


def test_an_extra_axis_is_drawn_one_titled_panel_per_value() -> None:
    fig = draw("toy_views", "by_lr", _toy_cells([0.5, 1.0], [0, 1, 2]), {}, dpi=40)
    assert _titles(fig) == ["seed = 0", "seed = 1", "seed = 2"]
    assert len(fig.axes) == 3 and all(len(ax.images) == 1 for ax in fig.axes)
    plt.close(fig)
    fig = draw("toy_views", "by_lr", _toy_cells([0.5, 1.0], [1]), {}, dpi=40)
    assert _titles(fig) == [] and not fig.axes[0].images  # nothing to split: drawn as it is
    plt.close(fig)


def test_panels_per_combination_of_two_extra_axes() -> None:
    ds = _toy_cells([0.5, 1.0], [0, 3])
    fig = draw("toy_views", "scalar", ds, {"y": "var_sim", "x": "seed"}, dpi=30)
    assert _titles(fig) == ["lr = 0.5", "lr = 1"]
    plt.close(fig)


# ------------------------------------------------------------------------ the scalar figure


def noise_sweep(sigmas: list[float], seeds: list[int], batch: list[int]) -> xr.Dataset:
    """A synthetic merged single-layer sweep over sigma_eps2 with the trace-of-M conventions:
    ``trace_M_sgd`` with its s.e. (ancillary_variables) and two theories (weightdyn_theories),
    tr M = N lr sigma^2 / 2S for Eq. 30 here, 5 % more for the discrete-time theory."""
    block = {"experiment": "single_layer", "N": 10, "p_over_n": 2.0, "lr": 0.1}
    s = sweep.expand_sweep("noise", {**block, "sigma_eps2": sigmas, "data_seed": seeds,
                                     "batch_size": batch})  # fmt: skip
    exp = experiments.get("single_layer")
    rng = np.random.default_rng(0)
    cells = [_trace_cell(c.params, rng) for c in s.cells]
    ids = [c.id for c in s.cells]
    return io.merge_sweep(exp, "noise", cells, [c.params for c in s.cells], ids, s.settings, "t")


def _trace_cell(params: dict[str, Any], rng: np.random.Generator) -> xr.Dataset:
    p = params
    eq30 = p["N"] * p["lr"] * p["sigma_eps2"] / (2 * p["batch_size"]) * (1 + 0.02 * p["data_seed"])
    discrete = 1.05 * eq30
    sim = discrete * (1 + 0.03 * rng.standard_normal())
    src = "synthetic"
    return xr.Dataset(
        {
            "trace_M_sgd": ((), sim, {**io.attrs("tr M of SGD about w*", "1", src),
                                      "ancillary_variables": "trace_M_sgd_se",
                                      "weightdyn_theories": "trace_M_eq30 trace_M_discrete"}),
            "trace_M_sgd_se": ((), 0.03 * sim, io.attrs("standard error of tr M", "1", src)),
            "trace_M_eq30": ((), eq30, io.attrs("tr M of Eq. 30 (Lyapunov)", "1", src)),
            "trace_M_discrete": ((), discrete, io.attrs("tr M, exact discrete time", "1", src)),
            "var_w_sgd_wstar": ((), sim / p["N"], io.attrs("weight variance about w*", "1", src)),
            "var_w_sgd_wstar_se": ((), 0.03 * sim / p["N"], io.attrs("its s.e.", "1", src)),
        }
    )  # fmt: skip


def _bars(ax: plt.Axes) -> list[ErrorbarContainer]:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def test_scalar_draws_bars_theories_and_labels() -> None:
    ds = noise_sweep([0.05, 0.1, 0.2, 0.4], [0], [5])
    fig = scalar(ds, y="trace_M_sgd", x="sigma_eps2", logx=True)
    ax = fig.axes[0]
    (bars,) = _bars(ax)
    assert np.allclose(bars.lines[0].get_xdata(), [0.05, 0.1, 0.2, 0.4])
    segments = bars.lines[2][0].get_segments()
    se = ds["trace_M_sgd_se"].values[np.argsort(ds["sigma_eps2"].values)]
    assert np.allclose([seg[1, 1] - seg[0, 1] for seg in segments], 2 * se)
    styles = {line.get_linestyle() for line in ax.get_lines() if len(line.get_xdata()) == 4}
    assert {"-", "--"} <= styles  # the two theories
    assert ax.get_xlabel() == r"label-noise variance $\sigma_\epsilon^2$"
    assert ax.get_ylabel() == "tr M of SGD about w*" and ax.get_xscale() == "log"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["tr M of SGD about w*", "tr M of Eq. 30 (Lyapunov)",
                      "tr M, exact discrete time"]  # fmt: skip
    assert "N = 10" in ax.get_title() and "s.e." in ax.get_title()
    plt.close(fig)


def test_scalar_averages_data_seeds_and_colours_by_hue() -> None:
    ds = noise_sweep([0.1, 0.4], [0, 1, 2], [5, 10])
    fig = scalar(ds, y="trace_M_sgd", x="sigma_eps2", hue="batch_size")
    ax = fig.axes[0]
    assert len(_bars(ax)) == 2  # one per batch size
    at = ds.isel(cell=np.flatnonzero((ds["batch_size"] == 5) & (ds["sigma_eps2"] == 0.1)))
    assert at.sizes["cell"] == 3
    y5 = _bars(ax)[0].lines[0].get_ydata()
    assert np.isclose(y5[0], float(at["trace_M_sgd"].mean()))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "$S$ = 5" in legend and "$S$ = 10" in legend
    assert "mean over data sets" in ax.get_title()
    plt.close(fig)


def test_scalar_on_an_existing_variable_finds_its_se_by_name() -> None:
    ds = noise_sweep([0.1, 0.2], [0], [5])
    fig = scalar(ds, y="var_w_sgd_wstar", x="sigma_eps2", logy=True)
    (bars,) = _bars(fig.axes[0])
    assert len(bars.lines[2][0].get_segments()) == 2 and fig.axes[0].get_yscale() == "log"
    plt.close(fig)


def test_scalar_draws_a_text_axis_at_positions() -> None:
    ds = noise_sweep([0.1], [0], [5]).isel(cell=[0, 0])
    ds = ds.assign_coords(dynamics=("cell", ["sgd", "sgf_additive"]))
    fig = scalar(ds, y="trace_M_sgd", x="dynamics")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["sgd", "sgf_additive"]
    assert np.allclose(_bars(ax)[0].lines[0].get_xdata(), [0, 1])
    plt.close(fig)


def test_scalar_names_what_it_cannot_draw() -> None:
    ds = noise_sweep([0.1, 0.2], [0], [5])
    with pytest.raises(ValueError, match=r"y = 'trace' is not a per-cell scalar.*'trace_M_sgd'"):
        scalar(ds, y="trace", x="sigma_eps2")
    with pytest.raises(ValueError, match=r"x = 'steps' is not an axis of the cells"):
        scalar(ds, y="trace_M_sgd", x="steps")
    with pytest.raises(ValueError, match=r"hue = 'sigma_eps2' is x"):
        scalar(ds, y="trace_M_sgd", x="sigma_eps2", hue="sigma_eps2")
    broken = ds.drop_vars("trace_M_discrete")
    with pytest.raises(ValueError, match=r"weightdyn_theories names \['trace_M_discrete'\]"):
        scalar(broken, y="trace_M_sgd", x="sigma_eps2")


def test_figures_are_written(tmp_path: Path) -> None:
    """A faceted scalar figure saved as the figure job saves it: one titled panel per S."""
    both = noise_sweep([0.05, 0.1, 0.2, 0.4], [0, 1], [5, 10])
    fig = draw("single_layer", "scalar", both, {"y": "trace_M_sgd", "x": "sigma_eps2"}, dpi=60)
    assert _titles(fig) == ["batch_size = 5", "batch_size = 10"]
    save(fig, [str(tmp_path / "facets.png"), str(tmp_path / "facets.pdf")], dpi=60)
    assert (tmp_path / "facets.png").stat().st_size > 5_000
    assert (tmp_path / "facets.pdf").read_bytes().startswith(b"%PDF")
