"""Every Snakemake (and multiprocessing) internal the workflow leans on, checked on the installed
release without running a workflow.

The local speed and behaviour of a run rest on these: a release that renamed one would silently
bring back overhead (the workflow's guards then skip their workaround) or break status reading.
pyproject.toml bounds snakemake to the releases this module passed on; raise the bound only once
it passes on a newer one. Each ``check_<name>`` raises AssertionError with a message naming the
internal, where the workflow uses it and the workaround that needs it; the tests call them, and
:func:`test_a_missing_internal_fails_its_check` shows that a check does fail.
"""

from __future__ import annotations

import inspect
import multiprocessing.process
import textwrap
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import snakemake
import snakemake.api  # first, as the CLI does: snakemake.workflow and .dag import each other
from snakemake.dag import DAG
from snakemake.logging import DefaultFormatter, LoggerManager
from snakemake.persistence.file import FilePersistence
from snakemake.scheduling.job_scheduler import JobScheduler
from snakemake.workflow import Workflow
from snakemake_interface_executor_plugins.settings import ExecMode

from weightdyn import status


def _require(ok: object, internal: str, where: str, why: str, found: str = "") -> None:
    """Raise AssertionError naming ``internal``, its use ``where`` and the workaround ``why``
    unless ``ok``."""
    if ok:
        return
    detail = f" ({found})" if found else ""
    raise AssertionError(
        f"Snakemake {snakemake.__version__}: internal {internal} is gone or changed{detail}. "
        f"Used by {where}: {why}. Adapt that code before raising the snakemake bound in "
        "pyproject.toml (tested up to the bound's release)."
    )


def _source(obj: Any) -> str:
    """Source text of a function or class, dedented ('' if it has none, e.g. patched away)."""
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        return ""


def _in_order(text: str, *parts: str) -> bool:
    """Whether every one of ``parts`` occurs in ``text``, each after the one before."""
    pos = 0
    for part in parts:
        pos = text.find(part, pos)
        if pos < 0:
            return False
        pos += len(part)
    return True


def _workflow(tmp_path: Path, configfiles: tuple[Path, ...] = ()) -> Workflow:
    """A Workflow as Snakemake's API builds it for a one-rule Snakefile (nothing parsed or run)."""
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    snakefile = tmp_path / "Snakefile"
    snakefile.write_text('rule all:\n    output: "a"\n    shell: "touch a"\n')
    with snakemake.api.SnakemakeApi(OutputSettings(quiet=None)) as api:
        wapi = api.workflow(
            resource_settings=ResourceSettings(cores=2),
            config_settings=ConfigSettings(configfiles=list(configfiles)),
            snakefile=snakefile,
            workdir=tmp_path,
        )
        return wapi._workflow


# ---- scheduling: the job rate limiter, the in_process resource, the selector


def check_job_rate_limiter() -> None:
    """drop_job_rate_limiter (common.smk, onstart) sets ``workflow.scheduler.job_rate_limiter``
    to None; Snakemake must then select without a limit and arm no re-evaluation timer."""
    where = "drop_job_rate_limiter (workflow/rules/common.smk, onstart)"
    why = (
        "the limiter's timers re-select every ready job hundreds of times a second near the end "
        "of a run, half a core (docs/design.md)"
    )
    internal = "JobScheduler.job_rate_limiter"
    init, select = _source(JobScheduler.__init__), _source(JobScheduler.job_selector)
    _require("self.job_rate_limiter =" in init, internal, where, why, "not set in __init__")
    _require(
        _in_order(select, "if self.job_rate_limiter is None:", "return run_selector("),
        f"{internal} (its None branch in JobScheduler.job_selector)",
        where,
        why,
        "no unlimited branch",
    )
    _require(
        _in_order(
            _source(JobScheduler.schedule),
            "if self.job_rate_limiter is not None:",
            "self._schedule_reevalutation(",
        ),
        f"{internal} (guarding the timer of JobScheduler.schedule)",
        where,
        why,
        "the timer is armed without the limiter",
    )
    _require(
        _in_order(
            _source(Workflow.execute),
            "self.scheduler = JobScheduler(",
            "self._onstart(",
            "self.scheduler.schedule()",
        ),
        "Workflow.scheduler built before onstart, scheduling after it",
        where,
        why,
        "onstart no longer sees the scheduler before its first selection",
    )


