"""Fingerprints of the library code a workflow stage runs.

Snakemake reruns a job when its script changes, but not when the ``papa`` code the script
calls changes. `code_fingerprint` closes that gap: starting from a workflow script, it
follows every name the script uses into ``papa`` (functions, classes, module-level
constants; through imports, module aliases such as ``pipeline.run_probes`` or
``papa.data.hub.load_hub`` and imports inside functions; a module a package re-exports under
another name, ``from . import b as bee``, counts whole) and hashes the abstract syntax
tree of each definition reached, with docstrings removed. The rules pass the hash as a param, so

* a change to code a stage runs reruns that stage (and what depends on it);
* a change to comments, docstrings or formatting, or to code the stage never reaches,
  reruns nothing.

Every binding of a name counts (a constant assigned twice, a function defined inside a
top-level ``if``/``try`` block: the whole block), and so does every other top-level statement
of a module (``TABLE.update(...)``, a registration call): such statements are the module's
``<body>``, hashed with any definition of the module that is reached (a package's ``__init__``
with any module of the package: it runs first); so are assignments to an
item or attribute (``TABLE[k] = v``, ``obj.attr = v``). ``if __name__ == "__main__":`` blocks
(they run only as a command) and the body of ``if TYPE_CHECKING:`` (never runs) are left out;
its ``else`` branch counts as top-level code.

Code reached only dynamically (``getattr`` by string, a method called on an object the
stage's own code never names) is not followed; the definitions that construct such objects
are, which covers the library's classes.

Parsed modules are cached by file (modification time and size, the contents compared again
while a file is younger than the file system's timestamp granularity), so the many lookups of
one Snakemake start read and parse each module once. Fingerprints are also kept on disk
(``<cache>/fingerprints``, `papa.data.default_cache_dir`), keyed by the contents of every ``.py``
file of the package, the script, ``skip`` and Python's minor version: a Snakemake start whose ``papa`` code was already
fingerprinted on this machine reads them (1-2 ms) instead of parsing the package (about a second of
CPU, every ``snakemake`` command, dry runs too); one computed while a file changed (a git pull meanwhile) is not
kept. A cache that cannot be read or written is ignored.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "papa"
#: A fingerprint's length in hex digits (`code_fingerprint`; `papa.records` finds them in Snakemake's records by it).
DIGITS = 16
#: The name under which a module's top-level statements other than definitions are hashed.
BODY = "<body>"
#: A file modified less than this long ago (ns) may change again within the same timestamp:
#: its cached parse is reused only if its contents are unchanged.
_RACY_NS = 2_000_000_000


@dataclass
class _Module:
    name: str
    is_package: bool
    defs: dict[str, list[ast.AST]] = field(default_factory=dict)  # name -> the top-level statements binding it
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # alias -> (module, attr|None)
    dumps: dict[str, str] = field(default_factory=dict)
    refs: dict[str, list] = field(default_factory=dict)  # definition -> (module, name) it uses

    def dump(self, name: str) -> str:
        """The definition's AST (every statement binding it) without docstrings, positions or comments
        (cached)."""
        if name not in self.dumps:
            self.dumps[name] = "\n".join(ast.dump(n, include_attributes=False) for n in self.defs[name])
        return self.dumps[name]


def _strip_docstrings(node: ast.AST) -> ast.AST:
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                n.body = body[1:] or [ast.Pass()]
    return node


def _resolve(module: str, level: int, target: str | None, is_package: bool) -> str | None:
    """Absolute module name of ``from <level dots><target> import ...`` inside ``module``."""
    if level == 0:
        return target if target and (target == PACKAGE or target.startswith(PACKAGE + ".")) else None
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imports_of(nodes, module: str, is_package: bool, root: Path) -> dict[str, tuple[str, str | None]]:
    out: dict[str, tuple[str, str | None]] = {}
    for n in nodes:
        if isinstance(n, ast.ImportFrom):
            mod = _resolve(module, n.level, n.module, is_package)
            if mod is None:
                continue
            for a in n.names:
                # "from . import io" names a module; "from .io import atomic_path" a definition
                sub = f"{mod}.{a.name}"
                out[a.asname or a.name] = (sub, None) if _module_file(sub, root) else (mod, a.name)
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name == PACKAGE or a.name.startswith(PACKAGE + "."):
                    out[a.asname or a.name.split(".")[0]] = (a.name if a.asname else PACKAGE, None)
    return out


def _module_file(name: str, root: Path) -> Path | None:
    rel = Path(*name.split("."))
    for p in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
        if p.is_file():
            return p
    return None


@dataclass
class _Cached:
    name: str
    mtime_ns: int
    size: int
    text: str
    module: _Module


_CACHE: dict[Path, _Cached] = {}  # module file -> its parse


def _bound(node: ast.AST) -> list[str]:
    """The module-level names a top-level statement binds (inside ``if``/``try``/``for``/``with`` blocks
    too), imports aside: not the locals of a function, class, lambda or comprehension inside it."""
    names = []

    def visit(n):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(n.name)
            return
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.append(n.id)
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return list(dict.fromkeys(names))


def _names_only(node: ast.AST) -> bool:
    """True for a plain definition: a function, a class, or an assignment to names alone (not
    ``TABLE["k"] = v`` or ``obj.attr = v``, which change another definition, nor a block or a call:
    the module's body)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return False
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return all(
        isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Starred, ast.Load, ast.Store))
        for t in targets
        for n in ast.walk(t)
    )


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (its body never runs; an ``else`` does)."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _never_imported(node: ast.AST) -> bool:
    """``if __name__ == "__main__":`` (runs only as a command)."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)  # `!=` runs on import
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _load(name: str, root: Path, path: Path, text: str) -> _Module:
    tree = _strip_docstrings(ast.parse(text, filename=str(path)))
    mod = _Module(name, path.name == "__init__.py")
    mod.imports = _imports_of(tree.body, name, mod.is_package, root)
    statements = list(tree.body)
    while statements:
        n = statements.pop(0)
        if _type_checking(n):
            statements[:0] = n.orelse  # the else branch runs: its statements (imports too) are the module's
            mod.imports.update(_imports_of(n.orelse, name, mod.is_package, root))
            continue
        if isinstance(n, (ast.Import, ast.ImportFrom)) or _never_imported(n):
            continue
        for nm in _bound(n):
            mod.defs.setdefault(nm, []).append(n)
        if not _names_only(n):  # a block, a call, TABLE[k] = v: the module's body
            mod.defs.setdefault(BODY, []).append(n)
    return mod


def _module(name: str, root: Path) -> _Module | None:
    """The parsed module ``name`` under ``root`` (None if it has no file), from the cache while
    its file is unchanged."""
    path = _module_file(name, root)
    if path is None:
        return None
    st = path.stat()
    hit = _CACHE.get(path)
    if hit is not None and (hit.name, hit.mtime_ns, hit.size) == (name, st.st_mtime_ns, st.st_size):
        if time.time_ns() - st.st_mtime_ns > _RACY_NS:
            return hit.module
        text = path.read_text(encoding="utf-8")  # recently modified: trust the contents, not the timestamp
        if text == hit.text:
            return hit.module
    else:
        text = path.read_text(encoding="utf-8")
    mod = _load(name, root, path, text)
    _CACHE[path] = _Cached(name, st.st_mtime_ns, st.st_size, text, mod)
    return mod


def _references(node: ast.AST, mod: _Module, root: Path):
    """(module, name) pairs that ``node`` uses: its module's definitions and papa imports."""
    nodes = list(ast.walk(node))
    local = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
    imports = {**mod.imports, **_imports_of(local, mod.name, mod.is_package, root)}
    for n in nodes:
        if isinstance(n, ast.Attribute):
            inner, v = [], n.value
            while isinstance(v, ast.Attribute):  # papa.data.hub.f after `import papa.data.hub`, or data.hub.f
                inner.insert(0, v.attr)
                v = v.value
            target = imports.get(v.id) if isinstance(v, ast.Name) else None
            if target is not None and target[1] is None:  # module alias: pipeline.run_probes
                module = ".".join([target[0], *inner])
                if not inner or _module_file(module, root):  # not a class's attribute: spec.ConstantsSpec.parse
                    yield module, n.attr
        elif isinstance(n, ast.Name):
            # a name both imported and bound at the top of the module (``K = K + 1`` after ``from .c import K``):
            # both count, whichever the code sees where it runs
            if n.id in imports and imports[n.id][1] is not None:
                yield imports[n.id]
            if n.id in mod.defs:
                yield mod.name, n.id


