"""Tests for weightdyn.single_layer.noise (paper 000 Sec. II.2.2, Eqs. 14-20, Figs. 1-2).

Statistical checks use fixed seeds and tolerances derived from standard errors: with a
z-score bound ``Z``, a correct implementation fails with probability ~ erfc(Z / sqrt 2) per
compared number (Z = 4: 6e-5; Z = 4.5 for ~20 numbers: < 1e-4 in total). Measured values are
printed (``pytest -s``) so they can be quoted.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from weightdyn import io, seeds
from weightdyn.data import teacher_student
from weightdyn.single_layer import noise, theory
from weightdyn.single_layer import teacher_student as shared_data

SIGMA_EPS2 = 0.25


def report(name: str, value: object) -> None:
    print(f"\n[noise] {name}: {value}")


# ------------------------------------------------------------------ projector (Fig. 1a)


def test_projector_variance_matches_haar_by_monte_carlo() -> None:
    """Gaussian X has a Haar-distributed column space, so E[measured] = exact formula."""
    N, P, R = 5, 20, 4000
    rng = np.random.default_rng(11)
    values = np.array(
        [noise.projector_offdiag_variance(rng.normal(0, 1 / np.sqrt(N), (P, N))) for _ in range(R)]
    )
    exact = noise.haar_projector_offdiag_variance(N, P)
    se = values.std(ddof=1) / np.sqrt(R)
    z = (values.mean() - exact) / se
    report("projector MC vs Haar (N=5, P=20)", f"{values.mean():.6f} vs {exact:.6f}, z = {z:.2f}")
    assert abs(z) < 4.0  # one number: false-alarm probability 6e-5


def test_projector_variance_agrees_with_explicit_matrix() -> None:
    """The O(P N^2) identity r - sum |Q_mu|^4 equals the variance read off the P x P matrix."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 4))
    Pi = X @ np.linalg.pinv(X)
    off = Pi[~np.eye(30, dtype=bool)]
    assert noise.projector_offdiag_variance(X) == pytest.approx(np.mean(off**2), rel=1e-12)
    # rank-deficient input: the projector onto a 2-dimensional column space
    Xr = np.column_stack([X[:, 0], X[:, 1], X[:, 0] + X[:, 1]])
    Pir = Xr @ np.linalg.pinv(Xr)
    offr = Pir[~np.eye(30, dtype=bool)]
    assert noise.projector_offdiag_variance(Xr) == pytest.approx(np.mean(offr**2), rel=1e-10)


def test_haar_formula_against_brute_force_qr_projector() -> None:
    """Independent check: Haar basis from QR of a Gaussian (P, P) matrix (sign-fixed), P x P."""
    N, P, R = 3, 12, 6000
    rng = np.random.default_rng(5)
    samples = np.empty(R)
    mask = ~np.eye(P, dtype=bool)
    for k in range(R):
        Q, Rm = np.linalg.qr(rng.normal(size=(P, P)))
        Q = Q * np.sign(np.diag(Rm))  # Mezzadri's fix: Q is Haar on O(P)
        B = Q[:, :N]
        samples[k] = np.mean((B @ B.T)[mask] ** 2)
    exact = noise.haar_projector_offdiag_variance(N, P)
    z = (samples.mean() - exact) / (samples.std(ddof=1) / np.sqrt(R))
    report("Haar formula vs QR brute force (N=3, P=12)", f"z = {z:.2f}")
    assert abs(z) < 4.0
    # the closed form is exact, and vanishes at P = N (the projector is the identity)
    assert noise.haar_projector_offdiag_variance(7, 7) == 0.0
    np.testing.assert_allclose(
        noise.haar_projector_offdiag_variance(np.array([2, 4]), 10),
        [2 * 8 / (10 * 9 * 12), 4 * 6 / (10 * 9 * 12)],
        rtol=1e-15,
    )


