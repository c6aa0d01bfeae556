"""Paper-scale cost of a config's GPU jobs: for the probe and lambda stages hidden-state cache
sizes, the cache strategy this project picks (`papa.probe.choose_strategy`), encoder passes and
GPU-hours, next to the authors' procedure (a fresh encoder pass every epoch of every seed and
every fraction); for averaging (rule average_attention) and the MLM analysis (rule mlm) their
encoder passes and GPU-hours, so that every GPU job's time limit is checked against its estimate.

Estimates, not measurements: split sizes are the published ones, mean word-piece lengths are
approximate (see `SPLIT_SIZES`). GPU time comes from throughput measured per encoder
(`benchmarks/gpu_cost.py`: each paper encoder's feature pass at its padded length, and its
gradient steps, on one GPU; `Throughput`) or, for a model that file lacks, from one forward
throughput scaled by padded length and model size (`gpu_hours`, `GRAD_PASS_COST`); averaging that
file has not timed costs `AVERAGE_PASS_COST` feature passes, plus `EFFECTIVE_HEAD_S` per head for
effective attention.
"""

from __future__ import annotations

import copy
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from .checks import GPU_RULES, dataset_name, job_resources, validate_config
from .layout import parse_result
from .probe import MB, choose_strategy, features_nbytes
from .spec import METHOD_CONSTANTS, ConstantsSpec

#: Published split sizes (examples; validation = the split the paper reports) and the mean number
#: of kept tokens per example: word pieces with [CLS]/[SEP] for sequence tasks (every valid token
#: is cached), words for CoNLL-2003 (only first sub-words are cached).
SPLIT_SIZES = {
    "cola": dict(train=8_551, validation=1_043, tokens=11.0),
    "sst2": dict(train=67_349, validation=872, tokens=13.0),
    "mrpc": dict(train=3_668, validation=408, tokens=53.0),
    "mnli": dict(train=392_702, validation=9_832, tokens=40.0),  # validation_mismatched
    "conll2003_ner": dict(train=14_041, validation=3_250, tokens=203_621 / 14_041),
    "conll2003_pos": dict(train=14_041, validation=3_250, tokens=203_621 / 14_041),
    # the MLM analysis's held-out text: rows of Salesforce/wikitext (wikitext-103-raw-v1) on the hub, blank lines
    # included; paper.yaml draws 20,000 and 3,000 of them (datasets.wikitext103.max_train / max_validation)
    "wikitext103": dict(train=1_801_350, validation=3_760, tokens=128.0),  # tokens: unused (no probe caches it)
    # GLUE's other classification tasks (hub datasets, not in the paper's grid): word pieces are estimates
    "qqp": dict(train=363_846, validation=40_430, tokens=30.0),
    "qnli": dict(train=104_743, validation=5_463, tokens=50.0),
    "rte": dict(train=2_490, validation=277, tokens=70.0),
    "mnli_matched": dict(train=392_702, validation=9_815, tokens=40.0),  # validation_matched
}
DATASET_SOURCES = (
    "Split sizes: GLUE (Wang et al. 2019) as on the hub (nyu-mll/glue: CoLA 8,551/1,043, SST-2 67,349/872, "
    "MRPC 3,668/408, MNLI 392,702/9,832 validation_mismatched) and CoNLL-2003 (Tjong Kim Sang & De Meulder 2003: "
    "14,041/3,250 sentences, 203,621 training tokens); WikiText-103 (Merity et al. 2017) rows as on the hub "
    "(Salesforce/wikitext: 1,801,350/3,760, blank lines included), of which a config's max_train/max_validation "
    "draw the MLM analysis's (paper.yaml: 20,000/3,000); GLUE's QQP 363,846/40,430, QNLI 104,743/5,463, RTE "
    "2,490/277 and MNLI's validation_matched 9,815. Word pieces per example (BERT uncased, with specials): "
    "MNLI ~40 and SST-2 ~13 as in the project's method notes; CoLA ~11 and MRPC ~53 (two ~22-word "
    "sentences), QQP ~30, QNLI ~50 and RTE ~70 are estimates from typical sentence lengths; CoNLL-2003 caches one "
    "row per word (14.5 per sentence)."
)

