"""Error-bar statements measured on the drawn figure (weightdyn.plots.errorbars)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from weightdyn.plots.errorbars import ErrorBars, bar_note, errorbar, measure, state_bars


def test_bars_inside_their_markers_are_counted_hidden() -> None:
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    x = np.arange(1.0, 5.0)
    y = np.full(4, 10.0)
    # the axis spans about 10 units over ~2 inches: 1e-3 is far inside a 6-point marker, 3 not
    errorbar(ax, x, y, yerr=[1e-3, 1e-3, 3.0, np.nan], fmt="o", ms=6)
    ax.set_ylim(5, 15)
    hidden, drawn, largest = measure(fig)
    assert (hidden, drawn) == (2, 3)  # the NaN bar is not drawn
    assert np.isclose(largest, 0.3)
    plt.close(fig)


def test_a_bar_leaving_a_log_axis_is_visible() -> None:
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    errorbar(ax, [1.0, 2.0], [1e-3, 1e-3], yerr=[2e-3, 1e-9], fmt="o", ms=4)
    ax.set_yscale("log")
    hidden, drawn, _ = measure(fig)
    assert (hidden, drawn) == (1, 2)
    plt.close(fig)


def test_only_the_bars_of_the_given_axes_are_measured() -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3), layout="constrained")
    errorbar(left, [1.0], [1.0], yerr=[1e-6], fmt="o")
    errorbar(right, [1.0, 2.0], [1.0, 2.0], yerr=[1e-6, 1e-6], fmt="o")
    for ax in (left, right):
        ax.set_ylim(0, 3)  # autoscaling would fit the axis to the bars
    assert measure(fig, [left])[:2] == (1, 1)
    assert measure(fig)[:2] == (3, 3)
    plt.close(fig)


def test_the_statement_names_the_bars_their_size_and_the_hidden_ones() -> None:
    assert bar_note("+-1 s.e.", 3, 3, 0.0123) == (
        "bars: +-1 s.e., at most 1.2 % of the value; all smaller than the markers"
    )
    assert bar_note("+-1 s.e.", 2, 5, None) == "bars: +-1 s.e., 2 of 5 smaller than the markers"
    assert bar_note("+-1 s.e.", 0, 5, 1.42) == "bars: +-1 s.e., at most 142 % of the value"
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    errorbar(ax, [1.0, 2.0], [1.0, 1.0], yerr=[1e-6, 1e-6], fmt="o")
    ax.set_ylim(0, 2)
    text = state_bars(fig, ax.set_title(""), "+-1 s.e.", "head {x}\n{bars}")
    assert text == ax.get_title()
    assert text.startswith("head {x}\nbars: +-1 s.e., at most 0.0001 % of the value; all")
    plt.close(fig)


def _note(err: np.ndarray, kind: str = "bars", log: bool = False) -> str:
    fig, ax = plt.subplots(figsize=(3, 3), layout="constrained")
    x, y = np.arange(1.0, 6.0), np.linspace(1.0, 2.0, 5)
    bars = ErrorBars("$\\pm$1 s.e.", kind=kind)
    if kind == "band":
        bars.band(ax, x, y, err, color="C0", ms=4)
    else:
        bars.errorbar(ax, x, y, err, fmt="o", ms=4)
    if log:
        ax.set_yscale("log")
    note = bars.note(fig)
    plt.close(fig)
    return note


def test_a_group_states_its_bars_hidden_by_the_markers() -> None:
    assert _note(np.full(5, 1e-4)) == (
        "bars: $\\pm$1 s.e., at most 0.01 % of the value; all smaller than the markers"
    )
    assert _note(np.full(5, 1e-4), kind="band", log=True).endswith("all narrower than the markers")


def test_a_group_counts_its_bars_larger_than_the_markers() -> None:
    assert _note(np.full(5, 0.5)) == "bars: $\\pm$1 s.e., at most 50 % of the value"
    mixed = np.array([1e-4, 1e-4, 0.5, 0.5, 0.5])
    assert _note(mixed).endswith("; 2 of 5 smaller than the markers")
    # on a log axis a bar reaching below zero is never hidden
    assert "of 5" in _note(np.array([1e-4, 1e-4, 1e-4, 1e-4, 3.0]), log=True)
