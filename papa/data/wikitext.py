"""Wikipedia text: the wiki-markup cleaner (`wiki_paragraphs`) and packing sentences into chunks.

A few regexes strip templates, tables, refs, file and category links, HTML and bold/italic
from one article's wikitext, and drop the text after a "See also" / "References" style
heading; `sentence_chunks` then packs a paragraph's sentences into chunks of at most
``chunk_words`` words. The MediaWiki XML dump itself is read in `papa.data.packages`.
"""

from __future__ import annotations

import html
import re

_WIKI_STOP_SECTIONS = {
    "see also", "references", "external links", "further reading", "notes", "bibliography",
    "sources", "citations", "footnotes", "notes and references", "works cited",
}  # fmt: skip
_RE_COMMENT = re.compile(r"<!--.*?-->", re.S)
_RE_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref\s*>", re.S | re.I)
_RE_DROP_TAGS = re.compile(
    r"<(math|gallery|timeline|imagemap|code|pre|nowiki|score|syntaxhighlight|source|chem|hiero)\b[^>]*>.*?</\1\s*>",
    re.S | re.I,
)
_RE_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_RE_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_RE_LINK = re.compile(r"\[\[([^\[\]]*)\]\]")
_RE_EXT_LINK_LABEL = re.compile(r"\[(?:https?:|ftp:)?//[^\s\]]+\s+([^\]]*)\]")
_RE_EXT_LINK = re.compile(r"\[(?:https?:|ftp:)?//[^\]]*\]")
_RE_BARE_URL = re.compile(r"https?://\S+")
_RE_QUOTES = re.compile(r"'{2,}")
_RE_HEADING = re.compile(r"^(=+)\s*(.*?)\s*\1\s*$")
_RE_SPACE = re.compile(r"[ \t\u00a0]+")
#: Where a sentence ends: the space after . ! ? and up to three closing quotes or brackets, which stay with the
#: sentence they close (a split consumed them: 'He said "Go." Then' lost its closing quote), before an upper-case
#: letter or digit (or an opening quote or bracket and one).
SENTENCE_BREAK = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"')\]])|(?<=[.!?][\"')\]]{2})|(?<=[.!?][\"')\]]{3}))\s+(?=[\"'(\[]?[A-Z0-9])"
)
_LINK_DROP_PREFIX = re.compile(r"^\s*:?\s*(file|image|category|media|wikipedia|wp|template|help|portal|"
                               r"[a-z]{2,3}(-[a-z]+)?)\s*:", re.I)  # fmt: skip


def _resolve_link(m: re.Match) -> str:
    inner = m.group(1)
    if _LINK_DROP_PREFIX.match(inner):
        return ""
    return inner.split("|")[-1] if "|" in inner else inner


def _repeat_sub(pattern: re.Pattern, repl, text: str, limit: int = 50) -> str:
    for _ in range(limit):
        new = pattern.sub(repl, text)
        if new == text:
            break
        text = new
    return text


def wiki_paragraphs(wikitext: str) -> list[str]:
    """Plain-text paragraphs of one article's wikitext (markup, tables, refs, lists of links removed).

    Stops at the first "See also" / "References" / "External links" style section.
    """
    t = html.unescape(wikitext)
    t = _RE_COMMENT.sub("", t)
    t = _RE_REF.sub("", t)
    t = _RE_DROP_TAGS.sub("", t)
    t = _repeat_sub(_RE_TEMPLATE, "", t)
    t = _RE_REF.sub("", t)
    # Tables ({| ... |}, possibly nested): drop whole lines inside them.
    lines, depth = [], 0
    for line in t.split("\n"):
        s = line.strip()
        if s.startswith("{|"):
            depth += 1
            continue
        if depth:
            if s.startswith("|}"):
                depth -= 1
            continue
        lines.append(line)
    t = "\n".join(lines)
    t = _repeat_sub(_RE_LINK, _resolve_link, t)
    t = _RE_EXT_LINK_LABEL.sub(r"\1", t)
    t = _RE_EXT_LINK.sub("", t)
    t = _RE_BARE_URL.sub("", t)
    t = _RE_TAG.sub("", t)
    t = _RE_QUOTES.sub("", t)
    t = t.replace("{{", "").replace("}}", "").replace("[[", "").replace("]]", "")
    paras = []
    for line in t.split("\n"):
        s = line.strip()
        h = _RE_HEADING.match(s)
        if h:
            if h.group(2).strip().lower() in _WIKI_STOP_SECTIONS:
                break
            continue
        if not s or s.startswith(("|", "!", "{", "}", "__")):
            continue
        s = s.lstrip("*#:;").strip()
        s = _RE_SPACE.sub(" ", s)
        s = re.sub(r"\(\s*[,;]?\s*\)", "", s)  # "( )" left where a template was
        s = re.sub(r"\s+([,.;:])", r"\1", s)
        s = _RE_SPACE.sub(" ", s).strip()
        if s:
            paras.append(s)
    return paras


def sentence_chunks(paragraph: str, chunk_words: int) -> list[str]:
    """Greedy packing of a paragraph's sentences into chunks of at most ``chunk_words`` words."""
    out, cur, n = [], [], 0
    for sent in SENTENCE_BREAK.split(paragraph):
        words = sent.split()
        while len(words) > chunk_words:  # one very long sentence: cut it into word windows
            if cur:
                out.append(" ".join(cur))
                cur, n = [], 0
            out.append(" ".join(words[:chunk_words]))
            words = words[chunk_words:]
        if n + len(words) > chunk_words and cur:
            out.append(" ".join(cur))
            cur, n = [], 0
        if words:
            cur.append(" ".join(words))
            n += len(words)
    if cur:
        out.append(" ".join(cur))
    return out