def check_register_resource(tmp_path: Path) -> None:
    """register_in_process_resource (common.smk) registers ``in_process`` = 1 with
    ``workflow.register_resource`` unless ``workflow.global_resources`` has it (--resources)."""
    where = "register_in_process_resource (workflow/rules/common.smk)"
    why = (
        "one in-process job (data, light_cell, merge, summary) starts at a time, so that none "
        "holds a core while it waits for the in-process lock"
    )
    internal = "Workflow.register_resource"
    register = getattr(Workflow, "register_resource", None)
    _require(callable(register), internal, where, why, "no such method")
    params = list(inspect.signature(register).parameters)
    _require(params[:3] == ["self", "name", "value"], internal, where, why, f"takes {params}")
    wf = _workflow(tmp_path)
    _require(
        "in_process" not in wf.global_resources,
        "Workflow.global_resources (membership)",
        where,
        why,
    )
    wf.register_resource("in_process", 1)
    expanded = dict(
        wf.global_resources.expand_items(constraints={}, evaluate=None, expand_sized=False)
    )
    _require(
        "in_process" in wf.global_resources and expanded.get("in_process") == 1,
        "Workflow.global_resources (what JobScheduler limits by)",
        where,
        why,
        f"after register_resource: {expanded}",
    )
    _require(
        "workflow.global_resources.expand_items(" in _source(JobScheduler.__init__),
        "JobScheduler's limits taken from Workflow.global_resources",
        where,
        why,
    )


def check_selector_no_free_cores() -> None:
    """The reason the in-process jobs claim a core (docs/design.md, "One in-process job at a
    time"): ``JobScheduler.job_selector`` returns no job at all while every core is taken, so
    jobs of ``threads: 0`` would starve behind long cells."""
    _require(
        _in_order(
            _source(JobScheduler.job_selector), 'if self.resources["_cores"] == 0:', "return []"
        ),
        'JobScheduler.job_selector returning [] when resources["_cores"] == 0',
        "the in-process rules' `threads: 1` (workflow/rules/sweep.smk; docs/design.md)",
        "claiming no core (threads: 0) was dropped because of this early return; without it "
        "that faster choice may be worth measuring again",
    )


def check_run_jobs_in_threads() -> None:
    """With ``force-use-threads`` (profiles/default) the local executor runs a ``run:`` job in
    one of its threads (``run_wrapper``), not as a Snakemake process of its own."""
    from snakemake.executors.local import Executor

    _require(
        _in_order(
            _source(Executor.run_single_job),
            "self.use_threads",
            "self.pool.submit(",
            "run_wrapper",
            "self.spawn_job",
        ),
        "the local Executor.run_single_job running run: jobs in threads under use_threads",
        "profiles/default/config.yaml (force-use-threads) and scripts/local_jobs.py",
        "data sets, light cells, merges and summaries run inside the Snakemake process, where "
        "a spawned job would pay about 2 CPU-s to start",
    )
    _require(
        "self.use_threads = self.workflow.execution_settings.use_threads"
        in _source(Executor.__post_init__),
        "ExecutionSettings.use_threads (--force-use-threads)",
        "profiles/default/config.yaml (force-use-threads)",
        "the in-process jobs above",
    )


# ---- the report's refusal of outdated results


def check_build_dag() -> None:
    """refuse_outdated_report (common.smk) replaces the instance's ``_build_dag`` and then reads
    ``workflow.dag.needrun_jobs()`` and ``dag.reason(job)``."""
    where = "refuse_outdated_report and outdated_report_message (workflow/rules/common.smk)"
    why = "`--report` stops, naming the outdated outputs, instead of reporting stale results"
    build = getattr(Workflow, "_build_dag", None)
    _require(callable(build), "Workflow._build_dag", where, why, "no such method")
    params = list(inspect.signature(build).parameters)
    _require(params == ["self"], "Workflow._build_dag", where, why, f"takes {params}")
    _require(
        "self._build_dag()" in _source(Workflow.create_report),
        "Workflow.create_report calling self._build_dag()",
        where,
        why,
        "the report no longer builds its DAG through the wrapped method",
    )
    _require(isinstance(getattr(Workflow, "dag", None), property), "Workflow.dag", where, why)
    needrun = getattr(DAG, "needrun_jobs", None)
    _require(callable(needrun), "DAG.needrun_jobs", where, why, "no such method")
    _require(
        all(p.default is not inspect.Parameter.empty for p in _params(needrun)[1:]),
        "DAG.needrun_jobs()",
        where,
        why,
        "now needs arguments",
    )
    reason = getattr(DAG, "reason", None)
    _require(
        callable(reason) and [p.name for p in _params(reason)] == ["self", "job"],
        "DAG.reason(job)",
        where,
        why,
    )