def _walk(script: str | Path, root: Path, skip=()) -> dict[tuple[str, str], str]:
    """Every (module, name) definition ``script`` reaches -> its normalised AST dump; the ``module:name``
    definitions in ``skip`` are neither hashed nor followed."""
    skip = {tuple(s.split(":", 1)) for s in skip}
    if isinstance(script, str) and ":" in script and not Path(script).exists():
        todo = [tuple(script.split(":", 1))]
    else:
        tree = ast.parse(Path(script).read_text(encoding="utf-8"))
        entry = _Module("__script__", False, imports=_imports_of(tree.body, "__script__", False, root))
        todo = list(_references(tree, entry, root))
    seen: dict[tuple[str, str], str] = {}
    while todo:
        key = todo.pop()
        if key in seen or key in skip:
            continue
        seen[key] = ""
        mod = _module(key[0], root)
        if mod is None:
            continue
        # the packages above it (and a package itself) run their __init__ before any of their code: its statements
        # other than definitions count as a reached module's own do
        parts = key[0].split(".")
        for package in (".".join(parts[:i]) for i in range(1, len(parts) + (1 if mod.is_package else 0))):
            if (package, BODY) not in seen and BODY in getattr(_module(package, root), "defs", {}):
                todo.append((package, BODY))
        if key[1] in mod.imports and key[1] not in mod.defs:  # a re-export (papa/__init__.py): follow it
            target = mod.imports[key[1]]
            if target[1] is not None:
                todo.append(target)
            else:  # a module under another name (`from . import b as bee`): which of it is used is not followed: all
                todo.extend((target[0], name) for name in getattr(_module(target[0], root), "defs", {}))
            continue
        nodes = mod.defs.get(key[1])
        if nodes is None:
            continue
        seen[key] = mod.dump(key[1])
        if key[1] not in mod.refs:
            mod.refs[key[1]] = list(dict.fromkeys(r for n in nodes for r in _references(n, mod, root)))
        todo.extend(r for r in mod.refs[key[1]] if r not in seen)
        if BODY in mod.defs and (key[0], BODY) not in seen:  # the module's other statements come with it
            todo.append((key[0], BODY))
    return {k: v for k, v in seen.items() if v}


