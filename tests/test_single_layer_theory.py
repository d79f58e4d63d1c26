"""Tests for weightdyn.single_layer.theory (paper 000, Section II and Appendix C).

Measured errors are printed (run with ``pytest -s``) so they can be quoted.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.linalg import solve_continuous_lyapunov

from weightdyn.single_layer import theory as th

LR = 0.1
SIGMA_EPS2 = 0.25


def make_data(
    N: int, P: int, sigma_eps2: float = SIGMA_EPS2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x ~ N(0, 1/N), teacher u ~ N(0, 1), y = X u + eps, eps ~ N(0, sigma_eps2)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(0.0, np.sqrt(1.0 / N), size=(P, N))
    u = rng.normal(0.0, 1.0, size=N)
    eps = rng.normal(0.0, np.sqrt(sigma_eps2), size=P)
    return X, X @ u + eps, u, eps


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """Relative Frobenius error ||a - b|| / ||b||."""
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(b))


def report(name: str, value: float) -> None:
    print(f"\n[theory] {name}: {value:.3e}")


# ----------------------------------------------------------------- Lyapunov / Eq. 30


@pytest.mark.parametrize(("N", "P"), [(20, 40), (20, 21)])
def test_eq30_solves_lyapunov(N: int, P: int) -> None:
    X, y, _, _ = make_data(N, P, seed=1)
    H = th.hessian(X)
    C = th.noise_covariance(X, y, batch_size=5)
    M = th.stationary_covariance(H, C, LR)
    M_ref = solve_continuous_lyapunov(H, LR * C)
    err = rel(M, M_ref)
    resid = rel(H @ M + M @ H, LR * C)
    report(f"Eq.30 vs scipy Lyapunov (N={N}, P={P})", err)
    report(f"Eq.29 residual ||HM+MH-lrC||/||lrC|| (N={N}, P={P})", resid)
    assert err <= 1e-10
    assert resid <= 1e-12
    np.testing.assert_array_equal(M, M.T)


def test_circulation_antisymmetric_and_eq30_literal_form() -> None:
    X, y, _, _ = make_data(20, 40, seed=2)
    H = th.hessian(X)
    C = th.noise_covariance(X, y, batch_size=5)
    Q = th.circulation(H, C)
    anti = float(np.linalg.norm(Q + Q.T) / np.linalg.norm(Q))
    report("Q antisymmetry ||Q+Q^T||/||Q||", anti)
    assert anti <= 1e-10
    # Q is not trivially zero for finite P (broken detailed balance).
    assert np.linalg.norm(Q) > 1e-3 * np.linalg.norm(C)
    M_lit = 0.5 * LR * np.linalg.inv(H) @ (C + Q)  # Eq. 30 written literally
    err = rel(th.stationary_covariance(H, C, LR), M_lit)
    report("Eq.30 eigenbasis vs lr/2 H^-1 (C+Q)", err)
    assert err <= 1e-10


# ------------------------------------------------------------ noise covariance (C)


def brute_force_cov(
    X: np.ndarray, y: np.ndarray, w: np.ndarray, S: int, sampling: str
) -> np.ndarray:
    """Exact covariance of grad L_B over all equally likely mini-batches."""
    P = X.shape[0]
    g = (X @ w - y)[:, None] * X  # per-sample gradients, (P, N)
    if sampling == "with":
        batches = list(itertools.product(range(P), repeat=S))
    else:
        batches = list(itertools.combinations(range(P), S))
    GB = np.array([g[list(b)].mean(axis=0) for b in batches])
    D = GB - GB.mean(axis=0)
    return D.T @ D / len(batches)


@pytest.mark.parametrize("sampling", ["with", "without"])
@pytest.mark.parametrize("S", [2, 3])
@pytest.mark.parametrize("at_optimum", [True, False])
def test_noise_covariance_matches_enumeration(sampling: str, S: int, at_optimum: bool) -> None:
    N, P = 3, 6
    X, y, _, _ = make_data(N, P, sigma_eps2=0.5, seed=3)
    w_star = th.min_norm_solution(X, y)
    if at_optimum:
        w = w_star
        C = th.noise_covariance(X, y, S, sampling)  # Eq. 17 (K form)
    else:
        w = w_star + np.array([0.7, -1.1, 0.4])
        C = th.noise_covariance(X, y, S, sampling, w=w)  # Eq. 14
    C_ref = brute_force_cov(X, y, w, S, sampling)
    err = rel(C, C_ref)
    where = "w*" if at_optimum else "w!=w*"
    report(f"C vs enumeration ({sampling}, S={S}, {where})", err)
    assert err <= 1e-12


def test_eq17_equals_eq14_at_optimum_and_K_normalisation() -> None:
    X, y, _, eps = make_data(10, 30, seed=4)
    S = 4
    w_star = th.min_norm_solution(X, y)
    C17 = th.noise_covariance(X, y, S)
    C14 = th.noise_covariance(X, y, S, w=w_star)
    K = th.sample_weights_K(X, y)
    C_K = X.T @ np.diag(K) @ X / S  # Eq. 17: C = (1/S) X_p K X_p^T
    # Eq. 18 literally, in the paper's orientation (X_p = X.T), with eps not y.
    Xp = X.T
    P = X.shape[0]
    Hp = np.linalg.pinv(Xp @ Xp.T / P)
    K18 = ((eps @ Xp.T @ Hp @ Xp / P - eps) ** 2) / P
    e1, e2, e3 = rel(C17, C14), rel(C17, C_K), rel(K, K18)
    report("Eq.17 vs Eq.14 at w*", e1)
    report("Eq.17 vs X^T diag(K) X / S", e2)
    report("K(y) vs Eq.18 literal with eps", e3)
    assert e1 <= 1e-12
    assert e2 <= 1e-13
    assert e3 <= 1e-10  # pinv of H vs lstsq: ~cond(H) * machine eps


def test_eq15_last_term_typo() -> None:
    """Eq. 15's -H wbar wbar^T H must be -(H wbar - J)(H wbar - J)^T (= -grad L grad L^T)."""
    N, P, S = 3, 6, 2
    X, y, u, eps = make_data(N, P, sigma_eps2=0.5, seed=3)
    w = th.min_norm_solution(X, y) + np.array([0.7, -1.1, 0.4])
    wbar = w - u
    H = th.hessian(X)
    J = X.T @ eps / P  # Eq. 6
    first = ((X @ wbar - eps) ** 2)[:, None] * X
    first = X.T @ first / P
    literal = (first - H @ np.outer(wbar, wbar) @ H) / S
    corrected = (first - np.outer(H @ wbar - J, H @ wbar - J)) / S
    C_ref = brute_force_cov(X, y, w, S, "with")
    e_corr, e_lit = rel(corrected, C_ref), rel(literal, C_ref)
    report("Eq.15 corrected (H wbar - J) vs enumeration", e_corr)
    report("Eq.15 literal (H wbar) vs enumeration", e_lit)
    assert e_corr <= 1e-12
    assert e_lit > 1e-3


