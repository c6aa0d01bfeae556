"""Local files: CSV / TSV / JSON lines / Parquet / CoNLL readers, and mapping their labels to indices.

`load_local` reads the files a spec names (``train``, optional ``validation`` / ``test``),
picks the columns, maps label values to indices (by name, else an in-range integer; or
infers the label set from the train split), and fails on bad input with a `TaskSpecError`
that names the file, the row or line and what to change.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import logging
import lzma
import math
import os
import re
import shutil
import unicodedata
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import expand_home, process_dir, remove_dead_process_dirs
from ..spec import TASK_KINDS
from .downloads import sha256_file
from .errors import TaskSpecError, require_columns
from .registry import LABEL_SETS

log = logging.getLogger(__name__)

#: Spec keys local files take (besides those of every source, `papa.data.task.COMMON_KEYS`).
SPEC_KEYS = frozenset({
    "kind", "train", "validation", "test", "format", "text_column", "text_b_column", "label_column", "id_column",
    "labels", "tokens_column", "tags_column", "tag_column", "token_column", "separator", "header", "column_names",
})  # fmt: skip

_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "json", ".json": "json",
            ".parquet": "parquet", ".pq": "parquet", ".conll": "conll"}  # fmt: skip
#: The provenance's ``label_names_source`` of label names inferred from the train file's values (integers 0..max, or
#: sorted strings).
INFERRED = "inferred from the data"
#: The values of a spec's ``format`` (the config schema's enum) -> the reader each picks.
FORMAT_NAMES = {"csv": "csv", "tsv": "tsv", "jsonl": "json", "json": "json", "parquet": "parquet", "conll": "conll"}
#: The spec keys naming a local dataset's files, one per split (``validation``/``test``: held-out splits).
LOCAL_FILE_KEYS = ("train", "validation", "test")


def file_format(spec: dict, path: Path) -> str:
    """The reader of a local dataset's file ``path``: the spec's ``format``, else the one its name picks
    (`format_of_name`); a `TaskSpecError` for an unknown format or a name that picks none."""
    fmt = spec.get("format")
    if fmt:
        if str(fmt).lower() not in FORMAT_NAMES:
            raise TaskSpecError(f"unknown format {spec['format']!r}; use one of {', '.join(FORMAT_NAMES)}")
        return FORMAT_NAMES[str(fmt).lower()]
    named = format_of_name(path)
    if named is None:
        raise TaskSpecError(
            f'cannot tell the format of {path} from its name; set "format" to one of {", ".join(FORMAT_NAMES)}'
        )
    return named


def format_of_name(path: str | Path) -> str | None:
    """The reader a file's name picks without a ``format`` key (its last known suffix: ``x.csv.gz`` is csv), or
    None."""
    for s in reversed([s.lower() for s in Path(path).suffixes]):
        if s in _FORMATS:
            return _FORMATS[s]
    return None


def read_conll(path: str | Path, tag_column: int = -1, token_column: int = 0,
               separator: str | None = None) -> list[tuple[list[str], list[str]]]:  # fmt: skip
    """Sentences of a CoNLL column file as (tokens, tag strings).

    Token in ``token_column`` (default 0), tag in ``tag_column`` (default -1, the last
    column; CoNLL-2003: 1 = POS, 3 = NER). Columns are split on whitespace unless
    ``separator`` is given. Blank lines end sentences; ``-DOCSTART-`` lines are skipped.
    Every token line must have the same number of columns (a short line would otherwise
    take its tag from another column); at least two, so a token is never its own tag.
    Comment lines (CoNLL-U's ``# sent_id = 1``) are not skipped (``#`` is also a token):
    one of another width fails, naming it as a comment, and so does one of CoNLL-U's keys (``# sent_id``,
    ``# text``, ``# newdoc``, ``# newpar``, ``# id``) of the file's width, which would be a token ``#``.
    """
    return [(toks, tags) for toks, tags, _ in _read_conll(path, tag_column, token_column, separator)]


#: Added to a CoNLL column-count error where a line of it starts with ``#``.
_COMMENT_HINT = (
    "; line {line} starts with '#': a comment (CoNLL-U's '# sent_id = ...')? papa reads no comment lines, only "
    "token lines, blank lines and -DOCSTART-: remove them ({grep})"
)


def _comment_hint(lineno: int, text: str) -> str:
    """`_COMMENT_HINT` for line ``lineno`` (``text``), with a grep that removes it: ``'^# '`` for CoNLL-U's comments,
    the line's first word for others (OntoNotes' ``#begin document``, which ``'^# '`` left in place)."""
    word = text.split(None, 1)[0] if text.strip() else "#"
    if _DOCUMENT_LINE.match(text):  # both of OntoNotes' document lines at once ('^#end' would take #endgame too)
        grep = "grep -v -E '^#(begin|end) document([[:space:]]|$)' removes OntoNotes' document lines"
    elif word == "#":
        grep = "grep -v '^# ' removes every line starting with '# ', a token '#' among them if the file has one"
    else:
        escaped = re.sub(r"([.\[\]*^$\\])", r"\\\1", word).replace("'", "'\\''")
        grep = f"grep -v '^{escaped}' removes every line starting with {word!r}"
    return _COMMENT_HINT.format(line=lineno, grep=grep)


#: A comment line of CoNLL-U (``# sent_id = 1``, ``# text = ...``, ``# newdoc``, ``# newpar``) or of CoNLL files
#: that borrow its comments (MultiCoNER's ``# id <uuid> domain=en``): ``#``, a space, then one of those keys. One of
#: the file's width read silently as a token ``#`` with the comment's last word as its tag.
#: Any other ``# key = value`` (CoNLL-U's comment form: ``# text_en = ...``, ``# translit = ...``, ``# genre = news``,
#: ``# doc_id = 5``) is one too: a token ``#`` is never followed by a word and ``=`` in the next columns.
_COMMENT_LINE = re.compile(r"#\s+(?:(?:sent_id|text|newdoc|newpar|id|global\.columns)(?:\s|=|$)|[A-Za-z][\w.:-]*\s*=)")

#: OntoNotes' (CoNLL-2012's) document lines, ``#begin document (bc/cctv/00/cctv_0001); part 000`` and ``#end
#: document``; the latter, in a file of two columns, read silently as a token ``#end`` tagged ``document``.
_DOCUMENT_LINE = re.compile(r"#(?:begin|end) document(?:\s|$)")


def _read_conll(path, tag_column: int = -1, token_column: int = 0, separator: str | None = None,
                widths: dict | None = None):  # fmt: skip
    """`read_conll` with the line number each sentence starts at: [(tokens, tags, line)].

    ``widths`` (a dataset's files read so far: path -> (columns, first token line)) makes its lines need the width
    of the first file in it (a validation file with other columns than train: the same tag_column would name
    another column, its tags another scheme); this file's is added."""
    path = Path(path)
    sents: list[tuple[list[str], list[str], int]] = []
    toks: list[str] = []
    tags: list[str] = []
    width = first = first_text = start = comment_line = None
    other = next(iter(widths.items()), None) if widths else None
    opener = _text_opener(path)
    if opener is None:
        raise TaskSpecError(f"{path}: a CoNLL file is read as text, plain or compressed as "
                            f"{', '.join(_TEXT_OPENERS)}; decompress it")  # fmt: skip
    try:  # a zip archive is read as it opens (the other compressions as they are read: below)
        f = opener(path, "rt", encoding="utf-8-sig")  # utf-8-sig: a byte-order mark would stick to the first token
    except OSError as e:
        raise TaskSpecError(f"{path} could not be decompressed ({type(e).__name__}: {e}); fix the file, or "
                            f"decompress it") from e  # fmt: skip
    with f:
        try:
            for lineno, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if not line.strip() or line.startswith("-DOCSTART-"):
                    if toks:
                        sents.append((toks, tags, start))
                        toks, tags = [], []
                    continue
                parts = line.split(separator) if separator else line.split()
                if width is None:
                    width, first, first_text = len(parts), lineno, line
                    if other is not None and width != other[1][0]:
                        raise TaskSpecError(
                            f"{path}:{lineno} has {width} column{'s' * (width != 1)} but {other[0]}:{other[1][1]}, "
                            f"the dataset's first file, has {other[1][0]}: tag_column={tag_column} and "
                            f"token_column={token_column} would name other columns in each; give its files the same "
                            f"columns" + (_comment_hint(lineno, line) if line.startswith("#") else "")
                        )
                    if widths is not None:
                        widths[str(path)] = (width, lineno)
                    if width < 2:
                        raise TaskSpecError(
                            f"{path}:{lineno} has 1 column: a CoNLL file needs a token and a tag column per line"
                            + (_comment_hint(lineno, line) if line.startswith("#") else "")
                        )
                    positions = [c % width for c in (token_column, tag_column) if -width <= c < width]
                    if len(positions) == 2 and positions[0] == positions[1]:
                        raise TaskSpecError(
                            f"{path}:{lineno}: token_column={token_column} and tag_column={tag_column} are the same "
                            f"column of its {width}: the tags would be the tokens; set tag_column to the tag column"
                        )
                if len(parts) != width:
                    comment = next((x for x in ((first, first_text), (lineno, line)) if x[1].startswith("#")), None)
                    raise TaskSpecError(
                        f"{path}:{lineno} has {len(parts)} column{'s' * (len(parts) != 1)} but line {first} has "
                        f"{width}: every token line of a CoNLL file needs the same columns (fix the line, or set "
                        f"separator if tokens hold spaces)" + (_comment_hint(*comment) if comment else "")
                    )
                try:
                    tok, tag = parts[token_column], parts[tag_column]
                except IndexError:
                    raise TaskSpecError(
                        f"{path}:{lineno} has {len(parts)} columns but token_column={token_column}, "
                        f"tag_column={tag_column}; set tag_column to a column that exists"
                    ) from None
                if comment_line is not None:  # the first line, a comment, and this one of its width
                    raise _comment_error(path, width, *comment_line)
                if (parts[0] == "#" and _COMMENT_LINE.match(line)) or (  # of the width: a token tagged with a word
                    parts[0] in ("#begin", "#end") and _DOCUMENT_LINE.match(line)
                ):
                    comment_line = (lineno, line, tok, tag)
                    if lineno != first:  # the first line's waits for the next: one of another width is named so
                        raise _comment_error(path, width, *comment_line)
                if not toks:
                    start = lineno
                toks.append(tok)
                tags.append(tag)
        except UnicodeDecodeError as e:  # the decoder reads ahead a block: the line read last is not the bad one
            _text_lines(path)  # names the line and byte that are not UTF-8
            raise TaskSpecError(f"{path} is not UTF-8 text ({e.reason}); re-save the file as UTF-8") from None
        except (EOFError, OSError, lzma.LZMAError) as e:  # a compressed file cut short or not of its suffix's kind
            raise TaskSpecError(f"{path} could not be decompressed ({type(e).__name__}: {e}); fix the file, or "
                                f"decompress it") from e  # fmt: skip
    if comment_line is not None:
        raise _comment_error(path, width, *comment_line)
    if toks:
        sents.append((toks, tags, start))
    return sents


def _comment_error(path, width: int, lineno: int, line: str, tok: str, tag: str) -> TaskSpecError:
    """A `_COMMENT_LINE` of the file's width, which would be read as a token."""
    return TaskSpecError(f"{path}:{lineno} is a comment line ({line[:60]!r}), which has the file's {width} columns: "
                         f"it would be read as a token {tok!r} tagged {tag!r}"
                         + _comment_hint(lineno, line))  # fmt: skip


#: Suffixes of compressed text files, which `datasets` reads decompressed (their bytes are not text).
_COMPRESSED = frozenset({".gz", ".bz2", ".xz", ".zst", ".zip", ".lz4"})


def _hidden(name: str) -> bool:
    """A zip member ``datasets`` skips, as papa does: a name (or a folder on its path) starting with ``.`` or ``__``
    (macOS Finder's ``__MACOSX/._train.csv``, ``.DS_Store``)."""
    return any(part.startswith((".", "__")) for part in name.split("/") if part)


def _zip_members(path: Path) -> list[str]:
    """The files of the zip archive ``path`` that ``datasets`` reads (no folders, no `_hidden` names)."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        return [m.filename for m in z.infolist() if not m.is_dir() and not _hidden(m.filename)]


def _zip_open(path, mode: str = "rt", encoding: str | None = None, newline: str | None = None, **kw):
    """The text of a zip archive's one file (`_zip_members`; `_check_one_member` refuses more), as ``open`` gives a
    plain file's: the archive's first name may be a folder (``zip -r``) or macOS Finder's ``__MACOSX/``."""
    import zipfile

    try:
        members = _zip_members(Path(path))
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as e:  # an OSError, as the other openers' broken archives give (their readers catch it)
        raise OSError(f"not a zip archive ({e})") from e
    if len(members) != 1:
        archive.close()
        raise OSError(f"{path} holds {len(members)} files, not one")
    try:
        raw = _ZipMember(archive.open(members[0]))
    except (zipfile.BadZipFile, *_ZIP_ERRORS) as e:  # a broken local header, encrypted, an unknown method
        archive.close()
        raise OSError(f"cannot read {members[0]} in the zip archive ({type(e).__name__}: {e})") from e
    except BaseException:
        archive.close()
        raise
    return _ZipText(archive, io.BufferedReader(raw), encoding=encoding, newline=newline)


#: What zipfile raises for a member it cannot read (an encrypted one, an unsupported method, a broken deflate
#: stream; a bad CRC is its BadZipFile): `_ZipMember` makes them the OSError the other openers give.
_ZIP_ERRORS = (RuntimeError, NotImplementedError, EOFError, zlib.error)


class _ZipMember(io.RawIOBase):
    """A zip member's bytes, its read errors (`_ZIP_ERRORS`, zipfile's BadZipFile) raised as an OSError, which every
    reader of `_TEXT_OPENERS` catches (zipfile's own errors reached the user raw)."""

    def __init__(self, member):
        super().__init__()
        self._member = member

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        import zipfile

        try:
            data = self._member.read(len(buffer))
        except (zipfile.BadZipFile, *_ZIP_ERRORS) as e:
            raise OSError(f"broken zip archive ({type(e).__name__}: {e})") from e
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._member.close()
        finally:
            super().close()


class _ZipText(io.TextIOWrapper):
    """A zip member's text, closing its archive with it (`_zip_open`)."""

    def __init__(self, archive, raw, **kw):
        super().__init__(raw, **kw)
        self._archive = archive

    def close(self):
        try:
            super().close()
        finally:
            self._archive.close()


#: The compressions whose text papa reads itself (`_check_field_counts` checks such a CSV/TSV decompressed, and the
#: JSON and CoNLL readers read it); zst and lz4 are left to `datasets` (CSV, Parquet) or refused (CoNLL).
_TEXT_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zip": _zip_open}


def _text_opener(path: Path):
    """The ``open`` that reads ``path``'s text: ``open`` itself, or its compression's (`_TEXT_OPENERS`); None for a
    compression papa does not read itself (zst, lz4)."""
    return _TEXT_OPENERS.get(path.suffix.lower()) if is_compressed(path) else open


def is_compressed(path: Path) -> bool:
    """Whether the readers take the file ``path`` for compressed (its bytes are then no text to check): its last
    suffix names a compression (``train.csv.gz``). One before the last does not (``train.gz.csv``): `datasets`
    and pandas pick the compression by the last suffix, and read that file as the text it is."""
    return path.suffix.lower() in _COMPRESSED


def _key(spec: dict, key: str):
    """A column key of a local spec, or its default (`LOCAL_DEFAULTS`)."""
    return spec.get(key, LOCAL_DEFAULTS[key])


def _int_key(spec: dict, key: str) -> int:
    """An integer spec key (a CoNLL column, or its default), or a `TaskSpecError` naming it."""
    value = _key(spec, key)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise TaskSpecError(f"{key} must be a column index (an integer, -1 = the last), got {value!r}") from None


def _text_lines(path: Path) -> list[int] | None:
    """The numbers of a text file's non-blank lines, failing with the file, line and byte offset where it is not
    UTF-8; None for a compressed file (``datasets`` reads it decompressed: its bytes are not text). Lines end as
    Python's text mode ends them (``\\n``, ``\\r\\n`` or a lone ``\\r``: the CoNLL reader's lines, pandas' rows)."""
    if is_compressed(path):
        return None
    lines, lineno, offset = [], 0, 0
    with open(path, "rb") as f:
        for raw in f:  # a UTF-8 character never spans a line break (its bytes are >= 0x80)
            start = 0
            for piece, end in _line_pieces(raw):
                lineno += 1
                try:
                    text = piece.decode("utf-8")
                except UnicodeDecodeError as e:
                    at = offset + start + e.start
                    raise TaskSpecError(
                        f"{path}:{lineno} is not UTF-8 text (byte {at}: {e.reason}); re-save the file as UTF-8"
                    ) from None
                if text.lstrip("\ufeff").strip():
                    lines.append(lineno)
                start = end
            offset += len(raw)
    return lines


_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def _line_pieces(raw: bytes):
    """The lines in ``raw`` (a chunk that ``open(..., "rb")`` iterated: it ends at a ``\\n`` or the file's end), each
    as (its bytes without the break, the offset in ``raw`` after the break)."""
    start = 0
    for m in _LINE_BREAK.finditer(raw):
        yield raw[start : m.start()], m.end()
        start = m.end()
    if start < len(raw):
        yield raw[start:], len(raw)


def _check_field_counts(path: Path, split: str, fmt: str, header: bool, names: list[str] | None,
                        reads=frozenset()) -> int | None:  # fmt: skip
    """Every record of a CSV/TSV file has one field per column: the header's, or ``column_names``; returns that
    number of columns (None where the file is not checked, below).

    pandas takes a first field more than the names as the row index: with one extra field on every line (a
    trailing separator, a source column, an unquoted comma), each column would silently shift by one. A file
    compressed as gzip, bzip2 or xz is checked decompressed (as pandas reads it; its lines are the decompressed
    text's); one of another compression, a broken archive or one that holds no UTF-8 text is left to the reader,
    which names the file."""
    opener = _text_opener(path)
    if opener is None:
        return None
    try:  # read once: a broken archive (or one holding no UTF-8 text) is left to the reader, which names the file
        return _count_fields(opener, path, split, fmt, header, names, reads)
    except (UnicodeDecodeError, EOFError, OSError, lzma.LZMAError):
        if opener is open:
            raise
    return None


def _count_fields(opener, path: Path, split: str, fmt: str, header: bool, names, reads) -> int | None:
    """`_check_field_counts` over the text ``opener`` reads from ``path``."""
    dialect = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == "tsv" else {"delimiter": ","}
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))  # a long text is one field, as pandas reads it
    expected = len(names) if names else None
    what = f"column_names names {expected} ({', '.join(map(str, names))})" if names else ""
    _check_unique_names(names, f"the {split} file {path}: column_names")
    with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
        reader, start = csv.reader(f, **dialect), 1
        for record in reader:
            line, start = start, reader.line_num + 1
            if not record or (len(record) == 1 and not record[0].strip()):  # a blank line: the reader skips it
                continue
            if header:  # the header row: it names the columns, or column_names renames it
                header = False
                if expected is not None and len(record) != expected:
                    raise TaskSpecError(f"the {split} file {path}: its header (line {line}) has "
                                        f"{_fields(len(record))}, and {what}: name every column, in order")  # fmt: skip
                if names is None:  # a column the spec reads named twice (others, and empty names, pandas numbers)
                    _check_unique_names(record, f"the {split} file {path}: its header (line {line})", reads)
                expected, what = len(record), what or f"the header (line {line}) names {len(record)}"
                continue
            if expected is None:  # no header, no names: the first line sets the count
                expected, what = len(record), f"line {line}, the first, has {len(record)}"
                continue
            if len(record) != expected:
                effect = ("read the first field as a row label and shift every column by one"
                          if len(record) == expected + 1 else "refuse the file or misread its columns"
                          if len(record) > expected else "leave the last columns empty")  # fmt: skip
                fix = ("a tab or a line break (\\r, \\n) inside a text cannot be quoted in TSV (quotes are text): "
                       "remove it, or write the file as CSV" if fmt == "tsv"
                       else "quote a text with a comma or a line break (\\r, \\n) in it")  # fmt: skip
                raise TaskSpecError(f"the {split} file {path}, line {line} has {_fields(len(record))}, where {what}: "
                                    f"pandas would {effect}. Give every line one field per column ({fix}; no "
                                    f"trailing separator), or name every column in column_names")  # fmt: skip
    return expected


