"""The README's table of Feng & Tu's IVFR: psi and the kappa slope, SGD and theory, per cell.

Reads merged sweeps of model experiments whose cells measured it (setting ``flatness_block``)
and prints one markdown row per cell: the sweep, the cell's varying axes, the block, psi (SGD
+- s.e., the exact linearisation at the SGD mean and at the minimum with true profiles, and
with quadratic profiles), the kappa-vs-sigma^2 slope (SGD +- s.e., theory), the modes used of
the block's total, and the median ratio of the true to the quadratic width along the theory's
directions (1 where the profile is quadratic over the measured width).

Usage: ``python tools/feng_tu_table.py results/deep_linear.nc results/feng_tu_digits.nc ...``
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import xarray as xr

from weightdyn.models.experiment import cell_text, cells_of


def _row(sweep: str, c: xr.Dataset, text: str) -> str:
    f = {k: float(c[k]) for k in c.data_vars if k.startswith("ft_") and c[k].ndim == 0}
    ratio = np.nanmedian(c["ft_width_theory"].values / c["ft_width_quadratic"].values)
    return (
        f"| {sweep} | {text or '-'} | {c['ft_psi_sgd'].attrs.get('block', '?')} | "
        f"{f['ft_psi_sgd']:.2f} ± {f['ft_psi_sgd_se']:.2f} | {f['ft_psi_theory']:.2f} | "
        f"{f.get('ft_psi_theory_min', np.nan):.2f} | {f['ft_psi_quadratic']:.2f} | "
        f"{f['ft_slope_sgd']:.3f} ± {f['ft_slope_sgd_se']:.3f} | {f['ft_slope_theory']:.3f} | "
        f"{int(f['ft_modes_used'])} / {int(f['ft_modes_total'])} | {ratio:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="+", type=Path)
    args = parser.parse_args()
    print("| sweep | cell | block | psi SGD | psi theory (mean) | psi theory (min) | psi "
          "quadratic | slope SGD | slope theory | modes | F / F_quadratic |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path in args.sweeps:
        cells = [c for c in cells_of(xr.open_dataset(path)) if "ft_psi_sgd" in c]
        for c in cells:
            print(_row(path.stem, c, cell_text(c, cells)))


if __name__ == "__main__":
    main()
