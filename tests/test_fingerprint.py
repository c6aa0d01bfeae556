"""papa.fingerprint: a stage reruns when the library code it reaches changes, not for comments or other code."""

import json
import os
import textwrap

import pytest

from papa.fingerprint import code_fingerprint, reached

A = '''
"""Module a."""
from . import b
from .c import K


def f(x):
    """Docstring of f."""
    return g(x) + K  # a comment


def g(x):
    from .b import helper

    return helper(x) * 2


def unrelated():
    return 0
'''
B = """
def helper(x):
    return x + 1


def other():
    return 1
"""
C = "K = 3\n"
SCRIPT = "from papa import a\nprint(a.f(1))\n"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test its own fingerprint cache (``$PAPA_CACHE/fingerprints``): the user's is keyed by the contents of the
    package fingerprinted, not by papa.fingerprint's own code, so the fixture packages' fingerprints kept there by an
    earlier run (or an earlier papa) were read back instead of computed, and a change to how they are computed went
    unseen by these tests (review DM: mutation testing). The tests of the cache itself set their own."""
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "own-cache"))


@pytest.fixture
def pkg(tmp_path):
    root = tmp_path / "root"
    (root / "papa").mkdir(parents=True)
    (root / "papa" / "__init__.py").write_text("")
    for name, text in {"a": A, "b": B, "c": C}.items():
        (root / "papa" / f"{name}.py").write_text(textwrap.dedent(text))
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return root, script


def _edit(root, name, old, new):
    p = root / "papa" / f"{name}.py"
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new))


def test_reaches_calls_through_aliases_local_imports_and_constants(pkg):
    root, script = pkg
    assert reached(script, root) == ["papa.a:f", "papa.a:g", "papa.b:helper", "papa.c:K"]


@pytest.mark.parametrize(
    "edit",
    [
        ("a", '"""Docstring of f."""', '"""Another docstring."""'),
        ("a", "# a comment", "# another comment"),
        ("a", "return g(x) + K", "return (g(x)\n            + K)"),
        ("a", "return 0", "return 1"),  # unrelated() is not reached
        ("b", "return 1", "return 2"),  # nor is other()
    ],
)
def test_comments_formatting_and_unreached_code_keep_the_fingerprint(pkg, edit):
    root, script = pkg
    before = code_fingerprint(script, root)
    _edit(root, *edit)
    assert code_fingerprint(script, root) == before


@pytest.mark.parametrize(
    "edit",
    [
        ("a", "* 2", "* 3"),  # g, called by f
        ("b", "x + 1", "x + 2"),  # helper, imported inside g
        ("c", "K = 3", "K = 4"),  # a module constant f uses
    ],
)
def test_reached_code_changes_the_fingerprint(pkg, edit):
    root, script = pkg
    before = code_fingerprint(script, root)
    _edit(root, *edit)
    assert code_fingerprint(script, root) != before


D = """
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import b
else:
    from .b import helper

    SIZE = 2

TABLE = {"static": "one"}
TABLE.update({"mix": "two"})
TABLE["mix"] += "!"
run_alias = None
STEP = 1
STEP = STEP * 2

try:
    def fast(x):
        return x + STEP
except ImportError:
    fast = None


def run(kind):
    return TABLE[kind], fast(1), SIZE, helper(1)


def unrelated():
    return 0


if __name__ == "__main__":
    print(run("mix"))
"""


@pytest.mark.parametrize(
    ("edit", "changes"),
    [
        (('{"mix": "two"}', '{"mix": "one"}'), True),  # a top-level call that changes a table: the module's body
        (('TABLE["mix"] += "!"', 'TABLE["mix"] += "?"'), True),  # an item assigned at the top level
        (("SIZE = 2", "SIZE = 3"), True),  # the else branch of TYPE_CHECKING runs
        (("run_alias = None", "run_alias = 1"), False),  # a plain assignment nothing reached uses: no body
        (("STEP * 2", "STEP * 3"), True),  # the second binding of a name
        (("return x + STEP", "return x - STEP"), True),  # a function defined inside a top-level try block
        (('print(run("mix"))', 'print(run("static"))'), False),  # runs only as a command
        (("from . import b", "from . import c"), False),  # never runs
        (("return 0", "return 1"), False),  # not reached
    ],
)
def test_every_top_level_statement_of_a_reached_module_counts(pkg, edit, changes):
    """Top-level statements other than plain definitions (a table updated by a call, a name bound twice, a
    function defined in a try block) change what reached code computes: they are hashed with the module."""
    root, _ = pkg
    (root / "papa" / "d.py").write_text(textwrap.dedent(D))
    script = root / "script_d.py"
    script.write_text("from papa.d import run\nrun('mix')\n")
    before = code_fingerprint(script, root)
    assert "papa.d:<body>" in reached(script, root) and "papa.d:fast" in reached(script, root)
    assert "papa.b:helper" in reached(script, root)  # imported in the else branch of TYPE_CHECKING
    _edit(root, "d", *edit)
    assert (code_fingerprint(script, root) != before) is changes


def test_an_augmented_assignment_of_a_name_is_that_names_definition(pkg):
    """``LIMIT += 1`` at the top of a module binds a name alone, as ``LIMIT = 2`` does: it is that name's
    definition (an edit reruns the stages that use it), not the module's body, which would rerun every stage reaching
    any of the module's code (mutation review of papa/fingerprint.py)."""
    root, _ = pkg
    (root / "papa" / "e.py").write_text(
        "LIMIT = 1\nLIMIT += 1\nUNUSED = [0]\nUNUSED += [1]\n\n\ndef f():\n    return LIMIT\n\n\n"
        "def g():\n    return 2\n"
    )
    uses_f, uses_g = root / "script_f.py", root / "script_g.py"
    uses_f.write_text("from papa.e import f\nf()\n")
    uses_g.write_text("from papa.e import g\ng()\n")
    before_f, before_g = code_fingerprint(uses_f, root), code_fingerprint(uses_g, root)
    assert reached(uses_g, root) == ["papa.e:g"]
    _edit(root, "e", "UNUSED += [1]", "UNUSED += [2]")
    assert (code_fingerprint(uses_f, root), code_fingerprint(uses_g, root)) == (before_f, before_g)
    _edit(root, "e", "LIMIT += 1", "LIMIT += 2")
    assert code_fingerprint(uses_f, root) != before_f and code_fingerprint(uses_g, root) == before_g


