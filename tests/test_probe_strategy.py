"""One probe path (papa.probe.run_probe) on the model's device, the cache strategy (memory /
disk / re-encode, chosen from sizes known before encoding), and the authors' training options
(gradient clipping, dropout inside the frozen encoder)."""

import errno
import logging
import math
import os
import re
import signal
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import papa
import papa.pipeline as pipeline
import papa.probe as probe_mod
from papa.io import read_provenance
from papa.probe import (
    MB,
    LiveFeatures,
    TrainConfig,
    cache_nbytes,
    choose_strategy,
    extract_features,
    prepare_features,
    run_probe,
)
from papa.spec import ConstantsSpec

from .conftest import TensorFeatures

TEXTS = ["a great film", "awful acting", "i loved it", "boring and dull", "not bad at all", "a terrible plot"]


def _toy(tok, n=24):
    return papa.encode(tok, (TEXTS * n)[:n], labels=([1, 0, 1, 0, 1, 0] * n)[:n], max_length=16)


@pytest.fixture(scope="module")
def job(minilm, tmp_path_factory):
    """Token files and constants of a tiny sentiment task, as the workflow writes them."""
    model, tok = minilm
    d = tmp_path_factory.mktemp("job")
    meta = {"dataset": "toy", "label_names": ["negative", "positive"]}
    pipeline.write_tokens(_toy(tok, 24), d / "train.parquet", {**meta, "split": "train"})
    pipeline.write_tokens(_toy(tok, 12), d / "validation.parquet", {**meta, "split": "validation"})
    papa.average_attention(model, _toy(tok, 24).batches(8)).save(d / "average.safetensors")
    return d


def _run(job, out, cache, seeds=(0, 1), constants="average", hp=None, fraction=0.5, batch_order="per_seed"):
    out.mkdir(parents=True, exist_ok=True)
    labels = {"model": "minilm", "task": "toy", "constants": constants, "selection": "first_to_last"}
    hp = {"lr": 1e-3, "batch_size": 8, "epochs": 2, "order_seed": 0, **(hp or {})}
    return pipeline.run_probes(
        "minilm",
        job / "average.safetensors",
        None,
        "first_to_last",
        fraction,
        list(seeds),
        job / "train.parquet",
        job / "validation.parquet",
        {"metrics": ["accuracy", "mcc"]},
        hp,
        {"batch_size": 8, **cache},
        [out / f"seed{s}.parquet" for s in seeds],
        labels,
        trained_constants=ConstantsSpec.parse(constants).trained,
        batch_order=batch_order,
    )


def _scores(frames):
    return pd.concat(frames, ignore_index=True)[["seed", "epoch", "metric", "score", "train_loss"]]


# ----------------------------------------------------------------------------- one probe path


def test_a_probe_run_at_minus_zero_writes_fraction_0(job, tmp_path):
    """-0.0 is 0 (papa.spec.check_fraction, de080ac), but a notebook's run_probes / ProbeStage at -0.0 wrote rows
    and files of fraction_dynamic -0.0 (shown '-0' by '%g', sorted and compared as a float beside 0's), which no
    workflow run writes (review CE)."""
    import math

    frames = _run(job, tmp_path, {"dtype": "float32"}, seeds=(0,), hp={"epochs": 1}, fraction=-0.0)
    written = pd.read_parquet(tmp_path / "seed0.parquet")
    for df in (frames[0], written):
        assert {math.copysign(1.0, f) for f in df["fraction_dynamic"]} == {1.0} and set(df["n_dynamic"]) == {0}


def test_a_notebooks_baseline_probe_takes_no_constant_matrices(job, tmp_path):
    """ProbeStage.constants is None at fraction_dynamic 1 (no head replaced: the workflow's baselines read none), but
    run_probes passed str(None), so a notebook's baseline without matrices failed on loading a file named 'None'
    (FileNotFoundError) and would have recorded 'None' as its constants file."""
    labels = {"model": "minilm", "task": "toy", "constants": "average", "selection": "first_to_last"}
    hp = {"lr": 1e-3, "batch_size": 8, "epochs": 1, "order_seed": 0}
    frames = pipeline.run_probes("minilm", None, None, "first_to_last", 1, [0], job / "train.parquet",
                                 job / "validation.parquet", {"metrics": ["accuracy"]}, hp, {"batch_size": 8},
                                 [tmp_path / "seed0.parquet"], labels)  # fmt: skip
    assert set(frames[0]["n_dynamic"]) == {12 * 6} and set(frames[0]["fraction_dynamic"]) == {1.0}
    assert read_provenance(tmp_path / "seed0.parquet")["settings"]["constants"] is None


def test_a_notebooks_shared_batch_order_is_recorded_in_each_seeds_file(job, tmp_path, monkeypatch):
    """Under batch_order shared every seed trains in the first seed's batch order; a workflow job records it in each
    file's hparams (shuffle_seed: the first seed, its param first_seed). run_probes set no first_seed, so its later
    seeds' files recorded shuffle_seed None, which reads as their own order. The seeds train in that order (against
    per_seed the first seed's scores are the same, the second's differ) and side by side: re-encoded features are
    encoded once for both seeds, not once a seed."""
    passes, hidden = [], probe_mod._hidden
    monkeypatch.setattr(probe_mod, "_hidden", lambda model, inputs: passes.append(1) or hidden(model, inputs))
    cache = {"dtype": "float32", "strategy": "reencode"}
    shared = _scores(_run(job, tmp_path, cache, seeds=(0, 1), hp={"epochs": 1}, batch_order="shared"))
    for seed in (0, 1):
        hparams = read_provenance(tmp_path / f"seed{seed}.parquet")["settings"]["hparams"]
        assert (hparams["seed"], hparams["shuffle_seed"]) == (seed, 0)
    n_shared = len(passes)
    own = _scores(_run(job, tmp_path / "own", cache, seeds=(0, 1), hp={"epochs": 1}))
    assert len(passes) - n_shared == 2 * n_shared > 0
    first, second = ([df[df.seed == s].reset_index(drop=True) for df in (shared, own)] for s in (0, 1))
    pd.testing.assert_frame_equal(*first)
    assert not second[0].train_loss.equals(second[1].train_loss)


class _Spy:
    def __init__(self, monkeypatch):
        self.run_probe_calls, self.probe_devices, self.feature_devices = [], [], []
        real_run, real_train = probe_mod.run_probe, probe_mod.train_probes

        def run_probe(*a, **kw):
            self.run_probe_calls.append(kw)
            return real_run(*a, **kw)

        def train_probes(probes, train, validation, *a, **kw):
            self.probe_devices += [p.device for probe in probes for p in probe.parameters()]
            self.feature_devices += [torch.device(f.device) for f in (train, validation)]
            return real_train(probes, train, validation, *a, **kw)

        monkeypatch.setattr(pipeline, "run_probe", run_probe)
        monkeypatch.setattr(probe_mod, "train_probes", train_probes)


@pytest.mark.parametrize("constants", ["average", "toeplitz_trained"])
def test_pipeline_probes_go_through_run_probe_on_the_model_device(job, tmp_path, monkeypatch, constants):
    """Cached features and trained constants alike: run_probe trains every probe, on the model's device."""
    spy = _Spy(monkeypatch)
    frames = _run(job, tmp_path, {"dtype": "float32"}, constants=constants, hp={"epochs": 1}, fraction=0)
    assert len(spy.run_probe_calls) == 1 and len(frames) == 2
    model_device = next(papa.load_encoder("minilm")[0].parameters()).device
    assert spy.probe_devices and set(spy.probe_devices) == {model_device}
    assert set(spy.feature_devices) == {model_device}
    assert set(frames[0].cache_strategy) == {"live" if ConstantsSpec.parse(constants).trained else "memory"}


def test_probe_max_train_trains_every_seed_on_one_drawn_subset(job, tmp_path, monkeypatch):
    """tasks.<t>.probe.max_train (the schema's hparams key) is honoured by the probe stage, not only
    by the lambda stage: every seed trains on the same seeded subset, the one the lambda stage draws."""
    seen = []
    real_run = pipeline.run_probe

    def run_probe(model, train, *a, **kw):
        seen.append(train.input_ids.copy())
        return real_run(model, train, *a, **kw)

    monkeypatch.setattr(pipeline, "run_probe", run_probe)
    _run(job, tmp_path / "all", {"dtype": "float32"}, hp={"epochs": 1}, fraction=0)
    some = {"epochs": 1, "max_train": 10, "order_seed": 3}
    frames = _run(job, tmp_path / "some", {"dtype": "float32"}, hp=some, fraction=0)
    full = pipeline.read_tokens(job / "train.parquet")
    assert [len(t) for t in seen] == [len(full), 10] and len(frames) == 2
    drawn = pipeline.subsample(full, 10, np.random.default_rng(3))  # the job's order_seed seeds the draw
    assert np.array_equal(seen[1], drawn.input_ids)
    assert pipeline.subsample(full, None, np.random.default_rng(0)) is full
    assert pipeline.subsample(full, len(full), np.random.default_rng(0)) is full
    for bad in (0, -3, 2.5, True):  # 0 drew every row (stop 92's left item; the schema's minimum 1 kept it from jobs)
        with pytest.raises(ValueError, match=rf"examples to draw must be a positive integer .*got {bad!r}$"):
            pipeline.subsample(full, bad, np.random.default_rng(0))


def test_a_max_train_subsample_of_one_class_fails_before_training(job, tmp_path):
    """load_task checks the dataset's train split; the stages' own max_train draw is checked again
    (one example is one class), naming the key to raise; token tasks ignore -100 positions."""
    with pytest.raises(
        ValueError,
        match=r"probe stage of task 'toy' would train on one class .*1 train examples "
        r"\(drawn from 24\).*tasks\.toy\.probe\.max_train",
    ):
        _run(job, tmp_path, {"dtype": "float32"}, hp={"epochs": 1, "max_train": 1}, fraction=0)
    assert not list(tmp_path.glob("*.parquet"))
    full = pipeline.read_tokens(job / "train.parquet")
    pipeline.check_train_classes(full, pipeline.task_info(full), "probe", "toy", len(full))  # two classes: passes
    info = pipeline.TaskInfo("token", ["NN", "VB"])
    tags = np.full((2, 4), -100)
    tags[:, 1] = 0
    one = papa.Encoded(np.zeros((2, 4), np.int64), np.ones((2, 4), np.int64), None, tags, "standard", 4)
    with pytest.raises(ValueError, match=r"lambda stage .*one class \('NN' of .*no other tag.*tasks\.pos\.lambda"):
        pipeline.check_train_classes(one, info, "lambda", "pos", 9)
    tags[1, 2] = 1
    pipeline.check_train_classes(one, info, "lambda", "pos", 9)
    tags[1, 2] = -100
    tags[:, 1] = 1  # the one class is named, whichever it is (mutation testing: only class 0 was)
    with pytest.raises(ValueError, match=r"one class \('VB' of \['NN', 'VB'\]\)"):
        pipeline.check_train_classes(one, info, "lambda", "pos", 9)
    # nothing subsampled (2 of 2 examples): max_train cannot help; the data, or for a token task its length, can
    with pytest.raises(ValueError, match=r"\(drawn from 2\).*Every train example is there: check the data's tags, "
                       r"or raise tasks\.pos\.max_length") as e:  # fmt: skip
        pipeline.check_train_classes(one, info, "lambda", "pos", 2)
    assert "max_train" not in str(e.value)
    labels = papa.Encoded(np.zeros((2, 4), np.int64), np.ones((2, 4), np.int64), None, np.array([1, 1]), "standard", 4)
    with pytest.raises(ValueError, match=r"Every train example is there: check the data's labels$"):
        pipeline.check_train_classes(labels, pipeline.TaskInfo("sequence", ["neg", "pos"]), "probe", "toy", 2)
    # a stage a notebook runs without a task name: the key is written with a placeholder, not "tasks.None"
    with pytest.raises(ValueError, match=r"Raise tasks\.<task>\.probe\.max_train"):
        pipeline.check_train_classes(labels, pipeline.TaskInfo("sequence", ["neg", "pos"]), "probe", None, 9)
    with pytest.raises(ValueError, match=r"^tasks\.<task>\.metrics: .*\[the task.s 3 labels \(a, b, c\), from its"):
        pipeline.check_task_metrics(None, ["f1"], "sequence", ["a", "b", "c"])


def test_a_stages_max_train_draw_is_the_stages_seeds_and_unlabeled_tokens_are_refused(job):
    """`train_split` draws ``max_train`` examples with the stage's seed (the lambda job's, the probe job's
    order_seed), as `draw_rows` does, kept in file order: another seed trains on other examples. Tokens without label
    names (an unlabeled corpus's) give no task: refused, naming the dataset."""
    full = pipeline.read_tokens(job / "train.parquet")
    drawn = {}
    for seed in (0, 3):
        train, info = pipeline.train_split(job / "train.parquet", 10, seed, "probe", "toy")
        rows = np.sort(np.random.default_rng(seed).permutation(len(full))[:10])  # `draw_rows`, kept in file order
        assert np.array_equal(train.labels, full.labels[rows]) and np.array_equal(train.input_ids, full.input_ids[rows])
        assert info == pipeline.TaskInfo("sequence", ["negative", "positive"])
        drawn[seed] = rows
    assert not np.array_equal(drawn[0], drawn[3])
    unlabeled = replace(full, meta={"dataset": "wiki"})
    with pytest.raises(ValueError, match=r"no label names \(dataset 'wiki' is unlabeled\)"):
        pipeline.task_info(unlabeled)


@pytest.mark.parametrize(
    "device",
    [
        pytest.param("cpu", marks=pytest.mark.slow),  # the stand-in's code on CI too (a GPU machine only, it rotted)
        pytest.param(
            "cuda",
            marks=[
                pytest.mark.cuda,
                pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (make test-cuda)"),
            ],
        ),
    ],
)
def test_pipeline_probes_train_on_the_models_device(job, tmp_path, monkeypatch, device):
    """The probe stage's features and probes live on the device the model was loaded on. (Its stand-in for
    `load_encoder` took the model name alone, so once the stage passed max_length it failed with a TypeError on
    every GPU machine, and CI, without one, never ran it: found on an H200. The CPU case runs the same code.)"""
    load = pipeline.load_encoder
    monkeypatch.setattr(pipeline, "load_encoder", lambda name, **kw: load(name, **{**kw, "device": device}))
    spy = _Spy(monkeypatch)
    for constants in ("average", "average_trained"):
        _run(job, tmp_path / constants, {"dtype": "float16"}, constants=constants, hp={"epochs": 1}, fraction=0)
    assert {d.type for d in spy.probe_devices} == {device} and {d.type for d in spy.feature_devices} == {device}


def test_seeds_of_a_job_equal_seeds_trained_alone(minilm):
    """Each seed is an independent run (its own initialisation, dropout and batch order), from a cache
    or re-encoded; batch_order shared trains the seeds side by side in the first seed's batch order,
    each keeping its own random-number state, so training with others changes nothing for it."""
    model, tok = minilm
    enc = _toy(tok)
    cache = extract_features(model, enc, dtype="float32")
    cfg = TrainConfig(lr=1e-3, batch_size=8, epochs=2, seed=3, dropout=0.3)
    seed5 = TrainConfig(**{**vars(cfg), "seed": 5})
    both = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=(cache, cache), seeds=[3, 5])
    alone3 = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=(cache, cache))
    alone5 = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], seed5, features=(cache, cache))
    assert [r for r in both if r["seed"] == 3] == alone3
    assert [r for r in both if r["seed"] == 5] == alone5
    assert alone3 != [{**r, "seed": 3} for r in alone5]  # the seeds differ
    with prepare_features(model, enc, enc, "reencode", "float32") as live:
        own = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=live, seeds=[3, 5])
        alone_live5 = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], seed5, features=live)
        lockstep = run_probe(
            model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=live, seeds=[3, 5], batch_order="shared"
        )
        live5 = run_probe(
            model,
            enc,
            enc,
            "sequence",
            2,
            ["accuracy"],
            TrainConfig(**{**vars(seed5), "shuffle_seed": 3}),
            features=live,
        )
    assert [r for r in own if r["seed"] == 5] == alone_live5
    assert [r for r in lockstep if r["seed"] == 5] == live5
    # the first seed side by side keeps its own random state too (its dropout is not the last-built probe's)
    assert [r for r in lockstep if r["seed"] == 3] == [r for r in own if r["seed"] == 3]