def test_overparameterized_noise_vanishes_and_M_finite() -> None:
    N, P = 30, 12
    X, y, _, _ = make_data(N, P, seed=5)
    w_star = th.min_norm_solution(X, y)
    # minimum-norm interpolant (Eq. 7, N > P): X^T (X X^T)^-1 y in our orientation
    w_ref = X.T @ np.linalg.solve(X @ X.T, y)
    e_w = rel(w_star, w_ref)
    report("w* (lstsq) vs X^T (X X^T)^-1 y, N>P", e_w)
    assert e_w <= 1e-12
    C = th.noise_covariance(X, y, batch_size=4)
    scale = np.abs(X).max() ** 2 * np.mean(y**2)
    c_max = float(np.abs(C).max() / scale)
    report("max|C(w*)| / scale, N>P", c_max)
    assert c_max <= 1e-12
    assert th.optimal_loss(X, y) <= 1e-14 * np.mean(y**2)
    H = th.hessian(X)
    # filterwarnings=error turns any RuntimeWarning (division by zero) into a failure
    M = th.stationary_covariance(H, C, LR)
    Q = th.circulation(H, C)
    Mdb = th.detailed_balance_covariance(H, C, LR)
    ev = th.detailed_balance_eigenvalues(H, C, LR)
    for A in (M, Q, Mdb, ev):
        assert np.all(np.isfinite(A))
    assert np.abs(M).max() <= 1e-10 * LR * SIGMA_EPS2
    # With a generic C in range(H), M still solves Eq. 29 and has no null-space part.
    C_gen = X.T @ np.diag(np.linspace(0.5, 2.0, P)) @ X
    M_gen = th.stationary_covariance(H, C_gen, LR)
    resid = rel(H @ M_gen + M_gen @ H, LR * C_gen)
    report("Eq.29 residual, N>P, C in range(H)", resid)
    assert resid <= 1e-10
    null = np.linalg.svd(X)[2][P:].T  # (N, N-P) basis of the null space of H
    assert np.abs(null.T @ M_gen).max() <= 1e-10 * np.abs(M_gen).max()


