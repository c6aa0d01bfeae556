"""papa's lambda training and probe training against a loop written out here, step for step, on the real MiniLM.

The other lambda and probe tests check one AdamW step (`test_patching.py::test_one_lambda_step_descends_the_loss`),
shapes, seeding, and papa against itself (cached against live features). This file trains a few steps and epochs
through papa's public API (`learn_lambdas`, `head_order`, `select_static`, `patch`, `prepare_features`,
`run_probe`, `train_probe`) and through an independent loop below (a BERT layer written out with each head mixing
``lambda A + (1 - lambda) C_masked``, the paper's probes, AdamW written out, cross-entropy), and holds them equal
within float32 rounding (measured: at most 2.2e-6 on the lambdas, 1.2e-7 on the losses). That pins what one step
cannot:

* the batch order: a new permutation every epoch from one generator seeded with the run's seed;
* the partial last batch (12 examples in batches of 8: 8 then 4), trained on and counted;
* the steps and epochs accumulating (AdamW's state carried over epochs);
* the per-epoch ``train_loss``: the mean of the batch losses weighted by the examples in each batch, a token task's
  too (its batch loss is the mean over the batch's scored tokens, so its epoch loss is not the mean per token);
* the last epoch's lambdas kept (`learn_lambdas` returns those), their ranking (smallest replaced first) and the
  heads a fraction keeps input-dependent;
* each seed's fresh probe in `run_probe` (its initialisation, dropout and batch order from its seed): every
  epoch's loss and validation scores, and seed 0's validation predictions.
* validation scored in eval mode (the probe's dropout off): the probe stage's dropout is 0.5, so scoring with it
  on flips predictions.

Only the constants ``C`` (papa's `average_attention`) and the encoded inputs are shared: they are inputs of both.
"""

import math

import numpy as np
import pytest
import torch
from torch import nn

import papa
from papa.probe import TrainConfig, build_probe, learn_lambdas, prepare_features, run_probe, train_probe
from papa.selection import head_order, select_static

IGNORE = -100
N = 16
BATCH = 8  # 12 train examples: a full batch, then a partial one of 4
EPOCHS = 2
SEEDS = (0, 1)
FRACTION = 0.5  # of the heads kept input-dependent in the probe stage
#: The probe stage's sequence-probe dropout: high enough that validation scored in train mode (dropout on) flips
#: predictions (at 0.1 it flipped none of the 8, and scoring in train mode passed unseen: review AN)
PROBE_DROPOUT = 0.5
TOL = 1e-5

SEQ_TRAIN = [
    ("a great film with a warm heart", 1),
    ("the acting is awful", 0),
    ("i loved every minute of it", 1),
    ("boring , slow and dull", 0),
    ("fine work from the whole cast", 1),
    ("a complete mess from start to end", 0),
    ("funny and clever", 1),
    ("the plot makes no sense", 0),
    ("a moving story , well told", 1),
    ("too long and far too loud", 0),
    ("beautiful pictures and a good score", 1),
    ("i wanted my money back", 0),
]
SEQ_VAL = [
    ("a lovely , gentle film", 1),
    ("dull and lifeless", 0),
    ("smart writing and great actors", 1),
    ("a waste of a good cast", 0),
    ("the best film of the year", 1),
    ("it never comes alive", 0),
    ("warm , funny and wise", 1),
    ("a tired and silly story", 0),
]
TAGS = ["DET", "NOUN", "VERB", "ADJ", "ADV"]
TOK_TRAIN = [
    "the/DET dog/NOUN runs/VERB fast/ADV",
    "a/DET small/ADJ cat/NOUN sleeps/VERB",
    "the/DET old/ADJ man/NOUN walks/VERB slowly/ADV",
    "birds/NOUN sing/VERB loudly/ADV",
    "the/DET red/ADJ car/NOUN stopped/VERB",
    "a/DET child/NOUN laughed/VERB",
    "the/DET tall/ADJ tree/NOUN fell/VERB suddenly/ADV",
    "rain/NOUN falls/VERB softly/ADV",
    "a/DET happy/ADJ girl/NOUN sings/VERB",
    "the/DET river/NOUN flows/VERB quietly/ADV",
    "an/DET angry/ADJ bear/NOUN roared/VERB",
    "the/DET sun/NOUN shines/VERB brightly/ADV",
]
TOK_VAL = [
    "the/DET cat/NOUN runs/VERB",
    "a/DET big/ADJ dog/NOUN barked/VERB loudly/ADV",
    "the/DET young/ADJ woman/NOUN smiled/VERB",
    "snow/NOUN falls/VERB slowly/ADV",
    "a/DET bird/NOUN flew/VERB",
    "the/DET green/ADJ field/NOUN shines/VERB",
    "an/DET old/ADJ horse/NOUN walked/VERB quietly/ADV",
    "the/DET wind/NOUN blows/VERB",
]
METRICS = {"sequence": ["accuracy", "f1"], "token": ["pos_f1", "token_accuracy"]}


