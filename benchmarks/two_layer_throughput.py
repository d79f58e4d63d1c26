"""Throughput of the two-layer numba SGD/SGF kernels, float64 and float32, vs the plain loop.

Usage: python benchmarks/two_layer_throughput.py [--steps 4000] [--ref-steps 3000] [--P 1000]

Problem size as in paper 000, Fig. 7a: N_i = 50, N_h = 40, N_o = 1, P = 200, S = 10; R = 64
replicas; one thread. Prints replica-steps per second of
  * the bare SGD kernels (after a warm-up call that compiles / loads the cache; their
    counter-based random numbers included): ``sgd_kernel`` (float64; with and without
    replacement) and ``sgd_deviation_kernel`` (float32 deviation form, with replacement),
  * the SGF kernels ``sgf_kernel`` and ``sgf_deviation_kernel`` (Eqs. 51-52: all P samples and
    P normals per step),
  * ``run_sgd_two_layer`` end to end in both precisions (uniforms + kernel + traces + moments
    of dW2 only and of all weights, thin = 10),
  * ``sgd_reference_chain`` (a single chain, plain numpy per step),
all in the same run, float64 and float32 timed alternately (best of ``--repeats``), and the
float32 / float64 and kernel / reference ratios. Target: >= 10x the plain loop.
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
from weightdyn.two_layer.deviation import Deviations, sgd_deviation_kernel, sgf_deviation_kernel
from weightdyn.two_layer.simulate import (
    GradientFlowResult,
    batch_indices_from_uniforms,
    gaussian_init,
    gradient_flow,
    product_kernel,
    run_sgd_two_layer,
    sgd_kernel,
    sgd_reference_chain,
    sgf_kernel,
)


class Bench:
    """One problem at the gradient-flow minimum ``gf`` with ``R`` replicas: the bare kernels in
    both precisions on fresh copies of the replicas' weights, recording nothing."""

    def __init__(self, args: argparse.Namespace, X: np.ndarray, Y: np.ndarray,
                 gf: GradientFlowResult, rng: np.random.Generator) -> None:  # fmt: skip
        R, P = args.R, X.shape[0]
        self.args, self.X, self.Y, self.gf = args, X, Y, gf
        self.W1 = np.ascontiguousarray(np.tile(gf.W1, (R, 1, 1)))
        self.W2 = np.ascontiguousarray(np.tile(gf.W2, (R, 1, 1)))
        self.perm = np.tile(np.arange(P, dtype=np.int64), (R, 1))
        self.keys = replica_keys(rng, R)
        self.empty = (np.empty((0, *self.W1.shape)), np.empty((0, *self.W2.shape)),
                      np.empty((0, R, 3)))  # fmt: skip

    def coeffs(self, kind: str, sampling: str = "with") -> tuple:
        """The kernel's step arguments: ``(lr, S, with_replacement, perm)`` or SGF's
        ``(drift, amp)`` (Euler step dt = lr)."""
        a, P = self.args, self.X.shape[0]
        if kind == "sgd":
            return (a.lr, a.S, sampling == "with", self.perm)
        return (a.lr / P, np.sqrt(a.lr * a.lr / (a.S * P)))

    def seconds(self, kind: str, precision: str, n: int, sampling: str = "with") -> float:
        """Wall seconds of ``n`` steps of the ``kind`` kernel in ``precision``."""
        tail = (self.keys, 0, n, n + 1, *self.empty)
        if precision == "float64":
            A1, A2 = self.W1.copy(), self.W2.copy()
            Wp = np.empty((A1.shape[0], self.Y.shape[1], self.X.shape[1]))
            product_kernel(A1, A2, Wp)
            kernel = sgd_kernel if kind == "sgd" else sgf_kernel
            args = (self.X, self.Y, A1, A2, Wp, *self.coeffs(kind, sampling), *tail,
                    self.gf.w_star, 1e12)  # fmt: skip
        else:
            data, refs = (self.X, self.Y), (self.gf.W1, self.gf.W2)
            dev = Deviations.build(data, refs, (self.W1, self.W2), self.gf.w_star)
            kernel = sgd_deviation_kernel if kind == "sgd" else sgf_deviation_kernel
            args = (dev.X, dev.E0, dev.refs, dev.state, *self.coeffs(kind, sampling), *tail, 1e12)
        t0 = time.perf_counter()
        kernel(*args)
        return time.perf_counter() - t0