def test_a_probe_stage_with_outputs_or_labels_that_do_not_fit_fails_before_training(job, tmp_path):
    """The message "one output per seed" named no counts; a constants label that is no spec was written into
    every row (and refused by probe_table only when the tables were made)."""
    labels = {"model": "minilm", "task": "toy", "constants": "average", "selection": "lambda"}

    def stage(**changed):
        kw = dict(model="minilm", constants=str(job / "average.safetensors"), lambdas=None,
                  train=str(job / "train.parquet"), validation=str(job / "validation.parquet"),
                  outs=[str(tmp_path / "seed0.parquet")], metrics=["accuracy"], selection="first_to_last",
                  fraction_dynamic=0.5, seeds=[0], hparams=TrainConfig(lr=1e-3, batch_size=8, epochs=1, seed=0),
                  labels=labels)  # fmt: skip
        return pipeline.ProbeStage(**{**kw, **changed})

    with pytest.raises(ValueError, match="ProbeStage: 2 seeds and 1 outputs: give one output per seed"):
        pipeline.probe_heads(stage(seeds=[0, 1]))
    with pytest.raises(ValueError, match="ProbeStage: 1 seeds and 2 outputs: give one output per seed"):
        pipeline.probe_heads(stage(outs=[str(tmp_path / "seed0.parquet"), str(tmp_path / "seed1.parquet")]))
    with pytest.raises(ValueError, match="avg"):
        pipeline.probe_heads(stage(labels={**labels, "constants": "avg"}))
    with pytest.raises(ValueError, match="selection 'lamda' is no head order"):
        pipeline.probe_heads(stage(labels={**labels, "selection": "lamda"}))
    with pytest.raises(ValueError, match="ProbeStage.labels lacks task"):
        pipeline.probe_heads(stage(labels={k: v for k, v in labels.items() if k != "task"}))
    assert not list(tmp_path.glob("*.parquet"))


def test_a_probe_stage_refuses_token_files_longer_than_the_models_positions(minilm, tmp_path):
    """Token files of an N beyond the model's positions (a task's max_length of 600 on a 512-position model) are
    refused as the model loads, naming the N to use; a stage loading the model without the files' N met torch's
    "size of tensor a (600) must match the size of tensor b (512)" in the first encoder pass."""
    tok, meta = minilm[1], {"dataset": "toy", "label_names": ["negative", "positive"]}
    enc = papa.encode(tok, ["word " * 700, "a short one"] * 4, labels=[0, 1] * 4, max_length=600)
    for split in ("train", "validation"):
        enc.save(tmp_path / f"{split}.parquet", {**meta, "split": split})
    stage = pipeline.ProbeStage(
        model="minilm", constants=None, lambdas=None, train=str(tmp_path / "train.parquet"),
        validation=str(tmp_path / "validation.parquet"), outs=[str(tmp_path / "seed0.parquet")], metrics=["accuracy"],
        selection="first_to_last", fraction_dynamic=1.0, seeds=[0], hparams=TrainConfig(lr=1e-3, batch_size=8),
        labels={"model": "minilm", "task": "toy", "constants": "average", "selection": "first_to_last"},
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"N = 600 word pieces exceed the 512 positions of 'minilm' .* at most 512$"):
        pipeline.probe_heads(stage)
    assert not (tmp_path / "seed0.parquet").exists()


def test_a_probe_stage_warns_of_one_uncovered_token_and_keeps_the_batch_order_its_hparams_give(
    job, minilm, tmp_path, monkeypatch, caplog
):
    """probe_heads warns where even one token of a split sits at a position no averaged example reached (constant heads
    give it a zero output), and under batch_order shared a batch order its hparams give (shuffle_seed) is kept, not
    replaced by the first seed's; trained constants need matrices at every fraction and record their hidden states'
    size, train and validation; every row names the hub commit of the weights, and the file the dropout its
    sequence probe ran with (the config's "authors" as the family's number)."""
    import contextlib
    from types import SimpleNamespace

    class Stop(Exception):
        pass

    got = []

    def probe(*args, **kwargs):
        got.append(args[6])  # the trainer settings
        raise Stop

    @contextlib.contextmanager
    def features(*args, **kwargs):
        yield SimpleNamespace(strategy="memory", nbytes=0)

    monkeypatch.setattr(papa.ConstantAttention, "uncovered_queries", lambda self, mask: 1)
    monkeypatch.setattr(pipeline, "prepare_features", features)
    monkeypatch.setattr(pipeline, "run_probe", probe)
    stage = pipeline.ProbeStage(
        model="minilm", constants=str(job / "average.safetensors"), lambdas=None, train=str(job / "train.parquet"),
        validation=str(job / "validation.parquet"), outs=[str(tmp_path / "seed1.parquet")], metrics=["accuracy"],
        selection="first_to_last", fraction_dynamic=0.5, seeds=[1], batch_order="shared", first_seed=0,
        hparams=TrainConfig(lr=1e-3, batch_size=8, epochs=1, seed=1, shuffle_seed=7),
        labels={"model": "minilm", "task": "toy", "constants": "average", "selection": "first_to_last"},
    )  # fmt: skip
    with caplog.at_level("WARNING", logger="papa"), pytest.raises(Stop):
        pipeline.probe_heads(stage)
    said = [r.getMessage() for r in caplog.records if "no averaged example reached" in r.getMessage()]
    assert [m.split("'s ")[0] for m in said] == ["1 of the train split", "1 of the validation split"], said
    assert got[0].shuffle_seed == 7
    # trained constants replace heads at fraction_dynamic 1 too (the matrices train with the probe): they need them
    with pytest.raises(ValueError, match="fraction_dynamic 1.0 replaces heads: it needs constant matrices"):
        pipeline.probe_heads(replace(stage, constants=None, fraction_dynamic=1.0, trained_constants=True))
    # trained constants keep no cache: their files record the size of the train and validation hidden states alike
    rows = [{"seed": 1, "epoch": 1, "metric": "accuracy", "score": 0.5}]
    monkeypatch.setattr(pipeline, "run_probe", lambda *args, **kwargs: rows)
    monkeypatch.setattr(pipeline, "model_revision", lambda m: "0123abc")  # a hub model's commit (MiniLM's is None)
    authors = replace(stage.hparams, dropout="authors")  # the family's number, which the file records
    df = pipeline.probe_heads(replace(stage, trained_constants=True, hparams=authors))[0]
    assert df.model_revision.tolist() == ["0123abc"]
    record = read_provenance(tmp_path / "seed1.parquet")
    assert (record["probe_dropout"], record["settings"]["hparams"]["dropout"]) == (0.1, "authors")
    nbytes = sum(
        cache_nbytes(minilm[0], papa.Encoded.load(job / f"{s}.parquet"), "float16") for s in ("train", "validation")
    )
    assert df.cache_strategy.tolist() == ["live"] and df.cache_mb.tolist() == [nbytes / MB]


@pytest.mark.parametrize("trained", [False, True], ids=["fixed", "trained"])
def test_a_probe_stage_encodes_with_the_heads_its_order_picks_constant(job, minilm, tmp_path, monkeypatch, trained):
    """What a probe job trains on is the encoder with the heads `static_mask` picks constant (its fraction_dynamic,
    head order and order_seed) and the others input-dependent, fixed and trained matrices alike; trained ones reach
    run_probe with the job's compile mode and backbone dropout. A stage patching no head (`patch` without its
    ``static``), or drawing the random order with seed 0, passed the fast tier: its probe tests compared stages with
    one another (strategies, seeds, one job against several), which share such a slip."""

    class Stop(Exception):
        pass

    model, got = minilm[0], {}
    inputs = papa.Encoded.load(job / "validation.parquet").model_inputs(np.arange(4))
    compile = "default" if trained else "eager"

    def hidden(m):
        with torch.no_grad():
            return probe_mod._hidden(m, inputs)

    def probe(m, *args, **kwargs):  # trained constants: the patch each seed trains under
        with kwargs["trainable"]():
            got["hidden"], got["kwargs"] = hidden(m), kwargs
        raise Stop

    def features(m, *args, **kwargs):  # fixed matrices: entered inside the job's patch
        got["hidden"] = hidden(m)
        raise Stop

    monkeypatch.setattr(pipeline, "run_probe" if trained else "prepare_features", probe if trained else features)
    stage = pipeline.ProbeStage(
        model="minilm", constants=str(job / "average.safetensors"), lambdas=None, train=str(job / "train.parquet"),
        validation=str(job / "validation.parquet"), outs=[str(tmp_path / "seed0.parquet")], metrics=["accuracy"],
        selection="random", fraction_dynamic=0.5, seeds=[0], hparams=TrainConfig(lr=1e-3, batch_size=8, epochs=1),
        trained_constants=trained, order_seed=3, compile=compile, backbone_dropout=trained,
        labels={"model": "minilm", "task": "toy", "constants": "average_trained" if trained else "average",
                "selection": "random"},
    )  # fmt: skip
    with pytest.raises(Stop):
        pipeline.probe_heads(stage)
    static = pipeline.static_mask(model, None, "random", 0.5, seed=3)
    assert not torch.equal(static, pipeline.static_mask(model, None, "random", 0.5, seed=0))
    C = papa.ConstantAttention.load(job / "average.safetensors")
    with pipeline.real_tokens_only(model, compile):  # as the job runs its encoder
        unpatched = hidden(model)
        with papa.patch(model, C, static=static):
            torch.testing.assert_close(got["hidden"], hidden(model))
    assert (got["hidden"] - unpatched).abs().amax() > 0.1  # the heads replaced change what the probe reads
    if trained:
        assert (got["kwargs"]["compile"], got["kwargs"]["backbone_dropout"]) == ("default", True)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("batch_order", ["per_seed", "shared"])
def test_trained_constants_one_job_per_seed_score_as_one_job(job, tmp_path, batch_order):
    """Rule probe_trained runs each seed of trained constants as a job of its own (ProbeStage with one
    seed, and the sweep's first seed under batch_order shared): the same scores as one job training the
    seeds one after the other. Without first_seed, a lone seed under shared trains in its own order."""

    def stage(seeds, out, first_seed=None):
        return pipeline.ProbeStage(
            model="minilm",
            constants=str(job / "average.safetensors"),
            lambdas=None,
            train=str(job / "train.parquet"),
            validation=str(job / "validation.parquet"),
            outs=[str(tmp_path / out / f"seed{s}.parquet") for s in seeds],
            metrics=["accuracy"],
            selection="first_to_last",
            fraction_dynamic=0.5,
            seeds=list(seeds),
            hparams=TrainConfig(lr=1e-3, batch_size=8, epochs=1, seed=seeds[0], dropout=0.3),
            trained_constants=True,
            batch_order=batch_order,
            first_seed=first_seed,
            labels={"model": "minilm", "task": "toy", "constants": "average_trained", "selection": "first_to_last"},
        )

    together = _scores(pipeline.probe_heads(stage([0, 1], "together")))
    for s in (0, 1):  # each file's own seed, also in the trainer settings it ran with (they said the first seed's)
        record = read_provenance(tmp_path / "together" / f"seed{s}.parquet")
        assert record["seed"] == s and record["settings"]["hparams"]["seed"] == s, record
        # the heads kept input-dependent: first_to_last replaces the first layers' first, so at 1/2 the last three
        assert record["dynamic_heads"] == [[layer, h] for layer in (3, 4, 5) for h in range(12)], record
    apart = _scores([pipeline.probe_heads(stage([s], f"alone{s}", first_seed=0))[0] for s in (0, 1)])
    pd.testing.assert_frame_equal(apart, together)
    # the trainer settings each file records are those it ran with: under shared, the first seed's batch order
    hparams = read_provenance(tmp_path / "alone1" / "seed1.parquet")["settings"]["hparams"]
    assert (hparams["seed"], hparams["shuffle_seed"]) == (1, 0 if batch_order == "shared" else None), hparams
    assert not together[together.seed == 0].score.equals(together[together.seed == 1].score)  # the seeds differ
    own_order = _scores(pipeline.probe_heads(stage([1], "own")))
    seed1 = together[together.seed == 1].reset_index(drop=True)
    assert own_order.equals(seed1) == (batch_order == "per_seed")


def test_the_baseline_probe_reads_no_constants(job, tmp_path):
    """At fraction_dynamic 1 no head is replaced: rule probe gives the job no constants file (new matrices rerun
    no baseline), and its scores are those of the job that had one; a fraction that replaces heads refuses to
    run without."""

    def stage(constants, out, fraction=1.0):
        return pipeline.ProbeStage(
            model="minilm",
            constants=constants,
            lambdas=None,
            train=str(job / "train.parquet"),
            validation=str(job / "validation.parquet"),
            outs=[str(tmp_path / out / "seed0.parquet")],
            metrics=["accuracy"],
            selection="first_to_last",
            fraction_dynamic=fraction,
            seeds=[0],
            hparams=TrainConfig(lr=1e-3, batch_size=8, epochs=1, seed=0),
            labels={"model": "minilm", "task": "toy", "constants": "average", "selection": "first_to_last"},
        )

    with_file = _scores(pipeline.probe_heads(stage(str(job / "average.safetensors"), "with")))
    pd.testing.assert_frame_equal(_scores(pipeline.probe_heads(stage(None, "without"))), with_file)
    with pytest.raises(ValueError, match="fraction_dynamic 0.5 replaces heads: it needs constant matrices"):
        pipeline.probe_heads(stage(None, "half", fraction=0.5))


def test_a_probe_job_runs_its_dense_layers_on_the_real_tokens(job, tmp_path, monkeypatch, caplog):
    """On the CPU the model jobs run inside `papa.unpad.dense_on_real_tokens` (probe_heads here; averaging,
    lambdas and MLM alike): the log gives the share of the padded positions computed, that of the real tokens
    the job encoded, and the scores and train losses are those of the job computing every position."""
    enc = {s: papa.Encoded.load(job / f"{s}.parquet") for s in ("train", "validation")}
    real = sum(int((e.attention_mask != 0).sum()) for e in enc.values())
    share = real / sum(e.attention_mask.size for e in enc.values())
    assert share < 0.9  # the toy task is padded

    def stage(out):
        return pipeline.ProbeStage(
            model="minilm", constants=str(job / "average.safetensors"), lambdas=None,
            train=str(job / "train.parquet"), validation=str(job / "validation.parquet"),
            outs=[str(tmp_path / out / "seed0.parquet")], metrics=["accuracy"], selection="first_to_last",
            fraction_dynamic=0.5, seeds=[0], hparams=TrainConfig(lr=1e-3, batch_size=8, epochs=2, seed=0),
            labels={"model": "minilm", "task": "toy", "constants": "average", "selection": "first_to_last"},
        )  # fmt: skip

    with caplog.at_level(logging.INFO, logger="papa"):
        real_rows = _scores(pipeline.probe_heads(stage("real")))
    said = [r.getMessage() for r in caplog.records if "dense layers computed" in r.getMessage()]
    # what the share is (a batch over 75% real runs padded: "real tokens only" was not what a 94% said, review AZ)
    assert said == [f"dense layers computed {100 * share:.0f}% of the padded positions (the real tokens; a batch over "
                    f"75% real ran padded)"]  # fmt: skip
    unpad = pipeline.dense_on_real_tokens
    monkeypatch.setattr(pipeline, "dense_on_real_tokens", lambda m, enabled=None: unpad(m, enabled=False))
    pd.testing.assert_frame_equal(_scores(pipeline.probe_heads(stage("padded"))), real_rows, rtol=1e-6)


# ----------------------------------------------------------------------------- cache strategy


def test_choose_strategy_by_size():
    assert choose_strategy(10 * MB, "auto", budget_mb=16, disk_budget_mb=0) == "memory"
    assert choose_strategy(10 * MB, "auto", budget_mb=None, disk_budget_mb=0) == "memory"
    assert choose_strategy(10 * MB, "auto", budget_mb=10, disk_budget_mb=0) == "memory"  # an exact fit fits
    assert choose_strategy(10 * MB, "auto", budget_mb=5, disk_budget_mb=10) == "disk"
    assert choose_strategy(10 * MB, "auto", budget_mb=5, disk_budget_mb=None) == "disk"
    assert choose_strategy(10 * MB + 1, "auto", budget_mb=5, disk_budget_mb=10) == "reencode"
    for forced in ("memory", "disk", "reencode"):
        assert choose_strategy(10**15, forced, budget_mb=1, disk_budget_mb=1) == forced
        assert choose_strategy(1, forced, budget_mb=100, cacheable=False) == "reencode"
    with pytest.raises(ValueError, match="auto, memory, disk, reencode"):
        choose_strategy(1, "ram")


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_cache_size_is_known_exactly_before_encoding(minilm, dtype):
    model, tok = minilm
    seq = _toy(tok, 8)
    tagged = papa.encode(
        tok,
        [["John", "lives", "in", "Paris"], ["Mary", "likes", "Berlin"]] * 3,
        labels=[[1, 0, 0, 2], [1, 0, 2]] * 3,
        max_length=16,
    )
    for enc in (seq, tagged):
        assert cache_nbytes(model, enc, dtype) == extract_features(model, enc, dtype=dtype).nbytes


