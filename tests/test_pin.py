"""papa.pin: a config's hub models and hub datasets pinned to commits, in a file Snakemake merges over the config.
The hub is out of reach here: the resolvers are stand-ins that record what they were asked."""

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from papa import pin
from papa.checks import load_config

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "config/paper.yaml"


def sha(*parts) -> str:
    return hashlib.sha1("/".join(str(p) for p in parts).encode()).hexdigest()


class Hub:
    """Answers a commit per (id, revision) and records the questions."""

    def __init__(self):
        self.asked = []

    def __call__(self, hub_id, revision):
        self.asked.append((hub_id, revision))
        return sha(hub_id, revision)


def test_the_paper_grids_hub_models_and_datasets_are_pinned():
    config = load_config(PAPER)
    models, datasets = Hub(), Hub()
    pins = pin.hub_pins(config, models, datasets)
    assert pins["models"] == {name: f"{hub_id}@{sha(hub_id, None)}" for name, hub_id in config["models"].items()}
    hub = {n for n, s in config["datasets"].items() if s["source"] == "hub"}
    assert set(pins["datasets"]) == hub
    # the registry's ids and revisions: GLUE's default branch, CoNLL-2003's Parquet export
    assert ("nyu-mll/glue", None) in datasets.asked
    assert ("eriktks/conll2003", "refs/convert/parquet") in datasets.asked
    assert pins["datasets"]["conll2003_ner"] == {"revision": sha("eriktks/conll2003", "refs/convert/parquet")}


