"""Bit-identity of the redesigned single-layer experiment with the old main (issue 11).

Recomputes every ``single_layer`` cell of a config (default config/test.yaml) with the new code
(``sweep.expand_sweep`` -> the teacher-student data set -> ``run_cell``) and compares each data
variable with the old main's per-cell files, ``<baseline>/results/single_layer/theory/<cell>.nc``
(every cell) and ``.../sgd/<cell>.nc`` (SGD cells): NaN-aware ``np.array_equal`` on the values.
Prints per cell the variables that are equal, that differ (max abs diff), that the old file had and
the new lacks (removed) and that are new (added), then a summary line. SGF cells have no old
per-cell file: they are compared statistically with the old single-job block
(``results/experiments/sgf.nc``, SGD / SGF additive / SGF multiplicative in one cell, other seeds)
where the parameters match: spectra and tr M as z-scores of the difference.

Run from the repository root: ``.venv/bin/python tools/redesign_check_single_layer.py
[--config config/test.yaml] [--baseline /work/baseline]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import xarray as xr
import yaml

from weightdyn import sweep
from weightdyn.io import format_number
from weightdyn.single_layer.teacher_student import TEACHER_STUDENT

OLD_SGF = {"sgd": "SGD", "sgf_additive": "SGF additive", "sgf_multiplicative": "SGF multiplicative"}


def old_name(p: dict) -> str:
    """The old main's file stem of a cell (sweep.cell_name of the old code)."""
    f = format_number
    return (
        f"N{f(p['N'])}_P{f(p['P'])}_s{f(p['sigma_eps2'])}_d{f(p['data_seed'])}"
        f"_lr{f(p['lr'])}_S{f(p['batch_size'])}_{p['sampling']}"
    )


def compare(new: xr.Dataset, old: xr.Dataset) -> tuple[list[str], list[str], list[str]]:
    """(equal, differing with max abs diff, removed) variables of ``old`` in ``new``."""
    equal, differ, removed = [], [], []
    for name in old.data_vars:
        if name not in new:
            removed.append(str(name))
            continue
        a, b = np.asarray(new[name].values), np.asarray(old[name].values)
        if a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            equal.append(str(name))
        else:
            diff = (
                np.nanmax(np.abs(a.astype(float) - b.astype(float)))
                if a.shape == b.shape
                else "shape"
            )
            differ.append(f"{name} ({diff})")
    return equal, differ, removed


def cell_dataset(params: dict, data_cache: dict) -> xr.Dataset:
    """The new code's dataset of one cell (its data set built once per data id)."""
    from weightdyn import experiments

    exp = experiments.get("single_layer")
    key = sweep.data_id(exp, params)
    if key not in data_cache:
        data_cache[key] = TEACHER_STUDENT.load(TEACHER_STUDENT.make(params))
    return exp.run_cell({**params, "data": data_cache[key]}, lambda _: None)


def check_cell(params: dict, new: xr.Dataset, base: Path) -> tuple[int, int, int]:
    """Print the comparison of one SGD or theory-only cell; (equal, differing, missing files)."""
    stem = old_name(params)
    kinds = ["theory"] + (["sgd"] if params["dynamics"] == "sgd" else [])
    old_vars: set[str] = set()
    n_eq = n_diff = missing = 0
    for kind in kinds:
        path = base / "results" / "single_layer" / kind / f"{stem}.nc"
        if not path.exists():
            missing += 1
            continue
        with xr.open_dataset(path) as old:
            equal, differ, removed = compare(new, old.load())
            old_vars |= set(map(str, old.data_vars))
        n_eq, n_diff = n_eq + len(equal), n_diff + len(differ) + len(removed)
        print(f"  {kind}: {len(equal)} equal" + (f"; DIFFER {differ}" if differ else "")
              + (f"; REMOVED {removed}" if removed else ""))  # fmt: skip
    added = sorted(set(map(str, new.data_vars)) - old_vars)
    if missing:
        print("  no old file: a cell the old test config did not have")
    elif added:
        print(f"  added: {added}")
    return n_eq, n_diff, missing


def check_sgf(cells: list[tuple[dict, xr.Dataset]], base: Path) -> None:
    """Statistical comparison of the new SGD/SGF cells with the old sgf.nc where they match."""
    path = base / "results" / "experiments" / "sgf.nc"
    if not path.exists():
        return
    with xr.open_dataset(path) as old:
        old = old.load()
    a = old.attrs
    names = ("N", "P", "lr", "batch_size", "sigma_eps2", "sampling")
    keys = {k: a[k].item() if hasattr(a[k], "item") else a[k] for k in names}
    print(f"\nold sgf.nc ({keys}) vs the new cells with these parameters (independent seeds):")
    for params, new in cells:
        if any(params[k] != v for k, v in keys.items()) or params["dynamics"] == "none":
            continue
        ref = old.sel(simulation=OLD_SGF[params["dynamics"]])
        d = new["eig_M_sgd"].values - ref["eig_M"].values
        z = d / np.hypot(new["eig_M_sgd_se"].values, ref["eig_M_se"].values)
        tr_new, tr_old = new["eig_M_sgd"].sum().item(), ref["eig_M"].sum().item()
        print(f"  {params['dynamics']:>18} (replicas {params['replicas']}): tr M new/old - 1 = "
              f"{tr_new / tr_old - 1:+.4f}, eigenvalue z: median |z| {np.median(np.abs(z)):.2f}, "
              f"max |z| {np.max(np.abs(z)):.2f}; eps_F new {float(new['frobenius_error_eq30']):.4f}"
              f", old {float(ref['frobenius_error']):.4f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="config/test.yaml")
    parser.add_argument("--baseline", default="/work/baseline", type=Path)
    args = parser.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    sweeps = sweep.expand_sweeps(
        {
            "sweeps": {
                k: v for k, v in config["sweeps"].items() if v.get("experiment") == "single_layer"
            }
        }
    )
    seen: dict[str, dict] = {}
    for sw in sweeps.values():
        for cell in sw.cells:
            seen.setdefault(cell.id, cell.params)
    data_cache: dict = {}
    total = [0, 0, 0]
    identical = compared = new_cells = 0
    sgf_cells = []
    for cid, params in seen.items():
        new = cell_dataset(params, data_cache)
        if params["dynamics"] in ("sgd", "none"):
            print(f"{cid} (old {old_name(params)})")
            counts = check_cell(params, new, args.baseline)
            total = [t + c for t, c in zip(total, counts, strict=True)]
            compared += counts[2] == 0
            new_cells += counts[2] > 0
            identical += counts[2] == 0 and counts[1] == 0
        sgf_cells.append((params, new))
    print(f"\nSUMMARY: {len(seen)} cells; {compared} with old files, {identical} bit-identical in "
          f"every old variable; variables equal {total[0]}, differing or removed {total[1]}, "
          f"SGD/theory cells without old files (new parameters) {new_cells}")  # fmt: skip
    check_sgf(sgf_cells, args.baseline)


if __name__ == "__main__":
    main()
