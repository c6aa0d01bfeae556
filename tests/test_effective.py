"""Effective attention on every route, pattern statistics of signed matrices, and the
authors' encoding behaviour as options (issue 13)."""

import logging
import math

import numpy as np
import pytest
import torch

import papa
from papa.models import attention_modules
from papa.patterns import head_patterns

from .conftest import tiny_model

DROPOUT_FAMILIES = ["deberta", "deberta-v2", "mpnet"]
REGISTRY_FAMILIES = ["bert", "albert"]  # the attention-function route (ALBERT: one module, shared)
HEAD_DIM = 8  # tiny models: hidden 32, 4 heads


# ----------------------------------------------------------------------------- effective attention


def _batch(family, lengths, n, seed=0):
    """Right-padded random inputs with ``lengths`` real tokens (plus segment ids for DeBERTa)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 120, (len(lengths), n), generator=g)
    mask = (torch.arange(n)[None, :] < torch.as_tensor(lengths)[:, None]).long()
    ids = ids * mask + (1 if family == "mpnet" else 0) * (1 - mask)  # the pad id where masked
    batch = {"input_ids": ids, "attention_mask": mask}
    if family.startswith("deberta"):
        batch["token_type_ids"] = torch.zeros_like(ids)
    return batch


def _model(family):
    """A tiny random model; DeBERTa v1's ``v_bias`` (initialised at 0) made non-zero so it counts."""
    model = tiny_model(family)
    if family == "deberta":
        g = torch.Generator().manual_seed(1)
        for mod in attention_modules(model):
            mod.v_bias.copy_(torch.randn(mod.v_bias.shape, generator=g))
    return model


def _values(family, mod, hidden):
    """Per-head values [B, H, N, d] of one attention module, straight from its weights."""
    B, N, _ = hidden.shape
    H = mod.num_attention_heads
    if family == "deberta":  # in_proj holds, per head, the rows of q, k and v in turn
        rows = mod.in_proj.weight.chunk(3 * H, dim=0)
        w_v = torch.cat([rows[3 * h + 2] for h in range(H)], dim=0)
        v = hidden @ w_v.t() + mod.v_bias
    elif family == "deberta-v2":
        v = hidden @ mod.value_proj.weight.t() + mod.value_proj.bias
    elif family in REGISTRY_FAMILIES:  # BertSelfAttention, AlbertAttention: a value projection per layer
        v = hidden @ mod.value.weight.t() + mod.value.bias
    else:
        v = hidden @ mod.v.weight.t() + mod.v.bias
    return v.view(B, N, H, -1).transpose(1, 2)


def _naive_average(model, family, batch, effective):
    """Masked mean over examples of eager attention (effective: one example at a time)."""
    with torch.no_grad():
        out = model(**batch, output_attentions=True, output_hidden_states=True)
    valid = batch["attention_mask"].bool()
    pair = (valid[:, :, None] & valid[:, None, :]).double()  # [B, N, N]
    sums = []
    mods = attention_modules(model)
    mods = mods * len(out.attentions) if len(mods) == 1 else mods  # ALBERT: one module for every layer
    for layer, mod in enumerate(mods):
        A = out.attentions[layer].double()
        if effective:
            V = _values(family, mod, out.hidden_states[layer])
            A = torch.cat(
                [
                    papa.effective_attention(A[e : e + 1], V[e : e + 1], valid=valid[e : e + 1])
                    for e in range(A.shape[0])
                ]
            ).double()
        sums.append((A * pair[:, None]).sum(0))
    count = pair.sum(0)
    return torch.where(count > 0, torch.stack(sums) / count.clamp_min(1), torch.zeros((), dtype=torch.float64))


@pytest.mark.parametrize("family", DROPOUT_FAMILIES)
def test_effective_average_on_the_dropout_route_matches_a_naive_reference(family):
    model = _model(family)
    batch = _batch(family, [16, 11, 8, 5], 16)  # N = 16 > d' = 8: effective differs from raw
    eff = papa.average_attention(model, [batch], kind="effective")
    ref = _naive_average(model, family, batch, effective=True)
    assert eff.mean.shape == ref.shape
    assert torch.allclose(eff.mean.double(), ref, atol=1e-5)
    raw = papa.average_attention(model, [batch])
    assert torch.allclose(raw.mean.double(), _naive_average(model, family, batch, effective=False), atol=1e-5)
    assert (eff.mean - raw.mean).abs().max() > 1e-3
    # recording leaves no hook behind
    assert all(not m._forward_hooks for m in model.modules())


