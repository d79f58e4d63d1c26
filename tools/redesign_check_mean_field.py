"""Bit-identity of the redesigned mean-field experiments (paper 002, E1-E5) with the old main.

Recomputes every cell of the config's ``mf_*`` sweeps with the new code (``sweep.expand_sweep`` ->
``run_cell``), compares each data variable with the old main's per-cell file
``<baseline>/results/mean_field/<experiment>/<old cell name>.nc`` (NaN-aware ``np.array_equal`` on
the values), then summarises the sweep with the new ``summarize`` and compares it with the old
summary ``<baseline>/results/mean_field/<experiment>.nc`` the same way, and the agreement rows with
the old table ``<baseline>/results/agreement.csv`` (every field but ``figure``, now the sweep's
label). Prints per cell the variables that are equal, differ (max abs diff), were renamed
(new <- old), removed or added, and a summary line. Known differences: ``cpu_seconds`` of the E2
grid solves is a CPU time.

Renamed: the ``loss`` of the E1 reference/check cells is ``loss_inf`` and the ``loss`` of the E5
decay cell is ``loss_decay`` (in a sweep's stacked file every part shares one variable namespace:
the E1 width cells' ``loss`` is (seed, t), the E5 perturbation cells' ``loss`` (t, direction)).

Run from the repository root: ``.venv/bin/python tools/redesign_check_mean_field.py
[--config config/test.yaml] [--baseline /work/baseline]`` (without mean-field sweeps in the config
it falls back to /work/frag/mean_field.test.yaml).
"""

from __future__ import annotations

import argparse
import csv
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import yaml

from weightdyn import experiments, sweep
from weightdyn.io import format_number

FRAGMENT = "/work/frag/mean_field.test.yaml"
OLD_EXPERIMENT = {
    "mf_width": "width",
    "mf_pde": "pde",
    "mf_small_output": "small_output",
    "mf_gaussian": "gaussian",
    "mf_linearisation": "linearisation",
}
RENAMED = {  # (experiment, part) -> {new name: old name}
    ("mf_width", "reference"): {"loss_inf": "loss"},
    ("mf_width", "check"): {"loss_inf": "loss"},
    ("mf_linearisation", "decay"): {"loss_decay": "loss"},
}
TIMINGS = {"cpu_seconds"}  # CPU times: never bit-identical


def old_name(experiment: str, p: Mapping[str, Any]) -> str:
    """The old main's file stem of a cell (the ``name`` of the old ``cells(block)``)."""
    part, f = p["part"], format_number
    if experiment == "mf_width":
        if part == "width":
            return f"N{p['N']}_seeds{p['seeds']}"
        if part in ("reference", "check"):
            return f"reference_P{p['points']}"
        return f"energy_N{p['energy']['N']}_seeds{p['energy']['seeds']}"
    if experiment == "mf_pde":
        if part == "grid":
            return f"{p['scheme']}_n{p['grid']}"
        if part == "particles":
            return f"particles_N{p['N']}_seeds{p['particles_seeds']}"
        return "reference"
    if experiment == "mf_small_output":
        return f"eps{f(p['eps'])}" if part == "eps" else f"w0{f(p['w0_scale'])}"
    if experiment == "mf_gaussian":
        return f"s{f(p['s'])}" if part == "cloud" else f"stationary_s{f(p['stationary_s'])}"
    if part == "decay":
        return f"decay_N{p['particles']}"
    return f"delta_{p['delta']:g}" if part == "perturb" else f"grid_n{p['grid_size']}"


def compare(new: xr.Dataset, old: xr.Dataset, renamed: Mapping[str, str]) -> dict[str, list]:
    """Data variables of ``old`` found equal / differing / renamed / removed in ``new``; added."""
    out: dict[str, list] = {k: [] for k in ("equal", "differ", "renamed", "removed", "added")}
    back = {old_: new_ for new_, old_ in renamed.items()}
    for name in old.data_vars:
        here = back.get(str(name), str(name))
        if here not in new:
            out["removed"].append(str(name))
            continue
        a, b = np.asarray(new[here].values), np.asarray(old[name].values)
        same = a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        if same:
            out["renamed" if here != name else "equal"].append(
                f"{here} <- {name}" if here != name else str(name)
            )
        else:
            diff = np.nanmax(np.abs(a - b)) if a.shape == b.shape else f"shape {a.shape}"
            tag = " [CPU time]" if name in TIMINGS else ""
            out["differ"].append(f"{here} ({diff}){tag}")
    known = {back.get(str(n), str(n)) for n in old.data_vars}
    out["added"] = [str(n) for n in new.data_vars if str(n) not in known]
    return out


