"""The task layer: `TaskData`, its files, splitting and subsampling, and `load_task`, the one entry.

`load_task` checks a spec's common keys (`COMMON_KEYS`), hands the source-specific part
to `papa.data.packages`, `papa.data.hub` or `papa.data.local`, then makes the seeded
train/validation split where the source has none, subsamples (``max_train``,
``max_validation``), and normalises every split to the canonical columns and dtypes
(`normalize_frame`). `TaskData.save` / `TaskData.read` write and read a prepared task
(``{split}.parquet`` + ``meta.json``, each atomically through `papa.io.atomic_path`). Each split's file
describes itself (`TaskData.save_split` / `TaskData.read_split`): the workflow prepares a split per job, with
`split_spec`, so a setting of one split reruns nothing that reads the other.

Splits are seeded and deterministic: the same spec and seed give identical frames (one
independent random stream per purpose: 0 the split, 1 the train subsample, 2 the
validation subsample).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..io import SEED_LIMIT, SPLIT_META_KEY, atomic_path, footer_json, is_integer, parquet_file, read_table, write_table
from ..spec import BINARY_METRICS, NAME_PATTERN, PREPARED_SPLITS
from . import hub, local, packages
from .downloads import default_cache_dir, known_home, make_cache_dir
from .errors import DataIntegrityError, TaskSpecError, positive_int, require_columns
from .hub import load_hub
from .local import INFERRED, load_local
from .packages import load_package, raw_file
from .registry import DATASETS, KNOWN_TASKS, SOURCES

log = logging.getLogger(__name__)

SEQUENCE_COLUMNS = ["id", "text", "text_b", "label"]
TOKEN_COLUMNS = ["id", "tokens", "tags"]
META_FILE = "meta.json"
META_VERSION = 1

#: The spec key that subsamples each prepared split (`papa.spec.PREPARED_SPLITS`): the only one that reaches that
#: split alone.
SUBSAMPLE_KEYS = {"train": "max_train", "validation": "max_validation"}

#: Spec keys every source takes; each source adds its own (`papa.data.packages.SPEC_KEYS`, ...).
COMMON_KEYS = frozenset({"name", "source", "max_train", "max_validation", "validation_fraction"})
#: The share of a source's train split held out where it has no validation split (``validation_fraction``).
VALIDATION_FRACTION = 0.2
#: Spec keys load_task understands (any other fails, naming the near one; another source's fails too, but for the
#: hub access keys, recorded in provenance as ignored). The config
#: schema's ``datasets`` properties are these plus ``build`` (a test holds them equal).
SPEC_KEYS: set[str] = set(COMMON_KEYS | packages.SPEC_KEYS | hub.SPEC_KEYS | local.SPEC_KEYS)
#: The keys each source reads besides `COMMON_KEYS` (``papa.checks`` and `load_task` refuse another source's).
SOURCE_KEYS: dict[str, frozenset[str]] = {"package": packages.SPEC_KEYS, "hub": hub.SPEC_KEYS, "local": local.SPEC_KEYS}


@dataclass
class TaskData:
    """One task's data; `save` and `read` are its files (``{split}.parquet`` and ``meta.json``).

    Attributes:
        name: task name (e.g. ``"rt_sentiment"``).
        kind: ``"sequence"`` or ``"token"``.
        label_names: label (or tag) names; the index is the integer label. ``[]`` for
            unlabeled text corpora.
        splits: split name -> DataFrame (``"train"``, ``"validation"``, possibly more).
            Schemas: `SEQUENCE_COLUMNS` / `TOKEN_COLUMNS` (dtypes: the `papa.data` docstring).
        provenance: where the data came from and what was done to it (source, package or
            hub id, version, sha256 of the raw file, seed, split sizes, rows dropped and why).
    """

    name: str
    kind: str
    label_names: list[str]
    splits: dict[str, pd.DataFrame]
    provenance: dict = field(default_factory=dict)

    @property
    def sizes(self) -> dict[str, int]:
        """Number of rows per split."""
        return {k: int(len(v)) for k, v in self.splits.items()}

    @property
    def labeled(self) -> bool:
        """False for unlabeled text corpora (``label_names == []``)."""
        return bool(self.label_names)

    @property
    def is_pair(self) -> bool:
        """True for sentence-pair sequence tasks (some ``text_b`` is not None)."""
        if self.kind != "sequence":
            return False
        return any(df["text_b"].notna().any() for df in self.splits.values())

    def __getitem__(self, split: str) -> pd.DataFrame:
        """``task["train"]``; a missing split names the ones there are."""
        try:
            return self.splits[split]
        except KeyError:
            raise KeyError(f"task {self.name!r} has no split {split!r}; it has {sorted(self.splits)}") from None

    def save(self, out_dir: str | Path) -> Path:
        """Write ``{split}.parquet`` per split (`save_split`) and ``meta.json`` into ``out_dir``, each atomically.

        ``meta.json`` (name, kind, label_names, provenance, split sizes) is written last, so
        its presence means the folder is complete. Returns the path of ``meta.json``.
        """
        out_dir = Path(out_dir)
        for split in self.splits:
            self.save_split(split, out_dir / f"{split}.parquet")
        meta = {
            "format_version": META_VERSION,
            "name": self.name,
            "kind": self.kind,
            "label_names": list(self.label_names),
            "splits": {k: int(len(v)) for k, v in self.splits.items()},
            "provenance": _jsonable(self.provenance),
        }
        target = out_dir / META_FILE
        with atomic_path(target) as tmp:
            tmp.write_bytes((json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        return target

    def save_split(self, split: str, path: str | Path) -> Path:
        """Write one split to ``path`` (atomically), a Parquet file that describes itself: its rows, and under
        the key ``papa.task`` (`SPLIT_META_KEY`) of its metadata the task's name, kind, label names, provenance
        and the splits saved with it (``task_splits``: a folder missing one of them is incomplete). `read_split`
        reads it alone. Returns ``path``."""
        import pyarrow as pa

        if not re.fullmatch(NAME_PATTERN, split):
            raise TaskSpecError(f"split name {split!r} cannot be a file name; use letters, digits, _ . -")
        df = normalize_frame(self[split], self.kind)
        meta = {"format_version": META_VERSION, "name": self.name, "kind": self.kind,
                "label_names": list(self.label_names), "split": split, "rows": int(len(df)),
                "task_splits": list(self.splits), "provenance": _jsonable(self.provenance)}  # fmt: skip
        table = pa.Table.from_pandas(df, schema=_arrow_schema(self.kind), preserve_index=False)
        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), SPLIT_META_KEY: json.dumps(meta, ensure_ascii=False).encode("utf-8")}
        )
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_table(table, path)
        return path

    @classmethod
    def read_split(cls, path: str | Path) -> TaskData:
        """Read a file written by `save_split` into a `TaskData` holding that one split."""
        path = Path(path)
        meta = _split_meta(path)
        if meta is None:
            raise ValueError(
                f"{path} does not describe itself (no {SPLIT_META_KEY.decode()} metadata): it was written by an "
                f"older papa; read its folder with TaskData.read, or prepare it again"
            )
        df = _read_rows(path, meta)
        return cls(meta["name"], meta["kind"], list(meta["label_names"]), {meta["split"]: df}, meta["provenance"])

    @classmethod
    def read(cls, out_dir: str | Path, splits=None) -> TaskData:
        """Read a folder written by `TaskData.save`, or split files written by `save_split` (the workflow's, a
        job per split), back into an identical `TaskData`; ``splits`` (names) reads only those (the others'
        files are not opened), None = every split of the folder.

        A split file that describes itself is read as it says; ``meta.json`` describes the others (files of an
        older papa); other Parquet files are not the task's. Splits saved together (`save`) share their
        provenance; splits saved apart (the workflow's, each with its own spec, `split_spec`) give
        ``provenance = {"by_split": {split: provenance}}``.

        Raises:
            FileNotFoundError: nothing of a task is there, or a split saved with the others is missing.
            DataIntegrityError: a file's rows or split name are not what its description says, or the splits
                disagree on the task (name, kind, labels)."""
        out_dir = Path(out_dir)
        meta_path = out_dir / META_FILE
        folder = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else None
        listed = dict(folder["splits"]) if folder else {}
        candidates = splits if splits is not None else [p.stem for p in out_dir.glob("*.parquet")]
        described = {s: m for s in candidates if (out_dir / f"{s}.parquet").is_file()
                     and (m := _split_meta(out_dir / f"{s}.parquet")) is not None}  # fmt: skip
        for split, meta in described.items():
            if meta["split"] != split:
                raise DataIntegrityError(
                    f"{out_dir / (split + '.parquet')} holds split {meta['split']!r}: a file was renamed; "
                    f"prepare the dataset again"
                )
        available = sorted(set(described) | set(listed), key=_split_order)
        if not available:
            raise FileNotFoundError(
                f"{out_dir} holds no split of a task: neither {META_FILE} nor a split file written by "
                f"papa.data.TaskData.save / save_task / save_split (or prepare_data)"
            )
        if splits is not None:
            missing = sorted(set(splits) - set(available))
            if missing:
                raise ValueError(f"{out_dir} has no split {', '.join(missing)}; it has {available}")
        else:  # a folder saved with splits that are not there: written only in part
            for split, meta in described.items():
                lost = sorted(set(meta.get("task_splits", [split])) - set(available))
                if lost:
                    raise FileNotFoundError(
                        f"{out_dir} is incomplete: {split}.parquet was saved with the split(s) {', '.join(lost)}, "
                        f"which are not there; save the task again"
                    )
        metas, frames = {}, {}
        for split in [s for s in available if splits is None or s in splits]:
            path = out_dir / f"{split}.parquet"
            meta = described.get(split)
            if meta is None:  # an older papa's file: meta.json says what it is
                meta = {**folder, "split": split, "rows": listed[split], "task_splits": list(listed)}
            metas[split], frames[split] = meta, _read_rows(path, meta, META_FILE if split not in described else None)
        first = next(iter(metas.values()))
        for split, meta in metas.items():
            for key in ("name", "kind", "label_names"):
                if meta[key] != first[key]:
                    raise DataIntegrityError(
                        f"the splits of {out_dir} disagree on the task's {key}: {first[key]!r} ({first['split']}), "
                        f"{meta[key]!r} ({split}); prepare them again from one spec"
                    )
        together = all(m["provenance"] == first["provenance"] and m["task_splits"] == first["task_splits"]
                       for m in metas.values())  # fmt: skip
        provenance = first["provenance"] if together else {"by_split": {s: m["provenance"] for s, m in metas.items()}}
        return cls(first["name"], first["kind"], list(first["label_names"]), frames, provenance)


def _split_order(split: str):
    return (0, PREPARED_SPLITS.index(split), "") if split in PREPARED_SPLITS else (1, 0, split)


def _split_meta(path: Path) -> dict | None:
    """A split file's own description (its `SPLIT_META_KEY` metadata; the schema only, no rows), or None."""
    raw = (parquet_file(path).schema_arrow.metadata or {}).get(SPLIT_META_KEY)
    return None if raw is None else footer_json(path, raw)


def _read_rows(path: Path, meta: dict, described_by: str | None = None) -> pd.DataFrame:
    """A split file's rows, normalised to ``meta``'s kind, checked against its row count."""
    df = normalize_frame(pd.DataFrame(read_table(path).to_pydict()), meta["kind"])
    if len(df) != meta["rows"]:
        raise DataIntegrityError(f"{path} has {len(df)} rows, {described_by or 'its metadata'} says {meta['rows']}")
    return df


def split_spec(spec: dict, split: str) -> dict:
    """The part of a task spec that one prepared split depends on: ``spec`` without the other splits' subsample
    keys (`SUBSAMPLE_KEYS`; each split draws from its own random stream, and the validation split is carved out
    before ``max_train`` draws from the train split). The workflow prepares each split with its own, so
    ``max_validation`` reruns nothing that reads the train split (its tokens, the matrices averaged on it)."""
    if split not in SUBSAMPLE_KEYS:
        raise ValueError(f"unknown split {split!r}; the prepared splits are {', '.join(SUBSAMPLE_KEYS)}")
    others = {key for s, key in SUBSAMPLE_KEYS.items() if s != split}
    return {k: v for k, v in spec.items() if k not in others}


def split_provenance(provenance: dict, split: str) -> dict:
    """The provenance of a task loaded from `split_spec` (``spec``, ``split``) as far as it tells of ``split``: the
    other prepared splits' sizes and token counts (not subsampled: their subsample key was left out, so a train
    file said ``validation: 2113`` rows of a 400-row validation file) and their subsample keys (``max_validation:
    null`` in a train file of a config with 400) dropped; the unprepared splits' (a test split) are kept."""
    if split not in SUBSAMPLE_KEYS:
        raise ValueError(f"unknown split {split!r}; the prepared splits are {', '.join(SUBSAMPLE_KEYS)}")
    others = [s for s in SUBSAMPLE_KEYS if s != split]
    their_keys = {SUBSAMPLE_KEYS[s] for s in others}
    out = dict(provenance)
    for key in ("split_sizes", "n_tokens"):
        if isinstance(out.get(key), dict):
            out[key] = {s: n for s, n in out[key].items() if s not in others}
    subsample = (out.get("split") or {}).get("subsample")
    if isinstance(subsample, dict):
        out["split"] = {**out["split"], "subsample": {k: v for k, v in subsample.items() if k not in their_keys}}
    return out


# --------------------------------------------------------------------------- frames


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, np.ndarray):
        return x.tolist()
    return list(x)


