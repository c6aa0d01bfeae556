"""papa.layout: the results folder's layouts, built and read back by one module (review AY)."""

import re
import subprocess
from pathlib import Path

import pytest

from papa import layout, spec
from papa.layout import ResultPath, benchmark_path, log_path, parse_result, result_path
from papa.spec import ConstantsSpec

#: A value of each template field, and what `parse_result` reads it as.
VALUES = {
    "model": ("bert-base", "bert-base"),
    "dataset": ("wiki.v2", "wiki.v2"),
    "task": ("rt_sentiment", "rt_sentiment"),
    "source": ("glue_cola", "glue_cola"),
    "constants": ("average_trained@wiki", ConstantsSpec("average", True, "wiki")),
    "selection": ("first_to_last", "first_to_last"),
    "fraction_dynamic": ("0.0625", 0.0625),
    "seed": ("3", 3),
    "n": ("128", 128),
    "kind": ("toeplitz", "toeplitz"),
    "split": ("validation", "validation"),
    "name": ("lambdas.parquet", "lambdas.parquet"),
}


def _fields(template):
    return re.findall(r"{(\w+)}", template)


@pytest.mark.parametrize("stage", layout.RESULTS)
def test_every_result_path_reads_back_as_what_it_holds(stage):
    fields = _fields(layout.RESULTS[stage])
    path = result_path("out/res", stage, **{f: VALUES[f][0] for f in fields})
    got = parse_result(path, "out/res")
    assert got is not None and (got.stage, got.file) == (stage, "result"), got
    assert {f: getattr(got, f) for f in fields} == {f: VALUES[f][1] for f in fields}
    unset = set(ResultPath.__dataclass_fields__) - set(fields) - {"stage", "file", "rule"}
    assert all(getattr(got, f) is None for f in unset), got
    assert parse_result(Path(path).relative_to("out/res")) == got  # a path relative to the results folder


@pytest.mark.parametrize("rule", layout.JOBS)
def test_every_jobs_log_and_benchmark_read_back_as_its_rules(rule):
    stage, _, job = layout.JOBS[rule]
    values = {f: VALUES[f][0] for f in _fields(job)}
    if rule == "probe":
        values["constants"] = "average@wiki"  # rule probe: fixed matrices
    for path, file in ((log_path("r", rule, **values), "log"), (benchmark_path("r", rule, **values), "benchmark")):
        got = parse_result(path, "r")
        assert got is not None and (got.stage, got.file, got.rule) == (stage, file, rule), (path, got)
        assert got.model == values.get("model") and got.seed == (3 if "seed" in values else None)


def test_builders_write_the_wildcards_they_are_not_given():
    """What the rules pass: every field left a wildcard (byte for byte the paths the rules had written out)."""
    assert log_path("R", "probe_trained") == (
        "R/logs/probe/{model}/{task}/{constants}/{selection}/fraction_dynamic={fraction_dynamic}/seed{seed}.log"
    )
    assert (
        benchmark_path("R", "data_free_constants")
        == "R/benchmarks/data_free_constants/{model}/{dataset}/N{n}/{kind}.tsv"
    )
    assert result_path("R", "probe", seed=0) == (
        "R/probe/{model}/{task}/{constants}/{selection}/fraction_dynamic={fraction_dynamic}/seed0.parquet"
    )
    assert layout.RESULTS["probe"].endswith("/" + spec.seed_file("{seed}"))  # the seed's name is papa.spec's
    with pytest.raises(TypeError, match="no field seed"):
        result_path("R", "lambda", seed=0)
    with pytest.raises(TypeError, match="no field seed"):  # a log's or benchmark's job checks its fields too
        log_path("R", "learn_lambda", seed=0)
    with pytest.raises(TypeError, match="no field kind"):
        benchmark_path("R", "probe", kind="average")


