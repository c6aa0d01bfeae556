"""The masked-LM analysis (paper Sec. 5.5, Fig. 6a) on tiny random models: the paper's trained
probe (any encoder, ELECTRA's discriminator included) and the frozen pretrained MLM head."""

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

import papa
from papa import pipeline, tables
from papa.io import read_provenance
from papa.mlm import (
    MLMProbe,
    _masked_logits,
    learn_mlm_lambdas,
    mask_tokens,
    masked,
    mlm_curve,
    negative_log_perplexity,
    new_probe,
    train_mlm,
)
from papa.models import resolve_model_path
from papa.probe import TrainConfig
from tests.test_workflow import copy_repo, job_counts, smk, write_config

from .conftest import TINY, tiny_model

MASK, SPECIAL = 3, {1, 2}  # the tiny vocabulary's mask token and [CLS]/[SEP]


def tiny_corpus(n=12, N=16, vocab=120, seed=0, repeat=1) -> papa.Encoded:
    """``n`` random sentences ([CLS]=1 ... [SEP]=2, padding 0) of 5 to N tokens, repeated ``repeat`` times."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((n, N), dtype=np.int64)
    mask = np.zeros((n, N), dtype=np.int64)
    for r in range(n):
        k = rng.integers(5, N + 1)
        ids[r, 1 : k - 1] = rng.integers(5, vocab, k - 2)
        ids[r, 0], ids[r, k - 1] = 1, 2
        mask[r, :k] = 1
    ids, mask = np.tile(ids, (repeat, 1)), np.tile(mask, (repeat, 1))
    return papa.Encoded(ids, mask, np.zeros_like(ids), None, "papa", N)


def masked_lm():
    import transformers as tf

    from papa.models import prepare

    torch.manual_seed(0)
    return prepare(
        tf.BertForMaskedLM(
            tf.BertConfig(
                vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
            )
        ),
        "cpu",
    )


def test_masking_is_seeded_and_keeps_special_tokens():
    enc = tiny_corpus()
    ids, labels = mask_tokens(enc, MASK, SPECIAL, seed=4)
    assert ((labels != -100) == (ids == MASK)).all() and (labels[:, 0] == -100).all()
    assert not np.isin(labels, list(SPECIAL)).any() and ((labels != -100).sum(1) >= 1).all()
    assert np.array_equal(ids, mask_tokens(enc, MASK, SPECIAL, seed=4)[0])
    assert not np.array_equal(ids, mask_tokens(enc, MASK, SPECIAL, seed=5)[0])
    m = masked(enc, MASK, SPECIAL, seed=4)
    assert m.token_level and np.array_equal(m.input_ids, ids) and np.array_equal(m.labels, labels)
    # the share masked is mask_prob of the real, non-special tokens (long rows: the at-least-one rule rarely acts)
    long = tiny_corpus(n=200, N=64, seed=1)
    real = long.attention_mask.astype(bool) & ~np.isin(long.input_ids, list(SPECIAL))
    for prob in (0.15, 0.4):
        share = (mask_tokens(long, MASK, SPECIAL, mask_prob=prob, seed=2)[1] != -100).sum() / real.sum()
        assert abs(share - prob) < 0.02, (prob, share)


DECODERS = [("bert", "tied"), ("bert", "fresh"), ("electra", "fresh")]  # the tiny ELECTRA's embeddings are narrower


@pytest.mark.parametrize(("family", "decoder"), DECODERS)
def test_probe_scores_the_masked_tokens_from_all_layers(family, decoder):
    """MLMProbe: L+1 layers concatenated -> H -> GELU -> vocab; the score reads the masked tokens only."""
    model = tiny_model(family)
    probe = new_probe(model, 0, decoder=decoder)
    assert isinstance(probe, MLMProbe)
    assert probe.dense.in_features == 3 * 32 and probe.dense.out_features == 32  # (L+1) H -> H
    assert probe.decoder.weight.shape == (120, 32) and probe.decoder.bias.shape == (120,)
    assert isinstance(probe.act, torch.nn.GELU) or "gelu" in type(probe.act).__name__.lower()
    enc = tiny_corpus()
    score = negative_log_perplexity(model, enc, MASK, SPECIAL, seed=4, batch_size=5, probe=probe)
    # reference by hand: every hidden state of the masked positions, through the probe
    m = masked(enc, MASK, SPECIAL, seed=4)
    with torch.no_grad():
        hs = model(**m.model_inputs(), output_hidden_states=True).hidden_states
        sel = torch.as_tensor(m.labels != -100)
        x = torch.stack([h[sel] for h in hs], 1)  # [T, L+1, H]
        logp = torch.log_softmax(probe(x), -1)
    ref = logp.gather(1, torch.as_tensor(m.labels)[sel][:, None]).mean().item()
    assert x.shape == (int(sel.sum()), 3, 32)
    assert score == pytest.approx(ref, abs=1e-5) and score < 0
    # the vocabulary-sized output is computed for the masked tokens only
    logits, y = _masked_logits(model, probe, m, np.arange(len(m)))
    assert logits.shape == (int(sel.sum()), 120) and torch.equal(y, torch.as_tensor(m.labels)[sel])


@pytest.mark.parametrize(("decoder", "gain"), [("fresh", 1.0), ("tied", 0.3)])
def test_probe_learns_on_a_repeated_corpus(decoder, gain):
    """(The tied decoder learns slower here: it projects onto a random model's embeddings, which stay frozen.)"""
    model = tiny_model("bert")
    enc = tiny_corpus(n=4, repeat=8)
    cfg = TrainConfig(lr=1e-2, batch_size=8, epochs=6, seed=0)
    probe = new_probe(model, 0, decoder=decoder)
    before = negative_log_perplexity(model, enc, MASK, SPECIAL, probe=probe)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    losses = train_mlm(model, enc, MASK, SPECIAL, cfg, probe=probe)
    assert len(losses) == 6 and losses[-1] < losses[0] - gain
    assert negative_log_perplexity(model, enc, MASK, SPECIAL, probe=probe) > before + gain
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())  # the encoder stays frozen
    # seeded: the same probe again
    again = new_probe(model, 0, decoder=decoder)
    assert train_mlm(model, enc, MASK, SPECIAL, cfg, probe=again) == losses


def test_lambda_one_is_the_original_model_for_the_probe():
    model = tiny_model("bert")
    enc = tiny_corpus()
    C = papa.average_attention(model, enc.batches(4))
    probe, m, idx = new_probe(model, 0, decoder="fresh"), masked(enc, MASK, SPECIAL), np.arange(len(enc))
    with torch.no_grad():
        base = _masked_logits(model, probe, m, idx)[0]
        with papa.patch(model, C, mix=True) as h:
            h.set_lambdas(1.0)
            assert (_masked_logits(model, probe, m, idx)[0] - base).abs().max() < 1e-6
            h.set_lambdas(0.5)  # (a random tiny model's attention moves its outputs only a little)
            assert (_masked_logits(model, probe, m, idx)[0] - base).abs().max() > 1e-5


def test_bert_masking_chooses_the_same_tokens_and_replaces_them_80_10_10():
    """``masking: bert`` (BERT's, transformers' DataCollatorForLanguageModeling's): of the tokens ``mask`` chooses
    (the same ones, the same labels), 80% become the mask token, 10% a random token, 10% stay; the others stay."""
    enc = tiny_corpus(n=600, N=64, seed=3)
    ids, labels = mask_tokens(enc, MASK, SPECIAL, seed=7)
    bert, bert_labels = mask_tokens(enc, MASK, SPECIAL, seed=7, masking="bert", vocab_size=120)
    assert np.array_equal(labels, bert_labels)
    chosen = labels != -100
    assert np.array_equal(bert[~chosen], enc.input_ids[~chosen])  # the tokens not chosen are left as they are
    n = chosen.sum()
    as_mask, kept = (bert[chosen] == MASK).sum() / n, (bert[chosen] == enc.input_ids[chosen]).sum() / n
    other = 1 - as_mask - kept  # a random token (a draw of the kept token itself counts as kept: 1 in 120)
    assert n > 2500 and abs(as_mask - 0.8) < 0.03 and abs(kept - 0.1) < 0.02 and abs(other - 0.1) < 0.02
    assert bert.max() < 120 and len(np.unique(bert[chosen & (bert != MASK) & (bert != enc.input_ids)])) > 50
    assert np.array_equal(bert, mask_tokens(enc, MASK, SPECIAL, seed=7, masking="bert", vocab_size=120)[0])
    with pytest.raises(ValueError, match="give the vocab_size"):
        mask_tokens(enc, MASK, SPECIAL, masking="bert")
    for bad in (-5, 0, True, 120.0, "120"):  # -5 was "mask_token_id must be a token id in [0, -5)"
        for masking in ("mask", "bert"):
            with pytest.raises(ValueError, match=rf"vocab_size must be the vocabulary's size, .*; got {bad!r}"):
                mask_tokens(enc, MASK, SPECIAL, masking=masking, vocab_size=bad)
    assert np.array_equal(mask_tokens(enc, MASK, SPECIAL, seed=7, vocab_size=np.int64(120))[0], ids)
    with pytest.raises(ValueError, match="masking must be one of mask, bert"):
        mask_tokens(enc, MASK, SPECIAL, masking="80/10/10")


