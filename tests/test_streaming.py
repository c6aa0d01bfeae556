"""Token files (`Encoded.save`/`load`, `token_meta`, `stream_tokens`): Arrow round trip, streaming
reads, and averaging streamed from disk."""

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import papa
from papa import encoding, pipeline

TEXTS = [f"sentence number {i} is {'good' if i % 3 else 'rather bad and long ' * (i % 5)}" for i in range(83)]


@pytest.fixture(scope="module")
def token_file(minilm, tmp_path_factory):
    tok = minilm[1]
    enc = papa.encode(tok, TEXTS, labels=[i % 2 for i in range(len(TEXTS))], max_length=24)
    path = tmp_path_factory.mktemp("tokens") / "train.parquet"
    enc.save(
        path, {"model": "minilm", "dataset": "toy", "split": "train", "kind": "sequence", "label_names": ["a", "b"]}
    )
    return enc, path


def _same(a: papa.Encoded, b: papa.Encoded):
    for name in ("input_ids", "attention_mask", "token_type_ids", "labels"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype == np.int64 and np.array_equal(x, y), name


def test_arrow_round_trip_sequence_and_token_labels(minilm):
    tok = minilm[1]
    seq = papa.encode(tok, ["a b c", "d"], labels=[1, 0], max_length=8)
    words = papa.encode(tok, [["a", "b"], ["c"]], labels=[[1, 2], [0]], max_length=8)
    for e in (seq, words):
        back = papa.Encoded.from_arrow(e.to_arrow(), "papa", 8)
        _same(back, e)
        # the pandas route reads the same table
        _same(papa.Encoded.from_frame(e.to_arrow().to_pandas(), "papa", 8), e)
    with pytest.raises(ValueError, match="max_length=16"):
        papa.Encoded.from_arrow(seq.to_arrow(), "papa", 16)


def test_ragged_rows_are_rejected():
    table = pa.table({"input_ids": pa.array([[1, 2, 3], [1, 2]]), "attention_mask": pa.array([[1, 1, 1], [1, 1]])})
    with pytest.raises(ValueError, match="have length 2 in column 'input_ids', expected max_length=3"):
        papa.Encoded.from_arrow(table, "papa", 3)
    # a row longer than max_length names it too (review DR's mutation testing: only a shorter one was tried)
    with pytest.raises(ValueError, match="have length 3 in column 'input_ids', expected max_length=2"):
        papa.Encoded.from_arrow(table, "papa", 2)


def test_token_file_round_trip_and_footer_metadata(token_file):
    enc, path = token_file
    back = papa.Encoded.load(path)
    _same(back, enc)
    assert (back.layout, back.max_length, back.n_truncated) == (enc.layout, enc.max_length, enc.n_truncated)
    meta = encoding.token_meta(path)
    assert meta["n_rows"] == len(TEXTS) and meta["max_length"] == 24 and meta["dataset"] == "toy"
    assert meta["label_names"] == ["a", "b"] and meta["single_cap"] == "paper"  # the caller's and encode()'s
    assert back.meta == meta


def test_token_file_metadata_precedence(minilm, tmp_path):
    """The footer holds the encoding's meta and the caller's keys beside it; a caller's value for a key the encoding
    records must be the encoding's (it overrode ``n``, and the layout fields overrode it in turn:
    `test_a_callers_meta_does_not_rewrite_how_the_tokens_were_made`)."""
    enc = papa.encode(minilm[1], ["a b", "c"], max_length=8, layout="standard")
    enc.save(tmp_path / "t.parquet", {"n": 2, "max_length": 8, "layout": "standard", "note": "mine"})
    meta = encoding.token_meta(tmp_path / "t.parquet")
    assert (meta["n"], meta["note"], meta["max_length"], meta["layout"], meta["n_rows"]) == (
        2,
        "mine",
        8,
        "standard",
        2,
    )
    assert papa.Encoded.load(tmp_path / "t.parquet").layout == "standard"
    # numbers stay numbers (NumPy's were stored as their text), and what JSON cannot hold fails naming it (its
    # text was stored), as ConstantAttention's metadata does
    enc.save(tmp_path / "n.parquet", {"x": np.float32(1.5), "k": np.int64(3), "p": Path("/d/x.csv")})
    meta = encoding.token_meta(tmp_path / "n.parquet")
    assert (meta["x"], meta["k"], meta["p"]) == (1.5, 3, "/d/x.csv")
    with pytest.raises(TypeError, match=r"metadata value <object object at .*> \(object\) cannot be stored as JSON"):
        enc.save(tmp_path / "o.parquet", {"o": object()})
    assert not (tmp_path / "o.parquet").exists()


def test_a_token_file_keeps_its_truncation_count(minilm, tmp_path):
    """`Encoded.load` reads ``n_truncated`` back from the footer (review DR's mutation testing: the fixture's file
    truncates nothing, so a load that dropped the count passed)."""
    enc = papa.encode(minilm[1], ["hello world " * 20, "a good movie"], max_length=8)
    enc.save(tmp_path / "t.parquet")
    assert enc.n_truncated == papa.Encoded.load(tmp_path / "t.parquet").n_truncated == 1


def test_a_token_file_holds_what_an_encoding_holds_whatever_made_it(tmp_path):
    """An `Encoded` built by hand (its ``meta`` empty) saves and loads whole: its truncation count (from the footer's
    own key, not the meta's), token labels of a tag set past 127 (int8 would wrap them), and a split of no
    examples, which reads back as [0, max_length] (mutation testing: a footer without the count, int8 token labels
    and a read that failed on an empty column each passed)."""
    N = 6
    g = np.random.default_rng(0)
    ids = g.integers(0, 30_000, (4, N))
    labels = np.where(g.random((4, N)) < 0.3, -100, g.integers(0, 200, (4, N)))
    enc = papa.Encoded(ids, np.ones((4, N), np.int64), None, labels, "papa", N, n_truncated=3)
    for rows in (np.arange(4), np.arange(0)):
        part = enc.subset(rows)
        part.n_truncated = 3
        part.save(tmp_path / "t.parquet")
        back = papa.Encoded.load(tmp_path / "t.parquet")
        assert back.n_truncated == 3 and back.input_ids.shape == back.labels.shape == (len(rows), N)
        assert np.array_equal(back.input_ids, part.input_ids) and np.array_equal(back.labels, part.labels)
        assert back.token_type_ids is None and back.token_level
    # stored as the README's disk estimate says: int64 ids (and token labels), int8 masks and segment ids (mutation
    # testing: int64 masks, 8 bytes a token more, passed)
    enc.token_type_ids = np.zeros((4, N), np.int64)
    enc.save(tmp_path / "t.parquet")
    stored = {f.name: str(f.type.value_type) for f in pq.read_schema(tmp_path / "t.parquet")}
    assert stored == {"input_ids": "int64", "attention_mask": "int8", "token_type_ids": "int8", "labels": "int64"}


def test_a_callers_meta_does_not_rewrite_how_the_tokens_were_made(tmp_path):
    """Review CR (left since stop 71): the meta passed to `Encoded.save` overwrote what the encoding recorded of
    itself (``pair``: the averaging then placed a pair's separators as a single text's). A value that differs is
    refused, naming both; the same value, and the caller's own keys, are written."""
    tok = papa.load_encoder("minilm", device="cpu")[1]
    enc = papa.encode(tok, ["a film"], ["and another"], labels=[1], max_length=16)
    for meta, says in (({"pair": False}, "pair=False, and the encoding's is pair=True"),
                       ({"split": "train", "max_length": 32}, "max_length=32, and the encoding's is max_length=16"),
                       ({"layout": "standard", "n": 5}, "n=5, layout='standard', and the encoding's is n=1, "
                                                        "layout='papa'")):  # fmt: skip
        with pytest.raises(ValueError, match=rf"^Encoded\.save: meta sets {re.escape(says)}: it records how the"):
            enc.save(tmp_path / "t.parquet", meta)
        assert not (tmp_path / "t.parquet").exists()
    enc.save(tmp_path / "t.parquet", {"pair": True, "split": "train"})
    assert encoding.token_meta(tmp_path / "t.parquet")["pair"] is True
    assert encoding.token_meta(tmp_path / "t.parquet")["split"] == "train"
    # the caller's keys come after the encoding's own meta: a loaded file's split, saved as another, is that one
    # (mutation testing: the encoding's meta written last passed)
    loaded = papa.Encoded.load(tmp_path / "t.parquet")
    loaded.save(tmp_path / "v.parquet", {"split": "validation"})
    assert encoding.token_meta(tmp_path / "v.parquet")["split"] == "validation"


def test_pipeline_token_functions_are_kept_for_notebooks(tmp_path):
    """write_tokens(enc, path, meta) and read_tokens(path), by position or keyword (``enc=`` broke when they became
    aliases of Encoded.save/load), each saying what replaced it."""
    tok = papa.load_encoder("minilm", device="cpu")[1]
    enc = papa.encode(tok, ["a film", "another one"], labels=[0, 1], max_length=8)
    pipeline.write_tokens(enc=enc, path=tmp_path / "k.parquet", meta={"split": "train", "label_names": ["no", "yes"]})
    pipeline.write_tokens(enc, tmp_path / "p.parquet", {"split": "train", "label_names": ["no", "yes"]})
    for name in ("k", "p"):
        back = pipeline.read_tokens(path=tmp_path / f"{name}.parquet")
        assert np.array_equal(back.input_ids, enc.input_ids) and back.meta["split"] == "train"
    assert "enc.save" in pipeline.write_tokens.__doc__ and "Encoded.load" in pipeline.read_tokens.__doc__
    assert pipeline.token_meta is encoding.token_meta and pipeline.stream_tokens is encoding.stream_tokens
    with pytest.warns(DeprecationWarning, match="task_cfg is not read"):  # its old second argument, not read
        assert pipeline.task_info(back, {"metrics": ["accuracy"]}) == pipeline.task_info(back)


def test_token_file_without_papa_metadata_fails_clearly(tmp_path):
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"input_ids": pa.array([[1, 2]])}), path)
    for read in (encoding.token_meta, papa.Encoded.load, lambda p: next(encoding.stream_tokens(p, 4))):
        with pytest.raises(ValueError, match="plain.parquet is not a papa token file"):
            read(path)


