"""Constant kinds, effective attention and matrix-pattern statistics (paper Sec. 5)."""

import numpy as np
import pandas as pd
import pytest
import torch

import papa
from papa.patterns import classify, head_patterns, summary_line


def _svd_reference(A, V):
    """A_eff = A U_r U_r^T from numpy's SVD, one matrix at a time."""
    out = np.zeros_like(A)
    for idx in np.ndindex(A.shape[:2]):
        U, S, _ = np.linalg.svd(V[idx], full_matrices=False)
        r = int((S > S[0] * max(V[idx].shape) * np.finfo(np.float64).eps).sum())
        out[idx] = A[idx] @ U[:, :r] @ U[:, :r].T
    return out


def test_effective_attention_equals_raw_when_n_le_head_dim():
    g = torch.Generator().manual_seed(0)
    A = torch.softmax(torch.randn(2, 3, 8, 8, generator=g, dtype=torch.float64), -1)
    V = torch.randn(2, 3, 8, 16, generator=g, dtype=torch.float64)  # N = 8 <= d' = 16: V has full row rank
    assert torch.allclose(papa.effective_attention(A, V), A, atol=1e-10)


def test_effective_attention_projects_out_the_null_space_when_n_gt_head_dim():
    g = torch.Generator().manual_seed(1)
    A = torch.softmax(torch.randn(2, 3, 12, 12, generator=g, dtype=torch.float64), -1)
    V = torch.randn(2, 3, 12, 4, generator=g, dtype=torch.float64)  # N = 12 > d' = 4
    E = papa.effective_attention(A, V)
    assert np.allclose(E.numpy(), _svd_reference(A.numpy(), V.numpy()), atol=1e-10)
    assert not torch.allclose(E, A)
    assert torch.allclose(E @ V, A @ V, atol=1e-10)  # the head's output is unchanged
    assert torch.allclose((A - E) @ V, torch.zeros(()).double(), atol=1e-10)  # the removed part never reaches it


