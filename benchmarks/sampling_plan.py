"""What the sampling plan of a config's single-layer cells costs and promises, before any run.

Usage:
    python benchmarks/sampling_plan.py OLD_CONFIG [NEW_CONFIG] [--sweeps fig4b lr_S1 ...]

For every simulated cell of the ``single_layer`` sweeps (cells matched by sweep and id between
the two configs) it plans, from the theory alone (no simulation), the sampling length of
:class:`weightdyn.single_layer.protocol.SGDProtocol` (floor ``sample_steps``, ``sample_tau``
relaxation times, the ``sample_rse`` target, the cap) and prints per sweep:

- cells, how many have their length cut by the cap (``length_capped``), and how many sample
  fewer than ``MIN_TAU`` = 50 integrated autocorrelation times of the slowest mode's projection
  (tau_int = (1 + rho) / (1 - rho), about 2 tau, in the convention of
  :func:`weightdyn.stats.integrated_time`): the cells the run will flag ``undersampled``;
- the cost of the sampling in multiply-adds (replicas x steps x width, width S N for SGD, N^2
  for additive SGF, 2 P N for multiplicative SGF: the kernels' work per step) and the ratio
  new / old;
- the planned relative standard error of tr M (:func:`trace_rse_steps` inverted) and of
  the slowest mode's variance, ``sqrt(2 g / (R T))`` with ``g = (1 + rho^2) / (1 - rho^2)``,
  ``rho = 1 - lr omega_min`` (the largest relative error bar of a spectrum): the largest over
  the sweep's cells, old and new.

These are plans under the approximations of :func:`trace_rse_steps` (Gaussian,
independent modes; checked against runs in tests/test_sampling_plan.py), not measurements; the
measured error bars are in the cells (``*_se``) and benchmarks/calibration.py.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from weightdyn import configfile, sweep
from weightdyn.observables import MIN_TAU
from weightdyn.single_layer import params as sp
from weightdyn.single_layer import theory
from weightdyn.single_layer.protocol import cell_rse_steps, trace_rse_steps
from weightdyn.single_layer.teacher_student import TEACHER_STUDENT


@dataclass(frozen=True)
class CellPlan:
    """One cell's planned sampling: steps, cost, capped, planned relative errors."""

    steps: int
    cost: float
    capped: bool
    rse_trace: float
    rse_slowest: float
    short: bool


def _width(params: dict) -> float:
    N, P, S = params["N"], params["P"], params["batch_size"]
    return {"sgd": S * N, "sgf_additive": N * N, "sgf_multiplicative": 2 * P * N}[
        params["dynamics"]
    ]


def plan_cell(params: dict, data) -> CellPlan:
    """The sampling plan of one simulated single-layer cell."""
    protocol = sp.protocol(params)
    lr, S, sampling = params["lr"], params["batch_size"], params["sampling"]
    H = theory.hessian(data.X)
    tau = theory.slowest_relaxation_steps(H, lr)
    precision = cell_rse_steps(data, lr, S, sampling, protocol)
    steps = protocol.sampling_length(tau, precision)
    C = theory.noise_covariance(data.X, data.y, S, sampling)
    M = theory.stationary_covariance(H, C, lr)
    R = protocol.replicas
    unit = trace_rse_steps(H, M, lr, R, 1.0)  # steps for rse = 1
    rho2 = (1.0 - lr / (lr * tau)) ** 2 if np.isfinite(tau) else 0.0
    g = (1 + rho2) / (1 - rho2) if rho2 < 1 else np.inf
    dt = params.get("dt_over_lr", 1.0) if params["dynamics"] != "sgd" else 1.0
    cost = R * steps / dt * _width(params)
    return CellPlan(
        steps=steps,
        cost=cost,
        capped=protocol.is_capped(tau, precision),
        rse_trace=float(np.sqrt(unit / steps)),
        rse_slowest=float(np.sqrt(2 * g / (R * steps))),
        short=steps < 0.999 * MIN_TAU * 2 * tau,  # tau_int ~ 2 tau; not the block rounding
    )


def simulated_cells(config: dict, only: list[str] | None) -> dict[tuple[str, str], dict]:
    """(sweep, cell id) -> params of every simulated, under-parameterised single-layer cell."""
    out = {}
    sweep.check_config(config)
    for name, sw in sweep.expand_sweeps(config).items():
        if sw.experiment != "single_layer" or (only and name not in only):
            continue
        for cell in sw.cells:
            p = cell.params
            if p["dynamics"] != "none" and p["N"] < p["P"]:
                out[(name, cell.id.split("__")[0])] = p
    return out


def _row(name: str, old: list[CellPlan], new: list[CellPlan]) -> np.ndarray:
    """Print one sweep's line; return its (old, new) sampling cost."""
    cost = np.array([sum(c.cost for c in old), sum(c.cost for c in new)])
    capped = f"{sum(c.capped for c in old):6d}/{sum(c.capped for c in new):<7d}"
    capped += f" {sum(c.short for c in old):5d}/{sum(c.short for c in new):<5d}"
    trace = f"{max(c.rse_trace for c in old):9.2%}/{max(c.rse_trace for c in new):<10.2%}"
    slow = f"{max(c.rse_slowest for c in old):11.2%}/{max(c.rse_slowest for c in new):<12.2%}"
    print(f"{name:22s} {len(old):5d} {capped} {cost[1] / cost[0]:12.3f} {trace} {slow}")
    return cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old")
    parser.add_argument("new", nargs="?")
    parser.add_argument("--sweeps", nargs="*")
    args = parser.parse_args()
    old = simulated_cells(configfile.load(args.old), args.sweeps)
    new = simulated_cells(configfile.load(args.new or args.old), args.sweeps)
    rows: dict[str, list[tuple[CellPlan, CellPlan]]] = defaultdict(list)
    for key in sorted(old.keys() & new.keys()):
        data = TEACHER_STUDENT.load(TEACHER_STUDENT.make(old[key]))
        rows[key[0]].append((plan_cell(old[key], data), plan_cell(new[key], data)))
    head = (f"{'sweep':22s} {'cells':>5s} {'capped old/new':>14s} {'<50 tau_int':>11s} "
            f"{'cost new/old':>12s} {'max rse trM old/new':>20s} "
            f"{'max rse slowest old/new':>24s}")  # fmt: skip
    print(head)
    total = np.zeros(2)
    for name, pairs in rows.items():
        cost = _row(name, [pair[0] for pair in pairs], [pair[1] for pair in pairs])
        total += cost
    ratio = total[1] / total[0]
    print(f"{'all':22s} {sum(len(v) for v in rows.values()):5d} {'':26s} {ratio:12.3f}   "
          f"(sampling cost old {total[0]:.3g}, new {total[1]:.3g} multiply-adds)")  # fmt: skip
    missing = len(old.keys() ^ new.keys())
    if missing:
        print(f"{missing} cells are in only one of the configs (not compared)")


if __name__ == "__main__":
    main()