#: (layers, hidden size, non-embedding parameters) of the paper's encoders.
MODELS = {
    "bert-base-uncased": (12, 768, 85e6),
    "bert-large-uncased": (24, 1024, 302e6),
    "FacebookAI/roberta-base": (12, 768, 85e6),
    "FacebookAI/roberta-large": (24, 1024, 302e6),
    "microsoft/deberta-base": (12, 768, 85e6),
    "microsoft/deberta-large": (24, 1024, 302e6),
    "google/electra-base-discriminator": (12, 768, 85e6),
}
#: A pass that back-propagates through the encoder (lambdas, trained constants) costs about two
#: forward passes (activation gradients only: the encoder's weights are frozen). The assumption for a
#: model `Throughput` has not measured; measured on an H100 it is 2.5 (large) to 3.5 (base, at the
#: training batch of 16 the GPU is less busy) feature passes (benchmarks/reference/gpu_cost-h100.json).
GRAD_PASS_COST = 2.0
#: Averaging (rule average_attention) runs the encoder with every layer's attention probabilities computed as
#: transformers' eager attention computes them and summed (`papa.patching.record_attention`). On an H100 a
#: BERT-base-shaped encoder at N = 128, batch 64 (benchmarks/reference/gpu_check-h100-effective.json) took 39.0
#: ms for the eager pass returning its attentions, against 36.3 ms for the sdpa pass, and averaging 1.07x the
#: eager pass: 1.15 feature passes. The assumption for a model `Throughput` has not timed averaging for
#: (``average_N<n>``).
AVERAGE_PASS_COST = 1.15
#: Effective attention (``kind: effective``) adds a projection per head and example (`papa.effective_attention`,
#: Cholesky QR of the values, then ``A Q Q^T``): in the same file a BERT-base-shaped encoder averaged effective
#: attention at 681.6 examples/s (N = 128, batch 32), 1.467 ms an example against averaging's 0.653: 0.814 ms
#: more for its 144 heads, 5.65 microseconds a head. The assumption for a model without ``effective_N<n>``, scaled
#: by N^2 (the ``A Q Q^T`` products, N x N x head width, dominate at N >= 128).
EFFECTIVE_HEAD_S = 5.65e-6
#: The paper's encoders' attention heads are 64 wide (heads = hidden size / 64).
HEAD_WIDTH = 64


