"""SGD as a Bayesian sampler (paper 000, App. B): the ``bayes_sampler`` experiment.

One cell is one regression data set (:mod:`weightdyn.single_layer.bayes_data`), one SGD variant
(weight decay ``chi``, preconditioner ``Lam``, injected-noise temperature ``T``; the update of
:mod:`weightdyn.single_layer.bayes`), one target (the posterior of App. B or the sandwich
covariance) and one learning-rate rule. It holds the exact discrete-time stationary covariance of
the variant, the continuous-time (Lyapunov, Eq. 29) one, the target, and (``dynamics: sgd``) the
covariance SGD samples about ``w_min``, each as sorted eigenvalues, trace, Gaussian KL to the
target and relative Frobenius error, SGD's with jackknife errors over (replica, block) groups.

Units: ``temperature`` is ``T / T_post`` with ``T_post = sigma^2 / P`` (``sigma^2`` the noise
variance of the target: ``T = 1`` with ``lr -> 0`` samples the posterior). Learning-rate rules
(``lr_rule``): ``fixed`` (``lr`` as given), ``fraction`` (``lr`` times the variant's stability
limit), ``mandt`` (continuous-time KL optimum: Mandt et al. 2017, Thm. 1; the continuous-time rule
``2B/n`` for the sandwich with ``hessian_inverse``), ``exact`` (exact discrete KL optimum) and
``wang`` (``lr = 1`` with the ``wang`` preconditioner).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import seeds, stats
from weightdyn.agreement import Agreement, agreement
from weightdyn.experiments import ConfigError, Experiment, Param, Params, Progress
from weightdyn.io import attrs
from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer import bayes, bayes_rules
from weightdyn.single_layer import params as sp
from weightdyn.single_layer.bayes_data import NOISE_MODEL, REGRESSION
from weightdyn.single_layer.bayes_figures import FIGURES
from weightdyn.single_layer.datasets import blocks_too_short, error_groups
from weightdyn.single_layer.simulate import SGDResult, run_sgd
from weightdyn.single_layer.teacher_student import N_TEST

SRC = "paper 000 App. B; docs/bayes_sampler.md"
STREAM = "single_layer/bayes/sgd"
PRECONDITIONERS = (
    "none", "hessian_inverse", "diagonal", "mandt", "mandt_diagonal", "wang", "exact_diagonal",
    "file", "function",
)  # fmt: skip
LR_RULES = ("fixed", "fraction", "mandt", "exact", "wang")
TARGETS = ("posterior", "sandwich")

PARAMS = (
    *sp.DATA_AND_SGD,
    NOISE_MODEL,
    Param("weight_decay", float, 0.0, "weight decay chi (L + chi |w|^2 / 2)", axis=True,
          minimum=0),
    Param("preconditioner", str, "none", "preconditioner Lambda", axis=True,
          allowed=PRECONDITIONERS),
    Param("temperature", float, 0.0, "injected-noise temperature T / (sigma^2 / P)", axis=True,
          minimum=0),
    Param("target", str, "posterior", "target law", axis=True, allowed=TARGETS),
    Param("lr_rule", str, "fixed", "learning-rate rule", axis=True, allowed=LR_RULES),
    Param("dynamics", str, "sgd", "simulated dynamics (none: theory only)", axis=True,
          allowed=("sgd", "none")),
    Param("posterior_noise", str, "known", "label-noise variance of the posterior",
          allowed=("known", "estimated")),
    Param("preconditioner_file", str, "", "Lambda as an (N, N) .npy or text file"),
    Param("preconditioner_function", str, "", "Lambda from module:function(problem)"),
    N_TEST,
    Param("replicas", int, 16, "independent chains per cell", minimum=2),
    Param("burnin_tau", float, 10.0, "burn-in in slowest relaxation times", minimum=0),
    Param("sample_tau", float, 2000.0, "sampling length in slowest relaxation times", minimum=0),
    Param("sample_steps", int, 20_000, "least sampling steps", minimum=1),
    Param("sample_max_steps", int, 2_000_000, "most sampling steps", minimum=1),
    Param("thin", int, 1, "steps between recorded snapshots", minimum=1),
    Param("n_blocks", int, 4, "time blocks per chain (error groups)", minimum=1),
)  # fmt: skip


def _derive(params: dict[str, Any]) -> dict[str, Any]:
    """P from p_over_n, and the checks between the variant's axes (each names its keys)."""
    N, P, ratio = params["N"], params.get("P"), params.get("p_over_n")
    if (P is None) == (ratio is None):
        raise ConfigError("P: give exactly one of 'P' or 'p_over_n'")
    P = round(ratio * N) if P is None else P
    params["P"], params["p_over_n"] = int(P), P / N
    if N > bayes.MAX_N:
        raise ConfigError(f"N: {N} is too large for the dense exact theory; allowed: N <= "
                          f"{bayes.MAX_N}")  # fmt: skip
    if params["sampling"] == "without" and params["batch_size"] > P:
        raise ConfigError(f"batch_size: {params['batch_size']} exceeds P={P}; allowed: "
                          "batch_size <= P without replacement")  # fmt: skip
    _check_combination(params)
    return params