def test_aliases_folders_built_and_pinned_entries_are_left_alone(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    config = {
        "models": {
            "alias": "minilm",
            "split": "mpnet",
            "cased": "MiniLM",  # aliases are read case-blind (papa.models.resolve_model_path)
            "folder": str(folder),
            "relative": "./models/x",
            "built": {"build": {"family": "bert"}},
            "pinned": f"bert-base-uncased@{sha('x')}",
            "tagged": "bert-base-uncased@v1.0",
            "branch": f"bert-base-uncased@{sha('x')}-dev",  # a branch whose name begins like a commit
            "upper": f"bert-base-uncased@{sha('x').upper()}",  # the hub writes commits in lower case: a name to ask
        },
        "datasets": {
            "rt": {"source": "package"},
            "mine": {"source": "local", "train": "a.csv"},
            "cola": {"source": "hub", "revision": sha("glue")},
            "other": {"source": "hub", "hub_id": "me/corpus"},
        },
    }
    models, datasets = Hub(), Hub()
    pins = pin.hub_pins(config, models, datasets)
    assert pins == {
        "models": {
            "tagged": f"bert-base-uncased@{sha('bert-base-uncased', 'v1.0')}",  # a tag is not a commit
            "branch": f"bert-base-uncased@{sha('bert-base-uncased', sha('x') + '-dev')}",
            "upper": f"bert-base-uncased@{sha('bert-base-uncased', sha('x').upper())}",
        },
        "datasets": {"other": {"revision": sha("me/corpus", None)}},
    }
    assert models.asked == [
        ("bert-base-uncased", "v1.0"),
        ("bert-base-uncased", f"{sha('x')}-dev"),
        ("bert-base-uncased", sha("x").upper()),
    ]
    assert datasets.asked == [("me/corpus", None)]


def test_a_failed_or_odd_answer_names_the_entry():
    def unreachable(hub_id, revision):
        raise OSError("no network")

    config = {"models": {"bert-base": "bert-base-uncased"}}
    with pytest.raises(RuntimeError, match=r"models\.bert-base: could not resolve 'bert-base-uncased'.*no network"):
        pin.hub_pins(config, unreachable)
    with pytest.raises(RuntimeError, match=r"models\.bert-base: the hub answered 'main'"):
        pin.hub_pins(config, lambda hub_id, revision: "main")
    tagged = {"models": {"bert-base": "bert-base-uncased@v1.0"}}  # the revision asked for is named
    with pytest.raises(RuntimeError, match=r"could not resolve 'bert-base-uncased' at revision 'v1\.0' on the hub"):
        pin.hub_pins(tagged, unreachable)

    def malformed(hub_id, revision):  # huggingface_hub's HFValidationError (a bad repo id) is a ValueError
        raise ValueError("Repo id must use alphanumeric chars")

    with pytest.raises(RuntimeError, match=r"models\.bert-base: could not resolve .*ValueError: Repo id must"):
        pin.hub_pins(config, malformed)
    with pytest.raises(RuntimeError, match=r"models\.bert-base: the hub answered '[0-9a-f]{41}'"):
        pin.hub_pins(config, lambda hub_id, revision: sha(hub_id) + "0")  # a commit sha is 40 digits, no more


@pytest.mark.slow  # a Snakemake run (make check skips it)
def test_snakemake_merges_the_pins_over_the_config(tmp_path, monkeypatch):
    """The file `python -m papa.pin` writes, given after the config, pins the models and datasets and changes
    nothing else: Snakemake merges config files key by key."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    monkeypatch.setattr(pin, "_hub_model_commit", Hub())
    monkeypatch.setattr(pin, "_hub_dataset_commit", Hub())
    out = tmp_path / "pins.yaml"
    pin.main([str(PAPER), "-o", str(out)])
    assert out.read_text().startswith(f"# Hub commits of {PAPER}'s models and datasets")
    pins = yaml.safe_load(out.read_text())
    with SnakemakeApi(OutputSettings(quiet=True)) as api:
        wf = api.workflow(
            resource_settings=ResourceSettings(),
            config_settings=ConfigSettings(configfiles=[PAPER, out]),
            storage_settings=StorageSettings(),
            snakefile=ROOT / "Snakefile",
            workdir=ROOT,
        )._workflow
        merged = wf.config
    paper = load_config(PAPER)
    assert merged["models"] == pins["models"]
    for name, spec in paper["datasets"].items():
        assert merged["datasets"][name] == {**spec, **pins["datasets"].get(name, {})}, name
    assert {k: v for k, v in merged.items() if k not in ("models", "datasets")} == {
        k: v for k, v in paper.items() if k not in ("models", "datasets")
    }


def test_the_command_fails_with_the_entry_and_writes_nothing(tmp_path, monkeypatch):
    def unreachable(hub_id, revision):
        raise OSError("no network")

    monkeypatch.setattr(pin, "_hub_model_commit", unreachable)
    out = tmp_path / "pins.yaml"
    with pytest.raises(SystemExit, match=r"papa\.pin: models\.bert-base: could not resolve"):
        pin.main([str(PAPER), "-o", str(out)])
    assert list(tmp_path.iterdir()) == []


def test_hub_requests_carry_a_timeout(monkeypatch):
    """A login node without network must get an error from papa.pin, not a hang: the model lookup passes
    `papa.data.hub.HUB_TIMEOUT` to the hub client (the dataset lookup goes through papa.data.hub.resolve_revision's)."""
    import huggingface_hub

    seen = {}

    def model_info(self, repo_id, revision=None, timeout=None, **kw):
        seen.update(repo_id=repo_id, revision=revision, timeout=timeout)
        return type("Info", (), {"sha": "a" * 40})()

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    assert pin._hub_model_commit("bert-base-uncased", "main") == "a" * 40
    assert seen == {"repo_id": "bert-base-uncased", "revision": "main", "timeout": pin.HUB_TIMEOUT}
    assert pin.HUB_TIMEOUT > 0

    asked = {}

    def dataset_info(self, repo_id, revision=None, timeout=None, **kw):
        asked.update(repo_id=repo_id, revision=revision, timeout=timeout)
        return type("Info", (), {"sha": "b" * 40})()

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", dataset_info)
    assert pin._hub_dataset_commit("nyu-mll/glue", None) == "b" * 40
    assert asked == {"repo_id": "nyu-mll/glue", "revision": None, "timeout": pin.HUB_TIMEOUT}


def _no_hub(monkeypatch):
    """Resolvers that fail the test if asked: the checks below come before any hub request."""

    def asked(hub_id, revision):
        raise AssertionError(f"the hub was asked for {hub_id}")

    monkeypatch.setattr(pin, "_hub_model_commit", asked)
    monkeypatch.setattr(pin, "_hub_dataset_commit", asked)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.yaml", None, "No such file or directory"),
        ("folder", "folder", "Is a directory"),
        ("table.parquet", b"PAR1\x00\xff\xfe\x00PAR1", r"not a text \(UTF-8\) file"),
        ("empty.yaml", "", "is empty"),
        ("typo.yaml", "reslts: out\n", "did you mean 'results'"),
        ("broken.yaml", "models: [bert\n", "is not valid YAML"),
    ],
)
def test_a_config_that_does_not_read_is_named_without_a_traceback(tmp_path, monkeypatch, name, content, message):
    """A missing config, a folder, a binary file, an empty one, a misspelled key or a YAML error: one
    `papa.pin: <config>...` line and a non-zero exit, not a FileNotFoundError/IsADirectoryError/UnicodeDecodeError/
    ConfigError traceback (review hAU's item 11)."""
    _no_hub(monkeypatch)
    config = tmp_path / name
    if content == "folder":
        config.mkdir()
    elif isinstance(content, bytes):
        config.write_bytes(content)
    elif content is not None:
        config.write_text(content)
    with pytest.raises(SystemExit, match=rf"^papa\.pin: {re.escape(str(config))}\b.*{message}") as exited:
        pin.main([str(config), "-o", str(tmp_path / "pins.yaml")])
    assert exited.value.code != 0
    assert not (tmp_path / "pins.yaml").exists()
    assert str(exited.value.code).count(str(config)) == 1  # a message naming the file already is not prefixed again


