"""Run the workflow through a real (single-node) Slurm cluster.

The cluster is started with ``scripts/slurm-cluster.sh start`` (Debian/Ubuntu
packages slurmctld, slurmd, slurm-client, munge; needs root) and every daemon
this session started is stopped again at the end, also when a test fails.

Without root, a cluster that is already up is used (CI: ``sudo
scripts/slurm-cluster.sh start`` first); with neither, or without apt-get and
no Slurm installed, the cluster tests are skipped; with ``REQUIRE_SLURM=1``
they fail instead.

The test cluster has no GPUs, so every run here sets ``PAPA_SLURM_GPUS=0``,
the switch of the ``slurm`` profile that drops the GPU requests of the model
rules; the command itself stays the user-facing ``snakemake --profile slurm``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import real_slurm_path
from tests.test_workflow import (
    assert_jobs_read_their_inputs,
    copy_repo,
    copy_without_task,
    ctrl_c_works,
    dry_run_jobs,
    ran_rules,
    recording_reads,
)

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPT = REPO / "scripts" / "slurm-cluster.sh"
TOY_SNAKEFILE = REPO / "tests" / "slurm_toy" / "Snakefile"
PROFILE_DIR = REPO / "slurm"
PIPELINE_SNAKEFILE = REPO / "Snakefile"
SMOKE_CONFIG = REPO / "config" / "smoke.yaml"
# <results>/tables/..., <results> being `results:` of the config (default results)
PIPELINE_TABLES = ("probe.parquet", "summary.parquet", "lambdas.parquet")
# rules that must run in the snakemake process, not as Slurm jobs
LOCAL_RULES = ("aggregate", "plot")
# columns that legitimately differ between two runs of the same pipeline,
# matched as whole words of the column name ("run_seconds", "host", ...)
VOLATILE_WORDS = {
    "time",
    "times",
    "timing",
    "seconds",
    "secs",
    "duration",
    "elapsed",
    "date",
    "timestamp",
    "host",
    "hostname",
    "node",
    "pid",
    "jobid",
    "slurm",
    "path",
    "device",
}

# Generous: on CI's two cores these jobs queue behind three pytest workers' model runs (a one-line toy job
# once took 4 min 40 s from submission to completion there, and the 300 s limit failed a CI run); a healthy
# run takes about a minute, and a hung one still fails.
TOY_TIMEOUT_S = 900
FAIL_TIMEOUT_S = 480
PIPELINE_TIMEOUT_S = int(os.environ.get("PAPA_SLURM_PIPELINE_TIMEOUT", "1800"))

SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+)")
RULE_HEADER = re.compile(r"^(local)?rule (\w+):\s*$")
JOBID_LINE = re.compile(r"^\s+jobid: (\d+)\s*$")
RUN_ID = re.compile(r"SLURM run ID: (\S+)")


# ----------------------------------------------------------------- helpers
def _unavailable(reason: str):
    if os.environ.get("REQUIRE_SLURM") == "1":
        pytest.fail(f"REQUIRE_SLURM=1 but {reason}")
    pytest.skip(reason)


def _snakemake_exe() -> str:
    exe = Path(sys.executable).with_name("snakemake")
    if exe.exists():
        return str(exe)
    found = shutil.which("snakemake")
    if found is None:
        _unavailable("the snakemake command is not installed")
    return found


def _check_plugin():
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        _unavailable("snakemake-executor-plugin-slurm is not installed")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # a user profile or Slurm job context must not leak into the runs
    for key in list(env):
        if key.startswith("SLURM_") or key == "SNAKEMAKE_PROFILE":
            del env[key]
    env["PAPA_SLURM_GPUS"] = "0"  # the test cluster has no GPUs
    # the venv's bin first, so jobs find the same snakemake/python
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{real_slurm_path(env.get('PATH', ''))}"
    env.update(extra)
    return env


class Run:
    def __init__(self, args, returncode, output, seconds, workdir):
        self.args, self.returncode, self.output = args, returncode, output
        self.seconds, self.workdir = seconds, workdir

    def tail(self, n: int = 80) -> str:
        return "\n".join(self.output.splitlines()[-n:])


def run_snakemake(workdir: Path, *args: str, timeout: int, env=None) -> Run:
    """Run snakemake in workdir; on timeout interrupt it (it cancels its Slurm
    jobs), then kill it and scancel what is left of its run."""
    cmd = [_snakemake_exe(), *args]
    log = workdir / f"snakemake-{int(time.time() * 1000)}.out"
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=env or _env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=ctrl_c_works,  # the timeout's Ctrl-C must reach it under pytest-xdist
        )
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            output = log.read_text()
            m = RUN_ID.search(output)
            if m and shutil.which("scancel"):
                subprocess.run(["scancel", "--name", m.group(1)], check=False)
            pytest.fail(f"{' '.join(cmd)} did not finish within {timeout} s\n" + "\n".join(output.splitlines()[-80:]))
    return Run(cmd, returncode, log.read_text(), time.monotonic() - start, workdir)


def slurm_jobs_of(run: Run) -> dict[str, tuple[str, str]]:
    """Map Slurm job id -> (rule, snakemake job id) for every job that run
    submitted, from its main log; assert every non-local job was submitted."""
    rule_of_job: dict[str, tuple[str, bool]] = {}
    current = None
    for line in run.output.splitlines():
        header = RULE_HEADER.match(line)
        if header:
            current = (header.group(2), header.group(1) is not None)
            continue
        jobid = JOBID_LINE.match(line)
        if jobid and current is not None:
            rule_of_job.setdefault(jobid.group(1), current)
            current = None
    submitted = {}
    for sm_jobid, slurm_jobid in SUBMITTED.findall(run.output):
        rule, local = rule_of_job[sm_jobid]
        assert not local, f"local rule {rule} was submitted to Slurm"
        submitted[slurm_jobid] = (rule, sm_jobid)
    remote = {j: r for j, (r, local) in rule_of_job.items() if not local}
    assert remote, "the run executed no Slurm job at all:\n" + run.tail()
    not_submitted = {j: r for j, r in remote.items() if j not in {s for _, s in submitted.values()}}
    assert not not_submitted, f"jobs ran without a Slurm submission: {not_submitted}\n" + run.tail()
    return submitted


def squeue_memory() -> dict[str, str]:
    """Slurm job id -> the memory it asked for (squeue's MIN_MEMORY, e.g. ``1200M``), for the jobs slurmctld
    knows (finished ones for MinJobAge)."""
    out = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--format=%i|%m"], capture_output=True, text=True, check=True
    ).stdout
    return dict(line.strip().split("|", 1) for line in out.splitlines())


def squeue_states() -> dict[str, tuple[str, str, str]]:
    """Slurm job id -> (state, partition, comment) of the jobs slurmctld knows
    (finished ones stay for MinJobAge = 300 s)."""
    out = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--format=%i|%T|%P|%k"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    states = {}
    for line in out.splitlines():
        jobid, state, partition, comment = line.strip().split("|", 3)
        states[jobid] = (state, partition, comment)
    return states


def copy_toy(dst: Path) -> Path:
    dst.mkdir(parents=True)
    shutil.copy(TOY_SNAKEFILE, dst / "Snakefile")
    shutil.copytree(PROFILE_DIR, dst / "slurm")
    return dst


# ----------------------------------------------------------------- fixtures
def _cluster_is_up() -> bool:
    """A reachable Slurm controller with a usable node (e.g. started beforehand
    with `sudo scripts/slurm-cluster.sh start`)."""
    if shutil.which("sinfo") is None:
        return False
    try:
        out = subprocess.run(
            ["sinfo", "--noheader", "--Node", "--format=%T"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    states = out.stdout.split()
    return out.returncode == 0 and any(s in ("idle", "mixed", "allocated", "completing") for s in states)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A running single-node cluster. As root: started with
    scripts/slurm-cluster.sh, and the daemons this session started are stopped
    at the end (also when a test or the start itself fails). Not root: a
    cluster that is already up is used as it is."""
    if not sys.platform.startswith("linux"):
        _unavailable("the Slurm test cluster needs Linux")
    _check_plugin()
    if os.geteuid() != 0:
        if _cluster_is_up():
            yield None
            return
        _unavailable(
            "starting a Slurm test cluster needs root (or start one first: sudo scripts/slurm-cluster.sh start)"
        )
    installed = all(shutil.which(b) or Path("/usr/sbin", b).exists() for b in ("slurmctld", "slurmd", "sinfo"))
    if not installed and shutil.which("apt-get") is None:
        _unavailable("Slurm is not installed and apt-get is not available")

    # pid records of this session only: `stop` then stops what this session
    # started and leaves daemons that were already running alone
    run_dir = tmp_path_factory.mktemp("slurm-run")
    env = dict(os.environ, PAPA_SLURM_RUN_DIR=str(run_dir), PATH=real_slurm_path(os.environ.get("PATH", "")))
    try:
        started = subprocess.run(
            ["bash", str(CLUSTER_SCRIPT), "start"],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if started.returncode != 0:
            pytest.fail("scripts/slurm-cluster.sh start failed:\n" + started.stdout + started.stderr)
        yield run_dir
    finally:
        if (run_dir / "slurmctld.pid").exists() and shutil.which("scancel"):
            # our own controller: no job of this session may outlive it
            subprocess.run(["scancel", "--user", "root"], check=False, timeout=30)
        subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop"], env=env, check=False, timeout=120)


# ----------------------------------------------------------------- profile
def test_profile_gpu_switch_dry_run(tmp_path):
    """PAPA_SLURM_GPUS=N sets the GPU rules' request; unset, the rules' own (the config's resources.<rule>.gpu:
    the toy's probe asks for none) decides: the profile used to ask for one GPU whatever the config said, so the
    README's smoke run failed on a CPU cluster. (Dry run: needs no cluster.)"""
    _check_plugin()
    wd = copy_toy(tmp_path / "toy")
    gpu = run_snakemake(wd, "--profile", "slurm", "-n", timeout=120, env=_env(PAPA_SLURM_GPUS="1"))
    assert gpu.returncode == 0, gpu.tail()
    cpu = run_snakemake(wd, "--profile", "slurm", "-n", timeout=120)
    assert cpu.returncode == 0, cpu.tail()
    unset = _env()
    del unset["PAPA_SLURM_GPUS"]
    own = run_snakemake(wd, "--profile", "slurm", "-n", timeout=120, env=unset)
    assert own.returncode == 0, own.tail()

    def probe_gpus(run):
        found = {j["resources"].get("gpu") for rule, j in dry_run_jobs(run.output) if rule == "probe"}
        assert found, run.tail()
        return found

    assert probe_gpus(gpu) == {"1"}
    assert probe_gpus(cpu) == {"0"}
    assert probe_gpus(own) == {None}
    # prepare is no GPU rule
    assert "gpu=" not in gpu.output.split("rule probe:")[0]


def test_the_profile_writes_the_model_rules_gpus_and_keeps_a_users_rules(monkeypatch):
    """The profile's set-resources, as YTE renders it: the GPU request of the model rules (papa.checks.GPU_RULES)
    only with PAPA_SLURM_GPUS, nothing without it (an empty entry fails Snakemake's --set-resources), and a user's
    own per-rule entries (RULES) with either. A second set-resources key a user added beside the old
    conditional one replaced it, or was replaced by it, silently; runtime/mem_mb defaults reached no job."""
    import yte

    from papa.checks import GPU_RULES

    text = (REPO / "slurm" / "config.yaml").read_text()
    monkeypatch.delenv("PAPA_SLURM_GPUS", raising=False)
    assert "set-resources" not in yte.process_yaml(text)
    assert "runtime" not in (yte.process_yaml(text).get("default-resources") or {})  # the rules ask for their own
    for n in ("1", "0"):
        monkeypatch.setenv("PAPA_SLURM_GPUS", n)
        assert yte.process_yaml(text)["set-resources"] == {r: {"gpu": int(n)} for r in GPU_RULES}
    own = text.replace("    RULES = {}\n", '    RULES = {"probe": {"slurm_partition": "gpu", "gpu": 2}, "tokenize": '
                                             '{"slurm_partition": "cpu"}}\n')  # fmt: skip
    assert own != text
    got = yte.process_yaml(own)["set-resources"]
    assert got["probe"] == {"slurm_partition": "gpu", "gpu": 2} and got["tokenize"] == {"slurm_partition": "cpu"}
    assert got["mlm"] == {"gpu": 0}
    monkeypatch.delenv("PAPA_SLURM_GPUS")
    assert yte.process_yaml(own)["set-resources"] == {"probe": {"slurm_partition": "gpu", "gpu": 2},
                                                      "tokenize": {"slurm_partition": "cpu"}}  # fmt: skip


def test_the_profile_reads_without_papa_installed():
    """The profile is read before the Snakefile puts the checkout on sys.path, and environment.yml's environment
    does not install papa: an import of papa there stopped `snakemake --profile slurm` with ModuleNotFoundError.
    Its own copies (the GPU count's check, the model rules) are held to papa.checks' by the tests here."""
    text = (REPO / "slurm" / "config.yaml").read_text()
    assert not re.search(r"^\s*-?\s*(from|import)\s+papa\b", text, re.MULTILINE)


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "²"])
def test_a_bad_gpu_count_names_the_variable(monkeypatch, value):
    """PAPA_SLURM_GPUS that is not a whole number >= 0 stops the profile's rendering with a message naming the
    variable and what to give: "abc" failed in int() without naming it, "-1" only at Snakemake's resource check
    ("Resource 'gpu' was given value '-1'"), review hAU's item 17. Whitespace around a number is dropped, and an
    empty value is an unset one."""
    import yte

    from papa.checks import GPU_RULES, slurm_gpus

    text = (REPO / "slurm" / "config.yaml").read_text()
    monkeypatch.setenv("PAPA_SLURM_GPUS", value)
    says = rf"PAPA_SLURM_GPUS='{re.escape(value)}' is not a whole number >= 0: give"
    with pytest.raises(Exception, match=says):
        yte.process_yaml(text)
    with pytest.raises(ValueError, match=says):  # the rules' check (common.smk's gpu_model) is the profile's
        slurm_gpus(value)
    monkeypatch.setenv("PAPA_SLURM_GPUS", " 2 ")
    assert yte.process_yaml(text)["set-resources"] == {r: {"gpu": slurm_gpus(" 2 ")} for r in GPU_RULES}
    monkeypatch.setenv("PAPA_SLURM_GPUS", "")
    assert "set-resources" not in yte.process_yaml(text) and slurm_gpus("") is None