@dataclass(frozen=True)
class Throughput:
    """Measured throughput per encoder: ``models`` is the ``models`` block of
    ``benchmarks/gpu_cost.py``'s JSON (hub id -> its ``forward_N<n>`` feature-pass timings and its
    ``grad_pass_cost``: a gradient step's time per example against the feature pass's)."""

    models: dict
    source: str = ""
    #: the batch the ``forward_N<n>`` passes were timed at (the JSON's ``forward_batch``); None: unknown, and
    #: `tokens_per_s` gives their rate at any batch
    forward_batch: int | None = None

    @classmethod
    def load(cls, path) -> Throughput:
        import json

        data = json.loads(Path(path).read_text())
        if data.get("tiny"):
            raise ValueError(f"{path} was measured on tiny shapes (gpu_cost.py --tiny): not a paper-scale throughput")
        return cls(data["models"], f"{Path(path).name} ({data.get('device', '?')})", data.get("forward_batch"))

    def _closest(self, model: str, prefix: str, n: int) -> tuple[int, float] | None:
        """(length, padded tokens/s) of ``model``'s timing ``<prefix><length>`` at the measured length closest
        to ``n`` (None: not measured)."""
        runs = {int(k.removeprefix(prefix)): v["tokens_per_s"] for k, v in self.models.get(model, {}).items()
                if k.startswith(prefix) and k.removeprefix(prefix).isdigit()}  # fmt: skip
        if not runs:
            return None
        m = min(runs, key=lambda m: (abs(m - n), m))
        return m, runs[m]

    def tokens_per_s(self, model: str, n: int, batch: int | None = None) -> float | None:
        """Padded tokens/s of ``model``'s feature pass at the measured length closest to ``n`` (None: not
        measured), at ``forward_batch`` examples a pass, or at ``batch`` (a probe's training batch, which a
        re-encoding probe runs the encoder at): a pass of fewer tokens keeps a GPU less busy. The rate then
        follows the one smaller pass timed (``forward_batch<b>_N<m>``, gpu_cost.py's training batch: 16 x 128
        tokens), as a share of the full batch's rate at its length: that share at or below its tokens a pass,
        none at or above ``forward_batch`` x ``n``, interpolated in the log of the tokens a pass between."""
        run = self._closest(model, "forward_N", n)
        if not run:
            return None
        rate = run[1]
        small = [(int(b), int(m), v["tokens_per_s"]) for k, v in self.models.get(model, {}).items()
                 if (b_m := re.fullmatch(r"forward_batch(\d+)_N(\d+)", k)) for b, m in [b_m.groups()]]  # fmt: skip
        if batch is None or not self.forward_batch or not small:
            return rate
        b, m, small_rate = min(small)
        full = self._closest(model, "forward_N", m)
        if not full or full[0] != m:
            return rate  # no full-batch pass at the small pass's length to compare it with
        share = min(1.0, small_rate / full[1])
        tokens, low, high = batch * n, b * m, self.forward_batch * n
        if tokens >= high or low >= high:
            return rate
        if tokens <= low:
            return rate * share
        return rate * (share + (1 - share) * math.log(tokens / low) / math.log(high / low))

    def average_cost(self, model: str, n: int, kind: str) -> float | None:
        """One example of averaging (``kind`` ``"average"`` or ``"effective"``, `papa.average_attention`) in
        feature passes at the measured length closest to ``n``, against the feature pass at that length (None:
        `benchmarks/gpu_cost.py` did not time it)."""
        run = self._closest(model, "average_N" if kind == "average" else "effective_N", n)
        forward = self._closest(model, "forward_N", run[0]) if run else None
        return forward[1] / run[1] if run and forward and forward[0] == run[0] else None

    def grad_pass_cost(self, model: str, kind: str) -> float | None:
        """``kind`` ``"lambda"`` or ``"trained"``: one gradient step's cost in feature passes."""
        return (self.models.get(model, {}).get("grad_pass_cost") or {}).get(kind)

    def compiled(self, path, mode: str, batch: int = 16) -> Throughput:
        """This throughput with the gradient steps run under config ``compile: <mode>``: each step cost divided
        by its speed-up in ``path`` (``benchmarks/gpu_compile.py``'s JSON: the eager step's median over the
        compiled one's, measured side by side at ``batch``, gpu_cost.py's training batch) for the models and
        steps it measured in ``mode``; the others keep their eager cost (`speedup` says which got one)."""
        import json

        data = json.loads(Path(path).read_text())
        if data.get("tiny"):
            raise ValueError(f"{path} was measured on tiny shapes (gpu_compile.py --tiny): not a paper-scale speed-up")
        if mode == "eager":
            return self
        models = copy.deepcopy(self.models)
        for model, steps in data["models"].items():
            for kind in ("lambda", "trained"):
                eager, fast = steps.get(f"{kind}_batch{batch}_eager"), steps.get(f"{kind}_batch{batch}_{mode}")
                cost = self.grad_pass_cost(model, kind)
                if not cost or not all(r and "s" in r for r in (eager, fast)):
                    continue  # not measured (or failed) in this mode: the eager cost stands
                models[model]["grad_pass_cost"][kind] = cost * fast["s"] / eager["s"]
                models[model].setdefault("compile_speedup", {})[kind] = eager["s"] / fast["s"]
        source = f"{self.source}, compile {mode}: {Path(path).name} ({data.get('device', '?')})"
        return Throughput(models, source, self.forward_batch)

    def speedup(self, model: str, kind: str) -> float:
        """The `compiled` speed-up of ``model``'s ``kind`` gradient steps (1.0: eager, or not measured)."""
        return (self.models.get(model, {}).get("compile_speedup") or {}).get(kind, 1.0)


