"""Damaged and foreign result files: found before they are merged, named, and removed on request.

A result file is *intact* when netCDF can open it and read every variable of every group, and
*ours* when its provenance attributes (``cell_<key>``, written by :func:`weightdyn.io.provenance`)
equal the parameters of the cell (or data set) whose path it sits at. A crashed disk, an
interrupted copy between machines or a file copied over another cell's fail one of the two; the
merge rule checks its inputs with :func:`require_intact` and names every bad file, and
``python3 run.py check`` (this module's ``main``) scans a whole config.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import netCDF4

from weightdyn import experiments, io
from weightdyn.sweep import Sweep, data_path, sorted_params

Expected = Mapping[str, str]


class DamagedFiles(RuntimeError):
    """Input files that are unreadable, incomplete or hold another cell."""


def expected_attrs(params: Mapping[str, Any], experiment: str | None = None) -> dict[str, str]:
    """The provenance attributes a file of these parameters carries (``cell_<key>``)."""
    cell = {"experiment": experiment} if experiment is not None else {}
    cell.update({k: v for k, v in params.items() if k != "data"})
    return {k: v for k, v in io.provenance(cell).items() if k.startswith("cell_")}


def _read_all(group: netCDF4.Dataset | netCDF4.Group) -> None:
    for name, var in group.variables.items():
        try:
            var.set_auto_maskandscale(False)
            var[...]
        except Exception as err:  # netCDF4 raises RuntimeError, OSError, IndexError, ...
            raise OSError(f"variable {name!r} cannot be read ({err})") from None
    for sub in group.groups.values():
        _read_all(sub)


def problem(path: str | os.PathLike, expected: Expected | None = None) -> str | None:
    """Why the file at ``path`` cannot be used (None if it can): missing, empty, unreadable,
    truncated (a variable cannot be read) or foreign (provenance differs from ``expected``)."""
    path = Path(path)
    if not path.exists():
        return "missing"
    size = path.stat().st_size
    if size == 0:
        return "empty (0 bytes)"
    try:
        with netCDF4.Dataset(path) as nc:
            _read_all(nc)
            attrs = {k: str(nc.getncattr(k)) for k in nc.ncattrs()}
    except OSError as err:
        return f"unreadable or truncated ({size} bytes): {err}"
    for key, value in (expected or {}).items():
        if attrs.get(key) != value:
            found = attrs.get(key, "nothing")
            return f"foreign: {key} is {found!r}, expected {value!r} (a file of another cell)"
    return None


def problems(files: Mapping[str, Expected | None], missing_ok: bool = False) -> dict[str, str]:
    """The files of ``files`` (path -> expected provenance) that cannot be used, with why."""
    out = {}
    for path, expected in files.items():
        if missing_ok and not Path(path).exists():
            continue
        why = problem(path, expected)
        if why is not None:
            out[str(path)] = why
    return out


def rebuild_command(paths: Iterable[str]) -> str:
    """The one command that rebuilds exactly ``paths`` and what depends on them: the workflow
    as it was started (``WEIGHTDYN_COMMAND``, set by the Snakefile) with ``--forcerun``."""
    command = os.environ.get("WEIGHTDYN_COMMAND", "snakemake <your arguments>")
    return f"{command} --forcerun {shlex.join(sorted(paths))}"


def require_intact(files: Mapping[str, Expected | None], what: str) -> None:
    """Raise :class:`DamagedFiles` naming every bad file of ``files`` and the rebuild command."""
    bad = problems(files)
    if not bad:
        return
    lines = [f"{what}: {len(bad)} of {len(files)} input files cannot be used:"]
    lines += [f"  {path}: {why}" for path, why in sorted(bad.items())]
    lines += [
        "Rebuild exactly these cells (and the merges and figures above them) with:",
        f"  {rebuild_command(bad)}",
        "or scan every result of the config with: python3 run.py check --configfile <config>",
    ]
    raise DamagedFiles("\n".join(lines))


def merged_files(sweeps: Mapping[str, Sweep], paths: Iterable[str]) -> list[str]:
    """The merged and summary files of the sweeps that read any of ``paths``."""
    paths = set(paths)
    out = []
    for name, sweep in sweeps.items():
        data = {f for f, _ in _files_of(sweep)}
        if paths & data:
            out += [f"results/{name}.nc", f"results/{name}.summary.nc"]
    return out


def _files_of(sweep: Sweep) -> list[tuple[str, dict[str, str]]]:
    """The cell and data files of one sweep with the provenance each must carry."""
    exp = experiments.get(sweep.experiment)
    out = []
    for cell in sweep.cells:
        out.append((cell.path, expected_attrs(sorted_params(cell.params), cell.experiment)))
        if exp.data is not None:
            data = {k: cell.params[k] for k in (*exp.data.keys, *exp.data.settings)}
            out.append((data_path(exp, cell.params), expected_attrs(sorted_params(data))))
    return out


def require_cells_intact(
    paths: Iterable[str], cells: Iterable[Mapping[str, Any]], experiment: str, what: str
) -> None:
    """:func:`require_intact` for the cell files ``paths`` of the cells with these parameters."""
    expected = {
        str(path): expected_attrs(cell, experiment) for path, cell in zip(paths, cells, strict=True)
    }
    require_intact(expected, what)


def expected_files(sweeps: Mapping[str, Sweep]) -> dict[str, dict[str, str]]:
    """Every cell and shared data file of the sweeps, with the provenance each must carry."""
    return {path: attrs for sweep in sweeps.values() for path, attrs in _files_of(sweep)}


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python3 run.py check",
        description="Find damaged or foreign result files of a config (cells and data sets).",
    )
    parser.add_argument("--configfile", default="config/config.yaml")
    parser.add_argument("--directory", "-d", default=".", help="the workflow's working directory")
    parser.add_argument("--remove", action="store_true", help="delete the files found")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``python3 run.py check``: report (and with ``--remove`` delete) unusable result files."""
    import yaml

    from weightdyn import sweep as sweeps_of

    args = _parse(sys.argv[1:] if argv is None else argv)
    config = yaml.safe_load(Path(args.configfile).read_text()) or {}
    sweeps_of.check_config(config)
    sweeps = sweeps_of.expand_sweeps(config)
    files = expected_files(sweeps)
    os.chdir(args.directory)
    present = [p for p in files if Path(p).exists()]
    bad = problems({p: files[p] for p in present})
    print(f"checked {len(present)} result files of {len(files)} expected ({args.configfile})")
    for path, why in sorted(bad.items()):
        print(f"  {path}: {why}")
    if not bad:
        print("no damaged or foreign files")
        return 0
    if not args.remove:
        print(f"{len(bad)} unusable files; rebuild exactly those and what uses them with")
        print(f"  snakemake --configfile {args.configfile} --forcerun {shlex.join(sorted(bad))}")
        print("or delete them (and the merged results above them) with --remove")
        return 1
    above = [p for p in merged_files(sweeps, bad) if Path(p).exists()]
    for path in [*bad, *above]:
        Path(path).unlink()
    print(f"removed {len(bad)} files and the {len(above)} merged results that read them;")
    print("the next run recomputes exactly those cells and the merges and figures above them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
