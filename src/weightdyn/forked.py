"""Job processes forked from a warm server instead of started afresh.

A cell job in a fresh process paid about 1.5 CPU-s to start Python and import numpy, scipy, xarray,
netCDF4, numba and the package before it computed anything, and Snakemake about 0.8 CPU-s more to
write and spawn its script: over the 150 cell jobs of the default config, a third of their CPU
time. Here one server process (multiprocessing's ``forkserver``) imports all of that once, and
every job is a fork of it: still a process of its own (its own GIL, HDF5 library and numba thread
pool; a crash or a signal ends that job only), started in about 40 ms.

The server is started by the first job and ends with the process that started it. A forked child
re-runs the parent's ``__main__`` script (multiprocessing's rule for scripts; Python 3.11 does not
honour ``"__main__"`` in the preload list), which for Snakemake's launcher is an import of
``snakemake.cli``: it is preloaded too, so that the re-run costs nothing.
"""

from __future__ import annotations

import multiprocessing
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

_LOCK = threading.Lock()
_context: list[ForkServerContext] = []


def _server(preload: Sequence[str]) -> ForkServerContext:
    """The forkserver context, its preload list set before the server first starts."""
    with _LOCK:
        if not _context:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload([*PRELOAD, *preload])
            _context.append(ctx)
        return _context[0]


def run(target: Callable[..., None], *args: Any, preload: Sequence[str] = ()) -> int:
    """Run ``target(*args)`` in a process forked from the server and wait for it.

    ``target`` and ``args`` must be picklable (``target`` by its module and name); ``preload``
    adds modules to the server's imports (effective for the first call only). Returns the child's
    exit code: 0 on success, 1 after an exception (whose traceback the child wrote to its
    stderr), minus the signal number if a signal ended it.
    """
    proc = _server(preload).Process(target=target, args=args)
    with _LOCK:
        proc.start()
        # Process.start polls every other child multiprocessing knows of, reading the exit
        # code of a finished one from its pipe: from another job's thread that read races
        # with this thread's join, whose own read then finds the pipe empty (exit code 255,
        # seen on 200 toy cells). Only this thread may wait for its child.
        multiprocessing.process._children.discard(proc)
    proc.join()
    return proc.exitcode
