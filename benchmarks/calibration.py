"""Calibration of the simulations' error bars against the exact theory, over finished sweeps.

Usage::

    python benchmarks/calibration.py [--cells] [--csv FILE] [LABEL=]RESULTS [[LABEL=]RESULTS ...]
    python benchmarks/calibration.py --compare [LABEL=]RUN_A [LABEL=]RUN_B [--match id|params]

``RESULTS`` is a results folder of a Snakemake run (``results/`` or the folder holding it), or
one netCDF file (a per-cell file ``results/cells/<experiment>/<cell>.nc`` or a merged sweep
``results/<sweep>.nc``). A folder is read in full: first its per-cell files of the
``single_layer`` and ``two_layer`` experiments, then its merged sweeps (``*.summary.nc`` and
other experiments are skipped); a cell met twice (same ``cell_id``: file stem or the merge's
``cell_id`` coordinate) counts once. ``LABEL`` names the run (default: the folder's name, or its
parent's where the folder is ``results``).

For every cell and every mode, ``z = (simulation - theory) / s.e.`` with the simulation's own
(jackknife) standard error; the theory carries no error. What is compared:

* ``single_layer`` (:mod:`weightdyn.single_layer.stationary_experiment`): ``eig_M_sgd`` +-
  ``eig_M_sgd_se`` (sorted eigenvalues of the second moment of ``w - w*``) against the exact fixed
  point of the cell's chain (``_exact`` there: ``eig_M_discrete`` for SGD and for multiplicative
  SGF at ``dt = lr``, ``eig_M_euler`` for additive SGF), and ``trace_M_sgd`` +- ``trace_M_sgd_se``
  against the sum of those eigenvalues (= ``trace_M_discrete`` / ``trace_M_euler``). Cells are
  left out where the theory is invalid: theory only (``dynamics: none``), ``diverged``, no
  stationary state (``second_moment_radius >= 1``; additive SGF: no Euler fixed point;
  multiplicative SGF: ``dt != lr``), ``N >= P`` (nothing fluctuates, Eq. 16), or no finite s.e.
* ``two_layer`` (:mod:`weightdyn.two_layer.cell_dataset`): there is no exact discrete-time
  theory. The most exact one the cells hold is the linearisation at the local point (protocol b,
  Eqs. 62-66, a continuous-time Lyapunov equation), which the agreement rows also use for
  ``cov(vec dW1)``: ``eig_cov1_sgd_b`` / ``eig_cov2_sgd_b`` (+- ``*_se``) against
  ``eig_cov1_exact_local`` / ``eig_cov2_exact_local`` (the two blocks pooled as one cell's
  modes; the zero modes beyond the drift's rank, theory 0, are left out), and ``trace_M_sgd``
  (+- ``trace_M_sgd_se``) against ``trace_M_exact_local``. Its O(lr) discretisation error is a
  real bias, so these rows test the theory as much as the error bars. Diverged cells are left
  out.

Diagonal elements of the simulated covariance in the theory's eigenbasis would avoid the bias of
sorted eigenvalues, but the cells store spectra only (no matrices, no eigenvectors); the trace
is the bias-free quantity they hold.

What is printed, one table per quantity (eigenvalues, trace), one row per group (``LABEL`` x
experiment x precision x dynamics; precision is the cell's ``precision`` coordinate, variable or
attribute (also ``cell_precision``, ``setting_precision``), else "float64"; no cell of the
workflow records one yet): the number of cells and of z values, the mean z with two standard
errors (``se_iid``: sd/sqrt(n), treating every z as independent; ``se_cell``: cluster-robust over
cells, the honest one for eigenvalues of one matrix), the standard deviation of z, the fraction
with ``|z| > 3``, and ``ok`` where ``|mean z| <= 0.2`` (the issue's target). Then the cells left
out, by reason. ``--cells`` adds one row per cell (modes, mean and sd of its z, max |z|, trace
z); ``--csv FILE`` writes every z (one row per cell and mode, and per trace).

Which estimator the targets refer to: a calibrated, unbiased estimator gives mean z ~ 0, sd z ~
1 and ``|z| > 3`` for ~0.3 % (a little more for a jackknife over G groups: z is then roughly
Student-t with G - 1 degrees of freedom, sd sqrt((G-1)/(G-3)), e.g. 1.07 and ~0.9 % at the test
config's G = 8 replicas x 2 blocks = 16). That holds for the *trace* (a linear function of the
sampled second moment). ``eig_M_sgd`` are the sorted eigenvalues of the mean of the G group
matrices: sorting a noisy matrix's spectrum repels its eigenvalues (the top ones biased up, the
bottom ones down, by ~ s.e.^2 / gap), so their sd z and ``|z| > 3`` fraction exceed the targets
where the gaps are comparable to the errors. The biases sum to zero over the modes (their sum is
the trace), but each z divides its bias by its own s.e. (which grows with the eigenvalue), so
even the eigenvalues' mean z need not vanish. The targets "|mean z|
<= 0.2, sd ~ 1, |z| > 3 rare" therefore apply strictly to the trace rows; the eigenvalue rows
show how far sorting moves them.

``--compare A B``: the cells of run A matched to those of run B (``--match id``: by ``cell_id``,
the default; ``--match params``: by the cell id without its ``__<hash>`` suffix, i.e. by the
sweep axes, for runs whose settings differ; ambiguous keys are dropped). Per matched cell: its
mean eigenvalue z in A and B, the shift B - A, its spread ``sqrt(sd_A^2/n_A + sd_B^2/n_B)`` (sd of
z within each cell over its n modes; approximate, the modes of one matrix are correlated), and
``dtr``: the trace difference over its own error, ``(tr_B - tr_A) / sqrt(se_A^2 + se_B^2)``
(the s.e. of the difference, exact for independent runs). A cell is flagged (``!``) where
``|shift| > 3 spread`` or ``|dtr| > 3``. Two runs with the same seeds and settings give the same
numbers (shift 0).

Example (the test config, single-layer SGD sweeps)::

    cp -r Snakefile workflow scripts config profiles /tmp/run && cd /tmp/run
    snakemake --cores 2 --configfile config/test.yaml -- results/fig4a.nc results/lr_S5.nc
    python benchmarks/calibration.py --cells test=/tmp/run/results
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr

from weightdyn import io
from weightdyn.agreement import FLAGS
from weightdyn.single_layer.stationary_experiment import _exact

EXPERIMENTS = ("single_layer", "two_layer")
TARGET = 0.2  # |mean z| at most this
OUTLIER = 3.0  # |z| beyond this counts as an outlier
FLOOR = 1e-9  # modes whose theory is below FLOOR x the largest are left out (zero modes)
#: two-layer (simulation, s.e., theory) of the two blocks, protocol (b)
TWO_LAYER_SPECTRA = (
    ("eig_cov1_sgd_b", "eig_cov1_sgd_b_se", "eig_cov1_exact_local"),
    ("eig_cov2_sgd_b", "eig_cov2_sgd_b_se", "eig_cov2_exact_local"),
)


@dataclass
class CellZ:
    """The z values of one cell (empty, with ``excluded`` set, where its theory is invalid)."""

    label: str
    experiment: str
    cell: str
    precision: str
    dynamics: str
    sim: np.ndarray = field(default_factory=lambda: np.empty(0))
    se: np.ndarray = field(default_factory=lambda: np.empty(0))
    theory: np.ndarray = field(default_factory=lambda: np.empty(0))
    trace: tuple[float, float, float] = (math.nan, math.nan, math.nan)  # sim, s.e., theory
    excluded: str = ""
    flagged: bool = False  # undersampled or not_stationary (weightdyn.agreement.FLAGS)

    @property
    def group(self) -> tuple[str, str, str, str]:
        return self.label, self.experiment, self.precision, self.dynamics

    @property
    def z(self) -> np.ndarray:
        return (self.sim - self.theory) / self.se

    @property
    def z_trace(self) -> float:
        sim, se, theory = self.trace
        return (sim - theory) / se if se > 0 else math.nan

    @property
    def z_traces(self) -> np.ndarray:
        """The trace z as an array of one value, or of none where it is not finite."""
        z = self.z_trace
        return np.array([z]) if math.isfinite(z) else np.empty(0)


# ------------------------------------------------------------------------------- reading


def parse_spec(spec: str) -> tuple[str, Path]:
    """``LABEL=PATH`` or ``PATH`` (label: the folder's name, its parent's for ``results``)."""
    label, sep, path = spec.partition("=")
    if sep and not Path(spec).exists():
        return label, Path(path)
    p = Path(spec)
    name = p.resolve().parent.name if p.name == "results" else p.stem
    return name, p


def sources(path: Path) -> list[Path]:
    """The netCDF files of a results folder: per-cell files first, then merged sweeps."""
    if path.is_file():
        return [path]
    root = path / "results" if (path / "results").is_dir() else path
    cells = [p for e in EXPERIMENTS for p in sorted((root / "cells" / e).glob("*.nc"))]
    merged = sorted(p for p in root.glob("*.nc") if not p.name.endswith(".summary.nc"))
    return cells + merged


def _experiment(path: Path) -> str:
    """The experiment of a per-cell file (``cell_experiment``) or a merge (``experiment``)."""
    with xr.open_dataset(path) as ds:
        return str(ds.attrs.get("experiment", ds.attrs.get("cell_experiment", "")))


def cells_in(path: Path) -> Iterator[tuple[str, str, xr.Dataset]]:
    """(experiment, cell id, one-cell dataset) of every cell in one file of ours."""
    experiment = _experiment(path)
    if experiment not in EXPERIMENTS:
        return
    ds = io.load(path)
    if "cell" not in ds.dims:
        yield experiment, path.stem, ds
        return
    for cell in io.cell_datasets(ds):
        yield experiment, str(cell["cell_id"].values), cell


def param(c: xr.Dataset, name: str, default: object = None) -> object:
    """A cell's parameter: its scalar coordinate or variable, else its attribute ``name``,
    ``cell_<name>`` (a per-cell file) or ``setting_<name>`` (a merge's non-axis setting)."""
    if name in c.variables and c[name].ndim == 0:
        return c[name].values.item()
    for key in (name, f"cell_{name}", f"setting_{name}"):
        if key in c.attrs:
            return c.attrs[key]
    return default


def read_run(label: str, path: Path) -> list[CellZ]:
    """The z values of every single- and two-layer cell of one run, each cell once."""
    seen: set[str] = set()
    out = []
    for source in sources(path):
        for experiment, cell_id, c in cells_in(source):
            if cell_id not in seen:
                seen.add(cell_id)
                out.append(cell_z(label, experiment, cell_id, c))
    return out


# ------------------------------------------------------------------------------- z values


def cell_z(label: str, experiment: str, cell_id: str, c: xr.Dataset) -> CellZ:
    """The :class:`CellZ` of one cell of either experiment."""
    dynamics = str(param(c, "dynamics", "sgd"))
    precision = str(param(c, "precision", "float64"))
    flagged = any(bool(np.nan_to_num(param(c, f, 0), nan=0)) for f in FLAGS)
    out = CellZ(label, experiment, cell_id, precision, dynamics, flagged=flagged)
    if experiment == "single_layer":
        return _single_layer(out, c)
    return _two_layer(out, c)


def _finite(out: CellZ, sim: np.ndarray, se: np.ndarray, theory: np.ndarray) -> CellZ:
    """``out`` with the modes whose z is defined: all finite, s.e. > 0, theory above FLOOR."""
    scale = np.max(np.abs(theory[np.isfinite(theory)]), initial=0.0)
    keep = np.isfinite(sim) & np.isfinite(se) & np.isfinite(theory) & (se > 0)
    keep &= np.abs(theory) > FLOOR * scale
    out.sim, out.se, out.theory = sim[keep], se[keep], theory[keep]
    if not keep.any():
        out.excluded = "no finite s.e."
    return out


def _single_layer_reason(c: xr.Dataset, dynamics: str) -> str:
    """Why the exact theory does not apply to a single-layer cell ("" where it does)."""
    if dynamics == "none" or "eig_M_sgd" not in c:
        return "theory only"
    if int(np.nan_to_num(c["diverged"].values, nan=1)) == 1:
        return "diverged"
    if int(param(c, "N")) >= int(param(c, "P")):
        return "N >= P (nothing fluctuates)"
    if dynamics != "sgf_additive" and not float(c["second_moment_radius"]) < 1:
        return "second_moment_radius >= 1"
    if not bool(_exact(c, dynamics)[3]):
        return "no exact fixed point (Euler chain unstable, or dt != lr)"
    return ""


def _single_layer(out: CellZ, c: xr.Dataset) -> CellZ:
    """Eigenvalues and trace of the second moment about w* vs the chain's exact fixed point."""
    if "lr" not in c.variables:  # a per-cell file: its parameters are attributes
        c = c.assign_coords(lr=float(param(c, "lr")))
    out.excluded = _single_layer_reason(c, out.dynamics)
    if out.excluded:
        return out
    eig = _exact(c, out.dynamics)[2]
    if "trace_M_sgd" in c:
        sim_tr, se_tr = float(c["trace_M_sgd"]), float(c["trace_M_sgd_se"])
    else:  # cells written before the trace variables: N var_w_sgd_wstar
        N = c.sizes["mode"]
        sim_tr, se_tr = N * float(c["var_w_sgd_wstar"]), N * float(c["var_w_sgd_wstar_se"])
    out.trace = (sim_tr, se_tr, float(eig.sum("mode", skipna=False)))
    values = (c["eig_M_sgd"].values, c["eig_M_sgd_se"].values, eig.values)
    return _finite(out, *(np.asarray(v, dtype=float) for v in values))


def _two_layer(out: CellZ, c: xr.Dataset) -> CellZ:
    """Both blocks' spectra and the trace (protocol b) vs the linearisation at the local point."""
    if int(np.nan_to_num(c["diverged"].values, nan=1)) == 1:
        out.excluded = "diverged"
        return out
    parts = [[np.asarray(c[n].values, dtype=float) for n in names] for names in TWO_LAYER_SPECTRA]
    sim, se, theory = (np.concatenate(block) for block in zip(*parts, strict=True))
    out.trace = tuple(float(c[n]) for n in ("trace_M_sgd", "trace_M_sgd_se",
                                            "trace_M_exact_local"))  # fmt: skip
    return _finite(out, sim, se, theory)


# ------------------------------------------------------------------------------ statistics


@dataclass(frozen=True)
class Summary:
    """Statistics of the z values of one group (one array per cell)."""

    cells: int
    n: int
    mean: float
    se_iid: float
    se_cell: float
    sd: float
    outliers: float  # fraction with |z| > OUTLIER


def summarise(per_cell: Sequence[np.ndarray]) -> Summary:
    """Mean z with its iid and cluster-robust (over cells) s.e., sd, fraction |z| > 3."""
    per_cell = [np.asarray(z, dtype=float) for z in per_cell if np.size(z)]
    if not per_cell:
        return Summary(0, 0, *[math.nan] * 5)
    z = np.concatenate(per_cell)
    n, C, mean = z.size, len(per_cell), float(z.mean())
    sd = float(z.std(ddof=1)) if n > 1 else math.nan
    resid = np.array([np.sum(zc - mean) for zc in per_cell])
    se_cell = math.sqrt(C / (C - 1) * np.sum(resid**2)) / n if C > 1 else math.nan
    outliers = float(np.mean(np.abs(z) > OUTLIER))
    return Summary(C, n, mean, sd / math.sqrt(n), se_cell, sd, outliers)


def groups(cells: Sequence[CellZ]) -> dict[tuple[str, ...], list[CellZ]]:
    """Cells by group, in order of first appearance."""
    out: dict[tuple[str, ...], list[CellZ]] = {}
    for c in cells:
        out.setdefault(c.group, []).append(c)
    return out


# -------------------------------------------------------------------------------- tables


def _num(x: float, width: int = 8, digits: int = 3) -> str:
    return f"{'n/a':>{width}}" if not math.isfinite(x) else f"{x:>{width}.{digits}f}"


HEADER = (
    f"{'group (label | experiment | precision | dynamics)':<52} {'cells':>5} {'z':>6} "
    f"{'mean z':>8} {'se_iid':>8} {'se_cell':>8} {'sd z':>8} {'|z|>3':>7} {'flagged':>7}  ok"
)


def summary_line(group: tuple[str, ...], s: Summary, flagged: int) -> str:
    """One row of a group table (``flagged``: its cells flagged undersampled/not stationary)."""
    ok = "yes" if math.isfinite(s.mean) and abs(s.mean) <= TARGET else "no"
    frac = f"{100 * s.outliers:6.1f}%" if s.n else f"{'n/a':>7}"
    return (
        f"{' | '.join(group):<52} {s.cells:>5} {s.n:>6} {_num(s.mean)} {_num(s.se_iid)} "
        f"{_num(s.se_cell)} {_num(s.sd)} {frac} {flagged:>7}  {ok}"
    )


def group_tables(cells: Sequence[CellZ]) -> str:
    """The eigenvalue table, the trace table and the cells left out, by group and reason."""
    used = [c for c in cells if not c.excluded]
    by_group = groups(used)
    lines = []
    for title, values in (
        ("eigenvalues (one z per cell and mode)", lambda c: c.z),
        ("trace tr M (one z per cell)", lambda c: c.z_traces),
    ):
        lines += [f"z = (simulation - theory) / s.e., {title}", HEADER]
        for g, cs in by_group.items():
            with_z = [c for c in cs if values(c).size]
            stats = summarise([values(c) for c in with_z])
            lines.append(summary_line(g, stats, sum(c.flagged for c in with_z)))
        lines.append("")
    lines += _excluded_lines(cells)
    return "\n".join(lines)


def _excluded_lines(cells: Sequence[CellZ]) -> list[str]:
    """'left out: <group>: <n> <reason>, ...' per group with cells left out."""
    lines = []
    for g, cs in groups([c for c in cells if c.excluded]).items():
        reasons: dict[str, int] = {}
        for c in cs:
            reasons[c.excluded] = reasons.get(c.excluded, 0) + 1
        text = ", ".join(f"{n} {r}" for r, n in reasons.items())
        lines.append(f"left out: {' | '.join(g)}: {text}")
    return lines or ["left out: none"]


def cell_table(cells: Sequence[CellZ]) -> str:
    """One row per cell: modes, mean and sd of its z, max |z|, trace z (or why left out)."""
    lines = [f"{'label':<10} {'dynamics':<18} {'modes':>5} {'mean z':>8} {'sd z':>8} "
             f"{'max|z|':>8} {'trace z':>8}  cell"]  # fmt: skip
    for c in cells:
        head = f"{c.label:<10} {c.dynamics:<18}"
        if c.excluded:
            lines.append(f"{head} {'':>5} {'left out: ' + c.excluded:<35}  {c.cell}")
            continue
        z = c.z
        sd = float(z.std(ddof=1)) if z.size > 1 else math.nan
        lines.append(f"{head} {z.size:>5} {_num(float(z.mean()))} {_num(sd)} "
                     f"{_num(float(np.abs(z).max()))} {_num(c.z_trace)}  {c.cell}")  # fmt: skip
    return "\n".join(lines)


def write_csv(cells: Sequence[CellZ], path: Path) -> None:
    """Every z: one row per cell and mode ("eig"), one per cell for the trace ("trace")."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "experiment", "precision", "dynamics", "cell", "quantity", "mode",
                    "simulation", "se", "theory", "z"])  # fmt: skip
        for c in (c for c in cells if not c.excluded):
            head = [c.label, c.experiment, c.precision, c.dynamics, c.cell]
            for k, row in enumerate(zip(c.sim, c.se, c.theory, c.z, strict=True)):
                w.writerow([*head, "eig", k, *(repr(float(v)) for v in row)])
            w.writerow([*head, "trace", "", *(repr(v) for v in (*c.trace, c.z_trace))])


# ------------------------------------------------------------------------------- compare


def match_key(cell_id: str, match: str) -> str:
    """The matching key of a cell: its id, or its id without the ``__<hash>`` suffix."""
    return cell_id if match == "id" else cell_id.split("__")[0]


def _by_key(cells: Sequence[CellZ], match: str) -> dict[str, CellZ]:
    """Usable cells by matching key; a key held by several cells is dropped."""
    keyed: dict[str, list[CellZ]] = {}
    for c in cells:
        if not c.excluded:
            keyed.setdefault(match_key(c.cell, match), []).append(c)
    return {k: cs[0] for k, cs in keyed.items() if len(cs) == 1}


def shift(a: CellZ, b: CellZ) -> tuple[float, float, float]:
    """(shift of the mean eigenvalue z from A to B, its spread, trace difference z)."""
    za, zb = a.z, b.z
    sd2 = [z.var(ddof=1) / z.size if z.size > 1 else math.nan for z in (za, zb)]
    spread = math.sqrt(sum(sd2))
    (tr_a, se_a, _), (tr_b, se_b, _) = a.trace, b.trace
    dtr = (tr_b - tr_a) / math.hypot(se_a, se_b) if math.hypot(se_a, se_b) > 0 else math.nan
    return float(zb.mean() - za.mean()), spread, dtr


def compare_table(a: Sequence[CellZ], b: Sequence[CellZ], match: str) -> str:
    """Per matched cell: mean z in A and B, the shift, its spread, dtr, and a flag."""
    ka, kb = _by_key(a, match), _by_key(b, match)
    common = [k for k in ka if k in kb]
    lines = [f"{'mean z A':>8} {'mean z B':>8} {'shift':>8} {'spread':>8} {'shift/sp':>8} "
             f"{'dtr':>8}  !  cell ({match})"]  # fmt: skip
    flagged = 0
    for k in common:
        d, spread, dtr = shift(ka[k], kb[k])
        ratio = d / spread if spread > 0 else math.nan
        flag = abs(ratio) > OUTLIER or abs(dtr) > OUTLIER
        flagged += flag
        means = f"{_num(float(ka[k].z.mean()))} {_num(float(kb[k].z.mean()))}"
        mark = "!" if flag else " "
        lines.append(f"{means} {_num(d)} {_num(spread)} {_num(ratio)} {_num(dtr)}  {mark}  {k}")
    lines.append(f"{len(common)} matched cells, {flagged} flagged (|shift| > 3 spread or "
                 f"|dtr| > 3); unmatched: {len(ka) - len(common)} in A, "
                 f"{len(kb) - len(common)} in B")  # fmt: skip
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="[LABEL=]results folder or netCDF file")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two runs' cells")
    parser.add_argument("--match", choices=("id", "params"), default="id",
                        help="match cells by cell_id or by the id without its hash")  # fmt: skip
    parser.add_argument("--cells", action="store_true", help="also print one row per cell")
    parser.add_argument("--csv", type=Path, help="write every z to this CSV file")
    args = parser.parse_args(argv)
    if not args.runs and not args.compare:
        parser.error("give at least one run, or --compare A B")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cells = [c for spec in args.runs for c in read_run(*parse_spec(spec))]
    if args.compare:
        a, b = (read_run(*parse_spec(spec)) for spec in args.compare)
        cells = cells or a + b
    print(group_tables(cells))
    if args.cells:
        print("\n" + cell_table(cells))
    if args.csv:
        write_csv(cells, args.csv)
    if args.compare:
        (la, pa), (lb, pb) = (parse_spec(spec) for spec in args.compare)
        print(f"\ncompare A = {la} ({pa}), B = {lb} ({pb})")
        print(compare_table(a, b, args.match))
    return 0


if __name__ == "__main__":
    sys.exit(main())
