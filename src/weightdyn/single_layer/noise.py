"""Mini-batch noise covariance of the single-layer linear network (paper 000, Sec. II.2.2).

Measures what the paper's Figs. 1 and 2 show and compares it with the closed forms of
:mod:`weightdyn.single_layer.theory`:

* the off-diagonal variance of the sample-space projector ``X^+ X`` that enters Eq. 18
  (Fig. 1a), with its exact value for a Haar-random projector;
* the diagonal of ``K`` (Eq. 18) against squared Gaussian label noise (Fig. 1b);
* the covariance of the mini-batch gradient (Eqs. 10, 12, 14) estimated from many random
  mini-batches, against Eq. 17 and the Hessian approximation Eq. 20 (Fig. 2a,b);
* the noise covariance in the Hessian eigenbasis ``|V^T C V|`` (Fig. 2c).

The ``*_dataset`` builders return one sweep cell each (no ``N``/``P`` dimensions; the experiments
of :mod:`weightdyn.single_layer.noise_experiments` call them and the sweep merge stacks them along
``cell``). A cell with ``P <= N`` interpolates its data: the projector is the identity and the
noise vanishes (Eq. 16), so its measured values are NaN and its ``interpolating`` flag is 1.

Conventions as in :mod:`weightdyn.single_layer.theory`: ``X`` has shape ``(P, N)`` (one row
per sample, the transpose of the paper's design matrix), ``y = X u + eps`` has shape ``(P,)``,
``sigma_x^2 = 1/N``. The paper's projector ``X_paper^+ X_paper`` (``P x P``, onto the row
space of ``X_paper``) is, in this orientation, the projector onto the column space of ``X``.
Pure numpy, no file I/O; every random draw comes from the ``rng`` passed in.

Paper claim checked here (Fig. 1a measurement, see the fitted exponents): the text
after Eq. 18 states ``var(P) ~ P^-1.8 N^-1``. For Gaussian data the column space of ``X`` is
Haar distributed and the off-diagonal variance is exactly ``N (P - N) / (P (P-1) (P+2))``,
i.e. ``~ N / P^2`` for ``P >> N``: it *grows* with ``N`` (exponent +1, not -1), and the
apparent ``P`` exponent tends to -2 (local slope ``-2 + N / (P - N)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import ceil
from typing import NamedTuple

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from weightdyn.io import attrs
from weightdyn.single_layer import theory
from weightdyn.single_layer.theory import Sampling

__all__ = [
    "PowerLawFit",
    "empirical_noise_covariance",
    "empirical_noise_spectrum",
    "haar_projector_offdiag_variance",
    "hessian_basis_abs",
    "hessian_basis_dataset",
    "hessian_basis_mean",
    "k_diagonal_dataset",
    "noise_spectrum_dataset",
    "power_law_fit",
    "projector_dataset",
    "projector_offdiag_variance",
]

FloatArray = NDArray[np.float64]

_SAMPLING_VALUES = ("with", "without")
#: memory budget (bytes) of the gathered per-sample gradients of one chunk of mini-batches
_CHUNK_BYTES = 32 * 2**20
#: minimum number of chunks, so that the batch-means standard error has enough blocks
_MIN_BLOCKS = 20


# ------------------------------------------------------------------ projector (Fig. 1a)


def projector_offdiag_variance(X: ArrayLike) -> float:
    """Variance of the off-diagonal entries of the sample-space projector (Eq. 18 text, Fig. 1a).

    The projector is ``Pi = X X^+`` (``P x P``), onto the column space of ``X`` (shape
    ``(P, N)``); it is the paper's ``X^+ X`` in the paper's transposed convention. Returned is
    the mean of ``Pi_mu_nu^2`` over the ``P (P - 1)`` off-diagonal entries, i.e. their variance
    about the ensemble mean 0 (exact for data whose law is symmetric under ``x^mu -> -x^mu``,
    such as Gaussian inputs, which flips the sign of ``Pi_mu_nu``). Its expectation for Gaussian
    inputs is :func:`haar_projector_offdiag_variance`.

    Computed without forming ``Pi``: with ``Q`` an orthonormal basis of the column space
    (rank ``r``), ``sum_{mu nu} Pi_mu_nu^2 = r`` and ``Pi_mu_mu = |Q_mu|^2``, so the
    off-diagonal sum of squares is ``r - sum_mu |Q_mu|^4`` (cost ``O(P N^2)``).
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (P, N), got shape {X.shape}")
    P = X.shape[0]
    if P < 2:
        raise ValueError(f"need P >= 2 samples for off-diagonal entries, got P = {P}")
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    tol = s[0] * max(X.shape) * np.finfo(float).eps if s.size else 0.0
    Q = U[:, s > tol]
    diag = np.einsum("ij,ij->i", Q, Q)
    return float((Q.shape[1] - diag @ diag) / (P * (P - 1)))