@pytest.mark.parametrize("batch_order", ["per_seed", "shared"])
def test_strategies_under_a_small_budget_give_the_same_scores(job, tmp_path, monkeypatch, batch_order):
    """At cache.budget_mb below the features: disk (fits the disk budget) and reencode (does
    not) run. float32: memory and disk identical; reencode equal within 1e-6 (scores) and 1e-5
    relative (losses) for every seed, under either batch order: the same batches, but hidden
    states computed in other batch shapes and pooled padded instead of ragged. So the scores do
    not depend on the memory or disk a machine has. The strategy and size are recorded, and the disk cache is
    made under cache.scratch (a node's own disk on a cluster), then removed."""
    scratch, reserved = tmp_path / "scratch", []
    reserve = probe_mod.reserve_disk
    monkeypatch.setattr(probe_mod, "reserve_disk", lambda path: reserved.append(Path(path)) or reserve(path))
    runs = {
        "memory": {"budget_mb": None},
        "disk": {"budget_mb": 0.01, "disk_budget_mb": 10_000, "scratch": str(scratch)},
        "reencode": {"budget_mb": 0.01, "disk_budget_mb": 0.01, "scratch": str(scratch)},
    }
    out = {}
    for name, cache in runs.items():
        frames = _run(job, tmp_path / name, {"dtype": "float32", "strategy": "auto", **cache}, batch_order=batch_order)
        df = pd.concat(frames)
        assert set(df.cache_strategy) == {name}
        assert df.model_revision.isna().all()  # recorded; MiniLM is a local folder, no hub commit
        out[name] = _scores(frames)
    model = papa.load_encoder("minilm")[0]
    size = sum(
        cache_nbytes(model, pipeline.read_tokens(job / f"{s}.parquet"), "float32") for s in ("train", "validation")
    )
    assert size > 0.01 * MB and set(df.cache_mb) == {size / MB}
    pd.testing.assert_frame_equal(out["memory"], out["disk"])
    mem, re = out["memory"], out["reencode"]
    assert (mem[["seed", "epoch", "metric"]] == re[["seed", "epoch", "metric"]]).all().all()
    assert set(mem.seed) == {0, 1}
    np.testing.assert_allclose(re.score, mem.score, atol=1e-6)
    np.testing.assert_allclose(re.train_loss, mem.train_loss, rtol=1e-5)
    assert len(reserved) == 2 and all(p.parent.parent == scratch for p in reserved), reserved  # train, validation
    assert not any(scratch.iterdir())  # the disk cache is gone


def test_float16_reencode_rounds_like_the_cache(minilm):
    """Re-encoded hidden states are rounded to cache.dtype, so float16 scores do not depend on the strategy."""
    model, tok = minilm
    enc = _toy(tok)
    cfg = TrainConfig(lr=1e-3, batch_size=8, epochs=2)
    with prepare_features(model, enc, enc, "memory", "float16") as mem:
        a = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=mem, seeds=[0, 1])
    with prepare_features(model, enc, enc, "reencode", "float16") as live:
        b = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=live, seeds=[0, 1])
    assert isinstance(live.train, LiveFeatures) and mem.strategy == "memory"
    assert [r["seed"] for r in a] == [r["seed"] for r in b] and {r["seed"] for r in a} == {0, 1}
    assert [r["score"] for r in a] == pytest.approx([r["score"] for r in b], abs=1e-6)
    assert [r["train_loss"] for r in a] == pytest.approx([r["train_loss"] for r in b], rel=1e-5)


def test_live_features_reach_the_probe_in_float32_whatever_the_models_dtype(minilm):
    """A bfloat16 model's hidden states (`LiveFeatures`: re-encoding, the lambdas' patched encoder) are cast to the
    probe's float32, unchanged (they failed in the probe); the batch keeps its order, mask and labels."""
    import copy

    from papa.probe import _hidden

    model, tok = minilm
    half = copy.deepcopy(model).to(torch.bfloat16)
    enc, idx = _toy(tok, 4), [2, 1]
    with torch.inference_mode():
        want = _hidden(half, enc.model_inputs(np.asarray(idx))).float()
    (x, mask), y = LiveFeatures(half, enc).batch(idx)
    assert x.dtype == torch.float32 and torch.equal(x, want)
    assert mask.tolist() == enc.attention_mask[idx].tolist() and y.tolist() == [1, 0]


def test_live_token_features_are_the_cached_ones_scored_tokens_and_tags(minilm):
    """A token task re-encoded (`LiveFeatures`) feeds the probe what the cache does: the first sub-words' hidden states
    of every layer and their tags, in example order; an unlabeled corpus caches -1 per example."""
    model, tok = minilm
    tagged = papa.encode(tok, [["John", "lives", "in", "Paris"], ["Mary", "likes", "Berlin"]], labels=[[1, 0, 0, 2],
                         [1, 0, 2]], max_length=16)  # fmt: skip
    x, y = LiveFeatures(model, tagged).batch([1, 0])
    cx, cy = extract_features(model, tagged, dtype="float32").batch([1, 0])
    assert y.tolist() == cy.tolist() == [1, 0, 2, 1, 0, 0, 2]
    torch.testing.assert_close(x, cx)
    unlabeled = extract_features(model, papa.encode(tok, TEXTS[:3], max_length=16))
    assert unlabeled.labels.tolist() == [-1, -1, -1]


def test_features_of_another_split_of_the_same_size_are_refused(minilm):
    """`check_features`: a cache of another split with as many examples but other labels, and re-encoded features of a
    split of another length, or of as many examples and tokens but other labels (review DS, left since stop 77),
    would train and score on the wrong hidden states, silently."""
    model, tok = minilm
    tr, cfg = _toy(tok, 6), TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    flipped = papa.encode(tok, TEXTS, labels=[0, 1] * 3, max_length=16)  # tr's texts, other labels
    texts = papa.encode(tok, TEXTS[::-1], labels=tr.labels.tolist(), max_length=16)  # other texts, tr's labels
    for strategy, other in (("memory", flipped), ("reencode", _toy(tok, 4)), ("reencode", flipped),
                            ("memory", texts), ("disk", texts), ("reencode", texts)):  # fmt: skip
        with prepare_features(model, other, other, strategy) as feats:
            with pytest.raises(ValueError, match=r"the train features were not prepared from the train split given "
                               r"beside them \(6 examples\)"):  # fmt: skip
                run_probe(model, tr, tr, "sequence", 2, ["accuracy"], cfg, features=feats)
    # a token task's cache with one scored word per example holds as many rows and the same labels as tr: its
    # kind tells it apart (a sequence probe fed token rows failed inside torch; mutation review of papa/probe.py)
    words = papa.encode(tok, [t.split()[:1] for t in TEXTS], labels=[[y] for y in tr.labels], max_length=16)
    cache = extract_features(model, words)
    assert len(cache) == len(tr) and cache.token_level and cache.labels.tolist() == tr.labels.tolist()
    with pytest.raises(ValueError, match=r"the train features were not prepared from the train split given beside"):
        run_probe(model, tr, tr, "sequence", 2, ["accuracy"], cfg, features=(cache, cache))


def test_a_sequence_tasks_unlabeled_examples_are_refused_before_training(minilm):
    """`check_labels`: -1 (an unlabeled corpus's mark) on a sequence task was scored as a wrong class; it fails
    naming the value and what to do."""
    from papa.probe import check_labels

    _, tok = minilm
    enc = _toy(tok, 4)
    with pytest.raises(ValueError, match=r"the validation labels hold -1, and class ids run from 0 .* drop the "
                       r"unlabeled examples"):  # fmt: skip
        check_labels(replace(enc, labels=np.array([1, 0, -1, 0])), 2, "validation")
    check_labels(enc, 2, "validation")


def test_a_disk_cache_is_removed_when_encoding_fails_and_an_exact_fit_is_taken(minilm, tmp_path, monkeypatch, caplog):
    """A disk cache whose encoding fails (out of memory, a signal) removes its folder at once, not when its traceback
    goes; a cache exactly the size of the disk or memory budget is kept there (and one that fits in memory leaves
    the disk budget unused: the log line says so)."""
    model, tok = minilm
    enc = _toy(tok, 6)
    total = 2 * cache_nbytes(model, enc, "float32") / MB
    with prepare_features(model, enc, enc, "disk", "float32", disk_budget_mb=total, scratch=str(tmp_path)) as feats:
        assert feats.strategy == "disk"
    with caplog.at_level(logging.INFO, logger="papa.probe"):
        with prepare_features(model, enc, enc, "auto", "float32", budget_mb=total, disk_budget_mb=0) as feats:
            assert feats.strategy == "memory"
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("feature cache: ")]
    assert len(said) == 1 and said[0].endswith("disk budget unused -> strategy memory"), said
    calls = []

    def fails_second(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return real(*a, **kw)

    real = probe_mod._hidden
    monkeypatch.setattr(probe_mod, "_hidden", fails_second)
    with pytest.raises(RuntimeError, match="boom") as failed:  # its traceback kept (a notebook's last error)
        extract_features(model, enc, batch_size=4, dtype="float32", scratch=str(tmp_path), strategy="disk")
    assert len(calls) == 2 and not list(tmp_path.iterdir()) and failed.traceback


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_cache_holds_the_models_hidden_states_rounded_as_numpy_rounds_them(minilm, dtype):
    """The cache rounds on the model's device (torch) instead of in NumPy (``astype``, slow for float16; a GPU
    sent twice the bytes): the same bits, the valid tokens' hidden states of every layer in order."""
    from papa.probe import _hidden

    model, tok = minilm
    enc = _toy(tok, 12)
    cache = extract_features(model, enc, dtype=dtype, batch_size=5)
    with torch.inference_mode():
        h = _hidden(model, enc.model_inputs(np.arange(len(enc))))
    rows = h.permute(0, 2, 1, 3)[torch.as_tensor(np.asarray(enc.attention_mask, dtype=bool))]
    expected = rows.float().numpy().astype(dtype)  # what the cache held before
    assert cache.data.dtype == np.dtype(dtype) and cache.data.shape == expected.shape
    assert np.array_equal(cache.data.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("batch_order", ["per_seed", "shared"])
def test_reencode_runs_the_encoder_every_epoch_of_every_seed_or_once_shared(minilm, batch_order):
    model, tok = minilm
    train, val = _toy(tok, 24), _toy(tok, 12)
    calls = []
    hook = model.register_forward_hook(lambda m, i, o: calls.append(1))
    try:
        with prepare_features(model, train, val, "reencode", "float32") as feats:
            run_probe(
                model,
                train,
                val,
                "sequence",
                2,
                ["accuracy"],
                TrainConfig(lr=1e-3, batch_size=8, epochs=2, eval_batch_size=8),
                features=feats,
                seeds=[0, 1, 2],
                batch_order=batch_order,
            )
    finally:
        hook.remove()
    per_epoch = 24 // 8 + 12 // 8 + 1  # 3 train + 2 validation batches
    assert len(calls) == 2 * per_epoch * (3 if batch_order == "per_seed" else 1)


def test_batch_order_changes_the_later_seeds_only(minilm):
    """per_seed: each seed its own batch order (independent runs); shared: every seed in the first
    seed's. The first seed is the same run either way; a later seed is not (its batches differ),
    and shared equals per_seed with every seed's order pinned to the first (cfg.shuffle_seed)."""
    model, tok = minilm
    enc = _toy(tok)
    cfg = TrainConfig(lr=1e-2, batch_size=8, epochs=2)
    with prepare_features(model, enc, enc, "memory", "float32") as feats:
        run = lambda order, c=cfg: pd.DataFrame(  # noqa: E731
            run_probe(model, enc, enc, "sequence", 2, ["accuracy"], c, features=feats, seeds=[0, 1], batch_order=order)
        )
        own, shared = run("per_seed"), run("shared")
        pinned = run("per_seed", replace(cfg, shuffle_seed=0))
        with pytest.raises(ValueError, match="per_seed, shared"):
            run("first")
    pd.testing.assert_frame_equal(own[own.seed == 0], shared[shared.seed == 0])
    assert not np.allclose(own[own.seed == 1].train_loss, shared[shared.seed == 1].train_loss)
    pd.testing.assert_frame_equal(shared, pinned)


def test_disk_cache_is_removed_however_the_job_ends(minilm, tmp_path, monkeypatch, caplog):
    model, tok = minilm
    enc = _toy(tok, 8)
    scratch = tmp_path / "scratch"
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
    with prepare_features(model, enc, enc, "disk", "float32", scratch=str(scratch)) as feats:
        assert feats.strategy == "disk" and isinstance(feats.train.data, np.memmap)
        assert len(list(scratch.glob("papa-features-*/features.npy"))) == 2
    # the block gives the caller's signal handlers back (read before any block: each block installs the same one)
    assert (
        not any(scratch.iterdir()) and (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == previous
    )
    with pytest.raises(RuntimeError, match="boom"):
        with prepare_features(model, enc, enc, "disk", "float32", scratch=str(scratch)):
            raise RuntimeError("boom")
    assert not any(scratch.iterdir())
    monkeypatch.setattr(papa.io, "STOPPED_BY", [])
    with pytest.raises(SystemExit):  # Slurm's time limit, Snakemake cancelling the job
        with prepare_features(model, enc, enc, "disk", "float32", scratch=str(scratch)):
            os.kill(os.getpid(), signal.SIGTERM)
    assert not any(scratch.iterdir()) and signal.getsignal(signal.SIGTERM) == previous[0]
    # the job's log then ends with the stop, not "finished" (SystemExit never reaches the excepthook)
    assert papa.io.STOPPED_BY == [signal.SIGTERM]
    monkeypatch.setattr(pipeline, "_JOB", {"failed": False, "stage": "ProbeStage", "t0": 0.0})
    with caplog.at_level(logging.INFO, logger="papa"):
        pipeline._log_job_end()
        monkeypatch.setattr(papa.io, "STOPPED_BY", [])
        pipeline._log_job_end()
    said = [r.getMessage() for r in caplog.records if "ProbeStage" in r.getMessage()]
    assert said[0].startswith("ProbeStage stopped by signal 15 after") and said[1].startswith("ProbeStage finished")


def test_disk_strategy_refuses_a_cache_larger_than_the_disk_budget(minilm, tmp_path, monkeypatch):
    model, tok = minilm
    enc = _toy(tok, 8)
    # the message says what to change
    # a disk_budget_mb given is the budget: raising it is the change (freeing space or moving scratch changes nothing)
    needle = r"disk budget under .* is 0 MB; raise cache.disk_budget_mb \(null = the free space\), or use strategy auto"
    with pytest.raises(OSError, match=needle):
        with prepare_features(model, enc, enc, "disk", budget_mb=0.001, disk_budget_mb=0.001, scratch=str(tmp_path)):
            pass
    # no disk_budget_mb: the budget is the scratch folder's free space (less a margin: `free_disk_mb`)
    monkeypatch.setattr(probe_mod, "free_disk_mb", lambda scratch: 0.0)
    needle = r"disk budget under .* is 0 MB; free space, set cache.scratch, or use strategy auto or reencode"
    with pytest.raises(OSError, match=needle):
        with prepare_features(model, enc, enc, "disk", budget_mb=0.001, scratch=str(tmp_path)):
            pass


# ----------------------------------------------------------------------------- authors' options


def test_max_grad_norm_clips_what_the_optimizer_sees(minilm):
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    model, tok = minilm
    enc = _toy(tok)
    cache = extract_features(model, enc, dtype="float32")
    norms = []

    def seen(opt, args, kwargs):
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        norms.append(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item())

    handle = register_optimizer_step_pre_hook(seen)
    try:
        cfg = TrainConfig(lr=1e-3, batch_size=8, epochs=1)
        run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=(cache, cache))
        free = norms[:]
        norms.clear()
        run_probe(
            model,
            enc,
            enc,
            "sequence",
            2,
            ["accuracy"],
            TrainConfig(**{**vars(cfg), "max_grad_norm": 0.01}),
            features=(cache, cache),
        )
    finally:
        handle.remove()
    assert min(free) > 0.01 and max(norms) <= 0.01 * (1 + 1e-5)
    assert pipeline.train_config({"lr": 1, "batch_size": 1, "epochs": 1, "max_grad_norm": 1}, 0).max_grad_norm == 1.0
    assert pipeline.train_config({"lr": 1, "batch_size": 1, "epochs": 1}, 0).max_grad_norm is None


def test_clipping_covers_the_patch_parameters_trained_with_the_probe():
    """Mutation review DT: max_grad_norm clips the norm of everything that trains (TrainConfig's word), the lambdas
    or trained constants with the probe; the clip was checked on a probe alone, so clipping only the probe's
    gradients (a patch parameter's steep gradient left whole) passed unseen."""
    from papa.probe import _SeedRun

    torch.manual_seed(0)
    probe, w = torch.nn.Linear(4, 2), torch.nn.Parameter(torch.ones(3))
    run = _SeedRun(probe, TrainConfig(lr=1e-3, batch_size=4, epochs=1, max_grad_norm=0.01), [w])
    x, y = torch.randn(4, 4), torch.tensor([0, 1, 0, 1])
    loss = lambda out, y: torch.nn.functional.cross_entropy(out, y) + 10 * (w**2).sum()  # noqa: E731
    run.step(x, y, loss, 4)
    norms = torch.stack([torch.linalg.vector_norm(p.grad) for p in (*probe.parameters(), w)])
    assert torch.linalg.vector_norm(norms) <= 0.01 * (1 + 1e-5)
    # w's share: its gradient (20 w) is ~35 times the probe's before clipping, so it is most of the clipped norm
    assert torch.linalg.vector_norm(w.grad) > 0.9 * 0.01
    assert run.seen == 4 and run.total == pytest.approx(4 * (30 + math.log(2)), rel=0.05)


def test_train_probes_takes_one_seed_and_state_per_probe_and_patch_parameters_with_one_probe_only():
    """Mutation review DT: train_probes' own checks were not tested: seeds (or random-number states) fewer than the
    probes trained the extra probes unnamed (zip cut them off the error messages) or failed with an IndexError, and
    patch parameters shared by several probes would train once per probe per batch."""
    from papa.probe import train_probes

    feats, cfg = TensorFeatures(8), TrainConfig(lr=1e-3, batch_size=4, epochs=2)
    torch.manual_seed(0)
    probes = [torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)]
    state = (torch.get_rng_state(), None)
    for kw in (dict(seeds=[0]), dict(seeds=[0, 1, 2]), dict(rng_states=[state]), dict(rng_states=[state] * 3)):
        with pytest.raises(ValueError, match="one seed and one random-number state per probe"):
            train_probes(probes, feats, feats, cfg, ["accuracy"], **kw)
    for kw in (dict(live=True), dict(extra_params=[torch.nn.Parameter(torch.zeros(2))])):
        with pytest.raises(ValueError, match="train one probe at a time"):
            train_probes(probes, feats, feats, cfg, ["accuracy"], seeds=[0, 1], **kw)
    rows = train_probes(probes, feats, feats, cfg, ["accuracy"], seeds=[0, 1])
    assert [[(r["epoch"], r["metric"]) for r in per] for per in rows] == [[(1, "accuracy"), (2, "accuracy")]] * 2


def test_backbone_dropout_changes_features_run_to_run_only_when_on(minilm):
    model, tok = minilm
    enc = _toy(tok, 8)
    idx = np.arange(8)

    def twice(**kw):
        f = LiveFeatures(model, enc, **kw)
        return f.batch(idx)[0][0], f.batch(idx)[0][0]

    a, b = twice(train_mode=False)
    assert torch.equal(a, b)
    c, d = twice(train_mode=True)
    assert not torch.equal(c, d) and not torch.equal(a, c)
    assert not model.training and not any(p.requires_grad for p in model.parameters())
    with prepare_features(model, enc, enc, strategy="memory", backbone_dropout=True) as feats:
        assert feats.strategy == "reencode" and feats.train.train_mode and not feats.validation.train_mode


def test_probes_give_back_every_modules_own_mode(minilm):
    """prepare_features, run_probe (re-encoding) and learn_lambdas gave back the root module's mode only: a model
    whose parts were in mixed modes came back with all of them in the root's. Each module's own mode comes back."""
    model, tok = minilm
    enc = _toy(tok, 8)
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    model.eval()
    model.encoder.layer[1].train()
    try:
        modes = {name: m.training for name, m in model.named_modules()}
        assert any(modes.values()) and not all(modes.values())
        with prepare_features(model, enc, enc, "memory", "float32"):
            pass
        assert {name: m.training for name, m in model.named_modules()} == modes
        run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, seeds=[0], backbone_dropout=True)
        assert {name: m.training for name, m in model.named_modules()} == modes
        C = papa.average_attention(model, enc.batches(8))
        assert {name: m.training for name, m in model.named_modules()} == modes
        papa.learn_lambdas(model, C, enc, enc, "sequence", 2, ["accuracy"], cfg, backbone_dropout=True)
        assert {name: m.training for name, m in model.named_modules()} == modes
    finally:
        model.eval()


