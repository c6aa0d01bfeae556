"""The config's documentation is complete: every key of the config schema says what it does (its
``description``), and data/README.md ("Local files", which README.md says has every key) names every key
a local dataset spec takes."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
DATA_README = ROOT / "data/README.md"

#: Keywords whose value is one subschema, a list of them, or a mapping name -> subschema (JSON Schema 2020-12).
ONE = ("additionalProperties", "items", "contains", "propertyNames", "if", "then", "else", "not")
MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
NAMED = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas")
#: The subschemas that document a key of the config (or a reusable definition): each needs a description.
#: Branches (if/then/else, anyOf, ...) and array items are parts of their key's schema, described there.
DOCUMENTED = ("properties", "patternProperties", "definitions", "$defs", "additionalProperties")


def _undescribed(node, path: str = "") -> list[str]:
    """Dotted paths (``datasets.<name>.test``, ``definitions.resource.threads``) of the subschemas under
    ``node``, at every depth, that document a key (`DOCUMENTED`) and have no non-empty description."""
    if not isinstance(node, dict):
        return []
    found = []

    def visit(keyword: str, sub, where: str) -> None:
        if keyword in DOCUMENTED and isinstance(sub, dict):
            text = sub.get("description")
            if not (isinstance(text, str) and text.strip()):
                found.append(where)
        found.extend(_undescribed(sub, where))

    join = (lambda name: f"{path}.{name}") if path else (lambda name: name)
    for keyword in NAMED:
        prefix = f"{keyword}." if keyword in ("definitions", "$defs") else ""
        for name, sub in (node.get(keyword) or {}).items():
            visit(keyword, sub, join(prefix + (f"<{name}>" if keyword == "patternProperties" else name)))
    for keyword in ONE:
        sub = node.get(keyword)
        label = "<name>" if keyword == "additionalProperties" else "[]" if keyword == "items" else None
        visit(keyword, sub, join(label) if label else path)
    for keyword in MANY:
        for sub in node.get(keyword) or []:
            visit(keyword, sub, path)
    return found


def test_every_schema_key_has_a_description():
    schema = yaml.safe_load(SCHEMA.read_text())
    missing = _undescribed(schema)
    assert not missing, f"{len(missing)} key(s) of {SCHEMA.relative_to(ROOT)} without a description: " + ", ".join(
        missing
    )


def test_undescribed_keys_are_found_at_every_depth():
    """The walk itself: a key is reported under properties, additionalProperties, patternProperties,
    if/then branches, array items and definitions."""
    schema = {
        "description": "root",
        "definitions": {"block": {"properties": {"x": {"type": "integer"}}}},
        "properties": {
            "named": {
                "description": "d",
                "additionalProperties": {"properties": {"leaf": {"type": "string"}}},
                "patternProperties": {"^a": {"description": "d", "if": {}, "then": {"properties": {"b": {}}}}},
            },
            "listed": {"description": "d", "items": {"properties": {"c": {"description": " "}}}},
        },
    }
    assert sorted(_undescribed(schema)) == sorted([
        "definitions.block",
        "definitions.block.x",
        "named.<name>",
        "named.<name>.leaf",
        "named.<^a>.b",
        "listed.[].c",
    ])  # fmt: skip


def _section(text: str, heading: str) -> str:
    """The text of the ``## heading`` section of a Markdown file, up to the next heading of its level."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"no section '## {heading}'"
    return match.group(1)


def test_data_readme_names_every_local_spec_key():
    from papa.data.task import COMMON_KEYS, SOURCE_KEYS

    section = _section(DATA_README.read_text(), "Local files")
    keys = sorted(COMMON_KEYS | SOURCE_KEYS["local"])
    missing = [k for k in keys if f"`{k}`" not in section and f'"{k}"' not in section]
    assert not missing, f"data/README.md's 'Local files' section does not name the local spec key(s) {missing}"


def _documented(node, path: str = ""):
    """(dotted path, subschema) of every subschema under ``node`` that documents a key (as `_undescribed` walks)."""
    if not isinstance(node, dict):
        return
    join = (lambda name: f"{path}.{name}") if path else (lambda name: name)
    for keyword in NAMED:
        prefix = f"{keyword}." if keyword in ("definitions", "$defs") else ""
        for name, sub in (node.get(keyword) or {}).items():
            where = join(prefix + (f"<{name}>" if keyword == "patternProperties" else name))
            if isinstance(sub, dict):
                yield where, sub
            yield from _documented(sub, where)
    for keyword in ONE:
        sub = node.get(keyword)
        label = "<name>" if keyword == "additionalProperties" else "[]" if keyword == "items" else None
        if keyword == "additionalProperties" and isinstance(sub, dict):
            yield join(label), sub
        yield from _documented(sub, join(label) if label else path)
    for keyword in MANY:
        for sub in node.get(keyword) or []:
            yield from _documented(sub, path)


#: "(default 0.2)", "; default mask)": a default that a description states in words
_STATED_DEFAULT = re.compile(r"[(;] ?default ([^\s,;:)]+)[,;:)]")