def test_an_unpacking_assignment_binds_its_names_alone(pkg):
    """``FIRST, *REST = ...`` and ``[X, Y] = ...`` at the top of a module bind names, as ``X = ...`` does: each is
    the definition of its names, not the module's body, which every stage reaching any of the module's code would
    hash (mutation review of papa/fingerprint.py)."""
    root, _ = pkg
    (root / "papa" / "e.py").write_text(
        "FIRST, *REST = 1, 2, 3\n[X, Y] = 4, 5\n\n\ndef f():\n    return REST + [Y]\n\n\ndef g():\n    return 2\n"
    )
    uses_f, uses_g = root / "script_f.py", root / "script_g.py"
    uses_f.write_text("from papa.e import f\nf()\n")
    uses_g.write_text("from papa.e import g\ng()\n")
    assert reached(uses_g, root) == ["papa.e:g"]
    # a statement's names are reached together (one statement binds them)
    assert reached(uses_f, root) == ["papa.e:FIRST", "papa.e:REST", "papa.e:X", "papa.e:Y", "papa.e:f"]
    before_f, before_g = code_fingerprint(uses_f, root), code_fingerprint(uses_g, root)
    _edit(root, "e", "[X, Y] = 4, 5", "[X, Y] = 4, 6")
    assert code_fingerprint(uses_f, root) != before_f and code_fingerprint(uses_g, root) == before_g


def test_a_script_in_a_folder_whose_name_holds_a_colon_is_read_as_a_file(pkg, tmp_path):
    """A ``module:name`` entry is told from a script's path by the path not existing: a checkout under a folder
    named ``run:1`` (a date, a job id) reaches its script's code, not a module ``<folder>`` (mutation review of
    papa/fingerprint.py)."""
    root, script = pkg
    colon = tmp_path / "run:1" / "script.py"
    colon.parent.mkdir()
    colon.write_text(script.read_text())
    assert reached(str(colon), root) == reached(script, root) != []
    assert code_fingerprint(str(colon), root) == code_fingerprint(script, root)


def test_a_packages_init_statements_count_for_its_modules(pkg):
    """A package's ``__init__`` runs before any of its modules: a statement there with an effect (a torch
    default, an environment variable, a registration) changes what every job importing one of them computes, so it
    counts for them, in the top package and a subpackage alike; a definition there nothing reaches does not."""
    root, script = pkg
    (root / "papa" / "sub").mkdir()
    (root / "papa" / "sub" / "__init__.py").write_text("")
    (root / "papa" / "sub" / "e.py").write_text("def h():\n    return 1\n")
    script_e = root / "script_e.py"
    script_e.write_text("from papa.sub.e import h\nh()\n")
    before, before_e = code_fingerprint(script, root), code_fingerprint(script_e, root)
    (root / "papa" / "__init__.py").write_text("def unused():\n    return 2\n")
    assert (code_fingerprint(script, root), code_fingerprint(script_e, root)) == (before, before_e)
    (root / "papa" / "__init__.py").write_text("import os\n\nos.environ['X'] = '1'\n")
    assert code_fingerprint(script, root) != before and code_fingerprint(script_e, root) != before_e
    assert "papa:<body>" in reached(script_e, root)
    (root / "papa" / "__init__.py").write_text("")
    (root / "papa" / "sub" / "__init__.py").write_text("import torch\n\ntorch.set_default_dtype(torch.float64)\n")
    assert code_fingerprint(script, root) == before and code_fingerprint(script_e, root) != before_e


