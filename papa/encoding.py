"""Input layout (paper App. A).

``layout="papa"``: every input is padded to exactly ``max_length`` N and the final
separator sits at N-1, after the padding, so one N x N constant matrix fits every
example. Pairs: the middle separator block starts at N/2 with sentence B right after it,
each side truncated to its half; ``token_type_ids`` mark sentence B (and its closing
separator) as segment 1 wherever the tokenizer's own template does (the middle separator, closing
sentence A, keeps segment 0). A single text fills up to
N - 2 tokens (App. A). ``layout="standard"`` is ordinary right padding, each pair packed as the
tokenizer's own call packs it (its longest-first truncation; a Python-backend tokenizer cutting on
the left lays a pair with an empty second text out as a single text once it truncates). In either layout a text
too long for its room loses word pieces on the side the tokenizer's ``truncation_side`` says (its end
by default, its start for ``"left"``); padding is on the right whatever the tokenizer's ``padding_side``.

Two options of `encode` reproduce the authors' code (``run_papa_glue.py``,
``add_preprocess_func``) instead, in the papa layout; the defaults follow the paper:

* ``single_cap="authors"``: a single text keeps at most N/2 - 1 word pieces (N/2 minus the
  leading special tokens), the rest of the row up to the final separator is padding. The
  authors' code copied at most N/2 leading tokens of every input, pairs or not. Token-level
  tasks are not capped (their code, ``run_papa_ner.py``, only moved the separator).
* ``pair_segments="authors"``: ``token_type_ids`` stay where the tokenizer put them for the
  ordinary (un-moved) pair, truncated longest-first to N: sentence B moved to N/2 but its
  segment ids did not, so B is segment 0 from the un-moved pair's length on (all of it where the
  pair is shorter than N/2) and the padding of A's half segment 1 up to that length.

Token-level tasks pass lists of words and per-word integer labels: the label goes to the
first sub-word of each word, -100 everywhere else.

Token files (the workflow's ``tokens/.../{split}.parquet``) are Parquet, one row per example
(`Encoded.to_arrow`), with the encoding's options and the caller's metadata as JSON under the
footer key ``papa``: `Encoded.save` writes one atomically, `Encoded.load` reads it whole,
`token_meta` reads the footer alone and `stream_tokens` yields it batch by batch.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .io import (
    PROVENANCE_KEY,
    footer_json,
    is_integer,
    json_value,
    parquet_file,
    read_batches,
    read_table,
    write_table,
)

IGNORE = -100
#: Where an encoded row puts its separators (`encode`): ``papa`` (the final at N-1, a pair's middle at N/2) or
#: ``standard`` (the tokenizer's own; config ``layout``).
LAYOUTS = ("papa", "standard")
#: How `encode` caps a single text and gives a pair's segment ids (config ``encoding.single_cap`` and
#: ``encoding.pair_segments``): as the paper says, or as the authors' code did.
ENCODING_CHOICES = ("paper", "authors")


def check_batch_size(batch_size, what: str = "batch_size") -> int:
    """``batch_size`` as a positive integer, or a `ValueError` naming it (0 would be range()'s error, -1 an empty
    iteration read as an empty corpus)."""
    if not is_integer(batch_size) or batch_size < 1:
        raise ValueError(f"{what} must be a positive integer (examples per batch), got {batch_size!r}")
    return int(batch_size)


class Batches(Iterator):
    """`Encoded.batches`: an iterator of model-input dicts that says what they are (``layout``, ``max_length``)."""

    def __init__(self, dicts: Iterator[dict], layout: str, max_length: int):
        self._dicts, self.layout, self.max_length = dicts, layout, max_length

    def __next__(self) -> dict:
        return next(self._dicts)


#: What `encode` records of how it made the tokens (``Encoded.meta``), which a caller's ``meta`` may not change
#: as `Encoded.save` writes it (with ``layout``, ``max_length`` and ``n_truncated``).
ENCODING_META = ("n", "pair", "token_level", "single_cap", "pair_segments")


@dataclass
class Encoded:
    """Tokenized inputs of one split, all of length ``max_length``."""

    input_ids: np.ndarray  # int64 [n, N]
    attention_mask: np.ndarray  # int64 [n, N], 1 = real token
    token_type_ids: np.ndarray | None  # int64 [n, N] or None when the model has no segments
    labels: np.ndarray | None  # int64 [n] (sequence) or [n, N] (token, -100 = ignored)
    layout: str
    max_length: int
    n_truncated: int = 0
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        """Refuse arrays that disagree with one another or with ``max_length`` (an `Encoded` built by hand): a model
        failed on them deep inside (torch's "size of tensor a must match"), or took ``max_length`` as their N when
        checking its positions."""
        shape = np.shape(self.input_ids)
        if len(shape) != 2 or shape[1] != self.max_length:
            raise ValueError(f"Encoded: input_ids has shape {shape}, and an Encoded holds [examples, max_length] "
                             f"= [n, {self.max_length}]: pad or truncate every row to max_length")  # fmt: skip
        for name in ("attention_mask", "token_type_ids"):
            value = getattr(self, name)
            if value is not None and np.shape(value) != shape:
                raise ValueError(f"Encoded: {name} has shape {np.shape(value)}, input_ids {shape}: one row of each "
                                 f"per example, one column per token")  # fmt: skip
        if self.labels is not None and np.shape(self.labels) not in (shape[:1], shape):
            raise ValueError(f"Encoded: labels have shape {np.shape(self.labels)}, input_ids {shape}: labels are "
                             f"one per example [{shape[0]}] or one per token [{shape[0]}, {shape[1]}]")  # fmt: skip

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def token_level(self) -> bool:
        return self.labels is not None and self.labels.ndim == 2

    def model_inputs(self, idx=slice(None), device=None) -> dict[str, torch.Tensor]:
        """Tensors for ``model(**inputs)`` for the rows ``idx``, copies of this `Encoded`'s arrays (changing one
        in place leaves the encoding as it is)."""

        def tensor(a):
            rows = a[idx]
            on_cpu = device is None or torch.device(device).type == "cpu"  # another device's tensor is a copy
            if on_cpu and np.may_share_memory(rows, a):  # a slice is a view, and torch.as_tensor would share it
                rows = rows.copy()
            return torch.as_tensor(rows, device=device)

        out = {"input_ids": tensor(self.input_ids), "attention_mask": tensor(self.attention_mask)}
        if self.token_type_ids is not None:
            out["token_type_ids"] = tensor(self.token_type_ids)
        return out

    def batches(self, batch_size: int, device=None, order: Sequence[int] | None = None) -> Batches:
        """Model-input dicts of ``batch_size`` rows (in ``order`` if given), one at a time: an iterator that also
        says the inputs' ``layout`` and ``max_length`` (`papa.average_attention` records the layout with the
        constants)."""
        check_batch_size(batch_size)
        order = np.arange(len(self)) if order is None else np.asarray(order)
        rows = (order[start : start + batch_size] for start in range(0, len(order), batch_size))
        return Batches((self.model_inputs(idx, device=device) for idx in rows), self.layout, self.max_length)

    def subset(self, idx) -> Encoded:
        idx = np.asarray(idx)
        if idx.size == 0:  # np.asarray([]) is float64, which no array takes as indices
            idx = idx.astype(np.int64)
        return Encoded(
            self.input_ids[idx],
            self.attention_mask[idx],
            None if self.token_type_ids is None else self.token_type_ids[idx],
            None if self.labels is None else self.labels[idx],
            self.layout,
            self.max_length,
            meta=dict(self.meta),
        )

    # -- Parquet round trip (one row per example, list columns)
    def to_arrow(self):
        """A pyarrow Table, one row per example (list columns), built without Python objects."""
        import pyarrow as pa

        n, N = self.input_ids.shape

        def lists(a, dtype):
            offsets = pa.array(np.arange(0, n * N + 1, N, dtype=np.int32))
            return pa.ListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(a, dtype=dtype).reshape(-1)))

        cols = {"input_ids": lists(self.input_ids, np.int64), "attention_mask": lists(self.attention_mask, np.int8)}
        if self.token_type_ids is not None:
            cols["token_type_ids"] = lists(self.token_type_ids, np.int8)
        if self.labels is not None:
            cols["labels"] = lists(self.labels, np.int64) if self.token_level else pa.array(self.labels, pa.int64())
        return pa.table(cols)

    @classmethod
    def from_arrow(cls, table, layout: str, max_length: int, meta: dict | None = None) -> Encoded:
        """Inverse of `to_arrow` (also reads any pyarrow Table/RecordBatch with these columns).

        List columns become ``[n, max_length]`` int64 arrays in one vectorised copy each; a
        row of another length fails with a message naming ``max_length``.
        """
        columns = dict(zip(table.schema.names, table.columns))

        def matrix(name):
            return _list_matrix(columns[name], max_length, name)

        labels = None
        if "labels" in columns:
            col = columns["labels"]
            labels = (
                matrix("labels") if _is_list(col.type) else np.asarray(col.to_numpy(zero_copy_only=False), np.int64)
            )
        return cls(
            matrix("input_ids"),
            matrix("attention_mask"),
            matrix("token_type_ids") if "token_type_ids" in columns else None,
            labels,
            layout,
            max_length,
            n_truncated=int((meta or {}).get("n_truncated", 0)),
            meta=dict(meta or {}),
        )

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> Encoded:
        """The examples of ``parts`` (same layout and length) in order, as one `Encoded`; ``n_truncated`` is the
        parts' sum (of encodings: a batch read from a token file carries the file's count, a `subset` none). Parts
        of another layout, length, segment ids or labels fail naming the first such part."""
        parts = list(parts)
        if not parts:
            raise ValueError("Encoded.concat got no parts")
        first = parts[0]  # one part too is checked and copied (it came back as given: review DR, left since stop 76)

        def kind(p):
            return (p.layout, p.max_length, p.token_type_ids is None, None if p.labels is None else p.labels.ndim)

        for i, p in enumerate(parts):
            if not isinstance(p, Encoded):
                raise TypeError(f"Encoded.concat takes Encoded parts; part {i} is {type(p).__name__}")
            if kind(p) != kind(first):
                names = ("layout", "max_length", "no token_type_ids", "labels' dimensions")
                raise ValueError(f"Encoded.concat: part {i} has {dict(zip(names, kind(p)))}, part 0 "
                                 f"{dict(zip(names, kind(first)))}: concatenate encodings of one layout, max_length "
                                 f"and task")  # fmt: skip

        def cat(name):
            return None if getattr(first, name) is None else np.concatenate([getattr(p, name) for p in parts])

        return cls(
            cat("input_ids"),
            cat("attention_mask"),
            cat("token_type_ids"),
            cat("labels"),
            first.layout,
            first.max_length,
            n_truncated=sum(p.n_truncated for p in parts),
            meta=dict(first.meta),
        )

    def to_frame(self):
        """A pandas DataFrame, one row per example (list columns), as `to_arrow`."""
        return self.to_arrow().to_pandas()

    @classmethod
    def from_frame(cls, df, layout: str, max_length: int, meta: dict | None = None) -> Encoded:
        """Inverse of `to_frame` (through Arrow, as `from_arrow`)."""
        import pyarrow as pa

        return cls.from_arrow(pa.Table.from_pandas(df, preserve_index=False), layout, max_length, meta)

    # -- token files: Parquet (`to_arrow`) with the metadata as JSON under the footer key ``papa``
    def save(self, path, meta: dict | None = None) -> None:
        """Write a token file atomically, its pages checksummed (`papa.io.write_table`).

        The footer's ``papa`` metadata is the encoding's ``meta``, then ``meta`` (the caller's:
        model, dataset, split, ...; a value it gives for what the encoding records of itself, `ENCODING_META`,
        ``layout``, ``max_length`` and ``n_truncated``, must be the encoding's), then ``layout``, ``max_length`` and
        ``n_truncated``: NumPy and torch numbers
        as numbers, paths as text; a value JSON cannot hold is a `TypeError` (`papa.io.json_value`), as
        `papa.ConstantAttention` refuses it (its text was stored).
        """
        own = {**{k: self.meta[k] for k in ENCODING_META if k in self.meta}, "layout": self.layout,
               "max_length": self.max_length, "n_truncated": self.n_truncated}  # fmt: skip
        clash = [k for k in own if k in (meta or {}) and meta[k] != own[k]]
        if clash:  # `pair` read wrong places the averaging's separators wrong (review CR, left since stop 71)
            raise ValueError(f"Encoded.save: meta sets {', '.join(f'{k}={meta[k]!r}' for k in clash)}, and the "
                             f"encoding's is {', '.join(f'{k}={own[k]!r}' for k in clash)}: it records how the tokens "
                             f"were made; leave it out of meta")  # fmt: skip
        meta = {
            **self.meta,
            **(meta or {}),
            "layout": self.layout,
            "max_length": self.max_length,
            "n_truncated": self.n_truncated,
        }
        footer = json.dumps(meta, default=json_value)  # numbers as numbers; what JSON cannot hold fails, naming it
        table = self.to_arrow()
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), PROVENANCE_KEY.encode(): footer})
        write_table(table, path)

    @classmethod
    def load(cls, path) -> Encoded:
        """A token file (`save`) read whole; ``meta`` is its footer metadata (`token_meta`)."""
        f, meta = _open_tokens(path)
        return cls.from_arrow(read_table(path, f), meta["layout"], int(meta["max_length"]), meta)


def _open_tokens(path):
    """The token file as a ``pyarrow.parquet.ParquetFile`` and its papa metadata (footer only)."""
    f = parquet_file(path)
    meta = footer_json(path, (f.schema_arrow.metadata or {}).get(PROVENANCE_KEY.encode(), b"{}"))
    if "max_length" not in meta:
        raise ValueError(f"{path} is not a papa token file (no papa metadata): write it with papa.Encoded.save")
    # a token file written before its layout was recorded has papa's own (the only one then)
    return f, {"layout": LAYOUTS[0], **meta, "n_rows": f.metadata.num_rows}


def token_meta(path) -> dict:
    """The metadata of a token file (``max_length``, ``layout``, ``n_rows``, dataset, ...), read
    from its footer alone."""
    return _open_tokens(path)[1]


def _row_indices(rows, n: int, path) -> np.ndarray:
    """``rows`` as int64 indices of a token file's ``n`` examples, failing on what numpy would read otherwise: a
    negative index (the last rows, counted from the end), a bool mask (read as rows 0 and 1), a float."""
    idx = np.asarray(rows)
    if idx.size == 0:
        return idx.astype(np.int64).reshape(-1)
    if idx.dtype == bool or not np.issubdtype(idx.dtype, np.integer) or idx.ndim != 1:
        raise TypeError(f"rows must be a list of example indices (integers), got {idx.dtype} of shape {idx.shape}: "
                        f"for a mask m, pass numpy.flatnonzero(m)")  # fmt: skip
    if idx.min() < 0 or idx.max() >= n:
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        raise IndexError(f"rows holds {bad}, and {path} has {n} examples: indices run from 0 to {n - 1}")
    return idx.astype(np.int64)


def stream_tokens(path, batch_size: int, rows=None, read_rows: int = 1024) -> Iterator[Encoded]:
    """Yield `Encoded` batches of ``batch_size`` examples from a token file without reading it whole.

    Args:
        rows: optional indices of the examples to keep (a subsample; they come in file order);
            None = all.
        read_rows: examples read from the file at a time.
    Memory stays at O(read_rows + batch_size) examples whatever the corpus size.
    """
    batch_size = check_batch_size(batch_size, "stream_tokens' batch_size")  # -1 yielded nothing, 0 divided by 0
    read_rows = check_batch_size(read_rows, "stream_tokens' read_rows")
    f, meta = _open_tokens(path)
    N, layout = int(meta["max_length"]), meta["layout"]
    keep = None
    if rows is not None:
        keep = np.zeros(meta["n_rows"], dtype=bool)
        keep[_row_indices(rows, meta["n_rows"], path)] = True
    start, rest = 0, None  # rest: examples read but not yet yielded (fewer than batch_size)
    for rb in read_batches(path, f, batch_size=max(int(read_rows), int(batch_size))):
        chunk = Encoded.from_arrow(rb, layout, N, meta)
        if keep is not None:
            chunk = chunk.subset(np.flatnonzero(keep[start : start + len(chunk)]))
        start += rb.num_rows
        buf = chunk if rest is None else Encoded.concat([rest, chunk])
        cut = len(buf) - len(buf) % batch_size
        for b0 in range(0, cut, batch_size):
            yield buf.subset(np.arange(b0, b0 + batch_size))
        rest = buf.subset(np.arange(cut, len(buf)))
    if rest is not None and len(rest):
        yield rest


def _is_list(t) -> bool:
    import pyarrow as pa

    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _list_matrix(col, max_length: int, name: str) -> np.ndarray:
    """A pyarrow list column (Array or ChunkedArray) of equal-length rows as int64 [n, max_length]."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    if n == 0:
        return np.zeros((0, max_length), np.int64)
    lengths = pc.list_value_length(col)
    lo, hi = pc.min_max(lengths).values()
    if lo.as_py() != max_length or hi.as_py() != max_length:
        got = lo.as_py() if lo.as_py() != max_length else hi.as_py()
        raise ValueError(
            f"Tokenized inputs have length {got} in column {name!r}, expected max_length={max_length}: "
            f"tokenize again with this max_length"
        )
    return np.asarray(col.flatten().to_numpy(zero_copy_only=False), dtype=np.int64).reshape(n, max_length)


@dataclass(frozen=True)
class _Template:
    prefix: list[int]
    mid: list[int]
    suffix: list[int]
    prefix_types: list[int]
    mid_types: list[int]
    suffix_types: list[int]
    type_a: int
    type_b: int


#: Tokenizer classes whose pair template in transformers 5 is not the one the model was pretrained on:
#: transformers 5's DeBERTa (v1) tokenizer puts RoBERTa's two separators between the texts
#: (``[CLS] A [SEP] [SEP] B [SEP]``), where DeBERTa was pretrained and fine-tuned (microsoft/DeBERTa;
#: transformers 4's tokenizers, which the authors ran) on ``[CLS] A [SEP] B [SEP]``. `special_template`
#: keeps one middle separator for these.
ONE_MIDDLE_SEPARATOR = frozenset({"DebertaTokenizer", "DebertaTokenizerFast"})

#: Tokenizer classes whose model takes segment ids (``token_type_ids``) that transformers 5's tokenizer no
#: longer lists among its ``model_input_names``: ALBERT was pretrained with sentence B in segment 1 (its
#: sentence-order objective; ``type_vocab_size`` 2), and its pair template still says so, but the tokenizer
#: returns no segment ids, so sentence B would reach the model as segment 0. `encode` gives them.
SEGMENT_IDS = frozenset({"AlbertTokenizer", "AlbertTokenizerFast"})


def special_template(tokenizer, pair: bool) -> _Template:
    """The special tokens the tokenizer puts around one text or a pair, read off a probe encoding
    (a pair's doubled middle separator cut to one for the tokenizers of `ONE_MIDDLE_SEPARATOR`)."""
    enc = tokenizer("a", "b" if pair else None, return_special_tokens_mask=True, return_token_type_ids=True)
    ids, special = enc["input_ids"], enc["special_tokens_mask"]
    types = enc.get("token_type_ids") or [0] * len(ids)
    runs: list[tuple[bool, list[int]]] = []
    for i, s in enumerate(special):
        if runs and runs[-1][0] == bool(s):
            runs[-1][1].append(i)
        else:
            runs.append((bool(s), [i]))
    spec = [r for s, r in runs if s]
    text = [r for s, r in runs if not s]
    expected = 2 if not pair else 3
    if len(text) != (2 if pair else 1) or len(spec) != expected or not runs[0][0]:
        raise ValueError(
            f"Cannot read the special-token template of {type(tokenizer).__name__}: got {ids!r}. "
            "PAPA's layout needs a tokenizer that puts special tokens before, between and after texts."
        )
    pick = lambda idx: [ids[i] for i in idx]  # noqa: E731
    ptypes = lambda idx: [types[i] for i in idx]  # noqa: E731
    mid = spec[1] if pair else []
    if type(tokenizer).__name__ in ONE_MIDDLE_SEPARATOR and len(mid) == 2 and ids[mid[0]] == ids[mid[1]]:
        mid = mid[:1]
    return _Template(
        prefix=pick(spec[0]),
        mid=pick(mid),
        suffix=pick(spec[-1]),
        prefix_types=ptypes(spec[0]),
        mid_types=ptypes(mid),
        suffix_types=ptypes(spec[-1]),
        type_a=types[text[0][0]],
        type_b=types[text[1][0]] if pair else 0,
    )


def separator_positions(tokenizer, max_length: int, pair: bool, layout: str = "papa") -> list[int]:
    """Where `encode` puts the separators of every example: in the papa layout the final separator
    block ends at N-1 and, for pairs, the middle block starts at N/2 (RoBERTa's ``</s></s>``: N/2 and
    N/2 + 1); in the ``standard`` layout they follow each text, so no position is fixed ([])."""
    if layout != "papa":
        return []
    tpl = special_template(tokenizer, pair)
    N, half = int(max_length), int(max_length) // 2
    middle = list(range(half, half + len(tpl.mid))) if pair else []
    return middle + list(range(N - len(tpl.suffix), N))


def min_max_length(prefix: int, middle: int, suffix: int, pair: bool, layout: str = "papa",
                   half_cap: bool = False) -> int:  # fmt: skip
    """The smallest ``max_length`` at which every text keeps a word piece, given the special tokens a tokenizer
    puts before (``prefix``), between (``middle``) and after (``suffix``) the texts: for a pair in the papa layout
    N/2 holds the prefix and a piece of sentence A, and the middle, a piece of B and the suffix (N even); a single
    text under ``half_cap`` (``single_cap="authors"``) has N/2 - prefix places; otherwise the special tokens and
    two pieces must fit (`papa.checks` uses it on the config before any tokenizer is read)."""
    if pair and layout == "papa":
        return 2 * max(prefix + 1, middle + suffix + 1)
    return max(prefix + middle + suffix + 2, 2 * (prefix + 1) if half_cap else 0)


def _check_room(N: int, tpl: _Template, pair: bool, layout: str, tokenizer: str, half_cap: bool = False) -> None:
    """A ``ValueError`` unless every text gets a word piece at ``max_length`` N (`min_max_length`), and a pair in the
    papa layout an even N (its middle separator sits at N/2)."""
    P, M, S = len(tpl.prefix), len(tpl.mid), len(tpl.suffix)
    if pair and layout == "papa" and N % 2:
        raise ValueError(f"max_length={N} is odd: the papa layout puts a pair's middle separator at N/2, so N "
                         f"must be even (e.g. {N + 1})")  # fmt: skip
    need = min_max_length(P, M, S, pair, layout, half_cap)
    if N < need:
        what = "a pair" if pair else "a text"
        raise ValueError(f"max_length={N} is too small for {what} in the {layout} layout with {tokenizer}'s "
                         f"{P + M + S} special tokens: every text needs a word piece; use max_length >= "
                         f"{need}")  # fmt: skip


def _tokenize(tokenizer, texts, words: bool):
    # whole texts, no special tokens: `encode` lays out and truncates them itself (counted in n_truncated), so
    # transformers' warning that a text longer than model_max_length "will result in indexing errors" would be
    # false (verbose=False silences it; it filled the console of the H100 rehearsal, once per tokenizing job)
    if words:
        texts = [list(w) for w in texts]
        if getattr(tokenizer, "add_prefix_space", None) is False:
            # byte-level BPE (RoBERTa, DeBERTa v1): a pre-split word must be encoded as the word after a
            # space ("Ġworld"), as add_prefix_space=True does (HF run_ner, the authors' run_papa_ner.py);
            # without it transformers 5 silently encodes every word as the start of a text ("w or ld")
            texts = [[" " + w for w in ws] for ws in texts]
        if not getattr(tokenizer, "is_fast", False):
            return _word_pieces_one_by_one(tokenizer, texts)
        enc = tokenizer(texts, is_split_into_words=True, add_special_tokens=False, verbose=False)
        return enc["input_ids"], [enc.word_ids(i) for i in range(len(texts))]
    enc = tokenizer(list(texts), add_special_tokens=False, verbose=False)
    return enc["input_ids"], None


def _word_pieces_one_by_one(tokenizer, texts):
    """The word pieces and word ids of pre-split sentences for a tokenizer of transformers' Python backend (PhoBERT,
    BERTweet, FlauBERT, XLM: ``is_fast`` False), which gives no ``word_ids()`` (transformers' ValueError "word_ids()
    is not available when using Python based tokenizers" was every token task's end). Such a tokenizer encodes a
    pre-split sentence word by word, each word tokenized alone and the pieces chained, so each word encoded alone
    gives the same pieces."""
    flat = [w for ws in texts for w in ws]
    pieces = tokenizer([[w] for w in flat], is_split_into_words=True, add_special_tokens=False,
                       verbose=False)["input_ids"] if flat else []  # fmt: skip
    ids, word_ids, k = [], [], 0
    for ws in texts:
        row, wid = [], []
        for j in range(len(ws)):
            row += pieces[k]
            wid += [j] * len(pieces[k])
            k += 1
        ids.append(row)
        word_ids.append(wid)
    return ids, word_ids


class WordWithoutPiece(ValueError):
    """A word of a token task the tokenizer turns into no word piece (`encode`): ``example`` (its index in the
    inputs), ``word`` (its position in the example), ``text``, and ``reason`` (what it means and what to do, the
    message without its place, for a caller that names the place its own way)."""

    def __init__(self, example: int, word: int, text: str, reason: str):
        super().__init__(f"example {example}: word {word} ({text!r}) {reason}")
        self.example, self.word, self.text, self.reason = example, word, text, reason


def _check_every_word_has_a_piece(texts, word_ids, tokenizer) -> None:
    """A `ValueError` naming the first word that the tokenizer turns into no word piece (a zero-width space, a control
    character, a lone combining accent under an uncased WordPiece): its tag would be scored nowhere, without a word
    (the tokenizer drops it; a truncated word is counted in ``n_truncated``)."""
    for r, (ws, wid) in enumerate(zip(texts, word_ids)):
        present = set(wid)
        if len(present - {None}) < len(ws):
            k = next(k for k in range(len(ws)) if k not in present)
            raise WordWithoutPiece(
                r, k, ws[k],
                f"gives no word piece with {type(tokenizer).__name__}, so its tag would be lost without a word: "
                f"remove the word from the data, or replace it with a visible one",
            )  # fmt: skip


def _class_ids(values, what: str) -> np.ndarray:
    """``values`` as int64 class ids [n]: integer-valued numbers only (a float label such as a regression
    target, a label name, or a nested list fails naming the first offender)."""
    try:
        a = np.asarray(values)
    except ValueError as e:  # ragged nesting
        raise ValueError(f"{what} must be one integer class id each; got nested lists ({e})") from None
    if a.ndim != 1:
        raise ValueError(f"{what} must be one integer class id each (1-D); got shape {a.shape}")
    if a.dtype == bool:  # a boolean column (df.label == "pos"): False 0, True 1
        return a.astype(np.int64)
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        bad = next((v for v in values if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Number)),
                   a[0] if len(a) else None)  # fmt: skip
        raise ValueError(f"{what} must be integer class ids; got {bad!r} ({a.dtype}): map label names to ids "
                         f"(their index in the task's label list)")  # fmt: skip
    if np.issubdtype(a.dtype, np.floating):
        off = ~np.isfinite(a) | (a != np.round(a)) | (np.abs(a) > 2**53)  # beyond: no integer survives float64
        if off.any():
            i = int(np.argmax(off))
            raise ValueError(f"{what} must be integer class ids; row {i} is {float(a[i])} (a missing label, or a "
                             f"regression target such as STS-B's score: papa's probes classify)")  # fmt: skip
    return a.astype(np.int64)


