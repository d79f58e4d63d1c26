"""Logging for workflow jobs: progress goes to the job's log file, never to the terminal."""

from __future__ import annotations

import logging
import os
import sys
import traceback


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
    return logger


def _log_uncaught(logger: logging.Logger) -> None:
    """Write an error that ends the job to its log too (the terminal still gets the traceback)."""
    previous = sys.excepthook

    def hook(kind, err, tb) -> None:  # the signature of sys.excepthook
        logger.error("job failed: %s", "".join(traceback.format_exception_only(kind, err)).strip())
        previous(kind, err, tb)

    sys.excepthook = hook