def _fields(n: int) -> str:
    """``n`` fields, in words (one field, 2 fields)."""
    return "one field" if n == 1 else f"{n} fields"


def _check_one_member(path: Path, split: str) -> None:
    """A zip archive holds one file (folders and `_hidden` names aside, as datasets skips them): datasets reads every
    file in it as rows of the split (a README beside the data became rows); a broken archive is left to the reader,
    which names the file."""
    if path.suffix.lower() != ".zip":
        return
    import zipfile

    try:
        members = _zip_members(path)
    except (OSError, zipfile.BadZipFile):
        return
    if len(members) != 1:
        shown = ", ".join(members[:5]) + (", ..." if len(members) > 5 else "")
        raise TaskSpecError(f"the {split} file {path} is a zip archive of {len(members)} files ({shown or 'none'}): "
                            f"its rows would be every file's, one after the other; zip the {split} file alone, one "
                            f"archive per split")  # fmt: skip


def _check_unique_names(names, where: str, reads=None) -> None:
    """A `TaskSpecError` where a CSV/TSV header (or ``column_names``) names a column twice (of a header, one of the
    columns ``reads``): pandas reads the second as ``<name>.1``, so which of the two is the text or the label would
    be a guess (Parquet and JSON refuse it)."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names or (), 1):
        if name in seen and (reads is None or name in reads):
            raise TaskSpecError(f"{where} names column {name!r} twice (fields {seen[name]} and {i}): pandas would "
                                f"read the second as {name + '.1'!r} and which one is meant is a guess; give each "
                                f"column its own name")  # fmt: skip
        seen[name] = i


def _nested_records(columns: dict[str, list]) -> tuple[str, int] | None:
    """(key, count) of a one-row JSON read whose value under a key is a list of objects: the records of a file
    written as ``{"data": [...]}``, which the reader takes for one row with a column "data" (where the row lacks
    the text column: one record with a list of objects, such as spans, is a record)."""
    for key, values in columns.items():
        value = values[0] if values else None
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return key, len(value)
    return None


#: datasets' Arrow copy of a local file goes to ``papa-hf-datasets-<host>-<pid>-XXXXXXXX`` in the temporary folder.
_HF_CACHE_PREFIX = "papa-hf-datasets-"


def _hf_cache() -> Path:
    """A new folder for datasets' Arrow copy of a local file (the caller removes it once the rows are read), after
    removing those that killed processes of this host left (SIGKILL, the out-of-memory killer: no clean-up ran; a
    copy of the whole file each)."""
    for folder in remove_dead_process_dirs(_HF_CACHE_PREFIX):
        log.info("removed %s, the copy of a local file that a killed process left", folder)
    return process_dir(_HF_CACHE_PREFIX)


def _parquet_rows(path: Path) -> int | None:
    """The rows a Parquet file's footer counts; None where it cannot be read (the reader then says why)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception:  # noqa: BLE001
        return None


