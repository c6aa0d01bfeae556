"""Task metrics (paper Sec. 4.1), computed with scikit-learn and seqeval.

* ``accuracy`` (SST-2, MNLI), ``f1`` (binary, positive class = label 1; MRPC),
  ``mcc`` (Matthews correlation; CoLA), ``macro_f1``;
* ``entity_f1``: entity-level F1 with seqeval's CoNLL semantics (NER, BIO tags);
* ``pos_f1``: token-level micro F1 over the first sub-word of every word (POS); with one
  label per scored token this equals token accuracy (``token_accuracy``, the same tokens);
* ``pos_seqeval_f1``: the paper's POS metric: seqeval's overall F1 over the POS tag
  sequences, as the authors' ``run_papa_ner.py`` scores POS. seqeval reads a tag's first
  character as a chunk prefix and the rest as the chunk's type (``NNP`` is type ``NP``; ``IN``
  and ``NN`` are both type ``N``; ``.`` and ``,`` type ``_``), and neighbouring tokens of one
  type form one chunk: so it is not a per-tag score (gold ``IN NN`` predicted ``NN NN`` scores
  1.0; gold ``NN NN`` predicted ``NN VB`` 0.0, where ``pos_f1`` gives 0.5). Use it to compare
  with the paper's POS column, ``pos_f1`` for a per-tag score.
"""

from __future__ import annotations

import warnings

import numpy as np

from .spec import ALL_METRICS, BINARY_METRICS, METRICS

#: Metrics of sequence tasks: `papa.spec.METRICS` ``["sequence"]`` (this name is kept for notebooks).
SEQUENCE_METRICS = METRICS["sequence"]
#: Metrics of token tasks: `papa.spec.METRICS` ``["token"]`` (this name is kept for notebooks).
TOKEN_METRICS = METRICS["token"]


#: Metrics that read the tag strings (seqeval).
TAG_METRICS = ("entity_f1", "pos_seqeval_f1")
#: The metrics that one gold class leaves undefined (sklearn's 0.0 for mcc whatever the probe predicts; binary f1
#: 0.0 or 1.0 by the class, macro F1 over one class): `papa.pipeline.check_scored_classes` refuses them then.
CLASS_METRICS = ("f1", "mcc", "macro_f1")


def chunk_tagged(label_names) -> bool:
    """Whether a tag set marks entity chunks as seqeval reads them (``B-PER``, ``I-PER``, ``O``; IOBES/BILOU
    prefixes too): at least one tag with a ``B-``/``I-``/``E-``/``S-``/``L-``/``U-`` prefix. POS tags (``NN``,
    ``VBD``) are not: seqeval then reads a tag's first character as its prefix and the rest as its type, and
    merges neighbouring tokens of one type into a chunk (``IN NN`` is one chunk of type ``N``), which is the
    paper's ``pos_seqeval_f1`` (see the module's docstring), not an entity score."""
    return any(len(t) > 2 and t[0] in "BIESLU" and t[1] == "-" for t in map(str, label_names))


def check_metrics(metrics, kind: str | None = None, n_labels: int | None = None, label_names=None) -> list[str]:
    """``metrics`` as a list, failing before any training on what `compute` would refuse (or
    compute wrongly) after it: a bare string, an unknown metric, a metric of the other task kind
    (`papa.spec.METRICS`), a binary metric (`papa.spec.BINARY_METRICS`) on more than two labels, a seqeval
    metric (`TAG_METRICS`) without ``label_names``, ``entity_f1`` on tags that mark no chunks (`chunk_tagged`).
    ``kind``/``n_labels`` None skip those checks."""
    if isinstance(metrics, str):
        raise TypeError(f"metrics must be a list of metric names, got the string {metrics!r}; write [{metrics!r}]")
    if metrics is None or not hasattr(metrics, "__iter__"):
        raise TypeError(f"metrics must be a list of metric names (from {', '.join(ALL_METRICS)}), got {metrics!r}")
    metrics = list(metrics)
    if not metrics:
        raise ValueError(f"metrics is empty; choose from {', '.join(ALL_METRICS)}")
    if isinstance(label_names, str):
        raise TypeError(f"label_names must be a list of the label strings, got the string {label_names!r}")
    if len(set(metrics)) != len(metrics):
        raise ValueError(f"metrics lists a metric more than once ({metrics}): each row would be there twice")
    if label_names is not None and n_labels is not None and len(label_names) != n_labels:
        raise ValueError(f"label_names has {len(label_names)} names and the task {n_labels} labels: give one name "
                         f"per label id")  # fmt: skip
    for m in metrics:
        if m not in ALL_METRICS:
            raise ValueError(f"Unknown metric {m!r}; choose from {', '.join(ALL_METRICS)}")
        if kind in METRICS and m not in METRICS[kind]:
            raise ValueError(f"metric {m!r} does not score a {kind} task; choose from {', '.join(METRICS[kind])}")
        if m in BINARY_METRICS and n_labels is not None and n_labels > 2:
            raise ValueError(
                f"metric {m!r} is binary F1 (positive class = label 1) and the task has {n_labels} labels; "
                f"use {BINARY_METRICS[m]}"
            )
        if m in TAG_METRICS and label_names is None:
            raise ValueError(f"metric {m!r} needs label_names (the tag strings)")
        if m == "entity_f1" and label_names is not None and not chunk_tagged(label_names):
            raise ValueError(entity_f1_problem(label_names))
    return metrics