def test_probes_give_back_the_callers_random_state(minilm):
    """run_probe and learn_lambdas seed torch's global generator (each probe's initialisation and dropout come
    from its seed) and left it so: a notebook's draws after them repeated the probe seed's, run after run. The
    caller's state comes back; the probes' numbers are the seeds' alone."""
    model, tok = minilm
    enc = _toy(tok, 8)
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    C = papa.average_attention(model, enc.batches(8))
    torch.manual_seed(123)
    expected = torch.rand(3)
    rows = []
    for call in (lambda: run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, seeds=[0], backbone_dropout=True),
                 lambda: papa.learn_lambdas(model, C, enc, enc, "sequence", 2, ["accuracy"], cfg)):  # fmt: skip
        torch.manual_seed(123)
        rows.append(call())
        assert torch.equal(torch.rand(3), expected)
    torch.manual_seed(7)  # another state before: the same probe
    assert run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, seeds=[0], backbone_dropout=True) == rows[0]


def test_the_callers_queued_cuda_seed_is_kept_where_cuda_is_not_started():
    """Review BK: where CUDA is not started (a CPU model in a notebook on a GPU machine, and this machine), a seed the
    caller gave torch.cuda.manual_seed waits in torch's queue until CUDA starts, and the probe's torch.manual_seed
    replaced it: the caller's GPU draws later were the probe seed's. The queue is given back as it was (review BR:
    starting CUDA to fork its states instead cost its start-up and failed in a forked worker)."""
    from papa.probe import keeps_global_rng

    tracker = torch.cuda._lazy_seed_tracker
    if torch.cuda.is_initialized() or tracker is None:
        pytest.skip("CUDA started: its seeds are forked as states")
    before = dict(vars(tracker))
    try:
        torch.cuda.manual_seed(5)  # the caller's, queued
        queued = dict(vars(tracker))
        assert queued != before
        keeps_global_rng(lambda model: torch.manual_seed(0))(None)  # the probe's seed replaced it in the queue
        assert vars(tracker) == queued
    finally:
        vars(tracker).update(before)


def test_cached_features_are_the_frozen_encoders_whatever_mode_the_model_is_in(minilm):
    """A model left in train mode (a notebook's model.train()) drew dropout noise into the cache, a new draw each
    time: the cache is encoded in eval mode, as LiveFeatures runs it, and the model's mode is given back. Features
    used after their with block fail saying so (they failed deep in training: 'NoneType' is not subscriptable)."""
    model, tok = minilm
    enc = _toy(tok, 8)
    eval_cache = extract_features(model, enc, dtype="float32")
    model.train()
    try:
        train_cache = extract_features(model, enc, dtype="float32")
        assert model.training
    finally:
        model.eval()
    assert np.array_equal(eval_cache.data, train_cache.data)
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    with prepare_features(model, enc, enc, "memory", "float32") as feats:
        pass
    with pytest.raises(ValueError, match=r"the train features were closed when their prepare_features block "
                       r"ended: train the probes inside the with block"):  # fmt: skip
        run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=feats, seeds=[0])


def test_re_encoded_features_end_with_their_block_as_a_cache_does(minilm):
    """Re-encoded features (strategy reencode, what a cache too large for memory and disk gets) run the model as it
    is when a batch is read: used after their with block, where a patch entered with it is gone, a probe trained on
    the unpatched model without a word (a cache's features failed there, saying so). They end with the block too,
    in run_probe's check and at a batch read; inside it they train."""
    model, tok = minilm
    enc = _toy(tok, 8)
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    with prepare_features(model, enc, enc, "reencode", "float32") as feats:
        assert feats.strategy == "reencode"
        inside = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=feats, seeds=[0])
    assert len(inside) == 1
    with pytest.raises(ValueError, match=r"^the train features were closed when their prepare_features block "
                       r"ended: train the probes inside the with block$"):  # fmt: skip
        run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=feats, seeds=[0])
    with pytest.raises(ValueError, match=r"^the features were closed when their prepare_features block ended"):
        feats.validation.batch([0, 1])


def test_lambdas_on_constants_of_another_length_and_a_patch_for_trainable_fail_before_any_work(minilm, monkeypatch):
    """Constants of another N than the inputs failed only at the first training batch (deep in the forward pass);
    a patch handle given as trainable (a callable making one per seed) failed after the probes were built."""
    from papa.patching import SequenceLengthMismatch

    model, tok = minilm
    enc = _toy(tok, 8)  # N = 16
    C = papa.average_attention(model, papa.encode(tok, TEXTS, max_length=24).batches(8))
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)

    def no_work(*a, **k):
        raise AssertionError("a probe was built")

    monkeypatch.setattr(probe_mod, "build_probe", no_work)
    with pytest.raises(SequenceLengthMismatch, match=r"The constant matrices are 24x24 but the input has sequence "
                       r"length 16"):  # fmt: skip
        probe_mod.learn_lambdas(model, C, enc, enc, "sequence", 2, ["accuracy"], cfg)
    C16 = papa.average_attention(model, enc.batches(8))
    handle = papa.patch(model, C16, trainable_constants=True)
    try:
        with pytest.raises(TypeError, match=r"trainable must be a callable that makes a new patch for each seed"
                           r".*got PatchHandle \(it has patched the model already: handle.remove\(\)"):  # fmt: skip
            run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, trainable=handle)
    finally:
        handle.remove()


def test_encoder_options_with_prepared_features_are_refused_before_training(minilm, monkeypatch):
    """Mutation review DT: run_probe's refusals of what prepared features cannot do were untested: dropout inside the
    encoder (``backbone_dropout``: the features are fixed) and trained constants (``trainable``: the encoder must
    run in the loop) trained on the prepared features instead, without the option and without a word."""
    model, tok = minilm
    enc = _toy(tok, 8)
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    C = papa.average_attention(model, enc.batches(8))

    def no_training(*a, **kw):
        raise AssertionError("trained with an option the prepared features cannot take")

    monkeypatch.setattr(probe_mod, "train_probes", no_training)
    with prepare_features(model, enc, enc, "memory", "float32") as feats:
        with pytest.raises(ValueError, match=r"backbone_dropout applies to features=None; prepared features take "
                           r"it from prepare_features\(\.\.\., backbone_dropout=True\)"):  # fmt: skip
            run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=feats, backbone_dropout=True)
        trainable = lambda: papa.patch(model, C, trainable_constants=True)  # noqa: E731
        with pytest.raises(ValueError, match="trained patch parameters need the encoder in the loop: pass features"):
            run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=feats, trainable=trainable)


def test_what_the_trainers_hand_train_probes_dropout_in_the_training_batches_and_the_seeds_to_come(minilm, monkeypatch):
    """Mutation review DT: what run_probe and learn_lambdas hand train_probes was checked by its effects only where
    those show: ``backbone_dropout`` off in the training batches, or on in the validation ones (scored with dropout,
    run to run alike under one seed), and the seeds still to come (the logged ETA) passed every test. With the
    encoder in the loop, the training features run in train mode exactly when ``backbone_dropout`` is on, the
    validation features never; each seed's training counts the seeds after it, trained constants' too."""
    model, tok = minilm
    enc = _toy(tok, 8)
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    C = papa.average_attention(model, enc.batches(8))
    calls = []

    def spy(probes, train, validation, *a, runs_after=0, **kw):
        calls.append((train.train_mode, validation.train_mode, runs_after))
        return [[] for _ in probes]

    monkeypatch.setattr(probe_mod, "train_probes", spy)
    for dropout in (False, True):
        calls.clear()
        run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, seeds=[0, 1, 2], backbone_dropout=dropout)
        assert calls == [(dropout, False, 2), (dropout, False, 1), (dropout, False, 0)], dropout
        calls.clear()
        probe_mod.learn_lambdas(model, C, enc, enc, "sequence", 2, ["accuracy"], cfg, backbone_dropout=dropout)
        assert calls == [(dropout, False, 0)], dropout
    calls.clear()
    trainable = lambda: papa.patch(model, C, trainable_constants=True)  # noqa: E731
    run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, seeds=[0, 1], trainable=trainable)
    assert calls == [(False, False, 1), (False, False, 0)]


def test_trained_constants_train_with_each_seed_under_either_batch_order(minilm, monkeypatch):
    """Mutation review DT: run_probe's side-by-side branch (batch_order shared) without its ``trainable is None``
    trained every seed on the unpatched encoder, the trained constants never made, and passed every test (the
    workflow's one-job-per-seed test compares runs equally without them). Each seed makes its patch and trains its
    parameters live, one seed after the other, under either batch order."""
    model, tok = minilm
    enc = _toy(tok, 8)
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    C = papa.average_attention(model, enc.batches(8))
    made, calls = [], []

    def trainable():
        made.append(1)
        return papa.patch(model, C, trainable_constants=True)

    def spy(probes, train, validation, *a, extra_params=(), live=False, **kw):
        calls.append((len(probes), len(list(extra_params)) > 0, live))
        return [[] for _ in probes]

    monkeypatch.setattr(probe_mod, "train_probes", spy)
    for order in ("per_seed", "shared"):
        made.clear()
        calls.clear()
        run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, seeds=[0, 1], trainable=trainable,
                  batch_order=order)  # fmt: skip
        assert len(made) == 2 and calls == [(1, True, True)] * 2, order


def test_notebook_entry_points_refuse_a_misspelled_setting(job, tmp_path, monkeypatch):
    """`run_probes`, `run_lambda` and `run_mlm` read only the settings they know: a misspelled one ran with the
    default without a word (the workflow's schema refuses it). They refuse it, naming the key and the right one."""
    with pytest.raises(ValueError, match=r"unknown probe setting 'weight_decy' \(did you mean 'weight_decay'\?\)"):
        _run(job, tmp_path, {}, seeds=[0], hp={"weight_decy": 5.0})
    args = ("minilm", job / "average.safetensors", job / "train.parquet", job / "validation.parquet")
    with pytest.raises(ValueError, match=r"unknown lambda setting 'sed' \(did you mean 'seed'\?\)"):
        pipeline.run_lambda(*args, {"metrics": ["accuracy"]}, {"lr": 1e-2, "batch_size": 8, "epochs": 1, "sed": 3},
                            tmp_path / "l.parquet", tmp_path / "m.parquet", {"task": "toy"})  # fmt: skip
    with pytest.raises(ValueError, match=r"unknown mlm setting 'mask_p' \(did you mean 'mask_prob'\?\)"):
        pipeline.run_mlm(*args, {"mask_p": 0.2}, [1], tmp_path / "s.parquet", tmp_path / "l.parquet", {})
    with pytest.raises(ValueError, match=r"unknown lambda setting 'extra_rl'"):
        pipeline.run_mlm(*args, {"lambda": {"extra_rl": 0.1}}, [1], tmp_path / "s.parquet", tmp_path / "l.parquet", {})
    # analyses.mlm.lambda holds no seed or max_train (the MLM block's seed and max_train draw for its lambda stage):
    # a notebook's there were read by nothing
    for key, value in (("seed", 3), ("max_train", 4)):
        with pytest.raises(ValueError, match=rf"unknown lambda setting '{key}'"):
            pipeline.run_mlm(*args, {"lambda": {key: value}}, [1], tmp_path / "s.parquet", tmp_path / "l.parquet", {})
    # the block of the lambda stage's settings holds seed, the probe's not (papa.checks refuses tasks.<t>.probe.seed):
    # a notebook's seed there ran the probes with the seeds argument's, without a word
    with pytest.raises(ValueError, match=r"probe setting 'seed' is not used: the probes' seeds are run_probes' seeds"):
        _run(job, tmp_path, {}, seeds=[0], hp={"seed": 5})
    for order in ("per_seed", "shared"):  # an empty list of seeds failed on a bare IndexError
        with pytest.raises(ValueError, match="run_probes: seeds is empty: give at least one seed"):
            _run(job, tmp_path, {}, seeds=[], batch_order=order)
    assert not list(tmp_path.iterdir())  # refused before any work
    # the paper's settings as papa.probe.PAPER_HPARAMS gives them (with the tokens' max_length) are a block
    pipeline._check_block_keys(papa.probe.PAPER_HPARAMS["sst2"], "probe")
    pipeline._check_block_keys(papa.probe.PAPER_HPARAMS["sst2"], "lambda")
    # a lambda block without a seed runs with the top-level seed's default, 0 (its draw and its trainer alike)
    stages = []
    monkeypatch.setattr(pipeline, "learn_lambda", stages.append)
    pipeline.run_lambda(*args, {"metrics": ["accuracy"]}, {"lr": 1e-2, "batch_size": 8, "epochs": 1},
                        tmp_path / "l.parquet", tmp_path / "m.parquet", {"task": "toy"})  # fmt: skip
    assert stages[0].seed == stages[0].hparams.seed == 0
    pipeline.run_lambda(*args, {"metrics": ["accuracy"]}, {"lr": 1e-2, "batch_size": 8, "epochs": 1, "seed": 3},
                        tmp_path / "l.parquet", tmp_path / "m.parquet", {"task": "toy"})  # fmt: skip
    assert stages[1].seed == stages[1].hparams.seed == 3  # the block's seed draws max_train's subset too
    # a notebook's cache block without budget_mb keeps its hidden states in memory without a limit, as before; the
    # order seed seeds the random head order and the max_train draw
    probes = []
    monkeypatch.setattr(pipeline, "probe_heads", probes.append)
    _run(job, tmp_path, {}, seeds=[0])
    _run(job, tmp_path, {"budget_mb": 100}, seeds=[0], hp={"order_seed": 2})
    assert [s.cache.budget_mb for s in probes] == [None, 100] and probes[1].order_seed == probes[1].seed == 2