def test_power_law_fit_recovers_exponents_exactly() -> None:
    Ns, Ps = np.meshgrid([10.0, 30.0, 90.0], np.geomspace(100, 1e4, 7), indexing="ij")
    values = 0.37 * Ps**-1.8 * Ns**1.3
    fit = noise.power_law_fit(Ps, Ns, values)
    assert (fit.a, fit.b, fit.c) == pytest.approx((-1.8, 1.3, 0.37), rel=1e-12)
    assert max(fit.a_se, fit.b_se, fit.c_se) < 1e-10  # noiseless data: zero residual
    with pytest.raises(ValueError, match="non-collinear"):
        noise.power_law_fit(Ps[0], Ns[0], values[0])  # a single N: b not identifiable


# ------------------------------------------------------ empirical noise covariance (Eq. 14)


def _replicate_estimates(data, w, S, sampling, n_rep, n_batches, seed):
    rng = np.random.default_rng(seed)
    out = [
        noise.empirical_noise_covariance(data.X, data.y, w, S, sampling, n_batches, rng)
        for _ in range(n_rep)
    ]
    return np.stack([c for c, _ in out]), np.array([s for _, s in out])


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_empirical_covariance_matches_eq17_at_wstar(sampling: str) -> None:
    """Mean of 16 independent estimates vs Eq. 17 (App. C prefactor), s.e. from their spread."""
    data = teacher_student(4, 9, SIGMA_EPS2, np.random.default_rng(7))
    w_star = theory.min_norm_solution(data.X, data.y)
    S, n_rep = 3, 16
    covs, trace_se = _replicate_estimates(data, w_star, S, sampling, n_rep, 4000, 21)
    C_th = theory.noise_covariance(data.X, data.y, S, sampling)
    mean = covs.mean(0)
    se = covs.std(0, ddof=1) / np.sqrt(n_rep)
    iu = np.triu_indices(4)
    z = ((mean - C_th) / se)[iu]
    report(f"Eq. 17 at w*, {sampling}: max |z| over 10 entries", f"{np.abs(z).max():.2f}")
    assert np.abs(z).max() < 4.5  # 10 numbers with ~16-sample s.e.: false alarm < 1e-3
    # the function's own batch-means trace s.e. agrees with the spread of the traces
    traces = np.trace(covs, axis1=1, axis2=2)
    ratio = np.mean(trace_se) / traces.std(ddof=1)
    report(f"trace s.e. (batch means) / replicate spread, {sampling}", f"{ratio:.2f}")
    assert 0.6 < ratio < 1.6  # the spread of 16 values is known to ~ +-18 % (1 s.d.)


def test_empirical_covariance_away_from_wstar_matches_eq14() -> None:
    """General w (multiplicative noise): Eq. 14 with the grad L grad L^T term."""
    data = teacher_student(3, 8, SIGMA_EPS2, np.random.default_rng(8))
    w = theory.min_norm_solution(data.X, data.y) + np.array([0.5, -0.3, 0.2])
    covs, _ = _replicate_estimates(data, w, 2, "without", 12, 3000, 22)
    C_th = theory.noise_covariance(data.X, data.y, 2, "without", w=w)
    z = ((covs.mean(0) - C_th) / (covs.std(0, ddof=1) / np.sqrt(12)))[np.triu_indices(3)]
    report("Eq. 14 at w != w*, without: max |z|", f"{np.abs(z).max():.2f}")
    assert np.abs(z).max() < 4.5


def test_without_replacement_batches_are_distinct_and_uniform() -> None:
    rng = np.random.default_rng(4)
    idx = noise._draw_batches(rng, 7, 3, 70_000, "without")
    assert all(len(set(row)) == 3 for row in idx[:2000])
    counts = np.bincount(idx.ravel(), minlength=7)
    expected = idx.size / 7
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < 30.0  # chi^2 with 6 d.o.f.: P(> 30) = 4e-5 (multinomial bound, conservative)
    full = noise._draw_batches(rng, 5, 5, 10, "without")
    assert (np.sort(full, axis=1) == np.arange(5)).all()