def _local_records(spec: dict, split: str, path: Path, kind: str, widths: dict | None = None) -> dict[str, list]:
    """Columns of one local file as python lists (no label mapping yet); ``widths``: the CoNLL files' column counts
    so far (`_read_conll`)."""
    fmt = file_format(spec, path)
    if fmt == "conll":
        if kind != "token":
            raise TaskSpecError(f"format 'conll' is for token tasks; set kind to 'token' (got {kind!r})")
        sents = _read_conll(path, _int_key(spec, "tag_column"), _int_key(spec, "token_column"),
                            spec.get("separator"), widths)  # fmt: skip
        return {
            "tokens": [s[0] for s in sents],
            "tags": [s[1] for s in sents],
            "_format": ["conll"],
            "_where": [f"line {s[2]}" for s in sents],
        }
    import datasets

    kw: dict = {}
    builder = fmt
    if fmt in ("csv", "tsv"):
        builder = "csv"
        kw["keep_default_na"] = False  # "NA", "null", "None" are text, not missing values
        if fmt == "tsv":
            kw["delimiter"] = "\t"
            kw["quoting"] = csv.QUOTE_NONE  # GLUE-style TSV: quotes are text
        if spec.get("header") is False:
            kw["header"] = None
        if spec.get("column_names"):
            if "header" not in spec:  # pandas would take the first line as data; a header row would become a row
                raise TaskSpecError(
                    f'column_names given for {path}: say whether its first line is a header, "header": false (every '
                    f'line is data) or "header": true (the header row is read, and renamed by column_names)'
                )
            kw["column_names"] = list(spec["column_names"])
            if spec["header"]:
                kw["header"] = 0  # the header row renamed, not read as data (pandas' default with names)
        if kind == "sequence":  # read as written, not as pandas guesses: a text "007" or "3.10" became "7", "3.1"
            columns = _text_cell_columns(spec)
            kw["converters"] = {c: str for c in columns}
            if kw.get("header", 0) is None and not spec.get("column_names"):  # pandas numbers the columns 0, 1, ...
                kw["converters"].update({int(c): str for c in columns if c.isascii() and c.isdigit()})
    if path.stat().st_size == 0:
        raise TaskSpecError(f"the {split} file {path} is empty: it has no rows")
    _check_one_member(path, split)
    if fmt == "parquet" and _parquet_rows(path) == 0:  # datasets would fail on it with "BatchSize must be > 0"
        raise TaskSpecError(f"the {split} file {path} is empty: it has no rows")
    lines = _text_lines(path) if fmt != "parquet" else None  # also where each row sits (blank lines are skipped)
    if fmt in ("csv", "tsv"):
        reads = {_key(spec, k) for k in COLUMN_KEYS.get(kind, {})} | {spec.get("id_column")}
        width = _check_field_counts(path, split, fmt, kw.get("header", 0) is not None, spec.get("column_names"),
                                    frozenset(str(c) for c in reads if c is not None))  # fmt: skip
        if kind == "sequence" and width:  # every column as text: datasets types 10,000 rows at a time, and a column
            # no key names, numbers in the first 10,000 rows and "n/a" later, failed the whole file
            kw["converters"] = {i: str for i in range(width)}
    how = f"format {fmt!r} is " + ("the spec's format" if spec.get("format") else f"read from the name {path.name!r}")
    if fmt == "json":  # the json module reads it, not datasets (`_json_records`: its chunks rewrote values)
        records = _json_records(path, split, how)
        out, features, num_rows = {c: [r.get(c) for r in records] for c in _keys_in_order(records)}, {}, len(records)
    else:
        out, features, num_rows = _read_with_datasets(builder, path, split, fmt, how, kw)
    needed = _key(spec, "tokens_column") if kind == "token" else _key(spec, "text_column")
    if fmt == "json" and num_rows == 1 and needed not in out and (nested := _nested_records(out)):
        raise TaskSpecError(f"the {split} file {path} is one JSON object whose key {nested[0]!r} holds {nested[1]} "
                            f"records: papa reads JSON Lines (one object per line) or a JSON array of objects; write "
                            f"the records so (pandas: pd.DataFrame(obj[{nested[0]!r}]).to_json(path, "
                            f"orient='records', lines=True))")  # fmt: skip
    # integer columns with label names (a ClassLabel feature, e.g. a Parquet file saved by `datasets`) are read as
    # those names: their integers are positions in the file's own list, not in the task's
    out["_names"] = {}
    for col, feature in features.items():
        inner = getattr(feature, "feature", None)  # a list of labels (token tags)
        label = feature if isinstance(feature, datasets.ClassLabel) else inner
        if isinstance(label, datasets.ClassLabel):
            name = lambda v, f=label: None if v is None or v < 0 else f.int2str(v)  # noqa: E731 (-1: no label)
            out[col] = [name(v) for v in out[col]] if label is feature else [[name(v) for v in vs] for vs in out[col]]
            out["_names"][col] = list(label.names)
    out["_format"] = [fmt]
    if lines is not None and fmt in ("csv", "tsv") and kw.get("header", 0) is not None:
        lines = lines[1:]  # the header row
    if lines is not None and len(lines) != num_rows:
        lines = None  # rows and lines not one to one (a quoted field across lines): rows alone
    out["_where"] = [f"row {i + 1}" + (f" (line {lines[i]})" if lines else "") for i in range(num_rows)]
    label_col = _key(spec, "label_column")
    if kind == "sequence" and fmt in ("csv", "tsv") and label_col in out:
        out[label_col] = _typed_labels(out[label_col], f"column {label_col!r} of the {split} file {path}",
                                       out["_where"])  # fmt: skip
    return out


