"""Equinox and Flax modules through weightdyn.models.adapters (issue 33).

A 4-5-3 tanh MLP written in each framework, loaded with the weights of the built-in
:class:`~weightdyn.models.jax_model.MLP` at a random ``theta``, gives the same outputs (also
against calling the framework's module directly), Jacobian (paper 000 Eq. 80), Hessian of the
loss with weight decay, per-sample gradients (Eq. 14) and JAX-engine SGD (Eqs. 10-11) as the
built-in model, up to the permutation between the two ``theta`` layouts. Each framework's tests
are skipped where it is not installed (equinox is in the test extra; flax is not, being heavy).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from weightdyn.models import adapters
from weightdyn.models.jax_model import MLP, JaxModel
from weightdyn.models.simulate import run_sgd
from weightdyn.sgd import Schedule, Update

RTOL = 1e-12
WIDTHS, P, CHI = (4, 5, 3), 12, 0.3
N_PARAMS = 5 * (4 + 1) + 3 * (5 + 1)
LAST_LAYER = slice(N_PARAMS - 3 * (5 + 1), N_PARAMS)
Weights = list[tuple[np.ndarray, np.ndarray]]  # [(W_l (N_l, N_{l-1}), b_l)]


def report(name: str, value: float) -> None:
    print(f"\n[jax-adapters] {name}: {value:.3e}")


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """Max-abs error relative to the max-abs reference entry."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@dataclass(frozen=True)
class Case:
    """An adapted framework MLP: the model, ``params(weights)`` (the framework's parameter
    pytree holding the built-in MLP's weights) and ``direct(weights, X)`` (the framework's own
    module called on ``X``)."""

    model: JaxModel
    params: Callable[[Weights], Any]
    direct: Callable[[Weights, np.ndarray], jax.Array]


def equinox_case() -> Case:
    """``eqx.nn.MLP`` built in float32 (converted by the adapter), acting on one sample."""
    eqx = pytest.importorskip("equinox")
    net = eqx.nn.MLP(4, 3, 5, 1, jnp.tanh, key=jax.random.key(0), dtype=jnp.float32)

    def where(m: Any) -> list[jax.Array]:
        return [x for layer in m.layers for x in (layer.weight, layer.bias)]

    def module(weights: Weights) -> Any:
        return eqx.tree_at(where, net, [jnp.asarray(a) for W, b in weights for a in (W, b)])

    model = adapters.from_equinox(net, 4, 3, weight_decay=CHI, last_layer=LAST_LAYER)
    return Case(model, lambda w: eqx.partition(module(w), eqx.is_inexact_array)[0],
                lambda w, X: jax.vmap(module(w))(X))  # fmt: skip


def linen_case() -> Case:
    """A linen module with two named ``Dense`` layers (linen's float32 ``param_dtype``)."""
    linen = pytest.importorskip("flax.linen")

    class Net(linen.Module):
        @linen.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            return linen.Dense(3, name="out")(jnp.tanh(linen.Dense(5, name="hidden")(x)))

    def params(weights: Weights) -> dict:
        (W1, b1), (W2, b2) = weights
        return {"hidden": {"kernel": W1.T, "bias": b1}, "out": {"kernel": W2.T, "bias": b2}}

    net = Net()
    model = adapters.from_flax_linen(net, 4, 3, weight_decay=CHI, last_layer=LAST_LAYER)
    return Case(model, params, lambda w, X: net.apply({"params": params(w)}, X))


def nnx_case() -> Case:
    """An ``nnx.Sequential`` from a function of ``nnx.Rngs`` (a fresh module per start)."""
    nnx = pytest.importorskip("flax.nnx")

    def make(rngs: Any) -> Any:
        return nnx.Sequential(nnx.Linear(4, 5, rngs=rngs), jnp.tanh, nnx.Linear(5, 3, rngs=rngs))

    def module(weights: Weights) -> Any:
        net = make(nnx.Rngs(0))
        for layer, (W, b) in zip(net.layers[::2], weights, strict=True):
            layer.kernel.set_value(jnp.asarray(W.T))  # float64: replaced, not cast to float32
            layer.bias.set_value(jnp.asarray(b))
        return net

    model = adapters.from_flax_nnx(make, 4, 3, weight_decay=CHI, last_layer=LAST_LAYER)
    return Case(model, lambda w: nnx.split(module(w), nnx.Param, ...)[1],
                lambda w, X: module(w)(X))  # fmt: skip


CASES = {"equinox": equinox_case, "flax_linen": linen_case, "flax_nnx": nnx_case}


@functools.cache
def builtin() -> MLP:
    return MLP(WIDTHS, "tanh", weight_decay=CHI)


@functools.cache
def _case(framework: str) -> Case:
    return CASES[framework]()


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    """The framework's case (compiled once per worker), skipped where it is not installed."""
    return _case(request.param)