def test_workflow_scripts_reach_their_stage_code():
    from tests.test_workflow import ROOT

    probe = reached(ROOT / "workflow/scripts/probe.py")
    assert "papa.pipeline:probe_heads" in probe and "papa.probe:train_probes" in probe
    assert "papa.spec:n_dynamic" in probe and "papa.selection:select_static" in probe
    tokenize = reached(ROOT / "workflow/scripts/tokenize.py")
    assert "papa.encoding:encode" in tokenize
    assert not any(r.startswith("papa.probe:") for r in tokenize)  # probe code does not rerun tokenization


# each script's stage config and function; no script reaches another stage's (no dispatcher reaching them all)
STAGES = {
    "prepare_data": ("PrepareDataStage", "prepare_data"),
    "tokenize": ("TokenizeStage", "tokenize"),
    "average_attention": ("AverageStage", "average_constants"),
    "learn_lambda": ("LambdaStage", "learn_lambda"),
    "probe": ("ProbeStage", "probe_heads"),
    "mlm": ("MLMStage", "mlm_curves"),
    "build_data": ("BuildDataStage", "build_data"),
    "build_model": ("BuildModelStage", "build_model"),
    "patterns": ("PatternsStage", "pattern_stats"),
    "aggregate": ("AggregateStage", "aggregate"),
    "plot": ("PlotStage", "plot_figures"),
    "mlm_table": ("MLMTableStage", "tabulate_mlm"),
}


@pytest.mark.parametrize("script", sorted(STAGES))
def test_each_script_is_one_call_reaching_only_its_own_stage(script):
    from tests.test_workflow import ROOT

    path = ROOT / "workflow/scripts" / f"{script}.py"
    cls, fn = STAGES[script]
    assert path.read_text().rstrip().splitlines()[-1] == f"{fn}({cls}.from_snakemake(snakemake))  # noqa: F821"
    got = {r.split(":")[1] for r in reached(path) if r.startswith("papa.pipeline:")}
    assert {cls, fn, "Stage", "setup"} <= got
    others = {name for s, pair in STAGES.items() if s != script for name in pair} - {cls, fn}
    assert not got & others, got & others


def test_parsed_modules_are_cached_until_the_file_changes(pkg, monkeypatch):

    import papa.fingerprint as F

    root, script = pkg
    monkeypatch.setattr(F, "_disk_key", lambda *a: None)  # the process's parses, not the fingerprints kept on disk
    old = (1_000_000_000, 1_000_000_000)  # an old timestamp: outside the racy window
    for p in (root / "papa").glob("*.py"):
        os.utime(p, old)
    before = code_fingerprint(script, root)
    reads = []
    real = F.Path.read_text
    monkeypatch.setattr(F.Path, "read_text", lambda self, *a, **k: reads.append(self.name) or real(self, *a, **k))
    assert code_fingerprint(script, root) == before
    assert reads == ["script.py"]  # the modules came from the cache
    # the same size and an old timestamp again, but a new one: parsed again
    _edit(root, "a", "* 2", "* 3")
    os.utime(root / "papa" / "a.py", (old[0], old[1] + 1))
    assert code_fingerprint(script, root) != before


def test_a_datasets_preparation_reaches_its_own_source_alone():
    """Rule prepare_data's fingerprint leaves out the other data sources' loaders (papa.data.task.LOADERS): an
    edit to the local-file reader reruns no package or hub dataset. Each named loader is a definition the
    script reaches, and leaving it out drops what only it reaches."""
    from papa.data.task import LOADERS
    from tests.test_workflow import ROOT

    script = ROOT / "workflow/scripts/prepare_data.py"
    everything = set(reached(script))
    assert set(LOADERS.values()) <= everything
    package = set(reached(script, skip=[LOADERS["hub"], LOADERS["local"]]))
    assert LOADERS["package"] in package and not {LOADERS["hub"], LOADERS["local"]} & package
    assert "papa.data.local:_read_conll" in everything - package  # the local reader's own helpers go too
    assert "papa.data.task:load_task" in package
    fingerprints = {s: code_fingerprint(script, skip=[v for k, v in LOADERS.items() if k != s]) for s in LOADERS}
    assert len(set(fingerprints.values())) == 3 and code_fingerprint(script) not in fingerprints.values()


