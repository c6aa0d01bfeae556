"""The vocabulary of a PAPA run, defined once.

Every name the config, the paths, the tables and the library share lives here: the
constant-matrix kinds (and which of them need data, which can be trained), the
``kind[_trained][@corpus]`` constants spec, the head orders, the task kinds and the metrics
each allows, and ``fraction_dynamic`` (the share of heads left input-dependent) with its
formatting and its two special values. The workflow's rules and scripts, the library and the
config checks import these names; ``tests/test_spec.py`` holds the config schema's enums
equal to them.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from dataclasses import dataclass, replace

import numpy as np

# ----------------------------------------------------------------------------- constant matrices

#: Kinds averaged over a corpus (paper Sec. 3.1; ``effective``: Table 1's effective attention).
DATA_KINDS = ("average", "effective")
#: Kinds that need no data: the same matrix for every head (Table 1).
DATA_FREE = ("identity", "toeplitz", "zeros", "uniform")
#: Every kind of constant matrix.
CONSTANT_KINDS = DATA_KINDS + DATA_FREE
#: Kinds whose matrices can train with the probe (``<kind>_trained``, paper Table 1).
TRAINABLE = ("average", "toeplitz")
TRAINED_SUFFIX = "_trained"
#: What separates a constants spec's kind from the corpus its matrices are averaged on (``average@wiki``).
CORPUS_SEP = "@"
#: Every kind a constants spec may name (``average``, ..., ``average_trained``, ``toeplitz_trained``).
SPEC_KINDS = CONSTANT_KINDS + tuple(k + TRAINED_SUFFIX for k in TRAINABLE)

#: The splits the workflow prepares and tokenizes (rule prepare_data's outputs, the token files' ``split``):
#: a dataset's other splits (a test split, MNLI's validation_matched) stay out of its folder.
PREPARED_SPLITS = ("train", "validation")
#: A name of a dataset, model or task (config keys; path components).
NAME_PATTERN = r"[A-Za-z0-9_.-]+"
#: ``kind[_trained][@corpus]`` (the config schema's pattern for sweep.constants is this one).
CONSTANTS_PATTERN = rf"({'|'.join(SPEC_KINDS)})({CORPUS_SEP}{NAME_PATTERN})?"
#: The specs whose matrices train with the probe (``<kind>_trained[@corpus]``): the encoder runs with
#: gradients for every batch, and the seeds share nothing, so the workflow runs one job per seed (rule
#: ``probe_trained``).
TRAINED_CONSTANTS_PATTERN = rf"({'|'.join(k + TRAINED_SUFFIX for k in TRAINABLE)})({CORPUS_SEP}{NAME_PATTERN})?"
#: The specs whose matrices stay fixed: one job for all seeds, which share the encoder's hidden states (rule ``probe``).
FIXED_CONSTANTS_PATTERN = rf"({'|'.join(CONSTANT_KINDS)})({CORPUS_SEP}{NAME_PATTERN})?"


@dataclass(frozen=True)
class ConstantsSpec:
    """Which constant matrices a probe uses: ``kind[_trained][@corpus]``.

    Attributes:
        kind: one of `CONSTANT_KINDS` (the matrices' file is ``<kind>.safetensors``).
        trained: the matrices train with the probe (``_trained``; only `TRAINABLE` kinds).
        corpus: the dataset the matrices are averaged on; None = the task's own dataset (a
            data-free kind's matrices are the same on every corpus: the workflow's config check refuses one).
    """

    kind: str
    trained: bool = False
    corpus: str | None = None

    def __post_init__(self):
        if self.kind not in CONSTANT_KINDS:
            raise ValueError(f"Unknown constant kind {self.kind!r}; choose from {', '.join(CONSTANT_KINDS)}")
        if self.trained and self.kind not in TRAINABLE:
            raise ValueError(f"{self.kind!r} matrices cannot be trained; trainable kinds: {', '.join(TRAINABLE)}")
        if self.corpus is not None and not re.fullmatch(NAME_PATTERN, self.corpus):
            raise ValueError(f"Corpus name {self.corpus!r} is not a dataset name ({NAME_PATTERN})")

    @classmethod
    def parse(cls, text: str | ConstantsSpec) -> ConstantsSpec:
        """``"average"``, ``"average_trained@wiki"``, ... -> a `ConstantsSpec` (a clear error otherwise)."""
        if isinstance(text, ConstantsSpec):
            return text
        kind, _, corpus = text.partition(CORPUS_SEP) if isinstance(text, str) else (None, None, None)
        base = kind.removesuffix(TRAINED_SUFFIX) if kind is not None else None
        if base in CONSTANT_KINDS and base not in TRAINABLE and kind.endswith(TRAINED_SUFFIX):
            raise ValueError(f"Constants spec {text!r}: {base!r} matrices cannot be trained; trainable kinds: "
                             f"{', '.join(TRAINABLE)} (average_trained, toeplitz_trained)")  # fmt: skip
        if not isinstance(text, str) or not re.fullmatch(CONSTANTS_PATTERN, text):
            raise ValueError(
                f"Constants spec {text!r} is not kind[_trained][@corpus] with kind one of "
                f"{', '.join(SPEC_KINDS)}, e.g. 'average', 'average_trained', 'average@wiki'"
            )
        trained = kind.endswith(TRAINED_SUFFIX)
        return cls(kind.removesuffix(TRAINED_SUFFIX) if trained else kind, trained, corpus or None)

    def __str__(self) -> str:
        return self.kind + (TRAINED_SUFFIX if self.trained else "") + (CORPUS_SEP + self.corpus if self.corpus else "")

    @property
    def data_free(self) -> bool:
        """True when the matrices need no data (`DATA_FREE`): they do not depend on a corpus."""
        return self.kind in DATA_FREE

    def corpus_or(self, task_dataset: str) -> str:
        """The dataset the matrices are computed on: the spec's corpus, else the task's own."""
        return self.corpus or task_dataset

    def on_task(self, task_dataset: str) -> ConstantsSpec:
        """This spec as a task on ``task_dataset`` runs it: ``@<that dataset>`` names the task's own matrices,
        the same as no corpus, so it is dropped (``average@mnli`` on MNLI is ``average``: one run, not two)."""
        return replace(self, corpus=None) if self.corpus == task_dataset else self


def is_data_free(kind: str) -> bool:
    """True for a kind (or spec) whose matrices need no data."""
    return ConstantsSpec.parse(kind).data_free


# ----------------------------------------------------------------------------- head orders

#: Orders in which heads are replaced (paper Sec. 3.2, Fig. 5); ``lambda`` is the method.
HEAD_ORDERS = ("lambda", "reversed", "first_to_last", "last_to_first", "random")
#: Orders that rank heads by learned lambdas.
LAMBDA_ORDERS = ("lambda", "reversed")

# ----------------------------------------------------------------------------- the paper's method

#: The constants of the paper's method (PAPA): attention averaged on the task's own data. The
#: default of ``sweep.constants``; the Sec. 5 analyses vary the constants around it.
METHOD_CONSTANTS = "average"
#: The head order of the paper's method: lowest learned lambda replaced first. The default of
#: ``sweep.selections``; the Sec. 5 analyses vary the order around it.
METHOD_ORDER = "lambda"


def constant_kinds_rows(constant_kinds, cross_corpus) -> list[str]:
    """The constants specs of constant_kinds.parquet, in row order (paper Tables 1-2): `METHOD_CONSTANTS`, the other
    ``analyses.constant_kinds``, then ``average@<corpus>`` for each ``analyses.cross_corpus`` dataset (rule
    aggregate's ``kinds``)."""
    specs = [ConstantsSpec.parse(METHOD_CONSTANTS)]
    specs += [s for s in map(ConstantsSpec.parse, constant_kinds) if s != specs[0]]
    specs += [ConstantsSpec(METHOD_CONSTANTS, corpus=c) for c in cross_corpus]
    return [str(s) for s in specs]


# ----------------------------------------------------------------------------- tasks and metrics

TASK_KINDS = ("sequence", "token")
#: Metrics per task kind (`papa.metrics.compute` implements each).
METRICS = {
    "sequence": ("accuracy", "f1", "mcc", "macro_f1"),
    "token": ("entity_f1", "pos_seqeval_f1", "pos_f1", "token_accuracy"),
}
ALL_METRICS = METRICS["sequence"] + METRICS["token"]
#: Metrics defined for two classes only (``f1``: F1 of the positive class, label 1), each with the
#: metric to use on more classes.
BINARY_METRICS = {"f1": "macro_f1"}
#: How the figures name each metric of `ALL_METRICS` (an axis, a panel's title), as the paper's figures do: the
#: tables keep the ids. ``pos_seqeval_f1`` is seqeval's F1 over the spans it reads in POS tags (`papa.metrics`).
METRIC_LABELS = {
    "accuracy": "accuracy",
    "f1": "F1 (label 1)",
    "mcc": "MCC",
    "macro_f1": "macro F1",
    "entity_f1": "entity F1 (seqeval)",
    "pos_seqeval_f1": "span F1 (seqeval)",
    "pos_f1": "token F1 (micro)",
    "token_accuracy": "token accuracy",
}


def metric_label(metric: str) -> str:
    """A metric's name in the figures (`METRIC_LABELS`); a name papa does not define (a notebook's own frame) is
    shown as it is."""
    return METRIC_LABELS.get(metric, str(metric))


# ----------------------------------------------------------------------------- fraction_dynamic

#: ``fraction_dynamic`` of the original model (every head input-dependent): the baseline of the tables.
ORIGINAL = 1.0
#: ``fraction_dynamic`` with every head constant: where the constant kinds and corpora are compared.
ALL_CONSTANT = 0.0


def check_fraction(fraction_dynamic) -> float:
    """``fraction_dynamic`` as a float, failing unless it lies in [0, 1] (a bool is no fraction, NaN lies nowhere);
    ``-0.0`` is 0 (a config's ``-0`` named its runs ``fraction_dynamic=-0``, beside those of ``0``)."""
    import numbers

    # a number (a 0-d array or tensor too), or the text of one (a path's fraction_dynamic=0.5, a Snakemake
    # wildcard); None, a bool, a list: no
    scalar = isinstance(fraction_dynamic, (numbers.Number, str)) or np.ndim(fraction_dynamic) == 0
    if fraction_dynamic is None or isinstance(fraction_dynamic, (bool, np.bool_)) or not scalar:
        raise TypeError(f"fraction_dynamic must be a number in [0, 1], got {fraction_dynamic!r}")
    try:
        f = float(fraction_dynamic)
    except (TypeError, ValueError):
        raise ValueError(f"fraction_dynamic must be a number in [0, 1], got {fraction_dynamic!r}") from None
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"fraction_dynamic must be in [0, 1], got {fraction_dynamic}")
    return f + 0.0  # -0.0 + 0.0 is 0.0


