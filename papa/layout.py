"""Where each file of a run lives in its results folder, written once: the templates the workflow's path builders
fill in (``workflow/rules/common.smk``, the rules' ``log:`` and ``benchmark:``), and `parse_result`, which reads a
path back into what it holds (`ResultPath`), for the code that finds results after the fact (`papa.cost` in
Snakemake's plan, ``benchmarks/compare_runs.py`` in a stopped run's logs, common.smk's ``of_this_config``).

A template's ``{fields}`` are the rules' wildcards: a builder given no value for a field writes the wildcard itself
(``"{model}"``), so the rules pass none for the parts they match. Values are written as given: ``fraction_dynamic``
as its path text (`papa.spec.format_fraction`), a constants spec as its text (``average_trained@wiki``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from . import spec

#: ``fraction_dynamic`` as a path segment (a probe run's folder, its log's name).
FRACTION_SEGMENT = "fraction_dynamic={fraction_dynamic}"

#: Each stage's result files (a built model or dataset: its folder), relative to the results folder.
RESULTS = {
    "built_data": "built/data/{source}",
    "built_model": "built/models/{model}",
    "data": "data/{dataset}/{name}",  # name: <split>.parquet
    "tokens": "tokens/{model}/{dataset}/N{n}/{split}.parquet",
    "constants": "constants/{model}/{dataset}/N{n}/{kind}.safetensors",
    "lambda": "lambda/{model}/{task}/{constants}/{name}",  # name: one of LAMBDA_FILES
    # one seed's file of a probe run (rule probe writes the run's seeds, rule probe_trained one of them)
    "probe": f"probe/{{model}}/{{task}}/{{constants}}/{{selection}}/{FRACTION_SEGMENT}/{spec.seed_file('{seed}')}",
    "patterns": "patterns/{model}/{dataset}/N{n}.parquet",
    "mlm": "mlm/{model}/{dataset}/N{n}/{name}",  # name: one of MLM_FILES
}

#: The files of one lambda run (rule learn_lambda, the ``name`` of a ``lambda`` path): the lambdas the lambda-ranked
#: head orders read, and the metrics of the probe that learned them.
LAMBDA_FILES = ("lambdas.parquet", "metrics.parquet")

#: The files of one masked-LM run (rule mlm, the ``name`` of an ``mlm`` path): the scores at each fraction, which the
#: MLM table reads, and the lambdas the run learned.
MLM_FILES = ("scores.parquet", "lambdas.parquet")

#: Each rule's job, as its log (``logs/<folder>/<job>.log``) and benchmark (``benchmarks/<folder>/<job>.tsv``)
#: name it: rule -> (stage of its results, folder, job). Rule probe's job (every seed of a run) logs to
#: ``logs/probe/.../fraction_dynamic=<f>.log``; rule probe_trained's jobs (one seed each) log under ``probe/`` too,
#: one file per seed in a ``fraction_dynamic=<f>/`` folder. The rules of one job per run (aggregate, plot,
#: mlm_table, prune: ``logs/<rule>.log``) are not here: their rules name their one log (`parse_result`: None).
JOBS = {
    "build_model": ("built_model", "build_model", "{model}"),
    "build_data": ("built_data", "build_data", "{source}"),
    "prepare_data": ("data", "prepare_data", "{dataset}/{split}"),
    "tokenize": ("tokens", "tokenize", "{model}/{dataset}/N{n}/{split}"),
    "average_attention": ("constants", "average_attention", "{model}/{dataset}/N{n}/{kind}"),
    "data_free_constants": ("constants", "data_free_constants", "{model}/{dataset}/N{n}/{kind}"),
    "learn_lambda": ("lambda", "learn_lambda", "{model}/{task}/{constants}"),
    "probe": ("probe", "probe", f"{{model}}/{{task}}/{{constants}}/{{selection}}/{FRACTION_SEGMENT}"),
    "probe_trained": (
        "probe",
        "probe",
        f"{{model}}/{{task}}/{{constants}}/{{selection}}/{FRACTION_SEGMENT}/seed{{seed}}",
    ),
    "patterns": ("patterns", "patterns", "{model}/{dataset}/N{n}"),
    "mlm": ("mlm", "mlm", "{model}/{dataset}/N{n}"),
}


def one_of(keys) -> str:
    """A regex matching exactly these keys (nothing when there are none): `FIELDS`' and the rules' wildcard
    constraints (workflow/rules/common.smk)."""
    return "|".join(re.escape(k) for k in keys) or "(?!)"


#: What each field of a template matches (common.smk's wildcard constraints are these; a rule narrows some).
FIELDS = {
    "model": spec.NAME_PATTERN,
    "dataset": spec.NAME_PATTERN,
    "task": spec.NAME_PATTERN,
    "source": spec.NAME_PATTERN,
    "constants": spec.CONSTANTS_PATTERN,
    "selection": one_of(spec.HEAD_ORDERS),
    "fraction_dynamic": spec.FRACTION_PATTERN,
    "seed": r"\d+",
    "n": r"\d+",
    "kind": one_of(spec.CONSTANT_KINDS),
    "split": one_of(spec.PREPARED_SPLITS),
    "name": r"[^/]+",
}


class _Wildcards(dict):
    """Template values: a field not given is written as the wildcard ``{field}``."""

    def __missing__(self, field):
        return "{" + field + "}"


def _fill(template: str, fields: dict) -> str:
    unknown = set(fields) - set(re.findall(r"{(\w+)}", template))
    if unknown:
        raise TypeError(f"{template}: no field {', '.join(sorted(unknown))}")
    return template.format_map(_Wildcards(fields))


def result_path(results, stage: str, **fields) -> str:
    """A file (or built folder) of ``stage`` (a key of `RESULTS`) under the results folder ``results``."""
    return f"{results}/{_fill(RESULTS[stage], fields)}"


#: Where a job's log and benchmark lie under the results folder (`JOBS` gives each rule's folder and job).
JOB_FILES = {"log": "logs/{folder}/{job}.log", "benchmark": "benchmarks/{folder}/{job}.tsv"}


def _job_file(results, file: str, rule: str, fields: dict) -> str:
    _, folder, job = JOBS[rule]
    return f"{results}/{JOB_FILES[file].format(folder=folder, job=_fill(job, fields))}"


def log_path(results, rule: str, **fields) -> str:
    """The log of a job of ``rule`` (a key of `JOBS`)."""
    return _job_file(results, "log", rule, fields)


def benchmark_path(results, rule: str, **fields) -> str:
    """The benchmark (Snakemake's times) of a job of ``rule`` (a key of `JOBS`)."""
    return _job_file(results, "benchmark", rule, fields)


def grid_files(results, runs, seeds) -> frozenset[str]:
    """The probe and lambda files of a config's grid under ``results``: one probe file per run and seed, and the
    `LAMBDA_FILES` of each run whose head order needs learned lambdas (`papa.spec.needs_lambdas`).

    Args:
        results: the results folder (as the config writes it).
        runs: the probe runs, ``(model, task, constants, selection, fraction_dynamic)`` tuples with
            ``fraction_dynamic`` as its path text (`papa.checks.probe_runs`).
        seeds: the sweep's seeds (``sweep.seeds``).
    """
    probes = [result_path(results, "probe", model=m, task=t, constants=c, selection=s, fraction_dynamic=f, seed=seed)
              for m, t, c, s, f in runs for seed in seeds]  # fmt: skip
    lambdas = [result_path(results, "lambda", model=m, task=t, constants=c, name=name)
               for m, t, c, s, f in runs if spec.needs_lambdas(s, f) for name in LAMBDA_FILES]  # fmt: skip
    return frozenset(probes + lambdas)


def of_config(path: str, results, *, finals, grid, models, built_models, datasets, sources) -> bool:
    """Whether an output path under ``results`` is one a config makes: one of its tables and figures (``finals``), a
    probe or lambda file of its grid (``grid``, `grid_files`: not one of a fraction, constants spec or head order it
    dropped), or another stage's result file (`parse_result`: not a log or benchmark) whose model, dataset and built
    source are among the config's. ``path`` is compared as written (the records' spelling).

    Args:
        finals: the paths of the config's tables and figures (under ``tables/`` and ``plots/``).
        grid: the paths of its probe and lambda files (`grid_files`).
        models, built_models, datasets, sources: the names of its models, of the models it builds (rule
            build_model), of its datasets and of its ``build_data`` sources (any container of names).
    """
    parts = Path(path).relative_to(results).parts
    if parts[:1] in (("tables",), ("plots",)):
        return path in {str(f) for f in finals}
    if parts[:1] in (("probe",), ("lambda",)):
        return path in grid
    found = parse_result(path, results)
    if found is None or found.file != "result":
        return False
    known = {"model": built_models if found.stage == "built_model" else models, "dataset": datasets, "source": sources}
    return all(getattr(found, field) in names for field, names in known.items() if getattr(found, field) is not None)


def _constants_held(tasks, model: str, task: str, constants: spec.ConstantsSpec) -> dict:
    """What the matrices of a constants spec for a task hold (`papa.pipeline.ConstantsFile`'s fields): the spec's
    kind averaged on its corpus, else on the task's own dataset, at the task's N."""
    return {"model": model, "corpus": constants.corpus_or(tasks[task]["dataset"]), "n": int(tasks[task]["max_length"]),
            "kind": constants.kind}  # fmt: skip


def _constants_path(results, held: dict) -> str:
    """The file of the matrices `_constants_held` describes."""
    return result_path(
        results, "constants", model=held["model"], dataset=held["corpus"], n=held["n"], kind=held["kind"]
    )


def constants_file(results, tasks, model: str, task: str, constants: str) -> str:
    """The matrices a constants spec (``kind[_trained][@corpus]``) names for a task: ``<kind>.safetensors`` averaged
    on the spec's corpus, else on the task's own dataset, at the task's N (``tasks``: the config's ``tasks``)."""
    return _constants_path(results, _constants_held(tasks, model, task, spec.ConstantsSpec.parse(constants)))


def drawn_constants(results, runs, tasks) -> dict[str, dict]:
    """The constant-matrix files the probe ``runs`` (as `grid_files` takes them) use untrained, by path (sorted),
    each with what it holds (`papa.pipeline.ConstantsFile`'s fields: model, corpus, n, kind); rule plot draws their
    representative heads. ``tasks``: the config's ``tasks``."""
    files = {}
    for m, t, c, _, _ in runs:
        constants = spec.ConstantsSpec.parse(c)
        if not constants.trained:
            held = _constants_held(tasks, m, t, constants)
            files[_constants_path(results, held)] = held
    return dict(sorted(files.items()))


@dataclass(frozen=True)
class ResultPath:
    """What a path under a results folder holds (`parse_result`); a field its layout lacks is None.

    Attributes:
        stage: its stage's key in `RESULTS` (``probe``, ``lambda``, ``constants``, ``mlm``, ...).
        file: ``result``, ``log`` or ``benchmark``.
        rule: the rule whose job wrote it (``probe_trained`` for trained constants, ``data_free_constants`` for
            the data-free kinds).
        constants: the constants spec (`papa.spec.ConstantsSpec`).
        fraction_dynamic: as a number (the path's text: `papa.spec.format_fraction`).
        seed: a probe file's seed; a probe log's when the job ran one seed (rule probe_trained), else None.
        n: N, the padded length.
        kind: the constant kind of a matrices file (``average``, ``identity``, ...).
        name: the file name of a stage whose layout has several (``lambdas.parquet``, ``train.parquet``).
    """

    stage: str
    file: str
    rule: str
    model: str | None = None
    task: str | None = None
    dataset: str | None = None
    source: str | None = None
    constants: spec.ConstantsSpec | None = None
    selection: str | None = None
    fraction_dynamic: float | None = None
    seed: int | None = None
    n: int | None = None
    kind: str | None = None
    split: str | None = None
    name: str | None = None


def _regex(template: str) -> re.Pattern:
    pieces = re.split(r"{(\w+)}", template)  # literal, field, literal, field, ...
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>{FIELDS[p]})" for i, p in enumerate(pieces)))


