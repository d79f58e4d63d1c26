"""The steps of one two-layer cell (paper 000 Sec. III, Figs. 6-7, Eqs. 36-78).

:func:`weightdyn.two_layer.experiment.run_cell` calls them in this order:

1. :func:`setup` - **data** (:func:`weightdyn.two_layer.data.two_layer_data`: inputs and
   teacher from the stream ``two_layer/data/inputs``, the standard target / label-noise draws
   from ``two_layer/data/noise``, both seeded by ``N_i, N_o, P, targets, data_seed`` and not by
   ``sigma_y2``, so cells differing only in sigma_y2 share X, U and the standard draws),
   **initial weights** (stream ``two_layer/init``, the same keys with ``N_h, init,
   init_scale``; Glorot-type Gaussian of Eq. 71 times ``init_scale`` or zero-balanced, Eq. 42)
   and **gradient flow** (Eq. 53) to its end point ``W^0``.
2. :func:`theory_at_w0` - **protocol (a)**, the paper's: Eq. 66 with ``Gamma, Delta`` of Eq. 63
   (with the corrected finite-P factor ``1 - N_i/P`` of Eq. 57, docs/errata.md), Eq. 70
   (``N_o = 1``) and the exact linearisation at ``W^0``.
3. :func:`prerun` - ``replicas`` chains of the cell's ``dynamics`` (SGD, Eqs. 40-41, or the SGF
   of Eqs. 51-52 with the exact mini-batch noise) start at ``W^0`` and run ``prerun_tau``
   relaxation times ``tau0 = 1 / (lr g_min)`` (plus what a ``W^0`` away from the minimum needs,
   :func:`start_extra_tau`; nothing for a converged gradient flow), recording traces of
   ``D1 = |W1|^2``, ``D2 = |W2|^2`` and ``|W2 W1 - w*|``: with label noise they drift along
   the manifold of minima towards lower ``tr Gamma`` (Eq. 63).
4. :func:`local_plan` - **protocol (b)**: each replica's *local point* (time average of the
   last ``average_tau`` tau0 of the pre-run, or of its sampling window) and the exact
   linearisation there set the sampling length.
5. :func:`sample` - the chains continue for ``sample_tau`` local relaxation times; their
   second moments about the local point, projected on the range of the local drift
   (rank ``N_o N_i``), are compared with the linearisation (:func:`analyse_replica`), and the
   **loss perturbations** of Fig. 7 (Eq. 73, IVFR) are taken along the eigenvectors of the
   projected ``cov(dW2)`` and of the unprojected ``cov(vec dW1)`` (:func:`loss_perturbations`).
   The series of the slowest drift mode and of the loss (:class:`SlowestModeAndLoss`) give the
   integrated autocorrelation time and effective sample size of the window, and its
   stationarity test (:func:`weightdyn.stationarity.window_test`).
6. :func:`relaxation` - autocorrelation of the drift eigenmodes ``chi_k`` of the local
   linearisation over ``relax_tau`` local relaxation times, against ``exp(-sigma_x^2 omega_k t)``
   (Eqs. 74-78), ``t = lr steps``.

All chains of a cell draw from one stream, ``two_layer/<dynamics>``, seeded by the cell's
parameters of the old config block (:data:`SEED_KEYS`), consumed in the order pre-run, sampling
(one key per replica, drawn replica by replica; the replicas then run in groups split over
numba's threads, :func:`sample`), relaxation. Conventions: vec is column stacking and
``theta = [vec W1; vec W2]`` (:mod:`weightdyn.two_layer.theory`); the moments of
:func:`weightdyn.two_layer.simulate.run_sgd_two_layer` are row-major and are permuted here.
A chain that diverges raises :class:`Diverged`, which the cell turns into a flagged dataset.
Every kernel run of a cell has its :func:`precision`: float64, or float32 in deviation form
(:mod:`weightdyn.two_layer.deviation`); it is not a seed key, so a float32 cell draws the
batches and normals of its float64 twin.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numba
import numpy as np

from weightdyn import observables, seeds, stationarity
from weightdyn.counter_rng import replica_keys
from weightdyn.experiments import Params, Progress
from weightdyn.sgd import Schedule, Update
from weightdyn.streams import progress_line
from weightdyn.two_layer import simulate as sim
from weightdyn.two_layer import theory as tl
from weightdyn.two_layer.data import TwoLayerData, two_layer_data
from weightdyn.two_layer.linalg import (
    Layout,
    Linearisation,
    autocorrelation,
    block_eig,
    block_spectrum,
    curvature_W2,
    delta_L_W1,
    delta_L_W2,
    pad,
)

#: the parameters seeding the dynamics stream: the keys of the old config block, so that every
#: ``dynamics = sgd`` cell draws the numbers it drew before the registry existed
SEED_KEYS = (
    "N_i", "N_h", "N_o", "P", "sigma_y2", "targets", "init", "init_scale", "lr", "batch_size",
    "sampling", "data_seed", "replicas", "prerun_tau", "average_tau", "sample_tau",
    "records_per_tau", "n_blocks", "trace_points", "relax_tau", "relax_modes", "local_point",
)  # fmt: skip
#: the parameters seeding the data (``two_layer/data/inputs``, ``two_layer/data/noise``) and,
#: with the architecture and start, the initial weights: never the label variance sigma_y2
DATA_KEYS = ("N_i", "N_o", "P", "targets", "data_seed")
TRACE_NAMES = ("trace_D1_avg", "trace_D2_avg", "trace_dist_avg")
#: the integrators of the ``dynamics`` axis (same arguments; SGF: Euler step dt = lr)
RUNNERS = {"sgd": sim.run_sgd_two_layer, "sgf": sim.run_sgf_two_layer}


class Diverged(RuntimeError):
    """A chain left every bounded region (lr too large for this cell); ``stage`` says where."""

    def __init__(self, stage: str):
        super().__init__(f"{stage}: a chain diverged; lower lr")
        self.stage = stage


def dynamics_rng(p: Params) -> np.random.Generator:
    """The stream ``two_layer/<dynamics>`` of the cell (``two_layer/sgd`` as before)."""
    return seeds.generator(f"two_layer/{p['dynamics']}", {k: p[k] for k in SEED_KEYS})


def precision(p: Params) -> str:
    """The arithmetic of the cell's kernels (``precision``; absent: ``"float64"``)."""
    return p.get("precision") or "float64"


