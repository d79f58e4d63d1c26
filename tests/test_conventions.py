"""Sweep conventions: canonical numbers, parameter-derived seeds, atomic writes (cell expansion:
test_sweep.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from weightdyn import io, seeds
from weightdyn.data import teacher_student
from weightdyn.single_layer.protocol import SGDProtocol, run_stationary_sgd


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ((0.1, 0.10, 1e-1), "0.1"),
        ((2, 2.0, np.int64(2)), "2"),
        ((1e-4,), "0.0001"),
        ((0.25, np.float32(0.25)), "0.25"),
    ],
)
def test_format_number_is_canonical(values, text) -> None:
    assert {io.format_number(v) for v in values} == {text}


def test_format_number_rejects_non_numbers() -> None:
    with pytest.raises(TypeError):
        io.format_number("0.1")
    with pytest.raises(ValueError):
        io.format_number(float("nan"))


def test_seeds_depend_on_values_not_on_order_or_spelling() -> None:
    a = seeds.generator("s", {"N": 100, "lr": 0.1}).random(4)
    b = seeds.generator("s", {"lr": 0.10, "N": 100.0}).random(4)
    c = seeds.generator("s", {"N": 100, "lr": 0.2}).random(4)
    d = seeds.generator("t", {"N": 100, "lr": 0.1}).random(4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, d)


def test_write_atomic_leaves_no_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "out.nc"
    bad = xr.Dataset({"v": ("x", np.array([object()], dtype=object))})
    with pytest.raises(Exception):  # noqa: B017 - whichever error netCDF raises
        io.write_atomic(bad, target)
    assert list(tmp_path.iterdir()) == []
    io.write_atomic(xr.Dataset({"v": ("x", np.arange(3.0))}), target)
    assert [p.name for p in tmp_path.iterdir()] == ["out.nc"]


def test_protocol_burnin_and_sampling_lengths() -> None:
    p = SGDProtocol(
        burnin_tau=2.0,
        burnin_min_steps=100,
        burnin_max_steps=10_000,
        sample_steps=1000,
        sample_tau=3.0,
        sample_max_steps=50_000,
        thin=10,
        n_blocks=4,
    )
    assert p.burnin(10.0) == 100
    assert p.burnin(1234.5) == 2469
    assert p.burnin(1e9) == 10_000
    assert p.sampling_length(10.0) == 1000
    assert p.sampling_length(2000.0) == 6000
    assert p.sampling_length(1e9) == 50_000
    with pytest.raises(ValueError, match="init"):
        SGDProtocol(init="zeros")


def test_random_initialisation_relaxes_to_w_star() -> None:
    """From i.i.d. N(0, 1) weights, burn-in of many tau brings SGD to the stationary state."""
    cell = {"N": 5, "P": 40}
    data = teacher_student(5, 40, 0.25, seeds.generator("d", cell))
    protocol = SGDProtocol(
        replicas=8, init="random", burnin_tau=10.0, sample_steps=4000, thin=5, n_blocks=2
    )
    w_star, result = run_stationary_sgd(data, 0.1, 5, "with", protocol, seeds.generator("s", cell))
    mean_dw = result.sum_dw.sum(0) / result.n_records.sum()
    # stationary fluctuations are O(sqrt(lr sigma_eps^2 / 2S)) = 0.05; the start was O(1) away
    assert np.max(np.abs(mean_dw)) < 0.05
    assert np.max(np.abs(result.final_W - w_star)) < 0.5
