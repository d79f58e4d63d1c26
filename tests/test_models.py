"""Model interface and local SGD theory at a minimum (paper 000, App. A, Eqs. 14, 29-33, 79-81).

vec convention: column stacking; Jacobian rows sample-major (row mu * N_o + k).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from weightdyn.models import DeepLinear, Linear, Model, OneHidden
from weightdyn.models import theory as mt
from weightdyn.models.experiment import OrthogonalTeacher
from weightdyn.single_layer import theory as sl
from weightdyn.two_layer import theory as tl


def report(name: str, value: float) -> None:
    print(f"\n[models] {name}: {value:.3e}")


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """Max-abs error relative to the max-abs reference entry."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def problem(model: Model, P: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(P, model.n_in))
    Y = rng.normal(size=(P, model.n_out))
    return X, Y, model.random_theta(rng)


class ExpModel(Model):
    """A user-written model, ``f(x) = exp(theta . x)``: only the four required members."""

    def __init__(self, n_in: int) -> None:
        self.n_in, self.n_out = n_in, 1

    @property
    def n_params(self) -> int:
        return self.n_in

    def output(self, X, theta):
        return np.exp(np.asarray(X) @ theta)[:, None]

    def jacobian(self, X, theta):
        return self.output(X, theta) * np.asarray(X)

    def output_hessian_contract(self, X, theta, R):
        w = np.asarray(R)[:, 0] * self.output(X, theta)[:, 0]
        return np.asarray(X).T @ (w[:, None] * np.asarray(X))


MODELS = {
    "user_exp": ExpModel(3),
    "linear": Linear(3),
    "linear_multi": Linear(3, 2),
    "deep2": DeepLinear([3, 4, 2]),
    "deep3": DeepLinear([3, 4, 3, 2]),
    "tanh": OneHidden(3, 4, 2, "tanh"),
    "softplus_nobias": OneHidden(3, 4, 1, "softplus", bias=False),
}


# --------------------------------------------------------- derivatives vs FD


@pytest.mark.parametrize("name", list(MODELS))
def test_jacobian_and_hessian_match_finite_differences(name: str) -> None:
    model = MODELS[name]
    X, Y, theta = problem(model, P=7, seed=1)
    h, n = 1e-6, model.n_params
    steps = np.eye(n) * h
    J_fd = np.stack(
        [
            (model.output(X, theta + e) - model.output(X, theta - e)).ravel() / (2 * h)
            for e in steps
        ],
        axis=1,
    )
    H_fd = np.stack(
        [
            (model.gradient(X, Y, theta + e) - model.gradient(X, Y, theta - e)) / (2 * h)
            for e in steps
        ],
        axis=1,
    )
    g_fd = [(model.loss(X, Y, theta + e) - model.loss(X, Y, theta - e)) / (2 * h) for e in steps]
    errs = (
        rel(model.jacobian(X, theta), J_fd),
        rel(model.hessian(X, Y, theta), H_fd),
        rel(model.gradient(X, Y, theta), g_fd),
    )
    report(f"{name}: FD rel. error J, H, grad", max(errs))
    assert max(errs) < 1e-7
    np.testing.assert_allclose(
        model.per_sample_gradients(X, Y, theta).mean(axis=0), model.gradient(X, Y, theta),
        rtol=0, atol=1e-14,
    )  # fmt: skip
    H = model.hessian(X, Y, theta)
    assert np.array_equal(H, H.T)
    split = model.gauss_newton(X, theta) + model.residual_hessian(X, Y, theta)
    assert np.array_equal(H, split)


# -------------------------------------------------- DeepLinear L=2 = two_layer


