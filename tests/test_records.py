"""papa.records: a results folder is tied to the Snakemake records (``.snakemake/``) that made it; a start of
Snakemake under other records (deleted and made anew, another working directory's) stops, saying what to do.
The workflow's use of it (the Snakefile's ``onstart``, common.smk's check) is in tests/test_workflow.py."""

import base64
import contextlib
import html
import json
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from papa import records
from papa.records import MARKER, RECORDS_ID, ForeignResultsError, check_results, claim_results, records_id


@pytest.fixture
def wd(tmp_path, monkeypatch):
    """A working directory with Snakemake's ``.snakemake/`` (made by Snakemake before ``onstart``)."""
    (tmp_path / "wd" / ".snakemake").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "wd")
    return tmp_path / "wd"


def test_a_new_or_unmarked_folder_passes_and_a_claim_marks_it_with_the_records_id(wd):
    check_results("results")  # no folder yet
    (wd / "results").mkdir()
    (wd / "results" / "old.parquet").write_text("written before the marker existed")
    check_results("results")  # a folder from before papa.records: claimed by its next run as it is
    assert records_id() is None  # checking writes nothing
    claim_results("results")
    marker = json.loads((wd / "results" / MARKER).read_text())
    assert marker == {"id": records_id(), "workdir": str(wd), "path": "results"}
    assert len(records_id()) == 32
    check_results("results")
    claim_results("results")  # again: the same marker, the same id
    assert json.loads((wd / "results" / MARKER).read_text()) == marker


def test_deleted_records_stop_the_next_start_until_the_marker_goes(wd):
    claim_results("results")
    (wd / ".snakemake" / RECORDS_ID).unlink()  # `rm -rf .snakemake`, as users clear a stale lock
    with pytest.raises(ForeignResultsError, match="this working directory's Snakemake records, since deleted") as e:
        check_results("results")
    assert f"rm results/{MARKER}" in str(e.value)
    with pytest.raises(ForeignResultsError, match="since made anew"):  # a run's onstart makes new records first
        claim_results("results")
    (wd / "results" / MARKER).unlink()  # the user takes the files as they are
    check_results("results")
    claim_results("results")
    assert json.loads((wd / "results" / MARKER).read_text())["id"] == records_id()


def test_another_working_directory_on_the_same_folder_is_named(wd, tmp_path):
    shared = tmp_path / "shared-results"
    claim_results(shared)
    other = tmp_path / "other"
    (other / ".snakemake").mkdir(parents=True)
    with pytest.raises(ForeignResultsError, match=f"another working directory, {wd}") as e:
        check_results(shared, other / ".snakemake")
    assert f"rm {shared / MARKER}" in str(e.value)
    with pytest.raises(ForeignResultsError, match="another working directory"):
        claim_results(shared, other / ".snakemake")  # its own onstart: the marker stays the first one's
    assert json.loads((shared / MARKER).read_text())["workdir"] == str(wd)


