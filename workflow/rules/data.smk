rule prepare_data:
    """Load a dataset (package corpus, hub, or local files) and write one of its splits, a Parquet file that
    describes itself: a job per split, so a setting of one split (max_validation) reruns nothing that reads the
    other."""
    input:
        lambda wc: dataset_input(wc.dataset),  # local files (or the built folder): an edit reruns this
    output:
        data_file("{dataset}", "{split}.parquet"),
    params:
        code=lambda wc: data_code(wc.dataset),  # the papa code its source's loader reaches: a change reruns it
        spec=lambda wc: dataset_spec(wc.dataset, wc.split),  # without the other split's subsample key
        files=lambda wc: local_data_digests(wc.dataset),  # what a local file holds, whatever its time
        seed=SEED,
    conda:
        CONDA_ENV
    log:
        job_log("prepare_data"),
    benchmark:
        job_benchmark("prepare_data")
    threads: res("prepare_data")["threads"]
    resources:
        mem_mb=grows("prepare_data", "mem_mb"),
        runtime=grows("prepare_data", "runtime"),
    script:
        "../scripts/prepare_data.py"


rule tokenize:
    """Tokenize one split in the PAPA layout (final separator at N-1)."""
    input:
        split=data_file("{dataset}", "{split}.parquet"),  # it names its task, kind and labels
        model=lambda wc: model_input(wc.model, "tokenizer"),  # its tokenizer and config: new weights rerun no tokenization
    output:
        tokens("{model}", "{dataset}", "{n}", "{split}"),
    params:
        code=code("tokenize.py"),  # the papa code the script reaches: a change reruns this rule
        model=lambda wc: model_path(wc.model),
        release=model_state("tokenizer"),
        layout=LAYOUT,
        # the authors' encoding options that reach the dataset (pair_segments its pairs, single_cap its single
        # sentences): a change reruns its tokenization and all after
        encoding=lambda wc: canon(checks.encoding_options(config, wc.dataset)),
        input_shape=lambda wc: checks.input_shape(wc.dataset, config["datasets"][wc.dataset]),
    conda:
        CONDA_ENV
    log:
        job_log("tokenize"),
    benchmark:
        job_benchmark("tokenize")
    threads: res("tokenize")["threads"]
    resources:
        mem_mb=grows("tokenize", "mem_mb"),
        runtime=grows("tokenize", "runtime"),
    script:
        "../scripts/tokenize.py"
