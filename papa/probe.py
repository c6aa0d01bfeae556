"""Probing classifiers on a frozen encoder (paper Sec. 3.3) and their training.

* `SequenceProbe`: for each of the L+1 hidden-state layers (embeddings included) a learned
  weight per token position (initialised 1/N, multiplied by the attention mask, not
  renormalised) pools the tokens; the L+1 pooled vectors are concatenated ->
  Linear((L+1)H, H) -> tanh -> dropout -> Linear(H, labels).
* `TokenProbe`: per token, the L+1 layers are concatenated -> Linear -> tanh -> Linear;
  loss and score on the first sub-word of every word only.

With the backbone frozen and in eval mode its hidden states do not depend on the probe's
seed or epoch, so `extract_features` runs the encoder once and every seed trains from the
cache (`FeatureCache`); `LiveFeatures` re-runs the encoder per batch (needed when lambdas
or constants are trained, or the encoder's dropout is on). `prepare_features` sizes the cache
before encoding and keeps it in memory, memory-mapped on disk, or re-encodes every epoch
(`choose_strategy`). `run_probe` trains one probe per seed, each in its own batch order
(``batch_order="per_seed"``, the paper's independent runs) or all in the first seed's
(``"shared"``: side by side, so one encoder pass per epoch feeds every seed when re-encoding);
the scores do not depend on where `prepare_features` kept the features, only on the batch order
(``features=None``, the encoder live at full precision, differs from them in the last digits).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import shutil
import signal
import tempfile
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .encoding import IGNORE, Encoded, check_batch_size
from .io import SEED_LIMIT, Progress, check_seed, is_integer, process_dir, remove_dead_process_dirs
from .metrics import check_metrics, compute_all
from .models import compiled, frozen, in_mode

log = logging.getLogger(__name__)

#: Paper Table 3: learning rate, batch size, epochs, sequence length.
PAPER_HPARAMS = {
    "cola": dict(lr=2e-5, batch_size=16, epochs=15, max_length=64),
    "sst2": dict(lr=1e-4, batch_size=32, epochs=4, max_length=64),
    "mnli": dict(lr=2e-4, batch_size=8, epochs=4, max_length=256),
    "mrpc": dict(lr=2e-5, batch_size=16, epochs=15, max_length=128),
    "ner": dict(lr=1e-4, batch_size=8, epochs=4, max_length=128),
    "pos": dict(lr=5e-4, batch_size=8, epochs=4, max_length=128),
    "mlm": dict(lr=5e-4, batch_size=8, epochs=2, max_length=128),
}


@dataclass
class Ragged:
    """The valid tokens of a batch: ``x`` [T, L+1, H], their positions ``pos`` [T] and example
    index ``seg`` [T] in a batch of ``n`` examples. Pad positions carry zero pooling weight, so
    pooling over these equals pooling over the padded [B, L+1, N, H] tensor with its mask."""

    x: torch.Tensor
    pos: torch.Tensor
    seg: torch.Tensor
    n: int


class SequenceProbe(nn.Module):
    def __init__(self, n_layers: int, max_length: int, hidden: int, n_labels: int, dropout: float = 0.1):
        super().__init__()
        self.pos_weight = nn.Parameter(torch.full((n_layers, max_length), 1.0 / max_length))
        self.dense = nn.Linear(n_layers * hidden, hidden)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, n_labels)

    def forward(self, hidden, mask: torch.Tensor | None = None) -> torch.Tensor:
        """hidden [B, L+1, N, H] with mask [B, N], or the valid tokens only as `Ragged` -> logits [B, labels]."""
        if isinstance(hidden, Ragged):
            r = hidden
            w = self.pos_weight[:, r.pos].T  # [T, L+1]: each token's weight, per layer
            pooled = r.x.new_zeros(r.n, *r.x.shape[1:]).index_add_(0, r.seg, r.x * w[..., None])
        else:
            w = self.pos_weight[None] * mask[:, None, :].to(hidden.dtype)  # [B, L+1, N]
            pooled = torch.einsum("blnh,bln->blh", hidden, w)
        return self.out(self.dropout(torch.tanh(self.dense(pooled.flatten(1)))))


class TokenProbe(nn.Module):
    def __init__(self, n_layers: int, hidden: int, n_labels: int):
        super().__init__()
        self.dense = nn.Linear(n_layers * hidden, hidden)
        self.out = nn.Linear(hidden, n_labels)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [T, L+1, H] (scored positions only) -> logits [T, labels]."""
        return self.out(torch.tanh(self.dense(tokens.flatten(1))))


# ----------------------------------------------------------------------------- features

MB = 2**20
#: Where a probe job's hidden states live (`choose_strategy`).
STRATEGIES = ("auto", "memory", "disk", "reencode")
#: How a fresh probe's Linear layers start (`init_probe`): ``normal`` draws weights from N(0,
#: the encoder's ``initializer_range``) with zero biases, what the authors' probes got from
#: transformers' ``_init_weights`` (their probes were modules of the Hugging Face model);
#: ``pytorch`` keeps torch's ``nn.Linear`` default (uniform, +-1/sqrt(fan_in), biases too).
PROBE_INITS = ("normal", "pytorch")
#: How the seeds of a probe job are ordered (`run_probe`): each in its own seed's batch order
#: (independent runs, as in the paper), or every seed in the first seed's order.
BATCH_ORDERS = ("per_seed", "shared")
#: The feature cache's dtypes (`prepare_features`; config ``cache.dtype``).
CACHE_DTYPES = ("float16", "float32")


def model_dims(model) -> tuple[int, int]:
    """(L+1 hidden-state layers, hidden size) of ``model``: the shape of one token's features."""
    cfg = model.config
    n_layers = int(getattr(cfg, "num_hidden_layers", getattr(cfg, "n_layers", 0))) + 1
    return n_layers, int(getattr(cfg, "hidden_size", getattr(cfg, "dim", 0)))


def kept_tokens(encoded: Encoded) -> np.ndarray:
    """bool [examples, N]: the tokens a probe reads, every valid token for sequence tasks, the
    scored first sub-words for token tasks."""
    return (encoded.labels != IGNORE) if encoded.token_level else encoded.attention_mask.astype(bool)


def features_nbytes(n_tokens: int, n_layers: int, hidden: int, dtype: str = "float16") -> int:
    """Bytes of cached hidden states for ``n_tokens`` kept tokens: tokens x (L+1) x H x itemsize."""
    return int(n_tokens) * int(n_layers) * int(hidden) * np.dtype(dtype).itemsize


def cache_nbytes(model, encoded: Encoded, dtype: str = "float16") -> int:
    """The exact size of the hidden states `extract_features` would cache for ``encoded``,
    known before encoding (from the attention masks or labels alone)."""
    return features_nbytes(int(kept_tokens(encoded).sum()), *model_dims(model), dtype)


