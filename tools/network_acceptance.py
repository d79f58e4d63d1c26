"""Acceptance numbers of the ``network`` experiment (issue 33): two cells on real data.

    python tools/network_acceptance.py                       # both cells, one after the other
    python tools/network_acceptance.py --cell digits --set lr=0.05 --out /tmp/acc
    python tools/network_acceptance.py --list                # the cells' settings

Each cell is one ``network`` cell (:mod:`weightdyn.models.network_experiment`, the model-cell
protocol of :mod:`weightdyn.models.cell`) run in this process exactly as the workflow runs it
(``derive``, ``make_data``, ``datasets.load``, ``run_cell``), with the cell module's stages
wrapped (not changed) to time them and to keep what the dataset does not store: the SGD run's
per-(replica, block) moments, the theory covariances, ``theta*`` and the SGD mean. From these:

* the Hessian ``H = V diag(omega) V^T`` at ``theta*`` (recomputed and timed) and the *resolved*
  modes, those whose relaxation time ``1 / (lr omega_k)`` is at most ``1/RESOLVE`` of the
  sampled steps per replica (``--resolve``, default 50);
* per theory (``exact``, ``exact_mean``, ``jacobian``, ``detailed``, ``discrete``,
  ``minibatch``, ``discrete_mean``), the median relative eigenvalue error ``|e_sgd / e_th - 1|``
  of (a) the sorted spectra on ``range(H)`` as the cell stores them (all modes), (b) the sorted
  spectra of the covariances restricted to the resolved modes' subspace ``V_res^T M V_res``,
  (c) the variances along the resolved Hessian modes ``v_k^T M v_k`` (mode by mode, no
  sorting); and ``tr M`` of SGD (jackknife s.e. over the (replica, block) groups, as the cell)
  against each theory, on ``range(H)`` (the cell's) and on the resolved subspace;
* the SGD mean's distance from ``theta*``: ``|theta_bar - theta*|``, in units of the
  fluctuation scale ``sqrt(tr M_sgd)``, its statistical error (jackknife), the cell's
  ``shift_*`` variables (first-order prediction ``m = -H^+ grad tr(H M) / 2``);
* the cell's status, the wall times of its stages and the peak memory (``ru_maxrss``).

BLAS runs on ``--threads`` threads (default 1, as the workflow's jobs: on a loaded 2-core machine
OpenBLAS with 2 threads made a 1482 x 1482 ``eigh`` 20x slower, 9-15 s instead of 0.46 s).

``minibatch`` (the recursion with the mini-batch Hessian noise) needs the per-sample Hessians,
``P n^2`` floats (17.6 GB for digits' P = 1000, n = 1482) and ``P n^3`` flops per fixed-point
iteration: above ``--minibatch-gb`` (default 2) it is skipped here (NaN, and said so) instead of
running the machine out of memory.

``--out DIR`` writes the cell's dataset (``<cell>.nc``), the tables (``<cell>.txt``) and the
per-mode numbers (``<cell>_modes.npz``). Nothing under ``src/`` is changed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import math
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from weightdyn import datasets
from weightdyn import linear_theory as lt
from weightdyn.models import cell, theory
from weightdyn.models import network_experiment as ne
from weightdyn.models.jax_model import JaxModel

THEORIES = ("exact_mean", "exact", "jacobian", "detailed", "discrete", "discrete_mean", "minibatch")

#: the two acceptance cells (issue 33); every other parameter at the experiment's default
CELLS: dict[str, dict[str, Any]] = {
    # chi = 1e-3: isolated (omega_min = 1.6e-4 at theta*), minimum in 610 L-BFGS iterations;
    # lr = 0.1: lr omega_max = 0.027; tau_slow = 6.2e4 steps, so 15 of them (9.3e5 steps)
    # resolve every mode with omega >= 5.4e-4 (1446 of 1482); the cell's fixed costs (basin
    # checks ~200 s, SGD spectra + jackknife ~380 s at n = 1482) leave ~300 s for SGD
    "digits": dict(
        dataset="digits", P=1000, hidden="16-16", activation="tanh", loss="cross_entropy",
        weight_decay=1e-3, lr=0.1, batch_size=32, replicas=16, n_blocks=8,
        burn_tau=1.0, sample_tau=15.0, records_per_tau=400.0,
    ),
    # chi = 0 has no isolated minimum (omega_min 1e-14, |theta*| 1650: saturated units);
    # chi = 1e-4: omega_min = 1.0e-4, lr_max = 0.089; lr = 0.02: lr omega_max = 0.45,
    # tau_slow = 4.9e5 steps; 30 of them resolve every mode with omega >= 1.7e-4.
    # test_size 0.2: ceil(0.2 * 442) = 89 test samples, 353 training samples (all of them)
    "diabetes": dict(
        dataset="diabetes", P=353, test_size=0.2, hidden="16", activation="tanh",
        loss="squared", weight_decay=1e-4, lr=0.02, batch_size=32, replicas=16, n_blocks=8,
        burn_tau=2.0, sample_tau=30.0, records_per_tau=5000.0, max_steps=20_000_000,
    ),
}  # fmt: skip


# ------------------------------------------------------------------------ instrumentation


class Recorder:
    """Wall times per wrapped stage (seconds, calls), the cell's progress lines stamped with the
    time since the start, and the objects the analysis needs."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.t0 = time.perf_counter()
        self.times: dict[str, list[float]] = {}
        self.keep: dict[str, Any] = {}
        self.lines: list[str] = []
        self.echo = echo

    def progress(self, line: str) -> None:
        text = f"[{time.perf_counter() - self.t0:8.1f} s] {line}"
        self.lines.append(text)
        self.echo(text)

    def add(self, name: str, seconds: float) -> None:
        self.times.setdefault(name, []).append(seconds)

    def timed(self, name: str, fn: Callable, keep: Callable | None = None) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            self.add(name, time.perf_counter() - t)
            if keep is not None:
                keep(self.keep, args, out)
            return out

        return wrapper