def _values_with_pads(seed=0, B=6, H=4, N=24, d=8):
    """Random values [B, H, N, d] with right padding (lengths from 3 to N) and the valid mask."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(B, H, N, d, generator=g, dtype=torch.float64)
    lengths = torch.tensor([N, N - 1, d + 1, d, 5, 3])[:B]  # tall (> d real rows) and short (<= d) examples
    valid = torch.arange(N)[None] < lengths[:, None]
    return v * valid[:, None, :, None], valid


def _spy_svd(monkeypatch):
    """Count the matrices the Cholesky path hands to the SVD."""
    from papa import constants

    seen = []
    real = constants.projector_svd

    def spy(v, rtol=None):
        seen.append(v.shape[0])
        return real(v, rtol)

    monkeypatch.setattr(constants, "projector_svd", spy)
    return seen, real


def test_cholesky_projector_equals_the_svd_projector_on_generic_values(monkeypatch):
    from papa.constants import projector_cholesky_qr

    v, _ = _values_with_pads()
    seen, svd = _spy_svd(monkeypatch)
    P = projector_cholesky_qr(v)
    assert seen == []  # every matrix certified: the fast path, no SVD
    assert torch.allclose(P, svd(v), atol=1e-12)
    assert torch.allclose(P @ P, P, atol=1e-12) and torch.allclose(P, P.transpose(-1, -2))
    # short examples (<= d real rows, d of them included): the projector keeps exactly the real rows, so effective
    # attention equals raw attention there to the bit (mutation testing: the example of exactly d rows was unchecked)
    assert (v[3:].abs().amax(-1) > 0).sum(-1).tolist() == [[8] * 4, [5] * 4, [3] * 4]
    assert torch.equal(P[3:], torch.diag_embed((v[3:].abs().amax(-1) > 0).double()))


def test_cholesky_projector_falls_back_to_the_svd_on_rank_deficient_values(monkeypatch):
    from papa.constants import projector_cholesky_qr

    v, _ = _values_with_pads(seed=1)
    v[0, 0, :, 3:] = 0  # tall, column rank 3 < d
    v[4, 1, 1] = v[4, 1, 0]  # short, two equal rows
    v[1, 2, :, 1] = v[1, 2, :, 0] * (1 + 1e-10)  # tall, full rank but cond ~1e10: not certified
    v[5, 3] = 0  # no non-zero row at all
    seen, svd = _spy_svd(monkeypatch)
    P = projector_cholesky_qr(v)
    assert seen == [4]  # exactly the four matrices above
    assert torch.allclose(P, svd(v), atol=1e-12)
    assert torch.linalg.matrix_rank(P[0, 0]).item() == 3 and P[4, 1].trace().round().item() == 4


def test_the_projectors_rank_threshold_is_relative_to_the_largest_singular_value(monkeypatch):
    """Singular values below ``rtol`` times the largest count as zero (numpy's ``matrix_rank`` rule), so the
    projector of values scaled by any factor is the same (mutation testing: a threshold on the singular values
    themselves passed every test; values of a small scale then had rank 0, of a large one kept their noise), and
    ``rtol`` defaults to numpy's ``max(N, d) * eps``."""
    from papa.constants import projector_cholesky_qr, projector_svd

    g = torch.Generator().manual_seed(4)
    U = torch.linalg.qr(torch.randn(6, 3, generator=g, dtype=torch.float64))[0]
    W = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))[0]
    V = (U * torch.tensor([1.0, 1e-6, 1e-17], dtype=torch.float64)) @ W.T  # rank 2 to float64 precision
    assert np.linalg.matrix_rank(V.numpy()) == 2
    seen, _ = _spy_svd(monkeypatch)
    for scale in (1e-30, 1e-12, 1.0, 1e12, 1e30):
        for project in (projector_svd, projector_cholesky_qr):
            P = project(V * scale)
            assert P.trace().round().item() == 2 and torch.allclose(P, U[:, :2] @ U[:, :2].T, atol=1e-9), scale
    assert len(seen) == 5  # the Cholesky path hands each scale's rank-deficient matrix to the SVD
    # the default rtol scales with the larger of N and d, as numpy's: a 64 x 8 matrix whose second singular value
    # is 5e-15 of the first (below 64 eps, above 8 eps) has rank 1, either way round
    U = torch.linalg.qr(torch.randn(64, 2, generator=g, dtype=torch.float64))[0]
    W = torch.linalg.qr(torch.randn(8, 2, generator=g, dtype=torch.float64))[0]
    V = (U * torch.tensor([1.0, 5e-15], dtype=torch.float64)) @ W.T
    assert np.linalg.matrix_rank(V.numpy()) == 1
    assert projector_svd(V).trace().round().item() == 1 and projector_svd(V.T.contiguous()).trace().round().item() == 1


def test_the_cholesky_projector_of_ill_conditioned_values_it_certifies_is_the_svds(monkeypatch):
    """Values whose directions differ a millionfold in scale (condition number 1e6) pass the first CholeskyQR pass's
    check (its Q^T Q within 0.1 of I) and stay on the fast path; the second pass makes Q orthogonal to rounding, so
    the projector is the SVD's to ~1e-11 and idempotent to ~1e-16 (mutation testing: one pass, 1e-7 off and as far
    from idempotent, passed every test, whose certified values were conditioned 1e4 at most)."""
    from papa.constants import projector_cholesky_qr

    g = torch.Generator().manual_seed(11)
    seen, svd = _spy_svd(monkeypatch)
    for n, d in ((40, 8), (64, 16)):
        U = torch.linalg.qr(torch.randn(n, d, generator=g, dtype=torch.float64))[0]
        W = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
        V = (U * torch.logspace(0, -6, d, dtype=torch.float64)) @ W.T
        P = projector_cholesky_qr(V)
        assert seen == [], (n, d)  # certified: the fast path
        assert (P - svd(V)).abs().max().item() < 1e-9, (n, d)
        assert (P @ P - P).abs().max().item() < 1e-12 and P.trace().round().item() == d, (n, d)


