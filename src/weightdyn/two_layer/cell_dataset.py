"""The dataset of one two-layer cell (paper 000 Sec. III): variables, attributes, assembly.

Dimensions: ``mode1`` (eigen-index of ``cov(vec dW1)``, ``N_h N_i``, descending), ``mode2`` (of
``cov(vec dW2)``, ``N_o N_h``), ``replica``, ``trace_time``, ``z_row``/``z_col`` (Z basis of
Sec. III.2.3, Fig. 6a), ``relax_mode`` and ``lag`` (Eqs. 74-78). Spectra are sorted descending
and averaged over replicas (each replica sorted first); their standard errors are delete-one
jackknife over (replica, time-block) groups, except the unprojected ``cov(vec dW1)`` spectrum and
the loss perturbations, whose errors are the spread over replicas.

``tau_int_slowest``, ``tau_int_loss``, ``ess_*`` and ``undersampled`` are the integrated
autocorrelation times (in steps) of the slowest drift mode and of the loss over the sampling
window, the effective sample sizes and the flag "sampled for fewer than 50 tau_int"
(:mod:`weightdyn.observables`); ``not_stationary`` and ``stationarity_t_*`` the test of the
window's late against its early half (:mod:`weightdyn.stationarity`). ``trace_M_sgd`` is tr M of
the simulated chains about the local point on range(Gamma) (protocol b, jackknife error),
``trace_M_exact_local``, ``trace_M_exact_w0`` and ``trace_M_eq66`` those of the theories.

Variables named ``*_sgd`` hold the simulated chains of the cell's ``dynamics`` (SGD, or the SGF
of Eqs. 51-52 for ``dynamics = sgf``); the names are those of the SGD-only cells before the
``dynamics`` axis existed. Weights, losses and step counts are dimensionless (units "1"); the
long names say what a number counts.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from weightdyn import observables, stationarity
from weightdyn.experiments import Params
from weightdyn.io import attrs
from weightdyn.two_layer.linalg import (
    mean_and_jackknife,
    median_rel_error,
    nanmean,
    nanstd,
    pad,
    trace_ratio,
)
from weightdyn.two_layer.protocol import (
    LocalPlan,
    Prerun,
    Relaxation,
    Samples,
    Setup,
    TheoryAtW0,
    ivfr_statistics,
    joined_traces,
)

PAPER = "paper 000"
_A = f"{PAPER} Eq. 66 at W^0 (protocol a)"
_B = f"{PAPER} Eqs. 62-66 exact linearisation at the local point (protocol b)"
_SIM = "simulated chains (the cell's dynamics)"
_M1, _M2 = ("mode1",), ("mode2",)
_RM = ("replica", "mode2")
_RT = ("replica", "trace_time")

#: (name, dims, long_name, source) of every variable, in dataset order; units are "1"
VARIABLES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    # normalisations and scalars
    ("M_isotropic", (), "lambda sigma_y^2 / (2S)", f"{PAPER} Eqs. 68, 70"),
    ("finite_p_factor", (), "1 - N_i/P (corrected Eq. 57)", "docs/errata.md Eq. 56"),
    ("sigma_x2", (), "input variance sigma_x^2", f"{PAPER} Eq. 49"),
    ("tau0_steps", (), "slowest relaxation time at W^0, 1/(lr g_min), in steps",
     f"{PAPER} Eq. 74"),
    ("tau_local_steps", (), "slowest relaxation time at the local points (mean), in steps",
     f"{PAPER} Eq. 74"),
    ("prerun_steps", (), "pre-run length in steps (start of sampling)", "protocol"),
    ("average_steps", (), "window defining the pre-run local point, in steps", "protocol"),
    ("sample_steps", (), "sampling length per replica in steps", "protocol"),
    ("thin", (), "steps between snapshots while sampling", "protocol"),
    ("gf_time", (), "gradient-flow time to W^0 (lr steps)", f"{PAPER} Eq. 53"),
    ("gf_converged", (), "gradient flow reached |grad L| <= gtol", f"{PAPER} Eq. 53"),
    ("dist_w0", (), "|W2^0 W1^0 - w*|_F", f"{PAPER} Eq. 39"),
    ("D1_w0", (), "D1 = |W1^0|_F^2", f"{PAPER} Eq. 59"),
    ("D2_w0", (), "D2 = |W2^0|_F^2", f"{PAPER} Eq. 59"),
    ("D2_local", (), "|W2|_F^2 at the local points (mean)", f"{PAPER} Eq. 59"),
    ("d2_drift_factor", (), "D2(local) / D2(W^0)", "drift along the manifold of minima"),
    ("trG_w0", (), "tr of the exact drift at W^0 (per lr step)", f"{PAPER} Eq. 63"),
    ("trG_local", (), "tr of the exact drift at the local points (per lr step)",
     f"{PAPER} Eq. 63"),
    ("grad_norm_local", (), "|grad L| at the local points", f"{PAPER} Eq. 41"),
    # spectra, protocol (a)
    ("eig_cov1_sgd_a", _M1, f"eig cov(vec dW1), {_SIM} about their time average",
     f"{PAPER} Fig. 6b,c"),
    ("eig_cov1_sgd_a_se", _M1, "s.e. (over replicas)", "jackknife over replicas"),
    ("eig_cov1_eq66", _M1, "eig M11, Eq. 66 at W^0 (x (1 - N_i/P))", _A),
    ("eig_cov1_exact_w0", _M1, "eig cov(vec dW1), exact linearisation at W^0",
     f"{PAPER} Eq. 65 (exact drift and noise)"),
    ("eig_cov2_sgd_a", _M2, f"eig cov(vec dW2), {_SIM} about their time average",
     f"{PAPER} Fig. 6b,c"),
    ("eig_cov2_sgd_a_se", _M2, "s.e.", "jackknife over (replica, block)"),
    ("eig_cov2_eq66", _M2, "eig M22, Eq. 66 at W^0 (x (1 - N_i/P))", _A),
    ("eig_cov2_eq70", _M2, "Eq. 70 at W^0 (x (1 - N_i/P))", f"{PAPER} Eq. 70"),
    ("eig_cov2_exact_w0", _M2, "eig cov(vec dW2), exact linearisation at W^0",
     f"{PAPER} Eq. 65 (exact drift and noise)"),
    # spectra, protocol (b)
    ("eig_cov1_sgd_b", _M1,
     f"eig cov(vec dW1), {_SIM} about the local point, projected on range(Gamma)",
     "protocol (b)"),
    ("eig_cov1_sgd_b_se", _M1, "s.e.", "jackknife over (replica, block)"),
    ("eig_cov1_exact_local", _M1, "eig cov(vec dW1), exact linearisation at the local point",
     _B),
    ("eig_cov2_sgd_b", _M2,
     f"eig cov(vec dW2), {_SIM} about the local point, projected on range(Gamma)",
     "protocol (b)"),
    ("eig_cov2_sgd_b_se", _M2, "s.e.", "jackknife over (replica, block)"),
    ("eig_cov2_exact_local", _M2, "eig cov(vec dW2), exact linearisation at the local point",
     _B),
    # acceptance numbers
    ("err_cov1_a_eq66", (), "median rel. eigenvalue error, cov(dW1): sim. vs Eq. 66 at W^0", _A),
    ("err_cov2_a_eq66", (), "median rel. eigenvalue error, cov(dW2): sim. vs Eq. 66 at W^0", _A),
    ("err_cov1_a_exact", (), "median rel. eigenvalue error, cov(dW1): sim. vs exact at W^0", _A),
    ("err_cov2_a_exact", (), "median rel. eigenvalue error, cov(dW2): sim. vs exact at W^0", _A),
    ("err_cov1_b", (), "median rel. eigenvalue error, cov(dW1), protocol (b)", _B),
    ("err_cov2_b", (), "median rel. eigenvalue error, cov(dW2), protocol (b)", _B),
    ("tr_ratio_cov1_a", (), "sum of the top N_o N_i eig cov(dW1) sim. / tr M11 (Eq. 66 at W^0)",
     _A),
    ("tr_ratio_cov2_a", (), "tr cov(dW2) sim. / tr M22 (Eq. 66 at W^0)", _A),
    ("tr_ratio_cov1_b", (), "tr cov(dW1) / tr M11, protocol (b)", _B),
    ("tr_ratio_cov2_b", (), "tr cov(dW2) / tr M22, protocol (b)", _B),
    # IVFR and loss perturbations (Fig. 7)
    ("ivfr_variance", _RM, "eigenvalue of cov(vec dW2) (projected, local)", f"{PAPER} Eq. 73"),
    ("ivfr_curvature", _RM, "curvature kappa along that eigenvector", f"{PAPER} Eq. 73"),
    ("ivfr_curvature_eq73", _RM, "kappa from the variance, 2 S sigma_x^2 D2 m / (lr sigma_y^2)",
     f"{PAPER} Eq. 73"),
    ("ivfr_spearman", ("replica",), "Spearman rank correlation of curvature and variance",
     "IVFR, Feng and Tu 2021"),
    ("ivfr_slope", ("replica",), "fitted slope of log kappa vs log variance",
     f"{PAPER} Eq. 73 (slope 1)"),
    ("ivfr_spearman_mean", (), "mean Spearman rho over replicas", "IVFR"),
    ("ivfr_slope_mean", (), "mean fitted log-log slope over replicas", "IVFR"),
    ("delta_L2_sgd", _M2, "even part of delta L(theta a_i)/theta^2 along eig. of cov(dW2)",
     f"{PAPER} Eq. 73, Fig. 7a"),
    ("delta_L2_sgd_se", _M2, "s.e. over replicas", "Fig. 7a"),
    ("delta_L2_eq73_exact", _M2, "sigma_x^2 D1_ii / 2 at the local point",
     f"{PAPER} Eq. 73 (exact)"),
    ("delta_L2_eq73_approx", _M2, "S D2 sigma_x^2 m_i / (lr sigma_y^2), simulated variances m_i",
     f"{PAPER} Eq. 73 (approximation)"),
    ("delta_L1_sgd", _M1, "even part of delta L(theta v_i)/theta^2 along eig. of cov(vec dW1)",
     f"{PAPER} Fig. 7b"),
    ("delta_L1_sgd_se", _M1, "s.e. over replicas", "Fig. 7b"),
    ("delta_L1_linear", _M1, "same along the eigenvectors of the linear theory (0 beyond N_o N_i)",
     _B),
    ("delta_L1_drop_ratio", (), "mean delta L for i > N_i / mean for i <= N_i (simulated)",
     f"{PAPER} Fig. 7b"),
    # traces
    ("trace_D1", _RT, "D1 = |W1|_F^2 (window mean)", f"{PAPER} Eq. 59"),
    ("trace_D2", _RT, "D2 = |W2|_F^2 (window mean)", f"{PAPER} Eq. 59"),
    ("trace_dist", _RT, "|W2 W1 - w*|_F (window mean)", f"{PAPER} Eq. 39"),
    ("trace_tr_gamma", _RT, "tr Gamma = sigma_x^2 (N_i D2 + N_o D1) (per lr step)",
     f"{PAPER} Eq. 63"),
    # Fig. 6a
    ("M_z_eq66", ("z_row", "z_col"), "M = cov(Z), Eq. 66 at W^0 (x (1 - N_i/P))",
     f"{PAPER} Eq. 66, Fig. 6a"),
    ("M_z_sgd", ("z_row", "z_col"), f"covariance of the {_SIM} in the Z basis of the local "
     "point (replica 0)", f"{PAPER} Sec. III.2.3, Fig. 6a"),
)  # fmt: skip
RELAX_VARIABLES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("relax_acf", ("relax_mode", "lag"), "normalised autocorrelation of chi_k",
     f"{PAPER} Eq. 76"),
    ("relax_acf_se", ("relax_mode", "lag"), "s.e. over replicas", f"{PAPER} Eq. 76"),
    ("relax_theory", ("relax_mode", "lag"), "exp(-sigma_x^2 omega_k t), t = lr lag",
     f"{PAPER} Eq. 76 (corrected sign, Eq. 75)"),
    ("relax_rate", ("relax_mode",), "sigma_x^2 omega_k (exact drift eigenvalue) per lr step",
     f"{PAPER} Eq. 74"),
)  # fmt: skip
TAIL_VARIABLES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("diverged", (), "a chain diverged (1: simulated variables are NaN)", "protocol"),
)


def theory_values(s: Setup, a: TheoryAtW0, p: Params) -> dict[str, object]:
    """The variables known before any chain runs (protocol a, gradient flow)."""
    lr, S, sigma_y2 = float(p["lr"]), p["batch_size"], float(p["sigma_y2"])
    return {
        "M_isotropic": lr * sigma_y2 / (2 * S),
        "finite_p_factor": a.finite_p,
        "sigma_x2": s.sigma_x2,
        "tau0_steps": a.tau0,
        "gf_time": float(s.gf.t[-1]),
        "gf_converged": int(s.gf.converged),
        "dist_w0": float(np.linalg.norm(s.W2g @ s.W1g - s.w_star)),
        "D1_w0": float(a.factors.d1.sum()),
        "D2_w0": float(a.factors.d2.sum()),
        "trG_w0": a.lin.trace_G,
        "eig_cov1_eq66": a.eig1_eq66,
        "eig_cov1_exact_w0": a.eig1_exact,
        "eig_cov2_eq66": a.eig2_eq66,
        "eig_cov2_eq70": pad(a.eig2_eq70, s.layout.n2),
        "eig_cov2_exact_w0": a.eig2_exact,
        "M_z_eq66": a.Mz,
    }


def sampled_values(s: Setup, pre: Prerun, plan: LocalPlan, smp: Samples,
                   p: Params) -> dict[str, object]:  # fmt: skip
    """Lengths, local geometry and the simulated spectra (protocols a and b)."""
    R, lr = p["replicas"], float(p["lr"])
    eig1_b, eig1_b_se = mean_and_jackknife(smp.eig1_b)
    eig2_b, eig2_b_se = mean_and_jackknife(smp.eig2_b)
    eig2_a, eig2_a_se = mean_and_jackknife(smp.eig2_a)
    return {
        "tau_local_steps": float(np.mean([lin.tau_time / lr for lin in smp.lins])),
        "prerun_steps": pre.steps,
        "average_steps": pre.average_steps,
        "sample_steps": plan.sample_steps,
        "thin": plan.thin,
        "D2_local": float(smp.d2_loc.mean()),
        "trG_local": float(np.array([lin.trace_G for lin in smp.lins]).mean()),
        "grad_norm_local": float(smp.grad_loc.mean()),
        "eig_cov1_sgd_a": smp.eig1_a.mean(axis=0),
        "eig_cov1_sgd_a_se": smp.eig1_a.std(axis=0, ddof=1) / np.sqrt(R),
        "eig_cov2_sgd_a": eig2_a,
        "eig_cov2_sgd_a_se": eig2_a_se,
        "eig_cov1_sgd_b": eig1_b,
        "eig_cov1_sgd_b_se": eig1_b_se,
        "eig_cov1_exact_local": smp.eig1_th.mean(axis=0),
        "eig_cov2_sgd_b": eig2_b,
        "eig_cov2_sgd_b_se": eig2_b_se,
        "eig_cov2_exact_local": smp.eig2_th.mean(axis=0),
    }


def acceptance_values(v: dict[str, object], rank: int) -> dict[str, float]:
    """Drift factor, median relative errors and trace ratios of the spectra in ``v``."""
    e = {k: v[k] for k in v if k.startswith("eig_cov")}
    return {
        "d2_drift_factor": v["D2_local"] / v["D2_w0"],
        "err_cov1_a_eq66": median_rel_error(e["eig_cov1_sgd_a"], e["eig_cov1_eq66"]),
        "err_cov2_a_eq66": median_rel_error(e["eig_cov2_sgd_a"], e["eig_cov2_eq66"]),
        "err_cov1_a_exact": median_rel_error(e["eig_cov1_sgd_a"], e["eig_cov1_exact_w0"]),
        "err_cov2_a_exact": median_rel_error(e["eig_cov2_sgd_a"], e["eig_cov2_exact_w0"]),
        "err_cov1_b": median_rel_error(e["eig_cov1_sgd_b"], e["eig_cov1_exact_local"]),
        "err_cov2_b": median_rel_error(e["eig_cov2_sgd_b"], e["eig_cov2_exact_local"]),
        "tr_ratio_cov1_a": trace_ratio(e["eig_cov1_sgd_a"][:rank], e["eig_cov1_eq66"][:rank]),
        "tr_ratio_cov2_a": trace_ratio(e["eig_cov2_sgd_a"], e["eig_cov2_eq66"]),
        "tr_ratio_cov1_b": trace_ratio(e["eig_cov1_sgd_b"], e["eig_cov1_exact_local"]),
        "tr_ratio_cov2_b": trace_ratio(e["eig_cov2_sgd_b"], e["eig_cov2_exact_local"]),
    }


def fig7_values(s: Setup, smp: Samples, p: Params) -> dict[str, object]:
    """IVFR statistics and the loss perturbations along the covariance eigenvectors (Fig. 7,
    Eq. 73), means over replicas with their standard errors."""
    R, N_i, N_o, n1, n2 = p["replicas"], p["N_i"], p["N_o"], s.layout.n1, s.layout.n2
    rho, slope = ivfr_statistics(smp.ivfr_var, smp.ivfr_kappa)
    dl1 = smp.dl1_sim.mean(axis=0)
    n_range1 = N_o * N_i  # rank of the W1 block of the linear theory
    drop = float(np.mean(dl1[n_range1:]) / np.mean(dl1[:n_range1])) if n1 > n_range1 else np.nan
    eq73 = np.sort(smp.d1_loc, axis=1)[:, ::-1][:, :n2].mean(axis=0)
    return {
        "ivfr_variance": smp.ivfr_var,
        "ivfr_curvature": smp.ivfr_kappa,
        "ivfr_curvature_eq73": smp.kappa_eq73,
        "ivfr_spearman": rho,
        "ivfr_slope": slope,
        "ivfr_spearman_mean": nanmean(rho),
        "ivfr_slope_mean": nanmean(slope),
        "delta_L2_sgd": nanmean(smp.dl2_sim, axis=0),
        "delta_L2_sgd_se": nanstd(smp.dl2_sim) / np.sqrt(R),
        "delta_L2_eq73_exact": 0.5 * s.sigma_x2 * eq73 if N_o == 1 else np.full(n2, np.nan),
        "delta_L2_eq73_approx": 0.5 * nanmean(smp.kappa_eq73, axis=0),
        "delta_L1_sgd": dl1,
        "delta_L1_sgd_se": smp.dl1_sim.std(axis=0, ddof=1) / np.sqrt(R),
        "delta_L1_linear": smp.dl1_th.mean(axis=0),
        "delta_L1_drop_ratio": drop,
    }


def trace_values(s: Setup, pre: Prerun, smp: Samples, p: Params) -> dict[str, object]:
    """Window-mean traces over pre-run and sampling (Figs. drift), with ``tr Gamma`` of
    Eq. 63; ``trace_step`` becomes the ``trace_time`` coordinate."""
    tr = joined_traces(pre, smp)
    D1, D2 = tr["trace_D1_avg"], tr["trace_D2_avg"]
    return {
        "trace_step": tr["trace_step"],
        "trace_D1": D1,
        "trace_D2": D2,
        "trace_dist": tr["trace_dist_avg"],
        "trace_tr_gamma": s.sigma_x2 * (p["N_i"] * D2 + p["N_o"] * D1),
        "M_z_sgd": smp.Mz_sim,
    }


def relaxation_values(rel: Relaxation) -> dict[str, object]:
    """The variables of Eqs. 74-78 (``lag_steps`` becomes the ``lag`` coordinate)."""
    return {
        "relax_acf": rel.acf,
        "relax_acf_se": rel.acf_se,
        "relax_theory": rel.theory,
        "relax_rate": rel.rates,
        "lag_steps": rel.lag_steps,
    }


def _coords(p: Params, trace_step: np.ndarray, tau0: float, lag: np.ndarray | None) -> dict:
    N_i, N_h, N_o, R = p["N_i"], p["N_h"], p["N_o"], p["replicas"]
    mz = N_o * (N_i + N_h)
    coords = {
        "mode1": ("mode1", np.arange(1, N_h * N_i + 1),
                  attrs("eigen-index of cov(vec dW1), descending", "1", "protocol")),
        "mode2": ("mode2", np.arange(1, N_o * N_h + 1),
                  attrs("eigen-index of cov(vec dW2), descending", "1", "protocol")),
        "replica": ("replica", np.arange(R), attrs("replica (independent chain)", "1",
                                                   "protocol")),
        "trace_time": ("trace_time", trace_step,
                       attrs("steps since W^0 (SGD steps or SGF Euler steps of dt = lr)", "1",
                             "protocol")),
        "trace_tau": ("trace_time", trace_step / tau0,
                      attrs("steps since W^0 / tau0", "1", "protocol")),
        "z_row": ("z_row", np.arange(mz), attrs("Z = [vec z1; vec z2] index", "1",
                                               f"{PAPER} Sec. III.2.3")),
        "z_col": ("z_col", np.arange(mz), attrs("Z = [vec z1; vec z2] index", "1",
                                               f"{PAPER} Sec. III.2.3")),
    }  # fmt: skip
    if lag is not None:
        coords["lag"] = ("lag", lag, attrs("lag in steps", "1", "protocol"))
    return coords


def assemble(values: dict[str, object], coords: dict, p: Params) -> xr.Dataset:
    """The dataset of ``values``; a variable without a value is NaN (a diverged cell)."""
    ds = xr.Dataset(coords=coords)
    relax = "relax_acf" in values
    if relax:
        ds = ds.assign_coords(relax_mode=("relax_mode", np.arange(len(values["relax_rate"])),
                                          attrs("drift eigenmode, slowest first", "1",
                                                f"{PAPER} Eq. 74")))  # fmt: skip
    for name, dims, long_name, source in (*VARIABLES, *(RELAX_VARIABLES if relax else ()),
                                          *TAIL_VARIABLES):  # fmt: skip
        value = values.get(name)
        if value is None:
            value = np.full(tuple(ds.sizes[d] for d in dims), np.nan)
        ds[name] = (dims, value, attrs(long_name, "1", source))
    ds.attrs.update({k: v for k, v in p.items() if isinstance(v, int | float | str)})
    return ds


def cell_dataset(s: Setup, a: TheoryAtW0, pre: Prerun, plan: LocalPlan, smp: Samples,
                 rel: Relaxation | None, p: Params) -> xr.Dataset:  # fmt: skip
    """The dataset of a cell whose chains stayed bounded."""
    v = {**theory_values(s, a, p), **sampled_values(s, pre, plan, smp, p)}
    v.update(acceptance_values(v, s.rank))
    v.update(fig7_values(s, smp, p))
    v.update(trace_values(s, pre, smp, p))
    if rel is not None:
        v.update(relaxation_values(rel))
    v["diverged"] = 0
    lag = v.pop("lag_steps", None)
    ds = assemble(v, _coords(p, v.pop("trace_step"), a.tau0, lag), p)
    per_group = smp.eig1_b.sum(axis=-1) + smp.eig2_b.sum(axis=-1)  # (R, B + 1) traces
    traces = trace_variables(a, tuple(mean_and_jackknife(per_group)), v)
    return ds.assign({**ess_variables(smp.ess), **smp.stationarity.variables(_ESS[1]), **traces})


#: the effective-sample-size variables' method and source (the sampling window of step 5)
_ESS = (_SIM, f"{PAPER} Eqs. 40-41 (SGD) or 51-52 (SGF), the sampling window (protocol step 5)")


def ess_variables(ess: observables.EffectiveSampleSize | None) -> dict[str, tuple]:
    """tau_int of the slowest drift mode and of the loss, ESS and the ``undersampled`` flag
    (:func:`weightdyn.observables.ess_variables`); NaN and not flagged without samples."""
    if ess is None:
        ess = observables.not_sampled(("slowest", "loss"))
    return observables.ess_variables(ess, *_ESS)


def trace_variables(a: TheoryAtW0, sim: tuple[float, float], v: dict) -> dict[str, tuple]:
    """tr M of the chains (``sim``: value and error) and of the theories
    (:func:`weightdyn.stationarity.trace_variables`): the exact linearisation at the local
    points (mean over replicas; NaN in ``v`` without samples), at ``W^0``, and Eq. 66."""
    local = np.sum(v.get("eig_cov1_exact_local", np.nan)) + np.sum(
        v.get("eig_cov2_exact_local", np.nan)
    )
    theories = {
        "exact_local": (local, "tr M, exact linearisation at the local points (mean)", _B),
        "exact_w0": (np.sum(a.eig1_exact) + np.sum(a.eig2_exact),
                     "tr M, exact linearisation at W^0", f"{PAPER} Eq. 65 (exact drift and noise)"),
        "eq66": (np.trace(a.Mz), "tr M, Eq. 66 at W^0 (x (1 - N_i/P))", _A),
    }  # fmt: skip
    src = f"{_ESS[1]}; about the local point on range(Gamma), protocol (b)"
    return stationarity.trace_variables(sim, theories, src)


def diverged_dataset(s: Setup, a: TheoryAtW0, p: Params, stage: str) -> xr.Dataset:
    """The dataset of a cell whose chains diverged: theory at W^0, flag, NaN elsewhere."""
    v = {**theory_values(s, a, p), "diverged": 1}
    ds = assemble(v, _coords(p, np.zeros(0, dtype=np.int64), a.tau0, None), p)
    untested = stationarity.window_test(np.empty((0, p["replicas"], 2)), ("slowest", "loss"))
    traces = trace_variables(a, (np.nan, np.nan), v)
    ds = ds.assign({**ess_variables(None), **untested.variables(_ESS[1]), **traces})
    ds.attrs["diverged_in"] = stage
    return ds