def test_sampling_is_validated() -> None:
    data = teacher_student(3, 6, SIGMA_EPS2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="sampling"):
        noise.empirical_noise_covariance(
            data.X, data.y, np.zeros(3), 2, "replace", 10, np.random.default_rng(0)
        )
    with pytest.raises(ValueError, match="batch_size"):
        noise.empirical_noise_covariance(
            data.X, data.y, np.zeros(3), 7, "without", 10, np.random.default_rng(0)
        )


# ------------------------------------------------------------- Hessian basis (Fig. 2c)


def test_hessian_basis_abs_is_diagonal_for_c_proportional_to_h() -> None:
    rng = np.random.default_rng(9)
    X = rng.normal(0, 1 / np.sqrt(6), (20, 6))
    H = theory.hessian(X)
    C = theory.hessian_noise_covariance(H, SIGMA_EPS2, 4)  # Eq. 20
    Ct = noise.hessian_basis_abs(H, C)
    np.testing.assert_allclose(
        np.diag(Ct), SIGMA_EPS2 / 4 * np.linalg.eigvalsh(H), rtol=1e-12
    )  # ascending order, like the eigenvalues of H
    assert np.abs(Ct - np.diag(np.diag(Ct))).max() < 1e-14 * Ct.max()


# ----------------------------------------------------------------- dataset builders


def test_builders_carry_attrs_and_stack() -> None:
    """Builders give one cell each (no N, P dims) that stack along ``cell`` with NaN padding."""
    rng = np.random.default_rng(1)
    proj = io.stack_cells(
        [noise.projector_dataset(N, P, 3, rng) for N in (2, 4) for P in (6, 10)],
        {"N": ([2, 2, 4, 4], {}), "P": ([6, 10, 6, 10], {})},
    )
    assert dict(proj.sizes) == {"cell": 4, "realisation": 3}
    data = [teacher_student(4, P, SIGMA_EPS2, rng) for P in (6, 12)]
    k = io.stack_cells(
        [noise.k_diagonal_dataset(d.X, d.y, rng, SIGMA_EPS2) for d in data],
        {"P": ([6, 12], {})},
    )
    assert np.isnan(k["PK_sorted"].isel(cell=0, rank=8))
    spec = io.stack_cells(
        [noise.noise_spectrum_dataset(d.X, d.y, 2, "with", 200, rng, SIGMA_EPS2) for d in data],
        {"P": ([6, 12], {})},
    )
    hb = noise.hessian_basis_mean([noise.hessian_basis_dataset(d.X, d.y, 2, "with") for d in data])
    for dset in (proj, k, spec, hb):
        for name, var in dset.data_vars.items():
            assert {"long_name", "units", "source"} <= set(var.attrs), name
            assert "paper 000" in var.attrs["source"], name
    assert float(spec["C_norm"].isel(cell=1)) == pytest.approx(SIGMA_EPS2 / (4 * 2))


def test_interpolating_cells_are_flagged_not_refused() -> None:
    """P <= N: the projector is the identity and K = C = 0 (Eq. 16): flag 1, values NaN."""
    rng = np.random.default_rng(2)
    proj = noise.projector_dataset(6, 6, 3, rng)
    assert int(proj["interpolating"]) == 1 and np.isnan(proj["var_offdiag"]).all()
    data = teacher_student(6, 4, SIGMA_EPS2, rng)
    cells = (
        noise.k_diagonal_dataset(data.X, data.y, rng, SIGMA_EPS2),
        noise.noise_spectrum_dataset(data.X, data.y, 2, "without", 100, rng, SIGMA_EPS2),
        noise.hessian_basis_dataset(data.X, data.y, 2, "with"),
    )
    for cell in cells:
        assert int(cell["interpolating"]) == 1
        flagged = [v for v in cell.data_vars if v not in ("interpolating", "C_norm")]
        assert all(np.isnan(cell[v]).all() for v in flagged)
    regular = noise.projector_dataset(3, 8, 3, rng)
    assert int(regular["interpolating"]) == 0 and np.isfinite(regular["var_offdiag"]).all()


