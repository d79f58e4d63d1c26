"""The SGD engine's driver: plan, streams, moment sums, divergence, hook, progress, result.

See the package docstring (:mod:`weightdyn.sgd`) for the kernel interface. :func:`run` advances
the replicas of a :class:`State` through a :class:`Plan` by calls of ``kernel.advance`` (one SGD
step is paper 000 Eqs. 10-11; one SGF step the Euler-Maruyama step of Eq. 13) and returns their
:class:`Moments`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from weightdyn.blas import fill_upper, one_blas_thread
from weightdyn.counter_rng import replica_keys
from weightdyn.observables import Observables, SeriesRecorder, series_fields
from weightdyn.streams import ProgressReporter

__all__ = [
    "DIVERGENCE_FACTOR",
    "RECORD_GROUP",
    "Kernel",
    "Moments",
    "Plan",
    "Record",
    "SGDResult",
    "Schedule",
    "Settings",
    "State",
    "Update",
    "VectorKernel",
    "divergence_bound",
    "run",
    "vector_moments",
]

#: divergence threshold: |w_i| > DIVERGENCE_FACTOR * (max_i |w_ref_i| + 1)
DIVERGENCE_FACTOR = 1e6
#: records per rank-k update of the second moments (a rank-32 DSYRK runs near BLAS-3 speed;
#: a rank-1 update per record is bound by the N x N matrix's memory traffic, 2.6x slower);
#: chunks hold whole groups, aligned to each block's start
RECORD_GROUP = 32


def divergence_bound(w_ref: np.ndarray) -> float:
    """``1e6 (max|w_ref| + 1)``: a state component beyond it in magnitude has diverged."""
    with np.errstate(all="ignore"):
        return float(DIVERGENCE_FACTOR * (np.max(np.abs(w_ref), initial=0.0) + 1.0))


@dataclass(frozen=True)
class Plan:
    """Burn-in, then ``n_blocks`` equal time blocks of ``sample_steps`` in all, a record after
    every ``thin``-th step, kernel calls of at most ``chunk`` steps (whole record groups)."""

    burnin_steps: int
    sample_steps: int
    thin: int
    n_blocks: int
    chunk: int

    @classmethod
    def build(
        cls, burnin_steps: int, sample_steps: int, thin: int, n_blocks: int, chunk_steps: int
    ) -> Plan:
        """The checked plan; ``chunk_steps`` is rounded to a multiple of ``RECORD_GROUP thin``.

        Raises ValueError unless ``thin, n_blocks, sample_steps >= 1``, ``burnin_steps >= 0``
        and ``sample_steps`` is a multiple of ``n_blocks * thin``.
        """
        burnin_steps, sample_steps = int(burnin_steps), int(sample_steps)
        thin, n_blocks = int(thin), int(n_blocks)
        if thin < 1 or n_blocks < 1 or burnin_steps < 0 or sample_steps < 1:
            raise ValueError("need thin >= 1, n_blocks >= 1, burnin_steps >= 0, sample_steps >= 1")
        if sample_steps % (n_blocks * thin) != 0:
            raise ValueError(
                f"sample_steps={sample_steps} must be a multiple of n_blocks*thin="
                f"{n_blocks * thin} (a multiple of thin in every block)"
            )
        unit = thin * RECORD_GROUP
        chunk = max(1, int(chunk_steps) // unit) * unit
        return cls(burnin_steps, sample_steps, thin, n_blocks, chunk)

    @property
    def total_steps(self) -> int:
        """Burn-in and sampling steps."""
        return self.burnin_steps + self.sample_steps

    def calls(self) -> Iterator[tuple[int, int | None]]:
        """``(n_steps, block)`` of each kernel call in order; ``block`` None during burn-in."""
        for pos in range(0, self.burnin_steps, self.chunk):
            yield min(self.chunk, self.burnin_steps - pos), None
        block_steps = self.sample_steps // self.n_blocks
        for b in range(self.n_blocks):
            for pos in range(0, block_steps, self.chunk):
                yield min(self.chunk, block_steps - pos), b


@dataclass(frozen=True)
class Update:
    """One SGD step's learning rate ``lr`` (lambda), batch size ``batch_size`` (S) and App. C
    sampling ``sampling`` ("with" or "without" replacement).

    A plain record: each driver checks the values (and names them in its ValueError)."""

    lr: float
    batch_size: int
    sampling: str = "with"


@dataclass(frozen=True)
class Schedule:
    """Burn-in, sampling length, a record every ``thin`` steps, ``n_blocks`` time blocks and the
    kernel-call length ``chunk_steps`` (changes no result bit).

    ``burnin_steps`` steps run first (nothing recorded); then ``sample_steps`` steps (a multiple
    of ``n_blocks * thin``) in ``n_blocks`` equal blocks. :meth:`plan` checks them."""

    burnin_steps: int
    sample_steps: int
    thin: int = 1
    n_blocks: int = 1
    chunk_steps: int = 4096

    def plan(self) -> Plan:
        """The checked :class:`Plan` (:meth:`Plan.build`; ValueError on bad step counts)."""
        return Plan.build(
            self.burnin_steps, self.sample_steps, self.thin, self.n_blocks, self.chunk_steps
        )


@dataclass
class State:
    """The replicas and their streams: ``W`` (R, ...) float64 states (advanced in place; (R, n)
    for a one-vector model), ``keys`` (R,) uint64 counter-based stream keys, ``perm`` (R, P)
    int64 permutations of sampling without replacement (identity at the start), ``diverged``
    (R,) bool flags, and ``extra``, further state arrays (R, ...) of a model whose state is
    several arrays (the two-layer network's ``W2`` beside ``W = W1``)."""

    W: np.ndarray
    keys: np.ndarray
    perm: np.ndarray
    diverged: np.ndarray
    extra: tuple[np.ndarray, ...] = ()

    @classmethod
    def start(
        cls,
        W: np.ndarray,
        rng: np.random.Generator,
        n_samples: int = 0,
        extra: tuple[np.ndarray, ...] = (),
    ) -> State:
        """Replicas ``W`` (R, ..., C order) and ``extra`` with keys from one draw of ``rng``
        (:func:`weightdyn.counter_rng.replica_keys`) and identity permutations of
        ``n_samples``."""
        R = W.shape[0]
        perm = np.tile(np.arange(n_samples, dtype=np.int64), (R, 1))
        return cls(W, replica_keys(rng, R), perm, np.zeros(R, dtype=bool), extra)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """``W`` and the ``extra`` arrays, each flattened to (R, size)."""
        R = self.W.shape[0]
        return tuple(a.reshape(R, -1) for a in (self.W, *self.extra))


class VectorSums:
    """``sum_dw`` and ``sum_dwdw``: the sums ``"dw"`` (R, B, n) and ``"dwdw"`` (R, B, n, n) of
    a one-vector model among the named ``sums``."""

    sums: dict[str, np.ndarray]

    @property
    def sum_dw(self) -> np.ndarray:
        """The first-moment sums ``sums["dw"]`` (R, B, n)."""
        return self.sums["dw"]

    @property
    def sum_dwdw(self) -> np.ndarray:
        """The second-moment sums ``sums["dwdw"]`` (R, B, n, n)."""
        return self.sums["dwdw"]


@dataclass
class Record(VectorSums):
    """What one kernel call records (see :mod:`weightdyn.sgd`): after every ``thin``-th step,
    into block ``block`` (None: burn-in, ``thin`` beyond the call, nothing) of the ``sums``
    (name -> (R, B, ...), the kernel's :meth:`Kernel.moment_shapes`; ``"dw"`` (R, B, n) and
    ``"dwdw"`` (R, B, n, n) for a one-vector model) and counts ``n_records`` (R, B); the first
    ``len(rec)`` records into ``rec`` (n_rec, R, ...); ``bound`` the divergence bound.
    ``observed``: the observable hook's arguments for this call, if the kernel sets them
    (default ``(rec - kernel.ref,)``)."""

    thin: int
    block: int | None
    sums: dict[str, np.ndarray]
    n_records: np.ndarray
    rec: np.ndarray
    bound: float
    observed: tuple[np.ndarray, ...] | None = None

    def block_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """Views ``(sum_dw[:, block], sum_dwdw[:, block])`` a compiled kernel adds to; empty
        ``(0, n)``, ``(0, n, n)`` arrays during burn-in (``block`` None)."""
        if self.block is None:
            n = self.sum_dw.shape[-1]
            return np.empty((0, n)), np.empty((0, n, n))
        return self.sum_dw[:, self.block], self.sum_dwdw[:, self.block]

    def count_every_replica(self, n_steps: int) -> None:
        """Add the ``n_steps // thin`` records of a call to every replica's count of the block
        (a kernel that records diverged replicas too; nothing during burn-in)."""
        if self.block is not None:
            self.n_records[:, self.block] += n_steps // self.thin


def vector_moments(state: State, basis: np.ndarray | None = None) -> dict[str, tuple[int, ...]]:
    """The sums of a one-vector model (``state.W`` (R, n)): ``"dw"`` (n,), ``"dwdw"`` (n, n);
    with a ``basis`` (n, k) the second moments are those of ``y = basis^T dw``, (k, k)."""
    n = state.W.shape[1]
    k = n if basis is None else basis.shape[1]
    return {"dw": (n,), "dwdw": (k, k)}


class VectorKernel:
    """Base of the kernels of one-vector models: sums :func:`vector_moments`. A kernel that can
    record second moments in a reduced basis has a ``basis`` field (n, k orthonormal columns):
    ``"dwdw"`` then sums ``y y^T`` of ``y = basis^T dw`` (k^2 floats per group, not n^2);
    ``"dw"`` stays the full ``dw``."""

    basis: np.ndarray | None = None

    def moment_shapes(self, state: State) -> dict[str, tuple[int, ...]]:
        """``"dw"`` (n,) and ``"dwdw"`` (n, n), or (k, k) in the ``basis``
        (:func:`vector_moments`)."""
        return vector_moments(state, self.basis)


class Kernel(Protocol):
    """A model's update: ``advance(state, step0, n_steps, record)`` (package docstring).

    ``ref`` (n,): a record is ``dw = state - ref``. ``lower_triangle``: the kernel adds only the
    lower triangle of ``dw dw^T`` (the engine completes the sums).
    """

    ref: np.ndarray
    lower_triangle: bool

    def moment_shapes(self, state: State) -> dict[str, tuple[int, ...]]:
        """Name -> trailing shape of each sum per (replica, block) (:func:`vector_moments`)."""
        ...

    def advance(self, state: State, step0: int, n_steps: int, record: Record) -> None:
        """Advance ``state`` by ``n_steps`` steps from global step ``step0``, recording."""
        ...


@dataclass(frozen=True)
class Settings:
    """How :func:`run` runs: the plan, the divergence ``bound``, the progress ``label`` and
    callback, an optional observable hook, and the divergence policy (``per_replica``: a
    diverged replica stops alone and only its sums are NaN; otherwise the first divergence stops
    the run and every sum is NaN)."""

    plan: Plan
    bound: float
    label: str
    progress: Callable[[str], None] | None = None
    observables: Observables | None = None
    per_replica: bool = False


@dataclass
class Moments(VectorSums):
    """The sums of a run: ``sums`` (name -> (R, B, ...), NaN where diverged; ``sum_dw``
    (R, B, n) and ``sum_dwdw`` (R, B, n, n) for a one-vector model), ``n_records`` (R, B),
    ``diverged`` (R,) flags, the hook's ``recorder``, the steps done and the seconds taken."""

    sums: dict[str, np.ndarray]
    n_records: np.ndarray
    diverged: np.ndarray
    recorder: SeriesRecorder | None
    steps_done: int
    elapsed_s: float


def _stopped(state: State, per_replica: bool) -> bool:
    return bool(state.diverged.all() if per_replica else state.diverged.any())


def run(kernel: Kernel, state: State, settings: Settings) -> Moments:
    """Run ``settings.plan`` on ``state`` with ``kernel``; returns the moments per (replica,
    block) of the records ``dw = state - kernel.ref`` (paper 000 Eqs. 10-11 or Eq. 13 per step,
    whichever the kernel implements)."""
    plan, R = settings.plan, state.W.shape[0]
    shapes = kernel.moment_shapes(state)
    sums = {name: np.zeros((R, plan.n_blocks, *shape)) for name, shape in shapes.items()}
    n_records = np.zeros((R, plan.n_blocks), dtype=np.int64)
    with np.errstate(all="ignore"):
        for a in state.arrays():
            state.diverged |= ~np.all(np.abs(a) <= settings.bound, axis=1)
    hook = settings.observables
    recorder = None if hook is None else SeriesRecorder(hook, plan.sample_steps // plan.thin, R)
    prog = ProgressReporter(settings.progress, plan.total_steps, R, settings.label)
    t_start, done = time.perf_counter(), 0
    with one_blas_thread():  # the kernels' threads call BLAS themselves
        for n_steps, block in plan.calls():
            if _stopped(state, settings.per_replica):
                break
            sampling = block is not None
            n_rec = n_steps // plan.thin if recorder is not None and sampling else 0
            thin = plan.thin if sampling else plan.chunk + 1
            rec = np.empty((n_rec, *state.W.shape))
            record = Record(thin, block, sums, n_records, rec, settings.bound)
            kernel.advance(state, done, n_steps, record)
            done += n_steps
            prog.update(done)
            if recorder is not None and sampling and not _stopped(state, settings.per_replica):
                observed = record.observed
                recorder.add(*(observed if observed is not None else (record.rec - kernel.ref,)))
    elapsed = time.perf_counter() - t_start
    prog.update(done, force=True)
    if kernel.lower_triangle:
        fill_upper(sums["dwdw"])
    nan = state.diverged if settings.per_replica else np.full(R, state.diverged.any())
    for arr in sums.values():
        arr[nan] = np.nan
    return Moments(sums, n_records, state.diverged, recorder, done, elapsed)


@dataclass
class SGDResult:
    """Accumulated moments of ``dw = w - w_ref`` per (replica, time block) group.

    Group ``g = replica * n_blocks + block``. ``sum_dw`` (G, N) and ``sum_dwdw`` (G, N, N)
    are sums over the ``n_records[g]`` recorded snapshots; they are NaN if ``diverged``.

    With an observable hook (``observables`` of the drivers): ``obs_series`` (T, R, m), the
    hook's ``obs_names`` over the sampling window, one point every ``obs_spacing`` steps
    (:class:`weightdyn.observables.SeriesRecorder`), and ``obs_elapsed_s``, the time spent in it.
    """

    sum_dw: np.ndarray
    sum_dwdw: np.ndarray
    n_records: np.ndarray
    group_replica: np.ndarray
    group_block: np.ndarray
    diverged: bool
    burnin_steps: int
    sample_steps: int
    thin: int
    replicas: int
    final_W: np.ndarray
    elapsed_s: float
    obs_series: np.ndarray | None = None
    obs_names: tuple[str, ...] = ()
    obs_spacing: int = 0
    obs_elapsed_s: float = 0.0

    @classmethod
    def grouped(
        cls, moments: Moments, plan: Plan, final_W: np.ndarray, **extra: object
    ) -> SGDResult:
        """The result of a run-stops-at-divergence run: groups ``(replica, block)`` flattened,
        ``elapsed_s`` from the engine start; ``extra`` fields of a subclass."""
        R, B, n = moments.sum_dw.shape
        return cls(
            sum_dw=moments.sum_dw.reshape(R * B, n),
            sum_dwdw=moments.sum_dwdw.reshape(R * B, n, n),
            n_records=moments.n_records.reshape(-1),
            group_replica=np.repeat(np.arange(R), B),
            group_block=np.tile(np.arange(B), R),
            diverged=bool(moments.diverged.any()),
            burnin_steps=plan.burnin_steps,
            sample_steps=plan.sample_steps,
            thin=plan.thin,
            replicas=R,
            final_W=final_W,
            elapsed_s=moments.elapsed_s,
            **extra,
            **series_fields(moments.recorder, plan.thin),
        )
