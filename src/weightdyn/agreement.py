"""Theory-vs-simulation agreement per figure: relative deviations and z-scores with their SEs.

Every ``*_rows`` function takes a merged dataset (or one two-layer cell dataset) and returns a
list of :class:`Agreement` rows, one per comparison drawn in a figure of paper 000. A row pools the
points (cells, modes, times, ...) of one comparison:

- the relative deviation r_k = sim_k / theory_k - 1 of every point, with standard error
  s_k = sqrt(se_sim_k^2 + se_theory_k^2) / |theory_k|;
- their mean, whose standard error sqrt(sum_k s_k^2) / n treats the points as independent;
- the largest |r_k| and the largest |z_k|, z_k = r_k / s_k, with the point where |z| (or, without
  standard errors, |r|) is largest.

Points where the theory vanishes (|theory| <= ``floor`` max |theory|, e.g. N >= P where C = 0 by
Eq. 16) or either value is not finite (diverged SGD) are left out. Rows without a standard error
(theory-only figures, single-realisation matrices) carry NaN in the SE and z columns.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

PAPER = "000"


@dataclass(frozen=True)
class Agreement:
    """One comparison of simulation with theory, pooled over its points."""

    figure: str
    compared: str
    equations: str
    points: int
    mean_rel_dev: float
    mean_rel_dev_se: float
    max_abs_rel_dev: float
    max_abs_z: float
    worst_point: str
    paper: str = PAPER


def _point_labels(da: xr.DataArray) -> np.ndarray:
    """'dim=value, ...' for every element of ``da`` (length-1 dims, constant coords omitted)."""
    parts = []
    for dim in da.dims:
        coords = [
            name
            for name, coord in da.coords.items()
            if coord.dims == (dim,) and np.unique(coord.values).size > 1 and name != "cell_id"
        ]
        if not coords and da.sizes[dim] > 1:
            coords = [None]
        for name in coords:
            values = da[name].values if name is not None else np.arange(da.sizes[dim])
            label = dim if name is None else name
            shape = [1] * da.ndim
            shape[da.dims.index(dim)] = da.sizes[dim]
            parts.append(
                np.broadcast_to(
                    np.array([f"{label}={v}" for v in values], dtype=object).reshape(shape),
                    da.shape,
                )
            )
    if not parts:
        return np.full(da.shape, "", dtype=object)
    return np.array([", ".join(p) for p in zip(*(p.ravel() for p in parts), strict=True)]).reshape(
        da.shape
    )


def agreement(
    figure: str,
    compared: str,
    equations: str,
    sim: xr.DataArray,
    theory: xr.DataArray | float,
    sim_se: xr.DataArray | None = None,
    theory_se: xr.DataArray | None = None,
    floor: float = 1e-9,
    paper: str = PAPER,
) -> Agreement:
    """Pool the relative deviations and z-scores of ``sim`` (+- ``sim_se``) from ``theory``."""
    theory = xr.DataArray(theory) if not isinstance(theory, xr.DataArray) else theory
    zero = xr.zeros_like(sim)
    has_se = sim_se is not None or theory_se is not None
    sim, theory, sim_se, theory_se = xr.broadcast(
        sim,
        theory,
        zero if sim_se is None else sim_se,
        zero if theory_se is None else theory_se,
    )
    labels = _point_labels(sim).ravel()
    s, t = sim.values.ravel(), theory.values.ravel()
    se = np.hypot(sim_se.values.ravel(), theory_se.values.ravel())
    finite = np.isfinite(s) & np.isfinite(t) & np.isfinite(se)
    scale = np.max(np.abs(t[finite]), initial=0.0)
    keep = finite & (np.abs(t) > floor * scale)
    s, t, se, labels = s[keep], t[keep], se[keep], labels[keep]
    n = int(s.size)
    if n == 0:
        return Agreement(figure, compared, equations, 0, *([np.nan] * 4), "", paper)
    rel = s / t - 1.0
    rel_se = se / np.abs(t)
    if has_se:
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(rel_se > 0, rel / rel_se, np.nan)
        worst = int(np.nanargmax(np.abs(z))) if np.isfinite(z).any() else int(np.argmax(abs(rel)))
        mean_se = float(np.sqrt(np.sum(rel_se**2)) / n)
        max_z = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else np.nan
    else:
        worst = int(np.argmax(np.abs(rel)))
        mean_se = max_z = np.nan
    return Agreement(
        figure,
        compared,
        equations,
        n,
        float(np.mean(rel)),
        mean_se,
        float(np.max(np.abs(rel))),
        max_z,
        str(labels[worst]),
        paper,
    )


def _cells(ds: xr.Dataset, cells: Sequence[Mapping[str, object]]) -> xr.Dataset:
    """The given cells of the merged single-layer dataset along a new ``cell`` dimension."""
    keys = [k for k in cells[0] if k in ds.dims]
    return ds.sel({k: xr.DataArray([c[k] for c in cells], dims="cell") for k in keys})


def single_layer_rows(
    ds: xr.Dataset, sweeps: Mapping[str, Sequence[Mapping[str, object]]]
) -> list[Agreement]:
    """Fig. 4a (tr M/N, Eq. 30; training loss, Eqs. 9, 30), 4b (spectrum of M, Eqs. 30-31), 4c.

    ``sweeps`` maps the figure sweeps present (fig4a, fig4b, fig4c) to their cells.
    """
    rows = []
    if sweeps.get("fig4a"):
        sel = _cells(ds, sweeps["fig4a"])
        rows += [
            agreement(
                "fig4a",
                "SGD temporal weight variance vs tr M / N",
                "Eqs. 30-31",
                sel["var_w_sgd"],
                sel["var_w_theory"],
                sel["var_w_sgd_se"],
            ),
            agreement(
                "fig4a",
                "SGD training loss vs L* + tr(HM)/2",
                "Eqs. 9, 26, 30",
                sel["train_loss"],
                sel["train_loss_theory"],
                sel["train_loss_se"],
            ),
        ]
    if sweeps.get("fig4b"):
        sel = _cells(ds, sweeps["fig4b"])
        rows.append(
            agreement(
                "fig4b",
                "eigenvalues of the SGD covariance about w* vs M (Lyapunov)",
                "Eqs. 30-31",
                sel["eig_M_sgd"],
                sel["eig_M_lyapunov"],
                sel["eig_M_sgd_se"],
            )
        )
    if sweeps.get("fig4c"):
        sel = _cells(ds, sweeps["fig4c"])
        rows.append(
            agreement(
                "fig4c",
                "theory only: ||M_30|| (broken detailed balance) vs ||M_34|| (isotropic)",
                "Eqs. 30, 34",
                sel["m_lyapunov_over_isotropic"],
                1.0,
            )
        )
    return rows


def projector_rows(ds: xr.Dataset) -> list[Agreement]:
    """Fig. 1a: off-diagonal variance of X^+X vs the exact Haar value (text after Eq. 18)."""
    return [
        agreement(
            "fig1a",
            "off-diagonal variance of X^+X vs Haar N(P-N)/(P(P-1)(P+2))",
            "Eq. 18 (text)",
            ds["var_offdiag_mean"],
            ds["var_offdiag_haar"],
            ds["var_offdiag_se"],
        )
    ]


def k_diagonal_rows(ds: xr.Dataset) -> list[Agreement]:
    """Fig. 1b: mean of P K^mu_mu (Eq. 18) vs its expectation sigma_eps^2 (1 - N/P).

    P K^mu_mu is the squared residual at w*, whose sum has expectation sigma_eps^2 (P - N); the
    standard error is the sample standard deviation over mu / sqrt(P).
    """
    pk = ds["PK_sorted"]
    n = pk.count("rank")
    mean = pk.mean("rank")
    se = pk.std("rank", ddof=1) / np.sqrt(n)
    expected = ds["sigma_eps2"] * (1.0 - ds["N"] / ds["P"])
    return [
        agreement(
            "fig1b",
            "mean of P K^mu_mu vs sigma_eps^2 (1 - N/P)",
            "Eq. 18",
            mean,
            expected,
            se,
        )
    ]


def spectrum_rows(ds: xr.Dataset) -> list[Agreement]:
    """Figs. 2a (with / without replacement) and 2b: mini-batch noise covariance at w*.

    2a: empirical eigenvalues vs C = X K X^T / S (Eq. 17, App. C prefactor); 2b: the same
    empirical eigenvalues vs the Hessian approximation sigma_eps^2 H / S (Eq. 20).
    """
    rows = []
    simulated = ds["eig_C_empirical"].notnull().any("mode")
    for sampling in ds["sampling"].values:
        cell = ds.sel(sampling=sampling).where(simulated.sel(sampling=sampling))
        rows.append(
            agreement(
                f"fig2a_{sampling}",
                f"empirical noise eigenvalues ({sampling} replacement) vs Eq. 17",
                "Eqs. 17-18, App. C",
                cell["eig_C_empirical"],
                cell["eig_C_theory"],
                cell["eig_C_empirical_se"],
            )
        )
    if "with" in ds["sampling"].values:
        cell = ds.sel(sampling="with").where(simulated.sel(sampling="with"))
        rows.append(
            agreement(
                "fig2b",
                "empirical noise eigenvalues vs Hessian approximation sigma_eps^2 H / S",
                "Eq. 20",
                cell["eig_C_empirical"],
                cell["eig_C_hessian"],
                cell["eig_C_empirical_se"],
            )
        )
    return rows


def hessian_basis_rows(ds: xr.Dataset) -> list[Agreement]:
    """Fig. 2c: diagonal of |V^T C V| in the Hessian eigenbasis vs sigma_eps^2 omega_i / S (Eq. 20).

    Uses the mean Hessian spectrum over data sets; sigma_eps^2 and S come from the cell attributes.
    """
    diag = ds["C_tilde"].where(ds["mode_i"] == ds["mode_j"]).sum("mode_j", min_count=1)
    diag_se = ds["C_tilde_se"].where(ds["mode_i"] == ds["mode_j"]).sum("mode_j", min_count=1)
    scale = float(ds.attrs["cell_sigma_eps2"]) / float(ds.attrs["cell_batch_size"])
    return [
        agreement(
            "fig2c",
            "diagonal of V^T C V (Hessian basis) vs sigma_eps^2 omega_i / S",
            "Eqs. 17, 20",
            diag,
            scale * ds["eig_H"],
            diag_se,
        )
    ]


def relaxation_rows(ds: xr.Dataset) -> list[Agreement]:
    """Fig. 3: replica-mean training loss during relaxation vs Eqs. 26-27 (with Eq. 30 noise)."""
    return [
        agreement(
            "fig3",
            "replica-mean training loss vs noise-averaged loss",
            "Eqs. 26-27, 30",
            ds["loss_sgd_mean"],
            ds["loss_theory"],
            ds["loss_sgd_se"],
        )
    ]


def perturbation_rows(ds: xr.Dataset, figure: str) -> list[Agreement]:
    """Figs. 5a (i.i.d. inputs) and 5b (correlated inputs, several data sets).

    The spectrum of the SGD covariance vs Eq. 30 (per data set), and the loss perturbation
    delta L / theta^2 along its eigenvectors at the largest theta vs the i.i.d. value sigma_x^2/2
    (Eq. 35, 5a) or vs Eq. 35 along the eigenvectors of M from Eq. 30 (5b, means over data sets).
    """
    theta = ds["theta"].values.max()
    rows = [
        agreement(
            figure,
            "eigenvalues of the SGD covariance about w* vs M (Lyapunov)",
            "Eq. 30",
            ds["eig_M_sgd"],
            ds["eig_M_theory"],
            ds["eig_M_sgd_se"],
        )
    ]
    if "realisation" in ds.dims:
        rows.append(
            agreement(
                figure,
                f"delta L / theta^2 (theta = {theta:g}) along SGD eigenvectors vs along M",
                "Eqs. 30, 35",
                ds["delta_L_over_theta2_mean"].sel(theta=theta),
                ds["delta_L_over_theta2_lyapunov_mean"],
                ds["delta_L_over_theta2_mean_se"].sel(theta=theta),
                ds["delta_L_over_theta2_lyapunov_mean_se"],
            )
        )
    else:
        rows.append(
            agreement(
                figure,
                f"delta L / theta^2 (theta = {theta:g}) along SGD eigenvectors vs sigma_x^2 / 2",
                "Eq. 35, H = sigma_x^2 1",
                ds["delta_L_over_theta2"].sel(theta=theta),
                ds["delta_L_over_theta2_iid"],
            )
        )
    return rows


def sgf_rows(ds: xr.Dataset) -> list[Agreement]:
    """SGD and SGF (Eq. 13, additive and multiplicative noise): spectra vs Eq. 30."""
    return [
        agreement(
            "fig_sgd_sgf",
            f"eigenvalues of the {name} covariance about w* vs M (Lyapunov)",
            "Eqs. 13, 30",
            ds["eig_M"].sel(simulation=name),
            ds["eig_M_lyapunov"],
            ds["eig_M_se"].sel(simulation=name),
        )
        for name in ds["simulation"].values
    ]


def gbm_rows(ds: xr.Dataset) -> list[Agreement]:
    """N = 1, sigma_eps = 0: ensemble variance of w - u vs the GBM (Eq. 24), per learning rate,
    and vs the exact SGD moment recursion (Eq. 11) over all learning rates and times."""
    rows = [
        agreement(
            "fig_gbm",
            f"ensemble variance of w - u (lr = {lr:g}) vs geometric Brownian motion",
            "Eqs. 21-24",
            ds["var_wbar"].sel(lr=lr),
            ds["var_gbm"].sel(lr=lr),
            ds["var_wbar_se"].sel(lr=lr),
        )
        for lr in ds["lr"].values
    ]
    rows.append(
        agreement(
            "fig_gbm",
            "ensemble variance of w - u vs exact SGD recursion",
            "Eq. 11",
            ds["var_wbar"],
            ds["var_discrete"],
            ds["var_wbar_se"],
        )
    )
    return rows


def two_layer_rows(ds: xr.Dataset, cell: str) -> list[Agreement]:
    """One two-layer cell (Sec. III): Figs. 6a-c, 7a-b, the drift of D2 and relaxation (Eq. 76).

    Figure names are ``<cell>_<figure>`` as in results/figures/two_layer/.
    """
    ds = ds.squeeze()
    eye = ds["z_row"] == ds["z_col"]
    rows = [
        agreement(
            f"{cell}_fig6a",
            "diagonal of cov(Z), SGD replica 0 vs Eq. 66 at W^0 (no SE: one replica)",
            "Eq. 66",
            ds["M_z_sgd"].where(eye).sum("z_col", min_count=1),
            ds["M_z_eq66"].where(eye).sum("z_col", min_count=1),
        ),
        agreement(
            f"{cell}_fig6bc",
            "eig cov(vec dW2), SGD about its time average vs Eq. 66 at W^0 (protocol a)",
            "Eq. 66",
            ds["eig_cov2_sgd_a"],
            ds["eig_cov2_eq66"],
            ds["eig_cov2_sgd_a_se"],
        ),
        agreement(
            f"{cell}_fig6bc",
            "eig cov(vec dW1), SGD about the local point vs exact linearisation (protocol b)",
            "Eqs. 62-66",
            ds["eig_cov1_sgd_b"],
            ds["eig_cov1_exact_local"],
            ds["eig_cov1_sgd_b_se"],
        ),
        agreement(
            f"{cell}_fig7a",
            "delta L / theta^2 along eigenvectors of cov(dW2) vs sigma_x^2 D1_ii / 2",
            "Eq. 73",
            ds["delta_L2_sgd"],
            ds["delta_L2_eq73_exact"],
            ds["delta_L2_sgd_se"],
        ),
        agreement(
            f"{cell}_fig7b",
            "delta L / theta^2 along SGD vs linear-theory eigenvectors of cov(vec dW1)",
            "Eqs. 62-66",
            ds["delta_L1_sgd"],
            ds["delta_L1_linear"],
            ds["delta_L1_sgd_se"],
        ),
        agreement(
            f"{cell}_fig_drift",
            "D2 at the local points vs D2 at W^0 (no drift; no SE)",
            "Eq. 59",
            ds["D2_local"],
            ds["D2_w0"],
        ),
    ]
    if "relax_acf" in ds:
        rows.append(
            agreement(
                f"{cell}_fig_relaxation",
                "autocorrelation of drift modes vs exp(-sigma_x^2 omega_k t), where > 0.1",
                "Eqs. 74-76",
                ds["relax_acf"],
                ds["relax_theory"],
                ds["relax_acf_se"],
                floor=0.1,
            )
        )
    return rows


def discrete_rows(ds: xr.Dataset, cells: Sequence[Mapping[str, object]]) -> list[Agreement]:
    """lr sweeps (beyond paper 000): SGD vs the exact discrete-time stationary covariance."""
    if not cells:
        return []
    row = functools.partial(agreement, paper="000+")
    sel = _cells(ds, cells)
    stable = (sel["diverged"] == 0) & (sel["second_moment_radius"] < 1)
    N = sel["N"]
    trace = row(
        "fig_discrete_trace",
        "tr M of SGD (about w*) vs the exact discrete-time fixed point",
        "beyond Eq. 30 (docs/discrete_covariance.md)",
        (N * sel["var_w_sgd_wstar"]).where(stable),
        sel["eig_M_discrete"].sum("mode", min_count=1),
        (N * sel["var_w_sgd_wstar_se"]).where(stable),
    )
    spectra = row(
        "fig_discrete_spectra",
        "eigenvalues of the SGD covariance vs the exact discrete-time fixed point",
        "beyond Eq. 30 (docs/discrete_covariance.md)",
        sel["eig_M_sgd"].where(stable),
        sel["eig_M_discrete"],
        sel["eig_M_sgd_se"].where(stable),
    )
    bounded = sel["eig_M_sgd"].isel(mode=0).notnull() | (sel["diverged"] == 1)
    divergence = row(
        "fig_discrete_divergence",
        "1 + SGD diverged (0/1) vs 1 + predicted radius >= 1 (deviation 0 where they agree)",
        "spectral radius of M -> E_B[(I - lr H_B) M (I - lr H_B)^T]",
        (1 + sel["diverged"]).where(bounded),
        1 + (sel["second_moment_radius"] >= 1),
    )
    return [trace, spectra, divergence]


def _scalar(ds: xr.Dataset, name: str) -> xr.DataArray:
    return ds[name] if name in ds else xr.DataArray(np.nan)


def _exponent(
    figure: str, compared: str, equations: str, ds: xr.Dataset, name: str, expected: float
) -> Agreement:
    """A fitted exponent ``name`` (with ``name_se``) against its predicted value."""
    return agreement(
        figure, compared, equations, ds[name], expected, _scalar(ds, f"{name}_se"), paper="002"
    )


def mean_field_rows(summaries: Mapping[str, xr.Dataset]) -> list[Agreement]:
    """Paper 002 (E1-E5): fitted exponents and rates against their predicted values."""
    row = functools.partial(agreement, paper="002")
    rows = []
    if "width" in summaries:
        ds = summaries["width"]
        rows.append(
            _exponent(
                "width_gap_vs_N",
                "exponent of RMS sup_{t>=1} |L_N - L_inf| in N vs -1/2",
                "Eq. 6",
                ds,
                "slope_late",
                -0.5,
            )
        )
        largest = ds["N"].max()
        curves = row(
            "width_loss_curves",
            "mean loss E L_N(t) at the largest N vs L_inf(t)",
            "Eqs. 2, 6, 11",
            ds["loss_mean"].sel(N=largest),
            ds["loss_inf"],
            ds["loss_mean_se"].sel(N=largest),
        )
        eq12 = row(
            "width_eq12_check",
            "Delta L / (-int D dt) vs 1 over RK4 intervals",
            "Eq. 12",
            1 + ds["eq12_rel_error"],
            1.0,
        )
        rows += [curves, eq12]
        bias = row(
            "width_bias_vs_N",
            "mean t = 0 bias E L_N - L_inf vs (1/2N) int Var_p0[phi] dmu",
            "Eqs. 2, 6",
            ds["bias"].isel(t_fixed=0),
            ds["bias_exact_t0"],
            ds["bias_se"].isel(t_fixed=0),
        )
        rows.append(bias)
    if "pde" in summaries:
        ds = summaries["pde"]
        for scheme, order in (("muscl", 2.0), ("upwind", 1.0)):
            if scheme in ds["scheme"].values:
                order_row = row(
                    "pde_loss_error_vs_n",
                    f"observed order of the {scheme} loss error vs {order:g}",
                    "Eqs. 9-11",
                    ds["loss_order"].sel(scheme=scheme),
                    order,
                )
                rows.append(order_row)
        if "muscl" in ds["scheme"].values:
            muscl = ds.sel(scheme="muscl")
            finest = muscl["n"].max()
            density = row(
                "pde_density_snapshots",
                "1 + max relative error of the MUSCL density at the probes vs 1",
                "Eq. 10 (characteristics)",
                1 + muscl["density_error"],
                1.0,
            )
            curve = row(
                "pde_loss_curves",
                "L_mf(t) of the finest MUSCL grid vs the characteristics reference",
                "Eqs. 10-11",
                muscl["loss_pde"].sel(n=finest),
                ds["loss_inf"],
            )
            rows += [density, curve]
        rows.append(
            _exponent(
                "pde_hist_distance_vs_N",
                "exponent of the particle histogram distance in N vs -1/2",
                "Eqs. 6, 10",
                ds,
                "hist_slope",
                -0.5,
            )
        )
    if "small_output" in summaries:
        ds = summaries["small_output"]
        curves = row(
            "small_output_loss_curves",
            "gradient-descent loss vs Eq. 24 with its floor (mean over seeds, all eps)",
            "Eqs. 19-26",
            ds["eps_loss_gd"].mean("seed"),
            ds["eps_loss_pred"].mean("seed"),
        )
        rows.append(curves)
        for figure, name, what in (
            ("small_output_loss_error", "slope_loss_error", "Eq. 24 loss error"),
            ("small_output_shifts", "slope_shift_error", "shift error of s(w~, t)"),
        ):
            rows.append(
                _exponent(
                    figure, f"exponent of the {what} in eps vs 2", "Eqs. 20-24", ds, name, 2.0
                )
            )
    if "gaussian" in summaries:
        for name, what in (("slope_b", "centre b"), ("slope_A_rel", "relative covariance A")):
            rows.append(
                _exponent(
                    "gaussian_error_vs_s",
                    f"exponent of the {what} error in s vs 2",
                    "Eqs. 28-29",
                    summaries["gaussian"],
                    name,
                    2.0,
                )
            )
    if "gaussian" in summaries:
        ds = summaries["gaussian"]
        centre = row(
            "gaussian_trajectories",
            "cloud centre vs Eq. 28 (all s, t, components)",
            "Eq. 28",
            ds["b_particles"],
            ds["b_ode"],
        )
        growth = row(
            "gaussian_stationary",
            "variance growth rate along eigenvectors of H vs 2 lambda_k",
            "Eqs. 29-30",
            ds["rate_fit"],
            ds["rate_theory"],
            ds["rate_fit_se"],
        )
        rows += [centre, growth]
    if "linearisation" in summaries:
        ds = summaries["linearisation"]
        rows.append(
            _exponent(
                "linearisation_perturbation",
                "exponent of the Eq. 18 error in the perturbation size vs 1",
                "Eq. 18",
                ds,
                "eq18_slope",
                1.0,
            )
        )
        rate = row(
            "linearisation_decay",
            "late loss decay rate vs 2 theta_min (tangent kernel)",
            "Eqs. 16-18",
            ds["rate"],
            2 * ds["theta"].min(),
            ds["rate_se"],
        )
        rows.append(rate)
        rows.append(
            _exponent(
                "linearisation_grid_spectrum",
                "grid order of the spectrum of R vs 2",
                "Eq. 16",
                ds.assign(grid_order_min_se=ds["grid_order_se"].max()),
                "grid_order_min",
                2.0,
            )
        )
    return rows


CAPTION = (
    "Relative deviation sim/theory - 1 per point, pooled per comparison: mean with its "
    "standard error (points treated as independent), largest |deviation| and largest "
    "|z| = |sim - theory| / SE, and the point where |z| (or |deviation| without SE) is "
    "largest. n/a: no standard error available."
)

COLUMNS = (
    ("paper", "paper"),
    ("figure", "figure"),
    ("compared", "simulation vs theory"),
    ("equations", "equations"),
    ("points", "points"),
    ("mean_rel_dev", "mean rel. deviation"),
    ("mean_rel_dev_se", "SE"),
    ("max_abs_rel_dev", "max |rel. deviation|"),
    ("max_abs_z", "max |z|"),
    ("worst_point", "at"),
)


def _cell_text(value: object) -> str:
    if isinstance(value, float):
        return "n/a" if not np.isfinite(value) else f"{value:.3g}"
    return str(value)


def table_csv(rows: Sequence[Agreement]) -> str:
    """The rows as CSV text, one column per :class:`Agreement` field (full precision)."""
    lines = [",".join(key for key, _ in COLUMNS)]
    for row in rows:
        fields = [getattr(row, key) for key, _ in COLUMNS]
        lines.append(",".join('"' + str(f).replace('"', '""') + '"' for f in fields))
    return "\n".join(lines) + "\n"


def table_html(rows: Sequence[Agreement], caption: str) -> str:
    """A self-contained HTML page (inline style, no external resources) with the rows."""
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in COLUMNS)
    body = "\n".join(
        "<tr>"
        + "".join(f"<td>{html.escape(_cell_text(getattr(row, key)))}</td>" for key, _ in COLUMNS)
        + "</tr>"
        for row in rows
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>theory vs simulation</title>
<style>
body {{ font-family: sans-serif; font-size: 13px; margin: 1em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #bbb; padding: 3px 6px; text-align: left; }}
th {{ background: #eee; }}
tr:nth-child(even) td {{ background: #f7f7f7; }}
</style></head><body>
<p>{html.escape(caption)}</p>
<table><thead><tr>{head}</tr></thead><tbody>
{body}
</tbody></table></body></html>
"""
