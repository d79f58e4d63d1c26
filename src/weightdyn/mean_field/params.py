"""The config dialect shared by the five mean-field experiments of paper 002 (E1-E5).

Every experiment writes its nested settings in one form, validated here (ConfigError naming the
key and what is allowed; the sweep prefix ``sweeps.<name>.`` is added by :mod:`weightdyn.sweep`):

- ``measure: {kind: gauss_legendre | grid, size: M}``: the input measure mu of Eq. 2;
- ``target: {kind: sin | tanh_bumps, amplitude: A, bumps: [[c, a, h], ...]}``: the target f;
- ``unit: {kind: tanh | shifted_tanh, beta: B}``: the unit phi(w, x) of Eq. 1 (``beta`` only for
  ``shifted_tanh``);
- a diagonal Gaussian law ``{mean: [...], std: [...]}`` (one number per weight component), e.g.
  ``init`` (the initial density p0) or ``p_star``.

Each experiment has a ``part`` axis: its main part (the cells a researcher sweeps) is the default,
the companion cells its summary needs (reference solutions, checks) are added by ``extra_cells``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import xarray as xr

from weightdyn.agreement import Agreement, agreement
from weightdyn.experiments import REQUIRED, ConfigError, Experiment, Param
from weightdyn.mean_field import model

MEASURE_KINDS = ("gauss_legendre", "grid")
TARGET_KINDS = ("sin", "tanh_bumps")
UNIT_KINDS = ("tanh", "shifted_tanh")
PAPER = "002"


def _allowed(values: Sequence[Any]) -> str:
    return "allowed: " + ", ".join(repr(v) for v in values)


def keys(value: Any, key: str, required: Sequence[str], optional: Sequence[str] = ()) -> dict:
    """``value`` as a mapping with exactly the ``required`` keys (plus any of ``optional``)."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: {value!r} must be a mapping with keys {list(required)}")
    unknown = sorted(set(value) - {*required, *optional})
    if unknown:
        raise ConfigError(f"{key}: unknown keys {unknown}; allowed: {[*required, *optional]}")
    missing = [k for k in required if k not in value]
    if missing:
        raise ConfigError(f"{key}: missing keys {missing}; allowed: {[*required, *optional]}")
    return dict(value)


def choice(value: Any, key: str, allowed: Sequence[str]) -> str:
    """``value`` if it is one of ``allowed``."""
    if value not in allowed:
        raise ConfigError(f"{key}: {value!r} is not allowed; {_allowed(allowed)}")
    return value


def number(
    value: Any, key: str, low: float | None = 0.0, integer: bool = False, strict: bool = True
) -> Any:
    """A finite number ``> low`` (``>= low`` unless ``strict``; any if ``low`` is None), an
    integer if ``integer``."""
    kind = "an integer" if integer else "a number"
    bound = "" if low is None else f" {'>' if strict else '>='} {low:g}"
    ok = isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)
    if ok and integer:
        ok = float(value).is_integer()
    if ok and low is not None:
        ok = value > low if strict else value >= low
    if not ok:
        raise ConfigError(f"{key}: {value!r} is not allowed; allowed: {kind}{bound}")
    return int(value) if integer else float(value)


def vector(value: Any, key: str, size: int, positive: bool = False, names: Sequence[str] = ()):
    """``size`` finite numbers (each > 0 if ``positive``) as a float array."""
    what = f"{size} {'positive ' if positive else ''}numbers" + (
        f" ({', '.join(names)})" if names else ""
    )
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        array = np.full(0, np.nan)
    if (
        isinstance(value, str | Mapping)
        or array.shape != (size,)
        or not np.all(np.isfinite(array))
        or (positive and np.any(array <= 0))
    ):
        raise ConfigError(f"{key}: {value!r} is not allowed; allowed: {what}")
    return array


def measure(value: Any, key: str = "measure") -> model.Measure:
    """The input measure of ``{kind, size}``."""
    spec = keys(value, key, ("kind", "size"))
    kind = choice(spec["kind"], f"{key}.kind", MEASURE_KINDS)
    size = number(spec["size"], f"{key}.size", 2, integer=True, strict=False)
    return model.make_measure({"kind": kind, "size": size})


def target(value: Any, key: str = "target") -> Callable[[np.ndarray], np.ndarray]:
    """The target function of ``{kind, amplitude[, bumps]}`` (``bumps`` only for tanh_bumps)."""
    spec = keys(value, key, ("kind", "amplitude"), ("bumps",))
    choice(spec["kind"], f"{key}.kind", TARGET_KINDS)
    number(spec["amplitude"], f"{key}.amplitude", low=None)
    if "bumps" in spec:
        if spec["kind"] != "tanh_bumps":
            raise ConfigError(f"{key}.bumps: only for kind 'tanh_bumps', not {spec['kind']!r}")
        try:
            bumps = np.asarray(spec["bumps"], dtype=float)
        except (TypeError, ValueError):
            bumps = np.full(0, np.nan)
        if bumps.ndim != 2 or bumps.shape[1] != 3 or not np.all(np.isfinite(bumps)):
            raise ConfigError(
                f"{key}.bumps: {spec['bumps']!r} is not allowed; allowed: [[c, a, h], ...]"
            )
    return model.make_target(spec)