def normalize_frame(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The canonical columns and dtypes of a split (used on load and on read)."""
    if kind == "sequence":
        require_columns(SEQUENCE_COLUMNS[:2] + ["label"], list(df.columns), "a sequence-task frame")
        tb = df["text_b"] if "text_b" in df.columns else pd.Series([None] * len(df))
        out = pd.DataFrame({
            "id": pd.Series([str(v) for v in df["id"]], dtype="str"),
            "text": pd.Series([str(v) for v in df["text"]], dtype="str"),
            "text_b": pd.Series([None if (v is None or (isinstance(v, float) and np.isnan(v))) else str(v)
                                 for v in tb], dtype=object),
            "label": pd.Series(np.asarray(df["label"], dtype=np.int64), dtype="int64"),
        })  # fmt: skip
    elif kind == "token":
        require_columns(TOKEN_COLUMNS, list(df.columns), "a token-task frame")
        out = pd.DataFrame({
            "id": pd.Series([str(v) for v in df["id"]], dtype="str"),
            "tokens": pd.Series([[str(t) for t in _as_list(x)] for x in df["tokens"]], dtype=object),
            "tags": pd.Series([[int(t) for t in _as_list(x)] for x in df["tags"]], dtype=object),
        })  # fmt: skip
    else:
        raise TaskSpecError(f"kind must be 'sequence' or 'token', got {kind!r}")
    return out


def _check_words(task_name: str, kind: str, splits: dict[str, pd.DataFrame]) -> None:
    """A token task's split whose sentences hold no word (every source, after subsampling): nothing to tag or score."""
    for split, df in splits.items():
        if kind == "token" and not any(len(words) for words in df["tokens"]):
            raise TaskSpecError(f"split {split!r} of task {task_name!r} holds {len(df)} sentence(s) and no word: "
                                f"check its token column (tokens_column, or token_column of a CoNLL file)")  # fmt: skip


def _check_labels(task_name: str, kind: str, label_names: list[str], splits: dict[str, pd.DataFrame]) -> None:
    n = len(label_names)
    for split, df in splits.items():
        if kind == "sequence":
            y = df["label"].to_numpy()
            ok = (y == -1).all() if n == 0 else ((y >= 0) & (y < n)).all()
        else:
            ok = all(0 <= t < n for tags in df["tags"] for t in tags)
        if not ok:
            raise DataIntegrityError(f"task {task_name!r} split {split!r} has labels outside 0..{n - 1}")
    if not n:
        return
    # each class's rows (a token task's words) in the two splits the probes train and are scored on
    classes = {k: (df["label"] if kind == "sequence" else df["tags"].explode().dropna()).astype(int).value_counts()
               for k, df in splits.items() if k in ("train", "validation")}  # fmt: skip
    # a labeled task: a probe (and lambda) trained on one class learns nothing about the others
    present = sorted(classes["train"].index)
    if len(present) < 2:
        only = repr(label_names[present[0]]) if present else "none"
        raise TaskSpecError(
            f"the train split of task {task_name!r} holds one class ({only} of {label_names}): a probe cannot "
            f"learn from it. Check the {'label' if kind == 'sequence' else 'tag'} column, or raise max_train if "
            f"a subsample left one class"
            + (", or, for a local corpus used only for averaging, set label_column: null" if kind == "sequence" else "")
        )
    # a class the probes are scored on but never see in training (labels listed in the config, a subsample): they can
    # never predict it, and each of its rows scores as an error (inferred labels refuse it: `papa.data.local`)
    unseen = {label_names[c]: int(k) for c, k in classes["validation"].items() if c not in classes["train"].index}
    if unseen:
        what, unit = ("label", "rows") if kind == "sequence" else ("tag", "words")
        listed = ", ".join(f"{c!r} ({k} {unit})" for c, k in unseen.items())
        log.warning("task %r: the validation split holds %s(s) the train split never has, %s: no probe can predict "
                    "them, and each counts as an error; check the data, its labels list or max_train", task_name,
                    what, listed)  # fmt: skip


def _arrow_schema(kind: str):
    import pyarrow as pa

    if kind == "sequence":
        return pa.schema([("id", pa.string()), ("text", pa.string()), ("text_b", pa.string()), ("label", pa.int64())])
    return pa.schema([("id", pa.string()), ("tokens", pa.list_(pa.string())), ("tags", pa.list_(pa.int64()))])


def _jsonable(obj: Any) -> Any:
    """Provenance values as plain JSON types."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


# --------------------------------------------------------------------------- splitting


def _rng(seed: int, stream: int) -> np.random.Generator:
    """Independent, reproducible random streams per purpose (split, subsamples)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stream)]))


