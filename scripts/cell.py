"""Rule cell: one cell of a sweep, run by its experiment's run_cell (weightdyn.experiments)."""

import sys

from local_jobs import write_cell  # scripts/, on the search path of rule scripts
from threadpoolctl import threadpool_limits

from weightdyn import experiments
from weightdyn.joblog import job_logger

log = job_logger("cell", snakemake.log[0])
experiments.register_modules(snakemake.config.get("experiment_modules", []))
name = snakemake.wildcards.experiment
experiments.get(name)  # imports the experiment's modules: numba only where a kernel needs it
if "numba" in sys.modules:
    numba = sys.modules["numba"]
    numba.set_num_threads(min(snakemake.threads, numba.config.NUMBA_NUM_THREADS))
with threadpool_limits(snakemake.threads):
    data = snakemake.input.data or None
    cell, params = snakemake.wildcards.cell, snakemake.params.params
    write_cell(name, cell, params, data, snakemake.output[0], snakemake.rule, log.info)