def test_deep_linear_two_layers_equals_two_layer_theory() -> None:
    n_in, n_hid, n_out, P = 4, 3, 2, 9
    model = DeepLinear([n_in, n_hid, n_out])
    X, Y, theta = problem(model, P, seed=2)
    W1, W2 = model.weights(theta)
    np.testing.assert_array_equal(tl.pack(W1, W2), theta)  # same vec convention
    np.testing.assert_array_equal(tl.unpack(theta, n_in, n_hid, n_out)[0], W1)
    # both losses are (1/2P) sum ||f - y||^2 (Eq. 36); no factor to convert
    errs = {
        "loss": rel(model.loss(X, Y, theta), tl.loss(X, Y, W1, W2)),
        "gradient": rel(model.gradient(X, Y, theta), tl.pack(*tl.gradients(X, Y, W1, W2))),
        "per-sample": rel(
            model.per_sample_gradients(X, Y, theta), tl.per_sample_gradients(X, Y, W1, W2)
        ),
        "hessian_full": rel(model.hessian(X, Y, theta), tl.hessian_full(X, Y, W1, W2)),
        "exact_drift": rel(model.hessian(X, Y, theta), tl.exact_drift(X, Y, W1, W2)),
    }
    for S, sampling in [(3, "with"), (4, "without")]:
        errs[f"noise {sampling}"] = rel(
            mt.noise_covariance(model, X, Y, theta, S, sampling),
            tl.exact_noise_covariance(X, Y, W1, W2, S, sampling),
        )
    for key, err in errs.items():
        report(f"DeepLinear L=2 vs two_layer: {key}", err)
    assert max(errs.values()) < 1e-12


def test_deep_linear_null_space_and_stationary_covariance_at_a_minimum() -> None:
    """GL(N_h) symmetry: null(H) has dimension n - N_o N_i >= N_h^2 (Eq. 64); M lives on range."""
    n_in, n_hid, n_out, P = 5, 3, 2, 40
    model = DeepLinear([n_in, n_hid, n_out])
    X, Y, theta0 = problem(model, P, seed=3)
    res = mt.find_minimum(model, X, Y, theta0, gtol=1e-12)
    report("DeepLinear find_minimum |grad L|", res.grad_norm)
    H = model.hessian(X, Y, res.theta)
    info = mt.hessian_range(H)
    assert info.null_dim == model.n_params - n_out * n_in >= n_hid**2
    lr, S = 0.05, 4
    lt = mt.local_theory(model, X, Y, res.theta, lr, S)
    assert (lt.rank, lt.null_dim) == (info.rank, info.null_dim)
    ref = tl.lyapunov_covariance(H, lt.C, lr)
    err = rel(lt.M, ref)
    report("DeepLinear M vs two_layer.lyapunov_covariance", err)
    assert err < 1e-9
    P_range = info.Q @ info.Q.T
    lyap = H @ lt.M + lt.M @ H - lr * P_range @ lt.C @ P_range
    assert np.max(np.abs(lyap)) < 1e-12 * np.max(np.abs(lr * lt.C))
    null = np.eye(model.n_params) - P_range
    assert np.max(np.abs(null @ lt.M)) < 1e-14 * np.max(np.abs(lt.M))


# --------------------------------------------------- noise vs enumeration


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_noise_covariance_matches_enumeration_of_minibatches(sampling: str) -> None:
    model = OneHidden(2, 3, 2, "tanh")
    P, S = 5, 2
    X, Y, theta = problem(model, P, seed=4)
    g = model.per_sample_gradients(X, Y, theta)
    if sampling == "with":
        batches = list(itertools.product(range(P), repeat=S))  # all P^S ordered tuples
    else:
        batches = list(itertools.combinations(range(P), S))  # all subsets
    GB = np.array([g[list(b)].mean(axis=0) for b in batches])
    D = GB - GB.mean(axis=0)
    err = rel(mt.noise_covariance(model, X, Y, theta, S, sampling), D.T @ D / len(batches))
    report(f"C vs enumeration ({sampling}, P=5, S=2)", err)
    assert err < 1e-12


# -------------------------------------------------- Linear = single_layer


