"""Bit-identity of two runs' cell, data-set and merged files (behaviour kept across a redesign).

Compares every ``results/cells/<experiment>/<cell>.nc``, ``results/data/<set>/<id>.nc`` and
merged ``results/<sweep>[.summary].nc`` that both run folders hold: the same data variables and
coordinates, each equal value for value (NaN-aware ``np.array_equal``). Attributes are not
compared: the history, git revision and creation time differ by design; neither are the run-time
measurements a cell stores (``--timing``: elapsed_s, cpu_seconds, steps_per_second), which no two
runs share. Prints one line per file that differs (its variables, max abs difference), the files
only one run has, and a summary per experiment.

Usage: ``.venv/bin/python tools/compare_cell_files.py OLD_RUN NEW_RUN`` (folders holding
``results/``, e.g. two ``benchmarks/sweep_cost.py --keep`` folders).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np
import xarray as xr

TIMING = ("elapsed_s", "cpu_seconds", "steps_per_second")


def differences(old: xr.Dataset, new: xr.Dataset, timing: tuple[str, ...] = TIMING) -> list[str]:
    """What differs between two datasets' variables and coordinates (empty: identical), the
    ``timing`` variables aside."""
    out = []
    names_old = set(old.variables) - set(timing)
    names_new = set(new.variables) - set(timing)
    out += [f"{name}: only in the old file" for name in sorted(names_old - names_new)]
    out += [f"{name}: only in the new file" for name in sorted(names_new - names_old)]
    for name in sorted(names_old & names_new):
        a, b = old[name].values, new[name].values
        if a.shape != b.shape:
            out.append(f"{name}: shape {a.shape} -> {b.shape}")
        elif not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            diff = np.nanmax(np.abs(a - b)) if a.dtype.kind in "fc" else "values"
            out.append(f"{name}: max abs diff {diff}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--timing", default=",".join(TIMING), help="variables not compared")
    args = parser.parse_args()
    timing = tuple(name for name in args.timing.split(",") if name)
    files = {}
    for run in (args.old, args.new):
        root = run / "results"
        found = [*root.glob("cells/*/*.nc"), *root.glob("data/*/*.nc"), *root.glob("*.nc")]
        files[run] = {p.relative_to(root) for p in found}
    both = sorted(files[args.old] & files[args.new])
    same, differ = Counter(), Counter()
    for rel in both:
        with (
            xr.open_dataset(args.old / "results" / rel) as a,
            xr.open_dataset(args.new / "results" / rel) as b,
        ):
            found = differences(a.load(), b.load(), timing)
        kind = f"{rel.parts[0]}/{rel.parts[1]}" if len(rel.parts) > 1 else "merged"
        if found:
            differ[kind] += 1
            print(f"DIFFERS {rel}: {'; '.join(found)}")
        else:
            same[kind] += 1
    for run, other in ((args.old, args.new), (args.new, args.old)):
        only = sorted(files[run] - files[other])
        print(f"{len(only)} files only in {run}" + (f", e.g. {only[0]}" if only else ""))
    for kind in sorted(same | differ):
        print(f"{kind}: {same[kind]} identical, {differ[kind]} differ")
    print(f"total: {sum(same.values())} identical, {sum(differ.values())} differ")


if __name__ == "__main__":
    main()