def _longest_first(n_a: int, n_b: int, room: int, rust_rule: bool) -> tuple[int, int]:
    """How many word pieces of sentences A and B (``n_a``, ``n_b``) a pair keeps in ``room`` places, as the
    tokenizer's own ``truncation="longest_first"`` keeps them (the ``standard`` layout is the tokenizer's packing):
    the longer loses pieces until both are as long, then both lose alike. Where an odd ``room`` leaves one piece
    over, a tokenizers-backed tokenizer (``is_fast``; the Rust library's ``LongestFirst``) gives it to the longer
    text, B when they are as long, and transformers' Python tokenizers give it to A."""
    if n_a + n_b <= room:
        return n_a, n_b
    short = min(n_a, n_b)
    if short <= room - short:  # the shorter fits beside the longer cut to the rest
        return (n_a, room - n_a) if n_a <= n_b else (room - n_b, n_b)
    low, high = room // 2, room - room // 2
    if not rust_rule:
        return high, low
    return (high, low) if n_a > n_b else (low, high)


def _truncation_side(tokenizer) -> str:
    """The side the tokenizer cuts a long text on (its ``truncation_side``, ``"right"`` when it has none); another
    value fails naming it (transformers itself refuses one only as it truncates)."""
    side = getattr(tokenizer, "truncation_side", None) or "right"
    if side not in ("right", "left"):
        raise ValueError(f"{type(tokenizer).__name__}.truncation_side is {side!r}: a tokenizer truncates on the "
                         f"'right' or the 'left'; set it to one of them")  # fmt: skip
    return side


