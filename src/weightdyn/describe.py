"""Readable descriptions of the experiment registry: ``python3 run.py params`` and the README.

Everything printed here is generated from the declarations in :mod:`weightdyn.experiments` (each
experiment's :class:`~weightdyn.experiments.Param` and :class:`~weightdyn.experiments.Figure`
entries), so the text cannot disagree with what the config check accepts::

    python -m weightdyn.describe                      # the experiments and their titles
    python -m weightdyn.describe single_layer         # one experiment: parameters and figures
    python -m weightdyn.describe --module toy_experiment toy   # an experiment of one's own
    python -m weightdyn.describe --markdown           # the README's experiment tables
    python -m weightdyn.describe --markdown --write README.md  # regenerate them in place
    python -m weightdyn.describe --markdown --check README.md  # exit 1 if they are stale

Functions: :func:`experiment_list`, :func:`experiment_text` (one experiment, plain text),
:func:`experiment_markdown` (one experiment, markdown tables), :func:`markdown` (all of them),
:func:`replace_generated` (the README between :data:`BEGIN` and :data:`END`).
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from weightdyn import experiments
from weightdyn.experiments import REQUIRED, Figure, Param

#: the marker comments around the generated tables in README.md
BEGIN = "<!-- experiments:begin -->"
END = "<!-- experiments:end -->"
#: the command that regenerates them (named in the generated block)
REGENERATE = "python3 run.py params --markdown --write README.md"
#: words after which a full stop does not end a sentence
_ABBREVIATIONS = ("Fig", "Figs", "Eq", "Eqs", "App", "Sec", "Ref", "Refs", "e.g", "i.e", "cf", "vs")


def default_text(param: Param) -> str:
    """A parameter's default as a config would spell it; ``required`` if the config must give
    it, ``optional`` if it may be left out (the experiment derives it or does without)."""
    value = param.default
    if value is REQUIRED:
        return "required"
    if value is None:
        return "optional"
    return _value(value)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{value:.1f}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}" if abs(value) >= 1e6 or 0 < abs(value) < 1e-4 else repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return repr(value)


def kind_text(param: Param) -> str:
    """The parameter's type: ``int``, ``float``, ``str``, ``bool``, ``list`` or ``dict``."""
    return param.kind.__name__


def allowed_text(param: Param) -> str:
    """The values the config check accepts: the listed strings, or a number's range."""
    if param.allowed is not None:
        return ", ".join(_value(v) for v in param.allowed)
    if param.kind is bool:
        return "true, false"
    if param.kind in (int, float):
        low = param.minimum
        high = param.maximum
        if low is not None and high is not None:
            return f"{_num(low)} {'<' if param.exclusive_minimum else '<='} x <= {_num(high)}"
        if low is not None:
            return f"{'>' if param.exclusive_minimum else '>='} {_num(low)}"
        if high is not None:
            return f"<= {_num(high)}"
        return "any"
    if param.kind is list:
        return "a list"
    if param.kind is dict:
        return "a mapping"
    return "any"


def _num(value: float) -> str:
    return f"{value:g}"


def caption_sentence(caption: str, limit: int = 220) -> str:
    """The first sentence of a figure caption as plain text (reST markup removed).

    A bold lead-in (``**Paper 000 Fig. 4a.** ...``) becomes ``Paper 000 Fig. 4a: ...``; a
    sentence ends at a full stop followed by a capital letter, unless the word before it is an
    abbreviation such as ``Fig`` or ``Eq``. Longer than ``limit`` characters: cut with an
    ellipsis.
    """
    text = re.sub(r":math:`([^`]*)`", lambda m: _tex(m.group(1)), caption)
    text = text.replace("``", "`")
    text = " ".join(text.split())
    lead = ""
    bold = re.match(r"\*\*(.+?)\*\*\s*", text)
    if bold:
        lead = bold.group(1).rstrip(".:") + ": "
        text = text[bold.end() :]
    text = text.replace("**", "")
    for stop in re.finditer(r"\.\s+(?=[A-Z(])", text):
        word = re.search(r"([\w.]+)$", text[: stop.start()])
        if word is None or word.group(1) not in _ABBREVIATIONS:
            text = text[: stop.start() + 1]
            break
    sentence = lead + text
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