def test_the_projector_of_values_that_vanish_is_zero_by_either_method():
    """A head whose values are all 0 (a pruned head: its value projection's weights and bias zeroed) has no column
    space: its projector is 0, and so is its effective attention, by either method, tall or short (mutation
    testing: the SVD's threshold as ``>=`` kept every direction of a zero matrix, whose projector was then the
    identity, its effective attention the raw attention)."""
    from papa.constants import projector_cholesky_qr, projector_svd

    g = torch.Generator().manual_seed(12)
    for N, d in ((6, 4), (3, 8)):
        v = torch.zeros(2, 3, N, d, dtype=torch.float64)
        A = torch.softmax(torch.randn(2, 3, N, N, generator=g, dtype=torch.float64), -1)
        for project in (projector_svd, projector_cholesky_qr):
            assert torch.equal(project(v), torch.zeros(2, 3, N, N, dtype=torch.float64)), (N, d, project.__name__)
        for method in ("svd", "cholesky_qr"):
            assert torch.equal(papa.effective_attention(A, v, method=method), torch.zeros_like(A)), (N, d, method)


def test_a_given_rtol_drops_the_same_directions_by_either_method(monkeypatch):
    """Review CY (left since the cut-off session): the Cholesky path accepted any matrix it certified well
    conditioned (singular values above ~1e-7 of the largest) and ignored ``rtol``, so ``rtol=1e-3`` on values with a
    1e-4 direction kept it where the SVD drops it (effective attention 0.077 apart). A given rtol above what its
    checks certify (1e-9) goes to the SVD; the default (~1e-14) and smaller ones keep the fast path."""
    from papa.constants import projector_cholesky_qr, projector_svd

    g = torch.Generator().manual_seed(7)
    seen, _ = _spy_svd(monkeypatch)
    for n, d in ((12, 3), (3, 6)):  # tall (CholeskyQR2) and short (the rows' Gram matrix) paths
        k = min(n, d)
        U = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))[0]
        W = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))[0]
        V = (U * torch.tensor([1.0] * (k - 1) + [1e-4], dtype=torch.float64)) @ W.T
        A = torch.softmax(torch.randn(1, 1, n, n, generator=g, dtype=torch.float64), -1)
        for rtol, rank in ((1e-3, k - 1), (1e-5, k), (1e-10, k), (None, k)):
            before = len(seen)
            P = projector_cholesky_qr(V, rtol)
            assert P.trace().round().item() == rank, (n, d, rtol)
            assert torch.allclose(P, projector_svd(V, rtol), atol=1e-12), (n, d, rtol)
            assert len(seen) - before == (rtol in (1e-3, 1e-5)), (n, d, rtol)  # a small rtol keeps the fast path
            fast = papa.effective_attention(A, V[None, None], rtol=rtol)
            ref = papa.effective_attention(A, V[None, None], rtol=rtol, method="svd")
            assert torch.allclose(fast, ref, atol=1e-12), (n, d, rtol)


def test_effective_attention_methods_agree_and_are_checked():
    v, valid = _values_with_pads(seed=2)
    g = torch.Generator().manual_seed(3)
    A = torch.softmax(torch.randn(*v.shape[:2], v.shape[2], v.shape[2], generator=g, dtype=torch.float64), -1)
    fast = papa.effective_attention(A, v, valid=valid)
    ref = papa.effective_attention(A, v, valid=valid, method="svd")
    assert torch.allclose(fast, ref, atol=1e-12)
    assert np.allclose(fast.numpy(), _svd_reference(A.numpy(), v.numpy()), atol=1e-10)
    with pytest.raises(ValueError, match="method must be 'cholesky_qr' or 'svd'"):
        papa.effective_attention(A, v, method="qr")


