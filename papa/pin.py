"""Pin a config's hub models and hub datasets to the commits they resolve to now.

A paper-scale run takes days; a hub repository updated in between would feed the later jobs
other weights or other data than the earlier ones. `hub_pins` asks the hub once for the commit
each model id (``bert-base-uncased``) and each hub dataset (its ``revision``, by default the
registry's) resolves to, and returns the config entries that pin them: models as
``<id>@<commit>``, datasets as ``revision: <commit>``. Written to a file of their own, they
override the config key by key (Snakemake merges its config files in order)::

    python -m papa.pin config/paper.yaml -o config/paper-pins.yaml
    snakemake --profile slurm --configfile config/paper.yaml config/paper-pins.yaml

Aliases, local folders, built models and entries already pinned to a commit are left as they
are. The model string and a dataset's ``revision`` are params of the jobs that read them, so
pinning a finished run reruns it once: pin before starting. Give the pins file with ``-o``, not ``>``: ``-o``
writes it only when every entry resolved (a shell's ``>`` empties the file first, and a failed pin would leave it
empty), and refuses to overwrite the config or any file that is not an earlier pins file.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import yaml

from .checks import ConfigError, load_config
from .data.hub import HUB_TIMEOUT, hub_revision, resolve_revision
from .io import expand_home
from .models import is_alias, looks_like_path, split_revision

#: A full commit sha: an entry already pinned.
COMMIT = re.compile(r"[0-9a-f]{40}")

#: How every pins file `main` writes begins: an existing ``-o`` file that does not is someone else's, not replaced.
HEADER = "# Hub commits of "


def _hub_model_commit(hub_id: str, revision: str | None) -> str:
    from huggingface_hub import HfApi

    return HfApi().model_info(hub_id, revision=revision, timeout=HUB_TIMEOUT).sha  # no answer: fails, not hangs


def _hub_dataset_commit(hub_id: str, revision: str | None) -> str:
    return resolve_revision(hub_id, hub_id, revision, timeout=HUB_TIMEOUT)  # what prepare_data resolves, as it does


def hub_pins(
    config: dict,
    model_commit: Callable[[str, str | None], str] | None = None,
    dataset_commit: Callable[[str, str | None], str] | None = None,
) -> dict:
    """The config entries that pin ``config``'s hub models and hub datasets to their commits.

    Args:
        config: a workflow config (validated: the schema's defaults, `papa.checks.load_config`).
        model_commit, dataset_commit: ``(hub id, revision or None) -> commit sha``; by default the
            hub's answer (``huggingface_hub.HfApi().model_info``; `papa.data.hub.resolve_revision`).
    Returns:
        ``{"models": {name: "<id>@<commit>"}, "datasets": {name: {"revision": "<commit>"}}}``, each
        part only where something was pinned.
    """
    model_commit, dataset_commit = model_commit or _hub_model_commit, dataset_commit or _hub_dataset_commit
    models = {}
    for name, entry in config.get("models", {}).items():
        if not isinstance(entry, str) or is_alias(entry) or looks_like_path(entry):
            continue  # built, an offline alias or a local folder: nothing on the hub to pin
        if expand_home(entry).is_dir():
            continue
        hub_id, revision = split_revision(entry)
        if revision is not None and COMMIT.fullmatch(revision):
            continue
        models[name] = f"{hub_id}@{_commit(model_commit, hub_id, revision, f'models.{name}')}"
    datasets = {}
    for name, spec in config.get("datasets", {}).items():
        if not isinstance(spec, dict) or spec.get("source") != "hub":
            continue
        hub_id, revision = hub_revision(name, spec)
        if hub_id is None:
            continue  # the config check names a hub dataset without a hub id
        if revision is not None and COMMIT.fullmatch(revision):
            continue
        datasets[name] = {"revision": _commit(dataset_commit, hub_id, revision, f"datasets.{name}")}
    return {k: v for k, v in (("models", models), ("datasets", datasets)) if v}


def _commit(resolve, hub_id: str, revision: str | None, key: str) -> str:
    try:
        sha = resolve(hub_id, revision)
    except Exception as e:  # any failure names the entry that could not be pinned
        at = f" at revision {revision!r}" if revision else ""
        raise RuntimeError(
            f"{key}: could not resolve {hub_id!r}{at} on the hub ({type(e).__name__}: {e}); "
            "check the id, your network and HF_TOKEN for gated repositories"
        ) from e
    if not isinstance(sha, str) or not COMMIT.fullmatch(sha):
        raise RuntimeError(f"{key}: the hub answered {sha!r} for {hub_id!r}, not a commit sha")
    return sha


def _config_problem(config: str, err: Exception) -> str:
    """``config: what is wrong``, no traceback: the config file that does not read (missing, a folder, not text) or
    is refused by the workflow's checks (`papa.checks.ConfigError`: a misspelled key, a YAML error, an empty file)."""
    if isinstance(err, UnicodeDecodeError):
        return f"{config}: not a text (UTF-8) file ({err}): give the YAML config of the run"
    if isinstance(err, OSError) and err.strerror:
        return f"{config}: {err.strerror}: give the YAML config of the run"
    message = str(err)
    return message if message.startswith(str(config)) else f"{config}: {message}"  # several name the file already


def _out_problem(out: str, config: str) -> str | None:
    """Why ``out`` (``-o``) must not be written, or None: the config itself (the pins would replace the grid they
    pin), a folder, or an existing file that is not a pins file `main` wrote (it begins with `HEADER`): a config
    or a results file typed for the pins file's name. An empty file (left by a shell's ``>``) holds nothing to
    lose."""
    suggestion = f"e.g. -o {Path(config).with_name(Path(config).stem + '-pins.yaml')}"
    if os.path.isdir(out):
        return (
            f"-o {out} is a folder: give the pins file's path, e.g. -o {Path(out) / (Path(config).stem + '-pins.yaml')}"
        )
    if not os.path.exists(out):  # a new file (or a dangling link, replaced by the file): nothing to lose
        parent = Path(os.path.abspath(out)).parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():  # checked before the hub is asked: the write would fail after it
            return f"-o {out} lies under {parent}, which is a file, not a folder: give the pins a path, {suggestion}"
        return None
    if os.path.samefile(out, config):  # also through a link or another spelling of the path
        return (
            f"-o {out} is the config {config} itself, which the pins would replace: give the pins a file of their "
            f"own, {suggestion}"
        )
    try:
        with open(out, "rb") as f:
            start = f.read(len(HEADER))
    except OSError as e:
        return (
            f"-o {out} cannot be read ({e.strerror or e}) to check that it is an earlier pins file: give another "
            f"path, {suggestion}"
        )
    if start and start != HEADER.encode():
        return (
            f"-o {out} exists and is not a pins file papa.pin wrote (those begin with {HEADER.strip()!r}), so it is "
            f"not replaced: give a new file's path, {suggestion}, or remove {out} first"
        )
    return None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m papa.pin", description=__doc__.split("\n\n")[0])
    ap.add_argument("config", help="the workflow config whose hub models and datasets to pin")
    ap.add_argument(
        "-o",
        "--out",
        help="write the pins here, only when every entry resolved; a new file or an earlier pins file, never the "
        "config (default: standard output)",
    )
    args = ap.parse_args(argv)
    try:
        config = load_config(args.config)
    except (ConfigError, OSError, UnicodeDecodeError) as e:  # one line naming the file, no traceback
        sys.exit(f"papa.pin: {_config_problem(args.config, e)}")
    if args.out and (problem := _out_problem(args.out, args.config)):  # checked before asking the hub anything
        sys.exit(f"papa.pin: {problem}")
    try:
        pins = hub_pins(config)
    except RuntimeError as e:  # the entry that could not be pinned, and why; nothing written
        sys.exit(f"papa.pin: {e}")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = (
        f"{HEADER}{args.config}'s models and datasets, resolved {stamp} (python -m papa.pin).\n"
        f"# Use after it: snakemake --configfile {args.config} <this file>\n"
        + (yaml.safe_dump(pins, sort_keys=False) if pins else "{}\n")
    )
    if args.out:
        from .io import write_text

        try:
            write_text(args.out, text)
        except OSError as e:  # a folder not writable, a full disk: one line, the pins on standard output
            sys.stdout.write(text)
            sys.exit(f"papa.pin: -o {args.out} cannot be written ({e.strerror or e}): the pins are above; save them "
                     f"by hand or give another path")  # fmt: skip
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
