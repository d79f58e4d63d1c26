"""Rule cell: one cell of a sweep, run by its experiment's run_cell (weightdyn.experiments)."""

import numba
from threadpoolctl import threadpool_limits

from weightdyn import experiments, integrity, io
from weightdyn.joblog import job_logger

log = job_logger("cell", snakemake.log[0])
experiments.register_modules(snakemake.config.get("experiment_modules", []))
name = snakemake.wildcards.experiment
exp = experiments.get(name)
params = dict(snakemake.params.params)
log.info("experiment %s, cell %s", name, snakemake.wildcards.cell)
numba.set_num_threads(min(snakemake.threads, numba.config.NUMBA_NUM_THREADS))
with threadpool_limits(snakemake.threads):
    if exp.data is not None:
        integrity.require_intact({snakemake.input.data: None}, f"cell {snakemake.output[0]}")
        params["data"] = exp.data.load(io.load(snakemake.input.data))
    ds = exp.run_cell(params, log.info)
params.pop("data", None)
cf = io.provenance(
    {"experiment": name, **params},
    title=f"weightdyn {name} cell {snakemake.wildcards.cell}: {exp.title}",
    source=exp.source,
    history=io.history_line(snakemake.rule),
)
ds.attrs.update(cf)
if snakemake.input.data:
    ds.attrs["data_file"] = str(snakemake.input.data)
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s", snakemake.output[0])
