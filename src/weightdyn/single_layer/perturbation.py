"""Loss perturbation along the principal directions of the SGD weight fluctuations (paper 000
Sec. II.3.2, Fig. 5, Eq. 35) and the steady-state properties of Table 1 (Sec. II.3.1).

Eq. 35: for an eigenvector ``v`` of the weight covariance ``M``,
``delta L(theta v) = L(w* + theta v) - L(w*) = theta^2 v^T H v / 2`` (exact, the loss is
quadratic and ``grad L(w*) = 0``). For i.i.d. inputs and ``P -> infinity``, ``H -> sigma_x^2 1``
and ``delta L / theta^2 -> sigma_x^2 / 2`` for every mode: the loss perturbation carries no
information about the fluctuation amplitude (no inverse variance-flatness relation).

Here ``v_i`` are the eigenvectors of the *empirical* SGD covariance about ``w*`` (accumulated by
:func:`~weightdyn.single_layer.simulate.run_sgd` with ``w_ref = w*``), sorted by descending
eigenvalue; ``delta L`` is evaluated from the loss function itself (Eq. 3).
Pure numpy in, numpy/xarray out; no file I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from weightdyn import stats
from weightdyn.data import TeacherStudentData
from weightdyn.io import attrs
from weightdyn.single_layer import theory
from weightdyn.single_layer.protocol import SGDProtocol, run_stationary_sgd
from weightdyn.single_layer.simulate import SGDResult

__all__ = [
    "ROUNDOFF",
    "TABLE1_COLUMNS",
    "TABLE1_PAPER",
    "average_over_realisations",
    "covariance_modes",
    "empirical_covariance",
    "loss_perturbation",
    "perturbation_dataset",
    "perturbation_theory_exact",
    "perturbation_theory_iid",
    "run_perturbation_cell",
    "table1_dataset",
    "table1_row",
]

P000 = "paper 000"
#: values below this (absolute, for losses and variances of O(1) data) are round-off zeros
ROUNDOFF = 1e-12


# -------------------------------------------------------------------------- covariance


def _valid_groups(result: SGDResult) -> np.ndarray:
    if result.diverged:
        raise ValueError("the SGD run diverged; its moments are NaN")
    return np.asarray(result.n_records) > 0


def empirical_covariance(result: SGDResult, about: str = "reference") -> np.ndarray:
    """Pooled empirical SGD covariance (N, N) from accumulated moments (Eqs. 10-11).

    ``about="reference"``: second moment of ``w - w_ref`` (with ``w_ref = w*``, the covariance
    ``M = <dw dw^T>`` of Eq. 30); ``about="mean"``: about each (replica, block) group's own time
    average, averaged over groups (:func:`weightdyn.stats.group_covariances`).
    """
    keep = _valid_groups(result)
    covs = stats.group_covariances(
        result.sum_dw[keep], result.sum_dwdw[keep], result.n_records[keep], about=about
    )
    weights = np.asarray(result.n_records[keep], dtype=float)
    M = np.tensordot(weights / weights.sum(), covs, axes=1)
    return 0.5 * (M + M.T)


def covariance_modes(
    M: ArrayLike, result: SGDResult | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigenvalues (descending), eigenvectors (columns, same order) of ``M`` and jackknife SEs.

    The SEs come from a delete-one jackknife over the (replica, block) groups of ``result``
    (:func:`weightdyn.stats.eigenvalues_with_se`); NaN without ``result``.
    """
    M = np.asarray(M, dtype=float)
    evals, evecs = np.linalg.eigh(0.5 * (M + M.T))
    evals, evecs = evals[::-1].copy(), evecs[:, ::-1].copy()
    se = np.full_like(evals, np.nan)
    if result is not None:
        keep = _valid_groups(result)
        covs = stats.group_covariances(
            result.sum_dw[keep], result.sum_dwdw[keep], result.n_records[keep]
        )
        if covs.shape[0] >= 2:
            _, se = stats.eigenvalues_with_se(covs)
    return evals, evecs, se