def test_the_lambda_stage_runs_its_model_padded_under_torch_compile(job, tmp_path, monkeypatch):
    """`learn_lambda` passes its ``compile`` on to `real_tokens_only`: under ``torch.compile`` the dense layers run
    padded (the gather's shapes depend on the data; mutation testing: not checked). The training is faked."""
    seen = []
    unpad = pipeline.dense_on_real_tokens
    monkeypatch.setattr(pipeline, "dense_on_real_tokens",
                        lambda m, enabled=None: seen.append(enabled) or unpad(m, enabled=enabled))  # fmt: skip
    monkeypatch.setattr(pipeline, "learn_lambdas",
                        lambda m, *a, **kw: (torch.rand(*pipeline.model_shape(m)), [{"epoch": 1}]))  # fmt: skip
    stage = pipeline.LambdaStage(
        model="minilm", constants=str(job / "average.safetensors"), train=str(job / "train.parquet"),
        validation=str(job / "validation.parquet"), out_lambdas=str(tmp_path / "l.parquet"),
        out_metrics=str(tmp_path / "m.parquet"), metrics=["accuracy"], compile="default", labels={"task": "toy"},
        hparams=pipeline.train_config({"lr": 1e-2, "batch_size": 8, "epochs": 1}, 0),
    )  # fmt: skip
    pipeline.learn_lambda(stage)
    assert seen == [False]


def test_backbone_dropout_runs_the_pipeline_by_reencoding(job, tmp_path):
    frames = _run(
        job,
        tmp_path,
        {"dtype": "float32", "strategy": "memory"},
        seeds=[0],
        hp={"epochs": 1, "backbone_dropout": True, "max_grad_norm": 1.0},
    )
    assert set(frames[0].cache_strategy) == {"reencode"}
    out = {}
    for dropout in (False, True):  # the lambda stage reads the same hparams
        pipeline.run_lambda(
            "minilm",
            job / "average.safetensors",
            job / "train.parquet",
            job / "validation.parquet",
            {"metrics": ["accuracy"]},
            {"lr": 1e-2, "batch_size": 8, "epochs": 1, "backbone_dropout": dropout, "max_grad_norm": 1.0},
            tmp_path / f"l{dropout}.parquet",
            tmp_path / f"m{dropout}.parquet",
            {"model": "minilm", "task": "toy"},
        )
        df = pd.read_parquet(tmp_path / f"l{dropout}.parquet")
        out[dropout] = df["lambda"].to_numpy()
        # the lambda table's columns: the labels first (each prepended in turn, as every job's table has them), then
        # a row per head and the model's hub commit (none: a local model); the metrics table's labels alike
        assert list(df.columns) == ["task", "model", "layer", "head", "lambda", "rank", "model_revision"]
        assert df["model_revision"].isna().all()
        assert list(pd.read_parquet(tmp_path / f"m{dropout}.parquet").columns[:2]) == ["task", "model"]
    assert not np.array_equal(out[False], out[True])


def test_schema_knows_the_cache_strategy_and_the_authors_options():
    import yaml
    from snakemake.utils import validate

    root = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((root / "config/smoke.yaml").read_text())
    for t in cfg["tasks"].values():
        t["probe"].update(max_grad_norm=1.0, backbone_dropout=True)
    cfg["cache"].update(strategy="reencode", disk_budget_mb=None, scratch="/tmp")
    validate(cfg, str(root / "workflow/schemas/config.schema.yaml"))
    cfg["cache"]["strategy"] = "ram"
    with pytest.raises(Exception, match="ram"):
        validate(cfg, str(root / "workflow/schemas/config.schema.yaml"))


# ----------------------------------------------------------------------------- paper-scale cost


@pytest.mark.slow  # a Snakemake dry run of the whole paper grid (~18 s): `make test`, not the fast tier
def test_cost_estimate_of_the_paper_grid(monkeypatch):
    import yaml

    from papa.cost import estimate, workflow_jobs

    root = Path(__file__).resolve().parents[1]
    paper = yaml.safe_load((root / "config/paper.yaml").read_text())
    monkeypatch.chdir(root / "config")  # a config path relative to the caller's folder, not to root (review AG)
    probes, lambdas, averages, mlm = workflow_jobs("paper.yaml", root)
    assert ("bert-base", "cola", "average", "lambda", 0.5) in probes and ("bert-base", "cola", "average") in lambdas
    # averaging: each model's corpora and kinds at each N (MNLI also at 64 and 128: Table 2's cross-corpus matrices)
    assert {("deberta-large", "mnli", 256, "effective"), ("bert-base", "mnli", 64, "average")} <= set(averages)
    assert not {kind for *_, kind in averages} - {"average", "effective"}  # the data-free kinds need no GPU
    base = ("bert-base", "deberta-base", "electra-base", "roberta-base")  # analyses.mlm.models
    assert sorted(mlm) == [(m, "wikitext103", 128) for m in base]
    df = estimate(paper, probes, lambdas, tokens_per_s=2e5, disk_budget_mb=500 * 1024).set_index(
        ["stage", "model", "task", "constants", "selection", "fraction_dynamic"]
    )
    assert len(df) == len(probes) + len(lambdas)
    mnli = df.loc[("probe", "bert-large", "mnli", "average", "lambda", 0.5)]
    assert mnli.strategy == "reencode" and mnli.cache_mb > 500 * 1024
    # re-encoded every epoch of every seed (sweep.batch_order per_seed), as the authors did
    assert mnli.passes_ours == 3 * 4 * (392_702 + 9_832) and mnli.passes_authors == mnli.passes_ours
    shared = estimate({**paper, "sweep": {**paper["sweep"], "batch_order": "shared"}}, probes, lambdas, 2e5, 500 * 1024)
    shared = shared.set_index(["stage", "model", "task", "constants", "selection", "fraction_dynamic"])
    mnli = shared.loc[("probe", "bert-large", "mnli", "average", "lambda", 0.5)]
    assert mnli.passes_ours == 4 * (392_702 + 9_832) and mnli.passes_authors == 3 * mnli.passes_ours
    cola = df.loc[("probe", "bert-base", "cola", "average", "lambda", 0.5)]
    assert cola.strategy == "memory" and cola.passes_ours == 8_551 + 1_043
    assert cola.passes_authors == 3 * 15 * cola.passes_ours
    assert (df.passes_authors >= df.passes_ours).all()


def test_cost_estimate_uses_the_schemas_cache_defaults():
    """A config without a cache section is estimated with the defaults the workflow runs with (the
    schema's budget_mb, 4096), not with an unlimited memory budget."""
    import yaml

    from papa.cost import estimate

    root = Path(__file__).resolve().parents[1]
    paper = yaml.safe_load((root / "config/paper.yaml").read_text())
    jobs = [("bert-large", "mnli", "average", "lambda", 0.5), ("bert-base", "cola", "average", "lambda", 0.5)]
    lambdas = [("bert-base", "cola", "average")]
    paper.pop("cache")
    df = estimate(paper, jobs, lambdas, tokens_per_s=2e5, disk_budget_mb=None)  # no disk limit
    assert "cache" not in paper  # the caller's config is left as it was
    probes = df[df.stage == "probe"].set_index("task")
    assert probes.loc["mnli", "cache_mb"] > 4096 and probes.loc["mnli", "strategy"] == "disk"
    assert probes.loc["cola", "cache_mb"] < 4096 and probes.loc["cola", "strategy"] == "memory"


def test_disk_caches_of_killed_jobs_are_cleared_on_the_next_run(minilm, tmp_path):
    """A SIGKILLed job cannot clean up: the next disk cache under the same scratch, or the next probe job's features
    wherever they go, removes the folders of this host's dead processes, and leaves live processes' and other
    hosts' alone."""
    import socket
    import subprocess

    model, tok = minilm
    host = socket.gethostname()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"papa-features-{host}-{dead.pid}-abcd1234"
    live = tmp_path / f"papa-features-{host}-{os.getpid()}-efgh5678"
    other = tmp_path / f"papa-features-elsewhere-{dead.pid}-ijkl9012"
    for d in (stale, live, other):
        d.mkdir()
        (d / "features.npy").write_bytes(b"x")
    cache = extract_features(model, _toy(tok, 8), dtype="float32", budget_mb=0.0001, scratch=str(tmp_path))
    assert not stale.exists() and live.exists() and other.exists()
    assert Path(cache.folder).name.startswith(f"papa-features-{host}-{os.getpid()}-")
    cache.close()
    # a probe job whose features fit in memory (a resume after the kill, with more memory) removes them too
    stale.mkdir()
    (stale / "features.npy").write_bytes(b"x")
    from papa.probe import prepare_features

    enc = _toy(tok, 8)
    with prepare_features(model, enc, enc, strategy="memory", scratch=str(tmp_path)):
        assert not stale.exists() and live.exists() and other.exists()


def test_remove_stale_caches_returns_the_folders_it_removed(tmp_path):
    """`remove_stale_caches` (public: notebooks, a clean-up script) returns the folders it removed, and only those."""
    import socket
    import subprocess

    from papa.probe import remove_stale_caches

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"papa-features-{socket.gethostname()}-{dead.pid}-abcd1234"
    live = tmp_path / f"papa-features-{socket.gethostname()}-{os.getpid()}-efgh5678"
    for d in (stale, live):
        d.mkdir()
    assert remove_stale_caches(str(tmp_path)) == [str(stale)]
    assert [d.name for d in tmp_path.iterdir()] == [live.name]
    assert remove_stale_caches(str(tmp_path)) == []


# ----------------------------------------------------------------------------- bad input fails before training


@pytest.fixture
def no_training(monkeypatch):
    """Training fails the test: what it checks is refused before the first step."""

    def trained(*a, **kw):
        raise AssertionError("trained before checking its inputs")

    monkeypatch.setattr(probe_mod, "train_probes", trained)


@pytest.mark.parametrize(
    "metrics, n_labels, error, needle",
    [
        ("accuracy", 2, TypeError, r"write \['accuracy'\]"),
        (["acc"], 2, ValueError, "Unknown metric 'acc'"),
        (["f1"], 3, ValueError, "use macro_f1"),
        (["pos_f1"], 2, ValueError, "does not score a sequence task"),
        (["accuracy"], 1, ValueError, "n_labels=1"),
    ],
)
@pytest.mark.usefixtures("no_training")
def test_probe_inputs_fail_before_any_training(minilm, metrics, n_labels, error, needle):
    """What the metrics or the label count would break after an epoch (sklearn on a 3-class binary F1, a
    metric name, torch's index error) fails before the first step, in run_probe and learn_lambdas alike."""
    model, tok = minilm
    enc = _toy(tok, 8)

    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    with pytest.raises(error, match=needle):
        run_probe(model, enc, enc, "sequence", n_labels, metrics, cfg)
    C = papa.average_attention(model, enc.batches(4))
    with pytest.raises(error, match=needle):
        probe_mod.learn_lambdas(model, C, enc, enc, "sequence", n_labels, metrics, cfg)


@pytest.mark.usefixtures("no_training")
def test_labels_no_probe_can_score_fail_before_any_training(minilm):
    """-100 marks a token task's sub-words and padding: in a sequence task's labels it was dropped from training and
    scored as always wrong (an all -100 validation split gave accuracy 0.0); a token split whose every label is
    -100 left scikit-learn an empty array after training. Both now fail first, in run_probe and learn_lambdas."""
    model, tok = minilm

    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    enc = _toy(tok, 8)
    ignored = replace(enc, labels=np.where(np.arange(8) == 2, -100, enc.labels))
    words = [["a", "good", "film"], ["bad", "plot"], ["fine"]]
    tags = papa.encode(tok, words, labels=[[0, 1, 0], [1, 0], [1]], max_length=16)
    untagged = replace(tags, labels=np.full_like(tags.labels, -100))
    C = papa.average_attention(model, enc.batches(4))
    for train, val, kind, needle in (
        (enc, ignored, "sequence", "the validation labels hold -100, and class ids run from 0"),
        (ignored, enc, "sequence", "the train labels hold -100"),
        (tags, untagged, "token", "the validation split has no labeled token"),
    ):
        with pytest.raises(ValueError, match=needle):
            run_probe(model, train, val, kind, 2, ["accuracy" if kind == "sequence" else "pos_f1"], cfg)
        with pytest.raises(ValueError, match=needle):
            probe_mod.learn_lambdas(
                model, C, train, val, kind, 2, ["accuracy" if kind == "sequence" else "pos_f1"], cfg
            )


def test_entity_f1_needs_tags_that_mark_chunks():
    """seqeval reads tags without a B-/I- prefix as one-token chunks of their own type: entity_f1 on POS tags is
    pos_seqeval_f1 under another name, refused saying so; BIO and IOBES tag sets pass."""
    from papa.metrics import check_metrics, chunk_tagged

    with pytest.raises(ValueError, match="metric 'entity_f1' scores entity chunks of BIO tags .* use pos_seqeval_f1"):
        check_metrics(["entity_f1"], "token", 3, ["NN", "VBD", "DT"])
    assert check_metrics(["pos_seqeval_f1"], "token", 3, ["NN", "VBD", "DT"]) == ["pos_seqeval_f1"]
    with pytest.raises(ValueError, match=r"the tags here \(NN, VB, DT, IN, JJ, \.\.\.\) have no chunk prefix"):
        check_metrics(["entity_f1"], "token", 7, ["NN", "VB", "DT", "IN", "JJ", "RB", "CC"])  # the first five shown
    from papa.metrics import compute

    pos = ["NN", "VBD", "DT"]  # POS tags read by seqeval: no warning per tag in the job's log
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compute("pos_seqeval_f1", np.array([[0, 1, 2]]), np.array([[0, 1, 2]]), pos) == 1.0
    with pytest.raises(ValueError, match=r"pos_seqeval_f1: y_pred holds tag id -1, and label_names names 3 tags"):
        compute("pos_seqeval_f1", np.array([[0, 1, 2]]), np.array([[0, 1, -1]]), pos)  # not the last tag's id
    for names in (["O", "B-PER", "I-PER"], ["O", "S-LOC", "E-LOC"], ["B-NP", "I-NP"]):
        assert chunk_tagged(names) and check_metrics(["entity_f1"], "token", len(names), names) == ["entity_f1"]
    assert not chunk_tagged(["O", "B", "-LRB-", "IN"]) and not chunk_tagged(["", "O"])  # an empty tag name too


def test_binary_metrics_take_two_labels_and_refuse_more():
    """`check_metrics`: binary F1 (positive class = label 1) scores a task of two labels (MRPC, SST-2) and is
    refused, naming the macro metric to use, from three labels on; the other metrics take any label count."""
    from papa.metrics import check_metrics

    assert check_metrics(["f1", "mcc", "accuracy"], "sequence", n_labels=2) == ["f1", "mcc", "accuracy"]
    for n in (3, 4):
        with pytest.raises(ValueError, match=rf"metric 'f1' is binary F1 .* the task has {n} labels; use macro_f1"):
            check_metrics(["accuracy", "f1"], "sequence", n_labels=n)
        assert check_metrics(["macro_f1", "mcc"], "sequence", n_labels=n) == ["macro_f1", "mcc"]
    # the labels, gold or predicted, hold a third class: refused naming binary F1, not sklearn's "multiclass"
    from papa.metrics import compute

    for gold, pred in (([0, 1, 1], [0, 2, 1]), ([0, 2, 1], [0, 1, 1])):
        with pytest.raises(
            ValueError, match=r"f1 is binary F1 \(positive class = label 1\), and the labels hold \[2\]"
        ):
            compute("f1", np.array(gold), np.array(pred))
    assert compute("accuracy", np.array([True, False, True]), np.array([1, 0, 0])) == 2 / 3  # bools are 1 and 0
    with warnings.catch_warnings():  # no positive label at all: 0.0, without sklearn's warning in every job's log
        warnings.simplefilter("error")
        assert compute("f1", np.array([0, 0, 0]), np.array([0, 0, 0])) == 0.0
    with pytest.raises(TypeError, match="metrics must be a list of metric names .* got 5"):
        check_metrics(5)


