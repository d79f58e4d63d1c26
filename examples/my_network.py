"""A network of one's own: a JAX function and its initialiser, swept like the built-in ones.

Name this module in a config's ``experiment_modules`` (with ``examples`` on ``PYTHONPATH``) and
sweep ``my_network`` over any data set (README, "A network of one's own").
"""

import jax.numpy as jnp
import numpy as np

from weightdyn.experiments import Param
from weightdyn.models import JaxModel
from weightdyn.models.network_experiment import network_experiment


def apply(p, X):
    """A residual tanh block on a linear read-in: ``f = W_o (h + tanh(W_h h)), h = W_i x``."""
    h = X @ p["W_i"]
    return (h + jnp.tanh(h @ p["W_h"])) @ p["W_o"]


def build(n_in: int, n_out: int, params) -> JaxModel:
    width = params["width"]

    def init(rng: np.random.Generator) -> dict:
        shapes = {"W_i": (n_in, width), "W_h": (width, width), "W_o": (width, n_out)}
        return {k: rng.standard_normal(s) / np.sqrt(s[0]) for k, s in shapes.items()}

    return JaxModel(apply, init, n_in, n_out, name="residual tanh")


WIDTH = Param("width", int, 8, "hidden width", axis=True, minimum=1)
EXPERIMENTS = {"my_network": network_experiment("my_network", build, params=(WIDTH,))}
