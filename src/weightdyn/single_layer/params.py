"""Parameter declarations shared by the single-layer experiments of paper 000 (Sec. II):
the data set's axes (N, P or P/N, sigma_eps^2, data seed), the SGD axes (lr, S, sampling) and
the stationary-SGD protocol (:class:`~weightdyn.single_layer.protocol.SGDProtocol`) as settings
with its defaults. Declared once here, used by every single-layer experiment module."""

from __future__ import annotations

import dataclasses

from weightdyn.experiments import REQUIRED, Param, Params
from weightdyn.single_layer.protocol import INITS, SGDProtocol
from weightdyn.single_layer.simulate import PRECISIONS, SAMPLING_MODES

POSITIVE = {"minimum": 0, "exclusive_minimum": True}

N = Param("N", int, REQUIRED, "number of inputs N (weights)", axis=True, minimum=1)
P = Param("P", int, None, "number of training samples P", axis=True, minimum=1)
P_OVER_N = Param("p_over_n", float, None, "sample ratio P/N", axis=True, **POSITIVE)
#: the axes the others fix (P = p_over_n N): a figure draws them with those, never holds them
DERIVED = (P_OVER_N.name,)
SIGMA_EPS2 = Param(
    "sigma_eps2", float, 0.25, "label-noise variance sigma_eps^2", axis=True, minimum=0
)
LR = Param("lr", float, 0.1, "learning rate lambda", axis=True, **POSITIVE)
BATCH_SIZE = Param("batch_size", int, 10, "mini-batch size S", axis=True, minimum=1)
SAMPLING = Param(
    "sampling", str, "with", "mini-batch sampling (replacement)", axis=True, allowed=SAMPLING_MODES
)
DATA_SEED = Param("data_seed", int, 0, "data realisation index", axis=True, minimum=0)
#: the data set and SGD axes, in the order of every single-layer cell id
DATA_AND_SGD = (N, P, P_OVER_N, SIGMA_EPS2, LR, BATCH_SIZE, SAMPLING, DATA_SEED)

_DEFAULTS = SGDProtocol()
INIT = Param(
    "init",
    str,
    _DEFAULTS.init,
    "start of the chains: w* or i.i.d. N(0, init_scale^2)",
    allowed=INITS,
)
INIT_SCALE = Param(
    "init_scale", float, _DEFAULTS.init_scale, "standard deviation of a random start", **POSITIVE
)


def _protocol_param(name: str, long_name: str, minimum: float) -> Param:
    default = getattr(_DEFAULTS, name)
    return Param(name, type(default), default, long_name, minimum=minimum)


#: the stationary-SGD protocol's settings besides the start (init, init_scale)
PROTOCOL = (
    _protocol_param("replicas", "independent chains per cell", 2),
    _protocol_param("burnin_tau", "burn-in in slowest relaxation times tau (Eq. 27)", 0),
    _protocol_param("burnin_min_steps", "least burn-in steps", 0),
    _protocol_param("burnin_max_steps", "most burn-in steps", 0),
    _protocol_param("sample_steps", "least sampling steps", 1),
    _protocol_param("sample_tau", "least sampling length in relaxation times tau", 0),
    _protocol_param("sample_max_steps", "most sampling steps", 1),
    # None (not 0) when unset, so that configs without it keep their cell ids (sweep.cell_id)
    Param(
        "sample_rse",
        float,
        None,
        "target relative standard error of tr M (sets the "
        "sampling length with the floor sample_steps, sample_tau and the cap)",
        **POSITIVE,
    ),
    _protocol_param("thin", "steps between recorded snapshots", 1),
    _protocol_param("n_blocks", "time blocks per chain (error groups)", 1),
)


#: the kernels' precision (``precision`` of run_sgd / run_sgf); absent means float64, so that
#: the cells of configs without it keep their ids
PRECISION = Param(
    "precision",
    str,
    None,
    "floating-point precision of the SGD/SGF kernels: float64 (absent), or float32 (the "
    "deviation from w* in single precision, moments in double)",
    allowed=PRECISIONS,
)


def as_axis(param: Param) -> Param:
    """``param`` declared as a sweep axis."""
    return dataclasses.replace(param, axis=True)


def protocol(params: Params) -> SGDProtocol:
    """The cell's stationary-SGD protocol from its parameters."""
    return SGDProtocol(
        **{
            p.name: params[p.name]
            for p in (*PROTOCOL, INIT, INIT_SCALE)
            if params.get(p.name) is not None
        }
    )
