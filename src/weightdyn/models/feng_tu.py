"""The inverse variance-flatness relation as Feng & Tu measured it, in a model cell.

Feng & Tu (PNAS 2021) take the principal directions ``p_i`` and variances ``sigma_i^2`` of the
stationary SGD weights of a block of parameters, the full-batch loss profile
``L(theta_bar + s p_i)`` on both sides of the mean ``theta_bar``, and its full width ``F_i`` at
``e L_0`` (``L_0 = L(theta_bar)``); they report ``sigma_i^2 ~ F_i^(-psi)`` with ``psi`` about 4 on
MNIST. Paper 000 states the relation as the curvature ``kappa_i = p_i^T H p_i`` growing with
``sigma_i^2`` (Eq. 73, Fig. 7a): for a quadratic profile ``F_i = 2 sqrt(2 (e - 1) L_0 / kappa_i)``,
so a slope of +1 there is ``psi = 2``.

:func:`measurement` does both for SGD (with jackknife errors over the cell's (replica, block)
groups, :func:`weightdyn.flatness.ivfr_measurement`) and for the exact linearisation at the SGD
mean (Eq. 29; its principal directions, the true profile along them and its quadratic model),
on a block of the cell's frame:

* ``all``: the fluctuating part of ``range(H)`` in the cell's frame (the whole network, or the
  ``moment_modes`` stiffest modes);
* ``output``: the output layer's coordinates (Fig. 7a's block; cells with a full frame);
* ``hidden``: the weights between the first two hidden layers (Feng & Tu's hidden-to-hidden
  block; an MLP with at least two hidden layers, full frame).

In the ``output`` and ``hidden`` blocks only the directions in which the exact linearisation
fluctuates are kept (:func:`weightdyn.models.cell.layer_basis`: with weight decay and a low-rank
noise the rest is numerically zero in SGD as in Eq. 29).

The profiles are measured along the full sample's directions and held fixed in the jackknife
(:func:`~weightdyn.flatness.ivfr_measurement`, ``redo_profiles=False``): the errors are those of
the variances and the fits, not of the directions' wobble.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import flatness as fl
from weightdyn.io import attrs
from weightdyn.models.base import FloatArray, Model

__all__ = [
    "BLOCKS",
    "S_MAX_FACTOR",
    "block_basis",
    "dataset",
    "log_line",
    "measurement",
    "theory_covariances",
]

BLOCKS = ("all", "output", "hidden")

#: profiles are followed up to this many times |theta_bar| on each side (a side that has not
#: reached e L_0 there is reported as not reached)
S_MAX_FACTOR = 10.0

SOURCE = "Feng & Tu (PNAS 2021); paper 000 Eq. 73, Fig. 7a"


@dataclass(frozen=True)
class Block:
    """A block of parameters: its orthonormal directions ``G`` (k, d) in the cell's frame and
    ``B`` (n, d) in ``theta``'s (the profiles and the curvature ``G^T H G`` are taken along
    them), and ``F`` (k, d), the map of the frame's fluctuations onto the block
    (``y_block = F^T y_frame``: for a layer, the fluctuations projected on the fluctuating part
    of ``range(H)`` first, as :func:`weightdyn.models.cell.layer_spectrum` does; along the null
    space of a deep linear network SGD diffuses without restoring force)."""

    name: str
    G: FloatArray
    B: FloatArray
    F: FloatArray


def hidden_weights(model: Model) -> slice:
    """The weights between the first two hidden layers (ValueError where the model has none)."""
    slices = getattr(model, "weight_slices", None)
    if slices is None or len(slices()) < 3:
        raise ValueError(
            "flatness_block: 'hidden' needs an MLP with at least two hidden layers (a "
            "hidden-to-hidden weight matrix); use 'all' or 'output'"
        )
    return slices()[1]


def block_basis(
    name: str, model: Model, Qr: FloatArray, frame_basis: FloatArray | None,
    coordinates: Callable[[slice], slice | FloatArray],
) -> Block:  # fmt: skip
    """The block ``name`` of :data:`BLOCKS` given the cell's fluctuating basis ``Qr`` (in its
    frame), the frame's basis (None: all of ``theta``) and ``coordinates``, which maps a
    slice of ``theta`` to the basis of its fluctuating part
    (:func:`weightdyn.models.cell.layer_basis`)."""
    if name == "all":
        B = Qr if frame_basis is None else frame_basis @ Qr
        return Block(name, Qr, B, Qr)
    if name not in BLOCKS:
        raise ValueError(f"flatness_block: {name!r} is not allowed; allowed: {', '.join(BLOCKS)}")
    if frame_basis is not None:
        raise ValueError(f"flatness_block: {name!r} needs all of theta recorded (no "
                         "moment_modes); use 'all'")  # fmt: skip
    if name == "output" and model.last_layer is None:
        raise ValueError("flatness_block: 'output' needs a model with an output layer")
    layer = model.last_layer if name == "output" else hidden_weights(model)
    part = coordinates(layer)
    E = np.eye(model.n_params)[:, part] if isinstance(part, slice) else part
    return Block(name, E, E, Qr @ (Qr.T @ E))


def _group_moments(sample: Any, F: FloatArray) -> FloatArray:
    """Per-(replica, block) mean moments of ``F^T y`` as ``[<x>, <x x^T>.ravel()]``."""
    R, B, k = sample.sum_d.shape
    n = sample.n_records.reshape(-1).astype(float)
    m1 = sample.sum_d.reshape(R * B, k) / n[:, None] @ F
    m2 = F.T @ (sample.sum_dd.reshape(R * B, k, k) / n[:, None, None]) @ F
    return np.hstack([m1, m2.reshape(R * B, -1)])


def theory_covariances(M: Mapping[str, FloatArray]) -> tuple[FloatArray, FloatArray]:
    """The exact linearisation at the SGD mean (at the local minimum where the mean has none)
    and at the local minimum."""
    mean = M["exact_mean"] if np.all(np.isfinite(M["exact_mean"])) else M["exact"]
    return mean, M["exact"]


def _profiles(
    model: Model, X: FloatArray, Y: FloatArray, center: FloatArray, block: Block, s_max: float
) -> Callable[[FloatArray], fl.Flatness]:
    """``V -> Flatness`` of the full-batch loss about ``center`` along ``block.B V``."""
    loss: Callable[[FloatArray], float] = partial(model.loss, X, Y)
    return partial(_widths, loss, center, block.B, s_max)


def _widths(
    loss: Callable[[FloatArray], float], center: FloatArray, B: FloatArray, s_max: float,
    V: FloatArray,
) -> fl.Flatness:  # fmt: skip
    """Widths along the block directions ``V`` (columns in block coordinates)."""
    return fl.flatness(loss, center, B @ V, s_max=s_max)


def _theory(widths: Callable[[FloatArray], fl.Flatness], Hb: FloatArray, Mb: FloatArray) -> dict:
    """The theory covariance ``Mb`` of the block: its principal variances and directions, the
    true profiles' widths along them, the quadratic model's widths, psi and the kappa slope."""
    var, V = fl.principal_fluctuations(0.5 * (Mb + Mb.T))
    flat = widths(V)
    kappa = fl.curvature(Hb, V)
    quad = np.asarray(fl.quadratic_width(flat.loss0, kappa), dtype=float)
    positive = var > 0
    return {
        "variance": var, "width": flat.width, "width_quadratic": quad, "curvature": kappa,
        "psi": fl.power_law_exponent(var, flat.width, positive)[0],
        "psi_quadratic": fl.power_law_exponent(var, quad, positive)[0],
        "slope": fl.ivfr_slope(var, kappa, positive)[0],
        "not_reached": int((~flat.reached).sum()), "loss0": flat.loss0,
    }  # fmt: skip


def measurement(
    model: Model, X: FloatArray, Y: FloatArray, centers: tuple[FloatArray, FloatArray],
    H: FloatArray, M: tuple[FloatArray, FloatArray], sample: Any, block: Block,
) -> dict[str, Any]:  # fmt: skip
    """Feng & Tu's ``psi`` and paper 000's slope on ``block`` for SGD (``sample``: its moments
    in the cell's frame; profiles about the SGD mean) and for the exact linearisation at the SGD
    mean and at the local minimum (``centers`` = (theta_bar, theta_loc), ``M`` their covariances
    in the frame, profiles about each centre); ``H`` is the local Hessian in the frame."""
    theta_bar, theta_loc = centers
    s_max = S_MAX_FACTOR * max(float(np.linalg.norm(theta_bar)), 1.0)
    Hb = block.G.T @ H @ block.G
    widths = _profiles(model, X, Y, theta_bar, block, s_max)
    sgd = fl.ivfr_measurement(
        _group_moments(sample, block.F), kind="moments", flatness_along=widths,
        curvature_along=partial(fl.curvature, Hb),
    )  # fmt: skip
    at_mean = _theory(widths, Hb, block.F.T @ M[0] @ block.F)
    at_min = _theory(_profiles(model, X, Y, theta_loc, block, s_max), Hb,
                     block.F.T @ M[1] @ block.F)  # fmt: skip
    return {"sgd": sgd, "theory": at_mean, "theory_min": at_min, "loss0": at_mean["loss0"],
            "s_max": s_max}  # fmt: skip


def dataset(result: Mapping[str, Any], block: Block) -> xr.Dataset:
    """The measurement as cell variables along ``ft_mode`` (descending variance)."""
    sgd, th = result["sgd"], result["theory"]
    d = sgd.variance.size
    ds = xr.Dataset(
        coords={
            "ft_mode": (
                "ft_mode",
                np.arange(d),
                attrs("principal mode rank of the block", "1", "sorted"),
            )
        }
    )
    per_mode = {
        "ft_var_sgd": (sgd.variance, "variance sigma_i^2 along the i-th principal direction, SGD"),
        "ft_var_sgd_se": (sgd.variance_se, "jackknife s.e. of ft_var_sgd"),
        "ft_width_sgd": (sgd.flatness.width, "full width F_i of the loss profile at e L_0 along "
                         "the SGD principal direction (NaN: not reached within s_max)"),
        "ft_curv_sgd": (sgd.curvature, "curvature kappa_i = p_i^T H p_i, SGD directions"),
        "ft_var_theory": (th["variance"], "variance along the i-th principal direction, exact "
                          "linearisation at the SGD mean (Eq. 29)"),
        "ft_width_theory": (th["width"], "full width at e L_0 of the true loss profile along the "
                            "theory's principal direction"),
        "ft_width_quadratic": (th["width_quadratic"], "full width at e L_0 of the quadratic "
                               "model L_0 + kappa s^2 / 2 along the theory's direction"),
        "ft_curv_theory": (th["curvature"], "curvature along the theory's principal direction"),
    }  # fmt: skip
    for name, (value, text) in per_mode.items():
        ds[name] = ("ft_mode", np.asarray(value, dtype=float), attrs(text, "1", SOURCE))
    scalars = {
        "ft_psi_sgd": (sgd.psi, "Feng & Tu's exponent psi of sigma^2 ~ F^-psi, SGD"),
        "ft_psi_sgd_se": (sgd.psi_se, "jackknife s.e. of ft_psi_sgd (profiles held fixed)"),
        "ft_slope_sgd": (sgd.slope, "log-log slope of kappa against sigma^2, SGD (Eq. 73)"),
        "ft_slope_sgd_se": (sgd.slope_se, "jackknife s.e. of ft_slope_sgd"),
        "ft_psi_theory": (th["psi"], "psi of the exact linearisation's directions and variances, "
                          "true loss profiles"),
        "ft_psi_quadratic": (th["psi_quadratic"], "psi of the exact linearisation with quadratic "
                             "profiles (2 / slope where the slope is exact)"),
        "ft_slope_theory": (th["slope"], "kappa-vs-sigma^2 slope of the exact linearisation"),
        "ft_psi_theory_min": (result["theory_min"]["psi"], "psi of the exact linearisation at "
                              "the local minimum, true profiles about it"),
        "ft_psi_quadratic_min": (result["theory_min"]["psi_quadratic"], "psi of the exact "
                                 "linearisation at the local minimum, quadratic profiles"),
        "ft_slope_theory_min": (result["theory_min"]["slope"], "kappa-vs-sigma^2 slope of the "
                                "exact linearisation at the local minimum"),
        "ft_modes_used": (sgd.psi_fit.n_used, "modes in SGD's psi fit"),
        "ft_modes_total": (d, "modes of the block"),
        "ft_not_reached_theory": (th["not_reached"], "theory directions whose profile does not "
                                  "reach e L_0 within s_max on a side"),
        "ft_loss0": (result["loss0"], "L_0 = L(theta_bar), full training set"),
        "ft_s_max": (result["s_max"], "largest |s| a profile is followed to"),
    }  # fmt: skip
    for name, (value, text) in scalars.items():
        ds[name] = ((), float(value), attrs(text, "1", SOURCE))
    ds["ft_psi_sgd"].attrs["fit"] = sgd.psi_fit.summary()
    ds["ft_psi_sgd"].attrs["block"] = block.name
    ds["ft_slope_sgd"].attrs["fit"] = sgd.slope_fit.summary()
    return ds


def log_line(ds: xr.Dataset) -> str:
    """One progress line of the measurement."""
    return (
        f"Feng & Tu ({ds['ft_psi_sgd'].attrs['block']}): psi SGD {float(ds['ft_psi_sgd']):.3g} +- "
        f"{float(ds['ft_psi_sgd_se']):.2g} over {int(ds['ft_modes_used'])} of "
        f"{int(ds['ft_modes_total'])} modes, theory {float(ds['ft_psi_theory']):.3g} (quadratic "
        f"{float(ds['ft_psi_quadratic']):.3g}); kappa slope SGD {float(ds['ft_slope_sgd']):.3g}, "
        f"theory {float(ds['ft_slope_theory']):.3g}"
    )
