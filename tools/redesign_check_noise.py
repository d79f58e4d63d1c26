"""Bit-identity of the noise experiments (paper 000 Figs. 1-2) with the old main's results.

Recomputes every cell of the noise sweeps of a new-dialect config (default the fragment
/work/frag/noise.test.yaml, the translation of the old config/test.yaml `noise:` blocks) with the
new registry code, round-trips it through netCDF as the workflow does, and compares every data
variable with the old per-cell file under <baseline>/results/noise/ and with the old merged files
results/noise_{projector,k_diagonal,spectrum}.nc (the hessian_basis summary with the old
results/noise/hessian_basis.nc). Comparison is NaN-aware `np.array_equal` after squeezing the old
length-1 N, P dimensions (merged files: after selecting the cell's N, P, sampling and padding both
sides with NaN to a common shape).

    .venv/bin/python tools/redesign_check_noise.py [config.yaml] [--baseline /work/baseline]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr
import yaml

from weightdyn import experiments, io, sweep
from weightdyn.io import format_number as f

#: old variables that became the merged dataset's axis coordinate of the same name
MOVED = {"sigma_eps2"}
#: new variables with a reason
ADDED = {"interpolating": "flag of P <= N cells (the old code skipped them)"}


def old_cell_path(root: Path, experiment: str, p: dict) -> Path | None:
    """The old per-cell file of a new cell (None for hessian_basis, a single old job)."""
    data = f"N{f(p['N'])}_P{f(p['P'])}"
    if experiment == "projector":
        return root / "noise/projector" / f"{data}.nc"
    data += f"_s{f(p['sigma_eps2'])}_d{f(p['data_seed'])}"
    if experiment == "k_diagonal":
        return root / "noise/k_diagonal" / f"{data}.nc"
    if experiment == "noise_spectrum":
        return root / "noise/spectrum" / f"{data}_S{f(p['batch_size'])}_{p['sampling']}.nc"
    return None


OLD_MERGED = {"projector": "noise_projector.nc", "k_diagonal": "noise_k_diagonal.nc",
              "noise_spectrum": "noise_spectrum.nc"}  # fmt: skip


def equal(a: np.ndarray, b: np.ndarray) -> tuple[bool, float]:
    """NaN-aware equality after NaN-padding both to a common shape; max |a - b|."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != b.ndim:
        return False, np.inf
    shape = tuple(max(x, y) for x, y in zip(a.shape, b.shape, strict=True))
    pa, pb = (np.full(shape, np.nan), np.full(shape, np.nan))
    pa[tuple(slice(0, n) for n in a.shape)] = a
    pb[tuple(slice(0, n) for n in b.shape)] = b
    same = np.array_equal(pa, pb, equal_nan=True)
    both = np.isfinite(pa) & np.isfinite(pb)
    diff = float(np.max(np.abs(pa - pb)[both], initial=0.0))
    return same, (0.0 if same else diff if both.any() else np.inf)


def compare(old: xr.Dataset, new: xr.Dataset, params: dict) -> dict[str, list[str]]:
    """Per-variable verdicts of one cell: equal, differ (max abs diff), moved, added, removed."""
    out: dict[str, list[str]] = {"equal": [], "differ": [], "moved": [], "added": [], "removed": []}
    for name in old.data_vars:
        if name in MOVED and name not in new.data_vars:
            same, _ = equal(old[name].values.ravel(), np.asarray([params[name]]))
            out["moved" if same else "differ"].append(f"{name} -> coordinate")
        elif name not in new.data_vars:
            out["removed"].append(name)
        else:
            same, diff = equal(old[name].values, new[name].values)
            out["equal" if same else "differ"].append(name if same else f"{name} ({diff:.3g})")
    for name in new.data_vars:
        if name in old.coords and name not in old.indexes:  # an old scalar coordinate
            same, _ = equal(old[name].values, new[name].values)
            out["moved" if same else "differ"].append(f"{name} <- coordinate")
        elif name not in old.data_vars:
            out["added"].append(f"{name} ({ADDED.get(name, 'no reason')})")
    return out