def _read_with_datasets(builder: str, path: Path, split: str, fmt: str, how: str, kw: dict):
    """(columns, features, rows) of a CSV/TSV or Parquet file as ``datasets`` reads it, or a `TaskSpecError` with the
    reader's own error and ``how`` the format was chosen."""
    import datasets

    # datasets' Arrow copy of the file goes to a folder of its own, removed once the rows are read: a cache kept per
    # file content (never stale) kept a full copy of every version of every file read, for good
    hf_cache = _hf_cache()
    try:
        ds = datasets.load_dataset(builder, data_files={split: str(path)}, split=split, cache_dir=str(hf_cache), **kw)
    except Exception as e:  # the builder's errors, whatever their class
        shutil.rmtree(hf_cache, ignore_errors=True)
        if "corresponds to no data" in str(e):
            raise TaskSpecError(f"the {split} file {path} is empty: it has no rows") from e
        cause = _reader_error(e)  # datasets wraps the reader's error (a ragged CSV row) in DatasetGenerationError
        raise _unreadable(path, split, fmt, how, cause) from e
    try:
        return ds.to_dict(), ds.features, ds.num_rows
    finally:
        del ds
        shutil.rmtree(hf_cache, ignore_errors=True)


def _unreadable(path: Path, split: str, fmt: str, how: str, cause: BaseException) -> TaskSpecError:
    return TaskSpecError(f"could not read the {split} file {path} as {fmt} ({how}): {type(cause).__name__}: "
                         f"{str(cause).rstrip('.')}. Fix the file, or set format (csv, tsv, jsonl, parquet, conll) "
                         f"or header to match it")  # fmt: skip


class _DuplicateKey(ValueError):
    pass


