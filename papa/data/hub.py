"""Hub datasets: loading a known dataset from the Hugging Face hub, failing fast where it is unreachable.

`load_hub` resolves the dataset's revision to a commit sha first (in a thread, so an
unreachable hub fails within ``hub_timeout`` seconds with a `DataUnavailableError` that
names a local spec to use instead), then reads it with ``datasets.load_dataset``. With
``HF_HUB_OFFLINE=1`` it reads the Hugging Face cache only. Where each dataset lives on the
hub is in `papa.data.registry` (`HubSource`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pandas as pd

from .errors import DataUnavailableError, require_columns
from .registry import HUB_SPECS, PACKAGE_TASKS, Dataset

log = logging.getLogger(__name__)

#: Spec keys hub datasets take (besides those of every source, `papa.data.task.COMMON_KEYS`).
SPEC_KEYS = frozenset({"hub_id", "hub_config", "revision", "data_dir", "hub_timeout", "hf_cache_dir"})
#: Spec keys that say how to reach the hub, not what is loaded: left out of the recorded spec (and of
#: the workflow's params), so a longer timeout or another cache folder reruns nothing.
ACCESS_KEYS = frozenset({"hub_timeout", "hf_cache_dir"})


def _hub_unavailable(name: str, hub_id: str, why: str, offline: bool = False) -> DataUnavailableError:
    known = HUB_SPECS.get(name)
    example = (known and known.local_example) or '{"name": ..., "source": "local", "train": ..., "validation": ...}'
    return DataUnavailableError(
        f"task {name!r}: the Hugging Face hub is unreachable from here (or switched off), so "
        f"{hub_id!r} cannot be loaded ({why}).\nTo use a local copy instead, give the task a local source, e.g.\n  "
        f"{example}\n"
        + (
            "or load it once where the hub is reachable, into the Hugging Face cache this machine reads (or the "
            "dataset's hf_cache_dir); "
            if offline
            else "or, if the dataset is already in your Hugging Face cache, set HF_HUB_OFFLINE=1; "
        )
        + f"the offline package tasks are {', '.join(PACKAGE_TASKS)}."
    )


def _hub_offline() -> bool:
    """True where hub access is switched off (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)."""
    try:
        import datasets.config as dc
        import huggingface_hub.constants as hc

        if hc.HF_HUB_OFFLINE or dc.HF_HUB_OFFLINE:
            return True
    except Exception:  # noqa: BLE001 - the libraries moved or renamed their flags: the variables below decide
        pass
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))  # fmt: skip


#: seconds a hub request may take when a dataset sets no ``hub_timeout`` (also `papa.pin`'s requests)
HUB_TIMEOUT = 10.0


def hub_revision(name: str, spec: dict) -> tuple[str | None, str | None]:
    """(hub id, revision) of hub dataset ``name``: the spec's ``hub_id`` and ``revision`` over the
    registry's (`HUB_SPECS`; None where neither names one)."""
    base = HUB_SPECS.get(name)
    return spec.get("hub_id") or (base.hub_id if base else None), spec.get("revision", base.revision if base else None)


def resolve_revision(name: str, hub_id: str, revision: str | None, timeout: float) -> str:
    """Resolve ``revision`` of hub dataset ``hub_id`` (config name ``name``) to a commit sha, failing
    within ~timeout seconds (`load_hub`; `papa.pin`)."""
    from huggingface_hub import HfApi

    result: dict = {}

    def target():
        try:
            result["info"] = HfApi().dataset_info(hub_id, revision=revision, timeout=timeout)
        except BaseException as e:  # noqa: BLE001 - reported below
            result["error"] = e

    t = threading.Thread(target=target, name="papa-hub-probe", daemon=True)
    t.start()
    t.join(timeout + 5.0)
    if t.is_alive():
        raise _hub_unavailable(name, hub_id, f"no answer within {timeout + 5:.0f} s")
    err = result.get("error")
    if err is not None:
        ename = type(err).__name__
        if ename in ("RepositoryNotFoundError", "RevisionNotFoundError", "GatedRepoError"):
            raise DataUnavailableError(
                f"task {name!r}: {hub_id!r} (revision {revision!r}) was not found or is gated on the hub "
                f"({ename}: {err}); check hub_id / revision, or use a local source"
            ) from err
        raise _hub_unavailable(name, hub_id, f"{ename}: {err}") from err
    return result["info"].sha


