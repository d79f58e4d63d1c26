"""Throughput of the two-layer numba SGD kernel vs the plain one-chain numpy loop (one core).

Usage: python benchmarks/two_layer_throughput.py [--steps 4000] [--ref-steps 3000]

Problem size as in paper 000, Fig. 7a: N_i = 50, N_h = 40, N_o = 1, P = 200, S = 10; R = 64
replicas. Prints replica-steps per second of
  * the bare kernel ``sgd_kernel`` (after a warm-up call that compiles / loads the cache; its
    counter-based random numbers included),
  * the SGF kernel ``sgf_kernel`` (Eqs. 51-52: all P samples and P normals per step),
  * ``run_sgd_two_layer`` end to end (uniforms + kernel + traces + moments of dW2 only and of
    all weights, thin = 10),
  * ``sgd_reference_chain`` (a single chain, plain numpy per step, same run),
and the kernel / reference ratio. Target: >= 10x the plain loop.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from weightdyn.counter_rng import replica_keys
from weightdyn.sgd import Schedule, Update
from weightdyn.two_layer.data import two_layer_data
from weightdyn.two_layer.simulate import (
    batch_indices_from_uniforms,
    gaussian_init,
    gradient_flow,
    product_kernel,
    run_sgd_two_layer,
    sgd_kernel,
    sgd_reference_chain,
    sgf_kernel,
)


def _kernel_seconds(
    run: Callable[[np.ndarray, np.ndarray], object],
    W1s: np.ndarray,
    W2s: np.ndarray,
    Wp: np.ndarray,
    repeats: int,
) -> list[float]:
    """Wall seconds of ``repeats`` calls ``run(W1, W2)``, each on fresh copies of the replicas'
    weights (``Wp`` reset to their products)."""
    times = []
    for _ in range(repeats):
        A1, A2 = W1s.copy(), W2s.copy()
        product_kernel(A1, A2, Wp)
        t0 = time.perf_counter()
        run(A1, A2)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N_i", type=int, default=50)
    ap.add_argument("--N_h", type=int, default=40)
    ap.add_argument("--N_o", type=int, default=1)
    ap.add_argument("--P", type=int, default=200)
    ap.add_argument("--S", type=int, default=10)
    ap.add_argument("--R", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4000, help="kernel steps per timing")
    ap.add_argument("--ref-steps", type=int, default=3000, help="steps of the plain loop")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()

    numba.set_num_threads(1)
    N_i, N_h, N_o, P, S, R = args.N_i, args.N_h, args.N_o, args.P, args.S, args.R
    rng = np.random.default_rng(0)
    data = two_layer_data(N_i, P, rng, N_o=N_o, sigma_y2=0.1)
    X, Y = data.X, data.Y

    print(f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}")
    print(f"cpu: {platform.processor() or platform.machine()}, os.cpu_count()={os.cpu_count()}")
    print(f"N_i={N_i} N_h={N_h} N_o={N_o} P={P} S={S} R={R} lr={args.lr}")

    with threadpool_limits(limits=1):
        W1_0, W2_0 = gaussian_init(N_i, N_h, N_o, rng, init_scale=1.0)
        gf = gradient_flow(X, Y, W1_0, W2_0, t_max=2e3)
        print(f"gradient flow to the minimum: rel. distance {gf.rel_dist[-1]:.1e}")
        W1s = np.ascontiguousarray(np.tile(gf.W1, (R, 1, 1)))
        W2s = np.ascontiguousarray(np.tile(gf.W2, (R, 1, 1)))
        perm = np.tile(np.arange(P, dtype=np.int64), (R, 1))
        e1, e2 = np.empty((0, R, N_h, N_i)), np.empty((0, R, N_o, N_h))
        diag = np.empty((0, R, 3))
        Wp = np.empty((R, N_o, N_i))

        # warm-up (compile or load from cache)
        t0 = time.perf_counter()
        A1, A2 = W1s.copy(), W2s.copy()
        product_kernel(A1, A2, Wp)
        keys = replica_keys(rng, R)
        sgd_kernel(
            X, Y, A1, A2, Wp, args.lr, S, True, perm, keys, 0, 2, 3, e1, e2, diag, gf.w_star, 1e12
        )  # fmt: skip
        sgf_kernel(X, Y, A1, A2, Wp, 1e-3, 1e-3, keys, 0, 2, 3, e1, e2, diag, gf.w_star, 1e12)
        print(f"warm-up (compile/cache load): {time.perf_counter() - t0:.2f} s")

        kernel_rate = 0.0
        for sampling in ("with", "without"):
            times = _kernel_seconds(
                lambda A1, A2, replacement=sampling == "with": sgd_kernel(
                    X, Y, A1, A2, Wp, args.lr, S, replacement, perm, keys, 0, args.steps,
                    args.steps + 1, e1, e2, diag, gf.w_star, 1e12,
                ),
                W1s, W2s, Wp, args.repeats,
            )  # fmt: skip
            rate = args.steps * R / min(times)
            print(
                f"kernel [{sampling:7s}] best {min(times) * 1e3:8.1f} ms / {args.steps} steps "
                f"-> {rate:.3e} replica-steps/s (median {args.steps * R / np.median(times):.3e})"
            )
            if sampling == "with":
                kernel_rate = rate

        # SGF (Euler-Maruyama, dt = lr): every sample and P normals per step
        sgf_steps = max(1, args.steps * S // P)
        times = _kernel_seconds(
            lambda A1, A2: sgf_kernel(
                X, Y, A1, A2, Wp, args.lr / P, np.sqrt(args.lr * args.lr / (S * P)), keys, 0,
                sgf_steps, sgf_steps + 1, e1, e2, diag, gf.w_star, 1e12,
            ),
            W1s, W2s, Wp, args.repeats,
        )  # fmt: skip
        print(
            f"sgf_kernel     best {min(times) * 1e3:8.1f} ms / {sgf_steps} steps "
            f"-> {sgf_steps * R / min(times):.3e} replica-steps/s"
        )

        # end to end, including uniforms, traces and moment accumulation
        for moments in ("W2", "all"):
            steps = 10 * 32 * (40 if moments == "W2" else 4)
            res = run_sgd_two_layer(
                X, Y, (gf.W1, gf.W2), (W1s, W2s), Update(args.lr, S, "with"),
                Schedule(1000, steps, 10, 2), np.random.default_rng(1), second_moments=moments,
            )  # fmt: skip
            e2e = (res.burnin_steps + res.sample_steps) * R / res.elapsed_s
            print(
                f"run_sgd_two_layer end-to-end (thin=10, second_moments={moments!r}): "
                f"{e2e:.3e} replica-steps/s"
            )

        # plain reference loop, one chain
        u1 = rng.random((args.ref_steps, 1, S))
        idx, _ = batch_indices_from_uniforms(u1, P, "with")
        times = []
        for _ in range(max(1, args.repeats // 2)):
            t0 = time.perf_counter()
            sgd_reference_chain(X, Y, gf.W1, gf.W2, args.lr, idx[:, 0])
            times.append(time.perf_counter() - t0)
        dt = min(times)
        ref_rate = args.ref_steps / dt
        print(
            f"sgd_reference_chain: best {dt * 1e3:.1f} ms / {args.ref_steps} steps "
            f"-> {ref_rate:.3e} replica-steps/s"
        )

    ratio = kernel_rate / ref_rate
    print(f"ratio kernel / reference: {ratio:.1f}x")
    print("target (>= 10x):", "MET" if ratio >= 10 else "NOT MET")


if __name__ == "__main__":
    main()
