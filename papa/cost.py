"""Paper-scale cost of the probe and lambda stages (not averaging or the MLM analysis):
hidden-state cache sizes, the cache strategy this project picks (`papa.probe.choose_strategy`),
encoder passes and GPU-hours, next to the authors' procedure (a fresh encoder pass every epoch
of every seed and every fraction).

Estimates, not measurements: split sizes are the published ones, mean word-piece lengths are
approximate (see `DATASETS`). GPU time comes from throughput measured per encoder
(`benchmarks/gpu_cost.py`: each paper encoder's feature pass at its padded length, and its
gradient steps, on one GPU; `Throughput`) or, for a model that file lacks, from one forward
throughput scaled by padded length and model size (`gpu_hours`, `GRAD_PASS_COST`).
"""

from __future__ import annotations

import copy
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .checks import job_resources, validate_config
from .probe import MB, choose_strategy, features_nbytes
from .spec import ConstantsSpec

#: Published split sizes (examples; validation = the split the paper reports) and the mean number
#: of kept tokens per example: word pieces with [CLS]/[SEP] for sequence tasks (every valid token
#: is cached), words for CoNLL-2003 (only first sub-words are cached).
DATASETS = {
    "cola": dict(train=8_551, validation=1_043, tokens=11.0),
    "sst2": dict(train=67_349, validation=872, tokens=13.0),
    "mrpc": dict(train=3_668, validation=408, tokens=53.0),
    "mnli": dict(train=392_702, validation=9_832, tokens=40.0),  # validation_mismatched
    "conll2003_ner": dict(train=14_041, validation=3_250, tokens=203_621 / 14_041),
    "conll2003_pos": dict(train=14_041, validation=3_250, tokens=203_621 / 14_041),
}
DATASET_SOURCES = (
    "Split sizes: GLUE (Wang et al. 2019) as on the hub (nyu-mll/glue: CoLA 8,551/1,043, SST-2 67,349/872, "
    "MRPC 3,668/408, MNLI 392,702/9,832 validation_mismatched) and CoNLL-2003 (Tjong Kim Sang & De Meulder 2003: "
    "14,041/3,250 sentences, 203,621 training tokens). Word pieces per example (BERT uncased, with specials): "
    "MNLI ~40 and SST-2 ~13 as in the project's method notes; CoLA ~11 and MRPC ~53 (two ~22-word "
    "sentences) are estimates from typical sentence lengths; CoNLL-2003 caches one row per word (14.5 per sentence)."
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


@dataclass(frozen=True)
class Throughput:
    """Measured throughput per encoder: ``models`` is the ``models`` block of
    ``benchmarks/gpu_cost.py``'s JSON (hub id -> its ``forward_N<n>`` feature-pass timings and its
    ``grad_pass_cost``: a gradient step's time per example against the feature pass's)."""

    models: dict
    source: str = ""

    @classmethod
    def load(cls, path) -> Throughput:
        import json

        data = json.loads(Path(path).read_text())
        if data.get("tiny"):
            raise ValueError(f"{path} was measured on tiny shapes (gpu_cost.py --tiny): not a paper-scale throughput")
        return cls(data["models"], f"{Path(path).name} ({data.get('device', '?')})")

    def tokens_per_s(self, model: str, n: int) -> float | None:
        """Padded tokens/s of ``model``'s feature pass at the measured length closest to ``n`` (None: not
        measured)."""
        runs = {int(k.removeprefix("forward_N")): v["tokens_per_s"] for k, v in self.models.get(model, {}).items()
                if k.startswith("forward_N") and k.removeprefix("forward_N").isdigit()}  # fmt: skip
        return runs[min(runs, key=lambda m: (abs(m - n), m))] if runs else None

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
        return Throughput(models, f"{self.source}, compile {mode}: {Path(path).name} ({data.get('device', '?')})")

    def speedup(self, model: str, kind: str) -> float:
        """The `compiled` speed-up of ``model``'s ``kind`` gradient steps (1.0: eager, or not measured)."""
        return (self.models.get(model, {}).get("compile_speedup") or {}).get(kind, 1.0)


def workflow_jobs(configfile, root=".") -> tuple[list[tuple], list[tuple]]:
    """The probe jobs (model, task, constants, selection, fraction_dynamic) and lambda jobs (model, task,
    constants) the workflow in ``root`` would run for ``configfile``, read from Snakemake's own
    plan (``snakemake --summary``, nothing is run or locked)."""
    snakemake = Path(sys.executable).with_name("snakemake")
    with tempfile.TemporaryDirectory(prefix="papa-cost-") as results:
        p = subprocess.run(
            [
                str(snakemake) if snakemake.exists() else "snakemake",
                "--summary",
                "--nolock",
                "--configfile",
                str(configfile),
                "--config",
                f"results={results}",
            ],
            cwd=root,
            capture_output=True,
            text=True,
        )
        if p.returncode:
            raise RuntimeError(f"snakemake --summary failed for {configfile}:\n{p.stderr[-2000:]}")
        probes, lambdas = {}, {}
        for line in p.stdout.splitlines():
            cols = line.split("\t")
            if len(cols) < 3 or not cols[0].startswith(results):
                continue
            parts = Path(cols[0]).relative_to(results).parts
            # probe/{model}/{task}/{constants}/{selection}/fraction_dynamic={f}/seed{s}.parquet; rule probe_trained
            # runs a seed per job, the run's seeds are one row here (`estimate` counts its jobs)
            if cols[2] in ("probe", "probe_trained"):
                key, _, value = parts[5].partition("=")
                if key != "fraction_dynamic":
                    raise RuntimeError(f"unexpected probe path {cols[0]}: no fraction_dynamic=<value> segment")
                probes[(*parts[1:5], float(value))] = None
            elif cols[2] == "learn_lambda":  # lambda/{model}/{task}/{constants}/lambdas.parquet
                lambdas[tuple(parts[1:4])] = None
    return list(probes), list(lambdas)


def gpu_hours(
    example_passes: float, max_length: int, params: float, tokens_per_s: float, base_params: float = 85e6
) -> float:
    """Hours for ``example_passes`` encoder passes over examples padded to ``max_length``, at
    ``tokens_per_s`` padded tokens per second for a ``base_params`` encoder, scaled linearly by
    parameters (the feed-forward and projections dominate at N <= 256)."""
    return example_passes * max_length / tokens_per_s * (params / base_params) / 3600


def estimate(
    config: dict,
    probe_jobs,
    lambda_jobs,
    tokens_per_s: float,
    disk_budget_mb: float | None,
    measured: Throughput | None = None,
) -> pd.DataFrame:
    """One row per probe run or lambda job of ``config`` (`workflow_jobs`): cache size, strategy,
    encoder passes (examples x passes) and GPU-hours, this project's way and the authors'; ``jobs``:
    the Snakemake jobs the row's hours are split over (a trained-constants run: one per seed, rule
    ``probe_trained``). ``config`` is read as the workflow reads it (a validated copy,
    `papa.checks.validate_config`: the schema's defaults).

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
    """
    config = validate_config(copy.deepcopy(config))  # the schema's defaults, as the workflow sees them
    cache = config["cache"]
    dtype, budget = cache["dtype"], cache["budget_mb"]
    seeds = len(config["sweep"]["seeds"])
    reencoded_seeds = 1 if config["sweep"]["batch_order"] == "shared" else seeds  # encoder passes per epoch
    rows = []
    for stage, jobs in (("probe", probe_jobs), ("lambda", lambda_jobs)):
        for job in jobs:
            m, t = job[0], job[1]
            task = config["tasks"][t]
            for table, key in ((DATASETS, task["dataset"]), (MODELS, config["models"][m])):
                if key not in table:
                    raise KeyError(
                        f"papa.cost has no published size for {key!r}; add it to papa.cost."
                        f"{'DATASETS' if table is DATASETS else 'MODELS'}"
                    )
            ds = DATASETS[task["dataset"]]
            L, H, params = MODELS[config["models"][m]]
            hp = task[stage]  # tasks.<t>.lambda: complete after validation (the probe's where it gives none)
            N, epochs = int(task["max_length"]), int(hp["epochs"])
            kept = min(ds["tokens"], N)
            nbytes = features_nbytes(round((ds["train"] + ds["validation"]) * kept), L + 1, H, dtype)
            per_epoch = ds["train"] + ds["validation"]
            jobs, rule = 1, "probe"
            if stage == "lambda":
                strategy, ours, grad, rule = "live", epochs * per_epoch, True, "learn_lambda"
                authors = ours
            elif ConstantsSpec.parse(job[2]).trained:  # rule probe_trained: a job per seed
                strategy, ours, grad, jobs, rule = "live", seeds * epochs * per_epoch, True, seeds, "probe_trained"
                authors = ours
            else:
                strategy = choose_strategy(nbytes, cache["strategy"], budget, disk_budget_mb)
                ours = per_epoch * (reencoded_seeds * epochs if strategy == "reencode" else 1)
                grad, authors = False, seeds * epochs * per_epoch
            hub_id = config["models"][m]
            tps = measured.tokens_per_s(hub_id, N) if measured else None
            grad_kind = "lambda" if stage == "lambda" else "trained"
            grad_cost = measured.grad_pass_cost(hub_id, grad_kind) if measured and tps else None
            factor = (grad_cost or GRAD_PASS_COST) if grad else 1.0
            speedup = measured.speedup(hub_id, grad_kind) if grad and grad_cost else 1.0  # grad_cost: measured
            # hours of one example-pass: N padded tokens at the model's measured rate, or the scaled assumption
            per_pass = N / tps / 3600 if tps else gpu_hours(1, N, params, tokens_per_s)
            rows.append(
                {
                    "stage": stage,
                    "model": m,
                    "task": t,
                    "constants": job[2],
                    "selection": job[3] if stage == "probe" else None,
                    "fraction_dynamic": job[4] if stage == "probe" else None,
                    "N": N,
                    "epochs": epochs,
                    "seeds": seeds if stage == "probe" else 1,
                    "jobs": jobs,
                    "cache_mb": nbytes / MB,
                    "strategy": strategy,
                    "passes_ours": ours,
                    "passes_authors": authors,
                    "throughput": "measured" if tps else "assumed",
                    # config compile: the gradient steps' measured speed-up in it (Throughput.compiled; 1: eager)
                    "compile_speedup": speedup,
                    "gpu_h_ours": factor * per_pass * ours,
                    "gpu_h_authors": factor * per_pass * authors,
                    # the job's first-attempt time limit (resources.<rule>, tasks.<t>.resources), and the share of it
                    # the estimate fills: a job near 1 risks a TIMEOUT on a GPU a little slower than the measured one
                    "runtime_min": job_resources(config, rule, t)["runtime"],
                }
            )
    df = pd.DataFrame(rows)
    df["runtime_share"] = df["gpu_h_ours"] / df["jobs"] * 60 / df["runtime_min"]  # of one job's limit
    return df
