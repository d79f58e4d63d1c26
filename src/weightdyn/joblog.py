"""Logging for workflow jobs: progress goes to the job's log file, never to the terminal."""

from __future__ import annotations

import logging
import os


def job_logger(name: str, path: str | os.PathLike) -> logging.Logger:
    """A logger writing timestamped lines to ``path`` (the rule's log file) only."""
    logger = logging.getLogger(f"weightdyn.job.{name}")
    logger.handlers.clear()
    logger.propagate = False
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return logger
