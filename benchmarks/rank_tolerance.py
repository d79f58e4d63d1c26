"""Rank cuts of the two-layer theory at gradient-flow minima.

Usage: python benchmarks/rank_tolerance.py [--gtol 1e-10]

For N_i = 10, P = 100, N_h in {3, 5, 10, 20}, N_o in {1, 2}, sigma_y2 in {0.1, 1}, Gaussian and
zero-balanced initialisation (data seed 0): the workflow's gradient flow
(:func:`weightdyn.two_layer.protocol.setup`, stop at ``|grad L| <= 1e-10 (|w*| + 1)``; with
``--gtol g`` the flow then continues to ``g (|w*| + 1)``), and at its end point:

* the drift's eigenvalues that belong to zero modes (the ``n - N_o N_i`` smallest), the softest
  kept curvature, ``||E||_2`` (:func:`theory.residual_norm`);
* the former cut (round-off floor ``10 n eps s_max``, i.e. ``atol=0``) and whether
  ``exact_stationary_covariance`` raised with it; the new default cut;
* ``|M - M_exact| / |M_exact|`` against the matched exact minimum (same ``W2``,
  ``W1 + W2^+ (w* - W2 W1)``), the relative weight distance to it, and ``|M - M_lin| / |M_lin|``
  against :class:`weightdyn.two_layer.linalg.Linearisation` at the same point.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from weightdyn.two_layer import protocol
from weightdyn.two_layer import simulate as sim
from weightdyn.two_layer import theory as tl
from weightdyn.two_layer.linalg import Linearisation

LR, S = 0.1, 5


def _rel(A: np.ndarray, B: np.ndarray) -> float:
    return float(np.linalg.norm(A - B) / np.linalg.norm(B))


def row(N_h: int, N_o: int, sigma_y2: float, init: str, gtol: float) -> str:
    p = dict(N_i=10, N_h=N_h, N_o=N_o, P=100, sigma_y2=sigma_y2, targets="random", data_seed=0,
             init=init, init_scale=1.0)  # fmt: skip
    s = protocol.setup(p, lambda *_: None)
    X, Y, W1, W2 = s.X, s.Y, s.W1g, s.W2g
    if gtol != 1e-10:
        gf = sim.gradient_flow(X, Y, W1, W2, 1e7, gtol=gtol * (np.linalg.norm(s.w_star) + 1))
        W1, W2 = gf.W1, gf.W2
    G = tl.exact_drift(X, Y, W1, W2)
    n = G.shape[0]
    ev = np.sort(np.linalg.eigvalsh(G))
    zero = ev[: n - s.rank]
    old_cut = 10 * n * np.finfo(float).eps * np.linalg.norm(G, 2)
    E = tl.residual_norm(X, Y, W1, W2)
    try:
        tl.exact_stationary_covariance(X, Y, W1, W2, LR, S, atol=0.0)
        before = "ok"
    except ValueError:
        before = "ValueError"
    M = tl.exact_stationary_covariance(X, Y, W1, W2, LR, S)
    W1m, W2m = tl.minimum_from_w2(s.w_star, W2, W1)
    M_exact = tl.exact_stationary_covariance(X, Y, W1m, W2m, LR, S)
    dist = np.linalg.norm(W1m - W1) / np.linalg.norm(tl.pack(W1, W2))
    lin = Linearisation(X, Y, W1, W2, LR, S, "with", s.rank, s.layout)
    M_c = np.empty_like(M)
    M_c[np.ix_(s.layout.perm, s.layout.perm)] = M
    return (
        f"{N_h:3d} {N_o:3d} {sigma_y2:4} {init[:4]} {n:4d} {s.rank:3d} "
        f"[{zero.min():+.1e}, {zero.max():+.1e}] {ev[n - s.rank]:8.2e} {E:8.1e} "
        f"{old_cut:8.1e} {before:>10} {max(old_cut, tl.RESIDUAL_CUT_FACTOR * E):8.1e} "
        f"{_rel(M, M_exact):8.1e} {dist:8.1e} {_rel(M_c, lin.Q @ lin.Mr @ lin.Q.T):8.1e}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gtol", type=float, default=1e-10, help="gradient-flow tolerance / (|w*|+1)")
    args = ap.parse_args()
    print("N_h N_o sy2  init    n   r  zero modes            soft     ||E||    old cut"
          "   old call  new cut  M-M_ex   dist     M-M_lin")  # fmt: skip
    for N_h, N_o, sy2, init in itertools.product(
        (3, 5, 10, 20), (1, 2), (0.1, 1.0), ("gaussian", "zero_balanced")
    ):
        print(row(N_h, N_o, sy2, init, args.gtol))


if __name__ == "__main__":
    main()