def test_a_stage_names_the_tasks_metrics_its_data_does_not_fit(minilm, tmp_path):
    """Labels a local file gave are known only to the jobs: binary f1 on three of them fails in the first stage
    that trains (before its model loads), naming tasks.<task>.metrics and the labels, not only the metric."""
    _, tok = minilm
    enc = papa.encode(tok, (TEXTS * 4)[:12], labels=[0, 1, 2] * 4, max_length=16)
    path = tmp_path / "train.parquet"
    pipeline.write_tokens(enc, path, {"dataset": "mine", "label_names": ["neg", "neu", "pos"], "split": "train"})
    with pytest.raises(ValueError, match=r"tasks\.mine\.metrics: metric 'f1' is binary F1 .*use macro_f1 \[the "
                                         r"task's 3 labels \(neg, neu, pos\), from its data\]"):  # fmt: skip
        pipeline.train_split(path, None, 0, "probe", "mine", ["accuracy", "f1"])
    _, info = pipeline.train_split(path, None, 0, "probe", "mine", ["accuracy", "macro_f1"])
    assert info.n_labels == 3
    # a token task's file: its kind is the token file's (tags per token), and its metrics are checked as a token
    # task's (mutation testing: the kind read as "sequence" refused entity_f1, and passed the fast tests)
    tags = np.array([[-100, 1, 2, 0, -100], [-100, 0, 1, -100, -100]])
    ner = papa.Encoded(np.arange(10).reshape(2, 5), np.ones((2, 5), np.int64), None, tags, "standard", 5)
    for names, task in ((["O", "B-PER", "I-PER"], "ner"), (["NN", "VB", "DT"], "pos")):
        ner.save(tmp_path / f"{task}.parquet", {"dataset": task, "label_names": names})
    train, info = pipeline.train_split(tmp_path / "ner.parquet", None, 0, "probe", "ner", ["entity_f1"])
    assert info == pipeline.TaskInfo("token", ["O", "B-PER", "I-PER"]) and np.array_equal(train.labels, tags)
    with pytest.raises(ValueError, match=r"^tasks\.pos\.metrics: metric 'entity_f1' scores entity chunks"):
        pipeline.train_split(tmp_path / "pos.parquet", None, 0, "probe", "pos", ["token_accuracy", "entity_f1"])
    with pytest.raises(ValueError, match=r"^tasks\.pos\.metrics: metric 'mcc' does not score a token task"):
        pipeline.train_split(tmp_path / "pos.parquet", None, 0, "lambda", "pos", ["mcc"])
    _, info = pipeline.train_split(tmp_path / "pos.parquet", None, 0, "lambda", "pos", ["token_accuracy"])
    assert info.kind == "token"


@pytest.mark.parametrize(
    "bad",
    [{"lr": 0}, {"extra_lr": 0.0}, {"extra_lr": -0.05}, {"epochs": 0}, {"dropout": 1.0}, {"shuffle_seed": 2**32}]
    + [{"lr": True}, {"weight_decay": False}, {"weight_decay": -0.01}, {"init": "xavier"}],
)
def test_train_config_refuses_settings_that_do_not_train(bad):
    """extra_lr 0 used to mean the probe's lr (``extra_lr or lr``) and a negative one ascended the gradient; a
    negative weight decay, which AdamW refused only when a probe's optimizer was built (after the features were
    encoded), fails here too (mutation review of papa/probe.py)."""
    with pytest.raises(ValueError, match="TrainConfig: " + next(iter(bad))):
        TrainConfig(**{"lr": 1e-3, **bad})


def test_the_lambda_tables_rank_is_the_order_heads_are_replaced_in():
    """lambdas.parquet's rank: 0 is replaced first (the smallest lambda; ties by layer, then head), the README's
    reading; a rank column holding the ordering itself (its inverse) is only a permutation too."""
    df = pipeline.lambda_frame(torch.tensor([[0.3, 0.1, 0.2]]))
    assert df["rank"].tolist() == [2, 0, 1]
    df = pipeline.lambda_frame(torch.tensor([[0.4, 0.1], [0.1, 0.9], [0.2, 0.05]]))
    assert df["rank"].tolist() == [4, 1, 2, 5, 3, 0]  # 0.1 twice: layer 0 before layer 1
    assert df.sort_values("rank")["lambda"].is_monotonic_increasing


def test_lambdas_of_another_model_or_not_finite_are_refused(minilm, tmp_path):
    """static_mask reads the lambda table of the learn_lambda rule: one from another model (2 x 8 heads, or
    12 x 6 on MiniLM's 6 x 12, which a reshape would silently accept) or with a NaN fails, naming the file."""
    model, _ = minilm
    L, H = papa.model_shape(model)
    good = pipeline.lambda_frame(torch.rand(L, H, generator=torch.Generator().manual_seed(0)))
    cases = {
        "other": pipeline.lambda_frame(torch.rand(2, 8)),
        "transposed": pipeline.lambda_frame(torch.rand(H, L)),
        "nan": good.assign(**{"lambda": np.where(good.index == 3, np.nan, good["lambda"])}),
    }
    for name, df in cases.items():
        path = tmp_path / f"{name}.parquet"
        papa.io.write_parquet(df, path)
        with pytest.raises(ValueError, match="learn them again|Learn them again") as e:
            pipeline.static_mask(model, path, "lambda", 0.5)
        assert str(path) in str(e.value)
    with pytest.raises(
        ValueError, match=rf"16 lambdas \(layers 0-1, heads 0-7\), but the model has {L} layers x {H} heads"
    ):
        pipeline.static_mask(model, tmp_path / "other.parquet", "lambda", 0.5)
    papa.io.write_parquet(good, tmp_path / "good.parquet")
    mask = pipeline.static_mask(model, tmp_path / "good.parquet", "lambda", 0.5)
    n_static = L * H - papa.spec.n_dynamic(0.5, L * H)
    assert mask.sum() == n_static
    # the heads of the smallest lambdas are the static ones, head (l, h) the table's row (l, h)
    lam = torch.tensor(good["lambda"].to_numpy()).view(L, H)
    assert mask.equal(lam <= lam.flatten().sort().values[n_static - 1])
    with pytest.raises(ValueError, match="permutation"):
        papa.selection.select_static(torch.tensor([0, 0, 1, 2]), 0.5, (2, 2))


def test_static_masks_at_the_ends_read_no_lambdas_and_the_random_orders_is_its_seeds(minilm):
    """fraction_dynamic 0 makes every head static and 1 none, whatever the order, reading no lambdas; the random
    order's mask is its seed's (the probe job's order_seed): another seed makes other heads static."""
    model, _ = minilm
    L, H = papa.model_shape(model)
    for order in ("lambda", "random", "first_to_last"):
        assert pipeline.static_mask(model, None, order, 0).all(), order
        assert not pipeline.static_mask(model, None, order, 1).any(), order
    masks = {seed: pipeline.static_mask(model, None, "random", 0.5, seed=seed) for seed in (0, 3)}
    order3 = papa.selection.head_order("random", (L, H), seed=3)
    assert masks[3].equal(papa.selection.select_static(order3, 0.5, (L, H))) and not masks[0].equal(masks[3])


def test_lambdas_read_back_by_layer_and_head_whatever_the_tables_row_order(tmp_path):
    """read_lambdas gives lambda [layer, head] from the table's layer and head columns, not from its row order (a
    table written in rank order, or rows kept head by head, gave another head each lambda and so another order of
    replacement), and it refuses an infinite lambda as it refuses a NaN: neither orders the heads."""
    lam = torch.rand(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    df = pipeline.lambda_frame(lam)
    for name, rows in {"rank": df.sort_values("rank"), "head-major": df.sort_values(["head", "layer"])}.items():
        papa.io.write_parquet(rows, tmp_path / f"{name}.parquet")
        assert pipeline.read_lambdas(tmp_path / f"{name}.parquet", (3, 4)).equal(lam), name
    papa.io.write_parquet(df.assign(**{"lambda": np.where(df.index == 5, np.inf, df["lambda"])}), tmp_path / "i.pq")
    with pytest.raises(ValueError, match="NaN/inf"):
        pipeline.read_lambdas(tmp_path / "i.pq", (3, 4))


def test_training_logs_progress_inside_epochs_and_counts_the_seeds_to_come(minilm, caplog):
    """A re-encoding or lambda epoch can take an hour: progress (examples, examples/s, ETA) is logged inside it,
    and the ETA of a seed trained before others counts their epochs (it used to say 0 s after each seed)."""
    import logging
    import re
    import time

    model, tok = minilm
    enc = _toy(tok, 16)
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=2)
    probe = probe_mod.build_probe("sequence", model, enc.max_length, 2)
    marks = []  # an epoch's own line starts the interval again: a progress line followed it at once (review AP)

    class Marked(probe_mod.Progress):
        def mark(self):
            marks.append(len(caplog.records))
            super().mark()

    t0 = time.monotonic()
    with caplog.at_level(logging.INFO, logger="papa.probe"), pytest.MonkeyPatch.context() as mp:
        mp.setattr(probe_mod, "Progress", Marked)
        probe_mod.train_probes(
            [probe], LiveFeatures(model, enc), LiveFeatures(model, enc), cfg, ["accuracy"], log_every=0, runs_after=2
        )
    wall = time.monotonic() - t0
    said = [r.getMessage() for r in caplog.records]
    assert [said[k - 1].split(": ")[1].split(" ")[:2] for k in marks] == [["train", "loss"]] * 2, said
    inside = [r.getMessage() for r in caplog.records if "examples (" in r.getMessage()]
    assert len(inside) == 2 * 16 // 4 and "epoch 1/2: 4/16 examples" in inside[0]
    last = [r.getMessage() for r in caplog.records if "epoch 2/2: train loss" in r.getMessage()][0]
    assert float(re.search(r"ETA (\d+) s", last).group(1)) >= 0 and "examples/s" in last
    assert re.search(r": train loss [\d.]+; validation accuracy [\d.]+ \(", last), last  # its scores: validation's
    # two more trainings of 2 epochs x 16 examples remain: the ETA is theirs, not 0; the rate counts training time
    # only, the ETA the validation passes too, so it is at least their examples at that rate
    rate = float(re.search(r"\(([\d.]+) examples/s", last).group(1))
    eta = float(re.search(r"ETA (\d+) s", last).group(1))
    assert 0.95 * 2 * 2 * 16 / rate - 1 <= eta <= 2 * wall + 1  # twice this training's time, validation included


def test_a_disk_cache_is_reserved_in_full_when_it_is_created(tmp_path):
    """A memory-mapped cache file starts sparse; reserve_disk allocates all of it at once, so a job that
    does not fit fails at the start rather than partway through encoding."""
    path = tmp_path / "features.npy"
    with open(path, "wb") as f:
        f.truncate(8 * 2**20)  # sparse: no block allocated yet
    if not probe_mod.reserve_disk(path):
        pytest.skip("this filesystem cannot reserve space (no fallocate)")
    assert os.stat(path).st_blocks * 512 >= 8 * 2**20
    assert os.path.getsize(path) == 8 * 2**20


def test_the_free_disk_budget_keeps_a_margin_of_1_gib_or_a_tenth_under_the_nearest_folder(tmp_path, monkeypatch):
    """`free_disk_mb` (the disk budget when cache.disk_budget_mb is null): the free space minus max(1 GiB, 10 %),
    never below 0, looked up at the scratch folder's nearest existing ancestor (the folder is made on first use)."""
    import types

    GiB, seen = 2**30, []
    for free, want in ((100 * GiB, 90 * GiB), (5 * GiB, 4 * GiB), (GiB // 2, 0)):
        monkeypatch.setattr(
            probe_mod.shutil, "disk_usage", lambda p, f=free: seen.append(p) or types.SimpleNamespace(free=f)
        )
        assert probe_mod.free_disk_mb(str(tmp_path / "not" / "yet")) == want / MB
    assert seen == [tmp_path] * 3


@pytest.mark.parametrize("err", ["ENOSPC", "EDQUOT", "EOPNOTSUPP"])
def test_a_reservation_fails_on_a_full_disk_or_spent_quota_and_leaves_a_sparse_file_where_it_cannot(
    tmp_path, monkeypatch, err
):
    """No room (ENOSPC) and the user's quota spent (EDQUOT) are `CacheSpaceError` naming the size; a filesystem that
    cannot reserve (EOPNOTSUPP: some network filesystems) returns False, and the cache stays sparse as before."""
    import ctypes

    code = getattr(errno, err)
    path = tmp_path / "features.npy"
    path.write_bytes(b"\0" * 3 * MB)
    monkeypatch.setattr(ctypes, "CDLL", _fallocate_failing_with(code))
    if err == "EOPNOTSUPP":
        assert probe_mod.reserve_disk(path) is False
    else:
        with pytest.raises(probe_mod.CacheSpaceError, match="no room for a 3 MB feature cache") as e:
            probe_mod.reserve_disk(path)
        assert e.value.errno == code and e.value.filename == str(path)


def _fallocate_failing_with(code: int) -> type:
    """A ctypes.CDLL(None) stand-in whose fallocate fails with errno ``code``."""
    import ctypes

    class FailingLibc:
        def __init__(self, *args, **kwargs):
            def fallocate(fd, mode, offset, length):
                ctypes.set_errno(code)
                return -1

            self.fallocate = fallocate

    return FailingLibc


_FullDisk = _fallocate_failing_with(errno.ENOSPC)  # as on a full disk


def test_a_disk_cache_that_no_longer_fits_falls_back_to_reencoding(minilm, tmp_path, monkeypatch):
    """Two jobs on one node may both see room for their cache on the scratch disk; the one whose reservation
    fails re-encodes under strategy auto (same scores), fails at once under strategy disk, and leaves no folder."""
    import ctypes

    model, tok = minilm
    enc = _toy(tok)
    cfg = TrainConfig(lr=1e-3, batch_size=8, epochs=1, seed=0)
    with prepare_features(model, enc, enc, "reencode", "float32") as live:
        want = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=live)
    monkeypatch.setattr(ctypes, "CDLL", _FullDisk)
    scratch = tmp_path / "scratch"
    with prepare_features(model, enc, enc, "auto", "float32", budget_mb=0, scratch=str(scratch)) as feats:
        assert feats.strategy == "reencode"
        assert run_probe(model, enc, enc, "sequence", 2, ["accuracy"], cfg, features=feats) == want
    assert not list(scratch.iterdir())
    with pytest.raises(probe_mod.CacheSpaceError, match="no room"):
        with prepare_features(model, enc, enc, "disk", "float32", scratch=str(scratch)):
            pass
    assert not list(scratch.iterdir())
    # a disk full to the last byte fails creating the file, before its reservation: a plain OSError (no path, no
    # fallback) it was; the same CacheSpaceError now, naming the file
    monkeypatch.undo()

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np.lib.format, "open_memmap", full)
    with prepare_features(model, enc, enc, "auto", "float32", budget_mb=0, scratch=str(scratch)) as feats:
        assert feats.strategy == "reencode"
    with pytest.raises(probe_mod.CacheSpaceError, match=r"no room for a \d+ MB feature cache: No space left on "
                       r"device: '.*papa-features-.*/features\.npy'"):  # fmt: skip
        with prepare_features(model, enc, enc, "disk", "float32", scratch=str(scratch)):
            pass
    assert not list(scratch.iterdir())


def test_models_and_matrices_without_values_and_masks_that_are_no_masks_are_refused(minilm, tmp_path):
    """A model on torch's meta device (built without weights) got torch's message from deep inside, constants on
    it too; an attention_mask of 0.5 was averaged as a weight; effective_attention of mismatched shapes and
    rank_heads("x") got torch's errors; a file as load_task's cache_dir a NotADirectoryError."""
    import copy

    from papa.constants import effective_attention
    from papa.selection import rank_heads

    model, tok = minilm
    enc = papa.encode(tok, ["a b c", "d e"] * 4, labels=[0, 1] * 4, max_length=16)
    empty = copy.deepcopy(model).to("meta")
    C = papa.data_free("uniform", 6, 12, 16)
    static = torch.ones(6, 12, dtype=torch.bool)
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    for call in (lambda: papa.average_attention(empty, enc.batches(4)), lambda: papa.patch(empty, C, static=static),
                 lambda: run_probe(empty, enc, enc, "sequence", 2, ["accuracy"], cfg)):  # fmt: skip
        with pytest.raises(ValueError, match=r"the model's weights are not loaded: 103 parameters \(e.g. embeddings"):
            call()
    with pytest.raises(ValueError, match=r"the constant matrices are on torch's meta device"):
        papa.patch(model, C.mean.to("meta"), static=static)
    batch = next(enc.batches(4))
    half = {**batch, "attention_mask": batch["attention_mask"] * 0.5}
    with pytest.raises(ValueError, match=r"attention_mask holds values other than 0 and 1 \(e.g. 0.5\)"):
        papa.average_attention(model, [half])
    with pytest.raises(ValueError, match=r"attention_mask has shape \(4, 15\), input_ids \(4, 16\)"):
        papa.average_attention(model, [{**batch, "attention_mask": batch["attention_mask"][:, :15]}])
    assert papa.average_attention(model, [{**batch, "attention_mask": batch["attention_mask"].bool()}]).shape
    probs, values = torch.rand(2, 3, 5, 5).softmax(-1), torch.rand(2, 3, 5, 4)
    with pytest.raises(ValueError, match=r"needs probs \[B, H, N, N\] and values \[B, H, N, d\] of the same B"):
        effective_attention(probs, values[:, :, :4])
    with pytest.raises(ValueError, match=r"valid must be \[B, N\] = \[2, 5\], got \(2, 4\)"):
        effective_attention(probs, values, valid=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="rank_heads takes the learned lambdas"):
        rank_heads("x")
    with pytest.raises(ValueError, match="lambdas contain NaN"):
        rank_heads(torch.tensor([0.5, float("nan")]))
    # lambdas given as a list (a notebook's) are ranked in double precision: no tie made by float32 (mutation testing)
    assert rank_heads([0.1 + 1e-12, 0.1]).tolist() == [1, 0]
    (tmp_path / "file").write_text("")
    with pytest.raises(papa.data.TaskSpecError, match=r"cache_dir .*file' is a file: give a folder"):
        papa.load_task({"name": "rt_sentiment", "source": "package"}, cache_dir=tmp_path / "file")