@pytest.mark.parametrize("family", REGISTRY_FAMILIES)
def test_effective_average_on_the_registry_route_matches_a_naive_reference(family):
    """The registry route records each head's own values: effective attention averaged through papa equals
    A U_r U_r^T computed from eager attention and the value projection's weights, head by head."""
    model = _model(family)
    batch = _batch(family, [16, 11, 8, 5], 16)  # N = 16 > d' = 8: effective differs from raw
    eff = papa.average_attention(model, [batch], kind="effective")
    model.set_attn_implementation("eager")  # the reference reads eager attention maps
    try:
        ref = _naive_average(model, family, batch, effective=True)
    finally:
        model.set_attn_implementation("sdpa")
    assert eff.mean.shape == ref.shape
    assert torch.allclose(eff.mean.double(), ref, atol=1e-5)
    assert (eff.mean - papa.average_attention(model, [batch]).mean).abs().max() > 1e-3


@pytest.mark.parametrize("family", DROPOUT_FAMILIES)
def test_effective_average_equals_raw_at_n_le_head_dim(family):
    model = _model(family)
    batch = _batch(family, [8, 6, 3], HEAD_DIM)
    eff = papa.average_attention(model, [batch], kind="effective")
    raw = papa.average_attention(model, [batch])
    assert torch.allclose(eff.mean, raw.mean, atol=1e-5)
    assert eff.metadata["n_examples_at_most_head_dim"] == 3 and eff.metadata["head_dim"] == HEAD_DIM


@pytest.mark.parametrize("family", ["bert", "deberta-v2"])
def test_effective_average_counts_examples_at_most_head_dim(family, caplog):
    model = tiny_model(family)
    batches = [_batch(family, [16, 11, 8], 16, seed=0), _batch(family, [5, 9], 16, seed=1)]
    with caplog.at_level(logging.INFO, logger="papa.constants"):
        eff = papa.average_attention(model, batches, kind="effective")
    assert eff.metadata["n_examples"] == 5
    assert eff.metadata["n_examples_at_most_head_dim"] == 2 and eff.metadata["head_dim"] == HEAD_DIM
    assert any("2 of 5 examples (40.0%)" in r.getMessage() for r in caplog.records)
    raw = papa.average_attention(model, batches)
    assert "n_examples_at_most_head_dim" not in raw.metadata


def test_effective_average_without_a_mask_takes_every_token_as_real():
    """Batches without an ``attention_mask`` (a tokenizer called on texts of one length): every one of the N
    tokens is real, so the matrices are those of an all-ones mask, and an example is at most d' long exactly when N
    is (mutation testing: counting no real token there, every example "at most d'", passed every test)."""
    model = tiny_model("bert")
    for n, short in ((2 * HEAD_DIM, 0), (HEAD_DIM, 3)):
        ids = _batch("bert", [n] * 3, n)["input_ids"]
        bare = papa.average_attention(model, [{"input_ids": ids}], kind="effective")
        ones = papa.average_attention(model, [{"input_ids": ids, "attention_mask": torch.ones_like(ids)}],
                                      kind="effective")  # fmt: skip
        assert bare.metadata["n_examples_at_most_head_dim"] == short, n
        assert ones.metadata["n_examples_at_most_head_dim"] == short, n
        assert torch.equal(bare.mean, ones.mean) and torch.equal(bare.count, ones.count), n