def test_mlm_backbone_dropout_trains_with_the_encoders_dropout_and_scores_without():
    """``backbone_dropout`` (the authors' Trainer's train mode) for the MLM probes and lambdas: the encoder's dropout
    acts while they train (other losses than in eval mode, seeded all the same), the model is left in the mode it
    was in, and scoring runs in eval mode (one probe scores alike whatever the option)."""
    model = tiny_model("bert")
    enc = tiny_corpus(n=8, repeat=2)
    cfg = TrainConfig(lr=1e-2, batch_size=4, epochs=2, seed=0)
    plain = train_mlm(model, enc, MASK, SPECIAL, cfg, probe=new_probe(model, 0))
    torch.manual_seed(1)
    on = train_mlm(model, enc, MASK, SPECIAL, cfg, probe=new_probe(model, 0), backbone_dropout=True)
    assert not model.training and on != plain
    torch.manual_seed(1)
    assert train_mlm(model, enc, MASK, SPECIAL, cfg, probe=new_probe(model, 0), backbone_dropout=True) == on
    C = papa.average_attention(model, enc.batches(4))
    lam_plain, _ = learn_mlm_lambdas(model, C, enc, MASK, SPECIAL, cfg)
    lam_on, _ = learn_mlm_lambdas(model, C, enc, MASK, SPECIAL, cfg, backbone_dropout=True)
    assert not model.training and not torch.equal(lam_plain, lam_on)
    # the stage's fields: the block's option, the lambda block's over it
    hp = {**pipeline.MLM_DEFAULTS, "seed": 0, "masking": "bert", "backbone_dropout": True}
    assert pipeline._mlm_settings(hp)["masking"] == "bert"
    assert pipeline._mlm_settings(hp)["backbone_dropout"] and pipeline._mlm_settings(hp)["lambda_backbone_dropout"]
    off = pipeline._mlm_settings({**hp, "lambda": {"backbone_dropout": False}})
    assert off["backbone_dropout"] and not off["lambda_backbone_dropout"]
    default = pipeline._mlm_settings({**pipeline.MLM_DEFAULTS, "seed": 0})
    assert not {"masking", "backbone_dropout", "lambda_backbone_dropout"} & set(default)  # MLMStage's defaults
    stage = pipeline.MLMStage(model="m", constants="c", train="t", validation="v", out_scores="s", out_lambdas="l",
                              fraction_dynamic=[1.0], labels={}, **default)  # fmt: skip
    assert (stage.masking, stage.backbone_dropout, stage.lambda_backbone_dropout) == ("mask", False, False)
    # written out at these defaults, the options are no param of rule mlm (they would rerun its jobs)
    from papa.checks import MLM_OPTION_DEFAULTS, mlm_param

    assert MLM_OPTION_DEFAULTS == {"masking": stage.masking, "backbone_dropout": stage.backbone_dropout,
                                   "decoder": stage.decoder}  # fmt: skip
    block = {"models": ["m"], "dataset": "wiki", "max_length": 128, "lr": 5e-4, "lambda": {"extra_lr": 0.05}}
    written = {**block, **MLM_OPTION_DEFAULTS, "lambda": {"extra_lr": 0.05, "backbone_dropout": False}}
    assert mlm_param(written) == mlm_param(block) == {"lr": 5e-4, "lambda": {"extra_lr": 0.05}}
    on = mlm_param({**block, "backbone_dropout": True, "lambda": {"backbone_dropout": False}})
    assert on == {"lr": 5e-4, "backbone_dropout": True, "lambda": {"backbone_dropout": False}}


def test_mlm_param_reads_the_blocks_backbone_dropout_default_from_one_place(monkeypatch):
    """`papa.checks.mlm_param` drops a ``lambda`` block's ``backbone_dropout`` equal to the MLM block's, a block
    leaving it out taking `MLM_OPTION_DEFAULTS`' value (issue 15: one source of defaults): not a copy of it."""
    import papa.checks as C

    monkeypatch.setitem(C.MLM_OPTION_DEFAULTS, "backbone_dropout", True)  # as if the stage's default changed
    block = {"models": ["m"], "dataset": "wiki", "lr": 5e-4, "lambda": {"backbone_dropout": True}}
    assert C.mlm_param(block) == {"lr": 5e-4}


def test_the_trainers_train_their_parameters_alone_on_a_model_with_trainable_weights():
    """`papa.load_encoder` freezes the model; one a notebook unfroze (or built itself) got a gradient on every weight
    at every step of the lambdas or trained constants: fine-tuning's time and memory, and a stale .grad that a
    later optimizer step of its own would apply (review BV). Each trainer freezes the model while it runs and gives
    requires_grad back: no weight holds a .grad, each still trains after, and what trained equals the frozen
    model's bit for bit."""
    from papa.probe import learn_lambdas, run_probe

    base = tiny_corpus(n=16, seed=1)
    enc = papa.Encoded(base.input_ids, base.attention_mask, base.token_type_ids, np.arange(16) % 2, "papa", 16)
    cfg = TrainConfig(lr=1e-2, extra_lr=0.1, batch_size=4, epochs=1, seed=0)
    out = {}
    for name in ("frozen", "thawed"):
        model = tiny_model("bert")
        if name == "thawed":
            for p in model.parameters():
                p.requires_grad_(True)
        C = papa.average_attention(model, base.batches(8))
        lam, _ = learn_lambdas(model, C, enc, enc, "sequence", 2, ["accuracy"], cfg)
        rows = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg,
                         trainable=lambda m=model, c=C: papa.patch(m, c, trainable_constants=True))  # fmt: skip
        mlm_lam, losses = learn_mlm_lambdas(model, C, base, MASK, SPECIAL, cfg)
        assert all(p.grad is None for p in model.parameters()), name
        assert all(p.requires_grad == (name == "thawed") for p in model.parameters()), name
        out[name] = lam, rows, mlm_lam, losses
    (lam, rows, mlm_lam, losses), again = out["frozen"], out["thawed"]
    assert torch.equal(lam, again[0]) and rows == again[1] and torch.equal(mlm_lam, again[2]) and losses == again[3]
    assert (lam - 0.5).abs().max() > 1e-3 and (mlm_lam - 0.5).abs().max() > 1e-3


def test_the_trainers_still_train_the_models_own_parameters_they_are_handed():
    """`papa.models.frozen` froze every weight of the model while the trainers ran, also those handed to them to
    train (``extra_params``, a ``trainable`` patch's ``parameters()``): a LayerNorm bias trained beside the probe
    (BitFit-style) got no gradient and stayed as it was, without a word (it trained before 392291d). What the trainer
    is handed trains; the model's other weights stay without a gradient."""
    import contextlib

    from papa.probe import run_probe

    base = tiny_corpus(n=16, seed=1)
    enc = papa.Encoded(base.input_ids, base.attention_mask, base.token_type_ids, np.arange(16) % 2, "papa", 16)
    cfg = TrainConfig(lr=1e-2, extra_lr=0.1, batch_size=4, epochs=1, seed=0)
    model = tiny_model("bert")
    bias = model.embeddings.LayerNorm.bias.requires_grad_(True)

    @contextlib.contextmanager
    def bitfit():
        yield SimpleNamespace(parameters=lambda: [bias])

    for name, train in (
        ("run_probe", lambda: run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, trainable=bitfit)),
        (
            "train_mlm",
            lambda: train_mlm(model, base, MASK, SPECIAL, cfg, probe=new_probe(model, 0), extra_params=[bias]),
        ),
    ):
        before = bias.detach().clone()
        train()
        assert (bias - before).abs().max() > 1e-3, name
        assert bias.requires_grad and all(p.grad is None for p in model.parameters() if p is not bias), name


def test_the_trainers_train_a_frozen_models_parameter_they_are_handed():
    """A model from `load_encoder` is frozen (`prepare`): its LayerNorm bias handed to train_mlm's extra_params (or a
    ``trainable`` patch's parameters()) was left frozen by `papa.models.frozen`'s ``keep``, got no gradient and
    stayed as it was, without a word. It trains while the trainer runs and is frozen again after."""
    base = tiny_corpus(n=16, seed=1)
    cfg = TrainConfig(lr=1e-2, extra_lr=0.1, batch_size=4, epochs=1, seed=0)
    model = tiny_model("bert")
    for p in model.parameters():
        p.requires_grad_(False)
    bias = model.embeddings.LayerNorm.bias
    before = bias.detach().clone()
    train_mlm(model, base, MASK, SPECIAL, cfg, probe=new_probe(model, 0), extra_params=[bias])
    assert (bias - before).abs().max() > 1e-3
    assert not any(p.requires_grad for p in model.parameters())
    assert all(p.grad is None for p in model.parameters() if p is not bias)


@pytest.mark.parametrize(("family", "decoder"), DECODERS)
def test_probe_path_lambdas_and_curve(family, decoder):
    """Lambdas trained jointly with an MLM probe, then a fresh probe per fraction on the patched encoder."""
    model = tiny_model(family)
    train, val = tiny_corpus(n=16, seed=1), tiny_corpus(n=8, seed=2)
    C = papa.average_attention(model, train.batches(8))
    lcfg = TrainConfig(lr=1e-3, extra_lr=0.1, batch_size=4, epochs=2, seed=0)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    lam, losses = learn_mlm_lambdas(model, C, train, MASK, SPECIAL, lcfg, decoder=decoder)
    assert lam.shape == (2, 4) and (lam - 0.5).abs().max() > 1e-3 and len(losses) == 2
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())  # the tied decoder's too
    assert torch.equal(lam, learn_mlm_lambdas(model, C, train, MASK, SPECIAL, lcfg, decoder=decoder)[0])

    cfg = TrainConfig(lr=1e-2, batch_size=4, epochs=2, seed=0)
    rows = mlm_curve(model, C, lam, val, [1, 0.5, 0], MASK, SPECIAL, cfg, train=train, decoder=decoder)
    assert [r["head"] for r in rows] == ["probe"] * 3 and [r["n_dynamic"] for r in rows] == [8, 4, 0]
    assert all(np.isfinite(r["neg_log_ppl"]) and np.isfinite(r["train_loss"]) for r in rows)
    assert rows[0]["perplexity"] == pytest.approx(np.exp(-rows[0]["neg_log_ppl"]))
    # fraction 1 is a probe trained and scored on the original model
    probe = new_probe(model, 0, decoder=decoder)
    train_mlm(model, train, MASK, SPECIAL, cfg, probe=probe)
    assert rows[0]["neg_log_ppl"] == pytest.approx(
        negative_log_perplexity(model, val, MASK, SPECIAL, probe=probe, batch_size=cfg.eval_batch_size), abs=1e-6
    )
    assert rows[2]["neg_log_ppl"] != rows[0]["neg_log_ppl"]
    with pytest.raises(ValueError, match="pass the train split"):
        mlm_curve(model, C, lam, val, [1], MASK, SPECIAL, cfg)
    with pytest.raises(ValueError, match="probe, pretrained"):
        mlm_curve(model, C, lam, val, [1], MASK, SPECIAL, cfg, head="frozen", train=train)


def _masked_lm_with_a_head_bias(folder):
    """A tiny random BertForMaskedLM whose MLM head has a bias as a pretrained one does (a fresh head's is 0), saved
    in ``folder`` with MiniLM's tokenizer: the model and the tokenizer."""
    import transformers as tf

    tok = tf.AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    torch.manual_seed(0)
    lm = tf.BertForMaskedLM(tf.BertConfig(**{**TINY, "vocab_size": tok.vocab_size, "max_position_embeddings": 64}))
    with torch.no_grad():
        lm.cls.predictions.bias.normal_()
    lm.save_pretrained(folder)
    tok.save_pretrained(folder)
    return lm, tok


