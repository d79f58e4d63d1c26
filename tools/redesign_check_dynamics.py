"""Bit-identity of the redesigned dynamics experiments with the old main (issue 11).

Recomputes the cells of the sweeps named ``relaxation``, ``perturbation_iid``,
``perturbation_correlated``, ``table1`` and ``gbm`` of a config (default config/test.yaml) with
the new code (``sweep.expand_sweep`` -> data set -> ``run_cell``) and compares them with the old
main's single-job outputs ``<baseline>/results/experiments/``: ``relaxation.nc``,
``perturbation_iid.nc``, ``perturbation_correlated.nc`` (one cell each), ``gbm.nc`` (all learning
rates in one dataset: compared cell by cell) and ``table1.md`` (the old markdown rows, rebuilt
from the new cells' numbers and compared as text). Data variables and coordinates are compared
with NaN-aware ``np.array_equal``; per cell the script prints the variables that are equal, that
differ (max abs diff), that the old file had and the new lacks (removed) and that are new (added).

The gbm cells have new seeds (the old stream ran through all learning rates of the block in turn,
so a cell depended on the other cells): they are expected to differ, and the script also replays
the old stream through the unchanged ``multiplicative.gbm_dataset`` the new cells call, which must
reproduce ``gbm.nc`` bit for bit.

Run from the repository root: ``.venv/bin/python tools/redesign_check_dynamics.py
[--config config/test.yaml] [--baseline /work/baseline]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import xarray as xr
import yaml

from weightdyn import experiments, seeds, sweep
from weightdyn.single_layer import multiplicative

SWEEPS = ("relaxation", "perturbation_iid", "perturbation_correlated", "table1", "gbm")
#: old name -> new name (issue 12: the relaxation's time dimension is ``t``, as CF checkers want)
RENAMED = {"time": "t"}


def _variables(ds: xr.Dataset) -> dict[str, xr.Variable]:
    return {str(k): v for k, v in ds.variables.items()}


def compare(new: xr.Dataset, old: xr.Dataset) -> dict[str, list[str]]:
    """Equal, differing (with max abs diff), removed and added variables and coordinates."""
    a_vars, b_vars = _variables(new), _variables(old)
    b_vars = {RENAMED.get(k, k) if RENAMED.get(k) in a_vars else k: v for k, v in b_vars.items()}
    out: dict[str, list[str]] = {"equal": [], "differ": [], "removed": [], "added": []}
    for name, b in b_vars.items():
        if name not in a_vars:
            out["removed"].append(name)
            continue
        a, b = np.asarray(a_vars[name].values), np.asarray(b.values)
        numeric = a.dtype.kind in "fiub" and b.dtype.kind in "fiub"
        floats = numeric and "f" in a.dtype.kind + b.dtype.kind
        if a.shape == b.shape and np.array_equal(a, b, equal_nan=floats):
            out["equal"].append(name)
        elif a.shape == b.shape and numeric:
            out["differ"].append(f"{name} ({np.nanmax(np.abs(a - b.astype(float))):.3g})")
        else:
            out["differ"].append(f"{name} (shape {a.shape} vs {b.shape})")
    out["added"] = [name for name in a_vars if name not in b_vars]
    return out


def report(title: str, result: dict[str, list[str]]) -> dict[str, int]:
    print(f"== {title}")
    for key in ("equal", "differ", "removed", "added"):
        print(f"   {key} ({len(result[key])}): {', '.join(result[key]) or '-'}")
    return {key: len(values) for key, values in result.items()}


def run_cells(name: str, block: dict) -> list[tuple[dict, xr.Dataset]]:
    """The new code's (params, dataset) of every cell of one sweep."""
    expanded = sweep.expand_sweep(name, block)
    exp = experiments.get(expanded.experiment)
    out = []
    for cell in expanded.cells:
        params = dict(cell.params)
        if exp.data is not None:
            params["data"] = exp.data.load(exp.data.make(params))
        out.append((cell.params, exp.run_cell(params, lambda _: None)))
    return out


def _fmt(value: float) -> str:
    return "0" if value == 0 else f"{value:.3g}"