def test_stream_tokens_refuses_a_batch_size_that_is_no_positive_integer(token_file):
    """-1 yielded no batch (read as an empty corpus), 0 failed dividing by zero."""
    _, path = token_file
    for bad in (-1, 0, 2.5, "8"):
        with pytest.raises(ValueError, match=r"stream_tokens' batch_size must be a positive integer"):
            next(encoding.stream_tokens(path, bad))
    with pytest.raises(ValueError, match=r"stream_tokens' read_rows must be a positive integer"):
        next(encoding.stream_tokens(path, 4, read_rows=0))


def test_stream_tokens_refuses_rows_numpy_would_read_as_other_rows(token_file):
    """Review DR (left since stop 76): ``rows=[-1]`` streamed the file's last example (numpy counts from the end), a
    bool mask its rows 0 and 1, a float index the row below it; an index past the end was numpy's bare IndexError.
    Each fails naming what to pass; the indices a subsample draws, and none, stream as before."""
    enc, path = token_file
    n = len(enc)
    for rows, error, needle in (([-1], IndexError, rf"rows holds -1, and .*{path.name} has {n} examples: indices run "
                                                   rf"from 0 to {n - 1}$"),
                                ([0, n], IndexError, rf"rows holds {n}, and "),
                                (np.arange(n) < 2, TypeError, r"rows must be a list of example indices \(integers\), "
                                                              r"got bool .*numpy\.flatnonzero\(m\)"),
                                ([0.0, 2.0], TypeError, r"got float64 of shape \(2,\)"),
                                ([[0, 1]], TypeError, r"got int64 of shape \(1, 2\)")):  # fmt: skip
        with pytest.raises(error, match=needle):
            next(encoding.stream_tokens(path, 4, rows=rows))
    assert [len(b) for b in encoding.stream_tokens(path, 4, rows=[])] == []
    got = papa.Encoded.concat(list(encoding.stream_tokens(path, 2, rows=np.array([n - 1, 0], dtype=np.int32))))
    _same(got, enc.subset(np.array([0, n - 1])))  # file order, whatever the integer type