def test_the_rule_of_a_result_is_told_by_its_fields():
    """Trained constants: rule probe_trained; a data-free kind: rule data_free_constants; a log says its rule."""
    probe = "r/probe/m/t/{}/lambda/fraction_dynamic=0.5/seed1.parquet"
    assert parse_result(probe.format("average"), "r").rule == "probe"
    assert parse_result(probe.format("toeplitz_trained"), "r").rule == "probe_trained"
    assert parse_result("r/constants/m/d/N64/effective.safetensors", "r").rule == "average_attention"
    assert parse_result("r/constants/m/d/N64/zeros.safetensors", "r").rule == "data_free_constants"
    fixed = parse_result("r/logs/probe/m/t/average/lambda/fraction_dynamic=0.5.log", "r")
    trained = parse_result("r/logs/probe/m/t/average_trained/lambda/fraction_dynamic=0.5/seed2.log", "r")
    assert (fixed.rule, fixed.seed, trained.rule, trained.seed) == ("probe", None, "probe_trained", 2)
    assert trained.fraction_dynamic == 0.5 and trained.constants == ConstantsSpec("average", trained=True)


@pytest.mark.parametrize(
    "path",
    [
        "r/tables/summary.parquet",  # a table, a figure: no layout of a job's result
        "r/plots/heads",
        "r/logs/aggregate.log",
        "r/built/data/glue_cola/train.tsv",  # a built dataset's file: not a prepared split (data/<dataset>/<name>)
        "r/probe/m/t/average/lambda/fraction_dynamic=0.5",  # a run's folder, not a seed's file
        "r/probe/m/t/average/lambda/fraction_dynamic=2/seed0.parquet",  # no fraction
        "r/probe/m/t/average/lambda/fraction_dynamic=1-e/seed0.parquet",
        "r/probe/m/t/averge/lambda/fraction_dynamic=0.5/seed0.parquet",  # no constants spec
        "r/probe/m/t/average/best/fraction_dynamic=0.5/seed0.parquet",  # no head order
        "r/tokens/m/d/N64/test.parquet",  # a split the workflow does not prepare
        "r/constants/m/d/N64/average.safetensors/x",
        "elsewhere/constants/m/d/N64/average.safetensors",  # outside the results folder
        # a layout's path relative to another folder than the results (the checkout's own data/, say): not read from
        # its end
        "constants/m/d/N64/average.safetensors",
        "data/d/train.parquet",
        "r/data/d/x/train.parquet",  # a name is one path segment
        "r/probe/m/t/average/lambda/fraction_dynamic=0.5/seedx.parquet",  # a seed is digits
        "r/probe/m/t/average/lambda/fraction_dynamic=0.5/seed-1.parquet",
        "r/probe/m/t/average/lambda/fraction_dynamic=0.5/seed.parquet",  # at least one digit
        "r/tokens/m/d/N/train.parquet",
        # the patterns' characters, but no rule writes them: what is read back is what the builders write (BC)
        "r/probe/m/t/average/lambda/fraction_dynamic=0.50/seed0.parquet",
        "r/probe/m/t/average/lambda/fraction_dynamic=.5/seed0.parquet",
        "r/probe/m/t/average/lambda/fraction_dynamic=1e-1/seed0.parquet",
        "r/probe/m/t/average/lambda/fraction_dynamic=0.5/seed007.parquet",
        "r/tokens/m/d/N0128/train.parquet",
        "r/tokens/m/d/Nx/train.parquet",  # N is digits
        "r/constants/m/d/N64/bogus.safetensors",  # a kind papa does not make
        "r/data/../train.parquet",
        "r/data/d/..",
        "r/logs/probe/m/t/average/lambda/fraction_dynamic=0.5/seed1.log",  # a seed's log: trained constants only
        "r/logs/probe/m/t/average_trained/lambda/fraction_dynamic=0.5.log",  # a run's log: fixed constants only
        # a layout's dots are dots (mutation testing found the literals' escaping unchecked, review DL)
        "r/tokens/m/d/N64/train_parquet",
        "r/constants/m/d/N64/average-safetensors",
    ],
)
def test_any_other_path_is_none(path):
    assert parse_result(path, "r") is None


