"""Registry entries of the single-layer dynamics experiments of paper 000 Sec. II.

- ``relaxation`` (Fig. 3, Eqs. 25-27): SGD from a random start, recorded in the Hessian modes;
- ``perturbation`` (Fig. 5, Eq. 35): the loss along the eigenvectors of the stationary SGD
  covariance, i.i.d. inputs (Fig. 5a) or correlated inputs averaged over data sets (Fig. 5b);
- ``table1`` (Table 1): steady-state properties across the interpolation threshold;
- ``gbm`` (Eqs. 21-24): N = 1 without label noise, SGD ensembles vs geometric Brownian motion.

Seeds: every SGD stream keeps its old name and key subset (the old single-job config blocks); a
new parameter enters a seed only at a non-default value (:func:`_seed`). The data never depend on
the label-noise level: the i.i.d. cells use the shared data set of
:mod:`weightdyn.single_layer.teacher_student`, and the correlated-input cells of ``perturbation``
draw their data sets from ``perturbation/correlated/inputs`` (covariance, teacher, inputs) and
``perturbation/correlated/noise`` (standard label-noise draws) of the data's parameters
(:data:`CORRELATED_DATA_KEYS` and the realisation), their SGD from ``perturbation/correlated``.
``gbm``'s old stream ran through all learning rates of the block in turn, so a cell's numbers
depended on the other cells; its inputs now come from the stream ``gbm/inputs`` of
(P, data_seed), shared by the cells that differ only in lr, batch size or start, and its SGD
ensemble from ``gbm`` of the cell's own values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import data, seeds
from weightdyn.agreement import Agreement, agreement
from weightdyn.experiments import (
    REQUIRED,
    ConfigError,
    Experiment,
    Figure,
    LazyPlots,
    Param,
    Params,
    Progress,
)
from weightdyn.single_layer import multiplicative, perturbation, relaxation, teacher_student, theory
from weightdyn.single_layer import params as sp
from weightdyn.single_layer.protocol import (
    run_stationary_sgd,
    slowest_mode_and_loss,
    stationarity_dataset,
)
from weightdyn.single_layer.teacher_student import N_TEST, TEACHER_STUDENT

gbm_plots = LazyPlots("weightdyn.plots.gbm")
perturbation_plots = LazyPlots("weightdyn.plots.perturbation")
relaxation_plots = LazyPlots("weightdyn.plots.relaxation")

P000 = "paper 000"

# ------------------------------------------------------------------------------- parameters

SAMPLING, DATA_SEED = sp.SAMPLING, sp.DATA_SEED
#: the stationary-SGD protocol (:class:`SGDProtocol`) with its start, settings of every cell
PROTOCOL = (sp.PROTOCOL[0], sp.INIT, sp.INIT_SCALE, *sp.PROTOCOL[1:])


def _seed(params: Params, keys: Iterable[str], new: Sequence[Param] = ()) -> dict[str, Any]:
    """A seed's parameters: the old key subset plus each ``new`` parameter at a non-default
    value (so the cells the old config could express keep their old streams)."""
    out = {key: params[key] for key in keys}
    for p in new:
        if params.get(p.name) is not None and params[p.name] != p.default:
            out[p.name] = params[p.name]
    return out


def _size_key(params: Params) -> str:
    """Which of ``P`` or ``p_over_n`` the config gave (the one the seeds use)."""
    return "p_over_n" if params.get("p_over_n") is not None else "P"


def _derive_size(params: dict[str, Any]) -> dict[str, Any]:
    """P from p_over_n (P = round(p_over_n N), as the single-layer sweeps) and 1 <= S <= P."""
    given = [key for key in ("P", "p_over_n") if params.get(key) is not None]
    if len(given) != 1:
        raise ConfigError(
            f"P: give exactly one of 'P' or 'p_over_n' (got {'both' if given else 'neither'}); "
            "allowed: P >= 1 or p_over_n > 0"
        )
    if given == ["p_over_n"]:
        params["P"] = round(params["p_over_n"] * params["N"])
        if params["P"] < 1:
            raise ConfigError(
                f"p_over_n: {params['p_over_n']} with N={params['N']} gives P={params['P']}; "
                "allowed: p_over_n such that P = round(p_over_n N) >= 1"
            )
    return _check_batch(params)


def _check_batch(params: dict[str, Any]) -> dict[str, Any]:
    if params["batch_size"] > params["P"]:
        raise ConfigError(
            f"batch_size: {params['batch_size']} exceeds the sample number P={params['P']}; "
            "allowed: 1 <= batch_size <= P"
        )
    return params


def _positive_list(params: dict[str, Any], key: str, what: str) -> None:
    values = params[key]
    if not values or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in values
    ):
        raise ConfigError(f"{key}: {values!r}; allowed: a non-empty list of positive {what}")


def _derive_protocol(params: dict[str, Any]) -> dict[str, Any]:
    if params["burnin_min_steps"] > params["burnin_max_steps"]:
        raise ConfigError(
            f"burnin_min_steps: {params['burnin_min_steps']} exceeds burnin_max_steps="
            f"{params['burnin_max_steps']}; allowed: burnin_min_steps <= burnin_max_steps"
        )
    return params


def _resources(params: Params, attempt: int) -> dict[str, int]:
    """The old single-job rule's request (2 GB, one hour), doubled on every retry."""
    return {"mem_mb": 2000 * attempt, "runtime": 60 * attempt}