# ---------------------------------------------------------------- loss, L*, Eq. 9


def test_optimal_loss_identities() -> None:
    N, P = 15, 45
    X, y, _, eps = make_data(N, P, seed=6)
    w_star = th.min_norm_solution(X, y)
    L_star = th.optimal_loss(X, y)
    e1 = abs(th.loss(X, y, w_star) - L_star) / L_star
    # Eq. 26 closed form (paper orientation X_p = X.T): eps (1 - X_p^T (X_p X_p^T)^-1 X_p) eps^T
    Xp = X.T
    proj = Xp.T @ np.linalg.solve(Xp @ Xp.T, Xp)
    L_closed = eps @ (np.eye(P) - proj) @ eps / (2 * P)
    e2 = abs(L_closed - L_star) / L_star
    # Eq. 26 first form: -1/2 J^T H^-1 J + eps eps^T / (2P)
    H = th.hessian(X)
    J = X.T @ eps / P
    L_J = -0.5 * J @ np.linalg.solve(H, J) + eps @ eps / (2 * P)
    e3 = abs(L_J - L_star) / L_star
    report("L(w*) vs L*", e1)
    report("L* vs (1/2P) eps (1 - X(X^TX)^-1X^T) eps", e2)
    report("L* vs -J^T H^-1 J/2 + eps^2/2P", e3)
    assert e1 <= 1e-12
    assert e2 <= 1e-12
    assert e3 <= 1e-11  # cancellation of two O(sigma_eps^2) terms
    # Eq. 9 with batched weights: L(w) = 1/2 (w-w*)^T H (w-w*) + L*
    rng = np.random.default_rng(7)
    W = w_star + rng.normal(size=(4, 3, N))
    Lb = th.loss(X, y, W)
    assert Lb.shape == (4, 3)
    D = W - w_star
    L9 = 0.5 * np.einsum("...i,ij,...j->...", D, H, D) + L_star
    e4 = rel(Lb, L9)
    report("Eq.9 quadratic form vs loss (batched)", e4)
    assert e4 <= 1e-12
    # w* is u + H^-1 J in the underparameterised case (Eq. 7)
    u = np.linalg.lstsq(X, y - eps, rcond=None)[0]
    assert rel(w_star, u + np.linalg.solve(H, J)) <= 1e-10


# -------------------------------------------------------------- detailed balance