def _keep(toks, k: int, left: bool):
    """The ``k`` word pieces of ``toks`` a text keeps: its first ``k``, or its last where the tokenizer truncates on
    the left (``truncation_side="left"``)."""
    k = min(k, len(toks))
    return toks[len(toks) - k :] if left else toks[:k]


def encode(
    tokenizer,
    texts: Sequence[str] | Sequence[Sequence[str]],
    pairs: Sequence[str] | None = None,
    max_length: int = 128,
    layout: str = "papa",
    labels: Sequence | None = None,
    single_cap: str = "paper",
    pair_segments: str = "paper",
) -> Encoded:
    """Tokenize ``texts`` (and ``pairs``) to exactly ``max_length`` tokens.

    Args:
        tokenizer: the model's tokenizer (`papa.load_encoder` returns it beside the model).
        texts: strings, or lists of words for token-level tasks (then ``labels`` are per word).
        pairs: second sentences for pair tasks.
        layout: ``"papa"`` (final separator at N-1, middle separator at N/2) or ``"standard"``.
        labels: one int per text (sequence tasks) or one list of ints per text (token tasks).
        single_cap: ``"paper"`` (a single text fills the row) or ``"authors"`` (at most
            N/2 - 1 word pieces, as the authors' code); papa layout only.
        pair_segments: ``"paper"`` (sentence B is segment 1 where it sits) or ``"authors"``
            (segment ids of the un-moved pair, as the authors' code); papa layout only.
    Returns:
        `Encoded`; ``n_truncated`` counts inputs that lost tokens; ``meta`` records the options.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be {' or '.join(map(repr, LAYOUTS))}, got {layout!r}")
    for name, value in (("single_cap", single_cap), ("pair_segments", pair_segments)):
        if value not in ENCODING_CHOICES:
            raise ValueError(f"{name} must be {' or '.join(map(repr, ENCODING_CHOICES))}, got {value!r}")
        if value == "authors" and layout != "papa":
            raise ValueError(f"{name}='authors' reproduces the authors' papa layout; it needs layout='papa'")
    if not callable(tokenizer) or not hasattr(tokenizer, "convert_tokens_to_ids"):
        raise TypeError(f"encode() needs a transformers tokenizer (the second value of papa.load_encoder) first, got "
                        f"{type(tokenizer).__name__}")  # fmt: skip
    for name, value in (("texts", texts), ("pairs", pairs), ("labels", labels)):
        if isinstance(value, str):  # a string is a sequence too: it would encode one example per character
            raise TypeError(f"encode() got one string as {name}; pass a list of them: encode(tok, [{name[:-1]}])")
        if (value is not None or name == "texts") and (isinstance(value, Mapping) or not hasattr(value, "__iter__")):
            raise TypeError(f"encode() needs {name} as a list (one entry per example), got {type(value).__name__}")
    # plain lists: a pandas Series keeps its index (a filtered one has no row 0), an array its dtype
    texts = list(texts)
    pairs = None if pairs is None else list(pairs)
    labels = None if labels is None else list(labels)
    n = len(texts)
    if n == 0:
        raise ValueError("encode() got no texts: the split is empty")
    if pairs is not None and len(pairs) != n:
        raise ValueError(f"{n} texts but {len(pairs)} pairs: give one second text per text")
    words = n > 0 and not isinstance(texts[0], str)
    for name, values in (("texts", texts), ("pairs", pairs or [])):
        for r, value in enumerate(values):  # every example the shape of the first: one text, or a list of words
            ok = (isinstance(value, (list, tuple, np.ndarray)) and all(isinstance(w, str) for w in value)
                  if words and name == "texts" else isinstance(value, str))  # fmt: skip
            if not ok:
                want = "a list of words (str), as example 0" if words and name == "texts" else "a string"
                raise TypeError(f"{name}[{r}] is {value!r}; each example must be {want} (a missing text: drop the "
                                f"example)")  # fmt: skip
    if words and pairs is not None:
        raise ValueError("Token-level (word list) inputs cannot be pairs")
    if labels is not None and len(labels) != n:
        raise ValueError(f"{n} texts but {len(labels)} labels: give one label per text (or none)")
    if words and labels is not None:
        for r, (w, lab) in enumerate(zip(texts, labels)):
            if isinstance(lab, str) or not hasattr(lab, "__len__"):
                raise ValueError(f"example {r} has the label {lab!r}; word-list inputs (a token task) need a list "
                                 f"of labels per example, one per word")  # fmt: skip
            if len(lab) != len(w):
                raise ValueError(f"example {r} has {len(w)} words but {len(labels[r])} labels: token tasks need one "
                                 f"label per word")  # fmt: skip
        labels = [_class_ids(lab, f"example {r}'s labels") for r, lab in enumerate(labels)]
    elif labels is not None:
        labels = _class_ids(labels, "labels")
    if not is_integer(max_length):
        raise TypeError(f"max_length must be an integer (N word pieces), got {max_length!r}")
    N = int(max_length)
    tpl = special_template(tokenizer, pairs is not None)
    n_special = len(tpl.prefix) + len(tpl.mid) + len(tpl.suffix)
    half_cap = pairs is None and single_cap == "authors" and not words
    _check_room(N, tpl, pairs is not None, layout, type(tokenizer).__name__, half_cap)
    pad = tokenizer.pad_token_id
    if pad is None:  # id 0 is <s> for RoBERTa, XLM-R and MPNet, whose position ids count every non-pad token
        raise ValueError(f"{type(tokenizer).__name__} has no pad token, and every row is padded to max_length={N}: "
                         f"set tokenizer.pad_token to the model's padding token (its config's pad_token_id) and save "
                         f"the tokenizer beside the model (a model that counts its position ids after the padding "
                         f"index, RoBERTa, XLM-R or MPNet, would read any other id as tokens)")  # fmt: skip
    has_types = "token_type_ids" in tokenizer.model_input_names or type(tokenizer).__name__ in SEGMENT_IDS

    rust_rule = bool(getattr(tokenizer, "is_fast", False))  # whose longest-first rule the standard layout follows
    # a tokenizer that truncates on the left (truncation_side="left") keeps the end of a long text, in either layout
    left = _truncation_side(tokenizer) == "left"
    ids_a, word_ids = _tokenize(tokenizer, texts, words)
    if words and labels is not None:
        _check_every_word_has_a_piece(texts, word_ids, tokenizer)
    ids_b = _tokenize(tokenizer, pairs, False)[0] if pairs is not None else None

    input_ids = np.full((n, N), pad, dtype=np.int64)
    mask = np.zeros((n, N), dtype=np.int64)
    types = np.zeros((n, N), dtype=np.int64)
    tok_labels = np.full((n, N), IGNORE, dtype=np.int64) if words and labels is not None else None
    truncated = 0
    P, M, S = len(tpl.prefix), len(tpl.mid), len(tpl.suffix)
    one = None  # the single-text template, where the standard layout needs it for a pair (below)

    def put(row, start, toks, ttype):
        input_ids[row, start : start + len(toks)] = toks
        mask[row, start : start + len(toks)] = 1
        types[row, start : start + len(toks)] = ttype

    for r in range(n):
        a = ids_a[r]
        if pairs is None:
            room = N - P - S if single_cap == "paper" or words else N // 2 - P
            # the authors' cap: the leading N/2 - P pieces of what the tokenizer kept at N
            ta = _keep(a, N - P - S, left)[:room]
            truncated += len(a) > room
            put(r, 0, tpl.prefix, tpl.prefix_types)
            put(r, P, ta, tpl.type_a)
            if layout == "papa":
                put(r, N - S, tpl.suffix, tpl.suffix_types)
            else:
                put(r, P + len(ta), tpl.suffix, tpl.suffix_types)
            if tok_labels is not None:
                start = len(a) - len(ta) if left else 0  # where the kept pieces start among the text's pieces
                wid = word_ids[r][start : start + len(ta)]
                lab = labels[r]
                prev = word_ids[r][start - 1] if start else None  # a word cut at its start: its first piece is lost
                for j, w in enumerate(wid):
                    if w is not None and w != prev:
                        tok_labels[r, P + j] = lab[w]
                    prev = w
            continue
        b = ids_b[r]
        if layout == "papa":
            half = N // 2
            room_a, room_b = half - P, N - half - M - S
            ta, tb = _keep(a, room_a, left), _keep(b, room_b, left)
            truncated += len(a) > room_a or len(b) > room_b
            put(r, 0, tpl.prefix, tpl.prefix_types)
            put(r, P, ta, tpl.type_a)
            types[r, P + len(ta) : half] = tpl.type_a
            put(r, half, tpl.mid, tpl.mid_types)
            put(r, half + M, tb, tpl.type_b)
            types[r, half + M + len(tb) : N - S] = tpl.type_b
            put(r, N - S, tpl.suffix, tpl.suffix_types)
        else:
            n_a, n_b = _longest_first(len(a), len(b), N - n_special, rust_rule)
            ta, tb = list(_keep(a, n_a, left)), list(_keep(b, n_b, left))
            truncated += len(ta) < len(a) or len(tb) < len(b)
            parts = [(tpl.prefix, tpl.prefix_types), (ta, tpl.type_a), (tpl.mid, tpl.mid_types), (tb, tpl.type_b),
                     (tpl.suffix, tpl.suffix_types)]  # fmt: skip
            if left and not rust_rule and not b and len(a) + n_special > N:
                # transformers' Python backend, cutting a pair on the left, turns an empty second text into None
                # (truncate_sequences: ``pair_ids[k:] if pair_ids else None``) and lays the pair out as a single
                # text: sentence A cut to the pair's room, without the separators that room was left for
                one = one or special_template(tokenizer, False)
                parts = [(one.prefix, one.prefix_types), (ta, one.type_a), (one.suffix, one.suffix_types)]
            pos = 0
            for toks, tt in parts:
                put(r, pos, toks, tt)
                pos += len(toks)

    if pairs is not None and has_types and pair_segments == "authors":
        # the tokenizer's own segment ids of the ordinary pair, which the authors' code left in place; padded on
        # the right, as every row here is (a tokenizer saved with padding_side="left" shifted them off their tokens)
        std = tokenizer(
            list(texts),
            list(pairs),
            truncation="longest_first",
            max_length=N,
            padding="max_length",
            padding_side="right",
            return_token_type_ids=True,
        )
        types = np.asarray(std["token_type_ids"], dtype=np.int64)

    if labels is None:
        lab_arr = None
    elif tok_labels is not None:
        lab_arr = tok_labels
    else:
        lab_arr = labels
    return Encoded(
        input_ids=input_ids,
        attention_mask=mask,
        token_type_ids=types if has_types else None,
        labels=lab_arr,
        layout=layout,
        max_length=N,
        n_truncated=int(truncated),
        meta={
            "n_truncated": int(truncated),
            "n": n,
            "pair": pairs is not None,
            "token_level": bool(words),
            "single_cap": single_cap,
            "pair_segments": pair_segments,
        },
    )
