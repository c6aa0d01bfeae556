"""Probing classifiers on a frozen encoder (paper Sec. 3.3) and their training.

* `SequenceProbe`: for each of the L+1 hidden-state layers (embeddings included) a learned
  weight per token position (initialised 1/N, multiplied by the attention mask, not
  renormalised) pools the tokens; the L+1 pooled vectors are concatenated ->
  Linear((L+1)H, H) -> tanh -> dropout -> Linear(H, labels).
* `TokenProbe`: per token, the L+1 layers are concatenated -> Linear -> tanh -> Linear;
  loss and score on the first sub-word of every word only.

With the backbone frozen and in eval mode its hidden states do not depend on the probe's
seed or epoch, so `extract_features` runs the encoder once and every seed trains from the
cache (`FeatureCache`); `LiveFeatures` re-runs the encoder per batch (needed when lambdas
or constants are trained, and kept as the reference path).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .encoding import IGNORE, Encoded
from .metrics import compute_all

log = logging.getLogger(__name__)

#: Paper Table 3: learning rate, batch size, epochs, sequence length.
PAPER_HPARAMS = {
    "cola": dict(lr=2e-5, batch_size=16, epochs=15, max_length=64),
    "sst2": dict(lr=1e-4, batch_size=32, epochs=4, max_length=64),
    "mnli": dict(lr=2e-4, batch_size=8, epochs=4, max_length=256),
    "mrpc": dict(lr=2e-5, batch_size=16, epochs=15, max_length=128),
    "ner": dict(lr=1e-4, batch_size=8, epochs=4, max_length=128),
    "pos": dict(lr=5e-4, batch_size=8, epochs=4, max_length=128),
    "mlm": dict(lr=5e-4, batch_size=8, epochs=2, max_length=128),
}


@dataclass
class Ragged:
    """The valid tokens of a batch: ``x`` [T, L+1, H], their positions ``pos`` [T] and example
    index ``seg`` [T] in a batch of ``n`` examples. Pad positions carry zero pooling weight, so
    pooling over these equals pooling over the padded [B, L+1, N, H] tensor with its mask."""

    x: torch.Tensor
    pos: torch.Tensor
    seg: torch.Tensor
    n: int


class SequenceProbe(nn.Module):
    def __init__(self, n_layers: int, max_length: int, hidden: int, n_labels: int, dropout: float = 0.1):
        super().__init__()
        self.pos_weight = nn.Parameter(torch.full((n_layers, max_length), 1.0 / max_length))
        self.dense = nn.Linear(n_layers * hidden, hidden)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, n_labels)

    def forward(self, hidden, mask: torch.Tensor | None = None) -> torch.Tensor:
        """hidden [B, L+1, N, H] with mask [B, N], or the valid tokens only as `Ragged` -> logits [B, labels]."""
        if isinstance(hidden, Ragged):
            r = hidden
            w = self.pos_weight[:, r.pos].T  # [T, L+1]: each token's weight, per layer
            pooled = r.x.new_zeros(r.n, *r.x.shape[1:]).index_add_(0, r.seg, r.x * w[..., None])
        else:
            w = self.pos_weight[None] * mask[:, None, :].to(hidden.dtype)  # [B, L+1, N]
            pooled = torch.einsum("blnh,bln->blh", hidden, w)
        return self.out(self.dropout(torch.tanh(self.dense(pooled.flatten(1)))))


class TokenProbe(nn.Module):
    def __init__(self, n_layers: int, hidden: int, n_labels: int):
        super().__init__()
        self.dense = nn.Linear(n_layers * hidden, hidden)
        self.out = nn.Linear(hidden, n_labels)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [T, L+1, H] (scored positions only) -> logits [T, labels]."""
        return self.out(torch.tanh(self.dense(tokens.flatten(1))))


# ----------------------------------------------------------------------------- features


def _hidden(model, inputs) -> torch.Tensor:
    out = model(**inputs, output_hidden_states=True)
    return torch.stack(out.hidden_states, dim=1)  # [B, L+1, N, H]


