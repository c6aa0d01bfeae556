"""Cross-checks of a workflow config that its JSON schema cannot express.

The workflow runs `check_config` when it parses the config, so a mistake that would
otherwise surface hours later inside a job (a metric that does not fit the task kind, a
sequence length beyond the model's positions, an unknown package dataset, a seed or
task listed twice) fails before any job starts, naming the config key and what to change.
`migrate_config` renames the deprecated keys a config may still use before anything reads it.
`validate_config` (`load_config` for a file) does all of it in the workflow's order: rename,
validate against the schema filling in its defaults, fill in the derived defaults, cross-check;
the Snakefile calls it, and a notebook or `papa.cost` sees through it the config the rules see.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections import Counter
from pathlib import Path

from .data import KNOWN_TASKS, LABEL_SETS, LOCAL_FILE_KEYS
from .data.local import FORMAT_NAMES, LOCAL_DEFAULTS, format_of_name, no_rows
from .data.packages import CHUNK_DEFAULTS
from .data.task import VALIDATION_FRACTION
from .io import expand_home, open_safetensors
from .metrics import chunk_tagged, entity_f1_problem
from .records import listed, read_schema
from .spec import (
    ALL_CONSTANT,
    BINARY_METRICS,
    CONSTANTS_PATTERN,
    CORPUS_SEP,
    DATA_KINDS,
    LAMBDA_ORDERS,
    METHOD_CONSTANTS,
    METHOD_ORDER,
    METRICS,
    NAME_PATTERN,
    ORIGINAL,
    PREPARED_SPLITS,
    ConstantsSpec,
    check_fraction,
    format_fraction,
    is_all_constant,
    is_original,
    is_partial,
    n_dynamic,
    needs_lambdas,
)

#: The workflow's config schema (its ``default:``s are the one source of the config's defaults).
SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"

#: Deprecated config keys -> the key that replaced them: (section, old, new).
RENAMED_KEYS = (("sweep", "fractions", "fraction_dynamic"),)


class ConfigError(ValueError):
    """The workflow config is invalid; the message names every offending key."""


class DeprecatedConfigKey(FutureWarning):
    """The config uses a key that was renamed (`RENAMED_KEYS`); it still works, for now."""


def migrate_config(config: dict, warn=None) -> dict:
    """Rename the deprecated keys of ``config`` in place (``sweep.fractions`` ->
    ``sweep.fraction_dynamic``), warning for each; fail when a config gives both names.

    ``warn``: called with each warning's text (the workflow passes Snakemake's logger, which
    shows it where Python warnings are not); default: a `DeprecatedConfigKey` warning.
    Returns ``config``. The workflow calls it before anything reads the config."""
    for section, old, new in RENAMED_KEYS:
        block = config.get(section)
        if not isinstance(block, dict) or old not in block:
            continue
        if new in block:
            raise ConfigError(f"Invalid config: {section}.{old} is the old name of {section}.{new}; "
                              f"give only {section}.{new}")  # fmt: skip
        message = f"config key {section}.{old} is deprecated: rename it {section}.{new}"
        if warn is None:
            warnings.warn(message, DeprecatedConfigKey, stacklevel=2)
        else:
            warn(message)
        block[new] = block.pop(old)
    return config


def normalise_results(config: dict) -> dict:
    """``results`` written one way: repeated '/' as one, no './' (leading or inside), no trailing '/' (``results/``
    and ``./results`` are the folder ``results``). As written, Snakemake warned of every output path under them
    (over a thousand lines a start: a double '/', a leading './') and keyed its records by those paths. A '..' is
    left as it is: through a linked folder it is not the folder the text before it names. Left as it is where it is
    no plain path (`_results_folder` names the problem)."""
    from .records import spelling

    r = config.get("results")
    if isinstance(r, str) and r.strip() and not any(c.isspace() for c in r):
        config["results"] = spelling(r)
    return config


def fill_derived_defaults(config: dict) -> dict:
    """Fill in the defaults the schema cannot state because they derive from other keys (after
    validation: the schema's own defaults, the top-level ``seed`` among them, are in):

    * ``tasks.<t>.main_metric``: the task's first metric;
    * ``tasks.<t>.lambda``: the lambda stage's complete hparams, the probe's overridden key by key
      by the block's own, with ``seed`` the top-level seed unless the block gives one; but not the probe's
      ``extra_lr`` (the learning rate of trained matrices): the lambdas learn at the block's own ``extra_lr``,
      else at its ``lr`` (the paper's and the authors': the probe's learning rate);
    * ``seed`` of ``analyses.mlm``, of ``models.<m>.build`` and of ``build_data.<k>``: the
      top-level seed unless given.

    Idempotent (a filled config validates and fills to itself). In place; returns ``config``."""
    seed = config["seed"]
    for tc in (config.get("tasks") or {}).values():
        if not isinstance(tc, dict):
            continue
        if tc.get("metrics"):
            tc.setdefault("main_metric", tc["metrics"][0])
        if isinstance(tc.get("probe"), dict):
            tc["lambda"] = lambda_block(tc["probe"], tc.get("lambda"), seed)
    blocks = [(config.get("analyses") or {}).get("mlm")]
    blocks += [entry.get("build") for entry in (config.get("models") or {}).values() if isinstance(entry, dict)]
    blocks += list((config.get("build_data") or {}).values())
    for block in blocks:
        if isinstance(block, dict):
            block.setdefault("seed", seed)
    return config


def lambda_block(probe: dict, own: dict | None, seed: int) -> dict:
    """A task's filled ``lambda`` block (`fill_derived_defaults`): its ``probe`` block's keys but ``extra_lr`` (the
    learning rate of trained matrices: the lambdas learn at the block's own ``extra_lr``, else at its ``lr``),
    overridden key by key by the block's ``own`` keys, with ``seed`` the top-level ``seed`` unless given."""
    block = {**{k: v for k, v in probe.items() if k != "extra_lr"}, **(own or {})}
    block.setdefault("seed", seed)
    return block


def _text_leaves(value, path: tuple = ()):
    """The paths (tuples of keys and list indices) of the text values in a nested mapping/list."""
    from collections.abc import Mapping

    if isinstance(value, str):
        yield path
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _text_leaves(v, (*path, k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _text_leaves(v, (*path, i))


def read_command_line(config: dict, given) -> dict:
    """Read the values Snakemake's ``--config`` gave (``given``: its parsed ``key=value`` pairs,
    ``workflow.config_settings.config``) as the same lines of a config file would be read. Snakemake reads a value
    inside ``{...}`` or ``[...]`` with YAML's BaseLoader, which makes every scalar text (``--config 'sweep={seeds:
    [0]}'`` gives the seed ``'0'``, ``'analyses={tasks: null}'`` the text ``'null'``), and a top-level ``null`` is
    text too. Where the schema takes no text at such a place, the text is read as YAML reads it in a file (a number,
    a bool, null) if that is a value the schema takes there; elsewhere (a name, a label, a path) it stays as given.
    In place; returns ``config``."""
    import yaml
    from jsonschema.validators import validator_for

    texts = set(_text_leaves(dict(given or {})))
    if not texts or not isinstance(config, dict):
        return config
    schema = read_schema(SCHEMA)
    validator = validator_for(schema)(schema)

    def every(errors):
        for error in errors:
            yield error
            yield from every(error.context or [])

    for error in list(every(validator.iter_errors(config))):
        path = tuple(error.absolute_path)
        if error.validator != "type" or path not in texts or not isinstance(error.instance, str):
            continue
        read = yaml.safe_load(error.instance) if error.instance.strip() else None
        expected = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        if isinstance(read, str) or not any(validator.is_type(read, t) for t in expected):
            continue
        target = config
        for part in path[:-1]:
            target = target[part]
        if target[path[-1]] == error.instance:  # (once: an anyOf branch may name the same value again)
            target[path[-1]] = read
    return config


def _schema_ref(root: dict, ref: str) -> dict:
    """The subschema a local ``$ref`` (``#/$defs/probe``, a JSON pointer into ``root``) points to."""
    target = root
    for part in ref[2:].split("/"):
        target = target[part.replace("~1", "/").replace("~0", "~")]
    return target


def integers_as_int(value, schema: dict, root: dict | None = None):
    """``value`` with every integer-valued float where ``schema`` says ``type: integer`` made an int (YAML's
    ``32.0``, which JSON Schema's integer accepts, would otherwise reach paths as ``N32.0`` or ``seed1.0``).

    Walks the schema generically: ``properties``, ``additionalProperties``, ``items``, ``$ref`` (a JSON pointer
    into ``root``, default ``schema``) and the subschemas of ``allOf`` / ``anyOf`` / ``oneOf`` / ``then`` /
    ``else`` (an integer-valued float and its int are the same JSON number, so converting never changes which
    branch matches). Dicts and lists in place; returns the value (converted if it is a float itself)."""
    root = schema if root is None else root
    if not isinstance(schema, dict):
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        value = integers_as_int(value, _schema_ref(root, ref), root)
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key) or []:
            value = integers_as_int(value, sub, root)
    for key in ("then", "else"):
        value = integers_as_int(value, schema.get(key), root)
    types = schema.get("type")
    if isinstance(value, float) and value.is_integer() and "integer" in (types if isinstance(types, list) else [types]):
        return int(value)
    if isinstance(value, dict):
        properties, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for k, v in value.items():
            sub = properties.get(k, extra if isinstance(extra, dict) else None)
            if sub is not None:
                value[k] = integers_as_int(v, sub, root)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        value[:] = [integers_as_int(v, schema["items"], root) for v in value]
    return value


def validate_config(config: dict, warn=None) -> dict:
    """What the workflow does to a config before any rule reads it, in order: rename deprecated
    keys (`migrate_config`, ``warn`` as there), validate it against `SCHEMA` filling in the
    schema's defaults, make the integer-valued floats of integer keys ints (`integers_as_int`), write ``results``
    one way (`normalise_results`), fill in the derived defaults (`fill_derived_defaults`), cross-check it
    (`check_config`). In place; returns ``config``;
    fails with the offending key named."""
    from snakemake.utils import validate

    if not SCHEMA.is_file():
        raise FileNotFoundError(f"{SCHEMA} is missing: papa reads the workflow's schema from its checkout "
                                f"(pip install -e . from a clone of the project)")  # fmt: skip
    if not isinstance(config, dict):  # the checks before the schema's read it as a mapping
        raise ConfigError(f"Invalid config: a config is a mapping of keys (results:, models:, tasks:, ...), got "
                          f"{type(config).__name__} {str(config)[:80]!r}")  # fmt: skip
    migrate_config(config, warn)
    keys = _non_text_keys(config)
    if keys:  # before the schema, whose name patterns do not apply to them, and anything that sorts the names
        raise ConfigError("\n".join(keys))
    schema = read_schema(SCHEMA)
    unknown = unknown_keys(config, schema) + _unread_build_keys(config, schema)
    if unknown:  # before Snakemake's validation, whose message for them is the whole schema and config
        raise ConfigError("\n".join(unknown))
    try:
        validate(config, schema_file(SCHEMA), set_default=True)
    except Exception:  # Snakemake's message: the error, then the whole schema (and config); one line per key instead
        lines = schema_errors(config, schema)
        if not lines:  # pragma: no cover - what the schema refuses, schema_errors names
            raise
        raise ConfigError("\n".join(lines)) from None
    integers_as_int(config, schema)
    normalise_results(config)
    fill_derived_defaults(config)
    check_config(config)
    for message in unused_settings(config):
        if warn is None:
            warnings.warn(message, UserWarning, stacklevel=2)
        else:
            warn(message)
    return config


def schema_file(path=SCHEMA) -> str:
    """The schema at ``path`` as a file Snakemake's `validate` reads fast: a JSON copy in papa's cache
    (`papa.data.default_cache_dir`'s ``schemas/``, named by the digest of the YAML's bytes, so an edit of the schema
    gets a copy of its own), written once through `papa.io.write_text` (whole or not at all) and read by every later
    Snakemake start. Snakemake reads a JSON schema with the json module and a YAML one with yte's pure-Python YAML
    loader, a tenth of a second a call (every Snakemake start, dry runs too, and each config check of the tests).
    The YAML path itself where the cache cannot be written. One small file per version of the schema: writing one
    removes the others not written for a month (`papa.data.downloads.prune_cache_entries`; one another checkout still
    reads is written again at its next start)."""
    import hashlib

    from .data.downloads import default_cache_dir, prune_cache_entries
    from .io import write_text

    path = Path(path)
    try:
        copy = default_cache_dir() / "schemas" / f"{hashlib.sha256(path.read_bytes()).hexdigest()[:32]}.json"
        if not copy.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            write_text(copy, json.dumps(read_schema(path)))
            prune_cache_entries(copy.parent, copy)
        return str(copy)
    except (OSError, ValueError):  # ValueError: a PAPA_CACHE under an unknown ~user (`known_home`)
        return str(path)


def unused_settings(config: dict) -> list[str]:
    """Settings of a valid config that change nothing in this run (`validate_config` warns of each): an
    ``encoding`` option set to ``authors`` where no dataset the config tokenizes (`tokenized_inputs`) has the
    input shape it changes (`ENCODING_REACH`: sentence pairs, single sentences); ``cache.scratch`` or
    ``disk_budget_mb`` beside a strategy that keeps no disk cache (a profile's scratch folder stays valid when a
    run switches strategy); a local dataset's ``test`` file (the workflow prepares `papa.spec.PREPARED_SPLITS`:
    it neither reads nor checks it); ``resources.<rule>.gpu`` of a rule that runs on the CPU (`CPU_RULES`); a
    token task's probe ``dropout`` (its probe, a linear layer per token, has none); a probe's ``extra_lr`` where
    no run trains constants; ``analyses.head_orders_models``/``head_orders_tasks`` beside no head order; an
    ``analyses.cross_corpus`` corpus that is every analysed task's own; a task that no
    model runs (``model_tasks``: a sample of a larger config may mean it); a dataset nothing reads, a ``build_data``
    entry no dataset is built from."""
    datasets, encoding = config.get("datasets") or {}, config.get("encoding") or {}
    tokenized = [d for _, d, _ in tokenized_inputs(config)]
    tasks_read = task_datasets(config)

    def shapes(key):  # of the datasets the option reaches (`TASK_ONLY_ENCODING`'s: the tasks' only)
        return {input_shape(d, datasets[d]) for d in tokenized if key not in TASK_ONLY_ENCODING or d in tasks_read}

    what = {"pair": "sentence pairs", "single": "single sentences"}
    unused = [f"encoding.{key}: 'authors' changes how {what[shape]} are encoded, and no dataset this config "
              f"tokenizes {'for a task ' if key in TASK_ONLY_ENCODING else ''}gives {what[shape]}: it changes "
              f"nothing here"
              for key, shape in ENCODING_REACH.items()
              if encoding.get(key) == "authors" and None not in shapes(key) and shape not in shapes(key)]  # fmt: skip
    cache = config.get("cache") or {}
    run = {t for m in config.get("models") or {} for t in model_tasks(config, m)}  # the tasks some model runs
    reencoded = _reencoding_tasks(config, run)
    if reencoded:  # every probe job re-encodes (backbone dropout): no cache, whatever its settings
        defaults = _schema_defaults("cache")
        unused += [f"cache.{key}: every task's probe runs with backbone_dropout ({', '.join(reencoded)}), so its "
                   f"hidden states change every pass and are re-encoded, never cached: it changes nothing here "
                   f"(cache.dtype still rounds them)"
                   for key in ("strategy", "budget_mb", "disk_budget_mb", "scratch", "batch_size")
                   if key in cache and cache[key] != defaults.get(key)]  # fmt: skip
    elif cache.get("strategy") in ("memory", "reencode"):  # no disk cache: its folder and budget go unread
        unused += [f"cache.{key} is read by cache.strategy auto and disk only (where a disk cache may be used), and "
                   f"strategy is {cache['strategy']}: it changes nothing here"
                   for key in ("scratch", "disk_budget_mb") if cache.get(key) is not None]  # fmt: skip
    for d, spec in datasets.items():
        for key in sorted(set(LOCAL_FILE_KEYS) - set(PREPARED_SPLITS)):
            if spec.get("source") == "local" and spec.get(key):
                unused.append(f"datasets.{d}.{key}: the workflow prepares the {' and '.join(PREPARED_SPLITS)} "
                              f"splits only (the probes are scored on validation, as in the paper), so it does not "
                              f"read this file; papa.load_task does, in a notebook")  # fmt: skip
    for rule in CPU_RULES:
        if "gpu" in ((config.get("resources") or {}).get(rule) or {}):
            unused.append(f"resources.{rule}.gpu: rule {rule} runs on the CPU and asks for no GPU: it changes "
                          f"nothing")  # fmt: skip
    learned = lambda_tasks(config)
    for t, tc in (config.get("tasks") or {}).items():
        written = _lambda_settings(config, t)
        if t in run and t not in learned and written:
            unused.append(f"tasks.{t}.lambda ({', '.join(written)}): no run of task {t} learns lambdas (head order "
                          f"{' or '.join(LAMBDA_ORDERS)} at a fraction_dynamic between 0 and 1, in sweep.selections "
                          f"or analyses.head_orders), so the lambda stage never runs for it: it changes nothing "
                          f"here")  # fmt: skip
        if dataset_kind(tc.get("dataset", ""), datasets.get(tc.get("dataset"), {})) != "token":
            continue
        probe = tc.get("probe") or {}
        for block in ("probe",) if t not in learned else ("probe", "lambda"):
            hp = tc.get(block) or {}
            if "dropout" in hp and (block == "probe" or hp["dropout"] != probe.get("dropout")):
                unused.append(f"tasks.{t}.{block}.dropout: task {t} tags tokens, and its probe (a linear layer per "
                              f"token) has no dropout: it changes nothing")  # fmt: skip
    analyses = config.get("analyses") or {}
    specs = [*(config.get("sweep") or {}).get("constants", []), *analyses.get("constant_kinds", [])]
    if not any(ConstantsSpec.parse(c).trained for c in specs):  # (check_config has parsed each)
        unused += [f"tasks.{t}.probe.extra_lr is the learning rate of trained constant matrices (average_trained, "
                   f"toeplitz_trained), and no run of this config trains them: it changes nothing here (the lambdas' "
                   f"is tasks.{t}.lambda.extra_lr)"
                   for t, tc in (config.get("tasks") or {}).items()
                   if "extra_lr" in (tc.get("probe") or {})]  # fmt: skip
    if run:  # (none: an MLM-only config, which runs no task)
        unused += [f"tasks.{t} is run by no model: model_tasks gives every model other tasks, so it is in no table "
                   f"or figure; add {t!r} to a model's model_tasks to run it (a sample of a larger config may mean "
                   f"it)" for t in config.get("tasks") or {} if t not in run]  # fmt: skip
    if not analyses.get("head_orders"):
        unused += [f"analyses.{key} narrows the runs of analyses.head_orders, which lists no head order: it changes "
                   f"nothing" for key in ("head_orders_models", "head_orders_tasks")
                   if analyses.get(key) is not None]  # fmt: skip
    analysed = {t for m in config.get("models") or {} for t in analysed_tasks(config, m)}
    for corpus in analyses.get("cross_corpus") or []:
        # a corpus that is every analysed task's own: matrices averaged on it are each task's own ('average' run)
        if analysed and all((config["tasks"].get(t) or {}).get("dataset") == corpus for t in analysed):
            unused.append(f"analyses.cross_corpus: {corpus!r} is the own corpus of every task the analyses run on "
                          f"({', '.join(sorted(analysed))}): matrices averaged on it are the task's own (its "
                          f"'average' run), so it adds no cross-corpus run (Table 2 pairs a task with another "
                          f"corpus)")  # fmt: skip
    unused += [
        f"datasets.{d}: no task, constants spec (sweep.constants on a task a model runs, "
        f"analyses.cross_corpus on a task the analyses run on) or analyses.mlm reads it, so it is never "
        f"prepared: it changes nothing here"
        for d in datasets
        if d not in tokenized
    ]  # fmt: skip (tokenized_inputs: every dataset a job reads)
    built = {spec.get("build") for spec in datasets.values() if isinstance(spec, dict)}
    unused += [f"build_data.{b}: no dataset is built from it (a dataset's build: {b}), so it is never built: it "
               f"changes nothing here" for b in config.get("build_data") or {} if b not in built]  # fmt: skip
    return unused


def lambda_tasks(config: dict) -> set[str]:
    """The tasks of a valid config whose runs learn lambdas (the workflow's rule learn_lambda): those of a
    `probe_runs` run with a lambda-ranked head order (`papa.spec.LAMBDA_ORDERS`) at a partial fraction_dynamic."""
    return {t for m, t, c, s, f in probe_runs(config) if needs_lambdas(s, f)}


def _lambda_settings(config: dict, task: str) -> list[str]:
    """The keys of a filled ``tasks.<task>.lambda`` block that differ from what `fill_derived_defaults` gives a
    block left out (`lambda_block` of no keys of its own): the lambda settings a config wrote."""
    tc = (config.get("tasks") or {}).get(task) or {}
    block = tc.get("lambda") or {}
    derived = lambda_block(tc.get("probe") or {}, None, config["seed"])
    return [k for k, v in block.items() if k not in derived or derived[k] != v]


def _reencoding_tasks(config: dict, run: set[str]) -> list[str]:
    """The tasks ``run`` (those a model of a valid config runs) when every one of them runs its probe with
    ``backbone_dropout`` (its hidden states change every pass: every probe job re-encodes them,
    `papa.probe.choose_strategy`); else none."""
    tasks = config.get("tasks") or {}
    if run and all(((tasks.get(t) or {}).get("probe") or {}).get("backbone_dropout") for t in run):
        return sorted(run)
    return []


def _schema_defaults(key: str) -> dict:
    """The schema's defaults of the keys of a top-level block (``cache``: its ``default:`` per key)."""
    properties = read_schema(SCHEMA)["properties"][key]["properties"]
    return {k: v["default"] for k, v in properties.items() if isinstance(v, dict) and "default" in v}


def _unread_build_keys(config: dict, schema: dict) -> list[str]:
    """Keys of a ``models.<m>.build`` entry that its family does not read (`papa.rehearsal.build_settings`:
    ``vocab_size`` sizes the BPE trained for roberta and deberta only), where the config gives another value than
    the schema's default (which validation fills in for every build: a validated config validates again)."""
    from .rehearsal import TOKENIZERS, build_settings

    build_schema = schema["properties"]["models"]["additionalProperties"]["then"]["properties"]["build"]
    defaults = {k: v.get("default") for k, v in build_schema["properties"].items()}
    errors = []
    models = config.get("models")
    for m, entry in (models if isinstance(models, dict) else {}).items():  # another type: the schema names it
        build = entry.get("build") if isinstance(entry, dict) else None
        family = build.get("family") if isinstance(build, dict) else None
        if isinstance(family, str) and family in TOKENIZERS:  # another family (or a list): the schema names it
            unread = sorted(k for k in set(build) - set(build_settings(build)) if build[k] != defaults.get(k))
            errors += [f"models.{m}.build.{key} is not read for family {build['family']!r} (only roberta and "
                       f"deberta train a BPE vocabulary of that size here; bert and electra take MiniLM's "
                       f"WordPiece): remove it" for key in unread]  # fmt: skip
    return errors


def closest(value, allowed) -> str | None:
    """The allowed value a mistyped one most likely meant (a "did you mean"), or None: the one that equals it but
    for case (``F1``: ``f1``), else the one of the same words in another order (``f1_macro``: ``macro_f1``, not the
    ``f1`` it begins with), else the only one it begins or that begins it (``acc``: ``accuracy``, not ``mcc``;
    ``rev``: ``reversed``), else the closest by `difflib` (``lamda``: ``lambda``)."""
    import difflib
    import re

    allowed = [str(a) for a in allowed]
    v = str(value).lower()

    def words(text: str) -> list[str]:
        return sorted(w for w in re.split(r"[\s_.-]+", text.lower()) if w)

    said = words(v)
    reordered = [a for a in allowed if len(said) > 1 and words(a) == said]
    for picked in ([a for a in allowed if a.lower() == v], reordered,
                   [a for a in allowed if v and a.lower().startswith(v)],
                   [a for a in allowed if a and v.startswith(a.lower())]):  # fmt: skip
        if len(picked) == 1:
            return picked[0]
    lower = {a.lower(): a for a in allowed}
    near = difflib.get_close_matches(v, list(lower), n=1)
    return lower[near[0]] if near else None


def unknown_keys(config: dict, schema: dict) -> list[str]:
    """One line per key of ``config`` that ``schema`` does not allow where it stands (a misspelt
    ``sweep.batch_ordr``), with its dotted path, the closest allowed key ("did you mean") and the keys
    allowed there. Keys the schema allows anywhere (model and task names) are not checked."""

    from jsonschema.validators import validator_for

    out = []
    for error in validator_for(schema)(schema).iter_errors(config):
        if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
            continue
        where = ".".join(str(p) for p in error.absolute_path)
        # the keys to offer: not a deprecated name (sweep.fractions), nor the probe block's seed (check_config
        # refuses it there: the probes' seeds are sweep.seeds)
        hidden = {old for section, old, _ in RENAMED_KEYS if section == where}
        hidden |= {"seed"} if where.startswith("tasks.") and where.endswith(".probe") else set()
        known = sorted(set(error.schema.get("properties") or {}) - hidden)
        for key in sorted(set(error.instance) - set(known), key=str):
            # a key of another section, written here (sweep's seeds at the top level, a probe's lr beside dataset:):
            # its place there, not the nearest key here (``seeds``: ``seed``, whose value is one number)
            elsewhere = _places_of(key, tuple(error.absolute_path), schema) if isinstance(key, str) else []
            near = closest(key, known) if not elsewhere else None
            hint = f"did you mean {near!r}? " if near else ""
            if elsewhere:
                hint = (f"did you mean {' or '.join(repr(p) for p in elsewhere)} (a key of "
                        f"{' and '.join(dict.fromkeys(p.rpartition('.')[0] for p in elsewhere))}, not of "
                        f"{where or 'the top level'})? ")  # fmt: skip
            path, place = (f"{where}.{key}", f"under {where}") if where else (str(key), "at the top level")
            out.append(f"config key {path!r} is not known: {hint}the keys allowed {place} are {', '.join(known)}")
    return out


#: What a name stands for in the dotted places `_places_of` offers, by the section whose entries the user names.
_NAME_PLACEHOLDERS = {"models": "<model>", "tasks": "<task>", "datasets": "<dataset>", "model_tasks": "<model>"}


def _schema_places(schema: dict, node, at: tuple = (), refs: frozenset = frozenset()):
    """(place, key) of every key ``schema`` allows anywhere (``node``: the subschema walked, first ``schema``):
    ``place`` the tuple of keys above it, None where the user names the entry (an ``additionalProperties``
    mapping: a model, a task)."""
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in refs:  # (a $ref inside itself: once)
        yield from _schema_places(schema, _schema_ref(schema, ref), at, refs | {ref})
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(key) or []:
            yield from _schema_places(schema, sub, at, refs)
    for key in ("then", "else"):
        yield from _schema_places(schema, node.get(key), at, refs)
    for key, sub in (node.get("properties") or {}).items():
        yield at, key
        yield from _schema_places(schema, sub, (*at, key), refs)
    if isinstance(node.get("additionalProperties"), dict):
        yield from _schema_places(schema, node["additionalProperties"], (*at, None), refs)


def _places_of(key: str, where: tuple, schema: dict) -> list[str]:
    """The dotted places, in other sections, of a key ``schema`` does not allow at ``where`` (a tuple of keys) but
    allows elsewhere: those nearest ``where`` (sharing most of its leading keys; a name the user gave is theirs,
    ``tasks.hedge.probe.lr`` for ``lr`` under ``tasks.hedge``), at most three of them (more: no one place meant).
    Not a deprecated name (`RENAMED_KEYS`), nor a probe's ``seed`` (`unknown_keys` hides both)."""
    hidden = {(section,): old for section, old, _ in RENAMED_KEYS}
    found = {}
    for place, name in _schema_places(schema, schema):
        if name != key or hidden.get(place) == key or (key == "seed" and place[-1:] == ("probe",)):
            continue
        shared, parts = 0, []
        for i, part in enumerate(place):
            follows = i == shared and i < len(where) and (part is None or part == where[i])
            shared += follows
            if part is not None:
                parts.append(part)
            elif follows:  # the name the user gave there
                parts.append(str(where[i]))
            else:
                parts.append(_NAME_PLACEHOLDERS.get(str(place[i - 1]) if i else "", "<name>"))
        if parts != [str(w) for w in where]:  # (where it stands: not allowed there, or it would not be unknown)
            found[".".join((*parts, key))] = shared
    best = max(found.values(), default=0)
    nearest = [p for p, shared in found.items() if shared == best]
    return nearest if len(nearest) <= 3 else []


def schema_errors(config: dict, schema: dict) -> list[str]:
    """One line per value of ``config`` that ``schema`` refuses, naming its dotted key and what to change: an
    empty section (YAML's null), a missing key, a number YAML read as text (``1e-3``), a value not among the
    allowed ones (with the closest), a constants label that does not parse; otherwise the schema's own message,
    with the offending value cut short (Snakemake's message is the whole schema and config)."""
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    lines = []
    for error in sorted(validator_for(schema)(schema).iter_errors(config), key=lambda e: list(map(str, e.path))):
        if error.context:  # anyOf / oneOf: the branch that came closest
            error = best_match(error.context)
        lines.append(_schema_error_line(error))
    return list(dict.fromkeys(lines))


def _schema_error_line(error) -> str:

    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    key = f"config key {path!r}" if path else "the config"
    value, kind = error.instance, error.validator
    if kind == "type" and value is None:
        return (f"{key} is empty (YAML reads a key with nothing under it as null): give it its settings, or, where "
                f"the key has defaults, delete it")  # fmt: skip
    expected = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
    if kind == "type" and isinstance(value, str) and {"number", "integer"} & set(expected):
        import re

        import yaml

        unquoted = yaml.safe_load(value) if value.strip() else None  # what the text reads as, without quotes
        if isinstance(unquoted, (int, float)) and not isinstance(unquoted, bool):
            return f"{key} is the text {value!r}, not a number: write it without quotes"
        m = re.fullmatch(r"\s*([-+]?)(\d+)(?:\.(\d*))?[eE]([-+]?)(\d+)\s*", value)
        if m:  # YAML 1.1 (PyYAML, Snakemake) reads exponent notation as a number with a dot and a signed exponent
            sign, whole, fraction, exp_sign, exp = m.groups()
            fixed = f"{sign}{whole}.{fraction or 0}e{exp_sign or '+'}{exp}"
            return (f"{key} is the text {value!r}, not a number: YAML reads exponent notation as a number only "
                    f"with a dot and a signed exponent; write {fixed}")  # fmt: skip
    text_only = "string" in expected and not {"number", "integer", "boolean"} & set(expected)
    if kind == "type" and text_only and isinstance(value, (bool, int, float)):
        # YAML 1.1 reads unquoted no/yes/on/off/true/false as booleans, 0 or 1e3 as numbers: labels, column names
        if isinstance(value, bool):
            why = "YAML reads an unquoted no, yes, off, on, false or true as a boolean; quote it as written, e.g. 'no'"
        else:
            why = f"YAML reads it unquoted as a number; quote it, {str(value)!r}"
        return f"{key} is {value!r}, not text: {why}"
    if kind == "type" and "array" in expected and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        if path.endswith("seeds") and isinstance(value, int) and value > 0:  # a count, or one seed?
            return (f"{key} is {value}, and it takes a list of seeds: write [{value}] for the seed {value}, or "
                    f"{list(range(value))} for {value} seeds")  # fmt: skip
        return f"{key} is {value!r}, and it takes a list: write [{value}]"
    if kind == "type" and value is False and "object" in expected and "null" in expected:  # analyses.patterns: false
        return (f"{key} is false, and it takes its settings: leave it out or write null to turn it off, {{}} for its "
                f"defaults")  # fmt: skip
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return f"{key} lacks the key {missing!r}, which has no default: add it"
    if kind == "enum" and path.startswith("analyses.constant_kinds[") and CORPUS_SEP in str(value):
        kind_, _, corpus = str(value).partition(CORPUS_SEP)
        return (f"{key} is {value!r}: constant_kinds are the kinds Table 1 runs on the task's own data; "
                f"matrices averaged on another corpus are analyses.cross_corpus (write {kind_!r} here, {corpus!r} "
                f"there)")  # fmt: skip
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."  # a value of sixty numbers is cut, as elsewhere
    if kind == "enum":
        allowed = [str(v) for v in error.validator_value]
        near = closest(value, allowed)
        hint = f"did you mean {near!r}? " if near else ""
        return f"{key} is {shown}, not an allowed value: {hint}choose one of {', '.join(allowed)}"
    if kind == "pattern" and error.validator_value == f"^{NAME_PATTERN}$":  # a model, dataset or task name
        return (f"{key}: {value!r} is not a name papa can use: a name is a folder in the output paths, so it holds "
                f"only ASCII letters and digits, '_', '.' and '-' (no '/', space, or letter beyond ASCII such as "
                f"'\u00e9'); rename it")  # fmt: skip
    if kind == "pattern" and error.validator_value == f"^{CONSTANTS_PATTERN}$":  # sweep.constants and the like
        try:
            ConstantsSpec.parse(str(value))
        except ValueError as e:
            return f"{key}: {e}"
    message = error.message.replace(repr(value), shown) if repr(value) != shown else error.message
    return f"{key}: {message}"


def load_config(path, warn=None) -> dict:
    """The config file at ``path`` as the workflow sees it (`read_config_file`, `validate_config`)."""
    return validate_config(read_config_file(path), warn)


def read_config_file(path, allow_empty: bool = False) -> dict:
    """A config file as a dict, read as Snakemake reads a ``--configfile`` (JSON first, whatever its name, else
    YAML: `papa.records.load_config_strict`), or a `ConfigError`: a key given twice in one mapping or object (YAML
    and JSON keep the later one without a word, so a task, a seed list or a learning rate would be lost), a file
    that is not a mapping or (unless ``allow_empty``: then ``{}``) is empty. The workflow checks its config files
    with it before Snakemake's reading of them is used."""
    import yaml

    from .records import load_config_strict, yaml_problem

    text = Path(path).read_text(encoding="utf-8")  # as Snakemake opens it
    try:
        config, twice = load_config_strict(text, path)
    except yaml.YAMLError as e:
        if text.lstrip().startswith(("{", "[")):  # meant as JSON: its error, not YAML's about the tabs
            try:
                json.loads(text)
            except ValueError as j:
                raise ConfigError(f"{path} is not valid JSON: {j} (nor YAML: {yaml_problem(e)})") from None
        raise ConfigError(f"{path} is not valid YAML (nor JSON): {yaml_problem(e)}") from None
    if twice:
        raise ConfigError("\n".join(twice))
    if config is None and allow_empty:
        return {}
    if not isinstance(config, dict):
        got = "empty" if config is None else f"a {type(config).__name__}"
        raise ConfigError(f"{path} is {got}: a config is a mapping of keys (models, datasets, tasks, sweep, ...)")
    return config


def check_config_files(paths) -> list[tuple[str, dict]]:
    """`read_config_file` of each config file given to the workflow (``--configfile``, the Snakefile's default),
    for what Snakemake's reading lets through: a key given twice (in a JSON file too: json keeps the last, without a
    word). An empty file (comments only) adds nothing, as Snakemake reads it. Then their order: an overlay
    (``overlay_of:``) after the file it updates (`papa.records.overlay_problem`). Returns ``[(path, config)]`` of
    the files read (a file not there is left to Snakemake's reading, which names it)."""
    loaded = []
    for path in paths:
        if Path(path).exists():
            loaded.append((path, read_config_file(path, allow_empty=True)))
    from .records import overlay_problem

    if problem := overlay_problem(loaded):
        raise ConfigError(problem)
    return loaded


#: The optional keys of a ``probe``/``lambda`` block that the trainer reads (`papa.pipeline.train_config`) and the
#: value it takes when the block leaves one out: `papa.probe.TrainConfig`'s (a test holds them equal; here, read at
#: parse time, without torch).
TRAINER_DEFAULTS = {"weight_decay": 0.0, "dropout": 0.1, "extra_lr": None, "max_grad_norm": None, "init": "normal"}
#: The optional keys of a ``probe``/``lambda`` block that a stage reads beside the trainer's
#: (`papa.pipeline.stage_options`) and the value it takes without them: `papa.pipeline.LambdaStage`'s and
#: `ProbeStage`'s (a test holds them equal).
STAGE_DEFAULTS = {"max_train": None, "backbone_dropout": False}
#: The optional keys of a ``probe``/``lambda`` block (the schema's ``lambda_hparams`` but ``lr``, ``batch_size``,
#: ``epochs``, ``seed``; a test holds the two key sets equal) and the value the job takes when the block leaves one
#: out. The schema gives these keys no default: a ``lambda`` block inherits the keys it leaves out from the probe's
#: (`lambda_block`), which a default filled in would hide.
HPARAM_DEFAULTS = {**TRAINER_DEFAULTS, **STAGE_DEFAULTS}


#: Keys of a ``datasets`` entry and the value `papa.data.load_task` takes when the entry leaves one out (a test loads
#: a dataset with each written out and left out): `dataset_param` leaves them out of rule prepare_data's params.
DATASET_DEFAULTS = {
    "validation_fraction": VALIDATION_FRACTION,
    **LOCAL_DEFAULTS,  # the column keys (a key of another kind or format is refused by the config check)
    **CHUNK_DEFAULTS,  # package wiki's
    # null where null is what leaving the key out means (not revision, hub_config, data_dir: null there is no pin)
    **dict.fromkeys(("max_train", "max_validation", "validation", "id_column", "labels", "separator")),
}


def _without_defaults(entry: dict, defaults: dict) -> dict:
    """``entry`` without the keys at their value in ``defaults`` (a bool is no number: ``0`` is not ``False``)."""

    def at_default(key, value) -> bool:
        return key in defaults and value == defaults[key] and isinstance(value, bool) == isinstance(defaults[key], bool)

    return {k: v for k, v in entry.items() if not at_default(k, v)}


def path_param(path: str) -> str:
    """A model folder's or a local file's path written one way, as its jobs' param: ``data//train.csv``,
    ``./data/train.csv`` and ``models/x/`` as ``data/train.csv`` and ``models/x`` (another spelling of the same path
    reran every job reading it). A path through ``..`` is kept as written (``link/..`` is not always ``.``); a hub
    id or an alias has nothing to change. A folder spelt as a path whose name is a package alias (``./minilm``,
    ``minilm/``: a fine-tuned copy saved in the working folder) stays ``./minilm``: ``minilm`` is the alias, which
    `papa.models.resolve_model_path` loads from its package whatever folder of that name is there."""
    from .models import is_package_alias

    if not isinstance(path, str) or ".." in Path(path).parts:
        return path
    norm = os.path.normpath(path)
    return os.path.join(".", norm) if norm != path and is_package_alias(norm) else norm


#: ``analyses.mlm`` options and the values `papa.pipeline.MLMStage` takes without them (a test holds them equal):
#: `mlm_param` leaves an option out at its value here, so that writing it out reruns nothing (``masking`` and
#: ``backbone_dropout`` have no schema default, so that existing results keep their params; ``decoder``'s schema
#: default, ``tied``, is the value here).
MLM_OPTION_DEFAULTS = {"masking": "mask", "backbone_dropout": False, "decoder": "tied"}


def mlm_param(block: dict) -> dict:
    """The ``analyses.mlm`` block as rule mlm's param, without what says which models run and on what (``models``,
    ``dataset``, ``max_length``: the job's wildcards) and without an option written out at the value the stage takes
    without it (`MLM_OPTION_DEFAULTS`; a ``lambda`` block's ``backbone_dropout`` equal to the block's), so writing a
    default out reruns nothing."""
    out = _without_defaults({k: v for k, v in block.items() if k not in ("models", "dataset", "max_length")},
                            MLM_OPTION_DEFAULTS)  # fmt: skip
    lam, own = out.get("lambda"), MLM_OPTION_DEFAULTS["backbone_dropout"]  # the block's, where it leaves it out
    if lam and "backbone_dropout" in lam and lam["backbone_dropout"] == block.get("backbone_dropout", own):
        lam = {k: v for k, v in lam.items() if k != "backbone_dropout"}
        out = {**{k: v for k, v in out.items() if k != "lambda"}, **({"lambda": lam} if lam else {})}
    return out


def mlm_sweep(sweep: dict) -> dict:
    """``sweep.fraction_dynamic`` (from 1 down) and ``sweep.seeds`` (ascending) as rule mlm's params. One job runs
    every fraction and seed, each seeded on its own (`papa.mlm.mlm_curve`), so the order the config lists them in
    changes no number: written in one order, reordering them reruns nothing (the shipped configs' order)."""
    return {"fraction_dynamic": sorted((check_fraction(f) for f in sweep["fraction_dynamic"]), reverse=True),
            "seeds": sorted(int(s) for s in sweep["seeds"])}  # fmt: skip


def dataset_param(entry: dict) -> dict:
    """A dataset's spec as rule prepare_data's param: a key written out at the value `papa.data.load_task` takes
    without it (`DATASET_DEFAULTS`: ``validation_fraction: 0.2``, ``text_column: text``, ...) is left out, so
    writing a default out reruns nothing (it reran the dataset's splits and everything made from them), nor does
    a ``format`` that every file's name gives; a local file's path is written one way (`path_param`)."""
    entry = {k: path_param(v) if k in LOCAL_FILE_KEYS else v for k, v in entry.items()}
    if _format_as_named(entry):  # what each file's name picks without it: as good as not written
        entry = {k: v for k, v in entry.items() if k != "format"}
    return _without_defaults(entry, DATASET_DEFAULTS)


def _format_as_named(entry: dict) -> bool:
    """Whether a local dataset's ``format`` is the reader every one of its files' names picks without it."""
    fmt, files = entry.get("format"), [entry[k] for k in LOCAL_FILE_KEYS if isinstance(entry.get(k), str)]
    if not isinstance(fmt, str) or fmt.lower() not in FORMAT_NAMES or not files:
        return False
    return all(format_of_name(f) == FORMAT_NAMES[fmt.lower()] for f in files)


def hparams_param(hp: dict, kind: str | None) -> dict:
    """A task's ``probe``/``lambda`` block as its rules' param: what the job runs, written one way. A key at the
    value the job takes without it (`HPARAM_DEFAULTS`) is left out, so writing a default out (``dropout: 0.1``)
    reruns nothing, and so is a token task's ``dropout`` (its probe, a linear layer per token, has none;
    `unused_settings` warns of it): neither changes a number. ``kind``: the task's (`dataset_kind`; None keeps
    ``dropout``)."""
    return {k: v for k, v in _without_defaults(hp, HPARAM_DEFAULTS).items() if not (k == "dropout" and kind == "token")}


def dataset_name(key: str, spec: dict) -> str:
    """The `papa.data` name of the config's dataset ``key``, whose entry is ``spec``: its ``name``, else its key (the
    schema's ``datasets.<d>.name``)."""
    return spec.get("name", key)


def dataset_kind(name: str, spec: dict) -> str | None:
    """``"sequence"`` or ``"token"`` for a dataset spec of the config, None if unknown before loading (a ``kind``
    key counts for a local dataset only: the other sources do not read it, and the config check says so)."""
    own = spec.get("kind") if spec.get("source") == "local" else None
    return own or LABEL_SETS.get(dataset_name(name, spec), (None, None))[0]


def dataset_labels(name: str, spec: dict) -> list[str] | None:
    """The label names of a dataset spec of the config as `papa.data.load_task` will give them, known before
    loading: ``[]`` for an unlabeled corpus (a registry dataset without labels, such as ``wiki``, or a local
    sequence dataset with ``label_column: null``), None when they are read from the data (inferred)."""
    name = dataset_name(name, spec)
    kind, known = LABEL_SETS.get(name, (None, None))
    if spec.get("source") != "local":
        return None if known is None else list(known)
    if dataset_kind(name, spec) == "sequence" and "label_column" in spec and spec["label_column"] is None:
        return []
    if spec.get("labels"):
        return [str(x) for x in spec["labels"]]
    return list(known) if known else None  # a local copy of a registry dataset gets its labels


def _local_model_file(name_or_path: str, filename: str) -> Path | None:
    """A file of the model (``config.json``, ``model.safetensors``, ...) when it is on this machine without a
    download (an alias, a folder, the hub cache), else None."""
    from .models import (
        SPLIT_ZIP_ALIASES,
        is_package_alias,
        looks_like_path,
        resolve_model_path,
        split_revision,
        split_zip_model_dir,
    )

    name_or_path, revision = split_revision(name_or_path)
    key = str(name_or_path).lower()
    path = None
    if is_package_alias(name_or_path):
        path = Path(resolve_model_path(name_or_path)) / filename
    elif key in SPLIT_ZIP_ALIASES and not Path(name_or_path).exists():  # else the folder of that name, as it loads
        path = split_zip_model_dir(SPLIT_ZIP_ALIASES[key]) / filename  # (papa.models.resolve_model_path)
    elif looks_like_path(name_or_path) or Path(name_or_path).is_dir():
        path = expand_home(name_or_path) / filename
    else:
        try:
            from huggingface_hub import try_to_load_from_cache

            hit = try_to_load_from_cache(str(name_or_path), filename, revision=revision)
            path = Path(hit) if isinstance(hit, str) else None
        except Exception:  # noqa: BLE001 - no cache, no check
            path = None
    return path if path is not None and path.is_file() else None


def _local_config(name_or_path: str) -> dict | None:
    """The model's config.json when it is on this machine without a download, else None."""
    path = _local_model_file(name_or_path, "config.json")
    if path is None:
        return None
    try:
        cfg = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"{path} (model {name_or_path!r}) is not valid JSON: {e}; restore the model's config.json"
        ) from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path} (model {name_or_path!r}) holds a {type(cfg).__name__}, not a model config (a JSON "
                          f"object); restore the model's config.json")  # fmt: skip
    return cfg


def position_limit(name_or_path: str) -> int | None:
    """The longest input (N) the model's position embeddings allow, None when unknown or unbounded
    (`papa.models.position_limit_of` of its config, where that is on disk)."""
    from .models import position_limit_of

    cfg = _local_config(name_or_path)
    return None if cfg is None else position_limit_of(cfg)


def _cross_references(config: dict) -> list[str]:
    """Keys of one section that must name entries of another (a task's dataset, an analysis's
    tasks, a constants spec's corpus, ...)."""
    errors = []
    datasets, tasks, models = config.get("datasets", {}), config.get("tasks", {}), config.get("models", {})
    build_data = config.get("build_data") or {}
    analyses = config.get("analyses") or {}

    def meant(name, known) -> str:  # what the message adds: the key meant, where one is close
        near = closest(name, known) if isinstance(name, str) else None
        return f": did you mean {near!r}?" if near else ""

    for t, tc in tasks.items():
        if tc.get("dataset") not in datasets:
            errors.append(f"tasks.{t}.dataset = {tc.get('dataset')!r} is not a key of 'datasets' "
                          f"({', '.join(datasets)}){meant(tc.get('dataset'), datasets)}")  # fmt: skip
        if "main_metric" in tc and tc["main_metric"] not in tc["metrics"]:
            near = closest(tc["main_metric"], tc["metrics"])
            errors.append(f"tasks.{t}.main_metric = {tc['main_metric']!r} is not one of tasks.{t}.metrics "
                          f"({', '.join(tc['metrics'])}){f': did you mean {near!r}?' if near else ''}")  # fmt: skip
    lists = (("tasks", "tasks", tasks), ("models", "models", models), ("head_orders_tasks", "tasks", tasks),
             ("head_orders_models", "models", models))  # fmt: skip
    for key, of, known in lists:
        for name in analyses.get(key) or []:
            if name not in known:
                errors.append(f"analyses.{key} entry {name!r} is not a key of '{of}'{meant(name, known)}")
    for c in analyses.get("cross_corpus") or []:
        if c not in datasets:
            errors.append(f"analyses.cross_corpus entry {c!r} is not a key of 'datasets'{meant(c, datasets)}")
    mlm = analyses.get("mlm") or {}
    for m in mlm.get("models") or []:
        if m not in models:
            errors.append(f"analyses.mlm.models entry {m!r} is not a key of 'models'{meant(m, models)}")
    if mlm and mlm.get("dataset") not in datasets:
        errors.append(f"analyses.mlm.dataset = {mlm.get('dataset')!r} is not a key of 'datasets'"
                      f"{meant(mlm.get('dataset'), datasets)}")  # fmt: skip
    for m, ts in (config.get("model_tasks") or {}).items():
        if m not in models:
            errors.append(f"model_tasks entry {m!r} is not a key of 'models'{meant(m, models)}")
        errors += [f"model_tasks.{m} entry {t!r} is not a key of 'tasks'{meant(t, tasks)}"
                   for t in ts if t not in tasks]  # fmt: skip
    for text in config.get("sweep", {}).get("constants") or []:
        c = ConstantsSpec.parse(text)
        if c.corpus is not None and c.data_free:  # the same matrices as the bare kind under a second label
            errors.append(f"sweep.constants entry {text!r}: {c.kind!r} matrices need no data, so '@{c.corpus}' "
                          f"changes nothing; write {str(ConstantsSpec(c.kind, c.trained))!r} (only "
                          f"{' and '.join(DATA_KINDS)} matrices are averaged on a corpus)")  # fmt: skip
        elif c.corpus is not None and c.corpus not in datasets:
            errors.append(f"sweep.constants entry {text!r} names a corpus that is not a key of 'datasets'"
                          f"{meant(c.corpus, datasets)}")  # fmt: skip
    for d, dc in datasets.items():
        if "build" in dc and dc["build"] not in build_data:
            errors.append(f"datasets.{d}.build = {dc['build']!r} is not a key of 'build_data' "
                          f"({', '.join(build_data) or 'the config has none'})")  # fmt: skip
        if "build" in dc and (dc["source"] != "local" or set(LOCAL_FILE_KEYS) & set(dc)):
            errors.append(f"datasets.{d}: a built dataset is source: local without train/validation/test (the "
                          f"workflow fills in the paths of the files it builds)")  # fmt: skip
    return errors


def _lists(config: dict):
    """(key, values) of every list in the config whose entries name one run, task, metric, ... each: a repeated
    entry is a typo or a paste (it would name the same files twice, or be silently dropped)."""
    sweep, analyses = config.get("sweep", {}), config.get("analyses") or {}
    for key in ("seeds", "fraction_dynamic", "constants", "selections"):
        yield f"sweep.{key}", sweep.get(key) or []
    keys = ("tasks", "models", "constant_kinds", "cross_corpus", "head_orders", "head_orders_models",
            "head_orders_tasks")  # fmt: skip
    for key in keys:
        yield f"analyses.{key}", analyses.get(key) or []
    yield "analyses.mlm.models", (analyses.get("mlm") or {}).get("models") or []
    for t, tc in config.get("tasks", {}).items():
        yield f"tasks.{t}.metrics", tc.get("metrics") or []
    for m, ts in (config.get("model_tasks") or {}).items():
        yield f"model_tasks.{m}", ts or []
    for d, spec in (config.get("datasets") or {}).items():  # a label or column named twice
        for key in ("labels", "column_names"):
            yield f"datasets.{d}.{key}", (spec or {}).get(key) or []


def _repeated(values: list) -> list[str]:
    """The entries of ``values`` given more than once (numbers by value: 1 and 1.0 are one)."""
    counts = Counter(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in values)
    return [f"{v:g}" if isinstance(v, float) else repr(v) for v, n in counts.items() if n > 1]


#: rules whose jobs take another rule's resources, key by key under their own: a trained-constant seed's job
#: (rule ``probe_trained``) asks for the probe's unless ``resources.probe_trained`` or
#: ``tasks.<t>.resources.probe_trained`` say otherwise (it keeps no hidden-state cache: paper.yaml gives it less memory)
RESOURCE_PARENTS = {"probe_trained": "probe"}

#: the rules whose jobs run the model (a GPU helps them): ``$PAPA_SLURM_GPUS`` sets their GPU request, and the
#: Slurm profile's ``set-resources`` lists them (slurm/config.yaml keeps a copy: it is read before papa is
#: importable, and a test holds the two equal). Rule
#: ``data_free_constants`` asks for the config's ``resources.data_free_constants.gpu`` (default 0: it runs no model);
#: the other rules run on the CPU and ask for none (`CPU_RULES`).
GPU_RULES = ("average_attention", "learn_lambda", "probe", "probe_trained", "mlm")


def slurm_gpus(value: str | None) -> int | None:
    """The GPU request ``$PAPA_SLURM_GPUS`` (``value``) sets for every model rule (`GPU_RULES`): a whole number >= 0
    in ASCII digits, whitespace around it dropped; None where it is unset or empty (each rule asks for the config's
    ``resources.<rule>.gpu``). Anything else is a `ValueError` naming the variable: "abc" failed in ``int()``
    without naming it, "-1" only at Snakemake's resource check, and "²" (``str.isdigit`` holds) in ``int()``. The
    rules' check (workflow/rules/common.smk, ``gpu_model``); the Slurm profile (slurm/config.yaml) keeps a copy of
    it, read before papa is importable, which a test holds to this one."""
    text = (value or "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"PAPA_SLURM_GPUS={text!r} is not a whole number >= 0: give the GPUs each model rule "
                         f"requests (e.g. PAPA_SLURM_GPUS=1; 0 on a CPU-only cluster), or unset it to keep the "
                         f"config's resources.<rule>.gpu")  # fmt: skip
    return int(text)


#: the rules that declare no GPU resource: a ``resources.<rule>.gpu`` for them is read by nothing
CPU_RULES = ("prepare_data", "tokenize", "patterns", "aggregate", "plot", "build_model", "build_data")


def check_rule_overrides(resources: dict | None, threads: dict | None, rules: dict, warn=None) -> None:
    """The command line's and the Slurm profile's per-rule settings (``--set-resources rule:key=value``,
    ``--set-threads rule=n``; ``resources``, ``threads``: Snakemake's ``{rule: ...}``) against the workflow's
    ``rules`` (``{name: its resource names}``): an entry for a rule the workflow does not have, which Snakemake
    ignores without a word (``prob:mem_mb=64000`` left the probes at their 8000), is a `ConfigError` naming the
    closest rule; a resource name no rule declares but one close to a rule's own (``memmb``: ``mem_mb``), which
    Snakemake adds as a new resource while the rule keeps its value, is warned about (``warn``), as other names (a
    Slurm executor's own, ``slurm_partition``) are Snakemake's to read."""
    import difflib

    bad = []
    for option, given in (("--set-resources", resources or {}), ("--set-threads", threads or {})):
        for rule in given:
            if rule not in rules:
                near = closest(rule, rules)
                given_as = f"{rule}:..." if option == "--set-resources" else f"{rule}=..."
                bad.append(f"{option} {given_as}: the workflow has no rule {rule!r}"
                           + (f" (did you mean {near!r}?)" if near else ""))  # fmt: skip
    if bad:
        raise ConfigError("; ".join(bad) + f". Its rules: {', '.join(sorted(rules))}")
    # a rule's resources as Snakemake lists them hold the names given on the command line too
    declared = {k for r, keys in rules.items() for k in set(keys) - set((resources or {}).get(r, ())) if k[:1] != "_"}
    declared |= {"mem_mb", "mem", "disk_mb", "disk", "runtime", "tmpdir", "gpu"}  # Snakemake's own
    for rule, keys in (resources or {}).items():
        for key in keys:
            near = difflib.get_close_matches(key, sorted(declared), n=1, cutoff=0.8)
            if key not in declared and near and warn is not None:
                keeps = f", and rule {rule} keeps its {near[0]}" if near[0] in rules.get(rule, ()) else ""
                warn(f"--set-resources {rule}:{key}=...: no rule asks for a resource {key!r}{keeps}: did you mean "
                     f"{near[0]!r}?")  # fmt: skip


def job_resources(config: dict, rule: str, task: str | None = None) -> dict:
    """The resources a job of ``rule`` asks for on its first attempt, in a validated config (the schema fills
    in ``resources.default`` and every ``tasks.<t>.resources``): ``resources.<rule>`` over ``resources.default``,
    and for a task's job (probe, probe_trained, learn_lambda) ``tasks.<task>.resources.<rule>`` over both. A
    rule of `RESOURCE_PARENTS` reads its parent's entry under its own at each level, so the order is default,
    ``resources.probe``, ``resources.probe_trained``, ``tasks.<t>.resources.probe``,
    ``tasks.<t>.resources.probe_trained`` (a task's runtime for its probes reaches its trained ones too). The
    workflow's rules ask for these (a retry for ``attempt`` times its mem_mb and runtime); `papa.cost` sets
    each job's estimate against its runtime."""
    rules = [r for r in (RESOURCE_PARENTS.get(rule), rule) if r]
    out = dict(config["resources"]["default"])
    for r in rules:
        out.update(config["resources"].get(r, {}))
    if task is not None:
        for r in rules:
            out.update(config["tasks"][task]["resources"].get(r, {}))
    return out


def retry_request(config: dict, key: str, value: int, attempt: int) -> int:
    """What a job asks for of resource ``key`` (mem_mb, runtime) on try ``attempt``: its first request
    ``value`` times the attempt, at most ``resources.limits.<key>`` (the partition's time limit: a retry
    above it would pend forever), never below ``value``."""
    limit = (config["resources"].get("limits") or {}).get(key)
    grown = value * attempt
    return grown if limit is None else max(value, min(grown, limit))


def _over_limits(config: dict) -> list[str]:
    """Resource requests above ``resources.limits``, each named by its key."""
    resources = config.get("resources") or {}
    limits = {k: v for k, v in (resources.get("limits") or {}).items() if v is not None}
    entries = [(f"resources.{r}", v) for r, v in resources.items() if r != "limits"]
    for t, tc in (config.get("tasks") or {}).items():
        entries += [(f"tasks.{t}.resources.{r}", v) for r, v in ((tc or {}).get("resources") or {}).items()]
    errors = []
    for where, entry in entries:
        for key, limit in limits.items():
            value = entry.get(key) if isinstance(entry, dict) else None
            if isinstance(value, int) and value > limit:
                errors.append(f"{where}.{key} = {value} exceeds resources.limits.{key} = {limit}: lower it, or "
                              f"raise the limit if the cluster allows more")  # fmt: skip
    return errors


def model_tasks(config: dict, model: str) -> list[str]:
    """The tasks ``model``'s probes run: ``model_tasks.<model>``, by default every task of ``config``."""
    return list((config.get("model_tasks") or {}).get(model, config.get("tasks") or {}))


def analysed_models(config: dict) -> list[str]:
    """The models the Sec. 5 analyses run on: ``analyses.models`` (null or absent = every model, ``[]`` = none)."""
    listed = (config.get("analyses") or {}).get("models")
    return [m for m in config.get("models") or {} if listed is None or m in listed]


def analysed_tasks(config: dict, model: str) -> list[str]:
    """The tasks the Sec. 5 analyses (constant kinds, cross-corpus matrices, head orders, matrix patterns) run on
    for ``model``: ``analyses.tasks`` (null or absent = every task, ``[]`` = none) among its `model_tasks`, for a
    model of `analysed_models`; else none."""
    listed = (config.get("analyses") or {}).get("tasks")
    if model not in analysed_models(config):
        return []
    own = model_tasks(config, model)
    return own if listed is None else [t for t in listed if t in own]


def head_orders_on(config: dict, model: str, task: str) -> bool:
    """Whether ``analyses.head_orders`` run on ``model``'s ``task``, one of its `analysed_tasks`: where
    ``analyses.head_orders_models`` and ``analyses.head_orders_tasks`` list them (null or absent = every analysed
    model, task; the paper's Fig. 5 is RoBERTa-base on MNLI, while its Tables 1-2 and App. C's 4-5 run on every task
    and both RoBERTa models)."""
    analyses = config.get("analyses") or {}
    models, tasks = analyses.get("head_orders_models"), analyses.get("head_orders_tasks")
    return (models is None or model in models) and (tasks is None or task in tasks)


def probe_runs(config: dict) -> list[tuple[str, str, str, str, str]]:
    """Every probe run of a valid, filled config, as ``(model, task, constants, selection, fraction_dynamic)``
    with fraction_dynamic formatted as in paths (`papa.spec.format_fraction`), without duplicates: the main
    sweep (each model on its `model_tasks`), then the analyses of paper Sec. 5 on its `analysed_tasks`, each
    varying one part of the paper's method (``papa.spec.METHOD_*``) at a time: constant kinds and cross-corpus
    matrices with all heads replaced, other head orders at every partial fraction_dynamic (where `head_orders_on`).
    A constants spec on
    its task's own corpus is the task's own matrices (`papa.spec.ConstantsSpec.on_task`): one run. The workflow's
    DAG (``runs()`` in ``workflow/rules/common.smk``) and the config checks read this one list."""
    sweep, analyses, tasks = config["sweep"], config["analyses"], config["tasks"]
    fractions = [format_fraction(f) for f in sweep["fraction_dynamic"]]
    all_constant = format_fraction(ALL_CONSTANT)
    out = []
    for m in config["models"]:
        for t in model_tasks(config, m):
            out += [(m, t, c, s, f) for c in sweep["constants"] for s in sweep["selections"] for f in fractions]
        for t in analysed_tasks(config, m):
            out += [(m, t, k, METHOD_ORDER, all_constant) for k in analyses["constant_kinds"]]
            out += [(m, t, str(ConstantsSpec(METHOD_CONSTANTS, corpus=c)), METHOD_ORDER, all_constant)
                    for c in analyses["cross_corpus"]]  # fmt: skip
            if head_orders_on(config, m, t):
                out += [(m, t, METHOD_CONSTANTS, o, f) for o in analyses["head_orders"] for f in fractions
                        if is_partial(f)]  # fmt: skip
    out = [(m, t, str(ConstantsSpec.parse(c).on_task(tasks[t]["dataset"])), s, f) for m, t, c, s, f in out]
    return list(dict.fromkeys(out))


def _sweep_labels(config: dict) -> dict[str, list[str]]:
    """Each label the main sweep's probe runs bear (`probe_runs`: ``kind@<corpus>`` on a task whose own dataset is
    that corpus is ``kind`` there, `papa.spec.ConstantsSpec.on_task`), in order of first occurrence, with the tasks
    whose runs bear it."""
    tasks = config["tasks"]
    specs = [ConstantsSpec.parse(c) for c in config["sweep"]["constants"]]
    labels: dict[str, list[str]] = {}
    for m in config["models"]:
        for t in model_tasks(config, m):
            for s in specs:
                on = labels.setdefault(str(s.on_task(tasks[t]["dataset"])), [])
                on += [t] if t not in on else []
    return labels


def sweep_constants(config: dict) -> list[str]:
    """``sweep.constants`` as the main sweep's probe runs are labelled (`_sweep_labels`), each first occurrence in
    order (``average@rt_sentiment`` is listed as ``average`` too where other tasks average on rt_sentiment). Rule
    plot's Fig. 2 draws the summary's rows of these labels: the specs as written found no row of such a task
    (``[average@rt_sentiment]`` on task rt_sentiment: its curve missing, or rule plot failing with nothing to
    plot)."""
    return list(_sweep_labels(config))


def sweep_own_tasks(config: dict) -> dict[str, list[str]]:
    """The labels of `sweep_constants` that are no spec of ``sweep.constants`` as written, each with the tasks whose
    sweep runs bear it (``[average@rt_sentiment]``: ``{"average": ["rt_sentiment"]}``): Fig. 2 draws a row of such a
    label on those tasks only, not another task's analysis run of that kind (analyses.constant_kinds' ``average``
    on wsj_pos, which is no sweep run there). Empty where every label is written (the default configs)."""
    written = {str(ConstantsSpec.parse(c)) for c in config["sweep"]["constants"]}
    return {label: sorted(on) for label, on in _sweep_labels(config).items() if label not in written}


def compared_models(config: dict) -> list[str]:
    """The models Fig. 3 (plots/models_compared) compares: those whose probes run every task of
    ``config``, or, when no model runs them all, every model that runs a task. A model probed on a
    few tasks for another figure (``model_tasks``: ELECTRA on MNLI in config/paper.yaml, for Fig. 6b)
    would otherwise narrow every model's average to the tasks it runs."""
    every = set(config.get("tasks") or {})
    runs = {m: set(model_tasks(config, m)) for m in config.get("models") or {}}
    runs = {m: tasks for m, tasks in runs.items() if tasks}  # model_tasks: [] = an MLM-only model
    return [m for m, tasks in runs.items() if tasks >= every] or list(runs)


def check_interpreter(executable: str) -> None:
    """Refuse a Python whose path holds whitespace (a checkout or virtual environment under ``~/My Projects``):
    Snakemake writes the interpreter's path unquoted into every script rule's command, so each job failed at once
    ("No such file or directory", exit 127) with an empty log. A `ConfigError` before any job, saying what to do."""
    if any(c.isspace() for c in str(executable)):
        raise ConfigError(f"the Python that runs the workflow's scripts, {executable!r}, is in a path with "
                          f"whitespace: Snakemake writes it unquoted into each job's command, and every job would "
                          f"fail at once. Clone (or move) the checkout, or its virtual environment, to a path "
                          f"without spaces")  # fmt: skip


def cache_lock_problem(cache_dir: str | Path | None = None) -> str | None:
    """What a start says of a download cache (``$PAPA_CACHE``, `papa.data.downloads.default_cache_dir`) on a file
    system without file locks (Lustre mounted ``noflock``, some NFS set-ups), None for one with locks: the data and
    model jobs take an ``flock`` beside each download or extraction they make there (so that the two split jobs of
    a dataset write it one after the other), and each such job failed on a bare ``OSError`` from ``flock``
    (``Function not implemented``) with nothing saying why. A warning, not a refusal: a cache that already holds
    every file the run needs is only read (no lock taken), and runs there. Where the cache does not exist yet, the
    folder it would be made in is tried; one that cannot be written here is left to the jobs
    (`papa.data.downloads.make_cache_dir` says what to set where they must write)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX: the jobs take no lock either
        return None
    import contextlib
    import tempfile

    from .data.downloads import default_cache_dir

    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = next((p for p in (cache, *cache.parents) if p.is_dir()), None)
    if folder is None:
        return None
    try:
        fd, name = tempfile.mkstemp(prefix=".papa-lock-check.", dir=folder)
    except OSError:  # read-only, or not ours: the jobs say what to change where they write
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # pragma: no cover - a fresh file nobody else holds
        pass
    except OSError as err:
        where = "PAPA_CACHE" if os.environ.get("PAPA_CACHE") else "the default download cache (PAPA_CACHE unset)"
        return (f"{where}, {cache}, is on a file system without file locks (flock: {err}): a data or model job "
                f"that downloads or extracts a file there fails on flock (one that finds every file it needs there "
                f"only reads them). Set PAPA_CACHE to a folder on a file system with locks (a home or project "
                f"folder over NFS with locking, Lustre mounted with flock; a node-local disk where every job runs on "
                f"one machine)")  # fmt: skip
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
    return None


def job_environment(environ) -> None:
    """Run the workflow's jobs' Pythons in UTF-8 mode (PEP 540, ``PYTHONUTF8=1``) unless ``environ`` says otherwise:
    under a locale that is not UTF-8 (``LANG=en_US.ISO-8859-1``) a job's Python decoded file names in that locale's
    encoding, and Arrow (every Parquet file) encodes a path back as UTF-8, so a checkout or results folder with a
    non-ASCII name failed the first job on "No such file or directory". Under ``LANG=C`` Python is in UTF-8 mode
    already. Snakemake passes its environment to every job, local or Slurm (``--export=ALL``)."""
    environ.setdefault("PYTHONUTF8", "1")


def _absolute_hint(value: str) -> str:
    """What a message about a ``~`` path that is used as written suggests: its absolute path, where `expand_home`
    knows it."""
    home = str(expand_home(value))
    return f"e.g. {home!r}" if home != value else f"its home ({value.split('/')[0]}) is not known on this machine"


def _results_folder(config: dict) -> list[str]:
    """The ``results:`` folder must be one plain path: Snakemake reads ``{}`` in it as wildcards and does not
    expand ``~``, and the Makefile's ``make clean`` / ``make report`` (and any shell) split it at whitespace."""
    r = config.get("results")
    if not isinstance(r, str):
        return []
    if not r.strip():
        return ["results is empty: name the folder the workflow writes to (the default is results)"]
    errors = []
    if any(c.isspace() for c in r):
        errors.append(f"results = {r!r} contains whitespace: make clean and make report would split it into "
                      f"several paths; use e.g. {'_'.join(r.split())!r}")  # fmt: skip
    if r.startswith("~"):
        errors.append(f"results = {r!r}: Snakemake does not expand '~' (it would write to a folder named '~' in "
                      f"the working directory); write the absolute path, {_absolute_hint(r)}")  # fmt: skip
    if "{" in r or "}" in r:
        errors.append(f"results = {r!r} contains '{{' or '}}', which Snakemake reads as wildcards in every output "
                      f"path; remove them")  # fmt: skip
    if _ENV_VAR.search(r):
        errors.append(_unexpanded("results", r, "the outputs would go to a folder of that name in the working "
                                                "directory"))  # fmt: skip
    if Path(r).exists() and not Path(r).is_dir():
        errors.append(f"results = {r!r} is a file (from {Path.cwd()}), not a folder: name the folder the workflow "
                      f"writes to")  # fmt: skip
    elif file := next((p for p in Path(r).parents if p.exists() and not p.is_dir()), None):
        errors.append(f"results = {r!r} is under {str(file)!r}, a file (from {Path.cwd()}), not a folder: name a "
                      f"folder the workflow can write to")  # fmt: skip
    return errors or _results_holds_others(config, r)


def _results_holds_others(config: dict, r: str) -> list[str]:
    """The ``results:`` folder is the workflow's own: ``make clean`` removes it with everything in it. It must not
    be (or hold) the working directory or a local input (a dataset's file, a model folder), and an existing folder
    must be empty or hold papa's results (its records' marker, or the logs and benchmarks every job writes, and then
    nothing papa does not write: `papa.records.foreign_entries`)."""
    here, folder = Path.cwd().resolve(), Path(r).resolve()
    advice = "give the outputs a folder of their own (the default is results)"
    if folder == here or folder in here.parents:
        what = "the working directory" if folder == here else f"{str(folder)!r}, which holds the working directory"
        return [f"results = {r!r} is {what} ({here}): the outputs would mix with the files there, and make "
                f"clean, which removes the results folder, would remove them; {advice}"]  # fmt: skip
    inputs = [(f"datasets.{d}.{key}", dc[key]) for d, dc in (config.get("datasets") or {}).items()
              if isinstance(dc, dict) and dc.get("source") == "local" for key in LOCAL_FILE_KEYS
              if isinstance(dc.get(key), str) and dc[key]]  # fmt: skip
    inputs += [(f"models.{m}", v) for m, v in (config.get("models") or {}).items()
               if isinstance(v, str) and expand_home(v).is_dir()]  # a local model folder  # fmt: skip
    errors = []
    for key, path in inputs:
        if folder == (p := expand_home(path).resolve()) or folder in p.parents:
            errors.append(f"results = {r!r} holds {key} ({path!r}): make clean, which removes the results folder, "
                          f"would remove it; keep the inputs elsewhere, or {advice}")  # fmt: skip
    from .records import MARKER

    outer = next((p for p in folder.parents if (p / MARKER).is_file()), None)
    if not errors and outer is not None:  # another run's results folder: its make clean would remove this one
        errors.append(f"results = {r!r} lies inside {str(outer)!r}, the results folder of another run (its "
                      f"{MARKER}): make clean of that run's config removes everything in it, this run's results "
                      f"and their records too; give this run a folder beside it")  # fmt: skip
    if not errors and folder.is_dir():
        from .records import foreign_entries

        entries = sorted(e.name for e in folder.iterdir() if not e.name.startswith(".") or e.name == MARKER)
        if entries and not {MARKER, "logs", "benchmarks"} & set(entries):
            errors.append(f"results = {r!r} is a folder holding other files ({listed(entries)}) and no papa results "
                          f"(no {MARKER}, logs/ or benchmarks/): make clean, which removes the results folder, would "
                          f"remove them; {advice}, or a new or empty one")  # fmt: skip
        elif MARKER not in entries and (foreign := foreign_entries(folder)):  # a logs/ beside a user's files
            errors.append(f"results = {r!r} is a folder holding files papa does not write ({listed(foreign)}) and "
                          f"no run's {MARKER}: make clean, which removes the results folder, would remove them; "
                          f"{advice}, or a new or empty one")  # fmt: skip
    return errors


def _non_text_keys(config: dict, path: str = "", depth: int = 0) -> list[str]:
    """Keys that YAML read as something other than text (a name ``2010:`` or ``1:`` is a number, ``on:``/``yes:``
    a bool, ``null:`` None): the schema's name patterns skip them, and the workflow failed on them later with a
    TypeError or KeyError naming no key. Each named with the quoting that keeps it a name."""
    out = []
    for key, value in config.items():
        where = f"{path}.{key}" if path else str(key)
        if not isinstance(key, str):
            if isinstance(key, bool):
                what = ("a bool, not text, to YAML (it reads yes, no, on, off, true and false unquoted as bools): "
                        "quote the name you wrote, or choose a name")  # fmt: skip
            elif key is None:
                what = "null to YAML (an empty key, null or ~): give it a name"
            else:
                what = (f"{type(key).__name__}, not text, to YAML (it reads an unquoted {key} as one): quote it, "
                        f"'{key}', or choose a name")  # fmt: skip
            out.append(f"config key {where!r}: the name {key!r} is {what} that starts with a letter")
        elif isinstance(value, dict) and depth < 3:
            out += _non_text_keys(value, where, depth + 1)
    return out


def _names(config: dict) -> list[str]:
    """Names of models, datasets, tasks and built data are path components (``<results>/tokens/<model>/...``):
    ``.`` and ``..``, which the schema's name pattern allows, would put the outputs outside their stage folders,
    any name starting with ``.`` hides them, two names of a section that differ only in case are one folder on
    a case-insensitive file system, and Windows holds no folder named like a device or ending in ``.``."""
    errors = [f"{section}: {name!r} starts with '.', and the name is a folder in the output paths ('..' leaves its "
              f"stage folder, '.' merges into it, '.name' is hidden): start it with a letter, digit, '_' or '-'"
              for section in ("models", "datasets", "tasks", "build_data")
              for name in (config.get(section) or {}) if str(name).startswith(".")]  # fmt: skip
    # a top-level key indented under a section (`results: mine` under models:) is read as an entry named like it, and
    # the key itself takes its default: the run wrote into the default's results folder
    from .records import config_keys

    top = config_keys()
    errors += [f"{section}.{name} is named like the config's top-level key {name!r}: if it is that key, indented by "
               f"mistake, write it at the top level (unindented), else give the entry another name"
               for section in ("models", "datasets", "tasks", "build_data")
               for name in (config.get(section) or {}) if name in top]  # fmt: skip
    # names that differ only in case are one folder on a case-insensitive file system (macOS's and Windows' default):
    # two models, datasets or tasks wrote one another's result files, logs and benchmarks, silently
    for section in ("models", "datasets", "tasks", "build_data"):
        seen: dict[str, str] = {}
        for name in config.get(section) or {}:
            if isinstance(name, str) and (first := seen.setdefault(name.casefold(), name)) != name:
                errors.append(f"{section}: {first!r} and {name!r} differ only in case, and the names are folders "
                              f"in the output paths: on a case-insensitive file system (macOS's and Windows' "
                              f"default) they are one folder, and their results would overwrite each other; rename "
                              f"one")  # fmt: skip
    # Windows (WSL on a Windows drive) cannot create a file or folder named like a device (``con``, ``nul.x``) or
    # ending in '.': the stage's output failed after its compute, or ``minilm.`` and ``minilm`` were one folder
    errors += [f"{section}: {name!r} {why}, and the name is a folder in the output paths: Windows' file systems (WSL "
               f"on a Windows drive) cannot hold it; rename it"
               for section in ("models", "datasets", "tasks", "build_data")
               for name in (config.get(section) or {}) if isinstance(name, str)
               for why in [_windows_unsafe(name)] if why]  # fmt: skip
    return errors


#: Names Windows reserves for devices, alone or before an extension (``con``, ``NUL.txt``, ``com1``).
_WINDOWS_DEVICE = re.compile(r"(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?", re.IGNORECASE)


def _windows_unsafe(name: str) -> str | None:
    """Why ``name`` cannot be a file or folder name on Windows, or None where it can."""
    if _WINDOWS_DEVICE.fullmatch(name):
        return f"is the device name {name.split('.')[0]!r} Windows reserves"
    if name.endswith("."):
        return "ends in '.', which Windows drops (it would name the folder of the name without it)"
    return None


#: ``$NAME`` or ``${NAME}`` in a path: an environment variable that neither Snakemake nor papa expands.
_ENV_VAR = re.compile(r"\$\{?[A-Za-z_]")


def _unexpanded(key: str, value: str, where: str) -> str:
    """The error for a ``$VARIABLE`` in a path of the config, which neither Snakemake nor papa expands."""
    expanded = os.path.expandvars(value)
    hint = f", e.g. {expanded!r}" if expanded != value and "$" not in expanded else ""
    return (f"{key} = {value!r}: environment variables are not expanded ({where}); write the path they stand "
            f"for{hint}")  # fmt: skip


def _scratch_folder(config: dict) -> list[str]:
    """``cache.scratch`` is used as given (`papa.probe`): a leading ``~`` would be a folder named '~', a
    ``$VARIABLE`` one of that name; a file there cannot hold the disk caches. It is read by cache.strategy auto and
    disk only (with memory or reencode it, and ``disk_budget_mb``, are ignored: `unused_settings` says so)."""
    cache = config.get("cache") or {}
    scratch = cache.get("scratch")
    errors = []
    if isinstance(scratch, str) and scratch.startswith("~"):
        errors.append(f"cache.scratch = {scratch!r}: '~' is not expanded (the disk caches would go to a folder "
                      f"named '~' in the working directory); write the absolute path, "
                      f"{_absolute_hint(scratch)}")  # fmt: skip
    if isinstance(scratch, str) and _ENV_VAR.search(scratch):
        errors.append(_unexpanded("cache.scratch", scratch, "the disk caches would go to a folder of that name"))
    if isinstance(scratch, str) and Path(scratch).exists() and not Path(scratch).is_dir():
        errors.append(f"cache.scratch = {scratch!r} is a file (from {Path.cwd()}), not a folder: name the folder of "
                      f"the disk caches")  # fmt: skip
    return errors


def _source_keys(datasets: dict) -> list[str]:
    """Keys of a dataset entry that its ``source`` does not read (``train:`` under ``source: package`` loads the
    package corpus, not the file): each belongs to another source, so the entry means something else. Also what
    each source asks of its own keys: a package dataset's (`papa.data.packages.spec_problems`), a local dataset's
    train file (on this machine) and kind."""
    from .data.task import COMMON_KEYS, SOURCE_KEYS

    errors = []
    for d, dc in datasets.items():
        source = dc.get("source")
        if source not in SOURCE_KEYS:
            continue
        unread = sorted(set(dc) - COMMON_KEYS - SOURCE_KEYS[source] - {"build"})
        for key in unread:
            owners = " or ".join(f"source: {o}" for o, keys in SOURCE_KEYS.items() if key in keys)
            errors.append(f"datasets.{d}.{key} is a key of {owners}, and this dataset is source: {source}, which "
                          f"does not read it: remove it, or change the source")  # fmt: skip
        if source == "package":  # a key of the package source that this package dataset does not read
            from .data.packages import spec_problems

            errors += [f"datasets.{d}: {why}" for why in spec_problems(dataset_name(d, dc), dc)]
        if source == "local" and not dc.get("build"):
            if not dc.get("train"):
                errors.append(f"datasets.{d} (source: local) has no train file: give train: <path> (and usually "
                              f"validation: <path>)")  # fmt: skip
            if dataset_kind(d, dc) is None:
                errors.append(f"datasets.{d} (source: local) needs kind: sequence or kind: token (only a known "
                              f"dataset's name implies it)")  # fmt: skip
            for key in PREPARED_SPLITS:  # else Snakemake's MissingInputException names the path, not the key
                path = dc.get(key)
                if isinstance(path, str) and ("{" in path or "}" in path):  # the file is an input of prepare_data
                    errors.append(f"datasets.{d}.{key} = {path!r} contains '{{' or '}}', which Snakemake reads as "
                                  f"wildcards in an input path: rename the file (or its folder)")  # fmt: skip
                elif isinstance(path, str) and path and not expand_home(path).is_file():
                    what = "a folder" if expand_home(path).is_dir() else "not there"
                    errors.append(f"datasets.{d}.{key} = {path!r} is {what} (from {Path.cwd()}): give one file's "
                                  f"path, relative to where Snakemake runs or absolute")  # fmt: skip
                elif isinstance(path, str) and path:
                    why = no_rows(expand_home(path), dc)
                    if why:
                        errors.append(f"datasets.{d}.{key} = {path!r} {why}: a split needs examples; give a file that "
                                      f"has them")  # fmt: skip
    return errors


def _local_format(spec: dict, build_data: dict) -> str | None:
    """The file format a local dataset is read in (`papa.data.local`: ``format``, else the train file's suffix;
    a built dataset's train file is the one rule build_data writes), None when unknown before loading; a
    `papa.data.TaskSpecError` when it cannot be read in any (an unknown format, a suffix that names none)."""
    from .data.local import file_format

    train = spec.get("train")
    if spec.get("build") in build_data:
        from .rehearsal import SHAPES

        train = SHAPES.get(build_data[spec["build"]].get("shape"), {}).get("train")
    if not spec.get("format") and not train:
        return None
    return file_format(spec, Path(train or "."))  # a TaskSpecError names the file and the formats


def _unread_keys(config: dict) -> list[str]:
    """Keys of a dataset entry that its task kind or file format does not read (``text_column`` on a token task,
    ``separator`` on a CSV file, ``validation_fraction`` where there is a validation split): accepted and
    ignored, they mean something the data loading then does not do. A local copy of a known pair dataset without
    its second column (`papa.data.local.missing_pair_column`), which would read one sentence of each pair."""
    from .data import DATASETS
    from .data.errors import TaskSpecError
    from .data.local import header_problems, missing_pair_column, shared_columns, unread_local_keys

    errors = []
    build_data = config.get("build_data") or {}
    for d, dc in (config.get("datasets") or {}).items():
        name = dataset_name(d, dc)
        if dc.get("source") == "local":
            kind = dataset_kind(d, dc)
            try:
                fmt = _local_format(dc, build_data)
            except TaskSpecError as e:  # an unknown format, a suffix that names none: before prepare_data fails
                errors.append(f"datasets.{d}: {e}")
                fmt = None
            if fmt == "conll" and kind == "sequence":
                errors.append(f"datasets.{d}: format conll is for token tasks, and {d!r} is a sequence task: set "
                              f"kind: token, or give a csv, tsv, jsonl or parquet file")  # fmt: skip
            errors += [f"datasets.{d}.{key} {why}" for key, why in unread_local_keys(d, dc, kind, fmt)]
            errors += [f"datasets.{d}.{key} {why}" for key, why in shared_columns(d, dc, kind, fmt)]
            if dc.get("build") in build_data and kind == "sequence":
                errors += _built_columns(d, dc, dc["build"], build_data[dc["build"]].get("shape"))
            if (why := missing_pair_column(name, dc)) and not dc.get("build"):  # built: _built_columns says it
                errors.append(f"datasets.{d}: {why}")
            has_validation = bool(dc.get("validation") or dc.get("build"))
            if (why := _validation_is_train(dc)) is not None:
                errors.append(f"datasets.{d}.validation {why}")
            if kind == "sequence" and not dc.get("build"):  # a column the headers lack, before any job fails on it
                errors += [f"datasets.{d}: {why}" for why in header_problems(dc, _local_split_files(dc))]
        else:
            entry = DATASETS.get(name)
            has_validation = entry is not None and "validation" in (getattr(entry.source, "splits", None) or {})
        if "validation_fraction" in dc and has_validation:
            errors.append(f"datasets.{d}.validation_fraction is not read: {d!r} has a validation split (its "
                          f"validation file, the built files or the source's own), so train is not split: remove "
                          f"it")  # fmt: skip
    return errors


def _local_split_files(dc: dict) -> dict[str, Path]:
    """A local dataset's split files that are there (train, validation, ...: `papa.spec.PREPARED_SPLITS`)."""
    files = {key: expand_home(dc[key]) for key in PREPARED_SPLITS if isinstance(dc.get(key), str) and dc[key]}
    return {key: p for key, p in files.items() if p.is_file()}


def _validation_is_train(dc: dict) -> str | None:
    """Why a local dataset's validation file cannot be its train file (the same file, or the same bytes: every probe
    would be scored on the rows it trained on), or None. `papa.data.local` warns of it (a notebook's `load_task`
    may mean it), and of a validation file whose rows mostly occur in train."""
    from .io import file_digest

    train, val = (dc.get(k) for k in ("train", "validation"))
    if not (isinstance(train, str) and isinstance(val, str) and train and val):
        return None
    t, v = (expand_home(x) for x in (train, val))
    if not (t.is_file() and v.is_file()):
        return None  # a missing file is said elsewhere
    if os.path.samefile(t, v):
        what = "is the train file"
    elif t.stat().st_size == v.stat().st_size and file_digest(t) == file_digest(v):
        what = "holds the same bytes as the train file"
    else:
        return None
    return (f"({val!r}) {what} ({train!r}): every probe would be scored on the rows it trained on; give a held-out "
            f"validation file, or leave validation out (validation_fraction then carves one out of train)")  # fmt: skip


def _built_columns(name: str, spec: dict, build: str, shape: str | None) -> list[str]:
    """A sequence dataset read from the files rule build_data writes: its column keys must name columns of their
    header (`papa.rehearsal.SHAPE_COLUMNS`), and a pair shape's sentence B be read (`papa.rehearsal.PAIR_COLUMNS`;
    without ``text_b_column`` one sentence of each pair would be read)."""
    from .data.local import COLUMN_KEYS
    from .rehearsal import PAIR_COLUMNS, SHAPE_COLUMNS, SHAPES

    header = SHAPE_COLUMNS.get(shape)
    if header is None:
        return [f"datasets.{name}: the files of build_data.{build} (shape {shape}) are CoNLL token files, and the "
                f"dataset is kind: sequence: set kind: token and format: conll"] if shape in SHAPES else []  # fmt: skip
    errors = []
    for key, default in {**COLUMN_KEYS["sequence"], "id_column": None}.items():
        column = spec.get(key, default)
        if column is not None and column not in header:
            given = "" if key in spec else " (the default)"
            fix = (f"set {key}: null (an unlabeled corpus)" if key == "label_column" and len(header) == 1
                   else f"set {key} to one of them")  # fmt: skip
            errors.append(f"datasets.{name}.{key} = {column!r}{given} is not a column of the files build_data.{build} "
                          f"writes (shape {shape}: {', '.join(header)}): {fix}")  # fmt: skip
    if shape in PAIR_COLUMNS and not spec.get("text_b_column"):
        errors.append(f"datasets.{name}: the files of build_data.{build} (shape {shape}) hold sentence pairs, and "
                      f"text_b_column is not set, so one sentence of each pair would be read: set text_b_column: "
                      f"{PAIR_COLUMNS[shape]!r}")  # fmt: skip
    return errors


def is_pair_dataset(name: str, spec: dict) -> bool:
    """Whether a dataset spec of the config gives sentence pairs (a second text column)."""
    from .data import DATASETS

    if spec.get("source") == "local":
        return bool(spec.get("text_b_column"))
    entry = DATASETS.get(dataset_name(name, spec))
    return bool(entry is not None and getattr(entry.source, "text_b", None))


#: The `encoding` options (`papa.encode`) and the inputs each changes: ``pair_segments`` sentence pairs,
#: ``single_cap`` single sentences of sequence tasks (token tasks are not capped).
ENCODING_REACH = {"pair_segments": "pair", "single_cap": "single"}


def input_shape(name: str, spec: dict) -> str | None:
    """What a dataset of the config gives `papa.encode`: ``"pair"`` (sentence pairs), ``"single"`` (one text per
    example) or ``"token"`` (word lists); None when unknown before loading."""
    kind = dataset_kind(name, spec)
    if kind == "sequence":
        return "pair" if is_pair_dataset(name, spec) else "single"
    return kind


#: The `encoding` options whose ``authors`` value is the authors' task preprocessing (`run_papa_glue.py`): a corpus
#: no task reads (the MLM analysis's, a cross-corpus average's) is encoded the paper's way under it, since their
#: code for those is not published (``single_cap: authors`` cut WikiText paragraphs to N/2 for the MLM analysis).
TASK_ONLY_ENCODING = ("single_cap",)


def encoding_options(config: dict, dataset: str) -> dict:
    """The `encoding` options that change ``dataset``'s tokens (`ENCODING_REACH`; every one where its shape is
    unknown): rule tokenize's param, so switching one reruns the datasets it reaches and no others. On a dataset
    no task reads, `TASK_ONLY_ENCODING`'s ``authors`` is the paper's way."""
    shape = input_shape(dataset, config["datasets"][dataset])
    options = {k: v for k, v in config["encoding"].items() if shape is None or ENCODING_REACH.get(k) in (None, shape)}
    if dataset not in task_datasets(config):
        options.update({k: "paper" for k in TASK_ONLY_ENCODING if options.get(k) == "authors"})
    return options


def task_datasets(config: dict) -> set[str]:
    """The datasets the config's tasks read (their ``dataset`` keys)."""
    return {tc.get("dataset") for tc in (config.get("tasks") or {}).values() if isinstance(tc, dict)}


def built_position_limit(build: dict) -> int | None:
    """`position_limit` of a model the workflow builds (``models.<m>.build``, `papa.rehearsal.build_model`)."""
    from .rehearsal import FAMILIES, _max_positions

    family, overrides = build["family"], build.get("config") or {}
    if family == "deberta" and {**FAMILIES[family][1], **overrides}.get("position_biased_input") is False:
        return None
    n = _max_positions(family, overrides)  # the number build_model gives the model
    return n - 2 if family == "roberta" else n  # RoBERTa: positions 0 and 1 precede the tokens (padding index 1)


def _models(models: dict) -> list[str]:
    """A model folder that is not there, a model family PAPA cannot patch, a built model's config key that its
    transformers config does not have (it would be kept as an unused attribute, silently)."""
    import difflib

    from .models import (
        FAMILIES,
        NO_CONFIG,
        SPLIT_ZIP_ALIASES,
        alias_typo,
        is_alias,
        is_package_alias,
        looks_like_path,
        revision_ignored,
        split_revision,
    )

    errors = []
    for m, entry in models.items():
        if isinstance(entry, dict):
            overrides = entry["build"].get("config") or {}
            if overrides:
                from transformers import AutoConfig

                cls = type(AutoConfig.for_model(entry["build"]["family"]))
                known = set(cls().to_dict()) | set(getattr(cls, "attribute_map", {}))
                for key in sorted(set(overrides) - known, key=str):
                    near = difflib.get_close_matches(str(key), sorted(known), n=1)
                    hint = f"did you mean {near[0]!r}?" if near else f"see transformers' {cls.__name__}"
                    errors.append(f"models.{m}.build.config.{key} is not a key of {cls.__name__}: {hint}")
                if overrides.get("is_decoder"):
                    written = json.dumps(overrides["is_decoder"])  # as the config wrote it (1 is not true)
                    errors.append(f"models.{m}.build.config.is_decoder: {written} builds a decoder (each token "
                                  f"attends to the ones before it); PAPA patches bidirectional encoders: remove "
                                  f"it")  # fmt: skip
                if set(overrides) <= known:
                    from .rehearsal import build_problem

                    why = build_problem(entry["build"]["family"], overrides)
                    if why:  # transformers' first line (a module's repr may follow)
                        why = str(why).strip().splitlines()[0][:300]
                        errors.append(f"models.{m}.build.config cannot build a model: {why}; change the config")
            continue
        if isinstance(entry, str) and entry != entry.strip():  # a hub id never has it; a folder's name rarely
            errors.append(f"models.{m} = {entry!r} begins or ends with whitespace, which no hub id or alias has: "
                          f"write {entry.strip()!r}")  # fmt: skip
            continue
        path, revision = split_revision(entry)
        if "@" in str(entry) and revision is None and not looks_like_path(str(entry)):
            base, _, rev = str(entry).rpartition("@")
            errors.append(f"models.{m} = {entry!r}: '@' pins a hub model to a revision, and "
                          f"{'no model id comes before it' if not base else 'no revision follows it'}; write "
                          f"org/name@<commit, tag or branch>, or drop the '@'")  # fmt: skip
            continue
        # a path, and minilm/ too: the workflow reads it as the folder ./minilm (path_param), not as the alias
        as_path = looks_like_path(path) or looks_like_path(path_param(path))
        if as_path and not expand_home(path).is_dir():
            what = ("is a file, not a model folder" if expand_home(path).exists() else
                    "is not a folder on this machine")  # fmt: skip
            errors.append(f"models.{m} = {entry!r} {what} (from {Path.cwd()}); fix the path, or give a hub id "
                          f"(org/name) or an alias (minilm)")  # fmt: skip
            continue
        if not is_package_alias(path) and Path(path).exists() and not Path(path).is_dir():
            # papa.models.resolve_model_path assembles mpnet only where nothing of its name is in the working folder
            # (a folder of that name is a fine-tuned copy), and transformers reads a file of a hub id's name as the
            # model's config.json: the job reads the file and fails (a package alias, minilm, never reads it)
            what = "the alias" if str(path).lower() in SPLIT_ZIP_ALIASES else "the hub model"
            errors.append(f"models.{m} = {entry!r}: the working folder ({Path.cwd()}) holds a file {path!r}, which "
                          f"the jobs would read in place of {what} {path!r} (transformers reads it as the model's "
                          f"config) and fail on: rename or move that file, or give the model's folder")  # fmt: skip
            continue
        alias = is_alias(path)
        # a package alias loads its package's model whatever folder of that name the working folder holds
        # (papa.models.resolve_model_path), so that folder is not checked
        folder = as_path or (not is_package_alias(path) and expand_home(path).is_dir())
        if revision and (alias or folder):
            what = "an offline alias, whose weights are its package's release" if alias else "a local folder"
            errors.append(f"models.{m} = {entry!r}: {revision_ignored(revision, path, what)}")
            continue
        if folder and not (expand_home(path) / "config.json").is_file():
            errors.append(f"models.{m} = {entry!r} {NO_CONFIG}")
            continue
        near = None if folder else alias_typo(path)
        if near:  # not in the hub cache either: a typo, or a download to come
            errors.append(f"models.{m} = {entry!r} is no offline alias: did you mean {near!r}? (Else it is read as "
                          f"a hub id, and fails only in its first job here, where no hub is reachable.)")  # fmt: skip
            continue
        cfg = _local_config(entry)
        if cfg is not None and "model_type" not in cfg:
            errors.append(f"models.{m} = {entry!r}: its config.json has no model_type, so neither transformers nor "
                          f"papa can tell its family; save the model with model.save_pretrained")  # fmt: skip
        elif cfg is not None and cfg.get("model_type") not in FAMILIES:
            errors.append(f"models.{m} = {entry!r} is a {cfg.get('model_type')!r} model, which PAPA cannot patch; "
                          f"supported model types: {', '.join(sorted(FAMILIES))} (to add one: README \"Adding a "
                          f"model family\")")  # fmt: skip
        elif cfg is not None and cfg.get("is_decoder"):
            errors.append(f"models.{m} = {entry!r} is configured as a decoder (config.json: is_decoder "
                          f"{json.dumps(cfg['is_decoder'])}; each "
                          f"token attends to the ones before it), and PAPA patches bidirectional encoders: use the "
                          f"encoder's checkpoint")  # fmt: skip
    return errors


def _weight_names(name_or_path: str) -> set[str] | None:
    """The tensor names of a model's checkpoint on this machine (a safetensors header, or a sharded one's
    index), None when its weights are not here (a hub model not yet downloaded) or not safetensors."""
    single = _local_model_file(name_or_path, "model.safetensors")
    if single is not None:
        with open_safetensors(single) as f:
            return set(f.keys())
    index = _local_model_file(name_or_path, "model.safetensors.index.json")
    if index is not None:
        return set(json.loads(index.read_text()).get("weight_map", {}))
    return None


def _mlm_heads(config: dict) -> list[str]:
    """``analyses.mlm.head: pretrained`` on a model whose checkpoint (when it is on this machine) has no
    masked-LM head, or the tied decoder (``head: probe``, ``decoder: tied``) on a model whose input embeddings are
    narrower than its hidden states (ALBERT; when its config is known here): its MLM job would fail at its first
    step, after the jobs before it."""
    from .models import missing_mlm_head

    mlm = (config.get("analyses") or {}).get("mlm") or {}
    if isinstance(mlm, dict) and mlm.get("head") == "probe" and mlm.get("decoder") == "tied":  # schema-filled
        errors = []  # the tied decoder projects the hidden states onto the input embeddings: as wide as they are
        for m in mlm.get("models") or []:
            cfg = known_config((config.get("models") or {}).get(m))
            width = cfg.get("embedding_size")
            hidden = cfg.get("hidden_size", cfg.get("dim"))
            if isinstance(width, int) and isinstance(hidden, int) and width != hidden:
                errors.append(f"analyses.mlm.decoder is 'tied' (the default), and models.{m}'s input embeddings are "
                              f"{width} wide, its hidden states {hidden}: the tied probe projects the hidden states "
                              f"onto the embeddings; write decoder: fresh for it (a new projection, "
                              f"trained)")  # fmt: skip
        return errors
    if not isinstance(mlm, dict) or mlm.get("head") != "pretrained":
        return []
    errors = []
    for m in mlm.get("models") or []:
        entry = (config.get("models") or {}).get(m)
        if not isinstance(entry, str):
            continue  # a built model (its build decides) or an unknown name (reported elsewhere)
        cfg, names = _local_config(entry), _weight_names(entry)
        missing = missing_mlm_head(cfg, names) if cfg and names is not None else []
        if missing:
            errors.append(f"analyses.mlm.head is 'pretrained', but models.{m} = {entry!r} has no masked-LM head "
                          f"(its checkpoint lacks {listed(missing)}): use head: probe (the paper's, any encoder), or "
                          f"models saved with their MLM head")  # fmt: skip
    return errors


def _nothing_lost(config: dict, fractions: list[float]) -> list[str]:
    """Settings that would silently run nothing: an MLM analysis without models, head orders without a partial
    fraction_dynamic to compare them at, an analysed task that no model runs (`model_tasks`), a config whose models
    run no task and no MLM analysis."""
    errors = []
    analyses = config.get("analyses") or {}
    mlm = analyses.get("mlm")
    if isinstance(mlm, dict) and not mlm.get("models"):
        errors.append("analyses.mlm has no models: list the models to score under analyses.mlm.models (keys of "
                      "'models'), or remove analyses.mlm")  # fmt: skip
    if analyses.get("head_orders") and fractions and not any(is_partial(f) for f in fractions):
        errors.append(f"analyses.head_orders compares head orders at the partial fractions of sweep.fraction_dynamic "
                      f"(0 < f < 1), and it has none ({', '.join(f'{f:g}' for f in fractions)}): add one (e.g. "
                      f"0.5), or set analyses.head_orders: []")  # fmt: skip
    for key, what in (("tasks", "tasks to analyse"), ("models", "models to analyse")):
        if analyses.get(key) == [] and METHOD_CONSTANTS not in config.get("sweep", {}).get("constants", []):
            errors.append(f"analyses.{key}: [] runs no analyses, so plots/constant_kinds and plots/head_orders draw "
                          f"the sweep's {METHOD_CONSTANTS!r} runs only, and sweep.constants lacks "
                          f"{METHOD_CONSTANTS!r}: add it, or give analyses.{key} the {what}")  # fmt: skip
    probing = [m for m in config.get("models", {}) if model_tasks(config, m)]
    run = {t for m in config.get("models", {}) for t in model_tasks(config, m)}
    listed = analyses.get("models")
    run_analysed = {t for m in analysed_models(config) for t in model_tasks(config, m)}
    for t in analyses.get("tasks") or []:
        if run and t in config.get("tasks", {}) and t not in run:  # run empty: an MLM-only config drops nothing
            errors.append(f"analyses.tasks: {t!r} is run by no model (model_tasks), so its analyses would be "
                          f"dropped: add {t!r} to a model's model_tasks, or remove it from analyses.tasks")  # fmt: skip
        elif listed and t in run and t not in run_analysed:
            errors.append(f"analyses.tasks: {t!r} is run by none of analyses.models ({', '.join(listed)}), so its "
                          f"analyses would be dropped: add a model that runs it to analyses.models, or remove "
                          f"{t!r} from analyses.tasks")  # fmt: skip
    for m in listed or []:
        if m in config.get("models", {}) and analyses.get("tasks") != [] and not analysed_tasks(config, m):
            own = model_tasks(config, m)
            why = (f"runs none of analyses.tasks ({', '.join(analyses['tasks'])}; its tasks: {', '.join(own)})"
                   if own else "runs no task (model_tasks)")  # fmt: skip
            errors.append(f"analyses.models: {m!r} {why}, so it would analyse nothing: remove it from "
                          f"analyses.models{', or add one of its tasks to analyses.tasks' if own else ''}")  # fmt: skip
    errors += _head_orders_scope_errors(config)
    scored = set(mlm.get("models") or []) if isinstance(mlm, dict) else set()
    if config.get("models") and not probing and not scored:
        errors.append("no model runs a task (model_tasks gives each []) and analyses.mlm scores none: nothing to "
                      "run; give a model its tasks in model_tasks")  # fmt: skip
    elif probing or scored:
        for m in config.get("models", {}):
            if m not in probing and m not in scored:
                errors.append(f"models.{m} runs nothing: model_tasks.{m} is [] and analyses.mlm does not score it; "
                              f"give it tasks, or remove it")  # fmt: skip
    selections = config.get("sweep", {}).get("selections") or []
    if len(selections) > 1 and fractions and not any(is_partial(f) for f in fractions):
        errors.append(f"sweep.selections lists {', '.join(selections)}, and sweep.fraction_dynamic has no partial "
                      f"fraction (0 < f < 1), where a head order makes a difference: at 1 and 0 each order would "
                      f"repeat the same runs; add one (e.g. 0.5), or list one selection")  # fmt: skip
    return errors


def _head_orders_scope_errors(config: dict) -> list[str]:
    """An entry of ``analyses.head_orders_models``/``head_orders_tasks`` (`head_orders_on`) on which no head order
    would run, as the analyses' own lists are checked: a model the analyses do not run on, or none of whose analysed
    tasks is listed; a task no listed model analyses. Names that are no key of the config are reported elsewhere."""
    analyses = config.get("analyses") or {}
    if not analyses.get("head_orders"):
        return []  # unused_settings says the scope changes nothing
    errors = []
    models, tasks = config.get("models") or {}, config.get("tasks") or {}
    analysed = {m: analysed_tasks(config, m) for m in models}
    scoped = {m: [t for t in own if head_orders_on(config, m, t)] for m, own in analysed.items()}
    for m in analyses.get("head_orders_models") or []:
        if m in models and not scoped[m]:
            listed = ", ".join(analyses.get("head_orders_tasks") or []) or "[]"
            why = (f"analyses none of analyses.head_orders_tasks ({listed}; its analysed tasks: "
                   f"{', '.join(analysed[m])})" if analysed[m] else
                   "is not among the models the analyses run on (analyses.models, analyses.tasks)")  # fmt: skip
            errors.append(f"analyses.head_orders_models: {m!r} {why}, so no head order would run on it: remove it "
                          f"from analyses.head_orders_models, or widen the lists that leave it out")  # fmt: skip
    for t in analyses.get("head_orders_tasks") or []:
        if t in tasks and not any(t in on for on in scoped.values()):
            errors.append(f"analyses.head_orders_tasks: {t!r} is analysed by none of the models head orders run on "
                          f"(analyses.models, analyses.tasks, analyses.head_orders_models), so no head order would "
                          f"run on it: remove it from analyses.head_orders_tasks, or widen the lists that leave it "
                          f"out")  # fmt: skip
    return errors


def tokenized_inputs(config: dict) -> list[tuple[str, str, int]]:
    """(the key that sets N, dataset, N) of every tokenization the config asks for (rule tokenize: a dataset at
    an N), first occurrence each: each task's dataset at its ``max_length``; each corpus of ``sweep.constants``
    (``kind@corpus``) at the N of every task a model runs with it, and each of ``analyses.cross_corpus`` at the N
    of every analysed task; the MLM dataset at ``analyses.mlm.max_length``. Keys that name no dataset are left out
    (reported elsewhere)."""
    datasets, tasks = config.get("datasets") or {}, config.get("tasks") or {}
    out: dict[tuple[str, int], str] = {}

    def add(dataset, n, why):
        if dataset in datasets and isinstance(n, int):
            out.setdefault((dataset, n), why)

    for t, tc in tasks.items():
        add(tc.get("dataset"), tc.get("max_length"), f"tasks.{t}.max_length = {tc.get('max_length')}")
    models = list(config.get("models") or {})
    run = {t for m in models for t in model_tasks(config, m) if t in tasks}
    analysed = {t for m in models for t in analysed_tasks(config, m) if t in tasks}
    for text in (config.get("sweep") or {}).get("constants") or []:
        corpus = ConstantsSpec.parse(text).corpus
        for t in sorted(run):
            n = tasks[t].get("max_length")
            add(corpus, n, f"tasks.{t}.max_length = {n} (the N at which sweep.constants entry {text!r} averages "
                           f"{corpus!r})")  # fmt: skip
    for corpus in (config.get("analyses") or {}).get("cross_corpus") or []:
        for t in sorted(analysed):
            n = tasks[t].get("max_length")
            add(corpus, n, f"tasks.{t}.max_length = {n} (the N at which analyses.cross_corpus entry {corpus!r} is "
                           f"averaged)")  # fmt: skip
    mlm = (config.get("analyses") or {}).get("mlm")
    if isinstance(mlm, dict) and mlm.get("models"):
        add(mlm.get("dataset"), mlm.get("max_length"), f"analyses.mlm.max_length = {mlm.get('max_length')} (the N "
                                                         f"of analyses.mlm.dataset)")  # fmt: skip
    return [(why, dataset, n) for (dataset, n), why in out.items()]


def _pair_separators(model_type) -> int:
    """How many separators a model type's tokenizer puts between a pair's sentences (RoBERTa's ``</s></s>``: 2, so a
    pair needs N >= 8 in the papa layout; one separator: 6): its `papa.models.Family`'s ``pair_separators``. The
    tokenize job reads the real tokenizer's template (`papa.encoding.special_template`); this is the config check's
    view of it, before any tokenizer is read."""
    from .models import FAMILIES

    return getattr(FAMILIES.get(model_type), "pair_separators", 1)


def _model_type(entry) -> str | None:
    """The model type of ``models.<m>`` when known without loading it (`known_config`), else None (a hub model:
    its tokenize job checks it)."""
    try:
        return known_config(entry).get("model_type")
    except ConfigError:  # a broken config.json is reported by the models check
        return None


def _pair_lengths(config: dict) -> list[str]:
    """An N that a sentence-pair dataset is tokenized at (`tokenized_inputs`, by whichever key) must leave each
    sentence a word piece (`papa.encoding.min_max_length`: 6 in the papa layout, 8 for a model of two separators,
    `_pair_separators`, that runs the task) and, in the papa layout, be even (sentence B starts at N/2); its
    tokenize job fails otherwise. A config without sentence pairs never imports `papa.encoding` (torch: ~2.5 s of CPU at
    every Snakemake start, each Slurm job's too)."""
    datasets, tasks = config.get("datasets") or {}, config.get("tasks") or {}
    pairs = [(why, d, n) for why, d, n in tokenized_inputs(config) if is_pair_dataset(d, datasets[d])]
    if not pairs:
        return []
    layout = config["layout"]  # the schema's default filled in
    from .encoding import min_max_length

    errors = []
    base, double = min_max_length(1, 1, 1, True, layout), min_max_length(1, 2, 1, True, layout)
    for why, d, n in pairs:
        if n < base:
            errors.append(f"{why} is too short for {d!r}, which gives sentence pairs: use at least "
                          f"{base}{' (even)' if layout == 'papa' else ''}")  # fmt: skip
        elif n % 2 and layout == "papa":
            errors.append(f"{why} is odd, and {d!r} gives sentence pairs, which need an even N (sentence B starts "
                          f"at N/2); use {n - 1} or {n + 1}")  # fmt: skip
    mlm = (config.get("analyses") or {}).get("mlm") or {}
    mlm_models = set(mlm.get("models") or []) if isinstance(mlm, dict) else set()
    for m, entry in (config.get("models") or {}).items():
        if _pair_separators(_model_type(entry)) < 2:
            continue
        # what this model tokenizes: its tasks (the corpora it averages go at their N), and the MLM dataset
        runs = [(f"tasks.{t}.max_length", (tasks.get(t) or {}).get("dataset"), (tasks.get(t) or {}).get("max_length"))
                for t in model_tasks(config, m)]  # fmt: skip
        if m in mlm_models:
            runs.append(("analyses.mlm.max_length", mlm.get("dataset"), mlm.get("max_length")))
        for key, d, n in runs:
            if d in datasets and isinstance(n, int) and is_pair_dataset(d, datasets[d]) and base <= n < double:
                errors.append(f"{key} = {n} is too short for model {m!r}, whose tokenizer puts two separators "
                              f"between the sentences of {d!r}: use at least {double}")  # fmt: skip
    return errors


def _non_finite(value, path: str = "") -> list[str]:
    """Every number of the config that is not finite (YAML's ``.inf``, ``.nan``): a learning rate or a budget of
    inf or NaN passes the schema's minimums."""
    if isinstance(value, float) and not math.isfinite(value):
        return [f"config key {path!r} is {value}: give a finite number"]
    if isinstance(value, dict):
        return [e for k, v in value.items() for e in _non_finite(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in _non_finite(v, f"{path}[{i}]")]
    return []


def known_config(entry) -> dict:
    """The config of a model of the config (``models.<m>``) as far as it is known without loading it: a built
    model's (`papa.rehearsal.config_values`, its family as ``model_type``), a model folder's config.json on this
    machine; {} otherwise (a hub model)."""
    if isinstance(entry, dict):
        from .rehearsal import FAMILIES, config_values

        build = entry.get("build") or {}
        family = build.get("family")
        return {**config_values(family, build.get("config")), "model_type": family} if family in FAMILIES else {}
    return _local_config(entry) or {}


def head_count(entry) -> int | None:
    """Layers x heads of a model of the config (``models.<m>``) when known without loading it (`known_config`);
    None otherwise."""
    cfg = known_config(entry)
    layers, heads = cfg.get("num_hidden_layers"), cfg.get("num_attention_heads")
    return int(layers) * int(heads) if isinstance(layers, int) and isinstance(heads, int) else None


def _fractions_that_leave_the_same_heads(config: dict, fractions: list) -> list[str]:
    """fraction_dynamic values that leave a model the same number of input-dependent heads (`papa.spec.n_dynamic`:
    0.0625 and 0.07 both leave 5 of 72): one run under two labels, a partial one possibly the all-constant run or
    the original model. Only for models whose head count is known before loading (`head_count`)."""
    errors = []
    for m, entry in (config.get("models") or {}).items():
        total = head_count(entry)
        if not total:
            continue
        counts: dict[int, list] = {}
        named: dict[str, float] = {}  # values written as one run folder are reported as such
        for f in fractions:
            named.setdefault(format_fraction(f), float(f))
        for f in named.values():
            counts.setdefault(n_dynamic(f, total), []).append(f)
        for n, given in counts.items():
            if len(given) > 1:
                what = {0: " (every head constant)", total: " (the original model)"}.get(n, "")
                errors.append(f"sweep.fraction_dynamic: {', '.join(f'{f:g}' for f in given)} all leave {n} of the "
                              f"{total} heads of model {m!r} input-dependent{what} (papa.spec.n_dynamic: "
                              f"round(fraction x heads)), so they are one run under several labels: list one of "
                              f"them")  # fmt: skip
    return errors


def _fractions_that_name_one_run(fractions: list) -> list[str]:
    """Different fraction_dynamic values written the same in the run folder (`papa.spec.format_fraction`:
    0.5 and 0.5000001 are both ``fraction_dynamic=0.5``): one run would stand for both."""
    names: dict[str, list] = {}
    for f in fractions:
        names.setdefault(format_fraction(f), []).append(f)
    return [f"sweep.fraction_dynamic: {', '.join(map(str, given))} are all written fraction_dynamic={name} in the "
            f"run folders (6 significant digits), so they would be one run; list one of them"
            for name, given in names.items() if len(set(map(float, given))) > 1]  # fmt: skip


def _fractions_not_as_written(fractions: list) -> list[str]:
    """A fraction_dynamic its run folder writes otherwise (`papa.spec.format_fraction`, 6 significant digits: 1/3 as
    0.3333333333333333 is ``fraction_dynamic=0.333333``): the probe reads its fraction back from the folder, so the
    tables held 0.333333, and a filter or join on the config's value found no row."""
    ends = [f for f in fractions if is_original(f) or is_all_constant(f)]  # the ends count up to float noise
    shown = {f: format_fraction(f) for f in fractions if f not in ends}
    odd = [f"{f!r} (the tables would hold {name})" for f, name in shown.items() if float(name) != float(f)]
    return [f"sweep.fraction_dynamic: {', '.join(odd)}: the run folders and tables write a fraction with 6 significant "
            f"digits; write it so"] if odd else []  # fmt: skip


def _fractions_at_one_end(fractions: list) -> list[str]:
    """Several fraction_dynamic values that the tables count as one end, up to float noise (`papa.spec.is_original`,
    `is_all_constant`: 1 and 0.99999, 0 and 1e-09), written as different run folders: the summary took both for the
    original model (two baselines of relative_drop: it failed after the runs, on a pandas MergeError) or the
    all-constant run (one of them kept, unsaid). `_fractions_that_leave_the_same_heads` refuses them only where the
    head count is known before loading; a hub model's is not."""
    problems = []
    for end, is_end, what in ((ORIGINAL, is_original, "the original model"),
                              (ALL_CONSTANT, is_all_constant, "every head constant")):  # fmt: skip
        named = list(dict.fromkeys(format_fraction(f) for f in fractions if is_end(f)))  # in the order listed
        if len(named) > 1:
            problems.append(f"sweep.fraction_dynamic: {', '.join(named)} are all {end:g} up to float noise ({what}: "
                            f"the summary counts each as that run), written as {len(named)} run folders: list one "
                            f"of them ({end:g})")  # fmt: skip
    return problems


def check_config(config: dict) -> None:
    """Raise a `ConfigError` listing every problem found; the schema has already validated the shape
    (and filled in its defaults)."""
    errors = []
    datasets = config.get("datasets", {})
    for key, spec in datasets.items():
        source, name = spec.get("source"), dataset_name(key, spec)
        if source in KNOWN_TASKS and name not in KNOWN_TASKS[source]:
            stripped = name.strip()  # a space YAML kept (a quoted name, a tab): the name meant, without it
            near = stripped if stripped in KNOWN_TASKS[source] else closest(name, KNOWN_TASKS[source])
            hint = "" if not near else f" (write {near!r})" if near == stripped else f" (did you mean {near!r}?)"
            errors.append(f"datasets.{key}: unknown {source} dataset {name!r}{hint}; known {source} datasets: "
                          f"{', '.join(KNOWN_TASKS[source])} (or source: local with your own files)")  # fmt: skip
        labels = dataset_labels(key, spec)  # [] for an unlabeled corpus
        if labels is not None and len(labels) == 1:
            errors.append(f"datasets.{key}.labels lists one label ({labels[0]!r}): a probe needs two classes at "
                          f"least, and prepare_data refuses a train split of one; list every label of the data, in "
                          f"index order")  # fmt: skip
        if spec.get("column_names") and "header" not in spec:  # pandas would read a header row as data
            errors.append(f"datasets.{key}.column_names: say whether the files' first line is a header: header: "
                          f"false (every line is data) or header: true (the header row is renamed)")  # fmt: skip
    errors += _cross_references(config)
    sweep = config.get("sweep", {})
    for key, values in _lists(config):
        dup = _repeated(values)
        if dup:
            errors.append(f"{key} lists {', '.join(dup)} more than once; list each once")
    listed = sweep.get("fraction_dynamic", [])
    given = [v for v in listed if math.isfinite(float(v))]  # .nan: _non_finite names it
    fractions = [float(v) for v in given] if len(given) == len(listed) else []  # the other checks wait for a fix
    errors += _fractions_that_name_one_run(given) + _fractions_not_as_written(fractions)
    errors += _fractions_at_one_end(fractions)
    errors += _fractions_that_leave_the_same_heads(config, fractions)
    errors += _names(config) + _results_folder(config) + _scratch_folder(config) + _source_keys(datasets)
    errors += _unread_keys(config)
    errors += _models(config.get("models", {}))
    errors += _nothing_lost(config, fractions)
    errors += _non_finite(config)
    errors += _over_limits(config)
    errors += _mlm_heads(config)
    for key, value in (config.get("encoding") or {}).items():
        if value == "authors" and config.get("layout") == "standard":
            errors.append(f"encoding.{key}: 'authors' reproduces the authors' papa layout, and layout is standard: "
                          f"set layout: papa, or encoding.{key}: paper")  # fmt: skip
    ends = [
        (ORIGINAL, "the original model, the baseline of relative_drop", is_original),
        (ALL_CONSTANT, "every head constant", is_all_constant),
    ]
    missing = [f"{f:g} ({why})" for f, why, is_end in ends if fractions and not is_end(fractions).any()]
    if missing:
        errors.append(f"sweep.fraction_dynamic lacks {' and '.join(missing)}: the summary table and Fig. 3 "
                      f"(plots/models_compared) compare the two ends; add them")  # fmt: skip
    runs = {m: set(model_tasks(config, m)) for m in compared_models(config)}
    if len(runs) > 1 and not set.intersection(*runs.values()):
        errors.append(f"model_tasks: models {', '.join(sorted(runs))} share no task; Fig. 3 (plots/models_compared) "
                      f"compares the models on the tasks all of them run: give them one task in common")  # fmt: skip
    limits = {m: position_limit(p) if isinstance(p, str) else built_position_limit(p["build"])
              for m, p in config.get("models", {}).items()}  # fmt: skip
    mlm = (config.get("analyses") or {}).get("mlm") or {}
    for model in mlm.get("models") or []:
        n, limit = mlm.get("max_length"), limits.get(model)
        if n is not None and limit is not None and n > limit:
            errors.append(f"analyses.mlm.max_length = {n} exceeds the {limit} positions of model {model!r}; "
                          f"use at most {limit}")  # fmt: skip
    for task, tc in config.get("tasks", {}).items():
        if "seed" in (tc.get("probe") or {}):  # the schema's hparams block is shared with tasks.<t>.lambda
            errors.append(f"tasks.{task}.probe.seed is not used: the probes' seeds are sweep.seeds; to seed the "
                          f"lambda stage, set tasks.{task}.lambda.seed")  # fmt: skip
        spec = datasets.get(tc.get("dataset"), {})
        kind = dataset_kind(tc.get("dataset", ""), spec)
        labels = dataset_labels(tc.get("dataset", ""), spec) if tc.get("dataset") in datasets else None
        if labels == []:
            errors.append(f"tasks.{task}.dataset = {tc['dataset']!r} is an unlabeled corpus (no label names), so "
                          f"its probes have nothing to learn; use it for averaging (sweep.constants "
                          f"average@{tc['dataset']}, analyses.cross_corpus, analyses.mlm.dataset) or point the task "
                          f"at a labeled dataset")  # fmt: skip
        if kind == "sequence":  # one example is one class: no probe learns from it (a sentence of tags may)
            probe_n, lambda_n = ((tc.get(block) or {}).get("max_train") for block in ("probe", "lambda"))
            # a lambda block's max_train equal to the probe's is the probe's as filled in (fill_derived_defaults), and
            # is said with it: named alone, the key was often one the config does not have, and fixing it left the
            # probe's. The filled config cannot tell an inherited 1 from one the config wrote in both blocks: the line
            # says both (it said "unless ... is given" of a key the config gave, whose 1 then failed the next run)
            also = (f" (the lambda stage's too, which takes the probe's where tasks.{task}.lambda.max_train is not "
                    f"given: set tasks.{task}.lambda.max_train too where the config gives it)")  # fmt: skip
            draws = [(f"datasets.{tc['dataset']}.max_train", spec.get("max_train"), "")]
            draws += [(f"tasks.{task}.probe.max_train", probe_n, also if lambda_n == probe_n else "")]
            draws += [(f"tasks.{task}.lambda.max_train", lambda_n, "")] if lambda_n != probe_n else []
            errors += [f"{key} = 1 draws one example, one class, for task {task}, a sequence task: a probe needs "
                       f"two classes; use at least 2 (null = every example){but}"
                       for key, n, but in draws if n == 1]  # fmt: skip
        allowed = METRICS.get(kind)
        for metric in tc.get("metrics", []):
            if allowed is not None and metric not in allowed:
                errors.append(f"tasks.{task}.metrics: {metric!r} does not fit dataset {tc['dataset']!r}, a {kind} "
                              f"task; use {', '.join(allowed)}")  # fmt: skip
            elif metric in BINARY_METRICS and labels and len(labels) > 2:
                errors.append(f"tasks.{task}.metrics: {metric!r} is binary F1 (of label 1), and task {task} has "
                              f"{len(labels)} labels ({', '.join(labels)}, dataset {tc['dataset']!r}): use "
                              f"{BINARY_METRICS[metric]!r}")  # fmt: skip
            elif metric == "entity_f1" and labels and not chunk_tagged(labels):
                errors.append(f"tasks.{task}.metrics (dataset {tc['dataset']!r}): {entity_f1_problem(labels)}")
        n = tc.get("max_length")
        for model, limit in limits.items():
            if task not in model_tasks(config, model):
                continue
            if n is not None and limit is not None and n > limit:
                errors.append(f"tasks.{task}.max_length = {n} exceeds the {limit} positions of model {model!r}; "
                              f"use at most {limit}")  # fmt: skip
    errors += _pair_lengths(config)
    if errors:
        raise ConfigError("Invalid config:\n  - " + "\n  - ".join(errors))