# (41, 20): 83 examples leave a last batch of one (review DR's mutation testing: one left over was never read)
@pytest.mark.parametrize("batch_size,read_rows", [(8, 8), (8, 20), (32, 5), (100, 1024), (41, 20)])
@pytest.mark.parametrize("subsample", [False, True])
def test_stream_tokens_yields_the_file_in_order_in_full_batches(token_file, batch_size, read_rows, subsample):
    enc, path = token_file
    rows = np.sort(np.random.default_rng(1).permutation(len(enc))[:37]) if subsample else None
    expected = enc if rows is None else enc.subset(rows)
    got = list(encoding.stream_tokens(path, batch_size, rows=rows, read_rows=read_rows))
    sizes = [len(b) for b in got]
    assert all(s == batch_size for s in sizes[:-1]) and 0 < sizes[-1] <= batch_size
    assert sum(sizes) == len(expected)
    _same(papa.Encoded.concat(got), expected)


def test_make_constants_streams_exactly_the_in_memory_average(minilm, token_file, tmp_path):
    """Averaging streamed from the file (a subsample, in file order) equals averaging the
    same examples held in memory, bit for bit."""
    model = minilm[0]
    enc, path = token_file
    C = pipeline.make_constants("minilm", "average", path, tmp_path / "C.safetensors", batch_size=16, max_examples=50)
    rows = np.sort(np.random.default_rng(0).permutation(len(enc))[:50])
    ref = papa.average_attention(model, enc.subset(rows).batches(16))
    assert C.metadata["n_examples"] == 50
    assert torch.equal(C.mean, ref.mean) and torch.equal(C.count, ref.count)
    assert torch.equal(papa.ConstantAttention.load(tmp_path / "C.safetensors").mean, ref.mean)


