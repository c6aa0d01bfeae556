# Helpers shared by the rules: path builders (where each artifact lives) and config lookups. The
# vocabulary (constant kinds, the constants spec, head orders, fraction_dynamic) is papa.spec's; the config
# checks are papa.checks'; the defaults are the schema's (filled in by papa.checks.validate_config, below).
import functools
import os
import sys

sys.path.insert(0, workflow.basedir)  # papa from this checkout
from papa import checks, layout, records, rehearsal, spec
from papa.layout import one_of
from papa.checks import validate_config
from papa.data import LOCAL_FILE_KEYS
from papa.data.hub import ACCESS_KEYS
from papa.io import file_digest, interrupt_on_stop_signals, model_folder_files, prune_digests
from papa.models import is_package_alias, model_release
from papa.spec import ConstantsSpec, is_original, needs_lambdas
from snakemake.logging import logger
from snakemake.settings.enums import RerunTrigger

# Snakemake itself in a Slurm job (sbatch, salloc), read now: the Slurm executor plugin deletes SLURM_* from the
# environment before `onstart` (papa.io.interrupt_on_stop_signals)
DRIVER_IN_SLURM_JOB = bool(os.environ.get("SLURM_JOB_ID"))

# before anything reads the config: a key its files give twice (YAML keeps the later one silently), deprecated keys
# (sweep.fractions) renamed, the schema's defaults filled in, and what the schema cannot say checked
# (cross-references, metric vs task kind, N vs positions, duplicates)
if workflow.is_main_process and sum(a.split("=")[0] in ("--configfile", "--configfiles") for a in sys.argv) > 1:
    # Snakemake's argparse keeps the last of a repeated option (it takes no abbreviation): the other files went
    # unread, and a complete config given last ran alone (a warning scrolled away above its jobs)
    raise checks.ConfigError(f"--configfile is given more than once, and Snakemake reads only the last one's files "
                             f"({', '.join(map(str, workflow.configfiles))}): list the files after one --configfile "
                             f"(--configfile a.yaml b.yaml merges them in order)")  # fmt: skip
checks.check_interpreter(sys.executable)  # Snakemake's script rules cannot run from a path with a space
checks.job_environment(os.environ)  # the jobs' Pythons in UTF-8 mode, whatever the locale
checks.check_config_files(workflow.configfiles)
# --config's values inside {...} or [...] are text to Snakemake (YAML's BaseLoader): read as a config file's would be
checks.read_command_line(config, workflow.config_settings.config)
validate_config(config, logger.warning)

R = config["results"]
STANDING = set()  # the outputs of the jobs to run that were on disk as the run started (the Snakefile's onstart)
# the results folder is the one this working directory's Snakemake records vouch for (papa.records): not one made
# under records since deleted, or another checkout's (a job's own Snakemake, under Slurm, leaves it to its driver)
if workflow.is_main_process:
    records.check_results(R)
    if (running := records.running_on(R)) not in (None, "this process"):  # (Snakemake would say "incomplete")
        logger.warning(f"a Snakemake is running on {R}/ ({running}): the outputs of its jobs are incomplete until "
                       f"they end, and a run of this folder is refused until it ends")  # fmt: skip
    # the data and model jobs lock what they download or extract in PAPA_CACHE: a file system without locks
    if problem := checks.cache_lock_problem():
        logger.warning(problem)
CONDA_ENV = "../../environment.yml"
SEED = int(config["seed"])
PRECISION = config["precision"]  # CUDA's float32 matmuls in the jobs that run a model (papa.models.PRECISIONS)
COMPILE = config["compile"]  # how lambda and trained-constant jobs run the encoder (papa.models.COMPILE_MODES)
LAYOUT = config["layout"]
SWEEP = config["sweep"]
SELECTIONS = SWEEP["selections"]
CACHE = config["cache"]
AVERAGING = config["averaging"]
ANALYSES = config["analyses"]
MLM = ANALYSES["mlm"] or {}
BUILD_DATA = config["build_data"]  # local files the workflow builds (rule build_data)
BUILT_MODELS = {m: s["build"] for m, s in config["models"].items() if isinstance(s, dict)}  # rule build_model


