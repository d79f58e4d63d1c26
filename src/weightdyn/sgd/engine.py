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
    "update_matrices",
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


@dataclass(frozen=True, eq=False)
class Update:
    """One SGD step's learning rate ``lr`` (lambda), batch size ``batch_size`` (S) and App. C
    sampling ``sampling`` ("with" or "without" replacement), and the optional step variant of
    paper 000 App. B: weight decay ``weight_decay`` (chi >= 0, the objective
    ``L + chi |w|^2 / 2``), a preconditioner ``preconditioner`` (Lam, (n, n); None is the
    identity) and an injected-noise temperature ``temperature`` (T >= 0, SGLD-style)::

        w' = w - lr Lam (g_B(w) + chi w) + F xi,   F = sqrt(2 lr T) Lam^{1/2},  xi ~ N(0, I).

    The defaults are plain SGD (Eq. 11). A plain record: each driver checks the values (and
    names them in its ValueError); :func:`update_matrices` checks the variant. The
    preconditioner is stored as a read-only float64 copy; equality and hash compare its
    values."""

    lr: float
    batch_size: int
    sampling: str = "with"
    weight_decay: float = 0.0
    preconditioner: np.ndarray | None = None
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if self.preconditioner is not None:
            try:
                lam = np.array(self.preconditioner, dtype=np.float64, copy=True)
            except (TypeError, ValueError) as err:
                raise ValueError(f"preconditioner must be a real (n, n) matrix: {err}") from err
            lam.flags.writeable = False
            object.__setattr__(self, "preconditioner", lam)

    def _key(self) -> tuple:
        lam = self.preconditioner
        lam_key = None if lam is None else (lam.shape, lam.tobytes())
        return (self.lr, self.batch_size, self.sampling, self.weight_decay, lam_key,
                self.temperature)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Update) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def is_plain(self) -> bool:
        """No App. B variant: ``weight_decay == 0``, no preconditioner, ``temperature == 0``."""
        return self.weight_decay == 0 and self.preconditioner is None and self.temperature == 0

    def require_plain(self, driver: str) -> None:
        """Raise ValueError naming the set variant keys unless :attr:`is_plain` (for a
        ``driver`` that runs plain SGD only)."""
        if not self.is_plain:
            keys = [k for k, off in (("weight_decay", self.weight_decay == 0),
                    ("preconditioner", self.preconditioner is None),
                    ("temperature", self.temperature == 0)) if not off]  # fmt: skip
            raise ValueError(
                f"{driver} runs plain SGD only: {', '.join(keys)} must be left at the default "
                "(the App. B variant is single_layer.simulate.run_sgd's)"
            )


def _check_nonnegative(name: str, value: float) -> float:
    """``value`` as a float; ValueError naming ``name`` unless finite and >= 0."""
    v = float(value)
    if not (np.isfinite(v) and v >= 0.0):
        raise ValueError(f"{name} must be finite and >= 0, got {name}={value!r}")
    return v


def _symmetric_sqrt(lam: np.ndarray) -> np.ndarray:
    """``Lam^{1/2}`` (symmetric, via eigh) of a symmetric positive definite ``lam``; ValueError
    naming ``preconditioner`` otherwise (symmetric to 1e-12 relative, eigenvalues > 0)."""
    scale = np.max(np.abs(lam), initial=0.0)
    if np.max(np.abs(lam - lam.T), initial=0.0) > 1e-12 * scale:
        raise ValueError("preconditioner must be symmetric when temperature > 0 (Lam^{1/2})")
    e, V = np.linalg.eigh(0.5 * (lam + lam.T))
    if not e[0] > 0.0:
        raise ValueError(
            "preconditioner must be positive definite when temperature > 0, smallest "
            f"eigenvalue {e[0]:.3g}"
        )
    return (V * np.sqrt(e)) @ V.T


def _checked_preconditioner(lam: np.ndarray, n: int, temperature: float) -> np.ndarray | None:
    """``Lam^{1/2}`` if ``temperature > 0`` (else None) after checking ``lam``: a finite (n, n)
    matrix; SPD when ``temperature > 0``, else eigenvalues with positive real parts."""
    if lam.shape != (n, n) or not np.all(np.isfinite(lam)):
        raise ValueError(f"preconditioner must be a finite ({n}, {n}) matrix, got {lam.shape}")
    if temperature > 0:
        return _symmetric_sqrt(lam)
    ev = np.linalg.eigvals(lam)
    if not np.all(ev.real > 0):
        raise ValueError(
            "preconditioner must have eigenvalues with positive real parts, smallest real "
            f"part {np.min(ev.real):.3g}"
        )
    return None


def update_matrices(update: Update, n: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The checked App. B step of ``update`` on ``n`` weights: ``(drift, noise)``, the drift
    matrix ``lr Lam`` (None when ``preconditioner`` is None: ``lr`` times the identity) and the
    noise factor ``F = sqrt(2 lr T) Lam^{1/2}`` (None when ``temperature == 0``), so that
    ``w' = w - drift (g_B(w) + chi w) + F xi`` (:class:`Update`).

    Raises ValueError naming the key: ``weight_decay`` and ``temperature`` finite and >= 0;
    ``preconditioner`` a finite (n, n) matrix, symmetric positive definite when
    ``temperature > 0``, else with eigenvalues of positive real part; ``lr`` > 0 when
    ``temperature > 0``.
    """
    _check_nonnegative("weight_decay", update.weight_decay)
    T = _check_nonnegative("temperature", update.temperature)
    lr = float(update.lr)
    if T > 0 and not (np.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be finite and > 0 when temperature > 0, got lr={update.lr!r}")
    lam = update.preconditioner
    root = None if lam is None else _checked_preconditioner(lam, n, T)
    drift = None if lam is None else lr * lam
    if T == 0:
        return drift, None
    sqrt_lam = np.eye(n) if root is None else root
    return drift, np.sqrt(2.0 * lr * T) * sqrt_lam


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
