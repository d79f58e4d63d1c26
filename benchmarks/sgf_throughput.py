"""Throughput of the SGF integrator (paper 000 Eq. 13) vs the numba SGD kernel (one BLAS thread).

Usage: python benchmarks/sgf_throughput.py [--N 100] [--P 200] [--R 64] [--steps 2000]

Prints replica-steps per second of ``run_sgf`` with additive and multiplicative noise and of
``run_sgd`` on the same problem (thin = 10). The SGF cost per replica-step is dominated by the N
(additive) or P (multiplicative) standard normals and one (N x N) resp. two (P x N) products.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from weightdyn.single_layer import sgf, theory
from weightdyn.single_layer.simulate import run_sgd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=100)
    ap.add_argument("--P", type=int, default=200)
    ap.add_argument("--S", type=int, default=10)
    ap.add_argument("--R", type=int, default=64)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.P, args.N)) / np.sqrt(args.N)
    y = X @ rng.standard_normal(args.N) + 0.5 * rng.standard_normal(args.P)
    w_star = theory.min_norm_solution(X, y)
    W = np.tile(w_star, (args.R, 1))
    steps = args.steps // 40 * 40
    with threadpool_limits(1):
        run_sgd(X, y, w_star, args.lr, args.S, "with", W, 0, 40, 10, 4, rng)  # numba warm-up
        runs = {
            "SGD (numba kernel)": lambda: run_sgd(
                X, y, w_star, args.lr, args.S, "with", W, 0, steps, 10, 4, rng
            ),
            **{
                f"SGF {noise}": (
                    lambda noise=noise: sgf.run_sgf(
                        X, y, w_star, args.lr, args.S, "with", W, 0, steps, 10, 4, rng, noise=noise
                    )
                )
                for noise in sgf.NOISE_MODES
            },
        }
        for name, run in runs.items():
            t0 = time.perf_counter()
            run()
            elapsed = time.perf_counter() - t0
            print(f"{name:>20}: {steps * args.R / elapsed:.3g} replica-steps/s")


if __name__ == "__main__":
    main()
