"""Expansion of a config's named sweeps into cells (plain dicts; no files are read here).

A single-layer sweep block gives lists for each axis; either ``p_over_n`` (P = round(p_over_n N))
or ``P`` fixes the sample number. A cell is identified by its integer (N, P) and the values of the
other axes, never by its position in the grid, so adding a value adds cells and changes none.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from weightdyn.io import format_number

SINGLE_LAYER_AXES = ("N", "P", "sigma_eps2", "lr", "batch_size", "sampling", "data_seed")
DATA_AXES = ("N", "P", "sigma_eps2", "data_seed")
SAMPLING_MODES = ("with", "without")


class SweepError(ValueError):
    """A sweep block that names an impossible cell; the message names the key and the rule."""


def single_layer_cells(name: str, block: Mapping[str, object]) -> list[dict]:
    """All cells of one named sweep block, in config order."""
    if ("P" in block) == ("p_over_n" in block):
        raise SweepError(
            f"single_layer.sweeps.{name}: give exactly one of 'P' or 'p_over_n' "
            f"(got {'both' if 'P' in block else 'neither'})"
        )
    size_key = "P" if "P" in block else "p_over_n"
    axes = ("N", size_key, "sigma_eps2", "lr", "batch_size", "sampling", "data_seed")
    cells = []
    for values in itertools.product(*(list(block[key]) for key in axes)):
        raw = dict(zip(axes, values, strict=True))
        N = int(raw["N"])
        P = int(raw["P"]) if size_key == "P" else round(float(raw["p_over_n"]) * N)
        cell = {
            "N": N,
            "P": P,
            "sigma_eps2": float(raw["sigma_eps2"]),
            "lr": float(raw["lr"]),
            "batch_size": int(raw["batch_size"]),
            "sampling": str(raw["sampling"]),
            "data_seed": int(raw["data_seed"]),
        }
        _check_cell(name, size_key, raw, cell)
        cells.append(cell)
    return cells


def _check_cell(name: str, size_key: str, raw: Mapping, cell: Mapping) -> None:
    where = f"single_layer.sweeps.{name}"
    if cell["P"] < 1:
        raise SweepError(
            f"{where}.{size_key}: {raw[size_key]} with N={cell['N']} gives P={cell['P']}; "
            "P must be at least 1"
        )
    if cell["batch_size"] > cell["P"]:
        raise SweepError(
            f"{where}.batch_size: {cell['batch_size']} exceeds the sample number P={cell['P']} "
            f"(N={cell['N']}); allowed: 1 <= batch_size <= P"
        )
    if cell["sampling"] not in SAMPLING_MODES:
        raise SweepError(
            f"{where}.sampling: {cell['sampling']!r} is not allowed; allowed: {SAMPLING_MODES}"
        )


def unique_cells(cells: Iterable[Mapping]) -> list[dict]:
    """Cells without repeats (two sweeps may share a cell), first occurrence kept."""
    seen: dict[str, dict] = {}
    for cell in cells:
        seen.setdefault(cell_name(cell), dict(cell))
    return list(seen.values())


def cell_name(cell: Mapping[str, object]) -> str:
    """Canonical file stem of a single-layer cell, e.g. ``N100_P200_s0.25_d0_lr0.1_S10_with``."""
    return (
        f"{data_name(cell)}_lr{format_number(cell['lr'])}"
        f"_S{format_number(cell['batch_size'])}_{cell['sampling']}"
    )


def data_name(cell: Mapping[str, object]) -> str:
    """Canonical file stem of a cell's data set (shared by cells that differ only in SGD)."""
    return (
        f"N{format_number(cell['N'])}_P{format_number(cell['P'])}"
        f"_s{format_number(cell['sigma_eps2'])}_d{format_number(cell['data_seed'])}"
    )


def data_cell(cell: Mapping[str, object]) -> dict:
    """The data-defining part of a cell (the seed of its data set depends on these only)."""
    return {key: cell[key] for key in DATA_AXES}


