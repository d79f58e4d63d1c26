"""Theory-vs-simulation agreement per figure: relative deviations and z-scores with their SEs.

Every ``*_rows`` function takes a merged dataset (or one two-layer cell dataset) and returns a
list of :class:`Agreement` rows, one per comparison drawn in a figure of paper 000. A row pools the
points (cells, modes, times, ...) of one comparison:

- the relative deviation r_k = sim_k / theory_k - 1 of every point, with standard error
  s_k = sqrt(se_sim_k^2 + se_theory_k^2) / |theory_k|;
- their mean, whose standard error sqrt(sum_k s_k^2) / n treats the points as independent;
- the largest |r_k| and the largest |z_k|, z_k = r_k / s_k, with the point where |z| (or, without
  standard errors, |r|) is largest.

Points where the theory vanishes (|theory| <= ``floor`` max |theory|, e.g. N >= P where C = 0 by
Eq. 16) or either value is not finite (diverged SGD) are left out. Rows without a standard error
(theory-only figures, single-realisation matrices) carry NaN in the SE and z columns.

Flagged cells: a merged dataset with the per-cell flags of :data:`FLAGS` (``undersampled``:
sampled for too few autocorrelation times, :mod:`weightdyn.observables`; ``not_stationary``: the
sampling window's late half differs from its early half, :mod:`weightdyn.stationarity`;
``length_capped``: the sampling length was cut by its cap,
:func:`weightdyn.single_layer.protocol.length_dataset`) is
passed through :func:`with_flags`, which makes the flags coordinates; every DataArray a row takes
from the dataset then carries them, and :func:`agreement` reports per flag, among the cells whose
points the row uses, how many are flagged (``<flag>_cells``: "k of n", with the flagged cells'
varying coordinates; "n/a" where the data carry no such flag). No experiment's agreement code
needs to know about them.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from weightdyn import io

PAPER = "000"
#: the per-cell flags: fewer than 50 tau_int sampled (:mod:`weightdyn.observables`), and a
#: sampling window that is not stationary (:mod:`weightdyn.stationarity`), and a sampling
#: length cut by its cap (:func:`weightdyn.single_layer.protocol.length_dataset`)
FLAGS = ("undersampled", "not_stationary", "length_capped")


@dataclass(frozen=True)
class Agreement:
    """One comparison of simulation with theory, pooled over its points."""

    figure: str
    compared: str
    equations: str
    points: int
    mean_rel_dev: float
    mean_rel_dev_se: float
    max_abs_rel_dev: float
    max_abs_z: float
    worst_point: str
    paper: str = PAPER
    undersampled_cells: str = "n/a"
    not_stationary_cells: str = "n/a"
    length_capped_cells: str = "n/a"


def with_flags(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with its flag variables (:data:`FLAGS`, those present) as coordinates, so that the
    rows built from it report the flagged cells they use (module docstring)."""
    return ds.set_coords([flag for flag in FLAGS if flag in ds.data_vars])


def _point_labels(da: xr.DataArray) -> np.ndarray:
    """'dim=value, ...' for every element of ``da`` (length-1 dims, constant coords omitted)."""
    parts = []
    for dim in da.dims:
        coords = [
            name
            for name, coord in da.coords.items()
            if coord.dims == (dim,)
            and np.unique(coord.values).size > 1
            and name not in ("cell_id", *FLAGS)
            and not io.is_record(coord)
        ]
        if not coords and da.sizes[dim] > 1:
            coords = [None]
        for name in coords:
            values = da[name].values if name is not None else np.arange(da.sizes[dim])
            label = dim if name is None else name
            shape = [1] * da.ndim
            shape[da.dims.index(dim)] = da.sizes[dim]
            parts.append(
                np.broadcast_to(
                    np.array([f"{label}={v}" for v in values], dtype=object).reshape(shape),
                    da.shape,
                )
            )
    if not parts:
        return np.full(da.shape, "", dtype=object)
    return np.array([", ".join(p) for p in zip(*(p.ravel() for p in parts), strict=True)]).reshape(
        da.shape
    )


