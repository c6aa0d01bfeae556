"""The rehearsal sample (what CI runs of config/rehearsal.yaml; `make rehearse` runs it whole): its own file, the
longest of the suite, so that pytest-xdist (`make test`, one file per worker) gives it a worker of its own and
spreads test_rehearsal.py's other tests over the rest."""

import time

import pandas as pd
import pytest
import yaml

from tests.test_rehearsal import REHEARSAL, load
from tests.test_workflow import copy_repo, job_counts, smk


def rehearsal_sample(cfg: dict) -> dict:
    """rehearsal.yaml cut to CI's budget (84 jobs instead of 384) with every rule, model family, task shape and
    metric still in it: the fractions 1, 0.5 and 0 (the ends feed the summary's baseline and Fig. 3), one seed;
    BERT, RoBERTa and DeBERTa on a pair task (Fig. 3 compares models on a shared task) and on the entity,
    single-sentence and POS task respectively, ELECTRA on the MLM probe only; the analyses on the POS task with
    three constant kinds (one trained) and two head orders."""
    cfg = yaml.safe_load(yaml.safe_dump(cfg))
    cfg["sweep"].update(fraction_dynamic=[1, 0.5, 0], seeds=cfg["sweep"]["seeds"][:1])
    cfg["model_tasks"] = {
        "bert": ["mrpc", "ner"],
        "roberta": ["mrpc", "cola"],
        "deberta": ["mrpc", "pos"],
        "electra": [],
    }
    an = cfg["analyses"]
    an.update(
        tasks=["pos"], constant_kinds=["average", "effective", "toeplitz_trained"], head_orders=["lambda", "random"]
    )
    an["mlm"]["models"] = ["electra"]
    return cfg


@pytest.mark.slow
def test_rehearsal_sample_runs_every_rule_family_and_task_kind(tmp_path):
    """What CI runs of the rehearsal (the full run is `make rehearse`): from scratch, builds included, to the
    tables and figures; the sample's DAG has every rule of the full rehearsal's."""
    repo = copy_repo(tmp_path / "repo")
    full = load(REHEARSAL)
    cfg = rehearsal_sample(full)
    assert set(cfg["analyses"]["tasks"]) <= {t for ts in cfg["model_tasks"].values() for t in ts}

    def shapes(c):  # (single sentence | sentence pair | tokens, metrics) of every task that runs
        run = {t for m in c["models"] for t in c.get("model_tasks", {}).get(m, c["tasks"])}
        ds = [c["datasets"][c["tasks"][t]["dataset"]] for t in run]
        kinds = {"tokens" if d.get("format") == "conll" else "pair" if "text_b_column" in d else "single" for d in ds}
        return kinds, {m for t in run for m in c["tasks"][t]["metrics"]}

    assert shapes(cfg) == shapes(full)
    (repo / "config" / "sample.yaml").write_text(yaml.safe_dump(cfg))
    dry = job_counts(smk(repo, "-n", "--configfile", "config/sample.yaml").stdout)
    assert set(dry) == set(job_counts(smk(repo, "-n", "--configfile", REHEARSAL).stdout)), dry
    assert sum(dry.values()) <= 90, dry  # CI's budget: ~3.5 s of start-up per job
    t0 = time.monotonic()
    smk(repo, "--cores", "all", "--configfile", "config/sample.yaml", timeout=1800)
    print(f"rehearsal sample: {sum(dry.values())} jobs, {time.monotonic() - t0:.0f} s")
    res = repo / cfg["results"] / "tables"
    probe = pd.read_parquet(res / "probe.parquet")
    for model, tasks in cfg["model_tasks"].items():
        for task in tasks:
            got = probe[(probe.model == model) & (probe.task == task) & (probe.selection == "lambda")]
            assert set(got.metric) == set(cfg["tasks"][task]["metrics"]), (model, task)
            assert set(got.fraction_dynamic) == {1.0, 0.5, 0.0} and got.score.notna().all(), (model, task)
    an = cfg["analyses"]
    orders = probe[probe.task.isin(an["tasks"])]
    assert set(orders.selection) == set(an["head_orders"])
    assert set(orders.constants) >= set(an["constant_kinds"]) | {f"average@{c}" for c in an["cross_corpus"]}
    mlm = pd.read_parquet(res / "mlm.parquet")
    assert set(mlm.model) == {"electra"} and set(mlm["head"]) == {"probe"}
    for table in ("summary", "lambdas", "constant_kinds", "patterns"):
        assert len(pd.read_parquet(res / f"{table}.parquet")), table
    plots = {p.name for p in (repo / cfg["results"] / "plots").glob("*.png")}
    assert {"fraction_curves.png", "models_compared.png", "constant_kinds.png", "head_orders.png"} <= plots, plots