class LiveFeatures:
    """Runs the (possibly patched) encoder for every batch; gradients flow to patch parameters."""

    def __init__(self, model, encoded: Encoded, device=None):
        self.model, self.enc = model, encoded
        self.device = device or next(model.parameters()).device
        self.token_level = encoded.token_level

    def __len__(self):
        return len(self.enc)

    def batch(self, idx, grad: bool = False):
        inputs = self.enc.model_inputs(idx, device=self.device)
        with torch.set_grad_enabled(grad):
            h = _hidden(self.model, inputs)
        if self.token_level:
            labels = torch.as_tensor(self.enc.labels[idx], device=self.device)
            keep = labels != IGNORE
            return h.permute(0, 2, 1, 3)[keep], labels[keep]
        return (h, inputs["attention_mask"]), torch.as_tensor(self.enc.labels[idx], device=self.device)


class FeatureCache:
    """Hidden states computed once (float16 by default), in memory or memory-mapped on disk.

    Only the tokens the probe reads are kept, as rows [tokens, L+1, H] with per-example
    ``offsets``: every valid token for sequence tasks (with its ``positions``), the scored
    first sub-words for token tasks (with their ``labels``).
    """

    def __init__(self, data: np.ndarray, labels: np.ndarray, offsets: np.ndarray, positions: np.ndarray | None,
                 token_level: bool, device=None):
        self.data, self.labels, self.offsets, self.positions = data, labels, offsets, positions
        self.token_level = token_level
        self.device = device or "cpu"

    def __len__(self):
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    def _rows(self, idx):
        starts, ends = self.offsets[idx], self.offsets[idx + 1]
        counts = ends - starts
        rows = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        return rows, counts

    def batch(self, idx, grad: bool = False):
        idx = np.asarray(idx)
        rows, counts = self._rows(idx)
        x = torch.from_numpy(np.ascontiguousarray(self.data[rows])).to(self.device, torch.float32)
        if self.token_level:
            return x, torch.from_numpy(self.labels[rows]).to(self.device)
        seg = torch.from_numpy(np.repeat(np.arange(len(idx)), counts)).to(self.device)
        pos = torch.from_numpy(self.positions[rows]).to(self.device)
        return Ragged(x, pos, seg, len(idx)), torch.from_numpy(self.labels[idx]).to(self.device)


def extract_features(model, encoded: Encoded, batch_size: int = 64, dtype: str = "float16",
                     budget_mb: float | None = None, scratch: str | None = None, log_every: float = 10.0,
                     device=None) -> FeatureCache:
    """Run the (patched) encoder once over ``encoded`` and cache what the probe reads.

    Kept in memory when the cache fits ``budget_mb``; otherwise streamed to a memory-mapped
    file under ``scratch`` (a temporary folder by default).
    """
    import tempfile

    device = device or next(model.parameters()).device
    np_dtype = np.dtype(dtype)
    n = len(encoded)
    if n == 0:
        raise ValueError("extract_features got an empty split")
    cfg = model.config
    n_layers = int(getattr(cfg, "num_hidden_layers", getattr(cfg, "n_layers", 0))) + 1
    hidden = int(getattr(cfg, "hidden_size", getattr(cfg, "dim", 0)))
    keep_np = (encoded.labels != IGNORE) if encoded.token_level else encoded.attention_mask.astype(bool)
    offsets = np.concatenate([[0], np.cumsum(keep_np.sum(1))]).astype(np.int64)
    shape = (int(offsets[-1]), n_layers, hidden)
    positions = None if encoded.token_level else np.nonzero(keep_np)[1].astype(np.int64)
    if encoded.token_level:
        labels = encoded.labels[keep_np].astype(np.int64)
    else:
        labels = np.asarray(encoded.labels if encoded.labels is not None else np.full(n, -1), dtype=np.int64)
    nbytes = math.prod(shape) * np_dtype.itemsize
    if budget_mb is None or nbytes <= budget_mb * 2**20:
        data = np.empty(shape, dtype=np_dtype)
        where = "memory"
    else:
        folder = tempfile.mkdtemp(prefix="papa-features-", dir=scratch)
        data = np.lib.format.open_memmap(f"{folder}/features.npy", mode="w+", dtype=np_dtype, shape=shape)
        where = f"memory-mapped file {folder}/features.npy"
    log.info("caching features %s (%.0f MB, %s) in %s", shape, nbytes / 2**20, dtype, where)
    t0 = last = time.monotonic()
    pos = 0
    with torch.inference_mode():
        for start in range(0, n, batch_size):
            idx = np.arange(start, min(n, start + batch_size))
            h = _hidden(model, encoded.model_inputs(idx, device=device))
            keep = torch.as_tensor(keep_np[idx], device=h.device)
            tok = h.permute(0, 2, 1, 3)[keep]  # [tokens, L+1, H]
            data[pos : pos + tok.shape[0]] = tok.to("cpu", torch.float32).numpy().astype(np_dtype)
            pos += tok.shape[0]
            now = time.monotonic()
            if now - last >= log_every:
                last = now
                done = start + len(idx)
                rate = done / (now - t0)
                log.info("encoded %d/%d examples, %.1f examples/s, ETA %.0f s", done, n, rate, (n - done) / rate)
    log.info("encoded %d examples in %.1f s", n, time.monotonic() - t0)
    return FeatureCache(data, labels, offsets, positions, encoded.token_level)


