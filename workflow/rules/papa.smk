rule average_attention:
    """Constant matrices per (model, corpus, N): the masked mean attention (kinds spec.DATA_KINDS: average,
    effective). The data-free kinds are rule data_free_constants."""
    input:
        tokens=tokens("{model}", "{dataset}", "{n}", "train"),
        model=lambda wc: model_input(wc.model),
    output:
        constants_path("{model}", "{dataset}", "{n}", "{kind}"),
    wildcard_constraints:
        kind=one_of(spec.DATA_KINDS),
    params:
        # the papa code the script reaches, the data-free kinds' builder aside: a change reruns this rule
        code=code("average_attention.py", skip=spec.DATA_FREE_ONLY),
        model=lambda wc: model_path(wc.model),
        release=model_state(),
        batch_size=AVERAGING["batch_size"],
        max_examples=AVERAGING["max_examples"],
        seed=SEED,
        precision=PRECISION,
    conda:
        CONDA_ENV
    log:
        job_log("average_attention"),
    benchmark:
        job_benchmark("average_attention")
    threads: res("average_attention")["threads"]
    resources:
        mem_mb=grows("average_attention", "mem_mb"),
        runtime=grows("average_attention", "runtime"),
        gpu=res("average_attention")["gpu"],
        gpu_model=gpu_model("average_attention"),
    script:
        "../scripts/average_attention.py"


# The data-free constant kinds (spec.DATA_FREE: identity, toeplitz, zeros, uniform), built from the model's config and N
# alone: the averaging rule's job under its own name, so that it asks for resources.data_free_constants (by default
# resources.default: no GPU), not for the GPU and memory of averaging (under the Slurm profile those jobs waited in a
# GPU queue to write a matrix of zeros). Its output and script are average_attention's; its code param counts
# the script's data-free branch alone (papa.spec.AVERAGING_ONLY left out), so an edit to code only the
# averaging reaches reruns no data-free matrix, and the other way round; of the model it reads the config
# alone (the shape), so new weights rerun no data-free matrix; N is the path's (no token file: an edit to the corpus
# reruns no data-free matrix).
use rule average_attention as data_free_constants with:
    input:
        model=lambda wc: model_input(wc.model, "config"),
    wildcard_constraints:
        kind=one_of(spec.DATA_FREE),
    params:
        code=code("average_attention.py", skip=spec.AVERAGING_ONLY),  # the script's data-free branch
        # no averaging settings and no precision (no model runs): a change to them reruns no data-free matrix
        batch_size=None,
        max_examples=None,
        seed=None,  # nothing is drawn
        precision=None,
        release=model_state("config"),  # of a local folder, its config.json alone
    log:
        job_log("data_free_constants"),
    benchmark:
        job_benchmark("data_free_constants")
    threads: res("data_free_constants")["threads"]
    resources:
        mem_mb=grows("data_free_constants", "mem_mb"),
        runtime=grows("data_free_constants", "runtime"),
        gpu=res("data_free_constants")["gpu"],
        gpu_model=gpu_model("data_free_constants"),


rule learn_lambda:
    """One lambda per head, trained with a probe; heads ranked by lambda ascending."""
    input:
        constants=lambda wc: constants_file(wc.model, wc.task, wc.constants),
        train=lambda wc: task_tokens(wc.model, wc.task, "train"),
        validation=lambda wc: task_tokens(wc.model, wc.task, "validation"),
        model=lambda wc: model_input(wc.model),
    output:
        lambdas=lambda_file("{model}", "{task}", "{constants}"),
        metrics=lambda_path("{model}", "{task}", "{constants}", layout.LAMBDA_FILES[1]),
    params:
        code=code("learn_lambda.py"),  # the papa code the script reaches: a change reruns this rule
        model=lambda wc: model_path(wc.model),
        release=model_state(),
        hp=lambda wc: lambda_hp(wc.task),
        metrics=lambda wc: task_cfg(wc.task)["metrics"],
        precision=PRECISION,
        compile=COMPILE,
    conda:
        CONDA_ENV
    log:
        job_log("learn_lambda"),
    benchmark:
        job_benchmark("learn_lambda")
    threads: task_res("learn_lambda", "threads")
    resources:
        mem_mb=grows("learn_lambda", "mem_mb"),
        runtime=grows("learn_lambda", "runtime"),
        gpu=task_res("learn_lambda", "gpu"),
        gpu_model=gpu_model("learn_lambda"),
    script:
        "../scripts/learn_lambda.py"


rule probe:
    """A share fraction_dynamic of the heads input-dependent, the others constant; one probe per seed, from
    hidden states encoded once and cached in memory or on disk, or re-encoded every epoch (cache.strategy,
    recorded in the output; not a param: the scores do not depend on it beyond float rounding, so a changed
    budget reruns nothing).
    sweep.batch_order (each seed its own batch order, or all in the first seed's) does change them: a param.
    Fixed matrices only: trained ones are rule probe_trained."""
    wildcard_constraints:
        constants=spec.FIXED_CONSTANTS_PATTERN,
    input:
        constants=probe_constants,  # none at fraction_dynamic 1 (fixed matrices): new ones rerun no baseline
        lambdas=lambda wc: (
            lambda_file(wc.model, wc.task, wc.constants) if needs_lambdas(wc.selection, wc.fraction_dynamic) else []
        ),
        train=lambda wc: task_tokens(wc.model, wc.task, "train"),
        validation=lambda wc: task_tokens(wc.model, wc.task, "validation"),
        model=lambda wc: model_input(wc.model),
    output:
        probe_outputs("{model}", "{task}", "{constants}", "{selection}", "{fraction_dynamic}"),
    params:
        code=code("probe.py"),  # the papa code the script reaches: a change reruns this rule
        model=lambda wc: model_path(wc.model),
        release=model_state(),
        hp=lambda wc: probe_hp(wc.task),
        metrics=lambda wc: task_cfg(wc.task)["metrics"],
        # which seeds: the outputs (papa.spec.seed_of_file), not a param, so under per_seed a seed added or
        # dropped reruns nothing else (each seed's scores are its own); under shared every seed trains in the
        # sweep's first seed's batch order: that seed is a param
        batch_order=SWEEP["batch_order"],
        first_seed=SWEEP["seeds"][0] if SWEEP["batch_order"] == "shared" else None,
        cache_dtype=CACHE["dtype"],
        order_seed=SEED,
        precision=PRECISION,
    conda:
        CONDA_ENV
    log:
        job_log("probe"),
    benchmark:
        job_benchmark("probe")
    threads: task_res("probe", "threads")
    resources:
        mem_mb=grows("probe", "mem_mb"),
        runtime=grows("probe", "runtime"),
        gpu=task_res("probe", "gpu"),
        gpu_model=gpu_model("probe"),
    script:
        "../scripts/probe.py"


