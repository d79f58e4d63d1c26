"""The paper-sized real-data cell without its SGD sampling: digits, MLP 64-50-50-10 tanh (Feng &
Tu's widths, n = 6310), cross-entropy with weight decay, P = 1000: wall time and memory of the
minimum search, the Hessian and its eigendecomposition, and the theory of the model cell (the
exact linearisation and App. A's form, paper 000 Eqs. 29-33, 79-81, and the mini-batch recursion),
and what SGD sampling would cost (its relaxation time, and the sums' memory).

Usage: ``python tools/network_paper_cell.py [--hidden 50-50] [--chi 1e-3] [--lr 0.1]``
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from weightdyn import datasets
from weightdyn.models import MLP, theory
from weightdyn.models.cell import relaxation_steps


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", default="50-50")
    parser.add_argument("--chi", type=float, default=1e-3)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--P", type=int, default=1000)
    parser.add_argument("--S", type=int, default=32)
    args = parser.parse_args()
    data = datasets.load_dataset("digits", P=args.P, test_size=0.25, split_seed=0)
    widths = (data.N_i, *(int(h) for h in args.hidden.split("-")), data.N_o)
    model = MLP(widths, "tanh", loss="cross_entropy", weight_decay=args.chi)
    print(f"digits P = {data.P}, MLP {widths}, n = {model.n_params}, chi = {args.chi:g}")
    theta0 = model.random_theta(np.random.default_rng(0))
    t = time.perf_counter()
    res = theory.find_minimum(model, data.X_train, data.Y_train, theta0, gtol=1e-9, strict=False)
    print(f"minimum search: {time.perf_counter() - t:.1f} s, |grad L| = {res.grad_norm:.2e}, "
          f"L = {res.loss:.6g}, converged {res.converged}")  # fmt: skip
    t = time.perf_counter()
    H = model.hessian(data.X_train, data.Y_train, res.theta)
    t_h = time.perf_counter() - t
    t = time.perf_counter()
    omega = np.linalg.eigvalsh(H)
    print(f"Hessian: {t_h:.1f} s; eigendecomposition: {time.perf_counter() - t:.1f} s; "
          f"omega in [{omega[0]:.3g}, {omega[-1]:.3g}]")  # fmt: skip
    tau, tau_fast = relaxation_steps(theory.hessian_range(H), args.lr)
    print(f"relaxation at lr = {args.lr:g}: slowest {tau:.4g} steps, fastest {tau_fast:.3g}")
    t = time.perf_counter()
    exact = theory.local_theory(model, data.X_train, data.Y_train, res.theta, args.lr, args.S)
    gn = theory.local_theory(model, data.X_train, data.Y_train, res.theta, args.lr, args.S,
                             drift="gauss_newton")  # fmt: skip
    print(
        f"theory (exact + App. A, with Eq. 33 and the discrete recursion): "
        f"{time.perf_counter() - t:.1f} s; tr M exact {np.trace(exact.M):.5g}, "
        f"App. A {np.trace(gn.M):.5g}, discrete {np.trace(exact.M_discrete):.5g}"
    )
    n = model.n_params
    for R, B in ((16, 8), (4, 2)):
        print(
            f"SGD moment sums with {R} replicas x {B} blocks: {8 * R * B * n * n / 2**30:.1f} GiB"
        )
    print(f"peak memory so far: {_peak_gb():.2f} GiB")


if __name__ == "__main__":
    main()
