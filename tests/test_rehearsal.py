"""config/rehearsal.yaml: the paper's grid offline on tiny built models and GLUE/CoNLL-shaped local data.

Fast tests: the builders of papa.rehearsal (files in the originals' layout, read back through the
``source: local`` path; models of every family, RoBERTa's pair separators in the PAPA layout) and the
drift test (rehearsal.yaml keeps the shape of paper.yaml). Slow: the dry runs of paper.yaml and the
rehearsal have the same rules and path shapes, and editing a local data file reruns prepare_data and what
depends on it. The rehearsal's runs (the sample CI runs, the full rehearsal) are in tests/test_rehearsal_run.py.
"""

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml

import papa
from papa import data, rehearsal
from papa.encoding import encode
from tests.test_workflow import copy_repo, job_counts, smk

ROOT = Path(__file__).resolve().parents[1]
PAPER = "config/paper.yaml"
REHEARSAL = "config/rehearsal.yaml"
BUILD_RULES = {"build_model", "build_data"}


def load(path):
    return yaml.safe_load((ROOT / path).read_text())


def _tsv_rows(path: Path) -> list[list[str]]:
    """The rows of a TSV file `build_data` wrote, its header left out, each as its cells."""
    return [ln.split("\t") for ln in path.read_text().splitlines()[1:]]


def local_spec(cfg: dict, name: str, root: Path) -> dict:
    """The papa.data spec the workflow gives a built dataset (common.smk::dataset_spec), files under ``root``."""
    spec = {"name": name, **cfg["datasets"][name]}
    build = cfg["build_data"][spec.pop("build")]
    spec.update({k: str(v) for k, v in rehearsal.data_files(build["shape"], root / spec["name"]).items()})
    return spec


# ----------------------------------------------------------------------------- data


@pytest.fixture(scope="module")
def built_data(tmp_path_factory):
    """Every dataset of rehearsal.yaml, built small and loaded through the local path."""
    cfg, root = load(REHEARSAL), tmp_path_factory.mktemp("built")
    out = {}
    for name, dc in cfg["datasets"].items():
        shape = cfg["build_data"][dc["build"]]["shape"]
        files = rehearsal.build_data(shape, root / name, n_train=12, n_validation=9, seed=0)
        out[name] = (files, data.load_task(local_spec(cfg, name, root), seed=0))
    return out


def test_built_datasets_have_the_papers_task_shapes(built_data):
    expect = {  # name: (kind, labels, pair)
        "cola": ("sequence", ["unacceptable", "acceptable"], False),
        "sst2": ("sequence", ["negative", "positive"], False),
        "mrpc": ("sequence", ["not_equivalent", "equivalent"], True),
        "mnli": ("sequence", ["entailment", "neutral", "contradiction"], True),
        "conll2003_ner": ("token", data.NER_TAGS, False),
        "conll2003_pos": ("token", data.PTB_TAGS, False),
        "wikitext103": ("sequence", [], False),
    }
    assert set(built_data) == set(expect)
    for name, (kind, labels, pair) in expect.items():
        task = built_data[name][1]
        assert (task.kind, task.label_names, task.is_pair) == (kind, labels, pair), name
        assert task.sizes == {"train": 12, "validation": 9}, name
        assert task.provenance["source"] == "local"
        if kind == "sequence" and labels:
            # every class occurs (MNLI: all three relations; the pairs are balanced by construction)
            assert set(task["train"]["label"]) == set(range(len(labels))), name
    wiki = built_data["wikitext103"][1]
    assert (wiki["train"]["label"] == -1).all() and wiki["train"]["text"].str.split().str.len().min() >= 8
    # MNLI's stands for the paper's split, validation_mismatched (the registry's mnli), in GLUE's file of it
    assert built_data["mnli"][0]["validation"].name == "dev_mismatched.tsv"
    assert data.registry.DATASETS["mnli"].source.splits["validation"] == "validation_mismatched"


def test_conll_files_have_the_conll2003_layout(built_data):
    files, ner = built_data["conll2003_ner"]
    pos = built_data["conll2003_pos"][1]
    lines = files["train"].read_text().splitlines()
    assert lines[:2] == ["-DOCSTART- -X- -X- O", ""]
    rows = [ln.split(" ") for ln in lines[2:] if ln]
    assert all(len(r) == 4 for r in rows)
    assert {r[2].split("-")[-1] for r in rows} <= {"O", "NP", "VP", "PP", "ADVP", "PRT"}
    assert sum(1 for ln in lines[2:] if not ln) == 12  # one blank line after each sentence
    # NER and POS read the same sentences from the same file, columns 3 and 1
    assert ner["train"]["tokens"].tolist() == pos["train"]["tokens"].tolist()
    tags = [data.NER_TAGS[t] for s in ner["train"]["tags"] for t in s]
    assert any(t.startswith("B-") for t in tags)
    for s in ner["train"]["tags"]:  # valid BIO: an I- continues an entity of its type
        names = [data.NER_TAGS[t] for t in s]
        for prev, cur in zip(["O"] + names, names):
            assert not cur.startswith("I-") or prev[2:] == cur[2:], names


