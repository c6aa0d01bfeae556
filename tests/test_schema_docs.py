"""The config's documentation is complete: every key of the config schema says what it does (its
``description``), and data/README.md ("Local files", which README.md says has every key) names every key
a local dataset spec takes."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
DATA_README = ROOT / "data/README.md"

#: Keywords whose value is one subschema, a list of them, or a mapping name -> subschema (JSON Schema 2020-12).
ONE = ("additionalProperties", "items", "contains", "propertyNames", "if", "then", "else", "not")
MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
NAMED = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas")
#: The subschemas that document a key of the config (or a reusable definition): each needs a description.
#: Branches (if/then/else, anyOf, ...) and array items are parts of their key's schema, described there.
DOCUMENTED = ("properties", "patternProperties", "definitions", "$defs", "additionalProperties")


def _undescribed(node, path: str = "") -> list[str]:
    """Dotted paths (``datasets.<name>.test``, ``definitions.resource.threads``) of the subschemas under
    ``node``, at every depth, that document a key (`DOCUMENTED`) and have no non-empty description."""
    if not isinstance(node, dict):
        return []
    found = []

    def visit(keyword: str, sub, where: str) -> None:
        if keyword in DOCUMENTED and isinstance(sub, dict):
            text = sub.get("description")
            if not (isinstance(text, str) and text.strip()):
                found.append(where)
        found.extend(_undescribed(sub, where))

    join = (lambda name: f"{path}.{name}") if path else (lambda name: name)
    for keyword in NAMED:
        prefix = f"{keyword}." if keyword in ("definitions", "$defs") else ""
        for name, sub in (node.get(keyword) or {}).items():
            visit(keyword, sub, join(prefix + (f"<{name}>" if keyword == "patternProperties" else name)))
    for keyword in ONE:
        sub = node.get(keyword)
        label = "<name>" if keyword == "additionalProperties" else "[]" if keyword == "items" else None
        visit(keyword, sub, join(label) if label else path)
    for keyword in MANY:
        for sub in node.get(keyword) or []:
            visit(keyword, sub, path)
    return found


def test_every_schema_key_has_a_description():
    schema = yaml.safe_load(SCHEMA.read_text())
    missing = _undescribed(schema)
    assert not missing, f"{len(missing)} key(s) of {SCHEMA.relative_to(ROOT)} without a description: " + ", ".join(
        missing
    )


def test_undescribed_keys_are_found_at_every_depth():
    """The walk itself: a key is reported under properties, additionalProperties, patternProperties,
    if/then branches, array items and definitions."""
    schema = {
        "description": "root",
        "definitions": {"block": {"properties": {"x": {"type": "integer"}}}},
        "properties": {
            "named": {
                "description": "d",
                "additionalProperties": {"properties": {"leaf": {"type": "string"}}},
                "patternProperties": {"^a": {"description": "d", "if": {}, "then": {"properties": {"b": {}}}}},
            },
            "listed": {"description": "d", "items": {"properties": {"c": {"description": " "}}}},
        },
    }
    assert sorted(_undescribed(schema)) == sorted([
        "definitions.block",
        "definitions.block.x",
        "named.<name>",
        "named.<name>.leaf",
        "named.<^a>.b",
        "listed.[].c",
    ])  # fmt: skip


def _section(text: str, heading: str) -> str:
    """The text of the ``## heading`` section of a Markdown file, up to the next heading of its level."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"no section '## {heading}'"
    return match.group(1)


def test_data_readme_names_every_local_spec_key():
    from papa.data.task import COMMON_KEYS, SOURCE_KEYS

    section = _section(DATA_README.read_text(), "Local files")
    keys = sorted(COMMON_KEYS | SOURCE_KEYS["local"])
    missing = [k for k in keys if f"`{k}`" not in section and f'"{k}"' not in section]
    assert not missing, f"data/README.md's 'Local files' section does not name the local spec key(s) {missing}"
