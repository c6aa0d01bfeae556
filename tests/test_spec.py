"""papa.spec is the one vocabulary: the constants-spec parser, the fraction_dynamic helpers, and the
config schema's enums, patterns and defaults held equal to the library's (a kind, order, metric or
default added in one place only fails here)."""

import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from papa import spec
from papa.checks import schema_file
from papa.spec import ConstantsSpec

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


@pytest.fixture(scope="module")
def schema():
    return yaml.safe_load(SCHEMA.read_text())


def _config(name="smoke"):
    return yaml.safe_load((ROOT / f"config/{name}.yaml").read_text())


def _validated(cfg):
    from snakemake.utils import validate

    validate(cfg, schema_file(SCHEMA))  # a JSON copy: Snakemake reads a YAML schema with pure-Python YAML
    return cfg


# ----------------------------------------------------------------------------- the constants spec


@pytest.mark.parametrize("kind", spec.SPEC_KINDS)
@pytest.mark.parametrize("corpus", [None, "wiki", "my-corpus.v2", "wiki_trained"])
def test_constants_spec_round_trips(kind, corpus):
    """Every spec kind, with or without a corpus, parses and prints back; ``_trained`` is read off the kind alone
    (a corpus named ``wiki_trained`` trains nothing)."""
    text = kind + (f"@{corpus}" if corpus else "")
    c = ConstantsSpec.parse(text)
    assert str(c) == text and ConstantsSpec.parse(c) is c
    assert c.kind in spec.CONSTANT_KINDS and c.trained == kind.endswith(spec.TRAINED_SUFFIX)
    assert c.corpus == corpus and c.corpus_or("task_data") == (corpus or "task_data")
    assert c.data_free == (c.kind in spec.DATA_FREE) == spec.is_data_free(text)


@pytest.mark.parametrize("corpus", [None, "wiki", "my_corpus-2.v1"])
def test_trained_and_fixed_patterns_split_every_spec(corpus):
    """Rules probe_trained and probe take the specs these patterns match: each spec exactly one of them, by
    whether its matrices train (the workflow's wildcard constraints; a spec in neither or both would make
    Snakemake find no rule or two for its probe files)."""
    import re

    for kind in spec.SPEC_KINDS:
        text = str(ConstantsSpec.parse(kind + (f"@{corpus}" if corpus else "")))
        trained = bool(re.fullmatch(spec.TRAINED_CONSTANTS_PATTERN, text))
        assert trained == ConstantsSpec.parse(text).trained, text
        assert bool(re.fullmatch(spec.FIXED_CONSTANTS_PATTERN, text)) != trained, text
    # a spec the parser refuses (two corpora) is in neither (mutation testing: the trained pattern took it)
    for text in (f"{k}@{corpus or 'a'}@b" for k in spec.SPEC_KINDS):
        with pytest.raises(ValueError, match="is not kind"):
            ConstantsSpec.parse(text)
        matched = [p for p in (spec.TRAINED_CONSTANTS_PATTERN, spec.FIXED_CONSTANTS_PATTERN) if re.fullmatch(p, text)]
        assert not matched, (text, matched)


def test_constants_spec_fields():
    assert ConstantsSpec.parse("average_trained@wiki") == ConstantsSpec("average", trained=True, corpus="wiki")
    assert ConstantsSpec.parse("toeplitz") == ConstantsSpec("toeplitz")


@pytest.mark.parametrize(
    "text, needle",
    [
        ("averge", "is not kind[_trained][@corpus]"),
        ("identity_trained", "'identity' matrices cannot be trained; trainable kinds: average, toeplitz"),
        ("average@", "is not kind[_trained][@corpus]"),
        ("average@a/b", "is not kind[_trained][@corpus]"),
        ("Average", "is not kind[_trained][@corpus]"),
        (3, "is not kind[_trained][@corpus]"),
    ],
)
def test_constants_spec_rejects_bad_specs_clearly(text, needle):
    with pytest.raises(ValueError, match=r"choose|kind\[_trained\]|cannot be trained") as e:
        ConstantsSpec.parse(text)
    assert needle in str(e.value) and "average_trained" in str(e.value)  # names what is allowed


def test_constants_spec_constructor_checks_kinds():
    with pytest.raises(ValueError, match="cannot be trained"):
        ConstantsSpec("zeros", trained=True)
    with pytest.raises(ValueError, match="Unknown constant kind"):
        ConstantsSpec("average_trained")


# ----------------------------------------------------------------------------- fraction_dynamic


def test_fraction_dynamic_helpers():
    assert [spec.format_fraction(f) for f in (1, 0.5, 0.125, 0.0625, 0)] == ["1", "0.5", "0.125", "0.0625", "0"]
    assert [spec.n_dynamic(f, 144) for f in (1, 1 / 2, 1 / 8, 1 / 16, 0)] == [144, 72, 18, 9, 0]
    # halves round up (the default run's MiniLM: 1/16 of 72 heads is 4.5 -> 5; floor would keep 4), not to even
    assert [spec.n_dynamic(f, 72) for f in (1 / 16, 1 / 48, 0.5 / 72, 0.4 / 72)] == [5, 2, 1, 0]
    assert [spec.is_partial(f) for f in (1, 0.5, "0.0625", 0)] == [False, True, True, False]
    assert spec.needs_lambdas("lambda", 0.5) and spec.needs_lambdas("reversed", "0.5")
    assert not spec.needs_lambdas("lambda", 0) and not spec.needs_lambdas("lambda", 1)
    assert not spec.needs_lambdas("random", 0.5)
    with pytest.raises(ValueError, match=r"fraction_dynamic must be in \[0, 1\]"):
        spec.format_fraction(1.5)
    # -0.0 is 0: a config's -0 named its runs fraction_dynamic=-0 (beside 0's) and rule mlm's params held -0.0
    import math

    from papa.checks import mlm_sweep, probe_runs

    assert spec.format_fraction(-0.0) == "0" and math.copysign(1, spec.check_fraction(-0.0)) == 1
    assert math.copysign(1, mlm_sweep({"fraction_dynamic": [1, -0.0], "seeds": [0]})["fraction_dynamic"][-1]) == 1
    cfg = {"models": {"m": "x"}, "tasks": {"t": {"dataset": "d"}}, "analyses": {"tasks": [], "constant_kinds": [],
           "cross_corpus": [], "head_orders": []}, "model_tasks": {},
           "sweep": {"fraction_dynamic": [1, -0.0], "constants": ["average"], "selections": ["lambda"]}}  # fmt: skip
    assert [run[-1] for run in probe_runs(cfg)] == ["1", "0"]
    with pytest.raises(ValueError, match="Unknown head order"):
        spec.needs_lambdas("lambdas", 0.5)
    # one number, not a list or an array of one (float() takes np.array([0.5]) as 0.5: mutation testing found the
    # scalar check unchecked), and every fraction as it is written in paths is one the rules' wildcard
    # (spec.FRACTION_PATTERN) matches, exponents too (unchecked as well)
    for many in ([0.5], (0.5,), np.array([0.5]), np.array([[0.5]])):
        with pytest.raises(TypeError, match="fraction_dynamic must be a number in"):
            spec.check_fraction(many)
    assert spec.check_fraction(np.array(0.5)) == 0.5 and spec.check_fraction(np.float32(0.25)) == 0.25
    written = [spec.format_fraction(f) for f in (1, 0.5, 1 / 3, 1 / 16, 1e-5, 2.5e-7, 0)]
    assert "1e-05" in written and all(re.fullmatch(spec.FRACTION_PATTERN, w) for w in written), written