def _check_combination(params: dict[str, Any]) -> None:
    rule, pre, T = params["lr_rule"], params["preconditioner"], params["temperature"]
    if rule == "mandt" and T > 0:
        raise ConfigError("lr_rule: mandt is a rule without injected noise; allowed with "
                          "temperature: 0 only")  # fmt: skip
    if rule == "wang" and pre != "wang":
        raise ConfigError("lr_rule: wang (lr = 1) belongs to preconditioner: wang; allowed: "
                          "lr_rule wang with preconditioner wang")  # fmt: skip
    if pre == "exact_diagonal" and rule != "exact":
        raise ConfigError("preconditioner: exact_diagonal is found together with its scale; "
                          "allowed: lr_rule exact only")  # fmt: skip
    if pre == "wang" and T > 0:
        raise ConfigError("preconditioner: wang is not symmetric, so no injected noise "
                          "Lambda^(1/2) xi exists; allowed: temperature 0")  # fmt: skip
    for value, key in (("file", "preconditioner_file"), ("function", "preconditioner_function")):
        if pre == value and not params.get(key):
            raise ConfigError(f"{key}: preconditioner {value} needs the setting {key}")


# ------------------------------------------------------------------------- the variant


def _user_preconditioner(problem: bayes.Problem, params: Params) -> np.ndarray:
    """Lambda from ``preconditioner_file`` (.npy or text) or ``module:function(problem)``."""
    if params["preconditioner"] == "file":
        key, path = "preconditioner_file", params["preconditioner_file"]
        Lam = np.load(path) if path.endswith(".npy") else np.loadtxt(path, ndmin=2)
    else:
        key, spec = "preconditioner_function", params["preconditioner_function"]
        module, _, name = spec.partition(":")
        Lam = getattr(importlib.import_module(module), name)(problem)
    Lam = np.asarray(Lam, dtype=float)
    if Lam.shape != (problem.N, problem.N):
        raise ValueError(f"{key}: Lambda must have shape ({problem.N}, {problem.N}), got "
                         f"{Lam.shape}")  # fmt: skip
    try:
        return bayes.check_preconditioner(Lam, problem.N, symmetric=True)
    except ValueError as err:
        raise ValueError(f"{key}: {err}") from None


NAMED = {
    "hessian_inverse": bayes_rules.hessian_inverse_preconditioner,
    "diagonal": bayes_rules.jacobi_preconditioner,
    "mandt": bayes_rules.mandt_preconditioner,
    "mandt_diagonal": bayes_rules.mandt_diagonal_preconditioner,
    "wang": bayes_rules.wang_preconditioner,
}


def variant_of(
    problem: bayes.Problem, params: Params, target: np.ndarray, T: float
) -> bayes.Variant:
    """The cell's (lr, Lam, T) from its preconditioner and learning-rate rule."""
    pre, rule, lr = params["preconditioner"], params["lr_rule"], params["lr"]
    if pre == "exact_diagonal":
        g = bayes_rules.exact_optimal_diagonal(problem, target, T)
        return bayes.Variant(float(g.mean()), np.diag(g / g.mean()), T)
    Lam = None if pre == "none" else NAMED.get(pre, lambda p: None)(problem)
    if pre in ("file", "function"):
        Lam = _user_preconditioner(problem, params)
    rules = {
        "fixed": lambda: lr,
        "fraction": lambda: lr * bayes.max_stable_lr(problem, Lam),
        "mandt": lambda: bayes_rules.continuous_optimal_lr(problem, target, Lam),
        "exact": lambda: bayes_rules.exact_optimal_lr(problem, target, Lam, T),
        "wang": lambda: 1.0,
    }
    return bayes.Variant(float(rules[rule]()), Lam, T)


