"""What can go wrong with task data: the three errors, and the two spec checks several modules share."""

from __future__ import annotations

from ..io import is_integer


class DataUnavailableError(RuntimeError):
    """The data cannot be obtained here (hub or package index unreachable, download failed)."""


class DataIntegrityError(RuntimeError):
    """A downloaded or extracted file does not match its pinned sha256 (or is malformed)."""


class TaskSpecError(ValueError):
    """The task spec or the input files are wrong; the message says what to change."""


def require_columns(needed: list[str], available: list[str], where: str, keys: dict | None = None) -> None:
    """Fail if a column is missing; ``keys`` maps column -> the spec key that names it."""
    for c in needed:
        if c not in available:
            hint = f"; set {keys[c]} to one of them" if keys and c in keys else ""
            if not isinstance(c, str) and str(c) in available:  # a YAML 1 for the column pandas names "1"
                hint = f"; column names are text: write {keys[c] if keys and c in keys else 'it'} as {str(c)!r}"
            raise TaskSpecError(f"column {c!r} not found in {where}; available columns: {list(available)}{hint}")


def positive_int(spec: dict, key: str, default=None) -> int | None:
    """``spec[key]`` (or ``default`` where it is unset or null) as a positive int, None when both are; anything
    else is a `TaskSpecError`."""
    v = spec.get(key)
    v = default if v is None else v
    if v is None:
        return None
    if not is_integer(v) or v < 1:
        raise TaskSpecError(f"{key} must be a positive integer, got {v!r}")
    return int(v)