@pytest.mark.parametrize("family", REGISTRY_FAMILIES + DROPOUT_FAMILIES)
@pytest.mark.parametrize("mode", ["static", "mix"])
def test_effective_constants_from_one_input_reproduce_it(family, mode, tmp_path):
    """Effective attention of one input applied to that input gives its hidden states back (A_eff V = A V),
    with more real tokens than the head dimension, padding and every route: rows are scaled by the raw
    average's mass on the valid keys (the effective rows' own L1 mass inflated every head's output).
    ``norm`` is the raw average, and survives a save and load."""
    model = _model(family)
    L, H = papa.model_shape(model)
    batch = _batch(family, [13], 16)  # 13 real tokens > d' = 8, 3 pad positions
    eff = papa.average_attention(model, [batch], kind="effective")
    valid = batch["attention_mask"][0].bool()
    assert torch.equal(eff.norm, papa.average_attention(model, [batch]).mean)
    assert (eff.mean - eff.norm).abs().max() > 1e-3  # effective attention is not the raw attention here
    l1 = eff.mean[..., valid, :][..., valid].abs().sum(-1)  # rows' L1 mass on the valid keys, below 1
    eff.save(tmp_path / "e.safetensors")
    eff = papa.ConstantAttention.load(tmp_path / "e.safetensors")
    with torch.no_grad():
        ref = model(**batch).last_hidden_state
        if mode == "static":
            with papa.patch(model, eff, static=torch.ones(L, H, dtype=torch.bool)):
                out = model(**batch).last_hidden_state
        else:  # lambda -> 0: every head uses its constant through the mix
            with papa.patch(model, eff, mix=True) as handle:
                handle.set_lambdas(torch.zeros(L, H))
                out = model(**batch).last_hidden_state
    assert (out[0, valid] - ref[0, valid]).abs().max() < 1e-5
    # the matrices alone (a plain tensor: L1 rows) give other outputs, where rows' L1 mass is well below 1
    # (not in the tiny DeBERTa v1, whose effective rows keep 0.9998 of it)
    if l1.min() < 0.99:
        with torch.no_grad(), papa.patch(model, eff.mean, static=torch.ones(L, H, dtype=torch.bool)):
            assert (model(**batch).last_hidden_state[0, valid] - ref[0, valid]).abs().max() > 1e-4
    else:
        assert family == "deberta"


@pytest.mark.parametrize("family", REGISTRY_FAMILIES + DROPOUT_FAMILIES)
@pytest.mark.parametrize("kind", ["average", "effective"])
def test_some_heads_static_equal_the_mix_at_lambdas_one_and_zero(family, kind):
    """Some heads static (the sweep's partial fractions) on inputs of two lengths, with non-zero biases: the
    static route (BERT: the static heads' queries and keys pruned) gives what the mix gives with lambda 1 on the
    input-dependent heads and 0 on the static ones, through either mix: each static head takes its own
    constant and, for effective constants, its own ``norm``, which is the raw average over the same examples."""
    model = _model(family)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():  # the tiny models' biases start at 0: a bias sliced as another head's would not show
        for mod in model.modules():
            if isinstance(mod, torch.nn.Linear) and mod.bias is not None:
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
    L, H = papa.model_shape(model)
    batch = _batch(family, [13, 6], 16)
    C = papa.average_attention(model, [batch], kind=kind)
    if kind == "effective":
        torch.testing.assert_close(C.norm, papa.average_attention(model, [batch]).mean, rtol=0, atol=1e-6)
    static = torch.zeros(L, H, dtype=torch.bool)
    static[:, 0] = True
    static[-1, 2] = True
    valid = batch["attention_mask"].bool()
    with torch.no_grad():
        with papa.patch(model, C, static=static):
            out = model(**batch).last_hidden_state[valid]
        with papa.patch(model, C, static=static, mix=True) as handle:
            handle.set_lambdas(torch.ones(L, H))
            mixed_dynamic = model(**batch).last_hidden_state[valid]
        with papa.patch(model, C, mix=True) as handle:
            handle.set_lambdas((~static).float())
            mixed_all = model(**batch).last_hidden_state[valid]
        original = model(**batch).last_hidden_state[valid]
    assert (out - original).abs().max() > 1e-4  # the static heads change the output (10x the tolerance below)
    torch.testing.assert_close(mixed_dynamic, out, rtol=0, atol=1e-5)
    torch.testing.assert_close(mixed_all, out, rtol=0, atol=1e-5)


def test_raw_averages_carry_no_norm(tmp_path):
    model = _model("bert")
    raw = papa.average_attention(model, [_batch("bert", [13, 6], 16)])
    assert raw.norm is None
    raw.save(tmp_path / "r.safetensors")
    assert papa.ConstantAttention.load(tmp_path / "r.safetensors").norm is None