def test_a_package_corpus_preparation_reaches_its_own_parser_alone():
    """An edit to one package corpus's parser (Rotten Tomatoes') reran every package dataset's preparation and
    everything made from it; each now reaches its own parser (papa.data.task.unreached_code), and a hub or local
    dataset none."""
    from papa.data.task import unreached_code
    from tests.test_workflow import ROOT

    script = ROOT / "workflow/scripts/prepare_data.py"
    wsj = set(reached(script, skip=unreached_code({"source": "package", "name": "wsj_pos"})))
    rt = set(reached(script, skip=unreached_code({"source": "package", "name": "rt_sentiment"})))
    local = set(reached(script, skip=unreached_code({"source": "local", "name": "mine"})))
    assert "papa.data.packages:parse_wsj" in wsj and "papa.data.packages:parse_rt" not in wsj
    assert "papa.data.packages:parse_rt" in rt and "papa.data.packages:parse_wsj" not in rt
    assert not {p for p in local if p.startswith("papa.data.packages:parse_")}
    assert "papa.data.packages:load_package" in wsj and "papa.data.task:load_task" in wsj & local
    # each source reaches its own loader alone; a source papa does not know skips nothing (load_task refuses it)
    assert "papa.data.local:load_local" in local and "papa.data.packages:load_package" not in local
    assert not {"papa.data.hub:load_hub", "papa.data.local:load_local"} & wsj
    assert unreached_code({"source": "hub", "name": "sst2"})[:2] == ["papa.data.packages:load_package",
                                                                      "papa.data.local:load_local"]  # fmt: skip
    assert unreached_code({"source": "ftp", "name": "x"}) == []
    # a local dataset named as a package corpus reaches no package parser either (mutation testing)
    assert "papa.data.packages:parse_rt" in unreached_code({"source": "local", "name": "rt_sentiment"})


def test_the_two_constants_rules_count_their_own_branch():
    """Rules average_attention and data_free_constants share a script (papa.pipeline.average_constants); each
    one's code leaves out what only the other's branch runs (papa.spec.DATA_FREE_ONLY, AVERAGING_ONLY): an edit
    to the data-free builder reruns no averaging, an edit to the averaging no data-free matrix."""
    from papa import spec
    from tests.test_workflow import ROOT, parsed_workflow

    script = ROOT / "workflow/scripts/average_attention.py"
    everything = set(reached(script))
    assert set(spec.DATA_FREE_ONLY) | set(spec.AVERAGING_ONLY) <= everything  # names of reached definitions
    averaging, data_free = (
        set(reached(script, skip=spec.DATA_FREE_ONLY)),
        set(reached(script, skip=spec.AVERAGING_ONLY)),
    )
    assert "papa.constants:data_free" not in averaging and "papa.constants:data_free" in data_free
    assert "papa.constants:effective_attention" in averaging - data_free
    assert "papa.pipeline:average_constants" in averaging & data_free
    # each list names what only the other kind's blocks of average_constants call (a later call would go unhashed):
    # every block that runs for one kind of matrices alone, not only the first branch (the metadata's separator
    # positions come after it; mutation testing: AVERAGING_ONLY without them passed)
    import ast
    import inspect

    from papa import pipeline

    only = {True: set(), False: set()}  # the names each kind's own blocks use (data-free: True)
    for node in ast.walk(ast.parse(inspect.getsource(pipeline.average_constants))):
        if isinstance(node, ast.If) and "data_free" in ast.unparse(node.test):
            negated = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
            for free, body in ((not negated, node.body), (negated, node.orelse)):
                only[free] |= {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name)}
    assert not {k.split(":")[1] for k in spec.AVERAGING_ONLY} & only[True]  # the data-free blocks call none
    assert not {k.split(":")[1] for k in spec.DATA_FREE_ONLY} & only[False]  # the averaging blocks call none
    averaging_calls = {"average_attention", "load_encoder", "draw_rows", "stream_tokens", "separator_positions"}
    assert averaging_calls | {"real_tokens_only"} <= only[False]  # the blocks are the ones meant
    # nothing only the averaging calls is in the data-free rule's reach (real_tokens_only, added to the averaging after
    # AVERAGING_ONLY was written, was until stop 98: an edit of it or of the papa.unpad code it reaches reran every
    # data-free matrix's job)
    leaked = {d for d in data_free if d.rpartition(":")[2] in only[False]}
    assert not leaked, leaked
    assert not {d for d in data_free if d.startswith("papa.unpad:")}
    with parsed_workflow(ROOT / "config/config.yaml") as wf:
        codes = {r: wf.get_rule(r).params["code"] for r in ("average_attention", "data_free_constants")}
    assert codes == {
        "average_attention": code_fingerprint(script, skip=spec.DATA_FREE_ONLY),
        "data_free_constants": code_fingerprint(script, skip=spec.AVERAGING_ONLY),
    }


