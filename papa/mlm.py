"""Masked-LM quality with replaced heads (paper Sec. 5.5): negative log-perplexity.

Needs a model with its MLM head (``papa.load_encoder(name, task_head="mlm")``). Tokens are
masked with a seeded generator (``mask_prob`` of the real, non-special tokens, replaced by the
mask token), so every configuration of static heads is scored on the same masked inputs.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from .encoding import Encoded


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