def test_segment_ids_beyond_the_models_segments_are_refused(minilm):
    """A BERT tokenizer beside a RoBERTa model of one segment embedding (``type_vocab_size`` 1, as some hub models
    ship them) gives sentence B segment 1: averaging and the probe failed with torch's bare 'IndexError: index out of
    range in self' deep inside the embeddings; they name the segment ids and what to change, before any work."""
    import transformers as tf

    from papa.probe import TrainConfig, run_probe

    tok = minilm[1]
    torch.manual_seed(0)
    model = tf.RobertaModel(tf.RobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                                             num_attention_heads=4, intermediate_size=64, max_position_embeddings=80,
                                             type_vocab_size=1, pad_token_id=tok.pad_token_id))  # fmt: skip
    enc = papa.encode(tok, TEXTS, pairs=TEXTS[::-1], labels=[0, 1] * 3, max_length=16)
    assert enc.token_type_ids.max() == 1
    with pytest.raises(ValueError, match=r"segment id 1 \(token_type_ids\), and the model has 1 segment embedding"):
        papa.average_attention(model, enc.batches(4))
    with pytest.raises(ValueError, match="model_input_names"):
        run_probe(model, enc, enc, "sequence", 2, ["accuracy"], TrainConfig(epochs=1))
    single = papa.encode(tok, TEXTS, max_length=16)  # segment 0 only: as before
    assert papa.average_attention(model, single.batches(4)).mean.shape[-1] == 16


def test_the_segment_id_message_fits_every_source_of_segment_ids(minilm, tmp_path):
    """Segment ids reach a model of one segment embedding from three places (papa.encoding.encode, the config's
    pair_segments either way, and a batch of one's own), and the message said only "save the tokenizer with
    model_input_names=['input_ids', 'attention_mask']", which an ALBERT tokenizer ignores (papa gives its segment ids
    whatever it lists: papa.encoding.SEGMENT_IDS) and which a batch made by calling the tokenizer does not need
    (review CG). The message names what to change for each, and each change lets the inputs through."""
    import dataclasses

    import transformers as tf

    from papa.probe import TrainConfig, run_probe

    keep = ["input_ids", "attention_mask"]

    def roberta(vocab, pad):
        torch.manual_seed(0)
        shape = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
        cfg = tf.RobertaConfig(
            vocab_size=vocab, **shape, max_position_embeddings=80, type_vocab_size=1, pad_token_id=pad
        )
        return tf.RobertaModel(cfg)

    def averaged(model, batches) -> int:
        return papa.average_attention(model, batches).metadata["n_examples"]

    def refused(model, enc=None, batch=None) -> str:
        with pytest.raises(ValueError, match=r"segment id 1 \(token_type_ids\), and the model has 1") as e:
            if batch is not None:
                papa.average_attention(model, [batch])
            else:
                papa.average_attention(model, enc.batches(4))
        if enc is not None:  # the probe refuses the same, with the same advice
            with pytest.raises(ValueError, match=r"segment id 1") as p:
                run_probe(model, enc, enc, "sequence", 2, ["accuracy"], TrainConfig(epochs=1))
            assert str(p.value).split("segment id")[1] == str(e.value).split("segment id")[1]
        return str(e.value)

    def saved(tok, name, **kw):  # the tokenizer as its folder gives it back
        tok.save_pretrained(tmp_path / name)
        return tf.AutoTokenizer.from_pretrained(str(tmp_path / name), **kw)

    labels = [0, 1] * 3
    bert = minilm[1]
    model = roberta(len(bert), bert.pad_token_id)
    without = saved(bert, "bert", model_input_names=keep)
    assert "token_type_ids" not in saved(without, "bert-again").model_input_names  # the advice survives a save
    for segments in ("paper", "authors"):  # papa.encode, a tokenizer that lists token_type_ids
        enc = papa.encode(bert, TEXTS, TEXTS[::-1], labels=labels, max_length=16, pair_segments=segments)
        assert enc.token_type_ids.max() == 1
        msg = refused(model, enc)
        assert "save the tokenizer with model_input_names=['input_ids', 'attention_mask'] (AutoTokenizer" in msg
        fixed = papa.encode(without, TEXTS, TEXTS[::-1], labels=labels, max_length=16, pair_segments=segments)
        assert fixed.token_type_ids is None and averaged(model, fixed.batches(4)) == 6

    albert = saved(tf.AlbertTokenizer(), "albert", model_input_names=keep)  # ALBERT: saving without them is no cure
    assert type(albert).__name__ in papa.encoding.SEGMENT_IDS and "token_type_ids" not in albert.model_input_names
    small = roberta(len(albert), albert.pad_token_id)
    for segments in ("paper", "authors"):
        enc = papa.encode(albert, TEXTS, TEXTS[::-1], labels=labels, max_length=16, pair_segments=segments)
        assert enc.token_type_ids.max() == 1
        msg = refused(small, enc)
        assert (
            "it gives them to an ALBERT tokenizer whatever that lists (papa.encoding.SEGMENT_IDS): encode with a "
            "tokenizer of the model's own family, or drop them (dataclasses.replace(enc, token_type_ids=None))" in msg
        )
        fixed = dataclasses.replace(enc, token_type_ids=None)
        assert averaged(small, fixed.batches(4)) == 6

    call = dict(padding="max_length", max_length=16, return_tensors="pt")  # a batch of one's own
    msg = refused(model, batch=bert(TEXTS, TEXTS[::-1], **call))
    assert "a batch of your own holds what the tokenizer's call returned: call it with return_token_type_ids=False" \
           in msg  # fmt: skip
    own = bert(TEXTS, TEXTS[::-1], return_token_type_ids=False, **call)
    assert "token_type_ids" not in own and averaged(model, [own]) == 6


@pytest.mark.usefixtures("no_training")
def test_the_public_api_refuses_bad_input_before_any_work(minilm, tmp_path):
    """What a notebook can get wrong fails first, naming the argument and what to change (from a review of ~515
    cases): not after an epoch, not deep inside torch or transformers, and never with a silent wrong result."""
    import transformers as tf

    from papa.constants import average_attention
    from papa.metrics import compute_all
    from papa.selection import head_order, select_static

    model, tok = minilm

    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    tr, va = _toy(tok, 8), _toy(tok, 4)
    C = papa.average_attention(model, tr.batches(4))
    long = papa.encode(tok, TEXTS, labels=[0, 1] * 3, max_length=600)
    gpt = tf.GPT2Model(tf.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=50))
    probe_cases = [
        (dict(val_enc=va.subset([])), ValueError, "the validation split is empty"),
        (dict(train_enc=long, val_enc=long), ValueError, "exceed the 512 positions"),
        (dict(model=gpt), papa.UnsupportedModelError, "does not support model type 'gpt2'"),
        (dict(n_labels=2.5), ValueError, r"n_labels=2.5"),
        (dict(n_labels=1), ValueError, "n_labels=1: it must be the number of classes, an integer of at least 2"),
        (dict(cfg=None), TypeError, "cfg must be a papa.probe.TrainConfig"),
        (dict(train_enc=TEXTS), TypeError, "the train split must be papa.encode's Encoded"),
        (dict(seeds="012"), TypeError, "seeds must be a list of integers"),
        (dict(seeds=[1.7]), ValueError, r"each of seeds must be an integer in \[0, 2\*\*32\)"),
        (dict(seeds=[2**64]), ValueError, "each of seeds must be an integer"),
        (dict(seeds=[1, 1]), ValueError, "seeds lists a seed more than once"),
        (dict(seeds=[]), ValueError, "seeds is empty: give at least one seed"),
        (dict(train_enc=papa.encode(tok, TEXTS, labels=[0, 1, 2] * 2, max_length=16)), ValueError,
         r"the train labels run from 0 to 2, but the probe has n_labels=2 outputs \(labels 0\.\.1\)"),
        (dict(kind="seq"), ValueError, r"'seq'"),
        (dict(metrics=["accuracy", "accuracy"]), ValueError, "metrics lists a metric more than once"),
        (dict(val_enc=papa.encode(tok, TEXTS, labels=[0, 1] * 3, max_length=16, layout="standard")), ValueError,
         "layout 'papa' and the validation tokens in 'standard'"),
    ]  # fmt: skip
    base = dict(model=model, train_enc=tr, val_enc=va, kind="sequence", n_labels=2, metrics=["accuracy"], cfg=cfg)
    for change, error, needle in probe_cases:
        args = {**base, **change}
        seeds = args.pop("seeds", None)
        with pytest.raises(error, match=needle):
            run_probe(*args.values(), seeds=seeds)
    # tokens of another tokenizer: ids beyond the vocabulary (an index error inside torch otherwise)
    small = tf.BertModel(tf.BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, max_position_embeddings=80))  # fmt: skip
    with pytest.raises(ValueError, match="encoded with another model's tokenizer"):
        run_probe(small, tr, va, "sequence", 2, ["accuracy"], cfg)
    with pytest.raises(ValueError, match="encoded with another model's tokenizer"):
        average_attention(small, tr.batches(4))
    with pytest.raises(ValueError, match="encoded with another model's tokenizer"):
        probe_mod.learn_lambdas(small, papa.constants.data_free("uniform", 2, 4, 16), tr, va, "sequence", 2,
                                ["accuracy"], cfg)  # fmt: skip
    # a negative token id (review DR, left since stop 76: the embedding's IndexError named no batch, no id)
    neg = replace(tr, input_ids=tr.input_ids.copy())
    neg.input_ids[1, 2] = -5
    needle = r"token id -5, and token ids run from 0: encode the texts with this model's tokenizer"
    with pytest.raises(ValueError, match=r"the inputs hold " + needle):
        run_probe(model, neg, va, "sequence", 2, ["accuracy"], cfg)
    with pytest.raises(ValueError, match=r"the batch after 0 examples holds " + needle):
        average_attention(model, neg.batches(4))
    # a setting that would be ignored or misread: an unknown batch_order ran the seeds per_seed without a word, an
    # unknown init left torch's initialisation, learn_lambdas' cfg=None failed on an AttributeError
    with pytest.raises(ValueError, match="Unknown batch_order 'Shared'; choose from per_seed, shared"):
        run_probe(model, tr, va, "sequence", 2, ["accuracy"], cfg, batch_order="Shared")
    with pytest.raises(ValueError, match="init must be one of normal, pytorch, got 'xavier'"):
        probe_mod.build_probe("sequence", model, 16, 2, init="xavier")
    with pytest.raises(TypeError, match="cfg must be a papa.probe.TrainConfig"):
        probe_mod.learn_lambdas(model, C, tr, va, "sequence", 2, ["accuracy"], None)
    # features of other splits would train and score on their hidden states and labels
    with prepare_features(model, va, va) as other:
        with pytest.raises(ValueError, match="the train features were not prepared from the train split"):
            run_probe(model, tr, va, "sequence", 2, ["accuracy"], cfg, features=other)
    for features in ((LiveFeatures(model, tr),), LiveFeatures(model, tr)):  # no pair: a bare IndexError before
        with pytest.raises(TypeError, match=r"features must be prepare_features\(...\)'s \(train, validation\) pair"):
            run_probe(model, tr, va, "sequence", 2, ["accuracy"], cfg, features=features)
    # average_attention: what it is given, before any forward pass
    for batches, needle in (
        (tr, "takes an iterable of input batches"),
        (tr.model_inputs(), "takes an iterable of input batches"),
        ([[1, 2, 3]], "is a list, not a dict of model inputs"),
        ([{k: v.numpy() for k, v in tr.model_inputs().items()}], "not a torch tensor"),
        ([tr.model_inputs(np.arange(0))], r"input_ids has shape \(0, 16\)"),
        ([{**tr.model_inputs(), "attention_mask": torch.zeros(8, 16, dtype=torch.long)}], "8 example.s. have no real"),
    ):
        with pytest.raises((TypeError, ValueError), match=needle):
            average_attention(model, batches)
    with pytest.raises(TypeError, match="needs a loaded model"):
        average_attention("minilm", tr.batches(4))
    with pytest.raises(TypeError, match="metadata must be a dict"):
        average_attention(model, tr.batches(4), metadata=["x"])
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        list(tr.batches(0))
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        with prepare_features(model, tr, va, batch_size=-1):
            pass
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):  # before the sizes and any strategy
        with prepare_features(model, tr, va, "reencode", batch_size=0):
            pass
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):  # range(0, n, -1): no batch ran
        extract_features(model, tr, batch_size=-1)
    with pytest.raises(ValueError, match="extract_features caches in memory or on disk, not 'reencode'"):
        extract_features(model, tr, strategy="reencode")
    # encode: the tokenizer and every example's shape
    with pytest.raises(TypeError, match="needs a transformers tokenizer"):
        papa.encode(model, TEXTS)
    with pytest.raises(TypeError, match=r"texts\[1\] is 'good movie'; each example must be a list of words"):
        papa.encode(tok, [["hello", "world"], "good movie"], labels=[[0, 1], [0] * 10])
    with pytest.raises(TypeError, match=r"texts\[1\] is None; each example must be a string"):
        papa.encode(tok, ["a", None])
    # patching: lambdas in [0, 1] of the model's shape; a removed patch is not reused; a mask, not a word
    with papa.patch(model, C, mix=True) as h:
        for bad in (2.0, -0.5, float("nan")):
            with pytest.raises(ValueError, match=r"lambdas must lie in \[0, 1\]"):
                h.set_lambdas(bad)
        with pytest.raises(ValueError, match=r"do not fit the model's \[layers, heads\]"):
            h.set_lambdas(torch.full((3, 3), 0.5))
        for bad in ("0.5", None, [[0.5], "x"]):  # torch's "new(): invalid data type 'str'" named no argument
            with pytest.raises(TypeError, match=r"lambdas must be a number or a \[layers, heads\] = \[6, 12\] tensor"):
                h.set_lambdas(bad)
    # a trainable tensor no head reads: its gradient is 0, a probe "trained" nothing (review BP)
    for kw, what in ((dict(trainable_constants=True), "the constant matrices"),
                     (dict(mix=True, static=torch.ones(6, 12, dtype=torch.bool)), "the lambdas")):  # fmt: skip
        with pytest.warns(UserWarning, match=rf"no head uses {what} .*training them changes nothing"):
            papa.patch(model, C, **kw).remove()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        papa.patch(model, C, static=torch.ones(6, 12, dtype=torch.bool), trainable_constants=True).remove()
        papa.patch(model, C, mix=True).remove()
    # counts that do not match
    with pytest.raises(ValueError, match=r"6 texts but 1 labels: give one label per text"):
        papa.encode(tok, TEXTS, labels=[0])
    with pytest.raises(ValueError, match=r"6 texts but 2 pairs: give one second text per text"):
        papa.encode(tok, TEXTS, pairs=["a", "b"])
    with pytest.raises(ValueError, match=r"accuracy: no labels to score \(y_true and y_pred are empty\)"):
        compute_all(["accuracy"], [], [])
    with pytest.raises(ValueError, match=r"Unknown data-free constant kind 'ones'; choose from"):
        papa.constants.data_free("ones", 2, 2, 4)
    with pytest.raises(RuntimeError, match="this patch was removed"):
        with h:
            pass
    with pytest.raises(TypeError, match="static must be a bool mask"):
        papa.patch(model, C, static="all")
    # selection, metrics, training settings, model loading, tables
    with pytest.raises(ValueError, match=r"shape must be \(layers, heads\)"):
        head_order("first_to_last", (-1, 12))
    with pytest.raises(ValueError, match="head_order's seed must be an integer"):
        head_order("random", (6, 12), seed=1.5)
    with pytest.raises(TypeError, match="fraction_dynamic must be a number"):
        select_static(head_order("first_to_last", (6, 12)), None, (6, 12))
    for f in (torch.tensor(0.5), np.array(0.5), np.float32(0.5), "0.5"):  # scalars of any kind, a path's text
        assert select_static(head_order("first_to_last", (6, 12)), f, (6, 12)).sum() == 36
    C.metadata["tensors_sha256"] = "mine"
    with pytest.raises(ValueError, match="metadata key 'tensors_sha256' is where save records"):
        C.save(tmp_path / "c.safetensors")
    with pytest.raises(TypeError, match="metrics must be a list of metric names, got the string 'accuracy'"):
        compute_all("accuracy", [0, 1], [0, 1])
    with pytest.raises(ValueError, match="label_names has 3 names and the task 4 labels"):
        run_probe(model, tr, va, "sequence", 4, ["accuracy"], cfg, label_names=["a", "b", "c"])
    for bad in (dict(lr=None), dict(lr=float("inf")), dict(lr="1e-3"), dict(seed=-1)):
        with pytest.raises(ValueError, match="TrainConfig: "):
            TrainConfig(**{"lr": 1e-3, **bad})
    for kw, needle in ((dict(max_length="64"), "max_length must be a positive integer"),
                       (dict(num_labels=0), "num_labels must be a positive integer")):  # fmt: skip
        with pytest.raises(ValueError, match=needle):
            papa.load_encoder("minilm", device="cpu", **kw)
    with pytest.raises(TypeError, match="needs a hub id, a model folder or an alias"):
        papa.load_encoder(None)
    bare = tmp_path / "bare"  # weights and config, no tokenizer: every word would be [UNK]
    small.save_pretrained(bare)
    with pytest.raises(ValueError, match="holds no tokenizer"):
        papa.load_encoder(str(bare), device="cpu")
    with pytest.raises(papa.data.TaskSpecError, match=r"seed must be an integer in \[0, 2\*\*32\)"):
        papa.load_task({"name": "rt_sentiment", "source": "package"}, seed=-1)
    with pytest.raises(ValueError, match=r"ConstantAttention: mean has shape \(2, 4, 16, 16\) and count \(8, 8\)"):
        papa.ConstantAttention(torch.rand(2, 4, 16, 16), torch.ones(8, 8))
    assert papa.ConstantAttention(C.mean.numpy(), C.count.numpy()).shape == C.shape  # NumPy arrays are taken
    from papa import tables

    rows = pd.DataFrame({"model": "m", "task": "t", "constants": "average", "selection": "lambda",
                         "fraction_dynamic": [1.0, 0.0], "n_dynamic": [72, 0], "seed": 0, "epoch": 1,
                         "metric": "accuracy", "score": [0.9, 0.6]})  # fmt: skip
    with pytest.raises(ValueError, match=r"main_metric names metrics the table lacks: task 't': 'f1' \(it has"):
        tables.summary_table(rows, {"t": "f1"})
    with pytest.raises(ValueError, match=r"fraction_dynamic must lie in \[0, 1\]"):
        tables.probe_table([rows.assign(fraction_dynamic=[2.0, 0.0])])
    with pytest.raises(ValueError, match=r"probe_table: 1 rows have no score \(NaN\)"):
        tables.probe_table([rows.assign(score=[0.9, float("nan")])])
    for bad, needle in (
        (dict(constants="avrage"), "constants Constants spec 'avrage' is not kind[_trained][@corpus]"),
        (dict(selection="lamda"), "selection 'lamda' is none of lambda, reversed"),
        (dict(metric="acc"), "metric 'acc' is none of accuracy"),
        (dict(seed=-1), "seed is negative in 2 rows"),
        (dict(n_dynamic=[72, -1]), "n_dynamic is negative in 1 rows"),
    ):
        with pytest.raises(ValueError, match=re.escape(f"probe_table: {needle}")):
            tables.probe_table([rows.assign(**bad)])
    assert len(tables.probe_table([rows.assign(constants="average_trained@wiki", selection="random", epoch=0)])) == 2
    for bad in (None, rows, [rows, "x.parquet"]):  # None gave an empty table, as if analyses.patterns were off
        with pytest.raises(TypeError, match="patterns_table: expected a list of DataFrames"):
            tables.patterns_table(bad)
    pat = tables.patterns_table([]).reindex(range(2))  # two rows of the documented columns
    assert tables.patterns_table([]).empty and len(tables.patterns_table(iter([pat, pat]))) == 4
    with pytest.raises(ValueError, match=r"patterns_table: frame 1 lacks \['corpus', 'N', 'attention'.*pass "
                                         r"papa\.pipeline\.pattern_stats' frames"):  # fmt: skip
        tables.patterns_table([pat, rows])  # a probe table's rows made a table of NaN pattern columns
    none = tables.patterns_table([])  # the analysis off: the documented columns, no rows (it had no columns)
    # the dtypes the documented types are in the installed pandas (text: `str` from pandas 3 on, `object` before)
    documented = {c: str(pd.Series(dtype=t).dtype) for c, t in tables.PATTERNS_COLUMNS.items()}
    assert {c: str(t) for c, t in none.dtypes.items()} == documented and none.query("attention == 'raw'").empty
    lam = pipeline.lambda_frame(torch.full((6, 12), 0.5)).assign(model="m", task="t", constants="average")
    with pytest.raises(ValueError, match=r"lambdas_table: lambda must lie in \[0, 1\]"):
        tables.lambdas_table([lam.assign(**{"lambda": 5.0})])
    # second round: what the first fixes left
    with pytest.raises(TypeError, match="needs a transformers tokenizer .* first"):
        papa.encode(TEXTS, tok)
    for texts, needle in (
        (None, "needs texts as a list"),
        ({"a": 1}, r"needs texts as a list \(one entry per example\), got dict"),
    ):
        with pytest.raises(TypeError, match=needle):
            papa.encode(tok, texts)
    with pytest.raises(TypeError, match="encode.. needs labels as a list"):
        papa.encode(tok, TEXTS, labels=3)
    assert len(papa.encode(tok, (t for t in TEXTS), max_length=16)) == len(TEXTS)  # any iterable of texts
    for not_a_model in (None, "minilm", tok):
        with pytest.raises(TypeError, match="expected a loaded model"):
            papa.patch(not_a_model, C)
    with pytest.raises(TypeError, match="dtype must be a torch floating-point dtype"):
        papa.load_encoder("minilm", device="cpu", dtype="half16")
    with pytest.raises(TypeError, match="ConstantAttention.load takes a path"):
        papa.ConstantAttention.load(None)
    with pytest.raises(IsADirectoryError, match="is a folder; give the file's path"):
        C.save(tmp_path)
    with pytest.raises(ValueError, match="total must be the number of heads"):
        papa.spec.n_dynamic(0.5, -4)
    with pytest.raises(ValueError, match="metric 'entity_f1' scores entity chunks"):
        papa.metrics.compute("entity_f1", np.zeros((1, 3), int), np.zeros((1, 3), int), ["NN", "VB"])
    with pytest.raises(TypeError, match="label_names must be a list of the label strings"):
        run_probe(model, tr, va, "sequence", 2, ["accuracy"], cfg, label_names="ab")
    with pytest.raises(TypeError, match="takes an iterable of input batches"):
        average_attention(model, tok(TEXTS, return_tensors="pt", padding=True))
    with pytest.raises(ValueError, match="total must be the number of examples"):
        average_attention(model, tr.batches(4), total=-3)
    with pytest.raises(TypeError, match="constant matrices must hold floating-point attention weights"):
        papa.patch(model, (C.mean > 0.1).int())
    for kw, needle in ((dict(dtype="float8"), "dtype of the feature cache"), (dict(budget_mb=-1), "budget_mb must")):
        with pytest.raises(ValueError, match=needle):
            with prepare_features(model, tr, va, **kw):
                pass
    with pytest.raises(TypeError, match="the train split must be papa.encode's Encoded"):
        with prepare_features(model, TEXTS, va):
            pass
    with pytest.raises(ValueError, match=r"attention_mask has shape \(8, 32\), and the constants N = 16"):
        C.uncovered_queries(np.ones((8, 32)))
    with pytest.raises(ValueError, match="Constants spec 'averag' is not kind"):
        tables.constant_kinds_table(tables.summary_table(rows), ["average", "averag"])


