"""Cost of one RK4 step of the particle dynamics (paper 002, Eqs. 3, 9-10) vs width N and M.

Usage: python benchmarks/mean_field_particles_cost.py [--repeats 3] [--seeds 4]

Times ``particles.rk4_step`` (TanhUnit, Gauss-Legendre measure, ``seeds`` networks batched) for
N = 10 ... 1e5 at M = 32 and for M = 8 ... 128 at N = 1000, fits log time = a + b log N (and
log M) over the upper part of each range, and prints the exponents (expected ~1 in both). The
baseline, measured in the same run, is a plain per-particle Python loop evaluating the same
velocity field (Eq. 9 gradients one particle at a time); the vectorised/loop ratio is printed.
One core (threadpool limited); CPU time, which other load on the machine disturbs less than
wall time. Prints figures only, asserts nothing.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from threadpoolctl import threadpool_limits

from weightdyn.mean_field import particles
from weightdyn.mean_field.model import TanhUnit, gauss_legendre

UNIT = TanhUnit()


def seconds_per_step(n: int, m: int, seeds: int, repeats: int) -> float:
    """Best-of-``repeats`` CPU time of one vectorised RK4 step for ``seeds`` width-n networks."""
    measure = gauss_legendre(m)
    f = np.sin(np.pi * measure.x)
    rng = np.random.default_rng(0)
    W = particles.sample_gaussian(rng, (seeds, n), [0, 0, 0], [1, 2, 1])
    state = particles.State(W, particles.uniform_weights(W))
    best = np.inf
    for _ in range(repeats):
        start = time.process_time()
        particles.rk4_step(UNIT, state, measure, f, 0.05)
        best = min(best, time.process_time() - start)
    return best


def loop_rates(W: np.ndarray, x: np.ndarray, mu: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Velocities -grad u(w_n) (Eq. 9) with a plain loop over particles (the baseline)."""
    n = W.shape[0]
    pred = np.zeros_like(x)
    for w in W:
        pred += w[0] * np.tanh(w[1] * x + w[2]) / n
    rho = mu * (pred - f)
    out = np.empty_like(W)
    for k, (c, a, h) in enumerate(W):
        t = np.tanh(a * x + h)
        s = c * (1 - t * t) * rho
        out[k] = -np.array([rho @ t, s @ x, s.sum()])
    return out


def loop_seconds_per_step(n: int, m: int, seeds: int) -> float:
    """CPU time of one RK4 step of the plain-loop baseline for ``seeds`` width-n networks."""
    measure = gauss_legendre(m)
    f = np.sin(np.pi * measure.x)
    rng = np.random.default_rng(0)
    Ws = particles.sample_gaussian(rng, (seeds, n), [0, 0, 0], [1, 2, 1])
    start = time.process_time()
    for W in Ws:
        k1 = loop_rates(W, measure.x, measure.weights, f)
        k2 = loop_rates(W + 0.025 * k1, measure.x, measure.weights, f)
        k3 = loop_rates(W + 0.025 * k2, measure.x, measure.weights, f)
        k4 = loop_rates(W + 0.05 * k3, measure.x, measure.weights, f)
        W = W + 0.05 / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return time.process_time() - start


def exponent(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of log y vs log x and its standard error."""
    A = np.stack([np.ones_like(x), np.log(x)], axis=-1)
    coef, res, *_ = np.linalg.lstsq(A, np.log(y), rcond=None)
    dof = max(1, x.size - 2)
    sigma2 = float(res[0]) / dof if res.size else 0.0
    return float(coef[1]), float(np.sqrt(sigma2 * np.linalg.inv(A.T @ A)[1, 1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, one thread")
    widths = np.array([10, 100, 1000, 10000, 100000])
    sizes = np.array([8, 16, 32, 64, 128])
    with threadpool_limits(1):
        t_n = np.array([seconds_per_step(n, 32, args.seeds, args.repeats) for n in widths])
        t_m = np.array([seconds_per_step(1000, m, args.seeds, args.repeats) for m in sizes])
        loop_n = widths[:3]
        t_loop = np.array([loop_seconds_per_step(n, 32, args.seeds) for n in loop_n])
    print(f"\nRK4 step, M = 32, {args.seeds} seeds batched:")
    print(f"{'N':>8} {'s/step':>10} {'us/(particle step)':>20} {'loop s/step':>12} {'speed-up':>9}")
    for i, n in enumerate(widths):
        per = t_n[i] / (n * args.seeds) * 1e6
        loop = f"{t_loop[i]:12.4g} {t_loop[i] / t_n[i]:9.1f}" if i < loop_n.size else ""
        print(f"{n:8d} {t_n[i]:10.4g} {per:20.3f} {loop}")
    s, se = exponent(widths[2:].astype(float), t_n[2:])
    print(f"fitted exponent in N (N >= 1000): {s:.3f} +- {se:.3f}")
    s_loop, se_loop = exponent(loop_n.astype(float), t_loop)
    print(f"fitted exponent in N of the loop baseline: {s_loop:.3f} +- {se_loop:.3f}")
    print(f"\nRK4 step, N = 1000, {args.seeds} seeds batched:")
    print(f"{'M':>8} {'s/step':>10}")
    for m, t in zip(sizes, t_m, strict=True):
        print(f"{m:8d} {t:10.4g}")
    s, se = exponent(sizes[2:].astype(float), t_m[2:])
    print(f"fitted exponent in M (M >= 32): {s:.3f} +- {se:.3f}")


if __name__ == "__main__":
    main()
