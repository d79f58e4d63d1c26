# One generic pipeline for every experiment: shared data set -> one job per cell -> merge per
# sweep (sparse, along `cell`) -> summary (fits) where the experiment declares one. Data sets,
# merges and summaries are light: they run inside the Snakemake process (scripts/local_jobs.py).


localrules:
    data,
    light_cell,
    merge,
    summary,


# a light cell (Experiment.light) matches both cell rules; it runs inside this process
ruleorder: light_cell > cell


wildcard_constraints:
    dataset=_alternatives({key.split("/")[0] for key in DATA}),
    experiment=_alternatives(EXPERIMENTS),
    sweep=_alternatives(SWEEPS),


rule data:
    output:
        "results/data/{dataset}/{data}.nc",
    log:
        "logs/data/{dataset}/{data}.log",
    cache: "omit-software"
    priority: IN_PROCESS_PRIORITY
    threads: 1
    resources:
        in_process=1,
        mem_mb=2000,
        runtime=10,
    params:
        experiment=lambda w: DATA[f"{w.dataset}/{w.data}"][0],
        params=lambda w: DATA[f"{w.dataset}/{w.data}"][1],
        code=lambda w: experiment_code(DATA[f"{w.dataset}/{w.data}"][0]),
    run:
        local_jobs.data_set(params, wildcards, output, log, rule)


rule cell:
    input:
        data=cell_data_path,
    output:
        "results/cells/{experiment}/{cell}.nc",
    log:
        "logs/cells/{experiment}/{cell}.log",
    priority: cell_priority
    threads: cell_threads
    resources:
        mem_mb=lambda w, attempt: cell_request(w, attempt)["mem_mb"],
        runtime=lambda w, attempt: cell_request(w, attempt)["runtime"],
    params:
        params=cell_params,
        code=cell_code,
    run:
        local_jobs.cell(
            params,
            wildcards,
            input,
            output,
            log,
            rule,
            threads,
            config.get("experiment_modules", []),
            workflow.remote_exec or workflow.subprocess_exec,
        )


rule light_cell:
    input:
        data=cell_data_path,
    output:
        "results/cells/{light}.nc",
    log:
        "logs/cells/{light}.log",
    wildcard_constraints:
        light=_alternatives(LIGHT_CELLS),
    priority: IN_PROCESS_PRIORITY
    threads: 1
    resources:
        in_process=1,
        mem_mb=lambda w, attempt: cell_request(w, attempt)["mem_mb"],
        runtime=lambda w, attempt: cell_request(w, attempt)["runtime"],
    params:
        params=cell_params,
        code=cell_code,
    run:
        local_jobs.light_cell(params, wildcards, input, output, log, rule)


rule merge:
    input:
        lambda w: [c.path for c in SWEEPS[w.sweep].cells],
    output:
        update("results/{sweep}.nc"),
    log:
        "logs/merge/{sweep}.log",
    priority: IN_PROCESS_PRIORITY
    threads: 1
    resources:
        in_process=1,
    params:
        experiment=lambda w: SWEEPS[w.sweep].experiment,
        cells=lambda w: [sorted_params(c.params) for c in SWEEPS[w.sweep].cells],
        ids=lambda w: [c.id for c in SWEEPS[w.sweep].cells],
        settings=lambda w: sorted_params(SWEEPS[w.sweep].settings),
        code=lambda w: experiment_code(SWEEPS[w.sweep].experiment),
    run:
        local_jobs.merged_sweep(params, wildcards, input, output, log, rule)


rule summary:
    input:
        lambda w: [c.path for c in SWEEPS[w.sweep].cells],
    output:
        update("results/{sweep}.summary.nc"),
    log:
        "logs/merge/{sweep}.summary.log",
    priority: IN_PROCESS_PRIORITY
    threads: 1
    resources:
        in_process=1,
    params:
        experiment=lambda w: SWEEPS[w.sweep].experiment,
        cells=lambda w: [sorted_params(c.params) for c in SWEEPS[w.sweep].cells],
        settings=lambda w: sorted_params(SWEEPS[w.sweep].settings),
        code=lambda w: experiment_code(SWEEPS[w.sweep].experiment),
    run:
        local_jobs.summary(params, wildcards, input, output, log, rule)