def test_every_fraction_is_exactly_one_of_all_constant_partial_original():
    grid = [0, 1e-4, 1 / 16, 0.5, 1 - 1e-3, 1.0, 0.1 + 0.2 - 0.3]  # the last one: 0 up to float noise
    const, orig = spec.is_all_constant(grid).tolist(), spec.is_original(grid).tolist()
    assert const == [True, False, False, False, False, False, True]
    assert orig == [False, False, False, False, False, True, False]
    assert [spec.is_partial(f) for f in grid[:-1]] == [False, True, True, True, True, False]
    assert spec.format_fraction(spec.ALL_CONSTANT) == "0" and spec.format_fraction(spec.ORIGINAL) == "1"
    # 1 up to float noise is the original model too (a sum of shares, a float32 fraction): review DI
    assert spec.is_original([0.7 + 0.1 + 0.1 + 0.1, 1 + 1e-12, float(np.float32(1 / 3)) * 3]).tolist() == [True] * 3


def test_old_names_are_aliases_of_the_vocabulary():
    from papa import metrics, pipeline, selection

    assert selection.ORDERS is spec.HEAD_ORDERS and selection.n_dynamic is spec.n_dynamic
    assert metrics.SEQUENCE_METRICS is spec.METRICS["sequence"] and metrics.TOKEN_METRICS is spec.METRICS["token"]
    assert pipeline.DATA_FREE is spec.DATA_FREE and not hasattr(pipeline, "TRAINED")
    from papa import plots

    assert plots.SELECTION_ORDER is spec.HEAD_ORDERS
    from papa import constants

    assert constants.KINDS is spec.CONSTANT_KINDS


def test_renamed_arguments_map_an_old_keyword_to_its_new_name():
    @spec.renamed_arguments(fraction="fraction_dynamic")
    def f(a, fraction_dynamic=1.0):
        return a, fraction_dynamic

    with pytest.warns(DeprecationWarning, match=r"f\(fraction=...\) is deprecated; use fraction_dynamic=") as rec:
        assert f(1, fraction=0.5) == (1, 0.5)
    # the warning names the caller's line (Python shows a DeprecationWarning raised in __main__, a notebook's cell;
    # mutation testing: it named papa's decorator)
    assert rec[0].filename == __file__, rec[0].filename
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name, by keyword or position: no warning
        assert f(1, fraction_dynamic=0.25) == (1, 0.25) and f(1, 0.125) == (1, 0.125)
    with pytest.raises(TypeError, match="both 'fraction' and its new name 'fraction_dynamic'"):
        f(1, fraction=0.5, fraction_dynamic=0.5)
    with pytest.raises(TypeError, match="both 'fraction' and its new name 'fraction_dynamic'"):  # the new by position
        f(1, 0.25, fraction=0.5)
    assert list(inspect.signature(f).parameters) == ["a", "fraction_dynamic"]  # help() shows the new names


def _kept_for_notebooks():
    from papa import mlm, pipeline, plots

    return [
        (pipeline.static_mask, "fraction"),
        (pipeline.run_probes, "fraction"),
        (pipeline.run_mlm, "fractions"),
        (mlm.mlm_curve, "fractions"),
        (plots.plot_models_compared, "summary"),
    ]


@pytest.mark.parametrize("fn, old", _kept_for_notebooks(), ids=lambda v: getattr(v, "__name__", v))
def test_functions_kept_for_notebooks_accept_their_old_keywords(fn, old):
    # the old keyword is taken (with a warning): the call then fails for want of the other arguments,
    # not with "unexpected keyword argument"
    with pytest.warns(DeprecationWarning, match=f"{old}=..."), pytest.raises(TypeError, match="missing") as err:
        fn(**{old: 0.5})
    assert old not in str(err.value)


def test_static_mask_by_its_old_keyword_is_the_same_mask():
    from papa import pipeline

    from .conftest import tiny_model

    model = tiny_model("bert")
    new = pipeline.static_mask(model, None, "first_to_last", fraction_dynamic=0.5)
    with pytest.warns(DeprecationWarning):
        assert pipeline.static_mask(model, None, "first_to_last", fraction=0.5).equal(new)
    assert 0 < int(new.sum()) < new.numel()


# ----------------------------------------------------------------------------- the schema speaks the same vocabulary


def test_schema_enums_and_patterns_are_the_vocabulary(schema):
    p = schema["properties"]
    sweep, analyses = p["sweep"]["properties"], p["analyses"]["properties"]
    assert sweep["constants"]["items"]["pattern"] == f"^{spec.CONSTANTS_PATTERN}$"
    assert tuple(analyses["constant_kinds"]["items"]["enum"]) == spec.SPEC_KINDS
    assert tuple(sweep["selections"]["items"]["enum"]) == spec.HEAD_ORDERS
    assert tuple(analyses["head_orders"]["items"]["enum"]) == spec.HEAD_ORDERS
    assert tuple(p["tasks"]["additionalProperties"]["properties"]["metrics"]["items"]["enum"]) == spec.ALL_METRICS
    assert tuple(p["datasets"]["additionalProperties"]["properties"]["kind"]["enum"]) == spec.TASK_KINDS
    from papa.probe import BATCH_ORDERS, PROBE_INITS, STRATEGIES, TrainConfig

    assert tuple(sweep["batch_order"]["enum"]) == BATCH_ORDERS and sweep["batch_order"]["default"] == "per_seed"
    assert tuple(schema["definitions"]["lambda_hparams"]["properties"]["init"]["enum"]) == PROBE_INITS
    assert tuple(analyses["mlm"]["then"]["properties"]["init"]["enum"]) == PROBE_INITS
    assert TrainConfig().init == PROBE_INITS[0]  # the default the schema's descriptions name
    assert tuple(p["cache"]["properties"]["strategy"]["enum"]) == STRATEGIES
    from papa.models import COMPILE_MODES, PRECISIONS

    assert tuple(p["precision"]["enum"]) == PRECISIONS
    assert tuple(p["compile"]["enum"]) == COMPILE_MODES
    from papa.data.local import FORMAT_NAMES

    assert tuple(p["datasets"]["additionalProperties"]["properties"]["format"]["enum"]) == tuple(FORMAT_NAMES)
    for key in ("models", "datasets", "tasks", "build_data"):
        assert p[key]["propertyNames"]["pattern"] == f"^{spec.NAME_PATTERN}$", key
    for key in ("fraction_dynamic", "fractions"):  # the new name and its deprecated alias
        assert sweep[key]["items"] == {"type": "number", "minimum": 0, "maximum": 1}, key