# ------------------------------------------------------------------------- perturbation


def loss_perturbation(
    X: ArrayLike, y: ArrayLike, w_star: ArrayLike, vectors: ArrayLike, thetas: ArrayLike
) -> np.ndarray:
    """``delta L(theta v_i) = L(w* + theta v_i) - L(w*)`` (Eq. 35 left side), shape (modes, theta).

    ``vectors`` (N, n_modes) holds the directions ``v_i`` in its columns; the losses are
    evaluated from Eq. 3 directly (no use of the quadratic form).
    """
    X = np.asarray(X, dtype=float)
    w_star = np.asarray(w_star, dtype=float)
    V = np.asarray(vectors, dtype=float)
    thetas = np.asarray(thetas, dtype=float)
    W = w_star + thetas[None, :, None] * V.T[:, None, :]  # (modes, theta, N)
    return np.asarray(theory.loss(X, y, W)) - theory.loss(X, y, w_star)


def perturbation_theory_iid(thetas: ArrayLike, sigma_x2: float) -> np.ndarray:
    """i.i.d.-data prediction ``theta^2 sigma_x^2 / 2`` (Eq. 35 with ``H = sigma_x^2 1``)."""
    return 0.5 * sigma_x2 * np.asarray(thetas, dtype=float) ** 2


def perturbation_theory_exact(H: ArrayLike, vectors: ArrayLike, thetas: ArrayLike) -> np.ndarray:
    """Exact quadratic form ``theta^2 v_i^T H v_i / 2`` of Eq. 35, shape (modes, theta)."""
    V = np.asarray(vectors, dtype=float)
    vHv = np.einsum("ik,ij,jk->k", V, np.asarray(H, dtype=float), V)
    return 0.5 * vHv[:, None] * np.asarray(thetas, dtype=float)[None, :] ** 2


