"""One-cell xarray datasets of the single-layer model: theory (paper 000 Eqs. 4-34) and SGD.

Eigen-spectra are stored sorted descending along ``mode``; the normalisations the paper uses
(lr sigma_eps^2 / (2S) for M, sigma_x^2 sigma_eps^2 / S for C) are stored beside them, not applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from weightdyn import stats
from weightdyn.data import TeacherStudentData
from weightdyn.io import attrs
from weightdyn.single_layer import theory

if TYPE_CHECKING:
    from weightdyn.single_layer.simulate import SGDResult

P000 = "paper 000"
DISCRETE = f"exact discrete recursion, beyond {P000} Eq. 30"


def _mode(values: np.ndarray) -> tuple[tuple[str], np.ndarray]:
    return ("mode",), np.asarray(values, dtype=float)


def theory_dataset(
    data: TeacherStudentData, lr: float, batch_size: int, sampling: str
) -> xr.Dataset:
    """Theory of one cell: Hessian, noise and stationary-covariance spectra, losses, time scales."""
    X, y = data.X, data.y
    N, P = data.N, data.P
    H = theory.hessian(X)
    w_star = theory.min_norm_solution(X, y)
    C = theory.noise_covariance(X, y, batch_size, sampling)
    M = theory.stationary_covariance(H, C, lr)
    Q = theory.circulation(H, C)
    M_iso = lr * data.sigma_eps2 / (2 * batch_size)
    eig_H = theory.sorted_eigenvalues(H)
    fluctuations_vanish = N >= P
    c_norm = np.linalg.norm(C)
    q_over_c = np.linalg.norm(Q) / c_norm if c_norm > 0 else np.nan
    m_iso_norm = M_iso * np.sqrt(N)
    tau = theory.slowest_relaxation_steps(H, lr)
    lr_max = theory.max_stable_lr_second_moment(X, batch_size, sampling)
    if lr < lr_max:
        disc = theory.discrete_stationary_covariance(X, y, lr, batch_size, sampling)
        eig_M_discrete = theory.sorted_eigenvalues(disc.M)
        iterations, residual = disc.iterations, disc.residual
    else:  # the second moment diverges: no stationary state
        eig_M_discrete = np.full(N, np.nan)
        iterations, residual = 0, np.nan
    dw_teacher = w_star - data.u
    test_loss = 0.5 * (data.sigma_x2 * (dw_teacher @ dw_teacher + np.trace(M)) + data.sigma_eps2)
    ds = xr.Dataset(
        {
            "eig_H": (
                *_mode(eig_H),
                attrs("eigenvalues of the Hessian H", "1", f"{P000} Eq. 4"),
            ),
            "eig_C_theory": (
                *_mode(theory.sorted_eigenvalues(C)),
                attrs(
                    "eigenvalues of the noise covariance C at w*",
                    "1",
                    f"{P000} Eqs. 17-18 (App. C prefactor)",
                ),
            ),
            "eig_C_hessian": (
                *_mode(
                    theory.sorted_eigenvalues(
                        theory.hessian_noise_covariance(H, data.sigma_eps2, batch_size)
                    )
                ),
                attrs("eigenvalues of the Hessian approximation of C", "1", f"{P000} Eq. 20"),
            ),
            "eig_M_lyapunov": (
                *_mode(theory.sorted_eigenvalues(M)),
                attrs(
                    "eigenvalues of the stationary weight covariance M", "1", f"{P000} Eqs. 30-31"
                ),
            ),
            "eig_M_detailed_balance": (
                *_mode(theory.detailed_balance_eigenvalues(H, C, lr)),
                attrs("eigenvalues of M under detailed balance", "1", f"{P000} Eq. 33"),
            ),
            "M_isotropic": (
                (),
                M_iso,
                attrs("isotropic weight variance lr sigma_eps^2/(2S)", "1", f"{P000} Eq. 34"),
            ),
            "C_norm": (
                (),
                data.sigma_x2 * data.sigma_eps2 / batch_size,
                attrs(
                    "normalisation of C eigenvalues, sigma_x^2 sigma_eps^2/S", "1", f"{P000} Fig. 2"
                ),
            ),
            "q_over_c": (
                (),
                q_over_c,
                attrs(
                    "Frobenius norm ratio ||Q||_F / ||C||_F", "1", f"{P000} Eq. 31 (Fig. 4c inset)"
                ),
            ),
            "m_lyapunov_over_isotropic": (
                (),
                np.linalg.norm(M) / m_iso_norm,
                attrs(
                    "Frobenius norm ratio ||M_Eq30|| / ||M_Eq34||",
                    "1",
                    f"{P000} Eqs. 30, 34 (Fig. 4c inset)",
                ),
            ),
            "var_w_theory": (
                (),
                np.trace(M) / N,
                attrs("mean stationary weight variance tr(M)/N", "1", f"{P000} Eq. 30 (Fig. 4a)"),
            ),
            "optimal_loss": (
                (),
                theory.optimal_loss(X, y),
                attrs("minimal training loss L*", "1", f"{P000} Eqs. 9, 26"),
            ),
            "train_loss_theory": (
                (),
                theory.optimal_loss(X, y) + 0.5 * np.trace(H @ M),
                attrs("stationary mean training loss L* + tr(HM)/2", "1", f"{P000} Eqs. 9, 30"),
            ),
            "test_loss_theory": (
                (),
                test_loss,
                attrs("stationary mean population test loss", "1", f"{P000} Eqs. 1, 7, 30"),
            ),
            "omega_min": (
                (),
                1.0 / (lr * tau),
                attrs("smallest nonzero Hessian eigenvalue", "1", f"{P000} Eq. 27"),
            ),
            "omega_max": (
                (),
                eig_H[0],
                attrs("largest Hessian eigenvalue", "1", f"{P000} Eq. 27"),
            ),
            "tau_steps": (
                (),
                tau,
                attrs("slowest relaxation time 1/(lr omega_min)", "steps", f"{P000} Eq. 27"),
            ),
            "linearly_unstable": (
                (),
                np.int8(lr * eig_H[0] > 2),
                attrs("lr * omega_max > 2 (gradient descent unstable)", "1", f"{P000} Eq. 11"),
            ),
            "noise_prefactor": (
                (),
                theory.noise_prefactor(P, batch_size, sampling),
                attrs("mini-batch noise prefactor, 1/S or (P-S)/(S(P-1))", "1", f"{P000} App. C"),
            ),
            "lr_over_S": (
                (),
                lr / batch_size,
                attrs(
                    "additive-noise validity ratio lr/S (small: additive noise)",
                    "1",
                    f"{P000} App. D",
                ),
            ),
            "lr_sigma_x2_over_S": (
                (),
                lr * data.sigma_x2 / batch_size,
                attrs(
                    "multiplicative-noise ratio lr sigma_x^2/S (>> 1: multiplicative)",
                    "1",
                    f"{P000} Sec. II.2.2, App. D",
                ),
            ),
            "eig_M_discrete": (
                *_mode(eig_M_discrete),
                attrs(
                    "eigenvalues of the exact stationary second moment of w - w* under SGD",
                    "1",
                    DISCRETE,
                ),
            ),
            "second_moment_radius": (
                (),
                theory.second_moment_stability(X, lr, batch_size, sampling),
                attrs(
                    "spectral radius of M -> E_B[(1 - lr H_B) M (1 - lr H_B)] (< 1: stable)",
                    "1",
                    DISCRETE,
                ),
            ),
            "lr_max_second_moment": (
                (),
                lr_max,
                attrs("largest learning rate with a bounded SGD second moment", "1", DISCRETE),
            ),
            "discrete_iterations": (
                (),
                np.int64(iterations),
                attrs("preconditioned conjugate-gradient steps of the exact solve", "1", DISCRETE),
            ),
            "discrete_residual": (
                (),
                residual,
                attrs("relative residual of the exact discrete recursion", "1", DISCRETE),
            ),
            "fluctuations_vanish": (
                (),
                np.int8(fluctuations_vanish),
                attrs("N >= P: C = 0 at w*, no stationary fluctuations", "1", f"{P000} Eq. 16"),
            ),
        },
        coords={"mode": np.arange(N)},
    )
    return ds


def sgd_dataset(data: TeacherStudentData, w_star: np.ndarray, result: SGDResult) -> xr.Dataset:
    """SGD estimates of one cell with jackknife standard errors over (replica, time-block) groups.

    The covariance about w* uses every (replica, block) group; the covariance about the time
    average subtracts each replica's average over the whole sampling window (paper 000 Fig. 4a:
    the temporal variance of each weight). Losses are exact functions of the first and second
    moments of w over the recorded snapshots (Eq. 9 for training, the fresh test set for testing).
    """
    N = data.N
    nan_mode = np.full(N, np.nan)
    src = f"{P000} Eqs. 10-11 (SGD)"
    if result.diverged:
        eig = se = eig_t = se_t = nan_mode
        var_w = var_w_se = var_ref = var_ref_se = np.nan
        train = train_se = test = test_se = np.nan
    else:
        n = result.n_records
        covs_ref = stats.group_covariances(result.sum_dw, result.sum_dwdw, n, about="reference")
        eig, se = stats.eigenvalues_with_se(covs_ref)
        # per replica: pool its time blocks, then subtract the replica's own time average
        R = result.replicas
        s1 = np.zeros((R, N))
        s2 = np.zeros((R, N, N))
        np.add.at(s1, result.group_replica, result.sum_dw)
        np.add.at(s2, result.group_replica, result.sum_dwdw)
        counts = np.bincount(result.group_replica, weights=n, minlength=R)
        covs_mean = stats.group_covariances(s1, s2, counts, about="mean")
        eig_t, se_t = stats.eigenvalues_with_se(covs_mean)
        var_w, var_w_se = stats.jackknife_of_mean(_mean_trace, covs_mean)
        var_ref, var_ref_se = stats.jackknife_of_mean(_mean_trace, covs_ref)
        train, train_se, test, test_se = _losses(data, w_star, result.sum_dw / n[:, None], covs_ref)
    ds = xr.Dataset(
        {
            "eig_M_sgd": (
                *_mode(eig),
                attrs("eigenvalues of the SGD covariance about w*", "1", src),
            ),
            "eig_M_sgd_se": (
                *_mode(se),
                attrs("standard error of eig_M_sgd (jackknife)", "1", src),
            ),
            "eig_M_sgd_tavg": (
                *_mode(eig_t),
                attrs("eigenvalues of the SGD covariance about the time average", "1", src),
            ),
            "eig_M_sgd_tavg_se": (
                *_mode(se_t),
                attrs("standard error of eig_M_sgd_tavg (jackknife)", "1", src),
            ),
            "var_w_sgd": (
                (),
                var_w,
                attrs("mean temporal weight variance <<dw_i^2>_t>_i", "1", f"{P000} Fig. 4a (SGD)"),
            ),
            "var_w_sgd_se": ((), var_w_se, attrs("standard error of var_w_sgd", "1", src)),
            "var_w_sgd_wstar": ((), var_ref, attrs("mean SGD weight variance about w*", "1", src)),
            "var_w_sgd_wstar_se": (
                (),
                var_ref_se,
                attrs("standard error of var_w_sgd_wstar", "1", src),
            ),
            "train_loss": (
                (),
                train,
                attrs("time-averaged training loss under SGD", "1", f"{P000} Eq. 3"),
            ),
            "train_loss_se": ((), train_se, attrs("standard error of train_loss", "1", src)),
            "test_loss": (
                (),
                test,
                attrs(
                    "time-averaged loss on fresh test samples", "1", f"{P000} Eq. 3 on a test set"
                ),
            ),
            "test_loss_se": ((), test_se, attrs("standard error of test_loss", "1", src)),
            "diverged": (
                (),
                np.int8(result.diverged),
                attrs("SGD weights diverged (lr beyond stability)", "1", src),
            ),
            "burnin_steps": ((), result.burnin_steps, attrs("SGD burn-in", "steps", src)),
            "sample_steps": ((), result.sample_steps, attrs("SGD sampling length", "steps", src)),
            "replicas": ((), result.replicas, attrs("independent SGD replicas", "1", src)),
        },
        coords={"mode": np.arange(N)},
    )
    return ds


def _mean_trace(covs: np.ndarray) -> np.ndarray:
    """tr(M)/N of each covariance in a stack (the mean weight variance, paper 000 Fig. 4a)."""
    return np.trace(covs, axis1=-2, axis2=-1) / covs.shape[-1]


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