def test_every_enum_of_the_schema_is_a_library_tuple(schema):
    """Each ``enum`` anywhere in the schema equals the library's tuple of that choice (a value added in one place
    only fails here), and no enum is left without one: a new enum must be named here with its library tuple."""
    from papa import mlm, rehearsal
    from papa.data import registry
    from papa.data.local import FORMAT_NAMES
    from papa.encoding import ENCODING_CHOICES, LAYOUTS
    from papa.models import COMPILE_MODES, PRECISIONS
    from papa.probe import AUTHORS_DROPOUT, BATCH_ORDERS, CACHE_DTYPES, PROBE_INITS, STRATEGIES

    library = {
        "definitions/lambda_hparams/properties/init": PROBE_INITS,
        "definitions/lambda_hparams/properties/dropout/then": (AUTHORS_DROPOUT,),  # the word a dropout may be
        "properties/layout": LAYOUTS,
        "properties/precision": PRECISIONS,
        "properties/compile": COMPILE_MODES,
        "properties/encoding/properties/single_cap": ENCODING_CHOICES,
        "properties/encoding/properties/pair_segments": ENCODING_CHOICES,
        "properties/models/additionalProperties/then/properties/build/properties/family": tuple(rehearsal.FAMILIES),
        "properties/build_data/additionalProperties/properties/shape": tuple(rehearsal.SHAPES),
        "properties/datasets/additionalProperties/properties/source": registry.SOURCES,
        "properties/datasets/additionalProperties/properties/kind": spec.TASK_KINDS,
        "properties/datasets/additionalProperties/properties/format": tuple(FORMAT_NAMES),
        "properties/tasks/additionalProperties/properties/metrics/items": spec.ALL_METRICS,
        "properties/sweep/properties/batch_order": BATCH_ORDERS,
        "properties/sweep/properties/selections/items": spec.HEAD_ORDERS,
        "properties/analyses/properties/constant_kinds/items": spec.SPEC_KINDS,
        "properties/analyses/properties/head_orders/items": spec.HEAD_ORDERS,
        "properties/analyses/properties/mlm/then/properties/head": mlm.MLM_HEADS,
        "properties/analyses/properties/mlm/then/properties/init": PROBE_INITS,
        "properties/analyses/properties/mlm/then/properties/masking": mlm.MASKINGS,
        "properties/analyses/properties/mlm/then/properties/decoder": mlm.MLM_DECODERS,
        "properties/cache/properties/dtype": CACHE_DTYPES,
        "properties/cache/properties/strategy": STRATEGIES,
    }
    enums = {}

    def walk(node, path):
        if isinstance(node, dict):
            if "enum" in node:
                enums["/".join(path)] = tuple(node["enum"])
            for key, value in node.items():
                walk(value, [*path, key])
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, [*path, str(i)])

    walk(schema, [])
    assert set(enums) == set(library), set(enums) ^ set(library)
    for path, values in enums.items():
        assert values == tuple(library[path]), path


def test_the_metrics_of_each_task_kind_are_implemented():
    import numpy as np

    from papa.metrics import compute

    y = np.array([[0, 1, -100], [1, 0, 1]])
    for kind, names in spec.METRICS.items():
        for metric in names:
            args = (y.flatten()[y.flatten() >= 0],) * 2 if kind == "sequence" else (y, y)
            assert compute(metric, *args, label_names=["B-X", "I-X"]) == pytest.approx(1.0), metric


# ----------------------------------------------------------------------------- one source of defaults


def test_validation_fills_nested_defaults():
    cfg = _config()
    for key in ("averaging", "cache", "analyses", "resources"):
        del cfg[key]
    _validated(cfg)
    assert cfg["resources"] == {
        "default": {"threads": 1, "mem_mb": 2000, "runtime": 30, "gpu": 0},
        "limits": {"runtime": None, "mem_mb": None},
    }
    assert cfg["averaging"] == {"batch_size": 32, "max_examples": None}
    assert cfg["cache"] == {
        "dtype": "float16",
        "budget_mb": 4096,
        "batch_size": 64,
        "strategy": "auto",
        "disk_budget_mb": None,
        "scratch": None,
    }
    assert cfg["analyses"] == {
        "tasks": None,
        "models": None,
        "constant_kinds": [],
        "cross_corpus": [],
        "head_orders": [],
        "head_orders_models": None,
        "head_orders_tasks": None,
        "patterns": None,
        "mlm": None,
    }
    assert cfg["build_data"] == {} and cfg["model_tasks"] == {}
    cfg = _config()
    cfg["analyses"].update(patterns={}, mlm={"models": ["minilm"]})
    _validated(cfg)
    assert cfg["analyses"]["patterns"] == {"band": 1, "diag_threshold": 0.3, "special_threshold": 0.5}
    assert cfg["analyses"]["mlm"]["dataset"] == "wiki" and cfg["analyses"]["mlm"]["max_length"] == 128


def test_resource_defaults_fill_resources_default_only():
    # a rule's own entry overrides resources.default key by key (common.smk's res): a default filled into
    # resources.<rule> would silently override what the config gives under resources.default
    cfg = _config()
    cfg["resources"] = {"default": {"mem_mb": 500}, "probe": {"gpu": 1}}
    _validated(cfg)
    assert cfg["resources"] == {
        "default": {"threads": 1, "mem_mb": 500, "runtime": 30, "gpu": 0},
        "probe": {"gpu": 1},
        "limits": {"runtime": None, "mem_mb": None},
    }


