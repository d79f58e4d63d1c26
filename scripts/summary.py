"""Rule summary: an experiment's fits over the cells of one sweep (Experiment.summarize)."""

from weightdyn import experiments, integrity, io
from weightdyn.joblog import job_logger

log = job_logger("summary", snakemake.log[0])
experiments.register_modules(snakemake.config.get("experiment_modules", []))
exp = experiments.get(snakemake.params.experiment)
integrity.require_cells_intact(
    snakemake.input, snakemake.params.cells, exp.name, f"summary {snakemake.output[0]}"
)
datasets = io.load_all(snakemake.input)
summary = exp.summarize(datasets, snakemake.params.cells, snakemake.params.settings)
sweep = snakemake.wildcards.sweep
cf = io.provenance(
    {"experiment": exp.name, "sweep": sweep},
    title=f"weightdyn sweep {sweep} summary: {exp.title}",
    source=exp.source,
    history=io.history_line(snakemake.rule),
)
summary.attrs.update(cf)  # a summary may carry a cell's attributes: ours win
io.write_atomic(summary, snakemake.output[0])
log.info("summarised %d cells of sweep %s", len(datasets), snakemake.wildcards.sweep)
