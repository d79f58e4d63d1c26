"""Logging for workflow jobs: progress goes to the job's log file, never to the terminal."""

from __future__ import annotations

import atexit
import logging
import os
import resource
import sys
import time
import traceback

import psutil


def job_logger(name: str, path: str | os.PathLike) -> logging.Logger:
    """A logger writing timestamped lines to ``path`` (the rule's log file) only."""
    logger = logging.getLogger(f"weightdyn.job.{name}")
    logger.handlers.clear()
    logger.propagate = False
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    _log_uncaught(logger)
    atexit.register(_log_cost, logger)
    return logger


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