def entity_f1_problem(label_names) -> str:
    """Why ``entity_f1`` does not fit a tag set without chunk prefixes (`chunk_tagged`)."""
    shown = ", ".join(map(str, list(label_names)[:5])) + (", ..." if len(label_names) > 5 else "")
    return (f"metric 'entity_f1' scores entity chunks of BIO tags (B-PER, I-PER, O), and the tags here ({shown}) have "
            f"no chunk prefix (B-, I-, E-, S-, L-, U-): seqeval would read each tag's first character as a prefix "
            f"and merge neighbouring tags of one type (the paper's POS metric, pos_seqeval_f1); use pos_seqeval_f1, "
            f"pos_f1 or token_accuracy")  # fmt: skip


def _flat_tokens(y_true, y_pred):
    """Keep positions whose gold label is not -100 (sub-words, padding)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    keep = y_true != -100
    return y_true[keep], y_pred[keep]


def _tag_rows(metric: str, y_true, y_pred, n_tags: int) -> tuple[np.ndarray, np.ndarray]:
    """The gold and predicted tags of a sequence metric (``entity_f1``, ``pos_seqeval_f1``) as [n, N] integer
    arrays of one shape, a sentence a row: 1-D arrays would score each token as a sentence of its own (an entity
    split across tokens counted as found), and an id past the tag names has no tag string."""
    try:
        t, p = np.asarray(y_true), np.asarray(y_pred)
    except ValueError:  # ragged lists of sentences
        t = p = np.empty(0, dtype=object)
    if t.ndim != 2 or t.shape != p.shape or not all(np.issubdtype(a.dtype, np.integer) for a in (t, p)):
        raise ValueError(f"{metric} scores sentences: give y_true and y_pred as integer arrays of one shape [n, N], "
                         f"a sentence a row (-100 = a position to ignore), got shapes {_shape(y_true)} and "
                         f"{_shape(y_pred)}")  # fmt: skip
    keep = t != -100
    for name, a in (("y_true", t), ("y_pred", p)):
        bad = a[keep & ((a < 0) | (a >= n_tags))]
        if bad.size:
            raise ValueError(f"{metric}: {name} holds tag id {int(bad[0])}, and label_names names {n_tags} tags "
                             f"(ids 0..{n_tags - 1}; -100 = ignore)")  # fmt: skip
    return t, p


def _shape(a) -> str:
    try:
        return str(tuple(np.shape(a)))
    except ValueError:
        return "ragged"


def _label_arrays(metric: str, y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    """Gold and predicted labels as arrays of one shape of class indices, or a `ValueError`/`TypeError` naming
    the metric and what to change (sklearn's and numpy's own messages named neither)."""
    try:
        t, p = np.asarray(y_true), np.asarray(y_pred)
    except ValueError:
        raise ValueError(f"{metric}: y_true and y_pred must be arrays of one shape (token metrics: [sentences, N], "
                         f"-100 where a token is not scored); got rows of different lengths") from None  # fmt: skip
    if t.shape != p.shape:
        raise ValueError(f"{metric}: y_true has shape {t.shape} and y_pred {p.shape}: give one prediction per label")
    if t.size == 0:  # sklearn's "Found empty input array" named no metric
        raise ValueError(f"{metric}: no labels to score (y_true and y_pred are empty): is the validation split empty?")
    for name, a in (("y_true", t), ("y_pred", p)):
        whole = a.dtype.kind in "iub" or (
            a.dtype.kind == "f" and bool(np.isfinite(a).all()) and bool((a % 1 == 0).all())
        )
        if a.size and not whole:
            raise TypeError(f"{metric}: {name} holds {a.dtype} values ({a.ravel()[0].item()!r}, ...), and labels "
                            f"here are class indices (0, 1, ...): map label names to their index first")  # fmt: skip
    tokens = metric in ("pos_f1", "token_accuracy")
    for name, a in (("y_true", t), ("y_pred", p)):  # a negative id was scored as a class of its own
        scored = a[t != -100] if tokens else a
        if scored.size and scored.min() < 0:
            marks = " (-100 marks a gold position not scored)" if tokens else ""
            raise ValueError(f"{metric}: {name} holds {int(scored.min())}, and labels are class indices from 0"
                             f"{marks}: map unlabeled examples to a class or drop them")  # fmt: skip
    if metric in BINARY_METRICS:
        seen = sorted({int(v) for v in np.unique(np.concatenate([t.ravel(), p.ravel()]))} - {0, 1})
        if seen:
            raise ValueError(f"{metric} is binary F1 (positive class = label 1), and the labels hold {seen[:5]} beyond "
                             f"0 and 1: use {BINARY_METRICS[metric]!r} for more than two labels")  # fmt: skip
    return t, p


def compute(metric: str, y_true, y_pred, label_names: list[str] | None = None) -> float:
    """One metric on integer labels. Token metrics take [n, N] arrays with -100 = ignore."""
    from sklearn import metrics as skm

    if metric not in TAG_METRICS:  # those read tag rows (_tag_rows checks them)
        y_true, y_pred = _label_arrays(metric, y_true, y_pred)
    if metric == "accuracy":
        return float(skm.accuracy_score(y_true, y_pred))
    if metric == "f1":
        return float(skm.f1_score(y_true, y_pred, average="binary", pos_label=1, zero_division=0))
    if metric == "macro_f1":
        return float(skm.f1_score(y_true, y_pred, average="macro", zero_division=0))
    if metric == "mcc":
        return float(skm.matthews_corrcoef(y_true, y_pred))
    if metric in ("pos_f1", "token_accuracy"):
        t, p = _flat_tokens(y_true, y_pred)
        if t.size == 0:  # sklearn's "Found empty input array" named no metric
            raise ValueError(f"{metric}: no position to score: every gold label is -100 (sub-words, padding); give "
                             f"the first sub-word of each word its tag")  # fmt: skip
        return float(skm.f1_score(t, p, average="micro", zero_division=0))
    if metric in TAG_METRICS:
        from seqeval.metrics import f1_score

        if label_names is None:
            raise ValueError(f"{metric} needs label_names (the tag strings)")
        if metric == "entity_f1" and not chunk_tagged(label_names):
            raise ValueError(entity_f1_problem(label_names))
        y_true, y_pred = _tag_rows(metric, y_true, y_pred, len(label_names))
        if not (y_true != -100).any():  # seqeval scored no tag as 0.0
            raise ValueError(f"{metric}: no position to score: every gold label is -100 (sub-words, padding); give "
                             f"the first sub-word of each word its tag")  # fmt: skip
        true_seqs, pred_seqs = [], []
        for t_row, p_row in zip(y_true, y_pred):
            keep = t_row != -100
            true_seqs.append([label_names[i] for i in t_row[keep]])
            pred_seqs.append([label_names[i] for i in p_row[keep]])
        with warnings.catch_warnings():  # POS tags are not BIO tags: seqeval warns once per tag, by design here
            warnings.filterwarnings("ignore", message=".*seems not to be NE tag", category=UserWarning)
            return float(f1_score(true_seqs, pred_seqs, zero_division=0))
    raise ValueError(f"Unknown metric {metric!r}; choose from {ALL_METRICS}")


def compute_all(metrics, y_true, y_pred, label_names=None) -> dict[str, float]:
    """Every metric of ``metrics`` (a list of names, `check_metrics`) on the same labels."""
    return {m: compute(m, y_true, y_pred, label_names) for m in check_metrics(metrics, label_names=label_names)}