# ----------------------------------------------------------------------------- pattern statistics


def _old_head_patterns(mean, count, band=1):
    """The statistics before signed rows were handled (rows / signed row sum), for non-negative input."""
    C, cnt = mean.double(), count.double()
    L, H, N, _ = C.shape
    valid = cnt > 0
    row_w = torch.diagonal(cnt).clone()
    rows = C * valid
    rows = rows / rows.sum(-1, keepdim=True).clamp_min(1e-300)
    use = (row_w > 0) & (rows.sum(-1) > 0).all(0).all(0)
    w = torch.where(use, row_w, torch.zeros_like(row_w))
    w = w / w.sum()
    i = torch.arange(N)
    band_mask = ((i[:, None] - i[None, :]).abs() <= band) & valid
    n_valid = valid.sum(-1).clamp_min(1).double()
    ent = -(rows * rows.clamp_min(1e-300).log()).sum(-1)
    tv = 0.5 * (rows - valid / n_valid[:, None]).abs().sum(-1)
    avg = lambda x: (x * w).sum(-1).flatten().numpy()  # noqa: E731
    return {
        "diag_mass": avg((rows * band_mask).sum(-1)),
        "cls_mass": avg(rows[..., 0]),
        "sep_mass": avg(rows[..., N - 1]),
        "entropy": avg(ent),
        "entropy_norm": avg(ent / n_valid.log().clamp_min(1e-12)),
        "dist_uniform": avg(tv),
    }


def _padded_count(n, n_real):
    count = torch.zeros(n, n)
    count[:n_real, :n_real] = 3
    count[:n_real, n - 1] = count[n - 1, :n_real] = count[n - 1, n - 1] = 3  # the final separator
    return count


@pytest.mark.slow  # two BPE tokenizers trained on the wiki corpus: `make test`, not the fast tier
def test_separator_positions_follow_the_encoding(bert_tok, tmp_path):
    """RoBERTa's pair block </s></s> at N/2 and N/2 + 1 and the final </s> at N-1 count, BERT's [SEP] at N/2 and
    N-1, DeBERTa's (v1) too: it was pretrained on one middle [SEP], which transformers 5's tokenizer doubles;
    single sentences: N-1; the standard layout fixes no position. Each equals where `encode` put them, and
    nowhere else does a separator sit."""
    import transformers as tf

    from papa.encoding import separator_positions
    from papa.rehearsal import build_tokenizer

    roberta = build_tokenizer("roberta", cache_dir=tmp_path)
    build_tokenizer("deberta", cache_dir=tmp_path).save_pretrained(tmp_path / "deberta")
    deberta = tf.AutoTokenizer.from_pretrained(tmp_path / "deberta")  # as the workflow loads it
    assert separator_positions(roberta, 16, pair=True) == [8, 9, 15]
    assert separator_positions(bert_tok, 16, pair=True) == separator_positions(deberta, 16, pair=True) == [8, 15]
    assert separator_positions(roberta, 16, pair=False) == separator_positions(bert_tok, 16, pair=False) == [15]
    assert separator_positions(deberta, 16, pair=False) == [15]
    assert separator_positions(bert_tok, 16, pair=True, layout="standard") == []
    for tok in (roberta, bert_tok, deberta):
        for layout in ("papa", "standard"):
            enc = papa.encode(tok, ["a fine film", "no"], pairs=["it was", "bad"], max_length=16, layout=layout)
            sep = tok.sep_token_id
            if layout == "papa":
                held = [p for p in range(16) if (enc.input_ids[:, p] == sep).all()]
                assert held == separator_positions(tok, 16, pair=True), type(tok).__name__
            # as many separators in a row as the template has: RoBERTa 3, BERT and DeBERTa 2
            assert (enc.input_ids == sep).sum(1).tolist() == [3 if tok is roberta else 2] * 2


def test_pattern_statistics_of_raw_matrices_are_unchanged():
    g = torch.Generator().manual_seed(0)
    N = 10
    mean = torch.softmax(torch.randn(2, 3, N, N, generator=g), -1)
    count = _padded_count(N, 6)
    df = head_patterns(mean, count, band=1)
    for col, ref in _old_head_patterns(mean, count, band=1).items():
        np.testing.assert_allclose(df[col].to_numpy(), ref, rtol=1e-12, atol=1e-15, err_msg=col)
    assert (df.neg_mass == 0).all()