def haar_projector_offdiag_variance(N: int | ArrayLike, P: int | ArrayLike) -> FloatArray | float:
    """Exact off-diagonal variance ``N (P - N) / (P (P - 1) (P + 2))`` of a Haar rank-N projector.

    For a uniformly random ``N``-dimensional subspace of ``R^P`` (``P >= N``), e.g. the column
    space of a Gaussian ``(P, N)`` matrix, ``E[Pi_mu_mu] = N/P``,
    ``E[Pi_mu_mu^2] = N (N + 2) / (P (P + 2))`` and ``sum_nu Pi_mu_nu^2 = Pi_mu_mu``, which gives
    the formula for ``E[Pi_mu_nu^2]``, ``mu != nu`` (the quantity of paper 000 Fig. 1a, text
    after Eq. 18). For ``P >> N`` it is ``~ N / P^2``. Broadcasts over array arguments.
    """
    N_arr = np.asarray(N, dtype=float)
    P_arr = np.asarray(P, dtype=float)
    if np.any(N_arr < 1) or np.any(P_arr < 2) or np.any(P_arr < N_arr):
        raise ValueError(f"need 1 <= N <= P and P >= 2, got N={N!r}, P={P!r}")
    out = N_arr * (P_arr - N_arr) / (P_arr * (P_arr - 1.0) * (P_arr + 2.0))
    return float(out) if out.ndim == 0 else out


class PowerLawFit(NamedTuple):
    """Least-squares fit ``values ~ c P^a N^b`` in logs, with standard errors."""

    a: float
    b: float
    c: float
    a_se: float
    b_se: float
    c_se: float


def power_law_fit(P: ArrayLike, N: ArrayLike, values: ArrayLike) -> PowerLawFit:
    """Fit ``values = c P^a N^b`` by linear least squares of ``log values`` (Fig. 1a claim).

    Standard errors are the usual OLS ones, ``s^2 (A^T A)^-1`` with ``s^2 = RSS / (n - 3)``
    (NaN for fewer than 4 points; 0 for noiseless data). ``c_se`` is propagated from the
    standard error of ``log c``. Non-finite or non-positive values are dropped.

    Raises
    ------
    ValueError
        if fewer than 3 usable points remain or ``log P``, ``log N`` are collinear (e.g. a
        single ``N``), so the exponents are not identifiable.
    """
    P_arr, N_arr, v = np.broadcast_arrays(
        np.asarray(P, dtype=float), np.asarray(N, dtype=float), np.asarray(values, dtype=float)
    )
    keep = np.isfinite(v) & (v > 0) & (P_arr > 0) & (N_arr > 0)
    P_arr, N_arr, v = P_arr[keep], N_arr[keep], v[keep]
    A = np.column_stack([np.log(P_arr), np.log(N_arr), np.ones(P_arr.size)])
    if P_arr.size < 3 or np.linalg.matrix_rank(A) < 3:
        raise ValueError(
            "power_law_fit needs >= 3 points with non-collinear log P and log N "
            f"(got {P_arr.size} usable points)"
        )
    coef, *_ = np.linalg.lstsq(A, np.log(v), rcond=None)
    n = P_arr.size
    if n > 3:
        resid = np.log(v) - A @ coef
        s2 = float(resid @ resid) / (n - 3)
        se = np.sqrt(np.diag(s2 * np.linalg.inv(A.T @ A)))
    else:
        se = np.full(3, np.nan)
    c = float(np.exp(coef[2]))
    return PowerLawFit(
        a=float(coef[0]),
        b=float(coef[1]),
        c=c,
        a_se=float(se[0]),
        b_se=float(se[1]),
        c_se=float(c * se[2]),
    )