def table1_line(p: dict, ds: xr.Dataset) -> str:
    """The old table1.md row of one cell, from the new cell's numbers."""
    from weightdyn.single_layer.perturbation import TABLE1_PAPER

    regime = "over" if int(ds["overparameterised"]) else "under"
    paper = TABLE1_PAPER[regime]
    ok = all(int(ds[f"agrees_{k}"]) for k in ("student", "loss", "fluctuations"))
    names = ("student_teacher_dist", "train_loss", "train_loss_theory", "var_w", "var_w_theory")
    v = {k: float(ds[k]) for k in names}
    return (
        f"| {regime}-parameterised | {p['N']} | {p['P']} | {_fmt(p['sigma_eps2'])} | "
        f"{_fmt(v['student_teacher_dist'])} | {paper['student']} | "
        f"{_fmt(v['train_loss'])} ({_fmt(v['train_loss_theory'])}) | {paper['loss']} | "
        f"{_fmt(v['var_w'])} ({_fmt(v['var_w_theory'])}) | {paper['fluctuations']} | "
        f"{'yes' if ok else 'NO'} |"
    )


def check_table1(cells: list[tuple[dict, xr.Dataset]], old_md: Path) -> list[dict[str, int]]:
    """One count per old table1.md row: the row rebuilt from the new cell, equal as text?"""
    old = [line for line in old_md.read_text().splitlines() if line.startswith("| ")][1:]
    new = [table1_line(p, ds) for p, ds in cells]
    same = [a == b for a, b in zip(new, old, strict=True)]
    print(f"== table1: {sum(same)} of {len(old)} rows of {old_md.name} reproduced as text")
    for a, b, ok in zip(new, old, same, strict=True):
        if not ok:
            print(f"   new: {a}\n   old: {b}")
    return [{"equal": int(ok), "differ": int(not ok), "removed": 0, "added": 0} for ok in same]


def check_gbm(
    cells: list[tuple[dict, xr.Dataset]], old: xr.Dataset, old_block: dict
) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """New cells vs gbm.nc per lr (new seeds: expected to differ), and the old stream replayed
    through ``multiplicative.gbm_dataset`` (must be equal)."""
    new = []
    for p, ds in cells:
        ref = old.sel(lr=p["lr"]).dropna("t", how="all").drop_vars("lr")
        new.append(report(f"gbm lr={p['lr']:g} (new seeds: differ expected)", compare(ds, ref)))
    rng = seeds.generator("gbm", old_block)
    x = rng.normal(0.0, 1.0, size=int(old_block["P"]))
    replayed = []
    for lr in old_block["lr"]:
        replay = multiplicative.gbm_dataset(
            x,
            float(old_block["wbar0"]),
            float(lr),
            int(old_block["batch_size"]),
            np.asarray(old_block["times"], dtype=float),
            int(old_block["replicas"]),
            rng,
        )
        ref = old.sel(lr=lr).dropna("t", how="all").drop_vars("lr")
        replayed.append(report(f"gbm lr={lr:g}, old stream replayed", compare(replay, ref)))
    return new, replayed


def _summary(label: str, totals: list[dict[str, int]]) -> None:
    keys = ("equal", "differ", "removed", "added")
    counts = ", ".join(f"{sum(t[k] for t in totals)} {k}" for k in keys)
    print(f"SUMMARY {label} ({len(totals)} cells): {counts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/test.yaml")
    parser.add_argument("--baseline", default="/work/baseline")
    args = parser.parse_args()
    base = Path(args.baseline)
    old_dir = base / "results" / "experiments"
    blocks = yaml.safe_load(Path(args.config).read_text())["sweeps"]
    totals, gbm_new, gbm_replay = [], [], []
    for name in SWEEPS:
        cells = run_cells(name, blocks[name])
        if name == "table1":
            totals += check_table1(cells, old_dir / "table1.md")
        elif name == "gbm":
            old_block = yaml.safe_load((base / "config" / "test.yaml").read_text())["gbm"]
            with xr.open_dataset(old_dir / "gbm.nc") as old:
                gbm_new, gbm_replay = check_gbm(cells, old.load(), old_block)
        else:
            ((params, ds),) = cells
            exp = experiments.get(blocks[name]["experiment"])
            with xr.open_dataset(old_dir / f"{name}.nc") as old:
                totals.append(
                    report(f"{name} {sweep.cell_id(exp, params)}", compare(ds, old.load()))
                )
    _summary(
        "relaxation, perturbation_iid, perturbation_correlated (variables), table1 (rows)", totals
    )
    _summary("gbm, new seeds", gbm_new)
    _summary("gbm, old stream replayed through the new code's gbm_dataset", gbm_replay)


if __name__ == "__main__":
    main()
