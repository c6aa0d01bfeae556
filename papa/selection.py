"""Which heads to replace (paper Sec. 3.2 and Fig. 5).

A *ranking* is a 1-D int tensor of flat head indices ``layer * heads + head`` in the
order heads are replaced (first = replaced first).
"""

from __future__ import annotations

import torch

from . import spec
from .io import check_seed, is_integer

#: The head orders: `papa.spec.HEAD_ORDERS` (this name is kept for notebooks).
ORDERS = spec.HEAD_ORDERS
#: How many heads stay input-dependent: `papa.spec.n_dynamic` (this name is kept for notebooks).
n_dynamic = spec.n_dynamic


def check_shape(shape) -> tuple[int, int]:
    """``shape`` as (layers, heads), two positive integers (`papa.model_shape`), or a `ValueError`."""
    try:
        L, H = shape
    except (TypeError, ValueError):
        raise ValueError(f"shape must be (layers, heads), got {shape!r}") from None
    if not (is_integer(L) and is_integer(H) and L > 0 and H > 0):
        raise ValueError(f"shape must be (layers, heads), two positive integers (papa.model_shape), got {shape!r}")
    return int(L), int(H)


def rank_heads(lambdas: torch.Tensor) -> torch.Tensor:
    """Heads by lambda ascending (smallest lambda replaced first); ties by layer, then head."""
    if isinstance(lambdas, (str, bytes)) or lambdas is None:
        raise TypeError(f"rank_heads takes the learned lambdas (a [layers, heads] tensor), got {lambdas!r}")
    flat = torch.as_tensor(lambdas, dtype=torch.float64).flatten()
    if not torch.isfinite(flat).all():
        raise ValueError("lambdas contain NaN/inf: they give no head order; learn them again")
    return torch.sort(flat, stable=True).indices


def head_order(order: str, shape: tuple[int, int], lambdas: torch.Tensor | None = None, seed: int = 0) -> torch.Tensor:
    """A ranking for one of `ORDERS`: ``lambda`` (the method), ``reversed`` (largest lambda
    first), ``first_to_last`` / ``last_to_first`` (by layer, heads in their internal order),
    ``random`` (seeded permutation)."""
    L, H = check_shape(shape)
    total = L * H
    if order in spec.LAMBDA_ORDERS:
        if lambdas is None:
            raise ValueError(f"head order {order!r} needs the learned lambdas")
        lambdas = torch.as_tensor(lambdas, dtype=torch.float64)
        if tuple(lambdas.shape) != (L, H):
            raise ValueError(f"lambdas have shape {tuple(lambdas.shape)}, model has {(L, H)}")
        r = rank_heads(lambdas)  # refuses NaN/inf
        return r if order == "lambda" else rank_heads(-lambdas)
    if order == "first_to_last":
        return torch.arange(total)
    if order == "last_to_first":
        return torch.arange(total).view(L, H).flip(0).flatten()
    if order == "random":
        g = torch.Generator().manual_seed(check_seed(seed, "head_order's seed"))
        return torch.randperm(total, generator=g)
    raise ValueError(f"Unknown head order {order!r}; choose from {ORDERS}")


def select_static(ranking: torch.Tensor, fraction_dynamic: float, shape: tuple[int, int] | None = None) -> torch.Tensor:
    """Bool [layers, heads] mask, True = static: all heads but the last ``spec.n_dynamic(f, heads)`` of
    ``ranking`` (f x heads, halves rounded up, not Python's round-half-to-even).

    The one place the static heads are derived from ``fraction_dynamic`` (the share left
    input-dependent): the first ``heads - n_dynamic`` heads of the ranking. ``shape`` (layers, heads)
    is required (the keyword stays optional for old calls; without it a ValueError says so)."""
    ranking = torch.as_tensor(ranking).flatten()
    total = ranking.numel()
    if shape is None:
        raise ValueError("select_static needs shape=(layers, heads)")
    shape = check_shape(shape)
    spec.check_fraction(fraction_dynamic)
    if ranking.dtype.is_floating_point or ranking.dtype == torch.bool:
        raise ValueError(
            f"ranking must be flat head indices (integers, papa.selection.head_order), got {ranking.dtype}"
        )
    if shape[0] * shape[1] != total:
        raise ValueError(f"ranking has {total} heads, shape {shape} has {shape[0] * shape[1]}: rank the heads of the "
                         f"model the shape is of (papa.selection.head_order with its shape)")  # fmt: skip
    if not torch.equal(torch.sort(ranking).values, torch.arange(total)):
        raise ValueError(f"ranking must order every head index 0..{total - 1} once (a permutation)")
    n_dynamic = spec.n_dynamic(fraction_dynamic, total)
    static = torch.zeros(total, dtype=torch.bool)
    static[ranking[: total - n_dynamic]] = True
    return static.view(shape)