def code_fingerprint(script: str | Path, root: str | Path | None = None, skip=()) -> str:
    """A `DIGITS`-hex-digit hash of the ``papa`` code that ``script`` reaches (see the module docs).

    Args:
        script: a Python file (a workflow script) or a ``"papa.module:function"`` name.
        root: the folder holding the ``papa`` package (default: the one this module is in).
        skip: ``"module:name"`` definitions the job cannot run, left out with what only they reach
            (rule prepare_data: the loaders of the other data sources, `papa.data.task.LOADERS`).
    """
    root = _root(root)
    key = _disk_key(script, root, skip)
    if key is not None and (known := _disk_read(key)) is not None:
        return known
    h = hashlib.sha256()
    for (m, n), dump in sorted(_walk(script, root, skip).items()):
        h.update(f"{m}:{n}\n{dump}\n".encode())
    fingerprint = h.hexdigest()[:DIGITS]
    # kept only if no file changed while it was computed (a git pull or checkout meanwhile: the key is the old
    # code's, the fingerprint the new one's, which another checkout of the old code sharing the cache would read)
    if key is not None and _disk_key(script, root, skip) == key:
        _disk_write(key, fingerprint)
    return fingerprint


#: The Python the fingerprints on disk were computed under (``ast.dump``'s output changes between minor versions):
#: part of their key, so a cache one machine or venv shares with another never gives what this Python would not.
_PYTHON = f"python{sys.version_info[0]}.{sys.version_info[1]}"
#: Errors that leave the on-disk cache unused (a read-only home, no home, a file another process is replacing).
_DISK_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError)


