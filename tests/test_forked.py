"""weightdyn.forked: jobs in processes forked from a warm server, from many threads at once."""

from __future__ import annotations

import os
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