def _params(func: Callable[..., Any]) -> list[inspect.Parameter]:
    return list(inspect.signature(func).parameters.values())


# ---- config files and execution modes


def check_configfiles(tmp_path: Path) -> None:
    """``workflow.configfiles`` (every config file loaded, --configfile and the ``configfile:``
    directive) and ``workflow.config_settings.configfiles`` (--configfile only)."""
    where = "config_files, _expand and recovery_command (workflow/rules/common.smk)"
    why = (
        "the config's name (its agreement table), the YAML key check of every loaded file, "
        "and the --configfile of the recovery command a refused report or an interrupt prints"
    )
    given, default = tmp_path / "given.yaml", tmp_path / "default.yaml"
    given.write_text("a: 1\n")
    default.write_text("b: 2\n")
    wf = _workflow(tmp_path, (given,))
    settings = getattr(getattr(wf, "config_settings", None), "configfiles", None)
    _require(
        settings is not None and [Path(p) for p in settings] == [given],
        "Workflow.config_settings.configfiles",
        where,
        why,
        f"found {settings!r}",
    )
    loaded = getattr(wf, "configfiles", None)
    _require(
        isinstance(loaded, list) and [Path(p) for p in loaded] == [given],
        "Workflow.configfiles",
        where,
        why,
        f"found {loaded!r}",
    )
    wf.configfile(str(default))  # what the Snakefile's `configfile:` directive calls
    _require(
        [Path(p) for p in wf.configfiles] == [given, default],
        "Workflow.configfiles (the configfile: directive appending to it)",
        where,
        why,
        f"found {wf.configfiles!r}",
    )


def check_exec_modes(tmp_path: Path) -> None:
    """``workflow.non_local_exec``, ``remote_exec``, ``subprocess_exec`` and ``cores``."""
    where = (
        "cell_threads, stop_on_interrupt (common.smk); rules cell and figure (local_jobs.cell, "
        "local_jobs.figure)"
    )
    why = (
        "a cluster run or a job Snakemake spawned runs its cell in its own process and keeps "
        "Snakemake's signal handling; a local run forks cells and figures from the warm server "
        "and gives a cell two threads only with 4 cores or more"
    )
    for name in ("non_local_exec", "remote_exec", "subprocess_exec", "cores"):
        _require(
            isinstance(getattr(Workflow, name, None), property), f"Workflow.{name}", where, why
        )
    wf = _workflow(tmp_path)
    flags = {n: getattr(wf, n) for n in ("non_local_exec", "remote_exec", "subprocess_exec")}
    _require(
        flags == dict.fromkeys(flags, False) and wf.cores == 2,
        "Workflow exec-mode flags of a local run",
        where,
        why,
        f"found {flags}, cores {wf.cores}",
    )
    _require(
        {"REMOTE", "SUBPROCESS", "DEFAULT"} <= set(ExecMode.__members__),
        "ExecMode (REMOTE, SUBPROCESS, DEFAULT)",
        where,
        why,
    )


# ---- signals: stop_on_interrupt (onstart) and report_interruption (onerror)


