"""Cross-checks of a workflow config that its JSON schema cannot express.

The workflow runs `check_config` when it parses the config, so a mistake that would
otherwise surface hours later inside a job (a metric that does not fit the task kind, a
sequence length beyond the model's positions, an unknown package dataset, duplicate
seeds) fails before any job starts, naming the config key and what to change.
"""

from __future__ import annotations

import json
from pathlib import Path

from .data import KNOWN_TASKS, LABEL_SETS
from .metrics import SEQUENCE_METRICS, TOKEN_METRICS


class ConfigError(ValueError):
    """The workflow config is invalid; the message names every offending key."""


def dataset_kind(name: str, spec: dict) -> str | None:
    """``"sequence"`` or ``"token"`` for a dataset spec of the config, None if unknown before loading."""
    return spec.get("kind") or LABEL_SETS.get(spec.get("name", name), (None, None))[0]


def _local_config(name_or_path: str) -> dict | None:
    """The model's config.json when it is on this machine without a download, else None."""
    from .models import ALIASES, SPLIT_ZIP_ALIASES, looks_like_path, resolve_model_path, split_revision

    name_or_path = split_revision(name_or_path)[0]
    key = str(name_or_path).lower()
    path = None
    if key in ALIASES:
        path = Path(resolve_model_path(name_or_path)) / "config.json"
    elif key in SPLIT_ZIP_ALIASES:
        from .data import default_cache_dir

        path = default_cache_dir() / "models" / SPLIT_ZIP_ALIASES[key] / "config.json"
    elif looks_like_path(name_or_path) or Path(name_or_path).is_dir():
        path = Path(name_or_path).expanduser() / "config.json"
    else:
        try:
            from huggingface_hub import try_to_load_from_cache

            hit = try_to_load_from_cache(str(name_or_path), "config.json")
            path = Path(hit) if isinstance(hit, str) else None
        except Exception:  # noqa: BLE001 - no cache, no check
            path = None
    if path is None or not path.is_file():
        return None
    return json.loads(path.read_text())


def position_limit(name_or_path: str) -> int | None:
    """The longest input (N) the model's position embeddings allow, None when unknown or unbounded.

    RoBERTa-style models (positions counted after the padding index) lose ``pad_token_id + 1``
    positions; DeBERTa without absolute positions (``position_biased_input: false``) has no limit.
    """
    cfg = _local_config(name_or_path)
    if cfg is None or "max_position_embeddings" not in cfg:
        return None
    if cfg.get("model_type", "").startswith("deberta") and cfg.get("position_biased_input") is False:
        return None
    n = int(cfg["max_position_embeddings"])
    if cfg.get("model_type") in ("roberta", "xlm-roberta", "camembert", "mpnet"):
        n -= int(cfg.get("pad_token_id", 1)) + 1
    return n


def check_config(config: dict) -> None:
    """Raise a `ConfigError` listing every problem found; the schema has already validated the shape."""
    errors = []
    datasets = config.get("datasets", {})
    for key, spec in datasets.items():
        source, name = spec.get("source"), spec.get("name", key)
        if source in KNOWN_TASKS and name not in KNOWN_TASKS[source]:
            errors.append(f"datasets.{key}: unknown {source} dataset {name!r}; known {source} datasets: "
                          f"{', '.join(KNOWN_TASKS[source])} (or source: local with your own files)")  # fmt: skip
    sweep = config.get("sweep", {})
    for key in ("seeds", "fractions"):
        values = [float(v) for v in sweep.get(key, [])]
        dup = sorted({v for v in values if values.count(v) > 1})
        if dup:
            errors.append(f"sweep.{key} lists {', '.join(f'{v:g}' for v in dup)} more than once; list each once")
    limits = {m: position_limit(p) for m, p in config.get("models", {}).items() if isinstance(p, str)}
    for task, tc in config.get("tasks", {}).items():
        spec = datasets.get(tc.get("dataset"), {})
        kind = dataset_kind(tc.get("dataset", ""), spec)
        allowed = {"sequence": SEQUENCE_METRICS, "token": TOKEN_METRICS}.get(kind)
        for metric in tc.get("metrics", []):
            if allowed is not None and metric not in allowed:
                errors.append(f"tasks.{task}.metrics: {metric!r} does not fit dataset {tc['dataset']!r}, a {kind} "
                              f"task; use {', '.join(allowed)}")  # fmt: skip
        n = tc.get("max_length")
        for model, limit in limits.items():
            if n is not None and limit is not None and n > limit:
                errors.append(f"tasks.{task}.max_length = {n} exceeds the {limit} positions of model {model!r}; "
                              f"use at most {limit}")  # fmt: skip
    if errors:
        raise ConfigError("Invalid config:\n  - " + "\n  - ".join(errors))