def unit(value: Any, key: str = "unit", allowed: Sequence[str] = UNIT_KINDS) -> model.Unit:
    """The unit of ``{kind[, beta]}`` (``beta`` > 0 is required for ``shifted_tanh``)."""
    shifted = isinstance(value, Mapping) and value.get("kind") == "shifted_tanh"
    spec = keys(value, key, ("kind", "beta") if shifted else ("kind",))
    choice(spec["kind"], f"{key}.kind", allowed)
    if shifted:
        number(spec["beta"], f"{key}.beta")
    return model.make_unit(spec)


def gaussian(value: Any, key: str, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviations of the diagonal Gaussian ``{mean: [...], std: [...]}``."""
    spec = keys(value, key, ("mean", "std"))
    size = len(names)
    mean = vector(spec["mean"], f"{key}.mean", size, names=names)
    return mean, vector(spec["std"], f"{key}.std", size, positive=True, names=names)


def multiple(value: float, step: float, key: str, step_name: str) -> float:
    """``value`` as an exact multiple of ``step`` (``value`` rounded to the step grid)."""
    steps = round(value / step)
    if steps < 1 or abs(steps * step - value) > 1e-9 * max(1.0, value):
        raise ConfigError(
            f"{key}: {value!r} is not allowed; allowed: a multiple of {step_name} = {step}"
        )
    return steps * step


def part(allowed: Sequence[str], text: str) -> Param:
    """The ``part`` axis: which part of the experiment a cell computes (default: the main part)."""
    return Param("part", str, allowed[0], f"part of the experiment: {text}", axis=True,
                 allowed=tuple(allowed))  # fmt: skip


def dict_param(name: str, long_name: str, default: Any = REQUIRED) -> Param:
    """A nested-mapping setting (validated by the experiment's ``derive``)."""
    return Param(name, dict, default, long_name)


def require(params: Mapping[str, Any], names: Sequence[str], part_: str) -> None:
    """Refuse a cell of part ``part_`` that lacks one of the axes ``names``."""
    for name in names:
        if params.get(name) is None:
            raise ConfigError(f"{name}: missing; cells of part {part_!r} need a value of {name!r}")


def resources(params: Mapping[str, Any], attempt: int) -> dict[str, int]:
    """Cluster request of one mean-field cell (as the old rule: 4 GB, 1 h), doubled per retry."""
    return {"mem_mb": 4000 * attempt, "runtime": 60 * attempt}


def by_part(
    datasets: Sequence[xr.Dataset], params: Sequence[Mapping[str, Any]], key: str | None = None
) -> dict[str, list[tuple[Mapping[str, Any], xr.Dataset]]]:
    """The cells of a sweep grouped by ``part``, each group sorted by ``params[key]``."""
    out: dict[str, list[tuple[Mapping[str, Any], xr.Dataset]]] = {}
    for p, ds in zip(params, datasets, strict=True):
        out.setdefault(p["part"], []).append((p, ds))
    if key is not None:
        for group in out.values():
            if all(p.get(key) is not None for p, _ in group):
                group.sort(key=lambda pair: pair[0][key])
    return out


def need_cells(groups: Mapping[str, list], part_: str, count: int, what: str) -> None:
    """Refuse a summary whose sweep has fewer than ``count`` cells of part ``part_``."""
    have = len(groups.get(part_, []))
    if have < count:
        raise ConfigError(
            f"part: the summary needs >= {count} cells of part {part_!r} ({what}); the sweep "
            f"has {have}"
        )


def exponent(label: str, compared: str, equations: str, ds: xr.Dataset, name: str,
             expected: float) -> Agreement:  # fmt: skip
    """A fitted exponent ``name`` (with ``name_se`` if present) against its predicted value."""
    se = ds[f"{name}_se"] if f"{name}_se" in ds else xr.DataArray(np.nan)
    return agreement(label, compared, equations, ds[name], expected, se, paper=PAPER)


def row(label: str, compared: str, equations: str, sim, theory, sim_se=None) -> Agreement:
    """One paper-002 agreement row (see :func:`weightdyn.agreement.agreement`)."""
    return agreement(label, compared, equations, sim, theory, sim_se, paper=PAPER)


def experiment(name: str, title: str, source: str, module: ModuleType) -> Experiment:
    """The registry entry of a mean-field experiment module: its ``PARAMS``, ``run_cell``,
    ``derive``, ``extra_cells`` (if any), ``summarize``, ``agreement`` and ``FIGURES`` (all
    drawn by default), with the shared :func:`resources`."""
    return Experiment(
        name=name,
        family="mean_field",
        title=title,
        source=source,
        params=module.PARAMS,
        run_cell=module.run_cell,
        derive=module.derive,
        extra_cells=getattr(module, "extra_cells", None),
        summarize=module.summarize,
        agreement=module.agreement,
        figures=module.FIGURES,
        default_figures=tuple(module.FIGURES),
        resources=resources,
    )