def _best(runs: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """The best of ``repeats`` timings of each run, the runs alternating within each repeat."""
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(run())
    return {name: min(t) for name, t in times.items()}


def kernels(b: Bench) -> float:
    """Print the bare kernels' rates (both precisions); return float64 SGD's (with)."""
    a, R = b.args, b.args.R
    sgf_steps = max(1, a.steps * a.S // b.X.shape[0])
    runs = {
        "sgd_kernel [with]": lambda: b.seconds("sgd", "float64", a.steps),
        "sgd_deviation_kernel float32 [with]": lambda: b.seconds("sgd", "float32", a.steps),
        "sgd_kernel [without]": lambda: b.seconds("sgd", "float64", a.steps, "without"),
        "sgf_kernel": lambda: b.seconds("sgf", "float64", sgf_steps),
        "sgf_deviation_kernel float32": lambda: b.seconds("sgf", "float32", sgf_steps),
    }
    best = _best(runs, a.repeats)
    for name, sec in best.items():
        n = sgf_steps if name.startswith("sgf") else a.steps
        rate = n * R / sec
        print(f"{name:36s} best {sec * 1e3:8.1f} ms / {n} steps -> {rate:.3e} replica-steps/s")
    for kind, k64, k32 in (("SGD", "sgd_kernel [with]", "sgd_deviation_kernel float32 [with]"),
                           ("SGF", "sgf_kernel", "sgf_deviation_kernel float32")):  # fmt: skip
        print(f"{kind} kernel float32 / float64: {best[k64] / best[k32]:.2f}x")
    return a.steps * R / best["sgd_kernel [with]"]


def end_to_end(b: Bench) -> None:
    """Print ``run_sgd_two_layer``'s rate with the moments of dW2 only and of all weights."""
    a, R = b.args, b.args.R
    for moments in ("W2", "all"):
        steps = 10 * 32 * (40 if moments == "W2" else 4)

        def run(precision: str, moments: str = moments, steps: int = steps) -> float:
            res = run_sgd_two_layer(
                b.X, b.Y, (b.gf.W1, b.gf.W2), (b.W1, b.W2), Update(a.lr, a.S, "with"),
                Schedule(1000, steps, 10, 2), np.random.default_rng(1),
                second_moments=moments, precision=precision,
            )  # fmt: skip
            return res.elapsed_s / (res.burnin_steps + res.sample_steps) / R

        try:
            best = _best({p: lambda p=p: run(p) for p in ("float64", "float32")}, 2)
        except ValueError as err:  # all second moments of a large network: over 4 GiB
            print(f"run_sgd_two_layer (second_moments={moments!r}): skipped, {err}")
            continue
        rates = " ".join(f"{p} {1 / s:.3e}" for p, s in best.items())
        ratio = best["float64"] / best["float32"]
        print(f"run_sgd_two_layer (thin=10, second_moments={moments!r}) replica-steps/s: {rates} "
              f"(float32 / float64 {ratio:.2f}x)")  # fmt: skip


def reference_rate(b: Bench, rng: np.random.Generator) -> float:
    """Print and return the plain one-chain numpy loop's steps per second."""
    a = b.args
    idx, _ = batch_indices_from_uniforms(rng.random((a.ref_steps, 1, a.S)), b.X.shape[0], "with")
    times = []
    for _ in range(max(1, a.repeats // 2)):
        t0 = time.perf_counter()
        sgd_reference_chain(b.X, b.Y, b.gf.W1, b.gf.W2, a.lr, idx[:, 0])
        times.append(time.perf_counter() - t0)
    rate = a.ref_steps / min(times)
    print(f"sgd_reference_chain: best {min(times) * 1e3:.1f} ms / {a.ref_steps} steps "
          f"-> {rate:.3e} replica-steps/s")  # fmt: skip
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("N_i", 50), ("N_h", 40), ("N_o", 1), ("P", 200), ("S", 10), ("R", 64)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--steps", type=int, default=4000, help="kernel steps per timing")
    ap.add_argument("--ref-steps", type=int, default=3000, help="steps of the plain loop")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()

    numba.set_num_threads(1)
    rng = np.random.default_rng(0)
    data = two_layer_data(args.N_i, args.P, rng, N_o=args.N_o, sigma_y2=0.1)
    print(f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}")
    print(f"cpu: {platform.processor() or platform.machine()}, os.cpu_count()={os.cpu_count()}")
    print(f"N_i={args.N_i} N_h={args.N_h} N_o={args.N_o} P={args.P} S={args.S} R={args.R} "
          f"lr={args.lr}")  # fmt: skip
    with threadpool_limits(limits=1):
        W1_0, W2_0 = gaussian_init(args.N_i, args.N_h, args.N_o, rng, init_scale=1.0)
        gf = gradient_flow(data.X, data.Y, W1_0, W2_0, t_max=2e3)
        print(f"gradient flow to the minimum: rel. distance {gf.rel_dist[-1]:.1e}")
        b = Bench(args, data.X, data.Y, gf, rng)
        t0 = time.perf_counter()
        for kind in ("sgd", "sgf"):  # warm-up (compile or load from cache)
            for precision in ("float64", "float32"):
                b.seconds(kind, precision, 2)
        print(f"warm-up (compile/cache load): {time.perf_counter() - t0:.2f} s")
        kernel_rate = kernels(b)
        end_to_end(b)
        ratio = kernel_rate / reference_rate(b, rng)
    print(f"ratio kernel (float64) / reference: {ratio:.1f}x")
    print("target (>= 10x):", "MET" if ratio >= 10 else "NOT MET")


if __name__ == "__main__":
    main()
