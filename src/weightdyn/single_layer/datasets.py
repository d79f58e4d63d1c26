"""One-cell xarray datasets of the single-layer model: theory (paper 000 Eqs. 4-34), SGD and SGF.

Eigen-spectra are stored sorted descending along ``mode``; the normalisations the paper uses
(lr sigma_eps^2 / (2S) for M, sigma_x^2 sigma_eps^2 / S for C) are stored beside them, not applied.
Each dataset is built from a table of (name, value, long_name, source) rows: a value of length N
lies along ``mode``, any other value is a scalar; every unit is "1" (the model is dimensionless).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from weightdyn import stats
from weightdyn.data import TeacherStudentData
from weightdyn.io import attrs
from weightdyn.single_layer import theory
from weightdyn.single_layer.sgf import euler_stationary_covariance

if TYPE_CHECKING:
    from weightdyn.single_layer.simulate import SGDResult

P000 = "paper 000"
DISCRETE = f"exact discrete recursion, beyond {P000} Eq. 30"
SGD_SOURCE = f"{P000} Eqs. 10-11 (SGD)"

Row = tuple[str, Any, str, str]  # name, value, long_name, source


def _dataset(rows: Sequence[Row], N: int) -> xr.Dataset:
    """The dataset of ``rows``: arrays along ``mode`` (0 .. N-1), everything else scalar."""
    variables = {}
    for name, value, long_name, source in rows:
        if isinstance(value, np.ndarray) and value.ndim == 1:
            variables[name] = (("mode",), np.asarray(value, dtype=float))
        else:
            variables[name] = ((), value)
        variables[name] += (attrs(long_name, "1", source),)
    mode = (
        "mode",
        np.arange(N),
        {"long_name": "eigenvalue index, sorted descending", "units": "1"},
    )
    return xr.Dataset(variables, coords={"mode": mode})


def _discrete(
    data: TeacherStudentData, lr: float, batch_size: int, sampling: str, lr_max: float
) -> tuple[np.ndarray, int, float]:
    """(sorted eigenvalues, CG iterations, residual) of the exact discrete-time second moment;
    NaN where it has no stationary state (lr >= lr_max, or the solve fails just below it)."""
    if lr < lr_max:
        try:
            disc = theory.discrete_stationary_covariance(data.X, data.y, lr, batch_size, sampling)
        except ValueError:  # not converged or not PSD: at the stability limit
            return np.full(data.N, np.nan), 0, np.nan
        return theory.sorted_eigenvalues(disc.M), disc.iterations, disc.residual
    return np.full(data.N, np.nan), 0, np.nan


def _spectra_rows(data: TeacherStudentData, lr: float, batch_size: int, sampling: str) -> list[Row]:
    """Hessian, noise and stationary-covariance spectra, norm ratios and losses (Eqs. 4-34)."""
    X, y, N = data.X, data.y, data.N
    H = theory.hessian(X)
    w_star = theory.min_norm_solution(X, y)
    C = theory.noise_covariance(X, y, batch_size, sampling)
    M = theory.stationary_covariance(H, C, lr)
    M_iso = lr * data.sigma_eps2 / (2 * batch_size)
    c_norm = np.linalg.norm(C)
    q_over_c = np.linalg.norm(theory.circulation(H, C)) / c_norm if c_norm > 0 else np.nan
    dw_teacher = w_star - data.u
    test_loss = 0.5 * (data.sigma_x2 * (dw_teacher @ dw_teacher + np.trace(M)) + data.sigma_eps2)
    C_hessian = theory.hessian_noise_covariance(H, data.sigma_eps2, batch_size)
    L_star = theory.optimal_loss(X, y)
    return [
        ("eig_H", theory.sorted_eigenvalues(H), "eigenvalues of the Hessian H", f"{P000} Eq. 4"),
        ("eig_C_theory", theory.sorted_eigenvalues(C),
         "eigenvalues of the noise covariance C at w*", f"{P000} Eqs. 17-18 (App. C prefactor)"),
        ("eig_C_hessian", theory.sorted_eigenvalues(C_hessian),
         "eigenvalues of the Hessian approximation of C", f"{P000} Eq. 20"),
        ("eig_M_lyapunov", theory.sorted_eigenvalues(M),
         "eigenvalues of the stationary weight covariance M", f"{P000} Eqs. 30-31"),
        ("eig_M_detailed_balance", theory.detailed_balance_eigenvalues(H, C, lr),
         "eigenvalues of M under detailed balance", f"{P000} Eq. 33"),
        ("M_isotropic", M_iso, "isotropic weight variance lr sigma_eps^2/(2S)", f"{P000} Eq. 34"),
        ("C_norm", data.sigma_x2 * data.sigma_eps2 / batch_size,
         "normalisation of C eigenvalues, sigma_x^2 sigma_eps^2/S", f"{P000} Fig. 2"),
        ("q_over_c", q_over_c,
         "Frobenius norm ratio ||Q||_F / ||C||_F", f"{P000} Eq. 31 (Fig. 4c inset)"),
        ("m_lyapunov_over_isotropic", np.linalg.norm(M) / (M_iso * np.sqrt(N)),
         "Frobenius norm ratio ||M_Eq30|| / ||M_Eq34||", f"{P000} Eqs. 30, 34 (Fig. 4c inset)"),
        ("var_w_theory", np.trace(M) / N,
         "mean stationary weight variance tr(M)/N", f"{P000} Eq. 30 (Fig. 4a)"),
        ("var_w_spatial_theory", theory.spatial_weight_variance(w_star, M),
         "stationary variance across the weights (1/N)[w*^T Pi w* + tr(Pi M)]",
         f"{P000} Eqs. 7, 30 (Fig. 4a)"),
        ("optimal_loss", L_star, "minimal training loss L*", f"{P000} Eqs. 9, 26"),
        ("train_loss_theory", L_star + 0.5 * np.trace(H @ M),
         "stationary mean training loss L* + tr(HM)/2", f"{P000} Eqs. 9, 30"),
        ("test_loss_theory", test_loss,
         "stationary mean population test loss", f"{P000} Eqs. 1, 7, 30"),
    ]  # fmt: skip


def _time_scale_rows(
    data: TeacherStudentData, lr: float, batch_size: int, sampling: str
) -> list[Row]:
    """Relaxation times (Eq. 27), stability, noise regime (App. C-D), the exact discrete theory."""
    X, P = data.X, data.P
    H = theory.hessian(X)
    eig_H = theory.sorted_eigenvalues(H)
    tau = theory.slowest_relaxation_steps(H, lr)
    lr_max = theory.max_stable_lr_second_moment(X, batch_size, sampling)
    eig_M_discrete, iterations, residual = _discrete(data, lr, batch_size, sampling, lr_max)
    radius = theory.second_moment_stability(X, lr, batch_size, sampling)
    return [
        ("omega_min", 1.0 / (lr * tau), "smallest nonzero Hessian eigenvalue", f"{P000} Eq. 27"),
        ("omega_max", eig_H[0], "largest Hessian eigenvalue", f"{P000} Eq. 27"),
        ("tau_steps", tau,
         "slowest relaxation time 1/(lr omega_min) in SGD steps", f"{P000} Eq. 27"),
        ("linearly_unstable", np.int8(lr * eig_H[0] > 2),
         "lr * omega_max > 2 (gradient descent unstable)", f"{P000} Eq. 11"),
        ("noise_prefactor", theory.noise_prefactor(P, batch_size, sampling),
         "mini-batch noise prefactor, 1/S or (P-S)/(S(P-1))", f"{P000} App. C"),
        ("lr_over_S", lr / batch_size,
         "additive-noise validity ratio lr/S (small: additive noise)", f"{P000} App. D"),
        ("lr_sigma_x2_over_S", lr * data.sigma_x2 / batch_size,
         "multiplicative-noise ratio lr sigma_x^2/S (>> 1: multiplicative)",
         f"{P000} Sec. II.2.2, App. D"),
        ("eig_M_discrete", eig_M_discrete,
         "eigenvalues of the exact stationary second moment of w - w* under SGD", DISCRETE),
        ("second_moment_radius", radius,
         "spectral radius of M -> E_B[(1 - lr H_B) M (1 - lr H_B)] (< 1: stable)", DISCRETE),
        ("lr_max_second_moment", lr_max,
         "largest learning rate with a bounded SGD second moment", DISCRETE),
        ("discrete_iterations", np.int64(iterations),
         "preconditioned conjugate-gradient steps of the exact solve", DISCRETE),
        ("discrete_residual", residual,
         "relative residual of the exact discrete recursion", DISCRETE),
        ("fluctuations_vanish", np.int8(data.N >= P),
         "N >= P: C = 0 at w*, no stationary fluctuations", f"{P000} Eq. 16"),
    ]  # fmt: skip


def theory_dataset(
    data: TeacherStudentData, lr: float, batch_size: int, sampling: str
) -> xr.Dataset:
    """Theory of one cell: Hessian, noise and stationary-covariance spectra, losses, time scales."""
    rows = _spectra_rows(data, lr, batch_size, sampling)
    rows += _time_scale_rows(data, lr, batch_size, sampling)
    return _dataset(rows, data.N)


def euler_dataset(
    data: TeacherStudentData, lr: float, batch_size: int, sampling: str, dt: float
) -> xr.Dataset:
    """Exact stationary covariance of the additive-noise Euler-Maruyama chain of Eq. 13.

    ``M = (1 - dt H) M (1 - dt H) + lr dt C`` (:func:`sgf.euler_stationary_covariance`): the
    prediction for SGF with additive noise at step ``dt``; Eq. 30 is its ``dt -> 0`` limit.
    (SGF with multiplicative noise C(w) at ``dt = lr`` has the second-moment recursion of SGD
    itself, whose fixed point is ``eig_M_discrete``.) NaN if the chain is unstable.
    """
    H = theory.hessian(data.X)
    C = theory.noise_covariance(data.X, data.y, batch_size, sampling)
    src = f"{P000} Eq. 13, Euler-Maruyama step dt (beyond Eq. 30)"
    M = euler_stationary_covariance(H, C, lr, dt)  # NaN pairs: dt omega > 2, no stationary state
    eig = theory.sorted_eigenvalues(M) if np.isfinite(M).all() else np.full(data.N, np.nan)
    rows = [
        ("eig_M_euler", eig,
         "eigenvalues of the stationary covariance of the additive-noise SGF chain", src),
        ("dt", float(dt), "Euler-Maruyama step in SDE time t = lr tau", src),
    ]  # fmt: skip
    return _dataset(rows, data.N)


_MOMENT_KEYS = ("eig", "se", "eig_t", "se_t", "var_w", "var_w_se", "var_ref", "var_ref_se",
                "spatial", "spatial_se", "train", "train_se", "test", "test_se")  # fmt: skip


def blocks_too_short(result: SGDResult, tau_int: float) -> bool:
    """Whether the time blocks of ``result`` span fewer than ``MIN_BLOCK_TAU_INT`` slowest
    autocorrelation times ``tau_int`` (:func:`weightdyn.stats.blocks_too_short`)."""
    blocks_per_replica = result.sum_dw.shape[0] / result.replicas
    return stats.blocks_too_short(result.sample_steps / blocks_per_replica, tau_int)


def error_groups(result: SGDResult, tau_int: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sum_dw, sum_dwdw, n_records) of the jackknife's groups: the (replica, time-block)
    groups of ``result``, or, where a block spans fewer than
    :data:`weightdyn.stats.MIN_BLOCK_TAU_INT` slowest autocorrelation times ``tau_int`` (in the
    chain's steps), each replica's blocks pooled into one group (its blocks are not
    independent; replicas always are)."""
    if not blocks_too_short(result, tau_int):
        return result.sum_dw, result.sum_dwdw, result.n_records
    return stats.sums_by_label(
        result.group_replica, result.sum_dw, result.sum_dwdw, result.n_records
    )