def check_signal_handling() -> None:
    """stop_on_interrupt installs SIGINT/SIGTERM handlers at onstart that raise
    KeyboardInterrupt in the main thread; Snakemake must install its own SIGTERM handler before
    onstart (so ours replaces it), end the scheduling on KeyboardInterrupt with a failure, and
    then run the onerror hook."""
    where = "stop_on_interrupt and report_interruption (workflow/rules/common.smk)"
    why = (
        "Ctrl-C or SIGTERM stops the running cells at once and prints one line with the resume "
        "command, instead of letting them run up to ten minutes"
    )
    _require(
        "signal.signal(signal.SIGTERM" in _source(JobScheduler.__init__),
        "JobScheduler.__init__ installing its SIGTERM handler",
        where,
        why,
    )
    _require(
        _in_order(
            _source(JobScheduler.schedule),
            "except (KeyboardInterrupt, SystemExit):",
            "self._executor.cancel()",
            "return False",
        ),
        "JobScheduler.schedule ending on KeyboardInterrupt (cancel, return False)",
        where,
        why,
    )
    _require(
        _in_order(
            _source(Workflow.execute),
            "self.scheduler = JobScheduler(",
            "self._onstart(",
            "success = self.scheduler.schedule()",
            "self._onerror(",
        ),
        "Workflow.execute's order: scheduler, onstart, schedule, onerror on failure",
        where,
        why,
    )


# ---- the warm server's processes (src/weightdyn/forked.py)


def check_forkserver_children() -> None:
    """forked.run takes its child out of ``multiprocessing.process._children``, the set that
    ``Process.start`` polls (``_cleanup``), and preloads ``snakemake.cli``, the module the
    ``snakemake`` script runs (which every forked child re-runs as ``__main__``)."""
    where = "weightdyn.forked.run and weightdyn.forked.PRELOAD (src/weightdyn/forked.py)"
    children = getattr(multiprocessing.process, "_children", None)
    _require(
        isinstance(children, set)
        and _in_order(_source(multiprocessing.process.BaseProcess.start), "_cleanup()")
        and "_children" in _source(multiprocessing.process._cleanup),
        "multiprocessing.process._children (polled by Process.start)",
        where,
        "another job's thread would read a finished child's exit code first (exit code 255)",
    )
    scripts = metadata.entry_points(group="console_scripts", name="snakemake")
    _require(
        [e.value for e in scripts] == ["snakemake.cli:main"],
        "the snakemake script's module snakemake.cli",
        where,
        "preloaded so that a forked child re-running the launcher's __main__ costs nothing "
        "(0.65 CPU-s per child otherwise)",
        f"entry point {[e.value for e in scripts]}",
    )


# ---- what status.py reads from .snakemake/


def check_persistence_layout(tmp_path: Path) -> None:
    """``.snakemake/{incomplete,metadata,locks}`` and the record file names of
    ``FilePersistence._record_path`` (base64 of the output path, split into ``@`` folders)."""
    where = "record_path, incomplete_markers, snakemake_active (src/weightdyn/status.py)"
    why = "run.py status tells running, queued and done jobs apart from Snakemake's records"
    init = _source(FilePersistence.__init__)
    for name, attr in (("locks", "_lockdir"), ("metadata", "_metadata_path")):
        _require(
            f'self.{attr} = os.path.join(self.path, "{name}")' in init,
            f"FilePersistence.{attr} (.snakemake/{name})",
            where,
            why,
        )
    _require(
        'self._incomplete_path = os.path.join(self.path, "incomplete")' in init
        and '"migration_underway"' in init,
        "FilePersistence._incomplete_path (.snakemake/incomplete, migration_underway)",
        where,
        why,
    )
    persistence = object.__new__(FilePersistence)
    persistence._max_len = None
    root = tmp_path / ".snakemake" / "incomplete"
    root.mkdir(parents=True)
    for key in ("results/a.nc", "results/cells/" + "x" * 400 + ".nc"):
        try:
            theirs = Path(persistence._record_path(str(root), key))
        except (AttributeError, TypeError) as err:
            theirs = Path(f"{type(err).__name__}: {err}")
        ours = status.record_path(tmp_path, "incomplete", key)
        _require(
            theirs == ours,
            "FilePersistence._record_path (record file names)",
            where,
            why,
            f"{theirs} against {ours}",
        )
        ours.parent.mkdir(parents=True, exist_ok=True)
        ours.touch()
    decoded = set(status.incomplete_markers(tmp_path))
    _require(
        decoded == {"results/a.nc", "results/cells/" + "x" * 400 + ".nc"},
        "the base64 record names",
        where,
        why,
        f"read back {decoded}",
    )