def test_a_default_the_schema_states_in_words_is_the_librarys():
    """A key that the schema gives no ``default:`` (the library's applies, to a notebook's caller too: a dataset's
    by its source, a probe's inherited by the lambda block) and whose description states a default ("(default
    0.2)") states the value the library takes: each is held here against the library's constant, so the number
    lives in one place in code and the schema's words cannot drift from it. A new one must be added here."""
    from papa.checks import DATASET_DEFAULTS, HPARAM_DEFAULTS, MLM_OPTION_DEFAULTS
    from papa.data.hub import HUB_TIMEOUT

    dataset = {f"datasets.<name>.{k}": v for k, v in DATASET_DEFAULTS.items()}
    library = {
        **{f"definitions.lambda_hparams.{k}": v for k, v in HPARAM_DEFAULTS.items()},
        **{f"analyses.mlm.{k}": v for k, v in MLM_OPTION_DEFAULTS.items()},
        # the MLM probe's trainer settings: papa.pipeline.train_config of the block, TrainConfig's defaults
        **{f"analyses.mlm.{k}": HPARAM_DEFAULTS[k] for k in ("weight_decay", "init")},
        **dataset,
        "datasets.<name>.hub_timeout": HUB_TIMEOUT,
    }
    stated, referred = {}, set()
    for path, sub in _documented(yaml.safe_load(SCHEMA.read_text())):
        if "default" in sub or not isinstance(sub.get("description"), str):
            continue
        for match in _STATED_DEFAULT.finditer(sub["description"]):
            word = match.group(1)
            if re.fullmatch(r"[a-z_]+(\.[a-z_]+)+|lr", word):  # another key's value ("default analyses.mlm.lr")
                referred.add(path)
            else:
                stated[path] = yaml.safe_load(word)
    assert referred == {f"analyses.mlm.lambda{k}" for k in ("", ".lr", ".epochs", ".batch_size", ".weight_decay",
                                                             ".max_grad_norm", ".backbone_dropout")}  # fmt: skip
    unheld = sorted(set(stated) - set(library))
    assert not unheld, f"schema keys that state a default in words and are held against no library value: {unheld}"
    for path, value in stated.items():
        held = library[path]
        assert value == held and isinstance(value, bool) == isinstance(held, bool), (path, value, held)
    # the numbers of the audit: each stated, each the library's
    assert {p: stated[p] for p in ("datasets.<name>.validation_fraction", "datasets.<name>.hub_timeout",
                                   "datasets.<name>.chunk_words", "datasets.<name>.min_words",
                                   "definitions.lambda_hparams.weight_decay", "definitions.lambda_hparams.dropout")} \
        == {"datasets.<name>.validation_fraction": 0.2, "datasets.<name>.hub_timeout": 10,
            "datasets.<name>.chunk_words": 100, "datasets.<name>.min_words": 8,
            "definitions.lambda_hparams.weight_decay": 0, "definitions.lambda_hparams.dropout": 0.1}  # fmt: skip


def test_the_package_readers_message_states_their_default():
    """`papa.data.packages.spec_problems` names min_words' default in its message: the library's own."""
    from papa.data.packages import CHUNK_DEFAULTS, spec_problems

    (why,) = spec_problems("wiki", {"min_words": 50, "chunk_words": 10})
    assert f"(default {CHUNK_DEFAULTS['min_words']})" in why


def test_the_optional_hparams_keys_are_the_schemas():
    """The optional keys of a probe/lambda block, with the value a job takes without them (papa.checks.
    HPARAM_DEFAULTS: the trainer's and the stages', held against those in tests/test_workflow.py), are the keys of
    the schema's lambda_hparams but the three a probe block requires and the lambda block's seed."""
    from papa.checks import HPARAM_DEFAULTS, STAGE_DEFAULTS, TRAINER_DEFAULTS

    hparams = yaml.safe_load(SCHEMA.read_text())["definitions"]["lambda_hparams"]
    required = set(yaml.safe_load(SCHEMA.read_text())["definitions"]["hparams"]["required"])
    assert required == {"lr", "batch_size", "epochs"}
    assert set(hparams["properties"]) == required | {"seed"} | set(HPARAM_DEFAULTS)
    assert HPARAM_DEFAULTS == {**TRAINER_DEFAULTS, **STAGE_DEFAULTS} and not set(TRAINER_DEFAULTS) & set(STAGE_DEFAULTS)
    assert not any("default" in sub for sub in hparams["properties"].values())  # the lambda block inherits them


def test_validation_fills_the_defaults_the_checks_read(tmp_path):
    """The checks after validation read the schema's defaults as filled in (the top-level seed and layout,
    analyses.mlm's head and decoder: an object under if/then), with no fallback of their own: a config that
    leaves them out gets the schema's, and its lambda blocks the probe's keys but extra_lr, and that seed."""
    from papa.checks import validate_config
    from tests.test_workflow import ROOT as REPO
    from tests.test_workflow import SMOKE

    cfg = yaml.safe_load((REPO / SMOKE).read_text())
    for key in ("seed", "layout"):
        cfg.pop(key, None)
    cfg["datasets"].setdefault("wiki", {"source": "package"})
    cfg["analyses"] = {**(cfg.get("analyses") or {}), "mlm": {"models": list(cfg["models"]), "dataset": "wiki"}}
    cfg["tasks"]["rt_sentiment"]["probe"]["extra_lr"] = 0.5
    cfg["tasks"]["rt_sentiment"].pop("lambda", None)  # left out: derived
    validate_config(cfg, warn=lambda message: None)
    schema = yaml.safe_load(SCHEMA.read_text())
    assert (cfg["seed"], cfg["layout"]) == (schema["properties"]["seed"]["default"], "papa")
    assert (cfg["analyses"]["mlm"]["head"], cfg["analyses"]["mlm"]["decoder"]) == ("probe", "tied")
    probe, lam = cfg["tasks"]["rt_sentiment"]["probe"], cfg["tasks"]["rt_sentiment"]["lambda"]
    assert lam == {**{k: v for k, v in probe.items() if k != "extra_lr"}, "seed": cfg["seed"]}