def test_the_averaging_stage_computes_its_kind_and_records_what_made_it(minilm, token_file, tmp_path, monkeypatch):
    """An averaging job's matrices are its kind's (effective attention's, not the plain average's), over inputs the
    model's positions allow; the file records the model, corpus, layout, the kind asked for, the code fingerprint,
    the precision, and a data-free kind the model's hub commit, its config read at the pinned revision; a job's
    stage takes the config's seed and, given a token file, no N of its own (mutation testing: each of these passed
    the fast tests)."""
    from types import SimpleNamespace as NS

    import transformers

    model, tok = minilm
    _, short = token_file
    # effective attention differs from attention where a text has more word pieces than a head has dimensions (32)
    enc = papa.encode(tok, [" ".join(TEXTS[i : i + 6]) for i in range(8)], max_length=64)
    path = tmp_path / "long_texts.parquet"
    enc.save(path, {"dataset": "toy"})
    assert enc.attention_mask.sum(1).max() > 40
    means = {}
    for kind in ("average_trained", "effective"):
        stage = pipeline.AverageStage(model="minilm", kind=kind, tokens=str(path), out=str(tmp_path / f"{kind}.st"),
                                      corpus="toy", batch_size=16, code="c0de", precision="tf32")  # fmt: skip
        C = pipeline.average_constants(stage)
        base = kind.removesuffix("_trained")
        means[base] = C.mean
        torch.testing.assert_close(C.mean, papa.average_attention(model, enc.batches(16), kind=base).mean)
        want = {"model": "minilm", "corpus": "toy", "layout": enc.layout, "requested_kind": kind, "code": "c0de",
                "tokens": str(path), "precision": "tf32"}  # fmt: skip
        assert {k: C.metadata[k] for k in want} == want, C.metadata
    assert (means["effective"] - means["average"]).abs().max() > 1e-3
    made = pipeline.make_constants("minilm", "average", path, tmp_path / "mc.st", batch_size=16, corpus="wiki")
    assert made.metadata["corpus"] == "wiki"
    long = papa.encode(tok, TEXTS[:2], max_length=600)  # beyond MiniLM's 512 positions
    long.save(tmp_path / "long.parquet", {"dataset": "toy"})
    with pytest.raises(ValueError, match=r"inputs of N = 600 word pieces exceed the 512 positions"):
        pipeline.average_constants(pipeline.AverageStage(model="minilm", kind="average", out=str(tmp_path / "l.st"),
                                                         tokens=str(tmp_path / "long.parquet")))  # fmt: skip
    # a data-free kind: the config of the pinned commit, whose hub commit the file records
    asked, config = [], model.config
    monkeypatch.setattr(pipeline, "resolve_model_path", lambda name: name)
    monkeypatch.setattr(pipeline, "hub_commit", lambda name: "c0ffee")
    monkeypatch.setattr(
        transformers.AutoConfig, "from_pretrained", lambda name, **kw: asked.append((name, kw)) or config
    )
    C = pipeline.average_constants(pipeline.AverageStage(model="org/encoder@v1", kind="toeplitz", max_length=24,
                                                         out=str(tmp_path / "t.st")))  # fmt: skip
    assert asked == [("org/encoder", {"revision": "v1"})] and C.metadata["model_revision"] == "c0ffee"
    assert C.mean.shape[:2] == papa.model_shape(model)
    # the job's stage: the config's seed (None for a data-free rule: 0), N from the token file where there is one
    job = NS(input=NS(tokens=str(short)), output=["C.st"], wildcards=NS(kind="average", n="24", dataset="wiki"),
             params=NS(model="minilm", batch_size=16, max_examples=None, seed=3))  # fmt: skip
    assert pipeline.AverageStage._from_snakemake(job) == dict(
        model="minilm", kind="average", tokens=str(short), max_length=None, out="C.st", corpus="wiki", batch_size=16,
        max_examples=None, seed=3,
    )  # fmt: skip
    job.input, job.params.seed = NS(), None
    got = pipeline.AverageStage._from_snakemake(job)
    assert (got["tokens"], got["max_length"], got["seed"]) == (None, 24, 0)


