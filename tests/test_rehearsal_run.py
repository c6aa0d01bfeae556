"""config/rehearsal.yaml run end to end: a sample of it in `make test` (CI), all of it in `make rehearse`.

The sample is one workflow run from scratch (a module fixture, 70 jobs) checked by several tests: its plan, its
probe table, its MLM table, its other tables and figures. The builders, the drift test against paper.yaml and the
dry runs are in tests/test_rehearsal.py, a file of its own, so that pytest-xdist (`make test`: one file per worker)
runs them on another worker while this file's run takes one worker from the start (tests/conftest.py).
"""

import json
import time

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.test_rehearsal import REHEARSAL, load
from tests.test_workflow import assert_jobs_read_their_inputs, copy_repo, job_counts, ran_rules, recording_reads, smk

pytestmark = pytest.mark.slow  # whole workflows: `make check` leaves them to `make test`


# ----------------------------------------------------------------------------- the rehearsal sample (CI)


def rehearsal_sample(cfg: dict) -> dict:
    """rehearsal.yaml cut to CI's budget (70 jobs instead of 389) with every rule, model family, task shape and
    metric still in it: the fractions 1, 0.5 and 0 (the ends feed the summary's baseline and Fig. 3), one seed;
    BERT, RoBERTa and DeBERTa on a pair task (Fig. 3 compares the models on a task all of them run) and on the
    entity, single-sentence and POS task respectively, ELECTRA on the MLM probe only (over the sentences of CoLA,
    which RoBERTa's probes read: the MLM stage's data set is a setting, built and read as every other); the
    analyses on the POS task with a data-free kind trained (rules data_free_constants and probe_trained) and two
    head orders. Left to tests that cost CI less (the sample had 79 jobs): the effective and cross-corpus
    matrices (the smoke run's, tests/test_workflow.py: the same averaging and probe rules) and WikiText's builder
    (tests/test_rehearsal.py)."""
    cfg = yaml.safe_load(yaml.safe_dump(cfg))
    cfg["sweep"].update(fraction_dynamic=[1, 0.5, 0], seeds=cfg["sweep"]["seeds"][:1])
    cfg["model_tasks"] = {
        "bert": ["mrpc", "ner"],
        "roberta": ["mrpc", "cola"],
        "deberta": ["mrpc", "pos"],
        "electra": [],
    }
    an = cfg["analyses"]
    an.update(tasks=["pos"], constant_kinds=["average", "toeplitz_trained"], head_orders=["lambda", "random"],
              cross_corpus=[])  # fmt: skip
    an["mlm"].update(models=["electra"], dataset="cola")
    return cfg


SAMPLE = rehearsal_sample(load(REHEARSAL))


@pytest.fixture(scope="module")
def sample_repo(tmp_path_factory):
    """A copy of the repository with the sample's config as config/sample.yaml (dry-run first, then run)."""
    repo = copy_repo(tmp_path_factory.mktemp("sample") / "repo")
    (repo / "config" / "sample.yaml").write_text(yaml.safe_dump(SAMPLE))
    return repo


def test_rehearsal_sample_has_every_rule_task_shape_and_metric(sample_repo):
    """The sample's DAG has every rule of the full rehearsal's, and its tasks every shape (single sentence,
    sentence pair, tokens) and metric of the full rehearsal's, within CI's budget of jobs."""
    full = load(REHEARSAL)
    assert set(SAMPLE["analyses"]["tasks"]) <= {t for ts in SAMPLE["model_tasks"].values() for t in ts}

    def shapes(c):  # (single sentence | sentence pair | tokens, metrics) of every task that runs
        run = {t for m in c["models"] for t in c.get("model_tasks", {}).get(m, c["tasks"])}
        ds = [c["datasets"][c["tasks"][t]["dataset"]] for t in run]
        kinds = {"tokens" if d.get("format") == "conll" else "pair" if "text_b_column" in d else "single" for d in ds}
        return kinds, {m for t in run for m in c["tasks"][t]["metrics"]}

    assert shapes(SAMPLE) == shapes(full)
    dry = job_counts(smk(sample_repo, "-n", "--configfile", "config/sample.yaml").stdout)
    assert set(dry) == set(job_counts(smk(sample_repo, "-n", "--configfile", REHEARSAL).stdout)), dry
    assert sum(dry.values()) <= 75, dry  # CI's budget: 7-10 s of CPU per job, nearly all of it start-up


@pytest.fixture(scope="module")
def sample_run(sample_repo):
    """The rehearsal sample run from scratch, builds included, to the tables and figures: its results folder."""
    t0 = time.monotonic()
    with recording_reads(sample_repo.parent / "reads", sample_repo) as reads:  # what each job reads (opens_audit)
        said = smk(sample_repo, "--cores", "all", "--configfile", "config/sample.yaml", timeout=1800, env=reads)
    print(f"rehearsal sample: {time.monotonic() - t0:.0f} s")
    (sample_repo.parent / "rules.json").write_text(json.dumps(sorted(ran_rules(said.stdout + said.stderr))))
    return sample_repo / SAMPLE["results"]


