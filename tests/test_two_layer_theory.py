"""Two-layer linear network theory (paper 000, Sec. III, App. E): identities and errata.

vec convention: theta = [vec(W1); vec(W2)], vec = column stacking (ravel order "F").
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from weightdyn.two_layer import theory as tl

# ------------------------------------------------------------------ fixtures


def _random_problem(rng, P=6, n_in=3, n_hid=2, n_out=2):
    X = rng.normal(size=(P, n_in))
    Y = rng.normal(size=(P, n_out))
    W1 = rng.normal(size=(n_hid, n_in))
    W2 = rng.normal(size=(n_out, n_hid))
    return X, Y, W1, W2


def _whitened_minimum(rng, P, n_in, n_hid, n_out, sigma_x2, sigma_y2, balanced=False):
    """Exactly whitened inputs, random labels, (W1, W2) at a minimum W2 W1 = w*."""
    X = tl.whiten(rng.normal(size=(P, n_in)), sigma_x2)
    Y = np.sqrt(sigma_y2) * rng.normal(size=(P, n_out))
    w = tl.regression_solution(X, Y)
    if balanced:
        W1, W2 = tl.zero_balanced_minimum(w, n_hid)
    else:
        W1, W2 = tl.minimum_from_w2(
            w, rng.normal(size=(n_out, n_hid)), rng.normal(size=(n_hid, n_in))
        )
    return X, Y, W1, W2


def _flat_gradient(X, Y, theta, shape):
    W1, W2 = tl.unpack(theta, *shape)
    return tl.pack(*tl.gradients(X, Y, W1, W2))


# ------------------------------------------------------------ conventions


def test_vec_convention_and_commutation() -> None:
    W1 = np.arange(6.0).reshape(2, 3)
    W2 = np.arange(4.0).reshape(2, 2) + 10
    theta = tl.pack(W1, W2)
    assert theta[1 + 2 * 2] == W1[1, 2]  # W1[h, i] -> h + N_h i
    assert theta[6 + 1 + 2 * 0] == W2[1, 0]  # W2[k, h] -> N_h N_i + k + N_o h
    back = tl.unpack(theta, 3, 2, 2)
    np.testing.assert_array_equal(back[0], W1)
    np.testing.assert_array_equal(back[1], W2)
    K = tl.commutation_matrix(2, 3)
    np.testing.assert_array_equal(K @ tl.vec(W1), tl.vec(W1.T))
    with pytest.raises(ValueError, match="theta"):
        tl.unpack(theta[:-1], 3, 2, 2)
    with pytest.raises(ValueError, match="W2"):
        tl.pack(W1, np.ones((2, 3)))


def test_loss_and_gradients_against_finite_differences() -> None:
    rng = np.random.default_rng(0)
    X, Y, W1, W2 = _random_problem(rng)
    theta = tl.pack(W1, W2)
    h = 1e-6
    fd = []
    for e in np.eye(theta.size):
        lp = tl.loss(X, Y, *tl.unpack(theta + h * e, 3, 2, 2))
        lm = tl.loss(X, Y, *tl.unpack(theta - h * e, 3, 2, 2))
        fd.append((lp - lm) / (2 * h))
    np.testing.assert_allclose(tl.pack(*tl.gradients(X, Y, W1, W2)), fd, atol=1e-8)
    np.testing.assert_allclose(
        tl.per_sample_gradients(X, Y, W1, W2).mean(axis=0),
        tl.pack(*tl.gradients(X, Y, W1, W2)),
        atol=1e-14,
    )


# ------------------------------------------------------ exact linearisation


def test_exact_drift_is_the_hessian_and_matches_finite_differences() -> None:
    rng = np.random.default_rng(1)
    X, Y, W1, W2 = _random_problem(rng)  # generic point, not a minimum
    G = tl.exact_drift(X, Y, W1, W2)
    H = tl.hessian_full(X, Y, W1, W2)
    assert np.max(np.abs(G - H)) < 1e-13
    assert np.max(np.abs(G - G.T)) < 1e-13
    theta = tl.pack(W1, W2)
    h = 1e-5
    fd = np.array(
        [
            (
                _flat_gradient(X, Y, theta + h * e, (3, 2, 2))
                - _flat_gradient(X, Y, theta - h * e, (3, 2, 2))
            )
            / (2 * h)
            for e in np.eye(theta.size)
        ]
    ).T
    assert np.max(np.abs(fd - G)) < 1e-8


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_exact_noise_covariance_equals_brute_force_enumeration(sampling) -> None:
    rng = np.random.default_rng(2)
    X, Y, W1, W2 = _random_problem(rng, P=6)
    S = 3
    C = tl.exact_noise_covariance(X, Y, W1, W2, S, sampling)
    g = tl.per_sample_gradients(X, Y, W1, W2)
    batches = (
        itertools.product(range(6), repeat=S)
        if sampling == "with"
        else itertools.combinations(range(6), S)
    )
    gb = np.array([g[list(b)].mean(axis=0) for b in batches])
    mean = gb.mean(axis=0)
    C_brute = (gb - mean).T @ (gb - mean) / gb.shape[0]
    assert np.max(np.abs(mean - g.mean(axis=0))) < 1e-14
    assert np.max(np.abs(C - C_brute)) < 1e-12


# ------------------------------------------------------ Eqs. 63-70 (whitened)


@pytest.mark.parametrize(("n_in", "n_hid", "n_out"), [(6, 4, 1), (6, 4, 2), (5, 7, 2)])
@pytest.mark.parametrize("balanced", [False, True])
def test_eq63_gamma_is_the_exact_hessian_and_eq64_eigenvalues(n_in, n_hid, n_out, balanced):
    rng = np.random.default_rng(3)
    sx2, sy2, S = 0.3, 0.7, 5
    X, Y, W1, W2 = _whitened_minimum(rng, 200, n_in, n_hid, n_out, sx2, sy2, balanced)
    gamma, delta = tl.drift_diffusion(W1, W2, sx2, sy2, S)
    assert np.max(np.abs(delta - sy2 / S * gamma)) < 1e-15  # Eq. 63: Gamma ∝ Delta
    # Eq. 64 (generalised to N_h > N_i): numerical eigenvalues to 1e-10
    eig = np.sort(np.linalg.eigvalsh(gamma))[::-1]
    assert np.max(np.abs(eig - tl.drift_eigenvalues(W1, W2, sx2))) < 1e-10
    assert np.linalg.matrix_rank(gamma) == n_out * n_in
    # Eq. 63 mapped to weight space is the exact Hessian at a whitened minimum
    T = tl.z_embedding(W1, W2)
    np.testing.assert_allclose(T.T @ T, np.eye(T.shape[1]), atol=1e-13)
    assert np.max(np.abs(tl.exact_drift(X, Y, W1, W2) - T @ gamma @ T.T)) < 1e-12


@pytest.mark.parametrize(("n_in", "n_hid", "n_out"), [(6, 4, 1), (6, 4, 2)])
@pytest.mark.parametrize("balanced", [False, True])
def test_eq66_spectrum_lyapunov_and_eq70(n_in, n_hid, n_out, balanced) -> None:
    rng = np.random.default_rng(4)
    sx2, sy2, S, lr = 0.3, 0.7, 5, 0.1
    _, _, W1, W2 = _whitened_minimum(rng, 200, n_in, n_hid, n_out, sx2, sy2, balanced)
    gamma, delta = tl.drift_diffusion(W1, W2, sx2, sy2, S)
    M = tl.stationary_covariance(gamma, delta, lr)
    M_lyap = tl.lyapunov_covariance(gamma, delta, lr)
    assert np.max(np.abs(M - M_lyap)) < 1e-12 * lr * sy2 / S
    assert np.max(np.abs(gamma @ M + M @ gamma.T - lr * delta)) < 1e-12
    # Eq. 68: eigenvalues 0 (N_o N_h times) and lr sigma_y^2 / (2S) (N_o N_i times)
    c = lr * sy2 / (2 * S)
    expected = np.r_[np.full(n_out * n_in, c), np.zeros(n_out * n_hid)]
    eig = np.sort(np.linalg.eigvalsh(0.5 * (M + M.T)))[::-1]
    assert np.max(np.abs(eig - expected)) < 1e-10 * c
    if n_out == 1:  # Eq. 70 against the (2, 2) block of lr Gamma^+ Delta / 2
        m22 = M[n_in:, n_in:]
        assert np.max(np.abs(m22 - np.diag(tl.m22_closed_form(W1, W2, lr, sy2, S)))) < 1e-10 * c


def test_eq67_weight_covariances_and_eq73_curvature() -> None:
    rng = np.random.default_rng(5)
    sx2, sy2, S, lr = 1 / 8, 1.0, 4, 0.05
    n_in, n_hid = 8, 5
    X, Y, W1, W2 = _whitened_minimum(rng, 300, n_in, n_hid, 1, sx2, sy2)
    gamma, delta = tl.drift_diffusion(W1, W2, sx2, sy2, S)
    M = tl.stationary_covariance(gamma, delta, lr)
    cov1, cov2, _ = tl.weight_space_covariances(M, W1, W2)
    # Eq. 67a: nonzero spectrum of cov(vec dW1) is that of M11, plus N_i (N_h - N_o) zeros
    e1 = np.sort(np.linalg.eigvalsh(cov1))[::-1]
    e11 = np.sort(np.linalg.eigvalsh(M[:n_in, :n_in]))[::-1]
    np.testing.assert_allclose(e1[:n_in], e11, atol=1e-14)
    assert np.max(np.abs(e1[n_in:])) < 1e-14
    # Eq. 67b: eigenpairs of cov(vec dW2) are (M22_ii, a_i)
    m22, vecs = np.linalg.eigh(cov2)
    order = np.argsort(m22)[::-1]
    m22, vecs = m22[order], vecs[:, order]
    f = tl.svd_factors(W1, W2)
    np.testing.assert_allclose(m22, tl.m22_closed_form(W1, W2, lr, sy2, S), atol=1e-14)
    # Eq. 73: curvature along a_i (W2 block) is sigma_x^2 D1_ii, exactly
    kappa = []
    for i in range(n_hid):
        direction = np.r_[np.zeros(n_hid * n_in), vecs[:, i]]
        kappa.append(tl.curvature_along(X, Y, W1, W2, direction))
        dl = tl.loss_perturbation(X, Y, W1, W2, direction, 0.3)
        assert abs(dl - 0.5 * kappa[-1] * 0.3**2) < 1e-14
    kappa = np.array(kappa)
    np.testing.assert_allclose(kappa, sx2 * f.d1, rtol=1e-10)
    exact = tl.ivfr_curvature(m22, f.d2[0], sx2, sy2, lr, S, approximation="eq70")
    np.testing.assert_allclose(exact, kappa, rtol=1e-8)
    # the paper's Eq. 73 (via Eq. 72) underestimates by D2 / (D1 + D2)
    approx = tl.ivfr_curvature(m22, f.d2[0], sx2, sy2, lr, S)
    np.testing.assert_allclose(approx / kappa, f.d2[0] / (f.d1 + f.d2[0]), rtol=1e-8)
    assert np.all(np.diff(kappa) <= 0) and np.all(np.diff(m22) <= 0)  # IVFR: same order


def test_exact_linearisation_approaches_eq63_at_large_p() -> None:
    """Exact noise / covariance at a whitened minimum vs Eqs. 63/66 with the (1 - N_i/P) factor."""
    rng = np.random.default_rng(6)
    sx2, sy2, S, lr = 0.25, 1.0, 5, 0.1
    errs = {}
    for P in (400, 6400):
        X, Y, W1, W2 = _whitened_minimum(rng, P, 4, 3, 1, sx2, sy2)
        T = tl.z_embedding(W1, W2)
        C = tl.exact_noise_covariance(X, Y, W1, W2, S)
        gamma, delta = tl.drift_diffusion(W1, W2, sx2, np.mean(Y**2), S, n_samples=P)
        M_exact = tl.exact_stationary_covariance(X, Y, W1, W2, lr, S)
        M_eq66 = T @ tl.stationary_covariance(gamma, delta, lr) @ T.T
        errs[P] = (
            np.linalg.norm(C - T @ delta @ T.T) / np.linalg.norm(C),
            np.linalg.norm(M_exact - M_eq66) / np.linalg.norm(M_exact),
        )
    assert errs[6400][0] < 0.1 and errs[6400][1] < 0.1
    assert errs[6400][0] < errs[400][0] and errs[6400][1] < errs[400][1]


def test_pinv_and_lyapunov_differ_without_detailed_balance() -> None:
    """Non-white inputs: Gamma^+ Delta / 2 is not a Lyapunov solution; the general one is."""
    rng = np.random.default_rng(7)
    P, n_in, n_hid, S, lr = 300, 5, 3, 5, 0.1
    L = np.tril(rng.normal(size=(n_in, n_in))) + 2 * np.eye(n_in)
    X = rng.normal(size=(P, n_in)) @ L.T / np.sqrt(n_in)
    Y = X @ rng.normal(size=(n_in, 1)) + 0.5 * rng.normal(size=(P, 1))
    W1, W2 = tl.minimum_from_w2(
        tl.regression_solution(X, Y), rng.normal(size=(1, n_hid)), rng.normal(size=(n_hid, n_in))
    )
    G = tl.exact_drift(X, Y, W1, W2)
    C = tl.exact_noise_covariance(X, Y, W1, W2, S)
    M_l = tl.lyapunov_covariance(G, C, lr)
    M_p = tl.stationary_covariance(G, C, lr)
    scale = np.linalg.norm(lr * C)
    assert np.linalg.norm(G @ M_l + M_l @ G.T - lr * C) < 1e-10 * scale
    assert np.linalg.norm(G @ M_p + M_p @ G.T - lr * C) > 0.05 * scale
    assert np.linalg.norm(M_p - M_p.T) > 0.05 * np.linalg.norm(M_p)  # not a covariance
    assert np.linalg.norm(M_l - M_p) > 0.05 * np.linalg.norm(M_l)


def test_argument_errors_name_the_argument() -> None:
    W1, W2 = np.ones((3, 4)), np.ones((2, 3))
    with pytest.raises(ValueError, match="sigma_x2"):
        tl.drift_diffusion(W1, W2, -1.0, 1.0, 2)
    with pytest.raises(ValueError, match="batch_size"):
        tl.drift_diffusion(W1, W2, 1.0, 1.0, 0)
    with pytest.raises(ValueError, match="N_o = 1"):
        tl.m22_closed_form(W1, W2, 0.1, 1.0, 2)
    with pytest.raises(ValueError, match="W1"):
        tl.loss(np.ones((5, 3)), np.ones((5, 2)), W1, W2)
    with pytest.raises(ValueError, match="N_o <= N_h"):
        tl.svd_factors(np.ones((1, 4)), np.ones((2, 1)))
    with pytest.raises(ValueError, match="lr"):
        tl.stationary_covariance(np.eye(2), np.eye(2), 0.0)


# --------------------------------------------------------------------- errata


def test_erratum_eq56_57_factor_is_one_minus_ni_over_p() -> None:
    """Eq. 56 drops N_i: E[Sigma_yx Sigma_yx^T] = (N_i/P) sigma_x^2 sigma_y^2, so the Eq. 57
    factor is (1 - N_i/P), not (1 - 1/P). Data-averaged exact noise at the minimum."""
    rng = np.random.default_rng(8)
    P, n_in, n_hid, S, sx2, sy2 = 200, 20, 4, 5, 1 / 20, 1.0
    n1 = n_hid * n_in
    eq56, r1, r2 = [], [], []
    for _ in range(200):
        X, Y, W1, W2 = _whitened_minimum(rng, P, n_in, n_hid, 1, sx2, sy2, balanced=True)
        syx = Y.T @ X / P
        eq56.append(P * (syx @ syx.T).item() / (sx2 * sy2))
        C = tl.exact_noise_covariance(X, Y, W1, W2, S)
        r1.append(np.trace(C[:n1, :n1]) / (sx2 * sy2 * n_in * np.trace(W2.T @ W2) / S))
        r2.append(np.trace(C[n1:, n1:]) / (sx2 * sy2 * np.trace(W1 @ W1.T) / S))
    for values, target, paper in (
        (eq56, n_in, 1.0),  # Eq. 56: P Syx Syx^T / (sx2 sy2) = N_i, paper 1
        (r1, 1 - (n_in + 2) / (P + 2), 1 - 1 / P),  # Eq. 57a/92 coefficient
        (r2, 1 - (n_in + 2) / (P + 2), 1 - 1 / P),  # Eq. 57b/93 coefficient
    ):
        mean = np.mean(values)
        se = np.std(values, ddof=1) / np.sqrt(len(values))
        assert abs(mean - target) < 4 * se
        assert abs(mean - paper) > 10 * se


def test_erratum_eq50_sigma_x4_and_index_order() -> None:
    """Eq. 50: cov(dSxx) = sigma_x^4 (d_ik d_jl + d_il d_jk)/S; cov(dSyx) last factor Syx[k, j]."""
    rng = np.random.default_rng(9)
    P, n, sx2, S = 100_000, 3, 0.25, 2
    X = np.sqrt(sx2) * rng.normal(size=(P, n))
    u = np.array([[0.0, 1.5, 0.0], [0.0, 0.0, -0.8], [0.6, 0.0, 0.0]])  # u u^T diagonal
    Y = X @ u.T + 0.3 * rng.normal(size=(P, n))
    cxx, cyx, cxy = tl.minibatch_moment_covariances(X, Y, S)
    sxx, syx = X.T @ X / P, Y.T @ X / P
    wxx, wyx, wxy = tl.wick_moment_covariances(sxx, syx, Y.T @ Y / P, S)
    d = np.eye(n)
    y2 = np.mean(Y**2, axis=0)
    corrected_xx = sx2**2 * (np.einsum("ik,jl->ijkl", d, d) + np.einsum("il,jk->ijkl", d, d)) / S
    paper_xx = (sx2**2 * np.einsum("ik,jl->ijkl", d, d) + np.einsum("il,jk->ijkl", d, d)) / S
    diag_part = np.einsum("i,ik,jl->ijkl", y2, d, d) * sx2
    corrected_yx = (diag_part + np.einsum("il,kj->ijkl", syx, syx)) / S
    paper_yx = (diag_part + np.einsum("il,jk->ijkl", syx, syx)) / S
    scale = np.max(np.abs(cyx))
    assert np.max(np.abs(cxx - wxx)) < 0.01 * np.max(np.abs(cxx))  # Eq. 48a (Wick)
    assert np.max(np.abs(cyx - wyx)) < 0.01 * scale  # Eq. 48b
    assert np.max(np.abs(cxy - wxy)) < 0.01 * scale  # Eq. 48c
    assert np.max(np.abs(cxx - corrected_xx)) < 0.03 * np.max(np.abs(cxx))
    assert np.max(np.abs(cxx - paper_xx)) > 5 * np.max(np.abs(cxx))  # 1/S vs sigma_x^4/S
    assert np.max(np.abs(cyx - corrected_yx)) < 0.03 * scale
    assert np.max(np.abs(cyx - paper_yx)) > 0.3 * scale


def test_erratum_reduced_loss_cross_term_factor_two() -> None:
    """Text after Eq. 58 and Sec. III.3.3: the cross term of the reduced loss needs a 2."""
    rng = np.random.default_rng(10)
    sx2 = 0.2
    X, Y, W1, W2 = _whitened_minimum(rng, 100, 5, 3, 1, sx2, 1.0)
    f = tl.svd_factors(W1, W2)
    z1 = rng.normal(size=(1, 5))
    z2 = rng.normal(size=(1, 3))
    dW1, dW2 = f.V @ z1, z2 @ f.A.T
    theta = tl.pack(dW1, dW2)
    quad = 0.5 * theta @ tl.exact_drift(X, Y, W1, W2) @ theta
    eps = 1e-4
    direct = tl.loss(X, Y, W1 + eps * dW1, W2 + eps * dW2) - tl.loss(X, Y, W1, W2)
    assert abs(direct / eps**2 - quad) < 1e-3 * quad
    assert abs(tl.reduced_loss(dW1, dW2, W1, W2, sx2) - quad) < 1e-12 * quad
    a, b, c = (
        np.trace(W2.T @ W2 @ dW1 @ dW1.T),
        np.trace(dW2.T @ W2 @ dW1 @ W1.T),
        np.trace(dW2.T @ dW2 @ W1 @ W1.T),
    )
    assert abs(0.5 * sx2 * (a + 2 * b + c) - quad) < 1e-12 * quad
    assert abs(0.5 * sx2 * (a + b + c) - quad) > 1e-2 * quad  # paper's form
    US2, BS1t = f.U @ f.S2, f.B @ f.S1.T
    zform = [
        np.trace(f.d2[0] * z1 @ z1.T),
        np.trace(z2.T @ z2 @ np.diag(f.d1)),
        np.trace(z2.T @ US2 @ z1 @ BS1t),
    ]
    assert abs(0.5 * sx2 * (zform[0] + zform[1] + 2 * zform[2]) - quad) < 1e-12 * quad
    assert abs(0.5 * sx2 * sum(zform) - quad) > 1e-2 * quad


def test_erratum_eq75_sign_of_the_drift() -> None:
    """Eq. 75: chi_k relaxes as exp(-sigma_x^2 omega_k t) (full-batch GD, t = lr tau)."""
    rng = np.random.default_rng(11)
    sx2, lr, steps = 0.5, 1e-2, 200
    X, Y, W1, W2 = _whitened_minimum(rng, 100, 4, 3, 1, sx2, 1.0)
    gamma, _ = tl.drift_diffusion(W1, W2, sx2, 1.0, 1)
    omega, R = np.linalg.eigh(gamma / sx2)
    assert omega.min() > -1e-12  # Gamma PSD: -Gamma has no growing mode
    k = int(np.argmax(omega))
    T = tl.z_embedding(W1, W2)
    theta0 = tl.pack(W1, W2)
    delta0 = 1e-7 * T @ R[:, k]
    theta = theta0 + delta0
    for _ in range(steps):
        theta = theta - lr * _flat_gradient(X, Y, theta, (4, 3, 1))
    ratio = float((theta - theta0) @ delta0 / (delta0 @ delta0))
    assert abs(ratio - (1 - lr * sx2 * omega[k]) ** steps) < 1e-6
    assert abs(ratio - np.exp(-sx2 * omega[k] * lr * steps)) < 0.01
    assert ratio < 1 < np.exp(+sx2 * omega[k] * lr * steps)  # paper's sign would grow