def code(script, skip=()):
    """Fingerprint of the papa code a workflow script reaches (papa.fingerprint): as a param, a change to
    that code reruns the rule; comments, docstrings, formatting and unreached code do not. ``skip``: the
    definitions the rule's jobs never run (a script two rules share)."""
    CODE_FINGERPRINTS[script, tuple(skip)] = fingerprint = script_fingerprint(script, skip)
    return fingerprint


CODE_FINGERPRINTS = {}  # (script, skip) -> the fingerprint `code` gave: compared again as the run ends (the Snakefile)


def script_fingerprint(script, skip=()):
    """`papa.fingerprint.code_fingerprint` of a workflow script, as it is now."""
    from papa.fingerprint import code_fingerprint

    return code_fingerprint(f"{workflow.basedir}/workflow/scripts/{script}", skip=skip)


def code_changed_under_run():
    """The workflow scripts whose papa code changed since this Snakemake read the Snakefile (a git pull, checkout or
    edit in this checkout while it ran): papa.fingerprint.changed_scripts."""
    from papa.fingerprint import changed_scripts

    return changed_scripts(CODE_FINGERPRINTS, f"{workflow.basedir}/workflow/scripts")


def data_code(dataset):
    """The `code` param of prepare_data for one dataset, the papa code its source's loader reaches, without the
    other sources' loaders and the other package corpora's parsers (papa.data.task.unreached_code), so an edit to
    one reader or parser reruns no other dataset (an edit to the Rotten Tomatoes parser reran paper.yaml's every
    job, and every other package corpus's)."""
    from papa.data.task import unreached_code

    return code("prepare_data.py", skip=unreached_code(dataset_spec(dataset)))


# ----------------------------------------------------------------------------- where each artifact lives
# Each layout is written once, in papa.layout (which also reads a path back: parse_result); rules pass wildcards
# ("{model}") for the parts they match.


def built_data_dir(key):
    """Folder of the files rule build_data writes for build_data.<key>."""
    return layout.result_path(R, "built_data", source=key)


def built_model_dir(model):
    """Folder of a model the workflow builds (``build`` entry under ``models``; rule build_model)."""
    return layout.result_path(R, "built_model", model=model)


def data_file(dataset, name):
    """A file of a prepared dataset (``<split>.parquet``, rule prepare_data)."""
    return layout.result_path(R, "data", dataset=dataset, name=name)


def tokens(model, dataset, n, split):
    """A tokenized split (rule tokenize) of a dataset at N."""
    return layout.result_path(R, "tokens", model=model, dataset=dataset, n=n, split=split)


def constants_path(model, dataset, n, kind):
    """Constant matrices of one kind averaged on a dataset at N (rule average_attention)."""
    return layout.result_path(R, "constants", model=model, dataset=dataset, n=n, kind=kind)


def lambda_path(model, task, constants, name):
    """A file (one of papa.layout.LAMBDA_FILES) of the lambdas learned for a task with a constants spec (rule
    learn_lambda)."""
    return layout.result_path(R, "lambda", model=model, task=task, constants=constants, name=name)


def patterns_path(model, dataset, n):
    """Matrix-pattern table of a model's matrices averaged on a dataset at N (rule patterns)."""
    return layout.result_path(R, "patterns", model=model, dataset=dataset, n=n)


def mlm_path(model, dataset, n, name):
    """A file (one of papa.layout.MLM_FILES) of the masked-LM curve of a model on a dataset at N (rule mlm)."""
    return layout.result_path(R, "mlm", model=model, dataset=dataset, n=n, name=name)


def job_log(rule):
    """The ``log:`` of a rule's jobs, its wildcards left in (papa.layout.JOBS)."""
    return layout.log_path(R, rule)


def job_benchmark(rule):
    """The ``benchmark:`` of a rule's jobs, its wildcards left in (papa.layout.JOBS)."""
    return layout.benchmark_path(R, rule)


# ----------------------------------------------------------------------------- config lookups


def canon(obj):
    """Dicts with sorted keys, recursively: params then compare equal however the config orders its keys."""
    if isinstance(obj, dict):
        return {k: canon(obj[k]) for k in sorted(obj)}
    if isinstance(obj, (list, tuple)):
        return [canon(v) for v in obj]
    return obj