def choose_strategy(
    nbytes: int,
    strategy: str = "auto",
    budget_mb: float | None = None,
    disk_budget_mb: float | None = None,
    cacheable: bool = True,
) -> str:
    """Where a probe job keeps its hidden states.

    ``auto``: ``memory`` if ``nbytes`` fits ``budget_mb`` (None = no limit), else ``disk``
    (memory-mapped) if it fits ``disk_budget_mb`` (None = no limit), else ``reencode`` (the
    frozen encoder runs again every epoch of every seed; one pass per epoch feeds every seed under
    ``batch_order="shared"``). An explicit strategy
    is kept, except that features that change from pass to pass (``cacheable=False``: backbone
    dropout) are always re-encoded.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"cache strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    if not cacheable:
        return "reencode"
    if strategy != "auto":
        return strategy
    if budget_mb is None or nbytes <= budget_mb * MB:
        return "memory"
    if disk_budget_mb is None or nbytes <= disk_budget_mb * MB:
        return "disk"
    return "reencode"


def free_disk_mb(scratch: str | None = None) -> float:
    """Free space under ``scratch`` (default: the temporary folder) minus a margin of
    max(1 GiB, 10 %), in MB: the disk budget when ``cache.disk_budget_mb`` is null."""
    path = Path(scratch or tempfile.gettempdir()).absolute()
    while not path.exists():  # the scratch folder is created on first use
        path = path.parent
    free = shutil.disk_usage(path).free
    return max(0, free - max(2**30, free // 10)) / MB


class CacheSpaceError(OSError):
    """The disk under ``scratch`` cannot hold a feature cache (checked by reserving its whole size up front)."""


#: The errnos of a disk without room: no space, or the user's quota spent.
_NO_SPACE = (28, 122)  # errno.ENOSPC, errno.EDQUOT (Linux)


def reserve_disk(path: str | Path) -> bool:
    """Allocate every block of the file ``path`` now (Linux ``fallocate``), at its current size.

    A memory-mapped cache file starts sparse: without this, jobs that share a node's scratch disk
    would each see the same free space, each choose the disk, and the later ones fail partway
    (SIGBUS on a full disk) hours into encoding. Reserved, the job that does not fit fails here, at
    once, with `CacheSpaceError`. Returns False where the filesystem or the OS cannot reserve
    (no ``fallocate``: macOS, some network filesystems), leaving the file sparse as before.
    """
    import ctypes
    import errno

    try:
        fallocate = ctypes.CDLL(None, use_errno=True).fallocate
    except (AttributeError, OSError):
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDWR)
    try:
        if fallocate(fd, 0, 0, size) == 0:
            return True
        err = ctypes.get_errno()
    finally:
        os.close(fd)
    if err in (errno.ENOSPC, errno.EDQUOT):
        raise CacheSpaceError(err, f"no room for a {size / MB:.0f} MB feature cache: {os.strerror(err)}", str(path))
    return False  # EOPNOTSUPP, ENOSYS, EINVAL...: this filesystem cannot reserve


def _hidden(model, inputs) -> torch.Tensor:
    out = model(**inputs, output_hidden_states=True)
    return torch.stack(out.hidden_states, dim=1)  # [B, L+1, N, H]: a copy, whatever reuses the outputs' memory


class LiveFeatures:
    """Runs the (possibly patched) encoder for every batch; gradients flow to patch parameters.

    Args:
        dtype: round the hidden states to this dtype (``"float16"``), as `FeatureCache` stores
            them, so re-encoding and caching feed the probe the same numbers; None keeps them.
        train_mode: run the encoder in train mode (its dropout on, the authors' setting; its
            weights still get no gradient). Evaluation batches should use False.
        compile: run the encoder's forward pass through ``torch.compile`` in this mode
            (`papa.models.COMPILE_MODES`; ``eager``, the default, runs it as it is).
    """

    def __init__(
        self,
        model,
        encoded: Encoded,
        device=None,
        dtype: str | None = None,
        train_mode: bool = False,
        compile: str = "eager",
    ):
        self.model, self.enc = model, encoded
        self.runner = compiled(model, compile)
        # CUDA graphs reuse their outputs' memory: each batch is a new step (its hidden states are copied)
        self.new_step = torch.compiler.cudagraph_mark_step_begin if compile == "reduce-overhead" else None
        self.device = device or next(model.parameters()).device
        self.token_level = encoded.token_level
        self.dtype = None if dtype is None else getattr(torch, dtype)
        self.train_mode = train_mode
        self.closed = False

    def __len__(self):
        return len(self.enc)

    def close(self):
        """End these features (`prepare_features` does on leaving its block): a batch read after it fails, since the
        model may have changed since (a patch removed), which a probe would then train on without a word."""
        self.closed = True

    def batch(self, idx, grad: bool = False):
        if self.closed:
            raise ValueError(_CLOSED.format(split=""))
        idx = np.asarray(idx)
        inputs = self.enc.model_inputs(idx, device=self.device)
        with in_mode(self.model, self.train_mode), torch.set_grad_enabled(grad):
            if self.new_step is not None:
                self.new_step()
            h = _hidden(self.runner, inputs)
        if self.dtype is not None:  # the cache's rounding (float16), as a cached run would see them
            h = h.to(self.dtype)
        h = h.to(torch.float32)  # the probe's dtype, whatever the model's (a bfloat16 model failed in the probe)
        labels = torch.as_tensor(self.enc.labels[idx], device=self.device)
        if self.token_level:
            keep = labels != IGNORE
            return h.permute(0, 2, 1, 3)[keep], labels[keep]
        return (h, inputs["attention_mask"]), labels


#: What reading features after their `prepare_features` block says (a cache's are freed then; re-encoded ones would
#: run the model as it is then, a patch of the block removed).
_CLOSED = (
    "the {split}features were closed when their prepare_features block ended: train the probes inside the with block"
)


class FeatureCache:
    """Hidden states computed once (float16 by default), in memory or memory-mapped on disk.

    Only the tokens the probe reads are kept, as rows [tokens, L+1, H] with per-example
    ``offsets``: every valid token for sequence tasks (with its ``positions``), the scored
    first sub-words for token tasks (with their ``labels``). A cache on disk owns its folder:
    `close()` (or garbage collection, or the end of the process) removes it. ``encoded``: the
    examples it was extracted from (`extract_features` keeps them), which `check_features`
    compares with the split it is given beside.
    """

    def __init__(
        self,
        data: np.ndarray,
        labels: np.ndarray,
        offsets: np.ndarray,
        positions: np.ndarray | None,
        token_level: bool,
        device=None,
        folder: str | None = None,
        encoded: Encoded | None = None,
    ):
        self.data, self.labels, self.offsets, self.positions = data, labels, offsets, positions
        self.encoded = encoded
        self.token_level = token_level
        self.device = device or "cpu"
        self.folder = folder
        self._cleanup = weakref.finalize(self, shutil.rmtree, folder, True) if folder else None

    def __len__(self):
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    def close(self) -> None:
        """Drop the hidden states; a cache on disk removes its folder."""
        self.data = None
        if self._cleanup is not None:
            self._cleanup()

    def _rows(self, idx):
        starts, ends = self.offsets[idx], self.offsets[idx + 1]
        counts = ends - starts
        rows = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        return rows, counts

    def batch(self, idx, grad: bool = False):
        idx = np.asarray(idx)
        rows, counts = self._rows(idx)
        x = torch.from_numpy(np.ascontiguousarray(self.data[rows])).to(self.device, torch.float32)
        if self.token_level:
            return x, torch.from_numpy(self.labels[rows]).to(self.device)
        seg = torch.from_numpy(np.repeat(np.arange(len(idx)), counts)).to(self.device)
        pos = torch.from_numpy(self.positions[rows]).to(self.device)
        return Ragged(x, pos, seg, len(idx)), torch.from_numpy(self.labels[idx]).to(self.device)


_CACHE_PREFIX = "papa-features-"  # disk caches: papa-features-<host>-<pid>-XXXXXXXX


def remove_stale_caches(scratch: str | None = None) -> list[str]:
    """Remove disk caches that killed jobs (SIGKILL, a lost node) left under ``scratch`` (default the
    temporary folder): those of this host whose process is gone. Returns the folders removed."""
    removed = remove_dead_process_dirs(_CACHE_PREFIX, scratch)
    for d in removed:
        log.info("removed the feature cache %s of a killed job", d)
    return removed


def extract_features(
    model,
    encoded: Encoded,
    batch_size: int = 64,
    dtype: str = "float16",
    budget_mb: float | None = None,
    scratch: str | None = None,
    log_every: float = 10.0,
    device=None,
    strategy: str = "auto",
) -> FeatureCache:
    """Run the (patched) encoder once over ``encoded`` and cache what the probe reads.

    ``strategy`` ``memory`` or ``disk`` puts the cache there; ``auto`` keeps it in memory when
    it fits ``budget_mb`` (None = no limit) and otherwise streams it to a memory-mapped file in
    a new folder under ``scratch`` (a temporary folder by default), removed by `FeatureCache.close`.
    """
    device = device or next(model.parameters()).device
    np_dtype, torch_dtype = np.dtype(dtype), getattr(torch, dtype)
    check_batch_size(batch_size)
    n = len(encoded)
    if n == 0:
        raise ValueError("extract_features got an empty split")
    n_layers, hidden = model_dims(model)
    keep_np = kept_tokens(encoded)
    offsets = np.concatenate([[0], np.cumsum(keep_np.sum(1))]).astype(np.int64)
    shape = (int(offsets[-1]), n_layers, hidden)
    positions = None if encoded.token_level else np.nonzero(keep_np)[1].astype(np.int64)
    if encoded.token_level:
        labels = encoded.labels[keep_np].astype(np.int64)
    else:
        labels = np.asarray(encoded.labels if encoded.labels is not None else np.full(n, -1), dtype=np.int64)
    nbytes = features_nbytes(shape[0], n_layers, hidden, dtype)
    where = choose_strategy(nbytes, strategy, budget_mb, None)
    if where not in ("memory", "disk"):
        raise ValueError(f"extract_features caches in memory or on disk, not {where!r}")
    folder = None
    if where == "memory":
        data = np.empty(shape, dtype=np_dtype)
    else:
        if scratch:
            Path(scratch).mkdir(parents=True, exist_ok=True)
        remove_stale_caches(scratch)
        folder = None
        try:
            folder = str(process_dir(_CACHE_PREFIX, scratch))
            data = np.lib.format.open_memmap(f"{folder}/features.npy", mode="w+", dtype=np_dtype, shape=shape)
            reserved = reserve_disk(f"{folder}/features.npy")
        except BaseException as e:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            if isinstance(e, OSError) and not isinstance(e, CacheSpaceError) and e.errno in _NO_SPACE:
                # a disk full to the last byte fails creating the file, before its reservation: the same error
                where = f"{folder}/features.npy" if folder else str(scratch or tempfile.gettempdir())
                raise CacheSpaceError(e.errno, f"no room for a {nbytes / MB:.0f} MB feature cache: "
                                      f"{os.strerror(e.errno)}", where) from e  # fmt: skip
            raise
        where = f"memory-mapped file {folder}/features.npy" + ("" if reserved else " (not reserved: sparse)")
    cache = FeatureCache(data, labels, offsets, positions, encoded.token_level, folder=folder, encoded=encoded)
    log.info("caching features %s (%.0f MiB, %s) in %s", shape, nbytes / MB, dtype, where)
    progress = Progress(log_every)
    pos = 0
    try:  # the frozen encoder's features, dropout off, as LiveFeatures runs it (a train-mode model drew noise)
        with in_mode(model, False), torch.inference_mode():
            for start in range(0, n, batch_size):
                idx = np.arange(start, min(n, start + batch_size))
                h = _hidden(model, encoded.model_inputs(idx, device=device))
                keep = torch.as_tensor(keep_np[idx], device=h.device)
                tok = h.permute(0, 2, 1, 3)[keep]  # [tokens, L+1, H]
                # rounded on the model's device (torch rounds as NumPy's astype did, bit for bit): half the bytes
                # cross to the host, and NumPy's slow float16 conversion is gone
                data[pos : pos + tok.shape[0]] = tok.to(torch_dtype).cpu().numpy()
                pos += tok.shape[0]
                if progress.due(done := start + len(idx)):
                    log.info("encoded %d/%d examples, %.1f examples/s, %s", done, n, progress.rate(done),
                             progress.eta_text(done, n))  # fmt: skip
    except BaseException:
        cache.close()
        raise
    log.info("encoded %d examples in %.1f s", n, progress.elapsed())
    return cache


@dataclass
class PreparedFeatures:
    """The train and validation features of a probe job, and how they are kept."""

    train: FeatureCache | LiveFeatures
    validation: FeatureCache | LiveFeatures
    strategy: str  # memory, disk or reencode
    nbytes: int  # size of the hidden-state cache (train + validation), whether or not it is built

    def __iter__(self):
        return iter((self.train, self.validation))


@contextmanager
def _sigterm_exits():
    """While inside, SIGTERM (Slurm's time limit, Snakemake cancelling a job) and SIGHUP (a closed terminal) raise
    SystemExit (`papa.io.stop_on_signals`), so ``finally`` blocks run; only in the main thread, where signal
    handlers can be set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    from .io import stop_on_signals

    previous = stop_on_signals()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def prepare_features(
    model,
    train_enc: Encoded,
    val_enc: Encoded,
    strategy: str = "auto",
    dtype: str = "float16",
    batch_size: int = 64,
    budget_mb: float | None = None,
    disk_budget_mb: float | None = None,
    scratch: str | None = None,
    backbone_dropout: bool = False,
):
    """The features of a probe job, kept where they fit (a context manager yielding `PreparedFeatures`).

    The cache size of both splits is computed before anything is encoded and `choose_strategy`
    picks ``memory`` (within ``budget_mb``), ``disk`` (memory-mapped under ``scratch``, within
    ``disk_budget_mb``; None = the free space there minus a margin, `free_disk_mb`) or
    ``reencode`` (`LiveFeatures`: the encoder runs every epoch, its hidden states rounded to
    ``dtype`` as a cache would hold them). ``backbone_dropout`` runs the encoder in train mode
    for training batches, which forces ``reencode``. A disk cache is removed on leaving,
    however the block ends (SIGTERM included), and the features cannot be used after it (re-encoded ones neither:
    they would run the model as it is then, a patch entered with the block removed).

    ``memory`` and ``disk`` encode with the model as it is on entering (in eval mode: dropout off, whatever
    mode the model is in); ``reencode`` runs it as it is when each batch is read, so keep the model as it was
    (a patch entered or removed inside the block changes what a re-encoded probe sees, not a cached one).
    """
    check_batch_size(batch_size)  # before the sizes, not when the first split is encoded
    if dtype not in CACHE_DTYPES:
        raise ValueError(f"dtype of the feature cache must be {' or '.join(map(repr, CACHE_DTYPES))}, got {dtype!r}")
    for name, mb in (("budget_mb", budget_mb), ("disk_budget_mb", disk_budget_mb)):
        if mb is not None and not (_finite_number(mb) and mb >= 0):
            raise ValueError(f"{name} must be a number of MB >= 0 (None: no limit), got {mb!r}")
    for split, enc in (("train", train_enc), ("validation", val_enc)):
        if not isinstance(enc, Encoded):
            raise TypeError(f"the {split} split must be papa.encode's Encoded, got {type(enc).__name__}")
    # the disk caches of killed jobs (SIGKILL, a lost node) go whatever this job picks (a resume that fits in memory
    # left them for good), before the free space is looked up
    remove_stale_caches(scratch)
    sizes = {"train": cache_nbytes(model, train_enc, dtype), "validation": cache_nbytes(model, val_enc, dtype)}
    total = sum(sizes.values())
    over_memory = budget_mb is not None and total > budget_mb * MB
    disk_mb = None  # looked up only where the disk may be used
    if not backbone_dropout and (strategy == "disk" or (strategy == "auto" and over_memory)):
        disk_mb = disk_budget_mb if disk_budget_mb is not None else free_disk_mb(scratch)
    chosen = choose_strategy(total, strategy, budget_mb, disk_mb, cacheable=not backbone_dropout)
    if chosen == "disk" and disk_mb is not None and total > disk_mb * MB:
        raise OSError(
            f"cache.strategy disk: the features need {total / MB:.0f} MB but the disk budget under "
            f"{scratch or tempfile.gettempdir()} is {disk_mb:.0f} MB; "
            + (
                "raise cache.disk_budget_mb (null = the free space), "
                if disk_budget_mb is not None
                else "free space, set cache.scratch, "
            )
            + "or use strategy auto or reencode"
        )
    log.info(
        "feature cache: train %.1f MiB + validation %.1f MiB (%s) = %.1f MiB; memory budget %s, disk budget %s "
        "-> strategy %s%s",
        sizes["train"] / MB,
        sizes["validation"] / MB,
        dtype,
        total / MB,
        "none" if budget_mb is None else f"{budget_mb:g} MiB",
        "unused" if disk_mb is None else f"{disk_mb:.0f} MiB",
        chosen,
        " (backbone dropout: features change every pass)" if backbone_dropout else "",
    )
    feats: list = []
    with _sigterm_exits():
        try:
            if chosen != "reencode":
                try:
                    for enc in (train_enc, val_enc):
                        feats.append(extract_features(model, enc, batch_size, dtype, scratch=scratch, strategy=chosen))
                except CacheSpaceError as e:
                    if strategy != "auto":
                        raise
                    # another job took the space between our look at it and our reservation: re-encode instead
                    log.warning("%s; falling back to strategy reencode", e)
                    for f in feats:
                        f.close()
                    chosen = "reencode"
            if chosen == "reencode":
                feats = [
                    LiveFeatures(model, train_enc, dtype=dtype, train_mode=backbone_dropout),
                    LiveFeatures(model, val_enc, dtype=dtype),
                ]
            yield PreparedFeatures(*feats, strategy=chosen, nbytes=total)
        finally:
            for f in feats:  # a cache freed; re-encoded features ended too (the model may change after the block)
                f.close()


# ----------------------------------------------------------------------------- training


@dataclass
class TrainConfig:
    """How a probe (and the patch parameters training with it) trains: a task's ``probe`` / ``lambda`` block
    of the workflow's config (the paper's Table 3 values: `PAPER_HPARAMS`).

    Attributes:
        lr: the probe's learning rate (AdamW, constant).
        batch_size, epochs: training batches and passes over the train split; the last epoch is reported.
        seed: the probe's initialisation and dropout (and its batch order unless ``shuffle_seed`` is set).
        weight_decay: AdamW's, on the probe's weights (0 for the patch parameters).
        dropout: the sequence probe's, between its tanh layer and the output; ``"authors"`` (`AUTHORS_DROPOUT`):
            each family's as the authors' heads had it, none on RoBERTa and 0.1 on the others (`probe_dropout`).
        extra_lr: the learning rate of the patch parameters (lambda logits, trained constants); None = ``lr``.
        eval_batch_size: validation batches (scoring only).
        max_grad_norm: clip the gradient norm of everything that trains (the authors: 1.0); None = no clipping.
        shuffle_seed: the batch order's seed; None = ``seed`` (`run_probe`'s ``batch_order: shared`` sets it).
        init: how a fresh probe starts: ``normal`` (the authors', N(0, initializer_range)) or ``pytorch``
            (`PROBE_INITS`, `init_probe`).
    """

    lr: float = 1e-4
    batch_size: int = 32
    epochs: int = 4
    seed: int = 0
    weight_decay: float = 0.0
    dropout: float | str = 0.1  # or "authors" (`AUTHORS_DROPOUT`): the model's family decides (`probe_dropout`)
    extra_lr: float | None = None  # learning rate of patch parameters (lambdas); None = lr
    eval_batch_size: int = 64
    max_grad_norm: float | None = None  # clip the gradient norm (the authors: 1.0); None = no clipping
    shuffle_seed: int | None = None  # seed of the batch order; None = seed
    init: str = "normal"  # how a fresh probe starts (`PROBE_INITS`, `init_probe`)

    def __post_init__(self):
        positive = {"lr": self.lr, "batch_size": self.batch_size, "epochs": self.epochs}
        positive.update(eval_batch_size=self.eval_batch_size, extra_lr=self.extra_lr, max_grad_norm=self.max_grad_norm)
        optional = ("extra_lr", "max_grad_norm")  # None: the probe's lr, no clipping
        bad = [f"{k}={v!r} (a finite number)" for k, v in positive.items()
               if not (v is None and k in optional) and not _finite_number(v)]  # fmt: skip
        bad += [f"{k}={v!r}" for k, v in positive.items() if _finite_number(v) and not v > 0]
        for k in ("dropout", "weight_decay"):
            if not _finite_number(getattr(self, k)) and not (k == "dropout" and self.dropout == AUTHORS_DROPOUT):
                raise ValueError(f"TrainConfig: {k}={getattr(self, k)!r} must be a finite number"
                                 + (f" (or {AUTHORS_DROPOUT!r})" if k == "dropout" else ""))  # fmt: skip
        if self.dropout != AUTHORS_DROPOUT and not 0 <= self.dropout < 1:
            bad.append(f"dropout={self.dropout!r} (must be in [0, 1))")
        if self.weight_decay < 0:
            bad.append(f"weight_decay={self.weight_decay!r} (must be >= 0)")
        if self.init not in PROBE_INITS:
            bad.append(f"init={self.init!r} (one of {', '.join(PROBE_INITS)})")
        counts = {"batch_size": self.batch_size, "epochs": self.epochs, "eval_batch_size": self.eval_batch_size}
        bad += [f"{k}={v!r} (an integer)" for k, v in counts.items()
                if v is not None and _finite_number(v) and not is_integer(v)]  # fmt: skip
        seeds = {"seed": self.seed, "shuffle_seed": self.shuffle_seed}
        bad += [f"{k}={v!r} (an integer in [0, 2**32))" for k, v in seeds.items()
                if v is not None and not (is_integer(v) and 0 <= v < SEED_LIMIT)]  # fmt: skip
        if bad:
            raise ValueError(
                f"TrainConfig: {', '.join(bad)}; learning rates, batch sizes, epochs and max_grad_norm "
                f"must be > 0 (extra_lr and max_grad_norm may be None), dropout in [0, 1), init one of "
                f"{', '.join(PROBE_INITS)}"
            )


#: ``TrainConfig.dropout``'s value for each family's dropout as the authors' heads had it (`probe_dropout`).
AUTHORS_DROPOUT = "authors"
#: The model types whose sequence head in the authors' code had no dropout: RoBERTa's
#: (``RobertaForSequenceClassification`` with ``use_freeze_extract_pooler``: the classifier on the pooler); their
#: BERT and DeBERTa heads had the config's 0.1 (the fork has no ELECTRA code: ELECTRA's own head has 0.1 too).
AUTHORS_NO_DROPOUT = ("roberta",)


def probe_dropout(dropout: float | str, model) -> float:
    """The sequence probe's dropout for ``model``: ``dropout``, or for ``"authors"`` (`AUTHORS_DROPOUT`) 0.0 on a
    model type of `AUTHORS_NO_DROPOUT` (RoBERTa) and 0.1 on the others, so one config runs every family as the
    authors did (README "Differences from the authors' code")."""
    if dropout != AUTHORS_DROPOUT:
        return dropout
    model_type = getattr(getattr(model, "config", model), "model_type", None)
    return 0.0 if model_type in AUTHORS_NO_DROPOUT else 0.1


def _finite_number(v) -> bool:
    """A finite int or float, not a bool or a string (``lr="1e-3"``, ``lr=None``, ``inf`` would fail mid-run)."""
    import numbers

    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def classes_present(enc: Encoded) -> np.ndarray:
    """The class ids ``enc``'s labels hold, sorted (a token task's ignored positions, `IGNORE`, and unlabeled
    -1 left out)."""
    y = np.asarray(enc.labels) if enc.labels is not None else np.zeros(0, dtype=np.int64)
    return np.unique(y[y >= 0])


def check_splits(train_enc: Encoded, val_enc: Encoded, kind: str, n_labels: int) -> None:
    """Fail before training, saying what to change, when the two splits cannot train and score a
    ``kind`` probe: no `Encoded` (texts, a dict), an empty split, an ``n_labels`` that is no count of classes,
    labels of the other task kind, splits of different lengths N or layouts, labels the probe cannot score
    (`check_labels`), a train split of one class."""
    if not is_integer(n_labels) or n_labels < 2:
        raise ValueError(f"n_labels={n_labels!r}: it must be the number of classes, an integer of at least 2")
    for split, enc in (("train", train_enc), ("validation", val_enc)):
        if not isinstance(enc, Encoded):
            raise TypeError(f"the {split} split must be papa.encode's Encoded, got {type(enc).__name__}: encode the "
                            f"texts first (papa.encode(tokenizer, texts, labels=..., max_length=N))")  # fmt: skip
        if len(enc) == 0:
            raise ValueError(f"the {split} split is empty (0 examples): a probe needs examples to train and score")
    for split, enc in (("train", train_enc), ("validation", val_enc)):
        check_labels(enc, n_labels, split)
        if enc.token_level != (kind == "token"):
            raise ValueError(
                f"the {split} tokens have {'per-token' if enc.token_level else 'one label per example'} labels, but "
                f"the probe kind is {kind!r}: use kind={'token' if enc.token_level else 'sequence'!r} (word lists "
                f"encode per-token labels, texts one per example)"
            )
    if train_enc.max_length != val_enc.max_length:
        raise ValueError(f"the train tokens have N = {train_enc.max_length} and the validation tokens "
                         f"N = {val_enc.max_length}: encode both with one max_length")  # fmt: skip
    if train_enc.layout != val_enc.layout:
        raise ValueError(f"the train tokens are in layout {train_enc.layout!r} and the validation tokens in "
                         f"{val_enc.layout!r}: encode both with one layout")  # fmt: skip
    present = classes_present(train_enc)
    if present.size < 2:
        raise ValueError(f"the train labels hold {present.size} class{'es' if present.size != 1 else ''} "
                         f"({present.tolist()}): a probe cannot learn from them; check the labels, or a subsample "
                         f"that left one class")  # fmt: skip


def check_model_inputs(model, *splits: Encoded) -> None:
    """Fail before training when ``model`` cannot run ``splits``: a family PAPA does not support (GPT-2, T5: its
    probe would train on an encoder papa cannot patch), inputs longer than its positions, token ids beyond its
    vocabulary (tokens of another model's tokenizer: an index error inside torch otherwise), or segment ids beyond its
    segment embeddings (a BERT tokenizer beside a RoBERTa model: the same)."""
    from .constants import segment_problem, vocabulary_problem
    from .models import check_positions, check_weights_loaded, family_of

    family_of(model)
    check_weights_loaded(model)
    for enc in splits:
        check_positions(model, enc.max_length)
        ids = np.asarray(enc.input_ids)
        why = vocabulary_problem(model, int(ids.max()), int(ids.min())) if ids.size else None
        if not why and enc.token_type_ids is not None and len(enc):
            types = np.asarray(enc.token_type_ids)
            why = segment_problem(model, int(types.max()), int(types.min()))
        if why:
            raise ValueError(f"the inputs hold {why}")


def check_features(features, train_enc: Encoded, val_enc: Encoded) -> None:
    """Prepared features (`prepare_features`) must be those of the two splits given beside them: other splits'
    would train and score on their hidden states and labels, silently."""
    try:
        pair = list(features)
    except TypeError:
        pair = []
    if len(pair) != 2:
        raise TypeError(f"features must be prepare_features(...)'s (train, validation) pair, got {features!r}")
    for split, feats, enc in (("train", pair[0], train_enc), ("validation", pair[1], val_enc)):
        if isinstance(feats, LiveFeatures):  # another split of as many examples and tokens: other texts or labels
            if feats.closed:
                raise ValueError(_CLOSED.format(split=f"{split} "))
            same = feats.enc is enc or _same_examples(feats.enc, enc)
        elif isinstance(feats, FeatureCache):
            if feats.data is None:
                raise ValueError(_CLOSED.format(split=f"{split} "))
            labels = np.asarray(enc.labels) if enc.labels is not None else None
            same = len(feats) == len(enc) and feats.token_level == enc.token_level
            if same and labels is not None:
                labels = labels[labels != IGNORE] if enc.token_level else labels
                same = np.array_equal(np.asarray(feats.labels), labels)
            if same and feats.encoded is not None:  # other texts of as many examples and the same labels
                same = feats.encoded is enc or _same_examples(feats.encoded, enc)
        else:
            kind = type(feats).__name__
            raise TypeError(f"the {split} features are {'an' if kind[:1] in 'AEIOUaeiou' else 'a'} {kind}, not "
                            f"prepare_features(...)'s")  # fmt: skip
        if not same:
            raise ValueError(f"the {split} features were not prepared from the {split} split given beside them "
                             f"({len(enc)} examples): prepare them from it (prepare_features)")  # fmt: skip


def _same_examples(a: Encoded, b: Encoded) -> bool:
    """Whether two encodings hold the same examples: token ids, attention masks and labels."""
    if len(a) != len(b) or a.max_length != b.max_length or (a.labels is None) != (b.labels is None):
        return False
    return (np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.attention_mask, b.attention_mask)
            and (a.labels is None or np.array_equal(a.labels, b.labels)))  # fmt: skip