def test_an_os_error_without_a_reason_is_named_by_its_message():
    assert pin._config_problem("run.yaml", OSError("the disk went away")) == "run.yaml: the disk went away"


def test_o_never_replaces_the_config_a_folder_or_another_file(tmp_path, monkeypatch):
    """``-o`` the config itself (by its path, another spelling of it, or a link to it), another existing file (a
    config typed for the pins file's name) or a folder: refused with a message naming it, before any hub request,
    and the file is as it was; `python -m papa.pin C -o C` used to replace the config with its pins, exit 0, and a
    folder ended in an IsADirectoryError traceback (review hAU's item 4). An earlier pins file, or an empty file (a
    shell's `>` of a failed pin), is replaced."""
    _no_hub(monkeypatch)
    config = tmp_path / "run.yaml"
    config.write_text((ROOT / "config/smoke.yaml").read_text())  # offline aliases only: nothing to ask the hub
    other = tmp_path / "paper.yaml"
    other.write_text(PAPER.read_text())
    (tmp_path / "link.yaml").symlink_to(config)
    (tmp_path / "sub").mkdir()
    before = {p: p.read_bytes() for p in (config, other)}
    for out, message in [
        (config, "is the config .* itself"),
        (tmp_path / "sub" / ".." / "run.yaml", "is the config .* itself"),
        (tmp_path / "link.yaml", "is the config .* itself"),
        (other, "exists and is not a pins file papa.pin wrote"),
        (tmp_path / "sub", "is a folder"),
        (other / "pins" / "x.yaml", f"lies under {re.escape(str(other))}, which is a file"),  # was a traceback
    ]:
        with pytest.raises(SystemExit, match=rf"^papa\.pin: -o {re.escape(str(out))} {message}.*run-pins\.yaml"):
            pin.main([str(config), "-o", str(out)])
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == []

    earlier, empty = tmp_path / "run-pins.yaml", tmp_path / "empty-pins.yaml"
    earlier.write_text(f"{pin.HEADER}run.yaml's models and datasets, resolved long ago\nmodels: {{}}\n")
    empty.write_text("")
    for out in (earlier, empty):
        pin.main([str(config), "-o", str(out)])
        assert out.read_text().startswith(f"{pin.HEADER}{config}'s models and datasets")


