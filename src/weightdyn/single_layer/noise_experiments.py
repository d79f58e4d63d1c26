"""The mini-batch noise experiments of paper 000 Sec. II.2.2 (Figs. 1a, 1b, 2a, 2b, 2c).

Four registry entries, one cell each = one call of a builder of
:mod:`weightdyn.single_layer.noise`:

- ``projector`` (Fig. 1a): off-diagonal variance of the projector X^+X over Gaussian inputs
  (text after Eq. 18) against its exact Haar value;
- ``k_diagonal`` (Fig. 1b): the sorted diagonal of K (Eq. 18) of one teacher-student data set;
- ``noise_spectrum`` (Figs. 2a, 2b): the spectrum of the mini-batch gradient covariance at w*
  over ``n_batches`` random batches (0 = theory only) against Eq. 17 and Eq. 20;
- ``hessian_basis`` (Fig. 2c): |V^T C V| of one data set; the sweep summary averages the cells
  over ``data_seed``;
- ``sgd_noise`` (Fig. 2a as the paper drew it): the mini-batch noise measured at the states that
  stationary SGD visits (:mod:`weightdyn.single_layer.state_noise`) against Eq. 17 and Eq. 15
  averaged over the Lyapunov M; ``noise_spectrum`` at w* stays as the check of the sampler.

Every experiment takes either ``P`` or ``p_over_n`` (P = round(p_over_n N)); both end up in the
cell's parameters, and the cell is named by ``P``. A cell with P <= N is run and flagged
``interpolating`` (its measured values are NaN), never refused. Seeds come from the cell's
parameters with the stream names and key subsets of the old rules (``noise/projector``:
N, P, realisations; ``noise/k_diagonal``: the data keys; ``noise/spectrum``: the data keys,
batch_size, sampling, n_batches). The data set itself comes from
:mod:`weightdyn.single_layer.teacher_student`, whose streams do not depend on sigma_eps2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import io, resources, seeds
from weightdyn.agreement import Agreement, agreement
from weightdyn.experiments import (
    REQUIRED,
    SCALAR,
    ConfigError,
    Experiment,
    Figure,
    LazyPlots,
    Param,
    Params,
    Progress,
)
from weightdyn.single_layer import noise, state_noise
from weightdyn.single_layer.teacher_student import DATA_KEYS, N_TEST, TEACHER_STUDENT

plots = LazyPlots("weightdyn.plots.noise")

SOURCE = "paper 000 Sec. II.2.2"

N = Param("N", int, REQUIRED, "input dimension N", axis=True, minimum=1)
P = Param("P", int, None, "number of training samples P", axis=True, minimum=1)
P_OVER_N = Param(
    "p_over_n", float, None, "samples per input dimension P/N", axis=True, minimum=0,
    exclusive_minimum=True,
)  # fmt: skip
SIGMA_EPS2 = Param(
    "sigma_eps2", float, REQUIRED, "label-noise variance sigma_epsilon^2", axis=True, minimum=0,
    exclusive_minimum=True,
)  # fmt: skip
DATA_SEED = Param("data_seed", int, 0, "data realisation index", axis=True, minimum=0)
BATCH_SIZE = Param("batch_size", int, REQUIRED, "mini-batch size S", axis=True, minimum=1)
SAMPLING = Param(
    "sampling", str, "with", "mini-batch sampling with or without replacement", axis=True,
    allowed=("with", "without"),
)  # fmt: skip
N_BATCHES = Param(
    "n_batches", int, REQUIRED, "number of sampled mini-batches (0: theory only)", axis=True,
    minimum=0,
)  # fmt: skip
N_BLOCKS = Param("n_blocks", int, 10, "independent blocks of mini-batches (jackknife)", minimum=2)
REALISATIONS = Param("realisations", int, REQUIRED, "Gaussian input sets per cell", minimum=2)
LR = Param("lr", float, 0.1, "learning rate lambda", axis=True, minimum=0, exclusive_minimum=True)
N_STATES = Param("n_states", int, 100000, "SGD states at which one mini-batch is drawn", minimum=1)
STATE_REPLICAS = Param("replicas", int, 8, "independent SGD chains", minimum=2)
STATE_BLOCKS = Param("n_blocks", int, 4, "time blocks per chain (error groups)", minimum=1)
BURNIN_TAU = Param("burnin_tau", float, 2.0, "burn-in in slowest relaxation times", minimum=0)
SAMPLE_TAU = Param("sample_tau", float, 4.0, "least sampling window in relaxation times", minimum=0)

SPECTRUM_SEED_KEYS = (*DATA_KEYS, "batch_size", "sampling", "n_batches")


# ------------------------------------------------------------------ derived parameters


def _sample_size(params: dict[str, Any]) -> dict[str, Any]:
    """P from p_over_n (P = round(p_over_n N)) or p_over_n = P / N; exactly one is given."""
    if (params.get("P") is None) == (params.get("p_over_n") is None):
        given = "both" if params.get("P") is not None else "neither"
        raise ConfigError(
            f"P: {params.get('P')!r} with p_over_n {params.get('p_over_n')!r} ({given} given); "
            "allowed: exactly one of 'P' or 'p_over_n'"
        )
    if params.get("P") is None:
        params["P"] = round(params["p_over_n"] * params["N"])
        if params["P"] < 1:
            raise ConfigError(
                f"p_over_n: {params['p_over_n']!r} gives P = 0 at N = {params['N']}; "
                "allowed: p_over_n >= 1 / (2 N)"
            )
    else:
        params["p_over_n"] = params["P"] / params["N"]
    return params


def _batch_fits(params: dict[str, Any]) -> dict[str, Any]:
    if params["batch_size"] > params["P"]:
        raise ConfigError(
            f"batch_size: {params['batch_size']} exceeds P = {params['P']}; "
            "allowed: 1 <= batch_size <= P"
        )
    return params


def _derive_spectrum(params: dict[str, Any]) -> dict[str, Any]:
    params = _batch_fits(_sample_size(params))
    n, blocks = params["n_batches"], params["n_blocks"]
    if 0 < n < 2 * blocks:
        raise ConfigError(
            f"n_batches: {n} is too few for {blocks} blocks; "
            f"allowed: 0 (theory only) or >= 2 n_blocks = {2 * blocks}"
        )
    return params


def _derive_hessian_basis(params: dict[str, Any]) -> dict[str, Any]:
    return _batch_fits(_sample_size(params))


# ------------------------------------------------------------------------------ cells


def _run_projector(params: Params, progress: Progress) -> xr.Dataset:
    """Fig. 1a cell (text after Eq. 18): ``realisations`` Gaussian (P, N) inputs."""
    cell = {key: params[key] for key in ("N", "P", "realisations")}
    progress(f"projector N={cell['N']} P={cell['P']}: {cell['realisations']} realisations")
    rng = seeds.generator("noise/projector", cell)
    return noise.projector_dataset(cell["N"], cell["P"], cell["realisations"], rng)


def _run_k_diagonal(params: Params, progress: Progress) -> xr.Dataset:
    """Fig. 1b cell (Eq. 18): sorted P K^mu_mu of the data set against fresh eps^2."""
    data = params["data"]
    rng = seeds.generator("noise/k_diagonal", {key: params[key] for key in DATA_KEYS})
    progress(f"K diagonal of a data set with P={params['P']}, N={params['N']}")
    return noise.k_diagonal_dataset(data.X, data.y, rng, params["sigma_eps2"])


def _run_spectrum(params: Params, progress: Progress) -> xr.Dataset:
    """Figs. 2a,b cell: empirical noise spectrum at w* (Eqs. 10, 12, 14) vs Eqs. 17, 20."""
    data = params["data"]
    rng = seeds.generator("noise/spectrum", {key: params[key] for key in SPECTRUM_SEED_KEYS})
    progress(f"{params['n_batches']} mini-batches of size {params['batch_size']}")
    return noise.noise_spectrum_dataset(
        data.X, data.y, params["batch_size"], params["sampling"], params["n_batches"], rng,
        sigma_eps2=params["sigma_eps2"], n_blocks=params["n_blocks"], progress=progress,
    )  # fmt: skip


SGD_NOISE_SEED_KEYS = (*DATA_KEYS, "batch_size", "sampling", "lr", "n_states")


def _run_sgd_noise(params: Params, progress: Progress) -> xr.Dataset:
    """Fig. 2a cell: the noise at stationary SGD states vs Eq. 17 and Eq. 15 averaged over M."""
    data = params["data"]
    rng = seeds.generator("noise/sgd_states", {key: params[key] for key in SGD_NOISE_SEED_KEYS})
    S, sampling, lr = params["batch_size"], params["sampling"], params["lr"]
    result = state_noise.StateNoise(np.full((2, data.N, data.N), np.nan), 0, 0, 0, 0, False)
    if data.P > data.N:
        progress(f"SGD-state noise: lr={lr:g}, S={S}, {sampling} replacement")
        result = state_noise.state_noise(
            data.X,
            data.y,
            lr,
            S,
            sampling,
            params["n_states"],
            rng,
            state_noise.StateNoiseSampling(
                replicas=params["replicas"],
                n_blocks=params["n_blocks"],
                burnin_tau=params["burnin_tau"],
                sample_tau=params["sample_tau"],
            ),
            progress=progress,
        )
    return state_noise.state_noise_dataset(
        data.X, data.y, lr, S, sampling, params["sigma_eps2"], result
    )


def _run_hessian_basis(params: Params, progress: Progress) -> xr.Dataset:
    """Fig. 2c cell: |V^T C V| of one data set, C from Eq. 17 at w*."""
    data = params["data"]
    progress(f"Hessian basis of data set {params['data_seed']}")
    return noise.hessian_basis_dataset(data.X, data.y, params["batch_size"], params["sampling"])


GROUP_KEYS = ("N", "P", "p_over_n", "sigma_eps2", "batch_size", "sampling")


def _summarize_hessian_basis(
    datasets: Sequence[xr.Dataset], params: Sequence[Params], settings: Params
) -> xr.Dataset:
    """Fig. 2c: the cells averaged over ``data_seed`` (ascending), one ``group`` per value of
    the other axes (:func:`weightdyn.single_layer.noise.hessian_basis_mean`)."""
    groups: dict[tuple, list[tuple[int, xr.Dataset]]] = {}
    for ds, cell in zip(datasets, params, strict=True):
        key = tuple(cell[k] for k in GROUP_KEYS)
        groups.setdefault(key, []).append((int(cell["data_seed"]), ds))
    means = [
        noise.hessian_basis_mean([ds for _, ds in sorted(members, key=lambda m: m[0])])
        for members in groups.values()
    ]
    coords = {
        name: ([key[k] for key in groups], HESSIAN_BASIS.param(name).attrs())
        for k, name in enumerate(GROUP_KEYS)
    }
    attrs = {"title": "weightdyn hessian_basis summary: <|V^T C V|> over data sets (Fig. 2c)"}
    return io.stack_cells(means, coords, attrs).rename({"cell": "group"})


# ----------------------------------------------------------------------- agreement


def _points(ds: xr.Dataset, keep: Sequence[str] = ("N", "P", "sampling")) -> xr.Dataset:
    """``ds`` without the per-cell coordinates that would clutter the worst-point labels."""
    dim = "group" if "group" in ds.dims else "cell"
    drop = [c for c in ds.coords if ds[c].dims == (dim,) and c not in keep]
    return ds.drop_vars(drop)


def _projector_rows(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Fig. 1a: off-diagonal variance of X^+X vs the exact Haar value (text after Eq. 18)."""
    ds = _points(ds)
    return [
        agreement(
            label,
            "off-diagonal variance of X^+X vs Haar N(P-N)/(P(P-1)(P+2))",
            "Eq. 18 (text)",
            ds["var_offdiag_mean"],
            ds["var_offdiag_haar"],
            ds["var_offdiag_se"],
        )
    ]