def test_snakemake_reads_the_gpu_count_or_names_the_variable(monkeypatch):
    """The same through Snakemake's own reading of a profile (snakemake.profiles.ProfileConfigFileParser, what
    ``snakemake --profile slurm`` runs before anything else; in process: a dry run's start-up takes ~10 s here), as a
    user meets it: "Couldn't parse config file: ... PAPA_SLURM_GPUS='abc' is not a whole number >= 0", and the valid
    values as before: unset, 0, 1, 2 (`snakemake --profile slurm -n` was checked by hand with each)."""
    from configargparse import ConfigFileParserException
    from snakemake.profiles import ProfileConfigFileParser

    from papa.checks import GPU_RULES

    def read():
        with open(REPO / "slurm" / "config.yaml") as f:
            return ProfileConfigFileParser().parse(f)

    for value in ("abc", "-1"):
        monkeypatch.setenv("PAPA_SLURM_GPUS", value)
        with pytest.raises(ConfigFileParserException, match=rf"PAPA_SLURM_GPUS='{value}' is not a whole number >= 0"):
            read()
    monkeypatch.delenv("PAPA_SLURM_GPUS")
    assert "set-resources" not in read() and read()["executor"] == "slurm"
    for n in ("0", "1", "2"):
        monkeypatch.setenv("PAPA_SLURM_GPUS", n)
        assert sorted(read()["set-resources"]) == sorted(f"{rule}:gpu={n}" for rule in GPU_RULES)


