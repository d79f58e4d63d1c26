"""Equinox and Flax modules as :class:`~weightdyn.models.jax_model.JaxModel` s.

Each adapter splits a module into its parameters (a pytree of float arrays, flattened into
``theta`` by :func:`jax.flatten_util.ravel_pytree`: the layout is the framework's pytree order)
and the rest (the structure, activation functions, any other state), and gives
:class:`JaxModel` the pair ``apply(params, X) -> (P, N_o)`` and ``init(rng) -> params``:

* :func:`from_equinox`: ``eqx.partition(module, eqx.is_inexact_array)`` / ``eqx.combine``;
* :func:`from_flax_linen`: ``module.init`` / ``module.apply`` on the ``"params"`` collection;
* :func:`from_flax_nnx`: ``nnx.split(module, nnx.Param, ...)`` / ``nnx.merge``.

**float64**: the parameters are converted to float64 (a module built in float32, Flax's
default ``param_dtype`` or Equinox's without JAX's x64 mode, starts from its float32 values and
computes in float64 from then on); importing this module turns on ``jax_enable_x64``
(:mod:`weightdyn.models.jax_model`). A module that fixes its computation dtype to float32 is
refused by :class:`JaxModel` (its output must be float64).

**Random starts**: Equinox and NNX modules are objects with their weights, so the adapters take
either a module (``init(rng)`` returns its weights whatever ``rng``: every ``random_theta`` is the
same start, times the scale) or a function that builds one from a JAX key (Equinox) or an
``nnx.Rngs`` (NNX), called with a seed drawn from ``rng`` (a new start per generator, as for the
built-in models). A Flax linen module draws its weights in ``module.init``, from such a seed.

Equinox, Flax and their dependencies are imported on the first call of an adapter, not here
(tested: equinox 0.13.8, flax 0.12.8, jax 0.10.2).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

import jax
import jax.numpy as jnp
import numpy as np

from weightdyn.models.jax_model import JaxModel, Params
from weightdyn.models.losses import Loss

if TYPE_CHECKING:
    import equinox as eqx
    from flax import linen, nnx

__all__ = ["ModelOptions", "from_equinox", "from_flax_linen", "from_flax_nnx"]

#: the pip requirement named in the ImportError of a missing framework (the tested versions)
PIP_REQUIREMENTS = {"equinox": "equinox>=0.13,<0.14", "flax": "flax>=0.12,<0.13"}

M = TypeVar("M")


class ModelOptions(TypedDict, total=False):
    """The keywords of :class:`JaxModel` that the adapters pass on."""

    last_layer: slice | None
    loss: Loss | str
    weight_decay: float
    name: str | None


def _require(module: str, who: str) -> ModuleType:
    """``module`` imported, or ImportError naming its package and the pip command."""
    package = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{who} needs {package}, which is not installed (or fails to import: {err}); "
            f"install it with: pip install '{PIP_REQUIREMENTS[package]}'"
        ) from err


def _seed(rng: np.random.Generator) -> int:
    """A JAX seed drawn from ``rng``."""
    return int(rng.integers(2**32))


def _float64(params: Params, who: str) -> Params:
    """``params`` with every leaf a float64 array; ValueError for complex leaves."""
    leaves = jax.tree_util.tree_leaves(params)
    if not leaves:
        raise ValueError(f"{who}: the module has no parameters")
    if any(jnp.iscomplexobj(a) for a in leaves):
        raise ValueError(f"{who}: complex parameters are not supported (the theory is real)")
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype=jnp.float64), params)


def _builder(
    module: M | Callable[[Any], M], kind: type, label: str, make_arg: Callable[[int], Any], who: str
) -> Callable[[np.random.Generator], M]:
    """``rng -> module``: ``module`` itself if it is an instance of ``kind`` (named ``label`` in
    errors), else ``module`` called on ``make_arg(seed)`` with a seed drawn from ``rng``."""
    if isinstance(module, kind):
        return lambda rng: module
    if not callable(module):
        raise TypeError(f"{who}: expected an {label} or a function building one, got "
                        f"{type(module).__name__}")  # fmt: skip

    def build(rng: np.random.Generator) -> M:
        built = module(make_arg(_seed(rng)))
        if not isinstance(built, kind):
            raise TypeError(f"{who}: the function must return an {label}, got "
                            f"{type(built).__name__}")  # fmt: skip
        return built

    return build


def from_equinox(
    module: eqx.Module | Callable[[jax.Array], eqx.Module],
    n_in: int,
    n_out: int,
    *,
    per_sample: bool = True,
    **options: Unpack[ModelOptions],
) -> JaxModel:
    """An Equinox module as a :class:`JaxModel`.

    ``module``: an ``eqx.Module`` or a function ``key -> eqx.Module`` (module docstring, random
    starts; the module for ``init``'s template is built from ``default_rng(0)``'s seed). Every
    inexact array of the module (``eqx.is_inexact_array``) is a parameter, converted to float64;
    the rest (activations, integer arrays) is fixed. ``per_sample``: ``module(x)`` maps one
    sample ``(n_in,) -> (n_out,)``, Equinox's convention, and is vmapped over the rows of ``X``;
    False if the module maps ``(P, n_in) -> (P, n_out)`` itself. ``theta``: the leaves in the
    module's field order, each row-major (``eqx.nn.Linear``: ``weight`` ``(out, in)``, then
    ``bias``). ``options``: :class:`JaxModel`'s ``last_layer``, ``loss``, ``weight_decay`` and
    ``name`` (default ``"equinox <class>"``). ImportError if equinox is not installed.
    """
    who = "from_equinox"
    eqx = _require("equinox", who)
    build = _builder(module, eqx.Module, "equinox.Module", jax.random.key, who)
    template = build(np.random.default_rng(0))
    static = eqx.partition(template, eqx.is_inexact_array)[1]

    def init(rng: np.random.Generator) -> Params:
        return _float64(eqx.partition(build(rng), eqx.is_inexact_array)[0], who)

    def apply(params: Params, X: jax.Array) -> jax.Array:
        net = eqx.combine(params, static)
        return jax.vmap(net)(X) if per_sample else net(X)

    name = f"equinox {type(template).__name__}"
    return JaxModel(apply, init, n_in, n_out, **{"name": name, **options})


def from_flax_linen(
    module: linen.Module, n_in: int, n_out: int, **options: Unpack[ModelOptions]
) -> JaxModel:
    """A Flax linen module as a :class:`JaxModel`.

    ``init(rng)`` is the ``"params"`` collection of ``module.init(key, zeros((1, n_in)))``, the
    key from a seed drawn from ``rng``, converted to float64 (linen's default ``param_dtype`` is
    float32); ``apply(params, X) = module.apply({"params": params, ...}, X)``, with any other
    collection (batch statistics) held at its value from ``init``'s template (``default_rng(0)``)
    and not mutable. The module maps ``(P, n_in) -> (P, n_out)``. ``theta``: the leaves in the
    ``params`` dict's sorted key order (``Dense_0``: ``bias``, then ``kernel`` ``(in, out)``
    row-major; ``Dense_10`` sorts before ``Dense_2``). ``options``: :class:`JaxModel`'s keywords
    (default ``name`` ``"flax <class>"``). ImportError if flax is not installed.
    """
    who = "from_flax_linen"
    linen = _require("flax.linen", who)
    if not isinstance(module, linen.Module):
        raise TypeError(f"{who}: expected a flax.linen.Module, got {type(module).__name__}")
    x0 = jnp.zeros((1, n_in))

    def variables(rng: np.random.Generator) -> dict[str, Params]:
        out = module.init(jax.random.key(_seed(rng)), x0)
        if "params" not in out:
            raise ValueError(f"{who}: the module has no parameters (no 'params' collection)")
        return dict(out)

    rest = {k: v for k, v in variables(np.random.default_rng(0)).items() if k != "params"}

    def init(rng: np.random.Generator) -> Params:
        return _float64(variables(rng)["params"], who)

    def apply(params: Params, X: jax.Array) -> jax.Array:
        return module.apply({"params": params, **rest}, X)

    name = f"flax {type(module).__name__}"
    return JaxModel(apply, init, n_in, n_out, **{"name": name, **options})


def from_flax_nnx(
    module: nnx.Module | Callable[[nnx.Rngs], nnx.Module],
    n_in: int,
    n_out: int,
    **options: Unpack[ModelOptions],
) -> JaxModel:
    """A Flax NNX module as a :class:`JaxModel`.

    ``module``: an ``nnx.Module`` or a function ``rngs -> nnx.Module`` (module docstring, random
    starts; called with ``nnx.Rngs(seed)``). ``nnx.split(module, nnx.Param, ...)``: the
    ``nnx.Param`` variables are the parameters, converted to float64; every other variable
    (batch statistics, RNG state) is held at its value in the template module (``module``, or
    the function's module for ``default_rng(0)``). ``apply(params, X) = nnx.merge(graphdef,
    params, rest)(X)``, the module mapping ``(P, n_in) -> (P, n_out)``. ``theta``: the leaves in
    the state's sorted key order (``nnx.Linear``: ``bias``, then ``kernel`` ``(in, out)``
    row-major). ``options``: :class:`JaxModel`'s keywords (default ``name`` ``"flax nnx
    <class>"``). ImportError if flax is not installed.
    """
    who = "from_flax_nnx"
    nnx = _require("flax.nnx", who)
    build = _builder(module, nnx.Module, "nnx.Module", nnx.Rngs, who)
    template = build(np.random.default_rng(0))
    graphdef, _, rest = nnx.split(template, nnx.Param, ...)

    def init(rng: np.random.Generator) -> Params:
        return _float64(nnx.split(build(rng), nnx.Param, ...)[1], who)

    def apply(params: Params, X: jax.Array) -> jax.Array:
        return nnx.merge(graphdef, params, rest)(X)

    name = f"flax nnx {type(template).__name__}"
    return JaxModel(apply, init, n_in, n_out, **{"name": name, **options})