def _groups(ds: xr.Dataset, values: np.ndarray) -> list[tuple[Any, xr.Dataset]]:
    """The cells of a merged dataset grouped by ``values`` (one per cell), in order of first
    appearance."""
    values = np.asarray(values)
    keys = list(dict.fromkeys(values.tolist()))
    return [(key, ds.isel(cell=np.flatnonzero(values == key))) for key in keys]


def _p_over_n(ds: xr.Dataset) -> np.ndarray:
    return np.round(ds["P"].values.astype(float) / ds["N"].values.astype(float), 6)


# ------------------------------------------------------------------------------- relaxation

RELAXATION_SEED = (
    "N",
    "sigma_eps2",
    "lr",
    "batch_size",
    "sampling",
    "data_seed",
    "replicas",
    "tau_multiple",
    "init_scale",
    "records",
)


def run_relaxation(params: Params, progress: Progress) -> xr.Dataset:
    """Fig. 3: SGD from a random start w(0) ~ N(0, init_scale^2) for ``tau_multiple`` slowest
    relaxation times 1/(lr omega_min), recorded at ``records`` log-spaced steps, against Eq. 27
    (:func:`weightdyn.single_layer.relaxation.relaxation_dataset`)."""
    d = params["data"]
    lr = params["lr"]
    rng = seeds.generator("relaxation", _seed(params, (*RELAXATION_SEED, _size_key(params))))
    tau = theory.slowest_relaxation_steps(theory.hessian(d.X), lr)
    n_steps = int(np.ceil(params["tau_multiple"] * tau))
    progress(f"relaxation: N={d.N}, P={d.P}, tau={tau:.3g} steps, running {n_steps} steps")
    w_init = rng.normal(0.0, params["init_scale"], size=d.N)
    run = relaxation.record_relaxation(
        d.X,
        d.y,
        lr,
        params["batch_size"],
        params["sampling"],
        w_init,
        relaxation.record_steps(n_steps, n_log=params["records"]),
        rng,
        replicas=params["replicas"],
    )
    return relaxation.relaxation_dataset(run, sigma_x2=d.sigma_x2)


RESOLVED = 0.1  # relative SE below which a fitted relaxation rate enters the agreement table