# ----------------------------------------------------------------- cluster
def test_toy_workflow_runs_through_slurm(slurm_cluster, tmp_path):
    wd = copy_toy(tmp_path / "toy")
    # the partition switch of the profile (the test cluster's only partition
    # is "main"; the other tests use the cluster default)
    run = run_snakemake(wd, "--profile", "slurm", timeout=TOY_TIMEOUT_S, env=_env(PAPA_SLURM_PARTITION="main"))
    print(f"toy workflow through Slurm: {run.seconds:.1f} s end to end")
    assert run.returncode == 0, run.tail()

    submitted = slurm_jobs_of(run)
    assert sorted(r for r, _ in submitted.values()) == ["prepare", "prepare", "probe", "probe"]

    # slurmctld really ran them (finished jobs stay visible for MinJobAge)
    states = squeue_states()
    for slurm_jobid, (rule, _) in submitted.items():
        state, partition, comment = states[slurm_jobid]
        assert state == "COMPLETED", (slurm_jobid, state)
        assert partition == "main", (slurm_jobid, partition)
        assert comment.startswith(f"rule_{rule}"), (slurm_jobid, comment)

    # each job recorded the Slurm job id it ran under; aggregate ran locally
    rows = [line.split("\t") for line in (wd / "toy_results" / "summary.tsv").read_text().splitlines()]
    seen = {}
    for step, sample, slurm_jobid, _host in rows:
        seen[(step, sample)] = slurm_jobid
    assert set(seen) == {("prepare", "a"), ("prepare", "b"), ("probe", "a"), ("probe", "b"), ("aggregate", "all")}
    assert seen.pop(("aggregate", "all")) == "", "aggregate must be a local rule"
    assert set(seen.values()) == set(submitted), (seen, submitted)