def test_ner_and_chunk_heuristics():
    toks = ["Mr.", "Vinken", "of", "Elsevier", "N.V.", "Corp.", "moved", "to", "New", "York", "with", "Reuters"]
    pos = ["NNP", "NNP", "IN", "NNP", "NNP", "NNP", "VBD", "TO", "NNP", "NNP", "IN", "NNP"]
    assert rehearsal.ner_tags(toks, pos) == [
        "O",
        "B-PER",
        "O",
        "B-ORG",
        "I-ORG",
        "I-ORG",
        "O",
        "O",
        "B-LOC",
        "I-LOC",
        "O",
        "B-MISC",
    ]
    assert rehearsal.chunk_tags(["DT", "JJ", "NN", "VBD", "IN", "NNP", ","]) == [
        "B-NP",
        "I-NP",
        "I-NP",
        "B-VP",
        "B-PP",
        "B-NP",
        "O",
    ]


@pytest.mark.slow  # three builds, each parsing the wiki corpus (~2 s): `make test`, not the fast tier
def test_build_data_is_seeded(tmp_path):
    a = rehearsal.build_data("mrpc", tmp_path / "a", 10, 5, seed=0)
    b = rehearsal.build_data("mrpc", tmp_path / "b", 10, 5, seed=0)
    c = rehearsal.build_data("mrpc", tmp_path / "c", 10, 5, seed=1, record={"stage": "BuildDataStage"})
    assert a["train"].read_bytes() == b["train"].read_bytes() != c["train"].read_bytes()
    # what made them sits beside them when given (the workflow's stage record), not otherwise
    assert json.loads((tmp_path / "c/provenance.json").read_text()) == {"stage": "BuildDataStage"}
    assert not (tmp_path / "a/provenance.json").exists()
    with pytest.raises(ValueError, match="unknown data shape 'qnli'"):
        rehearsal.build_data("qnli", tmp_path / "d")


# ----------------------------------------------------------------------------- models


@pytest.fixture(scope="module")
def built_models(tmp_path_factory):
    """A model of each family, built by the workflow's stage (the weights `rehearsal.build_model`'s,
    `test_build_model_is_seeded`); DeBERTa's BPE of a size the config gives, the others' as a notebook builds them
    (no ``vocab_size``: the library's default)."""
    from papa.pipeline import BuildModelStage, build_model

    root = tmp_path_factory.mktemp("models")
    sized = {"deberta": {"vocab_size": VOCAB_SIZE}}
    return {
        f: build_model(BuildModelStage(family=f, out=str(root / f), config=None, seed=0, **sized.get(f, {})))
        for f in rehearsal.FAMILIES
    }


VOCAB_SIZE = 3000  # the BPE size built_models gives DeBERTa (the library's default is 4000, the schema's too)