@functools.cache
def _layouts() -> list[tuple[re.Pattern, str, str, str | None]]:
    """(regex, stage, file, rule: None where the result's fields tell) of every layout, relative to the results
    folder."""
    out = [(_regex(template), stage, "result", None) for stage, template in RESULTS.items()]
    for rule, (stage, folder, job) in JOBS.items():
        out += [(_regex(t.format(folder=folder, job=job)), stage, file, rule) for file, t in JOB_FILES.items()]
    return out


#: The rule of each stage one rule writes (`JOBS`); constants and probe files tell theirs by their fields.
_RULES = {stage: rule for rule, (stage, _, _) in JOBS.items() if stage not in ("constants", "probe")}


def _result_rule(stage: str, fields: dict) -> str:
    """The rule that writes a result file of ``stage`` (the rules' wildcard constraints: papa.smk)."""
    if stage == "constants":
        return "data_free_constants" if fields["kind"] in spec.DATA_FREE else "average_attention"
    if stage == "probe":
        return "probe_trained" if fields["constants"].trained else "probe"
    return _RULES[stage]


def parse_result(path, results=None) -> ResultPath | None:
    """What ``path`` holds (`ResultPath`): a result file, log or benchmark of a job in one of the layouts above;
    None for any other path (a table, a figure, a file of no layout, a path outside ``results``).

    ``path`` is relative to the results folder ``results`` (given), or to the results folder itself (``results``
    None): a path is not read from its end, where ``built/data/<key>/train.parquet`` would pass for a prepared
    dataset's file."""
    p = Path(path)
    if results is not None:
        try:
            p = p.relative_to(results)
        except ValueError:
            return None
    text = p.as_posix()
    for regex, stage, file, rule in _layouts():
        m = regex.fullmatch(text)
        if m is None:
            continue
        raw: dict = m.groupdict()
        fields = _read_fields(raw)
        if fields is None:
            continue
        rule = rule or _result_rule(stage, fields)
        if rule in ("probe", "probe_trained") and (rule == "probe_trained") != fields["constants"].trained:
            continue  # a seed's log under untrained constants, a run's under trained ones: no rule writes it
        return ResultPath(stage, file, rule, **fields)
    return None


def _read_fields(raw: dict) -> dict | None:
    """The values of a path's fields, or None where one is not as the rules write it (a path that matches a
    layout's pattern but no rule makes: ``fraction_dynamic=0.50``, ``seed007``, ``N0128``, a name ``..``): what
    `parse_result` reads back is what the builders above write."""
    fields = dict(raw)
    if any(fields.get(k) in (".", "..") for k in ("model", "dataset", "task", "source", "name")):
        return None
    for key in ("seed", "n"):
        if key in fields:
            fields[key] = int(fields[key])
            if str(fields[key]) != raw[key]:
                return None
    if "constants" in fields:
        try:
            fields["constants"] = spec.ConstantsSpec.parse(fields["constants"])
        except ValueError:
            return None
        if str(fields["constants"]) != raw["constants"]:
            return None
    if "fraction_dynamic" in fields:
        try:
            fields["fraction_dynamic"] = spec.check_fraction(fields["fraction_dynamic"])
        except ValueError:  # the pattern's characters, not a number in [0, 1] ("1-e", "2")
            return None
        if spec.format_fraction(fields["fraction_dynamic"]) != raw["fraction_dynamic"]:
            return None
    return fields