def check_seeds(seeds, default: int) -> list[int]:
    """``seeds`` (None: ``[default]``) as a list of distinct seeds (`papa.io.check_seed`), failing on a string
    (``"012"`` would be three seeds), a float, a repeat (the same run twice) or an empty list."""
    if seeds is None:
        return [check_seed(default, "cfg.seed")]
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a list of integers, got {seeds!r}")
    seeds = [check_seed(s, "each of seeds") for s in seeds]
    if not seeds:
        raise ValueError("seeds is empty: give at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds lists a seed more than once ({seeds}): each would be the same run")
    return seeds


def check_labels(enc: Encoded, n_labels: int, split: str = "train") -> None:
    """Fail before training when ``enc`` holds a label the probe's ``n_labels`` outputs cannot score
    (torch would raise an opaque index error mid-epoch)."""
    if enc.labels is None:
        raise ValueError(f"the {split} tokens have no labels: a probe needs a labeled task")
    labels = np.asarray(enc.labels)
    if labels.ndim > 1:  # a token task: -100 marks the positions not scored (sub-words, specials, padding)
        labels = labels[labels != IGNORE]
        if not labels.size:
            raise ValueError(f"the {split} split has no labeled token (every label is {IGNORE}, the mark of "
                             f"sub-words and padding): check its words and tags")  # fmt: skip
    if labels.size and labels.min() < 0:  # -1 (an unlabeled corpus), or -100 on a sequence task: scored as wrong
        raise ValueError(
            f"the {split} labels hold {labels.min()}, and class ids run from 0 ({IGNORE} marks only a token task's "
            f"sub-words and padding; a sequence task scores every example): drop the unlabeled examples, or map "
            f"their labels to classes"
        )
    if labels.size and labels.max() >= n_labels:
        raise ValueError(
            f"the {split} labels run from {labels.min()} to {labels.max()}, but the probe has n_labels={n_labels} "
            f"outputs (labels 0..{n_labels - 1}); pass the task's number of labels"
        )