def relaxation_agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Per learning rate: the replica-mean loss vs Eqs. 26-27 (with the transient Eq. 30 noise),
    and the relaxation rates fitted to the replica-mean modes vs omega_k (Eq. 27), for the modes
    whose fit is resolved to :data:`RESOLVED` (a mode starting within the noise is not)."""
    rows = []
    for lr, sel in _groups(ds, ds["lr"].values):
        rows += [
            agreement(
                label,
                f"replica-mean training loss vs noise-averaged loss (lr = {lr:g})",
                "Eqs. 26-27, 30",
                sel["loss_sgd_mean"],
                sel["loss_theory"],
                sel["loss_sgd_se"],
            ),
            agreement(
                label,
                "relaxation rates fitted to the replica-mean modes (resolved to 10%) vs omega_k "
                f"(lr = {lr:g})",
                "Eqs. 25, 27",
                sel["omega_fit"].where(sel["omega_fit_se"] < RESOLVED * abs(sel["omega_fit"])),
                sel["omega"],
                sel["omega_fit_se"],
            ),
        ]
    return rows


RELAXATION = Experiment(
    name="relaxation",
    family="single_layer",
    title="relaxation of the Hessian modes under SGD (Fig. 3)",
    source=f"{P000} Eqs. 25-27, Fig. 3",
    params=(
        *sp.DATA_AND_SGD,
        Param(
            "init_scale",
            float,
            1.0,
            "standard deviation of the random start w(0)",
            axis=True,
            minimum=0,
            exclusive_minimum=True,
        ),
        Param("replicas", int, 16, "number of SGD replicas from the common start", minimum=1),
        Param(
            "tau_multiple",
            float,
            5.0,
            "run length in slowest relaxation times 1/(lr omega_0)",
            minimum=0,
            exclusive_minimum=True,
        ),
        Param("records", int, 120, "number of log-spaced records", minimum=2),
        N_TEST,
    ),
    run_cell=run_relaxation,
    derive=_derive_size,
    agreement=relaxation_agreement,
    figures={
        "fig3": Figure(
            relaxation_plots.fig3,
            "Paper 000 Fig. 3: Hessian modes :math:`z_k(t)` (k = 0, 10, 20) of three single SGD "
            "runs (solid) from one random start and their replica mean (band :math:`\\pm` 2 s.e.) "
            "against the noise-averaged Eq. 27 (dashed) and :math:`z_k^*` (dotted); the titles "
            "count the sign changes of the runs against Eq. 27's and give the runs' largest "
            "deviation from Eq. 27. Last panel: the loss of the runs and their mean against Eqs. "
            "26-27, 30 and :math:`L^*` (grey), with :math:`1/\\omega_0` and the time "
            ":math:`t_s` from which the mean stays within 10 % of :math:`L^* + \\mathrm{tr}(HM)/2` "
            "marked, and the slow modes' share of the loss against :math:`L^*` (docs/errata.md). "
            "One row per cell, with the fitted rate of the slowest mode beside "
            ":math:`\\omega_0`.",
        )
    },
    default_figures=("fig3",),
    resources=_resources,
    data=TEACHER_STUDENT,
)

# ----------------------------------------------------------------------------- perturbation

PERTURBATION_SEED = ("N", "sigma_eps2", "lr", "batch_size", "replicas", "sample_steps")
#: the keys seeding the data sets of a correlated-input cell (no noise level, no SGD setting)
CORRELATED_DATA_KEYS = ("N", "P", "input_covariance", "correlation", "data_seed")
INPUT_COVARIANCE = Param(
    "input_covariance",
    str,
    None,
    "input covariance family (correlated)",
    axis=True,
    allowed=data.COVARIANCE_KINDS,
)
CORRELATION = Param(
    "correlation", float, None, "input correlation rho or spectral exponent alpha", axis=True
)
REALISATIONS = Param(
    "realisations", int, None, "data sets averaged per cell (correlated)", minimum=2
)


def _derive_perturbation(params: dict[str, Any]) -> dict[str, Any]:
    """Sizes, the protocol, ``thetas``, and the keys that only correlated inputs use."""
    params = _derive_protocol(_derive_size(params))
    _positive_list(params, "thetas", "perturbation amplitudes theta")
    correlated = ("input_covariance", "correlation", "realisations")
    if params["inputs"] == "iid":
        for key in correlated:
            if params.get(key) is not None:
                raise ConfigError(
                    f"{key}: {params[key]!r} is only used with inputs: correlated; "
                    "allowed: omit it for inputs: iid"
                )
        return params
    for key, allowed in (
        ("input_covariance", list(data.COVARIANCE_KINDS)),
        ("realisations", "an integer >= 2"),
    ):
        if params.get(key) is None:
            raise ConfigError(f"{key}: missing for inputs: correlated; allowed: {allowed}")
    kind, value = params["input_covariance"], params.get("correlation")
    if kind == "exponential" and (value is None or not 0 <= value < 1):
        raise ConfigError(f"correlation: {value!r} for exponential inputs; allowed: 0 <= rho < 1")
    if kind == "powerlaw" and (value is None or value < 0):
        raise ConfigError(f"correlation: {value!r} for powerlaw inputs; allowed: alpha >= 0")
    return params


def _perturbation_iid(params: Params, progress: Progress) -> xr.Dataset:
    """Fig. 5a: one i.i.d. teacher-student data set (the shared data set of
    :mod:`weightdyn.single_layer.teacher_student`)."""
    d = teacher_student.load(teacher_student.make(params))
    seed = _seed(params, (*PERTURBATION_SEED, _size_key(params), "data_seed"), (SAMPLING,))
    progress(f"perturbation (iid): N={d.N}, P={d.P}")
    return perturbation.run_perturbation_cell(
        d,
        params["lr"],
        params["batch_size"],
        np.asarray(params["thetas"], dtype=float),
        seeds.generator("perturbation/iid", seed),
        protocol=sp.protocol(params),
        sampling=params["sampling"],
        progress=progress,
    )


def _correlated_data(params: Params, realisation: int) -> data.TeacherStudentData:
    """Data set ``realisation`` of a Fig. 5b cell (paper 000 Eqs. 1-2, Sec. II.1 with Sigma_x).

    The covariance, teacher and inputs come from the stream ``perturbation/correlated/inputs``
    and the standard label-noise draws from ``perturbation/correlated/noise``, both seeded by
    the data's parameters without sigma_eps2 (:data:`CORRELATED_DATA_KEYS`): cells that differ
    only in the noise level (or in lr, S, ...) share the inputs exactly.
    """
    cell = {**{key: params[key] for key in CORRELATED_DATA_KEYS}, "realisation": realisation}
    rng = seeds.generator("perturbation/correlated/inputs", cell)
    cov = data.input_covariance(params["N"], params["input_covariance"], params["correlation"], rng)
    return data.gaussian_teacher_student(
        params["N"],
        params["P"],
        params["sigma_eps2"],
        rng,
        input_cov=cov,
        n_test=params["n_test"],
        noise_rng=seeds.generator("perturbation/correlated/noise", cell),
    )


def _perturbation_correlated(params: Params, progress: Progress) -> xr.Dataset:
    """Fig. 5b: ``realisations`` data sets with correlated Gaussian inputs, averaged."""
    keys = (
        *PERTURBATION_SEED,
        _size_key(params),
        "input_covariance",
        "correlation",
        "realisations",
    )
    base = _seed(params, keys, (SAMPLING, DATA_SEED, N_TEST))
    cells = []
    for r in range(params["realisations"]):
        rng = seeds.generator("perturbation/correlated", {**base, "realisation": r})
        d = _correlated_data(params, r)
        progress(f"perturbation (correlated): realisation {r + 1}/{params['realisations']}")
        cells.append(
            perturbation.run_perturbation_cell(
                d,
                params["lr"],
                params["batch_size"],
                np.asarray(params["thetas"], dtype=float),
                rng,
                protocol=sp.protocol(params),
                sampling=params["sampling"],
            )
        )
    out = perturbation.average_over_realisations(cells)
    out.attrs["input_cov"] = f"{params['input_covariance']} ({params['correlation']})"
    return out


def run_perturbation(params: Params, progress: Progress) -> xr.Dataset:
    """Fig. 5: delta L(theta v_i) along the eigenvectors of the SGD covariance (Eq. 35)."""
    if params["inputs"] == "iid":
        return _perturbation_iid(params, progress)
    return _perturbation_correlated(params, progress)


def perturbation_agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Per P/N: the SGD covariance spectrum vs Eq. 30, and delta L / theta^2 at the largest theta
    vs sigma_x^2 / 2 (i.i.d. inputs, Eq. 35 with H = sigma_x^2 1) or vs Eq. 35 along the
    eigenvectors of M from Eq. 30 (correlated inputs, means over data sets)."""
    theta = float(ds["theta"].values.max())
    rows = []
    for ratio, sel in _groups(ds, _p_over_n(ds)):
        tag = f"P/N = {ratio:g}"
        rows.append(
            agreement(
                label,
                f"eigenvalues of the SGD covariance about w* vs M (Lyapunov) ({tag})",
                "Eq. 30",
                sel["eig_M_sgd"],
                sel["eig_M_theory"],
                sel["eig_M_sgd_se"],
            )
        )
        if "delta_L_over_theta2_mean" in sel:
            rows.append(
                agreement(
                    label,
                    f"delta L / theta^2 (theta = {theta:g}) along SGD eigenvectors vs along M "
                    f"({tag})",
                    "Eqs. 30, 35",
                    sel["delta_L_over_theta2_mean"].sel(theta=theta),
                    sel["delta_L_over_theta2_lyapunov_mean"],
                    sel["delta_L_over_theta2_mean_se"].sel(theta=theta),
                    sel["delta_L_over_theta2_lyapunov_mean_se"],
                )
            )
        else:
            rows.append(
                agreement(
                    label,
                    f"delta L / theta^2 (theta = {theta:g}) along SGD eigenvectors vs "
                    f"sigma_x^2 / 2 ({tag})",
                    "Eq. 35, H = sigma_x^2 1",
                    sel["delta_L_over_theta2"].sel(theta=theta),
                    sel["delta_L_over_theta2_iid"],
                )
            )
    return rows