def test_the_tied_decoder_is_the_frozen_input_embeddings_with_the_checkpoints_bias_trained(tmp_path):
    """decoder tied (the authors' fork: their probe took the names of the checkpoint's MLM head, so loading it tied
    the probe's vocabulary projection to the word embeddings and loaded the head's bias): the projection is the
    encoder's input embeddings themselves, not a parameter of the probe (frozen with the encoder: training changes
    none of the encoder's tensors), its bias the checkpoint's and trained; a checkpoint without an MLM head gives 0;
    embeddings narrower than the hidden states are refused with what to write; fresh is a new trained Linear."""
    from papa.models import load_encoder, load_mlm_encoder

    lm, tok = _masked_lm_with_a_head_bias(tmp_path / "lm")
    enc, _, bias = load_mlm_encoder(str(tmp_path / "lm"), device="cpu")
    assert torch.equal(bias, lm.cls.predictions.bias.detach())
    plain, _ = load_encoder(str(tmp_path / "lm"), device="cpu")
    x = papa.encode(tok, ["a tied decoder", "and its bias, loaded"], max_length=12)
    with torch.no_grad():
        hs = enc(**x.model_inputs(), output_hidden_states=True).hidden_states
        ref = plain(**x.model_inputs(), output_hidden_states=True).hidden_states
    assert all(torch.equal(a, b) for a, b in zip(hs, ref, strict=True))  # the same encoder
    probe = new_probe(enc, 0, bias=bias)
    assert probe.decoder.weight.data_ptr() == enc.get_input_embeddings().weight.data_ptr()
    assert not any(p is enc.get_input_embeddings().weight for p in probe.parameters())
    assert torch.equal(probe.decoder.bias.detach(), bias) and probe.decoder.bias.requires_grad
    # a probe's saved state is what it trains: the bias, not a copy of the model's embeddings (mutation testing)
    assert "decoder.bias" in probe.state_dict() and "decoder.weight" not in probe.state_dict()
    # a model loaded in half precision: its embeddings meet the probe's float32 hidden state in the latter's dtype
    from papa.mlm import TiedDecoder

    half = TiedDecoder(enc.get_input_embeddings().weight.bfloat16(), bias)
    x32 = torch.randn(3, enc.config.hidden_size)
    out = half(x32)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, x32 @ half.weight.float().T + bias)
    state = {k: v.clone() for k, v in enc.state_dict().items()}
    train_mlm(enc, tiny_corpus(n=8, vocab=120), MASK, SPECIAL, TrainConfig(lr=1e-2, batch_size=4, epochs=1),
              probe=probe)  # fmt: skip
    assert all(torch.equal(state[k], v) for k, v in enc.state_dict().items())
    assert not torch.equal(probe.decoder.bias.detach(), bias)  # the bias trains
    _, _, none = load_mlm_encoder("minilm", device="cpu")  # shipped without its MLM head
    assert none is None and torch.equal(new_probe(enc, 0).decoder.bias.detach(), torch.zeros(tok.vocab_size))
    fresh = new_probe(enc, 0, decoder="fresh")
    assert isinstance(fresh.decoder, torch.nn.Linear) and fresh.decoder.weight.requires_grad
    with pytest.raises(ValueError, match="embeddings are narrower than its hidden states .* needs decoder 'fresh'"):
        new_probe(tiny_model("electra"), 0)  # embedding_size 16, hidden 32
    with pytest.raises(ValueError, match="decoder must be one of tied, fresh"):
        new_probe(enc, 0, decoder="frozen")


def test_a_probe_per_seed_on_the_same_masked_tokens(monkeypatch):
    """The paper runs every experiment with three seeds (Sec. 4.1): a fresh probe per seed at every fraction,
    its initialisation and batch order that seed's, scored on the same masked tokens (cfg.seed); seed 0's row is
    the single-seed curve's."""
    model = tiny_model("bert")
    train, val = tiny_corpus(n=16, seed=1), tiny_corpus(n=8, seed=2)
    C = papa.average_attention(model, train.batches(8))
    lam = torch.rand(2, 4, generator=torch.Generator().manual_seed(0))
    cfg = TrainConfig(lr=1e-2, batch_size=4, epochs=1, seed=0)
    from papa import mlm

    after, train_mlm = [], mlm.train_mlm
    monkeypatch.setattr(mlm, "train_mlm", lambda *a, runs_after=0, **kw: after.append(runs_after)
                        or train_mlm(*a, runs_after=runs_after, **kw))  # fmt: skip
    rows = mlm_curve(model, C, lam, val, [1, 0], MASK, SPECIAL, cfg, train=train, seeds=[0, 1, 2])
    assert after == [5, 4, 3, 2, 1, 0]  # each training's ETA counts the trainings left after it (mutation testing)
    assert [(r["fraction_dynamic"], r["seed"]) for r in rows] == [
        (1.0, 0),
        (1.0, 1),
        (1.0, 2),
        (0.0, 0),
        (0.0, 1),
        (0.0, 2),
    ]
    alone = mlm_curve(model, C, lam, val, [1, 0], MASK, SPECIAL, cfg, train=train)
    assert [r["neg_log_ppl"] for r in alone] == [rows[0]["neg_log_ppl"], rows[3]["neg_log_ppl"]]
    assert len({r["neg_log_ppl"] for r in rows[:3]}) == 3  # the seeds' probes differ
    # each (fraction, seed) is seeded on its own, dropout of the encoder on too: the order the config lists them in
    # changes no number (rule mlm's params take them in one order: papa.checks.mlm_sweep)
    wet = dict(train=train, backbone_dropout=True)
    ahead = mlm_curve(model, C, lam, val, [1, 0], MASK, SPECIAL, cfg, seeds=[0, 1], **wet)
    back = mlm_curve(model, C, lam, val, [0, 1], MASK, SPECIAL, cfg, seeds=[1, 0], **wet)
    key = lambda r: (r["fraction_dynamic"], r["seed"])  # noqa: E731
    assert sorted(map(key, ahead)) == sorted(map(key, back)) and len(ahead) == 4
    assert {key(r): r["neg_log_ppl"] for r in ahead} == {key(r): r["neg_log_ppl"] for r in back}
    assert all(r["neg_log_ppl"] != rows[i]["neg_log_ppl"] for r, i in zip(ahead, (0, 1, 3, 4)))  # dropout was on
    from papa.checks import mlm_sweep

    assert (
        mlm_sweep({"fraction_dynamic": [0, 0.125, 1, 0.5], "seeds": [2, 0, 1]})
        == mlm_sweep({"fraction_dynamic": [1, 0.5, 0.125, 0], "seeds": [0, 1, 2]})
        == {"fraction_dynamic": [1.0, 0.5, 0.125, 0.0], "seeds": [0, 1, 2]}
    )  # the shipped configs' order
    # seed 1's probe, trained and scored by hand on the same masks
    probe = new_probe(model, 1)
    train_mlm(model, train, MASK, SPECIAL, replace(cfg, seed=1), probe=probe)
    assert rows[1]["neg_log_ppl"] == pytest.approx(
        negative_log_perplexity(model, val, MASK, SPECIAL, seed=0, probe=probe, batch_size=cfg.eval_batch_size),
        abs=1e-6,
    )


def test_mlm_table_is_the_mean_over_seeds(tmp_path):
    from scipy.stats import t

    from papa import plots

    scores = {(1.0, 0): -2.0, (1.0, 1): -2.2, (1.0, 2): -2.1, (0.0, 0): -3.0, (0.0, 1): -3.4, (0.0, 2): -3.3}
    frame = pd.DataFrame(
        [
            dict(model="m", dataset="wiki", head="probe", n_eval=4, fraction_dynamic=f, n_dynamic=int(8 * f), seed=s,
                 neg_log_ppl=v, perplexity=np.exp(-v), train_loss=1.0 + s)
            for (f, s), v in scores.items()
        ]
    )  # fmt: skip
    table = tables.mlm_table([frame]).set_index("fraction_dynamic")
    for f in (1.0, 0.0):
        v = np.array([scores[f, s] for s in range(3)])
        assert table.loc[f, "neg_log_ppl"] == pytest.approx(v.mean()) and table.loc[f, "n_seeds"] == 3
        assert table.loc[f, "std"] == pytest.approx(v.std(ddof=1))
        assert table.loc[f, "ci95"] == pytest.approx(t.ppf(0.975, 2) * v.std(ddof=1) / np.sqrt(3))
        assert table.loc[f, "perplexity"] == pytest.approx(np.exp(-v.mean())) and table.loc[f, "train_loss"] == 2.0
    assert table.loc[0.0, "drop"] == pytest.approx(-2.1 - np.mean([-3.0, -3.4, -3.3]))
    one = tables.mlm_table([frame[frame.seed == 0].drop(columns="seed")])
    assert one.n_seeds.eq(1).all() and one.ci95.isna().all()  # one seed: no interval, not a zero-width one
    # a seed without a score (a diverged training's NaN) is not counted, as in the probes' summary (mutation review)
    lost = tables.mlm_table([frame.assign(neg_log_ppl=frame.neg_log_ppl.where(frame.seed != 1))])
    assert lost.n_seeds.tolist() == [2, 2] and lost.ci95.notna().all()
    old = frame[frame.seed == 0].drop(columns="seed").assign(model="old")  # a file written before the seeds
    mixed = tables.mlm_table([frame, old]).set_index(["model", "fraction_dynamic"])
    assert mixed.n_seeds.to_dict() == {("m", 1.0): 3, ("m", 0.0): 3, ("old", 1.0): 1, ("old", 0.0): 1}
    for t_, stem in ((table.reset_index(), "seeds"), (one, "one")):  # Fig. 6(a), with and without its band
        assert all(os.path.getsize(p) > 1000 for p in plots.plot_mlm(t_, tmp_path / stem))


def test_pretrained_head_path():
    """head pretrained: the checkpoint's own MLM head scores the masked tokens; lambdas train alone."""
    model = masked_lm()
    enc = tiny_corpus(n=6)
    base = negative_log_perplexity(model, enc, MASK, SPECIAL, seed=4)
    m = masked(enc, MASK, SPECIAL, seed=4)
    with torch.no_grad():
        logits = model(**m.model_inputs()).logits
    sel = torch.as_tensor(m.labels != -100)
    ref = -F.cross_entropy(logits[sel], torch.as_tensor(m.labels)[sel]).item()
    assert base == pytest.approx(ref, abs=1e-5)

    C = papa.average_attention(model, enc.batches(3))
    cfg = TrainConfig(lr=0.1, batch_size=3, epochs=2, seed=0)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    lam, _ = learn_mlm_lambdas(model, C, enc, MASK, SPECIAL, cfg, head="pretrained")
    assert lam.shape == (2, 4) and (lam - 0.5).abs().max() > 1e-3
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    rows = mlm_curve(model, C, lam, enc, [1, 0.5, 0], MASK, SPECIAL, replace(cfg, seed=4), head="pretrained")
    assert [r["head"] for r in rows] == ["pretrained"] * 3 and "train_loss" not in rows[0]
    assert rows[0]["neg_log_ppl"] == pytest.approx(base, abs=1e-6)  # fraction 1 is the original model
    with papa.patch(model, C, static=torch.ones(2, 4, dtype=torch.bool)):
        assert rows[2]["neg_log_ppl"] == pytest.approx(
            negative_log_perplexity(model, enc, MASK, SPECIAL, seed=4), abs=1e-6
        )


def test_mlm_needs_a_pretrained_mlm_head(minilm):
    """MiniLM ships without its MLM head: the pretrained-head variant refuses it instead of scoring a random head."""
    with pytest.raises(ValueError, match="no pretrained masked-LM head.*cls.predictions"):
        papa.load_encoder("minilm", task_head="mlm", device="cpu")


