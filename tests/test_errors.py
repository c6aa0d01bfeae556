"""Bad inputs fail early with a message that names the file and says what to change (issue: cached results
you can trust)."""

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
    # hub ids and aliases are not paths
    assert not papa.models.looks_like_path("FacebookAI/roberta-base")
    assert not papa.models.looks_like_path("minilm")


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
    import yaml

    from tests.test_workflow import ROOT, SMOKE

    cfg = yaml.safe_load((ROOT / SMOKE).read_text())
    for k, v in edits.items():
        cfg[k] = v
    return cfg


def test_check_config_names_every_problem():
    from papa.checks import ConfigError, check_config, position_limit

    check_config(_config())  # the smoke config is fine
    assert position_limit("minilm") == 512
    cfg = _config()
    cfg["tasks"]["wsj_pos"]["metrics"] = ["entity_f1", "f1"]
    cfg["tasks"]["rt_sentiment"]["max_length"] = 600
    cfg["datasets"]["wik"] = {"source": "package"}
    cfg["sweep"]["seeds"] = [0, 1, 0]
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    msg = str(e.value)
    assert "tasks.wsj_pos.metrics: 'f1' does not fit dataset 'wsj_pos', a token task" in msg
    assert "entity_f1" not in msg.split("'f1'")[0]  # a token metric on a token task is fine
    assert "tasks.rt_sentiment.max_length = 600 exceeds the 512 positions of model 'minilm'" in msg
    assert "datasets.wik: unknown package dataset 'wik'" in msg
    assert "sweep.seeds lists 0 more than once" in msg


def test_atomic_path_clears_temp_files_of_a_killed_writer(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    target = tmp_path / "out.parquet"
    code = ("import time, sys; from papa.io import atomic_path\n"
            f"with atomic_path({str(target)!r}) as t:\n    t.write_text('partial'); print('in', flush=True); time.sleep(60)")
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