def _round_up(n: float, unit: int) -> int:
    return max(unit, math.ceil(n / unit) * unit)


# ---------------------------------------------------------------- 1. data, init, gradient flow


@dataclass
class Setup:
    """Data, the gradient-flow end point ``W^0`` (Eq. 53) and the sizes of one cell."""

    X: np.ndarray
    Y: np.ndarray
    sigma_x2: float
    w_star: np.ndarray
    gf: sim.GradientFlowResult
    rank: int  # N_o rank(Sigma_xx): the rank of the drift (Eq. 64)
    layout: Layout

    @property
    def W1g(self) -> np.ndarray:
        return self.gf.W1

    @property
    def W2g(self) -> np.ndarray:
        return self.gf.W2


def cell_data(p: Params) -> TwoLayerData:
    """The cell's training set (Sec. III.1) from the streams ``two_layer/data/inputs`` and
    ``two_layer/data/noise`` of :data:`DATA_KEYS`: independent of ``sigma_y2`` but for the
    scale ``sqrt(sigma_y2)`` of the targets / label noise."""
    data_cell = {k: p[k] for k in DATA_KEYS}
    return two_layer_data(
        p["N_i"], p["P"], seeds.generator("two_layer/data/inputs", data_cell), N_o=p["N_o"],
        targets=p["targets"], sigma_y2=float(p["sigma_y2"]),
        noise_rng=seeds.generator("two_layer/data/noise", data_cell),
    )  # fmt: skip


def setup(p: Params, progress: Progress) -> Setup:
    """Data (Sec. III.1), initial weights (Eq. 71 or Eq. 42) and gradient flow to ``W^0``."""
    N_i, N_h, N_o, P = p["N_i"], p["N_h"], p["N_o"], p["P"]
    d = cell_data(p)
    init_cell = {k: p[k] for k in (*DATA_KEYS, "N_h", "init", "init_scale")}
    init_fn = sim.gaussian_init if p["init"] == "gaussian" else sim.zero_balanced_init
    W1i, W2i = init_fn(N_i, N_h, N_o, seeds.generator("two_layer/init", init_cell),
                       init_scale=float(p["init_scale"]))  # fmt: skip
    w_star = sim.least_squares_solution(d.X, d.Y)
    gtol = 1e-10 * (float(np.linalg.norm(w_star)) + 1.0)
    progress(f"two-layer cell N_i={N_i} N_h={N_h} N_o={N_o} P={P}: gradient flow")
    gf = sim.gradient_flow(d.X, d.Y, W1i, W2i, 1e7, gtol=gtol)
    rank = N_o * int(np.linalg.matrix_rank(d.X))
    return Setup(d.X, d.Y, d.sigma_x2, w_star, gf, rank, Layout(N_i, N_h, N_o))


# ------------------------------------------------------------------ 2. protocol (a) at W^0


@dataclass
class TheoryAtW0:
    """Protocol (a): the paper's theory at ``W^0`` (Eqs. 63-70) and the exact linearisation."""

    Mz: np.ndarray  # M = cov(Z), Eq. 66 (x (1 - N_i/P))
    eig1_eq66: np.ndarray
    eig2_eq66: np.ndarray
    eig2_eq70: np.ndarray
    finite_p: float
    factors: tl.SVDFactors
    lin: Linearisation
    eig1_exact: np.ndarray
    eig2_exact: np.ndarray
    tau0: float  # slowest relaxation time at W^0 in steps