@pytest.fixture(scope="module")
def electra_job(tmp_path_factory):
    """A tiny ELECTRA discriminator saved with MiniLM's tokenizer, and the token/constant files of an MLM job."""
    import transformers as tf

    d = tmp_path_factory.mktemp("electra")
    tok = tf.AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    torch.manual_seed(0)
    tf.ElectraForPreTraining(
        tf.ElectraConfig(**{**TINY, "vocab_size": tok.vocab_size, "max_position_embeddings": 64}, embedding_size=16)
    ).save_pretrained(d / "model")
    tok.save_pretrained(d / "model")
    texts = [
        f"the {w} sat on the mat and looked at the {v} for a while"
        for w in ("cat", "dog", "bird", "fox")
        for v in ("moon", "sun", "sea", "sky")
    ]
    for split, part in (("train", texts[:12]), ("validation", texts[12:])):
        pipeline.write_tokens(papa.encode(tok, part, max_length=24), d / f"{split}.parquet", {})
    model, _ = papa.load_encoder(str(d / "model"), device="cpu")
    papa.average_attention(model, papa.encode(tok, texts[:12], max_length=24).batches(4)).save(d / "C.safetensors")
    return d


def test_electra_discriminator_runs_with_the_probe_and_fails_clearly_with_the_pretrained_head(
    electra_job, tmp_path, caplog, monkeypatch
):
    """(And on the CPU its dense layers run on the real tokens, as every model job's: `real_tokens_only`; both files
    carry the job's labels and the weights' hub commit, the record too.)"""
    d = electra_job
    hp = {"head": "probe", "lr": 1e-2, "batch_size": 4, "epochs": 1, "lambda": {"extra_lr": 0.1}, "seed": 0}
    args = (str(d / "model"), d / "C.safetensors", d / "train.parquet", d / "validation.parquet")
    # the tied decoder (the default) needs embeddings as wide as the hidden states: this one's are 16 of 32
    with pytest.raises(ValueError, match="needs decoder 'fresh'"):
        pipeline.run_mlm(*args, hp, [1], d / "s0.parquet", d / "l0.parquet", {})
    hp["decoder"] = "fresh"
    monkeypatch.setattr(pipeline, "model_revision", lambda m: "0123abc")  # a hub model's commit (a folder's is None)
    with caplog.at_level("INFO", logger="papa"):
        df = pipeline.run_mlm(
            *args, hp, [1, 0.5, 0], d / "scores.parquet", d / "lambdas.parquet", {"model": "electra", "dataset": "toy"}
        )
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("dense layers computed")]
    assert df["head"].tolist() == ["probe"] * 3 and df.n_dynamic.tolist() == [8, 4, 0]
    assert df.n_eval.eq(4).all() and np.isfinite(df.neg_log_ppl).all()
    table = tables.mlm_table([pd.read_parquet(d / "scores.parquet")])
    assert list(table.columns[:4]) == ["model", "dataset", "head", "n_eval"] and table["drop"].iloc[0] == 0
    lam = pd.read_parquet(d / "lambdas.parquet")
    assert sorted(lam["rank"]) == list(range(8)) and {"layer", "head", "lambda"} <= set(lam.columns)
    for frame in (df, lam):
        labels = frame[["model", "dataset", "model_revision"]].drop_duplicates().values.tolist()
        assert labels == [["electra", "toy", "0123abc"]] and list(frame.columns[:2]) == ["model", "dataset"]
    assert read_provenance(d / "lambdas.parquet")["model_revision"] == "0123abc"
    # the tied decoder (the default) is the probe's: the pretrained head needs its own, whichever decoder is set
    for decoder in ("fresh", "tied"):
        with pytest.raises(ValueError, match="no pretrained masked-LM head"):
            pipeline.run_mlm(*args, {**hp, "head": "pretrained", "decoder": decoder}, [1], d / "s2.parquet",
                             d / "l2.parquet", {})  # fmt: skip
    with pytest.raises(ValueError, match="analyses.mlm.head must be one of probe, pretrained"):
        pipeline.run_mlm(*args, {**hp, "head": "frozen"}, [1], d / "s2.parquet", d / "l2.parquet", {})
    with pytest.raises(ValueError, match=r"^analyses\.mlm\.decoder must be one of tied, fresh; got 'untied'$"):
        pipeline.run_mlm(*args, {**hp, "decoder": "untied"}, [1], d / "s2.parquet", d / "l2.parquet", {})
    # a tokenizer without a mask token (a decoder model's, say): nothing to score, said before any training
    import shutil

    import transformers as tf

    maskless = shutil.copytree(d / "model", tmp_path / "maskless")
    tok = tf.AutoTokenizer.from_pretrained(maskless)
    tok.mask_token = None
    tok.save_pretrained(maskless)
    with pytest.raises(ValueError, match=rf"^the tokenizer of {re.escape(repr(str(maskless)))} has no mask token: it "
                                         r"cannot be scored as a masked LM$"):  # fmt: skip
        pipeline.run_mlm(str(maskless), *args[1:], hp, [1], tmp_path / "s.parquet", tmp_path / "l.parquet", {})


@pytest.mark.parametrize("decoder", ["tied", "fresh"])
def test_an_mlm_job_refuses_token_files_longer_than_the_models_positions(electra_job, tmp_path, decoder):
    """Token files of an N beyond the model's positions (80 on this 64-position ELECTRA) are refused as the model
    loads, naming the N to use, whichever loader the head's decoder takes (`load_mlm_encoder` for the tied decoder,
    with the checkpoint's bias; `load_encoder` else), before any training."""
    import transformers as tf

    from papa.constants import data_free

    d = electra_job
    tok = tf.AutoTokenizer.from_pretrained(d / "model")
    for split in ("train", "validation"):
        pipeline.write_tokens(papa.encode(tok, ["word " * 90] * 4, max_length=80), tmp_path / f"{split}.parquet", {})
    data_free("toeplitz", 2, 4, 80).save(tmp_path / "C.safetensors")  # TINY's 2 layers x 4 heads, at the files' N
    hp = {"head": "probe", "decoder": decoder, "lr": 1e-2, "batch_size": 4, "epochs": 1, "seed": 0}
    args = (str(d / "model"), tmp_path / "C.safetensors", tmp_path / "train.parquet", tmp_path / "validation.parquet")
    refused = r"N = 80 word pieces exceed the 64 positions of .* use a max_length of at most 64$"
    with pytest.raises(ValueError, match=refused):
        pipeline.run_mlm(*args, hp, [1], tmp_path / "s.parquet", tmp_path / "l.parquet", {})
    assert not list(tmp_path.glob("[sl].parquet"))


def test_the_validation_rows_scored_do_not_depend_on_the_train_draw(electra_job, tmp_path, monkeypatch):
    """analyses.mlm.max_eval's validation rows are drawn with the seed whatever max_train draws: one generator drew
    both subsets, so a max_train that drew consumed it and the same max_eval scored other rows. Each split is drawn
    with the block's seed (3 here), as a first draw of it."""
    import transformers as tf

    import papa.mlm

    d = electra_job
    tok = tf.AutoTokenizer.from_pretrained(d / "model")
    texts = [f"the {w} number {k} sat on the mat" for w in ("cat", "dog", "fox") for k in range(10)]
    for split, part in (("train", texts[:20]), ("validation", texts[10:])):
        pipeline.write_tokens(papa.encode(tok, part, max_length=24), tmp_path / f"{split}.parquet", {})
    scored, trained = [], []

    class Scored(Exception):
        pass

    def curve(model, constants, lambdas, encoded, *args, **kwargs):
        scored.append(encoded.input_ids.copy())
        trained.append(kwargs["train"].input_ids.copy())
        raise Scored

    monkeypatch.setattr(papa.mlm, "learn_mlm_lambdas", lambda m, *a, **k: (torch.zeros(papa.model_shape(m)), []))
    monkeypatch.setattr(papa.mlm, "mlm_curve", curve)
    args = (str(d / "model"), d / "C.safetensors", tmp_path / "train.parquet", tmp_path / "validation.parquet")
    hp = {"head": "probe", "decoder": "fresh", "lr": 1e-2, "batch_size": 4, "epochs": 1, "seed": 3, "max_eval": 5}
    for max_train in (None, 7):
        with pytest.raises(Scored):
            pipeline.run_mlm(*args, {**hp, "max_train": max_train}, [1], tmp_path / "s", tmp_path / "l", {})
    assert len(scored[0]) == 5 and np.array_equal(scored[0], scored[1])
    # the rows are the seed's own draw, as the first draw of one generator took them
    val = papa.Encoded.load(tmp_path / "validation.parquet")
    assert np.array_equal(scored[0], pipeline.subsample(val, 5, np.random.default_rng(3)).input_ids)
    train = papa.Encoded.load(tmp_path / "train.parquet")
    assert np.array_equal(trained[0], train.input_ids)  # max_train None: every row
    assert np.array_equal(trained[1], pipeline.subsample(train, 7, np.random.default_rng(3)).input_ids)
    # an empty split is refused, whichever of the two it is, before any training
    pipeline.write_tokens(train.subset(np.arange(0)), tmp_path / "empty.parquet", {})
    with pytest.raises(ValueError, match=r"MLM analysis: empty split \(train 0, validation 5 examples\)"):
        pipeline.run_mlm(
            args[0], args[1], tmp_path / "empty.parquet", args[3], hp, [1], tmp_path / "s", tmp_path / "l", {}
        )