def test_changed_scripts_are_those_whose_reached_code_changed_since_recorded(pkg, tmp_path):
    """What a run says as it ends (common.smk's code_changed_under_run): the scripts whose fingerprint is no longer
    the recorded one, sorted; a script gone or a module that no longer parses counts as changed, without an error;
    an edit of code no script reaches changes none."""
    from papa.fingerprint import changed_notice, changed_scripts

    root, script = pkg
    (tmp_path / "other.py").write_text("from papa import b\nprint(b.other())\n")
    recorded = {(s, ()): code_fingerprint(tmp_path / s, root) for s in ("script.py", "other.py")}
    # a skip the script reaches: its fingerprint is another, compared with the skip it was recorded with
    recorded["script.py", ("papa.c:K",)] = code_fingerprint(script, root, skip=["papa.c:K"])
    assert recorded["script.py", ("papa.c:K",)] != recorded["script.py", ()]
    assert changed_scripts(recorded, tmp_path, root) == [] and changed_notice([]) is None
    _edit(root, "a", "return 0", "return 1")  # unreached by either script
    assert changed_scripts(recorded, tmp_path, root) == []
    _edit(root, "b", "return x + 1", "return x + 2")  # what script.py reaches (both skips), not other.py
    assert changed_scripts(recorded, tmp_path, root) == ["script.py"]
    recorded["renamed.py", ()] = "0123456789abcdef"  # a script a pull renamed
    assert changed_scripts(recorded, str(tmp_path), root) == ["renamed.py", "script.py"]
    (root / "papa" / "b.py").write_text("def broken(:\n")  # no longer parses: both scripts reach it
    assert changed_scripts(recorded, tmp_path, root) == ["other.py", "renamed.py", "script.py"]
    assert changed_notice(["probe.py", "renamed.py"]) == (
        "papa's code changed while this run ran (a git pull, checkout or edit in this checkout; the code probe.py, "
        "renamed.py reach): the jobs started since ran the new code, while their files record the old code's "
        "fingerprint. Run again: it reruns them. Keep a running run's checkout as it is (pull into another clone)"
    )


def test_fingerprints_kept_on_disk_are_read_and_follow_every_file_of_the_package(pkg, tmp_path, monkeypatch):
    """Each Snakemake start fingerprints every rule's script (about a second of CPU parsing the package): the
    fingerprints are kept under ``$PAPA_CACHE/fingerprints``, keyed by the contents of the package's files, the
    script and ``skip``. A kept one is read without parsing anything; a change to any of them is a new key,
    computed again, and equals what a fresh computation gives; an unreadable or unwritable cache changes nothing."""
    import papa.fingerprint as fp
    from papa.io import current_umask

    root, script = pkg
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "cache"))
    first = code_fingerprint(script, root)
    skipped = code_fingerprint(script, root, skip=["papa.b:helper"])
    assert skipped != first
    files = list((tmp_path / "cache" / "fingerprints").glob("*.json"))
    assert len(files) == 1 and len(json.loads(files[0].read_text())) == 2
    assert files[0].stat().st_mode & 0o777 == 0o666 & ~current_umask()  # a group's shared cache reads it

    def fresh(*args, **kwargs):  # the computation itself, cache left aside
        with monkeypatch.context() as m:
            m.setenv("PAPA_CACHE", str(tmp_path / f"fresh{len(list(tmp_path.iterdir()))}"))
            fp._CACHE.clear()
            return code_fingerprint(*args, **kwargs)

    def walked(*args, **kwargs):
        raise AssertionError("parsed the package: the kept fingerprint was not read")

    with monkeypatch.context() as m:
        m.setattr(fp, "_walk", walked)
        assert code_fingerprint(script, root) == first
        assert code_fingerprint(script, root, skip=("papa.b:helper",)) == skipped  # skip's type and order aside
        # another Python (ast.dump's output differs between minor versions) does not read this one's
        m.setattr(fp, "_PYTHON", "python3.99")
        with pytest.raises(AssertionError, match="parsed the package"):
            code_fingerprint(script, root)
    # a change the fingerprint ignores (a comment) is a new key, computed again to the same value
    _edit(root, "c", "K = 3", "K = 3  # three")
    assert code_fingerprint(script, root) == first == fresh(script, root)
    # code the script reaches, in another file than the script's
    _edit(root, "b", "return x + 1", "return x + 2")
    changed = code_fingerprint(script, root)
    assert changed != first and changed == fresh(script, root)
    # a new module file changes what `from . import d` names, kept or not
    (root / "papa" / "a.py").write_text((root / "papa" / "a.py").read_text() + "\nfrom . import d\n\n\ndef h():\n"
                                        "    return d.x\n")  # fmt: skip
    with_a = code_fingerprint(script, root)
    (root / "papa" / "d.py").write_text("x = 1\n")
    assert code_fingerprint(script, root) == fresh(script, root)
    # the script itself
    script.write_text(SCRIPT + "print(a.unrelated())\n")
    assert code_fingerprint(script, root) == fresh(script, root) != with_a
    # a cache that is a file, or holds something else than JSON: the fingerprint all the same, nothing raised
    for broken in ("{not json", "[1, 2]", '{"x": 1}'):
        for path in (tmp_path / "cache" / "fingerprints").glob("*.json"):
            path.write_text(broken)
        assert code_fingerprint(script, root) == fresh(script, root)
    monkeypatch.setenv("PAPA_CACHE", str(script))  # a file: no folder can be made under it
    assert code_fingerprint(script, root) == fresh(script, root)


def test_kept_fingerprints_of_other_package_versions_are_removed_after_a_month(pkg, tmp_path, monkeypatch):
    import time

    root, script = pkg
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "fingerprints"
    folder.mkdir(parents=True)
    old, recent = folder / "old.json", folder / "recent.json"
    for path in (old, recent):
        path.write_text("{}")
    month_ago = time.time() - 31 * 24 * 3600
    os.utime(old, (month_ago, month_ago))
    code_fingerprint(script, root)
    assert not old.exists() and recent.exists() and len(list(folder.glob("*.json"))) == 2