def _minibatch_fast(model, data, theta, p):
    """:func:`weightdyn.models.theory.minibatch_stationary_covariance` (through
    ``cell._minibatch``: NaN without a stationary state) with one change: the per-sample
    Hessians are projected onto ``range(H)`` by ``Q^T h Q`` (two batched matrix products)
    instead of ``np.einsum("ai,pab,bj->pij", Q, h, Q)``, which numpy evaluates without
    contraction order as a P n^4 loop (587 s for diabetes' P = 353, n = 193; 0.2 s as
    products; the result agrees to 5e-13)."""
    X, th, Y = model.check_inputs(data.X, theta, data.Y)
    lr, S, sampling = p["lr"], p["batch_size"], p["sampling"]
    try:
        H = model.hessian(X, Y, th)
        lt.check_learning_rate(H, lr)
        C = theory.noise_covariance(model, X, Y, th, S, sampling)
        info, _, Cr = lt.reduce_to_range(H, C, None, None)
        hq = info.Q.T @ theory.sample_hessians(model, X, Y, th) @ info.Q
        c = lt.noise_prefactor(X.shape[0], S, sampling)
        return lt.embed(info, lt.minibatch_fixed_point(info.omega, Cr, hq, c, lr, 1e-10, 500))
    except ValueError:
        return np.full((model.n_params, model.n_params), np.nan)