@pytest.mark.parametrize("decoder", ["tied", "fresh"])
def test_an_mlm_job_hands_its_probes_the_checkpoints_bias_its_masking_and_its_seeds(tmp_path, monkeypatch, decoder):
    """The MLM stage gives the lambdas' probe and the curve's probes the checkpoint's MLM-head bias where the decoder
    is tied (the authors'; `load_mlm_encoder`) and none where it is fresh (a new Linear, which refuses one), the
    block's masking and each its backbone dropout (the lambda block's own), and the curve its seeds (a probe each).
    The stage tests ran a discriminator, whose checkpoint has no MLM head, and BERT's masking was held through the
    rule's params only: a bias lost on the way, a bias read for a fresh decoder, the masking, the probes' dropout or
    the seeds not handed on, passed the fast tier."""
    import papa.mlm
    from papa.constants import data_free

    lm, tok = _masked_lm_with_a_head_bias(tmp_path / "lm")
    texts = [f"the {w} sat on the mat" for w in ("cat", "dog", "fox", "owl")]
    for split in ("train", "validation"):
        pipeline.write_tokens(papa.encode(tok, texts, max_length=12), tmp_path / f"{split}.parquet", {})
    data_free("toeplitz", 2, 4, 12).save(tmp_path / "C.safetensors")  # TINY's 2 layers x 4 heads
    got = {}

    class Stop(Exception):
        pass

    def lambdas(m, *args, **kwargs):
        got["lambdas"] = kwargs
        return torch.zeros(papa.model_shape(m)), []

    def curve(*args, **kwargs):
        got["curve"] = kwargs
        raise Stop

    monkeypatch.setattr(papa.mlm, "learn_mlm_lambdas", lambdas)
    monkeypatch.setattr(papa.mlm, "mlm_curve", curve)
    hp = {**pipeline.MLM_DEFAULTS, "decoder": decoder, "masking": "bert", "seed": 0, "backbone_dropout": True}
    hp["lambda"] = {**(hp.get("lambda") or {}), "backbone_dropout": False}  # the lambda block's own
    stage = pipeline.MLMStage(
        model=str(tmp_path / "lm"), constants=str(tmp_path / "C.safetensors"), train=str(tmp_path / "train.parquet"),
        validation=str(tmp_path / "validation.parquet"), out_scores=str(tmp_path / "s.parquet"),
        out_lambdas=str(tmp_path / "l.parquet"), fraction_dynamic=[1.0, 0.0], labels={},
        **{**pipeline._mlm_settings(hp), "seeds": [0, 1]},
    )  # fmt: skip
    with pytest.raises(Stop):
        pipeline.mlm_curves(stage)
    bias = lm.cls.predictions.bias.detach() if decoder == "tied" else None
    for step in ("lambdas", "curve"):
        kwargs = got[step]
        assert (kwargs["decoder"], kwargs["masking"]) == (decoder, "bert"), step
        assert kwargs["decoder_bias"] is None if bias is None else torch.equal(kwargs["decoder_bias"], bias), step
    assert got["curve"]["seeds"] == [0, 1]
    assert (got["lambdas"]["backbone_dropout"], got["curve"]["backbone_dropout"]) == (False, True)


def test_the_lambdas_eta_counts_the_probe_trainings_in_their_own_epochs(electra_job, monkeypatch):
    """The MLM job's lambda training logs an ETA for the whole job: its own examples, then the probe trainings'
    (papa.mlm.train_mlm: (1 + runs_after) x its epochs x its examples). runs_after counted the probe trainings as if
    each ran the lambdas' epochs, so a lambda block with 1 epoch beside the probes' 4 read a quarter of the time
    left."""
    import papa.mlm

    d = electra_job
    seen = {}

    class Stop(Exception):
        pass

    def lambdas(model, constants, encoded, mask_token_id, special_ids, cfg, *args, runs_after=0, **kwargs):
        seen.update(n=len(encoded), epochs=cfg.epochs, runs_after=runs_after, dropout=kwargs["backbone_dropout"])
        raise Stop

    monkeypatch.setattr(papa.mlm, "learn_mlm_lambdas", lambdas)
    # the probes' backbone dropout on, the lambda stage's off: the lambdas train with their block's
    hp = {"head": "probe", "decoder": "fresh", "lr": 1e-2, "batch_size": 4, "epochs": 4, "seed": 0,
          "backbone_dropout": True, "lambda": {"epochs": 1, "extra_lr": 0.1, "backbone_dropout": False}}  # fmt: skip
    stage = pipeline.MLMStage(
        model=str(d / "model"), constants=str(d / "C.safetensors"), train=str(d / "train.parquet"),
        validation=str(d / "validation.parquet"), out_scores="s", out_lambdas="l", fraction_dynamic=[1, 0.5, 0],
        labels={}, **{**pipeline._mlm_settings({**pipeline.MLM_DEFAULTS, **hp}), "seeds": [0, 1]},
    )  # fmt: skip
    with pytest.raises(Stop):
        pipeline.mlm_curves(stage)
    counted = (1 + seen["runs_after"]) * seen["epochs"] * seen["n"]
    assert seen["epochs"] == 1 and counted == seen["n"] * (1 + 3 * 2 * 4)  # the lambdas', then 3 fractions x 2 seeds
    assert stage.backbone_dropout is True and seen["dropout"] is False


def test_mlm_table_keeps_heads_apart():
    def rows(head, v):
        return pd.DataFrame(
            {
                "model": "m",
                "dataset": "wiki",
                "head": head,
                "n_eval": 4,
                "fraction_dynamic": [1.0, 0.0],
                "n_dynamic": [8, 0],
                "neg_log_ppl": [v, v - 1.5],
                "perplexity": np.exp([-v, 1.5 - v]),
            }
        )

    table = tables.mlm_table([rows("probe", -3.0), rows("pretrained", -2.0)])
    assert table.groupby("head")["drop"].apply(list).to_dict() == {"pretrained": [0.0, 1.5], "probe": [0.0, 1.5]}
    with pytest.raises(ValueError, match="share the same key"):
        tables.mlm_table([rows("probe", -3.0), rows("probe", -2.0)])
    # a curve without seeds is seed 0's: beside the same curve of seed 0 it is that seed twice (mutation testing)
    with pytest.raises(ValueError, match="share the same key"):
        tables.mlm_table([rows("probe", -3.0).assign(seed=0), rows("probe", -2.0)])


# ----------------------------------------------------------------------------- through the workflow


@pytest.mark.slow  # a workflow run: `make test`, not the fast tier
def test_mlm_stage_on_a_tiny_random_masked_lm(tmp_path):
    """Sec. 5.5 through the workflow: a tiny random BertForMaskedLM saved as a local folder (with MiniLM's
    tokenizer), an MLM-only model (model_tasks: []), goes through averaging, MLM lambdas and the
    per-fraction curve with the paper's trained probe, then with its frozen pretrained head. (An ELECTRA
    discriminator, which has no pretrained MLM head, goes through the same stages with the trained probe in
    test_rehearsal_run.py's sample.)"""
    import transformers as tf

    repo = copy_repo(tmp_path / "repo")
    tok = tf.AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    sizes = {**TINY, "vocab_size": tok.vocab_size, "max_position_embeddings": 64}
    tf.set_seed(0)
    tf.BertForMaskedLM(tf.BertConfig(**sizes)).save_pretrained(repo / "tinymlm")
    tok.save_pretrained(repo / "tinymlm")

    def edit(c, head="probe", models=("tinymlm",)):
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
    assert "mlm/tinymlm" in planned and not re.search(r"(probe|lambda|patterns)/tiny", planned)
    smk(repo, "results-mlm/tables/mlm.parquet", "--cores", "2", "--configfile", cfg)
    table = pd.read_parquet(repo / "results-mlm/tables/mlm.parquet")
    assert table.model.tolist() == ["tinymlm"] * 3 and set(table["head"]) == {"probe"}
    assert table.fraction_dynamic.tolist() == [1.0, 0.5, 0.0] and table.n_dynamic.tolist() == [8, 4, 0]
    assert table.n_eval.eq(24).all() and np.isfinite(table.neg_log_ppl).all()
    assert table.model_revision.isna().all()  # a local (built) model: no hub commit, as in the probe tables
    assert table.groupby("model")["drop"].first().eq(0).all() and (table.perplexity > 1).all()
    assert (repo / "results-mlm/plots/mlm.png").stat().st_size > 1000
    lam = pd.read_parquet(repo / "results-mlm/mlm/tinymlm/wiki/N32/lambdas.parquet")
    assert sorted(lam["rank"]) == list(range(8)) and lam.model_revision.isna().all()
    # the probe's decoder: tied (the default, the authors') written out reruns nothing; fresh reruns the MLM job
    for decoder, rerun in (("tied", {}), ("fresh", {"mlm": 1, "mlm_table": 1})):
        cfg5 = write_config(
            repo, f"mlm5{decoder}.yaml", lambda c, d=decoder: (edit(c), c["analyses"]["mlm"].update(decoder=d))
        )
        out = smk(repo, "results-mlm/tables/mlm.parquet", "-n", "--configfile", cfg5).stdout
        assert job_counts(out) == rerun or (not rerun and "Nothing to be done" in out), (decoder, out[-2000:])
    # the frozen pretrained head (BERT only: ELECTRA's discriminator has none) reruns that job and the table
    cfg2 = write_config(repo, "mlm2.yaml", lambda c: edit(c, "pretrained"))
    counts = job_counts(smk(repo, "results-mlm/tables/mlm.parquet", "-n", "--configfile", cfg2).stdout)
    assert counts == {"mlm": 1, "mlm_table": 1}, counts
    smk(repo, "results-mlm/tables/mlm.parquet", "--cores", "2", "--configfile", cfg2)
    table = pd.read_parquet(repo / "results-mlm/tables/mlm.parquet")
    assert table.model.tolist() == ["tinymlm"] * 3 and set(table["head"]) == {"pretrained"}
    assert np.isfinite(table.neg_log_ppl).all() and "train_loss" not in table
    # an MLM setting is part of the job: changing it reruns the MLM job and the table only
    cfg3 = write_config(
        repo, "mlm3.yaml", lambda c: (edit(c, "pretrained"), c["analyses"]["mlm"].update(mask_prob=0.2))
    )
    counts = job_counts(smk(repo, "results-mlm/tables/mlm.parquet", "-n", "--configfile", cfg3).stdout)
    assert counts == {"mlm": 1, "mlm_table": 1}, counts
    # the authors' options (README: Differences from the authors' code), likewise: BERT's masking, the encoder's dropout
    authors = {"masking": "bert", "backbone_dropout": True}
    cfg4 = write_config(repo, "mlm4.yaml", lambda c: (edit(c, "pretrained"), c["analyses"]["mlm"].update(authors)))
    counts = job_counts(smk(repo, "results-mlm/tables/mlm.parquet", "-n", "--configfile", cfg4).stdout)
    assert counts == {"mlm": 1, "mlm_table": 1}, counts


def test_the_tied_decoder_on_embeddings_narrower_than_the_hidden_states_is_a_config_error():
    """decoder tied (the default) projects the probe's hidden states onto the input embeddings: a model whose config
    is known here with narrower embeddings (ALBERT, ELECTRA-small) is refused by the config check, naming the fix."""
    import yaml

    from papa.checks import ConfigError, validate_config
    from tests.test_workflow import ROOT, SMOKE

    cfg = yaml.safe_load((ROOT / SMOKE).read_text())
    narrow = {"build": {"family": "electra", "config": {"embedding_size": 16}}}  # narrower than the hidden states
    cfg["models"].update(narrow=narrow, wide={"build": {"family": "electra"}})
    cfg["model_tasks"] = {"narrow": [], "wide": []}
    cfg["datasets"].setdefault("wiki", {"source": "package"})
    cfg["analyses"]["mlm"] = {"models": ["narrow", "wide"], "dataset": "wiki"}
    with pytest.raises(ConfigError) as e:
        validate_config(yaml.safe_load(yaml.safe_dump(cfg)), warn=lambda m: None)
    from papa.rehearsal import TINY as BUILT

    assert f"models.narrow's input embeddings are 16 wide, its hidden states {BUILT['hidden_size']}" in str(e.value)
    assert "write decoder: fresh" in str(e.value) and "models.wide" not in str(e.value)
    # embeddings wider than the hidden states cannot be tied either (mutation review of papa/checks.py)
    cfg["models"]["narrow"]["build"]["config"]["embedding_size"] = 2 * BUILT["hidden_size"]
    with pytest.raises(ConfigError, match=f"are {2 * BUILT['hidden_size']} wide, its hidden states"):
        validate_config(yaml.safe_load(yaml.safe_dump(cfg)), warn=lambda m: None)
    cfg["analyses"]["mlm"]["decoder"] = "fresh"
    validate_config(cfg, warn=lambda m: None)