# ------------------------------------------------------------- empirical noise (Fig. 2a)


def _check_sampling(sampling: str) -> None:
    if sampling not in _SAMPLING_VALUES:
        raise ValueError(
            f"sampling must be one of {_SAMPLING_VALUES!r} ('with' or 'without' replacement), "
            f"got sampling={sampling!r}"
        )


def _draw_batches(
    rng: np.random.Generator, P: int, S: int, n: int, sampling: Sampling
) -> NDArray[np.intp]:
    """Indices ``(n, S)`` of ``n`` independent mini-batches.

    ``with``: i.i.d. uniform indices. ``without``: ``S`` distinct indices per batch, drawn with
    Floyd's algorithm vectorised over batches (exactly uniform over ``S``-subsets, cost
    ``O(n S^2)`` independent of ``P``); the order inside a batch is irrelevant for the sum.
    """
    if sampling == "with":
        return rng.integers(0, P, size=(n, S))
    idx = np.empty((n, S), dtype=np.intp)
    for k, j in enumerate(range(P - S, P)):
        t = rng.integers(0, j + 1, size=n)
        if k:
            taken = (idx[:, :k] == t[:, None]).any(axis=1)
            t = np.where(taken, j, t)
        idx[:, k] = t
    return idx


def _checked_noise_inputs(
    X: ArrayLike,
    y: ArrayLike,
    w: ArrayLike,
    batch_size: int,
    sampling: Sampling,
    n_batches: int,
) -> tuple[FloatArray, FloatArray, FloatArray, int]:
    """``(X, y, w, S)`` as float arrays and an int batch size, validated for
    :func:`empirical_noise_covariance` (Eqs. 10, 12, 14); raises its ``ValueError``s."""
    _check_sampling(sampling)
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    w = np.asarray(w, dtype=float)
    if X.ndim != 2 or y.shape != (X.shape[0],) or w.shape != (X.shape[1],):
        raise ValueError(
            f"need X (P, N), y (P,), w (N,); got X {X.shape}, y {y.shape}, w {w.shape}"
        )
    P = X.shape[0]
    S = int(batch_size)
    if S < 1 or (sampling == "without" and S > P):
        raise ValueError(f"batch_size must be in [1, P={P}] (without replacement), got {S}")
    if n_batches < 2:
        raise ValueError(f"n_batches must be >= 2, got {n_batches}")
    return X, y, w, S


def _centred_sample_gradients(X: FloatArray, y: FloatArray, w: FloatArray) -> FloatArray:
    """Per-sample gradients ``g^mu = (w . x^mu - y^mu) x^mu`` (Eq. 10) minus their mean, the
    full-batch gradient ``grad L(w)`` (both samplings), as a contiguous (P, N) array: a batch
    mean of these rows is the noise ``xi = grad L_B - grad L`` of Eq. 12, and the shift keeps
    the accumulation well conditioned."""
    grads = (X @ w - y)[:, None] * X  # per-sample gradients g^mu, (P, N)
    ref = grads.mean(axis=0)  # full-batch gradient = exact mean (both samplings)
    return np.ascontiguousarray(grads - ref)