def _object(pairs: list) -> dict:
    """A JSON object, refusing a key written twice (the json module keeps the last without a word)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"the key {key!r} twice in one object")
        out[key] = value
    return out


def _open_json_text(path: Path):
    """``path``'s text, decompressed as the readers read it (`_TEXT_OPENERS`; zst and lz4 through fsspec, as
    datasets opens them)."""
    opener = _text_opener(path)
    if opener is not None:
        return opener(path, "rt", encoding="utf-8-sig")
    import fsspec

    return fsspec.open(str(path), "rt", compression="infer", encoding="utf-8-sig").open()


def _json_records(path: Path, split: str, how: str) -> list[dict]:
    """A JSON Lines file's records (or a JSON file's array of objects, or its one object), compressed or not, as
    the json module reads them: every value as written. ``datasets`` read JSON Lines 10 MiB at a time, and a chunk
    where a column mixed types (a number among texts, ``true`` among labels) came back JSON-encoded (``'"café"'``
    for ``café``, every text of the chunk) or failed the file; ``1`` beside ``"01"`` became one spelling.
    JSON Lines are read a line at a time (the file's text is never held whole); a line that is no JSON object
    fails, naming it (counted from 1), as does a key written twice; ``how``: how the format was chosen."""

    def unreadable(e):
        return _unreadable(path, split, "json", how, e)

    records: list[dict] = []
    array = None  # a first line that is a whole JSON array (pandas' to_json(orient="records")): the file, if alone
    try:
        with _open_json_text(path) as f:  # universal newlines: \n, \r\n, \r (U+2028 may sit in a JSON string)
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line, object_pairs_hook=_object)
                    why = f"a JSON {_json_type(value)} there"
                except _DuplicateKey as e:
                    raise TaskSpecError(f"the {split} file {path}, line {lineno}, has {e}: give each field one "
                                        f"key") from None  # fmt: skip
                except json.JSONDecodeError as e:
                    value, why = None, str(e)
                if isinstance(value, dict) and array is None:
                    records.append(value)
                elif records:
                    raise TaskSpecError(f"the {split} file {path}, line {lineno}, is not a JSON object ({why}): fix "
                                        f"or remove the line (JSON Lines: one object per line)")  # fmt: skip
                elif isinstance(value, list) and array is None:
                    array = value
                else:  # no JSON Lines: one JSON value over lines (an array, an object), or broken
                    array = value = line = None
                    return _json_document(path, split, unreadable)
    except (OSError, UnicodeDecodeError, EOFError, ValueError, lzma.LZMAError) as e:
        if isinstance(e, TaskSpecError):
            raise
        raise unreadable(e) from e
    if array is not None:
        return _array_records(array, path, split)
    if not records:
        raise TaskSpecError(f"the {split} file {path} is empty: it has no rows")
    return records


def _json_type(value) -> str:
    """The JSON name of a parsed value's type, for a message."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _json_document(path: Path, split: str, unreadable) -> list[dict]:
    """The records of a file that holds one JSON value: an array of objects, or one object (`_json_records`)."""
    try:
        with _open_json_text(path) as f:
            whole = json.load(f, object_pairs_hook=_object)
    except _DuplicateKey as e:
        raise TaskSpecError(f"the {split} file {path} has {e}: give each field one key") from None
    except json.JSONDecodeError as e:
        raise unreadable(e) from e
    if isinstance(whole, dict):
        return [whole]
    if not isinstance(whole, list):
        raise unreadable(ValueError(f"the file is one JSON {_json_type(whole)}, not records"))
    return _array_records(whole, path, split)


def _array_records(whole: list, path: Path, split: str) -> list[dict]:
    """A JSON array's items as records, or a `TaskSpecError` naming the first that is no object (or an empty array)."""
    for i, r in enumerate(whole):
        if not isinstance(r, dict):
            raise TaskSpecError(f"the {split} file {path}: item {i + 1} of its JSON array is a JSON "
                                f"{_json_type(r)}, not an object: papa reads an array of objects "
                                f"(records)")  # fmt: skip
    if not whole:
        raise TaskSpecError(f"the {split} file {path} is empty: it has no rows")
    return whole


def _keys_in_order(records: list[dict]) -> list[str]:
    """Every key of ``records``, in the order they first occur (a record without one reads None there)."""
    return list(dict.fromkeys(k for r in records for k in r))


def _text_cell_columns(spec: dict) -> list[str]:
    """The columns of a sequence task's CSV/TSV file read as text (`_typed_labels` types the labels)."""
    keys = (("text_column", "text"), ("text_b_column", None), ("label_column", "label"), ("id_column", None))
    return [c for key, default in keys if isinstance(c := spec.get(key, default), str)]


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _integer_label(v) -> bool:
    """An integer label: typed (JSON, Parquet, a CSV column `_typed_labels` typed) or written (a CSV cell)."""
    if isinstance(v, str):
        return _INTEGER.fullmatch(v.strip()) is not None
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _number(text: str) -> bool:
    """Whether pandas would read ``text`` as a number, "inf" too (Python's float also takes "1_0" and other
    digits; "nan" pandas keeps as text here: no NA values)."""
    try:
        return text.isascii() and "_" not in text and not math.isnan(float(text))
    except ValueError:
        return False


def _text_integers(values: list, where: str, rows: list[str] | None) -> list | None:
    """``values`` as ints where every filled one is an integer written as text (a CSV cell, JSON's ``"0"``, a Parquet
    string column; missing ones kept), else None. "01" beside "1", one integer written two ways, is refused while
    still text (`_check_one_spelling`)."""
    filled = [v for v in values if not _is_missing(v)]
    if not filled or not all(isinstance(v, str) and _integer_label(v) for v in filled):
        return None
    _check_one_spelling(values, where, rows)
    return [v if _is_missing(v) else int(v) for v in values]


def _typed_labels(values: list, where: str, rows: list[str]) -> list:
    """A CSV/TSV label column read as text, typed as pandas types a whole column: integers when every filled cell
    is one, numbers when every one is a number (a score: `_infer_label_names` refuses it), booleans, else the
    text. Where pandas made the whole column float for one ``1.0`` among integer labels (every label then read
    ``0.0``/``1.0``, and a message named the first row), the cell that is no integer fails, naming its row."""
    if not all(isinstance(v, str) for v in values):  # typed by the reader already (a column no converter reached)
        return values
    filled = [(i, v.strip()) for i, v in enumerate(values) if not _is_missing(v)]
    if not filled:
        return values
    if (typed := _text_integers(values, where, rows)) is not None:
        return typed
    integers = [i for i, v in filled if _integer_label(v)]
    if all(_number(v) for _, v in filled):
        if integers:
            odd, first = next((i, v) for i, v in filled if not _integer_label(v)), integers[0]
            raise TaskSpecError(f"{where}, {rows[odd[0]]} has the label {odd[1]!r} among integer labels (e.g. "
                                f"{rows[first]}: {values[first].strip()!r}): write it as an integer, or as the name "
                                f"of a class")  # fmt: skip
        return [v if _is_missing(v) else float(v) for v in values]
    if all(v.lower() in ("true", "false") for _, v in filled):  # pandas' booleans, in any case
        return [v if _is_missing(v) else v.strip().lower() == "true" for v in values]
    return values


def _reader_error(e: BaseException) -> BaseException:
    """The reader's own error under ``datasets``' wrappers (DatasetGenerationError from a pandas ParserError)."""
    seen = {id(e)}
    while type(e).__module__.startswith("datasets") and (inner := e.__cause__ or e.__context__) is not None:
        if id(inner) in seen:
            break
        seen.add(id(inner))
        e = inner
    return e


def _check_cells(values: list, column: str, key: str, where: str, rows: list[str], list_valued: bool) -> None:
    """Each cell of ``column`` is one value (text, a label, an id), or, for ``list_valued`` token columns, a list
    of them: a string there would be read a character at a time, a list in a text column written as "['a', 'b']"."""

    def scalar(v) -> bool:
        return v is None or isinstance(v, (str, int, float, bool, np.generic))

    for i, v in enumerate(values):
        if list_valued and not (isinstance(v, (list, tuple)) and all(scalar(x) for x in v)):
            shown = f"the {type(v).__name__} {v!r}"[:80] if v is not None else "nothing"
            raise TaskSpecError(f"{where}, {rows[i]}: column {column!r} ({key}) holds {shown}, not a list of "
                                f"values, one per token: write it as a list (JSON lines: [\"The\", \"cat\"]), "
                                f"or use format conll for a column file")  # fmt: skip
        if not list_valued and not scalar(v):
            shown = f"{v!r}"[:80]
            raise TaskSpecError(f"{where}, {rows[i]}: column {column!r} ({key}) holds a {type(v).__name__} "
                                f"({shown}), not one value: join it into one string, or name another column "
                                f"as {key}")  # fmt: skip


def _is_missing(v) -> bool:
    """An empty cell (a label or a text): None, NaN, or a blank string (CSV cells are read as text)."""
    return v is None or (isinstance(v, float) and np.isnan(v)) or (isinstance(v, str) and not v.strip())


def _map_labels(values: list, labels: list[str], where: str, rows: list[str] | None = None,
                listed: bool = True) -> list[int]:  # fmt: skip
    """Map raw label values to indices into ``labels``.

    A value matches a label by name (``str(value)``, surrounding spaces ignored) first; an
    integer that names no label (or its digits, in a column read as text because another cell
    is not a number) is taken as an index if it is in range; anything else is an error that
    names the file, the row (``rows[i]``) and the value. ``listed``: the labels come from the
    config or a known task (else they were inferred from the train split, and the message says so).
    """
    _check_one_spelling(values, where, rows)  # 1 beside "01" or "+1" in one JSON column
    index = {str(n).strip(): i for i, n in enumerate(labels)}
    # listed labels that are integers ("-1", "0", "+1"): an integer value matches one by value, never by position
    # (+1 is the integer 1, which as a position was the second label, "0")
    by_int: dict[int, int] = {}
    for i, n in enumerate(labels):
        if _integer_label(n):
            if (k := int(str(n).strip())) in by_int:
                raise TaskSpecError(f"the labels {list(labels)} name the integer {k} twice ({labels[by_int[k]]!r} and "
                                    f"{n!r}): give each class one name")  # fmt: skip
            by_int[k] = i
    out = []
    for i, v in enumerate(values):
        at = f"{where}, {rows[i]}" if rows else where
        if _is_missing(v):
            raise TaskSpecError(f"{at} has no label (empty cell); fill it in or remove the row")
        said = str(v).strip()
        if said in index:
            out.append(index[said])
        elif by_int and _integer_label(v) and int(said) in by_int:
            out.append(by_int[int(said)])
        elif listed and not by_int and (position := _position(v, len(labels))) is not None:
            out.append(position)
        else:
            near = next((str(n) for n in labels if _fold(str(n)) == _fold(said)), None)
            hint = f" (it differs only {_how_differ(said, near)} from {near!r}: write it so)" if near else ""
            if listed:
                fix = "fix the data" if hint else 'add it to "labels" or fix the data'
                raise TaskSpecError(f"label {v!r} at {at} is not in labels {list(labels)}{hint}; {fix}")
            raise TaskSpecError(
                f"label {v!r} at {at} never occurs in the train split, whose labels are {list(labels)}{hint}: it "
                f"would become a new class and shift the others. List every label in the dataset's config "
                f'("labels": [...]) or fix the data'
            )
    return out


def _fold(label: str) -> str:
    """``label`` as one class is read whatever its case, spacing, invisible marks (zero-width characters, soft
    hyphens, direction marks) and canonical Unicode form (``é`` composed or not): two labels that fold alike are
    most likely one written two ways (`_infer_label_names` refuses them as two classes). Distinct letters stay
    distinct (``Maße``/``Masse``, ``σ``/``ς``; ``résumé``/``resume``)."""
    text = unicodedata.normalize("NFC", label).translate(_INVISIBLE)
    return " ".join(text.split()).lower()


#: Marks that print as nothing (zero-width spaces and joiners, soft hyphen, direction marks, the BOM), for `_fold`.
_INVISIBLE = dict.fromkeys(
    [0x00AD, 0x034F, 0x061C, 0x180E, 0x200B, 0x200C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2060, 0x2070),
     0xFE0E, 0xFE0F, 0xFEFF]  # the zero-width joiner (U+200D) stays: it makes one emoji of several
)  # fmt: skip


def _how_differ(a: str, b: str) -> str:
    """How two labels that `_fold` alike differ, for a message."""
    if a.lower() == b.lower():
        return "in case"
    return "in spacing, invisible characters or Unicode form (e.g. an accent composed or not)"


def _check_one_spelling(values: list, where: str, rows: list[str] | None) -> None:
    """A `TaskSpecError` naming both rows where one integer label is written two ways ("01" or "+1" beside "1"):
    read as integers they are one class, where they may have been two codes."""
    spelt: dict[int, tuple[str, str]] = {}  # each integer label's first spelling, and where
    for i, v in enumerate(values):
        if _is_missing(v) or not _integer_label(v):
            continue
        said, row = str(v).strip(), rows[i] if rows else f"row {i + 1}"
        first = spelt.setdefault(int(said), (said, row))
        if first[0] != said:
            raise TaskSpecError(f"{where}, {row} has the label {said!r} and {first[1]} {first[0]!r}: both read as the "
                                f"integer {int(said)}, one class; write each label one way (if they are two classes, "
                                f"give them names that are no integers)")  # fmt: skip


def _position(v, n: int) -> int | None:
    """``v`` as a position among ``n`` listed labels (an integer, or its digits in a column read as text), else None."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v) if 0 <= v < n else None
    if isinstance(v, str) and (said := v.strip()).isascii() and said.isdigit():
        return int(said) if int(said) < n else None
    return None


#: Above this share of a split's rows without text, a local file fails: the text column is most likely the wrong one.
MAX_DROPPED_SHARE = 0.5


def _check_dropped(dropped: list[str], n: int, cols: list[str], where: str) -> None:
    """Rows without text (``dropped``: where they sit) are dropped with a warning naming the first of them;
    more than `MAX_DROPPED_SHARE` of a split's ``n`` fails (a misnamed column in most rows of a JSON file, say)."""
    if not dropped:
        return
    what = f"{len(dropped)} of {n} rows of the {where} have no text in column {' or '.join(map(repr, cols))}"
    examples = dropped[:3]
    if len(dropped) > MAX_DROPPED_SHARE * n:
        raise TaskSpecError(f"{what} (e.g. {', '.join(examples)}): more than half, so the column is likely the "
                            f"wrong one (text_column / text_b_column), or the keys differ from row to row")  # fmt: skip
    log.warning("%s; they are dropped (e.g. %s)", what, ", ".join(examples))


