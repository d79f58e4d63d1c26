"""The SGD engine's driver (:mod:`weightdyn.sgd`) with toy kernels written against its interface.

A kernel that a JAX engine, a preconditioned SGD or a noise-injected SGD would add is written the
same way as these toys: what the tests pin is the contract of the package docstring (plan and
calls, streams keyed by the global step, sums per (replica, block), divergence policies, hook).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from weightdyn.counter_rng import normals
from weightdyn.sgd import (
    RECORD_GROUP,
    Plan,
    Record,
    Settings,
    State,
    VectorKernel,
    divergence_bound,
    run,
)


@dataclass(frozen=True)
class OrnsteinUhlenbeck(VectorKernel):
    """``w <- a w + s xi`` per replica, ``xi`` the normals of step ``t`` of the replica's
    stream; a readable NumPy kernel of the engine's interface. ``blow_up``: replica 0 jumps to
    1e300 at global step ``blow_up`` (a divergence)."""

    ref: np.ndarray
    a: float = 0.9
    s: float = 0.3
    blow_up: int | None = None
    lower_triangle: bool = False

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        xi = normals(state.keys, step0, n_steps, state.W.shape[1])
        for t in range(n_steps):
            live = ~state.diverged
            state.W[live] = self.a * state.W[live] + self.s * xi[t, live]
            if self.blow_up is not None and step0 + t == self.blow_up:
                state.W[0] = 1e300
            if (t + 1) % record.thin == 0:
                state.diverged |= ~np.all(np.abs(state.W) <= record.bound, axis=1)
                live = ~state.diverged
                if record.block is not None:
                    d = state.W[live] - self.ref
                    record.sum_dw[live, record.block] += d
                    record.sum_dwdw[live, record.block] += np.einsum("ri,rj->rij", d, d)
                    record.n_records[live, record.block] += 1
                    k = (t + 1) // record.thin - 1
                    if k < len(record.rec):
                        record.rec[k] = state.W


def _run(
    kernel: VectorKernel, plan: Plan, per_replica: bool = False, seed: int = 4, hook=None
) -> tuple:
    W = np.zeros((3, 2))
    state = State.start(W, np.random.default_rng(seed))
    settings = Settings(plan, divergence_bound(kernel.ref), "TOY", None, hook, per_replica)
    return run(kernel, state, settings), state


def _records(plan: Plan, seed: int = 4) -> np.ndarray:
    """Every state (T, R, n) of the toy chain after each step, by one loop without the engine."""
    state = State.start(np.zeros((3, 2)), np.random.default_rng(seed))
    xi = normals(state.keys, 0, plan.total_steps, 2)
    W, out = state.W.copy(), []
    for t in range(plan.total_steps):
        W = 0.9 * W + 0.3 * xi[t]
        out.append(W.copy())
    return np.array(out)


def test_plan_calls_cover_burnin_and_blocks_in_whole_record_groups() -> None:
    plan = Plan.build(100, 1280, 2, 4, chunk_steps=130)
    assert plan.chunk == 2 * RECORD_GROUP * 2  # 130 rounded down to whole groups of 64 steps
    calls = list(plan.calls())
    assert sum(n for n, b in calls if b is None) == 100
    for b in range(4):
        assert sum(n for n, blk in calls if blk == b) == 320
    order = [-1 if b is None else b for _, b in calls]
    assert order == sorted(order)
    with pytest.raises(ValueError, match="multiple of n_blocks\\*thin"):
        Plan.build(0, 1000, 3, 4, 64)


def test_sums_are_the_records_moments_per_replica_and_block() -> None:
    plan = Plan.build(10, 96, 3, 4, chunk_steps=96)
    ref = np.array([0.1, -0.2])
    moments, state = _run(OrnsteinUhlenbeck(ref), plan)
    W = _records(plan)
    rec = W[plan.burnin_steps + plan.thin - 1 :: plan.thin] - ref  # (T, R, n)
    blocks = rec.reshape(plan.n_blocks, -1, *rec.shape[1:])  # (B, T_b, R, n)
    np.testing.assert_allclose(moments.sum_dw, blocks.sum(axis=1).transpose(1, 0, 2), rtol=1e-12)
    second = np.einsum("btri,btrj->rbij", blocks, blocks)
    np.testing.assert_allclose(moments.sum_dwdw, second, rtol=1e-12)
    assert (moments.n_records == blocks.shape[1]).all()
    np.testing.assert_array_equal(state.W, W[-1])
    assert moments.steps_done == plan.total_steps


@pytest.mark.parametrize("chunk", [RECORD_GROUP, 3 * RECORD_GROUP, 10**6])
def test_no_result_bit_depends_on_the_chunking(chunk: int) -> None:
    ref = np.zeros(2)
    base, _ = _run(OrnsteinUhlenbeck(ref), Plan.build(64, 1024, 1, 2, 1024))
    other, _ = _run(OrnsteinUhlenbeck(ref), Plan.build(64, 1024, 1, 2, chunk))
    for name in base.sums:
        np.testing.assert_array_equal(base.sums[name], other.sums[name])


def test_divergence_stops_the_run_or_only_the_replica() -> None:
    ref, plan = np.zeros(2), Plan.build(0, 640, 1, 2, RECORD_GROUP)
    stop_all, state = _run(OrnsteinUhlenbeck(ref, blow_up=100), plan)
    assert state.diverged[0] and not state.diverged[1:].any()
    assert np.isnan(stop_all.sum_dw).all() and stop_all.steps_done < plan.total_steps
    alone, state = _run(OrnsteinUhlenbeck(ref, blow_up=100), plan, per_replica=True)
    assert np.isnan(alone.sum_dw[0]).all() and np.isfinite(alone.sum_dw[1:]).all()
    assert alone.steps_done == plan.total_steps


class _Mean:
    names = ("mean",)

    def __call__(self, records: np.ndarray) -> np.ndarray:
        return records.mean(axis=2, keepdims=True)


def test_hook_reads_the_records_and_changes_no_sum() -> None:
    ref, plan = np.array([0.5, 0.0]), Plan.build(0, 256, 2, 2, 128)
    plain, _ = _run(OrnsteinUhlenbeck(ref), plan)
    hooked, _ = _run(OrnsteinUhlenbeck(ref), plan, hook=_Mean())
    np.testing.assert_array_equal(plain.sum_dwdw, hooked.sum_dwdw)
    series = hooked.recorder.series
    rec = _records(plan)[plan.thin - 1 :: plan.thin] - ref
    np.testing.assert_allclose(series[:, :, 0], rec.mean(axis=2), rtol=1e-12)


@dataclass(frozen=True)
class TwoArrays:
    """A two-array state (``W`` and ``extra[0]``) with its own named sums and hook arguments."""

    ref: np.ndarray
    lower_triangle: bool = False

    def moment_shapes(self, state: State) -> dict[str, tuple[int, ...]]:
        return {"a": (state.W[0].size,), "b": (state.extra[0][0].size,)}

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        A, B = state.W, state.extra[0]
        for t in range(n_steps):
            A += 1.0
            B -= 2.0
            if record.block is not None and (t + 1) % record.thin == 0:
                record.sums["a"][:, record.block] += A.reshape(len(A), -1)
                record.sums["b"][:, record.block] += B.reshape(len(B), -1)
                record.n_records[:, record.block] += 1
        record.observed = (A.copy(), B.copy())


def test_a_kernel_names_its_own_sums_and_hook_arguments() -> None:
    A, B = np.zeros((2, 2, 3)), np.zeros((2, 4))
    state = State.start(A, np.random.default_rng(0), extra=(B,))
    seen = []

    class Hook:
        names = ("x",)

        def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
            seen.append((a.shape, b.shape))
            return np.zeros((1, 2, 1))

    plan = Plan.build(0, 64, 32, 2, 32)
    moments = run(TwoArrays(np.zeros(10)), state, Settings(plan, 1e9, "TWO", None, Hook()))
    assert set(moments.sums) == {"a", "b"}
    assert moments.sums["a"].shape == (2, 2, 6) and moments.sums["b"].shape == (2, 2, 4)
    np.testing.assert_array_equal(moments.sums["a"][:, 1], 64.0)  # the state after step 64
    np.testing.assert_array_equal(moments.sums["b"][:, 0], -64.0)
    assert seen == [((2, 2, 3), (2, 4))] * 2


def test_a_non_finite_extra_array_flags_its_replica_at_the_start() -> None:
    B = np.zeros((2, 4))
    B[1, 0] = np.nan
    state = State.start(np.zeros((2, 3)), np.random.default_rng(0), extra=(B,))
    run(TwoArrays(np.zeros(7)), state, Settings(Plan.build(0, 32, 1, 1, 32), 1e9, "TWO"))
    assert state.diverged.tolist() == [False, True]