def test_gpu_request_reaches_sbatch(slurm_cluster, tmp_path):
    """Without the switch the profile asks sbatch for a GPU (--gpus=1), which
    this GPU-less cluster rejects: the run fails promptly, naming the gres."""
    wd = copy_toy(tmp_path / "toy")
    run = run_snakemake(
        wd,
        "--profile",
        "slurm",
        "toy_results/probe/a.tsv",
        timeout=FAIL_TIMEOUT_S,
        env=_env(PAPA_SLURM_GPUS="1"),
    )
    assert run.returncode != 0, run.tail()
    assert "--gpus=1" in run.output, run.tail()
    assert re.search(r"gres|generic resource", run.output, re.IGNORECASE), run.tail()


def test_failing_job_fails_workflow_promptly(slurm_cluster, tmp_path):
    wd = copy_toy(tmp_path / "toy")
    run = run_snakemake(wd, "--profile", "slurm", "--config", "fail=probe", timeout=FAIL_TIMEOUT_S)
    print(f"failing toy workflow through Slurm: exit {run.returncode} after {run.seconds:.1f} s")
    assert run.returncode != 0, run.tail()
    assert run.seconds < FAIL_TIMEOUT_S
    assert "Error in rule probe" in run.output, run.tail()
    assert re.search(r"SLURM-job '\d+' failed, SLURM status is: 'FAILED'", run.output), run.tail()
    # show-failed-logs: the job's own error message reaches the console
    assert "toy probe failing on purpose" in run.output, run.tail()
    assert not (wd / "toy_results" / "summary.tsv").exists()
    # nothing of this run is left queued or running
    states = squeue_states()
    for slurm_jobid in SUBMITTED.findall(run.output):
        state = states.get(slurm_jobid[1], ("GONE",))[0]
        assert state not in ("PENDING", "RUNNING", "CONFIGURING"), (slurm_jobid, state)


