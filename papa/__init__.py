"""PAPA: how much does a pretrained encoder use its input-dependent attention?

Public API (usable from a notebook, no Snakemake needed)::

    model, tok = papa.load_encoder("minilm")
    enc = papa.encode(tok, texts, max_length=64)            # papa layout
    C = papa.average_attention(model, enc.batches(32))       # ConstantAttention
    with papa.patch(model, C, static=mask):                  # heads use constants
        out = model(**enc.model_inputs())
"""

from .constants import ConstantAttention, average_attention, data_free, effective_attention
from .encoding import Encoded, encode
from .models import UnsupportedModelError, load_encoder, model_shape
from .patching import PatchHandle, SequenceLengthMismatch, patch

__all__ = [
    "ConstantAttention",
    "Encoded",
    "PatchHandle",
    "SequenceLengthMismatch",
    "UnsupportedModelError",
    "average_attention",
    "data_free",
    "effective_attention",
    "encode",
    "load_encoder",
    "model_shape",
    "patch",
]
