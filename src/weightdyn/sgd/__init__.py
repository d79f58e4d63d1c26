"""One SGD engine for every model: a driver that owns the plan, kernels that own the update.

Every stochastic simulation of weightdyn (single-layer SGD, paper 000 Eqs. 10-11; single-layer
SGF, the Euler-Maruyama integration of Eq. 13; any :class:`~weightdyn.models.base.Model`'s SGD)
is :func:`~weightdyn.sgd.engine.run` with one kernel. The driver (:mod:`weightdyn.sgd.engine`)
owns what is the same everywhere:

* the plan (:class:`~weightdyn.sgd.engine.Plan`): burn-in, ``n_blocks`` equal sampling blocks,
  a record after every ``thin``-th step, chunks of whole groups of ``RECORD_GROUP`` records
  aligned to each block's start (no result bit depends on the chunking);
* the counter-based streams (:class:`~weightdyn.sgd.engine.State`): one key per replica from one
  draw of the caller's generator (:func:`weightdyn.counter_rng.replica_keys`), step ``t`` of a
  replica using draws ``t k .. t k + k - 1`` of its stream (``k`` per step), and the per-replica
  permutations of sampling without replacement (:func:`weightdyn.minibatch.draw_batch`);
* the float64 moment sums per (replica, block), ``sum_dw`` (R, B, n) and ``sum_dwdw``
  (R, B, n, n) of the records ``dw = state - ref``, with their record counts;
* divergence (a state component beyond ``bound = 1e6 (max|w_ref| + 1)`` or non-finite), with
  either policy: stop the run and NaN every sum, or stop the replica and NaN its sums;
* the observable hook (:class:`weightdyn.observables.SeriesRecorder` on each sampling chunk's
  records), progress lines (:class:`weightdyn.streams.ProgressReporter`) and the moments of the
  result (:class:`~weightdyn.sgd.engine.Moments`, and :class:`~weightdyn.sgd.engine.SGDResult`).

The drivers take the step and the plan as two small settings objects instead of long argument
lists: :class:`~weightdyn.sgd.engine.Update` (``lr``, ``batch_size``, ``sampling``: one step's
learning rate, batch size and App. C sampling) and :class:`~weightdyn.sgd.engine.Schedule`
(``burnin_steps``, ``sample_steps``, ``thin``, ``n_blocks``, ``chunk_steps``; its
:meth:`~weightdyn.sgd.engine.Schedule.plan` is the checked plan), e.g.
``run_sgd(X, y, w_ref, w_init, Update(0.1, 8), Schedule(1000, 3200, thin=10), rng)``.

The kernel interface (:class:`~weightdyn.sgd.engine.Kernel`) is one method::

    kernel.advance(state: State, step0: int, n_steps: int, record: Record) -> None

"advance the ``R`` replicas ``state.W`` (R, n) in place by ``n_steps`` steps, the first being
global step ``step0`` (it draws from ``state.keys`` at that counter), and after every
``record.thin``-th step of the call record the state": ``dw = state - kernel.ref`` enters
``record.sum_dw[r, record.block]`` and ``record.sum_dwdw[r, record.block]`` (lower triangle only
if ``kernel.lower_triangle``; the engine completes it), ``record.n_records[r, record.block]``
counts the records, and record ``k < len(record.rec)`` is stored in ``record.rec[k]`` (R, n) for
the hook. ``record.block is None`` is burn-in (``record.thin > n_steps``: nothing recorded). A
replica whose state leaves ``[-record.bound, record.bound]`` (or turns non-finite) is flagged in
``state.diverged`` and not advanced further; flagged replicas may be skipped. A replica's result
may depend only on its key and the global step index, never on the thread count or on how the
engine splits the steps into calls. The kernels of the papers' models are numba loops wrapped by
an adapter (:mod:`weightdyn.single_layer.simulate`, :mod:`weightdyn.single_layer.sgf`,
:mod:`weightdyn.models.simulate`); the jitted loops are unchanged.

Where later additions go, each in one place:

* a JAX kernel: a class whose ``advance`` runs a jit-compiled ``lax.scan`` over a ``vmap``-ped
  step from ``step0`` (its uniforms from :func:`weightdyn.counter_rng.uniforms` or a
  ``jax.random.fold_in`` of the replica key and the global step), returning the records of the
  scan into ``record`` (the sums in float64);
* a preconditioner, injected noise or weight decay (paper 000 App. B): fields of
  :class:`~weightdyn.sgd.engine.Update` (``weight_decay``, ``preconditioner``, ``temperature``)
  for the step ``w <- w - lr Lam (grad L_B(w) + chi w) + sqrt(2 lr T) Lam^{1/2} xi``, checked
  once by :func:`~weightdyn.sgd.engine.update_matrices`, which returns the drift matrix and the
  noise factor a kernel applies (the single-layer SGD kernel,
  :mod:`weightdyn.single_layer.simulate`); the engine's plan, streams, sums and divergence stay.
  A driver without the variant refuses it (:meth:`~weightdyn.sgd.engine.Update.require_plain`).
"""

from weightdyn.sgd.engine import (
    DIVERGENCE_FACTOR,
    RECORD_GROUP,
    Kernel,
    Moments,
    Plan,
    Record,
    Schedule,
    Settings,
    SGDResult,
    State,
    Update,
    VectorKernel,
    divergence_bound,
    run,
    update_matrices,
    vector_moments,
)

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
