"""Project-level promises: one dependency list, the README's commands, a clean lint."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

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


def test_snakemake_lint_is_clean():
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    p = subprocess.run([snakemake, "--lint"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Congratulations" in p.stdout + p.stderr, p.stdout + p.stderr


def test_schema_dataset_keys_are_the_ones_papa_data_reads():
    from papa.data import SPEC_KEYS

    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    # plus `build`, which the workflow itself replaces with the paths of the files it builds
    assert set(schema["properties"]["datasets"]["additionalProperties"]["properties"]) == SPEC_KEYS | {"build"}
