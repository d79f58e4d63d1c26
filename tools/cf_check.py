"""The IOOS compliance checker's CF 1.11 test over every netCDF file under a directory.

    .venv/bin/python tools/cf_check.py results/ [--test cf:1.11] [--top 20] [--list]

Prints the number of files, the errors (the checker's priority-3 "Errors", plus exceptions a check
raised) and warnings (priority 2) per kind of file (cells, data, merged, summary), and the most
common messages with the number of files they appear in (``--list``: every error with its file).
:func:`check_file` and :func:`check_tree` are imported by tests/test_cf_compliance.py.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

LEVELS = {3: "error", 2: "warning", 1: "info"}


@dataclass(frozen=True)
class Finding:
    """One message of the checker: its level, the check (section) and the text."""

    path: str
    level: str
    section: str
    message: str


def _leaves(groups: list, section: str = "") -> Iterator[tuple[int, str, list[str]]]:
    """Failed leaf results of the checker's grouped scores: (weight, section, messages)."""
    for result in groups:
        name = section or str(result.name)
        if result.children:
            yield from _leaves(result.children, name)
        elif result.value[0] != result.value[1]:
            yield result.weight, name, list(result.msgs) or [str(result.name)]


#: pure functions of an open file that the CF checker calls once per variable (quadratic in the
#: number of variables: 30 s for a merged two-layer sweep of 90 variables); memoised per file
MEMOISED = (
    "get_auxiliary_coordinate_variables",
    "get_axis_variables",
    "get_time_variables",
    "get_bounds_variables",
    "get_cell_boundary_variables",
    "get_forecast_metadata_variables",
    "get_time_variable",
    "get_platform_variables",
    "get_instrument_variables",
    "get_z_variables",
    "get_latitude_variables",
    "get_longitude_variables",
)


@contextmanager
def memoised(names: tuple[str, ...] = MEMOISED) -> Iterator[None]:
    """The checker's helpers ``names`` (compliance_checker.cf.util) memoised while inside: each
    returns (a copy of) its first result per open file. ``--no-memo`` runs without, to
    confirm that the findings are the same."""
    import compliance_checker.cf.util as cfutil

    originals = {name: getattr(cfutil, name) for name in names}

    def cached(function):
        memo: dict[int, tuple[object, list]] = {}

        def wrapper(nc):
            if id(nc) not in memo or memo[id(nc)][0] is not nc:
                memo[id(nc)] = (nc, function(nc))
            result = memo[id(nc)][1]
            return list(result) if isinstance(result, list) else result

        return wrapper

    try:
        for name, function in originals.items():
            setattr(cfutil, name, cached(function))
        yield
    finally:
        for name, function in originals.items():
            setattr(cfutil, name, function)


def check_file(path: str | Path, test: str = "cf:1.11", memo: bool = True) -> list[Finding]:
    """Every failed check of ``test`` on the netCDF file ``path``."""
    from compliance_checker.runner import CheckSuite

    suite = CheckSuite()
    suite.load_all_available_checkers()
    ds = suite.load_dataset(str(path))
    try:
        with memoised() if memo else nullcontext():
            results = suite.run_all(ds, [test], skip_checks=[])
    finally:
        ds.close()
    if not results:
        raise RuntimeError(f"compliance-checker has no test {test!r}")
    out = []
    for groups, errors in results.values():
        for weight, section, msgs in _leaves(groups):
            level = LEVELS.get(weight, str(weight))
            out += [Finding(str(path), level, section, str(m)) for m in msgs]
        for check, (exc, _tb) in errors.items():
            out.append(Finding(str(path), "error", check, f"check raised {exc!r}"))
    return out


def kind(path: Path, root: Path) -> str:
    """cells, data, merged or summary (by the workflow's layout under results/)."""
    parts = path.relative_to(root).parts
    if "cells" in parts:
        return "cells"
    if "data" in parts:
        return "data"
    return "summary" if path.name.endswith(".summary.nc") else "merged"


def check_tree(
    root: str | Path, test: str = "cf:1.11", memo: bool = True
) -> dict[Path, list[Finding]]:
    """:func:`check_file` on every ``*.nc`` under ``root`` (hidden temporary files skipped)."""
    root = Path(root)
    paths = sorted(p for p in root.rglob("*.nc") if not p.name.startswith("."))
    return {p: check_file(p, test, memo) for p in paths}


def _generic(message: str) -> str:
    """A message with variable names and numbers blanked, so that kinds can be counted."""
    text = re.sub(r"\b(variable|Variable)\s+\S+", r"\1 <v>", message)
    return re.sub(r"(?<![§.\d])\d+(\.\d+)?", "<n>", text)


def report(found: dict[Path, list[Finding]], root: Path, top: int, listing: bool) -> None:
    kinds = sorted({kind(p, root) for p in found})
    print(f"{'files':>8} {'kind':<8} {'errors':>7} {'warnings':>9}")
    for k in [*kinds, "all"]:
        paths = [p for p in found if k in ("all", kind(p, root))]
        n_err = sum(f.level == "error" for p in paths for f in found[p])
        n_warn = sum(f.level == "warning" for p in paths for f in found[p])
        print(f"{len(paths):>8} {k:<8} {n_err:>7} {n_warn:>9}")
    for level in ("error", "warning"):
        counts: Counter[tuple[str, str]] = Counter()
        files: dict[tuple[str, str], set[Path]] = {}
        for p, findings in found.items():
            for f in findings:
                if f.level == level:
                    key = (f.section, _generic(f.message))
                    counts[key] += 1
                    files.setdefault(key, set()).add(p)
        print(f"\nmost common {level}s (count, files, check: message):")
        for (section, msg), count in counts.most_common(top):
            print(f"{count:>6} {len(files[(section, msg)]):>5}  {section}: {msg}")
    if listing:
        print("\nall errors:")
        for p, findings in found.items():
            for f in findings:
                if f.level == "error":
                    print(f"{p.relative_to(root)}: {f.section}: {f.message}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="directory (searched recursively) or .nc file")
    parser.add_argument("--test", default="cf:1.11")
    parser.add_argument("--top", type=int, default=20, help="most common messages to show")
    parser.add_argument("--list", action="store_true", help="every error with its file")
    parser.add_argument("--no-memo", action="store_true", help="the checker's helpers unmemoised")
    args = parser.parse_args(argv)
    memo = not args.no_memo
    if args.root.is_file():
        found = {args.root: check_file(args.root, args.test, memo)}
        root = args.root.parent
    else:
        found, root = check_tree(args.root, args.test, memo), args.root
    report(found, root, args.top, args.list)
    return 1 if any(f.level == "error" for fs in found.values() for f in fs) else 0


if __name__ == "__main__":
    sys.exit(main())