_TEX = {r"\pm": "±", r"\,": " ", r"\leq": "≤", r"\geq": "≥", r"\neq": "≠", r"\infty": "∞"}


def _tex(math: str) -> str:
    """Inline TeX as plain text: common symbols, ``\\mathrm{x}`` as ``x``, ``\\theta`` as
    ``theta``."""
    for tex, plain in _TEX.items():
        math = math.replace(tex, plain)
    math = re.sub(r"\\(?:mathrm|mathbf|mathcal|bar|tilde|hat)\{([^{}]*)\}", r"\1", math)
    return re.sub(r"\\([A-Za-z]+)", r"\1", math)


def figure_options(figure: Figure) -> list[tuple[str, str]]:
    """The options a view may pass to a figure: its keyword arguments and their defaults."""
    try:
        signature = inspect.signature(figure.plot)
    except (TypeError, ValueError, ImportError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = list(signature.parameters.values())[1:]
    return [
        (p.name, "required" if p.default is p.empty else _value(p.default))
        for p in params
        if p.kind in kinds
    ]


def figure_drawn(figure: Figure) -> str:
    """How a figure is drawn: once per cell or once per sweep (or view), from which dataset."""
    where = "per cell" if figure.per_cell else "per sweep"
    return f"{where}, from the {'summary' if figure.source == 'summary' else 'cells'}"


def figure_axes(figure: Figure) -> str:
    """The axes a figure declares it draws (``Figure.axes`` where declared), else empty."""
    axes = getattr(figure, "axes", None)
    if not axes:
        return ""
    return ", ".join(str(a) for a in axes)


def experiment_list() -> str:
    """Every registered experiment with its title and source, one per line."""
    names = list(experiments.names())
    width = max(len(n) for n in names)
    lines = ["experiments (python3 run.py params EXPERIMENT for one's parameters and figures):"]
    for name in names:
        exp = experiments.get(name)
        lines.append(f"  {name:<{width}}  {exp.title}")
    return "\n".join(lines) + "\n"


def _columns(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Rows as left-aligned text columns (the last column is not padded)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]
        for r in rows
    ]


def _param_rows(params: Sequence[Param]) -> list[list[str]]:
    head = ["name", "type", "default", "allowed", "units", "meaning"]
    body = [
        [p.name, kind_text(p), default_text(p), allowed_text(p), p.units, p.long_name]
        for p in params
    ]
    return [head, *body]


def experiment_text(name: str) -> str:
    """One experiment for a terminal: title, source, axes, settings and figures."""
    exp = experiments.get(name)
    lines = [f"{exp.name}: {exp.title}", f"source: {exp.source}", ""]
    lines.append("axes (a scalar or a list in a sweep; the sweep is the product of the lists):")
    lines += _columns(_param_rows(exp.axes)) if exp.axes else ["  (none)"]
    lines += ["", "settings (one value per sweep, shared by its cells):"]
    lines += _columns(_param_rows(exp.settings)) if exp.settings else ["  (none)"]
    lines += [
        "",
        f"figures (drawn unless a sweep lists its own: {_names(exp.default_figures)}):",
    ]
    for fig_name, figure in exp.figures.items():
        lines.append(f"  {fig_name} ({figure_drawn(figure)})")
        axes = figure_axes(figure)
        if axes:
            lines.append(f"      axes: {axes}")
        options = figure_options(figure)
        if options:
            lines.append("      options: " + ", ".join(f"{k}={v}" for k, v in options))
        lines += textwrap.wrap(
            caption_sentence(figure.caption, limit=10_000),
            width=100,
            initial_indent="      ",
            subsequent_indent="      ",
        )
    return "\n".join(lines) + "\n"


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) or "none"


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def experiment_markdown(name: str) -> str:
    """One experiment as markdown: a heading, its axes table, its settings and its figures."""
    exp = experiments.get(name)
    out = [f"### `{exp.name}`: {exp.title}", "", f"Source: {_cell(exp.source)}.", ""]
    out += ["| axis | type | default | allowed | units | meaning |", "|---|---|---|---|---|---|"]
    for p in exp.axes:
        cells = [_code(p.name), kind_text(p), _cell(default_text(p)), _cell(allowed_text(p))]
        out.append("| " + " | ".join([*cells, p.units, _cell(p.long_name)]) + " |")
    settings = ", ".join(f"`{p.name}` ({_cell(default_text(p))})" for p in exp.settings)
    out += ["", f"Settings (one value per sweep; default in brackets): {settings or 'none'}.", ""]
    out += ["| figure | drawn | default | options | shows |", "|---|---|---|---|---|"]
    for fig_name, figure in exp.figures.items():
        options = ", ".join(f"`{k}={v}`" for k, v in figure_options(figure))
        default = "yes" if fig_name in exp.default_figures else ""
        row = [_code(fig_name), figure_drawn(figure), default, _cell(options)]
        out.append("| " + " | ".join([*row, _cell(caption_sentence(figure.caption))]) + " |")
    return "\n".join(out) + "\n"