def test_the_averaging_subset_is_drawn_with_the_stage_seed(minilm, token_file, tmp_path, monkeypatch):
    """``averaging.max_examples`` draws its subset with the config's top-level seed (the stage's), not a
    fixed one: seed 5 averages rng(5)'s 50 examples, which differ from seed 0's."""
    model = minilm[0]
    enc, path = token_file
    stage = pipeline.AverageStage(
        model="minilm", kind="average", tokens=str(path), out=str(tmp_path / "C5.safetensors"), batch_size=16,
        max_examples=50, seed=5,
    )  # fmt: skip
    totals, average = [], pipeline.average_attention

    def counted(*args, total=None, **kw):
        totals.append(total)
        return average(*args, total=total, **kw)

    monkeypatch.setattr(pipeline, "average_attention", counted)
    C = pipeline.average_constants(stage)
    assert totals == [50]  # its progress lines count the drawn examples, not the corpus's (mutation testing)
    rows = np.sort(np.random.default_rng(5).permutation(len(enc))[:50])
    assert not np.array_equal(rows, np.sort(np.random.default_rng(0).permutation(len(enc))[:50]))
    assert torch.equal(C.mean, papa.average_attention(model, enc.subset(rows).batches(16)).mean)
    # the file records what was averaged: the draw's size and seed, and the batch size
    saved = papa.ConstantAttention.load(tmp_path / "C5.safetensors").metadata
    assert (saved["max_examples"], saved["seed"], saved["batch_size"]) == (50, 5, 16)
    with pytest.raises(ValueError, match=r"averaging 'average' matrices needs a batch size"):
        pipeline.average_constants(replace(stage, batch_size=None, out=str(tmp_path / "none.safetensors")))
    assert not (tmp_path / "none.safetensors").exists()


def test_averaged_matrices_record_the_device_their_model_ran_on(token_file, tmp_path, monkeypatch):
    """A model stage records its model's device (`Stage.job_record`): the CPU here, though torch says it sees and
    has initialised CUDA (a notebook that used the GPU before and loads this model on the CPU: the GPU's name was
    recorded)."""
    enc, path = token_file
    load = pipeline.load_encoder
    monkeypatch.setattr(pipeline, "load_encoder", lambda name, **kw: load(name, **{**kw, "device": "cpu"}))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    stage = pipeline.AverageStage(model="minilm", kind="average", tokens=str(path),
                                  out=str(tmp_path / "C.safetensors"), batch_size=16, max_examples=8)  # fmt: skip
    assert pipeline.average_constants(stage).metadata["environment"]["device"] == "cpu"
    assert papa.io.device_name() == "NVIDIA H200"  # torch's current device: not what a stage records


def test_stages_that_run_no_model_record_the_cpu_where_cuda_is_initialised(monkeypatch, tmp_path):
    """A notebook that ran a model on the GPU has CUDA initialised: a stage it then runs that computes on the CPU (an
    aggregate, a plot, data-free matrices, which load no model) recorded that GPU as its device (`Stage.job_record`
    passed None on to `papa.io.device_name`, the current CUDA device). They record the CPU, as in the workflow."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert pipeline.Stage().job_record()["environment"]["device"] == "cpu"
    assert pipeline.Stage().provenance()["environment"]["device"] == "cpu"
    stage = pipeline.AverageStage(model="minilm", kind="toeplitz", max_length=16, out=str(tmp_path / "C.safetensors"))
    assert pipeline.average_constants(stage).metadata["environment"]["device"] == "cpu"
    # a model stage still names the device its model ran on
    assert pipeline.Stage().job_record(device=torch.device("cuda", 1))["environment"]["device"] == "NVIDIA H200"


def test_data_free_matrices_take_their_n_without_the_corpus(token_file, tmp_path):
    """Rule data_free_constants gives no token file (an edit to the corpus reran every data-free matrix): N is the
    path's, the same matrices as from the token file's N; averaging still needs the file, and an N that disagrees
    with the file's is refused."""
    enc, path = token_file
    N = enc.max_length

    def build(name, **kw):
        return pipeline.average_constants(
            pipeline.AverageStage(model="minilm", kind="toeplitz", out=str(tmp_path / f"{name}.safetensors"), **kw)
        )

    with_file, alone = build("file", tokens=str(path)), build("alone", max_length=N)
    assert alone.mean.shape[-1] == N and torch.equal(alone.mean, with_file.mean)
    assert alone.metadata["tokens"] is None and with_file.metadata["tokens"] == str(path)
    for bad in ({}, {"max_length": 0}):
        with pytest.raises(ValueError, match=r"data-free 'toeplitz' matrices need their N"):
            build("none", **bad)
    with pytest.raises(ValueError, match=rf"max_length {N + 1} but .* holds N={N}"):
        build("both", tokens=str(path), max_length=N + 1)
    with pytest.raises(ValueError, match=r"averaging 'average' matrices needs the corpus's token file"):
        pipeline.average_constants(pipeline.AverageStage(model="minilm", kind="average", max_length=N,
                                                         out=str(tmp_path / "avg.safetensors")))  # fmt: skip