def test_two_claims_at_once_leave_one_marker_and_refuse_the_other(tmp_path):
    """Two drivers starting at once on one folder (two checkouts): exactly one claims it; the other stops."""
    wds = [tmp_path / f"wd{i}" / ".snakemake" for i in range(8)]
    for w in wds:
        w.mkdir(parents=True)
    errors, barrier = [], threading.Barrier(len(wds))

    def claim(w):
        barrier.wait()
        try:
            claim_results(tmp_path / "results", w)
        except ForeignResultsError as err:
            errors.append(err)

    threads = [threading.Thread(target=claim, args=(w,)) for w in wds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == len(wds) - 1
    winner = json.loads((tmp_path / "results" / MARKER).read_text())
    assert winner["id"] in {records_id(w) for w in wds}
    assert [p.name for p in (tmp_path / "results").iterdir()] == [MARKER]  # no temporary left behind


def test_an_unreadable_marker_or_id_says_which_file_to_remove(wd):
    (wd / "results").mkdir()
    (wd / "results" / MARKER).write_text("{not json")
    with pytest.raises(ForeignResultsError, match=f"results/{MARKER} cannot be read .*remove it"):
        check_results("results")
    (wd / "results" / MARKER).write_text(json.dumps({"workdir": "x"}))
    with pytest.raises(ForeignResultsError, match="not a papa records file"):
        check_results("results")
    (wd / ".snakemake" / RECORDS_ID).write_text("[]")
    with pytest.raises(ForeignResultsError, match=f"{RECORDS_ID} is not a papa records file"):
        records_id()


def test_the_marker_is_readable_by_colleagues(wd):
    old = os.umask(0o022)
    try:
        claim_results("results")
    finally:
        os.umask(old)
    assert (wd / "results" / MARKER).stat().st_mode & 0o777 == 0o644


def test_without_hard_links_the_marker_is_created_exclusively(wd, monkeypatch):
    """A file system without hard links (os.link fails): the marker is still written once, and a second
    working directory's claim is still refused."""

    def no_links(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    claim_results("results")
    assert json.loads((wd / "results" / MARKER).read_text()) == {
        "id": records_id(),
        "workdir": str(wd),
        "path": "results",
    }
    other = wd.parent / "other" / ".snakemake"
    other.mkdir(parents=True)
    with pytest.raises(ForeignResultsError, match="another working directory"):
        claim_results("results", other)
    assert sorted(p.name for p in (wd / "results").iterdir()) == [MARKER]


def test_another_spelling_of_the_folder_is_refused(wd):
    """Snakemake keys its records by the path as written: under ``./results``, ``results/`` or the absolute path it
    has none for the files ``results`` made, and would take them all as up to date (checked with Snakemake 9.27)."""
    claim_results("results")
    check_results("results")
    for other in ("./results", "results/", str(wd / "results")):  # results/ -> results//x: another path too
        with pytest.raises(ForeignResultsError, match="records know as 'results'.*Write `results: results`"):
            check_results(other)


def test_a_run_made_under_a_spelling_papa_now_normalises_says_what_to_do(wd):
    """A run made as ``results/`` before the config check wrote it ``results`` (`papa.checks.normalise_results`):
    Snakemake's records are keyed by the old paths, and writing ``results/`` again cannot help; the message says
    so and names the two ways out."""
    claim_results("results/")
    with pytest.raises(ForeignResultsError, match=r"was run as 'results/', a spelling papa now writes as 'results'"
                                                  r".*rm results/\.papa-records.json.*make clean"):  # fmt: skip
        check_results("results")


def test_a_linked_records_folder_names_its_working_directory(tmp_path):
    """``.snakemake`` linked into scratch space (common on clusters): the working directory named is the link's."""
    scratch = tmp_path / "scratch"
    for name in ("a", "b"):
        (scratch / name).mkdir(parents=True)
        (tmp_path / name).mkdir()
        (tmp_path / name / ".snakemake").symlink_to(scratch / name)
    claim_results(tmp_path / "shared", tmp_path / "a" / ".snakemake")
    with pytest.raises(ForeignResultsError, match=f"another working directory, {tmp_path / 'a'}"):
        check_results(tmp_path / "shared", tmp_path / "b" / ".snakemake")


def test_an_unreadable_marker_asks_for_access(wd, monkeypatch):
    """A marker another user's umask left unreadable (root reads anything, so the error is simulated)."""
    claim_results("results")
    real = Path.read_text

    def denied(self, *args, **kwargs):
        if self.name == MARKER:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(ForeignResultsError, match="Permission denied.*ask its owner for read access"):
        check_results("results")


def test_the_records_id_is_created_once_whoever_asks_at_the_same_time(tmp_path):
    records = tmp_path / ".snakemake"
    records.mkdir()
    ids, barrier = [], threading.Barrier(8)

    def ask():
        barrier.wait()
        ids.append(records_id(records, create=True))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and ids[0] == records_id(records)


def _record_name(path: str) -> str:
    """The name of Snakemake's record of output ``path`` (metadata, incomplete marker): the path urlsafe-base64
    encoded."""
    return base64.urlsafe_b64encode(path.encode()).decode()


def _marker(wd: Path, path: str, max_len: int = 255) -> None:
    """Snakemake's incomplete marker of output ``path`` (its file-records layout: `_record_name`, split into '@'
    folders where longer than a file name may be)."""
    b64 = _record_name(path)
    parts = [b64[i : i + max_len - 1] for i in range(0, len(b64), max_len - 1)]
    rec = wd / ".snakemake" / "incomplete" / Path(*["@" + s for s in parts[:-1]], parts[-1])
    rec.parent.mkdir(parents=True, exist_ok=True)
    rec.write_text("{}")


def test_lost_outputs_are_what_failed_or_killed_runs_did_not_finish_and_is_not_on_disk(wd):
    """A failed run's unfinished jobs' missing outputs (the Snakefile's onerror notes them), a killed Snakemake's
    started jobs' (its incomplete markers), under the results folder and not on disk; a successful run forgets
    those made again. A file deleted by hand is none of them."""
    from papa.records import LOST, forget_found, lost_outputs, note_lost

    assert lost_outputs("results") == []  # nothing noted, no markers
    Path("results/probe").mkdir(parents=True)
    Path("results/probe/standing.parquet").write_text("x")
    note_lost(["results/lambda/a.parquet", "results/probe/standing.parquet", "other/x"])
    assert json.loads((wd / ".snakemake" / LOST).read_text())["paths"] == ["other/x", "results/lambda/a.parquet"]
    note_lost(["results/lambda/b.parquet"])  # a second failure keeps the first's
    long = "results/constants/" + "m" * 200 + "/average.safetensors"  # a marker name split into '@' folders
    _marker(wd, long)
    _marker(wd, "results/probe/standing.parquet")  # incomplete but there: Snakemake's --rerun-incomplete case
    (wd / ".snakemake" / "incomplete" / "not-base64!").write_text("{}")  # not a marker: skipped
    # nor a file in a folder Snakemake does not split names into (an '@' first), though the two names read as a path
    # as those folders' do (the folder's after its first character)
    b64 = _record_name("results/lambda/c.parquet")
    (wd / ".snakemake" / "incomplete" / ("x" + b64[:8])).mkdir()
    (wd / ".snakemake" / "incomplete" / ("x" + b64[:8]) / b64[8:]).write_text("{}")
    expected = sorted([long, "results/lambda/a.parquet", "results/lambda/b.parquet"])
    assert lost_outputs("results") == expected
    assert lost_outputs("./results/") == expected  # the folder however it is written
    Path("results/lambda").mkdir()
    Path("results/lambda/a.parquet").write_text("made again")
    forget_found()
    assert json.loads((wd / ".snakemake" / LOST).read_text())["paths"] == ["other/x", "results/lambda/b.parquet"]
    Path("results/lambda/b.parquet").write_text("made again")
    Path("other").mkdir()
    Path("other/x").write_text("made again")
    note_lost(["results/old_task/x.parquet", "results-smoke/probe/y.parquet"])
    # a successful run of another results folder's config forgets none of this folder's lost files (a smoke run
    # made the default run's lost table inputs look current: "Nothing to be done" over the old settings' tables)
    forget_found(results="./results-smoke/", makes=lambda f: False)
    assert json.loads((wd / ".snakemake" / LOST).read_text())["paths"] == ["results/old_task/x.parquet"]
    assert lost_outputs("results") == sorted([long, "results/old_task/x.parquet"])
    note_lost(["results-smoke/probe/y.parquet"])
    forget_found(results="results", makes=lambda f: "old_task" not in f)  # what its config no longer makes
    assert json.loads((wd / ".snakemake" / LOST).read_text())["paths"] == ["results-smoke/probe/y.parquet"]
    assert lost_outputs("results") == [long] and lost_outputs("results-smoke") == ["results-smoke/probe/y.parquet"]
    forget_found(results="results-smoke", makes=lambda f: False)
    assert not (wd / ".snakemake" / LOST).exists()
    (wd / ".snakemake" / LOST).write_text(json.dumps({"paths": ["results/lambda/d.parquet", 3, None]}))
    assert lost_outputs("results") == sorted([long, "results/lambda/d.parquet"])  # entries that are no path: left out
    (wd / ".snakemake" / LOST).write_text("{not json")
    with pytest.raises(ForeignResultsError, match="papa-lost.json cannot be read .* remove it and name those files"):
        lost_outputs("results")


def _note_many(prefix: str, n: int) -> None:
    from papa.records import note_lost

    for i in range(n):
        note_lost([f"{prefix}/{i}.parquet"])


def test_two_runs_ending_at_once_keep_each_others_lost_outputs(wd):
    """Two configs' Snakemakes in one working directory note their lost outputs in one list (papa-lost.json): each
    read-modify-write holds a lock, so neither writes back a list without the other's entries."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_note_many, args=(prefix, 60)) for prefix in ("results", "results-smoke")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    from papa.records import lost_outputs

    assert len(lost_outputs("results")) == 60 and len(lost_outputs("results-smoke")) == 60


def _hold_until(results: str, ready, done) -> None:
    from papa.records import hold_results

    hold_results(results)
    ready.set()
    done.wait(60)


@contextlib.contextmanager
def _held_by_another_process(results: str):
    """Within the block another process (forked) holds `hold_results`' lock on ``results``; yields its pid."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_until, args=(results, ready, done))
    holder.start()
    try:
        assert ready.wait(30)
        yield holder.pid
    finally:
        done.set()
        holder.join(30)


def test_a_run_holds_its_results_folder_against_a_second_run_and_make_clean(wd):
    """Snakemake 9 ends every run by deleting .snakemake/locks whole, another run's lock too, so a second run of a
    folder being written was not refused (it deleted the first run's outputs as it started their jobs), and make
    clean removed a folder a run was writing. A run holds an OS lock on its folder (onstart: hold_results): a second
    holder is refused naming the first, forget (make clean) refuses the folder; another folder is free; the lock
    goes with the process."""

    from papa.records import forget_results, hold_results, main, running_on

    with _held_by_another_process("results") as first:
        who = running_on("./results/")  # however the folder is written
        assert who == f"pid {first} on {os.uname().nodename}", who
        with pytest.raises(ForeignResultsError, match=f"another Snakemake is running on results folder 'results' "
                                                      f"\\(pid {first} "):  # fmt: skip
            hold_results("results")
        with pytest.raises(ForeignResultsError, match="running on results/ .*stop it first"):
            forget_results("results")
        assert main(["removable", "results"]) == 1 and main(["forget", "results"]) == 1
        assert running_on("results-smoke") is None and main(["removable", "results-smoke"]) == 0
    assert running_on("results") is None and main(["removable", "results"]) == 0
    # a later run's holder is named alone: the lock file keeps no earlier run's line (mutation testing)
    with _held_by_another_process("results") as second:
        assert running_on("results") == f"pid {second} on {os.uname().nodename}"
    hold_results("results")  # free again; held by this process now, which may take it again
    hold_results("results")
    assert running_on("results") == "this process"


def test_make_clean_leaves_another_checkouts_results_folder(wd):
    """A results folder two checkouts share (an absolute results:): the workflow in the second refuses it as not its
    own, and its make clean removed it (the marker counted as papa's results): another checkout's finished run."""
    from papa.records import claim_results, main, not_removable

    Path("shared").mkdir()
    (Path("shared") / MARKER).write_text(json.dumps({"id": "other", "workdir": "/elsewhere", "path": "shared"}))
    assert "holds the results of the Snakemake records of /elsewhere" in not_removable("shared")
    assert main(["removable", "shared"]) == 1
    claim_results("ours")
    assert not_removable("ours") is None and not_removable("nosuch") is None and main(["removable", "ours"]) == 0
    Path("notes.txt").write_text("mine")  # a file named as results: it was removable (exit 0, silently)
    assert not_removable("notes.txt") == "notes.txt is no folder (a file or a link to one): check the config's results:"
    assert main(["removable", "notes.txt"]) == 1 and Path("notes.txt").read_text() == "mine"


def test_outputs_marked_incomplete_are_named_for_the_rerun_incomplete_advice(wd):
    """A job stopped with its Snakemake (a local Ctrl-C) leaves its outputs marked incomplete: the next plain run
    refuses them (IncompleteFilesException) where papa said they would be made again; the workflow names them and
    says to run with --rerun-incomplete (common.smk's lost_targets)."""
    from papa.records import marked_incomplete

    assert marked_incomplete("results") == []
    _marker(wd, "results/lambda/m/t/average/lambdas.parquet")
    _marker(wd, "elsewhere/x.parquet")
    assert marked_incomplete("./results/") == ["results/lambda/m/t/average/lambdas.parquet"]


def test_without_records_nothing_is_lost_or_noted(tmp_path, monkeypatch):
    from papa.records import lost_outputs, note_lost

    monkeypatch.chdir(tmp_path)
    note_lost(["results/x"])  # no .snakemake/: nothing written
    assert lost_outputs("results") == [] and not (tmp_path / ".snakemake").exists()


def test_forgetting_a_removed_folder_drops_its_records_only(wd):
    """`make clean` removes a config's results folder and, with `forget_results`, the records of its files (the lost
    list, killed jobs' markers, Snakemake's metadata), not .snakemake/: that orphaned every other results folder."""
    from papa.records import forget_results, lost_outputs, main, note_lost

    b64 = _record_name
    claim_results("results-other")
    for kind in ("metadata", "incomplete"):
        (Path(".snakemake") / kind).mkdir()
    ours = ["results/tables/summary.parquet", "results/plots/heads"]
    theirs = ["results-other/probe/p.parquet", "resultsX/a.parquet"]
    for f in ours + theirs:
        (Path(".snakemake") / "metadata" / b64(f)).write_text("{}")
    long = "results/" + "x" * 300 + ".parquet"  # a name too long for one file name: folders starting with '@'
    name = b64(long)
    (Path(".snakemake") / "incomplete" / ("@" + name[:200])).mkdir()
    (Path(".snakemake") / "incomplete" / ("@" + name[:200]) / name[200:]).write_text("")
    note_lost(["results/lambda/l.parquet", "results-other/lambda/l.parquet"])
    assert lost_outputs("results") == sorted(["results/lambda/l.parquet", long])
    assert main(["forget", "--", "./results/"]) == 0  # any spelling of the folder: the records know it one way
    assert sorted(os.listdir(".snakemake/metadata")) == sorted(b64(f) for f in theirs)
    assert lost_outputs("results") == [] and lost_outputs("results-other") == ["results-other/lambda/l.parquet"]
    check_results("results-other")  # its marker still names these records
    assert forget_results("results") == 0 and forget_results("nowhere", records="no-records") == 0


def test_a_forgotten_folder_that_comes_back_is_refused_until_made_anew(wd, tmp_path):
    """After `forget_results` (make clean) a folder that comes back with its marker, the target of a linked folder
    (make clean removes the link) or a folder moved aside and back, has no records: Snakemake would take its files
    as up to date whatever changed, so `check_results` refuses it (before, deleting .snakemake/ made its marker
    foreign); a folder made anew (`claim_results`) is this run's, and a killed run's locks on it are dropped."""
    from papa.records import forget_results

    target = tmp_path / "scratch"
    target.mkdir()
    Path("results").symlink_to(target)
    claim_results("results")
    claim_results("results-other")
    (target / "probe.parquet").write_text("x")
    locks = Path(".snakemake/locks")
    locks.mkdir()
    (locks / "0.output.lock").write_text("results/probe.parquet\nresults/tables/summary.parquet\n")
    (locks / "0.input.lock").write_text("results/tokens/t.parquet\n/data/train.csv\n")
    (locks / "1.output.lock").write_text("results-other/tables/x.parquet\n")  # another run's, live or not
    Path("results").unlink()  # what make clean's rm -rf does to a link
    assert forget_results("results") == 2 and sorted(os.listdir(locks)) == ["1.output.lock"]
    Path("results").symlink_to(target)  # the link made again: the old files, their marker, no records
    with pytest.raises(ForeignResultsError, match=r"removed by make clean.*rm -rf results/.*rm results/\.papa-rec"):
        check_results("results")
    check_results("results-other")  # the other folder is not concerned
    # made anew: no marker yet, so the next run's claim ties it to the records again
    Path("results").unlink()
    claim_results("results")
    check_results("results")

    def forgotten_while_away(folder, spelt):  # moved aside, forgotten (as spelt), then back
        os.rename(folder, "aside")
        forget_results(spelt)
        os.rename("aside", folder)

    forgotten_while_away("results", "./results/")
    with pytest.raises(ForeignResultsError, match="removed by make clean"):
        check_results("results")
    os.remove(Path("results") / MARKER)  # the files taken as they are: no marker, nothing to check
    check_results("results")
    claim_results("results")
    check_results("results")
    # a folder claimed under another spelling (a library call; the workflow writes results: one way) is forgotten
    # under its one spelling, and refused under the one it was claimed as
    claim_results("./spelt/")
    forgotten_while_away("spelt", "spelt")
    with pytest.raises(ForeignResultsError, match="removed by make clean"):
        check_results("./spelt/")
    # made anew under that spelling: its claim drops the folder's one spelling from the forgotten (mutation testing)
    shutil.rmtree("spelt")
    claim_results("./spelt/")
    check_results("./spelt/")


def test_a_report_is_set_aside_and_prune_removes_only_files_inside_the_results(tmp_path):
    """A run that changes a folder's results moves its report aside (it passed for the new results'); `make
    prune`'s removal refuses a file outside the results folder (nothing removed) and removes the folders left empty."""
    results = tmp_path / "results"
    assert records.set_aside_report(results) is None  # no report: nothing
    (results / records.REPORT).mkdir(parents=True)  # a folder of that name is no report: left where it is
    assert records.set_aside_report(results) is None and (results / records.REPORT).is_dir()
    (results / records.REPORT).rmdir()
    (results / "probe/m/t/c/s/fraction_dynamic=0.5").mkdir(parents=True)
    (results / records.REPORT).write_text("new")
    (results / records.OUTDATED_REPORT).write_text("older")
    assert records.set_aside_report(results) == results / records.OUTDATED_REPORT
    assert not (results / records.REPORT).exists() and (results / records.OUTDATED_REPORT).read_text() == "new"
    stale = results / "probe/m/t/c/s/fraction_dynamic=0.5/seed3.parquet"
    kept = results / "probe/m/t/c/s/fraction_dynamic=0.5/seed0.parquet"
    other = results / "probe/m/t/c/s/fraction_dynamic=0.3/seed0.parquet"
    for f in (stale, kept, other):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    outside = tmp_path / "elsewhere.parquet"
    outside.write_text("x")
    with pytest.raises(ValueError, match="not inside"):
        records.remove_files([stale, outside], under=results)
    assert stale.exists() and outside.exists()
    # a sibling whose name begins with the folder's (results2 beside results) is not inside it (mutation review)
    sibling = results.with_name(results.name + "2") / "probe.parquet"
    sibling.parent.mkdir()
    sibling.write_text("x")
    with pytest.raises(ValueError, match=f"not inside {re.escape(str(results))}: {re.escape(str(sibling))}"):
        records.remove_files([sibling], under=results)
    assert sibling.exists()
    log = results / "logs/prune.log"
    assert records.remove_files([stale, other], under=results, log=log) == [str(stale), str(other)]
    assert kept.exists() and not other.parent.exists() and (results / "probe").is_dir()
    assert log.read_text() == f"removed {stale}\nremoved {other}\n"
    assert records.remove_files([stale], under=results, log=log) == []  # gone already: the log says so (review AZ)
    assert log.read_text() == "removed nothing: no file to remove\n"
    # a subfolder linked to another disk is inside by its name (it was refused: "not inside"); the link stays
    disk = tmp_path / "scratch"
    (disk / "m").mkdir(parents=True)
    (results / "lambda").symlink_to(disk, target_is_directory=True)
    (disk / "m" / "lambdas.parquet").write_text("x")
    assert records.remove_files([results / "lambda/m/lambdas.parquet"], under=results)
    assert (results / "lambda").is_symlink() and not (disk / "m").exists()


def test_a_results_folder_that_cannot_be_written_is_named(wd, monkeypatch):
    """A read-only results folder stopped the run with a traceback naming the marker's temporary file; the error
    names the folder and what to do. Other errors pass through."""

    create = records._create_exclusive

    def refused(path, value):
        if path.name != MARKER:  # the working directory's records id: writable
            return create(path, value)
        raise OSError(30, "Read-only file system", f"{path}.papa-x.tmp")

    monkeypatch.setattr(records, "_create_exclusive", refused)
    with pytest.raises(OSError, match=r"the results folder 'results' cannot be written \(Read-only file system\): "
                       r"the workflow writes every result there; make it writable") as e:  # fmt: skip
        claim_results("results")
    assert e.value.errno == 30

    def other(path, value):
        if path.name != MARKER:
            return create(path, value)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(records, "_create_exclusive", other)
    with pytest.raises(OSError, match="^\\[Errno 5\\] Input/output error$"):
        claim_results("results")


def test_outputs_written_by_other_papa_code_are_counted_per_rule(wd):
    """Snakemake reruns a job whose ``code`` param (the fingerprint of the papa code it reaches) changed, naming two
    hashes only; `written_by_other_code` counts, per rule, the outputs under a results folder on disk whose record
    holds a fingerprint the workflow no longer computes (an upgrade of papa), so the start can say so (review AD)."""
    from papa.records import written_by_other_code

    b64 = _record_name
    (Path(".snakemake") / "metadata").mkdir(parents=True)
    old, new, other_rule = "0123456789abcdef", "fedcba9876543210", "00000000ffffffff"

    def record(path, rule, params, exists=True):
        (Path(".snakemake") / "metadata" / b64(path)).write_text(json.dumps({"rule": rule, "params": params}))
        if exists:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text("x")

    record("results/probe/a.parquet", "probe", [f"'{old}'", "'minilm'", "{'lr': 0.001}"])
    record("results/probe/b.parquet", "probe", [f"'{old}'", "'minilm'"])
    record("results/probe/c.parquet", "probe", [f"'{new}'", "'minilm'"])  # written by the code of now
    record("results/tokens/t.parquet", "tokenize", [f"'{old}'"])
    record("results/lambda/gone.parquet", "learn_lambda", [f"'{old}'"], exists=False)  # not on disk: Snakemake's
    record("results/data/d.parquet", "prepare_data", ["'package'", "'0123456789abcdeg'"])  # no fingerprint: left out
    record("results-other/probe/x.parquet", "probe", [f"'{old}'"])  # another folder's
    (Path(".snakemake") / "metadata" / b64("results/probe/broken.parquet")).write_text("{not json")
    Path("results/probe/broken.parquet").write_text("x")
    # a record that is JSON but no mapping (another tool's file under Snakemake's name) is left out too
    (Path(".snakemake") / "metadata" / b64("results/probe/listed.parquet")).write_text(json.dumps([f"'{old}'"]))
    Path("results/probe/listed.parquet").write_text("x")
    assert written_by_other_code("results", {new, other_rule}) == {"probe": 2, "tokenize": 1}
    assert written_by_other_code("./results/", [new, old]) == {}  # every record's code is computed now
    assert written_by_other_code("results", {new}, records="nowhere") == {}
    # files this config does not make (a dropped dataset's: its fingerprint is not computed now) rerun nothing
    makes = lambda path: not path.startswith("results/tokens/")  # noqa: E731
    assert written_by_other_code("results", {new}, makes=makes) == {"probe": 2}


def test_the_records_fingerprint_pattern_is_papa_fingerprints_width(wd, monkeypatch):
    """`written_by_other_code` finds code fingerprints among a record's params by their width, which
    `papa.fingerprint.code_fingerprint` makes: one number, `papa.fingerprint.DIGITS`, not 16 written in both modules
    (issue 15: each concept defined once), so a fingerprint made wider or narrower is still found."""
    from papa.fingerprint import DIGITS, code_fingerprint
    from papa.records import written_by_other_code

    monkeypatch.setenv("PAPA_CACHE", str(wd / "cache"))
    code = code_fingerprint("papa.io:current_umask")
    assert len(code) == DIGITS
    name = _record_name("results/probe/a.parquet")
    (wd / ".snakemake" / "metadata").mkdir()
    (wd / ".snakemake" / "metadata" / name).write_text(json.dumps({"rule": "probe", "params": [repr(code)]}))
    Path("results/probe").mkdir(parents=True)
    Path("results/probe/a.parquet").write_text("x")
    assert written_by_other_code("results", {"0" * DIGITS}) == {"probe": 1}
    assert written_by_other_code("results", {code}) == {}


def test_verify_names_the_results_whose_recorded_inputs_changed_or_went(wd, capsys):
    """Snakemake reruns a job whose input changed by its modification time: an input rewritten with its old time
    (`touch -r`, `cp -p` from another run) reruns nothing, and the results made from it no longer are what their
    records say (review AK's F4). `python -m papa.records verify` compares each result's recorded input digests
    (Parquet provenance, constants metadata, figure records) with the files as they are."""
    import pandas as pd
    import torch

    import papa
    from papa import io

    Path("results/tokens").mkdir(parents=True)
    tokens, other = "results/tokens/train.parquet", "results/tokens/validation.parquet"
    io.write_parquet(pd.DataFrame({"x": [1, 2]}), tokens, {"inputs": {}})
    io.write_parquet(pd.DataFrame({"x": [3]}), other, {"inputs": {}})  # every result papa writes records them
    table = "results/tables/probe.parquet"
    Path(table).parent.mkdir()
    io.write_parquet(pd.DataFrame({"score": [0.5]}), table, {"inputs": io.input_digests([tokens, other])})
    C = papa.ConstantAttention(torch.full((1, 1, 2, 2), 0.5), torch.ones(2, 2), {"inputs": io.input_digests([tokens])})
    C.save("results/constants.safetensors")
    assert records.recorded_inputs(table) == io.input_digests([tokens, other])
    assert records.changed_inputs("results") == [] and records.main(["verify", "results"]) == 0
    assert "every recorded input file is as it was read" in capsys.readouterr().out
    assert records.main(["verify", "results-paper"]) == 1  # a folder not there was "as it was read" (review AM)
    assert "results-paper is no folder" in capsys.readouterr().out
    st = os.stat(tokens)
    io.write_parquet(pd.DataFrame({"x": [1, 3]}), tokens, {"inputs": {}})  # same size, its old time kept
    os.utime(tokens, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.remove(other)
    assert records.changed_inputs("results") == [
        ("results/constants.safetensors", tokens, "changed"),
        ("results/tables/probe.parquet", tokens, "changed"),
        ("results/tables/probe.parquet", other, "missing"),
    ]
    assert records.main(["verify", "results"]) == 1
    out = capsys.readouterr().out
    assert (
        f"results/tables/probe.parquet: its input {other} is gone" in out
        and "2 of the 3 result(s) under results" in out
    )


def test_verify_says_when_it_checked_nothing_or_the_wrong_paths_and_reads_past_an_unreadable_file(wd, capsys):
    """`python -m papa.records verify` printed "every recorded input file is as it was read" for a folder holding no
    result (a config folder), blamed every result for a run made in another working directory, and stopped at the
    first file cut short with a traceback, the others unchecked (review AU's 8 and 9)."""
    import pandas as pd

    from papa import io

    Path("config").mkdir()
    assert records.main(["verify", "config"]) == 1
    assert "config holds no result file papa writes" in capsys.readouterr().out
    Path("results/tokens").mkdir(parents=True)
    tokens = "results/tokens/train.parquet"
    io.write_parquet(pd.DataFrame({"x": [1]}), tokens, {"inputs": {}})
    Path("results/tables").mkdir()
    io.write_parquet(pd.DataFrame({"s": [1.0]}), "results/tables/probe.parquet", {"inputs": io.input_digests([tokens])})
    Path("results/tables/summary.parquet").write_bytes(b"PAR1 cut short")
    assert records.main(["verify", "results"]) == 1
    out = capsys.readouterr().out
    assert "results/tables/summary.parquet: unreadable (" in out and "delete it and rerun its job" in out, out
    assert "1 of the 3 result(s) under results" in out and "probe.parquet" not in out  # the others were read
    os.remove("results/tables/summary.parquet")
    assert records.main(["verify", "results"]) == 0
    assert "every recorded input file is as it was read (2 result files)" in capsys.readouterr().out
    elsewhere = wd.parent / "elsewhere"
    elsewhere.mkdir()
    assert records.main(["verify", "results", "--root", str(elsewhere)]) == 1  # every input "gone": the wrong root
    assert f"none of the 1 recorded input file(s) of results is under {elsewhere}" in capsys.readouterr().out
    assert records.main(["verify", "results", "--root", "nosuch"]) == 1
    assert "--root nosuch is no folder" in capsys.readouterr().out
    # result files none of which records an input (not papa's), and a report (no result): nothing checked
    Path("plain/tables").mkdir(parents=True)
    pd.DataFrame({"x": [1]}).to_parquet("plain/tables/t.parquet")
    Path("plain/report.html").write_text("<html></html>")
    assert records.main(["verify", "plain"]) == 1
    assert "none of the 1 result file(s) under plain records its inputs" in capsys.readouterr().out


def test_verify_names_a_result_copied_in_from_another_results_folder(wd, capsys):
    """A result copied into a results folder from another config's (``cp results-smoke/tables/probe.parquet
    results/tables/``) records the other folder's inputs, which are still as it read them there: `verify` said
    "every recorded input file is as it was read" of a folder holding another run's table, and of a copied folder
    whose every record points into the folder it was copied from. An input inside another marked results folder
    is named as such; the folder's own inputs (a subfolder named, a local data file) are not."""
    import pandas as pd

    from papa import io

    for folder in ("results", "results-smoke"):
        Path(folder, "tokens").mkdir(parents=True)
        claim_results(folder)
        io.write_parquet(pd.DataFrame({"x": [len(folder)]}), f"{folder}/tokens/train.parquet", {"inputs": {}})
    Path("data").mkdir()
    Path("data/words.txt").write_text("a b\n")
    Path("results/tables").mkdir()
    inputs = io.input_digests(["results/tokens/train.parquet", "data/words.txt"])
    io.write_parquet(pd.DataFrame({"s": [1.0]}), "results/tables/summary.parquet", {"inputs": inputs})
    assert records.main(["verify", "results"]) == 0 and records.main(["verify", "results/tables"]) == 0
    smoke = io.input_digests(["results-smoke/tokens/train.parquet"])
    io.write_parquet(pd.DataFrame({"s": [0.5]}), "results/tables/probe.parquet", {"inputs": smoke})
    capsys.readouterr()
    assert records.main(["verify", "results"]) == 1
    out = capsys.readouterr().out
    assert "results/tables/probe.parquet: its input results-smoke/tokens/train.parquet lies in another results " in out
    assert "summary.parquet" not in out and "1 of the 3 result(s) under results" in out, out
    shutil.copytree("results", "results-copy")  # a whole folder copied: its records point into the original
    os.remove("results-copy/tables/probe.parquet")
    assert records.main(["verify", "results-copy"]) == 1
    out = capsys.readouterr().out
    assert "results-copy/tables/summary.parquet: its input results/tokens/train.parquet lies in" in out


def test_verify_names_a_result_that_lost_its_record(wd, capsys):
    """A table edited and saved with pandas (``df.to_parquet``) keeps no papa record: `verify` read it as a result
    recording no input and said "every recorded input file is as it was read" of its folder, a leaf table
    (``tables/probe.parquet``, read by no later job) edited by hand unnamed. A result papa writes always records its
    inputs ({} for a downloaded split's): one without is named, and the folder fails."""
    import pandas as pd

    from papa import io

    Path("results/data").mkdir(parents=True)
    split = "results/data/train.parquet"
    io.write_parquet(pd.DataFrame({"x": [1]}), split, {"inputs": {}, "source": "a download"})
    Path("results/tables").mkdir()
    table = "results/tables/probe.parquet"
    io.write_parquet(pd.DataFrame({"score": [0.5]}), table, {"inputs": io.input_digests([split])})
    assert records.main(["verify", "results"]) == 0
    df = pd.read_parquet(table)
    df.loc[0, "score"] = 0.9
    df.to_parquet(table)
    capsys.readouterr()
    assert records.changed_inputs("results") == [(table, "", "unrecorded")]
    assert records.main(["verify", "results"]) == 1
    out = capsys.readouterr().out
    assert f"{table}: it carries no papa record of its inputs" in out and "1 of the 2 result(s)" in out, out


def test_verify_takes_a_built_models_checkpoint_as_written(wd, capsys):
    """A model rule build_model writes (the rehearsal's) is transformers' checkpoint, its record in the folder's
    rehearsal.json: its ``model.safetensors`` carries no papa record by design, and `verify` is not to name it as a
    result rewritten by another tool (the folder of a rehearsal run failed); the same file elsewhere is named."""
    import pandas as pd
    import torch
    from safetensors.torch import save_file

    from papa import io

    Path("results/data").mkdir(parents=True)
    split = "results/data/train.parquet"
    io.write_parquet(pd.DataFrame({"x": [1]}), split, {"inputs": {}})
    Path("results/tables").mkdir()
    io.write_parquet(pd.DataFrame({"x": [1]}), "results/tables/probe.parquet", {"inputs": io.input_digests([split])})
    model = Path("results/built/models/bert/model.safetensors")
    model.parent.mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, str(model), metadata={"format": "pt"})  # as transformers' save_pretrained
    (model.parent / "rehearsal.json").write_text("{}")
    assert records.changed_inputs("results") == []
    assert records.main(["verify", "results"]) == 0
    Path("results/constants").mkdir()
    shutil.copy(model, "results/constants/average.safetensors")  # not a built model's: a constants file lost its record
    assert records.changed_inputs("results") == [("results/constants/average.safetensors", "", "unrecorded")]
    capsys.readouterr()


def test_verify_names_results_swapped_or_moved_from_where_their_job_wrote_them(wd, capsys):
    """Two results swapped (two tasks' lambda metrics, two seeds' probe files of a job), or one moved under another
    run's name, keep their inputs as they were: `verify` passed them, whose tables then were made from the wrong
    files. A record naming its job's outputs (``settings.out*``; a probe file's own ``seed`` among ``seeds``) says
    where it was written: a result lying elsewhere is named. A figure's stem and the per-head figures' folder match."""
    import pandas as pd

    from papa import io

    Path("results/tokens").mkdir(parents=True)
    tokens = "results/tokens/train.parquet"
    io.write_parquet(pd.DataFrame({"x": [1]}), tokens, {"inputs": {}})
    inputs = io.input_digests([tokens])
    for task in ("hedge", "wsj_pos"):
        out = f"results/lambda/{task}/metrics.parquet"
        Path(out).parent.mkdir(parents=True)
        settings = {"out_lambdas": f"results/lambda/{task}/lambdas.parquet", "out_metrics": out}
        io.write_parquet(pd.DataFrame({"task": [task]}), out, {"inputs": inputs, "settings": settings})
    outs = [f"results/probe/f=0.5/seed{s}.parquet" for s in (0, 1)]
    Path(outs[0]).parent.mkdir(parents=True)
    for seed, out in enumerate(outs):
        record = {"inputs": inputs, "seed": seed, "settings": {"outs": outs, "seeds": [0, 1], "seed": 0}}
        io.write_parquet(pd.DataFrame({"seed": [seed]}), out, record)
    Path("results/plots/heads").mkdir(parents=True)
    plots = {"out_curves": "results/plots/curves", "out_heads": "results/plots/heads"}
    for fig in ("results/plots/curves.html", "results/plots/heads/h.html"):  # a figure's record: its stem or folder
        Path(fig).write_text(
            f'<meta name="papa-record" content="{html.escape(json.dumps({"inputs": inputs, "settings": plots}))}">'
        )
    assert records.main(["verify", "results"]) == 0
    for a, b in (("results/lambda/hedge/metrics.parquet", "results/lambda/wsj_pos/metrics.parquet"), outs):
        os.replace(a, "swap")
        os.replace(b, a)
        os.replace("swap", b)
    capsys.readouterr()
    assert records.main(["verify", "results"]) == 1
    out = capsys.readouterr().out
    assert (
        f"{outs[0]}: its record says its job wrote it as {outs[1]}: moved or swapped since" in out
        and "results/lambda/hedge/metrics.parquet: its record says its job wrote it as "
        "results/lambda/wsj_pos/metrics.parquet"
        in out
        and "4 of the 7 result(s)" in out
        and "plots" not in out
    ), out


def test_forget_leaves_a_folder_that_is_still_there(wd, capsys):
    """`python -m papa.records forget results` on a folder still there dropped its records; the workflow then refused
    the folder as one make clean had removed (review AU's 7). make clean forgets a folder after removing it, or one
    already gone (a dangling link too)."""
    claim_results("results")
    assert records.main(["forget", "results"]) == 1
    assert "results is still there: forget drops the records of a results folder removed" in capsys.readouterr().out
    check_results("results")  # its records and marker agree still
    os.symlink(wd / "gone", "dangling")
    assert records.main(["forget", "dangling", "nosuch"]) == 0


def test_make_clean_leaves_a_folder_holding_what_papa_does_not_write(wd):
    """A results folder with a logs/ beside a user's file (`results: myexp`, a folder of the user's) passed make
    clean's checks, and the file went with it (review AU's 2): `not_removable` names what papa does not write, a
    marked folder's too; papa's own temporaries and a linked folder (which loses its link alone) pass; the
    workflow's check refuses such a folder without a run's marker. `RESULTS_ENTRIES` holds every folder the rules
    write under the results folder."""
    import re

    from papa.checks import _results_holds_others
    from papa.records import RESULTS_ENTRIES, foreign_entries, not_removable

    root = Path(__file__).resolve().parents[1]
    written = {m for f in (*root.glob("workflow/rules/*.smk"), root / "Snakefile")
               for m in re.findall(r"\{R\}/([A-Za-z_.-]+)", f.read_text())}  # fmt: skip
    assert written and written <= RESULTS_ENTRIES, written - RESULTS_ENTRIES
    Path("myexp/logs").mkdir(parents=True)
    Path("myexp/thesis.tex").write_text("precious")
    Path("myexp/.tables.papa-abcd1234.tmp").write_text("")  # an atomic write's temporary: papa's
    Path("myexp/.DS_Store").write_text("")  # what desktops and NFS put anywhere: not the user's work (review AX)
    Path("myexp/.nfs000123").write_text("")
    assert foreign_entries("myexp") == ["thesis.tex"] and foreign_entries("nosuch") == []
    assert "myexp/ holds what papa does not write (thesis.tex)" in not_removable("myexp")
    assert records.main(["removable", "myexp"]) == 1
    assert any("holding files papa does not write (thesis.tex)" in e for e in _results_holds_others({}, "myexp"))
    claim_results("myexp")  # a run's folder: the workflow takes it, make clean still leaves the user's file
    assert _results_holds_others({}, "myexp") == [] and "thesis.tex" in not_removable("myexp")
    os.remove("myexp/thesis.tex")
    assert not_removable("myexp") is None
    Path("myexp/notes.txt").write_text("x")
    os.symlink("myexp", "link")
    assert not_removable("link") is None and not_removable("link/") is None  # the link goes, its target's files stay


def test_results_of_spells_the_folder_as_the_workflow_and_names_a_misspelled_key(wd):
    """`results: link/` gave make clean `rm -rf -- link/`, which emptied the linked folder's target (review AU's 1):
    the folder is spelled as the workflow spells it; a papa config with one misspelled key was "not a papa config"
    (review AU's 15): its key and the one meant are named."""
    from papa.records import results_folder

    Path("c.yaml").write_text("results: ./runs//link/\n")
    assert results_folder(["c.yaml"]) == "runs/link"
    Path("typo.yaml").write_text("seed: 0\nsweeep: {seeds: [0]}\n")
    with pytest.raises(
        ValueError, match="typo.yaml: the key 'sweeep' is not one of the config's: did you mean 'sweep'"
    ):
        results_folder(["typo.yaml"])
    Path("twice.yaml").write_text("results: results-mine\nseed: 0\nresults: results\n")  # the workflow refuses it
    with pytest.raises(ValueError, match="twice.yaml, line 3: the key 'results' is given twice in one mapping"):
        results_folder(["twice.yaml"])
    Path("other.yaml").write_text("name: papa\nchannels: [conda-forge]\n")
    with pytest.raises(ValueError, match="other.yaml is not a papa config"):
        results_folder(["other.yaml"])


def test_results_of_without_the_key_is_the_schemas_default(wd, monkeypatch):
    """A config without ``results:`` writes into the schema's ``default:`` (Snakemake's validation fills it in); make
    clean and make report (`results_folder`) take it from the schema too, not from a copy of its value (issue 15:
    one source of defaults)."""
    import papa.records as R

    Path("c.yaml").write_text("seed: 0\n")
    schema = R.read_schema()
    assert R.results_folder(["c.yaml"]) == schema["properties"]["results"]["default"]

    read = R.read_schema

    def moved(path=None):  # the schema with another default: the folder follows it
        changed = read(path)
        changed["properties"]["results"]["default"] = "results-elsewhere"
        return changed

    monkeypatch.setattr(R, "read_schema", moved)
    assert R.results_folder(["c.yaml"]) == "results-elsewhere"


def test_the_schema_is_parsed_once_while_it_stays_as_it_is(tmp_path, monkeypatch):
    """`read_schema` parses a schema once a process while its file stays as it is (a config check read it twice, the
    notebook entry points' key check with pure-Python YAML: a third of the fast tests' time), gives each caller a
    dict of its own, and reads an edit; `papa.checks.schema_file`, the JSON copy Snakemake's `validate` reads in
    the YAML's place, holds what Snakemake's own read of the YAML gives (yte), sits in papa's cache under the YAML's
    digest (an edit gets its own; writing one removes the copies not written for a month), is written again where
    removed, and is the YAML itself where the cache cannot be written."""
    import yte

    from papa.checks import SCHEMA, schema_file

    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "cache"))
    mine = records.read_schema(SCHEMA)
    mine["properties"].clear()  # the caller's to change
    assert records.read_schema(SCHEMA)["properties"] and records.read_schema() == records.read_schema(SCHEMA)
    copy = Path(schema_file(SCHEMA))
    assert copy.parent == tmp_path / "cache" / "schemas" and copy.suffix == ".json"
    assert str(copy) == schema_file(SCHEMA) and len(list(copy.parent.iterdir())) == 1  # one copy for one schema
    assert json.loads(copy.read_text()) == yte.process_yaml(SCHEMA.read_text(), require_use_yte=True)

    s = tmp_path / "s.yaml"
    s.write_text("type: object\nproperties: {a: {default: 1}}\n")
    first = schema_file(s)
    assert records.read_schema(s)["properties"]["a"]["default"] == 1
    s.write_text("type: object\nproperties: {a: {default: 22}}\n")  # another size: an edit, whatever the clock
    assert records.read_schema(s)["properties"]["a"]["default"] == 22
    assert json.loads(Path(schema_file(s)).read_text())["properties"]["a"]["default"] == 22 and schema_file(s) != first
    copy.unlink()  # removed (a cleaned cache): written again
    assert Path(schema_file(SCHEMA)).is_file()
    stale, recent = copy.parent / "stale.json", Path(first)  # a schema no start read for a month; last hour's
    stale.write_text("{}")
    month_ago = time.time() - 31 * 24 * 3600
    os.utime(stale, (month_ago, month_ago))
    assert schema_file(SCHEMA) == str(copy) and stale.exists()  # a copy read, none written: nothing removed
    s.write_text("type: object\nproperties: {a: {default: 333}}\n")  # another version written: the stale one goes
    assert Path(schema_file(s)).is_file() and not stale.exists() and recent.is_file() and copy.is_file()
    gone = tmp_path / "gone.yaml"
    assert schema_file(gone) == str(gone)  # no file: Snakemake's own message for it
    with pytest.raises(FileNotFoundError):
        records.read_schema(gone)
    (tmp_path / "a-file").write_text("")
    for cache in (tmp_path / "a-file" / "cache", "~nosuchuser/cache"):  # not a folder; a home this machine lacks
        monkeypatch.setenv("PAPA_CACHE", str(cache))
        assert schema_file(SCHEMA) == str(SCHEMA)


