"""Corpora shipped inside PyPI packages: the readers of their data files, and loading one.

Each package task reads one data file inside a pinned archive (`papa.data.downloads`); the
archives, files and label sets are in `papa.data.registry`. Every reader has the signature
``parse(path, spec, labels) -> (frame, provenance)``: ``labels`` are the task's label names
(index = integer label), ``spec`` the task spec (only `parse_wiki` reads options from it).

``rt_sentiment`` (`parse_rt`), ``wsj_pos`` (`parse_wsj`), ``hedge`` (`parse_hedge`) and ``wiki``
(`parse_wiki`) are described in ``data/README.md``.
"""

from __future__ import annotations

import bz2
import csv
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .downloads import PinnedFile, fetch_member
from .errors import DataIntegrityError, TaskSpecError, positive_int
from .wikitext import sentence_chunks, wiki_paragraphs

if TYPE_CHECKING:
    from .registry import Dataset

#: Spec keys the package readers take (besides those of every source, `papa.data.task.COMMON_KEYS`).
SPEC_KEYS = frozenset({"chunk_words", "min_words"})
#: The package datasets that read them (the others read none).
DATASET_KEYS = {"wiki": SPEC_KEYS}
#: Their defaults (`parse_wiki`).
CHUNK_DEFAULTS = {"chunk_words": 100, "min_words": 8}


def spec_problems(name: str, spec: dict) -> list[str]:
    """What is wrong with a package dataset's own keys, before anything loads: a key its reader does not read
    (``chunk_words`` on ``rt_sentiment``), ``min_words`` above ``chunk_words`` (every chunk would be dropped)."""
    problems = []
    given = {k for k, v in spec.items() if v is not None}  # null: the key's default, harmless
    for key in sorted(given & SPEC_KEYS - DATASET_KEYS.get(name, frozenset())):
        readers = ", ".join(d for d, keys in DATASET_KEYS.items() if key in keys)
        problems.append(f"{key} is read by package dataset {readers} only, and {name!r} does not read it: remove it")
    if name in DATASET_KEYS:
        words = {k: v if spec.get(k) is None else spec[k] for k, v in CHUNK_DEFAULTS.items()}
        if all(isinstance(v, int) for v in words.values()) and words["min_words"] > words["chunk_words"]:
            problems.append(f"min_words ({words['min_words']}) exceeds chunk_words ({words['chunk_words']}), so "
                            f"every chunk would be dropped: lower min_words (default "
                            f"{CHUNK_DEFAULTS['min_words']}), or raise chunk_words")  # fmt: skip
    return problems


def raw_file(task: str, f: PinnedFile, cache_dir: str | Path) -> tuple[Path, dict]:
    """Path of the verified data file ``f`` of package task ``task``, and its provenance.

    Downloads the pinned archive once, extracts the one file atomically into
    ``<cache_dir>/raw/<task>/``, checks both sha256s.
    """
    a = f.archive
    prov = {
        "package": a.requirement,
        "package_url": a.url,
        "archive": a.filename,
        "archive_sha256": a.sha256,
        "member": " -> ".join(f.members),
        "raw_file": f.filename,
        "raw_sha256": f.sha256,
        "licence": a.licence,
    }
    return fetch_member(f, Path(cache_dir) / "raw" / task / f.filename, cache_dir), prov


def load_package(ds: Dataset, spec: dict, cache_dir: Path) -> tuple[str, list[str], dict, dict]:
    """(kind, label names, {"train": frame}, provenance) of package dataset ``ds``."""
    problems = spec_problems(ds.name, spec)
    if problems:
        raise TaskSpecError(f"package dataset {ds.name!r}: {problems[0]}")
    path, prov = raw_file(ds.name, ds.source.file, cache_dir)
    df, extra = ds.source.parse(path, spec, list(ds.labels))
    prov.update(extra)
    return ds.kind, list(ds.labels), {"train": df}, prov


def parse_rt(path: Path, spec: dict, labels: list[str]) -> tuple[pd.DataFrame, dict]:
    """movieReviewSnippets_GroundTruth.txt: ``id TAB mean-rating TAB text`` (CRLF, UTF-8).

    Label ``positive`` where the mean rating is > 0, ``negative`` where it is < 0; the
    sentences rated exactly 0 are dropped (and counted).
    """
    negative, positive = labels.index("negative"), labels.index("positive")
    ids, texts, y = [], [], []
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
            try:
                rating = float(parts[1])
            except ValueError:
                rating = math.nan
            if not math.isfinite(rating):  # a bare ValueError named no file; nan was labelled negative
                raise DataIntegrityError(f"{path}:{lineno}: the rating {parts[1][:40]!r} is no finite number")
            if rating == 0.0:
                n_zero += 1
                continue
            ids.append(f"rt-{parts[0]}")
            texts.append(parts[2].strip())
            y.append(positive if rating > 0 else negative)
    df = pd.DataFrame({"id": ids, "text": texts, "text_b": None, "label": y})
    return df, {"n_raw": n_raw, "n_dropped": n_zero,
                "dropped_reason": "mean rating exactly 0 (neither positive nor negative)",
                "label_rule": "positive if mean rating > 0, negative if < 0"}  # fmt: skip


