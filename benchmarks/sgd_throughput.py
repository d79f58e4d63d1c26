"""Single-layer SGD throughput: kernel, run_sgd end to end, plain loop and the machine's limit.

Usage: python benchmarks/sgd_throughput.py [--N 25 50 100 200 400] [--S 1 10 50] [--R 8 64 512]
       [--threads 1] [--budget 0.3]

For every (N, S, R), with P = 2 N, lr = 0.1 and thin = 10, one timing each of
  * ``kernel``: :func:`sgd_kernel` without moments (the bare update, random numbers included),
  * ``kernel+m``: the kernel accumulating the moments at every 10th step (what run_sgd calls),
  * ``run_sgd``: the driver end to end (burn-in, blocks, progress, result assembly),
  * ``plain``: :func:`sgd_reference_chain`, one chain in numpy, batch indices precomputed,
  * ``step``: the kernel's own update (Eq. 11, the inlined ``_sgd_step``) on one replica with
    its batch indices given, i.e. the kernel without its random numbers and sampling,
  * ``f32``, ``f32+m``: :func:`sgd_kernel_f32` (``precision="float32"``: the deviation from w*
    in single precision, float64 moments) without and with the moments, as ``kernel``,
in replica-steps per second, and bounds measured in the same run on one thread:
  * ``flops``: the compute bound ``DGEMM rate / (4 S N)`` (2 S N multiply-adds for the
    residuals and as many for the update; DGEMM of 2000 x 2000 matrices); ``flops32`` the
    same with SGEMM, the float32 kernel's;
  * ``loads``: the load bound ``gather rate / (8 S N)``: every step must bring its S rows of X
    (8 S N bytes) into the core at least once; the gather rate is measured by summing S rows
    drawn by the same index pattern from the same (P, N) matrix (it lives in L1 or L2, and
    the load ports, not the arithmetic, limit the update); ``loads32`` the same over the
    float32 X (4 S N bytes), the float32 kernel's.
Each timing runs about ``--budget`` seconds. Targets (N = 100, S = 10, R = 64):
run_sgd >= 0.8 x kernel+m, kernel >= 8e6 replica-steps/s per core or the measured bound.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numba
import numpy as np
from numba import njit

from weightdyn.blas import one_blas_thread
from weightdyn.counter_rng import replica_keys, uniforms
from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer.simulate import (
    SGDKernelF32,
    _sgd_step,
    batch_indices_from_uniforms,
    run_sgd,
    sgd_kernel,
    sgd_kernel_f32,
    sgd_reference_chain,
)


def dgemm_flops(n: int = 2000, repeats: int = 3, dtype=np.float64) -> float:
    """Best matrix-multiply rate (flop/s) of this process's BLAS in ``dtype`` (DGEMM, SGEMM)."""
    a, b = np.random.default_rng(0).standard_normal((2, n, n)).astype(dtype)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2.0 * n**3 / best


def _timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def _problem(N: int, P: int):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((P, N)) / np.sqrt(N)
    y = X @ rng.standard_normal(N) + 0.5 * rng.standard_normal(P)
    return X, y, np.linalg.lstsq(X, y, rcond=None)[0]


def kernel_rate(X, y, w_star, S: int, R: int, steps: int, moments: bool,
                single: bool = False) -> float:  # fmt: skip
    """:func:`sgd_kernel` (``single``: :func:`sgd_kernel_f32` on the deviations from w*,
    starting at w*) in replica-steps/s."""
    P, N = X.shape
    kernel, W = sgd_kernel, np.tile(w_star, (R, 1))
    if single:
        f32 = SGDKernelF32.build(X, y, w_star, 0.1, S, True)
        kernel, W, X, y = sgd_kernel_f32, np.zeros((R, N), np.float32), f32.X, f32.y_dev
    perm = np.tile(np.arange(P, dtype=np.int64), (R, 1))
    keys = replica_keys(np.random.default_rng(2), R)
    rows = R if moments else 0
    sums = np.zeros((rows, N)), np.zeros((rows, N, N))
    thin = 10 if moments else steps + 1
    args = (X, y, W, 0.1, S, True, perm, keys)
    tail = (w_star, *sums, np.empty((0, R, N)), 1e12)
    kernel(*args, 0, thin, thin, *tail)  # compile or load from the cache
    return steps * R / _timed(lambda: kernel(*args, thin, steps, thin, *tail))


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _steps_given(X, y, w, c, idx):
    """The kernel's update over the batches ``idx`` (n, S), nothing else."""
    res = np.empty(idx.shape[1])
    for t in range(idx.shape[0]):
        _sgd_step(X, y, w, c, idx[t], res, 0.0)


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _gather_sum(X, idx):
    """Sum of the rows ``X[idx[t, s]]``: every gathered byte loaded once, one add per value
    (in the precision of ``X``)."""
    acc = np.zeros(X.shape[1], X.dtype)
    for t in range(idx.shape[0]):
        for s in range(idx.shape[1]):
            x = X[idx[t, s]]
            for i in range(x.shape[0]):
                acc[i] += x[i]
    return acc


