"""Models as JAX functions: every derivative by automatic differentiation in float64.

A researcher's network is ``apply(params, X) -> (P, N_o)`` (``params`` any pytree of arrays,
``X`` of shape ``(P, N_i)``, one row per sample) and ``init(rng) -> params`` (``rng`` a
:class:`numpy.random.Generator`). :class:`JaxModel` turns the pair into a
:class:`~weightdyn.models.base.Model`: the output, the Jacobian of Eq. 80, the residual
curvature, per-sample gradients (Eq. 14), the Hessian of the loss and the replicas' mini-batch
gradients (Eqs. 10-11) all come from ``jax.jacfwd``/``jax.jacrev``/``jax.grad``/``jax.hessian``,
so the local theory of paper 000 (App. A, Eqs. 79-81, with Eqs. 13-14 and 29-33) applies to any
smooth network, any loss of :mod:`weightdyn.models.losses` and a weight decay.

**64-bit**: importing this module calls ``jax.config.update("jax_enable_x64", True)``, for the
whole process (the theory needs float64: Lyapunov solves and Hessian rank cuts at ``1e-13``).
``apply`` must return float64 (checked at construction).

**theta layout**: ``theta = ravel_pytree(params)[0]`` (:func:`jax.flatten_util.ravel_pytree`):
the pytree's leaves in JAX's order (dict keys sorted, lists and tuples in order), each leaf
flattened row-major (C order). :class:`MLP` stores each weight matrix transposed, ``(N_{l-1},
N_l)``, so its row-major flattening is the column-major ``vec`` of the paper's ``(N_l,
N_{l-1})`` matrix: ``theta = [vec(W_1); b_1; vec(W_2); b_2; ...]``, the layout of the
hand-written :class:`~weightdyn.models.DeepLinear` and :class:`~weightdyn.models.OneHidden`.

Compiled functions are jitted once per model instance and cached (per loss and decay for the
objective's derivatives); a new shape of ``X`` retraces as usual in JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402
from numpy.typing import ArrayLike  # noqa: E402

from weightdyn.models.base import FloatArray, Model  # noqa: E402
from weightdyn.models.losses import LOSSES, SQUARED, Loss  # noqa: E402

__all__ = [
    "ACTIVATIONS",
    "MLP",
    "NONSMOOTH_ACTIVATIONS",
    "JaxModel",
    "jax_deep_linear",
    "jax_one_hidden",
]

Params = Any  # a pytree of float arrays
Apply = Callable[[Params, jax.Array], jax.Array]
Init = Callable[[np.random.Generator], Params]
#: ``(theta (n,), Xb (S, N_i), Yb (S, N_o)) -> (n,)``
MinibatchGradient = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def _squared(F: jax.Array, Y: jax.Array) -> jax.Array:
    return 0.5 * jnp.sum((F - Y) ** 2, axis=-1)


def _cross_entropy(F: jax.Array, Y: jax.Array) -> jax.Array:
    return -jnp.sum(Y * jax.nn.log_softmax(F, axis=-1), axis=-1)


#: per-sample losses ``(P, N_o), (P, N_o) -> (P,)`` in JAX, by :attr:`Loss.name`
JAX_LOSSES: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "squared": _squared,
    "cross_entropy": _cross_entropy,
}


def _float64_tree(params: Params) -> Params:
    return jax.tree_util.tree_map(lambda a: np.asarray(a, dtype=np.float64), params)


def _check_slice(last_layer: slice | None, n: int) -> slice | None:
    if last_layer is None:
        return None
    if not isinstance(last_layer, slice) or len(range(*last_layer.indices(n))) == 0:
        raise ValueError(f"last_layer must be None or a non-empty slice of theta (n = {n})")
    start, stop, step = last_layer.indices(n)
    if step != 1:
        raise ValueError(f"last_layer must be a contiguous slice, got {last_layer!r}")
    return slice(start, stop)


class JaxModel(Model):
    """A :class:`~weightdyn.models.base.Model` from ``apply(params, X)`` and ``init(rng)``.

    ``n_in``/``n_out`` the input and output widths, ``last_layer`` the slice of ``theta``
    holding the output layer (Fig. 7a's IVFR; None if there is none), ``loss`` a
    :class:`~weightdyn.models.losses.Loss` or its name and ``weight_decay`` ``chi >= 0``
    (:mod:`weightdyn.models.base`), ``name`` for messages (default ``apply.__name__``).
    ``init`` is called once with ``default_rng(0)`` to learn the pytree's structure.
    ``ValueError`` if ``apply`` fails on ``X`` of shape ``(P, n_in)``, returns another shape
    than ``(P, n_out)`` or not float64, or (at run time) NaN for finite inputs. Everything is
    float64 (this module turns on ``jax_enable_x64``). Compiled functions are cached on the
    instance; :meth:`with_objective` copies share the cache (keys carry the objective).
    """

    def __init__(
        self,
        apply: Apply,
        init: Init,
        n_in: int,
        n_out: int,
        *,
        last_layer: slice | None = None,
        loss: Loss | str = SQUARED,
        weight_decay: float = 0.0,
        name: str | None = None,
    ) -> None:
        self.name = str(name or getattr(apply, "__name__", "apply"))
        self.n_in, self.n_out = _width(n_in, "n_in"), _width(n_out, "n_out")
        self._apply, self._init = apply, init
        template = _float64_tree(init(np.random.default_rng(0)))
        flat, self._unravel = ravel_pytree(template)
        self._treedef = jax.tree_util.tree_structure(template)
        self._n_params = int(flat.size)
        self._last_layer = _check_slice(last_layer, self._n_params)
        self._compiled: dict[Any, Callable] = {}
        self._set_objective(loss, weight_decay)
        self._check_apply(template)

    # ------------------------------------------------------------------ set-up

    @property
    def _who(self) -> str:
        return f"{type(self).__name__} {self.name!r}"

    def _set_objective(self, loss: Loss | str, weight_decay: float) -> None:
        """:meth:`Model._set_objective`, and the loss must have a JAX form (:data:`JAX_LOSSES`)."""
        super()._set_objective(loss, weight_decay)
        name = self.loss_function.name
        if name not in JAX_LOSSES or LOSSES.get(name) != self.loss_function:
            raise ValueError(f"{self._who}: no JAX form of the loss {self.loss_function!r}; "
                             f"available: {sorted(JAX_LOSSES)}")  # fmt: skip

    def _check_apply(self, template: Params) -> None:
        """``apply`` on abstract ``X`` of 1 and 3 rows must give ``(P, n_out)`` float64."""
        for P in (1, 3):
            X = jax.ShapeDtypeStruct((P, self.n_in), jnp.float64)
            try:
                out = jax.eval_shape(self._apply, template, X)
            except Exception as err:
                raise ValueError(f"{self._who}: apply(params, X) fails for X of shape "
                                 f"({P}, {self.n_in}): {err}") from err  # fmt: skip
            shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
            if shape != (P, self.n_out):
                raise ValueError(f"{self._who}: apply(params, X) must return shape (P, N_o) = "
                                 f"({P}, {self.n_out}) for X of shape ({P}, {self.n_in}), "
                                 f"got {shape}")  # fmt: skip
            if dtype != jnp.float64:
                raise ValueError(f"{self._who}: apply(params, X) must return float64 (the "
                                 f"theory needs it), got {dtype}")  # fmt: skip

    def _cached(self, key: str, build: Callable[[], Callable], objective: bool = False) -> Callable:
        """The compiled function ``key`` of this instance (built once; per objective)."""
        if objective:
            key = (key, self.loss_function.name, self.weight_decay)
        fn = self._compiled.get(key)
        if fn is None:
            fn = self._compiled[key] = build()
        return fn

    def _finite(self, value: jax.Array, what: str, *inputs: FloatArray) -> FloatArray:
        """``value`` as a numpy array; ``ValueError`` naming the model if it holds NaN where all
        ``inputs`` are finite (a fault of ``apply``, not of its arguments)."""
        out = np.array(value, dtype=float)
        if np.isnan(out).any() and all(np.isfinite(a).all() for a in inputs):
            raise ValueError(f"{self._who}: {what} is NaN for finite theta and X: apply(params, X) "
                             "returns NaN or has a NaN derivative there")  # fmt: skip
        return out

    # ------------------------------------------------------------------ pure functions

    def forward_fn(self) -> Callable[[jax.Array, jax.Array], jax.Array]:
        """Pure ``f(theta, X) = apply(unravel(theta), X)``, shape ``(P, N_o)``."""
        apply, unravel = self._apply, self._unravel
        return lambda theta, X: apply(unravel(theta), X)

    def objective_fn(self) -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
        """Pure ``L(theta, X, Y) = mean_mu l(f(x^mu), y^mu) + chi |theta|^2 / 2`` (the model's
        loss and decay; :mod:`weightdyn.models.base`)."""
        f, loss, chi = self.forward_fn(), JAX_LOSSES[self.loss_function.name], self.weight_decay

        def objective(theta: jax.Array, X: jax.Array, Y: jax.Array) -> jax.Array:
            value = jnp.mean(loss(f(theta, X), Y))
            return value + 0.5 * chi * jnp.dot(theta, theta) if chi else value

        return objective

    def minibatch_gradient_fn(self) -> MinibatchGradient:
        """Pure, jax-traceable ``(theta (n,), Xb (S, N_i), Yb (S, N_o)) -> (n,)``: the gradient
        of the batch-mean loss plus ``chi |theta|^2 / 2`` (one SGD step is Eqs. 10-11,
        ``theta - lr * g``). Not jitted (jit or vmap it in the caller); the same object on
        every call for this model and objective."""
        return self._cached("minibatch_gradient", lambda: jax.grad(self.objective_fn()), True)

    def params(self, theta: ArrayLike) -> Params:
        """The pytree of ``theta`` (module docstring's layout)."""
        return self._unravel(jnp.asarray(theta, dtype=jnp.float64))

    def flatten(self, params: Params) -> FloatArray:
        """``theta`` of a pytree of this model's structure."""
        if jax.tree_util.tree_structure(params) != self._treedef:
            raise ValueError(f"{self._who}: params have another pytree structure than init's")
        flat, _ = ravel_pytree(_float64_tree(params))
        if flat.size != self._n_params:
            raise ValueError(f"{self._who}: params have {flat.size} entries, expected "
                             f"{self._n_params} (leaf shapes differ from init's)")  # fmt: skip
        return np.array(flat, dtype=float)

    # ------------------------------------------------------------------ Model interface

    @property
    def n_params(self) -> int:
        return self._n_params

    @property
    def last_layer(self) -> slice | None:
        return self._last_layer

    def random_theta(self, rng: np.random.Generator, scale: float = 1.0) -> FloatArray:
        """``scale`` times the flattened ``init(rng)``."""
        return float(scale) * self.flatten(self._init(rng))

    def output(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        X, theta, _ = self.check_inputs(X, theta)
        fn = self._cached("output", lambda: jax.jit(self.forward_fn()))
        F = self._finite(fn(theta, X), "apply(params, X)", theta, X)
        if F.shape != (X.shape[0], self.n_out):
            raise ValueError(f"{self._who}: apply(params, X) returned shape {F.shape}, expected "
                             f"(P, N_o) = ({X.shape[0]}, {self.n_out})")  # fmt: skip
        return F

    def jacobian(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        """``df_k(x^mu)/dtheta`` (Eq. 80), rows sample-major; forward mode where ``n <= P N_o``."""
        X, theta, _ = self.check_inputs(X, theta)
        fn = self._cached("jacobian", lambda: jax.jit(_jacobian(self.forward_fn(), self.n_out)))
        return self._finite(fn(theta, X), "the Jacobian", theta, X)

    def output_hessian_contract(self, X: ArrayLike, theta: ArrayLike, R: ArrayLike) -> FloatArray:
        """``d^2/dtheta^2 sum_{mu,k} R[mu, k] f_k(x^mu)`` by ``jax.hessian``, symmetrised."""
        X, theta, _ = self.check_inputs(X, theta)
        R = np.asarray(R, dtype=float).reshape(X.shape[0], self.n_out)
        f = self.forward_fn()
        fn = self._cached("contract", lambda: jax.jit(_hessian(
            lambda t, X, R: jnp.sum(R * f(t, X)), self.n_params)))  # fmt: skip
        H = self._finite(fn(theta, X, R), "the output Hessian", theta, X, R)
        return 0.5 * (H + H.T)

    def per_sample_gradients(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """``g^mu`` of ``l^mu + chi |theta|^2 / 2`` (Eq. 14) by ``vmap(grad)`` over samples."""
        X, theta, Y = self.check_inputs(X, theta, Y)

        def build() -> Callable:
            grad = jax.grad(self.objective_fn())
            return jax.jit(jax.vmap(lambda t, x, y: grad(t, x[None], y[None]), (None, 0, 0)))

        G = self._cached("per_sample", build, True)(theta, X, Y)
        return self._finite(G, "a per-sample gradient", theta, X, Y)

    def gradient(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """``grad L`` (the model's loss and decay) by ``jax.grad``."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        fn = self._cached("gradient", lambda: jax.jit(self.minibatch_gradient_fn()), True)
        return self._finite(fn(theta, X, Y), "the gradient", theta, X, Y)

    def hessian(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Full Hessian of ``L`` by ``jax.hessian`` (forward over reverse; in column blocks above
        :data:`HESSIAN_BLOCK` parameters), symmetrised."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        fn = self._cached("hessian", lambda: jax.jit(_hessian(self.objective_fn(), self.n_params)),
                          True)  # fmt: skip
        H = self._finite(fn(theta, X, Y), "the Hessian", theta, X, Y)
        return 0.5 * (H + H.T)

    def replica_gradients(self, Xb: ArrayLike, Yb: ArrayLike, Theta: ArrayLike) -> FloatArray:
        """Each replica's gradient on its own batch (Eqs. 10-11): ``jit(vmap)`` of
        :meth:`minibatch_gradient_fn` over ``(Theta, Xb, Yb)``; no NaN check (diverging SGD
        replicas are the caller's business)."""
        Xb, Yb, Theta = (np.asarray(a, dtype=float) for a in (Xb, Yb, Theta))
        Yb = Yb.reshape(*Xb.shape[:2], self.n_out)
        fn = self._cached("replicas", lambda: jax.jit(jax.vmap(self.minibatch_gradient_fn())),
                          True)  # fmt: skip
        return np.array(fn(Theta, Xb, Yb), dtype=float)


#: Hessians of more parameters are built HESSIAN_BLOCK columns at a time: ``jax.hessian`` pushes
#: all n tangents through the reverse pass at once, (n x P x width) floats of activations (17.7
#: GB for digits 64-50-50-10 at P = 1000); a block holds HESSIAN_BLOCK of them
HESSIAN_BLOCK = 256


def _hessian(fun: Callable[..., jax.Array], n: int) -> Callable[..., jax.Array]:
    """``(theta, *args) -> d^2 fun / dtheta^2``: ``jax.hessian`` for ``n <= HESSIAN_BLOCK``, else
    Hessian-vector products (forward over reverse, as ``jax.hessian``) on blocks of
    ``HESSIAN_BLOCK`` unit vectors under ``lax.map``."""
    if n <= HESSIAN_BLOCK:
        return jax.hessian(fun)
    grad = jax.grad(fun)
    blocks = -(-n // HESSIAN_BLOCK)

    def hessian(theta: jax.Array, *args: jax.Array) -> jax.Array:
        def columns(E: jax.Array) -> jax.Array:
            push = lambda e: jax.jvp(lambda t: grad(t, *args), (theta,), (e,))[1]  # noqa: E731
            return jax.vmap(push)(E)

        E = jnp.eye(blocks * HESSIAN_BLOCK, n, dtype=theta.dtype)
        H = jax.lax.map(columns, E.reshape(blocks, HESSIAN_BLOCK, n))
        return H.reshape(-1, n)[:n]

    return hessian


def _width(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _jacobian(f: Callable, n_out: int) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``(theta, X) -> (P N_o, n)`` Jacobian of ``f``; ``jacfwd`` if ``n <= P N_o`` (fewer
    directions than outputs), else ``jacrev`` (decided at trace time from the shapes)."""

    def jac(theta: jax.Array, X: jax.Array) -> jax.Array:
        P, n = X.shape[0], theta.shape[0]
        mode = jax.jacfwd if n <= P * n_out else jax.jacrev
        return mode(f)(theta, X).reshape(P * n_out, n)

    return jac


# ---------------------------------------------------------------------------- MLP

_KINK = (
    "it is piecewise smooth with a kink: its second derivative is zero almost everywhere and "
    "undefined at the kink, so the Hessian (Eqs. 13, 29) misses the kink's curvature"
)

#: smooth (C^2 or better) activations by name
ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "gelu": partial(jax.nn.gelu, approximate=False),
    "gelu_tanh": partial(jax.nn.gelu, approximate=True),
    "softplus": jax.nn.softplus,
    "silu": jax.nn.silu,
    "sigmoid": jax.nn.sigmoid,
    "mish": jax.nn.mish,
    "identity": lambda z: z,
}

#: activations that are not twice continuously differentiable: name -> (function, reason)
NONSMOOTH_ACTIVATIONS: dict[str, tuple[Callable[[jax.Array], jax.Array], str]] = {
    "relu": (jax.nn.relu, _KINK),
    "leaky_relu": (jax.nn.leaky_relu, _KINK),
    "relu6": (jax.nn.relu6, _KINK),
    "hard_tanh": (jax.nn.hard_tanh, _KINK),
    "abs": (jnp.abs, _KINK),
    "elu": (jax.nn.elu, "it is only once differentiable: its second derivative jumps at 0, so "
            "the Hessian (Eqs. 13, 29) is discontinuous there"),
}  # fmt: skip


def activation_function(name: str, allow_nonsmooth: bool = False) -> Callable:
    """The activation ``name`` of :data:`ACTIVATIONS`; one of :data:`NONSMOOTH_ACTIVATIONS`
    only with ``allow_nonsmooth`` (else ``ValueError`` with the reason)."""
    if name in ACTIVATIONS:
        return ACTIVATIONS[name]
    if name in NONSMOOTH_ACTIVATIONS:
        phi, reason = NONSMOOTH_ACTIVATIONS[name]
        if allow_nonsmooth:
            return phi
        raise ValueError(
            f"activation {name!r} is refused: {reason}. The local theory needs the Hessian of the "
            f"loss. Pass allow_nonsmooth=True to use it anyway, or a smooth activation: "
            f"{sorted(ACTIVATIONS)}"
        )
    raise ValueError(
        f"activation must be one of {sorted(ACTIVATIONS)} (smooth) or, with "
        f"allow_nonsmooth=True, {sorted(NONSMOOTH_ACTIVATIONS)}; got {name!r}"
    )


class MLP(JaxModel):
    """Fully connected network ``h_l = phi(W_l h_{l-1} + b_l)``, linear output layer ``f =
    W_L h_{L-1} + b_L``, ``widths = (N_i, N_1, ..., N_o)``.

    ``theta = [vec(W_1); b_1; ...; vec(W_L); b_L]`` (column-major vec, module docstring; no
    ``b_l`` with ``biases=False``): the layout of :class:`~weightdyn.models.OneHidden` for one
    hidden layer and of :class:`~weightdyn.models.DeepLinear` with ``"identity"`` and no
    biases. ``init``: the entries of ``[W_l | b_l]`` i.i.d. ``N(0, 1 / fan_in)`` with
    ``fan_in = N_{l-1} + 1`` (``N_{l-1}`` without biases), drawn as one ``(N_l, N_{l-1} + 1)``
    matrix per layer, so ``random_theta`` equals the hand-written models' for the same
    generator. ``activation`` from :func:`activation_function`.
    """

    def __init__(
        self,
        widths: Sequence[int],
        activation: str = "tanh",
        biases: bool = True,
        *,
        allow_nonsmooth: bool = False,
        loss: Loss | str = SQUARED,
        weight_decay: float = 0.0,
        name: str | None = None,
    ) -> None:
        widths = tuple(_width(w, "widths entry") for w in widths)
        if len(widths) < 2:
            raise ValueError(f"widths must list (N_i, ..., N_o), at least 2 entries, got {widths}")
        phi = activation_function(activation, allow_nonsmooth)
        self.widths, self.activation, self.biases = widths, activation, bool(biases)
        self.shapes = [(widths[i + 1], widths[i]) for i in range(len(widths) - 1)]
        n_last = widths[-1] * (widths[-2] + self.biases)
        n = sum(a * (b + self.biases) for a, b in self.shapes)
        super().__init__(
            partial(_mlp_apply, phi=phi), partial(_mlp_init, shapes=self.shapes, biases=biases),
            widths[0], widths[-1], last_layer=slice(n - n_last, n), loss=loss,
            weight_decay=weight_decay, name=name or f"MLP{widths} {activation}",
        )  # fmt: skip

    @property
    def depth(self) -> int:
        return len(self.shapes)

    def weight_slices(self) -> list[slice]:
        """Where each layer's weight matrix ``W_l`` (no bias) sits in ``theta``: the layers are
        contiguous in order, each its ``W`` then its ``b``."""
        out, start = [], 0
        for a, b in self.shapes:
            out.append(slice(start, start + a * b))
            start += a * (b + self.biases)
        return out

    def weights(self, theta: ArrayLike) -> list[tuple[FloatArray, FloatArray | None]]:
        """``[(W_l, b_l)]`` with ``W_l`` of shape ``(N_l, N_{l-1})`` (``b_l`` None without
        biases)."""
        return [(np.array(layer["W"]).T, np.array(layer["b"]) if "b" in layer else None)
                for layer in self.params(theta)]  # fmt: skip


def _mlp_apply(params: list[dict[str, jax.Array]], X: jax.Array, *, phi: Callable) -> jax.Array:
    """``X (P, N_i) -> (P, N_o)``: ``h <- phi(h W + b)`` (``W`` stored ``(N_{l-1}, N_l)``),
    no activation on the last layer."""
    h = X
    for i, layer in enumerate(params):
        h = h @ layer["W"] + layer["b"] if "b" in layer else h @ layer["W"]
        if i < len(params) - 1:
            h = phi(h)
    return h


def _mlp_init(
    rng: np.random.Generator, *, shapes: list[tuple[int, int]], biases: bool
) -> list[dict[str, np.ndarray]]:
    """Per layer one ``(N_l, N_{l-1} + b)`` standard normal draw over ``sqrt(N_{l-1} + b)``
    (the hand-written models' ``random_theta``), split into ``W`` (stored transposed) and
    ``b``."""
    params = []
    for rows, cols in shapes:
        A = rng.standard_normal((rows, cols + biases)) / np.sqrt(cols + biases)
        layer = {"W": A[:, :cols].T.copy()}
        if biases:
            layer["b"] = A[:, cols].copy()
        params.append(layer)
    return params


def jax_deep_linear(
    widths: Sequence[int], *, loss: Loss | str = SQUARED, weight_decay: float = 0.0
) -> MLP:
    """The autodiff twin of :class:`~weightdyn.models.DeepLinear` ``(widths)``: an :class:`MLP`
    with the identity activation and no biases, with the same ``theta`` layout and
    ``random_theta``."""
    return MLP(widths, "identity", biases=False, loss=loss, weight_decay=weight_decay,
               name=f"jax DeepLinear{tuple(widths)}")  # fmt: skip


def jax_one_hidden(
    n_in: int, n_hidden: int, n_out: int = 1, activation: str = "tanh", bias: bool = True,
    *, loss: Loss | str = SQUARED, weight_decay: float = 0.0,
) -> MLP:  # fmt: skip
    """The autodiff twin of :class:`~weightdyn.models.OneHidden` ``(n_in, n_hidden, n_out,
    activation, bias)``: an :class:`MLP` with the same ``theta`` layout and ``random_theta``."""
    return MLP((n_in, n_hidden, n_out), activation, biases=bias, loss=loss,
               weight_decay=weight_decay, name=f"jax OneHidden({n_in}, {n_hidden}, {n_out}, "
               f"{activation!r})")  # fmt: skip