def test_results_of_without_snakemake_says_which_python_to_use(monkeypatch, capsys):
    """`python3 -m papa.records results-of` with a Python that lacks Snakemake (the system's, after make install)
    said "run make install first", which changed nothing: it names the venv's python (review AZ)."""
    monkeypatch.setitem(sys.modules, "snakemake.common.configfile", None)  # import fails, as without Snakemake
    assert records.main(["results-of", str(Path(__file__).parents[1] / "config/config.yaml")]) == 1
    out = capsys.readouterr().out
    assert "run it with .venv/bin/python (or after source .venv/bin/activate" in out, out


def test_results_of_without_pyyaml_says_which_python_to_use(monkeypatch, capsys):
    """The same with a Python that lacks PyYAML too (a bare system python3, which make clean and make report run
    where there is no .venv): the schema's default was read (with yaml) before Snakemake's import was tried, so it
    ended on a ModuleNotFoundError traceback, and make said only "failed: run it to see why"."""
    monkeypatch.setitem(sys.modules, "snakemake.common.configfile", None)  # import fails, as without Snakemake
    monkeypatch.setitem(sys.modules, "yaml", None)  # and without PyYAML
    assert records.main(["results-of", str(Path(__file__).parents[1] / "config/config.yaml")]) == 1
    out = capsys.readouterr().out
    assert "run it with .venv/bin/python (or after source .venv/bin/activate" in out, out


