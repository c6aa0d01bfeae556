"""Patterns of constant matrices (paper Sec. 5.1, Fig. 4), for raw and effective attention.

Every statistic is computed on the L1-renormalised absolute rows ``p_i = |C_i| / sum_j |C_ij|``
over the valid keys j (those that occurred with query i in the averaging corpus): the same
renormalisation `papa.patching.constant_output` applies when it uses a matrix. For raw
attention (non-negative) that is the usual "row sums to 1"; effective attention has signed
rows whose signed sum can be near 0, so normalising by it would give meaningless
numbers (entropies of hundreds of negative nats). The sign is reported separately.

Per head, over the query rows that occurred in the averaging corpus (weighted by how often):

=================  ==========================================================================
``diag_mass``      mass of ``p`` within ``band`` of the diagonal
``cls_mass``       mass of ``p`` on column 0 (the first special token)
``sep_mass``       mass of ``p`` on the separator columns: N-1 (the final separator in the papa
                   layout) and, in a sentence-pair corpus, the middle separator block at N/2
                   (`papa.encoding.separator_positions`, recorded in the constants' metadata as
                   ``separator_positions``)
``entropy``        entropy of ``p`` in nats, in [0, log n_valid]
``entropy_norm``   entropy / log of the number of valid keys n_valid, in [0, 1]
``dist_uniform``   total variation distance of ``p`` from uniform over the valid keys, in [0, 1]
``neg_mass``       share of the row's absolute mass on negative entries,
                   ``sum_j max(-C_ij, 0) / sum_j |C_ij|``; 0 for raw attention
=================  ==========================================================================
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch


def head_patterns(mean: torch.Tensor, count: torch.Tensor, band: int = 1, separators=None) -> pd.DataFrame:
    """One row per (layer, head) with the statistics above.

    Args:
        mean: [layers, heads, N, N] constant matrices (raw or effective, signed allowed).
        count: [N, N] how many examples had (i, j) valid; 0 marks pairs never seen.
        band: half-width of the diagonal band of ``diag_mass``.
        separators: the separator columns of ``sep_mass`` (`papa.encoding.separator_positions`, the
            constants' ``separator_positions``); None = N-1 alone, the papa layout's final separator.
    """
    C = torch.as_tensor(mean, dtype=torch.float64)
    cnt = torch.as_tensor(count, dtype=torch.float64)
    L, H, N, _ = C.shape
    separators = [N - 1] if separators is None else sorted({int(p) for p in separators})
    if any(not 0 <= p < N for p in separators):
        raise ValueError(f"separator positions {separators} lie outside the {N} positions of the matrices")
    valid = cnt > 0  # [N, N]
    row_w = torch.diagonal(cnt).clone()  # how often query i was a real token
    signed = C * valid
    absmass = signed.abs().sum(-1)  # [L, H, N]
    neg = (-signed).clamp_min(0).sum(-1) / absmass.clamp_min(1e-300)
    rows = signed.abs() / absmass[..., None].clamp_min(1e-300)  # the L1 renormalisation of constant_output
    use = (row_w > 0) & (rows.sum(-1) > 0).all(0).all(0)
    w = torch.where(use, row_w, torch.zeros_like(row_w))
    w = w / w.sum()
    i = torch.arange(N)
    band_mask = ((i[:, None] - i[None, :]).abs() <= band) & valid
    n_valid = valid.sum(-1).clamp_min(1).double()
    ent = -(rows * rows.clamp_min(1e-300).log()).sum(-1)  # [L, H, N]
    uniform = valid / n_valid[:, None]
    tv = 0.5 * (rows - uniform).abs().sum(-1)

    def avg(x):  # [L, H, N] -> [L, H]
        return (x * w).sum(-1)

    out = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(L), H),
            "head": np.tile(np.arange(H), L),
            "diag_mass": avg((rows * band_mask).sum(-1)).flatten().numpy(),
            "cls_mass": avg(rows[..., 0]).flatten().numpy(),
            "sep_mass": avg(rows[..., separators].sum(-1)).flatten().numpy(),
            "entropy": avg(ent).flatten().numpy(),
            "entropy_norm": avg(ent / n_valid.log().clamp_min(1e-12)).flatten().numpy(),
            "dist_uniform": avg(tv).flatten().numpy(),
            "neg_mass": avg(neg).flatten().numpy(),
        }
    )
    return out


def classify(df: pd.DataFrame, diag_threshold: float = 0.3, special_threshold: float = 0.5) -> pd.DataFrame:
    """Add ``diagonal`` (diag_mass >= diag_threshold) and ``cls_sep`` (cls + sep mass >=
    special_threshold, "most of the weight on [CLS]/[SEP]") columns."""
    df = df.copy()
    df["diagonal"] = df["diag_mass"] >= diag_threshold
    df["cls_sep"] = (df["cls_mass"] + df["sep_mass"]) >= special_threshold
    return df


def summary_line(df: pd.DataFrame) -> str:
    """A sentence like the paper's: share of diagonal heads and of [CLS]/[SEP] heads."""
    return (
        f"diagonal pattern in {100 * df['diagonal'].mean():.0f}% of heads, most mass on [CLS]/[SEP] in "
        f"{100 * df['cls_sep'].mean():.0f}% ({len(df)} heads)"
    )