def report(title: str, result: dict[str, list], totals: dict[str, int]) -> None:
    print(f"  {title}")
    for key in ("equal", "renamed", "differ", "removed", "added"):
        if result[key]:
            print(f"    {key:8s} {len(result[key]):3d}: {', '.join(result[key])}")
        totals[key] += len(result[key])
    bad = [d for d in result["differ"] if not d.endswith("[CPU time]")] + result["removed"]
    totals["files_bad"] += bool(bad)
    totals["files"] += 1


def check_sweep(name: str, block: Mapping[str, Any], base: Path, totals: dict[str, int]) -> None:
    """Every cell of one sweep and its summary against the old main's files."""
    s = sweep.expand_sweep(name, block)
    exp = experiments.get(s.experiment)
    folder = base / "results" / "mean_field" / OLD_EXPERIMENT[s.experiment]
    print(f"sweep {name} ({s.experiment}, {len(s.cells)} cells)")
    datasets = []
    for cell in s.cells:
        start = time.perf_counter()
        ds = exp.run_cell(cell.params, lambda _msg: None)
        datasets.append(ds)
        stem = old_name(s.experiment, cell.params)
        with xr.open_dataset(folder / f"{stem}.nc") as old:
            result = compare(ds, old.load(), RENAMED.get((s.experiment, cell.params["part"]), {}))
        report(f"{cell.id} <- {stem}.nc ({time.perf_counter() - start:.1f} s)", result, totals)
    summary = exp.summarize(datasets, [c.params for c in s.cells], s.settings)
    with xr.open_dataset(folder.with_suffix(".nc")) as old:
        report(f"summary <- {folder.name}.nc", compare(summary, old.load(), {}), totals)
    rows = exp.agreement(summary, s.label)
    same = compare_rows(rows, old_rows(base, OLD_EXPERIMENT[s.experiment]))
    print(f"  agreement: {len(rows)} rows, {same} identical to the old table's rows (figure aside)")
    totals["rows"] += len(rows)
    totals["rows_same"] += same


FIELDS = ("compared", "equations", "points", "mean_rel_dev", "mean_rel_dev_se", "max_abs_rel_dev",
          "max_abs_z", "worst_point")  # fmt: skip


def old_rows(base: Path, old: str) -> list[dict[str, str]]:
    """The old agreement table's paper-002 rows of experiment ``old`` (figure ``<old>_*``)."""
    with (base / "results" / "agreement.csv").open() as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if r["paper"] == "002" and r["figure"].startswith(f"{old}_")]


def compare_rows(rows: list, old: list[dict[str, str]]) -> int:
    """How many new rows equal the old row in the same place (every field but ``figure``)."""
    same = 0
    for new, ref in zip(rows, old, strict=False):
        values = [str(getattr(new, key)) for key in FIELDS]
        same += values == [ref[key] for key in FIELDS]
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/test.yaml")
    parser.add_argument("--baseline", default="/work/baseline")
    parser.add_argument("--sweep", action="append", help="only these sweeps (repeatable)")
    args = parser.parse_args()
    config = yaml.safe_load(Path(args.config).read_text()) or {}
    blocks = {
        n: b
        for n, b in (config.get("sweeps") or {}).items()
        if str(b.get("experiment", "")).startswith("mf_")
    }
    if not blocks:
        print(f"{args.config} has no mean-field sweeps; using {FRAGMENT}")
        blocks = yaml.safe_load(Path(FRAGMENT).read_text())["sweeps"]
    totals = dict.fromkeys(
        (
            "files",
            "files_bad",
            "equal",
            "renamed",
            "differ",
            "removed",
            "added",
            "rows",
            "rows_same",
        ),
        0,
    )
    for name, block in blocks.items():
        if args.sweep is None or name in args.sweep:
            check_sweep(name, block, Path(args.baseline), totals)
    print(
        f"SUMMARY: {totals['files']} files compared ({totals['files'] - totals['files_bad']} "
        f"bit-identical apart from CPU times); variables: {totals['equal']} equal, "
        f"{totals['renamed']} renamed and equal, {totals['differ']} differ, {totals['removed']} "
        f"removed, {totals['added']} added; agreement rows: {totals['rows_same']} of "
        f"{totals['rows']} identical to the old table"
    )


if __name__ == "__main__":
    main()