def test_hessian_basis_mean_over_realisations() -> None:
    """Mean and standard error of |V^T C V| over data sets; one data set: NaN error."""
    rng = np.random.default_rng(6)
    cells = []
    for _ in range(3):
        d = teacher_student(4, 9, SIGMA_EPS2, rng)
        cells.append(noise.hessian_basis_dataset(d.X, d.y, 3, "with"))
    mats = np.stack([c["C_tilde"].values for c in cells])
    mean = noise.hessian_basis_mean(cells)
    np.testing.assert_array_equal(mean["C_tilde"].values, mats.mean(axis=0))
    np.testing.assert_array_equal(mean["C_tilde_se"].values, mats.std(0, ddof=1) / np.sqrt(3))
    assert int(mean["n_realisations"]) == 3
    assert np.isnan(noise.hessian_basis_mean(cells[:1])["C_tilde_se"]).all()


# ------------------------------------------------------------ acceptance check (slow)

ACCEPTANCE_P_OVER_N = (1.1, 2, 50)


@pytest.mark.slow
def test_acceptance_empirical_noise_matches_eq17_and_eq20_limit() -> None:
    """4e5 mini-batches at w*, N = 100, S = 10, sigma_eps^2 = 0.25, both samplings.

    Data are the workflow's data sets (:mod:`weightdyn.single_layer.teacher_student`, data_seed
    0). Thresholds from the issue: median relative eigenvalue error <= 0.6 %, max <= 2.5 %,
    relative Frobenius error <= 4 %, trace within 0.5 %. Eq. 20 misses tr C (Eq. 17) by about
    P / (P - N) = 11x at P/N = 1.1 and approaches it as P/N grows. The ratio is 11 times
    sigma_eps^2 (P - N) / |r|^2 for the residual r at w*, which spreads as 10 / chi^2_10 over
    data sets (9.5x on this one); > 5x fails for fewer than 2 % of them.
    """
    N, S, n_batches = 100, 10, 400_000
    tr_ratio = {}
    for ratio in ACCEPTANCE_P_OVER_N:
        P = round(ratio * N)
        cell = {"N": N, "P": P, "sigma_eps2": SIGMA_EPS2, "data_seed": 0}
        data = shared_data.load(shared_data.make({**cell, "n_test": 1000}))
        w_star = theory.min_norm_solution(data.X, data.y)
        C20 = theory.hessian_noise_covariance(theory.hessian(data.X), SIGMA_EPS2, S)
        for sampling in ("with", "without"):
            rng = seeds.generator("test/noise", {**cell, "sampling": sampling})
            start = time.perf_counter()
            C, trace_se = noise.empirical_noise_covariance(
                data.X, data.y, w_star, S, sampling, n_batches, rng
            )
            seconds = time.perf_counter() - start
            C17 = theory.noise_covariance(data.X, data.y, S, sampling)
            err = np.abs(theory.sorted_eigenvalues(C) / theory.sorted_eigenvalues(C17) - 1)
            frob = np.linalg.norm(C - C17) / np.linalg.norm(C17)
            tr = np.trace(C) / np.trace(C17) - 1
            report(
                f"P/N={ratio}, {sampling} ({seconds:.1f} s)",
                f"eig median {np.median(err):.4f}, max {err.max():.4f}, Frobenius {frob:.4f}, "
                f"trace {tr:+.4f} (s.e. {trace_se / np.trace(C17):.4f})",
            )
            assert np.median(err) <= 0.006
            assert err.max() <= 0.025
            assert frob <= 0.04
            assert abs(tr) <= 0.005
            if sampling == "with":
                tr_ratio[ratio] = np.trace(C20) / np.trace(C17)
    report("tr(Eq. 20) / tr(Eq. 17) by P/N", {r: round(float(v), 3) for r, v in tr_ratio.items()})
    assert tr_ratio[1.1] > 5.0
    gaps = [abs(tr_ratio[r] - 1) for r in ACCEPTANCE_P_OVER_N]
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 0.05  # ~ N / P = 2 % expected, data-set spread ~ 2 %