def check_log_files(tmp_path: Path) -> None:
    """The run's log ``.snakemake/log/<time>.snakemake.log`` and its failed-job blocks
    (``Error in rule R:`` then ``    output: a, b``), and ``--summary``'s plan column."""
    where = "failed_outputs and snakemake_plan (src/weightdyn/status.py)"
    why = "run.py status marks the jobs of the newest run's log failed, and pending ones planned"
    _require(
        _in_order(
            _source(LoggerManager.setup_logfile),
            '".snakemake", "log"',
            '".snakemake.log"',
        ),
        "LoggerManager.setup_logfile (.snakemake/log/*.snakemake.log)",
        where,
        why,
    )
    formatter = object.__new__(DefaultFormatter)
    formatter.show_failed_logs = False
    msg = {
        "rule_name": "cell",
        "msg": None,
        "rule_msg": None,
        "jobid": 3,
        "input": ["results/data/d.nc"],
        "output": ["results/cells/e/a.nc", "results/cells/e/b.nc"],
        "log": ["logs/cells/e/a.log"],
        "conda_env": None,
        "shellcmd": None,
        "aux": {},
    }
    try:
        lines = formatter._format_job_error(msg)
    except (AttributeError, KeyError, TypeError) as err:
        lines = [f"{type(err).__name__}: {err}"]
    logs = tmp_path / ".snakemake" / "log"
    logs.mkdir(parents=True)
    (logs / "2026-01-01T000000.000000.snakemake.log").write_text("\n".join(lines) + "\n")
    failed = status.failed_outputs(tmp_path)
    _require(
        failed == {"results/cells/e/a.nc", "results/cells/e/b.nc"},
        "DefaultFormatter._format_job_error (the log's Error in rule / output lines)",
        where,
        why,
        f"read {failed} from {lines}",
    )
    _require(
        _in_order(
            _source(DAG.summary),
            r'"output_file\tdate\trule\tlog-file(s)\tstatus\tplan"',
            '"update pending"',
        ),
        "DAG.summary's columns (plan sixth, 'update pending')",
        where,
        why,
    )


# ---- the tests


def test_job_rate_limiter() -> None:
    check_job_rate_limiter()


def test_register_resource(tmp_path: Path) -> None:
    check_register_resource(tmp_path)


def test_selector_no_free_cores() -> None:
    check_selector_no_free_cores()


def test_run_jobs_in_threads() -> None:
    check_run_jobs_in_threads()


def test_build_dag() -> None:
    check_build_dag()


def test_configfiles(tmp_path: Path) -> None:
    check_configfiles(tmp_path)


def test_exec_modes(tmp_path: Path) -> None:
    check_exec_modes(tmp_path)


def test_signal_handling() -> None:
    check_signal_handling()


def test_forkserver_children() -> None:
    check_forkserver_children()


def test_persistence_layout(tmp_path: Path) -> None:
    check_persistence_layout(tmp_path)


def test_log_files(tmp_path: Path) -> None:
    check_log_files(tmp_path)


def _no_limiter_branch(self: JobScheduler, jobs: Any) -> list[Any]:
    return []


@pytest.mark.parametrize(
    ("remove", "check", "internal"),
    [
        (
            lambda mp: mp.delattr(Workflow, "register_resource"),
            check_register_resource,
            "Workflow.register_resource",
        ),
        (
            lambda mp: mp.setattr(JobScheduler, "job_selector", _no_limiter_branch),
            lambda _: check_job_rate_limiter(),
            "JobScheduler.job_rate_limiter",
        ),
        (
            lambda mp: mp.delattr(Workflow, "_build_dag"),
            lambda _: check_build_dag(),
            "Workflow._build_dag",
        ),
        (
            lambda mp: mp.delattr(FilePersistence, "_record_path"),
            check_persistence_layout,
            r"FilePersistence._record_path",
        ),
    ],
    ids=["register_resource", "job_rate_limiter", "build_dag", "record_path"],
)
def test_a_missing_internal_fails_its_check(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    remove: Callable[[pytest.MonkeyPatch], None],
    check: Callable[[Path], None],
    internal: str,
) -> None:
    """With the internal patched away the check fails, naming it, its use and the workaround."""
    remove(monkeypatch)
    with pytest.raises(AssertionError, match=internal.replace(".", r"\.")) as err:
        check(tmp_path)
    assert "Used by " in str(err.value) and "pyproject.toml" in str(err.value)