def initializer_range(model) -> float:
    """The standard deviation ``model``'s config initialises its Linear layers with
    (``initializer_range``; DistilBERT and others without it: 0.02, transformers' usual value)."""
    value = getattr(model.config, "initializer_range", None)
    return 0.02 if value is None else float(value)


def init_probe(probe: nn.Module, model, init: str = "normal") -> nn.Module:
    """Initialise a fresh probe's Linear layers in place, from the global torch generator.

    ``normal``: weights from N(0, `initializer_range` of ``model``), biases 0, as the authors'
    probes started: they were submodules of the Hugging Face model, which transformers'
    ``_init_weights`` initialises that way. ``pytorch``: left as ``nn.Linear`` made them.
    Other parameters (the sequence probe's per-position weights, 1/N) are not touched.
    """
    if init not in PROBE_INITS:
        raise ValueError(f"init must be one of {', '.join(PROBE_INITS)}, got {init!r}")
    if init == "normal":
        std = initializer_range(model)
        with torch.no_grad():
            for layer in probe.modules():
                if isinstance(layer, nn.Linear):
                    layer.weight.normal_(0.0, std)
                    if layer.bias is not None:
                        layer.bias.zero_()
    return probe


def build_probe(
    kind: str, model, max_length: int, n_labels: int, dropout: float | str = 0.1, init: str = "normal"
) -> nn.Module:
    """A fresh sequence or token probe sized for ``model``, initialised by `init_probe`; ``dropout`` (the sequence
    probe's) may be ``"authors"`` (`probe_dropout`)."""
    n_layers, hidden = model_dims(model)
    if kind == "token":
        return init_probe(TokenProbe(n_layers, hidden, n_labels), model, init)
    if kind == "sequence":
        return init_probe(
            SequenceProbe(n_layers, max_length, hidden, n_labels, probe_dropout(dropout, model)), model, init
        )
    raise ValueError(f"probe kind must be 'sequence' or 'token', got {kind!r}")