def summary_markdown(names: Sequence[str]) -> str:
    """One table row per experiment: name, title, source, axes and figures."""
    out = ["| experiment | what | source | axes | figures |", "|---|---|---|---|---|"]
    for name in names:
        exp = experiments.get(name)
        axes = ", ".join(p.name for p in exp.axes)
        figures = ", ".join(exp.figures)
        row = [_code(name), _cell(exp.title), _cell(exp.source), _cell(axes), _cell(figures)]
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


def builtin_names() -> list[str]:
    """The experiments of the package itself (not those of a config's experiment_modules)."""
    return [
        name for name, module in experiments.REGISTRY.items() if module.startswith("weightdyn.")
    ]


def markdown(names: Sequence[str] | None = None) -> str:
    """The README's generated block: the tables of ``names`` (default: the package's own
    experiments), between the markers."""
    chosen = list(names) if names is not None else builtin_names()
    parts = [
        BEGIN,
        f"<!-- generated from the registry by `{REGENERATE}`; do not edit by hand -->",
        "",
    ]
    parts += [summary_markdown(chosen)]
    parts += [experiment_markdown(name) for name in chosen]
    return "\n".join(parts) + END + "\n"


def replace_generated(text: str, generated: str) -> str:
    """``text`` with the block from :data:`BEGIN` to :data:`END` (inclusive) replaced."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} ... {END} block")
    return text[:start] + generated.rstrip("\n") + text[end + len(END) :]


def generated_block(text: str) -> str:
    """The block of ``text`` from :data:`BEGIN` to :data:`END` (inclusive), with a newline."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} ... {END} block")
    return text[start : end + len(END)] + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 run.py params",
        description="An experiment's parameters (axes and settings) and figures, "
        "or the list of experiments.",
    )
    parser.add_argument("experiment", nargs="?", help="a registered experiment (default: list)")
    parser.add_argument(
        "--module",
        action="append",
        default=[],
        help="also register the experiments of this importable module (as the config's "
        "experiment_modules); repeatable",
    )
    parser.add_argument("--markdown", action="store_true", help="the README's markdown tables")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="README", help="with --markdown: replace the tables")
    group.add_argument("--check", metavar="README", help="with --markdown: exit 1 if stale")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    args = _parser().parse_args(argv)
    try:
        own = [name for module in args.module for name in experiments.register_module(module)]
        names = [args.experiment] if args.experiment else list(dict.fromkeys(builtin_names() + own))
        if args.experiment:
            experiments.get(args.experiment)
    except experiments.ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    if not args.markdown:
        sys.stdout.write(experiment_text(args.experiment) if args.experiment else experiment_list())
        return 0
    generated = markdown(names)
    if args.write or args.check:
        path = args.write or args.check
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if args.check:
            stale = generated_block(text) != generated
            print(f"{path}: experiment tables {'stale; run ' + REGENERATE if stale else 'current'}")
            return 1 if stale else 0
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(replace_generated(text, generated))
        return 0
    sys.stdout.write(generated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