def _given_indices(P: int, S: int, steps: int) -> np.ndarray:
    keys = replica_keys(np.random.default_rng(5), 1)
    idx, _ = batch_indices_from_uniforms(uniforms(keys, 0, steps, S), P, "with")
    return np.ascontiguousarray(idx[:, 0])


def step_rate(X, y, w_star, S: int, steps: int) -> float:
    idx = _given_indices(X.shape[0], S, steps)
    w = w_star.copy()
    _steps_given(X, y, w, 0.1 / S, idx[:2])  # compile or load from the cache
    return steps / _timed(lambda: _steps_given(X, y, w, 0.1 / S, idx))


def load_bound(X, S: int, steps: int) -> float:
    idx = _given_indices(X.shape[0], S, steps)
    _gather_sum(X, idx[:2])
    return steps / min(_timed(lambda: _gather_sum(X, idx)) for _ in range(3))


def run_sgd_rate(X, y, w_star, S: int, R: int, steps: int) -> float:
    sample = max(20, steps // 20 * 20)
    res = run_sgd(X, y, w_star, np.tile(w_star, (R, 1)), Update(0.1, S, "with"),
                  Schedule(0, sample, 10, 2), np.random.default_rng(3))  # fmt: skip
    return sample * R / res.elapsed_s


def plain_rate(X, y, w_star, S: int, steps: int) -> float:
    keys = replica_keys(np.random.default_rng(4), 1)
    idx, _ = batch_indices_from_uniforms(uniforms(keys, 0, steps, S), X.shape[0], "with")
    return steps / _timed(lambda: sgd_reference_chain(X, y, w_star, 0.1, idx[:, 0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, nargs="+", default=[25, 50, 100, 200, 400])
    ap.add_argument("--S", type=int, nargs="+", default=[1, 10, 50])
    ap.add_argument("--R", type=int, nargs="+", default=[8, 64, 512])
    ap.add_argument("--threads", type=int, default=1, help="numba threads (replicas split)")
    ap.add_argument("--budget", type=float, default=0.3, help="seconds per timing")
    args = ap.parse_args()
    numba.set_num_threads(args.threads)
    print(f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}")
    print(f"cpu: {platform.processor() or platform.machine()}, os.cpu_count()={os.cpu_count()}")
    with one_blas_thread():
        flops, flops32 = dgemm_flops(), dgemm_flops(dtype=np.float32)
    print(f"DGEMM (one thread): {flops / 1e9:.1f} GFLOP/s, SGEMM {flops32 / 1e9:.1f} GFLOP/s; "
          f"numba threads {args.threads}")  # fmt: skip
    print(f"{'N':>4} {'S':>3} {'R':>4} | {'kernel':>9} {'kernel+m':>9} {'run_sgd':>9} "
          f"{'plain':>9} {'step':>9} | {'f32':>9} {'f32+m':>9} | {'flops':>9} {'loads':>9} "
          f"{'flops32':>9} {'loads32':>9} | e2e/k+m  k/flops  k/loads  k/plain  f32/k  "
          "f32/fl32  f32/l32")  # fmt: skip
    with one_blas_thread():
        run_sgd_rate(*_problem(5, 10), 2, 2, 100)  # compile outside the timings
        for N in args.N:
            _measure_n(N, args, flops * args.threads, flops32 * args.threads)


def _measure_n(N: int, args: argparse.Namespace, flops: float, flops32: float) -> None:
    """The table's lines of one N (every S and R)."""
    X, y, w_star = _problem(N, 2 * N)
    for S in args.S:
        bound, bound32 = flops / (4.0 * S * N), flops32 / (4.0 * S * N)
        one = max(1000, int(args.budget * 1.5e9 / (S * N)))  # one replica's steps
        step = step_rate(X, y, w_star, S, one)
        loads = load_bound(X, S, one) * args.threads
        loads32 = load_bound(X.astype(np.float32), S, one) * args.threads
        for R in args.R:
            # about budget seconds at 3e9 multiply-adds/s
            steps = max(100, int(args.budget * 1.5e9 / (R * S * N))) // 10 * 10
            k = kernel_rate(X, y, w_star, S, R, steps, moments=False)
            km = kernel_rate(X, y, w_star, S, R, steps, moments=True)
            k32 = kernel_rate(X, y, w_star, S, R, steps, moments=False, single=True)
            km32 = kernel_rate(X, y, w_star, S, R, steps, moments=True, single=True)
            e2e = run_sgd_rate(X, y, w_star, S, R, steps)
            plain = plain_rate(X, y, w_star, S, max(200, steps // 20))
            print(f"{N:>4} {S:>3} {R:>4} | {k:9.3e} {km:9.3e} {e2e:9.3e} {plain:9.3e} "
                  f"{step:9.3e} | {k32:9.3e} {km32:9.3e} | {bound:9.3e} {loads:9.3e} "
                  f"{bound32:9.3e} {loads32:9.3e} | {e2e / km:7.2f} {k / bound:8.2f} "
                  f"{k / loads:8.2f} {k / plain:8.1f} {k32 / k:6.2f} {k32 / bound32:9.2f} "
                  f"{k32 / loads32:8.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
