# Snakemake report (`snakemake --report report.html`): figures with captions (figure_report in
# common.smk), grouped by experiment and sweep, and the agreement table of every sweep.


report: "../report/workflow.rst"


rule agreement_table:
    input:
        [sweep_source(name) for name in sorted(SWEEPS)],
    output:
        html=report(
            "results/agreement.html",
            caption="../report/agreement.rst",
            category="Summary",
            labels={"table": "theory vs simulation per sweep"},
        ),
        csv="results/agreement.csv",
    log:
        "logs/agreement_table.log",
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    params:
        # sorted: a reordered config is no params change
        sweeps={name: (SWEEPS[name].experiment, SWEEPS[name].label) for name in sorted(SWEEPS)},
    script:
        "../../scripts/agreement_table.py"