def test_detailed_balance_when_C_proportional_to_H() -> None:
    N, P, S = 20, 60, 10
    X, _, _, _ = make_data(N, P, seed=8)
    H = th.hessian(X)
    C = th.hessian_noise_covariance(H, SIGMA_EPS2, S)  # Eq. 20
    np.testing.assert_allclose(C, SIGMA_EPS2 / S * H, rtol=1e-15)
    M30 = th.stationary_covariance(H, C, LR)
    M33 = th.detailed_balance_covariance(H, C, LR)
    M34 = th.isotropic_covariance(N, LR, SIGMA_EPS2, S)
    Q = th.circulation(H, C)
    e1, e2 = rel(M33, M30), rel(M30, M34)
    q = float(np.linalg.norm(Q) / np.linalg.norm(C))
    report("Eq.33 vs Eq.30 (C ~ H)", e1)
    report("Eq.30 vs Eq.34 (C ~ H)", e2)
    report("||Q||/||C|| (C ~ H)", q)
    assert e1 <= 1e-10
    assert e2 <= 1e-10
    assert q <= 1e-12
    # Eq. 34 eigenvalue is lr sigma^2/(2S), not lr sigma^2/S (text after Eq. 35).
    np.testing.assert_allclose(th.sorted_eigenvalues(M30), LR * SIGMA_EPS2 / (2 * S), rtol=1e-10)


def test_detailed_balance_eigenvalues_match_unsymmetric() -> None:
    X, y, _, _ = make_data(20, 40, seed=9)
    H = th.hessian(X)
    C = th.noise_covariance(X, y, batch_size=5)
    M33 = th.detailed_balance_covariance(H, C, LR)
    assert rel(M33, M33.T) > 1e-3  # Eq. 33 is not symmetric for finite P
    ev_ref = np.linalg.eigvals(M33)
    assert np.abs(ev_ref.imag).max() <= 1e-12 * np.abs(ev_ref.real).max()
    ev_ref = np.sort(ev_ref.real)[::-1]
    ev = th.detailed_balance_eigenvalues(H, C, LR)
    err = rel(ev, ev_ref)
    report("detailed_balance_eigenvalues vs eigvals(lr/2 H^-1 C)", err)
    assert err <= 1e-10
    assert np.all(np.diff(ev) <= 0)
    # Broken detailed balance: Eq. 33 spectrum differs from Eq. 30 spectrum.
    ev30 = th.sorted_eigenvalues(th.stationary_covariance(H, C, LR))
    assert rel(ev30, ev) > 1e-3


# -------------------------------------------------------------- noise prefactor


def test_noise_prefactor_values() -> None:
    assert th.noise_prefactor(200, 10, "with") == pytest.approx(0.1, rel=1e-15)
    ratio = th.noise_prefactor(200, 10, "without") * 10
    report("without/with prefactor ratio (P=200, S=10)", ratio)
    assert ratio == pytest.approx(190 / 199, rel=1e-15)
    assert 0.9547 < ratio < 0.9548
    assert th.noise_prefactor(7, 1, "without") == pytest.approx(1.0, rel=1e-15)
    assert th.noise_prefactor(7, 7, "without") == 0.0
    assert th.noise_prefactor(1, 1, "without") == 0.0


@pytest.mark.parametrize("bad", ["With", "replacement", "", None])
def test_noise_prefactor_rejects_unknown_sampling(bad: object) -> None:
    with pytest.raises(ValueError, match=r"sampling.*'with'.*'without'"):
        th.noise_prefactor(10, 2, bad)  # type: ignore[arg-type]


def test_noise_prefactor_rejects_bad_batch_size() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        th.noise_prefactor(10, 0, "with")
    with pytest.raises(ValueError, match="batch_size"):
        th.noise_prefactor(10, 11, "without")
    assert th.noise_prefactor(10, 11, "with") == pytest.approx(1 / 11)
    X, y, _, _ = make_data(3, 6)
    with pytest.raises(ValueError, match="sampling"):
        th.noise_covariance(X, y, 2, sampling="replace")  # type: ignore[arg-type]


# ------------------------------------------------------------ spectra, relaxation


