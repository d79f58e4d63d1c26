"""Throughput of the JAX SGD kernel against the numba kernel, NumPy and a plain loop (one thread).

Usage: python benchmarks/jax_engine_throughput.py [--R 16] [--chunks 8] [--skip-big]

One thread everywhere: ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1`` (XLA's CPU client), ``NUMBA_NUM_THREADS=1`` and one BLAS thread
(``OMP/OPENBLAS/MKL_NUM_THREADS=1``) are set below before jax, numba or numpy are imported.

Cells (paper 000 Eqs. 10-11 per step, R replicas, sampling with replacement, lr = 0.01):

* ``one_hidden tanh (n=61)``: the issue-14 cell of ``benchmarks/models_throughput.py``
  (``OneHidden(10, 5, 1, "tanh")``, P = 600, S = 10);
* ``deep linear L=3``: ``DeepLinear([8, 6, 6, 4])`` (n = 108), P = 600, S = 10;
* ``mlp 64-16-16-10`` and ``mlp 64-50-50-10`` (tanh hidden layers, biases; n = 1482 and 6310),
  random data, P = 1000, S = 32: JaxKernel only (no hand-written model).

Columns, replica-steps per second: ``records``, engine runs (:func:`weightdyn.sgd.run`) with a
record every 10 steps (the float64 sums of ``dw`` and ``dw dw^T``; JaxKernel with
``lower_triangle=True``, one DSYRK per group of 32 records); ``steps``, burn-in calls (no record);
``first_s``: the compile time, the first recording and burn-in calls of a chunk less the
second ones (JaxKernel: jit tracing and XLA compilation; numba: loading its on-disk cache). The
``loop`` engine is ``reference_chain`` (one chain, ``Model.per_sample_gradients`` per step).
Steady rates are the best of ``REPEAT`` runs of ``--chunks`` chunks (3200 steps; MLPs 320).
Memory: the 64-50-50-10 cell's float64 second-moment sums are R n^2 8 B = 5.1 GB (R = 16),
about 8.3 GB peak with the engine's completion of the upper triangle; ``--skip-big`` omits it.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import itertools  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402

from weightdyn.models import DeepLinear, Model, OneHidden  # noqa: E402
from weightdyn.models.jax_engine import JaxKernel, jax_gradient_from_apply  # noqa: E402
from weightdyn.models.simulate import (  # noqa: E402
    ModelKernel,
    NumpyKernel,
    kernel_spec,
    reference_chain,
)
from weightdyn.sgd import Plan, Record, Settings, State, VectorKernel, run  # noqa: E402

THIN, LR = 10, 0.01
#: each steady rate is the best of REPEAT measurements
REPEAT = 3
Apply = Callable[[jax.Array, jax.Array], jax.Array]


def mlp_apply(widths: list[int]) -> tuple[Apply, int]:
    """``apply(theta, X)`` of a tanh MLP with biases (blocks ``[W_l^T; b_l]``, C order) and n."""
    shapes = [(a + 1, b) for a, b in itertools.pairwise(widths)]
    offsets = np.cumsum([0] + [a * b for a, b in shapes]).tolist()

    def apply(theta: jax.Array, X: jax.Array) -> jax.Array:
        h = X
        for layer, (rows, cols) in enumerate(shapes):
            A = theta[offsets[layer] : offsets[layer + 1]].reshape(rows, cols)
            h = h @ A[:-1] + A[-1]
            h = jnp.tanh(h) if layer < len(shapes) - 1 else h
        return h

    return apply, int(offsets[-1])


def one_hidden_apply(model: OneHidden) -> Apply:
    """:class:`OneHidden` (tanh, biases) with its flat layout (column-major vec blocks)."""
    Ni, Nh, No, n1 = model.n_in, model.n_hidden, model.n_out, model.n1

    def apply(theta: jax.Array, X: jax.Array) -> jax.Array:
        A = theta[:n1].reshape(Ni + 1, Nh)
        B = theta[n1:].reshape(Nh + 1, No)
        return jnp.tanh(X @ A[:Ni] + A[Ni]) @ B[:Nh] + B[Nh]

    return apply


def deep_linear_apply(model: DeepLinear) -> Apply:
    """:class:`DeepLinear` with its flat layout (column-major vec blocks)."""
    blocks = [(model.offsets[i], model.offsets[i + 1], s) for i, s in enumerate(model.shapes)]

    def apply(theta: jax.Array, X: jax.Array) -> jax.Array:
        for lo, hi, (rows, cols) in blocks:
            X = X @ theta[lo:hi].reshape(cols, rows)
        return X

    return apply


def engine_rate(kernel: VectorKernel, W0: np.ndarray, chunk: int, n_chunks: int) -> float:
    """Replica-steps/s of an engine run of ``n_chunks`` chunks, a record every ``THIN``."""
    state = State.start(W0.copy(), np.random.default_rng(1), kernel.X.shape[0])
    plan = Plan.build(0, chunk * n_chunks, THIN, 1, chunk)
    moments = run(kernel, state, Settings(plan, 1e12, "BENCH"))
    return W0.shape[0] * moments.steps_done / moments.elapsed_s


def _records(R: int, n: int, thin: int, block: int | None) -> Record:
    """A kernel call's record: block 0 every ``thin`` steps, or burn-in (``block`` None)."""
    sums = {"dw": np.zeros((R, 1, n)), "dwdw": np.zeros((R, 1, n, n))}  # pages touched if used
    return Record(thin, block, sums, np.zeros((R, 1), np.int64), np.empty((0, R, n)), 1e12)


