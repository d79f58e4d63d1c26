"""Throughput of the numba SGD kernel vs the plain numpy reference loop (one core).

Usage: python benchmarks/sgd_throughput.py [--steps 4000] [--ref-steps 3000]

Problem size as in paper 000, Fig. 4: N = 100, P = 200, S = 10; R = 64 replicas.
Prints replica-steps per second of
  * the bare kernel ``sgd_kernel`` (after a warm-up call that compiles / loads the cache),
  * ``run_sgd`` end to end (uniform generation + kernel + moment accumulation, thin = 10),
  * ``sgd_reference_chain`` (a single chain, plain numpy per step),
and the kernel / reference ratio. Target: >= 1e6 replica-steps/s and >= 10x the plain loop.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from weightdyn.single_layer.simulate import (
    batch_indices_from_uniforms,
    run_sgd,
    sgd_kernel,
    sgd_reference_chain,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=100)
    ap.add_argument("--P", type=int, default=200)
    ap.add_argument("--S", type=int, default=10)
    ap.add_argument("--R", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4000, help="kernel steps per timing")
    ap.add_argument("--ref-steps", type=int, default=3000, help="steps of the plain loop")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()

    numba.set_num_threads(1)
    N, P, S, R = args.N, args.P, args.S, args.R
    rng = np.random.default_rng(0)
    X = rng.standard_normal((P, N)) / np.sqrt(N)
    y = X @ rng.standard_normal(N) + 0.5 * rng.standard_normal(P)
    w_star = np.linalg.lstsq(X, y, rcond=None)[0]
    perm = np.tile(np.arange(P, dtype=np.int64), (R, 1))
    empty = np.empty((0, R, N))

    print(f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}")
    print(f"cpu: {platform.processor() or platform.machine()}, os.cpu_count()={os.cpu_count()}")
    print(f"N={N} P={P} S={S} R={R} lr={args.lr}")

    with threadpool_limits(limits=1):
        # warm-up (compile or load from cache)
        W = np.tile(w_star, (R, 1))
        t0 = time.perf_counter()
        sgd_kernel(X, y, W, args.lr, rng.random((2, R, S)), True, perm, 3, empty, 1e12)
        print(f"warm-up (compile/cache load): {time.perf_counter() - t0:.2f} s")

        for sampling in ("with", "without"):
            u = rng.random((args.steps, R, S))
            times = []
            for _ in range(args.repeats):
                W = np.tile(w_star, (R, 1))
                t0 = time.perf_counter()
                sgd_kernel(
                    X, y, W, args.lr, u, sampling == "with", perm, args.steps + 1, empty, 1e12
                )
                times.append(time.perf_counter() - t0)
            rate = args.steps * R / min(times)
            print(
                f"kernel [{sampling:7s}] best {min(times) * 1e3:8.1f} ms / {args.steps} steps "
                f"-> {rate:.3e} replica-steps/s (median {args.steps * R / np.median(times):.3e})"
            )
            if sampling == "with":
                kernel_rate = rate

        # end to end, including uniform generation and moment accumulation
        res = run_sgd(
            X,
            y,
            w_star,
            lr=args.lr,
            batch_size=S,
            sampling="with",
            w_init=np.tile(w_star, (R, 1)),
            burnin_steps=1000,
            sample_steps=10 * 32 * 80,
            thin=10,
            n_blocks=2,
            rng=np.random.default_rng(1),
        )
        e2e = (res.burnin_steps + res.sample_steps) * R / res.elapsed_s
        print(f"run_sgd end-to-end (thin=10): {e2e:.3e} replica-steps/s")

        # plain reference loop, one chain
        u1 = rng.random((args.ref_steps, 1, S))
        idx, _ = batch_indices_from_uniforms(u1, P, "with")
        t0 = time.perf_counter()
        sgd_reference_chain(X, y, w_star, args.lr, idx[:, 0])
        dt = time.perf_counter() - t0
        ref_rate = args.ref_steps / dt
        print(
            f"sgd_reference_chain: {dt * 1e3:.1f} ms / {args.ref_steps} steps "
            f"-> {ref_rate:.3e} replica-steps/s"
        )

    print(f"ratio kernel / reference: {kernel_rate / ref_rate:.1f}x")
    ok = kernel_rate >= 1e6 and kernel_rate / ref_rate >= 10
    print("targets (>= 1e6 replica-steps/s, >= 10x):", "MET" if ok else "NOT MET")


if __name__ == "__main__":
    main()