def theory_at_w0(s: Setup, p: Params, progress: Progress) -> TheoryAtW0:
    """Eq. 66 (Gamma, Delta of Eq. 63 with the corrected Eq. 57), Eq. 70 and the exact
    linearisation (Eqs. 62-65 with the exact drift and mini-batch noise) at ``W^0``."""
    N_i, N_o, P = p["N_i"], p["N_o"], p["P"]
    lr, S, sampling = float(p["lr"]), p["batch_size"], p["sampling"]
    sigma_y2 = float(p["sigma_y2"])
    n1, n2 = s.layout.n1, s.layout.n2
    progress("theory at W^0 (Eq. 66, Eq. 70, exact linearisation)")
    Gam, Del = tl.drift_diffusion(s.W1g, s.W2g, s.sigma_x2, sigma_y2, S, n_samples=P,
                                  sampling=sampling)  # fmt: skip
    Mz = tl.stationary_covariance(Gam, Del, lr)
    Mz = 0.5 * (Mz + Mz.T)
    nz1 = N_o * N_i
    eig1_eq66 = pad(np.linalg.eigvalsh(Mz[:nz1, :nz1])[::-1], n1)
    eig2_eq66 = pad(np.linalg.eigvalsh(Mz[nz1:, nz1:])[::-1], n2)
    finite_p = 1.0 - N_i / P
    factors = tl.svd_factors(s.W1g, s.W2g)
    if N_o == 1:
        eig2_eq70 = np.sort(finite_p * tl.m22_closed_form(s.W1g, s.W2g, lr, sigma_y2, S))[::-1]
    else:
        eig2_eq70 = np.full(n2, np.nan)
    lin = Linearisation(s.X, s.Y, s.W1g, s.W2g, lr, S, sampling, s.rank, s.layout)
    Q1, Q2 = lin.blocks()
    eig1_exact = pad(block_spectrum(Q1, lin.Mr, s.rank), n1, 0.0)
    eig2_exact = block_spectrum(Q2, lin.Mr, n2)
    return TheoryAtW0(Mz, eig1_eq66, eig2_eq66, eig2_eq70, finite_p, factors, lin, eig1_exact,
                      eig2_exact, lin.tau_time / lr)  # fmt: skip


# ------------------------------------------------------------------------------ 3. pre-run


@dataclass
class Prerun:
    """The pre-run from ``W^0``: its lengths, traces and end state, and the local points."""

    thin: int
    average_steps: int
    steps: int
    traces: dict[str, np.ndarray]  # trace_step (T1,) and window means (T1, R)
    final_W1: np.ndarray  # (R, N_h, N_i)
    final_W2: np.ndarray  # (R, N_o, N_h)
    W1_loc: np.ndarray  # mean of the last average_steps, (R, N_h, N_i)
    W2_loc: np.ndarray


def start_extra_tau(s: Setup, a: TheoryAtW0) -> float:
    """Relaxation times of pre-run that ``W^0`` needs beyond a start at a minimum
    (:func:`weightdyn.stationarity.extra_burnin_tau`): its squared distance from the minimum,
    bounded by the loss excess ``L(W^0) - L* = d^T G d / 2 >= g_min |d|^2 / 2`` on the range of
    the exact drift ``G`` (Eq. 36 is quadratic in ``w = W2 W1``, ``L*`` at the least-squares
    ``w*``, Eq. 39), against ``tr M`` of the exact linearisation at ``W^0``. 0 at a
    converged gradient flow (excess ~ 0)."""
    L_star = sim.loss(s.X, s.Y, np.eye(s.X.shape[1]), s.w_star)
    excess = sim.loss(s.X, s.Y, s.W1g, s.W2g) - L_star
    distance2 = 2.0 * excess / float(a.lin.g[-1])
    return stationarity.extra_burnin_tau(distance2, float(np.trace(a.lin.Mr)))


def _segment_ends(tau0: float, thin0: int, pre_steps: int, avg_steps: int) -> list[int]:
    """Segments ending at tau0 * 10^k (then the averaging window), so that the traces resolve
    the drift on a logarithmic time axis."""
    decades = thin0 * np.round(tau0 * 10.0 ** np.arange(0, 12) / thin0).astype(int)
    ends = [e for e in decades if 0 < e < pre_steps - avg_steps]
    return sorted({*ends, pre_steps - avg_steps, pre_steps} - {0})


def prerun(s: Setup, a: TheoryAtW0, p: Params, rng: np.random.Generator,
           progress: Progress) -> Prerun:  # fmt: skip
    """``replicas`` chains from ``W^0`` for ``prerun_tau`` tau0 (drift along the minima)."""
    R, lr, S, sampling = p["replicas"], float(p["lr"]), p["batch_size"], p["sampling"]
    N_i, N_h, N_o = p["N_i"], p["N_h"], p["N_o"]
    tau0 = a.tau0
    thin0 = max(1, round(tau0 / float(p["records_per_tau"])))
    avg_steps = _round_up(float(p["average_tau"]) * tau0, thin0)
    extra = start_extra_tau(s, a)
    pre_steps = max(_round_up((float(p["prerun_tau"]) + extra) * tau0, thin0), avg_steps)
    progress(
        f"pre-run ({p['dynamics']}): tau0 = {tau0:.4g} steps, {pre_steps} steps x {R} replicas "
        f"(local point: mean of the last {avg_steps}; {extra:.3g} tau0 for the start's distance)"
    )
    run = RUNNERS[p["dynamics"]]
    W1c, W2c = s.W1g, s.W2g
    traces = {k: [] for k in ("trace_step", *TRACE_NAMES)}
    done, t0 = 0, time.perf_counter()
    for end in _segment_ends(tau0, thin0, pre_steps, avg_steps):
        seg = end - done
        pre = run(
            s.X, s.Y, (s.W1g, s.W2g), (W1c, W2c), Update(lr, S, sampling),
            Schedule(0, seg, thin0, 1), rng, replicas=R, w_star=s.w_star,
            trace_every=_round_up(seg / p["trace_points"], thin0), second_moments="none",
            precision=precision(p),
        )  # fmt: skip
        if pre.diverged:
            raise Diverged("pre-run")
        traces["trace_step"].append(done + pre.trace_step)
        for k in TRACE_NAMES:
            traces[k].append(getattr(pre, k))
        W1c, W2c = pre.final_W1, pre.final_W2
        done = end
        progress(progress_line("pre-run", done, pre_steps, R, time.perf_counter() - t0))
    n_avg = pre.n_records.astype(float)
    W1_loc = s.W1g[None] + (pre.sum_dW1 / n_avg[:, None]).reshape(R, N_h, N_i)
    W2_loc = s.W2g[None] + (pre.sum_dW2 / n_avg[:, None]).reshape(R, N_o, N_h)
    traces = {k: np.concatenate(v, axis=0) for k, v in traces.items()}
    return Prerun(thin0, avg_steps, pre_steps, traces, W1c, W2c, W1_loc, W2_loc)


