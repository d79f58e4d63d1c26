"""IVFR measurement layer (weightdyn.flatness): Feng & Tu's flatness and psi, paper 000's slope
(Eq. 73, Fig. 7a), and their jackknife errors."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import stats as sps
from scipy.linalg import expm

from weightdyn.flatness import (
    Flatness,
    covariance_from_moments,
    curvature,
    flatness,
    group_moments,
    ivfr_measurement,
    power_law_exponent,
    principal_fluctuations,
    profile_width,
    quadratic_width,
)

E1 = math.e - 1.0


def report(name: str, value: object) -> None:
    print(f"\n[flatness] {name}: {value}")


# ------------------------------------------------------------------ 1-3: single profiles


@pytest.mark.parametrize(("L0", "kappa"), [(1.0, 1.0), (0.37, 25.0), (3.0, 1e-3)])
def test_quadratic_profile_width(L0: float, kappa: float) -> None:
    w = profile_width(lambda s: L0 + 0.5 * kappa * s * s, s_max=1e4, s0=1e-3)
    expected = 2.0 * math.sqrt(2.0 * E1 * L0 / kappa)
    assert w.reached and w.reason == ""
    assert w.width == pytest.approx(expected, rel=1e-10)
    assert quadratic_width(L0, kappa) == pytest.approx(expected, rel=1e-15)
    assert w.minus == pytest.approx(-expected / 2, rel=1e-10)
    assert w.plus == pytest.approx(expected / 2, rel=1e-10)
    assert w.level == pytest.approx(math.e * L0)


def test_asymmetric_profile_is_the_sum_of_half_widths() -> None:
    L0, k_minus, k_plus = 0.8, 9.0, 0.25

    def loss(s: float) -> float:
        return L0 + 0.5 * (k_plus if s > 0 else k_minus) * s * s

    w = profile_width(loss, s_max=100.0, s0=1e-2)
    half_minus, half_plus = (math.sqrt(2.0 * E1 * L0 / k) for k in (k_minus, k_plus))
    assert w.minus == pytest.approx(-half_minus, rel=1e-10)
    assert w.plus == pytest.approx(half_plus, rel=1e-10)
    assert w.width == pytest.approx(half_minus + half_plus, rel=1e-10)
    # s0 beyond the crossing (bracket [0, s0]) gives the same width
    assert profile_width(loss, s_max=100.0, s0=50.0).width == pytest.approx(w.width, rel=1e-10)


def test_flatness_along_directions_of_a_quadratic_loss() -> None:
    """flatness() along random unit directions of L0 + x^T H x / 2 is quadratic_width(L0,
    p^T H p); curvature() from H and from a Hessian-vector product agree."""
    rng = np.random.default_rng(1)
    d, L0 = 6, 0.5
    A = rng.normal(size=(d, d))
    H = A @ A.T + 0.1 * np.eye(d)
    P = rng.normal(size=(d, 4))
    P /= np.linalg.norm(P, axis=0)

    def loss(x: np.ndarray) -> float:
        return L0 + 0.5 * x @ H @ x

    kappa = curvature(H, P)
    np.testing.assert_allclose(curvature(lambda v: H @ v, P), kappa, rtol=1e-13)
    f = flatness(loss, np.zeros(d), P, s_max=1e3, s0=1e-2)
    assert f.reached.all() and f.loss0 == L0
    np.testing.assert_allclose(f.width, quadratic_width(L0, kappa), rtol=1e-10)
    with pytest.raises(ValueError, match="unit"):
        flatness(loss, np.zeros(d), 2 * P, s_max=1.0)
    with pytest.raises(ValueError, match="L0 > 0"):
        profile_width(lambda s: s * s, s_max=1.0)


def test_quartic_profile_width() -> None:
    L0, c = 0.6, 40.0
    w = profile_width(lambda s: L0 + c * s**4, s_max=10.0, s0=1e-4)
    assert w.width == pytest.approx(2.0 * (E1 * L0 / c) ** 0.25, rel=1e-10)


def test_infinite_loss_beyond_the_crossing_still_brackets_it() -> None:
    """L0 / (1 - s^2), infinite for |s| >= 1 (a step lands there): crossing at
    sqrt(1 - 1/e)."""
    w = profile_width(lambda s: 1.0 / (1.0 - s * s) if abs(s) < 1 else math.inf, s_max=8.0, s0=0.3)
    assert w.width == pytest.approx(2.0 * math.sqrt(1.0 - 1.0 / math.e), rel=1e-10)


def test_profile_not_reaching_the_level_is_reported() -> None:
    L0 = 1.0

    def saturating(s: float) -> float:  # tops out at L0 (1 + (e - 1) / 2) < e L0
        return L0 * (1.0 + 0.5 * E1 * math.tanh(s * s))

    w = profile_width(saturating, s_max=50.0)
    assert not w.reached_minus and not w.reached_plus and not w.reached
    assert math.isnan(w.width) and math.isnan(w.minus) and math.isnan(w.plus)
    assert "minus side does not reach" in w.reason and "plus side does not reach" in w.reason
    assert "s_max = 50" in w.reason

    def one_sided(s: float) -> float:
        return saturating(s) if s < 0 else L0 + 2.0 * s * s

    w = profile_width(one_sided, s_max=50.0)
    assert w.reached_plus and not w.reached_minus
    assert w.plus == pytest.approx(math.sqrt(E1 * L0 / 2.0), rel=1e-10)
    assert math.isnan(w.width) and w.reason.startswith("minus side does not reach")
    w = profile_width(lambda s: math.nan if s > 0.1 else L0, s_max=1.0)
    assert "loss is NaN" in w.reason and math.isnan(w.width)
    # NaN between the grid points 0.8 and 1.6 (bracket), met by brentq
    w = profile_width(lambda s: math.nan if 0.85 < s < 1.3 else L0 + s * s, s_max=2.0, s0=0.4)
    assert w.reason.startswith("plus side: loss is NaN at s = 1.") and w.reached_minus

    # in a set of directions it is kept, with its reason, not dropped
    f = Flatness.from_widths([profile_width(g, s_max=50.0) for g in (one_sided, saturating)])
    assert f.width.shape == (2,) and np.isnan(f.width).all()
    assert f.reached_plus.tolist() == [True, False] and "minus side" in f.reasons[0]


# ------------------------------------------------------------------ 4-5: PCA, psi, jackknife

D = 10
PSI = 1.5
L0 = 1.0
#: widths of the true principal directions (mode 0: largest variance, sharpest)
F_TRUE = np.geomspace(1.0, 10.0, D)
VAR_TRUE = 0.01 * F_TRUE**-PSI
#: curvatures that give the quadratic loss these widths: F = 2 sqrt(2 (e - 1) L0 / kappa)
KAPPA_TRUE = 8.0 * E1 * L0 / F_TRUE**2


def synthetic(rng: np.random.Generator, n_groups: int = 20, per_group: int = 100):
    """Gaussian weight samples with principal directions Q (random orthogonal), variances
    VAR_TRUE ~ F^-PSI, and the quadratic loss L0 + x^T H x / 2 with H = Q diag(KAPPA_TRUE) Q^T
    sharing Q, so the widths along Q are F_TRUE and sigma^2 ~ F^-PSI exactly."""
    Q = np.linalg.qr(rng.normal(size=(D, D)))[0]
    x = rng.normal(size=(n_groups, per_group, D)) * np.sqrt(VAR_TRUE) @ Q.T
    H = Q @ np.diag(KAPPA_TRUE) @ Q.T
    return x, H


def quadratic_loss(H: np.ndarray):
    def loss(x: np.ndarray) -> float:
        return L0 + 0.5 * x @ H @ x

    return loss


def closed_form_flatness(H: np.ndarray, P: np.ndarray) -> Flatness:
    """The Flatness brentq finds for L0 + x^T H x / 2 (equal to 1e-10: tests above), without
    the root finding: for the many leave-one-out profiles of the calibration test."""
    w = np.asarray(quadratic_width(L0, curvature(H, P)))
    n = w.size
    ok = np.ones(n, dtype=bool)
    return Flatness(-w / 2, w / 2, w, ok, ok, ("",) * n, L0, math.e, math.inf, 0)


def second_order_psi(n_samples: int) -> float:
    """psi fitted to the second-order expectations of the sample eigenvalues and of the
    curvatures along the sample directions (N Gaussian samples): in the eigenbasis of the
    true covariance E[dC_ij^2] = lam_i lam_j / N (i != j), so

        E[lam^_i] - lam_i = sum_(j != i) lam_i lam_j / (N (lam_i - lam_j))  (level repulsion),
        E[(p^_i . q_j)^2] = lam_i lam_j / (N (lam_i - lam_j)^2), hence
        E[kappa^_i] - kappa_i = sum_(j != i) lam_i lam_j (kappa_j - kappa_i) / (N (lam_i - lam_j)^2)

    (the estimated direction mixes in the neighbouring modes' curvature). The first spreads
    the variances apart, the second draws the widths together, so psi comes out high at O(1/N).
    Uniform factors (the 1/N normalisation, E[log] against log E) do not change psi."""
    lam, k = VAR_TRUE, KAPPA_TRUE
    dlam, dk = np.zeros(D), np.zeros(D)
    for i in range(D):
        for j in range(D):
            if j != i:
                dlam[i] += lam[i] * lam[j] / (lam[i] - lam[j]) / n_samples
                dk[i] += lam[i] * lam[j] * (k[j] - k[i]) / (lam[i] - lam[j]) ** 2 / n_samples
    return power_law_exponent(lam + dlam, quadratic_width(L0, k + dk))[0]


def test_pca_and_moments_helpers() -> None:
    rng = np.random.default_rng(5)
    x, _ = synthetic(rng, n_groups=3, per_group=50)
    pooled = x.reshape(-1, D)
    cov = covariance_from_moments(group_moments(x).mean(axis=0))
    np.testing.assert_allclose(cov, np.cov(pooled.T, bias=True), rtol=1e-12, atol=1e-16)
    var, P = principal_fluctuations(cov)
    assert np.all(np.diff(var) <= 0)
    np.testing.assert_allclose(P.T @ P, np.eye(D), atol=1e-12)
    np.testing.assert_allclose(P @ np.diag(var) @ P.T, cov, atol=1e-15)


@pytest.mark.parametrize("redo_profiles", [False, True])
def test_psi_recovered_from_synthetic_samples(redo_profiles: bool) -> None:
    """PCA of sampled fluctuations + brentq widths along the estimated directions recover
    psi = 1.5 and paper 000's slope 2 / psi within 3 jackknife s.e."""
    x, H = synthetic(np.random.default_rng(7))
    m = ivfr_measurement(
        group_moments(x),
        kind="moments",
        flatness_along=functools.partial(
            flatness, quadratic_loss(H), np.zeros(D), s_max=100.0, s0=0.05
        ),
        curvature_along=functools.partial(curvature, H),
        redo_profiles=redo_profiles,
    )
    report(f"redo_profiles={redo_profiles}", m.summary())
    assert m.psi_fit is not None and m.slope_fit is not None
    assert m.psi_fit.n_used == D and m.psi_fit.excluded == {} and m.psi_fit.n_loo_changed == 0
    assert abs(m.psi - PSI) < 3 * m.psi_se, (m.psi, m.psi_se)
    assert abs(m.slope - 2 / PSI) < 3 * m.slope_se, (m.slope, m.slope_se)
    # the widths are the quadratic ones along the estimated directions
    np.testing.assert_allclose(m.flatness.width, quadratic_width(L0, m.curvature), rtol=1e-10)
    # each variance within its jackknife s.e. of the truth: a z-score with a jackknife s.e. from
    # 20 groups is about t-distributed with 19 dof; all D of them at the two-sided 1e-3 level
    # (Bonferroni over the modes). The O(1/N) level repulsion shifts them by < 0.4 s.e.
    z = (m.variance - VAR_TRUE) / m.variance_se
    bound = sps.t.ppf(1 - 1e-3 / (2 * D), df=m.n_groups - 1)
    report("variance z-scores", f"{np.round(z, 2)}, bound {bound:.2f}")
    assert np.all(np.abs(z) < bound)
    # the psi fit of the full-sample numbers is what the measurement reports
    psi, _ = power_law_exponent(m.variance, m.flatness.width)
    assert psi == pytest.approx(m.psi, rel=1e-12)


def test_excluded_modes_are_reported() -> None:
    """A caller's mask (mode 1) and a profile that does not reach e L0 within s_max (mode 9:
    half-width 5 > s_max = 4) are excluded with their reasons; the rest still gives psi."""
    x, H = synthetic(np.random.default_rng(11))
    resolved = np.ones(D, dtype=bool)
    resolved[1] = False
    m = ivfr_measurement(
        group_moments(x),
        kind="moments",
        flatness_along=functools.partial(
            flatness, quadratic_loss(H), np.zeros(D), s_max=4.0, s0=0.05
        ),
        curvature_along=functools.partial(curvature, H),
        resolved=resolved,
    )
    report("exclusions", m.summary())
    psi_fit, slope_fit = m.psi_fit, m.slope_fit
    assert psi_fit is not None and slope_fit is not None
    assert sorted(psi_fit.excluded) == [1, 9] and psi_fit.n_total == D and psi_fit.n_used == D - 2
    assert psi_fit.excluded[1].startswith("unresolved")
    assert "does not reach the level within s_max = 4" in psi_fit.excluded[9]
    assert psi_fit.modes.tolist() == [0, *range(2, 9)]
    assert "over 8 of 10 modes (0, 2-8)" in psi_fit.summary()
    assert math.isnan(m.flatness.width[9]) and not m.flatness.reached[9]
    assert sorted(slope_fit.excluded) == [1] and slope_fit.n_used == D - 1
    assert abs(m.psi - PSI) < 3 * m.psi_se


def calibration(name: str, est: np.ndarray, se: np.ndarray, alpha: float = 1e-3):
    """(mean(se^2) / s^2, band): the jackknife's variance against the sample variance s^2 of n
    independent estimates, and the band it lies in with probability about 1 - alpha if the
    jackknife is calibrated.

    Band: if calibrated, E[se^2] = var(estimate) = sigma^2. The sample variance s^2 of n
    independent (close to normal) estimates has (n - 1) s^2 / sigma^2 ~ chi^2_(n-1), so
    mean(se^2) / s^2 lies in [(n-1) / chi2_(n-1)(1 - a/2), (n-1) / chi2_(n-1)(a/2)] with
    probability 1 - a. mean(se^2) is itself a mean of n values: its own z_(1-a/2) standard
    errors widen the band on either side.
    """
    n = est.size
    z = sps.norm.ppf(1 - alpha / 2)
    se2 = se * se
    spread2, mean_se2 = est.var(ddof=1), se2.mean()
    rel = z * se2.std(ddof=1) / math.sqrt(n) / mean_se2
    lo = (n - 1) / sps.chi2.ppf(1 - alpha / 2, n - 1) * (1 - rel)
    hi = (n - 1) / sps.chi2.ppf(alpha / 2, n - 1) * (1 + rel)
    ratio2 = mean_se2 / spread2
    report(
        name,
        f"mean {est.mean():.4f}, spread {math.sqrt(spread2):.4f}, rms jackknife s.e. "
        f"{math.sqrt(mean_se2):.4f}, ratio se/spread {math.sqrt(ratio2):.3f} "
        f"(band {math.sqrt(lo):.3f}-{math.sqrt(hi):.3f}, n = {n})",
    )
    return ratio2, (lo, hi)


def test_jackknife_error_matches_spread_over_repetitions() -> None:
    """The jackknife s.e. of psi (and of the slope) agrees with the spread of the estimates
    over 200 independent repetitions (band: :func:`calibration`, 1e-3 level), for profiles
    along the full-sample directions (brentq) and for profiles redone on every leave-one-out
    set (closed-form widths, for speed). The Hessian shares the covariance's eigenvectors, so
    the fixed profiles miss only a second-order error (the next test breaks that)."""
    n_rep = 200
    names = ("psi fixed", "slope fixed", "psi redo")
    est = {k: np.empty(n_rep) for k in names}
    se = {k: np.empty(n_rep) for k in names}
    for r in range(n_rep):
        x, H = synthetic(np.random.default_rng(1000 + r))
        mom = group_moments(x)
        fixed = ivfr_measurement(
            mom,
            kind="moments",
            flatness_along=functools.partial(
                flatness, quadratic_loss(H), np.zeros(D), s_max=100.0, s0=0.05
            ),
            curvature_along=functools.partial(curvature, H),
        )
        redo = ivfr_measurement(
            mom,
            kind="moments",
            flatness_along=functools.partial(closed_form_flatness, H),
            redo_profiles=True,
        )
        for k, (v, s) in {
            "psi fixed": (fixed.psi, fixed.psi_se),
            "slope fixed": (fixed.slope, fixed.slope_se),
            "psi redo": (redo.psi, redo.psi_se),
        }.items():
            est[k][r], se[k][r] = v, s
    for k in names:
        ratio2, (lo, hi) = calibration(k, est[k], se[k])
        assert lo < ratio2 < hi, (k, ratio2)
    # psi is biased at O(1/N): its mean over the repetitions is the second-order prediction
    # within z_(1 - 5e-4) = 3.3 of its standard errors (and it differs from PSI by about 0.4
    # s.e. of one psi)
    predicted = second_order_psi(n_samples=20 * 100)
    mean_se = est["psi fixed"].std(ddof=1) / math.sqrt(n_rep)
    report("psi bias", f"mean - PSI = {est['psi fixed'].mean() - PSI:.4f} +- {mean_se:.4f}, "
           f"second order {predicted - PSI:.4f}")  # fmt: skip
    assert abs(est["psi fixed"].mean() - predicted) < sps.norm.ppf(1 - 5e-4) * mean_se


def test_fixed_profiles_miss_the_direction_error_when_the_hessian_is_rotated() -> None:
    """With the Hessian's eigenvectors rotated away from the covariance's (H = R diag(kappa)
    R^T, R = Q expm(0.3 A), A antisymmetric, fixed over the repetitions), the curvature along
    an estimated direction changes at first order with the direction: the profiles redone on
    every leave-one-out set give a calibrated s.e., those held at the full sample's directions
    an s.e. that is too small (below the same band), as ivfr_measurement's docstring says."""
    rng = np.random.default_rng(3)
    Q = np.linalg.qr(rng.normal(size=(D, D)))[0]
    A = rng.normal(size=(D, D))
    R = Q @ expm(0.3 * (A - A.T) / 2)
    H = R @ np.diag(KAPPA_TRUE) @ R.T
    n_rep = 200
    est, se = np.empty((2, n_rep)), np.empty((2, n_rep))
    for r in range(n_rep):
        x = np.random.default_rng(2000 + r).normal(size=(20, 100, D)) * np.sqrt(VAR_TRUE) @ Q.T
        for j, redo in enumerate((False, True)):
            m = ivfr_measurement(
                group_moments(x),
                kind="moments",
                flatness_along=functools.partial(closed_form_flatness, H),
                redo_profiles=redo,
            )
            est[j, r], se[j, r] = m.psi, m.psi_se
    ratio2, (lo, hi) = calibration("rotated H, psi redo", est[1], se[1])
    assert lo < ratio2 < hi
    ratio2, (lo, hi) = calibration("rotated H, psi fixed", est[0], se[0])
    assert ratio2 < lo