def agreement(
    figure: str,
    compared: str,
    equations: str,
    sim: xr.DataArray,
    theory: xr.DataArray | float,
    sim_se: xr.DataArray | None = None,
    theory_se: xr.DataArray | None = None,
    floor: float = 1e-9,
    paper: str = PAPER,
) -> Agreement:
    """Pool the relative deviations and z-scores of ``sim`` (+- ``sim_se``) from ``theory``."""
    theory = xr.DataArray(theory) if not isinstance(theory, xr.DataArray) else theory
    flags = {name: [_flag(a, name) for a in (sim, theory)] for name in FLAGS}
    sim, theory, sim_se, theory_se = (_unflagged(a) for a in (sim, theory, sim_se, theory_se))
    zero = xr.zeros_like(sim)
    has_se = sim_se is not None or theory_se is not None
    sim, theory, sim_se, theory_se, *where = xr.broadcast(
        sim,
        theory,
        zero if sim_se is None else sim_se,
        zero if theory_se is None else theory_se,
        *(index for pair in flags.values() for _, index in pair if index is not None),
    )
    labels = _point_labels(sim).ravel()
    s, t = sim.values.ravel(), theory.values.ravel()
    se = np.hypot(sim_se.values.ravel(), theory_se.values.ravel())
    finite = np.isfinite(s) & np.isfinite(t) & np.isfinite(se)
    scale = np.max(np.abs(t[finite]), initial=0.0)
    keep = finite & (np.abs(t) > floor * scale)
    s, t, se, labels = s[keep], t[keep], se[keep], labels[keep]
    n = int(s.size)
    used = iter([w.values.ravel()[keep] for w in where])
    flagged = [
        _flagged_cells(pair, [next(used) for _, index in pair if index is not None])
        for pair in flags.values()
    ]
    if n == 0:
        return Agreement(figure, compared, equations, 0, *([np.nan] * 4), "", paper, *flagged)
    rel = s / t - 1.0
    rel_se = se / np.abs(t)
    if has_se:
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(rel_se > 0, rel / rel_se, np.nan)
        worst = int(np.nanargmax(np.abs(z))) if np.isfinite(z).any() else int(np.argmax(abs(rel)))
        mean_se = float(np.sqrt(np.sum(rel_se**2)) / n)
        max_z = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else np.nan
    else:
        worst = int(np.argmax(np.abs(rel)))
        mean_se = max_z = np.nan
    return Agreement(
        figure,
        compared,
        equations,
        n,
        float(np.mean(rel)),
        mean_se,
        float(np.max(np.abs(rel))),
        max_z,
        str(labels[worst]),
        paper,
        *flagged,
    )


def _flag(da: xr.DataArray, name: str) -> tuple[xr.DataArray | None, xr.DataArray | None]:
    """(the flag coordinate ``name`` of ``da``, an index of its elements) or (None, None)."""
    if name not in da.coords:
        return None, None
    flag = da.coords[name]
    index = xr.DataArray(np.arange(flag.size).reshape(flag.shape), dims=flag.dims)
    return flag, index


def _unflagged(da: xr.DataArray | None) -> xr.DataArray | None:
    return None if da is None else da.drop_vars([f for f in FLAGS if f in da.coords])


def _cell_keys(flag: xr.DataArray, j: int, first: xr.DataArray) -> np.ndarray:
    """An identity per element of a flag coordinate: its ``cell_id`` where the data carry one;
    else its position, shared with the first operand's when both hold the same flags."""
    if "cell_id" in flag.coords:
        return np.broadcast_to(flag.coords["cell_id"].values, flag.shape).ravel().astype(str)
    same = flag.dims == first.dims and np.array_equal(flag.values, first.values, equal_nan=True)
    return np.array([f"{0 if same else j}:{k}" for k in range(flag.size)])