# ------------------------------------------------------------------ 4. protocol (b): the plan


@dataclass
class LocalPlan:
    """The linearisations at the pre-run local points and the sampling lengths they set."""

    lins: list[Linearisation]
    tau: float  # mean local relaxation time in steps
    thin: int
    sample_steps: int
    trace_every: int


def local_plan(s: Setup, pre: Prerun, p: Params, progress: Progress) -> LocalPlan:
    """Exact linearisation at the pre-run local points (all of them with ``local_point =
    prerun``; with ``window`` only replica 0's, which then only sets the sampling length)."""
    R, lr, S, sampling = p["replicas"], float(p["lr"]), p["batch_size"], p["sampling"]
    n_lin = R if p["local_point"] == "prerun" else 1
    progress(f"exact linearisation at {n_lin} pre-run point(s)")
    lins = [
        Linearisation(s.X, s.Y, pre.W1_loc[r], pre.W2_loc[r], lr, S, sampling, s.rank, s.layout)
        for r in range(n_lin)
    ]
    lins += [lins[0]] * (R - n_lin)
    tau_loc = np.array([lin.tau_time / lr for lin in lins[:n_lin]])
    tau_l = float(tau_loc.mean())
    thin = max(1, round(tau_l / float(p["records_per_tau"])))
    sample_steps = _round_up(float(p["sample_tau"]) * tau_l, p["n_blocks"] * thin)
    trace_every = _round_up(sample_steps / p["trace_points"], thin)
    return LocalPlan(lins, tau_l, thin, sample_steps, trace_every)


# ----------------------------------------------------------------------------- 5. sampling


@dataclass
class Samples:
    """Per-replica results of the sampling window (leading axis: replica)."""

    W1_loc: np.ndarray  # local points (moved to the window means with local_point = window)
    W2_loc: np.ndarray
    lins: list[Linearisation]  # linearisation at each replica's local point
    eig1_b: np.ndarray  # (R, B + 1, n1): full and leave-one-block-out spectra, protocol (b)
    eig2_b: np.ndarray
    eig2_a: np.ndarray  # (R, B + 1, n2): protocol (a), about the replica's own time average
    eig1_a: np.ndarray  # (R, n1)
    eig1_th: np.ndarray  # (R, n1): linearisation at the local point
    eig2_th: np.ndarray
    dl1_sim: np.ndarray  # (R, n1): delta L along the eigenvectors of cov(vec dW1) (Fig. 7b)
    dl1_th: np.ndarray  # same along the linear theory's eigenvectors
    ivfr_var: np.ndarray  # (R, n2): eigenvalues of the projected cov(vec dW2)
    ivfr_kappa: np.ndarray  # curvature along their eigenvectors (Eq. 73)
    dl2_sim: np.ndarray  # delta L along them (Fig. 7a)
    kappa_eq73: np.ndarray  # the Eq. 73 curvature from the variances
    d1_loc: np.ndarray  # (R, N_h) eigenvalues of W1 W1^T at the local point
    d2_loc: np.ndarray  # (R,) |W2|^2
    grad_loc: np.ndarray  # (R,) |grad L|
    final_W1: np.ndarray
    final_W2: np.ndarray
    traces: list[dict[str, np.ndarray]] = field(default_factory=list)
    Mz_sim: np.ndarray | None = None  # replica 0's covariance in the Z basis (Fig. 6a)
    series: list[np.ndarray] = field(default_factory=list)  # (T, 1, 2) per replica
    ess: observables.EffectiveSampleSize | None = None
    stationarity: stationarity.StationarityTest | None = None


def _empty_samples(pre: Prerun, plan: LocalPlan, p: Params, n1: int, n2: int) -> Samples:
    R, nb, N_i, N_h, N_o = p["replicas"], p["n_blocks"], p["N_i"], p["N_h"], p["N_o"]
    return Samples(
        W1_loc=pre.W1_loc.copy(), W2_loc=pre.W2_loc.copy(), lins=list(plan.lins),
        eig1_b=np.empty((R, nb + 1, n1)), eig2_b=np.empty((R, nb + 1, n2)),
        eig2_a=np.empty((R, nb + 1, n2)), eig1_a=np.empty((R, n1)), eig1_th=np.empty((R, n1)),
        eig2_th=np.empty((R, n2)), dl1_sim=np.empty((R, n1)), dl1_th=np.zeros((R, n1)),
        ivfr_var=np.empty((R, n2)), ivfr_kappa=np.empty((R, n2)), dl2_sim=np.empty((R, n2)),
        kappa_eq73=np.full((R, n2), np.nan), d1_loc=np.empty((R, N_h)), d2_loc=np.empty(R),
        grad_loc=np.empty(R), final_W1=np.empty((R, N_h, N_i)), final_W2=np.empty((R, N_o, N_h)),
    )  # fmt: skip


