"""Model interface: a network ``f(x, theta)`` with a flat parameter vector ``theta``.

Paper 000, Appendix A (Eqs. 79-81): a nonlinear network near a minimum ``theta*`` is a linear
model in the features ``grad_theta f(x, theta*)``, so Section II applies with the design
matrix replaced by the Jacobian. This module fixes the conventions; numpy in, numpy out.

Conventions
-----------
* ``X`` has shape ``(P, N_i)`` and ``Y`` shape ``(P, N_o)``: one **row** per sample (the
  paper's design matrices are the transposes). ``output(X, theta)`` has shape ``(P, N_o)``.
* ``theta`` is a flat vector of length ``n_params``. Matrices enter through the column-major
  ``vec`` (``A.ravel(order="F")``, the paper's convention after Eq. 47), so
  ``A[i, j] -> theta[offset + i + rows(A) * j]``; each model documents its blocks.
* **Jacobian rows are sample-major**: ``jacobian(X, theta)[mu * N_o + k, a] =
  d f_k(x^mu) / d theta_a``, i.e. the ``(P, N_o, n)`` tensor reshaped in C order. For
  ``N_o = 1`` this is the paper's ``J in R^{P x N}`` of Eq. 80.
* **Objective**: a per-sample loss ``l(f, y)`` (the model's :attr:`Model.loss_function`, a
  :class:`~weightdyn.models.losses.Loss`) and a weight decay ``chi >= 0``
  (:attr:`Model.weight_decay`)::

      L(theta) = (1/P) sum_mu l(f(x^mu), y^mu) + chi |theta|^2 / 2.

  The default is the papers' squared error without decay, ``l^mu = |f(x^mu) - y^mu|^2 / 2``
  and ``L = ||f(X) - Y||_F^2 / (2P)`` (Eqs. 3, 10, 36, 81). The decay is the Gaussian prior of
  App. B, which writes ``chi |w|^2``; here it carries a factor ``1/2`` so that its gradient is
  ``chi theta``. Every sample carries the decay: the per-sample objective is
  ``l^mu + chi |theta|^2 / 2``, ``L`` its mean, and SGD (Eq. 10) descends its batch mean.
  :meth:`Model.with_objective` gives a copy with another loss or decay.
* **Residuals** ``R[mu] = dl/df`` at ``f(x^mu)``, shape ``(P, N_o)``: ``f - y`` for squared
  error, ``softmax(f) - y`` for cross-entropy. Per-sample gradients (the ``g^mu`` of Eq. 14)
  are ``g^mu = J_mu^T r^mu + chi theta`` (``J_mu`` the ``N_o`` rows of sample ``mu``).
* **Hessian** of ``L``: the Gauss-Newton part ``(1/P) sum_mu J_mu^T Lambda_mu J_mu + chi 1``
  (``Lambda_mu = d^2 l / df^2``; ``1`` for squared error, so ``J^T J / P``: the drift of
  Eqs. 79-81) ``+ (1/P) sum_mu sum_k R[mu, k] d^2 f_k(x^mu) / d theta^2`` (residual
  curvature; it vanishes for interpolating fits of the squared error and for the single-layer
  linear network).

Adding a model: subclass :class:`Model` and implement ``n_params``, ``output``,
``jacobian`` and ``output_hessian_contract``; everything else is derived here, for any loss
and decay. For squared error without decay every derived result is computed by the same
expressions as before losses and decay existed (bit-identical).
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod

import numpy as np
from numpy.typing import ArrayLike, NDArray

from weightdyn.models.losses import LOSSES, SQUARED, Loss

__all__ = ["FloatArray", "Model"]

FloatArray = NDArray[np.float64]


class Model(ABC):
    """A network ``f: R^{N_i} -> R^{N_o}`` with parameters ``theta in R^{n_params}``.

    Subclasses set ``n_in`` and ``n_out`` and implement the four abstract members. The
    objective (module docstring) is :attr:`loss_function` and :attr:`weight_decay`; both
    default to the papers' (squared error, no decay) and are set per instance by
    :meth:`with_objective` (or a subclass's constructor through :meth:`_set_objective`).
    """

    n_in: int
    n_out: int
    #: per-sample loss ``l(f, y)`` (:mod:`weightdyn.models.losses`); the papers' squared error
    loss_function: Loss = SQUARED
    #: weight decay ``chi >= 0``: ``L`` gains ``chi |theta|^2 / 2`` (paper 000 App. B)
    weight_decay: float = 0.0

    # ------------------------------------------------------------------ required

    @property
    @abstractmethod
    def n_params(self) -> int:
        """Length of the flat parameter vector ``theta``."""

    @abstractmethod
    def output(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Network outputs ``f(x^mu, theta)``, shape ``(P, N_o)``."""

    @abstractmethod
    def jacobian(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Output Jacobian, shape ``(P * N_o, n_params)``, rows sample-major (Eq. 80)."""

    @abstractmethod
    def output_hessian_contract(self, X: ArrayLike, theta: ArrayLike, R: ArrayLike) -> FloatArray:
        """``sum_mu sum_k R[mu, k] d^2 f_k(x^mu) / d theta^2``, shape ``(n, n)``.

        ``R`` has shape ``(P, N_o)``. With ``R`` the residuals this is ``P`` times the
        residual-curvature part of the Hessian.
        """

    # ------------------------------------------------------------------ objective

    @property
    def paper_objective(self) -> bool:
        """True for the papers' objective: squared error and no weight decay."""
        return self.loss_function == SQUARED and self.weight_decay == 0.0

    def with_objective(
        self, loss: Loss | str | None = None, weight_decay: float | None = None
    ) -> Model:
        """A copy of this model with the loss ``loss`` (a :class:`Loss` or a name of
        :data:`~weightdyn.models.losses.LOSSES`) and the weight decay ``chi = weight_decay``;
        ``None`` keeps the current one. ``ValueError`` for an unknown loss, a loss that needs
        more outputs (cross-entropy: ``N_o >= 2``) or ``chi`` negative or not finite."""
        new = copy.copy(self)
        new._set_objective(
            self.loss_function if loss is None else loss,
            self.weight_decay if weight_decay is None else weight_decay,
        )
        return new

    def _set_objective(self, loss: Loss | str, weight_decay: float) -> None:
        """Validate and set :attr:`loss_function` and :attr:`weight_decay` on this instance."""
        if isinstance(loss, str):
            if loss not in LOSSES:
                raise ValueError(f"loss must be one of {sorted(LOSSES)} or a Loss, got {loss!r}")
            loss = LOSSES[loss]
        if not isinstance(loss, Loss):
            raise ValueError(f"loss must be a Loss or one of {sorted(LOSSES)}, got {loss!r}")
        if self.n_out < loss.min_outputs:
            raise ValueError(
                f"the {loss.name} loss needs N_o >= {loss.min_outputs} outputs, the model has "
                f"N_o = {self.n_out} (the softmax of one logit is 1: use N_o = 2 logits for two "
                "classes)"
            )
        chi = float(weight_decay)
        if not (math.isfinite(chi) and chi >= 0.0):
            raise ValueError(f"weight_decay must be finite and >= 0, got {weight_decay!r}")
        self.loss_function, self.weight_decay = loss, chi

    def _add_decay(self, G: FloatArray, theta: FloatArray) -> FloatArray:
        """``G + chi theta`` (broadcast over leading axes); ``G`` itself when ``chi = 0``."""
        return G + self.weight_decay * theta if self.weight_decay else G

    def _stacked_residuals(self, F: FloatArray, Y: FloatArray) -> FloatArray:
        """Residuals ``dl/df`` of outputs ``F`` (..., N_o) against labels ``Y`` of the same size
        (no label check; for the replica overrides); ``F - Y`` for squared error."""
        if self.loss_function == SQUARED:
            return F - Y.reshape(F.shape)
        flat = F.reshape(-1, self.n_out)
        return self.loss_function.residual(flat, Y.reshape(flat.shape)).reshape(F.shape)

    # ------------------------------------------------------------------ derived

    @property
    def last_layer(self) -> slice | None:
        """Entries of ``theta`` that hold the output layer (the paper's ``W2``, whose
        covariance Fig. 7a's IVFR is about), or None if the model has no layers."""
        return None

    def random_theta(self, rng: np.random.Generator, scale: float = 1.0) -> FloatArray:
        """I.i.d. ``N(0, scale^2)`` parameters (override for fan-in scaling)."""
        return float(scale) * rng.standard_normal(self.n_params)

    def check_inputs(
        self, X: ArrayLike, theta: ArrayLike, Y: ArrayLike | None = None
    ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
        """Validate shapes (and labels, :meth:`Loss.check_labels`); returns float arrays
        ``(X, theta, Y)`` (``Y`` 1-d -> ``(P, 1)``)."""
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.n_in:
            raise ValueError(f"X must have shape (P, N_i) with N_i = {self.n_in}, got {X.shape}")
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must have shape ({self.n_params},), got {theta.shape}")
        if Y is None:
            return X, theta, None
        Y = np.asarray(Y, dtype=float)
        if Y.ndim == 1:
            Y = Y[:, None]
        if Y.shape != (X.shape[0], self.n_out):
            raise ValueError(
                f"Y must have shape (P, N_o) = ({X.shape[0]}, {self.n_out}), got {Y.shape}"
            )
        return X, theta, self.loss_function.check_labels(Y)

    def residuals(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """``R[mu] = dl/df`` at ``f(x^mu)``, shape ``(P, N_o)`` (``f(X) - Y`` for squared
        error)."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        return self.loss_function.residual(self.output(X, theta), Y)

    def loss(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> float:
        """``L = (1/P) sum_mu l^mu + chi |theta|^2 / 2``; for squared error
        ``||f(X) - Y||_F^2 / (2P)`` (Eqs. 3, 36, 81) plus the decay."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        F = self.output(X, theta)
        if self.loss_function == SQUARED:
            R = F - Y
            value = 0.5 * np.sum(R**2) / R.shape[0]
        else:
            value = np.mean(self.loss_function.value(F, Y))
        if self.weight_decay:
            value = value + 0.5 * self.weight_decay * (theta @ theta)
        return float(value)

    def per_sample_gradients(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Gradients ``g^mu = J_mu^T r^mu + chi theta`` of the per-sample objective
        ``l^mu + chi |theta|^2 / 2`` (Eq. 14's ``grad l^mu``), shape ``(P, n)``."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        R = self.loss_function.residual(self.output(X, theta), Y)
        J = self.jacobian(X, theta).reshape(X.shape[0], self.n_out, self.n_params)
        return self._add_decay(np.einsum("pk,pka->pa", R, J), theta)

    def gradient(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Full-batch gradient ``grad L = (1/P) sum_mu g^mu = J^T vec_r(R) / P + chi theta``."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        R = self.loss_function.residual(self.output(X, theta), Y)
        return self._add_decay(self.jacobian(X, theta).T @ R.ravel() / X.shape[0], theta)

    def replica_gradients(self, Xb: ArrayLike, Yb: ArrayLike, Theta: ArrayLike) -> FloatArray:
        """Mini-batch gradients ``(1/S) sum_s g^{mu_s}`` of ``R`` parameter vectors, each on its
        own batch (the gradient of Eq. 10 at every replica, decay included): ``Xb``
        (R, S, N_i), ``Yb`` (R, S, N_o), ``Theta`` (R, n) -> (R, n).

        This default loops over the replicas with :meth:`per_sample_gradients`; the built-in
        models override it with one array operation over the replicas.
        """
        Xb, Yb, Theta = (np.asarray(a, dtype=float) for a in (Xb, Yb, Theta))
        return np.stack(
            [
                self.per_sample_gradients(x, y, t).mean(axis=0)
                for x, y, t in zip(Xb, Yb, Theta, strict=True)
            ]
        )

    def gauss_newton(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Gauss-Newton part ``(1/P) sum_mu J_mu^T Lambda_mu J_mu + chi 1`` of the Hessian;
        ``J^T J / P`` for squared error without decay (the drift of Eqs. 79-81)."""
        X, theta, _ = self.check_inputs(X, theta)
        J = self.jacobian(X, theta)
        P = X.shape[0]
        if self.loss_function.identity_curvature:
            G = J.T @ J / P
        else:
            Lam = self.loss_function.curvature(self.output(X, theta))
            J3 = J.reshape(P, self.n_out, self.n_params)
            LJ = np.einsum("pkl,pla->pka", Lam, J3).reshape(J.shape)
            G = J.T @ LJ / P
            G = 0.5 * (G + G.T)
        return G + self.weight_decay * np.eye(self.n_params) if self.weight_decay else G

    def residual_hessian(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Residual-curvature part ``(1/P) sum_mu sum_k R[mu, k] d^2 f_k / d theta^2``."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        R = self.loss_function.residual(self.output(X, theta), Y)
        Hr = self.output_hessian_contract(X, theta, R) / X.shape[0]
        return 0.5 * (Hr + Hr.T)

    def hessian(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Full Hessian of ``L``: :meth:`gauss_newton` + :meth:`residual_hessian`."""
        return self.gauss_newton(X, theta) + self.residual_hessian(X, Y, theta)
