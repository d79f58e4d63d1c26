"""Rule merge: the cells of one sweep along one `cell` dimension (weightdyn.io.stack_cells)."""

from weightdyn import experiments, integrity, io
from weightdyn.joblog import job_logger

log = job_logger("merge", snakemake.log[0])
experiments.register_modules(snakemake.config.get("experiment_modules", []))
exp = experiments.get(snakemake.params.experiment)
cells = snakemake.params.cells
integrity.require_cells_intact(
    snakemake.input, snakemake.params.cells, exp.name, f"merge of {snakemake.output[0]}"
)
datasets = io.load_all(snakemake.input)
axes = [p for p in exp.axes if any(c.get(p.name) is not None for c in cells)]
coords = {p.name: ([c.get(p.name) for c in cells], p.attrs()) for p in axes}
coords["cell_id"] = (snakemake.params.ids, {"long_name": "cell identifier", "units": "1"})
merged = io.stack_cells(
    datasets,
    coords,
    io.sweep_attrs(
        exp,
        snakemake.wildcards.sweep,
        snakemake.params.settings,
        axes,
        history=io.history_line(snakemake.rule),
    ),
)
io.write_atomic(merged, snakemake.output[0])
log.info("merged %d cells of sweep %s", len(datasets), snakemake.wildcards.sweep)
