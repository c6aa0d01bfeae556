"""The pipeline's stages as plain functions (the Snakemake scripts are thin adapters).

Each function reads files, calls the library, and writes its outputs atomically, so an
interrupted job never leaves a file that looks finished. Usable without Snakemake.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from . import io
from .constants import ConstantAttention, average_attention, data_free
from .encoding import Encoded, encode
from .models import load_encoder, model_revision, model_shape, resolve_model_path, split_revision
from .patching import patch
from .probe import TrainConfig, cache_nbytes, learn_lambdas, prepare_features, run_probe
from .selection import head_order, n_dynamic, select_static

log = logging.getLogger("papa")

DATA_FREE = ("identity", "toeplitz", "zeros", "uniform")
TRAINED = ("average_trained", "toeplitz_trained")


def setup(log_path: str | None = None, threads: int | None = None, seed: int = 0) -> None:
    """Log to ``log_path`` (and stderr), set torch threads, seed everything."""
    handlers = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        handlers=handlers, force=True)
    def excepthook(kind, value, tb):  # failures land in the job's log too
        log.error("stage failed", exc_info=(kind, value, tb))

    sys.excepthook = excepthook
    if threads:
        torch.set_num_threads(int(threads))
    io.seed_everything(seed)


# ----------------------------------------------------------------------------- stage configs


@dataclass(kw_only=True)
class Stage:
    """Base of the typed stage configs: one dataclass per stage (a Snakemake rule), holding
    every input path, output path and setting the stage reads, so the stage function takes
    one argument. ``log``, ``threads`` and ``seed`` are the job's logging, torch threads and
    global seed (`setup`).

    A subclass implements ``_from_snakemake(sm) -> dict`` (its own fields, read from the
    job's ``input``, ``output``, ``params`` and ``wildcards``); `from_snakemake` adds the job's
    log and threads and sets the job up. Notebooks construct stage configs directly.
    """

    log: str | None = None
    threads: int | None = None
    seed: int = 0

    @classmethod
    def _from_snakemake(cls, sm) -> dict:
        raise NotImplementedError(f"{cls.__name__} cannot be built from a Snakemake job")

    @classmethod
    def from_snakemake(cls, sm):
        """The stage config of a running Snakemake job (``snakemake`` in a script); logging, torch
        threads and seeds are set up before it returns."""
        fields = {"log": sm.log[0] if len(sm.log) else None, "threads": sm.threads, **cls._from_snakemake(sm)}
        stage = cls(**fields)
        setup(stage.log, stage.threads, stage.seed)
        return stage


# ----------------------------------------------------------------------------- tokens


def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    name, revision = split_revision(model)
    return AutoTokenizer.from_pretrained(resolve_model_path(name), trust_remote_code=False, revision=revision)


def write_tokens(enc: Encoded, path, meta: dict) -> None:
    import pyarrow.parquet as pq

    meta = {**enc.meta, **meta, "layout": enc.layout, "max_length": enc.max_length, "n_truncated": enc.n_truncated}
    table = enc.to_arrow()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"papa": json.dumps(meta, default=str)})
    with io.atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _open_tokens(path):
    """The token file as a ``pyarrow.parquet.ParquetFile`` and its papa metadata (footer only)."""
    f = io.parquet_file(path)
    meta = json.loads((f.schema_arrow.metadata or {}).get(b"papa", b"{}"))
    if "max_length" not in meta:
        raise ValueError(f"{path} is not a papa token file (no papa metadata): write it with papa.pipeline.write_tokens")
    return f, {**meta, "n_rows": f.metadata.num_rows}


def token_meta(path) -> dict:
    """The metadata of a token file (``max_length``, ``layout``, ``n_rows``, dataset, ...), read
    from its footer alone."""
    return _open_tokens(path)[1]


def read_tokens(path) -> Encoded:
    f, meta = _open_tokens(path)
    return Encoded.from_arrow(f.read(), meta.get("layout", "papa"), int(meta["max_length"]), meta)


def stream_tokens(path, batch_size: int, rows=None, read_rows: int = 1024):
    """Yield `Encoded` batches of ``batch_size`` examples from a token file without reading it whole.

    Args:
        rows: optional indices of the examples to keep (a subsample; they come in file order);
            None = all.
        read_rows: examples read from the file at a time.
    Memory stays at O(read_rows + batch_size) examples whatever the corpus size.
    """
    f, meta = _open_tokens(path)
    N, layout = int(meta["max_length"]), meta.get("layout", "papa")
    keep = None
    if rows is not None:
        keep = np.zeros(meta["n_rows"], dtype=bool)
        keep[np.asarray(rows, dtype=np.int64)] = True
    start, rest = 0, None  # rest: examples read but not yet yielded (fewer than batch_size)
    for rb in f.iter_batches(batch_size=max(int(read_rows), int(batch_size))):
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


def tokenize_split(model: str, data_dir, split: str, max_length: int, layout: str, out,
                   encoding: dict | None = None) -> Encoded:
    """Tokenize one split of a prepared dataset (``papa.data.save_task`` folder).

    ``encoding``: options of `papa.encode` (``single_cap``, ``pair_segments``; the config's
    ``encoding`` section); none = the paper's App. A behaviour.
    """
    from .data import read_task

    task = read_task(data_dir)
    if split not in task.splits:
        raise ValueError(f"Dataset {task.name!r} has no split {split!r}; it has {sorted(task.splits)}")
    df = task.splits[split]
    if len(df) == 0:
        raise ValueError(f"Split {split!r} of dataset {task.name!r} is empty: check its source or max_* settings")
    tok = load_tokenizer(model)
    opts = dict(encoding or {})
    if task.kind == "token":
        enc = encode(tok, [list(t) for t in df["tokens"]], max_length=max_length, layout=layout,
                     labels=[list(t) for t in df["tags"]], **opts)
    else:
        pairs = None
        if "text_b" in df and df["text_b"].notna().any():
            pairs = df["text_b"].fillna("").tolist()
        labels = df["label"].tolist() if "label" in df and (df["label"] >= 0).any() else None
        enc = encode(tok, df["text"].tolist(), pairs=pairs, max_length=max_length, layout=layout, labels=labels,
                     **opts)
    log.info("tokenized %s/%s: %d examples at N=%d, %d truncated (%.2f%%)", task.name, split, len(enc), max_length,
             enc.n_truncated, 100 * enc.n_truncated / len(enc))
    write_tokens(enc, out, {"model": model, "dataset": task.name, "split": split, "kind": task.kind,
                            "label_names": task.label_names})
    return enc


# ----------------------------------------------------------------------------- constants


def make_constants(model: str, kind: str, tokens_path, out, batch_size: int = 32,
                   max_examples: int | None = None, corpus: str = "") -> ConstantAttention:
    """Average (or effective-average) attention over a tokenized corpus, or build a data-free kind.

    The corpus is streamed from ``tokens_path`` batch by batch, so peak memory does not grow
    with its size. ``max_examples`` averages over a seeded random subset (seed 0), in file order.
    """
    base_kind = kind.replace("_trained", "")
    meta = token_meta(tokens_path)
    n_rows, N = int(meta["n_rows"]), int(meta["max_length"])
    if base_kind in DATA_FREE:
        from transformers import AutoConfig

        name, revision = split_revision(model)
        cfg = AutoConfig.from_pretrained(resolve_model_path(name), revision=revision)
        L = int(getattr(cfg, "num_hidden_layers", getattr(cfg, "n_layers", 0)))
        C = data_free(base_kind, L, int(cfg.num_attention_heads), N, metadata={"model": model, "corpus": None})
    else:
        if n_rows == 0:
            raise ValueError(f"{tokens_path} holds no examples: the averaging corpus is empty")
        m, _ = load_encoder(model)
        rows = None
        if max_examples and n_rows > max_examples:
            rows = np.sort(np.random.default_rng(0).permutation(n_rows)[:max_examples])
        total = n_rows if rows is None else len(rows)
        batches = (b.model_inputs() for b in stream_tokens(tokens_path, batch_size, rows=rows))
        C = average_attention(m, batches, kind=base_kind, total=total,
                              metadata={"model": model, "corpus": corpus, "layout": meta.get("layout", "papa")})
    C.metadata.update({"environment": io.environment(), "tokens": str(tokens_path), "requested_kind": kind})
    if base_kind not in DATA_FREE:
        C.metadata["model_revision"] = model_revision(m)  # the hub commit the weights came from
    C.save(out)
    return C


# ----------------------------------------------------------------------------- lambda


def task_info(tokens: Encoded, task_cfg: dict) -> dict:
    names = tokens.meta.get("label_names") or []
    if not names:
        raise ValueError(f"Task tokens have no label names (dataset {tokens.meta.get('dataset')!r} is unlabeled)")
    return {"kind": "token" if tokens.token_level else "sequence", "n_labels": len(names), "label_names": names,
            "metrics": list(task_cfg["metrics"])}


def _train_cfg(hp: dict, seed: int) -> TrainConfig:
    """The trainer settings of a ``probe``/``lambda`` hparams block (``max_grad_norm``: the
    authors clipped at 1.0; null = no clipping)."""
    clip = hp.get("max_grad_norm")
    return TrainConfig(lr=float(hp["lr"]), batch_size=int(hp["batch_size"]), epochs=int(hp["epochs"]), seed=seed,
                       weight_decay=float(hp.get("weight_decay", 0.0)), dropout=float(hp.get("dropout", 0.1)),
                       extra_lr=hp.get("extra_lr"), max_grad_norm=None if clip is None else float(clip))


def lambda_frame(lam: torch.Tensor) -> pd.DataFrame:
    """(layer, head, lambda, rank) per head of lambdas [layers, heads]; rank 0 is replaced first."""
    L, H = lam.shape
    rank = torch.empty(L * H, dtype=torch.long)
    rank[head_order("lambda", (L, H), lam)] = torch.arange(L * H)
    return pd.DataFrame({"layer": np.repeat(np.arange(L), H), "head": np.tile(np.arange(H), L),
                         "lambda": lam.flatten().double().numpy(), "rank": rank.numpy()})


def run_lambda(model: str, constants_path, train_tokens, val_tokens, task_cfg: dict, hp: dict, out_lambdas,
               out_metrics, labels: dict) -> pd.DataFrame:
    """Learn one lambda per head with a probe; write (layer, head, lambda, rank) and per-epoch metrics."""
    m, _ = load_encoder(model)
    C = ConstantAttention.load(constants_path)
    train, val = read_tokens(train_tokens), read_tokens(val_tokens)
    max_train = hp.get("max_train")
    if max_train and len(train) > max_train:
        train = train.subset(np.sort(np.random.default_rng(hp.get("seed", 0)).permutation(len(train))[:max_train]))
    info = task_info(train, task_cfg)
    lam, rows = learn_lambdas(m, C, train, val, info["kind"], info["n_labels"], info["metrics"],
                              _train_cfg(hp, int(hp.get("seed", 0))), info["label_names"],
                              backbone_dropout=bool(hp.get("backbone_dropout", False)))
    df = lambda_frame(lam)
    for k, v in labels.items():
        df.insert(0, k, v)
    df["model_revision"] = model_revision(m)  # the hub commit the weights came from (None: local)
    io.write_parquet(df, out_lambdas)
    mdf = pd.DataFrame(rows)
    for k, v in labels.items():
        mdf.insert(0, k, v)
    io.write_parquet(mdf, out_metrics)
    return df


# ----------------------------------------------------------------------------- probe


def static_mask(model, lambdas_path, selection: str, fraction: float, seed: int = 0) -> torch.Tensor:
    L, H = model_shape(model)
    lam = None
    keep = n_dynamic(fraction, L * H)
    if keep in (0, L * H):  # every order gives the same mask
        return torch.full((L, H), keep == 0, dtype=torch.bool)
    if selection in ("lambda", "reversed"):
        if lambdas_path is None:
            raise ValueError(f"Head order {selection!r} needs learned lambdas")
        df = io.read_parquet(lambdas_path).sort_values(["layer", "head"])
        lam = torch.tensor(df["lambda"].to_numpy()).view(L, H)
    return select_static(head_order(selection, (L, H), lam, seed=seed), fraction, (L, H))


def run_probes(model: str, constants_path, lambdas_path, selection: str, fraction: float, seeds: list[int],
               train_tokens, val_tokens, task_cfg: dict, hp: dict, cache: dict, outs: list, labels: dict,
               trained_constants: bool = False) -> list[pd.DataFrame]:
    """Train a fresh probe per seed with (1 - fraction) of the heads static; one Parquet per seed.

    The frozen encoder runs once when its hidden states are cached (``cache.strategy`` memory or
    disk; each seed then trains in its own batch order) or once per epoch with every seed trained
    side by side on the same batches (``reencode``, also forced by ``hp["backbone_dropout"]``;
    `papa.probe.run_probe`); trained constants need the encoder in the loop, seed after seed
    (strategy ``live``). Each Parquet records ``cache_strategy`` and ``cache_mb``
    (the size of the train + validation hidden states, whether or not they were cached).
    """
    if len(outs) != len(seeds):
        raise ValueError("one output per seed")
    m, _ = load_encoder(model)
    C = ConstantAttention.load(constants_path)
    train, val = read_tokens(train_tokens), read_tokens(val_tokens)
    info = task_info(train, task_cfg)
    L, H = model_shape(m)
    static = static_mask(m, lambdas_path, selection, fraction, seed=int(hp.get("order_seed", 0)))
    n_dyn = n_dynamic(fraction, L * H)
    log.info("%s: %d of %d heads input-dependent (fraction %g, order %s)", labels.get("task"), n_dyn, L * H,
             fraction, selection)
    cfg = _train_cfg(hp, int(seeds[0]))
    dropout = bool(hp.get("backbone_dropout", False))
    dtype = cache.get("dtype", "float16")
    args = (m, train, val, info["kind"], info["n_labels"], info["metrics"], cfg, info["label_names"])
    t0 = time.monotonic()
    if trained_constants:
        strategy, nbytes = "live", cache_nbytes(m, train, dtype) + cache_nbytes(m, val, dtype)
        log.info("trained constants: the encoder runs with gradients for every batch of every seed")
        rows = run_probe(*args, seeds=seeds, backbone_dropout=dropout,
                         trainable=lambda: patch(m, C, static=static, trainable_constants=True))
    else:
        with patch(m, C, static=static), prepare_features(
                m, train, val, strategy=cache.get("strategy", "auto"), dtype=dtype,
                batch_size=int(cache.get("batch_size", 64)), budget_mb=cache.get("budget_mb"),
                disk_budget_mb=cache.get("disk_budget_mb"), scratch=cache.get("scratch"),
                backbone_dropout=dropout) as feats:
            log.info("features ready (%s) in %.1f s; training %d seeds", feats.strategy, time.monotonic() - t0,
                     len(seeds))
            rows = run_probe(*args, features=feats, seeds=seeds)
            strategy, nbytes = feats.strategy, feats.nbytes
    log.info("probes done in %.1f s", time.monotonic() - t0)
    df = pd.DataFrame(rows)
    df["cache_strategy"], df["cache_mb"] = strategy, nbytes / 2**20
    df["model_revision"] = model_revision(m)  # the hub commit the weights came from (None: local)
    return [_write_rows(df[df.seed == seed].drop(columns="seed"), out, labels, fraction, n_dyn, seed)
            for seed, out in zip(seeds, outs)]


def _write_rows(rows, out, labels, fraction, n_dyn, seed) -> pd.DataFrame:
    df = pd.DataFrame(rows).reset_index(drop=True)
    df.insert(0, "seed", seed)
    df.insert(0, "n_dynamic", n_dyn)
    df.insert(0, "fraction_dynamic", float(fraction))
    for k in reversed(["model", "task", "constants", "selection"]):
        df.insert(0, k, labels[k])
    io.write_parquet(df, out)
    return df


# ----------------------------------------------------------------------------- masked LM (Sec. 5.5)


def run_mlm(model: str, constants_path, train_tokens, val_tokens, hp: dict, fractions, out_scores, out_lambdas,
            labels: dict) -> pd.DataFrame:
    """Paper Sec. 5.5 / Fig. 6a: negative log-perplexity per fraction of input-dependent heads on
    held-out text, heads ranked by lambdas learned with the masked-LM loss.

    ``hp`` is the ``analyses.mlm`` block: ``head`` ``probe`` (default, the paper's procedure: the
    encoder is loaded without a head and a fresh `papa.mlm.MLMProbe` is trained per fraction, so
    any encoder works) or ``pretrained`` (the checkpoint's frozen MLM head; fails for a checkpoint
    without one); ``lr``, ``batch_size``, ``epochs`` of the probe (default: Table 3's MLM row);
    ``lambda``: overrides for the lambda stage (``lr``, ``extra_lr`` of the lambdas, ...);
    ``mask_prob``, ``max_train``, ``max_eval``, ``seed``.
    """
    from .mlm import MLM_HEADS, learn_mlm_lambdas, mlm_curve
    from .probe import PAPER_HPARAMS

    hp = {**{k: v for k, v in PAPER_HPARAMS["mlm"].items() if k != "max_length"}, **hp}
    head = hp.get("head", "probe")
    if head not in MLM_HEADS:
        raise ValueError(f"analyses.mlm.head must be one of {', '.join(MLM_HEADS)}; got {head!r}")
    m, tok = load_encoder(model, task_head=None if head == "probe" else "mlm")
    if tok.mask_token_id is None:
        raise ValueError(f"the tokenizer of {model!r} has no mask token: it cannot be scored as a masked LM")
    C = ConstantAttention.load(constants_path)
    train, val = read_tokens(train_tokens), read_tokens(val_tokens)
    seed = int(hp.get("seed", 0))
    rng = np.random.default_rng(seed)
    if hp.get("max_train") and len(train) > hp["max_train"]:
        train = train.subset(np.sort(rng.permutation(len(train))[: hp["max_train"]]))
    if hp.get("max_eval") and len(val) > hp["max_eval"]:
        val = val.subset(np.sort(rng.permutation(len(val))[: hp["max_eval"]]))
    if len(train) == 0 or len(val) == 0:
        raise ValueError(f"MLM analysis: empty split (train {len(train)}, validation {len(val)} examples)")
    special = set(tok.all_special_ids)
    mask_prob = float(hp.get("mask_prob", 0.15))
    cfg = _train_cfg(hp, seed)
    lambda_cfg = _train_cfg({**hp, **(hp.get("lambda") or {})}, seed)
    log.info("MLM (head %s): lambdas %d epochs, then %d fractions x %s on %d train / %d validation examples", head,
             lambda_cfg.epochs, len(fractions), f"{cfg.epochs} epochs" if head == "probe" else "scoring", len(train),
             len(val))
    lam, _ = learn_mlm_lambdas(m, C, train, tok.mask_token_id, special, lambda_cfg, mask_prob, head)
    ldf = lambda_frame(lam)
    rows = mlm_curve(m, C, lam, val, fractions, tok.mask_token_id, special, cfg, mask_prob, head, train=train)
    df = pd.DataFrame(rows)
    df.insert(1, "n_eval", len(val))
    for k, v in reversed(list(labels.items())):
        ldf.insert(0, k, v)
        df.insert(0, k, v)
    io.write_parquet(ldf, out_lambdas)
    io.write_parquet(df, out_scores)
    return df