def noise_cells(noise: Mapping[str, Mapping]) -> dict[str, dict[str, dict]]:
    """Cells of the noise experiments (paper 000 Figs. 1-2) as {kind: {name: cell}}.

    Kinds: ``projector`` (Fig. 1a, cells with P > N only), ``k_diagonal`` (Fig. 1b),
    ``spectrum`` (Figs. 2a,b: the ``p_over_n`` cells are simulated with ``n_batches``
    mini-batches, the ``theory_p_over_n`` cells are theory only) and ``hessian_basis``
    (Fig. 2c: one data cell per realisation).
    """
    out: dict[str, dict[str, dict]] = {}
    if "projector" in noise:
        block = noise["projector"]
        out["projector"] = {
            f"N{N}_P{P}": {"N": int(N), "P": int(P), "realisations": int(block["realisations"])}
            for N in block["N"]
            for P in block["P"]
            if P > N
        }
    if "k_diagonal" in noise:
        block = noise["k_diagonal"]
        cells = [
            {
                "N": int(block["N"]),
                "P": int(P),
                "sigma_eps2": float(block["sigma_eps2"]),
                "data_seed": int(block["data_seed"]),
            }
            for P in block["P"]
            if P > block["N"]
        ]
        out["k_diagonal"] = {data_name(c): c for c in cells}
    if "spectrum" in noise:
        out["spectrum"] = _spectrum_cells(noise["spectrum"])
    if "hessian_basis" in noise:
        block = noise["hessian_basis"]
        N = int(block["N"])
        cells = [
            {
                "N": N,
                "P": round(float(block["p_over_n"]) * N),
                "sigma_eps2": float(block["sigma_eps2"]),
                "data_seed": seed,
            }
            for seed in range(int(block["realisations"]))
        ]
        out["hessian_basis"] = {data_name(c): c for c in cells}
    return out


def _spectrum_cells(block: Mapping) -> dict[str, dict]:
    N = int(block["N"])
    cells: dict[str, dict] = {}
    for ratios, n_batches in (
        (block["p_over_n"], int(block["n_batches"])),
        (block.get("theory_p_over_n", []), 0),
    ):
        for ratio in ratios:
            for sampling in block["sampling"]:
                cell = {
                    "N": N,
                    "P": round(float(ratio) * N),
                    "sigma_eps2": float(block["sigma_eps2"]),
                    "data_seed": int(block["data_seed"]),
                    "batch_size": int(block["batch_size"]),
                    "sampling": str(sampling),
                    "n_batches": n_batches,
                }
                if cell["P"] < cell["batch_size"]:
                    raise SweepError(
                        f"noise.spectrum.batch_size: {cell['batch_size']} exceeds P={cell['P']}"
                    )
                name = f"{data_name(cell)}_S{cell['batch_size']}_{sampling}"
                cells.setdefault(name, cell)  # simulated cells win over theory-only ones
    return cells


TWO_LAYER_AXES = (
    "N_i", "N_h", "N_o", "P", "sigma_y2", "init", "init_scale", "lr", "batch_size", "sampling",
    "data_seed",
)  # fmt: skip
TWO_LAYER_AXIS_DEFAULTS = {"N_o": 1, "init": "gaussian", "init_scale": 1.0, "sampling": "with",
                           "data_seed": 0}  # fmt: skip


def two_layer_cells(name: str, block: Mapping[str, object]) -> dict[str, dict]:
    """Cells of one named two-layer sweep as {canonical name: cell}.

    Axis keys (:data:`TWO_LAYER_AXES`) may be lists (swept) or scalars; every other key is a
    protocol setting shared by the sweep's cells. A missing optional axis takes its default.
    """
    axes = {key: block.get(key, TWO_LAYER_AXIS_DEFAULTS.get(key)) for key in TWO_LAYER_AXES}
    missing = [key for key, value in axes.items() if value is None]
    if missing:
        raise SweepError(f"two_layer.sweeps.{name}: missing {missing}")
    lists = {key: value if isinstance(value, list) else [value] for key, value in axes.items()}
    settings = {key: value for key, value in block.items() if key not in TWO_LAYER_AXES}
    cells = {}
    for values in itertools.product(*lists.values()):
        cell = dict(zip(lists, values, strict=True))
        if cell["P"] <= cell["N_i"]:
            raise SweepError(
                f"two_layer.sweeps.{name}.P: {cell['P']} must exceed N_i = {cell['N_i']}"
            )
        if cell["batch_size"] > cell["P"]:
            raise SweepError(
                f"two_layer.sweeps.{name}.batch_size: {cell['batch_size']} exceeds P={cell['P']}"
            )
        cells[two_layer_name(cell)] = {**cell, **settings}
    return cells


def two_layer_name(cell: Mapping[str, object]) -> str:
    """Canonical file stem of a two-layer cell, e.g. ``Ni20_Nh15_No1_P400_s1_gaussian1_...``."""
    f = format_number
    return (
        f"Ni{f(cell['N_i'])}_Nh{f(cell['N_h'])}_No{f(cell['N_o'])}_P{f(cell['P'])}"
        f"_s{f(cell['sigma_y2'])}_{cell['init']}{f(cell['init_scale'])}_lr{f(cell['lr'])}"
        f"_S{f(cell['batch_size'])}_{cell['sampling']}_d{f(cell['data_seed'])}"
    )
