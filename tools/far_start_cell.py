"""One single-layer cell started far from w*, against the exact discrete-time theory.

    .venv/bin/python tools/far_start_cell.py [key=value ...]

Runs the cell a first-hour user reported (N = 30, P/N = 3, lr = 0.1, S = 10, 32 replicas,
``init: random``, ``init_scale: 10``, default settings) through the registry, with any setting or
axis overridden by ``key=value`` (e.g. ``burnin_max_steps=2924`` caps the burn-in at the old
two relaxation times), and prints its burn-in, tr M of SGD with its standard error, tr M of the
exact discrete-time theory and of Eq. 30, the z-score, the top mode's ratio and the
stationarity diagnostic (``not_stationary`` and its two t values).
"""

from __future__ import annotations

import sys

from weightdyn import experiments, sweep

CELL = {"experiment": "single_layer", "N": 30, "p_over_n": 3, "lr": 0.1, "batch_size": 10,
        "replicas": 32, "init": "random", "init_scale": 10}  # fmt: skip


def _value(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main(argv: list[str]) -> None:
    exp = experiments.get("single_layer")
    block = {**CELL, **{k: _value(v) for k, v in (a.split("=", 1) for a in argv)}}
    (cell,) = sweep.expand_sweep("far_start", block).cells
    data = exp.data.load(exp.data.make(cell.params))
    ds = exp.run_cell({**cell.params, "data": data}, lambda _: None)
    sim, se = float(ds["trace_M_sgd"]), float(ds["trace_M_sgd_se"])
    exact = float(ds["trace_M_discrete"])
    top = float(ds["eig_M_sgd"].max()) / float(ds["eig_M_discrete"].max())
    t_slow, t_loss = float(ds["stationarity_t_slowest"]), float(ds["stationarity_t_loss"])
    print(
        f"burn-in {int(ds['burnin_steps'])} steps; tr M SGD {sim:.6f} +- {se:.6f}, "
        f"exact discrete {exact:.6f}, Eq. 30 {float(ds['trace_M_eq30']):.6f}; "
        f"z {(sim - exact) / se:+.2f}; top mode / theory {top:.3f}; "
        f"not_stationary {int(ds['not_stationary'])} (t slowest {t_slow:+.2f}, loss {t_loss:+.2f})"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
