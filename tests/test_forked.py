"""weightdyn.forked: jobs in processes forked from a warm server, from many threads at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from weightdyn import forked


def _succeeds() -> None:
    pass


def _raises() -> None:
    raise RuntimeError("a failing job")


def _exits(code: int) -> None:
    os._exit(code)


def test_the_exit_code_says_how_the_child_ended() -> None:
    assert forked.run(_succeeds) == 0
    assert forked.run(_raises) == 1  # multiprocessing's code for an exception
    assert forked.run(_exits, 3) == 3


def test_concurrent_jobs_each_get_their_own_exit_code() -> None:
    """Jobs started and awaited from several threads, as Snakemake's job threads do: a
    child's exit code must reach only its own thread (Process.start polls other children)."""

    def many(_: int) -> list[int]:
        return [forked.run(_succeeds) for _ in range(40)]

    with ThreadPoolExecutor(4) as pool:
        codes = [code for batch in pool.map(many, range(4)) for code in batch]
    assert codes == [0] * 160


STOP_ALL = """
import os, signal, sys, threading, time
from weightdyn import forked

codes = []
jobs = [threading.Thread(target=lambda: codes.append(forked.run(time.sleep, 600))) for _ in "ab"]
for job in jobs:
    job.start()
while len(forked._running) < 2:
    time.sleep(0.05)
time.sleep(0.5)  # the children run time.sleep
start = time.monotonic()
stopped = forked.stop_all(signal.SIGINT)
for job in jobs:
    job.join()
print(stopped, sorted(codes), round(time.monotonic() - start), forked.stopped(),
      forked.run(time.sleep, 600), forked.stop_all(signal.SIGTERM), forked.stopped_jobs())
"""


def test_stop_all_ends_every_job_at_once_and_starts_no_more() -> None:
    """In a process of its own: once stopped, this module starts no job again."""
    out = subprocess.run(
        [sys.executable, "-c", STOP_ALL], capture_output=True, text=True, timeout=120, check=True
    )
    # 2 stopped, both by SIGTERM (-15) within a second; then nothing started, a second stop_all
    # changes nothing; the first signal is the one recorded
    assert out.stdout.split() == ["2", "[-15,", "-15]", "0", "2", "-15", "0", "2"]
    assert "Traceback" not in out.stderr and "leaked" not in out.stderr


def _sigint_default() -> None:
    signal.raise_signal(signal.SIGINT)


def test_a_job_dies_of_sigint_without_a_traceback(capfd) -> None:
    """SIGINT ends a job process at once (the default action), not with a KeyboardInterrupt."""
    assert forked.run(_sigint_default) == -signal.SIGINT
    assert "Traceback" not in capfd.readouterr().err