def test_pattern_statistics_of_signed_matrices_are_bounded():
    g = torch.Generator().manual_seed(1)
    N, n_real = 10, 6
    mean = torch.randn(2, 3, N, N, generator=g) * 0.3 + 0.05  # signed rows, some sums near 0
    count = _padded_count(N, n_real)
    df = head_patterns(mean, count, band=1)
    n_valid = n_real + 1
    assert df.entropy.between(0, math.log(n_valid) + 1e-12).all()
    assert df.entropy_norm.between(0, 1 + 1e-12).all()
    assert df.dist_uniform.between(0, 1).all()
    for col in ("diag_mass", "cls_mass", "sep_mass"):
        assert df[col].between(0, 1).all()
    assert df.neg_mass.between(0, 1).all() and (df.neg_mass > 0.1).all()


def test_pattern_statistics_of_a_signed_row_by_hand():
    mean = torch.tensor([[0.5, -0.25, 0.25], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])[None, None]
    count = torch.zeros(3, 3)
    count[0] = 1  # only query 0 occurred (and every key with it)
    df = head_patterns(mean, count, band=0)
    p = np.array([0.5, 0.25, 0.25])  # |row| / sum |row|
    assert df.neg_mass.item() == pytest.approx(0.25)
    assert df.entropy.item() == pytest.approx(-(p * np.log(p)).sum())
    assert df.diag_mass.item() == pytest.approx(0.5) and df.cls_mass.item() == pytest.approx(0.5)
    assert df.sep_mass.item() == pytest.approx(0.25)
    assert df.dist_uniform.item() == pytest.approx(0.5 * np.abs(p - 1 / 3).sum())


# ----------------------------------------------------------------------------- encoding options


@pytest.fixture(scope="module")
def bert_tok():
    from papa.pipeline import load_tokenizer

    return load_tokenizer("minilm")


