"""Job processes forked from a warm server instead of started afresh.

A cell job in a fresh process paid about 1.5 CPU-s to start Python and import numpy, scipy, xarray,
netCDF4, numba and the package before it computed anything, and Snakemake about 0.8 CPU-s more to
write and spawn its script: over the 150 cell jobs of the default config, a third of their CPU
time. Here one server process (multiprocessing's ``forkserver``) imports all of that once, and
every job is a fork of it: still a process of its own (its own GIL, HDF5 library and numba thread
pool; a crash or a signal ends that job only), started in about 40 ms.

A job process dies at once on SIGINT or SIGTERM (their default action: no traceback, and a numba
kernel that never returns to Python cannot delay it), so a terminal's Ctrl-C to the whole process
group stops it; :func:`stop_all` sends SIGTERM to every job process of this one, for a signal
that only Snakemake received (``kill PID``, run.py passing on its own).

The server is started by the first job and ends with the process that started it. A forked child
re-runs the parent's ``__main__`` script (multiprocessing's rule for scripts; Python 3.11 does not
honour ``"__main__"`` in the preload list), which for Snakemake's launcher is an import of
``snakemake.cli``: it is preloaded too, so that the re-run costs nothing.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from multiprocessing.context import ForkServerContext
from typing import Any

#: what every job imports, loaded once by the server
PRELOAD = (
    "snakemake.cli",
    "numpy",
    "scipy.linalg",
    "xarray",
    "netCDF4",
    "numba",
    "threadpoolctl",
    "weightdyn.experiments",
    "weightdyn.io",
    "weightdyn.joblog",
)

#: a job process stopped by a signal leaves a semaphore (numba's lock that starts its threads)
#: registered with multiprocessing's resource tracker, which removes it at the end of the run
#: and warns about it; that warning is not for the user. The tracker, started with the server,
#: takes its warning filters from this process's -W options.
TRACKER_WARNING = "ignore:resource_tracker:UserWarning"

_LOCK = threading.Lock()
_context: list[ForkServerContext] = []
_running: set[multiprocessing.Process] = set()  # the job processes not yet waited for
_stopped: list[int] = []  # the signal that stopped every job (stop_all), then how many


def _server(preload: Sequence[str]) -> ForkServerContext:
    """The forkserver context, its preload list set before the server first starts."""
    with _LOCK:
        if not _context:
            if TRACKER_WARNING not in sys.warnoptions:
                sys.warnoptions.append(TRACKER_WARNING)
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload([*PRELOAD, *preload])
            _context.append(ctx)
        return _context[0]


def run(target: Callable[..., None], *args: Any, preload: Sequence[str] = ()) -> int:
    """Run ``target(*args)`` in a process forked from the server and wait for it.

    ``target`` and ``args`` must be picklable (``target`` by its module and name); ``preload``
    adds modules to the server's imports (effective for the first call only). Returns the child's
    exit code: 0 on success, 1 after an exception (whose traceback the child wrote to its
    stderr), minus the signal number if a signal ended it (-SIGTERM without starting it once
    :func:`stop_all` was called).
    """
    proc = _server(preload).Process(target=_job, args=(target, *args))
    with _LOCK:
        if _stopped:
            return -signal.SIGTERM  # the run is being stopped: start nothing
        proc.start()
        _running.add(proc)
        # Process.start polls every other child multiprocessing knows of, reading the exit
        # code of a finished one from its pipe: from another job's thread that read races
        # with this thread's join, whose own read then finds the pipe empty (exit code 255,
        # seen on 200 toy cells). Only this thread may wait for its child.
        multiprocessing.process._children.discard(proc)
    try:
        proc.join()
    finally:
        with _LOCK:
            _running.discard(proc)
    return proc.exitcode


def _job(target: Callable[..., None], *args: Any) -> None:
    """The job process: SIGINT and SIGTERM end it at once (the server had ignored SIGINT, and
    Python would turn it into a KeyboardInterrupt and its traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    target(*args)


def stop_all(signum: int) -> int:
    """Stop every job process (SIGTERM) and start no more: the run was interrupted by signal
    ``signum``. Returns how many were stopped; only the first call acts."""
    with _LOCK:
        if _stopped:
            return 0
        procs = list(_running)
        _stopped.extend((signum, len(procs)))
    for proc in procs:
        try:
            os.kill(proc.pid, signal.SIGTERM)
        except ProcessLookupError:  # it had just ended
            pass
    return len(procs)


def stopped() -> int | None:
    """The signal that stopped the job processes (:func:`stop_all`), or None."""
    return _stopped[0] if _stopped else None


def stopped_jobs() -> int:
    """How many job processes :func:`stop_all` stopped (0 before it is called)."""
    return _stopped[1] if _stopped else 0