def test_code_changed_while_fingerprinting_is_not_kept_under_the_old_codes_key(pkg, tmp_path, monkeypatch):
    """A git pull or checkout while a Snakemake start fingerprints (a second of parsing; a Slurm run starts one per
    job) made the fingerprint of the new code: kept under the key of the contents read before, a checkout of the
    old code sharing the cache (or this one, checked out back) read the new code's fingerprint as its own, and its
    stages neither reran nor recorded the code they ran."""
    import papa.fingerprint as fp

    root, script = pkg
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "cache"))
    walk = fp._walk

    def pulled_meanwhile(*args, **kwargs):
        _edit(root, "b", "return x + 1", "return x + 2")
        return walk(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(fp, "_walk", pulled_meanwhile)
        code_fingerprint(script, root)
    _edit(root, "b", "return x + 2", "return x + 1")  # back to the code whose contents were read first
    fp._CACHE.clear()
    kept = code_fingerprint(script, root)
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "fresh"))
    fp._CACHE.clear()
    assert kept == code_fingerprint(script, root)


def test_a_cache_write_that_fails_closes_its_file_and_leaves_no_temporary_file(pkg, tmp_path, monkeypatch):
    """A write of the fingerprint cache failing after its temporary file was opened (chmod refused: a file system
    without modes) left the descriptor open (one more at each of a Snakemake start's fingerprints) though the
    fingerprint itself came back and the temporary file was removed."""
    import papa.fingerprint as fp

    root, script = pkg
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "cache"))
    expected = code_fingerprint(script, root)
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "other"))
    fp._CACHE.clear()

    def refused(*args, **kwargs):
        raise PermissionError("chmod refused")

    monkeypatch.setattr(os, "chmod", refused)
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    for _ in range(3):
        assert code_fingerprint(script, root) == expected
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before
    assert not [p for p in (tmp_path / "other").rglob("*") if p.is_file()]


def _runs_e(root, module: str):
    """Writes ``papa/e.py`` (``module``, which defines ``run``) and a script calling its ``run``: the script the tests
    below fingerprint."""
    (root / "papa" / "e.py").write_text(module)
    script = root / "script_e.py"
    script.write_text("from papa.e import run\nrun()\n")
    return script


def test_class_docstrings_and_docstring_only_bodies_keep_the_fingerprint(pkg):
    """Docstrings are left out of every definition reached: a class's as a function's, and a function or class whose
    body is its docstring alone (a protocol method, an exception class) hashes the same whatever the docstring says
    (review DM: mutation testing)."""
    root, _ = pkg
    script = _runs_e(
        root,
        'class Kind:\n    """Kind."""\n\n    size = 1\n\n\nclass Failed(Exception):\n    """Failed."""\n\n\n'
        'def stub():\n    """Stub."""\n\n\ndef run():\n    return Kind.size, Failed, stub()\n',
    )
    before = code_fingerprint(script, root)
    assert reached(script, root) == ["papa.e:Failed", "papa.e:Kind", "papa.e:run", "papa.e:stub"]
    for old in ('"""Kind."""', '"""Failed."""', '"""Stub."""'):
        _edit(root, "e", old, old.replace('."""', ', said otherwise."""'))
        assert code_fingerprint(script, root) == before, old
    _edit(root, "e", '"""Failed, said otherwise."""\n', '"""Failed, said otherwise."""\n\n    pass\n')
    assert code_fingerprint(script, root) == before  # a pass after the docstring alone: the same empty body
    _edit(root, "e", "size = 1", "size = 2")
    assert code_fingerprint(script, root) != before


def test_a_statement_using_a_reached_constant_is_not_part_of_it(pkg):
    """A top-level assignment counts for the names it binds, not for those it reads: ``L = K + 1`` is ``L``'s
    definition, and an edit to it reruns nothing that reaches ``K`` alone (review DM: mutation testing)."""
    root, script = pkg
    _edit(root, "c", "K = 3\n", "K = 3\nL = K + 1\n")
    before = code_fingerprint(script, root)
    assert "papa.c:L" not in reached(script, root)
    _edit(root, "c", "L = K + 1", "L = K + 2")
    assert code_fingerprint(script, root) == before
    _edit(root, "c", "K = 3", "K = 4")
    assert code_fingerprint(script, root) != before


def test_only_a_main_guard_is_left_out(pkg):
    """``if __name__ == "__main__":`` runs only as a command and is left out; a block testing ``__name__`` against
    another name runs where the module is imported as that name, and counts (review DM: mutation testing)."""
    root, _ = pkg
    script = _runs_e(
        root,
        'SIZE = 1\nif __name__ == "papa.e":\n    SIZE = 2\nif __name__ == "__main__":\n    print(SIZE)\n\n\n'
        "def run():\n    return SIZE\n",
    )
    before = code_fingerprint(script, root)
    _edit(root, "e", "print(SIZE)", "print(SIZE + 1)")
    assert code_fingerprint(script, root) == before
    _edit(root, "e", "SIZE = 2", "SIZE = 3")
    assert code_fingerprint(script, root) != before


