# Helpers shared by the rules: config lookups, path builders, cross-checks of the config.
import os
import re
import sys

R = config.get("results", "results")
CONDA_ENV = "../../environment.yml"
SEED = int(config.get("seed", 0))
LAYOUT = config.get("layout", "papa")
SWEEP = config["sweep"]
CONSTANTS = SWEEP.get("constants", ["average"])
SELECTIONS = SWEEP.get("selections", ["lambda"])
CACHE = config.get("cache", {})
AVERAGING = config.get("averaging", {})
ANALYSES = config.get("analyses", {})
DATA_FREE = ("identity", "toeplitz", "zeros", "uniform")
BUILD_DATA = config.get("build_data") or {}  # local files the workflow builds (rule build_data)
BUILT_MODELS = {m: spec["build"] for m, spec in config["models"].items() if isinstance(spec, dict)}  # rule build_model

sys.path.insert(0, workflow.basedir)  # papa from this checkout
from papa.checks import check_config

check_config(config)  # what the schema cannot say: metric vs task kind, N vs positions, duplicates


def code(script):
    """Fingerprint of the papa code a workflow script reaches (papa.fingerprint): as a param, a change to
    that code reruns the rule; comments, docstrings, formatting and unreached code do not."""
    from papa.fingerprint import code_fingerprint

    return code_fingerprint(f"{workflow.basedir}/workflow/scripts/{script}")


def _fail(msg):
    raise ValueError(f"Invalid config: {msg}")


for _t, _tc in config["tasks"].items():
    if _tc["dataset"] not in config["datasets"]:
        _fail(f"tasks.{_t}.dataset = {_tc['dataset']!r} is not a key of 'datasets' ({', '.join(config['datasets'])})")
    if _tc.get("main_metric", _tc["metrics"][0]) not in _tc["metrics"]:
        _fail(f"tasks.{_t}.main_metric = {_tc['main_metric']!r} is not one of tasks.{_t}.metrics")
for _t in ANALYSES.get("tasks") or []:
    if _t not in config["tasks"]:
        _fail(f"analyses.tasks entry {_t!r} is not a key of 'tasks'")
for _c in ANALYSES.get("cross_corpus", []):
    if _c not in config["datasets"]:
        _fail(f"analyses.cross_corpus entry {_c!r} is not a key of 'datasets'")
MLM = ANALYSES.get("mlm") or {}
for _m in MLM.get("models", []):
    if _m not in config["models"]:
        _fail(f"analyses.mlm.models entry {_m!r} is not a key of 'models'")
if MLM and MLM.get("dataset", "wiki") not in config["datasets"]:
    _fail(f"analyses.mlm.dataset = {MLM.get('dataset', 'wiki')!r} is not a key of 'datasets'")
MODEL_TASKS = config.get("model_tasks") or {}  # models that run only some tasks ([] = analyses.mlm only)
for _m, _ts in MODEL_TASKS.items():
    if _m not in config["models"]:
        _fail(f"model_tasks entry {_m!r} is not a key of 'models'")
    for _t in _ts:
        if _t not in config["tasks"]:
            _fail(f"model_tasks.{_m} entry {_t!r} is not a key of 'tasks'")
for _c in CONSTANTS:
    if "@" in _c and _c.split("@", 1)[1] not in config["datasets"]:
        _fail(f"sweep.constants entry {_c!r} names a corpus that is not a key of 'datasets'")
for _d, _dc in config["datasets"].items():
    if "build" in _dc and _dc["build"] not in BUILD_DATA:
        _fail(f"datasets.{_d}.build = {_dc['build']!r} is not a key of 'build_data' ({', '.join(BUILD_DATA)})")
    if "build" in _dc and (_dc["source"] != "local" or {"train", "validation", "test"} & set(_dc)):
        _fail(f"datasets.{_d}: a built dataset is source: local without train/validation/test (the workflow "
              f"fills in the paths of the files it builds)")


def one_of(keys):
    """Wildcard pattern matching exactly these keys (nothing when there are none)."""
    return "|".join(re.escape(k) for k in keys) or "(?!)"


def built_data_dir(key):
    """Folder of the files rule build_data writes for build_data.<key>."""
    return f"{R}/built/data/{key}"


def canon(obj):
    """Dicts with sorted keys, recursively: params then compare equal however the config orders its keys."""
    if isinstance(obj, dict):
        return {k: canon(obj[k]) for k in sorted(obj)}
    if isinstance(obj, (list, tuple)):
        return [canon(v) for v in obj]
    return obj


def frac(f):
    """Fraction as it appears in paths: 1, 0.5, 0.125, 0.0625, 0."""
    return f"{float(f):g}"


def res(rule_name):
    """Resources of a rule: config resources.<rule> over resources.default."""
    r = dict(threads=1, mem_mb=2000, runtime=30, gpu=0)
    r.update(config.get("resources", {}).get("default", {}))
    r.update(config.get("resources", {}).get(rule_name, {}))
    return r


def model_path(model):
    """Where a model loads from: its config string (hub id, folder, alias), or for a model the
    workflow builds (``{build: ...}``, rule build_model) the folder that rule writes."""
    spec = config["models"][model]
    return f"{R}/built/models/{model}" if isinstance(spec, dict) else spec


