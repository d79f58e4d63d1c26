"""Bit-identity of the redesigned two-layer experiment against the old main's test-config cells.

Usage (from the repository root)::

    .venv/bin/python tools/redesign_check_two_layer.py [--config FILE] [--baseline DIR]

Expands the two-layer sweeps of ``--config`` (default /work/frag/two_layer.test.yaml, the new
dialect of the old config/test.yaml block) through the registry, recomputes every cell with
``run_cell`` and compares each data variable with the old main's file
``<baseline>/<old cell name>.nc`` (NaN-aware ``np.array_equal``). Prints per cell the variables
that are equal, differ (max abs difference), were added or removed, and a summary line. Cells of
a new axis value (``dynamics = sgf``) have no old file and are listed as new. ``elapsed_s`` is
wall time and is expected to differ.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import xarray as xr
import yaml

from weightdyn import experiments, sweep
from weightdyn.io import format_number

EXPECTED_DIFFERENT = {"elapsed_s": "wall time of the cell"}
ADDED = {"diverged": "new flag of the divergence path (run_cell no longer raises)"}


def old_name(p: dict) -> str:
    """The old main's file stem of a cell (``sweep.two_layer_name`` of the old main)."""
    f = format_number
    return (
        f"Ni{f(p['N_i'])}_Nh{f(p['N_h'])}_No{f(p['N_o'])}_P{f(p['P'])}"
        f"_s{f(p['sigma_y2'])}_{p['init']}{f(p['init_scale'])}_lr{f(p['lr'])}"
        f"_S{f(p['batch_size'])}_{p['sampling']}_d{f(p['data_seed'])}"
    )


def compare(new: xr.Dataset, old: xr.Dataset) -> tuple[list[str], dict[str, float], list, list]:
    """Equal variables and coordinates, differing ones (max abs diff), added and removed
    data variables."""
    equal, differ = [], {}
    for name in [*old.data_vars, *old.coords]:
        if name not in new.variables:
            continue
        a, b = np.asarray(new[name].values), np.asarray(old[name].values)
        if a.shape == b.shape and np.array_equal(a, b, equal_nan=True):
            equal.append(name)
        else:
            diff = np.abs(a - b) if a.shape == b.shape else np.array([np.inf])
            differ[name] = float(np.nanmax(diff)) if np.isfinite(diff).any() else np.nan
    added = sorted(set(new.data_vars) - set(old.data_vars))
    removed = sorted(set(old.data_vars) - set(new.data_vars))
    return equal, differ, added, removed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="/work/frag/two_layer.test.yaml")
    ap.add_argument("--baseline", default="/work/baseline/results/two_layer")
    args = ap.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    exp = experiments.get("two_layer")
    totals = {"cells": 0, "identical": 0, "new": 0, "vars_equal": 0, "vars_differ": 0}
    for s in sweep.expand_sweeps(config).values():
        if s.experiment != "two_layer":
            continue
        for cell in s.cells:
            p = cell.params
            path = Path(args.baseline) / f"{old_name(p)}.nc"
            if p["dynamics"] != "sgd" or not path.exists():
                print(f"{cell.id}: new cell (dynamics={p['dynamics']}), no old file")
                totals["new"] += 1
                continue
            new = exp.run_cell(p, lambda _msg: None)
            with xr.open_dataset(path) as ds:
                old = ds.load()
            equal, differ, added, removed = compare(new, old)
            unexpected = {k: v for k, v in differ.items() if k not in EXPECTED_DIFFERENT}
            totals["cells"] += 1
            totals["identical"] += not unexpected and not removed
            totals["vars_equal"] += len(equal)
            totals["vars_differ"] += len(unexpected)
            print(f"{cell.id} vs {path.name}:")
            print(f"  equal ({len(equal)}): {', '.join(equal)}")
            for k, v in differ.items():
                why = EXPECTED_DIFFERENT.get(k, "UNEXPECTED")
                print(f"  differ: {k} (max abs diff {v:.3g}; {why})")
            for k in added:
                print(f"  added: {k} ({ADDED.get(k, 'UNEXPECTED')})")
            for k in removed:
                print(f"  removed: {k} (UNEXPECTED)")
    print(
        f"summary: {totals['identical']}/{totals['cells']} old cells bit-identical "
        f"({totals['vars_equal']} variables equal, {totals['vars_differ']} differ beyond "
        f"{sorted(EXPECTED_DIFFERENT)}); {totals['new']} new cells without an old file"
    )
    return 0 if totals["identical"] == totals["cells"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