def _infer_label_names(values: list, where: str = "the train split", rows: list[str] | None = None) -> list[str]:
    """Label names when the spec gives none, from the train split's values: integers 0..max (typed, or every value
    an integer written as text) as "0".."max" (a gap fails: those classes would never occur), else sorted unique
    strings."""
    for i, v in enumerate(values):
        if _is_missing(v):
            raise TaskSpecError(f"{where}, {rows[i] if rows else f'row {i + 1}'} has no label (empty cell); "
                                f"fill it in or remove the row")  # fmt: skip
    vals = list(values)
    if (typed := _text_integers(vals, where, rows)) is not None:  # JSON's "0", a Parquet string column: checked and
        vals = typed  # ordered as the integers they are, as a CSV column of the same cells
    numbers = [(i, float(v)) for i, v in enumerate(vals)
               if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)]  # fmt: skip
    # scores, typed (JSON, Parquet, a CSV column of numbers) or written as text in every row (JSON strings "3.2")
    scores = numbers if numbers else [(i, float(v)) for i, v in enumerate(vals) if isinstance(v, str) and _number(v)]
    for i, v in scores if numbers or len(scores) == len(vals) else ():
        if not v.is_integer():
            raise TaskSpecError(f"{where}, {rows[i] if rows else f'row {i + 1}'} has the label {vals[i]!r}, which is "
                                f"no class: papa's probes classify (a regression target such as STS-B's score cannot "
                                f"be probed); give class labels, or list them under the dataset's labels")  # fmt: skip
    if any(v == 0 for _, v in numbers):  # -1 beside 0 and 1: GLUE's mark of an unlabeled (test) row, not a class
        for i, v in numbers:
            if v < 0:
                raise TaskSpecError(f"{where}, {rows[i] if rows else f'row {i + 1}'} has the label {vals[i]!r} beside "
                                    f"label 0: a negative label marks an unlabeled example (GLUE's test files use "
                                    f"-1), and as a class it would shift the others (label 0 would be class 1); drop "
                                    f"those rows, or list the labels under the dataset's labels")  # fmt: skip
    if (first := next((i for i, v in enumerate(vals) if _integer_label(v)), None)) is not None:
        if (odd := next((i for i, v in enumerate(vals) if not _integer_label(v)), None)) is not None:
            raise TaskSpecError(f"{where}, {rows[odd] if rows else f'row {odd + 1}'} has the label {vals[odd]!r} "
                                f"among integer labels (e.g. {rows[first] if rows else f'row {first + 1}'}: "
                                f"{vals[first]!r}): as a class of its own it is most likely a typo (1.0, true, "
                                f"1x); fix it, or list every label under the dataset's labels")  # fmt: skip
    flags = [i for i, v in enumerate(vals) if isinstance(v, (bool, np.bool_))]  # JSON's true among "pos", "neg"
    odd = next((i for i, v in enumerate(vals) if not isinstance(v, (bool, np.bool_))), None) if flags else None
    if odd is not None:
        raise TaskSpecError(f"{where}, {rows[flags[0]] if rows else f'row {flags[0] + 1}'} has the label "
                            f"{vals[flags[0]]!r} (a boolean) among labels that are no booleans (e.g. "
                            f"{rows[odd] if rows else f'row {odd + 1}'}: {vals[odd]!r}): as a class of its own "
                            f"({str(vals[flags[0]])!r}) it is most likely a typo; fix it, or list every label under "
                            f"the dataset's labels")  # fmt: skip
    if vals and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals):
        uniq = sorted(set(int(v) for v in vals))
        if uniq[0] >= 0:
            # the first gaps, found along the labels (a label of 4e9 made a set of billions)
            missing = [m for a, b in zip([-1, *uniq], uniq) for m in range(a + 1, min(b, a + 6))][:5]
            if missing:
                i = next(k for k, v in enumerate(vals) if int(v) > missing[0])
                n = uniq[-1] + 1 - len(uniq)
                missing = f"{missing}" if n <= len(missing) else f"{n} classes ({', '.join(map(str, missing))}, ...)"
                raise TaskSpecError(
                    f"integer labels of {where} skip {missing} (e.g. {rows[i] if rows else f'row {i + 1}'} has "
                    f"{int(vals[i])}): those classes would never occur. List the labels in the dataset's config "
                    f'("labels": [...]) or renumber them 0..{len(uniq) - 1}'
                )
            return [str(i) for i in range(uniq[-1] + 1)]
        return [str(i) for i in uniq]
    uniq = sorted(set(str(v).strip() for v in vals))  # " neg" and "neg" are one label
    folded: dict[str, str] = {}
    for label in uniq:  # "Pos" beside "pos", "café" composed or not: one class written two ways, as two classes
        if (other := folded.setdefault(_fold(label), label)) != label:
            i, k = (next(n for n, v in enumerate(vals) if str(v).strip() == x) for x in (label, other))
            raise TaskSpecError(f"{where}, {rows[i] if rows else f'row {i + 1}'} has the label {label!r} and "
                                f"{rows[k] if rows else f'row {k + 1}'} {other!r}, which differ only "
                                f"{_how_differ(label, other)}: as two "
                                f"classes one is most likely a typo; write them one way, or list every label under "
                                f"the dataset's labels")  # fmt: skip
    if "O" in uniq:  # BIO tag sets: "O" first by convention
        uniq.remove("O")
        uniq.insert(0, "O")
    return uniq


#: Local spec keys only one task kind reads (`load_local`).
KIND_KEYS = {
    "sequence": frozenset({"text_column", "text_b_column", "label_column", "id_column"}),
    "token": frozenset({"tokens_column", "tags_column", "tag_column", "token_column"}),
}
#: Local spec keys only some file formats read, by format (``conll`` reads its columns by position, the others
#: by name; a key in none of these is read in every format).
FORMAT_KEYS = {
    "conll": frozenset({"tag_column", "token_column", "separator"}),
    "csv": frozenset({"header", "column_names", "tokens_column", "tags_column"}),
    "tsv": frozenset({"header", "column_names", "tokens_column", "tags_column"}),
    "json": frozenset({"tokens_column", "tags_column"}),
    "parquet": frozenset({"tokens_column", "tags_column"}),
}


def unread_local_keys(name: str, spec: dict, kind: str | None, fmt: str | None) -> list[tuple[str, str]]:
    """(key, why) for each key of a local spec that its task kind (`KIND_KEYS`) or file format (`FORMAT_KEYS`)
    does not read, and for ``labels`` beside ``label_column: null``: accepted and ignored, they would mean something
    the loading then does not do. ``kind``, ``fmt``: None where unknown (not checked). A null value is the key's
    default, harmless."""
    out = []
    for key in sorted(k for k, v in spec.items() if v is not None):
        owner = next((k for k, keys in KIND_KEYS.items() if key in keys), None)
        readers = [f for f, keys in FORMAT_KEYS.items() if key in keys]
        if owner is not None and kind in KIND_KEYS and owner != kind:
            out.append((key, f"is read by {owner} tasks only, and {name!r} is a {kind} task: remove it (or set "
                             f"kind: {owner})"))  # fmt: skip
        elif fmt is not None and readers and fmt not in readers:
            out.append((key, f"is read by format {', '.join(readers)} only, and {name!r} is read as {fmt} (its "
                             f"format key, else its train file's suffix): remove it, or set format"))  # fmt: skip
    if kind == "sequence" and "label_column" in spec and spec["label_column"] is None and spec.get("labels"):
        out.append(("labels", f"names classes, and label_column: null makes {name!r} an unlabeled corpus: remove "
                              f"labels, or name the label column"))  # fmt: skip
    return out


#: The column keys of each task kind with their defaults (`load_local`); in a CoNLL file the token and tag
#: columns are positions (-1 = the last).
COLUMN_KEYS = {
    "sequence": {"text_column": "text", "text_b_column": None, "label_column": "label"},
    "token": {"tokens_column": "tokens", "tags_column": "tags"},
    "conll": {"token_column": 0, "tag_column": -1},
}
#: Every column key with its default (the keys are distinct across the kinds).
LOCAL_DEFAULTS = {key: default for keys in COLUMN_KEYS.values() for key, default in keys.items()}


def shared_columns(name: str, spec: dict, kind: str | None, fmt: str | None) -> list[tuple[str, str]]:
    """(key, why) for a column key of a local spec that is empty, or names the same column as another
    (``label_column: text``, ``text_b_column`` = ``text_column``, ``tags_column: tokens``, CoNLL ``tag_column`` =
    ``token_column``): the labels would be the texts, a pair one sentence twice, the tags the words.
    ``id_column`` may name any column. A CoNLL file's negative position and a non-negative one are compared once
    the file's width is known (`_read_conll`)."""
    group = "conll" if kind == "token" and fmt == "conll" else kind
    if group not in COLUMN_KEYS:
        return []
    given = {k: _key(spec, k) for k in COLUMN_KEYS[group]}
    given = {k: v for k, v in given.items() if v is not None}
    out = [(k, "is empty: name a column of the files") for k, v in given.items() if v == ""]
    given = {k: v for k, v in given.items() if v != ""}
    seen: dict = {}
    for key, column in given.items():
        if column in seen:
            out.append((key, f"names column {column!r}, which {seen[column]} names too ({name!r}): give each of "
                             f"{', '.join(COLUMN_KEYS[group])} its own column"))  # fmt: skip
        else:
            seen[column] = key
    return out


