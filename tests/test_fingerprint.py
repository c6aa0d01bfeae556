"""papa.fingerprint: a stage reruns when the library code it reaches changes, not for comments or other code."""

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
B = '''
def helper(x):
    return x + 1


def other():
    return 1
'''
C = "K = 3\n"
SCRIPT = "from papa import a\nprint(a.f(1))\n"


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


@pytest.mark.parametrize("edit", [
    ("a", '"""Docstring of f."""', '"""Another docstring."""'),
    ("a", "# a comment", "# another comment"),
    ("a", "return g(x) + K", "return (g(x)\n            + K)"),
    ("a", "return 0", "return 1"),  # unrelated() is not reached
    ("b", "return 1", "return 2"),  # nor is other()
])
def test_comments_formatting_and_unreached_code_keep_the_fingerprint(pkg, edit):
    root, script = pkg
    before = code_fingerprint(script, root)
    _edit(root, *edit)
    assert code_fingerprint(script, root) == before


@pytest.mark.parametrize("edit", [
    ("a", "* 2", "* 3"),  # g, called by f
    ("b", "x + 1", "x + 2"),  # helper, imported inside g
    ("c", "K = 3", "K = 4"),  # a module constant f uses
])
def test_reached_code_changes_the_fingerprint(pkg, edit):
    root, script = pkg
    before = code_fingerprint(script, root)
    _edit(root, *edit)
    assert code_fingerprint(script, root) != before


def test_workflow_scripts_reach_their_stage_code():
    from tests.test_workflow import ROOT

    probe = reached(ROOT / "workflow/scripts/probe.py")
    assert "papa.pipeline:run_probes" in probe and "papa.probe:train_probes" in probe
    tokenize = reached(ROOT / "workflow/scripts/tokenize.py")
    assert "papa.encoding:encode" in tokenize
    assert not any(r.startswith("papa.probe:") for r in tokenize)  # probe code does not rerun tokenization
