"""Reference outputs of every stochastic driver on small fixed inputs (the engine refactor's check).

Runs single-layer SGD (paper 000 Eqs. 10-11, with and without replacement, with an observable
hook, and a diverging run), single-layer SGF (Eq. 13, additive and multiplicative noise),
two-layer SGD and SGF, and the models' SGD (deep linear, one hidden layer; kernel and numpy) with
fixed seeds, and saves every array and scalar field of each result (timings excepted) to
``<out>/<case>.npz``. Compare two such directories with ``--compare BASE NEW`` (np.array_equal
per array, NaN equal to NaN).

Usage: ``python tools/engine_reference.py OUT [CASE_PREFIX]`` or
``python tools/engine_reference.py --compare BASE NEW``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from weightdyn.models import DeepLinear, OneHidden
from weightdyn.models.simulate import run_sgd as run_models_sgd
from weightdyn.observables import LinearQuadratic
from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer.sgf import run_sgf
from weightdyn.single_layer.simulate import run_sgd
from weightdyn.two_layer.simulate import (
    gaussian_init,
    gradient_flow,
    run_sgd_two_layer,
    run_sgf_two_layer,
)

_TIMINGS = {"elapsed_s", "obs_elapsed_s", "steps_per_second"}


def _single_layer_data(N: int = 10, P: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(P, N)) / np.sqrt(N)
    y = X @ rng.normal(size=N) + 0.1 * rng.normal(size=P)
    w_ref = np.linalg.lstsq(X, y, rcond=None)[0]
    return X, y, w_ref


def _hook(X: np.ndarray) -> LinearQuadratic:
    H = X.T @ X / X.shape[0]
    V = np.linalg.eigh(H)[1][:, :1]
    return LinearQuadratic(V, H)


def _single_layer_cases() -> dict[str, Callable[[], object]]:
    X, y, w_ref = _single_layer_data()
    W0 = w_ref + 0.1 * np.random.default_rng(3).normal(size=(4, X.shape[1]))
    schedule = Schedule(burnin_steps=1000, sample_steps=3200, thin=5, n_blocks=4, chunk_steps=500)

    def sgd(sampling: str, lr: float = 0.3, hook: bool = False) -> object:
        hooked = _hook(X) if hook else None
        return run_sgd(X, y, w_ref, W0, Update(lr, 5, sampling), schedule,
                       np.random.default_rng(7), observables=hooked)  # fmt: skip

    def sgf(noise: str, hook: bool = False) -> object:
        return run_sgf(X, y, w_ref, W0, Update(0.3, 5, "with"), schedule, np.random.default_rng(8),
                       noise=noise, observables=_hook(X) if hook else None)  # fmt: skip

    return {
        "sl_sgd_with": lambda: sgd("with"),
        "sl_sgd_without": lambda: sgd("without"),
        "sl_sgd_hook": lambda: sgd("with", hook=True),
        "sl_sgd_diverged": lambda: sgd("with", lr=40.0),
        "sl_sgf_additive": lambda: sgf("additive", hook=True),
        "sl_sgf_multiplicative": lambda: sgf("multiplicative", hook=True),
    }


def _two_layer_cases() -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(21)
    N_i, N_h, N_o, P = 4, 3, 2, 12
    X = rng.normal(size=(P, N_i))
    Y = X @ rng.normal(size=(N_i, N_o)) / 2
    W1, W2 = gaussian_init(N_i, N_h, N_o, rng)
    W1_0, W2_0 = gaussian_init(N_i, N_h, N_o, rng, replicas=3)
    W1_0, W2_0 = W1 + 0.1 * W1_0, W2 + 0.1 * W2_0
    refs, inits = (W1, W2), (W1_0, W2_0)
    schedule = Schedule(burnin_steps=640, sample_steps=1280, thin=4, n_blocks=2, chunk_steps=256)

    def run(fn: Callable[..., object], seed: int) -> object:
        return fn(X, Y, refs, inits, Update(0.05, 3, "with"), schedule,
                  np.random.default_rng(seed), trace_every=64)  # fmt: skip

    def flow(**kw: object) -> object:
        return gradient_flow(X, Y, W1_0[0], W2_0[0], 30.0, n_out=21, **kw)

    return {
        "tl_sgd": lambda: run(run_sgd_two_layer, 31),
        "tl_sgf": lambda: run(run_sgf_two_layer, 32),
        "tl_sgd_W2_moments": lambda: run_sgd_two_layer(
            X, Y, refs, inits, Update(0.05, 3, "without"), schedule, np.random.default_rng(33),
            trace_every=64, second_moments="W2", observables=_TwoLayerHook(),
        ),
        "tl_sgd_diverged": lambda: run_sgd_two_layer(
            X, Y, refs, inits, Update(3.0, 3, "with"), schedule, np.random.default_rng(34),
            trace_every=64,
        ),
        "tl_gf_rk4": lambda: flow(method="rk4", dt=0.1),
        "tl_gf_adaptive": lambda: flow(method="adaptive"),
        "tl_gf_gtol": lambda: flow(method="rk4", dt=0.1, gtol=0.05),
    }  # fmt: skip


class _TwoLayerHook:
    """A small observable of the two-layer records: ``|W1|_F^2`` and ``|W2|_F^2``."""

    names = ("D1", "D2")

    def __call__(self, W1: np.ndarray, W2: np.ndarray) -> np.ndarray:
        return np.stack([np.sum(W1**2, axis=(2, 3)), np.sum(W2**2, axis=(2, 3))], axis=-1)


def _models_cases() -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(41)
    X = rng.normal(size=(15, 3))
    Y = np.tanh(X @ rng.normal(size=(3, 2)))
    deep, hidden = DeepLinear([3, 4, 3, 2]), OneHidden(3, 4, 2, "tanh")
    out = {}
    for name, model in (("deep", deep), ("one_hidden", hidden)):
        theta_ref = 0.3 * np.random.default_rng(5).normal(size=model.n_params)
        theta0 = theta_ref + 0.05 * np.random.default_rng(6).normal(size=(3, model.n_params))
        for engine in ("kernel", "numpy"):
            for sampling in ("with", "without"):
                out[f"models_{name}_{engine}_{sampling}"] = (
                    lambda m=model, t0=theta0, tr=theta_ref, e=engine, s=sampling: run_models_sgd(
                        m, X, Y, t0, theta_ref=tr, update=Update(0.05, 4, s),
                        schedule=Schedule(0, 1200, 3, 2, chunk_steps=300),
                        rng=np.random.default_rng(9), engine=e,
                    )
                )  # fmt: skip
    return out


def _fields(result: object) -> dict[str, np.ndarray]:
    """Every field of a result dataclass but its timings, as arrays (None as an empty array)."""
    out = {}
    for f in dataclasses.fields(result):
        if f.name in _TIMINGS:
            continue
        value = getattr(result, f.name)
        out[f.name] = np.asarray([] if value is None else value)
    return out


def record(out_dir: Path, prefix: str = "") -> None:
    """Run every case (whose name starts with ``prefix``) and save its fields to
    ``out_dir/<case>.npz``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = {**_single_layer_cases(), **_two_layer_cases(), **_models_cases()}
    for name, run in cases.items():
        if not name.startswith(prefix):
            continue
        np.savez(out_dir / f"{name}.npz", **_fields(run()))
        print(f"saved {name}")


def compare(base: Path, new: Path) -> bool:
    """np.array_equal (NaN == NaN) for every array of every case in ``base``; prints each."""
    ok = True
    n_arrays = 0
    for path in sorted(base.glob("*.npz")):
        a, b = np.load(path), np.load(new / path.name)
        if set(a.files) != set(b.files):
            print(f"{path.stem}: fields differ {sorted(set(a.files) ^ set(b.files))}")
            ok = False
        for key in a.files:
            if key not in b.files:
                continue
            x, z = a[key], b[key]
            nan_ok = x.dtype.kind in "fc"
            same = x.shape == z.shape and np.array_equal(x, z, equal_nan=nan_ok)
            n_arrays += 1
            if not same:
                print(f"DIFFERENT {path.stem}.{key}")
                ok = False
    print(f"{n_arrays} arrays compared: {'all equal' if ok else 'DIFFERENCES'}")
    return ok


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(0 if compare(Path(sys.argv[2]), Path(sys.argv[3])) else 1)
    record(Path(sys.argv[1]), *sys.argv[2:3])