def _summary_run(lines, results_holder):
    """A stand-in for `snakemake --summary`: its output file, date, rule columns under the results folder that
    `workflow_jobs` passes on the command line."""

    def run(cmd, **kwargs):
        results = next(a for a in cmd if a.startswith("results=")).removeprefix("results=")
        results_holder.append(results)
        out = "".join(f"{results}/{path}\t-\t{rule}\tok\n" for path, rule in lines)
        return subprocess.CompletedProcess(cmd, 0, out, "")

    return run


def test_cost_reads_snakemakes_plan_through_the_layout(monkeypatch):
    """papa.cost.workflow_jobs reads each GPU job off its output's path (papa.layout), trained-constants probes
    (rule probe_trained, a job a seed) as one run; the data-free kinds (no GPU) and other rules are left out; an
    output a GPU rule writes outside its layout stops it (it took the path apart by position)."""
    import papa.cost as cost

    plan = [
        ("probe/m/t/average/lambda/fraction_dynamic=0.5/seed0.parquet", "probe"),
        ("probe/m/t/average/lambda/fraction_dynamic=0.5/seed1.parquet", "probe"),
        ("probe/m/t/toeplitz_trained@wiki/random/fraction_dynamic=0/seed0.parquet", "probe_trained"),
        ("probe/m/t/toeplitz_trained@wiki/random/fraction_dynamic=0/seed1.parquet", "probe_trained"),
        ("lambda/m/t/average/lambdas.parquet", "learn_lambda"),
        ("lambda/m/t/average/metrics.parquet", "learn_lambda"),
        ("constants/m/d/N64/effective.safetensors", "average_attention"),
        ("constants/m/d/N64/zeros.safetensors", "data_free_constants"),
        ("mlm/m/wiki/N128/scores.parquet", "mlm"),
        ("mlm/m/wiki/N128/lambdas.parquet", "mlm"),
        ("tokens/m/d/N64/train.parquet", "tokenize"),
        ("tables/summary.parquet", "aggregate"),
    ]
    seen = []
    monkeypatch.setattr(cost.subprocess, "run", _summary_run(plan, seen))
    jobs = cost.workflow_jobs("config/smoke.yaml")
    assert jobs.probes == [("m", "t", "average", "lambda", 0.5), ("m", "t", "toeplitz_trained@wiki", "random", 0.0)]
    assert jobs.lambdas == [("m", "t", "average")]
    assert jobs.averages == [("m", "d", 64, "effective")]
    assert jobs.mlm == [("m", "wiki", 128)]
    monkeypatch.setattr(
        cost.subprocess, "run", _summary_run([("probe/m/t/average/lambda/seed0.parquet", "probe")], seen)
    )
    with pytest.raises(RuntimeError, match=r"unexpected probe output .*/probe/m/t/average/lambda/seed0.parquet"):
        cost.workflow_jobs("config/smoke.yaml")
    # a file of the layout that another rule writes (trained constants: rule probe_trained) is not the rule's either
    trained = "probe/m/t/average_trained/lambda/fraction_dynamic=0.5/seed0.parquet"
    monkeypatch.setattr(cost.subprocess, "run", _summary_run([(trained, "probe")], seen))
    with pytest.raises(RuntimeError, match=rf"unexpected probe output .*/{trained}: not papa.layout's probe layout"):
        cost.workflow_jobs("config/smoke.yaml")