@dataclass(frozen=True)
class SlowestModeAndLoss:
    """Observable hook of the sampling window (:mod:`weightdyn.observables`) on the records
    ``(W1, W2)`` (n_rec, R, N_h, N_i), (n_rec, R, N_o, N_h):

    - ``theta - theta_ref`` (row-major, the simulation's order) projected on ``q``, the drift
      eigenvector of the smallest nonzero eigenvalue of the exact linearisation (the slowest
      relaxing direction, Eq. 74; the zero modes along the manifold of minima are excluded);
    - the loss ``L = L* + tr[(w - w*) Sigma_xx (w - w*)^T] / 2`` of ``w = W2 W1``: Eq. 36 is
      quadratic in the product, and the linear term vanishes at the least-squares ``w*`` (Eq. 39),
      so this is exact and costs no pass over the data.
    """

    q: np.ndarray  # (n1 + n2,)
    theta_ref: np.ndarray  # (n1 + n2,)
    w_star: np.ndarray  # (N_o, N_i)
    Sxx: np.ndarray  # (N_i, N_i)
    L_star: float
    names: tuple[str, ...] = ("slowest", "loss")

    @classmethod
    def at(cls, s: Setup, lin: Linearisation, W1_ref: np.ndarray,
           W2_ref: np.ndarray) -> SlowestModeAndLoss:  # fmt: skip
        """The hook about ``(W1_ref, W2_ref)`` with the slowest nonzero mode of ``lin``."""
        theta_ref = np.concatenate([W1_ref.ravel(), W2_ref.ravel()])
        L_star = sim.loss(s.X, s.Y, np.eye(s.X.shape[1]), s.w_star)
        return cls(lin.Q[:, -1].copy(), theta_ref, s.w_star, s.X.T @ s.X / s.X.shape[0], L_star)

    def __call__(self, rec1: np.ndarray, rec2: np.ndarray) -> np.ndarray:
        n, R = rec1.shape[:2]
        theta = np.concatenate([rec1.reshape(n, R, -1), rec2.reshape(n, R, -1)], axis=2)
        proj = (theta - self.theta_ref) @ self.q
        d = np.matmul(rec2, rec1) - self.w_star  # (n, R, N_o, N_i)
        loss = self.L_star + 0.5 * np.einsum("nroi,ij,nroj->nr", d, self.Sxx, d)
        return np.stack([proj, loss], axis=-1)


class PerReplica:
    """The observable hook of a run of several replicas, each about its own reference point:
    replica ``r``'s records go through ``hooks[r]`` alone (a contiguous one-replica copy, as in
    a run of that replica by itself), so its series is bit-identical to that run's."""

    def __init__(self, hooks: list[SlowestModeAndLoss]):
        self.hooks = hooks
        self.names = hooks[0].names

    def __call__(self, rec1: np.ndarray, rec2: np.ndarray) -> np.ndarray:
        return np.concatenate([
            h(np.ascontiguousarray(rec1[:, r : r + 1]), np.ascontiguousarray(rec2[:, r : r + 1]))
            for r, h in enumerate(self.hooks)
        ], axis=1)  # fmt: skip


#: second moments of the (replica, block) groups that one sampling run may hold beyond a
#: thread's replica (:func:`replica_groups`; resources.two_layer_cell requests them)
GROUP_MOMENT_BYTES = 64 << 20