def load_hub(ds: Dataset, spec: dict, cache_dir: Path) -> tuple[str, list[str], dict, dict]:
    """(kind, label names, splits, provenance) of hub dataset ``ds``; spec keys: `SPEC_KEYS`.

    Label names come from the dataset's ``ClassLabel`` features where it has them, else
    from the registry. Raises `DataUnavailableError` within about ``hub_timeout`` seconds
    where the hub cannot be reached.
    """
    name, base = ds.name, ds.source
    hub_id, revision = hub_revision(name, spec)
    config = spec.get("hub_config", base.hub_config)
    data_dir = spec.get("data_dir", base.data_dir)
    timeout = float(spec.get("hub_timeout", HUB_TIMEOUT))
    kind, default_labels = ds.kind, ds.labels

    import datasets

    sha = None
    offline = _hub_offline()
    if not offline:
        sha = resolve_revision(name, hub_id, revision, timeout)
    kw: dict = {"revision": sha or revision}
    if data_dir:
        kw["data_dir"] = data_dir
    if spec.get("hf_cache_dir"):
        kw["cache_dir"] = str(spec["hf_cache_dir"])
    t0 = time.monotonic()  # a first load downloads the dataset (MNLI: ~300 MB); its bars go to stderr only
    log.info("loading %s%s at %s from the hub (or its cache)", hub_id, f" ({config})" if config else "", kw["revision"])
    try:
        dd = datasets.load_dataset(hub_id, config, **kw)
        log.info("loaded %s in %.1f s: %s", hub_id, time.monotonic() - t0,
                 ", ".join(f"{k} {len(v)} rows" for k, v in dd.items()))  # fmt: skip
    except Exception as e:  # any failure here means the data is not available
        if offline:
            why = (
                f"hub access is switched off (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE) and there is no cached copy: "
                f"{type(e).__name__}: {e}"
            )
            raise _hub_unavailable(name, hub_id, why, offline=True) from e
        raise DataUnavailableError(f"task {name!r}: loading {hub_id!r} failed: {type(e).__name__}: {e}") from e

    prov = {"hub_id": hub_id, "hub_config": config, "revision": revision, "resolved_sha": sha,
            "data_dir": data_dir, "datasets_version": datasets.__version__, "offline_cache": offline}  # fmt: skip
    splits: dict[str, pd.DataFrame] = {}
    label_names = list(default_labels)
    names_from_hub = False  # the label names the hub's ClassLabel features give (ids index them), over LABEL_SETS
    dropped = {}
    for ours, theirs in base.splits.items():
        if theirs not in dd:
            raise DataUnavailableError(f"task {name!r}: {hub_id!r} has no split {theirs!r}; it has {list(dd)}")
        ds = dd[theirs]
        cols = ds.column_names
        if base.unlabeled:  # one paragraph per row; blank lines and "= Heading =" lines dropped
            require_columns([base.text], cols, f"{hub_id} split {theirs}")
            lines = [t.strip() for t in ds[base.text]]
            keep = [t for t in lines if t and not (t.startswith("=") and t.endswith("="))]
            dropped[ours] = len(lines) - len(keep)
            df = pd.DataFrame(
                {"id": [f"{name}-{theirs}-{i}" for i in range(len(keep))], "text": keep, "text_b": None, "label": -1}
            )
        elif kind == "sequence":
            need = [base.text, "label"] + ([base.text_b] if base.text_b else [])
            require_columns(need, cols, f"{hub_id} split {theirs}")
            names = getattr(ds.features["label"], "names", None)
            if names:
                label_names, names_from_hub = list(names), True
            d = ds.to_dict()
            n = len(d["label"])
            ids = [str(i) for i in d.get("idx", range(n))]
            df = pd.DataFrame({
                "id": [f"{name}-{theirs}-{i}" for i in ids],
                "text": d[base.text],
                "text_b": d[base.text_b] if base.text_b else None,
                "label": d["label"],
            })  # fmt: skip
            bad = df["label"] < 0
            if bad.any():
                dropped[ours] = int(bad.sum())
                df = df[~bad].reset_index(drop=True)
        else:
            require_columns(["tokens", base.tags], cols, f"{hub_id} split {theirs}")
            feat = ds.features[base.tags]
            names = getattr(getattr(feat, "feature", None), "names", None)
            if names:
                label_names, names_from_hub = list(names), True
            d = ds.to_dict()
            n = len(d["tokens"])
            ids = d.get("id", range(n))
            df = pd.DataFrame({
                "id": [f"{name}-{theirs}-{i}" for i in ids],
                "tokens": [list(map(str, t)) for t in d["tokens"]],
                "tags": [list(map(int, t)) for t in d[base.tags]],
            })  # fmt: skip
            empty = df["tokens"].map(len) == 0
            if empty.any():
                dropped[ours] = int(empty.sum())
                df = df[~empty].reset_index(drop=True)
        splits[ours] = df
    prov["split_map"] = dict(base.splits)
    prov["n_dropped"] = int(sum(dropped.values()))
    if dropped:
        prov["dropped_per_split"] = dropped
        prov["dropped_reason"] = "blank or heading lines" if base.unlabeled else "no label (-1) / empty sentence"
    prov["label_names_source"] = "hub features" if names_from_hub else "papa.data.LABEL_SETS"
    return kind, label_names, splits, prov