def _disk_key(script, root: Path, skip) -> tuple[str, str] | None:
    """``(package digest, entry)``: the digest of `_PYTHON` and every ``.py`` file under ``root/papa`` (its path and
    contents: everything `_walk` can read or find), and of the script's contents (or its ``module:name``) with ``skip``;
    None where the script cannot be read (`_walk` raises what it raises)."""
    try:
        if isinstance(script, str) and ":" in script and not Path(script).exists():
            entry = f"name\0{script}".encode()
        else:
            entry = b"file\0" + Path(script).read_bytes()
        tree = hashlib.sha256(f"{_PYTHON}\0".encode())
        base = root / PACKAGE
        for path in sorted(base.rglob("*.py")):
            tree.update(f"{path.relative_to(base).as_posix()}\0".encode())
            tree.update(path.read_bytes())
            tree.update(b"\0")
    except OSError:
        return None
    entry += "".join(f"\0{s}" for s in sorted(skip)).encode()
    return tree.hexdigest()[:32], hashlib.sha256(entry).hexdigest()[:32]


def _disk_file(package_digest: str) -> Path:
    from .data.downloads import default_cache_dir

    return default_cache_dir() / "fingerprints" / f"{package_digest}.json"


def _disk_read(key: tuple[str, str]) -> str | None:
    try:
        known = json.loads(_disk_file(key[0]).read_text(encoding="utf-8"))
    except _DISK_ERRORS:
        return None
    known = known.get(key[1]) if isinstance(known, dict) else None
    return known if isinstance(known, str) and len(known) == DIGITS else None


def _disk_write(key: tuple[str, str], fingerprint: str) -> None:
    """Add one fingerprint to its package's file (written whole through `papa.io.write_text`: a reader never sees
    half a file; two writers at once may lose one's entry, computed again later); remove the files of other
    package versions not written for a month (`papa.data.downloads.prune_cache_entries`: one still in use is
    written again when next needed)."""
    from .data.downloads import prune_cache_entries
    from .io import write_text

    try:
        path = _disk_file(key[0])
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            known = json.loads(path.read_text(encoding="utf-8"))
            known = known if isinstance(known, dict) else {}
        except (OSError, ValueError):
            known = {}
        known[key[1]] = fingerprint
        write_text(path, json.dumps(known, sort_keys=True))  # mode as a plain write's: a group's shared cache
        prune_cache_entries(path.parent, path)
    except _DISK_ERRORS:
        pass


def reached(script: str | Path, root: str | Path | None = None, skip=()) -> list[str]:
    """The ``module:name`` definitions `code_fingerprint` hashes for ``script`` (what it covers)."""
    return sorted(f"{m}:{n}" for m, n in _walk(script, _root(root), skip))


def changed_scripts(recorded, scripts: str | Path, root: str | Path | None = None) -> list[str]:
    """The scripts whose `code_fingerprint` is no longer the one recorded, sorted (a git pull, checkout or edit
    while a run ran: the jobs started since imported the new code, while their params record the old code's).

    Args:
        recorded: ``{(script, skip): fingerprint}``, script names relative to ``scripts`` (the workflow's ``code``
            params as the Snakefile was read).
        scripts: the folder of the workflow scripts.
        root: as for `code_fingerprint`.

    A script that cannot be fingerprinted now (renamed, or a module that no longer parses) counts as changed.
    """

    def now(script, skip):
        try:
            return code_fingerprint(f"{scripts}/{script}", root, skip=skip)
        except Exception:  # noqa: BLE001 - a script renamed, a module that no longer parses: changed, for this run
            return None

    return sorted({script for (script, skip), fingerprint in recorded.items() if now(script, skip) != fingerprint})


def changed_notice(changed) -> str | None:
    """What a run says as it ends of the scripts whose papa code changed while it ran (`changed_scripts`)."""
    if not changed:
        return None
    return (f"papa's code changed while this run ran (a git pull, checkout or edit in this checkout; the "
            f"code {', '.join(changed)} reach): the jobs started since ran the new code, while their files "
            f"record the old code's fingerprint. Run again: it reruns them. Keep a running run's checkout "
            f"as it is (pull into another clone)")  # fmt: skip


def _root(root) -> Path:
    return Path(root).resolve() if root is not None else Path(__file__).resolve().parent.parent