def res(rule_name, task=None):
    """Resources of a rule's job (papa.checks.job_resources): config resources.<rule> over resources.default, and
    for a task's job (probe, learn_lambda) tasks.<task>.resources.<rule> over both."""
    return checks.job_resources(config, rule_name, task)


def task_res(rule_name, key):
    """Resource ``key`` of a job of ``rule_name``: `res` for the job's task, when the rule has a task wildcard."""
    return lambda wildcards: res(rule_name, getattr(wildcards, "task", None))[key]


def gpu_model(rule_name):
    """The GPU type asked for by a job of ``rule_name``, ``$PAPA_SLURM_GPU_MODEL`` (the Slurm profile's switch)
    where the job asks for a GPU: for a model rule (`papa.checks.GPU_RULES`) ``$PAPA_SLURM_GPUS`` if set (the
    profile's request), else its config's (`task_res`); else none.
    The Slurm plugin sends ``--gpus=<type>:<n>`` whenever a type is set, ``--gpus=a100:0`` for a job that asks
    for no GPU, so the profile cannot set the type for the five rules alike."""
    model = os.environ.get("PAPA_SLURM_GPU_MODEL") or None
    forced = checks.slurm_gpus(os.environ.get("PAPA_SLURM_GPUS"))  # the profile's check (a test holds them equal)
    gpus = task_res(rule_name, "gpu")
    if rule_name not in checks.GPU_RULES:  # data_free_constants: the profile leaves its request to the config
        forced = None
    return lambda wildcards: model if model and (forced if forced is not None else gpus(wildcards)) > 0 else None


def grows(rule_name, key):
    """Resource ``key`` (mem_mb, runtime) of a job of ``rule_name`` per attempt (`task_res`): the configured value
    on the first attempt, times the attempt number on a retry (the Slurm profile's ``retries: 1``), so a job that
    Slurm killed for memory or time (OUT_OF_MEMORY, TIMEOUT) is resubmitted with twice as much, up to
    ``resources.limits.<key>`` (papa.checks.retry_request)."""
    value = task_res(rule_name, key)
    return lambda wildcards, attempt: checks.retry_request(config, key, value(wildcards), attempt)


def model_path(model):
    """Where a model loads from: its config string (hub id, folder, alias), or for a model the
    workflow builds (``{build: ...}``, rule build_model) the folder that rule writes; a folder's path written one
    way (papa.checks.path_param: ``models/x/`` is ``models/x``)."""
    entry = config["models"][model]
    return built_model_dir(model) if isinstance(entry, dict) else checks.path_param(entry)


def model_input(model, reads="model"):
    """The model as a job input when it is a folder, so a rebuilt, replaced or edited model reruns the jobs
    that read it: the folder rule build_model writes, or the files of a local folder the job reads
    (papa.io.model_folder_files; reads: "model" every file, "tokenizer" all but the weights, "config" its
    config.json). Files, not the folder: a file overwritten in place leaves its folder's time as it was.
    Hub ids and aliases: none; a package alias (minilm) even where a folder of that name is in the working folder,
    which papa.models.resolve_model_path never loads for it (it listed that folder's files as the inputs, and their
    digest as the release param, of jobs that read the package's model: a new release reran nothing)."""
    if isinstance(config["models"][model], dict):
        return [model_path(model)]
    if is_package_alias(model_path(model)):
        return []
    path = os.path.expanduser(model_path(model))
    path = os.path.normpath(path)  # ./minilm, a folder named as an alias (checks.path_param), as minilm/...
    return list(folder_files(path, reads)) if os.path.isdir(path) else []


@functools.lru_cache(maxsize=None)
def folder_files(path, reads):
    """papa.io.model_folder_files, listed once per Snakemake run, not once per job that reads the model."""
    return tuple(model_folder_files(path, reads))


