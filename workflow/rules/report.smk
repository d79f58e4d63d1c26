# Snakemake report (`snakemake --report report.html`): figures with captions (figure_report in
# common.smk), grouped by experiment and sweep, and the agreement table of this config's sweeps.
# The table is the config's own (results/agreement/<NAME>.*, NAME from common.smk): a config run
# after another in the same folder leaves the other's table alone, and a report embeds the table
# of the config it is made with; a report whose jobs are out of date is refused
# (refuse_outdated_report in common.smk).


report: "../report/workflow.rst"


rule agreement_table:
    input:
        [sweep_source(name) for name in sorted(SWEEPS)],
    output:
        html=report(
            f"results/agreement/{NAME}.html",
            caption="../report/agreement.rst",
            category="Summary",
            labels={"table": f"theory vs simulation per sweep of config {NAME}"},
        ),
        csv=f"results/agreement/{NAME}.csv",
    log:
        f"logs/agreement/{NAME}.log",
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    params:
        # sorted: a reordered config is no params change
        sweeps={name: (SWEEPS[name].experiment, SWEEPS[name].label) for name in sorted(SWEEPS)},
    script:
        "../../scripts/agreement_table.py"