# ----------------------------------------------------------------------------- the loop written out (torch only)
def layer_norm(x, mod):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + mod.eps) * mod.weight + mod.bias


def masked_constants(C, mask):
    """C [L, H, N, N], mask [B, N] -> [B, L, H, N, N]: C on each example's valid (query, key) pairs, rows summing
    to 1 (a row with no valid entry stays 0)."""
    valid = (mask[:, :, None] * mask[:, None, :]).to(C.dtype)
    Cm = C[None] * valid[:, None, None]
    s = Cm.sum(-1, keepdim=True)
    return torch.where(s > 0, Cm / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(Cm))


def bert_hidden(model, ids, mask, tt, C, lam_logits=None, static=None):
    """The L+1 hidden states [B, L+1, N, H] of a BERT encoder (eval mode), attention written out. With
    ``lam_logits`` [L, H] every head attends with ``sigmoid(w) A + (1 - sigmoid(w)) C_masked``; with ``static``
    [L, H] bool those heads attend with ``C_masked`` alone, the others with ``A``."""
    e, cfg = model.embeddings, model.config
    B, n = ids.shape
    nh = cfg.num_attention_heads
    d = cfg.hidden_size // nh
    x = e.word_embeddings.weight[ids] + e.position_embeddings.weight[:n][None] + e.token_type_embeddings.weight[tt]
    x = layer_norm(x, e.LayerNorm)
    Cm = masked_constants(C, mask)
    pad_key = (mask == 0)[:, None, None, :]
    hs = [x]
    for li, layer in enumerate(model.encoder.layer):
        sa = layer.attention.self
        q, k, v = (
            (x @ lin.weight.T + lin.bias).view(B, n, nh, d).transpose(1, 2) for lin in (sa.query, sa.key, sa.value)
        )
        A = torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(pad_key, float("-inf")), -1)
        if lam_logits is not None:
            lam = torch.sigmoid(lam_logits[li])[None, :, None, None]
            P = lam * A + (1 - lam) * Cm[:, li]
        else:
            P = torch.where(static[li][None, :, None, None], Cm[:, li], A)
        ctx = (P @ v).transpose(1, 2).reshape(B, n, nh * d)
        ao = layer.attention.output
        a = layer_norm(ctx @ ao.dense.weight.T + ao.dense.bias + x, ao.LayerNorm)
        inner = nn.functional.gelu(a @ layer.intermediate.dense.weight.T + layer.intermediate.dense.bias)
        out = layer.output
        x = layer_norm(inner @ out.dense.weight.T + out.dense.bias + a, out.LayerNorm)
        hs.append(x)
    return torch.stack(hs, 1)


class SeqProbe(nn.Module):
    """Per layer a weight per position (1/N at first) times the mask pools the tokens; concatenated ->
    Linear -> tanh -> dropout -> Linear."""

    def __init__(self, layers, n, hidden, labels, dropout=0.1):
        super().__init__()
        self.w = nn.Parameter(torch.full((layers, n), 1.0 / n))
        self.l1 = nn.Linear(layers * hidden, hidden)
        self.drop = nn.Dropout(dropout)
        self.l2 = nn.Linear(hidden, labels)

    def forward(self, h, mask):
        pooled = (h * (self.w[None] * mask[:, None, :].float())[..., None]).sum(2)
        return self.l2(self.drop(torch.tanh(self.l1(pooled.reshape(len(h), -1)))))