def squeezed(ds: xr.Dataset, sel: dict) -> xr.Dataset:
    """The old dataset at one cell (N, P, sampling selected; length-1 dims dropped)."""
    ds = ds.sel({k: v for k, v in sel.items() if k in ds.dims})
    ds = ds.squeeze([d for d in ("N", "P") if d in ds.dims])
    return ds.drop_vars(["N", "P", "sampling"], errors="ignore")


def roundtrip(ds: xr.Dataset, tmp: Path, name: str) -> xr.Dataset:
    path = tmp / f"{name}.nc"
    io.write_atomic(ds, path)
    with xr.open_dataset(path) as back:
        return back.load()


def run_sweep(sw: sweep.Sweep, tmp: Path) -> list[xr.Dataset]:
    exp = experiments.get(sw.experiment)
    cells = []
    for cell in sw.cells:
        params = dict(cell.params)
        if exp.data is not None:
            data = roundtrip(exp.data.make(params), tmp, f"data_{sweep.data_id(exp, params)}")
            params["data"] = exp.data.load(data)
        cells.append(roundtrip(exp.run_cell(params, lambda _: None), tmp, cell.id))
    return cells


def merged(sw: sweep.Sweep, cells: list[xr.Dataset]) -> xr.Dataset:
    exp = experiments.get(sw.experiment)
    coords = {p.name: ([c.params[p.name] for c in sw.cells], p.attrs()) for p in exp.axes}
    return io.stack_cells(cells, coords)


def report(label: str, verdict: dict[str, list[str]], totals: dict[str, int]) -> None:
    parts = [f"{k} {v}" for k, v in verdict.items() if v]
    print(f"  {label}: " + "; ".join(parts))
    for key, names in verdict.items():
        totals[key] += len(names)


def check_sweep(sw: sweep.Sweep, root: Path, tmp: Path, totals: dict[str, int]) -> None:
    cells = run_sweep(sw, tmp)
    print(f"sweep {sw.name} ({sw.experiment}, {len(cells)} cells)")
    if sw.experiment == "hessian_basis":
        exp = experiments.get(sw.experiment)
        summary = exp.summarize(cells, [c.params for c in sw.cells], sw.settings)
        with xr.open_dataset(root / "noise/hessian_basis.nc") as old:
            old = old.load()
        group = summary.isel(group=0).drop_vars(list(summary.coords))
        report("summary vs noise/hessian_basis.nc", compare(squeezed(old, {}), group, {}), totals)
        totals["cells"] += 1
        return
    with xr.open_dataset(root / OLD_MERGED[sw.experiment]) as old_merged:
        old_merged = old_merged.load()
    stack = merged(sw, cells)
    for k, (cell, ds) in enumerate(zip(sw.cells, cells, strict=True)):
        path = old_cell_path(root, sw.experiment, cell.params)
        if not path.exists():
            flag = int(ds["interpolating"]) if "interpolating" in ds else "?"
            print(f"  {cell.id}: no old file (new cell; interpolating = {flag})")
            totals["new_cells"] += 1
            continue
        with xr.open_dataset(path) as old:
            old = old.load()
        where = {key: cell.params[key] for key in ("N", "P", "sampling") if key in cell.params}
        report(cell.id, compare(squeezed(old, where), ds, cell.params), totals)
        row = stack.isel(cell=k)
        report(f"  merged {OLD_MERGED[sw.experiment]}",
               compare(squeezed(old_merged, where), row, cell.params), totals)  # fmt: skip
        totals["cells"] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="/work/frag/noise.test.yaml")
    parser.add_argument("--baseline", default="/work/baseline")
    args = parser.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    sweeps = sweep.expand_sweeps(config)
    root = Path(args.baseline) / "results"
    totals = dict.fromkeys(
        ("cells", "new_cells", "equal", "differ", "moved", "added", "removed"), 0
    )
    with tempfile.TemporaryDirectory() as tmp:
        for sw in sweeps.values():
            check_sweep(sw, root, Path(tmp), totals)
    print(
        f"SUMMARY: {totals['cells']} old cells compared ({totals['new_cells']} new cells), "
        f"variables: {totals['equal']} equal, {totals['differ']} differ, {totals['moved']} moved "
        f"to coordinates, {totals['added']} added, {totals['removed']} removed"
    )


if __name__ == "__main__":
    main()