def test_lost_targets_are_the_lost_outputs_the_config_makes_and_each_is_said(wd):
    """What rule all asks for again (common.smk's lost_targets): of the lost outputs, those the config makes; each
    lost output is said, one of an earlier config as only reported; an output on disk still marked incomplete that
    the config makes is said with the --rerun-incomplete advice (not one it does not make, nor a missing one)."""
    from papa.records import lost_targets, note_lost

    said = []
    assert lost_targets("results", lambda f: True, said.append) == [] and said == []  # no records of anything lost
    ours, theirs = "results/lambda/m/t/average/lambdas.parquet", "results/lambda/m/gone/average/lambdas.parquet"
    note_lost([ours, theirs, "other/x.parquet"])  # another results folder's: not this one's
    Path("results/probe").mkdir(parents=True)
    for f in ("results/probe/written.parquet", "results/probe/dropped.parquet"):
        Path(f).write_text("x")
        _marker(wd, f)
    _marker(wd, "results/probe/killed.parquet")  # a killed job's missing output: lost, made again
    makes = lambda f: "gone" not in f and "dropped" not in f  # noqa: E731
    assert lost_targets("results", makes, said.append) == ["results/lambda/m/t/average/lambdas.parquet",
                                                           "results/probe/killed.parquet"]  # fmt: skip
    assert said == [
        "results/probe/written.parquet was written, but its job's Snakemake was stopped before it recorded the job "
        "as finished (a Ctrl-C, a lost session): run with --rerun-incomplete (--ri) to make it again, and every "
        "result made from it",
        f"{theirs} is missing (its job did not finish), and this config does not make it: the results made from it "
        "are of an earlier config",
        f"{ours} is missing: its job did not finish (it failed, was killed, or is running now); it is made again, "
        "and every result made from it reruns",
        "results/probe/killed.parquet is missing: its job did not finish (it failed, was killed, or is running now); "
        "it is made again, and every result made from it reruns",
    ]
    said.clear()
    assert lost_targets("results", lambda f: False, said.append) == []  # a config that makes none of them
    assert len(said) == 3 and all("this config does not make it" in s for s in said), said


