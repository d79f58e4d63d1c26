"""Models as JAX functions (autodiff, float64), losses and weight decay (issue 33).

Paper 000 App. A (Eqs. 79-81: the Jacobian as design matrix), Eq. 14 (noise), Eqs. 29-33
(stationary covariance), App. B (the L2 term ``chi |theta|^2 / 2``). The autodiff models are
checked against the hand-written ones at the same ``theta`` (same layout), and every new
derivative (cross-entropy, weight decay) against central finite differences.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from weightdyn.models import CROSS_ENTROPY, LOSSES, SQUARED, DeepLinear, Model, OneHidden
from weightdyn.models import theory as mt
from weightdyn.models.experiment import OrthogonalTeacher
from weightdyn.models.jax_model import MLP, JaxModel, jax_deep_linear, jax_one_hidden
from weightdyn.models.simulate import reference_chain

AUTODIFF_RTOL = 1e-10
FD_RTOL = 1e-7
#: one sample count and one decay throughout, so that each model compiles once per worker
P_TEST, CHI = 40, 0.3


def report(name: str, value: float) -> None:
    print(f"\n[models-jax] {name}: {value:.3e}")


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """Max-abs error relative to the max-abs reference entry."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@functools.cache
def pair(name: str) -> tuple[Model, MLP]:
    """A hand-written model and its autodiff twin (cached: compiled once per test worker)."""
    return {
        "deep2": lambda: (DeepLinear([3, 4, 2]), jax_deep_linear([3, 4, 2])),
        "deep2_wide": lambda: (DeepLinear([5, 6, 3]), jax_deep_linear([5, 6, 3])),
        "deep3": lambda: (DeepLinear([3, 4, 3, 2]), jax_deep_linear([3, 4, 3, 2])),
        "tanh": lambda: (OneHidden(4, 4, 2, "tanh"), jax_one_hidden(4, 4, 2, "tanh")),
        "tanh_wide": lambda: (OneHidden(5, 7, 1, "tanh"), jax_one_hidden(5, 7, 1, "tanh")),
        "softplus_nobias": lambda: (
            OneHidden(3, 4, 2, "softplus", bias=False),
            jax_one_hidden(3, 4, 2, "softplus", bias=False),
        ),
    }[name]()


PAIRS = ["deep2", "deep2_wide", "deep3", "tanh", "tanh_wide", "softplus_nobias"]


