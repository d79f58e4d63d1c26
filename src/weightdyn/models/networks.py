"""Built-in models: :class:`Linear`, :class:`DeepLinear` and :class:`OneHidden`.

Analytic Jacobians and residual-curvature contractions (no finite differences). Conventions
(rows are samples, column-major ``vec``, sample-major Jacobian rows) and the objective (any
loss of :mod:`weightdyn.models.losses` and a weight decay, :meth:`Model.with_objective`) are
those of :mod:`weightdyn.models.base`; the replica-gradient overrides take any objective too.
Their autodiff twins with the same ``theta`` layout are
:func:`weightdyn.models.jax_model.jax_deep_linear` and
:func:`weightdyn.models.jax_model.jax_one_hidden`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit

from weightdyn.models.base import FloatArray, Model

__all__ = ["ACTIVATIONS", "DeepLinear", "Linear", "OneHidden"]


def _check_width(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _vec_block(T: FloatArray, P: int, n_out: int) -> FloatArray:
    """``(P, N_o, cols, rows)`` tensor of ``d f / d A[row, col]`` -> ``(P, N_o, rows*cols)``.

    Column-major vec: ``A[row, col] -> row + rows * col``, i.e. C order over ``(col, row)``.
    """
    return T.reshape(P, n_out, -1)


def _unvec(block: FloatArray, rows: int, cols: int) -> FloatArray:
    """``(R, rows * cols)`` column-major vecs -> ``(R, rows, cols)`` matrices."""
    return block.reshape(block.shape[0], cols, rows).transpose(0, 2, 1)


def _vec(A: FloatArray) -> FloatArray:
    """``(R, rows, cols)`` matrices -> ``(R, rows * cols)`` column-major vecs."""
    return A.transpose(0, 2, 1).reshape(A.shape[0], -1)


def _with_ones(A: FloatArray) -> FloatArray:
    """Append a column of ones along the last axis (the bias input)."""
    return np.concatenate([A, np.ones((*A.shape[:-1], 1))], axis=-1)


class Linear(Model):
    """Single-layer linear network ``f(x) = W x`` (Sec. II; ``N_o = 1`` is ``y = w^T x``).

    ``theta = vec(W)`` with ``W`` of shape ``(N_o, N_i)``: ``W[k, i] -> theta[k + N_o i]``;
    for ``N_o = 1`` simply ``theta = w``. ``H = X^T X / P`` (Eq. 4, kron ``1_{N_o}``); the
    residual curvature vanishes identically.
    """

    def __init__(self, n_in: int, n_out: int = 1) -> None:
        self.n_in = _check_width(n_in, "n_in")
        self.n_out = _check_width(n_out, "n_out")

    @property
    def n_params(self) -> int:
        return self.n_in * self.n_out

    @property
    def last_layer(self) -> slice:
        """The one layer ``vec(W)``."""
        return slice(0, self.n_params)

    def weights(self, theta: ArrayLike) -> FloatArray:
        """``W`` of shape ``(N_o, N_i)`` from ``theta = vec(W)``."""
        return np.asarray(theta, dtype=float).reshape(self.n_out, self.n_in, order="F")

    def output(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        X, theta, _ = self.check_inputs(X, theta)
        return X @ self.weights(theta).T

    def jacobian(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        X, theta, _ = self.check_inputs(X, theta)
        P = X.shape[0]
        T = np.einsum("pi,kl->pkil", X, np.eye(self.n_out))
        return _vec_block(T, P, self.n_out).reshape(P * self.n_out, self.n_params)

    def output_hessian_contract(self, X: ArrayLike, theta: ArrayLike, R: ArrayLike) -> FloatArray:
        return np.zeros((self.n_params, self.n_params))


class DeepLinear(Model):
    """Deep linear network ``f(x) = W_L ... W_2 W_1 x`` with ``widths = [N_i, N_1, ..., N_o]``.

    ``W_l`` has shape ``(N_l, N_{l-1})``, ``theta = [vec(W_1); vec(W_2); ...]`` (column-major
    vec); for depth ``L = 2`` this is exactly :func:`weightdyn.two_layer.theory.pack`
    (Sec. III). Minima are not isolated: ``W_{l+1} W_l`` is invariant under
    ``W_l -> G W_l``, ``W_{l+1} -> W_{l+1} G^-1`` (``G in GL(N_l)``).
    """

    def __init__(self, widths: Sequence[int]) -> None:
        widths = [_check_width(w, "widths entry") for w in widths]
        if len(widths) < 3:
            raise ValueError(
                f"widths must list [N_i, N_1, ..., N_o] with depth len(widths) - 1 >= 2, got "
                f"{widths!r} (use Linear for depth 1)"
            )
        self.widths = widths
        self.n_in, self.n_out = widths[0], widths[-1]
        self.shapes = [(widths[i + 1], widths[i]) for i in range(len(widths) - 1)]
        self.offsets = np.cumsum([0] + [a * b for a, b in self.shapes]).tolist()

    @property
    def depth(self) -> int:
        return len(self.shapes)

    @property
    def n_params(self) -> int:
        return int(self.offsets[-1])

    @property
    def last_layer(self) -> slice:
        """``vec(W_L)``."""
        return slice(int(self.offsets[-2]), int(self.offsets[-1]))

    def weights(self, theta: ArrayLike) -> list[FloatArray]:
        """``[W_1, ..., W_L]`` from ``theta``."""
        theta = np.asarray(theta, dtype=float)
        return [
            theta[self.offsets[i] : self.offsets[i + 1]].reshape(shape, order="F")
            for i, shape in enumerate(self.shapes)
        ]

    def pack(self, weights: Sequence[ArrayLike]) -> FloatArray:
        """``theta = [vec(W_1); ...; vec(W_L)]``."""
        return np.concatenate([np.asarray(W, dtype=float).ravel(order="F") for W in weights])

    def random_theta(self, rng: np.random.Generator, scale: float = 1.0) -> FloatArray:
        """Entries of ``W_l`` i.i.d. ``N(0, scale^2 / N_{l-1})`` (fan-in scaling)."""
        return self.pack([scale * rng.standard_normal(s) / np.sqrt(s[1]) for s in self.shapes])

    def _chain(self, Ws: list[FloatArray], lo: int, hi: int, n: int) -> FloatArray:
        """``W_{hi-1} ... W_{lo}`` (0-based layer indices), identity of size ``n`` if empty."""
        return reduce(lambda acc, W: W @ acc, Ws[lo:hi], np.eye(n))

    def _hidden(self, X: FloatArray, Ws: list[FloatArray]) -> list[FloatArray]:
        """``[h_0 = X, h_1, ..., h_L]`` with ``h_l = h_{l-1} W_l^T`` (rows are samples)."""
        hs = [X]
        for W in Ws:
            hs.append(hs[-1] @ W.T)
        return hs

    def output(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        X, theta, _ = self.check_inputs(X, theta)
        return self._hidden(X, self.weights(theta))[-1]

    def jacobian(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        X, theta, _ = self.check_inputs(X, theta)
        P, Ws = X.shape[0], self.weights(theta)
        hs = self._hidden(X, Ws)
        blocks = []
        for l in range(self.depth):  # noqa: E741
            A = self._chain(Ws, l + 1, self.depth, self.shapes[l][0])  # (N_o, N_l)
            blocks.append(_vec_block(np.einsum("ka,pb->pkba", A, hs[l]), P, self.n_out))
        return np.concatenate(blocks, axis=2).reshape(P * self.n_out, self.n_params)

    def replica_gradients(self, Xb: ArrayLike, Yb: ArrayLike, Theta: ArrayLike) -> FloatArray:
        """Backpropagation for all replicas at once: ``delta_L = dl/df`` (``f - y`` for squared
        error), ``dL/dW_l = <delta_l h_{l-1}^T>_batch``, ``delta_{l-1} = W_l^T delta_l``; plus
        ``chi theta`` (any :attr:`loss_function` and :attr:`weight_decay`)."""
        Xb, Yb, Theta = (np.asarray(a, dtype=float) for a in (Xb, Yb, Theta))
        S = Xb.shape[1]
        Ws = [
            _unvec(Theta[:, self.offsets[i] : self.offsets[i + 1]], *shape)
            for i, shape in enumerate(self.shapes)
        ]
        hs = [Xb]
        for W in Ws:
            hs.append(np.einsum("rsb,rab->rsa", hs[-1], W))
        delta = self._stacked_residuals(hs[-1], Yb)
        grads = []
        for l in reversed(range(self.depth)):  # noqa: E741
            grads.append(_vec(np.einsum("rsa,rsb->rab", delta, hs[l]) / S))
            delta = np.einsum("rsa,rab->rsb", delta, Ws[l])
        return self._add_decay(np.concatenate(grads[::-1], axis=1), Theta)

    def output_hessian_contract(self, X: ArrayLike, theta: ArrayLike, R: ArrayLike) -> FloatArray:
        """Only cross-layer blocks: ``d^2 f_k / dW_m[c, d] dW_l[a, b] = A_m[k, c] B[d, a] h_b``.

        ``A_m = W_L ... W_{m+1}``, ``B = W_{m-1} ... W_{l+1}`` (``l < m``), ``h = h_{l-1}``.
        """
        X, theta, _ = self.check_inputs(X, theta)
        R = np.asarray(R, dtype=float).reshape(X.shape[0], self.n_out)
        Ws = self.weights(theta)
        hs = self._hidden(X, Ws)
        out = np.zeros((self.n_params, self.n_params))
        for l in range(self.depth):  # noqa: E741
            G = R.T @ hs[l]  # (N_o, N_{l-1})
            for m in range(l + 1, self.depth):
                A = self._chain(Ws, m + 1, self.depth, self.shapes[m][0])  # (N_o, N_m)
                B = self._chain(Ws, l + 1, m, self.shapes[l][0])  # (N_{m-1}, N_l)
                T = np.einsum("cb,da->badc", A.T @ G, B).reshape(
                    self.offsets[l + 1] - self.offsets[l], -1
                )
                rows = slice(self.offsets[l], self.offsets[l + 1])
                cols = slice(self.offsets[m], self.offsets[m + 1])
                out[rows, cols] = T
                out[cols, rows] = T.T
        return out


def _tanh(z: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    t = np.tanh(z)
    d1 = 1.0 - t**2
    return t, d1, -2.0 * t * d1


def _softplus(z: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    s = expit(z)
    return np.logaddexp(0.0, z), s, s * (1.0 - s)


#: Smooth activations: name -> ``z -> (phi(z), phi'(z), phi''(z))``.
ACTIVATIONS: dict[str, Callable[[FloatArray], tuple[FloatArray, FloatArray, FloatArray]]] = {
    "tanh": _tanh,
    "softplus": _softplus,
}


class OneHidden(Model):
    """One-hidden-layer network ``f(x) = W2 phi(W1 x + b1) + b2`` (App. A's nonlinear case).

    With the augmented matrices ``W1~ = [W1 | b1]`` (``(N_h, N_i + 1)``) and
    ``W2~ = [W2 | b2]`` (``(N_o, N_h + 1)``), ``theta = [vec(W1~); vec(W2~)] =
    [vec(W1); b1; vec(W2); b2]`` (column-major vec). With ``bias=False`` the bias entries
    are absent. ``activation`` is ``"tanh"`` or ``"softplus"`` (smooth, so the Hessian exists).
    """

    def __init__(
        self, n_in: int, n_hidden: int, n_out: int = 1, activation: str = "tanh", bias: bool = True
    ) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)} (smooth, twice "
                f"differentiable), got {activation!r}"
            )
        self.n_in = _check_width(n_in, "n_in")
        self.n_hidden = _check_width(n_hidden, "n_hidden")
        self.n_out = _check_width(n_out, "n_out")
        self.activation = activation
        self.bias = bool(bias)
        self._phi = ACTIVATIONS[activation]
        self.n1 = self.n_hidden * (self.n_in + self.bias)

    @property
    def n_params(self) -> int:
        return self.n1 + self.n_out * (self.n_hidden + self.bias)

    @property
    def last_layer(self) -> slice:
        """``vec(W2~) = [vec(W2); b2]``."""
        return slice(self.n1, self.n_params)

    def weights(self, theta: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Augmented ``(W1~, W2~)`` of shapes ``(N_h, N_i + b)`` and ``(N_o, N_h + b)``."""
        theta = np.asarray(theta, dtype=float)
        W1 = theta[: self.n1].reshape(self.n_hidden, self.n_in + self.bias, order="F")
        W2 = theta[self.n1 :].reshape(self.n_out, self.n_hidden + self.bias, order="F")
        return W1, W2

    def random_theta(self, rng: np.random.Generator, scale: float = 1.0) -> FloatArray:
        """Entries of ``W1~``, ``W2~`` i.i.d. ``N(0, scale^2 / fan_in)`` (fan-in incl. bias)."""
        s1 = (self.n_hidden, self.n_in + self.bias)
        s2 = (self.n_out, self.n_hidden + self.bias)
        W1 = scale * rng.standard_normal(s1) / np.sqrt(s1[1])
        W2 = scale * rng.standard_normal(s2) / np.sqrt(s2[1])
        return np.concatenate([W1.ravel(order="F"), W2.ravel(order="F")])

    def _augment(self, A: FloatArray) -> FloatArray:
        return _with_ones(A) if self.bias else A

    def _forward(self, X: FloatArray, theta: FloatArray) -> tuple[FloatArray, ...]:
        """``(X~, phi(Z)~, phi'(Z), phi''(Z), W2)`` with ``Z = X~ W1~^T``."""
        W1, W2t = self.weights(theta)
        Xt = self._augment(X)
        a, d1, d2 = self._phi(Xt @ W1.T)
        return Xt, self._augment(a), d1, d2, W2t

    def output(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        X, theta, _ = self.check_inputs(X, theta)
        _, at, _, _, W2t = self._forward(X, theta)
        return at @ W2t.T

    def jacobian(self, X: ArrayLike, theta: ArrayLike) -> FloatArray:
        X, theta, _ = self.check_inputs(X, theta)
        P = X.shape[0]
        Xt, at, d1, _, W2t = self._forward(X, theta)
        W2 = W2t[:, : self.n_hidden]
        J1 = np.einsum("kh,ph,pi->pkih", W2, d1, Xt)
        J2 = np.einsum("pg,kl->pkgl", at, np.eye(self.n_out))
        J = np.concatenate([_vec_block(J1, P, self.n_out), _vec_block(J2, P, self.n_out)], axis=2)
        return J.reshape(P * self.n_out, self.n_params)

    def replica_gradients(self, Xb: ArrayLike, Yb: ArrayLike, Theta: ArrayLike) -> FloatArray:
        """Backpropagation for all replicas at once: ``r = dl/df`` (``f - y`` for squared
        error), ``dL/dW2~ = <r a~^T>``, ``delta = phi'(z) * (W2^T r)``, ``dL/dW1~ =
        <delta x~^T>`` (batch means); plus ``chi theta`` (any loss and weight decay)."""
        Xb, Yb, Theta = (np.asarray(a, dtype=float) for a in (Xb, Yb, Theta))
        S = Xb.shape[1]
        nh, b = self.n_hidden, int(self.bias)
        W1 = _unvec(Theta[:, : self.n1], nh, self.n_in + b)
        W2 = _unvec(Theta[:, self.n1 :], self.n_out, nh + b)
        Xt = self._augment(Xb)
        a, d1, _ = self._phi(np.einsum("rsi,rhi->rsh", Xt, W1))
        at = self._augment(a)
        res = self._stacked_residuals(np.einsum("rsh,rkh->rsk", at, W2), Yb)
        delta = np.einsum("rsk,rkh->rsh", res, W2[:, :, :nh]) * d1
        G1 = np.einsum("rsh,rsi->rhi", delta, Xt) / S
        G2 = np.einsum("rsk,rsh->rkh", res, at) / S
        return self._add_decay(np.concatenate([_vec(G1), _vec(G2)], axis=1), Theta)

    def output_hessian_contract(self, X: ArrayLike, theta: ArrayLike, R: ArrayLike) -> FloatArray:
        """Blocks ``(W1~, W1~)``: ``(R W2)_h phi''(z_h) x~_i x~_j delta_hh'``; ``(W1~, W2~)``:
        ``R_k phi'(z_h) x~_i delta_hg``; ``(W2~, W2~)``: 0."""
        X, theta, _ = self.check_inputs(X, theta)
        R = np.asarray(R, dtype=float).reshape(X.shape[0], self.n_out)
        Xt, _, d1, d2, W2t = self._forward(X, theta)
        nh = self.n_hidden
        T11 = np.einsum("ph,pi,pj->hij", (R @ W2t[:, :nh]) * d2, Xt, Xt)
        H11 = np.einsum("hij,hg->ihjg", T11, np.eye(nh)).reshape(self.n1, self.n1)
        V = np.einsum("pk,ph,pi->hik", R, d1, Xt)
        H12 = np.einsum("hik,hg->ihgk", V, np.eye(nh, nh + self.bias)).reshape(self.n1, -1)
        H22 = np.zeros((H12.shape[1], H12.shape[1]))
        return np.block([[H11, H12], [H12.T, H22]])
