"""The paper-sized real-data cell of the ``network`` experiment, timed stage by stage: digits, MLP
64-50-50-10 tanh (Feng & Tu's widths, n = 6310), cross-entropy with weight decay, P = 1000, SGD's
covariance recorded in the ``moment_modes`` stiffest Hessian modes (paper 000 Eqs. 10-11 against
Eqs. 29-33 and App. A's Eqs. 79-81 in that frame).

Runs the experiment's own cell (``EXPERIMENTS["network"].run_cell``, as Snakemake would) and
prints each progress line with the seconds since the start and the process's peak memory at that
point, then the cell's results. The stages: minimum search, Hessian and its eigendecomposition
(before "burn-in"), SGD burn-in and sampling with their basin checks, then the theory and the
statistics (between "sampling" and "tr M").

Usage: ``python tools/network_paper_cell.py [--hidden 50-50] [--moment-modes 500] [--loss squared]
[--flatness-block all] [--out F.nc]``
"""

from __future__ import annotations

import argparse
import resource
import time

from weightdyn import datasets
from weightdyn.models import network_experiment as ne


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", default="50-50")
    parser.add_argument("--chi", type=float, default=1e-3)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--P", type=int, default=1000)
    parser.add_argument("--S", type=int, default=32)
    parser.add_argument("--moment-modes", type=int, default=500, help="0: none")
    parser.add_argument("--moment-block", default=None, choices=("output", "hidden"))
    parser.add_argument("--replicas", type=int, default=16)
    parser.add_argument("--n-blocks", type=int, default=8)
    parser.add_argument("--burn-tau", type=float, default=5.0)
    parser.add_argument("--sample-tau", type=float, default=40.0)
    parser.add_argument("--records-per-tau", type=float, default=20.0)
    parser.add_argument("--loss", default="cross_entropy", choices=("cross_entropy", "squared"))
    parser.add_argument("--flatness-block", default=None, help="Feng & Tu's IVFR on this block")
    parser.add_argument("--out", default=None, help="write the cell's dataset here")
    args = parser.parse_args()
    exp = ne.EXPERIMENTS["network"]
    params = {p.name: p.default for p in exp.params}
    params.update(dataset="digits", P=args.P, hidden=args.hidden, loss=args.loss,
                  weight_decay=args.chi, lr=args.lr, batch_size=args.S, replicas=args.replicas,
                  n_blocks=args.n_blocks, moment_block=args.moment_block,
                  burn_tau=args.burn_tau, sample_tau=args.sample_tau,
                  records_per_tau=args.records_per_tau, moment_modes=args.moment_modes or None,
                  max_steps=20_000_000, flatness_block=args.flatness_block)  # fmt: skip
    params = exp.derive(params)
    params["data"] = datasets.load(ne.make_data(params))
    t0 = time.perf_counter()

    def progress(line: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f} s, peak {_peak_gb():5.2f} GiB] {line}", flush=True)

    ds = exp.run_cell(params, progress)
    progress(f"cell done: status {ne.cell.STATUS[int(ds['status'])]}")
    if int(ds["status"]) == 0:
        keys = ("n_params", "rank_H", "moment_modes", "tau_slow", "tau_sampled", "sample_steps",
                "thin", "steps_per_second", "trace_sgd", "trace_sgd_se", "trace_exact",
                "trace_exact_mean", "trace_discrete", "trace_jacobian", "shift_mean",
                "elapsed_s")  # fmt: skip
        for key in keys:
            print(f"  {key} = {float(ds[key]):.6g}")
        for name in ("exact", "exact_mean", "discrete", "jacobian", "detailed"):
            err = abs(ds["eig_sgd"] / ds[f"eig_{name}"] - 1).median()
            print(f"  median |eig_sgd / eig_{name} - 1| = {float(err):.4f} over "
                  f"{ds.sizes['mode']} modes")  # fmt: skip
    else:
        print(ds.attrs.get("failure"))
    if args.out:
        ds.to_netcdf(args.out)


if __name__ == "__main__":
    main()
