"""Replacing attention matrices with constant ones (and recording them), one concern per module.

* `papa.patching.kernels`: the tensor maths (`constant_output`, `masked_constant`, `check_length`).
* `papa.patching.modes`: `Mode` and the one implementation of each mode (static, mix, record).
* `papa.patching.routes`: installing them through transformers' attention-function registry
  (BERT-like families) or a hook on the attention-probability dropout (DeBERTa, MPNet).
* `papa.patching.values`: where the dropout-route families compute their values.
* `papa.patching.handle`: `patch` / `PatchHandle`, validation, lambdas and the undo stack.
* `papa.patching.record`: `record_attention`, the public context for recording attention.

A constant matrix ``C`` [N, N] is used, per example, restricted to the valid (non-pad) key and
query positions and row-normalised (L1); rows of pad queries are zero.
"""

from .handle import PatchHandle, patch
from .kernels import SequenceLengthMismatch, check_layout, check_length, constant_output, masked_constant
from .modes import Mode
from .record import record_attention
from .routes import ATTN_NAME

__all__ = [
    "ATTN_NAME",
    "Mode",
    "PatchHandle",
    "SequenceLengthMismatch",
    "check_layout",
    "check_length",
    "constant_output",
    "masked_constant",
    "patch",
    "record_attention",
]