def _minibatch_first_order(model, data, theta, p, chunk: int = 8):
    """The ``minibatch`` recursion to first order in its Hessian-noise term, for networks
    whose per-sample Hessians do not fit in memory: one step of
    :func:`weightdyn.linear_theory.minibatch_fixed_point` from the additive-noise solution
    ``M0`` (``discrete``), ``M1 = lr (C + c K(M0)) / (omega_i + omega_j - lr omega_i omega_j)``
    with ``K(M) = (1/P) sum_mu h^mu M h^mu - H M H``, the per-sample Hessians ``h^mu`` of
    ``l^mu + chi |theta|^2 / 2`` computed ``chunk`` at a time (``jax.hessian``) and never
    stored together. Costs ``2 P n^3`` flops (digits: 6.5e12)."""
    import jax

    X, th, Y = model.check_inputs(data.X, theta, data.Y)
    lr, S, sampling = p["lr"], p["batch_size"], p["sampling"]
    try:
        H = model.hessian(X, Y, th)
        lt.check_learning_rate(H, lr)
    except ValueError:
        return np.full((model.n_params, model.n_params), np.nan)
    C = theory.noise_covariance(model, X, Y, th, S, sampling)
    info, _, Cr = lt.reduce_to_range(H, C, None, None)
    Q, w = info.Q, info.omega
    pair = w[:, None] + w[None, :] - lr * np.outer(w, w)
    M0 = lr * Cr / pair
    objective = model.objective_fn()
    hess = jax.jit(jax.vmap(jax.hessian(lambda t, x, y: objective(t, x[None], y[None])),
                            (None, 0, 0)))  # fmt: skip
    acc = np.zeros_like(M0)
    for a in range(0, X.shape[0], chunk):
        for h in np.asarray(hess(th, X[a : a + chunk], Y[a : a + chunk])):
            hq = Q.T @ (0.5 * (h + h.T)) @ Q
            acc += hq @ M0 @ hq
    K = acc / X.shape[0] - np.outer(w, w) * M0
    c = lt.noise_prefactor(X.shape[0], S, sampling)
    M1 = lr * (Cr + c * K) / pair
    return lt.embed(info, 0.5 * (M1 + M1.T))


def _minibatch_guard(mode: str, limit_gb: float, rec: Recorder) -> Callable:
    """``cell._minibatch`` as ``mode`` says (``src``: the project's, ``fast``:
    :func:`_minibatch_fast`, ``first_order``: :func:`_minibatch_first_order`, ``skip``: NaN);
    ``src`` and ``fast`` give NaN above ``limit_gb`` of per-sample Hessians."""
    original = cell._minibatch

    def guarded(model, data, theta, p):
        P, n = data.X.shape[0], model.n_params
        need = P * n**2 * 8 / 1e9
        if mode == "first_order":
            rec.keep["minibatch_note"] = "first order in the Hessian noise (one iteration)"
            return _minibatch_first_order(model, data, theta, p)
        if mode == "skip" or need > limit_gb:
            why = ("--minibatch skip" if mode == "skip" else
                   f"the per-sample Hessians need {need:.1f} GB (P n^2 floats, > --minibatch-gb "
                   f"{limit_gb:g}) and each fixed-point iteration 2 P n^3 = {2 * P * n**3:.1e} "
                   "flops")  # fmt: skip
            rec.keep["minibatch_skipped"] = f"skipped: {why}"
            rec.progress(f"minibatch theory {rec.keep['minibatch_skipped']}")
            return np.full((n, n), np.nan)
        return (original if mode == "src" else _minibatch_fast)(model, data, theta, p)

    return guarded