def _moments(
    data: TeacherStudentData, w_star: np.ndarray, result: SGDResult, tau_int: float
) -> dict[str, np.ndarray | float]:
    """Spectra, mean variances and losses with their jackknife errors over
    :func:`error_groups` (NaN if diverged)."""
    N = data.N
    if result.diverged:
        nan = np.full(N, np.nan)
        return {key: nan if key.startswith(("eig", "se")) else np.nan for key in _MOMENT_KEYS}
    sum_dw, sum_dwdw, n = error_groups(result, tau_int)
    covs_ref = stats.group_covariances(sum_dw, sum_dwdw, n, about="reference")
    out: dict[str, Any] = {}
    out["eig"], out["se"] = stats.eigenvalues_with_se(covs_ref)
    # per replica: pool its time blocks, then subtract the replica's own time average
    s1, s2, counts = stats.sums_by_label(
        result.group_replica, result.sum_dw, result.sum_dwdw, result.n_records
    )
    covs_mean = stats.group_covariances(s1, s2, counts, about="mean")
    out["eig_t"], out["se_t"] = stats.eigenvalues_with_se(covs_mean)
    out["var_w"], out["var_w_se"] = stats.jackknife_of_mean(_mean_trace, covs_mean)
    out["var_ref"], out["var_ref_se"] = stats.jackknife_of_mean(_mean_trace, covs_ref)
    mean_dw = sum_dw / n[:, None]
    out["spatial"], out["spatial_se"] = _spatial_variance(w_star, mean_dw, covs_ref)
    losses = _losses(data, w_star, mean_dw, covs_ref)
    out["train"], out["train_se"], out["test"], out["test_se"] = losses
    return out


