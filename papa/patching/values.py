"""Where the dropout-route families compute their per-head values.

DeBERTa and MPNet compute their own softmax, so the dropout route sees attention probabilities
but not the values they multiply. Effective attention needs those values: a forward hook on the
value projection reads them from the same forward pass. `VALUE_READERS` says, per model type,
which projection that is and how its output splits into heads.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def split_heads(mod, out: torch.Tensor) -> torch.Tensor:
    """A value projection's output [B, N, H * d] as per-head values [B, H, N, d]
    (DeBERTa-v2/v3 ``value_proj``, MPNet ``v``; neither adds anything after the projection)."""
    B, N, _ = out.shape
    return out.view(B, N, mod.num_attention_heads, -1).transpose(1, 2)


def deberta_values(mod, out: torch.Tensor) -> torch.Tensor:
    """DeBERTa v1: ``in_proj`` yields, per head, its query, key and value rows in turn
    ([B, N, H * 3d]); the value is the last third, plus ``v_bias``."""
    B, N, _ = out.shape
    H = mod.num_attention_heads
    v = out.view(B, N, H, 3, -1)[:, :, :, 2]  # [B, N, H, d]
    return (v + mod.v_bias.view(H, -1).to(v.dtype)).transpose(1, 2)


#: dropout-route model type -> (attribute of the value projection, reader of its output as [B, H, N, d])
VALUE_READERS: dict[str, tuple[str, Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]]] = {
    "deberta": ("in_proj", deberta_values),
    "deberta-v2": ("value_proj", split_heads),
    "mpnet": ("v", split_heads),
}


def value_reader(model_type: str) -> tuple[str, Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]]:
    """``(projection attribute, reader)`` for a model type, or a ValueError saying where to add it."""
    if model_type not in VALUE_READERS:
        raise ValueError(
            f"Effective attention needs the values, and PAPA does not know where model type "
            f"{model_type!r} computes them; add it to papa.patching.values.VALUE_READERS"
        )
    return VALUE_READERS[model_type]
