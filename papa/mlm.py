"""Masked-LM quality with replaced heads (paper Sec. 5.5, Fig. 6a): negative log-perplexity.

Tokens are masked with a seeded generator (``mask_prob`` of the real, non-special tokens,
replaced by the mask token; at least one per example), redrawn every training epoch
(seed ``seed + epoch``) and fixed for evaluation (seed ``seed``), so every configuration of
static heads is scored on the same masked inputs. Two heads score the masked tokens
(`MLM_HEADS`, ``analyses.mlm.head`` in the workflow):

* ``probe`` (the paper's procedure): `MLMProbe`, trained on the frozen encoder, over the L+1
  hidden states of each masked token. It needs no MLM head, so any encoder can be scored
  (ELECTRA's discriminator included, as in the paper's Fig. 6a). Its vocabulary projection
  (`MLM_DECODERS`) is by default the authors': the encoder's input word embeddings, frozen, with the
  checkpoint's MLM head bias (`papa.models.load_mlm_encoder`; 0 without one), trained.
* ``pretrained``: the checkpoint's own masked-LM head, frozen (load the model with
  ``papa.load_encoder(name, task_head="mlm")``).

The heads are ranked as in the main method, with the masked-LM loss in place of a task:
`learn_mlm_lambdas` trains one lambda per head (``mix=True``) jointly with a fresh probe (or
through the frozen pretrained head), everything else frozen; `mlm_curve` then replaces the
lowest-lambda heads at each fraction and, for ``probe``, trains a fresh probe on the patched
encoder before scoring held-out text.
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .encoding import IGNORE, Encoded
from .io import Progress, is_integer, real_number
from .models import frozen, in_mode, model_shape
from .probe import LiveFeatures, TrainConfig, check_seeds, init_probe, keeps_global_rng, model_dims, optimizer
from .spec import METHOD_ORDER, check_fraction, renamed_arguments

log = logging.getLogger(__name__)

#: What scores the masked tokens: the paper's trained probe, or the checkpoint's frozen MLM head.
MLM_HEADS = ("probe", "pretrained")
#: How the probe's vocabulary projection starts: ``tied`` (the authors' fork, whose probe takes the names of the
#: checkpoint's MLM head, so loading the checkpoint ties it to the input word embeddings, frozen with the encoder, and
#: loads the head's pretrained bias, which trains), or ``fresh`` (a new Linear(H, vocab), N(0, 0.02) and bias 0,
#: trained: papa's probe before 2026-11-29).
MLM_DECODERS = ("tied", "fresh")
#: What becomes of the tokens chosen for the masked-LM loss (`mask_tokens`): ``mask``, each is replaced by the mask
#: token; ``bert``, BERT's 80/10/10: 80% the mask token, 10% a random token of the vocabulary, 10% left as they are
#: (transformers' ``DataCollatorForLanguageModeling``, which its ``run_mlm.py`` and so the Hugging Face Trainer the
#: authors' fork is built on use). The same tokens are chosen under both (same seed).
MASKINGS = ("mask", "bert")


class TiedDecoder(nn.Module):
    """A vocabulary projection whose weight is the encoder's input word embeddings [vocab, H] (held, not a parameter
    of the probe: frozen with the encoder, as the authors' tied decoder) and whose bias [vocab] is the probe's own,
    trained parameter (the checkpoint's MLM head bias where it has one, else 0)."""

    def __init__(self, embeddings: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.register_buffer("weight", embeddings.detach(), persistent=False)  # moves with the probe; not trained
        start = torch.zeros(embeddings.shape[0]) if bias is None else bias.detach().float().clone()
        if start.shape != (embeddings.shape[0],):
            raise ValueError(f"the MLM bias has shape {tuple(start.shape)}, the vocabulary {embeddings.shape[0]} words")
        self.bias = nn.Parameter(start.to(embeddings.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.to(x.dtype), self.bias.to(x.dtype))


class MLMProbe(nn.Module):
    """The paper's masked-LM probe (the authors' ``modeling_bert.py`` with
    ``use_freeze_extract_pooler``): per token, its L+1 hidden states (embeddings included)
    concatenated -> Linear((L+1)H, H) -> the encoder's hidden activation -> Linear(H, vocab) + bias.
    With ``embeddings`` (``decoder`` ``tied``, `MLM_DECODERS`) the last Linear is a `TiedDecoder`: the encoder's
    input embeddings, frozen, and a trained bias starting at ``bias`` (else 0).
    """

    def __init__(
        self,
        n_layers: int,
        hidden: int,
        vocab_size: int,
        activation: str = "gelu",
        embeddings: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
    ):
        from transformers.activations import ACT2FN

        super().__init__()
        self.dense = nn.Linear(n_layers * hidden, hidden)
        self.act = ACT2FN[activation]
        if embeddings is None:
            self.decoder = nn.Linear(hidden, vocab_size)
        elif tuple(embeddings.shape) != (vocab_size, hidden):
            raise ValueError(
                f"decoder 'tied' projects the probe's hidden size {hidden} onto the input word embeddings, which are "
                f"{tuple(embeddings.shape)} (vocabulary x embedding size), not {(vocab_size, hidden)}: a model whose "
                f"embeddings are narrower than its hidden states (ALBERT, ELECTRA-small) needs decoder 'fresh'"
            )
        else:
            self.decoder = TiedDecoder(embeddings, bias)

    @classmethod
    def for_model(cls, model, decoder: str = "tied", bias: torch.Tensor | None = None) -> MLMProbe:
        """A probe sized for ``model``'s hidden states and vocabulary, with its hidden activation; ``decoder``
        (`MLM_DECODERS`) ``tied`` projects onto ``model``'s input word embeddings with ``bias`` to start from."""
        _check_decoder(decoder)
        cfg = model.config
        # the model's hidden activation, under the name its family's config gives it: `hidden_act` (BERT and most),
        # `hidden_activation` (ModernBERT), `activation` (DistilBERT)
        names = ("hidden_act", "hidden_activation", "activation")
        activation = next((a for name in names if (a := getattr(cfg, name, None))), "gelu")
        tied = model.get_input_embeddings().weight if decoder == "tied" else None
        if decoder == "fresh" and bias is not None:
            raise ValueError("a pretrained MLM bias starts the tied decoder's: decoder 'fresh' starts its bias at 0")
        return cls(*model_dims(model), int(cfg.vocab_size), activation, tied, bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [T, L+1, H] (the masked positions only) -> logits [T, vocab]."""
        return self.decoder(self.act(self.dense(tokens.flatten(1))))


def mask_tokens(
    encoded: Encoded,
    mask_token_id: int,
    special_ids,
    mask_prob: float = 0.15,
    seed: int = 0,
    *,
    masking: str = "mask",
    vocab_size: int | None = None,
):
    """Seeded masking: returns (input_ids with masks, labels with -100 where not masked).

    A share ``mask_prob`` of the real, non-special tokens is chosen (at least one per example); ``masking``
    (`MASKINGS`) says what they become: ``mask`` the mask token, ``bert`` BERT's 80/10/10 (a random token
    drawn from ``range(vocab_size)``: ``vocab_size`` is needed then)."""
    if masking not in MASKINGS:
        raise ValueError(f"masking must be one of {', '.join(MASKINGS)}; got {masking!r}")
    if vocab_size is not None and (not is_integer(vocab_size) or vocab_size < 1):
        raise ValueError(f"vocab_size must be the vocabulary's size, a whole number of token ids of at least 1 (the "
                         f"model's config.vocab_size), or None where unknown; got {vocab_size!r}")  # fmt: skip
    if masking == "bert" and vocab_size is None:
        raise ValueError("masking 'bert' replaces 10% of the chosen tokens by random ones: give the vocab_size")
    mask_token_id = _check_mask_token(mask_token_id, vocab_size)
    if (share := real_number(mask_prob)) is None or not 0 < share <= 1:  # 0 masked one token per example, 1.5 all
        raise ValueError(f"mask_prob must be a share of the tokens in (0, 1] (BERT: 0.15), got {mask_prob!r}")
    mask_prob = share
    rng = np.random.default_rng(seed)
    ids = encoded.input_ids.copy()
    real = encoded.attention_mask.astype(bool) & ~np.isin(ids, list(special_ids))
    chosen = real & (rng.random(ids.shape) < mask_prob)
    for r in np.nonzero(real.any(1) & ~chosen.any(1))[0]:  # at least one masked token per example
        chosen[r, rng.choice(np.nonzero(real[r])[0])] = True
    labels = np.where(chosen, ids, IGNORE)
    if masking == "mask":
        ids[chosen] = mask_token_id
    else:  # drawn after the choice, so the chosen tokens are those of ``mask``
        u = rng.random(ids.shape)
        swap = chosen & (u >= 0.8) & (u < 0.9)
        ids[swap] = rng.integers(0, int(vocab_size), size=int(swap.sum()))
        ids[chosen & (u < 0.8)] = mask_token_id
    return ids, labels


def masked(
    encoded: Encoded,
    mask_token_id: int,
    special_ids,
    mask_prob: float = 0.15,
    seed: int = 0,
    *,
    masking: str = "mask",
    vocab_size: int | None = None,
) -> Encoded:
    """``encoded`` with a seeded draw of its tokens masked (`mask_tokens`), as a token-level split
    whose labels are the original ids of the masked tokens (-100 elsewhere): `LiveFeatures`
    then yields the masked tokens' L+1 hidden states and their labels."""
    ids, labels = mask_tokens(
        encoded, mask_token_id, special_ids, mask_prob, seed, masking=masking, vocab_size=vocab_size
    )
    return dataclasses.replace(encoded, input_ids=ids, labels=labels)


def _check_mask_token(mask_token_id, vocab_size: int | None) -> int:
    """``mask_token_id`` as an int, or a `ValueError` unless it is a token id (of the ``vocab_size`` where known):
    None (a tokenizer without a mask token) failed in ``int()``, an id past the vocabulary in the embedding lookup."""
    as_int = mask_token_id.item() if hasattr(mask_token_id, "item") and np.ndim(mask_token_id) == 0 else mask_token_id
    if isinstance(as_int, (bool, np.bool_)) or not is_integer(as_int) or not 0 <= as_int < (vocab_size or math.inf):
        within = f" in [0, {vocab_size})" if vocab_size is not None else ""
        raise ValueError(f"mask_token_id must be a token id{within}, the tokenizer's mask_token_id, got "
                         f"{mask_token_id!r} (a tokenizer without a mask token cannot score masked "
                         f"tokens)")  # fmt: skip
    return int(as_int)


def _vocab_size(model) -> int:
    """The vocabulary the probe (and BERT's random replacements) draw from: the model's."""
    return int(model.config.vocab_size)


def _masked_logits(model, probe: MLMProbe | None, enc: Encoded, idx, grad: bool = False, train_mode: bool = False):
    """Logits [T, vocab] and labels [T] of the masked tokens of the rows ``idx`` of a `masked`
    split: from ``probe`` over the tokens' hidden states, or (``probe`` None) from the model's
    own MLM head; ``train_mode``: the encoder's dropout on (`papa.probe.LiveFeatures`)."""
    if probe is not None:
        x, y = LiveFeatures(model, enc, train_mode=train_mode).batch(idx, grad=grad)
        return probe(x), y
    device = next(model.parameters()).device
    labels = torch.as_tensor(enc.labels[idx], device=device)
    with in_mode(model, train_mode), torch.set_grad_enabled(grad):
        logits = model(**enc.model_inputs(idx, device=device)).logits
    keep = labels != IGNORE
    return logits[keep], labels[keep]


def negative_log_perplexity(
    model,
    encoded: Encoded,
    mask_token_id: int,
    special_ids,
    mask_prob: float = 0.15,
    seed: int = 0,
    batch_size: int = 16,
    probe: MLMProbe | None = None,
    log_every: float = math.inf,
    *,
    masking: str = "mask",
) -> float:
    """Mean log-likelihood of the masked tokens (nats; higher is better), i.e. -log perplexity.

    Scored by ``probe`` over the encoder's hidden states, or by the model's own MLM head when
    ``probe`` is None; the masks are drawn with ``seed`` (``masking``: `MASKINGS`). A progress line (lines
    scored, lines/s, ETA) every ``log_every`` seconds (`mlm_curve`: 10; paper.yaml scores 3,000 lines a fraction).
    """
    enc = masked(encoded, mask_token_id, special_ids, mask_prob, seed, masking=masking, vocab_size=_vocab_size(model))
    if probe is not None:
        probe.eval()
    total, count = 0.0, 0
    n = len(enc)
    progress = Progress(log_every)
    with torch.inference_mode():
        for start in range(0, n, batch_size):
            if progress.due(start):
                log.info("mlm scoring: %d/%d lines (%.1f lines/s, %s)", start, n, progress.rate(start),
                         progress.eta_text(start, n))  # fmt: skip
            logits, y = _masked_logits(model, probe, enc, np.arange(start, min(len(enc), start + batch_size)))
            total += float(F.cross_entropy(logits.float(), y, reduction="sum"))
            count += int(y.numel())
    if count == 0:
        raise ValueError("no token was masked: the inputs have no real tokens")
    return -total / count


def perplexity(neg_log_ppl: float) -> float:
    return math.exp(-neg_log_ppl)


def new_probe(
    model, seed: int, init: str = "normal", decoder: str = "tied", bias: torch.Tensor | None = None
) -> MLMProbe:
    """A freshly initialised `MLMProbe` for ``model`` (seeded; `papa.probe.init_probe`: by default
    N(0, ``initializer_range``) weights and zero biases, as the authors'), on the model's device. ``decoder``
    (`MLM_DECODERS`): ``tied`` (the default, the authors') projects onto the model's input word embeddings, frozen,
    with a trained bias starting at ``bias`` (the checkpoint's MLM head bias, `papa.models.load_mlm_encoder`; None =
    0); ``fresh`` trains a new Linear(H, vocab) from ``init``."""
    torch.manual_seed(seed)
    probe = init_probe(MLMProbe.for_model(model, decoder, bias), model, init)
    return probe.to(next(model.parameters()).device)


def _check_decoder(decoder: str) -> None:
    if decoder not in MLM_DECODERS:
        raise ValueError(f"the MLM probe's decoder must be one of {', '.join(MLM_DECODERS)}; got {decoder!r}")


def train_mlm(
    model,
    encoded: Encoded,
    mask_token_id: int,
    special_ids,
    cfg: TrainConfig,
    mask_prob: float = 0.15,
    probe: MLMProbe | None = None,
    extra_params=(),
    log_every: float = 10.0,
    what: str = "mlm",
    runs_after: float = 0,
    *,
    masking: str = "mask",
    backbone_dropout: bool = False,
) -> list[float]:
    """Train ``probe`` (lr ``cfg.lr``) and ``extra_params`` (patch parameters such as lambda
    logits, lr ``cfg.extra_lr`` or ``cfg.lr``) with AdamW on the masked-LM loss, the encoder frozen.

    With ``probe`` None only ``extra_params`` train, through the model's own MLM head. The loss
    is the cross-entropy of the masked tokens only (their hidden states are gathered before the
    probe, so the vocabulary-sized output is computed for them alone). Masks are redrawn every
    epoch (seed ``cfg.seed + epoch``), batches shuffled with ``cfg.shuffle_seed`` (None =
    ``cfg.seed``); the gradient norm is clipped at ``cfg.max_grad_norm`` if set. Progress is logged every
    ``log_every`` seconds, each line starting with ``what``; its ETA counts ``runs_after`` more trainings of
    this size to come in the job. ``masking``: what the chosen tokens become (`MASKINGS`);
    ``backbone_dropout``: the frozen encoder runs in train mode (its dropout on, the authors' Trainer's setting).

    Returns:
        The mean training loss (nats per masked token) of every epoch.
    """
    extra = list(extra_params)
    try:
        opt, params = optimizer(cfg, probe, extra)
    except ValueError as e:
        raise ValueError(f"train_mlm: {e}") from None
    n = len(encoded)
    if n == 0:
        raise ValueError("train_mlm: no training examples")
    gen = torch.Generator().manual_seed(cfg.seed if cfg.shuffle_seed is None else cfg.shuffle_seed)
    losses, done = [], 0
    total = (1 + runs_after) * cfg.epochs * n  # this training's examples, then those of ``runs_after`` more
    progress = Progress(log_every)
    # the probe and extra_params train, not the model's weights (its MLM head's among them) but those in extra_params
    with frozen(model, keep=extra):
        for epoch in range(cfg.epochs):
            enc = masked(
                encoded, mask_token_id, special_ids, mask_prob, cfg.seed + epoch, masking=masking,
                vocab_size=_vocab_size(model),
            )  # fmt: skip
            if not (enc.labels != IGNORE).any():  # masking chooses a real, non-special token in each example with one
                raise ValueError(
                    f"train_mlm: none of the {n} training examples has a real token that is not a special token "
                    f"(each is only special tokens and padding): there is nothing to mask; check the training split's "
                    f"texts"
                )
            if probe is not None:
                probe.train()
            running, tokens = 0.0, 0
            order = torch.randperm(n, generator=gen).numpy()
            for start in range(0, n, cfg.batch_size):
                idx = order[start : start + cfg.batch_size]
                done += len(idx)
                logits, y = _masked_logits(model, probe, enc, idx, grad=bool(extra), train_mode=backbone_dropout)
                if y.numel() == 0:  # only examples without real tokens
                    continue
                loss = F.cross_entropy(logits.float(), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.max_grad_norm is not None:
                    nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                opt.step()
                running += loss.item() * y.numel()
                tokens += y.numel()
                if progress.due(done):
                    log.info("%s epoch %d/%d: %d/%d examples, loss %.4f (%.1f examples/s, %s)", what, epoch + 1,
                             cfg.epochs, done - epoch * n, n, running / max(tokens, 1), progress.rate(done),
                             progress.eta_text(done, total))  # fmt: skip
            loss = running / tokens
            if not math.isfinite(loss):
                raise FloatingPointError(
                    f"mlm epoch {epoch + 1}: the training loss is not finite ({loss}); check the "
                    f"constant matrices or lower the learning rate ({cfg.lr})"
                )
            losses.append(loss)
            log.info("%s epoch %d/%d: train loss %.4f (%.1f examples/s, %s)", what, epoch + 1, cfg.epochs, loss,
                     progress.rate(done), progress.eta_text(done, total))  # fmt: skip
            progress.mark()  # no progress line right after the epoch's own
    return losses


@keeps_global_rng
def learn_mlm_lambdas(
    model,
    constants,
    encoded: Encoded,
    mask_token_id: int,
    special_ids,
    cfg: TrainConfig,
    mask_prob: float = 0.15,
    head: str = "probe",
    runs_after: float = 0,
    *,
    masking: str = "mask",
    backbone_dropout: bool = False,
    decoder: str = "tied",
    decoder_bias: torch.Tensor | None = None,
):
    """One lambda per head trained with the masked-LM loss, everything else frozen (paper Sec. 3.2).

    ``head`` ``probe``: jointly with a fresh `MLMProbe` (the probe at ``cfg.lr``, the lambdas at
    ``cfg.extra_lr`` or ``cfg.lr``; its ``decoder`` and ``decoder_bias`` as `new_probe`'s); ``pretrained``:
    through the model's own frozen MLM head.
    Returns ``(lambdas [layers, heads], per-epoch training losses)``; rank the heads with
    ``papa.head_order("lambda", ...)``. ``runs_after``: trainings of this length the job runs next, the probes'
    counted in the lambdas' epochs (a number, not always whole; the logged ETA counts them). ``masking``,
    ``backbone_dropout``: as `train_mlm`.
    """
    from .patching import check_layout, patch

    _check_head(head)
    _check_decoder(decoder)
    check_layout(constants, encoded)
    with patch(model, constants, mix=True) as handle:
        probe = new_probe(model, cfg.seed, cfg.init, decoder, decoder_bias) if head == "probe" else None
        losses = train_mlm(
            model,
            encoded,
            mask_token_id,
            special_ids,
            cfg,
            mask_prob,
            probe=probe,
            extra_params=handle.parameters(),
            what="mlm lambdas",
            runs_after=runs_after,
            masking=masking,
            backbone_dropout=backbone_dropout,
        )
        return handle.lambdas(), losses


@renamed_arguments(fractions="fraction_dynamic")
@keeps_global_rng
def mlm_curve(
    model,
    constants,
    lambdas: torch.Tensor,
    encoded: Encoded,
    fraction_dynamic,
    mask_token_id: int,
    special_ids,
    cfg: TrainConfig,
    mask_prob: float = 0.15,
    head: str = "probe",
    train: Encoded | None = None,
    selection: str = METHOD_ORDER,
    seeds=None,
    *,
    masking: str = "mask",
    backbone_dropout: bool = False,
    decoder: str = "tied",
    decoder_bias: torch.Tensor | None = None,
) -> list[dict]:
    """Negative log-perplexity on ``encoded`` with round(f x heads) heads input-dependent, for each
    value f of ``fraction_dynamic`` (a list).

    The lowest-ranked heads (``selection``, by ``lambdas`` for ``lambda``) use their constant
    matrices. ``head`` ``probe``: at every fraction a fresh `MLMProbe` per seed of ``seeds``
    (default ``[cfg.seed]``; the paper's three seeds, Sec. 4.1) is trained on ``train`` through the
    patched frozen encoder (``cfg``, in that seed's batch order), then scores ``encoded``;
    ``pretrained``: the model's own MLM head scores it directly (trains nothing: one row per
    fraction, whatever the seeds). Evaluation masks use ``cfg.seed``: every seed and fraction is
    scored on the same masked tokens. ``masking`` (`MASKINGS`): what the chosen tokens become, in training and
    scoring alike; ``backbone_dropout``: the probes train with the encoder's dropout on (scoring: off);
    ``decoder``, ``decoder_bias``: how each fresh probe's vocabulary projection starts (`new_probe`).

    Returns:
        One row per fraction (and seed): ``head``, ``fraction_dynamic``, ``n_dynamic``, ``seed``,
        ``neg_log_ppl``, ``perplexity`` and, for ``probe``, the last epoch's ``train_loss``.
    """
    from .patching import check_layout, patch
    from .selection import head_order, n_dynamic, select_static

    _check_head(head)
    _check_decoder(decoder)
    if head == "probe" and train is None:
        raise ValueError("mlm_curve with head 'probe' trains a probe per fraction: pass the train split")
    check_layout(constants, encoded, *([train] if train is not None else []))
    seeds = [cfg.seed] if seeds is None or head == "pretrained" else check_seeds(seeds, cfg.seed)
    if isinstance(fraction_dynamic, (str, bytes)) or not hasattr(fraction_dynamic, "__iter__"):
        raise TypeError(f"fraction_dynamic is a list of fractions in [0, 1] (e.g. [1, 0.5, 0]), got "
                        f"{fraction_dynamic!r}")  # fmt: skip
    fraction_dynamic = [check_fraction(f) for f in fraction_dynamic]
    if not fraction_dynamic:
        raise ValueError("fraction_dynamic is empty: give at least one fraction (e.g. [1, 0.5, 0])")
    shape = tuple(getattr(lambdas, "shape", ()))
    if shape != model_shape(model):  # the static mask's message blamed a static argument never passed
        raise ValueError(f"lambdas have shape {shape}, and the model's attention is [layers, heads] = "
                         f"{list(model_shape(model))}: lambdas learned on another model?")  # fmt: skip
    ranking = head_order(selection, shape, lambdas, seed=cfg.seed)
    rows = []
    left = len(fraction_dynamic) * len(seeds)  # probe trainings still to run (head probe)
    for f in fraction_dynamic:
        base = {"head": head, "fraction_dynamic": float(f), "n_dynamic": n_dynamic(float(f), shape[0] * shape[1])}
        with patch(model, constants, static=select_static(ranking, float(f), shape)):
            for seed in seeds:
                row, probe = {**base, "seed": seed}, None
                if head == "probe":
                    probe = new_probe(model, seed, cfg.init, decoder, decoder_bias)
                    seeded = dataclasses.replace(cfg, seed=seed)  # the probe's initialisation and batch order
                    left -= 1
                    what = f"mlm probe (fraction_dynamic {float(f):g}, seed {seed})"
                    losses = train_mlm(
                        model, train, mask_token_id, special_ids, seeded, mask_prob, probe, what=what, runs_after=left,
                        masking=masking, backbone_dropout=backbone_dropout,
                    )  # fmt: skip
                    row["train_loss"] = losses[-1]
                nll = negative_log_perplexity(
                    model, encoded, mask_token_id, special_ids, mask_prob, cfg.seed, cfg.eval_batch_size, probe, 10.0,
                    masking=masking,
                )  # fmt: skip
                rows.append({**row, "neg_log_ppl": nll, "perplexity": perplexity(nll)})
                log.info(
                    "mlm fraction_dynamic %g (%d heads input-dependent, head %s, seed %d): neg. log-perplexity %.4f",
                    float(f),
                    row["n_dynamic"],
                    head,
                    seed,
                    nll,
                )
    return rows


def _check_head(head: str) -> None:
    if head not in MLM_HEADS:
        raise ValueError(f"the MLM head must be one of {', '.join(MLM_HEADS)}; got {head!r}")
