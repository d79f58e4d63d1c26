# Figures: one rule draws every view (a sweep's figures, the config's named views); plotting
# reads merged datasets and never triggers a simulation. It runs in a process forked from the warm
# server, as a cell does (scripts/local_jobs.py): a figure takes about two seconds to draw, and
# two draw at once; a fresh process would take three more to start.


localrules:
    figure,
    agreement_table,


wildcard_constraints:
    view=_alternatives(VIEWS),


rule figure:
    input:
        view_inputs,
    output:
        figure_report(
            expand("results/figures/{{view}}.{ext}", ext=FIGURE_FORMATS),
            caption="../report/figure.rst",
            category=lambda w: EXPERIMENTS[VIEWS[w.view].experiment].title,
            subcategory=lambda w: VIEWS[w.view].label,
        ),
    log:
        "logs/figures/{view}.log",
    priority: IN_PROCESS_PRIORITY
    threads: 1
    params:
        experiment=lambda w: VIEWS[w.view].experiment,
        figure=lambda w: VIEWS[w.view].figure,
        caption=lambda w: view_figure(w).caption,
        cells=view_cells,
        options=lambda w: sorted_params(VIEWS[w.view].options),
        dpi=STYLE["dpi"],
        code=figure_code,
    run:
        local_jobs.figure(
            params,
            input,
            output,
            log,
            config.get("experiment_modules", []),
            workflow.remote_exec or workflow.subprocess_exec,
        )