def test_an_output_marked_incomplete_by_a_run_writing_it_now_is_not_said_to_need_rerun_incomplete(wd):
    """A second start on a folder that a run is writing (a `snakemake -n` to see how far it got, or a second run,
    refused) found the first run's running jobs' outputs marked incomplete and said of each that its Snakemake "was
    stopped" and to run with --rerun-incomplete, under the line saying a Snakemake is running on the folder (seen
    on a local run: review DG). While another process holds the folder (`hold_results`), such an output is said to
    be that run's, being written, without the advice; once it ends, the advice again."""

    from papa.records import lost_targets

    Path("results/probe").mkdir(parents=True)
    Path("results/probe/written.parquet").write_text("x")
    _marker(wd, "results/probe/written.parquet")
    said = []
    with _held_by_another_process("results") as first:
        assert lost_targets("results", lambda f: True, said.append) == []
    assert said == [
        f"results/probe/written.parquet is marked incomplete by the Snakemake running on results/ (pid {first} "
        f"on {os.uname().nodename}): its job is writing it, and it is complete when that job ends"
    ], said
    said.clear()
    assert lost_targets("results", lambda f: True, said.append) == []  # that run gone: its Snakemake was stopped
    assert len(said) == 1 and "run with --rerun-incomplete (--ri)" in said[0], said