def _flagged_cells(flags: list[tuple], used: list[np.ndarray]) -> str:
    """The text "k of n[: labels]" over the distinct cells behind the points (a theory operand
    from the same cells as the simulation counts them once); "n/a" without flags."""
    present = [flag for flag, _ in flags if flag is not None]
    cells: dict[str, tuple[bool, str]] = {}
    for j, (flag, index) in enumerate(zip(present, used, strict=True)):
        keys, labels = _cell_keys(flag, j, present[0]), _point_labels(flag).ravel()
        values = flag.values.ravel().astype(float)
        for k in np.unique(index):
            if np.isfinite(values[k]):
                hit = values[k] == 1 or cells.get(keys[k], (False, ""))[0]
                cells[keys[k]] = (hit, labels[k])
    if not cells:
        return "n/a"
    hits = [label for hit, label in cells.values() if hit]
    text = f"{len(hits)} of {len(cells)}"
    named = [label for label in hits if label]
    return f"{text}: {'; '.join(named)}" if named else text


CAPTION = (
    "Relative deviation sim/theory - 1 per point, pooled per comparison: mean with its "
    "standard error (points treated as independent), largest |deviation| and largest "
    "|z| = |sim - theory| / SE, and the point where |z| (or |deviation| without SE) is "
    "largest. n/a: no standard error available. Undersampled cells: of the cells whose points "
    "a row uses, those sampled for fewer than 50 integrated autocorrelation times of their "
    "slowest observables (their tau_int estimates are lower bounds; where their time blocks are "
    "shorter than 10 tau_int the errors come from a jackknife over replicas, which stays "
    "honest). Not stationary cells: those whose "
    "sampling window's late half differs from its early half (burn-in too short; their "
    "estimates are biased). Length-capped cells: those whose sampling length the cap "
    "sample_max_steps cut below what their relaxation time and precision target need."
)

COLUMNS = (
    ("paper", "paper"),
    ("figure", "figure"),
    ("compared", "simulation vs theory"),
    ("equations", "equations"),
    ("points", "points"),
    ("mean_rel_dev", "mean rel. deviation"),
    ("mean_rel_dev_se", "SE"),
    ("max_abs_rel_dev", "max |rel. deviation|"),
    ("max_abs_z", "max |z|"),
    ("worst_point", "at"),
    ("undersampled_cells", "undersampled cells"),
    ("not_stationary_cells", "not stationary cells"),
    ("length_capped_cells", "length-capped cells"),
)


def _cell_text(value: object) -> str:
    if isinstance(value, float):
        return "n/a" if not np.isfinite(value) else f"{value:.3g}"
    return str(value)


def table_csv(rows: Sequence[Agreement]) -> str:
    """The rows as CSV text, one column per :class:`Agreement` field (full precision)."""
    lines = [",".join(key for key, _ in COLUMNS)]
    for row in rows:
        fields = [getattr(row, key) for key, _ in COLUMNS]
        lines.append(",".join('"' + str(f).replace('"', '""') + '"' for f in fields))
    return "\n".join(lines) + "\n"


def table_html(rows: Sequence[Agreement], caption: str) -> str:
    """A self-contained HTML page (inline style, no external resources) with the rows."""
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in COLUMNS)
    body = "\n".join(
        "<tr>"
        + "".join(f"<td>{html.escape(_cell_text(getattr(row, key)))}</td>" for key, _ in COLUMNS)
        + "</tr>"
        for row in rows
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>theory vs simulation</title>
<style>
body {{ font-family: sans-serif; font-size: 13px; margin: 1em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #bbb; padding: 3px 6px; text-align: left; }}
th {{ background: #eee; }}
tr:nth-child(even) td {{ background: #f7f7f7; }}
</style></head><body>
<p>{html.escape(caption)}</p>
<table><thead><tr>{head}</tr></thead><tbody>
{body}
</tbody></table></body></html>
"""
