"""Chunk-invariant random streams and progress reporting shared by the SGD/SGF drivers."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

#: upper bound on the numbers drawn per RNG block (memory bound)
RNG_BLOCK_MAX = 1 << 20
#: upper bound on the number of steps drawn per RNG block
RNG_BLOCK_MAX_STEPS = 1024


class BlockStream:
    """Random numbers (n, R, k) served from ``rng`` in fixed blocks of steps.

    The sequence of draws depends only on (R, k), never on how the consumer slices it, which
    makes the drivers invariant under ``chunk_steps``. ``kind`` is ``"uniform"`` or ``"normal"``.
    """

    def __init__(self, rng: np.random.Generator, R: int, k: int, kind: str):
        self.rng = rng
        self.shape = (R, k)
        self.kind = kind
        self.block_steps = int(max(1, min(RNG_BLOCK_MAX_STEPS, RNG_BLOCK_MAX // max(1, R * k))))
        self.buf = np.empty((0, R, k))
        self.pos = 0

    def take(self, n: int) -> np.ndarray:
        parts = []
        while n > 0:
            if self.pos == self.buf.shape[0]:
                size = (self.block_steps, *self.shape)
                if self.kind == "uniform":
                    self.buf = self.rng.random(size)
                else:
                    self.buf = self.rng.standard_normal(size)
                self.pos = 0
            m = min(n, self.buf.shape[0] - self.pos)
            parts.append(self.buf[self.pos : self.pos + m])
            self.pos += m
            n -= m
        if len(parts) == 1:
            return np.ascontiguousarray(parts[0])
        return np.concatenate(parts, axis=0)


class ProgressReporter:
    """Calls ``callback`` with steps done and replica-steps/s about every 10 % of ``total``."""

    def __init__(
        self, callback: Callable[[str], None] | None, total: int, replicas: int, label: str
    ):
        self.callback = callback
        self.total = max(int(total), 1)
        self.replicas = replicas
        self.label = label
        self.next_frac = 0.1
        self.t0 = time.perf_counter()
        self.last = -1

    def update(self, done: int, force: bool = False) -> None:
        if self.callback is None or done == self.last:
            return
        if force or done / self.total >= self.next_frac - 1e-12:
            self.last = done
            dt = max(time.perf_counter() - self.t0, 1e-12)
            self.callback(
                f"{self.label} steps {done}/{self.total} ({100.0 * done / self.total:.0f}%), "
                f"{done * self.replicas / dt:.3g} replica-steps/s"
            )
            while self.next_frac <= done / self.total + 1e-12:
                self.next_frac += 0.1