def test_effective_average_on_minilm_differs_at_n_above_head_dim(minilm):
    model, tok = minilm
    enc = papa.encode(tok, ["a long enough sentence " * 12, "short one"], max_length=64)  # N = 64 > d' = 32
    raw = papa.average_attention(model, enc.batches(2))
    eff = papa.average_attention(model, enc.batches(2), kind="effective")
    assert raw.mean.shape == eff.mean.shape and (raw.mean - eff.mean).abs().max() > 1e-3
    small = papa.encode(tok, ["tiny"], max_length=16)  # N = 16 <= 32: identical
    assert torch.allclose(
        papa.average_attention(model, small.batches(1)).mean,
        papa.average_attention(model, small.batches(1), kind="effective").mean,
        atol=1e-5,
    )


def test_effective_constants_are_usable(minilm):
    """Average effective attention has signed entries: no mass on pad keys; the kernel's L1 rows (a
    signed matrix without a normaliser) sum to 1 in absolute value; applied with its raw-attention
    normaliser every hidden state stays finite (a signed row sum can be ~0)."""
    model, tok = minilm
    enc = papa.encode(
        tok, ["a long enough sentence " * 12, "short one", "a medium length sentence here"], max_length=64
    )
    eff = papa.average_attention(model, enc.batches(3), kind="effective")
    assert (eff.mean < 0).any()  # N = 64 > d' = 32: really signed
    one = enc.subset([1])  # a short example alone: its effective attention ignores pad keys
    E1 = papa.average_attention(model, one.batches(1), kind="effective").mean
    pad = ~torch.as_tensor(one.attention_mask[0]).bool()
    assert E1[..., pad].abs().max() == 0 and E1[..., pad, :].abs().max() == 0
    Cm = papa.patching.masked_constant(eff.mean[0], torch.as_tensor(enc.attention_mask).bool())
    valid = torch.as_tensor(enc.attention_mask).bool()
    rows = Cm.abs().sum(-1)  # [B, H, N]
    assert torch.allclose(rows.permute(0, 2, 1)[valid], torch.ones(()), atol=1e-5)
    L, H = papa.model_shape(model)
    with papa.patch(model, eff, static=torch.ones(L, H, dtype=torch.bool)):
        with torch.no_grad():
            hs = torch.stack(model(**enc.model_inputs(), output_hidden_states=True).hidden_states)
    assert torch.isfinite(hs).all()


def test_pattern_statistics_on_known_matrices():
    N = 8
    eye = torch.eye(N)
    cls = torch.zeros(N, N)
    cls[:, 0] = 1
    uni = torch.ones(N, N) / N
    mean = torch.stack([eye, cls, uni])[None]  # 1 layer, 3 heads
    df = classify(head_patterns(mean, torch.ones(N, N), band=0))
    assert df.diag_mass.tolist() == pytest.approx([1, 1 / N, 1 / N])
    assert df.cls_mass.tolist() == pytest.approx([1 / N, 1, 1 / N])
    assert df.entropy.tolist() == pytest.approx([0, 0, np.log(N)])
    assert df.dist_uniform.tolist() == pytest.approx([1 - 1 / N, 1 - 1 / N, 0], abs=1e-12)
    assert df.diagonal.tolist() == [True, False, False] and df.cls_sep.tolist() == [False, True, False]
    assert summary_line(df).startswith("diagonal pattern in 33% of heads, most mass on [CLS]/[SEP] in 33%")


def test_patterns_ignore_positions_never_seen():
    N = 6
    count = torch.zeros(N, N)
    count[:3, :3] = 2  # only positions 0..2 ever valid
    mean = torch.zeros(1, 1, N, N)
    mean[0, 0, :3, :3] = torch.eye(3)
    df = head_patterns(mean, count, band=0)
    assert df.diag_mass.item() == pytest.approx(1.0) and df.entropy.item() == pytest.approx(0.0)


def _corpus_attention(lengths, N, heads=3, seed=0):
    """Per-example attention of a papa-layout corpus (real tokens 0..n-2 and the final separator at N-1),
    softmax over each example's valid keys; head 0 leans on [CLS], head 1 on itself, head 2 on [SEP]."""
    g = np.random.default_rng(seed)
    out = []
    for n in lengths:
        valid = np.zeros(N, bool)
        valid[: n - 1] = True
        valid[N - 1] = True
        logits = g.normal(size=(heads, N, N))
        logits[0, :, 0] += 2.0
        logits[1] += 2.0 * np.eye(N)
        logits[2, :, N - 1] += 2.0
        A = np.exp(np.where(valid[None, None, :], logits, -np.inf))
        A = A / A.sum(-1, keepdims=True) * valid[None, :, None]  # pad-query rows 0
        out.append((A, valid))
    return out


