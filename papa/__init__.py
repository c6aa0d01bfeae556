"""PAPA: how much does a pretrained encoder use its input-dependent attention?

Public API (usable from a notebook, no Snakemake needed)::

    model, tok = papa.load_encoder("minilm")
    enc = papa.encode(tok, texts, max_length=64)            # papa layout
    C = papa.average_attention(model, enc.batches(32))       # ConstantAttention
    with papa.patch(model, C, static=mask):                  # heads use constants
        out = model(**enc.model_inputs())

Submodules: `papa.data` (datasets), `papa.probe` (probes, training, feature cache),
`papa.selection` (head orders), `papa.metrics`, `papa.tables`, `papa.plots`,
`papa.pipeline` (the workflow's stages). Names are imported lazily, so table and plot
code does not pay for importing torch.
"""

import importlib

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
    "checks", "constants", "cost", "data", "encoding", "fingerprint", "io", "metrics", "mlm", "models", "patching",
    "patterns", "pin", "pipeline", "plots", "probe", "records", "rehearsal", "selection", "spec", "tables", "unpad",
})  # fmt: skip

__all__ = sorted(_EXPORTS)


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