def test_cost_plans_with_the_configs_the_user_names_and_stops_on_snakemakes_error(tmp_path, monkeypatch):
    """`workflow_jobs` runs ``snakemake --summary`` in the workflow's root with configs named relative to the current
    folder, as every command takes them: it passes them resolved; a summary that fails stops it with Snakemake's
    error, not an empty plan (mutation review of papa/cost.py)."""
    import papa.cost as cost

    calls = []

    def run(cmd, **kwargs):
        calls.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, 1, "", "WorkflowError: no such rule\n")

    monkeypatch.setattr(cost.subprocess, "run", run)
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "repo"
    root.mkdir()
    with pytest.raises(RuntimeError, match=r"summary failed for mine\.yaml more/b\.yaml:\nWorkflowError: no such rule"):
        cost.workflow_jobs(["mine.yaml", "more/b.yaml"], root=root)
    ((cmd, kwargs),) = calls
    assert kwargs["cwd"] == root
    at = cmd.index("--configfile")
    assert cmd[at + 1 : at + 3] == [str((tmp_path / "mine.yaml").resolve()), str((tmp_path / "more/b.yaml").resolve())]


@pytest.mark.parametrize("tmpdir", ["my tmp", "tmp{job}", "tmp$HOME"])
def test_cost_plans_in_a_folder_the_workflow_takes_when_tmpdir_has_a_space(tmp_path, monkeypatch, tmpdir):
    """`workflow_jobs` ran ``snakemake --summary`` with ``results=`` a folder under $TMPDIR, which the workflow refuses
    where that path holds whitespace (TMPDIR="/scratch/my tmp"): benchmarks/paper_cost.py failed there. It plans in
    an empty folder of the workflow's root then, named relative to it, removed after."""
    import tempfile

    import papa.cost as cost
    from papa.checks import _results_folder

    spaced = tmp_path / tmpdir  # and any TMPDIR the workflow's results check refuses: '{}' (wildcards), '$NAME'
    spaced.mkdir()
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spaced))
    seen = []
    plan = [("probe/m/t/average/lambda/fraction_dynamic=0.5/seed0.parquet", "probe")]
    monkeypatch.setattr(cost.subprocess, "run", _summary_run(plan, seen))
    jobs = cost.workflow_jobs("config/smoke.yaml", root=root)
    assert jobs.probes == [("m", "t", "average", "lambda", 0.5)]
    assert _results_folder({"results": seen[0]}) == [], seen
    assert not list(root.iterdir())  # the folder went with the plan


#: A config's probe runs as papa.checks.probe_runs gives them: (model, task, constants, selection, fraction_dynamic).
RUNS = [
    ("m", "t", "average", "lambda", "0.5"),  # lambda-ranked at a partial fraction: needs lambdas
    ("m", "t", "average", "lambda", "1"),  # nothing replaced: no lambdas
    ("m", "t", "identity", "random", "0.5"),  # not lambda-ranked: no lambdas
    ("m", "t", "average", "lambda", "0.25"),  # the same lambdas as the first run: listed once
]


def test_grid_files_are_each_runs_seeds_and_the_lambda_files_of_the_runs_that_need_them():
    """The probe and lambda files of a config's grid (common.smk's grid_files): one probe file per run and seed, and
    papa.layout.LAMBDA_FILES (the lambda stage's outputs, rule learn_lambda) where the order needs lambdas."""
    assert layout.LAMBDA_FILES == ("lambdas.parquet", "metrics.parquet")
    grid = layout.grid_files("res", RUNS, [0, 7])
    assert isinstance(grid, frozenset)
    probes = {
        f"res/probe/m/t/{c}/{s}/fraction_dynamic={f}/seed{seed}.parquet" for _, _, c, s, f in RUNS for seed in (0, 7)
    }
    assert grid == probes | {"res/lambda/m/t/average/lambdas.parquet", "res/lambda/m/t/average/metrics.parquet"}
    paths = [result_path("res", "probe", model=m, task=t, constants=c, selection=s, fraction_dynamic=f, seed=0)
             for m, t, c, s, f in RUNS]  # fmt: skip
    assert set(paths) <= grid
    assert layout.grid_files("res", [], [0]) == frozenset()  # no probe run (an MLM-only config)
    assert layout.grid_files("res", RUNS, []) == grid - probes  # no seed: the lambdas alone
    with pytest.raises(ValueError, match="Unknown head order"):
        layout.grid_files("res", [("m", "t", "average", "sideways", "0.5")], [0])