def dataset_spec(dataset, split=None):
    """The papa.data spec of a dataset: its config entry, named, without the keys that only say how to reach
    the hub (papa.data.hub.ACCESS_KEYS: prepare_data reads them from the config, so changing them reruns
    nothing) and without a local ``test`` file (the workflow prepares spec.PREPARED_SPLITS only; papa.checks
    warns of it); a dataset built by the workflow (``build: <key of build_data>``, rule build_data) gets the paths
    of the files that rule writes; a key at the value papa.data takes without it is left out
    (papa.checks.dataset_param). With ``split``, what that split depends on (papa.data.split_spec)."""
    from papa.data import split_spec

    unread = set(ACCESS_KEYS) | (set(LOCAL_FILE_KEYS) - set(spec.PREPARED_SPLITS))  # a test file: not prepared
    entry = {"name": dataset, **{k: v for k, v in config["datasets"][dataset].items() if k not in unread}}
    key = entry.pop("build", None)
    if key:
        from papa.rehearsal import data_files

        entry.update({split: str(p) for split, p in data_files(BUILD_DATA[key]["shape"], built_data_dir(key)).items()})
    entry = checks.dataset_param(entry)  # a key written out at its default: as left out
    return canon(entry if split is None else split_spec(entry, split))


def dataset_input(dataset):
    """The local files a dataset reads (its folder when the workflow builds them), as prepare_data's
    input: editing a local file reruns prepare_data and everything downstream (a ``test`` file is not read). Each
    written one way, as in the spec param (checks.path_param): ``data//train.csv`` was another set of input files
    than ``data/train.csv``, which reran the dataset's splits and every job made from them."""
    entry = config["datasets"][dataset]
    if entry.get("build"):
        return [built_data_dir(entry["build"])]
    if entry["source"] != "local":
        return []
    # papa.data expands ~
    return [os.path.expanduser(checks.path_param(entry[key])) for key in spec.PREPARED_SPLITS if entry.get(key)]


def task_cfg(task):
    return config["tasks"][task]


def task_kind(task):
    """``sequence`` or ``token`` (None where only the data tells: papa.checks.dataset_kind)."""
    d = task_cfg(task)["dataset"]
    return checks.dataset_kind(d, config["datasets"][d])


def lambda_hp(task):
    """Lambda-stage hyperparameters: tasks.<t>.lambda, complete after validation (the probe's where it gives
    none, papa.checks.fill_derived_defaults), without the keys that change nothing (papa.checks.hparams_param:
    a default written out, a token task's dropout)."""
    return canon(checks.hparams_param(task_cfg(task)["lambda"], task_kind(task)))


def follows_first_seed(seed):
    """Whether a probe of ``seed`` trains in another seed's batch order: the sweep's first seed's, under
    ``sweep.batch_order: shared``."""
    return SWEEP["batch_order"] == "shared" and int(seed) != SWEEP["seeds"][0]


def probe_hp(task, trained=False):
    """Probe hyperparameters: tasks.<t>.probe, as lambda_hp; its extra_lr (the learning rate of trained patch
    parameters) only for trained constants (rule probe_trained), so setting it reruns no probe of fixed
    matrices."""
    hp = {k: v for k, v in task_cfg(task)["probe"].items() if trained or k != "extra_lr"}
    return canon(checks.hparams_param(hp, task_kind(task)))


def task_tokens(model, task, split):
    """The token file of a task's split: its dataset at its max_length."""
    return tokens(model, task_cfg(task)["dataset"], task_cfg(task)["max_length"], split)


def constants_file(model, task, constants):
    """The matrices a constants spec names for a task (papa.layout.constants_file)."""
    return layout.constants_file(R, config["tasks"], model, task, constants)


def model_state(reads="model"):
    """The ``release`` param of the jobs that load a model (reads: as model_input): an offline alias's PyPI release
    (papa.models.model_release), or the digest of the files a job reads in a local folder (papa.io.file_digest,
    once per file state); another release, or a file replaced by other content that keeps an older time (rsync -a,
    cp -p, tar), which Snakemake's file times miss, reruns them. Hub ids (pinned by @commit) and built models (rule
    build_model's outputs): the release alone (None)."""

    def state(wc):
        # the folder's own files, what from_pretrained reads (papa.io.model_folder_files: not a Trainer's
        # checkpoint-*/ subfolders, tens of GB hashed at the first start)
        files = [] if isinstance(config["models"][wc.model], dict) else model_input(wc.model, reads)
        top = os.path.expanduser(model_path(wc.model))
        return folder_digest(top, tuple(files)) if files else model_release(model_path(wc.model))

    return state


