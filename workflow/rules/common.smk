# The config expanded through the experiment registry (weightdyn.experiments, weightdyn.sweep):
# named sweeps -> cells, shared data sets, figure views. A bad config stops here, before any job,
# with a message naming the key (sweeps.<name>.<axis>) and what is allowed.
import functools
import os
import re
import shlex
import signal
import sys
from pathlib import Path

from weightdyn import experiments, forked, sweep
from weightdyn.configfile import check_files as check_config_files
from weightdyn.sweep import sorted_params
from weightdyn.codehash import code_hash, module_hash
from weightdyn.experiments import ConfigError

sys.path.insert(0, f"{workflow.basedir}/scripts")
import local_jobs  # the run: rules' jobs, in this process or forked from it (cell, figure)


def config_files():
    """The YAML files this run reads: every config file Snakemake loaded (--configfile, else the
    default config) and the checkout's profiles (Snakemake reads a profile before this file)."""
    profiles = sorted(Path(workflow.basedir).glob("profiles/*/config.yaml"))
    return [*workflow.configfiles, *profiles]


def _expand(config):
    try:
        check_config_files(config_files())
        style = sweep.check_config(config)
        sweeps = sweep.expand_sweeps(config)
        views = sweep.expand_views(config, sweeps)
        name = sweep.config_name(config, workflow.configfiles)
    except ConfigError as err:
        raise ValueError(f"invalid config: {err}") from None
    return style, sweeps, views, name


# NAME: this config's own outputs (the agreement table) are results/agreement/<NAME>.*
STYLE, SWEEPS, VIEWS, NAME = _expand(config)
FIGURE_FORMATS = STYLE["formats"]
EXPERIMENTS = {s.experiment: experiments.get(s.experiment) for s in SWEEPS.values()}
CELLS = {f"{c.experiment}/{c.id}": c for s in SWEEPS.values() for c in s.cells}
DATA = {}
for _cell in CELLS.values():
    _spec = EXPERIMENTS[_cell.experiment].data
    if _spec is not None:
        _keys = (*_spec.keys, *_spec.settings)
        DATA.setdefault(
            f"{_spec.name}/{sweep.data_id(EXPERIMENTS[_cell.experiment], _cell.params)}",
            (_cell.experiment, {k: _cell.params[k] for k in _keys}),
        )
# cells their experiment declares light (Experiment.light): rule light_cell runs them in this process
LIGHT_CELLS = {
    key
    for key, c in CELLS.items()
    if (light := EXPERIMENTS[c.experiment].light) and light(c.params)
}
SUMMARISED = sorted(n for n, s in SWEEPS.items() if EXPERIMENTS[s.experiment].summarize)


def _alternatives(names):
    return "|".join(re.escape(n) for n in sorted(names)) or "^$"


def cell_of(w):
    """The cell of a job of rule cell ({experiment}/{cell}) or light_cell ({light})."""
    return CELLS[w.light] if "light" in w.keys() else CELLS[f"{w.experiment}/{w.cell}"]


def cell_params(w):
    """Everything run_cell receives, in a stable order (a reordered config is no params change)."""
    return sorted_params(cell_of(w).params)


def cell_code(w):
    """Hash of the code the cell runs: a change to it reruns the cell (experiment_code)."""
    return experiment_code(cell_of(w).experiment)


def cell_data_path(w):
    """The shared data set a cell reads (none if its experiment declares none)."""
    cell = cell_of(w)
    return sweep.data_path(EXPERIMENTS[cell.experiment], cell.params) or []


def cell_request(w, attempt):
    """Cluster request of one cell, scaled with its size; grows with each retry."""
    cell = cell_of(w)
    exp = EXPERIMENTS[cell.experiment]
    if exp.resources is None:
        return {"mem_mb": 2000 * attempt, "runtime": 30 * attempt}
    return exp.resources(cell.params, attempt)


# Light jobs (data sets, light cells, merges and summaries inside this process; figures, forked)
# take a second or two: they go before any cell as soon as they are ready, so that a sweep's merge
# and figures are drawn while the long cells of other sweeps run, not all at the end.
IN_PROCESS_PRIORITY = 100000