def test_the_docs_write_the_pins_with_o_not_a_shell_redirection():
    """`python -m papa.pin C > P` empties P before the pins resolve, so a failed pin (no network, a gated model)
    leaves an empty pins file that Snakemake then refuses ("Config file must be given as JSON or YAML with keys at
    top level"); ``-o`` writes it only when every entry resolved. The module's docstring (its --help) showed the
    ``>`` form (review hAU's item 19)."""
    redirected = re.compile(r"python -m papa\.pin\b[^\n]*\s>\s")
    for where, text in (("papa/pin.py", pin.__doc__), ("README.md", (ROOT / "README.md").read_text())):
        assert not redirected.search(text), f"{where}: {redirected.search(text).group()}"
    assert "python -m papa.pin config/paper.yaml -o config/paper-pins.yaml" in pin.__doc__


def test_glues_other_hub_datasets_are_pinned_as_the_papers_glue_tasks():
    """qqp, qnli, rte and mnli_matched read nyu-mll/glue at the registry's revision (its default branch), as sst2,
    cola, mrpc and mnli do: each is pinned to the commit that resolves to, the same one as mnli's."""
    config = load_config(PAPER)
    for name in ("qqp", "qnli", "rte", "mnli_matched"):
        config["datasets"][name] = {"source": "hub"}
    datasets = Hub()
    pins = pin.hub_pins(config, Hub(), datasets)["datasets"]
    glue = {"revision": sha("nyu-mll/glue", None)}
    assert {n: pins[n] for n in ("qqp", "qnli", "rte", "mnli_matched", "mnli")} == dict.fromkeys(
        ("qqp", "qnli", "rte", "mnli_matched", "mnli"), glue
    )
    assert set(datasets.asked) == {("nyu-mll/glue", None), ("eriktks/conll2003", "refs/convert/parquet"),
                                   ("Salesforce/wikitext", None)}  # fmt: skip


def test_a_local_folder_named_like_a_hub_id_is_left_alone(tmp_path, monkeypatch):
    """A model given as a folder of the working directory (``my-model``, ``me/model``: no leading ``./``, so it
    reads as a hub id) is a local folder while it exists, nothing on the hub to pin (review DM: mutation testing)."""
    (tmp_path / "my-model").mkdir()
    (tmp_path / "me" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    config = {"models": {"bare": "my-model", "org": "me/model", "hub": "me/other"}}
    models = Hub()
    assert pin.hub_pins(config, models, Hub()) == {"models": {"hub": f"me/other@{sha('me/other', None)}"}}
    assert models.asked == [("me/other", None)]


def test_only_hub_datasets_with_a_hub_id_are_pinned():
    """A local or built dataset named as a registry hub dataset (``cola``) reads no hub, and a hub dataset with no
    hub id (refused by the config check) has nothing to ask: neither is pinned nor asked about (review DM: mutation
    testing)."""
    config = {
        "datasets": {
            "cola": {"source": "local", "train": "a.csv"},
            "sst2": {"source": "build"},
            "unknown": {"source": "hub"},
            "mrpc": {"source": "hub"},
        }
    }
    datasets = Hub()
    assert pin.hub_pins(config, Hub(), datasets) == {"datasets": {"mrpc": {"revision": sha("nyu-mll/glue", None)}}}
    assert datasets.asked == [("nyu-mll/glue", None)]


def test_pins_that_cannot_be_written_are_printed(tmp_path, monkeypatch, capsys):
    """``-o`` a file that cannot be written (a full disk, a folder without write permission): the pins, resolved at
    the hub's cost, come on standard output with a one-line error, so they can be saved by hand (review DM: mutation
    testing)."""
    import papa.io

    _no_hub(monkeypatch)
    config = tmp_path / "run.yaml"
    config.write_text((ROOT / "config/smoke.yaml").read_text())  # offline aliases only: nothing to ask the hub

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(papa.io, "write_text", full)
    with pytest.raises(SystemExit, match=r"papa\.pin: -o .*pins\.yaml cannot be written \(No space left on device\)"):
        pin.main([str(config), "-o", str(tmp_path / "pins.yaml")])
    assert capsys.readouterr().out.startswith(pin.HEADER + str(config))
    assert not (tmp_path / "pins.yaml").exists()