def test_the_lambda_stage_names_its_files_once():
    """papa.smk's learn_lambda outputs and common.smk's grid name the lambda files by papa.layout.LAMBDA_FILES, not
    by their text (it was written in both)."""
    rules = (Path(__file__).parent.parent / "workflow/rules").glob("*.smk")
    lines = [
        line for p in rules for line in p.read_text().splitlines() if "lambda_path(" in line or "lambda_file(" in line
    ]
    assert any("LAMBDA_FILES" in line for line in lines)
    for name in layout.LAMBDA_FILES:
        assert not [line for line in lines if f'"{name}"' in line], name


def _of_config(path, results="res", **kw):
    known = {
        "finals": ["res/tables/summary.parquet", Path("res/plots/a.png")],
        "grid": layout.grid_files("res", RUNS, [0]),
        "models": {"m": "hub/id", "b": {"build": {}}},
        "built_models": {"b": {}},
        "datasets": {"d": {}},
        "sources": {"s": {}},
    }
    return layout.of_config(path, results, **{**known, **kw})


@pytest.mark.parametrize(
    ("path", "made"),
    [
        ("res/tables/summary.parquet", True),
        ("res/plots/a.png", True),  # a finals entry given as a Path: compared as its text
        ("res/tables/probe.parquet", False),  # a table not among the targets (an MLM-only config's probe tables)
        ("res/probe/m/t/average/lambda/fraction_dynamic=0.5/seed0.parquet", True),
        ("res/probe/m/t/average/lambda/fraction_dynamic=0.5/seed1.parquet", False),  # a dropped seed
        ("res/probe/m/t/average/lambda/fraction_dynamic=0.125/seed0.parquet", False),  # a dropped fraction
        ("res/lambda/m/t/average/lambdas.parquet", True),
        ("res/lambda/m/t/average/metrics.parquet", True),
        ("res/lambda/m/t/identity/lambdas.parquet", False),  # its run is random-ordered: no lambdas
        ("res/lambda/m/gone_task/average/lambdas.parquet", False),
        ("res/constants/m/d/N32/average.safetensors", True),
        ("res/constants/m/other/N32/average.safetensors", False),  # a dataset the config dropped
        ("res/constants/gone/d/N32/average.safetensors", False),  # a model it dropped
        ("res/tokens/m/d/N32/train.parquet", True),
        ("res/data/d/train.parquet", True),
        ("res/built/models/b", True),
        ("res/built/models/m", False),  # a model the config loads, not one it builds
        ("res/built/data/s", True),
        ("res/built/data/gone", False),
        ("res/logs/tokenize/m/d/N32/train.log", False),  # a log: not an output the config makes
        ("res/unknown/x.parquet", False),
    ],
)
def test_of_config_tells_the_outputs_a_config_makes_from_an_earlier_configs(path, made):
    """What a lost or upgraded output is (common.smk's of_this_config): the config's targets, a probe or lambda
    file of its grid (not one of a seed, fraction, constants spec or head order it dropped), or another stage's
    result naming its models (built ones for a built model), datasets and built sources."""
    assert _of_config(path) is made


def test_of_config_compares_paths_as_written_and_refuses_one_outside_the_results():
    """Paths are the records' spelling: compared as written (``./`` is another path), as Snakemake keeps them."""
    assert _of_config("res/probe/m/t/average/lambda/fraction_dynamic=0.5/seed0.parquet", grid=set()) is False
    assert _of_config("res/tables/summary.parquet", finals=[]) is False
    with pytest.raises(ValueError):
        _of_config("elsewhere/tables/summary.parquet")


TASKS = {"t": {"dataset": "d", "max_length": 32}, "u": {"dataset": "e", "max_length": "64"}}