def target_of(problem: bayes.Problem, params: Params) -> tuple[np.ndarray, float]:
    """(target covariance, sigma^2) of the cell: the posterior with the known (homoskedastic
    data, ``posterior_noise: known``) or estimated label-noise variance, or the sandwich."""
    known = params["posterior_noise"] == "known" and params["noise_model"] == "homoskedastic"
    s2 = float(params["sigma_eps2"]) if known else bayes.residual_variance(
        problem.X, problem.y, problem.chi
    )  # fmt: skip
    if params["target"] == "posterior":
        return bayes.posterior_covariance(problem, s2), s2
    return bayes.sandwich_covariance(problem), s2


# ------------------------------------------------------------------------------- theory


def _scalar(value: float, long_name: str, units: str = "1", source: str = SRC) -> tuple:
    return ((), float(value), attrs(long_name, units, source))


def _spectrum(eig: np.ndarray, long_name: str, source: str = SRC) -> tuple:
    return (("mode",), eig, attrs(long_name, "1", source))


def _summaries(M: np.ndarray | None, target: np.ndarray, name: str, what: str) -> dict:
    """Sorted eigenvalues, trace, KL and Frobenius error of ``M`` (NaN when None)."""
    N = target.shape[0]
    if M is None:
        eig, tr, kl, fe = np.full(N, np.nan), np.nan, np.nan, np.nan
    else:
        eig = np.linalg.eigvalsh(M)[::-1]
        tr, kl, fe = np.trace(M), bayes.gaussian_kl(M, target), bayes.frobenius_error(M, target)
    return {
        f"eig_M_{name}": _spectrum(eig, f"eigenvalues of M, {what} (descending)"),
        f"trace_M_{name}": _scalar(tr, f"tr M, {what}"),
        f"kl_{name}": _scalar(kl, f"KL(N(0, M) || N(0, Sigma_target)), {what}"),
        f"frobenius_{name}": _scalar(fe, f"||M - Sigma_target||_F / ||Sigma_target||_F, {what}"),
    }


def theory_dataset(
    problem: bayes.Problem, variant: bayes.Variant, target: np.ndarray, s2: float
) -> xr.Dataset:
    """The exact discrete and continuous covariances, the target, the stability limit and the
    rules' learning rates of the cell (beyond the limit, flagged ``unstable``, the discrete
    quantities are NaN; the continuous-time ones know no limit)."""
    radius = bayes.stability_radius(problem, variant)
    lr_max = bayes.max_stable_lr(problem, variant.Lam)
    stable = radius < 1.0
    exact = bayes.stationary_covariance(problem, variant) if stable else None
    cont = bayes.continuous_covariance(problem, variant)
    G = variant.step_matrix(problem.N)
    noise = np.trace(G @ problem.C) / variant.lr
    crossover = 2 * problem.N * variant.T / noise if variant.T > 0 else np.nan
    variables = {
        "lr_used": _scalar(variant.lr, "learning rate lambda of the cell (after its rule)"),
        "lr_max": _scalar(lr_max, "second-moment stability limit of the variant's lambda"),
        "lr_fraction": _scalar(variant.lr / lr_max, "lambda / stability limit"),
        "stability_radius": _scalar(radius, "spectral radius of the second-moment map"),
        "unstable": _scalar(float(not stable), "beyond the stability limit (1) or not (0)"),
        "temperature_abs": _scalar(variant.T, "injected-noise temperature T"),
        "noise_variance": _scalar(s2, "label-noise variance sigma^2 of the target"),
        "lr_crossover": _scalar(
            crossover,
            "lambda where mini-batch and injected noise give equal tr(K M): 2 N T / tr(Lambda C)",
        ),
        "trace_injected_limit": _scalar(
            variant.T * np.trace(np.linalg.inv(problem.K)) if variant.T > 0 else np.nan,
            "tr M of the injected noise alone, T tr K^-1 (the lr -> 0 limit, App. B)",
        ),
        **_summaries(exact, target, "exact", "exact discrete-time theory"),
        **_summaries(cont, target, "continuous", "continuous time (Eq. 29)"),
        "eig_target": _spectrum(np.linalg.eigvalsh(target)[::-1], "eigenvalues of the target"),
        "trace_target": _scalar(np.trace(target), "tr Sigma_target"),
    }
    return xr.Dataset(variables)


# ---------------------------------------------------------------------------- simulation


def relaxation_steps(problem: bayes.Problem, variant: bayes.Variant, radius: float) -> float:
    """The slowest relaxation time in SGD steps: of the mean, ``1 / min Re eig(G K)``, or of
    the second moment, ``1 / (1 - radius)`` with the spectral radius of the second-moment map,
    whichever is longer. Near the stability limit the second moment relaxes slowest (its
    fluctuations are heavy-tailed there), so a length in mean-relaxation times undersamples it:
    at 80 % of the limit (S = 1) 2000 of those gave trace z-scores of -4."""
    G = variant.step_matrix(problem.N)
    tau_mean = 1.0 / float(np.linalg.eigvals(G @ problem.K).real.min())
    return max(tau_mean, 1.0 / (1.0 - radius))