def register_in_process_resource():
    """One in-process job at a time: the resource `in_process`, registered as 1 (the way
    Snakemake registers its own mutexes) unless the command line gives it.

    These jobs take turns on one lock (weightdyn.joblog). Each claims a core, so two of them
    could hold both cores while one merely waited for the lock: in the default config's first
    half minute, 117 data sets and 138 light cells kept 0.6 of 2 cores busy. With this resource
    one runs, beside a cell process. (Claiming no core was tried: Snakemake 9 selects no job at
    all while every core is taken, so behind long cells the light jobs starved.) Another
    Snakemake without `register_resource` keeps the lock alone."""
    register = getattr(workflow, "register_resource", None)
    if register is not None and "in_process" not in workflow.global_resources:
        register("in_process", 1)


register_in_process_resource()


def cell_priority(w):
    """Longest first (its run-time request, minutes): a long cell started last ends the run alone."""
    exp = EXPERIMENTS[cell_of(w).experiment]
    return 1 if exp.resources is None else cell_request(w, 1)["runtime"]


def cell_threads(w):
    """Threads of one cell: 2 for a long cell whose kernel splits its replicas (resources.py), on
    a cluster or with 4 local cores or more. On fewer a two-thread job waits until both cores are
    free at once, which the scheduler reaches only when no one-thread job is left: in a paper run
    on 2 cores eleven such cells started 75 min in and then ran one at a time."""
    threads = cell_request(w, 1).get("threads", 1)
    cluster = workflow.non_local_exec or workflow.remote_exec  # submitting, or inside a job
    return threads if cluster or workflow.cores >= 4 else 1


def sweep_source(name):
    """The file a sweep's figures and agreement rows read: its summary, else its merged cells."""
    return f"results/{name}.summary.nc" if name in SUMMARISED else f"results/{name}.nc"


def view_figure(w):
    """The figure declaration (its experiment's ``figures`` entry) a view draws."""
    view = VIEWS[w.view]
    return EXPERIMENTS[view.experiment].figures[view.figure]


def view_inputs(w):
    view = VIEWS[w.view]
    if view_figure(w).source == "summary":
        return [f"results/{s}.summary.nc" for s in view.sweeps]
    return [f"results/{s}.nc" for s in view.sweeps]


def view_cells(w):
    """Cell ids the view draws, in sweep order."""
    return [c.id for c in sweep.view_cells(VIEWS[w.view], SWEEPS)]


@functools.cache
def experiment_code(name):
    """Hash of the code a cell of experiment ``name`` runs (its module's import closure).

    Cached: the code does not change while the workflow runs, and hashing the closure for each
    of hundreds of jobs cost seconds per job of DAG building."""
    return module_hash(experiments.REGISTRY[name])


@functools.cache
def plots_code():
    """Hash of the plotting code (weightdyn.plots and what it imports)."""
    return code_hash("plots")


def figure_code(w):
    """Figures rerun when plotting code or their experiment's code changes, never otherwise."""
    return plots_code() + experiment_code(VIEWS[w.view].experiment)


def figure_report(files, caption, category, subcategory):
    """Figure outputs with the PNG (else the first format) marked for the report."""
    shown = next((f for f in files if f.endswith(".png")), files[0])
    flagged = report(shown, caption, category, subcategory, {"figure": "{view}"})
    return [flagged if f == shown else f for f in files]


def drop_job_rate_limiter(workflow):
    """Run without Snakemake's job rate limiter (--max-jobs-per-timespan, default 100/1s).

    It re-arms a timer at every scheduling pass, and each finished job starts one more chain of
    such timers, so that near the end of a 500-job run the scheduler re-selected jobs (every ready
    job's params, resources and input sizes) hundreds of times a second: half a core the jobs
    lacked (docs/design.md). Without it the scheduler selects when a job finishes, which is all
    a run needs; a cluster profile's `jobs` still bounds the jobs submitted at once. Snakemake 9
    internals, hence the guard: another version keeps its limiter."""
    scheduler = getattr(workflow, "scheduler", None)
    if getattr(scheduler, "job_rate_limiter", None) is not None:
        scheduler.job_rate_limiter = None