def _masked_mean(corpus):
    """The masked mean of `average_attention` over ``_corpus_attention``'s examples, and its counts: each entry
    (i, j) a mean over the examples where both i and j are real tokens, 0 where none is."""
    sums, count = 0.0, 0.0
    for A, valid in corpus:
        both = valid[:, None] & valid[None, :]
        sums, count = sums + A * both, count + both
    return np.divide(sums, count, out=np.zeros_like(sums), where=count > 0), count


def test_pattern_masses_are_the_corpus_mean_attention_of_every_token():
    """cls_mass, sep_mass and diag_mass of the averaged matrix equal the naive mean, over every real token of
    every example, of the weight it puts on [CLS], the separator and its band (Clark et al. 2019's
    statistics), with lengths that vary: each matrix entry is a mean over the examples in which it occurred,
    so the matrix's rows sum to well over 1 and dividing by that sum understates these masses."""
    N, band = 12, 1
    lengths = [3, 4, 5, 5, 6, 8, 12, 3, 4, 7]
    corpus = _corpus_attention(lengths, N)
    mean, count = _masked_mean(corpus)
    assert (mean.sum(-1)[:, count.diagonal() > 0] > 1.05).any()  # the rows are no distribution
    df = head_patterns(torch.tensor(mean)[None], torch.tensor(count), band=band)
    i = np.arange(N)
    near = np.abs(i[:, None] - i[None, :]) <= band
    tokens = np.concatenate([np.flatnonzero(valid) for _, valid in corpus])
    naive = {
        "cls_mass": np.concatenate([A[:, valid, 0] for A, valid in corpus], 1).sum(1),
        "sep_mass": np.concatenate([A[:, valid, N - 1] for A, valid in corpus], 1).sum(1),
        "diag_mass": np.concatenate([(A * near)[:, valid].sum(-1) for A, valid in corpus], 1).sum(1),
    }
    for col, total in naive.items():
        np.testing.assert_allclose(df[col].to_numpy(), total / len(tokens), rtol=1e-12, err_msg=col)
    assert df.cls_mass.idxmax() == 0 and df.diag_mass.idxmax() == 1 and df.sep_mass.idxmax() == 2


def test_sep_mass_counts_each_separator_column_once_and_neg_mass_is_the_corpus_share():
    """``separators`` is a set of columns (a position given twice, or out of order, is the same set: mutation
    testing found a repeated one counted twice), and ``neg_mass`` is the module docstring's corpus share,
    ``sum_j max(-C_ij, 0) n_ij / sum_j |C_ij| n_ij`` per query, averaged over the queries by how often they occurred
    (``n_ii``), with the keys' counts varying along a row (the matrices' own signs alone passed every test)."""
    N = 12
    corpus = _corpus_attention([3, 4, 5, 5, 6, 8, 12, 3, 4, 7], N)
    mean, count = _masked_mean(corpus)
    signed = np.where(count > 0, mean - 0.05 * np.arange(N)[None, None, :] / N, 0.0)  # far keys lean negative
    C, n = torch.tensor(signed)[None], torch.tensor(count)
    assert (count[count.diagonal() > 0] != count[count.diagonal() > 0][:, :1]).any()  # counts vary along a row
    once = head_patterns(C, n, separators=[5, N - 1])
    for again in ([N - 1, 5], [5, N - 1, 5, N - 1]):
        pd.testing.assert_frame_equal(head_patterns(C, n, separators=again), once)
    rows = [i for i in range(N) if count[i, i] > 0]
    for h in range(3):
        share = [np.maximum(-signed[h, i], 0) @ count[i] / (np.abs(signed[h, i]) @ count[i]) for i in rows]
        expected = np.average(share, weights=count.diagonal()[rows])
        assert 0 < expected and once.neg_mass[h] == pytest.approx(expected, rel=1e-12)


