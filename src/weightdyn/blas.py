"""BLAS threads around compiled kernels that call BLAS from their own (numba) threads."""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import scipy.linalg.cython_blas  # noqa: F401  (the BLAS numba's np.dot calls; loaded before limiting)
from numba import njit, types
from numba.extending import get_cython_function_address
from threadpoolctl import threadpool_limits

# scipy's Fortran DSYRK (C := alpha A A^T + beta C on one triangle; every argument a pointer),
# called by symbol name: the symbol is bound to this process's address when the module is
# imported, so compiled kernels that call it stay cacheable (a ctypes pointer would not).
llvm.add_symbol("weightdyn_dsyrk", get_cython_function_address("scipy.linalg.cython_blas", "dsyrk"))
_dsyrk = types.ExternalFunction("weightdyn_dsyrk", types.void(*[types.voidptr] * 10))
_UPPER, _NO_TRANSPOSE = ord("U"), ord("N")


def one_blas_thread() -> threadpool_limits:
    """A context in which every loaded BLAS runs one thread.

    :func:`weightdyn.single_layer.simulate.sgd_kernel` splits its replicas over numba's threads
    and each thread calls BLAS (``np.dot``, scipy's OpenBLAS) on small matrices. With that BLAS's
    own default of one thread per core, two kernel threads ran at 0.4 of one (measured: N = 190,
    S = 10, R = 64, 1.2e6 replica-steps/s on two threads against 1.6e6 on one; 3.2e6 with one
    BLAS thread). scipy's BLAS is a different library from numpy's and is loaded only when
    scipy.linalg is imported, which this module does first, so that the limit reaches it.
    """
    return threadpool_limits(limits=1, user_api="blas")


@njit(cache=True, boundscheck=False)
def add_gram_lower(C: np.ndarray, G: np.ndarray, k: int) -> None:
    """``C += G[:k]^T G[:k]`` on the lower triangle of the C-ordered (N, N) ``C`` (one DSYRK).

    ``G`` is C-ordered (rows >= k, N), i.e. the Fortran (N, rows) matrix whose columns are the
    records; DSYRK on Fortran's upper triangle is the C-ordered lower one. Half the flops of the
    full product and no temporary: with groups of 32 records, 1.7x (N = 100) to 2.0x (N = 190)
    faster than ``C += np.dot(G.T, G)`` here. The strict upper triangle of ``C`` is not touched;
    :func:`fill_upper` completes it once the sums are final.
    """
    chars = np.array([_UPPER, _NO_TRANSPOSE], np.uint8)
    ints = np.array([C.shape[0], k, G.shape[1], C.shape[0]], np.int32)
    one = np.ones(2)
    _dsyrk(
        chars[0:1].ctypes, chars[1:2].ctypes, ints[0:1].ctypes, ints[1:2].ctypes, one[0:1].ctypes,
        G.ctypes, ints[2:3].ctypes, one[1:2].ctypes, C.ctypes, ints[3:4].ctypes,
    )  # fmt: skip


def fill_upper(M: np.ndarray) -> np.ndarray:
    """Copy the lower triangle of each trailing (N, N) matrix of ``M`` onto its upper one, in
    place (the sums :func:`add_gram_lower` leaves); returns ``M``."""
    upper = np.triu_indices(M.shape[-1], 1)
    M[(..., *upper)] = M.swapaxes(-1, -2)[(..., *upper)]
    return M
