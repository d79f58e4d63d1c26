"""Layering of the theory modules: calls flow downward only (docs/design.md, "One home for the
shared linear theory").

The model-independent algebra of paper 000 (Lyapunov solves of Eqs. 29-33 and 65 on the range
of a drift, rank cuts, the discrete second-moment recursion, the App. C prefactor of Eq. 83)
lives in :mod:`weightdyn.linear_theory`. The model packages (``single_layer``, ``two_layer``,
``models``) import it; none imports another model package's ``theory`` module. The imports are
read with ``ast`` (also those inside functions), so nothing is executed.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from weightdyn import linear_theory as lt
from weightdyn.models import theory as mt
from weightdyn.single_layer import theory as sl
from weightdyn.two_layer import theory as tl

SRC = Path(__file__).resolve().parents[1] / "src" / "weightdyn"
PACKAGES = ("single_layer", "two_layer", "models")

#: Imports across model packages that are allowed although they are not about theory: the two
#: simulators reuse the single-layer batch-index helpers (one SGD engine for every model is a
#: separate item of the same issue). Any new cross-package import must be added here, with a
#: reason; a cross-package import of a ``theory`` module is never allowed.
ALLOWED_CROSS_IMPORTS = {
    ("models.simulate", "single_layer.simulate"),
    ("two_layer.simulate", "single_layer.simulate"),
}


def imported_modules(source: str, package: str) -> set[str]:
    """``weightdyn`` modules imported anywhere in ``source`` (a module of ``package``), without the
    ``weightdyn.`` prefix; ``from weightdyn.a import b`` yields ``a.b`` as well as ``a`` (``b``
    may be a module). Relative imports are resolved against ``package``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = ["weightdyn", *([package] if package else [])]
                base = parts[: len(parts) + 1 - node.level]
                module = ".".join([*base, module] if module else base)
            names |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    prefix = "weightdyn."
    return {n.removeprefix(prefix) for n in names if n.startswith(prefix)}


def foreign_modules(source: str, package: str) -> set[str]:
    """Modules ``<other package>.<module>`` of the other model packages that ``source`` (a module
    of ``package``) imports (``from weightdyn.a.b import c`` counts as ``a.b``)."""
    return {
        ".".join(name.split(".")[:2])
        for name in imported_modules(source, package)
        if name.split(".")[0] in PACKAGES and name.split(".")[0] != package and "." in name
    }


def theory_violations(source: str, package: str) -> set[str]:
    """Other model packages' ``theory`` modules that ``source`` (in ``package``) imports."""
    return {name for name in foreign_modules(source, package) if name.endswith(".theory")}


def package_files() -> list[tuple[str, Path]]:
    files = [(pkg, path) for pkg in PACKAGES for path in sorted((SRC / pkg).glob("*.py"))]
    assert len(files) > 20, f"expected the model packages under {SRC}, found {len(files)} files"
    return files


def test_checker_flags_a_sideways_theory_import() -> None:
    """The checker catches the import of the base commit (models -> single_layer.theory) in every
    spelling, and leaves the package's own theory and linear_theory alone."""
    bad = [
        "from weightdyn.single_layer import theory as sl",
        "import weightdyn.single_layer.theory",
        "def f():\n    from weightdyn.single_layer.theory import noise_prefactor\n",
    ]
    for source in bad:
        assert theory_violations(source, "models") == {"single_layer.theory"}, source
    assert theory_violations("from ..two_layer.theory import vec", "models") == {"two_layer.theory"}
    ok = "from weightdyn.models import theory\nfrom weightdyn.linear_theory import embed\n"
    assert theory_violations(ok, "models") == set()
    helper = "from weightdyn.single_layer.simulate import _within"
    assert foreign_modules(helper, "models") == {"single_layer.simulate"}
    assert theory_violations(helper, "models") == set()


@pytest.mark.parametrize("package, path", package_files(), ids=lambda v: getattr(v, "name", v))
def test_no_model_package_imports_another_packages_theory(package: str, path: Path) -> None:
    assert theory_violations(path.read_text(), package) == set()


def test_cross_package_imports_are_the_listed_exceptions() -> None:
    found = {
        (f"{package}.{path.stem}", name)
        for package, path in package_files()
        for name in foreign_modules(path.read_text(), package)
    }
    assert found <= ALLOWED_CROSS_IMPORTS, found - ALLOWED_CROSS_IMPORTS


def test_linear_theory_imports_no_model_package() -> None:
    """Downward only: the shared module knows no model."""
    names = imported_modules((SRC / "linear_theory.py").read_text(), "")
    assert {n for n in names if n.split(".")[0] in PACKAGES} == set()


@pytest.mark.parametrize("package", PACKAGES)
def test_every_theory_module_uses_linear_theory(package: str) -> None:
    source = (SRC / package / "theory.py").read_text()
    assert "linear_theory" in imported_modules(source, package)


@pytest.mark.parametrize(
    "module, old, new",
    [
        (sl, "noise_prefactor", "noise_prefactor"),
        (sl, "stationary_covariance", "stationary_covariance"),
        (sl, "circulation", "circulation"),
        (sl, "detailed_balance_covariance", "detailed_balance_covariance"),
        (tl, "zero_mode_spread", "zero_mode_spread"),
        (tl, "RESIDUAL_CUT_FACTOR", "RESIDUAL_CUT_FACTOR"),
        (tl, "lyapunov_covariance", "lyapunov_covariance"),
        (mt, "RangeInfo", "RangeInfo"),
        (mt, "hessian_range", "hessian_range"),
        (mt, "check_learning_rate", "check_learning_rate"),
        (mt, "stationary_covariance", "range_stationary_covariance"),
        (mt, "circulation", "range_circulation"),
        (mt, "detailed_balance_covariance", "range_detailed_balance_covariance"),
        (mt, "discrete_stationary_covariance", "range_discrete_covariance"),
    ],
)
def test_old_names_are_reexports(module: object, old: str, new: str) -> None:
    """Moved names stay importable from their old modules, as the very objects of the new home
    (external checkers call e.g. ``weightdyn.single_layer.theory.stationary_covariance``)."""
    assert getattr(module, old) is getattr(lt, new)
    assert old in module.__all__  # type: ignore[attr-defined]


def test_reexported_signatures_unchanged() -> None:
    """Signatures of the public entry points named in the external checks."""
    assert str(inspect.signature(sl.stationary_covariance)) == (
        "(H: 'ArrayLike', C: 'ArrayLike', lr: 'float', *, rtol: 'float | None' = None)"
        " -> 'FloatArray'"
    )
    assert str(inspect.signature(sl.noise_prefactor)) == (
        "(P: 'int', batch_size: 'int', sampling: 'Sampling' = 'with') -> 'float'"
    )
    assert list(inspect.signature(tl.zero_mode_spread).parameters) == ["Gamma"]
    assert list(inspect.signature(mt.stationary_covariance).parameters) == [
        "H", "C", "lr", "rtol", "atol",
    ]  # fmt: skip
