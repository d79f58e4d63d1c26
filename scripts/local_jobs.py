"""The jobs of the ``run:`` rules: the light ones run inside the Snakemake process (data,
light_cell, merge, summary), the cells of rule cell and the figures in processes forked from a
warm server (:mod:`weightdyn.forked`); both kinds of cell are written by :func:`write_cell`.

A data set takes milliseconds, and a merge, a summary or a light cell (Experiment.light: a theory
evaluation of small matrices) a second or less; but a job in a process of its own pays about 1.5
CPU-s to start Python and import xarray and the package, and Snakemake about 0.8 more to spawn
it. Over the 370 such jobs of the default config (figures then included) that was half of its
cost. These jobs run as threads of the Snakemake process instead, which has imported the package
to expand the config. They take turns (:func:`weightdyn.joblog.in_process_job`): no two use
netCDF/HDF5 at once, and only one of them is started at a time (the resource ``in_process``,
``register_in_process_resource`` in common.smk), so that none holds a core while it waits.
Locally this needs the default profile's ``force-use-threads`` (Snakemake otherwise spawns a
``run:`` job as a Snakemake process of its own); on a cluster they are localrules, run by the
submitting process. A figure draws for about two seconds, all of it holding the GIL: in the
Snakemake process the figures queued behind each other at the end of a run; forked, two draw at
once.

Each rule function takes the job's ``params``, ``wildcards``, ``input``, ``output``, ``log`` and
``rule`` it needs and writes its output atomically.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from weightdyn import experiments, forked, integrity, io
from weightdyn.joblog import in_process_job, job_process

Namedlist = Any  # Snakemake's params, wildcards, input, output, log: lists with named attributes


def data_set(
    params: Namedlist, wildcards: Namedlist, output: Namedlist, log: Namedlist, rule: str
) -> None:
    """Rule data: one shared data set of an experiment (e.g. the teacher-student set, Eq. 1)."""
    with in_process_job("data", log[0]) as logger:
        exp = experiments.get(params.experiment)
        spec = exp.data
        title = f"weightdyn data set {spec.name} {wildcards.data}"
        source = f"data set of {exp.name}: {exp.source}"
        _write(spec.make(params.params), output[0], params.params, title, source, rule)
        logger.info("wrote %s (%s)", output[0], params.params)


def merged_sweep(
    params: Namedlist,
    wildcards: Namedlist,
    input: Namedlist,
    output: Namedlist,
    log: Namedlist,
    rule: str,
) -> None:
    """Rule merge: the cells of one sweep along one `cell` dimension (weightdyn.io.merge_sweep)."""
    with in_process_job("merge", log[0]) as logger:
        exp = experiments.get(params.experiment)
        cells = params.cells
        datasets = _intact_cells(input, cells, exp.name, f"merge of {output[0]}")
        history = io.history_line(rule)
        merged = io.merge_sweep(
            exp, wildcards.sweep, datasets, cells, params.ids, params.settings, history
        )
        io.write_atomic(merged, output[0])
        logger.info("merged %d cells of sweep %s", len(datasets), wildcards.sweep)


def summary(
    params: Namedlist,
    wildcards: Namedlist,
    input: Namedlist,
    output: Namedlist,
    log: Namedlist,
    rule: str,
) -> None:
    """Rule summary: an experiment's fits over the cells of one sweep (Experiment.summarize)."""
    with in_process_job("summary", log[0]) as logger:
        exp = experiments.get(params.experiment)
        datasets = _intact_cells(input, params.cells, exp.name, f"summary {output[0]}")
        result = exp.summarize(datasets, params.cells, params.settings)
        identity = {"experiment": exp.name, "sweep": wildcards.sweep}
        title = f"weightdyn sweep {wildcards.sweep} summary: {exp.title}"
        _write(result, output[0], identity, title, exp.source, rule)  # our attributes win
        logger.info("summarised %d cells of sweep %s", len(datasets), wildcards.sweep)


def write_cell(
    name: str,
    cell_id: str,
    params: Mapping[str, Any],
    data: str | None,
    output: str,
    rule: str,
    progress: Callable[..., None],
) -> None:
    """Run one cell of experiment ``name`` (its ``run_cell``) and write it with its provenance."""
    exp = experiments.get(name)
    params = dict(params)
    progress("experiment %s, cell %s", name, cell_id)
    if exp.data is not None:
        integrity.require_intact({data: None}, f"cell {output}")
        params["data"] = exp.data.load(io.load(data))
    ds = exp.run_cell(params, progress)
    params.pop("data", None)
    if data:
        ds.attrs["data_file"] = str(data)
    title = f"weightdyn {name} cell {cell_id}: {exp.title}"
    _write(ds, output, {"experiment": name, **params}, title, exp.source, rule)
    progress("wrote %s", output)


def cell(
    params: Namedlist,
    wildcards: Namedlist,
    input: Namedlist,
    output: Namedlist,
    log: Namedlist,
    rule: str,
    threads: int,
    modules: Sequence[str],
    own_process: bool,
) -> None:
    """Rule cell: one cell of a sweep (its experiment's run_cell) in a process of its own.

    Locally the process is forked from a warm server (:mod:`weightdyn.forked`) that has imported
    the package, so the cell starts computing at once; ``own_process`` (a cluster job's
    Snakemake, or a Snakemake subprocess spawned for this job alone) runs it right here.
    ``modules`` are the config's experiment_modules; the kernels get ``threads`` threads.
    """
    job = (wildcards.experiment, wildcards.cell, dict(params.params), input.data or None)
    job += (output[0], log[0], rule, threads, tuple(modules))
    _run_job(_cell_job, job, own_process, f"cell {output[0]}", log[0])


