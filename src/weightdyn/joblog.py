"""Logging for workflow jobs: progress goes to the job's log file, never to the terminal."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import resource
import sys
import threading
import time
import traceback
from collections.abc import Iterator

import psutil

# Jobs run inside the Snakemake process (``run:`` rules) take turns: they are light, and one at a
# time keeps their logs apart and netCDF/HDF5, which is not thread-safe, on one thread.
_IN_PROCESS = threading.Lock()


def job_logger(name: str, path: str | os.PathLike) -> logging.Logger:
    """A logger writing timestamped lines to ``path`` (the rule's log file) only."""
    logger = _file_logger(f"weightdyn.job.{name}", path)
    _log_uncaught(logger)
    atexit.register(_log_cost, logger)
    return logger


def _file_logger(name: str, path: str | os.PathLike) -> logging.Logger:
    logger = logging.getLogger(name)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.propagate = False
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return logger


@contextlib.contextmanager
def in_process_job(name: str, path: str | os.PathLike) -> Iterator[logging.Logger]:
    """The logger of a job run inside the Snakemake process (a ``run:`` rule), one job at a time.

    Like :func:`job_logger`, but the job is a block, not a process: an error that ends it is
    written to the log before it propagates to Snakemake, and the closing ``cost:`` line counts
    this thread's CPU time and the block's wall time (the peak memory is the Snakemake process's).
    """
    with _IN_PROCESS:
        logger = _file_logger(f"weightdyn.in_process.{name}", path)
        start, before = time.time(), resource.getrusage(resource.RUSAGE_THREAD)
        try:
            with _failure_logged(logger):
                yield logger
        finally:
            logger.info(_thread_cost_line(time.time() - start, before))
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
                handler.close()


@contextlib.contextmanager
def job_process(
    name: str, path: str | os.PathLike, capture_output: bool
) -> Iterator[logging.Logger]:
    """The logger of a job that has a process to itself but is a block in it: a cell forked from
    the warm server (:mod:`weightdyn.forked`), or a cell run by a cluster job's Snakemake.

    An error that ends the block is written to the log before it propagates, and the closing
    ``cost:`` line is the process's (:func:`cost_line`; a forked process starts at its fork).
    With ``capture_output`` the process's stdout and stderr go to the log as well (a forked
    child's traceback and warnings, which would otherwise reach the terminal unattributed).
    """
    logger = _file_logger(f"weightdyn.job.{name}", path)
    if capture_output:
        sys.stdout.flush()
        sys.stderr.flush()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    try:
        with _failure_logged(logger):
            yield logger
    finally:
        logger.info(cost_line())


@contextlib.contextmanager
def _failure_logged(logger: logging.Logger) -> Iterator[None]:
    """An error that ends the block is written to the job's log before it propagates."""
    try:
        yield
    except BaseException as err:
        logger.error("job failed: %s", "".join(traceback.format_exception_only(err)).strip())
        raise


def _thread_cost_line(wall: float, before: resource.struct_rusage) -> str:
    after = resource.getrusage(resource.RUSAGE_THREAD)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return (
        f"cost: wall {wall:.2f} s, cpu {user + system:.2f} s "
        f"(user {user:.2f}, sys {system:.2f}), max rss {rss:.0f} MB (in the Snakemake process)"
    )


def cost_line() -> str:
    """What this process has cost so far: wall since it started, CPU and peak memory.

    CPU is user + system time of the process and of its finished children (``os.times``); the
    benchmark ``benchmarks/sweep_cost.py`` reads this line from every job log.
    """
    cpu = os.times()
    wall = time.time() - psutil.Process().create_time()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    user, system = cpu.user + cpu.children_user, cpu.system + cpu.children_system
    return (
        f"cost: wall {wall:.2f} s, cpu {user + system:.2f} s "
        f"(user {user:.2f}, sys {system:.2f}), max rss {rss:.0f} MB"
    )


def _log_cost(logger: logging.Logger) -> None:
    logger.info(cost_line())


def _log_uncaught(logger: logging.Logger) -> None:
    """Write an error that ends the job to its log too (the terminal still gets the traceback)."""
    previous = sys.excepthook

    def hook(kind, err, tb) -> None:  # the signature of sys.excepthook
        logger.error("job failed: %s", "".join(traceback.format_exception_only(kind, err)).strip())
        previous(kind, err, tb)

    sys.excepthook = hook
