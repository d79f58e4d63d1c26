"""Hashes of the package code that a workflow rule's results depend on.

Snakemake reruns a rule when its own script changes, not when the package code it imports changes.
Every compute rule therefore carries ``code=code_hash(part)`` in its params: the SHA-256 of the
source files in the import closure of one part of the package (``single_layer``, ``two_layer``,
``mean_field``, ``models``), so an edit reruns exactly the rules whose results it can change.
Plotting code (``weightdyn.plots``) is left out of the compute closures, so that a figure change
never triggers a simulation; the figure rules carry ``code_hash("plots")`` instead.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
PARTS = ("single_layer", "two_layer", "mean_field", "models", "plots")


def _module_file(module: str, root: Path) -> Path | None:
    """Source file of a ``weightdyn...`` module name under ``root``, or None if there is none."""
    parts = module.split(".")[1:]
    base = root.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


@functools.cache
def _imported_names(source: str) -> tuple[str, ...]:
    """``weightdyn`` module names a source text imports (``from weightdyn.x import y`` also
    yields ``weightdyn.x.y``). Cached by content: a workflow hashes the same files for every job."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return tuple(n for n in names if n == "weightdyn" or n.startswith("weightdyn."))


def _imports(path: Path, root: Path) -> set[Path]:
    """Package files that ``path`` imports."""
    files = (_module_file(name, root) for name in _imported_names(path.read_text()))
    return {file for file in files if file is not None}


@functools.cache
def closure(part: str, root: Path = PACKAGE) -> tuple[Path, ...]:
    """Source files of package part ``part`` and of everything they import, recursively.

    Compute parts stop at ``weightdyn.plots`` (figures never change simulation results).
    ``root`` is the package directory (a copy of it in the tests).
    """
    if part not in PARTS:
        raise ValueError(f"part: {part!r} is not one of {PARTS}")
    return _closure_from(set((root / part).rglob("*.py")), root, with_plots=part == "plots")


def code_hash(part: str, root: Path = PACKAGE) -> str:
    """First 16 hex digits of the SHA-256 of the import closure of ``part`` (paths and contents)."""
    digest = hashlib.sha256()
    for path in closure(part, root):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _closure_from(start: set[Path], root: Path, with_plots: bool) -> tuple[Path, ...]:
    todo, seen = set(start), set()
    plots = root / "plots"
    while todo:
        path = todo.pop()
        seen.add(path)
        for dep in _imports(path, root) - seen:
            if with_plots or plots not in dep.parents:
                todo.add(dep)
    return tuple(sorted(seen))


def module_hash(module: str, root: Path = PACKAGE) -> str:
    """First 16 hex digits of the SHA-256 of the import closure of the module ``module``
    (an experiment module of the registry, inside the package or not), plotting code left out:
    the code a cell of its experiments runs."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"module: {module!r} cannot be found")
    origin = Path(spec.origin).resolve()
    if root != PACKAGE and PACKAGE in origin.parents:
        origin = root / origin.relative_to(PACKAGE)
    digest = hashlib.sha256()
    for path in _closure_from({origin}, root, with_plots=False):
        name = path.relative_to(root) if root in path.parents else path.name
        digest.update(str(name).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