def test_a_parsed_module_is_read_again_when_its_size_changed_or_it_is_recent(pkg, monkeypatch):
    """The process's parse cache trusts a file's (modification time, size) only for a file older than the file
    system's timestamp granularity: an edit that keeps the timestamp (a write within the same tick, a checkout
    restoring it) is seen by a new size, and for a recent file by its contents even at the same size and length
    (review DM: mutation testing)."""
    import time

    import papa.fingerprint as F

    root, script = pkg
    monkeypatch.setattr(F, "_disk_key", lambda *a: None)  # the process's parses, not the fingerprints kept on disk
    a = root / "papa" / "a.py"
    old = 1_000_000_000_000_000_000
    os.utime(a, ns=(old, old))
    before = code_fingerprint(script, root)
    _edit(root, "a", "* 2", "* 22")  # another size, the same old timestamp
    os.utime(a, ns=(old, old))
    bigger = code_fingerprint(script, root)
    assert bigger != before
    recent = time.time_ns()  # within the racy window: its contents are compared
    os.utime(a, ns=(recent, recent))
    assert code_fingerprint(script, root) == bigger
    _edit(root, "a", "* 22", "* 33")  # the same size and the same timestamp
    os.utime(a, ns=(recent, recent))
    assert code_fingerprint(script, root) not in (before, bigger)


def test_an_attribute_of_an_imported_definition_is_not_a_module_level_name(pkg):
    """``Kind.size()`` after ``from papa.e import Kind`` uses the class (hashed whole), not a module-level ``size``
    of papa.e that happens to share the attribute's name: an edit to that one reruns nothing (review DM: mutation
    testing)."""
    root, _ = pkg
    (root / "papa" / "e.py").write_text(
        "class Kind:\n    @staticmethod\n    def size():\n        return 1\n\n\ndef size():\n    return 2\n"
    )
    script = root / "script_e.py"
    script.write_text("from papa.e import Kind\nKind.size()\n")
    assert reached(script, root) == ["papa.e:Kind"]


def test_a_subpackage_that_re_exports_another_modules_code_counts_its_own_init(pkg):
    """``from papa.sub import helper`` where papa/sub/__init__.py re-exports papa.b's ``helper`` runs that
    ``__init__`` first: its statements other than definitions count, though the code reached lies outside the
    subpackage (review DM: mutation testing)."""
    root, _ = pkg
    (root / "papa" / "sub").mkdir()
    init = root / "papa" / "sub" / "__init__.py"
    init.write_text("import os\n\nfrom ..b import helper\n\nos.environ['X'] = '1'\n")
    script = root / "script_sub.py"
    script.write_text("from papa.sub import helper\nhelper(1)\n")
    assert reached(script, root) == ["papa.b:helper", "papa.sub:<body>"]
    before = code_fingerprint(script, root)
    init.write_text(init.read_text().replace("'1'", "'2'"))
    assert code_fingerprint(script, root) != before


def test_a_renamed_module_is_a_new_key_of_the_kept_fingerprints(pkg, tmp_path):
    """The fingerprints kept on disk are keyed by every file's path as well as its contents: a module renamed (its
    contents the same, a ``git mv``) changes what the imports name, and its kept fingerprint is not read back
    (review DM: mutation testing)."""
    import papa.fingerprint as fp

    root, script = pkg
    first = code_fingerprint(script, root)
    (root / "papa" / "c.py").rename(root / "papa" / "c2.py")  # `from .c import K` names nothing now
    fp._CACHE.clear()
    assert code_fingerprint(script, root) == code_fingerprint(script, root, skip=["papa.c:K"]) != first


def test_a_kept_fingerprint_of_another_width_is_not_read(pkg, tmp_path):
    """A kept entry that is no fingerprint of this papa's width (`papa.fingerprint.DIGITS`: one kept by a papa that
    made them wider or narrower, a hand edit) is computed again, not returned (review DM: mutation testing)."""
    import papa.fingerprint as fp

    root, script = pkg
    first = code_fingerprint(script, root)
    package, entry = fp._disk_key(script, root, ())
    (path,) = (tmp_path / "own-cache" / "fingerprints").glob("*.json")
    assert path.stem == package
    for odd in (first[:-1], first + "0", 12345):
        path.write_text(json.dumps({entry: odd}))
        assert code_fingerprint(script, root) == first


