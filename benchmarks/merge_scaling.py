"""Merge time, peak memory and file size against the number of cells: sparse vs outer product.

    python benchmarks/merge_scaling.py [--cells 100 1000 10000] [--outer-max 1000]

Each cell is a one-cell dataset like a single-layer cell: 8 scalars and 4 spectra of N = 100
modes. The cells form a sparse design, as learning-rate sweeps do: every cell has its own lr
(lr sweeps per batch size and P/N do not share values), 4 batch sizes and 5 values of P/N. The
sparse merge (`weightdyn.io.stack_cells`, what the workflow's merge rule does) stacks the cells
along `cell`; the outer-product merge it replaces (`io.expand_cell` + `io.merge_cells`, the old
merge rule) gives every axis its own dimension and fills the product of the axes' values. Both
are measured in the same run on the same cells; peak memory is the tracemalloc peak of the
merge (numpy buffers included), file size is that of the merged netCDF file. The outer product
is run only up to --outer-max cells (beyond, its size is reported from the axes, not run).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import xarray as xr

from weightdyn import io

N_MODES = 100
SCALARS = (
    "var_w_sgd",
    "var_w_sgd_se",
    "var_w_theory",
    "train_loss",
    "test_loss",
    "tau_steps",
    "diverged",
    "fluctuations_vanish",
)
SPECTRA = ("eig_M_sgd", "eig_M_sgd_se", "eig_M_lyapunov", "eig_M_discrete")
BATCH_SIZES = (1, 5, 10, 50)
RATIOS = (1.5, 2.0, 4.0, 8.0, 16.0)


def cells(n: int) -> tuple[list[xr.Dataset], list[dict]]:
    """``n`` synthetic one-cell datasets and their axis values."""
    rng = np.random.default_rng(0)
    datasets, params = [], []
    for k in range(n):
        ds = xr.Dataset(
            {name: ((), rng.random()) for name in SCALARS}
            | {name: (("mode",), np.sort(rng.random(N_MODES))[::-1]) for name in SPECTRA},
            coords={"mode": np.arange(N_MODES)},
        )
        datasets.append(ds)
        params.append(
            {
                "lr": 0.01 + 1e-4 * k,
                "batch_size": BATCH_SIZES[k % len(BATCH_SIZES)],
                "p_over_n": RATIOS[(k // len(BATCH_SIZES)) % len(RATIOS)],
            }
        )
    return datasets, params


def sparse_merge(datasets: list[xr.Dataset], params: list[dict]) -> xr.Dataset:
    coords = {key: ([p[key] for p in params], {"units": "1"}) for key in params[0]}
    return io.stack_cells(datasets, coords)


def outer_merge(datasets: list[xr.Dataset], params: list[dict]) -> xr.Dataset:
    expanded = [io.expand_cell(ds, p, list(p)) for ds, p in zip(datasets, params, strict=True)]
    return io.merge_cells(expanded)


def outer_size_gb(params: list[dict]) -> float:
    """Size of the outer-product dataset (float64) from the number of values per axis."""
    grid = np.prod([len({p[key] for p in params}) for key in params[0]])
    return 8 * grid * (len(SCALARS) + len(SPECTRA) * N_MODES) / 1e9


def measure(merge, datasets, params, folder: Path) -> tuple[float, float, float]:
    """Seconds, peak MB of the merge, and MB of the merged file."""
    tracemalloc.start()
    start = time.perf_counter()
    merged = merge(datasets, params)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    path = folder / f"{merge.__name__}_{len(datasets)}.nc"
    io.write_atomic(merged, path)
    return seconds, peak, path.stat().st_size / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--outer-max", type=int, default=1000)
    args = parser.parse_args()
    print(f"{'cells':>6} {'merge':>6} {'seconds':>8} {'us/cell':>8} {'peak MB':>8} {'file MB':>8}")
    sparse = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.cells:
            datasets, params = cells(n)
            s, peak, size = measure(sparse_merge, datasets, params, Path(tmp))
            sparse.append((n, s, peak))
            print(f"{n:>6} {'sparse':>6} {s:>8.3f} {1e6 * s / n:>8.1f} {peak:>8.1f} {size:>8.2f}")
            if n <= args.outer_max:
                s, peak, size = measure(outer_merge, datasets, params, Path(tmp))
                print(
                    f"{n:>6} {'outer':>6} {s:>8.3f} {1e6 * s / n:>8.1f} {peak:>8.1f} {size:>8.2f}"
                )
            else:
                print(
                    f"{n:>6} {'outer':>6} not run (beyond --outer-max): its grid alone holds "
                    f"{outer_size_gb(params):.1f} GB; the merge's peak is far above that"
                )
    n, s, peak = (np.array(col, dtype=float) for col in zip(*sparse, strict=True))
    if n.size > 1:
        t_exp = np.polyfit(np.log(n), np.log(s), 1)[0]
        m_exp = np.polyfit(np.log(n), np.log(peak), 1)[0]
        print(f"sparse merge: time ~ cells^{t_exp:.2f}, peak memory ~ cells^{m_exp:.2f}")


if __name__ == "__main__":
    main()