def test_one_heads_empty_row_leaves_the_other_heads_alone():
    """A query row that is all zero in one head (a matrix with a hole) drops that row from that head's average
    only: before, it dropped the query from every head's statistics, and Fig. 4's picks with them."""
    g = torch.Generator().manual_seed(0)
    mean = torch.softmax(torch.randn(1, 3, 6, 6, generator=g), -1)
    holed = mean.clone()
    holed[0, 2, 3] = 0
    a, b = head_patterns(mean, torch.ones(6, 6)), head_patterns(holed, torch.ones(6, 6))
    pd.testing.assert_frame_equal(a.iloc[:2], b.iloc[:2])
    assert not np.isclose(a.diag_mass[2], b.diag_mass[2])
    holed[0, 2] = 0  # a head without a non-zero row: no statistics (NaN), not those of a peaked and uniform head
    c = head_patterns(holed, torch.ones(6, 6))
    assert c.iloc[2][["diag_mass", "entropy", "dist_uniform"]].isna().all() and c.iloc[:2].notna().all().all()


def test_patterns_without_a_fixed_separator_leave_sep_mass_unknown():
    """The standard layout fixes no separator position: sep_mass is NaN, and a head counts as a [CLS]/[SEP]
    head only where [CLS] alone holds the mass, unknown elsewhere; the summary says so."""
    N = 6
    cls = torch.zeros(N, N)
    cls[:, 0] = 1
    mean = torch.stack([cls, torch.ones(N, N) / N])[None]
    df = classify(head_patterns(mean, torch.ones(N, N), band=0, separators=[]))
    assert df.sep_mass.isna().all()
    assert df.cls_sep.isna().tolist() == [False, True] and bool(df.cls_sep.iloc[0])
    assert "[CLS] alone in at least 50%" in summary_line(df)


def test_trained_constants_are_updated_by_the_probe_and_dropped_after(minilm):
    from papa.probe import LiveFeatures, TrainConfig, build_probe, train_probe

    model, tok = minilm
    enc = papa.encode(
        tok, ["a great film", "awful acting", "loved it", "dull"] * 4, labels=[1, 0, 1, 0] * 4, max_length=16
    )
    C = papa.data_free("toeplitz", 6, 12, 16)
    L, H = papa.model_shape(model)
    probe = build_probe("sequence", model, 16, 2)
    with papa.patch(model, C, static=torch.ones(L, H, dtype=torch.bool), trainable_constants=True) as h:
        (param,) = h.parameters()
        before = param.detach().clone()
        train_probe(
            probe,
            LiveFeatures(model, enc),
            LiveFeatures(model, enc),
            TrainConfig(lr=1e-2, epochs=1, batch_size=8),
            ["accuracy"],
            extra_params=h.parameters(),
            live=True,
        )
        assert (param.detach() - before).abs().max() > 1e-4
    assert torch.equal(C.mean, papa.data_free("toeplitz", 6, 12, 16).mean)  # the input is not modified
    assert not any(p.requires_grad for p in model.parameters())


def test_patterns_settings_default_from_the_schema():
    """analyses.patterns: the schema's defaults fill what a config leaves out (the patterns stage reads
    them without fallbacks); null still turns the analysis off."""
    from pathlib import Path

    import yaml
    from snakemake.utils import validate

    root = Path(__file__).parents[1]
    schema = str(root / "workflow/schemas/config.schema.yaml")
    config = yaml.safe_load((root / "config/smoke.yaml").read_text())
    config["analyses"]["patterns"] = {"band": 2}
    validate(config, schema)
    assert config["analyses"]["patterns"] == {"band": 2, "diag_threshold": 0.3, "special_threshold": 0.5}
    config["analyses"]["patterns"] = None
    validate(config, schema)
    assert config["analyses"]["patterns"] is None
    config["analyses"]["patterns"] = {"bands": 2}
    with pytest.raises(Exception, match="bands"):
        validate(config, schema)