def labels(model: Model, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Gaussian targets for squared error, one-hot classes for cross-entropy."""
    if model.loss_function == CROSS_ENTROPY:
        return np.eye(model.n_out)[rng.integers(0, model.n_out, shape)]
    return rng.normal(size=(*shape, model.n_out))


def replica_batches(model: Model, rng: np.random.Generator, theta: np.ndarray) -> tuple:
    """Four replicas near ``theta``, each with its own batch of five samples."""
    return (rng.normal(size=(4, 5, model.n_in)), labels(model, rng, (4, 5)),
            theta + 0.1 * rng.normal(size=(4, model.n_params)))  # fmt: skip


def derived(model: Model, X, Y, theta, R, batches) -> dict[str, np.ndarray]:
    """Every quantity the theory and the simulations use, at one point."""
    Xb, Yb, Th = batches
    return {
        "output": model.output(X, theta),
        "jacobian": model.jacobian(X, theta),
        "contract": model.output_hessian_contract(X, theta, R),
        "loss": np.array(model.loss(X, Y, theta)),
        "residuals": model.residuals(X, Y, theta),
        "per-sample gradients": model.per_sample_gradients(X, Y, theta),
        "gradient": model.gradient(X, Y, theta),
        "gauss_newton": model.gauss_newton(X, theta),
        "residual_hessian": model.residual_hessian(X, Y, theta),
        "hessian": model.hessian(X, Y, theta),
        "replica gradients": model.replica_gradients(Xb, Yb, Th),
        "noise with": mt.noise_covariance(model, X, Y, theta, 3, "with"),
        "noise without": mt.noise_covariance(model, X, Y, theta, 4, "without"),
        "sample hessians": mt.sample_hessians(model, X, Y, theta),
    }


# ------------------------------------------------------------- layout and init


@pytest.mark.parametrize("name", PAIRS)
def test_twins_share_layout_and_initialisation(name: str) -> None:
    hand, auto = pair(name)
    assert (auto.n_in, auto.n_out, auto.n_params) == (hand.n_in, hand.n_out, hand.n_params)
    assert auto.last_layer == hand.last_layer
    t_hand = hand.random_theta(np.random.default_rng(3))
    np.testing.assert_array_equal(auto.random_theta(np.random.default_rng(3)), t_hand)
    np.testing.assert_allclose(
        auto.random_theta(np.random.default_rng(3), 2.5),
        hand.random_theta(np.random.default_rng(3), 2.5), rtol=1e-15, atol=0,
    )  # fmt: skip
    for (W, b), W_hand in zip(auto.weights(t_hand), hand.weights(t_hand), strict=True):
        augmented = W if b is None else np.column_stack([W, b])  # OneHidden's [W | b]
        np.testing.assert_array_equal(augmented, W_hand)
    np.testing.assert_array_equal(auto.flatten(auto.params(t_hand)), t_hand)


# ------------------------------------------------ autodiff == hand-written


def with_objective(models: tuple[Model, MLP], objective: str) -> tuple[Model, MLP]:
    """``"paper"``, ``"squared+decay"`` or ``"cross_entropy+decay"`` (decay :data:`CHI`)."""
    if objective == "paper":
        return models
    loss = objective.split("+")[0]
    return models[0].with_objective(loss, CHI), models[1].with_objective(loss, CHI)


CASES = [(name, "paper") for name in PAIRS] + [
    ("deep3", "cross_entropy+decay"),
    ("tanh", "cross_entropy+decay"),
    ("softplus_nobias", "cross_entropy+decay"),
    ("deep2_wide", "squared+decay"),
    ("tanh_wide", "squared+decay"),
]


@pytest.mark.parametrize(("name", "objective"), CASES)
def test_autodiff_equals_hand_written_derivatives(name: str, objective: str) -> None:
    """Outputs, J (Eq. 80), Hessian, g^mu and C (Eq. 14), at three random points."""
    hand, auto = with_objective(pair(name), objective)
    worst: dict[str, float] = {}
    for seed in range(3):
        rng = np.random.default_rng(seed)
        theta = hand.random_theta(rng, 1.5)
        X, Y = rng.normal(size=(P_TEST, hand.n_in)), labels(hand, rng, (P_TEST,))
        R = rng.normal(size=(P_TEST, hand.n_out))
        batches = replica_batches(hand, rng, theta)
        got = derived(auto, X, Y, theta, R, batches)
        ref = derived(hand, X, Y, theta, R, batches)
        for key in ref:
            worst[key] = max(worst.get(key, 0.0), rel(got[key], ref[key]))
    report(
        f"{name} ({objective}) autodiff vs hand-written, max over quantities", max(worst.values())
    )
    assert max(worst.values()) < AUTODIFF_RTOL, worst


def _minimum(name: str) -> tuple[Model, MLP, np.ndarray, np.ndarray, np.ndarray]:
    """A teacher-student problem and its minimum (hand-written model)."""
    hand, auto = pair(name)
    rng = np.random.default_rng(11)
    X = rng.normal(size=(P_TEST, hand.n_in))
    if isinstance(hand, OneHidden):  # well conditioned: an isolated minimum near the teacher
        teacher = OrthogonalTeacher(hand.n_in, hand.n_hidden, hand.n_out).random_theta(rng)
    else:
        teacher = hand.random_theta(rng, 1.0)
    Y = hand.output(X, teacher) + 0.1 * rng.normal(size=(P_TEST, hand.n_out))
    res = mt.find_minimum(hand, X, Y, teacher, gtol=1e-11)
    return hand, auto, X, Y, res.theta


@pytest.mark.parametrize("name", ["deep2", "deep3", "tanh"])
def test_local_theory_of_the_twins_agrees_at_a_minimum(name: str) -> None:
    """The exact linearisation (Eqs. 14, 29-33), App. A's Gauss-Newton form (Eqs. 79-81), the
    discrete and mini-batch recursions: what :mod:`weightdyn.models.cell` evaluates."""
    hand, auto, X, Y, theta = _minimum(name)
    lr, S = 0.05, 6
    errs = {}
    for drift in ("hessian", "gauss_newton"):
        a = mt.local_theory(auto, X, Y, theta, lr, S, "without", drift=drift, gtol=1e-10)
        h = mt.local_theory(hand, X, Y, theta, lr, S, "without", drift=drift, gtol=1e-10)
        assert (a.rank, a.null_dim) == (h.rank, h.null_dim)
        for key in ("H", "C", "M", "M_detailed", "Q", "M_discrete"):
            errs[f"{drift} {key}"] = rel(getattr(a, key), getattr(h, key))
    errs["M minibatch"] = rel(
        mt.minibatch_stationary_covariance(auto, X, Y, theta, lr, S),
        mt.minibatch_stationary_covariance(hand, X, Y, theta, lr, S),
    )
    for key, err in errs.items():
        report(f"{name} at the minimum, autodiff vs hand-written: {key}", err)
    assert max(errs.values()) < AUTODIFF_RTOL, errs
    Ms = mt.local_theory(hand, X, Y, theta, lr, S).M
    shift = rel(
        mt.smoothing_shift(auto, X, Y, theta, Ms), mt.smoothing_shift(hand, X, Y, theta, Ms)
    )
    report(f"{name} smoothing shift (gradient second differences), autodiff vs hand", shift)
    assert shift < 1e-8  # central differences of step 1e-3 in both: round-off / step^2


# ---------------------------------------------- cross-entropy and decay vs FD


def fd_check(model: Model, X, Y, theta, h: float = 1e-5) -> dict[str, float]:
    """Central differences: gradient from the loss, Hessian from the gradient, and each
    per-sample gradient from the one-sample loss (the per-sample objective)."""
    E = np.eye(model.n_params) * h
    g_fd = np.array([model.loss(X, Y, theta + e) - model.loss(X, Y, theta - e) for e in E])
    H_fd = np.stack([model.gradient(X, Y, theta + e) - model.gradient(X, Y, theta - e) for e in E],
                    axis=1)  # fmt: skip
    G_fd = np.array([[model.loss(X[m : m + 1], Y[m : m + 1], theta + e)
                      - model.loss(X[m : m + 1], Y[m : m + 1], theta - e) for e in E]
                     for m in range(3)])  # fmt: skip
    return {
        "gradient": rel(model.gradient(X, Y, theta), g_fd / (2 * h)),
        "hessian": rel(model.hessian(X, Y, theta), H_fd / (2 * h)),
        "per-sample": rel(model.per_sample_gradients(X[:3], Y[:3], theta), G_fd / (2 * h)),
        "sample hessians mean": rel(
            mt.sample_hessians(model, X, Y, theta).mean(axis=0), model.hessian(X, Y, theta)
        ),
    }


@functools.cache
def ce_models() -> dict[str, Model]:
    return {
        "MLP(3,4,4,3) gelu": MLP((3, 4, 4, 3), "gelu", loss="cross_entropy", weight_decay=CHI),
        "jax OneHidden tanh": with_objective(pair("tanh"), "cross_entropy+decay")[1],
        "OneHidden tanh (hand)": with_objective(pair("tanh"), "cross_entropy+decay")[0],
        "DeepLinear L=3 (hand)": with_objective(pair("deep3"), "cross_entropy+decay")[0],
    }


@pytest.mark.parametrize("name", ["MLP(3,4,4,3) gelu", "jax OneHidden tanh",
                                  "OneHidden tanh (hand)", "DeepLinear L=3 (hand)"])  # fmt: skip
def test_cross_entropy_with_weight_decay_matches_finite_differences(name: str) -> None:
    model = ce_models()[name]
    rng = np.random.default_rng(5)
    P = P_TEST
    X = rng.normal(size=(P, model.n_in))
    soft = rng.dirichlet(np.ones(model.n_out), size=P)  # soft labels are allowed too
    Y = np.where(np.arange(P)[:, None] < 5, np.eye(model.n_out)[rng.integers(0, model.n_out, P)],
                 soft)  # fmt: skip
    errs = fd_check(model, X, Y, model.random_theta(rng, 1.5))
    for key, err in errs.items():
        report(f"cross-entropy + decay, {name}: FD rel. error {key}", err)
    assert max(errs.values()) < FD_RTOL, errs


@pytest.mark.parametrize("which", ["hand", "auto"])
def test_weight_decay_adds_chi_theta_and_chi_identity(which: str) -> None:
    """App. B's L2 term, ``chi |theta|^2 / 2``: gradients gain ``chi theta``, Hessians and the
    Gauss-Newton matrix ``chi 1``; the noise (Eq. 14) is unchanged."""
    base = pair("tanh")[0 if which == "hand" else 1].with_objective("cross_entropy", 0.0)
    chi = CHI
    decayed = base.with_objective(weight_decay=chi)
    assert base.weight_decay == 0.0 and decayed.loss_function == CROSS_ENTROPY
    rng = np.random.default_rng(8)
    P, n, one = P_TEST, base.n_params, np.eye(base.n_params)
    X, Y, theta = rng.normal(size=(P, base.n_in)), labels(base, rng, (P,)), base.random_theta(rng)
    batches = replica_batches(base, rng, theta)
    with_decay, without = (
        derived(decayed, X, Y, theta, Y, batches),
        derived(base, X, Y, theta, Y, batches),
    )
    d = {k: with_decay[k] - without[k] for k in with_decay}
    errs = {
        "loss": rel(d["loss"], chi * theta @ theta / 2),
        "g^mu": rel(d["per-sample gradients"], np.tile(chi * theta, (P, 1))),
        "grad": rel(d["gradient"], chi * theta),
        "replicas": rel(d["replica gradients"], chi * batches[2]),
        "GN": rel(d["gauss_newton"], chi * one),
        "H": rel(d["hessian"], chi * one),
        "h^mu": rel(d["sample hessians"], np.broadcast_to(chi * one, (P, n, n))),
        "C": rel(mt.noise_covariance(decayed, X, Y, theta, 3), mt.noise_covariance(base, X, Y,
                                                                                    theta, 3)),
    }  # fmt: skip
    report(f"weight decay ({which}): max rel. error of the added terms", max(errs.values()))
    assert max(errs.values()) < 1e-12, errs


# ------------------------------------------------ the papers' path unchanged


@pytest.mark.parametrize("name", ["deep3", "tanh"])
def test_squared_error_without_decay_keeps_the_papers_expressions(name: str) -> None:
    """Bit-identical: the default objective is the papers', and ``with_objective`` with it
    changes nothing; the gradient is exactly ``J^T vec(f - Y) / P``."""
    hand = pair(name)[0]
    assert hand.paper_objective and hand.loss_function is SQUARED and hand.weight_decay == 0.0
    same = hand.with_objective("squared", 0.0)
    assert same is not hand and same.paper_objective
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(8, hand.n_in)), rng.normal(size=(8, hand.n_out))
    theta = hand.random_theta(rng)
    batches = (X[None], Y[None], theta[None])
    a, b = derived(hand, X, Y, theta, Y, batches), derived(same, X, Y, theta, Y, batches)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    J = hand.jacobian(X, theta)
    np.testing.assert_array_equal(a["gradient"], J.T @ (hand.output(X, theta) - Y).ravel() / 8)
    np.testing.assert_array_equal(a["gauss_newton"], J.T @ J / 8)
    R = hand.output(X, theta) - Y
    assert a["loss"] == 0.5 * np.sum(R**2) / 8


# ---------------------------------------------------------------- losses


def test_losses_values_residuals_and_curvatures() -> None:
    assert LOSSES == {"squared": SQUARED, "cross_entropy": CROSS_ENTROPY}
    rng = np.random.default_rng(0)
    F = rng.normal(size=(6, 4)) * 3
    Y = rng.dirichlet(np.ones(4), size=6)
    p = np.exp(F) / np.exp(F).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(CROSS_ENTROPY.value(F, Y), -np.sum(Y * np.log(p), axis=1),
                               rtol=1e-13)  # fmt: skip
    np.testing.assert_allclose(CROSS_ENTROPY.residual(F, Y), p - Y, rtol=1e-13, atol=1e-15)
    h = 1e-6
    for loss in (SQUARED, CROSS_ENTROPY):
        E = np.eye(4) * h
        r_fd = np.stack([loss.value(F + e, Y) - loss.value(F - e, Y) for e in E], axis=1) / (2 * h)
        L_fd = np.stack([loss.residual(F + e, Y) - loss.residual(F - e, Y) for e in E], axis=2)
        errs = (rel(loss.residual(F, Y), r_fd), rel(loss.curvature(F), L_fd / (2 * h)))
        report(f"{loss.name}: FD rel. error of residual, curvature", max(errs))
        assert max(errs) < FD_RTOL
    np.testing.assert_array_equal(SQUARED.curvature(F), np.broadcast_to(np.eye(4), (6, 4, 4)))
    np.testing.assert_array_equal(SQUARED.residual(F, Y), F - Y)
    # stable for huge logits: log-sum-exp with the maximum subtracted
    big = np.array([[1000.0, 0.0, -1000.0], [-800.0, -800.0, 800.0]])
    onehot = np.array([[1.0, 0, 0], [1.0, 0, 0]])
    np.testing.assert_allclose(CROSS_ENTROPY.value(big, onehot), [0.0, 1600.0], atol=1e-12)
    assert np.all(np.isfinite(CROSS_ENTROPY.curvature(big)))
    np.testing.assert_allclose(CROSS_ENTROPY.curvature(F) @ np.ones(4), 0, atol=1e-15)


def test_objective_errors() -> None:
    model = pair("tanh")[0]
    with pytest.raises(ValueError, match="cross_entropy loss needs N_o >= 2"):
        pair("tanh_wide")[0].with_objective("cross_entropy")
    with pytest.raises(ValueError, match="loss must be one of"):
        model.with_objective("hinge")
    with pytest.raises(ValueError, match="weight_decay must be finite and >= 0"):
        model.with_objective(weight_decay=-1.0)
    ce = model.with_objective("cross_entropy")
    X = np.zeros((2, model.n_in))
    with pytest.raises(ValueError, match="cross-entropy labels must be probabilities"):
        ce.gradient(X, np.array([[1.0, 1.0], [0.0, 1.0]]), ce.random_theta(np.random.default_rng()))
    assert model.loss_function is SQUARED  # with_objective made copies


def test_check_underparameterised_counts_the_values_the_loss_sees() -> None:
    """Cross-entropy sees P (N_o - 1) values (the common logit drops out); with weight decay the
    noise survives interpolation, so nothing is refused."""
    ce = jax_deep_linear([3, 2], loss="cross_entropy")  # a linear softmax classifier, n = 6
    X = np.random.default_rng(0).normal(size=(5, 3))
    assert mt.check_underparameterised(ce, X, np.ones(6)) == 3  # centred J has rank N_i
    with pytest.raises(ValueError, match=r"P \* \(N_o - 1\) = 5"):
        mt.check_underparameterised(ce, X)
    assert mt.check_underparameterised(ce.with_objective(weight_decay=0.1), X) == 6


# ------------------------------------------------------------- JaxModel API


def test_minibatch_gradient_fn_drives_a_jax_sgd_loop() -> None:
    """The pure gradient of the engine: jit, vmap and scan over it reproduce the numpy
    reference chain (Eqs. 10-11) and :meth:`JaxModel.replica_gradients`."""
    model = ce_models()["jax OneHidden tanh"]
    grad = model.minibatch_gradient_fn()
    assert model.minibatch_gradient_fn() is grad
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(P_TEST, model.n_in)), labels(model, rng, (P_TEST,))
    theta0, idx, lr = model.random_theta(rng), rng.integers(0, P_TEST, size=(7, 5)), 0.1
    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)

    def step(theta, batch):
        return theta - lr * grad(theta, Xj[batch], Yj[batch]), None

    final, _ = jax.jit(lambda t: jax.lax.scan(step, t, jnp.asarray(idx)))(theta0)
    ref = reference_chain(model, X, Y, theta0, lr, idx)
    Th = theta0 + 0.1 * rng.normal(size=(3, model.n_params))
    vm = jax.vmap(grad)(Th, X[idx[:3]], Y[idx[:3]])  # three replicas, batches of five
    errs = (rel(final, ref), rel(vm, model.replica_gradients(X[idx[:3]], Y[idx[:3]], Th)),
            rel(jax.jit(grad)(theta0, X, Y), model.gradient(X, Y, theta0)))  # fmt: skip
    report("JAX scan SGD vs numpy reference chain; vmap; jit", max(errs))
    assert max(errs) < 1e-12


def test_a_user_pytree_model_matches_finite_differences() -> None:
    """A user's ``apply`` on a nested pytree: the documented layout (sorted keys, C order) and
    autodiff derivatives against central differences."""

    def apply(params, X):
        z = jnp.sin(X @ params["w"]["in"]) @ params["a"] + params["c"]
        return jnp.stack([z, jnp.exp(0.3 * z)], axis=1)

    def init(rng):
        return {"w": {"in": rng.normal(size=(3, 2))}, "c": rng.normal(), "a": rng.normal(size=2)}

    model = JaxModel(apply, init, 3, 2, last_layer=slice(0, 3), name="sine")
    assert model.n_params == 9 and model.name == "sine"
    p = init(np.random.default_rng(1))
    theta = model.flatten(p)
    np.testing.assert_array_equal(theta, np.concatenate([p["a"], [p["c"]], p["w"]["in"].ravel()]))
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    h, E = 1e-5, np.eye(9) * 1e-5
    J_fd = np.stack([(model.output(X, theta + e) - model.output(X, theta - e)).ravel() for e in E],
                    axis=1) / (2 * h)  # fmt: skip
    errs = {"J": rel(model.jacobian(X, theta), J_fd), **fd_check(model, X, Y, theta)}
    errs["H split"] = rel(model.gauss_newton(X, theta) + model.residual_hessian(X, Y, theta),
                          model.hessian(X, Y, theta))  # fmt: skip
    report("user pytree model: FD rel. error, max", max(errs.values()))
    assert max(errs.values()) < FD_RTOL, errs


def test_nonsmooth_activations_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match=r"activation 'relu' is refused: .*second derivative"):
        MLP((2, 3, 1), "relu")
    with pytest.raises(ValueError, match="'elu' is refused: it is only once differentiable"):
        MLP((2, 3, 1), "elu")
    with pytest.raises(ValueError, match="activation must be one of"):
        MLP((2, 3, 1), "swish!")
    with pytest.raises(ValueError, match=r"widths must list"):
        MLP((2,))
    relu = MLP((2, 3, 1), "relu", allow_nonsmooth=True)
    X = np.array([[1.0, -2.0], [0.5, 0.5]])
    theta = relu.random_theta(np.random.default_rng(0))
    W1, b1 = relu.weights(theta)[0]
    expected = (
        np.maximum(X @ W1.T + b1, 0) @ relu.weights(theta)[1][0].T + relu.weights(theta)[1][1]
    )
    np.testing.assert_allclose(relu.output(X, theta), expected, rtol=1e-14)


def test_a_bad_apply_gives_a_clear_error() -> None:
    def init(rng):
        return {"w": rng.normal(size=3)}

    nan_model = JaxModel(lambda p, X: jnp.log(X @ p["w"] - 1e9)[:, None], init, 3, 1, name="lognet")
    X, theta = np.ones((4, 3)), np.ones(3)
    with pytest.raises(ValueError, match=r"JaxModel 'lognet': apply\(params, X\) is NaN"):
        nan_model.output(X, theta)
    with pytest.raises(ValueError, match="JaxModel 'lognet': the gradient is NaN"):
        nan_model.gradient(X, np.zeros(4), theta)
    with pytest.raises(
        ValueError, match=r"JaxModel 'flat': .*shape \(P, N_o\) = \(1, 1\).*got \(1,\)"
    ):
        JaxModel(lambda p, X: X @ p["w"], init, 3, 1, name="flat")
    with pytest.raises(ValueError, match=r"JaxModel 'f32': .*float64.*got float32"):
        JaxModel(lambda p, X: (X @ p["w"])[:, None].astype(jnp.float32), init, 3, 1, name="f32")
    with pytest.raises(ValueError, match="JaxModel 'narrow': apply\\(params, X\\) fails"):
        JaxModel(lambda p, X: (X[:, :2] @ p["w"])[:, None], init, 3, 1, name="narrow")
    with pytest.raises(ValueError, match="no JAX form of the loss"):
        JaxModel(lambda p, X: (X @ p["w"])[:, None], init, 3, 1,
                 loss=dataclasses.replace(SQUARED, name="mine"))  # fmt: skip


def test_find_minimum_and_local_theory_for_cross_entropy_with_decay() -> None:
    """A softmax classifier (tanh MLP, cross-entropy, chi = 1e-2) on teacher classes: the
    minimum by Newton/trust-region on the true Hessian, an isolated minimum (H >= 0), the
    Lyapunov equation (Eq. 29) solved."""
    model = MLP((3, 4, 3), "tanh", loss="cross_entropy", weight_decay=1e-2)
    rng = np.random.default_rng(6)
    X = rng.normal(size=(80, 3))
    teacher = model.random_theta(rng, 2.0)
    p = np.exp(model.output(X, teacher))
    p /= p.sum(axis=1, keepdims=True)
    Y = np.eye(3)[[rng.choice(3, p=row) for row in p]]
    res = mt.find_minimum(model, X, Y, model.random_theta(rng), gtol=1e-10)
    report("find_minimum cross-entropy + decay |grad L|", res.grad_norm)
    assert res.converged
    lr, S = 0.1, 8
    lt = mt.local_theory(model, X, Y, res.theta, lr, S, gtol=1e-10)
    assert lt.null_dim == 0 and np.linalg.eigvalsh(lt.H)[0] > 0
    lyap = lt.H @ lt.M + lt.M @ lt.H - lr * lt.C
    assert np.max(np.abs(lyap)) < 1e-10 * np.max(np.abs(lr * lt.C))
    lin = mt.jacobian_linearisation(model, X, Y, res.theta, S)
    np.testing.assert_array_equal(lin.targets, Y)  # a GLM in the features J, labels unchanged
    np.testing.assert_allclose(lin.drift, model.gauss_newton(X, res.theta), rtol=0, atol=0)