def targets():
    """Everything the config asks for: merged sweeps, summaries, figures, its agreement table."""
    out = [f"results/{name}.nc" for name in SWEEPS]
    out += [f"results/{name}.summary.nc" for name in SUMMARISED]
    out += [f"results/figures/{v}.{ext}" for v in VIEWS for ext in FIGURE_FORMATS]
    if SWEEPS:
        out.append(f"results/agreement/{NAME}.html")
    return out


# ---- the report (`snakemake --report`) shows up-to-date results only


def report_requested():
    """Whether this Snakemake writes a report (`--report [FILE]`; not `--report-after-run`,
    which brings every output up to date first)."""
    return any(a == "--report" or a.startswith("--report=") for a in sys.argv[1:])


def recovery_command(*args):
    """The command that brings this config's outputs up to date (its --configfile, if given),
    with ``args`` added."""
    cmd = ["python3", "run.py", "sweep", *args]
    for path in workflow.config_settings.configfiles:
        cmd += ["--configfile", os.path.relpath(path)]
    return shlex.join(cmd)


def _short(reason, width=100):
    """Snakemake's reason for a job, on one line of at most ``width`` characters."""
    text = " ".join(str(reason).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def outdated_report_message(dag):
    """What a report would show out of date (jobs the DAG would run, with Snakemake's reasons),
    or None if everything is up to date."""
    jobs = sorted((j for j in dag.needrun_jobs() if j.output), key=lambda j: str(j.output))
    if not jobs:
        return None
    lines = [f"  {', '.join(job.output)}: {_short(dag.reason(job))}" for job in jobs[:10]]
    if len(jobs) > 10:
        lines.append(f"  ... and {len(jobs) - 10} more jobs")
    return (
        f"no report written: {len(jobs)} job(s) of config {NAME!r} are out of date or not run, "
        "so it would show stale or missing results:\n"
        + "\n".join(lines)
        + f"\nbring them up to date first: {recovery_command()}"
    )


def refuse_outdated_report():
    """With `--report`: stop after the DAG is built, before a report is written, if a job whose
    output it would show is out of date (Snakemake itself writes the report from whatever files
    exist, without a word). Wraps the workflow's DAG building (Snakemake 9 internals: another
    version writes its report unchecked)."""
    build = getattr(workflow, "_build_dag", None)
    if build is None or not report_requested():
        return

    def build_then_check():
        build()
        message = outdated_report_message(workflow.dag)
        if message:
            print(message, file=sys.stderr)
            raise SystemExit(1)

    workflow._build_dag = build_then_check


refuse_outdated_report()


# ---- Ctrl-C and SIGTERM stop a local run within seconds, with one line of explanation


def stop_on_interrupt(workflow):
    """From now on (onstart) SIGINT and SIGTERM stop the running cells and figures at once
    (weightdyn.forked.stop_all: the processes forked from the warm server) and end the run the
    way Snakemake ends on Ctrl-C: it cancels, leaves the stopped jobs' outputs marked incomplete
    and runs the onerror hook (report_interruption). Snakemake alone would let them run to their end, up
    to ten minutes for a paper-size cell (on SIGTERM after "Will exit after finishing currently
    running jobs"). A second signal (a terminal's Ctrl-C and run.py passing it on) changes
    nothing. Local runs only: a cluster run keeps Snakemake's own handling."""
    if workflow.non_local_exec or workflow.remote_exec or workflow.subprocess_exec:
        return

    def interrupt(signum, frame):
        if forked.stopped() is None:
            forked.stop_all(signum)
            raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt)


def report_interruption():
    """After an interrupt (stop_on_interrupt): one line, what was stopped and how to resume,
    instead of Snakemake's "At least one job did not complete successfully"; the exit status
    is a signal's (130 for SIGINT, 143 for SIGTERM)."""
    signum = forked.stopped()
    if signum is None:
        return
    print(
        f"interrupted: {forked.stopped_jobs()} running jobs stopped, finished results kept; "
        f"resume with: {recovery_command('--rerun-incomplete')}",
        file=sys.stderr,
    )
    raise SystemExit(128 + signum)