def test_job_resources_read_each_level_under_the_next():
    """A job's resources, key by key: resources.default, resources.<rule>, then the task's entry; rule probe_trained
    reads the probe's entry under its own at both levels, so a task's probe runtime reaches its trained seeds."""
    from papa.checks import job_resources

    cfg = _config()
    task = next(iter(cfg["tasks"]))
    cfg["resources"] = {
        "default": {"threads": 1, "mem_mb": 1000, "runtime": 10, "gpu": 0},
        "probe": {"mem_mb": 2000, "runtime": 20, "threads": 2},
        "probe_trained": {"mem_mb": 3000, "threads": 3},
        "learn_lambda": {"runtime": 90},
    }
    cfg["tasks"][task]["resources"] = {"probe": {"runtime": 40, "threads": 4}, "probe_trained": {"threads": 5}}
    _validated(cfg)
    other = {"threads": 1, "mem_mb": 1000, "runtime": 10, "gpu": 0}
    assert job_resources(cfg, "tokenize") == other
    assert job_resources(cfg, "probe") == {**other, "mem_mb": 2000, "runtime": 20, "threads": 2}
    assert job_resources(cfg, "probe", task) == {**other, "mem_mb": 2000, "runtime": 40, "threads": 4}
    assert job_resources(cfg, "probe_trained") == {**other, "mem_mb": 3000, "runtime": 20, "threads": 3}
    assert job_resources(cfg, "probe_trained", task) == {**other, "mem_mb": 3000, "runtime": 40, "threads": 5}
    assert job_resources(cfg, "learn_lambda", task) == {**other, "runtime": 90}  # not the probe's

    # a misspelt rule, or a rule without a task wildcard under a task, names itself
    misspelt = _config()
    misspelt["resources"] = {"probe_traind": {"mem_mb": 1000}}
    under_task = _config()
    under_task["tasks"][task]["resources"] = {"mlm": {"mem_mb": 1000}}
    for bad, key in ((misspelt, "probe_traind"), (under_task, "mlm")):
        with pytest.raises(Exception, match=key):
            _validated(bad)


def test_a_retry_asks_for_more_up_to_the_limits_and_a_request_at_a_limit_is_allowed():
    """`papa.checks.retry_request`: attempt x the first request, capped at ``resources.limits`` (a retry above a
    partition's time limit pends forever), unlimited without one; a first request equal to a limit is valid,
    one above it a config error."""
    from papa.checks import retry_request

    limited = {"resources": {"limits": {"runtime": 24, "mem_mb": None}}}
    assert [retry_request(limited, "runtime", 10, a) for a in (1, 2, 3)] == [10, 20, 24]
    assert retry_request(limited, "mem_mb", 1000, 3) == 3000 and retry_request({"resources": {}}, "runtime", 7, 2) == 14
    assert retry_request(limited, "runtime", 30, 2) == 30  # never below the first request (mutation review)
    from papa.checks import validate_config

    at_limit = _config()
    at_limit["resources"] = {"default": {"runtime": 30}, "limits": {"runtime": 30}}
    validate_config(at_limit)
    above = _config()
    above["resources"] = {"default": {"runtime": 31}, "limits": {"runtime": 30}}
    with pytest.raises(Exception, match=r"resources.default.runtime = 31 exceeds resources.limits.runtime = 30"):
        validate_config(above)


def test_the_analysed_tasks_of_a_model():
    """`papa.checks.analysed_tasks`, what the Sec. 5 analyses (patterns among them) run on: analyses.tasks (null
    or absent = every task, [] = none), in its order, among the tasks the model runs (model_tasks)."""
    from papa.checks import analysed_tasks

    cfg = {"tasks": {"a": {}, "b": {}, "c": {}}, "models": {"m": "x", "n": "y", "mlm_only": "z"},
           "model_tasks": {"n": ["c", "a"], "mlm_only": []}}  # fmt: skip
    assert analysed_tasks(cfg, "m") == ["a", "b", "c"] and analysed_tasks(cfg, "n") == ["c", "a"]
    cfg["analyses"] = {"tasks": None}
    assert analysed_tasks(cfg, "m") == ["a", "b", "c"] and analysed_tasks(cfg, "mlm_only") == []
    cfg["analyses"] = {"tasks": ["c", "b"]}
    assert analysed_tasks(cfg, "m") == ["c", "b"] and analysed_tasks(cfg, "n") == ["c"]
    cfg["analyses"] = {"tasks": []}
    assert [analysed_tasks(cfg, m) for m in cfg["models"]] == [[], [], []]
    # analyses.models (null or absent = every model, [] = none): the paper's Sec. 5 runs on RoBERTa-base only
    cfg["analyses"] = {"tasks": None, "models": ["n"]}
    assert [analysed_tasks(cfg, m) for m in cfg["models"]] == [[], ["c", "a"], []]
    cfg["analyses"] = {"tasks": ["b", "a"], "models": ["m", "n"]}
    assert [analysed_tasks(cfg, m) for m in cfg["models"]] == [["b", "a"], ["a"], []]
    cfg["analyses"] = {"tasks": None, "models": []}
    assert [analysed_tasks(cfg, m) for m in cfg["models"]] == [[], [], []]


def test_library_defaults_equal_the_schema_defaults(schema):
    """Stage configs and notebook aliases may carry defaults only where they equal the schema's."""
    from papa import pipeline, rehearsal
    from papa.probe import PAPER_HPARAMS

    p = schema["properties"]
    props = lambda block: block.get("then", block)["properties"]  # noqa: E731  (if/then blocks)
    default = lambda block, key: props(block)[key]["default"]  # noqa: E731

    averaging = p["averaging"]
    assert pipeline.AverageStage.batch_size == default(averaging, "batch_size")
    assert pipeline.ModelStage.precision == p["precision"]["default"] == "fp32"  # full float32, the paper's
    assert pipeline.LambdaStage.compile == pipeline.ProbeStage.compile == p["compile"]["default"] == "eager"
    assert inspect.signature(pipeline.make_constants).parameters["batch_size"].default == default(
        averaging, "batch_size"
    )
    cache = pipeline.CacheConfig()
    for key in props(p["cache"]):
        assert getattr(cache, key) == default(p["cache"], key), key
    mlm = p["analyses"]["properties"]["mlm"]
    for key, value in pipeline.MLM_DEFAULTS.items():
        assert default(mlm, key) == value, key
    assert default(mlm, "max_length") == PAPER_HPARAMS["mlm"]["max_length"]
    build_data = p["build_data"]["additionalProperties"]["properties"]
    build_data_sig = inspect.signature(rehearsal.build_data).parameters
    for key in ("n_train", "n_validation"):
        assert build_data_sig[key].default == build_data[key]["default"], key
    build_model = p["models"]["additionalProperties"]["then"]["properties"]["build"]["properties"]
    assert (
        inspect.signature(rehearsal.build_model).parameters["vocab_size"].default
        == build_model["vocab_size"]["default"]
    )