def format_fraction(fraction_dynamic) -> str:
    """``fraction_dynamic`` as it appears in paths: 1, 0.5, 0.125, 0.0625, 0."""
    return f"{check_fraction(fraction_dynamic):g}"


def n_dynamic(fraction_dynamic, total: int) -> int:
    """How many of ``total`` heads stay input-dependent: round(f x total), halves rounded up
    (BERT-base: 1/16 -> 9 of 144)."""
    if isinstance(total, bool) or not isinstance(total, (int, np.integer)) or total < 1:
        raise ValueError(f"total must be the number of heads (a positive integer), got {total!r}")
    x = check_fraction(fraction_dynamic) * total
    # a half in exact arithmetic may be a hair below it as a float product (0.7 x 45 = 31.499999999999996, a float32
    # fraction's more): lift what lies within float noise of a half onto it, so halves round up as documented
    return int(math.floor(x + 0.5 + 1e-6 * max(1.0, x)))


def is_partial(fraction_dynamic) -> bool:
    """True when some heads are static and some input-dependent (0 < f < 1): only then does the
    head order matter. At 1 the model is the original; at 0 every head is constant."""
    return ALL_CONSTANT < check_fraction(fraction_dynamic) < ORIGINAL


def is_original(fraction_dynamic):
    """True where ``fraction_dynamic`` (a number or an array of them) is `ORIGINAL`, up to float noise."""
    return np.isclose(np.asarray(fraction_dynamic, dtype="float64"), ORIGINAL)


