"""``python3 run.py params`` and the README's experiment tables (``weightdyn.describe``)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from weightdyn import describe, experiments
from weightdyn.experiments import REQUIRED, Param

README = Path(__file__).resolve().parents[1] / "README.md"


def _row(text: str, name: str) -> str:
    """The line of a text table that starts with the parameter ``name``."""
    return next(line for line in text.splitlines() if line.split()[:1] == [name])


def test_required_prints_as_required() -> None:
    assert repr(REQUIRED) == "required" and "object at" not in str(REQUIRED)
    assert pickle.loads(pickle.dumps(REQUIRED)) is REQUIRED
    text = describe.experiment_text("single_layer")
    assert "object at" not in text
    assert _row(text, "N").split()[:3] == ["N", "int", "required"]
    assert _row(text, "P").split()[:3] == ["P", "int", "optional"]


def test_allowed_values_and_ranges() -> None:
    text = describe.experiment_text("single_layer")
    assert "'sgd', 'sgf_additive', 'sgf_multiplicative', 'none'" in _row(text, "dynamics")
    assert "'with', 'without'" in _row(text, "sampling")
    assert _row(text, "lr").split()[:4] == ["lr", "float", "0.1", ">"]
    assert "learning rate lambda" in _row(text, "lr")


@pytest.mark.parametrize(
    ("param", "expected"),
    [
        (Param("a", float, 1.0, "a", minimum=0, exclusive_minimum=True), "> 0"),
        (Param("b", int, 1, "b", minimum=1), ">= 1"),
        (Param("c", float, 0.5, "c", minimum=0, maximum=1), "0 <= x <= 1"),
        (Param("d", float, 0.5, "d"), "any"),
        (Param("e", bool, True, "e"), "true, false"),
        (Param("f", str, "x", "f", allowed=("x", "y")), "'x', 'y'"),
    ],
)
def test_allowed_text(param: Param, expected: str) -> None:
    assert describe.allowed_text(param) == expected


def test_figures_listed_with_caption_sentence() -> None:
    text = describe.experiment_text("two_layer")
    assert "fig6a (per cell, from the cells)" in text
    assert "fig7a (per sweep, from the cells)" in text
    assert "options: max_mode1=None" in text
    assert ":math:" not in text and "**" not in text


def test_caption_sentence() -> None:
    caption = "**Paper 000 Fig. 4b.** Sorted eigenvalues (Eq. 30) per P/N. Second sentence."
    assert (
        describe.caption_sentence(caption)
        == "Paper 000 Fig. 4b: Sorted eigenvalues (Eq. 30) per P/N."
    )
    assert (
        describe.caption_sentence(":math:`\\pm 2` s.e. over runs. More.") == "± 2 s.e. over runs."
    )
    assert describe.caption_sentence("x" * 300, limit=50).endswith("…")


def test_list_names_every_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert describe.main([]) == 0
    out = capsys.readouterr().out
    for name in experiments.names():
        assert f"  {name} " in out
    assert experiments.get("two_layer").title in out


def test_unknown_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert describe.main(["no_such_experiment"]) == 2
    assert "not registered" in capsys.readouterr().err


def test_own_experiment_module(capsys: pytest.CaptureFixture[str]) -> None:
    """``--module`` registers an experiment of one's own (``tests/toy_experiment.py``)."""
    assert describe.main(["--module", "toy_experiment", "toy"]) == 0
    out = capsys.readouterr().out
    assert _row(out, "lr").split()[:3] == ["lr", "float", "required"]
    assert "variance (per sweep, from the cells)" in out and "options: fail=false" in out


def test_readme_tables_are_generated_from_the_registry() -> None:
    """The README's experiment tables equal the generated ones (regenerate with
    ``python -m weightdyn.describe --markdown --write README.md``)."""
    text = README.read_text(encoding="utf-8")
    assert describe.generated_block(text) == describe.markdown(), describe.REGENERATE
    assert describe.main(["--markdown", "--check", str(README)]) == 0


def test_write_replaces_only_the_block(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\n{describe.BEGIN}\nold\n{describe.END}\n\n## after\n")
    assert describe.main(["--markdown", "--check", str(readme)]) == 1
    assert describe.main(["--markdown", "--write", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("# title\n\n") and text.endswith(f"{describe.END}\n\n## after\n")
    assert describe.generated_block(text) == describe.markdown()
    assert "| `N` | int | required | >= 1 |" in text