def _batches_per_chunk(chunk: int | None, S: int, N: int, n_batches: int) -> int:
    """Mini-batches per chunk: ``chunk`` (default: about ``_CHUNK_BYTES`` of gathered
    gradients), capped so that there are at least ``_MIN_BLOCKS`` chunks."""
    if chunk is None:
        chunk = max(1, _CHUNK_BYTES // (8 * S * N))
    return max(1, min(int(chunk), ceil(n_batches / _MIN_BLOCKS)))


class _NoiseSums(NamedTuple):
    """Sums of the noise vectors ``xi`` (Eq. 12) over ``n_batches`` mini-batches: ``sum_d``
    (N,), ``sum_dd`` (N, N) of ``xi xi^T``, and per chunk the mean ``|xi|^2`` (``block_q``)
    and the number of batches (``block_n``)."""

    sum_d: FloatArray
    sum_dd: FloatArray
    block_q: list[float]
    block_n: list[int]


def _noise_sums(
    grads: FloatArray,
    S: int,
    sampling: Sampling,
    n_batches: int,
    chunk: int,
    rng: np.random.Generator,
) -> _NoiseSums:
    """Accumulates the noise ``xi = grad L_B - grad L`` (Eqs. 10, 12) of ``n_batches`` random
    mini-batches of size ``S``, ``chunk`` batches at a time, from the centred per-sample
    gradients ``grads`` (:func:`_centred_sample_gradients`)."""
    P, N = grads.shape
    sum_d = np.zeros(N)
    sum_dd = np.zeros((N, N))
    block_q: list[float] = []
    block_n: list[int] = []
    done = 0
    while done < n_batches:
        n = min(chunk, n_batches - done)
        idx = _draw_batches(rng, P, S, n, sampling)
        d = grads[idx].sum(axis=1) / S  # (n, N): grad L_B - grad L
        sum_d += d.sum(axis=0)
        sum_dd += d.T @ d
        block_q.append(float(np.einsum("ij,ij->", d, d)) / n)
        block_n.append(n)
        done += n
    return _NoiseSums(sum_d, sum_dd, block_q, block_n)


def _sample_covariance(sums: _NoiseSums, n_batches: int) -> FloatArray:
    """Unbiased (``ddof = 1``), symmetrised sample covariance of the noise from its sums: the
    estimate of Eq. 14."""
    mean = sums.sum_d / n_batches
    C = (sums.sum_dd - n_batches * np.outer(mean, mean)) / (n_batches - 1)
    return 0.5 * (C + C.T)


def _trace_batch_means_se(sums: _NoiseSums, n_batches: int) -> float:
    """Standard error of ``tr C`` (Eq. 14 estimate) by batch means over the chunks, weighted by
    their sizes; NaN for a single chunk."""
    q = np.asarray(sums.block_q)
    nb = np.asarray(sums.block_n, dtype=float)
    if q.size < 2:
        return float("nan")
    qbar = float(nb @ q) / n_batches
    var_mean = float(np.sum(nb**2 * (q - qbar) ** 2)) / n_batches**2 * q.size / (q.size - 1)
    return float(np.sqrt(var_mean) * n_batches / (n_batches - 1))


def empirical_noise_covariance(
    X: ArrayLike,
    y: ArrayLike,
    w: ArrayLike,
    batch_size: int,
    sampling: Sampling,
    n_batches: int,
    rng: np.random.Generator,
    chunk: int | None = None,
) -> tuple[FloatArray, float]:
    """Covariance of the mini-batch gradient over random mini-batches (Eqs. 10, 12, 14).

    For each of ``n_batches`` independent mini-batches ``B`` of size ``S = batch_size``,
    ``grad L_B(w) = (1/S) sum_{mu in B} (w . x^mu - y^mu) x^mu`` (Eq. 10); the returned matrix
    is the unbiased sample covariance (``ddof = 1``) of these vectors, i.e. of the noise
    ``xi = grad L_B - grad L`` of Eq. 12. Its expectation is Eq. 14 with the prefactor of
    Appendix C (:func:`weightdyn.single_layer.theory.noise_covariance` with the same ``w``;
    Eq. 17 at ``w = w*``).

    ``sampling``: ``"with"`` draws i.i.d. indices, ``"without"`` draws ``S`` distinct
    indices per batch (batches independent of each other). Batches are processed in chunks
    of ``chunk`` (default: about 32 MB of gathered gradients, and at least 20 chunks), and only
    sums are accumulated, so ``4e5`` batches at ``N = 100`` fit in memory.

    Returns
    -------
    C : (N, N) array
        Empirical covariance.
    trace_se : float
        Standard error of ``tr C`` by batch means over the chunks (``NaN`` for one chunk).

    Raises
    ------
    ValueError
        if ``sampling`` is not ``"with"``/``"without"``, shapes mismatch, ``batch_size < 1``,
        ``batch_size > P`` without replacement, or ``n_batches < 2``.
    """
    X, y, w, S = _checked_noise_inputs(X, y, w, batch_size, sampling, n_batches)
    grads = _centred_sample_gradients(X, y, w)
    chunk = _batches_per_chunk(chunk, S, X.shape[1], n_batches)
    sums = _noise_sums(grads, S, sampling, n_batches, chunk, rng)
    return _sample_covariance(sums, n_batches), _trace_batch_means_se(sums, n_batches)


# ---------------------------------------------------------------- Hessian basis (Fig. 2c)


def hessian_basis_abs(H: ArrayLike, C: ArrayLike) -> FloatArray:
    """``|V^T C V|`` with ``V`` the eigenvectors of ``H`` sorted by ascending eigenvalue (Fig. 2c).

    Entry ``(i, j)`` couples Hessian modes ``i`` and ``j``; for ``C`` commuting with ``H``
    (e.g. Eq. 20) the matrix is diagonal. Paper 000: ``V^T C V = D^{1/2} U^T K U D^{1/2} / S``
    (text before Eq. 19), which is not diagonal for finite ``P``.
    """
    H = np.asarray(H, dtype=float)
    C = np.asarray(C, dtype=float)
    if H.ndim != 2 or H.shape[0] != H.shape[1] or C.shape != H.shape:
        raise ValueError(f"H and C must be square of equal shape, got {H.shape}, {C.shape}")
    _, V = np.linalg.eigh(0.5 * (H + H.T))
    return np.abs(V.T @ (0.5 * (C + C.T)) @ V)


# ------------------------------------------------------------------- dataset builders
#
# One builder per experiment cell. Cells carry no N, P dimensions: the sweep merge
# (:func:`weightdyn.io.stack_cells`) puts them along ``cell`` with one coordinate per axis.


def _interpolating(N: int, P: int) -> tuple:
    """The ``interpolating`` flag: ``P <= N``, so ``w*`` fits every label and K = C = 0."""
    return (
        (),
        np.int8(P <= N),
        {
            **attrs(
                "1 if P <= N: w* interpolates the data (X X^+ = 1, K = 0, C = 0), "
                "measured values are NaN",
                "1",
                "paper 000 Eq. 16",
            ),
            "flag_values": np.array([0, 1], dtype=np.int8),
            "flag_meanings": "regular interpolating",
        },
    )


_EQ4 = "paper 000 Eq. 4"


def _index(dim: str, n: int, long_name: str) -> tuple:
    return ((dim,), np.arange(n), attrs(long_name, "1", "paper 000 Sec. II.2.2"))


def projector_dataset(N: int, P: int, n_realisations: int, rng: np.random.Generator) -> xr.Dataset:
    """Fig. 1a cell: off-diagonal variance of ``X X^+`` over Gaussian data realisations.

    Draws ``n_realisations`` inputs ``X ~ N(0, 1/N)`` of shape ``(P, N)`` and returns
    ``var_offdiag`` (dim ``realisation``), its mean ``var_offdiag_mean``, standard error
    ``var_offdiag_se`` and the exact Haar value ``var_offdiag_haar``. For ``P <= N`` the
    projector is the identity: nothing is drawn, the values are NaN and ``interpolating`` is 1.
    """
    if N < 1 or P < 1:
        raise ValueError(f"need N >= 1 and P >= 1, got N = {N}, P = {P}")
    if n_realisations < 2:
        raise ValueError(f"n_realisations must be >= 2, got {n_realisations}")
    nan = np.full(n_realisations, np.nan)
    if P <= N:
        values, mean, se, haar = nan, np.nan, np.nan, np.nan
    else:
        sigma_x = np.sqrt(1.0 / N)
        values = np.array(
            [
                projector_offdiag_variance(rng.normal(0.0, sigma_x, size=(P, N)))
                for _ in range(n_realisations)
            ]
        )
        mean = values.mean()
        se = values.std(ddof=1) / np.sqrt(values.size)
        haar = haar_projector_offdiag_variance(N, P)
    src = "paper 000 Eq. 18 text, Fig. 1a"
    name = "variance of off-diagonal entries of X^+X"
    return xr.Dataset(
        {
            "var_offdiag": (("realisation",), values, attrs(name + " (one data set)", "1", src)),
            "var_offdiag_mean": ((), mean, attrs(name + ", mean over data sets", "1", src)),
            "var_offdiag_se": ((), se, attrs("standard error of var_offdiag_mean", "1", src)),
            "var_offdiag_haar": (
                (),
                haar,
                attrs(name + ", exact Haar value N(P-N)/(P(P-1)(P+2))", "1", src),
            ),
            "interpolating": _interpolating(N, P),
        },
        coords={"realisation": _index("realisation", n_realisations, "data realisation")},
    )


def k_diagonal_dataset(
    X: ArrayLike, y: ArrayLike, rng: np.random.Generator, sigma_eps2: float
) -> xr.Dataset:
    """Fig. 1b cell: sorted diagonal of ``K`` (Eq. 18) against squared Gaussian label noise.

    ``PK_sorted`` is ``P K^mu_mu`` (``= r_mu^2``, the squared residual at ``w*``, which
    compares with ``eps_mu^2``), sorted descending along ``rank`` (``0 .. P-1``);
    ``eps2_sorted`` holds the sorted squares of ``P`` fresh ``N(0, sigma_eps^2)`` draws
    from ``rng`` (the paper's black curve). For ``P <= N`` the residual vanishes: both are NaN
    (nothing drawn) and ``interpolating`` is 1.
    """
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    P, N = X.shape
    if P <= N:
        PK = eps2 = np.full(P, np.nan)
    else:
        PK = np.sort(P * theory.sample_weights_K(X, y))[::-1]
        eps2 = np.sort(rng.normal(0.0, np.sqrt(sigma_eps2), size=P) ** 2)[::-1]
    src = "paper 000 Eq. 18, Fig. 1b"
    return xr.Dataset(
        {
            "PK_sorted": (
                ("rank",),
                PK,
                attrs("P K^mu_mu sorted descending (squared residual at w*)", "1", src),
            ),
            "eps2_sorted": (
                ("rank",),
                eps2,
                attrs("squared fresh label noise (epsilon^mu)^2 sorted descending", "1", src),
            ),
            "interpolating": _interpolating(N, P),
        },
        coords={"rank": _index("rank", P, "rank mu of P K^mu_mu, descending")},
    )


def _jackknife(stats: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Delete-one jackknife standard error of statistics ``stats[k]`` computed without block k."""
    K = stats.shape[0]
    mean = stats.mean(axis=0)
    return mean, np.sqrt((K - 1) / K * np.sum((stats - mean) ** 2, axis=0))


def empirical_noise_spectrum(
    X: ArrayLike,
    y: ArrayLike,
    batch_size: int,
    sampling: Sampling,
    n_batches: int,
    rng: np.random.Generator,
    n_blocks: int = 10,
    progress: Callable[[str], None] | None = None,
) -> tuple[FloatArray, FloatArray, float, float]:
    """Eigenvalues (descending) and trace of the mini-batch gradient covariance at ``w*``.

    ``n_batches`` random batches (:func:`empirical_noise_covariance`, Eqs. 10, 12, 14) are
    split into ``n_blocks`` independent blocks whose covariances are pooled; the standard
    errors of the eigenvalues and of the trace come from a delete-one jackknife over blocks.
    Returns ``(eig, eig_se, trace, trace_se)``.
    """
    if n_blocks < 2 or n_batches < 2 * n_blocks:
        raise ValueError(f"need n_blocks >= 2 and n_batches >= 2 n_blocks, got {n_blocks}")
    w_star = theory.min_norm_solution(X, y)
    sizes = np.full(n_blocks, n_batches // n_blocks)
    sizes[: n_batches % n_blocks] += 1
    covs = []
    for k, n in enumerate(sizes):
        covs.append(empirical_noise_covariance(X, y, w_star, batch_size, sampling, int(n), rng)[0])
        if progress is not None:
            progress(f"mini-batch block {k + 1}/{n_blocks} ({int(n)} batches)")
    blocks = np.stack(covs)
    weights = sizes / sizes.sum()
    C_emp = np.tensordot(weights, blocks, axes=1)
    loo = (C_emp[None] - weights[:, None, None] * blocks) / (1.0 - weights)[:, None, None]
    eig_loo = np.stack([theory.sorted_eigenvalues(c) for c in loo])
    _, eig_se = _jackknife(eig_loo)
    _, tr_se = _jackknife(np.trace(loo, axis1=1, axis2=2))
    return theory.sorted_eigenvalues(C_emp), eig_se, float(np.trace(C_emp)), float(tr_se)


def noise_spectrum_dataset(
    X: ArrayLike,
    y: ArrayLike,
    batch_size: int,
    sampling: Sampling,
    n_batches: int,
    rng: np.random.Generator,
    sigma_eps2: float,
    n_blocks: int = 10,
    progress: Callable[[str], None] | None = None,
) -> xr.Dataset:
    """Fig. 2a,b cell: noise-covariance spectra at ``w*``: empirical, Eq. 17 and Eq. 20.

    Variables on dim ``mode`` (``0 .. N-1``, eigenvalues sorted descending):

    * ``eig_C_empirical`` (+ ``_se``): :func:`empirical_noise_spectrum` over ``n_batches``
      random batches; ``n_batches = 0`` skips the measurement (NaN), for theory-only cells.
    * ``eig_C_theory``: Eq. 17 (:func:`theory.noise_covariance`, Appendix C prefactor for
      ``without``); ``eig_C_hessian``: Eq. 20, ``sigma_eps^2 H / S``.

    Scalars: ``C_norm = sigma_x^2 sigma_eps^2 / S`` (``sigma_x^2 = 1/N``, the normalisation of
    Fig. 2, stored, not applied), ``trace_C_empirical`` (+ ``_se``), ``trace_C_theory``,
    ``trace_C_hessian``. For ``P <= N`` the noise vanishes (Eq. 16): every spectrum and trace
    is NaN and ``interpolating`` is 1.
    """
    _check_sampling(sampling)
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    P, N = X.shape
    S = int(batch_size)
    nan = np.full(N, np.nan)
    eig17 = eig20 = eig_emp = eig_se = nan
    tr17 = tr20 = tr_emp = tr_se = float("nan")
    if P > N:
        H = theory.hessian(X)
        C17 = theory.noise_covariance(X, y, S, sampling)
        C20 = theory.hessian_noise_covariance(H, sigma_eps2, S)
        eig17, eig20 = theory.sorted_eigenvalues(C17), theory.sorted_eigenvalues(C20)
        tr17, tr20 = float(np.trace(C17)), float(np.trace(C20))
        if n_batches:
            eig_emp, eig_se, tr_emp, tr_se = empirical_noise_spectrum(
                X, y, S, sampling, n_batches, rng, n_blocks, progress
            )
    spectra = {
        "eig_C_empirical": eig_emp,
        "eig_C_empirical_se": eig_se,
        "eig_C_theory": eig17,
        "eig_C_hessian": eig20,
    }
    traces = {
        "C_norm": sigma_eps2 / (N * S),
        "trace_C_empirical": tr_emp,
        "trace_C_empirical_se": tr_se,
        "trace_C_theory": tr17,
        "trace_C_hessian": tr20,
    }
    return _spectrum_dataset(spectra, traces, N, P)


_EMPIRICAL = "Eqs. 10, 12, 14"
_SPECTRUM_ATTRS = {
    "eig_C_empirical": ("eigenvalues of the mini-batch gradient covariance at w*", _EMPIRICAL),
    "eig_C_empirical_se": ("jackknife standard error of eig_C_empirical", _EMPIRICAL),
    "eig_C_theory": ("eigenvalues of the noise covariance C = X K X^T / S", "Eq. 17"),
    "eig_C_hessian": ("eigenvalues of the Hessian approximation sigma_eps^2 H / S", "Eq. 20"),
    "C_norm": ("noise-spectrum normalisation sigma_x^2 sigma_eps^2 / S", "Fig. 2"),
    "trace_C_empirical": ("trace of the mini-batch gradient covariance at w*", _EMPIRICAL),
    "trace_C_empirical_se": ("jackknife standard error of trace_C_empirical", _EMPIRICAL),
    "trace_C_theory": ("trace of C", "Eq. 17"),
    "trace_C_hessian": ("trace of sigma_eps^2 H / S", "Eq. 20"),
}


def _spectrum_dataset(
    spectra: dict[str, FloatArray], traces: dict[str, float], N: int, P: int
) -> xr.Dataset:
    def var(name: str, dims: tuple[str, ...], values: object) -> tuple:
        long_name, eq = _SPECTRUM_ATTRS[name]
        return dims, np.asarray(values, dtype=float), attrs(long_name, "1", f"paper 000 {eq}")

    data = {k: var(k, ("mode",), v) for k, v in spectra.items()}
    data.update({k: var(k, (), v) for k, v in traces.items()})
    data["interpolating"] = _interpolating(N, P)
    return xr.Dataset(data, coords={"mode": _index("mode", N, "eigenvalue index, descending")})


def hessian_basis_dataset(
    X: ArrayLike, y: ArrayLike, batch_size: int, sampling: Sampling
) -> xr.Dataset:
    """Fig. 2c cell of one data set: ``|V^T C V|`` with ``C`` from Eq. 17 at ``w*``.

    ``C_tilde`` on dims ``(mode_i, mode_j)`` (Hessian modes sorted by ascending eigenvalue,
    :func:`hessian_basis_abs`) and ``eig_H`` (ascending Hessian eigenvalues, Eq. 4, dim
    ``mode_i``). :func:`hessian_basis_mean` averages cells over data realisations. For
    ``P <= N`` both are NaN (C = 0 by Eq. 16) and ``interpolating`` is 1.
    """
    _check_sampling(sampling)
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    P, N = X.shape
    if P <= N:
        C_tilde, eig_H = np.full((N, N), np.nan), np.full(N, np.nan)
    else:
        H = theory.hessian(X)
        C_tilde = hessian_basis_abs(H, theory.noise_covariance(X, y, batch_size, sampling))
        eig_H = theory.relaxation_rates(H)
    src = "paper 000 Eq. 17, Fig. 2c"
    name = "|V^T C V| in the Hessian eigenbasis"
    return xr.Dataset(
        {
            "C_tilde": (("mode_i", "mode_j"), C_tilde, attrs(name, "1", src)),
            "eig_H": (("mode_i",), eig_H, attrs("Hessian eigenvalues (ascending)", "1", _EQ4)),
            "interpolating": _interpolating(N, P),
        },
        coords=_mode_pairs(N),
    )


def _mode_pairs(N: int) -> dict[str, tuple]:
    return {
        "mode_i": _index("mode_i", N, "Hessian mode i, ascending eigenvalue"),
        "mode_j": _index("mode_j", N, "Hessian mode j, ascending eigenvalue"),
    }


def hessian_basis_mean(cells: Sequence[xr.Dataset]) -> xr.Dataset:
    """Fig. 2c: ``<|V^T C V|>`` over data realisations (cells of :func:`hessian_basis_dataset`).

    ``C_tilde`` is the mean over the cells (in the given order), ``C_tilde_se`` its standard
    error (NaN for one cell), ``eig_H`` the mean ascending Hessian spectrum and
    ``n_realisations`` the number of cells.
    """
    if not cells:
        raise ValueError("hessian_basis_mean needs at least one cell")
    mats = np.stack([c["C_tilde"].values for c in cells])
    eigs = np.stack([c["eig_H"].values for c in cells])
    n, N = mats.shape[0], mats.shape[1]
    se = mats.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.full((N, N), np.nan)
    src = "paper 000 Eq. 17, Fig. 2c"
    name = "|V^T C V| in the Hessian eigenbasis, mean over data sets"
    return xr.Dataset(
        {
            "C_tilde": (("mode_i", "mode_j"), mats.mean(axis=0), attrs(name, "1", src)),
            "C_tilde_se": (
                ("mode_i", "mode_j"),
                se,
                attrs("standard error of C_tilde over data sets", "1", src),
            ),
            "eig_H": (
                ("mode_i",),
                eigs.mean(axis=0),
                attrs("Hessian eigenvalues (ascending), mean over data sets", "1", _EQ4),
            ),
            "n_realisations": ((), n, attrs("number of data realisations", "1", src)),
        },
        coords=_mode_pairs(N),
    )