def test_bad_pattern_inputs_fail_naming_the_argument():
    """Review BP: a 3-D mean ("not enough values to unpack"), a count of another shape (torch's broadcast error) or
    none ("must be real number"), a negative band or a NaN threshold (accepted), and a table without classify's
    columns (KeyError 'cls_sep') each fail naming what to pass."""
    mean, count = torch.rand(2, 3, 5, 5), torch.ones(5, 5)
    for args, kwargs, error, match in (
        ((mean[0], count), {}, ValueError, r"mean must be \[layers, heads, N, N\] constant matrices, got shape "
                                           r"\(3, 5, 5\)"),
        # a matrix of N queries and another number of keys (torch's broadcast error against the count)
        ((torch.rand(2, 3, 5, 4), count), {}, ValueError, r"mean must be \[layers, heads, N, N\] constant matrices, "
                                                           r"got shape \(2, 3, 5, 4\)"),
        ((mean, torch.ones(4, 4)), {}, ValueError, r"count must be the matrices' \[N, N\] = \[5, 5\] pair counts"),
        ((mean, None), {}, TypeError, r"head_patterns needs the constants' mean and count"),
        ((mean, count), {"band": -1}, ValueError, r"band is the diagonal band's half-width, an integer >= 0"),
        ((mean, count), {"band": 1.5}, ValueError, r"band is the diagonal band's half-width"),
        # a separator position counted from the end would be read as the last column (mutation testing: unchecked)
        ((mean, count), {"separators": [-1]}, ValueError, r"separator positions \[-1\] lie outside the 5 positions"),
        ((mean, count), {"separators": [5]}, ValueError, r"separator positions \[5\] lie outside the 5 positions"),
    ):  # fmt: skip
        with pytest.raises(error, match=match):
            head_patterns(*args, **kwargs)
    stats = head_patterns(mean, count)
    for bad in (float("nan"), 5, -0.1, "0.3"):
        with pytest.raises(ValueError, match=r"diag_threshold is a share of a head's attention mass, in \[0, 1\]"):
            classify(stats, diag_threshold=bad)
    # the ends are shares too: 0 calls every head diagonal (mutation testing: 0 was not tried)
    assert (
        classify(stats, diag_threshold=0)["diagonal"].all()
        and classify(stats, diag_threshold=1, special_threshold=0)["cls_sep"].all()
    )
    with pytest.raises(ValueError, match=r"the table lacks 'diag_mass'.*pass head_patterns' table"):
        classify(stats.drop(columns="diag_mass"))
    with pytest.raises(ValueError, match=r"the table lacks 'diagonal', 'cls_sep': pass classify's table"):
        summary_line(stats)
    assert summary_line(classify(stats)).endswith("(6 heads)")
    for table in (stats.to_dict("records"), None):  # records of the table, or none: no AttributeError of a list
        with pytest.raises(TypeError, match=r"expected head_patterns' table \(a DataFrame\), got"):
            classify(table)
    # numbers of other types mean the same (a 0-d tensor or array, a NumPy integer)
    assert head_patterns(mean, count, band=torch.tensor(2)).equals(head_patterns(mean, count, band=2))
    assert head_patterns(mean, count, band=np.int64(0)).equals(head_patterns(mean, count, band=0))
    assert classify(stats, torch.tensor(0.4), np.float32(0.5)).equals(classify(stats, 0.4, float(np.float32(0.5))))


