"""Throughput of the compiled SGD kernel of weightdyn.models against plain loops (one thread).

Usage: python benchmarks/models_throughput.py [--steps 20000] [--R 16]

For the nonlinear cell of config/paper.yaml (one hidden tanh layer, N_i = 10, 5 units, biases: 61
parameters; P = 600, S = 10) and deep linear networks of depth 3 and 4 (N_i = 8, width 6,
N_o = 4), prints replica-steps per second, measured in the same run, of
  * ``run_sgd(engine="kernel")``: the numba kernel, moments every 10 steps;
  * ``run_sgd(engine="numpy")``: all replicas as one array operation per step;
  * ``reference_chain``: the plain one-chain loop (Model.per_sample_gradients per step);
and the kernel's speed-up over each.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numba
import numpy as np

from weightdyn.models import DeepLinear, Model, OneHidden
from weightdyn.models.simulate import CHUNK_STEPS, reference_chain, run_sgd
from weightdyn.sgd import Schedule, Update

MODELS = {
    "one_hidden tanh (n=61)": OneHidden(10, 5, 1, "tanh"),
    "deep linear L=3": DeepLinear([8, 6, 6, 4]),
    "deep linear L=4": DeepLinear([8, 6, 6, 6, 4]),
}


def rate(model: Model, X, Y, theta, engine: str, R: int, steps: int) -> float:
    out = run_sgd(model, X, Y, np.tile(theta, (R, 1)), theta_ref=theta, update=Update(0.01, 10),
                  schedule=Schedule(0, steps, 10, 1, CHUNK_STEPS), rng=np.random.default_rng(1),
                  engine=engine)  # fmt: skip
    return out.steps_per_second


def loop_rate(model: Model, X, Y, theta, steps: int) -> float:
    idx = np.random.default_rng(2).integers(0, X.shape[0], size=(steps, 10))
    start = time.perf_counter()
    reference_chain(model, X, Y, theta, 0.01, idx)
    return steps / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20000, help="kernel steps per replica")
    ap.add_argument("--numpy-steps", type=int, default=2000, help="numpy-engine steps")
    ap.add_argument("--loop-steps", type=int, default=2000, help="plain-loop steps")
    ap.add_argument("--R", type=int, default=16)
    args = ap.parse_args()
    numba.set_num_threads(1)
    print(f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}")
    print(f"cpu: {platform.processor() or platform.machine()}, os.cpu_count()={os.cpu_count()}")
    print(f"R = {args.R}, S = 10, P = 600, one numba thread; replica-steps per second")
    print(f"{'model':24s} {'kernel':>10s} {'numpy':>10s} {'loop':>10s} {'k/numpy':>8s} "
          f"{'k/loop':>8s}")  # fmt: skip
    for name, model in MODELS.items():
        rng = np.random.default_rng(0)
        X = rng.standard_normal((600, model.n_in))
        Y = rng.standard_normal((600, model.n_out))
        theta = model.random_theta(rng)
        rate(model, X, Y, theta, "kernel", 2, 10)  # compile or load the cache
        kern = rate(model, X, Y, theta, "kernel", args.R, args.steps)
        nump = rate(model, X, Y, theta, "numpy", args.R, args.numpy_steps)
        loop = loop_rate(model, X, Y, theta, args.loop_steps)
        print(f"{name:24s} {kern:10.3g} {nump:10.3g} {loop:10.3g} {kern / nump:8.1f} "
              f"{kern / loop:8.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