@pytest.mark.slow  # four models built, two BPE tokenizers trained on the wiki corpus: `make test`, not the fast tier
def test_a_missing_mlm_head_is_a_config_error_when_the_checkpoint_is_here(tmp_path):
    """analyses.mlm.head: pretrained on a checkpoint without an MLM head failed in its MLM job, after the jobs
    before it; now the config check reads the checkpoint's tensor names (when it is on this machine) and
    refuses it, exactly where load_encoder(task_head="mlm") would."""
    import yaml

    from papa.checks import ConfigError, check_config
    from papa.rehearsal import build_model
    from tests.test_workflow import ROOT, SMOKE

    cfg = yaml.safe_load((ROOT / SMOKE).read_text())
    cfg["analyses"] = {**(cfg.get("analyses") or {}), "mlm": {"models": [], "dataset": "wiki", "head": "pretrained"}}
    cfg["datasets"].setdefault("wiki", {"source": "package"})
    folders = {"minilm": "minilm"}
    for family in ("bert", "roberta", "deberta", "electra"):  # electra: the discriminator, no MLM head
        folders[family] = str(build_model(family, tmp_path / family, config={"num_hidden_layers": 1}))
    for name, path in folders.items():
        try:
            papa.load_encoder(path, task_head="mlm", device="cpu")
            loads = True
        except ValueError as e:
            assert "has no pretrained masked-LM head" in str(e)
            loads = False
        cfg["models"] = {name: path}
        cfg["model_tasks"] = {name: []}
        cfg["analyses"]["mlm"]["models"] = [name]
        if loads:
            check_config(cfg)
        else:
            with pytest.raises(ConfigError, match=f"models.{name} = .* has no masked-LM head"):
                check_config(cfg)
        assert loads == (name in ("bert", "roberta", "deberta")), name
    # a sharded checkpoint: the tensor names its index lists (mutation review of papa/checks.py: a sharded one's
    # missing head passed the check)
    from safetensors import safe_open

    for name in ("electra", "bert"):
        folder = Path(folders[name])
        with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
            names = list(f.keys())
        shard = "model-00001-of-00001.safetensors"
        (folder / "model.safetensors").rename(folder / shard)
        index = {"metadata": {}, "weight_map": dict.fromkeys(names, shard)}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
        cfg["models"], cfg["model_tasks"] = {name: str(folder)}, {name: []}
        cfg["analyses"]["mlm"]["models"] = [name]
        if name == "bert":
            check_config(cfg)
        else:
            with pytest.raises(ConfigError, match=f"models.{name} = .* has no masked-LM head"):
                check_config(cfg)


def test_a_checkpoints_mlm_head_is_found_under_tensorflow_era_and_unprefixed_names():
    """`papa.models.missing_mlm_head` on tensor names as checkpoints spell them: the MaskedLM class's own names
    (nothing missing), the base model's tensors without its prefix (a bare encoder's file), LayerNorms as
    TensorFlow-era ``gamma``/``beta`` (bert-base-uncased's file), the tied decoder left out; the bare encoder
    alone lacks the head."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    from papa.models import missing_mlm_head

    config = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
              "intermediate_size": 64, "vocab_size": 100}  # fmt: skip
    with torch.device("meta"):
        names = list(AutoModelForMaskedLM.from_config(AutoConfig.for_model(**config)).state_dict())
    assert missing_mlm_head(config, names) == []
    tied = "cls.predictions.decoder.weight"
    old_style = [n.removeprefix("bert.") for n in names if n != tied]
    old_style = [n.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
                 for n in old_style]  # fmt: skip
    assert any(n.endswith("LayerNorm.gamma") for n in old_style) and not any(n.startswith("bert.") for n in old_style)
    assert missing_mlm_head(config, old_style) == []
    bare = [n for n in old_style if not n.startswith("cls.")]
    assert "cls.predictions.transform.dense.weight" in missing_mlm_head(config, bare)


def test_scoring_logs_progress_and_gives_the_same_score(caplog):
    """The held-out text's scoring pass (3,000 lines a fraction at paper.yaml's size) logged nothing between an MLM
    probe's last epoch and its score; it logs lines done, lines/s and an ETA, and the score is unchanged by it."""
    import logging
    import time

    model = tiny_model("bert")
    enc, probe = tiny_corpus(n=20), new_probe(model, 0)
    quiet = negative_log_perplexity(model, enc, MASK, SPECIAL, seed=4, batch_size=4, probe=probe)
    forward = model.forward

    def slow(*args, **kwargs):  # an encoder pass that costs time, as a real model's does
        time.sleep(0.06)
        return forward(*args, **kwargs)

    model.forward = slow
    with caplog.at_level(logging.INFO, logger="papa"):
        logged = negative_log_perplexity(model, enc, MASK, SPECIAL, seed=4, batch_size=4, probe=probe, log_every=0.1)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("mlm scoring: ")]
    assert said and all(re.fullmatch(r"mlm scoring: \d+/20 lines \([\d.]+ lines/s, ETA \d+ s\)", s) for s in said)
    assert logged == quiet


def test_bad_mlm_arguments_fail_naming_the_argument():
    """Review BP: a scalar fraction_dynamic ("'float' object is not iterable"), seeds=3 or a seed twice (run twice
    without a word), lambdas of another model's shape (blamed on a static argument never passed), a mask token of
    None (a bare int() error) or past the vocabulary (torch's "index out of range"), mask_prob 0 or 1.5 (accepted):
    each fails naming the argument and what it may be."""
    model = tiny_model("bert")
    val = tiny_corpus(n=4, seed=2)
    C = papa.average_attention(model, val.batches(4))
    lam = torch.full((2, 4), 0.5)
    cfg = TrainConfig(lr=1e-2, batch_size=4, epochs=1, seed=0)
    curve = dict(train=val, head="probe")
    for args, kwargs, error, match in (
        ((lam, val, 0.5, MASK), {}, TypeError, r"fraction_dynamic is a list of fractions in \[0, 1\] \(e\.g\. \[1, "
                                                r"0\.5, 0\]\), got 0\.5"),
        ((lam, val, "1", MASK), {}, TypeError, r"fraction_dynamic is a list of fractions .*got '1'"),  # not ["1"]
        ((lam, val, [], MASK), {}, ValueError, r"fraction_dynamic is empty"),
        ((lam, val, [1.5], MASK), {}, ValueError, r"fraction_dynamic must be in \[0, 1\], got 1\.5"),
        ((lam, val, [1], MASK), {"seeds": 3}, TypeError, r"seeds must be a list of integers, got 3"),
        ((lam, val, [1], MASK), {"seeds": [0, 0]}, ValueError, r"seeds lists a seed more than once"),
        ((torch.full((3, 3), 0.5), val, [1], MASK), {}, ValueError,
         r"lambdas have shape \(3, 3\), and the model's attention is \[layers, heads\] = \[2, 4\]"),
        ((lam, val, [1], None), {}, ValueError, r"mask_token_id must be a token id in \[0, 120\), the tokenizer's"),
        ((lam, val, [1], 120), {}, ValueError, r"mask_token_id must be a token id in \[0, 120\).*got 120"),
    ):  # fmt: skip
        with pytest.raises(error, match=match):
            mlm_curve(model, C, *args[:3], args[3], SPECIAL, cfg, **curve, **kwargs)
    for p in (0, 1.5, -0.1, True, "0.15", torch.tensor(True), np.array(True), float("nan"), 0.5 + 0j):
        with pytest.raises(
            ValueError, match=r"mask_prob must be a share of the tokens in \(0, 1\].*got " + re.escape(repr(p))
        ):
            mask_tokens(val, MASK, SPECIAL, p)
    ids, labels = mask_tokens(val, MASK, SPECIAL, 1)  # every real token: the edge of the range
    assert ((labels != -100) == (val.attention_mask.astype(bool) & ~np.isin(val.input_ids, list(SPECIAL)))).all()
    from decimal import Decimal
    from fractions import Fraction

    # numbers of other types mean the same (review BQ: a 0-d array or tensor, a Fraction, a Decimal were refused)
    expected = mask_tokens(val, MASK, SPECIAL, 0.25, seed=3)
    for p in (np.float32(0.25), np.array(0.25), np.array(0.25, dtype=object), torch.tensor(0.25), Fraction(1, 4),
              Decimal("0.25")):  # fmt: skip
        assert all(np.array_equal(a, b) for a, b in zip(mask_tokens(val, MASK, SPECIAL, p, seed=3), expected)), p
    for m in (np.int64(MASK), torch.tensor(MASK), np.array(MASK)):
        assert all(np.array_equal(a, b) for a, b in zip(mask_tokens(val, m, SPECIAL, 0.25, seed=3), expected)), m


def test_mlm_table_spreads_two_seeds():
    """Two seeds have a spread (ddof 1) and a Student-t interval of one degree of freedom, as `summary_table`'s:
    mutation testing found the two-seed edge unchecked (review DL; the test above uses three seeds and one)."""
    from scipy.stats import t

    scores = ((1.0, (-2.0, -2.4)), (0.0, (-3.0, -3.2)))
    frame = pd.DataFrame([dict(model="m", dataset="wiki", head="probe", n_eval=4, fraction_dynamic=f,
                               n_dynamic=int(8 * f), seed=s, neg_log_ppl=v, perplexity=np.exp(-v))
                          for f, vs in scores for s, v in enumerate(vs)])  # fmt: skip
    table = tables.mlm_table([frame]).set_index("fraction_dynamic")
    assert table.loc[1.0, "n_seeds"] == 2 and table.loc[1.0, "std"] == pytest.approx(np.std([-2.0, -2.4], ddof=1))
    assert table.loc[0.0, "ci95"] == pytest.approx(t.ppf(0.975, 1) * np.std([-3.0, -3.2], ddof=1) / np.sqrt(2))