@pytest.mark.parametrize("family,model_type,cls,tok_cls", [
    ("bert", "bert", "BertForMaskedLM", "BertTokenizer"),
    ("roberta", "roberta", "RobertaForMaskedLM", "RobertaTokenizer"),
    ("deberta", "deberta", "DebertaForMaskedLM", "DebertaTokenizer"),
    ("electra", "electra", "ElectraForPreTraining", "BertTokenizer"),
])  # fmt: skip
def test_built_model_loads_as_its_family(built_models, family, model_type, cls, tok_cls):
    path = built_models[family]
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == model_type and cfg["architectures"] == [cls]
    assert (cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (2, 8)
    model, tok = papa.load_encoder(str(path), device="cpu")
    assert papa.models.family_of(model) is papa.models.FAMILIES[model_type]
    assert type(tok).__name__ == tok_cls and cfg["vocab_size"] == len(tok)
    if family in ("bert", "electra"):  # the real bert-base-uncased WordPiece vocabulary
        assert len(tok) == 30522 and tok.tokenize("Attention") == ["attention"]
    if family == "deberta":  # as microsoft/deberta-base: relative attention, no absolute positions
        assert cfg["relative_attention"] and cfg["position_biased_input"] is False
        assert tok.convert_ids_to_tokens([0, 1, 2, 3]) == ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
    if family != "electra":
        papa.load_encoder(str(path), task_head="mlm", device="cpu")  # saved with its MLM head


def test_roberta_pair_separators_in_the_papa_layout(built_models):
    """RoBERTa's pair template <s> A </s></s> B </s>: the middle block starts at N/2, the last </s> at N-1."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built_models["roberta"])
    assert (tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    plain = tok("A cat sat.", "It was happy.")["input_ids"]
    assert plain[0] == 0 and plain[-1] == 2 and plain.count(2) == 3  # <s> A </s></s> B </s>
    i = plain.index(2)
    assert plain[i + 1] == 2
    N = 32
    enc = encode(tok, ["A cat sat."], pairs=["It was happy."], max_length=N, layout="papa")
    ids = enc.input_ids[0].tolist()
    assert ids[0] == tok.bos_token_id
    assert [j for j, t in enumerate(ids) if t == tok.eos_token_id] == [N // 2, N // 2 + 1, N - 1]
    assert ids[1 : N // 2] == plain[1:i] + [tok.pad_token_id] * (N // 2 - i)
    assert ids[N // 2 + 2 : N // 2 + 2 + len(plain) - i - 3] == plain[i + 2 : -1]
    assert enc.attention_mask[0, N // 2] == 1 and enc.attention_mask[0, N - 2] == 0


@pytest.mark.parametrize("family", ["roberta", "deberta"])
def test_byte_level_tokenizers_encode_words_as_words(built_models, family):
    """NER/POS words of a byte-level BPE (RoBERTa, DeBERTa v1) are encoded as they read inside a sentence
    ("Ġworld"), as with add_prefix_space=True (the authors' run_papa_ner.py), not as text starts."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built_models[family])
    assert tok.add_prefix_space is False  # as the hub checkpoints load by default
    ref = AutoTokenizer.from_pretrained(built_models[family], add_prefix_space=True)
    words = ["Peter", "lives", "in", "Paris"]
    enc = encode(tok, [words], labels=[[1, 0, 0, 2]], max_length=24)
    expect = ref(words, is_split_into_words=True, add_special_tokens=False)["input_ids"]
    ids = enc.input_ids[0].tolist()
    assert ids[1 : 1 + len(expect)] == expect
    first = [j for j in range(24) if enc.labels[0, j] != -100]  # the first piece of every word
    assert [enc.labels[0, j] for j in first] == [1, 0, 0, 2]
    assert all(p.startswith("Ġ") for p in tok.convert_ids_to_tokens([ids[j] for j in first]))


def test_build_model_is_seeded(tmp_path, built_models):
    from safetensors.torch import load_file

    again = rehearsal.build_model("bert", tmp_path / "a", seed=0)
    overrides = {"attention_probs_dropout_prob": 0.25}  # no size: the weights compare below
    other = rehearsal.build_model("bert", tmp_path / "b", overrides, seed=1, record={"stage": "BuildModelStage"})
    kept = json.loads((other / "rehearsal.json").read_text())
    assert kept["provenance"] == {"stage": "BuildModelStage"} and kept["config"] == overrides
    assert json.loads((other / "config.json").read_text())["attention_probs_dropout_prob"] == 0.25
    assert json.loads((again / "rehearsal.json").read_text())["config"] == {}
    w0, w1, w2 = (load_file(p / "model.safetensors") for p in (built_models["bert"], again, other))
    assert all((w0[k] == w1[k]).all() for k in w0)
    assert any((w0[k] != w2[k]).any() for k in w0)
    electra = load_file(built_models["electra"] / "model.safetensors")
    q = "encoder.layer.0.attention.self.query.weight"  # same sizes, same seed: still two different encoders
    assert not (w0[f"bert.{q}"] == electra[f"electra.{q}"]).all()
    with pytest.raises(ValueError, match="unknown family 'gpt2'"):
        rehearsal.build_model("gpt2", tmp_path / "c")


# ----------------------------------------------------------------------------- drift


#: The ``model_type`` of the hub config of each model paper.yaml may name, the rehearsal's ``build.family`` for it: a
#: model of another type (DeBERTa v2/v3 are ``deberta-v2``, ALBERT, DistilBERT, XLM-R ...) is no family the
#: rehearsal builds, so the drift test fails on it until the rehearsal builds one of its type.
HUB_FAMILIES = {
    "bert-base-uncased": "bert",
    "bert-large-uncased": "bert",
    "google-bert/bert-base-uncased": "bert",
    "google-bert/bert-large-uncased": "bert",
    "FacebookAI/roberta-base": "roberta",
    "FacebookAI/roberta-large": "roberta",
    "roberta-base": "roberta",
    "roberta-large": "roberta",
    "microsoft/deberta-base": "deberta",
    "microsoft/deberta-large": "deberta",
    "google/electra-base-discriminator": "electra",
    "google/electra-large-discriminator": "electra",
}


def test_paper_config_has_the_papers_table_3_settings():
    """paper.yaml's probes and MLM analysis train as the paper's Table 3 says (`papa.probe.PAPER_HPARAMS`: learning
    rate, batch size, epochs, N); the lambda stages inherit them. The drift test leaves these sizes out (the
    rehearsal's are smaller), so this holds paper.yaml to the paper."""
    from papa.probe import PAPER_HPARAMS

    paper = load(PAPER)
    assert set(paper["tasks"]) <= set(PAPER_HPARAMS) and "mlm" not in paper["tasks"]
    for task, tc in paper["tasks"].items():
        table = PAPER_HPARAMS[task]
        assert tc["max_length"] == table["max_length"], task
        assert {k: tc["probe"][k] for k in ("lr", "batch_size", "epochs")} == {
            k: table[k] for k in ("lr", "batch_size", "epochs")
        }, task
        assert not {"lr", "batch_size", "epochs"} & set(tc.get("lambda") or {}), task  # the lambdas: the same
    mlm = paper["analyses"]["mlm"]
    assert {k: mlm[k] for k in PAPER_HPARAMS["mlm"]} == PAPER_HPARAMS["mlm"]
    assert not {"lr", "batch_size", "epochs"} & set(mlm.get("lambda") or {})


#: The checkpoints of the paper (Sec. 4: BERT, RoBERTa, DeBERTa, base and large; Fig. 6: ELECTRA-base), without
#: the hub owner (``FacebookAI/roberta-base`` and ``roberta-base`` are one checkpoint).
PAPER_CHECKPOINTS = {"bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large", "deberta-base",
                     "deberta-large", "electra-base-discriminator"}  # fmt: skip


def test_paper_config_runs_the_papers_models_on_the_whole_task_data():
    """paper.yaml names the paper's checkpoints and trains, averages and scores every task on its whole splits (the
    paper draws no subsample): the drift test leaves model names and data sizes out (the rehearsal's differ), so a
    subsampled task, a swapped checkpoint or lambdas at their own extra_lr would pass it (the authors trained them at
    the probe's lr). The MLM analysis's WikiText draw is a documented difference (README "MLM data size")."""
    from papa.models import split_revision

    paper = load(PAPER)
    assert {split_revision(v)[0].rsplit("/", 1)[-1] for v in paper["models"].values()} == PAPER_CHECKPOINTS
    for task, tc in paper["tasks"].items():
        ds = paper["datasets"][tc["dataset"]]
        sizes = {f"datasets.{tc['dataset']}.{k}": ds.get(k) for k in ("max_train", "max_validation")}
        for block in ("probe", "lambda"):
            sizes[f"tasks.{task}.{block}.max_train"] = (tc.get(block) or {}).get("max_train")
        assert not {k: v for k, v in sizes.items() if v is not None}, task
        assert (tc.get("lambda") or {}).get("extra_lr") is None, task  # the lambdas learn at the probe's lr
    assert (paper["analyses"]["mlm"].get("lambda") or {}).get("extra_lr") is None
    assert (paper.get("averaging") or {}).get("max_examples") is None


def test_rehearsal_keeps_the_shape_of_the_paper_config():
    """Same tasks (kinds, metrics), sweep and analyses; only models, data and sizes differ."""
    from papa.checks import dataset_kind

    paper, reh = load(PAPER), load(REHEARSAL)
    assert reh["sweep"] == paper["sweep"]
    for key in ("layout", "encoding", "averaging"):  # how inputs are laid out and matrices averaged
        assert reh.get(key) == paper.get(key), key
    assert set(reh["tasks"]) == set(paper["tasks"])
    for t, tc in paper["tasks"].items():
        rc = reh["tasks"][t]
        assert (rc["dataset"], rc["metrics"], rc.get("main_metric")) == (
            tc["dataset"],
            tc["metrics"],
            tc.get("main_metric"),
        ), t
        assert dataset_kind(rc["dataset"], reh["datasets"][rc["dataset"]]) == dataset_kind(
            tc["dataset"], paper["datasets"][tc["dataset"]]
        ), t
        assert rc["max_length"] <= tc["max_length"] and rc["max_length"] % 2 == tc["max_length"] % 2
    assert set(reh["datasets"]) == set(paper["datasets"])
    pa, ra = paper["analyses"], reh["analyses"]
    assert set(ra) == set(pa)
    for key in ("constant_kinds", "cross_corpus", "head_orders", "patterns"):
        assert ra[key] == pa[key], key
    assert pa["tasks"] is None and ra["tasks"]  # rehearsal: one sequence and one token task (budget)
    kinds = {dataset_kind(reh["tasks"][t]["dataset"], reh["datasets"][reh["tasks"][t]["dataset"]]) for t in ra["tasks"]}
    assert kinds == {"sequence", "token"}
    assert set(ra["mlm"]) <= set(pa["mlm"])
    for key in ("dataset", "head", "mask_prob"):
        assert ra["mlm"].get(key) == pa["mlm"].get(key), key
    # every family of paper.yaml is rehearsed (DeBERTa v1 = microsoft/deberta-base), with the same task lists
    from papa.models import split_revision

    unknown = {m: v for m, v in paper["models"].items() if split_revision(v)[0] not in HUB_FAMILIES}
    assert not unknown, f"paper.yaml's {unknown}: add the model_type of its hub config to HUB_FAMILIES"
    family = {m: HUB_FAMILIES[split_revision(v)[0]] for m, v in paper["models"].items()}
    family.update({m: spec["build"]["family"] for m, spec in reh["models"].items()})
    assert {family[m] for m in paper["models"]} == {family[m] for m in reh["models"]}

    def tasks_of(cfg):
        return {(family[m], tuple(cfg.get("model_tasks", {}).get(m, cfg["tasks"]))) for m in cfg["models"]}

    assert tasks_of(paper) == tasks_of(reh)
    assert {family[m] for m in pa["mlm"]["models"]} == {family[m] for m in ra["mlm"]["models"]}

    def analysed(cfg, a):  # the families the Sec. 5 analyses run on (analyses.models; null: every model)
        return {family[m] for m in (cfg["models"] if a.get("models") is None else a["models"])}

    assert analysed(paper, pa) == analysed(reh, ra)


#: What may differ between paper.yaml and the rehearsal: names (models, data, where results go), what the
#: machines are (resources) and sizes (how much data, how long, how big a batch, how much memory).
OWN_KEYS = {"results", "models", "datasets", "build_data", "model_tasks", "resources", "tasks", "analyses", "cache"}
SIZE_KEYS = {"lr", "batch_size", "epochs", "max_train", "max_validation", "max_eval", "max_length", "models",
             "budget_mb", "disk_budget_mb"}  # fmt: skip


def _drift(paper: dict, reh: dict, where: str, skip=SIZE_KEYS) -> list[str]:
    """The keys of two config blocks (as papa validates them: defaults filled in) that differ, other than
    ``skip``: a key one block has and the other lacks counts."""
    return [f"{where}.{k}: paper {paper.get(k, '<absent>')!r}, rehearsal {reh.get(k, '<absent>')!r}"
            for k in sorted((set(paper) | set(reh)) - set(skip)) if paper.get(k) != reh.get(k)]  # fmt: skip


def test_rehearsal_runs_every_setting_of_the_paper_config_that_is_not_a_size():
    """The settings that choose a code path are paper.yaml's, as papa reads them (defaults filled in): every
    top-level key (precision, compile, seed, encoding, a key added later), the feature cache's dtype and
    strategy, each task's probe and lambda options (dropout, max_grad_norm, backbone_dropout, init,
    weight_decay, extra_lr, ...; only lr, batch_size, epochs and max_train are sizes) and how its lambda
    stage relates to its probe, and the analyses' settings. A setting added to paper.yaml alone fails here:
    give the rehearsal the same, or add it to the sizes above with a reason."""
    from papa.checks import load_config

    paper, reh = load_config(ROOT / PAPER), load_config(ROOT / REHEARSAL)
    drift = _drift(paper, reh, "config", skip=OWN_KEYS)
    drift += _drift(paper["cache"], reh["cache"], "cache")  # dtype: the float16 rounding the paper's probes see
    for t, tc in paper["tasks"].items():
        rc = reh["tasks"][t]
        drift += _drift(tc, rc, f"tasks.{t}", skip={"probe", "lambda", "resources", "max_length"})
        for block in ("probe", "lambda"):
            drift += _drift(tc.get(block) or {}, rc.get(block) or {}, f"tasks.{t}.{block}")
        same = {k: (tc.get("lambda") or {}).get(k) == tc["probe"].get(k) for k in ("lr", "batch_size", "epochs")}
        if same != {k: (rc.get("lambda") or {}).get(k) == rc["probe"].get(k) for k in same}:
            drift.append(f"tasks.{t}.lambda: which of lr/batch_size/epochs follow the probe differs ({same} in paper)")
    pa, ra = paper["analyses"], reh["analyses"]
    drift += _drift(pa, ra, "analyses", skip={"tasks", "models", "mlm"})  # tasks: the budget; models: names (above)
    drift += _drift(pa["mlm"], ra["mlm"], "analyses.mlm")
    assert not drift, "paper.yaml and rehearsal.yaml differ in settings that are not sizes:\n" + "\n".join(drift)


def dag(repo: Path, config: str, results: str) -> tuple[dict[str, int], set[str]]:
    """Jobs per rule and the output paths of a dry run (``--summary``) of ``config``."""
    counts = job_counts(smk(repo, "-n", "--configfile", config, "--config", f"results={results}").stdout)
    summary = smk(repo, "--summary", "--configfile", config, "--config", f"results={results}").stdout
    paths = {line.split("\t")[0] for line in summary.splitlines()[1:] if line.strip()}
    return counts, paths


def shapes(paths: set[str], cfg: dict, results: str) -> set[str]:
    """Output paths with the results folder, model, dataset and task names and N replaced by placeholders."""
    names = {n: "<model>" for n in cfg["models"]}
    names.update({n: "<data>" for n in list(cfg["datasets"]) + list(cfg["tasks"])})
    out = set()
    for p in paths:
        parts = Path(p).relative_to(results).parts
        parts = [names.get(x, x) for x in parts]
        parts = [re.sub(r"^N\d+", "N<n>", re.sub(r"@[A-Za-z0-9_.-]+$", "@<data>", x)) for x in parts]
        out.add("/".join(parts))
    return out


@pytest.mark.slow
def test_dry_runs_of_paper_and_rehearsal_have_the_same_rules_and_path_shapes(tmp_path):
    """paper.yaml's dry run works here (no hub needed) and its DAG matches the rehearsal's: the same
    rules (apart from the build rules) and the same wildcard shapes of every output path."""
    repo = copy_repo(tmp_path / "repo")
    paper_counts, paper_paths = dag(repo, PAPER, "rp")
    reh_counts, reh_paths = dag(repo, REHEARSAL, "rr")
    assert BUILD_RULES <= set(reh_counts) and not BUILD_RULES & set(paper_counts)
    assert set(paper_counts) == set(reh_counts) - BUILD_RULES
    built = {p for p in reh_paths if p.startswith("rr/built/")}
    assert len(built) == 10 and "rp/tables/summary.parquet" in paper_paths and len(paper_paths) > 1000
    assert shapes(paper_paths, load(PAPER), "rp") == shapes(reh_paths - built, load(REHEARSAL), "rr")
    # cross_corpus [mnli] on MNLI itself is the method's own matrix: one run, named average, not a second average@mnli
    probes = {p for p in paper_paths if p.startswith("rp/probe/")}
    assert not {p for p in probes if "/mnli/average@mnli/" in p}
    assert {p for p in probes if "/mrpc/average@mnli/" in p}
    assert "rp/probe/bert-base/mnli/average/lambda/fraction_dynamic=0/seed0.parquet" in probes


# ----------------------------------------------------------------------------- local inputs (issue #14)


@pytest.mark.slow
def test_editing_a_local_csv_reruns_prepare_data_and_what_depends_on_it(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    csv = tmp_path / "reviews.csv"
    csv.write_text("text,label\n" + "".join(f"review number {i} was {'good' if i % 2 else 'bad'},{i % 2}\n"
                                            for i in range(12)))  # fmt: skip
    cfg = yaml.safe_load((repo / "config/smoke.yaml").read_text())
    cfg["results"] = "res"
    cfg["datasets"] = {
        "reviews": {"source": "local", "kind": "sequence", "train": str(csv), "validation_fraction": 0.25}
    }
    cfg["tasks"] = {"reviews": {**cfg["tasks"]["rt_sentiment"], "dataset": "reviews", "metrics": ["accuracy"],
                                "main_metric": "accuracy"}}  # fmt: skip
    cfg["analyses"] = {}
    (repo / "config/local.yaml").write_text(yaml.safe_dump(cfg))
    target = "res/tokens/minilm/reviews/N32/train.parquet"
    smk(repo, target, "--cores", "1", "--configfile", "config/local.yaml")
    assert job_counts(smk(repo, target, "-n", "--configfile", "config/local.yaml").stdout) == {}
    time.sleep(1.1)  # a new mtime
    with open(csv, "a") as f:
        f.write("one more review,1\n")
    counts = job_counts(smk(repo, target, "-n", "--configfile", "config/local.yaml").stdout)
    assert counts == {"prepare_data": 1, "tokenize": 1}
    # a file replaced by other content that keeps an older time (cp -p, rsync -a, tar, unzip): Snakemake's file times
    # miss it, its digest (a param of prepare_data, papa.io.file_digest) does not
    smk(repo, target, "--cores", "1", "--configfile", "config/local.yaml")
    old = csv.stat().st_mtime_ns - 10**12
    csv.write_text(csv.read_text().replace("review number 3", "review number three"))
    os.utime(csv, ns=(old, old))
    counts = job_counts(smk(repo, target, "-n", "--configfile", "config/local.yaml").stdout)
    assert counts == {"prepare_data": 1, "tokenize": 1}, counts
    # a metric that does not fit the labels the file gives (binary f1 on three) fails in prepare_data, the first
    # job, naming the task's metrics: it failed in the lambda or probe job, after tokenization and averaging
    with open(csv, "a") as f:
        f.write("a third kind of review,2\n")
    cfg["tasks"]["reviews"]["metrics"] = ["f1"]
    cfg["tasks"]["reviews"]["main_metric"] = "f1"
    (repo / "config/local.yaml").write_text(yaml.safe_dump(cfg))
    p = smk(repo, target, "--cores", "1", "--configfile", "config/local.yaml", check=False)
    log = (repo / "res/logs/prepare_data/reviews/train.log").read_text()
    assert p.returncode != 0 and "tasks.reviews.metrics: " in log and "3 labels (0, 1, 2)" in log, log[-2000:]
    assert "Error in rule prepare_data" in p.stdout + p.stderr


def test_build_settings_keep_vocab_size_only_where_a_bpe_is_trained():
    """A built model's params are the settings its family reads: BERT and ELECTRA take MiniLM's WordPiece, so
    vocab_size (which the schema fills in for every build) is no param of theirs."""
    for family, kind in rehearsal.TOKENIZERS.items():
        build = {"family": family, "seed": 3, "vocab_size": 500, "config": {"num_hidden_layers": 1}}
        got = rehearsal.build_settings(build)
        assert ("vocab_size" in got) == (kind == "bpe"), family
        assert {k: v for k, v in build.items() if k != "vocab_size"}.items() <= got.items()


@pytest.mark.slow
def test_the_bpe_is_the_one_trained_on_the_wiki_corpus_train_split_of_the_builds_seed(tmp_path):
    """`build_tokenizer`'s byte-level BPE (RoBERTa, DeBERTa) is the one `tokenizers` trains on the offline wiki
    corpus's train split with min_frequency 2 and the family's special tokens first: a naive reference built from
    the split gives the same vocabulary (not the validation split's), in the wiki draw of the build's seed."""
    from tokenizers import ByteLevelBPETokenizer

    splits = data.load_task({"name": "wiki", "source": "package"}, tmp_path, seed=3).splits
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]

    def naive(split, size):
        bpe = ByteLevelBPETokenizer()
        texts = splits[split]["text"].tolist()
        bpe.train_from_iterator(texts, vocab_size=size, min_frequency=2, special_tokens=specials, show_progress=False)
        return bpe.get_vocab()

    tok = rehearsal.build_tokenizer("roberta", vocab_size=600, seed=3, cache_dir=tmp_path)
    assert len(tok) == 600 and tok.get_vocab() == naive("train", 600)
    assert tok.convert_ids_to_tokens([0, 1, 2, 3, 4]) == specials
    assert naive("validation", 600) != tok.get_vocab()  # the test can tell the splits apart
    # a size the corpus cannot fill: every merge seen at least twice, none seen once (60,000 -> ~30,000 here)
    big = rehearsal.build_tokenizer("roberta", vocab_size=60000, seed=3, cache_dir=tmp_path)
    assert len(big) < 60000 and big.get_vocab() == naive("train", 60000)


@pytest.mark.slow
def test_a_changed_vocab_size_rebuilds_only_the_models_it_sizes(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    cfg = {
        "results": "res",
        "models": {"tiny-bert": {"build": {"family": "bert"}}, "tiny-roberta": {"build": {"family": "roberta"}}},
        "datasets": {"rt_sentiment": {"source": "package"}},
        "tasks": {
            "rt_sentiment": {
                "dataset": "rt_sentiment",
                "max_length": 32,
                "metrics": ["accuracy"],
                "probe": {"lr": 1e-3, "batch_size": 8, "epochs": 1},
            }
        },  # fmt: skip
        "sweep": {"fraction_dynamic": [1, 0], "seeds": [0]},
    }
    (repo / "config/built.yaml").write_text(yaml.safe_dump(cfg))
    targets = ["res/built/models/tiny-bert", "res/built/models/tiny-roberta"]
    smk(repo, *targets, "--cores", "1", "--configfile", "config/built.yaml")
    assert job_counts(smk(repo, *targets, "-n", "--configfile", "config/built.yaml").stdout) == {}
    cfg["models"]["tiny-roberta"]["build"]["vocab_size"] = 600  # bert's would be refused (papa.checks)
    (repo / "config/built.yaml").write_text(yaml.safe_dump(cfg))
    p = smk(repo, *targets, "-n", "--configfile", "config/built.yaml")
    assert job_counts(p.stdout) == {"build_model": 1} and "model=tiny-roberta" in p.stdout, p.stdout[-2000:]


# ----------------------------------------------------------------------------- builders' parts (review DV)


def test_wiki_sentences_name_the_article_and_keep_sentences_of_four_words_or_more():
    """An MRPC negative pairs sentences of two articles: a chunk's article is its id without the chunk number
    (``<article>-<chunk>``), and a sentence of fewer than 4 words is no sentence of the pairs."""
    import pandas as pd

    texts = ["The cat sat on the mat. Yes it did. It was a sunny day.", "Dogs bark at night."]
    df = pd.DataFrame({"id": ["Cat-Tail-0", "Cat-Tail-1"], "text": texts})
    got = rehearsal._wiki_sentences(df)
    assert got == [("Cat-Tail", ["The cat sat on the mat.", "It was a sunny day."]),
                   ("Cat-Tail", ["Dogs bark at night."])]  # fmt: skip


def test_mrpc_rows_pair_consecutive_sentences_and_sentences_of_two_articles():
    import numpy as np

    chunks = [("a", ["a one", "a two", "a three"]), ("a", ["a four"]), ("b", ["b one", "b two"]), ("c", ["c one"])]
    article = {s: a for a, ss in chunks for s in ss}
    rows = rehearsal._mrpc_rows(chunks, 60, np.random.default_rng(0))
    assert [r[0] for r in rows] == [1, 0] * 30  # balanced, alternating
    pairs = {(s[i], s[i + 1]) for _, s in chunks for i in range(len(s) - 1)}
    assert all((s1, s2) in pairs for y, s1, s2 in rows if y == 1)
    assert all(article[s1] != article[s2] for y, s1, s2 in rows if y == 0)


def test_mnli_rows_relate_the_hypothesis_to_the_premise_as_labelled():
    """Entailment: a hypothesis of the premise's sentiment; contradiction: of the other one; neutral: Wikipedia."""
    import numpy as np
    import pandas as pd

    rt = pd.DataFrame(
        {"text": [f"neg {i}" for i in range(5)] + [f"pos {i}" for i in range(5)], "label": [0] * 5 + [1] * 5}
    )
    wiki = ["wiki one", "wiki two"]
    rows = rehearsal._mnli_rows(rt, wiki, 30, np.random.default_rng(0))
    assert [r[2] for r in rows] == ["entailment", "contradiction", "neutral"] * 10
    for premise, hyp, relation in rows:
        if relation == "neutral":
            assert hyp in wiki
        else:
            same = premise.split()[0] == hyp.split()[0]
            assert same == (relation == "entailment"), (premise, hyp, relation)


def test_tsv_cells_have_no_tab_or_line_break(tmp_path):
    """The files are read with QUOTE_NONE: a tab or line break inside a sentence would split its row."""
    rehearsal._write_tsv(tmp_path / "x.tsv", ["sentence", "label"], [["a\tb\nc  d", 1]])
    assert (tmp_path / "x.tsv").read_text() == "sentence\tlabel\na b c d\t1\n"


def test_ner_and_chunk_edge_cases():
    """LOC after a preposition whatever its case (``In Paris`` at a sentence start); a sentence's first entity
    has no token before it (not the sentence's last one); each preposition opens its own PP, a possessive is NP."""
    toks = ["In", "Paris", "we", "went", "to"]
    assert rehearsal.ner_tags(toks, ["IN", "NNP", "PRP", "VBD", "TO"]) == ["O", "B-LOC", "O", "O", "O"]
    toks = ["Paris", "is", "where", "we", "went", "to"]
    assert rehearsal.ner_tags(toks, ["NNP", "VBZ", "WRB", "PRP", "VBD", "TO"])[0] == "B-MISC"
    assert rehearsal.chunk_tags(["IN", "IN", "NNP", "POS", "NN"]) == ["B-PP", "B-PP", "B-NP", "I-NP", "I-NP"]


def test_build_data_refuses_an_empty_split(tmp_path):
    for n_train, n_validation in ((0, 5), (5, 0)):
        with pytest.raises(ValueError, match="must be at least 1"):
            rehearsal.build_data("sst2", tmp_path, n_train, n_validation)
    assert not list(tmp_path.iterdir())


def test_cola_files_label_certain_sentences_acceptable(built_data):
    """CoLA's 1 is acceptable: the hedge corpus' certain sentences (its label 0) are written 1, uncertain ones 0."""
    hedge = data.load_task({"name": "hedge", "source": "package"}, seed=0)
    label_of = dict(zip(hedge["train"]["text"].map(rehearsal._clean), hedge["train"]["label"]))
    files = built_data["cola"][0]
    rows = _tsv_rows(files["train"])
    assert len(rows) == 12 and {y for _, y in rows} == {"0", "1"}
    assert all(int(y) == 1 - label_of[s] for s, y in rows)


def test_each_split_file_holds_a_draw_of_its_own_seed_stream_in_the_corpus_order(built_data):
    """`build_data` draws a split's rows from the source's split of the same name without replacement, with the
    stream ``default_rng([seed, k])`` (k: the split's place in `SHAPES`, train 0, validation 1: a stream per split),
    and writes them in the corpus's order: a naive reference of the draw gives the same rows."""
    import numpy as np

    rt = data.load_task({"name": "rt_sentiment", "source": "package"}, seed=0)
    files = built_data["sst2"][0]
    for k, (split, n) in enumerate((("train", 12), ("validation", 9))):
        src = rt[split]
        idx = sorted(np.random.default_rng([0, k]).permutation(len(src))[:n])
        want = [[rehearsal._clean(t), str(y)] for t, y in zip(src["text"].iloc[idx], src["label"].iloc[idx])]
        assert _tsv_rows(files[split]) == want, split


@pytest.mark.slow  # the wiki corpus parsed again (~2 s): `make test`, not the fast tier
def test_mnli_neutral_hypotheses_are_wiki_sentences_of_the_files_own_split(built_data):
    """MNLI's neutral hypotheses are Wikipedia sentences of the split the file is (validation's from the wiki
    corpus' validation split): the validation file holds no train text."""
    wiki = data.load_task({"name": "wiki", "source": "package"}, seed=0)
    sents = {
        split: {rehearsal._clean(x) for _, ss in rehearsal._wiki_sentences(wiki[split]) for x in ss}
        for split in ("train", "validation")
    }
    for split, path in built_data["mnli"][0].items():
        neutral = [h for _, h, y in _tsv_rows(path) if y == "neutral"]
        assert len(neutral) == {"train": 4, "validation": 3}[split], neutral  # every third row of 12 and 9
        assert all(h in sents[split] for h in neutral), (split, neutral)


@pytest.mark.parametrize("family", rehearsal.FAMILIES)
def test_build_problem_names_a_model_without_layers_or_heads(family):
    """A config override that leaves no attention head to replace (no layer, or a negative head count that
    transformers builds) is said before any job; the library's sizes build."""
    assert rehearsal.build_problem(family) is None
    assert rehearsal.build_problem(family, {"num_hidden_layers": 0}) == (
        "it would have 0 layers of 8 heads: PAPA needs attention heads to replace"
    )
    assert rehearsal.build_problem(family, {"num_attention_heads": -2}) == (
        "it would have 2 layers of -2 heads: PAPA needs attention heads to replace"
    )


def test_config_values_and_model_config():
    """ELECTRA's embedding size follows its hidden size; a config's own value wins over the family's default;
    RoBERTa's begin and end ids are its tokenizer's."""
    assert rehearsal.config_values("electra", {"hidden_size": 32, "num_attention_heads": 4})["embedding_size"] == 32
    assert rehearsal.config_values("electra")["embedding_size"] == 64
    assert rehearsal.config_values("roberta", {"layer_norm_eps": 1e-6})["layer_norm_eps"] == 1e-6
    assert rehearsal.config_values("deberta", {"type_vocab_size": 2})["type_vocab_size"] == 2
    # RoBERTa's 2 positions more (its padding index's) where the size is the library's; a config's size is its own
    n = rehearsal.TINY["max_position_embeddings"]
    assert [rehearsal.config_values(f)["max_position_embeddings"] for f in ("roberta", "bert")] == [n + 2, n]
    assert rehearsal.config_values("roberta", {"max_position_embeddings": 40})["max_position_embeddings"] == 40
    # and the config check's limit of such a model's inputs is what the model then holds: 40 less the 2 positions
    # before its tokens, the library's size less none (mutation review of papa/rehearsal.py)
    from papa.checks import built_position_limit

    assert built_position_limit({"family": "roberta", "config": {"max_position_embeddings": 40}}) == 38
    assert built_position_limit({"family": "roberta"}) == built_position_limit({"family": "bert"}) == n

    class Tok:
        pad_token_id, bos_token_id, eos_token_id = 7, 5, 6

        def __len__(self):
            return 300

    cfg = rehearsal.model_config("roberta", Tok())
    assert (cfg.vocab_size, cfg.pad_token_id, cfg.bos_token_id, cfg.eos_token_id) == (300, 7, 5, 6)


def test_tokenizer_release_names_the_package_of_minilms_vocabulary():
    from papa.models import model_release

    assert model_release("minilm") is not None
    minilm = model_release("minilm")
    want = {"bert": minilm, "electra": minilm, "roberta": None, "deberta": None}
    assert {f: rehearsal.tokenizer_release(f) for f in rehearsal.FAMILIES} == want


def test_hub_checkpoints_settings_of_the_models_built(built_models):
    """Settings of the real checkpoints (roberta-base: layer_norm_eps 1e-5, one segment; deberta-base: 1e-7, no
    segments); the longest input fits the positions (RoBERTa's start after its padding index); rehearsal.json says
    what was built."""
    from transformers import AutoTokenizer

    want = {"roberta": {"layer_norm_eps": 1e-5, "type_vocab_size": 1, "max_position_embeddings": 130},
            "deberta": {"layer_norm_eps": 1e-7, "type_vocab_size": 0, "max_relative_positions": -1,
                        "max_position_embeddings": 128},
            "bert": {"type_vocab_size": 2, "max_position_embeddings": 128},
            "electra": {"type_vocab_size": 2, "embedding_size": 64}}  # fmt: skip
    for family, values in want.items():
        cfg = json.loads((built_models[family] / "config.json").read_text())
        assert {k: cfg[k] for k in values} == values, family
        tok = AutoTokenizer.from_pretrained(built_models[family])
        assert tok.model_max_length == 128, family
        made = json.loads((built_models[family] / "rehearsal.json").read_text())
        assert (made["family"], made["config"], made["vocab_size"]) == (family, {}, len(tok)), family
    sizes = {f: len(AutoTokenizer.from_pretrained(built_models[f])) for f in ("roberta", "deberta")}
    assert sizes == {"roberta": 4000, "deberta": VOCAB_SIZE}  # the size asked for, else build_model's