def test_linear_reproduces_single_layer_theory() -> None:
    N, P, S, lr = 4, 12, 3, 0.1
    model = Linear(N)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(P, N)) / np.sqrt(N)
    y = X @ rng.normal(size=N) + 0.5 * rng.normal(size=P)
    w_star = sl.min_norm_solution(X, y)
    w = w_star + 0.3 * rng.normal(size=N)
    H = model.hessian(X, y, w_star)
    C = mt.noise_covariance(model, X, y, w_star, S)
    errs = {
        "hessian": rel(model.hessian(X, y, w), sl.hessian(X)),
        "loss": rel(model.loss(X, y, w), sl.loss(X, y, w)),
        "noise (w != w*)": rel(
            mt.noise_covariance(model, X, y, w, S, "without"),
            sl.noise_covariance(X, y, S, "without", w=w),
        ),
        "noise Eq. 17 at w*": rel(C, sl.noise_covariance(X, y, S)),
        "M Eq. 30": rel(mt.stationary_covariance(H, C, lr), sl.stationary_covariance(H, C, lr)),
        "Q Eq. 31": rel(mt.circulation(H, C), sl.circulation(H, C)),
        "M Eq. 33": rel(
            mt.detailed_balance_covariance(H, C, lr), sl.detailed_balance_covariance(H, C, lr)
        ),
    }
    for key, err in errs.items():
        report(f"Linear vs single_layer: {key}", err)
    assert max(errs.values()) < 1e-12
    assert model.residual_hessian(X, y, w).max() == 0.0


def test_multi_output_linear_is_kron_of_single_layer_hessian() -> None:
    model = Linear(3, 2)
    X, Y, theta = problem(model, P=8, seed=6)
    err = rel(model.hessian(X, Y, theta), np.kron(sl.hessian(X), np.eye(2)))
    assert err < 1e-14


# ------------------------------------------------------------- find_minimum


def one_hidden_problem(seed: int = 1, P: int = 600):
    """Teacher-student tanh net (5-8-1 with biases, 57 parameters), label noise 0.02."""
    model = OneHidden(5, 8, 1, "tanh")
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(P, model.n_in))
    teacher = model.random_theta(rng, 3.0)
    Y = model.output(X, teacher) + 0.02 * rng.normal(size=(P, 1))
    return model, X, Y, teacher + 0.1 * rng.normal(size=model.n_params)


@pytest.fixture(scope="module")
def tanh_minimum():
    model, X, Y, theta0 = one_hidden_problem()
    return model, X, Y, mt.find_minimum(model, X, Y, theta0, gtol=1e-10)


def test_find_minimum_reaches_round_off_on_one_hidden_tanh(tanh_minimum) -> None:
    model, X, Y, res = tanh_minimum
    report("OneHidden tanh n_params", model.n_params)
    report("find_minimum |grad L|", res.grad_norm)
    report("find_minimum seconds", res.seconds)
    assert 55 <= model.n_params <= 65
    assert res.converged and res.grad_norm < 1e-10
    assert res.grad_norm == np.linalg.norm(model.gradient(X, Y, res.theta))
    omega = np.linalg.eigvalsh(model.hessian(X, Y, res.theta))
    assert omega[0] > 0  # an isolated minimum
    assert mt.hessian_range(model.hessian(X, Y, res.theta)).null_dim == 0
    mt.check_underparameterised(model, X, res.theta)


