"""BLAS threads around compiled kernels that call BLAS from their own (numba) threads."""

from __future__ import annotations

import scipy.linalg.cython_blas  # noqa: F401  (the BLAS numba's np.dot calls; loaded before limiting)
from threadpoolctl import threadpool_limits


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