# ----------------------------------------------------------------------------- mutation testing, review DU
def test_an_epochs_loss_is_the_token_mean_over_that_epochs_own_masks():
    """`train_mlm`'s per-epoch loss is the mean over the epoch's masked tokens, and epoch e masks with seed
    ``cfg.seed + e``: in one batch an epoch's loss is the score of the probe as it was when the epoch began, on the
    masks of that seed (review DU: a loss summed per batch, not per token, or masks never redrawn, passed)."""
    model = tiny_model("bert")
    enc = tiny_corpus(n=8, seed=3)
    cfg = TrainConfig(lr=1e-2, batch_size=8, epochs=2, seed=5)  # one batch an epoch
    start, after_one = new_probe(model, 5), new_probe(model, 5)
    first = -negative_log_perplexity(model, enc, MASK, SPECIAL, seed=5, probe=start)
    train_mlm(model, enc, MASK, SPECIAL, replace(cfg, epochs=1), probe=after_one)
    second = -negative_log_perplexity(model, enc, MASK, SPECIAL, seed=6, probe=after_one)
    losses = train_mlm(model, enc, MASK, SPECIAL, cfg, probe=new_probe(model, 5))
    assert losses == pytest.approx([first, second], abs=1e-5)
    assert abs(second + negative_log_perplexity(model, enc, MASK, SPECIAL, seed=5, probe=after_one)) > 1e-3


def test_the_batch_order_follows_shuffle_seed_and_the_gradient_is_clipped_each_step(monkeypatch, caplog):
    """``cfg.shuffle_seed`` orders the batches (None: ``cfg.seed``), the masks staying ``cfg.seed``'s; with
    ``max_grad_norm`` every step clips the gradient of what trains (probe and extra parameters) at that norm."""
    model = tiny_model("bert")
    enc = tiny_corpus(n=12, seed=1)
    cfg = TrainConfig(lr=1e-2, batch_size=3, epochs=1, seed=0)
    run = lambda c: train_mlm(model, enc, MASK, SPECIAL, c, probe=new_probe(model, 0))  # noqa: E731
    plain = run(cfg)
    assert run(replace(cfg, shuffle_seed=0)) == plain and run(replace(cfg, shuffle_seed=1)) != plain
    clipped = []
    clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda p, n, *a, **k: (clipped.append((p, n)),
                                                                                  clip(p, n, *a, **k))[1])  # fmt: skip
    run(cfg)
    assert clipped == []
    extra = torch.nn.Parameter(torch.zeros(()))
    probe = new_probe(model, 0)
    train_mlm(model, enc, MASK, SPECIAL, replace(cfg, max_grad_norm=0.5), probe=probe, extra_params=[extra])
    assert len(clipped) == 4 and all(n == 0.5 for _, n in clipped)  # 12 rows, batches of 3
    params = clipped[0][0]
    assert {id(p) for p in params} == {id(p) for p in [*probe.parameters(), extra]}
    # the job's ETA counts this training's examples and runs_after more of its size; a probe alone trains on the
    # frozen encoder without autograd through it (the lambdas, extra parameters, need it; mutation testing)
    import papa.mlm as mlm
    from papa.probe import LiveFeatures

    totals, grads, marks = [], [], []

    class Counted(mlm.Progress):
        def eta_text(self, done, total):
            totals.append(total)
            return super().eta_text(done, total)

        def mark(self):  # after each epoch's own line the interval starts again: no progress line right after it
            marks.append(1)
            super().mark()

    monkeypatch.setattr(mlm, "Progress", Counted)
    batch = LiveFeatures.batch
    monkeypatch.setattr(LiveFeatures, "batch", lambda self, i, grad=False: grads.append(grad) or batch(self, i, grad))
    with caplog.at_level("INFO", logger="papa.mlm"):  # a progress line each batch, counting the epoch's examples
        train_mlm(model, enc, MASK, SPECIAL, replace(cfg, epochs=2), probe=new_probe(model, 0), runs_after=1.5,
                  log_every=0)  # fmt: skip
    assert totals and set(totals) == {2.5 * 2 * 12} and grads == [False] * 8 and len(marks) == 2, (totals, grads)
    said = [re.match(r"mlm epoch (\d)/2: (\d+)/12 examples", r.getMessage()) for r in caplog.records]
    assert [m.groups() for m in said if m] == [(e, str(k)) for e in "12" for k in (3, 6, 9, 12)], caplog.text
    train_mlm(model, enc, MASK, SPECIAL, cfg, probe=new_probe(model, 0), extra_params=[extra])
    assert grads[8:] == [True] * 4


def test_a_batch_without_a_real_token_is_skipped_and_a_non_finite_loss_is_refused():
    """A batch whose rows hold special tokens only has no masked token: it is skipped (cross-entropy over no token
    is NaN, which would have reached the probe's weights); a probe whose loss is not finite fails naming the epoch."""
    model = tiny_model("bert")
    enc = tiny_corpus(n=4, seed=1)
    ids, mask = enc.input_ids.copy(), enc.attention_mask.copy()
    ids[0], mask[0] = 0, 0
    ids[0, :2], mask[0, :2] = (1, 2), 1  # [CLS] [SEP]: no real token
    bare = papa.Encoded(ids, mask, np.zeros_like(ids), None, "papa", ids.shape[1])
    probe = new_probe(model, 0)
    losses = train_mlm(model, bare, MASK, SPECIAL, TrainConfig(lr=1e-2, batch_size=1, epochs=2, seed=0), probe=probe)
    assert len(losses) == 2 and all(np.isfinite(losses)) and losses[0] > 0
    assert all(torch.isfinite(p).all() for p in probe.parameters())
    broken = new_probe(model, 0)
    with torch.no_grad():
        broken.dense.bias[0] = float("nan")
    with pytest.raises(FloatingPointError, match=r"mlm epoch 1: the training loss is not finite \(nan\)"):
        train_mlm(model, enc, MASK, SPECIAL, TrainConfig(lr=1e-2, batch_size=2, epochs=1), probe=broken)


def test_training_on_examples_without_a_real_token_is_refused_not_reported_as_a_loss_of_zero():
    """If no example has a real token ([CLS] [SEP] and padding only), there is nothing to mask: `train_mlm` says so
    (it reported a loss of 0.0 and trained nothing), as scoring them does. (One such example among others is
    skipped: the test above.)"""
    model = tiny_model("bert")
    ids, mask = np.zeros((4, 8), dtype=np.int64), np.zeros((4, 8), dtype=np.int64)
    ids[:, :2], mask[:, :2] = (1, 2), 1
    bare = papa.Encoded(ids, mask, np.zeros_like(ids), None, "papa", 8)
    cfg = TrainConfig(lr=1e-2, batch_size=2, epochs=2)
    with pytest.raises(ValueError, match=r"none of the 4 training examples has a real token .* nothing to mask"):
        train_mlm(model, bare, MASK, SPECIAL, cfg, probe=new_probe(model, 0))
    with pytest.raises(ValueError, match="no token was masked"):
        negative_log_perplexity(model, bare, MASK, SPECIAL, probe=new_probe(model, 0))


def test_the_curve_replaces_the_lowest_lambdas_and_reports_the_last_epochs_loss():
    """``mlm_curve``: at fraction 0.5 the heads of the lower lambdas are the static ones (not the higher); a probe's
    ``train_loss`` is its last epoch's; head ``pretrained`` trains nothing, so it scores once a fraction whatever
    the seeds, as ``cfg.seed``."""
    model = masked_lm()
    enc = tiny_corpus(n=6)
    C = papa.average_attention(model, enc.batches(3))
    N = C.mean.shape[-1]  # each token attending to itself: far from a random model's near-uniform attention
    C = replace(C, mean=torch.eye(N).expand(2, 4, N, N).contiguous())
    lam = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]])  # layer 0's heads rank lowest
    cfg = TrainConfig(lr=1e-2, batch_size=3, epochs=2, seed=4)
    rows = mlm_curve(model, C, lam, enc, [0.5], MASK, SPECIAL, cfg, head="pretrained", seeds=[0, 1, 2])
    assert [(r["seed"], r["n_dynamic"]) for r in rows] == [(4, 4)]
    scores = {}
    for name, layer in (("low", 0), ("high", 1)):
        static = torch.zeros(2, 4, dtype=torch.bool)
        static[layer] = True
        with papa.patch(model, C, static=static):
            scores[name] = negative_log_perplexity(model, enc, MASK, SPECIAL, seed=4)
    assert rows[0]["neg_log_ppl"] == pytest.approx(scores["low"], abs=1e-6)
    assert abs(scores["low"] - scores["high"]) > 1e-4  # 5e-4 here; float32 noise ~1e-6
    model = tiny_model("bert")
    probed = mlm_curve(model, C, lam, enc, [1], MASK, SPECIAL, cfg, train=enc, decoder="fresh")
    losses = train_mlm(model, enc, MASK, SPECIAL, cfg, probe=new_probe(model, 4, decoder="fresh"))
    assert len(losses) == 2 and losses[0] != losses[1]
    assert probed[0]["train_loss"] == losses[-1]


def test_the_lambdas_probe_is_seeded_with_cfg_seed_and_the_probe_takes_the_models_activation(monkeypatch):
    """`learn_mlm_lambdas` starts its probe from ``cfg.seed``; the probe's hidden activation is the model's
    (``hidden_act``; DistilBERT's ``activation``, ModernBERT's ``hidden_activation``), not GELU whatever the model,
    applied between its two projections."""
    import transformers as tf

    import papa.mlm
    from papa.models import prepare

    model = tiny_model("bert")
    enc = tiny_corpus(n=4)
    C = papa.average_attention(model, enc.batches(4))
    seeds = []
    make = papa.mlm.new_probe
    monkeypatch.setattr(papa.mlm, "new_probe", lambda m, seed, *a: (seeds.append(seed), make(m, seed, *a))[1])
    learn_mlm_lambdas(model, C, enc, MASK, SPECIAL, TrainConfig(lr=1e-2, batch_size=4, epochs=1, seed=3))
    assert seeds == [3]
    torch.manual_seed(0)
    relu = prepare(tf.BertModel(tf.BertConfig(**{**TINY, "hidden_act": "relu"})), "cpu")
    assert isinstance(new_probe(relu, 0).act, torch.nn.ReLU)
    distil = tiny_model("distilbert")
    distil.config.activation = "relu"
    assert isinstance(new_probe(distil, 0).act, torch.nn.ReLU)
    modern = tiny_model("modernbert")
    assert not hasattr(modern.config, "hidden_act") and not hasattr(modern.config, "activation")
    modern.config.hidden_activation = "relu"
    assert isinstance(new_probe(modern, 0).act, torch.nn.ReLU)
    # and it runs between the probe's two projections: the output is their naive composition through it
    probe = papa.mlm.MLMProbe(2, 4, 5, "relu")
    x = torch.randn(3, 2, 4, generator=torch.Generator().manual_seed(0))
    hidden = x.flatten(1) @ probe.dense.weight.T + probe.dense.bias
    assert (hidden < 0).any()  # so ReLU changes something
    expected = hidden.clamp_min(0) @ probe.decoder.weight.T + probe.decoder.bias
    torch.testing.assert_close(probe(x), expected)