def _seeded_split(
    df: pd.DataFrame,
    fraction: float,
    seed: int,
    stratify: bool,
) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Deterministic train/validation split (stratified by label, or by article groups)."""
    rng = _rng(seed, 0)
    n = len(df)
    if "_group" in df.columns:
        groups = pd.unique(df["_group"])
        order = rng.permutation(len(groups))
        n_val = max(1, int(round(fraction * len(groups))))
        if n_val >= len(groups):
            raise TaskSpecError(f"validation_fraction={fraction} leaves no training data ({len(groups)} groups)")
        val_groups = set(groups[order[:n_val]].tolist())
        is_val = df["_group"].isin(val_groups).to_numpy()
        method = "seeded split by article (whole articles go to one side)"
    elif stratify:
        is_val = np.zeros(n, dtype=bool)
        for lab in sorted(df["label"].unique().tolist()):
            idx = np.flatnonzero(df["label"].to_numpy() == lab)
            k = int(round(fraction * len(idx)))
            is_val[idx[rng.permutation(len(idx))[:k]]] = True
        method = "seeded split stratified by label"
    else:
        k = max(1, int(round(fraction * n)))
        is_val = np.zeros(n, dtype=bool)
        is_val[rng.permutation(n)[:k]] = True
        method = "seeded random split"
    if is_val.all() or not is_val.any():
        raise TaskSpecError(f"validation_fraction={fraction} of {n} rows leaves an empty split; change it")
    return df[~is_val].reset_index(drop=True), df[is_val].reset_index(drop=True), method


def _subsample(df: pd.DataFrame, k: int | None, seed: int, stream: int) -> pd.DataFrame:
    if k is None or k >= len(df):
        return df
    idx = np.sort(_rng(seed, stream).choice(len(df), size=k, replace=False))
    return df.iloc[idx].reset_index(drop=True)


# --------------------------------------------------------------------------- the entry


#: Each source's loader (`load_task` calls the one of its spec's ``source``), as `papa.fingerprint` names
#: definitions: rule prepare_data's code fingerprint leaves out the other sources' (`fingerprint.code_fingerprint`
#: ``skip``), so an edit to the local-file reader reruns no package or hub dataset.
LOADERS = {
    "package": "papa.data.packages:load_package",
    "hub": "papa.data.hub:load_hub",
    "local": "papa.data.local:load_local",
}


def unreached_code(spec: dict) -> list[str]:
    """The ``module:name`` definitions the preparation of the dataset ``spec`` (its ``source`` and ``name``)
    cannot run, for its code fingerprint's ``skip`` (`papa.fingerprint`): the other sources' loaders, and the
    package corpora's parsers other than its own (which `DATASETS` names, and only the package loader runs), so an
    edit to one reader or parser reruns no other dataset. An unknown source: none (every loader counts)."""
    source, name = spec.get("source"), spec.get("name")
    if source not in LOADERS:
        return []
    skip = [loader for s, loader in LOADERS.items() if s != source]
    parsers = {d.name: f"{d.source.parse.__module__}:{d.source.parse.__qualname__}" for d in DATASETS.values()
               if d.source_name == "package"}  # fmt: skip
    own = {parsers[name]} if source == "package" and name in parsers else set()
    return skip + sorted(set(parsers.values()) - own)


def load_task(spec: dict, cache_dir: str | Path | None = None, seed: int = 0, *, metrics=None) -> TaskData:
    """Load a task described by ``spec`` (a config dict) as a :class:`TaskData`.

    Args:
        spec: ``{"name": ..., "source": "package" | "hub" | "local", ...}``.
            package: ``name`` in rt_sentiment, wsj_pos, hedge, wiki (wiki: ``chunk_words``,
            ``min_words``).
            hub: ``name`` in sst2, cola, mrpc, mnli, conll2003_ner, conll2003_pos, wikitext103, qqp, qnli,
            rte, mnli_matched; optional
            ``hub_id``, ``hub_config``, ``revision``, ``data_dir``, ``hub_timeout``, ``hf_cache_dir``.
            local: ``kind`` ("sequence"/"token"; defaults to the known task's kind),
            ``train`` (path, required), ``validation`` / ``test`` (paths, optional),
            ``format`` (csv, tsv, jsonl, parquet, conll; default from the file suffix).
            Sequence: ``text_column`` ("text"), ``text_b_column`` (None), ``label_column``
            ("label"; None for an unlabeled corpus), ``id_column`` (None). csv/tsv:
            ``header`` (false for header-less files) and ``column_names`` (with ``header`` given:
            false, every line is data; true, the header row is renamed). Token:
            ``tokens_column`` / ``tags_column`` ("tokens"/"tags") or, for conll,
            ``tag_column`` (default -1 = last), ``token_column`` (0), ``separator``.
            ``labels``: the label names in index order; a label value matches a name first
            (surrounding spaces ignored), else an in-range integer is taken as the index. A
            column with label names of its own (a ``ClassLabel`` feature: Parquet saved by
            ``datasets``) is read as those names. Without ``labels``: the known task's label
            set, else the train file's own names, else inferred (integers 0..max, or sorted strings).
            All sources: ``max_train``, ``max_validation`` (seeded subsample),
            ``validation_fraction`` (default 0.2, used when there is no validation split).
        cache_dir: where archives are downloaded and files extracted (default
            :func:`default_cache_dir`).
        seed: seeds the split and the subsamples; same spec + seed -> identical frames.
        metrics: the metrics its tasks score (the workflow passes those of the dataset's tasks): two label
            names inferred from the train file (sorted) are warned of, since their order decides the class binary
            ``f1`` scores, where one of them is binary (`papa.spec.BINARY_METRICS`); None (a notebook's call: the
            metrics are not known yet) warns whenever names were inferred so.

    Raises:
        TaskSpecError: unknown task/source, an unknown key or another source's, missing column
            or file, label not in ``labels``, empty split, bad option. The message says what to
            change.
        DataUnavailableError: the hub or package index cannot be reached.
        DataIntegrityError: a download does not match its pinned sha256.
    """
    if not isinstance(spec, dict):
        raise TaskSpecError(f'a task spec must be a dict with at least "name" and "source", got {type(spec).__name__}')
    name = spec.get("name")
    if not name or not isinstance(name, str):
        raise TaskSpecError(f'the task spec needs a "name" (got {name!r})')
    source = spec.get("source")
    if source not in SOURCES:
        raise TaskSpecError(f"unknown source {source!r} for task {name!r}; choose one of: {', '.join(SOURCES)}")
    known = DATASETS.get(name)
    if source in KNOWN_TASKS and (known is None or known.source_name != source):
        hint = f" ({name!r} is a {known.source_name} task)" if known else ""
        raise TaskSpecError(
            f"unknown {source} task {name!r}{hint}; known {source} tasks: {', '.join(KNOWN_TASKS[source])} "
            f'(or use source "local" with your own files)'
        )
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        import difflib

        near = {k: difflib.get_close_matches(k, SPEC_KEYS, 1) for k in unknown}
        hints = [f"{k!r}" + (f" (did you mean {near[k][0]!r}?)" if near[k] else "") for k in unknown]
        raise TaskSpecError(f"task {name!r}: unknown spec key {', '.join(hints)}; the keys of a {source} spec are "
                            f"{', '.join(sorted(COMMON_KEYS | SOURCE_KEYS[source]))}")  # fmt: skip
    # another source's keys (train: under source: package loads the package corpus, not the file) change the
    # meaning of the spec, as papa.checks refuses them in a config; those that only say how to reach the hub
    # (hub.ACCESS_KEYS) change no data and are recorded as ignored
    other = sorted(set(spec) - COMMON_KEYS - SOURCE_KEYS[source] - hub.ACCESS_KEYS)
    if other:
        owners = {k: " or ".join(s for s, keys in SOURCE_KEYS.items() if k in keys) for k in other}
        raise TaskSpecError(f"task {name!r} is source {source!r}, which does not read "
                            f"{', '.join(f'{k!r} (a key of source {owners[k]})' for k in other)}: remove them, or "
                            f"change the source")  # fmt: skip
    if not is_integer(seed) or not 0 <= seed < SEED_LIMIT:
        raise TaskSpecError(f"seed must be an integer in [0, 2**32) (numpy's seed range), got {seed!r}")
    seed = int(seed)
    fraction = spec.get("validation_fraction", VALIDATION_FRACTION)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise TaskSpecError(f"validation_fraction must be a number strictly between 0 and 1, got {fraction!r}")
    max_train = positive_int(spec, "max_train")
    max_validation = positive_int(spec, "max_validation")
    cache_dir = known_home(cache_dir, "cache_dir") if cache_dir is not None else default_cache_dir()
    if cache_dir.exists() and not cache_dir.is_dir():
        raise TaskSpecError(f"cache_dir {str(cache_dir)!r} is a file: give a folder (downloads and extracted corpora "
                            f"are kept there)")  # fmt: skip
    if source in ("package", "hub"):  # their archives and extracted corpora are kept there
        make_cache_dir(cache_dir)

    if source == "package":
        kind, label_names, splits, prov = load_package(known, spec, cache_dir)
    elif source == "hub":
        kind, label_names, splits, prov = load_hub(known, spec, cache_dir)
    else:
        kind, label_names, splits, prov = load_local(name, spec, cache_dir)

    for split, df in splits.items():
        if len(df) == 0:
            raise TaskSpecError(f"split {split!r} of task {name!r} is empty: the {source} source gave it no rows; "
                                f"check the dataset's files or settings")  # fmt: skip
    split_info: dict = {"seed": seed}
    if "validation" not in splits:
        stratify = kind == "sequence" and bool(label_names)
        train, val, method = _seeded_split(splits["train"], float(fraction), seed, stratify)
        splits = {"train": train, "validation": val, **{k: v for k, v in splits.items() if k != "train"}}
        split_info.update({"method": method, "validation_fraction": float(fraction)})
    else:
        split_info["method"] = "splits as given by the source"
    sizes_before = {k: len(v) for k, v in splits.items()}
    splits["train"] = _subsample(splits["train"], max_train, seed, 1)
    splits["validation"] = _subsample(splits["validation"], max_validation, seed, 2)
    if max_train or max_validation:
        split_info["subsample"] = {"max_train": max_train, "max_validation": max_validation,
                                   "sizes_before": sizes_before,
                                   "method": "seeded, without replacement, order kept"}  # fmt: skip
    ordered = {k: splits[k] for k in ("train", "validation") if k in splits}
    ordered.update({k: v for k, v in splits.items() if k not in ordered})
    splits = {k: normalize_frame(v, kind) for k, v in ordered.items()}
    _check_words(name, kind, splits)
    _check_labels(name, kind, label_names, splits)
    if metrics is None or any(m in BINARY_METRICS for m in metrics):
        _warn_positive_class(kind, list(label_names), prov.get("label_names_source"))

    ignored = sorted(set(spec) - COMMON_KEYS - SOURCE_KEYS[source])  # hub access keys on another source (above)
    provenance = {"task": name, "source": source, "kind": kind, "seed": seed, **prov,
                  "split": split_info, "split_sizes": {k: len(v) for k, v in splits.items()},
                  "spec": {k: spec[k] for k in sorted(spec) if k not in hub.ACCESS_KEYS}}  # fmt: skip
    if ignored:
        provenance["ignored_spec_keys"] = ignored
    if kind == "token":
        provenance["n_tokens"] = {k: int(v["tokens"].map(len).sum()) for k, v in splits.items()}
    return TaskData(name, kind, list(label_names), splits, _jsonable(provenance))


def _warn_positive_class(kind: str, labels: list, label_source: str | None) -> None:
    """Two label names inferred from a train file's values, in sorted order: binary f1 scores label 1, which the
    sort chose (equivalent/not_equivalent scored the wrong class); the list to write, quoted (YAML reads yes/no)."""
    if kind == "sequence" and label_source == INFERRED and len(labels) == 2 and labels != ["0", "1"]:
        log.warning("labels %s inferred from the train file in sorted order: binary f1 (positive class: label 1) "
                    "scores %r; to score %r, list the dataset's labels with the positive class last (labels: "
                    "[%s, %s]; a labels key written out reruns the dataset's jobs once)", labels, labels[1],
                    labels[0], *(json.dumps(x) for x in (labels[1], labels[0])))  # fmt: skip


def package_file(task: str, cache_dir: str | Path) -> tuple[Path, dict]:
    """Path of the (verified) raw data file of package task ``task``, and its provenance.

    Downloads the pinned archive once, extracts the one file atomically, checks both sha256s.
    """
    return raw_file(task, DATASETS[task].source.file, cache_dir)


def save_task(task: TaskData, out_dir: str | Path) -> Path:
    """Alias of `TaskData.save` (``task.save(out_dir)``), kept for notebooks."""
    return TaskData.save(task, out_dir)


def read_task(out_dir: str | Path, splits=None) -> TaskData:
    """Alias of `TaskData.read` (``TaskData.read(out_dir, splits)``), kept for notebooks."""
    return TaskData.read(out_dir, splits)