#: Tokens that close a sentence after its final punctuation (attached to that sentence).
_CLOSERS = {"''", ")", "-RRB-", "'"}


def parse_wsj(path: Path, spec: dict, labels: list[str]) -> tuple[pd.DataFrame, dict]:
    """tagged-en-wsj.txt: lines of ``word/TAG`` tokens, one or more sentences per line.

    Lines are split into sentences after each token tagged ``.`` (closing quotes or
    brackets that follow stay with the sentence they close). ``labels``: the tag set (the
    CoNLL-2003 POS tags), whose index is a tag's integer label.
    """
    tag_index = {t: i for i, t in enumerate(labels)}
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


def parse_hedge(path: Path, spec: dict, labels: list[str]) -> tuple[pd.DataFrame, dict]:
    """uncertainty-conll2010.csv: rows ``"1"|"-1","sentence"`` (1: certain, -1: uncertain; no space after the comma)."""
    label = {"1": labels.index("certain"), "-1": labels.index("uncertain")}
    ids, texts, y = [], [], []
    with open(path, encoding="utf-8-sig", newline="") as f:
        for rowno, row in enumerate(csv.reader(f), 1):
            if not row:
                continue
            if len(row) != 2 or row[0] not in ("1", "-1"):
                raise DataIntegrityError(f"{path}: row {rowno} is not (1|-1, sentence): {row[:2]!r}")
            ids.append(f"hedge-{rowno}")
            texts.append(row[1].strip())
            y.append(label[row[0]])
    df = pd.DataFrame({"id": ids, "text": texts, "text_b": None, "label": y})
    return df, {"n_raw": len(df), "n_dropped": 0, "label_rule": "1 -> certain (0), -1 -> uncertain (1)"}


def parse_wiki(path: Path, spec: dict, labels: list[str]) -> tuple[pd.DataFrame, dict]:
    """MediaWiki XML dump (bz2): main-namespace, non-redirect pages -> paragraph chunks (unlabeled).

    Spec options ``chunk_words`` (default 100): the most words a chunk holds;
    ``min_words`` (default 8): shorter chunks are dropped (and counted).
    """
    chunk_words = positive_int(spec, "chunk_words", CHUNK_DEFAULTS["chunk_words"])
    min_words = positive_int(spec, "min_words", CHUNK_DEFAULTS["min_words"])
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
                    for chunk in sentence_chunks(para, chunk_words):
                        if len(chunk.split()) < min_words:
                            n_short += 1
                            continue
                        ids.append(f"wiki-{page.get('id')}-{k}")
                        texts.append(chunk)
                        groups.append(page.get("id"))
                        k += 1
    if not texts and not n_short:  # no article text at all: "0 chunks shorter than min_words" blamed the setting
        raise DataIntegrityError(f"{path} holds no article text: of its {n_pages} pages, {n_redirects} are redirects "
                                 f"and {n_other_ns} in other namespaces than articles' (0); is it a MediaWiki dump "
                                 f"of a wiki's pages?")  # fmt: skip
    if not texts:  # the task's "split is empty" named no key
        raise TaskSpecError(f"every one of the wiki corpus's {n_short} chunks (of at most chunk_words={chunk_words} "
                            f"words) is shorter than min_words={min_words}: lower min_words (default "
                            f"{CHUNK_DEFAULTS['min_words']})")  # fmt: skip
    df = pd.DataFrame({"id": ids, "text": texts, "text_b": None, "label": -1})
    df["_group"] = groups
    return df, {
        "n_pages": n_pages, "n_articles": n_articles, "n_redirects_skipped": n_redirects,
        "n_other_namespace_skipped": n_other_ns, "n_raw": len(df) + n_short, "n_dropped": n_short,
        "dropped_reason": f"chunks shorter than min_words={min_words} (headings, captions, list stubs)",
        "chunking": f"wiki markup stripped; paragraphs packed into <= {chunk_words}-word chunks of whole sentences",
        "n_words": int(sum(len(t.split()) for t in texts)),
    }  # fmt: skip