def test_diag_lift_is_diag_mass_over_that_of_a_head_spread_as_the_keys_occurred():
    """diag_lift (no test read it; review DK's mutation testing): a head's diag_mass over that of a head whose
    corpus-average distribution spreads over each query's keys as they occurred with it (n_ij), both averaged over
    the query rows weighted by how often the query occurred; written out here with loops over the rows. A head
    that is such a spread (a constant per row over the keys seen) has a lift of 1 whatever the lengths."""
    N, band = 12, 1
    lengths = [3, 4, 5, 5, 6, 8, 12, 3, 4, 7]
    corpus = _corpus_attention(lengths, N)
    mean, count = _masked_mean(corpus)
    spread = (count > 0) * np.random.default_rng(1).uniform(0.5, 2.0, size=(N, 1))  # a constant per query row
    heads = np.concatenate([mean, spread[None]])
    df = head_patterns(torch.tensor(heads)[None], torch.tensor(count), band=band)
    for h, M in enumerate(heads):
        mass = uniform = weight = 0.0
        for i in range(N):
            row = [abs(M[i, j]) * count[i, j] for j in range(N)]
            if count[i, i] == 0 or sum(row) == 0:
                continue
            near = [j for j in range(N) if abs(i - j) <= band]
            mass += count[i, i] * sum(row[j] for j in near) / sum(row)
            uniform += count[i, i] * sum(count[i, j] for j in near) / count[i].sum()
            weight += count[i, i]
        assert df.diag_mass[h] == pytest.approx(mass / weight, rel=1e-12)
        assert df.diag_lift[h] == pytest.approx(mass / uniform, rel=1e-12)
    assert df.diag_lift[3] == pytest.approx(1.0, rel=1e-12)
    assert df.diag_lift.idxmax() == 1 and df.diag_lift[1] > 1  # the head that leans on itself


def test_classify_counts_a_head_at_its_threshold():
    """``diagonal`` is diag_mass >= diag_threshold and ``cls_sep`` cls + sep mass >= special_threshold (classify's
    docstring; a head exactly at a threshold counts), also where sep_mass is unknown and [CLS] alone holds it."""
    df = pd.DataFrame({"diag_mass": [0.375, np.nextafter(0.375, 0)], "cls_mass": [0.25, 0.5],
                       "sep_mass": [0.25, np.nan]})  # fmt: skip
    out = classify(df, diag_threshold=0.375, special_threshold=0.5)
    assert out.diagonal.tolist() == [True, False] and out.cls_sep.tolist() == [True, True]
    below = classify(df.assign(cls_mass=0.25 - 1e-9), diag_threshold=0.375, special_threshold=0.5)
    assert bool(below.cls_sep.iloc[0]) is False and below.cls_sep.isna().tolist() == [False, True]


def test_each_row_is_the_head_it_names():
    """Row (layer l, head h) holds the statistics of ``mean[l, h]``, for a model of more layers than heads and one
    of more heads than layers (mutation testing: the layer and head columns read off transposed went unseen, every
    known-matrix test having one layer, or as many layers as heads)."""
    N = 6
    for L, H in ((3, 2), (2, 3)):
        mean = torch.ones(L, H, N, N) / N
        for layer, head in ((L - 1, 0), (0, H - 1)):
            mean[layer, head] = 0
            mean[layer, head, :, 0] = 1  # all its weight on [CLS]
        df = head_patterns(mean, torch.ones(N, N))
        assert df[["layer", "head"]].to_numpy().tolist() == [[i, j] for i in range(L) for j in range(H)]
        on_cls = df.loc[df.cls_mass > 0.99, ["layer", "head"]].to_numpy().tolist()
        assert on_cls == [[0, H - 1], [L - 1, 0]]


def test_classify_adds_its_columns_to_a_copy_and_keeps_them_plain_where_nothing_is_unknown():
    """classify returns a new table (the caller's, head_patterns' output, keeps its columns), and ``cls_sep`` is a
    plain bool column where every head's sep_mass is known, nullable only where one is missing, as its docstring
    says (mutation testing: neither was checked)."""
    N = 6
    mean = torch.ones(1, 2, N, N) / N
    stats = head_patterns(mean, torch.ones(N, N))
    columns = list(stats.columns)
    out = classify(stats)
    assert list(stats.columns) == columns and {"diagonal", "cls_sep"} <= set(out.columns)
    assert out.cls_sep.dtype == bool and out.diagonal.dtype == bool
    unknown = classify(stats.assign(sep_mass=np.nan))
    assert unknown.cls_sep.dtype == "boolean" and unknown.cls_sep.isna().all()