def _authors_layout(tok, texts, pairs, N):
    """The authors' run_papa_glue.py ``add_preprocess_func``, transcribed: tokenize with the
    tokenizer's own template and truncation, then move the tokens; token_type_ids stay."""
    args = (texts,) if pairs is None else (texts, pairs)
    result = tok(*args, padding="max_length", max_length=N, truncation=True)
    new_ids = [[tok.pad_token_id] * N for _ in texts]
    new_mask = [[0] * N for _ in texts]
    for i, cur in enumerate(result["input_ids"]):
        first_sep = cur.index(tok.sep_token_id)
        last_sep = len(cur) - list(reversed(cur)).index(tok.sep_token_id) - 1
        for j in range(min(first_sep, N // 2)):
            new_ids[i][j], new_mask[i][j] = cur[j], 1
        for j in range(first_sep, last_sep):
            if N // 2 + j - first_sep == N - 1:
                break
            new_ids[i][N // 2 + j - first_sep], new_mask[i][N // 2 + j - first_sep] = cur[j], 1
        new_ids[i][-1], new_mask[i][-1] = cur[last_sep], 1
    return np.array(new_ids), np.array(new_mask), np.array(result["token_type_ids"])


LONG = "the quick brown fox jumps over the lazy dog again and again until night falls"


def test_single_cap_authors_matches_the_authors_code(bert_tok):
    texts = [LONG, "short one", "a sentence of exactly enough words to pass"]
    N = 16
    paper = papa.encode(bert_tok, texts, max_length=N)
    authors = papa.encode(bert_tok, texts, max_length=N, single_cap="authors")
    ids, mask, types = _authors_layout(bert_tok, texts, None, N)
    np.testing.assert_array_equal(authors.input_ids, ids)
    np.testing.assert_array_equal(authors.attention_mask, mask)
    assert authors.attention_mask[0].sum() == N // 2 + 1  # [CLS] + N/2 - 1 word pieces + [SEP]
    assert paper.attention_mask[0].sum() == N  # the paper fills the whole row
    np.testing.assert_array_equal(paper.input_ids[1], authors.input_ids[1])  # short: no difference
    assert authors.n_truncated == 2 and paper.n_truncated == 1
    assert authors.meta["single_cap"] == "authors"


def test_single_cap_authors_leaves_token_level_inputs_alone(bert_tok):
    words = [LONG.split()]
    labels = [list(range(len(words[0])))]
    paper = papa.encode(bert_tok, words, max_length=16, labels=labels)
    authors = papa.encode(bert_tok, words, max_length=16, labels=labels, single_cap="authors")
    np.testing.assert_array_equal(paper.input_ids, authors.input_ids)
    np.testing.assert_array_equal(paper.labels, authors.labels)


def test_pair_segments_authors_matches_the_authors_code(bert_tok):
    texts = ["a man is playing a guitar on the stage tonight", "short", "one two three four five"]
    pairs = ["someone plays music", LONG, "six seven"]
    N = 32
    paper = papa.encode(bert_tok, texts, pairs=pairs, max_length=N)
    authors = papa.encode(bert_tok, texts, pairs=pairs, max_length=N, pair_segments="authors")
    ids, mask, types = _authors_layout(bert_tok, texts, pairs, N)
    np.testing.assert_array_equal(authors.input_ids, ids)
    np.testing.assert_array_equal(authors.attention_mask, mask)
    np.testing.assert_array_equal(authors.token_type_ids, types)
    np.testing.assert_array_equal(paper.input_ids, authors.input_ids)
    # the paper layout: sentence B and its separators are segment 1, wherever they sit
    half = N // 2
    assert (paper.token_type_ids[:, half + 1 : N] == 1).all() and (paper.token_type_ids[:, :half] == 0).all()
    # the authors': most of sentence B (from N/2 + 1 on) kept segment 0
    b_tokens = (np.arange(N) > half) & (paper.attention_mask[0] == 1) & (np.arange(N) < N - 1)
    assert (authors.token_type_ids[0, b_tokens] == 0).mean() > 0.5
    assert authors.meta["pair_segments"] == "authors"


def test_pair_segments_authors_whatever_the_tokenizers_padding_side(bert_tok):
    """The authors' segment ids are the ordinary pair's, padded on the right as papa pads every row: a tokenizer
    saved with ``padding_side="left"`` gave them left-padded, shifted off the tokens they belong to (sentence B's
    tokens segment 0, the row's last positions segment 1), without a word."""
    import copy

    texts, pairs, N = ["a man is playing a guitar", "short"], ["someone plays music", "six seven"], 32
    right = papa.encode(bert_tok, texts, pairs=pairs, max_length=N, pair_segments="authors")
    tok = copy.deepcopy(bert_tok)
    tok.padding_side = "left"
    left = papa.encode(tok, texts, pairs=pairs, max_length=N, pair_segments="authors")
    np.testing.assert_array_equal(left.input_ids, right.input_ids)
    np.testing.assert_array_equal(left.token_type_ids, right.token_type_ids)


def test_encoding_options_are_checked(bert_tok):
    with pytest.raises(ValueError, match="single_cap"):
        papa.encode(bert_tok, ["a"], max_length=16, single_cap="half")
    with pytest.raises(ValueError, match="pair_segments"):
        papa.encode(bert_tok, ["a"], pairs=["b"], max_length=16, pair_segments="none")


def test_tokenize_split_passes_the_encoding_options(tmp_path, bert_tok):
    import pandas as pd

    from papa.data import TaskData, save_task
    from papa.pipeline import tokenize_split

    df = pd.DataFrame({"id": ["0", "1"], "text": [LONG, "short"], "text_b": ["b one", "b two"], "label": [0, 1]})
    data_dir = tmp_path / "data"
    save_task(TaskData("toy", "sequence", ["no", "yes"], {"train": df}, {}), data_dir)
    enc = tokenize_split(
        "minilm",
        data_dir,
        "train",
        16,
        "papa",
        tmp_path / "t.parquet",
        encoding={"single_cap": "authors", "pair_segments": "authors"},
    )
    ref = papa.encode(
        bert_tok, df["text"].tolist(), pairs=df["text_b"].tolist(), max_length=16, pair_segments="authors"
    )
    np.testing.assert_array_equal(enc.token_type_ids, ref.token_type_ids)
    assert enc.meta["pair_segments"] == "authors"