@functools.lru_cache(maxsize=None)
def folder_digest(folder, files):
    """papa.io.folder_digest of the files a job reads in a local model folder, once per Snakemake run."""
    from papa.io import folder_digest

    return folder_digest(folder, files)


def local_data_digests(dataset):
    """The digest of each local file a dataset reads (papa.io.file_digest, once per file state), a param of its
    prepare_data jobs: a file replaced by other content that keeps an older time (cp -p, rsync -a, tar, unzip),
    which Snakemake's file times miss, reruns them. Built data (the outputs of build_data) and other sources give
    None."""
    entry = config["datasets"][dataset]
    if entry.get("build") or entry["source"] != "local":
        return None
    return {key: file_digest(os.path.expanduser(entry[key])) for key in spec.PREPARED_SPLITS if entry.get(key)}


def probe_constants(wc):
    """The matrices a probe job reads: none for fixed matrices at fraction_dynamic 1, where no head is replaced
    (new averages then rerun no baseline probe); trained ones are the probe's parameters at any fraction."""
    if is_original(float(wc.fraction_dynamic)) and not ConstantsSpec.parse(wc.constants).trained:
        return []
    return constants_file(wc.model, wc.task, wc.constants)


def lambda_file(model, task, constants):
    return lambda_path(model, task, constants, layout.LAMBDA_FILES[0])


def probe_output(model, task, constants, selection, fraction_dynamic, seed):
    """One seed's probe file (``fraction_dynamic`` as its path text, papa.spec.format_fraction)."""
    return layout.result_path(R, "probe", model=model, task=task, constants=constants, selection=selection,
                              fraction_dynamic=fraction_dynamic, seed=seed)  # fmt: skip


def probe_outputs(model, task, constants, selection, fraction_dynamic):
    """One probe run's files, one per sweep seed."""
    return [probe_output(model, task, constants, selection, fraction_dynamic, s) for s in SWEEP["seeds"]]


def model_tasks(model):
    """The tasks ``model``'s probes run (`papa.checks.model_tasks`)."""
    return checks.model_tasks(config, model)


def runs():
    """Every probe run (model, task, constants, selection, fraction_dynamic), fraction_dynamic formatted as in
    paths: the main sweep, then the analyses of paper Sec. 5 (`papa.checks.probe_runs`)."""
    return checks.probe_runs(config)


def all_probe_files():
    return [p for run in runs() for p in probe_outputs(*run)]


def all_lambda_files():
    need = dict.fromkeys((m, t, c) for m, t, c, s, f in runs() if needs_lambdas(s, f))
    return [lambda_file(m, t, c) for m, t, c in need]


def pattern_files():
    """Matrix-pattern tables (paper Sec. 5.1) for the own averaging corpus of each task the analyses run on
    (`papa.checks.analysed_tasks`)."""
    if not ANALYSES["patterns"]:
        return []
    return sorted({patterns_path(m, task_cfg(t)["dataset"], task_cfg(t)["max_length"])
                   for m in config["models"] for t in checks.analysed_tasks(config, m)})


def mlm_hp():
    """Settings of the MLM analysis that its results depend on (not which models run it; an option written out at
    its default left out: papa.checks.mlm_param)."""
    return canon(checks.mlm_param(MLM))


def mlm_files():
    if not MLM.get("models"):
        return []
    return [mlm_path(m, MLM["dataset"], MLM["max_length"], layout.MLM_FILES[0]) for m in MLM["models"]]


@functools.lru_cache(maxsize=None)
def grid_files():
    """The probe and lambda files of this config's runs (`runs`, papa.layout.grid_files): what of its grid a lost
    file may be."""
    return layout.grid_files(R, runs(), SWEEP["seeds"])


def stale_grid_files():
    """The probe and lambda files under R this config does not make (papa.records.stale_files): those of an earlier
    config's runs. `make prune` (rule prune) removes them."""
    return records.stale_files(R, grid_files())