class Jobs(NamedTuple):
    """A config's GPU jobs as `workflow_jobs` reads them from Snakemake's plan."""

    probes: list  # (model, task, constants, selection, fraction_dynamic): a probe run (probe_trained: a job a seed)
    lambdas: list  # (model, task, constants): rule learn_lambda
    averages: list  # (model, dataset, N, kind): rule average_attention (average, effective)
    mlm: list  # (model, dataset, N): rule mlm


def workflow_jobs(configfile, root=".") -> Jobs:
    """The probe, lambda, averaging and MLM jobs the workflow in ``root`` would run for ``configfile`` (a path
    relative to the current folder, as everywhere else, not to ``root``; or a list of them, later ones updating
    earlier ones as Snakemake merges them), read from Snakemake's own plan (``snakemake --summary``, nothing is
    run or locked)."""
    configfiles = [configfile] if isinstance(configfile, (str, Path)) else list(configfile)
    snakemake = Path(sys.executable).with_name("snakemake")
    # the workflow refuses a results folder whose path holds whitespace (a $TMPDIR of "/scratch/my tmp"), '{' or '}'
    # (wildcards) or '$NAME' (papa.checks' results check): then an empty folder in root, named relative to it, is the
    # results folder Snakemake plans for
    from .checks import _results_folder

    in_root = bool(_results_folder({"results": str(Path(tempfile.gettempdir()) / "papa-cost-x")}))
    with tempfile.TemporaryDirectory(
        prefix=".papa-cost-" if in_root else "papa-cost-", dir=root if in_root else None
    ) as made:
        results = os.path.relpath(made, root) if in_root else made
        p = subprocess.run(
            [
                str(snakemake) if snakemake.exists() else "snakemake",
                "--summary",
                "--nolock",
                "--configfile",
                *(str(Path(c).resolve()) for c in configfiles),  # Snakemake runs in root
                "--config",
                f"results={results}",
            ],
            cwd=root,
            capture_output=True,
            text=True,
        )
        if p.returncode:
            raise RuntimeError(f"snakemake --summary failed for {' '.join(map(str, configfiles))}:\n{p.stderr[-2000:]}")
        found = {field: {} for field in Jobs._fields}  # dicts as ordered sets: a job's several outputs, one key
        for line in p.stdout.splitlines():
            cols = line.split("\t")
            if len(cols) < 3 or cols[2] not in GPU_RULES or not cols[0].startswith(results):
                continue
            f = parse_result(cols[0], results)  # what the file holds, read off its path (papa.layout)
            if f is None or f.file != "result" or f.rule != cols[2]:
                raise RuntimeError(f"unexpected {cols[2]} output {cols[0]}: not papa.layout's {cols[2]} layout")
            # rule probe_trained runs a seed per job, the run's seeds are one row here (`estimate` counts its jobs)
            if f.stage == "probe":
                found["probes"][(f.model, f.task, str(f.constants), f.selection, f.fraction_dynamic)] = None
            elif f.stage == "lambda":
                found["lambdas"][(f.model, f.task, str(f.constants))] = None
            elif f.stage == "constants":  # average, effective (the data-free kinds: rule data_free_constants, no GPU)
                found["averages"][(f.model, f.dataset, f.n, f.kind)] = None
            else:  # mlm: scores.parquet, lambdas.parquet, one job
                found["mlm"][(f.model, f.dataset, f.n)] = None
    return Jobs(**{field: list(keys) for field, keys in found.items()})


def gpu_hours(
    example_passes: float, max_length: int, params: float, tokens_per_s: float, base_params: float = 85e6
) -> float:
    """Hours for ``example_passes`` encoder passes over examples padded to ``max_length``, at
    ``tokens_per_s`` padded tokens per second for a ``base_params`` encoder, scaled linearly by
    parameters (the feed-forward and projections dominate at N <= 256)."""
    return example_passes * max_length / tokens_per_s * (params / base_params) / 3600


