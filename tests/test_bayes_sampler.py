"""SGD as a Bayesian sampler (paper 000, App. B): the exact theory of every variant, checked by
enumerating every mini-batch, and its tuning rules."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from weightdyn.single_layer import bayes, bayes_rules
from weightdyn.single_layer import theory as plain


def _data(P: int, N: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(P, N)) * np.linspace(0.5, 2.0, N)
    return X, X @ rng.normal(size=N) + 0.5 * rng.normal(size=P)


def _brute_force(X, y, S, sampling, chi, G, T):
    """The stationary second moment from every ordered mini-batch (a plain loop)."""
    P, N = X.shape
    K = X.T @ X / P + chi * np.eye(N)
    w_min = np.linalg.solve(K, X.T @ y / P)
    if sampling == "with":
        batches = list(itertools.product(range(P), repeat=S))
    else:
        batches = list(itertools.permutations(range(P), S))
    A = np.zeros((N * N, N * N))
    noise = np.zeros((N, N))
    for batch in batches:
        xb, yb = X[list(batch)], y[list(batch)]
        step = np.eye(N) - G @ (xb.T @ xb / S + chi * np.eye(N))
        g = G @ (xb.T @ (xb @ w_min - yb) / S + chi * w_min)
        A += np.kron(step, step)
        noise += np.outer(g, g)
    A /= len(batches)
    noise = noise / len(batches) + T * (G + G.T)
    return np.linalg.solve(np.eye(N * N) - A, noise.ravel()).reshape(N, N)


def _preconditioner(kind: str, N: int, rng: np.random.Generator) -> np.ndarray | None:
    if kind == "spd":
        A = rng.normal(size=(N, N))
        return A @ A.T / N + 0.5 * np.eye(N)
    if kind == "diagonal":
        return np.diag(rng.uniform(0.3, 2.0, N))
    if kind == "non-symmetric":
        return np.eye(N) + 0.3 * rng.normal(size=(N, N))
    return None


CASES = [
    (0.3, "none", 0.0),
    (0.0, "spd", 0.0),
    (0.0, "diagonal", 0.0),
    (0.0, "none", 0.05),
    (0.2, "spd", 0.05),
    (0.1, "non-symmetric", 0.0),
]


@pytest.mark.parametrize("sampling", ["with", "without"])
@pytest.mark.parametrize(("chi", "kind", "T"), CASES)
def test_exact_covariance_equals_every_minibatch_enumerated(sampling, chi, kind, T):
    X, y = _data(5, 3, 1)
    Lam = _preconditioner(kind, 3, np.random.default_rng(7))
    problem = bayes.Problem(X, y, 2, sampling, chi)
    variant = bayes.Variant(0.8 * bayes.max_stable_lr(problem, Lam), Lam, T)
    M = bayes.stationary_covariance(problem, variant)
    Mb = _brute_force(X, y, 2, sampling, chi, variant.step_matrix(3), T)
    assert np.abs(M - Mb).max() <= 1e-12 * np.abs(Mb).max()


@pytest.mark.parametrize(("chi", "kind", "T"), CASES)
def test_the_stability_limit_is_where_the_second_moment_map_reaches_radius_one(chi, kind, T):
    X, y = _data(7, 3, 2)
    Lam = _preconditioner(kind, 3, np.random.default_rng(3))
    problem = bayes.Problem(X, y, 2, "with", chi)
    lr_max = bayes.max_stable_lr(problem, Lam)
    assert bayes.stability_radius(problem, bayes.Variant(0.999 * lr_max, Lam, T)) < 1.0
    assert bayes.stability_radius(problem, bayes.Variant(1.001 * lr_max, Lam, T)) > 1.0
    with pytest.raises(ValueError, match="stability limit"):
        bayes.stationary_covariance(problem, bayes.Variant(1.01 * lr_max, Lam, T))


def test_plain_sgd_is_the_special_case_of_issue_7():
    X, y = _data(30, 4, 3)
    problem = bayes.Problem(X, y, 3, "without")
    lr_max = bayes.max_stable_lr(problem)
    assert lr_max == pytest.approx(plain.max_stable_lr_second_moment(X, 3, "without"), rel=1e-10)
    M = bayes.stationary_covariance(problem, bayes.Variant(0.5 * lr_max))
    old = plain.discrete_stationary_covariance(X, y, 0.5 * lr_max, 3, "without").M
    assert np.abs(M - old).max() <= 1e-10 * np.abs(old).max()


@pytest.mark.parametrize("kind", ["none", "spd", "diagonal"])
def test_continuous_theory_is_the_small_lr_limit(kind):
    X, y = _data(30, 4, 4)
    Lam = _preconditioner(kind, 4, np.random.default_rng(5))
    problem = bayes.Problem(X, y, 3, "with", 0.1)
    lr_max = bayes.max_stable_lr(problem, Lam)
    errors = []
    for f in (1e-2, 1e-3):
        v = bayes.Variant(f * lr_max, Lam, 0.02)
        M, Mc = bayes.stationary_covariance(problem, v), bayes.continuous_covariance(problem, v)
        errors.append(np.linalg.norm(M - Mc) / np.linalg.norm(M))
    assert errors[1] < 0.2 * errors[0]  # first order in lr
    assert errors[1] < 1e-2


def test_injected_noise_at_the_posterior_temperature_samples_the_posterior_as_lr_vanishes():
    """App. B: the injected noise dominates the mini-batch noise at small lr, so
    ``M -> T K^-1``: the posterior for ``T = sigma^2 / P``, for any preconditioner."""
    X, y = _data(40, 3, 6)
    problem = bayes.Problem(X, y, 4, "with", 0.05)
    s2 = 0.25
    post = bayes.posterior_covariance(problem, s2)
    Lam = _preconditioner("spd", 3, np.random.default_rng(8))
    kls = [
        bayes.gaussian_kl(
            bayes.stationary_covariance(
                problem, bayes.Variant(f * bayes.max_stable_lr(problem, Lam), Lam, s2 / 40)
            ),
            post,
        )
        for f in (1e-1, 1e-2, 1e-3)
    ]
    assert kls[0] > kls[1] > kls[2]
    assert kls[2] < 1e-4


def test_targets():
    X, y = _data(50, 3, 9)
    problem = bayes.Problem(X, y, 5, "with", 0.2)
    np.testing.assert_allclose(
        bayes.posterior_covariance(problem, 0.3), 0.3 / 50 * np.linalg.inv(problem.K)
    )
    # homoskedastic per-sample gradients (V = s^2 K): the sandwich is the posterior
    problem.V = 0.3 * problem.K
    np.testing.assert_allclose(
        bayes.sandwich_covariance(problem), bayes.posterior_covariance(problem, 0.3)
    )
    assert bayes.gaussian_kl(problem.K, problem.K) == pytest.approx(0.0, abs=1e-12)
    assert bayes.gaussian_kl(2 * problem.K, problem.K) == pytest.approx(
        0.5 * 3 * (2 - 1 - np.log(2)), rel=1e-12
    )
    # the estimated noise variance of a pure-noise problem is unbiased (chi = 0: dof = N)
    rng = np.random.default_rng(0)
    est = [
        bayes.residual_variance(rng.normal(size=(20, 4)), rng.normal(size=20)) for _ in range(4000)
    ]
    assert np.mean(est) == pytest.approx(1.0, abs=3 * np.std(est) / np.sqrt(4000))


def test_mandt_and_continuous_time_rules_are_the_published_formulas():
    X, y = _data(40, 4, 10)
    problem = bayes.Problem(X, y, 4, "with", 0.05)
    post = bayes.posterior_covariance(problem, 0.49)
    # Mandt et al. Thm 1: eps* = 2 (S/n) D / tr(BB^T), i.e. 2 N T_post / tr(C) here
    assert bayes_rules.continuous_optimal_lr(problem, post) == pytest.approx(
        2 * 4 * (0.49 / 40) / np.trace(problem.C), rel=1e-12
    )
    # Mandt et al. Thm 2: the continuous-time law is the posterior
    Lam = bayes_rules.mandt_preconditioner(problem)
    lr = bayes_rules.continuous_optimal_lr(problem, post, Lam)
    Mc = bayes.continuous_covariance(problem, bayes.Variant(lr, Lam))
    assert bayes.gaussian_kl(Mc, post) == pytest.approx(0.0, abs=1e-10)
    # the continuous-time rule of the sandwich: lr = 2B/n with Lam = J^-1
    sandwich = bayes.sandwich_covariance(problem)
    J_inv = bayes_rules.hessian_inverse_preconditioner(problem)
    assert bayes_rules.continuous_optimal_lr(problem, sandwich, J_inv) == pytest.approx(
        2 * 4 / 40, rel=1e-12
    )


def test_wang_rule_is_2b_over_n_plus_b_for_homoskedastic_gradients():
    X, y = _data(40, 3, 11)
    problem = bayes.Problem(X, y, 8, "with")
    problem.V = 0.7 * problem.K
    problem.C = problem.c * problem.V
    np.testing.assert_allclose(
        bayes_rules.wang_preconditioner(problem),
        2 * 8 / (40 + 8) * np.linalg.inv(problem.K),
        rtol=1e-12,
    )


@pytest.mark.parametrize("T", [0.0, 0.01])
def test_the_adjoint_gradient_of_the_exact_kl_matches_finite_differences(T):
    X, y = _data(40, 4, 12)
    problem = bayes.Problem(X, y, 4, "with", 0.05)
    post = bayes.posterior_covariance(problem, 0.49)
    g = 0.3 * bayes.max_stable_lr(problem) * np.array([1.0, 0.7, 1.3, 0.9])
    _, grad = bayes_rules.diagonal_kl_and_gradient(problem, g, post, T)
    for k in range(4):
        e = np.zeros(4)
        e[k] = 1e-6 * g[k]
        kl_p = bayes_rules.diagonal_kl_and_gradient(problem, g + e, post, T)[0]
        kl_m = bayes_rules.diagonal_kl_and_gradient(problem, g - e, post, T)[0]
        assert grad[k] == pytest.approx((kl_p - kl_m) / (2 * e[k]), rel=1e-5)


def test_the_exact_rules_beat_the_continuous_rule_in_exact_kl():
    X, y = _data(40, 4, 13)
    problem = bayes.Problem(X, y, 4, "with", 0.05)
    post = bayes.posterior_covariance(problem, 0.49)
    kl = lambda G: bayes_rules.exact_kl(problem, bayes.Variant(1.0, G), post)  # noqa: E731
    mandt = bayes_rules.continuous_optimal_lr(problem, post)
    exact = bayes_rules.exact_optimal_lr(problem, post)
    diag = bayes_rules.exact_optimal_diagonal(problem, post)
    assert kl(exact * np.eye(4)) < kl(mandt * np.eye(4))
    assert kl(np.diag(diag)) <= kl(exact * np.eye(4)) + 1e-12
    for f in (0.98, 1.02):  # a minimum in lr
        assert kl(f * exact * np.eye(4)) > kl(exact * np.eye(4))


@pytest.mark.parametrize(
    ("Lam", "T", "match"),
    [
        (np.array([[1.0, 0.5], [0.0, 1.0]]), 0.1, "not symmetric"),
        (np.array([[1.0, 0.0], [0.0, -1.0]]), 0.1, "smallest eigenvalue"),
        (np.array([[-1.0, 0.0], [0.0, 1.0]]), 0.0, "positive real parts"),
        (np.eye(3), 0.0, r"finite \(2, 2\) matrix"),
        (None, -0.1, "temperature must be"),
    ],
)
def test_bad_variants_name_the_key(Lam, T, match):
    X, y = _data(10, 2, 14)
    problem = bayes.Problem(X, y, 2)
    with pytest.raises(
        ValueError, match="preconditioner" if Lam is not None and T >= 0 else "temperature"
    ):
        bayes.stationary_covariance(problem, bayes.Variant(0.1, Lam, T))
    with pytest.raises(ValueError, match=match):
        bayes.stationary_covariance(problem, bayes.Variant(0.1, Lam, T))


def test_bad_problems_name_the_key():
    X, y = _data(10, 2, 15)
    with pytest.raises(ValueError, match="weight_decay"):
        bayes.Problem(X, y, 2, "with", -1.0)
    with pytest.raises(ValueError, match="MAX_N"):
        bayes.Problem(np.ones((100, bayes.MAX_N + 1)), np.ones(100), 2)