PERTURBATION = Experiment(
    name="perturbation",
    family="single_layer",
    title="loss perturbation along the SGD covariance eigenvectors (Fig. 5)",
    source=f"{P000} Eqs. 30, 34-35, Fig. 5",
    params=(
        *sp.DATA_AND_SGD,
        INPUT_COVARIANCE,
        CORRELATION,
        Param(
            "inputs",
            str,
            "iid",
            "input statistics: one i.i.d. data set (Fig. 5a) or "
            "correlated inputs averaged over data sets (Fig. 5b)",
            allowed=("iid", "correlated"),
        ),
        Param("thetas", list, [0.1, 0.3, 1.0], "perturbation amplitudes theta"),
        REALISATIONS,
        *PROTOCOL,
        N_TEST,
    ),
    run_cell=run_perturbation,
    derive=_derive_perturbation,
    agreement=perturbation_agreement,
    figures={
        "fig5": Figure(
            perturbation_plots.fig5,
            "Paper 000 Fig. 5: :math:`\\delta L(\\theta \\mathbf{v}_i)/\\theta^2` along the "
            "eigenvectors of the SGD covariance (Eq. 35): Fig. 5a for i.i.d. inputs (with "
            "several cells, one panel per cell and their comparison, one curve per P/N), "
            "Fig. 5b for correlated inputs (mean :math:`\\pm` 1 s.e. over data sets, Eq. 35 "
            "along the eigenvectors of M from Eq. 30). Side panels: covariance spectra over "
            ":math:`\\lambda\\sigma_\\epsilon^2/2S` (Eq. 34).",
        ),
        "fig5a": Figure(
            perturbation_plots.fig5a,
            "Paper 000 Fig. 5a: :math:`\\delta L(\\theta \\mathbf{v}_i)/\\theta^2` vs "
            ":math:`\\theta` for i.i.d. inputs, measured from the loss (symbols) and "
            ":math:`\\mathbf{v}_i^T H \\mathbf{v}_i/2` (dotted, Eq. 35), against "
            ":math:`\\sigma_x^2/2`; with several cells the last panel compares them, one "
            "curve per P/N.",
        ),
        "fig5b": Figure(
            perturbation_plots.fig5b,
            "Paper 000 Fig. 5b: :math:`\\delta L/\\theta^2` vs mode index for correlated inputs, "
            "mean :math:`\\pm` 1 s.e. over data sets, against Eq. 35 along the eigenvectors of "
            "M (Eq. 30) and the i.i.d. value :math:`\\sigma_x^2/2`.",
        ),
    },
    default_figures=("fig5",),
    resources=_resources,
)