def _forward(probe, x):
    return probe(*x) if isinstance(x, tuple) else probe(x)


def evaluate(probes, features, metrics, label_names=None, batch_size: int = 64,
             log_every: float = math.inf) -> list[dict[str, float]]:  # fmt: skip
    """Score each of ``probes`` on ``features`` (cached or live), reading every batch once; a progress line
    (examples done, examples/s, ETA) every ``log_every`` seconds: a live validation split (re-encoded, or the
    lambdas' patched encoder) takes minutes at paper scale."""
    for probe in probes:
        probe.eval()
    preds, golds = [[] for _ in probes], []
    n = len(features)
    progress = Progress(log_every)
    with torch.inference_mode():
        for start in range(0, n, batch_size):
            if progress.due(start):
                log.info("validation: %d/%d examples (%.1f examples/s, %s)", start, n, progress.rate(start),
                         progress.eta_text(start, n))  # fmt: skip
            idx = np.arange(start, min(n, start + batch_size))
            x, y = features.batch(idx)
            # token tasks: scored tokens regrouped per example for entity-level metrics
            counts = _token_counts(features, idx) if features.token_level else [len(idx)]
            golds += [c.numpy() for c in torch.split(y.cpu(), counts)]
            for k, probe in enumerate(probes):
                preds[k] += [c.numpy() for c in torch.split(_forward(probe, x).argmax(-1).cpu(), counts)]
    if features.token_level:
        width = max((len(g) for g in golds), default=0)
        pad = lambda rows: np.stack([np.pad(r, (0, width - len(r)), constant_values=IGNORE) for r in rows])  # noqa
        return [compute_all(metrics, pad(golds), pad(p), label_names) for p in preds]
    return [compute_all(metrics, np.concatenate(golds), np.concatenate(p), label_names) for p in preds]


