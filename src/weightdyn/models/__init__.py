"""Models ``f(x, theta)`` with their derivatives, losses, and their local SGD theory.

Paper 000, Appendix A (Eqs. 79-81) applied to any smooth network and loss: :mod:`.base`
(interface and conventions), :mod:`.losses` (squared error, cross-entropy), :mod:`.networks`
(hand-written built-in models), :mod:`.jax_model` (models as JAX functions, derivatives by
autodiff; imported on first use of ``JaxModel``, ``MLP``, ``jax_deep_linear`` or
``jax_one_hidden``, as importing it switches JAX to float64), :mod:`.adapters` (Equinox and
Flax modules as JAX models), :mod:`.theory` (theory at a minimum).
"""

from typing import Any

from weightdyn.models.base import Model
from weightdyn.models.losses import CROSS_ENTROPY, LOSSES, SQUARED, Loss
from weightdyn.models.networks import ACTIVATIONS, DeepLinear, Linear, OneHidden

__all__ = [
    "ACTIVATIONS",
    "CROSS_ENTROPY",
    "LOSSES",
    "MLP",
    "SQUARED",
    "DeepLinear",
    "JaxModel",
    "Linear",
    "Loss",
    "Model",
    "OneHidden",
    "jax_deep_linear",
    "jax_one_hidden",
]

_JAX_NAMES = ("JaxModel", "MLP", "jax_deep_linear", "jax_one_hidden")


def __getattr__(name: str) -> Any:
    """The JAX models, imported lazily (importing :mod:`.jax_model` enables JAX's x64 mode)."""
    if name in _JAX_NAMES:
        from weightdyn.models import jax_model

        return getattr(jax_model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
