"""Tests for weightdyn.stats (generic statistics helpers)."""

from __future__ import annotations

import numpy as np
import pytest

from weightdyn.stats import (
    eigenvalues_with_se,
    group_covariances,
    integrated_autocorrelation_time,
    jackknife,
    jackknife_bias_corrected,
    jackknife_of_mean,
    line_fit,
    mean_with_se,
    power_law_fit,
)


def test_jackknife_se_of_mean_equals_classical():
    x = np.random.default_rng(0).standard_normal((25, 3))
    m, se = mean_with_se(x)
    np.testing.assert_allclose(se, x.std(axis=0, ddof=1) / 5.0)
    est, jse = jackknife(lambda g: g.mean(axis=0), x)
    np.testing.assert_allclose(est, m, rtol=1e-14)
    np.testing.assert_allclose(jse, se, rtol=1e-12)
    est2, jse2 = jackknife_of_mean(lambda m: m, x)
    np.testing.assert_allclose(est2, m, rtol=1e-14)
    np.testing.assert_allclose(jse2, se, rtol=1e-12)


def test_jackknife_nonlinear_agrees_with_fast_version():
    x = np.random.default_rng(1).standard_normal((12, 2)) + 3.0
    slow = jackknife(lambda g: g.mean(axis=0) ** 2, x)
    fast = jackknife_of_mean(lambda m: m**2, x)
    np.testing.assert_allclose(slow[0], fast[0], rtol=1e-13)
    np.testing.assert_allclose(slow[1], fast[1], rtol=1e-12)


def test_jackknife_needs_two_groups():
    with pytest.raises(ValueError):
        jackknife(lambda g: g.mean(axis=0), np.ones((1, 2)))
    with pytest.raises(ValueError):
        mean_with_se(np.ones(1))


def _wishart_groups(rng, true_cov, G, n):
    L = np.linalg.cholesky(true_cov)
    z = rng.standard_normal((G, n, len(true_cov))) @ L.T
    return np.einsum("gni,gnj->gij", z, z) / n


def test_eigenvalues_with_se_wishart():
    rng = np.random.default_rng(2)
    Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    lam = np.array([4.0, 1.5, 0.5])
    true_cov = (Q * lam) @ Q.T
    ests, ses = [], []
    for _ in range(150):
        covs = _wishart_groups(rng, true_cov, G=20, n=50)
        e, se = eigenvalues_with_se(covs)
        assert np.all(np.diff(e) <= 0)
        ests.append(e)
        ses.append(se)
    ests, ses = np.array(ests), np.array(ses)
    spread = ests.std(axis=0, ddof=1)
    # jackknife SE is a consistent estimate of the sampling spread of the eigenvalues
    np.testing.assert_allclose(ses.mean(axis=0), spread, rtol=0.25)
    # unbiased to within the (small) eigenvalue-repulsion bias; check against truth
    np.testing.assert_allclose(ests.mean(axis=0), lam, rtol=0.03)
    # single-run coverage: most runs lie within 3 SE
    assert np.mean(np.abs(ests - lam) < 3 * ses) > 0.95


def test_group_covariances_direct():
    rng = np.random.default_rng(3)
    G, n, N = 4, 200, 3
    ref = np.array([0.5, -1.0, 2.0])
    w = rng.standard_normal((G, n, N)) + ref + 0.3
    dw = w - ref
    s1 = dw.sum(axis=1)
    s2 = np.einsum("gni,gnj->gij", dw, dw)
    nr = np.full(G, n)
    c_mean = group_covariances(s1, s2, nr, about="mean")
    c_ref = group_covariances(s1, s2, nr, about="reference")
    for g in range(G):
        np.testing.assert_allclose(c_mean[g], np.cov(w[g].T, bias=True), rtol=1e-12)
        np.testing.assert_allclose(c_ref[g], dw[g].T @ dw[g] / n, rtol=1e-12)
    with pytest.raises(ValueError, match="about"):
        group_covariances(s1, s2, nr, about="median")


def test_integrated_autocorrelation_time_ar1():
    rng = np.random.default_rng(4)
    phi, T = 0.8, 200_000
    e = rng.standard_normal(T)
    x = np.empty(T)
    x[0] = e[0]
    for t in range(1, T):
        x[t] = phi * x[t - 1] + e[t]
    tau = integrated_autocorrelation_time(x)
    assert abs(tau - (1 + phi) / (1 - phi)) < 0.1 * 9.0
    taus = integrated_autocorrelation_time(np.stack([x, rng.standard_normal(T)], axis=1))
    assert taus.shape == (2,)
    assert abs(taus[1] - 1.0) < 0.1
    assert integrated_autocorrelation_time(np.ones(10)) == 1.0


def test_line_fit_matches_polyfit_and_its_covariance() -> None:
    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 2.0, 12)
    y = 0.5 - 1.5 * x + 0.1 * rng.standard_normal(x.size)
    fit = line_fit(x, y)
    coef, cov = np.polyfit(x, y, 1, cov=True)
    np.testing.assert_allclose([fit.slope, fit.intercept], coef, rtol=1e-12)
    np.testing.assert_allclose(fit.slope_se, np.sqrt(cov[0, 0]), rtol=1e-10)
    sigma = np.full(x.size, 0.1)
    weighted = line_fit(x, y, sigma)
    _, unscaled = np.polyfit(x, y, 1, w=1 / sigma, cov="unscaled")
    inflation = max(1.0, weighted.chi2_dof)
    np.testing.assert_allclose(weighted.slope_se, np.sqrt(unscaled[0, 0] * inflation), rtol=1e-10)


def test_power_law_fit_recovers_an_exact_power_law() -> None:
    x = np.array([1.0, 2.0, 4.0, 8.0])
    fit = power_law_fit(x, 3.0 * x**-2.0)
    assert fit.slope == pytest.approx(-2.0, abs=1e-12) and fit.slope_se < 1e-12
    assert np.exp(fit.intercept) == pytest.approx(3.0, rel=1e-12)
    weighted = power_law_fit(x, 3.0 * x**-2.0, se=0.01 * 3.0 * x**-2.0)
    assert weighted.slope == pytest.approx(-2.0, abs=1e-12)


def test_bias_corrected_jackknife_is_unbiased_for_a_quadratic_function_of_the_mean() -> None:
    """|mean|^2 of k groups is biased by tr Var / k; the corrected estimate is not."""
    rng = np.random.default_rng(3)
    mu = np.array([0.3, -0.2])
    plain, corrected = [], []
    for _ in range(4000):
        groups = mu + rng.normal(size=(8, 2))
        plain.append(np.sum(groups.mean(axis=0) ** 2))
        corrected.append(jackknife_bias_corrected(lambda m: np.sum(m**2), groups)[0])
    exact = float(mu @ mu)
    se = np.std(corrected) / np.sqrt(len(corrected))
    assert abs(np.mean(corrected) - exact) < 3 * se
    assert np.mean(plain) - exact > 10 * se  # the bias 2/8 = 0.25 is removed
