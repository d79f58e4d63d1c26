# Mini-batch noise of the single-layer network (paper 000 Sec. II.2.2): Figs. 1a, 1b, 2a-c.

NZ = "results/noise"


rule noise_projector:
    output:
        f"{NZ}/projector/{{proj}}.nc",
    log:
        "logs/noise/projector/{proj}.log",
    params:
        cell=lambda w: NOISE_PROJECTOR[w.proj],
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/noise_projector.py"


rule noise_k_diagonal:
    input:
        data=lambda w: f"{SL}/data/{w.data}.nc",
    output:
        f"{NZ}/k_diagonal/{{data}}.nc",
    log:
        "logs/noise/k_diagonal/{data}.log",
    params:
        cell=lambda w: SL_DATA[w.data],
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/noise_k_diagonal.py"


rule noise_spectrum:
    input:
        data=lambda w: f"{SL}/data/{sweep.data_name(NOISE_SPECTRUM[w.spec])}.nc",
    output:
        f"{NZ}/spectrum/{{spec}}.nc",
    log:
        "logs/noise/spectrum/{spec}.log",
    params:
        cell=lambda w: NOISE_SPECTRUM[w.spec],
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    script:
        "../../scripts/noise_spectrum.py"


rule noise_hessian_basis:
    input:
        data=[f"{SL}/data/{sweep.data_name(c)}.nc" for c in NOISE_BASIS_DATA],
    output:
        f"{NZ}/hessian_basis.nc",
    log:
        "logs/noise/hessian_basis.log",
    params:
        cell=sorted_params(NOISE_CONFIG.get("hessian_basis", {})),
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/noise_hessian_basis.py"


rule noise_merge:
    input:
        lambda w: expand(f"{NZ}/{w.kind}/{{name}}.nc", name=NOISE_CELLS[w.kind]),
    output:
        "results/noise_{kind}.nc",
    log:
        "logs/noise/merge_{kind}.log",
    wildcard_constraints:
        kind="projector|k_diagonal|spectrum",
    params:
        cells=lambda w: [NOISE_CELL_PARAMS[w.kind][n] for n in NOISE_CELLS[w.kind]],
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/noise_merge.py"