def test_the_pretrained_head_scores_with_dropout_only_where_asked_and_train_mlm_names_itself_in_its_errors():
    """``backbone_dropout`` reaches the checkpoint's own MLM head too (head ``pretrained``: no probe): its logits are
    drawn with the encoder's dropout on (two calls differ), off by default (as the eval-mode model's, call after call),
    the model's mode restored; `train_mlm` with nothing to train says which function refused."""
    model = masked_lm()
    assert model.config.hidden_dropout_prob > 0 and not model.training
    m = masked(tiny_corpus(n=4), MASK, SPECIAL, seed=1)
    idx = np.arange(4)
    off = _masked_logits(model, None, m, idx)[0]
    assert torch.equal(_masked_logits(model, None, m, idx)[0], off) and not model.training
    with torch.no_grad():
        assert torch.equal(model(**m.model_inputs(idx)).logits[torch.as_tensor(m.labels) != -100], off)
    torch.manual_seed(0)
    on, again = (_masked_logits(model, None, m, idx, train_mode=True)[0] for _ in range(2))
    assert not model.training and on.shape == off.shape
    assert (on - off).abs().max() > 1e-3 and (on - again).abs().max() > 1e-3
    cfg = TrainConfig(lr=1e-2, batch_size=2, epochs=1)
    with pytest.raises(ValueError, match=r"^train_mlm: nothing to train \(no probe and no patch parameters\)"):
        train_mlm(model, tiny_corpus(n=4), MASK, SPECIAL, cfg)


def test_the_curves_random_head_order_follows_cfg_seed():
    """``selection: random``: the static heads are `head_order('random', seed=cfg.seed)`'s, a draw of their own for
    each seed (not the lambdas' order), the same draw for the same seed."""
    from papa.selection import head_order, select_static

    model = masked_lm()
    enc = tiny_corpus(n=6)
    C = papa.average_attention(model, enc.batches(3))
    N = C.mean.shape[-1]
    C = replace(C, mean=torch.eye(N).expand(2, 4, N, N).contiguous())
    lam = torch.arange(8.0).view(2, 4)
    scores = {}
    for seed in (0, 1, 2):
        cfg = TrainConfig(lr=1e-2, batch_size=3, epochs=1, seed=seed)
        rows = mlm_curve(model, C, lam, enc, [0.5], MASK, SPECIAL, cfg, head="pretrained", selection="random")
        static = select_static(head_order("random", (2, 4), seed=seed), 0.5, (2, 4))
        with papa.patch(model, C, static=static):
            expected = negative_log_perplexity(model, enc, MASK, SPECIAL, seed=seed)
        assert rows[0]["neg_log_ppl"] == pytest.approx(expected, abs=1e-6)
        scores[seed] = (rows[0]["neg_log_ppl"], tuple(static.flatten().tolist()))
    assert len({s[1] for s in scores.values()}) == 3  # three draws of the 4 static heads among 8
    assert len({round(s[0], 5) for s in scores.values()}) == 3


def test_a_mask_token_is_any_id_of_the_vocabulary_and_a_fresh_decoder_takes_no_bias():
    """Token 0 is a mask token like any other; -1 and True are no token ids; a pretrained bias is refused with
    decoder ``fresh`` (it starts at 0), and a bias of another length than the vocabulary by the tied one."""
    enc = tiny_corpus(n=6)
    ids, labels = mask_tokens(enc, 0, SPECIAL, seed=2, vocab_size=120)
    assert ((ids == 0) & (enc.attention_mask == 1)).sum() == (labels != -100).sum() > 0
    for bad in (-1, True, np.bool_(True), 3.0):
        with pytest.raises(ValueError, match=r"mask_token_id must be a token id in \[0, 120\)"):
            mask_tokens(enc, bad, SPECIAL, vocab_size=120)
    model = tiny_model("bert")
    with pytest.raises(ValueError, match="decoder 'fresh' starts its bias at 0"):
        new_probe(model, 0, decoder="fresh", bias=torch.zeros(120))
    with pytest.raises(ValueError, match=r"the MLM bias has shape \(119,\), the vocabulary 120 words"):
        new_probe(model, 0, bias=torch.zeros(119))


def test_mlm_settings_take_the_blocks_values_and_the_lambda_blocks_over_them():
    """`papa.pipeline._mlm_settings`: the rule's mask_prob, max_train/max_eval and seed reach the stage, and the lambda
    stage trains with the ``lambda`` block's settings over the block's (the probe stage keeps the block's)."""
    hp = {**pipeline.MLM_DEFAULTS, "seed": 7, "mask_prob": 0.3, "max_train": 11, "max_eval": 5, "lr": 1e-3,
          "lambda": {"lr": 0.5}}  # fmt: skip
    got = pipeline._mlm_settings(hp)
    assert (got["mask_prob"], got["max_train"], got["max_eval"], got["seed"]) == (0.3, 11, 5, 7)
    assert got["hparams"].lr == 1e-3 and got["lambda_hparams"].lr == 0.5
    assert got["hparams"].seed == got["lambda_hparams"].seed == 7


# ----------------------------------------------------------------------------- mutation testing, review EA
def test_the_masking_and_mask_prob_reach_the_scoring_the_training_the_lambdas_and_the_curve():
    """``masking`` and ``mask_prob`` are what every stage masks with, and the lambdas' and the curve's probes start
    from the config's ``init`` and the checkpoint's bias (review EA: the scoring, `masked`, the probes' and the
    lambdas' training, or either half of `mlm_curve` could drop them, masking BERT's default share with the mask token
    alone or starting each probe at N(0, 0.02) and bias 0, and no test saw it). The score is the probe's on
    `mask_tokens`' inputs of those settings; in one batch an epoch's loss is the starting probe's score on that
    epoch's masks (the lambdas' with every lambda at 0.5); the curve's row is that probe's, trained and scored so."""
    model = tiny_model("bert")
    enc = tiny_corpus(n=8, seed=3)
    probe = new_probe(model, 0, decoder="fresh")
    score = negative_log_perplexity(model, enc, MASK, SPECIAL, 0.4, seed=2, probe=probe, masking="bert")
    ids, labels = mask_tokens(enc, MASK, SPECIAL, 0.4, 2, masking="bert", vocab_size=120)
    with torch.no_grad():
        logits, y = _masked_logits(model, probe, replace(enc, input_ids=ids, labels=labels), np.arange(len(enc)))
    assert score == pytest.approx(-F.cross_entropy(logits, y).item(), abs=1e-5)
    assert abs(score - negative_log_perplexity(model, enc, MASK, SPECIAL, seed=2, probe=probe)) > 1e-3
    settings = dict(mask_prob=0.4, masking="bert")
    cfg = TrainConfig(lr=1e-2, extra_lr=0.1, batch_size=8, epochs=1, seed=5, init="pytorch")  # one batch
    start = -negative_log_perplexity(model, enc, MASK, SPECIAL, seed=5, probe=new_probe(model, 5), **settings)
    assert train_mlm(model, enc, MASK, SPECIAL, cfg, probe=new_probe(model, 5), **settings) == pytest.approx(
        [start], abs=1e-5
    )
    bias = torch.linspace(-1, 1, 120)  # a checkpoint's MLM head bias
    C = papa.average_attention(model, enc.batches(4))
    _, losses = learn_mlm_lambdas(model, C, enc, MASK, SPECIAL, cfg, decoder_bias=bias, **settings)
    with papa.patch(model, C, mix=True):  # every lambda at 0.5, as the lambdas start
        first = new_probe(model, 5, "pytorch", bias=bias)
        assert losses == pytest.approx(
            [-negative_log_perplexity(model, enc, MASK, SPECIAL, seed=5, probe=first, **settings)], abs=1e-5
        )
    rows = mlm_curve(model, C, torch.rand(2, 4), enc, [1], MASK, SPECIAL, cfg, train=enc, decoder_bias=bias,
                     **settings)  # fmt: skip
    probe = new_probe(model, 5, "pytorch", bias=bias)
    assert rows[0]["train_loss"] == train_mlm(model, enc, MASK, SPECIAL, cfg, probe=probe, **settings)[-1]
    assert rows[0]["neg_log_ppl"] == pytest.approx(
        negative_log_perplexity(model, enc, MASK, SPECIAL, seed=5, probe=probe, batch_size=64, **settings), abs=1e-6
    )


def test_bert_masking_draws_its_random_tokens_from_the_whole_vocabulary():
    """BERT's 10% random tokens are drawn from every id of the vocabulary, its first and last included (transformers'
    ``torch.randint(len(tokenizer))``), and the model's last id is a mask token like any other: a range one short at
    either end (review EA) passed the 80/10/10 shares above."""
    enc = tiny_corpus(n=300, N=64, seed=3)
    ids, labels = mask_tokens(enc, MASK, SPECIAL, seed=7, masking="bert", vocab_size=10)
    changed = ids[(labels != -100) & (ids != enc.input_ids)]  # the mask token, or a random one
    assert set(np.unique(changed)) == set(range(10))
    model = tiny_model("bert")
    assert np.isfinite(negative_log_perplexity(model, tiny_corpus(n=4), 119, SPECIAL, probe=new_probe(model, 0)))


def test_a_row_the_share_missed_has_one_of_its_real_tokens_masked_drawn_at_random():
    """The token masked in a row the share chose none of (every row at a tiny ``mask_prob``) is one of its real
    tokens drawn at random, not always its first or last (which would score one position of every short line)."""
    enc = tiny_corpus(n=300, seed=4)
    real = enc.attention_mask.astype(bool) & ~np.isin(enc.input_ids, list(SPECIAL))
    chosen = mask_tokens(enc, MASK, SPECIAL, mask_prob=1e-9, seed=0)[1] != -100
    assert (chosen.sum(1) == 1).all() and not (chosen & ~real).any()
    where = (chosen.argmax(1) - 1) / (real.sum(1) - 1)  # 0: the first real token, 1: the last
    assert (where == 0).mean() < 0.3 and (where == 1).mean() < 0.3 and abs(where.mean() - 0.5) < 0.08


def test_the_curve_refuses_a_train_or_scored_split_in_another_layout_than_the_constants():
    """`mlm_curve` checks the layout of both the split it scores and the train split its probes learn on against the
    constants' (review EA: the train split went unchecked, so the probes trained on rows each constant row
    described another token of)."""
    model = tiny_model("bert")
    enc = tiny_corpus(n=4)
    C = papa.average_attention(model, enc.batches(4))
    std = replace(enc, layout="standard")
    cfg = TrainConfig(lr=1e-2, batch_size=4, epochs=1)
    for val, train in ((enc, std), (std, enc)):
        with pytest.raises(ValueError, match="averaged on inputs in layout 'papa', and these inputs are in layout "
                                             "'standard'"):  # fmt: skip
            mlm_curve(model, C, torch.rand(2, 4), val, [1], MASK, SPECIAL, cfg, train=train)