def test_a_kept_file_that_holds_no_mapping_is_written_anew(pkg, tmp_path):
    """A fingerprints file holding JSON other than a mapping (a list: a hand edit, another tool) is replaced by one
    that keeps the new fingerprint: otherwise every later start computed it again (review DM: mutation testing)."""
    import papa.fingerprint as fp

    root, script = pkg
    package, entry = fp._disk_key(script, root, ())
    folder = tmp_path / "own-cache" / "fingerprints"
    folder.mkdir(parents=True)
    for other in ("[1, 2]", "{not json", "\x00\xff"):  # nor one that is no JSON at all (cut short, overwritten)
        (folder / f"{package}.json").write_text(other)
        first = code_fingerprint(script, root)
        assert json.loads((folder / f"{package}.json").read_text()) == {entry: first}


def test_a_module_named_through_its_package_is_followed(pkg):
    """``import papa.b`` then ``papa.b.helper(1)`` (or ``import papa`` and the lazy ``papa.b``, as the README writes
    it), or ``from papa import sub`` then ``sub.e.h()``: the call names its module through a chain of attributes,
    of which only the first was followed (``papa.b``, no definition), so such a script reached nothing of it and an
    edit to ``helper`` reran nothing (review DM: mutation testing)."""
    root, _ = pkg
    (root / "papa" / "sub").mkdir()
    (root / "papa" / "sub" / "__init__.py").write_text("")
    (root / "papa" / "sub" / "e.py").write_text("def h():\n    return 1\n")
    for text in ("import papa.b\nprint(papa.b.helper(1))\n", "import papa\nprint(papa.b.helper(1))\n"):
        script = root / "script_b.py"
        script.write_text(text)
        assert reached(script, root) == ["papa.b:helper"], text
    script = root / "script_e.py"
    script.write_text("from papa import sub\nimport papa.sub.e\nsub.e.h()\npapa.sub.e.h()\n")
    assert reached(script, root) == ["papa.sub.e:h"]
    before = code_fingerprint(script, root)
    (root / "papa" / "sub" / "e.py").write_text("def h():\n    return 2\n")
    assert code_fingerprint(script, root) != before


def test_a_block_that_runs_unless_the_module_is_a_command_counts(pkg):
    """``if __name__ != "__main__":`` runs whenever the module is imported; it was left out as if it were a main
    guard (the operator was not looked at), so an edit to it reran nothing (review DM: mutation testing)."""
    root, _ = pkg
    script = _runs_e(
        root,
        'SIZE = 1\nif __name__ != "__main__":\n    SIZE = 2\n\n\ndef run():\n    return SIZE\n',
    )
    before = code_fingerprint(script, root)
    _edit(root, "e", "SIZE = 2", "SIZE = 3")
    assert code_fingerprint(script, root) != before


def test_a_module_re_exported_under_another_name_counts_whole(pkg):
    """``from . import b as bee`` in the package's ``__init__``, then ``from papa import bee; bee.helper()``: the
    name led to no definition (it was looked up as ``papa.b:bee``), so an edit to ``helper`` reran nothing (left by
    review DM). Which of the module's definitions such a script uses is not followed: all of them count."""
    root, _ = pkg
    (root / "papa" / "__init__.py").write_text("from . import b as bee\n")
    script = root / "script_bee.py"
    for text in ("from papa import bee\nprint(bee.helper(1))\n", "import papa\nprint(papa.bee.helper(1))\n"):
        script.write_text(text)
        assert reached(script, root) == ["papa.b:helper", "papa.b:other"], text
    before = code_fingerprint(script, root)
    _edit(root, "b", "return x + 1", "return x + 2")
    assert code_fingerprint(script, root) != before


def test_a_module_beside_the_package_whose_name_begins_like_it_is_not_followed(pkg):
    """Only ``papa`` and its modules are followed (mutation review of papa/fingerprint.py): a module beside the package
    whose name begins with "papa" (``papaya.py`` in the checkout) is another package's code, as numpy's is."""
    root, script = pkg
    (root / "papaya.py").write_text("def k():\n    return 1\n")
    script.write_text("import papaya as pp\nfrom papaya import k\nfrom papa import a\nprint(a.f(1), k(), pp.k())\n")
    before = code_fingerprint(script, root)
    assert not [r for r in reached(script, root) if not r.startswith("papa.")]
    (root / "papaya.py").write_text("def k():\n    return 2\n")
    assert code_fingerprint(script, root) == before


def test_a_name_imported_and_bound_again_counts_both(pkg):
    """A module that imports a name and binds it again (``K = K + 1`` after ``from .c import K``) runs its own
    binding: an edit of either changes the fingerprint (mutation review of papa/fingerprint.py: a name among the
    imports was followed to its import alone)."""
    root, _ = pkg
    script = _runs_e(root, "from .c import K\n\nK = K + 1\n\n\ndef run():\n    return K\n")
    before = code_fingerprint(script, root)
    assert {"papa.c:K", "papa.e:K"} <= set(reached(script, root))
    _edit(root, "e", "K = K + 1", "K = K + 2")
    assert code_fingerprint(script, root) != before
    edited = code_fingerprint(script, root)
    _edit(root, "c", "K = 3", "K = 4")
    assert code_fingerprint(script, root) != edited