def sgd_dataset(
    data: TeacherStudentData,
    w_star: np.ndarray,
    result: SGDResult,
    method: str = "SGD",
    source: str = SGD_SOURCE,
    tau_int: float = float("inf"),
) -> xr.Dataset:
    """SGD estimates of one cell with jackknife standard errors over (replica, time-block) groups.

    The covariance about w* uses every (replica, block) group, or one group per replica where
    the blocks span fewer than ``MIN_BLOCK_TAU_INT`` slowest autocorrelation times ``tau_int``
    (steps of the chain; :func:`error_groups`, flagged ``errors_by_replica``; ``inf``: never
    pooled, for chains whose blocks are known to be long); the covariance about the time
    average subtracts each replica's average over the whole sampling window (paper 000 Fig. 4a:
    the temporal variance of each weight). Losses are exact functions of the first and second
    moments of w over the recorded snapshots (Eq. 9 for training, the fresh test set for testing).
    ``method`` names the simulation in the long names and ``source`` its equations: an SGF run
    (:mod:`weightdyn.single_layer.sgf`) has the same result layout and the same estimators.
    """
    v, m, src = _moments(data, w_star, result, tau_int), method, source
    by_replica = np.int8(blocks_too_short(result, tau_int))
    rows = [
        ("eig_M_sgd", v["eig"], f"eigenvalues of the {m} covariance about w*", src),
        ("eig_M_sgd_se", v["se"], "standard error of eig_M_sgd (jackknife)", src),
        ("eig_M_sgd_tavg", v["eig_t"],
         f"eigenvalues of the {m} covariance about the time average", src),
        ("eig_M_sgd_tavg_se", v["se_t"], "standard error of eig_M_sgd_tavg (jackknife)", src),
        ("var_w_sgd", v["var_w"],
         f"mean temporal weight variance <<dw_i^2>_t>_i ({m})", f"{src}, Fig. 4a"),
        ("var_w_sgd_se", v["var_w_se"], "standard error of var_w_sgd", src),
        ("var_w_spatial_sgd", v["spatial"],
         f"variance across the weights at a fixed time <dw_i^2>_i ({m})", f"{src}, Fig. 4a"),
        ("var_w_spatial_sgd_se", v["spatial_se"], "standard error of var_w_spatial_sgd", src),
        ("var_w_sgd_wstar", v["var_ref"], f"mean {m} weight variance about w*", src),
        ("var_w_sgd_wstar_se", v["var_ref_se"], "standard error of var_w_sgd_wstar", src),
        ("train_loss", v["train"], f"time-averaged training loss under {m}", f"{P000} Eq. 3"),
        ("train_loss_se", v["train_se"], "standard error of train_loss", src),
        ("test_loss", v["test"], f"time-averaged loss on fresh test samples ({m})",
         f"{P000} Eq. 3 on a test set"),
        ("test_loss_se", v["test_se"], "standard error of test_loss", src),
        ("diverged", np.int8(result.diverged), f"{m} weights diverged (lr beyond stability)", src),
        ("errors_by_replica", by_replica,
         "jackknife groups are replicas (time blocks shorter than 10 slowest tau_int)", src),
        ("burnin_steps", result.burnin_steps, f"{m} burn-in steps", src),
        ("sample_steps", result.sample_steps, f"{m} sampling steps", src),
        ("replicas", result.replicas, f"independent {m} replicas", src),
    ]  # fmt: skip
    return _dataset(rows, data.N)


