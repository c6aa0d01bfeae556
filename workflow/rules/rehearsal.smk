# Models and local data the workflow builds itself (papa.rehearsal): `models: {<name>: {build: ...}}`
# and `build_data:` in the config (config/rehearsal.yaml). Configs without them never run these rules.


rule build_model:
    """A tiny randomly initialised model of one family with its tokenizer (papa.rehearsal.build_model)."""
    output:
        directory(built_model_dir("{model}")),
    wildcard_constraints:
        model=one_of(BUILT_MODELS),
    params:
        code=code("build_model.py"),  # the papa code the script reaches: a change reruns this rule
        # seed: the top-level one unless given; vocab_size only for the families that train a BPE
        build=lambda wc: canon(rehearsal.build_settings(BUILT_MODELS[wc.model])),
        # bert and electra copy the minilm alias's WordPiece: its package release (files it lists none of)
        release=lambda wc: rehearsal.tokenizer_release(BUILT_MODELS[wc.model]["family"]),
    conda:
        CONDA_ENV
    log:
        job_log("build_model"),
    benchmark:
        job_benchmark("build_model")
    threads: res("build_model")["threads"]
    resources:
        mem_mb=grows("build_model", "mem_mb"),
        runtime=grows("build_model", "runtime"),
    script:
        "../scripts/build_model.py"


rule build_data:
    """GLUE/CoNLL-shaped local files from the offline package corpora (papa.rehearsal.build_data)."""
    output:
        directory(built_data_dir("{source}")),
    wildcard_constraints:
        source=one_of(BUILD_DATA),
    params:
        code=code("build_data.py"),  # the papa code the script reaches: a change reruns this rule
        build=lambda wc: canon(BUILD_DATA[wc.source]),  # seed: the top-level one unless given
    conda:
        CONDA_ENV
    log:
        job_log("build_data"),
    benchmark:
        job_benchmark("build_data")
    threads: res("build_data")["threads"]
    resources:
        mem_mb=grows("build_data", "mem_mb"),
        runtime=grows("build_data", "runtime"),
    script:
        "../scripts/build_data.py"