def test_a_constants_spec_names_the_matrices_averaged_on_its_corpus_or_the_tasks_dataset():
    """The matrices a probe or lambda job reads (common.smk's constants_file): trained constants start from the
    same file as fixed ones; a corpus of its own replaces the task's dataset, at the task's N."""
    assert layout.constants_file("res", TASKS, "m", "t", "average") == "res/constants/m/d/N32/average.safetensors"
    assert layout.constants_file("res", TASKS, "m", "t", "average_trained") == layout.constants_file(
        "res", TASKS, "m", "t", "average"
    )
    assert (
        layout.constants_file("res", TASKS, "m", "u", "toeplitz@wiki")
        == "res/constants/m/wiki/N64/toeplitz.safetensors"
    )
    with pytest.raises(KeyError):
        layout.constants_file("res", TASKS, "m", "gone", "average")


def test_the_drawn_constants_are_the_untrained_files_by_path_with_what_each_holds():
    """What rule plot draws (common.smk's drawn_constants): each untrained constants file the runs read, once, sorted
    by path, with its model, corpus, N (an int) and kind; trained constants are the probes' own parameters."""
    runs = [
        ("m", "u", "identity", "lambda", "0"),
        ("m", "t", "average", "lambda", "0.5"),
        ("m", "t", "average", "random", "0.5"),  # the same file again
        ("m", "t", "average_trained", "lambda", "0"),  # trained: not drawn
        ("m", "t", "average@e", "lambda", "0"),
    ]
    drawn = layout.drawn_constants("res", runs, TASKS)
    assert drawn == {
        "res/constants/m/d/N32/average.safetensors": {"model": "m", "corpus": "d", "n": 32, "kind": "average"},
        "res/constants/m/e/N32/average.safetensors": {"model": "m", "corpus": "e", "n": 32, "kind": "average"},
        "res/constants/m/e/N64/identity.safetensors": {"model": "m", "corpus": "e", "n": 64, "kind": "identity"},
    }
    assert list(drawn) == sorted(drawn)
    assert layout.drawn_constants("res", [], TASKS) == {}


def test_one_of_matches_exactly_its_keys_and_nothing_without_them():
    """The wildcard constraints' pattern (papa.layout.one_of, which FIELDS and common.smk share): the keys
    escaped, whole, and no path at all for an empty list (an empty pattern matched everything)."""
    import re

    assert re.fullmatch(layout.one_of(["a.b", "c"]), "a.b") and not re.fullmatch(layout.one_of(["a.b"]), "axb")
    assert not re.fullmatch(layout.one_of([]), "") and not re.fullmatch(layout.one_of([]), "x")


def test_a_trained_constants_run_alone_draws_no_matrices():
    """A run of trained constants draws nothing, also where no fixed run reads the file it starts from (in the
    test above an ``average`` run names that file anyway): mutation testing found the check unchecked (review DL)."""
    assert layout.drawn_constants("res", [("m", "t", "toeplitz_trained", "lambda", "0")], TASKS) == {}
    assert list(layout.drawn_constants("res", [("m", "t", "toeplitz_trained", "lambda", "0"),
                                               ("m", "u", "toeplitz", "lambda", "0")], TASKS)) == [
        "res/constants/m/e/N64/toeplitz.safetensors"]  # fmt: skip


def test_the_result_templates_are_the_layout_the_readme_documents():
    """Each stage's files lie where README's workflow table (and its mlm section) says, field by field: the
    templates are the one place the layout is written, so a field moved in one (``patterns/{dataset}/{model}``)
    moved every file while the round trips above still passed (mutation testing, review DL)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    documented = [
        layout.result_path("results", "tokens", n="{N}"),
        layout.result_path("results", "constants", dataset="{corpus}", n="{N}"),
        layout.result_path("results", "lambda", name="lambdas.parquet"),
        layout.result_path("results", "probe"),
        layout.result_path("results", "patterns", dataset="{corpus}", n="{N}"),
        layout.result_path("results", "mlm", name="scores.parquet"),
        layout.result_path("results", "data", name="{train,validation}.parquet"),
    ]
    for path in documented:
        assert f"{path}`" in readme, path