def schedule_of(tau: float, params: Params) -> Schedule:
    """Burn-in ``burnin_tau`` relaxation times; sampling ``sample_tau`` of them within
    ``[sample_steps, sample_max_steps]``, in whole thinned blocks."""
    unit = params["thin"] * params["n_blocks"]
    sample = max(params["sample_steps"], params["sample_tau"] * tau)
    sample = min(sample, params["sample_max_steps"])
    return Schedule(
        burnin_steps=int(np.ceil(params["burnin_tau"] * tau)),
        sample_steps=int(max(1, round(sample / unit)) * unit),
        thin=params["thin"],
        n_blocks=params["n_blocks"],
    )


def simulate(
    problem: bayes.Problem,
    variant: bayes.Variant,
    radius: float,
    params: Params,
    progress: Progress,
) -> tuple[SGDResult, float]:
    """R replicas of the variant from ``w_min`` through the SGD engine; (result, tau)."""
    rng = seeds.generator(STREAM, {k: params[k] for k in IDENTITY})
    update = Update(
        variant.lr, params["batch_size"], params["sampling"], weight_decay=problem.chi,
        preconditioner=variant.Lam, temperature=variant.T,
    )  # fmt: skip
    tau = relaxation_steps(problem, variant, radius)
    schedule = schedule_of(tau, params)
    progress(f"SGD: {params['replicas']} replicas, tau {tau:.3g} steps, burn-in "
             f"{schedule.burnin_steps}, sampling {schedule.sample_steps} steps")  # fmt: skip
    W0 = np.tile(problem.w_min, (params["replicas"], 1))
    result = run_sgd(problem.X, problem.y, problem.w_min, W0, update, schedule, rng,
                     progress=progress)  # fmt: skip
    return result, tau