def is_all_constant(fraction_dynamic):
    """True where ``fraction_dynamic`` (a number or an array of them) is `ALL_CONSTANT`, up to float noise."""
    return np.isclose(np.asarray(fraction_dynamic, dtype="float64"), ALL_CONSTANT)


def needs_lambdas(order: str, fraction_dynamic) -> bool:
    """True when a probe run needs learned lambdas: a lambda-ranked order at a partial fraction."""
    if order not in HEAD_ORDERS:
        raise ValueError(f"Unknown head order {order!r}; choose from {', '.join(HEAD_ORDERS)}")
    return order in LAMBDA_ORDERS and is_partial(fraction_dynamic)


#: What only one branch of `papa.pipeline.average_constants` runs (``module:name``, as `papa.fingerprint` names
#: definitions): the code fingerprint of rule average_attention leaves out the data-free kinds' builder, that of
#: rule data_free_constants (the same script) the encoder, the averaging and the corpus's streaming and draw, so
#: an edit to code only one branch reaches reruns no job of the other (`papa.fingerprint.code_fingerprint`
#: ``skip``; `average_constants` itself belongs to both).
DATA_FREE_ONLY = ("papa.constants:data_free",)
AVERAGING_ONLY = (
    "papa.constants:average_attention",
    "papa.pipeline:draw_rows",
    "papa.models:load_encoder",
    "papa.encoding:stream_tokens",
    "papa.encoding:separator_positions",
    "papa.pipeline:real_tokens_only",
)

