"""Project-level promises: one dependency list, the README's commands, a clean lint."""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[\[<>=!~ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_lists_the_pyproject_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {r.replace(" ", "") for r in project["dependencies"] + project["optional-dependencies"]["test"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert {r.replace(" ", "") for r in pip} == wanted
    py = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert py.split("=")[1] >= project["requires-python"].lstrip(">=")


def test_readme_commands_are_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert commands[:2] == ["make run", "make test"], commands
    assert "make test" in (ROOT / ".ci/run").read_text()


@pytest.fixture(autouse=True)
def _make_env_of_its_own(monkeypatch):
    """The Makefile reads CONFIG (and CORES, VENV, ...) from the environment, as make run does: a contributor's
    exported CONFIG would change every make command these tests check."""
    for name in ("CONFIG", "CLEAN_CONFIGS", "CORES", "VENV", "PYTHON", "WORKERS", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"):
        monkeypatch.delenv(name, raising=False)


def _make_n(*args) -> list[str]:
    """The commands ``make`` would run for ``args`` (a dry run, the venv taken as installed)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # not a sub-make
    cmd = ["make", "-n", "--no-print-directory", "-o", ".venv/bin/snakemake", *args]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_make_test_lints_then_runs_the_suite_make_check_the_fast_tier_make_rehearse_the_rehearsal():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(r.startswith("ruff==") for r in project["project"]["optional-dependencies"]["test"])  # pinned
    assert project["tool"]["ruff"]["line-length"] == 120
    lint = [".venv/bin/ruff check .", ".venv/bin/ruff format --check ."]
    assert any(r.startswith("pytest-xdist") for r in project["project"]["optional-dependencies"]["test"])
    suite = '.venv/bin/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder -m "not rehearsal"'
    assert _make_n("test") == [*lint, suite] and _make_n("lint") == lint
    assert _make_n("check") == ['.venv/bin/python -m pytest -n 2 --dist loadfile -m "not slow and not slurm" -x']
    # WORKERS given is followed by the fast tier too (it ran two workers whatever WORKERS said); its default stays 2
    assert _make_n("check", "WORKERS=1") == [
        '.venv/bin/python -m pytest -n 1 --dist loadfile -m "not slow and not slurm" -x'
    ]
    assert _make_n("test", "WORKERS=1")[-1] == suite.replace("-n 3", "-n 1")
    assert _make_n("rehearse") == ["PAPA_TEST_CUDA=1 .venv/bin/python -m pytest -m rehearsal"]  # a GPU's pre-flight
    markers = dict(m.split(":", 1) for m in project["tool"]["pytest"]["ini_options"]["markers"])
    assert set(markers) == {"slow", "slurm", "rehearsal", "cuda"}
    # the GPU tests, on a GPU machine: every other tier hides CUDA from its tests (tests/conftest.py)
    assert _make_n("test-cuda") == ["PAPA_TEST_CUDA=1 .venv/bin/python -m pytest -m cuda"]
    assert all(any(f"make {t}" in m for t in ("check", "test", "rehearse")) for m in markers.values())
    # a misspelled marker is an error, not a warning: `@pytest.mark.slwo` ran a whole-workflow test in the fast tier
    assert "--strict-markers" in project["tool"]["pytest"]["ini_options"]["addopts"].split()


def _make_clean(cwd, configs):
    """`make clean` run for real in ``cwd`` (its folders are relative to it) on ``configs``."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    cmd = ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "clean", f"CLEAN_CONFIGS={' '.join(configs)}"]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)


def test_make_run_runs_the_config_given_and_names_one_that_is_not_there(tmp_path):
    """`make run CONFIG=nosuch.yaml` printed Snakemake's 20-line FileNotFoundError traceback; a config that is no
    YAML, Snakemake's "not valid JSON or YAML" without a line (review AP's AP-6)."""
    assert _make_n("run") == [
        'out=$(.venv/bin/python -m papa.records results-of -- config/config.yaml) || { echo "make run: $out" >&2; '
        "exit 1; }",
        ".venv/bin/snakemake --cores all --configfile config/config.yaml",
    ]
    broken = tmp_path / "broken.yaml"
    broken.write_text("seed: 0\nsweep:\n  seeds: [0, 1]\n   head_orders: [lambda]\n")  # one space too many
    p = subprocess.run(["make", "-o", ".venv/bin/snakemake", "run", f"CONFIG={broken}"], cwd=ROOT,
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode != 0 and f"make run: {broken}: Config file is not valid JSON or YAML" in p.stderr, p
    assert "The YAML parser: expected <block end>, but found '<block mapping start>' at line 4, column 4." in p.stderr
    # the target before --configfile, which takes every word after it as a config file
    prune = "\n".join(_make_n("prune"))
    assert "papa.records results-of -- config/config.yaml) || {" in prune and '[ -d "$out" ] || {' in prune
    assert prune.endswith(".venv/bin/snakemake prune --cores 1 --configfile config/config.yaml")
    never = tmp_path / "never.yaml"  # a config never run: its folder is not made (and claimed) by a prune
    never.write_text(f"results: {tmp_path / 'never'}\n")
    p = subprocess.run(["make", "-o", ".venv/bin/snakemake", "prune", f"CONFIG={never}"], cwd=ROOT,
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 0 and "is not there: nothing to prune" in p.stdout and not (tmp_path / "never").exists(), p
    for target in ("run", "prune"):
        p = subprocess.run(["make", "-n", "-o", ".venv/bin/snakemake", target, f"CONFIG={tmp_path / 'nosuch.yaml'}"],
                           cwd=ROOT, capture_output=True, text=True)  # fmt: skip
        assert p.returncode != 0 and f"{tmp_path / 'nosuch.yaml'}: no such config file" in p.stderr, p
    for target in (
        "run",
        "clean",
        "report",
        "prune",
    ):  # an unset variable of a script: clean removed the default's folder
        p = subprocess.run(["make", "-n", "-o", ".venv/bin/snakemake", target, "CONFIG="], cwd=ROOT,
                           capture_output=True, text=True)  # fmt: skip
        assert p.returncode != 0 and "CONFIG is empty: name a config file" in p.stderr and "rm -rf" not in p.stdout, p


def test_make_refuses_a_goal_or_setting_it_does_not_have_and_clean_keeps_what_papa_did_not_write(tmp_path):
    """`make clean config/paper.yaml` (CONFIG= forgotten) and `make clean CONFG=...` removed the default runs' three
    folders, and `make run CONFG=...` ran the default config (review AU's 3); `results: link/` made make clean empty
    the linked folder's target, a results folder holding a user's file beside a logs/ went whole, and a results:
    naming a file was "the working directory" (review AU's 1, 2, 18)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    for args, says in ((["clean", "config/paper.yaml"], "config/paper.yaml is not a target of papa's Makefile "
                        "(install run test lint check coverage rehearse test-cuda report bench clean prune): give a "
                        "config file as CONFIG=config/paper.yaml"),
                       (["clean", "CONFG=config/paper.yaml"], "CONFG= is not a setting "
                        "of papa's Makefile: it reads CONFIG CORES WORKERS PYTHON VENV CLEAN_CONFIGS"),
                       (["run", "CONFG=config/smoke.yaml"], "CONFG= is not a setting")):  # fmt: skip
        p = subprocess.run(["make", "-n", "-o", ".venv/bin/snakemake", *args], cwd=ROOT, capture_output=True,
                           text=True, env=env)  # fmt: skip
        assert p.returncode != 0 and says in p.stderr and "rm -rf" not in p.stdout and "snakemake" not in p.stdout, p
    assert _make_n("clean", "CONFIG=config/smoke.yaml", "CORES=2", "WORKERS=2")  # its own settings pass
    # make install with a Python older than 3.11, or none: said before a venv is made (the README's login-node
    # advice, PYTHON=python3.11, then failed as before: the venv an older python made kept it)
    old = tmp_path / "python3.10"
    old.write_text('#!/bin/sh\ncase "$2" in *version_info*) exit 1;; *platform*) echo 3.10.13;; esac\n')
    old.chmod(0o755)
    for python, says in ((old, f"make install: {old} is Python 3.10.13, and papa needs 3.11 or newer"),
                         (tmp_path / "nosuch", "is not there: give a Python 3.11 or newer")):  # fmt: skip
        p = subprocess.run(["make", "install", f"VENV={tmp_path / 'venv'}", f"PYTHON={python}"], cwd=ROOT,
                           capture_output=True, text=True, env=env)  # fmt: skip
        assert p.returncode != 0 and says in p.stderr and not (tmp_path / "venv").exists(), p
    work = tmp_path / "work"
    (tmp_path / "target" / "logs").mkdir(parents=True)
    (tmp_path / "target" / "probe.parquet").write_text("x")
    work.mkdir()
    (work / "link").symlink_to(tmp_path / "target")
    (work / "myexp" / "logs").mkdir(parents=True)
    (work / "myexp" / "thesis.tex").write_text("precious")
    (work / "afile").write_text("x")
    configs = {name: tmp_path / f"{name}.yaml" for name in ("link", "myexp", "afile")}
    configs["link"].write_text("results: link/\n")
    configs["myexp"].write_text("results: myexp\n")
    configs["afile"].write_text("results: afile\n")
    p = _make_clean(work, [str(configs["link"])])
    assert p.returncode == 0 and not (work / "link").exists() and (tmp_path / "target" / "probe.parquet").exists(), p
    assert "rm -rf -- link\n" in p.stdout and "the link is removed, not the files there" in p.stdout, p
    p = _make_clean(work, [str(configs["myexp"]), str(configs["afile"])])
    assert p.returncode != 0 and (work / "myexp" / "thesis.tex").exists() and (work / "afile").exists(), p
    assert "myexp/ holds what papa does not write (thesis.tex)" in p.stdout, p
    assert "make clean: afile is no folder: not removed" in p.stdout, p


@pytest.mark.slow  # Snakemake and make started as subprocesses (11 s): make test, not make check
def test_make_report_before_a_run_and_make_outside_the_checkout_say_what_to_do(tmp_path):
    """make report on a folder no run has written printed ~50 "Missing metadata" lines, then stopped on a figure;
    make -f <checkout>/Makefile run from another folder said "No rule to make target 'pyproject.toml'"."""
    empty = tmp_path / "empty.yaml"
    empty.write_text(f"results: {tmp_path / 'none'}\n")
    p = subprocess.run(["make", "-o", ".venv/bin/snakemake", "report", f"CONFIG={empty}"], cwd=ROOT,
                       capture_output=True, text=True)  # fmt: skip
    said = (
        f'holds no run\'s results yet: run the workflow first (make run CONFIG="{empty}", or on a cluster '
        f"snakemake --profile slurm --configfile {empty})"
    )  # not make run alone: the grid on a login node
    assert p.returncode != 0 and said in p.stderr, p
    assert "Missing metadata" not in p.stdout + p.stderr
    # a finished run's folder and a config the workflow refuses: Snakemake's reason, not "run the workflow first"
    # (review AU's 10)
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / ".papa-records.json").write_text("{}")
    typo = tmp_path / "typo.yaml"
    typo.write_text(f"results: {tmp_path / 'done'}\nsweep: {{seedz: [0]}}\n")
    p = subprocess.run(["make", "-o", ".venv/bin/snakemake", "report", f"CONFIG={typo}"], cwd=ROOT,
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode != 0 and f"make report: snakemake -n --configfile {typo} failed:" in p.stderr, p
    assert "seedz" in p.stderr and "run the workflow first" not in p.stderr, p
    for target in ("run", "report", "test"):
        p = subprocess.run(["make", "-n", "-f", str(ROOT / "Makefile"), target], cwd=tmp_path, capture_output=True,
                           text=True)  # fmt: skip
        assert p.returncode != 0 and f"run make in the checkout ({ROOT}): make -C {ROOT} {target}" in p.stderr, p
    # a checkout in a path with a space: make split the path, and Snakemake writes the venv's python unquoted into
    # every job's command (each job failed at once, exit 127, with an empty log): refused before anything runs
    spaced = tmp_path / "My Projects ü"
    spaced.mkdir()
    shutil.copy(ROOT / "Makefile", spaced)
    said = f"papa's checkout is in a path with whitespace ({spaced}/Makefile): make splits it"
    for cwd, args in ((spaced, []), (tmp_path, ["-f", str(spaced / "Makefile")])):
        p = subprocess.run(["make", "-n", *args, "run"], cwd=cwd, capture_output=True, text=True)
        assert p.returncode != 0 and said in p.stderr, p
    from papa.checks import ConfigError, check_interpreter

    check_interpreter(sys.executable)
    with pytest.raises(ConfigError, match=r"is in a path with whitespace: Snakemake writes it unquoted into each "
                       r"job's command"):  # fmt: skip
        check_interpreter(str(spaced / ".venv" / "bin" / "python"))


def test_a_python_in_a_path_with_any_whitespace_is_refused():
    """`papa.checks.check_interpreter` in the fast tier (the make test above, which holds a space, is slow): a tab
    or a line break in the path is whitespace too, which Snakemake's unquoted command splits at (mutation review of
    papa/checks.py)."""
    from papa.checks import ConfigError, check_interpreter

    check_interpreter("/opt/envs/papa-3.12/bin/python")
    for path in ("/opt/my envs/bin/python", "/opt/my\tenvs/bin/python", "/opt/my\nenvs/bin/python"):
        with pytest.raises(ConfigError, match=r"is in a path with whitespace"):
            check_interpreter(path)


@pytest.mark.slow  # ~5 s: localedef and a fresh Python writing Parquet: `make test`, not the fast tier
def test_jobs_write_under_a_non_ascii_folder_in_a_latin1_locale(tmp_path):
    """Under a locale that is not UTF-8 (LANG=en_US.ISO-8859-1) a job's Python decoded its file names as Latin-1 and
    Arrow encoded them back as UTF-8: in a checkout (or results folder) named with a non-ASCII letter every job
    failed on "No such file or directory" writing its first Parquet file. The workflow runs its jobs in UTF-8 mode
    (`papa.checks.job_environment`, in common.smk), a PYTHONUTF8 of the user's kept. Skipped where glibc's
    localedef cannot make the locale."""
    from papa.checks import job_environment

    locales = tmp_path / "locales"
    locales.mkdir()
    made = subprocess.run(["localedef", "-i", "en_US", "-f", "ISO-8859-1", str(locales / "en_US.ISO-8859-1")],
                          capture_output=True, text=True) if shutil.which("localedef") else None  # fmt: skip
    if made is None or not (locales / "en_US.ISO-8859-1").exists():
        pytest.skip("localedef cannot make en_US.ISO-8859-1 here")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONUTF8", "PYTHONIOENCODING"))}
    env.update(LOCPATH=str(locales), LC_ALL="en_US.ISO-8859-1", LANG="en_US.ISO-8859-1")
    folder = tmp_path / "r\xe9sultats \xfcn\xef"
    code = """
import sys, pyarrow as pa
from papa.io import read_parquet, write_table
write_table(pa.table({"x": [1]}), sys.argv[1] + "/t.parquet")
assert read_parquet(sys.argv[1] + "/t.parquet").x.tolist() == [1]
"""
    job_environment(env)  # what common.smk does to the environment Snakemake gives its jobs
    p = subprocess.run([sys.executable, "-c", code, str(folder)], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert "checks.job_environment(os.environ)" in (ROOT / "workflow/rules/common.smk").read_text(encoding="utf-8")
    mine = {"PYTHONUTF8": "0"}
    job_environment(mine)
    assert mine == {"PYTHONUTF8": "0"}  # the user's choice stands


_NO_FLOCK = """
import errno, fcntl


def flock(fd, operation):  # a file system without locks (Lustre mounted noflock)
    raise OSError(errno.ENOSYS, "Function not implemented")


fcntl.flock = flock
"""


def test_a_download_cache_without_file_locks_is_named_at_the_start(tmp_path, monkeypatch):
    """The data and model jobs flock what they download or extract in PAPA_CACHE (papa.data.downloads): on a file
    system without locks each such job failed on a bare OSError from flock, nothing saying why. The start names
    PAPA_CACHE and what to set (a warning: a cache holding every file a run needs is only read, and runs), with no
    file left in the cache; a cache with locks, one not made yet (the folder it would be made in is tried) and one
    that cannot be written have nothing said. papa's own lists in .snakemake go on unlocked there
    (records.hold_results did already; note_lost raised)."""
    import errno
    import fcntl

    from papa.checks import cache_lock_problem
    from papa.records import LOST, note_lost

    cache = tmp_path / "cache"
    monkeypatch.setenv("PAPA_CACHE", str(cache))
    assert cache_lock_problem() is None  # not made yet: its parent is tried, and nothing is left there
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    cache.mkdir()
    assert cache_lock_problem() is None
    assert list(cache.iterdir()) == []

    def no_locks(fd, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert re.search(rf"PAPA_CACHE, {re.escape(str(cache))}, is on a file system without file locks \(flock: .*"
                     r"Function not implemented\).*Set PAPA_CACHE to a folder on a file system with locks",
                     cache_lock_problem() or "")  # fmt: skip
    assert list(cache.iterdir()) == []
    # a cache not made yet is tried in the folder it would be made in, and the default cache is named as such
    # (mutation review of papa/checks.py)
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "later"))
    assert "is on a file system without file locks" in (cache_lock_problem() or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    monkeypatch.delenv("PAPA_CACHE")
    assert (cache_lock_problem(cache) or "").startswith(f"the default download cache (PAPA_CACHE unset), {cache}, is "
                                                        f"on a file system without file locks")  # fmt: skip
    monkeypatch.setenv("PAPA_CACHE", str(cache))
    if os.geteuid() != 0:  # root writes anywhere
        cache.chmod(0o555)
        try:
            assert cache_lock_problem() is None  # read-only: left to the jobs, which only read it or say what to set
        finally:
            cache.chmod(0o755)
    records = tmp_path / ".snakemake"
    records.mkdir()
    note_lost(["results/x.parquet"], records)
    assert json.loads((records / LOST).read_text())["paths"] == ["results/x.parquet"]


@pytest.mark.slow  # a Snakemake start (~3 s): `make test`, not the fast tier
def test_snakemake_names_a_download_cache_without_file_locks(tmp_path):
    """The check runs where the workflow starts (common.smk), before any job: a Python whose flock fails as on a
    file system without locks (a sitecustomize on PYTHONPATH) has `snakemake -n` name PAPA_CACHE."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_NO_FLOCK)
    env = {**os.environ, "PAPA_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(site)}
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    p = subprocess.run([snakemake, "-n", "--configfile", "config/smoke.yaml"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    out = p.stdout + p.stderr
    assert f"PAPA_CACHE, {tmp_path / 'cache'}, is on a file system without file locks" in out, out


@pytest.mark.slow  # ~14 s of make and python starts: `make test`, not the fast tier (which it took over 2 minutes)
def test_make_report_and_clean_follow_the_results_key(tmp_path):
    from papa.records import MARKER

    configs = ("config/config.yaml", "config/smoke.yaml", "config/rehearsal.yaml")
    results = [yaml.safe_load((ROOT / c).read_text()).get("results", "results") for c in configs]
    assert {"results-smoke", "results-rehearsal"} <= set(results)  # the tests' runs, README's folders
    assert f"for d in {' '.join(repr(r) for r in results)}; do" in "\n".join(_make_n("clean"))
    moved, default = tmp_path / "moved.yaml", tmp_path / "default.yaml"
    moved.write_text("seed: 0\nresults: 'elsewhere/out'  # a comment\nmodels: {results: no}\n")
    default.write_text("seed: 0\n")  # no results key: the schema's default folder
    report = _make_n("report", f"CONFIG={moved}")
    assert report[0].startswith("d='elsewhere/out'; [ -e \"$d/.papa-records.json\" ]")  # a finished run's folder
    assert report[-1] == f".venv/bin/snakemake --configfile {moved} --report 'elsewhere/out'/report.html"
    assert "for d in 'elsewhere/out'; do" in "\n".join(_make_n("clean", f"CONFIG={moved}"))  # that config's only
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    p = subprocess.run(["make", "-n", "-o", ".venv/bin/snakemake", "clean"], cwd=ROOT, capture_output=True,
                       text=True, env={**env, "CONFIG": str(moved)})  # fmt: skip
    assert "for d in 'elsewhere/out'; do" in p.stdout, p  # CONFIG from the environment, as make run reads it
    # removed for real (in a folder of its own): papa's results folders, each as its config spells it, with the
    # Snakemake records of their files only: another config's results (here results-other) keep theirs, and with
    # them their marker's id (deleting .snakemake/ made every later start on them stop: ForeignResultsError);
    # '~' is not expanded (Snakemake writes a folder named '~' there, papa.checks refuses it)
    home = tmp_path / "home.yaml"
    home.write_text("results: ~/papa-results\n")
    work = tmp_path / "work"
    for folder in ("results/logs", "elsewhere/out", "~/papa-results/benchmarks", "results-other/tables"):
        (work / folder).mkdir(parents=True)
    (work / "elsewhere" / "out" / MARKER).write_text("{}")  # the Makefile spells the records' marker as papa does
    (work / "elsewhere" / "keep.txt").write_text("x")
    records = work / ".snakemake"
    (records / "metadata").mkdir(parents=True)
    (records / "incomplete").mkdir()
    (records / "papa-records-id").write_text('{"id": "abc"}')
    b64 = lambda path: base64.urlsafe_b64encode(path.encode()).decode()  # noqa: E731 (Snakemake's record names)
    made = ["results/tables/summary.parquet", "elsewhere/out/probe/x.parquet", "results-other/tables/probe.parquet"]
    for f in made:
        (records / "metadata" / b64(f)).write_text("{}")
    (records / "incomplete" / b64("results/probe/y.parquet")).write_text("")
    (records / "papa-lost.json").write_text(json.dumps({"paths": ["results/lambda/l.parquet", "results-other/a"]}))
    p = _make_clean(work, [str(default), str(moved), str(home)])
    assert p.returncode == 0, p
    assert sorted(e.name for e in work.iterdir()) == [".snakemake", "elsewhere", "results-other", "~"], p
    assert os.listdir(work / "~") == [] and os.listdir(work / "elsewhere") == ["keep.txt"]
    assert os.listdir(records / "metadata") == [b64(made[2])] and os.listdir(records / "incomplete") == []
    assert json.loads((records / "papa-lost.json").read_text()) == {"paths": ["results-other/a"]}
    assert (records / "papa-records-id").read_text() == '{"id": "abc"}'
    # a linked results folder: the link goes, and make clean says its target's files stay (papa refuses them, should
    # the link come back: tests/test_records.py)
    (tmp_path / "target" / "logs").mkdir(parents=True)
    (work / "results").symlink_to(tmp_path / "target")
    p = _make_clean(work, [str(default)])
    assert p.returncode == 0 and not (work / "results").exists() and (tmp_path / "target" / "logs").is_dir(), p
    assert f"make clean: results is a link to {tmp_path / 'target'}: the link is removed, not the files" in p.stdout
    forgotten = json.loads((records / "papa-forgotten.json").read_text())["paths"]
    assert forgotten == ["elsewhere/out", "results", "~/papa-results"]
    # a folder that holds no papa results (a results: set to the data's folder), or that is or holds the working
    # directory, is not removed: make clean says so and fails
    data, here = tmp_path / "data.yaml", tmp_path / "here.yaml"
    data.write_text("results: mydata\n")
    here.write_text(f"results: {tmp_path}\n")
    (work / "mydata").mkdir()
    (work / "mydata" / "train.csv").write_text("a,pos\n")
    p = _make_clean(work, [str(data), str(here)])
    assert p.returncode != 0 and (work / "mydata" / "train.csv").exists() and (tmp_path / "here.yaml").exists()
    assert "make clean: mydata holds no papa results (no .papa-records.json, logs/ or benchmarks/): not removed" in (
        p.stdout
    ), p
    assert f"make clean: {tmp_path} is or holds the working directory: not removed" in p.stdout, p
    # a folder with whitespace: make would split it into two paths and remove another folder; it refuses
    spaced = tmp_path / "spaced.yaml"
    spaced.write_text('results: "runs/papa results"  # papa.checks refuses it too\n')
    for target, var in (("clean", f"CLEAN_CONFIGS={spaced}"), ("report", f"CONFIG={spaced}")):
        p = subprocess.run(["make", "-n", "-o", ".venv/bin/snakemake", target, var], cwd=ROOT, capture_output=True,
                           text=True)  # fmt: skip
        assert p.returncode != 0 and "holds whitespace or a quote" in p.stderr and "rm -rf" not in p.stdout, p
    # the folder of the run make run starts, each file read as Snakemake reads it (JSON, else YAML, whatever its
    # name; python -m papa.records results-of): a line-wise read took `>-` as the folder, and gave the default's
    # folder, another run's, for a JSON file, a flow mapping, a byte-order mark or `results :`; several configs are
    # merged as Snakemake merges them (the last that sets it; each file's folder was removed)
    (tmp_path / "r.json").write_text(json.dumps({"seed": 0, "results": "results-json"}))
    (tmp_path / "json.yaml").write_text(json.dumps({"seed": 0, "results": "json-in-yaml"}))
    (tmp_path / "none.yaml").write_text("seed: 1\n")
    forms = {"block.yaml": "results: >-\n  runs/x\n", "next.yaml": "results:\n  runs/x\n",
             "anchor.yaml": "seed: &s runs/x\nresults: *s\n", "flow.yaml": "{seed: 0, results: runs/x}\n",
             "bom.yaml": "\ufeffresults: runs/x\n", "spaced_key.yaml": "results : runs/x\n",
             "yte.yaml": "__use_yte__: true\n?if True:\n  results: runs/x\n?else:\n  results: other\n"}  # fmt: skip
    for name, text in forms.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    for config, folder in ((f"{tmp_path / 'r.json'}", "results-json"), (f"{tmp_path / 'json.yaml'}", "json-in-yaml"),
                           (f"{moved} {tmp_path / 'none.yaml'}", "elsewhere/out"), (f"{default} {moved}",
                           "elsewhere/out"), *((str(tmp_path / n), "runs/x") for n in forms)):  # fmt: skip
        for target, says in (("clean", f"for d in '{folder}'; do"), ("report", f"--report '{folder}'/report.html")):
            p = subprocess.run(["make", "-n", "-o", ".venv/bin/snakemake", target, f"CONFIG={config}"], cwd=ROOT,
                               capture_output=True, text=True)  # fmt: skip
            assert p.returncode == 0 and says in p.stdout, (config, p)
    (tmp_path / "quote.yaml").write_text("results: 'a''b'\n")  # the folder a'b: make's quoting would make it ab
    p = subprocess.run(["make", "-n", "-o", ".venv/bin/snakemake", "clean", f"CONFIG={tmp_path / 'quote.yaml'}"],
                       cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    assert p.returncode != 0 and "holds whitespace or a quote" in p.stderr and "rm -rf" not in p.stdout, p
    for target in ("clean", "report"):
        p = subprocess.run(["make", "-n", "-o", ".venv/bin/snakemake", target, f"CONFIG={tmp_path / 'nosuch.yaml'}"],
                           cwd=ROOT, capture_output=True, text=True)  # fmt: skip
        assert p.returncode != 0 and "nosuch.yaml: No such file or directory" in p.stderr, p
        assert "rm -rf" not in p.stdout, p
    # another tool's YAML (the Slurm profile's config.yaml, environment.yml) sets no results: of its own: it gave the
    # default's folder, and make clean removed the default run's results
    for other in ("slurm/config.yaml", "environment.yml"):
        for target in ("clean", "report"):
            p = subprocess.run(["make", "-n", "-o", ".venv/bin/snakemake", target, f"CONFIG={other}"], cwd=ROOT,
                               capture_output=True, text=True)  # fmt: skip
            assert p.returncode != 0 and f"{other} is not a papa config: its keys" in p.stderr, p
            assert "rm -rf" not in p.stdout and "--report" not in p.stdout, p


@pytest.mark.slow  # Snakemake parses and lints the whole workflow (~13 s): `make test`, not the fast tier
def test_snakemake_lint_is_clean():
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    p = subprocess.run([snakemake, "--lint"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Congratulations" in p.stdout + p.stderr, p.stdout + p.stderr


def test_schema_dataset_keys_are_the_ones_papa_data_reads():
    from papa.data import SPEC_KEYS

    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    # plus `build`, which the workflow itself replaces with the paths of the files it builds
    assert set(schema["properties"]["datasets"]["additionalProperties"]["properties"]) == SPEC_KEYS | {"build"}


# ----------------------------------------------------------------------------- one orchestration layer


def test_stage_configs_read_a_snakemake_job():
    """Each rule's job maps onto its typed stage config (no positional parameters, no dicts for helpers)."""
    from types import SimpleNamespace as NS

    from papa import pipeline
    from papa.probe import TrainConfig

    wc = NS(
        model="m",
        task="t",
        constants="average_trained@wiki",
        selection="lambda",
        fraction_dynamic="0.0625",
        dataset="wiki",
        kind="toeplitz",
        n="64",
        split="train",
    )
    hp = {"lr": 1e-3, "batch_size": 8, "epochs": 2, "seed": 5, "max_grad_norm": 1, "backbone_dropout": True}
    job = NS(
        input=NS(constants="c.safetensors", lambdas=[], train="tr.parquet", validation="va.parquet"),
        output=["run/seed3.parquet", "run/seed4.parquet"],  # the seeds: the outputs
        wildcards=wc,
        config={"cache": {"strategy": "auto", "dtype": "float16", "batch_size": 64, "budget_mb": 10}},
        params=NS(
            model="hub/m",
            hp=hp,
            metrics=["accuracy"],
            batch_order="shared",
            first_seed=0,  # the sweep's first seed's batch order
            cache_dtype="float32",
            order_seed=7,
            compile="reduce-overhead",  # rule probe_trained's param (rule probe has none: eager)
        ),
    )
    probe = pipeline.ProbeStage._from_snakemake(job)
    assert probe["fraction_dynamic"] == 0.0625 and probe["trained_constants"] and probe["lambdas"] is None
    assert probe["batch_order"] == "shared" and probe["compile"] == "reduce-overhead"
    assert probe["seeds"] == [3, 4] and probe["first_seed"] == 0
    assert probe["hparams"] == TrainConfig(lr=1e-3, batch_size=8, epochs=2, seed=3, max_grad_norm=1.0)
    assert probe["cache"] == pipeline.CacheConfig(dtype="float32", budget_mb=10) and probe["order_seed"] == 7
    assert probe["labels"] == {"model": "m", "task": "t", "constants": "average_trained@wiki", "selection": "lambda"}
    assert probe["seed"] == 7  # the order_seed: it draws the random head order and max_train's examples
    pipeline.ProbeStage(**probe)  # every field given, none unknown
    # a baseline's job (fraction_dynamic 1, fixed matrices) has no constants input: none read; a job asking 8 MiB of
    # memory caches at most half of it (config budget_mb 10)
    baseline = NS(**{**vars(job), "input": NS(**{**vars(job.input), "constants": []}), "resources": NS(mem_mib=8)})
    baseline = pipeline.ProbeStage._from_snakemake(baseline)
    assert baseline["constants"] is None and baseline["cache"] == pipeline.CacheConfig(dtype="float32", budget_mb=4)
    lam = pipeline.LambdaStage._from_snakemake(
        NS(
            input=NS(constants="c.safetensors", train="tr.parquet", validation="va.parquet"),
            output=NS(lambdas="l.parquet", metrics="m.parquet"),
            wildcards=wc,
            params=NS(model="hub/m", hp={**hp, "max_train": 100}, metrics=["accuracy"], compile="default"),
        )
    )
    assert lam["compile"] == "default"
    assert lam["seed"] == 5 and lam["hparams"].seed == 5 and lam["max_train"] == 100 and lam["backbone_dropout"]
    pipeline.LambdaStage(**lam)
    avg = pipeline.AverageStage._from_snakemake(
        NS(
            input=NS(tokens="tok.parquet"),
            output=["toeplitz.safetensors"],
            wildcards=wc,
            params=NS(model="hub/m", batch_size=None, max_examples=None, seed=0),
        )
    )
    assert (avg["kind"], avg["corpus"], avg["batch_size"]) == ("toeplitz", "wiki", None)
    pipeline.AverageStage(**avg)
    mlm_hp = {
        "head": "probe",
        "lr": 5e-4,
        "batch_size": 8,
        "epochs": 1,
        "mask_prob": 0.15,
        "seed": 0,
        "lambda": {"extra_lr": 0.05},
    }
    mlm = pipeline.MLMStage._from_snakemake(
        NS(
            input=NS(constants="c.safetensors", train="tr.parquet", validation="va.parquet"),
            output=NS(scores="s.parquet", lambdas="l.parquet"),
            wildcards=wc,
            params=NS(model="hub/m", hp=mlm_hp, fraction_dynamic=[1, 0.5, 0], seeds=[0, 1, 2]),
        )
    )
    assert mlm["fraction_dynamic"] == [1.0, 0.5, 0.0] and mlm["labels"] == {"model": "m", "dataset": "wiki"}
    assert mlm["seeds"] == [0, 1, 2]  # a probe per sweep seed
    assert mlm["hparams"].extra_lr is None and mlm["lambda_hparams"].extra_lr == 0.05
    pipeline.MLMStage(**mlm)
    tok = pipeline.TokenizeStage._from_snakemake(
        NS(
            input=NS(split="d/wiki/train.parquet"),
            output=["t.parquet"],
            wildcards=wc,
            params=NS(model="hub/m", layout="papa", encoding={"single_cap": "paper"}, input_shape="single"),
        )
    )
    assert (tok["data_dir"], tok["max_length"], tok["split"]) == ("d/wiki", 64, "train")
    assert tok["input_shape"] == "single"
    pipeline.TokenizeStage(**tok)
    # the labels' order is the output columns' (each inserted first: constants, task, model, ...)
    assert list(lam["labels"]) == ["model", "task", "constants"]
    build = {"shape": "mrpc", "n_train": "10", "n_validation": 5, "seed": "2"}
    data = pipeline.BuildDataStage._from_snakemake(NS(output=["d/toy"], params=NS(build=build)))
    assert data == {"shape": "mrpc", "out": "d/toy", "n_train": 10, "n_validation": 5, "seed": 2}
    pipeline.BuildDataStage(**data)


def test_precision_reaches_the_stages_that_run_a_model_and_is_undone():
    """Config ``precision`` -> the rules' param -> `ModelStage.precision` -> CUDA's float32 matmul setting while
    the stage function runs (`runs_model`), restored after, also when it fails; CPU products stay exact."""
    from types import SimpleNamespace as NS

    import torch

    from papa import pipeline
    from papa.models import cuda_matmul_precision

    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32, torch.get_float32_matmul_precision()
    job = NS(log=[], threads=1, params=NS(precision="tf32"), input=["a.parquet", "b.safetensors"])
    assert pipeline.ProbeStage._job_fields(job) == {"log": None, "threads": 1, "code": None, "precision": "tf32",
                                                    "inputs": ("a.parquet", "b.safetensors")}  # fmt: skip
    data_free = pipeline.AverageStage._job_fields(NS(log=[], threads=1, params=NS(precision=None)))
    assert pipeline.AverageStage(model="m", kind="zeros", tokens="t", out="o", **data_free).precision == "fp32"
    assert "precision" not in pipeline.TokenizeStage._job_fields(job)  # runs no model
    job.log = ["results/logs/probe/x.log"]  # the job's log: where setup writes
    assert pipeline.ProbeStage._job_fields(job)["log"] == "results/logs/probe/x.log"
    for stage_fn in (pipeline.average_constants, pipeline.learn_lambda, pipeline.probe_heads, pipeline.mlm_curves):
        assert stage_fn.__wrapped__, stage_fn  # every stage function that loads the encoder applies it

    seen = []

    @pipeline.runs_model
    def stage_fn(stage, fail=False):
        seen.append(matmul.fp32_precision)
        if fail:
            raise RuntimeError("the stage failed")

    stage_fn(NS(precision="tf32"))
    stage_fn(NS(precision="fp32"))
    with pytest.raises(RuntimeError, match="the stage failed"):
        stage_fn(NS(precision="tf32"), fail=True)
    assert seen == ["tf32", "ieee", "tf32"]
    assert (matmul.allow_tf32, torch.get_float32_matmul_precision()) == before  # restored, also after the failure
    with pytest.raises(ValueError, match="precision must be one of fp32, tf32, got 'bf16'"):
        stage_fn(NS(precision="bf16"))
    a = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))
    cpu_setting = torch.backends.mkldnn.matmul.fp32_precision
    with cuda_matmul_precision("tf32"):
        tf32_cpu = a @ a
        # torch's own getters still answer (Inductor asks): no mix of its legacy and new settings
        assert torch.get_float32_matmul_precision() == "high" and matmul.allow_tf32
        assert torch.backends.mkldnn.matmul.fp32_precision == cpu_setting
    assert torch.equal(tf32_cpu, a @ a)  # the CPU's products are exactly as without it
    # a notebook that turned TF32 on itself gets it back after a float32 stage, not torch's default (mutation review)
    matmul.allow_tf32 = True
    try:
        with cuda_matmul_precision("fp32"):
            assert not matmul.allow_tf32
        assert matmul.allow_tf32
    finally:
        matmul.allow_tf32 = before[0]


@pytest.mark.slow  # a fresh Python process importing papa whole (~3 s): `make test`, not the fast tier
def test_every_submodule_is_reachable_after_a_plain_import():
    """`papa.probe.run_probe` after `import papa`, as the README writes it (it raised AttributeError), for every
    module of the package, and `dir(papa)` lists them and the exported names; names stay lazy: importing papa
    (or listing it) imports no submodule."""
    modules = sorted(p.stem if p.is_file() else p.name for p in (ROOT / "papa").iterdir()
                     if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file())  # fmt: skip
    code = (
        "import sys, papa\n"
        "assert not [m for m in sys.modules if m.startswith('papa.')], sorted(sys.modules)\n"
        f"missing = (set({modules!r}) | set(papa.__all__)) - set(dir(papa))\n"  # tab completion, help(papa)
        "assert not missing, sorted(missing)\n"
        "assert not [m for m in sys.modules if m.startswith('papa.')], 'dir(papa) imported submodules'\n"
        f"for m in {modules!r}:\n"
        "    assert getattr(papa, m).__name__ == 'papa.' + m, m\n"
        "print(papa.probe.run_probe.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "run_probe", out.stderr[-2000:]


def test_papa_lists_exactly_its_modules_and_refuses_other_names():
    """What the slow test above cannot see in one process: the lazy submodule list is exactly the package's modules
    (a name with no module behind it would be listed by `dir(papa)` and fail on use), `dir(papa)` keeps the module's
    own attributes beside the lazy ones, and a misspelt name is an AttributeError naming it, not a silent None
    (``hasattr`` and ``from papa import lod_encoder`` rely on it)."""
    import papa

    modules = {p.stem if p.is_file() else p.name for p in (ROOT / "papa").iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}  # fmt: skip
    assert papa._SUBMODULES == modules
    assert set(vars(papa)) <= set(dir(papa))  # __doc__, __getattr__, ... as well as the lazy names
    with pytest.raises(AttributeError, match="module 'papa' has no attribute 'lod_encoder'"):
        papa.lod_encoder  # noqa: B018
    assert not hasattr(papa, "lod_encoder")


def test_what_type_checkers_see_of_papa_is_what_runs():
    """``papa.__all__`` and the ``TYPE_CHECKING`` imports are written out for editors and type checkers (a computed
    ``__all__`` left ``papa.load_encoder`` typed Any: review AG); they name exactly the lazily exported names, each
    from the module it is loaded from."""
    import ast

    import papa

    tree = ast.parse((ROOT / "papa/__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    static = {a.name: n.module for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert static == papa._EXPORTS and papa.__all__ == sorted(papa._EXPORTS)


def test_the_readme_names_every_public_name_of_papa_pipeline():
    """README.md documents the library for notebooks, but 40 public names of `papa.pipeline` (the stage configs
    and helpers without a leading underscore) had no word there. Its table of them is held to the module's own
    top-level names (functions, classes, constants; not its logger), both ways: a new public name needs a line
    there (or a leading underscore), and a name gone leaves none behind."""
    import ast

    tree = ast.parse((ROOT / "papa/pipeline.py").read_text(encoding="utf-8"))
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {t.id for t in targets if isinstance(t, ast.Name)}
    public = {name for name in defined if not name.startswith("_")} - {"log"}
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    head = "`papa.pipeline`'s public names"
    assert text.count(head) == 1, head
    rows = text[text.index(head) :].split("\n\n")[1].splitlines()
    assert rows[:2] == ["| names | what |", "| --- | --- |"], rows[:2]
    listed = [name for row in rows[2:] for name in re.findall(r"`(\w+)`", row.split(" | ")[0])]
    assert len(listed) == len(set(listed)), sorted(n for n in listed if listed.count(n) > 1)
    assert not public - set(listed), (
        f"public names of papa.pipeline without a README line: {sorted(public - set(listed))}"
    )
    assert not set(listed) - public, f"README lines for names papa.pipeline lacks: {sorted(set(listed) - public)}"


def test_every_papa_name_the_readmes_give_exists():
    """The READMEs send notebooks to ``papa.<module>.<name>`` (97 such names in README.md alone); one renamed or
    removed in the library left its mention pointing at nothing, and no test read them. Each resolves to a module or
    an attribute of one, or is the metadata key the library writes into a split's Parquet footer (``papa.task``)."""
    import importlib

    from papa.io import SPLIT_META_KEY

    keys = {SPLIT_META_KEY.decode()}
    missing = []
    for doc in ("README.md", "data/README.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        names = sorted(set(re.findall(r"(?<![\w/.])papa(?:\.[A-Za-z_]\w*)+", text)))
        assert len(names) > (50 if doc == "README.md" else 0), (doc, names)
        for name in sorted(set(names) - keys):
            parts, depth = name.split("."), 1  # parts[:depth] is the module, the rest its attributes
            while depth < len(parts) and _is_module(".".join(parts[: depth + 1])):
                depth += 1
            obj = importlib.import_module(".".join(parts[:depth]))
            for part in parts[depth:]:
                if not hasattr(obj, part):
                    missing.append(f"{doc}: {name}")
                    break
                obj = getattr(obj, part)
    assert not missing, f"names the READMEs give that papa lacks: {missing}"


def _is_module(name: str) -> bool:
    """Whether ``name`` is an importable module (``papa.checks.DATASET_DEFAULTS`` is an attribute)."""
    import importlib

    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.cuda  # its device branch: make test-cuda runs it with the GPU visible
def test_the_readmes_library_examples_run_as_written(tmp_path, monkeypatch):
    """The README's Python blocks of "The library", run in order as written, from an empty namespace: they load
    the small offline task they use (the texts and labels were a reader's to guess: review AZ). On a GPU machine
    too, where `load_encoder` puts the model on "cuda": the first block called it on ``enc.model_inputs()``,
    CPU tensors, a device mismatch (review cr)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## The library", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 2, "the library section lost its examples"
    ns = {}
    monkeypatch.chdir(tmp_path)  # the first block saves a file
    for block in blocks:
        exec(compile(block, "README.md", "exec"), ns)  # noqa: S102
    assert len(ns["hidden"]) == 7 and {r["seed"] for r in ns["rows"]} == {0, 1, 2}


def test_the_readmes_config_examples_validate(tmp_path, monkeypatch):
    """Every YAML block of the README, put into config/config.yaml as a reader would (its datasets added, its
    models and tasks in place of the default's, the analyses on every task), passes the workflow's validation:
    the local-dataset example lacked the task's required ``probe`` block."""
    import copy
    import textwrap

    from papa.checks import validate_config

    readme = (ROOT / "README.md").read_text()
    found = [(readme[: m.start()].rstrip().rsplit("\n\n", 1)[-1], textwrap.dedent(m.group(1)))
             for m in re.finditer(r"```yaml\n(.*?)```", readme, re.S)]  # fmt: skip
    assert len(found) >= 2, "the README lost its config examples"
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    monkeypatch.chdir(tmp_path)  # where the reader's files are (validation checks that local files are there)
    copies = 0
    for before, block in found:
        fragment = yaml.safe_load(block)
        if "copy of `config/paper.yaml`" in before:  # the hub example: keys of a copy of paper.yaml, as it says
            config = copy.deepcopy(paper)
            config.update({k: v for k, v in fragment.items() if k != "analyses"})
            for key, value in fragment.get("analyses", {}).items():
                config["analyses"][key].update(value)
            validate_config(config)
            copies += 1
            continue
        config = copy.deepcopy(base)
        for spec in fragment.get("datasets", {}).values():
            for key in ("train", "validation", "test"):
                if spec.get("source") == "local" and spec.get(key):
                    (tmp_path / spec[key]).parent.mkdir(parents=True, exist_ok=True)
                    # not empty (an empty one is refused), each its own (a validation file that holds the train
                    # file's bytes is refused), a CSV/TSV header with the columns the spec names (papa.data.local.
                    # header_problems)
                    sep = {".csv": ",", ".tsv": "\t"}.get(Path(spec[key]).suffix)
                    cols = [spec.get(c, d) for c, d in (("text_column", "text"), ("text_b_column", None),
                                                        ("label_column", "label"), ("id_column", None))]  # fmt: skip
                    cols = [c for c in cols if c]
                    text = f"{sep.join(cols)}\n{sep.join([spec[key]] * len(cols))}\n" if sep else f"a\n{spec[key]}\n"
                    (tmp_path / spec[key]).write_text(text)
        assert set(fragment) <= {"models", "datasets", "tasks"}, block  # what this test knows how to put in
        config["datasets"].update(fragment.get("datasets", {}))
        config.update({k: fragment[k] for k in ("models", "tasks") if k in fragment})
        config["analyses"]["tasks"] = None
        validate_config(config)
    assert copies == 1


def test_the_paper_configs_commented_example_of_another_glue_task_validates():
    """config/paper.yaml shows, commented out, how to add one of GLUE's other hub datasets (rte) and its task:
    uncommented, it passes the workflow's validation and adds that dataset and task, nothing else."""
    from papa.checks import validate_config

    text = (ROOT / "config" / "paper.yaml").read_text()
    example = re.sub(r"^  #   ", "    ", re.sub(r"^  # (rte:)", r"  \1", text, flags=re.M), flags=re.M)
    paper, config = yaml.safe_load(text), yaml.safe_load(example)
    assert config["datasets"] == {**paper["datasets"], "rte": {"source": "hub"}}
    assert set(config["tasks"]) - set(paper["tasks"]) == {"rte"} and config["tasks"]["rte"]["dataset"] == "rte"
    validate_config(config)


def test_the_paper_configs_commented_head_orders_scope_is_the_papers_fig5():
    """config/paper.yaml shows, commented out, analyses.head_orders_models/head_orders_tasks: uncommented beside the
    paper's two analysed models, it validates and keeps the head orders to RoBERTa-base on MNLI (the paper's Fig. 5),
    every other run as with analyses.models alone."""
    from papa.checks import probe_runs, validate_config

    text = (ROOT / "config" / "paper.yaml").read_text()
    scoped = re.sub(r"^  # (head_orders_(models|tasks): )", r"  \1", text, flags=re.M)
    assert scoped.count("\n  head_orders_") == 2
    runs = {}
    for name, source in (("models", text), ("scoped", scoped)):
        config = yaml.safe_load(source)
        config["analyses"]["models"] = ["roberta-base", "roberta-large"]
        runs[name] = probe_runs(validate_config(config, warn=lambda m: None))
    orders = {s for m, t, c, s, f in runs["models"]} - {"lambda"}
    assert {(m, t) for m, t, c, s, f in runs["scoped"] if s in orders} == {("roberta-base", "mnli")}
    assert [r for r in runs["models"] if r[3] not in orders or r[:2] == ("roberta-base", "mnli")] == runs["scoped"]


def test_every_global_the_workflow_defines_is_read():
    """A name the Snakefile or a rules file assigns at its top level is read somewhere in the workflow (or by a test,
    through the parsed workflow's globals): issue 15, no dead code (common.smk kept a name for ``SWEEP["constants"]``
    that nothing read, beside the ``SWEEP["constants"]`` the rules read)."""
    files = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in files)
    readers = text + "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "tests").glob("*.py")))
    names = re.findall(r"^([A-Za-z_][A-Za-z0-9_]*) *=[^=]", text, re.M)
    unread = [n for n in names if len(re.findall(rf"(?<![\w.]){n}\b", readers)) < 2]
    assert unread == []