def test_the_analyses_functions_defaults_equal_the_schemas(schema):
    """The notebook functions of the Sec. 5 analyses (papa.patterns, papa.plots.representative_heads, papa.mlm) take
    the schema's ``analyses.patterns`` and ``analyses.mlm`` defaults where a caller leaves a setting out (issue 15:
    a default written again is held equal to the schema's), and the MLM options the schema gives no default
    (``masking``, ``backbone_dropout``) the value `papa.checks.mlm_param` leaves out of rule mlm's param."""
    from papa import mlm, patterns, plots
    from papa.checks import MLM_OPTION_DEFAULTS
    from papa.pipeline import MLM_DEFAULTS

    analyses = schema["properties"]["analyses"]["properties"]
    defaults = {key: block["default"] for key, block in analyses["patterns"]["then"]["properties"].items()}
    functions = (patterns.head_patterns, patterns.classify, plots.representative_heads)
    given = [(f, key) for f in functions for key in inspect.signature(f).parameters if key in defaults]
    assert {key for _, key in given} == set(defaults)
    for f, key in given:
        assert inspect.signature(f).parameters[key].default == defaults[key], (f.__name__, key)
    defaults = {**MLM_DEFAULTS, **MLM_OPTION_DEFAULTS}
    functions = [f for _, f in inspect.getmembers(mlm, inspect.isfunction) if f.__module__ == mlm.__name__]
    given = [(f, key) for f in functions for key in ("mask_prob", "head", "decoder", "masking", "backbone_dropout")
             if key in inspect.signature(f).parameters]  # fmt: skip
    assert {key for _, key in given} == {"mask_prob", "head", "decoder", "masking", "backbone_dropout"}
    for f, key in given:
        param = inspect.signature(f).parameters[key]
        assert param.default is inspect.Parameter.empty or param.default == defaults[key], (f.__name__, key)


# ----------------------------------------------------------------------------- the deprecated sweep.fractions


