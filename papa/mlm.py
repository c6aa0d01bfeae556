"""Masked-LM quality with replaced heads (paper Sec. 5.5): negative log-perplexity.

Needs a model with its MLM head (``papa.load_encoder(name, task_head="mlm")``). Tokens are
masked with a seeded generator (``mask_prob`` of the real, non-special tokens, replaced by the
mask token), so every configuration of static heads is scored on the same masked inputs.

The heads are ranked as in the main method, with the masked-LM loss in place of a probe:
`learn_mlm_lambdas` trains one lambda per head (``mix=True``) with everything else frozen,
MLM head included; `mlm_curve` then replaces the lowest-lambda heads at each fraction.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from .encoding import Encoded

log = logging.getLogger(__name__)


def mask_tokens(encoded: Encoded, mask_token_id: int, special_ids, mask_prob: float = 0.15, seed: int = 0):
    """Seeded masking: returns (input_ids with masks, labels with -100 where not masked)."""
    rng = np.random.default_rng(seed)
    ids = encoded.input_ids.copy()
    real = encoded.attention_mask.astype(bool) & ~np.isin(ids, list(special_ids))
    chosen = real & (rng.random(ids.shape) < mask_prob)
    for r in np.nonzero(real.any(1) & ~chosen.any(1))[0]:  # at least one masked token per example
        chosen[r, rng.choice(np.nonzero(real[r])[0])] = True
    labels = np.where(chosen, ids, -100)
    ids[chosen] = mask_token_id
    return ids, labels


def negative_log_perplexity(model, encoded: Encoded, mask_token_id: int, special_ids, mask_prob: float = 0.15,
                            seed: int = 0, batch_size: int = 16) -> float:
    """Mean log-likelihood of the masked tokens (nats; higher is better), i.e. -log perplexity."""
    ids, labels = mask_tokens(encoded, mask_token_id, special_ids, mask_prob, seed)
    device = next(model.parameters()).device
    total, count = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(encoded), batch_size):
            sl = slice(start, start + batch_size)
            inputs = encoded.model_inputs(sl, device=device)
            inputs["input_ids"] = torch.as_tensor(ids[sl], device=device)
            lab = torch.as_tensor(labels[sl], device=device)
            logits = model(**inputs).logits
            nll = F.cross_entropy(logits.flatten(0, 1).float(), lab.flatten(), ignore_index=-100, reduction="sum")
            total += float(nll)
            count += int((lab != -100).sum())
    if count == 0:
        raise ValueError("no token was masked: the inputs have no real tokens")
    return -total / count


def perplexity(neg_log_ppl: float) -> float:
    return math.exp(-neg_log_ppl)


def _mlm_loss(model, inputs, labels):
    logits = model(**inputs).logits
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)


def learn_mlm_lambdas(model, constants, encoded: Encoded, mask_token_id: int, special_ids, lr: float = 5e-2,
                      epochs: int = 1, batch_size: int = 16, mask_prob: float = 0.15, seed: int = 0) -> torch.Tensor:
    """One lambda per head trained with the masked-LM loss, the model (and its MLM head) frozen.

    Masks are redrawn every epoch (seed ``seed + epoch``), batches shuffled with ``seed``.
    Returns lambdas [layers, heads] (rank them with ``papa.head_order("lambda", ...)``).
    """
    from .patching import patch

    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    n = len(encoded)
    if n == 0:
        raise ValueError("learn_mlm_lambdas: no training examples")
    with patch(model, constants, mix=True) as handle:
        opt = torch.optim.AdamW(handle.parameters(), lr=lr, weight_decay=0.0)
        t0, done, total = time.perf_counter(), 0, epochs * n
        for epoch in range(epochs):
            ids, labels = mask_tokens(encoded, mask_token_id, special_ids, mask_prob, seed + epoch)
            running = 0.0
            order = torch.randperm(n, generator=gen).numpy()
            for start in range(0, n, batch_size):
                idx = np.sort(order[start : start + batch_size])
                inputs = encoded.model_inputs(idx, device=device)
                inputs["input_ids"] = torch.as_tensor(ids[idx], device=device)
                loss = _mlm_loss(model, inputs, torch.as_tensor(labels[idx], device=device))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                running += float(loss.detach()) * len(idx)
                done += len(idx)
            rate = done / max(time.perf_counter() - t0, 1e-9)
            log.info("mlm lambdas epoch %d/%d: loss %.4f (%.1f examples/s, ETA %.0f s)", epoch + 1, epochs,
                     running / n, rate, (total - done) / rate)
        return handle.lambdas()


def mlm_curve(model, constants, lambdas: torch.Tensor, encoded: Encoded, fractions, mask_token_id: int, special_ids,
              mask_prob: float = 0.15, seed: int = 0, batch_size: int = 16, selection: str = "lambda"):
    """Negative log-perplexity on ``encoded`` with round(f x heads) heads input-dependent, per fraction.

    Returns a list of rows: fraction_dynamic, n_dynamic, neg_log_ppl, perplexity.
    """
    from .patching import patch
    from .selection import head_order, n_dynamic, select_static

    shape = tuple(lambdas.shape)
    ranking = head_order(selection, shape, lambdas, seed=seed)
    rows = []
    for f in fractions:
        static = select_static(ranking, float(f), shape)
        with patch(model, constants, static=static):
            nll = negative_log_perplexity(model, encoded, mask_token_id, special_ids, mask_prob, seed, batch_size)
        rows.append({"fraction_dynamic": float(f), "n_dynamic": n_dynamic(float(f), shape[0] * shape[1]),
                     "neg_log_ppl": nll, "perplexity": perplexity(nll)})
        log.info("mlm fraction %g: negative log-perplexity %.4f", float(f), nll)
    return rows