def _submit_driver(wd: Path, log: Path) -> str:
    """Snakemake run on the toy workflow as a Slurm job (its prepare jobs sleep); its Slurm job id."""
    return subprocess.run(
        ["sbatch", "--parsable", "--job-name", "papa-test-driver", "--cpus-per-task", "1", "--mem", "500",
         "--time", "15", "--chdir", str(wd), "--output", str(log),
         "--wrap", f"exec {_snakemake_exe()} --profile slurm --config sleep=300"],
        env=_env(), capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip().split(";")[0]  # fmt: skip


def _wait_for_a_running_job(driver: str, log: Path) -> list[str]:
    """The Slurm jobs the driver submitted, once one of them runs."""
    deadline = time.monotonic() + TOY_TIMEOUT_S
    while time.monotonic() < deadline:
        jobs = [j for _, j in SUBMITTED.findall(log.read_text())] if log.exists() else []
        states = squeue_states()
        if any(states.get(j, ("",))[0] == "RUNNING" for j in jobs):
            return jobs
        assert states.get(driver, ("RUNNING",))[0] in ("PENDING", "RUNNING", "CONFIGURING"), (
            log.read_text() if log.exists() else states)  # fmt: skip
        time.sleep(2)
    pytest.fail("no job of the driver ran:\n" + (log.read_text() if log.exists() else ""))


def _wait_until_gone(ids: list[str], timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = squeue_states()
        if all(states.get(j, ("GONE",))[0] not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") for j in ids):
            return states
        time.sleep(2)
    pytest.fail(f"still queued or running: {ids}: {squeue_states()}")


def test_a_driver_run_as_a_slurm_job_and_cancelled_cancels_its_jobs(slurm_cluster, tmp_path):
    """Snakemake run as a Slurm job (the README's "small long-running job"). A plain `scancel` or its time limit
    sends SIGTERM, then SIGKILL after KillWait: Snakemake's own answer to SIGTERM waits for its running jobs, so
    the SIGKILL came first and its jobs ran on without it. papa's onstart hook (the toy Snakefile has it) makes
    that SIGTERM a Ctrl-C: the driver cancels its jobs at once (its lock may outlive it: Snakemake's shutdown waits
    out the executor's status-check interval, longer than this cluster's KillWait of 5 s; the README says to
    --unlock). `scancel --signal=INT --batch`, the README's clean stop, cancels the jobs and removes the lock."""
    wd = copy_toy(tmp_path / "toy")
    try:
        for how in ("term", "int"):
            log = wd / f"driver-{how}.out"
            driver = _submit_driver(wd, log)
            jobs = _wait_for_a_running_job(driver, log)
            cancel = ["scancel", driver] if how == "term" else ["scancel", "--signal=INT", "--batch", driver]
            subprocess.run(cancel, check=True, timeout=30)
            states = _wait_until_gone([driver, *jobs])
            output = log.read_text()
            assert "Terminating processes on user request" in output, output[-3000:]  # Snakemake's Ctrl-C
            for j in jobs:  # cancelled by the driver, not run to their end
                assert states.get(j, ("GONE",))[0] != "COMPLETED", (j, output[-3000:])
            assert not (wd / "toy_results" / "prepare" / "a.tsv").exists()
            if how == "int":
                assert states[driver][0] != "CANCELLED", (states[driver], output[-3000:])  # it ended by itself
                assert not list((wd / ".snakemake" / "locks").glob("*")), output[-3000:]
            else:
                subprocess.run([_snakemake_exe(), "--unlock"], cwd=wd, env=_env(), check=True, timeout=120)
    finally:
        subprocess.run(["scancel", "--name", "papa-test-driver"], check=False, timeout=30)
        for log in wd.glob("driver-*.out"):
            if m := RUN_ID.search(log.read_text()):
                subprocess.run(["scancel", "--name", m.group(1)], check=False, timeout=30)


# ----------------------------------------------------------------- pipeline
def _sorted_frame(df):
    import pandas as pd

    drop = [c for c in df.columns if VOLATILE_WORDS & set(re.split(r"[^a-z0-9]+", str(c).lower()))]
    df = df.drop(columns=drop)
    floats = [c for c in df.columns if pd.api.types.is_float_dtype(df[c])]
    keys = [c for c in df.columns if c not in floats]
    order = df[keys].astype(str) if keys else pd.DataFrame(index=df.index)
    for c in floats:  # rounded, so float noise cannot reorder rows
        order[c] = df[c].round(6)
    if len(order.columns):
        df = df.loc[order.sort_values(list(order.columns), kind="stable").index]
    return df.reset_index(drop=True)[sorted(df.columns, key=str)]


def _results_dir(configfile: Path) -> str:
    """The pipeline's output folder: `results:` of the config (default results)."""
    import yaml

    return str((yaml.safe_load(configfile.read_text()) or {}).get("results") or "results")


REHEARSAL_CONFIG = REPO / "config" / "rehearsal.yaml"


@pytest.mark.slow  # whole-workflow runs first in the file (tests/conftest.py)
def test_rehearsal_slice_runs_through_slurm(slurm_cluster, tmp_path):
    """Part of the rehearsal (config/rehearsal.yaml) as Slurm jobs: the workflow builds a tiny model and
    GLUE-shaped local data, then tokenize -> average attention -> lambdas -> probe for one task (and a data-free
    matrix beside the averaging, trained with a probe as one seed's job, rule probe_trained), and the built model
    folder reaches every job that loads it (six DAG levels, ~15 s of polling each). Each job, started by sbatch
    on the cluster's node, reads no file of the checkout it did not declare (tests/opens_audit records its reads:
    the job's environment, PYTHONPATH with it, is the submitting process's)."""
    import yaml

    if not REHEARSAL_CONFIG.exists():
        pytest.skip("config/rehearsal.yaml not present")
    pd = pytest.importorskip("pandas")
    wd = copy_repo(tmp_path / "rehearsal")
    results = _results_dir(REHEARSAL_CONFIG)
    shutil.rmtree(wd / results, ignore_errors=True)
    cfg = yaml.safe_load(REHEARSAL_CONFIG.read_text())
    fraction, seeds = 0.5, cfg["sweep"]["seeds"]
    target = f"{results}/probe/bert/sst2/average/lambda/fraction_dynamic={fraction:g}/seed{seeds[0]}.parquet"
    n = cfg["tasks"]["sst2"]["max_length"]
    data_free = f"{results}/constants/bert/sst2/N{n}/toeplitz.safetensors"  # rule data_free_constants, beside averaging
    # trained from it, the second seed alone (rule probe_trained: a job per seed)
    trained = f"{results}/probe/bert/sst2/toeplitz_trained/lambda/fraction_dynamic=0/seed{seeds[1]}.parquet"

    with recording_reads(tmp_path / "reads", wd) as reads:  # each job's reads (tests/opens_audit)
        run = run_snakemake(
            wd,
            target,
            data_free,
            trained,
            "--profile",
            "slurm",
            "--configfile",
            "config/rehearsal.yaml",
            timeout=PIPELINE_TIMEOUT_S,
            env=_env(**reads),
        )
    print(f"rehearsal slice through Slurm: {run.seconds:.1f} s end to end")
    assert run.returncode == 0, run.tail(150)
    rules = sorted(rule for rule, _ in slurm_jobs_of(run).values())
    assert_jobs_read_their_inputs(tmp_path / "reads", wd, set(rules))
    assert rules == sorted(
        [
            "build_model",
            "build_data",
            "prepare_data",  # a job per split
            "prepare_data",
            "tokenize",
            "tokenize",
            "average_attention",
            "data_free_constants",
            "learn_lambda",
            "probe",
            "probe_trained",
        ]
    ), rules
    assert (wd / data_free).stat().st_size > 0
    assert (wd / results / "built/models/bert/config.json").exists()
    assert (wd / results / "built/data/glue_sst2/train.tsv").exists()
    probe = pd.read_parquet(wd / target)
    assert set(probe["model"]) == {"bert"} and set(probe["task"]) == {"sst2"}
    assert set(probe["metric"]) == set(cfg["tasks"]["sst2"]["metrics"])
    one_seed = pd.read_parquet(wd / trained)
    assert set(one_seed["seed"]) == {seeds[1]} and set(one_seed["constants"]) == {"toeplitz_trained"}
    assert not (wd / trained).with_name(f"seed{seeds[0]}.parquet").exists()  # the other seeds' jobs were not asked for
    # each job asked Slurm for its rule's memory: the trained seed resources.probe_trained's, not the probe's
    memory = squeue_memory()
    asked = {rule: memory.get(jobid) for jobid, (rule, _) in slurm_jobs_of(run).items()}
    res = cfg["resources"]
    assert res["probe_trained"]["mem_mb"] != res["probe"]["mem_mb"]
    assert asked["probe_trained"] == f"{res['probe_trained']['mem_mb']}M", asked
    assert asked["probe"] == f"{res['probe']['mem_mb']}M", asked
    assert asked["learn_lambda"] == f"{res['default']['mem_mb']}M", asked


@pytest.mark.slow
def test_pipeline_slurm_matches_local(slurm_cluster, tmp_path, request):
    """The smoke workflow's model stages as Slurm jobs compute what the local run computes. It starts from the
    session's one local smoke run (conftest's `smoke_once`, shared with test_workflow.py) with one task's
    results lost (wsj_pos from its tokens on, the tables and the figures): Slurm reruns that task's tokenize,
    average_attention, learn_lambda and probe jobs (the analyses, patterns among them, run on rt_sentiment only),
    and aggregate and plot run in the Snakemake
    process. The recomputed per-run files and the tables equal the local run's. (The rules before them, and
    a workflow from scratch, go through Slurm in `test_rehearsal_slice_runs_through_slurm`; all of the smoke
    workflow again would cost CI 17 more Slurm jobs that test nothing new.) Every job, Slurm's and the local
    ones, reads no file of the checkout it did not declare (tests/opens_audit records its reads)."""
    if not (PIPELINE_SNAKEFILE.exists() and SMOKE_CONFIG.exists()):
        pytest.skip("pipeline not present (Snakefile / config/smoke.yaml)")
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")

    local_wd, local = request.getfixturevalue("smoke_once")
    print(f"smoke pipeline locally: {local['seconds']:.1f} s")
    results = _results_dir(SMOKE_CONFIG)
    slurm_wd = tmp_path / "slurm-run"
    lost = copy_without_task(local_wd, slurm_wd, "wsj_pos", data=False, results=results)
    res, local_res = slurm_wd / results, local_wd / results
    # the per-run tables the Slurm jobs write again (tokens, lambdas, probe scores), as the local run has them
    redone = sorted(p.relative_to(local_res) for d in lost for p in (local_res / d).rglob("*.parquet"))
    assert len(redone) >= 2 + 1 + 3, redone

    with recording_reads(tmp_path / "reads", slurm_wd) as reads:  # each job's reads (tests/opens_audit)
        run = run_snakemake(
            slurm_wd,
            "--profile",
            "slurm",
            "--configfile",
            "config/smoke.yaml",
            "--slurm-keep-successful-logs",
            timeout=PIPELINE_TIMEOUT_S,
            env=_env(**reads),
        )
    print(f"smoke pipeline's wsj_pos jobs through Slurm: {run.seconds:.1f} s end to end")
    assert run.returncode == 0, run.tail(150)
    submitted = slurm_jobs_of(run)
    assert sorted(rule for rule, _ in submitted.values()) == sorted(
        ["tokenize"] * 2 + ["average_attention", "learn_lambda"] + ["probe"] * 3
    ), submitted
    ran = ran_rules(run.output)
    assert {"aggregate", "plot"} <= ran, sorted(ran)  # the local rules, beside the Slurm jobs
    assert_jobs_read_their_inputs(tmp_path / "reads", slurm_wd, ran)
    # every Slurm job left its log (kept with --slurm-keep-successful-logs)
    logs = {p.stem for p in (slurm_wd / ".snakemake" / "slurm_logs").rglob("*.log")}
    assert set(submitted) <= logs, (sorted(submitted), sorted(logs))
    ran_remote = {rule for rule, _ in submitted.values()}
    assert not ran_remote & set(LOCAL_RULES), (
        f"{sorted(ran_remote & set(LOCAL_RULES))} ran as Slurm jobs: "
        "declare `localrules: aggregate, plot` in the Snakefile"
    )
    assert (res / "plots" / "fraction_curves.png").exists()

    for rel in [*redone, *(Path("tables") / name for name in PIPELINE_TABLES)]:
        a, b = res / rel, local_res / rel
        assert a.exists(), f"Slurm run wrote no {a}"
        pd.testing.assert_frame_equal(
            _sorted_frame(pd.read_parquet(a)),
            _sorted_frame(pd.read_parquet(b)),
            check_exact=False,
            rtol=1e-5,
            atol=1e-6,
            obj=str(rel),
        )