def missing_pair_column(name: str, spec: dict) -> str | None:
    """Why a local copy of a known sentence-pair dataset (MRPC, MNLI) without ``text_b_column`` would be wrong: it
    takes the registry's labels, and would read one sentence of each pair. None when it is not that."""
    from .registry import DATASETS

    known = DATASETS.get(name)
    text_b = getattr(getattr(known, "source", None), "text_b", None)
    kind = spec.get("kind") or (known.kind if known else None)
    if not text_b or kind != "sequence" or spec.get("text_b_column"):
        return None
    return (f"local task {name!r} takes the labels of the known {name} task, a sentence-pair task, and gives no "
            f"text_b_column: set it to the column of the second sentence (the hub's is {text_b!r}), or give the "
            f"dataset another name to read single sentences")  # fmt: skip


def _headers_differ(where: str, column: str, train_header: list[str], split: str, header: list[str]) -> str:
    """The message for a split file without a column the train file has: its header, not a key, is to change."""
    return (f"the {where} has no column {column!r}, which the train file has: the two files' headers differ "
            f"(train: {train_header}; {split}: {header}); give the {split} file the train file's header")  # fmt: skip


def header_problems(spec: dict, files: dict[str, Path]) -> list[str]:
    """Why a sequence task's CSV/TSV files with a header, Parquet or JSON Lines files cannot give the columns the spec
    names (``text_column``, ``text_b_column``, ``label_column``, ``id_column``), from each file's header line,
    Parquet schema or first MiB of records alone (`_json_lines_keys`; cheap enough for the config check before any
    job; the job reads the rows): a column the header lacks, naming the key to change, or, where the train file has
    it, that the two headers differ. Other formats, compressed files, ``header: false`` and ``column_names`` are
    left to the job."""
    if spec.get("header") is False or spec.get("column_names"):
        return []
    import pandas as pd

    keys = {"text_column": _key(spec, "text_column"), "text_b_column": _key(spec, "text_b_column"),
            "label_column": _key(spec, "label_column"), "id_column": spec.get("id_column")}  # fmt: skip
    headers: dict[str, list[str]] = {}
    for split, path in files.items():
        try:
            fmt = file_format(spec, path)
        except TaskSpecError:
            return []  # the format check names it
        if fmt == "parquet":  # its schema, from the file's footer (a local Parquet file passed to the job: review AU)
            try:
                import pyarrow.parquet as pq

                headers[split] = [str(c) for c in pq.read_schema(path).names]
            except (OSError, ValueError):  # pyarrow's errors are OSErrors or ValueErrors: the job names them
                pass
            continue
        if fmt == "json" and not is_compressed(path):
            if (keys_read := _json_lines_keys(path)) is not None:
                headers[split] = keys_read
            continue
        if fmt not in ("csv", "tsv") or is_compressed(path):
            continue
        # the column names as the job's reader (datasets' csv builder, pandas) gives them: an empty name is
        # "Unnamed: 0", a repeated one "label.1"
        dialect = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == "tsv" else {"delimiter": ","}
        try:
            headers[split] = [str(c) for c in pd.read_csv(path, nrows=0, encoding="utf-8", **dialect).columns]
        except (OSError, UnicodeDecodeError, ValueError, csv.Error):  # pandas' errors are ValueErrors
            continue  # the job names what is wrong with the file
    problems = []
    for split, header in headers.items():
        for key, column in keys.items():
            if column is None or column in header:
                continue
            if split != "train" and column in headers.get("train", ()):
                where = f"{split} file {files[split]}"
                problems.append(_headers_differ(where, column, headers["train"], split, header))
            else:
                hint = _separator_hint(header, files[split], spec)
                problems.append(f"column {column!r} ({key}) is not in the header of the {split} file {files[split]} "
                                f"({header}): set {key} to one of them{hint}")  # fmt: skip
            break
    return problems


def _separator_hint(header: list[str], path: Path, spec: dict) -> str:
    """Where a header read as one column holds the other format's separator (a tab-separated file named ``.csv``, or
    read under ``format: csv``; a comma-separated one under ``tsv``), what to set instead: a hint for the message."""
    if len(header) != 1:
        return ""
    read_as = file_format(spec, path)
    for sep, fmt, name in (("\t", "tsv", "tabs"), (",", "csv", "commas")):
        if sep in header[0] and read_as != fmt:
            given = "the dataset's format" if spec.get("format") else f"its name ({path.suffix})"
            return (
                f", or, as the header reads as one column holding {name}, read the file as {fmt}: it is read as "
                f"{read_as} from {given}; set format: {fmt}, which applies to every file of the dataset, or name "
                f"the file .{fmt}"
            )
    return ""


def _json_lines_keys(path: Path, peek: int = 1 << 20) -> list[str] | None:
    """The keys of a JSON Lines file's records in its first ``peek`` bytes (every key any of them has, in the order
    first met: the columns its job reads, `_keys_in_order`), or None where those lines are no JSON Lines of objects
    (a JSON array, a pretty-printed file, a broken line: the job reads it and names what is wrong)."""
    try:
        with open(path, "rb") as f:
            head = f.read(peek)
    except OSError:
        return None
    lines = head.splitlines()
    if len(head) == peek and lines:
        lines = lines[:-1]  # the last line may be cut at the peek
    records = []
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:  # UnicodeDecodeError too
            return None
        if not isinstance(record, dict):
            return None
        records.append(record)
    return _keys_in_order(records) or None


def no_rows(path: Path, spec: dict, peek: int = 1 << 20) -> str | None:
    """Why a local split file holds no examples, as far as its first MiB tells (its job reads it whole and names
    any other problem): no bytes, only blank lines, or a CSV/TSV read with a header that has only that line
    (`papa.checks`' config check of each local split file)."""
    if path.stat().st_size == 0:
        return "is empty (0 bytes)"
    try:
        fmt = file_format(spec, path)
    except Exception:  # noqa: BLE001 - an unknown format: the format check names it
        return None
    if fmt == "parquet" or is_compressed(path):
        return None  # binary or compressed (as the readers read them): its job reads the rows
    lines = 0
    with open(path, "rb") as f:
        for raw in f.read(peek).splitlines():
            lines += bool(raw.strip())
            if lines >= 2:
                return None
    if path.stat().st_size > peek:
        return None
    if lines == 0:
        return "holds only blank lines"
    if fmt in ("csv", "tsv") and spec.get("header", True) is not False:
        return "holds only its header line"
    return None


#: The share of validation rows also in the train file above which `load_local` warns (scores partly on training data).
HELD_OUT_WARN = 0.5


def _check_held_out(splits: dict, prov_files: dict, kind: str) -> None:
    """A validation file that is the train file (same path or content), or whose rows mostly also occur in train
    (`HELD_OUT_WARN`), is warned of: every probe would be scored on rows it trained on. (The workflow's config
    check refuses the first, `papa.checks`; a notebook may mean it, as a check of fitting.)"""
    train, val = prov_files["train"], prov_files.get("validation")
    if val is None:
        return
    if train["path"] == val["path"] or train["sha256"] == val["sha256"]:
        same = "is" if train["path"] == val["path"] else "holds the same bytes as"
        log.warning("the validation file %s %s the train file: every probe is scored on the rows it trained on; give "
                    "a held-out validation file, or leave validation out (validation_fraction then carves one out "
                    "of train)", val["path"], same)  # fmt: skip
        return
    if kind == "sequence":
        key = lambda df: list(zip(df["text"], df["text_b"].fillna("")))  # noqa: E731
    else:
        key = lambda df: [tuple(t) for t in df["tokens"]]  # noqa: E731
    seen = set(key(splits["train"]))
    rows = key(splits["validation"])
    shared = sum(r in seen for r in rows)
    if rows and shared / len(rows) > HELD_OUT_WARN:
        log.warning("%d of the %d validation rows (%.0f%%) also occur in the train file %s: the probes are scored "
                    "largely on rows they trained on; give a held-out validation file", shared, len(rows),
                    100 * shared / len(rows), train["path"])  # fmt: skip


