"""Rule merge: the cells of one sweep along one `cell` dimension (weightdyn.io.stack_cells)."""

import xarray as xr

from weightdyn import experiments, io
from weightdyn.joblog import job_logger

log = job_logger("merge", snakemake.log[0])
for module in snakemake.config.get("experiment_modules", []):
    experiments.register_module(module)
exp = experiments.get(snakemake.params.experiment)
datasets = []
for path in snakemake.input:
    with xr.open_dataset(path) as ds:
        datasets.append(ds.load())
cells = snakemake.params.cells
axes = [p for p in exp.axes if any(c.get(p.name) is not None for c in cells)]
coords = {p.name: ([c.get(p.name) for c in cells], p.attrs()) for p in axes}
coords["cell_id"] = (snakemake.params.ids, {"long_name": "cell identifier", "units": "1"})
merged = io.stack_cells(
    datasets,
    coords,
    io.sweep_attrs(exp, snakemake.wildcards.sweep, snakemake.params.settings, axes),
)
io.write_atomic(merged, snakemake.output[0])
log.info("merged %d cells of sweep %s", len(datasets), snakemake.wildcards.sweep)
