"""Patterns of constant matrices (paper Sec. 5.1, Fig. 4), for raw and effective attention.

Every statistic is computed on each query's corpus-average distribution over the keys,
``p_ij = |C_ij| n_ij / sum_k |C_ik| n_ik``, where ``n_ij`` (the constants' ``count``) is how many
examples had (i, j) valid: for raw attention, ``C_ij n_ij`` is the sum of the examples' attention
weights, so ``p_i`` is the original model's mean attention of query i, and the head-level masses
below are those of Clark et al. (2019), to whose patterns the paper compares its matrices (mean
over every token of every example of the weight on [CLS], ...). The matrix's own rows are no such
distribution: entry (i, j) is a mean over the examples in which key j occurred, so far keys,
valid in the long examples alone, weigh as much as [CLS], valid in all of them, and a row sums to
more than 1 (MiniLM at N = 64, the default run's corpora: medians 1.02 to 1.19 over the rows, up to 3.6
on a row whose query is rare); dividing by that sum understated [CLS]/[SEP] and
diagonal mass. A constant head applied to one example renormalises over that example's keys
(`papa.patching.masked_constant`); averaged over the corpus's examples, that is close to ``p_i``.
Effective attention has signed rows whose signed sum can be near 0, so the absolute values are
normalised (entropies of hundreds of negative nats otherwise); the sign is reported separately.

Per head, over the query rows that occurred in the averaging corpus (weighted by how often):

=================  ==========================================================================
``diag_mass``      mass of ``p`` within ``band`` of the diagonal
``diag_lift``      ``diag_mass`` over that of a head attending uniformly (each key weighted by how
                   often it occurred with the query, ``n_ij``): 1 = no diagonal preference. The
                   paper's "diagonal pattern in about 90% of heads" is a visual judgement; the share
                   of heads above a fixed ``diag_mass`` depends on N and the corpus's lengths, the
                   lift much less
``cls_mass``       mass of ``p`` on column 0 (the first special token)
``sep_mass``       mass of ``p`` on the separator columns: N-1 (the final separator in the papa
                   layout) and, in a sentence-pair corpus, the middle separator block at N/2
                   (`papa.encoding.separator_positions`, recorded in the constants' metadata as
                   ``separator_positions``); NaN where no position holds a separator in every
                   example (the ``standard`` layout: each text's separators follow it)
``entropy``        entropy of ``p`` in nats, in [0, log n_valid]
``entropy_norm``   entropy / log of the number of valid keys n_valid, in [0, 1]
``dist_uniform``   total variation distance of ``p`` from uniform over the valid keys, in [0, 1]
``neg_mass``       share of the absolute mass on negative entries,
                   ``sum_j max(-C_ij, 0) n_ij / sum_j |C_ij| n_ij``; 0 for raw attention
=================  ==========================================================================
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .io import real_number


def head_patterns(mean: torch.Tensor, count: torch.Tensor, band: int = 1, separators=None) -> pd.DataFrame:
    """One row per (layer, head) with the statistics above.

    Args:
        mean: [layers, heads, N, N] constant matrices (raw or effective, signed allowed).
        count: [N, N] how many examples had (i, j) valid; 0 marks pairs never seen.
        band: half-width of the diagonal band of ``diag_mass``.
        separators: the separator columns of ``sep_mass`` (`papa.encoding.separator_positions`, the
            constants' ``separator_positions``); None = N-1 alone, the papa layout's final separator;
            ``[]`` = none fixed (``sep_mass`` NaN).
    """
    if mean is None or count is None:
        raise TypeError("head_patterns needs the constants' mean and count (papa.ConstantAttention's .mean, .count)")
    C = torch.as_tensor(mean, dtype=torch.float64)
    cnt = torch.as_tensor(count, dtype=torch.float64)
    if C.dim() != 4 or C.shape[-1] != C.shape[-2]:
        raise ValueError(f"mean must be [layers, heads, N, N] constant matrices, got shape {tuple(C.shape)}")
    L, H, N, _ = C.shape
    if tuple(cnt.shape) != (N, N):
        raise ValueError(f"count must be the matrices' [N, N] = [{N}, {N}] pair counts (ConstantAttention.count), "
                         f"got shape {tuple(cnt.shape)}")  # fmt: skip
    width = real_number(band)
    if width is None or not width.is_integer() or width < 0:
        raise ValueError(f"band is the diagonal band's half-width, an integer >= 0 (1: i-1..i+1), got {band!r}")
    band = int(width)
    separators = [N - 1] if separators is None else sorted({int(p) for p in separators})
    if any(not 0 <= p < N for p in separators):
        raise ValueError(f"separator positions {separators} lie outside the {N} positions of the matrices")
    valid = cnt > 0  # [N, N]
    row_w = torch.diagonal(cnt).clone()  # how often query i was a real token
    summed = C * cnt  # over the examples: raw attention's sum of weights, 0 where never valid
    absmass = summed.abs().sum(-1)  # [L, H, N]
    neg = (-summed).clamp_min(0).sum(-1) / absmass.clamp_min(1e-300)
    rows = summed.abs() / absmass[..., None].clamp_min(1e-300)  # query i's corpus-average distribution
    use = (row_w > 0) & (rows.sum(-1) > 0)  # [L, H, N]: a head's all-zero row leaves that head's average alone
    w = torch.where(use, row_w, torch.zeros_like(row_w))
    w = w / w.sum(-1, keepdim=True)  # a head without a single non-zero row: NaN statistics, not zeros
    i = torch.arange(N)
    band_mask = ((i[:, None] - i[None, :]).abs() <= band) & valid
    n_valid = valid.sum(-1).clamp_min(1).double()
    ent = -(rows * rows.clamp_min(1e-300).log()).sum(-1)  # [L, H, N]
    uniform = valid / n_valid[:, None]
    tv = 0.5 * (rows - uniform).abs().sum(-1)
    spread = cnt / cnt.sum(-1, keepdim=True).clamp_min(1e-300)  # a uniform head's corpus-average distribution
    spread_diag = (spread * band_mask).sum(-1)  # [N]

    def avg(x):  # [L, H, N] -> [L, H]
        return (x * w).sum(-1)

    diag = avg((rows * band_mask).sum(-1))

    out = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(L), H),
            "head": np.tile(np.arange(H), L),
            "diag_mass": diag.flatten().numpy(),
            "diag_lift": (diag / (spread_diag * w).sum(-1).clamp_min(1e-300)).flatten().numpy(),
            "cls_mass": avg(rows[..., 0]).flatten().numpy(),
            "sep_mass": avg(rows[..., separators].sum(-1)).flatten().numpy() if separators else np.nan,
            "entropy": avg(ent).flatten().numpy(),
            "entropy_norm": avg(ent / n_valid.log().clamp_min(1e-12)).flatten().numpy(),
            "dist_uniform": avg(tv).flatten().numpy(),
            "neg_mass": avg(neg).flatten().numpy(),
        }
    )
    return out


def _require(df, columns, what: str) -> None:
    """A `ValueError` naming the ``columns`` ``df`` lacks (a pandas KeyError named one, and no cause)."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"expected {what} (a DataFrame), got {type(df).__name__}")
    if missing := [c for c in columns if c not in df.columns]:
        raise ValueError(f"the table lacks {', '.join(map(repr, missing))}: pass {what}")


def classify(df: pd.DataFrame, diag_threshold: float = 0.3, special_threshold: float = 0.5) -> pd.DataFrame:
    """Add ``diagonal`` (diag_mass >= diag_threshold) and ``cls_sep`` (cls + sep mass >=
    special_threshold, "most of the weight on [CLS]/[SEP]") columns.

    Where ``sep_mass`` is NaN (no fixed separator position), ``cls_sep`` is True where [CLS] alone
    holds that mass and missing (``pd.NA``, a nullable boolean column) elsewhere."""
    _require(df, ("diag_mass", "cls_mass", "sep_mass"), "head_patterns' table")
    shares = {}
    for name, t in (("diag_threshold", diag_threshold), ("special_threshold", special_threshold)):
        if (share := real_number(t)) is None or not 0 <= share <= 1:
            raise ValueError(f"{name} is a share of a head's attention mass, in [0, 1], got {t!r}")
        shares[name] = share
    diag_threshold, special_threshold = shares["diag_threshold"], shares["special_threshold"]
    df = df.copy()
    df["diagonal"] = df["diag_mass"] >= diag_threshold
    held = (df["cls_mass"] + df["sep_mass"].fillna(0.0)) >= special_threshold
    unknown = df["sep_mass"].isna() & ~held  # no fixed separator: [CLS] alone may not hold it, [SEP] might
    df["cls_sep"] = held.astype("boolean").mask(unknown) if unknown.any() else held
    return df


def summary_line(df: pd.DataFrame) -> str:
    """A sentence like the paper's: share of diagonal heads and of [CLS]/[SEP] heads."""
    _require(df, ("diagonal", "cls_sep"), "classify's table")
    cls_sep = df["cls_sep"]
    if cls_sep.isna().any():
        special = (
            f"most mass on [CLS] alone in at least {100 * cls_sep.fillna(False).astype(bool).mean():.0f}% "
            "([SEP] at no fixed position)"
        )
    else:
        special = f"most mass on [CLS]/[SEP] in {100 * cls_sep.astype(bool).mean():.0f}%"
    return f"diagonal pattern in {100 * df['diagonal'].mean():.0f}% of heads, {special} ({len(df)} heads)"