def _k_diagonal_rows(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Fig. 1b: mean of P K^mu_mu (Eq. 18) vs its expectation sigma_eps^2 (1 - N/P).

    P K^mu_mu is the squared residual at w*, whose sum has expectation sigma_eps^2 (P - N); the
    standard error is the sample standard deviation over mu / sqrt(P).
    """
    ds = ds.isel(cell=np.flatnonzero(ds["interpolating"].values == 0))
    expected = xr.DataArray(
        ds["sigma_eps2"].values * (1.0 - ds["N"].values / ds["P"].values), dims="cell"
    )
    pk = _points(ds)["PK_sorted"]
    se = pk.std("rank", ddof=1) / np.sqrt(pk.count("rank"))
    return [
        agreement(
            label,
            "mean of P K^mu_mu vs sigma_eps^2 (1 - N/P)",
            "Eq. 18",
            pk.mean("rank"),
            expected,
            se,
        )
    ]


def _spectrum_rows(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Figs. 2a (per sampling mode) and 2b: mini-batch noise covariance at w*.

    2a: empirical eigenvalues vs C = X K X^T / S (Eq. 17, App. C prefactor); 2b: the same
    empirical eigenvalues (with replacement) vs the Hessian approximation sigma_eps^2 H / S
    (Eq. 20). Theory-only cells (n_batches = 0) give no rows.
    """
    simulated = (ds["n_batches"] > 0).values & (ds["interpolating"] == 0).values
    ds = _points(ds)
    rows = []
    for sampling in sorted(np.unique(ds["sampling"].values[simulated])):
        cells = ds.isel(cell=np.flatnonzero(simulated & (ds["sampling"].values == sampling)))
        rows.append(
            agreement(
                label,
                f"empirical noise eigenvalues ({sampling} replacement) vs Eq. 17",
                "Eqs. 17-18, App. C",
                cells["eig_C_empirical"],
                cells["eig_C_theory"],
                cells["eig_C_empirical_se"],
            )
        )
        if sampling == "with":
            rows.append(
                agreement(
                    label,
                    "empirical noise eigenvalues vs Hessian approximation sigma_eps^2 H / S",
                    "Eq. 20",
                    cells["eig_C_empirical"],
                    cells["eig_C_hessian"],
                    cells["eig_C_empirical_se"],
                )
            )
    return rows


def _sgd_noise_rows(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Fig. 2a from SGD, per learning rate: the noise eigenvalues at SGD states against Eq. 17
    and against Eq. 15 averaged over M (the multiplicative correction) of Eq. 30 and of the exact
    discrete recursion (beyond the paper), and their traces."""
    ds = ds.isel(cell=np.flatnonzero((ds["interpolating"] == 0).values))
    rows = []
    for lr in np.unique(ds["lr"].values):
        cells = _points(ds.isel(cell=np.flatnonzero(ds["lr"].values == lr)), ("N", "P", "sampling"))
        for key, eq, name, paper in (
            ("theory", "Eq. 17", "Eq. 17 (at w*)", "000"),
            ("averaged", "Eqs. 15, 30", "Eq. 15 averaged over M of Eq. 30", "000"),
            ("averaged_exact", "Eq. 15, exact M", "Eq. 15 averaged over the exact M", "000+"),
        ):
            rows += [
                agreement(
                    label,
                    f"noise eigenvalues at SGD states vs {name} (lr = {lr:g})",
                    eq,
                    cells["eig_C_sgd"],
                    cells[f"eig_C_{key}"],
                    cells["eig_C_sgd_se"],
                    paper=paper,
                ),
                agreement(
                    label,
                    f"trace of the noise at SGD states vs {name} (lr = {lr:g})",
                    eq,
                    cells["trace_C_sgd"],
                    cells[f"trace_C_{key}"],
                    cells["trace_C_sgd_se"],
                    paper=paper,
                ),
            ]
    return rows


def _hessian_basis_rows(summary: xr.Dataset, label: str) -> list[Agreement]:
    """Fig. 2c: diagonal of <|V^T C V|> vs sigma_eps^2 omega_i / S (Eq. 20), from the summary."""
    ds = _points(summary)
    on_diagonal = ds["mode_i"] == ds["mode_j"]
    diag = ds["C_tilde"].where(on_diagonal).sum("mode_j", min_count=1)
    diag_se = ds["C_tilde_se"].where(on_diagonal).sum("mode_j", min_count=1)
    scale = xr.DataArray(summary["sigma_eps2"].values / summary["batch_size"].values, dims="group")
    return [
        agreement(
            label,
            "diagonal of V^T C V (Hessian basis) vs sigma_eps^2 omega_i / S",
            "Eqs. 17, 20",
            diag,
            scale * ds["eig_H"],
            diag_se,
        )
    ]


# ------------------------------------------------------------------------- registry


def _resources(mem_mb: int, minutes: int):
    """The old rules' requests (mem_mb, runtime in minutes), doubled with each retry."""

    def request(params: Params, attempt: int) -> dict[str, int]:
        return {"mem_mb": attempt * mem_mb, "runtime": attempt * minutes}

    return request


def _light_projector(params: Params) -> bool:
    """A pseudo-inverse of a (P, N) matrix per realisation."""
    return resources.is_light(params["realisations"] * params["P"] * params["N"] ** 2)


def _light_data(params: Params) -> bool:
    """Eq. 17 and the Hessian of one data set: O(N^3 + P N^2)."""
    return resources.is_light(params["N"] ** 3 + params["P"] * params["N"] ** 2)


def _light_spectrum(params: Params) -> bool:
    """Eq. 17 plus the empirical covariance of ``n_batches`` mini-batch gradients (N^2 each)."""
    return _light_data(params) and resources.is_light(params["n_batches"] * params["N"] ** 2)


_DATA_AXES = (N, P, P_OVER_N, SIGMA_EPS2, DATA_SEED)
_IDENTITY = ("N", "P", "sigma_eps2", "data_seed")

#: the axes the noise-spectrum figures (weightdyn.plots.noise) hold fixed: one curve family
SPECTRUM_FIXED = ("N", "batch_size", "sigma_eps2", "data_seed")

PROJECTOR = Experiment(
    name="projector",
    family="single_layer",
    title="Off-diagonal variance of the projector X^+X (Fig. 1a)",
    source="paper 000 Eq. 18 (text), Fig. 1a",
    params=(N, P, P_OVER_N, REALISATIONS),
    run_cell=_run_projector,
    derive=_sample_size,
    identity=("N", "P"),
    agreement=_projector_rows,
    figures={
        "scalar": SCALAR,
        "fig1a": Figure(
            plots.fig1a,
            "**Paper 000, Fig. 1a.** Variance of the off-diagonal entries of the projector X⁺X "
            "(text after Eq. 18) against P for several N, mean ±1 s.e. over Gaussian input sets, "
            "with the exact Haar value N(P−N)/(P(P−1)(P+2)) (lines), the paper's claim "
            "∝ P^−1.8 N^−1 (dotted) and a fitted c P^a N^b; right: scaled by P²/N against P/N.",
        ),
    },
    default_figures=("fig1a",),
    resources=_resources(2000, 10),
    light=_light_projector,
)

K_DIAGONAL = Experiment(
    name="k_diagonal",
    family="single_layer",
    title="Sorted diagonal of K (Fig. 1b)",
    source="paper 000 Eq. 18, Fig. 1b",
    params=(*_DATA_AXES, N_TEST),
    run_cell=_run_k_diagonal,
    derive=_sample_size,
    identity=_IDENTITY,
    agreement=_k_diagonal_rows,
    figures={
        "fig1b": Figure(
            plots.fig1b,
            "**Paper 000, Fig. 1b.** Sorted diagonal P K^μμ of the matrix K (Eq. 18; the squared "
            "residual at w*) for several P at one N, against sorted squares of fresh label noise "
            "ε² with ε ~ N(0, σ_ε²) (black).",
            fixed=("N", "sigma_eps2", "data_seed"),
        )
    },
    default_figures=("fig1b",),
    resources=_resources(2000, 10),
    light=_light_data,
    data=TEACHER_STUDENT,
)

NOISE_SPECTRUM = Experiment(
    name="noise_spectrum",
    family="single_layer",
    title="Mini-batch noise spectrum at w* (Figs. 2a, 2b)",
    source="paper 000 Eqs. 10, 12, 14, 17, 20, App. C; Figs. 2a, 2b",
    params=(*_DATA_AXES, BATCH_SIZE, SAMPLING, N_BATCHES, N_BLOCKS, N_TEST),
    run_cell=_run_spectrum,
    derive=_derive_spectrum,
    identity=(*_IDENTITY, "batch_size", "sampling", "n_batches"),
    agreement=_spectrum_rows,
    figures={
        "scalar": SCALAR,
        "fig2a": Figure(
            plots.fig2a,
            "**Sampler check (Fig. 2a at w*).** Sorted eigenvalues of the empirical mini-batch "
            "gradient covariance at w* (Eqs. 10, 12, 14; band ±2 s.e., jackknife over blocks of "
            "mini-batches) against C = XKXᵀ/S (Eq. 17; App. C prefactor (P−S)/(S(P−1)) without "
            "replacement), divided by σ_x²σ_ε²/S; one panel per sampling mode.",
            fixed=SPECTRUM_FIXED,
        ),
        "fig2b": Figure(
            plots.fig2b,
            "**Paper 000, Fig. 2b.** Eigenvalues of the noise covariance C = XKXᵀ/S at w* "
            "(Eq. 17, solid) against the Hessian approximation σ_ε²H/S (Eq. 20, dashed), divided "
            "by σ_x²σ_ε²/S; right (the paper's inset): largest and smallest eigenvalues "
            "against P/N, including the theory-only cells (n_batches = 0). Theory only: no "
            "error bars.",
            fixed=SPECTRUM_FIXED,
        ),
    },
    default_figures=("fig2a", "fig2b"),
    resources=_resources(2000, 30),
    light=_light_spectrum,
    data=TEACHER_STUDENT,
)

HESSIAN_BASIS = Experiment(
    name="hessian_basis",
    family="single_layer",
    title="Noise covariance in the Hessian eigenbasis (Fig. 2c)",
    source="paper 000 Eqs. 17, 20, Fig. 2c",
    params=(*_DATA_AXES, BATCH_SIZE, SAMPLING, N_TEST),
    run_cell=_run_hessian_basis,
    derive=_derive_hessian_basis,
    identity=(*_IDENTITY, "batch_size", "sampling"),
    summarize=_summarize_hessian_basis,
    agreement=_hessian_basis_rows,
    figures={
        "fig2c": Figure(
            plots.fig2c,
            "**Paper 000, Fig. 2c.** Mean absolute value of VᵀCV in the Hessian eigenbasis "
            "(modes by ascending Hessian eigenvalue; log colour scale, normalised to its "
            "maximum), C from Eq. 17 averaged over data sets (data_seed): close to diagonal, as "
            "the Hessian approximation σ_ε²H/S (Eq. 20) assumes.",
            source="summary",
        )
    },
    default_figures=("fig2c",),
    resources=_resources(2000, 10),
    light=_light_data,
    data=TEACHER_STUDENT,
)


SGD_NOISE = Experiment(
    name="sgd_noise",
    family="single_layer",
    title="Mini-batch noise at the states of stationary SGD (Fig. 2a)",
    source="paper 000 Eqs. 10-17, 30, App. C; Fig. 2a",
    params=(
        *_DATA_AXES,
        BATCH_SIZE,
        SAMPLING,
        LR,
        N_STATES,
        STATE_REPLICAS,
        STATE_BLOCKS,
        BURNIN_TAU,
        SAMPLE_TAU,
        N_TEST,
    ),
    run_cell=_run_sgd_noise,
    derive=_derive_hessian_basis,
    identity=(*_IDENTITY, "batch_size", "sampling", "lr"),
    agreement=_sgd_noise_rows,
    figures={
        "scalar": SCALAR,
        "fig2a": Figure(
            plots.fig2a_sgd,
            "**Paper 000, Fig. 2a, from SGD.** Sorted eigenvalues of the mini-batch gradient "
            "covariance measured at the states that stationary SGD visits (one batch per state; "
            "solid, band ±2 s.e., jackknife over replica time blocks) against Eq. 17 at w* "
            "(dashed) and Eq. 15 averaged over the Lyapunov M of Eq. 30 (dotted), divided by "
            "σ_x²σ_ε²/S, with and without replacement; lower left: measured / Eq. 17 − 1 per "
            "mode; lower right: the ratio without / with replacement against the App. C factor "
            "(P−S)/(P−1).",
            fixed=(*SPECTRUM_FIXED, "lr"),
        ),
    },
    default_figures=("fig2a",),
    resources=_resources(2000, 30),
    data=TEACHER_STUDENT,
)


EXPERIMENTS: dict[str, Experiment] = {
    exp.name: exp for exp in (NOISE_SPECTRUM, PROJECTOR, K_DIAGONAL, HESSIAN_BASIS, SGD_NOISE)
}