def test_stale_files_are_the_probe_and_lambda_files_the_grid_does_not_make(tmp_path):
    """What a start names and `make prune` removes (common.smk's stale_grid_files): parquet files under probe/ and
    lambda/ not in the grid, paths compared normalized; hidden temporaries, other stages' files and other
    suffixes are left alone."""
    from papa.records import stale_files

    results = tmp_path / "res"
    assert stale_files(results, []) == []  # no folder yet
    kept = results / "probe/m/t/average/lambda/fraction_dynamic=0.5/seed0.parquet"
    files = [kept, results / "probe/m/t/average/lambda/fraction_dynamic=0.5/seed1.parquet",
             results / "probe/m/t/average/lambda/fraction_dynamic=0.5/.seed0.parquet.tmp.parquet",
             results / "lambda/m/t/average/lambdas.parquet", results / "lambda/m/t/average/metrics.parquet",
             results / "lambda/m/t/average/notes.txt", results / "constants/m/d/N32/average.parquet"]  # fmt: skip
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    made = [str(results) + "/./probe/m/t/average/lambda/fraction_dynamic=0.5/seed0.parquet",
            results / "lambda/m/t/average/lambdas.parquet"]  # fmt: skip
    assert stale_files(results, made) == sorted(map(str, [files[1], files[4]]))
    assert stale_files(str(results), [*made, files[1], files[4]]) == []
    assert stale_files(results, []) == sorted(map(str, [kept, files[1], files[3], files[4]]))


def test_the_stale_notices_commands_do_what_it_says(tmp_path):
    """The read of the whole folder the stale-files notice shows takes the files in (pd.read_parquet of a folder of
    fraction_dynamic=<f> folders alone fails: pyarrow adds the names as a second, string column), and the --config
    arguments of its prune command give the run's settings again as Snakemake parses them (it told a run given
    --config settings `make prune CONFIG=<file>`, which prunes the file's config and kept the files it named)."""
    import re
    import shlex

    import pandas as pd
    from snakemake.cli import parse_config

    from papa import records

    results = tmp_path / "res"
    for f in (0.5, 1):
        folder = results / "probe/m/t/average/lambda" / f"fraction_dynamic={f:g}"
        folder.mkdir(parents=True)
        pd.DataFrame({"fraction_dynamic": [float(f)], "score": [0.5]}).to_parquet(folder / "seed0.parquet")
    read = re.search(r"\((pd\.read_parquet\(.*?\))\) takes them in", records.stale_notice(results, ["x"], ["a"]))
    assert len(eval(read.group(1), {"pd": pd})) == 2, read.group(1)  # the notice's own code
    entries = ["sweep={seeds: [0, 2], constants: [average@wiki], batch_order: shared}", "seed=1", "analyses=",
               "analyses={tasks: null, patterns: {}}", "results=res-x", "precision=tf32",
               "cache={budget_mb: 1.5e3, scratch: 'a b: c'}",
               "datasets={d: {source: local, train: 'x,y.csv', labels: [no, '[a]', '#c', \"it's\"]}}"]  # fmt: skip
    given = parse_config(entries)
    notice = records.stale_notice(results, ["x"], ["a.yaml"], given)
    args = shlex.split(notice.split(" --config ", 1)[1].removesuffix(" removes them"))
    assert parse_config(args) == given == parse_config(shlex.split(records.config_arguments(given)))
    assert "make prune" in records.stale_notice(results, ["x"], ["a.yaml"], {})