@contextlib.contextmanager
def instrumented(rec: Recorder, minibatch: str, minibatch_gb: float) -> Iterator[None]:
    """Wrap the cell module's stages (module attributes, restored on exit) and the JAX
    models' Hessian."""

    def keep_min(k, a, out):
        k["start"] = out

    def keep_sim(k, a, out):
        k["sample"], k["theta_loc"], k["thin"] = out[1], out[2], out[3]

    def keep_th(k, a, out):
        k["th"] = out  # its "M" gains exact_mean and discrete_mean in place

    def keep_mean(k, a, out):
        k["theta_bar"], k["Qr"] = a[2], a[3]

    def keep_sgd(k, a, out):
        k.setdefault("run_sgd", []).append(out.steps_per_second)

    wraps = {
        "minimum": ("minimum search (L-BFGS, trust region, Newton)", keep_min),
        "relaxation_steps": ("eigh of H (relaxation times)", None),
        "simulate": ("burn-in + local point + sampling + basin checks", keep_sim),
        "run_sgd": ("SGD runs (burn-in, sampling)", keep_sgd),
        "check_one_basin": ("basin checks (Newton from each replica mean)", None),
        "_theories": ("theory at the local point (exact, jacobian, detailed, discrete, "
                      "minibatch)", keep_th),
        "_theories_at_mean": ("theory at the SGD mean (exact_mean, discrete_mean)", keep_mean),
        "sgd_statistics": ("SGD spectra + jackknife", None),
        "_mean_shift": ("mean shift (smoothing_shift)", None),
        "_stationarity": ("stationarity window test", None),
        "_minibatch": ("minibatch theory (per-sample Hessians)", None),
    }  # fmt: skip
    saved = {name: getattr(cell, name) for name in wraps}
    hessian = JaxModel.hessian
    try:
        cell._minibatch = _minibatch_guard(minibatch, minibatch_gb, rec)
        for name, (label, keep) in wraps.items():
            setattr(cell, name, rec.timed(label, getattr(cell, name), keep))
        JaxModel.hessian = rec.timed("model.hessian (every call in the cell)", hessian)
        yield
    finally:
        for name, fn in saved.items():
            setattr(cell, name, fn)
        JaxModel.hessian = hessian


# ------------------------------------------------------------------------------- analysis


