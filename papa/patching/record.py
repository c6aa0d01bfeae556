"""Recording attention: a public context in which a model runs as usual and hands every layer's
attention probabilities to a callback (what `papa.average_attention` averages).

On the registry route the probabilities are computed as transformers' eager attention computes
them (so the model's output equals its eager output); on the dropout route they are the model's
own, read at its attention-probability dropout.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .handle import PatchHandle
from .modes import OnAttention


@contextmanager
def record_attention(model, on_attention: OnAttention, values: bool = False) -> Iterator[PatchHandle]:
    """While open, every attention layer of ``model`` calls
    ``on_attention(layer, probs, valid, value, keys_masked)`` in each forward pass.

    Args:
        model: a supported encoder.
        on_attention: called once per layer and forward pass, after the layer's output is computed, with
            ``probs`` [B, H, N, N] the attention probabilities, ``valid`` [B, N] bool the non-pad tokens
            (None without an attention mask), ``value`` [B, H, N, d] the values (None unless ``values``)
            and ``keys_masked``: True when ``probs`` is exactly 0 at pad keys and the model no longer
            reads it (the callback may then modify it in place; otherwise it must not).
        values: also hand over the per-head values (effective attention needs them).
    Yields:
        The record-mode `PatchHandle`; leaving the context removes it, restoring the model exactly.
    """
    handle = PatchHandle._recording(model, on_attention, values=values)
    try:
        yield handle
    finally:
        handle.remove()
