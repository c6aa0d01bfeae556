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
