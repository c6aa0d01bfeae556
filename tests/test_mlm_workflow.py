"""The MLM stage (Sec. 5.5) through the workflow, in its own repository copy: its own file so that
pytest-xdist (`make test`, one file per worker) runs it beside test_workflow.py's smoke and chaos runs."""

import re

import numpy as np
import pandas as pd
import pytest

from tests.test_workflow import copy_repo, job_counts, smk, write_config

pytestmark = pytest.mark.slow  # a whole workflow: `make check` leaves it to `make test`


def test_mlm_stage_on_a_tiny_random_masked_lm(tmp_path):
    """Sec. 5.5 through the workflow: a tiny random BertForMaskedLM and a tiny ELECTRA discriminator
    saved as local folders (with MiniLM's tokenizer), MLM-only models (model_tasks: []), go through
    averaging, MLM lambdas and the per-fraction curve with the paper's trained probe; then the BERT
    one with its frozen pretrained head."""
    import transformers as tf

    from papa.models import resolve_model_path

    repo = copy_repo(tmp_path / "repo")
    tok = tf.AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    sizes = dict(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    tf.set_seed(0)
    for name, model in (
        ("tinymlm", tf.BertForMaskedLM(tf.BertConfig(**sizes))),
        ("tinyelectra", tf.ElectraForPreTraining(tf.ElectraConfig(**sizes, embedding_size=16))),
    ):
        model.save_pretrained(repo / name)
        tok.save_pretrained(repo / name)

    def edit(c, head="probe", models=("tinymlm", "tinyelectra")):
        c["results"] = "results-mlm"
        c["models"].update({m: str(repo / m) for m in models})
        c["model_tasks"] = {m: [] for m in models}
        c["datasets"]["wiki"] = {"source": "package", "max_train": 48, "max_validation": 24}
        c["analyses"]["mlm"] = {
            "models": list(models),
            "head": head,
            "dataset": "wiki",
            "max_length": 32,
            "batch_size": 8,
            "epochs": 1,
            "lr": 1e-3,
            "lambda": {"extra_lr": 0.05},
        }

    cfg = write_config(repo, "mlm.yaml", edit)
    # MLM-only models: no probe, lambda or patterns job of the task sweep
    planned = smk(repo, "-n", "--configfile", cfg).stdout
    assert "mlm/tinyelectra" in planned and not re.search(r"(probe|lambda|patterns)/tiny", planned)
    smk(repo, "results-mlm/tables/mlm.parquet", "--cores", "2", "--configfile", cfg)
    table = pd.read_parquet(repo / "results-mlm/tables/mlm.parquet")
    assert table.model.tolist() == ["tinyelectra"] * 3 + ["tinymlm"] * 3 and set(table["head"]) == {"probe"}
    assert table.fraction_dynamic.tolist() == [1.0, 0.5, 0.0] * 2 and table.n_dynamic.tolist() == [8, 4, 0] * 2
    assert table.n_eval.eq(24).all() and np.isfinite(table.neg_log_ppl).all()
    assert table.groupby("model")["drop"].first().eq(0).all() and (table.perplexity > 1).all()
    assert (repo / "results-mlm/plots/mlm.png").stat().st_size > 1000
    lam = pd.read_parquet(repo / "results-mlm/mlm/tinyelectra/wiki/N32/lambdas.parquet")
    assert sorted(lam["rank"]) == list(range(8))
    # the frozen pretrained head (BERT only: ELECTRA's discriminator has none) reruns that job and the table
    cfg2 = write_config(repo, "mlm2.yaml", lambda c: edit(c, "pretrained", ("tinymlm",)))
    counts = job_counts(smk(repo, "results-mlm/tables/mlm.parquet", "-n", "--configfile", cfg2).stdout)
    assert counts == {"mlm": 1, "mlm_table": 1}, counts
    smk(repo, "results-mlm/tables/mlm.parquet", "--cores", "2", "--configfile", cfg2)
    table = pd.read_parquet(repo / "results-mlm/tables/mlm.parquet")
    assert table.model.tolist() == ["tinymlm"] * 3 and set(table["head"]) == {"pretrained"}
    assert np.isfinite(table.neg_log_ppl).all() and "train_loss" not in table
    # an MLM setting is part of the job: changing it reruns the MLM job and the table only
    cfg3 = write_config(
        repo, "mlm3.yaml", lambda c: (edit(c, "pretrained", ("tinymlm",)), c["analyses"]["mlm"].update(mask_prob=0.2))
    )
    counts = job_counts(smk(repo, "results-mlm/tables/mlm.parquet", "-n", "--configfile", cfg3).stdout)
    assert counts == {"mlm": 1, "mlm_table": 1}, counts