# ---------------------------------------------------------------------------------- Table 1


def _derive_table1(params: dict[str, Any]) -> dict[str, Any]:
    return _derive_protocol(_check_batch(params))


def run_table1(params: Params, progress: Progress) -> xr.Dataset:
    """Table 1: stationary SGD on one (N, P, sigma_eps2) data set, measured beside the theory,
    with the stationarity test of its sampling window (``not_stationary``)."""
    d = params["data"]
    seed = _seed(params, ("N", "P", "sigma_eps2"), (DATA_SEED, SAMPLING))
    progress(f"table 1: N={d.N}, P={d.P}, sigma_eps2={d.sigma_eps2}")
    lr, S, sampling = params["lr"], params["batch_size"], params["sampling"]
    w_star, result = run_stationary_sgd(
        d, lr, S, sampling, sp.protocol(params), seeds.generator("table1", seed), progress,
        slowest_mode_and_loss(d),
    )  # fmt: skip
    ds = perturbation.table1_dataset(d, w_star, result, lr, S, sampling)
    return ds.merge(stationarity_dataset(d, result, progress, f"{P000} Eqs. 10-11 (SGD)"))


def table1_agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """The snapshot-averaged train loss vs its stationary value L* + tr(HM)/2 (Eqs. 26, 30);
    over-parameterised cells (both ~ 0) fall below the agreement floor."""
    return [
        agreement(
            label,
            "snapshot-averaged train loss vs L* + tr(HM)/2",
            "Eqs. 26, 30",
            ds["train_loss"],
            ds["train_loss_theory"],
        )
    ]