def _cell_job(
    name: str,
    cell_id: str,
    params: Mapping[str, Any],
    data: str | None,
    output: str,
    log: str,
    rule: str,
    threads: int,
    modules: Sequence[str],
    capture_output: bool,
) -> None:
    """The body of rule cell in the process that runs it: numba and BLAS on ``threads``."""
    with job_process("cell", log, capture_output) as logger:
        experiments.register_modules(modules)
        experiments.get(name)  # its modules: imported here, or already by the fork server
        if "numba" in sys.modules:
            numba = sys.modules["numba"]
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        with threadpool_limits(threads):
            write_cell(name, cell_id, params, data, output, rule, logger.info)


def light_cell(
    params: Namedlist,
    wildcards: Namedlist,
    input: Namedlist,
    output: Namedlist,
    log: Namedlist,
    rule: str,
) -> None:
    """Rule light_cell: a light cell (Experiment.light), on one BLAS thread as rule cell's."""
    name, cell_id = wildcards.light.split("/", 1)
    with in_process_job("cell", log[0]) as logger, threadpool_limits(1):
        data = input.data or None
        write_cell(name, cell_id, params.params, data, output[0], rule, logger.info)


def figure(
    params: Namedlist,
    input: Namedlist,
    output: Namedlist,
    log: Namedlist,
    modules: Sequence[str],
    own_process: bool,
) -> None:
    """Rule figure: one view (an experiment's figure function on its merged cells or summary) in
    a process of its own, forked from the warm server as a cell is (:func:`cell`), so that two
    figures draw at once and none holds the Snakemake process's GIL or lock."""
    job = (params.experiment, params.figure, list(params.cells), dict(params.options))
    job += (params.dpi, list(input), list(output), log[0], tuple(modules))
    _run_job(_figure_job, job, own_process, f"figure {output[0]}", log[0])


def _figure_job(
    name: str,
    figure: str,
    cells: list[str],
    options: Mapping[str, Any],
    dpi: int,
    inputs: Sequence[str],
    outputs: Sequence[str],
    log: str,
    modules: Sequence[str],
    capture_output: bool,
) -> None:
    """The body of rule figure in the process that draws it (Agg, BLAS on one thread)."""
    from weightdyn.plots.common import save  # sets the Agg backend before pyplot is used
    from weightdyn.plots.facets import draw

    with job_process("figure", log, capture_output) as logger, threadpool_limits(1):
        experiments.register_modules(modules)
        spec = experiments.get(name).figures[figure]
        ds = _view_data(io.load_all(inputs), cells, spec.source)
        save(draw(name, figure, ds, options, dpi), outputs, dpi=dpi)  # panels per extra axis
        logger.info("wrote %s", ", ".join(outputs))


def _run_job(body: Callable[..., None], job: tuple, own_process: bool, what: str, log: str) -> None:
    """``body(*job, capture_output)`` right here (``own_process``: a cluster job's Snakemake, or
    a Snakemake subprocess spawned for this job alone), else in a process forked from the warm
    server; a failure raises, naming ``what`` and the job's log. A job stopped because the run
    was interrupted (``common.smk``, stop_on_interrupt) raises KeyboardInterrupt, which Snakemake
    takes for a cancelled job: no error message, no traceback."""
    if own_process:
        body(*job, capture_output=False)
        return
    code = forked.run(body, *job, True, preload=_server_preload())
    if code != 0 and forked.stopped() is not None:
        _log_stopped(log)
        raise KeyboardInterrupt  # Snakemake's quiet way out of a job it is cancelling
    if code != 0:
        raise RuntimeError(f"{what} failed (exit code {code}); its log: {log}")


def _log_stopped(log: str) -> None:
    """The last line of the log of a job stopped by an interrupt (forked.stop_all)."""
    with open(log, "a") as f:
        f.write(f"stopped: the run was interrupted (signal {forked.stopped()})\n")


def _server_preload() -> tuple[str, ...]:
    """What the fork server imports besides :data:`weightdyn.forked.PRELOAD`: this module, every
    registered experiment's code and the plotting stack (the first fork of a run decides)."""
    modules = sorted(set(experiments.REGISTRY.values()))
    return (__name__, *modules, "weightdyn.plots.common", "matplotlib.pyplot")


def _view_data(
    parts: list[xr.Dataset], cells: list[str], source: str
) -> xr.Dataset | list[xr.Dataset]:
    """The merged sweeps of a view, restricted to its cells (a cell in two sweeps drawn once);
    a summary (``source`` of the figure) as it is (a list for several)."""
    if source != "cells":
        return parts[0] if len(parts) == 1 else parts
    ds = io.concat_cells(parts)
    keep = np.isin(ds["cell_id"].values, cells)
    _, first = np.unique(ds["cell_id"].values, return_index=True)
    keep &= np.isin(np.arange(ds.sizes["cell"]), first)
    return ds.isel(cell=np.flatnonzero(keep))


def _intact_cells(
    paths: Sequence[str], cells: Sequence[Mapping[str, Any]], experiment: str, what: str
) -> list[xr.Dataset]:
    """The cell files of a merge or summary, loaded once every one is checked intact."""
    integrity.require_cells_intact(paths, cells, experiment, what)
    return io.load_all(paths)


def _write(
    ds: xr.Dataset, path: str, identity: Mapping[str, Any], title: str, source: str, rule: str
) -> None:
    """Write ``ds`` atomically with its provenance (weightdyn.io.provenance; it overrides
    attributes of the same name that ``ds`` carries)."""
    ds.attrs.update(
        io.provenance(identity, title=title, source=source, history=io.history_line(rule))
    )
    io.write_atomic(ds, path)