#: ``fraction_dynamic`` as `format_fraction` writes it in paths (1, 0.5, 0.0625, 0, 1e-05).
FRACTION_PATTERN = r"[0-9.e-]+"


def seed_file(seed) -> str:
    """The name of one probe seed's file in its run's folder (``seed3.parquet``; ``"{seed}"`` gives the
    workflow's wildcard pattern)."""
    return f"seed{seed}.parquet"


def seed_of_file(path) -> int:
    """The seed a probe file holds, read off its name (`seed_file`): a probe job's seeds are its outputs."""
    import re
    from pathlib import Path

    m = re.fullmatch(r"seed(\d+)\.parquet", Path(path).name)
    if m is None:
        raise ValueError(f"{path}: not a probe seed's file (seed<N>.parquet)")
    return int(m.group(1))


def renamed_arguments(**old_to_new):
    """Decorator: a call that passes an argument by its old keyword (``old=new`` pairs, such as
    ``fraction="fraction_dynamic"``) still works, with a DeprecationWarning naming the new
    keyword; passing both names fails. Keeps notebooks written against the names
    ``fraction_dynamic`` had before it was one name end to end (the config key
    ``sweep.fractions``: `papa.checks.RENAMED_KEYS`)."""

    def wrap(fn):
        import inspect

        positional = list(inspect.signature(fn).parameters)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs or new in positional[: len(args)]:  # given by name, or by position
                        raise TypeError(f"{fn.__name__}() got both {old!r} and its new name {new!r}; pass {new!r}")
                    warnings.warn(f"{fn.__name__}({old}=...) is deprecated; use {new}=", DeprecationWarning, 2)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return call

    return wrap
