"""Issue 36 items 1-2: sampling lengths planned from the relaxation time and a precision target
(``sample_rse``, ``length_capped``), and the jackknife by replica where time blocks are short."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from weightdyn import stats, sweep
from weightdyn.data import teacher_student
from weightdyn.single_layer import theory
from weightdyn.single_layer.datasets import error_groups, sgd_dataset
from weightdyn.single_layer.protocol import (
    SGDProtocol,
    cell_rse_steps,
    length_dataset,
    run_stationary_sgd,
    trace_rse_steps,
)


def test_blocks_too_short_and_pooled_sums() -> None:
    assert stats.blocks_too_short(99.0, 10.0) and not stats.blocks_too_short(100.0, 10.0)
    assert not stats.blocks_too_short(1.0, np.inf)
    labels = np.repeat(np.arange(3), 4)
    a = np.arange(24.0).reshape(12, 2)
    (pooled,) = stats.sums_by_label(labels, a)
    assert pooled.shape == (3, 2) and np.array_equal(pooled.sum(axis=0), a.sum(axis=0))
    assert np.array_equal(pooled[1], a[4:8].sum(axis=0))


def test_trace_rse_steps_of_one_mode_is_the_ar1_formula() -> None:
    """One mode: Var(mean of dw^2 over T steps) = 2 m^2 (1 + rho^2) / ((1 - rho^2) T R)."""
    H, M, lr, R, rse = np.array([[2.0]]), np.array([[0.3]]), 0.1, 8, 0.05
    rho2 = (1 - lr * 2.0) ** 2
    expected = 2 * (1 + rho2) / (1 - rho2) / (R * rse**2)
    assert trace_rse_steps(H, M, lr, R, rse) == pytest.approx(expected)
    assert trace_rse_steps(H, M, lr, R, 0.0) == 0.0
    assert trace_rse_steps(H, M, 1.0, R, rse) == 0.0  # rho = -1: GD diverges
    # the target scales as 1/rse^2 and 1/R
    assert trace_rse_steps(H, M, lr, 2 * R, rse / 2) == pytest.approx(2 * expected)


@pytest.mark.parametrize(("N", "P", "lr", "S"), [(10, 20, 0.1, 5), (20, 22, 0.1, 10)])
def test_planned_length_meets_the_rse_target(N: int, P: int, lr: float, S: int) -> None:
    """Run for the planned length: the measured relative s.e. of tr M (jackknife, pooled by
    replica: these blocks are short) is the target within the plan's approximations (modes
    independent and Gaussian) and the s.e.'s own sampling error (32 replicas: 12 % per seed,
    6 % over four seeds)."""
    data = teacher_student(N, P, 0.25, np.random.default_rng(1))
    tau = theory.slowest_relaxation_steps(theory.hessian(data.X), lr)
    proto = SGDProtocol(replicas=32, sample_steps=40, sample_rse=0.02, burnin_tau=5,
                        sample_max_steps=10**8)  # fmt: skip
    planned = cell_rse_steps(data, lr, S, "with", proto)
    assert planned > proto.sample_steps and proto.sampling_length(tau, planned) >= planned - 40
    rse = []
    for seed in range(4):
        w_star, result = run_stationary_sgd(data, lr, S, "with", proto, np.random.default_rng(seed))
        ds = sgd_dataset(data, w_star, result, tau_int=tau / 2)
        assert int(ds["errors_by_replica"]) == 1
        rse.append(float(ds["var_w_sgd_wstar_se"] / ds["var_w_sgd_wstar"]))
    assert 0.8 < np.mean(rse) / 0.02 < 1.25, rse


def test_error_groups_pool_a_replicas_blocks_only_when_they_are_short() -> None:
    data = teacher_student(6, 12, 0.25, np.random.default_rng(0))
    proto = SGDProtocol(replicas=4, sample_steps=800, n_blocks=4, thin=10, burnin_min_steps=100)
    _, result = run_stationary_sgd(data, 0.1, 3, "with", proto, np.random.default_rng(0))
    long_blocks = error_groups(result, tau_int=19.9)  # 200-step blocks >= 10 tau_int
    assert long_blocks[0].shape[0] == 16
    pooled = error_groups(result, tau_int=20.1)
    assert pooled[0].shape[0] == 4
    full_sums = (result.sum_dw, result.sum_dwdw, result.n_records)
    for grouped, full in zip(pooled, full_sums, strict=True):
        assert np.allclose(grouped.sum(axis=0), full.sum(axis=0))


def test_a_cell_whose_cap_binds_is_flagged_and_logged() -> None:
    data = teacher_student(20, 22, 0.25, np.random.default_rng(1))  # tau ~ 4e4 steps
    lines: list[str] = []
    capped = SGDProtocol(sample_tau=20, sample_max_steps=100_000)
    ds = length_dataset(data, 0.1, 10, "with", capped, lines.append)
    assert int(ds["length_capped"]) == 1 and float(ds["sample_steps_required"]) > 100_000
    assert any(line.startswith("WARNING: length_capped") for line in lines)
    free = SGDProtocol(sample_tau=20, sample_max_steps=10**8)
    assert int(length_dataset(data, 0.1, 10, "with", free, lines.append)["length_capped"]) == 0


def test_sample_rse_unset_keeps_the_cell_ids() -> None:
    """A new setting left unset (None) stays out of the settings hash (sweep.cell_id): the
    id below is the one this cell had before sample_rse existed."""
    block = {"experiment": "single_layer", "N": 20, "P": 40, "lr": 0.1}
    (cell,) = sweep.expand_sweep("s", block).cells
    assert cell.id.endswith("__9668b998")
    (with_rse,) = sweep.expand_sweep("s", {**block, "sample_rse": 0.01}).cells
    assert with_rse.id != cell.id
    with pytest.raises(sweep.ConfigError, match="sample_rse"):
        sweep.expand_sweep("s", {**block, "sample_rse": 0.0})


def test_error_bar_text_says_how_the_cells_were_grouped() -> None:
    from weightdyn.plots.errorbars import JACKKNIFE, se_text

    def text(flags: list[float]) -> str:
        return se_text(xr.Dataset({"errors_by_replica": ("cell", np.array(flags))}))

    assert JACKKNIFE in text([0.0, 0.0]) and JACKKNIFE in se_text(xr.Dataset())
    assert "(jackknife over replicas)" in text([1.0, 1.0])
    assert "replicas or replica time blocks" in text([0.0, 1.0])