# ----------------------------------------------------------------------------- training


@dataclass
class TrainConfig:
    lr: float = 1e-4
    batch_size: int = 32
    epochs: int = 4
    seed: int = 0
    weight_decay: float = 0.0
    dropout: float = 0.1
    extra_lr: float | None = None  # learning rate of patch parameters (lambdas); None = lr
    eval_batch_size: int = 64


def build_probe(kind: str, model, max_length: int, n_labels: int, dropout: float = 0.1) -> nn.Module:
    cfg = model.config
    n_layers = int(getattr(cfg, "num_hidden_layers", getattr(cfg, "n_layers", 0))) + 1
    hidden = int(getattr(cfg, "hidden_size", getattr(cfg, "dim", 0)))
    if kind == "token":
        return TokenProbe(n_layers, hidden, n_labels)
    if kind == "sequence":
        return SequenceProbe(n_layers, max_length, hidden, n_labels, dropout)
    raise ValueError(f"probe kind must be 'sequence' or 'token', got {kind!r}")


def _forward(probe, x):
    return probe(*x) if isinstance(x, tuple) else probe(x)


def evaluate(probe, features, metrics, label_names=None, batch_size: int = 64) -> dict[str, float]:
    """Score ``probe`` on ``features`` (cached or live)."""
    probe.eval()
    preds, golds = [], []
    n = len(features)
    with torch.inference_mode():
        for start in range(0, n, batch_size):
            idx = np.arange(start, min(n, start + batch_size))
            x, y = features.batch(idx)
            p = _forward(probe, x).argmax(-1)
            if features.token_level:
                # regroup scored tokens per example for entity-level metrics
                counts = _token_counts(features, idx)
                for chunk_p, chunk_y in zip(torch.split(p.cpu(), counts), torch.split(y.cpu(), counts)):
                    preds.append(chunk_p.numpy())
                    golds.append(chunk_y.numpy())
            else:
                preds.append(p.cpu().numpy())
                golds.append(y.cpu().numpy())
    if features.token_level:
        width = max((len(g) for g in golds), default=0)
        pad = lambda rows: np.stack([np.pad(r, (0, width - len(r)), constant_values=IGNORE) for r in rows])  # noqa
        y_true, y_pred = pad(golds), pad(preds)
    else:
        y_true, y_pred = np.concatenate(golds), np.concatenate(preds)
    return compute_all(metrics, y_true, y_pred, label_names)


def _token_counts(features, idx) -> list[int]:
    if isinstance(features, FeatureCache):
        return [int(features.offsets[i + 1] - features.offsets[i]) for i in idx]
    return [int(c) for c in (features.enc.labels[idx] != IGNORE).sum(1)]


