"""Cost of the finite-volume transport solver (Eq. 10) to a fixed time T vs the grid size n.

Each step costs O(n^2 M) (the midpoint-rule prediction and the face velocities are matrix-vector
products with tabulated features) and the CFL bound needs O(n) steps, so the time to T grows like
n^3. The first-order upwind scheme is the baseline measured in the same run: MUSCL does the same
work per stage plus the slope limiting, at half the CFL number (twice the steps).

Usage: ``python3 benchmarks/mean_field_pde_cost.py [--grids 32 64 128 256] [--T 1.0]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from weightdyn.mean_field import pde_comparison as pc
from weightdyn.mean_field import transport


def solve_seconds(n: int, scheme: str, t_end: float) -> tuple[float, int]:
    """CPU seconds (set-up included) and steps of one solve to ``t_end`` on the n x n grid."""
    s = pc.settings({})
    unit, measure, f = pc.problem_parts(s)
    grid = pc.grid_of(s, n)
    start = time.process_time()
    problem = transport.TransportProblem(unit, grid, measure, f)
    p0 = transport.gaussian_cell_averages(grid, s["init_mean"], s["init_std"])
    sol = transport.solve(problem, p0, [t_end], scheme, s["limiter"])
    return time.process_time() - start, sol.steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grids", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--T", type=float, default=1.0)
    args = parser.parse_args()
    n = np.array(args.grids, dtype=float)
    print(f"{'n':>6} {'scheme':>8} {'steps':>6} {'cpu s':>9} {'us/(cell step)':>15}")
    seconds = {}
    for scheme in ("upwind", "muscl"):
        seconds[scheme] = []
        for size in args.grids:
            sec, steps = solve_seconds(size, scheme, args.T)
            seconds[scheme].append(sec)
            print(
                f"{size:6d} {scheme:>8} {steps:6d} {sec:9.3f} {1e6 * sec / size**2 / steps:15.3f}"
            )
    for scheme, sec in seconds.items():
        slope = np.polyfit(np.log(n), np.log(sec), 1)[0]
        print(
            f"{scheme}: fitted exponent of n in the time to T = {args.T:g}: {slope:.2f} "
            f"(expected 3)"
        )
    ratio = np.array(seconds["muscl"]) / np.array(seconds["upwind"])
    print("MUSCL / upwind (baseline) time ratio per n:", np.round(ratio, 2))


if __name__ == "__main__":
    main()
