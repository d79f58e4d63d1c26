"""Expansion of a config's named sweeps and figure views into cells (plain dicts; no files read).

The config dialect (README, "Configuration")::

    name: <name>                            # optional: names the config's own outputs
                                            # (results/agreement/<name>.csv); default the stem
                                            # of the config file
    sweeps:
      <sweep>:
        experiment: <registered experiment>
        <axis>: <value> | [<values>]       # a list sweeps the axis: the sweep is the product
        <setting>: <value>                  # shared by every cell of the sweep
        cells: [{<axis>: <value>, ...}]     # optional: an explicit (sparse) list instead
        figures: [<figure>, ...]            # optional: default the experiment's default figures
        label: <text>                       # optional: the paper's name, for the report
    views:                                  # optional: named figures over one or more sweeps
      <view>: {sweeps: [<sweep>, ...], figure: <figure>, select: {<axis>: <values>}, options: {}}

A cell is identified by its experiment, the values of its identity axes and a short hash of its
settings (:func:`cell_id`), never by its position in a grid: adding a value adds cells and
changes none, and two sweeps asking for the same cell share one file.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weightdyn import experiments
from weightdyn.experiments import REQUIRED, ConfigError, Experiment, Param
from weightdyn.io import format_number
from weightdyn.seeds import canonical_parameters

SWEEP_KEYS = ("experiment", "cells", "figures", "label")
VIEW_KEYS = ("sweeps", "figure", "select", "options", "label")
TOP_KEYS = ("name", "sweeps", "views", "figures", "experiment_modules")
FIGURE_KEYS = {"formats": ("png", "pdf", "svg"), "dpi": None}
#: the most panels a figure is split into, one per value of the axes it does not draw
MAX_PANELS = 24
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class Cell:
    """One cell: its experiment, its id (file stem) and its full parameters (after derive)."""

    experiment: str
    id: str
    params: dict[str, Any]

    @property
    def path(self) -> str:
        return f"results/cells/{self.experiment}/{self.id}.nc"


@dataclass(frozen=True)
class Sweep:
    """One named sweep: its experiment, its shared settings, its cells and its figures."""

    name: str
    experiment: str
    settings: dict[str, Any]
    cells: tuple[Cell, ...]
    figures: tuple[str, ...]
    label: str


@dataclass(frozen=True)
class View:
    """One figure: which sweeps, which selection of their cells, which figure function."""

    name: str
    experiment: str
    sweeps: tuple[str, ...]
    figure: str
    select: dict[str, list[Any]]
    options: dict[str, Any]
    cell: str | None  # the one cell of a per-cell figure
    label: str


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return format_number(value)
    return str(value)


_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def _name_text(value: Any) -> str:
    """:func:`_value_text` fit for a file name: a value with other characters than letters,
    digits and ``._+-`` (a path such as ``file:data/x.npz``) becomes its safe tail and a hash
    of the whole text, ``data-x.npz-1a2b3c4d``."""
    text = _value_text(value)
    if not _UNSAFE.search(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{_UNSAFE.sub('-', text).strip('-')[-40:]}-{digest}"


def cell_id(experiment: Experiment, params: Mapping[str, Any]) -> str:
    """Canonical file stem of a cell, e.g. ``N=100_P=200_..._lr=0.1__<settings hash>``."""
    axes = "_".join(
        f"{name}={_name_text(params[name])}"
        for name in experiment.identity_axes
        if params.get(name) is not None
    )
    settings = {
        p.name: params[p.name] for p in experiment.settings if params.get(p.name) is not None
    }
    digest = hashlib.sha256(canonical_parameters(_flat(settings)).encode()).hexdigest()[:8]
    return f"{axes}__{digest}"


def _flat(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Nested settings as flat canonical text values (lists and dicts in a stable form)."""
    out = {}
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            out[key] = repr(sorted(_flat(value).items()))
        elif isinstance(value, list | tuple):
            out[key] = (
                "["
                + ",".join(
                    _value_text(v) if not isinstance(v, list | tuple | Mapping) else repr(v)
                    for v in value
                )
                + "]"
            )
        else:
            out[key] = value
    return out