def _known(dataset: str, hub_id: str) -> None:
    """Fail naming the table to extend when ``dataset`` or ``hub_id`` has no published size here."""
    for table, key in ((SPLIT_SIZES, dataset), (MODELS, hub_id)):
        if key not in table:
            raise KeyError(
                f"papa.cost has no published size for {key!r}; add it to papa.cost."
                f"{'SPLIT_SIZES' if table is SPLIT_SIZES else 'MODELS'}"
            )


def _published(config: dict, dataset: str) -> str:
    """The `SPLIT_SIZES` key of a config's dataset: its ``name`` (the papa.data task it loads, as the workflow
    reads it), else its key (``datasets: {glue_rte: {source: hub, name: rte}}`` has RTE's sizes)."""
    return dataset_name(dataset, config["datasets"].get(dataset) or {})


def _capped(n: int, cap: int | None) -> int:
    return n if cap is None else min(n, cap)


def split_sizes(config: dict, dataset: str) -> tuple[int, int]:
    """(train, validation) examples of ``dataset`` as the workflow prepares it: the published sizes
    (`SPLIT_SIZES`) drawn down to ``datasets.<dataset>.max_train`` and ``max_validation`` where set."""
    ds, caps = SPLIT_SIZES[_published(config, dataset)], config["datasets"].get(dataset) or {}
    return _capped(ds["train"], caps.get("max_train")), _capped(ds["validation"], caps.get("max_validation"))