def _frobenius_with_se(covs: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """Relative Frobenius error of the mean covariance from the bias-corrected jackknife of its
    square: ``|M - Sigma|^2`` is quadratic in the mean, so the correction removes the sampling
    noise ``tr Var(M_hat)`` exactly (the norm itself is not smooth at ``M = Sigma``, where its
    correction fails); s.e. by the delta method."""
    sq, se_sq = stats.jackknife_bias_corrected(
        lambda M: bayes.frobenius_error(M, target) ** 2, covs
    )
    value = float(np.sqrt(max(float(sq), 0.0)))
    return value, float(se_sq / (2 * value)) if value > 0 else float(np.sqrt(se_sq))


def sgd_dataset(result: SGDResult, tau: float, target: np.ndarray) -> xr.Dataset:
    """SGD's covariance about ``w_min``: eigenvalues, trace (jackknife), KL and Frobenius
    error (bias-corrected jackknife) over :func:`~weightdyn.single_layer.datasets.error_groups`
    with ``tau`` as the autocorrelation time (replicas as groups where a capped length leaves
    blocks shorter than ten of it); NaN if a replica diverged."""
    N = target.shape[0]
    nan = np.full(N, np.nan)
    eig, eig_se, values = nan, nan, {k: (np.nan, np.nan) for k in ("trace", "kl", "frob")}
    if not result.diverged:
        covs = stats.group_covariances(*error_groups(result, tau))
        eig, eig_se = stats.eigenvalues_with_se(covs)
        values = {
            "trace": stats.jackknife_of_mean(lambda Ms: np.trace(Ms, axis1=1, axis2=2), covs),
            "kl": stats.jackknife_bias_corrected(lambda M: bayes.gaussian_kl(M, target), covs),
            "frob": _frobenius_with_se(covs, target),
        }
    what = "SGD (sampled about w_min)"
    src = f"{SRC}; SGD of the variant"
    out = {
        "eig_M_sgd": _spectrum(eig, f"eigenvalues of M, {what}", src),
        "eig_M_sgd_se": _spectrum(eig_se, "standard error of eig_M_sgd (jackknife)", src),
        "diverged": _scalar(float(result.diverged), "a replica diverged (1) or not (0)"),
        "sample_steps": _scalar(result.sample_steps, "SGD sampling steps per replica"),
        "tau_steps": _scalar(
            tau, "slowest relaxation time (of the mean or the second moment)", "1"
        ),
        "sampled_tau": _scalar(result.sample_steps / tau, "sampling length in relaxation times"),
        "errors_by_replica": _scalar(
            float(blocks_too_short(result, tau)), "jackknife groups are replicas (short blocks)"
        ),
    }
    for key, name, long in (("trace", "trace_M", "tr M"), ("kl", "kl", "KL to the target"),
                            ("frob", "frobenius", "relative Frobenius error")):  # fmt: skip
        out[f"{name}_sgd"] = _scalar(values[key][0], f"{long}, {what}", source=src)
        out[f"{name}_sgd_se"] = _scalar(values[key][1], f"standard error of {long}, {what}",
                                        source=src)  # fmt: skip
    return xr.Dataset(out)


def run_cell(params: Params, progress: Progress) -> xr.Dataset:
    """Theory of the cell's variant and target, plus its SGD unless ``dynamics`` is none."""
    data = params["data"]
    problem = bayes.Problem(
        data.X, data.y, params["batch_size"], params["sampling"], params["weight_decay"]
    )
    target, s2 = target_of(problem, params)
    T = params["temperature"] * s2 / problem.P
    variant = variant_of(problem, params, target, T)
    progress(f"variant: lr={variant.lr:.4g} ({params['lr_rule']}), preconditioner "
             f"{params['preconditioner']}, chi={problem.chi:g}, T={T:.3g}")  # fmt: skip
    ds = theory_dataset(problem, variant, target, s2)
    if params["dynamics"] == "sgd" and not int(ds["unstable"]):
        ds = ds.merge(
            sgd_dataset(
                *simulate(problem, variant, float(ds["stability_radius"]), params, progress), target
            )
        )
    elif params["dynamics"] == "sgd":
        progress(f"WARNING: lr = {variant.lr:.4g} is beyond the variant's stability limit "
                 f"{float(ds['lr_max']):.4g}; flagged unstable, not simulated")  # fmt: skip
    return ds


IDENTITY = tuple(p.name for p in PARAMS if p.axis)

EXACT = "exact discrete-time theory (docs/bayes_sampler.md)"


def _agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """SGD against the exact discrete theory of its variant, pooled over the sweep's cells:
    sorted eigenvalues, tr M, and the KL and Frobenius error to the target (empty for a
    theory-only sweep)."""
    if "eig_M_sgd" not in ds:
        return []
    eqs = "App. B; Eq. 29 extended (R_Lambda)"
    rows = [
        agreement(label, f"eigenvalues of the SGD covariance vs the {EXACT}", eqs,
                  ds["eig_M_sgd"], ds["eig_M_exact"], ds["eig_M_sgd_se"], paper="000+"),
        agreement(label, f"tr M of SGD vs the {EXACT}", eqs, ds["trace_M_sgd"],
                  ds["trace_M_exact"], ds["trace_M_sgd_se"], paper="000+"),
        agreement(label, "KL(SGD || target) vs the exact discrete-time KL", eqs, ds["kl_sgd"],
                  ds["kl_exact"], ds["kl_sgd_se"], paper="000+"),
        agreement(label, "||M_SGD - Sigma||_F / ||Sigma||_F vs the exact prediction", eqs,
                  ds["frobenius_sgd"], ds["frobenius_exact"], ds["frobenius_sgd_se"],
                  paper="000+"),
    ]  # fmt: skip
    return [row for row in rows if row.points > 0]


def _resources(params: Params, attempt: int) -> dict[str, int]:
    """The dense theory (``N^6``-ish) plus at most ``sample_max_steps`` SGD steps per replica."""
    N, S, R = params["N"], params["batch_size"], params["replicas"]
    steps = params["sample_max_steps"] if params["dynamics"] == "sgd" else 0
    seconds = 1e-9 * (N**6 + 4 * R * steps * (S * N + N * N))
    return {
        "mem_mb": attempt * (500 + int(8 * 4 * N**4 / 2**20)),
        "runtime": attempt * int(5 + seconds / 30),
        "threads": 2 if seconds > 30 else 1,
    }


EXPERIMENTS = {
    "bayes_sampler": Experiment(
        name="bayes_sampler",
        family="single_layer",
        title="SGD as a Bayesian sampler: exact stationary law of its variants vs the target",
        source="paper 000 App. B, Eqs. 29-30; Mandt et al. 2017; Wang, Ding & Huggins 2026",
        params=PARAMS,
        run_cell=run_cell,
        derive=_derive,
        identity=IDENTITY,
        agreement=_agreement,
        resources=_resources,
        figures=FIGURES,
        default_figures=("kl_vs_lr", "spectra"),
        data=REGRESSION,
    )
}