def permutation(case: Case) -> np.ndarray:
    """``perm`` with ``theta_adapter = theta_builtin[perm]`` for the same weights."""
    index = builtin().weights(np.arange(N_PARAMS, dtype=float))
    perm = case.model.flatten(case.params(index)).astype(int)
    np.testing.assert_array_equal(np.sort(perm), np.arange(N_PARAMS))
    return perm


def problem(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(P, 4)), rng.normal(size=(P, 3))
    return X, Y, builtin().random_theta(rng, 1.5)


def test_layout_dtype_and_output_layer(case: Case) -> None:
    model, perm = case.model, permutation(case)
    assert (model.n_in, model.n_out, model.n_params) == (4, 3, N_PARAMS)
    assert all(a.dtype == np.float64 for a in jax.tree_util.tree_leaves(model.params(perm)))
    # the output layer's block of theta is the same set of weights in both layouts
    np.testing.assert_array_equal(np.sort(perm[LAST_LAYER]), np.arange(N_PARAMS)[LAST_LAYER])


def test_derivatives_equal_the_builtin_mlp(case: Case) -> None:
    """Outputs (and the framework's own call), J, Hessian of the loss + decay, g^mu."""
    X, Y, theta = problem()
    model, ref, perm = case.model, builtin(), permutation(case)
    theta_a = theta[perm]
    np.testing.assert_array_equal(model.flatten(case.params(ref.weights(theta))), theta_a)
    errs = {
        "output": rel(model.output(X, theta_a), ref.output(X, theta)),
        "output vs the module's own call": rel(
            model.output(X, theta_a), case.direct(ref.weights(theta), X)
        ),
        "jacobian": rel(model.jacobian(X, theta_a), ref.jacobian(X, theta)[:, perm]),
        "hessian": rel(model.hessian(X, Y, theta_a), ref.hessian(X, Y, theta)[np.ix_(perm, perm)]),
        "per-sample gradients": rel(
            model.per_sample_gradients(X, Y, theta_a),
            ref.per_sample_gradients(X, Y, theta)[:, perm],
        ),
    }
    for key, err in errs.items():
        report(f"{model.name}: {key}", err)
    assert max(errs.values()) < RTOL, errs


def test_jax_engine_sgd_follows_the_builtin_mlp(case: Case) -> None:
    """Three replicas, 48 steps from the same seed: the same batches, so the same path."""
    X, Y, theta = problem(1)
    perm = permutation(case)

    def sgd(model: JaxModel, t: np.ndarray) -> Any:
        return run_sgd(
            model, X, Y, np.tile(t, (3, 1)), theta_ref=t, update=Update(0.05, 4, "with"),
            schedule=Schedule(0, 48, 4, 2), rng=np.random.default_rng(7), engine="jax",
        )  # fmt: skip

    got, ref = sgd(case.model, theta[perm]), sgd(builtin(), theta)
    assert got.engine == "jax" and not got.diverged.any()
    assert np.isfinite(got.sum_d).all() and np.isfinite(got.sum_dd).all()
    np.testing.assert_array_equal(got.n_records, ref.n_records)
    errs = {"SGD final": rel(got.final, ref.final[:, perm]),
            "SGD sum_d": rel(got.sum_d, ref.sum_d[..., perm])}  # fmt: skip
    for key, err in errs.items():
        report(f"{case.model.name}: {key}", err)
    assert max(errs.values()) < RTOL, errs


def test_module_or_builder_sets_the_random_start() -> None:
    """A module: the same start for every generator; a builder: one per generator."""
    eqx = pytest.importorskip("equinox")

    def make(key: jax.Array) -> Any:
        return eqx.nn.MLP(4, 3, 5, 1, jnp.tanh, key=key)

    fixed = adapters.from_equinox(make(jax.random.key(1)), 4, 3)
    fresh = adapters.from_equinox(make, 4, 3)
    a, b = (np.random.default_rng(s) for s in (1, 2))
    np.testing.assert_array_equal(fixed.random_theta(a), fixed.random_theta(b))
    np.testing.assert_array_equal(2 * fixed.random_theta(a), fixed.random_theta(b, 2.0))
    assert not np.array_equal(fresh.random_theta(a), fresh.random_theta(b))
    assert fresh.name == "equinox MLP"
    with pytest.raises(TypeError, match=r"must return an equinox\.Module"):
        adapters.from_equinox(lambda key: None, 4, 3)


@pytest.mark.parametrize(
    ("adapter", "hidden", "package"),
    [
        (adapters.from_equinox, ("equinox",), "equinox"),
        (adapters.from_flax_linen, ("flax", "flax.linen"), "flax"),
        (adapters.from_flax_nnx, ("flax", "flax.nnx"), "flax"),
    ],
)
def test_missing_framework_names_the_package_and_pip_command(
    monkeypatch: pytest.MonkeyPatch, adapter: Callable, hidden: tuple[str, ...], package: str
) -> None:
    for name in hidden:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=rf"{adapter.__name__} needs {package}") as err:
        adapter(object(), 4, 3)
    assert f"pip install '{adapters.PIP_REQUIREMENTS[package]}'" in str(err.value)