def test_jacobian_linearisation_and_paper_eq81(tanh_minimum) -> None:
    """App. A: linear regression on the features J with labels Y - b (Eq. 81 corrected)."""
    model, X, Y, res = tanh_minimum
    S, lr = 10, 0.05
    lin = mt.jacobian_linearisation(model, X, Y, res.theta, S)
    y_eff = lin.targets[:, 0]
    errs = {
        "drift = sl.hessian(J)": rel(lin.drift, sl.hessian(lin.J)),
        "drift = gauss_newton": rel(lin.drift, model.gauss_newton(X, res.theta)),
        "noise = network noise": rel(lin.noise, mt.noise_covariance(model, X, Y, res.theta, S)),
        "noise = sl Eq. 17 on J": rel(lin.noise, sl.noise_covariance(lin.J, y_eff, S)),
        "theta* = lstsq(J, Y - b)": rel(sl.min_norm_solution(lin.J, y_eff), res.theta),
    }
    for key, err in errs.items():
        report(f"linearisation: {key}", err)
    assert max(errs.values()) < 1e-9
    # Eq. 81 as printed (labels Y, bias dropped as "const") has a different minimiser
    paper = rel(sl.min_norm_solution(lin.J, Y[:, 0]), res.theta)
    report("Eq. 81 as printed: rel. error of its minimiser", paper)
    assert paper > 0.1
    # App. A prediction vs full Hessian: residual curvature small but nonzero
    full = mt.local_theory(model, X, Y, res.theta, lr, S)
    gn = mt.local_theory(model, X, Y, res.theta, lr, S, drift="gauss_newton")
    ratio = np.linalg.norm(model.residual_hessian(X, Y, res.theta)) / np.linalg.norm(full.H)
    report("|residual Hessian| / |H| at the tanh minimum", ratio)
    report("M: Gauss-Newton vs full Hessian, rel. difference", rel(gn.M, full.M))
    assert 0 < ratio < 0.1
    np.testing.assert_allclose(gn.H, lin.drift, rtol=0, atol=0)


def test_discrete_recursion_and_detailed_balance(tanh_minimum) -> None:
    model, X, Y, res = tanh_minimum
    lr, S = 0.05, 10
    lt = mt.local_theory(model, X, Y, res.theta, lr, S)
    H, C, Md = lt.H, lt.C, lt.M_discrete
    fixed = (np.eye(H.shape[0]) - lr * H) @ Md @ (np.eye(H.shape[0]) - lr * H) + lr**2 * C
    err = rel(fixed, Md)
    report("discrete recursion fixed-point residual", err)
    assert err < 1e-10
    # Eq. 30 is the lr -> 0 limit: relative difference O(lr)
    small = mt.discrete_stationary_covariance(H, C, 1e-6) / 1e-6
    assert rel(small, mt.stationary_covariance(H, C, 1e-6) / 1e-6) < 1e-5
    assert rel(Md, lt.M) > 1e-3
    # Eq. 30 = (lr/2) H^-1 (C + Q) with Q antisymmetric (Eq. 31)
    assert rel(lt.Q, -lt.Q.T) < 1e-12
    assert rel(lt.M, 0.5 * lr * np.linalg.solve(H, C + lt.Q)) < 1e-9
    assert rel(lt.M_detailed, 0.5 * lr * np.linalg.solve(H, C)) < 1e-9


# ---------------------------------------------------------------- bad input


