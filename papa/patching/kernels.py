"""The tensor maths of a patched head, knowing nothing of models, modes or routes.

A constant matrix ``C`` [N, N] is used, per example, restricted to the valid (non-pad) key and
query positions and row-normalised: divided by the row's mass on the valid keys, that of a
normaliser ``W`` where one is given (effective attention's: the raw average), else of ``|C|``
(L1); rows of pad queries are zero. `constant_output` applies
it to values without materialising a per-example N x N matrix; `masked_constant` builds those
matrices (the dropout route needs them as attention probabilities). Input-dependent heads run
through transformers' own sdpa attention function (`sdpa_heads`); recording computes the
probabilities as transformers' eager attention does (`eager_probs`). `check_length` and
`check_layout` fail clearly when constants and inputs disagree on N or on where the tokens lie
(the one thing here that reads more than tensors: the constants' ``layout`` metadata and the
inputs').
"""

from __future__ import annotations

import torch


class SequenceLengthMismatch(ValueError):
    """Constant matrices and inputs disagree on the sequence length N."""


def check_length(n_const: int, n_input: int) -> None:
    """Raise `SequenceLengthMismatch` (saying how to fix it) unless the constants' N is the input's."""
    if n_const != n_input:
        raise SequenceLengthMismatch(
            f"The constant matrices are {n_const}x{n_const} but the input has sequence length {n_input}. "
            f"Tokenize with papa.encode(..., max_length={n_const}) (papa layout pads every input to N), or "
            f"average attention again at max_length={n_input}."
        )


def check_layout(constants, *splits) -> None:
    """Raise a `ValueError` where constants recorded the layout of the inputs they were averaged on (their
    metadata's ``layout``: `papa.average_attention` of ``Encoded.batches``, the workflow's) and an input split
    (an `Encoded`) is in another: the final separator at N-1 in the papa layout, right after the text in the
    standard one, so each position's constant row would describe another token."""
    made = (getattr(constants, "metadata", None) or {}).get("layout")
    for enc in splits:
        layout = getattr(enc, "layout", None)
        if made is not None and layout is not None and layout != made:
            raise ValueError(f"the constants were averaged on inputs in layout {made!r}, and these inputs are in "
                             f"layout {layout!r}: encode them with papa.encode(..., layout={made!r}), or average the "
                             f"constants again on inputs in layout {layout!r}")  # fmt: skip


def _divide_rows(x: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """``x / den`` where ``den > 0``, else 0 with a zero gradient (an empty row: nothing to normalise)."""
    has = den > 0
    return x / torch.where(has, den, torch.ones_like(den)) * has.to(x.dtype)


def constant_output(
    C: torch.Tensor, v: torch.Tensor, valid: torch.Tensor | None, norm: torch.Tensor | None = None
) -> torch.Tensor:
    """Output of heads using constant matrices, masked and row-normalised per example.

    Args:
        C: [h, N, N] constant matrices.
        v: [B, h, N, d] values of those heads.
        valid: [B, N] bool (non-pad tokens) or None (all valid).
        norm: None, or [h, N, N] non-negative normalisers (`papa.ConstantAttention.norm`).
    Returns:
        [B, h, N, d] equal to ``(C * valid_q valid_k^T) @ v`` with each row divided by its
        normaliser's sum over the valid keys, pad-query rows zero, and rows whose normaliser is 0 on the valid
        keys (a position no averaged example reached) zero, with a zero gradient (divided by a clamped 0, trained
        constants got gradients of 1e35 there, an infinite norm that clipping turned into no step at all).
        Without ``norm``, rows are L1-normalised (divided by the sum of absolute values over valid keys): for the usual
        non-negative matrices that is the paper's "rows sum to 1"; trained (signed) matrices stay
        well defined where a signed row sum would be near 0. With ``norm`` (effective attention,
        whose rows neither are non-negative nor sum to 1), each row is scaled as the raw
        attention's average row would be.
    """
    B, h, N, d = v.shape
    Cabs = C.abs() if norm is None else norm
    m = None if valid is None else valid.to(v.dtype)  # [B, N]
    if m is not None:
        v = v * m[:, None, :, None]
    # one [h, N, N] @ [h, N, B*d] product: broadcasting C over the batch would copy it B times
    vt = v.permute(1, 2, 0, 3).reshape(h, N, B * d)
    num = torch.bmm(C, vt).view(h, N, B, d).permute(2, 0, 1, 3)  # [B, h, N, d]
    if m is None:
        den = Cabs.sum(-1)[None, :, :, None]
    else:
        # a pad query's row gets no normaliser (0): divided by its own, a tiny one (a signed effective row's normaliser
        # on keys its mass missed, rounded to a subnormal in float16) made it inf, and the pad mask's 0 then NaN, which
        # reached every token through the next layer's values
        den = torch.matmul(Cabs, m.t()).permute(2, 0, 1)[..., None] * m[:, None, :, None]  # [B, h, N, 1]
    return _divide_rows(num, den)  # pad-query rows: normaliser 0, so 0 with a zero gradient


def masked_constant(C: torch.Tensor, valid: torch.Tensor | None, norm: torch.Tensor | None = None) -> torch.Tensor:
    """The per-example matrices [B, h, N, N] that `constant_output` applies implicitly
    ([1, h, N, N] when ``valid`` is None: the same for every example)."""
    keys = 1 if valid is None else valid.to(C.dtype)[:, None, None, :]  # [B, 1, 1, N]
    Cm = C[None] * keys
    Wm = Cm.abs() if norm is None else norm[None] * keys
    den = Wm.sum(-1, keepdim=True)
    if valid is not None:  # pad queries' rows are 0, not divided by a normaliser that may be tiny (constant_output)
        den = den * valid.to(C.dtype)[:, None, :, None]
    return _divide_rows(Cm, den)  # pad-query rows: normaliser 0, so 0 with a zero gradient


def bool_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """An attention mask as booleans (True = attend); an additive float mask keeps its non-masked entries."""
    if attention_mask is None or attention_mask.dtype == torch.bool:
        return attention_mask
    return attention_mask > torch.finfo(attention_mask.dtype).min / 2


def sdpa_heads(module, query, key, value, mask, scaling: float, dropout: float = 0.0) -> torch.Tensor:
    """Input-dependent attention of the given heads through transformers' sdpa attention function.

    Args:
        module: the attention module (transformers reads its ``num_key_value_groups``, if any).
        query, key, value: [B, h, N, d] of the heads to compute.
        mask: bool attention mask (broadcastable to [B, h, N, N]) or None.
    Returns:
        [B, h, N, d] (a transposed view of transformers' [B, N, h, d] output). Encoders attend both
        ways, so ``is_causal`` is False whether or not a mask is given.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    out, _ = sdpa_attention_forward(module, query, key, value, mask, dropout=dropout, scaling=scaling, is_causal=False)
    return out.transpose(1, 2)


def eager_probs(query, key, mask, scaling: float) -> torch.Tensor:
    """Attention probabilities [B, h, N, N] computed as transformers' eager attention does."""
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if mask is not None:
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1)