def estimate(
    config: dict,
    probe_jobs,
    lambda_jobs,
    tokens_per_s: float,
    disk_budget_mb: float | None,
    measured: Throughput | None = None,
    *,
    average_jobs=(),
    mlm_jobs=(),
) -> pd.DataFrame:
    """One row per probe run, lambda job, averaging job and MLM job of ``config`` (`workflow_jobs`):
    cache size, strategy, encoder passes (examples x passes) and GPU-hours, this project's way and the
    authors'; ``jobs``: the Snakemake jobs the row's hours are split over (a trained-constants run: one per
    seed, rule ``probe_trained``). A probe of fixed matrices whose block sets ``backbone_dropout`` re-encodes
    every epoch of every seed, as the job does (its hidden states differ every pass: no cache), at the eval-mode
    throughput measured (its patched heads then run eager attention, ~7% slower at N = 128: a lower bound).
    ``config`` is read as the workflow reads it (a validated copy,
    `papa.checks.validate_config`: the schema's defaults). Examples: the published split sizes
    (`split_sizes`: drawn down to the config's ``max_train``/``max_validation``, and a stage's own
    ``max_train``, ``averaging.max_examples``, ``analyses.mlm.max_train``/``max_eval``).

    GPU-hours: ``measured``'s throughput for the models it has (column ``throughput``: ``measured``),
    else ``tokens_per_s`` (a BERT-base-sized encoder's feature pass) scaled by padded length and
    parameters, and gradient passes at `GRAD_PASS_COST` (``assumed``). With a `Throughput.compiled`,
    the gradient steps it measured run faster by ``compile_speedup`` (1: eager cost), on both sides (the
    procedures are compared at the same settings). ``runtime_min``: the job's
    time limit as the workflow asks for it (`papa.checks.job_resources`); ``runtime_share``: one
    job's estimate's share of it.

    This project: a probe job encodes train + validation once (``memory``/``disk``), or every epoch
    of every seed (``reencode``; every epoch for all seeds at once under ``sweep.batch_order:
    shared``); trained constants run the encoder with gradients every
    epoch of every seed (``live``). The authors: every seed re-encodes every epoch. Validation is
    counted once per epoch on both sides; lambda jobs are the same on both sides.

    Averaging (``stage`` ``average``, ``task``: the corpus, ``constants``: the kind; strategy ``forward``):
    one pass over the corpus's train split at `Throughput.average_cost` feature passes an example
    (``throughput`` ``measured``), or at `AVERAGE_PASS_COST` plus, for effective attention, `EFFECTIVE_HEAD_S`
    a head scaled by (N / 128)^2 (``measured forward``: the feature pass is the model's own; ``assumed``:
    the scaled one). MLM (``stage`` ``mlm``, ``task``: the corpus; `papa.mlm`): the lambdas' gradient passes
    (every epoch over the training text, `Throughput.grad_pass_cost` ``lambda`` at its eager cost: config
    ``compile`` does not reach this rule) and, per fraction of ``sweep.fraction_dynamic``, the forward passes
    of a fresh probe's training per seed of ``sweep.seeds`` (head ``probe``, every epoch: masks are redrawn,
    nothing is cached) and of its scoring of the held-out text (the pretrained head: one scoring). Both are
    the same on both sides.
    """
    config = validate_config(copy.deepcopy(config))  # the schema's defaults, as the workflow sees them
    cache = config["cache"]
    dtype, budget = cache["dtype"], cache["budget_mb"]
    seeds = len(config["sweep"]["seeds"])
    reencoded_seeds = 1 if config["sweep"]["batch_order"] == "shared" else seeds  # encoder passes per epoch
    rows = []

    def pass_hours(hub_id: str, N: int, batch: int | None = None) -> tuple[float, bool]:
        """Hours of one example-pass (N padded tokens) at the model's measured rate (at ``batch`` examples a pass:
        `Throughput.tokens_per_s`), or the scaled assumption; and whether it was measured."""
        tps = measured.tokens_per_s(hub_id, N, batch) if measured else None
        return (N / tps / 3600 if tps else gpu_hours(1, N, MODELS[hub_id][2], tokens_per_s)), bool(tps)

    def row(stage, model, task, constants, N, epochs, passes, hours, throughput, rule, rule_task=None, **extra):
        return {
            "stage": stage,
            "model": model,
            "task": task,
            "constants": constants,
            "selection": None,
            "fraction_dynamic": None,
            "N": N,
            "epochs": epochs,
            "seeds": 1,
            "jobs": 1,
            "cache_mb": 0.0,
            "strategy": "live",
            "passes_ours": passes,
            "passes_authors": passes,
            "throughput": throughput,
            # config compile: the gradient steps' measured speed-up in it (Throughput.compiled; 1: eager)
            "compile_speedup": 1.0,
            "gpu_h_ours": hours,
            "gpu_h_authors": hours,
            # the job's first-attempt time limit (resources.<rule>, tasks.<t>.resources), and the share of it
            # the estimate fills: a job near 1 risks a TIMEOUT on a GPU a little slower than the measured one
            "runtime_min": job_resources(config, rule, rule_task)["runtime"],
            **extra,
        }

    for stage, jobs in (("probe", probe_jobs), ("lambda", lambda_jobs)):
        for job in jobs:
            m, t = job[0], job[1]
            task, hub_id = config["tasks"][t], config["models"][m]
            _known(_published(config, task["dataset"]), hub_id)
            L, H, params = MODELS[hub_id]
            hp = task[stage]  # tasks.<t>.lambda: complete after validation (the probe's where it gives none)
            N, epochs = int(task["max_length"]), int(hp["epochs"])
            train, validation = split_sizes(config, task["dataset"])
            train = _capped(train, hp.get("max_train"))
            kept = min(SPLIT_SIZES[_published(config, task["dataset"])]["tokens"], N)
            nbytes = features_nbytes(round((train + validation) * kept), L + 1, H, dtype)
            per_epoch = train + validation
            jobs, rule = 1, "probe"
            if stage == "lambda":
                strategy, ours, grad, rule = "live", epochs * per_epoch, True, "learn_lambda"
                authors = ours
            elif ConstantsSpec.parse(job[2]).trained:  # rule probe_trained: a job per seed
                strategy, ours, grad, jobs, rule = "live", seeds * epochs * per_epoch, True, seeds, "probe_trained"
                authors = ours
            else:  # backbone_dropout: hidden states differ every pass, re-encoded as the job does (`prepare_features`)
                cacheable = not hp.get("backbone_dropout")
                strategy = choose_strategy(nbytes, cache["strategy"], budget, disk_budget_mb, cacheable=cacheable)
                ours = per_epoch * (reencoded_seeds * epochs if strategy == "reencode" else 1)
                grad, authors = False, seeds * epochs * per_epoch
            per_pass, is_measured = pass_hours(hub_id, N)
            grad_kind = "lambda" if stage == "lambda" else "trained"
            grad_cost = measured.grad_pass_cost(hub_id, grad_kind) if is_measured else None
            factor = (grad_cost or GRAD_PASS_COST) if grad else 1.0
            speedup = measured.speedup(hub_id, grad_kind) if grad and grad_cost else 1.0  # grad_cost: measured
            hours, hours_authors = factor * per_pass * ours, factor * per_pass * authors
            if not grad:  # a frozen probe's encoder passes over its training text at the probe's batch, not the
                # cache's, where it re-encodes (the authors always): fewer tokens a pass, a lower rate
                per_small = pass_hours(hub_id, N, int(hp["batch_size"]))[0]
                per_train_epoch = train * per_small + validation * per_pass
                hours_authors = seeds * epochs * per_train_epoch
                if strategy == "reencode":
                    hours = reencoded_seeds * epochs * per_train_epoch
            rows.append(
                row(stage, m, t, job[2], N, epochs, ours, hours,
                    "measured" if is_measured else "assumed", rule, t,
                    selection=job[3] if stage == "probe" else None,
                    fraction_dynamic=job[4] if stage == "probe" else None,
                    seeds=seeds if stage == "probe" else 1, jobs=jobs, cache_mb=nbytes / MB, strategy=strategy,
                    passes_authors=authors, compile_speedup=speedup, gpu_h_authors=hours_authors)
            )  # fmt: skip

    for m, d, N, kind in average_jobs:
        hub_id = config["models"][m]
        _known(_published(config, d), hub_id)
        L, H, _ = MODELS[hub_id]
        examples = _capped(split_sizes(config, d)[0], config["averaging"]["max_examples"])
        per_pass, is_measured = pass_hours(hub_id, N)
        cost = measured.average_cost(hub_id, N, kind) if is_measured else None
        throughput = "measured" if cost else "measured forward" if is_measured else "assumed"
        if cost is None:
            extra_s = EFFECTIVE_HEAD_S * L * (H // HEAD_WIDTH) * (N / 128) ** 2 if kind == "effective" else 0.0
            cost = AVERAGE_PASS_COST + extra_s / (per_pass * 3600)
        hours = cost * per_pass * examples
        rows.append(row("average", m, d, kind, N, 1, examples, hours, throughput, "average_attention",
                        strategy="forward"))  # fmt: skip

    mlm = config["analyses"]["mlm"] or {}
    for m, d, N in mlm_jobs:
        hub_id = config["models"][m]
        _known(_published(config, d), hub_id)
        train, validation = split_sizes(config, d)
        train, scored = _capped(train, mlm["max_train"]), _capped(validation, mlm["max_eval"])
        epochs, fractions = int(mlm["epochs"]), len(config["sweep"]["fraction_dynamic"])
        grad = epochs * train  # the lambdas: every epoch over the training text
        # per fraction, a probe per seed trained and scoring (head probe); the pretrained head scores once
        forward = fractions * (seeds * (epochs * train + scored) if mlm["head"] == "probe" else scored)
        per_pass, is_measured = pass_hours(hub_id, N)
        grad_cost = measured.grad_pass_cost(hub_id, "lambda") if is_measured else None
        grad_cost = grad_cost * measured.speedup(hub_id, "lambda") if grad_cost else GRAD_PASS_COST  # eager
        hours = per_pass * (grad_cost * grad + forward)
        rows.append(row("mlm", m, d, METHOD_CONSTANTS, N, epochs, grad + forward, hours,
                        "measured" if is_measured else "assumed", "mlm"))  # fmt: skip

    df = pd.DataFrame(rows)
    df["runtime_share"] = df["gpu_h_ours"] / df["jobs"] * 60 / df["runtime_min"]  # of one job's limit
    return df