class TokProbe(nn.Module):
    """Per scored token, its L+1 layers concatenated -> Linear -> tanh -> Linear."""

    def __init__(self, layers, hidden, labels):
        super().__init__()
        self.l1 = nn.Linear(layers * hidden, hidden)
        self.l2 = nn.Linear(hidden, labels)

    def forward(self, t):
        return self.l2(torch.tanh(self.l1(t.reshape(len(t), -1))))


def make_probe(kind, seed, layers, hidden, labels, dropout=0.1):
    """A fresh probe: the global generator seeded, the modules made, Linear weights ~ N(0, 0.02), biases 0."""
    torch.manual_seed(seed)
    p = SeqProbe(layers, N, hidden, labels, dropout) if kind == "sequence" else TokProbe(layers, hidden, labels)
    with torch.no_grad():
        for lin in (p.l1, p.l2):
            lin.weight.normal_(0.0, 0.02)
            lin.bias.zero_()
    return p


class AdamW:
    """AdamW written out (betas 0.9, 0.999, eps 1e-8, no weight decay), one learning rate per group."""

    def __init__(self, groups):
        self.groups, self.state, self.t = groups, {}, 0

    def step(self):
        self.t += 1
        with torch.no_grad():
            for params, lr in self.groups:
                for p in params:
                    m, v = self.state.setdefault(id(p), (torch.zeros_like(p), torch.zeros_like(p)))
                    m.mul_(0.9).add_(0.1 * p.grad)
                    v.mul_(0.999).add_(0.001 * p.grad * p.grad)
                    m_hat, v_hat = m / (1 - 0.9**self.t), v / (1 - 0.999**self.t)
                    p.sub_(lr * m_hat / (v_hat.sqrt() + 1e-8))
                    p.grad = None


def probe_inputs(kind, h, mask, labels):
    if kind == "sequence":
        return (h, mask), labels
    keep = labels != IGNORE
    return (h.permute(0, 2, 1, 3)[keep],), labels[keep]


def naive_train(kind, probe, hidden, train, val, lr, seed, extra=(), extra_lr=None):
    """Train ``probe`` (and ``extra``) for EPOCHS epochs; ``hidden(split, idx)`` gives [B, L+1, N, H].
    Returns per epoch: the train loss (batch losses weighted by their examples) and the validation predictions."""
    opt = AdamW([(list(probe.parameters()), lr)] + ([(list(extra), extra_lr)] if extra else []))
    order_gen = torch.Generator().manual_seed(seed)
    n = len(train["ids"])
    out = []
    for _ in range(EPOCHS):
        probe.train()
        order = torch.randperm(n, generator=order_gen)
        total = 0.0
        for start in range(0, n, BATCH):
            idx = order[start : start + BATCH]
            x, y = probe_inputs(kind, hidden("train", idx), train["mask"][idx], train["labels"][idx])
            loss = nn.functional.cross_entropy(probe(*x), y)
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        probe.eval()
        with torch.no_grad():
            idx = torch.arange(len(val["ids"]))
            x, y = probe_inputs(kind, hidden("validation", idx), val["mask"], val["labels"])
            preds = probe(*x).argmax(-1)
        out.append({"train_loss": total / n, "preds": preds.numpy(), "gold": y.numpy()})
    return out