def replica_groups(R: int, n_blocks: int, n1: int, n2: int, n_records: int,
                   threads: int) -> list[range]:  # fmt: skip
    """The replicas of the sampling window in groups that run together (one kernel call per
    chunk, the group's replicas split over numba's ``threads``): a replica per thread, more
    while their second moments (``n_blocks`` (replica, block) groups each) stay within
    :data:`GROUP_MOMENT_BYTES`, and no more than keep the observable series at the stride of a
    one-replica run (the series recorder averages snapshots once ``n_records x group`` points
    would exceed its cap). Any grouping gives the same bits; this one bounds the memory."""
    per_replica = 8 * n_blocks * (n1 * n1 + n1 * n2 + n2 * n2)
    size = max(1, min(R, max(threads, GROUP_MOMENT_BYTES // per_replica)))

    def stride(g: int) -> int:
        cap = max(1, observables.MAX_SERIES_BYTES // (8 * g * len(SlowestModeAndLoss.names)))
        return max(1, math.ceil(n_records / cap))

    while size > 1 and stride(size) != stride(1):
        size -= 1
    return [range(r0, min(R, r0 + size)) for r0 in range(0, R, size)]


def sample(s: Setup, pre: Prerun, plan: LocalPlan, p: Params, rng: np.random.Generator,
           progress: Progress) -> Samples:  # fmt: skip
    """Each replica continues for ``sample_steps`` in ``n_blocks`` time blocks, recording all
    second moments about its local point; :func:`analyse_replica` evaluates them. The series of
    :class:`SlowestModeAndLoss` (slowest mode of the pre-run linearisation: each replica's with
    ``local_point = prerun``, replica 0's with ``window``, as :func:`local_plan` computes them)
    give the window's tau_int and effective sample size (``Samples.ess``, logged).

    The replicas run in groups (:func:`replica_groups`: at least one replica per numba thread),
    each about its own local point, so that the kernel splits them over numba's threads. Their
    stream keys are drawn from ``rng`` replica by replica, one draw each, exactly as the
    one-replica runs of earlier versions drew them: every replica's results are bit-identical
    to those runs' (the streams depend only on the key and the global step)."""
    R, lr, S, sampling = p["replicas"], float(p["lr"]), p["batch_size"], p["sampling"]
    nb = p["n_blocks"]
    out = _empty_samples(pre, plan, p, s.layout.n1, s.layout.n2)
    progress(f"sampling: local tau = {plan.tau:.4g} steps, {plan.sample_steps} steps per replica")
    sets = [np.arange(nb)] + [np.delete(np.arange(nb), b) for b in range(nb)]
    run = RUNNERS[p["dynamics"]]
    keys = np.concatenate([replica_keys(rng, 1) for _ in range(R)])
    n_rec = plan.sample_steps // plan.thin
    groups = replica_groups(R, nb, s.layout.n1, s.layout.n2, n_rec, numba.get_num_threads())
    series, t0 = [], time.perf_counter()
    for g in groups:
        idx = np.asarray(g)
        W1_loc, W2_loc = out.W1_loc[idx].copy(), out.W2_loc[idx].copy()
        hook = PerReplica([SlowestModeAndLoss.at(s, plan.lins[r], out.W1_loc[r], out.W2_loc[r])
                           for r in g])  # fmt: skip
        res = run(
            s.X, s.Y, (W1_loc, W2_loc), (pre.final_W1[idx], pre.final_W2[idx]),
            Update(lr, S, sampling), Schedule(0, plan.sample_steps, plan.thin, nb), rng,
            w_star=s.w_star, trace_every=plan.trace_every, second_moments="all",
            observables=hook, keys=keys[idx], precision=precision(p),
        )  # fmt: skip
        if res.diverged:
            raise Diverged("sampling")
        steps, elapsed = (g.stop) * plan.sample_steps, time.perf_counter() - t0
        line = progress_line("sampling", steps, R * plan.sample_steps, len(g), elapsed)
        progress(f"sampled replicas {g.start + 1}-{g.stop}/{R}: {line} "
                 f"(observable hook {res.obs_elapsed_s:.3f} s)")  # fmt: skip
        series.append(res.obs_series)
        for j, r in enumerate(g):
            own = {k: getattr(res, k)[:, j : j + 1] for k in TRACE_NAMES}
            out.traces.append({"trace_step": res.trace_step, **own})
            out.final_W1[r], out.final_W2[r] = res.final_W1[j], res.final_W2[j]
            analyse_replica(s, p, _replica_moments(res, j, nb), r, sets, out)
    series = np.concatenate(series, axis=1)
    out.series = [series[:, r : r + 1] for r in range(R)]
    out.ess = observables.effective_sample_size(
        series, res.obs_spacing, plan.sample_steps, res.obs_names
    )
    out.stationarity = window_test(s, series)
    for line in [*observables.ess_log_lines(out.ess), *out.stationarity.log_lines()]:
        progress(line)
    return out


@dataclass(frozen=True)
class ReplicaMoments:
    """The moment sums of one replica's ``n_blocks`` (replica, block) groups of a run."""

    n_records: np.ndarray
    sum_dW1: np.ndarray
    sum_dW2: np.ndarray
    sum_dW1dW1: np.ndarray
    sum_dW1dW2: np.ndarray
    sum_dW2dW2: np.ndarray


def _replica_moments(res: sim.TwoLayerSGDResult, j: int, nb: int) -> ReplicaMoments:
    rows = slice(j * nb, (j + 1) * nb)  # group = replica * n_blocks + block
    names = ("n_records", "sum_dW1", "sum_dW2", "sum_dW1dW1", "sum_dW1dW2", "sum_dW2dW2")
    return ReplicaMoments(*(getattr(res, k)[rows] for k in names))


def window_test(s: Setup, series: np.ndarray) -> stationarity.StationarityTest:
    """:func:`weightdyn.stationarity.window_test` of the sampling window on the squared slowest
    drift mode and the loss excess ``L - L*`` (series (T, R, 2) of :class:`SlowestModeAndLoss`)."""
    L_star = sim.loss(s.X, s.Y, np.eye(s.X.shape[1]), s.w_star)
    positive = np.stack([series[..., 0] ** 2, series[..., 1] - L_star], axis=-1)
    return stationarity.window_test(positive, ("slowest", "loss"))


def _recentred(M11, M12, M22, m1, m2, mm1, mm2):
    """Second moments about the window mean ``(mm1, mm2)`` instead of the pre-run point."""
    M11 -= m1[:, :, None] * mm1[None, None, :] + mm1[None, :, None] * m1[:, None, :]
    M11 += np.outer(mm1, mm1)[None]
    M12 -= m1[:, :, None] * mm2[None, None, :] + mm1[None, :, None] * m2[:, None, :]
    M12 += np.outer(mm1, mm2)[None]
    M22 -= m2[:, :, None] * mm2[None, None, :] + mm2[None, :, None] * m2[:, None, :]
    M22 += np.outer(mm2, mm2)[None]
    return M11, M12, M22, m1 - mm1, m2 - mm2


def analyse_replica(s: Setup, p: Params, res: ReplicaMoments, r: int,
                    sets: list[np.ndarray], out: Samples) -> None:  # fmt: skip
    """Spectra of replica ``r`` per block set (protocols a and b, jackknife), the theory at its
    local point and the loss perturbations (written into ``out``)."""
    lr, S, sampling = float(p["lr"]), p["batch_size"], p["sampling"]
    n1, n2 = s.layout.n1, s.layout.n2
    n = res.n_records.astype(float)
    M11 = res.sum_dW1dW1 / n[:, None, None]
    M12 = res.sum_dW1dW2 / n[:, None, None]
    M22 = res.sum_dW2dW2 / n[:, None, None]
    m1 = res.sum_dW1 / n[:, None]
    m2 = res.sum_dW2 / n[:, None]
    # protocol (a): the unprojected dW2 covariance about the replica's own time average
    for j, idx in enumerate(sets):
        mj = m2[idx].mean(axis=0)
        c2 = M22[idx].mean(axis=0) - np.outer(mj, mj)
        out.eig2_a[r, j] = np.linalg.eigvalsh(0.5 * (c2 + c2.T))[::-1]
    mm1, mm2 = m1.mean(axis=0), m2.mean(axis=0)
    c1 = M11.mean(axis=0) - np.outer(mm1, mm1)
    if p["local_point"] == "window":
        # the local point is the time average of this sampling window: shift the moments
        out.W1_loc[r] += mm1.reshape(p["N_h"], p["N_i"])
        out.W2_loc[r] += mm2.reshape(p["N_o"], p["N_h"])
        M11, M12, M22, m1, m2 = _recentred(M11, M12, M22, m1, m2, mm1, mm2)
        out.lins[r] = Linearisation(s.X, s.Y, out.W1_loc[r], out.W2_loc[r], lr, S, sampling,
                                    s.rank, s.layout)  # fmt: skip
    lin = out.lins[r]
    Q1, Q2 = lin.blocks()
    # projected on the range of the local drift (protocol b): A_b = Q^T M_b Q
    cross = Q1.T @ M12 @ Q2
    A = Q1.T @ M11 @ Q1 + cross + cross.transpose(0, 2, 1) + Q2.T @ M22 @ Q2
    for j, idx in enumerate(sets):
        Aj = A[idx].mean(axis=0)
        out.eig1_b[r, j] = block_spectrum(Q1, Aj, n1)
        out.eig2_b[r, j] = block_spectrum(Q2, Aj, n2)
    out.eig1_th[r] = pad(block_spectrum(Q1, lin.Mr, s.rank), n1, 0.0)
    out.eig2_th[r] = block_spectrum(Q2, lin.Mr, n2)
    loss_perturbations(s, p, lin, c1, A.mean(axis=0), r, out)
    if r == 0:
        out.Mz_sim = _z_basis_covariance(s, out.W1_loc[0], out.W2_loc[0], c1, M12, M22, m1, m2)


def loss_perturbations(s: Setup, p: Params, lin: Linearisation, c1: np.ndarray,
                       A: np.ndarray, r: int, out: Samples) -> None:  # fmt: skip
    """Fig. 7 at replica ``r``'s local point: delta L along the eigenvectors of the unprojected
    ``cov(vec dW1)`` ``c1`` and of the linear theory (Fig. 7b), along those of the projected
    ``cov(vec dW2)`` (from ``A``, Eq. 73, Fig. 7a), with the IVFR curvatures."""
    N_i, N_h, N_o = p["N_i"], p["N_h"], p["N_o"]
    n1, n2 = s.layout.n1, s.layout.n2
    Q1, Q2 = lin.blocks()
    ev1, U1 = np.linalg.eigh(0.5 * (c1 + c1.T))
    out.eig1_a[r] = ev1[::-1]
    V1 = U1[:, ::-1].T.reshape(n1, N_h, N_i)  # theta_C order -> matrices directly
    W1r, W2r = out.W1_loc[r], out.W2_loc[r]
    out.dl1_sim[r] = delta_L_W1(s.X, W2r, V1)
    ev_th, vec_th = block_eig(Q1, lin.Mr)
    if ev_th.size:
        out.dl1_th[r, : ev_th.size] = delta_L_W1(s.X, W2r, vec_th.T.reshape(-1, N_h, N_i))
    ev2, vec2 = block_eig(Q2, A)
    U2 = vec2.T.reshape(-1, N_o, N_h)
    out.ivfr_var[r] = pad(ev2, n2)
    out.ivfr_kappa[r] = pad(curvature_W2(s.X, W1r, U2), n2)
    out.dl2_sim[r] = pad(delta_L_W2(s.X, W1r, U2), n2)
    f = tl.svd_factors(W1r, W2r)
    out.d1_loc[r] = f.d1
    out.d2_loc[r] = float(f.d2.sum())
    if N_o == 1:
        pos = np.clip(ev2, 0.0, None)
        out.kappa_eq73[r, : ev2.size] = tl.ivfr_curvature(
            pos, out.d2_loc[r], s.sigma_x2, float(p["sigma_y2"]), float(p["lr"]), p["batch_size"]
        )
    g1, g2 = tl.gradients(s.X, s.Y, W1r, W2r)
    out.grad_loc[r] = float(np.sqrt(np.sum(g1**2) + np.sum(g2**2)))


def _z_basis_covariance(s: Setup, W1r, W2r, c1, M12, M22, m1, m2) -> np.ndarray:
    """The simulated covariance (about the time average, unprojected) in the Z basis of the
    local point (Sec. III.2.3, Fig. 6a)."""
    T = s.layout.rows_to_c(tl.z_embedding(W1r, W2r))
    mm1, mm2 = m1.mean(axis=0), m2.mean(axis=0)
    c12 = M12.mean(axis=0) - np.outer(mm1, mm2)
    c22 = M22.mean(axis=0) - np.outer(mm2, mm2)
    full = np.block([[c1, c12], [c12.T, c22]])
    return T.T @ full @ T


def ivfr_statistics(var: np.ndarray, kappa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per replica: Spearman rho of curvature vs variance and the log-log slope (IVFR, Eq. 73;
    NaN with fewer than 3 modes)."""
    import scipy.stats  # here, not at the top: it costs a cell job half a second to import

    R = var.shape[0]
    rho = np.full(R, np.nan)
    slope = np.full(R, np.nan)
    for r in range(R):
        ok = np.isfinite(var[r]) & (var[r] > 0) & (kappa[r] > 0)
        if ok.sum() >= 3:
            rho[r] = scipy.stats.spearmanr(kappa[r, ok], var[r, ok]).statistic
            slope[r] = np.polyfit(np.log(var[r, ok]), np.log(kappa[r, ok]), 1)[0]
    return rho, slope


def joined_traces(pre: Prerun, smp: Samples) -> dict[str, np.ndarray]:
    """Pre-run and sampling traces end to end: ``trace_step`` (T,) and (R, T) window means."""
    out = {"trace_step": np.concatenate(
        [pre.traces["trace_step"], pre.steps + smp.traces[0]["trace_step"]]
    )}  # fmt: skip
    for name in TRACE_NAMES:
        second = np.stack([t[name][:, 0] for t in smp.traces], axis=1)  # (T2, R)
        out[name] = np.concatenate([pre.traces[name], second], axis=0).T  # (R, T)
    return out


# --------------------------------------------------------------------------- 6. relaxation


@dataclass
class Relaxation:
    """Autocorrelation of the drift eigenmodes ``chi_k`` (Eqs. 74-78), modes slowest first."""

    acf: np.ndarray  # (K, L) mean over replicas
    acf_se: np.ndarray
    theory: np.ndarray  # exp(-sigma_x^2 omega_k t), t = lr lag
    rates: np.ndarray  # (K,) sigma_x^2 omega_k per lr step
    lag_steps: np.ndarray  # (L,)


def _relax_modes(g: np.ndarray, K: int) -> np.ndarray:
    """``K`` drift eigenmodes with rates ``g_min * (1 ... 8)``, geometrically spaced, slowest
    first (indices into the descending ``g``)."""
    targets = g[-1] * np.geomspace(1.0, min(8.0, g[0] / g[-1]), K)
    pick: list[int] = []
    for target in targets:
        order = np.argsort(np.abs(np.log(g / target)))
        pick.append(next(int(k) for k in order if int(k) not in pick))
    return np.array(sorted(pick, key=lambda k: g[k]))


def relaxation(s: Setup, smp: Samples, plan: LocalPlan, p: Params, rng: np.random.Generator,
               progress: Progress) -> Relaxation | None:  # fmt: skip
    """A further ``relax_tau`` local relaxation times of every chain, projected every
    ``tau/20`` steps on ``K = relax_modes`` drift eigenmodes of its local linearisation; their
    autocorrelation vs Eq. 76 (with the corrected sign of Eq. 75). None if ``relax_tau = 0``."""
    R, lr, S, sampling = p["replicas"], float(p["lr"]), p["batch_size"], p["sampling"]
    n1, n2 = s.layout.n1, s.layout.n2
    K = min(int(p["relax_modes"]), s.rank)
    relax_steps = math.ceil(float(p["relax_tau"]) * plan.tau)
    if relax_steps <= 0 or K <= 0:
        return None
    thin_r = max(1, round(plan.tau / 20.0))
    n_rec = max(4, relax_steps // thin_r)
    progress(f"relaxation series: {n_rec} snapshots every {thin_r} steps x {R} replicas")
    pick = _relax_modes(smp.lins[0].g, K)
    chi = np.empty((n_rec, R, K))
    W1c, W2c = smp.final_W1.copy(), smp.final_W2.copy()
    theta_loc = np.concatenate([smp.W1_loc.reshape(R, n1), smp.W2_loc.reshape(R, n2)], axis=1)
    proj = np.stack([smp.lins[r].Q[:, pick] for r in range(R)])  # (R, n, K)
    run = RUNNERS[p["dynamics"]]
    for k in range(n_rec):
        res = run(
            s.X, s.Y, (s.W1g, s.W2g), (W1c, W2c), Update(lr, S, sampling),
            Schedule(0, thin_r, thin_r, 1), rng, w_star=s.w_star, trace_every=thin_r,
            second_moments="none", precision=precision(p),
        )  # fmt: skip
        if res.diverged:
            raise Diverged("relaxation")
        W1c, W2c = res.final_W1, res.final_W2
        th = np.concatenate([W1c.reshape(R, n1), W2c.reshape(R, n2)], axis=1) - theta_loc
        chi[k] = np.einsum("rn,rnk->rk", th, proj)
    rates = np.stack([smp.lins[r].g[pick] for r in range(R)])  # (R, K), per step / lr
    slowest = float(rates[:, 0].mean())
    n_lag = int(min(n_rec // 2, math.ceil(3.0 / (lr * slowest) / thin_r))) + 1
    per = np.stack([autocorrelation(chi[:, r], n_lag - 1) for r in range(R)])  # (R, L, K)
    lag_steps = thin_r * np.arange(n_lag)
    theory = np.exp(-lr * rates[:, :, None] * lag_steps[None, None, :]).mean(axis=0)
    return Relaxation(per.mean(axis=0).T, per.std(axis=0, ddof=1).T / np.sqrt(R), theory,
                      rates.mean(axis=0), lag_steps)  # fmt: skip