def test_every_file_a_rehearsal_sample_job_reads_in_the_repository_is_its_input(sample_run):
    """As the smoke run's test (tests/test_workflow.py), for the rules the smoke run lacks: the builders (the
    models' and data sets' files, the corpora they are built from), the local data path, the MLM stage and its
    table, trained data-free kinds."""
    repo = sample_run.parent
    ran = set(json.loads((repo.parent / "rules.json").read_text()))
    assert {"build_model", "build_data", "mlm", "mlm_table"} <= ran, sorted(ran)
    assert_jobs_read_their_inputs(repo.parent / "reads", repo, ran)


def test_rehearsal_sample_probes_every_model_task_metric_and_fraction(sample_run):
    probe = pd.read_parquet(sample_run / "tables" / "probe.parquet")
    for model, tasks in SAMPLE["model_tasks"].items():
        for task in tasks:
            got = probe[(probe.model == model) & (probe.task == task) & (probe.selection == "lambda")]
            assert set(got.metric) == set(SAMPLE["tasks"][task]["metrics"]), (model, task)
            assert set(got.fraction_dynamic) == {1.0, 0.5, 0.0} and got.score.notna().all(), (model, task)
    an = SAMPLE["analyses"]
    orders = probe[probe.task.isin(an["tasks"])]
    assert set(orders.selection) == set(an["head_orders"])
    assert set(orders.constants) >= set(an["constant_kinds"]) | {f"average@{c}" for c in an["cross_corpus"]}


def test_rehearsal_sample_mlm_table_of_an_mlm_only_model(sample_run):
    mlm = pd.read_parquet(sample_run / "tables" / "mlm.parquet")  # ELECTRA: MLM only (model_tasks: []), trained probe
    assert set(mlm.model) == {"electra"} and set(mlm["head"]) == {"probe"}
    assert mlm.fraction_dynamic.tolist() == [1.0, 0.5, 0.0] and np.isfinite(mlm.neg_log_ppl).all()
    assert mlm["drop"].iloc[0] == 0 and (mlm.perplexity > 1).all()


def test_rehearsal_sample_writes_the_other_tables_and_the_figures(sample_run):
    for table in ("summary", "lambdas", "constant_kinds", "patterns"):
        assert len(pd.read_parquet(sample_run / "tables" / f"{table}.parquet")), table
    plots = {p.name for p in (sample_run / "plots").glob("*.png")}
    assert {"fraction_curves.png", "models_compared.png", "constant_kinds.png", "head_orders.png"} <= plots, plots


# ----------------------------------------------------------------------------- the full rehearsal


@pytest.mark.slow
@pytest.mark.rehearsal  # `make rehearse` (its time below), beyond CI's budget; `make test` runs the sample above
def test_full_rehearsal_writes_every_table(tmp_path):
    """`snakemake --cores all --configfile config/rehearsal.yaml` from scratch, builds included.

    Budget: 389 jobs, 30 min; measured 25 min 23 s on the 2-core machine with nothing beside it
    (2026-12-08; 55 min on a slow day of the same machines, 2026-12-07); 20 min 4 s before the kernel
    recorded native code's reads (2026-11-26, at 408 jobs, before each split got its own prepare_data job); at
    384 jobs, before trained constants ran a job per seed, 22 min 47 s in CI and 25 min with other work beside
    it: ~7 s of CPU per job, nearly all of it the Python/torch/transformers start-up of each job, not the tiny
    models. Every (model, task, fraction) of the sweep, the analyses' kinds and head orders, and the MLM table
    of all four families must be there, and every job read no file of the checkout it did not declare (as the sample's).
    """
    repo = copy_repo(tmp_path / "repo")
    cfg = load(REHEARSAL)
    t0 = time.monotonic()
    with recording_reads(tmp_path / "reads", repo) as reads:  # each job's reads (tests/opens_audit)
        said = smk(repo, "--cores", "all", "--configfile", REHEARSAL, timeout=5400, env=reads)
    seconds = time.monotonic() - t0
    assert_jobs_read_their_inputs(tmp_path / "reads", repo, ran_rules(said.stdout + said.stderr))
    res = repo / cfg["results"] / "tables"
    probe = pd.read_parquet(res / "probe.parquet")
    sweep = cfg["sweep"]
    for model in cfg["models"]:
        for task in cfg.get("model_tasks", {}).get(model, cfg["tasks"]):
            tc = cfg["tasks"][task]
            got = probe[(probe.model == model) & (probe.task == task) & (probe.constants == "average")
                        & (probe.selection == "lambda")]  # fmt: skip
            assert sorted(got.fraction_dynamic.unique()) == sorted(float(f) for f in sweep["fraction_dynamic"]), (
                model,
                task,
            )
            assert set(got.seed) == set(sweep["seeds"]), (model, task)
            assert set(got.metric) == set(tc["metrics"]), (model, task)
    an = cfg["analyses"]
    kinds = pd.read_parquet(res / "constant_kinds.parquet")
    assert len(kinds)
    orders = probe[probe.task.isin(an["tasks"])]
    assert set(orders.selection) == set(an["head_orders"])
    assert set(orders.constants) >= set(an["constant_kinds"]) | {f"average@{c}" for c in an["cross_corpus"]}
    mlm = pd.read_parquet(res / "mlm.parquet")
    assert set(mlm.model) == set(an["mlm"]["models"])
    assert len(pd.read_parquet(res / "patterns.parquet"))
    print(f"rehearsal: {seconds:.0f} s end to end")