def test_the_start_notices_say_how_many_files_and_what_to_run():
    """What a start says of stale files and of files written by other papa code (common.smk's start_notices)."""
    from papa.records import stale_notice, upgrade_notice

    assert stale_notice("res", [], ["config/a.yaml"]) is None
    assert stale_notice("res", ["res/probe/x.parquet", "res/probe/y.parquet"], [Path("config/a.yaml"), "b.yaml"]) == (
        "res holds 2 probe or lambda file(s) of runs this config does not make (an earlier config's: a dropped seed, "
        "fraction_dynamic, constants spec, head order, model or task), e.g. res/probe/x.parquet: the tables leave "
        'them out, but a read of the whole folder (pd.read_parquet("res/probe", partitioning=None)) takes them in; '
        'make prune CONFIG="config/a.yaml b.yaml" removes them'
    )
    # a run given --config settings: make prune would prune the file's config, keeping these; snakemake prune with them
    given = {"sweep": {"seeds": ["0"], "batch_order": "shared"}, "seed": 1, "results": "res", "analyses": None}
    assert stale_notice("res", ["res/probe/x.parquet"], ["a.yaml"], given).endswith(
        "takes them in; snakemake prune --cores 1 --configfile a.yaml --config 'sweep={seeds: [0], batch_order: "
        "shared}' seed=1 results=res analyses= removes them"
    )
    assert upgrade_notice("res", {}) is None
    assert upgrade_notice("res", {"probe": 4, "tokenize": 1}) == (
        "5 file(s) under res were written by papa code that has changed since (a git pull or an edit of papa/; by "
        "rule: probe 4, tokenize 1): a run that asks for them reruns their jobs, and every job after them, though "
        "the change may leave every number as it was (papa.io.read_provenance names the commit that wrote a file; "
        "git log says what changed since). --rerun-triggers mtime keeps them, and any other changed setting from "
        "rerunning them while it is given (README: Upgrading papa)"
    )


def test_verify_takes_a_model_or_data_built_in_another_results_folder_as_an_input(wd, capsys):
    """A config may read a model or dataset another config's run built (``models: {bert:
    results-rehearsal/built/models/bert}``, a local dataset's file under ``results-rehearsal/built/data/``): those are
    the run's source files, read in place, not results copied in from that run; `verify` named every result that
    recorded them "copied in" from another results folder. A result whose input is another folder's other output is
    still named."""
    import pandas as pd
    import torch
    from safetensors.torch import save_file

    from papa import io

    for folder in ("results", "results-rehearsal"):
        Path(folder).mkdir()
        claim_results(folder)
    model = Path("results-rehearsal/built/models/bert/model.safetensors")
    model.parent.mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, str(model), metadata={"format": "pt"})
    data = Path("results-rehearsal/built/data/glue_cola/train.tsv")
    data.parent.mkdir(parents=True)
    data.write_text("sentence\tlabel\na\t1\n")
    Path("results/tables").mkdir()
    inputs = io.input_digests([str(model), str(data)])
    io.write_parquet(pd.DataFrame({"s": [1.0]}), "results/tables/summary.parquet", {"inputs": inputs})
    assert records.changed_inputs("results") == []
    assert records.main(["verify", "results"]) == 0
    Path("results-rehearsal/tables").mkdir()
    io.write_parquet(pd.DataFrame({"s": [1.0]}), "results-rehearsal/tables/probe.parquet", {"inputs": {}})
    theirs = io.input_digests(["results-rehearsal/tables/probe.parquet"])
    io.write_parquet(pd.DataFrame({"s": [1.0]}), "results/tables/probe.parquet", {"inputs": theirs})
    assert records.changed_inputs("results") == [
        ("results/tables/probe.parquet", "results-rehearsal/tables/probe.parquet", "foreign")
    ]
    capsys.readouterr()


def test_forget_counts_every_record_it_drops_and_keeps_the_other_folders_locks_and_forgotten_folders(wd, capsys):
    """`forget_results` (make clean's `python -m papa.records forget`) drops a killed run's locks only where every
    output its lock names lies in the folder (a lock naming none, or also another folder's files, stays: another
    run's), drops the record of an output that is the folder itself, counts every record it drops (the lost list's
    entries and Snakemake's markers and metadata, not only the locks: the line it prints says how many), and
    keeps the folders it forgot before (each one's marker coming back is refused, not only the last's). Mutation
    testing found none of this checked."""
    b64 = _record_name
    claim_results("results")
    claim_results("results-two")
    for kind in ("metadata", "incomplete"):
        (Path(".snakemake") / kind).mkdir()
    for f in ("results", "results/tables/summary.parquet", "results-two/probe/p.parquet"):
        (Path(".snakemake") / "metadata" / b64(f)).write_text("{}")
    (Path(".snakemake") / "incomplete" / b64("results/probe/p.parquet")).write_text("")
    records.note_lost(["results/lambda/l.parquet", "results-two/lambda/l.parquet"])
    locks = Path(".snakemake/locks")
    locks.mkdir()
    lock_files = {
        "0": ("results/probe/p.parquet\n", "results/tokens/t.parquet\n"),  # a killed run of results: dropped
        "1": ("results/probe/q.parquet\nresults-two/probe/q.parquet\n", "x\n"),  # also another folder's: kept
        "2": ("", "results/tokens/t.parquet\n"),  # names no output: not known to be this folder's, kept
    }
    for n, (out, inp) in lock_files.items():
        (locks / f"{n}.output.lock").write_text(out)
        (locks / f"{n}.input.lock").write_text(inp)
    # 2 locks + 1 lost output + 2 metadata records (the folder's own, its table's) + 1 incomplete marker
    assert records.forget_results("results") == 6
    assert sorted(os.listdir(locks)) == ["1.input.lock", "1.output.lock", "2.input.lock", "2.output.lock"]
    assert os.listdir(".snakemake/metadata") == [b64("results-two/probe/p.parquet")]
    assert records.lost_outputs("results-two") == ["results-two/lambda/l.parquet"]
    os.rename("results-two", "aside")  # removed (make clean refuses a folder still there), and later back
    assert records.main(["forget", "results-two"]) == 0
    assert "dropped 2 record(s) of results-two/" in capsys.readouterr().out  # its lost output, its metadata
    os.rename("aside", "results-two")
    for folder in ("results", "results-two"):  # both forgotten: each one back with its marker is refused
        with pytest.raises(ForeignResultsError, match="removed by make clean"):
            check_results(folder)


def test_verify_with_no_recorded_input_to_check_says_so(wd, capsys):
    """A folder whose results all record their inputs as none (downloaded splits, ``{"inputs": {}}``) has nothing
    to compare: verify says so and exits 1, not "every recorded input file is as it was read" (the
    `not (found or present)` case, which mutation testing found unchecked); a hidden file there (macOS's ``._``
    copies beside each file, cut short) is not a result papa writes and is not read."""
    import pandas as pd

    from papa import io

    Path("results/data").mkdir(parents=True)
    io.write_parquet(pd.DataFrame({"x": [1]}), "results/data/train.parquet", {"inputs": {}, "source": "a download"})
    Path("results/data/._train.parquet").write_bytes(b"\x00\x05\x16\x07 not Parquet")
    assert records.main(["verify", "results"]) == 1
    out = capsys.readouterr().out
    assert "none of the 1 result file(s) under results records its inputs" in out and "nothing to verify" in out, out
    Path("results/tables").mkdir()
    table = "results/tables/probe.parquet"
    io.write_parquet(pd.DataFrame({"s": [1.0]}), table, {"inputs": io.input_digests(["results/data/train.parquet"])})
    Path("results/tables/._probe.parquet").write_bytes(b"\x00\x05\x16\x07 not Parquet")
    assert records.changed_inputs("results") == []
    assert records.main(["verify", "results"]) == 0
    assert "every recorded input file is as it was read (2 result files)" in capsys.readouterr().out


# ----------------------------------------------------------------------------- cases mutation testing found unchecked


def test_a_marker_written_without_its_path_passes_under_any_spelling(wd):
    """A marker of these records written before markers kept the folder's path (no ``path`` key) names no spelling
    to hold the folder to: `check_results` takes it under any (review DI: a marker read as naming the empty path
    went unchecked)."""
    claim_results("results")
    marker = json.loads((wd / "results" / MARKER).read_text())
    del marker["path"]
    (wd / "results" / MARKER).write_text(json.dumps(marker))
    check_results("results")
    check_results("./results")
    check_results("results/")


def test_a_claim_on_a_forgotten_folder_that_came_back_is_refused_and_keeps_it_forgotten(wd):
    """A run's onstart (`claim_results`) on a folder that make clean forgot and that came back with its marker is
    refused as `check_results` refuses it, and does not take the folder off the forgotten list: only a folder made
    anew (no marker yet) is this run's (review DI: the claim dropped every claimed folder from the list went
    unchecked)."""
    from papa.records import forget_results

    claim_results("results")
    os.rename("results", "aside")
    forget_results("results")
    os.rename("aside", "results")
    for _ in range(2):  # the failed claim changed nothing: refused again
        with pytest.raises(ForeignResultsError, match="removed by make clean"):
            claim_results("results")
    with pytest.raises(ForeignResultsError, match="removed by make clean"):
        check_results("results")