NOTICES_SAID = []  # start_notices has spoken


def start_notices(wildcards):
    """Rule all's input function, no input: what a start says once Snakemake has its settings (unknown while the
    Snakefile is read); a run of explicit targets, whose DAG has no rule all, says it from ``onstart``, as its jobs
    start (a dry run of explicit targets says nothing: Snakemake runs no ``onstart`` then). Files of runs this
    config does not make (not when the target is `make prune`'s rule, which removes them); files that Snakemake reruns because the papa code they reach changed since they were written (an
    upgrade), since Snakemake names only two hashes ("Params have changed since last execution"). Said once, however
    often Snakemake evaluates the input."""
    if not workflow.is_main_process or NOTICES_SAID:
        return []
    NOTICES_SAID.append(True)
    if stale := records.stale_notice(R, stale_grid_files(), workflow.configfiles, workflow.config_settings.config):
        logger.warning(stale)
    if RerunTrigger.PARAMS in workflow.rerun_triggers:
        for d in config["datasets"]:
            data_code(d)  # prepare_data's fingerprints (computed per job otherwise)
        upgraded = records.written_by_other_code(R, CODE_FINGERPRINTS.values(), makes=of_this_config)
        if notice := records.upgrade_notice(R, upgraded):
            logger.warning(notice)
    return []


def warn_if_code_changed():
    """papa's code changed while this run ran (a git pull or checkout in this checkout): said as the run ends."""
    from papa.fingerprint import changed_notice

    if notice := changed_notice(code_changed_under_run()):
        logger.warning(notice)


def prune_stale(log):
    """Rule prune: remove `stale_grid_files` (and the folders they leave empty), listed in ``log``."""
    n = len(records.remove_files(stale_grid_files(), under=R, log=log))
    # on stderr: Snakemake's logger prints a run block's lines neither on the console nor in its own log
    print(f"make prune: removed {n} file(s) of runs this config does not make (listed in {log})", file=sys.stderr)


def of_this_config(path):
    """Whether an output path under R is one this config makes (papa.layout.of_config): its tables and figures, a
    probe or lambda file of its grid (`grid_files`), or another stage's file naming its models, datasets and built
    sources."""
    return layout.of_config(path, R, finals=final_targets(), grid=grid_files(), models=config["models"],
                            built_models=BUILT_MODELS, datasets=config["datasets"], sources=BUILD_DATA)  # fmt: skip


@functools.lru_cache(maxsize=None)
def final_targets():
    """The targets of rule all (the tables and figures of this config's probes, its MLM table), as text."""
    final = [*rules.aggregate.output, *rules.plot.output] if runs() else []
    return tuple(str(f) for f in [*final, *(rules.mlm_table.output if mlm_files() else [])])


def lost_targets():
    """The outputs a job that had to run again lost by failing or being killed, while the outputs made from their
    earlier versions still stand, that this config makes (papa.records.lost_targets, which says each): asked for
    again by rule all, so that job and every job after it reruns."""
    return records.lost_targets(R, of_this_config, logger.warning)


def constant_kinds_rows():
    """The constants specs of constant_kinds.parquet, in row order (papa.spec.constant_kinds_rows; used by rule
    aggregate)."""
    return spec.constant_kinds_rows(ANALYSES["constant_kinds"], ANALYSES["cross_corpus"])


def drawn_constants():
    """The constant-matrix files the probes use untrained, by path, each with what it holds
    (papa.layout.drawn_constants); rule plot draws their representative heads."""
    return layout.drawn_constants(R, runs(), config["tasks"])


# what each wildcard matches: the fields of papa.layout's templates (the rules narrow some: kind, constants, model)
wildcard_constraints:
    model=layout.FIELDS["model"],
    dataset=layout.FIELDS["dataset"],
    task=layout.FIELDS["task"],
    split=layout.FIELDS["split"],
    n=layout.FIELDS["n"],
    fraction_dynamic=layout.FIELDS["fraction_dynamic"],
    constants=layout.FIELDS["constants"],
    seed=layout.FIELDS["seed"],
    kind=layout.FIELDS["kind"],
    selection=layout.FIELDS["selection"],
