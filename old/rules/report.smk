# Snakemake report (`snakemake --report report.html`): figure captions and categories, and the
# theory-vs-simulation agreement table. Included right after common.smk: the figure rules of
# figures.smk and two_layer.smk call figure_report() (report_common.smk) in their output sections.


include: "report_common.smk"


report: "../report/workflow.rst"


localrules:
    agreement_table,


rule agreement_table:
    input:
        **agreement_inputs(),
    output:
        html=report(
            "results/agreement.html",
            caption="../report/agreement.rst",
            category="Summary",
            labels={"table": "theory vs simulation per figure"},
        ),
        csv="results/agreement.csv",
    log:
        "logs/agreement_table.log",
    params:
        fig4_cells={fig: sweep_cells(fig) for fig in ("fig4a", "fig4b", "fig4c")},
        discrete_cells=lr_sweep_cells(),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/agreement_table.py"