@pytest.mark.parametrize("code", ["EROFS", "EACCES", "EPERM", "ENOSPC"])
def test_each_unwritable_results_folder_error_is_named(wd, monkeypatch, code):
    """Each error of a folder that cannot be written (read-only, no permission, no space) says the results folder
    cannot be written, keeping its errno (review DI: only a read-only file system was checked)."""
    import errno

    create, number = records._create_exclusive, getattr(errno, code)

    def refused(path, value):
        if path.name != MARKER:
            return create(path, value)
        raise OSError(number, os.strerror(number), f"{path}.papa-x.tmp")

    monkeypatch.setattr(records, "_create_exclusive", refused)
    with pytest.raises(OSError, match=r"the results folder 'results' cannot be written \(") as e:
        claim_results("results")
    assert e.value.errno == number and os.strerror(number) in str(e.value)


def test_an_output_marked_incomplete_while_this_process_holds_the_folder_gets_the_rerun_incomplete_advice(wd):
    """The run that holds the folder is this process (`running_on` says "this process": the workflow's own start,
    after its onstart took the lock): an output marked incomplete is then a killed earlier run's, not one being
    written, so the --rerun-incomplete advice is said (review DI: that case went unchecked)."""
    from papa.records import hold_results, lost_targets, running_on

    Path("results/probe").mkdir(parents=True)
    Path("results/probe/written.parquet").write_text("x")
    _marker(wd, "results/probe/written.parquet")
    hold_results("results")
    assert running_on("results") == "this process"
    said = []
    assert lost_targets("results", lambda f: True, said.append) == []
    assert len(said) == 1 and "run with --rerun-incomplete (--ri)" in said[0], said


@pytest.mark.parametrize("folder", ["runs/papa results", "a\tb", "a'b", 'a"b', "a$b", "a`b", "a\\b"])
def test_a_results_folder_with_whitespace_or_a_shell_quoting_character_is_refused(tmp_path, folder):
    """`results_folder` (make clean, make report) refuses a folder with whitespace or a character that make's
    quoting cannot pass to the shell as one folder, each one of them, and a value that is no folder (review DI: the
    backslash and an empty folder went unchecked)."""
    from papa.records import results_folder

    config = tmp_path / "c.json"
    config.write_text(json.dumps({"results": folder}))
    with pytest.raises(ValueError, match="holds whitespace or a quote"):
        results_folder([str(config)])
    for blank in ("", None, 3):  # no folder at all
        config.write_text(json.dumps({"results": blank}))
        with pytest.raises(ValueError, match=f"c.json: results: is {blank!r}, not a folder: give one plain path"):
            results_folder([str(config)])
    config.write_text(json.dumps({"results": "runs/papa-results_2.v1"}))
    assert results_folder([str(config)]) == "runs/papa-results_2.v1"


def test_a_key_given_three_times_names_its_first_line_each_time_and_incomplete_marks_are_sorted(wd):
    """`load_yaml_strict` names, for each repeat of a key, the line it was first given on (not the previous
    repeat's); `marked_incomplete` lists the marked outputs sorted, whatever order the records folder lists them
    in (review DI: both went unchecked)."""
    from papa.records import load_yaml_strict, marked_incomplete

    config, twice = load_yaml_strict("lr: 1\nseed: 0\nlr: 2\nlr: 3\n", "c.yaml")
    assert config == {"lr": 3, "seed": 0}
    assert len(twice) == 2
    for said, line in zip(twice, (3, 4), strict=True):
        assert said.startswith(f"c.yaml, line {line}: the key 'lr' is given twice in one mapping (first on line 1)")
    outputs = [f"results/probe/{name}.parquet" for name in ("b", "d", "a", "e", "c")]
    for f in outputs:
        _marker(wd, f)
    _marker(wd, "other/x.parquet")
    assert marked_incomplete("results") == sorted(outputs)


def test_make_clean_leaves_a_dangling_link_and_takes_a_marker_naming_no_records(wd):
    """`not_removable`'s edges that mutation testing found unchecked (review DL): a results path that is a link to
    nothing is no folder either (``os.path.lexists``: make clean would remove the link and say it removed results);
    a marker naming no records id (no ``id``, not a mapping, not JSON) holds the folder for no other working
    directory, so make clean may remove it."""
    from papa.records import not_removable

    records_id(create=True)  # these records have an id: a marker naming none is still not another's
    os.symlink("nowhere", "dangling")
    assert not_removable("dangling") == "dangling is no folder (a file or a link to one): check the config's results:"
    for marker in ("{}", '{"workdir": "/elsewhere"}', "[1, 2]", "{not json"):
        Path("old").mkdir(exist_ok=True)
        (Path("old") / MARKER).write_text(marker)
        assert not_removable("old") is None, marker
    (Path("old") / MARKER).write_text(json.dumps({"id": "other", "workdir": "/elsewhere"}))
    assert "holds the results of the Snakemake records of /elsewhere" in not_removable("old")


def test_prune_keeps_the_results_folder_it_empties_and_a_successful_run_keeps_a_like_named_folders_lost_files(wd):
    """Mutation testing found unchecked (review DL): `remove_files` removes the folders it leaves empty up to the
    results folder, not the results folder itself nor the folders above it; `forget_found` drops the lost files
    its config does not make under its own results folder only, not under one whose name begins with it
    (``results`` and ``results-smoke/``)."""
    from papa.records import LOST, forget_found, note_lost, remove_files

    only = Path("top/results/probe/m/seed0.parquet")
    only.parent.mkdir(parents=True)
    only.write_text("x")
    assert remove_files([only], under="top/results") == [str(only)]
    assert Path("top/results").is_dir() and not Path("top/results/probe").exists()
    note_lost(["results/probe/old.parquet", "results-smoke/probe/y.parquet"])
    forget_found(results="results", makes=lambda f: False)
    assert json.loads((wd / ".snakemake" / LOST).read_text())["paths"] == ["results-smoke/probe/y.parquet"]


def test_only_a_param_that_is_a_fingerprint_counts_as_the_records_code(wd):
    """`written_by_other_code` takes a code fingerprint from a param that is one (its repr, whole): a param holding a
    like-looking text inside it (a mapping's value) is no code, and a record with no other fingerprint is left out
    (mutation testing found it unchecked, review DL)."""
    from papa.records import written_by_other_code

    (Path(".snakemake") / "metadata").mkdir()
    path = "results/probe/a.parquet"
    params = ["{'revision': '0123456789abcdef'}", "['fedcba9876543210']"]
    (Path(".snakemake") / "metadata" / _record_name(path)).write_text(json.dumps({"rule": "probe", "params": params}))
    Path(path).parent.mkdir(parents=True)
    Path(path).write_text("x")
    assert written_by_other_code("results", {"00000000ffffffff"}) == {}


def test_an_overlays_order_message_names_each_file_once_and_a_blank_overlay_of_is_left_to_the_schema(wd):
    """`overlay_problem`'s command gives every file once, the overlay's base first and the overlay last (the others
    between, in their order), and an empty ``overlay_of`` names no file to order (the schema refuses it, saying so):
    mutation testing found both unchecked (review DL)."""
    from papa.records import overlay_problem

    for name in ("base.yaml", "mid.yaml", "over.yaml"):
        Path(name).write_text("{}\n")
    over = {"overlay_of": "base.yaml"}
    said = overlay_problem([("over.yaml", over), ("mid.yaml", {}), ("base.yaml", {})])
    assert "give it after base.yaml (--configfile base.yaml mid.yaml over.yaml)," in said, said
    assert overlay_problem([("base.yaml", {}), ("mid.yaml", {}), ("over.yaml", over)]) is None
    for blank in ("", "  "):
        assert overlay_problem([("over.yaml", {"overlay_of": blank}), ("base.yaml", {})]) is None


def test_where_yaml_breaks_is_said_and_a_file_that_cannot_be_read_says_nothing(wd):
    """`yaml_error_place` adds the YAML parser's line and column to Snakemake's message, and nothing (not an error of
    its own over Snakemake's) where the file cannot be read or decoded: mutation testing found the latter unchecked
    (review DL)."""
    from papa.records import yaml_error_place

    Path("bad.yaml").write_text("a: [1, 2\n")
    assert yaml_error_place("bad.yaml").startswith(" The YAML parser: ") and "line 2" in yaml_error_place("bad.yaml")
    Path("folder.yaml").mkdir()
    Path("latin.yaml").write_bytes(b"a: \xe9\n")
    for unread in ("nosuch.yaml", "folder.yaml", "latin.yaml"):
        assert yaml_error_place(unread) == "", unread


def test_paths_are_written_one_way_and_listed_with_dots_only_past_the_first_few():
    """`spelling` (mutation review of papa/records.py): the root stays the root, however many slashes; `listed` adds
    "..." only where it leaves items out."""
    spelt = {"/": "/", "//": "/", "/.": "/", ".": ".", "": ".", "./": ".", "a//b/./": "a/b", "../a/": "../a"}
    assert {p: records.spelling(p) for p in spelt} == spelt
    assert records.listed([1, 2, 3]) == "1, 2, 3" and records.listed([1, 2, 3, 4]) == "1, 2, 3, ..."
    assert records.listed("ab", 1) == "a, ..." and records.listed([]) == ""
