"""PAPA: how much does a pretrained encoder use its input-dependent attention?

Public API (usable from a notebook, no Snakemake needed)::

    model, tok = papa.load_encoder("minilm")                 # on "cuda" where there is one
    enc = papa.encode(tok, texts, max_length=64)            # papa layout
    C = papa.average_attention(model, enc.batches(32))       # ConstantAttention
    with papa.patch(model, C, static=mask):                  # heads use constants
        out = model(**enc.model_inputs(device=model.device))

Submodules: `papa.data` (datasets), `papa.probe` (probes, training, feature cache),
`papa.selection` (head orders), `papa.metrics`, `papa.tables`, `papa.plots`,
`papa.pipeline` (the workflow's stages). Names are imported lazily, so table and plot
code does not pay for importing torch.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what an editor or type checker sees (`_EXPORTS` is what runs; a test holds the two equal)
    from .constants import ConstantAttention, average_attention, data_free, effective_attention
    from .data import load_task
    from .encoding import Encoded, encode
    from .models import UnsupportedModelError, load_encoder, model_shape
    from .patching import PatchHandle, SequenceLengthMismatch, patch
    from .probe import TrainConfig, learn_lambdas, run_probe
    from .selection import head_order, select_static

_EXPORTS = {
    "ConstantAttention": "constants",
    "average_attention": "constants",
    "data_free": "constants",
    "effective_attention": "constants",
    "Encoded": "encoding",
    "encode": "encoding",
    "UnsupportedModelError": "models",
    "load_encoder": "models",
    "model_shape": "models",
    "PatchHandle": "patching",
    "SequenceLengthMismatch": "patching",
    "patch": "patching",
    # the steps after them, where a notebook looks first (also in their submodules)
    "load_task": "data",
    "TrainConfig": "probe",
    "learn_lambdas": "probe",
    "run_probe": "probe",
    "head_order": "selection",
    "select_static": "selection",
}

#: Submodules reachable as ``papa.<name>`` after a plain ``import papa`` (imported on first use).
_SUBMODULES = frozenset({
    "checks", "constants", "cost", "data", "encoding", "fingerprint", "io", "layout", "metrics", "mlm", "models",
    "patching", "patterns", "pin", "pipeline", "plots", "probe", "records", "rehearsal", "selection", "spec", "tables",
    "unpad",
})  # fmt: skip

# written out, not computed from _EXPORTS: type checkers read it statically
__all__ = [
    "ConstantAttention",
    "Encoded",
    "PatchHandle",
    "SequenceLengthMismatch",
    "TrainConfig",
    "UnsupportedModelError",
    "average_attention",
    "data_free",
    "effective_attention",
    "encode",
    "head_order",
    "learn_lambdas",
    "load_encoder",
    "load_task",
    "model_shape",
    "patch",
    "run_probe",
    "select_static",
]


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:  # papa.probe.run_probe after `import papa`, as the README writes it
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'papa' has no attribute {name!r}")


def __dir__():
    """The exported names and submodules too (tab completion, ``dir(papa)``), not only those imported so far."""
    return sorted(set(globals()) | set(_EXPORTS) | _SUBMODULES)