def _token_counts(features, idx) -> list[int]:
    if isinstance(features, FeatureCache):
        return [int(features.offsets[i + 1] - features.offsets[i]) for i in idx]
    return [int(c) for c in (features.enc.labels[idx] != IGNORE).sum(1)]


def _rng_state(device: torch.device):
    return torch.get_rng_state(), (torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def optimizer(cfg: TrainConfig, probe: nn.Module | None, extra_params=()) -> tuple[torch.optim.AdamW, list]:
    """The optimizer of every training here (a probe's, the lambdas', trained constants', `papa.mlm.train_mlm`'s):
    AdamW over ``probe``'s trainable parameters at ``cfg.lr`` with ``cfg.weight_decay``, and the patch's
    ``extra_params`` (lambda logits, trained constants) at ``cfg.extra_lr`` (None: ``cfg.lr``) without weight
    decay. Returns it and the parameters it trains (what gradient clipping covers); a ``ValueError`` when there
    is nothing to train."""
    groups = [{"params": [p for p in probe.parameters() if p.requires_grad], "lr": cfg.lr}] if probe is not None else []
    if extra := list(extra_params):
        groups.append({"params": extra, "lr": cfg.lr if cfg.extra_lr is None else cfg.extra_lr, "weight_decay": 0.0})
    if not any(g["params"] for g in groups):
        raise ValueError("nothing to train (no probe and no patch parameters)")
    return torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay), [p for g in groups for p in g["params"]]


