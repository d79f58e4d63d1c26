"""Tests for the counter-based kernel stream (weightdyn.counter_rng)."""

from __future__ import annotations

import numpy as np
import pytest

from weightdyn import counter_rng as crng

GAMMA = 0x9E3779B97F4A7C15


def test_splitmix64_reproduces_the_reference_generator():
    """Draw k of key 0 is output k+1 of Vigna's splitmix64.c seeded with 0."""
    reference = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    outputs = [int(crng.splitmix64(np.uint64((k * GAMMA) % 2**64))) for k in (1, 2, 3)]
    assert outputs == reference
    assert crng.uniform(np.uint64(0), np.uint64(0)) == (reference[0] >> 11) * 2.0**-53


def test_uniform_moments_and_independence_within_standard_errors():
    n, R = 200_000, 4
    keys = crng.replica_keys(np.random.default_rng(1), R)
    u = crng.uniforms(keys, 0, n, 1)[:, :, 0]  # (n, R)
    assert np.all((u >= 0.0) & (u < 1.0))
    se_mean = np.sqrt(1 / 12 / n)
    assert np.all(np.abs(u.mean(axis=0) - 0.5) < 5 * se_mean)
    # Var(u) = 1/12; SE of the sample variance sqrt((mu4 - sigma^4) / n), mu4 = 1/80
    se_var = np.sqrt((1 / 80 - 1 / 144) / n)
    assert np.all(np.abs(u.var(axis=0) - 1 / 12) < 5 * se_var)
    c = u - 0.5
    se_corr = 1 / np.sqrt(n)
    lag1 = (c[1:] * c[:-1]).mean(axis=0) * 12
    across = (c[:, 0] * c[:, 1]).mean() * 12
    assert np.all(np.abs(lag1) < 5 * se_corr) and abs(across) < 5 * se_corr
    # 100 equal bins: chi-square with 99 dof (mean 99, sd 14)
    counts = np.bincount((u[:, 0] * 100).astype(int), minlength=100)
    chi2 = np.sum((counts - n / 100) ** 2 / (n / 100))
    assert chi2 < 99 + 5 * 14


def test_normals_have_unit_gaussian_moments():
    n = 100_000
    keys = crng.replica_keys(np.random.default_rng(2), 2)
    z = crng.normals(keys, 0, n, 3).reshape(-1)
    m = z.size
    assert abs(z.mean()) < 5 / np.sqrt(m)
    assert abs(z.var() - 1.0) < 5 * np.sqrt(2 / m)
    assert abs(np.mean(z**4) - 3.0) < 5 * np.sqrt(96 / m)  # Var(z^4) = 105 - 9
    assert abs(np.mean(z**3)) < 5 * np.sqrt(15 / m)


def test_ziggurat_normals_follow_the_gaussian_cdf_in_body_wedges_and_tail():
    """Kolmogorov-Smirnov on 2e6 normals (sqrt(n) D < 1.95 is the 0.1 % level), and the
    frequencies of the slow paths, the wedges and the tail beyond r, within 5 s.e. of their
    Gaussian values; a lag-1 correlation of zero within 5 s.e."""
    from scipy import stats

    keys = crng.replica_keys(np.random.default_rng(6), 4)
    z = crng.normals(keys, 0, 500_000, 1).reshape(-1)
    n = z.size
    assert np.sqrt(n) * stats.kstest(z, "norm").statistic < 1.95
    r = crng._ZIG_R
    for p in (2 * stats.norm.sf(r), 2 * stats.norm.sf(4.0), 2 * stats.norm.sf(2.5)):
        threshold = stats.norm.isf(p / 2)
        observed = np.mean(np.abs(z) > threshold)
        assert abs(observed - p) < 5 * np.sqrt(p * (1 - p) / n)
    lag1 = np.mean(z[1:] * z[:-1])
    assert abs(lag1) < 5 / np.sqrt(n)


def test_ziggurat_tables_have_equal_layer_areas():
    """Every layer of the ziggurat has the area v of the base strip (ZIGNOR's construction; r
    and v are given to 13 digits, and the recursion leaves the top layer 1.2e-9 off)."""
    x = crng._ZIG_X
    f = np.exp(-0.5 * x**2)
    areas = x[1:128] * (f[2:129] - f[1:128])
    np.testing.assert_allclose(areas, x[0] * f[1], rtol=1e-8)


def test_draws_depend_only_on_key_and_counter():
    keys = crng.replica_keys(np.random.default_rng(3), 3)
    whole = crng.uniforms(keys, 0, 50, 4)
    parts = np.concatenate([crng.uniforms(keys, s, m, 4) for s, m in [(0, 7), (7, 30), (37, 13)]])
    np.testing.assert_array_equal(whole, parts)
    other = crng.replica_keys(np.random.default_rng(4), 3)
    assert len(set(keys.tolist()) | set(other.tolist())) == 6
    assert not np.array_equal(whole, crng.uniforms(other, 0, 50, 4))


@pytest.mark.parametrize("k", [1, 4, 5])
def test_normals_of_a_step_block_are_the_kernel_layout(k):
    """normals() lays out step t's draws at t k + j."""
    keys = crng.replica_keys(np.random.default_rng(5), 1)
    z = crng.normals(keys, 2, 1, k)[0, 0]
    expected = [crng.normal(keys[0], np.uint64(2 * k + j)) for j in range(k)]
    np.testing.assert_array_equal(z, expected)
