"""Single-layer SGD throughput: the plain kernel vs the App. B variant kernel.

Usage: python benchmarks/sgd_variant_throughput.py [--N 20] [--S 32] [--P 1000] [--R 16]
       [--threads 1] [--budget 0.5]

Replica-steps per second of :func:`sgd_kernel` (Eq. 11) and of :func:`sgd_variant_kernel`
(paper 000 App. B: ``w <- w - lr Lam (g_B + chi w) + sqrt(2 lr T) Lam^{1/2} xi``) for weight
decay only, with a dense SPD preconditioner, and with the preconditioner and injected noise;
moments recorded every 10th step as run_sgd does, batches with replacement, best of 3.
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from weightdyn.blas import one_blas_thread
from weightdyn.counter_rng import replica_keys
from weightdyn.sgd import Update, update_matrices
from weightdyn.single_layer.simulate import sgd_kernel, sgd_variant_kernel


def _rate(call, steps: int, R: int) -> float:
    """Best replica-steps/s of ``call(step0, n)`` over three runs of ``steps`` steps."""
    call(0, 10)  # compile or load from the cache
    best = np.inf
    for k in range(3):
        t0 = time.perf_counter()
        call(10 + k * steps, steps)
        best = min(best, time.perf_counter() - t0)
    return steps * R / best


def _caller(X, y, w_ref, update: Update, R: int):
    """``call(step0, n)``: the kernel of ``update`` (plain or variant) with moments."""
    P, N = X.shape
    W = np.tile(w_ref, (R, 1))
    perm = np.tile(np.arange(P, dtype=np.int64), (R, 1))
    keys = replica_keys(np.random.default_rng(2), R)
    sums, rec = (np.zeros((R, N)), np.zeros((R, N, N))), np.empty((0, R, N))
    S = update.batch_size
    if update.is_plain:
        return lambda s0, n: sgd_kernel(X, y, W, update.lr, S, True, perm, keys, s0, n, 10,
                                        w_ref, *sums, rec, 1e12)  # fmt: skip
    drift, noise = update_matrices(update, N)
    drift = np.empty((0, 0)) if drift is None else drift
    noise = np.empty((0, 0)) if noise is None else noise
    chi = float(update.weight_decay)
    return lambda s0, n: sgd_variant_kernel(X, y, W, update.lr, S, True, perm, keys, s0, n, 10,
                                            w_ref, *sums, rec, 1e12, chi, drift, noise)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("N", 20), ("S", 32), ("P", 1000), ("R", 16), ("threads", 1)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per timing (about)")
    a = ap.parse_args()
    numba.set_num_threads(a.threads)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((a.P, a.N)) / np.sqrt(a.N)
    y = X @ rng.standard_normal(a.N) + 0.5 * rng.standard_normal(a.P)
    w_star = np.linalg.lstsq(X, y, rcond=None)[0]
    B = rng.standard_normal((a.N, a.N)) / np.sqrt(a.N)
    lam = np.eye(a.N) + 0.5 * B @ B.T  # a dense SPD preconditioner
    variants = {
        "plain": Update(0.1, a.S),
        "decay": Update(0.1, a.S, weight_decay=0.1),
        "decay+Lam": Update(0.1, a.S, weight_decay=0.1, preconditioner=lam),
        "decay+Lam+T": Update(0.1, a.S, weight_decay=0.1, preconditioner=lam, temperature=0.01),
    }
    steps = max(1000, int(a.budget * 2e9 / (4 * a.S * a.N * a.R * a.threads)))
    print(f"N={a.N} S={a.S} P={a.P} R={a.R} threads={a.threads}, {steps} steps per timing")
    with one_blas_thread():
        for name, update in variants.items():
            rate = _rate(_caller(X, y, w_star, update, a.R), steps, a.R)
            print(f"{name:>12}: {rate:10.4g} replica-steps/s", flush=True)


if __name__ == "__main__":
    main()
