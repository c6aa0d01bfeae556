"""The pipeline's stages: one typed stage config and one function per Snakemake rule.

Each rule's script is one call, ``fn(XStage.from_snakemake(snakemake))``; a notebook builds
the stage config itself (or calls the older functions kept as aliases: `tokenize_split`,
`make_constants`, `run_lambda`, `run_probes`, `run_mlm`). Each function reads files, calls the
library, and writes its outputs atomically, so an interrupted job never leaves a file that
looks finished. Usable without Snakemake.

| rule | stage config | function |
| --- | --- | --- |
| build_data | `BuildDataStage` | `build_data` |
| build_model | `BuildModelStage` | `build_model` |
| prepare_data | `PrepareDataStage` | `prepare_data` |
| tokenize | `TokenizeStage` | `tokenize` |
| average_attention, data_free_constants | `AverageStage` | `average_constants` |
| learn_lambda | `LambdaStage` | `learn_lambda` |
| probe, probe_trained | `ProbeStage` | `probe_heads` |
| mlm | `MLMStage` | `mlm_curves` |
| patterns, aggregate, plot, mlm_table | see the end of the module | |
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import platform
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from . import io, models, spec
from .checks import STAGE_DEFAULTS, TRAINER_DEFAULTS
from .constants import ConstantAttention, average_attention, data_free
from .encoding import (
    IGNORE,
    Encoded,
    WordWithoutPiece,
    encode,
    separator_positions,
    stream_tokens,
    token_meta,
)
from .metrics import CLASS_METRICS, check_metrics
from .models import (
    cuda_matmul_precision,
    hub_commit,
    load_encoder,
    load_mlm_encoder,
    model_release,
    model_revision,
    model_shape,
    resolve_model_path,
    split_revision,
)
from .patching import patch
from .probe import (
    AUTHORS_DROPOUT,
    PAPER_HPARAMS,
    TrainConfig,
    cache_nbytes,
    classes_present,
    learn_lambdas,
    prepare_features,
    probe_dropout,
    run_probe,
)
from .selection import head_order, select_static
from .spec import DATA_FREE, ConstantsSpec, is_partial, needs_lambdas  # noqa: F401
from .unpad import MAX_REAL_SHARE, dense_on_real_tokens

log = logging.getLogger("papa")

# DATA_FREE: imported from papa.spec above (papa.pipeline.DATA_FREE is kept for notebooks).


def setup(log_path: str | None = None, threads: int | None = None, seed: int = 0) -> None:
    """Log to ``log_path`` (and stderr), set torch threads, seed everything.

    In a Slurm batch job (``SLURM_JOB_ID`` set, stderr not a terminal) with a log file, not to stderr as well:
    stderr is the job's Slurm log, and the Slurm profile's ``show-failed-logs`` prints both logs of a failed
    job, so every line came twice (thousands for a long probe). An interactive allocation's terminal keeps it."""
    in_slurm_job = bool(log_path and os.environ.get("SLURM_JOB_ID") and not sys.stderr.isatty())
    line = "%(asctime)s %(name)s %(levelname)s %(message)s"
    handlers = [] if in_slurm_job else [logging.StreamHandler(sys.stderr)]
    for h in handlers:  # what only the job's log file keeps (a user error's traceback: `_user_errors`)
        h.addFilter(lambda record: not getattr(record, "log_file_only", False))
        if log_path:  # jobs side by side write to one console: each line says whose it is (its log file does not)
            h.setFormatter(logging.Formatter(line.replace("%(name)s", f"[{job_tag(log_path)}] %(name)s")))
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        # UTF-8 whatever the locale: under a Latin-1 or ASCII one (LANG=C with PYTHONUTF8=0) a line with a label,
        # path or text it cannot encode was dropped from the log ("--- Logging error ---"), others written in it
        handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    logging.basicConfig(level=logging.INFO, format=line, handlers=handlers, force=True)
    if log_path:  # warnings (papa's own, torch's, a deprecation) go to the job's log, not to stderr alone
        logging.captureWarnings(True)
        warned = logging.getLogger("py.warnings")  # its text ends with a newline: a blank line in the log
        if not any(isinstance(f, _StripMessage) for f in warned.filters):
            warned.addFilter(_StripMessage())

    def excepthook(kind, value, tb):  # failures land in the job's log too
        if issubclass(kind, KeyboardInterrupt):  # Ctrl-C of a local run: a stop (`_log_job_end`), no failure
            _JOB["interrupted"] = True
            return
        _JOB["failed"] = True
        if issubclass(kind, _user_errors()):  # its message says what to change: papa's code path is noise there
            log.error("stage failed: %s: %s", kind.__name__, value)
            log.info("where it was raised (for a bug report)", exc_info=(kind, value, tb),
                     extra={"log_file_only": True})  # fmt: skip
        else:
            log.error("stage failed", exc_info=(kind, value, tb))

    sys.excepthook = excepthook
    if log_path:  # a workflow job: transformers' bars ("Loading weights") would fill a Slurm log with \r lines
        if "transformers" in sys.modules:
            from transformers.utils import logging as tf_logging

            tf_logging.disable_progress_bar()
        else:  # read when transformers is imported: importing it here cost 0.9 s in jobs that load no model
            os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
            if "huggingface_hub" in sys.modules:  # imported already (by datasets): it read the variable then
                from huggingface_hub.utils import disable_progress_bars

                disable_progress_bars()
    if threads:
        torch.set_num_threads(int(threads))
    io.seed_everything(seed)


class _StripMessage(logging.Filter):
    """Strip a record's trailing newline (a captured warning's)."""

    def filter(self, record):
        if isinstance(record.msg, str):
            record.msg = record.msg.rstrip()
        return True


def job_tag(log_path: str) -> str:
    """A workflow job's name on a shared console: its log's path under the results' ``logs/`` folder, without
    ``.log`` (``probe/minilm/rt_sentiment/average/lambda/fraction_dynamic=0.0625``); a log elsewhere, its name."""
    parts = Path(log_path).with_suffix("").parts
    if "logs" in parts[:-1]:
        parts = parts[len(parts) - parts[::-1].index("logs") :]
    else:
        parts = parts[-1:]
    return "/".join(parts)


