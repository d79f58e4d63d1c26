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

from collections.abc import Iterable, Sequence
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
    "TABLE1_PAPER",
    "average_over_realisations",
    "covariance_modes",
    "empirical_covariance",
    "loss_perturbation",
    "perturbation_dataset",
    "perturbation_theory_exact",
    "perturbation_theory_iid",
    "run_perturbation_cell",
    "table1_markdown",
    "table1_row",
    "table1_rows",
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
    ``sigma_x2`` and, with ``lr`` and ``batch_size``, ``M_isotropic`` (lr sigma_eps^2 / 2S,
    Eq. 34).
    """
    thetas = np.asarray(thetas, dtype=float)
    if thetas.ndim != 1 or np.any(thetas == 0):
        raise ValueError("thetas must be a 1-d array of nonzero perturbation amplitudes")
    M = empirical_covariance(result)
    evals, evecs, se = covariance_modes(M, result)
    H = theory.hessian(data.X)
    dL = loss_perturbation(data.X, data.y, w_star, evecs, thetas)
    exact = perturbation_theory_exact(H, evecs, thetas)
    theta2 = thetas**2
    eq35 = f"{P000} Eq. 35"
    eig_theory = np.full(evals.size, np.nan)
    vHv_theory = np.full(evals.size, np.nan)
    if lr is not None and batch_size is not None:
        C = theory.noise_covariance(data.X, data.y, batch_size, sampling)
        eig_theory, V_theory, _ = covariance_modes(theory.stationary_covariance(H, C, lr))
        vHv_theory = np.einsum("ik,ij,jk->k", V_theory, H, V_theory)
    data_vars: dict[str, Any] = {
        "delta_L": (
            ("mode", "theta"),
            dL,
            attrs("loss perturbation L(w* + theta v_i) - L(w*)", "1", f"{eq35}, Eq. 3"),
        ),
        "delta_L_over_theta2": (
            ("mode", "theta"),
            dL / theta2,
            attrs("loss perturbation / theta^2", "1", f"{eq35}, Eq. 3"),
        ),
        "delta_L_over_theta2_exact": (
            ("mode", "theta"),
            exact / theta2,
            attrs("v_i^T H v_i / 2", "1", eq35),
        ),
        "vHv": (("mode",), 2.0 * exact[:, 0] / theta2[0], attrs("v_i^T H v_i", "1", eq35)),
        "eig_M_sgd": (
            ("mode",),
            evals,
            attrs("eigenvalues of the empirical SGD covariance about w*", "1", f"{P000} Eq. 30"),
        ),
        "eig_M_sgd_se": (
            ("mode",),
            se,
            attrs("jackknife standard error of eig_M_sgd", "1", f"{P000} Eq. 30"),
        ),
        "eig_M_theory": (
            ("mode",),
            eig_theory,
            attrs("eigenvalues of the stationary covariance M (Lyapunov)", "1", f"{P000} Eq. 30"),
        ),
        "delta_L_over_theta2_lyapunov": (
            ("mode",),
            0.5 * vHv_theory,
            attrs(
                "v_i^T H v_i / 2 along the eigenvectors of M from Eq. 30",
                "1",
                f"{P000} Eqs. 30, 35",
            ),
        ),
        "delta_L_over_theta2_iid": (
            (),
            0.5 * data.sigma_x2,
            attrs("i.i.d. prediction sigma_x^2 / 2", "1", f"{eq35} with H = sigma_x^2 1"),
        ),
        "sigma_x2": (
            (),
            data.sigma_x2,
            attrs("mean input variance sigma_x^2", "1", f"{P000} Eq. 1"),
        ),
    }
    if lr is not None and batch_size is not None:
        data_vars["M_isotropic"] = (
            (),
            lr * data.sigma_eps2 / (2 * batch_size),
            attrs("isotropic covariance eigenvalue lr sigma_eps^2 / 2S", "1", f"{P000} Eq. 34"),
        )
    return xr.Dataset(
        data_vars,
        coords={
            "mode": ("mode", np.arange(evals.size), {"long_name": "mode index i (eig_M desc.)"}),
            "theta": ("theta", thetas, {"long_name": "perturbation amplitude theta"}),
        },
        attrs={"N": data.N, "P": data.P, "sigma_eps2": data.sigma_eps2},
    )


def run_perturbation_cell(
    data: TeacherStudentData,
    lr: float,
    batch_size: int,
    thetas: ArrayLike,
    rng: np.random.Generator,
    protocol: SGDProtocol | None = None,
    sampling: str = "with",
) -> xr.Dataset:
    """Run stationary SGD from w* (:func:`~weightdyn.single_layer.protocol.run_stationary_sgd`)
    on ``data`` and return its :func:`perturbation_dataset`."""
    protocol = SGDProtocol() if protocol is None else protocol
    w_star, result = run_stationary_sgd(data, lr, batch_size, sampling, protocol, rng)
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
    stacked = stacked.assign_coords(realisation=np.arange(len(datasets)))
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
    sigma_eps; "differ from the teacher" as a distance above 1e-3.
    """
    X, y, u = data.X, data.y, data.u
    N, P = data.N, data.P
    w_star = np.asarray(w_star, dtype=float)
    keep = _valid_groups(result)
    n_tot = result.n_records[keep].sum()
    w_mean = w_star + result.sum_dw[keep].sum(axis=0) / n_tot
    H = theory.hessian(X)
    M_ref = empirical_covariance(result, about="reference")
    M_tavg = empirical_covariance(result, about="mean")
    C = theory.noise_covariance(X, y, batch_size, sampling)
    M_theory = theory.stationary_covariance(H, C, lr)
    L_star = theory.optimal_loss(X, y)
    u_norm = float(np.linalg.norm(u))
    regime = "under" if N < P else "over"
    dist = float(np.linalg.norm(w_mean - u) / u_norm) if u_norm > 0 else np.nan
    dist_star = float(np.linalg.norm(w_star - u) / u_norm) if u_norm > 0 else np.nan
    train_loss = float(L_star + 0.5 * np.sum(H * M_ref))
    var_w = float(np.trace(M_tavg) / N)
    row: dict[str, Any] = {
        "regime": regime,
        "N": N,
        "P": P,
        "sigma_eps2": data.sigma_eps2,
        "lr": lr,
        "batch_size": batch_size,
        "sampling": sampling,
        "student_teacher_dist": dist,
        "student_teacher_dist_wstar": dist_star,
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
    if regime == "under":
        typical = np.sqrt(data.sigma_eps2 * N / max(P - N - 1, 1))
        row["agrees_student"] = bool(dist_star <= 3.0 * typical + ROUNDOFF)
        nonzero = data.sigma_eps2 > 0
        row["agrees_loss"] = bool((train_loss > ROUNDOFF) == nonzero)
        row["agrees_fluctuations"] = bool((var_w > ROUNDOFF) == nonzero)
    else:
        row["agrees_student"] = bool(dist_star > 1e-3)
        row["agrees_loss"] = bool(train_loss <= ROUNDOFF)
        row["agrees_fluctuations"] = bool(var_w <= ROUNDOFF)
    return row


def table1_rows(
    cells: Iterable[tuple[TeacherStudentData, np.ndarray, SGDResult]],
    lr: float,
    batch_size: int,
    sampling: str = "with",
) -> list[dict[str, Any]]:
    """:func:`table1_row` for each ``(data, w_star, result)`` cell, in the given order."""
    return [table1_row(d, w, r, lr, batch_size, sampling) for d, w, r in cells]


def _fmt(value: float) -> str:
    return "0" if value == 0 else f"{value:.3g}"


def table1_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown table: one line per cell, each measurement beside Table 1's statement."""
    head = (
        "| regime | N | P | sigma_eps^2 | student: measured abs(<w> - u)/abs(u) | paper |"
        " final train loss (theory) | paper | tr(M)/N (Eq. 30) | paper | agrees |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        ok = all(r[k] for k in ("agrees_student", "agrees_loss", "agrees_fluctuations"))
        lines.append(
            f"| {r['regime']}-parameterised | {r['N']} | {r['P']} | {_fmt(r['sigma_eps2'])} | "
            f"{_fmt(r['student_teacher_dist'])} | {r['paper_student']} | "
            f"{_fmt(r['train_loss'])} ({_fmt(r['train_loss_theory'])}) | {r['paper_loss']} | "
            f"{_fmt(r['var_w'])} ({_fmt(r['var_w_theory'])}) | {r['paper_fluctuations']} | "
            f"{'yes' if ok else 'NO'} |"
        )
    return head + "\n".join(lines) + "\n"