def naive_scores(kind, gold, pred):
    acc = float((gold == pred).mean())
    if kind == "token":  # one label per scored token: micro F1 is token accuracy
        return {"pos_f1": acc, "token_accuracy": acc}
    tp, fp, fn = (int(((gold == a) & (pred == b)).sum()) for a, b in ((1, 1), (0, 1), (1, 0)))
    return {"accuracy": acc, "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0}


# ----------------------------------------------------------------------------- the comparison
@pytest.fixture(autouse=True)
def keep_global_rng():
    """The loop seeds torch's global generator (as papa does inside, and gives back): given back here too."""
    with torch.random.fork_rng():
        yield


def encoded(tok, kind, split):
    if kind == "sequence":
        rows = SEQ_TRAIN if split == "train" else SEQ_VAL
        return papa.encode(tok, [t for t, _ in rows], labels=[y for _, y in rows], max_length=N)
    rows = [[wt.split("/") for wt in s.split()] for s in (TOK_TRAIN if split == "train" else TOK_VAL)]
    return papa.encode(tok, [[w for w, _ in r] for r in rows], labels=[[TAGS.index(t) for _, t in r] for r in rows],
                       max_length=N)  # fmt: skip


def tensors(enc):
    return {
        "ids": torch.as_tensor(enc.input_ids),
        "mask": torch.as_tensor(enc.attention_mask),
        "tt": torch.as_tensor(enc.token_type_ids),
        "labels": torch.as_tensor(enc.labels),
    }


def by_epoch(rows, **where):
    """papa's rows as {epoch: (train_loss, {metric: score})}."""
    out = {}
    for r in rows:
        if all(r[k] == v for k, v in where.items()):
            out.setdefault(r["epoch"], (r["train_loss"], {}))[1][r["metric"]] = r["score"]
    return out


def assert_same_epochs(kind, papa_rows, naive_rows):
    assert sorted(papa_rows) == list(range(1, EPOCHS + 1))
    for epoch, (loss, scores) in papa_rows.items():
        mine = naive_rows[epoch - 1]
        assert abs(loss - mine["train_loss"]) < TOL, (epoch, loss, mine["train_loss"])
        assert scores == pytest.approx(naive_scores(kind, mine["gold"], mine["preds"]), abs=1e-12), epoch


@pytest.mark.parametrize("kind", ["sequence", "token"])
def test_lambda_and_probe_training_match_a_loop_written_out(minilm, kind):
    model, tok = minilm
    train_enc, val_enc = encoded(tok, kind, "train"), encoded(tok, kind, "validation")
    assert len(train_enc) % BATCH != 0  # a partial last batch
    data = {"train": tensors(train_enc), "validation": tensors(val_enc)}
    n_labels = 2 if kind == "sequence" else len(TAGS)
    L, H = papa.model_shape(model)
    layers, hidden_size = L + 1, model.config.hidden_size
    C = papa.average_attention(model, train_enc.batches(BATCH))
    Cf = C.mean.float()

    # 1. lambdas, trained with a probe through the patched encoder
    cfg = TrainConfig(lr=1e-3, extra_lr=2e-2, batch_size=BATCH, epochs=EPOCHS, seed=0)
    lam, lam_rows = learn_lambdas(model, C, train_enc, val_enc, kind, n_labels, METRICS[kind], cfg)

    w = torch.zeros(L, H, requires_grad=True)

    def mixed(split, idx):
        d = data[split]
        with torch.set_grad_enabled(split == "train"):
            return bert_hidden(model, d["ids"][idx], d["mask"][idx], d["tt"][idx], Cf, lam_logits=w)

    probe = make_probe(kind, cfg.seed, layers, hidden_size, n_labels)
    naive = naive_train(kind, probe, mixed, data["train"], data["validation"], cfg.lr, cfg.seed, [w], cfg.extra_lr)
    lam_naive = torch.sigmoid(w.detach())
    assert (lam - 0.5).abs().max() > 100 * TOL  # the lambdas moved
    assert (lam - lam_naive).abs().max() < TOL
    assert_same_epochs(kind, by_epoch(lam_rows), naive)

    # 2. the ranking (smallest lambda replaced first) and the heads a fraction keeps input-dependent
    order = head_order("lambda", (L, H), lambdas=lam)
    assert torch.equal(order, torch.as_tensor(np.argsort(lam.flatten().numpy(), kind="stable")))
    # it ranks the loop's lambdas too (up to near-ties: 72 lambdas within 0.04 lie a few 1e-6 apart at the closest)
    ranked = lam_naive.flatten()[order]
    assert (ranked[1:] - ranked[:-1]).min() > -2 * TOL
    order_naive = torch.as_tensor(np.argsort(lam_naive.flatten().numpy(), kind="stable"))
    for fraction in (1 / 8, FRACTION):  # the last one's sets train the probes below
        n_static = L * H - math.floor(fraction * L * H + 0.5)  # halves rounded up
        boundary = np.sort(lam_naive.flatten().numpy())[n_static - 1 : n_static + 1]
        assert boundary[1] - boundary[0] > 2 * TOL, fraction  # a clear cut: the set does not hang on rounding
        static_naive = torch.zeros(L * H, dtype=torch.bool)
        static_naive[order_naive[:n_static]] = True
        assert torch.equal(select_static(order, fraction, (L, H)).flatten(), static_naive), fraction
    static, static_naive = select_static(order, FRACTION, (L, H)), static_naive.view(L, H)

    # 3. a fresh probe per seed on the patched encoder's cached features (float32: no float16 rounding)
    pcfg = TrainConfig(lr=1e-3, batch_size=BATCH, epochs=EPOCHS, seed=SEEDS[0], dropout=PROBE_DROPOUT)
    with papa.patch(model, C, static=static), prepare_features(model, train_enc, val_enc, dtype="float32") as feats:
        rows = run_probe(model, train_enc, val_enc, kind, n_labels, METRICS[kind], pcfg, features=feats, seeds=SEEDS)
        torch.manual_seed(SEEDS[0])  # seed 0's probe again, for its predictions
        probe0 = build_probe(kind, model, N, n_labels, dropout=PROBE_DROPOUT)
        train_probe(probe0, feats.train, feats.validation, pcfg, METRICS[kind])
        with torch.no_grad():
            x, _ = feats.validation.batch(np.arange(len(val_enc)))
            preds0 = probe0.eval()(x).argmax(-1).numpy()

    with torch.no_grad():
        states = {
            split: bert_hidden(model, d["ids"], d["mask"], d["tt"], Cf, static=static_naive)
            for split, d in data.items()
        }
    for seed in SEEDS:
        probe = make_probe(kind, seed, layers, hidden_size, n_labels, PROBE_DROPOUT)
        naive = naive_train(kind, probe, lambda split, idx: states[split][idx], data["train"], data["validation"],
                            pcfg.lr, seed)  # fmt: skip
        assert_same_epochs(kind, by_epoch(rows, seed=seed), naive)
        if seed == SEEDS[0]:
            np.testing.assert_array_equal(preds0, naive[-1]["preds"])


def test_every_training_has_one_optimizer():
    """`papa.probe.optimizer`, which the probes, the lambdas, trained constants and `papa.mlm.train_mlm` build
    (each of the probe's and the MLM's trainings wrote it out: review AY's 5): the probe's trainable parameters at
    lr with the weight decay, the patch's at extra_lr (else lr) without it; nothing to train is refused."""
    import dataclasses

    from papa.probe import TrainConfig, optimizer

    cfg = TrainConfig(lr=1e-3, extra_lr=0.1, weight_decay=0.01, batch_size=2, epochs=1, seed=0)
    probe = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))
    probe[1].bias.requires_grad_(False)  # frozen: not trained, not clipped
    w = torch.nn.Parameter(torch.zeros(4))
    opt, params = optimizer(cfg, probe, iter([w]))
    groups = [(g["lr"], g["weight_decay"], len(g["params"])) for g in opt.param_groups]
    assert groups == [(1e-3, 0.01, 3), (0.1, 0.0, 1)] and params[-1] is w and len(params) == 4
    opt, params = optimizer(dataclasses.replace(cfg, extra_lr=None), None, [w])
    assert [(g["lr"], g["weight_decay"]) for g in opt.param_groups] == [(1e-3, 0.0)] and params == [w]
    with pytest.raises(ValueError, match="nothing to train"):
        optimizer(cfg, None, [])


def test_the_optimizer_takes_the_configs_weight_decay_and_refuses_a_probe_with_nothing_to_train():
    """Mutation review DT: the weight decay above is AdamW's own default (0.01), so an optimizer built without the
    config's passed unseen (every probe would then decay at 0.01 where the config says 0); and a probe whose
    parameters are all frozen, with no patch parameters, has nothing to train (an empty group passed AdamW)."""
    from papa.probe import TrainConfig, optimizer

    probe = torch.nn.Linear(3, 2)
    for decay in (0.0, 0.05):
        opt, params = optimizer(TrainConfig(lr=1e-3, weight_decay=decay), probe)
        assert [(g["lr"], g["weight_decay"]) for g in opt.param_groups] == [(1e-3, decay)] and len(params) == 2
    probe.requires_grad_(False)
    with pytest.raises(ValueError, match="nothing to train"):
        optimizer(TrainConfig(), probe, [])
