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


@pytest.mark.parametrize(
    ("edited", "changed"),
    [
        ("two_layer/theory.py", {"two_layer"}),
        ("single_layer/simulate.py", {"single_layer", "two_layer"}),  # two_layer imports it
        ("single_layer/perturbation.py", {"single_layer"}),
        ("mean_field/particles.py", {"mean_field"}),
        ("plots/fig4.py", {"plots"}),
        ("io.py", {"single_layer", "two_layer", "mean_field", "plots"}),
        ("minibatch.py", {"single_layer", "two_layer"}),
    ],
)
def test_an_edit_changes_exactly_the_dependent_hashes(
    package: Path, edited: str, changed: set[str]
) -> None:
    before = _hashes(package)
    _touch(package / edited)
    codehash.closure.cache_clear()
    after = _hashes(package)
    assert {part for part in codehash.PARTS if before[part] != after[part]} == changed


def test_unknown_part_is_named() -> None:
    with pytest.raises(ValueError, match="part: 'figures' is not one of"):
        codehash.code_hash("figures")