def _usage() -> str:
    """What the job used so far, for its last log line: CPU seconds (the process's, its imports included, so a short
    job's exceed its stage's wall time) and peak resident memory (its own and its child processes'), and the peak
    CUDA memory torch allocated. Snakemake's benchmark file samples a job every
    0.5 s for 15 s, then every 30 s, so a job of a few minutes reads low there."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    said = f"CPU {cpu:.1f} s, peak memory {max(own.ru_maxrss, children.ru_maxrss) * unit / 2**30:.2f} GiB"
    try:  # after a CUDA error the device may refuse even this: the job's end line (and its kept log) come first
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            said += f", peak CUDA memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB"
    except Exception:  # noqa: BLE001 - any CUDA error
        pass
    return said


def _user_errors() -> tuple[type, ...]:
    """The errors of bad input whose message names what to change (data, model, lengths): a job logs them without
    a traceback on the console (Snakemake's, a terminal); its log file keeps where it was raised. (The config's
    errors come before any job, from `papa.checks`, which no job's code reaches: its edits rerun no job.)"""
    from .data.errors import TaskSpecError
    from .patching.kernels import SequenceLengthMismatch

    return TaskSpecError, models.UnsupportedModelError, SequenceLengthMismatch, io.UnreadableFileError


#: The running job's stage and start (`Stage.from_snakemake`), and whether it failed or a Ctrl-C (SIGINT's
#: KeyboardInterrupt) stopped it (`setup`'s excepthook).
_JOB: dict = {"failed": False}


def _log_job_end() -> None:
    """At exit of a workflow job: how long its stage took; for one that failed (its error above) or that a signal
    stopped (Slurm's time limit, a cancel: `papa.io.STOPPED_BY`; a Ctrl-C), that, and where its log is kept
    (`unfinished_log_path`): Snakemake removes a job's log before every attempt, so the Slurm profile's retry (or a
    rerun after a fix) erased why this attempt stopped."""
    if "stage" not in _JOB:
        return
    seconds = time.monotonic() - _JOB["t0"]
    stopped_by = io.STOPPED_BY[0] if io.STOPPED_BY else 2 if _JOB.get("interrupted") else None  # 2: SIGINT
    if not stopped_by and not _JOB["failed"]:
        log.info("%s finished in %.1f s (%s)", _JOB["stage"], seconds, _usage())
        return
    kept = unfinished_log_path(_JOB["log"]) if _JOB.get("log") else None
    also = f"; this log is kept as {kept} (Snakemake removes a job's log before its next attempt)" if kept else ""
    if stopped_by:
        # a job with several outputs may have written some (each is written whole, atomically): Snakemake keeps those
        # marked incomplete, so a run without --rerun-incomplete stops on them
        log.error("%s stopped by signal %d after %.1f s (%s): it did not finish (an output it wrote before the stop "
                  "stays marked incomplete: rerun with --rerun-incomplete)%s", _JOB["stage"], stopped_by, seconds,
                  _usage(), also)  # fmt: skip
    elif kept:
        log.error("%s failed after %.1f s (%s)%s", _JOB["stage"], seconds, _usage(), also)
    if kept:
        import shutil

        try:
            with io.writes_after_stop(), io.atomic_path(kept) as tmp:  # a copy cut short is no copy
                shutil.copyfile(_JOB["log"], tmp)
        except OSError as e:  # the job has failed already: say so, and fail nothing more
            log.error("could not keep this log as %s: %s", kept, e)


def unfinished_log_path(log_path: str) -> str:
    """Where the log of a workflow job's attempt that did not finish is kept: ``<log>.unfinished-<k>``, the first
    ``k`` (1, 2, ...) not taken, so every failed attempt's log stays beside the job's log."""
    k = 1
    while os.path.lexists(f"{log_path}.unfinished-{k}"):
        k += 1
    return f"{log_path}.unfinished-{k}"


# ----------------------------------------------------------------------------- stage configs


@dataclass(kw_only=True)
class Stage:
    """Base of the typed stage configs: one dataclass per stage (a Snakemake rule), holding
    every input path, output path and setting the stage reads, so the stage function takes
    one argument. ``log``, ``threads`` and ``seed`` are the job's logging, torch threads and
    global seed (`setup`).

    A subclass implements ``_from_snakemake(sm) -> dict`` (its own fields, read from the
    job's ``input``, ``output``, ``params`` and ``wildcards``); `from_snakemake` adds the job's
    log, threads, ``code`` (the rule's code fingerprint, `papa.fingerprint`) and ``inputs`` (every
    input file of the job), all recorded with the outputs, and sets the job up. Notebooks construct
    stage configs directly.
    """

    log: str | None = None
    threads: int | None = None
    seed: int = 0
    code: str | None = None
    inputs: tuple[str, ...] = ()

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        raise NotImplementedError(f"{cls.__name__} cannot be built from a Snakemake job")

    @classmethod
    def _job_fields(cls, sm) -> dict:
        """The fields every job of this kind of stage sets alike (its log, threads and code fingerprint)."""
        return {
            "log": sm.log[0] if len(sm.log) else None,
            "threads": sm.threads,
            "code": getattr(sm.params, "code", None),
            "inputs": tuple(str(f) for f in getattr(sm, "input", ())),
        }

    @classmethod
    def from_snakemake(cls, sm):
        """The stage config of a running Snakemake job (``snakemake`` in a script); logging, torch
        threads and seeds are set up before it returns."""
        job = cls._job_fields(sm)
        if "stage" not in _JOB:
            import atexit

            atexit.register(_log_job_end)
            # the whole job, not only a probe's feature block: Slurm's time limit on an averaging, lambda or MLM job
            # left its log ending mid-run, like a job still running (and a closed terminal: SIGHUP); before the
            # logging's set-up, so that a stop during it is logged and its log kept too (review DE, 750f187)
            io.stop_on_signals(final=True)
        _JOB.update(stage=cls.__name__, t0=time.monotonic(), log=job["log"])
        # logging first: a job whose inputs or settings `_from_snakemake` or the stage config refuses logs why (and
        # keeps that log, `_log_job_end`); before, its error went to Snakemake's console only
        setup(job["log"], job["threads"])
        rule = getattr(sm, "rule", None)
        wildcards = ", ".join(f"{k}={v}" for k, v in getattr(sm, "wildcards", {}).items())  # which job of the rule
        which = f" (rule {rule}{': ' + wildcards if wildcards else ''})" if rule else ""
        header = f"{cls.__name__}{which}: {len(job['inputs'])} input file(s), {job['threads'] or 0} thread(s)"
        try:
            stage = cls(**{**job, **cls._from_snakemake(sm)})
        except BaseException:  # refused as it is built: its log says which job before the error (`setup`'s hook)
            log.info("%s", header)
            raise
        io.seed_everything(stage.seed)
        log.info("%s, seed %d", header, stage.seed)
        if stage.inputs:  # the paths, in the log file (a probe reads dozens: the console has the job's tag)
            log.info("inputs: %s", ", ".join(stage.inputs), extra={"log_file_only": True})
        env = stage._environment = io.environment()  # read once: recorded with the outputs too (`job_record`)
        source = env["papa_source"]
        commit = f" (commit {source['commit'][:12]}{', dirty' if source['dirty'] else ''})" if source else ""
        slurm = f", Slurm job {os.environ['SLURM_JOB_ID']}" if os.environ.get("SLURM_JOB_ID") else ""  # sacct, seff
        kernels = " ".join([env["cpu_capability"] or "?", *(f"{k}={v}" for k, v in env["kernel_env"].items())])
        # CUDA as torch sees it, not a GPU's name: reading that initialises CUDA, in a job that may use none (its
        # records name the device it computed on, `job_record`)
        cuda = f"CUDA {env['cuda']}" if env["cuda"] else f"ROCm {env['hip']}" if env.get("hip") else "no CUDA"
        log.info("on %s%s (%s, %s kernels, %s), python %s, torch %s, transformers %s, papa %s%s",
                 platform.node() or "?", slurm, env["cpu"] or "?", kernels, cuda, env["python"], env["torch"],
                 env["transformers"], env["papa"], commit)  # fmt: skip
        check_gpu_granted(sm, env)
        return stage

    def job_record(self, *, device=None) -> dict:
        """What every output of the job records besides its own settings: the environment
        (`papa.io.environment`: versions, device, threads, the checkout's commit), the digest of every
        input file (`papa.io.input_digests`) and, for a stage that loads a model, the release of an offline
        alias's weights (`papa.models.model_release`). ``device``: the one the stage computed on (a model
        stage's model's; None: the CPU, where every stage that runs no model computes, data-free matrices too)."""
        # a workflow job's as read at its start (`from_snakemake`); a stage a notebook built reads it now. The device
        # now: at the job's start no model had run, and a job that uses no GPU initialises no CUDA to name one. None
        # is the CPU, not the CUDA device torch has initialised (`papa.io.device_name`'s guess): in a notebook that ran
        # a model on the GPU, an aggregate, a plot or data-free matrices computed on the CPU recorded that GPU
        device = io.device_name("cpu" if device is None else device)
        env = {**(getattr(self, "_environment", None) or io.environment()), "device": device}
        record = {"environment": env, "inputs": io.input_digests(self.inputs)}
        if isinstance(getattr(self, "model", None), str):
            record["model_release"] = model_release(self.model)
        return record

    def provenance(self, *, device=None, **extra) -> dict:
        """What decided this stage's outputs, recorded next to them (`papa.io.write_parquet`,
        `papa.io.read_provenance`): the stage, its settings (every input, output and parameter:
        the dataclass's fields, the code fingerprint among them), `job_record` (of ``device``) and ``extra``."""
        return {"stage": type(self).__name__, "settings": asdict(self), **self.job_record(device=device), **extra}


@dataclass(kw_only=True)
class ModelStage(Stage):
    """A stage that runs the encoder. ``precision``: CUDA's float32 matrix products while it runs
    (config ``precision``, `papa.models.PRECISIONS`: ``fp32`` or ``tf32``; `runs_model`)."""

    precision: str = "fp32"

    @classmethod
    def _job_fields(cls, sm) -> dict:
        # a rule whose param is None (data_free_constants: no model runs) keeps the default
        precision = getattr(sm.params, "precision", None)
        return {**super()._job_fields(sm), **({"precision": precision} if precision else {})}


def runs_model(stage_fn):
    """A `ModelStage` function, run under its stage's ``precision`` (`papa.models.cuda_matmul_precision`)."""

    @functools.wraps(stage_fn)
    def run(stage, *args, **kwargs):
        with cuda_matmul_precision(stage.precision):
            return stage_fn(stage, *args, **kwargs)

    return run


@contextlib.contextmanager
def real_tokens_only(m, compile: str = "eager"):
    """`papa.unpad.dense_on_real_tokens` for a stage's model (on the CPU; off under ``torch.compile``),
    logging the share of the padded positions its dense layers computed."""
    with dense_on_real_tokens(m, enabled=None if compile == "eager" else False) as rows:
        yield rows
    if rows.enabled and rows.positions:
        log.info("dense layers computed %.0f%% of the padded positions (the real tokens; a batch over %.0f%% real "
                 "ran padded)", 100 * rows.fraction, 100 * MAX_REAL_SHARE)  # fmt: skip


# ----------------------------------------------------------------------------- data


@dataclass(kw_only=True)
class BuildDataStage(Stage):
    """Rule ``build_data``: GLUE/CoNLL-shaped local files from the offline package corpora
    (`papa.rehearsal.build_data`).

    Attributes:
        shape: a key of `papa.rehearsal.SHAPES` (``cola``, ``sst2``, ``mrpc``, ``mnli``,
            ``conll2003``, ``wikitext``).
        out: the folder written.
        n_train, n_validation: examples (sentences for ``conll2003``) per split.
        seed: also seeds the draws and pairings.
    """

    shape: str
    out: str
    n_train: int
    n_validation: int

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        build = sm.params.build
        return dict(
            shape=build["shape"],
            out=sm.output[0],
            n_train=int(build["n_train"]),
            n_validation=int(build["n_validation"]),
            seed=int(build["seed"]),
        )


def build_data(stage: BuildDataStage) -> dict[str, Path]:
    """Write the files of ``stage.shape``; return split -> path."""
    from . import rehearsal

    files = rehearsal.build_data(
        stage.shape, stage.out, stage.n_train, stage.n_validation, stage.seed, record=stage.provenance()
    )
    log.info("built %s-shaped files: %s", stage.shape, ", ".join(f"{s} {Path(p).name}" for s, p in files.items()))
    return files


@dataclass(kw_only=True)
class BuildModelStage(Stage):
    """Rule ``build_model``: a tiny randomly initialised model and its tokenizer
    (`papa.rehearsal.build_model`).

    Attributes:
        family: ``bert``, ``roberta``, ``deberta`` (v1) or ``electra`` (discriminator).
        out: the model's folder.
        config: transformers config overrides (None = `papa.rehearsal.TINY`).
        vocab_size: size of the trained byte-level BPE (RoBERTa, DeBERTa); None for BERT and ELECTRA,
            whose tokenizer is MiniLM's (`papa.rehearsal.build_settings`).
        seed: also seeds the weights.
    """

    family: str
    out: str
    config: dict | None
    vocab_size: int | None = None

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        build = sm.params.build
        config = build.get("config")  # optional: none = papa.rehearsal.TINY
        return dict(
            family=build["family"],
            out=sm.output[0],
            config=None if config is None else dict(config),
            vocab_size=None if build.get("vocab_size") is None else int(build["vocab_size"]),
            seed=int(build["seed"]),
        )


def build_model(stage: BuildModelStage) -> Path:
    """Build the model into ``stage.out``; return the folder."""
    from . import rehearsal

    sized = {} if stage.vocab_size is None else {"vocab_size": stage.vocab_size}  # else build_model's default
    folder = rehearsal.build_model(
        stage.family, stage.out, stage.config, stage.seed, record=stage.provenance(), **sized
    )
    log.info("built a tiny randomly initialised %s model (seed %d) in %s", stage.family, stage.seed, folder)
    return folder


@dataclass(kw_only=True)
class PrepareDataStage(Stage):
    """Rule ``prepare_data``: one split of a dataset, loaded (`papa.data.load_task`) and saved as a Parquet file
    that describes itself (`papa.data.TaskData.save_split`); or, with no ``split``, the whole dataset as one
    Parquet per split plus ``meta.json`` (`papa.data.TaskData.save`).

    Attributes:
        spec: the dataset's `papa.data` spec (its config entry with its ``name``; the workflow's leaves out the
            other split's subsample key, `papa.data.split_spec`).
        out_dir: the folder written.
        seed: seeds subsampling and the validation split.
        split: the one split written (``out_dir/<split>.parquet``); None = all of `papa.spec.PREPARED_SPLITS`.
    """

    spec: dict
    out_dir: str
    split: str | None = None

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        from .data.hub import ACCESS_KEYS

        spec = dict(sm.params.spec)
        # how to reach the hub (timeout, cache folder): from the config, not a param, since it changes no data
        # (the entry of the config key, the job's wildcard: the spec's name may differ, a "name:" of the entry)
        spec.update({k: v for k, v in sm.config["datasets"][sm.wildcards.dataset].items() if k in ACCESS_KEYS})
        out = Path(sm.output[0])
        return dict(spec=spec, out_dir=str(out.parent), split=out.stem, seed=int(sm.params.seed))

    @classmethod
    def from_snakemake(cls, sm):
        stage = super().from_snakemake(sm)
        # the metrics of the tasks that read this dataset, checked on its labels once they are read (`prepare_data`):
        # one that does not fit labels a local file gave failed in the lambda or probe job, after tokenization and
        # averaging (hours at paper scale). From the config, not a param: a check, no setting of the data (a metric
        # changed later reruns nothing here; the lambda and probe jobs check again)
        dataset = sm.wildcards.dataset
        tasks = sm.config.get("tasks") or {}
        stage._task_metrics = {t: list(tc["metrics"]) for t, tc in tasks.items() if tc.get("dataset") == dataset}
        stage._dataset_key = dataset  # what its errors name: datasets.<key>
        return stage


def prepare_data(stage: PrepareDataStage):
    """Load the dataset and save ``stage.split`` (or every prepared split) into ``stage.out_dir``; return the
    `papa.data.TaskData` of what was written. Downloads are cached in `papa.data.default_cache_dir` (``$PAPA_CACHE``,
    else ``$XDG_CACHE_HOME/papa``, else ``~/.cache/papa``)."""
    from .data import load_task, split_provenance

    if stage.split is not None and stage.split not in spec.PREPARED_SPLITS:
        raise ValueError(f"unknown split {stage.split!r}; the prepared splits are {', '.join(spec.PREPARED_SPLITS)}")
    from .data.errors import TaskSpecError

    # the metrics of its tasks where the workflow gave them: the inferred labels' positive-class warning only where
    # one scores binary f1 (a notebook's stage: whenever labels were inferred so)
    scored = getattr(stage, "_task_metrics", None)
    try:
        task = load_task(dict(stage.spec), None, seed=stage.seed,
                         metrics=None if scored is None else [m for ms in scored.values() for m in ms])  # fmt: skip
    except TaskSpecError as e:  # the config entry to change: the workflow's key (a spec's name may differ)
        raise TaskSpecError(f"datasets.{getattr(stage, '_dataset_key', None) or stage.spec.get('name')}: {e}") from e
    # the splits rule prepare_data declares: a test split (CoNLL-2003, a local "test" file) or MNLI's
    # validation_matched would be files Snakemake does not track, never cleaned and stale once the spec drops them
    # (their sizes stay in the provenance, split_sizes)
    keep = (stage.split,) if stage.split else spec.PREPARED_SPLITS
    task = replace(task, splits={s: task.splits[s] for s in keep})
    if task.labeled:  # an unlabeled corpus has no metric to check (its tasks' jobs say so)
        for name, metrics in getattr(stage, "_task_metrics", {}).items():
            check_task_metrics(name, metrics, task.kind, task.label_names)
        if "validation" in task.splits:
            check_scored_classes(task, getattr(stage, "_task_metrics", {}), getattr(stage, "_dataset_key", None))
    prov = task.provenance
    # a subsampled split's size before (max_train, max_validation); rows dropped are the whole source's, before the
    # splits (they read as the split's)
    before = ((prov.get("split") or {}).get("subsample") or {}).get("sizes_before") or {}
    sizes = [
        f"{s} {n} rows" + (f" (drawn from {before[s]})" if before.get(s, n) != n else "") for s, n in task.sizes.items()
    ]
    of = f"of the source's {prov['n_raw']} rows, " if isinstance(prov.get("n_raw"), int) else ""
    log.info(
        "%s (%s, %s): %s; labels %s%s%s",
        task.name,
        task.kind,
        prov.get("source", "?"),
        ", ".join(sizes),
        task.label_names or "none (unlabeled)",
        f" ({prov['label_names_source']})" if prov.get("label_names_source") else "",
        f"; {of}{prov['n_dropped']} dropped ({prov.get('dropped_reason')})" if prov.get("n_dropped") else "",
    )
    out_dir = Path(stage.out_dir)
    if stage.split is None:
        task.save(out_dir)
        return task
    # what wrote the split, beside where its data came from: the code fingerprint, the versions (numpy's draws
    # decide the subsample), the local files read
    # of the other prepared split, only what its own file records (its size here is before its subsample)
    task = replace(task, provenance=split_provenance(task.provenance, stage.split))
    task.provenance.update(code=stage.code, **stage.job_record())
    task.save_split(stage.split, out_dir / f"{stage.split}.parquet")  # described by itself, over an old meta.json
    return task


# ----------------------------------------------------------------------------- tokens


def load_tokenizer(model: str):
    """`papa.models.load_tokenizer` (kept here for notebooks)."""
    return models.load_tokenizer(model)


# Token files own their I/O next to `Encoded` (papa.encoding). Kept here for notebooks: `token_meta`
# and `stream_tokens` (imported above from papa.encoding) and these two:


def write_tokens(enc: Encoded, path, meta: dict | None = None) -> None:
    """Replaced by ``enc.save(path, meta)`` (`papa.Encoded.save`); kept for notebooks, its keywords included."""
    enc.save(path, meta)


def read_tokens(path) -> Encoded:
    """Replaced by ``papa.Encoded.load(path)``; kept for notebooks."""
    return Encoded.load(path)


@dataclass(kw_only=True)
class TokenizeStage(Stage):
    """Rule ``tokenize``: one split of a prepared dataset -> a token file (`Encoded.save`).

    Attributes:
        model: whose tokenizer (hub id, folder, alias).
        data_dir: the prepared dataset (a `papa.data.TaskData.save` folder).
        split: ``train`` or ``validation``.
        max_length: N.
        layout: ``papa`` (final separator at N-1) or ``standard``.
        out: the token file written.
        encoding: keyword options of `papa.encode` (``single_cap``, ``pair_segments``; the
            config's ``encoding`` section, those that reach the dataset: `papa.checks.encoding_options`);
            empty = the paper's App. A behaviour.
        input_shape: ``pair``, ``single`` or ``token``, as the config tells it
            (`papa.checks.input_shape`, which decided ``encoding``); the split must hold that (None: not checked).
    """

    model: str
    data_dir: str
    split: str
    max_length: int
    layout: str
    out: str
    encoding: dict[str, str]
    input_shape: str | None = None

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        return dict(
            model=sm.params.model,
            data_dir=str(Path(sm.input.split).parent),
            split=sm.wildcards.split,
            max_length=int(sm.wildcards.n),
            layout=sm.params.layout,
            out=sm.output[0],
            encoding=dict(sm.params.encoding),
            input_shape=sm.params.input_shape,
        )


def _check_shape(stage: TokenizeStage, dataset: str, shape: str) -> None:
    """The split holds what the config said (the encoding options it passes depend on it), or an error."""
    if stage.input_shape is not None and shape != stage.input_shape:
        raise ValueError(
            f"dataset {dataset!r} holds {shape} inputs, but its config entry describes {stage.input_shape} ones, "
            f"so its encoding options were chosen for those (papa.checks.input_shape): set its text_b_column (pairs) "
            f"or kind to what the data are"
        )


def tokenize(stage: TokenizeStage) -> Encoded:
    """Tokenize one split of a prepared dataset into ``stage.out``; return the `Encoded` split."""
    from .data import TaskData

    task = TaskData.read(stage.data_dir, [stage.split])  # its split only: the other splits are no input of the job
    df = task.splits[stage.split]
    if len(df) == 0:
        raise ValueError(f"Split {stage.split!r} of dataset {task.name!r} is empty: check its source or max_* "
                         f"settings")  # fmt: skip
    tok = load_tokenizer(stage.model)
    opts = dict(stage.encoding)
    N, layout = stage.max_length, stage.layout
    t0 = time.monotonic()
    if task.kind == "token":
        _check_shape(stage, task.name, "token")
        try:
            enc = encode(
                tok,
                [list(t) for t in df["tokens"]],
                max_length=N,
                layout=layout,
                labels=[list(t) for t in df["tags"]],
                **opts,
            )
        except WordWithoutPiece as e:  # where it is in the data: the row's id, not its place in the prepared split
            where = f"row id {df['id'].iloc[e.example]!r}" if "id" in df else f"example {e.example}"
            raise ValueError(f"the {stage.split} split of dataset {task.name!r}, {where} (its sentence's word "
                             f"{e.word + 1}, {e.text!r}) {e.reason}") from None  # fmt: skip
    else:
        pairs = None
        if "text_b" in df and df["text_b"].notna().any():
            pairs = df["text_b"].fillna("").tolist()
        labels = df["label"].tolist() if "label" in df and (df["label"] >= 0).any() else None
        _check_shape(stage, task.name, "pair" if pairs is not None else "single")
        enc = encode(tok, df["text"].tolist(), pairs=pairs, max_length=N, layout=layout, labels=labels, **opts)
    seconds = time.monotonic() - t0
    lost = ""
    if task.kind == "token":  # the words a cut sentence loses are not scored (each scored word: its first piece)
        words = int(sum(int((np.asarray(t) != IGNORE).sum()) for t in df["tags"]))
        cut = words - int((np.asarray(enc.labels) != IGNORE).sum())
        lost = f", {cut} of {words} words cut off at N unscored ({100 * cut / max(words, 1):.2f}%)"
    log.info(
        "tokenized %s/%s: %d examples at N=%d, %d truncated (%.2f%%)%s, in %.1f s (%.0f examples/s)",
        task.name,
        stage.split,
        len(enc),
        N,
        enc.n_truncated,
        100 * enc.n_truncated / len(enc),
        lost,
        seconds,
        len(enc) / max(seconds, 1e-9),
    )
    enc.save(
        stage.out,
        {
            "model": stage.model,
            "dataset": task.name,
            "split": stage.split,
            "kind": task.kind,
            "label_names": task.label_names,
            "code": stage.code,  # the fingerprint of the papa code that wrote it
            "model_revision": hub_commit(stage.model),  # the tokenizer's hub commit (None: a folder, an alias)
            "data": task.provenance,  # the split's: source, sha256, seed, spec
            **stage.job_record(),  # the tokenizer's transformers version among the environment's
        },
    )
    return enc


def tokenize_split(
    model: str, data_dir, split: str, max_length: int, layout: str, out, encoding: dict | None = None
) -> Encoded:
    """Tokenize one split of a prepared dataset (a `papa.data.TaskData.save` folder).

    Kept for notebooks: builds a `TokenizeStage` and calls `tokenize`, which replaced it.
    ``encoding``: options of `papa.encode`; none = the paper's App. A behaviour.
    """
    return tokenize(
        TokenizeStage(
            model=model,
            data_dir=str(data_dir),
            split=split,
            max_length=int(max_length),
            layout=layout,
            out=str(out),
            encoding=dict(encoding or {}),
        )
    )


# ----------------------------------------------------------------------------- constants


@dataclass(kw_only=True)
class AverageStage(ModelStage):
    """Rules ``average_attention`` and ``data_free_constants``: the constant matrices of one (model, corpus, N, kind).

    Attributes:
        model: what `papa.load_encoder` loads (hub id, folder, alias).
        kind: one of `papa.spec.CONSTANT_KINDS` (a ``_trained`` spec gives the same matrices).
        tokens: the corpus's token file (its train split); its N is the matrices' N. A data-free kind
            reads it for N alone, or takes ``max_length`` instead (rule ``data_free_constants``: the
            path's N, so that an edit to the corpus reruns no data-free matrix).
        out: the ``.safetensors`` file written (`ConstantAttention.save`).
        corpus: the corpus's name, recorded in the file's metadata.
        batch_size: examples per forward pass (config ``averaging.batch_size``; its default is
            the schema's, which tests/test_spec.py holds equal); unused by data-free kinds.
        max_examples: average over a random subset of this many examples drawn with ``seed`` (the
            config's top-level seed), in file order; None = every example.
    """

    model: str
    kind: str
    tokens: str | None = None
    out: str
    corpus: str = ""
    batch_size: int | None = 32
    max_examples: int | None = None
    max_length: int | None = None

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        tokens = getattr(sm.input, "tokens", None)  # data_free_constants: none, the path's N
        return dict(
            model=sm.params.model,
            kind=sm.wildcards.kind,
            tokens=tokens,
            max_length=None if tokens else int(sm.wildcards.n),
            out=sm.output[0],
            corpus=sm.wildcards.dataset,
            batch_size=sm.params.batch_size,
            max_examples=sm.params.max_examples,
            seed=int(sm.params.seed) if sm.params.seed is not None else 0,  # data-free kinds: none
        )


def _corpus_size(stage: AverageStage, spec: ConstantsSpec) -> tuple[dict | None, int, int]:
    """The token file's metadata, its rows and its N; a data-free kind without a token file: (None, 0,
    ``max_length``)."""
    if stage.tokens is None:
        if not spec.data_free:
            raise ValueError(f"averaging {spec.kind!r} matrices needs the corpus's token file (AverageStage.tokens)")
        if not io.is_integer(stage.max_length) or stage.max_length < 1:
            raise ValueError(f"data-free {spec.kind!r} matrices need their N: give AverageStage a token file or "
                             f"max_length (a positive integer), got {stage.max_length!r}")  # fmt: skip
        return None, 0, int(stage.max_length)
    meta = token_meta(stage.tokens)
    N = int(meta["max_length"])
    if stage.max_length is not None and stage.max_length != N:
        raise ValueError(f"AverageStage: max_length {stage.max_length} but {stage.tokens} holds N={N}: give one of "
                         f"them")  # fmt: skip
    return meta, int(meta["n_rows"]), N


@runs_model
def average_constants(stage: AverageStage) -> ConstantAttention:
    """Average (or effective-average) attention over a tokenized corpus, or build a data-free kind.

    The corpus is streamed from ``stage.tokens`` batch by batch, so peak memory does not grow
    with its size.
    """
    spec = ConstantsSpec.parse(stage.kind)
    meta, n_rows, N = _corpus_size(stage, spec)
    if spec.data_free:
        from transformers import AutoConfig

        name, revision = split_revision(stage.model)
        cfg = AutoConfig.from_pretrained(resolve_model_path(name), revision=revision)
        L = int(getattr(cfg, "num_hidden_layers", getattr(cfg, "n_layers", 0)))
        C = data_free(spec.kind, L, int(cfg.num_attention_heads), N, metadata={"model": stage.model, "corpus": None})
        C.metadata["model_revision"] = hub_commit(stage.model)  # the config's hub commit (None: a folder, alias)
        log.info("data-free %s matrices: %d layers x %d heads at N=%d (no forward pass)", spec.kind, L,
                 int(cfg.num_attention_heads), N)  # fmt: skip
    else:
        if n_rows == 0:
            raise ValueError(f"{stage.tokens} holds no examples: the averaging corpus is empty")
        if not stage.batch_size:
            raise ValueError(f"averaging {spec.kind!r} matrices needs a batch size")
        m, tok = load_encoder(stage.model, max_length=N)
        rows = draw_rows(n_rows, stage.max_examples, np.random.default_rng(stage.seed))
        total = n_rows if rows is None else len(rows)
        batches = (b.model_inputs() for b in stream_tokens(stage.tokens, stage.batch_size, rows=rows))
        with real_tokens_only(m):
            C = average_attention(
                m,
                batches,
                kind=spec.kind,
                total=total,
                metadata={"model": stage.model, "corpus": stage.corpus, "layout": meta["layout"]},
            )
    C.metadata.update(
        {"tokens": stage.tokens and str(stage.tokens), "requested_kind": stage.kind, "code": stage.code,
         **stage.job_record(device=None if spec.data_free else next(m.parameters()).device)}
    )  # fmt: skip
    if not spec.data_free:
        C.metadata["precision"] = stage.precision  # CUDA's float32 matmuls while averaging
        # what was averaged: max_examples rows of the corpus drawn with seed, batch_size at a time
        C.metadata.update({"max_examples": stage.max_examples, "seed": stage.seed, "batch_size": stage.batch_size})
        # where the corpus's separators sit (Sec. 5.1's [SEP] columns, papa.patterns.head_patterns)
        C.metadata["separator_positions"] = separator_positions(tok, N, bool(meta.get("pair")), meta["layout"])
    C.save(stage.out)
    return C


def make_constants(
    model: str,
    kind: str,
    tokens_path,
    out,
    batch_size: int = AverageStage.batch_size,
    max_examples: int | None = None,
    corpus: str = "",
) -> ConstantAttention:
    """Average (or effective-average) attention over a tokenized corpus, or build a data-free kind.

    Kept for notebooks: builds an `AverageStage` and calls `average_constants`, which replaced it.
    """
    return average_constants(
        AverageStage(
            model=model,
            kind=kind,
            tokens=str(tokens_path),
            out=str(out),
            corpus=corpus,
            batch_size=batch_size,
            max_examples=max_examples,
        )
    )


# ----------------------------------------------------------------------------- lambda


@dataclass(frozen=True)
class TaskInfo:
    """What a probe needs to know of a task, read from its token file's metadata."""

    kind: str  # "sequence" or "token" (papa.spec.TASK_KINDS)
    label_names: list[str]

    @property
    def n_labels(self) -> int:
        return len(self.label_names)


def task_info(tokens: Encoded, task_cfg=None) -> TaskInfo:
    """The task kind and label names of tokenized task data (failing for unlabeled data). ``task_cfg``: not read
    (the token file's metadata holds the kind and labels); accepted, with a `DeprecationWarning`, for notebooks
    that passed it."""
    if task_cfg is not None:
        warnings.warn("task_info(tokens, task_cfg): task_cfg is not read (the token file holds the task's kind and "
                      "labels); call task_info(tokens)", DeprecationWarning, stacklevel=2)  # fmt: skip
    names = tokens.meta.get("label_names") or []
    if not names:
        raise ValueError(f"Task tokens have no label names (dataset {tokens.meta.get('dataset')!r} is unlabeled)")
    return TaskInfo("token" if tokens.token_level else "sequence", list(names))


def check_train_classes(train: Encoded, info: TaskInfo, block: str, task: str | None, n_before: int) -> None:
    """Fail when the train examples a probe will see (after the stage's ``max_train`` subsample
    and truncation to ``max_length``) hold fewer than two classes: `papa.load_task` checks the
    dataset's own train split, but a small ``tasks.<t>.<block>.max_train`` can still draw one class."""
    present = classes_present(train)
    if len(present) >= 2:
        return
    what = "tag" if info.kind == "token" else "label"
    found = f"one class ({info.label_names[int(present[0])]!r}" if len(present) else f"no {what} ("
    key = f"tasks.{task or '<task>'}"
    if len(train) < n_before:  # a subsample drew it
        fix = f"Raise {key}.{block}.max_train (null = every example)"
    else:  # every example is there: the data (or, for a token task, the words cut off at max_length) has one class
        fix = f"Every train example is there: check the data's {what}s" + (
            f", or raise {key}.max_length (the words past it are not scored)" if info.kind == "token" else ""
        )
    raise ValueError(
        f"the {block} stage of task {task!r} would train on {found} of {info.label_names}): its "
        f"{len(train)} train examples (drawn from {n_before}) hold no other {what}. {fix}"
    )


def train_split(
    path, max_train: int | None, seed: int, block: str, task: str | None, metrics=None
) -> tuple[Encoded, TaskInfo]:
    """The train tokens a lambda or probe stage trains on, read before its model loads: a random subset of
    ``max_train`` examples drawn with ``seed`` (`subsample`), its `task_info`, checked to hold two classes
    (`check_train_classes`, naming ``tasks.<task>.<block>.max_train``) and to fit ``metrics`` (when given:
    `papa.metrics.check_metrics` on the labels the data holds, e.g. binary ``f1`` on three labels a local file
    gave, naming ``tasks.<task>.metrics``)."""
    train = Encoded.load(path)
    n_before = len(train)
    train = subsample(train, max_train, np.random.default_rng(seed))
    info = task_info(train)
    if metrics is not None:
        check_task_metrics(task, metrics, info.kind, info.label_names)
    check_train_classes(train, info, block, task, n_before)
    return train, info


def check_scored_classes(task, task_metrics: dict, key: str | None = None) -> None:
    """A `TaskSpecError` when a sequence task's validation split, where the probes are scored, holds one class
    while a task scores it with a metric one class leaves undefined (`CLASS_METRICS`): a tiny ``max_validation``
    or a one-class validation file gave mcc 0.0 for a perfect probe, without a word."""
    df = task.splits["validation"]
    if task.kind != "sequence" or "label" not in df:
        return
    labels = df["label"][df["label"] >= 0]
    if labels.nunique() != 1:
        return
    for name, metrics in task_metrics.items():
        bad = [m for m in metrics if m in CLASS_METRICS]
        if bad:
            from .data.errors import TaskSpecError

            raise TaskSpecError(
                f"datasets.{key or task.name}: the validation split, where tasks.{name} is scored, holds one class "
                f"({task.label_names[int(labels.iloc[0])]!r}) in its {len(labels)} labelled rows: {', '.join(bad)} "
                f"{'is' if len(bad) == 1 else 'are'} not defined on one class"
                f"{' (mcc is 0.0 whatever the probe predicts)' if 'mcc' in bad else ''}; give the split rows of every "
                f"class (max_validation, validation_fraction, or another validation file), or score it with accuracy "
                f"alone"
            )


def check_task_metrics(task: str | None, metrics, kind: str, label_names) -> None:
    """`papa.metrics.check_metrics` of a task's ``metrics`` on the labels its data holds (binary ``f1`` on three
    labels a local file gave, ``entity_f1`` on tags without B-/I-), a `TaskSpecError` (a `ValueError`: a job logs
    it in one line, as the data's errors) naming ``tasks.<task>.metrics`` and the labels."""
    from .data.errors import TaskSpecError

    try:
        check_metrics(list(metrics), kind, len(label_names), label_names)
    except ValueError as e:
        names = f" ({', '.join(map(str, label_names))})" if len(label_names) else ""
        raise TaskSpecError(f"tasks.{task or '<task>'}.metrics: {e} [the task's {len(label_names)} labels{names}, "
                            f"from its data]") from None  # fmt: skip


def train_config(hp: dict, seed: int) -> TrainConfig:
    """The trainer settings of a ``probe``/``lambda`` hparams block of the config (``lr``,
    ``batch_size``, ``epochs``; where given, ``weight_decay``, ``dropout`` (a number or ``"authors"``), ``extra_lr``,
    ``max_grad_norm``: the authors clipped at 1.0, null = no clipping; ``init``: how a fresh probe
    starts, `papa.probe.PROBE_INITS`; others keep `papa.probe.TrainConfig`'s defaults)."""
    numbers = ("weight_decay", "dropout")  # floats; dropout may be "authors" (`AUTHORS_DROPOUT`: `probe_dropout`)
    optional = {k: hp[k] for k in TRAINER_DEFAULTS if k in hp and k not in numbers}
    optional.update({k: hp[k] if hp[k] == AUTHORS_DROPOUT else float(hp[k]) for k in numbers if k in hp})
    if optional.get("max_grad_norm") is not None:
        optional["max_grad_norm"] = float(optional["max_grad_norm"])
    return TrainConfig(
        lr=float(hp["lr"]), batch_size=int(hp["batch_size"]), epochs=int(hp["epochs"]), seed=seed, **optional
    )


def stage_options(hp: dict) -> dict:
    """The settings of a ``probe``/``lambda`` hparams block that a stage takes beside the
    trainer's (`train_config`): ``max_train`` and ``backbone_dropout``, where the block gives
    them; absent ones keep the stage's defaults (None: every example; False)."""
    return {k: hp[k] for k in STAGE_DEFAULTS if k in hp}


def draw_rows(n: int, max_n: int | None, rng: np.random.Generator) -> np.ndarray | None:
    """Sorted row numbers of a random subset of ``max_n`` of ``n`` examples, drawn with ``rng``;
    None (every row) when ``max_n`` is None or not smaller than ``n``. (`papa.data` subsamples
    datasets with its own, different draw; both are kept as they are, so results do not move.) A ``max_n`` that is
    no positive integer fails (0 drew every row)."""
    if max_n is not None and (not io.is_integer(max_n) or max_n < 1):
        raise ValueError(f"the number of examples to draw must be a positive integer (None: every one), got {max_n!r}")
    if max_n is None or n <= max_n:
        return None
    return np.sort(rng.permutation(n)[:max_n])


def subsample(data, max_n: int | None, rng: np.random.Generator):
    """A random subset of ``max_n`` examples of ``data`` (an `Encoded`, `draw_rows`), kept in their order; ``data``
    itself when ``max_n`` is None or not smaller. (A `papa.data.TaskData` is drawn by `papa.data.load_task`'s
    ``max_train``/``max_validation``, not here: it has no length or ``subset``.)"""
    rows = draw_rows(len(data), max_n, rng)
    return data if rows is None else data.subset(rows)


def lambda_frame(lam: torch.Tensor) -> pd.DataFrame:
    """(layer, head, lambda, rank) per head of lambdas [layers, heads]; rank 0 is replaced first."""
    L, H = lam.shape
    rank = torch.empty(L * H, dtype=torch.long)
    rank[head_order("lambda", (L, H), lam)] = torch.arange(L * H)
    return pd.DataFrame(
        {
            "layer": np.repeat(np.arange(L), H),
            "head": np.tile(np.arange(H), L),
            "lambda": lam.flatten().double().numpy(),
            "rank": rank.numpy(),
        }
    )


def lambda_summary(lam: torch.Tensor, first: int = 5) -> str:
    """A log line on learned lambdas [layers, heads]: their spread and the ``first`` heads the lambda order
    replaces first (``L<layer>H<head>``, from 0, as the tables count)."""
    df = lambda_frame(lam).sort_values("rank")
    lam64 = df["lambda"]
    top = df.head(first)
    first_heads = zip(top["layer"], top["head"], top["lambda"], strict=True)
    heads = ", ".join(f"L{layer}H{head} {value:.3f}" for layer, head, value in first_heads)
    return (f"lambdas: min {lam64.min():.3f}, median {lam64.median():.3f}, max {lam64.max():.3f}; replaced first: "
            f"{heads}")  # fmt: skip


def _dropout_run(kind: str, dropout, model) -> float | None:
    """The sequence probe's dropout as the job ran it, for its record: ``dropout: authors`` resolved by the model's
    family (`papa.probe.probe_dropout`; the hparams keep the config's word, which names no number); None for a
    token probe (it has none)."""
    return probe_dropout(dropout, model) if kind == "sequence" else None


def _label(df: pd.DataFrame, labels: dict) -> pd.DataFrame:
    """Prepend the label columns, each inserted first in turn (so the last label comes first)."""
    for k, v in labels.items():
        df.insert(0, k, v)
    return df


@dataclass(kw_only=True)
class LambdaStage(ModelStage):
    """Rule ``learn_lambda``: one lambda per head, trained with a probe (paper Sec. 3.2).

    Attributes:
        model: what `papa.load_encoder` loads.
        constants: the constant-matrix file.
        train, validation: the task's token files.
        out_lambdas: (layer, head, lambda, rank) per head (`lambda_frame`).
        out_metrics: per-epoch metrics.
        metrics: the task's metrics (`papa.spec.METRICS`).
        hparams: the trainer settings (`train_config` of ``tasks.<t>.lambda`` over ``probe``).
        max_train: train on a seeded random subset of this many examples (None = all).
        backbone_dropout: dropout inside the frozen encoder for training batches.
        compile: how the encoder runs in the loop (config ``compile``, `papa.models.COMPILE_MODES`).
        labels: columns prepended to both outputs (model, task, constants).
        seed: also seeds the subset.
    """

    model: str
    constants: str
    train: str
    validation: str
    out_lambdas: str
    out_metrics: str
    metrics: list[str]
    hparams: TrainConfig
    max_train: int | None = None
    backbone_dropout: bool = False
    compile: str = "eager"
    labels: dict[str, str]

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        hp, wc = sm.params.hp, sm.wildcards
        seed = int(hp["seed"])
        return dict(
            model=sm.params.model,
            compile=sm.params.compile,
            constants=sm.input.constants,
            train=sm.input.train,
            validation=sm.input.validation,
            out_lambdas=sm.output.lambdas,
            out_metrics=sm.output.metrics,
            metrics=list(sm.params.metrics),
            hparams=train_config(hp, seed),
            **stage_options(hp),
            seed=seed,
            labels={"model": wc.model, "task": wc.task, "constants": wc.constants},
        )


@runs_model
def learn_lambda(stage: LambdaStage) -> pd.DataFrame:
    """Learn one lambda per head with a probe; write (layer, head, lambda, rank) and per-epoch metrics."""
    task = stage.labels.get("task")
    train, info = train_split(stage.train, stage.max_train, stage.seed, "lambda", task, stage.metrics)
    val = Encoded.load(stage.validation)
    m, _ = load_encoder(stage.model, max_length=train.max_length)
    C = ConstantAttention.load(stage.constants)
    L, H = model_shape(m)
    log.info("%s: one lambda per head (%d x %d) with a probe, %d train and %d validation examples, %d epoch(s)",
             task, L, H, len(train), len(val), stage.hparams.epochs)  # fmt: skip
    with real_tokens_only(m, stage.compile):
        lam, rows = learn_lambdas(
            m,
            C,
            train,
            val,
            info.kind,
            info.n_labels,
            list(stage.metrics),
            stage.hparams,
            info.label_names,
            backbone_dropout=stage.backbone_dropout,
            compile=stage.compile,
        )
    log.info("%s", lambda_summary(lam))
    df = _label(lambda_frame(lam), stage.labels)
    df["model_revision"] = model_revision(m)  # the hub commit the weights came from (None: local)
    record = stage.provenance(
        device=next(m.parameters()).device, probe_dropout=_dropout_run(info.kind, stage.hparams.dropout, m)
    )
    io.write_parquet(df, stage.out_lambdas, record)
    io.write_parquet(_label(pd.DataFrame(rows), stage.labels), stage.out_metrics, record)
    return df


def _check_block_keys(hp: dict, block: str, known: set | None = None) -> None:
    """The notebook entry points' (`run_lambda`, `run_probes`, `run_mlm`) check of an hparams block: a key the
    config's schema does not have for that block (``lambda``/``probe``: a task's hparams; ``mlm``: the
    ``analyses.mlm`` block, its ``lambda`` block's own keys) is refused, naming the closest known one, as the
    workflow's config check does (the trainer settings read only the keys they know, so a misspelled one was dropped
    without a word). ``known``: the block's keys, where not those of ``block``'s schema definition."""
    import difflib

    from .checks import SCHEMA
    from .records import read_schema

    schema = read_schema(SCHEMA)
    # max_length: `papa.probe.PAPER_HPARAMS` gives it with each task's settings (the tokens' N, not read here)
    if known is None:
        known = set(schema["definitions"]["lambda_hparams"]["properties"]) | {"max_length"}
    if block == "probe":
        if "seed" in hp:  # the schema's block is the lambda's too: the workflow's check refuses tasks.<t>.probe.seed
            raise ValueError("probe setting 'seed' is not used: the probes' seeds are run_probes' seeds (one probe "
                             "each); order_seed seeds the random head order and the max_train draw")  # fmt: skip
        known |= {"order_seed"}
    elif block == "mlm":
        mlm = schema["properties"]["analyses"]["properties"]["mlm"]["then"]["properties"]
        known = set(mlm)
        # analyses.mlm.lambda's keys, not a task's lambda block's: its seed and max_train are the MLM block's (a
        # notebook's were dropped without a word)
        _check_block_keys(hp.get("lambda") or {}, "lambda", set(mlm["lambda"]["properties"]))
    for key in hp:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown {block} setting {key!r}{hint}; known: {', '.join(sorted(known))}")


def run_lambda(
    model: str,
    constants_path,
    train_tokens,
    val_tokens,
    task_cfg: dict,
    hp: dict,
    out_lambdas,
    out_metrics,
    labels: dict,
) -> pd.DataFrame:
    """Learn one lambda per head with a probe; write (layer, head, lambda, rank) and per-epoch metrics.

    Kept for notebooks: builds a `LambdaStage` from a task config (its ``metrics``) and an
    hparams block, and calls `learn_lambda`, which replaced it.
    """
    _check_block_keys(hp, "lambda")
    seed = int(hp.get("seed", 0))
    return learn_lambda(
        LambdaStage(
            model=model,
            constants=str(constants_path),
            train=str(train_tokens),
            validation=str(val_tokens),
            out_lambdas=str(out_lambdas),
            out_metrics=str(out_metrics),
            metrics=list(task_cfg["metrics"]),
            hparams=train_config(hp, seed),
            **stage_options(hp),
            labels=dict(labels),
            seed=seed,
        )
    )


# ----------------------------------------------------------------------------- probe


@dataclass(frozen=True)
class CacheConfig:
    """Where a probe job keeps its hidden states (the config's ``cache`` section;
    `papa.probe.prepare_features`). The defaults are the schema's (tests/test_spec.py)."""

    strategy: str = "auto"
    dtype: str = "float16"
    batch_size: int = 64
    budget_mb: float | None = 4096
    disk_budget_mb: float | None = None
    scratch: str | None = None


def check_gpu_granted(sm, env: dict) -> None:
    """A job that asks for a GPU (its rule's ``gpu`` resource) where torch sees none fails, saying why and what to
    change: it would run on the CPU while holding the GPU (`papa.models.check_device` takes the CPU where CUDA is
    absent), and paper.yaml's jobs then run into their time limits after hours (a CPU build of torch, one built
    for a newer CUDA than the node's driver, or a cluster that granted no GPU)."""
    gpus = getattr(getattr(sm, "resources", None), "gpu", 0) or 0
    try:  # a profile's or --set-resources' "1" is a request too (stop 69's left item: it was taken as none)
        gpus = float(gpus)
    except (TypeError, ValueError):  # a GPU kind ("a100"): the cluster's to grant, not counted here
        return
    # env["cuda"] (env["hip"] for a ROCm build, whose torch.cuda sees the GPU as `papa.models.check_device` uses
    # it): None where torch sees no GPU
    if not gpus > 0 or env["cuda"] or env.get("hip"):
        return
    import torch

    rule = getattr(sm, "rule", None) or "this"
    cuda = f"CUDA {torch.version.cuda}" if torch.version.cuda else "no CUDA: a CPU build"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    granted = f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
    raise RuntimeError(f"the {rule} job asks for {gpus:g} GPU(s) (its gpu resource) but torch "
                       f"{torch.__version__} ({cuda}) sees no CUDA device (torch.cuda.is_available() is False"
                       f"{granted}): it would run on the CPU while holding the GPU. Install torch built for the "
                       f"node's CUDA driver (README: The workflow on a GPU; check with srun --gpus=1 python -c "
                       f"'import torch; print(torch.cuda.is_available())'), make sure the cluster grants the GPU, "
                       f"or ask for no GPU to run it on the CPU: gpu: 0 under resources.{rule} (and under "
                       f"tasks.<t>.resources.{rule} where a task sets it), or, where the Slurm profile or the "
                       f"command line asks, PAPA_SLURM_GPUS=0 or --set-resources {rule}:gpu=0")  # fmt: skip


def job_memory_mib(sm) -> float | None:
    """The memory a Snakemake job asks for, in MiB (2^20 bytes, the unit of ``cache.budget_mb``): Snakemake's
    ``mem_mib``, else its ``mem_mb`` (10^6 bytes) converted; None without resources (a notebook's stand-in job)."""
    resources = getattr(sm, "resources", None)
    mib = getattr(resources, "mem_mib", None)
    if mib is None and getattr(resources, "mem_mb", None) is not None:
        mib = float(resources.mem_mb) * 10**6 / 2**20
    return None if mib is None else float(mib)


def job_cache_budget(budget_mb: float | None, mem_mib: float | None) -> float | None:
    """The hidden-state cache budget of a probe job that asks for ``mem_mib`` (its rule's resources, grown on a
    retry; `job_memory_mib`): ``cache.budget_mb`` (MiB, as `papa.probe.prepare_features` counts), at most half the
    job's memory, the rest for the model, the probe and the batches (a budget as large as the job's memory, 4096
    beside the schema's default mem_mb of 2000, filled it, and Slurm killed the job once encoding was done). Where a
    cache does not fit, the job keeps it on disk or re-encodes: the scores are the same."""
    if mem_mib is None:
        return budget_mb
    half = float(mem_mib) / 2
    if budget_mb is None or budget_mb > half:
        log.info("cache budget %s MiB: half the job's %s MiB (cache.budget_mb %s)", f"{half:g}", f"{mem_mib:g}",
                 budget_mb)  # fmt: skip
        return half
    return budget_mb


def read_lambdas(path, shape: tuple[int, int]) -> torch.Tensor:
    """The lambdas [layers, heads] of a ``learn_lambda`` table (`lambda_frame`), failing unless it
    holds one finite lambda per head of a model of ``shape``."""
    L, H = shape
    df = io.read_parquet(path)
    heads = list(zip(df["layer"].tolist(), df["head"].tolist()))
    if sorted(heads) != [(layer, head) for layer in range(L) for head in range(H)]:
        raise ValueError(
            f"{path}: {len(df)} lambdas (layers {df['layer'].min()}-{df['layer'].max()}, heads "
            f"{df['head'].min()}-{df['head'].max()}), but the model has {L} layers x {H} heads, one lambda each; "
            f"were they learned on another model? Learn them again for this one (rule learn_lambda)"
        )
    df = df.sort_values(["layer", "head"])
    if not np.isfinite(df["lambda"].to_numpy(dtype="float64")).all():
        raise ValueError(f"{path}: lambdas contain NaN/inf; they give no head order, learn them again")
    return torch.tensor(df["lambda"].to_numpy(dtype="float64")).view(L, H)


@spec.renamed_arguments(fraction="fraction_dynamic")
def static_mask(model, lambdas_path, selection: str, fraction_dynamic: float, seed: int = 0) -> torch.Tensor:
    """Bool [layers, heads], True = static, for a head order at ``fraction_dynamic``
    (`papa.selection.select_static`); ``lambdas_path`` is read when the order needs lambdas
    (`papa.spec.needs_lambdas`)."""
    L, H = model_shape(model)
    if not is_partial(fraction_dynamic):  # every order gives the same mask: all heads static (0) or none (1)
        return torch.full((L, H), bool(spec.is_all_constant(fraction_dynamic)), dtype=torch.bool)
    lam = None
    if needs_lambdas(selection, fraction_dynamic):
        if lambdas_path is None:
            raise ValueError(f"Head order {selection!r} needs learned lambdas")
        lam = read_lambdas(lambdas_path, (L, H))
    return select_static(head_order(selection, (L, H), lam, seed=seed), fraction_dynamic, (L, H))


@dataclass(kw_only=True)
class ProbeStage(ModelStage):
    """Rules ``probe`` and ``probe_trained``: a fresh probe per seed on the encoder with a share
    ``fraction_dynamic`` of its heads input-dependent, the others constant (``probe_trained``:
    trained constants, one seed per job).

    Attributes:
        model: what `papa.load_encoder` loads.
        constants: the constant-matrix file; None at fraction_dynamic 1 (no head replaced: not read).
        lambdas: the learned lambdas (`papa.spec.needs_lambdas`), else None.
        train, validation: the task's token files.
        outs: one Parquet file per seed.
        metrics: the task's metrics.
        selection: the head order (`papa.spec.HEAD_ORDERS`).
        fraction_dynamic: share of heads left input-dependent.
        seeds: the probe seeds (one output each).
        hparams: the trainer settings (``tasks.<t>.probe``; its seed is the first of ``seeds``).
        max_train: train every seed's probe on one random subset of this many examples, drawn
            with ``seed`` (None = all).
        backbone_dropout: dropout inside the frozen encoder for training batches.
        trained_constants: the matrices train with the probe (a ``_trained`` constants spec).
        order_seed: seeds the ``random`` head order.
        batch_order: ``per_seed`` (each seed its own batch order, the paper's independent runs) or
            ``shared`` (every seed in the first seed's order; `papa.probe.run_probe`).
        first_seed: under ``shared``, the seed whose batch order every seed follows (the workflow's
            param: the sweep's first seed, which a job of rule ``probe_trained`` need not train);
            None = the first of ``seeds``.
        compile: how the encoder runs in the loop of trained constants (config ``compile``,
            `papa.models.COMPILE_MODES`; rule ``probe_trained``'s param). Fixed matrices run it eagerly.
        cache: where the hidden states are kept (not a rule param: memory and disk give the same bits, re-encoding
            the same scores, its train losses within float rounding: README "cache").
        labels: columns of every row (model, task, constants, selection).
    """

    model: str
    constants: str | None
    lambdas: str | None
    train: str
    validation: str
    outs: list[str]
    metrics: list[str]
    selection: str
    fraction_dynamic: float
    seeds: list[int]
    hparams: TrainConfig
    max_train: int | None = None
    backbone_dropout: bool = False
    trained_constants: bool = False
    order_seed: int = 0
    batch_order: str = "per_seed"
    first_seed: int | None = None
    compile: str = "eager"
    cache: CacheConfig = CacheConfig()
    labels: dict[str, str]

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        hp, wc, seeds = sm.params.hp, sm.wildcards, [spec.seed_of_file(p) for p in sm.output]
        return dict(
            model=sm.params.model,
            constants=sm.input.constants or None,
            lambdas=sm.input.lambdas or None,
            train=sm.input.train,
            validation=sm.input.validation,
            outs=list(sm.output),
            metrics=list(sm.params.metrics),
            selection=wc.selection,
            fraction_dynamic=float(wc.fraction_dynamic),
            seeds=seeds,
            hparams=train_config(hp, seeds[0]),
            **stage_options(hp),
            trained_constants=ConstantsSpec.parse(wc.constants).trained,
            order_seed=int(sm.params.order_seed),
            batch_order=sm.params.batch_order,
            first_seed=sm.params.first_seed,
            compile=getattr(sm.params, "compile", cls.compile),  # probe_trained's too (fixed matrices: eager)
            cache=CacheConfig(
                **{
                    **sm.config["cache"],
                    "dtype": sm.params.cache_dtype,
                    "budget_mb": job_cache_budget(sm.config["cache"]["budget_mb"], job_memory_mib(sm)),
                }
            ),  # fmt: skip
            seed=int(sm.params.order_seed),
            labels={"model": wc.model, "task": wc.task, "constants": wc.constants, "selection": wc.selection},
        )


@runs_model
def probe_heads(stage: ProbeStage) -> list[pd.DataFrame]:
    """Train a fresh probe per seed with ``stage.fraction_dynamic`` of the heads input-dependent;
    one Parquet per seed.

    The frozen encoder runs once when its hidden states are cached (``cache.strategy`` memory or
    disk) or every epoch (``reencode``, also forced by ``backbone_dropout``): of every seed with
    ``batch_order`` per_seed (each seed its own batch order), once for all seeds side by side with
    ``shared`` (`papa.probe.run_probe`); the scores depend on the batch order, not on the strategy.
    Trained constants need the encoder in the loop, seed after seed (strategy ``live``; the
    workflow gives each seed a job of its own, rule ``probe_trained``, with the same scores). Each
    Parquet records ``cache_strategy`` and ``cache_mb`` (the size of the train + validation hidden
    states, whether or not they were cached).
    """
    seeds, cache = list(stage.seeds), stage.cache
    if len(stage.outs) != len(seeds):
        raise ValueError(f"ProbeStage: {len(seeds)} seeds and {len(stage.outs)} outputs: give one output per seed")
    if stage.compile != "eager" and not stage.trained_constants:
        raise ValueError(
            f"compile {stage.compile!r} applies to trained constants (the encoder in the loop); fixed matrices "
            "run the encoder once per batch without gradients: leave compile at 'eager'"
        )
    _check_probe_labels(stage.labels)
    task = stage.labels.get("task")
    train, info = train_split(stage.train, stage.max_train, stage.seed, "probe", task, stage.metrics)
    val = Encoded.load(stage.validation)
    m, _ = load_encoder(stage.model, max_length=train.max_length)
    L, H = model_shape(m)
    static = static_mask(m, stage.lambdas, stage.selection, stage.fraction_dynamic, seed=stage.order_seed)
    replaces = bool(static.any()) or stage.trained_constants
    if stage.constants is None and replaces:
        raise ValueError(f"fraction_dynamic {stage.fraction_dynamic} replaces heads: it needs constant matrices")
    C = None if stage.constants is None else ConstantAttention.load(stage.constants)
    if replaces:  # then C is there
        for split, enc in (("train", train), ("validation", val)):
            n = C.uncovered_queries(enc.attention_mask)
            if n:
                log.warning(
                    "%d of the %s split's %d tokens sit at positions no averaged example reached: the constant "
                    "heads give them a zero output (average over longer examples, e.g. without max_examples)",
                    n, split, int((enc.attention_mask != 0).sum()),
                )  # fmt: skip
    n_dynamic = spec.n_dynamic(stage.fraction_dynamic, L * H)
    log.info(
        "%s: %d of %d heads input-dependent (fraction_dynamic %g, order %s, constants %s)",
        stage.labels.get("task"),
        n_dynamic,
        L * H,
        stage.fraction_dynamic,
        stage.selection,
        stage.labels.get("constants"),
    )
    dropout, hparams = stage.backbone_dropout, stage.hparams
    if stage.batch_order == "shared" and stage.first_seed is not None and hparams.shuffle_seed is None:
        hparams = replace(hparams, shuffle_seed=int(stage.first_seed))  # the sweep's first seed's batch order
    args = (m, train, val, info.kind, info.n_labels, list(stage.metrics), hparams, info.label_names)
    t0 = time.monotonic()
    with real_tokens_only(m, stage.compile):
        if stage.trained_constants:
            strategy, nbytes = "live", cache_nbytes(m, train, cache.dtype) + cache_nbytes(m, val, cache.dtype)
            log.info("trained constants: the encoder runs with gradients for every batch of every seed")
            rows = run_probe(
                *args,
                seeds=seeds,
                backbone_dropout=dropout,
                batch_order=stage.batch_order,
                trainable=lambda: patch(m, C, static=static, trainable_constants=True),
                compile=stage.compile,
            )
        else:
            with (
                patch(m, C, static=static) if C is not None else contextlib.nullcontext(),  # none: the model as it is
                prepare_features(
                    m,
                    train,
                    val,
                    strategy=cache.strategy,
                    dtype=cache.dtype,
                    batch_size=int(cache.batch_size),
                    budget_mb=cache.budget_mb,
                    disk_budget_mb=cache.disk_budget_mb,
                    scratch=cache.scratch,
                    backbone_dropout=dropout,
                ) as feats,
            ):
                log.info(
                    "features ready (%s) in %.1f s; training %d seeds",
                    feats.strategy,
                    time.monotonic() - t0,
                    len(seeds),
                )
                rows = run_probe(*args, features=feats, seeds=seeds, batch_order=stage.batch_order)
                strategy, nbytes = feats.strategy, feats.nbytes
    log.info("probes done in %.1f s", time.monotonic() - t0)
    df = pd.DataFrame(rows)
    df["cache_strategy"], df["cache_mb"] = strategy, nbytes / 2**20
    df["model_revision"] = model_revision(m)  # the hub commit the weights came from (None: local)
    # which heads stayed input-dependent, (layer, head) pairs: a random order's are otherwise known only by rerunning it
    record = stage.provenance(device=next(m.parameters()).device, cache_strategy=strategy,
                              dynamic_heads=(~static).nonzero().tolist(),
                              probe_dropout=_dropout_run(info.kind, hparams.dropout, m))  # fmt: skip
    record["settings"]["hparams"] = asdict(hparams)  # as run_probe got them (shared: its order)
    return [
        _write_rows(
            df[df.seed == seed].drop(columns="seed"), out, stage.labels, stage.fraction_dynamic, n_dynamic, seed, record
        )
        for seed, out in zip(seeds, stage.outs, strict=True)
    ]


def _check_probe_labels(labels: dict) -> None:
    """The columns a probe's rows are labelled with (`_write_rows`), checked before any training as
    `papa.tables.probe_table` checks them after it: all four given, a constants spec that parses, a head order."""
    missing = [k for k in ("model", "task", "constants", "selection") if k not in labels]
    if missing:
        raise ValueError(f"ProbeStage.labels lacks {', '.join(missing)}: every probe row names its model, task, "
                         f"constants and selection")  # fmt: skip
    ConstantsSpec.parse(str(labels["constants"]))  # a ValueError naming the spec and the kinds
    if labels["selection"] not in spec.HEAD_ORDERS:
        raise ValueError(f"ProbeStage.labels: selection {labels['selection']!r} is no head order; use one of "
                         f"{', '.join(spec.HEAD_ORDERS)}")  # fmt: skip


def _write_rows(rows, out, labels, fraction_dynamic, n_dynamic, seed, record=None) -> pd.DataFrame:
    df = pd.DataFrame(rows).reset_index(drop=True)
    df.insert(0, "seed", seed)
    df.insert(0, "n_dynamic", n_dynamic)
    df.insert(0, "fraction_dynamic", spec.check_fraction(fraction_dynamic))  # -0.0 as 0, as the workflow's paths
    for k in reversed(["model", "task", "constants", "selection"]):
        df.insert(0, k, labels[k])
    if record is not None:  # the file's own seed, at the top and in the trainer settings it ran with (the stage's
        # settings are every seed's, its hparams the first seed's: run_probe gives each seed its own)
        settings = record.get("settings", {})
        if isinstance(settings.get("hparams"), dict):
            settings = {**settings, "hparams": {**settings["hparams"], "seed": int(seed)}}
        record = {**record, "seed": int(seed), "settings": settings}
    io.write_parquet(df, out, record)
    return df


@spec.renamed_arguments(fraction="fraction_dynamic")
def run_probes(
    model: str,
    constants_path,
    lambdas_path,
    selection: str,
    fraction_dynamic: float,
    seeds: list[int],
    train_tokens,
    val_tokens,
    task_cfg: dict,
    hp: dict,
    cache: dict,
    outs: list,
    labels: dict,
    trained_constants: bool = False,
    batch_order: str = "per_seed",
) -> list[pd.DataFrame]:
    """Train a fresh probe per seed with ``fraction_dynamic`` of the heads input-dependent.

    Kept for notebooks: builds a `ProbeStage` (``task_cfg``: its ``metrics``; ``hp``: a probe
    hparams block, plus ``order_seed``; ``constants_path``: None where no head is replaced (fraction_dynamic 1,
    fixed matrices), as the workflow's baselines; ``cache``: the config's ``cache`` keys, a missing
    ``budget_mb`` meaning no memory limit as before; ``batch_order``: the config's
    ``sweep.batch_order``) and calls `probe_heads`, which replaced it.
    """
    _check_block_keys(hp, "probe")
    seeds, order_seed = [int(s) for s in seeds], int(hp.get("order_seed", 0))
    if not seeds:
        raise ValueError("run_probes: seeds is empty: give at least one seed (a probe and an output file per seed)")
    return probe_heads(
        ProbeStage(
            model=model,
            constants=None if constants_path is None else str(constants_path),  # None: fraction 1 reads none
            lambdas=None if lambdas_path is None else str(lambdas_path),
            train=str(train_tokens),
            validation=str(val_tokens),
            outs=[str(o) for o in outs],
            metrics=list(task_cfg["metrics"]),
            selection=selection,
            fraction_dynamic=float(fraction_dynamic),
            seeds=seeds,
            hparams=train_config(hp, seeds[0]),
            **stage_options(hp),
            trained_constants=trained_constants,
            order_seed=order_seed,
            batch_order=batch_order,
            # as the workflow's param: each seed's file then records the batch order it trained in (its hparams'
            # shuffle_seed; None there read as the seed's own order)
            first_seed=seeds[0] if batch_order == "shared" else None,
            seed=order_seed,
            cache=CacheConfig(**{"budget_mb": None, **cache}),
            labels=dict(labels),
        )
    )


# ----------------------------------------------------------------------------- masked LM (Sec. 5.5)

#: Settings of the MLM analysis when a notebook leaves them out (`run_mlm`): the paper's Table 3
#: MLM row and the masking rate; the workflow's come from the schema's defaults, which
#: tests/test_spec.py holds equal to these.
MLM_DEFAULTS = {
    "head": "probe",
    "decoder": "tied",
    "mask_prob": 0.15,
    **{k: v for k, v in PAPER_HPARAMS["mlm"].items() if k != "max_length"},
}


@dataclass(kw_only=True)
class MLMStage(ModelStage):
    """Rule ``mlm`` (paper Sec. 5.5 / Fig. 6a): negative log-perplexity on held-out text per
    ``fraction_dynamic``, heads ranked by lambdas learned with the masked-LM loss.

    Attributes:
        model: what `papa.load_encoder` loads.
        constants: the ``average`` constant-matrix file of the text.
        train, validation: the text's token files.
        out_scores: one row per fraction_dynamic and seed.
        out_lambdas: (layer, head, lambda, rank) per head.
        fraction_dynamic: the shares of input-dependent heads scored.
        head: ``probe`` (the paper's procedure: a fresh `papa.mlm.MLMProbe` trained per fraction
            on the encoder loaded without a head, so any encoder works) or ``pretrained`` (the
            checkpoint's frozen MLM head; fails for a checkpoint without one).
        hparams: the probe's trainer settings; ``lambda_hparams``: the lambda stage's (``lambda``
            overrides; ``extra_lr`` is the lambdas' learning rate).
        mask_prob: share of tokens masked.
        max_train, max_eval: seeded random subsets of the splits (None = all).
        labels: columns prepended to both outputs (model, dataset).
        seed: also seeds the lambdas, the masks and the subsets.
        seeds: a trained probe per seed at every fraction (the workflow: ``sweep.seeds``, as the
            probes'; None = ``[seed]``). The pretrained head trains nothing: one row per fraction.
        masking: what the tokens chosen for the loss become (`papa.mlm.MASKINGS`: ``mask``, or BERT's 80/10/10
            ``bert``), in training and scoring.
        backbone_dropout, lambda_backbone_dropout: the frozen encoder's dropout on while the probes, and the
            lambda stage, train (the Hugging Face Trainer's train mode, as the authors' runs).
        decoder: how the probe's vocabulary projection starts (`papa.mlm.MLM_DECODERS`): ``tied`` (the authors'),
            the encoder's input word embeddings, frozen, with the checkpoint's MLM head bias (trained; 0 where it
            has none; `papa.models.load_mlm_encoder`), or ``fresh``, a new Linear trained from N(0, 0.02).
    """

    model: str
    constants: str
    train: str
    validation: str
    out_scores: str
    out_lambdas: str
    fraction_dynamic: list[float]
    head: str
    hparams: TrainConfig
    lambda_hparams: TrainConfig
    mask_prob: float
    max_train: int | None = None
    max_eval: int | None = None
    labels: dict[str, str]
    seeds: list[int] | None = None
    masking: str = "mask"
    backbone_dropout: bool = False
    lambda_backbone_dropout: bool = False
    decoder: str = "tied"

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        return dict(
            seeds=[int(s) for s in sm.params.seeds],
            model=sm.params.model,
            constants=sm.input.constants,
            train=sm.input.train,
            validation=sm.input.validation,
            out_scores=sm.output.scores,
            out_lambdas=sm.output.lambdas,
            fraction_dynamic=[float(f) for f in sm.params.fraction_dynamic],
            labels={"model": sm.wildcards.model, "dataset": sm.wildcards.dataset},
            **_mlm_settings(sm.params.hp),
        )


def _mlm_settings(hp: dict) -> dict:
    """The `MLMStage` fields set by the ``analyses.mlm`` block (defaults filled in; ``masking``,
    ``backbone_dropout`` and ``decoder``, which the rule's params leave out at their defaults
    (`papa.checks.mlm_param`), where the block sets them, the lambda stage's ``backbone_dropout`` that of the
    ``lambda`` block, else the block's)."""
    seed = int(hp["seed"])
    lam = {**hp, **(hp.get("lambda") or {})}
    return dict(
        **{k: hp[k] for k in ("masking", "backbone_dropout", "decoder") if k in hp},
        **({"lambda_backbone_dropout": bool(lam["backbone_dropout"])} if "backbone_dropout" in lam else {}),
        head=hp["head"],
        hparams=train_config(hp, seed),
        lambda_hparams=train_config({**hp, **(hp.get("lambda") or {})}, seed),
        mask_prob=float(hp["mask_prob"]),
        max_train=hp.get("max_train"),
        max_eval=hp.get("max_eval"),
        seed=seed,
    )


@runs_model
def mlm_curves(stage: MLMStage) -> pd.DataFrame:
    """Write the lambdas and the negative log-perplexity per fraction_dynamic; return the scores."""
    from .mlm import MLM_DECODERS, MLM_HEADS, learn_mlm_lambdas, mlm_curve

    if stage.head not in MLM_HEADS:
        raise ValueError(f"analyses.mlm.head must be one of {', '.join(MLM_HEADS)}; got {stage.head!r}")
    if stage.decoder not in MLM_DECODERS:
        raise ValueError(f"analyses.mlm.decoder must be one of {', '.join(MLM_DECODERS)}; got {stage.decoder!r}")
    n = int(token_meta(stage.train)["max_length"])
    bias = None
    if stage.head == "probe" and stage.decoder == "tied":  # the checkpoint's MLM head bias starts the probe's
        m, tok, bias = load_mlm_encoder(stage.model, max_length=n)
    else:
        m, tok = load_encoder(stage.model, task_head=None if stage.head == "probe" else "mlm", max_length=n)
    if tok.mask_token_id is None:
        raise ValueError(f"the tokenizer of {stage.model!r} has no mask token: it cannot be scored as a masked LM")
    C = ConstantAttention.load(stage.constants)
    train, val = Encoded.load(stage.train), Encoded.load(stage.validation)
    # a generator each: with one shared, the validation rows scored depended on whether (and from how many rows)
    # the train split was drawn, so a changed max_train scored other text. Each draws as the first draw did
    train = subsample(train, stage.max_train, np.random.default_rng(stage.seed))
    val = subsample(val, stage.max_eval, np.random.default_rng(stage.seed))
    if len(train) == 0 or len(val) == 0:
        raise ValueError(f"MLM analysis: empty split (train {len(train)}, validation {len(val)} examples)")
    special = set(tok.all_special_ids)
    cfg, lambda_cfg = stage.hparams, stage.lambda_hparams
    log.info(
        "MLM (head %s, masking %s%s): lambdas %d epochs, then %d fractions x %s on %d train / %d validation examples",
        stage.head,
        stage.masking,
        ", backbone dropout on" if stage.backbone_dropout or stage.lambda_backbone_dropout else "",
        lambda_cfg.epochs,
        len(stage.fraction_dynamic),
        f"{cfg.epochs} epochs" if stage.head == "probe" else "scoring",
        len(train),
        len(val),
    )
    # the probe trainings after it, in trainings of the lambdas' length (what their ETA counts): a lambda block's
    # epochs may differ from the probes' (epochs 1 beside the probes' 4 read a quarter of the time left)
    probes = len(stage.fraction_dynamic) * len(stage.seeds or [0]) if stage.head == "probe" else 0
    runs_after = probes * cfg.epochs / lambda_cfg.epochs
    with real_tokens_only(m):
        lam, _ = learn_mlm_lambdas(
            m, C, train, tok.mask_token_id, special, lambda_cfg, stage.mask_prob, stage.head, runs_after=runs_after,
            masking=stage.masking, backbone_dropout=stage.lambda_backbone_dropout, decoder=stage.decoder,
            decoder_bias=bias,
        )  # fmt: skip
        rows = mlm_curve(
            m,
            C,
            lam,
            val,
            stage.fraction_dynamic,
            tok.mask_token_id,
            special,
            cfg,
            stage.mask_prob,
            stage.head,
            train=train,
            seeds=stage.seeds,
            masking=stage.masking,
            backbone_dropout=stage.backbone_dropout,
            decoder=stage.decoder,
            decoder_bias=bias,
        )
    ldf = lambda_frame(lam)
    df = pd.DataFrame(rows)
    df.insert(1, "n_eval", len(val))
    for k, v in reversed(list(stage.labels.items())):
        ldf.insert(0, k, v)
        df.insert(0, k, v)
    revision = model_revision(m)  # the hub commit the weights came from (None: local), as in the probe tables
    df["model_revision"] = ldf["model_revision"] = revision
    record = stage.provenance(device=next(m.parameters()).device, model_revision=revision)
    io.write_parquet(ldf, stage.out_lambdas, record)
    io.write_parquet(df, stage.out_scores, record)
    return df


@spec.renamed_arguments(fractions="fraction_dynamic")
def run_mlm(
    model: str,
    constants_path,
    train_tokens,
    val_tokens,
    hp: dict,
    fraction_dynamic,
    out_scores,
    out_lambdas,
    labels: dict,
) -> pd.DataFrame:
    """Paper Sec. 5.5 / Fig. 6a: negative log-perplexity per fraction_dynamic on held-out text.

    Kept for notebooks: builds an `MLMStage` from an ``analyses.mlm`` block (``head``, ``lr``,
    ``batch_size``, ``epochs``, ``lambda``, ``mask_prob``, ``max_train``, ``max_eval``, ``seed``;
    missing ones from `MLM_DEFAULTS`, seed 0) and calls `mlm_curves`, which replaced it.
    """
    _check_block_keys(hp, "mlm")
    return mlm_curves(
        MLMStage(
            model=model,
            constants=str(constants_path),
            train=str(train_tokens),
            validation=str(val_tokens),
            out_scores=str(out_scores),
            out_lambdas=str(out_lambdas),
            fraction_dynamic=[float(f) for f in fraction_dynamic],
            labels=dict(labels),
            **_mlm_settings({**MLM_DEFAULTS, "seed": 0, **hp}),
        )
    )


# ----------------------------------------------------------------------------- tables, patterns and plots


@dataclass(kw_only=True)
class PatternsStage(Stage):
    """Rule ``patterns``: per-head pattern statistics (paper Sec. 5.1, `papa.patterns`) of the raw
    and the effective average attention of one (model, corpus, N).

    Attributes:
        average, effective: the ``average`` and ``effective`` constant-matrix files.
        out: the Parquet file written (one row per attention, layer, head).
        model, corpus, n: the labels of its rows (config names; N of the matrices).
        band, diag_threshold, special_threshold: ``analyses.patterns`` (`papa.patterns.head_patterns`,
            `papa.patterns.classify`).
    """

    average: str
    effective: str
    out: str
    model: str
    corpus: str
    n: int
    band: int
    diag_threshold: float
    special_threshold: float

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        opts = sm.params.patterns
        return dict(
            average=sm.input.average,
            effective=sm.input.effective,
            out=sm.output[0],
            model=sm.wildcards.model,
            corpus=sm.wildcards.dataset,
            n=int(sm.wildcards.n),
            band=int(opts["band"]),
            diag_threshold=float(opts["diag_threshold"]),
            special_threshold=float(opts["special_threshold"]),
        )

    def job_record(self, *, device=None) -> dict:
        """`Stage.job_record` without ``model_release``: ``model`` is the config's name of the matrices' model, a
        label of the rows, and the stage loads no model (a config naming a hub model or folder ``minilm`` recorded
        the offline alias's release; the matrices record their model's own)."""
        record = super().job_record(device=device)
        record.pop("model_release", None)
        return record


def pattern_stats(stage: PatternsStage) -> pd.DataFrame:
    """Pattern statistics of raw and effective attention -> ``stage.out`` (model, corpus, N,
    attention, layer, head, the statistics, the ``diagonal``/``cls_sep`` flags); the paper-style
    summary line of each goes to the log."""
    from .patterns import classify, head_patterns, summary_line

    frames = []
    for attention, path in (("raw", stage.average), ("effective", stage.effective)):
        C = ConstantAttention.load(path)
        separators = C.metadata.get("separator_positions")  # None (older files, notebooks): N-1
        stats = head_patterns(C.mean, C.count, band=stage.band, separators=separators)
        df = classify(stats, stage.diag_threshold, stage.special_threshold)
        log.info("%s attention: %s", attention, summary_line(df))
        df.insert(0, "attention", attention)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    for k, v in reversed([("model", stage.model), ("corpus", stage.corpus), ("N", stage.n)]):
        out.insert(0, k, v)
    io.write_parquet(out, stage.out, stage.provenance())
    return out


@dataclass(kw_only=True)
class AggregateStage(Stage):
    """Rule ``aggregate``: the per-run files -> the tables of ``results/tables`` (`papa.tables`).

    Attributes:
        probes: per-run probe Parquet files (rule ``probe``).
        lambdas: learned-lambda files (rule ``learn_lambda``; may be empty).
        patterns: head-pattern files (rule ``patterns``; empty without ``analyses.patterns``).
        main_metric: task -> the metric the paper reports for it (the summary's ``is_main``).
        kinds: the constants specs of ``constant_kinds.parquet``, in row order (``average``,
            ``identity``, ``average@wiki``, ...).
        out_probe, out_summary, out_lambdas, out_constant_kinds, out_patterns: the tables written.
    """

    probes: list[str]
    lambdas: list[str]
    patterns: list[str]
    main_metric: dict[str, str]
    kinds: list[str]
    out_probe: str
    out_summary: str
    out_lambdas: str
    out_constant_kinds: str
    out_patterns: str

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        return dict(
            probes=list(sm.input.probes),
            lambdas=list(sm.input.lambdas),
            patterns=list(sm.input.patterns),
            main_metric=dict(sm.params.main_metric),
            kinds=list(sm.params.kinds),
            out_probe=sm.output.probe,
            out_summary=sm.output.summary,
            out_lambdas=sm.output.lambdas,
            out_constant_kinds=sm.output.constant_kinds,
            out_patterns=sm.output.patterns,
        )


def aggregate(stage: AggregateStage) -> dict[str, pd.DataFrame]:
    """Write the probe, summary (baselines shared across constants/orders at fraction 1),
    lambdas, constant-kinds and patterns tables; return them by name."""
    from . import tables

    record = stage.provenance()
    probe = tables.probe_table([io.read_parquet(p) for p in stage.probes])
    io.write_parquet(probe, stage.out_probe, record)
    summary = tables.summary_table(probe, stage.main_metric, share_baseline=True)
    io.write_parquet(summary, stage.out_summary, record)
    lam = [io.read_parquet(p) for p in stage.lambdas]
    lambdas = tables.lambdas_table(lam) if lam else tables.empty_lambdas_table()
    io.write_parquet(lambdas, stage.out_lambdas, record)
    kinds = tables.constant_kinds_table(summary, stage.kinds)
    io.write_parquet(kinds, stage.out_constant_kinds, record)
    patterns = tables.patterns_table([io.read_parquet(p) for p in stage.patterns])
    io.write_parquet(patterns, stage.out_patterns, record)
    out = {"probe": probe, "summary": summary, "lambdas": lambdas, "constant_kinds": kinds, "patterns": patterns}
    log.info("tables from %d probe runs' files: %s", len(stage.probes),
             ", ".join(f"{name} {len(df)} rows" for name, df in out.items()))  # fmt: skip
    try:
        drops = tables.all_constant_drop(summary)
    except ValueError as err:  # several main metrics on a task (main_metric without it): the tables stand, no line
        log.warning("no relative drop of all heads constant to report: %s", err)
        return out
    for r in drops.itertuples(index=False):
        log.info("%s", _all_constant_line(r))
    if drops.empty:
        log.info("no probe replaced every head (fraction_dynamic 0): no relative drop of all heads constant to report")
    return out


def _all_constant_line(r) -> str:
    """One row of `papa.tables.all_constant_drop` as the aggregate job's log line."""
    tasks = f"{r.n_tasks} task{'s' if r.n_tasks != 1 else ''}: {r.tasks}"
    if not np.isfinite(r.relative_drop):
        what = "has no relative drop to report"
    elif r.relative_drop >= 0:
        what = f"costs {100 * r.relative_drop:.1f}% of the main metric relative (mean over {tasks})"
    else:
        what = f"raises the main metric by {-100 * r.relative_drop:.1f}% relative (mean over {tasks})"
    undefined = (f"; no relative drop on {r.undefined} (no baseline at fraction_dynamic 1, or one <= 0)"
                 if r.undefined else "")  # fmt: skip
    return f"{r.model}, {r.constants}: all heads constant {what}{undefined}"


@dataclass(frozen=True)
class ConstantsFile:
    """A constant-matrix file and what it holds, as the workflow names it (the path is not parsed).

    Attributes:
        path: the ``.safetensors`` file (`papa.constants.ConstantAttention`).
        model: the model's config name (the file's metadata holds its hub id or folder instead).
        corpus: the dataset the matrices were averaged on.
        n: N, the input length of the matrices.
        kind: one of `papa.spec.CONSTANT_KINDS`.
    """

    path: str
    model: str
    corpus: str
    n: int
    kind: str


@dataclass(kw_only=True)
class PlotStage(Stage):
    """Rule ``plot``: the figures (`papa.plots`) from the aggregated tables.

    Attributes:
        summary, lambdas, constant_kinds: tables written by `aggregate`.
        constants: the constant-matrix files whose representative heads are drawn (data-free
            kinds are skipped: every head holds the same matrix).
        sweep_constants, sweep_selections: the main sweep's constants and head orders (Fig. 2).
        sweep_own: labels of sweep_constants drawn on the listed tasks only (`papa.checks.sweep_own_tasks`).
        compared_models: the models Fig. 3 compares (`papa.checks.compared_models`: those that run
            every task); None = every model of the summary table.
        out_fraction_curves, out_constant_kinds, out_head_orders, out_models_compared: path stems
            (``.png`` and ``.svg`` are written).
        out_heads: folder of the lambda heatmaps and constant-matrix figures.
        out_summary_table: the summary's numbers as HTML for the report (`papa.plots.plot_summary_table`); None:
            not written.
    """

    summary: str
    lambdas: str
    constant_kinds: str
    constants: list[ConstantsFile]
    sweep_constants: list[str]
    sweep_selections: list[str]
    sweep_own: dict[str, list[str]] = field(default_factory=dict)
    out_fraction_curves: str
    out_constant_kinds: str
    out_head_orders: str
    out_models_compared: str
    out_heads: str
    compared_models: list[str] | None = None
    out_summary_table: str | None = None

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        def stem(files):
            return str(Path(files[0]).with_suffix(""))

        return dict(
            summary=sm.input.summary,
            lambdas=sm.input.lambdas,
            constant_kinds=sm.input.kinds,
            constants=[ConstantsFile(path=p, **m) for p, m in zip(sm.input.constants, sm.params.matrices, strict=True)],
            sweep_constants=list(sm.params.sweep["constants"]),
            sweep_selections=list(sm.params.sweep["selections"]),
            sweep_own={k: list(v) for k, v in sm.params.sweep.get("own", {}).items()},
            compared_models=list(sm.params.compared_models),
            out_fraction_curves=stem(sm.output.fig2),
            out_constant_kinds=stem(sm.output.kinds),
            out_head_orders=stem(sm.output.orders),
            out_models_compared=stem(sm.output.models),
            out_heads=sm.output.heatmaps,
            out_summary_table=sm.output.table,
        )


def plot_figures(stage: PlotStage) -> None:
    """Fig. 2 (the main sweep), Table 1 as bars, Fig. 5 (head orders on average matrices), Fig. 3
    (`papa.tables.models_compared_table`), a lambda heatmap per (model, task, constants) and
    representative heads of each constant-matrix file that is not data-free."""
    from . import plots

    # each figure carries it, as the tables do theirs; drawn in matplotlib's defaults, whatever matplotlibrc is found
    with plots.recorded(stage.provenance()), plots.default_style():
        _plot_figures(stage)


def sweep_rows(summary, stage: PlotStage):
    """The summary's rows of the main sweep (Fig. 2): its constants and head orders, a label of ``sweep_own`` on its
    tasks only (`papa.checks.sweep_own_tasks`: not another task's analysis run of that kind)."""
    sweep = summary[summary.constants.isin(stage.sweep_constants) & summary.selection.isin(stage.sweep_selections)]
    if stage.sweep_own:
        keep = [c not in stage.sweep_own or t in stage.sweep_own[c] for c, t in zip(sweep.constants, sweep.task)]
        sweep = sweep[keep]
    return sweep


def _plot_figures(stage: PlotStage) -> None:
    from . import plots, tables
    from .spec import is_data_free

    t0 = time.monotonic()
    summary = io.read_parquet(stage.summary)
    sweep = sweep_rows(summary, stage)

    # a config may run no probe on the method's own matrices (sweep.constants: [identity]): the head orders, and the
    # constant kinds where no such probe replaced every head, have no row to draw; any other empty figure is a fault
    method = summary.constants == spec.METHOD_CONSTANTS
    method_free = method & spec.is_all_constant(summary.fraction_dynamic.astype(float))

    def draw(plot, frame, out, title, why, may_be_empty):  # a figure with no row to draw says so, where it may
        try:
            plot(frame, out)
        except plots.NothingToPlot:
            if not may_be_empty:
                raise
            log.warning("%s: nothing to draw, %s; its figure says so", Path(out).name, why)
            plots.plot_note(out, title, f"Nothing to draw: {why}.")

    plots.plot_fraction_curves(sweep, stage.out_fraction_curves)
    name = repr(spec.METHOD_CONSTANTS)
    draw(plots.plot_constant_kinds, io.read_parquet(stage.constant_kinds), stage.out_constant_kinds,
         "All heads replaced: constant matrix kinds", f"no probe of this config replaced every head "
         f"(fraction_dynamic 0) by the method's matrices ({name}) or a kind of analyses.constant_kinds",
         not method_free.any())  # fmt: skip
    draw(plots.plot_selection_orders, summary[method], stage.out_head_orders, "Head selection methods",
         f"no probe of this config ran on the method's matrices ({name}): add it to sweep.constants to draw its head "
         f"orders", not method.any())  # fmt: skip

    def models_compared(frame, out):
        try:
            table = tables.models_compared_table(frame, models=stage.compared_models)
        except tables.NoDropToCompare as e:  # an original MCC below 0 on every shared task: a note, not a failed job
            raise plots.NothingToPlot(str(e)) from e
        return plots.plot_models_compared(table, out)

    draw(models_compared, summary, stage.out_models_compared, "Original score vs drop without input-dependent "
         "attention", "every task the compared models share has, in some model, an original main score <= 0 (an MCC "
         "below 0), where a relative drop is undefined or reads a fall as a rise, or no score (NaN) at fraction "
         "1 or 0", True)  # fmt: skip
    if stage.out_summary_table is not None:
        plots.plot_summary_table(summary, stage.out_summary_table)
    # each figure's name joins its labels with '+', which no name holds ('_' joined them, and names may hold '_':
    # model bert_x with task rt and model bert with task x_rt drew one file, the second over the first)
    with io.atomic_dir(stage.out_heads) as out:  # the folder appears complete, without an earlier run's figures
        lam = io.read_parquet(stage.lambdas)
        for (model, task, constants), df in lam.groupby(["model", "task", "constants"]) if len(lam) else []:
            plots.plot_lambda_heatmap(df, out / f"lambdas+{model}+{task}+{constants}")
        for f in stage.constants:
            if is_data_free(f.kind):
                continue  # the same matrix for every head: nothing to see
            C = ConstantAttention.load(f.path)
            plots.plot_constant_heads(
                C.mean.numpy(),
                out / f"constants+{f.model}+{f.corpus}+N{f.n}+{f.kind}",
                title=f"{f.model}: {f.kind} attention on {f.corpus} (N{f.n})",
                count=C.count.numpy(),
                separators=C.metadata.get("separator_positions"),
            )
        n_heads = sum(1 for _ in out.glob("*.png"))
    log.info("figures: 4 tables' figures%s and %d of lambdas and constant heads, in %.1f s",
             ", the summary's table" if stage.out_summary_table is not None else "", n_heads,
             time.monotonic() - t0)  # fmt: skip


@dataclass(kw_only=True)
class MLMTableStage(Stage):
    """Rule ``mlm_table``: the per-model masked-LM curves (rule ``mlm``) -> ``mlm.parquet`` and
    the Fig. 6(a) analogue.

    Attributes:
        scores: the per-model ``scores.parquet`` files.
        out_table: ``mlm.parquet``.
        out_plot: path stem of the figure (``.png`` and ``.svg``).
    """

    scores: list[str]
    out_table: str
    out_plot: str

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        return dict(
            scores=list(sm.input), out_table=sm.output.table, out_plot=str(Path(sm.output.plot[0]).with_suffix(""))
        )


def tabulate_mlm(stage: MLMTableStage) -> pd.DataFrame:
    """Write ``mlm.parquet`` (`papa.tables.mlm_table`) and its figure (`papa.plots.plot_mlm`)."""
    from . import plots, tables

    table = tables.mlm_table([io.read_parquet(p) for p in stage.scores])
    io.write_parquet(table, stage.out_table, stage.provenance())
    with plots.recorded(stage.provenance()), plots.default_style():  # not a matplotlibrc's style
        plots.plot_mlm(table, stage.out_plot)
    return table