def test_the_cache_budget_is_at_most_half_the_jobs_memory():
    """cache.budget_mb (schema default 4096) beside a probe job asking for less memory (the schema's default mem_mb
    is 2000): a cache that fitted the budget filled the job's memory, and Slurm killed it once encoding was done.
    The job caps the budget at half its memory (the scores do not depend on where the states are kept)."""
    assert pipeline.job_cache_budget(4096, 2000) == 1000
    assert pipeline.job_cache_budget(4096, 16000) == 4096 and pipeline.job_cache_budget(4096, None) == 4096
    assert pipeline.job_cache_budget(None, 3000) == 1500  # no budget: half the memory still
    assert pipeline.job_cache_budget(100, 2000 * 2) == 100  # a retry's memory grows; a budget under it stays
    # a job's mem_mib converted from mem_mb is fractional: a budget a fraction of a MiB over half is capped too
    assert pipeline.job_cache_budget(1000.5, 2000) == 1000 and pipeline.job_cache_budget(1000.5, 2001) == 1000.5
    from types import SimpleNamespace as NS

    # in MiB, the budget's unit: Snakemake's mem_mib, else its mem_mb (10^6 bytes) converted
    assert pipeline.job_memory_mib(NS(resources=NS(mem_mb=2000, mem_mib=1908))) == 1908
    assert pipeline.job_memory_mib(NS(resources=NS(mem_mb=2000))) == 2000 * 10**6 / 2**20
    assert pipeline.job_memory_mib(NS()) is None


def test_a_lambda_jobs_log_says_the_lambdas_spread_and_the_heads_replaced_first():
    """The lambda job's log ended without a word on what it learned (review AP's AP-11)."""
    import torch

    from papa.pipeline import lambda_summary

    lam = torch.tensor([[0.9, 0.1, 0.5], [0.3, 0.7, 0.2]])
    assert lambda_summary(lam, first=3) == (
        "lambdas: min 0.100, median 0.400, max 0.900; replaced first: L0H1 0.100, L1H2 0.200, L1H0 0.300"
    )
    assert lambda_summary(lam).endswith("L1H0 0.300, L0H2 0.500, L1H1 0.700")  # five heads by default


def test_dropout_authors_is_each_familys_as_the_authors_heads_had_it():
    """The authors' RoBERTa head had no dropout, their BERT and DeBERTa heads 0.1: `dropout: 0.0` per task could not
    run RoBERTa as they did beside BERT in one config, which every Sec. 5 analysis (RoBERTa-base) needs (review
    AO's AO-3). ``dropout: authors`` resolves per model; a number is the same on every model, as before."""
    from papa.checks import ConfigError, validate_config
    from papa.probe import AUTHORS_DROPOUT, build_probe, probe_dropout
    from tests.conftest import tiny_model

    roberta, bert, electra = tiny_model("roberta"), tiny_model("bert"), tiny_model("electra")
    assert [probe_dropout(AUTHORS_DROPOUT, m) for m in (roberta, bert, electra)] == [0.0, 0.1, 0.1]
    assert [probe_dropout(0.3, m) for m in (roberta, bert)] == [0.3, 0.3]
    # the config's block as the lambda and probe jobs read it (`train_config`: it took every dropout for a float, and
    # each job of a task with dropout: authors failed at its start: review AR's AR-1)
    cfg = pipeline.train_config({"lr": 1e-4, "batch_size": 8, "epochs": 1, "dropout": "authors"}, seed=0)
    assert cfg.dropout == "authors" and pipeline.train_config({**vars(cfg), "dropout": 0.2}, 0).dropout == 0.2
    for m, p in ((roberta, 0.0), (bert, 0.1)):
        assert build_probe("sequence", m, 16, 2, cfg.dropout).dropout.p == p
        # what the lambda and probe records keep beside the config's word: the number the job ran (review AS)
        assert pipeline._dropout_run("sequence", cfg.dropout, m) == p
    assert pipeline._dropout_run("token", cfg.dropout, roberta) is None  # a token probe has no dropout
    for bad in ("author", float("nan"), 1.0):
        with pytest.raises(ValueError, match="dropout"):
            TrainConfig(dropout=bad)
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/config.yaml").read_text())
    config["tasks"]["rt_sentiment"]["probe"]["dropout"] = "authors"
    assert validate_config(config)["tasks"]["rt_sentiment"]["lambda"]["dropout"] == "authors"  # the lambda stage's too
    config["tasks"]["rt_sentiment"]["probe"]["dropout"] = "author"
    with pytest.raises(ConfigError, match=r"'tasks\.rt_sentiment\.probe\.dropout' is 'author', not an allowed value: "
                       r"did you mean 'authors'\?"):  # fmt: skip
        validate_config(config)


def test_the_suite_sees_no_gpu_unless_make_test_cuda_asks():
    """tests/conftest.py hides CUDA from every test (their references are CPU numbers: CI has no GPU) before torch
    first looks for it; only PAPA_TEST_CUDA=1 (`make test-cuda`, `make rehearse`) leaves it visible. On a
    GPU machine this fails where the hiding came too late (torch had already counted the devices)."""
    import os

    if os.environ.get("PAPA_TEST_CUDA") == "1":
        pytest.skip("make test-cuda: CUDA stays visible")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "" and not torch.cuda.is_available()


def test_probe_rows_are_labelled_in_the_tables_order_with_the_files_own_seed(tmp_path):
    """A probe file's rows (`papa.pipeline._write_rows`) lead with model, task, constants, selection, fraction_dynamic,
    n_dynamic and seed, in that order; a fraction of -0.0 is written as 0.0 (the workflow's paths name it so); its
    provenance names the file's own seed, also in the trainer settings, and a missing selection label is refused as
    the other labels are, naming it."""
    labels = {"model": "m", "task": "t", "constants": "average", "selection": "lambda"}
    record = {"settings": {"hparams": {"lr": 1e-3, "seed": 0}}}
    out = tmp_path / "seed3.parquet"
    df = pipeline._write_rows([{"accuracy": 0.5}], out, labels, -0.0, 0, 3, record)
    front = ["model", "task", "constants", "selection", "fraction_dynamic", "n_dynamic", "seed"]
    assert list(df.columns)[:7] == front and df["seed"].tolist() == [3]
    assert not np.signbit(df["fraction_dynamic"]).any()
    got = read_provenance(out)
    assert got["seed"] == 3 and got["settings"]["hparams"] == {"lr": 1e-3, "seed": 3}, got
    with pytest.raises(ValueError, match="ProbeStage.labels lacks selection"):
        pipeline._check_probe_labels({k: v for k, v in labels.items() if k != "selection"})


def test_averaging_and_feature_caching_log_progress_with_their_rate_and_eta(minilm, caplog):
    """The two forward passes over a whole split (averaging a corpus, caching a probe's features) can take an hour
    on a paper-scale corpus: each logs examples so far, examples/s and, where the total is known, an ETA. No test
    reached either line (they come every 10 s; log_every=0 logs every batch)."""
    model, tok = minilm
    enc = _toy(tok, 12)
    with caplog.at_level(logging.INFO, logger="papa"):
        papa.average_attention(model, enc.batches(4), total=12, log_every=0)
        papa.average_attention(model, enc.batches(4), log_every=0)  # no total: no ETA
        probe_mod.extract_features(model, enc, batch_size=5, strategy="memory", log_every=0).close()
    said = [r.getMessage() for r in caplog.records]
    assert all(float(rate) > 0 for rate in re.findall(r"([\d.]+) examples/s", " ".join(said))), said

    def shape(prefix):  # the lines starting with prefix, rates and seconds written R and T
        lines = [s for s in said if s.startswith(prefix)]
        timed = [re.sub(r"ETA \d+ s", "ETA T", re.sub(r" in [\d.]+ s", " in T", s)) for s in lines]
        return [re.sub(r"[\d.]+ examples/s", "R", s) for s in timed], lines

    averaged, raw = shape("averaged ")
    assert averaged == [
        "averaged 4/12 examples, R, ETA T", "averaged 8/12 examples, R, ETA T", "averaged 12/12 examples, R, ETA T",
        "averaged 12 examples in T (R)",  # the stage's own last line
        "averaged 4 examples, R", "averaged 8 examples, R", "averaged 12 examples, R", "averaged 12 examples in T (R)",
    ], said  # fmt: skip
    encoded, raw_encoded = shape("encoded ")
    assert encoded == ["encoded 5/12 examples, R, ETA T", "encoded 10/12 examples, R, ETA T",
                       "encoded 12/12 examples, R, ETA T", "encoded 12 examples in T"], said  # fmt: skip
    assert raw[2].endswith(", ETA 0 s") and raw_encoded[2].endswith(", ETA 0 s"), said  # none left