def steps_rate(kernel: VectorKernel, W0: np.ndarray, chunk: int, n_chunks: int) -> float:
    """Replica-steps/s of ``n_chunks`` burn-in calls of ``chunk`` steps (no record)."""
    state = State.start(W0.copy(), np.random.default_rng(1), kernel.X.shape[0])
    record = _records(*W0.shape, chunk + 1, None)
    start = time.perf_counter()
    for c in range(n_chunks):
        kernel.advance(state, c * chunk, chunk, record)
    return W0.shape[0] * chunk * n_chunks / (time.perf_counter() - start)


def compile_seconds(kernel: VectorKernel, W0: np.ndarray, chunk: int) -> float:
    """The first recording call and burn-in call of ``chunk`` steps less the second ones (the
    same sums arrays): JaxKernel's tracing and XLA compilation, numba's cache loading."""
    state = State.start(W0.copy(), np.random.default_rng(1), kernel.X.shape[0])
    calls = [_records(*W0.shape, THIN, 0), _records(*W0.shape, chunk + 1, None)]
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        for record in calls:
            kernel.advance(state, 0, chunk, record)
        seconds.append(time.perf_counter() - start)
    return max(seconds[0] - seconds[1], 0.0)


def timed(kernel: VectorKernel, W0: np.ndarray, chunk: int, n_chunks: int) -> dict[str, float]:
    """``first_s`` (:func:`compile_seconds`), steady ``records`` and ``steps`` rates."""
    first = compile_seconds(kernel, W0, chunk)
    rec = max(engine_rate(kernel, W0, chunk, n_chunks) for _ in range(REPEAT))
    steps = max(steps_rate(kernel, W0, chunk, n_chunks) for _ in range(REPEAT))
    return {"first_s": first, "records": rec, "steps": steps}


def loop_rate(model: Model, X: np.ndarray, Y: np.ndarray, theta: np.ndarray, steps: int) -> float:
    idx = np.random.default_rng(2).integers(0, X.shape[0], size=(steps, 10))
    start = time.perf_counter()
    reference_chain(model, X, Y, theta, LR, idx)
    return steps / (time.perf_counter() - start)


def model_cell(model: Model, apply: Apply, R: int, n_chunks: int) -> dict[str, dict]:
    """The four engines on a hand-written model's cell (P = 600, S = 10)."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((600, model.n_in)), rng.standard_normal((600, model.n_out))
    theta = model.random_theta(rng)
    W0 = np.tile(theta, (R, 1))
    grad_fn = jax_gradient_from_apply(apply)
    jax_kernel = JaxKernel(grad_fn, X, Y, theta, LR, 10, "with", True)
    numba_kernel = ModelKernel(X, Y, kernel_spec(model), theta, LR, 10, True)
    out = {
        "jax": timed(jax_kernel, W0, 3200, n_chunks),
        "numba": timed(numba_kernel, W0, 3200, n_chunks),
    }
    numpy_kernel = NumpyKernel(model, X, Y, theta, LR, 10, "with")
    out["numpy"] = {"records": max(engine_rate(numpy_kernel, W0, 320, 3) for _ in range(REPEAT))}
    out["numpy"]["steps"] = max(steps_rate(numpy_kernel, W0, 320, 3) for _ in range(REPEAT))
    out["loop"] = {"steps": loop_rate(model, X, Y, theta, 2000)}
    return out


def mlp_cell(widths: list[int], R: int, n_chunks: int) -> tuple[int, dict[str, dict]]:
    """JaxKernel on a tanh MLP, random data, P = 1000, S = 32."""
    apply, n = mlp_apply(widths)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((1000, widths[0])), rng.standard_normal((1000, widths[-1]))
    theta = 0.3 * rng.standard_normal(n)
    kernel = JaxKernel(jax_gradient_from_apply(apply), X, Y, theta, LR, 32, "with", True)
    return n, {"jax": timed(kernel, np.tile(theta, (R, 1)), 320, n_chunks)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--R", type=int, default=16)
    ap.add_argument("--chunks", type=int, default=8, help="steady-state chunks per measurement")
    ap.add_argument("--skip-big", action="store_true", help="leave out mlp 64-50-50-10")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, jax {jax.__version__} {jax.devices()}, "
          f"numba {numba.__version__}, numpy {np.__version__}")  # fmt: skip
    print(f"cpu: {platform.processor() or platform.machine()}, os.cpu_count()={os.cpu_count()}; "
          f"one thread; R = {args.R}; replica-steps per second")  # fmt: skip
    cells = {}
    for name, model, make in [
        ("one_hidden tanh", OneHidden(10, 5, 1, "tanh"), one_hidden_apply),
        ("deep linear L=3", DeepLinear([8, 6, 6, 4]), deep_linear_apply),
    ]:
        cells[name] = (model.n_params, model_cell(model, make(model), args.R, args.chunks))
    for widths in [[64, 16, 16, 10]] + ([] if args.skip_big else [[64, 50, 50, 10]]):
        cells["mlp " + "-".join(map(str, widths))] = mlp_cell(widths, args.R, args.chunks)
    print(f"{'cell':18s} {'n':>5s} {'engine':>6s} {'first_s':>8s} {'records':>10s} "
          f"{'steps':>10s}")  # fmt: skip
    for name, (n, engines) in cells.items():
        for engine, row in engines.items():
            first = f"{row['first_s']:8.2f}" if "first_s" in row else f"{'':8s}"
            rec = f"{row['records']:10.3g}" if "records" in row else f"{'':10s}"
            print(f"{name:18s} {n:5d} {engine:>6s} {first} {rec} {row['steps']:10.3g}")


if __name__ == "__main__":
    main()