def test_bad_inputs_raise_clear_errors(tanh_minimum) -> None:
    model, X, Y, res = tanh_minimum
    with pytest.raises(ValueError, match=r"activation must be one of \['softplus', 'tanh'\]"):
        OneHidden(3, 4, 1, "relu")
    with pytest.raises(ValueError, match="depth"):
        DeepLinear([3, 2])
    with pytest.raises(ValueError, match="theta must have shape"):
        model.output(X, res.theta[:-1])
    with pytest.raises(ValueError, match=r"n_params = 57 must be < P \* N_o = 50"):
        mt.check_underparameterised(model, X[:50])
    deep = DeepLinear([3, 20, 1])  # 80 parameters but rank J = 3 < P = 10: fine
    Xd, _, thd = problem(deep, P=10, seed=7)
    assert mt.check_underparameterised(deep, Xd, thd) == 3
    with pytest.raises(ValueError, match="rank of J"):
        mt.check_underparameterised(deep, Xd[:3], thd)
    not_min = res.theta + 1e-3
    with pytest.raises(ValueError, match=r"theta is not a minimum: \|grad L\(theta\)\|"):
        mt.local_theory(model, X, Y, not_min, 0.05, 10)
    H = model.hessian(X, Y, res.theta)
    lr_max = 2 / np.linalg.eigvalsh(H)[-1]
    with pytest.raises(ValueError, match=r"lr must satisfy 0 < lr < 2 / max eig\(H\)"):
        mt.local_theory(model, X, Y, res.theta, 1.01 * lr_max, 10)
    with pytest.raises(ValueError, match="lr must satisfy"):
        mt.discrete_stationary_covariance(H, H, -0.1)
    with pytest.raises(ValueError, match="drift must be"):
        mt.local_theory(model, X, Y, res.theta, 0.05, 10, drift="newton")
    with pytest.raises(RuntimeError, match="above gtol"):
        mt.find_minimum(model, X, Y, res.theta + 0.1, max_iter=2, max_trust=1, max_newton=0)


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_minibatch_recursion_is_the_single_layer_discrete_covariance(sampling: str) -> None:
    rng = np.random.default_rng(4)
    P, N = 40, 10
    X = rng.standard_normal((P, N))
    y = X @ rng.standard_normal(N) + 0.5 * rng.standard_normal(P)
    w_star = np.linalg.lstsq(X, y, rcond=None)[0]
    M = mt.minibatch_stationary_covariance(Linear(N), X, y, w_star, 0.05, 5, sampling)
    exact = sl.discrete_stationary_covariance(X, y, 0.05, 5, sampling).M
    report(f"mini-batch recursion vs single-layer discrete ({sampling})", rel(M, exact))
    assert rel(M, exact) < 1e-10
    H = Linear(N).hessian(X, y, w_star)
    h = mt.sample_hessians(Linear(N), X, y, w_star)
    np.testing.assert_allclose(h.mean(axis=0), H, rtol=0, atol=1e-14)


# ------------------------------------------------- SGD's mean off the minimum (issue 14)


def test_smoothing_shift_equals_the_hessian_route() -> None:
    """``m = -H^-1 grad tr(H M) / 2``: the gradients' second differences along M's
    eigenvectors against first differences of the Hessian along each coordinate."""
    model, rng = OneHidden(3, 2, 1, "tanh"), np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    theta0 = OrthogonalTeacher(3, 2, 1, "tanh").random_theta(rng)
    Y = model.output(X, theta0) + 0.5 * rng.normal(size=(100, 1))
    theta = mt.find_minimum(model, X, Y, theta0, gtol=1e-11).theta  # near the teacher
    assert np.linalg.eigvalsh(model.hessian(X, Y, theta))[0] > 1e-3  # an isolated minimum
    rng = np.random.default_rng(1)
    A = rng.normal(size=(model.n_params,) * 2)
    M = 1e-3 * A @ A.T
    h = 1e-5
    grad_tr = np.array([
        np.trace((model.hessian(X, Y, theta + h * e) - model.hessian(X, Y, theta - h * e)) @ M)
        for e in np.eye(model.n_params)
    ]) / (2 * h)  # fmt: skip
    expected = -0.5 * np.linalg.solve(model.hessian(X, Y, theta), grad_tr)
    got = mt.smoothing_shift(model, X, Y, theta, M)
    report("smoothing shift vs Hessian route", rel(got, expected))
    assert rel(got, expected) < 1e-5


def test_a_linear_model_has_no_smoothing_shift() -> None:
    """A quadratic loss has no third derivative: SGD's mean is the minimum at any lr."""
    model = Linear(3, 2)
    X, Y, theta0 = problem(model, 30)
    theta = mt.find_minimum(model, X, Y, theta0, gtol=1e-12).theta
    shift = mt.smoothing_shift(model, X, Y, theta, 1e-2 * np.eye(model.n_params))
    assert np.linalg.norm(shift) < 1e-6 * np.linalg.norm(theta)