def _mean_trace(covs: np.ndarray) -> np.ndarray:
    """tr(M)/N of each covariance in a stack (the mean weight variance, paper 000 Fig. 4a)."""
    return np.trace(covs, axis1=-2, axis2=-1) / covs.shape[-1]


def _spatial_variance(
    w_star: np.ndarray, mean_dw: np.ndarray, covs_ref: np.ndarray
) -> tuple[float, float]:
    """Snapshot average of the variance across the weights (Fig. 4a, ``<dw_i^2>_i``) with its
    standard error over the groups, from the moments of ``dw = w - w*`` of each group: for
    ``w = w* + dw`` it is ``(1/N) [w*^T Pi w* + 2 w*^T Pi dw + dw^T Pi dw]``, Pi the centring."""
    N = w_star.size
    centred = w_star - w_star.mean()
    second = np.trace(covs_ref, axis1=-2, axis2=-1) - covs_ref.sum(axis=(-2, -1)) / N
    per_group = (centred @ centred + 2.0 * mean_dw @ centred + second) / N
    mean, se = stats.mean_with_se(per_group)
    return float(mean), float(se)


def _losses(
    data: TeacherStudentData, w_star: np.ndarray, mean_dw: np.ndarray, covs_ref: np.ndarray
) -> tuple[float, float, float, float]:
    """Mean train and test loss over the snapshots, from the moments of dw = w - w* per group.

    L(w* + dw) = L(w*) + g.dw + dw^T H dw / 2 exactly for a quadratic loss (Eq. 9, g = 0 on the
    training set), so the snapshot average needs only the group means and second moments.
    """
    est = []
    for X, y in ((data.X, data.y), (data.X_test, data.y_test)):
        H = theory.hessian(X)
        g = H @ w_star - X.T @ y / X.shape[0]
        l0 = theory.loss(X, y, w_star)
        per_group = l0 + mean_dw @ g + 0.5 * np.einsum("ij,gji->g", H, covs_ref)
        est.extend(stats.mean_with_se(per_group))
    return tuple(float(v) for v in est)