def test_sorted_eigenvalues_and_relaxation_rates() -> None:
    X, _, _, _ = make_data(10, 30, seed=10)
    H = th.hessian(X)
    ev = th.sorted_eigenvalues(H)
    om = th.relaxation_rates(H)
    assert np.all(np.diff(ev) <= 0)
    assert np.all(np.diff(om) >= 0)
    np.testing.assert_allclose(ev[::-1], om, rtol=1e-12)
    np.testing.assert_allclose(
        om, np.sort(np.linalg.svd(X, compute_uv=False) ** 2 / 30), rtol=1e-10
    )


def test_slowest_relaxation_steps_matches_gradient_descent() -> None:
    """1/(lr omega_min) steps of GD shrink the slowest mode by ~1/e (t = lr * tau)."""
    N, P, lr = 10, 40, 0.05
    X, y, _, _ = make_data(N, P, seed=11)
    H = th.hessian(X)
    w_star = th.min_norm_solution(X, y)
    om, V = np.linalg.eigh(H)
    n_steps = th.slowest_relaxation_steps(H, lr)
    assert n_steps == pytest.approx(1.0 / (lr * om[0]), rel=1e-12)
    n = round(n_steps)
    w = w_star + V[:, 0]  # displace along slowest mode
    for _ in range(n):
        w = w - lr * X.T @ (X @ w - y) / P  # full-batch GD (Eq. 11 without noise)
    decay = float(V[:, 0] @ (w - w_star))
    expected = np.exp(-lr * om[0] * n)  # continuum: exp(-omega t), t = lr * n
    report("GD slowest-mode decay after 1/(lr omega_min) steps (expect ~e^-1)", decay)
    # discretisation (1 - lr om)^n vs exp(-lr om n): relative gap ~ n (lr om)^2 / 2 < 1e-3 here
    assert decay == pytest.approx(expected, rel=1e-3)
    assert decay == pytest.approx(np.exp(-1.0), rel=2e-2)  # rounding of n_steps


def test_slowest_relaxation_steps_skips_null_space() -> None:
    X, _, _, _ = make_data(30, 12, seed=12)
    H = th.hessian(X)
    om_pos = np.linalg.svd(X, compute_uv=False) ** 2 / 12
    assert th.slowest_relaxation_steps(H, 0.1) == pytest.approx(1 / (0.1 * om_pos.min()), rel=1e-9)
    with pytest.raises(ValueError):
        th.slowest_relaxation_steps(np.zeros((3, 3)), 0.1)


def test_marchenko_pastur_edges_and_paper_typo() -> None:
    N, P = 200, 800
    X, _, _, _ = make_data(N, P, seed=13)
    om = th.relaxation_rates(th.hessian(X))
    lo, hi = th.marchenko_pastur_edges(N, P, 1.0 / N)
    paper_lo = (1.0 / N) * (np.sqrt(P / N) - 1.0) ** 2  # text after Eq. 27
    report("omega_min / MP lower edge (N=200, P=800)", om[0] / lo)
    report("omega_max / MP upper edge (N=200, P=800)", om[-1] / hi)
    report("omega_min / paper's (sqrt(P/N)-1)^2 edge", om[0] / paper_lo)
    # finite-size (Tracy-Widom) edge fluctuations are O(N^-2/3) ~ few percent
    assert om[0] / lo == pytest.approx(1.0, abs=0.1)
    assert om[-1] / hi == pytest.approx(1.0, abs=0.05)
    assert om[0] / paper_lo < 0.5  # paper's expression is off by P/N = 4


def test_input_validation() -> None:
    X, y, _, _ = make_data(3, 6)
    with pytest.raises(ValueError, match="y must have shape"):
        th.min_norm_solution(X, y[:-1])
    with pytest.raises(ValueError, match="w must have shape"):
        th.loss(X, y, np.zeros(4))
    with pytest.raises(ValueError, match="square"):
        th.stationary_covariance(np.zeros((2, 3)), np.zeros((2, 3)), LR)