def data_path(experiment: Experiment, params: Mapping[str, Any]) -> str | None:
    """The shared data file a cell reads, ``results/data/<data set>/<data id>.nc`` (None if
    the experiment declares no data set)."""
    stem = data_id(experiment, params)
    return None if stem is None else f"results/data/{experiment.data.name}/{stem}.nc"


def sorted_params(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping with keys sorted at every level: a reordered YAML is no params change, and the
    cell's provenance attributes have one text form."""
    return {
        key: sorted_params(value) if isinstance(value, Mapping) else value
        for key, value in sorted(mapping.items())
    }


def data_id(experiment: Experiment, params: Mapping[str, Any]) -> str | None:
    """File stem of the shared data set a cell reads (None if the experiment has none)."""
    spec = experiment.data
    if spec is None:
        return None
    keys = (*spec.keys, *spec.settings)
    return "_".join(f"{key}={_name_text(params[key])}" for key in keys)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _checked(param: Param, value: Any, where: str) -> Any:
    if value is REQUIRED:
        raise ConfigError(f"{where}: missing; give {param.long_name} ({param._allowed_text()})")
    return param.check(value, where)


def _settings(exp: Experiment, block: Mapping[str, Any], where: str) -> dict[str, Any]:
    out = {}
    for param in exp.settings:
        value = block.get(param.name, param.default)
        if param.kind is not list and isinstance(value, list):
            raise ConfigError(
                f"{where}.{param.name}: {value!r}: a setting takes one value, not a list "
                f"(the axes of {exp.name!r} are {[p.name for p in exp.axes]})"
            )
        out[param.name] = _checked(param, value, f"{where}.{param.name}")
    return out


def _axis_cells(exp: Experiment, block: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """Axis values of every cell: the product of the lists, or the explicit ``cells`` list."""
    if "cells" in block:
        explicit = block["cells"]
        if not isinstance(explicit, list) or not explicit:
            raise ConfigError(f"{where}.cells: must be a non-empty list of mappings of axis values")
        swept = [p.name for p in exp.axes if isinstance(block.get(p.name), list)]
        if swept:
            raise ConfigError(
                f"{where}: give lists for {swept} or an explicit 'cells' list, not both"
            )
        cells = []
        for k, entry in enumerate(explicit):
            if not isinstance(entry, Mapping):
                raise ConfigError(f"{where}.cells[{k}]: {entry!r} must be a mapping of axis values")
            unknown = sorted(set(entry) - {p.name for p in exp.axes})
            if unknown:
                raise ConfigError(
                    f"{where}.cells[{k}]: {unknown} are not axes of {exp.name!r}; "
                    f"allowed: {[p.name for p in exp.axes]}"
                )
            cells.append(
                {
                    p.name: _checked(
                        p,
                        entry.get(p.name, block.get(p.name, p.default)),
                        f"{where}.cells[{k}].{p.name}",
                    )
                    for p in exp.axes
                }
            )
        return cells
    values = {}
    for p in exp.axes:
        raw = _as_list(block.get(p.name, p.default))
        if not raw:
            raise ConfigError(f"{where}.{p.name}: an empty list gives no cells")
        values[p.name] = [_checked(p, v, f"{where}.{p.name}") for v in raw]
    return [dict(zip(values, combo, strict=True)) for combo in itertools.product(*values.values())]


def _derived(exp: Experiment, params: dict[str, Any], where: str) -> dict[str, Any]:
    if exp.derive is None:
        return params
    try:
        return exp.derive(dict(params))
    except ConfigError as err:
        raise ConfigError(f"{where}.{err}") from None


def expand_sweep(name: str, block: Mapping[str, Any]) -> Sweep:
    """The :class:`Sweep` of config block ``sweeps.<name>`` (ConfigError naming the key)."""
    where = f"sweeps.{name}"
    if not _NAME.match(str(name)):
        raise ConfigError(f"{where}: sweep names are letters, digits, '_' and '-'")
    if not isinstance(block, Mapping) or "experiment" not in block:
        raise ConfigError(f"{where}.experiment: missing; allowed: {sorted(experiments.names())}")
    try:
        exp = experiments.get(block["experiment"])
    except ConfigError as err:
        raise ConfigError(f"{where}.experiment: {err}") from None
    known = {*SWEEP_KEYS, *(p.name for p in exp.params)}
    unknown = sorted(set(block) - known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown keys {unknown} for experiment {exp.name!r}; allowed: "
            f"axes {[p.name for p in exp.axes]}, settings {[p.name for p in exp.settings]}, "
            f"and {list(SWEEP_KEYS)}"
        )
    settings = _settings(exp, block, where)
    axis_cells = _axis_cells(exp, block, where)
    if exp.extra_cells is not None:
        axis_cells += exp.extra_cells(settings)
    cells: dict[str, Cell] = {}
    for axis_values in axis_cells:
        params = _derived(exp, {**settings, **axis_values}, where)
        cid = cell_id(exp, params)
        cells.setdefault(cid, Cell(exp.name, cid, params))
    figures = tuple(block.get("figures", exp.default_figures))
    for fig in figures:
        if fig not in exp.figures:
            raise ConfigError(
                f"{where}.figures: {fig!r} is not a figure of {exp.name!r}; "
                f"allowed: {sorted(exp.figures)}"
            )
    label = str(block.get("label", name))
    return Sweep(name, exp.name, settings, tuple(cells.values()), figures, label)


def check_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Register ``experiment_modules`` and check the top-level keys and the ``figures`` style;
    returns the style (formats, dpi)."""
    unknown = sorted(set(config) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(f"{unknown}: unknown top-level keys; allowed: {list(TOP_KEYS)}")
    name = config.get("name")
    if name is not None and not (isinstance(name, str) and _NAME.match(name)):
        raise ConfigError(
            f"name: {name!r} is not allowed; allowed: letters, digits, '_' and '-', starting "
            "with a letter or digit (it names the config's files, results/agreement/<name>.csv)"
        )
    experiments.register_modules([str(m) for m in _as_list(config.get("experiment_modules", []))])
    style = dict(config.get("figures") or {})
    unknown = sorted(set(style) - set(FIGURE_KEYS))
    if unknown:
        raise ConfigError(f"figures: unknown keys {unknown}; allowed: {list(FIGURE_KEYS)}")
    formats = _as_list(style.get("formats", ["png"]))
    bad = [f for f in formats if f not in FIGURE_KEYS["formats"]]
    if bad or not formats:
        raise ConfigError(
            f"figures.formats: {bad or formats} not allowed; "
            f"allowed: {list(FIGURE_KEYS['formats'])}"
        )
    dpi = style.get("dpi", 200)
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 10 <= dpi <= 1200:
        raise ConfigError(
            f"figures.dpi: {dpi!r} is not allowed; allowed: an integer 10 <= dpi <= 1200"
        )
    return {"formats": formats, "dpi": dpi}


def config_name(config: Mapping[str, Any], configfiles: Sequence[str | os.PathLike]) -> str:
    """The name of ``config``'s own outputs (``results/agreement/<name>.csv``): its top-level
    ``name``, else the stem of the last of ``configfiles`` it was read from (config/paper.yaml:
    ``paper``), else ``config``. Two configs run in one results folder keep apart by it."""
    if config.get("name") is not None:
        return str(config["name"])
    stem = Path(configfiles[-1]).stem if configfiles else "config"
    if not _NAME.match(stem):
        raise ConfigError(
            f"name: missing, and the config file's name {stem!r} cannot name its files; give the "
            "config a top-level `name:` of letters, digits, '_' and '-'"
        )
    return stem


def expand_sweeps(config: Mapping[str, Any]) -> dict[str, Sweep]:
    """Every named sweep of ``config["sweeps"]``."""
    blocks = config.get("sweeps") or {}
    if not isinstance(blocks, Mapping):
        raise ConfigError("sweeps: must be a mapping of sweep names to sweep blocks")
    return {name: expand_sweep(name, block) for name, block in blocks.items()}


def _selected(cells: Sequence[Cell], select: Mapping[str, list[Any]]) -> list[Cell]:
    return [c for c in cells if all(c.params.get(k) in v for k, v in select.items())]


def _view(name: str, block: Mapping[str, Any], sweeps: Mapping[str, Sweep]) -> View:
    where = f"views.{name}"
    unknown = sorted(set(block) - set(VIEW_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; allowed: {list(VIEW_KEYS)}")
    names = _as_list(block.get("sweeps", []))
    missing = [s for s in names if s not in sweeps]
    if not names or missing:
        raise ConfigError(f"{where}.sweeps: {missing or names} not among {sorted(sweeps)}")
    kinds = {sweeps[s].experiment for s in names}
    if len(kinds) != 1:
        raise ConfigError(f"{where}.sweeps: sweeps of different experiments {sorted(kinds)}")
    exp = experiments.get(kinds.pop())
    figure = block.get("figure")
    if figure not in exp.figures:
        raise ConfigError(
            f"{where}.figure: {figure!r} is not a figure of {exp.name!r}; "
            f"allowed: {sorted(exp.figures)}"
        )
    select = {}
    for axis, values in dict(block.get("select") or {}).items():
        try:
            param = exp.param(axis)
        except KeyError:
            raise ConfigError(
                f"{where}.select.{axis}: not a parameter of {exp.name!r}; "
                f"allowed: {[p.name for p in exp.axes]}"
            ) from None
        select[axis] = [param.check(v, f"{where}.select.{axis}") for v in _as_list(values)]
    cells = [c for s in names for c in sweeps[s].cells]
    if not _selected(cells, select):
        raise ConfigError(f"{where}.select: {select} selects no cell of {names}")
    options = _checked_options(f"{where}.options", exp, figure, block)
    check_figure(f"{where}.figure", exp, figure, _selected(cells, select), options)
    return View(
        name, exp.name, tuple(names), figure, select, options, None, str(block.get("label", name))
    )


def check_figure(
    where: str, exp: Experiment, figure: str, cells: Sequence[Cell], options: Mapping[str, Any]
) -> None:
    """Refuse, before any job, ``figure`` of ``exp`` on ``cells`` if they vary an axis it can
    neither draw nor split into panels (:meth:`~weightdyn.experiments.Figure.extra_axes`), or
    into more than :data:`MAX_PANELS` panels."""
    spec = exp.figures[figure]
    if spec.per_cell:
        return
    values = {p.name: [c.params.get(p.name) for c in cells] for p in exp.axes}
    extra = spec.extra_axes(values, options)
    if not extra:
        return
    varying = {a: _sorted_texts(values[a]) for a in extra}
    if not spec.facets:
        raise ConfigError(
            f"{where}: {figure!r} of {exp.name!r} {spec.allowed_text()}, and draws the summary of "
            f"the sweep, which cannot be split into one panel per value; the cells vary "
            f"{varying}: select one value of each (a view's select) or split the sweep"
        )
    panels = len({tuple(_value_text(c.params.get(a)) for a in extra) for c in cells})
    if panels > MAX_PANELS:
        raise ConfigError(
            f"{where}: {figure!r} of {exp.name!r} {spec.allowed_text()}; the cells vary "
            f"{varying}, {panels} panels (one per value); allowed: at most {MAX_PANELS} "
            "(select fewer values with a view's select)"
        )


def _sorted_texts(values: Sequence[Any]) -> list[str]:
    """The distinct values as text, numbers in ascending order first."""

    def key(text: str) -> tuple[int, float, str]:
        try:
            return (0, float(text), text)
        except ValueError:
            return (1, 0.0, text)

    return sorted({_value_text(v) for v in values}, key=key)


def _checked_options(
    where: str, exp: Experiment, figure: str, block: Mapping[str, Any]
) -> dict[str, Any]:
    """A view's ``options``: keyword arguments of its figure function, of the defaults' type,
    the required ones given, those naming an axis (the figure's ``axis_options``) axes of
    ``exp``."""
    spec = exp.figures[figure]
    options = block.get("options") or {}
    if not isinstance(options, Mapping):
        raise ConfigError(f"{where}: must be a mapping of keyword arguments of the figure")
    if not options and not spec.axis_options:
        return {}  # nothing to check: the plotting module is not imported at config time
    params = list(inspect.signature(spec.plot).parameters.values())[1:]
    keywords = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    allowed = {p.name: p for p in params if p.kind in keywords}
    required = [n for n, p in allowed.items() if p.default is inspect.Parameter.empty]
    missing = [n for n in required if n not in options]
    if missing:
        raise ConfigError(
            f"{where}: {figure!r} needs the options {required} (missing {missing}); "
            "a view gives them: views: {<name>: {sweeps: ..., figure: "
            f"{figure}, options: {{{', '.join(f'{n}: ...' for n in required)}}}}}}}"
        )
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return dict(options)
    for key, value in options.items():
        if key not in allowed:
            raise ConfigError(f"{where}.{key}: unknown option; allowed: {sorted(allowed)}")
        _check_option_type(f"{where}.{key}", allowed[key].default, value)
    axes = [p.name for p in exp.axes]
    for key in spec.axis_options:
        if options.get(key) is not None and options[key] not in axes:
            raise ConfigError(
                f"{where}.{key}: {options[key]!r} is not an axis of {exp.name!r}; allowed: {axes}"
            )
    return dict(options)


def _check_option_type(where: str, default: Any, value: Any) -> None:
    """Refuse an option ``value`` of another type than its ``default`` (an int for a float is
    fine; a required option or one defaulting to None takes any value)."""
    kind = type(default)
    if default is None or default is inspect.Parameter.empty or isinstance(value, kind):
        return
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return
    raise ConfigError(
        f"{where}: {value!r} is not allowed; allowed: a {kind.__name__} (default {default!r})"
    )


def expand_views(config: Mapping[str, Any], sweeps: Mapping[str, Sweep]) -> dict[str, View]:
    """Every figure to draw: each sweep's figures (``<sweep>/<figure>``, per-cell figures
    ``<sweep>/<figure>/<cell id>``) and the config's named views (``<view>``)."""
    views: dict[str, View] = {}
    for sweep in sweeps.values():
        exp = experiments.get(sweep.experiment)
        for fig in sweep.figures:
            where = f"sweeps.{sweep.name}.figures"
            _checked_options(where, exp, fig, {})
            check_figure(where, exp, fig, sweep.cells, {})
            stem = f"{sweep.name}/{fig}"
            views[stem] = View(stem, exp.name, (sweep.name,), fig, {}, {}, None, sweep.label)
    for name, block in (config.get("views") or {}).items():
        if not _NAME.match(str(name)):
            raise ConfigError(f"views.{name}: view names are letters, digits, '_' and '-'")
        if not isinstance(block, Mapping):
            raise ConfigError(f"views.{name}: must be a mapping with keys {list(VIEW_KEYS)}")
        views[name] = _view(name, block, sweeps)
    return _per_cell(views, sweeps)


def _per_cell(views: dict[str, View], sweeps: Mapping[str, Sweep]) -> dict[str, View]:
    """Per-cell figures become one view per selected cell, named by the axis values that vary
    among the view's cells (``<view>/dynamics=sgd``; the cell id where those collide)."""
    out = {}
    for stem, view in views.items():
        if not experiments.get(view.experiment).figures[view.figure].per_cell:
            out[stem] = view
            continue
        cells = _selected([c for s in view.sweeps for c in sweeps[s].cells], view.select)
        cells = list({c.id: c for c in cells}.values())
        for cell, label in zip(
            cells, _cell_labels(experiments.get(view.experiment), cells), strict=True
        ):
            name = f"{stem}/{label}" if len(cells) > 1 else stem
            out[name] = View(name, view.experiment, view.sweeps, view.figure, view.select,
                             view.options, cell.id, view.label)  # fmt: skip
    return out


def _cell_labels(exp: Experiment, cells: Sequence[Cell]) -> list[str]:
    """Short unique names of ``cells``: the identity axes whose values differ among them."""
    varying = [
        a for a in exp.identity_axes if len({_value_text(c.params.get(a)) for c in cells}) > 1
    ]
    labels = ["_".join(f"{a}={_value_text(c.params.get(a))}" for a in varying) for c in cells]
    if len(set(labels)) < len(labels) or not all(labels):
        return [c.id for c in cells]
    return labels


def view_cells(view: View, sweeps: Mapping[str, Sweep]) -> list[Cell]:
    """The cells a view draws (its sweeps' cells after its selection)."""
    cells = _selected([c for s in view.sweeps for c in sweeps[s].cells], view.select)
    return [c for c in cells if view.cell is None or c.id == view.cell]
