"""Package edits rerun exactly the rules whose results they can change (weightdyn.codehash)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from weightdyn import codehash


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "weightdyn"
    shutil.copytree(codehash.PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _hashes(root: Path) -> dict[str, str]:
    return {part: codehash.code_hash(part, root) for part in codehash.PARTS}


def _touch(path: Path) -> None:
    path.write_text(path.read_text() + "\n# edited\n")


def test_compute_closures_leave_plotting_code_out() -> None:
    for part in ("single_layer", "two_layer", "mean_field"):
        files = {p.relative_to(codehash.PACKAGE).as_posix() for p in codehash.closure(part)}
        assert not any(f.startswith("plots/") for f in files), part
        assert {"io.py", "seeds.py"} <= files, part
    assert "single_layer/simulate.py" in {
        p.relative_to(codehash.PACKAGE).as_posix() for p in codehash.closure("single_layer")
    }


MODULES = {
    "single_layer": "weightdyn.single_layer.stationary_experiment",
    "noise": "weightdyn.single_layer.noise_experiments",
    "two_layer": "weightdyn.two_layer.experiment",
    "mean_field": "weightdyn.mean_field.registry",
}


def _module_hashes(root: Path) -> dict[str, str]:
    return {name: codehash.module_hash(module, root) for name, module in MODULES.items()}


@pytest.mark.parametrize(
    ("edited", "changed"),
    [
        ("two_layer/theory.py", {"two_layer"}),
        ("linear_theory.py", {"single_layer", "noise", "two_layer"}),  # shared theory
        ("mean_field/particles.py", {"mean_field"}),
        ("single_layer/noise.py", {"noise"}),
        ("plots/fig4.py", set()),  # figures never rerun a simulation
        ("io.py", set(MODULES)),
    ],
)
def test_an_edit_changes_exactly_the_dependent_cell_hashes(
    package: Path, edited: str, changed: set[str]
) -> None:
    """The cell rule carries module_hash(<experiment module>): its import closure, plots out."""
    before = _module_hashes(package)
    _touch(package / edited)
    after = _module_hashes(package)
    assert {name for name in MODULES if before[name] != after[name]} == changed


def test_plots_hash_follows_plotting_code(package: Path) -> None:
    before = codehash.code_hash("plots", package)
    _touch(package / "plots" / "fig4.py")
    codehash.closure.cache_clear()
    assert codehash.code_hash("plots", package) != before


def test_unknown_part_is_named() -> None:
    with pytest.raises(ValueError, match="part: 'figures' is not one of"):
        codehash.code_hash("figures")
