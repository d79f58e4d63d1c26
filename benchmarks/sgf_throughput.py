"""Throughput of the single-layer SGF (paper 000 Eq. 13): old numpy path vs the numba kernel.

Usage: python benchmarks/sgf_throughput.py [--sizes 50x100 100x200] [--R 32] [--threads 1]
       [--budget 1.0]

For each size ``N x P`` (lr = 0.1, S = 10, thin = 10, dt = lr) and each noise model, additive
(``C(w*)``, Eq. 17) and multiplicative (``C(w)``, Eq. 14/15), prints replica-steps per second of

* ``numpy``: the former numpy integrator, kept here only for this comparison
  (:func:`numpy_sgf`: float32 ziggurat normals from the run's Generator in blocks, one batched
  matrix product per step over the R replicas, moments accumulated in numpy per chunk);
* ``kernel``: :func:`weightdyn.single_layer.sgf.run_sgf` end to end (normals from
  ``counter_rng`` inside :func:`~weightdyn.single_layer.sgf.sgf_kernel`, fused moments,
  ``--threads`` numba threads);
* ``f32``: the same with ``precision="float32"``
  (:func:`~weightdyn.single_layer.sgf.sgf_kernel_f32`: the deviation from w* in single
  precision, float64 moments), and its ratio to ``kernel``;
* ``normals``: drawing the kernel's normals alone (``counter_rng.normals``, one thread), the
  part of a kernel step that is not arithmetic;

and for reference ``run_sgd`` (numba SGD kernel) on the same problem, all measured in this run
with one BLAS thread. The additive step costs N k multiply-adds (k = rank of C, here N) and k
normals, the multiplicative one 2 P N multiply-adds and P normals.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from weightdyn.counter_rng import normals, replica_keys
from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer import sgf, theory
from weightdyn.single_layer.simulate import run_sgd

_BLOCK_NORMALS, _BLOCK_STEPS = 1 << 20, 256  # the former _NormalStream's block bounds


class _NormalStream:
    """The former normals: float32 ziggurat from ``rng`` in fixed blocks, as float64."""

    def __init__(self, rng: np.random.Generator, R: int, k: int):
        self.rng, self.shape = rng, (R, k)
        self.block = int(max(1, min(_BLOCK_STEPS, _BLOCK_NORMALS // max(1, R * k))))
        self.buf, self.pos = np.empty((0, R, k)), 0

    def take(self, n: int) -> np.ndarray:
        parts = []
        while n > 0:
            if self.pos == self.buf.shape[0]:
                draw = self.rng.standard_normal((self.block, *self.shape), dtype=np.float32)
                self.buf, self.pos = draw.astype(np.float64), 0
            m = min(n, self.buf.shape[0] - self.pos)
            parts.append(self.buf[self.pos : self.pos + m])
            self.pos += m
            n -= m
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


def _additive_advance(X, y, lr, S, dt, W, w_ref):
    """The former additive state (eigenbasis of H) and its ``advance(zeta)``."""
    m = sgf._Additive.build(X, y, S, "with")
    noise_T, decay = np.sqrt(lr * dt) * m.B.T, 1.0 - dt * m.omega
    z, shift = (W - m.w_star) @ m.V, (m.w_star - w_ref) @ m.V

    def advance(zeta):
        for t in range(zeta.shape[0]):
            z[...] *= decay
            z[...] += zeta[t] @ noise_T
        return z + shift

    return advance, m.B.shape[1]


def _multiplicative_advance(X, y, lr, S, dt, W, w_ref):
    """The former multiplicative state (weights) and its ``advance(zeta)``."""
    P = X.shape[0]
    drift, amp = dt / P, np.sqrt(lr * dt * theory.noise_prefactor(P, S, "with") / P)
    W = W.copy()

    def advance(zeta):
        for t in range(zeta.shape[0]):
            z = zeta[t] - zeta[t].mean(axis=1, keepdims=True)
            r = W @ X.T - y
            W[...] -= (r * (drift - amp * z)) @ X
        return W - w_ref

    return advance, P


def numpy_sgf(X, y, w_ref, lr, S, W0, steps, thin, rng, noise, chunk=4096):
    """The former run_sgf's sampling loop (one block): ``(sum_dw, sum_dwdw)`` per replica."""
    make = _additive_advance if noise == "additive" else _multiplicative_advance
    advance, k = make(X, y, lr, S, lr, W0, w_ref)
    stream = _NormalStream(rng, W0.shape[0], k)
    R, N = W0.shape
    s1, s2 = np.zeros((R, N)), np.zeros((R, N, N))
    chunk = max(1, chunk // thin) * thin
    for pos in range(0, steps, chunk):
        n_rec = min(chunk, steps - pos) // thin
        rec = np.empty((R, n_rec, N))
        for j in range(n_rec):
            rec[:, j] = advance(stream.take(thin))
        s1 += rec.sum(axis=1)
        s2 += np.matmul(rec.transpose(0, 2, 1), rec)
    return s1, s2


def _problem(N: int, P: int):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((P, N)) / np.sqrt(N)
    y = X @ rng.standard_normal(N) + 0.5 * rng.standard_normal(P)
    return X, y, theory.min_norm_solution(X, y)


def _rate(steps: int, R: int, run, *args, repeats: int = 3, **kw) -> float:
    """Replica-steps per second of ``run(*args, **kw)`` (best of ``repeats``)."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(*args, **kw)
        best = min(best, time.perf_counter() - t0)
    return steps * R / best


def measure(N: int, P: int, R: int, budget: float) -> None:
    """One line per noise model (numpy, kernel, their ratio, normals alone) and one for SGD."""
    X, y, w_star = _problem(N, P)
    W = np.tile(w_star, (R, 1))
    lr, S, thin = 0.1, 10, 10
    rng = np.random.default_rng
    for noise in sgf.NOISE_MODES:
        k = N if noise == "additive" else P
        flops = 2 * P * N if noise == "multiplicative" else N * N
        # about budget / 3 seconds per timing at 1e9 multiply-adds/s
        steps = max(320, int(budget / 3 * 1e9 / (R * flops)) // 320 * 320)
        old = _rate(steps, R, numpy_sgf, X, y, w_star, lr, S, W, steps, thin, rng(1), noise)
        run = (sgf.run_sgf, X, y, w_star, W, Update(lr, S, "with"), Schedule(0, steps, thin, 1))
        new = _rate(steps, R, *run, rng(1), noise=noise)
        f32 = _rate(steps, R, *run, rng(1), noise=noise, precision="float32")
        n_rng = max(1, (1 << 22) // (R * k))  # 32 MB of normals
        normal_rate = _rate(n_rng, R, normals, replica_keys(rng(2), R), 0, n_rng, k)
        print(f"{N:>4} {P:>4} {R:>4} {noise:>14} | {old:9.3e} {new:9.3e} {new / old:6.2f}x | "
              f"{f32:9.3e} {f32 / new:6.2f}x | {normal_rate:9.3e}", flush=True)  # fmt: skip
    run = (run_sgd, X, y, w_star, W, Update(lr, S, "with"), Schedule(0, 3200, thin, 1), rng(1))
    sgd, sgd32 = _rate(3200, R, *run), _rate(3200, R, *run, precision="float32")
    print(f"{N:>4} {P:>4} {R:>4} {'SGD (S=10)':>14} | {'':>9} {sgd:9.3e} {'':>7} | "
          f"{sgd32:9.3e} {sgd32 / sgd:6.2f}x")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["50x100", "100x200"], help="N x P")
    ap.add_argument("--R", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="numba threads of the kernel")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per size and noise model")
    args = ap.parse_args()
    numba.set_num_threads(args.threads)
    print(f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}")
    print(f"cpu: {platform.processor() or platform.machine()}, os.cpu_count()={os.cpu_count()}, "
          f"numba threads {args.threads}, one BLAS thread")  # fmt: skip
    print(f"{'N':>4} {'P':>4} {'R':>4} {'noise':>14} | {'numpy':>9} {'kernel':>9} {'ratio':>7} | "
          f"{'f32':>9} {'f32/k':>7} | {'normals':>9}   (replica-steps/s)")  # fmt: skip
    with threadpool_limits(limits=1):
        X, y, w_star = _problem(5, 10)  # compile or load the kernels outside the timings
        tiny = (X, y, w_star, np.tile(w_star, (2, 1)), Update(0.1, 2, "with"),
                Schedule(0, 20, 10, 1), np.random.default_rng(0))  # fmt: skip
        for precision in ("float64", "float32"):
            for noise in sgf.NOISE_MODES:
                sgf.run_sgf(*tiny, noise=noise, precision=precision)
            run_sgd(*tiny, precision=precision)
        normals(replica_keys(np.random.default_rng(0), 1), 0, 1, 2)
        for size in args.sizes:
            N, P = (int(v) for v in size.lower().split("x"))
            measure(N, P, args.R, args.budget)


if __name__ == "__main__":
    main()
