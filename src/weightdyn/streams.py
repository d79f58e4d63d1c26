"""Progress reporting shared by the SGD/SGF drivers."""

from __future__ import annotations

import re
import time
from collections.abc import Callable


def clock(seconds: float) -> str:
    """``seconds`` as ``H:MM:SS`` (hours unbounded), the format of progress lines."""
    total = max(0, round(seconds))
    return f"{total // 3600}:{total // 60 % 60:02d}:{total % 60:02d}"


def progress_line(
    label: str, done: int, total: int, replicas: int, elapsed: float, final: bool = False
) -> str:
    """One progress line: steps done of total, step rate, elapsed time and ETA.

    ``label steps D/T (p%), r steps/s, rr replica-steps/s, elapsed H:MM:SS, ETA H:MM:SS``; the
    ETA assumes the rate so far holds (``?`` before the first step; ``0:00:00`` on the ``final``
    line, marked ``stopped`` when the loop ended early, e.g. diverged). ``weightdyn.status``
    parses these lines (:data:`PROGRESS_PATTERN`) to estimate the remaining time of a running job.
    """
    total = max(int(total), 1)
    elapsed = max(float(elapsed), 1e-12)
    rate = done / elapsed
    eta = clock(0 if final else (total - done) / rate) if done > 0 or final else "?"
    stopped = " (stopped)" if final and done < total else ""
    return (
        f"{label} steps {done}/{total} ({100.0 * done / total:.0f}%), {rate:.3g} steps/s, "
        f"{rate * replicas:.3g} replica-steps/s, elapsed {clock(elapsed)}, ETA {eta}{stopped}"
    )


#: what :func:`progress_line` writes (``done``, ``total``, ``rate``, ``elapsed``, ``eta`` groups)
PROGRESS_PATTERN = re.compile(
    r"steps (?P<done>\d+)/(?P<total>\d+) \(\d+%\), (?P<rate>\S+) steps/s, .*"
    r"elapsed (?P<elapsed>\d+:\d\d:\d\d), ETA (?P<eta>\d+:\d\d:\d\d|\?)"
)


class ProgressReporter:
    """Calls ``callback`` with a :func:`progress_line` about every 10 % of ``total`` steps and
    at least every ``interval`` seconds (so a long job's log shows a fresh rate and ETA)."""

    def __init__(
        self,
        callback: Callable[[str], None] | None,
        total: int,
        replicas: int,
        label: str,
        interval: float = 60.0,
    ):
        self.callback = callback
        self.total = max(int(total), 1)
        self.replicas = replicas
        self.label = label
        self.interval = interval
        self.next_frac = 0.1
        self.t0 = time.perf_counter()
        self.t_last = self.t0
        self.last = -1

    def update(self, done: int, force: bool = False) -> None:
        """Report ``done`` steps if due; ``force``: the loop's final report (ETA 0)."""
        if self.callback is None or done == self.last:
            return
        now = time.perf_counter()
        due = done / self.total >= self.next_frac - 1e-12 or now - self.t_last >= self.interval
        if force or due:
            self.last, self.t_last = done, now
            elapsed = now - self.t0
            line = progress_line(self.label, done, self.total, self.replicas, elapsed, force)
            self.callback(line)
            while self.next_frac <= done / self.total + 1e-12:
                self.next_frac += 0.1