TABLE1 = Experiment(
    name="table1",
    family="single_layer",
    title="steady state across the interpolation threshold (Table 1)",
    source=f"{P000} Table 1, Eqs. 7, 9, 16, 20, 30, 34",
    params=(
        Param("sigma_eps2", float, 0.25, "label-noise variance sigma_eps^2", axis=True, minimum=0),
        Param("N", int, REQUIRED, "input dimension N", axis=True, minimum=1),
        Param("P", int, REQUIRED, "number of training samples P", axis=True, minimum=1),
        DATA_SEED,
        SAMPLING,
        Param("lr", float, 0.1, "learning rate lambda", minimum=0, exclusive_minimum=True),
        Param("batch_size", int, 10, "mini-batch size S", minimum=1),
        *PROTOCOL,
        N_TEST,
    ),
    run_cell=run_table1,
    derive=_derive_table1,
    agreement=table1_agreement,
    figures={
        "table": Figure(
            perturbation_plots.table1,
            "Paper 000 Table 1: measured steady state of SGD beside the paper's statements, one "
            "row per cell: student-teacher distance, final train loss (theory "
            ":math:`L^* + \\mathrm{tr}(HM)/2`, Eqs. 26, 30) and weight variance "
            ":math:`\\mathrm{tr}(M)/N` (Eq. 30); over-parameterised cells (N >= P) have "
            "vanishing loss and fluctuations (Eqs. 16, 20).",
        )
    },
    default_figures=("table",),
    resources=_resources,
    data=TEACHER_STUDENT,
)

