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
* Loss (Eqs. 3, 10, 36, 81): ``l^mu = |f(x^mu) - y^mu|^2 / 2`` and
  ``L = (1/P) sum_mu l^mu = ||f(X) - Y||_F^2 / (2P)``. Residuals are ``R = f(X) - Y``.
* Hessian of ``L``: ``H = J^T J / P`` (Gauss-Newton) ``+ (1/P) sum_mu sum_k R[mu, k]
  d^2 f_k(x^mu) / d theta^2`` (residual curvature; it vanishes for interpolating fits and
  for the single-layer linear network).

Adding a model: subclass :class:`Model` and implement ``n_params``, ``output``,
``jacobian`` and ``output_hessian_contract``; everything else is derived here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["FloatArray", "Model"]

FloatArray = NDArray[np.float64]


class Model(ABC):
    """A network ``f: R^{N_i} -> R^{N_o}`` with parameters ``theta in R^{n_params}``.

    Subclasses set ``n_in`` and ``n_out`` and implement the four abstract members.
    """

    n_in: int
    n_out: int

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
        """Validate shapes; returns float arrays ``(X, theta, Y)`` (``Y`` 1-d -> ``(P, 1)``)."""
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
        return X, theta, Y

    def residuals(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """``R = f(X, theta) - Y``, shape ``(P, N_o)``."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        return self.output(X, theta) - Y

    def loss(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> float:
        """``L = ||f(X) - Y||_F^2 / (2P)`` (Eqs. 3, 36, 81)."""
        R = self.residuals(X, Y, theta)
        return float(0.5 * np.sum(R**2) / R.shape[0])

    def per_sample_gradients(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Gradients ``g^mu = J_mu^T r^mu`` of ``l^mu = |f(x^mu) - y^mu|^2 / 2``, ``(P, n)``."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        R = self.output(X, theta) - Y
        J = self.jacobian(X, theta).reshape(X.shape[0], self.n_out, self.n_params)
        return np.einsum("pk,pka->pa", R, J)

    def gradient(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Full-batch gradient ``grad L = (1/P) sum_mu g^mu = J^T vec_r(R) / P``."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        R = self.output(X, theta) - Y
        return self.jacobian(X, theta).T @ R.ravel() / X.shape[0]

    def replica_gradients(self, Xb: ArrayLike, Yb: ArrayLike, Theta: ArrayLike) -> FloatArray:
        """Mini-batch gradients ``(1/S) sum_s g^{mu_s}`` of ``R`` parameter vectors, each on its
        own batch (the gradient of Eq. 10 at every replica): ``Xb`` (R, S, N_i), ``Yb``
        (R, S, N_o), ``Theta`` (R, n) -> (R, n).

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
        """Gauss-Newton part ``J^T J / P`` of the Hessian (the drift of Eqs. 79-81)."""
        X, theta, _ = self.check_inputs(X, theta)
        J = self.jacobian(X, theta)
        return J.T @ J / X.shape[0]

    def residual_hessian(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Residual-curvature part ``(1/P) sum_mu sum_k R[mu, k] d^2 f_k / d theta^2``."""
        X, theta, Y = self.check_inputs(X, theta, Y)
        R = self.output(X, theta) - Y
        Hr = self.output_hessian_contract(X, theta, R) / X.shape[0]
        return 0.5 * (Hr + Hr.T)

    def hessian(self, X: ArrayLike, Y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """Full Hessian of ``L``: :meth:`gauss_newton` + :meth:`residual_hessian`."""
        return self.gauss_newton(X, theta) + self.residual_hessian(X, Y, theta)