# Trained matrices (a "<kind>_trained" constants spec): the encoder runs with gradients for every batch of
# every seed, and the seeds share nothing (no cached hidden states), so each seed is a job of its own: the
# probe rule's inputs, code and script, one seed's output. Its resources are the probe's (resources.probe,
# tasks.<t>.resources.probe) under its own entries (resources.probe_trained, tasks.<t>.resources.probe_trained):
# paper.yaml asks less memory for it, which keeps no hidden-state cache. Three seeds run side by side where GPUs
# allow, and the longest job (DeBERTa-large's on MNLI) takes a third of the time. The scores are those of one job
# running the seeds one after the other.
use rule probe as probe_trained with:
    wildcard_constraints:
        constants=spec.TRAINED_CONSTANTS_PATTERN,
    output:
        probe_output("{model}", "{task}", "{constants}", "{selection}", "{fraction_dynamic}", "{seed}"),
    params:
        hp=lambda wc: probe_hp(wc.task, trained=True),
        compile=COMPILE,  # the encoder runs in the loop: torch.compile can speed it up (fixed matrices: no param)
        # one seed a job: under shared only the later seeds follow another's batch order, so switching
        # sweep.batch_order reruns them, not the first seed's job (its own order either way)
        batch_order=lambda wc: "shared" if follows_first_seed(wc.seed) else "per_seed",
        first_seed=lambda wc: SWEEP["seeds"][0] if follows_first_seed(wc.seed) else None,
    threads: task_res("probe_trained", "threads")
    resources:
        # resources.probe (and tasks.<t>.resources.probe) under probe_trained's own entries: papa.checks.job_resources
        mem_mb=grows("probe_trained", "mem_mb"),
        runtime=grows("probe_trained", "runtime"),
        gpu=task_res("probe_trained", "gpu"),
        gpu_model=gpu_model("probe_trained"),
    log:
        job_log("probe_trained"),
    benchmark:
        job_benchmark("probe_trained")


rule patterns:
    """Per-head pattern statistics of raw and effective average attention (paper Sec. 5.1)."""
    input:
        average=constants_path("{model}", "{dataset}", "{n}", "average"),
        effective=constants_path("{model}", "{dataset}", "{n}", "effective"),
    output:
        patterns_path("{model}", "{dataset}", "{n}"),
    params:
        code=code("patterns.py"),  # the papa code the script reaches: a change reruns this rule
        patterns=canon(ANALYSES["patterns"] or {}),
    conda:
        CONDA_ENV
    log:
        job_log("patterns"),
    benchmark:
        job_benchmark("patterns")
    threads: res("patterns")["threads"]
    resources:
        mem_mb=grows("patterns", "mem_mb"),
        runtime=grows("patterns", "runtime"),
    script:
        "../scripts/patterns.py"


rule mlm:
    """Masked-LM negative log-perplexity as heads are replaced (paper Sec. 5.5): lambdas learned with the MLM
    loss, then per fraction_dynamic a fresh probe trained on the patched frozen encoder (analyses.mlm.head probe, any
    encoder) or the checkpoint's frozen MLM head (head pretrained)."""
    input:
        constants=constants_path("{model}", "{dataset}", "{n}", spec.METHOD_CONSTANTS),
        train=tokens("{model}", "{dataset}", "{n}", "train"),
        validation=tokens("{model}", "{dataset}", "{n}", "validation"),
        model=lambda wc: model_input(wc.model),
    output:
        scores=mlm_path("{model}", "{dataset}", "{n}", layout.MLM_FILES[0]),
        lambdas=mlm_path("{model}", "{dataset}", "{n}", layout.MLM_FILES[1]),
    params:
        code=code("mlm.py"),  # the papa code the script reaches: a change reruns this rule
        model=lambda wc: model_path(wc.model),
        release=model_state(),
        hp=mlm_hp(),
        # in one order, however the config lists them (numbers independent of it): a reorder reruns nothing
        fraction_dynamic=checks.mlm_sweep(SWEEP)["fraction_dynamic"],
        seeds=checks.mlm_sweep(SWEEP)["seeds"],  # a trained probe per seed at every fraction (paper Sec. 4.1)
        precision=PRECISION,
    conda:
        CONDA_ENV
    log:
        job_log("mlm"),
    benchmark:
        job_benchmark("mlm")
    threads: res("mlm")["threads"]
    resources:
        mem_mb=grows("mlm", "mem_mb"),
        runtime=grows("mlm", "runtime"),
        gpu=res("mlm")["gpu"],
        gpu_model=gpu_model("mlm"),
    script:
        "../scripts/mlm.py"
