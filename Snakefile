# weightdyn: theory vs simulation sweeps of (S)GD weight dynamics (see README.md).
#
# Every experiment is one entry of the registry (weightdyn.experiments); the config names sweeps
# of those experiments (config/config.yaml). Rules: data -> cell -> merge / summary -> figure,
# agreement table and report (workflow/rules/).
import os
import shlex
import sys

from snakemake.utils import min_version

min_version("9.0")


# The default sweep applies only when no --configfile is given: Snakemake would otherwise merge
# the two, so that sweeps of the default leak into another config.
if not config:

    configfile: "config/config.yaml"


# With --sdm conda only rule agreement_table (a script: with conda:) runs in a conda environment,
# which installs the package from this checkout (workflow/envs/weightdyn.yaml). The run: rules
# (data, cell, light_cell, merge, summary, figure) cannot have one: they run in a Snakemake
# process (this one, or a cluster job's) or in processes forked from it, so the environment
# Snakemake runs in needs the package.
os.environ.setdefault("WEIGHTDYN_ROOT", workflow.basedir)
# how this run was started: the CF `history` attribute of every file the rules write, and the
# rebuild command a merge prints when it finds damaged cells
os.environ.setdefault("WEIGHTDYN_COMMAND", shlex.join(["snakemake", *sys.argv[1:]]))


include: "workflow/rules/common.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/figures.smk"


onstart:
    drop_job_rate_limiter(workflow)
    stop_on_interrupt(workflow)


onerror:
    report_interruption()


rule all:
    default_target: True
    input:
        targets(),