def test_deprecated_fractions_key_is_renamed_with_a_warning():
    from papa.checks import DeprecatedConfigKey, migrate_config

    cfg = _config()
    cfg["sweep"]["fractions"] = cfg["sweep"].pop("fraction_dynamic")
    _validated(cfg)  # the schema still accepts the old name
    with pytest.warns(DeprecatedConfigKey, match="sweep.fractions is deprecated: rename it sweep.fraction_dynamic"):
        migrate_config(cfg)
    assert cfg["sweep"]["fraction_dynamic"] == [1, 0.5, 0] and "fractions" not in cfg["sweep"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        migrate_config(cfg)  # nothing deprecated left: no warning
    cfg["sweep"]["fractions"] = cfg["sweep"].pop("fraction_dynamic")
    messages = []
    migrate_config(cfg, messages.append)  # the workflow's channel: Snakemake's logger
    assert messages == ["config key sweep.fractions is deprecated: rename it sweep.fraction_dynamic"]
    assert cfg["sweep"]["fraction_dynamic"] == [1, 0.5, 0]


def test_giving_both_names_of_fraction_dynamic_fails():
    from papa.checks import ConfigError, migrate_config

    cfg = _config()
    cfg["sweep"]["fractions"] = [1, 0]
    with pytest.raises(ConfigError, match="sweep.fractions is the old name of sweep.fraction_dynamic"):
        migrate_config(cfg)


@pytest.mark.parametrize("name", ["config", "smoke", "paper", "rehearsal", "models"])
def test_shipped_configs_use_the_current_names(name):
    cfg = _config(name)
    assert "fraction_dynamic" in cfg["sweep"] and "fractions" not in cfg["sweep"]
    _validated(cfg)
    for c in cfg["sweep"]["constants"] + cfg.get("analyses", {}).get("constant_kinds", []):
        ConstantsSpec.parse(c)


def test_check_config_catches_cross_references():
    from papa.checks import ConfigError, check_config

    cfg = _validated(_config())
    cfg["sweep"]["constants"] = ["average@nowhere", "uniform@wiki", "toeplitz_trained@wiki"]
    cfg["tasks"]["rt_sentiment"]["dataset"] = "sst9"
    cfg["analyses"]["tasks"] = ["nope"]
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    msg = str(e.value)
    assert "sweep.constants entry 'average@nowhere' names a corpus that is not a key of 'datasets'" in msg
    # uniform@wiki would be uniform's matrices under a second label (and tokenize wiki for nothing)
    assert "sweep.constants entry 'uniform@wiki': 'uniform' matrices need no data" in msg and "write 'uniform'" in msg
    assert "write 'toeplitz_trained'" in msg
    assert "tasks.rt_sentiment.dataset = 'sst9' is not a key of 'datasets'" in msg
    assert "analyses.tasks entry 'nope' is not a key of 'tasks'" in msg


def test_schema_defaults_of_the_sweep_are_the_papers_method(schema):
    sweep = schema["properties"]["sweep"]["properties"]
    assert sweep["constants"]["default"] == [spec.METHOD_CONSTANTS]
    assert sweep["selections"]["default"] == [spec.METHOD_ORDER]
    assert (
        spec.METHOD_ORDER in spec.LAMBDA_ORDERS and ConstantsSpec.parse(spec.METHOD_CONSTANTS).kind in spec.DATA_KINDS
    )


# ----------------------------------------------------------------------------- validate_config: the workflow's config


def test_validate_config_renames_fills_defaults_and_checks(schema):
    from papa.checks import SCHEMA as CHECKS_SCHEMA
    from papa.checks import ConfigError, load_config, validate_config

    assert CHECKS_SCHEMA == SCHEMA  # the library validates with the workflow's schema
    cfg = _config()
    cfg["sweep"]["fractions"] = cfg["sweep"].pop("fraction_dynamic")
    cfg.pop("cache", None), cfg.pop("averaging", None)
    first = next(iter(cfg["tasks"]))
    cfg["tasks"][first].pop("main_metric", None)
    messages = []
    assert validate_config(cfg, messages.append) is cfg
    assert messages == ["config key sweep.fractions is deprecated: rename it sweep.fraction_dynamic"]
    assert cfg["sweep"]["fraction_dynamic"] == [1, 0.5, 0] and "fractions" not in cfg["sweep"]
    props = schema["properties"]
    assert cfg["cache"] == {k: v["default"] for k, v in props["cache"]["properties"].items()}
    assert cfg["averaging"] == {k: v["default"] for k, v in props["averaging"]["properties"].items()}
    assert cfg["tasks"][first]["main_metric"] == cfg["tasks"][first]["metrics"][0]  # the derived default
    assert load_config(ROOT / "config/smoke.yaml")["cache"] == _validated(_config())["cache"]

    bad = _config()
    bad["tasks"][first]["main_metric"] = "bleu"
    with pytest.raises(ConfigError, match=f"tasks.{first}.main_metric = 'bleu' is not one of tasks.{first}.metrics"):
        validate_config(bad)
    bad = _config()
    bad["tasks"][first]["probe"]["seed"] = 3  # accepted by the shared hparams schema, read by no probe
    with pytest.raises(ConfigError, match=f"tasks.{first}.probe.seed is not used: the probes' seeds are sweep.seeds"):
        validate_config(bad)
    bad = _config()
    bad["sweep"]["fraction"] = [1, 0]  # a typo of a key: the schema names it
    with pytest.raises(Exception, match="fraction"):
        validate_config(bad)


def test_validate_config_fills_the_derived_defaults_once():
    import copy

    from papa.checks import validate_config

    cfg = _config("rehearsal")
    cfg["seed"] = 7
    tasks = list(cfg["tasks"])
    own, inherits = tasks[0], tasks[1]
    cfg["tasks"][own]["lambda"] = {**cfg["tasks"][own]["probe"], "lr": 0.25, "seed": 3}
    cfg["tasks"][inherits].pop("lambda", None)
    cfg["analyses"]["mlm"].pop("seed", None)
    built = [m for m, e in cfg["models"].items() if isinstance(e, dict)]
    assert built and cfg["build_data"]
    for block in [cfg["models"][m]["build"] for m in built] + list(cfg["build_data"].values()):
        block.pop("seed", None)
    probe = copy.deepcopy(cfg["tasks"][inherits]["probe"])
    validate_config(cfg)
    # the lambda stage's hparams: the probe's, overridden key by key; seed the top-level one unless given
    assert cfg["tasks"][inherits]["lambda"] == {**probe, "seed": 7}
    assert cfg["tasks"][own]["lambda"]["lr"] == 0.25 and cfg["tasks"][own]["lambda"]["seed"] == 3
    assert cfg["analyses"]["mlm"]["seed"] == 7
    assert all(cfg["models"][m]["build"]["seed"] == 7 for m in built)
    assert all(block["seed"] == 7 for block in cfg["build_data"].values())
    # a seed a block gives is its own: the top-level seed fills in only where one is left out
    given = _config("rehearsal")
    given["seed"] = 7

    def blocks(c):
        return [c["analyses"]["mlm"], *(c["models"][m]["build"] for m in built), *c["build_data"].values()]

    for i, block in enumerate(blocks(given)):
        block["seed"] = 11 + i
    validate_config(given)
    assert [b["seed"] for b in blocks(given)] == [11 + i for i in range(len(blocks(given)))]
    # a filled config validates (tasks.<t>.lambda is a complete hparams block) and fills to itself
    again = copy.deepcopy(cfg)
    assert validate_config(again) == cfg


def test_validate_config_makes_integer_valued_floats_of_integer_keys_ints():
    """JSON Schema's integer accepts 32.0, which then reached paths as N32.0 and seed1.0: every integer key of the
    schema (in a list, under additionalProperties, behind a $ref, under if/then) comes out an int."""
    from papa.checks import validate_config

    cfg = _config()
    cfg["tasks"]["rt_sentiment"]["max_length"] = 32.0
    cfg["tasks"]["rt_sentiment"]["probe"].update(batch_size=16.0, epochs=2.0, lr=1.0)  # lr is a number: kept
    cfg["sweep"].update(seeds=[0, 1.0], fraction_dynamic=[1.0, 0.5, 0])  # fractions are numbers: kept
    cfg["seed"] = 3.0
    cfg["analyses"].update(patterns={"band": 2.0}, mlm={"models": ["minilm"], "dataset": "rt_sentiment",
                                                        "max_length": 32.0, "max_train": 10.0})  # fmt: skip
    cfg["resources"]["probe"] = {"threads": 2.0}
    cfg["build_data"] = {"glue_sst2": {"shape": "sst2", "n_train": 8.0}}
    validate_config(cfg)
    task, mlm = cfg["tasks"]["rt_sentiment"], cfg["analyses"]["mlm"]
    ints = [task["max_length"], task["probe"]["batch_size"], task["probe"]["epochs"], task["lambda"]["seed"],
            *cfg["sweep"]["seeds"], cfg["seed"], cfg["analyses"]["patterns"]["band"], mlm["max_length"],
            mlm["max_train"], cfg["resources"]["probe"]["threads"],
            cfg["build_data"]["glue_sst2"]["n_train"]]  # fmt: skip
    assert all(type(v) is int for v in ints), ints
    assert f"N{task['max_length']}" == "N32" and f"seed{cfg['sweep']['seeds'][1]}" == "seed1"
    assert type(task["probe"]["lr"]) is float and cfg["sweep"]["fraction_dynamic"][0] == 1.0
    assert type(cfg["sweep"]["fraction_dynamic"][0]) is float
    # a built model's seed sits under if/then in additionalProperties
    built = _config("rehearsal")
    built["models"]["roberta"]["build"].update(seed=5.0, vocab_size=500.0)
    validate_config(built)
    assert [type(v) for v in built["models"]["roberta"]["build"].values() if isinstance(v, (int, float))] == [int, int]
    # generic: $ref and items; a value that is no integer-valued float is left as it is
    from papa.checks import integers_as_int

    schema = {"definitions": {"n": {"type": ["integer", "null"]}},
              "type": "array", "items": {"$ref": "#/definitions/n"}}  # fmt: skip
    assert [type(v) for v in integers_as_int([1.0, None, 2], schema)] == [int, type(None), int]
    # every branch: an integer in anyOf's second subschema, under else as well as then (mutation review of
    # papa/checks.py: a walk of the first branch, or of then only, passed every test)
    assert type(integers_as_int(3.0, {"anyOf": [{"type": "string"}, {"type": "integer"}]})) is int
    schema = {"if": {"required": ["x"]}, "then": {"properties": {"a": {"type": "integer"}}},
              "else": {"properties": {"b": {"type": "integer"}}}}  # fmt: skip
    assert [type(v) for v in integers_as_int({"a": 2.0, "b": 4.0, "c": 5.0}, schema).values()] == [int, int, float]
    assert type(integers_as_int(2.5, {"type": "integer"})) is float  # (not an integer-valued float: the schema's)


def test_a_partial_lambda_block_takes_the_probes_other_keys():
    """tasks.<t>.lambda may leave out any key (the docs say: those are the probe's); the schema used to require lr,
    batch_size and epochs there as in the probe block, which still requires them. extra_lr must be positive."""
    from papa.checks import ConfigError, validate_config

    cfg = _config()
    task = cfg["tasks"]["rt_sentiment"]
    task["lambda"] = {"extra_lr": 0.05}
    _validated(copy_of(cfg))  # Snakemake's validate, as the workflow calls it
    probe = dict(task["probe"])
    validate_config(cfg)
    assert cfg["tasks"]["rt_sentiment"]["lambda"] == {**probe, "extra_lr": 0.05, "seed": 0}  # complete
    cfg = _config()
    cfg["tasks"]["rt_sentiment"]["lambda"] = {"epochs": 1, "extra_lr": None}  # null: the lambdas take lr
    validate_config(cfg)
    for edit, says in (
        # the probe block still needs its keys
        (lambda t: t["probe"].pop("lr"), "'tasks.rt_sentiment.probe' lacks the key 'lr'"),
        (lambda t: t["lambda"].update(extra_lr=0), "0 is less than or equal to the minimum of 0"),
        (lambda t: t["lambda"].update(extra_lr=-0.1), "-0.1 is less than or equal to the minimum of 0"),
        # still no unknown key (papa.checks.unknown_keys, before Snakemake's validation)
        (lambda t: t["lambda"].update(lrr=1.0), "'tasks.rt_sentiment.lambda.lrr' is not known: did you mean 'lr'"),
    ):
        cfg = _config()
        edit(cfg["tasks"]["rt_sentiment"])
        with pytest.raises(ConfigError, match=says):
            validate_config(cfg)


def copy_of(cfg):
    import copy

    return copy.deepcopy(cfg)


def test_a_spec_on_its_tasks_own_corpus_is_the_tasks_own_matrices():
    assert ConstantsSpec.parse("average@mnli").on_task("mnli") == ConstantsSpec("average")
    assert str(ConstantsSpec.parse("average_trained@mnli").on_task("mnli")) == "average_trained"
    assert str(ConstantsSpec.parse("average@wiki").on_task("mnli")) == "average@wiki"
    assert str(ConstantsSpec.parse("average").on_task("mnli")) == "average"


def test_the_authors_overlay_sets_their_behaviour_on_every_task_of_the_paper_grid_and_nothing_else():
    """config/paper-authors.yaml over config/paper.yaml (merged as Snakemake merges two --configfile files): every
    option of README "Differences from the authors' code" that changes numbers, at the authors' value, on every
    task the paper's grid runs (a task added to paper.yaml and not here would run the paper's way unnoticed), in a
    results folder of its own, validated without a warning; the grid's models, tasks, datasets and sweep unchanged."""
    import copy

    from snakemake.utils import update_config

    from papa.checks import validate_config
    from papa.records import results_folder

    paper, overlay = _config("paper"), _config("paper-authors")
    merged = copy.deepcopy(paper)
    update_config(merged, overlay)
    said = []
    cfg = validate_config(merged, said.append)
    assert said == [], said
    assert set(overlay["tasks"]) == set(paper["tasks"])
    assert set(overlay) <= {"overlay_of", "results", "encoding", "cache", "tasks"}
    for key in ("models", "model_tasks", "datasets", "sweep", "analyses", "resources"):
        assert cfg[key] == validate_config(copy.deepcopy(paper))[key], key
    assert (
        cfg["encoding"] == {"single_cap": "authors", "pair_segments": "authors"} and cfg["cache"]["dtype"] == "float32"
    )
    for name, task in cfg["tasks"].items():
        token = _task_kind(cfg, name) == "token"
        for block in ("probe", "lambda"):  # the lambda stage inherits the probe's
            hp = task[block]
            assert hp["backbone_dropout"] is True and hp["max_grad_norm"] == 1.0, (name, block)
            assert hp.get("dropout") == (None if token else "authors"), (name, block)  # a token probe has none
        assert {k: v for k, v in task["probe"].items() if k not in overlay["tasks"][name]["probe"]} == {
            k: v for k, v in paper["tasks"][name]["probe"].items()
        }  # Table 3's settings kept
    # the authors' single-sentence cap is their GLUE preprocessing: the MLM corpus keeps the paper's (it cut WikiText
    # paragraphs to N/2 and moved every Fig. 6a number: review AS's AS-1)
    from papa.checks import encoding_options

    assert encoding_options(cfg, "wikitext103") == {"single_cap": "paper"}
    assert encoding_options(cfg, "sst2") == {"single_cap": "authors"}
    assert encoding_options(cfg, "mnli") == {"pair_segments": "authors"}
    folders = [str(ROOT / "config/paper.yaml"), str(ROOT / "config/paper-authors.yaml")]
    assert results_folder(folders) == "results-paper-authors" != results_folder(folders[:1])


def test_an_overlay_given_before_the_config_it_updates_or_without_it_is_refused(tmp_path, monkeypatch):
    """config/paper-authors.yaml given before config/paper.yaml took paper.yaml's results folder (its finished
    results rerun with the authors' settings), and given alone the default grid: its ``overlay_of`` makes
    `results_folder` (make run, report, clean) and the workflow's `check_config_files` refuse both orders, naming the
    order to give; in order, or with another file between, it passes; ``overlay_of`` may be a path from the
    overlay's own folder."""
    from papa.checks import ConfigError, check_config_files
    from papa.records import results_folder

    paper, authors = "config/paper.yaml", "config/paper-authors.yaml"
    monkeypatch.chdir(ROOT)
    assert results_folder([paper, authors]) == "results-paper-authors"
    assert results_folder([paper, "config/config.yaml", authors]) == "results-paper-authors"
    check_config_files([str(ROOT / paper), str(ROOT / authors)])  # Snakemake's configfiles are absolute
    for order, why in (([authors, paper], "is given after it"), ([authors], "is not given"),
                       (["config/config.yaml", authors], "is not given"),
                       ([paper, authors, paper], "is given after it")):  # the last copy wins (review AX)  # fmt: skip
        with pytest.raises(ValueError, match=f"{authors} updates {paper} \\(its overlay_of\\), and {paper} {why}"):
            results_folder(order)
        with pytest.raises(ConfigError, match=f"give it after {paper} \\(--configfile {paper} .*{authors}\\)"):
            check_config_files([str(ROOT / p) for p in order])
    # a path from the overlay's folder, from another working directory
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg/base.yaml").write_text("results: results-base\n")
    (tmp_path / "cfg/over.yaml").write_text("overlay_of: base.yaml\nresults: results-over\n")
    monkeypatch.chdir(tmp_path)
    assert results_folder(["cfg/base.yaml", "cfg/over.yaml"]) == "results-over"
    with pytest.raises(ValueError, match="cfg/over.yaml updates base.yaml"):
        results_folder(["cfg/over.yaml", "cfg/base.yaml"])


def _task_kind(cfg, task):
    """A task's kind (sequence or token), as the config check reads it."""
    from papa.checks import dataset_kind

    dataset = cfg["tasks"][task]["dataset"]
    return dataset_kind(dataset, cfg["datasets"][dataset])


def test_the_readme_lists_the_authors_overlays_options_as_the_file_sets_them():
    """README "Differences from the authors' code" names config/paper-authors.yaml's options (`key: value`), and
    each has its item below: an option added to the file and not the README, or the README's list and not the
    file, fails here (review AS's AS-6). Keys of a task's probe block are named once, for every task; ``results``,
    ``overlay_of`` and ``cache.budget_mb`` are the file's own (its folder, its order, a cache size)."""
    import re

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Differences from the authors' code") :]
    section = section[: section.index("\n### ")]
    intro, items = section.split("\n* **", 1)
    listed = intro[intro.index("`config/paper-authors.yaml` sets every such option") : intro.index("into a results")]
    named = set(re.findall(r"`([a-z_.]+: [^`]+)`", listed))

    def leaves(node, path=()):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from leaves(value, (*path, key))
            else:
                yield (*path, key), value

    overlay = _config("paper-authors")
    wanted = set()
    for path, value in leaves(overlay):
        if path in (("results",), ("overlay_of",), ("cache", "budget_mb")):
            continue
        value = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
        key = path[-1] if path[0] == "tasks" else ".".join(path)  # tasks.<t>.probe.<key>: one name for every task
        wanted.add(f"{key}: {value}")
    assert named == wanted, (sorted(named - wanted), sorted(wanted - named))
    for option in named:
        assert f"`{option}`" in items or f"`{option.split('.', 1)[-1]}`" in items, option


def test_the_constant_kinds_table_rows_are_the_method_then_the_other_kinds_then_its_cross_corpus_variants():
    """The rows of constant_kinds.parquet (paper Tables 1-2; common.smk's constant_kinds_rows): average first, then
    the other analyses.constant_kinds in their order (average itself, however written, not again), then
    average@<corpus> for each analyses.cross_corpus dataset."""
    from papa.spec import constant_kinds_rows

    assert constant_kinds_rows([], []) == ["average"]
    assert constant_kinds_rows(["identity", "average", "toeplitz_trained"], ["wiki", "mnli"]) == [
        "average", "identity", "toeplitz_trained", "average@wiki", "average@mnli"
    ]  # fmt: skip
    assert constant_kinds_rows(["identity", "average"], []) == constant_kinds_rows(["average", "identity"], [])


def test_n_dynamic_lifts_float_noise_only_and_scales_it_with_the_product():
    """The lift onto a half is float noise, relative to the product: a float32 fraction times many heads is off by
    more than 1e-6 in absolute terms (0.7 x 1005 = 703.49998802: 704 heads), while a product 5e-4 below a half is
    a real fraction that rounds down (7.4995 -> 7, 0.49995 -> 0)."""
    import numpy as np

    assert spec.n_dynamic(np.float32(0.7), 1005) == 704
    assert spec.n_dynamic(7.4995 / 12, 12) == 7 and spec.n_dynamic(0.49995, 1) == 0
    assert spec.n_dynamic(0.5 / 72, 72) == 1 and spec.n_dynamic(0.4999 / 72, 72) == 0


def test_a_config_datasets_name_is_read_in_one_place():
    """A config's dataset names its `papa.data` task by its ``name``, else its key (the schema's
    ``datasets.<d>.name``): one function, `papa.checks.dataset_name`, where the config checks wrote
    ``spec.get("name", key)`` six times and papa.cost ``.get("name") or key`` (issue 15: each concept defined once).
    No other ``.get("name", ...)`` or ``.get("name") or ...`` reads one in the config's readers."""
    import ast

    from papa.checks import dataset_name

    assert dataset_name("glue_rte", {"source": "hub", "name": "rte"}) == "rte"
    assert dataset_name("rte", {"source": "hub"}) == "rte"

    def name_read(node) -> bool:
        def get_name(n):
            return (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
                    and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value == "name")  # fmt: skip

        if get_name(node) and len(node.args) == 2:
            return True
        return isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and get_name(node.values[0])

    root = Path(__file__).resolve().parents[1] / "papa"
    found = []
    for path in (root / "checks.py", root / "cost.py", root / "pin.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name != "dataset_name":
                found += [f"{path.name}:{fn.name}" for n in ast.walk(fn) if name_read(n)]
    assert sorted(set(found)) == []


def test_the_helpers_refuse_what_the_config_check_would_have_caught_elsewhere():
    """Cases mutation testing found unchecked (review DI): a corpus that is no dataset name given to the
    constructor (not through `ConstantsSpec.parse`), a bool (numpy's too) as fraction_dynamic, no heads or a bool
    as the number of heads, the text of no number, a fraction outside [0, 1] or NaN (to `n_dynamic` too), and a file
    of a probe seed's name with another suffix."""
    for corpus in ("a/b", "", "wiki news"):
        with pytest.raises(ValueError, match="is not a dataset name"):
            ConstantsSpec("average", corpus=corpus)
    assert ConstantsSpec("average", corpus="wiki-2.v1").corpus == "wiki-2.v1"
    for flag in (True, False, np.True_, np.False_):
        with pytest.raises(TypeError, match="fraction_dynamic must be a number in"):
            spec.check_fraction(flag)
    assert spec.check_fraction(np.float64(0.5)) == 0.5 and spec.check_fraction(np.int64(1)) == 1.0
    for text in ("half", "", "0.5.1"):  # the text of no number: named as fraction_dynamic, not float()'s message
        with pytest.raises(ValueError, match=rf"^fraction_dynamic must be a number in \[0, 1\], got '{text}'$"):
            spec.check_fraction(text)
    for total in (0, True, 4.0):
        with pytest.raises(ValueError, match="total must be the number of heads"):
            spec.n_dynamic(0.5, total)
    assert spec.n_dynamic(0.5, 1) == 1 and spec.n_dynamic(1, np.int64(12)) == 12
    for fraction in (1.5, -0.5, float("nan")):  # NaN lies nowhere: no comparison of it holds, each check refuses it
        with pytest.raises(ValueError, match=r"fraction_dynamic must be in \[0, 1\]"):
            spec.check_fraction(fraction)
        with pytest.raises(ValueError, match=r"fraction_dynamic must be in \[0, 1\]"):
            spec.n_dynamic(fraction, 12)  # not 18 of 12 heads
    assert spec.seed_of_file("results/probe/x/seed12.parquet") == 12
    for name in ("seed3.tsv", "seed3.parquet.tmp", "seed3.log"):
        with pytest.raises(ValueError, match="not a probe seed's file"):
            spec.seed_of_file(f"results/probe/x/{name}")