def test_the_separator_columns_of_sec_5_1_are_where_the_corpus_puts_separators(minilm, tmp_path):
    """Averaging records the positions that hold [SEP] in most examples: N-1 for single sentences, N/2 and
    N-1 for sentence pairs (papa layout); the patterns stage counts every one of them in sep_mass."""
    from papa.patterns import head_patterns

    model, tok = minilm
    texts, second = ["a great film indeed", "bad", "i loved it"] * 4, ["yes it was", "no", "so did i"] * 4
    recorded = {}
    for name, enc in (("single", papa.encode(tok, texts, max_length=16)),
                      ("pair", papa.encode(tok, texts, pairs=second, max_length=16))):  # fmt: skip
        enc.save(tmp_path / f"{name}.parquet", {"dataset": name})
        for kind in ("average", "effective"):
            stage = pipeline.AverageStage(
                model="minilm", kind=kind, tokens=str(tmp_path / f"{name}.parquet"),
                out=str(tmp_path / f"{name}-{kind}.safetensors"), batch_size=4,
            )  # fmt: skip
            pipeline.average_constants(stage)
            C = papa.ConstantAttention.load(stage.out)
            recorded[name, kind] = C.metadata["separator_positions"]
    assert recorded == {("single", k): [15] for k in ("average", "effective")} | {
        ("pair", k): [8, 15] for k in ("average", "effective")
    }
    C = papa.ConstantAttention.load(tmp_path / "pair-average.safetensors")
    stats = pipeline.pattern_stats(
        pipeline.PatternsStage(
            average=str(tmp_path / "pair-average.safetensors"),
            effective=str(tmp_path / "pair-effective.safetensors"),
            out=str(tmp_path / "patterns.parquet"),
            model="minilm",
            corpus="pair",
            n=16,
            band=1,
            diag_threshold=0.3,
            special_threshold=0.5,
        )  # fmt: skip
    )
    # the table's documented columns, those of patterns.parquet also without the analysis (tables.patterns_table)
    import pandas as pd

    from papa.tables import PATTERNS_COLUMNS

    # in the installed pandas' dtypes (text: `str` from pandas 3 on, `object` before: pyproject admits 2.3.3)
    assert {c: str(t) for c, t in stats.dtypes.items()} == {c: str(pd.Series(dtype=t).dtype) for c, t in
                                                           PATTERNS_COLUMNS.items()}  # fmt: skip
    raw = stats[stats.attention == "raw"].reset_index(drop=True)
    both, last = head_patterns(C.mean, C.count, separators=[8, 15]), head_patterns(C.mean, C.count)
    np.testing.assert_allclose(raw["sep_mass"], both["sep_mass"])
    assert (both["sep_mass"] > last["sep_mass"]).all()  # the middle [SEP] holds mass of its own
    with pytest.raises(ValueError, match="outside the 16 positions"):
        head_patterns(C.mean, C.count, separators=[16])


def test_make_constants_rejects_an_empty_corpus(minilm, tmp_path):
    empty = papa.Encoded(np.zeros((0, 8), np.int64), np.zeros((0, 8), np.int64), None, None, "papa", 8)
    path = tmp_path / "empty.parquet"
    empty.save(path, {"dataset": "none"})
    with pytest.raises(ValueError, match="no examples"):
        pipeline.make_constants("minilm", "average", path, tmp_path / "C.safetensors")
    assert not (tmp_path / "C.safetensors").exists()
