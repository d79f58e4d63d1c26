"""Cost of the exact discrete-time covariance vs the SGD run of the same cell (one core).

Usage: python benchmarks/discrete_covariance_cost.py [--lr 1.0] [--sample-steps 900000]

Cell: N = 100, P = 200, S = 10, sigma_eps^2 = 0.25, sampling with replacement, data seed 0.
Times, in the same process:
  * ``discrete_stationary_covariance`` (preconditioned CG, O(P N^2) per step),
  * ``second_moment_stability`` and ``max_stable_lr_second_moment`` (Lanczos),
  * ``stationary_covariance`` (Eq. 30 of paper 000, for reference),
  * ``run_stationary_sgd`` with the default SGDProtocol (R = 64 replicas; its burn-in and
    ``--sample-steps`` sampling steps), after a short warm-up that loads the numba kernel,
and prints the times, the CG iterations and residual, and tr M_SGD / tr M_exact.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from weightdyn.data import teacher_student
from weightdyn.single_layer import theory
from weightdyn.single_layer.datasets import sgd_dataset
from weightdyn.single_layer.protocol import SGDProtocol, run_stationary_sgd


def timed(func, *args, repeats: int = 3):
    """Best wall time of ``repeats`` calls and the last result."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = func(*args)
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=100)
    ap.add_argument("--P", type=int, default=200)
    ap.add_argument("--S", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1.0)
    ap.add_argument("--sample-steps", type=int, default=SGDProtocol.sample_steps)
    args = ap.parse_args()

    numba.set_num_threads(1)
    N, P, S, lr = args.N, args.P, args.S, args.lr
    data = teacher_student(N, P, 0.25, np.random.default_rng(0))
    print(f"N={N} P={P} S={S} lr={lr} sigma_eps2=0.25 sampling=with")
    with threadpool_limits(limits=1):
        t_exact, sol = timed(theory.discrete_stationary_covariance, data.X, data.y, lr, S)
        t_radius, radius = timed(theory.second_moment_stability, data.X, lr, S)
        t_lrmax, lr_max = timed(theory.max_stable_lr_second_moment, data.X, S)
        H, C = theory.hessian(data.X), theory.noise_covariance(data.X, data.y, S)
        t_eq30, M30 = timed(theory.stationary_covariance, H, C, lr)

        protocol = dataclasses.replace(SGDProtocol(), sample_steps=args.sample_steps)
        warm = dataclasses.replace(protocol, burnin_min_steps=0, burnin_max_steps=0)
        warm = dataclasses.replace(warm, sample_steps=warm.thin * warm.n_blocks)
        run_stationary_sgd(data, lr, S, "with", warm, np.random.default_rng(1))
        t0 = time.perf_counter()
        w_star, res = run_stationary_sgd(data, lr, S, "with", protocol, np.random.default_rng(2))
        t_sgd = time.perf_counter() - t0
    tr_sgd = N * float(sgd_dataset(data, w_star, res)["var_w_sgd_wstar"])

    print(
        f"exact solve      {t_exact * 1e3:9.1f} ms  ({sol.iterations} CG steps, "
        f"relative residual {sol.residual:.1e})"
    )
    print(f"spectral radius  {t_radius * 1e3:9.1f} ms  (radius {radius:.6f})")
    print(f"lr_max           {t_lrmax * 1e3:9.1f} ms  (lr_max {lr_max:.4f})")
    print(f"Eq. 30           {t_eq30 * 1e3:9.1f} ms")
    print(
        f"SGD run          {t_sgd:9.1f} s   ({res.replicas} replicas, {res.burnin_steps} burn-in "
        f"+ {res.sample_steps} sampling steps)"
    )
    print(
        f"SGD / exact solve: {t_sgd / t_exact:.0f}x;  SGD / (solve + radius + lr_max): "
        f"{t_sgd / (t_exact + t_radius + t_lrmax):.0f}x"
    )
    print(
        f"tr M_SGD / tr M_exact = {tr_sgd / np.trace(sol.M):.5f}, "
        f"tr M_SGD / tr M_Eq30 = {tr_sgd / np.trace(M30):.5f}"
    )


if __name__ == "__main__":
    main()
