"""Cluster resource requests of the compute rules, scaled with each cell's size.

A scheduler needs honest upper bounds: memory from the arrays a job holds, run time from the largest
number of steps the protocol allows times a conservative throughput (a quarter of what
``benchmarks/sgd_throughput.py`` and ``benchmarks/two_layer_throughput.py`` measure on one core).
Every request doubles with each retry (``attempt``), so a job killed for time or memory gets more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from weightdyn.observables import MAX_SERIES_BYTES

BASE_MB = 400  # interpreter, numpy, numba and xarray
SL_MULADDS_PER_S = 7.5e8  # single-layer kernel: S * N multiply-adds per replica-step
TL_MULADDS_PER_S = 2.5e8  # two-layer kernel: S * N_h * (N_i + N_o) per replica-step
#: a cell whose kernel splits its replicas over threads asks for two when its estimated one-core
#: run time (the conservative bound of this module) exceeds this many seconds. Single-layer SGD
#: scales to 2 threads alone (benchmarks/sgd_throughput.py --threads 2: 1.9-2.0x at N = 100-190),
#: but beside Snakemake's own process (half a core on config/paper.yaml) two-thread cells ran at
#: 1.2-1.5x; a threshold of 600 s made the paper run 100 min instead of 73, so only the longest
#: cells get two.
PARALLEL_CELL_S = 1800.0
#: a cell of at most this many multiply-adds (about a second here) is light: the workflow runs it
#: inside its own process (Experiment.light) instead of paying ~2 CPU-s to start a job process
LIGHT_MULADDS = 1e9


def is_light(muladds: float) -> bool:
    """Whether a cell of ``muladds`` multiply-adds is light (:data:`LIGHT_MULADDS`)."""
    return muladds <= LIGHT_MULADDS


def kernel_threads(seconds: float, replicas: int) -> int:
    """Threads for a kernel cell: 2 for a long one with at least 2 replicas, else 1."""
    return 2 if seconds >= PARALLEL_CELL_S and replicas >= 2 else 1


def _mb(n_floats: float) -> int:
    return BASE_MB + math.ceil(8 * n_floats / 1e6)


def _minutes(seconds: float, attempt: int) -> int:
    return attempt * max(5, math.ceil(1.5 * seconds / 60))


def single_layer_data(cell: Mapping[str, object], n_test: int, attempt: int = 1) -> dict[str, int]:
    """Training and test inputs of one data set: (P + n_test) x N floats."""
    N, P = int(cell["N"]), int(cell["P"])
    return {"mem_mb": attempt * _mb(3 * (P + n_test) * N), "runtime": attempt * 5}


def single_layer_theory(cell: Mapping[str, object], attempt: int = 1) -> dict[str, int]:
    """Eqs. 17, 30: a handful of N x N matrices and one P x N data matrix; O(N^3 + P N^2) time."""
    N, P = int(cell["N"]), int(cell["P"])
    seconds = 50 * (N**3 + P * N**2) / 1e9
    return {"mem_mb": attempt * _mb(2 * P * N + 12 * N * N), "runtime": _minutes(seconds, attempt)}


def single_layer_sgd(
    cell: Mapping[str, object], protocol: Mapping[str, object], attempt: int = 1
) -> dict[str, int]:
    """R replicas, at most burnin_max_steps + sample_max_steps steps, R x blocks x N^2 moments,
    and the observable series of the effective sample size (two per record, capped at 32 MiB,
    three times over while its autocorrelation is computed)."""
    N, P, S = int(cell["N"]), int(cell["P"]), int(cell["batch_size"])
    replicas = int(protocol.get("replicas", 64))
    blocks = int(protocol.get("n_blocks", 4))
    sample = int(protocol.get("sample_max_steps", 10_000_000))
    steps = int(protocol.get("burnin_max_steps", 2_000_000)) + sample
    seconds = replicas * steps * S * N / SL_MULADDS_PER_S
    records = sample // max(1, int(protocol.get("thin", 10)))
    series = min(MAX_SERIES_BYTES / 8, 2 * replicas * records)
    floats = P * N + 2 * replicas * blocks * N * (N + 1) + 4 * replicas * 65_536 + 3 * series
    return {
        "mem_mb": attempt * _mb(floats),
        "runtime": _minutes(seconds, attempt),
        "threads": kernel_threads(seconds, replicas),
    }


def two_layer_cell(cell: Mapping[str, object], attempt: int = 1) -> dict[str, int]:
    """Exact linearisation (n_theta x n_theta matrices, n_theta = N_h (N_i + N_o)) and R chains.

    The chains run a fixed number of relaxation times whose length in steps depends on the data;
    the request assumes 10^6 steps per replica, ten times the default cells'.
    """
    n_i, n_h, n_o, P = (int(cell[k]) for k in ("N_i", "N_h", "N_o", "P"))
    S, replicas = int(cell["batch_size"]), int(cell.get("replicas", 8))
    n_theta = n_h * (n_i + n_o)
    seconds = replicas * 1e6 * S * n_h * (n_i + n_o) / TL_MULADDS_PER_S + 50 * n_theta**3 / 1e9
    threads = kernel_threads(seconds, replicas)
    # sampling holds the second moments of n_blocks (replica, block) groups of a replica per
    # thread, and up to 64 MiB of further replicas (two_layer.protocol.replica_groups)
    blocks = int(cell.get("n_blocks", 8))
    moments = threads * blocks * n_theta**2 + (64 << 20) / 8
    floats = 8 * n_theta**2 + moments + P * (n_i + n_o) + replicas * 4 * n_theta**2
    return {
        "mem_mb": attempt * _mb(floats),
        "runtime": _minutes(seconds, attempt),
        # pre-run, relaxation and (in groups of at least a replica per thread) sampling run
        # several replicas in one kernel, which splits them over the threads
        "threads": threads,
    }