def _sgd_modes(result: SGDResult, N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigenvalues, eigenvectors and SEs of the SGD covariance (NaN if the run diverged)."""
    if result.diverged:  # a flagged cell of NaNs (the theory columns stay)
        return np.full(N, np.nan), np.full((N, N), np.nan), np.full(N, np.nan)
    evals, evecs, se = covariance_modes(empirical_covariance(result), result)
    return evals, evecs, se


def _lyapunov_modes(
    data: TeacherStudentData, H: np.ndarray, lr: float | None, batch_size: int | None, sampling: str
) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues of M from Eq. 30 (C of Eq. 17) and v^T H v along its eigenvectors; NaN
    without ``lr`` and ``batch_size``."""
    if lr is None or batch_size is None:
        return np.full(data.N, np.nan), np.full(data.N, np.nan)
    C = theory.noise_covariance(data.X, data.y, batch_size, sampling)
    eig, V, _ = covariance_modes(theory.stationary_covariance(H, C, lr))
    return eig, np.einsum("ik,ij,jk->k", V, H, V)


def perturbation_dataset(
    data: TeacherStudentData,
    w_star: ArrayLike,
    result: SGDResult,
    thetas: ArrayLike,
    lr: float | None = None,
    batch_size: int | None = None,
    sampling: str = "with",
) -> xr.Dataset:
    """Fig. 5 dataset of one data realisation, dims ``(mode, theta)``.

    ``result`` must come from ``run_sgd`` with ``w_ref = w*``. Coordinates ``mode`` (i, sorted
    by descending covariance eigenvalue) and ``theta``. Variables: ``delta_L`` and
    ``delta_L_over_theta2`` (mode, theta; measured from Eq. 3), ``delta_L_over_theta2_exact``
    (mode, theta; v^T H v / 2), ``vHv`` (mode), ``eig_M_sgd``, ``eig_M_sgd_se`` (mode),
    ``eig_M_theory`` and ``delta_L_over_theta2_lyapunov`` (mode; eigenvalues of M from Eq. 30
    with C of Eq. 17 and v^T H v / 2 along its eigenvectors; NaN unless ``lr`` and
    ``batch_size`` are given), scalars ``delta_L_over_theta2_iid`` (sigma_x^2 / 2),
    ``sigma_x2``, the flag ``diverged`` (then the SGD columns are NaN) and, with ``lr`` and
    ``batch_size``, ``M_isotropic`` (lr sigma_eps^2 / 2S, Eq. 34).
    """
    thetas = np.asarray(thetas, dtype=float)
    if thetas.ndim != 1 or np.any(thetas == 0):
        raise ValueError("thetas must be a 1-d array of nonzero perturbation amplitudes")
    evals, evecs, se = _sgd_modes(result, data.N)
    H = theory.hessian(data.X)
    dL = loss_perturbation(data.X, data.y, w_star, evecs, thetas)
    exact = perturbation_theory_exact(H, evecs, thetas)
    theta2 = thetas**2
    eig_theory, vHv_theory = _lyapunov_modes(data, H, lr, batch_size, sampling)
    eq35, eq30, mt, m = f"{P000} Eq. 35", f"{P000} Eq. 30", ("mode", "theta"), ("mode",)

    def var(dims: tuple[str, ...], values: Any, long_name: str, source: str) -> tuple:
        return dims, values, attrs(long_name, "1", source)

    data_vars: dict[str, Any] = {
        "delta_L": var(mt, dL, "loss perturbation L(w* + theta v_i) - L(w*)", f"{eq35}, Eq. 3"),
        "delta_L_over_theta2": var(mt, dL / theta2, "loss perturbation / theta^2",
                                   f"{eq35}, Eq. 3"),
        "delta_L_over_theta2_exact": var(mt, exact / theta2, "v_i^T H v_i / 2", eq35),
        "vHv": var(m, 2.0 * exact[:, 0] / theta2[0], "v_i^T H v_i", eq35),
        "eig_M_sgd": var(m, evals, "eigenvalues of the empirical SGD covariance about w*", eq30),
        "eig_M_sgd_se": var(m, se, "jackknife standard error of eig_M_sgd", eq30),
        "eig_M_theory": var(m, eig_theory, "eigenvalues of the stationary covariance M (Lyapunov)",
                            eq30),
        "delta_L_over_theta2_lyapunov": var(m, 0.5 * vHv_theory,
                                            "v_i^T H v_i / 2 along the eigenvectors of M from "
                                            "Eq. 30", f"{P000} Eqs. 30, 35"),
        "delta_L_over_theta2_iid": var((), 0.5 * data.sigma_x2, "i.i.d. prediction sigma_x^2 / 2",
                                       f"{eq35} with H = sigma_x^2 1"),
        "sigma_x2": var((), data.sigma_x2, "mean input variance sigma_x^2", f"{P000} Eq. 1"),
        "diverged": _diverged_flag(result),
    }  # fmt: skip
    if lr is not None and batch_size is not None:
        data_vars["M_isotropic"] = var((), lr * data.sigma_eps2 / (2 * batch_size),
                                       "isotropic covariance eigenvalue lr sigma_eps^2 / 2S",
                                       f"{P000} Eq. 34")  # fmt: skip
    coords = {
        "mode": ("mode", np.arange(evals.size), attrs("mode index i (eig_M desc.)", "1", eq35)),
        "theta": ("theta", thetas, attrs("perturbation amplitude theta", "1", eq35)),
    }
    cell = {"N": data.N, "P": data.P, "sigma_eps2": data.sigma_eps2}
    return xr.Dataset(data_vars, coords=coords, attrs=cell)


def _diverged_flag(result: SGDResult) -> tuple:
    """The ``diverged`` flag variable of a cell dataset."""
    long_name = "an SGD replica left the stability bound (1) or not (0)"
    return _flag(result.diverged, long_name, f"{P000} Eq. 11", "stable diverged")


def run_perturbation_cell(
    data: TeacherStudentData,
    lr: float,
    batch_size: int,
    thetas: ArrayLike,
    rng: np.random.Generator,
    protocol: SGDProtocol | None = None,
    sampling: str = "with",
    progress: Callable[[str], None] | None = None,
) -> xr.Dataset:
    """Run stationary SGD from w* (:func:`~weightdyn.single_layer.protocol.run_stationary_sgd`)
    on ``data`` and return its :func:`perturbation_dataset`."""
    protocol = SGDProtocol() if protocol is None else protocol
    w_star, result = run_stationary_sgd(data, lr, batch_size, sampling, protocol, rng, progress)
    return perturbation_dataset(
        data, w_star, result, thetas, lr=lr, batch_size=batch_size, sampling=sampling
    )


def average_over_realisations(datasets: Sequence[xr.Dataset]) -> xr.Dataset:
    """Mean and standard error over data realisations (Fig. 5b), per mode index and theta.

    Stacks the :func:`perturbation_dataset` of each realisation along ``realisation`` (kept as
    the stacked variables) and adds ``<name>_mean`` and ``<name>_mean_se`` (std / sqrt(n)) for
    ``delta_L_over_theta2``, ``delta_L_over_theta2_exact``, ``delta_L_over_theta2_lyapunov``,
    ``eig_M_sgd`` and ``eig_M_theory`` (dims ``(mode, theta)`` or ``(mode,)``); the scalars
    are averaged.
    """
    if len(datasets) < 2:
        raise ValueError("need at least two realisations for a standard error")
    stacked = xr.concat(list(datasets), dim="realisation", combine_attrs="drop_conflicts")
    stacked = stacked.assign_coords(
        realisation=(
            "realisation",
            np.arange(len(datasets)),
            attrs("data set (realisation)", "1", f"{P000} Fig. 5b"),
        )
    )
    n = len(datasets)
    for name in (
        "delta_L_over_theta2",
        "delta_L_over_theta2_exact",
        "delta_L_over_theta2_lyapunov",
        "eig_M_sgd",
        "eig_M_theory",
    ):
        base = stacked[name].attrs
        mean = stacked[name].mean("realisation")
        se = stacked[name].std("realisation", ddof=1) / np.sqrt(n)
        stacked[f"{name}_mean"] = mean.assign_attrs(
            attrs(f"{base['long_name']}, mean over {n} data sets", "1", base["source"])
        )
        stacked[f"{name}_mean_se"] = se.assign_attrs(
            attrs(f"standard error over data sets of {name}", "1", base["source"])
        )
    for name in ("delta_L_over_theta2_iid", "sigma_x2", "M_isotropic"):
        if name not in stacked:
            continue
        base = stacked[name].attrs
        stacked[name] = stacked[name].mean("realisation").assign_attrs(base)
    stacked.attrs["realisations"] = n
    return stacked


# ------------------------------------------------------------------------------ Table 1

#: Table 1 of paper 000, verbatim per regime and column
TABLE1_PAPER = {
    "under": {
        "student": "approach teacher weights as eps -> 0",
        "loss": "nonzero in general; vanishes ~ sigma_eps^2",
        "fluctuations": "nonzero in general; vanish ~ sigma_eps^2 [Eq. 34]",
    },
    "over": {
        "student": "differ from teacher weights",
        "loss": "vanishes (also if sigma_eps^2 > 0)",
        "fluctuations": "vanish [Eqs. 16 and 20]",
    },
}


def _table1_measured(
    data: TeacherStudentData, w_star: np.ndarray, result: SGDResult
) -> tuple[float, float, float]:
    """|<w> - u| / |u|, the snapshot-averaged train loss and tr(M)/N of a stationary run
    (NaN if it diverged)."""
    if result.diverged:
        return np.nan, np.nan, np.nan
    keep = _valid_groups(result)
    w_mean = w_star + result.sum_dw[keep].sum(axis=0) / result.n_records[keep].sum()
    u_norm = float(np.linalg.norm(data.u))
    dist = float(np.linalg.norm(w_mean - data.u) / u_norm) if u_norm > 0 else np.nan
    H = theory.hessian(data.X)
    train_loss = float(
        theory.optimal_loss(data.X, data.y) + 0.5 * np.sum(H * empirical_covariance(result))
    )
    var_w = float(np.trace(empirical_covariance(result, about="mean")) / data.N)
    return dist, train_loss, var_w


def _table1_agrees(row: dict[str, Any]) -> dict[str, bool]:
    """Does the measured row say what Table 1 says for its regime? (see :func:`table1_row`)"""
    N, P = row["N"], row["P"]
    dist_star, loss, var_w = row["student_teacher_dist_wstar"], row["train_loss"], row["var_w"]
    if row["regime"] == "under":
        typical = np.sqrt(row["sigma_eps2"] * N / max(P - N - 1, 1))
        nonzero = row["sigma_eps2"] > 0
        return {
            "agrees_student": bool(dist_star <= 3.0 * typical + ROUNDOFF),
            "agrees_loss": bool((loss > ROUNDOFF) == nonzero),
            "agrees_fluctuations": bool((var_w > ROUNDOFF) == nonzero),
        }
    return {
        "agrees_student": bool(dist_star > 1e-3),
        "agrees_loss": bool(loss <= ROUNDOFF),
        "agrees_fluctuations": bool(var_w <= ROUNDOFF),
    }


def table1_row(
    data: TeacherStudentData,
    w_star: ArrayLike,
    result: SGDResult,
    lr: float,
    batch_size: int,
    sampling: str = "with",
) -> dict[str, Any]:
    """Measured steady-state properties of one cell beside paper 000's Table 1 statements.

    ``result`` is a stationary ``run_sgd`` run with ``w_ref = w*``. Measured: the relative
    distance of the SGD time-averaged student from the teacher ``|<w> - u| / |u|`` (and of
    ``w*``, Eq. 7), the snapshot-averaged train loss ``L* + tr(H M_sgd)/2`` (Eqs. 3, 26; exact
    since the loss is quadratic and ``grad L(w*) = 0``), and the temporal weight variance
    ``tr(M)/N`` about each replica's time average (Fig. 4a). Theory beside them: ``L*`` (Eq. 9),
    ``L* + tr(HM)/2`` and ``tr(M)/N`` with ``M`` from Eq. 30, and ``lr sigma_eps^2 / 2S``
    (Eq. 34). ``agrees_*`` flags compare with the paper's qualitative statement: nonzero /
    vanishing means above / below :data:`ROUNDOFF`; "approach the teacher as eps -> 0" is
    checked as ``|w* - u|/|u| <= 3 sqrt(sigma_eps^2 N / (P - N - 1))`` (the typical distance,
    ``E|w* - u|^2 = sigma_eps^2 N^2 / (P - N - 1)`` for ``|u|^2 ~ N``), so it shrinks with
    sigma_eps; "differ from the teacher" as a distance above 1e-3. A diverged run gives NaN
    measurements (and ``agrees_*`` false where they are needed).
    """
    X, y, u = data.X, data.y, data.u
    N, P = data.N, data.P
    w_star = np.asarray(w_star, dtype=float)
    H = theory.hessian(X)
    M_theory = theory.stationary_covariance(
        H, theory.noise_covariance(X, y, batch_size, sampling), lr
    )
    L_star = theory.optimal_loss(X, y)
    u_norm = float(np.linalg.norm(u))
    regime = "under" if N < P else "over"
    dist, train_loss, var_w = _table1_measured(data, w_star, result)
    row: dict[str, Any] = {
        "regime": regime,
        "N": N,
        "P": P,
        "sigma_eps2": data.sigma_eps2,
        "lr": lr,
        "batch_size": batch_size,
        "sampling": sampling,
        "student_teacher_dist": dist,
        "student_teacher_dist_wstar": float(np.linalg.norm(w_star - u) / u_norm)
        if u_norm > 0
        else np.nan,
        "train_loss": train_loss,
        "optimal_loss": L_star,
        "train_loss_theory": float(L_star + 0.5 * np.sum(H * M_theory)),
        "var_w": var_w,
        "var_w_theory": float(np.trace(M_theory) / N),
        "M_isotropic": lr * data.sigma_eps2 / (2 * batch_size),
        "paper_student": TABLE1_PAPER[regime]["student"],
        "paper_loss": TABLE1_PAPER[regime]["loss"],
        "paper_fluctuations": TABLE1_PAPER[regime]["fluctuations"],
    }
    return row | _table1_agrees(row)


#: numeric columns of a Table 1 row: long_name and paper 000 source
TABLE1_COLUMNS = {
    "student_teacher_dist": ("SGD time-averaged student distance |<w> - u| / |u|", "Eqs. 1, 11"),
    "student_teacher_dist_wstar": ("distance of the minimum-norm solution |w* - u| / |u|", "Eq. 7"),
    "train_loss": ("snapshot-averaged train loss L* + tr(H M_sgd)/2", "Eqs. 3, 26"),
    "optimal_loss": ("loss of the fully trained model L*", "Eq. 9"),
    "train_loss_theory": ("stationary train loss L* + tr(HM)/2, M from Eq. 30", "Eqs. 26, 30"),
    "var_w": ("temporal weight variance tr(M_sgd)/N about the time average", "Eq. 11"),
    "var_w_theory": ("weight variance tr(M)/N, M from Eq. 30", "Eq. 30"),
    "M_isotropic": ("isotropic covariance eigenvalue lr sigma_eps^2 / 2S", "Eq. 34"),
}


def table1_dataset(
    data: TeacherStudentData,
    w_star: ArrayLike,
    result: SGDResult,
    lr: float,
    batch_size: int,
    sampling: str = "with",
) -> xr.Dataset:
    """One Table 1 cell (:func:`table1_row`) as scalar variables with attributes.

    Variables: the numbers of :data:`TABLE1_COLUMNS`, the flags ``overparameterised`` (N >= P)
    and ``agrees_student``, ``agrees_loss``, ``agrees_fluctuations`` (1: the measurement says
    what Table 1 says for the regime), and ``diverged``. The paper's statements are
    :data:`TABLE1_PAPER` (by regime), not stored.
    """
    row = table1_row(data, w_star, result, lr, batch_size, sampling)
    src = f"{P000} Table 1"
    data_vars: dict[str, Any] = {
        name: ((), row[name], attrs(long_name, "1", f"{P000} {eqs}"))
        for name, (long_name, eqs) in TABLE1_COLUMNS.items()
    }
    data_vars["overparameterised"] = _flag(
        row["regime"] == "over", "N >= P (over) or N < P", src, "under over"
    )
    for key, what in (
        ("student", "student"),
        ("loss", "final train loss"),
        ("fluctuations", "fluctuations"),
    ):
        data_vars[f"agrees_{key}"] = _flag(
            row[f"agrees_{key}"], f"measured {what} as Table 1 states (1) or not (0)", src, "no yes"
        )
    data_vars["diverged"] = _diverged_flag(result)
    return xr.Dataset(data_vars, attrs={"N": data.N, "P": data.P, "sigma_eps2": data.sigma_eps2})


def _flag(value: bool, long_name: str, source: str, meanings: str) -> tuple:
    """A scalar 0/1 flag variable."""
    flag = attrs(long_name, "1", source)
    flag |= {"flag_values": np.array([0, 1], dtype=np.int8), "flag_meanings": meanings}
    return (), np.int8(value), flag
