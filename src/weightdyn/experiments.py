"""The experiment registry: every experiment kind of weightdyn is one :class:`Experiment`.

An experiment declares its parameters once (:class:`Param`: name, type, default, allowed values or
range, long_name, units). Parameters marked ``axis=True`` are sweep axes: a sweep may give them a
list, each cell carries one value, and the merged dataset has one coordinate per axis along its
``cell`` dimension. The other parameters are *settings*: one value per sweep (replicas, step
counts, ...), shared by its cells and recorded as attributes. The config check, the cell names,
the seeds (the experiment's own code derives them from the cell's parameter values) and the merged
dataset's coordinates all come from this declaration.

The registry maps experiment names to the modules defining them (attribute ``EXPERIMENT``), so that
importing it costs nothing and no module here knows the physics of any experiment. The package
reads no config files and no paths: :mod:`weightdyn.sweep` turns a config mapping into cells.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import xarray as xr

Params = Mapping[str, Any]
Progress = Callable[[str], None]


class _Required:
    """The default of a parameter the config must give (one instance, :data:`REQUIRED`)."""

    def __repr__(self) -> str:
        return "required"

    def __reduce__(self) -> str:
        return "REQUIRED"  # pickles as the module's one instance


REQUIRED = _Required()  # default of a parameter the config must give


class ConfigError(ValueError):
    """A config value that cannot be run; the message names the key and what is allowed."""


@dataclass(frozen=True)
class Param:
    """One declared parameter of an experiment.

    ``kind`` is ``int``, ``float``, ``str``, ``bool``, ``list`` (a list of numbers or strings,
    never swept) or ``dict`` (a nested mapping, validated by the experiment's ``check``).
    ``allowed`` lists the values of a ``str`` parameter; ``minimum``/``maximum`` bound a number
    (``exclusive_minimum`` makes the lower bound strict). A parameter with ``default=None`` is
    optional (absent means "not given"; ``derive`` may fill it in).
    """

    name: str
    kind: type
    default: Any
    long_name: str
    units: str = "1"
    axis: bool = False
    allowed: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False

    def check(self, value: Any, where: str) -> Any:
        """``value`` converted to this parameter's type, or ConfigError naming ``where``."""
        if value is None and self.default is None:
            return None
        kind = self.kind
        if kind is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: {value!r} is not allowed; allowed: true or false")
            return value
        if kind in (int, float):
            return self._number(value, where)
        if kind is str:
            if not isinstance(value, str):
                raise ConfigError(f"{where}: {value!r} must be a string; {self._allowed_text()}")
            if self.allowed is not None and value not in self.allowed:
                raise ConfigError(f"{where}: {value!r} is not allowed; {self._allowed_text()}")
            return value
        if kind is list:
            if not isinstance(value, list | tuple):
                raise ConfigError(f"{where}: {value!r} must be a list")
            return list(value)
        if kind is dict:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {value!r} must be a mapping")
            return dict(value)
        raise TypeError(f"parameter {self.name}: unsupported kind {kind!r}")

    def _number(self, value: Any, where: str) -> int | float:
        kind_name = "an integer" if self.kind is int else "a number"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: {value!r} must be {kind_name}; {self._allowed_text()}")
        if self.kind is int and float(value) != int(value):
            raise ConfigError(f"{where}: {value!r} must be {kind_name}; {self._allowed_text()}")
        number = int(value) if self.kind is int else float(value)
        if not math.isfinite(number):
            raise ConfigError(f"{where}: {value!r} must be finite; {self._allowed_text()}")
        low_bad = self.minimum is not None and (
            number <= self.minimum if self.exclusive_minimum else number < self.minimum
        )
        if low_bad or (self.maximum is not None and number > self.maximum):
            raise ConfigError(f"{where}: {value!r} is out of range; {self._allowed_text()}")
        return number

    def _allowed_text(self) -> str:
        if self.allowed is not None:
            return "allowed: " + ", ".join(repr(v) for v in self.allowed)
        if self.kind in (int, float):
            low = (
                ""
                if self.minimum is None
                else f"{self.minimum} {'<' if self.exclusive_minimum else '<='} "
            )
            high = "" if self.maximum is None else f" <= {self.maximum}"
            kind = "integer" if self.kind is int else "number"
            return f"allowed: {low}{kind}{high}" if (low or high) else f"allowed: any {kind}"
        return f"allowed: a {self.kind.__name__}"

    def attrs(self) -> dict[str, str]:
        """CF attributes of this parameter's coordinate in a merged dataset."""
        return {"long_name": self.long_name, "units": self.units}


@dataclass(frozen=True)
class Figure:
    """A figure function an experiment offers: ``plot(ds, **options) -> matplotlib Figure``.

    ``ds`` is the merged dataset of the view (cells along ``cell`` with one coordinate per axis,
    after the view's selection), or with ``source="summary"`` the experiment's summary of the
    sweep. ``per_cell`` figures are drawn once per cell (``ds`` then holds one cell).
    ``caption`` is the report caption (reStructuredText naming the paper's equations).

    What the figure draws, checked against a view's cells before any job runs
    (:meth:`extra_axes`):

    - ``axes``: the axes it draws along (they may take several values); None: every axis not in
      ``fixed``;
    - ``fixed``: axes that take one value in one drawing;
    - ``averaged``: axes it averages over (they may take several values, e.g. data_seed);
    - ``axis_options``: options naming further axes it draws along (e.g. ``x``, ``hue``).

    An axis the cells vary outside these (or one of ``fixed``) is drawn one panel per value
    (:mod:`weightdyn.plots.facets`); a figure of the summary cannot be split so and refuses it.
    """

    plot: Callable[..., Any]
    caption: str
    per_cell: bool = False
    source: str = "cells"
    axes: tuple[str, ...] | None = None
    fixed: tuple[str, ...] = ()
    averaged: tuple[str, ...] = ()
    axis_options: tuple[str, ...] = ()

    @property
    def facets(self) -> bool:
        """Whether the figure can be drawn once per value of an extra axis (its cells split)."""
        return self.source == "cells" and not self.per_cell

    def drawn(self, varying: Sequence[str], options: Mapping[str, Any]) -> list[str]:
        """The axes among ``varying`` (and the options' axes) this figure draws along."""
        named = [str(options[o]) for o in self.axis_options if options.get(o) is not None]
        base = self.axes if self.axes is not None else [a for a in varying if a not in self.fixed]
        return [*dict.fromkeys([*base, *named])]

    def extra_axes(
        self, values: Mapping[str, Sequence[Any]], options: Mapping[str, Any]
    ) -> list[str]:
        """The axes the cells vary (``values``: each axis's value in every cell) that this figure
        neither draws nor averages over: one panel per value. An axis the drawn axes fix among
        the cells (p_over_n = P/N when only N varies) is drawn with them, unless it is ``fixed``.
        """
        varying = [a for a, v in values.items() if len({_text(x) for x in v}) > 1]
        drawn = self.drawn(varying, options)
        free = {*drawn, *self.averaged}
        by = [values[a] for a in drawn if a in values]
        return [
            a
            for a in varying
            if a not in free and (a in self.fixed or not _fixed_by(by, values[a]))
        ]

    def allowed_text(self) -> str:
        """What the figure draws, for an error message."""
        if self.axes is None:
            fixed = f" but {list(self.fixed)}, which it holds at one value" if self.fixed else ""
            text = f"draws every axis{fixed}"
        else:
            text = f"draws along {list(self.axes)}"
        if self.axis_options:
            text += f" and the axes its options {list(self.axis_options)} name"
        if self.averaged:
            text += f", averages over {list(self.averaged)}"
        if self.fixed and self.axes is not None:
            text += f", holds {list(self.fixed)} at one value"
        return text


def _text(value: Any) -> str:
    """A value's text for telling axis values apart (None, NaN and "" are missing alike)."""
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(value.item() if hasattr(value, "item") else value)


def _fixed_by(by: Sequence[Sequence[Any]], target: Sequence[Any]) -> bool:
    """Whether, among the cells, the values ``by`` (per axis, per cell) fix ``target``'s."""
    seen: dict[tuple[str, ...], str] = {}
    for k, value in enumerate(target):
        key = tuple(_text(v[k]) for v in by)
        if seen.setdefault(key, _text(value)) != _text(value):
            return False
    return True


class LazyFunction:
    """A function of a module that is imported on the first call (or signature lookup)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.__name__ = module, name

    def resolve(self) -> Callable[..., Any]:
        return getattr(importlib.import_module(self.module), self.__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.resolve())

    def __repr__(self) -> str:
        return f"<lazy {self.module}.{self.__name__}>"


class LazyPlots:
    """Figure functions of a plotting module, imported on first use, not at declaration.

    ``LazyPlots("weightdyn.plots.fig4").variance_vs_size`` stands for that function: an
    experiment module declares its figures with it, so that running a cell never imports
    matplotlib (about half a second per job).
    """

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> LazyFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        return LazyFunction(self._module, name)


#: the generic figure of a per-cell scalar variable against an axis (weightdyn.plots.scalar);
#: an experiment whose cells store scalars offers it as ``scalar``
SCALAR = Figure(
    LazyFunction("weightdyn.plots.scalar", "scalar"),
    "A per-cell scalar (the view's option y) against the axis x, one colour per value of the "
    "axis hue: simulation (open circles, ±1 s.e.; over several data sets the s.e. of their "
    "mean, the larger of their spread over √n and the combined s.e.) and the theories that the "
    "variable names (lines, one style each).",
    axes=(),
    averaged=("data_seed",),
    axis_options=("x", "hue"),
)


@dataclass(frozen=True)
class Experiment:
    """One experiment kind: its parameters, how one cell runs, how cells combine, what it draws.

    - ``run_cell(params, progress) -> xr.Dataset``: one cell from its full parameter mapping
      (axes and settings after ``derive``; ``params["data"]`` is the loaded data set when
      ``data`` is declared). No paths, no config.
    - ``derive(params) -> params``: derived parameters (P from p_over_n, ...) and checks between
      parameters; raise ConfigError naming the key.
    - ``extra_cells(settings) -> [axis values]``: cells the summary needs besides the sweep's own
      (e.g. a reference solution), or None.
    - ``summarize(datasets, params, settings) -> xr.Dataset``: fits over a sweep's cells (the cell
      datasets and their parameter mappings, in sweep order), written beside the merged cells as
      ``results/<sweep>.summary.nc``; or None.
    - ``agreement(ds, label) -> [Agreement]``: theory-vs-simulation rows of one sweep, from its
      summary if the experiment has one, else from its merged cells; ``label`` names the sweep
      (the config's ``label``, e.g. "Fig. 4a").
    - ``resources(params, attempt) -> {"mem_mb": ..., "runtime": ...}`` (minutes).
    - ``light(params) -> bool``: the cell takes about a second or less (a theory evaluation of
      small matrices); the workflow runs it inside its own process rather than paying a process
      start and the imports, about two CPU-seconds a job. None: no cell is light.
    - ``data``: the shared data set the cells read, or None (see :class:`DataSet`).
    """

    name: str
    family: str  # package part: single_layer, two_layer, mean_field or models
    title: str
    source: str  # paper and equations, e.g. "paper 000 Eqs. 10-11, 30"
    params: tuple[Param, ...]
    run_cell: Callable[[Params, Progress], xr.Dataset]
    derive: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    identity: tuple[str, ...] | None = None  # axes naming a cell (default: every axis)
    extra_cells: Callable[[Params], list[dict[str, Any]]] | None = None
    summarize: Callable[[Sequence[xr.Dataset], Sequence[Params], Params], xr.Dataset] | None = None
    agreement: Callable[[xr.Dataset, str], list[Any]] | None = None
    figures: Mapping[str, Figure] = field(default_factory=dict)
    default_figures: tuple[str, ...] = ()
    resources: Callable[[Params, int], dict[str, int]] | None = None
    light: Callable[[Params], bool] | None = None
    data: DataSet | None = None

    @property
    def axes(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.axis)

    @property
    def settings(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.axis)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def identity_axes(self) -> tuple[str, ...]:
        return self.identity if self.identity is not None else tuple(p.name for p in self.axes)


@dataclass(frozen=True)
class DataSet:
    """A data set shared by the cells whose ``keys`` agree (one file, one job, cacheable).

    ``make(params) -> xr.Dataset`` builds it from those keys (and ``settings``, values common to
    a sweep such as the test-set size); ``load(ds)`` turns the stored file back into the object
    ``run_cell`` receives as ``params["data"]``.
    """

    name: str
    keys: tuple[str, ...]
    make: Callable[[Params], xr.Dataset]
    load: Callable[[xr.Dataset], Any]
    settings: tuple[str, ...] = ()


REGISTRY: dict[str, str] = {
    # paper 000, Sec. II: single-layer linear network
    "single_layer": "weightdyn.single_layer.stationary_experiment",
    "noise_spectrum": "weightdyn.single_layer.noise_experiments",
    "projector": "weightdyn.single_layer.noise_experiments",
    "k_diagonal": "weightdyn.single_layer.noise_experiments",
    "hessian_basis": "weightdyn.single_layer.noise_experiments",
    "sgd_noise": "weightdyn.single_layer.noise_experiments",
    "relaxation": "weightdyn.single_layer.dynamics_experiments",
    "perturbation": "weightdyn.single_layer.dynamics_experiments",
    "table1": "weightdyn.single_layer.dynamics_experiments",
    "gbm": "weightdyn.single_layer.dynamics_experiments",
    # paper 000, App. B: SGD as a Bayesian sampler
    "bayes_sampler": "weightdyn.single_layer.bayes_experiment",
    # paper 000, Sec. III: two-layer linear network
    "two_layer": "weightdyn.two_layer.experiment",
    # beyond paper 000 (App. A): deep linear and one-hidden-layer networks
    "deep_linear": "weightdyn.models.experiment",
    "one_hidden": "weightdyn.models.experiment",
    # any JAX network on any data set (App. A beyond the papers' models and data)
    "network": "weightdyn.models.network_experiment",
    # paper 002: mean-field dynamics of wide shallow networks
    "mf_width": "weightdyn.mean_field.registry",
    "mf_pde": "weightdyn.mean_field.registry",
    "mf_small_output": "weightdyn.mean_field.registry",
    "mf_gaussian": "weightdyn.mean_field.registry",
    "mf_linearisation": "weightdyn.mean_field.registry",
}


def register_module(module: str) -> list[str]:
    """Add the experiments of ``module`` (its ``EXPERIMENTS`` mapping) to the registry: an
    experiment of one's own is one module, named in the config's ``experiment_modules``."""
    try:
        found = importlib.import_module(module).EXPERIMENTS
    except (ImportError, AttributeError) as err:
        raise ConfigError(
            f"experiment_modules: {module!r} cannot be imported or has no EXPERIMENTS ({err})"
        ) from None
    for name in found:
        if REGISTRY.get(name, module) != module:
            raise ConfigError(f"experiment_modules: {module!r} redefines experiment {name!r}")
        REGISTRY[name] = module
    return list(found)


def register_modules(modules: Sequence[str]) -> None:
    """:func:`register_module` for every module a config's ``experiment_modules`` names."""
    for module in modules:
        register_module(module)


def get(name: str) -> Experiment:
    """The registered experiment ``name`` (ConfigError listing the registered names otherwise)."""
    if name not in REGISTRY:
        raise ConfigError(f"experiment {name!r} is not registered; allowed: {sorted(REGISTRY)}")
    module = importlib.import_module(REGISTRY[name])
    return module.EXPERIMENTS[name]


def names() -> Sequence[str]:
    """Names of all registered experiments."""
    return tuple(REGISTRY)