def train_probe(probe: nn.Module, train, validation, cfg: TrainConfig, metrics, label_names=None,
                extra_params=(), on_epoch=None, live: bool = False) -> list[dict]:
    """Train ``probe`` (and ``extra_params``, e.g. lambda logits) with AdamW; evaluate every epoch.

    Args:
        train, validation: `FeatureCache` or `LiveFeatures`.
        live: features need gradients (trained patch parameters), so batches run with grad.
    Returns:
        One dict per (epoch, metric): ``epoch``, ``metric``, ``score``, plus ``train_loss``.
    """
    g = torch.Generator().manual_seed(cfg.seed)
    groups = [{"params": [p for p in probe.parameters() if p.requires_grad], "lr": cfg.lr}]
    extra = [p for p in extra_params]
    if extra:
        groups.append({"params": extra, "lr": cfg.extra_lr or cfg.lr, "weight_decay": 0.0})
    opt = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    rows = []
    n = len(train)
    t0 = time.monotonic()
    for epoch in range(1, cfg.epochs + 1):
        probe.train()
        order = torch.randperm(n, generator=g).numpy()
        total, seen = 0.0, 0
        for start in range(0, n, cfg.batch_size):
            idx = order[start : start + cfg.batch_size]
            x, y = train.batch(idx, grad=live)
            loss = loss_fn(_forward(probe, x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            seen += len(idx)
        if not math.isfinite(total):
            raise FloatingPointError(
                f"seed {cfg.seed} epoch {epoch}: the training loss is not finite ({total}); the inputs to the "
                f"probe contain NaN/inf (check the constant matrices) or the learning rate {cfg.lr} is too high"
            )
        scores = evaluate(probe, validation, metrics, label_names, cfg.eval_batch_size)
        elapsed = time.monotonic() - t0
        log.info("seed %d epoch %d/%d: train loss %.4f, %s (%.1f examples/s, ETA %.0f s)", cfg.seed, epoch,
                 cfg.epochs, total / max(seen, 1), ", ".join(f"{k} {v:.4f}" for k, v in scores.items()),
                 epoch * n / elapsed, elapsed / epoch * (cfg.epochs - epoch))
        for metric, score in scores.items():
            rows.append({"epoch": epoch, "metric": metric, "score": score, "train_loss": total / max(seen, 1)})
        if on_epoch is not None:
            on_epoch(epoch)
    return rows


def run_probe(model, train_enc: Encoded, val_enc: Encoded, kind: str, n_labels: int, metrics, cfg: TrainConfig,
              label_names=None, features: tuple | None = None) -> list[dict]:
    """Train and evaluate a fresh probe for one seed on a frozen (possibly patched) encoder.

    ``features``: ``(train_cache, validation_cache)`` from `extract_features`; None re-runs
    the encoder for every batch (the slow reference path).
    """
    torch.manual_seed(cfg.seed)
    probe = build_probe(kind, model, train_enc.max_length, n_labels, cfg.dropout)
    device = next(model.parameters()).device
    probe.to(device)
    if features is None:
        train, val = LiveFeatures(model, train_enc), LiveFeatures(model, val_enc)
    else:
        train, val = features
        train.device = val.device = device
    return train_probe(probe, train, val, cfg, metrics, label_names)


def learn_lambdas(model, constants, train_enc: Encoded, val_enc: Encoded, kind: str, n_labels: int, metrics,
                  cfg: TrainConfig, label_names=None):
    """Train one lambda per head jointly with a probe (paper Sec. 3.2), everything else frozen.

    Returns ``(lambdas [layers, heads], per-epoch metric rows)``.
    """
    from .patching import patch

    torch.manual_seed(cfg.seed)
    probe = build_probe(kind, model, train_enc.max_length, n_labels, cfg.dropout).to(next(model.parameters()).device)
    with patch(model, constants, mix=True) as handle:
        rows = train_probe(probe, LiveFeatures(model, train_enc), LiveFeatures(model, val_enc), cfg, metrics,
                           label_names, extra_params=handle.parameters(), live=True)
        return handle.lambdas(), rows