# -------------------------------------------------------------------------------------- GBM


def _derive_gbm(params: dict[str, Any]) -> dict[str, Any]:
    _positive_list(params, "times", "SDE times t")
    return _check_batch(params)


def run_gbm(params: Params, progress: Progress) -> xr.Dataset:
    """Eqs. 21-24: P inputs x ~ N(0, 1) (shared by the cells of one (P, data_seed)), an SGD
    ensemble of wbar = w - u at the SDE ``times``, the GBM moments and the exact recursion."""
    inputs = seeds.generator("gbm/inputs", {"P": params["P"], "data_seed": params["data_seed"]})
    x = inputs.normal(0.0, 1.0, size=params["P"])
    times = [float(t) for t in params["times"]]
    keys = ("P", "lr", "batch_size", "wbar0", "replicas", "data_seed")
    seed = {**_seed(params, keys, (SAMPLING,)), "times": times}
    progress(f"GBM ensemble at lr = {params['lr']}, P = {params['P']}")
    return multiplicative.gbm_dataset(
        x,
        params["wbar0"],
        params["lr"],
        params["batch_size"],
        np.asarray(times),
        params["replicas"],
        seeds.generator("gbm", seed),
        params["sampling"],
    )


def gbm_agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Per learning rate: the ensemble variance of w - u vs the GBM (Eq. 24); over all cells
    and times: vs the exact SGD moment recursion (Eq. 11)."""
    rows = [
        agreement(
            label,
            f"ensemble variance of w - u (lr = {lr:g}) vs geometric Brownian motion",
            "Eqs. 21-24",
            sel["var_wbar"],
            sel["var_gbm"],
            sel["var_wbar_se"],
        )
        for lr, sel in _groups(ds, ds["lr"].values)
    ]
    rows.append(
        agreement(
            label,
            "ensemble variance of w - u vs exact SGD recursion",
            "Eq. 11",
            ds["var_wbar"],
            ds["var_discrete"],
            ds["var_wbar_se"],
        )
    )
    return rows


GBM = Experiment(
    name="gbm",
    family="single_layer",
    title="multiplicative noise without label noise: geometric Brownian motion (Eqs. 21-24)",
    source=f"{P000} Eqs. 21-24",
    params=(
        Param("P", int, 20, "number of training samples P", axis=True, minimum=1),
        Param(
            "lr",
            float,
            REQUIRED,
            "learning rate lambda",
            axis=True,
            minimum=0,
            exclusive_minimum=True,
        ),
        Param("batch_size", int, 1, "mini-batch size S", axis=True, minimum=1),
        Param("wbar0", float, 1.0, "initial distance from the teacher w(0) - u", axis=True),
        SAMPLING,
        DATA_SEED,
        Param("times", list, REQUIRED, "SDE times t = lr n of the records"),
        Param("replicas", int, 4000, "number of SGD runs in the ensemble", minimum=2),
    ),
    run_cell=run_gbm,
    derive=_derive_gbm,
    agreement=gbm_agreement,
    figures={
        "fig_gbm": Figure(
            gbm_plots.fig_gbm,
            "Eqs. 21-24 of paper 000: mean and variance of :math:`\\bar w = w - u` (N = 1, no "
            "label noise) vs SDE time: SGD ensembles (symbols, :math:`\\pm` 2 s.e.), the "
            "geometric Brownian motion of Eq. 24 with the sample's moments (solid) and with "
            "Gaussian moments (dotted), and the exact SGD moment recursion (dashed). One colour "
            "per cell.",
        )
    },
    default_figures=("fig_gbm",),
    resources=_resources,
)


EXPERIMENTS: Mapping[str, Experiment] = {e.name: e for e in (RELAXATION, PERTURBATION, TABLE1, GBM)}
