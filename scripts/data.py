"""Rule data: one shared data set of an experiment (e.g. the teacher-student set, Eq. 1)."""

from weightdyn import experiments, io
from weightdyn.joblog import job_logger

log = job_logger("data", snakemake.log[0])
experiments.register_modules(snakemake.config.get("experiment_modules", []))
exp = experiments.get(snakemake.params.experiment)
spec = exp.data
params = snakemake.params.params
ds = spec.make(params)
cf = io.provenance(
    params,
    title=f"weightdyn data set {spec.name} {snakemake.wildcards.data}",
    source=f"data set of {exp.name}: {exp.source}",
    history=io.history_line(snakemake.rule),
)
ds.attrs.update(cf)
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s (%s)", snakemake.output[0], params)
