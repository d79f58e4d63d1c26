"""plots.common.ErrorBars: the error-bar statement of a figure is measured on the drawn figure."""

import matplotlib.pyplot as plt
import numpy as np

from weightdyn.plots.common import ErrorBars


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


def test_bars_within_the_markers_are_said_to_be_hidden() -> None:
    assert _note(np.full(5, 1e-4)) == (
        "bars: $\\pm$1 s.e., at most 0.01 % of the value: smaller than the markers"
    )
    assert _note(np.full(5, 1e-4), kind="band", log=True).endswith("narrower than the markers")


def test_bars_larger_than_the_markers_are_counted() -> None:
    assert _note(np.full(5, 0.5)) == "bars: $\\pm$1 s.e., at most 50 % of the value"
    mixed = np.array([1e-4, 1e-4, 0.5, 0.5, 0.5])
    assert _note(mixed).endswith(": smaller than the markers at 2 of 5 points")
    # on a log axis a bar reaching below zero is never hidden
    assert "of 5" in _note(np.array([1e-4, 1e-4, 1e-4, 1e-4, 3.0]), log=True)