def _jackknife(stat: Callable[[np.ndarray, np.ndarray], np.ndarray], m1: np.ndarray,
               m2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``stat(mean m1, mean m2)`` and its leave-one-group-out jackknife s.e. over the groups
    (the first axis of ``m1`` (G, k) and ``m2`` (G, k, k)), without materialising all
    leave-one-out means at once."""
    G = m1.shape[0]
    s1, s2 = m1.sum(axis=0), m2.sum(axis=0)
    full = np.asarray(stat(s1 / G, s2 / G))
    loo = np.array([stat((s1 - m1[g]) / (G - 1), (s2 - m2[g]) / (G - 1)) for g in range(G)])
    se = np.sqrt((G - 1) / G * ((loo - loo.mean(axis=0)) ** 2).sum(axis=0))
    return full, se


def _cov(mean1: np.ndarray, mean2: np.ndarray) -> np.ndarray:
    c = mean2 - np.outer(mean1, mean1)
    return 0.5 * (c + c.T)


def _median_rel(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b) & (b != 0)
    return float(np.median(np.abs(a[ok] / b[ok] - 1.0))) if ok.any() else math.nan


def analyse(ds: Any, rec: Recorder, model: Any, data: cell.Data, params: dict,
            resolve: float) -> dict[str, Any]:  # fmt: skip
    """Everything the tables print (module docstring)."""
    k = rec.keep
    out: dict[str, Any] = {}
    theta_star = k["start"].result.theta
    t = time.perf_counter()
    H = model.hessian(data.X, data.Y, theta_star)
    out["t_hessian"] = time.perf_counter() - t
    t = time.perf_counter()
    omega, V = np.linalg.eigh(H)
    out["t_eigh"] = time.perf_counter() - t
    lr, n = float(params["lr"]), model.n_params
    steps = int(ds["sample_steps"])
    tau = 1.0 / (lr * np.where(omega > 0, omega, np.nan))
    res = np.isfinite(tau) & (tau <= steps / resolve)
    # modes without noise (the exact theory's variance ~0: constant input features, the
    # softmax's shift invariance, ...): SGD's variance there is ~0 too, and a ratio is noise
    Ms = dict(k["th"]["M"])
    Mv_exact = V.T @ Ms["exact"] @ V
    var_exact = np.diag(Mv_exact)
    noiseless = var_exact <= 1e-12 * np.median(np.abs(var_exact))
    used = res & ~noiseless
    out.update(omega=omega, tau=tau, resolved=res, noiseless=noiseless, used=used,
               sample_steps=steps, n=n)  # fmt: skip

    # SGD moments per (replica, block) group in the eigenbasis of H(theta*); d = theta - theta_loc
    sample, theta_loc = k["sample"], k["theta_loc"]
    R, B, _ = sample.sum_d.shape
    cnt = sample.n_records.reshape(R * B).astype(float)
    t = time.perf_counter()
    m1 = (sample.sum_d.reshape(R * B, n) / cnt[:, None]) @ V
    m2 = np.empty((R * B, n, n))
    for g in range(R * B):
        m2[g] = V.T @ (sample.sum_dd.reshape(R * B, n, n)[g] / cnt[g]) @ V
    k.pop("sample")
    del sample
    idx = np.flatnonzero(used)

    def stats(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        c = _cov(a, b)
        sub = c[np.ix_(idx, idx)]
        return np.concatenate([np.diag(c), np.linalg.eigvalsh(sub)[::-1], [np.trace(sub)],
                               a])  # fmt: skip

    est, se = _jackknife(stats, m1, m2)
    out["t_analysis_jackknife"] = time.perf_counter() - t
    r = idx.size
    out["sgd_var"], out["sgd_var_se"] = est[:n], se[:n]
    out["sgd_eig_res"], out["sgd_eig_res_se"] = est[n : n + r], se[n : n + r]
    out["sgd_trace_res"], out["sgd_trace_res_se"] = est[n + r], se[n + r]
    mean_d_se = se[n + r + 1 :]  # theta_bar - theta_loc, eigenbasis
    del m2

    # theories in the same basis
    th_rows = {}
    for name in THEORIES:
        M = Ms.get(name)
        if M is None or not np.all(np.isfinite(M)):
            th_rows[name] = None
            continue
        Mv = V.T @ (0.5 * (M + M.T)) @ V
        sub = Mv[np.ix_(idx, idx)]
        th_rows[name] = {"var": np.diag(Mv), "eig_res": np.linalg.eigvalsh(sub)[::-1],
                         "trace_res": float(np.trace(sub))}  # fmt: skip
    out["theory"] = th_rows

    # the SGD mean against theta*
    theta_bar = k["theta_bar"]
    shift = theta_bar - theta_star
    out["shift_abs"] = float(np.linalg.norm(shift))
    out["shift_loc_star"] = float(np.linalg.norm(theta_loc - theta_star))
    out["theta_star_norm"] = float(np.linalg.norm(theta_star))
    out["shift_over_fluct"] = out["shift_abs"] / math.sqrt(float(ds["trace_sgd"]))
    s_modes = V.T @ shift
    out["shift_modes"] = s_modes
    out["shift_se_modes"] = mean_d_se
    # the part of |shift| above its statistical noise: sum_k (s_k^2 - se_k^2)
    out["shift_stat_noise"] = float(np.sqrt(np.sum(mean_d_se**2)))
    out["shift_chi2"] = float(np.sum((s_modes[~noiseless] / mean_d_se[~noiseless]) ** 2))
    out["shift_noiseless"] = float(np.linalg.norm(s_modes[noiseless]))
    sigma = np.abs(s_modes) / np.sqrt(np.abs(out["sgd_var"]))
    out["shift_sigma_modes"] = np.where(noiseless, np.nan, sigma)
    return out


# --------------------------------------------------------------------------------- report


def _fmt(x: float, spec: str = ".4g") -> str:
    return "nan" if x is None or not np.isfinite(x) else format(x, spec)


def tables(name: str, params: dict, ds: Any, rec: Recorder, a: dict | None,
           wall: float, rss_cell: float, rss_end: float) -> str:  # fmt: skip
    """The measurement tables of one cell as text."""
    p = io.StringIO()

    def w(line: str = "") -> None:
        p.write(line + "\n")

    status = cell.STATUS[int(ds["status"])]
    w(f"=== cell {name}: status {status}" + (f" ({ds.attrs.get('failure')})"
                                               if status != "ok" else ""))  # fmt: skip
    shown = {k: params[k] for k in sorted(params) if k != "data"}
    w("settings: " + json.dumps(shown, default=str))
    if status != "ok" or a is None:
        w(f"wall {wall:.1f} s, peak RSS {rss_cell:.2f} GB")
        return p.getvalue()
    n, res = a["n"], a["resolved"]
    w(f"n = {n}, rank H = {int(ds['rank_H'])}, null_dim = {int(ds['null_dim'])}; omega at theta*: "
      f"min {a['omega'].min():.4g}, median {np.median(a['omega']):.4g}, max "
      f"{a['omega'].max():.4g}; lr omega_max = {float(ds['lr_omega_max']):.4g}")  # fmt: skip
    w(f"tau_slow = {float(ds['tau_slow']):.4g} steps, tau_fast = {float(ds['tau_fast']):.4g}, "
      f"thin = {int(ds['thin'])}, sampled steps per replica = {a['sample_steps']} "
      f"({a['sample_steps'] / float(ds['tau_slow']):.1f} tau_slow), replicas "
      f"{params['replicas']}, blocks {params['n_blocks']}")  # fmt: skip
    nl = a["noiseless"]
    w(
        f"resolved modes (1/(lr omega) <= steps/{a['resolve']:g}, omega >= "
        f"{a['resolve'] / (params['lr'] * a['sample_steps']):.3g}): {int(res.sum())} of {n}; "
        f"noiseless (exact variance <= 1e-12 median; SGD's there max "
        f"{np.max(np.abs(a['sgd_var'][nl]), initial=0):.2g}): {int(nl.sum())}; compared: "
        f"{int(a['used'].sum())} (resolved, with noise)"
    )
    res = a["used"]
    w(f"loss at theta* {float(ds['loss_star']):.6g}, |grad L| {float(ds['grad_norm_star']):.2e}; "
      f"residual curvature ||H - GN||/||H|| = {float(ds['residual_curvature']):.3g}; "
      f"circulation ||Q||/||C|| = {float(ds['circulation']):.3g}; "
      f"commutator = {float(ds['commutator']):.3g}")  # fmt: skip
    w()
    w("spectra and traces, SGD vs theory (relative errors |SGD/theory - 1|; tr M ratio "
      "SGD/theory, z = (SGD - theory)/s.e.)")  # fmt: skip
    hdr = (
        f"{'theory':<14}{'med.err sorted':>15}{'med.err res.':>13}{'med.err modes':>14}"
        f"{'tr theory':>12}{'SGD/th':>9}{'z':>8}{'tr_res th':>12}{'SGD/th':>9}{'z':>8}"
    )
    w(hdr)
    w("-" * len(hdr))
    tr, tr_se = float(ds["trace_sgd"]), float(ds["trace_sgd_se"])
    trr, trr_se = a["sgd_trace_res"], a["sgd_trace_res_se"]
    for t in THEORIES:
        th = a["theory"].get(t)
        top = n - int(nl.sum())  # the sorted ranks above the noiseless modes' zeros
        e_sorted = _median_rel(ds["eig_sgd"].values[:top], ds[f"eig_{t}"].values[:top])
        trace_t = float(ds[f"trace_{t}"])
        if th is None:
            note = (
                a.get("minibatch_skipped", "NaN (no stationary state)")
                if t == "minibatch"
                else "NaN"
            )
            w(f"{t:<14}{_fmt(e_sorted, '15.4f')}  {note}")
            continue
        e_res = _median_rel(a["sgd_eig_res"], th["eig_res"])
        e_modes = _median_rel(a["sgd_var"][res], th["var"][res])
        w(f"{t:<14}{e_sorted:15.4f}{e_res:13.4f}{e_modes:14.4f}{trace_t:12.5g}"
          f"{tr / trace_t:9.4f}{(tr - trace_t) / tr_se:8.2f}{th['trace_res']:12.5g}"
          f"{trr / th['trace_res']:9.4f}{(trr - th['trace_res']) / trr_se:8.2f}")  # fmt: skip
    w(f"{'SGD':<14}{'':42}{tr:12.5g} +- {tr_se:.2g} ({tr_se / tr:.2%})   {trr:12.5g} +- "
      f"{trr_se:.2g} ({trr_se / trr:.2%})")  # fmt: skip
    w("  sorted: the cell's sorted spectra on range(H), all modes; res.: sorted spectra of the "
      "covariances restricted to the resolved modes' subspace; modes: v_k^T M v_k per resolved "
      "Hessian mode (no sorting); tr_res: trace on the resolved subspace")  # fmt: skip
    if a.get("minibatch_note"):
        w(f"  minibatch: {a['minibatch_note']}")
    sig = a["sgd_eig_res_se"] / a["sgd_eig_res"]
    w(f"  SGD eigenvalue s.e. on the resolved subspace: median {np.median(sig):.2%}, max "
      f"{np.max(sig):.2%}")  # fmt: skip
    # error of exact_mean and exact per mode against omega: where do they fail?
    w()
    w("per-mode relative error of the variance v_k^T M v_k (compared modes) by lr omega_k band:")
    q = np.quantile(a["omega"][res], [0, 0.25, 0.5, 0.75, 0.9, 1.0])
    w(
        f"{'lr omega band':<24}{'modes':>6}"
        + "".join(f"{t:>14}" for t in THEORIES if a["theory"].get(t) is not None)
    )
    for lo, hi in itertools.pairwise(q):
        band = res & (a["omega"] >= lo) & (a["omega"] <= hi)
        row = f"[{lr_(params, lo)}, {lr_(params, hi)}]".ljust(24) + f"{int(band.sum()):>6}"
        for t in THEORIES:
            th = a["theory"].get(t)
            if th is not None:
                d = a["sgd_var"][band] / th["var"][band] - 1
                row += f"{np.median(d):>+14.4f}"
        w(row)
    w("  (signed median of SGD/theory - 1 per band)")
    w()
    w("SGD mean vs the minimum:")
    w(f"  |theta_bar - theta*| = {a['shift_abs']:.4g} (|theta*| = {a['theta_star_norm']:.4g}; "
      f"relative {a['shift_abs'] / a['theta_star_norm']:.3g}); in units of sqrt(tr M_sgd) = "
      f"{math.sqrt(tr):.4g}: {a['shift_over_fluct']:.3g}")  # fmt: skip
    w(f"  statistical error of the mean (jackknife, all modes) {a['shift_stat_noise']:.3g}; "
      f"chi^2 of the shift over its s.e. = {a['shift_chi2']:.4g} for {n - int(nl.sum())} modes "
        f"with noise (|shift| on the noiseless ones {a['shift_noiseless']:.2g}); max over them "
      f"|shift_k| / sqrt(var_k) = {np.nanmax(a['shift_sigma_modes']):.3g}")  # fmt: skip
    w(f"  cell: shift_mean {float(ds['shift_mean']):.4g}, shift_predicted "
      f"{float(ds['shift_predicted']):.4g} (both / |theta_local|), shift_cosine "
      f"{float(ds['shift_cosine']):.3f}, |grad L| at the mean {float(ds['grad_norm_mean']):.3g}, "
      f"|theta_local - theta*| = {a['shift_loc_star']:.3g}, drift_range "
      f"{float(ds['drift_range']):.3g}/step")  # fmt: skip
    flags = [v for v in ds.data_vars if v.startswith("not_stationary")]
    w("  stationarity: " + ", ".join(f"{v} = {ds[v].values}" for v in flags))
    w()
    w("wall times (s):")
    w(f"  cell total (elapsed_s) {float(ds['elapsed_s']):.1f}; this script's cell call {wall:.1f}")
    for label, ts in rec.times.items():
        w(f"  {label:<70}{sum(ts):9.1f}  ({len(ts)} call{'s' if len(ts) > 1 else ''})")
    w(f"  Hessian at theta* (recomputed here) {a['t_hessian']:.1f}, its eigh {a['t_eigh']:.1f}; "
      f"analysis jackknife {a['t_analysis_jackknife']:.1f}")  # fmt: skip
    speeds = ", ".join(f"{s / params['replicas']:.3g}" for s in rec.keep.get("run_sgd", []))
    w(f"  SGD steps/s (all replicas together; burn-in, sampling): {speeds}")
    w(f"peak memory (ru_maxrss): after the cell {rss_cell:.2f} GB, after the analysis "
      f"{rss_end:.2f} GB")  # fmt: skip
    return p.getvalue()


def lr_(params: dict, omega: float) -> str:
    return f"{params['lr'] * omega:.3g}"


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _value(key: str, text: str) -> Any:
    """``text`` as the type the experiment declares for ``key``."""
    kinds = {p.name: p.kind for p in ne.EXPERIMENTS["network"].params}
    if key not in kinds:
        raise SystemExit(f"--set {key}: no such parameter; allowed: {', '.join(sorted(kinds))}")
    kind = kinds[key]
    if kind is bool:
        return text.lower() in ("1", "true", "yes")
    return kind(text)


def run_one(name: str, overrides: dict, args: argparse.Namespace) -> str:
    exp = ne.EXPERIMENTS["network"]
    params = {p.name: p.default for p in exp.params}
    params.update(CELLS[name])
    params.update(overrides)
    params = exp.derive(params)
    params["data"] = datasets.load(ne.make_data(params))
    rec = Recorder(print)
    with (
        threadpool_limits(args.threads, user_api="blas"),
        instrumented(rec, args.minibatch, args.minibatch_gb),
    ):
        t = time.perf_counter()
        ds = exp.run_cell(params, rec.progress)
        wall = time.perf_counter() - t
        rss_cell = _rss_gb()
        a = None
        if int(ds["status"]) == 0:
            data = params["data"]
            model = ne.mlp_model(data.N_i, data.N_o, params).with_objective(
                params["loss"], params["weight_decay"])  # fmt: skip
            a = analyse(ds, rec, model, cell.Data(data.X_train, data.Y_train, None), params,
                        args.resolve)  # fmt: skip
            a["resolve"] = args.resolve
            a["minibatch_skipped"] = rec.keep.get("minibatch_skipped")
            a["minibatch_note"] = rec.keep.get("minibatch_note")
    text = tables(name, params, ds, rec, a, wall, rss_cell, _rss_gb())
    print(text, flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        tag = name + "".join(f"_{k}={v}" for k, v in overrides.items())
        ds.to_netcdf(out / f"{tag}.nc")
        (out / f"{tag}.txt").write_text("\n".join(rec.lines) + "\n\n" + text)
        if a is not None:
            per_mode = {k: v for k, v in a.items() if isinstance(v, np.ndarray)}
            for t, th in a["theory"].items():
                if th is not None:
                    per_mode[f"var_{t}"], per_mode[f"eig_res_{t}"] = th["var"], th["eig_res"]
            np.savez(out / f"{tag}_modes.npz", **per_mode)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cell", choices=(*CELLS, "all"), default="all")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a cell parameter (repeatable), e.g. lr=0.05",
    )
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    ap.add_argument(
        "--resolve",
        type=float,
        default=50.0,
        help="a mode is resolved if 1/(lr omega) <= sampled steps / RESOLVE",
    )
    ap.add_argument(
        "--minibatch",
        choices=("fast", "src", "first_order", "skip"),
        default="fast",
        help="the minibatch theory: fast (the project's with the projection as "
        "matrix products), src (the project's as is), first_order (one iteration from "
        "the additive-noise solution, per-sample Hessians streamed: fits digits), skip",
    )
    ap.add_argument(
        "--minibatch-gb",
        type=float,
        default=2.0,
        help="skip the minibatch theory above this many GB of per-sample Hessians",
    )
    ap.add_argument("--out", help="directory for <cell>.nc, <cell>.txt, <cell>_modes.npz")
    ap.add_argument("--list", action="store_true", help="print the cells' settings and stop")
    args = ap.parse_args(argv)
    if args.list:
        print(json.dumps(CELLS, indent=1))
        return 0
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key.strip()] = _value(key.strip(), value.strip())
    names = list(CELLS) if args.cell == "all" else [args.cell]
    for name in names:
        run_one(name, overrides, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