def load_local(name: str, spec: dict, cache_dir: Path) -> tuple[str, list[str], dict, dict]:
    """(kind, label names, splits, provenance) of a task read from local files; spec keys: `SPEC_KEYS`.

    For a known dataset name the registry's kind and label set are the defaults (``kind``
    and ``labels`` in the spec override them); otherwise the labels are inferred from the
    train split. See `papa.data.load_task` for the keys.
    """
    known_kind, known_labels = LABEL_SETS.get(name, (None, None))
    kind = spec.get("kind") or known_kind
    if kind not in TASK_KINDS:
        kinds = " or ".join(f'"{k}"' for k in TASK_KINDS)
        raise TaskSpecError(f'local task {name!r} needs "kind": {kinds} (got {spec.get("kind")!r})')
    if "train" not in spec or not spec["train"]:
        raise TaskSpecError(f'local task {name!r} needs a "train" file (and usually a "validation" file)')
    for k in LOCAL_FILE_KEYS:
        if spec.get(k) and not isinstance(spec[k], (str, os.PathLike)):
            raise TaskSpecError(f"local task {name!r}: {k} must be one file's path, got {spec[k]!r} (a list of files: "
                                f"concatenate them into one)")  # fmt: skip
    if why := missing_pair_column(name, spec):
        raise TaskSpecError(why)
    fmt = file_format(spec, Path(spec["train"]))
    unread = unread_local_keys(name, spec, kind, fmt) + shared_columns(name, spec, kind, fmt)
    if unread:
        raise TaskSpecError("; ".join(f"local task {name!r}: {key} {why}" for key, why in unread))
    files = {k: expand_home(spec[k]) for k in LOCAL_FILE_KEYS if spec.get(k)}
    for split, p in files.items():
        if not p.is_file():
            raise TaskSpecError(f"{split} file {str(p)!r} of local task {name!r} does not exist")

    labels = spec.get("labels")
    if labels is not None:
        if not isinstance(labels, (list, tuple)) or not labels:
            raise TaskSpecError(f'"labels" must be a non-empty list of label names, got {labels!r}')
        labels = [str(x) for x in labels]
        if len(set(labels)) != len(labels):
            twice = sorted({x for x in labels if labels.count(x) > 1})
            raise TaskSpecError(f'"labels" names {", ".join(map(repr, twice))} more than once ({labels}): list each '
                                f"label once")  # fmt: skip
    elif known_labels:
        labels = list(known_labels)
    listed = labels is not None

    raw: dict[str, dict] = {}
    rows: dict[str, list[str]] = {}  # where each record sits in its file ("row 3 (line 4)", "line 17")
    names: dict[str, dict[str, list[str]]] = {}  # a file's own label names per column (ClassLabel features)
    prov_files = {}
    widths: dict = {}  # a CoNLL dataset's files need one column count (`_read_conll`)
    for split, p in files.items():
        rec = _local_records(spec, split, p, kind, widths)
        names[split] = rec.pop("_names", {})
        fmt = rec.pop("_format")[0]
        rows[split] = rec.pop("_where", None) or [f"row {i + 1}" for i in range(len(next(iter(rec.values()), [])))]
        raw[split] = rec
        prov_files[split] = {"path": str(p.resolve()), "sha256": sha256_file(p), "format": fmt}

    prov: dict = {"files": prov_files}
    splits: dict[str, pd.DataFrame] = {}
    if kind == "sequence":
        text_col, text_b_col, label_col = (_key(spec, k) for k in ("text_column", "text_b_column", "label_column"))
        id_col = spec.get("id_column")
        unlabeled = label_col is None
        if unlabeled:
            labels = []
        for split, rec in raw.items():
            cols = list(rec)
            where = f"{split} file {prov_files[split]['path']}"
            keys = {c: k for c, k in ((id_col, "id_column"), (label_col, "label_column"),
                                      (text_b_col, "text_b_column"), (text_col, "text_column")) if c}  # fmt: skip
            needed = [c for c in (text_col, text_b_col, label_col, id_col) if c]
            missing = [c for c in needed if c not in cols]
            if split != "train" and "train" in raw and missing and all(c in raw["train"] for c in missing):
                # the train file has them: its header is right, this file's differs (no key to change)
                raise TaskSpecError(_headers_differ(where, missing[0], list(raw["train"]), split, cols))
            require_columns(needed, cols, where, keys)
            if not rec[text_col]:
                raise TaskSpecError(f"the {where} is empty: it has no rows")
            for col in (c for c in (text_col, text_b_col, label_col, id_col) if c):
                _check_cells(rec[col], col, keys[col], where, rows[split], list_valued=False)
        text_cols = [text_col] + ([text_b_col] if text_b_col else [])  # a pair needs both sentences
        has_text = {split: [not any(_is_missing(rec[c][i]) for c in text_cols) for i in range(len(rec[text_col]))]
                    for split, rec in raw.items()}  # fmt: skip
        for split, ok in has_text.items():  # before the labels are inferred: most rows without text is a wrong column
            where = f"{split} file {prov_files[split]['path']}"
            if not any(ok):
                raise TaskSpecError(f"the {where} has no row with text in column {' and '.join(map(repr, text_cols))}")
            _check_dropped([rows[split][i] for i, kept in enumerate(ok) if not kept], len(ok), text_cols, where)
        if not unlabeled and labels is None:  # the train file's own names, else from its values: must be trainable
            # inferred from the rows kept: a class only rows without text had (a footer row, a blank line's stray
            # label) became a class no example has, and shifted the ids of those after it (neg, neutral, pos)
            kept = [i for i, ok in enumerate(has_text["train"]) if ok]
            labels = names["train"].get(label_col) or _infer_label_names(
                [raw["train"][label_col][i] for i in kept],
                f"column {label_col!r} of the train file {prov_files['train']['path']}",
                [rows["train"][i] for i in kept])  # fmt: skip
        n_dropped = 0
        for split, rec in raw.items():
            where = f"{split} file {prov_files[split]['path']}"
            text = rec[text_col]
            keep = [i for i, ok in enumerate(has_text[split]) if ok]
            n_dropped += len(text) - len(keep)
            ids = [str(rec[id_col][i]) for i in keep] if id_col else [f"{name}-{split}-{i}" for i in keep]
            if unlabeled:
                y = [-1] * len(keep)
            else:
                y = _map_labels(
                    [rec[label_col][i] for i in keep],
                    labels,
                    f"column {label_col!r} of the {where}",
                    [rows[split][i] for i in keep],
                    listed,
                )
            tb = None
            if text_b_col:
                tb = [str(rec[text_b_col][i]) for i in keep]
            splits[split] = pd.DataFrame({"id": ids, "text": [str(text[i]) for i in keep], "text_b": tb, "label": y})
        prov.update({"text_column": text_col, "text_b_column": text_b_col, "label_column": label_col,
                     "n_dropped": n_dropped,
                     "dropped_reason": ("empty text" + (" or text_b" if text_b_col else "")) if n_dropped else None,
                     })  # fmt: skip
    else:
        tok_col, tag_col = _key(spec, "tokens_column"), _key(spec, "tags_column")
        for split, rec in raw.items():
            where = f"{split} file {prov_files[split]['path']}"
            require_columns([tok_col, tag_col], list(rec), where, {tag_col: "tags_column", tok_col: "tokens_column"})
            if not rec[tok_col]:
                raise TaskSpecError(f"the {where} is empty: it has no sentences")
            for col, key in ((tok_col, "tokens_column"), (tag_col, "tags_column")):
                _check_cells(rec[col], col, key, where, rows[split], list_valued=True)
            if not any(len(words) for words in rec[tok_col]):  # nothing to tag: its labels would be none
                raise TaskSpecError(f"the {where} holds {len(rec[tok_col])} sentence(s) and no token in column "
                                    f"{tok_col!r} (tokens_column): check the file and the column")  # fmt: skip
        # where each tag sits: its sentence (the file's row or line) and word
        at = {split: [f"sentence {k + 1} ({rows[split][k]}), word {j + 1}" for k, s in enumerate(rec[tag_col])
                      for j in range(len(s))] for split, rec in raw.items()}  # fmt: skip
        if labels is None:  # the train file's own tag names, else from its tags: a tag must be trainable
            labels = names["train"].get(tag_col) or _infer_label_names(
                [t for s in raw["train"][tag_col] for t in s],
                f"the tags of the train file {prov_files['train']['path']}",
                at["train"],
            )
        for split, rec in raw.items():
            where = f"{split} file {prov_files[split]['path']}"
            toks = []
            for k, (tk, tg) in enumerate(zip(rec[tok_col], rec[tag_col])):
                if len(tk) != len(tg):
                    raise TaskSpecError(f"sentence {k + 1} ({rows[split][k]}) of the {where} has {len(tk)} tokens "
                                        f"but {len(tg)} tags: give each token one tag")  # fmt: skip
                for j, t in enumerate(tk):  # "None" would be tagged as a word; an empty word has no sub-word to tag
                    if _is_missing(t):
                        raise TaskSpecError(f"sentence {k + 1} ({rows[split][k]}) of the {where}: word {j + 1} "
                                            f"({tok_col!r}, tokens_column) is {'null' if t is None else 'empty'}, "
                                            f"and its tag {tg[j]!r} would be lost or given to it: fill the word in, "
                                            f"or remove it with its tag")  # fmt: skip
                toks.append([str(t) for t in tk])
            # the split's tags mapped at once (per sentence, the label tables were built again for each one)
            flat = iter(_map_labels([t for tg in rec[tag_col] for t in tg], labels, f"the tags of the {where}",
                                    at[split], listed))  # fmt: skip
            tags = [[next(flat) for _ in tg] for tg in rec[tag_col]]
            ids = [f"{name}-{split}-{i}" for i in range(len(toks))]
            splits[split] = pd.DataFrame({"id": ids, "tokens": toks, "tags": tags})
        prov.update({"tokens_column": tok_col, "tags_column": tag_col, "n_dropped": 0})
        if any(pf["format"] == "conll" for pf in prov_files.values()):
            prov["conll"] = {"token_column": _int_key(spec, "token_column"), "tag_column": _int_key(spec, "tag_column")}
    if "validation" in splits:
        _check_held_out(splits, prov_files, kind)
    if spec.get("labels") is not None:
        prov["label_names_source"] = "spec"
    elif known_labels:
        prov["label_names_source"] = "papa.data.LABEL_SETS"
    elif names["train"].get(label_col if kind == "sequence" else tag_col):
        prov["label_names_source"] = "the train file's label names"
    else:
        prov["label_names_source"] = INFERRED
    return kind, list(labels), splits, prov