class _SeedRun:
    """One seed's probe in a lockstep run: its optimizer, epoch loss and own random-number
    state (dropout draws), so seeds trained side by side draw what each would draw alone."""

    def __init__(self, probe: nn.Module, cfg: TrainConfig, extra_params=(), rng_state=None):
        self.probe, self.max_grad_norm = probe, cfg.max_grad_norm
        self.device = next(probe.parameters()).device
        self.opt, self.params = optimizer(cfg, probe, extra_params)
        self.rng_state = rng_state if rng_state is not None else _rng_state(self.device)
        self.total, self.seen, self.rows = 0.0, 0, []

    @contextmanager
    def own_rng(self):
        """Run the block on this seed's random-number state, and keep where it ends."""
        cpu, cuda = self.rng_state
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, self.device)
        try:
            yield
        finally:
            self.rng_state = _rng_state(self.device)

    def step(self, x, y, loss_fn, n_examples: int) -> None:
        opt = self.opt
        loss = loss_fn(_forward(self.probe, x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        opt.step()
        self.total += loss.item() * n_examples
        self.seen += n_examples


def train_probes(
    probes,
    train,
    validation,
    cfg: TrainConfig,
    metrics,
    label_names=None,
    seeds=None,
    rng_states=None,
    extra_params=(),
    on_epoch=None,
    live: bool = False,
    runs_after: int = 0,
    log_every: float = 10.0,
) -> list[list[dict]]:
    """Train several probes side by side on the same batches (one per seed); evaluate every epoch.

    Every batch is read once (one encoder pass for live features) and each probe takes its
    step on it; the batch order comes from ``cfg.shuffle_seed`` (None = ``cfg.seed``), so it is
    the same for every probe. Each probe draws its dropout from its own random-number state
    (``rng_states[k]``, default: the current one), so a probe trained here gets exactly what it
    would get trained alone.

    Args:
        seeds: a name per probe, for logs and errors (default ``cfg.seed``).
        extra_params: trainable patch parameters (lambdas, constants), with a single probe.
        live: features need gradients (trained patch parameters), so batches run with grad.
        runs_after: trainings of this length the caller runs after this one (the seeds still to
            come), counted in the logged ETA.
        log_every: seconds between progress lines inside an epoch (examples done, examples/s, ETA):
            an epoch that re-encodes, or trains lambdas through the encoder, takes minutes to hours.
    Returns:
        Per probe, one dict per (epoch, metric): ``epoch``, ``metric``, ``score``, ``train_loss``.
    """
    seeds = list(seeds) if seeds is not None else [cfg.seed] * len(probes)
    extra_params = list(extra_params)
    if len(seeds) != len(probes) or (rng_states is not None and len(rng_states) != len(probes)):
        raise ValueError("train_probes needs one seed and one random-number state per probe")
    if len(probes) > 1 and (extra_params or live):
        raise ValueError("trained patch parameters (live=True, extra_params) train one probe at a time")
    runs = [_SeedRun(p, cfg, extra_params, None if rng_states is None else rng_states[k]) for k, p in enumerate(probes)]
    g = torch.Generator().manual_seed(cfg.seed if cfg.shuffle_seed is None else cfg.shuffle_seed)
    loss_fn = nn.CrossEntropyLoss()
    n = len(train)
    progress = Progress(log_every)  # its paused seconds: validation passes (rates are per training second)
    names = ", ".join(map(str, seeds))
    total = (1 + runs_after) * cfg.epochs * n  # this training's examples, then ``runs_after`` more

    for epoch in range(1, cfg.epochs + 1):
        for run in runs:
            run.probe.train()
            run.total, run.seen = 0.0, 0
        order = torch.randperm(n, generator=g).numpy()
        for start in range(0, n, cfg.batch_size):
            idx = order[start : start + cfg.batch_size]
            batch = None
            for run in runs:
                with run.own_rng():  # the first probe's state also drives the encoder's dropout, if on
                    if batch is None:
                        batch = train.batch(idx, grad=live)
                    run.step(*batch, loss_fn, len(idx))
            if progress.due(done := (epoch - 1) * n + start + len(idx)):
                log.info("seed %s epoch %d/%d: %d/%d examples (%.1f examples/s, %s)", names, epoch, cfg.epochs,
                         start + len(idx), n, progress.rate(done), progress.eta_text(done, total))  # fmt: skip
        for seed, run in zip(seeds, runs):
            if not math.isfinite(run.total):
                raise FloatingPointError(
                    f"seed {seed} epoch {epoch}: the training loss is not finite ({run.total}); the inputs to the "
                    f"probe contain NaN/inf (check the constant matrices) or the learning rate {cfg.lr} is too high"
                )
        t_eval = time.monotonic()
        all_scores = evaluate([run.probe for run in runs], validation, metrics, label_names, cfg.eval_batch_size,
                              log_every)  # fmt: skip
        progress.paused += time.monotonic() - t_eval
        for seed, run, scores in zip(seeds, runs, all_scores):
            loss = run.total / max(run.seen, 1)
            log.info(
                "seed %s epoch %d/%d: train loss %.4f; validation %s (%.1f examples/s, %s)",
                seed,
                epoch,
                cfg.epochs,
                loss,
                ", ".join(f"{k} {v:.4f}" for k, v in scores.items()),
                progress.rate(epoch * n),
                progress.eta_text(epoch * n, total),
            )
            run.rows += [
                {"epoch": epoch, "metric": metric, "score": score, "train_loss": loss}
                for metric, score in scores.items()
            ]
        progress.mark()  # no progress line right after the epoch's own (the validation pass reset nothing)
        if on_epoch is not None:
            on_epoch(epoch)
    return [run.rows for run in runs]


def train_probe(
    probe: nn.Module,
    train,
    validation,
    cfg: TrainConfig,
    metrics,
    label_names=None,
    extra_params=(),
    on_epoch=None,
    live: bool = False,
) -> list[dict]:
    """Train ``probe`` (and ``extra_params``, e.g. lambda logits) with AdamW; evaluate every epoch.

    Args:
        train, validation: `FeatureCache` or `LiveFeatures`.
        live: features need gradients (trained patch parameters), so batches run with grad.
    Returns:
        One dict per (epoch, metric): ``epoch``, ``metric``, ``score``, plus ``train_loss``.
    """
    return train_probes(
        [probe], train, validation, cfg, metrics, label_names, extra_params=extra_params, on_epoch=on_epoch, live=live
    )[0]


def keeps_global_rng(fn):
    """Decorator: ``fn(model, ...)`` seeds torch's global generators itself (each probe's initialisation and
    dropout come from its seed); the caller's generator states (CPU, and every CUDA device's) are given back
    when it returns or fails, so a notebook's random draws after it do not repeat the probe seed's."""

    @functools.wraps(fn)
    def call(model, *args, **kwargs):
        # torch.manual_seed reseeds every CUDA device: each one's state is kept, wherever the model is
        started = torch.cuda.is_available() and torch.cuda.is_initialized()
        cuda = list(range(torch.cuda.device_count())) if started else []
        # CUDA not started (a CPU model in a notebook on a GPU machine): torch.cuda.manual_seed only queues a seed
        # until it starts, and the probe's torch.manual_seed replaced the caller's queued one. The queue is given
        # back as it was (starting CUDA to read its states would cost its start-up, and fail in a forked worker)
        tracker = None if torch.cuda.is_initialized() else getattr(torch.cuda, "_lazy_seed_tracker", None)
        queued = dict(vars(tracker)) if tracker is not None else None
        with torch.random.fork_rng(devices=cuda):
            try:
                return fn(model, *args, **kwargs)
            finally:
                if queued is not None and not torch.cuda.is_initialized():
                    vars(tracker).update(queued)

    return call


@keeps_global_rng
def run_probe(
    model,
    train_enc: Encoded,
    val_enc: Encoded,
    kind: str,
    n_labels: int,
    metrics,
    cfg: TrainConfig,
    label_names=None,
    features=None,
    seeds=None,
    trainable=None,
    backbone_dropout: bool = False,
    batch_order: str = "per_seed",
    compile: str = "eager",
) -> list[dict]:
    """Train and evaluate a fresh probe per seed on a frozen (possibly patched) encoder.

    The one probe path: the probe lives on the model's device whatever feeds it.

    Args:
        features: ``(train, validation)`` features (`FeatureCache`/`LiveFeatures`, or
            `PreparedFeatures` from `prepare_features`); None re-runs the encoder for every batch.
        seeds: one probe per seed (default ``[cfg.seed]``); each seed's initialisation and dropout
            come from the seed.
        trainable: a callable returning a patch (context manager with ``parameters()``) applied
            around each seed's training, whose parameters train with the probe (the ``*_trained``
            constants); the encoder then runs live with gradients, one seed after the other.
        backbone_dropout: with ``features=None``, the encoder runs its training batches in train
            mode (dropout on, the authors' setting), without gradients to its weights.
        batch_order: ``per_seed`` (default): every seed is an independent run in its own batch
            order (``cfg.shuffle_seed`` if set, else the seed), as in the paper; from live
            features (strategy ``reencode``, ``features=None``) the encoder then runs every epoch
            of every seed. ``shared``: every seed trains in the first seed's order (or
            ``cfg.shuffle_seed``), side by side where the encoder does not train, so one encoder
            pass per epoch feeds every seed; the seeds then differ in initialisation and
            dropout only. Either way the scores do not depend on where `prepare_features` kept the
            features (its strategy), only on this choice; ``features=None`` feeds the encoder's
            hidden states at full precision, where every strategy holds them in ``cache.dtype``
            (float16 by default), so its scores differ from theirs in the last digits.
        compile: with ``features=None``, run the encoder through ``torch.compile`` in this mode
            (`papa.models.compiled`; ``eager``: as it is). Worth it for the trained constants'
            gradient steps on a GPU; scores agree with eager ones within seed noise, not bit for bit.
    Returns:
        One dict per (seed, epoch, metric): ``seed``, ``epoch``, ``metric``, ``score``, ``train_loss``.
        Torch's global generators are seeded inside and given back as they were (`keeps_global_rng`).
    """
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"cfg must be a papa.probe.TrainConfig (lr, batch_size, epochs, ...), got {cfg!r}")
    seeds = check_seeds(seeds, cfg.seed)
    check_splits(train_enc, val_enc, kind, n_labels)  # first: a kind that is not the data's, named as such
    metrics = check_metrics(metrics, kind, n_labels, label_names)  # before training, not after its first epoch
    check_model_inputs(model, train_enc, val_enc)
    if trainable is not None and not callable(trainable):  # a patch made once would be shared by every seed
        raise TypeError(f"trainable must be a callable that makes a new patch for each seed, e.g. lambda: "
                        f"papa.patch(model, C, trainable_constants=True), got {type(trainable).__name__}"
                        + (" (it has patched the model already: handle.remove() undoes it)"
                           if hasattr(trainable, "remove") else ""))  # fmt: skip
    if batch_order not in BATCH_ORDERS:
        raise ValueError(f"Unknown batch_order {batch_order!r}; choose from {', '.join(BATCH_ORDERS)}")
    if compile != "eager" and features is not None:
        raise ValueError("compile applies to features=None (the encoder in the loop), not to prepared features")
    if backbone_dropout and features is not None:
        raise ValueError(
            "backbone_dropout applies to features=None; prepared features take it from "
            "prepare_features(..., backbone_dropout=True)"
        )
    device = next(model.parameters()).device
    if features is not None:
        check_features(features, train_enc, val_enc)
    if features is None:
        train = LiveFeatures(model, train_enc, device=device, train_mode=backbone_dropout, compile=compile)
        val = LiveFeatures(model, val_enc, device=device, compile=compile)
    else:
        train, val = features
        train.device = val.device = device
    probes, states = [], []
    for seed in seeds:
        torch.manual_seed(seed)
        probes.append(build_probe(kind, model, train_enc.max_length, n_labels, cfg.dropout, cfg.init).to(device))
        states.append(_rng_state(device))
    if batch_order == "shared":  # every seed in the first seed's order
        cfg = replace(cfg, shuffle_seed=seeds[0] if cfg.shuffle_seed is None else cfg.shuffle_seed)
    if trainable is None and batch_order == "shared":  # side by side: one pass over the features feeds every seed
        per_seed = train_probes(probes, train, val, cfg, metrics, label_names, seeds=seeds, rng_states=states)
    elif trainable is None:  # independent runs, each in its own seed's batch order (live: re-encoded per seed)
        per_seed = [
            train_probes(
                [probe],
                train,
                val,
                replace(cfg, seed=seed),
                metrics,
                label_names,
                seeds=[seed],
                rng_states=[state],
                runs_after=len(seeds) - 1 - k,
            )[0]
            for k, (seed, probe, state) in enumerate(zip(seeds, probes, states))
        ]
    else:
        if features is not None:
            raise ValueError("trained patch parameters need the encoder in the loop: pass features=None")
        per_seed = []
        for k, (seed, probe, state) in enumerate(zip(seeds, probes, states)):
            # the patch's parameters train, not the model's weights (but those the patch hands to train)
            with trainable() as handle, frozen(model, keep=(extra := list(handle.parameters()))):
                per_seed += train_probes(
                    [probe],
                    train,
                    val,
                    replace(cfg, seed=seed),
                    metrics,
                    label_names,
                    seeds=[seed],
                    rng_states=[state],
                    extra_params=extra,
                    live=True,
                    runs_after=len(seeds) - 1 - k,
                )
    return [{"seed": seed, **row} for seed, rows in zip(seeds, per_seed) for row in rows]


@keeps_global_rng
def learn_lambdas(
    model,
    constants,
    train_enc: Encoded,
    val_enc: Encoded,
    kind: str,
    n_labels: int,
    metrics,
    cfg: TrainConfig,
    label_names=None,
    backbone_dropout: bool = False,
    compile: str = "eager",
):
    """Train one lambda per head jointly with a probe (paper Sec. 3.2), everything else frozen.

    ``backbone_dropout`` runs the encoder's training batches in train mode (the authors' setting).
    ``compile`` runs the encoder through ``torch.compile`` in that mode (`papa.models.compiled`;
    ``eager``, the default, as it is): on a GPU the launch-bound gradient steps of the base encoders
    run several times faster; lambdas agree with eager ones within seed noise, not bit for bit (compiled
    kernels round and, with ``backbone_dropout``, draw dropout differently).
    Returns ``(lambdas [layers, heads], per-epoch metric rows)``. Torch's global generators are seeded
    (``cfg.seed``) inside and given back as they were (`keeps_global_rng`).
    """
    from .constants import ConstantAttention
    from .patching import check_layout, check_length, patch

    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"cfg must be a papa.probe.TrainConfig (lr, batch_size, epochs, ...), got {cfg!r}")
    check_splits(train_enc, val_enc, kind, n_labels)  # first: a kind that is not the data's, named as such
    metrics = check_metrics(metrics, kind, n_labels, label_names)  # before training, not after its first epoch
    check_model_inputs(model, train_enc, val_enc)
    if isinstance(constants, ConstantAttention):  # before the probe is built, not at the first training batch
        check_length(constants.mean.shape[-1], train_enc.max_length)
        check_layout(constants, train_enc, val_enc)
    torch.manual_seed(cfg.seed)
    device = next(model.parameters()).device
    probe = build_probe(kind, model, train_enc.max_length, n_labels, cfg.dropout, cfg.init).to(device)
    with frozen(model), patch(model, constants, mix=True) as handle:  # the lambdas train, not the model's weights
        rows = train_probe(
            probe,
            LiveFeatures(model, train_enc, train_mode=backbone_dropout, compile=compile),
            LiveFeatures(model, val_enc, compile=compile),
            cfg,
            metrics,
            label_names,
            extra_params=handle.parameters(),
            live=True,
        )
        return handle.lambdas(), rows