def model_input(model):
    """The model's folder as a job input when it has one (built by the workflow, or a local folder):
    a rebuilt or replaced model then reruns the jobs that load it. Hub ids and aliases: none."""
    path = model_path(model)
    return [path] if isinstance(config["models"][model], dict) or os.path.isdir(os.path.expanduser(path)) else []


def dataset_spec(dataset):
    """The papa.data spec of a dataset: its config entry, named; a dataset built by the workflow
    (``build: <key of build_data>``, rule build_data) gets the paths of the files that rule writes."""
    spec = {"name": dataset, **config["datasets"][dataset]}
    key = spec.pop("build", None)
    if key:
        from papa.rehearsal import data_files

        spec.update({split: str(p) for split, p in data_files(BUILD_DATA[key]["shape"], built_data_dir(key)).items()})
    return canon(spec)


def dataset_input(dataset):
    """The local files a dataset reads (its folder when the workflow builds them), as prepare_data's
    input: editing a local file reruns prepare_data and everything downstream."""
    spec = config["datasets"][dataset]
    if spec.get("build"):
        return [built_data_dir(spec["build"])]
    if spec.get("source") != "local":
        return []
    return [spec[split] for split in ("train", "validation", "test") if spec.get(split)]


def task_cfg(task):
    return config["tasks"][task]


def lambda_hp(task):
    """Lambda-stage hyperparameters: tasks.<t>.lambda, defaulting to the probe's."""
    hp = dict(task_cfg(task)["probe"])
    hp.update(task_cfg(task).get("lambda", {}))
    hp.setdefault("seed", SEED)
    return canon(hp)


def split_constants(task, spec):
    """'average' -> ('average', task dataset); 'average@wiki' -> ('average', 'wiki')."""
    kind, _, corpus = spec.partition("@")
    return kind, corpus or task_cfg(task)["dataset"]


def tokens(model, dataset, n, split):
    return f"{R}/tokens/{model}/{dataset}/N{n}/{split}.parquet"


def constants_file(model, task, spec):
    kind, corpus = split_constants(task, spec)
    kind = kind.replace("_trained", "")
    return f"{R}/constants/{model}/{corpus}/N{task_cfg(task)['max_length']}/{kind}.safetensors"


def needs_lambdas(selection, fraction):
    return selection in ("lambda", "reversed") and 0.0 < float(fraction) < 1.0


def probe_outputs(model, task, spec, selection, fraction):
    return [f"{R}/probe/{model}/{task}/{spec}/{selection}/f{fraction}/seed{s}.parquet" for s in SWEEP["seeds"]]


def model_tasks(model):
    """The tasks ``model``'s probes run: model_tasks.<model>, default every task."""
    return MODEL_TASKS.get(model, list(config["tasks"]))


def runs():
    """Every probe run (model, task, constants, selection, fraction): the main sweep, then the
    analyses of paper Sec. 5 (constant kinds and cross-corpus matrices with all heads replaced,
    other head orders at every fraction), without duplicates; each model on its `model_tasks`."""
    out = []
    for m in config["models"]:
        for t in model_tasks(m):
            out += [(m, t, c, s, frac(f)) for c in CONSTANTS for s in SELECTIONS for f in SWEEP["fractions"]]
        for t in [t for t in ANALYSES.get("tasks") or config["tasks"] if t in model_tasks(m)]:
            out += [(m, t, k, "lambda", "0") for k in ANALYSES.get("constant_kinds", [])]
            out += [(m, t, f"average@{c}", "lambda", "0") for c in ANALYSES.get("cross_corpus", [])]
            out += [(m, t, "average", o, frac(f)) for o in ANALYSES.get("head_orders", []) for f in SWEEP["fractions"]
                    if 0 < float(f) < 1]
    return list(dict.fromkeys(out))


def all_probe_files():
    return [p for run in runs() for p in probe_outputs(*run)]


def all_lambda_files():
    need = dict.fromkeys((m, t, c) for m, t, c, s, f in runs() if needs_lambdas(s, f))
    return [f"{R}/lambda/{m}/{t}/{c}/lambdas.parquet" for m, t, c in need]


def pattern_files():
    """Matrix-pattern tables (paper Sec. 5.1) for every task's own averaging corpus."""
    if not ANALYSES.get("patterns"):
        return []
    return sorted({f"{R}/patterns/{m}/{task_cfg(t)['dataset']}/N{task_cfg(t)['max_length']}.parquet"
                   for m in config["models"] for t in model_tasks(m)})


def mlm_hp():
    """Settings of the MLM analysis that its results depend on (not which models run it)."""
    hp = {k: v for k, v in MLM.items() if k not in ("models", "dataset", "max_length")}
    hp.setdefault("seed", SEED)
    return canon(hp)


def mlm_files():
    if not MLM.get("models"):
        return []
    d, n = MLM.get("dataset", "wiki"), MLM.get("max_length", 128)
    return [f"{R}/mlm/{m}/{d}/N{n}/scores.parquet" for m in MLM["models"]]


wildcard_constraints:
    model=r"[A-Za-z0-9_.-]+",
    dataset=r"[A-Za-z0-9_.-]+",
    task=r"[A-Za-z0-9_.-]+",
    split=r"train|validation",
    n=r"\d+",
    fraction=r"[0-9.e-]+",
    constants=r"[a-z_]+(@[A-Za-z0-9_.-]+)?",
    kind=r"[a-z_]+",
    selection=r"[a-z_]+",
