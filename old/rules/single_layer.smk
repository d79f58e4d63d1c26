# Single-layer linear network (paper 000, Sec. II): data -> theory -> SGD -> merge.

SL = "results/single_layer"


wildcard_constraints:
    data=r"N\d+_P\d+_s[0-9.e-]+_d\d+",
    cell=r"N\d+_P\d+_s[0-9.e-]+_d\d+_lr[0-9.e-]+_S\d+_(with|without)",


rule single_layer_data:
    output:
        f"{SL}/data/{{data}}.nc",
    log:
        "logs/single_layer/data/{data}.log",
    params:
        cell=lambda w: SL_DATA[w.data],
        n_test=config["single_layer"]["n_test"],
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, attempt: data_request(w, attempt)["mem_mb"],
        runtime=lambda w, attempt: data_request(w, attempt)["runtime"],
    cache: "omit-software"
    script:
        "../../scripts/single_layer_data.py"


rule single_layer_theory:
    input:
        data=lambda w: f"{SL}/data/{sweep.data_name(SL_CELLS[w.cell])}.nc",
    output:
        f"{SL}/theory/{{cell}}.nc",
    log:
        "logs/single_layer/theory/{cell}.log",
    params:
        cell=lambda w: SL_CELLS[w.cell],
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, attempt: theory_request(w, attempt)["mem_mb"],
        runtime=lambda w, attempt: theory_request(w, attempt)["runtime"],
    cache: "omit-software"
    script:
        "../../scripts/single_layer_theory.py"


rule single_layer_sgd:
    input:
        data=lambda w: f"{SL}/data/{sweep.data_name(SL_CELLS[w.cell])}.nc",
    output:
        f"{SL}/sgd/{{cell}}.nc",
    log:
        "logs/single_layer/sgd/{cell}.log",
    params:
        cell=lambda w: SL_CELLS[w.cell],
        protocol=sorted_params(config["single_layer"]["sgd"]),
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, attempt: sgd_request(w, attempt)["mem_mb"],
        runtime=lambda w, attempt: sgd_request(w, attempt)["runtime"],
    script:
        "../../scripts/single_layer_sgd.py"


rule single_layer_merge:
    input:
        theory=lambda w: [f"{SL}/theory/{c}.nc" for c in SL_MERGES[w.slmerge]],
        sgd=lambda w: [f"{SL}/sgd/{c}.nc" for c in SL_MERGES[w.slmerge] if c in SL_SIMULATED],
    output:
        "results/{slmerge}.nc",
    log:
        "logs/single_layer/{slmerge}.log",
    wildcard_constraints:
        slmerge="single_layer|single_layer_lr",
    params:
        theory_cells=lambda w: [SL_CELLS[c] for c in SL_MERGES[w.slmerge]],
        sgd_cells=lambda w: [SL_CELLS[c] for c in SL_MERGES[w.slmerge] if c in SL_SIMULATED],
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/single_layer_merge.py"
